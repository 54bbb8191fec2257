//! Link order of a large batch: rows grouped by a coarse clustering, so that consecutive
//! inserts search the same neighborhood and find its rows already in cache.
//!
//! Linking is bound by memory, not arithmetic: each insert scores ~1,350 rows at ef 100, and
//! at 768-d SQ8 (832 B, 13 lines a row) the code store of a 200k-row graph (166 MB) is five
//! times the L3. Linked in input order, nearly every scored row is a miss: about 100 ns a
//! row with prefetching, one thread ~184 µs an insert (36.7 s on one thread for the
//! synthetic 768-d 200k set, and exactly twice as fast on two: per-core memory parallelism,
//! not bandwidth, is the limit). Grouped into clusters of a few thousand rows (a few MB of
//! codes), an insert finds most of its neighborhood where the previous ones left it.
//!
//! Two ways to use the order: link the rows in it where they are (node ids stay in input
//! order: [`super::LinkOrder::Clustered`], what `add` does), or also place them in it
//! ([`permute_rows`], then [`super::LinkOrder::AsGiven`]) so each cluster's rows are
//! contiguous in memory, which callers that may renumber rows do.
//!
//! Measured (synthetic 768-d 200k, m 16, ef_construction 100, SQ8, 2 threads, alternating
//! runs): build 21.7–22.1 s in input order; linked in this order 16.2–17.5 s; placed and
//! linked in it 11.4–12.1 s plus ~0.6 s for the order. Recall@10 at ef 64 and 100 within
//! run-to-run noise (±0.005) of input order.
//!
//! Clustering: k-means++ seeding and a few Lloyd iterations on a pseudo-random sample, then
//! one parallel pass assigning every row to its closest centroid (squared Euclidean: for the
//! unit vectors of cosine and most dot-product data that is also the largest inner
//! product); then the same inside each coarse cluster, on one thread per cluster.
//! Deterministic: the draws come from a fixed splitmix64 sequence. Cost: rows × (coarse +
//! fine clusters) distances, ~0.6 s for 200k × 768 on 2 threads, 4% of the linking.

use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::Mutex;

use crate::random::SplitMix64;
use crate::threads::{effective_threads, for_each_chunk};

/// Batches smaller than this are linked in input order: their rows fit in cache anyway.
pub const ORDERED_BATCH_MIN_ROWS: usize = 16_384;
/// Target rows per coarse cluster: a few MB of codes at 768-d, well inside a shared L3.
const COARSE_ROWS: usize = 4_096;
/// Most coarse clusters: the first pass costs rows × clusters distances.
const COARSE_MAX: usize = 64;
/// Target rows per fine cluster inside a coarse one: consecutive inserts close together.
const FINE_ROWS: usize = 512;
/// Most fine clusters per coarse one.
const FINE_MAX: usize = 64;
/// Rows the centroids are trained on: this many per cluster, at most [`SAMPLE_ROWS_MAX`].
const SAMPLE_ROWS_PER_CLUSTER: usize = 64;
/// Most rows the centroids are trained on.
const SAMPLE_ROWS_MAX: usize = 4_096;
/// Lloyd iterations on the sample; locality needs coarse groups, not converged ones.
const ITERATIONS: usize = 4;

/// A cache-friendly order of the row-major `vectors`: a permutation of `0..rows`, rows of one
/// cluster together (in input order within it), computed on `threads` threads (0 = all
/// cores). `None` below [`ORDERED_BATCH_MIN_ROWS`] rows, where input order is as good.
pub fn locality_order(vectors: &[f32], dim: usize, threads: usize) -> Option<Vec<u32>> {
    let rows = vectors.len().checked_div(dim).unwrap_or(0);
    if rows < ORDERED_BATCH_MIN_ROWS || u32::try_from(rows).is_err() {
        return None;
    }
    let threads = effective_threads(threads, rows);
    // absent rows (crate::metric::is_absent) are never linked: they go last, unclustered
    let (present, absent): (Vec<u32>, Vec<u32>) = (0..u32::try_from(rows).expect("checked above"))
        .partition(|row| !crate::metric::is_absent(&vectors[*row as usize * dim..]));
    if present.len() < ORDERED_BATCH_MIN_ROWS {
        return None;
    }
    let coarse = group(
        vectors,
        dim,
        &present,
        (rows / COARSE_ROWS).clamp(2, COARSE_MAX),
        threads,
    );
    // Each coarse cluster refined on one thread, the clusters spread over the threads.
    let refined: Vec<Mutex<Vec<u32>>> = coarse.into_iter().map(Mutex::new).collect();
    for_each_chunk(refined.len(), 1, threads, |start, end| {
        for cell in &refined[start..end] {
            let mut members = cell.lock();
            let clusters = (members.len() / FINE_ROWS).min(FINE_MAX);
            if clusters >= 2 {
                *members = group(vectors, dim, &members, clusters, 1).concat();
            }
        }
        Ok::<(), std::convert::Infallible>(())
    })
    .unwrap_or_else(|never| match never {});
    let mut order: Vec<u32> = refined.into_iter().flat_map(Mutex::into_inner).collect();
    order.extend(absent);
    Some(order)
}

