//! Databases: named collections listed in a manifest, surviving reopen and crashes.

use std::path::Path;
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sagitta_engine::{CollectionConfig, Database, Distance, EngineError, Point, PointId};
use sagitta_storage::fs::{FileSystem, OsFileSystem};
use sagitta_storage::sim::SimFileSystem;

fn config() -> CollectionConfig {
    CollectionConfig {
        dim: 4,
        distance: Distance::Cosine,
        shard_count: 2,
        storage: Default::default(),
    }
}

fn one_point(id: u64) -> Vec<Point> {
    vec![Point {
        id: PointId::Number(id),
        vector: vec![1.0, 0.5, 0.25, id as f32],
        payload: Some(r#"{"k":"v"}"#.to_string()),
    }]
}

#[test]
fn collections_are_listed_reopened_and_dropped() {
    let fs = SimFileSystem::new();
    let shared: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let root = Path::new("/data");
    let database = Database::open(Arc::clone(&shared), root).unwrap();
    assert!(database.list().is_empty());
    let docs = database.create_collection("docs", config()).unwrap();
    docs.upsert(one_point(1), true).unwrap();
    database
        .create_collection("chat-history.v1", config())
        .unwrap();
    assert!(matches!(
        database.create_collection("docs", config()),
        Err(EngineError::CollectionExists { .. })
    ));
    for bad in ["", "a/b", "..", "spaced name", &"x".repeat(256)] {
        assert!(
            matches!(
                database.create_collection(bad, config()),
                Err(EngineError::InvalidCollectionName { .. })
            ),
            "{bad:?}"
        );
    }
    drop((docs, database));
    fs.crash(&mut ChaCha8Rng::seed_from_u64(3));

    let database = Database::open(Arc::clone(&shared), root).unwrap();
    assert_eq!(database.list(), vec!["chat-history.v1", "docs"]);
    assert_eq!(database.collection("docs").unwrap().count(None), 1);
    database.drop_collection("docs").unwrap();
    assert!(matches!(
        database.collection("docs"),
        Err(EngineError::CollectionNotFound { .. })
    ));
    assert!(matches!(
        database.drop_collection("docs"),
        Err(EngineError::CollectionNotFound { .. })
    ));
    // a new collection of the same name starts empty: the old logs are gone
    let docs = database.create_collection("docs", config()).unwrap();
    assert_eq!(docs.count(None), 0);
    drop((docs, database));
    let database = Database::open(shared, root).unwrap();
    assert_eq!(database.collection("docs").unwrap().count(None), 0);
}

#[test]
fn real_directory_round_trip() {
    let root = std::env::temp_dir().join(format!("sagitta-db-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let fs: Arc<dyn FileSystem> = Arc::new(OsFileSystem);
    let database = Database::open(Arc::clone(&fs), &root).unwrap();
    database
        .create_collection("docs", config())
        .unwrap()
        .upsert(one_point(7), true)
        .unwrap();
    drop(database);
    let database = Database::open(fs, &root).unwrap();
    let point = database
        .collection("docs")
        .unwrap()
        .get(&PointId::Number(7))
        .unwrap()
        .unwrap();
    assert_eq!(point.payload.as_deref(), Some(r#"{"k":"v"}"#));
    database.drop_collection("docs").unwrap();
    assert!(!root.join("collections/docs/MANIFEST").exists());
    assert!(!root.join("collections/docs/shard-0/wal-0.log").exists());
    std::fs::remove_dir_all(&root).unwrap();
}
