//! The request shapes of the four search endpoints: `POST /points/query` (and `/batch`),
//! whose `query` is a vector, a point id or `{"nearest": ..}`, and the pre-1.16
//! `POST /points/search` (and `/batch`), whose `vector` is a list or `{"name", "vector"}`;
//! and the `params` both take.

use std::fmt;

use sagitta_engine::{PointId, SparseVector};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::fields::{refuse_value, unknown_field, NoShardKeys, NullOnly};
use super::ids::{signed_id, uuid_id};
use super::vectors::{list_input, sparse_from_map, DenseVisitor, ListInput, NamedVector};
use super::{WithPayload, WithVector};

/// `query` of `POST /points/query`.
#[derive(Clone, Debug, PartialEq)]
pub enum QueryInput {
    Vector(Vec<f32>),
    /// A list of lists: a multivector query, for the multivector `using` names.
    Multi(Vec<Vec<f32>>),
    /// Search with a stored point's vector (the point itself is left out of the results).
    Point(PointId),
    Named(Vec<(String, NamedVector)>),
    /// A sparse vector (`{"indices": [..], "values": [..]}`), for the sparse vector
    /// `using` names.
    Sparse(SparseVector),
    /// `{"recommend": {positive, negative, strategy}}`.
    Recommend(RecommendInput),
    /// `{"fusion": "rrf" | "dbsf"}` or `{"rrf": {"k": ..}}`: the prefetches' hits fused.
    Fusion(Fusion),
    /// `{"nearest": .., "mmr": {..}}`: the nearest hits re-ranked for diversity.
    Mmr(Box<QueryInput>, MmrInput),
    /// A query kind SagittaDB does not serve (`fusion`, `discover`, ...).
    Unsupported(String),
}

/// `mmr` of a nearest query: maximal marginal relevance over the `candidates_limit`
/// nearest hits (default: the query's limit), `diversity` 0 (relevance only) to 1.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MmrInput {
    pub diversity: Option<f32>,
    pub candidates_limit: Option<usize>,
}

/// `{"recommend": ..}`: examples (vectors or point ids) to move towards and away from.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecommendInput {
    #[serde(default)]
    pub positive: Vec<ExampleInput>,
    #[serde(default)]
    pub negative: Vec<ExampleInput>,
    #[serde(default)]
    pub strategy: Option<String>,
}

pub use sagitta_engine::fusion::{Fusion, DEFAULT_RRF_K};

/// The value of `{"fusion": ..}`.
struct FusionName(Fusion);

