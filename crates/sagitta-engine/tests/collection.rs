//! Collections: search against brute force, bad input, writes during seals and merges.
//! The seeded crash simulation against a model is in `crash_model.rs`.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_engine::collection::MAX_PAYLOAD_BYTES;
use sagitta_engine::{
    Collection, CollectionConfig, Distance, EngineError, OptimizerPolicy, Point, PointId,
};
use sagitta_storage::sim::SimFileSystem;

const DIM: usize = 8;

fn vector_for(id: u64, version: u64) -> Vec<f32> {
    (0..DIM)
        .map(|j| ((id * 31 + version * 7 + j as u64 * 13) % 97) as f32 / 97.0 - 0.5)
        .collect()
}

fn point(id: u64, version: u64) -> Point {
    Point {
        id: PointId::Number(id),
        vector: vector_for(id, version),
        payload: Some(format!(r#"{{"version":{version}}}"#)),
        side: Vec::new(),
    }
}

fn config(distance: Distance, shard_count: usize) -> CollectionConfig {
    CollectionConfig {
        dim: DIM,
        distance,
        shard_count,
        storage: Default::default(),
    }
}

#[test]
fn search_matches_brute_force_across_shards() {
    for distance in [Distance::Cosine, Distance::Dot, Distance::Euclid] {
        let fs = SimFileSystem::new();
        let collection = Collection::create(&fs, Path::new("/c"), config(distance, 3)).unwrap();
        let points: Vec<Point> = (0..300).map(|id| point(id, 0)).collect();
        collection.upsert(points.clone(), true).unwrap();
        collection
            .upsert(
                vec![Point {
                    id: PointId::Uuid(42),
                    vector: vector_for(999, 1),
                    payload: None,
                    side: Vec::new(),
                }],
                false,
            )
            .unwrap();
        assert_eq!(collection.count(None).unwrap(), 301);
        let query = vector_for(5, 3);
        let hits = collection.search(&query, 10, None).unwrap();
        assert_eq!(hits.len(), 10);
        let score = |v: &[f32]| -> f64 {
            let dot: f64 = v.iter().zip(&query).map(|(a, b)| f64::from(a * b)).sum();
            let norm = |x: &[f32]| x.iter().map(|a| f64::from(a * a)).sum::<f64>().sqrt();
            match distance {
                Distance::Dot => dot,
                Distance::Cosine => dot / (norm(v) * norm(&query)),
                Distance::Euclid => -v
                    .iter()
                    .zip(&query)
                    .map(|(a, b)| f64::from(a - b).powi(2))
                    .sum::<f64>()
                    .sqrt(),
            }
        };
        let mut all: Vec<(f64, u64)> = (0..300).map(|id| (score(&vector_for(id, 0)), id)).collect();
        all.push((score(&vector_for(999, 1)), u64::MAX));
        all.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (hit, (expected, _)) in hits.iter().zip(&all) {
            let signed = if distance == Distance::Euclid {
                -f64::from(hit.score)
            } else {
                f64::from(hit.score)
            };
            assert!((signed - expected).abs() < 1e-4, "{distance:?}");
        }
    }
}

#[test]
fn search_spans_sealed_segments_and_the_buffer() {
    let fs = SimFileSystem::new();
    let collection = Collection::create(&fs, Path::new("/c"), config(Distance::Cosine, 2)).unwrap();
    let dim = DIM;
    // distinct, well-spread vectors: a seeded generator per id
    let vector = |id: u64| -> Vec<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(id);
        (0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect()
    };
    let points = |ids: std::ops::Range<u64>| -> Vec<Point> {
        ids.map(|id| Point {
            id: PointId::Number(id),
            vector: vector(id),
            payload: Some(format!(r#"{{"even":{}}}"#, id % 2 == 0)),
            side: Vec::new(),
        })
        .collect()
    };
    collection.upsert(points(0..3_000), true).unwrap();
    assert_eq!(collection.optimize(&fs).unwrap(), 3_000);
    assert_eq!(collection.point_counts(), (3_000, 0));
    collection.upsert(points(3_000..3_500), true).unwrap();
    // move two sealed points (new vectors) and delete one sealed and one buffered point
    let moved = [PointId::Number(10), PointId::Number(11)];
    collection
        .upsert(
            moved
                .iter()
                .map(|id| Point {
                    id: *id,
                    vector: vector(9_999),
                    payload: None,
                    side: Vec::new(),
                })
                .collect(),
            true,
        )
        .unwrap();
    collection
        .delete(&[PointId::Number(12), PointId::Number(3_001)], true)
        .unwrap();
    assert_eq!(collection.point_counts(), (2_997, 501));
    assert_eq!(collection.count(None).unwrap(), 3_498);

    let hits = collection.search(&vector(9_999), 2, None).unwrap();
    let ids: HashSet<PointId> = hits.iter().map(|hit| hit.id).collect();
    assert_eq!(
        ids,
        moved.into_iter().collect(),
        "moved points found at their new vector"
    );
    for probe in [12, 3_001] {
        let hits = collection.search(&vector(probe), 5, None).unwrap();
        assert!(
            hits.iter().all(|hit| hit.id != PointId::Number(probe)),
            "deleted {probe}"
        );
    }
    // recall of the merged HNSW + exact search against brute force, with a filter
    let filter = sagitta_engine::Filter::parse(
        &serde_json::json!({"must": [{"key": "even", "match": {"value": true}}]}),
        "filter",
    )
    .unwrap();
    let live: Vec<(u64, Vec<f32>)> = collection
        .points()
        .unwrap()
        .into_iter()
        .filter_map(|p| match p.id {
            PointId::Number(id) if p.payload.as_deref() == Some(r#"{"even":true}"#) => {
                Some((id, p.vector))
            }
            _ => None,
        })
        .collect();
    let mut found = 0;
    for q in 0..40u64 {
        let query = vector(50_000 + q);
        let norm: f32 = query.iter().map(|v| v * v).sum::<f32>().sqrt();
        let mut exact: Vec<(f32, u64)> = live
            .iter()
            .map(|(id, v)| {
                (
                    -v.iter().zip(&query).map(|(a, b)| a * b / norm).sum::<f32>(),
                    *id,
                )
            })
            .collect();
        exact.sort_by(|a, b| a.0.total_cmp(&b.0));
        let truth: HashSet<u64> = exact[..10].iter().map(|(_, id)| *id).collect();
        let hits = collection.search(&query, 10, Some(&filter)).unwrap();
        found += hits
            .iter()
            .filter(|hit| matches!(hit.id, PointId::Number(id) if truth.contains(&id)))
            .count();
    }
    let recall = found as f64 / 400.0;
    eprintln!("filtered recall@10 over segments + buffer: {recall}");
    assert!(recall >= 0.95, "recall {recall}");
    // and all of it survives a reopen
    drop(collection);
    let reopened = Collection::open(&fs, Path::new("/c")).unwrap();
    assert_eq!(reopened.point_counts(), (2_997, 501));
}

/// A seal failing at its k-th write or k-th directory sync, for every k: whatever the seal got through, a write
/// acknowledged after the failure must survive a clean reopen. When the manifest
/// publication itself failed (the rename may or may not be on disk), the shard refuses
/// writes until reopened instead of logging to a log the disk may no longer name.
#[test]
fn a_failed_seal_never_loses_later_acknowledged_writes() {
    let mut refused = 0;
    let faults = (1..=8u64)
        .map(|k| (k, false))
        .chain((1..=4u64).map(|k| (k, true)));
    for (failing_write, directory_sync) in faults {
        let fs = SimFileSystem::new();
        let directory = Path::new("/c");
        let collection = Collection::create(&fs, directory, config(Distance::Dot, 1)).unwrap();
        collection
            .upsert((0..50).map(|id| point(id, 1)).collect(), true)
            .unwrap();
        if directory_sync {
            fs.fail_directory_sync_after(failing_write);
        } else {
            fs.fail_write_after(failing_write);
        }
        let sealed = collection.optimize(&fs);
        fs.fail_write_after(u64::MAX);
        fs.fail_directory_sync_after(u64::MAX);
        let accepted = match collection.upsert(vec![point(99, 1)], true) {
            Ok(()) => true,
            Err(error) => {
                assert!(sealed.is_err(), "k={failing_write}: {error}");
                assert!(error.to_string().contains("refuses writes"), "{error}");
                refused += 1;
                false
            }
        };
        assert_eq!(
            collection.count(None).unwrap(),
            50 + usize::from(accepted),
            "reads still work"
        );
        drop(collection);
        let reopened = Collection::open(&fs, directory).unwrap();
        assert_eq!(
            reopened.count(None).unwrap(),
            50 + usize::from(accepted),
            "k={failing_write}: an acknowledged write was lost"
        );
        reopened.upsert(vec![point(100, 1)], true).unwrap();
    }
    assert!(refused > 0, "some k hits the manifest publication");
}

/// Writers keep going while a seal builds its segment; afterwards, and after a reopen, the
/// collection holds exactly the result of every write, in order.
#[test]
fn writes_during_a_seal_are_kept_exactly() {
    writes_during_maintenance_are_kept_exactly(3_000, |fs, collection| {
        collection.optimize(fs).unwrap() > 0
    });
}

/// The same while merges and vacuums rebuild segments: a point deleted or replaced while
/// its segment is being merged must not come back from the merged segment.
#[test]
fn writes_during_merges_are_kept_exactly() {
    writes_during_maintenance_are_kept_exactly(10_000, |fs, collection| {
        // merges and vacuums, with seals of small buffers explicit and by size
        collection.set_policy(OptimizerPolicy {
            seal_points: 400,
            seal_idle: Duration::MAX,
            vacuum_min_deleted: 10,
            vacuum_fraction: 0.05,
            max_segments: 2,
            retry_after_error: Duration::ZERO,
            index_min_rows: 50,
        });
        // the indexer grows the buffer's graph while the writer retires slots in it
        for _ in 0..50 {
            if !collection.index_buffers(64) {
                break;
            }
        }
        let sealed = collection.optimize(fs).unwrap() > 0;
        let merged = collection.maintain(fs).unwrap();
        sealed || merged
    });
}

fn writes_during_maintenance_are_kept_exactly(
    rounds: u64,
    maintenance: impl Fn(&SimFileSystem, &Collection) -> bool,
) {
    let fs = SimFileSystem::new();
    let directory = Path::new("/c");
    let collection = Collection::create(&fs, directory, config(Distance::Euclid, 2)).unwrap();
    collection
        .upsert((0..3_000).map(|id| point(id, 1)).collect(), true)
        .unwrap();
    let mut expected: HashMap<u64, u64> = (0..3_000).map(|id| (id, 1)).collect();
    let seals = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut log = Vec::new();
            for round in 0..rounds {
                if rounds > 3_000 {
                    // pace the writer so merges of small segments overlap its writes
                    std::thread::sleep(Duration::from_micros(50));
                }
                let id = (round * 37) % 3_500; // old (frozen or sealed) and new ids
                if round % 5 == 4 {
                    collection
                        .delete(&[PointId::Number(id)], round % 2 == 0)
                        .unwrap();
                    log.push((id, None));
                } else {
                    collection
                        .upsert(vec![point(id, 2 + round)], round % 2 == 0)
                        .unwrap();
                    log.push((id, Some(2 + round)));
                }
            }
            log
        });
        let mut seals = 0;
        while !writer.is_finished() {
            seals += usize::from(maintenance(&fs, &collection));
            // readers are never blocked and never see a half state
            assert!(collection.search(&vector_for(1, 1), 5, None).unwrap().len() == 5);
        }
        for (id, version) in writer.join().unwrap() {
            match version {
                Some(version) => expected.insert(id, version),
                None => expected.remove(&id),
            };
        }
        seals
    });
    eprintln!("{seals} seals or merges overlapped the writer");
    assert!(seals >= 1);
    // every live point exactly once: a stale copy next to its newer version is a failure
    let state = |collection: &Collection| -> HashMap<u64, u64> {
        let points = collection.points().unwrap();
        let count = points.len();
        let state: HashMap<u64, u64> = points
            .into_iter()
            .map(|p| {
                let PointId::Number(id) = p.id else {
                    unreachable!()
                };
                let version: u64 = p
                    .payload
                    .unwrap()
                    .trim_start_matches(r#"{"version":"#)
                    .trim_end_matches('}')
                    .parse()
                    .unwrap();
                assert_eq!(p.vector, vector_for(id, version));
                (id, version)
            })
            .collect();
        assert_eq!(state.len(), count, "a point appears twice");
        state
    };
    assert_eq!(state(&collection), expected);
    assert_eq!(collection.count(None).unwrap(), expected.len());
    collection.optimize(&fs).unwrap();
    drop(collection);
    let reopened = Collection::open(&fs, directory).unwrap();
    assert_eq!(state(&reopened), expected);
}

/// A filter that passes 0.1% of a sealed segment is planned as an exact scan of the points
/// that pass: every one of them is found, in exact order.
#[test]
fn selective_filters_on_sealed_segments_are_exact() {
    let fs = SimFileSystem::new();
    let collection = Collection::create(&fs, Path::new("/c"), config(Distance::Euclid, 1)).unwrap();
    let vector = |id: u64| -> Vec<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(id);
        (0..DIM).map(|_| rng.gen_range(-1.0..1.0)).collect()
    };
    let points = (0..5_000u64)
        .map(|id| Point {
            id: PointId::Number(id),
            vector: vector(id),
            payload: Some(format!(r#"{{"rare":{}}}"#, id % 1_000 == 7)),
            side: Vec::new(),
        })
        .collect();
    collection.upsert(points, true).unwrap();
    collection.optimize(&fs).unwrap();
    let filter = sagitta_engine::Filter::parse(
        &serde_json::json!({"must": [{"key": "rare", "match": {"value": true}}]}),
        "filter",
    )
    .unwrap();
    let query = vector(123_456);
    let hits = collection.search(&query, 3, Some(&filter)).unwrap();
    let mut expected: Vec<(f32, u64)> = [7u64, 1_007, 2_007, 3_007, 4_007]
        .iter()
        .map(|id| {
            let d: f32 = vector(*id)
                .iter()
                .zip(&query)
                .map(|(a, b)| (a - b) * (a - b))
                .sum();
            (d.sqrt(), *id)
        })
        .collect();
    expected.sort_by(|a, b| a.0.total_cmp(&b.0));
    expected.truncate(3);
    let found: Vec<PointId> = hits.iter().map(|hit| hit.id).collect();
    let wanted: Vec<PointId> = expected
        .iter()
        .map(|(_, id)| PointId::Number(*id))
        .collect();
    assert_eq!(found, wanted);
    for (hit, (distance, _)) in hits.iter().zip(&expected) {
        assert!((hit.score - distance).abs() < 1e-5);
    }
}

#[test]
fn bad_input_is_rejected_and_nothing_is_stored() {
    let fs = SimFileSystem::new();
    let directory = Path::new("/c");
    let collection = Collection::create(&fs, directory, config(Distance::Dot, 2)).unwrap();
    let mut batch: Vec<Point> = (0..5).map(|id| point(id, 0)).collect();
    batch[3].vector.pop();
    let error = collection.upsert(batch.clone(), true).unwrap_err();
    assert!(matches!(
        error,
        EngineError::WrongVectorDimension {
            expected: 8,
            received: 7,
            ..
        }
    ));
    assert!(error.to_string().contains("point 3"), "{error}");
    // NaNs only are a point without its vector (tests/absent_vectors.rs); one is an error
    batch[3].vector = vec![0.5; DIM];
    batch[3].vector[2] = f32::NAN;
    assert!(matches!(
        collection.upsert(batch.clone(), true),
        Err(EngineError::NonFiniteValue { position: 2, .. })
    ));
    // finite, but scores against it would overflow f32 (JSON null in a 200 before)
    batch[3].vector = vec![3e18; DIM];
    let error = collection.upsert(batch.clone(), true).unwrap_err();
    assert!(
        matches!(error, EngineError::VectorNormTooLarge { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("point 3"), "{error}");
    assert!(matches!(
        collection.search(&[3e18; DIM], 1, None),
        Err(EngineError::VectorNormTooLarge { .. })
    ));
    batch[3] = point(3, 0);
    batch[3].payload = Some("x".repeat(MAX_PAYLOAD_BYTES + 1));
    assert!(matches!(
        collection.upsert(batch.clone(), true),
        Err(EngineError::PayloadTooLarge { .. })
    ));
    batch[3].payload = Some(r#"{"unterminated": "#.to_string());
    let error = collection.upsert(batch.clone(), true).unwrap_err();
    assert!(
        matches!(error, EngineError::InvalidPayload { .. }),
        "{error}"
    );
    batch[3].payload = Some("[1, 2]".to_string());
    assert!(matches!(
        collection.upsert(batch, true),
        Err(EngineError::InvalidPayload { .. })
    ));
    assert_eq!(collection.count(None).unwrap(), 0);
    assert!(matches!(
        collection.search(&[0.0; 3], 5, None),
        Err(EngineError::WrongVectorDimension { .. })
    ));
    assert!(matches!(
        collection.search(&[0.0; DIM], 0, None),
        Err(EngineError::ParameterOutOfRange { name: "limit", .. })
    ));
    // duplicate create, unknown collection, bad config
    assert!(matches!(
        Collection::create(&fs, directory, config(Distance::Dot, 2)),
        Err(EngineError::CollectionExists { .. })
    ));
    assert!(matches!(
        Collection::open(&fs, Path::new("/missing")),
        Err(EngineError::CollectionNotFound { .. })
    ));
    assert!(matches!(
        Collection::create(&fs, Path::new("/d"), config(Distance::Dot, 0)),
        Err(EngineError::ParameterOutOfRange {
            name: "shard_number",
            ..
        })
    ));
    // a reopen after all of that still finds nothing
    drop(collection);
    assert_eq!(
        Collection::open(&fs, directory)
            .unwrap()
            .count(None)
            .unwrap(),
        0
    );
}

/// Vectors up to the norm limit score finitely under every distance, exact and through a
/// sealed segment's graph.
#[test]
fn scores_are_finite_up_to_the_norm_limit() {
    let fs = SimFileSystem::new();
    let side = (sagitta_engine::collection::MAX_VECTOR_NORM / (DIM as f64).sqrt()) as f32;
    for distance in [Distance::Dot, Distance::Euclid, Distance::Cosine] {
        let directory = format!("/{distance:?}");
        let collection =
            Collection::create(&fs, Path::new(&directory), config(distance, 1)).unwrap();
        let points: Vec<Point> = (0..2_000u64)
            .map(|id| {
                let sign = if id % 2 == 0 { 1.0 } else { -1.0 };
                let mut vector = vec![side * 0.999 * sign; DIM];
                vector[(id % DIM as u64) as usize] *= -0.5;
                Point {
                    id: PointId::Number(id),
                    vector,
                    payload: None,
                    side: Vec::new(),
                }
            })
            .collect();
        let query = points[1].vector.clone();
        collection.upsert(points, true).unwrap();
        for sealed in [false, true] {
            if sealed {
                collection.optimize(&fs).unwrap();
            }
            for hit in collection.search(&query, 10, None).unwrap() {
                assert!(
                    hit.score.is_finite(),
                    "{distance:?} sealed={sealed}: {hit:?}"
                );
            }
        }
    }
}

#[test]
fn the_settings_document_is_kept_with_the_manifest_across_restarts_and_index_changes() {
    let fs = SimFileSystem::new();
    let directory = Path::new("/db/settings");
    let collection = Collection::create(&fs, directory, config(Distance::Dot, 1)).unwrap();
    assert_eq!(collection.settings(), "");
    let settings = r#"{"metadata":{"owner":"team"}}"#;
    collection.set_settings(&fs, settings).unwrap();
    // a payload index republishes the manifest: the settings stay in it
    collection
        .create_payload_index(&fs, "kind", sagitta_engine::FieldType::Keyword)
        .unwrap();
    for bad in ["[1]", "{\"a\":", &"x".repeat(70_000)] {
        let error = collection.set_settings(&fs, bad).unwrap_err().to_string();
        assert!(error.contains("settings"), "{bad}: {error}");
    }
    drop(collection);
    let reopened = Collection::open(&fs, directory).unwrap();
    assert_eq!(reopened.settings(), settings);
    reopened.set_settings(&fs, "").unwrap();
    drop(reopened);
    assert_eq!(Collection::open(&fs, directory).unwrap().settings(), "");
}
