//! Facet counts (Qdrant's `POST /collections/{c}/facet`): how many points passing a filter
//! hold each value of an indexed field.
//!
//! As in Qdrant, the field must have a keyword, integer or bool payload index, and the
//! values counted are those of the index's type (a keyword index counts strings only). A
//! point counts once per distinct value, however often it holds it. Hits are ordered by
//! count, most first, then by value ascending; at most `limit` are returned.
//!
//! Cost: one pass over the points passing the filter, reading each one's payload (the
//! per-segment index is not consulted yet), so O(matching points).

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use crate::error::{EngineError, Result};
use crate::filter::{values_at, Filter, KeyPath};
use crate::payload_index::FieldType;

use super::config::{check_range, MAX_LIMIT};
use super::Collection;

/// A value facet counts, of the field index's type.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FacetValue {
    Bool(bool),
    Integer(i64),
    Keyword(String),
}

impl FacetValue {
    fn of(value: &Value, field_type: FieldType) -> Option<FacetValue> {
        match (field_type, value) {
            (FieldType::Keyword, Value::String(text)) => Some(FacetValue::Keyword(text.clone())),
            (FieldType::Integer, Value::Number(number)) => number.as_i64().map(FacetValue::Integer),
            (FieldType::Bool, Value::Bool(flag)) => Some(FacetValue::Bool(*flag)),
            _ => None,
        }
    }
}

impl Collection {
    /// The values of field `key` among the points passing `filter`, with how many points
    /// hold each: count descending, then value ascending, at most `limit` (1..=10,000).
    pub fn facet(
        &self,
        key: &str,
        filter: Option<&Filter>,
        limit: usize,
    ) -> Result<Vec<(FacetValue, u64)>> {
        check_range("limit", limit, 1, MAX_LIMIT)?;
        let field_type = match self.payload_schema().get(key) {
            Some(field_type @ (FieldType::Keyword | FieldType::Integer | FieldType::Bool)) => {
                *field_type
            }
            _ => {
                return Err(EngineError::InvalidPayloadIndex {
                    field: key.to_string(),
                    reason: "Index required but not found for it of one of the following \
                             types: [keyword, integer, bool]. Help: create an index for \
                             this key"
                        .to_string(),
                })
            }
        };
        let path = KeyPath::parse(key).ok_or_else(|| EngineError::InvalidPayloadIndex {
            field: key.to_string(),
            reason: "is not a valid key path".to_string(),
        })?;
        // without a filter, every live id: no empty filter evaluated on each point
        let ids = self.ids(filter, None)?;
        let mut counts: HashMap<FacetValue, u64> = HashMap::new();
        // a point deleted since the ids were listed is not visited
        self.for_each_point(&ids, |point| {
            let Some(payload) = point.payload.as_deref() else {
                return;
            };
            let Ok(payload) = serde_json::from_str::<Value>(payload) else {
                return;
            };
            let mut values = Vec::new();
            values_at(&payload, &path, &mut values);
            let distinct: BTreeSet<FacetValue> = values
                .iter()
                .filter_map(|value| FacetValue::of(value, field_type))
                .collect();
            for value in distinct {
                *counts.entry(value).or_default() += 1;
            }
        })?;
        let mut hits: Vec<(FacetValue, u64)> = counts.into_iter().collect();
        hits.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        hits.truncate(limit);
        Ok(hits)
    }
}
