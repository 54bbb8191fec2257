//! AVX2 kernels (x86_64): AVX2 + FMA + F16C, plus POPCNT for the bit kernels.
//!
//! Same shapes as `avx512.rs` with 256-bit registers. AVX2 has no cheap masked byte loads,
//! so the last few elements (fewer than one register) go through a short scalar loop.
//! Integers are widened to i16 and multiplied with `vpmaddwd`, never `vpmaddubsw`, which
//! saturates to i16 (255 * -128 * 2 does not fit) and would break exactness.
//!
//! The kernels are safe `#[target_feature]` functions; the only thing their callers must
//! guarantee is that the CPU supports the features, which `kernels_avx2` documents and
//! `Kernels::for_level` checks.

use core::arch::x86_64::{
    __m128i, __m256, __m256i, _mm256_add_epi32, _mm256_add_ps, _mm256_castps256_ps128,
    _mm256_castsi256_si128, _mm256_cvtepi32_ps, _mm256_cvtepi8_epi16, _mm256_cvtepi8_epi32,
    _mm256_cvtepu8_epi16, _mm256_cvtepu8_epi32, _mm256_cvtph_ps, _mm256_extractf128_ps,
    _mm256_extracti128_si256, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_madd_epi16,
    _mm256_setzero_ps, _mm256_setzero_si256, _mm256_sub_epi16, _mm256_sub_ps, _mm_add_epi32,
    _mm_add_ps, _mm_add_ss, _mm_cvtsi128_si32, _mm_cvtss_f32, _mm_loadl_epi64, _mm_loadu_si128,
    _mm_movehl_ps, _mm_shuffle_epi32, _mm_shuffle_ps,
};

use half::f16;

use crate::{i8_as_u8, Kernels, SimdLevel};

/// Length both inputs share; a mismatch is a caller bug caught in debug builds.
#[inline]
fn common_length(a_length: usize, b_length: usize) -> usize {
    debug_assert_eq!(a_length, b_length, "kernel inputs must have equal length");
    a_length.min(b_length)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn horizontal_sum_f32(vector: __m256) -> f32 {
    let quarter = _mm_add_ps(
        _mm256_castps256_ps128(vector),
        _mm256_extractf128_ps::<1>(vector),
    );
    let eighth = _mm_add_ps(quarter, _mm_movehl_ps(quarter, quarter));
    _mm_cvtss_f32(_mm_add_ss(eighth, _mm_shuffle_ps::<0b01>(eighth, eighth)))
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn horizontal_sum_i32(vector: __m256i) -> i32 {
    let quarter: __m128i = _mm_add_epi32(
        _mm256_castsi256_si128(vector),
        _mm256_extracti128_si256::<1>(vector),
    );
    let eighth = _mm_add_epi32(quarter, _mm_shuffle_epi32::<0b01_00_11_10>(quarter));
    _mm_cvtsi128_si32(_mm_add_epi32(
        eighth,
        _mm_shuffle_epi32::<0b10_11_00_01>(eighth),
    ))
}

// ---------------------------------------------------------------------------------------------
// Floating-point kernels: one generic loop, element types widened to 8 f32 lanes.
// ---------------------------------------------------------------------------------------------

/// Element types that widen to 8 f32 lanes.
trait Widen8: Copy {
    /// Loads 8 elements and converts them to f32.
    ///
    /// # Safety
    /// `pointer` is valid for reading 8 elements; the CPU supports AVX2, FMA and F16C.
    unsafe fn load8(pointer: *const Self) -> __m256;

    /// One element as f32 (for the tail).
    fn widen(self) -> f32;
}

impl Widen8 for f32 {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8(pointer: *const Self) -> __m256 {
        // SAFETY: the caller guarantees 8 readable f32 at `pointer`.
        unsafe { _mm256_loadu_ps(pointer) }
    }

    #[inline]
    fn widen(self) -> f32 {
        self
    }
}

impl Widen8 for f16 {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8(pointer: *const Self) -> __m256 {
        // SAFETY: `f16` is a transparent u16, so 8 of them are 16 readable bytes.
        _mm256_cvtph_ps(unsafe { _mm_loadu_si128(pointer.cast()) })
    }

    #[inline]
    fn widen(self) -> f32 {
        self.to_f32()
    }
}

impl Widen8 for i8 {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8(pointer: *const Self) -> __m256 {
        // SAFETY: the caller guarantees 8 readable bytes (vmovq reads exactly 8).
        let bytes = unsafe { _mm_loadl_epi64(pointer.cast()) };
        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes))
    }

    #[inline]
    fn widen(self) -> f32 {
        f32::from(self)
    }
}

