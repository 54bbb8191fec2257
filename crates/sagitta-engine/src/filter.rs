//! Payload filters in Qdrant's grammar, parsed once into a typed tree and evaluated against
//! a point's id and JSON payload.
//!
//! ```json
//! {"must": [...], "should": [...], "must_not": [...], "min_should": {...}}
//! ```
//! `must`: all hold; `should`: one holds (an empty list: none does, so nothing matches);
//! `must_not`: none holds; `min_should: {"conditions": [..], "min_count": n}`: at least `n`
//! hold. A clause may be one condition instead of a list; `null` is an absent clause.
//!
//! A condition is exactly one of: a field condition `{"key": k, "match": {"value": v} |
//! {"any": [..]} | {"except": [..]} | {"text": ".."} | {"text_any": ".."} | {"phrase":
//! ".."}}`, `{"key": k, "range": {"gt"|"gte"|"lt"|"lte": number or RFC 3339 datetime}}`,
//! `{"key": k, "geo_radius": {"center": {"lat", "lon"}, "radius": meters}}`, `{"key": k,
//! "geo_bounding_box": {"top_left", "bottom_right"}}`, `{"key": k, "geo_polygon":
//! {"exterior": {"points": [..]}, "interiors": [..]}}` (strict: an edge is outside; see
//! [`crate::geo`]), `{"key": k, "values_count": {"lt"|"gt"|"gte"|"lte": n}}`; `{"has_id":
//! [ids]}`, `{"has_vector": ""}` (the unnamed vector), `{"is_empty": {"key":
//! k}}`, `{"is_null": {"key": k}}`, `{"nested": {"key": k, "filter": {..}}}`; or a filter
//! object (`{}` included: it matches everything). Two kinds in one condition, an unknown
//! field, or a field condition's `is_empty` / `is_null` form is an error, never ignored; a
//! field whose value is `null` is absent. `values_count` counts each value at the key as it
//! is (an array its elements, a null none), as Qdrant's server does.
//!
//! Keys are paths in Qdrant's syntax ([`KeyPath`]): `a.b`, `a[0]`, `a[]`, `a[].b`,
//! `a[0][1]`, `"quoted.key"`. A dotted key does not enter arrays: `[]` does. A field
//! condition holds when it holds for one value of the field; an array reached by a final key
//! counts as its elements, one reached by `[N]` or `[]` as one value (qdrant-client's local
//! mode). `match` compares typed values (`true` is not `1`, `1.0` is not `1`); `except`
//! holds for a non-null value outside its list; `is_empty` and `is_null` see the values as
//! they are (`[null]` is neither).
//!
//! Every parse error names the path inside the filter (`filter.must[1].range.gt`) and why.

use std::cell::Cell;
use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::datetime::parse_timestamp;
use crate::error::{EngineError, Result};
use crate::fulltext::TextQuery;
use crate::point::PointId;

/// Offers every condition of `filter` (those of filter objects among them too, not those
/// inside a `nested` array condition) to `rewrite`, which may replace it and says whether
/// it did; whether any was.
pub(crate) fn rewrite_conditions(
    filter: &mut Filter,
    rewrite: &mut dyn FnMut(&mut Condition) -> Result<bool>,
) -> Result<bool> {
    let mut replaced = false;
    let lists = [
        Some(&mut filter.must),
        filter.should.as_mut(),
        Some(&mut filter.must_not),
        filter.min_should.as_mut().map(|min| &mut min.conditions),
    ];
    for conditions in lists.into_iter().flatten() {
        for condition in conditions.iter_mut() {
            replaced |= match condition {
                Condition::Nested(inner) => rewrite_conditions(inner, rewrite)?,
                other => rewrite(other)?,
            };
        }
    }
    Ok(replaced)
}

/// Most conditions in one filter tree (guards against pathological requests).
pub const MAX_FILTER_CONDITIONS: usize = 1_024;
/// Deepest nesting of filters.
pub const MAX_FILTER_DEPTH: usize = 16;

/// The clauses of a filter object; a condition holding one of them is a nested filter.
const FILTER_CLAUSES: [&str; 4] = ["must", "should", "must_not", "min_should"];

