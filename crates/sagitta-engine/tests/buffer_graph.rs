//! The write buffer's graph: searches over a buffer the indexer has partly indexed return
//! only live, current points (never a retired slot), find the true neighbours, and the seal
//! that turns the graph into a segment keeps exactly the live points.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_engine::{
    Collection, CollectionConfig, Distance, OptimizerPolicy, Point, PointId, SearchRequest,
    Strategy,
};
use sagitta_storage::sim::SimFileSystem;

const DIM: usize = 16;

fn random_vector(rng: &mut ChaCha8Rng) -> Vec<f32> {
    (0..DIM).map(|_| rng.gen_range(-1.0..1.0)).collect()
}

fn l2(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum()
}

/// Points with these ids and random vectors, recorded in `model`.
fn random_points(
    ids: impl Iterator<Item = u64>,
    model: &mut HashMap<u64, Vec<f32>>,
    rng: &mut ChaCha8Rng,
) -> Vec<Point> {
    ids.map(|id| {
        let vector = random_vector(rng);
        model.insert(id, vector.clone());
        Point {
            id: PointId::Number(id),
            vector,
            payload: None,
            side: Vec::new(),
        }
    })
    .collect()
}

/// Searches 40 random queries: every hit live and current (its vector the model's), the
/// exact mode equal to brute force; every point of `own` its own nearest neighbour.
/// Returns the HNSW recall@10.
fn check(
    collection: &Collection,
    model: &HashMap<u64, Vec<f32>>,
    own: &[u64],
    rng: &mut ChaCha8Rng,
) -> f64 {
    let (mut found, mut wanted) = (0usize, 0usize);
    for _ in 0..40 {
        let query = random_vector(rng);
        let mut truth: Vec<(f32, u64)> = model.iter().map(|(id, v)| (l2(v, &query), *id)).collect();
        truth.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let top: Vec<PointId> = truth[..10].iter().map(|t| PointId::Number(t.1)).collect();
        let hits = collection.search(&query, 10, None).unwrap();
        assert_eq!(hits.len(), 10);
        for hit in &hits {
            let PointId::Number(id) = hit.id else {
                unreachable!()
            };
            // live and current: the vector returned is the model's, never an old one
            assert_eq!(Some(&hit.vector), model.get(&id), "id {id}");
        }
        found += hits.iter().filter(|hit| top.contains(&hit.id)).count();
        wanted += 10;
        let exact = collection
            .query(&SearchRequest {
                strategy: Strategy::Exact,
                ..SearchRequest::new(&query, 10)
            })
            .unwrap();
        assert_eq!(exact.iter().map(|h| h.id).collect::<Vec<_>>(), top);
    }
    // every point, indexed or in the unindexed tail, is its own nearest neighbour
    for id in own {
        let Some(vector) = model.get(id) else {
            continue;
        };
        let hits = collection.search(vector, 1, None).unwrap();
        assert_eq!(hits[0].id, PointId::Number(*id), "own vector of {id}");
    }
    found as f64 / wanted as f64
}

/// Reopens the collection in `directory` and checks that it holds exactly `model`'s points,
/// each with its vector; returns it.
fn reopens_holding(
    fs: &SimFileSystem,
    directory: &Path,
    model: &HashMap<u64, Vec<f32>>,
) -> Collection {
    let reopened = Collection::open(fs, directory).unwrap();
    assert_eq!(reopened.count(None).unwrap(), model.len());
    for point in reopened.points().unwrap() {
        let PointId::Number(id) = point.id else {
            unreachable!()
        };
        assert_eq!(Some(&point.vector), model.get(&id));
    }
    reopened
}

/// A one-shard Euclid collection whose buffer is never sealed by size or idleness in these
/// tests and gets a graph from 1,000 points: the indexer's steps are the test's to take.
fn unsealed_collection(fs: &SimFileSystem, directory: &Path) -> Collection {
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Euclid,
        shard_count: 1,
        storage: Default::default(),
    };
    let collection = Collection::create(fs, directory, config).unwrap();
    collection.set_policy(OptimizerPolicy {
        seal_points: 100_000,
        seal_idle: Duration::MAX,
        index_min_rows: 1_000,
        ..OptimizerPolicy::default()
    });
    collection
}

#[test]
fn a_partly_indexed_buffer_returns_only_current_points() {
    let fs = SimFileSystem::new();
    let directory = Path::new("/c");
    let collection = unsealed_collection(&fs, directory);
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut model: HashMap<u64, Vec<f32>> = HashMap::new();
    let mut write = |collection: &Collection, ids: Vec<u64>, rng: &mut ChaCha8Rng| {
        let points: Vec<Point> = ids
            .iter()
            .map(|id| Point {
                id: PointId::Number(*id),
                vector: random_vector(rng),
                payload: None,
                side: Vec::new(),
            })
            .collect();
        for point in &points {
            let PointId::Number(id) = point.id else {
                unreachable!()
            };
            model.insert(id, point.vector.clone());
        }
        collection.upsert(points, true).unwrap();
    };
    write(&collection, (0..3_000).collect(), &mut rng);
    let mut steps = 0;
    while collection.index_buffers(700) {
        steps += 1;
    }
    assert!(
        steps >= 4,
        "the indexer covered 3,000 slots in {steps} steps"
    );
    // overwrite indexed points, delete some, and add a tail the indexer has not reached
    write(&collection, (0..3_000).step_by(6).collect(), &mut rng);
    let deleted: Vec<PointId> = (1..3_000).step_by(10).map(PointId::Number).collect();
    collection.delete(&deleted, true).unwrap();
    for id in &deleted {
        let PointId::Number(id) = id else {
            unreachable!()
        };
        model.remove(id);
    }
    collection.index_buffers(200); // part of the new slots only
    let extra: Vec<Point> = (5_000..5_300)
        .map(|id| Point {
            id: PointId::Number(id),
            vector: random_vector(&mut rng),
            payload: None,
            side: Vec::new(),
        })
        .collect();
    for point in &extra {
        let PointId::Number(id) = point.id else {
            unreachable!()
        };
        model.insert(id, point.vector.clone());
    }
    collection.upsert(extra, true).unwrap();

    let own: Vec<u64> = (5_000..5_300)
        .step_by(7)
        .chain((0..3_000).step_by(66))
        .collect();
    let recall = check(&collection, &model, &own, &mut rng);
    assert!(recall >= 0.9, "recall over graph + tail {recall}");
    // the seal saves the graph (completed) as the segment: same answers, same points
    collection.optimize(&fs).unwrap();
    assert_eq!(collection.point_counts(), (model.len(), 0));
    let recall = check(&collection, &model, &own, &mut rng);
    assert!(recall >= 0.9, "recall after the seal {recall}");
    drop(collection);
    reopens_holding(&fs, directory, &model);
}

