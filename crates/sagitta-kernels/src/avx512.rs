//! AVX-512 kernels (x86_64), two levels:
//!
//! - `Avx512`: AVX-512 F/BW/VL. Integers are widened to i16 and multiplied with `vpmaddwd`.
//! - `Avx512Vnni`: adds VNNI; `vpdpbusd` multiplies 64 u8 x i8 pairs per instruction.
//!
//! Population counts use VPOPCNTDQ when the CPU has it (chosen when the table is built),
//! otherwise the scalar `popcnt` loop from `avx2.rs`.
//!
//! Tails are handled with masked loads (masked-off lanes are neither read nor faulted on),
//! never with scalar loops, so every length runs the same instruction sequence shape.
//!
//! The kernels are safe `#[target_feature]` functions; the only thing their callers must
//! guarantee is that the CPU supports the features, which `kernels_avx512` documents and
//! `Kernels::for_level` checks.

use core::arch::x86_64::{
    __m512, __m512i, __mmask16, _mm256_loadu_si256, _mm256_maskz_loadu_epi16,
    _mm256_maskz_loadu_epi8, _mm512_add_epi32, _mm512_add_epi64, _mm512_add_ps, _mm512_and_si512,
    _mm512_cvtepi32_ps, _mm512_cvtepi8_epi16, _mm512_cvtepi8_epi32, _mm512_cvtepu8_epi16,
    _mm512_cvtepu8_epi32, _mm512_cvtph_ps, _mm512_dpbusd_epi32, _mm512_dpwssd_epi32,
    _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_loadu_si512, _mm512_madd_epi16,
    _mm512_maskz_loadu_epi64, _mm512_maskz_loadu_epi8, _mm512_maskz_loadu_ps, _mm512_max_epu8,
    _mm512_min_epu8, _mm512_popcnt_epi64, _mm512_reduce_add_epi32, _mm512_reduce_add_epi64,
    _mm512_reduce_add_ps, _mm512_set1_epi8, _mm512_setzero_ps, _mm512_setzero_si512,
    _mm512_sll_epi64, _mm512_sub_epi16, _mm512_sub_epi8, _mm512_sub_ps, _mm512_unpackhi_epi8,
    _mm512_unpacklo_epi8, _mm512_xor_si512, _mm_cvtsi32_si128, _mm_loadu_si128,
    _mm_maskz_loadu_epi8,
};

use half::f16;

use crate::{i8_as_u8, Kernels, SimdLevel};

/// Length both inputs share; a mismatch is a caller bug caught in debug builds.
#[inline]
fn common_length(a_length: usize, b_length: usize) -> usize {
    debug_assert_eq!(a_length, b_length, "kernel inputs must have equal length");
    a_length.min(b_length)
}

/// Mask with the low `count` bits set (`count < 16`).
#[inline]
fn low_bits_mask16(count: usize) -> u16 {
    debug_assert!(count < 16);
    ((1u32 << count) - 1) as u16
}

/// Mask with the low `count` bits set (`count < 32`).
#[inline]
fn low_bits_mask32(count: usize) -> u32 {
    debug_assert!(count < 32);
    (1u32 << count) - 1
}

/// Mask with the low `count` bits set (`count < 64`).
#[inline]
fn low_bits_mask64(count: usize) -> u64 {
    debug_assert!(count < 64);
    (1u64 << count) - 1
}

/// Mask with the low `count` bits set (`count < 8`).
#[inline]
fn low_bits_mask8(count: usize) -> u8 {
    debug_assert!(count < 8);
    ((1u32 << count) - 1) as u8
}

// ---------------------------------------------------------------------------------------------
// Floating-point kernels: one generic loop, element types widened to 16 f32 lanes.
// ---------------------------------------------------------------------------------------------

/// Element types that widen to 16 f32 lanes.
trait Widen16: Copy {
    /// Loads 16 elements and converts them to f32.
    ///
    /// # Safety
    /// `pointer` is valid for reading 16 elements; the CPU supports AVX-512 F/BW/VL.
    unsafe fn load16(pointer: *const Self) -> __m512;

    /// Loads the elements whose mask bit is set (others read as 0.0) and converts them.
    ///
    /// # Safety
    /// Every element with its mask bit set is valid for reading; the CPU supports
    /// AVX-512 F/BW/VL.
    unsafe fn load16_masked(pointer: *const Self, mask: __mmask16) -> __m512;
}

