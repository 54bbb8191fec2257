//! Collection messages: a gRPC create or update as the REST body, and REST's collection
//! info as `CollectionInfo`.

use std::collections::HashMap;

use serde_json::{json, Map, Value};
use tonic::Status;

use super::api;
use super::reply::{self, Reply};
use super::request::{invalid, payload, Json, Obj};
use super::strict;

fn distance(code: i32) -> Json {
    Ok(json!(match api::Distance::try_from(code) {
        Ok(api::Distance::Cosine) => "Cosine",
        Ok(api::Distance::Euclid) => "Euclid",
        Ok(api::Distance::Dot) => "Dot",
        Ok(api::Distance::Manhattan) => "Manhattan",
        _ => return Err(invalid("distance", "unknown distance")),
    }))
}

fn datatype(code: i32) -> Value {
    json!(match api::Datatype::try_from(code) {
        Ok(api::Datatype::Uint8) => "uint8",
        Ok(api::Datatype::Float16) => "float16",
        _ => "float32",
    })
}

fn hnsw(h: &api::HnswConfigDiff) -> Json {
    Ok(Obj::new()
        .opt("m", h.m)
        .opt("ef_construct", h.ef_construct)
        .opt("full_scan_threshold", h.full_scan_threshold)
        .opt("max_indexing_threads", h.max_indexing_threads)
        .opt("on_disk", h.on_disk)
        .opt("payload_m", h.payload_m)
        .done())
}

fn quantization(q: &api::QuantizationConfig) -> Json {
    use api::quantization_config::Quantization;
    match &q.quantization {
        Some(Quantization::Scalar(s)) => Ok(json!({"scalar": Obj::new()
            .put("type", "int8")
            .opt("quantile", s.quantile)
            .opt("always_ram", s.always_ram)
            .done()})),
        Some(Quantization::Binary(b)) => {
            Ok(json!({"binary": Obj::new().opt("always_ram", b.always_ram).done()}))
        }
        Some(Quantization::Product(p)) => Ok(json!({"product": Obj::new()
            .put("compression", format!("x{}", 4 << p.compression.clamp(0, 4)))
            .opt("always_ram", p.always_ram)
            .done()})),
        Some(Quantization::Turboquant(_)) | None => Err(invalid(
            "quantization_config",
            "a quantization of no kind this server knows (scalar, product, binary)",
        )),
    }
}

fn vector_params(p: &api::VectorParams) -> Json {
    Ok(Obj::new()
        .put("size", p.size)
        .put("distance", distance(p.distance)?)
        .with("hnsw_config", p.hnsw_config.as_ref(), hnsw)?
        .with(
            "quantization_config",
            p.quantization_config.as_ref(),
            quantization,
        )?
        .opt("on_disk", p.on_disk)
        .opt("datatype", p.datatype.map(datatype))
        .opt(
            "multivector_config",
            p.multivector_config
                .map(|_| json!({"comparator": "max_sim"})),
        )
        .done())
}

fn vectors_config(config: &api::VectorsConfig) -> Json {
    use api::vectors_config::Config;
    match &config.config {
        Some(Config::Params(params)) => vector_params(params),
        Some(Config::ParamsMap(map)) => {
            let mut named = Map::new();
            for (name, params) in &map.map {
                named.insert(name.clone(), vector_params(params)?);
            }
            Ok(Value::Object(named))
        }
        None => Err(invalid(
            "vectors_config",
            "sets neither params nor params_map",
        )),
    }
}

fn sparse_config(config: &api::SparseVectorConfig) -> Value {
    let named: Map<String, Value> = config
        .map
        .iter()
        .map(|(name, params)| {
            let idf = params.modifier == Some(api::Modifier::Idf as i32);
            let params = if idf {
                json!({"modifier": "idf"})
            } else {
                json!({})
            };
            (name.clone(), params)
        })
        .collect();
    Value::Object(named)
}