impl Widen8 for u8 {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8(pointer: *const Self) -> __m256 {
        // SAFETY: the caller guarantees 8 readable bytes (vmovq reads exactly 8).
        let bytes = unsafe { _mm_loadl_epi64(pointer.cast()) };
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes))
    }

    #[inline]
    fn widen(self) -> f32 {
        f32::from(self)
    }
}

/// `sum + left * right`, or `sum + (left - right)^2` when `SQUARED_DIFFERENCE`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn accumulate<const SQUARED_DIFFERENCE: bool>(left: __m256, right: __m256, sum: __m256) -> __m256 {
    if SQUARED_DIFFERENCE {
        let difference = _mm256_sub_ps(left, right);
        _mm256_fmadd_ps(difference, difference, sum)
    } else {
        _mm256_fmadd_ps(left, right, sum)
    }
}

/// Scalar form of `accumulate` for the tail.
#[inline]
fn accumulate_scalar<const SQUARED_DIFFERENCE: bool>(left: f32, right: f32, sum: f32) -> f32 {
    if SQUARED_DIFFERENCE {
        let difference = left - right;
        sum + difference * difference
    } else {
        sum + left * right
    }
}

/// For each of `ROW_COUNT` left inputs, the sum over positions of `left * right` (or the
/// squared difference). Each left input goes through the same operations whatever
/// `ROW_COUNT` is, so the multi-row forms equal the single-row form bit for bit.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn sum_terms<L: Widen8, R: Widen8, const ROW_COUNT: usize, const SQUARED_DIFFERENCE: bool>(
    left: [&[L]; ROW_COUNT],
    right: &[R],
) -> [f32; ROW_COUNT] {
    let length = left
        .iter()
        .fold(right.len(), |length, row| common_length(row.len(), length));
    let left_pointers = left.map(<[L]>::as_ptr);
    let right_pointer = right.as_ptr();
    let mut sums = [[_mm256_setzero_ps(); 4]; ROW_COUNT];
    let mut index = 0;
    // 768-d f32, one row: 24 iterations of 8 loads + 4 FMAs (4 chains hide FMA latency);
    // 6 KiB read, ~100 cycles from L1 (2 loads per cycle), memory-bound beyond L2.
    while index + 32 <= length {
        for unroll in 0..4 {
            let offset = index + 8 * unroll;
            // SAFETY: offset + 8 <= length, which is at most the length of every input.
            let right_vector = unsafe { R::load8(right_pointer.add(offset)) };
            for (row_sums, &pointer) in sums.iter_mut().zip(&left_pointers) {
                // SAFETY: as above.
                let left_vector = unsafe { L::load8(pointer.add(offset)) };
                row_sums[unroll] =
                    accumulate::<SQUARED_DIFFERENCE>(left_vector, right_vector, row_sums[unroll]);
            }
        }
        index += 32;
    }
    while index + 8 <= length {
        // SAFETY: index + 8 <= length, which is at most the length of every input.
        let right_vector = unsafe { R::load8(right_pointer.add(index)) };
        for (row_sums, &pointer) in sums.iter_mut().zip(&left_pointers) {
            // SAFETY: as above.
            let left_vector = unsafe { L::load8(pointer.add(index)) };
            row_sums[0] = accumulate::<SQUARED_DIFFERENCE>(left_vector, right_vector, row_sums[0]);
        }
        index += 8;
    }
    let mut results = [0.0f32; ROW_COUNT];
    for ((result, row_sums), row) in results.iter_mut().zip(&sums).zip(&left) {
        let [s0, s1, s2, s3] = *row_sums;
        let mut tail_sum = 0.0f32;
        for (&x, &y) in row[index..length].iter().zip(&right[index..length]) {
            tail_sum = accumulate_scalar::<SQUARED_DIFFERENCE>(x.widen(), y.widen(), tail_sum);
        }
        let vector_sum = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
        *result = horizontal_sum_f32(vector_sum) + tail_sum;
    }
    results
}

#[target_feature(enable = "avx2,fma,f16c")]
fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    sum_terms::<f32, f32, 1, false>([a], b)[0]
}

#[target_feature(enable = "avx2,fma,f16c")]
fn l2_squared_f32(a: &[f32], b: &[f32]) -> f32 {
    sum_terms::<f32, f32, 1, true>([a], b)[0]
}

#[target_feature(enable = "avx2,fma,f16c")]
fn norm_squared_f32(a: &[f32]) -> f32 {
    sum_terms::<f32, f32, 1, false>([a], a)[0]
}

