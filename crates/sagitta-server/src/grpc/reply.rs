//! REST answers (JSON) as gRPC reply messages: points, hits, collection info, snapshots.
//! A REST answer of an unexpected shape is an internal error naming what was missing.

use std::collections::HashMap;

use serde_json::Value;
use tonic::Status;

use super::api;

pub type Reply<T> = Result<T, Status>;

fn shape(what: &str) -> Status {
    Status::internal(format!("the answer's {what} is not of the expected shape"))
}

pub fn value(json: &Value) -> api::Value {
    use api::value::Kind;
    let kind = match json {
        Value::Null => Kind::NullValue(api::NullValue::NullValue as i32),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Kind::IntegerValue(i),
            None => Kind::DoubleValue(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(api::ListValue {
            values: items.iter().map(value).collect(),
        }),
        Value::Object(_) => Kind::StructValue(api::Struct {
            fields: payload(json),
        }),
    };
    api::Value { kind: Some(kind) }
}

/// A payload object as `map<string, Value>` (empty for null).
pub fn payload(json: &Value) -> HashMap<String, api::Value> {
    json.as_object()
        .map(|object| object.iter().map(|(k, v)| (k.clone(), value(v))).collect())
        .unwrap_or_default()
}

pub fn point_id(json: &Value) -> Reply<api::PointId> {
    use api::point_id::PointIdOptions;
    let id = match json {
        Value::Number(n) => PointIdOptions::Num(n.as_u64().ok_or_else(|| shape("point id"))?),
        Value::String(s) => PointIdOptions::Uuid(s.clone()),
        _ => return Err(shape("point id")),
    };
    Ok(api::PointId {
        point_id_options: Some(id),
    })
}

fn floats(json: &Value) -> Reply<Vec<f32>> {
    json.as_array()
        .ok_or_else(|| shape("vector"))?
        .iter()
        .map(|x| x.as_f64().map(|x| x as f32).ok_or_else(|| shape("vector")))
        .collect()
}

/// One stored vector: dense (`[..]`), multi-dense (`[[..], ..]`) or sparse
/// (`{"indices", "values"}`).
fn vector_output(json: &Value) -> Reply<api::VectorOutput> {
    use api::vector_output::Vector;
    let vector = match json {
        Value::Object(sparse) => {
            let indices = sparse
                .get("indices")
                .and_then(Value::as_array)
                .ok_or_else(|| shape("sparse vector"))?
                .iter()
                .map(|i| {
                    i.as_u64()
                        .and_then(|i| u32::try_from(i).ok())
                        .ok_or_else(|| shape("sparse vector"))
                })
                .collect::<Reply<Vec<u32>>>()?;
            let values = floats(sparse.get("values").unwrap_or(&Value::Null))?;
            Vector::Sparse(api::SparseVector { values, indices })
        }
        Value::Array(rows) if rows.first().is_some_and(Value::is_array) => {
            let vectors = rows
                .iter()
                .map(|row| Ok(api::DenseVector { data: floats(row)? }))
                .collect::<Reply<Vec<_>>>()?;
            Vector::MultiDense(api::MultiDenseVector { vectors })
        }
        _ => Vector::Dense(api::DenseVector {
            data: floats(json)?,
        }),
    };
    Ok(api::VectorOutput {
        vector: Some(vector),
        ..api::VectorOutput::default()
    })
}

/// A point's `vector` field of a REST answer (absent or null: none).
pub fn vectors(json: Option<&Value>) -> Reply<Option<api::VectorsOutput>> {
    use api::vectors_output::VectorsOptions;
    let options = match json {
        None | Some(Value::Null) => return Ok(None),
        // named vectors (a sparse vector alone is an object with indices and values)
        Some(Value::Object(named))
            if !(named.contains_key("indices") && named.contains_key("values")) =>
        {
            let vectors = named
                .iter()
                .map(|(name, one)| Ok((name.clone(), vector_output(one)?)))
                .collect::<Reply<HashMap<_, _>>>()?;
            VectorsOptions::Vectors(api::NamedVectorsOutput { vectors })
        }
        Some(one) => VectorsOptions::Vector(vector_output(one)?),
    };
    Ok(Some(api::VectorsOutput {
        vectors_options: Some(options),
    }))
}

fn order_value(json: Option<&Value>) -> Option<api::OrderValue> {
    use api::order_value::Variant;
    let variant = match json? {
        Value::Number(n) => match n.as_i64() {
            Some(i) => Variant::Int(i),
            None => Variant::Float(n.as_f64()?),
        },
        _ => return None,
    };
    Some(api::OrderValue {
        variant: Some(variant),
    })
}

pub fn scored_point(json: &Value) -> Reply<api::ScoredPoint> {
    Ok(api::ScoredPoint {
        id: Some(point_id(&json["id"])?),
        payload: payload(&json["payload"]),
        score: json["score"].as_f64().ok_or_else(|| shape("score"))? as f32,
        version: json["version"].as_u64().unwrap_or(0),
        vectors: vectors(json.get("vector"))?,
        shard_key: None,
        order_value: order_value(json.get("order_value")),
    })
}

pub fn scored_points(json: &Value) -> Reply<Vec<api::ScoredPoint>> {
    // a query answers {"points": [..]}, a search a plain list
    let list = json.get("points").unwrap_or(json);
    list.as_array()
        .ok_or_else(|| shape("hits"))?
        .iter()
        .map(scored_point)
        .collect()
}

pub fn retrieved_point(json: &Value) -> Reply<api::RetrievedPoint> {
    Ok(api::RetrievedPoint {
        id: Some(point_id(&json["id"])?),
        payload: payload(&json["payload"]),
        vectors: vectors(json.get("vector"))?,
        shard_key: None,
        order_value: order_value(json.get("order_value")),
    })
}

pub fn retrieved_points(json: &Value) -> Reply<Vec<api::RetrievedPoint>> {
    json.as_array()
        .ok_or_else(|| shape("points"))?
        .iter()
        .map(retrieved_point)
        .collect()
}

/// The answer of a write: its operation id and status.
pub fn update_result(json: &Value) -> api::UpdateResult {
    let status = match json["status"].as_str() {
        Some("completed") => api::UpdateStatus::Completed,
        Some("acknowledged") => api::UpdateStatus::Acknowledged,
        Some("wait_timeout") => api::UpdateStatus::WaitTimeout,
        _ => api::UpdateStatus::UnknownUpdateStatus,
    };
    api::UpdateResult {
        operation_id: json["operation_id"].as_u64(),
        status: status as i32,
    }
}

pub fn group_id(json: &Value) -> Reply<api::GroupId> {
    use api::group_id::Kind;
    let kind = match json {
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Kind::UnsignedValue(u),
            (None, Some(i)) => Kind::IntegerValue(i),
            _ => return Err(shape("group id")),
        },
        Value::String(s) => Kind::StringValue(s.clone()),
        _ => return Err(shape("group id")),
    };
    Ok(api::GroupId { kind: Some(kind) })
}

