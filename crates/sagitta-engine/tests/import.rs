//! Bulk import: a new collection built straight into sealed segments, published all or
//! nothing; bad input stores nothing; a crash at any write leaves no collection or the
//! whole one.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_engine::database::DatabaseOptions;
use sagitta_engine::{
    CollectionConfig, Database, Datatype, Distance, EngineError, Health, ImportProgress,
    ImportSource, Point, PointId, SearchRequest, SegmentKindName, StorageConfig, Strategy,
    DEFAULT_PARTITION_SIZE,
};
use sagitta_storage::fs::FileSystem;
use sagitta_storage::sim::SimFileSystem;

const DIM: usize = 12;

fn random_points(count: u64, seed: u64) -> Vec<Point> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|id| Point {
            id: PointId::Number(id),
            vector: (0..DIM).map(|_| rng.gen_range(-1.0..1.0)).collect(),
            payload: Some(format!(r#"{{"n":{id}}}"#)),
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

fn quiet() -> DatabaseOptions {
    DatabaseOptions {
        background_optimizer: false,
        ..DatabaseOptions::default()
    }
}

#[test]
fn an_import_is_indexed_at_once_and_searches_exactly() {
    let fs: Arc<dyn FileSystem> = Arc::new(SimFileSystem::new());
    let database = Database::open_with(Arc::clone(&fs), Path::new("/db"), quiet()).unwrap();
    let mut points = random_points(3_000, 1);
    // a repeated id: the last one wins
    let mut repeated = points[10].clone();
    repeated.vector = vec![0.5; DIM];
    repeated.payload = Some(r#"{"n":"again"}"#.to_string());
    points.push(repeated.clone());
    let (collection, report) = database
        .import_collection("imported", config(), points.clone())
        .unwrap();
    assert_eq!((report.points, report.segments), (3_000, 2));
    let raw = 3_000 * DIM as u64 * 4;
    assert!(report.bytes_written > raw, "{report:?}");
    let status = collection.status();
    assert_eq!(status.health, Health::Green);
    assert_eq!((status.points, status.indexed), (3_000, 3_000));
    assert_eq!(
        collection.get(&PointId::Number(10)).unwrap(),
        Some(repeated)
    );
    let query: Vec<f32> = vec![0.1; DIM];
    let mut truth: Vec<(f32, PointId)> = points[..3_000]
        .iter()
        .filter(|p| p.id != PointId::Number(10))
        .chain(std::iter::once(&points[3_000]))
        .map(|p| {
            let d: f32 = p
                .vector
                .iter()
                .zip(&query)
                .map(|(a, b)| (a - b).powi(2))
                .sum();
            (d, p.id)
        })
        .collect();
    truth.sort_by(|a, b| a.0.total_cmp(&b.0));
    let exact = collection
        .query(&SearchRequest {
            strategy: Strategy::Exact,
            ..SearchRequest::new(&query, 10)
        })
        .unwrap();
    let ids: Vec<PointId> = exact.iter().map(|hit| hit.id).collect();
    assert_eq!(ids, truth[..10].iter().map(|t| t.1).collect::<Vec<_>>());
    // the import is an ordinary collection afterwards: writes, reopen
    collection.delete(&[PointId::Number(0)], true).unwrap();
    drop(collection);
    drop(database);
    let database = Database::open_with(fs, Path::new("/db"), quiet()).unwrap();
    let reopened = database.collection("imported").unwrap();
    assert_eq!(reopened.count(None).unwrap(), 2_999);
    assert!(matches!(
        database.import_collection("imported", config(), random_points(5, 2)),
        Err(EngineError::CollectionExists { .. })
    ));
}

/// Segments of at least `ORDERED_BATCH_MIN_ROWS` points are built cluster by cluster: the
/// points are placed in a new order, so every point must still get back its own vector and
/// payload, find itself, and keep doing so through a vacuum (which rebuilds the segment
/// and deletes by id what was deleted meanwhile) and a reopen.
#[test]
fn a_segment_built_cluster_by_cluster_keeps_every_point_whole() {
    let fs: Arc<dyn FileSystem> = Arc::new(SimFileSystem::new());
    let database = Database::open_with(Arc::clone(&fs), Path::new("/db"), quiet()).unwrap();
    let points = random_points(24_000, 3);
    assert!(points.len() - 2_000 >= sagitta_index::hnsw::ORDERED_BATCH_MIN_ROWS);
    let one_shard = CollectionConfig {
        shard_count: 1,
        ..config()
    };
    let (collection, _) = database
        .import_collection("placed", one_shard, points.clone())
        .unwrap();
    let check = |collection: &sagitta_engine::Collection, deleted: u64| {
        for point in &points {
            let PointId::Number(id) = point.id else {
                unreachable!("numbered")
            };
            let expected = (id >= deleted).then(|| point.clone());
            assert_eq!(collection.get(&point.id).unwrap(), expected, "point {id}");
        }
        let found = points[deleted as usize..]
            .iter()
            .step_by(97)
            .filter(|point| {
                let hits = collection
                    .query(&SearchRequest::new(&point.vector, 1))
                    .unwrap();
                hits.first().map(|hit| hit.id) == Some(point.id)
            })
            .count();
        let asked = points[deleted as usize..].iter().step_by(97).count();
        assert!(
            found * 100 >= asked * 98,
            "{found} of {asked} found themselves"
        );
    };
    check(&collection, 0);
    // deleting 2,000 then vacuuming rebuilds the segment from its 22,000 live points
    let deleted: Vec<PointId> = (0..2_000).map(PointId::Number).collect();
    collection.delete(&deleted, true).unwrap();
    collection.set_policy(sagitta_engine::OptimizerPolicy {
        vacuum_min_deleted: 10,
        vacuum_fraction: 0.05,
        ..sagitta_engine::OptimizerPolicy::default()
    });
    assert!(collection.maintain(fs.as_ref()).unwrap(), "a vacuum ran");
    check(&collection, 2_000);
    drop(collection);
    drop(database);
    let database = Database::open_with(fs, Path::new("/db"), quiet()).unwrap();
    check(&database.collection("placed").unwrap(), 2_000);
}

#[test]
fn a_bad_point_fails_the_whole_import_and_stores_nothing() {
    let sim = SimFileSystem::new();
    let fs: Arc<dyn FileSystem> = Arc::new(sim.clone());
    let database = Database::open_with(Arc::clone(&fs), Path::new("/db"), quiet()).unwrap();
    let mut points = random_points(500, 3);
    points[321].vector[4] = f32::NAN;
    let Err(error) = database.import_collection("bad", config(), points) else {
        panic!("a NaN was imported");
    };
    assert_eq!(
        error,
        EngineError::NonFiniteValue {
            point: "321".to_string(),
            position: 4
        }
    );
    let mut points = random_points(500, 3);
    points[7].vector.pop();
    assert!(matches!(
        database.import_collection("bad", config(), points),
        Err(EngineError::WrongVectorDimension { .. })
    ));
    assert!(database.list().is_empty());
    assert!(matches!(
        database.collection("bad"),
        Err(EngineError::CollectionNotFound { .. })
    ));
    // the name is free again
    database
        .import_collection("bad", config(), random_points(5, 4))
        .unwrap();
}

#[test]
fn import_progress_counts_linked_rows_over_every_shard_and_ends_at_the_total() {
    let fs: Arc<dyn FileSystem> = Arc::new(SimFileSystem::new());
    let database = Database::open_with(Arc::clone(&fs), Path::new("/db"), quiet()).unwrap();
    let mut points = random_points(3_000, 5);
    points.push(points[0].clone()); // a repeated id counts once
    let progress = ImportProgress::new();
    let finished = AtomicBool::new(false);
    let samples = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            let mut samples = Vec::new();
            while !finished.load(Ordering::Acquire) {
                samples.push(progress.get());
                std::thread::yield_now();
            }
            samples.push(progress.get());
            samples
        });
        let (collection, report) = database
            .import_collection_with_progress("p", config(), points, &progress)
            .unwrap();
        finished.store(true, Ordering::Release);
        assert_eq!((report.points, report.segments), (3_000, 2));
        assert_eq!(collection.count(None).unwrap(), 3_000);
        watcher.join().unwrap()
    });
    assert_eq!(samples.last(), Some(&(3_000, 3_000)));
    for (done, total) in &samples {
        assert!(*total == 0 || *total == 3_000, "total {total}");
        assert!(done <= total, "{done} of {total}");
    }
    assert!(
        samples.windows(2).all(|pair| pair[0].0 <= pair[1].0),
        "progress went backwards"
    );
    assert!(
        samples.iter().any(|(done, _)| (1..3_000).contains(done)),
        "no sample between 0 and 3000 in {} polls",
        samples.len()
    );
}

