//! Golden files: indexes written by format version 1 (see examples/make_golden.rs) must
//! keep loading, answering correctly, and re-serializing to the identical bytes.

use sagitta_index::flat::FlatIndex;
use sagitta_index::hnsw::{HnswIndex, HnswSearchParams, Quantization};
use sagitta_index::Metric;

const GOLDEN_FLAT: &[u8] = include_bytes!("golden/flat-v1-l2.sgt");
const GOLDEN_HNSW_NONE: &[u8] = include_bytes!("golden/hnsw-v1-cosine-none.sgt");
const GOLDEN_HNSW_SQ8: &[u8] = include_bytes!("golden/hnsw-v1-cosine-sq8.sgt");

#[test]
fn golden_flat_v1_loads_answers_and_round_trips() {
    let index = FlatIndex::load(&mut &GOLDEN_FLAT[..]).unwrap();
    assert_eq!(
        (index.len(), index.dim(), index.metric()),
        (1_000, 8, Metric::L2)
    );
    assert_eq!(index.labels()[0], 1_000);
    assert_eq!(index.labels()[999], 1_000 + 999 * 3);
    // a stored row is its own nearest neighbor (distance 0)
    let results = index.search(index.vector(42), 1, 1).unwrap();
    assert_eq!(results.scores[0], 0.0);
    let mut bytes = Vec::new();
    index.save(&mut bytes).unwrap();
    assert_eq!(bytes, GOLDEN_FLAT);
}

#[test]
fn golden_hnsw_v1_loads_answers_and_round_trips() {
    for (golden, quantization) in [
        (GOLDEN_HNSW_NONE, Quantization::None),
        (GOLDEN_HNSW_SQ8, Quantization::Sq8),
    ] {
        let index = HnswIndex::load(&mut &golden[..]).unwrap();
        assert_eq!(index.len(), 1_000);
        assert_eq!(index.params().quantization, quantization);
        assert_eq!(index.params().m, 4);
        assert_eq!(index.metric(), Metric::Cosine);
        assert_eq!(
            index.sq8_scale().is_some(),
            quantization == Quantization::Sq8
        );
        let deleted = index.node_of(1_015).unwrap();
        assert!(index.is_deleted(deleted));
        // exhaustive ef over 1,000 points: results must equal an exact scan of the stored rows
        let query: Vec<f32> = index.vector(17).unwrap().to_vec();
        let hits = index
            .search(&query, HnswSearchParams::new(5, 1_000))
            .unwrap();
        let mut exact: Vec<(f32, u64)> = (0..1_000u32)
            .filter(|node| *node != deleted)
            .map(|node| {
                let row = index.vector(node).unwrap();
                let dot: f32 = row.iter().zip(&query).map(|(a, b)| a * b).sum();
                (dot, index.label(node))
            })
            .collect();
        exact.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for (hit, (score, _)) in hits.iter().zip(&exact) {
            assert!(
                (hit.score - score).abs() < 1e-5,
                "{quantization:?} {hits:?} {:?}",
                &exact[..5]
            );
        }
        let mut bytes = Vec::new();
        index.save(&mut bytes).unwrap();
        assert_eq!(
            bytes, golden,
            "{quantization:?}: re-serialized bytes differ"
        );
    }
}
