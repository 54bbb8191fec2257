//! The read side of a shard: counts, id walks for scroll, point lookups and search over
//! the buffer, the frozen buffer and the segments (one graph walk for a joined buffer and
//! its host).

use std::sync::Arc;

use sagitta_index::hnsw::{HnswIndex, HnswSearchParams};

use crate::buffer::{Buffer, BufferGraph, BufferPlan};
use crate::error::Result;
use crate::filter::Filter;
use crate::point::{Point, PointId};
use crate::query::{auto_beam, hit_distance, segment_beam, ShardHit, Strategy};
use crate::segment::{SegmentWrite, SharedSegment};
use crate::shard_state::Frozen;
use crate::spaces::SpaceSlice;

use super::{host_among, Shard};

/// The graph a host segment shares with a write buffer (see [`host_among`]).
fn hosted_graph(host: &SharedSegment) -> &Arc<HnswIndex> {
    host.graph_host()
        .expect("a host segment has a graph")
        .graph()
}

impl Shard {
    /// Points passing `filter` (all points without one).
    pub fn count(&self, filter: Option<&Filter>) -> usize {
        self.matching_ids(filter).len()
    }

    /// Ids of the points passing `filter`, unordered.
    pub fn matching_ids(&self, filter: Option<&Filter>) -> Vec<PointId> {
        let segments = self.segments.read();
        let frozen = self.frozen.read();
        let buffer = self.buffer.read();
        let mut ids = buffer.matching_ids(filter, None);
        if let Some(frozen) = frozen.as_ref() {
            ids.extend(
                frozen
                    .buffer
                    .matching_ids(filter, Some(&frozen.removed.lock())),
            );
        }
        for segment in segments.iter() {
            ids.extend(segment.live_ids(filter));
        }
        ids
    }

    /// The first `limit` ids passing `filter` from `start` on, in id order (each part of the
    /// shard stops at its `limit`-th match).
    pub fn scroll_ids(
        &self,
        start: Option<PointId>,
        filter: Option<&Filter>,
        limit: usize,
    ) -> Vec<PointId> {
        let segments = self.segments.read();
        let frozen = self.frozen.read();
        let buffer = self.buffer.read();
        let mut ids = buffer.scroll_ids(start, filter, None, limit);
        if let Some(frozen) = frozen.as_ref() {
            let removed = frozen.removed.lock();
            ids.extend(
                frozen
                    .buffer
                    .scroll_ids(start, filter, Some(&removed), limit),
            );
        }
        for segment in segments.iter() {
            ids.extend(segment.scroll_ids(start, filter, limit));
        }
        ids.sort_unstable();
        ids.truncate(limit);
        ids
    }

    /// The live point `id`; an error only when a disk segment's read fails.
    pub fn get(&self, id: &PointId) -> Result<Option<Point>> {
        let segments = self.segments.read();
        let frozen = self.frozen.read();
        let buffer = self.buffer.read();
        if let Some(slot) = buffer.slots.get(id) {
            return Ok(Some(buffer.point(*slot, self.dim)));
        }
        if let Some(frozen) = frozen.as_ref().filter(|frozen| frozen.is_live(id)) {
            return Ok(Some(frozen.buffer.point(frozen.buffer.slots[id], self.dim)));
        }
        for segment in segments.iter() {
            if let Some(point) = segment.get(id)? {
                return Ok(Some(point));
            }
        }
        Ok(None)
    }

    /// Every live point: sealed ones, then a frozen buffer's, then the buffer's.
    pub fn points(&self) -> Result<Vec<Point>> {
        let segments = self.segments.read();
        let frozen = self.frozen.read();
        let buffer = self.buffer.read();
        let mut points: Vec<Point> = segments
            .iter()
            .flat_map(|s| s.live_points().map(|item| item.map(|(_, point)| point)))
            .collect::<Result<_>>()?;
        if let Some(frozen) = frozen.as_ref() {
            let removed = frozen.removed.lock();
            points.extend(
                frozen
                    .buffer
                    .points(self.dim)
                    .into_iter()
                    .filter(|point| !removed.contains(&point.id)),
            );
        }
        points.extend(buffer.points(self.dim));
        Ok(points)
    }

