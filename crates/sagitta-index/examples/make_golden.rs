//! Writes the golden index files of the current format version into `tests/golden/`.
//! Run once per new format version and commit the output; older goldens stay forever so
//! every later version proves it still opens them:
//!
//! `cargo run -p sagitta-index --example make_golden`

use std::path::Path;

use sagitta_index::flat::FlatIndex;
use sagitta_index::hnsw::{HnswIndex, HnswParams, Quantization};
use sagitta_index::Metric;

const DIM: usize = 8;
/// At least `SQ8_TRAINING_ROWS_MIN`, so the sq8 golden carries trained codes.
const COUNT: usize = 1_000;

/// Deterministic, well-spread data without a random number generator crate: the splitmix64
/// finalizer of the element index, scaled to [-1, 1) (exact integer steps, identical on every
/// machine).
fn vectors() -> Vec<f32> {
    (0..COUNT * DIM)
        .map(|i| {
            let mut x = (i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
            x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            x ^= x >> 31;
            #[allow(clippy::cast_precision_loss)]
            let value = (x % 4_096) as f32 / 2_048.0 - 1.0;
            value
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    std::fs::create_dir_all(&directory)?;
    let data = vectors();
    let labels: Vec<u64> = (0..COUNT as u64).map(|i| 1_000 + i * 3).collect();

    let mut flat = FlatIndex::new(DIM, Metric::L2)?;
    flat.add(&data, &labels)?;
    let mut bytes = Vec::new();
    flat.save(&mut bytes)?;
    std::fs::write(directory.join("flat-v1-l2.sgt"), &bytes)?;

    for quantization in [Quantization::None, Quantization::Sq8] {
        let mut params = HnswParams::new(DIM, Metric::Cosine);
        params.m = 4;
        params.ef_construction = 32;
        params.quantization = quantization;
        let index = HnswIndex::new(params, COUNT)?;
        // one thread: the graph is then a pure function of the data and the seed
        index.add(&data, &labels, 1)?;
        index.mark_deleted(1_000 + 5 * 3);
        let mut bytes = Vec::new();
        index.save(&mut bytes)?;
        let name = format!("hnsw-v1-cosine-{}.sgt", quantization.name());
        std::fs::write(directory.join(name), &bytes)?;
    }
    println!("wrote golden files to {}", directory.display());
    Ok(())
}