impl Widen16 for f32 {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn load16(pointer: *const Self) -> __m512 {
        // SAFETY: the caller guarantees 16 readable f32 at `pointer`.
        unsafe { _mm512_loadu_ps(pointer) }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn load16_masked(pointer: *const Self, mask: __mmask16) -> __m512 {
        // SAFETY: masked-off lanes are not accessed; the caller guarantees the others.
        unsafe { _mm512_maskz_loadu_ps(mask, pointer) }
    }
}

impl Widen16 for f16 {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn load16(pointer: *const Self) -> __m512 {
        // SAFETY: `f16` is a transparent u16, so 16 of them are 32 readable bytes.
        _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(pointer.cast()) })
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn load16_masked(pointer: *const Self, mask: __mmask16) -> __m512 {
        // SAFETY: masked-off lanes are not accessed; +0.0 in f16 is all-zero bits.
        _mm512_cvtph_ps(unsafe { _mm256_maskz_loadu_epi16(mask, pointer.cast()) })
    }
}

impl Widen16 for i8 {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn load16(pointer: *const Self) -> __m512 {
        // SAFETY: the caller guarantees 16 readable bytes at `pointer`.
        let bytes = unsafe { _mm_loadu_si128(pointer.cast()) };
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes))
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn load16_masked(pointer: *const Self, mask: __mmask16) -> __m512 {
        // SAFETY: masked-off lanes are not accessed.
        let bytes = unsafe { _mm_maskz_loadu_epi8(mask, pointer) };
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes))
    }
}

impl Widen16 for u8 {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn load16(pointer: *const Self) -> __m512 {
        // SAFETY: the caller guarantees 16 readable bytes at `pointer`.
        let bytes = unsafe { _mm_loadu_si128(pointer.cast()) };
        _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes))
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn load16_masked(pointer: *const Self, mask: __mmask16) -> __m512 {
        // SAFETY: masked-off lanes are not accessed.
        let bytes = unsafe { _mm_maskz_loadu_epi8(mask, pointer.cast()) };
        _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes))
    }
}

/// `sum + left * right`, or `sum + (left - right)^2` when `SQUARED_DIFFERENCE`.
#[inline]
#[target_feature(enable = "avx512f")]
fn accumulate<const SQUARED_DIFFERENCE: bool>(left: __m512, right: __m512, sum: __m512) -> __m512 {
    if SQUARED_DIFFERENCE {
        let difference = _mm512_sub_ps(left, right);
        _mm512_fmadd_ps(difference, difference, sum)
    } else {
        _mm512_fmadd_ps(left, right, sum)
    }
}

