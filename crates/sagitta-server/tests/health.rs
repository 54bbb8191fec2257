//! Health that tells the truth: a shard whose log append failed makes its collection red
//! with the reason in collection info and telemetry, `/readyz` answers 503 naming it, the
//! client's error carries no absolute path of the server, and `POST
//! /collections/{c}/reopen` brings the collection back once the cause is fixed.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use sagitta_engine::database::DatabaseOptions;
use sagitta_engine::Database;
use sagitta_server::{router, AppState, ServerConfig};
use sagitta_storage::sim::SimFileSystem;
use serde_json::{json, Value};
use tower::ServiceExt;

const ROOT: &str = "/srv/sagitta-data";

async fn call(app: &axum::Router, method: &str, path: &str, body: Value) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, body)
}

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
    let app = router(state);
    let (status, _) = call(
        &app,
        "PUT",
        "/collections/c",
        json!({"vectors": {"size": 2, "distance": "Dot"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(&app, "PUT", "/collections/c/points?wait=true", upsert(1)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        call(&app, "GET", "/readyz", json!({})).await.0,
        StatusCode::OK
    );

    fs.set_space_left(Some(0)); // the disk fills up
    let (status, body) = call(&app, "PUT", "/collections/c/points?wait=true", upsert(2)).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    let message = body["status"]["error"].as_str().unwrap().to_string();
    assert!(
        !message.contains(ROOT),
        "a server path reached the client: {message}"
    );
    fs.set_space_left(None);

    let (_, info) = call(&app, "GET", "/collections/c", json!({})).await;
    assert_eq!(info["result"]["status"], "red", "{info}");
    let reason = info["result"]["optimizer_status"]["error"]
        .as_str()
        .unwrap();
    assert!(reason.contains("refuses writes"), "{reason}");
    assert!(!reason.contains(ROOT), "{reason}");
    let (_, telemetry) = call(&app, "GET", "/telemetry", json!({})).await;
    assert!(
        telemetry.to_string().contains("refuses writes"),
        "{telemetry}"
    );

    let (status, body) = call(&app, "GET", "/readyz", json!({})).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let message = body["status"]["error"].as_str().unwrap();
    assert!(message.contains("`c`"), "{message}");
    assert_eq!(
        call(&app, "GET", "/healthz", json!({})).await.0,
        StatusCode::OK
    );
    // still refused although the disk has room: which bytes reached the log is unknown
    let (status, _) = call(&app, "PUT", "/collections/c/points?wait=true", upsert(3)).await;
    assert_ne!(status, StatusCode::OK);

    let (status, body) = call(&app, "POST", "/collections/c/reopen", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_ne!(body["result"]["status"], "red");
    assert_eq!(
        call(&app, "GET", "/readyz", json!({})).await.0,
        StatusCode::OK
    );
    let (status, _) = call(&app, "PUT", "/collections/c/points?wait=true", upsert(4)).await;
    assert_eq!(status, StatusCode::OK);
    let (_, count) = call(
        &app,
        "POST",
        "/collections/c/points/count",
        json!({"exact": true}),
    )
    .await;
    assert_eq!(count["result"]["count"], 2, "points 1 and 4: {count}"); // 2 failed, 3 refused
    let (status, _) = call(&app, "POST", "/collections/absent/reopen", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
