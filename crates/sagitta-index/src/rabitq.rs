//! 1-bit RaBitQ codes with their error bound (Gao and Long, SIGMOD 2024): the scan codes of
//! the disk index (issue 15 §1), one bit per (padded) dimension plus two floats a vector.
//!
//! A vector `x` of a partition with centroid `c` is coded by the direction of its residual,
//! `o = (x − c) / ‖x − c‖`, after a random rotation `R`: bit `i` is `(R·o)_i > 0`. The code
//! stands for the unit vector `ō = (2·bits − 1) / √P`; the floats kept beside it are the
//! residual's norm `r = ‖x − c‖` and `⟨ō, R·o⟩` (how well the code fits its vector).
//!
//! For a query `q`, with `t = ‖q − c‖` and `q' = R·(q − c) / t`:
//! `‖x − q‖² = r² + t² − 2·r·t·⟨o, q'⟩`, and `⟨o, q'⟩` is estimated by
//! `⟨ō, q'⟩ / ⟨ō, R·o⟩` — unbiased, with error at most
//! `ε₀ · √((1 − ⟨ō,R·o⟩²) / ⟨ō,R·o⟩²) / √(P − 1)` with high probability (`ε₀ = 1.9` here,
//! the paper's choice). [`RabitqQuery::estimate`] returns the distance estimate and that
//! bound scaled to the distance, so a search can fetch a vector's full record only while its
//! lower bound can still beat the current k-th distance.
//!
//! `⟨ō, q'⟩` is computed on integers: `q'` is quantized to 4 bits a coordinate and kept as 4
//! bit planes, so a code costs `4 · P/64` ANDs and popcounts. The quantization adds its
//! own small error (standard deviation step/√12), which the bound covers by 4 deviations.
//!
//! **Extended codes** (Gao et al., SIGMOD 2025, "Practical and asymptotically optimal
//! quantization"): `B` more bits a coordinate, kept as `B` bit planes beside the 1-bit code,
//! refine the estimate of the few vectors the 1-bit scan keeps. With the sign bit on top, a
//! coordinate's `(B+1)`-bit value `u` stands for `ȳ = u − (2^(B+1) − 1)/2` (half-integers,
//! symmetric, no zero), i.e. `±(m + ½)` for a magnitude level `m = min(⌊τ·|R·o|⌋, 2^B − 1)`;
//! the scale `τ` is chosen per vector (a grid search) to make `⟨ȳ/‖ȳ‖, R·o⟩` (its fit) as
//! large as it goes. The estimator keeps its form, `⟨ȳ/‖ȳ‖, q'⟩ / fit`, and so does the
//! bound, with the larger fit (≈0.8 at 1 bit, ≈0.98 with 2 more, ≈0.995 with 3) and an
//! 8-bit query: about 4× tighter with 2 extra bits, 8× with 3.
//!
//! The rotation is three rounds of random sign flips, a fixed random permutation and
//! orthonormal Walsh–Hadamard transforms over blocks of `H` coordinates, where `P` = `dim`
//! padded to a multiple of 64 and `H` is the largest power of two dividing `P` (768 = 3 ×
//! 256): O(P log H) a vector, not O(P²), and no bits spent on padding to a power of two
//! (768-d codes are 768 bits, not 1,024). The first round mixes within blocks, the
//! permutations spread each block over all of them, so after the second every coordinate
//! depends on every input. Signs, permutations and block transforms are orthonormal, so
//! norms and inner products are kept. Everything is drawn from a seed stored with the codes.

use crate::error::Result;
use crate::random::SplitMix64;

/// Rounds of sign flips and Hadamard transforms in the rotation.
const ROUNDS: usize = 3;
/// Confidence of the error bound (the paper's ε₀).
pub const EPSILON0: f32 = 1.9;
/// Confidence of an extended code's bound. The paper's ε₀ = 1.9 is about 1.9 standard
/// deviations of the estimate's error: the 1-bit bound holds more often than that because
/// the coarse query's quantization allowance widens it, but the 8-bit query of a refine
/// adds almost nothing, so 1.9 would let ~6% of true distances fall outside. 3.0 keeps
/// that under 1% (and the bound still about twice as tight a bit).
pub const EXTRA_EPSILON: f32 = 3.0;
/// Bits a query coordinate is quantized to for the 1-bit scan.
const QUERY_BITS: u32 = 4;
/// Bits a query coordinate is quantized to when refining with extended codes.
const FINE_QUERY_BITS: u32 = 8;
/// The most extra bits a coordinate's extended code may have.
pub const MAX_EXTRA_BITS: u32 = 3;
/// The scales `τ` tried first for an extended code, as multiples of `2^B / max |R·o|`
/// (tenths; the best uniform quantizers of Gaussian coordinates put the largest one at 1.2
/// to 1.6 times the top level); then the tenths either side of the best.
const SCALE_TENTHS: [u32; 8] = [6, 8, 10, 12, 14, 16, 19, 23];
/// Standard deviations of the query quantization's error the bound allows for.
const QUANTIZATION_DEVIATIONS: f32 = 4.0;

