//! The point requests besides upserts and searches: scroll, count, retrieve, delete and
//! the payload updates.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::fields::{NoOrderBy, NoShardKeys, NullOnly};
use super::{payload_text, IdInput, WithPayload, WithVector};
use crate::error::{ApiError, ApiResult};

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct ScrollRequest {
    pub shard_key: Option<NullOnly<NoShardKeys>>,
    pub offset: Option<IdInput>,
    pub limit: Option<usize>,
    pub filter: Option<Value>,
    pub with_payload: Option<WithPayload>,
    pub with_vector: Option<WithVector>,
    pub order_by: Option<NullOnly<NoOrderBy>>,
}

/// `exact: false` allows an estimate; the exact count SagittaDB always gives is one.
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct CountRequest {
    pub shard_key: Option<NullOnly<NoShardKeys>>,
    pub filter: Option<Value>,
    pub exact: Option<bool>,
}

/// Points chosen by id or by filter (delete, payload updates).
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct PointSelector {
    pub points: Option<Vec<IdInput>>,
    pub filter: Option<Value>,
    pub shard_key: Option<NullOnly<NoShardKeys>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrieveRequest {
    #[serde(default)]
    pub shard_key: Option<NullOnly<NoShardKeys>>,
    pub ids: Vec<IdInput>,
    #[serde(default)]
    pub with_payload: Option<WithPayload>,
    #[serde(default)]
    pub with_vector: Option<WithVector>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetPayloadRequest {
    pub payload: Box<RawValue>,
    #[serde(default)]
    pub points: Option<Vec<IdInput>>,
    #[serde(default)]
    pub filter: Option<Value>,
    #[serde(default)]
    pub shard_key: Option<NullOnly<NoShardKeys>>,
    /// Nested target key: not supported (refused, never silently ignored).
    #[serde(default)]
    pub key: Option<String>,
}

impl SetPayloadRequest {
    pub fn payload_text(&self) -> ApiResult<String> {
        payload_text(Some(self.payload.clone()), "payload")?
            .ok_or_else(|| ApiError::bad_request("Wrong input: `payload` must be a JSON object"))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeletePayloadRequest {
    pub keys: Vec<String>,
    #[serde(default)]
    pub points: Option<Vec<IdInput>>,
    #[serde(default)]
    pub filter: Option<Value>,
    #[serde(default)]
    pub shard_key: Option<NullOnly<NoShardKeys>>,
}
