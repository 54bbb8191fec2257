//! Payload filters in Qdrant's grammar, parsed once into a typed tree and evaluated against
//! a point's id and JSON payload.
//!
//! ```json
//! {"must": [...], "should": [...], "must_not": [...]}
//! ```
//! Conditions: `{"key": "a.b", "match": {"value": v} | {"any": [..]} | {"except": [..]} |
//! {"text": "..."}}`, `{"key": k, "range": {"gt"|"gte"|"lt"|"lte": number}}`,
//! `{"has_id": [ids]}`, `{"is_empty": {"key": k}}`, `{"is_null": {"key": k}}`, or a nested
//! filter. Keys are dotted paths; arrays met on the way are flattened, and a condition on an
//! array field holds when it holds for any element (Qdrant's semantics).
//!
//! Every parse error names the path inside the filter (`filter.must[1].range.gt`) and why.

use serde_json::Value;

use crate::error::{EngineError, Result};
use crate::point::PointId;

/// Most conditions in one filter tree (guards against pathological requests).
pub const MAX_FILTER_CONDITIONS: usize = 1_024;
/// Deepest nesting of filters.
pub const MAX_FILTER_DEPTH: usize = 16;

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Filter {
    pub must: Vec<Condition>,
    pub should: Vec<Condition>,
    pub must_not: Vec<Condition>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    Keyword(String),
    Integer(i64),
    Bool(bool),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Condition {
    MatchValue {
        key: Vec<String>,
        value: Scalar,
    },
    MatchAny {
        key: Vec<String>,
        values: Vec<Scalar>,
    },
    MatchExcept {
        key: Vec<String>,
        values: Vec<Scalar>,
    },
    MatchText {
        key: Vec<String>,
        text: String,
    },
    Range {
        key: Vec<String>,
        bounds: Range,
    },
    HasId(Vec<PointId>),
    IsEmpty {
        key: Vec<String>,
    },
    IsNull {
        key: Vec<String>,
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
            && (self.should.is_empty() || self.should.iter().any(|c| c.matches(id, payload)))
            && !self.must_not.iter().any(|c| c.matches(id, payload))
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
            let target = match name.as_str() {
                "must" => &mut filter.must,
                "should" => &mut filter.should,
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
        if object.contains_key("must")
            || object.contains_key("should")
            || object.contains_key("must_not")
        {
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
        for (name, make) in [
            (
                "is_empty",
                (|key| Condition::IsEmpty { key }) as fn(Vec<String>) -> Condition,
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
            for (name, bound) in bounds_object {
                let number = match bound {
                    Value::Null => None,
                    Value::Number(number) => number.as_f64(),
                    _ => return Err(invalid(&format!("{range_path}.{name}"), "must be a number")),
                };
                match name.as_str() {
                    "gt" => bounds.gt = number,
                    "gte" => bounds.gte = number,
                    "lt" => bounds.lt = number,
                    "lte" => bounds.lte = number,
                    _ => return Err(invalid(&format!("{range_path}.{name}"), "unknown bound")),
                }
            }
            return Ok(Condition::Range { key, bounds });
        }
        Err(invalid(
            path,
            "expected match, range, has_id, is_empty, is_null or a nested filter",
        ))
    }
}

fn parse_key(value: &Value, path: &str) -> Result<Vec<String>> {
    let Value::String(key) = value else {
        return Err(invalid(path, "must be a string"));
    };
    let parts: Vec<String> = key
        .split('.')
        .map(|part| part.trim_end_matches("[]").to_string())
        .collect();
    if key.is_empty() || parts.iter().any(String::is_empty) {
        return Err(invalid(path, format!("{key:?} is not a valid key path")));
    }
    Ok(parts)
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

/// Every value at `key` (arrays on the way and at the end are flattened).
pub(crate) fn values_at<'a>(payload: &'a Value, key: &[String], out: &mut Vec<&'a Value>) {
    match payload {
        Value::Array(items) => {
            for item in items {
                values_at(item, key, out);
            }
        }
        Value::Object(object) => {
            if let Some((first, rest)) = key.split_first() {
                if let Some(child) = object.get(first) {
                    if rest.is_empty() {
                        match child {
                            Value::Array(items) => out.extend(items.iter()),
                            other => out.push(other),
                        }
                    } else {
                        values_at(child, rest, out);
                    }
                }
            }
        }
        _ => {}
    }
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
        let field = |key: &[String]| {
            let mut out = Vec::new();
            if let Some(payload) = payload {
                values_at(payload, key, &mut out);
            }
            out
        };
        match self {
            Condition::MatchValue { key, value } => {
                field(key).iter().any(|v| scalar_equals(v, value))
            }
            Condition::MatchAny { key, values } => field(key)
                .iter()
                .any(|v| values.iter().any(|s| scalar_equals(v, s))),
            Condition::MatchExcept { key, values } => {
                let found = field(key);
                // Qdrant: matches when the field is missing, or has a value outside the list
                found.is_empty()
                    || found
                        .iter()
                        .any(|v| !values.iter().any(|s| scalar_equals(v, s)))
            }
            Condition::MatchText { key, text } => field(key)
                .iter()
                .any(|v| matches!(v, Value::String(s) if s.contains(text.as_str()))),
            Condition::Range { key, bounds } => field(key)
                .iter()
                .any(|v| v.as_f64().is_some_and(|number| bounds.contains(number))),
            Condition::HasId(ids) => ids.contains(id),
            Condition::IsEmpty { key } => field(key).iter().all(|v| v.is_null()),
            Condition::IsNull { key } => field(key).iter().any(|v| v.is_null()),
            Condition::Nested(filter) => filter.matches(id, payload),
        }
    }
}
