//! Request bodies in: the JSON body extractor under the size, aggregate, time and nesting
//! limits, and the `wait` query parameter. (The success envelope out is in `response.rs`.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use http_body::Body as _;
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::SharedState;

/// The bytes of request bodies being received, all requests together, within
/// `max_inflight_request_bytes`: 40 clients each sending a 31 MB body made the server
/// hold 1.25 GB at once. A body with a declared length reserves all of it before reading
/// (so a refusal comes before the client sends it); a chunked body reserves as it arrives.
#[derive(Debug)]
pub struct ByteBudget {
    used: AtomicUsize,
    limit: usize,
}

/// Bytes reserved from a [`ByteBudget`], given back when dropped (it holds the budget, so
/// a body that hyper and tonic own, a gRPC message's, can hold one too).
pub struct Reservation {
    budget: Arc<ByteBudget>,
    bytes: usize,
}

impl ByteBudget {
    pub fn new(limit: usize) -> ByteBudget {
        ByteBudget {
            used: AtomicUsize::new(0),
            limit,
        }
    }

    /// Bytes reserved now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn take(&self, bytes: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.limit)
            })
            .is_ok()
    }

    /// Reserves `bytes`, or `None` if that would pass the limit.
    pub fn reserve(self: &Arc<Self>, bytes: usize) -> Option<Reservation> {
        self.take(bytes).then(|| Reservation {
            budget: Arc::clone(self),
            bytes,
        })
    }
}

impl Reservation {
    /// Reserves `bytes` more; false (and nothing more reserved) past the limit.
    pub fn grow(&mut self, bytes: usize) -> bool {
        let taken = self.budget.take(bytes);
        if taken {
            self.bytes += bytes;
        }
        taken
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// A JSON body of type `T`, read within `max_request_bytes` (413 beyond, at once when the
/// declared length is over), within the aggregate `max_inflight_request_bytes` (503 with
/// `Retry-After` beyond), within the body time limit of the connection layer (408),
/// checked for nesting deeper than `max_json_depth` (400) before it is parsed, and parsed
/// with the path of a bad field in the message (400). An empty body reads as `{}`.
/// Unknown fields are ignored, as Qdrant's clients expect.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<SharedState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &SharedState) -> Result<Self, ApiError> {
        let connection = request
            .extensions()
            .get::<crate::connections::ConnectionHandle>()
            .cloned();
        let result = read_body(request, state).await;
        if result.is_err() {
            // The body may be unread: the answer closes the connection.
            if let Some(connection) = connection {
                connection.0.close_after_response();
            }
        }
        let bytes = result?;
        let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        check_depth(bytes, state.config.max_json_depth)?;
        parse(bytes).map(JsonBody)
    }
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "Payload error: request body is over the limit of {limit} bytes (max_request_bytes)"
        ),
    )
}

pub(crate) fn inflight_full(state: &SharedState, wanted: usize) -> ApiError {
    state
        .metrics
        .connections
        .bodies_refused_inflight
        .fetch_add(1, Ordering::Relaxed);
    ApiError {
        retry_after_seconds: Some(1),
        ..ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "Service unavailable: request bodies being received already hold {} of the \
                 {} bytes allowed at once (max_inflight_request_bytes); {wanted} more do not \
                 fit, retry later",
                state.inflight_bytes.used(),
                state.config.max_inflight_request_bytes
            ),
        )
    }
}

/// Reads the whole body under the size, aggregate and time limits.
async fn read_body(request: Request, state: &SharedState) -> Result<Vec<u8>, ApiError> {
    let limit = state.config.max_request_bytes;
    let declared = crate::connections::declared_length(request.headers())
        .or_else(|| request.body().size_hint().exact());
    let declared = match declared {
        Some(length) => Some(usize::try_from(length).map_err(|_| too_large(limit))?),
        None => None,
    };
    if declared.is_some_and(|length| length > limit) {
        return Err(too_large(limit));
    }
    let reserve = declared.unwrap_or(0);
    let mut reservation = state
        .inflight_bytes
        .reserve(reserve)
        .ok_or_else(|| inflight_full(state, reserve))?;
    let mut body = request.into_body();
    // Capacity for the declared length (reserved already; pages untouched until written).
    let mut bytes = Vec::with_capacity(reserve);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| read_error(state, &error))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if bytes.len() + data.len() > limit {
            return Err(too_large(limit));
        }
        if bytes.len() + data.len() > reservation_size(declared, bytes.len())
            && !reservation.grow(data.len())
        {
            return Err(inflight_full(state, data.len()));
        }
        bytes.extend_from_slice(&data);
    }
    Ok(bytes)
}

