//! aarch64 Advanced SIMD (NEON) kernels: f32 dot / squared L2 and i8 dot. Everything else
//! uses the scalar kernels (which LLVM vectorises with NEON anyway, NEON being part of the
//! aarch64 baseline).
//!
//! NEON is enabled by default on every aarch64 target Rust supports, so these are ordinary
//! functions; the only unsafe operations are the loads, whose bounds are stated at each one.
//! This file cannot be tested on the x86_64 development machines; keep it small.

use core::arch::aarch64::{
    float32x4_t, int32x4_t, vaddq_f32, vaddq_s32, vaddvq_f32, vaddvq_s32, vdupq_n_f32, vdupq_n_s32,
    vfmaq_f32, vget_high_s8, vget_low_s8, vld1q_f32, vld1q_s8, vmull_s8, vpadalq_s16, vsubq_f32,
};

use crate::{scalar, Kernels, SimdLevel};

#[inline]
fn common_length(a_length: usize, b_length: usize) -> usize {
    debug_assert_eq!(a_length, b_length, "kernel inputs must have equal length");
    a_length.min(b_length)
}

#[inline]
fn accumulate<const SQUARED_DIFFERENCE: bool>(
    left: float32x4_t,
    right: float32x4_t,
    sum: float32x4_t,
) -> float32x4_t {
    // SAFETY: register-only NEON arithmetic; NEON is part of the aarch64 baseline.
    unsafe {
        if SQUARED_DIFFERENCE {
            let difference = vsubq_f32(left, right);
            vfmaq_f32(sum, difference, difference)
        } else {
            vfmaq_f32(sum, left, right)
        }
    }
}

/// Sum over positions of `a * b` (or `(a - b)^2`), 4 accumulators of 4 lanes.
fn sum_terms_f32<const SQUARED_DIFFERENCE: bool>(a: &[f32], b: &[f32]) -> f32 {
    let length = common_length(a.len(), b.len());
    let (a_pointer, b_pointer) = (a.as_ptr(), b.as_ptr());
    // SAFETY: register-only; NEON is part of the aarch64 baseline.
    let mut sums: [float32x4_t; 4] = unsafe { [vdupq_n_f32(0.0); 4] };
    let mut index = 0;
    // 768-d: 48 iterations of 8 loads + 4 FMAs; 6 KiB read, memory-bound beyond L2.
    while index + 16 <= length {
        for (unroll, sum) in sums.iter_mut().enumerate() {
            let offset = index + 4 * unroll;
            // SAFETY: offset + 4 <= length, the readable length of both inputs.
            let (left, right) = unsafe {
                (
                    vld1q_f32(a_pointer.add(offset)),
                    vld1q_f32(b_pointer.add(offset)),
                )
            };
            *sum = accumulate::<SQUARED_DIFFERENCE>(left, right, *sum);
        }
        index += 16;
    }
    while index + 4 <= length {
        // SAFETY: index + 4 <= length, the readable length of both inputs.
        let (left, right) = unsafe {
            (
                vld1q_f32(a_pointer.add(index)),
                vld1q_f32(b_pointer.add(index)),
            )
        };
        sums[0] = accumulate::<SQUARED_DIFFERENCE>(left, right, sums[0]);
        index += 4;
    }
    let mut tail_sum = 0.0f32;
    for (&x, &y) in a[index..length].iter().zip(&b[index..length]) {
        tail_sum += if SQUARED_DIFFERENCE {
            (x - y) * (x - y)
        } else {
            x * y
        };
    }
    // SAFETY: register-only; NEON is part of the aarch64 baseline.
    let vector_sum = unsafe {
        vaddvq_f32(vaddq_f32(
            vaddq_f32(sums[0], sums[1]),
            vaddq_f32(sums[2], sums[3]),
        ))
    };
    vector_sum + tail_sum
}

fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    sum_terms_f32::<false>(a, b)
}

fn l2_squared_f32(a: &[f32], b: &[f32]) -> f32 {
    sum_terms_f32::<true>(a, b)
}

fn norm_squared_f32(a: &[f32]) -> f32 {
    sum_terms_f32::<false>(a, a)
}

fn dot_f32_rows4(left: [&[f32]; 4], right: &[f32]) -> [f32; 4] {
    left.map(|row| dot_f32(row, right))
}

fn l2_squared_f32_rows4(left: [&[f32]; 4], right: &[f32]) -> [f32; 4] {
    left.map(|row| l2_squared_f32(row, right))
}

/// Exact i8 dot: 16 products widened to i16 (`vmull_s8`, at most 2^14 each, no overflow),
/// pair-added into i32 lanes (`vpadalq_s16`).
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let length = common_length(a.len(), b.len());
    let (a_pointer, b_pointer) = (a.as_ptr(), b.as_ptr());
    // SAFETY: register-only; NEON is part of the aarch64 baseline.
    let mut sums: [int32x4_t; 2] = unsafe { [vdupq_n_s32(0); 2] };
    let mut index = 0;
    // 768-d: 48 iterations of 2 loads, 2 vmull, 2 vpadal; 1.5 KiB read.
    while index + 16 <= length {
        // SAFETY: index + 16 <= length, the readable length of both inputs; the rest is
        // register-only NEON arithmetic.
        unsafe {
            let a_bytes = vld1q_s8(a_pointer.add(index));
            let b_bytes = vld1q_s8(b_pointer.add(index));
            let low = vmull_s8(vget_low_s8(a_bytes), vget_low_s8(b_bytes));
            let high = vmull_s8(vget_high_s8(a_bytes), vget_high_s8(b_bytes));
            sums[0] = vpadalq_s16(sums[0], low);
            sums[1] = vpadalq_s16(sums[1], high);
        }
        index += 16;
    }
    let tail_sum: i32 = a[index..length]
        .iter()
        .zip(&b[index..length])
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum();
    // SAFETY: register-only; NEON is part of the aarch64 baseline.
    let vector_sum = unsafe { vaddvq_s32(vaddq_s32(sums[0], sums[1])) };
    vector_sum.wrapping_add(tail_sum)
}

/// The NEON table: NEON kernels where written, scalar for the rest.
pub(crate) fn kernels_neon() -> Kernels {
    Kernels {
        level: SimdLevel::Neon,
        dot_f32,
        l2_squared_f32,
        norm_squared_f32,
        dot_f16: scalar::dot_f16,
        l2_squared_f16: scalar::l2_squared_f16,
        dot_f32_f16: scalar::dot_f32_f16,
        l2_squared_f32_f16: scalar::l2_squared_f32_f16,
        dot_i8,
        l2_squared_i8: scalar::l2_squared_i8,
        dot_u8_i8: scalar::dot_u8_i8,
        dot_f32_i8: scalar::dot_f32_i8,
        dot_f32_u8: scalar::dot_f32_u8,
        hamming_u64: scalar::hamming_u64,
        and_popcount_u64: scalar::and_popcount_u64,
        dot_f32_rows4,
        l2_squared_f32_rows4,
        dot_u8_i8_rows4: None,
        binary_dot_planes_rows: scalar::binary_dot_planes_rows,
    }
}
