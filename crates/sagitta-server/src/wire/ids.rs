//! Point ids: an unsigned integer or a UUID string, in and out.

use std::fmt;

use sagitta_engine::point::parse_uuid;
use sagitta_engine::PointId;
use serde::de::{self, Deserializer, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

/// A point id as sent: an unsigned integer or a UUID string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdInput(pub PointId);

impl<'de> Deserialize<'de> for IdInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<IdInput, D::Error> {
        struct IdVisitor;
        impl Visitor<'_> for IdVisitor {
            type Value = IdInput;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a point id: an unsigned integer or a UUID string")
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<IdInput, E> {
                Ok(IdInput(PointId::Number(value)))
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<IdInput, E> {
                signed_id(value).map(IdInput)
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<IdInput, E> {
                uuid_id(value).map(IdInput)
            }
        }
        deserializer.deserialize_any(IdVisitor)
    }
}

/// The id a signed JSON integer names: a negative one names none (JSON's other
/// integers arrive as `u64`).
pub(super) fn signed_id<E: de::Error>(value: i64) -> Result<PointId, E> {
    u64::try_from(value)
        .map(PointId::Number)
        .map_err(|_| E::custom(format!("point id {value} is negative")))
}

/// The id a JSON string names: a UUID.
pub(super) fn uuid_id<E: de::Error>(value: &str) -> Result<PointId, E> {
    parse_uuid(value)
        .map(PointId::Uuid)
        .ok_or_else(|| E::custom(format!("point id {value:?} is not a valid UUID")))
}

/// Serializes a point id as Qdrant does: a number, or a hyphenated UUID string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdOutput(pub PointId);

impl Serialize for IdOutput {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            PointId::Number(value) => serializer.serialize_u64(value),
            PointId::Uuid(_) => serializer.serialize_str(&self.0.to_string()),
        }
    }
}
