//! Batch and many-queries entry points against the per-pair kernels (bit for bit within a
//! level), the 1-bit helpers against naive loops, and the free functions' dispatch.

use half::f16;
use proptest::collection::vec;
use proptest::prelude::*;
use sagitta_kernels::{
    available_simd_levels, binary_cosine_estimate, binary_dot_planes, binary_encode_signs,
    binary_query_planes, detected_simd_level, kernels, Kernels, SimdLevel,
};

fn all_kernels() -> Vec<Kernels> {
    available_simd_levels()
        .into_iter()
        .map(|level| Kernels::for_level(level).unwrap())
        .collect()
}

/// Deterministic pseudo-random values in [-1, 1) (SplitMix64).
fn pseudo_random_f32(count: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..count)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut mixed = state;
            mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            mixed ^= mixed >> 31;
            (mixed >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn check_batches(dim: usize, row_count: usize, query_count: usize, seed: u64) {
    let matrix = pseudo_random_f32(row_count * dim, seed);
    let queries = pseudo_random_f32(query_count * dim, seed ^ 0xABCD);
    for kernels in all_kernels() {
        let level = kernels.level;
        for query_index in 0..query_count {
            let query = &queries[query_index * dim..][..dim];
            let mut dots = vec![f32::NAN; row_count];
            let mut distances = vec![f32::NAN; row_count];
            kernels.dot_f32_batch(query, &matrix, dim, &mut dots);
            kernels.l2_squared_f32_batch(query, &matrix, dim, &mut distances);
            for row_index in 0..row_count {
                let row = &matrix[row_index * dim..][..dim];
                assert_eq!(
                    dots[row_index].to_bits(),
                    (kernels.dot_f32)(query, row).to_bits(),
                    "dot_f32_batch at {level:?}, dim {dim}, row {row_index}"
                );
                assert_eq!(
                    distances[row_index].to_bits(),
                    (kernels.l2_squared_f32)(query, row).to_bits(),
                    "l2_squared_f32_batch at {level:?}, dim {dim}, row {row_index}"
                );
            }
        }
        let mut dots = vec![f32::NAN; query_count * row_count];
        let mut distances = vec![f32::NAN; query_count * row_count];
        kernels.dot_f32_many(&queries, &matrix, dim, &mut dots);
        kernels.l2_squared_f32_many(&queries, &matrix, dim, &mut distances);
        for query_index in 0..query_count {
            let query = &queries[query_index * dim..][..dim];
            for row_index in 0..row_count {
                let row = &matrix[row_index * dim..][..dim];
                let position = query_index * row_count + row_index;
                assert_eq!(
                    dots[position].to_bits(),
                    (kernels.dot_f32)(query, row).to_bits(),
                    "dot_f32_many at {level:?}, dim {dim}, query {query_index}, row {row_index}"
                );
                assert_eq!(
                    distances[position].to_bits(),
                    (kernels.l2_squared_f32)(query, row).to_bits(),
                    "l2_squared_f32_many at {level:?}, dim {dim}, query {query_index}, row {row_index}"
                );
            }
        }
    }
}

#[test]
fn batch_and_many_equal_pairwise_at_edge_sizes() {
    for dim in [1, 3, 7, 16, 17, 33, 64, 100, 383, 385, 768] {
        for (row_count, query_count) in [(0, 3), (1, 1), (5, 4), (9, 7), (13, 9)] {
            check_batches(
                dim,
                row_count,
                query_count,
                dim as u64 * 31 + row_count as u64,
            );
        }
    }
}

/// Enough rows that the many-queries loop uses several cache tiles (256 KiB each).
#[test]
fn many_queries_across_tiles() {
    check_batches(1024, 150, 6, 7);
}

#[test]
fn zero_dimension_batches() {
    for kernels in all_kernels() {
        let mut out = vec![f32::NAN; 4];
        kernels.dot_f32_batch(&[], &[], 0, &mut out);
        assert_eq!(out, [0.0; 4]);
        let mut out = vec![f32::NAN; 6];
        kernels.dot_f32_many(&[], &[], 0, &mut out);
        assert_eq!(out, [0.0; 6]);
        let mut integer_out = vec![-1; 3];
        kernels.dot_u8_i8_batch(&[], &[], 0, 0, &mut integer_out);
        assert_eq!(integer_out, [0; 3]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn batch_and_many_equal_pairwise(dim in 1usize..200, row_count in 0usize..20, query_count in 0usize..10, seed in any::<u64>()) {
        check_batches(dim, row_count, query_count, seed);
    }

    #[test]
    fn strided_u8_i8_batch_equals_pairwise(
        dim in 0usize..300,
        padding in 0usize..70,
        row_count in 0usize..12,
        seed in any::<u64>(),
    ) {
        let row_stride = dim + padding;
        let bytes = |count: usize, salt: u64| -> Vec<u8> {
            pseudo_random_f32(count, seed ^ salt).iter().map(|value| ((value + 1.0) * 127.9) as u8).collect()
        };
        let query = bytes(dim, 1);
        // Padding bytes are garbage that must be ignored; the matrix may end right after the
        // last row's `dim` values.
        let matrix_length = if row_count == 0 { 0 } else { (row_count - 1) * row_stride + dim };
        let matrix: Vec<i8> = bytes(matrix_length, 2).into_iter().map(u8::cast_signed).collect();
        for kernels in all_kernels() {
            let mut out = vec![i32::MIN; row_count];
            kernels.dot_u8_i8_batch(&query, &matrix, row_stride, dim, &mut out);
            for (row_index, &result) in out.iter().enumerate() {
                let row = &matrix[row_index * row_stride..][..dim];
                prop_assert_eq!(result, (kernels.dot_u8_i8)(&query, row), "level {:?}", kernels.level);
            }
        }
    }

    #[test]
    fn binary_helpers_match_naive(
        (vector, other) in (0usize..700).prop_flat_map(|dim| (vec(-1.0f32..1.0, dim), vec(-1.0f32..1.0, dim))),
        bits in 1u32..=8,
        seed in any::<u64>(),
    ) {
        let dim = vector.len();
        let words = dim.div_ceil(64);
        let mut code = vec![u64::MAX; words];
        let mut other_code = vec![u64::MAX; words];
        binary_encode_signs(&vector, &mut code);
        binary_encode_signs(&other, &mut other_code);
        for (index, &value) in vector.iter().enumerate() {
            prop_assert_eq!((code[index / 64] >> (index % 64)) & 1 == 1, value > 0.0);
        }
        // Padding bits are zero.
        if dim % 64 != 0 {
            prop_assert_eq!(code[words - 1] >> (dim % 64), 0);
        }
        let differing = vector.iter().zip(&other).filter(|(x, y)| (**x > 0.0) != (**y > 0.0)).count();
        let expected_estimate = (std::f64::consts::PI * differing as f64 / dim.max(1) as f64).cos() as f32;
        let estimate = binary_cosine_estimate(&code, &other_code, dim);
        if dim == 0 {
            prop_assert_eq!(estimate, 0.0);
        } else {
            prop_assert!((estimate - expected_estimate).abs() <= 1e-6);
        }

        let query_codes: Vec<u8> = pseudo_random_f32(dim, seed)
            .iter()
            .map(|value| (((value + 1.0) * 0.5 * (1u32 << bits) as f32) as u32).min((1 << bits) - 1) as u8)
            .collect();
        let mut planes = vec![u64::MAX; bits as usize * words];
        binary_query_planes(&query_codes, bits, &mut planes);
        let expected_dot: u32 = query_codes
            .iter()
            .enumerate()
            .filter(|(index, _)| (code[index / 64] >> (index % 64)) & 1 == 1)
            .map(|(_, &query_code)| u32::from(query_code))
            .sum();
        prop_assert_eq!(binary_dot_planes(&planes, bits, &code), expected_dot);
        // the batch form over [code, other_code, code]: each equal to the single form
        let codes: Vec<u64> = code.iter().chain(&other_code).chain(&code).copied().collect();
        let other_dot = binary_dot_planes(&planes, bits, &other_code);
        for kernels in all_kernels() {
            let mut batch = vec![u32::MAX; if words == 0 { 0 } else { 3 }];
            kernels.binary_dot_planes_batch(&planes, bits, &codes, &mut batch);
            if words > 0 {
                prop_assert_eq!(&batch, &vec![expected_dot, other_dot, expected_dot], "level {:?}", kernels.level);
            }
            prop_assert_eq!(kernels.binary_dot_planes(&planes, bits, &code), expected_dot, "level {:?}", kernels.level);
            prop_assert_eq!(kernels.binary_cosine_estimate(&code, &other_code, dim), estimate);
        }
    }
}

#[test]
fn binary_query_planes_layout() {
    // 3-bit codes over 65 dimensions: 2 words per plane.
    let mut query_codes = vec![0u8; 65];
    query_codes[0] = 0b101;
    query_codes[64] = 0b011;
    let mut planes = vec![0u64; 3 * 2];
    binary_query_planes(&query_codes, 3, &mut planes);
    assert_eq!(planes, [1, 1, 0, 1, 1, 0]);
    let code = [1u64, 1];
    assert_eq!(binary_dot_planes(&planes, 3, &code), 5 + 3);
}

#[test]
fn cosine_functions() {
    let a = [1.0f32, 2.0, 3.0];
    let b = [2.0f32, 4.0, 6.0];
    assert!((sagitta_kernels::cosine_f32(&a, &b) - 1.0).abs() < 1e-6);
    assert_eq!(sagitta_kernels::cosine_f32(&a, &[0.0; 3]), 0.0);
    let c = [-1.0f32, 0.5, 0.0];
    let expected = (-1.0 + 1.0) / (14.0f32.sqrt() * 1.25f32.sqrt());
    assert!((sagitta_kernels::cosine_f32(&a, &c) - expected).abs() < 1e-6);
    let a_f16 = a.map(f16::from_f32);
    let negated = a.map(|value| f16::from_f32(-value));
    assert!((sagitta_kernels::cosine_f16(&a_f16, &negated) + 1.0).abs() < 1e-6);
    assert_eq!(sagitta_kernels::cosine_f16(&a_f16, &[f16::ZERO; 3]), 0.0);
}

#[test]
fn dispatch_and_levels() {
    let levels = available_simd_levels();
    assert_eq!(levels[0], SimdLevel::Scalar);
    assert_eq!(*levels.last().unwrap(), detected_simd_level());
    assert_eq!(kernels().level, detected_simd_level());
    for level in SimdLevel::ALL {
        assert_eq!(
            Kernels::for_level(level).is_some(),
            levels.contains(&level),
            "{level:?}"
        );
        if let Some(table) = Kernels::for_level(level) {
            assert_eq!(table.level, level);
        }
    }
    let names: Vec<&str> = SimdLevel::ALL.iter().map(|level| level.name()).collect();
    assert_eq!(names, ["scalar", "neon", "avx2", "avx512", "avx512-vnni"]);
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512vnni") && std::is_x86_feature_detected!("avx512bw")
        {
            assert_eq!(detected_simd_level(), SimdLevel::Avx512Vnni);
        }
    }
    // The free functions use the best kernels.
    let a = [1.0f32, -2.0, 3.5];
    assert_eq!(
        sagitta_kernels::dot_f32(&a, &a),
        (kernels().dot_f32)(&a, &a)
    );
    assert_eq!(
        sagitta_kernels::dot_i8(&[-128, 127], &[-128, -128]),
        16384 - 16256
    );
    assert_eq!(
        sagitta_kernels::dot_u8_i8(&[255, 255], &[-128, -128]),
        -65280
    );
    assert_eq!(sagitta_kernels::hamming_u64(&[u64::MAX], &[0]), 64);
    println!(
        "detected SIMD level: {}, available: {levels:?}",
        detected_simd_level()
    );
}
