//! Measures the disk index on this machine's disk (issue 15): builds it over synthetic
//! embedding-like vectors, then for each probe count runs the queries on N threads with
//! every records page read from the device (O_DIRECT, no cache) and prints recall@10
//! against brute force, QPS, latency, pages and bytes read per query, and the IOPS achieved.
//!
//! `cargo run --release -p sagitta-index --example disk_search -- DIR [ROWS] [DIM] [QUERIES]
//! [THREADS] [EXTRA_BITS]` (defaults 100,000 × 768, 200 queries, 2 threads, the default
//! extended codes). DIR must be on the disk
//! to measure (not tmpfs); the records file is left there as `disk_search.records`.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use sagitta_index::disk::{DiskIndex, DiskParams, PageReader, SearchStats};
use sagitta_index::Metric;
use sagitta_storage::pageio::{self, Page, PageFile, PageIo};

/// Reads every page from the device, none cached.
struct DeviceReader<'a> {
    io: &'a PageIo,
    file: &'a PageFile,
}

impl PageReader for DeviceReader<'_> {
    fn read(&self, pages: &[u64]) -> sagitta_index::error::Result<Vec<Arc<Page>>> {
        let buffers =
            pageio::read_each(pages, |reads| self.io.read(self.file, reads)).map_err(|error| {
                sagitta_index::IndexError::Io {
                    operation: "reading records pages",
                    message: error.to_string(),
                }
            })?;
        Ok(buffers.into_iter().map(Arc::new).collect())
    }
}

/// SplitMix64 steps as uniform floats in [0, 1).
struct Uniform(u64);

impl Uniform {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        #[allow(clippy::cast_precision_loss)]
        let unit = ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32;
        unit
    }

    /// Roughly standard normal (sum of four uniforms, rescaled).
    fn normal(&mut self) -> f32 {
        ((0..4).map(|_| self.next()).sum::<f32>() - 2.0) * 1.732
    }
}

/// `rows` vectors of `dim`: a 16-d latent through a fixed random projection, plus noise
/// (low intrinsic dimension, as text embeddings have).
fn embeddings(rows: usize, dim: usize, seed: u64) -> Vec<f32> {
    const LATENT: usize = 16;
    let mut fixed = Uniform(7);
    let projection: Vec<f32> = (0..LATENT * dim).map(|_| fixed.normal()).collect();
    let mut random = Uniform(seed);
    let mut out = Vec::with_capacity(rows * dim);
    let mut latent = [0.0f32; LATENT];
    for _ in 0..rows {
        latent.iter_mut().for_each(|value| *value = random.normal());
        for column in 0..dim {
            let mapped: f32 = (0..LATENT)
                .map(|l| latent[l] * projection[l * dim + column])
                .sum();
            out.push(mapped + 1.5 * random.normal());
        }
    }
    out
}

