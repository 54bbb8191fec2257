//! Regenerates `tests/golden/db-v1/` (only when the on-disk format changes on purpose):
//! `cargo run --release -p sagitta-engine --example make_golden_db`.

#[path = "../tests/golden_data/mod.rs"]
mod golden_data;

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/db-v1");
    if root.exists() {
        std::fs::remove_dir_all(&root).expect("removing the old golden database");
    }
    golden_data::write(&root);
    println!("wrote {}", root.display());
}
