//! Building a disk index over input larger than RAM (a memory-mapped file): the rows are
//! grouped in one pass ([`partition::groups`]), then taken a batch of groups at a time —
//! at most [`DiskParams::batch_bytes`] of rows (4 GiB by default), copied out in ascending row order so the file is read
//! front to back — to be split into partitions, and again a batch of partitions at a time
//! to be encoded and written. Random access into the input (the k-means passes, the
//! encoding and the records in partition order) stays inside a batch in RAM: reading a
//! 30 GB memory map in partition order faulted in 40× its size. Input that fits one batch
//! is used where it lies, uncopied.

use std::borrow::Cow;
use std::ops::Range;

use super::DiskParams;
use crate::error::Result;
use crate::partition;

/// The default of [`DiskParams::batch_bytes`].
pub(super) const BATCH_BYTES: usize = 4 << 30;

/// Rows of the input a batch works on: the whole input borrowed, or a copy of the batch's
/// rows in ascending order (`rows[i]` is local row `i`).
pub(super) struct Gathered<'a> {
    data: Cow<'a, [f32]>,
    rows: Option<Vec<u32>>,
}

impl<'a> Gathered<'a> {
    /// The rows of `sets` (each ascending), or every row of `vectors` when `whole`.
    pub(super) fn new(vectors: &'a [f32], dim: usize, sets: &[Vec<u32>], whole: bool) -> Self {
        if whole {
            return Gathered {
                data: Cow::Borrowed(vectors),
                rows: None,
            };
        }
        let mut rows: Vec<u32> = sets.iter().flatten().copied().collect();
        rows.sort_unstable();
        let mut data = Vec::with_capacity(rows.len() * dim);
        for row in &rows {
            data.extend_from_slice(&vectors[*row as usize * dim..(*row as usize + 1) * dim]);
        }
        Gathered {
            data: Cow::Owned(data),
            rows: Some(rows),
        }
    }

    pub(super) fn data(&self) -> &[f32] {
        &self.data
    }

    /// Input rows (gathered here) as local rows; order kept.
    pub(super) fn local(&self, rows: &[u32]) -> Vec<u32> {
        match &self.rows {
            None => rows.to_vec(),
            Some(gathered) => rows
                .iter()
                .map(|row| {
                    let local = gathered.binary_search(row).expect("a gathered row");
                    u32::try_from(local).expect("rows < 2^32")
                })
                .collect(),
        }
    }

    /// Local rows as input rows; order kept.
    fn global(&self, rows: Vec<u32>) -> Vec<u32> {
        match &self.rows {
            None => rows,
            Some(gathered) => rows.iter().map(|row| gathered[*row as usize]).collect(),
        }
    }
}

/// Consecutive runs of `sets` whose rows take at most `bytes` together (a set larger
/// than that is a run of its own).
pub(super) fn batches(sets: &[Vec<u32>], dim: usize, bytes: usize) -> Vec<Range<usize>> {
    let budget = (bytes / (dim * 4)).max(1);
    let mut runs = Vec::new();
    let (mut start, mut rows) = (0, 0);
    for (index, set) in sets.iter().enumerate() {
        if rows > 0 && rows + set.len() > budget {
            runs.push(start..index);
            (start, rows) = (index, 0);
        }
        rows += set.len();
    }
    if start < sets.len() {
        runs.push(start..sets.len());
    }
    runs
}

/// The balanced partitions of `rows` rows: centroids (row-major) and members (input rows,
/// each partition ascending, in position order).
pub(super) fn partition_rows(
    vectors: &[f32],
    dim: usize,
    rows: usize,
    params: DiskParams,
) -> Result<(Vec<f32>, Vec<Vec<u32>>)> {
    if rows == 0 {
        return Ok((Vec::new(), Vec::new()));
    }
    let target = params.partition_size;
    let groups = partition::groups(vectors, dim, target, params.seed, params.threads)?;
    let runs = batches(&groups, dim, params.batch_bytes);
    let whole = runs.len() == 1;
    let (mut centroids, mut members) = (Vec::new(), Vec::new());
    for run in runs {
        let batch = Gathered::new(vectors, dim, &groups[run.clone()], whole);
        for number in run {
            let local = batch.local(&groups[number]);
            let seed = partition::group_seed(params.seed, number, groups.len());
            let parts =
                partition::split_group(batch.data(), dim, &local, target, seed, params.threads);
            centroids.extend(partition::partition_means(batch.data(), dim, &parts));
            members.extend(parts.into_iter().map(|part| batch.global(part)));
        }
    }
    Ok((centroids, members))
}
