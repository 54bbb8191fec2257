//! `hnsw_config`'s `m` and `ef_construct`, on a collection and on each of its vectors:
//! honoured as the one graph config every dense vector's graph is built with
//! (`sagitta_engine::GraphConfig`). A vector's values override the collection's, as in
//! Qdrant; vectors whose graphs would differ are refused, naming the field. The other
//! fields of `hnsw_config` are hints.

use sagitta_engine::graph::{MAX_EF_CONSTRUCT, MAX_GRAPH_M, MIN_EF_CONSTRUCT, MIN_GRAPH_M};
use sagitta_engine::GraphConfig;

use super::config::HnswConfigInput;
use crate::error::{ApiError, ApiResult};

/// The `m` and `ef_construct` an `hnsw_config` sets (unset: keep what applies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphDiff {
    pub m: Option<u64>,
    pub ef_construct: Option<u64>,
}

impl GraphDiff {
    pub fn of(input: Option<&HnswConfigInput>) -> GraphDiff {
        input.map_or_else(GraphDiff::default, |input| GraphDiff {
            m: input.m,
            ef_construct: input.ef_construct,
        })
    }

    /// `graph` with this diff's values in place of its own; `field` names the
    /// `hnsw_config` in errors.
    pub fn applied(self, graph: GraphConfig, field: &str) -> ApiResult<GraphConfig> {
        let m = checked(field, "m", self.m, graph.m, MIN_GRAPH_M, MAX_GRAPH_M)?;
        let ef_construct = checked(
            field,
            "ef_construct",
            self.ef_construct,
            graph.ef_construct,
            MIN_EF_CONSTRUCT,
            MAX_EF_CONSTRUCT,
        )?;
        Ok(GraphConfig { m, ef_construct })
    }
}

fn checked(
    field: &str,
    name: &str,
    given: Option<u64>,
    current: usize,
    min: usize,
    max: usize,
) -> ApiResult<usize> {
    let Some(value) = given else {
        return Ok(current);
    };
    match usize::try_from(value) {
        Ok(value) if (min..=max).contains(&value) => Ok(value),
        _ => {
            let zero = if name == "m" && value == 0 {
                " (0, no graph, is not supported: every segment is searched through one)"
            } else {
                ""
            };
            Err(ApiError::bad_request(format!(
                "Wrong input: `{field}.{name}` = {value}: must be {min}..={max}{zero}"
            )))
        }
    }
}

/// The graph config of a collection whose `hnsw_config` gives `collection` (over
/// `current`) and whose dense vectors give `vectors` (field name, diff): the collection's
/// with each vector's values over it, the same for every vector.
pub fn resolve(
    current: GraphConfig,
    collection: GraphDiff,
    vectors: &[(String, GraphDiff)],
) -> ApiResult<GraphConfig> {
    let base = collection.applied(current, "hnsw_config")?;
    let mut chosen: Option<(&str, GraphConfig)> = None;
    for (field, diff) in vectors {
        let graph = diff.applied(base, field)?;
        match chosen {
            Some((first, other)) if other != graph => {
                return Err(ApiError::bad_request(format!(
                    "Wrong input: `{field}`: m {} / ef_construct {} differs from `{first}`'s \
                     m {} / ef_construct {}; SagittaDB builds every dense vector's graph with \
                     one config (set it in the collection's `hnsw_config`)",
                    graph.m, graph.ef_construct, other.m, other.ef_construct
                )))
            }
            Some(_) => {}
            None => chosen = Some((field, graph)),
        }
    }
    Ok(chosen.map_or(base, |(_, graph)| graph))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sagitta_engine::DEFAULT_GRAPH;

    fn diff(m: Option<u64>, ef_construct: Option<u64>) -> GraphDiff {
        GraphDiff { m, ef_construct }
    }

    #[test]
    fn a_vector_overrides_the_collection_and_unset_values_keep_the_current_ones() {
        let graph = resolve(DEFAULT_GRAPH, diff(None, Some(123)), &[]).unwrap();
        assert_eq!(
            graph,
            GraphConfig {
                m: 16,
                ef_construct: 123
            }
        );
        let vectors = [("vectors.text.hnsw_config".to_string(), diff(Some(32), None))];
        let graph = resolve(DEFAULT_GRAPH, diff(None, Some(123)), &vectors).unwrap();
        assert_eq!(
            graph,
            GraphConfig {
                m: 32,
                ef_construct: 123
            }
        );
        let current = GraphConfig {
            m: 8,
            ef_construct: 50,
        };
        assert_eq!(
            resolve(current, GraphDiff::default(), &[]).unwrap(),
            current
        );
    }

    #[test]
    fn out_of_range_values_and_differing_vectors_are_refused_by_name() {
        let error = resolve(DEFAULT_GRAPH, diff(Some(0), None), &[]).unwrap_err();
        assert!(error
            .message
            .contains("`hnsw_config.m` = 0: must be 2..=256 (0, no graph"));
        let error = resolve(DEFAULT_GRAPH, diff(None, Some(3)), &[]).unwrap_err();
        assert!(error
            .message
            .contains("`hnsw_config.ef_construct` = 3: must be 4..=2048"));
        let vectors = [
            ("vectors.a.hnsw_config".to_string(), diff(Some(32), None)),
            ("vectors.b.hnsw_config".to_string(), diff(None, None)),
        ];
        let error = resolve(DEFAULT_GRAPH, GraphDiff::default(), &vectors).unwrap_err();
        assert!(error.message.contains("`vectors.b.hnsw_config`: m 16"));
        assert!(error
            .message
            .contains("differs from `vectors.a.hnsw_config`'s m 32"));
        let same = [
            ("vectors.a.hnsw_config".to_string(), diff(Some(32), None)),
            (
                "vectors.b.hnsw_config".to_string(),
                diff(Some(32), Some(100)),
            ),
        ];
        assert_eq!(
            resolve(DEFAULT_GRAPH, GraphDiff::default(), &same).unwrap(),
            GraphConfig {
                m: 32,
                ef_construct: 100
            }
        );
    }
}
