//! Sparse vectors (issue 16 §1): a collection with one dense vector and two sparse ones
//! (one IDF-weighted), over two shards, searched against a brute-force model in the write
//! buffer, sealed, sealed and buffered with rewrites and deletes, merged and after a
//! restart; and a sparse-only collection (no dense values at all).

use std::collections::BTreeSet;
use std::path::Path;

use common::{named_collection, through_every_state, PointModel};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_engine::sparse::idf;
use sagitta_engine::{
    Collection, Distance, Filter, Point, PointId, SearchRequest, SideVector, SparseSpace,
    SparseVector, VectorSpace, VectorSpaces,
};
use sagitta_storage::sim::SimFileSystem;
use serde_json::json;

mod common;

const POINTS: u64 = 1_200;
const VOCABULARY: u32 = 300;

fn spaces(dense: bool) -> VectorSpaces {
    let sparse = vec![
        SparseSpace {
            name: "words".to_string(),
            idf: false,
        },
        SparseSpace {
            name: "bm25".to_string(),
            idf: true,
        },
    ];
    let dense = if dense {
        vec![VectorSpace {
            name: "dense".to_string(),
            dim: 4,
            distance: Distance::Dot,
        }]
    } else {
        Vec::new()
    };
    VectorSpaces::with_sparse(dense, sparse, 64).unwrap()
}

fn random_sparse(rng: &mut ChaCha8Rng, most: usize) -> SparseVector {
    let indices: BTreeSet<u32> = (0..rng.gen_range(0..=most))
        .map(|_| rng.gen_range(0..VOCABULARY))
        .collect();
    let values: Vec<f32> = indices.iter().map(|_| rng.gen_range(0.0..3.0)).collect();
    // given in descending order: the engine sorts
    let mut pairs: Vec<(u32, f32)> = indices.into_iter().zip(values).collect::<Vec<_>>();
    pairs.reverse();
    SparseVector::new(
        pairs.iter().map(|pair| pair.0).collect(),
        pairs.iter().map(|pair| pair.1).collect(),
    )
    .unwrap()
}

/// A point with a dense vector (when the collection has one) and each sparse vector or
/// none (every sixth point lacks "words", every ninth "bm25").
fn point(id: u64, dense: bool, rng: &mut ChaCha8Rng) -> Point {
    let vector = if dense {
        (0..4).map(|_| rng.gen_range(-1.0..1.0)).collect()
    } else {
        Vec::new()
    };
    Point {
        id: PointId::Number(id),
        vector,
        payload: Some(json!({"even": id.is_multiple_of(2)}).to_string()),
        side: vec![
            (!id.is_multiple_of(6)).then(|| SideVector::Sparse(random_sparse(rng, 12))),
            (!id.is_multiple_of(9)).then(|| SideVector::Sparse(random_sparse(rng, 8))),
        ],
    }
}

type Model = PointModel;

/// The point's sparse vector in side space `space`, if it has one.
fn sparse_of(point: &Point, space: usize) -> Option<&SparseVector> {
    point.side[space].as_ref()?.as_sparse()
}

