//! Health that tells the truth: a shard whose log append failed makes its collection red
//! with the reason in collection info and telemetry, `/readyz` answers 503 naming it, the
//! client's error carries no absolute path of the server, and `POST
//! /collections/{c}/reopen` brings the collection back once the cause is fixed.

mod support;

use std::sync::Arc;

use axum::http::StatusCode;
use sagitta_engine::database::DatabaseOptions;
use sagitta_engine::Database;
use sagitta_server::{router, AppState, ServerConfig};
use sagitta_storage::sim::SimFileSystem;
use serde_json::{json, Value};
use support::Server;

const ROOT: &str = "/srv/sagitta-data";

fn upsert(id: u64) -> Value {
    json!({"points": [{"id": id, "vector": [1.0, id as f32], "payload": {"n": id}}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_log_append_is_red_not_ready_and_reopens() {
    let fs = Arc::new(SimFileSystem::new());
    let database = Database::open_with(
        Arc::clone(&fs) as Arc<dyn sagitta_storage::fs::FileSystem>,
        std::path::Path::new(ROOT),
        DatabaseOptions {
            background_optimizer: false,
            ..DatabaseOptions::default()
        },
    )
    .unwrap();
    let state = Arc::new(AppState::new(Arc::new(database), ServerConfig::default()));
    let app = Server {
        app: router(Arc::clone(&state)),
        state,
        _directory: tempfile::tempdir().unwrap(), // unused: the data lives on the simulated disk
    };
    let call = |method: &'static str, path: &'static str, body: Value| {
        let app = &app;
        async move {
            let reply = app.call(method, path, body).await;
            (reply.status, reply.body)
        }
    };
    let (status, _) = call(
        "PUT",
        "/collections/c",
        json!({"vectors": {"size": 2, "distance": "Dot"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call("PUT", "/collections/c/points?wait=true", upsert(1)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(call("GET", "/readyz", json!({})).await.0, StatusCode::OK);

    fs.set_space_left(Some(0)); // the disk fills up
    let (status, body) = call("PUT", "/collections/c/points?wait=true", upsert(2)).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    let message = body["status"]["error"].as_str().unwrap().to_string();
    assert!(
        !message.contains(ROOT),
        "a server path reached the client: {message}"
    );
    fs.set_space_left(None);

    let (_, info) = call("GET", "/collections/c", json!({})).await;
    assert_eq!(info["result"]["status"], "red", "{info}");
    let reason = info["result"]["optimizer_status"]["error"]
        .as_str()
        .unwrap();
    assert!(reason.contains("refuses writes"), "{reason}");
    assert!(!reason.contains(ROOT), "{reason}");
    let (_, telemetry) = call("GET", "/telemetry", json!({})).await;
    assert!(
        telemetry.to_string().contains("refuses writes"),
        "{telemetry}"
    );

    let (status, body) = call("GET", "/readyz", json!({})).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let message = body["status"]["error"].as_str().unwrap();
    assert!(message.contains("`c`"), "{message}");
    assert_eq!(call("GET", "/healthz", json!({})).await.0, StatusCode::OK);
    // still refused although the disk has room: which bytes reached the log is unknown
    let (status, _) = call("PUT", "/collections/c/points?wait=true", upsert(3)).await;
    assert_ne!(status, StatusCode::OK);

    let (status, body) = call("POST", "/collections/c/reopen", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_ne!(body["result"]["status"], "red");
    assert_eq!(call("GET", "/readyz", json!({})).await.0, StatusCode::OK);
    let (status, _) = call("PUT", "/collections/c/points?wait=true", upsert(4)).await;
    assert_eq!(status, StatusCode::OK);
    let (_, count) = call(
        "POST",
        "/collections/c/points/count",
        json!({"exact": true}),
    )
    .await;
    assert_eq!(count["result"]["count"], 2, "points 1 and 4: {count}"); // 2 failed, 3 refused
    let (status, _) = call("POST", "/collections/absent/reopen", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
