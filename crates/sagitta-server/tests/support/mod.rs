//! What the API test files share: a router on a fresh data directory, requests through
//! it, and a small collection with payloads.
#![allow(dead_code)] // each test file uses its own part

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use sagitta_server::{router, AppState, ServerConfig};
use serde_json::{json, Value};
use tower::ServiceExt;

pub struct Server {
    pub app: Router,
    pub state: Arc<AppState>,
    pub _directory: tempfile::TempDir,
}

pub fn server_with(config: ServerConfig) -> Server {
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

pub fn server() -> Server {
    server_with(ServerConfig::default())
}

pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
    pub retry_after: Option<String>,
}

impl Server {
    pub async fn send(&self, method: &str, path: &str, body: &str, key: Option<&str>) -> Reply {
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

    pub async fn call(&self, method: &str, path: &str, body: Value) -> Reply {
        self.send(method, path, &body.to_string(), None).await
    }

    /// A request that must succeed; returns `result`.
    pub async fn ok(&self, method: &str, path: &str, body: Value) -> Value {
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

    pub async fn count(&self, collection: &str) -> u64 {
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
pub fn vector(i: u64, dim: usize) -> Vec<f32> {
    (0..dim as u64)
        .map(|j| {
            let x = (i * 31 + j * 17 + 7).wrapping_mul(0x9E37_79B9) % 1000;
            x as f32 / 1000.0 - 0.5
        })
        .collect()
}

pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

pub async fn make_collection(server: &Server, name: &str, dim: usize, count: u64) {
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

/// An empty collection `name` of `dim`-d vectors compared by dot product.
pub async fn empty_collection(server: &Server, name: &str, dim: usize) {
    server
        .ok(
            "PUT",
            &format!("/collections/{name}"),
            json!({"vectors": {"size": dim, "distance": "Dot"}}),
        )
        .await;
}