/// After a bulk import, new points join the imported segment's graph: a query walks one
/// graph, finds old and new points alike, never a superseded copy; the collection is green
/// once the indexer caught up, without a seal; the seal replaces the segment by one holding
/// both, and that survives a reopen.
#[test]
fn buffered_points_join_the_largest_segments_graph() {
    let fs = SimFileSystem::new();
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Euclid,
        shard_count: 1,
        storage: Default::default(),
    };
    let directory = Path::new("/joined");
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let mut model: HashMap<u64, Vec<f32>> = HashMap::new();
    let imported = random_points(0..4_000, &mut model, &mut rng);
    let (collection, _) = Collection::import(&fs, directory, config, imported).unwrap();
    collection.set_policy(OptimizerPolicy {
        seal_points: 1_000,
        seal_idle: Duration::ZERO,
        ..OptimizerPolicy::default()
    });
    // new points, overwrites of imported ones, deletes of both
    let upserts = random_points(
        (4_000..4_300).chain((0..4_000).step_by(40)),
        &mut model,
        &mut rng,
    );
    collection.upsert(upserts, true).unwrap();
    while collection.index_buffers(500) {}
    let deleted: Vec<PointId> = (0..4_300).step_by(13).map(PointId::Number).collect();
    collection.delete(&deleted, true).unwrap();
    for id in &deleted {
        let PointId::Number(id) = id else {
            unreachable!()
        };
        model.remove(id);
    }
    let status = collection.status();
    assert_eq!(status.points, model.len());
    assert_eq!(
        status.indexed,
        model.len(),
        "every buffered point joined the graph"
    );
    assert_eq!(status.segments, 1);
    // 400 buffered points, under half the host's 4,000 (the size rule) and under an eighth
    // of it (the idle rule): no seal, and the collection is green with a full buffer
    assert_eq!(status.health, sagitta_engine::Health::Green);
    assert!(!collection.maintain(&fs).unwrap(), "no seal planned");

    let own: Vec<u64> = (4_000..4_300)
        .step_by(11)
        .chain((0..4_000).step_by(97))
        .collect();
    let recall = check(&collection, &model, &own, &mut rng);
    assert!(recall >= 0.9, "recall over the joined graph {recall}");

    // more points pass half the host's size: the seal saves host and buffer as one segment
    let more = random_points(6_000..7_700, &mut model, &mut rng);
    collection.upsert(more, true).unwrap();
    while collection.index_buffers(500) {}
    assert!(collection.maintain(&fs).unwrap(), "the seal");
    let status = collection.status();
    assert_eq!(status.segments, 1, "the sealed segment replaced its host");
    assert_eq!((status.points, status.indexed), (model.len(), model.len()));
    let recall = check(&collection, &model, &own, &mut rng);
    assert!(recall >= 0.9, "recall after the seal {recall}");
    drop(collection);
    let reopened = reopens_holding(&fs, directory, &model);
    assert_eq!(reopened.status().segments, 1);
}

/// An indexer far behind the writes (a bulk upload) takes large steps, which link their
/// batch cluster by cluster: 40,000 waiting slots take a few steps, not one per 1,024, and
/// every point is found; a short tail afterwards goes back to steps of the size asked.
#[test]
fn an_indexer_far_behind_catches_up_in_large_steps() {
    let fs = SimFileSystem::new();
    let collection = unsealed_collection(&fs, Path::new("/c"));
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let mut model = HashMap::new();
    for start in (0..40_000).step_by(5_000) {
        let points = random_points(start..start + 5_000, &mut model, &mut rng);
        collection.upsert(points, false).unwrap();
    }
    let mut steps = 0;
    while collection.index_buffers(1_024) {
        steps += 1;
    }
    // (the loop ends when a step finds nothing left: every slot is in the graph)
    assert!(steps <= 3, "40,000 slots took {steps} steps");
    let own: Vec<u64> = (0..40_000).step_by(397).collect();
    let recall = check(&collection, &model, &own, &mut rng);
    assert!(recall >= 0.9, "recall after catching up {recall}");
    let points = random_points(40_000..43_000, &mut model, &mut rng);
    collection.upsert(points, false).unwrap();
    let mut steps = 0;
    while collection.index_buffers(1_024) {
        steps += 1;
    }
    assert_eq!(steps, 3, "3,000 slots in steps of 1,024");
    let recall = check(&collection, &model, &own, &mut rng);
    assert!(recall >= 0.9, "recall after the tail {recall}");
}
