//! Strict-mode settings and payload-index parameters, between their gRPC messages and the
//! REST API's JSON (the same field names on both sides).

use serde_json::{Map, Value};

use super::api;
use super::request::Obj;

/// `strict_mode_config` of a create or an update, as REST takes it.
pub fn strict_to_json(c: &api::StrictModeConfig) -> Value {
    let named = |pairs: Vec<(String, Option<u64>)>, key: &str| {
        let map: Map<String, Value> = pairs
            .into_iter()
            .map(|(name, value)| (name, Obj::new().opt(key, value).done()))
            .collect();
        Value::Object(map)
    };
    Obj::new()
        .opt("enabled", c.enabled)
        .opt("max_query_limit", c.max_query_limit)
        .opt("max_timeout", c.max_timeout)
        .opt(
            "unindexed_filtering_retrieve",
            c.unindexed_filtering_retrieve,
        )
        .opt("unindexed_filtering_update", c.unindexed_filtering_update)
        .opt("search_max_hnsw_ef", c.search_max_hnsw_ef)
        .opt("search_allow_exact", c.search_allow_exact)
        .opt("search_max_oversampling", c.search_max_oversampling)
        .opt("upsert_max_batchsize", c.upsert_max_batchsize)
        .opt("search_max_batchsize", c.search_max_batchsize)
        .opt(
            "max_collection_vector_size_bytes",
            c.max_collection_vector_size_bytes,
        )
        .opt("read_rate_limit", c.read_rate_limit)
        .opt("write_rate_limit", c.write_rate_limit)
        .opt(
            "max_collection_payload_size_bytes",
            c.max_collection_payload_size_bytes,
        )
        .opt("filter_max_conditions", c.filter_max_conditions)
        .opt("condition_max_size", c.condition_max_size)
        .opt("max_points_count", c.max_points_count)
        .opt("max_payload_index_count", c.max_payload_index_count)
        .opt("max_resident_memory_percent", c.max_resident_memory_percent)
        .opt(
            "multivector_config",
            c.multivector_config.as_ref().map(|m| {
                let pairs = m
                    .multivector_config
                    .iter()
                    .map(|(k, v)| (k.clone(), v.max_vectors));
                named(pairs.collect(), "max_vectors")
            }),
        )
        .opt(
            "sparse_config",
            c.sparse_config.as_ref().map(|s| {
                let pairs = s
                    .sparse_config
                    .iter()
                    .map(|(k, v)| (k.clone(), v.max_length));
                named(pairs.collect(), "max_length")
            }),
        )
        .done()
}

fn small(json: &Value, key: &str) -> Option<u32> {
    json[key].as_u64().and_then(|n| u32::try_from(n).ok())
}

/// REST's `strict_mode_config` of collection info as the message (none when absent).
pub fn strict_from_json(json: &Value) -> Option<api::StrictModeConfig> {
    if !json.is_object() {
        return None;
    }
    let u = |key: &str| json[key].as_u64();
    let b = |key: &str| json[key].as_bool();
    let named = |key: &str, field: &str| -> Vec<(String, Option<u64>)> {
        json[key]
            .as_object()
            .map(|map| {
                map.iter()
                    .map(|(k, v)| (k.clone(), v[field].as_u64()))
                    .collect()
            })
            .unwrap_or_default()
    };
    Some(api::StrictModeConfig {
        enabled: b("enabled"),
        max_query_limit: small(json, "max_query_limit"),
        max_timeout: small(json, "max_timeout"),
        unindexed_filtering_retrieve: b("unindexed_filtering_retrieve"),
        unindexed_filtering_update: b("unindexed_filtering_update"),
        search_max_hnsw_ef: small(json, "search_max_hnsw_ef"),
        search_allow_exact: b("search_allow_exact"),
        search_max_oversampling: json["search_max_oversampling"].as_f64().map(|x| x as f32),
        upsert_max_batchsize: u("upsert_max_batchsize"),
        search_max_batchsize: u("search_max_batchsize"),
        max_collection_vector_size_bytes: u("max_collection_vector_size_bytes"),
        read_rate_limit: small(json, "read_rate_limit"),
        write_rate_limit: small(json, "write_rate_limit"),
        max_collection_payload_size_bytes: u("max_collection_payload_size_bytes"),
        filter_max_conditions: u("filter_max_conditions"),
        condition_max_size: u("condition_max_size"),
        multivector_config: json
            .get("multivector_config")
            .filter(|v| v.is_object())
            .map(|_| api::StrictModeMultivectorConfig {
                multivector_config: named("multivector_config", "max_vectors")
                    .into_iter()
                    .map(|(k, max_vectors)| (k, api::StrictModeMultivector { max_vectors }))
                    .collect(),
            }),
        sparse_config: json
            .get("sparse_config")
            .filter(|v| v.is_object())
            .map(|_| api::StrictModeSparseConfig {
                sparse_config: named("sparse_config", "max_length")
                    .into_iter()
                    .map(|(k, max_length)| (k, api::StrictModeSparse { max_length }))
                    .collect(),
            }),
        max_points_count: u("max_points_count"),
        max_payload_index_count: u("max_payload_index_count"),
        max_resident_memory_percent: small(json, "max_resident_memory_percent"),
    })
}