/// For each of `ROW_COUNT` left inputs, the sum over positions of `left * right` (or the
/// squared difference). Each left input goes through exactly the same operations whatever
/// `ROW_COUNT` is, so the multi-row forms equal the single-row form bit for bit; sharing the
/// right-hand loads across rows halves the load traffic of the many-queries loops.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn sum_terms<L: Widen16, R: Widen16, const ROW_COUNT: usize, const SQUARED_DIFFERENCE: bool>(
    left: [&[L]; ROW_COUNT],
    right: &[R],
) -> [f32; ROW_COUNT] {
    let length = left
        .iter()
        .fold(right.len(), |length, row| common_length(row.len(), length));
    let left_pointers = left.map(<[L]>::as_ptr);
    let right_pointer = right.as_ptr();
    let mut sums = [[_mm512_setzero_ps(); 4]; ROW_COUNT];
    let mut index = 0;
    // 768-d f32, one row: 12 iterations of 8 loads + 4 FMAs (4 independent chains hide the
    // 4-cycle FMA latency); 6 KiB read, ~50 cycles from L1, memory-bound beyond L2.
    while index + 64 <= length {
        for unroll in 0..4 {
            let offset = index + 16 * unroll;
            // SAFETY: offset + 16 <= length, which is at most the length of every input.
            let right_vector = unsafe { R::load16(right_pointer.add(offset)) };
            for (row_sums, &pointer) in sums.iter_mut().zip(&left_pointers) {
                // SAFETY: as above.
                let left_vector = unsafe { L::load16(pointer.add(offset)) };
                row_sums[unroll] =
                    accumulate::<SQUARED_DIFFERENCE>(left_vector, right_vector, row_sums[unroll]);
            }
        }
        index += 64;
    }
    while index + 16 <= length {
        // SAFETY: index + 16 <= length, which is at most the length of every input.
        let right_vector = unsafe { R::load16(right_pointer.add(index)) };
        for (row_sums, &pointer) in sums.iter_mut().zip(&left_pointers) {
            // SAFETY: as above.
            let left_vector = unsafe { L::load16(pointer.add(index)) };
            row_sums[0] = accumulate::<SQUARED_DIFFERENCE>(left_vector, right_vector, row_sums[0]);
        }
        index += 16;
    }
    if index < length {
        let mask = low_bits_mask16(length - index);
        // SAFETY: only the length - index lanes left in bounds are enabled in the mask.
        let right_vector = unsafe { R::load16_masked(right_pointer.add(index), mask) };
        for (row_sums, &pointer) in sums.iter_mut().zip(&left_pointers) {
            // SAFETY: as above.
            let left_vector = unsafe { L::load16_masked(pointer.add(index), mask) };
            row_sums[1] = accumulate::<SQUARED_DIFFERENCE>(left_vector, right_vector, row_sums[1]);
        }
    }
    sums.map(|[s0, s1, s2, s3]| {
        _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)))
    })
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    sum_terms::<f32, f32, 1, false>([a], b)[0]
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn l2_squared_f32(a: &[f32], b: &[f32]) -> f32 {
    sum_terms::<f32, f32, 1, true>([a], b)[0]
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn norm_squared_f32(a: &[f32]) -> f32 {
    sum_terms::<f32, f32, 1, false>([a], a)[0]
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn dot_f32_rows4(left: [&[f32]; 4], right: &[f32]) -> [f32; 4] {
    // 4 rows x 4 accumulators = 16 zmm, plus loads: fits the 32 zmm registers.
    sum_terms::<f32, f32, 4, false>(left, right)
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn l2_squared_f32_rows4(left: [&[f32]; 4], right: &[f32]) -> [f32; 4] {
    sum_terms::<f32, f32, 4, true>(left, right)
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn dot_f16(a: &[f16], b: &[f16]) -> f32 {
    sum_terms::<f16, f16, 1, false>([a], b)[0]
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn l2_squared_f16(a: &[f16], b: &[f16]) -> f32 {
    sum_terms::<f16, f16, 1, true>([a], b)[0]
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn dot_f32_f16(a: &[f32], b: &[f16]) -> f32 {
    sum_terms::<f32, f16, 1, false>([a], b)[0]
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn l2_squared_f32_f16(a: &[f32], b: &[f16]) -> f32 {
    sum_terms::<f32, f16, 1, true>([a], b)[0]
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn dot_f32_i8(a: &[f32], b: &[i8]) -> f32 {
    sum_terms::<f32, i8, 1, false>([a], b)[0]
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn dot_f32_u8(a: &[f32], b: &[u8]) -> f32 {
    sum_terms::<f32, u8, 1, false>([a], b)[0]
}

// ---------------------------------------------------------------------------------------------
// Integer kernels without VNNI: widen bytes to i16, multiply pairs into i32 with vpmaddwd.
// Products are at most 128 * 128 (or 255 * 128), so pair sums never saturate: exact.
// ---------------------------------------------------------------------------------------------

// Byte-pair reductions sharing one loop shape (the `KIND` parameter below).
/// i8 x i8 products.
const SIGNED_DOT: u8 = 0;
/// u8 x i8 products.
const UNSIGNED_SIGNED_DOT: u8 = 1;
/// (i8 - i8)^2.
const SIGNED_SQUARED_DIFFERENCE: u8 = 2;

/// 32 bytes of products or squared differences, summed in pairs into 16 i32 lanes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn byte_pairs_to_i32<const KIND: u8>(a_bytes: __m512i, b_bytes: __m512i) -> __m512i {
    // `a_bytes` / `b_bytes` hold 32 bytes each, already widened to i16.
    if KIND == SIGNED_SQUARED_DIFFERENCE {
        let difference = _mm512_sub_epi16(a_bytes, b_bytes);
        _mm512_madd_epi16(difference, difference)
    } else {
        _mm512_madd_epi16(a_bytes, b_bytes)
    }
}

/// Widens 32 bytes to i16 (zero-extending when `A_UNSIGNED`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn widen32<const A_UNSIGNED: bool>(bytes: core::arch::x86_64::__m256i) -> __m512i {
    if A_UNSIGNED {
        _mm512_cvtepu8_epi16(bytes)
    } else {
        _mm512_cvtepi8_epi16(bytes)
    }
}

/// Sum over positions of the byte-pair term; `a` is read as u8 when `KIND` is
/// `UnsignedSignedDot`, as i8 otherwise. Wrapping i32 arithmetic: exact below
/// `MAX_INTEGER_KERNEL_DIMENSION`, and equal to the scalar result modulo 2^32 above it.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn sum_byte_pairs<const KIND: u8>(a: &[u8], b: &[u8]) -> i32 {
    let length = common_length(a.len(), b.len());
    let (a, b) = (a.as_ptr(), b.as_ptr());
    let a_unsigned = KIND == UNSIGNED_SIGNED_DOT;
    let mut sums = [_mm512_setzero_si512(); 2];
    let mut index = 0;
    // 768-d: 12 iterations of 4 widening moves + 2 vpmaddwd + 2 adds; 1.5 KiB read.
    while index + 64 <= length {
        for (half_index, sum) in sums.iter_mut().enumerate() {
            let offset = index + 32 * half_index;
            // SAFETY: offset + 32 <= length, the readable length of both inputs.
            let (a_half, b_half) = unsafe {
                (
                    _mm256_loadu_si256(a.add(offset).cast()),
                    _mm256_loadu_si256(b.add(offset).cast()),
                )
            };
            let (a_wide, b_wide) = if a_unsigned {
                (widen32::<true>(a_half), widen32::<false>(b_half))
            } else {
                (widen32::<false>(a_half), widen32::<false>(b_half))
            };
            *sum = _mm512_add_epi32(*sum, byte_pairs_to_i32::<KIND>(a_wide, b_wide));
        }
        index += 64;
    }
    while index < length {
        let count = (length - index).min(32);
        let mask = if count == 32 {
            u32::MAX
        } else {
            low_bits_mask32(count)
        };
        // SAFETY: only the `count` in-bounds lanes are enabled in the mask.
        let (a_half, b_half) = unsafe {
            (
                _mm256_maskz_loadu_epi8(mask, a.add(index).cast()),
                _mm256_maskz_loadu_epi8(mask, b.add(index).cast()),
            )
        };
        let (a_wide, b_wide) = if a_unsigned {
            (widen32::<true>(a_half), widen32::<false>(b_half))
        } else {
            (widen32::<false>(a_half), widen32::<false>(b_half))
        };
        sums[0] = _mm512_add_epi32(sums[0], byte_pairs_to_i32::<KIND>(a_wide, b_wide));
        index += count;
    }
    _mm512_reduce_add_epi32(_mm512_add_epi32(sums[0], sums[1]))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    sum_byte_pairs::<SIGNED_DOT>(i8_as_u8(a), i8_as_u8(b))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn dot_u8_i8(a: &[u8], b: &[i8]) -> i32 {
    sum_byte_pairs::<UNSIGNED_SIGNED_DOT>(a, i8_as_u8(b))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn l2_squared_i8(a: &[i8], b: &[i8]) -> u32 {
    // The i32 lanes wrap exactly like u32 would; the true sum fits u32 (see the limit).
    sum_byte_pairs::<SIGNED_SQUARED_DIFFERENCE>(i8_as_u8(a), i8_as_u8(b)) as u32
}

// ---------------------------------------------------------------------------------------------
// Integer kernels with VNNI.
// ---------------------------------------------------------------------------------------------

/// Loads 64 bytes, or the first `count < 64` of them (the rest read as zero).
///
/// # Safety
/// `count` bytes (64 when `count >= 64`) are readable at `pointer`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn load64_bytes(pointer: *const u8, count: usize) -> __m512i {
    if count >= 64 {
        // SAFETY: the caller guarantees 64 readable bytes.
        unsafe { _mm512_loadu_si512(pointer.cast()) }
    } else {
        // SAFETY: only the `count` readable lanes are enabled in the mask.
        unsafe { _mm512_maskz_loadu_epi8(low_bits_mask64(count), pointer.cast()) }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
fn dot_u8_i8_vnni(a: &[u8], b: &[i8]) -> i32 {
    let length = common_length(a.len(), b.len());
    let (a_pointer, b_pointer) = (a.as_ptr(), b.as_ptr().cast::<u8>());
    let mut sums = [_mm512_setzero_si512(); 4];
    let mut index = 0;
    // 768-d: 3 iterations of 8 loads + 4 vpdpbusd (64 multiply-adds each); 1.5 KiB read,
    // ~15 cycles from L1: the query stays in L1, so rows stream at memory bandwidth.
    while index + 256 <= length {
        for (unroll, sum) in sums.iter_mut().enumerate() {
            let offset = index + 64 * unroll;
            // SAFETY: offset + 64 <= length, the readable length of both inputs.
            let (a_bytes, b_bytes) = unsafe {
                (
                    load64_bytes(a_pointer.add(offset), 64),
                    load64_bytes(b_pointer.add(offset), 64),
                )
            };
            *sum = _mm512_dpbusd_epi32(*sum, a_bytes, b_bytes);
        }
        index += 256;
    }
    while index < length {
        let count = length - index;
        // SAFETY: `count` bytes from `index` are in bounds of both inputs.
        let (a_bytes, b_bytes) = unsafe {
            (
                load64_bytes(a_pointer.add(index), count),
                load64_bytes(b_pointer.add(index), count),
            )
        };
        sums[0] = _mm512_dpbusd_epi32(sums[0], a_bytes, b_bytes);
        index += count.min(64);
    }
    _mm512_reduce_add_epi32(_mm512_add_epi32(
        _mm512_add_epi32(sums[0], sums[1]),
        _mm512_add_epi32(sums[2], sums[3]),
    ))
}

/// One u8 query against four i8 rows: each query load feeds four `vpdpbusd`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
fn dot_u8_i8_rows4_vnni(query: &[u8], rows: [&[i8]; 4]) -> [i32; 4] {
    let length = rows
        .iter()
        .fold(query.len(), |length, row| common_length(row.len(), length));
    let query_pointer = query.as_ptr();
    let row_pointers = rows.map(|row| row.as_ptr().cast::<u8>());
    let mut sums = [_mm512_setzero_si512(); 4];
    let mut index = 0;
    // 768-d: 12 iterations of 5 loads + 4 vpdpbusd; 3 KiB of rows read per call.
    while index < length {
        let count = length - index;
        // SAFETY: `count` bytes from `index` are in bounds of the query and every row.
        let query_bytes = unsafe { load64_bytes(query_pointer.add(index), count) };
        for (sum, &pointer) in sums.iter_mut().zip(&row_pointers) {
            // SAFETY: as above.
            let row_bytes = unsafe { load64_bytes(pointer.add(index), count) };
            *sum = _mm512_dpbusd_epi32(*sum, query_bytes, row_bytes);
        }
        index += count.min(64);
    }
    sums.map(|sum| _mm512_reduce_add_epi32(sum))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
fn dot_i8_vnni(a: &[i8], b: &[i8]) -> i32 {
    // a . b = (a + 128) . b - 128 * sum(b); a xor 0x80 is a + 128 read as u8.
    let length = common_length(a.len(), b.len());
    let (a_pointer, b_pointer) = (a.as_ptr().cast::<u8>(), b.as_ptr().cast::<u8>());
    let sign_flip = _mm512_set1_epi8(i8::MIN);
    let ones = _mm512_set1_epi8(1);
    let mut products = [_mm512_setzero_si512(); 2];
    let mut b_sums = [_mm512_setzero_si512(); 2];
    let mut index = 0;
    // 768-d: 6 iterations of 4 loads + 2 xors + 4 vpdpbusd; 1.5 KiB read.
    while index + 128 <= length {
        for unroll in 0..2 {
            let offset = index + 64 * unroll;
            // SAFETY: offset + 64 <= length, the readable length of both inputs.
            let (a_bytes, b_bytes) = unsafe {
                (
                    load64_bytes(a_pointer.add(offset), 64),
                    load64_bytes(b_pointer.add(offset), 64),
                )
            };
            let a_shifted = _mm512_xor_si512(a_bytes, sign_flip);
            products[unroll] = _mm512_dpbusd_epi32(products[unroll], a_shifted, b_bytes);
            b_sums[unroll] = _mm512_dpbusd_epi32(b_sums[unroll], ones, b_bytes);
        }
        index += 128;
    }
    while index < length {
        let count = length - index;
        // SAFETY: `count` bytes from `index` are in bounds of both inputs. Masked-off lanes
        // of `b` are zero, so they add nothing to either sum.
        let (a_bytes, b_bytes) = unsafe {
            (
                load64_bytes(a_pointer.add(index), count),
                load64_bytes(b_pointer.add(index), count),
            )
        };
        let a_shifted = _mm512_xor_si512(a_bytes, sign_flip);
        products[0] = _mm512_dpbusd_epi32(products[0], a_shifted, b_bytes);
        b_sums[0] = _mm512_dpbusd_epi32(b_sums[0], ones, b_bytes);
        index += count.min(64);
    }
    let shifted_dot = _mm512_reduce_add_epi32(_mm512_add_epi32(products[0], products[1]));
    let b_sum = _mm512_reduce_add_epi32(_mm512_add_epi32(b_sums[0], b_sums[1]));
    shifted_dot.wrapping_sub(b_sum.wrapping_mul(128))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
fn l2_squared_i8_vnni(a: &[i8], b: &[i8]) -> u32 {
    // |a - b| fits u8 once both are shifted to u8 (xor 0x80 keeps the order); widen to i16
    // and square-accumulate with vpdpwssd (255^2 * 2 per lane per step: no overflow).
    let length = common_length(a.len(), b.len());
    let (a_pointer, b_pointer) = (a.as_ptr().cast::<u8>(), b.as_ptr().cast::<u8>());
    let sign_flip = _mm512_set1_epi8(i8::MIN);
    let zero = _mm512_setzero_si512();
    let mut sums = [_mm512_setzero_si512(); 2];
    let mut index = 0;
    // 768-d: 12 iterations of 2 loads, 2 xor, max, min, sub, 2 unpacks, 2 vpdpwssd.
    while index < length {
        let count = length - index;
        // SAFETY: `count` bytes from `index` are in bounds of both inputs; masked-off lanes
        // are zero in both, so their difference is zero.
        let (a_bytes, b_bytes) = unsafe {
            (
                load64_bytes(a_pointer.add(index), count),
                load64_bytes(b_pointer.add(index), count),
            )
        };
        let a_unsigned = _mm512_xor_si512(a_bytes, sign_flip);
        let b_unsigned = _mm512_xor_si512(b_bytes, sign_flip);
        let difference = _mm512_sub_epi8(
            _mm512_max_epu8(a_unsigned, b_unsigned),
            _mm512_min_epu8(a_unsigned, b_unsigned),
        );
        let low = _mm512_unpacklo_epi8(difference, zero);
        let high = _mm512_unpackhi_epi8(difference, zero);
        sums[0] = _mm512_dpwssd_epi32(sums[0], low, low);
        sums[1] = _mm512_dpwssd_epi32(sums[1], high, high);
        index += count.min(64);
    }
    _mm512_reduce_add_epi32(_mm512_add_epi32(sums[0], sums[1])) as u32
}

// ---------------------------------------------------------------------------------------------
// Population counts with VPOPCNTDQ.
// ---------------------------------------------------------------------------------------------

/// Loads 8 words, or the first `count < 8` of them (the rest read as zero).
///
/// # Safety
/// `count` words (8 when `count >= 8`) are readable at `pointer`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load8_words(pointer: *const u64, count: usize) -> __m512i {
    if count >= 8 {
        // SAFETY: the caller guarantees 8 readable words.
        unsafe { _mm512_loadu_si512(pointer.cast()) }
    } else {
        // SAFETY: only the `count` readable lanes are enabled in the mask.
        unsafe { _mm512_maskz_loadu_epi64(low_bits_mask8(count), pointer.cast()) }
    }
}

#[inline]
#[target_feature(enable = "avx512f,avx512vpopcntdq")]
fn popcount_combined<const XOR: bool>(a: &[u64], b: &[u64]) -> u32 {
    let length = common_length(a.len(), b.len());
    let (a_pointer, b_pointer) = (a.as_ptr(), b.as_ptr());
    let mut sum = _mm512_setzero_si512();
    let mut index = 0;
    // 1536-bit codes are 24 words: 3 iterations of 2 loads, 1 xor/and, 1 vpopcntq, 1 add.
    while index < length {
        let count = length - index;
        // SAFETY: `count` words from `index` are in bounds of both inputs.
        let (a_words, b_words) = unsafe {
            (
                load8_words(a_pointer.add(index), count),
                load8_words(b_pointer.add(index), count),
            )
        };
        let combined = if XOR {
            _mm512_xor_si512(a_words, b_words)
        } else {
            _mm512_and_si512(a_words, b_words)
        };
        // vpaddq has 1-cycle latency: one accumulator keeps up with the loads.
        sum = _mm512_add_epi64(sum, _mm512_popcnt_epi64(combined));
        index += count.min(8);
    }
    _mm512_reduce_add_epi64(sum) as u32
}

#[target_feature(enable = "avx512f,avx512vpopcntdq")]
fn hamming_u64_vpopcntdq(a: &[u64], b: &[u64]) -> u32 {
    popcount_combined::<true>(a, b)
}

#[target_feature(enable = "avx512f,avx512vpopcntdq")]
fn and_popcount_u64_vpopcntdq(a: &[u64], b: &[u64]) -> u32 {
    popcount_combined::<false>(a, b)
}

/// `sum_p 2^p * popcount(plane_p & code)` per code: one accumulator a code, each 8-word
/// chunk of the code loaded once and ANDed with every plane (the planes stay in L1).
#[target_feature(enable = "avx512f,avx512vpopcntdq")]
fn binary_dot_planes_rows_vpopcntdq(planes: &[u64], bits: u32, codes: &[u64], out: &mut [u32]) {
    let words = planes.len() / bits as usize;
    let planes_pointer = planes.as_ptr();
    for (code, result) in codes.chunks_exact(words).zip(out.iter_mut()) {
        let code_pointer = code.as_ptr();
        let mut sum = _mm512_setzero_si512();
        let mut index = 0;
        while index < words {
            let count = words - index;
            // SAFETY: `count` words from `index` are in bounds of the code and of each plane
            // (every plane is `words` long, plane `p` starting at `p * words`).
            let code_words = unsafe { load8_words(code_pointer.add(index), count) };
            for plane in 0..bits {
                // SAFETY: as above, plane `plane` has `count` words from `index`.
                let plane_words = unsafe {
                    load8_words(planes_pointer.add(plane as usize * words + index), count)
                };
                let counts = _mm512_popcnt_epi64(_mm512_and_si512(plane_words, code_words));
                sum = _mm512_add_epi64(
                    sum,
                    _mm512_sll_epi64(counts, _mm_cvtsi32_si128(plane as i32)),
                );
            }
            index += count.min(8);
        }
        *result = _mm512_reduce_add_epi64(sum) as u32;
    }
}

// ---------------------------------------------------------------------------------------------
// Safe entry points and the tables.
// ---------------------------------------------------------------------------------------------

/// Defines a safe wrapper around a `#[target_feature]` kernel. Wrappers are private to this
/// module and only reachable through the tables built by `kernels_avx512`, whose caller
/// guarantees the features.
macro_rules! entry {
    ($wrapper:ident => $kernel:ident, $level:expr, ($($argument:ident: $type:ty),*) -> $result:ty) => {
        fn $wrapper($($argument: $type),*) -> $result {
            debug_assert!($level.is_supported());
            // SAFETY: reachable only through a table built by `kernels_avx512`, whose
            // caller checked that the CPU supports `$level` (see `Kernels::for_level`).
            unsafe { $kernel($($argument),*) }
        }
    };
}

entry!(entry_dot_f32 => dot_f32, SimdLevel::Avx512, (a: &[f32], b: &[f32]) -> f32);
entry!(entry_l2_squared_f32 => l2_squared_f32, SimdLevel::Avx512, (a: &[f32], b: &[f32]) -> f32);
entry!(entry_norm_squared_f32 => norm_squared_f32, SimdLevel::Avx512, (a: &[f32]) -> f32);
entry!(entry_dot_f32_rows4 => dot_f32_rows4, SimdLevel::Avx512, (left: [&[f32]; 4], right: &[f32]) -> [f32; 4]);
entry!(entry_l2_squared_f32_rows4 => l2_squared_f32_rows4, SimdLevel::Avx512, (left: [&[f32]; 4], right: &[f32]) -> [f32; 4]);
entry!(entry_dot_f16 => dot_f16, SimdLevel::Avx512, (a: &[f16], b: &[f16]) -> f32);
entry!(entry_l2_squared_f16 => l2_squared_f16, SimdLevel::Avx512, (a: &[f16], b: &[f16]) -> f32);
entry!(entry_dot_f32_f16 => dot_f32_f16, SimdLevel::Avx512, (a: &[f32], b: &[f16]) -> f32);
entry!(entry_l2_squared_f32_f16 => l2_squared_f32_f16, SimdLevel::Avx512, (a: &[f32], b: &[f16]) -> f32);
entry!(entry_dot_f32_i8 => dot_f32_i8, SimdLevel::Avx512, (a: &[f32], b: &[i8]) -> f32);
entry!(entry_dot_f32_u8 => dot_f32_u8, SimdLevel::Avx512, (a: &[f32], b: &[u8]) -> f32);
entry!(entry_dot_i8 => dot_i8, SimdLevel::Avx512, (a: &[i8], b: &[i8]) -> i32);
entry!(entry_l2_squared_i8 => l2_squared_i8, SimdLevel::Avx512, (a: &[i8], b: &[i8]) -> u32);
entry!(entry_dot_u8_i8 => dot_u8_i8, SimdLevel::Avx512, (a: &[u8], b: &[i8]) -> i32);
entry!(entry_dot_i8_vnni => dot_i8_vnni, SimdLevel::Avx512Vnni, (a: &[i8], b: &[i8]) -> i32);
entry!(entry_l2_squared_i8_vnni => l2_squared_i8_vnni, SimdLevel::Avx512Vnni, (a: &[i8], b: &[i8]) -> u32);
entry!(entry_dot_u8_i8_vnni => dot_u8_i8_vnni, SimdLevel::Avx512Vnni, (a: &[u8], b: &[i8]) -> i32);
entry!(entry_dot_u8_i8_rows4_vnni => dot_u8_i8_rows4_vnni, SimdLevel::Avx512Vnni, (query: &[u8], rows: [&[i8]; 4]) -> [i32; 4]);

/// VPOPCNTDQ entries: checked separately from the level (it is optional within both levels).
macro_rules! popcount_entry {
    ($wrapper:ident => $kernel:ident) => {
        fn $wrapper(a: &[u64], b: &[u64]) -> u32 {
            debug_assert!(std::is_x86_feature_detected!("avx512vpopcntdq"));
            // SAFETY: reachable only through a table built by `kernels_avx512` with
            // `use_vpopcntdq`, whose caller checked the feature.
            unsafe { $kernel(a, b) }
        }
    };
}

popcount_entry!(entry_hamming_u64_vpopcntdq => hamming_u64_vpopcntdq);
popcount_entry!(entry_and_popcount_u64_vpopcntdq => and_popcount_u64_vpopcntdq);

fn entry_binary_dot_planes_rows_vpopcntdq(
    planes: &[u64],
    bits: u32,
    codes: &[u64],
    out: &mut [u32],
) {
    debug_assert!(std::is_x86_feature_detected!("avx512vpopcntdq"));
    // SAFETY: reachable only through a table built by `kernels_avx512` with
    // `use_vpopcntdq`, whose caller checked the feature.
    unsafe { binary_dot_planes_rows_vpopcntdq(planes, bits, codes, out) }
}

/// The AVX-512 table (`vnni` selects the `Avx512Vnni` level).
///
/// # Safety
/// The CPU must support the level (`SimdLevel::is_supported`), and `avx512vpopcntdq` when
/// `use_vpopcntdq` is true.
pub(crate) unsafe fn kernels_avx512(vnni: bool, use_vpopcntdq: bool) -> Kernels {
    // SAFETY: AVX-512 F/BW/VL CPUs support the AVX2 level (checked by `is_supported`).
    let base = unsafe { crate::avx2::kernels_avx2() };
    let mut table = Kernels {
        level: SimdLevel::Avx512,
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
        hamming_u64: base.hamming_u64,
        and_popcount_u64: base.and_popcount_u64,
        dot_f32_rows4: entry_dot_f32_rows4,
        l2_squared_f32_rows4: entry_l2_squared_f32_rows4,
        dot_u8_i8_rows4: None,
        binary_dot_planes_rows: base.binary_dot_planes_rows,
    };
    if use_vpopcntdq {
        table.hamming_u64 = entry_hamming_u64_vpopcntdq;
        table.and_popcount_u64 = entry_and_popcount_u64_vpopcntdq;
        table.binary_dot_planes_rows = entry_binary_dot_planes_rows_vpopcntdq;
    }
    if vnni {
        table.level = SimdLevel::Avx512Vnni;
        table.dot_i8 = entry_dot_i8_vnni;
        table.l2_squared_i8 = entry_l2_squared_i8_vnni;
        table.dot_u8_i8 = entry_dot_u8_i8_vnni;
        table.dot_u8_i8_rows4 = Some(entry_dot_u8_i8_rows4_vnni);
    }
    table
}
