//! Payload indexes: `PUT /collections/{c}/index`, `DELETE /collections/{c}/index/{field}`
//! and the `payload_schema` of collection info.
//!
//! `field_schema` is a type name (`keyword`, `integer`, `float`, `bool`, `uuid`,
//! `datetime`, `geo`, `text`) or `{"type": .., settings}`. A text index's settings
//! (`tokenizer`, `min_token_len`, `max_token_len`, `lowercase`, `phrase_matching`) change
//! how text matches on its field behave and are kept in the engine's manifest; the
//! multilingual tokenizer, stop words, stemming and ASCII folding are refused by name. The
//! other settings (`is_tenant`, `on_disk`, `enable_hnsw`, `lookup`, `range`,
//! `is_principal`) are hints about where and how Qdrant would keep the index: SagittaDB
//! keeps every index in RAM and uses it for every condition it can answer, so they change
//! no result; they are recorded in the collection's settings document and echoed back.

use sagitta_engine::fulltext::{TextIndex, Tokenizer};
use sagitta_engine::{Collection, FieldType};
use serde_json::{json, Map, Value};

use crate::error::{ApiError, ApiResult};
use crate::settings::Settings;

/// The settings of a payload index besides `type` that are hints (booleans).
const INDEX_HINTS: &[&str] = &[
    "is_tenant",
    "on_disk",
    "enable_hnsw",
    "lookup",
    "range",
    "is_principal",
];

/// A text index's own settings.
const TEXT_SETTINGS: &[&str] = &[
    "tokenizer",
    "min_token_len",
    "max_token_len",
    "lowercase",
    "phrase_matching",
    "ascii_folding",
    "stopwords",
    "stemmer",
];

fn wrong(field: &str, reason: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("Wrong input: `field_schema.{field}`: {reason}"))
}

/// A `field_schema`: the engine's field type and the hints given with it.
pub struct Schema {
    pub kind: FieldType,
    pub hints: Map<String, Value>,
}

pub fn parse_schema(value: &Value) -> ApiResult<Schema> {
    let object = match value {
        Value::String(name) => {
            return Ok(Schema {
                kind: field_type(name)?,
                hints: Map::new(),
            })
        }
        Value::Object(object) => object,
        _ => {
            return Err(ApiError::bad_request(
                "Wrong input: `field_schema` must be a type name or {\"type\": name, ..}",
            ))
        }
    };
    let name = object
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| wrong("type", "is required: a type name"))?;
    let mut kind = field_type(name)?;
    let mut hints = Map::new();
    for (key, value) in object {
        if INDEX_HINTS.contains(&key.as_str()) {
            if !value.is_null() && !value.is_boolean() {
                return Err(wrong(key, "must be true, false or null"));
            }
            if !value.is_null() {
                hints.insert(key.clone(), value.clone());
            }
        } else if TEXT_SETTINGS.contains(&key.as_str()) {
            if !matches!(kind, FieldType::Text(_)) {
                return Err(wrong(
                    key,
                    format!("is a setting of text indexes, not of {name}"),
                ));
            }
        } else if key != "type" {
            return Err(wrong(key, "unknown field"));
        }
    }
    if let FieldType::Text(settings) = &mut kind {
        *settings = text_settings(object)?;
    }
    Ok(Schema { kind, hints })
}

fn field_type(name: &str) -> ApiResult<FieldType> {
    FieldType::parse(name).map_err(|_| {
        ApiError::bad_request(format!(
            "Wrong input: `field_schema` = {name:?}: SagittaDB indexes keyword, integer, float, \
             bool, uuid, datetime, geo and text fields"
        ))
    })
}

