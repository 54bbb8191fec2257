//! `with_payload` and `with_vector`: what a response carries of each point.
//!
//! Payload keys are paths as in Qdrant: `a.b` steps into objects, `a[]` into every
//! element of an array (`objs[].n`). An include pattern keeps a value when the pattern and
//! the value's path agree step by step as far as both go: the containers on the way to
//! the pattern are kept (holding only what lies on the way), and everything under it. An
//! exclude pattern drops a value when the pattern is its path or a prefix of it. Scalars
//! met on the way are kept as they are; an index step (`a[0]`) never equals the
//! all-elements step, so it selects nothing, as in Qdrant.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use sagitta_engine::VectorSpaces;

use super::fields::{refuse_value, unknown_field};
use super::{unknown_vector_name, DEFAULT_VECTOR_NAME};
use crate::error::ApiResult;

/// `with_payload`: a flag, a list of keys, or `{"include": [..]}` / `{"exclude": [..]}`.
#[derive(Clone, Debug, PartialEq)]
pub enum WithPayload {
    Flag(bool),
    Keys(Vec<String>),
    Selector(PayloadSelector),
}

#[derive(Clone, Debug, PartialEq)]
pub enum PayloadSelector {
    Include(Vec<String>),
    Exclude(Vec<String>),
}

impl<'de> Deserialize<'de> for WithPayload {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<WithPayload, D::Error> {
        struct WithPayloadVisitor;
        impl<'de> Visitor<'de> for WithPayloadVisitor {
            type Value = WithPayload;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "true, false, a list of payload keys, or {\"include\": [..]} or \
                     {\"exclude\": [..]}",
                )
            }
            fn visit_bool<E: de::Error>(self, flag: bool) -> Result<WithPayload, E> {
                Ok(WithPayload::Flag(flag))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<WithPayload, A::Error> {
                let mut keys = Vec::new();
                while let Some(key) = seq.next_element::<String>()? {
                    keys.push(key);
                }
                Ok(WithPayload::Keys(keys))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WithPayload, A::Error> {
                let mut selector = None;
                while let Some(key) = map.next_key::<String>()? {
                    if selector.is_some() {
                        return Err(refuse_value(
                            &mut map,
                            "give one of `include` or `exclude`, not both".to_string(),
                        ));
                    }
                    selector = Some(match key.as_str() {
                        "include" => PayloadSelector::Include(map.next_value()?),
                        "exclude" => PayloadSelector::Exclude(map.next_value()?),
                        _ => {
                            return Err(refuse_value(
                                &mut map,
                                unknown_field(&key, &["include", "exclude"]),
                            ))
                        }
                    });
                }
                selector
                    .map(WithPayload::Selector)
                    .ok_or_else(|| de::Error::custom("expected `include` or `exclude`"))
            }
        }
        deserializer.deserialize_any(WithPayloadVisitor)
    }
}

/// `with_vector`: a flag or a list of vector names (only `""` exists).
#[derive(Clone, Debug, PartialEq)]
pub enum WithVector {
    Flag(bool),
    Names(Vec<String>),
}

impl<'de> Deserialize<'de> for WithVector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<WithVector, D::Error> {
        struct WithVectorVisitor;
        impl<'de> Visitor<'de> for WithVectorVisitor {
            type Value = WithVector;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false, or a list of vector names")
            }
            fn visit_bool<E: de::Error>(self, flag: bool) -> Result<WithVector, E> {
                Ok(WithVector::Flag(flag))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<WithVector, A::Error> {
                let mut names = Vec::new();
                while let Some(VectorName(name)) = seq.next_element()? {
                    names.push(name);
                }
                Ok(WithVector::Names(names))
            }
        }
        deserializer.deserialize_any(WithVectorVisitor)
    }
}

/// A vector name (checked against the collection by [`WithVector::pick`]).
struct VectorName(String);

impl<'de> Deserialize<'de> for VectorName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<VectorName, D::Error> {
        String::deserialize(deserializer).map(VectorName)
    }
}

/// Which of a point's vectors a response shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VectorPick {
    None,
    All,
    /// These named vectors, where the point has them: dense ones by their number in the
    /// collection's order, sparse ones by the dense count plus theirs.
    Spaces(Vec<usize>),
}

impl WithVector {
    /// What `with_vector` asks of a collection with named vectors `spaces` (none: the one
    /// unnamed vector, `""`); a name it does not have is an error.
    pub fn pick(option: Option<&WithVector>, spaces: &VectorSpaces) -> ApiResult<VectorPick> {
        match option {
            None | Some(WithVector::Flag(false)) => Ok(VectorPick::None),
            Some(WithVector::Flag(true)) => Ok(VectorPick::All),
            Some(WithVector::Names(names)) if !spaces.is_named() => {
                match names.iter().find(|name| *name != DEFAULT_VECTOR_NAME) {
                    Some(name) => Err(unknown_vector_name("with_vector", name)),
                    None if names.is_empty() => Ok(VectorPick::None),
                    None => Ok(VectorPick::All),
                }
            }
            Some(WithVector::Names(names)) => names
                .iter()
                .map(|name| {
                    spaces
                        .number_of(name)
                        .ok_or_else(|| unknown_vector_name("with_vector", name))
                })
                .collect::<ApiResult<Vec<usize>>>()
                .map(VectorPick::Spaces),
        }
    }
}

/// A stored payload shaped for a response.
pub enum PayloadOutput {
    Raw(Box<RawValue>),
    Value(Map<String, Value>),
}

