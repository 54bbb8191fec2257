//! `POST /collections/{c}/points/batch`: operations applied in order, one answer each; a
//! list with a bad operation anywhere (a wrong dimension, a bad filter, a nested payload
//! key, `update_vectors`) is refused whole, naming the operation, before anything is
//! applied. Payload changes naming a missing point are refused (404), there and in the
//! single-operation endpoints. (Its semantics against qdrant-client's local mode: python/tests/
//! test_batch_oracle.py.)

mod support;

use axum::http::StatusCode;
use serde_json::json;
use support::{empty_collection, server};

#[tokio::test]
async fn operations_apply_in_order_and_a_bad_one_refuses_the_list() {
    let server = server();
    empty_collection(&server, "docs", 2).await;
    let result = server
        .ok(
            "POST",
            "/collections/docs/points/batch?wait=true",
            json!({"operations": [
                {"upsert": {"points": [{"id": 1, "vector": [1.0, 0.0], "payload": {"k": "a"}},
                                       {"id": 2, "vector": [0.0, 1.0], "payload": {"k": "b"}}]}},
                {"set_payload": {"payload": {"seen": true}, "filter":
                    {"must": [{"key": "k", "match": {"value": "a"}}]}}},
                {"delete": {"points": [2]}},
                {"upsert": {"batch": {"ids": [3], "vectors": [[0.5, 0.5]]}}},
                {"delete_payload": {"keys": ["k"], "points": [1]}},
            ]}),
        )
        .await;
    assert_eq!(result.as_array().unwrap().len(), 5);
    assert!(result
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["status"] == "completed"));
    let points = server
        .ok(
            "POST",
            "/collections/docs/points",
            json!({"ids": [1, 2, 3], "with_payload": true}),
        )
        .await;
    let points = points.as_array().unwrap();
    assert_eq!(points.len(), 2, "{points:?}");
    assert_eq!(points[0]["id"], 1);
    assert_eq!(points[0]["payload"], json!({"seen": true}));
    assert_eq!(points[1]["id"], 3);

    for (operation, words) in [
        (
            json!({"upsert": {"points": [{"id": 9, "vector": [1.0, 2.0, 3.0]}]}}),
            "operations[1].upsert",
        ),
        (
            json!({"delete": {"filter": {"must": [{"key": "k", "range": {"gt": "x"}}]}}}),
            "operations[1].delete.filter",
        ),
        (
            json!({"overwrite_payload": {"payload": {"a": 1}, "points": [1], "key": "x.y"}}),
            "`key`",
        ),
        (
            json!({"set_payload": {"payload": {"a": 1}, "points": [1], "key": "x..y"}}),
            "not a payload path",
        ),
        (
            json!({"update_vectors": {"points": [{"id": 1, "vector": [1.0]}]}}),
            "operations[1].update_vectors",
        ),
        (
            json!({"delete_vectors": {"points": [1], "vector": ["nope"]}}),
            "operations[1].delete_vectors",
        ),
    ] {
        let reply = server
            .call(
                "POST",
                "/collections/docs/points/batch?wait=true",
                json!({"operations": [{"delete": {"points": [1, 3]}}, operation]}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        let error = reply.body["status"]["error"].as_str().unwrap();
        assert!(error.contains(words), "{error}");
        assert_eq!(server.count("docs").await, 2, "nothing applied: {error}");
    }
    // a payload change naming a missing point is refused whole, as Qdrant does (404)
    for (method, path, body) in [
        (
            "POST",
            "/collections/docs/points/payload",
            json!({"payload": {"x": 1}, "points": [1, 99]}),
        ),
        (
            "PUT",
            "/collections/docs/points/payload",
            json!({"payload": {"x": 1}, "points": [1, 99]}),
        ),
        (
            "POST",
            "/collections/docs/points/payload/delete",
            json!({"keys": ["seen"], "points": [99, 1]}),
        ),
        (
            "POST",
            "/collections/docs/points/payload/clear",
            json!({"points": [1, 99]}),
        ),
        (
            "POST",
            "/collections/docs/points/batch",
            json!({"operations": [
            {"set_payload": {"payload": {"x": 1}, "points": [1, 99]}}]}),
        ),
    ] {
        let reply = server.call(method, path, body).await;
        assert_eq!(
            reply.status,
            StatusCode::NOT_FOUND,
            "{path}: {}",
            reply.body
        );
        let error = reply.body["status"]["error"].as_str().unwrap();
        assert!(error.contains("No point with id 99 found"), "{error}");
        let point = server
            .ok("GET", "/collections/docs/points/1", json!({}))
            .await;
        assert_eq!(point["payload"], json!({"seen": true}), "{path}");
    }
    let reply = server
        .call(
            "POST",
            "/collections/missing/points/batch",
            json!({"operations": []}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
}
