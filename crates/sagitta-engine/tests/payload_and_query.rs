//! Payload updates (set / overwrite / delete keys) survive replay; searches with offset,
//! score threshold and batches agree with single searches.

use std::path::Path;

use sagitta_engine::{
    Collection, CollectionConfig, Distance, EngineError, Filter, Point, PointId, SearchRequest,
};
use sagitta_storage::sim::SimFileSystem;
use serde_json::{json, Value};

fn create_collection(fs: &SimFileSystem, distance: Distance) -> Collection {
    let config = CollectionConfig {
        dim: 2,
        distance,
        shard_count: 2,
    };
    let collection = Collection::create(fs, Path::new("/c"), config).unwrap();
    let points = (0..20u64)
        .map(|id| Point {
            id: PointId::Number(id),
            vector: vec![id as f32, 1.0],
            payload: Some(json!({"a": id, "b": "keep"}).to_string()),
        })
        .collect();
    collection.upsert(points, true).unwrap();
    collection
}

fn payload(collection: &Collection, id: u64) -> Value {
    let text = collection
        .get(&PointId::Number(id))
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
    let matched = collection.matching_ids(&filter);
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
        assert!(collection.get(&PointId::Number(999)).is_none());
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
        vector: &query,
        limit,
        offset,
        filter: None,
        score_threshold,
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
        vector: &[1.0, 0.0],
        limit: 10,
        offset: 0,
        filter: None,
        score_threshold: Some(0.9),
    });
    assert!(similar.unwrap().iter().all(|hit| hit.score >= 0.9));

    let queries: Vec<[f32; 2]> = (0..9).map(|i| [i as f32 * 2.0, 1.0]).collect();
    let requests: Vec<SearchRequest> = queries
        .iter()
        .map(|q| SearchRequest {
            vector: q,
            limit: 3,
            offset: 0,
            filter: None,
            score_threshold: None,
        })
        .collect();
    let batch = collection.query_batch(&requests).unwrap();
    for (request, results) in requests.iter().zip(&batch) {
        assert_eq!(&collection.query(request).unwrap(), results);
    }
    assert!(matches!(
        collection.query(&request(5, 20_000, None)),
        Err(EngineError::ParameterOutOfRange { name: "offset", .. })
    ));
}
