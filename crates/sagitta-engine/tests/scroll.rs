//! Scroll: pages in id order over points in write buffers and sealed segments (with and
//! without payload indexes) cover every match once, and paging through a collection
//! evaluates the filter a bounded number of times per point (issue 12 §5: a scroll
//! evaluated its filter over every point on every page, so paging was quadratic).

use std::collections::BTreeMap;
use std::path::Path;

use sagitta_engine::{Collection, CollectionConfig, Distance, FieldType, Filter, Point, PointId};
use sagitta_storage::sim::SimFileSystem;
use serde_json::{json, Value};

fn payload_for(id: u64) -> Value {
    let group = ["red", "green", "blue"][(id % 3) as usize];
    json!({"group": group, "rank": id % 10, "tags": [id % 4, {"deep": id % 5}]})
}

fn point(id: u64, payload: &Value) -> Point {
    Point {
        id: PointId::Number(id),
        vector: vec![id as f32, 1.0],
        payload: Some(payload.to_string()),
        side: Vec::new(),
    }
}

/// Points 0..3,000 (ids scattered over the id space) spread over two sealed segments per
/// shard and the write buffers, with payload updates copying sealed points into the
/// buffers and deletes in every part; returns the collection and the model of its points.
fn collection_in_every_part(fs: &SimFileSystem) -> (Collection, BTreeMap<u64, Value>) {
    let config = CollectionConfig {
        dim: 2,
        distance: Distance::Euclid,
        shard_count: 2,
        storage: Default::default(),
    };
    let collection = Collection::create(fs, Path::new("/scroll"), config).unwrap();
    let mut model = BTreeMap::new();
    let id_of = |n: u64| n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20;
    for part in 0..3u64 {
        let points: Vec<Point> = (part * 1_000..(part + 1) * 1_000)
            .map(|n| {
                let payload = payload_for(n);
                model.insert(id_of(n), payload.clone());
                point(id_of(n), &payload)
            })
            .collect();
        collection.upsert(points, true).unwrap();
        if part < 2 {
            collection.optimize(fs).unwrap();
        }
    }
    // copy on write: sealed points updated into the buffers
    let updated: Vec<PointId> = (0..2_000u64)
        .step_by(7)
        .map(|n| PointId::Number(id_of(n)))
        .collect();
    collection
        .set_payload(&updated, r#"{"group": "red"}"#, true)
        .unwrap();
    for id in &updated {
        let PointId::Number(id) = id else {
            unreachable!()
        };
        model.get_mut(id).unwrap()["group"] = json!("red");
    }
    let deleted: Vec<PointId> = (0..3_000u64)
        .step_by(11)
        .map(|n| PointId::Number(id_of(n)))
        .collect();
    collection.delete(&deleted, true).unwrap();
    for id in &deleted {
        let PointId::Number(id) = id else {
            unreachable!()
        };
        model.remove(id);
    }
    (collection, model)
}

fn scroll_all(collection: &Collection, limit: usize, filter: Option<&Filter>) -> Vec<PointId> {
    let mut seen = Vec::new();
    let mut offset = None;
    loop {
        let (page, next) = collection.scroll(offset, limit, filter).unwrap();
        assert!(page.len() <= limit);
        if let (Some(last), Some(next)) = (page.last(), next) {
            assert!(next > last.id, "next page starts after this one");
        }
        seen.extend(page.iter().map(|point| point.id));
        match next {
            Some(id) => offset = Some(id),
            None => return seen,
        }
    }
}

fn check_pages(collection: &Collection, model: &BTreeMap<u64, Value>) {
    let filters = [
        None,
        Some(json!({"must": [{"key": "group", "match": {"any": ["red", "blue"]}}]})),
        Some(json!({"must_not": [{"key": "rank", "range": {"gte": 8}}]})),
        Some(json!({"should": [{"key": "tags[].deep", "match": {"value": 3}}]})),
        Some(
            json!({"must": [{"key": "group", "match": {"value": "green"}},
                             {"key": "rank", "range": {"lt": 3}}]}),
        ),
    ];
    for value in filters {
        let filter = value.as_ref().map(|v| Filter::parse(v, "filter").unwrap());
        let expected: Vec<PointId> = model
            .iter()
            .filter(|(id, payload)| {
                filter
                    .as_ref()
                    .is_none_or(|f| f.matches(&PointId::Number(**id), Some(payload)))
            })
            .map(|(id, _)| PointId::Number(*id))
            .collect();
        assert!(!expected.is_empty());
        for limit in [1, 7, 100, 5_000] {
            assert_eq!(
                scroll_all(collection, limit, filter.as_ref()),
                expected,
                "filter {value:?}, limit {limit}"
            );
        }
        // a page from an offset that is not a point's id
        let (page, _) = collection
            .scroll(
                Some(PointId::Number(expected[3].number() + 1)),
                5,
                filter.as_ref(),
            )
            .unwrap();
        let ids: Vec<PointId> = page.iter().map(|p| p.id).collect();
        assert_eq!(ids, expected[4..9.min(expected.len())]);
    }
}

trait Number {
    fn number(&self) -> u64;
}

impl Number for PointId {
    fn number(&self) -> u64 {
        match self {
            PointId::Number(n) => *n,
            PointId::Uuid(_) => unreachable!(),
        }
    }
}

#[test]
fn pages_cover_every_match_once_in_id_order() {
    let fs = SimFileSystem::new();
    let (collection, model) = collection_in_every_part(&fs);
    assert_eq!(collection.status().segments, 4, "two segments per shard");
    check_pages(&collection, &model);
    // the same through payload-index candidates
    collection
        .create_payload_index(&fs, "group", FieldType::Keyword)
        .unwrap();
    collection
        .create_payload_index(&fs, "rank", FieldType::Integer)
        .unwrap();
    check_pages(&collection, &model);
    // and after a reopen (segments loaded from their files, buffers replayed)
    drop(collection);
    let reopened = Collection::open(&fs, Path::new("/scroll")).unwrap();
    check_pages(&reopened, &model);
}

#[test]
fn paging_through_a_collection_evaluates_each_point_a_bounded_number_of_times() {
    let fs = SimFileSystem::new();
    let (collection, model) = collection_in_every_part(&fs);
    let filter = Filter::parse(
        &json!({"must_not": [{"key": "tags[].deep", "match": {"value": 0}}]}),
        "filter",
    )
    .unwrap();
    let before = Filter::work_on_this_thread();
    let matches = collection.count(Some(&filter)).unwrap();
    let one_count = Filter::work_on_this_thread() - before;
    assert!(matches > model.len() / 2 && one_count > 0);

    let before = Filter::work_on_this_thread();
    let pages = scroll_all(&collection, 10, Some(&filter))
        .len()
        .div_ceil(10);
    let paging = Filter::work_on_this_thread() - before;
    // Each page evaluates, in each part of each shard (a buffer and two segments, six
    // parts in all), the points up to that part's 11th match from the offset: over all
    // pages, at most six counts' worth. A scroll that evaluated every point on every
    // page did `pages` counts' worth (~230 here).
    assert!(pages > 200);
    assert!(
        paging <= 7 * one_count,
        "paging through {pages} pages took {paging} steps, one count {one_count}"
    );
}
