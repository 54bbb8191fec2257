//! Binary encoding of shard operations inside WAL records (see docs/format.md,
//! "Engine operations in WAL records"). Little-endian, fixed-width, read and written with
//! `sagitta_storage::codec`; the decoder checks every length and count against the remaining
//! bytes before allocating, and [`try_decode`] names the byte offset and field of anything
//! malformed.

use sagitta_storage::codec::{self, DecodeError, DecodeResult, Reader, Writer};

use crate::multi::{MultiVector, MAX_MULTI_VALUES};
use crate::point::{Point, PointId, SideVector};
use crate::sparse::{SparseVector, MAX_SPARSE_ENTRIES};

const OPERATION_UPSERT: u8 = 1;
const OPERATION_DELETE: u8 = 2;
const OPERATION_SET_PAYLOAD: u8 = 3;
const OPERATION_OVERWRITE_PAYLOAD: u8 = 4;
const OPERATION_DELETE_PAYLOAD_KEYS: u8 = 5;
/// An upsert whose points carry side vectors (sparse vectors, multivectors): as
/// [`OPERATION_UPSERT`], each point followed by its side list. Written only when some
/// point has one, so a log of dense points reads as before.
const OPERATION_UPSERT_SPARSE: u8 = 6;
/// The length written for a side space the point has no vector in.
const NO_SPARSE: u32 = u32::MAX;
/// The length written before a multivector (then its u32 row count and u32 row width).
const MULTI: u32 = u32::MAX - 1;
const ID_NUMBER: u8 = 0;
const ID_UUID: u8 = 1;
const NO_PAYLOAD: u32 = u32::MAX;
/// The fewest bytes an id takes (a number: tag and u64).
const ID_BYTES_MIN: usize = 1 + 8;
/// The fewest bytes a length-prefixed text takes (an empty one).
const TEXT_BYTES_MIN: usize = 4;

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Operation {
    Upsert(Vec<Point>),
    Delete(Vec<PointId>),
    /// Merge the top-level keys of `payload` (a JSON object, as text) into each point's.
    SetPayload {
        ids: Vec<PointId>,
        payload: String,
    },
    /// Replace each point's payload with `payload`.
    OverwritePayload {
        ids: Vec<PointId>,
        payload: String,
    },
    /// Remove top-level `keys` from each point's payload.
    DeletePayloadKeys {
        ids: Vec<PointId>,
        keys: Vec<String>,
    },
}

impl Operation {
    /// The ids an id-addressed operation names; `None` for an upsert.
    pub fn ids(&self) -> Option<&[PointId]> {
        match self {
            Operation::Upsert(_) => None,
            Operation::Delete(ids)
            | Operation::SetPayload { ids, .. }
            | Operation::OverwritePayload { ids, .. }
            | Operation::DeletePayloadKeys { ids, .. } => Some(ids),
        }
    }

    /// This operation split into `parts` by `part_of` each point's id: part `i` holds the
    /// points (or ids) `part_of` puts in `i`, in their order, `None` where there are none;
    /// payload texts and keys go with every part.
    pub fn split_by(
        self,
        parts: usize,
        part_of: impl Fn(&PointId) -> usize,
    ) -> Vec<Option<Operation>> {
        if let Operation::Upsert(points) = self {
            let mut split: Vec<Vec<Point>> = vec![Vec::new(); parts];
            for point in points {
                split[part_of(&point.id)].push(point);
            }
            return split
                .into_iter()
                .map(|points| (!points.is_empty()).then_some(Operation::Upsert(points)))
                .collect();
        }
        let mut split: Vec<Vec<PointId>> = vec![Vec::new(); parts];
        for id in self.ids().unwrap_or_default() {
            split[part_of(id)].push(*id);
        }
        split
            .into_iter()
            .map(|ids| (!ids.is_empty()).then(|| self.with_ids(ids)))
            .collect()
    }

    /// The same id-addressed operation on `ids` instead (an upsert is returned as it is).
    #[must_use]
    pub fn with_ids(&self, ids: Vec<PointId>) -> Operation {
        match self {
            Operation::Upsert(points) => Operation::Upsert(points.clone()),
            Operation::Delete(_) => Operation::Delete(ids),
            Operation::SetPayload { payload, .. } => Operation::SetPayload {
                ids,
                payload: payload.clone(),
            },
            Operation::OverwritePayload { payload, .. } => Operation::OverwritePayload {
                ids,
                payload: payload.clone(),
            },
            Operation::DeletePayloadKeys { keys, .. } => Operation::DeletePayloadKeys {
                ids,
                keys: keys.clone(),
            },
        }
    }
}

