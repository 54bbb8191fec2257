//! Software prefetch hints for the graph and IVF walks: the next candidates' rows are
//! requested a few iterations before they are scored, hiding DRAM latency (~100 ns) behind
//! the current distance computations. On targets without a stable prefetch intrinsic these
//! functions do nothing.

/// Cache-line size assumed by the prefetch loops (every x86_64 and Arm server core).
pub const CACHE_LINE_BYTES: usize = 64;

/// Most lines one `prefetch_slice` call requests: 2 KiB, a 512-d f32 row. The line fill
/// buffers (about 16-24 per core) are the real limit on outstanding misses.
pub const PREFETCH_SLICE_MAX_LINES: usize = 32;

/// Lines `prefetch_read` requests: enough for the start of a row; the hardware prefetcher
/// follows the rest of a sequential read.
pub const PREFETCH_READ_LINES: usize = 4;

/// Prefetches (into all cache levels) the lines covering the first `max_lines` lines of
/// `data`.
#[inline]
pub fn prefetch_bytes(data: &[u8], max_lines: usize) {
    prefetch_lines(data.as_ptr(), data.len(), max_lines);
}

/// Prefetches every cache line of `data`, at most `PREFETCH_SLICE_MAX_LINES` lines.
#[inline]
pub fn prefetch_slice<T>(data: &[T]) {
    prefetch_lines(
        data.as_ptr().cast(),
        size_of_val(data),
        PREFETCH_SLICE_MAX_LINES,
    );
}

/// Prefetches the first `PREFETCH_READ_LINES` cache lines of `data`.
#[inline]
pub fn prefetch_read<T>(data: &[T]) {
    prefetch_lines(data.as_ptr().cast(), size_of_val(data), PREFETCH_READ_LINES);
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn prefetch_lines(start: *const u8, length_bytes: usize, max_lines: usize) {
    use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    let line_count = length_bytes.div_ceil(CACHE_LINE_BYTES).min(max_lines);
    for line_index in 0..line_count {
        // `wrapping_add` keeps the address computation safe; it stays inside the slice
        // because line_index * 64 < length_bytes.
        let address = start.wrapping_add(line_index * CACHE_LINE_BYTES);
        // SAFETY: prefetch is a hint: it never faults and does not change memory, and SSE
        // is part of the x86_64 baseline. The address lies inside a live slice anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(address.cast()) };
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn prefetch_lines(_start: *const u8, _length_bytes: usize, _max_lines: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetch_accepts_any_slice() {
        let values = vec![1.0f32; 1000];
        prefetch_slice(&values);
        prefetch_slice::<f32>(&[]);
        prefetch_read(&values[3..]);
        prefetch_bytes(&[1, 2, 3], 10);
        prefetch_bytes(&[], 10);
        let zero_sized = [(); 8];
        prefetch_slice(&zero_sized);
    }
}
