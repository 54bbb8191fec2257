//! Points out: the hits of a search and the records of a scroll or retrieve, with what
//! `with_payload` and `with_vector` asked for of each.

use sagitta_engine::{MultiVector, Point, ScoredPoint, SideVector, VectorSpaces};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use super::{select_payload, IdOutput, PayloadOutput, VectorPick, WithPayload};

/// A point's vectors in a response: the unnamed one alone as itself (a list, or a list
/// of rows), named ones as a map of those the point has (Qdrant leaves out a named
/// vector a point lacks).
pub enum VectorOutput {
    Dense(Vec<f32>),
    Multi(MultiVector),
    Named(Vec<(String, NamedOutput)>),
}

/// One named vector in a response: a list, `{"indices", "values"}`, or a list of rows.
pub enum NamedOutput {
    Dense(Vec<f32>),
    Side(SideVector),
}

/// A multivector as its list of rows.
struct Rows<'a>(&'a MultiVector);

impl Serialize for Rows<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.rows())
    }
}

impl Serialize for NamedOutput {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            NamedOutput::Dense(values) => values.serialize(serializer),
            NamedOutput::Side(SideVector::Sparse(vector)) => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("indices", vector.indices())?;
                map.serialize_entry("values", vector.values())?;
                map.end()
            }
            NamedOutput::Side(SideVector::Multi(vector)) => Rows(vector).serialize(serializer),
        }
    }
}

impl Serialize for VectorOutput {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            VectorOutput::Dense(values) => values.serialize(serializer),
            VectorOutput::Multi(vector) => Rows(vector).serialize(serializer),
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

/// The vectors `pick` asks for of a stored vector and side list (numbered as
/// [`VectorPick::Spaces`] numbers them).
pub fn vector_output(
    (vector, side): (Vec<f32>, Vec<Option<SideVector>>),
    pick: &VectorPick,
    spaces: &VectorSpaces,
) -> Option<VectorOutput> {
    if !spaces.is_named() {
        // a point without its unnamed vector shows none, as `{}` (Qdrant's form)
        let shown = if sagitta_engine::spaces::is_absent(&vector) {
            VectorOutput::Named(Vec::new())
        } else {
            VectorOutput::Dense(vector)
        };
        return (*pick != VectorPick::None).then_some(shown);
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
    for (index, vector) in side.into_iter().enumerate() {
        if let (Some(vector), Some(space)) = (vector, spaces.side().get(index)) {
            if wanted(spaces.side_number(index)) {
                named.push((space.name().to_string(), NamedOutput::Side(vector)));
            }
        }
    }
    // only the unnamed dense vector or multivector: shown as itself, as Qdrant shows it
    if let [(name, NamedOutput::Dense(_) | NamedOutput::Side(SideVector::Multi(_)))] =
        named.as_slice()
    {
        if name.is_empty() {
            return match named.pop() {
                Some((_, NamedOutput::Dense(values))) => Some(VectorOutput::Dense(values)),
                Some((_, NamedOutput::Side(SideVector::Multi(multi)))) => {
                    Some(VectorOutput::Multi(multi))
                }
                _ => unreachable!("matched above"),
            };
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
        vector: vector_output((hit.vector, hit.side), with_vector, spaces),
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
        vector: vector_output((point.vector, point.side), with_vector, spaces),
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