#[derive(Clone, Debug, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Filter {
    pub must: Vec<Condition>,
    /// `None` when absent (or null); an empty list matches nothing, as in Qdrant.
    pub should: Option<Vec<Condition>>,
    pub must_not: Vec<Condition>,
    /// At least `min_count` of `conditions` must hold.
    pub min_should: Option<MinShould>,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MinShould {
    pub conditions: Vec<Condition>,
    pub min_count: usize,
}

/// The count `values_count` gives one value: an array's length, 0 for a null, else 1.
fn value_count(value: &Value) -> u64 {
    match value {
        Value::Null => 0,
        Value::Array(elements) => elements.len() as u64,
        _ => 1,
    }
}

/// Mean Earth radius in meters (IUGG), for `geo_radius`.
pub const EARTH_RADIUS_METERS: f64 = 6_371_008.8;

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Scalar {
    Keyword(String),
    Integer(i64),
    Bool(bool),
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Condition {
    MatchValue {
        key: KeyPath,
        value: Scalar,
    },
    MatchAny {
        key: KeyPath,
        values: ValueSet,
    },
    MatchExcept {
        key: KeyPath,
        values: ValueSet,
    },
    /// `text` and `phrase` (no full-text index: the text holds it as a substring).
    MatchText {
        key: KeyPath,
        text: String,
        phrase: bool,
    },
    /// `text_any`: the text holds one of the words.
    MatchTextAny {
        key: KeyPath,
        words: Vec<String>,
    },
    /// `text`, `text_any` or `phrase` on a field with a text index, compared by tokens
    /// (put in place of the substring forms by [`crate::payload_index::bind_text`]).
    FullText {
        key: KeyPath,
        query: Box<TextQuery>,
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
    GeoBoundingBox {
        key: KeyPath,
        area: crate::geo::BoundingBox,
    },
    GeoPolygon {
        key: KeyPath,
        area: crate::geo::Polygon,
    },
    /// `values_count`: some value at `key` (an array counts its elements, a null none,
    /// anything else one) has a count within `bounds`, as Qdrant's server checks it.
    ValuesCount {
        key: KeyPath,
        bounds: Range<u64>,
    },
    HasId(HashSet<PointId>),
    /// `has_vector`: the point has the vector so named, resolved by
    /// [`Filter::bind_vectors`] into the ids of the points that have it before the filter
    /// is evaluated (unresolved, the unnamed vector `""` holds for every point and any
    /// other name for none).
    HasVector(String),
    IsEmpty {
        key: KeyPath,
    },
    IsNull {
        key: KeyPath,
    },
    /// A filter object among the conditions.
    Nested(Box<Filter>),
    /// Qdrant's `nested`: `filter` holds for one object of the array at `key` (a path
    /// ending with `[]`), checked as if it were the payload.
    NestedArray {
        key: KeyPath,
        filter: Box<Filter>,
    },
}

/// The list of a `match.any` or `match.except`: strings or integers (as Qdrant's), held as
/// a set so that checking a value costs the same however long the list is.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum ValueSet {
    Keywords(HashSet<String>),
    Integers(HashSet<i64>),
}

impl ValueSet {
    /// Whether `value` is in the set (a string among keywords, an integer among integers).
    fn contains(&self, value: &Value) -> bool {
        match (self, value) {
            (ValueSet::Keywords(set), Value::String(text)) => set.contains(text),
            (ValueSet::Integers(set), Value::Number(number)) => number
                .as_i64()
                .is_some_and(|integer| set.contains(&integer)),
            _ => false,
        }
    }

    /// The entries, as [`Scalar`]s (any order).
    pub fn scalars(&self) -> Vec<Scalar> {
        match self {
            ValueSet::Keywords(set) => set.iter().cloned().map(Scalar::Keyword).collect(),
            ValueSet::Integers(set) => set.iter().copied().map(Scalar::Integer).collect(),
        }
    }
}

/// Bounds of a `range` (numbers, or datetimes as epoch seconds) or of a `values_count`
/// (counts).
#[derive(Clone, Copy, Debug, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Range<T = f64> {
    pub gt: Option<T>,
    pub gte: Option<T>,
    pub lt: Option<T>,
    pub lte: Option<T>,
}

