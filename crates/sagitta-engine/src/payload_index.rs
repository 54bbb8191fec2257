//! Payload indexes: per sealed segment, in memory, for the fields a collection declares
//! (keyword, integer, float, bool, uuid, datetime, geo, text). They answer the indexable
//! part of a filter — `match` value / any on keyword, integer, bool and uuid fields, `range`
//! on integer and float fields, a datetime `range` on datetime fields, the latitude band of
//! a geo condition on geo fields, the tokens of a full-text match on text fields, through
//! `must` and nested `must` — with a list of candidate nodes (exact for keyword, integer,
//! bool, ranges; a superset for uuid spellings, geo bands and phrases), so the planner knows
//! a filter's cardinality instead of sampling it, and a selective filter scans only its
//! candidates. The full filter is still checked on every candidate: an index narrows, it
//! never decides alone.
//!
//! A text index also changes what `match.text` / `text_any` / `phrase` mean on its field:
//! tokens instead of substrings ([`crate::fulltext`]); [`bind_text`] rewrites a filter's
//! text matches for the collection's text fields before it is evaluated.
//!
//! Segments are immutable apart from tombstones (a payload update copies the point into the
//! write buffer), so an index built when a segment is sealed or loaded stays valid; it is
//! rebuilt from the stored payloads at load, never written to disk.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;

use crate::datetime::parse_timestamp;
use crate::error::{EngineError, Result};
use crate::filter::{
    rewrite_conditions, values_at, Condition, Filter, KeyPath, PathItem, Range, Scalar,
    EARTH_RADIUS_METERS,
};
use crate::fulltext::{TextIndex, TextMode, TextQuery};
use crate::point::parse_uuid;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum FieldType {
    Keyword,
    Integer,
    Float,
    Bool,
    /// Strings holding UUIDs, matched by value (any spelling `match` accepts).
    Uuid,
    /// RFC 3339 strings, for datetime ranges.
    Datetime,
    /// `{"lon", "lat"}` objects, for geo conditions.
    Geo,
    /// Strings cut into tokens, for full-text matches.
    Text(TextIndex),
}

/// Every field type without settings, in code order (text, code 7, has settings).
const PLAIN_TYPES: [FieldType; 7] = [
    FieldType::Keyword,
    FieldType::Integer,
    FieldType::Float,
    FieldType::Bool,
    FieldType::Uuid,
    FieldType::Datetime,
    FieldType::Geo,
];

/// The manifest code of a text index.
const TEXT_CODE: u8 = 7;

impl FieldType {
    pub fn name(self) -> &'static str {
        match self {
            FieldType::Keyword => "keyword",
            FieldType::Integer => "integer",
            FieldType::Float => "float",
            FieldType::Bool => "bool",
            FieldType::Uuid => "uuid",
            FieldType::Datetime => "datetime",
            FieldType::Geo => "geo",
            FieldType::Text(_) => "text",
        }
    }

    /// Parses Qdrant's schema names (`keyword`, `integer`, `float`, `bool`, `uuid`,
    /// `datetime`, `geo`, `text` — a text index with the default settings).
    pub fn parse(name: &str) -> Result<FieldType> {
        if name == "text" {
            return Ok(FieldType::Text(TextIndex::default()));
        }
        PLAIN_TYPES
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| EngineError::InvalidPayloadIndex {
                field: String::new(),
                reason: format!(
                    "field_schema {name:?} is not supported: use keyword, integer, float, bool, \
                     uuid, datetime, geo or text"
                ),
            })
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            FieldType::Text(_) => TEXT_CODE,
            plain => PLAIN_TYPES
                .iter()
                .position(|kind| *kind == plain)
                .and_then(|code| u8::try_from(code).ok())
                .expect("a plain type is listed"),
        }
    }

    /// The type of `code`; a text index with the default settings for code 7, whose
    /// settings follow in the manifest.
    pub(crate) fn from_code(code: u8) -> Option<FieldType> {
        if code == TEXT_CODE {
            return Some(FieldType::Text(TextIndex::default()));
        }
        PLAIN_TYPES.get(usize::from(code)).copied()
    }
}

