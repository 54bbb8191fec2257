//! A segment's files are input to `Collection::open`: a flipped byte, a cut-short file or
//! a wrong magic in any of them (`.hnsw`, `.points`, `.tomb-<epoch>`) must fail the open
//! with `EngineError::Corrupt` naming the file — never a panic, never a collection that
//! opens with fewer points than were acknowledged.

use std::path::{Path, PathBuf};

use sagitta_engine::{Collection, CollectionConfig, Distance, EngineError, Point, PointId};
use sagitta_storage::fs::FileSystem;
use sagitta_storage::sim::SimFileSystem;

const DIM: usize = 8;
const POINTS: u64 = 300;

fn vector(id: u64) -> Vec<f32> {
    (0..DIM as u64)
        .map(|i| ((id * 31 + i * 17) % 101) as f32 / 50.0 - 1.0)
        .collect()
}

/// A one-shard collection with two sealed segments, the first with tombstones.
fn sealed_collection(fs: &SimFileSystem, directory: &Path) {
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Euclid,
        shard_count: 1,
        storage: Default::default(),
    };
    let collection = Collection::create(fs, directory, config).unwrap();
    let points = |ids: std::ops::Range<u64>| -> Vec<Point> {
        ids.map(|id| Point {
            id: PointId::Number(id),
            vector: vector(id),
            payload: Some(format!(r#"{{"n":{id}}}"#)),
            side: Vec::new(),
        })
        .collect()
    };
    collection.upsert(points(0..POINTS), true).unwrap();
    assert_eq!(collection.optimize(fs).unwrap(), POINTS as usize);
    let deleted: Vec<PointId> = (0..20).map(PointId::Number).collect();
    collection.delete(&deleted, true).unwrap();
    collection
        .upsert(points(POINTS..POINTS + 10), true)
        .unwrap();
    collection.optimize(fs).unwrap();
    collection.close();
}

/// The shard's files whose names contain `kind`.
fn files_of(fs: &SimFileSystem, directory: &Path, kind: &str) -> Vec<PathBuf> {
    let shard = directory.join("shard-0");
    let files: Vec<PathBuf> = fs
        .list(&shard)
        .unwrap()
        .into_iter()
        .filter(|path| path.to_string_lossy().contains(kind))
        .collect();
    assert!(!files.is_empty(), "no {kind} file in {:?}", fs.list(&shard));
    files
}

/// Opens after `damage` changed `file`, expecting a `Corrupt` error that names it; then
/// puts the file back and checks the collection opens whole.
fn open_fails_naming(
    fs: &SimFileSystem,
    directory: &Path,
    file: &Path,
    what: &str,
    damage: impl Fn(&mut Vec<u8>),
) {
    let original = fs.read(file).unwrap().unwrap();
    let mut damaged = original.clone();
    damage(&mut damaged);
    fs.write_synced(file, &damaged).unwrap();
    match Collection::open(fs, directory) {
        Err(EngineError::Corrupt { reason }) => {
            let name = file.file_name().unwrap().to_string_lossy();
            assert!(reason.contains(name.as_ref()), "{reason}");
        }
        Err(other) => panic!("{} ({what}): not Corrupt: {other}", file.display()),
        Ok(collection) => panic!(
            "{} ({what}), yet the collection opened with {:?} points",
            file.display(),
            collection.point_counts()
        ),
    }
    fs.write_synced(file, &original).unwrap();
    let collection = Collection::open(fs, directory).unwrap();
    let (indexed, buffered) = collection.point_counts();
    assert_eq!(indexed + buffered, (POINTS + 10 - 20) as usize);
    collection.close();
}

#[test]
fn damaged_segment_files_fail_the_open_and_name_the_file() {
    let fs = SimFileSystem::new();
    let directory = Path::new("/db/collections/c");
    sealed_collection(&fs, directory);
    for kind in [".hnsw", ".points", ".tomb-"] {
        for file in files_of(&fs, directory, kind) {
            let length = fs.read(&file).unwrap().unwrap().len();
            // a flipped bit in the header, in the middle and in the last byte
            for at in [9, length / 2, length - 1] {
                let what = format!("bit flipped at byte {at}");
                open_fails_naming(&fs, directory, &file, &what, |bytes| bytes[at] ^= 0x10);
            }
            // cut short, one byte longer, and the magic of another file kind
            open_fails_naming(&fs, directory, &file, "cut short", |bytes| {
                bytes.truncate(length - 3);
            });
            open_fails_naming(&fs, directory, &file, "one byte longer", |bytes| {
                bytes.push(0);
            });
            open_fails_naming(&fs, directory, &file, "another magic", |bytes| {
                bytes[..4].copy_from_slice(b"XXXX");
            });
        }
    }
}

#[test]
fn a_missing_segment_file_fails_the_open() {
    let fs = SimFileSystem::new();
    let directory = Path::new("/db/collections/c");
    sealed_collection(&fs, directory);
    for kind in [".hnsw", ".points", ".tomb-"] {
        let file = files_of(&fs, directory, kind).remove(0);
        let original = fs.read(&file).unwrap().unwrap();
        fs.remove(&file).unwrap();
        match Collection::open(&fs, directory) {
            Err(EngineError::Corrupt { reason }) => {
                assert!(reason.contains("missing"), "{reason}");
            }
            Err(other) => panic!("{}: not Corrupt: {other}", file.display()),
            Ok(_) => panic!("{} removed, yet the collection opened", file.display()),
        }
        fs.write_synced(&file, &original).unwrap();
    }
    assert!(Collection::open(&fs, directory).is_ok());
}