/// The rotation and shape every code of an index shares.
#[derive(Clone, Debug)]
pub struct Rabitq {
    dim: usize,
    padded: usize,
    /// Coordinates a Walsh–Hadamard block transforms (a power of two dividing `padded`).
    block: usize,
    /// `ROUNDS` rows of `padded` signs (±1).
    signs: Vec<f32>,
    /// `ROUNDS` rows of `padded` source indexes: round `r` takes coordinate
    /// `permutations[r][i]` to `i` before its signs.
    permutations: Vec<u32>,
    seed: u64,
}

/// The two floats stored beside a code.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CodeFactors {
    /// `‖x − c‖`.
    pub norm: f32,
    /// `⟨ō, R·o⟩` ∈ (0, 1]: how well the code fits its vector (1 / √P·Σ|R·o|).
    pub fit: f32,
}

impl Rabitq {
    /// The quantizer of `dim`-dimensional vectors, its rotation drawn from `seed`.
    pub fn new(dim: usize, seed: u64) -> Result<Rabitq> {
        crate::limits::check_range("dim", dim, 1, crate::limits::MAX_DIMENSION)?;
        let padded = dim.div_ceil(64) * 64;
        let mut random = SplitMix64(seed);
        let signs = (0..ROUNDS * padded)
            .map(|_| if random.next() & 1 == 0 { 1.0 } else { -1.0 })
            .collect();
        let mut permutations = Vec::with_capacity(ROUNDS * padded);
        for _ in 0..ROUNDS {
            // Fisher–Yates, continuing the seed's stream
            let mut order: Vec<u32> =
                (0..u32::try_from(padded).expect("dimension checked")).collect();
            for last in (1..padded).rev() {
                #[allow(clippy::cast_possible_truncation)]
                let pick = (random.next() % (last as u64 + 1)) as usize;
                order.swap(last, pick);
            }
            permutations.extend(order);
        }
        Ok(Rabitq {
            dim,
            padded,
            block: 1 << padded.trailing_zeros(),
            signs,
            permutations,
            seed,
        })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Bits (and rotated coordinates) of a code: `dim` padded to a multiple of 64.
    pub fn padded_dim(&self) -> usize {
        self.padded
    }

    /// u64 words of a code.
    pub fn code_words(&self) -> usize {
        self.padded / 64
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// `out` := `R·(vector − centroid)` (`out` has [`Rabitq::padded_dim`] entries).
    pub fn rotate_residual(&self, vector: &[f32], centroid: &[f32], out: &mut [f32]) {
        assert_eq!(vector.len(), self.dim, "vector dimension");
        assert_eq!(centroid.len(), self.dim, "centroid dimension");
        assert_eq!(out.len(), self.padded, "rotated length");
        for ((slot, x), c) in out.iter_mut().zip(vector).zip(centroid) {
            *slot = x - c;
        }
        out[self.dim..].fill(0.0);
        let mut moved = vec![0.0f32; self.padded];
        for (round, order) in self
            .signs
            .chunks_exact(self.padded)
            .zip(self.permutations.chunks_exact(self.padded))
        {
            moved.copy_from_slice(out);
            for ((value, sign), from) in out.iter_mut().zip(round).zip(order) {
                *value = moved[*from as usize] * sign;
            }
            for block in out.chunks_exact_mut(self.block) {
                hadamard(block);
            }
        }
    }

    /// Codes `vector` against its partition's `centroid` into `words`
    /// ([`Rabitq::code_words`] of them); returns the factors stored beside the code. A
    /// vector equal to its centroid gets norm 0 (its distance is then exact: `t²`).
    pub fn encode(
        &self,
        vector: &[f32],
        centroid: &[f32],
        scratch: &mut [f32],
        words: &mut [u64],
    ) -> CodeFactors {
        assert_eq!(words.len(), self.code_words(), "code words");
        self.rotate_residual(vector, centroid, scratch);
        let norm = scratch.iter().map(|v| v * v).sum::<f32>().sqrt();
        words.fill(0);
        let mut absolute = 0.0f32;
        for (index, value) in scratch.iter().enumerate() {
            if *value > 0.0 {
                words[index / 64] |= 1 << (index % 64);
            }
            absolute += value.abs();
        }
        #[allow(clippy::cast_precision_loss)]
        let fit = if norm > 0.0 {
            absolute / (norm * (self.padded as f32).sqrt())
        } else {
            1.0
        };
        CodeFactors { norm, fit }
    }

    /// A query prepared against one partition's `centroid`.
    pub fn query(&self, query: &[f32], centroid: &[f32]) -> RabitqQuery {
        let mut rotated = vec![0.0f32; self.padded];
        self.rotate_residual(query, centroid, &mut rotated);
        RabitqQuery::from_residual(&rotated, QUERY_BITS)
    }

    /// `R·vector`, [`Rabitq::padded_dim`] entries. The rotation is linear, so a query
    /// rotated once serves every partition: `R·(q − c) = R·q − R·c` with each centroid's
    /// `R·c` computed once ([`Rabitq::query_rotated`]).
    pub fn rotate(&self, vector: &[f32]) -> Vec<f32> {
        let zero = vec![0.0f32; self.dim];
        let mut out = vec![0.0f32; self.padded];
        self.rotate_residual(vector, &zero, &mut out);
        out
    }

    /// The query of [`Rabitq::query`] from `R·q` and `R·c` (both from [`Rabitq::rotate`]):
    /// a subtraction instead of a rotation per partition.
    pub fn query_rotated(&self, rotated_query: &[f32], rotated_centroid: &[f32]) -> RabitqQuery {
        assert_eq!(rotated_query.len(), self.padded, "rotated query length");
        assert_eq!(
            rotated_centroid.len(),
            self.padded,
            "rotated centroid length"
        );
        RabitqQuery::from_residual(&residual_of(rotated_query, rotated_centroid), QUERY_BITS)
    }

    /// [`Rabitq::query_rotated`] quantized to 8 bits a coordinate: the query
    /// [`RabitqQuery::refine`] needs, where the 4-bit quantization's error would be as
    /// large as the extended code's.
    pub fn query_rotated_fine(
        &self,
        rotated_query: &[f32],
        rotated_centroid: &[f32],
    ) -> RabitqQuery {
        RabitqQuery::from_residual(
            &residual_of(rotated_query, rotated_centroid),
            FINE_QUERY_BITS,
        )
    }

    /// u64 words of an extended code of `extra_bits` planes.
    pub fn extra_words(&self, extra_bits: u32) -> usize {
        extra_bits as usize * self.code_words()
    }

    /// The extended code (`extra_bits` ∈ 1 ..= [`MAX_EXTRA_BITS`] planes of
    /// [`Rabitq::code_words`] words) of the vector whose rotated residual `rotated`
    /// [`Rabitq::encode`] just left in its scratch; returns its fit `⟨ȳ/‖ȳ‖, R·o⟩`. Bit `b`
    /// of plane `b` at coordinate `i` is bit `b` of `m` (positive coordinates) or of
    /// `2^B − 1 − m` (the others), so that with the sign bit on top the value is `u`.
    pub fn encode_extra(&self, rotated: &[f32], extra_bits: u32, planes: &mut [u64]) -> f32 {
        assert!(
            (1..=MAX_EXTRA_BITS).contains(&extra_bits),
            "extra bits must be 1..={MAX_EXTRA_BITS}"
        );
        assert_eq!(rotated.len(), self.padded, "rotated length");
        assert_eq!(planes.len(), self.extra_words(extra_bits), "extra words");
        planes.fill(0);
        let top = (1u32 << extra_bits) - 1;
        let largest = rotated.iter().fold(0.0f32, |high, v| high.max(v.abs()));
        if largest == 0.0 {
            // a vector at its centroid: any code fits (its distance is exact)
            return 1.0;
        }
        let norm = rotated.iter().map(|v| v * v).sum::<f32>().sqrt();
        #[allow(clippy::cast_precision_loss)]
        let unit = (top + 1) as f32 / largest;
        #[allow(clippy::cast_precision_loss)]
        let fit_at = |tenths: u32| level_fit(rotated, unit * tenths as f32 / 10.0, top, norm);
        let (mut best_fit, mut best_tenths) = (f32::NEG_INFINITY, SCALE_TENTHS[0]);
        for tenths in SCALE_TENTHS {
            let fit = fit_at(tenths);
            if fit > best_fit {
                (best_fit, best_tenths) = (fit, tenths);
            }
        }
        for tenths in [best_tenths - 1, best_tenths + 1] {
            let fit = fit_at(tenths);
            if fit > best_fit {
                (best_fit, best_tenths) = (fit, tenths);
            }
        }
        #[allow(clippy::cast_precision_loss)]
        let scale = unit * best_tenths as f32 / 10.0;
        let lows: Vec<u8> = rotated
            .iter()
            .map(|value| {
                let level = magnitude_level(*value, scale, top);
                let low = if *value > 0.0 { level } else { top - level };
                u8::try_from(low).expect("at most 3 bits")
            })
            .collect();
        sagitta_kernels::binary_query_planes(&lows, extra_bits, planes);
        best_fit
    }

    /// The [`ExtraTerms`] of an extended code (`code` its sign bits, `planes` the
    /// `extra_bits` planes [`Rabitq::encode_extra`] wrote, `fit` what it returned).
    pub fn extra_terms(
        &self,
        code: &[u64],
        planes: &[u64],
        extra_bits: u32,
        fit: f32,
    ) -> ExtraTerms {
        // u = Σ_a weight_a · bit_a over the planes (the sign plane weighs 2^B, plane b 2^b),
        // so Σu and Σu² come from popcounts of the planes and of their pairwise ANDs
        let words = self.code_words();
        let weighted: Vec<(&[u64], f64)> = std::iter::once((code, f64::from(1u32 << extra_bits)))
            .chain(
                planes
                    .chunks_exact(words)
                    .zip(0u32..)
                    .map(|(plane, bit)| (plane, f64::from(1u32 << bit))),
            )
            .collect();
        let and_count = |a: &[u64], b: &[u64]| -> f64 {
            f64::from(
                a.iter()
                    .zip(b)
                    .map(|(x, y)| (x & y).count_ones())
                    .sum::<u32>(),
            )
        };
        let (mut value_sum, mut square_sum) = (0.0f64, 0.0f64);
        for (a, weight_a) in &weighted {
            value_sum += weight_a * and_count(a, a);
            for (b, weight_b) in &weighted {
                square_sum += weight_a * weight_b * and_count(a, b);
            }
        }
        let half = f64::from(center_of(extra_bits));
        #[allow(clippy::cast_precision_loss)]
        let padded = self.padded as f64;
        // Σ(u − c)² = Σu² − 2c·Σu + P·c²
        #[allow(clippy::cast_possible_truncation)]
        let sq_sum = (square_sum - 2.0 * half * value_sum + padded * half * half).max(0.0) as f32;
        #[allow(clippy::cast_possible_truncation)]
        let value_sum = value_sum as f32;
        let fit = fit.max(f32::EPSILON);
        ExtraTerms {
            value_sum,
            scale: 1.0 / (sq_sum.sqrt().max(f32::EPSILON) * fit),
            inverse_fit: 1.0 / fit,
            spread: self.spread(EXTRA_EPSILON, fit),
        }
    }
}

/// `R·q − R·c`.
fn residual_of(rotated_query: &[f32], rotated_centroid: &[f32]) -> Vec<f32> {
    rotated_query
        .iter()
        .zip(rotated_centroid)
        .map(|(q, c)| q - c)
        .collect()
}

/// `(2^(B+1) − 1) / 2`: the value `u` that stands for 0 in a `(B+1)`-bit code.
fn center_of(extra_bits: u32) -> f32 {
    #[allow(clippy::cast_precision_loss)]
    let levels = ((1u32 << (extra_bits + 1)) - 1) as f32;
    levels / 2.0
}

/// `min(⌊scale·|value|⌋, top)` (clamped first, then a truncating cast of a value in
/// `0 ..= top`, which vectorizes).
#[inline]
fn magnitude_level(value: f32, scale: f32, top: u32) -> u32 {
    #[allow(clippy::cast_precision_loss)]
    let clamped = (value.abs() * scale).min(top as f32);
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let level = clamped as i32 as u32;
    level
}

/// `⟨ȳ/‖ȳ‖, rotated/norm⟩` for the magnitude levels at `scale` (signs agree). Sums in
/// 16 independent lanes (`rotated` has a multiple of 64 entries), so the loop vectorizes
/// instead of waiting on one chain of additions.
fn level_fit(rotated: &[f32], scale: f32, top: u32, norm: f32) -> f32 {
    const LANES: usize = 16;
    let (mut dot, mut sq) = ([0.0f32; LANES], [0.0f32; LANES]);
    for chunk in rotated.chunks_exact(LANES) {
        for lane in 0..LANES {
            let value = chunk[lane].abs();
            #[allow(clippy::cast_precision_loss)]
            let magnitude = magnitude_level(value, scale, top) as f32 + 0.5;
            dot[lane] += magnitude * value;
            sq[lane] += magnitude * magnitude;
        }
    }
    dot.iter().sum::<f32>() / (sq.iter().sum::<f32>().sqrt() * norm)
}

/// The query-independent parts of an extended code's estimate, computed once per code.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExtraTerms {
    /// `Σ u_i` over the code's values.
    pub value_sum: f32,
    /// `1 / (‖ȳ‖ · fit)`.
    pub scale: f32,
    /// `1 / fit`.
    pub inverse_fit: f32,
    /// `EXTRA_EPSILON · √((1 − fit²) / fit²) / √(P − 1)`.
    pub spread: f32,
}

/// The parts of a code's estimate that do not depend on the query, computed once per code
/// (at build or load) so a scan does no square roots or divisions per code.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScanTerms {
    /// Bits set in the code.
    pub set: f32,
    /// `1 / ⟨ō, R·o⟩`.
    pub inverse_fit: f32,
    /// `ε₀ · √((1 − fit²) / fit²) / √(P − 1)`: the code's share of the error bound.
    pub spread: f32,
}

