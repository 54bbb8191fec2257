//! Page reads at device speed (issue 15 §2): many 4 KiB-aligned reads in flight from one
//! thread, with O_DIRECT so the page cache neither doubles memory nor hides the device.
//!
//! Two backends behind one call, [`PageIo::read`]:
//! - [`Backend::IoUring`]: a ring per thread (the `io-uring` crate), up to `queue_depth`
//!   reads in flight, submitted and reaped in batches;
//! - [`Backend::Pread`]: `pread` on a scoped pool of `threads` threads, for kernels or
//!   sandboxes that refuse io_uring (Docker's default seccomp profile, gVisor).
//!
//! [`PageIo::probe`] picks io_uring when a ring can be created and says why it did not
//! otherwise ([`PageIo::fallback_reason`]). Files open with O_DIRECT; a file system that
//! refuses it (tmpfs) gets buffered reads, reported by [`PageFile::is_direct`]. Both
//! backends return the same bytes or the same error for the same reads (tests/page_io.rs).
//!
//! Reads are into [`Page`]s, 4 KiB-aligned by their type, so every buffer, offset and
//! length meets O_DIRECT's alignment with no unsafe allocation. Nothing here interprets
//! the bytes: checksums belong to the file formats that read pages.
//!
//! Counters ([`PageIo::counters`]) give reads issued, bytes read and the time spent in
//! `read` calls, for /metrics and for benchmarks' achieved-IOPS figures. [`PageCache`] keeps
//! hot pages, bounded in bytes, evicting by CLOCK.

mod cache;
mod pread;
#[allow(unsafe_code)]
mod uring;

pub use cache::{PageCache, PageCacheCounters, PageKey};

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use crate::error::{Result, StorageError};

/// Bytes in a page: the unit of every read, its alignment and its offsets.
pub const PAGE_BYTES: usize = 4096;

/// One page of bytes, aligned to [`PAGE_BYTES`] (as O_DIRECT requires of buffers).
#[derive(Clone, PartialEq, Eq)]
#[repr(C, align(4096))]
pub struct Page(pub [u8; PAGE_BYTES]);

impl Page {
    pub fn zeroed() -> Page {
        Page([0; PAGE_BYTES])
    }

    /// `count` zeroed pages, contiguous.
    pub fn zeroed_run(count: usize) -> Vec<Page> {
        vec![Page::zeroed(); count]
    }
}

impl std::fmt::Debug for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Page({:02x?}..)", &self.0[..8])
    }
}

/// One read: `into.len()` consecutive pages of a file from page number `page`.
#[derive(Debug)]
pub struct PageRead<'a> {
    pub page: u64,
    pub into: &'a mut [Page],
}

impl PageRead<'_> {
    fn offset(&self) -> u64 {
        self.page * PAGE_BYTES as u64
    }

    fn bytes(&self) -> usize {
        self.into.len() * PAGE_BYTES
    }
}

/// How reads reach the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    IoUring,
    Pread,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::IoUring => "io_uring",
            Backend::Pread => "pread",
        }
    }
}

/// What [`PageIo::probe`] and [`PageIo::with_backend`] are given.
#[derive(Clone, Debug)]
pub struct PageIoConfig {
    /// Reads in flight per calling thread (io_uring ring size).
    pub queue_depth: usize,
    /// Threads of the pread fallback (each has one read in flight).
    pub threads: usize,
}

impl Default for PageIoConfig {
    fn default() -> PageIoConfig {
        PageIoConfig {
            queue_depth: 64,
            threads: 16,
        }
    }
}

/// Totals since the engine was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageIoCounters {
    /// Reads of the calls that succeeded (one per [`PageRead`], whatever its page count).
    pub reads: u64,
    /// Bytes those reads returned.
    pub bytes: u64,
    /// Wall time spent inside [`PageIo::read`] calls, summed over calling threads.
    pub busy_nanos: u64,
}

/// A file opened for page reads.
#[derive(Debug)]
pub struct PageFile {
    file: File,
    path: PathBuf,
    direct: bool,
    length: u64,
}

impl PageFile {
    /// Whether reads bypass the page cache (O_DIRECT).
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's length in bytes when it was opened.
    pub fn len(&self) -> u64 {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }
}

/// The page reader: one backend, its configuration and its counters. Shared by every
/// thread that reads (`&self` methods; io_uring rings are per thread).
#[derive(Debug)]
pub struct PageIo {
    backend: Backend,
    config: PageIoConfig,
    fallback_reason: Option<String>,
    reads: AtomicU64,
    bytes: AtomicU64,
    busy_nanos: AtomicU64,
}

impl PageIo {
    /// io_uring when this process may create a ring, otherwise pread (the reason kept).
    pub fn probe(config: PageIoConfig) -> PageIo {
        match uring::probe(config.queue_depth) {
            Ok(()) => PageIo::assemble(Backend::IoUring, config, None),
            Err(error) => {
                let reason = format!("io_uring unavailable: {error}");
                PageIo::assemble(Backend::Pread, config, Some(reason))
            }
        }
    }

    /// `backend` exactly; an error if it cannot run here (io_uring refused).
    pub fn with_backend(backend: Backend, config: PageIoConfig) -> std::io::Result<PageIo> {
        if backend == Backend::IoUring {
            uring::probe(config.queue_depth)?;
        }
        Ok(PageIo::assemble(backend, config, None))
    }

