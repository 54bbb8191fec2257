//! The REST API end to end through the router (no sockets): the contract's shapes, exact
//! results against brute force, every bad-request class, API keys, the write queue, the
//! metrics, and the flush on graceful shutdown.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use rand::rngs::mock::StepRng;
use sagitta_engine::database::DatabaseOptions;
use sagitta_engine::Database;
use sagitta_server::{router, AppState, ServerConfig};
use sagitta_storage::sim::SimFileSystem;
use serde_json::{json, Value};
use tower::ServiceExt;

struct Server {
    app: Router,
    state: Arc<AppState>,
    _directory: tempfile::TempDir,
}

fn server_with(config: ServerConfig) -> Server {
    let directory = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        data_dir: directory.path().to_path_buf(),
        ..config
    };
    let state = Arc::new(AppState::open(config).unwrap());
    Server {
        app: router(Arc::clone(&state)),
        state,
        _directory: directory,
    }
}

fn server() -> Server {
    server_with(ServerConfig::default())
}

struct Reply {
    status: StatusCode,
    body: Value,
    retry_after: Option<String>,
}

impl Server {
    async fn send(&self, method: &str, path: &str, body: &str, key: Option<&str>) -> Reply {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(key) = key {
            request = request.header("api-key", key);
        }
        let request = request
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let retry_after = response
            .headers()
            .get("retry-after")
            .map(|value| value.to_str().unwrap().to_string());
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Reply {
            status,
            body,
            retry_after,
        }
    }

    async fn call(&self, method: &str, path: &str, body: Value) -> Reply {
        self.send(method, path, &body.to_string(), None).await
    }

    /// A request that must succeed; returns `result`.
    async fn ok(&self, method: &str, path: &str, body: Value) -> Value {
        let reply = self.call(method, path, body).await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "{method} {path}: {}",
            reply.body
        );
        assert_eq!(reply.body["status"], "ok");
        assert!(reply.body["time"].is_number());
        reply.body["result"].clone()
    }

    async fn count(&self, collection: &str) -> u64 {
        self.ok(
            "POST",
            &format!("/collections/{collection}/points/count"),
            json!({}),
        )
        .await["count"]
            .as_u64()
            .unwrap()
    }
}