    /// Top-`k` among points passing `filter`: HNSW over each segment and over the indexed
    /// part of the buffer (and of a frozen one), exact over the rest. A buffer whose points
    /// joined a segment's graph is searched with that segment in one walk. `query` is
    /// already normalized for Cosine.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: Option<&Filter>,
        strategy: Strategy,
        space: SpaceSlice,
    ) -> Result<Vec<ShardHit>> {
        // The three locks are held together only to take a consistent view and to search
        // the write buffer (with the graph it shares, if any); the frozen buffer and the
        // other segments are searched from that view after they are released, so a writer
        // waits for at most the buffer part of a query, not all of it. The view can only
        // lose points meanwhile (a concurrent write marks them deleted in place), never gain
        // a second copy of one.
        let segments_lock = self.segments.read();
        let frozen_lock = self.frozen.read();
        let buffer = self.buffer.read();
        let segments: Vec<SharedSegment> = segments_lock.clone();
        let frozen: Option<Arc<Frozen>> = frozen_lock.clone();
        let mut plan = PartPlan::new(k, strategy, &segments, frozen.as_deref(), &buffer);
        // The segment whose graph the buffer's (or the frozen buffer's) points joined.
        let host = match plan.beam(plan.largest) {
            Some(ef) if filter.is_none() => self
                .shared_host(&segments, frozen.as_deref(), &buffer)
                .map(|host| (host, ef)),
            _ => None,
        };
        let mut hits = match &host {
            Some((host, ef)) => {
                plan.walked = Some(Arc::clone(hosted_graph(host)));
                self.walk_shared(query, k, *ef, host.as_ref(), frozen.as_deref(), &buffer)?
            }
            None => Vec::new(),
        };
        let buffer_plan = plan.buffer(buffer.graph.as_ref(), buffer.slot_count());
        hits.extend(buffer.search(query, k, filter, None, self.dim, space, buffer_plan));
        drop((buffer, frozen_lock, segments_lock));
        if let Some(frozen) = frozen.as_ref() {
            let removed = frozen.removed.lock();
            let frozen_plan = plan.buffer(frozen.buffer.graph.as_ref(), frozen.buffer.slot_count());
            hits.extend(frozen.buffer.search(
                query,
                k,
                filter,
                Some(&removed),
                self.dim,
                space,
                frozen_plan,
            ));
        }
        let host_id = host.as_ref().map(|(host, _)| host.id());
        for segment in segments
            .iter()
            .filter(|segment| Some(segment.id()) != host_id)
        {
            let strategy = plan.strategy(segment.len());
            for (distance, point) in segment.search(query, k, filter, space, strategy)? {
                hits.push(ShardHit { distance, point });
            }
        }
        Ok(hits)
    }

    /// The segment among `segments` whose graph the write buffer's points (or a frozen
    /// buffer's) joined.
    fn shared_host(
        &self,
        segments: &[SharedSegment],
        frozen: Option<&Frozen>,
        buffer: &Buffer,
    ) -> Option<SharedSegment> {
        [
            buffer.graph.as_ref(),
            frozen.and_then(|frozen| frozen.buffer.graph.as_ref()),
        ]
        .into_iter()
        .flatten()
        .find_map(|graph| host_among(segments, graph))
    }

    /// One walk of the graph `host` shares with the buffer (or the frozen buffer) whose
    /// points joined it: top-`k` among the host's live points and both buffers' live,
    /// indexed slots.
    fn walk_shared(
        &self,
        query: &[f32],
        k: usize,
        ef: usize,
        host: &dyn SegmentWrite,
        frozen: Option<&Frozen>,
        buffer: &Buffer,
    ) -> Result<Vec<ShardHit>> {
        let hosting = host.graph_host().expect("a host segment has a graph");
        let joined = |graph: Option<&Arc<BufferGraph>>| {
            graph
                .filter(|graph| Arc::ptr_eq(hosting.graph(), &graph.index))
                .map(Arc::clone)
        };
        let frozen_graph = frozen.and_then(|frozen| joined(frozen.buffer.graph.as_ref()));
        let buffer_graph = joined(buffer.graph.as_ref());
        let host_nodes = host.len();
        let accept = |node: u32| {
            (node as usize) < host_nodes
                || buffer_graph
                    .as_ref()
                    .and_then(|graph| graph.slot_of(node))
                    .is_some_and(|slot| buffer.is_live(slot, None))
                || frozen
                    .zip(frozen_graph.as_ref())
                    .is_some_and(|(frozen, graph)| {
                        graph
                            .slot_of(node)
                            .is_some_and(|slot| frozen.buffer.is_live(slot, None))
                    })
        };
        let params = HnswSearchParams::new(k, ef.max(k));
        let found = hosting.graph().search_filtered(query, params, accept)?;
        let mut hits = Vec::with_capacity(found.len());
        for hit in found {
            let distance = hit_distance(hit.score, self.distance);
            let point = if (hit.node as usize) < host_nodes {
                hosting.live_point(hit.node)
            } else if let Some(slot) = buffer_graph
                .as_ref()
                .and_then(|graph| graph.slot_of(hit.node))
            {
                buffer
                    .is_live(slot, None)
                    .then(|| buffer.point(slot, self.dim))
            } else {
                frozen
                    .zip(frozen_graph.as_ref())
                    .and_then(|(frozen, graph)| {
                        let slot = graph.slot_of(hit.node)?;
                        let id = frozen.buffer.ids[slot]?;
                        frozen
                            .is_live(&id)
                            .then(|| frozen.buffer.point(slot, self.dim))
                    })
            };
            hits.extend(point.map(|point| ShardHit { distance, point }));
        }
        Ok(hits)
    }
}

