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
const COUNT: usize = 200;

/// Deterministic data without a random number generator: integer-derived, exactly
/// representable values.
fn vectors() -> Vec<f32> {
    (0..COUNT * DIM)
        .map(|i| {
            let row = i / DIM;
            let column = i % DIM;
            #[allow(clippy::cast_precision_loss)]
            let value = ((row * 7 + column * 13) % 29) as f32 / 8.0 - 1.75;
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