impl Rabitq {
    /// The [`ScanTerms`] of `code` with its `factors`.
    pub fn scan_terms(&self, code: &[u64], factors: CodeFactors) -> ScanTerms {
        let fit = factors.fit.max(f32::EPSILON);
        #[allow(clippy::cast_precision_loss)]
        let set = code.iter().map(|word| word.count_ones()).sum::<u32>() as f32;
        ScanTerms {
            set,
            inverse_fit: 1.0 / fit,
            spread: self.spread(EPSILON0, fit),
        }
    }

    /// [`ScanTerms::spread`] of a code from its `1 / fit` alone (`ε₀ · √(1/fit² − 1) /
    /// √(P − 1)`), for callers that store `1 / fit` and not the spread.
    #[inline]
    pub fn spread_of(&self, inverse_fit: f32) -> f32 {
        #[allow(clippy::cast_precision_loss)]
        let sqrt_padded_less_one = ((self.padded - 1) as f32).sqrt();
        EPSILON0 * (inverse_fit * inverse_fit - 1.0).max(0.0).sqrt() / sqrt_padded_less_one
    }

    /// A code's share of its bound, `epsilon · √((1 − fit²) / fit²) / √(P − 1)`: the
    /// estimate's error in units of `⟨o, q'⟩` at that confidence (`fit` > 0).
    fn spread(&self, epsilon: f32, fit: f32) -> f32 {
        #[allow(clippy::cast_precision_loss)]
        let sqrt_padded_less_one = ((self.padded - 1) as f32).sqrt();
        epsilon * ((1.0 - fit * fit).max(0.0) / (fit * fit)).sqrt() / sqrt_padded_less_one
    }
}

