//! Payload indexes over HTTP: every Qdrant index type is made, its settings echoed in
//! collection info; a text index turns `match.text` on its field from a substring test
//! into a token match; bad settings are refused naming the field.

mod support;

use axum::http::StatusCode;
use serde_json::{json, Value};
use support::{server, Server};

async fn ids(server: &Server, filter: Value) -> Vec<u64> {
    let page = server
        .ok(
            "POST",
            "/collections/docs/points/scroll",
            json!({"filter": filter, "limit": 100}),
        )
        .await;
    page["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|point| point["id"].as_u64().unwrap())
        .collect()
}

async fn setup(server: &Server) {
    server
        .ok(
            "PUT",
            "/collections/docs",
            json!({"vectors": {"size": 2, "distance": "Dot"}}),
        )
        .await;
    let bodies = [
        "Graph search on disk",
        "photographs of cats",
        "the disk graph, searched",
        "vector search",
    ];
    let points: Vec<Value> = (0u64..)
        .zip(bodies)
        .map(|(id, body)| {
            json!({"id": id, "vector": [1.0, id as f32], "payload": {
                "body": body,
                "uid": format!("{id:08x}-0000-4000-8000-000000000000"),
                "at": format!("2026-01-0{}T00:00:00Z", id + 1),
                "place": {"lon": id as f64, "lat": 0.0},
            }})
        })
        .collect();
    server
        .ok(
            "PUT",
            "/collections/docs/points?wait=true",
            json!({ "points": points }),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_index_matches_tokens_and_echoes_its_settings() {
    let server = server();
    setup(&server).await;
    let text = |words: &str| json!({"must": [{"key": "body", "match": {"text": words}}]});
    // no index: a substring (case and all), as Qdrant
    assert_eq!(ids(&server, text("graph")).await, [1, 2]);
    server
        .ok(
            "PUT",
            "/collections/docs/index?wait=true",
            json!({"field_name": "body", "field_schema": {
                "type": "text", "tokenizer": "word", "min_token_len": 2,
                "max_token_len": 15, "lowercase": true, "phrase_matching": true,
                "on_disk": true}}),
        )
        .await;
    assert_eq!(
        ids(&server, text("graph")).await,
        [0, 2],
        "a token in any case, not a part"
    );
    assert_eq!(ids(&server, text("disk GRAPH")).await, [0, 2]);
    let any = json!({"must": [{"key": "body", "match": {"text_any": "cats vector"}}]});
    assert_eq!(ids(&server, any).await, [1, 3]);
    let phrase = json!({"must": [{"key": "body", "match": {"phrase": "disk graph"}}]});
    assert_eq!(ids(&server, phrase).await, [2]);
    let info = server.ok("GET", "/collections/docs", json!(null)).await;
    let schema = &info["payload_schema"]["body"];
    assert_eq!(schema["data_type"], "text");
    assert_eq!(schema["points"], 4);
    assert_eq!(
        schema["params"],
        json!({"type": "text", "tokenizer": "word", "min_token_len": 2, "max_token_len": 15,
               "lowercase": true, "phrase_matching": true, "on_disk": true})
    );
    // the same index without phrase matching refuses phrases, naming the field
    server
        .ok(
            "PUT",
            "/collections/docs/index?wait=true",
            json!({"field_name": "body", "field_schema": "text"}),
        )
        .await;
    let refused = server
        .call(
            "POST",
            "/collections/docs/points/scroll",
            json!({"filter": {"must": [{"key": "body", "match": {"phrase": "disk graph"}}]}}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    let message = refused.body["status"]["error"].as_str().unwrap();
    assert!(
        message.contains("body") && message.contains("phrase_matching"),
        "{message}"
    );
    let info = server.ok("GET", "/collections/docs", json!(null)).await;
    assert_eq!(
        info["payload_schema"]["body"]["params"]["on_disk"],
        Value::Null
    );
    // dropping the index brings substrings back
    server
        .ok(
            "DELETE",
            "/collections/docs/index/body?wait=true",
            json!(null),
        )
        .await;
    assert_eq!(ids(&server, text("graph")).await, [1, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_index_type_is_made_and_changes_no_other_answer() {
    let server = server();
    setup(&server).await;
    let filters = [
        json!({"must": [{"key": "uid", "match": {"value": "00000001-0000-4000-8000-000000000000"}}]}),
        json!({"must": [{"key": "at", "range": {"gte": "2026-01-02T00:00:00Z", "lt": "2026-01-04T00:00:00Z"}}]}),
        json!({"must": [{"key": "place", "geo_radius": {"center": {"lon": 0.0, "lat": 0.0}, "radius": 200_000.0}}]}),
    ];
    let mut before = Vec::new();
    for filter in &filters {
        before.push(ids(&server, filter.clone()).await);
    }
    assert_eq!(before, [vec![1], vec![1, 2], vec![0, 1]]);
    for (field, schema) in [
        (
            "uid",
            json!({"type": "uuid", "is_tenant": false, "on_disk": true}),
        ),
        ("at", json!("datetime")),
        ("place", json!({"type": "geo"})),
        (
            "pk",
            json!({"type": "integer", "lookup": true, "range": false, "is_principal": false}),
        ),
    ] {
        server
            .ok(
                "PUT",
                "/collections/docs/index?wait=true",
                json!({"field_name": field, "field_schema": schema}),
            )
            .await;
    }
    for (filter, expected) in filters.iter().zip(&before) {
        assert_eq!(&ids(&server, filter.clone()).await, expected);
    }
    let info = server.ok("GET", "/collections/docs", json!(null)).await;
    let schema = &info["payload_schema"];
    assert_eq!(schema["uid"]["data_type"], "uuid");
    assert_eq!(
        schema["uid"]["params"],
        json!({"type": "uuid", "is_tenant": false, "on_disk": true})
    );
    assert_eq!(schema["at"]["params"], Value::Null);
    assert_eq!(schema["place"]["data_type"], "geo");
    assert_eq!(schema["place"]["points"], 4);
    assert_eq!(schema["pk"]["params"]["range"], false);
    assert_eq!(schema["pk"]["points"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_index_settings_name_the_field() {
    let server = server();
    setup(&server).await;
    let cases = [
        (
            json!({"type": "text", "tokenizer": "multilingual"}),
            "field_schema.tokenizer",
        ),
        (
            json!({"type": "text", "stopwords": "english"}),
            "field_schema.stopwords",
        ),
        (
            json!({"type": "text", "ascii_folding": true}),
            "field_schema.ascii_folding",
        ),
        (
            json!({"type": "text", "min_token_len": 0}),
            "field_schema.min_token_len",
        ),
        (
            json!({"type": "text", "min_token_len": 9, "max_token_len": 3}),
            "min_token_len",
        ),
        (
            json!({"type": "keyword", "tokenizer": "word"}),
            "field_schema.tokenizer",
        ),
        (
            json!({"type": "keyword", "on_disk": "yes"}),
            "field_schema.on_disk",
        ),
        (json!({"type": "geography"}), "geography"),
        (json!({"tokenizer": "word"}), "field_schema.type"),
    ];
    for (schema, named) in cases {
        let reply = server
            .call(
                "PUT",
                "/collections/docs/index",
                json!({"field_name": "body", "field_schema": schema}),
            )
            .await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{schema}: {}",
            reply.body
        );
        let message = reply.body["status"]["error"].as_str().unwrap();
        assert!(message.contains(named), "{schema}: {message}");
    }
    let info = server.ok("GET", "/collections/docs", json!(null)).await;
    assert_eq!(info["payload_schema"], json!({}));
}