/// REST's index `params` of a payload-schema entry as the message.
pub fn index_params(json: &Value) -> Option<api::PayloadIndexParams> {
    use api::payload_index_params::IndexParams;
    let b = |key: &str| json[key].as_bool();
    let u = |key: &str| json[key].as_u64();
    let params = match json["type"].as_str()? {
        "keyword" => IndexParams::KeywordIndexParams(api::KeywordIndexParams {
            is_tenant: b("is_tenant"),
            on_disk: b("on_disk"),
            enable_hnsw: b("enable_hnsw"),
        }),
        "integer" => IndexParams::IntegerIndexParams(api::IntegerIndexParams {
            lookup: b("lookup"),
            range: b("range"),
            is_principal: b("is_principal"),
            on_disk: b("on_disk"),
            enable_hnsw: b("enable_hnsw"),
        }),
        "float" => IndexParams::FloatIndexParams(api::FloatIndexParams {
            on_disk: b("on_disk"),
            is_principal: b("is_principal"),
            enable_hnsw: b("enable_hnsw"),
        }),
        "geo" => IndexParams::GeoIndexParams(api::GeoIndexParams {
            on_disk: b("on_disk"),
            enable_hnsw: b("enable_hnsw"),
        }),
        "bool" => IndexParams::BoolIndexParams(api::BoolIndexParams {
            on_disk: b("on_disk"),
            enable_hnsw: b("enable_hnsw"),
        }),
        "datetime" => IndexParams::DatetimeIndexParams(api::DatetimeIndexParams {
            on_disk: b("on_disk"),
            is_principal: b("is_principal"),
            enable_hnsw: b("enable_hnsw"),
        }),
        "uuid" => IndexParams::UuidIndexParams(api::UuidIndexParams {
            is_tenant: b("is_tenant"),
            on_disk: b("on_disk"),
            enable_hnsw: b("enable_hnsw"),
        }),
        "text" => IndexParams::TextIndexParams(api::TextIndexParams {
            tokenizer: (match json["tokenizer"].as_str() {
                Some("prefix") => api::TokenizerType::Prefix,
                Some("whitespace") => api::TokenizerType::Whitespace,
                Some("multilingual") => api::TokenizerType::Multilingual,
                _ => api::TokenizerType::Word,
            }) as i32,
            lowercase: b("lowercase"),
            min_token_len: u("min_token_len"),
            max_token_len: u("max_token_len"),
            on_disk: b("on_disk"),
            phrase_matching: b("phrase_matching"),
            ascii_folding: b("ascii_folding"),
            enable_hnsw: b("enable_hnsw"),
            ..api::TextIndexParams::default()
        }),
        _ => return None,
    };
    Some(api::PayloadIndexParams {
        index_params: Some(params),
    })
}
