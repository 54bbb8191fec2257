//! A collection's HNSW graph config (Qdrant's `hnsw_config` `m` and `ef_construct`): what
//! segments and write-buffer graphs are built with, and what the optimizer rebuilds
//! segments built otherwise to.

use crate::error::{check_range, Result};

/// Qdrant's `hnsw_config` `m` and `ef_construct`: the links per node (twice as many on
/// the lowest layer) and the construction beam, as a user sets them. SagittaDB builds
/// with a beam of twice `ef_construct` ([`GraphConfig::build_beam`]): Qdrant's graphs
/// carry extra links for indexed payload fields that SagittaDB's do not, and twice the
/// beam gave at least Qdrant's recall at the same `hnsw_ef` (BENCHMARKS.md,
/// VectorDBBench).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GraphConfig {
    pub m: usize,
    pub ef_construct: usize,
}

/// Qdrant's defaults.
pub const DEFAULT_GRAPH: GraphConfig = GraphConfig {
    m: 16,
    ef_construct: 100,
};

/// The range of `hnsw_config.m` (Qdrant's 0, no graph, is not offered: every HNSW segment
/// has one) and of `hnsw_config.ef_construct` (Qdrant's lower bound, 4; the upper one
/// keeps twice it within the index's limit).
pub const MIN_GRAPH_M: usize = 2;
pub const MAX_GRAPH_M: usize = sagitta_index::limits::MAX_M;
pub const MIN_EF_CONSTRUCT: usize = 4;
pub const MAX_EF_CONSTRUCT: usize = sagitta_index::limits::MAX_EF_CONSTRUCTION / 2;

impl Default for GraphConfig {
    fn default() -> GraphConfig {
        DEFAULT_GRAPH
    }
}

impl GraphConfig {
    /// Both values in range; errors name the field as Qdrant's API does.
    pub fn validate(&self) -> Result<()> {
        check_range("hnsw_config.m", self.m, MIN_GRAPH_M, MAX_GRAPH_M)?;
        check_range(
            "hnsw_config.ef_construct",
            self.ef_construct,
            MIN_EF_CONSTRUCT,
            MAX_EF_CONSTRUCT,
        )
    }

    /// The beam graphs are built with: twice `ef_construct`.
    pub fn build_beam(&self) -> usize {
        2 * self.ef_construct
    }
}
