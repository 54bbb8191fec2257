//! `set_payload` with `key`: the payload given is merged into the object at a path of
//! each point's payload (Qdrant's `key`, e.g. `address`, `nest[0]`, `items[].meta`),
//! as qdrant-client's local mode (the oracle in `python/tests/test_set_payload_key_oracle.py`)
//! sets it:
//! - `a` (a key): the object at `a` gets the payload's keys (created as `{}` when missing;
//!   a value there that is not an object is replaced by the payload); a step through
//!   something that is not an object replaces it with one;
//! - `[N]`: element `N` of an array, when there is one (nothing when the array is shorter);
//! - `[]`: every element of an array;
//! - an index step over something that is not an array replaces it with `[]`.
//!
//! Applied as a read of the points and one upsert of their new payloads (vectors kept),
//! under the collection's write stripe held exclusively, so no write falls in between.

use sagitta_engine::filter::{KeyPath, PathItem};
use sagitta_engine::{Collection, Point, PointId};
use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};

/// The payload path of `key`, or a 400 naming it.
pub(crate) fn parse_key(key: &str) -> ApiResult<KeyPath> {
    KeyPath::parse(key).ok_or_else(|| {
        ApiError::bad_request(format!(
            "Wrong input: `key` = {key:?}: not a payload path (`a.b`, `a[0]`, `a[].b`)"
        ))
    })
}

fn merge_into(slot: &mut Value, value: &Map<String, Value>) {
    match slot {
        Value::Object(object) => object.extend(value.iter().map(|(k, v)| (k.clone(), v.clone()))),
        other => *other = Value::Object(value.clone()),
    }
}

/// Sets `value` at `path` of `data` (see the module).
pub(crate) fn set_at(data: &mut Value, path: &[PathItem], value: &Map<String, Value>) {
    let Some((step, rest)) = path.split_first() else {
        return;
    };
    let visit = |slot: &mut Value| {
        if rest.is_empty() {
            merge_into(slot, value);
        } else {
            set_at(slot, rest, value);
        }
    };
    match step {
        PathItem::Key(key) => {
            if !data.is_object() {
                *data = Value::Object(Map::new());
            }
            if let Value::Object(object) = data {
                visit(
                    object
                        .entry(key.clone())
                        .or_insert_with(|| Value::Object(Map::new())),
                );
            }
        }
        PathItem::Index(index) => match data {
            Value::Array(items) => {
                if let Some(item) = items.get_mut(*index) {
                    visit(item);
                }
            }
            other => *other = Value::Array(Vec::new()),
        },
        PathItem::Wildcard => match data {
            Value::Array(items) => items.iter_mut().for_each(visit),
            other => *other = Value::Array(Vec::new()),
        },
    }
}

/// Sets `payload` (a JSON object's text) at `key` of each of `ids` (which exist: the
/// caller checked), one upsert for all; the caller holds the write stripe exclusively.
pub(crate) fn set_payload_at(
    (target, name): (&Collection, &str),
    ids: &[PointId],
    key: &KeyPath,
    payload: &str,
    wait: bool,
) -> ApiResult<()> {
    let engine = |error| ApiError::from_engine(error, name);
    let value: Map<String, Value> = serde_json::from_str(payload).map_err(|error| {
        ApiError::bad_request(format!(
            "Wrong input: `payload` must be a JSON object: {error}"
        ))
    })?;
    let mut points = Vec::with_capacity(ids.len());
    for id in ids {
        let Some(point) = target.get(id).map_err(engine)? else {
            continue; // a point matched by a filter and deleted since
        };
        let mut stored = point
            .payload
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_else(|| Value::Object(Map::new()));
        set_at(&mut stored, key.items(), &value);
        points.push(Point {
            payload: Some(stored.to_string()),
            ..point
        });
    }
    if points.is_empty() {
        return Ok(());
    }
    target.upsert(points, wait).map_err(engine)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn set(mut data: Value, key: &str, value: Value) -> Value {
        let Value::Object(value) = value else {
            unreachable!()
        };
        set_at(&mut data, KeyPath::parse(key).unwrap().items(), &value);
        data
    }

    #[test]
    fn values_are_merged_at_the_path_as_local_mode_does() {
        let x = json!({"x": 1});
        assert_eq!(set(json!({}), "a", x.clone()), json!({"a": {"x": 1}}));
        assert_eq!(
            set(json!({"a": {"y": 2}}), "a", x.clone()),
            json!({"a": {"y": 2, "x": 1}})
        );
        assert_eq!(set(json!({"a": 5}), "a", x.clone()), json!({"a": {"x": 1}}));
        assert_eq!(
            set(json!({"a": 5}), "a.b", x.clone()),
            json!({"a": {"b": {"x": 1}}})
        );
        assert_eq!(
            set(json!({"n": [{"k": 0}, 3]}), "n[0]", x.clone()),
            json!({"n": [{"k": 0, "x": 1}, 3]})
        );
        assert_eq!(set(json!({"n": [1]}), "n[4]", x.clone()), json!({"n": [1]}));
        assert_eq!(
            set(json!({"n": {"k": 1}}), "n[0]", x.clone()),
            json!({"n": []})
        );
        assert_eq!(
            set(json!({"n": [{"k": 0}, 3]}), "n[]", x.clone()),
            json!({"n": [{"k": 0, "x": 1}, {"x": 1}]})
        );
        assert_eq!(
            set(json!({"n": [{"m": {}}, {}]}), "n[].m", x),
            json!({"n": [{"m": {"x": 1}}, {"m": {"x": 1}}]})
        );
    }
}
