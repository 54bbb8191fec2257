//! Distance kernels for SagittaDB: f32, f16, int8 and 1-bit codes, one file per instruction
//! set (`scalar.rs`, `avx2.rs`, `avx512.rs`, `neon.rs`), chosen once at run time.
//!
//! A [`Kernels`] table holds one function pointer per operation for one [`SimdLevel`];
//! [`kernels`] returns the table for the best level this CPU supports. Callers that score
//! many vectors should copy the function pointer they need out of the table once and call
//! it in their loop; the batch entry points ([`dot_f32_batch`], [`dot_f32_many`], ...) do so.
//!
//! Architecture invariant: this is the only crate in SagittaDB that contains `unsafe`; every
//! unsafe block carries a `// SAFETY:` comment.
//!
//! Contracts shared by every kernel:
//! - Inputs of one call have equal lengths (`debug_assert!`); in release builds the shorter
//!   length is used, so a mismatch can never read out of bounds.
//! - Any length works, including 0 (the result is 0) and odd tails.
//! - Integer kernels are exact and equal the scalar reference bit for bit for dimensions up
//!   to [`MAX_INTEGER_KERNEL_DIMENSION`].
//! - f32 results of different levels differ only by rounding (different summation orders);
//!   within one level, the batch and many-queries forms equal the per-pair function bit for
//!   bit.

#![warn(missing_docs)]

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "aarch64")]
mod neon;
pub mod numa;
pub mod prefetch;
mod scalar;
pub mod sched;
pub mod slab;

use std::sync::OnceLock;

use half::f16;

pub use prefetch::{prefetch_bytes, prefetch_read, prefetch_slice};
pub use slab::{zeroed_atomic_u32s, AppendSlab, SlabError, Zeroable};

/// Largest dimension for which the integer kernels are exact: the largest possible
/// `l2_squared_i8` (255^2 per dimension) fits u32 and the largest `dot_u8_i8` / `dot_i8`
/// magnitude (with the VNNI +128 shift, 255 * 128 per dimension) fits i32.
pub const MAX_INTEGER_KERNEL_DIMENSION: usize = 65_536;

/// Instruction-set levels, from least to most capable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SimdLevel {
    /// Portable Rust (vectorised by the compiler for the baseline target only).
    Scalar,
    /// aarch64 Advanced SIMD.
    Neon,
    /// x86_64 AVX2 + FMA + F16C (+ POPCNT).
    Avx2,
    /// x86_64 AVX-512 F/BW/VL (on top of `Avx2`).
    Avx512,
    /// x86_64 AVX-512 with VNNI (`vpdpbusd`).
    Avx512Vnni,
}

impl SimdLevel {
    /// Every level, in increasing order.
    pub const ALL: [SimdLevel; 5] = [
        SimdLevel::Scalar,
        SimdLevel::Neon,
        SimdLevel::Avx2,
        SimdLevel::Avx512,
        SimdLevel::Avx512Vnni,
    ];

    /// Stable lower-case name, for telemetry and Python.
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Scalar => "scalar",
            SimdLevel::Neon => "neon",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
            SimdLevel::Avx512Vnni => "avx512-vnni",
        }
    }

    /// Whether this CPU can run the level's kernels (detected at run time; the standard
    /// library caches the CPUID results).
    pub fn is_supported(self) -> bool {
        match self {
            SimdLevel::Scalar => true,
            SimdLevel::Neon => neon_supported(),
            SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vnni => x86_supported(self),
        }
    }
}

impl std::fmt::Display for SimdLevel {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}

#[cfg(target_arch = "aarch64")]
fn neon_supported() -> bool {
    std::arch::is_aarch64_feature_detected!("neon")
}

