//! The web dashboard at `/dashboard`: one HTML page, its script and its style sheet, built
//! into the binary (nothing fetched at run time). The page reads and writes through the
//! REST API with the API key the user gives it; the assets themselves hold no data and
//! are open, like `/`. `/dashboard/access` tells the page what the key it holds may do,
//! so it can disable writes for the read-only key.

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use crate::auth::Access;
use crate::SharedState;

const PAGE: &str = include_str!("../dashboard/index.html");
const SCRIPT: &str = include_str!("../dashboard/app.js");
const STYLE: &str = include_str!("../dashboard/style.css");

fn asset(kind: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// What the key of this request may do: `open` (no keys configured), `read-write`,
/// `read-only` or `refused`.
async fn access(State(state): State<SharedState>, headers: HeaderMap) -> Json<serde_json::Value> {
    let keys = &state.api_keys;
    let access = if keys.required() {
        match crate::auth::given_key(&headers).map(|key| keys.access(key)) {
            Some(Access::ReadWrite) => "read-write",
            Some(Access::ReadOnly) => "read-only",
            Some(Access::Refused) | None => "refused",
        }
    } else {
        "open"
    };
    Json(json!({ "access": access }))
}

/// The dashboard's routes (outside the API-key layer).
pub fn routes() -> Router<SharedState> {
    let page = || async { asset("text/html; charset=utf-8", PAGE) };
    Router::new()
        .route("/dashboard", get(page))
        .route("/dashboard/", get(page))
        .route(
            "/dashboard/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/dashboard/style.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
        .route("/dashboard/access", get(access))
}
