//! Insertion: validate, reserve ids, publish rows, then link each node into the graph.
//! Batches are linked in parallel; any thread may search while others insert.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::search::{Layer, LayerSearch};
use super::storage::{F32Scorer, Scorer, Sq8Scorer, Sq8Store};
use super::{HnswIndex, Quantization};
use crate::error::{IndexError, Result};
use crate::limits::MAX_LEVEL;
use crate::metric::{check_batch_with_absent, is_absent, normalize_into, Metric};
use crate::quantizer::Sq8Quantizer;
use crate::threads::{effective_threads, for_each_chunk};
use crate::top_k::Neighbor;

/// Stored vectors `train_quantizer` samples (strided) for the SQ8 scale.
const SQ8_TRAINING_ROWS_MAX: usize = 50_000;
/// Fewest vectors the SQ8 scale is trained on: below this a quantile of |x| is noise
/// (a single zero vector would give scale 1.0 and collapse every code to 0).
pub const SQ8_TRAINING_ROWS_MIN: usize = 1_000;

/// Shared with an [`HnswIndex::add_with_progress`] call so that other threads can follow
/// it ([`AddProgress::linked`]) and stop it ([`AddProgress::cancel`]). Costs the build one
/// relaxed atomic add and one relaxed load per row: no lock, nothing measurable next to
/// linking the row. One value may follow several calls (one after another or at once);
/// `linked` then totals them.
#[derive(Debug, Default)]
pub struct AddProgress {
    linked: AtomicUsize,
    cancelled: AtomicBool,
}

impl AddProgress {
    /// Nothing linked yet, not cancelled.
    pub fn new() -> AddProgress {
        AddProgress::default()
    }

    /// Rows linked into the graph so far: a row counts once its links are published (it is
    /// then reachable by searches). Grows by exactly the row count of each successful call.
    pub fn linked(&self) -> usize {
        self.linked.load(Ordering::Relaxed)
    }

    /// Asks every call following this value to stop: a call not yet started returns
    /// [`IndexError::Cancelled`] having changed nothing; one linking returns it after the
    /// rows in flight, leaving the index unfit for use (see
    /// [`HnswIndex::add_with_progress`]). Cannot be undone.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    /// Counts `rows` as done by a build that is not a graph's (the disk index reports its
    /// rows when its build ends).
    pub fn advance(&self, rows: usize) {
        self.linked.fetch_add(rows, Ordering::Relaxed);
    }

    /// Whether [`AddProgress::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }
}

/// The order [`HnswIndex::add_in_order`] links a batch's rows in. Node ids follow the
/// input order either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkOrder {
    /// Rows of a large batch are linked cluster by cluster ([`super::locality_order`]), so
    /// that consecutive inserts find their neighborhood in cache.
    Clustered,
    /// Rows are linked in the order given: for callers that already placed them in
    /// [`super::locality_order`] (which also keeps each cluster's rows together in memory).
    AsGiven,
    /// Rows are linked in a random order drawn from the index's seed: for callers that
    /// placed them in [`super::locality_order`] but want the graph of a random insertion
    /// order (more links between clusters: higher recall at a given ef, a slower build;
    /// BENCHMARKS.md, issue 20).
    Shuffled,
}

impl HnswIndex {
    /// Adds row-major `vectors` labelled `labels`, linking them on `threads` threads
    /// (0 = all cores). All-or-nothing with respect to validation: a wrong dimension, a
    /// non-finite value, a duplicate label or missing capacity leaves the index unchanged.
    /// A row of NaNs only is *absent* ([`crate::metric::is_absent`]): stored and labelled
    /// but never linked, so no search returns it (a point without this vector).
    pub fn add(&self, vectors: &[f32], labels: &[u64], threads: usize) -> Result<()> {
        self.add_with_progress(vectors, labels, threads, None)
    }

    /// [`HnswIndex::add`], followed by `progress`: its [`AddProgress::linked`] grows by one
    /// as each row finishes linking (by `labels.len()` over a successful call, by nothing
    /// when validation rejects the batch), and [`AddProgress::cancel`] stops the call with
    /// [`IndexError::Cancelled`]. Cancelled before the call starts, nothing changes; during
    /// linking, the rows are already admitted (their labels taken) and some stay
    /// unlinked, unreachable by searches: discard the index.
    pub fn add_with_progress(
        &self,
        vectors: &[f32],
        labels: &[u64],
        threads: usize,
        progress: Option<&AddProgress>,
    ) -> Result<()> {
        self.add_in_order(vectors, labels, threads, progress, LinkOrder::Clustered)
    }