#[cfg(not(target_arch = "aarch64"))]
fn neon_supported() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
fn x86_supported(level: SimdLevel) -> bool {
    use std::is_x86_feature_detected as detected;
    let avx2 = detected!("avx2") && detected!("fma") && detected!("f16c") && detected!("popcnt");
    let avx512 = avx2 && detected!("avx512f") && detected!("avx512bw") && detected!("avx512vl");
    match level {
        SimdLevel::Avx2 => avx2,
        SimdLevel::Avx512 => avx512,
        SimdLevel::Avx512Vnni => avx512 && detected!("avx512vnni"),
        SimdLevel::Scalar | SimdLevel::Neon => false,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn x86_supported(_level: SimdLevel) -> bool {
    false
}

/// Best level this CPU supports, detected once.
pub fn detected_simd_level() -> SimdLevel {
    static DETECTED: OnceLock<SimdLevel> = OnceLock::new();
    *DETECTED.get_or_init(|| {
        SimdLevel::ALL
            .into_iter()
            .rev()
            .find(|level| level.is_supported())
            .unwrap_or(SimdLevel::Scalar)
    })
}

/// Every level this CPU can run, in increasing order (always starts with `Scalar`).
pub fn available_simd_levels() -> Vec<SimdLevel> {
    SimdLevel::ALL
        .into_iter()
        .filter(|level| level.is_supported())
        .collect()
}

/// Table of function pointers chosen once per level.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    /// The level these kernels were built for.
    pub level: SimdLevel,
    /// Inner product of two f32 vectors.
    pub dot_f32: fn(&[f32], &[f32]) -> f32,
    /// Squared Euclidean distance of two f32 vectors.
    pub l2_squared_f32: fn(&[f32], &[f32]) -> f32,
    /// Squared Euclidean norm of an f32 vector.
    pub norm_squared_f32: fn(&[f32]) -> f32,
    /// Inner product of two f16 vectors, accumulated in f32.
    pub dot_f16: fn(&[f16], &[f16]) -> f32,
    /// Squared Euclidean distance of two f16 vectors, accumulated in f32.
    pub l2_squared_f16: fn(&[f16], &[f16]) -> f32,
    /// Inner product of an f32 query and f16 data.
    pub dot_f32_f16: fn(&[f32], &[f16]) -> f32,
    /// Squared Euclidean distance of an f32 query and f16 data.
    pub l2_squared_f32_f16: fn(&[f32], &[f16]) -> f32,
    /// Exact inner product of two i8 vectors.
    pub dot_i8: fn(&[i8], &[i8]) -> i32,
    /// Exact squared Euclidean distance of two i8 vectors.
    pub l2_squared_i8: fn(&[i8], &[i8]) -> u32,
    /// Exact inner product of u8 and i8 vectors (the VNNI-native form).
    pub dot_u8_i8: fn(&[u8], &[i8]) -> i32,
    /// Inner product of an f32 query and i8 codes.
    pub dot_f32_i8: fn(&[f32], &[i8]) -> f32,
    /// Inner product of an f32 query and u8 codes.
    pub dot_f32_u8: fn(&[f32], &[u8]) -> f32,
    /// Number of differing bits of two packed bit vectors.
    pub hamming_u64: fn(&[u64], &[u64]) -> u32,
    /// Number of bits set in both packed bit vectors.
    pub and_popcount_u64: fn(&[u64], &[u64]) -> u32,
    // Multi-row forms used by the batch entry points: each result equals the single-pair
    // kernel bit for bit. Private so that the public table stays as documented.
    dot_f32_rows4: RowsKernel,
    l2_squared_f32_rows4: RowsKernel,
    dot_u8_i8_rows4: Option<IntegerRowsKernel>,
    binary_dot_planes_rows: PlanesRowsKernel,
}

const SCALAR_KERNELS: Kernels = Kernels {
    level: SimdLevel::Scalar,
    dot_f32: scalar::dot_f32,
    l2_squared_f32: scalar::l2_squared_f32,
    norm_squared_f32: scalar::norm_squared_f32,
    dot_f16: scalar::dot_f16,
    l2_squared_f16: scalar::l2_squared_f16,
    dot_f32_f16: scalar::dot_f32_f16,
    l2_squared_f32_f16: scalar::l2_squared_f32_f16,
    dot_i8: scalar::dot_i8,
    l2_squared_i8: scalar::l2_squared_i8,
    dot_u8_i8: scalar::dot_u8_i8,
    dot_f32_i8: scalar::dot_f32_i8,
    dot_f32_u8: scalar::dot_f32_u8,
    hamming_u64: scalar::hamming_u64,
    and_popcount_u64: scalar::and_popcount_u64,
    dot_f32_rows4: scalar::dot_f32_rows4,
    l2_squared_f32_rows4: scalar::l2_squared_f32_rows4,
    dot_u8_i8_rows4: None,
    binary_dot_planes_rows: scalar::binary_dot_planes_rows,
};

/// Rows of the matrix per cache tile in the many-queries loops: 256 KiB fits the L2 of
/// every x86 and Arm server core of the last decade (Zen 4: 1 MiB, Sapphire Rapids: 2 MiB)
/// with room for the queries.
const TILE_BYTES: usize = 256 * 1024;

impl Kernels {
    /// The kernels for `level`, or `None` if this CPU cannot run them.
    pub fn for_level(level: SimdLevel) -> Option<Kernels> {
        if !level.is_supported() {
            return None;
        }
        match level {
            SimdLevel::Scalar => Some(SCALAR_KERNELS),
            #[cfg(target_arch = "aarch64")]
            SimdLevel::Neon => Some(neon::kernels_neon()),
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2 => {
                // SAFETY: `level.is_supported()` checked AVX2, FMA, F16C and POPCNT.
                Some(unsafe { avx2::kernels_avx2() })
            }
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx512 | SimdLevel::Avx512Vnni => {
                let use_vpopcntdq = std::is_x86_feature_detected!("avx512vpopcntdq");
                let vnni = level == SimdLevel::Avx512Vnni;
                // SAFETY: `level.is_supported()` checked the level's features (including
                // VNNI for `Avx512Vnni`), and VPOPCNTDQ was detected just above.
                Some(unsafe { avx512::kernels_avx512(vnni, use_vpopcntdq) })
            }
            _ => None,
        }
    }

    /// Cosine similarity; 0.0 when either norm is 0.
    pub fn cosine_f32(&self, a: &[f32], b: &[f32]) -> f32 {
        cosine_from_parts(
            (self.dot_f32)(a, b),
            (self.norm_squared_f32)(a),
            (self.norm_squared_f32)(b),
        )
    }

    /// Cosine similarity of f16 vectors; 0.0 when either norm is 0.
    pub fn cosine_f16(&self, a: &[f16], b: &[f16]) -> f32 {
        cosine_from_parts(
            (self.dot_f16)(a, b),
            (self.dot_f16)(a, a),
            (self.dot_f16)(b, b),
        )
    }

    /// One query against the `out.len()` contiguous rows of `matrix` (row-major, `dim`
    /// columns): `out[r] = dot_f32(query, row r)`, bit for bit.
    pub fn dot_f32_batch(&self, query: &[f32], matrix: &[f32], dim: usize, out: &mut [f32]) {
        batch_f32(query, matrix, dim, out, self.dot_f32_rows4, self.dot_f32);
    }

    /// One query against the `out.len()` contiguous rows of `matrix`:
    /// `out[r] = l2_squared_f32(query, row r)`, bit for bit.
    pub fn l2_squared_f32_batch(&self, query: &[f32], matrix: &[f32], dim: usize, out: &mut [f32]) {
        batch_f32(
            query,
            matrix,
            dim,
            out,
            self.l2_squared_f32_rows4,
            self.l2_squared_f32,
        );
    }

    /// One u8 query against `out.len()` i8 rows that start every `row_stride` elements
    /// (row r is `matrix[r * row_stride..r * row_stride + dim]`; padding is ignored).
    pub fn dot_u8_i8_batch(
        &self,
        query: &[u8],
        matrix: &[i8],
        row_stride: usize,
        dim: usize,
        out: &mut [i32],
    ) {
        debug_assert_eq!(query.len(), dim);
        debug_assert!(row_stride >= dim);
        debug_assert!(out.is_empty() || matrix.len() >= (out.len() - 1) * row_stride + dim);
        let row = |row_index: usize| &matrix[row_index * row_stride..][..dim];
        let mut row_index = 0;
        if let Some(dot_rows4) = self.dot_u8_i8_rows4 {
            let (out_blocks, _) = out.as_chunks_mut::<4>();
            // 768-d: 4 rows (3 KiB) per call, each query load feeding 4 vpdpbusd.
            for out_block in out_blocks {
                *out_block = dot_rows4(query, std::array::from_fn(|k| row(row_index + k)));
                row_index += 4;
            }
        }
        let dot = self.dot_u8_i8;
        for (row_index, result) in out.iter_mut().enumerate().skip(row_index) {
            *result = dot(query, row(row_index));
        }
    }

    /// Many queries against many rows (both row-major with `dim` columns):
    /// `out[i * n + j] = dot_f32(query i, row j)` bit for bit, where `n = matrix.len() / dim`.
    pub fn dot_f32_many(&self, queries: &[f32], matrix: &[f32], dim: usize, out: &mut [f32]) {
        many_f32(queries, matrix, dim, out, self.dot_f32_rows4, self.dot_f32);
    }

    /// Many queries against many rows: `out[i * n + j] = l2_squared_f32(query i, row j)`.
    pub fn l2_squared_f32_many(
        &self,
        queries: &[f32],
        matrix: &[f32],
        dim: usize,
        out: &mut [f32],
    ) {
        many_f32(
            queries,
            matrix,
            dim,
            out,
            self.l2_squared_f32_rows4,
            self.l2_squared_f32,
        );
    }

    /// `sum_j q_j * b_j` from query bit planes (see [`binary_query_planes`]) and a 1-bit code.
    pub fn binary_dot_planes(&self, planes: &[u64], bits: u32, code: &[u64]) -> u32 {
        let words = code.len();
        debug_assert!((1..=8).contains(&bits), "bits must be in 1..=8");
        debug_assert_eq!(planes.len(), bits as usize * words);
        if words == 0 {
            return 0;
        }
        let and_popcount = self.and_popcount_u64;
        planes
            .chunks_exact(words)
            .take(bits as usize)
            .zip(0u32..)
            .map(|(plane, plane_index)| and_popcount(plane, code) << plane_index)
            .sum()
    }

    /// [`Kernels::binary_dot_planes`] of every code of `codes` (`out.len()` codes of
    /// `planes.len() / bits` words each, back to back) in one call: the disk index scans
    /// a partition's codes this way, the planes held in registers across codes.
    pub fn binary_dot_planes_batch(
        &self,
        planes: &[u64],
        bits: u32,
        codes: &[u64],
        out: &mut [u32],
    ) {
        assert!((1..=8).contains(&bits), "bits must be in 1..=8");
        let words = planes.len() / bits as usize;
        assert_eq!(
            planes.len(),
            bits as usize * words,
            "planes must be bits × words"
        );
        assert_eq!(
            codes.len(),
            out.len() * words,
            "codes must be out.len() × words"
        );
        if words == 0 {
            out.fill(0);
            return;
        }
        (self.binary_dot_planes_rows)(planes, bits, codes, out);
    }

    /// `cos(pi * hamming / dim)`: the SimHash estimate of the angle between two vectors from
    /// their sign codes. 0.0 when `dim` is 0.
    pub fn binary_cosine_estimate(&self, a: &[u64], b: &[u64], dim: usize) -> f32 {
        debug_assert_eq!(a.len(), dim.div_ceil(64));
        if dim == 0 {
            return 0.0;
        }
        let hamming = (self.hamming_u64)(a, b);
        (std::f64::consts::PI * f64::from(hamming) / dim as f64).cos() as f32
    }
}

fn cosine_from_parts(dot: f32, a_norm_squared: f32, b_norm_squared: f32) -> f32 {
    if a_norm_squared == 0.0 || b_norm_squared == 0.0 {
        return 0.0;
    }
    (dot / (a_norm_squared.sqrt() * b_norm_squared.sqrt())).clamp(-1.0, 1.0)
}

/// Four left inputs against one right input, each result equal to the pair kernel's.
type RowsKernel = fn([&[f32]; 4], &[f32]) -> [f32; 4];
/// One u8 query against four i8 rows.
type IntegerRowsKernel = fn(&[u8], [&[i8]; 4]) -> [i32; 4];
type PairKernel = fn(&[f32], &[f32]) -> f32;
/// Bit planes (`bits` of them) against back-to-back codes of `planes.len() / bits` words.
type PlanesRowsKernel = fn(&[u64], u32, &[u64], &mut [u32]);

fn batch_f32(
    query: &[f32],
    matrix: &[f32],
    dim: usize,
    out: &mut [f32],
    rows4: RowsKernel,
    pair: PairKernel,
) {
    debug_assert_eq!(query.len(), dim);
    debug_assert_eq!(matrix.len(), out.len() * dim);
    if dim == 0 {
        out.fill(0.0);
        return;
    }
    let row = |row_index: usize| &matrix[row_index * dim..][..dim];
    let (out_blocks, out_tail) = out.as_chunks_mut::<4>();
    let mut row_index = 0;
    // 768-d: 4 rows (12 KiB) per call, each query load feeding 4 FMAs (the kernels are
    // symmetric, so rows on the left give the same bits as `pair(query, row)`).
    for out_block in out_blocks {
        *out_block = rows4(std::array::from_fn(|k| row(row_index + k)), query);
        row_index += 4;
    }
    for result in out_tail {
        *result = pair(query, row(row_index));
        row_index += 1;
    }
}

fn many_f32(
    queries: &[f32],
    matrix: &[f32],
    dim: usize,
    out: &mut [f32],
    rows4: RowsKernel,
    pair: PairKernel,
) {
    if dim == 0 {
        out.fill(0.0);
        return;
    }
    let query_count = queries.len() / dim;
    let row_count = matrix.len() / dim;
    debug_assert_eq!(queries.len(), query_count * dim);
    debug_assert_eq!(matrix.len(), row_count * dim);
    debug_assert_eq!(out.len(), query_count * row_count);
    let query = |query_index: usize| &queries[query_index * dim..][..dim];
    let row = |row_index: usize| &matrix[row_index * dim..][..dim];
    let tile_row_count = (TILE_BYTES / (dim * size_of::<f32>())).max(1);
    // 64 queries x 4096 rows x 768-d: 201 M multiply-adds (~13 M zmm FMAs, a few ms). The
    // matrix (12 MiB) streams from memory once: each 256 KiB tile of rows stays in L2 while
    // every block of 4 queries (12 KiB, in L1) passes over it, and each row load feeds 4 FMAs.
    for tile_start in (0..row_count).step_by(tile_row_count) {
        let tile_end = (tile_start + tile_row_count).min(row_count);
        let mut query_index = 0;
        while query_index + 4 <= query_count {
            let query_block: [&[f32]; 4] = std::array::from_fn(|k| query(query_index + k));
            for row_index in tile_start..tile_end {
                let results = rows4(query_block, row(row_index));
                for (k, result) in results.into_iter().enumerate() {
                    out[(query_index + k) * row_count + row_index] = result;
                }
            }
            query_index += 4;
        }
        for query_index in query_index..query_count {
            for row_index in tile_start..tile_end {
                out[query_index * row_count + row_index] = pair(query(query_index), row(row_index));
            }
        }
    }
}

/// The kernels for the best level this CPU supports, chosen once.
#[inline]
pub fn kernels() -> &'static Kernels {
    static KERNELS: OnceLock<Kernels> = OnceLock::new();
    KERNELS.get_or_init(|| Kernels::for_level(detected_simd_level()).unwrap_or(SCALAR_KERNELS))
}

