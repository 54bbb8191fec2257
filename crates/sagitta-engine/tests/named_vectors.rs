//! Named vectors (issue 16 §1): a collection with three vector spaces of different sizes
//! and distances, points lacking some of them, searched per space against brute force in
//! the write buffer, after a seal, after a merge and after a restart; bad input refused
//! naming the vector.

use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_engine::{
    Collection, CollectionConfig, Distance, Point, PointId, SearchRequest, StorageConfig, Strategy,
    VectorSpace, VectorSpaces,
};
use sagitta_storage::sim::SimFileSystem;

const POINTS: u64 = 3_000;

fn spaces() -> VectorSpaces {
    let space = |name: &str, dim, distance| VectorSpace {
        name: name.to_string(),
        dim,
        distance,
    };
    VectorSpaces::new(
        vec![
            space("text", 12, Distance::Cosine),
            // wide enough that a merged segment's "image" vectors exceed the full-scan
            // threshold (10,000 KiB), so its graph is walked, not scanned
            space("image", 1_500, Distance::Dot),
            space("code", 8, Distance::Euclid),
        ],
        4_000,
    )
    .unwrap()
}

/// Each point's vectors: `None` where it lacks one (every fifth point lacks "image",
/// every seventh "text").
fn parts(id: u64, rng: &mut ChaCha8Rng) -> Vec<Option<Vec<f32>>> {
    spaces()
        .iter()
        .enumerate()
        .map(|(index, space)| {
            let absent =
                (index == 1 && id.is_multiple_of(5)) || (index == 0 && id.is_multiple_of(7));
            (!absent).then(|| (0..space.dim).map(|_| rng.gen_range(-1.0..1.0)).collect())
        })
        .collect()
}

fn point(id: u64, parts: &[Option<Vec<f32>>]) -> Point {
    let views: Vec<Option<&[f32]>> = parts.iter().map(|part| part.as_deref()).collect();
    Point {
        id: PointId::Number(id),
        vector: spaces().join(&views),
        payload: Some(format!("{{\"even\": {}}}", id.is_multiple_of(2))),
        side: Vec::new(),
    }
}

fn score(distance: Distance, query: &[f32], vector: &[f32]) -> f64 {
    let dot: f64 = query
        .iter()
        .zip(vector)
        .map(|(a, b)| f64::from(a * b))
        .sum();
    match distance {
        Distance::Dot => dot,
        Distance::Cosine => {
            let norm = |v: &[f32]| v.iter().map(|x| f64::from(x * x)).sum::<f64>().sqrt();
            dot / (norm(query) * norm(vector))
        }
        Distance::Euclid => {
            let squared: f64 = query
                .iter()
                .zip(vector)
                .map(|(a, b)| f64::from(a - b).powi(2))
                .sum();
            -squared.sqrt()
        }
    }
}

