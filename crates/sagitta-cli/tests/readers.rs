//! The import readers against files written here byte by byte (`.npy`, `.fvecs`, `.bvecs`)
//! or with the parquet crate's Arrow writer: points come back exactly, and every kind of bad
//! input is an error that names the file, the row (or line, or byte) and the field.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::types::{Float32Type, Float64Type, Int32Type};
use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, DictionaryArray, FixedSizeListArray, Float32Array,
    Float64Array, Int32Array, Int64Array, LargeListArray, ListArray, NullArray, RecordBatch,
    StringArray, StructArray, UInt64Array,
};
use arrow_schema::{DataType, Field};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use sagitta_cli::readers::{read_points, Format, ImportError, ReadOptions, ReadPoints};
use sagitta_engine::point::{parse_uuid, Point, PointId};
use serde_json::{json, Value};

/// A directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let unique = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "sagitta-cli-{}-{unique}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---- writers -------------------------------------------------------------------------------

/// A `.npy` file of format `version` (1, 2 or 3) with a header dict as numpy writes it.
fn npy_bytes(version: u8, descr: &str, fortran_order: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let order = if fortran_order { "True" } else { "False" };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
    let length_field_bytes = if version == 1 { 2 } else { 4 };
    // Pad so that the data starts on a 64-byte boundary, ending in '\n'.
    while (8 + length_field_bytes + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY".to_vec();
    bytes.extend_from_slice(&[version, 0]);
    if version == 1 {
        bytes.extend_from_slice(&u16::try_from(header.len()).unwrap().to_le_bytes());
    } else {
        bytes.extend_from_slice(&u32::try_from(header.len()).unwrap().to_le_bytes());
    }
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

fn write_npy(path: &Path, version: u8, descr: &str, shape: &str, data: &[u8]) {
    std::fs::write(path, npy_bytes(version, descr, false, shape, data)).unwrap();
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn f64_bytes(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn i64_bytes(values: &[i64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// `.fvecs`: per row an i32 dimension then the f32 values.
fn fvecs_bytes(rows: &[&[f32]]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for row in rows {
        bytes.extend_from_slice(&i32::try_from(row.len()).unwrap().to_le_bytes());
        bytes.extend_from_slice(&f32_bytes(row));
    }
    bytes
}

fn write_parquet(path: &Path, batch: &RecordBatch, compression: Compression) {
    let properties = WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(Some(1000))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(properties)).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
}

/// A record batch whose columns are all nullable.
fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter_with_nullable(columns.into_iter().map(|(n, a)| (n, a, true)))
        .unwrap()
}

fn f32_lists(rows: &[&[f32]]) -> ArrayRef {
    Arc::new(ListArray::from_iter_primitive::<Float32Type, _, _>(
        rows.iter()
            .map(|row| Some(row.iter().copied().map(Some).collect::<Vec<_>>())),
    ))
}

// ---- helpers -------------------------------------------------------------------------------

fn read_default(path: &Path) -> Result<ReadPoints, ImportError> {
    read_points(path, &ReadOptions::default())
}

fn number_point(id: u64, vector: &[f32], payload: Option<&str>) -> Point {
    Point {
        id: PointId::Number(id),
        vector: vector.to_vec(),
        payload: payload.map(str::to_string),
        side: Vec::new(),
    }
}

fn payload_json(point: &Point) -> Value {
    serde_json::from_str(point.payload.as_deref().expect("a payload")).unwrap()
}

/// Asserts that reading fails and the message contains every fragment.
fn assert_error(result: Result<ReadPoints, ImportError>, fragments: &[&str]) {
    let message = match result {
        Ok(read) => panic!("expected an error, read {} points", read.points.len()),
        Err(error) => error.to_string(),
    };
    for fragment in fragments {
        assert!(
            message.contains(fragment),
            "error {message:?} does not contain {fragment:?}"
        );
    }
}

// ---- .npy ----------------------------------------------------------------------------------

#[test]
fn npy_float32_v1_reads_rows_with_offset_ids() {
    let dir = TempDir::new("npy-f32");
    let path = dir.file("data.npy");
    write_npy(
        &path,
        1,
        "<f4",
        "(3, 2)",
        &f32_bytes(&[1.0, 2.0, 3.5, -4.0, 0.0, 1e-3]),
    );
    let options = ReadOptions {
        id_offset: Some(100),
        ..ReadOptions::default()
    };
    let read = read_points(&path, &options).unwrap();
    assert_eq!(read.dim, 2);
    assert_eq!(read.bytes_read, std::fs::metadata(&path).unwrap().len());
    assert_eq!(
        read.points,
        vec![
            number_point(100, &[1.0, 2.0], None),
            number_point(101, &[3.5, -4.0], None),
            number_point(102, &[0.0, 1e-3], None),
        ]
    );
}

#[test]
fn npy_float64_v2_with_id_and_payload_files() {
    let dir = TempDir::new("npy-f64");
    let path = dir.file("data.npy");
    write_npy(
        &path,
        2,
        "<f8",
        "(2, 3)",
        &f64_bytes(&[0.1, 0.2, 0.3, 1.0, 2.0, 3.0]),
    );
    let ids = dir.file("ids.npy");
    write_npy(&ids, 1, "<i8", "(2,)", &i64_bytes(&[7, 1 << 40]));
    let payloads = dir.file("payloads.jsonl");
    std::fs::write(&payloads, "{\"title\": \"a\"}\n{\"n\": [1, 2]}\r\n").unwrap();
    let options = ReadOptions {
        ids: Some(ids.clone()),
        payloads: Some(payloads.clone()),
        ..ReadOptions::default()
    };
    let read = read_points(&path, &options).unwrap();
    #[allow(clippy::cast_possible_truncation)]
    let expected = [0.1_f64 as f32, 0.2_f64 as f32, 0.3_f64 as f32];
    assert_eq!(
        read.points,
        vec![
            number_point(7, &expected, Some("{\"title\": \"a\"}")),
            number_point(1 << 40, &[1.0, 2.0, 3.0], Some("{\"n\": [1, 2]}")),
        ]
    );
    let files = [&path, &ids, &payloads];
    let total: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    assert_eq!(read.bytes_read, total);
}

#[test]
fn npy_float16_v3_and_unsigned_and_int32_ids() {
    let dir = TempDir::new("npy-f16");
    let path = dir.file("data.npy");
    let halves: Vec<u8> = [1.5_f32, -2.0, 0.25, 65504.0]
        .iter()
        .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
        .collect();
    write_npy(&path, 3, "<f2", "(2, 2)", &halves);
    let ids = dir.file("ids.npy");
    let u64_ids: Vec<u8> = [u64::MAX - 1, 3]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    write_npy(&ids, 1, "<u8", "(2,)", &u64_ids);
    let options = ReadOptions {
        ids: Some(ids.clone()),
        ..ReadOptions::default()
    };
    let read = read_points(&path, &options).unwrap();
    assert_eq!(
        read.points,
        vec![
            number_point(u64::MAX - 1, &[1.5, -2.0], None),
            number_point(3, &[0.25, 65504.0], None),
        ]
    );
    let i32_ids: Vec<u8> = [5_i32, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
    write_npy(&ids, 1, "<i4", "(2, 1)", &i32_ids);
    let read = read_points(&path, &options).unwrap();
    let ids: Vec<PointId> = read.points.iter().map(|p| p.id).collect();
    assert_eq!(ids, vec![PointId::Number(5), PointId::Number(9)]);
}

#[test]
fn npy_explicit_format_overrides_the_extension() {
    let dir = TempDir::new("npy-format");
    let path = dir.file("vectors.bin");
    write_npy(&path, 1, "<f4", "(1, 2)", &f32_bytes(&[1.0, 2.0]));
    assert!(read_default(&path).unwrap_err().is_usage());
    let options = ReadOptions {
        format: Some(Format::Npy),
        ..ReadOptions::default()
    };
    assert_eq!(read_points(&path, &options).unwrap().points.len(), 1);
}

#[test]
fn npy_wrong_dtype_is_named() {
    let dir = TempDir::new("npy-dtype");
    let path = dir.file("data.npy");
    write_npy(&path, 1, "<i4", "(1, 2)", &[0; 8]);
    assert_error(read_default(&path), &["data.npy", "dtype", "float32"]);
    write_npy(&path, 1, ">f4", "(1, 2)", &[0; 8]);
    assert_error(read_default(&path), &["data.npy", "big-endian", ">f4"]);
    write_npy(&path, 1, "<c8", "(1, 2)", &[0; 16]);
    assert_error(read_default(&path), &["data.npy", "descr", "<c8"]);
}

#[test]
fn npy_fortran_order_is_refused() {
    let dir = TempDir::new("npy-fortran");
    let path = dir.file("data.npy");
    let bytes = npy_bytes(1, "<f4", true, "(2, 2)", &f32_bytes(&[1.0, 2.0, 3.0, 4.0]));
    std::fs::write(&path, bytes).unwrap();
    assert_error(
        read_default(&path),
        &["data.npy", "Fortran", "ascontiguousarray"],
    );
}

#[test]
fn npy_bad_shapes_and_lengths_are_named() {
    let dir = TempDir::new("npy-shape");
    let path = dir.file("data.npy");
    write_npy(&path, 1, "<f4", "(4,)", &f32_bytes(&[1.0; 4]));
    assert_error(read_default(&path), &["data.npy", "shape [4] is not 2-D"]);
    write_npy(&path, 1, "<f4", "(3, 2)", &f32_bytes(&[1.0; 5]));
    assert_error(
        read_default(&path),
        &["data.npy", "row 2 (byte 144)", "truncated"],
    );
    write_npy(&path, 1, "<f4", "(1, 2)", &f32_bytes(&[1.0; 3]));
    assert_error(
        read_default(&path),
        &["data.npy", "4 bytes follow the data"],
    );
    write_npy(&path, 1, "<f4", "(1, 0)", &[]);
    assert_error(read_default(&path), &["data.npy", "dimension 0"]);
    write_npy(&path, 1, "<f4", "(0, 3)", &[]);
    assert_error(read_default(&path), &["data.npy", "no rows"]);
    std::fs::write(&path, b"\x93NUMPY\x01\x00\x10").unwrap();
    assert_error(read_default(&path), &["data.npy", "header"]);
    std::fs::write(&path, b"PK\x03\x04 not numpy").unwrap();
    assert_error(read_default(&path), &["data.npy", "not a .npy file"]);
}

#[test]
fn npy_nan_and_infinity_name_row_and_position() {
    let dir = TempDir::new("npy-nan");
    let path = dir.file("data.npy");
    write_npy(
        &path,
        1,
        "<f4",
        "(2, 3)",
        &f32_bytes(&[1.0, 2.0, 3.0, 4.0, f32::NAN, 6.0]),
    );
    assert_error(read_default(&path), &["data.npy: row 1: value 1 is NaN"]);
    write_npy(&path, 1, "<f8", "(1, 2)", &f64_bytes(&[1e300, 0.0]));
    assert_error(read_default(&path), &["data.npy: row 0: value 0 is inf"]);
}

#[test]
fn npy_negative_id_names_the_row() {
    let dir = TempDir::new("npy-negative-id");
    let path = dir.file("data.npy");
    write_npy(&path, 1, "<f4", "(3, 1)", &f32_bytes(&[1.0, 2.0, 3.0]));
    let ids = dir.file("ids.npy");
    write_npy(&ids, 1, "<i8", "(3,)", &i64_bytes(&[0, 1, -5]));
    let options = ReadOptions {
        ids: Some(ids.clone()),
        ..ReadOptions::default()
    };
    assert_error(
        read_points(&path, &options),
        &["ids.npy: row 2: id -5 is negative"],
    );
    write_npy(&ids, 1, "<i8", "(2,)", &i64_bytes(&[0, 1]));
    assert_error(
        read_points(&path, &options),
        &["ids.npy", "2 ids for 3 rows"],
    );
    write_npy(&ids, 1, "<f8", "(3,)", &f64_bytes(&[0.0, 1.0, 2.0]));
    assert_error(
        read_points(&path, &options),
        &["ids.npy", "ids must be integers"],
    );
    write_npy(&ids, 1, "<i8", "(3,)", &i64_bytes(&[4, 9, 4]));
    assert_error(
        read_points(&path, &options),
        &["row 2: id 4 is also the id of row 0"],
    );
}

#[test]
fn id_offset_overflow_names_the_row() {
    let dir = TempDir::new("npy-offset");
    let path = dir.file("data.npy");
    write_npy(&path, 1, "<f4", "(2, 1)", &f32_bytes(&[1.0, 2.0]));
    let options = ReadOptions {
        id_offset: Some(u64::MAX),
        ..ReadOptions::default()
    };
    assert_error(
        read_points(&path, &options),
        &["data.npy: row 1", "overflows"],
    );
}

// ---- payload files -------------------------------------------------------------------------

fn read_with_payloads(lines: &str) -> Result<ReadPoints, ImportError> {
    let dir = TempDir::new("payloads");
    let path = dir.file("data.npy");
    write_npy(&path, 1, "<f4", "(2, 1)", &f32_bytes(&[1.0, 2.0]));
    let payloads = dir.file("payloads.jsonl");
    std::fs::write(&payloads, lines).unwrap();
    let options = ReadOptions {
        payloads: Some(payloads),
        ..ReadOptions::default()
    };
    read_points(&path, &options)
}

#[test]
fn payload_line_count_must_match_rows() {
    assert_error(
        read_with_payloads("{\"a\": 1}\n"),
        &["payloads.jsonl", "1 payload lines for 2 rows"],
    );
    assert_error(
        read_with_payloads("{}\n{}\n{}\n"),
        &[
            "payloads.jsonl: line 3",
            "more payload lines than the 2 rows",
        ],
    );
}

#[test]
fn payload_lines_must_be_json_objects() {
    assert_error(
        read_with_payloads("{\"a\": 1}\n[1, 2]\n"),
        &["payloads.jsonl: line 2", "not a JSON object but an array"],
    );
    assert_error(
        read_with_payloads("{\"a\": 1}\n\n"),
        &["payloads.jsonl: line 2", "not valid JSON"],
    );
    assert_error(
        read_with_payloads("{\"a\": \n{}\n"),
        &["payloads.jsonl: line 1", "not valid JSON"],
    );
    assert_error(
        read_with_payloads("{}\n\"text\"\n"),
        &["line 2", "not a JSON object but a string"],
    );
}

// ---- .fvecs / .bvecs -----------------------------------------------------------------------

#[test]
fn fvecs_and_bvecs_read_back_exactly() {
    let dir = TempDir::new("vecs");
    let path = dir.file("base.fvecs");
    std::fs::write(
        &path,
        fvecs_bytes(&[&[1.0, -2.0, 3.0], &[0.5, 0.25, 0.125]]),
    )
    .unwrap();
    let read = read_default(&path).unwrap();
    assert_eq!(read.dim, 3);
    assert_eq!(
        read.points,
        vec![
            number_point(0, &[1.0, -2.0, 3.0], None),
            number_point(1, &[0.5, 0.25, 0.125], None),
        ]
    );
    let path = dir.file("base.bvecs");
    let mut bytes = Vec::new();
    for row in [[0_u8, 255], [7, 8]] {
        bytes.extend_from_slice(&2_i32.to_le_bytes());
        bytes.extend_from_slice(&row);
    }
    std::fs::write(&path, bytes).unwrap();
    let read = read_default(&path).unwrap();
    assert_eq!(
        read.points,
        vec![
            number_point(0, &[0.0, 255.0], None),
            number_point(1, &[7.0, 8.0], None),
        ]
    );
}

#[test]
fn fvecs_truncated_row_is_named_with_its_byte_offset() {
    let dir = TempDir::new("fvecs-truncated");
    let path = dir.file("base.fvecs");
    let mut bytes = fvecs_bytes(&[&[1.0, 2.0], &[3.0, 4.0]]);
    bytes.truncate(bytes.len() - 1);
    std::fs::write(&path, &bytes).unwrap();
    assert_error(
        read_default(&path),
        &["base.fvecs: row 1 (byte 12)", "truncated"],
    );
    bytes.truncate(14);
    std::fs::write(&path, &bytes).unwrap();
    assert_error(
        read_default(&path),
        &["base.fvecs: row 1 (byte 12)", "4-byte dimension"],
    );
}

#[test]
fn fvecs_ragged_dimensions_are_named() {
    let dir = TempDir::new("fvecs-ragged");
    let path = dir.file("base.fvecs");
    std::fs::write(&path, fvecs_bytes(&[&[1.0, 2.0], &[1.0, 2.0], &[3.0]])).unwrap();
    assert_error(
        read_default(&path),
        &[
            "base.fvecs: row 2 (byte 24)",
            "dimension 1 differs from row 0's 2",
        ],
    );
    let mut bytes = (-3_i32).to_le_bytes().to_vec();
    bytes.extend_from_slice(&[0; 12]);
    std::fs::write(&path, &bytes).unwrap();
    assert_error(
        read_default(&path),
        &["row 0 (byte 0)", "dimension -3 is negative"],
    );
    std::fs::write(&path, i32::MAX.to_le_bytes()).unwrap();
    assert_error(
        read_default(&path),
        &["row 0 (byte 0)", "outside 1..=65536"],
    );
}

#[test]
fn fvecs_nan_names_row_and_position() {
    let dir = TempDir::new("fvecs-nan");
    let path = dir.file("base.fvecs");
    std::fs::write(&path, fvecs_bytes(&[&[1.0, 2.0], &[3.0, f32::INFINITY]])).unwrap();
    assert_error(
        read_default(&path),
        &["base.fvecs: row 1 (byte 12): value 1 is inf"],
    );
}

#[test]
fn options_that_do_not_fit_the_format_are_usage_errors() {
    let dir = TempDir::new("usage");
    let path = dir.file("base.fvecs");
    std::fs::write(&path, fvecs_bytes(&[&[1.0]])).unwrap();
    let options = ReadOptions {
        vector_column: Some("emb".into()),
        ..ReadOptions::default()
    };
    let error = read_points(&path, &options).unwrap_err();
    assert!(error.is_usage());
    assert!(error.to_string().contains("--vector-column"), "{error}");
    let parquet = dir.file("data.parquet");
    let options = ReadOptions {
        ids: Some(dir.file("ids.npy")),
        ..ReadOptions::default()
    };
    let error = read_points(&parquet, &options).unwrap_err();
    assert!(
        error.is_usage() && error.to_string().contains("--ids"),
        "{error}"
    );
    let missing = read_default(&dir.file("missing.npy")).unwrap_err();
    assert!(!missing.is_usage());
    assert!(missing.to_string().contains("missing.npy"), "{missing}");
}

// ---- Parquet -------------------------------------------------------------------------------

/// Payload columns of every supported type, three rows.
fn payload_columns() -> Vec<(&'static str, ArrayRef)> {
    let mut tags = ListBuilder::new(StringBuilder::new());
    tags.values().append_value("x");
    tags.values().append_value("y");
    tags.append(true);
    tags.append(false);
    tags.append(true);
    let inner: Vec<(Arc<Field>, ArrayRef)> = vec![
        (
            Arc::new(Field::new("page", DataType::Int32, true)),
            Arc::new(Int32Array::from(vec![Some(1), None, Some(3)])),
        ),
        (
            Arc::new(Field::new("lang", DataType::Utf8, true)),
            Arc::new(StringArray::from(vec!["en", "de", "fr"])),
        ),
    ];
    let category: DictionaryArray<Int32Type> = vec!["red", "blue", "red"].into_iter().collect();
    vec![
        (
            "title",
            Arc::new(StringArray::from(vec![Some("first"), None, Some("third")])),
        ),
        ("count", Arc::new(Int64Array::from(vec![-1, 0, i64::MAX]))),
        (
            "score",
            Arc::new(Float64Array::from(vec![0.5, f64::NAN, -2.25])),
        ),
        ("weight", Arc::new(Float32Array::from(vec![0.1, 1.5, 3.0]))),
        (
            "flag",
            Arc::new(BooleanArray::from(vec![Some(true), Some(false), None])),
        ),
        ("nothing", Arc::new(NullArray::new(3))),
        ("tags", Arc::new(tags.finish())),
        ("meta", Arc::new(StructArray::from(inner))),
        ("category", Arc::new(category)),
    ]
}

fn expected_payloads() -> [Value; 3] {
    [
        json!({"title": "first", "count": -1, "score": 0.5, "weight": 0.1, "flag": true,
               "nothing": null, "tags": ["x", "y"], "meta": {"page": 1, "lang": "en"},
               "category": "red"}),
        json!({"title": null, "count": 0, "score": null, "weight": 1.5, "flag": false,
               "nothing": null, "tags": null, "meta": {"page": null, "lang": "de"},
               "category": "blue"}),
        json!({"title": "third", "count": i64::MAX, "score": -2.25, "weight": 3.0,
               "flag": null, "nothing": null, "tags": [], "meta": {"page": 3, "lang": "fr"},
               "category": "red"}),
    ]
}

#[test]
fn parquet_snappy_list_vectors_int_ids_and_every_payload_type() {
    let dir = TempDir::new("parquet-snappy");
    let path = dir.file("data.parquet");
    let mut columns: Vec<(&str, ArrayRef)> = vec![
        ("id", Arc::new(Int64Array::from(vec![10, 20, 30]))),
        (
            "vector",
            f32_lists(&[&[1.0, 2.0], &[3.0, 4.0], &[-5.0, 0.5]]),
        ),
    ];
    columns.extend(payload_columns());
    write_parquet(&path, &batch(columns), Compression::SNAPPY);
    let read = read_default(&path).unwrap();
    assert_eq!(read.dim, 2);
    let ids: Vec<PointId> = read.points.iter().map(|p| p.id).collect();
    assert_eq!(ids, [10, 20, 30].map(PointId::Number));
    let vectors: Vec<&[f32]> = read.points.iter().map(|p| p.vector.as_slice()).collect();
    assert_eq!(vectors, [&[1.0, 2.0][..], &[3.0, 4.0], &[-5.0, 0.5]]);
    let payloads: Vec<Value> = read.points.iter().map(payload_json).collect();
    assert_eq!(payloads, expected_payloads());
    assert_eq!(read.bytes_read, std::fs::metadata(&path).unwrap().len());
}

#[test]
fn parquet_fixed_size_list_vectors_and_uuid_ids() {
    let dir = TempDir::new("parquet-fixed");
    let path = dir.file("data.parquet");
    let uuids = [
        "550e8400-e29b-41d4-a716-446655440000",
        "6ba7b8109dad11d180b400c04fd430c8",
    ];
    let vectors = FixedSizeListArray::from_iter_primitive::<Float32Type, _, _>(
        vec![
            Some(vec![Some(1.0), Some(0.0), Some(-1.0)]),
            Some(vec![Some(0.5), Some(0.5), Some(0.5)]),
        ],
        3,
    );
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("key", Arc::new(StringArray::from(uuids.to_vec()))),
        ("embedding", Arc::new(vectors)),
    ];
    write_parquet(&path, &batch(columns), Compression::UNCOMPRESSED);
    let options = ReadOptions {
        id_column: Some("key".into()),
        vector_column: Some("embedding".into()),
        ..ReadOptions::default()
    };
    let read = read_points(&path, &options).unwrap();
    let expected: Vec<Point> = uuids
        .iter()
        .zip([[1.0, 0.0, -1.0], [0.5, 0.5, 0.5]])
        .map(|(uuid, vector)| Point {
            id: PointId::Uuid(parse_uuid(uuid).unwrap()),
            vector: vector.to_vec(),
            payload: None,
            side: Vec::new(),
        })
        .collect();
    assert_eq!(read.points, expected);
}

#[test]
fn parquet_float64_large_lists_without_id_column_use_row_numbers_across_batches() {
    let dir = TempDir::new("parquet-rows");
    let path = dir.file("data.parquet");
    let row_count = 20_000_u32;
    let rows = (0..row_count).map(|row| Some(vec![Some(f64::from(row)), Some(0.25)]));
    let columns: Vec<(&str, ArrayRef)> = vec![
        (
            "vector",
            Arc::new(LargeListArray::from_iter_primitive::<Float64Type, _, _>(
                rows,
            )),
        ),
        (
            "__index_level_0__",
            Arc::new(UInt64Array::from_iter_values(0..20_000)),
        ),
    ];
    write_parquet(&path, &batch(columns), Compression::SNAPPY);
    let options = ReadOptions {
        id_offset: Some(5),
        ..ReadOptions::default()
    };
    let read = read_points(&path, &options).unwrap();
    assert_eq!(read.points.len(), 20_000);
    for (row, point) in (0..row_count).zip(&read.points) {
        #[allow(clippy::cast_precision_loss)]
        let expected = number_point(u64::from(row) + 5, &[row as f32, 0.25], None);
        assert_eq!(*point, expected);
    }
}

#[test]
fn parquet_ragged_vector_names_row_and_column() {
    let dir = TempDir::new("parquet-ragged");
    let path = dir.file("data.parquet");
    let mut rows: Vec<Vec<f32>> = vec![vec![1.0, 2.0, 3.0]; 9000];
    rows[8500].pop();
    let slices: Vec<&[f32]> = rows.iter().map(Vec::as_slice).collect();
    write_parquet(
        &path,
        &batch(vec![("vector", f32_lists(&slices))]),
        Compression::SNAPPY,
    );
    assert_error(
        read_default(&path),
        &["data.parquet: row 8500: column `vector`: expected 3 values, got 2"],
    );
}

#[test]
fn parquet_nan_null_and_negative_id_name_row_and_column() {
    let dir = TempDir::new("parquet-values");
    let path = dir.file("data.parquet");
    let vectors = f32_lists(&[&[1.0, 2.0], &[f32::NAN, 2.0]]);
    let columns: Vec<(&str, ArrayRef)> = vec![("vector", vectors)];
    write_parquet(&path, &batch(columns), Compression::SNAPPY);
    assert_error(
        read_default(&path),
        &["data.parquet: row 1: column `vector`: value 0 is NaN"],
    );

    let vectors = ListArray::from_iter_primitive::<Float32Type, _, _>(vec![
        Some(vec![Some(1.0), Some(2.0)]),
        Some(vec![Some(1.0), None]),
    ]);
    write_parquet(
        &path,
        &batch(vec![("vector", Arc::new(vectors))]),
        Compression::SNAPPY,
    );
    assert_error(
        read_default(&path),
        &["row 1: column `vector`: value 1 is null"],
    );

    let vectors =
        ListArray::from_iter_primitive::<Float32Type, _, _>(vec![Some(vec![Some(1.0)]), None]);
    write_parquet(
        &path,
        &batch(vec![("vector", Arc::new(vectors))]),
        Compression::SNAPPY,
    );
    assert_error(
        read_default(&path),
        &["row 1: column `vector`: vector is null"],
    );

    let columns: Vec<(&str, ArrayRef)> = vec![
        ("id", Arc::new(Int32Array::from(vec![3, -4]))),
        ("vector", f32_lists(&[&[1.0], &[2.0]])),
    ];
    write_parquet(&path, &batch(columns), Compression::SNAPPY);
    assert_error(
        read_default(&path),
        &["data.parquet: row 1: column `id`: id -4 is negative"],
    );

    let columns: Vec<(&str, ArrayRef)> = vec![
        ("id", Arc::new(StringArray::from(vec!["not-a-uuid"]))),
        ("vector", f32_lists(&[&[1.0]])),
    ];
    write_parquet(&path, &batch(columns), Compression::SNAPPY);
    assert_error(
        read_default(&path),
        &["row 0: column `id`", "\"not-a-uuid\" is not a UUID"],
    );

    let columns: Vec<(&str, ArrayRef)> = vec![
        ("id", Arc::new(Int64Array::from(vec![8, 9, 8]))),
        ("vector", f32_lists(&[&[1.0], &[2.0], &[3.0]])),
    ];
    write_parquet(&path, &batch(columns), Compression::SNAPPY);
    assert_error(
        read_default(&path),
        &["row 2: id 8 is also the id of row 0"],
    );
}

#[test]
fn parquet_infinite_payload_float_names_row_and_column() {
    let dir = TempDir::new("parquet-payload-inf");
    let path = dir.file("data.parquet");
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("vector", f32_lists(&[&[1.0], &[2.0]])),
        (
            "score",
            Arc::new(Float64Array::from(vec![1.0, f64::INFINITY])),
        ),
    ];
    write_parquet(&path, &batch(columns), Compression::SNAPPY);
    assert_error(
        read_default(&path),
        &["row 1: column `score`", "not finite"],
    );
}

#[test]
fn parquet_missing_columns_are_named() {
    let dir = TempDir::new("parquet-missing");
    let path = dir.file("data.parquet");
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("id", Arc::new(Int64Array::from(vec![1]))),
        ("emb", f32_lists(&[&[1.0]])),
    ];
    write_parquet(&path, &batch(columns), Compression::SNAPPY);
    assert_error(
        read_default(&path),
        &[
            "data.parquet: column `vector`: no such column",
            "id, emb",
            "--vector-column",
        ],
    );
    let options = ReadOptions {
        id_column: Some("key".into()),
        vector_column: Some("emb".into()),
        ..ReadOptions::default()
    };
    assert_error(
        read_points(&path, &options),
        &["column `key`: no such column"],
    );
}

#[test]
fn parquet_unsupported_column_types_are_named() {
    let dir = TempDir::new("parquet-types");
    let path = dir.file("data.parquet");
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("vector", f32_lists(&[&[1.0]])),
        ("blob", Arc::new(BinaryArray::from(vec![&b"\x00\x01"[..]]))),
    ];
    write_parquet(&path, &batch(columns), Compression::SNAPPY);
    assert_error(
        read_default(&path),
        &["data.parquet: column `blob`: type Binary cannot be a payload"],
    );

    let columns: Vec<(&str, ArrayRef)> = vec![("vector", Arc::new(StringArray::from(vec!["1,2"])))];
    write_parquet(&path, &batch(columns), Compression::SNAPPY);
    assert_error(
        read_default(&path),
        &["column `vector`: type Utf8 is not a list of float32"],
    );

    let ints = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1)])]);
    write_parquet(
        &path,
        &batch(vec![("vector", Arc::new(ints))]),
        Compression::SNAPPY,
    );
    assert_error(
        read_default(&path),
        &["column `vector`: list element type Int32"],
    );

    let columns: Vec<(&str, ArrayRef)> = vec![
        ("id", Arc::new(Float64Array::from(vec![1.0]))),
        ("vector", f32_lists(&[&[1.0]])),
    ];
    write_parquet(&path, &batch(columns), Compression::SNAPPY);
    assert_error(
        read_default(&path),
        &["column `id`: type Float64 cannot be an id"],
    );
}

