//! Request bodies in, response envelopes out.

use std::time::Instant;

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::ApiError;
use crate::SharedState;

/// A JSON body of type `T`, read within `max_request_bytes` (413 beyond), checked for
/// nesting deeper than `max_json_depth` (400) before it is parsed, and parsed with the
/// path of a bad field in the message (400). An empty body reads as `{}`. Unknown fields
/// are ignored, as Qdrant's clients expect.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<SharedState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &SharedState) -> Result<Self, ApiError> {
        let limit = state.config.max_request_bytes;
        let bytes = axum::body::to_bytes(request.into_body(), limit)
            .await
            .map_err(|_| {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("request body is over the limit of {limit} bytes"),
                )
            })?;
        let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        check_depth(bytes, state.config.max_json_depth)?;
        parse(bytes).map(JsonBody)
    }
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
    fn wait_parameter() {
        assert!(!wait_flag(None).unwrap());
        assert!(wait_flag(Some("wait=true&ordering=weak")).unwrap());
        assert!(!wait_flag(Some("timeout=5")).unwrap());
        assert!(wait_flag(Some("wait=maybe")).is_err());
    }
}
