//! Durable storage for SagittaDB.
//!
//! * [`codec`] — the little-endian byte codec every file format is read and written with:
//!   [`codec::Reader`] (typed reads whose errors name the byte offset and the field) and
//!   [`codec::Writer`].
//! * [`fs`] — the file-system seam: [`fs::OsFileSystem`] for real files (fsync included) and
//!   [`sim::SimFileSystem`], an in-memory disk that loses unsynced bytes on a simulated crash
//!   and fails chosen operations (ENOSPC, EIO), for deterministic crash tests.
//! * [`wal`] — a write-ahead log of CRC32C-checked records; batches are group-committed with
//!   one write and one fsync; a torn or corrupt tail is detected and truncated on open.
//! * [`manifest`] — a small checksummed file published atomically (write, fsync, rename,
//!   fsync directory).
//! * [`pageio`] — page reads with many in flight: io_uring with O_DIRECT, or a pread pool
//!   where io_uring is refused, chosen by probing; counters for achieved IOPS.
//! * [`npy`] — NumPy `.npy` files: the one reader behind `sagitta import` and the load
//!   generator (headers of versions 1 to 3, every numeric dtype, Fortran order refused).
//! * [`utc`] — UTC timestamps for the files and reports the tools write.
//!
//! Architecture invariant: every byte this crate writes goes through [`fs::FileSystem`], so
//! every write path can be crash-tested against the simulator.
//! Architecture invariant: after an I/O error a writer refuses further writes (poisoned);
//! only reopening, which re-reads and validates what is durable, recovers.
// `unsafe` is allowed in one module, pageio/uring.rs (handing buffers to the kernel), and
// denied everywhere else; the tidy test checks both.
#![deny(unsafe_code)]

pub mod codec;
pub mod error;
pub mod fs;
pub mod manifest;
pub mod npy;
pub mod pageio;
pub mod sim;
pub mod utc;
pub mod wal;

pub use error::StorageError;