impl<'de> Deserialize<'de> for FusionName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<FusionName, D::Error> {
        match String::deserialize(deserializer)?.as_str() {
            "rrf" => Ok(FusionName(Fusion::Rrf { k: DEFAULT_RRF_K })),
            "dbsf" => Ok(FusionName(Fusion::Dbsf)),
            other => Err(de::Error::custom(format!(
                "unknown fusion {other:?}, expected \"rrf\" or \"dbsf\""
            ))),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RrfInput {
    #[serde(default)]
    k: Option<u32>,
}

/// One example of a recommendation: a vector or a point id (as `nearest` takes them).
#[derive(Clone, Debug, PartialEq)]
pub struct ExampleInput(pub QueryInput);

impl<'de> Deserialize<'de> for ExampleInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ExampleInput, D::Error> {
        NearestInput::deserialize(deserializer).map(|nearest| ExampleInput(nearest.0))
    }
}

impl<'de> Deserialize<'de> for QueryInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<QueryInput, D::Error> {
        struct QueryVisitor;
        impl<'de> Visitor<'de> for QueryVisitor {
            type Value = QueryInput;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a vector, a point id, or {\"nearest\": vector or point id}")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<QueryInput, A::Error> {
                list_input(seq).map(QueryInput::from)
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<QueryInput, E> {
                Ok(QueryInput::Point(PointId::Number(value)))
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<QueryInput, E> {
                signed_id(value).map(QueryInput::Point)
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<QueryInput, E> {
                uuid_id(value).map(QueryInput::Point)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<QueryInput, A::Error> {
                let (mut result, mut mmr) = (None, None);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "indices" | "values" if result.is_none() => {
                            return sparse_from_map(&key, map).map(QueryInput::Sparse);
                        }
                        "nearest" => result = Some(map.next_value::<NearestInput>()?.0),
                        "recommend" => {
                            result = Some(QueryInput::Recommend(map.next_value()?));
                        }
                        "fusion" => {
                            let FusionName(fusion) = map.next_value()?;
                            result = Some(QueryInput::Fusion(fusion));
                        }
                        "rrf" => {
                            let rrf: RrfInput = map.next_value()?;
                            let k = rrf.k.map_or(DEFAULT_RRF_K, f64::from);
                            result = Some(QueryInput::Fusion(Fusion::Rrf { k }));
                        }
                        "mmr" => mmr = map.next_value::<Option<MmrInput>>()?,
                        _ if QUERY_KINDS.contains(&key.as_str()) => {
                            return Err(refuse_value(
                                &mut map,
                                format!(
                                    "{key:?} queries are not supported; use \
                                     {{\"nearest\": vector or point id}}"
                                ),
                            ))
                        }
                        _ => {
                            return Err(refuse_value(
                                &mut map,
                                unknown_field(
                                    &key,
                                    &["nearest", "recommend", "fusion", "rrf", "mmr"],
                                ),
                            ))
                        }
                    }
                }
                let result =
                    result.ok_or_else(|| de::Error::custom("the query object needs `nearest`"))?;
                with_mmr(result, mmr)
            }
        }
        deserializer.deserialize_any(QueryVisitor)
    }
}

impl From<ListInput> for QueryInput {
    fn from(list: ListInput) -> QueryInput {
        match list {
            ListInput::Dense(values) => QueryInput::Vector(values),
            ListInput::Multi(rows) => QueryInput::Multi(rows),
        }
    }
}

/// A query object's kind with its `mmr`, which only a `nearest` query takes.
fn with_mmr<E: de::Error>(query: QueryInput, mmr: Option<MmrInput>) -> Result<QueryInput, E> {
    match (mmr, query) {
        (None, query) => Ok(query),
        (Some(_), QueryInput::Recommend(_) | QueryInput::Fusion(_)) => {
            Err(E::custom("`mmr` re-ranks a `nearest` query's hits only"))
        }
        (Some(mmr), nearest) => Ok(QueryInput::Mmr(Box::new(nearest), mmr)),
    }
}

/// The query kinds of Qdrant's `query` object besides `nearest`.
const QUERY_KINDS: &[&str] = &[
    "discover",
    "context",
    "order_by",
    "formula",
    "sample",
    "relevance_feedback",
];

/// The value of `{"nearest": ..}`: a vector, a named map, a sparse vector or a point id.
struct NearestInput(QueryInput);

impl<'de> Deserialize<'de> for NearestInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<NearestInput, D::Error> {
        struct NearestVisitor;
        impl<'de> Visitor<'de> for NearestVisitor {
            type Value = NearestInput;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a vector or a point id")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<NearestInput, A::Error> {
                list_input(seq).map(|list| NearestInput(QueryInput::from(list)))
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<NearestInput, E> {
                Ok(NearestInput(QueryInput::Point(PointId::Number(value))))
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<NearestInput, E> {
                signed_id(value).map(|id| NearestInput(QueryInput::Point(id)))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<NearestInput, E> {
                uuid_id(value).map(|id| NearestInput(QueryInput::Point(id)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NearestInput, A::Error> {
                let mut named = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if named.is_empty() && (key == "indices" || key == "values") {
                        let sparse = sparse_from_map(&key, map)?;
                        return Ok(NearestInput(QueryInput::Sparse(sparse)));
                    }
                    named.push((key, map.next_value::<NamedVector>()?));
                }
                Ok(NearestInput(QueryInput::Named(named)))
            }
        }
        deserializer.deserialize_any(NearestVisitor)
    }
}

/// `params` of a query or search. `hnsw_ef` and `exact` choose the strategy; the rest
/// are accepted as the hints they are in Qdrant: every search re-scores its SQ8
/// candidates on f32 (`quantization`), searches every segment, indexed or not
/// (`indexed_only` allows that), and checks filters inside the graph walk (`acorn`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchParamsInput {
    pub hnsw_ef: Option<usize>,
    pub exact: Option<bool>,
    pub quantization: Option<QuantizationSearchInput>,
    pub indexed_only: Option<bool>,
    pub acorn: Option<AcornInput>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QuantizationSearchInput {
    pub ignore: Option<bool>,
    pub rescore: Option<bool>,
    pub oversampling: Option<f64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AcornInput {
    pub enable: Option<bool>,
    pub max_selectivity: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct QueryRequest {
    pub shard_key: Option<NullOnly<NoShardKeys>>,
    /// Searches whose hits this query fuses or re-scores (Qdrant's `Prefetch`: the fields
    /// of a query but the output ones), nested to any depth.
    pub prefetch: Option<Prefetches>,
    pub query: Option<QueryInput>,
    pub using: Option<String>,
    pub filter: Option<Value>,
    pub params: Option<SearchParamsInput>,
    pub limit: Option<usize>,
    pub offset: Option<usize>,
    pub score_threshold: Option<f32>,
    pub with_payload: Option<WithPayload>,
    pub with_vector: Option<WithVector>,
    pub lookup_from: Option<LookupLocation>,
}

/// `prefetch`: one prefetch or a list.
pub enum Prefetches {
    One(Box<QueryRequest>),
    Many(Vec<QueryRequest>),
}

impl<'de> Deserialize<'de> for Prefetches {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Prefetches, D::Error> {
        struct PrefetchVisitor;
        impl<'de> Visitor<'de> for PrefetchVisitor {
            type Value = Prefetches;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a prefetch or a list of them")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Prefetches, A::Error> {
                let one = QueryRequest::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Prefetches::One(Box::new(one)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Prefetches, A::Error> {
                let mut many = Vec::new();
                while let Some(one) = seq.next_element::<QueryRequest>()? {
                    many.push(one);
                }
                Ok(Prefetches::Many(many))
            }
        }
        deserializer.deserialize_any(PrefetchVisitor)
    }
}

impl Prefetches {
    pub fn into_vec(self) -> Vec<QueryRequest> {
        match self {
            Prefetches::One(one) => vec![*one],
            Prefetches::Many(many) => many,
        }
    }
}

/// `lookup_from`: the collection (and vector) a query by point id takes its vector from.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LookupLocation {
    pub collection: String,
    #[serde(default)]
    pub vector: Option<String>,
    #[serde(default)]
    pub shard_key: Option<NullOnly<NoShardKeys>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryBatchRequest {
    pub searches: Vec<QueryRequest>,
}

/// `vector` of the pre-1.16 `POST /points/search`: a list, or `{"name", "vector"}` (a
/// dense or a sparse vector).
pub enum SearchVectorInput {
    Dense(Vec<f32>),
    Named { name: String, vector: Vec<f32> },
    NamedSparse { name: String, vector: SparseVector },
}

impl<'de> Deserialize<'de> for SearchVectorInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<SearchVectorInput, D::Error> {
        struct SearchVectorVisitor;
        impl<'de> Visitor<'de> for SearchVectorVisitor {
            type Value = SearchVectorInput;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of numbers, or {\"name\": .., \"vector\": [..]}")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<SearchVectorInput, A::Error> {
                DenseVisitor.visit_seq(seq).map(SearchVectorInput::Dense)
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<SearchVectorInput, A::Error> {
                let (mut name, mut vector) = (None, None);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "name" => name = Some(map.next_value::<String>()?),
                        "vector" => vector = Some(map.next_value::<NamedVector>()?),
                        _ => {
                            return Err(refuse_value(
                                &mut map,
                                unknown_field(&key, &["name", "vector"]),
                            ))
                        }
                    }
                }
                let name = name.ok_or_else(|| de::Error::missing_field("name"))?;
                match vector.ok_or_else(|| de::Error::missing_field("vector"))? {
                    NamedVector::Sparse(vector) => {
                        Ok(SearchVectorInput::NamedSparse { name, vector })
                    }
                    NamedVector::Dense(vector) => Ok(SearchVectorInput::Named { name, vector }),
                    NamedVector::Multi(_) => Err(de::Error::custom(
                        "multivectors are searched with the Query API (`POST /points/query`)",
                    )),
                }
            }
        }
        deserializer.deserialize_any(SearchVectorVisitor)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchRequestInput {
    #[serde(default)]
    pub shard_key: Option<NullOnly<NoShardKeys>>,
    pub vector: SearchVectorInput,
    #[serde(default)]
    pub filter: Option<Value>,
    #[serde(default)]
    pub params: Option<SearchParamsInput>,
    pub limit: usize,
    #[serde(default)]
    pub offset: Option<usize>,
    #[serde(default)]
    pub score_threshold: Option<f32>,
    #[serde(default)]
    pub with_payload: Option<WithPayload>,
    #[serde(default)]
    pub with_vector: Option<WithVector>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchBatchRequest {
    pub searches: Vec<SearchRequestInput>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::parse;

    #[test]
    fn every_query_form() {
        let raw: QueryRequest = parse(br#"{"query":[1,2],"limit":3}"#).unwrap();
        assert_eq!(raw.query, Some(QueryInput::Vector(vec![1.0, 2.0])));
        let nearest: QueryRequest = parse(br#"{"query":{"nearest":[1,2]},"using":""}"#).unwrap();
        assert_eq!(nearest.query, Some(QueryInput::Vector(vec![1.0, 2.0])));
        let by_id: QueryRequest = parse(br#"{"query":{"nearest":7}}"#).unwrap();
        assert_eq!(by_id.query, Some(QueryInput::Point(PointId::Number(7))));
        let expected = SparseVector::new(vec![1, 4], vec![0.5, 2.0]).unwrap();
        for body in [
            &br#"{"query":{"nearest":{"indices":[4,1],"values":[2,0.5]}}}"#[..],
            br#"{"query":{"values":[2,0.5],"indices":[4,1]}}"#,
        ] {
            let sparse: QueryRequest = parse(body).unwrap();
            assert_eq!(sparse.query, Some(QueryInput::Sparse(expected.clone())));
        }
        for (body, reason) in [
            (
                &br#"{"query":{"nearest":{"indices":[1,1],"values":[1,2]}}}"#[..],
                "index 1 is given twice",
            ),
            (
                br#"{"query":{"indices":[1,2],"values":[1]}}"#,
                "2 indices and 1 values",
            ),
            (br#"{"query":{"indices":[1]}}"#, "missing field `values`"),
            (
                br#"{"query":{"indices":[1],"values":[1],"x":1}}"#,
                "unknown field `x`",
            ),
        ] {
            let error = parse::<QueryRequest>(body).err().unwrap();
            assert!(error.message.contains(reason), "{}", error.message);
            assert!(error.message.contains("query"), "{}", error.message);
        }
        let fusion: QueryRequest = parse(br#"{"query":{"fusion":"dbsf"}}"#).unwrap();
        assert_eq!(fusion.query, Some(QueryInput::Fusion(Fusion::Dbsf)));
        let rrf: QueryRequest = parse(br#"{"query":{"rrf":{"k":7}}}"#).unwrap();
        assert_eq!(rrf.query, Some(QueryInput::Fusion(Fusion::Rrf { k: 7.0 })));
        let error = parse::<QueryRequest>(br#"{"query":{"fusion":"max"}}"#)
            .err()
            .unwrap();
        assert!(error.message.contains("query.fusion"), "{}", error.message);
        let error = parse::<QueryRequest>(br#"{"query":{"formula":{}}}"#)
            .err()
            .unwrap();
        assert!(error.message.contains("query.formula"), "{}", error.message);
        let error = parse::<QueryRequest>(br#"{"query":{"nearest":[1],"foo":1}}"#)
            .err()
            .unwrap();
        assert!(error.message.contains("query.foo"), "{}", error.message);
    }
}