    fn assemble(backend: Backend, config: PageIoConfig, reason: Option<String>) -> PageIo {
        assert!(config.queue_depth >= 1 && config.threads >= 1, "{config:?}");
        PageIo {
            backend,
            config,
            fallback_reason: reason,
            reads: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            busy_nanos: AtomicU64::new(0),
        }
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Why a probe fell back to pread, if it did.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback_reason.as_deref()
    }

    pub fn counters(&self) -> PageIoCounters {
        PageIoCounters {
            reads: self.reads.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            busy_nanos: self.busy_nanos.load(Ordering::Relaxed),
        }
    }

    /// Opens `path` for page reads: O_DIRECT, or buffered where the file system refuses it.
    pub fn open(&self, path: &Path) -> Result<PageFile> {
        let direct = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path);
        let (file, direct) = match direct {
            Ok(file) => (file, true),
            Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {
                let file = File::open(path)
                    .map_err(|error| StorageError::io("opening for page reads", path, &error))?;
                (file, false)
            }
            Err(error) => return Err(StorageError::io("opening for page reads", path, &error)),
        };
        let length = file
            .metadata()
            .map_err(|error| StorageError::io("reading metadata of", path, &error))?
            .len();
        Ok(PageFile {
            file,
            path: path.to_path_buf(),
            direct,
            length,
        })
    }

    /// Performs every read of `reads`, many in flight at once, and returns once all have
    /// completed. A read that fails or runs past the end of the file fails the call (the
    /// first such read, by its offset); the others still complete first.
    pub fn read(&self, file: &PageFile, reads: &mut [PageRead<'_>]) -> Result<()> {
        let started = Instant::now();
        let outcome = match self.backend {
            Backend::IoUring => uring::read_all(&file.file, reads, self.config.queue_depth),
            Backend::Pread => pread::read_all(&file.file, reads, self.config.threads),
        };
        if outcome.is_none() {
            let bytes: u64 = reads.iter().map(|read| read.bytes() as u64).sum();
            self.reads.fetch_add(reads.len() as u64, Ordering::Relaxed);
            self.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.busy_nanos.fetch_add(nanos, Ordering::Relaxed);
        match outcome {
            None => Ok(()),
            Some(failure) => Err(failure.into_error(&file.path)),
        }
    }
}

/// Reads one page for each number of `pages` (in that order) with `read` — a
/// [`PageIo::read`] or [`crate::fs::PageSource::read_pages`] call — all in flight together.
pub fn read_each(
    pages: &[u64],
    read: impl FnOnce(&mut [PageRead<'_>]) -> Result<()>,
) -> Result<Vec<Page>> {
    let mut buffers = Page::zeroed_run(pages.len());
    let mut reads: Vec<PageRead<'_>> = pages
        .iter()
        .zip(buffers.chunks_mut(1))
        .map(|(page, into)| PageRead { page: *page, into })
        .collect();
    read(&mut reads)?;
    drop(reads);
    Ok(buffers)
}

/// The environment variable that picks the process's page reader: `io_uring`, `pread`, or
/// unset (`auto`: io_uring when a ring can be created).
pub const BACKEND_VARIABLE: &str = "SAGITTA_PAGE_IO";

/// The process's page reader, made at first use: the backend [`BACKEND_VARIABLE`] names,
/// or the probe's choice. Every disk segment of the process reads through it, so its
/// counters are the process's (served in /metrics). An unknown value, or `io_uring` where
/// a ring is refused, falls back to pread and says so in [`PageIo::fallback_reason`].
pub fn shared() -> &'static PageIo {
    static SHARED: OnceLock<PageIo> = OnceLock::new();
    SHARED.get_or_init(|| {
        let config = PageIoConfig::default();
        match std::env::var(BACKEND_VARIABLE).as_deref() {
            Ok("pread") => PageIo::assemble(Backend::Pread, config, None),
            Ok("io_uring") | Ok("auto") | Err(_) => PageIo::probe(config),
            Ok(other) => {
                let reason =
                    format!("{BACKEND_VARIABLE}={other:?} is not one of io_uring, pread, auto");
                PageIo::assemble(Backend::Pread, config, Some(reason))
            }
        }
    })
}

/// The failed read of one call with the lowest offset (so both backends report the same
/// one whatever order reads complete in).
#[derive(Debug)]
struct ReadFailure {
    offset: u64,
    error: std::io::Error,
}

impl ReadFailure {
    fn new(offset: u64, error: std::io::Error) -> ReadFailure {
        ReadFailure { offset, error }
    }

    /// The failure at the lower offset of the two.
    fn merge(first: Option<ReadFailure>, next: ReadFailure) -> Option<ReadFailure> {
        Some(match first {
            Some(kept) if kept.offset <= next.offset => kept,
            _ => next,
        })
    }

    fn short(offset: u64, wanted: usize, got: usize) -> ReadFailure {
        let message = format!("read {got} of {wanted} bytes: the file ends inside the read");
        ReadFailure::new(
            offset,
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, message),
        )
    }

    fn into_error(self, path: &Path) -> StorageError {
        let error = std::io::Error::new(
            self.error.kind(),
            format!("page read at byte {}: {}", self.offset, self.error),
        );
        StorageError::io("reading pages of", path, &error)
    }
}