fn put_ids(out: &mut Writer, ids: &[PointId]) {
    out.len_u32(ids.len(), "batch");
    for id in ids {
        put_id(out, id);
    }
}

fn put_id(out: &mut Writer, id: &PointId) {
    match id {
        PointId::Number(value) => out.u8(ID_NUMBER).u64(*value),
        PointId::Uuid(value) => out.u8(ID_UUID).u128(*value),
    };
}

fn put_upsert(out: &mut Writer, points: &[Point]) {
    let dim = points.first().map_or(0, |p| p.vector.len());
    let sparse = points.iter().any(|point| !point.side.is_empty());
    out.u8(if sparse {
        OPERATION_UPSERT_SPARSE
    } else {
        OPERATION_UPSERT
    })
    .len_u32(points.len(), "batch")
    .len_u32(dim, "dim");
    for point in points {
        debug_assert_eq!(point.vector.len(), dim);
        put_id(out, &point.id);
        out.f32s(&point.vector);
        match &point.payload {
            Some(text) => {
                debug_assert!(text.len() < NO_PAYLOAD as usize, "payload limit");
                out.str_u32(text, "payload limit")
            }
            None => out.u32(NO_PAYLOAD),
        };
        if sparse {
            put_side(out, &point.side);
        }
    }
}

/// A point's side list: a u32 count, then per space either a sparse vector — a u32
/// entry count, the u32 indices and the f32 values — or [`MULTI`], a u32 row count, a
/// u32 row width and the f32 values row after row, or [`NO_SPARSE`] for none.
fn put_side(out: &mut Writer, side: &[Option<SideVector>]) {
    out.len_u32(side.len(), "bounded space count");
    for vector in side {
        match vector {
            Some(SideVector::Sparse(vector)) => {
                out.len_u32(vector.len(), "bounded sparse entries")
                    .u32s(vector.indices().iter().copied())
                    .f32s(vector.values());
            }
            Some(SideVector::Multi(vector)) => {
                out.u32(MULTI)
                    .len_u32(vector.len(), "bounded rows")
                    .len_u32(vector.dim(), "bounded dim")
                    .f32s(vector.values());
            }
            None => {
                out.u32(NO_SPARSE);
            }
        }
    }
}

/// A multivector after its [`MULTI`] marker at `at`.
fn read_multi(reader: &mut Reader<'_>, at: u64) -> DecodeResult<MultiVector> {
    let rows = reader.u32("multivector rows")? as usize;
    let dim = reader.u32("multivector dim")? as usize;
    let values = rows as u128 * dim as u128;
    if values > MAX_MULTI_VALUES as u128 || values * 4 > reader.remaining() as u128 {
        return Err(Reader::invalid_at(
            at,
            "multivector rows",
            format!("{rows} rows of {dim}, {} bytes remain", reader.remaining()),
        ));
    }
    let values = codec::f32s(reader.bytes(rows * dim * 4, "multivector values")?).collect();
    MultiVector::from_values(dim, values)
        .map_err(|reason| Reader::invalid_at(at, "multivector", reason))
}

fn read_side(reader: &mut Reader<'_>) -> DecodeResult<Vec<Option<SideVector>>> {
    let count = reader.count_u32("sparse space count", 4)?;
    let mut sparse = Vec::with_capacity(count);
    for _ in 0..count {
        let at = reader.offset();
        let entries = reader.u32("sparse entry count")?;
        if entries == NO_SPARSE {
            sparse.push(None);
            continue;
        }
        if entries == MULTI {
            sparse.push(Some(SideVector::Multi(read_multi(reader, at)?)));
            continue;
        }
        let entries = entries as usize;
        if entries > MAX_SPARSE_ENTRIES || entries * 8 > reader.remaining() {
            return Err(Reader::invalid_at(
                at,
                "sparse entry count",
                format!("{entries} entries, {} bytes remain", reader.remaining()),
            ));
        }
        let indices = codec::u32s(reader.bytes(entries * 4, "sparse indices")?).collect();
        let values = codec::f32s(reader.bytes(entries * 4, "sparse values")?).collect();
        let vector = SparseVector::new(indices, values)
            .map_err(|reason| Reader::invalid_at(at, "sparse vector", reason))?;
        sparse.push(Some(SideVector::Sparse(vector)));
    }
    Ok(sparse)
}

