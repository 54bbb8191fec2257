//! Qdrant's JSON request and response shapes, and their conversion to engine types.
//!
//! Vectors are deserialized straight into `Vec<f32>` (never through `serde_json::Value`:
//! a 10,000 × 768 batch would take ~250 MB as a `Value` tree), and payloads pass through
//! as raw JSON text, which is what the engine stores.

use std::fmt;

use sagitta_engine::point::parse_uuid;
use sagitta_engine::{Filter, Point, PointId, ScoredPoint};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};

pub mod config;
mod fields;
mod select;

pub use fields::NullOnly;
use fields::{refuse_value, unknown_field, NoMmr, NoOrderBy, NoPrefetch, NoShardKeys};
pub use select::{select_payload, PayloadOutput, PayloadSelector, WithPayload, WithVector};

/// The name of the unnamed default vector in Qdrant's API.
pub const DEFAULT_VECTOR_NAME: &str = "";

// ---------------------------------------------------------------------------------------
// Ids

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
                u64::try_from(value)
                    .map(|value| IdInput(PointId::Number(value)))
                    .map_err(|_| E::custom(format!("point id {value} is negative")))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<IdInput, E> {
                parse_uuid(value)
                    .map(|value| IdInput(PointId::Uuid(value)))
                    .ok_or_else(|| E::custom(format!("point id {value:?} is not a valid UUID")))
            }
        }
        deserializer.deserialize_any(IdVisitor)
    }
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

// ---------------------------------------------------------------------------------------
// Vectors

/// A vector field: a dense list, or a map of vector name to vector. Only the unnamed
/// vector (`""`) exists in SagittaDB collections; other names are recorded so the error
/// can name them.
#[derive(Clone, Debug, PartialEq)]
pub enum VectorInput {
    Dense(Vec<f32>),
    Named(Vec<(String, NamedVector)>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum NamedVector {
    Dense(Vec<f32>),
    /// A sparse (`{"indices","values"}`) or multi-vector value: not supported.
    Other,
}

struct DenseVisitor;

impl<'de> Visitor<'de> for DenseVisitor {
    type Value = Vec<f32>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of numbers")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<f32>, A::Error> {
        let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(value) = seq.next_element::<f32>()? {
            values.push(value);
        }
        Ok(values)
    }
}

impl<'de> Deserialize<'de> for NamedVector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<NamedVector, D::Error> {
        struct NamedVisitor;
        impl<'de> Visitor<'de> for NamedVisitor {
            type Value = NamedVector;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of numbers or a sparse vector")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<NamedVector, A::Error> {
                let values = DenseVisitor.visit_seq(seq)?;
                Ok(NamedVector::Dense(values))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NamedVector, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(NamedVector::Other)
            }
        }
        deserializer.deserialize_any(NamedVisitor)
    }
}

impl<'de> Deserialize<'de> for VectorInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<VectorInput, D::Error> {
        struct VectorVisitor;
        impl<'de> Visitor<'de> for VectorVisitor {
            type Value = VectorInput;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of numbers, or a map of vector name to vector")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<VectorInput, A::Error> {
                DenseVisitor.visit_seq(seq).map(VectorInput::Dense)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<VectorInput, A::Error> {
                let mut named = Vec::new();
                while let Some((name, vector)) = map.next_entry::<String, NamedVector>()? {
                    named.push((name, vector));
                }
                Ok(VectorInput::Named(named))
            }
        }
        deserializer.deserialize_any(VectorVisitor)
    }
}

impl VectorInput {
    /// The default vector, or an error naming `field` and what was wrong.
    pub fn into_default(self, field: &str) -> ApiResult<Vec<f32>> {
        match self {
            VectorInput::Dense(values) => Ok(values),
            VectorInput::Named(named) => {
                let mut found = None;
                for (name, vector) in named {
                    if name != DEFAULT_VECTOR_NAME {
                        return Err(unknown_vector_name(field, &name));
                    }
                    match vector {
                        NamedVector::Dense(values) => found = Some(values),
                        NamedVector::Other => {
                            return Err(ApiError::bad_request(format!(
                                "Wrong input: `{field}`: sparse and multi-vectors are not \
                                 supported; send a list of numbers"
                            )))
                        }
                    }
                }
                found.ok_or_else(|| {
                    ApiError::bad_request(format!("Wrong input: `{field}`: no vector given"))
                })
            }
        }
    }
}