    /// [`HnswIndex::add_with_progress`], linking the rows in `order`.
    pub fn add_in_order(
        &self,
        vectors: &[f32],
        labels: &[u64],
        threads: usize,
        progress: Option<&AddProgress>,
        order: LinkOrder,
    ) -> Result<()> {
        if self.rows_outside {
            return Err(IndexError::VectorsElsewhere {
                operation: "adding points",
            });
        }
        let cancelled = || progress.is_some_and(AddProgress::is_cancelled);
        let rows = check_batch_with_absent(vectors, self.params.dim)?;
        if labels.len() != rows {
            return Err(IndexError::WrongIdCount {
                expected: rows,
                received: labels.len(),
            });
        }
        if rows == 0 {
            return Ok(());
        }
        let prepared = self.prepare_rows(vectors);
        if cancelled() {
            return Err(IndexError::Cancelled);
        }
        let first = self.admit(labels, &prepared)?;
        let threads = effective_threads(threads, rows);
        self.publish_batch(first, labels, &prepared, threads)?;
        // Large batches are linked cluster by cluster, for cache locality (see order.rs).
        let order = match order {
            LinkOrder::Clustered => {
                super::order::locality_order(&prepared, self.params.dim, threads)
            }
            LinkOrder::AsGiven => None,
            LinkOrder::Shuffled => Some(self.shuffled(rows)),
        };
        if cancelled() {
            return Err(IndexError::Cancelled);
        }
        self.link_batch(first, rows, order.as_deref(), threads, progress)
    }

    /// `0..rows` in a random order drawn from the index's seed (Fisher–Yates).
    fn shuffled(&self, rows: usize) -> Vec<u32> {
        let mut order: Vec<u32> = (0..u32::try_from(rows).expect("< MAX_POINTS")).collect();
        let mut random = crate::random::SplitMix64(self.params.seed ^ 0x0005_4A7F_7E11);
        for last in (1..order.len()).rev() {
            order.swap(last, random.below(last + 1));
        }
        order
    }

