//! Collection snapshots: a snapshot taken with points in every state (sealed, rewritten
//! and deleted in the write buffer) recovers to a collection with every field of every
//! point, the payload schema (a text index's settings too) and the settings document; a
//! damaged or truncated snapshot is refused and leaves no collection. A shard snapshot
//! restores its shard alone, through failures and crashes.

use std::path::Path;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_engine::fulltext::{TextIndex, Tokenizer};
use sagitta_engine::{
    Collection, CollectionConfig, Database, Distance, EngineError, FieldType, MultiSpace,
    MultiVector, Point, PointId, SideSpace, SideVector, SparseSpace, SparseVector, VectorSpace,
    VectorSpaces,
};
use sagitta_storage::fs::FileSystem;
use sagitta_storage::sim::SimFileSystem;
use serde_json::json;

fn spaces() -> VectorSpaces {
    let dense = vec![VectorSpace {
        name: "dense".to_string(),
        dim: 4,
        distance: Distance::Cosine,
    }];
    let side = vec![
        SideSpace::Sparse(SparseSpace {
            name: "words".to_string(),
            idf: true,
        }),
        SideSpace::Multi(MultiSpace {
            name: "rows".to_string(),
            dim: 3,
            distance: Distance::Dot,
        }),
    ];
    VectorSpaces::with_side(dense, side, 64).unwrap()
}

/// A point with every vector, or (every third) without its sparse one.
fn point(id: u64, version: u64, rng: &mut ChaCha8Rng) -> Point {
    let sparse = SparseVector::new(vec![1, id as u32 % 50 + 2], vec![0.5, rng.gen()]).unwrap();
    let rows: Vec<Vec<f32>> = (0..1 + id % 3)
        .map(|_| (0..3).map(|_| rng.gen_range(-1.0..1.0)).collect())
        .collect();
    Point {
        id: PointId::Number(id),
        vector: (0..4).map(|_| rng.gen_range(-1.0..1.0)).collect(),
        payload: Some(
            json!({"v": version, "text": format!("point {id} version {version}")}).to_string(),
        ),
        side: vec![
            (!id.is_multiple_of(3)).then_some(SideVector::Sparse(sparse)),
            Some(SideVector::Multi(MultiVector::new(&rows).unwrap())),
        ],
    }
}

/// Panics naming the first point that differs (the lists are long).
fn same_points(got: &[Point], expected: &[Point]) {
    assert_eq!(got.len(), expected.len());
    if let Some((a, b)) = got.iter().zip(expected).find(|(a, b)| a != b) {
        panic!("recovered {a:?}\nexpected {b:?}");
    }
}

fn sorted_points(collection: &Collection) -> Vec<Point> {
    let mut points = collection.points().unwrap();
    points.sort_by_key(|point| point.id);
    points
}

/// The configuration of the tests' collections: `spaces`, two shards.
fn two_shards(spaces: &VectorSpaces) -> CollectionConfig {
    let base = CollectionConfig {
        dim: 1,
        distance: Distance::Dot,
        shard_count: 2,
        storage: Default::default(),
    };
    base.named(spaces)
}

/// Points `0..count` (from `seed`) in every state: sealed, the last 100 and 100 more
/// rewritten in the write buffer, every seventh deleted.
fn fill_every_state(collection: &Collection, fs: &dyn FileSystem, count: u64, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let first: Vec<Point> = (0..count).map(|id| point(id, 1, &mut rng)).collect();
    collection.upsert(first, true).unwrap();
    collection.optimize(fs).unwrap();
    let rewritten: Vec<Point> = (count - 100..count + 100)
        .map(|id| point(id, 2, &mut rng))
        .collect();
    collection.upsert(rewritten, true).unwrap();
    let deleted: Vec<PointId> = (0..count).step_by(7).map(PointId::Number).collect();
    collection.delete(&deleted, true).unwrap();
}

