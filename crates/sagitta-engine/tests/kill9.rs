//! Real-process crash test: a child process performs every write kind (upsert, delete by id
//! and by filter, set / overwrite / delete-keys / clear payload, payload index creation)
//! with wait=true and reports each acknowledged operation on stdout, while a second thread
//! of the child runs the optimizer and the indexer under a small policy (so points are in
//! the buffer, in a joined buffer graph, in a frozen buffer being sealed, in segments and
//! in segments being merged). The parent SIGKILLs it at random moments and after every kill
//! reopens the collection and checks every field of every point against a model: the state
//! must be the acknowledged operations, plus possibly the one in flight.
//!
//! Operation `n` is a function of `n` alone (its own seeded generator), so the parent knows
//! what the child did from the indexes it acknowledged.
//!
//! The same runs on a collection of disk segments with tiny partitions: its seals append
//! to a segment (splitting and dissolving partitions), and its merges rebuild them.

mod common;

use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{differences, engine_state, Operation, State};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_engine::{
    Collection, CollectionConfig, Distance, OptimizerPolicy, PointId, SegmentKindName,
    StorageConfig,
};
use sagitta_storage::fs::OsFileSystem;

const CHILD_DIRECTORY: &str = "SAGITTA_KILL9_DIRECTORY";
const CHILD_START: &str = "SAGITTA_KILL9_START";
const DIM: usize = 32;
const SHARDS: usize = 2;
const IDS: u64 = 600;
const KILLS: usize = 40;

/// Operation `index` of the sequence.
fn operation(index: u64) -> Operation {
    let mut rng = ChaCha8Rng::seed_from_u64(index);
    let mut version = index * 1_000;
    Operation::random(&mut rng, &mut version, IDS, DIM)
}

fn small_policy() -> OptimizerPolicy {
    OptimizerPolicy {
        seal_points: 40,
        seal_idle: Duration::from_millis(20),
        vacuum_min_deleted: 8,
        vacuum_fraction: 0.2,
        max_segments: 3,
        retry_after_error: Duration::ZERO,
        index_min_rows: 8,
    }
}

#[test]
#[ignore = "child of kill9_never_loses_acknowledged_writes; runs only when spawned by it"]
fn kill9_child() {
    let (Ok(directory), Ok(start)) = (std::env::var(CHILD_DIRECTORY), std::env::var(CHILD_START))
    else {
        return;
    };
    let collection = Collection::open(&OsFileSystem, Path::new(&directory)).unwrap();
    collection.set_policy(small_policy());
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                collection.index_buffers(16);
                collection.maintain(&OsFileSystem).unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let mut stdout = std::io::stdout().lock();
        for index in start.parse::<u64>().unwrap().. {
            operation(index).perform(&collection, &OsFileSystem, true);
            writeln!(stdout, "acked {index}").unwrap();
            stdout.flush().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
}

fn temporary_directory(name: &str) -> PathBuf {
    let directory =
        std::env::temp_dir().join(format!("sagitta-kill9-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

#[test]
fn kill9_never_loses_acknowledged_writes() {
    kill9_run("hnsw", StorageConfig::default(), KILLS);
}

#[test]
fn kill9_never_loses_acknowledged_writes_to_disk_segments() {
    let storage = StorageConfig {
        segment_kind: SegmentKindName::Disk,
        partition_size: 8,
        ..StorageConfig::default()
    };
    kill9_run("disk", storage, KILLS / 2);
}

#[test]
fn kill9_never_loses_acknowledged_writes_to_hnsw_vectors_on_disk() {
    let storage = StorageConfig {
        vectors_on_disk: true,
        ..StorageConfig::default()
    };
    kill9_run("hnsw-on-disk", storage, KILLS / 4);
}

/// Kills a child writing to a new collection of `storage` `kills` times; checks every
/// acknowledged write after each.
fn kill9_run(name: &str, storage: StorageConfig, kills: usize) {
    let directory = temporary_directory(name);
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Dot,
        shard_count: SHARDS,
        storage,
    };
    drop(Collection::create(&OsFileSystem, &directory, config).unwrap());
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let mut model = State::new();
    let mut next: u64 = 0;
    let mut acknowledged_total = 0;
    let mut in_flight_kept = 0;
    let mut segments_seen = 0;
    for iteration in 0..kills {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "kill9_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIRECTORY, &directory)
            .env(CHILD_START, next.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.gen_range(30..400)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let mut output = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut output)
            .unwrap();
        // (the test harness prints "test kill9_child ... " before the first one)
        let acknowledged: Vec<u64> = output
            .lines()
            .filter_map(|line| line.rsplit_once("acked ").map(|(_, index)| index))
            .map(|index| index.parse().unwrap())
            .collect();
        for (expected, index) in (next..).zip(&acknowledged) {
            assert_eq!(
                *index, expected,
                "the child acknowledges in order:\n{output}"
            );
        }
        for index in &acknowledged {
            if let Some(write) = operation(*index).resolve(&model) {
                write.apply(&mut model);
            }
        }
        acknowledged_total += acknowledged.len();
        next += acknowledged.len() as u64;

        // every acknowledged operation is there, and in each shard the one in flight wholly
        // or not at all (a shard logs its part as one record)
        let collection = Collection::open(&OsFileSystem, &directory).unwrap();
        segments_seen = segments_seen.max(collection.status().segments);
        let context = format!("kill {iteration}");
        let recovered = engine_state(&collection, &context);
        let mut with_in_flight = model.clone();
        if let Some(write) = operation(next).resolve(&model) {
            write.apply(&mut with_in_flight);
        }
        let shard_of = |id: &u64| (PointId::Number(*id).routing_hash() % SHARDS as u64) as usize;
        let part = |state: &State, shard: usize| -> State {
            state
                .iter()
                .filter(|(id, _)| shard_of(id) == shard)
                .map(|(id, stored)| (*id, stored.clone()))
                .collect()
        };
        let mut landed = false;
        for shard in 0..SHARDS {
            let (mine, before, after) = (
                part(&recovered, shard),
                part(&model, shard),
                part(&with_in_flight, shard),
            );
            if mine != before {
                assert!(
                    mine == after,
                    "{context}: after {next} acknowledged operations shard {shard} differs:\n{}",
                    differences(&before, &mine)
                );
                landed = true;
            }
        }
        if landed {
            in_flight_kept += 1;
        }
        model = recovered;
        // the operation in flight landed or not; the child goes on with the next one
        next += 1;
    }
    eprintln!(
        "{name}: {kills} kills, {acknowledged_total} operations acknowledged, {in_flight_kept} \
         in-flight operations found applied, up to {segments_seen} segments"
    );
    assert!(
        acknowledged_total >= 10 * kills,
        "the child acknowledged only {acknowledged_total} operations in {kills} runs"
    );
    std::fs::remove_dir_all(&directory).unwrap();
}
