//! Payload filters in Qdrant's grammar, parsed once into a typed tree and evaluated against
//! a point's id and JSON payload.
//!
//! ```json
//! {"must": [...], "should": [...], "must_not": [...]}
//! ```
//! Conditions: `{"key": "a.b", "match": {"value": v} | {"any": [..]} | {"except": [..]} |
//! {"text": "..."}}`, `{"key": k, "range": {"gt"|"gte"|"lt"|"lte": number or RFC 3339
//! datetime}}`, `{"key": k, "geo_radius": {"center": {"lat", "lon"}, "radius": meters}}`,
//! `{"has_id": [ids]}`, `{"is_empty": {"key": k}}`, `{"is_null": {"key": k}}`,
//! `{"has_vector": ""}` (the unnamed vector every point has), or a nested filter; and
//! `"min_should": {"conditions": [..], "min_count": n}` beside must / should / must_not.
//!
//! Keys are paths in Qdrant's syntax ([`KeyPath`]): `a.b`, `a[0]`, `a[]`, `a[].b`,
//! `a[0][1]`, `"quoted.key"`. A dotted key does not enter arrays: `[]` does. A field
//! condition holds when it holds for one value of the field; an array reached by a final key
//! counts as its elements, one reached by `[N]` or `[]` as one value (qdrant-client's local
//! mode).
//!
//! Every parse error names the path inside the filter (`filter.must[1].range.gt`) and why.

use serde_json::Value;

use crate::datetime::parse_timestamp;
use crate::error::{EngineError, Result};
use crate::point::PointId;

/// Most conditions in one filter tree (guards against pathological requests).
pub const MAX_FILTER_CONDITIONS: usize = 1_024;
/// Deepest nesting of filters.
pub const MAX_FILTER_DEPTH: usize = 16;

/// The clauses of a filter object; a condition holding one of them is a nested filter.
const FILTER_CLAUSES: [&str; 4] = ["must", "should", "must_not", "min_should"];

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Filter {
    pub must: Vec<Condition>,
    /// `None` when absent (or null); an empty list matches nothing, as in Qdrant.
    pub should: Option<Vec<Condition>>,
    pub must_not: Vec<Condition>,
    /// At least `min_count` of `conditions` must hold.
    pub min_should: Option<MinShould>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MinShould {
    pub conditions: Vec<Condition>,
    pub min_count: usize,
}

/// Mean Earth radius in meters (IUGG), for `geo_radius`.
pub const EARTH_RADIUS_METERS: f64 = 6_371_008.8;

#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    Keyword(String),
    Integer(i64),
    Bool(bool),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Condition {
    MatchValue {
        key: KeyPath,
        value: Scalar,
    },
    MatchAny {
        key: KeyPath,
        values: Vec<Scalar>,
    },
    MatchExcept {
        key: KeyPath,
        values: Vec<Scalar>,
    },
    MatchText {
        key: KeyPath,
        text: String,
    },
    Range {
        key: KeyPath,
        bounds: Range,
    },
    /// A range whose bounds were RFC 3339 datetimes (as epoch seconds); matches payload
    /// strings that parse as datetimes.
    DatetimeRange {
        key: KeyPath,
        bounds: Range,
    },
    GeoRadius {
        key: KeyPath,
        latitude: f64,
        longitude: f64,
        radius_meters: f64,
    },
    HasId(Vec<PointId>),
    /// `has_vector` of the unnamed vector: every point has it.
    HasVector,
    IsEmpty {
        key: KeyPath,
    },
    IsNull {
        key: KeyPath,
    },
    Nested(Box<Filter>),
}

#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Range {
    pub gt: Option<f64>,
    pub gte: Option<f64>,
    pub lt: Option<f64>,
    pub lte: Option<f64>,
}

impl Range {
    fn contains(&self, value: f64) -> bool {
        self.gt.is_none_or(|b| value > b)
            && self.gte.is_none_or(|b| value >= b)
            && self.lt.is_none_or(|b| value < b)
            && self.lte.is_none_or(|b| value <= b)
    }
}

