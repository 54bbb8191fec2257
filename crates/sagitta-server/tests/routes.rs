//! Requests that match no endpoint, or an endpoint with another method: every one is
//! answered in Qdrant's error envelope (`{"status": {"error": ..}, "time": ..}`) with a
//! message that names the request, never an empty body.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use sagitta_server::{router, AppState, ServerConfig};
use serde_json::Value;
use tower::ServiceExt;

struct Reply {
    status: StatusCode,
    allow: Option<String>,
    error: String,
}

async fn send(app: &Router, method: &str, path: &str, body: &str) -> Reply {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let allow = response
        .headers()
        .get("allow")
        .map(|value| value.to_str().unwrap().to_string());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or_else(|error| {
        panic!(
            "{method} {path}: {status} with a body that is not JSON ({error}): {:?}",
            String::from_utf8_lossy(&bytes)
        )
    });
    if status.is_success() {
        return Reply {
            status,
            allow,
            error: String::new(),
        };
    }
    let error = body["status"]["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{method} {path}: {status} without the envelope: {body}"))
        .to_string();
    assert!(body["time"].is_number(), "{method} {path}: {body}");
    Reply {
        status,
        allow,
        error,
    }
}

#[tokio::test]
async fn colliding_and_unknown_routes_answer_in_the_envelope() {
    let directory = tempfile::tempdir().unwrap();
    let state = Arc::new(
        AppState::open(ServerConfig {
            data_dir: directory.path().to_path_buf(),
            ..ServerConfig::default()
        })
        .unwrap(),
    );
    let app = router(state);
    let create = r#"{"vectors": {"size": 2, "distance": "Dot"}}"#;
    assert_eq!(
        send(&app, "PUT", "/collections/docs", create).await.status,
        StatusCode::OK
    );

    // Qdrant endpoints SagittaDB does not implement, whose paths collide with a route of
    // another method (`/collections/{name}`, `/collections/{name}/points/{id}`) or match
    // none: 501, naming the request and the feature.
    for (method, path, feature) in [
        ("POST", "/collections/docs/points/recommend", "recommend"),
        ("POST", "/collections/docs/snapshots/upload", "upload"),
        ("GET", "/cluster", "cluster"),
    ] {
        let reply = send(&app, method, path, "{}").await;
        assert_eq!(
            reply.status,
            StatusCode::NOT_IMPLEMENTED,
            "{method} {path}: {}",
            reply.error
        );
        assert!(
            reply.error.contains(&format!("{method} {path}")),
            "{method} {path}: {}",
            reply.error
        );
        assert!(
            reply.error.contains("not supported by SagittaDB")
                && reply.error.to_lowercase().contains(feature),
            "{method} {path}: {}",
            reply.error
        );
    }

    // A method the endpoint does not answer (`PUT /collections/..` reaches the server as
    // `PUT /` once the client resolves the dot segment): 405 with `Allow`, naming both.
    for (method, path, allowed) in [
        ("PUT", "/", "GET"),
        ("DELETE", "/collections/docs/points/search", "POST"),
        ("POST", "/healthz", "GET"),
        ("PATCH", "/collections/docs/points", "PUT"),
    ] {
        let reply = send(&app, method, path, "{}").await;
        assert_eq!(
            reply.status,
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path}: {}",
            reply.error
        );
        let allow = reply.allow.unwrap_or_default();
        assert!(allow.contains(allowed), "{method} {path}: Allow {allow:?}");
        assert!(
            reply.error.contains(&format!("{method} {path}")) && reply.error.contains(allowed),
            "{method} {path}: {}",
            reply.error
        );
    }

    // No endpoint at all: 404, naming the path.
    for (method, path) in [
        ("GET", "/nope"),
        ("POST", "/collections/docs/points/nope/x"),
    ] {
        let reply = send(&app, method, path, "{}").await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{method} {path}");
        assert!(
            reply.error.contains(path),
            "{method} {path}: {}",
            reply.error
        );
    }
}
