//! The page reader against a real file: every backend returns the bytes the file holds, the
//! two backends return the same bytes and the same errors, and a read past the end of the
//! file is an error naming its offset, never zeros.
//!
//! io_uring must be available where these tests run (it is on the development machines
//! and in CI); set `SAGITTA_NO_IO_URING=1` to run them where it is refused, and then the
//! probe must say why it fell back.

use std::path::PathBuf;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_storage::pageio::{Backend, Page, PageIo, PageIoConfig, PageRead, PAGE_BYTES};
use sagitta_storage::StorageError;

const PAGES: u64 = 257;

/// Byte `at` of page `page`: the page number in its first 8 bytes, a pattern after.
fn expected_page(page: u64) -> Page {
    let mut bytes = [0u8; PAGE_BYTES];
    bytes[..8].copy_from_slice(&page.to_le_bytes());
    for (at, byte) in bytes.iter_mut().enumerate().skip(8) {
        *byte = ((page as usize * 31 + at * 7) % 251) as u8;
    }
    Page(bytes)
}

/// A file of [`PAGES`] pages plus half a page (so the last page is short), on the disk
/// the tests build on (not /tmp, often tmpfs without O_DIRECT).
fn page_file(name: &str) -> PathBuf {
    let directory = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("page_io");
    std::fs::create_dir_all(&directory).unwrap();
    let path = directory.join(name);
    let mut bytes = Vec::with_capacity((PAGES as usize + 1) * PAGE_BYTES);
    for page in 0..PAGES {
        bytes.extend_from_slice(&expected_page(page).0);
    }
    bytes.extend_from_slice(&expected_page(PAGES).0[..PAGE_BYTES / 2]);
    std::fs::write(&path, &bytes).unwrap();
    path
}

fn engines() -> Vec<PageIo> {
    let config = PageIoConfig {
        queue_depth: 8,
        threads: 4,
    };
    let mut engines = vec![PageIo::with_backend(Backend::Pread, config.clone()).unwrap()];
    if std::env::var_os("SAGITTA_NO_IO_URING").is_some() {
        let probed = PageIo::probe(config);
        assert!(probed.backend() == Backend::IoUring || probed.fallback_reason().is_some());
    } else {
        engines.push(PageIo::with_backend(Backend::IoUring, config).expect("io_uring here"));
    }
    engines
}

/// Random single pages and runs of up to 4 pages, more of them than the queue depth,
/// some repeated; returns (first page, page count) pairs.
fn random_reads(seed: u64) -> Vec<(u64, usize)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut reads: Vec<(u64, usize)> = (0..60)
        .map(|_| {
            let count = if rng.gen_bool(0.7) {
                1
            } else {
                rng.gen_range(2..=4)
            };
            (rng.gen_range(0..=PAGES - count as u64), count)
        })
        .collect();
    reads.extend_from_within(..5);
    reads.shuffle(&mut rng);
    reads
}

/// Performs `plan` with `engine`, returning the pages read per request.
fn perform(
    engine: &PageIo,
    path: &std::path::Path,
    plan: &[(u64, usize)],
) -> Result<Vec<Vec<Page>>, StorageError> {
    let file = engine.open(path)?;
    // the tests build on a disk file system (ext4 here and in CI), which takes O_DIRECT
    assert!(
        file.is_direct(),
        "{}: opened without O_DIRECT",
        path.display()
    );
    let mut buffers: Vec<Vec<Page>> = plan
        .iter()
        .map(|(_, count)| Page::zeroed_run(*count))
        .collect();
    let mut reads: Vec<PageRead<'_>> = plan
        .iter()
        .zip(buffers.iter_mut())
        .map(|((page, _), into)| PageRead { page: *page, into })
        .collect();
    engine.read(&file, &mut reads)?;
    drop(reads);
    Ok(buffers)
}

#[test]
fn every_backend_reads_exactly_the_pages_the_file_holds() {
    let path = page_file("exact.pages");
    for engine in engines() {
        let plan = random_reads(7);
        let pages = perform(&engine, &path, &plan).unwrap();
        for ((first, count), got) in plan.iter().zip(&pages) {
            for (index, page) in got.iter().enumerate() {
                let number = first + index as u64;
                assert!(
                    *page == expected_page(number),
                    "{}: page {number} read wrong ({page:?})",
                    engine.backend().name()
                );
            }
            assert_eq!(got.len(), *count);
        }
        let counters = engine.counters();
        assert_eq!(counters.reads, plan.len() as u64);
        let pages: usize = plan.iter().map(|(_, count)| count).sum();
        assert_eq!(counters.bytes, (pages * PAGE_BYTES) as u64);
    }
}

#[test]
fn the_backends_agree_on_bytes_and_on_errors() {
    let path = page_file("agree.pages");
    let engines = engines();
    let plan = random_reads(11);
    let results: Vec<Vec<Vec<Page>>> = engines
        .iter()
        .map(|engine| perform(engine, &path, &plan).unwrap())
        .collect();
    for other in &results[1..] {
        assert!(*other == results[0]);
    }
    // a plan with reads past the end: the same first failure (lowest offset) from each,
    // and the counters take nothing from the failed call
    let mut bad = plan.clone();
    bad.push((PAGES, 1)); // the short last page
    bad.push((PAGES + 10, 2)); // wholly past the end
    let errors: Vec<String> = engines
        .iter()
        .map(|engine| {
            let before = engine.counters();
            let error = perform(engine, &path, &bad).unwrap_err().to_string();
            let after = engine.counters();
            assert_eq!((after.reads, after.bytes), (before.reads, before.bytes));
            error
        })
        .collect();
    let offset = format!("page read at byte {}", PAGES * PAGE_BYTES as u64);
    for error in &errors {
        assert!(error.contains(&offset), "{error}");
        assert!(error.contains("agree.pages"), "{error}");
        assert!(
            error.contains(&format!("read {} of {PAGE_BYTES} bytes", PAGE_BYTES / 2)),
            "{error}"
        );
    }
    assert!(
        errors.iter().all(|error| *error == errors[0]),
        "{errors:#?}"
    );
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let engine = PageIo::probe(PageIoConfig::default());
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("page_io/none.pages");
    let error = engine.open(&path).unwrap_err().to_string();
    assert!(
        error.contains("none.pages") && error.contains("opening for page reads"),
        "{error}"
    );
}
