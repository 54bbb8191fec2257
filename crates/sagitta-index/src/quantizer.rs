//! SQ8: symmetric scalar quantization with one scale per index.
//!
//! `x ≈ scale * c` with `c ∈ [-127, 127]` (`i8`). One scale for all dimensions keeps every
//! distance an exact integer dot product, which the kernels compute with AVX-512 VNNI
//! (`vpdpbusd`: 64 byte-products per instruction):
//!
//! * dot(x, y) ≈ scale² · Σ cx·cy
//! * |x − y|² ≈ |x̂|² + |ŷ|² − 2 · scale² · Σ cx·cy, with |x̂|² stored per row
//!
//! A query is quantized the same way and offset by 128 into `u8`, so
//! Σ (cq + 128)·cx = Σ cq·cx + 128 · Σ cx; the per-row code sum is stored to undo the offset.
//!
//! Row layout in the code store (`stride` bytes, a multiple of 64):
//! `[codes: dim × i8][pad to 4][code_sum: i32 LE][norm_squared: f32 LE][pad]`.
//! Estimate (768-d): 832 B per row = 13 cache lines against 48 for f32: 3.7× fewer bytes per hop.

use crate::error::{IndexError, Result};

/// The fraction of |component| values the scale covers; the rest are clipped.
/// 0.9995 keeps clipping rare while giving the bulk of values most of the 8 bits.
const SCALE_QUANTILE: f64 = 0.9995;
/// At most this many training values are sorted to find the quantile.
const TRAINING_VALUES_MAX: usize = 2_000_000;

#[derive(Clone, Debug, PartialEq)]
pub struct Sq8Quantizer {
    dim: usize,
    scale: f32,
    stride: usize,
}

impl Sq8Quantizer {
    /// Trains the scale on row-major `sample` vectors (already normalized for cosine).
    pub fn train(sample: &[f32], dim: usize) -> Sq8Quantizer {
        assert!(dim > 0 && sample.len().is_multiple_of(dim));
        let step = (sample.len() / TRAINING_VALUES_MAX).max(1);
        // absent rows (NaNs, see crate::metric::is_absent) carry no values to cover
        let mut magnitudes: Vec<f32> = sample
            .iter()
            .step_by(step)
            .filter(|v| v.is_finite())
            .map(|v| v.abs())
            .collect();
        let scale = if magnitudes.is_empty() {
            1.0
        } else {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let rank = ((magnitudes.len() - 1) as f64 * SCALE_QUANTILE) as usize;
            let (_, value, _) = magnitudes.select_nth_unstable_by(rank, f32::total_cmp);
            let bound = *value;
            if bound > 0.0 && bound.is_finite() {
                bound / 127.0
            } else {
                1.0
            }
        };
        Sq8Quantizer::with_scale(dim, scale)
    }

    pub fn with_scale(dim: usize, scale: f32) -> Sq8Quantizer {
        Sq8Quantizer {
            dim,
            scale,
            stride: Self::stride_for(dim),
        }
    }

    /// Bytes per stored row (codes plus the two auxiliary words), a multiple of 64.
    pub fn stride_for(dim: usize) -> usize {
        (Self::aux_offset_for(dim) + 8).div_ceil(64) * 64
    }

    fn aux_offset_for(dim: usize) -> usize {
        dim.div_ceil(4) * 4
    }

    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn scale(&self) -> f32 {
        self.scale
    }
    pub fn stride(&self) -> usize {
        self.stride
    }

    pub(crate) fn check_scale(scale: f32) -> Result<()> {
        if scale > 0.0 && scale.is_finite() {
            Ok(())
        } else {
            Err(IndexError::format(format!(
                "sq8 scale must be positive and finite, got {scale}"
            )))
        }
    }

    #[inline]
    fn quantize_value(&self, value: f32) -> i8 {
        #[allow(clippy::cast_possible_truncation)]
        let code = (value / self.scale).round().clamp(-127.0, 127.0) as i8;
        code
    }

