//! Points out: the hits of a search and the records of a scroll or retrieve, with what
//! `with_payload` and `with_vector` asked for of each.

use sagitta_engine::{Point, ScoredPoint, VectorSpaces};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use super::{select_payload, IdOutput, PayloadOutput, VectorPick, WithPayload};

/// A point's vectors in a response: the unnamed one as a list, named ones as a map of
/// those the point has (Qdrant leaves out a named vector a point lacks).
pub enum VectorOutput {
    Dense(Vec<f32>),
    Named(Vec<(String, Vec<f32>)>),
}

impl Serialize for VectorOutput {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            VectorOutput::Dense(values) => values.serialize(serializer),
            VectorOutput::Named(named) => {
                let mut map = serializer.serialize_map(Some(named.len()))?;
                for (name, values) in named {
                    map.serialize_entry(name, values)?;
                }
                map.end()
            }
        }
    }
}

/// The vectors `pick` asks for of a stored vector.
pub fn vector_output(
    vector: Vec<f32>,
    pick: &VectorPick,
    spaces: &VectorSpaces,
) -> Option<VectorOutput> {
    if !spaces.is_named() {
        return (*pick != VectorPick::None).then_some(VectorOutput::Dense(vector));
    }
    let wanted = |index: usize| match pick {
        VectorPick::None => false,
        VectorPick::All => true,
        VectorPick::Spaces(indices) => indices.contains(&index),
    };
    if *pick == VectorPick::None {
        return None;
    }
    let named = spaces
        .split(&vector)
        .into_iter()
        .enumerate()
        .filter(|(index, _)| wanted(*index))
        .filter_map(|(index, part)| {
            let name = spaces.get(index)?.name.clone();
            Some((name, part?.to_vec()))
        })
        .collect();
    Some(VectorOutput::Named(named))
}

/// `ScoredPoint`: `version` is required by qdrant-client's model. SagittaDB keeps no
/// per-point version, so it is always 0.
#[derive(Serialize)]
pub struct ScoredPointOutput {
    pub id: IdOutput,
    pub version: u64,
    pub score: f32,
    pub payload: Option<PayloadOutput>,
    pub vector: Option<VectorOutput>,
}

/// `Record` (scroll, retrieve).
#[derive(Serialize)]
pub struct RecordOutput {
    pub id: IdOutput,
    pub payload: Option<PayloadOutput>,
    pub vector: Option<VectorOutput>,
}

pub fn scored_output(
    hit: ScoredPoint,
    with_payload: &WithPayload,
    with_vector: &VectorPick,
    spaces: &VectorSpaces,
) -> ScoredPointOutput {
    ScoredPointOutput {
        id: IdOutput(hit.id),
        version: 0,
        score: hit.score,
        payload: select_payload(hit.payload, with_payload),
        vector: vector_output(hit.vector, with_vector, spaces),
    }
}

pub fn record_output(
    point: Point,
    with_payload: &WithPayload,
    with_vector: &VectorPick,
    spaces: &VectorSpaces,
) -> RecordOutput {
    RecordOutput {
        id: IdOutput(point.id),
        payload: select_payload(point.payload, with_payload),
        vector: vector_output(point.vector, with_vector, spaces),
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