/// How a search treats each part of a shard's view: the beam each part gets, and which
/// graph was walked already for the buffers whose points joined a segment's.
struct PartPlan {
    k: usize,
    strategy: Strategy,
    /// Points in the largest part (segment, buffer or frozen buffer).
    largest: usize,
    /// Points in all parts together.
    total: usize,
    /// The host graph walked with the buffers' points, if any.
    walked: Option<Arc<HnswIndex>>,
}

impl PartPlan {
    fn new(
        k: usize,
        strategy: Strategy,
        segments: &[SharedSegment],
        frozen: Option<&Frozen>,
        buffer: &Buffer,
    ) -> PartPlan {
        let sizes = segments
            .iter()
            .map(|segment| segment.len())
            .chain([buffer.slot_count()])
            .chain(frozen.map(|frozen| frozen.buffer.slot_count()));
        let (largest, total) = sizes.fold((0, 0), |(largest, total), size| {
            (size.max(largest), total + size)
        });
        PartPlan {
            k,
            strategy,
            largest,
            total,
            walked: None,
        }
    }

    /// The strategy of a part of `size` points. With the default beam, a part smaller than
    /// the largest gets a narrower one: its share of the true top k is smaller, and a write
    /// buffer searched at the full beam would double a query's cost during ingestion. A
    /// chosen beam is Qdrant's per-segment `hnsw_ef`, widened for a part that holds the
    /// points of several of Qdrant's segments ([`segment_beam`]).
    fn strategy(&self, size: usize) -> Strategy {
        match self.strategy {
            Strategy::Auto => Strategy::Beam(auto_beam(self.k, size, self.largest)),
            Strategy::Beam(ef) => Strategy::Beam(segment_beam(ef, size, self.total)),
            Strategy::Exact => Strategy::Exact,
        }
    }

    fn beam(&self, size: usize) -> Option<usize> {
        self.strategy(size).beam(self.k)
    }

    /// The plan of a buffer with `graph` and `size` slots: only the tail the graph does
    /// not hold when the graph was walked already with the host's points.
    fn buffer(&self, graph: Option<&Arc<BufferGraph>>, size: usize) -> BufferPlan {
        let walked = self
            .walked
            .as_ref()
            .zip(graph)
            .is_some_and(|(walked, graph)| Arc::ptr_eq(walked, &graph.index));
        if walked {
            BufferPlan::Tail
        } else {
            self.beam(size).map_or(BufferPlan::Exact, BufferPlan::Graph)
        }
    }
}