fn optimizers(o: &api::OptimizersConfigDiff) -> Value {
    use api::max_optimization_threads::Variant;
    let threads = o
        .max_optimization_threads
        .as_ref()
        .and_then(|t| match t.variant {
            Some(Variant::Value(n)) => Some(json!(n)),
            Some(Variant::Setting(_)) => Some(json!("auto")),
            None => None,
        });
    Obj::new()
        .opt("deleted_threshold", o.deleted_threshold)
        .opt("vacuum_min_vector_number", o.vacuum_min_vector_number)
        .opt("default_segment_number", o.default_segment_number)
        .opt("max_segment_size", o.max_segment_size)
        .opt("memmap_threshold", o.memmap_threshold)
        .opt("indexing_threshold", o.indexing_threshold)
        .opt("flush_interval_sec", o.flush_interval_sec)
        .opt("max_optimization_threads", threads)
        .done()
}

fn wal(w: &api::WalConfigDiff) -> Value {
    Obj::new()
        .opt("wal_capacity_mb", w.wal_capacity_mb)
        .opt("wal_segments_ahead", w.wal_segments_ahead)
        .done()
}

fn metadata(fields: &HashMap<String, api::Value>) -> Result<Option<Value>, Status> {
    if fields.is_empty() {
        return Ok(None);
    }
    payload(fields).map(Some)
}

/// `PUT /collections/{name}`'s body for a gRPC create.
pub fn create(c: &api::CreateCollection) -> Json {
    if c.sharding_method == Some(api::ShardingMethod::Custom as i32) {
        return Err(Status::unimplemented(
            "custom sharding (shard keys) is not supported",
        ));
    }
    Ok(Obj::new()
        .with("vectors", c.vectors_config.as_ref(), vectors_config)?
        .opt(
            "sparse_vectors",
            c.sparse_vectors_config.as_ref().map(sparse_config),
        )
        .opt("shard_number", c.shard_number)
        .opt("replication_factor", c.replication_factor)
        .opt("write_consistency_factor", c.write_consistency_factor)
        .opt("on_disk_payload", c.on_disk_payload)
        .with("hnsw_config", c.hnsw_config.as_ref(), hnsw)?
        .opt(
            "optimizers_config",
            c.optimizers_config.as_ref().map(optimizers),
        )
        .opt("wal_config", c.wal_config.as_ref().map(wal))
        .with(
            "quantization_config",
            c.quantization_config.as_ref(),
            quantization,
        )?
        .opt("metadata", metadata(&c.metadata)?)
        .opt(
            "strict_mode_config",
            c.strict_mode_config.as_ref().map(strict::strict_to_json),
        )
        .done())
}

/// `PATCH /collections/{name}`'s body for a gRPC update.
pub fn update(u: &api::UpdateCollection) -> Json {
    Ok(Obj::new()
        .opt(
            "optimizers_config",
            u.optimizers_config.as_ref().map(optimizers),
        )
        .with("hnsw_config", u.hnsw_config.as_ref(), hnsw)?
        .opt(
            "params",
            u.params.as_ref().map(|p| {
                Obj::new()
                    .opt("replication_factor", p.replication_factor)
                    .opt("write_consistency_factor", p.write_consistency_factor)
                    .opt("on_disk_payload", p.on_disk_payload)
                    .done()
            }),
        )
        .opt(
            "sparse_vectors",
            u.sparse_vectors_config.as_ref().map(sparse_config),
        )
        .opt("metadata", metadata(&u.metadata)?)
        .opt(
            "strict_mode_config",
            u.strict_mode_config.as_ref().map(strict::strict_to_json),
        )
        .done())
}

fn distance_code(json: &Value) -> i32 {
    (match json.as_str() {
        Some("Cosine") => api::Distance::Cosine,
        Some("Euclid") => api::Distance::Euclid,
        Some("Dot") => api::Distance::Dot,
        Some("Manhattan") => api::Distance::Manhattan,
        _ => api::Distance::UnknownDistance,
    }) as i32
}