#[test]
fn parquet_corrupt_or_empty_files_are_errors() {
    let dir = TempDir::new("parquet-corrupt");
    let path = dir.file("data.parquet");
    std::fs::write(&path, b"definitely not parquet").unwrap();
    assert_error(
        read_default(&path),
        &["data.parquet", "not a readable Parquet file"],
    );
    let empty: Vec<&[f32]> = Vec::new();
    write_parquet(
        &path,
        &batch(vec![("vector", f32_lists(&empty))]),
        Compression::SNAPPY,
    );
    assert_error(read_default(&path), &["data.parquet", "no rows"]);
}

#[test]
fn parquet_lz4_and_uncompressed_read_back() {
    let dir = TempDir::new("parquet-codecs");
    let path = dir.file("data.parquet");
    let columns = || -> Vec<(&str, ArrayRef)> {
        vec![
            ("id", Arc::new(Int64Array::from(vec![1, 2]))),
            ("vector", f32_lists(&[&[1.0, 2.0], &[3.0, 4.0]])),
        ]
    };
    for compression in [
        Compression::LZ4_RAW,
        Compression::LZ4,
        Compression::UNCOMPRESSED,
    ] {
        write_parquet(&path, &batch(columns()), compression);
        let read = read_default(&path).unwrap();
        assert_eq!(
            read.points,
            vec![
                number_point(1, &[1.0, 2.0], None),
                number_point(2, &[3.0, 4.0], None),
            ],
            "{compression:?}"
        );
    }
}

