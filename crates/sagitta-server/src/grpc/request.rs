//! gRPC request messages as the REST API's JSON bodies: the gRPC services answer through
//! the same handlers (so the same checks, limits and errors), and these functions are the
//! one place the two shapes meet. A message this server cannot express in REST terms
//! (an inference object, an unknown condition kind) is refused here, naming the field.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Map, Value};
use tonic::Status;

use super::api;
use super::api::condition::ConditionOneOf;
use super::api::r#match::MatchValue;

pub type Json = Result<Value, Status>;

/// A JSON object built field by field, leaving out the fields a message does not set.
#[derive(Default)]
pub struct Obj(Map<String, Value>);

impl Obj {
    pub fn new() -> Obj {
        Obj::default()
    }

    pub fn put(mut self, key: &str, value: impl Into<Value>) -> Obj {
        self.0.insert(key.to_string(), value.into());
        self
    }

    pub fn opt(self, key: &str, value: Option<impl Into<Value>>) -> Obj {
        match value {
            Some(value) => self.put(key, value),
            None => self,
        }
    }

    /// `key` set to `value` converted by `convert` when the message has it.
    pub fn with<T>(
        self,
        key: &str,
        value: Option<&T>,
        convert: impl Fn(&T) -> Json,
    ) -> Result<Obj, Status> {
        Ok(match value {
            Some(value) => self.put(key, convert(value)?),
            None => self,
        })
    }

    /// `key` set to the list of `values` converted, left out when there are none.
    pub fn list<T>(
        self,
        key: &str,
        values: &[T],
        convert: impl Fn(&T) -> Json,
    ) -> Result<Obj, Status> {
        if values.is_empty() {
            return Ok(self);
        }
        let values = values.iter().map(convert).collect::<Result<Vec<_>, _>>()?;
        Ok(self.put(key, values))
    }

    pub fn done(self) -> Value {
        Value::Object(self.0)
    }
}

pub fn invalid(field: &str, reason: &str) -> Status {
    Status::invalid_argument(format!("{field}: {reason}"))
}

/// A JSON number for `value`, refused when it is not finite (JSON has no NaN).
fn number(value: f64, field: &str) -> Json {
    serde_json::Number::from_f64(value)
        .map(Value::Number)
        .ok_or_else(|| invalid(field, "not a finite number"))
}

pub fn value(given: &api::Value) -> Json {
    use api::value::Kind;
    Ok(match &given.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::DoubleValue(x)) => number(*x, "payload")?,
        Some(Kind::IntegerValue(x)) => json!(x),
        Some(Kind::StringValue(x)) => json!(x),
        Some(Kind::BoolValue(x)) => json!(x),
        Some(Kind::StructValue(object)) => payload(&object.fields)?,
        Some(Kind::ListValue(list)) => {
            Value::Array(list.values.iter().map(value).collect::<Result<_, _>>()?)
        }
    })
}

/// A payload (`map<string, Value>`) as a JSON object.
pub fn payload(fields: &std::collections::HashMap<String, api::Value>) -> Json {
    let mut object = Map::new();
    for (key, field) in fields {
        object.insert(key.clone(), value(field)?);
    }
    Ok(Value::Object(object))
}

pub fn point_id(id: &api::PointId) -> Json {
    use api::point_id::PointIdOptions;
    match &id.point_id_options {
        Some(PointIdOptions::Num(n)) => Ok(json!(n)),
        Some(PointIdOptions::Uuid(uuid)) => Ok(json!(uuid)),
        None => Err(invalid("id", "a point id sets neither num nor uuid")),
    }
}

pub fn point_ids(ids: &[api::PointId]) -> Json {
    Ok(Value::Array(
        ids.iter().map(point_id).collect::<Result<_, _>>()?,
    ))
}

pub fn filter(filter: &api::Filter) -> Json {
    let obj = Obj::new()
        .list("should", &filter.should, condition)?
        .list("must", &filter.must, condition)?
        .list("must_not", &filter.must_not, condition)?;
    Ok(match &filter.min_should {
        Some(min) => obj.put(
            "min_should",
            Obj::new()
                .put(
                    "conditions",
                    Value::Array(
                        min.conditions
                            .iter()
                            .map(condition)
                            .collect::<Result<_, _>>()?,
                    ),
                )
                .put("min_count", min.min_count)
                .done(),
        ),
        None => obj,
    }
    .done())
}

