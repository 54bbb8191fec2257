//! Points out: the hits of a search and the records of a scroll or retrieve, with what
//! `with_payload` and `with_vector` asked for of each.

use sagitta_engine::{Point, ScoredPoint, SparseVector, VectorSpaces};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use super::{select_payload, IdOutput, PayloadOutput, VectorPick, WithPayload};

/// A point's vectors in a response: the unnamed one as a list, named ones as a map of
/// those the point has (Qdrant leaves out a named vector a point lacks).
pub enum VectorOutput {
    Dense(Vec<f32>),
    Named(Vec<(String, NamedOutput)>),
}

/// One named vector in a response: a list, or `{"indices", "values"}`.
pub enum NamedOutput {
    Dense(Vec<f32>),
    Sparse(SparseVector),
}

impl Serialize for NamedOutput {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            NamedOutput::Dense(values) => values.serialize(serializer),
            NamedOutput::Sparse(vector) => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("indices", vector.indices())?;
                map.serialize_entry("values", vector.values())?;
                map.end()
            }
        }
    }
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

/// The vectors `pick` asks for of a stored vector and sparse list (numbered as
/// [`VectorPick::Spaces`] numbers them).
pub fn vector_output(
    (vector, sparse): (Vec<f32>, Vec<Option<SparseVector>>),
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
    let mut named: Vec<(String, NamedOutput)> = spaces
        .split(&vector)
        .into_iter()
        .enumerate()
        .filter(|(index, _)| wanted(*index))
        .filter_map(|(index, part)| {
            let name = spaces.get(index)?.name.clone();
            Some((name, NamedOutput::Dense(part?.to_vec())))
        })
        .collect();
    for (index, vector) in sparse.into_iter().enumerate() {
        if let (Some(vector), Some(space)) = (vector, spaces.sparse().get(index)) {
            if wanted(spaces.sparse_number(index)) {
                named.push((space.name.clone(), NamedOutput::Sparse(vector)));
            }
        }
    }
    // only the unnamed vector: shown as a list, as Qdrant shows it
    if let [(name, NamedOutput::Dense(_))] = named.as_slice() {
        if name.is_empty() {
            let Some((_, NamedOutput::Dense(values))) = named.pop() else {
                unreachable!("matched above")
            };
            return Some(VectorOutput::Dense(values));
        }
    }
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
        vector: vector_output((hit.vector, hit.sparse), with_vector, spaces),
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
        vector: vector_output((point.vector, point.sparse), with_vector, spaces),
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