/// A query rotated against one partition's centroid, normalized and quantized to 4-bit
/// planes: what scanning that partition's codes needs.
#[derive(Clone, Debug)]
pub struct RabitqQuery {
    /// Bits a coordinate is quantized to.
    bits: u32,
    /// `bits` planes of `words` u64s: bit `i` of plane `j` is bit `j` of coordinate
    /// `i`'s quantized value.
    planes: Vec<u64>,
    words: usize,
    /// Coordinate `i` ≈ `low + step · value_i`.
    low: f32,
    step: f32,
    /// `Σ q'_i` from the quantized coordinates (`P·low + step·Σ value_i`), for the `−Σ q'`
    /// part of `⟨ō, q'⟩`.
    all_sum: f32,
    /// `‖q − c‖`.
    distance: f32,
    /// `1 / √P`.
    inverse_sqrt_padded: f32,
    /// The query quantization's share of the error bound, before the code's `1 / fit`.
    quantization: f32,
}

impl RabitqQuery {
    /// From `R·(q − c)`: normalized, then quantized to `bits` bits a coordinate.
    fn from_residual(rotated: &[f32], bits: u32) -> RabitqQuery {
        let distance = rotated.iter().map(|v| v * v).sum::<f32>().sqrt();
        let scale = if distance > 0.0 { 1.0 / distance } else { 0.0 };
        RabitqQuery::quantize(rotated, scale, distance, bits)
    }

