//! Payload indexes: per sealed segment, in memory, for the fields a collection declares
//! (keyword, integer, float, bool). They answer the indexable part of a filter — `match`
//! value / any on keyword, integer and bool fields, `range` on integer and float fields,
//! through `must` and nested `must` — with the exact list of candidate nodes, so the planner
//! knows a filter's cardinality instead of sampling it, and a selective filter scans only
//! its candidates. The full filter is still checked on every candidate: an index narrows,
//! it never decides alone.
//!
//! Segments are immutable apart from tombstones (a payload update copies the point into the
//! write buffer), so an index built when a segment is sealed or loaded stays valid; it is
//! rebuilt from the stored payloads at load, never written to disk.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;

use crate::error::{EngineError, Result};
use crate::filter::{values_at, Condition, Filter, KeyPath, PathItem, Range, Scalar};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldType {
    Keyword,
    Integer,
    Float,
    Bool,
}

impl FieldType {
    pub fn name(self) -> &'static str {
        match self {
            FieldType::Keyword => "keyword",
            FieldType::Integer => "integer",
            FieldType::Float => "float",
            FieldType::Bool => "bool",
        }
    }

    /// Parses Qdrant's schema names (`keyword`, `integer`, `float`, `bool`).
    pub fn parse(name: &str) -> Result<FieldType> {
        match name {
            "keyword" => Ok(FieldType::Keyword),
            "integer" => Ok(FieldType::Integer),
            "float" => Ok(FieldType::Float),
            "bool" => Ok(FieldType::Bool),
            other => Err(EngineError::InvalidPayloadIndex {
                field: String::new(),
                reason: format!(
                    "field_schema {other:?} is not supported: use keyword, integer, float or bool"
                ),
            }),
        }
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            FieldType::Keyword => 0,
            FieldType::Integer => 1,
            FieldType::Float => 2,
            FieldType::Bool => 3,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<FieldType> {
        [
            FieldType::Keyword,
            FieldType::Integer,
            FieldType::Float,
            FieldType::Bool,
        ]
        .into_iter()
        .find(|field| field.code() == code)
    }
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
}

impl FieldIndex {
    fn build(field: FieldType, key: &KeyPath, payloads: &[Option<Arc<Value>>]) -> FieldIndex {
        let mut index = match field {
            FieldType::Keyword => FieldIndex::Keyword(HashMap::new()),
            FieldType::Integer => FieldIndex::Integer(HashMap::new(), Vec::new()),
            FieldType::Float => FieldIndex::Float(Vec::new()),
            FieldType::Bool => FieldIndex::Bool([Vec::new(), Vec::new()]),
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
            FieldIndex::Float(sorted) => {
                sorted.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            }
            FieldIndex::Bool(lists) => lists.iter_mut().for_each(Vec::dedup),
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
            _ => None,
        }
    }

    /// Nodes with a value inside `bounds` (sorted, unique).
    fn range(&self, bounds: &Range) -> Option<Vec<u32>> {
        let (FieldIndex::Integer(_, sorted) | FieldIndex::Float(sorted)) = self else {
            return None;
        };
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
        Some(nodes)
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
