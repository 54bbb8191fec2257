//! Databases: named collections listed in a manifest, surviving reopen and crashes.

use std::path::Path;
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sagitta_engine::{
    AliasAction, CollectionConfig, Database, Distance, EngineError, Point, PointId,
};
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
        side: Vec::new(),
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
    assert_eq!(database.collection("docs").unwrap().count(None).unwrap(), 1);
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
    assert_eq!(docs.count(None).unwrap(), 0);
    drop((docs, database));
    let database = Database::open(shared, root).unwrap();
    assert_eq!(database.collection("docs").unwrap().count(None).unwrap(), 0);
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

/// What the aliases and collections should be: the test's own model of Qdrant's rules.
#[derive(Clone, Debug, PartialEq)]
struct Model {
    collections: std::collections::BTreeSet<String>,
    aliases: std::collections::BTreeMap<String, String>,
}

impl Model {
    /// The model after `action`, or `None` when the database must refuse it.
    fn after(&self, action: &AliasAction) -> Option<Model> {
        let mut next = self.clone();
        match action {
            AliasAction::Create { alias, collection } => {
                if !self.collections.contains(collection) || self.collections.contains(alias) {
                    return None;
                }
                next.aliases.insert(alias.clone(), collection.clone());
            }
            AliasAction::Delete { alias } => {
                next.aliases.remove(alias);
            }
            AliasAction::Rename { from, to } => {
                let target = next.aliases.remove(from)?;
                if self.collections.contains(to) {
                    return None;
                }
                next.aliases.insert(to.clone(), target);
            }
        }
        Some(next)
    }

    fn observed(database: &Database) -> Model {
        Model {
            collections: database.list().into_iter().collect(),
            aliases: database.aliases().into_iter().collect(),
        }
    }
}

/// Alias changes, collection drops and re-creations, with write and directory-sync
/// failures injected and power cut at random points: after every reopen the aliases are
/// exactly those of the last acknowledged change (an unacknowledged one may or may not
/// have landed, but never in part), each alias resolves to its collection, and no alias
/// outlives its collection.
#[test]
fn aliases_survive_crashes_and_failed_publications_whole() {
    use rand::Rng;
    let names = ["a", "b", "c", "x", "y"];
    // how often the interesting cases came up, over all seeds
    let (mut crashes_with_aliases, mut failed_publications, mut landed_after_failure) = (0, 0, 0);
    for seed in 0..60u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let fs = SimFileSystem::new();
        let shared: Arc<dyn FileSystem> = Arc::new(fs.clone());
        let root = Path::new("/data");
        let mut database = Database::open(Arc::clone(&shared), root).unwrap();
        let mut model = Model {
            collections: Default::default(),
            aliases: Default::default(),
        };
        for name in ["a", "b"] {
            database.create_collection(name, config()).unwrap();
            model.collections.insert(name.to_string());
        }
        // a change that failed: the database may show it or not after a crash
        let mut pending: Option<Model> = None;
        for _ in 0..40 {
            let pick = |rng: &mut ChaCha8Rng| names[rng.gen_range(0..names.len())].to_string();
            match rng.gen_range(0..10) {
                0 => fs.fail_write_after(1),
                1 => fs.fail_directory_sync_after(1),
                _ => {}
            }
            let outcome = match rng.gen_range(0..8) {
                0..=2 => {
                    let action = AliasAction::Create {
                        alias: pick(&mut rng),
                        collection: pick(&mut rng),
                    };
                    Some((model.after(&action), database.update_aliases(&[action])))
                }
                3 => {
                    let action = AliasAction::Delete {
                        alias: pick(&mut rng),
                    };
                    Some((model.after(&action), database.update_aliases(&[action])))
                }
                4 => {
                    let action = AliasAction::Rename {
                        from: pick(&mut rng),
                        to: pick(&mut rng),
                    };
                    Some((model.after(&action), database.update_aliases(&[action])))
                }
                5 => {
                    let name = pick(&mut rng);
                    let mut expected = model.clone();
                    let known = expected.collections.remove(&name);
                    expected.aliases.retain(|_, target| *target != name);
                    let result = database.drop_collection(&name);
                    Some((known.then_some(expected), result))
                }
                6 => {
                    let name = pick(&mut rng);
                    let mut expected = model.clone();
                    let free = !expected.aliases.contains_key(&name)
                        && expected.collections.insert(name.clone());
                    let result = database.create_collection(&name, config()).map(|_| ());
                    Some((free.then_some(expected), result))
                }
                _ => None,
            };
            match outcome {
                Some((Some(expected), Ok(()))) => {
                    model = expected;
                    pending = None;
                }
                Some((None, Err(error))) => {
                    assert!(
                        !matches!(error, EngineError::Storage(_)),
                        "seed {seed}: a refusal, not a failure: {error}"
                    );
                }
                Some((Some(expected), Err(EngineError::Storage(_)))) => {
                    // the injected failure: either state may be durable; the live
                    // database keeps the old one
                    pending = Some(expected);
                    failed_publications += 1;
                    assert_eq!(Model::observed(&database), model, "seed {seed}");
                }
                Some((expected, result)) => {
                    panic!("seed {seed}: model {expected:?} but the database said {result:?}")
                }
                None => {}
            }
            if rng.gen_range(0..6) == 0 {
                drop(database);
                fs.crash(&mut rng);
                database = Database::open(Arc::clone(&shared), root).unwrap();
                let observed = Model::observed(&database);
                match pending.take() {
                    Some(landed) if observed == landed => {
                        landed_after_failure += 1;
                        model = landed;
                    }
                    _ => assert_eq!(observed, model, "seed {seed}: after a crash"),
                }
                crashes_with_aliases += usize::from(!model.aliases.is_empty());
                for (alias, target) in &model.aliases {
                    let through_alias = database.collection(alias).unwrap();
                    let direct = database.collection(target).unwrap();
                    assert!(Arc::ptr_eq(&through_alias, &direct), "seed {seed}");
                }
            }
        }
    }
    assert!(
        crashes_with_aliases > 20 && failed_publications > 10 && landed_after_failure > 0,
        "too few interesting cases: {crashes_with_aliases} crashes with aliases, \
         {failed_publications} failed publications, {landed_after_failure} landed anyway"
    );
}