/// Replaces the `match.text` / `text_any` / `phrase` conditions of `filter` on fields with a
/// text index in `schema` by their token form; whether any was. A `phrase` on an index made
/// without `phrase_matching` is an error naming the field.
pub fn bind_text(filter: &mut Filter, schema: &PayloadSchema) -> Result<bool> {
    let texts: HashMap<KeyPath, (&str, TextIndex)> = schema
        .iter()
        .filter_map(|(field, kind)| match kind {
            FieldType::Text(index) => Some((key_path(field), (field.as_str(), *index))),
            _ => None,
        })
        .collect();
    if texts.is_empty() {
        return Ok(false);
    }
    rewrite_conditions(filter, &mut |condition| {
        let (key, text, mode) = match condition {
            Condition::MatchText { key, text, phrase } => {
                let mode = if *phrase {
                    TextMode::Phrase
                } else {
                    TextMode::All
                };
                (key, text.clone(), mode)
            }
            Condition::MatchTextAny { key, words } => (key, words.join(" "), TextMode::Any),
            _ => return Ok(false),
        };
        let Some((field, index)) = texts.get(key) else {
            return Ok(false);
        };
        if mode == TextMode::Phrase && !index.phrase_matching {
            return Err(EngineError::InvalidFilter {
                path: format!("match.phrase on {field:?}"),
                reason: "the field's text index was created without phrase_matching".into(),
            });
        }
        let query = Box::new(index.query(&text, mode));
        *condition = Condition::FullText {
            key: key.clone(),
            query,
        };
        Ok(true)
    })
}

/// Indexed fields by dotted key.
pub type PayloadSchema = BTreeMap<String, FieldType>;

/// Longest indexed field name.
pub const MAX_FIELD_NAME_BYTES: usize = 255;
/// Most indexed fields per collection.
pub const MAX_INDEXED_FIELDS: usize = 64;