fn condition(condition: &api::Condition) -> Json {
    Ok(match &condition.condition_one_of {
        Some(ConditionOneOf::Field(field)) => field_condition(field)?,
        Some(ConditionOneOf::IsEmpty(c)) => json!({"is_empty": {"key": c.key}}),
        Some(ConditionOneOf::IsNull(c)) => json!({"is_null": {"key": c.key}}),
        Some(ConditionOneOf::HasId(c)) => json!({"has_id": point_ids(&c.has_id)?}),
        Some(ConditionOneOf::Filter(inner)) => filter(inner)?,
        Some(ConditionOneOf::Nested(nested)) => {
            let inner = nested.filter.as_ref().map_or(Ok(json!({})), filter)?;
            json!({"nested": {"key": nested.key, "filter": inner}})
        }
        Some(ConditionOneOf::HasVector(c)) => json!({"has_vector": c.has_vector}),
        None => {
            return Err(invalid(
                "filter",
                "a condition of no kind this server knows (field, is_empty, is_null, has_id, \
                 filter, nested, has_vector)",
            ))
        }
    })
}

fn field_condition(field: &api::FieldCondition) -> Json {
    let geo = |point: &api::GeoPoint| Ok(json!({"lon": point.lon, "lat": point.lat}));
    let line = |line: &api::GeoLineString| {
        Ok(json!({"points": line.points.iter().map(geo).collect::<Result<Vec<_>, Status>>()?}))
    };
    Ok(Obj::new()
        .put("key", field.key.clone())
        .with("match", field.r#match.as_ref(), match_value)?
        .with("range", field.range.as_ref(), |range| {
            Ok(Obj::new()
                .opt("lt", range.lt)
                .opt("gt", range.gt)
                .opt("gte", range.gte)
                .opt("lte", range.lte)
                .done())
        })?
        .with("range", field.datetime_range.as_ref(), |range| {
            Ok(Obj::new()
                .opt("lt", range.lt.as_ref().map(timestamp))
                .opt("gt", range.gt.as_ref().map(timestamp))
                .opt("gte", range.gte.as_ref().map(timestamp))
                .opt("lte", range.lte.as_ref().map(timestamp))
                .done())
        })?
        .with("geo_bounding_box", field.geo_bounding_box.as_ref(), |b| {
            Ok(json!({
                "top_left": b.top_left.as_ref().map(geo).transpose()?,
                "bottom_right": b.bottom_right.as_ref().map(geo).transpose()?,
            }))
        })?
        .with("geo_radius", field.geo_radius.as_ref(), |r| {
            Ok(json!({"center": r.center.as_ref().map(geo).transpose()?, "radius": r.radius}))
        })?
        .with("geo_polygon", field.geo_polygon.as_ref(), |p| {
            Ok(json!({
                "exterior": p.exterior.as_ref().map(line).transpose()?,
                "interiors": p.interiors.iter().map(line).collect::<Result<Vec<_>, Status>>()?,
            }))
        })?
        .with("values_count", field.values_count.as_ref(), |c| {
            Ok(Obj::new()
                .opt("lt", c.lt)
                .opt("gt", c.gt)
                .opt("gte", c.gte)
                .opt("lte", c.lte)
                .done())
        })?
        .opt("is_empty", field.is_empty)
        .opt("is_null", field.is_null)
        .done())
}

fn match_value(matched: &api::Match) -> Json {
    Ok(match &matched.match_value {
        Some(MatchValue::Keyword(x)) => json!({"value": x}),
        Some(MatchValue::Integer(x)) => json!({"value": x}),
        Some(MatchValue::Boolean(x)) => json!({"value": x}),
        Some(MatchValue::Text(x)) => json!({"text": x}),
        Some(MatchValue::Phrase(x)) => json!({"phrase": x}),
        Some(MatchValue::TextAny(x)) => json!({"text_any": x}),
        Some(MatchValue::Keywords(x)) => json!({"any": x.strings}),
        Some(MatchValue::Integers(x)) => json!({"any": x.integers}),
        Some(MatchValue::ExceptKeywords(x)) => json!({"except": x.strings}),
        Some(MatchValue::ExceptIntegers(x)) => json!({"except": x.integers}),
        None => return Err(invalid("match", "a match of no kind this server knows")),
    })
}

/// A protobuf timestamp as RFC 3339 (UTC), as the REST API takes datetimes.
pub fn timestamp(at: &prost_types::Timestamp) -> String {
    let days = at.seconds.div_euclid(86_400);
    let second = at.seconds.rem_euclid(86_400);
    // days since 1970-01-01 to a civil date (Howard Hinnant's algorithm)
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:09}Z",
        second / 3_600,
        second / 60 % 60,
        second % 60,
        at.nanos.max(0)
    )
}

