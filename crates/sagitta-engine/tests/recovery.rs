//! Recovery: what a restart costs and reports after crashes — the number of logs a shard
//! keeps, counts in status, health after a failed log.

use std::path::Path;
use std::time::Duration;

use sagitta_engine::collection::Health;
use sagitta_engine::database::DatabaseOptions;
use sagitta_engine::{
    Collection, CollectionConfig, Database, Distance, OptimizerPolicy, Point, PointId,
};
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
        side: Vec::new(),
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

/// Runs a seal that freezes the buffer, rotates the log, and fails writing its segment
/// (the simulator holds it at the segment file, then fails the write).
fn fail_a_seal_after_rotation(fs: &SimFileSystem, collection: &Collection) {
    fs.pause_at_file(".hnsw");
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| collection.optimize(fs));
        assert!(fs.wait_until_paused(|| worker.is_finished()));
        fs.release(true);
        assert!(worker.join().unwrap().is_err());
    });
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
        storage: Default::default(),
    };
    let mut collection = Collection::create(&fs, directory, config).unwrap();
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(13);
    for round in 0..20u64 {
        collection
            .upsert((0..50).map(|id| point(id, round)).collect(), true)
            .unwrap();
        // a seal that freezes the buffer, rotates the log, and dies writing its segment
        fail_a_seal_after_rotation(&fs, &collection);
        drop(collection);
        fs.crash(&mut rng);
        collection = Collection::open(&fs, directory).unwrap();
        let logs = logs_in(&fs, &directory.join("shard-0"));
        assert!(
            logs <= 2,
            "after {} crashed seals the shard has {logs} logs",
            round + 1
        );
        assert_eq!(collection.count(None).unwrap(), 50);
        assert_eq!(
            collection.get(&PointId::Number(7)).unwrap().unwrap(),
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
    assert_eq!(reopened.count(None).unwrap(), 50);
    assert_eq!(
        reopened.get(&PointId::Number(49)).unwrap().unwrap(),
        point(49, 19)
    );
}

/// A shard whose log append failed refuses writes: the collection reports red with the
/// reason (no absolute paths in it), and reopening it once the cause is fixed brings it
/// back with every acknowledged write.
#[test]
fn a_failed_log_append_is_red_until_the_collection_is_reopened() {
    let fs = SimFileSystem::new();
    let root = Path::new("/srv/db");
    let options = DatabaseOptions {
        background_optimizer: false,
        ..DatabaseOptions::default()
    };
    let database = Database::open_with(std::sync::Arc::new(fs.clone()), root, options).unwrap();
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Dot,
        shard_count: 1,
        storage: Default::default(),
    };
    let collection = database.create_collection("c", config).unwrap();
    collection.upsert(vec![point(1, 0)], true).unwrap();
    assert_ne!(collection.status().health, Health::Red);

    fs.set_space_left(Some(0)); // the disk is full: the next append fails
    assert!(collection.upsert(vec![point(2, 0)], true).is_err());
    fs.set_space_left(None);
    let status = collection.status();
    assert_eq!(status.health, Health::Red, "{status:?}");
    let reason = status.write_error.expect("the reason is reported");
    assert!(reason.contains("refuses writes"), "{reason}");
    assert!(
        !reason.contains("/srv/db"),
        "an absolute path reaches clients: {reason}"
    );
    // still refused, though the disk has room again: which bytes reached the log is unknown
    assert!(collection.upsert(vec![point(3, 0)], true).is_err());

    let collection = database.reopen_collection("c").unwrap();
    let status = collection.status();
    assert_ne!(status.health, Health::Red, "{status:?}");
    assert_eq!(status.write_error, None);
    collection.upsert(vec![point(4, 0)], true).unwrap();
    assert_eq!(
        collection.get(&PointId::Number(1)).unwrap(),
        Some(point(1, 0))
    );
    assert_eq!(collection.get(&PointId::Number(2)).unwrap(), None);
    assert_eq!(
        collection.get(&PointId::Number(4)).unwrap(),
        Some(point(4, 0))
    );
    assert!(database.reopen_collection("absent").is_err());
}

/// A shard's logs continue one another's sequence numbers; a log that does not (a stale or
/// foreign log in the directory under a listed name) is refused at open, naming the log,
/// instead of having its writes replayed out of order.
#[test]
fn a_log_that_breaks_the_sequence_is_refused_at_open() {
    let fs = SimFileSystem::new();
    let directory = Path::new("/seq");
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Euclid,
        shard_count: 1,
        storage: Default::default(),
    };
    let collection = Collection::create(&fs, directory, config).unwrap();
    collection
        .upsert((0..20).map(|id| point(id, 0)).collect(), true)
        .unwrap();
    // a seal cut short after it rotated the log: a replay log and the live log
    fail_a_seal_after_rotation(&fs, &collection);
    // (the shard now refuses writes until reopened)
    drop(collection);
    let shard = directory.join("shard-0");
    assert_eq!(logs_in(&fs, &shard), 2);
    // the intact pair opens; keep a copy of the files to tamper with
    let live = fs
        .list(&shard)
        .unwrap()
        .into_iter()
        .filter(|path| path.to_string_lossy().contains("wal-"))
        .max()
        .unwrap();
    let original = fs.read(&live).unwrap().unwrap();
    // the live log's header claims a later first sequence (with a valid checksum)
    let mut tampered = original.clone();
    let first = u64::from_le_bytes(tampered[8..16].try_into().unwrap());
    tampered[8..16].copy_from_slice(&(first + 5).to_le_bytes());
    let crc = crc32c::crc32c(&tampered[..20]);
    tampered[20..24].copy_from_slice(&crc.to_le_bytes());
    fs.write_synced(&live, &tampered).unwrap();
    let error = Collection::open(&fs, directory).err().expect("refused");
    let message = error.to_string();
    let name = live.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        message.contains(&name) && message.contains("sequence"),
        "{message}"
    );
    // restored, the shard opens with every point
    fs.write_synced(&live, &original).unwrap();
    let reopened = Collection::open(&fs, directory).unwrap();
    assert_eq!(reopened.count(None).unwrap(), 20);
}
