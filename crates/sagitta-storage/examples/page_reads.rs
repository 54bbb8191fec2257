//! Random 4 KiB page reads through `PageIo`, for comparison with fio on the same file
//! (`python -m bench.fio` runs this after fio): one thread, `--depth` reads in flight,
//! calls of `--batch` reads each, for `--seconds`. Prints one JSON object.
//!
//!     cargo run --release -p sagitta-storage --example page_reads -- \
//!         --file F --depth 64 --seconds 10 --backend io_uring

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use sagitta_storage::pageio::{Backend, Page, PageIo, PageIoConfig, PageRead, PAGE_BYTES};

struct Options {
    file: PathBuf,
    depth: usize,
    batch: usize,
    seconds: f64,
    backend: Backend,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        file: PathBuf::new(),
        depth: 64,
        batch: 4096,
        seconds: 10.0,
        backend: Backend::IoUring,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let number = || value.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--file" => options.file = PathBuf::from(&value),
            "--depth" => options.depth = number()?,
            "--batch" => options.batch = number()?,
            "--seconds" => options.seconds = value.parse().map_err(|e| format!("{flag}: {e}"))?,
            "--backend" => {
                options.backend = match value.as_str() {
                    "io_uring" => Backend::IoUring,
                    "pread" => Backend::Pread,
                    other => return Err(format!("--backend: io_uring or pread, not {other}")),
                }
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if options.file.as_os_str().is_empty() {
        return Err("--file is required".into());
    }
    Ok(options)
}

fn main() -> Result<(), String> {
    let options = options()?;
    let config = PageIoConfig {
        queue_depth: options.depth,
        threads: options.depth,
    };
    let engine = PageIo::with_backend(options.backend, config).map_err(|e| e.to_string())?;
    let file = engine.open(&options.file).map_err(|e| e.to_string())?;
    let pages = std::fs::metadata(&options.file)
        .map_err(|e| e.to_string())?
        .len()
        / PAGE_BYTES as u64;
    let mut buffers = Page::zeroed_run(options.batch);
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let deadline = Duration::from_secs_f64(options.seconds);
    let started = Instant::now();
    while started.elapsed() < deadline {
        let mut reads: Vec<PageRead<'_>> = buffers
            .chunks_mut(1)
            .map(|into| PageRead {
                page: rng.gen_range(0..pages),
                into,
            })
            .collect();
        engine.read(&file, &mut reads).map_err(|e| e.to_string())?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let counters = engine.counters();
    #[allow(clippy::cast_precision_loss)]
    let (iops, bandwidth) = (
        counters.reads as f64 / seconds,
        counters.bytes as f64 / seconds,
    );
    println!(
        "{{\"backend\": \"{}\", \"direct\": {}, \"depth\": {}, \"batch\": {}, \"reads\": {}, \
         \"seconds\": {seconds:.3}, \"iops\": {iops:.1}, \"bytes_per_second\": {bandwidth:.0}}}",
        engine.backend().name(),
        file.is_direct(),
        options.depth,
        options.batch,
        counters.reads,
    );
    Ok(())
}
