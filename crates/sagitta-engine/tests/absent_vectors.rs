//! Points without their vector in a collection with one unnamed vector (Qdrant's
//! `delete_vectors` of `""`, or an upsert with `vector: {}`): stored as NaNs, kept with
//! their payload, found by no search, counted by `has_vector` only once a vector is
//! written again — in the write buffer, in a buffer graph, in a buffer that joined a
//! segment's graph, sealed (vectors in RAM or in records files), merged, and after a
//! restart. Disk segments refuse such points by name.

use std::collections::HashMap;
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_engine::{
    Collection, CollectionConfig, Distance, Filter, Point, PointId, SearchRequest, SegmentKindName,
    StorageConfig, Strategy,
};
use sagitta_storage::sim::SimFileSystem;

/// Wide enough that a sealed segment's vectors exceed the full-scan threshold (10,000 KiB),
/// so its graph is walked, not scanned.
const DIM: usize = 768;
const POINTS: u64 = 8_000;

/// The model: each point's vector, `None` where it has none.
type Model = HashMap<u64, Option<Vec<f32>>>;

fn number(id: PointId) -> u64 {
    match id {
        PointId::Number(number) => number,
        PointId::Uuid(_) => unreachable!("numeric ids only"),
    }
}

/// A vector near one of 32 fixed centers (embeddings cluster; uniform noise in 768-d has
/// no neighborhoods for a graph to follow, and its recall says little about the wiring).
fn clustered(rng: &mut ChaCha8Rng) -> Vec<f32> {
    let center = rng.gen_range(0..32u64);
    let mut at_center = ChaCha8Rng::seed_from_u64(center);
    (0..DIM)
        .map(|_| at_center.gen_range(-1.0..1.0) + rng.gen_range(-0.3..0.3))
        .collect()
}

/// Points `ids`, every one for which `absent` holds without its vector (given empty).
fn write(
    collection: &Collection,
    model: &mut Model,
    ids: impl Iterator<Item = u64>,
    absent: impl Fn(u64) -> bool,
    rng: &mut ChaCha8Rng,
) {
    let points: Vec<Point> = ids
        .map(|id| {
            let vector: Option<Vec<f32>> = (!absent(id)).then(|| clustered(rng));
            model.insert(id, vector.clone());
            Point {
                id: PointId::Number(id),
                vector: vector.unwrap_or_default(),
                payload: Some(format!("{{\"id\": {id}}}")),
                side: Vec::new(),
            }
        })
        .collect();
    collection.upsert(points, true).unwrap();
}

/// Lower is closer: squared L2, or the negated dot product (of unit vectors for cosine).
fn distance(metric: Distance, a: &[f32], b: &[f32]) -> f64 {
    let pairs = a.iter().zip(b).map(|(x, y)| (f64::from(*x), f64::from(*y)));
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    match metric {
        Distance::Euclid => pairs.map(|(x, y)| (x - y).powi(2)).sum(),
        Distance::Dot => -pairs.map(|(x, y)| x * y).sum::<f64>(),
        Distance::Cosine => -pairs.map(|(x, y)| x * y).sum::<f64>() / (norm(a) * norm(b)),
    }
}

/// The exact top `k` among points with a vector, closest first, ties by id.
fn brute_force(model: &Model, metric: Distance, query: &[f32], k: usize) -> Vec<u64> {
    let mut scored: Vec<(f64, u64)> = model
        .iter()
        .filter_map(|(id, vector)| Some((distance(metric, query, vector.as_ref()?), *id)))
        .collect();
    scored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(k).map(|(_, id)| id).collect()
}

fn has_vector() -> Filter {
    Filter::parse(&serde_json::json!({"must": [{"has_vector": ""}]}), "filter").unwrap()
}

