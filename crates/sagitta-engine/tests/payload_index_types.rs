//! The uuid, datetime, geo and text payload indexes: uuid, datetime and geo indexes change
//! no answer (they only narrow the nodes checked, in sealed segments and the write buffer
//! alike); a text index makes `match.text` / `text_any` / `phrase` on its field compare
//! tokens, checked against token lists the test keeps itself; the settings survive
//! reopen; bad settings and a phrase on an index without phrase matching are refused.

use std::collections::HashSet;
use std::path::Path;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_engine::fulltext::{TextIndex, Tokenizer};
use sagitta_engine::{
    Collection, CollectionConfig, Distance, EngineError, FieldType, Filter, Point, PointId,
};
use sagitta_storage::sim::SimFileSystem;
use serde_json::{json, Value};

const DIM: usize = 4;
const WORDS: [&str; 12] = [
    "alpha", "beta", "gamma", "delta", "vector", "Search", "db", "graph", "disk", "ram", "node",
    "edge",
];

/// A point, and the words of its `body` in order (lowercased).
fn point(id: u64, rng: &mut ChaCha8Rng) -> (Point, Vec<String>) {
    let count = rng.gen_range(1..6);
    let words: Vec<&str> = (0..count).map(|_| *WORDS.choose(rng).unwrap()).collect();
    let separators = [" ", ", ", "-", ". "];
    let mut body = String::new();
    for (i, word) in words.iter().enumerate() {
        if i > 0 {
            body.push_str(separators.choose(rng).unwrap());
        }
        body.push_str(word);
    }
    let uuid = format!("{:08x}-0000-4000-8000-{:012x}", id % 50, id % 50);
    let payload = json!({
        "uid": if id.is_multiple_of(3) { uuid.to_uppercase() } else { uuid },
        "at": format!("2026-01-{:02}T{:02}:00:00Z", 1 + id % 28, id % 24),
        "place": {"lon": rng.gen_range(-20.0..20.0), "lat": rng.gen_range(-20.0..20.0)},
        "body": body,
    });
    let vector = (0..DIM).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let point = Point {
        id: PointId::Number(id),
        vector,
        payload: Some(payload.to_string()),
        side: Vec::new(),
    };
    (
        point,
        words.iter().map(|word| word.to_lowercase()).collect(),
    )
}

fn filter(value: &Value) -> Filter {
    Filter::parse(value, "filter").unwrap()
}

/// The ids passing `filter` as the collection binds it, by matching_ids (sorted), with
/// the count and a filtered search's size checked against them.
fn answer(collection: &Collection, filter: &Filter) -> Vec<PointId> {
    let bound = collection.bind_filter(filter).unwrap();
    let filter = bound.as_ref().unwrap_or(filter);
    let mut ids = collection.matching_ids(filter).unwrap();
    ids.sort_unstable();
    assert_eq!(collection.count(Some(filter)).unwrap(), ids.len());
    let hits = collection.search(&[0.5; DIM], 2_000, Some(filter)).unwrap();
    let mut found: Vec<PointId> = hits.iter().map(|hit| hit.id).collect();
    found.sort_unstable();
    assert_eq!(found, ids, "an exact-size search finds every match");
    ids
}

fn collection(fs: &SimFileSystem) -> (Collection, Vec<Vec<String>>) {
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Euclid,
        shard_count: 2,
        storage: Default::default(),
    };
    let collection = Collection::create(fs, Path::new("/c"), config).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let (sealed, mut words): (Vec<Point>, Vec<Vec<String>>) =
        (0..1_500).map(|id| point(id, &mut rng)).unzip();
    collection.upsert(sealed, true).unwrap();
    collection.optimize(fs).unwrap();
    let (buffered, more): (Vec<Point>, Vec<Vec<String>>) =
        (1_500..1_800).map(|id| point(id, &mut rng)).unzip();
    collection.upsert(buffered, true).unwrap();
    words.extend(more);
    (collection, words)
}

#[test]
fn uuid_datetime_and_geo_indexes_change_no_answer() {
    let fs = SimFileSystem::new();
    let (collection, _) = collection(&fs);
    let filters = [
        json!({"must": [{"key": "uid", "match": {"value": "00000007-0000-4000-8000-000000000007"}}]}),
        json!({"must": [{"key": "uid", "match": {"any": [
            "00000009-0000-4000-8000-000000000009", "00000003-0000-4000-8000-000000000003"]}}]}),
        json!({"must": [{"key": "uid", "match": {"value": "not a uuid"}}]}),
        json!({"must": [{"key": "at", "range": {"gte": "2026-01-05T00:00:00Z", "lt": "2026-01-07T12:00:00Z"}}]}),
        json!({"must": [{"key": "place", "geo_radius": {"center": {"lon": 1.0, "lat": 2.0}, "radius": 400_000.0}}]}),
        json!({"must": [{"key": "place", "geo_bounding_box": {
            "top_left": {"lon": -5.0, "lat": 5.0}, "bottom_right": {"lon": 5.0, "lat": -1.0}}}]}),
        json!({"must": [{"key": "place", "geo_polygon": {"exterior": {"points": [
            {"lon": 0.0, "lat": 0.0}, {"lon": 10.0, "lat": 0.0}, {"lon": 0.0, "lat": 10.0},
            {"lon": 0.0, "lat": 0.0}]}}}]}),
    ]
    .map(|value| filter(&value));
    let before: Vec<Vec<PointId>> = filters.iter().map(|f| answer(&collection, f)).collect();
    assert!(before.iter().filter(|ids| !ids.is_empty()).count() >= 6);
    for (field, kind) in [
        ("uid", FieldType::Uuid),
        ("at", FieldType::Datetime),
        ("place", FieldType::Geo),
    ] {
        collection.create_payload_index(&fs, field, kind).unwrap();
    }
    let after: Vec<Vec<PointId>> = filters.iter().map(|f| answer(&collection, f)).collect();
    assert_eq!(before, after);
    drop(collection);
    let reopened = Collection::open(&fs, Path::new("/c")).unwrap();
    assert_eq!(reopened.payload_schema()["place"], FieldType::Geo);
    assert_eq!(reopened.payload_schema()["at"], FieldType::Datetime);
    let reopened_answers: Vec<Vec<PointId>> =
        filters.iter().map(|f| answer(&reopened, f)).collect();
    assert_eq!(before, reopened_answers);
}