#[target_feature(enable = "avx2,fma,f16c")]
fn dot_f32_rows4(left: [&[f32]; 4], right: &[f32]) -> [f32; 4] {
    // Two rows at a time: 2 x 4 accumulators + loads fit the 16 ymm registers.
    let [r0, r1] = sum_terms::<f32, f32, 2, false>([left[0], left[1]], right);
    let [r2, r3] = sum_terms::<f32, f32, 2, false>([left[2], left[3]], right);
    [r0, r1, r2, r3]
}

#[target_feature(enable = "avx2,fma,f16c")]
fn l2_squared_f32_rows4(left: [&[f32]; 4], right: &[f32]) -> [f32; 4] {
    let [r0, r1] = sum_terms::<f32, f32, 2, true>([left[0], left[1]], right);
    let [r2, r3] = sum_terms::<f32, f32, 2, true>([left[2], left[3]], right);
    [r0, r1, r2, r3]
}

#[target_feature(enable = "avx2,fma,f16c")]
fn dot_f16(a: &[f16], b: &[f16]) -> f32 {
    sum_terms::<f16, f16, 1, false>([a], b)[0]
}

#[target_feature(enable = "avx2,fma,f16c")]
fn l2_squared_f16(a: &[f16], b: &[f16]) -> f32 {
    sum_terms::<f16, f16, 1, true>([a], b)[0]
}

#[target_feature(enable = "avx2,fma,f16c")]
fn dot_f32_f16(a: &[f32], b: &[f16]) -> f32 {
    sum_terms::<f32, f16, 1, false>([a], b)[0]
}

#[target_feature(enable = "avx2,fma,f16c")]
fn l2_squared_f32_f16(a: &[f32], b: &[f16]) -> f32 {
    sum_terms::<f32, f16, 1, true>([a], b)[0]
}

#[target_feature(enable = "avx2,fma,f16c")]
fn dot_f32_i8(a: &[f32], b: &[i8]) -> f32 {
    sum_terms::<f32, i8, 1, false>([a], b)[0]
}

#[target_feature(enable = "avx2,fma,f16c")]
fn dot_f32_u8(a: &[f32], b: &[u8]) -> f32 {
    sum_terms::<f32, u8, 1, false>([a], b)[0]
}

// ---------------------------------------------------------------------------------------------
// Integer kernels: widen 16 bytes to i16, vpmaddwd pairs into i32. Exact (no saturation).
// ---------------------------------------------------------------------------------------------

// Byte-pair reductions sharing one loop shape (the `KIND` parameter below).
/// i8 x i8 products.
const SIGNED_DOT: u8 = 0;
/// u8 x i8 products.
const UNSIGNED_SIGNED_DOT: u8 = 1;
/// (i8 - i8)^2.
const SIGNED_SQUARED_DIFFERENCE: u8 = 2;

/// 16 byte pairs (already widened to i16) reduced in pairs into 8 i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn byte_pairs_to_i32<const KIND: u8>(a_wide: __m256i, b_wide: __m256i) -> __m256i {
    if KIND == SIGNED_SQUARED_DIFFERENCE {
        let difference = _mm256_sub_epi16(a_wide, b_wide);
        _mm256_madd_epi16(difference, difference)
    } else {
        _mm256_madd_epi16(a_wide, b_wide)
    }
}

/// Loads 16 bytes of each input and widens them to i16 (`a` zero-extended for u8 x i8).
///
/// # Safety
/// 16 bytes are readable at both pointers; the CPU supports AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load16_widened<const KIND: u8>(a: *const u8, b: *const u8) -> (__m256i, __m256i) {
    // SAFETY: the caller guarantees 16 readable bytes at both pointers.
    let (a_bytes, b_bytes) = unsafe { (_mm_loadu_si128(a.cast()), _mm_loadu_si128(b.cast())) };
    let a_wide = if KIND == UNSIGNED_SIGNED_DOT {
        _mm256_cvtepu8_epi16(a_bytes)
    } else {
        _mm256_cvtepi8_epi16(a_bytes)
    };
    (a_wide, _mm256_cvtepi8_epi16(b_bytes))
}

/// Exact scalar term for the tail.
#[inline]
fn byte_pair_scalar<const KIND: u8>(a: u8, b: u8) -> i32 {
    let b = i32::from(b.cast_signed());
    match KIND {
        UNSIGNED_SIGNED_DOT => i32::from(a) * b,
        SIGNED_SQUARED_DIFFERENCE => {
            let difference = i32::from(a.cast_signed()) - b;
            difference * difference
        }
        _ => i32::from(a.cast_signed()) * b,
    }
}

