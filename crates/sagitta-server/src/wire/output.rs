//! Points out: the hits of a search and the records of a scroll or retrieve, with what
//! `with_payload` and `with_vector` asked for of each.

use sagitta_engine::{Point, ScoredPoint};
use serde::Serialize;

use super::{select_payload, IdOutput, PayloadOutput, WithPayload};

/// `ScoredPoint`: `version` is required by qdrant-client's model. SagittaDB keeps no
/// per-point version, so it is always 0.
#[derive(Serialize)]
pub struct ScoredPointOutput {
    pub id: IdOutput,
    pub version: u64,
    pub score: f32,
    pub payload: Option<PayloadOutput>,
    pub vector: Option<Vec<f32>>,
}

/// `Record` (scroll, retrieve).
#[derive(Serialize)]
pub struct RecordOutput {
    pub id: IdOutput,
    pub payload: Option<PayloadOutput>,
    pub vector: Option<Vec<f32>>,
}

pub fn scored_output(
    hit: ScoredPoint,
    with_payload: &WithPayload,
    with_vector: bool,
) -> ScoredPointOutput {
    ScoredPointOutput {
        id: IdOutput(hit.id),
        version: 0,
        score: hit.score,
        payload: select_payload(hit.payload, with_payload),
        vector: with_vector.then_some(hit.vector),
    }
}

pub fn record_output(point: Point, with_payload: &WithPayload, with_vector: bool) -> RecordOutput {
    RecordOutput {
        id: IdOutput(point.id),
        payload: select_payload(point.payload, with_payload),
        vector: with_vector.then_some(point.vector),
    }
}

/// One search's hits as its endpoint answers them: the query endpoints wrap them in
/// `{"points": [..]}` (Qdrant's `QueryResponse`), the pre-1.16 search endpoints answer
/// the list itself.
#[derive(Serialize)]
#[serde(untagged)]
pub enum SearchHits {
    Points { points: Vec<ScoredPointOutput> },
    List(Vec<ScoredPointOutput>),
}
