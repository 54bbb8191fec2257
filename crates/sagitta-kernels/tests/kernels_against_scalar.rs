//! Every kernel at every level this CPU supports, against the scalar reference (which is in
//! turn checked against naive f64 / i64 loops). Integer results must be equal; f32 results
//! equal up to rounding: |simd - scalar| <= 1e-4 * (1 + sum of |terms|).

use half::f16;
use proptest::collection::vec;
use proptest::prelude::*;
use sagitta_kernels::{available_simd_levels, Kernels, SimdLevel, MAX_INTEGER_KERNEL_DIMENSION};

const MAX_LENGTH: usize = 1100;

/// Lengths around every register width and unroll boundary.
const EDGE_LENGTHS: [usize; 26] = [
    0, 1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 383,
    385, 767,
];

fn all_kernels() -> Vec<Kernels> {
    available_simd_levels()
        .into_iter()
        .map(|level| Kernels::for_level(level).expect("available level must build"))
        .collect()
}

fn scalar() -> Kernels {
    Kernels::for_level(SimdLevel::Scalar).unwrap()
}

fn assert_close(level: SimdLevel, name: &str, actual: f32, expected: f32, magnitude: f64) {
    let tolerance = 1e-4 * (1.0 + magnitude);
    let error = (f64::from(actual) - f64::from(expected)).abs();
    assert!(
        error <= tolerance,
        "{name} at {level:?}: {actual} vs {expected} (error {error}, tolerance {tolerance})"
    );
}

fn magnitude_dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) * f64::from(y)).abs())
        .sum()
}

fn exact_dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum()
}

fn exact_l2(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
        .sum()
}

fn widen_f16(values: &[f16]) -> Vec<f32> {
    values.iter().map(|value| value.to_f32()).collect()
}

fn equal_length_pair<A: std::fmt::Debug, B: std::fmt::Debug>(
    left: impl Strategy<Value = A> + Clone,
    right: impl Strategy<Value = B> + Clone,
    max_length: usize,
) -> impl Strategy<Value = (Vec<A>, Vec<B>)> {
    (0..=max_length)
        .prop_flat_map(move |length| (vec(left.clone(), length), vec(right.clone(), length)))
}

fn f32_value() -> impl Strategy<Value = f32> + Clone {
    prop_oneof![8 => -10.0f32..10.0, 1 => Just(0.0f32), 1 => -1000.0f32..1000.0]
}

fn f16_value() -> impl Strategy<Value = f16> + Clone {
    (-10.0f32..10.0).prop_map(f16::from_f32)
}

/// i8 with the extremes over-represented, to catch saturation.
fn i8_value() -> impl Strategy<Value = i8> + Clone {
    prop_oneof![4 => any::<i8>(), 1 => Just(i8::MIN), 1 => Just(i8::MAX)]
}

fn u8_value() -> impl Strategy<Value = u8> + Clone {
    prop_oneof![4 => any::<u8>(), 1 => Just(u8::MAX), 1 => Just(0u8)]
}

fn check_f32_pair(a: &[f32], b: &[f32]) {
    let reference = scalar();
    let magnitude = magnitude_dot(a, b);
    let l2_magnitude = exact_l2(a, b);
    assert_close(
        SimdLevel::Scalar,
        "scalar dot_f32",
        (reference.dot_f32)(a, b),
        exact_dot(a, b) as f32,
        magnitude,
    );
    assert_close(
        SimdLevel::Scalar,
        "scalar l2_squared_f32",
        (reference.l2_squared_f32)(a, b),
        l2_magnitude as f32,
        l2_magnitude,
    );
    for kernels in all_kernels() {
        let level = kernels.level;
        assert_close(
            level,
            "dot_f32",
            (kernels.dot_f32)(a, b),
            (reference.dot_f32)(a, b),
            magnitude,
        );
        assert_close(
            level,
            "l2_squared_f32",
            (kernels.l2_squared_f32)(a, b),
            (reference.l2_squared_f32)(a, b),
            l2_magnitude,
        );
        assert_close(
            level,
            "norm_squared_f32",
            (kernels.norm_squared_f32)(a),
            (reference.norm_squared_f32)(a),
            magnitude_dot(a, a),
        );
        // Asymmetric kernels reuse `b` rounded to f16 / i8 / u8.
        let b_f16: Vec<f16> = b.iter().map(|&value| f16::from_f32(value)).collect();
        let b_f16_widened = widen_f16(&b_f16);
        assert_close(
            level,
            "dot_f32_f16",
            (kernels.dot_f32_f16)(a, &b_f16),
            (reference.dot_f32_f16)(a, &b_f16),
            magnitude_dot(a, &b_f16_widened),
        );
        assert_close(
            level,
            "l2_squared_f32_f16",
            (kernels.l2_squared_f32_f16)(a, &b_f16),
            (reference.l2_squared_f32_f16)(a, &b_f16),
            exact_l2(a, &b_f16_widened),
        );
    }
}

