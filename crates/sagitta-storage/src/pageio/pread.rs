//! The fallback backend: positional reads (`pread`) on a scoped pool of threads, each with
//! one read in flight, for when io_uring is refused.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::{PageRead, ReadFailure, PAGE_BYTES};

/// Performs `reads` on up to `threads` threads (the calling thread alone for one read);
/// returns the failed read with the lowest offset, if any.
pub(super) fn read_all(
    file: &File,
    reads: &mut [PageRead<'_>],
    threads: usize,
) -> Option<ReadFailure> {
    if reads.len() <= 1 || threads <= 1 {
        return reads
            .iter_mut()
            .filter_map(|read| read_one(file, read))
            .fold(None, ReadFailure::merge);
    }
    let chunk = reads.len().div_ceil(threads.min(reads.len()));
    std::thread::scope(|scope| {
        let workers: Vec<_> = reads
            .chunks_mut(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter_mut()
                        .filter_map(|read| read_one(file, read))
                        .fold(None, ReadFailure::merge)
                })
            })
            .collect();
        workers
            .into_iter()
            .filter_map(|worker| worker.join().expect("a pread worker panicked"))
            .fold(None, ReadFailure::merge)
    })
}

/// One read, whole, one `pread` a page (the fallback's reads stay aligned for O_DIRECT). A
/// regular file returns less than asked only at its end: a short page fails the read, as an
/// I/O error does.
fn read_one(file: &File, read: &mut PageRead<'_>) -> Option<ReadFailure> {
    let offset = read.offset();
    let wanted = read.bytes();
    for (index, page) in read.into.iter_mut().enumerate() {
        let at = offset + (index * PAGE_BYTES) as u64;
        let count = loop {
            match file.read_at(&mut page.0, at) {
                Ok(count) => break count,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Some(ReadFailure::new(offset, error)),
            }
        };
        if count < PAGE_BYTES {
            return Some(ReadFailure::short(
                offset,
                wanted,
                index * PAGE_BYTES + count,
            ));
        }
    }
    None
}
