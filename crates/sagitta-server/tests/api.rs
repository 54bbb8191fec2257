//! The REST API end to end through the router (no sockets): the contract's shapes, exact
//! results against brute force, every bad-request class, API keys, the write queue, the
//! metrics, and the flush on graceful shutdown. (`api_requests.rs`: ids, limits, scores and
//! payload selectors; `api_fields.rs`: every request field honoured or refused by path.)

mod support;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use rand::rngs::mock::StepRng;
use sagitta_engine::database::DatabaseOptions;
use sagitta_engine::Database;
use sagitta_server::{router, AppState, ServerConfig};
use sagitta_storage::sim::SimFileSystem;
use serde_json::{json, Value};
use tower::ServiceExt;

use support::{cosine, make_collection, server, server_with, vector, Reply};

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
        &["points[0].vector", "Not existing vector name error: text"],
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
    let backend = sagitta_storage::pageio::shared().backend().name();
    for series in ["reads", "read_bytes", "read_seconds"] {
        let line = format!("sagitta_page_{series}_total{{backend=\"{backend}\"}} ");
        assert!(text.contains(&line), "{line} not in\n{text}");
    }
    let telemetry = server.ok("GET", "/telemetry", json!(null)).await;
    let page_io = &telemetry["page_io"];
    assert_eq!(page_io["backend"], backend, "{page_io}");
    assert!(
        page_io["reads"].is_u64() && page_io["bytes"].is_u64(),
        "{page_io}"
    );
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
    assert_eq!(collection.count(None).unwrap(), 20);
}