/// Moves the rows of row-major `data` (`dim` values each) in place so that row `p` becomes
/// the old row `order[p]` (`order` a permutation, as from [`locality_order`]): one row of
/// extra memory, each row moved once.
///
/// # Panics
/// If `order` is not a permutation of `0..data.len() / dim`.
pub fn permute_rows<T: Copy + Default>(data: &mut [T], dim: usize, order: &[u32]) {
    assert_eq!(data.len(), order.len() * dim, "one order entry per row");
    let mut placed = vec![false; order.len()];
    let mut held = vec![T::default(); dim];
    for start in 0..order.len() {
        if placed[start] {
            continue;
        }
        // Follow the cycle through `start`: each position takes the row it names, and the
        // position naming `start` takes the held copy of the old row `start`.
        held.copy_from_slice(&data[start * dim..(start + 1) * dim]);
        let mut position = start;
        loop {
            assert!(!placed[position], "order is not a permutation");
            placed[position] = true;
            let source = order[position] as usize;
            if source == start {
                data[position * dim..(position + 1) * dim].copy_from_slice(&held);
                break;
            }
            data.copy_within(source * dim..(source + 1) * dim, position * dim);
            position = source;
        }
    }
}

/// `members` (row indices into `vectors`) split into `clusters` groups by k-means (k-means++
/// seeding and [`ITERATIONS`] Lloyd iterations on a sample of at most [`SAMPLE_ROWS_MAX`]
/// members, then every member assigned on `threads` threads), each group in input order.
/// Empty groups are dropped.
fn group(
    vectors: &[f32],
    dim: usize,
    members: &[u32],
    clusters: usize,
    threads: usize,
) -> Vec<Vec<u32>> {
    let space = Space::new(dim);
    let mut random = SplitMix64(0x5EED_0F0D_E125_u64 ^ members.len() as u64);
    let sample_size = members
        .len()
        .min(clusters * SAMPLE_ROWS_PER_CLUSTER)
        .min(SAMPLE_ROWS_MAX);
    let centroids = sample_centroids(space, vectors, members, clusters, sample_size, &mut random);
    assign(space, vectors, members, &centroids, threads)
}

/// `clusters` k-means centroids (row-major; fewer when the sample has fewer rows):
/// k-means++ seeding and [`ITERATIONS`] Lloyd iterations on `sample_size` rows of
/// `members` drawn from `random` (the locality order's groups and the disk index's
/// partitions both train this way).
pub(crate) fn sample_centroids(
    space: Space,
    vectors: &[f32],
    members: &[u32],
    clusters: usize,
    sample_size: usize,
    random: &mut SplitMix64,
) -> Vec<f32> {
    let sample = draw_sample(space, vectors, members, sample_size, random);
    let mut centroids = seed_centroids(space, &sample, clusters, random);
    train_centroids(space, &sample, &mut centroids);
    centroids
}

/// Rows of `dim` values, compared by squared Euclidean distance with this CPU's kernel.
#[derive(Clone, Copy)]
pub(crate) struct Space {
    pub dim: usize,
    pub l2_squared: fn(&[f32], &[f32]) -> f32,
}

impl Space {
    /// The space of `dim`-value rows with this CPU's squared-L2 kernel.
    pub(crate) fn new(dim: usize) -> Space {
        Space {
            dim,
            l2_squared: sagitta_kernels::kernels().l2_squared_f32,
        }
    }

    /// Row `index` of the row-major `data`.
    pub(crate) fn row(self, data: &[f32], index: usize) -> &[f32] {
        &data[index * self.dim..(index + 1) * self.dim]
    }

