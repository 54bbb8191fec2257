//! Multivectors (max_sim) end to end against brute force: a collection with a dense
//! vector and three multivectors (Cosine, Dot, Euclid) over two shards, searched in the
//! write buffer, sealed, sealed with rewrites and deletes buffered, merged and after a
//! restart — every hit's id and score, with and without a filter — and bad input refused.

use std::path::Path;

use common::{named_collection, through_every_state, PointModel};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_engine::{
    Collection, Distance, Filter, MultiSpace, MultiVector, Point, PointId, SearchRequest,
    SideSpace, SideVector, VectorSpace, VectorSpaces,
};
use sagitta_storage::sim::SimFileSystem;
use serde_json::json;

mod common;

const POINTS: u64 = 900;
const ROW: usize = 5;
const SPACES: [(&str, Distance); 3] = [
    ("cos", Distance::Cosine),
    ("dot", Distance::Dot),
    ("l2", Distance::Euclid),
];

fn spaces() -> VectorSpaces {
    let dense = vec![VectorSpace {
        name: "dense".to_string(),
        dim: 4,
        distance: Distance::Dot,
    }];
    let side = SPACES
        .iter()
        .map(|(name, distance)| {
            SideSpace::Multi(MultiSpace {
                name: (*name).to_string(),
                dim: ROW,
                distance: *distance,
            })
        })
        .collect();
    VectorSpaces::with_side(dense, side, 64).unwrap()
}

fn random_multi(rng: &mut ChaCha8Rng) -> MultiVector {
    let rows: Vec<Vec<f32>> = (0..rng.gen_range(1..6))
        .map(|_| (0..ROW).map(|_| rng.gen_range(-1.0..1.0)).collect())
        .collect();
    MultiVector::new(&rows).unwrap()
}

/// A point with a dense vector and each multivector or none (every fifth point lacks
/// "cos", every seventh "l2").
fn point(id: u64, rng: &mut ChaCha8Rng) -> Point {
    Point {
        id: PointId::Number(id),
        vector: (0..4).map(|_| rng.gen_range(-1.0..1.0)).collect(),
        payload: Some(json!({"even": id.is_multiple_of(2)}).to_string()),
        side: vec![
            (!id.is_multiple_of(5)).then(|| SideVector::Multi(random_multi(rng))),
            Some(SideVector::Multi(random_multi(rng))),
            (!id.is_multiple_of(7)).then(|| SideVector::Multi(random_multi(rng))),
        ],
    }
}

/// The model keeps what the engine should store: Cosine rows unit-length.
type Model = PointModel;

fn stored(mut point: Point) -> Point {
    if let Some(Some(SideVector::Multi(cos))) = point.side.first_mut() {
        *cos = cos.clone().normalized();
    }
    point
}

