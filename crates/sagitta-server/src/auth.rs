//! API keys: with a read-write key, a read-only key, or both configured, every request but
//! the service probes (`/`, `/healthz`, `/livez`, `/readyz`) must carry one, in the
//! `api-key` header or as `Authorization: Bearer <key>`. No key: 401. A read-only key on a
//! write: 403. With no key configured, every request is allowed.

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::SharedState;

/// Paths anyone may call, so orchestrators can probe a secured server.
const OPEN_PATHS: [&str; 4] = ["/", "/healthz", "/livez", "/readyz"];

/// POST endpoints that only read (searches, scroll, count, retrieve).
fn is_read_only_post(path: &str) -> bool {
    const READ_SUFFIXES: [&str; 6] = [
        "/points/query",
        "/points/query/batch",
        "/points/search",
        "/points/search/batch",
        "/points/scroll",
        "/points/count",
    ];
    READ_SUFFIXES.iter().any(|suffix| path.ends_with(suffix))
        // POST /collections/{c}/points retrieves by id.
        || (path.starts_with("/collections/") && path.ends_with("/points"))
}

/// Whether `method` on `path` only reads.
pub fn is_read(method: &Method, path: &str) -> bool {
    *method == Method::GET
        || *method == Method::HEAD
        || (*method == Method::POST && is_read_only_post(path))
}

/// Compares without an early exit on the first differing byte.
fn same_key(given: &str, expected: &str) -> bool {
    given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |difference, (a, b)| difference | (a ^ b))
            == 0
}

pub async fn check_api_key(
    State(state): State<SharedState>,
    request: Request,
    next: Next,
) -> Response {
    let config = &state.config;
    if config.api_key.is_none() && config.read_only_api_key.is_none() {
        return next.run(request).await;
    }
    let path = request.uri().path();
    if OPEN_PATHS.contains(&path) {
        return next.run(request).await;
    }
    let headers = request.headers();
    let given = headers
        .get("api-key")
        .and_then(|value| value.to_str().ok())
        .or_else(|| {
            headers
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.strip_prefix("Bearer "))
        });
    let Some(given) = given else {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: send an API key in the `api-key` header or as \
             `Authorization: Bearer <key>`",
        )
        .into_response();
    };
    if config
        .api_key
        .as_deref()
        .is_some_and(|key| same_key(given, key))
    {
        return next.run(request).await;
    }
    if config
        .read_only_api_key
        .as_deref()
        .is_some_and(|key| same_key(given, key))
    {
        if is_read(request.method(), path) {
            return next.run(request).await;
        }
        return ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "Forbidden: the read-only API key may not call {} {path}",
                request.method()
            ),
        )
        .into_response();
    }
    ApiError::new(StatusCode::UNAUTHORIZED, "Unauthorized: invalid API key").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_are_told_apart() {
        assert!(is_read(&Method::GET, "/collections/a"));
        assert!(is_read(&Method::POST, "/collections/a/points/query"));
        assert!(is_read(&Method::POST, "/collections/a/points/query/batch"));
        assert!(is_read(&Method::POST, "/collections/a/points"));
        assert!(!is_read(&Method::PUT, "/collections/a/points"));
        assert!(!is_read(&Method::POST, "/collections/a/points/delete"));
        assert!(!is_read(&Method::POST, "/collections/a/points/payload"));
        assert!(!is_read(&Method::DELETE, "/collections/a"));
        assert!(!is_read(&Method::PATCH, "/collections/a"));
    }

    #[test]
    fn keys_compare_exactly() {
        assert!(same_key("secret", "secret"));
        assert!(!same_key("secreT", "secret"));
        assert!(!same_key("secret1", "secret"));
    }
}