    /// Quantizes `residual · scale` (the unit vector `q'`) to `bits` bits a coordinate,
    /// kept as bit planes.
    fn quantize(residual: &[f32], scale: f32, distance: f32, bits: u32) -> RabitqQuery {
        let padded = residual.len();
        let words = padded / 64;
        let (raw_low, raw_high) = residual
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(low, high), v| {
                (low.min(*v), high.max(*v))
            });
        let (low, high) = (raw_low * scale, raw_high * scale);
        #[allow(clippy::cast_precision_loss)]
        let levels = ((1u32 << bits) - 1) as f32;
        let step = if high > low {
            (high - low) / levels
        } else {
            0.0
        };
        let to_level = if step > 0.0 { scale / step } else { 0.0 };
        // round to nearest (values are ≥ 0, so +0.5 then truncation), clamped to the levels
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let values: Vec<u8> = residual
            .iter()
            .map(|v| ((v - raw_low) * to_level + 0.5).clamp(0.0, levels) as u8)
            .collect();
        let mut planes = vec![0u64; bits as usize * words];
        sagitta_kernels::binary_query_planes(&values, bits, &mut planes);
        let value_sum: u32 = values.iter().map(|v| u32::from(*v)).sum();
        #[allow(clippy::cast_precision_loss)]
        let padded_f = padded as f32;
        #[allow(clippy::cast_precision_loss)]
        let all_sum = low * padded_f + step * value_sum as f32;
        RabitqQuery {
            bits,
            planes,
            words,
            low,
            step,
            all_sum,
            distance,
            inverse_sqrt_padded: 1.0 / padded_f.sqrt(),
            // each 4-bit coordinate is off by up to step/2, evenly spread and independent of
            // the code's signs ±1/√P, so Δ⟨ō,q'⟩ has standard deviation step/√12: 4 of them
            quantization: QUANTIZATION_DEVIATIONS * step / 12f32.sqrt(),
        }
    }

    /// `‖q − c‖`.
    pub fn centroid_distance(&self) -> f32 {
        self.distance
    }

    /// `⟨ō, q'⟩` from `Σ_{bit set} value_i` (`weighted`) and the code's set bits:
    /// `Σ_set q'_i − Σ_clear q'_i = 2·Σ_set q'_i − Σ q'_i`, with `q'_i ≈ low + step·value_i`.
    #[inline]
    fn inner_product(&self, weighted: u32, set: f32) -> f32 {
        #[allow(clippy::cast_precision_loss)]
        let set_sum = self.low * set + self.step * weighted as f32;
        (2.0 * set_sum - self.all_sum) * self.inverse_sqrt_padded
    }

    /// The estimate and bound from a code's `weighted` sum (see [`RabitqQuery::inner_product`]).
    #[inline]
    fn estimate_from(&self, weighted: u32, norm: f32, terms: ScanTerms) -> (f32, f32) {
        let inner = self.inner_product(weighted, terms.set) * terms.inverse_fit;
        self.distance_and_bound(norm, inner, terms.spread, terms.inverse_fit)
    }

    /// `‖x − q‖² = r² + t² − 2·r·t·⟨o, q'⟩` from the estimated `inner` = `⟨o, q'⟩`, and its
    /// bound: the code's `spread` plus the query quantization's share, scaled to the
    /// distance (`r` the residual's `norm`, `t` the query's distance to the centroid).
    #[inline]
    fn distance_and_bound(
        &self,
        norm: f32,
        inner: f32,
        spread: f32,
        inverse_fit: f32,
    ) -> (f32, f32) {
        let (r, t) = (norm, self.distance);
        let estimate = r * r + t * t - 2.0 * r * t * inner;
        let error = spread + self.quantization * inverse_fit;
        (estimate, 2.0 * r * t * error)
    }

    /// The estimated squared distance from the query to the coded vector, and a bound on
    /// the estimate's error: the true squared distance lies in `estimate ± bound` with
    /// high probability (ε₀ = [`EPSILON0`], plus the query quantization's worst case).
    /// `quantizer` is the one that coded the vector.
    pub fn estimate(&self, quantizer: &Rabitq, code: &[u64], factors: CodeFactors) -> (f32, f32) {
        debug_assert_eq!(code.len(), self.words);
        let weighted = sagitta_kernels::kernels().binary_dot_planes(&self.planes, self.bits, code);
        self.estimate_from(weighted, factors.norm, quantizer.scan_terms(code, factors))
    }

    /// [`RabitqQuery::estimate`] with the code's query-independent [`ScanTerms`] given
    /// (computed once per code, as the disk index's scan does): one kernel call and a few
    /// flops, the HNSW first pass's cost per neighbor.
    #[inline]
    pub fn estimate_with(&self, code: &[u64], norm: f32, terms: ScanTerms) -> (f32, f32) {
        debug_assert_eq!(code.len(), self.words);
        let mut weighted = [0u32];
        sagitta_kernels::kernels().binary_dot_planes_batch(
            &self.planes,
            self.bits,
            code,
            &mut weighted,
        );
        self.estimate_from(weighted[0], norm, terms)
    }

    /// The estimate and bound of [`RabitqQuery::estimate`] from an extended code: `code`
    /// (its sign bits), `planes` (its `extra_bits` planes), the residual's `norm` and the
    /// code's [`ExtraTerms`]. `self` is a query from [`Rabitq::query_rotated_fine`].
    pub fn refine(
        &self,
        code: &[u64],
        planes: &[u64],
        extra_bits: u32,
        norm: f32,
        terms: ExtraTerms,
    ) -> (f32, f32) {
        debug_assert_eq!(code.len(), self.words);
        let kernels = sagitta_kernels::kernels();
        // Σ u_i·v_i, plane by plane: the sign plane is the top bit of u
        let mut weighted =
            u64::from(kernels.binary_dot_planes(&self.planes, self.bits, code)) << extra_bits;
        for (bit, plane) in planes.chunks_exact(self.words).enumerate() {
            weighted += u64::from(kernels.binary_dot_planes(&self.planes, self.bits, plane)) << bit;
        }
        // ⟨ȳ, q'⟩ = Σ u_i·q'_i − center·Σ q'_i, with q'_i ≈ low + step·v_i
        #[allow(clippy::cast_precision_loss)]
        let inner_y = self.low * terms.value_sum + self.step * weighted as f32
            - center_of(extra_bits) * self.all_sum;
        self.distance_and_bound(norm, inner_y * terms.scale, terms.spread, terms.inverse_fit)
    }

    /// [`RabitqQuery::estimate`] of back-to-back `codes` (one [`Rabitq::code_words`] slice
    /// each) with their `factors` and `terms`, into `out`; `weighted` is scratch. The codes
    /// go through the kernels' batch AND-popcount in one call.
    pub fn estimate_batch(
        &self,
        codes: &[u64],
        factors: &[CodeFactors],
        terms: &[ScanTerms],
        weighted: &mut Vec<u32>,
        out: &mut Vec<(f32, f32)>,
    ) {
        weighted.clear();
        weighted.resize(factors.len(), 0);
        sagitta_kernels::kernels().binary_dot_planes_batch(
            &self.planes,
            self.bits,
            codes,
            weighted,
        );
        out.clear();
        out.extend(
            weighted
                .iter()
                .zip(factors)
                .zip(terms)
                .map(|((weighted, factors), terms)| {
                    self.estimate_from(*weighted, factors.norm, *terms)
                }),
        );
    }
}