pub fn unknown_vector_name(field: &str, name: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Wrong input: `{field}`: Not existing vector name error: {name:?}; collections \
         have one unnamed vector (name \"\")"
    ))
}

/// `vectors` of the batch form: a list of vectors, or a map of vector name to such a list.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchVectors(pub Vec<Vec<f32>>);

impl<'de> Deserialize<'de> for BatchVectors {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<BatchVectors, D::Error> {
        #[derive(Deserialize)]
        struct Dense(#[serde(deserialize_with = "dense")] Vec<f32>);
        fn dense<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<f32>, D::Error> {
            deserializer.deserialize_seq(DenseVisitor)
        }
        struct BatchVisitor;
        impl<'de> Visitor<'de> for BatchVisitor {
            type Value = BatchVectors;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of vectors, or a map of vector name to a list of vectors")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<BatchVectors, A::Error> {
                let mut rows = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                while let Some(Dense(row)) = seq.next_element::<Dense>()? {
                    rows.push(row);
                }
                Ok(BatchVectors(rows))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<BatchVectors, A::Error> {
                let mut rows = None;
                while let Some(name) = map.next_key::<String>()? {
                    if name != DEFAULT_VECTOR_NAME {
                        return Err(de::Error::custom(format!(
                            "Not existing vector name error: {name:?}; collections have one \
                             unnamed vector (name \"\")"
                        )));
                    }
                    let BatchVectors(value) = map.next_value()?;
                    rows = Some(value);
                }
                Ok(BatchVectors(rows.unwrap_or_default()))
            }
        }
        deserializer.deserialize_any(BatchVisitor)
    }
}

// ---------------------------------------------------------------------------------------
// Points in

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PointInput {
    pub id: IdInput,
    pub vector: VectorInput,
    #[serde(default)]
    pub payload: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchInput {
    pub ids: Vec<IdInput>,
    pub vectors: BatchVectors,
    #[serde(default)]
    pub payloads: Option<Vec<Option<Box<RawValue>>>>,
}

/// `PUT /collections/{c}/points`: the list form or the batch form.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpsertRequest {
    #[serde(default)]
    pub points: Option<Vec<PointInput>>,
    #[serde(default)]
    pub batch: Option<BatchInput>,
    #[serde(default)]
    pub shard_key: Option<NullOnly<NoShardKeys>>,
    /// Existing points are replaced only where this filter matches them.
    #[serde(default)]
    pub update_filter: Option<Value>,
    #[serde(default)]
    pub update_mode: Option<UpdateMode>,
}

/// `update_mode` of an upsert.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum UpdateMode {
    /// Insert new points, replace existing ones.
    #[default]
    Upsert,
    /// Insert new points; existing ones keep their state.
    InsertOnly,
    /// Replace existing points; new ones are not inserted.
    UpdateOnly,
}

/// Payload JSON text for the engine: `null` means none; anything but an object is refused
/// with the field named.
fn payload_text(raw: Option<Box<RawValue>>, field: &str) -> ApiResult<Option<String>> {
    let Some(raw) = raw else { return Ok(None) };
    let text = raw.get().trim();
    if text == "null" {
        return Ok(None);
    }
    if !text.starts_with('{') {
        return Err(ApiError::bad_request(format!(
            "Wrong input: `{field}`: payload must be a JSON object"
        )));
    }
    Ok(Some(text.to_string()))
}

