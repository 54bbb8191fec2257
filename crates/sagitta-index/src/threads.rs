//! Batch parallelism: scoped std threads pulling chunks from an atomic counter, so uneven
//! work (HNSW searches differ in length) balances without a pool.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Cores this process may use, read once: `available_parallelism` reads cgroup files on
/// Linux (tens of microseconds), too slow to repeat on every single-query search.
fn available_cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get))
}

/// Thread count to use: `requested` (0 = every core the calling thread may run on — a
/// thread bound to one NUMA node's CPUs gets that node's count), never more than
/// `work_items`.
pub(crate) fn effective_threads(requested: usize, work_items: usize) -> usize {
    if work_items <= 1 {
        return 1;
    }
    let threads = if requested == 0 {
        // the binding is one system call (no file read), so it is read every time: the
        // engine rebinds threads to a shard's node around its builds
        let bound = sagitta_kernels::sched::allowed_cpus().map_or(usize::MAX, |cpus| cpus.len());
        available_cores().min(bound.max(1))
    } else {
        requested
    };
    threads
        .clamp(1, crate::limits::MAX_THREADS)
        .min(work_items.max(1))
}

/// Calls `work(start, end)` for consecutive ranges of `0..total`, `chunk` items at a time,
/// on `threads` threads. Returns the first error any call returned.
pub(crate) fn for_each_chunk<E: Send>(
    total: usize,
    chunk: usize,
    threads: usize,
    work: impl Fn(usize, usize) -> Result<(), E> + Sync,
) -> Result<(), E> {
    let chunk = chunk.max(1);
    if threads <= 1 || total <= chunk {
        let mut start = 0;
        while start < total {
            let end = (start + chunk).min(total);
            work(start, end)?;
            start = end;
        }
        return Ok(());
    }
    let next = AtomicUsize::new(0);
    let first_error = parking_lot::Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let start = next.fetch_add(chunk, Ordering::Relaxed);
                if start >= total {
                    break;
                }
                let end = (start + chunk).min(total);
                if let Err(error) = work(start, end) {
                    first_error.lock().get_or_insert(error);
                    next.store(total, Ordering::Relaxed);
                    break;
                }
            });
        }
    });
    match first_error.into_inner() {
        Some(error) => Err(error),
        None => Ok(()),
    }
}
