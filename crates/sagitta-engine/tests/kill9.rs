//! Real-process crash test: a child process ingests with wait=true and reports every
//! acknowledged batch on stdout; the parent SIGKILLs it at random moments, 50 times, and
//! after every kill reopens the collection and checks that every acknowledged point is
//! there, intact, and that no batch is half-applied within a shard. The child also seals its
//! write buffers into HNSW segments every 40 batches, so kills land inside seals too.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_engine::{Collection, CollectionConfig, Distance, Point, PointId};
use sagitta_storage::fs::OsFileSystem;

const CHILD_DIRECTORY: &str = "SAGITTA_KILL9_DIRECTORY";
const CHILD_START: &str = "SAGITTA_KILL9_START";
const DIM: usize = 32;
const BATCH: u64 = 10;
const SHARDS: usize = 2;

fn vector_for(id: u64) -> Vec<f32> {
    (0..DIM as u64)
        .map(|j| ((id * 7 + j * 3) % 101) as f32 - 50.0)
        .collect()
}

#[test]
#[ignore = "child of kill9_never_loses_acknowledged_writes; runs only when spawned by it"]
fn kill9_child() {
    let (Ok(directory), Ok(start)) = (std::env::var(CHILD_DIRECTORY), std::env::var(CHILD_START))
    else {
        return;
    };
    let collection = Collection::open(&OsFileSystem, Path::new(&directory)).unwrap();
    let mut first: u64 = start.parse().unwrap();
    let mut stdout = std::io::stdout().lock();
    loop {
        let points: Vec<Point> = (first..first + BATCH)
            .map(|id| Point {
                id: PointId::Number(id),
                vector: vector_for(id),
                payload: Some(format!(r#"{{"id":{id}}}"#)),
            })
            .collect();
        collection.upsert(points, true).unwrap();
        writeln!(stdout, "acked {first}").unwrap();
        stdout.flush().unwrap();
        first += BATCH;
        // Seal now and then, so kills also land inside seals (segment, tombstone and log
        // files, manifest swap).
        if (first / BATCH).is_multiple_of(40) {
            collection.optimize(&OsFileSystem).unwrap();
        }
    }
}

fn temporary_directory() -> PathBuf {
    let directory = std::env::temp_dir().join(format!("sagitta-kill9-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

#[test]
fn kill9_never_loses_acknowledged_writes() {
    let directory = temporary_directory();
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Dot,
        shard_count: SHARDS,
    };
    drop(Collection::create(&OsFileSystem, &directory, config).unwrap());
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let mut acknowledged: Vec<u64> = Vec::new();
    let mut next_start = 0u64;
    for iteration in 0..50 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "kill9_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIRECTORY, &directory)
            .env(CHILD_START, next_start.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.gen_range(10..120)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let mut output = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut output)
            .unwrap();
        let acked_now: Vec<u64> = output
            .lines()
            .filter_map(|line| line.strip_prefix("acked "))
            .map(|first| first.parse().unwrap())
            .collect();
        acknowledged.extend(&acked_now);

        let collection = Collection::open(&OsFileSystem, &directory).unwrap();
        let present: HashSet<u64> = collection
            .points()
            .into_iter()
            .map(|point| {
                let PointId::Number(id) = point.id else {
                    panic!("uuid")
                };
                assert_eq!(
                    point.vector,
                    vector_for(id),
                    "iteration {iteration}: id {id}"
                );
                assert_eq!(point.payload.unwrap(), format!(r#"{{"id":{id}}}"#));
                id
            })
            .collect();
        for first in &acknowledged {
            for id in *first..first + BATCH {
                assert!(
                    present.contains(&id),
                    "iteration {iteration}: acked id {id} lost"
                );
            }
        }
        // per shard, a batch is one log record: all of its points or none
        let shard_of = |id: u64| PointId::Number(id).routing_hash() % SHARDS as u64;
        let max_present = present.iter().copied().max().unwrap_or(0);
        let mut batch = 0;
        while batch <= max_present {
            for shard in 0..SHARDS as u64 {
                let ids: Vec<u64> = (batch..batch + BATCH)
                    .filter(|id| shard_of(*id) == shard)
                    .collect();
                let count = ids.iter().filter(|id| present.contains(id)).count();
                assert!(
                    count == 0 || count == ids.len(),
                    "iteration {iteration}: batch {batch} half-applied in shard {shard}"
                );
            }
            batch += BATCH;
        }
        next_start = if present.is_empty() {
            0
        } else {
            (max_present / BATCH + 1) * BATCH
        };
    }
    eprintln!(
        "{} batches acknowledged across 50 kills",
        acknowledged.len()
    );
    assert!(
        acknowledged.len() >= 10,
        "the child acknowledged only {} batches in 50 runs",
        acknowledged.len()
    );
    std::fs::remove_dir_all(&directory).unwrap();
}