/// Deterministic vectors: row `i` of a small pseudo-random matrix.
fn vector(i: u64, dim: usize) -> Vec<f32> {
    (0..dim as u64)
        .map(|j| {
            let x = (i * 31 + j * 17 + 7).wrapping_mul(0x9E37_79B9) % 1000;
            x as f32 / 1000.0 - 0.5
        })
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

async fn make_collection(server: &Server, name: &str, dim: usize, count: u64) {
    server
        .ok(
            "PUT",
            &format!("/collections/{name}"),
            json!({"vectors": {"size": dim, "distance": "Cosine"}, "hnsw_config": {"m": 16},
                   "optimizers_config": {"max_optimization_threads": 0}}),
        )
        .await;
    let points: Vec<Value> = (0..count)
        .map(|i| {
            json!({"id": i, "vector": vector(i, dim),
                   "payload": {"group": if i % 2 == 0 { "even" } else { "odd" },
                               "rank": i, "meta": {"kind": format!("k{}", i % 3)}}})
        })
        .collect();
    server
        .ok(
            "PUT",
            &format!("/collections/{name}/points?wait=true"),
            json!({ "points": points }),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_endpoints_and_collection_lifecycle() {
    let server = server();
    let root = server.call("GET", "/", json!(null)).await;
    assert_eq!(
        root.body["version"],
        sagitta_server::QDRANT_COMPATIBLE_VERSION
    );
    assert!(root.body["title"].as_str().unwrap().contains("qdrant"));
    for probe in ["/healthz", "/livez", "/readyz"] {
        assert_eq!(server.call("GET", probe, json!(null)).await.status, 200);
    }
    make_collection(&server, "docs", 8, 40).await;
    let listed = server.ok("GET", "/collections", json!(null)).await;
    assert_eq!(listed, json!({"collections": [{"name": "docs"}]}));
    let exists = server
        .ok("GET", "/collections/docs/exists", json!(null))
        .await;
    assert_eq!(exists, json!({"exists": true}));
    let info = server.ok("GET", "/collections/docs", json!(null)).await;
    assert_eq!(info["points_count"], 40);
    assert_eq!(info["config"]["params"]["vectors"]["size"], 8);
    assert_eq!(info["config"]["params"]["vectors"]["distance"], "Cosine");
    assert_eq!(info["optimizer_status"], "ok");
    assert!(["green", "yellow"].contains(&info["status"].as_str().unwrap()));
    assert!(info["segments_count"].is_u64());
    assert_eq!(
        info["config"]["optimizer_config"]["max_optimization_threads"],
        0
    );
    server
        .ok(
            "PATCH",
            "/collections/docs",
            json!({"optimizers_config": {"max_optimization_threads": 100_000}}),
        )
        .await;
    let info = server.ok("GET", "/collections/docs", json!(null)).await;
    assert_eq!(
        info["config"]["optimizer_config"]["max_optimization_threads"],
        100_000
    );
    let index = server
        .ok(
            "PUT",
            "/collections/docs/index?wait=true",
            json!({"field_name": "group", "field_schema": "keyword"}),
        )
        .await;
    assert_eq!(index["status"], "completed");
    server
        .ok(
            "PUT",
            "/collections/docs/points?wait=true",
            json!({"points": [{"id": 1000, "vector": vector(1000, 8)}]}),
        )
        .await;
    let info = server.ok("GET", "/collections/docs", json!(null)).await;
    assert_eq!(info["points_count"], 41);
    assert_eq!(info["payload_schema"]["group"]["data_type"], "keyword");
    assert_eq!(info["payload_schema"]["group"]["points"], 40);
    server
        .ok(
            "PUT",
            "/collections/docs/index",
            json!({"field_name": "rank", "field_schema": {"type": "integer", "is_tenant": false}}),
        )
        .await;
    server
        .ok("DELETE", "/collections/docs/index/rank", json!(null))
        .await;
    let duplicate = server
        .call(
            "PUT",
            "/collections/docs",
            json!({"vectors": {"size": 8, "distance": "Cosine"}}),
        )
        .await;
    assert_eq!(duplicate.status, StatusCode::CONFLICT);
    assert!(duplicate.body["status"]["error"]
        .as_str()
        .unwrap()
        .contains("already exists"));
    assert_eq!(
        server.ok("DELETE", "/collections/docs", json!(null)).await,
        true
    );
    assert_eq!(
        server.ok("DELETE", "/collections/docs", json!(null)).await,
        false
    );
    let exists = server
        .ok("GET", "/collections/docs/exists", json!(null))
        .await;
    assert_eq!(exists, json!({"exists": false}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_match_brute_force_in_every_form() {
    let server = server();
    let dim = 8;
    make_collection(&server, "docs", dim, 300).await;
    let query = vector(1000, dim);
    let mut expected: Vec<(u64, f32)> = (0..300)
        .map(|i| (i, cosine(&query, &vector(i, dim))))
        .collect();
    expected.sort_by(|a, b| b.1.total_cmp(&a.1));
    let expected_ids: Vec<u64> = expected.iter().take(10).map(|(id, _)| *id).collect();
    let ids = |result: &Value| -> Vec<u64> {
        result["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|hit| hit["id"].as_u64().unwrap())
            .collect()
    };
    let raw = server
        .ok(
            "POST",
            "/collections/docs/points/query",
            json!({"query": query, "limit": 10, "params": {"exact": true}}),
        )
        .await;
    assert_eq!(ids(&raw), expected_ids);
    let hit = &raw["points"][0];
    assert_eq!(hit["version"], 0);
    assert!((hit["score"].as_f64().unwrap() - f64::from(expected[0].1)).abs() < 1e-4);
    let nearest = server
        .ok(
            "POST",
            "/collections/docs/points/query",
            json!({"query": {"nearest": query}, "using": "", "limit": 10,
                   "params": {"hnsw_ef": 128, "quantization": {"rescore": true}},
                   "with_payload": ["group"], "with_vector": true}),
        )
        .await;
    assert_eq!(ids(&nearest), expected_ids);
    let first = &nearest["points"][0];
    assert_eq!(first["payload"].as_object().unwrap().len(), 1);
    assert_eq!(first["vector"].as_array().unwrap().len(), dim);
    // A filtered query is exact over the matching points.
    let filtered = server
        .ok(
            "POST",
            "/collections/docs/points/query",
            json!({"query": query, "limit": 5,
                   "filter": {"must": [{"key": "group", "match": {"value": "odd"}},
                                       {"key": "meta.kind", "match": {"any": ["k1", "k2"]}}],
                              "must_not": [{"has_id": [expected_ids[0]]}]}}),
        )
        .await;
    let wanted: Vec<u64> = expected
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| id % 2 == 1 && id % 3 != 0 && *id != expected_ids[0])
        .take(5)
        .collect();
    assert_eq!(ids(&filtered), wanted);
    // Query by id: that point's vector, the point itself left out.
    let by_id = server
        .ok(
            "POST",
            "/collections/docs/points/query",
            json!({"query": 7, "limit": 3, "params": {"exact": true}}),
        )
        .await;
    assert_eq!(by_id["points"].as_array().unwrap().len(), 3);
    assert!(!ids(&by_id).contains(&7));
    // Offset and score threshold.
    let paged = server
        .ok(
            "POST",
            "/collections/docs/points/query",
            json!({"query": query, "limit": 5, "offset": 5, "params": {"exact": true},
                   "score_threshold": (expected[7].1 + expected[8].1) / 2.0}),
        )
        .await;
    assert_eq!(ids(&paged), expected_ids[5..8].to_vec());
    let batch = server
        .ok(
            "POST",
            "/collections/docs/points/query/batch",
            json!({"searches": [{"query": query, "limit": 10, "params": {"exact": true}},
                                {"query": {"nearest": query}, "limit": 2}]}),
        )
        .await;
    assert_eq!(ids(&batch[0]), expected_ids);
    assert_eq!(ids(&batch[1]), expected_ids[..2].to_vec());
    // The pre-1.16 search endpoints return the hit lists directly.
    let old = server
        .ok(
            "POST",
            "/collections/docs/points/search",
            json!({"vector": query, "limit": 3, "params": {"exact": true}, "with_payload": true}),
        )
        .await;
    let old_ids: Vec<u64> = old
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["id"].as_u64().unwrap())
        .collect();
    assert_eq!(old_ids, expected_ids[..3].to_vec());
    assert!(old[0]["payload"]["group"].is_string());
    let old_batch = server
        .ok(
            "POST",
            "/collections/docs/points/search/batch",
            json!({"searches": [{"vector": {"name": "", "vector": query}, "limit": 1}]}),
        )
        .await;
    assert_eq!(old_batch[0][0]["id"], expected_ids[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn points_scroll_count_retrieve_delete_and_payloads() {
    let server = server();
    make_collection(&server, "docs", 4, 0).await;
    let uuid = "5c56c793-69f3-4fbf-87e6-c4bf54c28c26";
    server
        .ok(
            "PUT",
            "/collections/docs/points?wait=true",
            json!({"batch": {"ids": [1, 2, 3, uuid],
                             "vectors": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]],
                             "payloads": [{"a": 1}, {"a": 2}, null, {"a": 4, "b": {"c": 1}}]}}),
        )
        .await;
    server
        .ok(
            "PUT",
            "/collections/docs/points",
            json!({"points": [{"id": 10, "vector": {"": [1, 1, 0, 0]}}]}),
        )
        .await;
    assert_eq!(server.count("docs").await, 5);
    let mut seen = Vec::new();
    let mut offset = Value::Null;
    loop {
        let page = server
            .ok(
                "POST",
                "/collections/docs/points/scroll",
                json!({"limit": 2, "offset": offset, "with_vector": true}),
            )
            .await;
        for point in page["points"].as_array().unwrap() {
            assert_eq!(point["vector"].as_array().unwrap().len(), 4);
            seen.push(point["id"].clone());
        }
        offset = page["next_page_offset"].clone();
        if offset.is_null() {
            break;
        }
    }
    assert_eq!(
        seen,
        vec![json!(1), json!(2), json!(3), json!(10), json!(uuid)]
    );
    let records = server
        .ok(
            "POST",
            "/collections/docs/points",
            json!({"ids": [uuid, 2, 99]}),
        )
        .await;
    assert_eq!(records.as_array().unwrap().len(), 2);
    assert_eq!(records[0]["id"], uuid);
    assert_eq!(records[0]["payload"]["b"]["c"], 1);
    let one = server
        .ok(
            "GET",
            &format!("/collections/docs/points/{uuid}"),
            json!(null),
        )
        .await;
    assert_eq!(one["payload"]["a"], 4);
    let missing = server
        .call("GET", "/collections/docs/points/99", json!(null))
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    // Payload updates by id and by filter.
    server
        .ok(
            "POST",
            "/collections/docs/points/payload?wait=true",
            json!({"payload": {"tag": "x"}, "points": [1, 2]}),
        )
        .await;
    server
        .ok(
            "PUT",
            "/collections/docs/points/payload",
            json!({"payload": {"only": true}, "filter": {"must": [{"key": "a", "match": {"value": 4}}]}}),
        )
        .await;
    server
        .ok(
            "POST",
            "/collections/docs/points/payload/delete",
            json!({"keys": ["a"], "points": [2]}),
        )
        .await;
    server
        .ok(
            "POST",
            "/collections/docs/points/payload/clear",
            json!({"points": [10]}),
        )
        .await;
    let records = server
        .ok(
            "POST",
            "/collections/docs/points",
            json!({"ids": [1, 2, uuid, 10]}),
        )
        .await;
    assert_eq!(records[0]["payload"], json!({"a": 1, "tag": "x"}));
    assert_eq!(records[1]["payload"], json!({"tag": "x"}));
    assert_eq!(records[2]["payload"], json!({"only": true}));
    assert_eq!(records[3]["payload"], json!({}));
    let counted = server
        .ok(
            "POST",
            "/collections/docs/points/count",
            json!({"filter": {"must": [{"key": "tag", "match": {"value": "x"}}]}, "exact": true}),
        )
        .await;
    assert_eq!(counted["count"], 2);
    // Deletes by filter and by id.
    server
        .ok(
            "POST",
            "/collections/docs/points/delete?wait=true",
            json!({"filter": {"must": [{"key": "tag", "match": {"value": "x"}}]}}),
        )
        .await;
    server
        .ok(
            "POST",
            "/collections/docs/points/delete",
            json!({"points": [uuid]}),
        )
        .await;
    let left = server
        .ok("POST", "/collections/docs/points/scroll", json!({}))
        .await;
    let left: Vec<Value> = left["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].clone())
        .collect();
    assert_eq!(left, vec![json!(3), json!(10)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_named_and_store_nothing() {
    let server = server_with(ServerConfig {
        max_request_bytes: 4096,
        max_batch_points: 5,
        max_json_depth: 8,
        ..ServerConfig::default()
    });
    make_collection(&server, "docs", 4, 3).await;
    let expect = |reply: Reply, status: StatusCode, words: &[&str]| {
        assert_eq!(reply.status, status, "{}", reply.body);
        let message = reply.body["status"]["error"].as_str().unwrap().to_string();
        for word in words {
            assert!(message.contains(word), "{word:?} not in {message:?}");
        }
    };
    let upsert = "/collections/docs/points?wait=true";
    expect(
        server.send("PUT", upsert, "{\"points\": [", None).await,
        StatusCode::BAD_REQUEST,
        &["malformed JSON"],
    );
    expect(
        server
            .call(
                "PUT",
                upsert,
                json!({"points": [{"id": 9, "vector": [1, 2]}]}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        &["dimension", "expected dim 4"],
    );
    expect(
        server
            .send(
                "PUT",
                upsert,
                r#"{"points": [{"id": 9, "vector": [1, 2, 1e39, 0]}]}"#,
                None,
            )
            .await,
        StatusCode::BAD_REQUEST,
        &["points[0].vector[2]", "out of range"],
    );
    expect(
        server
            .call(
                "PUT",
                upsert,
                json!({"points": [{"id": -1, "vector": [1, 2, 3, 4]}]}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        &["points[0].id", "negative"],
    );
    expect(
        server
            .call(
                "PUT",
                upsert,
                json!({"points": [{"id": 9, "vector": [1, 2, 3, 4], "payload": [1]}]}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        &["points[0].payload", "object"],
    );
    expect(
        server
            .call(
                "PUT",
                upsert,
                json!({"points": [{"id": 9, "vector": {"text": [1, 2, 3, 4]}}]}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        &["points[0].vector", "\"text\""],
    );
    expect(
        server
            .call(
                "PUT",
                "/collections/nope/points",
                json!({"points": [{"id": 9, "vector": [1, 2, 3, 4]}]}),
            )
            .await,
        StatusCode::NOT_FOUND,
        &["nope", "doesn't exist"],
    );
    expect(
        server
            .call(
                "POST",
                "/collections/docs/points/query",
                json!({"query": [1, 2, 3, 4], "filter": {"must": [{"key": "a", "range": {"gt": "x"}}]}}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        &["filter"],
    );
    expect(
        server
            .call(
                "POST",
                "/collections/docs/points/delete",
                json!({"filter": {"must": [{"key": "a", "match": {}}]}}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        &["filter"],
    );
    expect(
        server
            .call(
                "POST",
                "/collections/docs/points/query",
                json!({"query": {"nearest": {"indices": [1], "values": [0.5]}}}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        &["sparse"],
    );
    let big: Vec<f32> = vec![0.5; 2000];
    expect(
        server
            .call("PUT", upsert, json!({"points": [{"id": 9, "vector": big}]}))
            .await,
        StatusCode::PAYLOAD_TOO_LARGE,
        &["4096 bytes"],
    );
    let many: Vec<Value> = (0..6)
        .map(|i| json!({"id": 100 + i, "vector": [1, 2, 3, 4]}))
        .collect();
    expect(
        server.call("PUT", upsert, json!({ "points": many })).await,
        StatusCode::PAYLOAD_TOO_LARGE,
        &["points", "limit of 5"],
    );
    let deep = format!(
        "{{\"points\": [{{\"id\": 9, \"vector\": [1,2,3,4], \"payload\": {}1{}}}]}}",
        "{\"a\":".repeat(10),
        "}".repeat(10)
    );
    expect(
        server.send("PUT", upsert, &deep, None).await,
        StatusCode::BAD_REQUEST,
        &["nests deeper", "8 levels"],
    );
    expect(
        server
            .call(
                "PUT",
                "/collections/other",
                json!({"vectors": {"size": 4, "distance": "Manhattan"}}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        &["vectors.distance", "Manhattan"],
    );
    expect(
        server
            .call(
                "PUT",
                "/collections/other",
                json!({"vectors": {"size": "four"}}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        &["vectors"],
    );
    expect(
        server.call("GET", "/no/such/route", json!(null)).await,
        StatusCode::NOT_FOUND,
        &["/no/such/route"],
    );
    assert_eq!(server.count("docs").await, 3);
    let exists = server
        .ok("GET", "/collections/other/exists", json!(null))
        .await;
    assert_eq!(exists["exists"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_separate_readers_from_writers() {
    let server = server_with(ServerConfig {
        api_key: Some("rw-secret".to_string()),
        read_only_api_key: Some("ro-secret".to_string()),
        ..ServerConfig::default()
    });
    let create = r#"{"vectors": {"size": 2, "distance": "Dot"}}"#;
    let upsert = r#"{"points": [{"id": 1, "vector": [1, 0]}]}"#;
    let query = r#"{"query": [1, 0]}"#;
    assert_eq!(server.send("GET", "/readyz", "", None).await.status, 200);
    assert_eq!(server.send("GET", "/", "", None).await.status, 200);
    let missing = server.send("PUT", "/collections/c", create, None).await;
    assert_eq!(missing.status, StatusCode::UNAUTHORIZED);
    assert!(missing.body["status"]["error"]
        .as_str()
        .unwrap()
        .contains("api-key"));
    let wrong = server.send("GET", "/collections", "", Some("guess")).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    let read_only_write = server
        .send("PUT", "/collections/c", create, Some("ro-secret"))
        .await;
    assert_eq!(read_only_write.status, StatusCode::FORBIDDEN);
    assert_eq!(
        server
            .send("PUT", "/collections/c", create, Some("rw-secret"))
            .await
            .status,
        200
    );
    assert_eq!(
        server
            .send(
                "PUT",
                "/collections/c/points?wait=true",
                upsert,
                Some("ro-secret")
            )
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        server
            .send(
                "PUT",
                "/collections/c/points?wait=true",
                upsert,
                Some("rw-secret")
            )
            .await
            .status,
        200
    );
    let read = server
        .send(
            "POST",
            "/collections/c/points/query",
            query,
            Some("ro-secret"),
        )
        .await;
    assert_eq!(read.status, 200);
    assert_eq!(read.body["result"]["points"][0]["id"], 1);
    let bearer = Request::builder()
        .method("GET")
        .uri("/collections")
        .header("authorization", "Bearer ro-secret")
        .body(Body::empty())
        .unwrap();
    let response = server.app.clone().oneshot(bearer).await.unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_write_queue_answers_429_with_retry_after() {
    let server = server_with(ServerConfig {
        max_pending_writes: 2,
        ..ServerConfig::default()
    });
    make_collection(&server, "docs", 2, 1).await;
    let held = Arc::clone(&server.state.write_slots)
        .try_acquire_many_owned(2)
        .unwrap();
    let body = json!({"points": [{"id": 5, "vector": [1, 0]}]});
    let reply = server
        .call("PUT", "/collections/docs/points", body.clone())
        .await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(reply.retry_after.as_deref(), Some("1"));
    // Reads are not queued behind writes.
    server
        .ok("POST", "/collections/docs/points/count", json!({}))
        .await;
    drop(held);
    server.ok("PUT", "/collections/docs/points", body).await;
    assert_eq!(server.count("docs").await, 2);
    let metrics = server.send("GET", "/metrics", "", None).await;
    let text = metrics.body.as_str().unwrap();
    assert!(text.contains("sagitta_writes_rejected_total 1"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_telemetry_report_requests_and_collections() {
    let server = server();
    make_collection(&server, "docs", 4, 3).await;
    server
        .call(
            "POST",
            "/collections/docs/points/query",
            json!({"query": [1, 2, 3]}),
        )
        .await;
    let metrics = server.send("GET", "/metrics", "", None).await;
    assert_eq!(metrics.status, 200);
    let text = metrics.body.as_str().unwrap();
    for line in [
        "sagitta_http_requests_total{method=\"PUT\",route=\"/collections/{name}/points\",status=\"200\"} 1",
        "sagitta_http_requests_total{method=\"POST\",route=\"/collections/{name}/points/query\",status=\"400\"} 1",
        "sagitta_http_request_duration_seconds_count{method=\"PUT\",route=\"/collections/{name}\"} 1",
        "sagitta_collection_points{collection=\"docs\"} 3",
        "sagitta_points_upserted_total 3",
    ] {
        assert!(text.contains(line), "{line} not in\n{text}");
    }
    assert!(text.contains("sagitta_collection_optimizer_state{collection=\"docs\",state="));
    let telemetry = server.ok("GET", "/telemetry", json!(null)).await;
    assert_eq!(
        telemetry["app"]["simd"],
        sagitta_kernels::detected_simd_level().name()
    );
    assert_eq!(telemetry["collections"]["number_of_collections"], 1);
}

/// Writes acknowledged with `wait=false` reach the disk when the server shuts down
/// gracefully: after a simulated power loss that drops every unsynced byte, they are there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_flushes_unsynced_writes() {
    let fs = Arc::new(SimFileSystem::new());
    let root = std::path::Path::new("/db");
    let open = || {
        Database::open_with(
            Arc::clone(&fs) as Arc<dyn sagitta_storage::fs::FileSystem>,
            root,
            DatabaseOptions {
                background_optimizer: false,
                ..DatabaseOptions::default()
            },
        )
        .unwrap()
    };
    let state = Arc::new(AppState::new(Arc::new(open()), ServerConfig::default()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let app = router(Arc::clone(&state));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(sagitta_server::serve(listener, Arc::clone(&state), async {
        let _ = stopped.await;
    }));
    let call = |method: &str, path: &str, body: Value| {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::from(body.to_string()))
            .unwrap();
        app.clone().oneshot(request)
    };
    let created = call(
        "PUT",
        "/collections/docs",
        json!({"vectors": {"size": 2, "distance": "Euclid"}}),
    )
    .await
    .unwrap();
    assert_eq!(created.status(), 200);
    for id in 0..20 {
        let reply = call(
            "PUT",
            "/collections/docs/points?wait=false",
            json!({"points": [{"id": id, "vector": [id, 1]}]}),
        )
        .await
        .unwrap();
        assert_eq!(reply.status(), 200);
    }
    stop.send(()).unwrap();
    serving.await.unwrap().unwrap();
    drop(app);
    drop(
        Arc::try_unwrap(state)
            .ok()
            .expect("the server let go of its state"),
    );
    fs.crash(&mut StepRng::new(0, 0));
    let database = open();
    let collection = database.collection("docs").unwrap();
    assert_eq!(collection.count(None), 20);
}

/// Ids parse as Qdrant parses them: an unsigned integer, or UUID text in the `uuid`
/// crate's four forms; a sign, misplaced hyphens or other text are refused on every path
/// an id comes in by (issue 13 §2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_ids_parse_exactly_as_qdrant_does() {
    let server = server();
    make_collection(&server, "docs", 4, 3).await;
    let expect_bad = |reply: Reply, words: &[&str]| {
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        let message = reply.body["status"]["error"].as_str().unwrap().to_string();
        for word in words {
            assert!(message.contains(word), "{word:?} not in {message:?}");
        }
    };
    let signed = [
        "+f9619ff8b86d011b42d00c04fc964ff",
        "+c56c793-69f3-4fbf-87e6-c4bf54c28c26",
    ];
    let malformed = [
        "5c56c793-69f3-4fbf-87e6-c4bf54c28c2g",
        "5c56c79-369f3-4fbf-87e6-c4bf54c28c26",
        "{5c56c79369f34fbf87e6c4bf54c28c26}",
        "12",
    ];
    for id in signed.iter().chain(&malformed) {
        let upsert = "/collections/docs/points?wait=true";
        expect_bad(
            server
                .call(
                    "PUT",
                    upsert,
                    json!({"points": [{"id": id, "vector": [1, 0, 0, 0]}]}),
                )
                .await,
            &["points[0].id"],
        );
        expect_bad(
            server
                .call(
                    "PUT",
                    upsert,
                    json!({"batch": {"ids": [id], "vectors": [[1, 0, 0, 0]]}}),
                )
                .await,
            &["batch.ids[0]"],
        );
        expect_bad(
            server
                .call("POST", "/collections/docs/points", json!({"ids": [1, id]}))
                .await,
            &["ids[1]"],
        );
        expect_bad(
            server
                .call(
                    "POST",
                    "/collections/docs/points/delete",
                    json!({"points": [id]}),
                )
                .await,
            &["points[0]"],
        );
        expect_bad(
            server
                .call(
                    "POST",
                    "/collections/docs/points/payload",
                    json!({"payload": {"a": 1}, "points": [id]}),
                )
                .await,
            &["points[0]"],
        );
        expect_bad(
            server
                .call(
                    "POST",
                    "/collections/docs/points/scroll",
                    json!({"offset": id}),
                )
                .await,
            &["offset"],
        );
        expect_bad(
            server
                .call(
                    "POST",
                    "/collections/docs/points/count",
                    json!({"filter": {"must": [{"has_id": [0, id]}]}}),
                )
                .await,
            &["has_id[1]"],
        );
        expect_bad(
            server
                .call(
                    "POST",
                    "/collections/docs/points/query",
                    json!({"query": id}),
                )
                .await,
            &["query"],
        );
    }
    // In a URL path an id is decimal digits or UUID text; `%2B1` is "+1".
    for path in [
        "%2B1",
        "+1",
        "-1",
        "1.0",
        "0x1",
        "%2Bf9619ff8b86d011b42d00c04fc964ff",
    ] {
        expect_bad(
            server
                .call(
                    "GET",
                    &format!("/collections/docs/points/{path}"),
                    json!(null),
                )
                .await,
            &["point id"],
        );
    }
    assert_eq!(server.count("docs").await, 3);
    // Every accepted UUID form names the same point, answered in the hyphenated form.
    let canonical = "5c56c793-69f3-4fbf-87e6-c4bf54c28c26";
    for (index, id) in [
        canonical,
        "5C56C793-69F3-4FBF-87E6-C4BF54C28C26",
        "5c56c79369f34fbf87e6c4bf54c28c26",
        "{5c56c793-69f3-4fbf-87e6-c4bf54c28c26}",
        "urn:uuid:5c56c793-69f3-4fbf-87e6-c4bf54c28c26",
    ]
    .into_iter()
    .enumerate()
    {
        server
            .ok(
                "PUT",
                "/collections/docs/points?wait=true",
                json!({"points": [{"id": id, "vector": [1, 0, 0, 0], "payload": {"form": index}}]}),
            )
            .await;
        let record = server
            .ok("POST", "/collections/docs/points", json!({"ids": [id]}))
            .await;
        assert_eq!(record[0]["id"], canonical);
        assert_eq!(record[0]["payload"]["form"], index);
        let one = server
            .ok(
                "GET",
                &format!("/collections/docs/points/{id}"),
                json!(null),
            )
            .await;
        assert_eq!(one["id"], canonical);
    }
    assert_eq!(server.count("docs").await, 4);
    let one = server
        .ok("GET", "/collections/docs/points/2", json!(null))
        .await;
    assert_eq!(one["id"], 2);
}

/// `limit` is checked as sent (issue 13 §3): 0 is refused everywhere a limit is taken,
/// the largest allowed value works for a query by id too, and huge values are named as
/// sent, never wrapped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_are_checked_as_sent() {
    let server = server();
    let dim = 4;
    make_collection(&server, "docs", dim, 30).await;
    let expect_limit = |reply: Reply, words: &[&str]| {
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        let message = reply.body["status"]["error"].as_str().unwrap().to_string();
        for word in words {
            assert!(message.contains(word), "{word:?} not in {message:?}");
        }
    };
    let query = "/collections/docs/points/query";
    let by_id = server
        .ok("POST", query, json!({"query": 1, "limit": 10_000}))
        .await;
    assert_eq!(by_id["points"].as_array().unwrap().len(), 29);
    let by_id_nearest = server
        .ok(
            "POST",
            query,
            json!({"query": {"nearest": 1}, "limit": 10_000}),
        )
        .await;
    assert_eq!(by_id_nearest["points"].as_array().unwrap().len(), 29);
    expect_limit(
        server
            .send("POST", query, r#"{"query": 1, "limit": 10001}"#, None)
            .await,
        &["limit", "10001"],
    );
    expect_limit(
        server
            .send(
                "POST",
                query,
                r#"{"query": 1, "limit": 18446744073709551615}"#,
                None,
            )
            .await,
        &["limit", "18446744073709551615"],
    );
    let zero_limit: [(&str, Value, &str); 7] = [
        (query, json!({"query": 1, "limit": 0}), "limit"),
        (query, json!({"query": [1, 0, 0, 0], "limit": 0}), "limit"),
        (
            "/collections/docs/points/query/batch",
            json!({"searches": [{"query": [1, 0, 0, 0]}, {"query": 2, "limit": 0}]}),
            "searches[1].limit",
        ),
        (
            "/collections/docs/points/search",
            json!({"vector": [1, 0, 0, 0], "limit": 0}),
            "limit",
        ),
        (
            "/collections/docs/points/search/batch",
            json!({"searches": [{"vector": [1, 0, 0, 0], "limit": 0}]}),
            "searches[0].limit",
        ),
        (
            "/collections/docs/points/scroll",
            json!({"limit": 0}),
            "limit",
        ),
        (
            "/collections/docs/points/scroll",
            json!({"limit": 0, "filter": {"must": [{"has_id": [1]}]}}),
            "limit",
        ),
    ];
    for (path, body, field) in zero_limit {
        expect_limit(server.call("POST", path, body).await, &[field, "0"]);
    }
    // A query by id leaves its point out before `offset` and `limit` apply.
    let from = vector(7, dim);
    let mut expected: Vec<(u64, f32)> = (0..30)
        .filter(|i| *i != 7)
        .map(|i| (i, cosine(&from, &vector(i, dim))))
        .collect();
    expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    for offset in [0_usize, 1, 2, 5] {
        let page = server
            .ok(
                "POST",
                query,
                json!({"query": 7, "limit": 4, "offset": offset, "params": {"exact": true}}),
            )
            .await;
        let ids: Vec<u64> = page["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|hit| hit["id"].as_u64().unwrap())
            .collect();
        let wanted: Vec<u64> = expected[offset..offset + 4]
            .iter()
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(ids, wanted, "offset {offset}");
    }
}

/// A 200 never carries a `null` score (issue 12 §5): vectors whose components overflow
/// f32 arithmetic are refused at upsert with the limit named, or every score a plain
/// query returns is a finite number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scores_are_finite_numbers_or_the_vector_is_refused() {
    let server = server();
    for distance in ["Dot", "Euclid", "Cosine"] {
        for (index, magnitude) in [1e16_f64, 1e20, 3e38].into_iter().enumerate() {
            let name = format!("{}{index}", distance.to_lowercase());
            server
                .ok(
                    "PUT",
                    &format!("/collections/{name}"),
                    json!({"vectors": {"size": 2, "distance": distance}}),
                )
                .await;
            let upsert = server
                .call(
                    "PUT",
                    &format!("/collections/{name}/points?wait=true"),
                    json!({"points": [{"id": 1, "vector": [magnitude, magnitude]},
                                      {"id": 2, "vector": [1, 2]},
                                      {"id": 3, "vector": [-magnitude, magnitude]}]}),
                )
                .await;
            if upsert.status == StatusCode::BAD_REQUEST {
                let message = upsert.body["status"]["error"].as_str().unwrap();
                assert!(message.contains("vector"), "{message}");
                continue;
            }
            assert_eq!(upsert.status, StatusCode::OK, "{}", upsert.body);
            for body in [
                json!({"query": [1, 1]}),
                json!({"query": [0.5, -2]}),
                json!({"query": 2}),
                json!({"query": 1}),
            ] {
                let reply = server
                    .call(
                        "POST",
                        &format!("/collections/{name}/points/query"),
                        body.clone(),
                    )
                    .await;
                assert_eq!(
                    reply.status,
                    StatusCode::OK,
                    "{distance} {magnitude:e} {body}: {}",
                    reply.body
                );
                for hit in reply.body["result"]["points"].as_array().unwrap() {
                    assert!(
                        hit["score"].as_f64().is_some_and(f64::is_finite),
                        "{distance} {magnitude:e} {body}: {hit}"
                    );
                }
            }
        }
    }
}

/// `with_payload` keys and `include` / `exclude` selectors follow nested and `[]` array
/// paths as Qdrant's do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_selectors_follow_nested_and_array_paths() {
    let server = server();
    make_collection(&server, "docs", 2, 0).await;
    let payload = json!({"objs": [{"n": 1, "m": 2}, {"n": 3, "m": 4}, 5],
                         "x": {"y": 1, "z": [{"w": 1}, {"v": 2}]}, "k": 5});
    server
        .ok(
            "PUT",
            "/collections/docs/points?wait=true",
            json!({"points": [{"id": 1, "vector": [1, 0], "payload": payload}]}),
        )
        .await;
    let cases = [
        (
            json!(["objs[].n"]),
            json!({"objs": [{"n": 1}, {"n": 3}, 5]}),
        ),
        (
            json!({"include": ["objs[].n", "k"]}),
            json!({"objs": [{"n": 1}, {"n": 3}, 5], "k": 5}),
        ),
        (
            json!({"exclude": ["objs[].n"]}),
            json!({"objs": [{"m": 2}, {"m": 4}, 5], "x": {"y": 1, "z": [{"w": 1}, {"v": 2}]},
                   "k": 5}),
        ),
        (json!(["x.y"]), json!({"x": {"y": 1}})),
        (json!(["x.z[].w"]), json!({"x": {"z": [{"w": 1}, {}]}})),
        (
            json!({"exclude": ["x.y", "k", "objs[]"]}),
            json!({"objs": [], "x": {"z": [{"w": 1}, {"v": 2}]}}),
        ),
        (
            json!(["objs"]),
            json!({"objs": [{"n": 1, "m": 2}, {"n": 3, "m": 4}, 5]}),
        ),
        (json!(["nothing.here"]), json!({})),
        (json!({"exclude": []}), payload.clone()),
    ];
    for (selector, expected) in cases {
        let record = server
            .ok(
                "POST",
                "/collections/docs/points",
                json!({"ids": [1], "with_payload": selector}),
            )
            .await;
        assert_eq!(record[0]["payload"], expected, "retrieve {selector}");
        let page = server
            .ok(
                "POST",
                "/collections/docs/points/scroll",
                json!({"with_payload": selector}),
            )
            .await;
        assert_eq!(page["points"][0]["payload"], expected, "scroll {selector}");
        let hits = server
            .ok(
                "POST",
                "/collections/docs/points/query",
                json!({"query": [1, 0], "with_payload": selector}),
            )
            .await;
        assert_eq!(hits["points"][0]["payload"], expected, "query {selector}");
    }
}

/// Errors come in Qdrant's envelope and name the field: a path that is not UTF-8, and
/// the alternatives of `vectors`, `with_payload`, `with_vector`, a search `vector` and
/// `field_schema`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_enveloped_and_name_the_field() {
    let server = server();
    make_collection(&server, "docs", 4, 3).await;
    let expect = |reply: Reply, status: StatusCode, words: &[&str]| {
        assert_eq!(reply.status, status, "{}", reply.body);
        let message = reply.body["status"]["error"]
            .as_str()
            .unwrap_or_else(|| panic!("not in the envelope: {}", reply.body))
            .to_string();
        assert!(reply.body["time"].is_number(), "{}", reply.body);
        for word in words {
            assert!(message.contains(word), "{word:?} not in {message:?}");
        }
    };
    for (method, path) in [
        ("GET", "/collections/%FF"),
        ("GET", "/collections/%C3%28/exists"),
        ("POST", "/collections/%FF/points/count"),
        ("PUT", "/collections/%FF"),
        ("GET", "/collections/docs/points/%FF"),
        ("DELETE", "/collections/docs/index/%FF"),
    ] {
        let body = if method == "PUT" {
            r#"{"vectors": {"size": 4, "distance": "Dot"}}"#
        } else {
            "{}"
        };
        expect(
            server.send(method, path, body, None).await,
            StatusCode::NOT_FOUND,
            &["UTF-8"],
        );
    }
    let create = |body: Value| server.call("PUT", "/collections/other", body);
    for (body, words) in [
        (
            json!({"vectors": {"size": 4, "distance": "Dott"}}),
            &["vectors.distance", "Dott"][..],
        ),
        (
            json!({"vectors": {"size": "four", "distance": "Dot"}}),
            &["vectors.size"],
        ),
        (json!({"vectors": {"size": 4}}), &["vectors", "distance"]),
        (
            json!({"vectors": {"": {"size": 4, "distance": "Manhattan"}}}),
            &["distance", "Manhattan"],
        ),
        (
            json!({"vectors": {"size": 4, "distance": "Dot", "on_dsk": true}}),
            &["vectors.on_dsk"],
        ),
        (json!({"vectors": [4, "Dot"]}), &["vectors"]),
    ] {
        expect(create(body).await, StatusCode::BAD_REQUEST, words);
    }
    let query = "/collections/docs/points/query";
    for (body, words) in [
        (
            json!({"query": [1, 0, 0, 0], "with_payload": {"includ": ["a"]}}),
            &["with_payload", "includ"][..],
        ),
        (
            json!({"query": [1, 0, 0, 0], "with_payload": {"include": "a"}}),
            &["with_payload.include"],
        ),
        (
            json!({"query": [1, 0, 0, 0], "with_payload": 3}),
            &["with_payload"],
        ),
        (
            json!({"query": [1, 0, 0, 0], "with_vector": "yes"}),
            &["with_vector"],
        ),
        (
            json!({"searches": [{"query": [1, 0, 0, 0], "with_vector": [1]}]}),
            &["searches[0].with_vector[0]"],
        ),
    ] {
        let path = if body.get("searches").is_some() {
            "/collections/docs/points/query/batch"
        } else {
            query
        };
        expect(
            server.call("POST", path, body).await,
            StatusCode::BAD_REQUEST,
            words,
        );
    }
    expect(
        server
            .call(
                "POST",
                "/collections/docs/points/search",
                json!({"vector": {"name": "", "vectr": [1, 0, 0, 0]}, "limit": 1}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        &["vector", "vectr"],
    );
    expect(
        server
            .call(
                "PUT",
                "/collections/docs/index",
                json!({"field_name": "a", "field_schema": {"typ": "keyword"}}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        &["field_schema", "typ"],
    );
    expect(
        server
            .call(
                "PUT",
                "/collections/docs/index",
                json!({"field_name": "a", "field_schema": 5}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        &["field_schema"],
    );
    let exists = server
        .ok("GET", "/collections/other/exists", json!(null))
        .await;
    assert_eq!(exists["exists"], false);
}

/// `update_mode`, `update_filter` and `lookup_from` are honoured as in Qdrant;
/// `metadata` and `strict_mode_config` are refused unless null.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_upserts_and_lookup_from_are_honoured() {
    let server = server();
    server
        .ok(
            "PUT",
            "/collections/docs",
            json!({"vectors": {"size": 2, "distance": "Cosine"}}),
        )
        .await;
    let upsert = "/collections/docs/points?wait=true";
    server
        .ok(
            "PUT",
            upsert,
            json!({"points": [{"id": 1, "vector": [1, 0], "payload": {"color": "red"}},
                              {"id": 2, "vector": [0, 1], "payload": {"color": "blue"}}]}),
        )
        .await;
    let payloads = |ids: Value| {
        let server = &server;
        async move {
            let records = server
                .ok("POST", "/collections/docs/points", json!({ "ids": ids }))
                .await;
            records
                .as_array()
                .unwrap()
                .iter()
                .map(|record| (record["id"].as_u64().unwrap(), record["payload"].clone()))
                .collect::<Vec<_>>()
        }
    };
    // insert_only: existing points keep their state, new ones are inserted.
    server
        .ok(
            "PUT",
            upsert,
            json!({"points": [{"id": 1, "vector": [0, 1], "payload": {"color": "green"}},
                              {"id": 3, "vector": [1, 1], "payload": {"color": "green"}},
                              {"id": 3, "vector": [1, 1], "payload": {"color": "late"}}],
                   "update_mode": "insert_only"}),
        )
        .await;
    assert_eq!(
        payloads(json!([1, 3])).await,
        vec![(1, json!({"color": "red"})), (3, json!({"color": "green"}))]
    );
    // update_only: existing points are replaced, new ones are not inserted.
    server
        .ok(
            "PUT",
            upsert,
            json!({"batch": {"ids": [2, 4], "vectors": [[0, 1], [1, 0]],
                             "payloads": [{"color": "navy"}, {"color": "new"}]},
                   "update_mode": "update_only"}),
        )
        .await;
    assert_eq!(
        payloads(json!([2, 4])).await,
        vec![(2, json!({"color": "navy"}))]
    );
    // update_filter: existing points are updated only where it matches; new ones inserted.
    server
        .ok(
            "PUT",
            upsert,
            json!({"points": [{"id": 1, "vector": [1, 0], "payload": {"color": "red", "v": 2}},
                              {"id": 2, "vector": [0, 1], "payload": {"color": "navy", "v": 2}},
                              {"id": 5, "vector": [1, 0], "payload": {"color": "blue", "v": 2}}],
                   "update_filter": {"must": [{"key": "color", "match": {"value": "red"}}]}}),
        )
        .await;
    assert_eq!(
        payloads(json!([1, 2, 5])).await,
        vec![
            (1, json!({"color": "red", "v": 2})),
            (2, json!({"color": "navy"})),
            (5, json!({"color": "blue", "v": 2}))
        ]
    );
    server
        .ok(
            "PUT",
            upsert,
            json!({"points": [{"id": 1, "vector": [1, 0], "payload": {"color": "pink"}}],
                   "update_mode": "upsert", "update_filter": null, "shard_key": null}),
        )
        .await;
    assert_eq!(
        payloads(json!([1])).await,
        vec![(1, json!({"color": "pink"}))]
    );
    for (body, words) in [
        (
            json!({"points": [{"id": 9, "vector": [1, 0]}], "update_mode": "sometimes"}),
            &["update_mode", "sometimes"][..],
        ),
        (
            json!({"points": [{"id": 9, "vector": [1, 0]}],
                   "update_filter": {"must": [{"key": "a", "range": {"gt": "x"}}]}}),
            &["update_filter"],
        ),
        (
            json!({"points": [{"id": 9, "vector": [1, 0]}], "shard_key": "s1"}),
            &["shard_key"],
        ),
    ] {
        let reply = server.call("PUT", upsert, body).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        let message = reply.body["status"]["error"].as_str().unwrap();
        for word in words {
            assert!(message.contains(word), "{word:?} not in {message:?}");
        }
    }
    assert_eq!(server.count("docs").await, 4);
    // lookup_from: the query point's vector comes from the named collection, and the id
    // is left out of the results only when that is the collection searched.
    server
        .ok(
            "PUT",
            "/collections/other",
            json!({"vectors": {"size": 2, "distance": "Dot"}}),
        )
        .await;
    server
        .ok(
            "PUT",
            "/collections/other/points?wait=true",
            json!({"points": [{"id": 1, "vector": [0, 1]}, {"id": 77, "vector": [1, 0.01]}]}),
        )
        .await;
    let ids = |result: &Value| -> Vec<u64> {
        result["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|hit| hit["id"].as_u64().unwrap())
            .collect()
    };
    let query = "/collections/docs/points/query";
    let looked_up = server
        .ok(
            "POST",
            query,
            json!({"query": 1, "lookup_from": {"collection": "other"}, "limit": 2,
                   "params": {"exact": true}}),
        )
        .await;
    assert_eq!(ids(&looked_up), vec![2, 3]);
    let looked_up = server
        .ok(
            "POST",
            query,
            json!({"query": {"nearest": 77}, "lookup_from": {"collection": "other", "vector": ""},
                   "limit": 1, "params": {"exact": true}}),
        )
        .await;
    assert_eq!(ids(&looked_up)[0], 1);
    let same = server
        .ok(
            "POST",
            query,
            json!({"query": 1, "lookup_from": {"collection": "docs"}, "limit": 1,
                   "params": {"exact": true}}),
        )
        .await;
    assert_eq!(ids(&same), vec![5]);
    for (body, status, words) in [
        (
            json!({"query": 1, "lookup_from": {"collection": "nope"}}),
            StatusCode::NOT_FOUND,
            &["nope"][..],
        ),
        (
            json!({"query": 5, "lookup_from": {"collection": "other"}}),
            StatusCode::NOT_FOUND,
            &["5", "other"],
        ),
        (
            json!({"query": 1, "lookup_from": {"collection": "other", "vector": "text"}}),
            StatusCode::BAD_REQUEST,
            &["lookup_from.vector", "text"],
        ),
        (
            json!({"query": 1, "lookup_from": {"collection": "other", "shard_key": "a"}}),
            StatusCode::BAD_REQUEST,
            &["lookup_from.shard_key"],
        ),
    ] {
        let reply = server.call("POST", query, body).await;
        assert_eq!(reply.status, status, "{}", reply.body);
        let message = reply.body["status"]["error"].as_str().unwrap();
        for word in words {
            assert!(message.contains(word), "{word:?} not in {message:?}");
        }
    }
    // metadata and strict_mode_config: null is accepted, anything else refused.
    server
        .ok(
            "PUT",
            "/collections/third",
            json!({"vectors": {"size": 2, "distance": "Dot"}, "metadata": null,
                   "strict_mode_config": null}),
        )
        .await;
    for (method, path, body, field) in [
        (
            "PUT",
            "/collections/fourth",
            json!({"vectors": {"size": 2, "distance": "Dot"}, "metadata": {"team": "a"}}),
            "metadata",
        ),
        (
            "PUT",
            "/collections/fourth",
            json!({"vectors": {"size": 2, "distance": "Dot"},
                   "strict_mode_config": {"enabled": true, "max_query_limit": 5}}),
            "strict_mode_config",
        ),
        (
            "PATCH",
            "/collections/docs",
            json!({"metadata": {"team": "a"}}),
            "metadata",
        ),
        (
            "PATCH",
            "/collections/docs",
            json!({"strict_mode_config": {"enabled": true}}),
            "strict_mode_config",
        ),
    ] {
        let reply = server.call(method, path, body).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        let message = reply.body["status"]["error"].as_str().unwrap();
        assert!(message.contains(field), "{field:?} not in {message:?}");
    }
    let exists = server
        .ok("GET", "/collections/fourth/exists", json!(null))
        .await;
    assert_eq!(exists["exists"], false);
}

/// Fields Qdrant does not define are refused with their path; fields it defines are
/// honoured, or refused unless null; the tuning settings real clients send are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fields_are_refused_with_their_path() {
    let server = server();
    make_collection(&server, "docs", 4, 3).await;
    let cases: Vec<(&str, &str, Value, &[&str])> = vec![
        (
            "PUT",
            "/collections/other",
            json!({"vectors": {"size": 4, "distance": "Dot"}, "unknown": 1}),
            &["unknown"],
        ),
        (
            "PUT",
            "/collections/other",
            json!({"vectors": {"size": 4, "distance": "Dot"}, "hnsw_config": {"mm": 16}}),
            &["hnsw_config.mm"],
        ),
        (
            "PUT",
            "/collections/other",
            json!({"vectors": {"size": 4, "distance": "Dot"},
                   "optimizers_config": {"indexing_treshold": 1}}),
            &["optimizers_config.indexing_treshold"],
        ),
        (
            "PUT",
            "/collections/other",
            json!({"vectors": {"size": 4, "distance": "Dot"},
                   "quantization_config": {"scalar": {"type": "int8", "quantil": 0.9}}}),
            &["quantization_config.scalar.quantil"],
        ),
        (
            "PUT",
            "/collections/other",
            json!({"vectors": {"size": 4, "distance": "Dot"}, "sharding_method": "custom"}),
            &["sharding_method"],
        ),
        (
            "PUT",
            "/collections/other",
            json!({"vectors": {"size": 4, "distance": "Dot"}, "replication_factor": 2}),
            &["replication_factor"],
        ),
        (
            "PUT",
            "/collections/other",
            json!({"vectors": {"size": 4, "distance": "Dot"}, "init_from": {"collection": "docs"}}),
            &["init_from"],
        ),
        (
            "PATCH",
            "/collections/docs",
            json!({"optimizers_config": {"max_optimization_threads": 1}, "paramz": {}}),
            &["paramz"],
        ),
        (
            "PATCH",
            "/collections/docs",
            json!({"vectors": {"text": {"on_disk": true}}}),
            &["vectors", "text"],
        ),
        (
            "PUT",
            "/collections/docs/points?wait=true",
            json!({"points": [{"id": 9, "vector": [1, 0, 0, 0], "paylod": {}}]}),
            &["points[0].paylod"],
        ),
        (
            "PUT",
            "/collections/docs/points?wait=true",
            json!({"batch": {"ids": [9], "vectors": [[1, 0, 0, 0]], "payload": [{}]}}),
            &["batch.payload"],
        ),
        (
            "PUT",
            "/collections/docs/points?wait=true",
            json!({"points": [{"id": 9, "vector": [1, 0, 0, 0]}], "ordering": "strong"}),
            &["ordering"],
        ),
        (
            "POST",
            "/collections/docs/points/query",
            json!({"query": [1, 0, 0, 0], "limitt": 3}),
            &["limitt"],
        ),
        (
            "POST",
            "/collections/docs/points/query",
            json!({"query": [1, 0, 0, 0], "params": {"hnsw_eff": 3}}),
            &["params.hnsw_eff"],
        ),
        (
            "POST",
            "/collections/docs/points/query",
            json!({"query": [1, 0, 0, 0], "params": {"quantization": {"rescor": true}}}),
            &["params.quantization.rescor"],
        ),
        (
            "POST",
            "/collections/docs/points/query",
            json!({"query": {"nearest": [1, 0, 0, 0], "mmr": {"diversity": 0.5}}}),
            &["mmr"],
        ),
        (
            "POST",
            "/collections/docs/points/query",
            json!({"query": [1, 0, 0, 0], "shard_key": "a"}),
            &["shard_key"],
        ),
        (
            "POST",
            "/collections/docs/points/query",
            json!({"query": [1, 0, 0, 0], "prefetch": [{"query": [1, 0, 0, 0]}]}),
            &["prefetch"],
        ),
        (
            "POST",
            "/collections/docs/points/query/batch",
            json!({"searches": [{"query": [1, 0, 0, 0]}, {"query": [1, 0, 0, 0], "fiter": {}}]}),
            &["searches[1].fiter"],
        ),
        (
            "POST",
            "/collections/docs/points/search",
            json!({"vector": [1, 0, 0, 0], "limit": 1, "with_vectors": true}),
            &["with_vectors"],
        ),
        (
            "POST",
            "/collections/docs/points/search/batch",
            json!({"searches": [{"vector": [1, 0, 0, 0], "limit": 1, "top": 1}]}),
            &["searches[0].top"],
        ),
        (
            "POST",
            "/collections/docs/points/scroll",
            json!({"limit": 2, "filtr": {}}),
            &["filtr"],
        ),
        (
            "POST",
            "/collections/docs/points/scroll",
            json!({"order_by": "rank"}),
            &["order_by"],
        ),
        (
            "POST",
            "/collections/docs/points/count",
            json!({"exact": true, "approximate": false}),
            &["approximate"],
        ),
        (
            "POST",
            "/collections/docs/points",
            json!({"ids": [1], "with_vectors": true}),
            &["with_vectors"],
        ),
        (
            "POST",
            "/collections/docs/points/delete",
            json!({"points": [1], "wait": true}),
            &["wait"],
        ),
        (
            "POST",
            "/collections/docs/points/payload",
            json!({"payload": {"a": 1}, "points": [1], "merge": true}),
            &["merge"],
        ),
        (
            "POST",
            "/collections/docs/points/payload/delete",
            json!({"keys": ["a"], "points": [1], "all": true}),
            &["all"],
        ),
        (
            "POST",
            "/collections/docs/points/payload/clear",
            json!({"points": [1], "keys": ["a"]}),
            &["keys"],
        ),
        (
            "PUT",
            "/collections/docs/index",
            json!({"field_name": "group", "field_schema": "keyword", "field_type": "x"}),
            &["field_type"],
        ),
        (
            "POST",
            "/collections/docs/points/query",
            json!({"query": [1, 0, 0, 0], "with_vector": ["text"]}),
            &["with_vector", "text"],
        ),
    ];
    for (method, path, body, words) in cases {
        let reply = server.call(method, path, body.clone()).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{method} {path} {body}: {}",
            reply.body
        );
        let message = reply.body["status"]["error"].as_str().unwrap();
        for word in words {
            assert!(message.contains(word), "{word:?} not in {message:?}");
        }
    }
    assert_eq!(server.count("docs").await, 3);
    let exists = server
        .ok("GET", "/collections/other/exists", json!(null))
        .await;
    assert_eq!(exists["exists"], false);
    // The settings benchmark tools and clients send are accepted, and nulls everywhere.
    server
        .ok(
            "PUT",
            "/collections/tuned",
            json!({"vectors": {"size": 4, "distance": "Euclid", "on_disk": true,
                               "datatype": "float32", "hnsw_config": {"m": 32},
                               "quantization_config": null, "multivector_config": null},
                   "shard_number": 2, "sharding_method": "auto", "replication_factor": 1,
                   "write_consistency_factor": 1, "on_disk_payload": true,
                   "hnsw_config": {"m": 16, "ef_construct": 128, "full_scan_threshold": 10,
                                   "max_indexing_threads": 0, "on_disk": false,
                                   "payload_m": 16, "inline_storage": false},
                   "wal_config": {"wal_capacity_mb": 32, "wal_segments_ahead": 0},
                   "optimizers_config": {"deleted_threshold": 0.2,
                                         "vacuum_min_vector_number": 1000,
                                         "default_segment_number": 2,
                                         "max_segment_size": null, "memmap_threshold": 20000,
                                         "indexing_threshold": 20000, "flush_interval_sec": 5,
                                         "max_optimization_threads": "auto"},
                   "quantization_config": {"scalar": {"type": "int8", "quantile": 0.99,
                                                      "always_ram": true}},
                   "sparse_vectors": {}, "strict_mode_config": null, "metadata": null}),
        )
        .await;
    server
        .ok(
            "PATCH",
            "/collections/tuned",
            json!({"optimizers_config": {"indexing_threshold": 0},
                   "hnsw_config": {"ef_construct": 64},
                   "vectors": {"": {"on_disk": false}},
                   "params": {"replication_factor": 1, "on_disk_payload": false},
                   "quantization_config": "Disabled"}),
        )
        .await;
    server
        .ok(
            "PUT",
            "/collections/tuned/index",
            json!({"field_name": "pk", "field_schema": {"type": "integer", "lookup": true,
                                                         "range": true, "is_principal": false,
                                                         "on_disk": false}}),
        )
        .await;
    server
        .ok(
            "PUT",
            "/collections/tuned/points?wait=true",
            json!({"points": [{"id": 1, "vector": [1, 0, 0, 0], "payload": null}],
                   "shard_key": null, "update_filter": null, "update_mode": null}),
        )
        .await;
    let hits = server
        .ok(
            "POST",
            "/collections/tuned/points/query",
            json!({"query": {"nearest": [1, 0, 0, 0], "mmr": null}, "using": null,
                   "filter": null, "params": {"hnsw_ef": 32, "exact": false,
                                             "indexed_only": false,
                                             "quantization": {"ignore": false, "rescore": true,
                                                              "oversampling": 2.0},
                                             "acorn": {"enable": false}},
                   "limit": 3, "offset": null, "score_threshold": null,
                   "with_payload": {"include": ["pk"]}, "with_vector": [""],
                   "prefetch": null, "shard_key": null, "lookup_from": null}),
        )
        .await;
    assert_eq!(hits["points"][0]["id"], 1);
    assert_eq!(hits["points"][0]["vector"], json!([1.0, 0.0, 0.0, 0.0]));
    server
        .ok(
            "POST",
            "/collections/tuned/points/scroll",
            json!({"shard_key": null, "offset": null, "limit": 5, "filter": null,
                   "with_payload": {"exclude": ["a"]}, "with_vector": false,
                   "order_by": null}),
        )
        .await;
    server
        .ok(
            "POST",
            "/collections/tuned/points/count",
            json!({"shard_key": null, "filter": null, "exact": false}),
        )
        .await;
}