fn text_settings(object: &Map<String, Value>) -> ApiResult<TextIndex> {
    let get = |key: &str| object.get(key).filter(|value| !value.is_null());
    let flag = |key: &str, default: bool| match get(key) {
        None => Ok(default),
        Some(value) => value
            .as_bool()
            .ok_or_else(|| wrong(key, "must be true or false")),
    };
    let length = |key: &str| match get(key) {
        None => Ok(None),
        Some(value) => value
            .as_u64()
            .and_then(|length| u16::try_from(length).ok())
            .filter(|length| *length > 0)
            .map(Some)
            .ok_or_else(|| wrong(key, "must be a whole number from 1 to 65535")),
    };
    let tokenizer = match get("tokenizer") {
        None => Tokenizer::Word,
        Some(value) => {
            let name = value.as_str().unwrap_or_default();
            Tokenizer::parse(name).ok_or_else(|| {
                wrong(
                    "tokenizer",
                    format!("{value} is not supported: use word, whitespace or prefix"),
                )
            })?
        }
    };
    if flag("ascii_folding", false)? {
        return Err(wrong("ascii_folding", "ASCII folding is not supported"));
    }
    for unsupported in ["stopwords", "stemmer"] {
        if get(unsupported).is_some() {
            return Err(wrong(unsupported, "is not supported (leave it out)"));
        }
    }
    let settings = TextIndex {
        tokenizer,
        lowercase: flag("lowercase", true)?,
        min_token_len: length("min_token_len")?,
        max_token_len: length("max_token_len")?,
        phrase_matching: flag("phrase_matching", false)?,
    };
    settings.check().map_err(|reason| {
        ApiError::bad_request(format!("Wrong input: `field_schema`: {reason}"))
    })?;
    Ok(settings)
}

/// Records the hints of the index just made (or removed: `None`) on `field` in the
/// collection's settings document, if they changed.
pub fn record_hints(
    target: &Collection,
    fs: &dyn sagitta_storage::fs::FileSystem,
    name: &str,
    field: &str,
    hints: Option<Map<String, Value>>,
) -> ApiResult<()> {
    let settings = Settings::of(target);
    let updated = settings.with_index_hints(field, hints.filter(|hints| !hints.is_empty()));
    if updated != settings {
        updated.store(target, fs, name)?;
    }
    Ok(())
}

/// Collection info's `payload_schema`: each indexed field's type, its settings (`null` for
/// an index made from a bare type name) and the points that have a value for it.
pub fn payload_schema(collection: &Collection, settings: &Settings) -> Map<String, Value> {
    collection
        .payload_schema()
        .into_iter()
        .map(|(field, kind)| {
            let hints = settings.index_hints(&field);
            let params = match (kind, hints) {
                (FieldType::Text(text), hints) => {
                    let mut params = text_params(&text);
                    params.extend(hints.cloned().unwrap_or_default());
                    Value::Object(params)
                }
                (_, Some(hints)) => {
                    let mut params = Map::from_iter([("type".to_string(), json!(kind.name()))]);
                    params.extend(hints.clone());
                    Value::Object(params)
                }
                (_, None) => Value::Null,
            };
            let points = indexed_points(collection, &field);
            let entry = json!({ "data_type": kind.name(), "params": params, "points": points });
            (field, entry)
        })
        .collect()
}

fn text_params(text: &TextIndex) -> Map<String, Value> {
    let Value::Object(params) = json!({
        "type": "text",
        "tokenizer": text.tokenizer.name(),
        "min_token_len": text.min_token_len,
        "max_token_len": text.max_token_len,
        "lowercase": text.lowercase,
        "phrase_matching": text.phrase_matching,
    }) else {
        unreachable!("an object literal")
    };
    params
}

/// Points that have a value for `field` (what Qdrant reports as indexed by its index).
fn indexed_points(collection: &Collection, field: &str) -> usize {
    let has_value = json!({"must_not": [{"is_empty": {"key": field}}]});
    // a rank of a job that cannot count shows as none (the status says which is down)
    sagitta_engine::Filter::parse(&has_value, "payload_schema")
        .ok()
        .and_then(|filter| collection.count(Some(&filter)).ok())
        .unwrap_or(0)
}