    /// The squared Euclidean distance of `a` and `b`.
    pub(crate) fn distance(self, a: &[f32], b: &[f32]) -> f32 {
        (self.l2_squared)(a, b)
    }

    /// The index of the row of row-major `centroids` closest to `vector` (the first of
    /// equally close ones).
    pub(crate) fn closest(self, centroids: &[f32], vector: &[f32]) -> usize {
        let mut best = (f32::INFINITY, 0);
        for (cluster, centroid) in centroids.chunks_exact(self.dim).enumerate() {
            let distance = self.distance(vector, centroid);
            if distance < best.0 {
                best = (distance, cluster);
            }
        }
        best.1
    }
}

/// `sample_size` rows of `members` to train centroids on, copied out of `vectors`
/// row-major, drawn (with repeats) from `random`.
fn draw_sample(
    space: Space,
    vectors: &[f32],
    members: &[u32],
    sample_size: usize,
    random: &mut SplitMix64,
) -> Vec<f32> {
    // Pseudo-random, not strided, picks: input that cycles through sources (row i from
    // source i mod s) would give a strided sample of one source. Copied out: the seeding
    // and the iterations pass over the sample once per centroid and once per iteration, and
    // 4,096 contiguous rows stay in cache (12 MB at 768-d).
    (0..sample_size)
        .flat_map(|_| {
            let member = members[random.below(members.len())] as usize;
            space.row(vectors, member).iter().copied()
        })
        .collect()
}

/// k-means++ seeding on the row-major `sample`: `clusters` centroids (fewer when the
/// sample has fewer rows), row-major, the first the sample's first row and each next one
/// drawn from `random` with probability ∝ squared distance to the closest one so far, so
/// well-separated groups each get one.
fn seed_centroids(
    space: Space,
    sample: &[f32],
    clusters: usize,
    random: &mut SplitMix64,
) -> Vec<f32> {
    let dim = space.dim;
    let sample_rows = sample.len() / dim;
    let sample_row = |index: usize| space.row(sample, index);
    let mut centroids: Vec<f32> = sample_row(0).to_vec();
    let mut nearest: Vec<f64> = (0..sample_rows)
        .map(|index| f64::from(space.distance(sample_row(index), &centroids)))
        .collect();
    while centroids.len() < clusters.min(sample_rows) * dim {
        let total: f64 = nearest.iter().sum();
        #[allow(clippy::cast_precision_loss)]
        let mut target = total * (random.below(1 << 24) as f64 / f64::from(1u32 << 24));
        let mut chosen = sample_rows - 1;
        for (position, weight) in nearest.iter().enumerate() {
            if target < *weight {
                chosen = position;
                break;
            }
            target -= weight;
        }
        let start = centroids.len();
        centroids.extend_from_slice(sample_row(chosen));
        for (index, weight) in nearest.iter_mut().enumerate() {
            *weight = weight.min(f64::from(
                space.distance(sample_row(index), &centroids[start..]),
            ));
        }
    }
    centroids
}

/// [`ITERATIONS`] Lloyd iterations of the row-major `centroids` on the row-major `sample`:
/// each centroid moved to the mean of the sample rows closest to it (an empty cluster's
/// centroid stays where it is).
fn train_centroids(space: Space, sample: &[f32], centroids: &mut [f32]) {
    let dim = space.dim;
    let clusters = centroids.len() / dim;
    for _ in 0..ITERATIONS {
        let mut sums = vec![0.0f64; clusters * dim];
        let mut counts = vec![0usize; clusters];
        for vector in sample.chunks_exact(dim) {
            let cluster = space.closest(centroids, vector);
            counts[cluster] += 1;
            for (sum, value) in sums[cluster * dim..(cluster + 1) * dim]
                .iter_mut()
                .zip(vector)
            {
                *sum += f64::from(*value);
            }
        }
        for (cluster, count) in counts.iter().enumerate() {
            // An empty cluster keeps its centroid.
            if *count > 0 {
                #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
                for (centroid, sum) in centroids[cluster * dim..(cluster + 1) * dim]
                    .iter_mut()
                    .zip(&sums[cluster * dim..(cluster + 1) * dim])
                {
                    *centroid = (*sum / *count as f64) as f32;
                }
            }
        }
    }
}