/// A field name is 1..=255 bytes of dotted, non-empty parts.
pub fn check_field_name(field: &str) -> Result<()> {
    let reason = if field.is_empty() || field.len() > MAX_FIELD_NAME_BYTES {
        Some(format!("must be 1 to {MAX_FIELD_NAME_BYTES} bytes"))
    } else if field.split('.').any(str::is_empty) {
        Some("has an empty part between dots".to_string())
    } else {
        None
    };
    match reason {
        Some(reason) => Err(EngineError::InvalidPayloadIndex {
            field: field.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// The key path of an indexed field: parsed as a filter's key is, so that a filter names
/// the same path; a name that is no key path becomes one key (which only a quoted filter key
/// can name, and then the index holds exactly its values).
fn key_path(field: &str) -> KeyPath {
    KeyPath::parse(field)
        .unwrap_or_else(|| KeyPath::from_items(vec![PathItem::Key(field.to_string())]))
}

enum FieldIndex {
    Keyword(HashMap<String, Vec<u32>>),
    /// Equality lists and the (value, node) pairs sorted for ranges.
    Integer(HashMap<i64, Vec<u32>>, Vec<(f64, u32)>),
    Float(Vec<(f64, u32)>),
    /// Nodes holding false, nodes holding true.
    Bool([Vec<u32>; 2]),
    Uuid(HashMap<u128, Vec<u32>>),
    /// (epoch seconds, node), sorted.
    Datetime(Vec<(f64, u32)>),
    /// (latitude, node), sorted.
    Geo(Vec<(f64, u32)>),
    /// The index's settings and its token lists.
    Text(TextIndex, HashMap<String, Vec<u32>>),
}

impl FieldIndex {
    fn build(field: FieldType, key: &KeyPath, payloads: &[Option<Arc<Value>>]) -> FieldIndex {
        let mut index = match field {
            FieldType::Keyword => FieldIndex::Keyword(HashMap::new()),
            FieldType::Integer => FieldIndex::Integer(HashMap::new(), Vec::new()),
            FieldType::Float => FieldIndex::Float(Vec::new()),
            FieldType::Bool => FieldIndex::Bool([Vec::new(), Vec::new()]),
            FieldType::Uuid => FieldIndex::Uuid(HashMap::new()),
            FieldType::Datetime => FieldIndex::Datetime(Vec::new()),
            FieldType::Geo => FieldIndex::Geo(Vec::new()),
            FieldType::Text(settings) => FieldIndex::Text(settings, HashMap::new()),
        };
        let mut values = Vec::new();
        for (node, payload) in payloads.iter().enumerate() {
            let Some(payload) = payload else {
                continue;
            };
            let node = u32::try_from(node).expect("segment size");
            values.clear();
            values_at(payload, key, &mut values);
            for value in &values {
                index.insert(value, node);
            }
        }
        index.finish();
        index
    }

    fn insert(&mut self, value: &Value, node: u32) {
        match (self, value) {
            (FieldIndex::Keyword(map), Value::String(text)) => {
                map.entry(text.clone()).or_default().push(node);
            }
            (FieldIndex::Integer(map, sorted), Value::Number(number)) => {
                if let Some(integer) = number.as_i64() {
                    map.entry(integer).or_default().push(node);
                }
                if let Some(float) = number.as_f64() {
                    sorted.push((float, node));
                }
            }
            (FieldIndex::Float(sorted), Value::Number(number)) => {
                if let Some(float) = number.as_f64() {
                    sorted.push((float, node));
                }
            }
            (FieldIndex::Bool(lists), Value::Bool(flag)) => lists[usize::from(*flag)].push(node),
            (FieldIndex::Uuid(map), Value::String(text)) => {
                if let Some(uuid) = parse_uuid(text) {
                    map.entry(uuid).or_default().push(node);
                }
            }
            (FieldIndex::Datetime(sorted), Value::String(text)) => {
                if let Some(seconds) = parse_timestamp(text) {
                    sorted.push((seconds, node));
                }
            }
            (FieldIndex::Geo(sorted), value) => {
                if let Some((_, latitude)) = crate::geo::payload_point(value) {
                    sorted.push((latitude, node));
                }
            }
            (FieldIndex::Text(settings, map), Value::String(text)) => {
                let mut tokens = Vec::new();
                settings.document_tokens(text, &mut tokens);
                for token in tokens {
                    map.entry(token).or_default().push(node);
                }
            }
            _ => {}
        }
    }

    /// Sorts range lists; equality lists are already in node order (nodes are visited in
    /// order) but may repeat a node holding a value twice in an array.
    fn finish(&mut self) {
        match self {
            FieldIndex::Keyword(map) => map.values_mut().for_each(Vec::dedup),
            FieldIndex::Integer(map, sorted) => {
                map.values_mut().for_each(Vec::dedup);
                sorted.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            }
            FieldIndex::Float(sorted) | FieldIndex::Datetime(sorted) | FieldIndex::Geo(sorted) => {
                sorted.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            }
            FieldIndex::Bool(lists) => lists.iter_mut().for_each(Vec::dedup),
            FieldIndex::Uuid(map) => map.values_mut().for_each(Vec::dedup),
            FieldIndex::Text(_, map) => map.values_mut().for_each(Vec::dedup),
        }
    }

    /// Nodes holding `scalar`, if this index can tell (sorted, unique).
    fn equal(&self, scalar: &Scalar) -> Option<Vec<u32>> {
        match (self, scalar) {
            (FieldIndex::Keyword(map), Scalar::Keyword(text)) => {
                Some(map.get(text).cloned().unwrap_or_default())
            }
            (FieldIndex::Integer(map, _), Scalar::Integer(value)) => {
                Some(map.get(value).cloned().unwrap_or_default())
            }
            (FieldIndex::Bool(lists), Scalar::Bool(flag)) => {
                Some(lists[usize::from(*flag)].clone())
            }
            // the nodes whose value is this UUID in any spelling: a superset of those
            // holding the exact string the filter then asks for
            (FieldIndex::Uuid(map), Scalar::Keyword(text)) => {
                Some(map.get(&parse_uuid(text)?).cloned().unwrap_or_default())
            }
            _ => None,
        }
    }

    /// Nodes with a number inside `bounds` (sorted, unique).
    fn range(&self, bounds: &Range) -> Option<Vec<u32>> {
        let (FieldIndex::Integer(_, sorted) | FieldIndex::Float(sorted)) = self else {
            return None;
        };
        Some(sorted_range(sorted, bounds))
    }

    /// Nodes with a datetime inside `bounds` (epoch seconds; sorted, unique).
    fn datetime_range(&self, bounds: &Range) -> Option<Vec<u32>> {
        let FieldIndex::Datetime(sorted) = self else {
            return None;
        };
        Some(sorted_range(sorted, bounds))
    }

    /// Nodes with a geo point whose latitude is within `south..=north` (sorted, unique).
    fn latitudes(&self, (south, north): (f64, f64)) -> Option<Vec<u32>> {
        let FieldIndex::Geo(sorted) = self else {
            return None;
        };
        let bounds = Range {
            gte: Some(south),
            lte: Some(north),
            ..Range::default()
        };
        Some(sorted_range(sorted, &bounds))
    }

    /// Nodes that have the query's tokens (all of them, or one for `text_any`; sorted,
    /// unique) — only from an index cut with the query's own settings.
    fn tokens(&self, query: &TextQuery) -> Option<Vec<u32>> {
        let FieldIndex::Text(settings, map) = self else {
            return None;
        };
        if *settings != query.index {
            return None;
        }
        let mut lists = query
            .tokens
            .iter()
            .map(|token| map.get(token).map_or(&[][..], Vec::as_slice));
        let Some(first) = lists.next() else {
            return Some(Vec::new());
        };
        let mut nodes = first.to_vec();
        for list in lists {
            nodes = if query.mode == TextMode::Any {
                let mut union: Vec<u32> = nodes.into_iter().chain(list.iter().copied()).collect();
                union.sort_unstable();
                union.dedup();
                union
            } else {
                intersect(&nodes, list)
            };
        }
        Some(nodes)
    }
}

/// The nodes of (value, node) pairs sorted by value whose value is inside `bounds`
/// (sorted, unique).
fn sorted_range(sorted: &[(f64, u32)], bounds: &Range) -> Vec<u32> {
    let start = sorted.partition_point(|(value, _)| {
        bounds.gt.is_some_and(|b| *value <= b) || bounds.gte.is_some_and(|b| *value < b)
    });
    let end = sorted.partition_point(|(value, _)| {
        bounds.lt.is_none_or(|b| *value < b) && bounds.lte.is_none_or(|b| *value <= b)
    });
    let mut nodes: Vec<u32> = sorted
        .get(start..end.max(start))
        .unwrap_or_default()
        .iter()
        .map(|(_, node)| *node)
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
}

/// The latitudes a geo condition's points lie within, if it is one.
fn latitude_band(condition: &Condition) -> Option<(f64, f64)> {
    match condition {
        Condition::GeoRadius {
            latitude,
            radius_meters,
            ..
        } => {
            // a point within r meters along the sphere is within r / R radians of latitude
            let degrees = (radius_meters / EARTH_RADIUS_METERS).to_degrees();
            Some((latitude - degrees, latitude + degrees))
        }
        Condition::GeoBoundingBox { area, .. } => Some(area.latitudes()),
        Condition::GeoPolygon { area, .. } => Some(area.latitudes()),
        _ => None,
    }
}

/// The payload indexes of one segment.
#[derive(Default)]
pub(crate) struct SegmentIndexes {
    fields: HashMap<KeyPath, FieldIndex>,
    /// The schema they were built for.
    schema: PayloadSchema,
}

impl SegmentIndexes {
    pub fn build(schema: &PayloadSchema, payloads: &[Option<Arc<Value>>]) -> SegmentIndexes {
        let mut indexes = SegmentIndexes::default();
        for (field, kind) in schema {
            indexes.add(field, *kind, payloads);
        }
        indexes
    }

    pub fn add(&mut self, field: &str, kind: FieldType, payloads: &[Option<Arc<Value>>]) {
        let key = key_path(field);
        let index = FieldIndex::build(kind, &key, payloads);
        self.fields.insert(key, index);
        self.schema.insert(field.to_string(), kind);
    }

    pub fn remove(&mut self, field: &str) {
        self.fields.remove(&key_path(field));
        self.schema.remove(field);
    }

    pub fn matches(&self, schema: &PayloadSchema) -> bool {
        self.schema == *schema
    }

    /// A superset of the nodes passing `filter`, from its indexable `must` conditions
    /// (sorted, unique); `None` when no condition is indexable.
    pub fn candidates(&self, filter: &Filter) -> Option<Vec<u32>> {
        let mut best: Option<Vec<u32>> = None;
        for condition in &filter.must {
            if let Some(nodes) = self.condition(condition) {
                best = Some(match best {
                    None => nodes,
                    Some(current) => intersect(&current, &nodes),
                });
            }
        }
        best
    }

    fn condition(&self, condition: &Condition) -> Option<Vec<u32>> {
        match condition {
            Condition::MatchValue { key, value } => self.fields.get(key)?.equal(value),
            Condition::MatchAny { key, values } => {
                let index = self.fields.get(key)?;
                let mut nodes = Vec::new();
                for value in values.scalars() {
                    nodes.extend(index.equal(&value)?);
                }
                nodes.sort_unstable();
                nodes.dedup();
                Some(nodes)
            }
            Condition::Range { key, bounds } => self.fields.get(key)?.range(bounds),
            Condition::DatetimeRange { key, bounds } => {
                self.fields.get(key)?.datetime_range(bounds)
            }
            Condition::GeoRadius { key, .. }
            | Condition::GeoBoundingBox { key, .. }
            | Condition::GeoPolygon { key, .. } => {
                self.fields.get(key)?.latitudes(latitude_band(condition)?)
            }
            Condition::FullText { key, query } => self.fields.get(key)?.tokens(query),
            Condition::Nested(filter) => self.candidates(filter),
            _ => None,
        }
    }
}

fn intersect(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(a.len().min(b.len()));
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}