fn invalid(path: &str, reason: impl Into<String>) -> EngineError {
    EngineError::InvalidFilter {
        path: path.to_string(),
        reason: reason.into(),
    }
}

struct Parser {
    conditions: usize,
}

impl Filter {
    /// Parses a filter object; `path` names it in errors (e.g. `"filter"`).
    pub fn parse(value: &Value, path: &str) -> Result<Filter> {
        Parser { conditions: 0 }.filter(value, path, 0)
    }

    /// Whether the point with `id` and `payload` passes.
    pub fn matches(&self, id: &PointId, payload: Option<&Value>) -> bool {
        self.must.iter().all(|c| c.matches(id, payload))
            && self
                .should
                .as_ref()
                .is_none_or(|should| should.iter().any(|c| c.matches(id, payload)))
            && !self.must_not.iter().any(|c| c.matches(id, payload))
            && self.min_should.as_ref().is_none_or(|min| {
                min.conditions
                    .iter()
                    .filter(|c| c.matches(id, payload))
                    .take(min.min_count)
                    .count()
                    >= min.min_count
            })
    }
}

impl Parser {
    fn filter(&mut self, value: &Value, path: &str, depth: usize) -> Result<Filter> {
        if depth > MAX_FILTER_DEPTH {
            return Err(invalid(
                path,
                format!("nested deeper than {MAX_FILTER_DEPTH} levels"),
            ));
        }
        let Value::Object(object) = value else {
            return Err(invalid(
                path,
                "must be an object with must / should / must_not",
            ));
        };
        let mut filter = Filter::default();
        for (name, clauses) in object {
            if name == "min_should" {
                filter.min_should =
                    self.min_should(clauses, &format!("{path}.min_should"), depth)?;
                continue;
            }
            let target = match name.as_str() {
                "must" => &mut filter.must,
                "should" if clauses.is_null() => continue,
                "should" => filter.should.get_or_insert_with(Vec::new),
                "must_not" => &mut filter.must_not,
                // Fields of newer clients we do not act on must not change results silently.
                other => return Err(invalid(&format!("{path}.{other}"), "unknown filter clause")),
            };
            let clause_path = format!("{path}.{name}");
            match clauses {
                Value::Null => {}
                Value::Array(items) => {
                    for (index, item) in items.iter().enumerate() {
                        let item_path = format!("{clause_path}[{index}]");
                        target.push(self.condition(item, &item_path, depth)?);
                    }
                }
                single @ Value::Object(_) => {
                    target.push(self.condition(single, &clause_path, depth)?);
                }
                _ => return Err(invalid(&clause_path, "must be a list of conditions")),
            }
        }
        Ok(filter)
    }