/// A vector as the REST body carries it, borrowed from the message: serde_json writes its
/// floats as f32 (their shortest decimal form, which parses back to the same f32), so a
/// batch of points costs no `Value` per number and half the digits of an f64.
#[derive(Serialize)]
#[serde(untagged)]
pub enum VectorRef<'a> {
    Dense(&'a [f32]),
    Sparse {
        indices: &'a [u32],
        values: &'a [f32],
    },
    Multi(Vec<&'a [f32]>),
    Named(BTreeMap<&'a str, VectorRef<'a>>),
}

/// A vector of a point or a query: dense, sparse or multi-dense (the deprecated `data`,
/// `indices` and `vectors_count` fields read as Qdrant reads them).
pub fn vector_ref(vector: &api::Vector) -> Result<VectorRef<'_>, Status> {
    use api::vector::Vector;
    match &vector.vector {
        Some(Vector::Dense(dense)) => Ok(VectorRef::Dense(&dense.data)),
        Some(Vector::Sparse(sparse)) => Ok(VectorRef::Sparse {
            indices: &sparse.indices,
            values: &sparse.values,
        }),
        Some(Vector::MultiDense(multi)) => Ok(VectorRef::Multi(
            multi
                .vectors
                .iter()
                .map(|row| row.data.as_slice())
                .collect(),
        )),
        Some(Vector::Document(_) | Vector::Image(_) | Vector::Object(_)) => Err(inference()),
        None => match (&vector.indices, vector.vectors_count) {
            (Some(indices), _) => Ok(VectorRef::Sparse {
                indices: &indices.data,
                values: &vector.data,
            }),
            (None, Some(count)) if count > 1 => {
                let count = count as usize;
                if !vector.data.len().is_multiple_of(count) {
                    return Err(invalid(
                        "vector",
                        &format!(
                            "{} numbers do not split into {count} vectors",
                            vector.data.len()
                        ),
                    ));
                }
                let rows = vector.data.chunks(vector.data.len() / count).collect();
                Ok(VectorRef::Multi(rows))
            }
            _ => Ok(VectorRef::Dense(&vector.data)),
        },
    }
}

/// [`vector_ref`] as a JSON value.
pub fn vector(vector: &api::Vector) -> Json {
    to_json(&vector_ref(vector)?)
}

fn to_json(value: &impl Serialize) -> Json {
    serde_json::to_value(value).map_err(|error| Status::internal(error.to_string()))
}

fn multi_dense(multi: &api::MultiDenseVector) -> Value {
    Value::Array(multi.vectors.iter().map(|row| json!(row.data)).collect())
}

fn inference() -> Status {
    Status::invalid_argument(
        "vector: documents, images and inference objects need an inference service, which \
         this server does not run; send vectors",
    )
}

/// A point's vectors: one unnamed vector, or a map of named ones.
pub fn vectors_ref(vectors: &api::Vectors) -> Result<VectorRef<'_>, Status> {
    use api::vectors::VectorsOptions;
    match &vectors.vectors_options {
        Some(VectorsOptions::Vector(one)) => vector_ref(one),
        Some(VectorsOptions::Vectors(named)) => Ok(VectorRef::Named(
            named
                .vectors
                .iter()
                .map(|(name, one)| Ok((name.as_str(), vector_ref(one)?)))
                .collect::<Result<_, Status>>()?,
        )),
        None => Err(invalid("vectors", "sets neither vector nor vectors")),
    }
}

/// [`vectors_ref`] as a JSON value.
pub fn vectors(vectors: &api::Vectors) -> Json {
    to_json(&vectors_ref(vectors)?)
}

/// A point of an upsert as the REST body carries it.
#[derive(Serialize)]
pub struct PointRef<'a> {
    id: Value,
    vector: VectorRef<'a>,
    payload: Value,
}

pub fn point_ref(point: &api::PointStruct) -> Result<PointRef<'_>, Status> {
    let id = point
        .id
        .as_ref()
        .ok_or_else(|| invalid("points.id", "missing"))?;
    Ok(PointRef {
        id: point_id(id)?,
        vector: match &point.vectors {
            Some(given) => vectors_ref(given)?,
            None => VectorRef::Named(BTreeMap::new()),
        },
        payload: payload(&point.payload)?,
    })
}

/// [`point_ref`] as a JSON value.
pub fn point(point: &api::PointStruct) -> Json {
    to_json(&point_ref(point)?)
}

