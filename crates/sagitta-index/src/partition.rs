//! Balanced partitions (issue 15 §1): the disk index's unit of layout. Rows are split into
//! `⌈n / target⌉` partitions of at most 1.25 × their average size, each row in the
//! partition of the nearest centroid that still has room.
//!
//! How: k-means++ seeding and Lloyd iterations on a sample (the locality order's k-means,
//! `hnsw::order`), then every row's [`CANDIDATES`] nearest centroids (in parallel), then a
//! greedy assignment in order of *regret* — rows that lose most by missing their nearest
//! centroid (second distance minus first) choose first, so the rows a full partition turns
//! away are the ones that lose least; a row whose candidates are all full takes the nearest
//! centroid with room. Centroids end as their members' means.
//!
//! Two levels (above [`ONE_LEVEL_MAX`] partitions): the rows are first grouped by ~√P coarse
//! k-means centroids, then each group is split as above into its own balanced partitions
//! (a group still too large is split in two levels again). One level costs rows × P
//! distances (1M × 1,000 × 768-d is ~0.8 T flops); two levels cost rows × (√P + P/√P),
//! so 10M rows into 10,000 partitions take ~1.5 T flops rather than ~77 T. A row then sits
//! in its group's nearest partition, which may not be the globally nearest near a group's
//! edge; the search probes partitions by centroid distance over all groups, so such a row
//! is found when its partition is probed. Deterministic for a given seed.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{IndexError, Result};
use crate::hnsw::{assign, sample_centroids, Space};
use crate::limits::{check_range, MAX_DIMENSION, MAX_POINTS};
use crate::random::SplitMix64;
use crate::threads::{effective_threads, for_each_chunk};

/// Nearest centroids kept per row for the balanced assignment.
pub const CANDIDATES: usize = 8;
/// Rows sampled per partition to train the centroids, and at most in all.
const SAMPLE_ROWS_PER_PARTITION: usize = 32;
const SAMPLE_ROWS_MAX: usize = 65_536;
/// Most partitions one level of k-means makes; more are made in two levels. 1M × 768-d
/// into 1,000 partitions stays one level: made in two (32 groups), its recall at `hnsw_ef`
/// 192 fell from 0.971 to 0.931 and its best QPS at 0.95 from 415 to 267 (BENCHMARKS.md),
/// for a build 3× faster; 10M into 10,000 still needs two.
pub const ONE_LEVEL_MAX: usize = 2_048;

/// Partitions of a set of rows: centroids (row-major) and each partition's rows.
#[derive(Clone, Debug, PartialEq)]
pub struct Partitions {
    dim: usize,
    centroids: Vec<f32>,
    members: Vec<Vec<u32>>,
}

impl Partitions {
    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn centroid(&self, partition: usize) -> &[f32] {
        &self.centroids[partition * self.dim..(partition + 1) * self.dim]
    }

    /// The rows of `partition`, ascending.
    pub fn members(&self, partition: usize) -> &[u32] {
        &self.members[partition]
    }

    /// Most rows a partition may hold when `rows` rows are split for `target`.
    pub fn capacity(rows: usize, target: usize) -> usize {
        capacity_of(rows, rows.div_ceil(target).max(1))
    }
}

/// Splits the row-major `vectors` (`dim` values a row) into balanced partitions of about
/// `target` rows, on `threads` threads (0: all cores), the k-means draws from `seed`:
/// [`groups`], then [`split_group`] of each.
pub fn balanced(
    vectors: &[f32],
    dim: usize,
    target: usize,
    seed: u64,
    threads: usize,
) -> Result<Partitions> {
    let groups = groups(vectors, dim, target, seed, threads)?;
    let mut members = Vec::new();
    for (number, group) in groups.iter().enumerate() {
        let seed = group_seed(seed, number, groups.len());
        members.extend(split_group(vectors, dim, group, target, seed, threads));
    }
    let centroids = means(Space::new(dim), vectors, &members);
    Ok(Partitions {
        dim,
        centroids,
        members,
    })
}

/// The first level: above [`ONE_LEVEL_MAX`] partitions, the rows grouped by their nearest
/// of ~√P coarse k-means centroids; else one group of every row. Each group ascending.
/// One pass over the rows in order (and a sample), so a memory-mapped input larger than
/// RAM is read sequentially; [`split_group`] then needs only one group's rows at a time.
pub fn groups(
    vectors: &[f32],
    dim: usize,
    target: usize,
    seed: u64,
    threads: usize,
) -> Result<Vec<Vec<u32>>> {
    check_range("dim", dim, 1, MAX_DIMENSION)?;
    check_range("target", target, 1, MAX_POINTS)?;
    if !vectors.len().is_multiple_of(dim) {
        return Err(IndexError::WrongVectorDimension {
            expected: dim,
            received: vectors.len() % dim,
        });
    }
    let rows = vectors.len() / dim;
    check_range("rows", rows, 1, MAX_POINTS)?;
    let all: Vec<u32> = (0..u32::try_from(rows).expect("checked")).collect();
    Ok(coarse_groups(
        Space::new(dim),
        vectors,
        all,
        target,
        seed,
        threads,
    ))
}

