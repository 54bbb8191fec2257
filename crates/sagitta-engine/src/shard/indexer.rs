//! The indexer's side of a shard: growing the write buffer's HNSW graph behind the writes
//! (its own graph, or its host segment's), and completing it for a seal.

use std::sync::Arc;

use sagitta_index::hnsw::HnswIndex;

use crate::buffer::{Buffer, BufferGraph};
use crate::error::Result;
use crate::policy::OptimizerPolicy;
use crate::segment::{self, SharedSegment};

use super::Shard;

/// Most slots a write-buffer graph is sized for up front (~170 bytes of link and label
/// arrays per slot are allocated at creation; vector rows only when written), unless the
/// buffer already holds more.
const BUFFER_GRAPH_CAPACITY_MAX: usize = 1 << 18;
/// Unindexed slots from which the indexer, far behind the writes (a bulk upload), takes a
/// large step: a batch of at least `ORDERED_BATCH_MIN_ROWS` is linked cluster by cluster,
/// finding its neighborhood in cache (synthetic 768-d: linking ~25% faster). Steady writes
/// never fall this far behind, so their steps stay small and the tail a search scans
/// exactly stays short.
const CATCH_UP_ROWS: usize = sagitta_index::hnsw::ORDERED_BATCH_MIN_ROWS;

impl Shard {
    /// The graph of a frozen buffer, completed (the slots the indexer had not reached are
    /// added now), with its host segment if the buffer's points joined one's graph. `None`
    /// when the buffer has no graph, outgrew its capacity, or its host was merged away
    /// (then the seal builds a fresh index from the live points).
    #[allow(clippy::type_complexity)]
    pub(super) fn finish_graph(
        &self,
        buffer: &Buffer,
    ) -> Result<Option<(Arc<HnswIndex>, Option<SharedSegment>)>> {
        let Some(graph) = &buffer.graph else {
            return Ok(None);
        };
        let host = self.host_of(graph);
        if graph.host.is_some() && host.is_none() {
            return Ok(None);
        }
        // A frozen buffer's slot count is final: a graph too small for it is dropped at
        // once, without waiting for an indexer step still growing it.
        if buffer.slot_count() > graph.slot_capacity() {
            return Ok(None);
        }
        let _growing = graph.growing.lock();
        let (from, to) = (graph.indexed(), buffer.slot_count());
        if from < to {
            graph.extend(&buffer.vectors_of(from, to, self.dim), self.dim)?;
        }
        // Slots retired before the indexer reached them have no deleted mark yet.
        buffer.mark_retired(graph, 0, to);
        Ok(Some((Arc::clone(&graph.index), host)))
    }

    /// One step of the indexer: adds up to `max_rows` slots of the write buffer to its
    /// graph (creating the graph, sized for `policy.seal_points` slots, once the buffer
    /// holds enough rows to train SQ8) — or, when at least [`CATCH_UP_ROWS`] wait, up to
    /// four times that many at once. Nothing once the buffer has outgrown its graph (the
    /// seal rebuilds it). Returns whether it added any.
    pub fn index_buffer(&self, policy: &OptimizerPolicy, max_rows: usize) -> Result<bool> {
        let (graph, from, to, vectors) = {
            let (slots, has_graph) = {
                let buffer = self.buffer.read();
                (buffer.slot_count(), buffer.graph.is_some())
            };
            if !has_graph && !self.start_graph(policy, slots)? {
                return Ok(false);
            }
            let buffer = self.buffer.read();
            let Some(graph) = buffer.graph.as_ref().map(Arc::clone) else {
                return Ok(false);
            };
            let slots = buffer.slot_count();
            if slots > graph.slot_capacity() {
                // Slots only grow: the seal will build this buffer's points afresh, and
                // linking more into this graph would be thrown away.
                return Ok(false);
            }
            let from = graph.indexed();
            let step = if slots - from >= CATCH_UP_ROWS {
                4 * CATCH_UP_ROWS
            } else {
                max_rows
            };
            let to = slots.min(from + step).min(graph.slot_capacity());
            if from >= to {
                return Ok(false);
            }
            (graph, from, to, buffer.vectors_of(from, to, self.dim))
        };
        {
            let _growing = graph.growing.lock();
            if graph.indexed() != from {
                return Ok(false); // a seal completed this graph meanwhile
            }
            graph.extend(&vectors, self.dim)?;
        }
        let buffer = self.buffer.read();
        if buffer
            .graph
            .as_ref()
            .is_some_and(|live| Arc::ptr_eq(live, &graph))
        {
            buffer.mark_retired(&graph, from, to);
        }
        Ok(true)
    }

    /// Gives the write buffer (holding `slots` slots) a graph: the graph of the largest
    /// segment with room for it, so the buffer's points join that graph and a search walks
    /// one graph instead of two; otherwise a graph of its own once the buffer holds enough
    /// rows to train SQ8. None while a seal runs: the segment it is writing may be the
    /// host, and a graph must not grow while it is saved. Returns whether there is a graph.
    /// Named vectors get no buffer graph: the buffer is scanned exactly per space until
    /// the seal builds each space's graph ([`crate::segment::spaces`]).
    fn start_graph(&self, policy: &OptimizerPolicy, slots: usize) -> Result<bool> {
        if self.frozen.read().is_some() || slots == 0 || self.storage.spaces.is_named() {
            return Ok(false);
        }
        let room = slots.max(policy.seal_points);
        let host = self
            .segments
            .read()
            .iter()
            .filter(|segment| segment.graph_host().is_some_and(|host| host.can_host(room)))
            .max_by_key(|segment| segment.len())
            .cloned();
        let graph = match host
            .as_ref()
            .and_then(|host| Some((host, host.graph_host()?)))
        {
            Some((host, hosting)) => {
                BufferGraph::hosted(Arc::clone(hosting.graph()), host.id(), host.len())
            }
            None => {
                if slots < policy.index_min_rows.max(1) {
                    return Ok(false);
                }
                // Room for the buffer to run well past the seal threshold while an earlier
                // seal finishes: slots beyond the capacity would cost a rebuild at seal.
                // Allocated before taking the write lock, so writers never wait for it.
                let capacity = policy
                    .seal_points
                    .saturating_mul(8)
                    .min(BUFFER_GRAPH_CAPACITY_MAX)
                    .max(slots * 2);
                BufferGraph::new(HnswIndex::new(
                    segment::segment_params(self.dim, self.distance, self.graph()),
                    capacity,
                )?)
            }
        };
        let frozen = self.frozen.read();
        let mut buffer = self.buffer.write();
        // A seal may have swapped the buffer meanwhile; the new one gets a graph later.
        if frozen.is_none() && buffer.graph.is_none() && buffer.slot_count() >= slots {
            buffer.graph = Some(Arc::new(graph));
        }
        Ok(buffer.graph.is_some())
    }
}