    /// The rows of a batch as they are stored: normalized (a copy) for cosine, so that rows,
    /// codes and quantizer training all see the stored values; `vectors` itself otherwise.
    fn prepare_rows<'a>(&self, vectors: &'a [f32]) -> std::borrow::Cow<'a, [f32]> {
        if self.params.metric != Metric::Cosine {
            return vectors.into();
        }
        let dim = self.params.dim;
        let mut normalized = vectors.to_vec();
        for (target, source) in normalized
            .chunks_exact_mut(dim)
            .zip(vectors.chunks_exact(dim))
        {
            normalize_into(source, target);
        }
        normalized.into()
    }

    /// Publishes the rows of an admitted batch (`prepared`, labelled `labels`) as nodes
    /// `first..`, on `threads` threads: reserved but not yet linked.
    fn publish_batch(
        &self,
        first: usize,
        labels: &[u64],
        prepared: &[f32],
        threads: usize,
    ) -> Result<()> {
        let dim = self.params.dim;
        for_each_chunk(labels.len(), 256, threads, |start, end| {
            for row in start..end {
                self.publish_rows(
                    first + row,
                    labels[row],
                    &prepared[row * dim..(row + 1) * dim],
                );
            }
            Ok::<(), IndexError>(())
        })
    }

    /// Links the published nodes `first..first + rows` on `threads` threads, the batch's
    /// row `order[position]` at each position (input order without one), counting them in
    /// `progress` and stopping with [`IndexError::Cancelled`] once it is cancelled.
    fn link_batch(
        &self,
        first: usize,
        rows: usize,
        order: Option<&[u32]>,
        threads: usize,
        progress: Option<&AddProgress>,
    ) -> Result<()> {
        for_each_chunk(rows, 1, threads, |start, end| {
            if progress.is_some_and(AddProgress::is_cancelled) {
                return Err(IndexError::Cancelled);
            }
            for position in start..end {
                let row = order.map_or(position, |order| order[position] as usize);
                self.link(u32::try_from(first + row).expect("node < MAX_POINTS"));
            }
            if let Some(progress) = progress {
                progress.linked.fetch_add(end - start, Ordering::Relaxed);
            }
            Ok(())
        })
    }

    /// Checks labels and reserves a contiguous run of node ids, atomically. The first batch
    /// admitted into an empty SQ8 index trains the quantizer here, under the same lock, when
    /// it has at least [`SQ8_TRAINING_ROWS_MIN`] rows: so either every row gets a code row,
    /// or (a small first batch) none do until [`HnswIndex::train_quantizer`] runs.
    fn admit(&self, labels: &[u64], prepared: &[f32]) -> Result<usize> {
        let mut map = self.label_to_node.write();
        let mut seen = HashSet::with_capacity(labels.len());
        for label in labels {
            if *label == crate::MISSING_ID {
                return Err(IndexError::ReservedId { id: *label });
            }
            if map.contains(*label) || !seen.insert(*label) {
                return Err(IndexError::DuplicateId { id: *label });
            }
        }
        let capacity = self.capacity();
        let first = self
            .allocated
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |allocated| {
                (allocated + labels.len() <= capacity).then_some(allocated + labels.len())
            })
            .map_err(|_| IndexError::CapacityExceeded { capacity })?;
        // absent rows (crate::metric::is_absent) have no values to train on: a batch of
        // them would leave the scale at its fallback and collapse every later code
        let dim = self.params.dim;
        if first == 0
            && self.params.quantization == Quantization::Sq8
            && labels.len() >= SQ8_TRAINING_ROWS_MIN
            && prepared
                .chunks_exact(dim)
                .filter(|row| !is_absent(row))
                .count()
                >= SQ8_TRAINING_ROWS_MIN
        {
            // The whole batch: `train` strides over it (a bounded number of values), so the
            // scale sees every part of a batch that was placed cluster by cluster, where a
            // prefix would be a few clusters only.
            let _ = self.sq8.set(Sq8Store::new(
                Sq8Quantizer::train(prepared, self.params.dim),
                capacity,
            ));
        }
        for (offset, label) in labels.iter().enumerate() {
            let node = u32::try_from(first + offset).expect("node < MAX_POINTS");
            assert!(map.insert(*label, node), "labels checked above");
        }
        Ok(first)
    }

    /// Trains the SQ8 quantizer on the stored rows and encodes every row, switching
    /// traversal to SQ8. Needed only when the first batch had fewer than
    /// [`SQ8_TRAINING_ROWS_MIN`] rows that are not absent; a no-op when already trained,
    /// when quantization is off, or while the index holds fewer such rows than that.
    pub fn train_quantizer(&mut self) -> Result<bool> {
        if self.params.quantization != Quantization::Sq8
            || self.sq8.get().is_some()
            || self.len() < SQ8_TRAINING_ROWS_MIN
        {
            return Ok(false);
        }
        let nodes = 0..u32::try_from(self.len()).expect("< MAX_POINTS");
        let present = nodes
            .filter(|node| self.vector(*node).is_some_and(|row| !is_absent(row)))
            .count();
        if present < SQ8_TRAINING_ROWS_MIN {
            return Ok(false); // absent rows have no values to train on
        }
        let store = self.trained_store(self.len(), self.capacity())?;
        let _ = self.sq8.set(store);
        Ok(true)
    }

    /// A quantizer trained on (a stride over) the first `count` rows, with those rows
    /// encoded, in a store with room for `capacity`. Needs the rows in memory.
    pub(crate) fn trained_store(&self, count: usize, capacity: usize) -> Result<Sq8Store> {
        if self.rows_outside {
            return Err(IndexError::VectorsElsewhere {
                operation: "training the quantizer",
            });
        }
        let sample = self.strided_sample(count, SQ8_TRAINING_ROWS_MAX)?;
        let store = Sq8Store::new(Sq8Quantizer::train(&sample, self.params.dim), capacity);
        let mut row = vec![0i8; store.quantizer.stride()];
        for node in 0..count {
            store.quantizer.encode_row(self.stored_row(node)?, &mut row);
            store.codes.write_row(node, &row).expect("fresh slab");
        }
        Ok(store)
    }

    /// The stored rows of an evenly strided selection of at most about `max` of nodes
    /// `0..count`, back to back (what the quantizer and the first pass's centroid are
    /// taken over).
    pub(crate) fn strided_sample(&self, count: usize, max: usize) -> Result<Vec<f32>> {
        let step = (count / max).max(1);
        let mut sample = Vec::with_capacity(count.min(max) * self.params.dim);
        for node in (0..count).step_by(step) {
            let row = self.stored_row(node)?;
            if !is_absent(row) {
                sample.extend_from_slice(row);
            }
        }
        Ok(sample)
    }

    /// The stored f32 row of `node`, or a format error when it is not published yet.
    pub(crate) fn stored_row(&self, node: usize) -> Result<&[f32]> {
        self.vector(u32::try_from(node).expect("< MAX_POINTS"))
            .ok_or_else(|| IndexError::format(format!("node {node} is still being inserted")))
    }

    /// Writes the vector row, code row, label and level of a new node (not yet linked).
    fn publish_rows(&self, node: usize, label: u64, vector: &[f32]) {
        self.vectors
            .write_row(node, vector)
            .expect("node ids are handed out once");
        if let Some(store) = self.sq8.get() {
            let mut row = vec![0i8; store.quantizer.stride()];
            store.quantizer.encode_row(vector, &mut row);
            store
                .codes
                .write_row(node, &row)
                .expect("node ids are handed out once");
        }
        if let Some(store) = self.bits.get() {
            store.write(node, vector);
        }
        self.labels[node].store(label, Ordering::Release);
        let node = u32::try_from(node).expect("node < MAX_POINTS");
        // an absent row is never linked: level 0, so it never lies above the top layer
        let level = if is_absent(vector) {
            0
        } else {
            self.random_level(node)
        };
        self.graph.init_node(node, level);
    }

    /// Level of a node: floor(-ln(U) / ln(m)), U a hash of (seed, node) — deterministic
    /// whatever the thread interleaving.
    fn random_level(&self, node: u32) -> usize {
        let x = crate::random::splitmix64(
            self.params.seed ^ (u64::from(node).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        );
        #[allow(clippy::cast_precision_loss)]
        let uniform = ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        #[allow(clippy::cast_precision_loss)]
        let multiplier = 1.0 / (self.params.m as f64).ln();
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let level = (-uniform.ln() * multiplier) as usize;
        level.min(MAX_LEVEL)
    }

    /// Links a published node into every layer up to its level. An absent row (a point
    /// without this vector, [`crate::metric::is_absent`]) stays unlinked: no link leads to
    /// it and it is never the entry point, so no search reaches it.
    fn link(&self, node: u32) {
        if self.vector(node).is_some_and(is_absent) {
            return;
        }
        let level = self.graph.level(node);
        // A node that starts a new top layer links while holding the entry lock (as hnswlib
        // does), so two such nodes cannot both miss links on the layers between them.
        let raises_top = self
            .entry_snapshot()
            .is_none_or(|(_, max_level)| level > max_level);
        let guard = raises_top.then(|| self.entry_lock.lock());
        let Some((entry, max_level)) = self.entry_snapshot() else {
            self.publish_entry(node, level);
            return;
        };
        match self.sq8.get() {
            Some(store) => {
                let row = store.codes.row(node as usize).expect("published");
                let query: Vec<u8> = row[..self.params.dim]
                    .iter()
                    .map(|code| code.to_le_bytes()[0] ^ 0x80)
                    .collect();
                let (_, norm_squared) = store.quantizer.row_aux(row);
                let scorer = Sq8Scorer {
                    screen: None,
                    query: &query,
                    query_norm_squared: norm_squared,
                    store,
                    kernels: self.kernels(),
                    metric: self.params.metric,
                    distance_count: None,
                };
                self.link_with(&scorer, node, level, entry, max_level);
            }
            None => {
                let scorer = F32Scorer {
                    query: self.vector(node).expect("published"),
                    vectors: &self.vectors,
                    kernels: self.kernels(),
                    metric: self.params.metric,
                    distance_count: None,
                };
                self.link_with(&scorer, node, level, entry, max_level);
            }
        }
        if level > max_level {
            debug_assert!(
                guard.is_some(),
                "a new top level is published under the lock"
            );
            self.publish_entry(node, level);
        }
        drop(guard);
    }

    fn link_with<S: Scorer>(
        &self,
        scorer: &S,
        node: u32,
        level: usize,
        entry: u32,
        max_level: usize,
    ) {
        let Some(entry_distance) = scorer.distance(entry) else {
            debug_assert!(false, "the entry point's rows are always published");
            return;
        };
        let mut current = Neighbor {
            distance: entry_distance,
            id: entry,
        };
        for layer in (level + 1..=max_level).rev() {
            current = self.greedy_step(scorer, current, layer);
        }
        // Choose neighbors on every layer first, then publish the node's own lists, and only
        // then the reverse links that make it reachable: a reader that reaches the node
        // always finds its lists complete. At most one node lock is held at a time, so two
        // nodes inserted concurrently that select each other cannot deadlock.
        let mut entry_points = vec![current];
        let top = level.min(max_level);
        let mut chosen: Vec<Vec<Neighbor>> = vec![Vec::new(); top + 1];
        for layer in (0..=top).rev() {
            let candidates = self.search_layer(
                scorer,
                &entry_points,
                LayerSearch {
                    ef: self.params.ef_construction.max(self.params.m),
                    layer: Layer(layer),
                },
                |candidate| candidate != node,
            );
            chosen[layer] = self.select_neighbors(&candidates, self.params.m);
            entry_points = candidates;
        }
        {
            let _own = self.graph.lock(node);
            for (layer, selected) in chosen.iter().enumerate() {
                let ids: Vec<u32> = selected.iter().map(|n| n.id).collect();
                self.graph.set_neighbors(node, layer, &ids);
            }
        }
        for (layer, selected) in chosen.iter().enumerate() {
            for neighbor in selected {
                self.add_reverse_link(neighbor.id, node, neighbor.distance, layer);
            }
        }
    }

    /// Adds `node` to the list of `target` on `layer`, pruning with the heuristic when full.
    fn add_reverse_link(&self, target: u32, node: u32, distance: f32, layer: usize) {
        let _guard = self.graph.lock(target);
        let capacity = if layer == 0 {
            self.graph.m0
        } else {
            self.graph.m
        };
        let mut current = Vec::with_capacity(capacity + 1);
        self.graph.neighbors_into(target, layer, &mut current);
        // Two nodes inserted at once may each already have linked the other.
        if current.contains(&node) || self.graph.try_append(target, layer, node) {
            return;
        }
        let mut candidates: Vec<Neighbor> = current
            .iter()
            .map(|id| Neighbor {
                distance: self.pair_distance(target, *id),
                id: *id,
            })
            .collect();
        candidates.push(Neighbor { distance, id: node });
        candidates.sort_unstable();
        let kept = self.select_neighbors(&candidates, capacity);
        let ids: Vec<u32> = kept.iter().map(|n| n.id).collect();
        self.graph.set_neighbors(target, layer, &ids);
    }

    /// The diversity heuristic (HNSW paper, algorithm 4): keep a candidate only if it is
    /// closer to the base than to every neighbor already kept. `sorted` is closest first.
    fn select_neighbors(&self, sorted: &[Neighbor], m: usize) -> Vec<Neighbor> {
        if sorted.len() <= m {
            return sorted.to_vec();
        }
        let mut kept: Vec<Neighbor> = Vec::with_capacity(m);
        for candidate in sorted {
            if kept.len() >= m {
                break;
            }
            let diverse = kept
                .iter()
                .all(|chosen| self.pair_distance(candidate.id, chosen.id) >= candidate.distance);
            if diverse {
                kept.push(*candidate);
            }
        }
        kept
    }

    /// Distance between two stored nodes in the traversal representation.
    fn pair_distance(&self, a: u32, b: u32) -> f32 {
        let kernels = self.kernels();
        let metric = self.params.metric;
        if let Some(store) = self.sq8.get() {
            let dim = self.params.dim;
            let (Some(row_a), Some(row_b)) =
                (store.codes.row(a as usize), store.codes.row(b as usize))
            else {
                return f32::INFINITY;
            };
            let scale_squared = store.quantizer.scale() * store.quantizer.scale();
            #[allow(clippy::cast_precision_loss)]
            return match metric {
                Metric::L2 => {
                    scale_squared * (kernels.l2_squared_i8)(&row_a[..dim], &row_b[..dim]) as f32
                }
                Metric::Cosine | Metric::Dot => {
                    -scale_squared * (kernels.dot_i8)(&row_a[..dim], &row_b[..dim]) as f32
                }
            };
        }
        let (Some(row_a), Some(row_b)) = (self.vector(a), self.vector(b)) else {
            return f32::INFINITY;
        };
        match metric {
            Metric::L2 => (kernels.l2_squared_f32)(row_a, row_b),
            Metric::Cosine | Metric::Dot => -(kernels.dot_f32)(row_a, row_b),
        }
    }

    #[inline]
    pub(crate) fn kernels(&self) -> &'static sagitta_kernels::Kernels {
        sagitta_kernels::kernels()
    }
}
