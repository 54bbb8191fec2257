//! What following a build costs: times `HnswIndex::add` (no progress) against
//! `add_with_progress` with an `AddProgress` polled every 100 ms by another thread, on the
//! same data with the segment parameters (m 16, ef_construction 100, SQ8, dot product),
//! alternating the two so drift in machine speed hits both alike:
//!
//! `cargo run --release -p sagitta-index --example add_progress_overhead -- 200000 128 3`
//! (rows, dimension, rounds; threads = all cores).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_index::hnsw::{AddProgress, HnswIndex, HnswParams, Quantization};
use sagitta_index::Metric;

fn argument(position: usize, default: usize) -> usize {
    std::env::args()
        .nth(position)
        .map_or(default, |value| value.parse().expect("a whole number"))
}

/// One build; `followed` adds an `AddProgress` and a thread polling it. Returns seconds.
fn build(data: &[f32], labels: &[u64], dim: usize, followed: bool) -> f64 {
    let mut params = HnswParams::new(dim, Metric::Dot);
    params.m = 16;
    params.ef_construction = 100;
    params.quantization = Quantization::Sq8;
    let index = HnswIndex::new(params, labels.len()).expect("valid parameters");
    let progress = AddProgress::new();
    let finished = AtomicBool::new(false);
    let started = Instant::now();
    std::thread::scope(|scope| {
        if followed {
            scope.spawn(|| {
                while !finished.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(100));
                    std::hint::black_box(progress.linked());
                }
            });
            index
                .add_with_progress(data, labels, 0, Some(&progress))
                .expect("valid rows");
            assert_eq!(progress.linked(), labels.len());
        } else {
            index.add(data, labels, 0).expect("valid rows");
        }
        finished.store(true, Ordering::Release);
    });
    started.elapsed().as_secs_f64()
}

fn main() {
    let rows = argument(1, 200_000);
    let dim = argument(2, 128);
    let rounds = argument(3, 3);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let data: Vec<f32> = (0..rows * dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let labels: Vec<u64> = (0..rows as u64).collect();
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    println!("{rows} x {dim}, {threads} threads, {rounds} rounds");
    let (mut plain, mut followed) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which goes first, so a warming or cooling machine favours neither.
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for with_progress in order {
            let seconds = build(&data, &labels, dim, with_progress);
            println!("round {round}: progress {with_progress:5}: {seconds:.2} s");
            if with_progress {
                followed.push(seconds);
            } else {
                plain.push(seconds);
            }
        }
    }
    let median = |times: &mut Vec<f64>| {
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    };
    let (plain, followed) = (median(&mut plain), median(&mut followed));
    println!(
        "median: add {plain:.2} s, add_with_progress {followed:.2} s ({:+.1} %)",
        (followed / plain - 1.0) * 100.0
    );
}
