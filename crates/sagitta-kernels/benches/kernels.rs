//! Kernel micro-benchmarks at every level this CPU supports.
//!
//! `cargo bench -p sagitta-kernels` (about a minute); filter with e.g.
//! `cargo bench -p sagitta-kernels -- dot_f32/768`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use half::f16;
use sagitta_kernels::{available_simd_levels, kernels, Kernels, SimdLevel};

const DIMENSIONS: [usize; 3] = [384, 768, 1536];

fn values(count: usize, seed: u32) -> Vec<f32> {
    (0..count)
        .map(|index| {
            ((index as u32).wrapping_mul(2_654_435_761) ^ seed) as f32 / u32::MAX as f32 - 0.5
        })
        .collect()
}

/// Storage whose `slice()` starts on a 64-byte boundary, like rows of an `AppendSlab`
/// (a plain `Vec` is only 16-byte aligned, so every zmm load would split cache lines).
struct Aligned<T> {
    storage: Vec<T>,
    offset: usize,
    length: usize,
}

impl<T: Copy + Default> Aligned<T> {
    fn new(values: &[T]) -> Self {
        let padding = 64 / size_of::<T>();
        let mut storage = vec![T::default(); values.len() + padding];
        let offset = storage.as_ptr().align_offset(64);
        storage[offset..offset + values.len()].copy_from_slice(values);
        Aligned {
            storage,
            offset,
            length: values.len(),
        }
    }

    fn slice(&self) -> &[T] {
        &self.storage[self.offset..self.offset + self.length]
    }
}

fn levels() -> Vec<Kernels> {
    available_simd_levels()
        .into_iter()
        .filter_map(Kernels::for_level)
        .collect()
}

fn pair_kernels(criterion: &mut Criterion) {
    for dimension in DIMENSIONS {
        let a_values = values(dimension, 1);
        let b_values = values(dimension, 2);
        let a_f16: Vec<f16> = a_values.iter().map(|&value| f16::from_f32(value)).collect();
        let b_f16: Vec<f16> = b_values.iter().map(|&value| f16::from_f32(value)).collect();
        let a_u8: Vec<u8> = a_values
            .iter()
            .map(|&value| ((value + 0.5) * 255.0) as u8)
            .collect();
        let b_i8: Vec<i8> = b_values
            .iter()
            .map(|&value| (value * 254.0) as i8)
            .collect();
        let words = dimension / 64;
        let a_bits: Vec<u64> = (0..words as u64)
            .map(|word| word.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        let b_bits: Vec<u64> = a_bits.iter().map(|word| word.rotate_left(13)).collect();
        let (a, b) = (Aligned::new(&a_values), Aligned::new(&b_values));
        let (a, b) = (a.slice(), b.slice());
        let (a_f16, b_f16) = (Aligned::new(&a_f16), Aligned::new(&b_f16));
        let (a_f16, b_f16) = (a_f16.slice(), b_f16.slice());
        let (a_u8, b_i8) = (Aligned::new(&a_u8), Aligned::new(&b_i8));
        let (a_u8, b_i8) = (a_u8.slice(), b_i8.slice());
        let (a_bits, b_bits) = (Aligned::new(&a_bits), Aligned::new(&b_bits));
        let (a_bits, b_bits) = (a_bits.slice(), b_bits.slice());

        for table in levels() {
            let level = table.level.name();
            let mut group = criterion.benchmark_group(level);
            group.throughput(Throughput::Elements(dimension as u64));
            let dot_f32 = table.dot_f32;
            group.bench_function(BenchmarkId::new("dot_f32", dimension), |bencher| {
                bencher.iter(|| dot_f32(black_box(a), black_box(b)));
            });
            let dot_u8_i8 = table.dot_u8_i8;
            group.bench_function(BenchmarkId::new("dot_u8_i8", dimension), |bencher| {
                bencher.iter(|| dot_u8_i8(black_box(a_u8), black_box(b_i8)));
            });
            let dot_f32_i8 = table.dot_f32_i8;
            group.bench_function(BenchmarkId::new("dot_f32_i8", dimension), |bencher| {
                bencher.iter(|| dot_f32_i8(black_box(a), black_box(b_i8)));
            });
            let dot_f16 = table.dot_f16;
            group.bench_function(BenchmarkId::new("dot_f16", dimension), |bencher| {
                bencher.iter(|| dot_f16(black_box(a_f16), black_box(b_f16)));
            });
            let hamming_u64 = table.hamming_u64;
            group.bench_function(BenchmarkId::new("hamming_u64", dimension), |bencher| {
                bencher.iter(|| hamming_u64(black_box(a_bits), black_box(b_bits)));
            });
            group.finish();
        }
    }
}

fn many_queries(criterion: &mut Criterion) {
    const QUERY_COUNT: usize = 64;
    const ROW_COUNT: usize = 4096;
    const DIMENSION: usize = 768;
    let queries = values(QUERY_COUNT * DIMENSION, 3);
    let matrix = values(ROW_COUNT * DIMENSION, 4);
    let mut out = vec![0.0f32; QUERY_COUNT * ROW_COUNT];
    let mut group = criterion.benchmark_group("dot_f32_many_64x4096x768");
    group.throughput(Throughput::Elements((QUERY_COUNT * ROW_COUNT) as u64));
    let best = *kernels();
    let mut tables = vec![best];
    if best.level != SimdLevel::Scalar {
        tables.push(Kernels::for_level(SimdLevel::Scalar).unwrap());
    }
    for table in tables {
        group.bench_function(table.level.name(), |bencher| {
            bencher.iter(|| {
                table.dot_f32_many(black_box(&queries), black_box(&matrix), DIMENSION, &mut out);
            });
        });
    }
    // The same work as one query at a time, to show what tiling buys.
    let dot_f32_batch = |queries: &[f32], out: &mut [f32]| {
        for (query, out_row) in queries
            .chunks_exact(DIMENSION)
            .zip(out.chunks_exact_mut(ROW_COUNT))
        {
            best.dot_f32_batch(query, &matrix, DIMENSION, out_row);
        }
    };
    group.bench_function(
        format!("{}-per-query-batch", best.level.name()),
        |bencher| {
            bencher.iter(|| dot_f32_batch(black_box(&queries), &mut out));
        },
    );
    group.finish();
}

fn configuration() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(1))
        .warm_up_time(Duration::from_millis(300))
}

criterion_group! {
    name = benches;
    config = configuration();
    targets = pair_kernels, many_queries
}
criterion_main!(benches);