/// Sum over positions of the byte-pair term (wrapping i32: exact below
/// `MAX_INTEGER_KERNEL_DIMENSION`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn sum_byte_pairs<const KIND: u8>(a: &[u8], b: &[u8]) -> i32 {
    let length = common_length(a.len(), b.len());
    let (a_pointer, b_pointer) = (a.as_ptr(), b.as_ptr());
    let mut sums = [_mm256_setzero_si256(); 2];
    let mut index = 0;
    // 768-d: 24 iterations of 4 loads, 4 widening moves, 2 vpmaddwd, 2 adds; 1.5 KiB read.
    while index + 32 <= length {
        for (half_index, sum) in sums.iter_mut().enumerate() {
            let offset = index + 16 * half_index;
            // SAFETY: offset + 16 <= length, the readable length of both inputs.
            let (a_wide, b_wide) =
                unsafe { load16_widened::<KIND>(a_pointer.add(offset), b_pointer.add(offset)) };
            *sum = _mm256_add_epi32(*sum, byte_pairs_to_i32::<KIND>(a_wide, b_wide));
        }
        index += 32;
    }
    if index + 16 <= length {
        // SAFETY: index + 16 <= length, the readable length of both inputs.
        let (a_wide, b_wide) =
            unsafe { load16_widened::<KIND>(a_pointer.add(index), b_pointer.add(index)) };
        sums[0] = _mm256_add_epi32(sums[0], byte_pairs_to_i32::<KIND>(a_wide, b_wide));
        index += 16;
    }
    let tail_sum = a[index..length]
        .iter()
        .zip(&b[index..length])
        .map(|(&x, &y)| byte_pair_scalar::<KIND>(x, y))
        .fold(0i32, i32::wrapping_add);
    horizontal_sum_i32(_mm256_add_epi32(sums[0], sums[1])).wrapping_add(tail_sum)
}

#[target_feature(enable = "avx2,fma,f16c")]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    sum_byte_pairs::<SIGNED_DOT>(i8_as_u8(a), i8_as_u8(b))
}

#[target_feature(enable = "avx2,fma,f16c")]
fn dot_u8_i8(a: &[u8], b: &[i8]) -> i32 {
    sum_byte_pairs::<UNSIGNED_SIGNED_DOT>(a, i8_as_u8(b))
}

#[target_feature(enable = "avx2,fma,f16c")]
fn l2_squared_i8(a: &[i8], b: &[i8]) -> u32 {
    // The i32 lanes wrap exactly like u32 would; the true sum fits u32 (see the limit).
    sum_byte_pairs::<SIGNED_SQUARED_DIFFERENCE>(i8_as_u8(a), i8_as_u8(b)).cast_unsigned()
}

// ---------------------------------------------------------------------------------------------
// Population counts with the scalar POPCNT instruction (also used by the AVX-512 levels on
// CPUs without VPOPCNTDQ).
// ---------------------------------------------------------------------------------------------

#[inline]
#[target_feature(enable = "popcnt")]
fn popcount_combined<const XOR: bool>(a: &[u64], b: &[u64]) -> u32 {
    let length = common_length(a.len(), b.len());
    let (a_blocks, a_tail) = a[..length].as_chunks::<4>();
    let (b_blocks, b_tail) = b[..length].as_chunks::<4>();
    let combine = |x: u64, y: u64| if XOR { x ^ y } else { x & y };
    let mut counts = [0u32; 4];
    // 1536-bit codes are 24 words: 6 iterations of 8 loads, 4 xor/and, 4 popcnt (1/cycle).
    for (a_block, b_block) in a_blocks.iter().zip(b_blocks) {
        for lane in 0..4 {
            counts[lane] += combine(a_block[lane], b_block[lane]).count_ones();
        }
    }
    let tail_count: u32 = a_tail
        .iter()
        .zip(b_tail)
        .map(|(&x, &y)| combine(x, y).count_ones())
        .sum();
    counts.iter().sum::<u32>() + tail_count
}

#[target_feature(enable = "popcnt")]
fn hamming_u64(a: &[u64], b: &[u64]) -> u32 {
    popcount_combined::<true>(a, b)
}

#[target_feature(enable = "popcnt")]
fn and_popcount_u64(a: &[u64], b: &[u64]) -> u32 {
    popcount_combined::<false>(a, b)
}