    /// Encodes one vector into a full row (`out.len() == stride`).
    pub fn encode_row(&self, vector: &[f32], out: &mut [i8]) {
        debug_assert_eq!(vector.len(), self.dim);
        debug_assert_eq!(out.len(), self.stride);
        let mut code_sum: i32 = 0;
        let mut code_norm_squared: i64 = 0;
        for (target, value) in out.iter_mut().zip(vector) {
            let code = self.quantize_value(*value);
            *target = code;
            code_sum += i32::from(code);
            code_norm_squared += i64::from(code) * i64::from(code);
        }
        #[allow(clippy::cast_precision_loss)]
        let norm_squared = self.scale * self.scale * code_norm_squared as f32;
        let offset = Self::aux_offset_for(self.dim);
        write_i32(&mut out[offset..offset + 4], code_sum);
        write_i32(
            &mut out[offset + 4..offset + 8],
            i32::from_le_bytes(norm_squared.to_le_bytes()),
        );
    }

    /// Encodes a query into the `u8` form (`code + 128`); returns |q̂|².
    pub fn encode_query(&self, query: &[f32], out: &mut [u8]) -> f32 {
        debug_assert_eq!(query.len(), self.dim);
        let mut code_norm_squared: i64 = 0;
        for (target, value) in out.iter_mut().zip(query) {
            let code = self.quantize_value(*value);
            code_norm_squared += i64::from(code) * i64::from(code);
            #[allow(clippy::cast_sign_loss)]
            let shifted = (i16::from(code) + 128) as u8;
            *target = shifted;
        }
        #[allow(clippy::cast_precision_loss)]
        let norm_squared = self.scale * self.scale * code_norm_squared as f32;
        norm_squared
    }

    /// The code sum and |x̂|² stored at the end of a row.
    #[inline]
    pub fn row_aux(&self, row: &[i8]) -> (i32, f32) {
        let offset = Self::aux_offset_for(self.dim);
        let sum = read_i32(&row[offset..offset + 4]);
        let norm_squared = f32::from_le_bytes(read_i32(&row[offset + 4..offset + 8]).to_le_bytes());
        (sum, norm_squared)
    }

    /// Decodes a row back to f32 (tests and diagnostics).
    pub fn decode_row(&self, row: &[i8], out: &mut [f32]) {
        for (target, code) in out.iter_mut().zip(row) {
            *target = f32::from(*code) * self.scale;
        }
    }
}

#[inline]
fn write_i32(out: &mut [i8], value: i32) {
    for (target, byte) in out.iter_mut().zip(value.to_le_bytes()) {
        *target = i8::from_le_bytes([byte]);
    }
}

#[inline]
fn read_i32(bytes: &[i8]) -> i32 {
    i32::from_le_bytes([
        bytes[0].to_le_bytes()[0],
        bytes[1].to_le_bytes()[0],
        bytes[2].to_le_bytes()[0],
        bytes[3].to_le_bytes()[0],
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_layout_is_aligned_and_round_trips() {
        for dim in [1, 3, 4, 127, 384, 768, 1536] {
            let quantizer = Sq8Quantizer::with_scale(dim, 0.01);
            assert_eq!(quantizer.stride() % 64, 0);
            assert!(quantizer.stride() >= dim + 8);
            let vector: Vec<f32> = (0..dim).map(|i| ((i % 17) as f32 - 8.0) * 0.013).collect();
            let mut row = vec![0i8; quantizer.stride()];
            quantizer.encode_row(&vector, &mut row);
            let (sum, norm_squared) = quantizer.row_aux(&row);
            let expected_sum: i32 = row[..dim].iter().map(|c| i32::from(*c)).sum();
            assert_eq!(sum, expected_sum);
            let mut decoded = vec![0.0; dim];
            quantizer.decode_row(&row, &mut decoded);
            let decoded_norm: f32 = decoded.iter().map(|v| v * v).sum();
            assert!((decoded_norm - norm_squared).abs() <= 1e-4 * (1.0 + decoded_norm));
            for (original, restored) in vector.iter().zip(&decoded) {
                assert!(
                    (original - restored).abs() <= 0.5 * 0.01 + 1e-6,
                    "{original} {restored}"
                );
            }
        }
    }

    #[test]
    fn trained_scale_covers_the_quantile_and_clips_outliers() {
        let mut sample: Vec<f32> = (0..10_000).map(|i| (i as f32 / 10_000.0) - 0.5).collect();
        sample.push(1_000.0);
        let quantizer = Sq8Quantizer::train(&sample, 1);
        assert!(quantizer.scale() > 0.49 / 127.0 && quantizer.scale() < 0.51 / 127.0);
        let mut row = vec![0i8; quantizer.stride()];
        quantizer.encode_row(&[1_000.0], &mut row);
        assert_eq!(row[0], 127);
    }
}