    fn min_should(&mut self, value: &Value, path: &str, depth: usize) -> Result<Option<MinShould>> {
        if value.is_null() {
            return Ok(None);
        }
        let Value::Object(object) = value else {
            return Err(invalid(
                path,
                "must be an object with conditions and min_count",
            ));
        };
        let count_path = format!("{path}.min_count");
        let min_count = object
            .get("min_count")
            .ok_or_else(|| invalid(&count_path, "is required"))?
            .as_u64()
            .ok_or_else(|| invalid(&count_path, "must be an unsigned integer"))?;
        let list_path = format!("{path}.conditions");
        let Some(Value::Array(items)) = object.get("conditions") else {
            return Err(invalid(&list_path, "must be a list of conditions"));
        };
        let conditions = items
            .iter()
            .enumerate()
            .map(|(index, item)| self.condition(item, &format!("{list_path}[{index}]"), depth))
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(MinShould {
            conditions,
            min_count: usize::try_from(min_count).unwrap_or(usize::MAX),
        }))
    }

    fn condition(&mut self, value: &Value, path: &str, depth: usize) -> Result<Condition> {
        self.conditions += 1;
        if self.conditions > MAX_FILTER_CONDITIONS {
            return Err(invalid(
                path,
                format!("more than {MAX_FILTER_CONDITIONS} conditions"),
            ));
        }
        let Value::Object(object) = value else {
            return Err(invalid(path, "a condition must be an object"));
        };
        // A filter object (any of its clauses, or none: `{}` matches everything) nests.
        if object.is_empty() || FILTER_CLAUSES.iter().any(|name| object.contains_key(*name)) {
            return Ok(Condition::Nested(Box::new(self.filter(
                value,
                path,
                depth + 1,
            )?)));
        }
        if let Some(ids) = object.get("has_id") {
            let Value::Array(ids) = ids else {
                return Err(invalid(&format!("{path}.has_id"), "must be a list of ids"));
            };
            let ids = ids
                .iter()
                .enumerate()
                .map(|(index, id)| parse_id(id, &format!("{path}.has_id[{index}]")))
                .collect::<Result<Vec<_>>>()?;
            return Ok(Condition::HasId(ids));
        }
        if let Some(name) = object.get("has_vector") {
            let vector_path = format!("{path}.has_vector");
            return match name {
                Value::String(name) if name.is_empty() => Ok(Condition::HasVector),
                Value::String(name) => Err(invalid(
                    &vector_path,
                    format!("no vector named {name:?}: points have one unnamed vector (\"\")"),
                )),
                _ => Err(invalid(&vector_path, "must be a vector name (a string)")),
            };
        }
        for (name, make) in [
            (
                "is_empty",
                (|key| Condition::IsEmpty { key }) as fn(KeyPath) -> Condition,
            ),
            ("is_null", |key| Condition::IsNull { key }),
        ] {
            if let Some(inner) = object.get(name) {
                let key_path = format!("{path}.{name}.key");
                let key = inner
                    .get("key")
                    .ok_or_else(|| invalid(&key_path, "is required"))?;
                return Ok(make(parse_key(key, &key_path)?));
            }
        }
        let key_path = format!("{path}.key");
        let key = parse_key(
            object
                .get("key")
                .ok_or_else(|| invalid(&key_path, "is required"))?,
            &key_path,
        )?;
        if let Some(matcher) = object.get("match") {
            let match_path = format!("{path}.match");
            if let Some(value) = matcher.get("value") {
                return Ok(Condition::MatchValue {
                    key,
                    value: parse_scalar(value, &format!("{match_path}.value"))?,
                });
            }
            for (name, any) in [("any", true), ("except", false)] {
                if let Some(values) = matcher.get(name) {
                    let list_path = format!("{match_path}.{name}");
                    let Value::Array(values) = values else {
                        return Err(invalid(&list_path, "must be a list"));
                    };
                    let values = values
                        .iter()
                        .enumerate()
                        .map(|(index, v)| parse_scalar(v, &format!("{list_path}[{index}]")))
                        .collect::<Result<Vec<_>>>()?;
                    return Ok(if any {
                        Condition::MatchAny { key, values }
                    } else {
                        Condition::MatchExcept { key, values }
                    });
                }
            }
            if let Some(text) = matcher.get("text") {
                let Value::String(text) = text else {
                    return Err(invalid(&format!("{match_path}.text"), "must be a string"));
                };
                return Ok(Condition::MatchText {
                    key,
                    text: text.clone(),
                });
            }
            return Err(invalid(
                &match_path,
                "expected one of value, any, except, text",
            ));
        }
        if let Some(range) = object.get("range") {
            let range_path = format!("{path}.range");
            let Value::Object(bounds_object) = range else {
                return Err(invalid(&range_path, "must be an object"));
            };
            let mut bounds = Range::default();
            let mut datetimes = None;
            for (name, bound) in bounds_object {
                let bound_path = format!("{range_path}.{name}");
                let (number, is_datetime) = match bound {
                    Value::Null => continue,
                    Value::Number(number) => (number.as_f64(), false),
                    Value::String(text) => (
                        Some(parse_timestamp(text).ok_or_else(|| {
                            invalid(
                                &bound_path,
                                format!("{text:?} is neither a number nor an RFC 3339 datetime"),
                            )
                        })?),
                        true,
                    ),
                    _ => {
                        return Err(invalid(
                            &bound_path,
                            "must be a number or an RFC 3339 datetime",
                        ))
                    }
                };
                if *datetimes.get_or_insert(is_datetime) != is_datetime {
                    return Err(invalid(
                        &bound_path,
                        "mixes a number and a datetime in one range",
                    ));
                }
                match name.as_str() {
                    "gt" => bounds.gt = number,
                    "gte" => bounds.gte = number,
                    "lt" => bounds.lt = number,
                    "lte" => bounds.lte = number,
                    _ => return Err(invalid(&format!("{range_path}.{name}"), "unknown bound")),
                }
            }
            return Ok(if datetimes == Some(true) {
                Condition::DatetimeRange { key, bounds }
            } else {
                Condition::Range { key, bounds }
            });
        }
        if let Some(geo) = object.get("geo_radius") {
            return parse_geo_radius(geo, key, &format!("{path}.geo_radius"));
        }
        Err(invalid(
            path,
            "expected match, range, geo_radius, has_id, has_vector, is_empty, is_null or a \
             nested filter",
        ))
    }
}

