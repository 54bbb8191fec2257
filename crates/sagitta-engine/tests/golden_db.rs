//! The checked-in golden database (`tests/golden/db-v1`, made by the `make_golden_db`
//! example) opens with this build and holds exactly what was written: sealed SQ8 HNSW
//! segments with tombstones, copy-on-write payload updates, log records replayed on top,
//! the payload index schema. A format change that breaks old databases fails here.

mod golden_data;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sagitta_engine::database::DatabaseOptions;
use sagitta_engine::{Database, FieldType, Filter, SearchRequest, Strategy};
use sagitta_storage::fs::OsFileSystem;

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn scratch_copy() -> PathBuf {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/db-v1");
    let scratch = std::env::temp_dir().join(format!("sagitta-golden-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    copy_tree(&golden, &scratch);
    scratch
}

fn normalized(vector: &[f32]) -> Vec<f32> {
    let norm = vector
        .iter()
        .map(|v| f64::from(*v).powi(2))
        .sum::<f64>()
        .sqrt();
    #[allow(clippy::cast_possible_truncation)]
    vector
        .iter()
        .map(|v| (f64::from(*v) / norm) as f32)
        .collect()
}

#[test]
fn the_golden_database_opens_with_exactly_its_points() {
    let root = scratch_copy();
    let options = DatabaseOptions {
        background_optimizer: false,
        ..DatabaseOptions::default()
    };
    let database = Database::open_with(Arc::new(OsFileSystem), &root, options).unwrap();
    assert_eq!(database.list(), vec![golden_data::COLLECTION.to_string()]);
    let collection = database.collection(golden_data::COLLECTION).unwrap();
    assert_eq!(collection.config().dim, golden_data::DIM);
    assert_eq!(collection.payload_schema()["kind"], FieldType::Keyword);
    let expected = golden_data::expected();
    let (indexed, buffered) = collection.point_counts();
    assert_eq!(indexed + buffered, expected.len());
    assert!(indexed > 2_000 && buffered > 100, "({indexed}, {buffered})");
    let points = collection.points().unwrap();
    assert_eq!(points.len(), expected.len());
    for point in points {
        let (vector, payload) = &expected[&point.id];
        assert_eq!(&point.payload, payload, "{}", point.id);
        let want = normalized(vector);
        let close = point
            .vector
            .iter()
            .zip(&want)
            .all(|(a, b)| (a - b).abs() <= 1e-6);
        assert!(close, "{}: {:?} vs {want:?}", point.id, point.vector);
    }
    // an exact search agrees with brute force over the expected points
    let query = golden_data::vector(12_345, 1);
    let unit = normalized(&query);
    let mut truth: Vec<(f32, _)> = expected
        .iter()
        .map(|(id, (vector, _))| {
            let score: f32 = normalized(vector)
                .iter()
                .zip(&unit)
                .map(|(a, b)| a * b)
                .sum();
            (score, *id)
        })
        .collect();
    truth.sort_by(|a, b| b.0.total_cmp(&a.0));
    let hits = collection
        .query(&SearchRequest {
            strategy: Strategy::Exact,
            ..SearchRequest::new(&query, 10)
        })
        .unwrap();
    let ids: Vec<_> = hits.iter().map(|hit| hit.id).collect();
    assert_eq!(ids, truth[..10].iter().map(|t| t.1).collect::<Vec<_>>());
    // the keyword index answers a filter
    let filter = Filter::parse(
        &serde_json::json!({"must": [{"key": "kind", "match": {"value": "k3"}}]}),
        "filter",
    )
    .unwrap();
    let passing = expected
        .values()
        .filter(|(_, payload)| {
            payload
                .as_deref()
                .is_some_and(|text| text.contains(r#""kind":"k3""#))
        })
        .count();
    assert_eq!(collection.count(Some(&filter)).unwrap(), passing);
    drop(collection);
    drop(database);
    std::fs::remove_dir_all(&root).unwrap();
}
