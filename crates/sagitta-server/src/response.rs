//! Qdrant's success envelope, which every handler answers in (errors have theirs in
//! `error.rs`). Below the handlers and the metrics endpoints alike, so neither imports
//! the other's module for it.

use std::time::Instant;

use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Qdrant's success envelope: `{"result": .., "status": "ok", "time": seconds}`.
pub fn ok<T: Serialize>(result: T, started: Instant) -> Response {
    #[derive(Serialize)]
    struct Envelope<T> {
        result: T,
        status: &'static str,
        time: f64,
    }
    axum::Json(Envelope {
        result,
        status: "ok",
        time: started.elapsed().as_secs_f64(),
    })
    .into_response()
}