fn parse_geo_radius(value: &Value, key: KeyPath, path: &str) -> Result<Condition> {
    let number = |value: Option<&Value>, field: &str| -> Result<f64> {
        let field_path = format!("{path}.{field}");
        value
            .ok_or_else(|| invalid(&field_path, "is required"))?
            .as_f64()
            .ok_or_else(|| invalid(&field_path, "must be a number"))
    };
    let center = value.get("center");
    let latitude = number(center.and_then(|c| c.get("lat")), "center.lat")?;
    let longitude = number(center.and_then(|c| c.get("lon")), "center.lon")?;
    let radius_meters = number(value.get("radius"), "radius")?;
    if !(-90.0..=90.0).contains(&latitude) {
        return Err(invalid(
            &format!("{path}.center.lat"),
            "must be within -90..=90",
        ));
    }
    if !(-180.0..=180.0).contains(&longitude) {
        return Err(invalid(
            &format!("{path}.center.lon"),
            "must be within -180..=180",
        ));
    }
    if !(radius_meters >= 0.0 && radius_meters.is_finite()) {
        return Err(invalid(
            &format!("{path}.radius"),
            "must be a non-negative number",
        ));
    }
    Ok(Condition::GeoRadius {
        key,
        latitude,
        longitude,
        radius_meters,
    })
}

/// Great-circle distance in meters between two (latitude, longitude) points in degrees.
pub fn haversine_meters(from: (f64, f64), to: (f64, f64)) -> f64 {
    let (latitude_from, latitude_to) = (from.0.to_radians(), to.0.to_radians());
    let latitude_delta = latitude_to - latitude_from;
    let longitude_delta = (to.1 - from.1).to_radians();
    let a = (latitude_delta / 2.0).sin().powi(2)
        + latitude_from.cos() * latitude_to.cos() * (longitude_delta / 2.0).sin().powi(2);
    2.0 * EARTH_RADIUS_METERS * a.sqrt().min(1.0).asin()
}

fn parse_key(value: &Value, path: &str) -> Result<KeyPath> {
    let Value::String(key) = value else {
        return Err(invalid(path, "must be a string"));
    };
    KeyPath::parse(key).ok_or_else(|| {
        invalid(
            path,
            format!(
                "{key:?} is not a valid key path (keys of letters, digits, _ and -, or \
                 \"quoted\", joined by dots, each followed by any [N] or [])"
            ),
        )
    })
}

fn parse_scalar(value: &Value, path: &str) -> Result<Scalar> {
    match value {
        Value::String(text) => Ok(Scalar::Keyword(text.clone())),
        Value::Bool(flag) => Ok(Scalar::Bool(*flag)),
        Value::Number(number) => number
            .as_i64()
            .map(Scalar::Integer)
            .ok_or_else(|| invalid(path, "must be a string, an integer or a bool")),
        _ => Err(invalid(path, "must be a string, an integer or a bool")),
    }
}