fn check(collection: &Collection, model: &Model, moment: &str) {
    let metric = collection.config().distance;
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (mut found, mut total) = (0, 0);
    for _ in 0..20 {
        let query = clustered(&mut rng);
        let expected = brute_force(model, metric, &query, 10);
        for strategy in [Strategy::Exact, Strategy::Beam(64)] {
            let hits = collection
                .query(&SearchRequest {
                    strategy,
                    ..SearchRequest::new(&query, 10)
                })
                .unwrap();
            let ids: Vec<u64> = hits.iter().map(|hit| number(hit.id)).collect();
            if let Some(id) = ids.iter().find(|id| model[*id].is_none()) {
                panic!("{moment}: {strategy:?} returned point {id}, which has no vector");
            }
            if strategy == Strategy::Exact {
                assert_eq!(ids, expected, "{moment}: exact search");
            } else {
                found += ids.iter().filter(|id| expected.contains(id)).count();
                total += expected.len();
            }
        }
    }
    let recall = found as f64 / total as f64;
    eprintln!("{moment}: recall {recall}");
    assert!(recall >= 0.95, "{moment}: recall {recall}");
    assert_eq!(
        collection.count(None).unwrap(),
        model.len(),
        "{moment}: every point kept"
    );
    let bound = collection.bind_filter(&has_vector()).unwrap().unwrap();
    let having = model.values().filter(|vector| vector.is_some()).count();
    assert_eq!(
        collection.count(Some(&bound)).unwrap(),
        having,
        "{moment}: has_vector"
    );
    for (id, vector) in model.iter().filter(|(id, _)| *id % 13 == 0) {
        let point = collection.get(&PointId::Number(*id)).unwrap().unwrap();
        assert_eq!(
            point.payload.as_deref(),
            Some(format!("{{\"id\":{id}}}").as_str())
        );
        match vector {
            None => assert!(
                point.vector.len() == DIM && point.vector.iter().all(|v| v.is_nan()),
                "{moment}: point {id} should have no vector"
            ),
            Some(vector) => {
                // a cosine collection stores unit vectors
                let scale = match metric {
                    Distance::Cosine => vector.iter().map(|x| x * x).sum::<f32>().sqrt(),
                    Distance::Dot | Distance::Euclid => 1.0,
                };
                let same = point
                    .vector
                    .iter()
                    .zip(vector)
                    .all(|(got, given)| (got - given / scale).abs() < 1e-5);
                assert!(same, "{moment}: point {id}'s vector");
            }
        }
    }
}

fn run(vectors_on_disk: bool, metric: Distance) {
    let fs = SimFileSystem::new();
    let directory = Path::new("/db/absent");
    let config = CollectionConfig {
        dim: DIM,
        distance: metric,
        shard_count: 1,
        storage: StorageConfig {
            vectors_on_disk,
            ..StorageConfig::default()
        },
    };
    let collection = Collection::create(&fs, directory, config).unwrap();
    let mut policy = collection.policy();
    policy.index_min_rows = 100;
    collection.set_policy(policy);
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut model = Model::new();
    write(
        &collection,
        &mut model,
        0..POINTS / 2,
        |id| id % 4 == 0,
        &mut rng,
    );
    check(&collection, &model, "in the write buffer");
    while collection.index_buffers(10_000) {}
    check(&collection, &model, "in a buffer graph");
    collection.optimize(&fs).unwrap();
    check(&collection, &model, "sealed");
    // absent points get vectors, present ones lose theirs; new points join
    let rewritten = (0..400).chain(POINTS / 2..POINTS);
    write(
        &collection,
        &mut model,
        rewritten,
        |id| id % 4 == 1,
        &mut rng,
    );
    while collection.index_buffers(10_000) {}
    check(&collection, &model, "sealed and buffered");
    collection.optimize(&fs).unwrap();
    let mut policy = collection.policy();
    policy.max_segments = 1;
    collection.set_policy(policy);
    while collection.maintain(&fs).unwrap() {}
    check(&collection, &model, "merged");
    drop(collection);
    let reopened = Collection::open(&fs, directory).unwrap();
    check(&reopened, &model, "after a restart");
}

#[test]
fn points_without_their_vector_are_kept_and_never_found() {
    run(false, Distance::Euclid);
}

#[test]
fn points_without_their_vector_in_records_files() {
    run(true, Distance::Cosine);
}

#[test]
fn disk_segments_refuse_points_without_their_vector_by_name() {
    let fs = SimFileSystem::new();
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Cosine,
        shard_count: 1,
        storage: StorageConfig {
            segment_kind: SegmentKindName::Disk,
            ..StorageConfig::default()
        },
    };
    let collection = Collection::create(&fs, Path::new("/db/disk"), config).unwrap();
    let point = Point {
        id: PointId::Number(7),
        vector: vec![f32::NAN; DIM],
        payload: None,
        side: Vec::new(),
    };
    let error = collection
        .upsert(vec![point], true)
        .unwrap_err()
        .to_string();
    assert!(error.contains("point 7 has no vector"), "{error}");
    assert_eq!(collection.count(None).unwrap(), 0);
    // a vector with some NaNs is an error in any collection, not a point without one
    let mut partial = vec![0.5; DIM];
    partial[2] = f32::NAN;
    let hnsw = Collection::create(
        &fs,
        Path::new("/db/hnsw"),
        CollectionConfig {
            dim: DIM,
            distance: Distance::Cosine,
            shard_count: 1,
            storage: StorageConfig::default(),
        },
    )
    .unwrap();
    let point = Point {
        id: PointId::Number(8),
        vector: partial,
        payload: None,
        side: Vec::new(),
    };
    let error = hnsw.upsert(vec![point], true).unwrap_err().to_string();
    assert!(error.contains("position 2"), "{error}");
}