#[test]
fn a_cancelled_import_fails_and_leaves_no_collection_and_no_files() {
    let fs: Arc<dyn FileSystem> = Arc::new(SimFileSystem::new());
    let database = Database::open_with(Arc::clone(&fs), Path::new("/db"), quiet()).unwrap();
    let no_files = |name: &str| {
        let directory = Path::new("/db/collections").join(name);
        let mut listed = fs.list(&directory).unwrap();
        for shard in 0..2 {
            listed.extend(fs.list(&directory.join(format!("shard-{shard}"))).unwrap());
        }
        assert!(listed.is_empty(), "left behind: {listed:?}");
    };
    // cancelled while the second shard's graph is built: the first shard's files exist
    let progress = ImportProgress::new();
    let result = std::thread::scope(|scope| {
        let import = scope.spawn(|| {
            database.import_collection_with_progress(
                "c",
                config(),
                random_points(3_000, 6),
                &progress,
            )
        });
        while progress.get().0 < 2_000 && !import.is_finished() {
            std::thread::yield_now();
        }
        progress.cancel();
        import.join().unwrap()
    });
    let Err(error) = result else {
        panic!(
            "the import finished before the cancel: {:?}",
            progress.get()
        );
    };
    assert_eq!(
        error,
        EngineError::Cancelled {
            operation: "import"
        }
    );
    assert!(progress.get().0 < 3_000, "{:?}", progress.get());
    assert!(database.list().is_empty());
    no_files("c");
    // cancelled before it starts
    let progress = ImportProgress::new();
    progress.cancel();
    assert_eq!(
        database
            .import_collection_with_progress("c", config(), random_points(50, 6), &progress)
            .err(),
        Some(EngineError::Cancelled {
            operation: "import"
        })
    );
    no_files("c");
    // the name is free
    database
        .import_collection("c", config(), random_points(5, 7))
        .unwrap();
    assert_eq!(database.list(), vec!["c".to_string()]);
}

