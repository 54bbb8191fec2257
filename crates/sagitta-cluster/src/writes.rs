//! Writes across the job: an operation split by the rank owning each point, the request
//! rank 0 sends an owner, and the owner's acknowledgement (sent after its own log append,
//! and after its fsync when the caller waits).

use sagitta_engine::codec::{self, Operation};
use sagitta_engine::{CollectionConfig, VectorSpaces};
use sagitta_storage::codec::{DecodeError, Reader, Writer};

use crate::owner::owner_rank;

/// `operation` as each of `ranks` ranks applies it: the points (or ids) it owns, `None`
/// for a rank that owns none of them. Payload texts and keys go to every part.
pub fn split_by_owner(operation: Operation, ranks: usize) -> Vec<Option<Operation>> {
    operation.split_by(ranks, |id| owner_rank(id, ranks))
}

/// One rank's part of a write, as rank 0 sends it.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteRequest {
    /// Rank 0's number for the write (its acknowledgement carries it).
    pub number: u64,
    pub collection: String,
    /// Acknowledge only after the owner's log is fsynced.
    pub wait: bool,
    pub operation: Operation,
}

const WIRE_VERSION: u8 = 1;

impl WriteRequest {
    /// `version u8 = 1 | number u64 | name_length u16 | name | wait u8 | operation_length
    /// u32 | operation (the write-ahead log's encoding, docs/format.md)`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Writer::new();
        out.u8(WIRE_VERSION)
            .u64(self.number)
            .str_u16(&self.collection, "collection name")
            .u8(u8::from(self.wait))
            .bytes_u32(&codec::encode(&self.operation), "operation");
        out.into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Result<WriteRequest, DecodeError> {
        let mut reader = Reader::new(bytes);
        reader.version_u8("version", "write request", WIRE_VERSION)?;
        let number = reader.u64("number")?;
        let collection = reader.str_u16("collection name")?.to_string();
        let wait = reader.code("wait", |code| match code {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        })?;
        let at = reader.offset() + 4;
        let operation = codec::try_decode(reader.bytes_u32("operation")?)
            .map_err(|error| Reader::invalid_at(at, "operation", error.to_string()))?;
        reader.expect_end("end of the write request")?;
        Ok(WriteRequest {
            number,
            collection,
            wait,
            operation,
        })
    }
}

/// A change every rank makes: a collection created or dropped.
#[derive(Clone, Debug, PartialEq)]
pub enum Admin {
    Create {
        name: String,
        config: CollectionConfig,
        spaces: VectorSpaces,
    },
    Drop {
        name: String,
    },
}

/// An [`Admin`] change as rank 0 sends it to every rank: `version u8 = 1 | number u64 |
/// kind u8 (0 create, 1 drop) | name_length u16 | name | for create: config_length u32 |
/// config (the collection manifest's encoding, without schema or settings)`.
pub fn encode_admin(number: u64, admin: &Admin) -> Vec<u8> {
    let mut out = Writer::new();
    out.u8(WIRE_VERSION).u64(number);
    match admin {
        Admin::Create {
            name,
            config,
            spaces,
        } => {
            out.u8(0)
                .str_u16(name, "collection name")
                .bytes_u32(&config.to_bytes(spaces), "config");
        }
        Admin::Drop { name } => {
            out.u8(1).str_u16(name, "collection name");
        }
    }
    out.into_bytes()
}

/// Reads [`encode_admin`]'s bytes: the change's number and the change.
pub fn decode_admin(bytes: &[u8]) -> Result<(u64, Admin), DecodeError> {
    let mut reader = Reader::new(bytes);
    reader.version_u8("version", "admin request", WIRE_VERSION)?;
    let number = reader.u64("number")?;
    let create = reader.code("kind", |code| match code {
        0 => Some(true),
        1 => Some(false),
        _ => None,
    })?;
    let name = reader.str_u16("collection name")?.to_string();
    let admin = if create {
        let at = reader.offset() + 4;
        let (config, spaces) = CollectionConfig::from_bytes(reader.bytes_u32("config")?)
            .map_err(|error| Reader::invalid_at(at, "config", error.to_string()))?;
        Admin::Create {
            name,
            config,
            spaces,
        }
    } else {
        Admin::Drop { name }
    };
    reader.expect_end("end of the admin request")?;
    Ok((number, admin))
}

/// An owner's answer to a [`WriteRequest`]: `version u8 = 1 | number u64 | ok u8 |
/// error (text u32-length, when not ok)`.
pub fn encode_ack(number: u64, result: &Result<(), String>) -> Vec<u8> {
    let mut out = Writer::new();
    out.u8(WIRE_VERSION).u64(number);
    match result {
        Ok(()) => out.u8(1),
        Err(error) => out.u8(0).str_u32(error, "error"),
    };
    out.into_bytes()
}