#[cfg(feature = "zstd")]
#[test]
fn parquet_zstd_reads_back_with_the_zstd_feature() {
    let dir = TempDir::new("parquet-zstd");
    let path = dir.file("data.parquet");
    let columns: Vec<(&str, ArrayRef)> = vec![("vector", f32_lists(&[&[1.0, 2.0]]))];
    let zstd = Compression::ZSTD(parquet::basic::ZstdLevel::default());
    write_parquet(&path, &batch(columns), zstd);
    assert_eq!(
        read_default(&path).unwrap().points,
        vec![number_point(0, &[1.0, 2.0], None)]
    );
}

// ---- corrupt files -------------------------------------------------------------------------

/// Flips random bytes of a valid file `rounds` times; every read must return, never panic.
fn survives_corruption(path: &Path, seed: u64, rounds: usize) {
    let original = std::fs::read(path).unwrap();
    let mut state = seed;
    let mut next = move || {
        // xorshift64*: a dependency-free, reproducible byte picker.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    for round in 0..rounds {
        let mut bytes = original.clone();
        for _ in 0..=(next() % 4) {
            let index = usize::try_from(next() % bytes.len() as u64).unwrap();
            bytes[index] = u8::try_from(next() % 256).unwrap();
        }
        if round % 10 == 0 {
            bytes.truncate(usize::try_from(next() % bytes.len() as u64).unwrap());
        }
        std::fs::write(path, &bytes).unwrap();
        let _ = read_default(path);
    }
}

#[test]
fn corrupt_files_are_errors_not_panics() {
    let dir = TempDir::new("corrupt");
    let npy = dir.file("data.npy");
    write_npy(&npy, 1, "<f4", "(4, 3)", &f32_bytes(&[0.5; 12]));
    survives_corruption(&npy, 1, 500);
    let fvecs = dir.file("data.fvecs");
    std::fs::write(
        &fvecs,
        fvecs_bytes(&[&[1.0, 2.0], &[3.0, 4.0], &[5.0, 6.0]]),
    )
    .unwrap();
    survives_corruption(&fvecs, 2, 500);
    let parquet = dir.file("data.parquet");
    let mut columns: Vec<(&str, ArrayRef)> = vec![
        ("id", Arc::new(Int64Array::from(vec![10, 20, 30]))),
        (
            "vector",
            f32_lists(&[&[1.0, 2.0], &[3.0, 4.0], &[-5.0, 0.5]]),
        ),
    ];
    columns.extend(payload_columns());
    write_parquet(&parquet, &batch(columns), Compression::SNAPPY);
    // The Parquet decoder panics on about 1 in 2,000 of these; the reader turns that into
    // an error (`without_panic` in readers/parquet.rs).
    survives_corruption(&parquet, 3, 4000);
}
