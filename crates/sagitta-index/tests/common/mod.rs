//! Shared test data: seeded clustered vectors and a brute-force reference.
#![allow(dead_code)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cell::Cell;
use std::sync::Arc;

use sagitta_index::disk::PageReader;
use sagitta_index::Metric;
use sagitta_storage::pageio::{Page, PAGE_BYTES};

/// `count` embedding-like vectors of `dim`, row-major: a 12-d Gaussian latent mapped by a
/// fixed random projection plus isotropic noise (low intrinsic dimension, like text
/// embeddings; hnswlib with m=12, ef=64 reaches recall@10 ≈ 1.0 on 4,000 of them).
pub fn clustered(count: usize, dim: usize, seed: u64) -> Vec<f32> {
    const LATENT: usize = 12;
    let mut projection_rng = ChaCha8Rng::seed_from_u64(0);
    let projection: Vec<f32> = (0..LATENT * dim)
        .map(|_| gaussian(&mut projection_rng))
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(count * dim);
    for _ in 0..count {
        let latent: Vec<f32> = (0..LATENT).map(|_| gaussian(&mut rng)).collect();
        for j in 0..dim {
            let mapped: f32 = (0..LATENT)
                .map(|l| latent[l] * projection[l * dim + j])
                .sum();
            out.push(mapped + 0.5 * gaussian(&mut rng));
        }
    }
    out
}

/// A standard normal sample (Box–Muller).
fn gaussian(rng: &mut ChaCha8Rng) -> f32 {
    let u1: f32 = rng.gen_range(f32::EPSILON..1.0);
    let u2: f32 = rng.gen_range(0.0..1.0);
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f32::consts::PI * u2).cos()
}

fn normalized(vector: &[f32]) -> Vec<f32> {
    let norm: f32 = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    vector
        .iter()
        .map(|v| if norm > 0.0 { v / norm } else { 0.0 })
        .collect()
}

/// Distance (lower is closer) computed naively in f64.
pub fn reference_distance(metric: Metric, a: &[f32], b: &[f32]) -> f64 {
    match metric {
        Metric::L2 => a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2)).sum(),
        Metric::Dot => -a
            .iter()
            .zip(b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum::<f64>(),
        Metric::Cosine => {
            let (a, b) = (normalized(a), normalized(b));
            -a.iter()
                .zip(&b)
                .map(|(x, y)| f64::from(*x) * f64::from(*y))
                .sum::<f64>()
        }
    }
}

/// Exact top-k row indices of each query.
pub fn brute_force(
    metric: Metric,
    base: &[f32],
    queries: &[f32],
    dim: usize,
    k: usize,
) -> Vec<Vec<usize>> {
    queries
        .chunks_exact(dim)
        .map(|query| {
            let mut scored: Vec<(f64, usize)> = base
                .chunks_exact(dim)
                .enumerate()
                .map(|(row, vector)| (reference_distance(metric, query, vector), row))
                .collect();
            scored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            scored.into_iter().take(k).map(|(_, row)| row).collect()
        })
        .collect()
}

/// Mean |found ∩ truth| / k.
pub fn recall(found: &[u64], truth: &[Vec<usize>], k: usize) -> f64 {
    let mut hits = 0usize;
    for (query, expected) in truth.iter().enumerate() {
        let got = &found[query * k..(query + 1) * k];
        hits += expected
            .iter()
            .filter(|row| got.contains(&(**row as u64)))
            .count();
    }
    hits as f64 / (truth.len() * k) as f64
}

/// The records file in memory, counting what is asked of it.
pub struct MemoryReader {
    pub bytes: Vec<u8>,
    pub pages_read: Cell<usize>,
}

impl MemoryReader {
    pub fn new(bytes: Vec<u8>) -> MemoryReader {
        MemoryReader {
            bytes,
            pages_read: Cell::new(0),
        }
    }
}

impl PageReader for MemoryReader {
    fn read(&self, pages: &[u64]) -> sagitta_index::error::Result<Vec<Arc<Page>>> {
        self.pages_read.set(self.pages_read.get() + pages.len());
        Ok(pages
            .iter()
            .map(|number| {
                let start = *number as usize * PAGE_BYTES;
                let mut page = Page::zeroed();
                page.0
                    .copy_from_slice(&self.bytes[start..start + PAGE_BYTES]);
                Arc::new(page)
            })
            .collect())
    }
}
