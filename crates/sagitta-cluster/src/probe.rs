//! The messages of a linked collection ([`sagitta_engine::collection::peers`]): probe
//! batches, sent down the tree like query batches, and the calls rank 0 makes of one rank
//! with their answers. All are CBOR (`ciborium`) of the engine's serde types; a probe
//! batch starts with the byte [`PROBE_BATCH`] so a rank tells it from a query batch.

use sagitta_engine::collection::peers::{PeerAnswer, PeerCall, Probe};
use sagitta_engine::Collection;
use serde::{Deserialize, Serialize};

use crate::topk::{Hit, Partial};

/// The first byte of an encoded [`ProbeBatch`] (a query batch starts with its version, 1).
pub const PROBE_BATCH: u8 = b'P';

/// Searches of one linked collection wanting as many hits each, batched on rank 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeBatch {
    /// Rank 0's number for the batch (answers carry it).
    pub number: u64,
    pub collection: String,
    /// Hits wanted per probe (each probe's own `wanted`).
    pub wanted: usize,
    pub probes: Vec<Probe>,
}

impl ProbeBatch {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![PROBE_BATCH];
        ciborium::into_writer(self, &mut out).expect("writing to memory cannot fail");
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<ProbeBatch, String> {
        match bytes.split_first() {
            Some((&PROBE_BATCH, body)) => {
                ciborium::from_reader(body).map_err(|error| format!("probe batch: {error}"))
            }
            _ => Err("probe batch: does not start with its marker byte".to_string()),
        }
    }

    /// Whether `bytes` hold a probe batch (else a query batch).
    pub fn is_probe_batch(bytes: &[u8]) -> bool {
        bytes.first() == Some(&PROBE_BATCH)
    }

    /// This rank's best hits for every probe in `collection` (an unlinked copy, or rank
    /// 0's own points): ids with engine distances as scores, closest first.
    pub fn search(&self, collection: &Collection) -> Result<Partial, String> {
        let found = collection
            .probe_batch_here(&self.probes)
            .map_err(|error| error.to_string())?;
        let lists = found
            .into_iter()
            .map(|hits| {
                hits.into_iter()
                    .map(|(id, score)| Hit { id, score })
                    .collect()
            })
            .collect();
        Ok(Partial {
            batch: self.number,
            lists,
            missing: Vec::new(),
        })
    }
}

pub fn encode_call(call: &PeerCall) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(call, &mut out).expect("writing to memory cannot fail");
    out
}

pub fn decode_call(bytes: &[u8]) -> Result<PeerCall, String> {
    ciborium::from_reader(bytes).map_err(|error| format!("call from rank 0: {error}"))
}

pub fn encode_answer(answer: &Result<PeerAnswer, String>) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(answer, &mut out).expect("writing to memory cannot fail");
    out
}

pub fn decode_answer(bytes: &[u8]) -> Result<Result<PeerAnswer, String>, String> {
    ciborium::from_reader(bytes).map_err(|error| format!("malformed answer: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sagitta_engine::collection::peers::ProbeKind;
    use sagitta_engine::{Filter, PointId, Strategy};

    #[test]
    fn probe_batches_calls_and_answers_round_trip_and_a_query_batch_is_told_apart() {
        let filter = Filter::parse(
            &serde_json::json!({"must": [{"key": "tag", "match": {"any": ["a", "b"]}}],
                                "must_not": [{"has_id": [3, 4]}]}),
            "filter",
        )
        .unwrap();
        let batch = ProbeBatch {
            number: 7,
            collection: "docs".into(),
            wanted: 12,
            probes: vec![Probe {
                kind: ProbeKind::Dense {
                    query: vec![0.25, -1.5, f32::MIN_POSITIVE],
                    using: Some("text".into()),
                    strategy: Strategy::Beam(40),
                },
                wanted: 12,
                filter: Some(filter.clone()),
            }],
        };
        let bytes = batch.encode();
        assert!(ProbeBatch::is_probe_batch(&bytes));
        assert_eq!(ProbeBatch::decode(&bytes), Ok(batch));
        let query_batch = crate::batch::QueryBatch {
            number: 1,
            collection: "docs".into(),
            limit: 1,
            ef: 0,
            dim: 1,
            vectors: vec![1.0],
        };
        assert!(!ProbeBatch::is_probe_batch(&query_batch.encode()));
        assert!(ProbeBatch::decode(&query_batch.encode()).is_err());

        let call = PeerCall::Count {
            collection: "docs".into(),
            filter: Some(filter),
        };
        assert_eq!(decode_call(&encode_call(&call)), Ok(call));
        let answer = Ok(PeerAnswer::Ids(vec![
            PointId::Number(3),
            PointId::Uuid(u128::MAX),
        ]));
        assert_eq!(decode_answer(&encode_answer(&answer)), Ok(answer));
        let refused: Result<PeerAnswer, String> = Err("no collection at `docs`".into());
        assert_eq!(decode_answer(&encode_answer(&refused)), Ok(refused));
        assert!(decode_call(&[0xff, 0x00]).is_err());
    }
}