fn parse_id(value: &Value, path: &str) -> Result<PointId> {
    match value {
        Value::Number(number) => number
            .as_u64()
            .map(PointId::Number)
            .ok_or_else(|| invalid(path, "must be an unsigned integer or a UUID")),
        Value::String(text) => crate::point::parse_uuid(text)
            .map(PointId::Uuid)
            .ok_or_else(|| invalid(path, format!("{text:?} is not a UUID"))),
        _ => Err(invalid(path, "must be an unsigned integer or a UUID")),
    }
}

/// One step of a [`KeyPath`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PathItem {
    /// `.name` (or the first name): a key of an object.
    Key(String),
    /// `[N]`: element `N` of an array.
    Index(usize),
    /// `[]`: every element of an array.
    Wildcard,
}

/// A payload key path in Qdrant's syntax: a key, then any of `.key`, `[N]` and `[]`; a key
/// is letters, digits, `_` and `-`, or any text without `"` or `\` in double quotes
/// (`"a.b"` is one key). A step that does not fit the value it meets (a key of an array, an
/// index of an object, an index past the end) reaches nothing: arrays are only entered
/// through `[N]` and `[]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeyPath {
    items: Vec<PathItem>,
}

impl KeyPath {
    /// `None` when `text` is not a key path.
    pub fn parse(text: &str) -> Option<KeyPath> {
        let mut items = Vec::new();
        let mut rest = text;
        let mut expect_key = true;
        loop {
            if expect_key {
                let (key, after) = split_key(rest)?;
                items.push(PathItem::Key(key));
                rest = after;
                expect_key = false;
            }
            match rest.as_bytes().first() {
                None => return Some(KeyPath { items }),
                Some(b'.') => {
                    rest = &rest[1..];
                    expect_key = true;
                }
                Some(b'[') => {
                    let close = rest.find(']')?;
                    let inside = &rest[1..close];
                    items.push(if inside.is_empty() {
                        PathItem::Wildcard
                    } else if inside.bytes().all(|b| b.is_ascii_digit()) {
                        PathItem::Index(inside.parse().ok()?)
                    } else {
                        return None;
                    });
                    rest = &rest[close + 1..];
                }
                Some(_) => return None,
            }
        }
    }

    pub fn items(&self) -> &[PathItem] {
        &self.items
    }

    /// A path of `items` (the first a key).
    pub(crate) fn from_items(items: Vec<PathItem>) -> KeyPath {
        debug_assert!(matches!(items.first(), Some(PathItem::Key(_))));
        KeyPath { items }
    }

    /// Whether the path ends with a key (so that an array found there counts as its
    /// elements), rather than with `[N]` or `[]`.
    fn ends_with_key(&self) -> bool {
        matches!(self.items.last(), Some(PathItem::Key(_)))
    }
}

/// The key at the start of `text` (raw or quoted) and what follows it.
fn split_key(text: &str) -> Option<(String, &str)> {
    if let Some(quoted) = text.strip_prefix('"') {
        let end = quoted.find(['"', '\\'])?;
        if quoted.as_bytes()[end] != b'"' {
            return None;
        }
        return Some((quoted[..end].to_string(), &quoted[end + 1..]));
    }
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .unwrap_or(text.len());
    (end > 0).then(|| (text[..end].to_string(), &text[end..]))
}

/// Whether `visit` holds for some value at `items` below `value` (stopping at the first):
/// the values the path reaches, as they are (`[]` reaches each element of an array).
fn any_leaf<'a>(
    value: &'a Value,
    items: &[PathItem],
    visit: &mut dyn FnMut(&'a Value) -> bool,
) -> bool {
    let Some((head, rest)) = items.split_first() else {
        return visit(value);
    };
    match (head, value) {
        (PathItem::Key(key), Value::Object(object)) => object
            .get(key)
            .is_some_and(|child| any_leaf(child, rest, visit)),
        (PathItem::Index(index), Value::Array(elements)) => elements
            .get(*index)
            .is_some_and(|child| any_leaf(child, rest, visit)),
        (PathItem::Wildcard, Value::Array(elements)) => {
            elements.iter().any(|child| any_leaf(child, rest, visit))
        }
        _ => false,
    }
}