/// The exact top `k` of space `index` among points having a vector there and passing
/// `even` (when given), best first.
fn brute_force(
    model: &[(u64, Vec<Option<Vec<f32>>>)],
    index: usize,
    query: &[f32],
    k: usize,
    even: Option<bool>,
) -> Vec<u64> {
    let distance = spaces().get(index).unwrap().distance;
    let mut scored: Vec<(f64, u64)> = model
        .iter()
        .filter(|(id, _)| even.is_none_or(|even| (id % 2 == 0) == even))
        .filter_map(|(id, parts)| {
            parts[index]
                .as_ref()
                .map(|v| (score(distance, query, v), *id))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(k).map(|(_, id)| id).collect()
}

fn check_searches(collection: &Collection, model: &[(u64, Vec<Option<Vec<f32>>>)], moment: &str) {
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let filter = sagitta_engine::Filter::parse(
        &serde_json::json!({"must": [{"key": "even", "match": {"value": true}}]}),
        "filter",
    )
    .unwrap();
    for (index, space) in spaces().iter().enumerate() {
        let (mut exact_hits, mut approx_hits, mut total) = (0, 0, 0);
        for round in 0..20 {
            let query: Vec<f32> = (0..space.dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let even = (round % 2 == 0).then_some(true);
            let expected = brute_force(model, index, &query, 10, even);
            // uniform random vectors in 1,500-d have no structure for a graph to follow:
            // a wide beam, so the floor tests the walk's wiring, not the data's hardness
            for strategy in [Strategy::Exact, Strategy::Beam(600)] {
                let hits = collection
                    .query(&SearchRequest {
                        using: Some(&space.name),
                        strategy,
                        filter: even.map(|_| &filter),
                        ..SearchRequest::new(&query, 10)
                    })
                    .unwrap();
                let ids: Vec<u64> = hits
                    .iter()
                    .map(|hit| match hit.id {
                        PointId::Number(id) => id,
                        PointId::Uuid(_) => unreachable!(),
                    })
                    .collect();
                for hit in &hits {
                    let PointId::Number(id) = hit.id else {
                        unreachable!()
                    };
                    let parts = &model.iter().find(|(other, _)| *other == id).unwrap().1;
                    let vector = parts[index].as_ref().unwrap_or_else(|| {
                        panic!(
                            "{moment}: {} returned {id}, which has no vector there",
                            space.name
                        )
                    });
                    let expected_score = score(space.distance, &query, vector);
                    let got = f64::from(hit.score)
                        * if space.distance == Distance::Euclid {
                            -1.0
                        } else {
                            1.0
                        };
                    assert!(
                        (got - expected_score).abs() < 1e-3,
                        "{moment}: {} score of {id}: {got} vs {expected_score}",
                        space.name
                    );
                }
                let found = ids.iter().filter(|id| expected.contains(id)).count();
                if strategy == Strategy::Exact {
                    assert_eq!(ids, expected, "{moment}: exact search of {}", space.name);
                    exact_hits += found;
                } else {
                    approx_hits += found;
                }
            }
            total += expected.len();
        }
        assert_eq!(exact_hits, total);
        let recall = approx_hits as f64 / total as f64;
        assert!(recall >= 0.95, "{moment}: {} recall {recall}", space.name);
    }
}

fn check_points(collection: &Collection, model: &[(u64, Vec<Option<Vec<f32>>>)], moment: &str) {
    assert_eq!(collection.count(None).unwrap(), model.len(), "{moment}");
    let spaces = spaces();
    for (id, parts) in model.iter().step_by(37) {
        let got = collection.get(&PointId::Number(*id)).unwrap().unwrap();
        let split = spaces.split(&got.vector);
        for (index, (got, expected)) in split.iter().zip(parts).enumerate() {
            match (got, expected) {
                (None, None) => {}
                (Some(got), Some(expected)) => {
                    let mut expected = expected.clone();
                    if index == 0 {
                        let norm = expected.iter().map(|x| x * x).sum::<f32>().sqrt();
                        expected.iter_mut().for_each(|x| *x /= norm);
                    }
                    for (a, b) in got.iter().zip(&expected) {
                        assert!((a - b).abs() < 1e-5, "{moment}: point {id} space {index}");
                    }
                }
                _ => panic!("{moment}: point {id} space {index}: {got:?} vs {expected:?}"),
            }
        }
    }
}

#[test]
fn every_named_vector_is_searched_apart_in_every_point_state() {
    let fs = SimFileSystem::new();
    let directory = Path::new("/db/named");
    let base = CollectionConfig {
        dim: 1,
        distance: Distance::Cosine,
        shard_count: 1,
        storage: StorageConfig::default(),
    };
    let spaces = spaces();
    let collection =
        Collection::create_with_spaces(&fs, directory, base.named(&spaces), spaces.clone(), &[])
            .unwrap();
    assert_eq!(collection.config().dim, 1_520);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut model: Vec<(u64, Vec<Option<Vec<f32>>>)> = Vec::new();
    let first_half: Vec<Point> = (0..POINTS / 2)
        .map(|id| {
            let parts = parts(id, &mut rng);
            model.push((id, parts.clone()));
            point(id, &parts)
        })
        .collect();
    collection.upsert(first_half, true).unwrap();
    check_searches(&collection, &model, "in the write buffer");
    check_points(&collection, &model, "in the write buffer");
    collection.optimize(&fs).unwrap();
    check_searches(&collection, &model, "sealed");
    // more points, some rewritten with other vectors, some deleted: a second segment
    let second_half: Vec<Point> = (POINTS / 2..POINTS)
        .chain(0..100)
        .map(|id| {
            let parts = parts(id + 1, &mut rng);
            model.retain(|(other, _)| *other != id);
            model.push((id, parts.clone()));
            point(id, &parts)
        })
        .collect();
    collection.upsert(second_half, true).unwrap();
    let deleted: Vec<PointId> = (100..150).map(PointId::Number).collect();
    collection.delete(&deleted, true).unwrap();
    model.retain(|(id, _)| !(100..150).contains(id));
    model.sort_by_key(|(id, _)| *id);
    check_searches(&collection, &model, "sealed and buffered");
    collection.optimize(&fs).unwrap();
    let mut policy = collection.policy();
    policy.max_segments = 1;
    collection.set_policy(policy);
    while collection.maintain(&fs).unwrap() {}
    assert_eq!(collection.status().segments, 1, "merged into one segment");
    check_searches(&collection, &model, "merged");
    check_points(&collection, &model, "merged");
    drop(collection);
    let reopened = Collection::open(&fs, directory).unwrap();
    assert_eq!(reopened.spaces(), &spaces);
    check_searches(&reopened, &model, "after a restart");
    check_points(&reopened, &model, "after a restart");
}

#[test]
fn bad_named_vector_input_is_refused_naming_the_vector() {
    let fs = SimFileSystem::new();
    let base = CollectionConfig {
        dim: 1,
        distance: Distance::Cosine,
        shard_count: 1,
        storage: StorageConfig::default(),
    };
    let spaces = spaces();
    let collection = Collection::create_with_spaces(
        &fs,
        Path::new("/db/bad"),
        base.named(&spaces),
        spaces.clone(),
        &[],
    )
    .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let good = parts(1, &mut rng);
    let mut partial = point(1, &good);
    partial.vector[13] = f32::NAN; // "image" half present
    let error = collection
        .upsert(vec![partial], true)
        .unwrap_err()
        .to_string();
    assert!(error.contains("vector \"image\""), "{error}");
    let mut infinite = point(1, &good);
    infinite.vector[1_515] = f32::INFINITY;
    let error = collection
        .upsert(vec![infinite], true)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("vector \"code\"") && error.contains("position 3"),
        "{error}"
    );
    let mut short = point(1, &good);
    short.vector.pop();
    assert!(collection.upsert(vec![short], true).is_err());
    assert_eq!(collection.count(None).unwrap(), 0, "nothing stored");
    let query = vec![0.5; 12];
    let error = collection
        .query(&SearchRequest {
            using: Some("audio"),
            ..SearchRequest::new(&query, 3)
        })
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("Not existing vector name error: audio"),
        "{error}"
    );
    let error = collection
        .query(&SearchRequest {
            using: Some("image"),
            ..SearchRequest::new(&query, 3)
        })
        .unwrap_err()
        .to_string();
    assert!(error.contains("expected dim 1500, got 12"), "{error}");
    // named vectors refuse on-disk vectors and a segment kind of their own choosing
    let on_disk = CollectionConfig {
        storage: StorageConfig {
            vectors_on_disk: true,
            ..base.storage
        },
        ..base
    };
    assert!(Collection::create_with_spaces(
        &fs,
        Path::new("/db/x"),
        on_disk.named(&spaces),
        spaces.clone(),
        &[]
    )
    .is_err());
    assert!(Collection::create_with_spaces(&fs, Path::new("/db/y"), base, spaces, &[]).is_err());
}