impl UpsertRequest {
    /// The points, checked against `max_points`; errors name the point's position.
    pub fn into_points(self, max_points: usize) -> ApiResult<Vec<Point>> {
        let points = match (self.points, self.batch) {
            (Some(_), Some(_)) => {
                return Err(ApiError::bad_request(
                    "Wrong input: give either `points` or `batch`, not both",
                ))
            }
            (None, None) => {
                return Err(ApiError::bad_request(
                    "Wrong input: the body needs `points` (a list) or `batch`",
                ))
            }
            (Some(points), None) => {
                check_count("points", points.len(), max_points)?;
                points
                    .into_iter()
                    .enumerate()
                    .map(|(index, point)| {
                        Ok(Point {
                            id: point.id.0,
                            vector: point
                                .vector
                                .into_default(&format!("points[{index}].vector"))?,
                            payload: payload_text(
                                point.payload,
                                &format!("points[{index}].payload"),
                            )?,
                        })
                    })
                    .collect::<ApiResult<Vec<Point>>>()?
            }
            (None, Some(batch)) => {
                check_count("batch.ids", batch.ids.len(), max_points)?;
                let rows = batch.ids.len();
                if batch.vectors.0.len() != rows {
                    return Err(ApiError::bad_request(format!(
                        "Wrong input: `batch.vectors` has {} vectors for {rows} ids",
                        batch.vectors.0.len()
                    )));
                }
                let payloads = match batch.payloads {
                    Some(payloads) if payloads.len() != rows => {
                        return Err(ApiError::bad_request(format!(
                            "Wrong input: `batch.payloads` has {} entries for {rows} ids",
                            payloads.len()
                        )))
                    }
                    Some(payloads) => payloads,
                    None => vec![None; rows],
                };
                batch
                    .ids
                    .into_iter()
                    .zip(batch.vectors.0)
                    .zip(payloads)
                    .enumerate()
                    .map(|(index, ((id, vector), payload))| {
                        Ok(Point {
                            id: id.0,
                            vector,
                            payload: payload_text(payload, &format!("batch.payloads[{index}]"))?,
                        })
                    })
                    .collect::<ApiResult<Vec<Point>>>()?
            }
        };
        Ok(points)
    }
}

pub fn check_count(field: &str, count: usize, max: usize) -> ApiResult<()> {
    if count > max {
        return Err(ApiError::new(
            axum::http::StatusCode::PAYLOAD_TOO_LARGE,
            format!("`{field}` has {count} entries, over the limit of {max} per request"),
        ));
    }
    Ok(())
}

/// A filter as sent; parsed by the engine, which names the path of a bad condition.
pub fn parse_filter(value: Option<&Value>, field: &str) -> ApiResult<Option<Filter>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value) => Filter::parse(value, field)
            .map(Some)
            .map_err(|error| ApiError::bad_request(format!("Wrong input: {error}"))),
    }
}

// ---------------------------------------------------------------------------------------
// Points out

/// `ScoredPoint`: `version` is required by qdrant-client's model. SagittaDB keeps no
/// per-point version, so it is always 0.
#[derive(Serialize)]
pub struct ScoredPointOutput {
    pub id: IdOutput,
    pub version: u64,
    pub score: f32,
    pub payload: Option<PayloadOutput>,
    pub vector: Option<Vec<f32>>,
}

/// `Record` (scroll, retrieve).
#[derive(Serialize)]
pub struct RecordOutput {
    pub id: IdOutput,
    pub payload: Option<PayloadOutput>,
    pub vector: Option<Vec<f32>>,
}

pub fn scored_output(
    hit: ScoredPoint,
    with_payload: &WithPayload,
    with_vector: bool,
) -> ScoredPointOutput {
    ScoredPointOutput {
        id: IdOutput(hit.id),
        version: 0,
        score: hit.score,
        payload: select_payload(hit.payload, with_payload),
        vector: with_vector.then_some(hit.vector),
    }
}

pub fn record_output(point: Point, with_payload: &WithPayload, with_vector: bool) -> RecordOutput {
    RecordOutput {
        id: IdOutput(point.id),
        payload: select_payload(point.payload, with_payload),
        vector: with_vector.then_some(point.vector),
    }
}

// ---------------------------------------------------------------------------------------
// Queries

/// `query` of `POST /points/query`.
#[derive(Clone, Debug, PartialEq)]
pub enum QueryInput {
    Vector(Vec<f32>),
    /// Search with a stored point's vector (the point itself is left out of the results).
    Point(PointId),
    Named(Vec<(String, NamedVector)>),
    /// A query kind SagittaDB does not serve (`recommend`, `fusion`, `discover`, ...).
    Unsupported(String),
}