impl<T: PartialOrd + Copy> Range<T> {
    fn contains(&self, value: T) -> bool {
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

thread_local! {
    /// See [`Filter::work_on_this_thread`].
    static THREAD_WORK: Cell<u64> = const { Cell::new(0) };
}

struct Parser {
    conditions: usize,
}

impl Filter {
    /// Parses a filter object; `path` names it in errors (e.g. `"filter"`).
    pub fn parse(value: &Value, path: &str) -> Result<Filter> {
        Parser { conditions: 0 }.filter(value, path, 0)
    }

    /// This filter with each `has_vector` condition replaced by `has_id` over the points
    /// `having(name)` gives (`None` from it: left as it is); `None` when nothing was
    /// replaced. Conditions inside `nested` are left (they hold for no array element).
    pub fn bind_vectors(
        &self,
        having: &mut dyn FnMut(&str) -> Result<Option<HashSet<PointId>>>,
    ) -> Result<Option<Filter>> {
        let mut bound = self.clone();
        let replaced = rewrite_conditions(&mut bound, &mut |condition| {
            let Condition::HasVector(name) = condition else {
                return Ok(false);
            };
            let Some(ids) = having(name)? else {
                return Ok(false);
            };
            *condition = Condition::HasId(ids);
            Ok(true)
        })?;
        Ok(replaced.then_some(bound))
    }

    /// Whether the point with `id` and `payload` passes.
    pub fn matches(&self, id: &PointId, payload: Option<&Value>) -> bool {
        let work = Work(Cell::new(0));
        let passed = self.holds(Some(id), payload, &work);
        THREAD_WORK.with(|total| total.set(total.get() + work.0.get()));
        passed
    }

    /// Steps ([`Work`]) every [`Filter::matches`] on this thread has taken so far: what a
    /// test or benchmark reads before and after an operation to see the evaluation work it
    /// did (counts, scrolls and deletes evaluate filters on the calling thread).
    pub fn work_on_this_thread() -> u64 {
        THREAD_WORK.with(Cell::get)
    }

    /// [`Filter::matches`] and the steps it took ([`Work`]: conditions checked, payload
    /// nodes reached, values compared), for tests and benchmarks of evaluation cost.
    pub fn matches_counting(&self, id: &PointId, payload: Option<&Value>) -> (bool, u64) {
        let work = Work(Cell::new(0));
        let passed = self.holds(Some(id), payload, &work);
        (passed, work.0.get())
    }

    /// Whether the filter holds; `id` is `None` inside a `nested` condition, where the
    /// payload is an element of an array (has_id and has_vector hold for no element).
    fn holds(&self, id: Option<&PointId>, payload: Option<&Value>, work: &Work) -> bool {
        self.must.iter().all(|c| c.holds(id, payload, work))
            && self
                .should
                .as_ref()
                .is_none_or(|should| should.iter().any(|c| c.holds(id, payload, work)))
            && !self.must_not.iter().any(|c| c.holds(id, payload, work))
            && self.min_should.as_ref().is_none_or(|min| {
                min.conditions
                    .iter()
                    .filter(|c| c.holds(id, payload, work))
                    .take(min.min_count)
                    .count()
                    >= min.min_count
            })
    }
}

/// The entries of a JSON object that are not `null` (a `null` is an absent field: clients
/// send unused kinds as `null`).
fn present(object: &Map<String, Value>) -> Vec<(&str, &Value)> {
    object
        .iter()
        .filter(|(_, value)| !value.is_null())
        .map(|(name, value)| (name.as_str(), value))
        .collect()
}

/// Refuses the entries of `object` not named in `allowed` (`null`s aside), naming the first.
fn only_fields(object: &Map<String, Value>, allowed: &[&str], path: &str) -> Result<()> {
    match present(object)
        .into_iter()
        .find(|(name, _)| !allowed.contains(name))
    {
        Some((name, _)) => Err(invalid(
            &format!("{path}.{name}"),
            format!("unknown field (expected {})", allowed.join(", ")),
        )),
        None => Ok(()),
    }
}

/// `value` as a JSON object, or an error naming `what` it should hold.
fn as_object<'a>(value: &'a Value, path: &str, what: &str) -> Result<&'a Map<String, Value>> {
    value
        .as_object()
        .ok_or_else(|| invalid(path, format!("must be an object with {what}")))
}

