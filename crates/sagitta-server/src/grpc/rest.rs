//! Each gRPC call answered by the REST route that does the same (in process, no socket):
//! the API key from the call's `api-key` metadata (or `authorization: Bearer`), the body
//! as the route's JSON, and its answer or error brought back — so both APIs share one set
//! of handlers, checks, limits, metrics and messages.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::Value;
use tonic::metadata::MetadataMap;
use tonic::{Code, Status};
use tower::ServiceExt;

/// Largest answer read back from a route (a page of the widest points stays far below).
const MAX_ANSWER_BYTES: usize = 1 << 30;

#[derive(Clone)]
pub struct Rest {
    app: axum::Router,
}

/// One REST call: its method, path (segments already escaped) and query, and body.
pub struct Call {
    pub method: Method,
    pub path: String,
    pub query: Vec<(&'static str, String)>,
    /// The JSON body, already written out.
    pub body: Option<Vec<u8>>,
}

impl Call {
    pub fn new(method: Method, path: String) -> Call {
        Call {
            method,
            path,
            query: Vec::new(),
            body: None,
        }
    }

    /// The JSON body `body` writes (a typed body skips building a `Value`).
    pub fn json(mut self, body: &impl serde::Serialize) -> Call {
        // serializing a `Value` or a body of plain fields cannot fail
        self.body = Some(serde_json::to_vec(body).unwrap_or_default());
        self
    }

    /// `name=value` in the query string when `value` is given.
    pub fn query(mut self, name: &'static str, value: Option<impl ToString>) -> Call {
        if let Some(value) = value {
            self.query.push((name, value.to_string()));
        }
        self
    }
}

/// What a route answered: its `result` and `time`.
pub struct Answer {
    pub result: Value,
    pub time: f64,
}

impl Rest {
    pub fn new(app: axum::Router) -> Rest {
        Rest { app }
    }

    /// Runs `call` with the API key of `metadata`; a REST error comes back as the gRPC
    /// status Qdrant gives it, with the same message.
    pub async fn run(&self, metadata: &MetadataMap, call: Call) -> Result<Answer, Status> {
        let mut uri = call.path;
        for (at, (name, value)) in call.query.iter().enumerate() {
            uri.push(if at == 0 { '?' } else { '&' });
            uri.push_str(name);
            uri.push('=');
            uri.push_str(&escape(value));
        }
        let mut request = Request::builder().method(call.method).uri(uri);
        for key in ["api-key", "authorization"] {
            if let Some(value) = metadata.get(key).and_then(|v| v.to_str().ok()) {
                request = request.header(key, value);
            }
        }
        let body = match call.body {
            Some(body) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Body::from(body)
            }
            None => Body::empty(),
        };
        let request = request
            .body(body)
            .map_err(|error| Status::invalid_argument(error.to_string()))?;
        let response = self
            .app
            .clone()
            .oneshot(request)
            .await
            .map_err(|error| Status::internal(error.to_string()))?;
        let status = response.status();
        // a refusal for load says when to come back: qdrant-client reads it from the
        // trailing `retry-after` metadata (ResourceExhaustedResponse)
        let retry_after = response.headers().get(header::RETRY_AFTER).cloned();
        let bytes = axum::body::to_bytes(response.into_body(), MAX_ANSWER_BYTES)
            .await
            .map_err(|error| Status::internal(format!("reading the answer: {error}")))?;
        let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if !status.is_success() {
            let message = answer["status"]["error"].as_str().map_or_else(
                || String::from_utf8_lossy(&bytes).into_owned(),
                str::to_string,
            );
            let mut metadata = MetadataMap::new();
            if let Some(seconds) = retry_after.and_then(|v| v.to_str().ok()?.parse().ok()) {
                metadata.insert("retry-after", seconds);
            }
            return Err(Status::with_metadata(code_of(status), message, metadata));
        }
        Ok(Answer {
            time: answer["time"].as_f64().unwrap_or(0.0),
            result: answer.get("result").cloned().unwrap_or(Value::Null),
        })
    }
}

/// The gRPC status code of an HTTP status, as Qdrant pairs them.
pub fn code_of(status: StatusCode) -> Code {
    match status {
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => Code::InvalidArgument,
        StatusCode::UNAUTHORIZED => Code::Unauthenticated,
        StatusCode::FORBIDDEN => Code::PermissionDenied,
        StatusCode::NOT_FOUND => Code::NotFound,
        StatusCode::CONFLICT => Code::AlreadyExists,
        StatusCode::PAYLOAD_TOO_LARGE | StatusCode::TOO_MANY_REQUESTS => Code::ResourceExhausted,
        StatusCode::REQUEST_TIMEOUT | StatusCode::GATEWAY_TIMEOUT => Code::DeadlineExceeded,
        StatusCode::NOT_IMPLEMENTED | StatusCode::METHOD_NOT_ALLOWED => Code::Unimplemented,
        StatusCode::SERVICE_UNAVAILABLE => Code::Unavailable,
        _ => Code::Internal,
    }
}

/// `text` percent-escaped for a path segment or a query value.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            escaped.push(byte as char);
        } else {
            escaped.push_str(&format!("%{byte:02X}"));
        }
    }
    escaped
}

/// The path `/collections/{name}` followed by `rest` (`""` or `"/points/query"`, ...).
pub fn collection(name: &str, rest: &str) -> String {
    format!("/collections/{}{rest}", escape(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_in_paths() {
        assert_eq!(
            collection("a b/c", "/points"),
            "/collections/a%20b%2Fc/points"
        );
        assert_eq!(escape("plain-name_1.x~"), "plain-name_1.x~");
        assert_eq!(escape("é"), "%C3%A9");
    }

    #[test]
    fn http_statuses_map_to_qdrants_grpc_codes() {
        assert_eq!(code_of(StatusCode::BAD_REQUEST), Code::InvalidArgument);
        assert_eq!(code_of(StatusCode::NOT_FOUND), Code::NotFound);
        assert_eq!(code_of(StatusCode::FORBIDDEN), Code::PermissionDenied);
        assert_eq!(code_of(StatusCode::SERVICE_UNAVAILABLE), Code::Unavailable);
        assert_eq!(code_of(StatusCode::INTERNAL_SERVER_ERROR), Code::Internal);
    }
}