fn check_f16_pair(a: &[f16], b: &[f16]) {
    let reference = scalar();
    let (a_wide, b_wide) = (widen_f16(a), widen_f16(b));
    let magnitude = magnitude_dot(&a_wide, &b_wide);
    let l2_magnitude = exact_l2(&a_wide, &b_wide);
    assert_close(
        SimdLevel::Scalar,
        "scalar dot_f16",
        (reference.dot_f16)(a, b),
        exact_dot(&a_wide, &b_wide) as f32,
        magnitude,
    );
    for kernels in all_kernels() {
        let level = kernels.level;
        assert_close(
            level,
            "dot_f16",
            (kernels.dot_f16)(a, b),
            (reference.dot_f16)(a, b),
            magnitude,
        );
        assert_close(
            level,
            "l2_squared_f16",
            (kernels.l2_squared_f16)(a, b),
            (reference.l2_squared_f16)(a, b),
            l2_magnitude,
        );
    }
}

fn exact_dot_i8(a: &[i8], b: &[i8]) -> i64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i64::from(x) * i64::from(y))
        .sum()
}

fn exact_l2_i8(a: &[i8], b: &[i8]) -> i64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (i64::from(x) - i64::from(y)).pow(2))
        .sum()
}

fn exact_dot_u8_i8(a: &[u8], b: &[i8]) -> i64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i64::from(x) * i64::from(y))
        .sum()
}

fn check_i8_pair(a: &[i8], b: &[i8], a_unsigned: &[u8]) {
    let reference = scalar();
    assert_eq!(i64::from((reference.dot_i8)(a, b)), exact_dot_i8(a, b));
    assert_eq!(
        i64::from((reference.l2_squared_i8)(a, b)),
        exact_l2_i8(a, b)
    );
    assert_eq!(
        i64::from((reference.dot_u8_i8)(a_unsigned, b)),
        exact_dot_u8_i8(a_unsigned, b)
    );
    for kernels in all_kernels() {
        let level = kernels.level;
        assert_eq!(
            (kernels.dot_i8)(a, b),
            (reference.dot_i8)(a, b),
            "dot_i8 at {level:?}, length {}",
            a.len()
        );
        assert_eq!(
            (kernels.l2_squared_i8)(a, b),
            (reference.l2_squared_i8)(a, b),
            "l2_squared_i8 at {level:?}"
        );
        assert_eq!(
            (kernels.dot_u8_i8)(a_unsigned, b),
            (reference.dot_u8_i8)(a_unsigned, b),
            "dot_u8_i8 at {level:?}"
        );
    }
}

fn check_f32_codes(query: &[f32], signed_codes: &[i8], unsigned_codes: &[u8]) {
    let reference = scalar();
    let signed_wide: Vec<f32> = signed_codes.iter().map(|&code| f32::from(code)).collect();
    let unsigned_wide: Vec<f32> = unsigned_codes.iter().map(|&code| f32::from(code)).collect();
    for kernels in all_kernels() {
        let level = kernels.level;
        assert_close(
            level,
            "dot_f32_i8",
            (kernels.dot_f32_i8)(query, signed_codes),
            exact_dot(query, &signed_wide) as f32,
            magnitude_dot(query, &signed_wide),
        );
        assert_close(
            level,
            "dot_f32_i8 vs scalar",
            (kernels.dot_f32_i8)(query, signed_codes),
            (reference.dot_f32_i8)(query, signed_codes),
            magnitude_dot(query, &signed_wide),
        );
        assert_close(
            level,
            "dot_f32_u8",
            (kernels.dot_f32_u8)(query, unsigned_codes),
            (reference.dot_f32_u8)(query, unsigned_codes),
            magnitude_dot(query, &unsigned_wide),
        );
    }
}

