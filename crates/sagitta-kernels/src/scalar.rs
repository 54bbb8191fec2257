//! Portable scalar kernels: the reference every SIMD level is tested against, and the
//! fallback on CPUs without a supported instruction set.
//!
//! Floating-point loops accumulate into 8 independent lanes so that LLVM can vectorise them
//! with the baseline instruction set (SSE2 on x86_64, NEON on aarch64) without reordering
//! additions itself. Integer loops are exact, so their order does not matter.
//!
//! Every function takes slices of equal length (checked with `debug_assert!`); in release
//! builds the shorter length is used, so a mismatch can never read out of bounds.

use half::f16;

/// Number of independent accumulator lanes in the floating-point loops.
const LANE_COUNT: usize = 8;

#[inline]
fn common_length(a_length: usize, b_length: usize) -> usize {
    debug_assert_eq!(a_length, b_length, "kernel inputs must have equal length");
    a_length.min(b_length)
}

/// Pairwise sum of the accumulator lanes, in a fixed order.
#[inline]
fn sum_lanes(lanes: [f32; LANE_COUNT]) -> f32 {
    ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5]))
        + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]))
}

/// Shared shape of the floating-point kernels: `term(x, y)` is summed over all positions.
#[inline]
fn sum_terms<A: Copy, B: Copy>(a: &[A], b: &[B], term: impl Fn(A, B) -> f32) -> f32 {
    let length = common_length(a.len(), b.len());
    let (a, b) = (&a[..length], &b[..length]);
    let (a_blocks, a_tail) = a.as_chunks::<LANE_COUNT>();
    let (b_blocks, b_tail) = b.as_chunks::<LANE_COUNT>();
    let mut lanes = [0.0f32; LANE_COUNT];
    // 768-d f32: 96 blocks of 8 multiply-adds, ~6 KiB read; vectorised to 2 SSE FMAs a block.
    for (a_block, b_block) in a_blocks.iter().zip(b_blocks) {
        for lane in 0..LANE_COUNT {
            lanes[lane] += term(a_block[lane], b_block[lane]);
        }
    }
    let mut tail_sum = 0.0f32;
    for (&x, &y) in a_tail.iter().zip(b_tail) {
        tail_sum += term(x, y);
    }
    sum_lanes(lanes) + tail_sum
}

pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    sum_terms(a, b, |x, y| x * y)
}

pub fn l2_squared_f32(a: &[f32], b: &[f32]) -> f32 {
    sum_terms(a, b, |x, y| {
        let difference = x - y;
        difference * difference
    })
}

pub fn norm_squared_f32(a: &[f32]) -> f32 {
    sum_terms(a, a, |x, y| x * y)
}

pub fn dot_f16(a: &[f16], b: &[f16]) -> f32 {
    sum_terms(a, b, |x, y| x.to_f32() * y.to_f32())
}

pub fn l2_squared_f16(a: &[f16], b: &[f16]) -> f32 {
    sum_terms(a, b, |x, y| {
        let difference = x.to_f32() - y.to_f32();
        difference * difference
    })
}

pub fn dot_f32_f16(a: &[f32], b: &[f16]) -> f32 {
    sum_terms(a, b, |x, y| x * y.to_f32())
}

pub fn l2_squared_f32_f16(a: &[f32], b: &[f16]) -> f32 {
    sum_terms(a, b, |x, y| {
        let difference = x - y.to_f32();
        difference * difference
    })
}

pub fn dot_f32_i8(a: &[f32], b: &[i8]) -> f32 {
    sum_terms(a, b, |x, y| x * f32::from(y))
}

pub fn dot_f32_u8(a: &[f32], b: &[u8]) -> f32 {
    sum_terms(a, b, |x, y| x * f32::from(y))
}

// Integer kernels are exact for dimensions up to `crate::MAX_INTEGER_KERNEL_DIMENSION`
// (the largest possible sum fits the result type); LLVM vectorises these loops freely.

pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let length = common_length(a.len(), b.len());
    a[..length]
        .iter()
        .zip(&b[..length])
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .fold(0i32, i32::wrapping_add)
}

pub fn l2_squared_i8(a: &[i8], b: &[i8]) -> u32 {
    let length = common_length(a.len(), b.len());
    a[..length]
        .iter()
        .zip(&b[..length])
        .map(|(&x, &y)| {
            let difference = (i32::from(x) - i32::from(y)).unsigned_abs();
            difference * difference
        })
        .fold(0u32, u32::wrapping_add)
}

pub fn dot_u8_i8(a: &[u8], b: &[i8]) -> i32 {
    let length = common_length(a.len(), b.len());
    a[..length]
        .iter()
        .zip(&b[..length])
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .fold(0i32, i32::wrapping_add)
}

pub fn hamming_u64(a: &[u64], b: &[u64]) -> u32 {
    let length = common_length(a.len(), b.len());
    a[..length]
        .iter()
        .zip(&b[..length])
        .map(|(&x, &y)| (x ^ y).count_ones())
        .sum()
}

pub fn and_popcount_u64(a: &[u64], b: &[u64]) -> u32 {
    let length = common_length(a.len(), b.len());
    a[..length]
        .iter()
        .zip(&b[..length])
        .map(|(&x, &y)| (x & y).count_ones())
        .sum()
}

/// `sum_p 2^p * popcount(plane_p & code)` for each of the back-to-back `codes`.
#[inline]
pub fn binary_dot_planes_rows(planes: &[u64], bits: u32, codes: &[u64], out: &mut [u32]) {
    let words = planes.len() / bits as usize;
    for (code, result) in codes.chunks_exact(words).zip(out.iter_mut()) {
        *result = planes
            .chunks_exact(words)
            .zip(0u32..)
            .map(|(plane, index)| and_popcount_u64(plane, code) << index)
            .sum();
    }
}

/// Four dot products sharing one right-hand side; each equals `dot_f32(left[k], right)` bit for bit.
pub fn dot_f32_rows4(left: [&[f32]; 4], right: &[f32]) -> [f32; 4] {
    left.map(|row| dot_f32(row, right))
}

/// Four squared distances sharing one right-hand side; each equals `l2_squared_f32(left[k], right)`.
pub fn l2_squared_f32_rows4(left: [&[f32]; 4], right: &[f32]) -> [f32; 4] {
    left.map(|row| l2_squared_f32(row, right))
}