impl Serialize for PayloadOutput {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            PayloadOutput::Raw(raw) => raw.serialize(serializer),
            PayloadOutput::Value(map) => map.serialize(serializer),
        }
    }
}

/// Applies `selector` to a stored payload (`None` = the point has none: `{}`).
pub fn select_payload(stored: Option<String>, selector: &WithPayload) -> Option<PayloadOutput> {
    let text = stored.unwrap_or_else(|| "{}".to_string());
    let (patterns, include) = match selector {
        WithPayload::Flag(false) => return None,
        WithPayload::Flag(true) => {
            return RawValue::from_string(text).ok().map(PayloadOutput::Raw);
        }
        WithPayload::Keys(keys) | WithPayload::Selector(PayloadSelector::Include(keys)) => {
            (keys, true)
        }
        WithPayload::Selector(PayloadSelector::Exclude(keys)) => (keys, false),
    };
    let full: Map<String, Value> = serde_json::from_str(&text).unwrap_or_default();
    let patterns: Vec<Vec<Step<'_>>> = patterns.iter().map(|key| steps(key)).collect();
    let keep = |at: &[Step<'_>]| {
        if include {
            patterns.iter().any(|pattern| agree(pattern, at))
        } else {
            !patterns
                .iter()
                .any(|pattern| pattern.len() <= at.len() && agree(pattern, at))
        }
    };
    Some(PayloadOutput::Value(kept_object(
        &full,
        &mut Vec::new(),
        &keep,
    )))
}

/// One step of a payload path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step<'a> {
    Key(&'a str),
    /// `[]`: every element of an array.
    Elements,
    /// `[n]` (or anything else in brackets, or stray text): never met in a payload walk.
    Other(&'a str),
}

/// The steps of a key path: `a.b[].c` is `a`, `b`, `[]`, `c`.
fn steps(path: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    for segment in path.split('.') {
        let (name, mut rest) = segment.split_at(segment.find('[').unwrap_or(segment.len()));
        out.push(Step::Key(name));
        while !rest.is_empty() {
            match rest
                .strip_prefix('[')
                .and_then(|inner| inner.split_once(']'))
            {
                Some(("", after)) => {
                    out.push(Step::Elements);
                    rest = after;
                }
                Some((inner, after)) => {
                    out.push(Step::Other(inner));
                    rest = after;
                }
                None => {
                    out.push(Step::Other(rest));
                    rest = "";
                }
            }
        }
    }
    out
}

/// Whether `pattern` and the path `at` agree on every step both have.
fn agree(pattern: &[Step<'_>], at: &[Step<'_>]) -> bool {
    pattern.iter().zip(at).all(|(a, b)| a == b)
}

fn kept_object<'a>(
    map: &'a Map<String, Value>,
    at: &mut Vec<Step<'a>>,
    keep: &dyn Fn(&[Step<'_>]) -> bool,
) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in map {
        at.push(Step::Key(key));
        if keep(at) {
            out.insert(key.clone(), kept_value(value, at, keep));
        }
        at.pop();
    }
    out
}

fn kept_value<'a>(
    value: &'a Value,
    at: &mut Vec<Step<'a>>,
    keep: &dyn Fn(&[Step<'_>]) -> bool,
) -> Value {
    match value {
        Value::Object(map) => Value::Object(kept_object(map, at, keep)),
        Value::Array(items) => {
            at.push(Step::Elements);
            let kept = if keep(at) {
                items
                    .iter()
                    .map(|item| kept_value(item, at, keep))
                    .collect()
            } else {
                Vec::new()
            };
            at.pop();
            Value::Array(kept)
        }
        scalar => scalar.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_into_steps() {
        assert_eq!(
            steps("a.b[].c"),
            vec![
                Step::Key("a"),
                Step::Key("b"),
                Step::Elements,
                Step::Key("c")
            ]
        );
        assert_eq!(
            steps("a[0][]"),
            vec![Step::Key("a"), Step::Other("0"), Step::Elements]
        );
        assert_eq!(steps("a[x"), vec![Step::Key("a"), Step::Other("[x")]);
    }

    #[test]
    fn selections() {
        let stored = Some(r#"{"a":1,"b":{"c":2,"d":3},"l":[{"n":1,"m":2},7]}"#.to_string());
        let render = |selector: &WithPayload| {
            serde_json::to_string(&select_payload(stored.clone(), selector)).unwrap()
        };
        let keys = |keys: &[&str]| keys.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(render(&WithPayload::Flag(false)), "null");
        assert_eq!(
            render(&WithPayload::Keys(keys(&["b.c"]))),
            r#"{"b":{"c":2}}"#
        );
        assert_eq!(
            render(&WithPayload::Keys(keys(&["l[].m", "a.x"]))),
            r#"{"a":1,"l":[{"m":2},7]}"#
        );
        assert_eq!(render(&WithPayload::Keys(keys(&["l[0]"]))), r#"{"l":[]}"#);
        assert_eq!(
            render(&WithPayload::Selector(PayloadSelector::Exclude(keys(&[
                "b.d", "a", "l[].n"
            ])))),
            r#"{"b":{"c":2},"l":[{"m":2},7]}"#
        );
        assert_eq!(
            render(&WithPayload::Selector(PayloadSelector::Exclude(keys(&[
                "b.c.x"
            ])))),
            r#"{"a":1,"b":{"c":2,"d":3},"l":[{"m":2,"n":1},7]}"#
        );
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