/// Views i8 values as their u8 bit patterns.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn i8_as_u8(values: &[i8]) -> &[u8] {
    // SAFETY: i8 and u8 have the same size and alignment and every bit pattern is valid for
    // both; the view has the same length and borrows the same memory.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), values.len()) }
}

// ---------------------------------------------------------------------------------------------
// Free functions over the best kernels.
// ---------------------------------------------------------------------------------------------

macro_rules! delegate {
    ($(#[$documentation:meta])* $name:ident($($argument:ident: $type:ty),*) -> $result:ty) => {
        $(#[$documentation])*
        #[inline]
        pub fn $name($($argument: $type),*) -> $result {
            (kernels().$name)($($argument),*)
        }
    };
}

delegate!(
    /// Inner product of two f32 vectors.
    dot_f32(a: &[f32], b: &[f32]) -> f32
);
delegate!(
    /// Squared Euclidean distance of two f32 vectors.
    l2_squared_f32(a: &[f32], b: &[f32]) -> f32
);
delegate!(
    /// Squared Euclidean norm of an f32 vector.
    norm_squared_f32(a: &[f32]) -> f32
);
delegate!(
    /// Inner product of two f16 vectors, accumulated in f32.
    dot_f16(a: &[f16], b: &[f16]) -> f32
);
delegate!(
    /// Squared Euclidean distance of two f16 vectors, accumulated in f32.
    l2_squared_f16(a: &[f16], b: &[f16]) -> f32
);
delegate!(
    /// Inner product of an f32 query and f16 data.
    dot_f32_f16(a: &[f32], b: &[f16]) -> f32
);
delegate!(
    /// Squared Euclidean distance of an f32 query and f16 data.
    l2_squared_f32_f16(a: &[f32], b: &[f16]) -> f32
);
delegate!(
    /// Exact inner product of two i8 vectors.
    dot_i8(a: &[i8], b: &[i8]) -> i32
);
delegate!(
    /// Exact squared Euclidean distance of two i8 vectors.
    l2_squared_i8(a: &[i8], b: &[i8]) -> u32
);
delegate!(
    /// Exact inner product of u8 and i8 vectors.
    dot_u8_i8(a: &[u8], b: &[i8]) -> i32
);
delegate!(
    /// Inner product of an f32 query and i8 codes.
    dot_f32_i8(a: &[f32], b: &[i8]) -> f32
);
delegate!(
    /// Inner product of an f32 query and u8 codes.
    dot_f32_u8(a: &[f32], b: &[u8]) -> f32
);
delegate!(
    /// Number of differing bits of two packed bit vectors.
    hamming_u64(a: &[u64], b: &[u64]) -> u32
);
delegate!(
    /// Number of bits set in both packed bit vectors.
    and_popcount_u64(a: &[u64], b: &[u64]) -> u32
);

/// Cosine similarity of two f32 vectors; 0.0 when either norm is 0.
pub fn cosine_f32(a: &[f32], b: &[f32]) -> f32 {
    kernels().cosine_f32(a, b)
}

/// Cosine similarity of two f16 vectors; 0.0 when either norm is 0.
pub fn cosine_f16(a: &[f16], b: &[f16]) -> f32 {
    kernels().cosine_f16(a, b)
}

/// One query against `out.len()` contiguous rows of `dim` (`matrix.len() == out.len() * dim`).
pub fn dot_f32_batch(query: &[f32], matrix: &[f32], dim: usize, out: &mut [f32]) {
    kernels().dot_f32_batch(query, matrix, dim, out);
}

/// One query against `out.len()` contiguous rows of `dim`, squared Euclidean distances.
pub fn l2_squared_f32_batch(query: &[f32], matrix: &[f32], dim: usize, out: &mut [f32]) {
    kernels().l2_squared_f32_batch(query, matrix, dim, out);
}

/// One u8 query against `out.len()` i8 rows; row r is `matrix[r * row_stride..][..dim]`.
pub fn dot_u8_i8_batch(
    query: &[u8],
    matrix: &[i8],
    row_stride: usize,
    dim: usize,
    out: &mut [i32],
) {
    kernels().dot_u8_i8_batch(query, matrix, row_stride, dim, out);
}

/// Many queries against many rows: `out[i * n + j] = dot_f32(query i, row j)`, cache-tiled.
pub fn dot_f32_many(queries: &[f32], matrix: &[f32], dim: usize, out: &mut [f32]) {
    kernels().dot_f32_many(queries, matrix, dim, out);
}

/// Many queries against many rows: `out[i * n + j] = l2_squared_f32(query i, row j)`.
pub fn l2_squared_f32_many(queries: &[f32], matrix: &[f32], dim: usize, out: &mut [f32]) {
    kernels().l2_squared_f32_many(queries, matrix, dim, out);
}

// ---------------------------------------------------------------------------------------------
// 1-bit codes.
// ---------------------------------------------------------------------------------------------

/// Sign code of `vector`: bit `j % 64` of word `j / 64` is 1 where component j is > 0.
/// `out.len()` must be `vector.len().div_ceil(64)`; padding bits are 0.
pub fn binary_encode_signs(vector: &[f32], out: &mut [u64]) {
    debug_assert_eq!(out.len(), vector.len().div_ceil(64));
    for (word, chunk) in out.iter_mut().zip(vector.chunks(64)) {
        *word = chunk.iter().enumerate().fold(0u64, |word, (bit, &value)| {
            word | (u64::from(value > 0.0) << bit)
        });
    }
}

/// `cos(pi * hamming / dim)`: estimate of the cosine between two vectors from their sign
/// codes (SimHash). 0.0 when `dim` is 0.
pub fn binary_cosine_estimate(a: &[u64], b: &[u64], dim: usize) -> f32 {
    kernels().binary_cosine_estimate(a, b, dim)
}

/// Bit planes of a query quantised to `bits`-bit unsigned integers (`bits` in 1..=8, every
/// code `< 2^bits`): plane p (words `p * words..(p + 1) * words`, `words =
/// query_codes.len().div_ceil(64)`) holds bit p of every dimension.
pub fn binary_query_planes(query_codes: &[u8], bits: u32, out_planes: &mut [u64]) {
    let words = query_codes.len().div_ceil(64);
    debug_assert!((1..=8).contains(&bits), "bits must be in 1..=8");
    debug_assert_eq!(out_planes.len(), bits as usize * words);
    debug_assert!(
        query_codes
            .iter()
            .all(|&code| u32::from(code) < (1u32 << bits)),
        "code does not fit in `bits` bits"
    );
    // one word of a plane at a time: 64 dimensions folded into it (no scattered writes)
    for (word_index, chunk) in query_codes.chunks(64).enumerate() {
        for (plane, plane_index) in out_planes.chunks_exact_mut(words.max(1)).zip(0..bits) {
            plane[word_index] = chunk.iter().enumerate().fold(0u64, |word, (bit, &code)| {
                word | (u64::from((code >> plane_index) & 1) << bit)
            });
        }
    }
}

/// `sum_j q_j * b_j` for a query given as bit planes and a 1-bit code (`b_j` in {0, 1}),
/// computed as `sum_p 2^p * popcount(plane_p & code)`. Exact.
pub fn binary_dot_planes(planes: &[u64], bits: u32, code: &[u64]) -> u32 {
    kernels().binary_dot_planes(planes, bits, code)
}

/// [`binary_dot_planes`] of `out.len()` back-to-back codes.
pub fn binary_dot_planes_batch(planes: &[u64], bits: u32, codes: &[u64], out: &mut [u32]) {
    kernels().binary_dot_planes_batch(planes, bits, codes, out);
}