/// Field-condition kinds (beside `key`) SagittaDB evaluates.
const FIELD_KINDS: [&str; 6] = [
    "match",
    "range",
    "geo_radius",
    "geo_bounding_box",
    "geo_polygon",
    "values_count",
];
/// Field-condition kinds Qdrant defines that SagittaDB does not evaluate.
const UNSUPPORTED_FIELD_KINDS: [&str; 2] = ["is_empty", "is_null"];
/// Conditions that are one field of their own.
const OTHER_KINDS: [&str; 5] = ["has_id", "has_vector", "is_empty", "is_null", "nested"];
/// `match` kinds.
const MATCH_KINDS: [&str; 6] = ["value", "any", "except", "text", "text_any", "phrase"];

impl Parser {
    fn filter(&mut self, value: &Value, path: &str, depth: usize) -> Result<Filter> {
        if depth > MAX_FILTER_DEPTH {
            return Err(invalid(
                path,
                format!("nested deeper than {MAX_FILTER_DEPTH} levels"),
            ));
        }
        let object = as_object(value, path, "must / should / must_not / min_should")?;
        let mut filter = Filter::default();
        for (name, clauses) in present(object) {
            if name == "min_should" {
                filter.min_should =
                    Some(self.min_should(clauses, &format!("{path}.min_should"), depth)?);
                continue;
            }
            let target = match name {
                "must" => &mut filter.must,
                "should" => filter.should.get_or_insert_with(Vec::new),
                "must_not" => &mut filter.must_not,
                // Fields of newer clients we do not act on must not change results silently.
                other => {
                    return Err(invalid(
                        &format!("{path}.{other}"),
                        "unknown filter clause (expected must, should, must_not, min_should)",
                    ))
                }
            };
            let clause_path = format!("{path}.{name}");
            match clauses {
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

    fn min_should(&mut self, value: &Value, path: &str, depth: usize) -> Result<MinShould> {
        let object = as_object(value, path, "conditions and min_count")?;
        only_fields(object, &["conditions", "min_count"], path)?;
        let count_path = format!("{path}.min_count");
        let min_count = object
            .get("min_count")
            .filter(|count| !count.is_null())
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
        Ok(MinShould {
            conditions,
            min_count: usize::try_from(min_count).unwrap_or(usize::MAX),
        })
    }

    /// One condition: exactly one kind — a field condition (`key` and one of `match`,
    /// `range`, `geo_radius`), `has_id`, `has_vector`, `is_empty`, `is_null`, `nested`, or a
    /// filter object (any of its clauses, or none: `{}` matches everything).
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
        let fields = present(object);
        let names: Vec<&str> = fields.iter().map(|(name, _)| *name).collect();
        if let Some(clause) = names.iter().find(|name| FILTER_CLAUSES.contains(name)) {
            if let Some(other) = names.iter().find(|name| !FILTER_CLAUSES.contains(name)) {
                return Err(two_kinds(path, clause, other));
            }
        }
        if fields.is_empty() || FILTER_CLAUSES.contains(&names[0]) {
            return Ok(Condition::Nested(Box::new(self.filter(
                value,
                path,
                depth + 1,
            )?)));
        }
        if let Some(key) = object.get("key").filter(|key| !key.is_null()) {
            return field_condition(key, &fields, path);
        }
        let (name, body) = match fields.as_slice() {
            [one] => *one,
            [first, second, ..] => {
                if let Some(unknown) = names
                    .iter()
                    .find(|name| !OTHER_KINDS.contains(name) && !FIELD_KINDS.contains(name))
                {
                    return Err(invalid(
                        &format!("{path}.{unknown}"),
                        "unknown field of a condition",
                    ));
                }
                return Err(two_kinds(path, first.0, second.0));
            }
            [] => unreachable!("an empty condition is the empty filter"),
        };
        self.keyless_condition(name, body, path, depth)
    }

    /// A condition without `"key"`: `name` is its one field, `body` that field's value.
    fn keyless_condition(
        &mut self,
        name: &str,
        body: &Value,
        path: &str,
        depth: usize,
    ) -> Result<Condition> {
        let body_path = format!("{path}.{name}");
        match name {
            "has_id" => parse_has_id(body, &body_path),
            "has_vector" => match body {
                Value::String(name) => Ok(Condition::HasVector(name.clone())),
                _ => Err(invalid(&body_path, "must be a vector name (a string)")),
            },
            "is_empty" | "is_null" => {
                let inner = as_object(body, &body_path, "key")?;
                only_fields(inner, &["key"], &body_path)?;
                let key = parse_key(
                    required(inner, "key", &body_path)?,
                    &format!("{body_path}.key"),
                )?;
                Ok(if name == "is_empty" {
                    Condition::IsEmpty { key }
                } else {
                    Condition::IsNull { key }
                })
            }
            "nested" => {
                let inner = as_object(body, &body_path, "key and filter")?;
                only_fields(inner, &["key", "filter"], &body_path)?;
                let key = required(inner, "key", &body_path)?;
                let key = parse_key(key, &format!("{body_path}.key"))?.elements();
                let filter_path = format!("{body_path}.filter");
                let filter = required(inner, "filter", &body_path)?;
                let filter = self.filter(filter, &filter_path, depth + 1)?;
                Ok(Condition::NestedArray {
                    key,
                    filter: Box::new(filter),
                })
            }
            kind if FIELD_KINDS.contains(&kind) || UNSUPPORTED_FIELD_KINDS.contains(&kind) => {
                Err(invalid(&format!("{path}.key"), "is required"))
            }
            other => Err(invalid(
                &format!("{path}.{other}"),
                format!(
                    "unknown field of a condition (expected a field condition with \"key\", \
                     {}, or a filter)",
                    OTHER_KINDS.join(", ")
                ),
            )),
        }
    }
}

/// The error for a condition holding two kinds, `first` and `second`.
fn two_kinds(path: &str, first: &str, second: &str) -> EngineError {
    invalid(
        path,
        format!(
            "{first:?} and {second:?} in one condition: a condition is exactly one \
             kind (join conditions with must / should)"
        ),
    )
}

/// `object[name]`, which must be present and not null (`path.name` is required).
fn required<'a>(object: &'a Map<String, Value>, name: &str, path: &str) -> Result<&'a Value> {
    object
        .get(name)
        .filter(|value| !value.is_null())
        .ok_or_else(|| invalid(&format!("{path}.{name}"), "is required"))
}