impl<'de> Deserialize<'de> for QueryInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<QueryInput, D::Error> {
        struct QueryVisitor;
        impl<'de> Visitor<'de> for QueryVisitor {
            type Value = QueryInput;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a vector, a point id, or {\"nearest\": vector or point id}")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<QueryInput, A::Error> {
                DenseVisitor.visit_seq(seq).map(QueryInput::Vector)
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<QueryInput, E> {
                Ok(QueryInput::Point(PointId::Number(value)))
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<QueryInput, E> {
                signed_id(value).map(QueryInput::Point)
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<QueryInput, E> {
                parse_uuid(value)
                    .map(|uuid| QueryInput::Point(PointId::Uuid(uuid)))
                    .ok_or_else(|| E::custom(format!("point id {value:?} is not a valid UUID")))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<QueryInput, A::Error> {
                let mut result = None;
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "nearest" => result = Some(map.next_value::<NearestInput>()?.0),
                        "mmr" => {
                            map.next_value::<Option<NullOnly<NoMmr>>>()?;
                        }
                        _ if QUERY_KINDS.contains(&key.as_str()) => {
                            return Err(refuse_value(
                                &mut map,
                                format!(
                                    "{key:?} queries are not supported; use \
                                     {{\"nearest\": vector or point id}}"
                                ),
                            ))
                        }
                        _ => {
                            return Err(refuse_value(
                                &mut map,
                                unknown_field(&key, &["nearest", "mmr"]),
                            ))
                        }
                    }
                }
                result.ok_or_else(|| de::Error::custom("the query object needs `nearest`"))
            }
        }
        deserializer.deserialize_any(QueryVisitor)
    }
}

/// The query kinds of Qdrant's `query` object besides `nearest`.
const QUERY_KINDS: &[&str] = &[
    "recommend",
    "discover",
    "context",
    "order_by",
    "fusion",
    "rrf",
    "formula",
    "sample",
    "relevance_feedback",
];

fn signed_id<E: de::Error>(value: i64) -> Result<PointId, E> {
    u64::try_from(value)
        .map(PointId::Number)
        .map_err(|_| E::custom(format!("point id {value} is negative")))
}

/// The value of `{"nearest": ..}`: a vector, a named map, a sparse vector or a point id.
struct NearestInput(QueryInput);

impl<'de> Deserialize<'de> for NearestInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<NearestInput, D::Error> {
        struct NearestVisitor;
        impl<'de> Visitor<'de> for NearestVisitor {
            type Value = NearestInput;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a vector or a point id")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<NearestInput, A::Error> {
                DenseVisitor
                    .visit_seq(seq)
                    .map(|v| NearestInput(QueryInput::Vector(v)))
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<NearestInput, E> {
                Ok(NearestInput(QueryInput::Point(PointId::Number(value))))
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<NearestInput, E> {
                signed_id(value).map(|id| NearestInput(QueryInput::Point(id)))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<NearestInput, E> {
                parse_uuid(value)
                    .map(|uuid| NearestInput(QueryInput::Point(PointId::Uuid(uuid))))
                    .ok_or_else(|| E::custom(format!("point id {value:?} is not a valid UUID")))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NearestInput, A::Error> {
                let mut named = Vec::new();
                let mut sparse = false;
                while let Some(key) = map.next_key::<String>()? {
                    if key == "indices" || key == "values" {
                        map.next_value::<IgnoredAny>()?;
                        sparse = true;
                    } else {
                        named.push((key, map.next_value::<NamedVector>()?));
                    }
                }
                if sparse {
                    return Ok(NearestInput(QueryInput::Unsupported(
                        "nearest (sparse vector)".to_string(),
                    )));
                }
                Ok(NearestInput(QueryInput::Named(named)))
            }
        }
        deserializer.deserialize_any(NearestVisitor)
    }
}

/// `params` of a query or search. `hnsw_ef` and `exact` choose the strategy; the rest
/// are accepted as the hints they are in Qdrant: every search re-scores its SQ8
/// candidates on f32 (`quantization`), searches every segment, indexed or not
/// (`indexed_only` allows that), and checks filters inside the graph walk (`acorn`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchParamsInput {
    pub hnsw_ef: Option<usize>,
    pub exact: Option<bool>,
    pub quantization: Option<QuantizationSearchInput>,
    pub indexed_only: Option<bool>,
    pub acorn: Option<AcornInput>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QuantizationSearchInput {
    pub ignore: Option<bool>,
    pub rescore: Option<bool>,
    pub oversampling: Option<f64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AcornInput {
    pub enable: Option<bool>,
    pub max_selectivity: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct QueryRequest {
    pub shard_key: Option<NullOnly<NoShardKeys>>,
    pub prefetch: Option<NullOnly<NoPrefetch>>,
    pub query: Option<QueryInput>,
    pub using: Option<String>,
    pub filter: Option<Value>,
    pub params: Option<SearchParamsInput>,
    pub limit: Option<usize>,
    pub offset: Option<usize>,
    pub score_threshold: Option<f32>,
    pub with_payload: Option<WithPayload>,
    pub with_vector: Option<WithVector>,
    pub lookup_from: Option<LookupLocation>,
}

/// `lookup_from`: the collection (and vector) a query by point id takes its vector from.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LookupLocation {
    pub collection: String,
    #[serde(default)]
    pub vector: Option<String>,
    #[serde(default)]
    pub shard_key: Option<NullOnly<NoShardKeys>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryBatchRequest {
    pub searches: Vec<QueryRequest>,
}

/// `vector` of the pre-1.16 `POST /points/search`: a list, or `{"name", "vector"}`.
pub enum SearchVectorInput {
    Dense(Vec<f32>),
    Named { name: String, vector: Vec<f32> },
}

impl<'de> Deserialize<'de> for SearchVectorInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<SearchVectorInput, D::Error> {
        struct SearchVectorVisitor;
        impl<'de> Visitor<'de> for SearchVectorVisitor {
            type Value = SearchVectorInput;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of numbers, or {\"name\": .., \"vector\": [..]}")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<SearchVectorInput, A::Error> {
                DenseVisitor.visit_seq(seq).map(SearchVectorInput::Dense)
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<SearchVectorInput, A::Error> {
                let (mut name, mut vector) = (None, None);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "name" => name = Some(map.next_value::<String>()?),
                        "vector" => match map.next_value::<NamedVector>()? {
                            NamedVector::Dense(values) => vector = Some(values),
                            NamedVector::Other => {
                                return Err(de::Error::custom(
                                    "sparse vectors are not supported; send a list of numbers",
                                ))
                            }
                        },
                        _ => {
                            return Err(refuse_value(
                                &mut map,
                                unknown_field(&key, &["name", "vector"]),
                            ))
                        }
                    }
                }
                Ok(SearchVectorInput::Named {
                    name: name.ok_or_else(|| de::Error::missing_field("name"))?,
                    vector: vector.ok_or_else(|| de::Error::missing_field("vector"))?,
                })
            }
        }
        deserializer.deserialize_any(SearchVectorVisitor)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchRequestInput {
    #[serde(default)]
    pub shard_key: Option<NullOnly<NoShardKeys>>,
    pub vector: SearchVectorInput,
    #[serde(default)]
    pub filter: Option<Value>,
    #[serde(default)]
    pub params: Option<SearchParamsInput>,
    pub limit: usize,
    #[serde(default)]
    pub offset: Option<usize>,
    #[serde(default)]
    pub score_threshold: Option<f32>,
    #[serde(default)]
    pub with_payload: Option<WithPayload>,
    #[serde(default)]
    pub with_vector: Option<WithVector>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchBatchRequest {
    pub searches: Vec<SearchRequestInput>,
}

// ---------------------------------------------------------------------------------------
// Other point requests

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

/// `UpdateResult`.
#[derive(Serialize)]
pub struct UpdateResult {
    pub operation_id: u64,
    pub status: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::parse;

    #[test]
    fn both_upsert_forms_and_both_id_kinds() {
        let list: UpsertRequest = parse(
            br#"{"points":[{"id":1,"vector":[1,2]},
                {"id":"5c56c793-69f3-4fbf-87e6-c4bf54c28c26","vector":{"":[3,4]},
                 "payload":{"a":1}}]}"#,
        )
        .unwrap();
        let points = list.into_points(10).unwrap();
        assert_eq!(points[0].id, PointId::Number(1));
        assert_eq!(points[1].vector, vec![3.0, 4.0]);
        assert!(matches!(points[1].id, PointId::Uuid(_)));
        assert_eq!(points[1].payload.as_deref(), Some(r#"{"a":1}"#));
        let batch: UpsertRequest =
            parse(br#"{"batch":{"ids":[1,2],"vectors":[[1,2],[3,4]],"payloads":[{"a":1},null]}}"#)
                .unwrap();
        let points = batch.into_points(10).unwrap();
        assert_eq!(points.len(), 2);
        assert_eq!(points[1].payload, None);
    }

    #[test]
    fn bad_points_name_their_position() {
        let named: UpsertRequest =
            parse(br#"{"points":[{"id":1,"vector":[1]},{"id":2,"vector":{"text":[1]}}]}"#).unwrap();
        let error = named.into_points(10).unwrap_err();
        assert!(
            error.message.contains("points[1].vector"),
            "{}",
            error.message
        );
        let error = parse::<UpsertRequest>(br#"{"points":[{"id":-1,"vector":[1]}]}"#)
            .err()
            .unwrap();
        assert!(error.message.contains("points[0].id"), "{}", error.message);
        let error = parse::<UpsertRequest>(br#"{"points":[{"id":1,"vector":[1,"x"]}]}"#)
            .err()
            .unwrap();
        assert!(
            error.message.contains("points[0].vector"),
            "{}",
            error.message
        );
        let many: UpsertRequest =
            parse(br#"{"batch":{"ids":[1,2,3],"vectors":[[1],[2],[3]]}}"#).unwrap();
        assert_eq!(many.into_points(2).unwrap_err().status.as_u16(), 413);
    }

    #[test]
    fn every_query_form() {
        let raw: QueryRequest = parse(br#"{"query":[1,2],"limit":3}"#).unwrap();
        assert_eq!(raw.query, Some(QueryInput::Vector(vec![1.0, 2.0])));
        let nearest: QueryRequest = parse(br#"{"query":{"nearest":[1,2]},"using":""}"#).unwrap();
        assert_eq!(nearest.query, Some(QueryInput::Vector(vec![1.0, 2.0])));
        let by_id: QueryRequest = parse(br#"{"query":{"nearest":7}}"#).unwrap();
        assert_eq!(by_id.query, Some(QueryInput::Point(PointId::Number(7))));
        let sparse: QueryRequest =
            parse(br#"{"query":{"nearest":{"indices":[1],"values":[0.5]}}}"#).unwrap();
        assert!(matches!(sparse.query, Some(QueryInput::Unsupported(_))));
        let error = parse::<QueryRequest>(br#"{"query":{"fusion":"rrf"}}"#)
            .err()
            .unwrap();
        assert!(error.message.contains("query.fusion"), "{}", error.message);
        let error = parse::<QueryRequest>(br#"{"query":{"nearest":[1],"foo":1}}"#)
            .err()
            .unwrap();
        assert!(error.message.contains("query.foo"), "{}", error.message);
    }

    #[test]
    fn payload_selectors() {
        let stored = Some(r#"{"a":1,"b":{"c":2,"d":3}}"#.to_string());
        let render = |selector: &WithPayload| {
            serde_json::to_string(&select_payload(stored.clone(), selector)).unwrap()
        };
        assert_eq!(render(&WithPayload::Flag(false)), "null");
        assert_eq!(
            render(&WithPayload::Flag(true)),
            r#"{"a":1,"b":{"c":2,"d":3}}"#
        );
        assert_eq!(
            render(&WithPayload::Keys(vec!["b.c".to_string()])),
            r#"{"b":{"c":2}}"#
        );
        assert_eq!(
            render(&WithPayload::Selector(PayloadSelector::Exclude(vec![
                "b.d".to_string(),
                "a".to_string()
            ]))),
            r#"{"b":{"c":2}}"#
        );
    }
}
