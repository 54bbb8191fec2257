//! Exact ground truth by brute force (cosine) and precision@k of a result list.

use crate::npy::Matrix;

/// Row-wise L2 normalization (zero rows stay zero).
pub fn normalized(matrix: &Matrix<f32>) -> Vec<f32> {
    let mut out = matrix.data.clone();
    if matrix.cols == 0 {
        return out;
    }
    for row in out.chunks_exact_mut(matrix.cols) {
        let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt();
        if norm > 0.0 {
            for value in row {
                *value /= norm;
            }
        }
    }
    out
}

/// Dot product with eight independent accumulators, so the compiler vectorizes it.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let chunks_a = a.chunks_exact(8);
    let chunks_b = b.chunks_exact(8);
    let tail: f32 = chunks_a
        .remainder()
        .iter()
        .zip(chunks_b.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in chunks_a.zip(chunks_b) {
        for lane in 0..8 {
            acc[lane] += x[lane] * y[lane];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// The `k` best (highest score) rows of `base` for `query`, best first; ties go to the lower
/// row number.
fn top_k(base: &[f32], dim: usize, query: &[f32], k: usize) -> Vec<u32> {
    // Sorted best first: (score, row).
    let mut best: Vec<(f32, u32)> = Vec::with_capacity(k + 1);
    for (row, vector) in base.chunks_exact(dim).enumerate() {
        let score = dot(vector, query);
        if best.len() == k && score <= best[k - 1].0 {
            continue;
        }
        let at = best.partition_point(|&(s, _)| s >= score);
        best.insert(at, (score, row as u32));
        best.truncate(k);
    }
    best.into_iter().map(|(_, row)| row).collect()
}

/// Exact cosine top-`k` row indices of `base` for each query, on all cores.
pub fn brute_force_cosine(base: &Matrix<f32>, queries: &Matrix<f32>, k: usize) -> Vec<Vec<u32>> {
    assert_eq!(base.cols, queries.cols, "dimension mismatch");
    let k = k.min(base.rows);
    let dim = base.cols.max(1);
    let base = normalized(base);
    let queries_normalized = normalized(queries);
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(queries.rows.max(1));
    let per_thread = queries.rows.div_ceil(threads).max(1);
    let mut out = vec![Vec::new(); queries.rows];
    std::thread::scope(|scope| {
        for (chunk_index, slots) in out.chunks_mut(per_thread).enumerate() {
            let base = &base;
            let queries_normalized = &queries_normalized;
            scope.spawn(move || {
                for (offset, slot) in slots.iter_mut().enumerate() {
                    let q = chunk_index * per_thread + offset;
                    let query = &queries_normalized[q * dim..(q + 1) * dim];
                    *slot = top_k(base, dim, query, k);
                }
            });
        }
    });
    out
}

/// |returned ∩ truth[..k]| / k. Duplicated ids count once; fewer than `k` results count the
/// missing ones as misses.
pub fn precision_at_k(returned: &[u64], truth: &[u64], k: usize) -> f64 {
    if k == 0 {
        return 0.0;
    }
    let truth = &truth[..k.min(truth.len())];
    let mut hits = 0usize;
    for (i, id) in returned.iter().take(k).enumerate() {
        if truth.contains(id) && !returned[..i].contains(id) {
            hits += 1;
        }
    }
    hits as f64 / k as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::npy::Dtype;

    fn matrix(rows: usize, cols: usize, data: Vec<f32>) -> Matrix<f32> {
        Matrix {
            rows,
            cols,
            data,
            source_dtype: Dtype::F32,
        }
    }

    #[test]
    fn precision_counts_hits_over_k() {
        assert_eq!(precision_at_k(&[1, 2, 3], &[3, 2, 1], 3), 1.0);
        assert_eq!(precision_at_k(&[1, 9, 3], &[3, 2, 1], 3), 2.0 / 3.0);
        // Fewer results than k: the missing ones are misses.
        assert_eq!(precision_at_k(&[1], &[1, 2], 2), 0.5);
        // Duplicates count once.
        assert_eq!(precision_at_k(&[1, 1], &[1, 2], 2), 0.5);
        // Only the first k of each side matter.
        assert_eq!(precision_at_k(&[5, 1, 2], &[1, 2, 5], 2), 0.5);
        assert_eq!(precision_at_k(&[], &[1], 1), 0.0);
    }

    #[test]
    fn brute_force_matches_a_naive_search() {
        // Deterministic pseudo-random data.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 2001) as f32 / 1000.0 - 1.0
        };
        let (n, nq, dim, k) = (300, 17, 19, 5);
        let base = matrix(n, dim, (0..n * dim).map(|_| next()).collect());
        let queries = matrix(nq, dim, (0..nq * dim).map(|_| next()).collect());
        let truth = brute_force_cosine(&base, &queries, k);
        let base_n = normalized(&base);
        for (q, row) in truth.iter().enumerate() {
            let query = &queries.data[q * dim..(q + 1) * dim];
            let mut scored: Vec<(f32, usize)> = (0..n)
                .map(|i| {
                    let v = &base_n[i * dim..(i + 1) * dim];
                    (v.iter().zip(query).map(|(a, b)| a * b).sum(), i)
                })
                .collect();
            scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let expected: Vec<u32> = scored[..k].iter().map(|&(_, i)| i as u32).collect();
            assert_eq!(row, &expected, "query {q}");
        }
    }

    #[test]
    fn cosine_ignores_vector_length() {
        let base = matrix(3, 2, vec![10.0, 0.0, 0.0, 0.1, 1.0, 1.0]);
        let queries = matrix(1, 2, vec![0.0, 5.0]);
        assert_eq!(brute_force_cosine(&base, &queries, 3), vec![vec![1, 2, 0]]);
        // k larger than n is capped.
        assert_eq!(brute_force_cosine(&base, &queries, 9)[0].len(), 3);
    }
}