fn check_bits(a: &[u64], b: &[u64]) {
    let hamming: u32 = a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum();
    let and_count: u32 = a.iter().zip(b).map(|(x, y)| (x & y).count_ones()).sum();
    for kernels in all_kernels() {
        assert_eq!(
            (kernels.hamming_u64)(a, b),
            hamming,
            "hamming_u64 at {:?}",
            kernels.level
        );
        assert_eq!(
            (kernels.and_popcount_u64)(a, b),
            and_count,
            "and_popcount_u64 at {:?}",
            kernels.level
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn f32_kernels_match_scalar((a, b) in equal_length_pair(f32_value(), f32_value(), MAX_LENGTH)) {
        check_f32_pair(&a, &b);
    }

    #[test]
    fn f16_kernels_match_scalar((a, b) in equal_length_pair(f16_value(), f16_value(), MAX_LENGTH)) {
        check_f16_pair(&a, &b);
    }

    #[test]
    fn int8_kernels_match_scalar(
        ((a, b), a_unsigned) in equal_length_pair(i8_value(), i8_value(), MAX_LENGTH)
            .prop_flat_map(|(a, b)| { let length = a.len(); (Just((a, b)), vec(u8_value(), length)) })
    ) {
        check_i8_pair(&a, &b, &a_unsigned);
    }

    #[test]
    fn asymmetric_kernels_match_scalar(
        ((query, signed_codes), unsigned_codes) in equal_length_pair(f32_value(), i8_value(), MAX_LENGTH)
            .prop_flat_map(|(query, codes)| { let length = query.len(); (Just((query, codes)), vec(u8_value(), length)) })
    ) {
        check_f32_codes(&query, &signed_codes, &unsigned_codes);
    }

    #[test]
    fn bit_kernels_match_naive((a, b) in equal_length_pair(any::<u64>(), any::<u64>(), 100)) {
        check_bits(&a, &b);
    }
}

#[test]
fn edge_lengths_with_extreme_integers() {
    let extremes: [(i8, i8, u8); 6] = [
        (i8::MIN, i8::MIN, u8::MAX),
        (i8::MIN, i8::MAX, u8::MAX),
        (i8::MAX, i8::MIN, u8::MAX),
        (i8::MAX, i8::MAX, 0),
        (-1, 1, 1),
        (0, i8::MIN, u8::MAX),
    ];
    for length in EDGE_LENGTHS.into_iter().chain([768, 1024, 1536, 4096]) {
        for (a_value, b_value, unsigned_value) in extremes {
            let a = vec![a_value; length];
            let b = vec![b_value; length];
            let a_unsigned = vec![unsigned_value; length];
            check_i8_pair(&a, &b, &a_unsigned);
            // Alternating signs too: positive and negative products must not cancel wrongly.
            let alternating: Vec<i8> = (0..length)
                .map(|index| if index % 2 == 0 { i8::MIN } else { i8::MAX })
                .collect();
            check_i8_pair(&alternating, &b, &a_unsigned);
        }
    }
}

/// At the documented limit the worst cases are still exact at every level.
#[test]
fn integer_kernels_exact_at_dimension_limit() {
    let length = MAX_INTEGER_KERNEL_DIMENSION;
    let cases: [(i8, i8, u8); 3] = [
        (i8::MIN, i8::MAX, u8::MAX),
        (i8::MAX, i8::MIN, u8::MAX),
        (i8::MIN, i8::MIN, u8::MAX),
    ];
    for (a_value, b_value, unsigned_value) in cases {
        let a = vec![a_value; length];
        let b = vec![b_value; length];
        let a_unsigned = vec![unsigned_value; length];
        for kernels in all_kernels() {
            let level = kernels.level;
            assert_eq!(
                i64::from((kernels.dot_i8)(&a, &b)),
                exact_dot_i8(&a, &b),
                "dot_i8 at {level:?}"
            );
            assert_eq!(
                i64::from((kernels.l2_squared_i8)(&a, &b)),
                exact_l2_i8(&a, &b),
                "l2_squared_i8 at {level:?}"
            );
            assert_eq!(
                i64::from((kernels.dot_u8_i8)(&a_unsigned, &b)),
                exact_dot_u8_i8(&a_unsigned, &b),
                "dot_u8_i8 at {level:?}"
            );
        }
    }
}

#[test]
fn edge_lengths_f32() {
    for length in EDGE_LENGTHS {
        let a: Vec<f32> = (0..length)
            .map(|index| (index as f32 * 0.37).sin())
            .collect();
        let b: Vec<f32> = (0..length)
            .map(|index| (index as f32 * 0.11).cos())
            .collect();
        check_f32_pair(&a, &b);
        let a_f16: Vec<f16> = a.iter().map(|&value| f16::from_f32(value)).collect();
        let b_f16: Vec<f16> = b.iter().map(|&value| f16::from_f32(value)).collect();
        check_f16_pair(&a_f16, &b_f16);
        let codes: Vec<i8> = (0..length)
            .map(|index| (index * 37 % 256) as u8 as i8)
            .collect();
        let unsigned_codes: Vec<u8> = (0..length).map(|index| (index * 53 % 256) as u8).collect();
        check_f32_codes(&a, &codes, &unsigned_codes);
        let words: Vec<u64> = (0..length)
            .map(|index| (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        let other_words: Vec<u64> = words
            .iter()
            .map(|word| word.rotate_left(17) ^ 0xFFFF_0000)
            .collect();
        check_bits(&words, &other_words);
    }
}

#[test]
fn empty_inputs_return_zero() {
    for kernels in all_kernels() {
        assert_eq!((kernels.dot_f32)(&[], &[]), 0.0);
        assert_eq!((kernels.l2_squared_f32)(&[], &[]), 0.0);
        assert_eq!((kernels.norm_squared_f32)(&[]), 0.0);
        assert_eq!((kernels.dot_f16)(&[], &[]), 0.0);
        assert_eq!((kernels.dot_i8)(&[], &[]), 0);
        assert_eq!((kernels.l2_squared_i8)(&[], &[]), 0);
        assert_eq!((kernels.dot_u8_i8)(&[], &[]), 0);
        assert_eq!((kernels.dot_f32_i8)(&[], &[]), 0.0);
        assert_eq!((kernels.dot_f32_u8)(&[], &[]), 0.0);
        assert_eq!((kernels.hamming_u64)(&[], &[]), 0);
        assert_eq!((kernels.and_popcount_u64)(&[], &[]), 0);
        assert_eq!(kernels.cosine_f32(&[], &[]), 0.0);
    }
}