fn brute_force(base: &[f32], queries: &[f32], dim: usize, k: usize) -> Vec<Vec<u32>> {
    let kernels = sagitta_kernels::kernels();
    queries
        .chunks_exact(dim)
        .map(|query| {
            let mut scored: Vec<(f32, u32)> = base
                .chunks_exact(dim)
                .zip(0u32..)
                .map(|(row, index)| ((kernels.l2_squared_f32)(query, row), index))
                .collect();
            scored.select_nth_unstable_by(k, |a, b| a.0.total_cmp(&b.0));
            scored.truncate(k);
            scored.into_iter().map(|(_, index)| index).collect()
        })
        .collect()
}

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let number = |index: usize, default: usize| {
        arguments
            .get(index)
            .map_or(default, |text| text.parse().expect("a number"))
    };
    let directory = PathBuf::from(arguments.first().expect("DIR: a directory on the disk"));
    let (rows, dim, query_count, threads) = (
        number(1, 100_000),
        number(2, 768),
        number(3, 200),
        number(4, 2),
    );
    let params = DiskParams {
        extra_bits: u32::try_from(number(5, DiskParams::default().extra_bits as usize))
            .expect("EXTRA_BITS: 0 ..= 3"),
        ..DiskParams::default()
    };
    let k = 10;
    let base = embeddings(rows, dim, 1);
    let queries = embeddings(query_count, dim, 2);
    let truth = brute_force(&base, &queries, dim, k);
    let path = directory.join("disk_search.records");
    let started = Instant::now();
    let (index, order) = {
        let mut file = BufWriter::new(std::fs::File::create(&path).expect("records file"));
        let built = DiskIndex::build(&base, dim, Metric::L2, params, &mut file).expect("build");
        file.flush().expect("flush");
        file.get_ref().sync_all().expect("fsync");
        built
    };
    let build_seconds = started.elapsed().as_secs_f64();
    let io = pageio::shared();
    let file = io.open(&path).expect("open for page reads");
    #[allow(clippy::cast_precision_loss)]
    let ram_per_vector = index.ram_bytes() as f64 / rows as f64;
    println!(
        "{rows} × {dim}, {} partitions, {} extra bits, build {build_seconds:.1} s, RAM {ram_per_vector:.0} B/vector \
         ({:.3}× the f32 vectors), records {} pages, backend {} (direct: {}), {threads} threads",
        index.partitions(),
        index.extra_bits(),
        ram_per_vector / (dim * 4) as f64,
        index.record_pages(),
        io.backend().name(),
        file.is_direct(),
    );
    println!("probes  recall@10     QPS   p50 ms   p99 ms  pages/q  KB/q  reranked/q  candidates/q  IOPS");
    for probes in [1, 2, 4, 8, 16, 32, 64] {
        let reader = DeviceReader { io, file: &file };
        let chunk = query_count.div_ceil(threads);
        let started = Instant::now();
        let results: Vec<(Vec<u32>, Vec<f64>, SearchStats)> = std::thread::scope(|scope| {
            let workers: Vec<_> = queries
                .chunks(chunk * dim)
                .map(|part| {
                    let reader = &reader;
                    let (index, order) = (&index, &order);
                    scope.spawn(move || {
                        let mut found = Vec::new();
                        let mut latencies = Vec::new();
                        let mut stats = SearchStats::default();
                        for query in part.chunks_exact(dim) {
                            let began = Instant::now();
                            let hits = index
                                .search(query, k, probes, &|_| true, reader, &mut stats)
                                .expect("search");
                            latencies.push(began.elapsed().as_secs_f64() * 1e3);
                            found.extend(hits.iter().map(|hit| order[hit.position as usize]));
                        }
                        (found, latencies, stats)
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|worker| worker.join().expect("worker"))
                .collect()
        });
        let seconds = started.elapsed().as_secs_f64();
        let mut found = Vec::new();
        let mut latencies = Vec::new();
        let mut stats = SearchStats::default();
        for (part, times, part_stats) in results {
            found.extend(part);
            latencies.extend(times);
            stats.partitions += part_stats.partitions;
            stats.scanned += part_stats.scanned;
            stats.refined += part_stats.refined;
            stats.candidates += part_stats.candidates;
            stats.reranked += part_stats.reranked;
            stats.pages += part_stats.pages;
            stats.waves += part_stats.waves;
        }
        let hits: usize = truth
            .iter()
            .enumerate()
            .map(|(query, expected)| {
                let got = &found[query * k..(query + 1) * k];
                expected.iter().filter(|row| got.contains(row)).count()
            })
            .sum();
        latencies.sort_by(f64::total_cmp);
        let quantile = |q: f64| {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss
            )]
            let at = ((latencies.len() as f64 - 1.0) * q).round() as usize;
            latencies[at]
        };
        #[allow(clippy::cast_precision_loss)]
        let per_query = |value: usize| value as f64 / query_count as f64;
        #[allow(clippy::cast_precision_loss)]
        let recall = hits as f64 / (query_count * k) as f64;
        #[allow(clippy::cast_precision_loss)]
        let qps = query_count as f64 / seconds;
        #[allow(clippy::cast_precision_loss)]
        let iops = stats.pages as f64 / seconds;
        println!(
            "{probes:>6}  {recall:>9.4}  {qps:>6.0}  {:>7.2}  {:>7.2}  {:>7.1}  {:>4.0}  {:>10.1}  {:>12.1}  {iops:>5.0}",
            quantile(0.5),
            quantile(0.99),
            per_query(stats.pages),
            per_query(stats.pages) * 4.096,
            per_query(stats.reranked),
            per_query(stats.candidates),
        );
    }
}