/// `members` (row indices into `vectors`) grouped by their closest row of the row-major
/// `centroids`, computed on `threads` threads: one group per centroid, each in input
/// order, empty groups dropped.
pub(crate) fn assign(
    space: Space,
    vectors: &[f32],
    members: &[u32],
    centroids: &[f32],
    threads: usize,
) -> Vec<Vec<u32>> {
    let assigned: Vec<AtomicU32> = members.iter().map(|_| AtomicU32::new(0)).collect();
    for_each_chunk(members.len(), 1_024, threads, |start, end| {
        for (slot, member) in assigned[start..end].iter().zip(&members[start..end]) {
            let cluster = space.closest(centroids, space.row(vectors, *member as usize));
            slot.store(
                u32::try_from(cluster).expect("few clusters"),
                Ordering::Relaxed,
            );
        }
        Ok::<(), std::convert::Infallible>(())
    })
    .unwrap_or_else(|never| match never {});
    let mut groups = vec![Vec::new(); centroids.len() / space.dim];
    for (slot, member) in assigned.iter().zip(members) {
        groups[slot.load(Ordering::Relaxed) as usize].push(*member);
    }
    groups.retain(|group| !group.is_empty());
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `blobs` well-separated groups of points in 8-d, interleaved row by row.
    fn interleaved_blobs(rows: usize, blobs: usize) -> Vec<f32> {
        let dim = 8;
        let mut vectors = Vec::with_capacity(rows * dim);
        for index in 0..rows {
            let blob = index % blobs;
            for axis in 0..dim {
                // A blob's center at 100 on its own axis; a small deterministic wobble.
                let center = if axis == blob % dim { 100.0 } else { 0.0 };
                #[allow(clippy::cast_precision_loss)]
                let wobble = ((index * 31 + axis * 7) % 13) as f32 * 0.1;
                vectors.push(center + wobble);
            }
        }
        vectors
    }

    #[test]
    fn permute_rows_moves_every_row_to_its_place() {
        let dim = 3;
        let rows = 50;
        // Several cycles of different lengths, fixed points included.
        let order: Vec<u32> = (0..rows as u32)
            .map(|p| (p * 7 + 3) % rows as u32)
            .collect();
        let mut data: Vec<u32> = (0..rows * dim).map(|v| v as u32).collect();
        permute_rows(&mut data, dim, &order);
        for (position, source) in order.iter().enumerate() {
            let expected: Vec<u32> = (0..dim as u32).map(|k| source * dim as u32 + k).collect();
            assert_eq!(
                &data[position * dim..(position + 1) * dim],
                expected.as_slice()
            );
        }
        let mut identity: Vec<u32> = (0..6).collect();
        permute_rows(&mut identity, 2, &[0, 1, 2]);
        assert_eq!(identity, vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    #[should_panic(expected = "not a permutation")]
    fn permute_rows_refuses_a_repeated_row() {
        permute_rows(&mut [0u8; 6], 2, &[1, 1, 0]);
    }

    #[test]
    fn small_batches_keep_input_order() {
        assert!(locality_order(&interleaved_blobs(1_000, 4), 8, 2).is_none());
        assert!(
            locality_order(&[1.0; 20_000], 0, 2).is_none(),
            "no dimension, no rows"
        );
        assert!(locality_order(&interleaved_blobs(ORDERED_BATCH_MIN_ROWS - 1, 4), 8, 2).is_none());
    }

    #[test]
    fn every_row_is_linked_exactly_once_and_blobs_come_together() {
        for (rows, blobs) in [(ORDERED_BATCH_MIN_ROWS, 4), (40_000, 8), (50_001, 3)] {
            let order = locality_order(&interleaved_blobs(rows, blobs), 8, 2).expect("large batch");
            let mut seen = vec![false; rows];
            for &row in &order {
                assert!(!seen[row as usize], "row {row} twice");
                seen[row as usize] = true;
            }
            assert!(seen.iter().all(|s| *s), "a row is missing");
            // Input order interleaves the blobs (a change of blob at every row); grouped,
            // the blob changes at most once per cluster boundary.
            let changes = order
                .windows(2)
                .filter(|pair| pair[0] as usize % blobs != pair[1] as usize % blobs)
                .count();
            let clusters = (rows / COARSE_ROWS).clamp(2, COARSE_MAX);
            assert!(
                changes < clusters,
                "{changes} blob changes for {blobs} blobs in {clusters} clusters"
            );
        }
    }
}