/// The ids whose words pass `test`.
fn truth(words: &[Vec<String>], test: impl Fn(&[String]) -> bool) -> Vec<PointId> {
    (0u64..)
        .zip(words)
        .filter(|(_, words)| test(words))
        .map(|(id, _)| PointId::Number(id))
        .collect()
}

#[test]
fn a_text_index_matches_tokens() {
    let fs = SimFileSystem::new();
    let (collection, words) = collection(&fs);
    let has = |words: &[String], word: &str| words.iter().any(|w| w == word);
    // no index: a substring ("raph" is inside "graph")
    let substring = filter(&json!({"must": [{"key": "body", "match": {"text": "raph"}}]}));
    assert!(!answer(&collection, &substring).is_empty());
    let settings = TextIndex {
        phrase_matching: true,
        ..TextIndex::default()
    };
    collection
        .create_payload_index(&fs, "body", FieldType::Text(settings))
        .unwrap();
    assert!(answer(&collection, &substring).is_empty(), "not a token");
    let all = filter(&json!({"must": [{"key": "body", "match": {"text": "SEARCH, graph"}}]}));
    let expected = truth(&words, |w| has(w, "search") && has(w, "graph"));
    assert!(!expected.is_empty());
    assert_eq!(answer(&collection, &all), expected);
    let any = filter(&json!({"must": [{"key": "body", "match": {"text_any": "disk ram"}}]}));
    assert_eq!(
        answer(&collection, &any),
        truth(&words, |w| has(w, "disk") || has(w, "ram"))
    );
    let phrase = filter(&json!({"must": [{"key": "body", "match": {"phrase": "vector db"}}]}));
    let expected = truth(&words, |w| {
        w.windows(2).any(|pair| pair == ["vector", "db"])
    });
    assert!(!expected.is_empty());
    assert_eq!(answer(&collection, &phrase), expected);
    // inside a nested filter object and a must_not
    let negated =
        filter(&json!({"must_not": [{"must": [{"key": "body", "match": {"text": "edge"}}]}]}));
    assert_eq!(
        answer(&collection, &negated),
        truth(&words, |w| !has(w, "edge"))
    );
    drop(collection);
    let reopened = Collection::open(&fs, Path::new("/c")).unwrap();
    assert_eq!(reopened.payload_schema()["body"], FieldType::Text(settings));
    assert_eq!(answer(&reopened, &phrase), expected);
}

#[test]
fn prefix_tokens_and_length_bounds() {
    let fs = SimFileSystem::new();
    let (collection, words) = collection(&fs);
    let settings = TextIndex {
        tokenizer: Tokenizer::Prefix,
        min_token_len: Some(3),
        max_token_len: Some(4),
        ..TextIndex::default()
    };
    collection
        .create_payload_index(&fs, "body", FieldType::Text(settings))
        .unwrap();
    let begins = |words: &[String], prefix: &str| words.iter().any(|w| w.starts_with(prefix));
    // "gam" begins "gamma"; "vectors" is cut to "vect"
    let prefix = filter(&json!({"must": [{"key": "body", "match": {"text": "gam vectors"}}]}));
    let expected = truth(&words, |w| begins(w, "gam") && begins(w, "vect"));
    assert!(!expected.is_empty());
    assert_eq!(answer(&collection, &prefix), expected);
    // "db" is shorter than min_token_len: the query has no token left and matches nothing
    let short = filter(&json!({"must": [{"key": "body", "match": {"text": "db"}}]}));
    assert!(answer(&collection, &short).is_empty());
}

#[test]
fn bad_text_settings_and_phrases_are_refused() {
    let fs = SimFileSystem::new();
    let (collection, _) = collection(&fs);
    let bad = TextIndex {
        min_token_len: Some(9),
        max_token_len: Some(3),
        ..TextIndex::default()
    };
    match collection.create_payload_index(&fs, "body", FieldType::Text(bad)) {
        Err(EngineError::InvalidPayloadIndex { field, reason }) => {
            assert_eq!(field, "body");
            assert!(reason.contains("min_token_len"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    collection
        .create_payload_index(&fs, "body", FieldType::parse("text").unwrap())
        .unwrap();
    let phrase = filter(&json!({"must": [{"key": "body", "match": {"phrase": "vector db"}}]}));
    let error = collection.bind_filter(&phrase).unwrap_err().to_string();
    assert!(
        error.contains("body") && error.contains("phrase_matching"),
        "{error}"
    );
    let names: HashSet<&str> = [
        "keyword", "integer", "float", "bool", "uuid", "datetime", "geo", "text",
    ]
    .into_iter()
    .filter(|name| FieldType::parse(name).is_ok())
    .collect();
    assert_eq!(names.len(), 8);
    assert!(FieldType::parse("multilingual").is_err());
}
