//! The golden database of the current on-disk format: how it is made (by
//! `cargo run --release -p sagitta-engine --example make_golden_db`) and what it must hold.
//! Shared by that example and `tests/golden_db.rs`.

// Each user (the example, the test) needs only part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use sagitta_engine::database::DatabaseOptions;
use sagitta_engine::{CollectionConfig, Database, Distance, FieldType, Point, PointId};
use sagitta_storage::fs::OsFileSystem;

pub const COLLECTION: &str = "golden";
pub const DIM: usize = 16;
pub const UUID: u128 = 0x1234_5678_9abc_def0_1234_5678_9abc_def0;

/// A deterministic vector per id and version (no RNG crate: the bytes must never change).
pub fn vector(id: u64, version: u64) -> Vec<f32> {
    let mut state = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ version;
    (0..DIM)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            #[allow(clippy::cast_precision_loss)]
            let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
            unit - 0.5
        })
        .collect()
}

fn payload(id: u64) -> String {
    format!(r#"{{"kind":"k{}","n":{id}}}"#, id % 13)
}

fn point(id: u64, version: u64) -> Point {
    Point {
        id: PointId::Number(id),
        vector: vector(id, version),
        payload: Some(payload(id)),
        side: Vec::new(),
    }
}

/// Writes the golden database into `root` (which must be empty): a 2-shard Cosine
/// collection with a keyword index, 2,400 points sealed into SQ8 HNSW segments, then
/// deletes and payload updates of sealed points (tombstones, copy-on-write), and more
/// writes left in the logs (buffered on open).
pub fn write(root: &Path) {
    let options = DatabaseOptions {
        background_optimizer: false,
        ..DatabaseOptions::default()
    };
    let database = Database::open_with(Arc::new(OsFileSystem), root, options).unwrap();
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Cosine,
        shard_count: 2,
        storage: Default::default(),
    };
    let collection = database.create_collection(COLLECTION, config).unwrap();
    collection
        .create_payload_index(database.file_system(), "kind", FieldType::Keyword)
        .unwrap();
    for first in (0..2_400).step_by(200) {
        collection
            .upsert((first..first + 200).map(|id| point(id, 1)).collect(), true)
            .unwrap();
    }
    collection.optimize(database.file_system()).unwrap();
    let deleted: Vec<PointId> = (0..50).map(PointId::Number).collect();
    collection.delete(&deleted, true).unwrap();
    let updated: Vec<PointId> = (100..110).map(PointId::Number).collect();
    collection
        .set_payload(&updated, r#"{"updated":true}"#, true)
        .unwrap();
    collection
        .upsert((2_400..2_500).map(|id| point(id, 1)).collect(), true)
        .unwrap();
    collection
        .upsert(vec![point(7_000, 2), point(200, 2)], true)
        .unwrap();
    collection
        .upsert(
            vec![Point {
                id: PointId::Uuid(UUID),
                vector: vector(9_999, 1),
                payload: None,
                side: Vec::new(),
            }],
            true,
        )
        .unwrap();
    collection.delete(&[PointId::Number(2_450)], true).unwrap();
}

/// What the golden database holds: id → (unnormalized vector, payload JSON text).
pub fn expected() -> BTreeMap<PointId, (Vec<f32>, Option<String>)> {
    let mut points = BTreeMap::new();
    for id in (50..2_500).filter(|id| *id != 2_450) {
        points.insert(PointId::Number(id), (vector(id, 1), Some(payload(id))));
    }
    for id in 100..110 {
        let merged = format!(r#"{{"kind":"k{}","n":{id},"updated":true}}"#, id % 13);
        points.insert(PointId::Number(id), (vector(id, 1), Some(merged)));
    }
    for id in [7_000, 200] {
        points.insert(PointId::Number(id), (vector(id, 2), Some(payload(id))));
    }
    points.insert(PointId::Uuid(UUID), (vector(9_999, 1), None));
    points
}