/// The seed group `number` of `groups` is split with (the build's own seed when there is
/// one group).
pub fn group_seed(seed: u64, number: usize, groups: usize) -> u64 {
    if groups <= 1 {
        seed
    } else {
        seed ^ (number as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

/// The balanced partitions of the rows `rows` of `vectors` (ascending; a group of
/// [`groups`]), each partition's rows ascending: one level of k-means up to
/// [`ONE_LEVEL_MAX`] partitions, two levels again above.
pub fn split_group(
    vectors: &[f32],
    dim: usize,
    rows: &[u32],
    target: usize,
    seed: u64,
    threads: usize,
) -> Vec<Vec<u32>> {
    split(Space::new(dim), vectors, rows, target, seed, threads)
}

/// Each partition's mean row (row-major), `members` indexing the rows of `vectors`.
pub fn partition_means(vectors: &[f32], dim: usize, members: &[Vec<u32>]) -> Vec<f32> {
    means(Space::new(dim), vectors, members)
}

/// Groups of `rows` by ~√P coarse centroids, or `[rows]` when one level suffices (or the
/// coarse k-means finds a single group: identical rows).
fn coarse_groups(
    space: Space,
    vectors: &[f32],
    rows: Vec<u32>,
    target: usize,
    seed: u64,
    threads: usize,
) -> Vec<Vec<u32>> {
    let partitions = rows.len().div_ceil(target);
    if partitions <= ONE_LEVEL_MAX {
        return vec![rows];
    }
    let coarse = partitions.isqrt().max(2);
    let centroids = train(space, vectors, &rows, coarse, seed);
    let groups = assign(
        space,
        vectors,
        &rows,
        &centroids,
        effective_threads(threads, rows.len()),
    );
    if groups.len() <= 1 {
        return vec![rows];
    }
    groups
}

fn split(
    space: Space,
    vectors: &[f32],
    rows: &[u32],
    target: usize,
    seed: u64,
    threads: usize,
) -> Vec<Vec<u32>> {
    if rows.len().div_ceil(target) <= ONE_LEVEL_MAX {
        return one_level(space, vectors, rows, target, seed, threads);
    }
    let groups = coarse_groups(space, vectors, rows.to_vec(), target, seed, threads);
    if groups.len() <= 1 {
        return one_level(space, vectors, rows, target, seed, threads);
    }
    // One group after another, each on every thread: a large group (uneven data) would
    // otherwise leave the other threads idle while it is split.
    let mut members = Vec::new();
    for (number, group) in groups.iter().enumerate() {
        let seed = group_seed(seed, number, groups.len());
        members.extend(split(space, vectors, group, target, seed, threads));
    }
    members
}

/// One level: k-means centroids on a sample of `rows`, then the balanced assignment.
fn one_level(
    space: Space,
    vectors: &[f32],
    rows: &[u32],
    target: usize,
    seed: u64,
    threads: usize,
) -> Vec<Vec<u32>> {
    let partitions = rows.len().div_ceil(target);
    if partitions <= 1 {
        return vec![rows.to_vec()];
    }
    let centroids = train(space, vectors, rows, partitions, seed);
    if centroids.len() / space.dim <= 1 {
        return vec![rows.to_vec()];
    }
    let candidates = nearest_centroids(space, vectors, rows, &centroids, threads);
    assign_balanced(&candidates, &centroids, space, vectors, rows)
}

/// `clusters` k-means centroids (row-major; fewer when fewer rows) trained on a sample of
/// `rows`, drawn from `seed`.
fn train(space: Space, vectors: &[f32], rows: &[u32], clusters: usize, seed: u64) -> Vec<f32> {
    let sample_size = rows
        .len()
        .min(clusters * SAMPLE_ROWS_PER_PARTITION)
        .min(SAMPLE_ROWS_MAX);
    sample_centroids(
        space,
        vectors,
        rows,
        clusters,
        sample_size,
        &mut SplitMix64(seed),
    )
}

/// Most rows each of `partitions` partitions of `rows` rows may hold: 1.25 × the average.
fn capacity_of(rows: usize, partitions: usize) -> usize {
    (rows.div_ceil(partitions) * 5).div_ceil(4)
}

/// Each of `rows`' [`CANDIDATES`] nearest centroids, nearest first: `(distance, centroid)`.
fn nearest_centroids(
    space: Space,
    vectors: &[f32],
    rows: &[u32],
    centroids: &[f32],
    threads: usize,
) -> Vec<[(f32, u32); CANDIDATES]> {
    let found: Vec<[(AtomicU32, AtomicU32); CANDIDATES]> = rows
        .iter()
        .map(|_| std::array::from_fn(|_| (AtomicU32::new(0), AtomicU32::new(u32::MAX))))
        .collect();
    let threads = effective_threads(threads, rows.len());
    for_each_chunk(rows.len(), 256, threads, |start, end| {
        let mut best: Vec<(f32, u32)> = Vec::with_capacity(centroids.len() / space.dim);
        for (slots, row) in found[start..end].iter().zip(&rows[start..end]) {
            best.clear();
            let vector = space.row(vectors, *row as usize);
            for (centroid, values) in centroids.chunks_exact(space.dim).enumerate() {
                let centroid = u32::try_from(centroid).expect("partitions < 2^32");
                best.push((space.distance(vector, values), centroid));
            }
            let keep = CANDIDATES.min(best.len());
            best.select_nth_unstable_by(keep - 1, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            best[..keep].sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            for (slot, (distance, centroid)) in slots.iter().zip(&best[..keep]) {
                slot.0.store(distance.to_bits(), Ordering::Relaxed);
                slot.1.store(*centroid, Ordering::Relaxed);
            }
        }
        Ok::<(), std::convert::Infallible>(())
    })
    .unwrap_or_else(|never| match never {});
    found
        .iter()
        .map(|slots| {
            std::array::from_fn(|i| {
                let (distance, centroid) = &slots[i];
                let distance = f32::from_bits(distance.load(Ordering::Relaxed));
                (distance, centroid.load(Ordering::Relaxed))
            })
        })
        .collect()
}

/// The greedy balanced assignment of `rows` (see the module docs): by descending regret,
/// each to its nearest candidate with room, else to the nearest centroid with room.
/// `candidates[i]` are `rows[i]`'s.
fn assign_balanced(
    candidates: &[[(f32, u32); CANDIDATES]],
    centroids: &[f32],
    space: Space,
    vectors: &[f32],
    rows: &[u32],
) -> Vec<Vec<u32>> {
    let partitions = centroids.len() / space.dim;
    let capacity = capacity_of(rows.len(), partitions);
    let regret = |row: &[(f32, u32); CANDIDATES]| {
        if row[1].1 == u32::MAX {
            f32::INFINITY // one centroid only: nothing to lose
        } else {
            row[1].0 - row[0].0
        }
    };
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|a, b| {
        let (a_regret, b_regret) = (regret(&candidates[*a]), regret(&candidates[*b]));
        b_regret.total_cmp(&a_regret).then(a.cmp(b))
    });
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); partitions];
    for index in order {
        let row = rows[index];
        let chosen = candidates[index]
            .iter()
            .map(|(_, centroid)| *centroid)
            .find(|centroid| *centroid != u32::MAX && members[*centroid as usize].len() < capacity)
            .map_or_else(
                || {
                    let vector = space.row(vectors, row as usize);
                    nearest_with_room(space, vector, centroids, &members, capacity)
                },
                |centroid| centroid as usize,
            );
        members[chosen].push(row);
    }
    members.retain(|rows| !rows.is_empty());
    members.iter_mut().for_each(|rows| rows.sort_unstable());
    members
}

/// The nearest centroid to `vector` whose partition holds fewer than `capacity` rows (one
/// always has room: capacity × partitions ≥ rows).
fn nearest_with_room(
    space: Space,
    vector: &[f32],
    centroids: &[f32],
    members: &[Vec<u32>],
    capacity: usize,
) -> usize {
    centroids
        .chunks_exact(space.dim)
        .enumerate()
        .filter(|(partition, _)| members[*partition].len() < capacity)
        .map(|(partition, centroid)| (space.distance(vector, centroid), partition))
        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
        .expect("capacity × partitions ≥ rows")
        .1
}

/// Each partition's mean row (row-major).
fn means(space: Space, vectors: &[f32], members: &[Vec<u32>]) -> Vec<f32> {
    let mut centroids = Vec::with_capacity(members.len() * space.dim);
    let mut sum = vec![0.0f64; space.dim];
    for rows in members {
        sum.fill(0.0);
        for row in rows {
            for (total, value) in sum.iter_mut().zip(space.row(vectors, *row as usize)) {
                *total += f64::from(*value);
            }
        }
        #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
        centroids.extend(sum.iter().map(|total| (total / rows.len() as f64) as f32));
    }
    centroids
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rows` rows around 40 centers, 8 values each.
    fn clustered(rows: usize, seed: u64) -> Vec<f32> {
        let dim = 8;
        let mut random = SplitMix64(seed);
        let mut next = move || {
            #[allow(clippy::cast_precision_loss)]
            let unit = (random.next() >> 40) as f32 / (1u64 << 24) as f32;
            unit - 0.5
        };
        let centers: Vec<f32> = (0..40 * dim).map(|_| next() * 20.0).collect();
        (0..rows)
            .flat_map(|row| {
                let center = (row * 7 + row / 3) % 40;
                let values: Vec<f32> = centers[center * dim..(center + 1) * dim]
                    .iter()
                    .map(|c| c + next())
                    .collect();
                values
            })
            .collect()
    }

    #[test]
    fn every_row_lands_once_and_no_partition_exceeds_its_capacity() {
        let vectors = clustered(5_000, 1);
        let partitions = balanced(&vectors, 8, 100, 7, 2).unwrap();
        let capacity = Partitions::capacity(5_000, 100);
        assert_eq!(capacity, 125);
        let mut seen = vec![0u32; 5_000];
        for partition in 0..partitions.len() {
            let rows = partitions.members(partition);
            assert!(!rows.is_empty() && rows.len() <= capacity, "{}", rows.len());
            assert!(rows.windows(2).all(|pair| pair[0] < pair[1]));
            rows.iter().for_each(|row| seen[*row as usize] += 1);
        }
        assert!(seen.iter().all(|count| *count == 1));
        assert!(
            partitions.len() >= 40 && partitions.len() <= 50,
            "{}",
            partitions.len()
        );
    }

    #[test]
    fn most_rows_sit_with_their_nearest_centroid_and_builds_are_deterministic() {
        let vectors = clustered(4_000, 2);
        let partitions = balanced(&vectors, 8, 200, 3, 2).unwrap();
        let space = Space::new(8);
        let centroids: Vec<f32> = (0..partitions.len())
            .flat_map(|p| partitions.centroid(p).to_vec())
            .collect();
        let mut home = 0;
        for partition in 0..partitions.len() {
            for row in partitions.members(partition) {
                let nearest = space.closest(&centroids, space.row(&vectors, *row as usize));
                home += usize::from(nearest == partition);
            }
        }
        assert!(
            home * 100 >= 4_000 * 90,
            "{home} of 4,000 with their nearest centroid"
        );
        assert_eq!(partitions, balanced(&vectors, 8, 200, 3, 1).unwrap());
    }

    #[test]
    fn many_partitions_are_made_in_two_levels_and_stay_balanced_and_near() {
        // 2,400 partitions: more than one level makes, so rows are grouped first.
        let (rows, target) = (120_000, 50);
        assert!(rows / target > ONE_LEVEL_MAX);
        let vectors = clustered(rows, 4);
        let partitions = balanced(&vectors, 8, target, 5, 2).unwrap();
        let mut seen = vec![0u32; rows];
        for partition in 0..partitions.len() {
            let members = partitions.members(partition);
            assert!(!members.is_empty() && members.len() <= (target * 5).div_ceil(4));
            assert!(members.windows(2).all(|pair| pair[0] < pair[1]));
            members.iter().for_each(|row| seen[*row as usize] += 1);
        }
        assert!(seen.iter().all(|count| *count == 1));
        assert!(
            (2_400..=3_000).contains(&partitions.len()),
            "{}",
            partitions.len()
        );
        // About as tight as one level of k-means would make them: the rows' summed
        // distance to their own centroid is within 2% of it.
        let space = Space::new(8);
        let spread = |members: &[Vec<u32>]| -> f64 {
            let centroids = means(space, &vectors, members);
            let mut total = 0.0f64;
            for (partition, rows) in members.iter().enumerate() {
                let centroid = space.row(&centroids, partition);
                for row in rows {
                    let vector = space.row(&vectors, *row as usize);
                    total += f64::from(space.distance(vector, centroid));
                }
            }
            total
        };
        let all: Vec<u32> = (0..120_000).collect();
        let two = spread(&partitions.members);
        let one = spread(&one_level(space, &vectors, &all, target, 5, 2));
        assert!(two <= one * 1.02, "two levels {two}, one level {one}");
        assert_eq!(partitions, balanced(&vectors, 8, target, 5, 1).unwrap());
    }

    #[test]
    fn few_rows_are_one_partition_and_bad_input_is_named() {
        let vectors = clustered(50, 3);
        let one = balanced(&vectors, 8, 100, 1, 1).unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one.members(0).len(), 50);
        assert!(balanced(&vectors, 0, 100, 1, 1)
            .unwrap_err()
            .to_string()
            .contains("dim"));
        assert!(balanced(&vectors, 8, 0, 1, 1)
            .unwrap_err()
            .to_string()
            .contains("target"));
        assert!(balanced(&vectors[..9], 8, 10, 1, 1).is_err());
        assert!(balanced(&[], 8, 10, 1, 1)
            .unwrap_err()
            .to_string()
            .contains("rows"));
    }
}