/// A field condition: `"key"` with exactly one of the field kinds among `fields`.
fn field_condition(key: &Value, fields: &[(&str, &Value)], path: &str) -> Result<Condition> {
    let kinds: Vec<(&str, &Value)> = fields
        .iter()
        .copied()
        .filter(|(name, _)| *name != "key")
        .collect();
    for (name, _) in &kinds {
        if !FIELD_KINDS.contains(name) && !UNSUPPORTED_FIELD_KINDS.contains(name) {
            let reason = if OTHER_KINDS.contains(name) {
                format!("cannot be beside \"key\": {name} is a condition of its own")
            } else {
                format!(
                    "unknown field of a field condition (\"key\" with one of {})",
                    FIELD_KINDS.join(", ")
                )
            };
            return Err(invalid(&format!("{path}.{name}"), reason));
        }
    }
    let (kind, body) = match kinds.as_slice() {
        [] => {
            return Err(invalid(
                path,
                format!("expected one of {} beside \"key\"", FIELD_KINDS.join(", ")),
            ))
        }
        [one] => *one,
        [first, second, ..] => return Err(two_kinds(path, first.0, second.0)),
    };
    let key = parse_key(key, &format!("{path}.key"))?;
    let kind_path = format!("{path}.{kind}");
    match kind {
        "match" => parse_match(body, key, &kind_path),
        "range" => parse_range(body, key, &kind_path),
        "geo_radius" => parse_geo_radius(body, key, &kind_path),
        "geo_bounding_box" => crate::geo::BoundingBox::parse(body)
            .map(|area| Condition::GeoBoundingBox { key, area })
            .map_err(|error| geo_invalid(&kind_path, error)),
        "geo_polygon" => crate::geo::Polygon::parse(body)
            .map(|area| Condition::GeoPolygon { key, area })
            .map_err(|error| geo_invalid(&kind_path, error)),
        "values_count" => parse_values_count(body, key, &kind_path),
        "is_empty" | "is_null" => Err(invalid(
            &kind_path,
            format!(
                "is not supported in a field condition: use {{\"{kind}\": {{\"key\": \
                 ...}}}}"
            ),
        )),
        _ => Err(invalid(&kind_path, "is not supported by SagittaDB")),
    }
}

/// `has_id`: a list of point ids.
fn parse_has_id(body: &Value, path: &str) -> Result<Condition> {
    let Value::Array(ids) = body else {
        return Err(invalid(path, "must be a list of ids"));
    };
    let ids = ids
        .iter()
        .enumerate()
        .map(|(index, id)| parse_id(id, &format!("{path}[{index}]")))
        .collect::<Result<HashSet<_>>>()?;
    Ok(Condition::HasId(ids))
}