/// max_sim by brute force, in f64: per query row its best similarity to any point row
/// (negated squared distance for Euclid), summed; the user's score is that sum, or for
/// Euclid the square root of its magnitude (lower is closer).
fn max_sim(query: &MultiVector, point: &MultiVector, distance: Distance) -> f64 {
    let similarity = |a: &[f32], b: &[f32]| -> f64 {
        let pairs = a.iter().zip(b).map(|(x, y)| (f64::from(*x), f64::from(*y)));
        match distance {
            Distance::Euclid => -pairs.map(|(x, y)| (x - y) * (x - y)).sum::<f64>(),
            _ => pairs.map(|(x, y)| x * y).sum(),
        }
    };
    query
        .rows()
        .map(|q| {
            point
                .rows()
                .map(|row| similarity(q, row))
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .sum()
}

fn brute_force(
    model: &Model,
    space: usize,
    query: &MultiVector,
    filter: Option<&Filter>,
    limit: usize,
) -> Vec<(u64, f64)> {
    let distance = SPACES[space].1;
    let query = if distance == Distance::Cosine {
        query.clone().normalized()
    } else {
        query.clone()
    };
    let mut scored: Vec<(u64, f64)> = model
        .iter()
        .filter(|(_, point)| {
            let payload = point
                .payload
                .as_deref()
                .map(|text| serde_json::from_str(text).unwrap());
            filter.is_none_or(|f| f.matches(&point.id, payload.as_ref()))
        })
        .filter_map(|(id, point)| {
            let multi = point.side[space].as_ref()?.as_multi()?;
            Some((*id, max_sim(&query, multi, distance)))
        })
        .collect();
    // closest first (highest similarity), ties by id
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(limit);
    scored
        .into_iter()
        .map(|(id, similarity)| {
            let score = match distance {
                Distance::Euclid => similarity.abs().sqrt(),
                _ => similarity,
            };
            (id, score)
        })
        .collect()
}

fn check(collection: &Collection, model: &Model, moment: &str) {
    let mut rng = ChaCha8Rng::seed_from_u64(77);
    let even = Filter::parse(
        &json!({"must": [{"key": "even", "match": {"value": true}}]}),
        "f",
    )
    .unwrap();
    for (space, (name, _)) in SPACES.iter().enumerate() {
        for round in 0..12 {
            let query = random_multi(&mut rng);
            let filter = (round % 3 == 0).then_some(&even);
            let hits = collection
                .query(&SearchRequest {
                    using: Some(name),
                    multi: Some(&query),
                    filter,
                    ..SearchRequest::new(&[], 10)
                })
                .unwrap();
            let expected = brute_force(model, space, &query, filter, 10);
            // near-ties may swap between f32 and f64 sums: compare score by rank, and
            // ids where the scores are apart
            assert_eq!(hits.len(), expected.len(), "{moment}: {name} round {round}");
            for (rank, (hit, (id, score))) in hits.iter().zip(&expected).enumerate() {
                let got = f64::from(hit.score);
                assert!(
                    (got - score).abs() <= 1e-4 * score.abs().max(1.0),
                    "{moment}: {name} round {round} rank {rank}: {got}, not {score}"
                );
                let tied = expected
                    .iter()
                    .any(|(other, s)| other != id && (s - score).abs() < 1e-4);
                if !tied {
                    assert_eq!(hit.id, PointId::Number(*id), "{moment}: {name} rank {rank}");
                }
                let PointId::Number(number) = hit.id else {
                    unreachable!()
                };
                assert_eq!(hit.side, model[&number].side, "{moment}: point {number}");
            }
        }
    }
    for (id, point) in model {
        let got = collection.get(&PointId::Number(*id)).unwrap().unwrap();
        assert_eq!(got.side, point.side, "{moment}: get({id})");
    }
}

#[test]
fn multivectors_are_searched_exactly_in_every_point_state() {
    let fs = SimFileSystem::new();
    let directory = Path::new("/db/multi");
    let spaces = spaces();
    let collection = named_collection(&fs, directory, &spaces, 2);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    through_every_state(
        (&fs, collection, directory),
        POINTS,
        &mut |id| point(id, &mut rng),
        &stored,
        &check,
    );
}

#[test]
fn bad_multivector_input_is_refused_naming_the_fault() {
    let fs = SimFileSystem::new();
    let spaces = spaces();
    let collection = named_collection(&fs, Path::new("/db/bad"), &spaces, 1);
    let narrow = MultiVector::new(&[vec![1.0, 2.0]]).unwrap();
    let query = |using, multi| {
        collection
            .query(&SearchRequest {
                using: Some(using),
                multi: Some(multi),
                ..SearchRequest::new(&[], 5)
            })
            .unwrap_err()
            .to_string()
    };
    let error = query("dot", &narrow);
    assert!(error.contains("expected dim 5, got 2"), "{error}");
    let error = query("dense", &narrow);
    assert!(
        error.contains("Not existing multivector name error: dense"),
        "{error}"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut bad = point(1, &mut rng);
    bad.side[1] = Some(SideVector::Multi(narrow));
    let error = collection.upsert(vec![bad], true).unwrap_err().to_string();
    assert!(error.contains("\"dot\""), "{error}");
}

#[test]
fn has_vector_finds_the_points_that_have_each_vector() {
    let fs = SimFileSystem::new();
    let spaces = spaces();
    let collection = named_collection(&fs, Path::new("/db/has"), &spaces, 2);
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let mut points: Vec<Point> = (0..60).map(|id| point(id, &mut rng)).collect();
    // every third point without its dense vector
    for point in points.iter_mut().step_by(3) {
        point.vector = vec![f32::NAN; 4];
    }
    collection.upsert(points.clone(), true).unwrap();
    collection.optimize(&fs).unwrap();
    let count = |name: &str, clause: &str| {
        let filter = Filter::parse(&json!({ clause: [{"has_vector": name}] }), "f").unwrap();
        let bound = collection.bind_filter(&filter).unwrap().expect("bound");
        collection.count(Some(&bound)).unwrap()
    };
    let having = |space: usize| points.iter().filter(|p| p.side[space].is_some()).count();
    assert_eq!(count("dense", "must"), 40);
    assert_eq!(count("dense", "must_not"), 20);
    assert_eq!(count("cos", "must"), having(0));
    assert_eq!(count("l2", "must"), having(2));
    assert_eq!(count("dot", "must_not"), 0);
    let unknown = Filter::parse(&json!({"must": [{"has_vector": "nope"}]}), "f").unwrap();
    let error = collection.bind_filter(&unknown).unwrap_err().to_string();
    assert!(
        error.contains("Not existing vector name error: nope"),
        "{error}"
    );
}
