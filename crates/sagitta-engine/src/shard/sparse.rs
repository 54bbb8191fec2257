//! Side-vector reads of a shard ([`crate::sparse`], [`crate::multi`]): the top-k by a
//! sparse or multivector query over the write buffer (an exact scan), the frozen buffer
//! and each segment (a sparse space's inverted index, a multivector scan); and the
//! document frequencies an IDF-weighted sparse query needs.

use crate::error::Result;
use crate::filter::Filter;
use crate::query::{ShardHit, SideQuery};

use super::Shard;

impl Shard {
    /// Top-`k` candidates per part (the caller merges) by `query` in side space `space`,
    /// among points passing `filter` that it scores ([`SideQuery::distance_to`]).
    pub(crate) fn search_side(
        &self,
        query: SideQuery<'_>,
        space: usize,
        k: usize,
        filter: Option<&Filter>,
    ) -> Result<Vec<ShardHit>> {
        // the same consistent view as a dense search takes (see `Shard::search`)
        let segments_lock = self.segments.read();
        let frozen_lock = self.frozen.read();
        let buffer = self.buffer.read();
        let segments = segments_lock.clone();
        let frozen = frozen_lock.clone();
        let mut hits = buffer.search_side((query, space), k, filter, None, self.dim);
        drop((buffer, frozen_lock, segments_lock));
        if let Some(frozen) = frozen.as_ref() {
            let removed = frozen.removed.lock();
            hits.extend(frozen.buffer.search_side(
                (query, space),
                k,
                filter,
                Some(&removed),
                self.dim,
            ));
        }
        for segment in &segments {
            for (distance, point) in segment.search_side((query, space), k, filter)? {
                hits.push(ShardHit { distance, point });
            }
        }
        Ok(hits)
    }

    /// Adds to `counts[i]` the shard's live points whose vector in sparse space `space`
    /// has `indices[i]` (`indices` ascending).
    pub fn sparse_frequencies(&self, space: usize, indices: &[u32], counts: &mut [usize]) {
        let segments_lock = self.segments.read();
        let frozen_lock = self.frozen.read();
        let buffer = self.buffer.read();
        buffer.sparse_frequencies(space, indices, None, counts);
        if let Some(frozen) = frozen_lock.as_ref() {
            let removed = frozen.removed.lock();
            frozen
                .buffer
                .sparse_frequencies(space, indices, Some(&removed), counts);
        }
        for segment in segments_lock.iter() {
            segment.sparse_frequencies(space, indices, counts);
        }
    }
}