/// A query's vector input: a point id, or a dense, sparse or multi-dense vector.
pub fn vector_input(input: &api::VectorInput) -> Json {
    use api::vector_input::Variant;
    match &input.variant {
        Some(Variant::Id(id)) => point_id(id),
        Some(Variant::Dense(dense)) => Ok(json!(dense.data)),
        Some(Variant::Sparse(sparse)) => {
            Ok(json!({"indices": sparse.indices, "values": sparse.values}))
        }
        Some(Variant::MultiDense(multi)) => Ok(multi_dense(multi)),
        Some(Variant::Document(_) | Variant::Image(_) | Variant::Object(_)) => Err(inference()),
        None => Err(invalid("query", "a vector input of no kind")),
    }
}

pub fn with_payload(selector: &api::WithPayloadSelector) -> Option<Value> {
    use api::with_payload_selector::SelectorOptions;
    match &selector.selector_options {
        Some(SelectorOptions::Enable(on)) => Some(json!(on)),
        Some(SelectorOptions::Include(include)) => Some(json!({"include": include.fields})),
        Some(SelectorOptions::Exclude(exclude)) => Some(json!({"exclude": exclude.fields})),
        None => None,
    }
}

pub fn with_vectors(selector: &api::WithVectorsSelector) -> Option<Value> {
    use api::with_vectors_selector::SelectorOptions;
    match &selector.selector_options {
        Some(SelectorOptions::Enable(on)) => Some(json!(on)),
        Some(SelectorOptions::Include(include)) => Some(json!(include.names)),
        None => None,
    }
}

/// `with_payload` and `with_vector` of a reading request.
pub fn selectors(
    obj: Obj,
    payload: Option<&api::WithPayloadSelector>,
    vectors: Option<&api::WithVectorsSelector>,
) -> Obj {
    obj.opt("with_payload", payload.and_then(with_payload))
        .opt("with_vector", vectors.and_then(with_vectors))
}

pub fn search_params(params: &api::SearchParams) -> Json {
    Ok(Obj::new()
        .opt("hnsw_ef", params.hnsw_ef)
        .opt("exact", params.exact)
        .opt("indexed_only", params.indexed_only)
        .with("quantization", params.quantization.as_ref(), |q| {
            Ok(Obj::new()
                .opt("ignore", q.ignore)
                .opt("rescore", q.rescore)
                .opt("oversampling", q.oversampling)
                .done())
        })?
        .with("acorn", params.acorn.as_ref(), |a| {
            Ok(Obj::new()
                .opt("enable", a.enable)
                .opt("max_selectivity", a.max_selectivity)
                .done())
        })?
        .done())
}

/// The points a write addresses: `{"points": [ids]}` or `{"filter": ..}`.
pub fn selector(obj: Obj, selector: Option<&api::PointsSelector>) -> Result<Obj, Status> {
    use api::points_selector::PointsSelectorOneOf;
    match selector.and_then(|s| s.points_selector_one_of.as_ref()) {
        Some(PointsSelectorOneOf::Points(list)) => Ok(obj.put("points", point_ids(&list.ids)?)),
        Some(PointsSelectorOneOf::Filter(f)) => Ok(obj.put("filter", filter(f)?)),
        None => Err(invalid(
            "points_selector",
            "names neither points nor a filter",
        )),
    }
}

pub fn lookup(location: &api::LookupLocation) -> Json {
    Ok(Obj::new()
        .put("collection", location.collection_name.clone())
        .opt("vector", location.vector_name.clone())
        .done())
}

pub fn order_by(order: &api::OrderBy) -> Json {
    use api::start_from::Value as Start;
    let direction = order.direction.map(|d| match api::Direction::try_from(d) {
        Ok(api::Direction::Desc) => "desc",
        _ => "asc",
    });
    let start = match order.start_from.as_ref().and_then(|s| s.value.as_ref()) {
        Some(Start::Float(x)) => Some(number(*x, "order_by.start_from")?),
        Some(Start::Integer(x)) => Some(json!(x)),
        Some(Start::Timestamp(at)) => Some(json!(timestamp(at))),
        Some(Start::Datetime(at)) => Some(json!(at)),
        None => None,
    };
    Ok(Obj::new()
        .put("key", order.key.clone())
        .opt("direction", direction)
        .opt("start_from", start)
        .done())
}

/// A `Filter` field that proto3 always carries: an empty one means no filter.
pub fn some_filter(given: Option<&api::Filter>) -> Option<&api::Filter> {
    given.filter(|f| {
        !(f.must.is_empty()
            && f.should.is_empty()
            && f.must_not.is_empty()
            && f.min_should.is_none())
    })
}