/// `match`: exactly one of value, any, except, text, text_any, phrase.
fn parse_match(value: &Value, key: KeyPath, path: &str) -> Result<Condition> {
    let object = as_object(
        value,
        path,
        "one of value, any, except, text, text_any, phrase",
    )?;
    only_fields(object, &MATCH_KINDS, path)?;
    let (kind, body) = match present(object).as_slice() {
        [one] => *one,
        [] => {
            return Err(invalid(
                path,
                "expected one of value, any, except, text, text_any, phrase",
            ))
        }
        [first, second, ..] => {
            return Err(invalid(
                path,
                format!(
                    "{:?} and {:?} in one match: a match is exactly one kind",
                    first.0, second.0
                ),
            ))
        }
    };
    let kind_path = format!("{path}.{kind}");
    let text = |body: &Value| -> Result<String> {
        body.as_str()
            .map(str::to_string)
            .ok_or_else(|| invalid(&kind_path, "must be a string"))
    };
    Ok(match kind {
        "value" => Condition::MatchValue {
            key,
            value: parse_scalar(body, &kind_path)?,
        },
        "any" => Condition::MatchAny {
            key,
            values: parse_any_list(body, &kind_path)?,
        },
        "except" => Condition::MatchExcept {
            key,
            values: parse_any_list(body, &kind_path)?,
        },
        // Without a full-text index Qdrant matches text and phrases as substrings.
        "text" | "phrase" => Condition::MatchText {
            key,
            text: text(body)?,
            phrase: kind == "phrase",
        },
        _ => Condition::MatchTextAny {
            key,
            words: text(body)?.split_whitespace().map(str::to_string).collect(),
        },
    })
}

/// The list of `match.any` / `match.except`: all strings or all integers (as Qdrant's).
fn parse_any_list(value: &Value, path: &str) -> Result<ValueSet> {
    let Value::Array(items) = value else {
        return Err(invalid(path, "must be a list"));
    };
    let mut keywords = HashSet::new();
    let mut integers = HashSet::new();
    for (index, item) in items.iter().enumerate() {
        let item_path = format!("{path}[{index}]");
        match item {
            Value::String(text) => keywords.insert(text.clone()),
            Value::Number(number) => integers.insert(
                number
                    .as_i64()
                    .ok_or_else(|| invalid(&item_path, "must be a string or an integer"))?,
            ),
            _ => return Err(invalid(&item_path, "must be a string or an integer")),
        };
        if !keywords.is_empty() && !integers.is_empty() {
            return Err(invalid(
                &item_path,
                "mixes strings and integers: a list holds one or the other",
            ));
        }
    }
    Ok(if integers.is_empty() {
        ValueSet::Keywords(keywords)
    } else {
        ValueSet::Integers(integers)
    })
}

