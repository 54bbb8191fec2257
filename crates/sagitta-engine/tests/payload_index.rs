//! Payload indexes: counts, scrolls and filtered searches give the same answers with and
//! without them (they only narrow the nodes checked), selective indexed filters are exact,
//! and the schema survives reopen and applies to segments sealed later.

use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_engine::{
    Collection, CollectionConfig, Distance, EngineError, FieldType, Filter, Point, PointId,
};
use sagitta_storage::sim::SimFileSystem;
use serde_json::json;

const DIM: usize = 8;

fn points(range: std::ops::Range<u64>, rng: &mut ChaCha8Rng) -> Vec<Point> {
    range
        .map(|id| {
            let payload = json!({
                "color": format!("c{}", rng.gen_range(0..60)),
                "n": rng.gen_range(0..1_000),
                "x": rng.gen_range(-1.0..1.0),
                "flag": rng.gen_bool(0.1),
                "meta": {"tags": [format!("t{}", id % 7), format!("t{}", id % 11)]},
            });
            Point {
                id: PointId::Number(id),
                vector: (0..DIM).map(|_| rng.gen_range(-1.0..1.0)).collect(),
                payload: Some(payload.to_string()),
                side: Vec::new(),
            }
        })
        .collect()
}

fn filters() -> Vec<Filter> {
    [
        json!({"must": [{"key": "color", "match": {"value": "c7"}}]}),
        json!({"must": [{"key": "color", "match": {"any": ["c1", "c2", "c59"]}}]}),
        json!({"must": [{"key": "n", "range": {"gte": 100, "lt": 130}}]}),
        json!({"must": [{"key": "n", "match": {"value": 500}}]}),
        json!({"must": [{"key": "x", "range": {"gt": 0.5, "lte": 0.52}}]}),
        json!({"must": [{"key": "x", "range": {"gt": 0.9, "lt": 0.1}}]}),
        json!({"must": [{"key": "flag", "match": {"value": true}}]}),
        json!({"must": [{"key": "meta.tags", "match": {"value": "t3"}}]}),
        json!({"must": [
            {"key": "color", "match": {"value": "c3"}},
            {"key": "n", "range": {"lt": 500}},
            {"key": "flag", "match": {"value": false}}
        ]}),
        json!({"must": [{"must": [{"key": "n", "range": {"gt": 990}}]}],
               "must_not": [{"key": "color", "match": {"value": "c0"}}]}),
        json!({"should": [{"key": "color", "match": {"value": "c5"}}]}),
        json!({"must": [{"key": "color", "match": {"value": 5}}]}),
    ]
    .iter()
    .map(|value| Filter::parse(value, "filter").unwrap())
    .collect()
}

fn answers(collection: &Collection, query: &[f32]) -> Vec<(usize, Vec<PointId>, Vec<PointId>)> {
    filters()
        .iter()
        .map(|filter| {
            let mut ids = collection.matching_ids(filter).unwrap();
            ids.sort_unstable();
            let hits = collection.search(query, 10, Some(filter)).unwrap();
            let found = hits.iter().map(|hit| hit.id).collect();
            (collection.count(Some(filter)).unwrap(), ids, found)
        })
        .collect()
}

#[test]
fn indexes_change_no_answer_and_survive_reopen() {
    let fs = SimFileSystem::new();
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Euclid,
        shard_count: 2,
        storage: Default::default(),
    };
    let directory = Path::new("/c");
    let collection = Collection::create(&fs, directory, config).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    collection.upsert(points(0..4_000, &mut rng), true).unwrap();
    collection.optimize(&fs).unwrap();
    collection
        .upsert(points(4_000..4_500, &mut rng), true)
        .unwrap(); // buffered
    let query = vec![0.1; DIM];
    let before = answers(&collection, &query);
    // exact truth for the counts and ids
    let all = collection.points().unwrap();
    for (filter, (count, ids, _)) in filters().iter().zip(&before) {
        let mut truth: Vec<PointId> = all
            .iter()
            .filter(|p| {
                let payload: serde_json::Value =
                    serde_json::from_str(p.payload.as_deref().unwrap()).unwrap();
                filter.matches(&p.id, Some(&payload))
            })
            .map(|p| p.id)
            .collect();
        truth.sort_unstable();
        assert_eq!((*count, ids), (truth.len(), &truth), "{filter:?}");
    }
    let fields = [
        ("color", FieldType::Keyword),
        ("n", FieldType::Integer),
        ("x", FieldType::Float),
        ("flag", FieldType::Bool),
        ("meta.tags", FieldType::Keyword),
    ];
    for (field, kind) in fields {
        collection.create_payload_index(&fs, field, kind).unwrap();
    }
    assert_eq!(answers(&collection, &query), before);
    // sealed later: built with the indexes
    collection.optimize(&fs).unwrap();
    assert_eq!(answers(&collection, &query), before);
    drop(collection);
    let reopened = Collection::open(&fs, directory).unwrap();
    assert_eq!(reopened.payload_schema().len(), 5);
    assert_eq!(reopened.payload_schema()["n"], FieldType::Integer);
    assert_eq!(answers(&reopened, &query), before);
    reopened.delete_payload_index(&fs, "n").unwrap();
    assert_eq!(answers(&reopened, &query), before);
    drop(reopened);
    assert_eq!(
        Collection::open(&fs, directory)
            .unwrap()
            .payload_schema()
            .len(),
        4
    );
}

/// A filter passing ~0.2% of the points, answered through the keyword index: the filtered
/// search is exact (every passing point considered, in exact order).
#[test]
fn a_selective_indexed_filter_is_searched_exactly() {
    let fs = SimFileSystem::new();
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Dot,
        shard_count: 1,
        storage: Default::default(),
    };
    let collection = Collection::create(&fs, Path::new("/c"), config).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let mut all = points(0..5_000, &mut rng);
    for point in all.iter_mut().step_by(500) {
        point.payload = Some(json!({"color": "rare"}).to_string());
    }
    collection.upsert(all.clone(), true).unwrap();
    collection.optimize(&fs).unwrap();
    collection
        .create_payload_index(&fs, "color", FieldType::Keyword)
        .unwrap();
    let filter = Filter::parse(
        &json!({"must": [{"key": "color", "match": {"value": "rare"}}]}),
        "filter",
    )
    .unwrap();
    let query: Vec<f32> = (0..DIM).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let mut truth: Vec<(f32, PointId)> = all
        .iter()
        .step_by(500)
        .map(|p| (p.vector.iter().zip(&query).map(|(a, b)| a * b).sum(), p.id))
        .collect();
    truth.sort_by(|a, b| b.0.total_cmp(&a.0));
    let hits = collection.search(&query, 5, Some(&filter)).unwrap();
    let ids: Vec<PointId> = hits.iter().map(|hit| hit.id).collect();
    assert_eq!(ids, truth[..5].iter().map(|t| t.1).collect::<Vec<_>>());
}

#[test]
fn bad_index_requests_name_the_field() {
    let fs = SimFileSystem::new();
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Dot,
        shard_count: 1,
        storage: Default::default(),
    };
    let collection = Collection::create(&fs, Path::new("/c"), config).unwrap();
    for bad in ["", "a..b", ".a", &"x".repeat(256)] {
        match collection.create_payload_index(&fs, bad, FieldType::Keyword) {
            Err(EngineError::InvalidPayloadIndex { field, .. }) => assert_eq!(field, bad),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert!(matches!(
        FieldType::parse("geography"),
        Err(EngineError::InvalidPayloadIndex { reason, .. }) if reason.contains("geography")
    ));
    assert!(collection.payload_schema().is_empty());
}