/// Bytes already reserved for a body: all of its declared length, or what has arrived.
fn reservation_size(declared: Option<usize>, received: usize) -> usize {
    declared.unwrap_or(received)
}

/// A body (or a gRPC message) that came too slowly: 408, counted.
pub(crate) fn too_slow(
    state: &SharedState,
    timeout: &crate::connections::BodyReadTimeout,
) -> ApiError {
    state
        .metrics
        .connections
        .body_read_timeouts
        .fetch_add(1, Ordering::Relaxed);
    ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        format!("Request timeout: {timeout}"),
    )
}

/// A body that could not be read: 408 when it came too slowly, else 400.
fn read_error(state: &SharedState, error: &axum::Error) -> ApiError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(inner) = source {
        if let Some(timeout) = inner.downcast_ref::<crate::connections::BodyReadTimeout>() {
            return too_slow(state, timeout);
        }
        source = inner.source();
    }
    ApiError::bad_request(format!("the request body could not be read: {error}"))
}

/// Parses `bytes` as `T`; the error names the path of the field at fault.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        if (inner.is_syntax() || inner.is_eof()) && path == "." {
            ApiError::bad_request(format!("malformed JSON body: {inner}"))
        } else if inner.is_syntax() || inner.is_eof() {
            // Also a number out of range (1e39 for an f32), where the field is known.
            ApiError::bad_request(format!("malformed JSON body at `{path}`: {inner}"))
        } else if path == "." {
            ApiError::bad_request(format!("Format error in JSON body: {inner}"))
        } else {
            ApiError::bad_request(format!("Format error in JSON body: `{path}`: {inner}"))
        }
    })?;
    deserializer
        .end()
        .map_err(|error| ApiError::bad_request(format!("malformed JSON body: {error}")))?;
    Ok(value)
}

/// Rejects JSON whose arrays and objects nest deeper than `max_depth`, scanning the bytes
/// once (brackets inside strings do not count), so a hostile body cannot make the
/// recursive parser use unbounded stack.
pub fn check_depth(bytes: &[u8], max_depth: usize) -> Result<(), ApiError> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for byte in bytes {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max_depth {
                    return Err(ApiError::bad_request(format!(
                        "JSON body nests deeper than the limit of {max_depth} levels"
                    )));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// The `wait` query parameter (default false, as in Qdrant); other parameters
/// (`timeout`, `ordering`, `consistency`) are accepted and ignored.
pub fn wait_flag(query: Option<&str>) -> Result<bool, ApiError> {
    let Some(query) = query else {
        return Ok(false);
    };
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if key == "wait" {
            return match value {
                "true" | "1" | "" => Ok(true),
                "false" | "0" => Ok(false),
                other => Err(ApiError::bad_request(format!(
                    "query parameter `wait` = {other:?}: expected true or false"
                ))),
            };
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_only_structure_outside_strings() {
        assert!(check_depth(br#"{"a":[[1]]}"#, 3).is_ok());
        assert!(check_depth(br#"{"a":[[1]]}"#, 2).is_err());
        assert!(check_depth(br#"{"a":"[[[[[\"[[["}"#, 1).is_ok());
    }

    #[test]
    fn parse_errors_name_the_path() {
        #[derive(serde::Deserialize, Debug)]
        struct Inner {
            #[allow(dead_code)]
            size: usize,
        }
        #[derive(serde::Deserialize, Debug)]
        struct Outer {
            #[allow(dead_code)]
            vectors: Inner,
        }
        let error = parse::<Outer>(br#"{"vectors":{"size":"x"}}"#).unwrap_err();
        assert!(error.message.contains("vectors.size"), "{}", error.message);
        let error = parse::<Outer>(br#"{"vectors":"#).unwrap_err();
        assert!(error.message.contains("malformed"), "{}", error.message);
    }

    #[test]
    fn the_byte_budget_holds_reservations_until_dropped() {
        let budget = Arc::new(ByteBudget::new(100));
        let mut first = budget.reserve(60).unwrap();
        assert!(budget.reserve(41).is_none());
        assert!(first.grow(40));
        assert!(!first.grow(1));
        assert_eq!(budget.used(), 100);
        drop(first);
        assert_eq!(budget.used(), 0);
        assert!(budget.reserve(100).is_some());
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn wait_parameter() {
        assert!(!wait_flag(None).unwrap());
        assert!(wait_flag(Some("wait=true&ordering=weak")).unwrap());
        assert!(!wait_flag(Some("timeout=5")).unwrap());
        assert!(wait_flag(Some("wait=maybe")).is_err());
    }
}