pub fn groups(json: &Value) -> Reply<api::GroupsResult> {
    let groups = json["groups"]
        .as_array()
        .ok_or_else(|| shape("groups"))?
        .iter()
        .map(|group| {
            Ok(api::PointGroup {
                id: Some(group_id(&group["id"])?),
                hits: scored_points(&group["hits"])?,
                lookup: match group.get("lookup") {
                    Some(found) if !found.is_null() => Some(retrieved_point(found)?),
                    _ => None,
                },
            })
        })
        .collect::<Reply<Vec<_>>>()?;
    Ok(api::GroupsResult { groups })
}

pub fn facet_hits(json: &Value) -> Reply<Vec<api::FacetHit>> {
    use api::facet_value::Variant;
    json["hits"]
        .as_array()
        .ok_or_else(|| shape("facet hits"))?
        .iter()
        .map(|hit| {
            let variant = match &hit["value"] {
                Value::String(s) => Variant::StringValue(s.clone()),
                Value::Bool(b) => Variant::BoolValue(*b),
                Value::Number(n) => {
                    Variant::IntegerValue(n.as_i64().ok_or_else(|| shape("facet value"))?)
                }
                _ => return Err(shape("facet value")),
            };
            Ok(api::FacetHit {
                value: Some(api::FacetValue {
                    variant: Some(variant),
                }),
                count: hit["count"].as_u64().ok_or_else(|| shape("facet count"))?,
            })
        })
        .collect()
}