/// The scalar loop with the POPCNT instruction.
#[target_feature(enable = "popcnt")]
fn binary_dot_planes_rows(planes: &[u64], bits: u32, codes: &[u64], out: &mut [u32]) {
    crate::scalar::binary_dot_planes_rows(planes, bits, codes, out);
}

// ---------------------------------------------------------------------------------------------
// Safe entry points and the table.
// ---------------------------------------------------------------------------------------------

/// Defines a safe wrapper around a `#[target_feature]` kernel. Wrappers are private to this
/// module and only reachable through the table built by `kernels_avx2`, whose caller
/// guarantees the features.
macro_rules! entry {
    ($wrapper:ident => $kernel:ident, ($($argument:ident: $type:ty),*) -> $result:ty) => {
        fn $wrapper($($argument: $type),*) -> $result {
            debug_assert!(SimdLevel::Avx2.is_supported());
            // SAFETY: reachable only through a table built by `kernels_avx2`, whose caller
            // checked that the CPU supports the AVX2 level (see `Kernels::for_level`).
            unsafe { $kernel($($argument),*) }
        }
    };
}

entry!(entry_dot_f32 => dot_f32, (a: &[f32], b: &[f32]) -> f32);
entry!(entry_l2_squared_f32 => l2_squared_f32, (a: &[f32], b: &[f32]) -> f32);
entry!(entry_norm_squared_f32 => norm_squared_f32, (a: &[f32]) -> f32);
entry!(entry_dot_f32_rows4 => dot_f32_rows4, (left: [&[f32]; 4], right: &[f32]) -> [f32; 4]);
entry!(entry_l2_squared_f32_rows4 => l2_squared_f32_rows4, (left: [&[f32]; 4], right: &[f32]) -> [f32; 4]);
entry!(entry_dot_f16 => dot_f16, (a: &[f16], b: &[f16]) -> f32);
entry!(entry_l2_squared_f16 => l2_squared_f16, (a: &[f16], b: &[f16]) -> f32);
entry!(entry_dot_f32_f16 => dot_f32_f16, (a: &[f32], b: &[f16]) -> f32);
entry!(entry_l2_squared_f32_f16 => l2_squared_f32_f16, (a: &[f32], b: &[f16]) -> f32);
entry!(entry_dot_f32_i8 => dot_f32_i8, (a: &[f32], b: &[i8]) -> f32);
entry!(entry_dot_f32_u8 => dot_f32_u8, (a: &[f32], b: &[u8]) -> f32);
entry!(entry_dot_i8 => dot_i8, (a: &[i8], b: &[i8]) -> i32);
entry!(entry_l2_squared_i8 => l2_squared_i8, (a: &[i8], b: &[i8]) -> u32);
entry!(entry_dot_u8_i8 => dot_u8_i8, (a: &[u8], b: &[i8]) -> i32);
entry!(entry_hamming_u64 => hamming_u64, (a: &[u64], b: &[u64]) -> u32);
entry!(entry_and_popcount_u64 => and_popcount_u64, (a: &[u64], b: &[u64]) -> u32);
entry!(entry_binary_dot_planes_rows => binary_dot_planes_rows, (planes: &[u64], bits: u32, codes: &[u64], out: &mut [u32]) -> ());

/// The AVX2 table.
///
/// # Safety
/// The CPU must support `SimdLevel::Avx2` (AVX2, FMA, F16C and POPCNT).
pub(crate) unsafe fn kernels_avx2() -> Kernels {
    Kernels {
        level: SimdLevel::Avx2,
        dot_f32: entry_dot_f32,
        l2_squared_f32: entry_l2_squared_f32,
        norm_squared_f32: entry_norm_squared_f32,
        dot_f16: entry_dot_f16,
        l2_squared_f16: entry_l2_squared_f16,
        dot_f32_f16: entry_dot_f32_f16,
        l2_squared_f32_f16: entry_l2_squared_f32_f16,
        dot_i8: entry_dot_i8,
        l2_squared_i8: entry_l2_squared_i8,
        dot_u8_i8: entry_dot_u8_i8,
        dot_f32_i8: entry_dot_f32_i8,
        dot_f32_u8: entry_dot_f32_u8,
        hamming_u64: entry_hamming_u64,
        and_popcount_u64: entry_and_popcount_u64,
        dot_f32_rows4: entry_dot_f32_rows4,
        l2_squared_f32_rows4: entry_l2_squared_f32_rows4,
        dot_u8_i8_rows4: None,
        binary_dot_planes_rows: entry_binary_dot_planes_rows,
    }
}