/// A database with collection "src" in every state, and its snapshot.
fn source() -> (Database, Vec<u8>) {
    let fs = Arc::new(SimFileSystem::new());
    let database = Database::open(fs, Path::new("/db")).unwrap();
    let spaces = spaces();
    let collection = database
        .create_collection_with_spaces("src", two_shards(&spaces), spaces)
        .unwrap();
    fill_every_state(&collection, database.file_system(), 600, 3);
    let text = TextIndex {
        tokenizer: Tokenizer::Prefix,
        min_token_len: Some(2),
        ..TextIndex::default()
    };
    let fs = database.file_system();
    collection
        .create_payload_index(fs, "text", FieldType::Text(text))
        .unwrap();
    collection
        .create_payload_index(fs, "v", FieldType::Integer)
        .unwrap();
    collection
        .set_settings(fs, r#"{"metadata":{"team":"a"}}"#)
        .unwrap();
    let mut snapshot = Vec::new();
    let written = collection.write_snapshot(&mut snapshot).unwrap();
    assert_eq!(written as usize, collection.count(None).unwrap());
    (database, snapshot)
}

#[test]
fn a_snapshot_recovers_every_point_and_setting() {
    let (database, snapshot) = source();
    let source = database.collection("src").unwrap();
    let copy = database
        .recover_collection("copy", &mut snapshot.as_slice())
        .unwrap();
    assert_eq!(copy.spaces(), source.spaces());
    assert_eq!(copy.config(), source.config());
    assert_eq!(copy.payload_schema(), source.payload_schema());
    assert_eq!(copy.settings(), source.settings());
    let expected = sorted_points(&source);
    assert_eq!(expected.len(), 700 - 86);
    same_points(&sorted_points(&copy), &expected);
    // the recovered collection is durable: it reopens with the same points
    drop(copy);
    let reopened = database.reopen_collection("copy").unwrap();
    same_points(&sorted_points(&reopened), &expected);
    // a name in use is refused, the existing collection untouched
    match database.recover_collection("src", &mut snapshot.as_slice()) {
        Err(EngineError::CollectionExists { .. }) => {}
        other => panic!("{:?}", other.map(|_| ())),
    }
    same_points(
        &sorted_points(&database.collection("src").unwrap()),
        &expected,
    );
}

#[test]
fn a_damaged_snapshot_is_refused_and_leaves_no_collection() {
    let (database, snapshot) = source();
    let mut flipped = snapshot.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x40;
    let truncated = &snapshot[..snapshot.len() - 10];
    let mut not_one = b"not a snapshot at all, just some text".to_vec();
    not_one.resize(200, b'.');
    for (what, bytes) in [
        ("flipped", flipped.as_slice()),
        ("truncated", truncated),
        ("not a snapshot", not_one.as_slice()),
        ("empty", &[][..]),
    ] {
        match database.recover_collection("copy", &mut &bytes[..]) {
            Err(EngineError::InvalidSnapshot { reason }) => assert!(!reason.is_empty()),
            other => panic!("{what}: {:?}", other.map(|_| ())),
        }
        assert!(
            database.collection("copy").is_err(),
            "{what}: no collection left"
        );
    }
}

/// Recovery is a write path: a recovery that answered is durable through a power loss; one
/// that failed at any write (an I/O error, then power loss) leaves a database that opens,
/// with the collection absent or partial — and recovering again (dropping what is there)
/// gives every point.
#[test]
fn recovery_survives_failures_and_crashes() {
    let (database, snapshot) = source();
    let expected = sorted_points(&database.collection("src").unwrap());
    drop(database);
    let mut failed = 0;
    for (seed, fail_at) in [0u64, 1, 2, 3, 5, 8, 12, 17, 23, 30]
        .into_iter()
        .enumerate()
    {
        let fs = Arc::new(SimFileSystem::new());
        let root = Path::new("/target");
        let database = Database::open(Arc::clone(&fs) as _, root).unwrap();
        if fail_at > 0 {
            fs.fail_write_after(fail_at);
        }
        let answered = database.recover_collection("copy", &mut snapshot.as_slice());
        failed += usize::from(answered.is_err());
        drop((answered, database));
        fs.crash(&mut ChaCha8Rng::seed_from_u64(seed as u64));
        let database = Database::open(Arc::clone(&fs) as _, root).unwrap();
        match database.collection("copy") {
            Ok(copy) if fail_at == 0 => same_points(&sorted_points(&copy), &expected),
            Ok(_) => database.drop_collection("copy").unwrap(),
            Err(_) => {}
        }
        if fail_at > 0 {
            let copy = database
                .recover_collection("copy", &mut snapshot.as_slice())
                .unwrap();
            same_points(&sorted_points(&copy), &expected);
        }
    }
    assert!(failed >= 4, "only {failed} recoveries met a failure");
}

/// A collection of two shards on a file system the test owns, with points in every state.
fn sharded(fs: &SimFileSystem, directory: &Path) -> Collection {
    let spaces = spaces();
    let collection =
        Collection::create_with_spaces(fs, directory, two_shards(&spaces), spaces, &[]).unwrap();
    fill_every_state(&collection, fs, 300, 8);
    collection
}

fn in_shard(points: Vec<Point>, shard: u64) -> Vec<Point> {
    points
        .into_iter()
        .filter(|point| point.id.routing_hash() % 2 == shard)
        .collect()
}

/// Writes after a shard snapshot: rewrites, deletes and new points in both shards.
fn change(collection: &Collection) {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let later: Vec<Point> = (200..400).map(|id| point(id, 3, &mut rng)).collect();
    collection.upsert(later, true).unwrap();
    let deleted: Vec<PointId> = (0..100).map(PointId::Number).collect();
    collection.delete(&deleted, true).unwrap();
}

/// A shard snapshot holds that shard's points alone; recovering it gives that shard its
/// points back as they were and leaves the other shard as it is; a snapshot of another
/// shard, of a whole collection, or damaged, is refused before anything is written.
#[test]
fn a_shard_snapshot_restores_its_shard_alone() {
    let fs = SimFileSystem::new();
    let collection = sharded(&fs, Path::new("/db/sharded"));
    let at_snapshot = sorted_points(&collection);
    let mut snapshot = Vec::new();
    let written = collection.write_shard_snapshot(1, &mut snapshot).unwrap();
    assert_eq!(written as usize, in_shard(at_snapshot.clone(), 1).len());
    change(&collection);
    let other_shard_now = in_shard(sorted_points(&collection), 0);
    let error = collection
        .verify_shard_snapshot(0, &mut snapshot.as_slice())
        .unwrap_err()
        .to_string();
    assert!(error.contains("not of shard 0"), "{error}");
    let mut whole = Vec::new();
    collection.write_snapshot(&mut whole).unwrap();
    let error = collection
        .verify_shard_snapshot(1, &mut whole.as_slice())
        .unwrap_err()
        .to_string();
    assert!(error.contains("a collection snapshot"), "{error}");
    let mut damaged = snapshot.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x5a;
    assert!(collection
        .verify_shard_snapshot(1, &mut damaged.as_slice())
        .is_err());
    assert!(collection.write_shard_snapshot(2, &mut Vec::new()).is_err());
    assert_eq!(
        collection
            .verify_shard_snapshot(1, &mut snapshot.as_slice())
            .unwrap(),
        written
    );
    collection
        .recover_shard(1, &mut snapshot.as_slice())
        .unwrap();
    let mut expected = other_shard_now;
    expected.extend(in_shard(at_snapshot, 1));
    expected.sort_by_key(|point| point.id);
    same_points(&sorted_points(&collection), &expected);
}

/// Shard recovery is a write path: after an I/O error at any write and a power loss the
/// collection opens, and recovering again gives the expected points.
#[test]
fn shard_recovery_survives_failures_and_crashes() {
    let mut failed = 0;
    // the recovery writes twice here (the upsert of the page, the delete of the rest)
    for (seed, fail_at) in [0u64, 1, 2, 3].into_iter().enumerate() {
        let fs = SimFileSystem::new();
        let directory = Path::new("/db/sharded");
        let collection = sharded(&fs, directory);
        let at_snapshot = in_shard(sorted_points(&collection), 1);
        let mut snapshot = Vec::new();
        collection.write_shard_snapshot(1, &mut snapshot).unwrap();
        change(&collection);
        let mut expected = in_shard(sorted_points(&collection), 0);
        expected.extend(at_snapshot);
        expected.sort_by_key(|point| point.id);
        if fail_at > 0 {
            fs.fail_write_after(fail_at);
        }
        let answered = collection.recover_shard(1, &mut snapshot.as_slice());
        failed += usize::from(answered.is_err());
        drop(collection);
        fs.crash(&mut ChaCha8Rng::seed_from_u64(seed as u64));
        let collection = Collection::open(&fs, directory).unwrap();
        if answered.is_err() {
            collection
                .recover_shard(1, &mut snapshot.as_slice())
                .unwrap();
        }
        same_points(&sorted_points(&collection), &expected);
    }
    assert!(failed >= 2, "only {failed} recoveries met a failure");
}