fn params_of(json: &Value) -> api::VectorParams {
    api::VectorParams {
        size: json["size"].as_u64().unwrap_or(0),
        distance: distance_code(&json["distance"]),
        on_disk: json["on_disk"].as_bool(),
        datatype: json["datatype"].as_str().map(|d| {
            (match d {
                "uint8" => api::Datatype::Uint8,
                "float16" => api::Datatype::Float16,
                _ => api::Datatype::Float32,
            }) as i32
        }),
        multivector_config: json
            .get("multivector_config")
            .map(|_| api::MultiVectorConfig {
                comparator: api::MultiVectorComparator::MaxSim as i32,
            }),
        ..api::VectorParams::default()
    }
}

fn vectors_info(json: &Value) -> api::VectorsConfig {
    use api::vectors_config::Config;
    let config = if json.get("size").is_some() {
        Config::Params(params_of(json))
    } else {
        let map = json
            .as_object()
            .map(|named| {
                named
                    .iter()
                    .map(|(k, v)| (k.clone(), params_of(v)))
                    .collect()
            })
            .unwrap_or_default();
        Config::ParamsMap(api::VectorParamsMap { map })
    };
    api::VectorsConfig {
        config: Some(config),
    }
}

fn params_info(json: &Value) -> api::CollectionParams {
    let u32_of = |v: &Value| v.as_u64().and_then(|n| u32::try_from(n).ok());
    let sparse = json["sparse_vectors"]
        .as_object()
        .map(|named| api::SparseVectorConfig {
            map: named
                .iter()
                .map(|(name, params)| {
                    let idf = params["modifier"].as_str() == Some("idf");
                    let modifier = idf.then_some(api::Modifier::Idf as i32);
                    (
                        name.clone(),
                        api::SparseVectorParams {
                            index: None,
                            modifier,
                        },
                    )
                })
                .collect(),
        });
    api::CollectionParams {
        shard_number: u32_of(&json["shard_number"]).unwrap_or(1),
        on_disk_payload: json["on_disk_payload"].as_bool().unwrap_or(false),
        vectors_config: Some(vectors_info(&json["vectors"])),
        replication_factor: u32_of(&json["replication_factor"]),
        write_consistency_factor: u32_of(&json["write_consistency_factor"]),
        sparse_vectors_config: sparse,
        ..api::CollectionParams::default()
    }
}

fn schema_type(json: &Value) -> i32 {
    (match json.as_str() {
        Some("keyword") => api::PayloadSchemaType::Keyword,
        Some("integer") => api::PayloadSchemaType::Integer,
        Some("float") => api::PayloadSchemaType::Float,
        Some("geo") => api::PayloadSchemaType::Geo,
        Some("text") => api::PayloadSchemaType::Text,
        Some("bool") => api::PayloadSchemaType::Bool,
        Some("datetime") => api::PayloadSchemaType::Datetime,
        Some("uuid") => api::PayloadSchemaType::Uuid,
        _ => api::PayloadSchemaType::UnknownType,
    }) as i32
}

