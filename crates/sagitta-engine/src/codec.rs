//! Binary encoding of shard operations inside WAL records (see docs/format.md,
//! "Engine operations in WAL records"). Little-endian, fixed-width; the decoder checks every
//! length against the remaining bytes and returns `None` on anything malformed.

use crate::point::{Point, PointId};

const OPERATION_UPSERT: u8 = 1;
const OPERATION_DELETE: u8 = 2;
const OPERATION_SET_PAYLOAD: u8 = 3;
const OPERATION_OVERWRITE_PAYLOAD: u8 = 4;
const OPERATION_DELETE_PAYLOAD_KEYS: u8 = 5;
const ID_NUMBER: u8 = 0;
const ID_UUID: u8 = 1;
const NO_PAYLOAD: u32 = u32::MAX;

#[derive(Clone, Debug, PartialEq)]
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

fn put_ids(out: &mut Vec<u8>, ids: &[PointId]) {
    out.extend_from_slice(&u32::try_from(ids.len()).expect("batch").to_le_bytes());
    for id in ids {
        put_id(out, id);
    }
}

fn put_text(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(
        &u32::try_from(text.len())
            .expect("payload limit")
            .to_le_bytes(),
    );
    out.extend_from_slice(text.as_bytes());
}

fn put_id(out: &mut Vec<u8>, id: &PointId) {
    match id {
        PointId::Number(value) => {
            out.push(ID_NUMBER);
            out.extend_from_slice(&value.to_le_bytes());
        }
        PointId::Uuid(value) => {
            out.push(ID_UUID);
            out.extend_from_slice(&value.to_le_bytes());
        }
    }
}

pub fn encode(operation: &Operation) -> Vec<u8> {
    let mut out = Vec::new();
    match operation {
        Operation::Upsert(points) => {
            out.push(OPERATION_UPSERT);
            let dim = points.first().map_or(0, |p| p.vector.len());
            out.extend_from_slice(&u32::try_from(points.len()).expect("batch").to_le_bytes());
            out.extend_from_slice(&u32::try_from(dim).expect("dim").to_le_bytes());
            for point in points {
                debug_assert_eq!(point.vector.len(), dim);
                put_id(&mut out, &point.id);
                for value in &point.vector {
                    out.extend_from_slice(&value.to_le_bytes());
                }
                match &point.payload {
                    Some(text) => {
                        let length = u32::try_from(text.len()).expect("payload limit");
                        out.extend_from_slice(&length.to_le_bytes());
                        out.extend_from_slice(text.as_bytes());
                    }
                    None => out.extend_from_slice(&NO_PAYLOAD.to_le_bytes()),
                }
            }
        }
        Operation::Delete(ids) => {
            out.push(OPERATION_DELETE);
            put_ids(&mut out, ids);
        }
        Operation::SetPayload { ids, payload } | Operation::OverwritePayload { ids, payload } => {
            out.push(if matches!(operation, Operation::SetPayload { .. }) {
                OPERATION_SET_PAYLOAD
            } else {
                OPERATION_OVERWRITE_PAYLOAD
            });
            put_ids(&mut out, ids);
            put_text(&mut out, payload);
        }
        Operation::DeletePayloadKeys { ids, keys } => {
            out.push(OPERATION_DELETE_PAYLOAD_KEYS);
            put_ids(&mut out, ids);
            out.extend_from_slice(&u32::try_from(keys.len()).expect("keys").to_le_bytes());
            for key in keys {
                put_text(&mut out, key);
            }
        }
    }
    out
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn take(&mut self, count: usize) -> Option<&[u8]> {
        if self.bytes.len() < count {
            return None;
        }
        let (head, tail) = self.bytes.split_at(count);
        self.bytes = tail;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4")))
    }
    fn ids(&mut self) -> Option<Vec<PointId>> {
        let count = self.u32()? as usize;
        if count > self.bytes.len() / 9 {
            return None;
        }
        (0..count).map(|_| self.id()).collect()
    }
    fn text(&mut self) -> Option<String> {
        let length = self.u32()? as usize;
        String::from_utf8(self.take(length)?.to_vec()).ok()
    }
    fn id(&mut self) -> Option<PointId> {
        match self.u8()? {
            ID_NUMBER => Some(PointId::Number(u64::from_le_bytes(
                self.take(8)?.try_into().ok()?,
            ))),
            ID_UUID => Some(PointId::Uuid(u128::from_le_bytes(
                self.take(16)?.try_into().ok()?,
            ))),
            _ => None,
        }
    }
}

pub fn decode(bytes: &[u8]) -> Option<Operation> {
    let mut reader = Reader { bytes };
    let operation = match reader.u8()? {
        OPERATION_UPSERT => {
            let count = reader.u32()? as usize;
            let dim = reader.u32()? as usize;
            // every point needs at least 9 + 4·dim + 4 bytes: bound `count` before allocating
            if count > reader.bytes.len() / (13 + 4 * dim) {
                return None;
            }
            let mut points = Vec::with_capacity(count);
            for _ in 0..count {
                let id = reader.id()?;
                let vector = reader
                    .take(dim * 4)?
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().expect("4")))
                    .collect();
                let length = reader.u32()?;
                let payload = if length == NO_PAYLOAD {
                    None
                } else {
                    Some(String::from_utf8(reader.take(length as usize)?.to_vec()).ok()?)
                };
                points.push(Point {
                    id,
                    vector,
                    payload,
                });
            }
            Operation::Upsert(points)
        }
        OPERATION_DELETE => Operation::Delete(reader.ids()?),
        OPERATION_SET_PAYLOAD => Operation::SetPayload {
            ids: reader.ids()?,
            payload: reader.text()?,
        },
        OPERATION_OVERWRITE_PAYLOAD => Operation::OverwritePayload {
            ids: reader.ids()?,
            payload: reader.text()?,
        },
        OPERATION_DELETE_PAYLOAD_KEYS => {
            let ids = reader.ids()?;
            let count = reader.u32()? as usize;
            if count > reader.bytes.len() / 4 {
                return None;
            }
            let keys = (0..count)
                .map(|_| reader.text())
                .collect::<Option<Vec<_>>>()?;
            Operation::DeletePayloadKeys { ids, keys }
        }
        _ => return None,
    };
    reader.bytes.is_empty().then_some(operation)
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
            },
            Point {
                id: PointId::Uuid(0x1234_5678_9abc_def0_1234_5678_9abc_def0),
                vector: vec![0.0, 0.0, 1.0],
                payload: None,
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
}
