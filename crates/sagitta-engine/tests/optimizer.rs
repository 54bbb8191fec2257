//! The background optimizer: seals, merges and vacuums on its own, reports green/yellow,
//! and keeps search results equal to brute force throughout.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sagitta_engine::database::DatabaseOptions;
use sagitta_engine::{
    CollectionConfig, Database, Distance, EngineError, Health, OptimizerPolicy, Point, PointId,
};
use sagitta_storage::fs::FileSystem;
use sagitta_storage::sim::SimFileSystem;
use sagitta_storage::StorageError;

const DIM: usize = 8;

fn vector(id: u64) -> Vec<f32> {
    (0..DIM as u64)
        .map(|i| ((id * 31 + i * 17) % 101) as f32 / 50.0 - 1.0)
        .collect()
}

fn points(ids: impl Iterator<Item = u64>) -> Vec<Point> {
    ids.map(|id| Point {
        id: PointId::Number(id),
        vector: vector(id),
        payload: None,
        side: Vec::new(),
    })
    .collect()
}

fn config() -> CollectionConfig {
    CollectionConfig {
        dim: DIM,
        distance: Distance::Euclid,
        shard_count: 2,
        storage: Default::default(),
    }
}

fn wait_green(collection: &sagitta_engine::Collection) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while collection.status().health != Health::Green {
        assert!(Instant::now() < deadline, "{:?}", collection.status());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Ingestion in many batches with deletes: the background thread seals (by size and when
/// idle), vacuums and merges until the collection is green with every point indexed in at
/// most `max_segments` segments per shard — and the points are exactly the ones written.
#[test]
fn the_background_optimizer_indexes_everything_and_keeps_segments_bounded() {
    let fs: Arc<dyn FileSystem> = Arc::new(SimFileSystem::new());
    let policy = OptimizerPolicy {
        seal_points: 300,
        seal_idle: Duration::from_millis(20),
        vacuum_min_deleted: 50,
        vacuum_fraction: 0.2,
        max_segments: 3,
        retry_after_error: Duration::ZERO,
        index_min_rows: 100,
    };
    let options = DatabaseOptions {
        background_optimizer: true,
        policy: policy.clone(),
        ..DatabaseOptions::default()
    };
    let database = Database::open_with(Arc::clone(&fs), Path::new("/db"), options).unwrap();
    let collection = database.create_collection("c", config()).unwrap();
    for batch in 0..40u64 {
        collection
            .upsert(points(batch * 100..(batch + 1) * 100), batch % 2 == 0)
            .unwrap();
        if batch % 4 == 3 {
            // delete a third of an older batch: vacuums follow
            let old = (batch - 3) * 100;
            let ids: Vec<PointId> = (old..old + 33).map(PointId::Number).collect();
            collection.delete(&ids, true).unwrap();
        }
    }
    wait_green(&collection);
    let status = collection.status();
    let expected = 4_000 - 10 * 33;
    assert_eq!((status.points, status.indexed), (expected, expected));
    assert!(status.segments <= 2 * policy.max_segments, "{status:?}");
    assert_eq!(status.optimizer_error, None);
    for batch in 0..40u64 {
        let deleted = batch % 4 == 0 && batch < 37;
        for id in [batch * 100, batch * 100 + 50] {
            let found = collection.get(&PointId::Number(id)).unwrap().is_some();
            assert_eq!(found, !(deleted && id % 100 < 33), "id {id}");
        }
    }
    // search over the sealed segments finds a stored vector at distance 0 (ids 101 apart
    // share vectors, so compare the vector, not the id)
    let hits = collection.search(&vector(3_950), 1, None).unwrap();
    assert_eq!(hits[0].score, 0.0);
    assert_eq!(hits[0].vector, vector(3_950));
    drop(collection);
    drop(database);
    let reopened = Database::open(fs, Path::new("/db")).unwrap();
    assert_eq!(
        reopened.collection("c").unwrap().count(None).unwrap(),
        expected
    );
}

/// Yellow while points wait in a write buffer, green once sealed; counts follow.
#[test]
fn status_is_yellow_until_everything_is_indexed() {
    let fs: Arc<dyn FileSystem> = Arc::new(SimFileSystem::new());
    let options = DatabaseOptions {
        background_optimizer: false,
        policy: OptimizerPolicy::default(),
        ..DatabaseOptions::default()
    };
    let database = Database::open_with(Arc::clone(&fs), Path::new("/db"), options).unwrap();
    let collection = database.create_collection("c", config()).unwrap();
    assert_eq!(collection.status().health, Health::Green);
    collection.upsert(points(0..10), true).unwrap();
    let status = collection.status();
    assert_eq!(status.health, Health::Yellow);
    assert_eq!((status.points, status.indexed, status.segments), (10, 0, 0));
    collection.optimize(fs.as_ref()).unwrap();
    let status = collection.status();
    assert_eq!(status.health, Health::Green);
    assert_eq!((status.points, status.indexed), (10, 10));
    assert!(status.segments >= 1);
}

/// A seal that fails records the error in the status; one that fails before its first
/// publication leaves the shard writable and is retried later, one that fails after it
/// turns the collection red (the shard refuses writes until reopened). The background
/// thread keeps running either way.
#[test]
fn an_optimizer_failure_shows_in_the_status() {
    let sim = SimFileSystem::new();
    let fs: Arc<dyn FileSystem> = Arc::new(sim.clone());
    let options = DatabaseOptions {
        background_optimizer: true,
        policy: OptimizerPolicy {
            seal_idle: Duration::from_millis(300),
            retry_after_error: Duration::from_millis(50),
            index_min_rows: 1_000,
            ..OptimizerPolicy::default()
        },
        ..DatabaseOptions::default()
    };
    let database = Database::open_with(Arc::clone(&fs), Path::new("/db"), options).unwrap();
    let collection = database.create_collection("c", config()).unwrap();
    collection.upsert(points(0..10), true).unwrap();
    sim.fail_write_after(1); // the seal's first write: the next log's header
    let wait_for_error = || {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let status = collection.status();
            if status.optimizer_error.is_some() {
                return status;
            }
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let status = wait_for_error();
    assert_eq!(status.health, Health::Yellow, "{status:?}");
    // retried after the pause, it succeeds
    wait_green(&collection);
    assert_eq!(collection.status().optimizer_error, None);
    assert_eq!(collection.status().indexed, 10);

    collection.upsert(points(10..20), true).unwrap();
    // the second directory sync of the seal: its first manifest publication (the first
    // makes the next log durable)
    sim.fail_directory_sync_after(2);
    let status = wait_for_error();
    assert_eq!(status.health, Health::Red, "{status:?}");
    assert_eq!(collection.count(None).unwrap(), 20, "reads keep working");
    // Which shard's seal met the fault depends on which went idle first: a batch that
    // touches both shards reaches the poisoned one either way.
    assert!(collection.upsert(points(20..40), true).is_err());
}

/// One open database per directory: a second open fails with a clear error until the
/// first is dropped.
#[test]
fn a_database_directory_is_opened_once() {
    let fs: Arc<dyn FileSystem> = Arc::new(SimFileSystem::new());
    let first = Database::open(Arc::clone(&fs), Path::new("/db")).unwrap();
    match Database::open(Arc::clone(&fs), Path::new("/db")) {
        Err(EngineError::Storage(StorageError::Locked { path })) => {
            assert_eq!(path, Path::new("/db/LOCK"));
        }
        other => panic!("expected Locked, got {:?}", other.err()),
    }
    drop(first);
    Database::open(Arc::clone(&fs), Path::new("/db")).unwrap();
    // a stripe directory too: two databases cannot share one
    let striped = |root: &str| {
        let options = DatabaseOptions {
            stripe_dirs: vec![PathBuf::from("/nvme1")],
            ..DatabaseOptions::default()
        };
        Database::open_with(Arc::clone(&fs), Path::new(root), options)
    };
    let owner = striped("/db-a").unwrap();
    match striped("/db-b") {
        Err(EngineError::Storage(StorageError::Locked { path })) => {
            assert_eq!(path, Path::new("/nvme1/LOCK"));
        }
        other => panic!("expected Locked, got {:?}", other.err()),
    }
    drop(owner);
    striped("/db-b").unwrap();
}