/// REST's collection info as `CollectionInfo`.
pub fn info(json: &Value) -> Reply<api::CollectionInfo> {
    let status = match json["status"].as_str() {
        Some("green") => api::CollectionStatus::Green,
        Some("yellow") => api::CollectionStatus::Yellow,
        Some("red") => api::CollectionStatus::Red,
        Some("grey") => api::CollectionStatus::Grey,
        _ => api::CollectionStatus::UnknownCollectionStatus,
    };
    let optimizer = match &json["optimizer_status"] {
        Value::String(_) => api::OptimizerStatus {
            ok: true,
            error: String::new(),
        },
        other => api::OptimizerStatus {
            ok: false,
            error: other["error"].as_str().unwrap_or_default().to_string(),
        },
    };
    let payload_schema = json["payload_schema"]
        .as_object()
        .map(|fields| {
            fields
                .iter()
                .map(|(field, info)| {
                    let info = api::PayloadSchemaInfo {
                        data_type: schema_type(&info["data_type"]),
                        params: strict::index_params(&info["params"]),
                        points: info["points"].as_u64(),
                    };
                    (field.clone(), info)
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(api::CollectionInfo {
        status: status as i32,
        optimizer_status: Some(optimizer),
        segments_count: json["segments_count"].as_u64().unwrap_or(0),
        config: Some(config_of(&json["config"])),
        payload_schema,
        points_count: json["points_count"].as_u64(),
        indexed_vectors_count: json["indexed_vectors_count"].as_u64(),
        warnings: Vec::new(),
        update_queue: None,
    })
}

/// REST's `quantization_config` as the message (`None` for null or a kind it cannot say).
fn quantization_of(json: &Value) -> Option<api::QuantizationConfig> {
    use api::quantization_config::Quantization;
    let quantile = |s: &Value| s["quantile"].as_f64().map(|q| q as f32);
    let quantization = if let Some(s) = json.get("scalar") {
        Quantization::Scalar(api::ScalarQuantization {
            r#type: api::QuantizationType::Int8 as i32,
            quantile: quantile(s),
            always_ram: s["always_ram"].as_bool(),
        })
    } else if let Some(p) = json.get("product") {
        let ratio = match p["compression"].as_str()? {
            "x4" => api::CompressionRatio::X4,
            "x8" => api::CompressionRatio::X8,
            "x16" => api::CompressionRatio::X16,
            "x32" => api::CompressionRatio::X32,
            "x64" => api::CompressionRatio::X64,
            _ => return None,
        };
        Quantization::Product(api::ProductQuantization {
            compression: ratio as i32,
            always_ram: p["always_ram"].as_bool(),
        })
    } else if let Some(b) = json.get("binary") {
        Quantization::Binary(api::BinaryQuantization {
            always_ram: b["always_ram"].as_bool(),
            ..api::BinaryQuantization::default()
        })
    } else {
        return None;
    };
    Some(api::QuantizationConfig {
        quantization: Some(quantization),
    })
}

fn config_of(config: &Value) -> api::CollectionConfig {
    let hnsw = &config["hnsw_config"];
    let optimizer = &config["optimizer_config"];
    api::CollectionConfig {
        params: Some(params_info(&config["params"])),
        hnsw_config: Some(api::HnswConfigDiff {
            m: hnsw["m"].as_u64(),
            ef_construct: hnsw["ef_construct"].as_u64(),
            full_scan_threshold: hnsw["full_scan_threshold"].as_u64(),
            max_indexing_threads: hnsw["max_indexing_threads"].as_u64(),
            on_disk: hnsw["on_disk"].as_bool(),
            ..api::HnswConfigDiff::default()
        }),
        optimizer_config: Some(api::OptimizersConfigDiff {
            deleted_threshold: optimizer["deleted_threshold"].as_f64(),
            vacuum_min_vector_number: optimizer["vacuum_min_vector_number"].as_u64(),
            default_segment_number: optimizer["default_segment_number"].as_u64(),
            max_segment_size: optimizer["max_segment_size"].as_u64(),
            memmap_threshold: optimizer["memmap_threshold"].as_u64(),
            indexing_threshold: optimizer["indexing_threshold"].as_u64(),
            flush_interval_sec: optimizer["flush_interval_sec"].as_u64(),
            // a number as set; absent (REST's null) is "auto"
            max_optimization_threads: optimizer["max_optimization_threads"].as_u64().map(
                |threads| api::MaxOptimizationThreads {
                    variant: Some(api::max_optimization_threads::Variant::Value(threads)),
                },
            ),
            ..api::OptimizersConfigDiff::default()
        }),
        wal_config: Some(api::WalConfigDiff {
            wal_capacity_mb: config["wal_config"]["wal_capacity_mb"].as_u64(),
            wal_segments_ahead: config["wal_config"]["wal_segments_ahead"].as_u64(),
            ..api::WalConfigDiff::default()
        }),
        quantization_config: quantization_of(&config["quantization_config"]),
        strict_mode_config: strict::strict_from_json(&config["strict_mode_config"]),
        metadata: reply::payload(&config["metadata"]),
    }
}
