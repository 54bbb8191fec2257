//! `POST /collections/{c}/facet`: counts of an indexed field's values, and its refusals
//! (no index, a bad limit, a bad filter, an unknown field), each naming what is wrong.
//! (Its counts against qdrant-client's local mode: python/tests/test_facet_oracle.py.)

mod support;

use axum::http::StatusCode;
use serde_json::json;
use support::{empty_collection, server};

#[tokio::test]
async fn facet_counts_an_indexed_field_and_refuses_bad_requests() {
    let server = server();
    empty_collection(&server, "docs", 2).await;
    server
        .ok(
            "PUT",
            "/collections/docs/index?wait=true",
            json!({"field_name": "tag", "field_schema": "keyword"}),
        )
        .await;
    let points: Vec<_> = (0..5)
        .map(|i| {
            let tags = if i % 2 == 0 {
                json!(["a", "b", "a"])
            } else {
                json!("a")
            };
            json!({"id": i, "vector": [1.0, i as f32], "payload": {"tag": tags, "n": i}})
        })
        .collect();
    server
        .ok(
            "PUT",
            "/collections/docs/points?wait=true",
            json!({ "points": points }),
        )
        .await;
    let result = server
        .ok("POST", "/collections/docs/facet", json!({"key": "tag"}))
        .await;
    assert_eq!(
        result,
        json!({"hits": [{"value": "a", "count": 5}, {"value": "b", "count": 3}]})
    );
    let result = server
        .ok(
            "POST",
            "/collections/docs/facet",
            json!({"key": "tag", "limit": 1, "exact": true,
                   "filter": {"must": [{"key": "n", "range": {"gte": 3}}]}}),
        )
        .await;
    assert_eq!(result, json!({"hits": [{"value": "a", "count": 2}]}));

    for (body, words) in [
        (json!({"key": "n"}), "Index required"),
        (json!({"key": "tag", "limit": 0}), "limit"),
        (
            json!({"key": "tag", "filter": {"must": [{"nope": 1}]}}),
            "filter.must[0]",
        ),
        (json!({"key": "tag", "offset": 3}), "offset"),
    ] {
        let reply = server.call("POST", "/collections/docs/facet", body).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        let error = reply.body["status"]["error"].as_str().unwrap();
        assert!(error.contains(words), "{error}");
    }
}
