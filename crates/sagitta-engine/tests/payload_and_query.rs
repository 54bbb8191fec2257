//! Payload updates (set / overwrite / delete keys) survive replay; searches with offset,
//! score threshold and batches agree with single searches.

use std::path::Path;

use sagitta_engine::{
    Collection, CollectionConfig, Distance, EngineError, Filter, Point, PointId, SearchRequest,
    Strategy,
};
use sagitta_storage::sim::SimFileSystem;
use serde_json::{json, Value};

fn create_collection(fs: &SimFileSystem, distance: Distance) -> Collection {
    let config = CollectionConfig {
        dim: 2,
        distance,
        shard_count: 2,
        storage: Default::default(),
    };
    let collection = Collection::create(fs, Path::new("/c"), config).unwrap();
    let points = (0..20u64)
        .map(|id| Point {
            id: PointId::Number(id),
            vector: vec![id as f32, 1.0],
            payload: Some(json!({"a": id, "b": "keep"}).to_string()),
            side: Vec::new(),
        })
        .collect();
    collection.upsert(points, true).unwrap();
    collection
}

fn payload(collection: &Collection, id: u64) -> Value {
    let text = collection
        .get(&PointId::Number(id))
        .unwrap()
        .unwrap()
        .payload
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn payload_updates_apply_and_replay() {
    let fs = SimFileSystem::new();
    let collection = create_collection(&fs, Distance::Euclid);
    let ids = [PointId::Number(1), PointId::Number(2), PointId::Number(999)];
    collection
        .set_payload(&ids[..2], r#"{"a": "new", "c": [1, 2]}"#, true)
        .unwrap();
    collection
        .overwrite_payload(&[PointId::Number(3)], r#"{"only": true}"#, true)
        .unwrap();
    collection
        .delete_payload_keys(
            &[PointId::Number(4), PointId::Number(999)],
            &["b".to_string()],
            true,
        )
        .unwrap();
    let filter = Filter::parse(
        &json!({"must": [{"key": "a", "range": {"gte": 18}}]}),
        "filter",
    )
    .unwrap();
    let matched = collection.matching_ids(&filter).unwrap();
    collection
        .set_payload(&matched, r#"{"late": 1}"#, false)
        .unwrap();
    let check = |collection: &Collection| {
        assert_eq!(
            payload(collection, 1),
            json!({"a": "new", "b": "keep", "c": [1, 2]})
        );
        assert_eq!(payload(collection, 3), json!({"only": true}));
        assert_eq!(payload(collection, 4), json!({"a": 4}));
        assert_eq!(
            payload(collection, 19),
            json!({"a": 19, "b": "keep", "late": 1})
        );
        assert_eq!(payload(collection, 5), json!({"a": 5, "b": "keep"}));
        assert!(collection.get(&PointId::Number(999)).unwrap().is_none());
    };
    check(&collection);
    check(&Collection::open(&fs, Path::new("/c")).unwrap());
    for bad in ["[1]", "{\"a\": ", "3"] {
        assert!(matches!(
            collection.set_payload(&ids, bad, true),
            Err(EngineError::InvalidPayload { .. })
        ));
    }
}

#[test]
fn offset_threshold_and_batch_agree_with_single_searches() {
    let fs = SimFileSystem::new();
    let collection = create_collection(&fs, Distance::Euclid);
    let query = [5.0, 1.0];
    let request = |limit, offset, score_threshold| SearchRequest {
        offset,
        score_threshold,
        ..SearchRequest::new(&query, limit)
    };
    let all = collection.query(&request(10, 0, None)).unwrap();
    let paged = collection.query(&request(4, 3, None)).unwrap();
    assert_eq!(paged, all[3..7].to_vec());
    let close = collection.query(&request(10, 0, Some(2.0))).unwrap();
    let ids: Vec<PointId> = close.iter().map(|hit| hit.id).collect();
    assert_eq!(
        ids,
        [5, 4, 6, 3, 7].map(PointId::Number).to_vec(),
        "distance ≤ 2 only"
    );
    assert!(close.iter().all(|hit| hit.score <= 2.0));

    let fs = SimFileSystem::new();
    let cosine = create_collection(&fs, Distance::Cosine);
    let similar = cosine.query(&SearchRequest {
        score_threshold: Some(0.9),
        ..SearchRequest::new(&[1.0, 0.0], 10)
    });
    assert!(similar.unwrap().iter().all(|hit| hit.score >= 0.9));

    let queries: Vec<[f32; 2]> = (0..9).map(|i| [i as f32 * 2.0, 1.0]).collect();
    let requests: Vec<SearchRequest> = queries.iter().map(|q| SearchRequest::new(q, 3)).collect();
    let batch = collection.query_batch(&requests).unwrap();
    for (request, results) in requests.iter().zip(&batch) {
        assert_eq!(&collection.query(request).unwrap(), results);
    }
    assert!(matches!(
        collection.query(&request(5, 20_000, None)),
        Err(EngineError::ParameterOutOfRange { name: "offset", .. })
    ));
}

/// On sealed HNSW segments: `Exact` returns exactly the brute-force top-k, a wider beam
/// finds at least as many true neighbours as a narrow one, and a beam of 0 is refused
/// naming `hnsw_ef`.
#[test]
fn search_strategies_on_sealed_segments() {
    let fs = SimFileSystem::new();
    let config = CollectionConfig {
        dim: 16,
        distance: Distance::Dot,
        shard_count: 2,
        storage: Default::default(),
    };
    let collection = Collection::create(&fs, Path::new("/s"), config).unwrap();
    let mut state = 12_345u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        ((state >> 33) as f32 / (1u64 << 31) as f32) - 0.5
    };
    let vectors: Vec<Vec<f32>> = (0..3_000)
        .map(|_| (0..16).map(|_| next()).collect())
        .collect();
    let points = vectors
        .iter()
        .enumerate()
        .map(|(id, vector)| Point {
            id: PointId::Number(id as u64),
            vector: vector.clone(),
            payload: None,
            side: Vec::new(),
        })
        .collect();
    collection.upsert(points, true).unwrap();
    collection.optimize(&fs).unwrap();
    assert_eq!(collection.point_counts(), (3_000, 0));
    let (mut narrow_found, mut wide_found) = (0, 0);
    for q in 0..30 {
        let query: Vec<f32> = (0..16).map(|_| next()).collect();
        let mut truth: Vec<(f32, u64)> = vectors
            .iter()
            .enumerate()
            .map(|(id, v)| (v.iter().zip(&query).map(|(a, b)| a * b).sum(), id as u64))
            .collect();
        truth.sort_by(|a, b| b.0.total_cmp(&a.0));
        let expected: Vec<PointId> = truth[..10].iter().map(|t| PointId::Number(t.1)).collect();
        let run = |strategy| {
            let hits = collection
                .query(&SearchRequest {
                    strategy,
                    ..SearchRequest::new(&query, 10)
                })
                .unwrap();
            hits.iter().map(|hit| hit.id).collect::<Vec<_>>()
        };
        assert_eq!(run(Strategy::Exact), expected, "query {q}");
        let found = |ids: Vec<PointId>| ids.iter().filter(|id| expected.contains(id)).count();
        narrow_found += found(run(Strategy::Beam(10)));
        wide_found += found(run(Strategy::Beam(400)));
    }
    assert!(wide_found >= narrow_found, "{wide_found} < {narrow_found}");
    assert!(wide_found >= 290, "recall at ef=400: {wide_found}/300");
    let query = vec![0.0; 16];
    let refused = collection.query(&SearchRequest {
        strategy: Strategy::Beam(0),
        ..SearchRequest::new(&query, 10)
    });
    assert!(
        matches!(
            refused,
            Err(EngineError::ParameterOutOfRange {
                name: "hnsw_ef",
                ..
            })
        ),
        "{refused:?}"
    );
}
