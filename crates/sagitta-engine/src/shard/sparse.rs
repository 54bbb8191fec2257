//! Sparse-vector reads of a shard ([`crate::sparse`]): the top-k by sparse dot product
//! over the write buffer (an exact scan), the frozen buffer and each segment's inverted
//! index; and the document frequencies an IDF-weighted query needs.

use crate::error::Result;
use crate::filter::Filter;
use crate::query::ShardHit;
use crate::sparse::SparseVector;

use super::Shard;

impl Shard {
    /// Top-`k` candidates per part (the caller merges) by sparse dot product with `query`
    /// in sparse space `space`, among points passing `filter` that share an index with it.
    pub fn search_sparse(
        &self,
        query: &SparseVector,
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
        let mut hits = buffer.search_sparse((query, space), k, filter, None, self.dim);
        drop((buffer, frozen_lock, segments_lock));
        if let Some(frozen) = frozen.as_ref() {
            let removed = frozen.removed.lock();
            hits.extend(frozen.buffer.search_sparse(
                (query, space),
                k,
                filter,
                Some(&removed),
                self.dim,
            ));
        }
        for segment in &segments {
            for (distance, point) in segment.search_sparse((query, space), k, filter)? {
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