/// [`any_leaf`] from the root of a payload (none: no value).
fn any_leaf_of<'a>(
    payload: Option<&'a Value>,
    key: &KeyPath,
    visit: &mut dyn FnMut(&'a Value) -> bool,
) -> bool {
    payload.is_some_and(|payload| any_leaf(payload, key.items(), visit))
}

/// Whether `visit` holds for some value of the field at `key` (stopping at the first): the
/// values the path reaches, an array reached by a final key counting as its elements.
fn any_value<'a>(
    payload: Option<&'a Value>,
    key: &KeyPath,
    visit: &mut dyn FnMut(&'a Value) -> bool,
) -> bool {
    let Some(payload) = payload else {
        return false;
    };
    if key.ends_with_key() {
        any_leaf(payload, key.items(), &mut |leaf| match leaf {
            Value::Array(elements) => elements.iter().any(&mut *visit),
            other => visit(other),
        })
    } else {
        any_leaf(payload, key.items(), visit)
    }
}

/// Every value of the field at `key` (as [`any_value`] visits them).
pub(crate) fn values_at<'a>(payload: &'a Value, key: &KeyPath, out: &mut Vec<&'a Value>) {
    any_value(Some(payload), key, &mut |value| {
        out.push(value);
        false
    });
}

fn scalar_equals(value: &Value, scalar: &Scalar) -> bool {
    match (value, scalar) {
        (Value::String(text), Scalar::Keyword(expected)) => text == expected,
        (Value::Bool(flag), Scalar::Bool(expected)) => flag == expected,
        (Value::Number(number), Scalar::Integer(expected)) => number.as_i64() == Some(*expected),
        _ => false,
    }
}

impl Condition {
    fn matches(&self, id: &PointId, payload: Option<&Value>) -> bool {
        match self {
            Condition::MatchValue { key, value } => {
                any_value(payload, key, &mut |v| scalar_equals(v, value))
            }
            Condition::MatchAny { key, values } => any_value(payload, key, &mut |v| {
                values.iter().any(|s| scalar_equals(v, s))
            }),
            // Qdrant: some value of the field is outside the list; a null is no value, so a
            // missing key, `null`, `[]` or `[null]` never match.
            Condition::MatchExcept { key, values } => any_value(payload, key, &mut |v| {
                !v.is_null() && !values.iter().any(|s| scalar_equals(v, s))
            }),
            Condition::MatchText { key, text } => any_value(
                payload,
                key,
                &mut |v| matches!(v, Value::String(s) if s.contains(text.as_str())),
            ),
            Condition::Range { key, bounds } => any_value(payload, key, &mut |v| {
                v.as_f64().is_some_and(|number| bounds.contains(number))
            }),
            Condition::DatetimeRange { key, bounds } => any_value(payload, key, &mut |v| {
                v.as_str()
                    .and_then(parse_timestamp)
                    .is_some_and(|seconds| bounds.contains(seconds))
            }),
            Condition::GeoRadius {
                key,
                latitude,
                longitude,
                radius_meters,
            } => any_value(payload, key, &mut |v| match (
                v.get("lat").and_then(Value::as_f64),
                v.get("lon").and_then(Value::as_f64),
            ) {
                (Some(lat), Some(lon)) => {
                    haversine_meters((*latitude, *longitude), (lat, lon)) <= *radius_meters
                }
                _ => false,
            }),
            Condition::HasId(ids) => ids.contains(id),
            Condition::HasVector => true,
            // Both see the values as they are (`[null]` is one value, neither null nor
            // empty), as Qdrant's local mode does.
            Condition::IsEmpty { key } => !any_leaf_of(payload, key, &mut |v| match v {
                Value::Null => false,
                Value::Array(elements) => !elements.is_empty(),
                _ => true,
            }),
            Condition::IsNull { key } => any_leaf_of(payload, key, &mut Value::is_null),
            Condition::Nested(filter) => filter.matches(id, payload),
        }
    }
}