pub fn snapshot(json: &Value) -> Reply<api::SnapshotDescription> {
    let created = json["creation_time"].as_str().and_then(parse_time);
    Ok(api::SnapshotDescription {
        name: json["name"]
            .as_str()
            .ok_or_else(|| shape("snapshot name"))?
            .to_string(),
        creation_time: created,
        size: json["size"].as_i64().unwrap_or(0),
        checksum: json["checksum"].as_str().map(str::to_string),
    })
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]` (UTC, as the REST API writes creation times).
fn parse_time(text: &str) -> Option<prost_types::Timestamp> {
    let number = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    // days from civil (Howard Hinnant's algorithm)
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    Some(prost_types::Timestamp {
        seconds: days * 86_400 + hour * 3_600 + minute * 60 + second,
        nanos: 0,
    })
}

pub fn aliases(json: &Value) -> Reply<Vec<api::AliasDescription>> {
    json["aliases"]
        .as_array()
        .ok_or_else(|| shape("aliases"))?
        .iter()
        .map(|alias| {
            Ok(api::AliasDescription {
                alias_name: alias["alias_name"]
                    .as_str()
                    .ok_or_else(|| shape("alias"))?
                    .to_string(),
                collection_name: alias["collection_name"]
                    .as_str()
                    .ok_or_else(|| shape("alias"))?
                    .to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::request::timestamp;

    #[test]
    fn times_go_to_rfc_3339_and_back() {
        // the epoch, a leap day, the end of a century year, before the epoch
        for (seconds, text) in [
            (0, "1970-01-01T00:00:00.000000000Z"),
            (951_782_400, "2000-02-29T00:00:00.000000000Z"),
            (4_107_542_399, "2100-02-28T23:59:59.000000000Z"),
            (-86_400, "1969-12-31T00:00:00.000000000Z"),
        ] {
            let at = prost_types::Timestamp { seconds, nanos: 0 };
            assert_eq!(timestamp(&at), text);
            assert_eq!(parse_time(text), Some(at), "{text}");
        }
        let at = prost_types::Timestamp {
            seconds: 1_700_000_000,
            nanos: 5_000,
        };
        assert_eq!(timestamp(&at), "2023-11-14T22:13:20.000005000Z");
        assert_eq!(parse_time("not a time"), None);
    }

    #[test]
    fn stored_vectors_keep_their_kind() {
        let dense = vectors(Some(&serde_json::json!([1.0, 2.0])))
            .unwrap()
            .unwrap();
        let sparse = vectors(Some(&serde_json::json!({"indices": [3], "values": [0.5]})))
            .unwrap()
            .unwrap();
        let named = vectors(Some(&serde_json::json!({"a": [[1.0], [2.0]]})))
            .unwrap()
            .unwrap();
        use api::vector_output::Vector;
        use api::vectors_output::VectorsOptions;
        let one = |v: api::VectorsOutput| match v.vectors_options {
            Some(VectorsOptions::Vector(v)) => v.vector,
            other => panic!("{other:?}"),
        };
        assert!(matches!(one(dense), Some(Vector::Dense(d)) if d.data == [1.0, 2.0]));
        assert!(
            matches!(one(sparse), Some(Vector::Sparse(s)) if s.indices == [3] && s.values == [0.5])
        );
        let Some(VectorsOptions::Vectors(named)) = named.vectors_options else {
            panic!("named vectors")
        };
        assert!(matches!(
            &named.vectors["a"].vector,
            Some(Vector::MultiDense(m)) if m.vectors.len() == 2
        ));
        assert_eq!(vectors(None).unwrap(), None);
    }
}
