//! `hnsw_config` `m` and `ef_construct` through the REST API: kept on creation, changed by
//! `PATCH` with a real effect (the optimizer rebuilds the segments: the graph's RAM
//! follows `m`), echoed by collection info, and bad values refused naming the field.

mod support;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{json, Value};
use support::{server, vector, Server};

const DIM: usize = 16;

async fn info(server: &Server, name: &str) -> Value {
    server
        .ok("GET", &format!("/collections/{name}"), json!(null))
        .await
}

async fn wait_green(server: &Server, name: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let info = info(server, name).await;
        if info["status"] == "green" && info["sagitta"]["stale_segments"] == 0 {
            return info;
        }
        assert!(Instant::now() < deadline, "never green: {info}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn graph_of(info: &Value) -> (u64, u64) {
    let graph = &info["config"]["hnsw_config"];
    (
        graph["m"].as_u64().unwrap(),
        graph["ef_construct"].as_u64().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hnsw_config_is_kept_and_a_change_rebuilds_the_graphs() {
    let server = server();
    server
        .ok(
            "PUT",
            "/collections/g",
            json!({"vectors": {"size": DIM, "distance": "Cosine"},
                   "hnsw_config": {"m": 8, "ef_construct": 40, "payload_m": 16}}),
        )
        .await;
    assert_eq!(graph_of(&info(&server, "g").await), (8, 40));
    let points: Vec<Value> = (0..1_500)
        .map(|i| json!({"id": i, "vector": vector(i, DIM)}))
        .collect();
    server
        .ok(
            "PUT",
            "/collections/g/points?wait=true",
            json!({ "points": points }),
        )
        .await;
    let before = wait_green(&server, "g").await;
    assert_eq!(before["indexed_vectors_count"], 1_500);
    server
        .ok("PATCH", "/collections/g", json!({"hnsw_config": {"m": 32}}))
        .await;
    assert_eq!(graph_of(&info(&server, "g").await), (32, 40));
    let after = wait_green(&server, "g").await;
    let ram_wide = after["sagitta"]["index_ram_bytes"].as_u64().unwrap();
    assert_eq!(after["points_count"], 1_500);
    // every point is still found by its own vector (ids 1,000 apart share one)
    for id in [0u64, 777, 999] {
        let hits = server
            .ok(
                "POST",
                "/collections/g/points/query",
                json!({"query": vector(id, DIM), "limit": 1, "params": {"exact": true}}),
            )
            .await;
        assert_eq!(hits["points"][0]["id"], id);
    }
    // a vector's own hnsw_config overrides the collection's, as in Qdrant
    server
        .ok(
            "PATCH",
            "/collections/g",
            json!({"vectors": {"": {"hnsw_config": {"ef_construct": 64}}}}),
        )
        .await;
    assert_eq!(graph_of(&info(&server, "g").await), (32, 64));
    wait_green(&server, "g").await;
    // back to m 8: rebuilt again, and a quarter of the links per node take less RAM than
    // the m 32 graph (both graphs made by the same rebuild, so sized alike otherwise)
    server
        .ok("PATCH", "/collections/g", json!({"hnsw_config": {"m": 8}}))
        .await;
    assert_eq!(graph_of(&info(&server, "g").await), (8, 64));
    let narrow = wait_green(&server, "g").await;
    let ram_narrow = narrow["sagitta"]["index_ram_bytes"].as_u64().unwrap();
    assert!(
        ram_narrow < ram_wide,
        "m 32: {ram_wide} B, m 8: {ram_narrow} B"
    );
    assert_eq!(narrow["points_count"], 1_500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graph_configs_out_of_range_or_differing_between_vectors_are_refused() {
    let server = server();
    let cases = [
        (
            "PUT",
            "/collections/bad",
            json!({"vectors": {"size": 4, "distance": "Dot"}, "hnsw_config": {"m": 0}}),
            "`hnsw_config.m` = 0: must be 2..=256",
        ),
        (
            "PUT",
            "/collections/bad",
            json!({"vectors": {"size": 4, "distance": "Dot",
                               "hnsw_config": {"ef_construct": 3}}}),
            "`vectors.hnsw_config.ef_construct` = 3: must be 4..=2048",
        ),
        (
            "PUT",
            "/collections/bad",
            json!({"vectors": {"a": {"size": 4, "distance": "Dot", "hnsw_config": {"m": 32}},
                               "b": {"size": 4, "distance": "Dot"}}}),
            "SagittaDB builds every dense vector's graph with one config",
        ),
    ];
    for (method, path, body, expected) in cases {
        let reply = server.call(method, path, body.clone()).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            reply.body
        );
        let message = reply.body["status"]["error"].as_str().unwrap();
        assert!(message.contains(expected), "{body}: {message}");
    }
    assert_eq!(
        server
            .call("GET", "/collections/bad", json!(null))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    server
        .ok(
            "PUT",
            "/collections/ok",
            json!({"vectors": {"size": 4, "distance": "Dot"}}),
        )
        .await;
    let reply = server
        .call(
            "PATCH",
            "/collections/ok",
            json!({"hnsw_config": {"ef_construct": 100_000}}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    assert!(reply.body["status"]["error"]
        .as_str()
        .unwrap()
        .contains("`hnsw_config.ef_construct` = 100000"));
    // refused whole: nothing changed
    assert_eq!(graph_of(&info(&server, "ok").await), (16, 100));
}