pub fn encode(operation: &Operation) -> Vec<u8> {
    let mut out = Writer::new();
    match operation {
        Operation::Upsert(points) => put_upsert(&mut out, points),
        Operation::Delete(ids) => {
            out.u8(OPERATION_DELETE);
            put_ids(&mut out, ids);
        }
        Operation::SetPayload { ids, payload } | Operation::OverwritePayload { ids, payload } => {
            out.u8(if matches!(operation, Operation::SetPayload { .. }) {
                OPERATION_SET_PAYLOAD
            } else {
                OPERATION_OVERWRITE_PAYLOAD
            });
            put_ids(&mut out, ids);
            out.str_u32(payload, "payload limit");
        }
        Operation::DeletePayloadKeys { ids, keys } => {
            out.u8(OPERATION_DELETE_PAYLOAD_KEYS);
            put_ids(&mut out, ids);
            out.len_u32(keys.len(), "keys");
            for key in keys {
                out.str_u32(key, "key length");
            }
        }
    }
    out.into_bytes()
}

fn read_id(reader: &mut Reader<'_>) -> DecodeResult<PointId> {
    match reader.code("id kind", |kind| {
        [ID_NUMBER, ID_UUID].contains(&kind).then_some(kind)
    })? {
        ID_NUMBER => reader.u64("numeric id").map(PointId::Number),
        _ => reader.u128("UUID id").map(PointId::Uuid),
    }
}

fn read_ids(reader: &mut Reader<'_>) -> DecodeResult<Vec<PointId>> {
    let count = reader.count_u32("id count", ID_BYTES_MIN)?;
    (0..count).map(|_| read_id(reader)).collect()
}

fn read_text(reader: &mut Reader<'_>, expected: &'static str) -> DecodeResult<String> {
    reader.str_u32(expected).map(str::to_string)
}

fn read_upsert(reader: &mut Reader<'_>, with_sparse: bool) -> DecodeResult<Vec<Point>> {
    let count_at = reader.offset();
    let count = reader.u32("point count")? as usize;
    let dim = reader.u32("dim")? as usize;
    // every point needs at least an id, 4·dim bytes and a payload length: bound `count`
    // before allocating
    let needed = count as u128 * (ID_BYTES_MIN + 4 * dim + 4) as u128;
    if needed > reader.remaining() as u128 {
        return Err(Reader::invalid_at(
            count_at,
            "point count",
            format!(
                "{count} points of dim {dim} need at least {needed} bytes, {} remain",
                reader.remaining()
            ),
        ));
    }
    let mut points = Vec::with_capacity(count);
    for _ in 0..count {
        let id = read_id(reader)?;
        let vector = codec::f32s(reader.bytes(dim * 4, "vector")?).collect();
        let payload = match reader.u32("payload length")? {
            NO_PAYLOAD => None,
            length => Some(reader.str(length as usize, "payload")?.to_string()),
        };
        let side = if with_sparse {
            read_side(reader)?
        } else {
            Vec::new()
        };
        points.push(Point {
            id,
            vector,
            payload,
            side,
        });
    }
    Ok(points)
}

/// Decodes one operation; `None` for anything malformed ([`try_decode`] says what).
pub fn decode(bytes: &[u8]) -> Option<Operation> {
    try_decode(bytes).ok()
}