/// The top `limit` by brute force: ids and scores, ties by id, points without a shared
/// index left out; IDF weights from the model's own counts.
fn brute_force(
    model: &Model,
    space: usize,
    query: &SparseVector,
    filter: Option<&Filter>,
    limit: usize,
) -> Vec<(u64, f32)> {
    let query = if space == 1 {
        query.reweighted(|index| {
            let df = model
                .values()
                .filter(|point| sparse_of(point, 1).is_some_and(|v| v.indices().contains(&index)))
                .count();
            idf(df, model.len())
        })
    } else {
        query.clone()
    };
    let mut scored: Vec<(u64, f32)> = model
        .values()
        .filter(|point| {
            let payload = point
                .payload
                .as_deref()
                .map(|text| serde_json::from_str(text).unwrap());
            filter.is_none_or(|f| f.matches(&point.id, payload.as_ref()))
        })
        .filter_map(|point| {
            let PointId::Number(id) = point.id else {
                unreachable!()
            };
            let score = sparse_of(point, space)?.dot(&query)?;
            Some((id, score))
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(limit);
    scored
}

fn check(collection: &Collection, model: &Model, moment: &str) {
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let even = Filter::parse(
        &json!({"must": [{"key": "even", "match": {"value": true}}]}),
        "f",
    )
    .unwrap();
    for (space, name) in ["words", "bm25"].iter().enumerate() {
        for round in 0..20 {
            let query = random_sparse(&mut rng, 10);
            let filter = (round % 3 == 0).then_some(&even);
            let hits = collection
                .query(&SearchRequest {
                    using: Some(name),
                    sparse: Some(&query),
                    filter,
                    ..SearchRequest::new(&[], 15)
                })
                .unwrap();
            let got: Vec<(u64, f32)> = hits
                .iter()
                .map(|hit| match hit.id {
                    PointId::Number(id) => (id, hit.score),
                    PointId::Uuid(_) => unreachable!(),
                })
                .collect();
            let expected = brute_force(model, space, &query, filter, 15);
            assert_eq!(
                got.iter().map(|hit| hit.0).collect::<Vec<_>>(),
                expected.iter().map(|hit| hit.0).collect::<Vec<_>>(),
                "{moment}: {name} round {round}: ids"
            );
            for ((_, got), (id, expected)) in got.iter().zip(&expected) {
                assert!(
                    (got - expected).abs() <= 1e-4 * expected.abs().max(1.0),
                    "{moment}: {name} round {round}: point {id} scores {got}, not {expected}"
                );
            }
            // the stored vectors come back with the hits
            for hit in &hits {
                let PointId::Number(id) = hit.id else {
                    unreachable!()
                };
                assert_eq!(hit.side, model[&id].side, "{moment}: point {id}");
            }
        }
    }
    for (id, point) in model {
        let got = collection.get(&PointId::Number(*id)).unwrap().unwrap();
        assert_eq!(got.side, point.side, "{moment}: get({id})");
    }
    assert_eq!(
        collection.count(None).unwrap(),
        model.len(),
        "{moment}: count"
    );
}

fn run(dense: bool, directory: &Path) {
    let fs = SimFileSystem::new();
    let spaces = spaces(dense);
    let collection = named_collection(&fs, directory, &spaces, 2);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    through_every_state(
        (&fs, collection, directory),
        POINTS,
        &mut |id| point(id, dense, &mut rng),
        &|point| point,
        &check,
    );
}

#[test]
fn sparse_vectors_are_searched_exactly_in_every_point_state() {
    run(true, Path::new("/db/sparse"));
}

#[test]
fn a_collection_of_sparse_vectors_alone_stores_no_dense_values() {
    run(false, Path::new("/db/sparse-only"));
}

#[test]
fn bad_sparse_input_is_refused_naming_the_fault() {
    let fs = SimFileSystem::new();
    let spaces = spaces(true);
    let collection = named_collection(&fs, Path::new("/db/bad"), &spaces, 1);
    let query = SparseVector::new(vec![1], vec![1.0]).unwrap();
    let error = collection
        .query(&SearchRequest {
            using: Some("dense"),
            sparse: Some(&query),
            ..SearchRequest::new(&[], 5)
        })
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("Not existing sparse vector name error: dense"),
        "{error}"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut three = point(1, true, &mut rng);
    three.side.push(None);
    let error = collection
        .upsert(vec![three], true)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("has 3 sparse or multi vectors; the collection has 2"),
        "{error}"
    );
    // a point with no vector at all is kept, and found by no search
    let empty = Point {
        id: PointId::Number(2),
        vector: vec![f32::NAN; 4],
        payload: None,
        side: vec![
            None,
            Some(SideVector::Sparse(
                SparseVector::new(vec![], vec![]).unwrap(),
            )),
        ],
    };
    collection.upsert(vec![empty.clone()], true).unwrap();
    let got = collection.get(&PointId::Number(2)).unwrap().unwrap();
    assert_eq!(got.side, empty.side);
    let hits = collection
        .query(&SearchRequest {
            using: Some("bm25"),
            sparse: Some(&query),
            ..SearchRequest::new(&[], 5)
        })
        .unwrap();
    assert!(hits.is_empty());
}