/// `range`: bounds gt, gte, lt, lte, all numbers or all RFC 3339 datetimes.
fn parse_range(value: &Value, key: KeyPath, path: &str) -> Result<Condition> {
    let bounds_object = as_object(value, path, "gt, gte, lt, lte")?;
    let mut bounds = Range::default();
    let mut datetimes = None;
    for (name, bound) in present(bounds_object) {
        let bound_path = format!("{path}.{name}");
        let slot = match name {
            "gt" => &mut bounds.gt,
            "gte" => &mut bounds.gte,
            "lt" => &mut bounds.lt,
            "lte" => &mut bounds.lte,
            _ => {
                return Err(invalid(
                    &bound_path,
                    "unknown bound (expected gt, gte, lt, lte)",
                ))
            }
        };
        let (number, is_datetime) = match bound {
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
        *slot = number;
    }
    Ok(if datetimes == Some(true) {
        Condition::DatetimeRange { key, bounds }
    } else {
        Condition::Range { key, bounds }
    })
}

fn parse_geo_radius(value: &Value, key: KeyPath, path: &str) -> Result<Condition> {
    let object = as_object(value, path, "center and radius")?;
    only_fields(object, &["center", "radius"], path)?;
    if let Some(center) = object.get("center").and_then(Value::as_object) {
        only_fields(center, &["lat", "lon"], &format!("{path}.center"))?;
    }
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

fn geo_invalid(path: &str, error: crate::geo::GeoError) -> EngineError {
    if error.field.is_empty() {
        invalid(path, error.reason)
    } else {
        invalid(&format!("{path}.{}", error.field), error.reason)
    }
}

/// `values_count`: `lt`, `gt`, `gte`, `lte`, each a non-negative integer or null, at least
/// one given.
fn parse_values_count(value: &Value, key: KeyPath, path: &str) -> Result<Condition> {
    let object = as_object(value, path, "lt, gt, gte or lte")?;
    only_fields(object, &["lt", "gt", "gte", "lte"], path)?;
    let bound = |name: &str| -> Result<Option<u64>> {
        match object.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value.as_u64().map(Some).ok_or_else(|| {
                invalid(&format!("{path}.{name}"), "must be a non-negative integer")
            }),
        }
    };
    let bounds = Range {
        lt: bound("lt")?,
        gt: bound("gt")?,
        gte: bound("gte")?,
        lte: bound("lte")?,
    };
    if bounds == Range::default() {
        return Err(invalid(path, "needs at least one of lt, gt, gte, lte"));
    }
    Ok(Condition::ValuesCount { key, bounds })
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
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
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

    /// The path to the elements of the array at this path (`a` and `a[]` give `a[]`).
    fn elements(mut self) -> KeyPath {
        if self.items.last() != Some(&PathItem::Wildcard) {
            self.items.push(PathItem::Wildcard);
        }
        self
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

/// Counts the steps of one evaluation: a condition checked, a payload node a key path
/// reaches, a value compared. The cost per point is linear by construction: a condition
/// walks its path once (a path reaches each payload node at most once) and checks each
/// value it reaches once in constant time (`match.any` / `except` and `has_id` are sets);
/// a condition inside `nested` runs once per element, and elements are distinct nodes. So
/// a filter takes at most `conditions × (1 + 3 × payload nodes)` steps, each constant
/// apart from comparing texts, and the parser caps conditions and depth.
pub(crate) struct Work(Cell<u64>);

impl Work {
    fn step(&self) {
        self.0.set(self.0.get() + 1);
    }
}

/// Whether `visit` holds for some value at `items` below `value` (stopping at the first):
/// the values the path reaches, as they are (`[]` reaches each element of an array).
fn any_leaf<'a>(
    value: &'a Value,
    items: &[PathItem],
    work: &Work,
    visit: &mut dyn FnMut(&'a Value) -> bool,
) -> bool {
    work.step();
    let Some((head, rest)) = items.split_first() else {
        return visit(value);
    };
    match (head, value) {
        (PathItem::Key(key), Value::Object(object)) => object
            .get(key)
            .is_some_and(|child| any_leaf(child, rest, work, visit)),
        (PathItem::Index(index), Value::Array(elements)) => elements
            .get(*index)
            .is_some_and(|child| any_leaf(child, rest, work, visit)),
        (PathItem::Wildcard, Value::Array(elements)) => elements
            .iter()
            .any(|child| any_leaf(child, rest, work, visit)),
        _ => false,
    }
}

/// [`any_leaf`] from the root of a payload (none: no value).
fn any_leaf_of<'a>(
    payload: Option<&'a Value>,
    key: &KeyPath,
    work: &Work,
    visit: &mut dyn FnMut(&'a Value) -> bool,
) -> bool {
    payload.is_some_and(|payload| any_leaf(payload, key.items(), work, visit))
}

/// Whether `visit` holds for some value of the field at `key` (stopping at the first): the
/// values the path reaches, an array reached by a final key counting as its elements.
fn any_value<'a>(
    payload: Option<&'a Value>,
    key: &KeyPath,
    work: &Work,
    visit: &mut dyn FnMut(&'a Value) -> bool,
) -> bool {
    let Some(payload) = payload else {
        return false;
    };
    let mut check = |value: &'a Value| {
        work.step();
        visit(value)
    };
    if key.ends_with_key() {
        any_leaf(payload, key.items(), work, &mut |leaf| match leaf {
            Value::Array(elements) => elements.iter().any(&mut check),
            other => check(other),
        })
    } else {
        any_leaf(payload, key.items(), work, &mut check)
    }
}

/// The values at `key` (a Qdrant payload path: `a.b`, `a[]`, `a[0]`) of `payload`, an
/// array at the end giving its elements — what a group-by groups on. `None` when `key` is
/// not a valid path.
pub fn payload_values(payload: &Value, key: &str) -> Option<Vec<Value>> {
    let path = KeyPath::parse(key)?;
    let mut found = Vec::new();
    values_at(payload, &path, &mut found);
    Some(found.into_iter().cloned().collect())
}

/// Every value of the field at `key` (as [`any_value`] visits them).
pub(crate) fn values_at<'a>(payload: &'a Value, key: &KeyPath, out: &mut Vec<&'a Value>) {
    any_value(Some(payload), key, &Work(Cell::new(0)), &mut |value| {
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
    /// A geo condition: some value of the field is a point inside its area.
    fn holds_geo(&self, payload: Option<&Value>, work: &Work) -> bool {
        let (key, inside): (&KeyPath, &dyn Fn(crate::geo::Point) -> bool) = match self {
            // strictly inside the circle, as Qdrant
            Condition::GeoRadius {
                key,
                latitude,
                longitude,
                radius_meters,
            } => (key, &|(lon, lat)| {
                haversine_meters((*latitude, *longitude), (lat, lon)) < *radius_meters
            }),
            Condition::GeoBoundingBox { key, area } => (key, &|point| area.contains(point)),
            Condition::GeoPolygon { key, area } => (key, &|point| area.contains(point)),
            _ => unreachable!("holds_geo is called for geo conditions only"),
        };
        any_value(payload, key, work, &mut |v| {
            crate::geo::payload_point(v).is_some_and(inside)
        })
    }

    fn holds(&self, id: Option<&PointId>, payload: Option<&Value>, work: &Work) -> bool {
        work.step();
        match self {
            Condition::MatchValue { key, value } => {
                any_value(payload, key, work, &mut |v| scalar_equals(v, value))
            }
            Condition::MatchAny { key, values } => {
                any_value(payload, key, work, &mut |v| values.contains(v))
            }
            // Qdrant: some value of the field is outside the list; a null is no value, so a
            // missing key, `null`, `[]` or `[null]` never match.
            Condition::MatchExcept { key, values } => any_value(payload, key, work, &mut |v| {
                !v.is_null() && !values.contains(v)
            }),
            Condition::MatchText { key, text, .. } => any_value(
                payload,
                key,
                work,
                &mut |v| matches!(v, Value::String(s) if s.contains(text.as_str())),
            ),
            Condition::Range { key, bounds } => any_value(payload, key, work, &mut |v| {
                v.as_f64().is_some_and(|number| bounds.contains(number))
            }),
            Condition::DatetimeRange { key, bounds } => any_value(payload, key, work, &mut |v| {
                v.as_str()
                    .and_then(parse_timestamp)
                    .is_some_and(|seconds| bounds.contains(seconds))
            }),
            Condition::GeoRadius { .. }
            | Condition::GeoBoundingBox { .. }
            | Condition::GeoPolygon { .. } => self.holds_geo(payload, work),
            // the values as they are (an array at the key is one value), as Qdrant's
            // server reads them; a missing key matches nothing
            Condition::ValuesCount { key, bounds } => {
                any_leaf_of(payload, key, work, &mut |v| bounds.contains(value_count(v)))
            }
            Condition::MatchTextAny { key, words } => any_value(
                payload,
                key,
                work,
                &mut |v| matches!(v, Value::String(s) if words.iter().any(|word| s.contains(word.as_str()))),
            ),
            Condition::FullText { key, query } => any_value(
                payload,
                key,
                work,
                &mut |v| matches!(v, Value::String(s) if query.matches(s)),
            ),
            Condition::HasId(ids) => id.is_some_and(|id| ids.contains(id)),
            Condition::HasVector(name) => id.is_some() && name.is_empty(),
            // Both see the values as they are (`[null]` is one value, neither null nor
            // empty), as Qdrant's local mode does.
            Condition::IsEmpty { key } => !any_leaf_of(payload, key, work, &mut |v| match v {
                Value::Null => false,
                Value::Array(elements) => !elements.is_empty(),
                _ => true,
            }),
            Condition::IsNull { key } => any_leaf_of(payload, key, work, &mut Value::is_null),
            Condition::Nested(filter) => filter.holds(id, payload, work),
            Condition::NestedArray { key, filter } => {
                any_leaf_of(payload, key, work, &mut |element| {
                    element.is_object() && filter.holds(None, Some(element), work)
                })
            }
        }
    }
}