/// Decodes one operation, which must take every byte; a malformed one is an error naming
/// the byte offset and the field.
pub fn try_decode(bytes: &[u8]) -> Result<Operation, DecodeError> {
    let mut reader = Reader::new(bytes);
    let operation = match reader.u8("operation")? {
        OPERATION_UPSERT => Operation::Upsert(read_upsert(&mut reader, false)?),
        OPERATION_UPSERT_SPARSE => Operation::Upsert(read_upsert(&mut reader, true)?),
        OPERATION_DELETE => Operation::Delete(read_ids(&mut reader)?),
        OPERATION_SET_PAYLOAD => Operation::SetPayload {
            ids: read_ids(&mut reader)?,
            payload: read_text(&mut reader, "payload")?,
        },
        OPERATION_OVERWRITE_PAYLOAD => Operation::OverwritePayload {
            ids: read_ids(&mut reader)?,
            payload: read_text(&mut reader, "payload")?,
        },
        OPERATION_DELETE_PAYLOAD_KEYS => {
            let ids = read_ids(&mut reader)?;
            let count = reader.count_u32("key count", TEXT_BYTES_MIN)?;
            let keys = (0..count)
                .map(|_| read_text(&mut reader, "key"))
                .collect::<DecodeResult<Vec<_>>>()?;
            Operation::DeletePayloadKeys { ids, keys }
        }
        other => {
            return Err(Reader::invalid_at(
                0,
                "operation",
                format!("unknown operation {other}"),
            ))
        }
    };
    reader.expect_end("end of operation")?;
    Ok(operation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_round_trip_and_garbage_is_rejected() {
        let upsert = Operation::Upsert(vec![
            Point {
                id: PointId::Number(7),
                vector: vec![0.5, -1.0, 2.0],
                payload: Some(r#"{"a":1}"#.to_string()),
                side: Vec::new(),
            },
            Point {
                id: PointId::Uuid(0x1234_5678_9abc_def0_1234_5678_9abc_def0),
                vector: vec![0.0, 0.0, 1.0],
                payload: None,
                side: Vec::new(),
            },
        ]);
        let bytes = encode(&upsert);
        assert_eq!(decode(&bytes), Some(upsert));
        let delete = Operation::Delete(vec![PointId::Number(1), PointId::Uuid(2)]);
        assert_eq!(decode(&encode(&delete)), Some(delete));
        for operation in [
            Operation::SetPayload {
                ids: vec![PointId::Number(3)],
                payload: r#"{"b":2}"#.to_string(),
            },
            Operation::OverwritePayload {
                ids: vec![PointId::Uuid(4), PointId::Number(5)],
                payload: "{}".to_string(),
            },
            Operation::DeletePayloadKeys {
                ids: vec![PointId::Number(6)],
                keys: vec!["a".to_string(), "b.c".to_string()],
            },
        ] {
            let bytes = encode(&operation);
            assert_eq!(decode(&bytes), Some(operation));
            assert_eq!(decode(&bytes[..bytes.len() - 1]), None);
        }
        assert_eq!(decode(&bytes[..bytes.len() - 1]), None);
        assert_eq!(decode(&[9, 0, 0]), None);
        let mut huge_count = bytes.clone();
        huge_count[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode(&huge_count), None);
    }

    #[test]
    fn sparse_vectors_round_trip_and_bad_ones_are_refused() {
        let sparse = SparseVector::new(vec![9, 2], vec![0.5, -1.0]).unwrap();
        let upsert = Operation::Upsert(vec![
            Point {
                id: PointId::Number(1),
                vector: vec![],
                payload: None,
                side: vec![Some(SideVector::Sparse(sparse.clone())), None],
            },
            Point {
                id: PointId::Number(2),
                vector: vec![],
                payload: Some("{}".to_string()),
                side: Vec::new(),
            },
        ]);
        let bytes = encode(&upsert);
        assert_eq!(bytes[0], OPERATION_UPSERT_SPARSE);
        assert_eq!(decode(&bytes), Some(upsert));
        // point 1: tag, count, dim, id (9), payload length (4), then its sparse list
        let list = 1 + 4 + 4 + 9 + 4;
        assert_eq!(&bytes[list..list + 8], &[2, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(&bytes[list + 8..list + 16], &[2, 0, 0, 0, 9, 0, 0, 0]);
        let mut repeated = bytes.clone();
        repeated[list + 12] = 2; // indices 2, 2
        let error = try_decode(&repeated).unwrap_err().to_string();
        assert!(error.contains("index 2 is given twice"), "{error}");
        let mut too_many = bytes.clone();
        too_many[list + 4..list + 8].copy_from_slice(&1000u32.to_le_bytes());
        let error = try_decode(&too_many).unwrap_err().to_string();
        assert!(error.contains("sparse entry count"), "{error}");
    }

    #[test]
    fn multivectors_round_trip_in_the_documented_layout() {
        let multi = MultiVector::new(&[vec![1.0, 2.0], vec![3.0, 4.0], vec![5.0, 6.0]]).unwrap();
        let upsert = Operation::Upsert(vec![Point {
            id: PointId::Number(1),
            vector: vec![],
            payload: None,
            side: vec![None, Some(SideVector::Multi(multi))],
        }]);
        let bytes = encode(&upsert);
        assert_eq!(decode(&bytes), Some(upsert));
        // tag, count, dim, id (9), payload length (4), side count, NO_SPARSE, then MULTI
        let at = 1 + 4 + 4 + 9 + 4 + 4 + 4;
        assert_eq!(&bytes[at..at + 4], &MULTI.to_le_bytes());
        assert_eq!(&bytes[at + 4..at + 12], &[3, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(&bytes[at + 12..at + 16], &1.0f32.to_le_bytes());
        let mut ragged = bytes.clone();
        ragged[at + 4] = 4; // 4 rows of 2 need 8 more bytes than remain
        let error = try_decode(&ragged).unwrap_err().to_string();
        assert!(error.contains("multivector rows"), "{error}");
        let mut nan = bytes.clone();
        nan[at + 12..at + 16].copy_from_slice(&f32::NAN.to_le_bytes());
        let error = try_decode(&nan).unwrap_err().to_string();
        assert!(error.contains("row 0 position 0"), "{error}");
    }

    #[test]
    fn encoding_is_the_documented_layout() {
        let upsert = Operation::Upsert(vec![Point {
            id: PointId::Number(7),
            vector: vec![1.0],
            payload: Some("{}".to_string()),
            side: Vec::new(),
        }]);
        let mut expected = vec![OPERATION_UPSERT, 1, 0, 0, 0, 1, 0, 0, 0, ID_NUMBER];
        expected.extend_from_slice(&7u64.to_le_bytes());
        expected.extend_from_slice(&1.0f32.to_le_bytes());
        expected.extend_from_slice(&[2, 0, 0, 0, b'{', b'}']);
        assert_eq!(encode(&upsert), expected);
        let keys = Operation::DeletePayloadKeys {
            ids: vec![PointId::Uuid(1)],
            keys: vec!["a".to_string()],
        };
        let mut expected = vec![OPERATION_DELETE_PAYLOAD_KEYS, 1, 0, 0, 0, ID_UUID];
        expected.extend_from_slice(&1u128.to_le_bytes());
        expected.extend_from_slice(&[1, 0, 0, 0, 1, 0, 0, 0, b'a']);
        assert_eq!(encode(&keys), expected);
        let no_payload = Operation::Upsert(vec![Point {
            id: PointId::Number(1),
            vector: vec![],
            payload: None,
            side: Vec::new(),
        }]);
        assert_eq!(encode(&no_payload)[18..], NO_PAYLOAD.to_le_bytes());
    }

    #[test]
    fn malformed_operations_name_the_offset_and_field() {
        let operation = Operation::SetPayload {
            ids: vec![PointId::Number(3)],
            payload: r#"{"b":2}"#.to_string(),
        };
        let bytes = encode(&operation);
        // op 1 + count 4 + id 9 = the payload length at byte 14, its text at 18
        let error = try_decode(&bytes[..bytes.len() - 1]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "at byte 18: payload: truncated (needs 7 bytes, 6 remain)"
        );
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert_eq!(
            try_decode(&trailing).unwrap_err().to_string(),
            "at byte 25: end of operation: 1 bytes follow the end"
        );
        let mut bad_id = bytes.clone();
        bad_id[5] = 9;
        assert!(try_decode(&bad_id)
            .unwrap_err()
            .to_string()
            .starts_with("at byte 5: id kind: unknown code 9"));
        let mut bad_text = bytes;
        bad_text[18] = 0xff;
        assert_eq!(
            try_decode(&bad_text).unwrap_err().to_string(),
            "at byte 18: payload: not UTF-8"
        );
        assert!(try_decode(&[9])
            .unwrap_err()
            .to_string()
            .starts_with("at byte 0: operation: unknown operation 9"));
        let mut huge = vec![OPERATION_UPSERT];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        let error = try_decode(&huge).unwrap_err();
        assert_eq!((error.offset, error.expected), (1, "point count"));
    }
}
