//! Recovery: what a restart costs and reports after crashes — the number of logs a shard
//! keeps, counts in status, health after a failed log.

use std::path::Path;
use std::time::Duration;

use sagitta_engine::{Collection, CollectionConfig, Distance, OptimizerPolicy, Point, PointId};
use sagitta_storage::fs::FileSystem;
use sagitta_storage::sim::SimFileSystem;

const DIM: usize = 8;

fn point(id: u64, version: u64) -> Point {
    Point {
        id: PointId::Number(id),
        vector: (0..DIM)
            .map(|j| ((id * 13 + version * 5 + j as u64) % 29) as f32 - 14.0)
            .collect(),
        payload: Some(format!(r#"{{"version":{version}}}"#)),
    }
}

fn logs_in(fs: &SimFileSystem, shard: &Path) -> usize {
    fs.list(shard)
        .unwrap()
        .iter()
        .filter(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("wal-")
        })
        .count()
}

/// A server that crashes during every seal must not add a log per restart: each open
/// checkpoints what it replayed, so the logs stay bounded (and with them restart time).
#[test]
fn crashes_during_seals_do_not_pile_up_logs() {
    let fs = SimFileSystem::new();
    let directory = Path::new("/c");
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Euclid,
        shard_count: 1,
    };
    let mut collection = Collection::create(&fs, directory, config).unwrap();
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(13);
    for round in 0..20u64 {
        collection
            .upsert((0..50).map(|id| point(id, round)).collect(), true)
            .unwrap();
        // a seal that freezes the buffer, rotates the log, and dies writing its segment
        fs.pause_at_file(".hnsw");
        std::thread::scope(|scope| {
            let worker = scope.spawn(|| collection.optimize(&fs));
            assert!(fs.wait_until_paused(|| worker.is_finished()));
            fs.release(true);
            assert!(worker.join().unwrap().is_err());
        });
        drop(collection);
        fs.crash(&mut rng);
        collection = Collection::open(&fs, directory).unwrap();
        let logs = logs_in(&fs, &directory.join("shard-0"));
        assert!(
            logs <= 2,
            "after {} crashed seals the shard has {logs} logs",
            round + 1
        );
        assert_eq!(collection.count(None), 50);
        assert_eq!(
            collection.get(&PointId::Number(7)).unwrap(),
            point(7, round)
        );
    }
    // and the data is all there once a seal does finish
    collection.set_policy(OptimizerPolicy {
        seal_idle: Duration::ZERO,
        ..OptimizerPolicy::default()
    });
    assert_eq!(collection.optimize(&fs).unwrap(), 50);
    drop(collection);
    let reopened = Collection::open(&fs, directory).unwrap();
    assert_eq!(reopened.count(None), 50);
    assert_eq!(reopened.get(&PointId::Number(49)).unwrap(), point(49, 19));
}
