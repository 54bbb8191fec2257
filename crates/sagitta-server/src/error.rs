//! API errors and the one table that maps engine errors to HTTP statuses.
//!
//! Every error is answered in Qdrant's envelope, `{"status": {"error": "<message>"},
//! "time": <seconds>}`, and the message names the field at fault.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sagitta_engine::EngineError;
use sagitta_storage::StorageError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// Seconds a client should wait before retrying (429 only).
    pub retry_after_seconds: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            retry_after_seconds: None,
        }
    }

    /// 400: the request is well-formed JSON but a field is wrong.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// The same error, saying which part of a request it is about (`operations[2]`).
    pub fn at(mut self, part: &str) -> ApiError {
        self.message = format!("{} (in `{part}`)", self.message);
        self
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    pub fn collection_not_found(name: &str) -> ApiError {
        ApiError::not_found(format!("Not found: Collection `{name}` doesn't exist!"))
    }

    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: u64) -> ApiError {
        ApiError {
            retry_after_seconds: Some(retry_after_seconds),
            ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, message)
        }
    }

    /// Maps an engine error for an operation on collection `collection` (the name is used
    /// in messages instead of the engine's directory path).
    #[allow(clippy::needless_pass_by_value)] // callers hand over the error they own
    pub fn from_engine(error: EngineError, collection: &str) -> ApiError {
        match &error {
            EngineError::CollectionNotFound { .. } => ApiError::collection_not_found(collection),
            EngineError::CollectionExists { .. } => ApiError::new(
                StatusCode::CONFLICT,
                format!("Wrong input: Collection `{collection}` already exists!"),
            ),
            EngineError::WrongVectorDimension { .. }
            | EngineError::NonFiniteValue { .. }
            | EngineError::VectorNormTooLarge { .. }
            | EngineError::RowsMismatch { .. }
            | EngineError::PayloadTooLarge { .. }
            | EngineError::InvalidPayload { .. }
            | EngineError::InvalidFilter { .. }
            | EngineError::ParameterOutOfRange { .. }
            | EngineError::BatchTooLarge { .. }
            | EngineError::InvalidCollectionName { .. }
            | EngineError::InvalidPayloadIndex { .. }
            | EngineError::NameInUse { .. }
            | EngineError::InvalidVectors { .. }
            | EngineError::InvalidSettings { .. }
            | EngineError::InvalidSnapshot { .. } => {
                ApiError::bad_request(format!("Wrong input: {error}"))
            }
            EngineError::AliasNotFound { alias } => {
                ApiError::not_found(format!("Not found: Alias `{alias}` does not exist!"))
            }
            EngineError::Storage(StorageError::Locked { .. }) | EngineError::Unavailable { .. } => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, error.to_string())
            }
            // The server cancels nothing: a cancelled operation is an internal failure. The
            // operator's log gets the whole message; the client gets it with every absolute
            // path cut to its file name (the server's directories are not the client's).
            EngineError::Corrupt { .. }
            | EngineError::Storage(_)
            | EngineError::Index(_)
            | EngineError::Cancelled { .. } => {
                log::error!(target: "sagitta::server", "collection `{collection}`: {error}");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!(
                        "Service internal error: {}",
                        without_paths(&error.to_string())
                    ),
                )
            }
        }
    }
}

/// `message` with each absolute path (a word starting with `/`, quotes and backticks
/// around it kept) replaced by its last component.
pub fn without_paths(message: &str) -> String {
    message
        .split(' ')
        .map(|word| {
            let start = word.find('/').filter(|start| {
                word[..*start]
                    .chars()
                    .all(|c| matches!(c, '`' | '"' | '\'' | '(' | '['))
            });
            let Some(start) = start else {
                return word.to_string();
            };
            let end = word
                .rfind(|c: char| !matches!(c, '`' | '"' | '\'' | ')' | ']' | ':' | ',' | '.'))
                .map_or(word.len(), |last| last + 1)
                .max(start + 1);
            let name = std::path::Path::new(&word[start..end])
                .file_name()
                .map_or_else(String::new, |name| name.to_string_lossy().into_owned());
            format!("{}{name}{}", &word[..start], &word[end..])
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status, self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "status": {"error": self.message},
            "time": 0.0,
        });
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(seconds) = self.retry_after_seconds {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from_str(&seconds.to_string()).expect("digits are a valid header"),
            );
        }
        response
    }
}

pub type ApiResult<T> = std::result::Result<T, ApiError>;

#[cfg(test)]
mod path_tests {
    use super::without_paths;

    #[test]
    fn absolute_paths_leave_only_their_file_names() {
        assert_eq!(
            without_paths("writing `/srv/data/collections/c/shard-0/wal-3.log`: No space left"),
            "writing `wal-3.log`: No space left"
        );
        assert_eq!(
            without_paths("\"/a/b/MANIFEST\": shard manifest does not decode"),
            "\"MANIFEST\": shard manifest does not decode"
        );
        assert_eq!(
            without_paths("a/b is relative, 1/2 too"),
            "a/b is relative, 1/2 too"
        );
    }
}
