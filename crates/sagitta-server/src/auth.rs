//! API keys: with a read-write key, a read-only key, or both configured, every request but
//! the service probes (`/`, `/healthz`, `/livez`, `/readyz`) must carry one, in the
//! `api-key` header or as `Authorization: Bearer <key>`. No key: 401. A read-only key on a
//! write: 403. With no key configured, every request is allowed. Keys are compared as
//! SHA-256 digests in constant time ([`KeyDigest`]).

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};

use crate::error::ApiError;
use crate::SharedState;

/// Paths anyone may call, so orchestrators can probe a secured server.
const OPEN_PATHS: [&str; 4] = ["/", "/healthz", "/livez", "/readyz"];

/// POST endpoints that only read (searches, grouped searches, distance matrices, facets,
/// scroll, count, retrieve).
fn is_read_only_post(path: &str) -> bool {
    const READ_SUFFIXES: [&str; 11] = [
        "/points/query",
        "/points/query/batch",
        "/points/query/groups",
        "/points/search",
        "/points/search/batch",
        "/points/search/groups",
        "/points/search/matrix/pairs",
        "/points/search/matrix/offsets",
        "/points/scroll",
        "/points/count",
        "/facet",
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

/// SHA-256 digest of an API key. Keys are compared as digests: they have one length
/// whatever the key's, so the comparison cannot stop early on a length mismatch (which
/// would tell a caller how long the configured key is), and [`subtle`]'s comparison reads
/// every byte whatever differs, in code the optimizer may not turn into an early exit.
#[derive(Clone)]
pub struct KeyDigest([u8; 32]);

impl KeyDigest {
    pub fn of(key: &str) -> KeyDigest {
        KeyDigest(Sha256::digest(key.as_bytes()).into())
    }

    fn matches(&self, other: &KeyDigest) -> Choice {
        self.0.ct_eq(&other.0)
    }
}

impl std::fmt::Debug for KeyDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyDigest(..)")
    }
}

/// What a key presented by a client may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    ReadWrite,
    ReadOnly,
    Refused,
}

/// The configured keys, digested once at start.
#[derive(Clone, Debug, Default)]
pub struct ApiKeys {
    read_write: Option<KeyDigest>,
    read_only: Option<KeyDigest>,
}

impl ApiKeys {
    pub fn new(read_write: Option<&str>, read_only: Option<&str>) -> ApiKeys {
        ApiKeys {
            read_write: read_write.map(KeyDigest::of),
            read_only: read_only.map(KeyDigest::of),
        }
    }

    /// Whether any key is configured (with none, every request is allowed).
    pub fn required(&self) -> bool {
        self.read_write.is_some() || self.read_only.is_some()
    }

    /// What `given` may do. Both configured keys are compared whatever the first gives.
    pub fn access(&self, given: &str) -> Access {
        let given = KeyDigest::of(given);
        let compare = |key: &Option<KeyDigest>| {
            key.as_ref()
                .map_or_else(|| Choice::from(0), |key| key.matches(&given))
        };
        let read_write = compare(&self.read_write);
        let read_only = compare(&self.read_only);
        if bool::from(read_write) {
            Access::ReadWrite
        } else if bool::from(read_only) {
            Access::ReadOnly
        } else {
            Access::Refused
        }
    }
}

/// The key a request carries: its `api-key` header, or `Authorization: Bearer <key>`.
pub fn given_key(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get("api-key")
        .and_then(|value| value.to_str().ok())
        .or_else(|| {
            headers
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.strip_prefix("Bearer "))
        })
}

pub async fn check_api_key(
    State(state): State<SharedState>,
    request: Request,
    next: Next,
) -> Response {
    let keys = &state.api_keys;
    if !keys.required() {
        return next.run(request).await;
    }
    let path = request.uri().path();
    if OPEN_PATHS.contains(&path) {
        return next.run(request).await;
    }
    let Some(given) = given_key(request.headers()) else {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: send an API key in the `api-key` header or as \
             `Authorization: Bearer <key>`",
        )
        .into_response();
    };
    match keys.access(given) {
        Access::ReadWrite => next.run(request).await,
        Access::ReadOnly if is_read(request.method(), path) => next.run(request).await,
        Access::ReadOnly => ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "Forbidden: the read-only API key may not call {} {path}",
                request.method()
            ),
        )
        .into_response(),
        Access::Refused => {
            ApiError::new(StatusCode::UNAUTHORIZED, "Unauthorized: invalid API key").into_response()
        }
    }
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
        assert!(is_read(&Method::POST, "/collections/a/points/query/groups"));
        assert!(is_read(
            &Method::POST,
            "/collections/a/points/search/matrix/pairs"
        ));
        assert!(is_read(&Method::POST, "/collections/a/facet"));
        assert!(!is_read(&Method::POST, "/collections/a/snapshots"));
        assert!(!is_read(&Method::PUT, "/collections/a/snapshots/recover"));
        assert!(!is_read(&Method::PUT, "/collections/a/points"));
        assert!(!is_read(&Method::POST, "/collections/a/points/delete"));
        assert!(!is_read(&Method::POST, "/collections/a/points/payload"));
        assert!(!is_read(&Method::DELETE, "/collections/a"));
        assert!(!is_read(&Method::PATCH, "/collections/a"));
    }

    #[test]
    fn keys_compare_exactly() {
        let keys = ApiKeys::new(Some("secret"), None);
        assert_eq!(keys.access("secret"), Access::ReadWrite);
        assert_eq!(keys.access("secreT"), Access::Refused);
        assert_eq!(keys.access("secret1"), Access::Refused);
    }

    #[test]
    fn prefixes_and_keys_of_another_length_are_refused() {
        let key = "0123456789abcdef-read-write";
        let keys = ApiKeys::new(Some(key), Some("read-only-key"));
        assert_eq!(keys.access(key), Access::ReadWrite);
        assert_eq!(keys.access("read-only-key"), Access::ReadOnly);
        for given in [
            "",
            "0",
            "0123456789abcdef",
            &key[..key.len() - 1],
            "read-only",
        ] {
            assert_eq!(keys.access(given), Access::Refused, "prefix {given:?}");
        }
        for given in [
            format!("{key}x"),
            format!("{key}{key}"),
            key.to_uppercase(),
            "read-only-key ".to_string(),
        ] {
            assert_eq!(keys.access(&given), Access::Refused, "{given:?}");
        }
        assert!(!ApiKeys::new(None, None).required());
        assert_eq!(ApiKeys::new(None, None).access(""), Access::Refused);
    }
}