/// In-place orthonormal fast Walsh–Hadamard transform (`values.len()` a power of two).
fn hadamard(values: &mut [f32]) {
    let length = values.len();
    debug_assert!(length.is_power_of_two());
    let mut half = 1;
    while half < length {
        for block in values.chunks_exact_mut(2 * half) {
            let (left, right) = block.split_at_mut(half);
            for (a, b) in left.iter_mut().zip(right.iter_mut()) {
                let (x, y) = (*a, *b);
                *a = x + y;
                *b = x - y;
            }
        }
        half *= 2;
    }
    #[allow(clippy::cast_precision_loss)]
    let scale = 1.0 / (length as f32).sqrt();
    values.iter_mut().for_each(|v| *v *= scale);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaussian_rows(rows: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut random = SplitMix64(seed);
        let mut next = || {
            #[allow(clippy::cast_precision_loss)]
            let unit = (random.next() >> 11) as f32 / (1u64 << 53) as f32;
            unit
        };
        // sums of uniforms: close enough to Gaussian for a test, deterministic
        (0..rows * dim)
            .map(|_| (0..6).map(|_| next()).sum::<f32>() - 3.0)
            .collect()
    }

    /// Rows around 50 cluster centers (the same centers for every seed), as embeddings
    /// are: a row's neighbors are much nearer than the rest.
    fn clustered_rows(rows: usize, dim: usize, seed: u64) -> Vec<f32> {
        let centers = gaussian_rows(50, dim, 1_000);
        let noise = gaussian_rows(rows, dim, seed);
        let mut picks = SplitMix64(seed);
        noise
            .chunks_exact(dim)
            .flat_map(|row| {
                let center = (picks.next() % 50) as usize;
                let center = &centers[center * dim..(center + 1) * dim];
                row.iter()
                    .zip(center)
                    .map(|(n, c)| c + 0.3 * n)
                    .collect::<Vec<f32>>()
            })
            .collect()
    }

    fn squared_distance(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
    }

    #[test]
    fn the_rotation_keeps_norms_and_distances() {
        let quantizer = Rabitq::new(300, 7).unwrap();
        let rows = gaussian_rows(3, 300, 1);
        let zero = vec![0.0; 300];
        let mut a = vec![0.0; quantizer.padded_dim()];
        let mut b = vec![0.0; quantizer.padded_dim()];
        quantizer.rotate_residual(&rows[..300], &zero, &mut a);
        quantizer.rotate_residual(&rows[300..600], &zero, &mut b);
        let before = squared_distance(&rows[..300], &rows[300..600]);
        let after = squared_distance(&a, &b);
        assert!(
            (before - after).abs() <= 1e-3 * before,
            "{before} vs {after}"
        );
        assert_eq!(quantizer.padded_dim(), 320);
        // a one-hot vector ends spread over every coordinate (~1/√P each), the permutations
        // carrying it out of its first block
        let mut one_hot = vec![0.0; 300];
        one_hot[0] = 1.0;
        quantizer.rotate_residual(&one_hot, &zero, &mut a);
        let largest = a.iter().fold(0.0f32, |high, v| high.max(v.abs()));
        let small = a.iter().filter(|v| v.abs() < 1e-6).count();
        assert!(
            largest < 0.3 && small < 8,
            "largest {largest}, {small} near zero"
        );
    }

    #[test]
    fn estimates_fall_within_their_bound_and_are_unbiased() {
        for dim in [128, 384, 768] {
            let quantizer = Rabitq::new(dim, 42).unwrap();
            let data = gaussian_rows(400, dim, 3);
            let queries = gaussian_rows(20, dim, 4);
            let centroid: Vec<f32> = (0..dim)
                .map(|j| data.iter().skip(j).step_by(dim).sum::<f32>() / 400.0)
                .collect();
            let mut scratch = vec![0.0; quantizer.padded_dim()];
            let mut code = vec![0u64; quantizer.code_words()];
            let (mut outside, mut total, mut relative_error_sum) = (0, 0, 0.0f64);
            for query in queries.chunks_exact(dim) {
                let prepared = quantizer.query(query, &centroid);
                for row in data.chunks_exact(dim) {
                    let factors = quantizer.encode(row, &centroid, &mut scratch, &mut code);
                    let (estimate, bound) = prepared.estimate(&quantizer, &code, factors);
                    // the HNSW first pass's path: stored terms, the spread from 1 / fit
                    let terms = quantizer.scan_terms(&code, factors);
                    let spread = quantizer.spread_of(terms.inverse_fit);
                    assert!((spread - terms.spread).abs() <= 1e-5 * terms.spread.max(1.0));
                    let with =
                        prepared.estimate_with(&code, factors.norm, ScanTerms { spread, ..terms });
                    assert!((with.0 - estimate).abs() <= 1e-4 * estimate.abs().max(1.0));
                    assert!((with.1 - bound).abs() <= 1e-4 * bound.abs().max(1.0));
                    let truth = squared_distance(row, query);
                    total += 1;
                    outside += usize::from((estimate - truth).abs() > bound);
                    relative_error_sum += f64::from((estimate - truth) / truth);
                }
            }
            // the bound holds with high probability (ε₀ = 1.9 is ~1.9 deviations, widened
            // by the query quantization's allowance: ~1% fall outside), the estimator is
            // unbiased
            assert!(
                outside * 200 <= total * 3,
                "dim {dim}: {outside} of {total} outside"
            );
            #[allow(clippy::cast_precision_loss)]
            let bias = relative_error_sum / total as f64;
            assert!(bias.abs() < 0.01, "dim {dim}: mean relative error {bias}");
        }
    }

    /// The search the bound is for: every code whose lower bound is within the 10th
    /// smallest upper bound is reranked exactly; that finds the true top 10 while
    /// reranking a small fraction of the points (clustered data, one code centroid).
    #[test]
    fn reranking_within_the_bound_finds_the_true_nearest_and_skips_most() {
        let dim = 384;
        let quantizer = Rabitq::new(dim, 9).unwrap();
        let data = clustered_rows(3_000, dim, 5);
        let zero = vec![0.0; dim];
        let mut scratch = vec![0.0; quantizer.padded_dim()];
        let codes: Vec<(Vec<u64>, CodeFactors)> = data
            .chunks_exact(dim)
            .map(|row| {
                let mut code = vec![0u64; quantizer.code_words()];
                let factors = quantizer.encode(row, &zero, &mut scratch, &mut code);
                (code, factors)
            })
            .collect();
        let (mut found, mut wanted, mut reranked) = (0, 0, 0);
        for query in clustered_rows(20, dim, 6).chunks_exact(dim) {
            let prepared = quantizer.query(query, &zero);
            let mut truth: Vec<(f32, usize)> = data
                .chunks_exact(dim)
                .enumerate()
                .map(|(index, row)| (squared_distance(row, query), index))
                .collect();
            truth.sort_by(|a, b| a.0.total_cmp(&b.0));
            let bounds: Vec<(f32, f32)> = codes
                .iter()
                .map(|(code, factors)| prepared.estimate(&quantizer, code, *factors))
                .collect();
            let mut uppers: Vec<f32> = bounds.iter().map(|(e, b)| e + b).collect();
            uppers.sort_by(f32::total_cmp);
            let kth_upper = uppers[9];
            let shortlist: Vec<usize> = (0..codes.len())
                .filter(|index| bounds[*index].0 - bounds[*index].1 <= kth_upper)
                .collect();
            reranked += shortlist.len();
            found += truth[..10]
                .iter()
                .filter(|(_, index)| shortlist.contains(index))
                .count();
            wanted += 10;
        }
        assert!(found * 100 >= wanted * 99, "{found} of {wanted}");
        assert!(
            reranked * 10 < 20 * codes.len(),
            "reranked {reranked} of {}",
            20 * codes.len()
        );
    }

    /// Extended codes: within their bound, unbiased, and the more bits the tighter both
    /// the error and the bound (against the 1-bit estimate of the same vectors).
    #[test]
    fn extended_codes_tighten_the_estimate_and_keep_their_bound() {
        let dim = 384;
        let quantizer = Rabitq::new(dim, 11).unwrap();
        let data = gaussian_rows(300, dim, 13);
        let queries = gaussian_rows(10, dim, 14);
        let zero = vec![0.0; dim];
        let rotated_zero = quantizer.rotate(&zero);
        let mut scratch = vec![0.0; quantizer.padded_dim()];
        let mut code = vec![0u64; quantizer.code_words()];
        let mut previous = (f64::INFINITY, f32::INFINITY);
        for extra_bits in 0..=MAX_EXTRA_BITS {
            let mut planes = vec![0u64; quantizer.extra_words(extra_bits)];
            let (mut outside, mut total) = (0, 0);
            let (mut error_sum, mut bias_sum, mut bound_sum) = (0.0f64, 0.0f64, 0.0f32);
            for query in queries.chunks_exact(dim) {
                let rotated = quantizer.rotate(query);
                let coarse = quantizer.query_rotated(&rotated, &rotated_zero);
                let fine = quantizer.query_rotated_fine(&rotated, &rotated_zero);
                for row in data.chunks_exact(dim) {
                    let factors = quantizer.encode(row, &zero, &mut scratch, &mut code);
                    let (estimate, bound) = if extra_bits == 0 {
                        coarse.estimate(&quantizer, &code, factors)
                    } else {
                        let fit = quantizer.encode_extra(&scratch, extra_bits, &mut planes);
                        let terms = quantizer.extra_terms(&code, &planes, extra_bits, fit);
                        fine.refine(&code, &planes, extra_bits, factors.norm, terms)
                    };
                    let truth = squared_distance(row, query);
                    total += 1;
                    outside += usize::from((estimate - truth).abs() > bound);
                    error_sum += f64::from((estimate - truth).abs());
                    bias_sum += f64::from((estimate - truth) / truth);
                    bound_sum += bound;
                }
            }
            // the 1-bit bound's own test uses centred clustered data; here ~1% fall outside
            let allowed = if extra_bits == 0 {
                total / 50
            } else {
                total / 100
            };
            assert!(outside <= allowed, "{extra_bits} bits: {outside} outside");
            #[allow(clippy::cast_precision_loss)]
            let (error, bias) = (error_sum / total as f64, bias_sum / total as f64);
            assert!(bias.abs() < 0.01, "{extra_bits} bits: bias {bias}");
            // each extra bit about halves the error and the bound
            assert!(error * 1.7 < previous.0, "{extra_bits} bits: error {error}");
            assert!(
                bound_sum * 1.6 < previous.1,
                "{extra_bits} bits: bound {bound_sum}"
            );
            previous = (error, bound_sum);
        }
    }

    #[test]
    fn bad_dimensions_are_refused_by_name() {
        let error = Rabitq::new(0, 1).unwrap_err().to_string();
        assert!(error.contains("dim"), "{error}");
    }
}
