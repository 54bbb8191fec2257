//! The io_uring backend: one ring per calling thread, kept between calls; a call pushes up
//! to `queue_depth` reads, submits them with one `io_uring_enter`, reaps what completed and
//! refills, until every read has completed.
//!
//! Safety argument, the one this file's `unsafe` rests on: the kernel writes into a read's
//! buffer until its completion is reaped. Every buffer is borrowed (`&mut`) for the whole
//! of [`read_all`], and [`read_all`] returns only after reaping a completion for every entry
//! it pushed — on success, on a failed read and on an interrupted wait alike. The one case
//! where that cannot be guaranteed, `io_uring_enter` failing for a reason other than
//! EINTR/EAGAIN/EBUSY while reads are in flight, panics instead of returning (returning
//! would free buffers the kernel may still write).

use std::cell::RefCell;
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::io::AsRawFd;

use io_uring::{opcode, types, IoUring};

use super::{PageRead, ReadFailure};

thread_local! {
    /// This thread's ring and its size.
    static RING: RefCell<Option<(usize, IoUring)>> = const { RefCell::new(None) };
}

/// Whether this process may create a ring of `depth` entries (and keeps it for the
/// calling thread).
pub(super) fn probe(depth: usize) -> std::io::Result<()> {
    RING.with(|ring| ring_of(&mut ring.borrow_mut(), depth).map(|_| ()))
}

/// The thread's ring, (re)made when it is missing or smaller than `depth`.
fn ring_of(slot: &mut Option<(usize, IoUring)>, depth: usize) -> std::io::Result<&mut IoUring> {
    if slot.as_ref().is_none_or(|(size, _)| *size < depth) {
        let entries = u32::try_from(depth.next_power_of_two()).unwrap_or(u32::MAX);
        *slot = Some((depth, IoUring::new(entries)?));
    }
    Ok(&mut slot.as_mut().expect("made above").1)
}

/// Performs `reads` with at most `depth` in flight; returns the failed read with the lowest
/// offset, if any. A ring that cannot be made fails every read with its error.
pub(super) fn read_all(
    file: &File,
    reads: &mut [PageRead<'_>],
    depth: usize,
) -> Option<ReadFailure> {
    RING.with(|ring| {
        let mut slot = ring.borrow_mut();
        match ring_of(&mut slot, depth) {
            Ok(ring) => drive(ring, file, reads, depth),
            Err(error) => {
                let offset = reads.iter().map(PageRead::offset).min()?;
                Some(ReadFailure::new(offset, error))
            }
        }
    })
}

/// The submit / reap loop of [`read_all`].
fn drive(
    ring: &mut IoUring,
    file: &File,
    reads: &mut [PageRead<'_>],
    depth: usize,
) -> Option<ReadFailure> {
    let fd = types::Fd(file.as_raw_fd());
    let mut failure = None;
    let (mut next, mut in_flight) = (0, 0);
    while next < reads.len() || in_flight > 0 {
        while next < reads.len() && in_flight < depth {
            let read = &mut reads[next];
            let Ok(length) = u32::try_from(read.bytes()) else {
                let error = std::io::Error::new(ErrorKind::InvalidInput, "a read over 4 GiB");
                failure = ReadFailure::merge(failure, ReadFailure::new(read.offset(), error));
                next += 1;
                continue;
            };
            let entry = opcode::Read::new(fd, read.into.as_mut_ptr().cast::<u8>(), length)
                .offset(read.offset())
                .build()
                .user_data(next as u64);
            // SAFETY: `read.into` is borrowed mutably for the whole of `read_all`, which
            // reaps this entry's completion before it returns (see the module's safety
            // argument), so the buffer outlives the kernel's write into it; `length` is
            // its length in bytes; the file descriptor stays open for the call (`file` is
            // borrowed). The queue has room: fewer than `depth` entries are in flight and
            // the ring holds at least `depth`.
            unsafe { ring.submission().push(&entry) }.expect("the ring has room for depth entries");
            next += 1;
            in_flight += 1;
        }
        if in_flight == 0 {
            continue;
        }
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(error) if is_retryable(&error) => {}
            Err(error) => panic!(
                "io_uring_enter failed ({error}) with {in_flight} reads in flight: their buffers \
                 cannot be released safely"
            ),
        }
        for completion in ring.completion() {
            in_flight -= 1;
            let read = &reads[usize::try_from(completion.user_data()).expect("an index")];
            let result = completion.result();
            let failed = if result < 0 {
                Some(ReadFailure::new(
                    read.offset(),
                    std::io::Error::from_raw_os_error(-result),
                ))
            } else if result as usize != read.bytes() {
                Some(ReadFailure::short(
                    read.offset(),
                    read.bytes(),
                    result as usize,
                ))
            } else {
                None
            };
            if let Some(failed) = failed {
                failure = ReadFailure::merge(failure, failed);
            }
        }
    }
    failure
}

/// Errors of `io_uring_enter` after which the same call can simply be made again.
fn is_retryable(error: &std::io::Error) -> bool {
    matches!(error.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock)
        // EBUSY: the completion queue is full; reap first
        || error.raw_os_error() == Some(libc::EBUSY)
}