/// Power fails at a random moment of an import (after its k-th write, for every k, with a
/// random torn prefix of unsynced data): after reopening, the collection is absent or
/// complete — never partial.
#[test]
fn a_crash_during_an_import_leaves_nothing_or_everything() {
    let points = random_points(1_200, 5);
    let mut saw_absent = false;
    let mut saw_complete = false;
    for failing_write in 1..=16u64 {
        let sim = SimFileSystem::new();
        let fs: Arc<dyn FileSystem> = Arc::new(sim.clone());
        let database = Database::open_with(Arc::clone(&fs), Path::new("/db"), quiet()).unwrap();
        sim.fail_write_after(failing_write);
        let imported = database.import_collection("c", config(), points.clone());
        drop(database);
        sim.fail_write_after(u64::MAX);
        sim.crash(&mut ChaCha8Rng::seed_from_u64(failing_write));
        let database = Database::open_with(Arc::clone(&fs), Path::new("/db"), quiet()).unwrap();
        match database.collection("c") {
            Ok(collection) => {
                saw_complete = true;
                assert!(
                    imported.is_ok(),
                    "k={failing_write}: listed after a failure"
                );
                assert_eq!(collection.count(None).unwrap(), 1_200, "k={failing_write}");
                let point = collection.get(&PointId::Number(777)).unwrap().unwrap();
                assert_eq!(point, points[777]);
            }
            Err(EngineError::CollectionNotFound { .. }) => {
                saw_absent = true;
                // and the name can be imported again over the leftovers
                database
                    .import_collection("c", config(), points[..50].to_vec())
                    .unwrap();
                assert_eq!(database.collection("c").unwrap().count(None).unwrap(), 50);
            }
            Err(other) => panic!("k={failing_write}: {other}"),
        }
    }
    assert!(saw_absent && saw_complete);
}

fn half_disk_config() -> CollectionConfig {
    CollectionConfig {
        dim: DIM,
        distance: Distance::Dot,
        shard_count: 1,
        storage: StorageConfig {
            segment_kind: SegmentKindName::Disk,
            page_cache_mb: 1,
            datatype: Datatype::Float16,
            partition_size: DEFAULT_PARTITION_SIZE,
            vectors_on_disk: false,
            graph: sagitta_engine::DEFAULT_GRAPH,
            placement: sagitta_engine::Placement::Spread,
            vectors_far: false,
        },
    }
}

fn rounded(vector: &[f32]) -> Vec<f32> {
    vector
        .iter()
        .map(|value| half::f16::from_f32(*value).to_f32())
        .collect()
}