/// Reads [`encode_ack`]'s bytes: the write's number and its outcome.
pub fn decode_ack(bytes: &[u8]) -> Result<(u64, Result<(), String>), DecodeError> {
    let mut reader = Reader::new(bytes);
    reader.version_u8("version", "write acknowledgement", WIRE_VERSION)?;
    let number = reader.u64("number")?;
    let result = match reader.u8("ok")? {
        1 => Ok(()),
        _ => Err(reader.str_u32("error")?.to_string()),
    };
    reader.expect_end("end of the write acknowledgement")?;
    Ok((number, result))
}

#[cfg(test)]
mod tests {
    use super::{decode_ack, encode_ack, split_by_owner, WriteRequest};
    use crate::owner::owner_rank;
    use sagitta_engine::codec::Operation;
    use sagitta_engine::{Point, PointId};

    #[test]
    fn every_point_goes_to_its_owner_once_and_payload_edits_to_every_owner() {
        let points: Vec<Point> = (0..200)
            .map(|id| Point {
                id: PointId::Number(id),
                vector: vec![id as f32, 1.0],
                payload: Some(format!(r#"{{"n":{id}}}"#)),
                side: Vec::new(),
            })
            .collect();
        let parts = split_by_owner(Operation::Upsert(points.clone()), 3);
        let mut seen = Vec::new();
        for (rank, part) in parts.into_iter().enumerate() {
            let Some(Operation::Upsert(owned)) = part else {
                panic!("200 points leave no rank without a part");
            };
            for point in owned {
                assert_eq!(owner_rank(&point.id, 3), rank);
                seen.push(point);
            }
        }
        seen.sort_by_key(|point| point.id);
        assert_eq!(seen, points);
        let ids = vec![PointId::Number(1), PointId::Number(2)];
        let keys = vec!["a".to_string()];
        let parts = split_by_owner(Operation::DeletePayloadKeys { ids, keys }, 4);
        let owners = [
            owner_rank(&PointId::Number(1), 4),
            owner_rank(&PointId::Number(2), 4),
        ];
        for (rank, part) in parts.iter().enumerate() {
            assert_eq!(part.is_some(), owners.contains(&rank), "rank {rank}");
            if let Some(Operation::DeletePayloadKeys { keys, .. }) = part {
                assert_eq!(keys, &["a".to_string()]);
            }
        }
    }

    #[test]
    fn requests_and_acks_round_trip_and_damage_is_named() {
        let request = WriteRequest {
            number: 5,
            collection: "docs".to_string(),
            wait: true,
            operation: Operation::SetPayload {
                ids: vec![PointId::Uuid(9)],
                payload: r#"{"k":1}"#.to_string(),
            },
        };
        let bytes = request.encode();
        assert_eq!(WriteRequest::decode(&bytes), Ok(request));
        let mut wait = bytes.clone();
        wait[15] = 7;
        let error = WriteRequest::decode(&wait).unwrap_err().to_string();
        assert_eq!(error, "at byte 15: wait: unknown code 7");
        let mut operation = bytes;
        operation[20] = 99;
        let error = WriteRequest::decode(&operation).unwrap_err().to_string();
        assert!(error.starts_with("at byte 20: operation:"), "{error}");
        let failed: Result<(), String> = Err("disk full".to_string());
        assert_eq!(decode_ack(&encode_ack(3, &failed)), Ok((3, failed)));
        assert_eq!(decode_ack(&encode_ack(4, &Ok(()))), Ok((4, Ok(()))));
        assert!(decode_ack(&[1, 0]).is_err());
    }

    #[test]
    fn admin_changes_round_trip_and_damage_is_named() {
        let config = sagitta_engine::CollectionConfig {
            dim: 4,
            distance: sagitta_engine::Distance::Dot,
            shard_count: 3,
            storage: sagitta_engine::StorageConfig::default(),
        };
        let create = super::Admin::Create {
            name: "made".to_string(),
            config,
            spaces: sagitta_engine::VectorSpaces::default(),
        };
        let bytes = super::encode_admin(7, &create);
        assert_eq!(super::decode_admin(&bytes), Ok((7, create)));
        let drop = super::Admin::Drop {
            name: "made".to_string(),
        };
        assert_eq!(
            super::decode_admin(&super::encode_admin(8, &drop)),
            Ok((8, drop))
        );
        let mut kind = bytes.clone();
        kind[9] = 4;
        let error = super::decode_admin(&kind).unwrap_err().to_string();
        assert_eq!(error, "at byte 9: kind: unknown code 4");
        let mut config = bytes;
        config[20] = 99; // the config's version byte
        let error = super::decode_admin(&config).unwrap_err().to_string();
        assert!(error.starts_with("at byte 20: config:"), "{error}");
    }
}