/// Rows lent in place (in practice a memory-mapped file larger than RAM) build a disk
/// collection without a point being made of them. With float16 every stored vector is its
/// row rounded to half precision — what an upsert into the same collection stores — and
/// the exact search ranks those stored vectors.
#[test]
fn rows_lent_in_place_build_a_disk_collection_with_half_precision_records() {
    let fs: Arc<dyn FileSystem> = Arc::new(SimFileSystem::new());
    let database = Database::open_with(Arc::clone(&fs), Path::new("/db"), quiet()).unwrap();
    let rows: Vec<f32> = random_points(3_000, 7)
        .into_iter()
        .flat_map(|point| point.vector)
        .collect();
    let ids: Vec<PointId> = (0..3_000).map(PointId::Number).collect();
    let source = ImportSource::Rows {
        ids: ids.clone(),
        vectors: &rows,
    };
    let (collection, report) = database
        .import_collection_with_progress("rows", half_disk_config(), source, &ImportProgress::new())
        .unwrap();
    assert_eq!((report.points, report.segments), (3_000, 1));
    for (id, row) in ids.iter().zip(rows.chunks_exact(DIM)) {
        let point = collection.get(id).unwrap().expect("imported");
        assert_eq!(point.vector, rounded(row), "point {id}");
        assert_ne!(point.vector, row, "point {id} is rounded");
        assert_eq!(point.payload, None);
    }
    let query = &rows[DIM..2 * DIM];
    let mut truth: Vec<(f32, PointId)> = ids
        .iter()
        .zip(rows.chunks_exact(DIM))
        .map(|(id, row)| {
            let dot: f32 = rounded(row).iter().zip(query).map(|(a, b)| a * b).sum();
            (-dot, *id)
        })
        .collect();
    truth.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let exact = collection
        .query(&SearchRequest {
            strategy: Strategy::Exact,
            ..SearchRequest::new(query, 10)
        })
        .unwrap();
    let found: Vec<PointId> = exact.iter().map(|hit| hit.id).collect();
    let expected: Vec<PointId> = truth[..10].iter().map(|(_, id)| *id).collect();
    assert_eq!(found, expected);
    // an upsert stores the same rounding, and both survive a reopen
    let upserted = Point {
        id: PointId::Number(5_000),
        vector: rows[..DIM].to_vec(),
        payload: None,
        side: Vec::new(),
    };
    collection.upsert(vec![upserted], true).unwrap();
    drop(collection);
    drop(database);
    let database = Database::open_with(fs, Path::new("/db"), quiet()).unwrap();
    let reopened = database.collection("rows").unwrap();
    let stored = reopened.get(&PointId::Number(5_000)).unwrap().unwrap();
    assert_eq!(stored.vector, rounded(&rows[..DIM]));
    assert_eq!(
        reopened
            .get(&PointId::Number(2_999))
            .unwrap()
            .unwrap()
            .vector,
        rounded(&rows[2_999 * DIM..])
    );
    assert_eq!(reopened.count(None).unwrap(), 3_001);
}

/// Lent rows are checked like points: a short slice, a non-finite value and repeated ids
/// (the last wins, as for points) — nothing is published by a refused import.
#[test]
fn lent_rows_are_checked_and_repeated_ids_keep_the_last() {
    let fs: Arc<dyn FileSystem> = Arc::new(SimFileSystem::new());
    let database = Database::open_with(Arc::clone(&fs), Path::new("/db"), quiet()).unwrap();
    let mut rows: Vec<f32> = random_points(400, 8)
        .into_iter()
        .flat_map(|point| point.vector)
        .collect();
    let ids: Vec<PointId> = (0..400).map(PointId::Number).collect();
    let import = |name: &str, ids: Vec<PointId>, vectors: &[f32]| {
        database.import_collection_with_progress(
            name,
            half_disk_config(),
            ImportSource::Rows { ids, vectors },
            &ImportProgress::new(),
        )
    };
    let Err(error) = import("short", ids.clone(), &rows[..rows.len() - 1]) else {
        panic!("a short slice was imported");
    };
    assert_eq!(
        error,
        EngineError::RowsMismatch {
            ids: 400,
            values: 400 * DIM - 1,
            dim: DIM
        }
    );
    rows[37 * DIM + 2] = f32::INFINITY;
    let Err(error) = import("infinite", ids.clone(), &rows) else {
        panic!("an infinite value was imported");
    };
    assert_eq!(
        error,
        EngineError::NonFiniteValue {
            point: "37".to_string(),
            position: 2
        }
    );
    assert!(database.list().is_empty());
    rows[37 * DIM + 2] = 0.25;
    let mut repeated = ids;
    repeated[399] = PointId::Number(5);
    let (collection, report) = import("repeated", repeated, &rows).unwrap();
    assert_eq!(report.points, 399);
    assert_eq!(
        collection.get(&PointId::Number(5)).unwrap().unwrap().vector,
        rounded(&rows[399 * DIM..])
    );
    assert_eq!(
        collection
            .get(&PointId::Number(37))
            .unwrap()
            .unwrap()
            .vector,
        rounded(&rows[37 * DIM..38 * DIM])
    );
}
