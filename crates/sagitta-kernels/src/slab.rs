//! `AppendSlab`: a fixed-capacity store of equal-length rows, written once each, readable
//! from other threads while further rows are being written.
//!
//! Protocol, per row, with one `AtomicU8` state:
//!
//! ```text
//! EMPTY --(write_row: compare_exchange, Acquire)--> WRITING --(copy, store Release)--> PUBLISHED
//! ```
//!
//! Only the thread that won the compare-exchange writes the row's memory, and it writes
//! through a raw pointer (never through a shared slice), so no `&[T]` ever aliases a row that
//! is being written. `row` returns a slice only after an Acquire load sees PUBLISHED, which
//! orders the copy before the read; published rows are never written again, so the returned
//! slices stay valid and immutable for as long as the slab is borrowed.

use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering};

/// Alignment of the allocation's first byte, in bytes (one cache line, one zmm register).
pub const SLAB_ALIGNMENT_BYTES: usize = 64;

const ROW_EMPTY: u8 = 0;
const ROW_WRITING: u8 = 1;
const ROW_PUBLISHED: u8 = 2;

/// An element type whose all-zero bit pattern is a valid value equal to `T::default()`,
/// so a slab is allocated zeroed (`alloc_zeroed`): the allocator hands out fresh pages
/// that the kernel zeroes on first touch, and rows never written (the spare capacity of a
/// graph) cost no time and no resident memory. A loaded segment of N points with room for
/// N more zeroed every spare row before (a third of the time of reopening a database).
///
/// # Safety
/// Implement only for types whose all-zero bytes are a valid `T` equal to `T::default()`.
pub unsafe trait Zeroable: Copy + Default + Send + Sync + 'static {}

// SAFETY: zero bytes are 0 / 0.0 / (), each type's default.
unsafe impl Zeroable for f32 {}
// SAFETY: as above.
unsafe impl Zeroable for f64 {}
// SAFETY: as above.
unsafe impl Zeroable for i8 {}
// SAFETY: as above.
unsafe impl Zeroable for u8 {}
// SAFETY: as above.
unsafe impl Zeroable for u16 {}
// SAFETY: as above.
unsafe impl Zeroable for u32 {}
// SAFETY: as above.
unsafe impl Zeroable for u64 {}
// SAFETY: a zero-sized type has no bytes.
unsafe impl Zeroable for () {}
// SAFETY: an array of zeroed elements is the array of their defaults.
unsafe impl<T: Zeroable, const N: usize> Zeroable for [T; N] where [T; N]: Default {}

/// Errors of [`AppendSlab::write_row`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlabError {
    /// The row index is not below the capacity.
    RowOutOfRange {
        /// Requested row index.
        row: usize,
        /// Capacity in rows.
        capacity: usize,
    },
    /// The row was already written (or is being written by another thread).
    RowAlreadyWritten {
        /// Requested row index.
        row: usize,
    },
    /// More values than the row stride.
    WrongRowLength {
        /// Most values a row holds (the stride).
        expected: usize,
        /// Values passed.
        received: usize,
    },
}

impl std::fmt::Display for SlabError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SlabError::RowOutOfRange { row, capacity } => {
                write!(
                    formatter,
                    "row {row} is out of range (capacity {capacity} rows)"
                )
            }
            SlabError::RowAlreadyWritten { row } => {
                write!(formatter, "row {row} was already written")
            }
            SlabError::WrongRowLength { expected, received } => write!(
                formatter,
                "row has {received} values but the stride is {expected}"
            ),
        }
    }
}

impl std::error::Error for SlabError {}

/// Rows of `stride` elements, 64-byte aligned start, capacity fixed at creation. Each row is
/// written exactly once ([`write_row`](Self::write_row)) then immutable; readers on other
/// threads can read any published row while writers fill other rows.
///
/// Row r starts `r * stride` elements after the 64-byte aligned base, so rows are 64-byte
/// aligned when `stride * size_of::<T>()` is a multiple of 64 (see
/// [`aligned_stride`](Self::aligned_stride)).
pub struct AppendSlab<T: Zeroable> {
    /// Base of `capacity_rows * stride` initialised elements (dangling when the layout has
    /// size 0).
    base: NonNull<T>,
    capacity_rows: usize,
    stride: usize,
    /// `capacity_rows` row states (`ROW_EMPTY`, `ROW_WRITING`, `ROW_PUBLISHED`).
    states: Box<[AtomicU8]>,
    /// The allocation `base` lies in (up to [`SLAB_ALIGNMENT_BYTES`] before it) and its
    /// layout (not allocated when its size is 0).
    allocation: NonNull<u8>,
    layout: Layout,
    /// The NUMA node [`prefer_node`](Self::prefer_node) gave the rows ([`NO_NODE`]:
    /// none): `grow` gives the new allocation the same one.
    preferred_node: AtomicUsize,
    _owns: PhantomData<T>,
}

const NO_NODE: usize = usize::MAX;

// SAFETY: the slab owns its elements like a `Box<[T]>`; moving it to another thread moves
// them, which is fine because `T: Send`.
unsafe impl<T: Zeroable> Send for AppendSlab<T> {}

// SAFETY: shared access hands out `&[T]` of published (immutable) rows only, which needs
// `T: Sync`; writes through `&self` go to rows claimed exclusively by an atomic
// compare-exchange, and are published with Release / observed with Acquire.
unsafe impl<T: Zeroable> Sync for AppendSlab<T> {}

impl<T: Zeroable> AppendSlab<T> {
    /// A slab of `capacity_rows` rows of `stride` elements, every element `T::default()`.
    ///
    /// # Panics
    /// If the size in bytes overflows `isize` or the allocation fails.
    pub fn new(capacity_rows: usize, stride: usize) -> Self {
        let (base, allocation, layout) = allocate_default::<T>(capacity_rows, stride);
        let states = (0..capacity_rows)
            .map(|_| AtomicU8::new(ROW_EMPTY))
            .collect();
        AppendSlab {
            base,
            capacity_rows,
            stride,
            states,
            allocation,
            layout,
            preferred_node: AtomicUsize::new(NO_NODE),
            _owns: PhantomData,
        }
    }

    /// Smallest stride of at least `dimension` elements that makes every row start 64-byte
    /// aligned (when `size_of::<T>()` divides 64; otherwise `dimension` unchanged).
    pub fn aligned_stride(dimension: usize) -> usize {
        let element_bytes = size_of::<T>();
        if element_bytes == 0 || !SLAB_ALIGNMENT_BYTES.is_multiple_of(element_bytes) {
            return dimension;
        }
        dimension.next_multiple_of(SLAB_ALIGNMENT_BYTES / element_bytes)
    }

    /// Capacity in rows.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity_rows
    }

    /// Elements per row.
    #[inline]
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// Writes row `row` once and publishes it. `values.len()` may be below the stride; the
    /// rest of the row stays `T::default()`.
    pub fn write_row(&self, row: usize, values: &[T]) -> Result<(), SlabError> {
        if row >= self.capacity_rows {
            return Err(SlabError::RowOutOfRange {
                row,
                capacity: self.capacity_rows,
            });
        }
        if values.len() > self.stride {
            return Err(SlabError::WrongRowLength {
                expected: self.stride,
                received: values.len(),
            });
        }
        let state = &self.states[row];
        if state
            .compare_exchange(ROW_EMPTY, ROW_WRITING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(SlabError::RowAlreadyWritten { row });
        }
        // SAFETY: row < capacity_rows, so the row's `stride` elements lie inside the
        // allocation (or are zero bytes long); `values.len() <= stride`. This thread won the
        // EMPTY -> WRITING exchange, so no other thread writes this row, and no reader holds
        // a slice of it until it is PUBLISHED below. Source and destination do not overlap:
        // `values` is a shared borrow, which cannot point into an unpublished row.
        unsafe {
            let destination = self.base.as_ptr().add(row * self.stride);
            std::ptr::copy_nonoverlapping(values.as_ptr(), destination, values.len());
        }
        state.store(ROW_PUBLISHED, Ordering::Release);
        Ok(())
    }

    /// The full row (`stride` elements) if it is published, else `None`.
    #[inline]
    pub fn row(&self, row: usize) -> Option<&[T]> {
        let state = self.states.get(row)?;
        if state.load(Ordering::Acquire) != ROW_PUBLISHED {
            return None;
        }
        // SAFETY: row < capacity_rows (the state exists), so the row lies inside the
        // initialised allocation. PUBLISHED was observed with Acquire, pairing with the
        // writer's Release store, so the copy happened before this read; published rows are
        // never written again while `self` is shared (`grow` needs `&mut self`).
        Some(unsafe {
            std::slice::from_raw_parts(self.base.as_ptr().add(row * self.stride), self.stride)
        })
    }

    /// Whether row `row` is published (false when out of range).
    #[inline]
    pub fn is_published(&self, row: usize) -> bool {
        self.states
            .get(row)
            .is_some_and(|state| state.load(Ordering::Acquire) == ROW_PUBLISHED)
    }

    /// Grows the capacity to `new_capacity_rows` (no-op if not larger), keeping every row's
    /// contents and state. Needs exclusive access, so no reader or writer is active.
    pub fn grow(&mut self, new_capacity_rows: usize) {
        if new_capacity_rows <= self.capacity_rows {
            return;
        }
        let (new_base, new_allocation, new_layout) =
            allocate_default::<T>(new_capacity_rows, self.stride);
        let old_element_count = self.capacity_rows * self.stride;
        // SAFETY: both allocations hold at least `old_element_count` initialised elements
        // and are distinct; `&mut self` rules out concurrent writers.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.as_ptr(), new_base.as_ptr(), old_element_count);
        }
        let states: Box<[AtomicU8]> = self
            .states
            .iter_mut()
            .map(|state| AtomicU8::new(*state.get_mut()))
            .chain((self.capacity_rows..new_capacity_rows).map(|_| AtomicU8::new(ROW_EMPTY)))
            .collect();
        // SAFETY: `allocation` and `layout` describe the current allocation, which nothing borrows
        // (`&mut self`); it is replaced right after.
        unsafe { free(self.allocation, self.layout) };
        self.base = new_base;
        self.allocation = new_allocation;
        self.layout = new_layout;
        self.states = states;
        self.capacity_rows = new_capacity_rows;
        let node = *self.preferred_node.get_mut();
        if node != NO_NODE {
            // the node took the old rows; a refusal now leaves the new ones local
            let _ = self.prefer_node(node);
        }
    }

    /// Makes NUMA node `node` the home of the rows' memory: rows already written move
    /// there, rows written later are allocated there (a far memory tier holds a graph's
    /// full vectors this way; readers see no change but latency). The error names the
    /// kernel's reason; the rows then stay where they were.
    pub fn prefer_node(&self, node: usize) -> Result<(), String> {
        // SAFETY: the range is this slab's live allocation.
        unsafe { crate::numa::prefer_node(self.allocation.as_ptr(), self.layout.size(), node) }?;
        self.preferred_node.store(node, Ordering::Relaxed);
        Ok(())
    }

    /// How many resident pages of the rows lie on each NUMA node, as `(node, pages)`.
    pub fn resident_pages(&self) -> Result<Vec<(usize, usize)>, String> {
        // SAFETY: as in `prefer_node`.
        unsafe { crate::numa::resident_pages(self.allocation.as_ptr(), self.layout.size()) }
    }

    /// Bytes held: the row memory plus one state byte per row.
    pub fn memory_bytes(&self) -> usize {
        self.capacity_rows * self.stride * size_of::<T>()
            + self.states.len() * size_of::<AtomicU8>()
    }
}

impl<T: Zeroable> Drop for AppendSlab<T> {
    fn drop(&mut self) {
        // SAFETY: `allocation` and `layout` describe the allocation made by `allocate_default`,
        // freed exactly once here.
        unsafe { free(self.allocation, self.layout) };
    }
}

impl<T: Zeroable> std::fmt::Debug for AppendSlab<T> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("AppendSlab")
            .field("capacity_rows", &self.capacity_rows)
            .field("stride", &self.stride)
            .field("memory_bytes", &self.memory_bytes())
            .finish_non_exhaustive()
    }
}

/// Allocates `row_count * stride` elements, 64-byte aligned, zeroed (each `T::default()`,
/// see [`Zeroable`]); returns the aligned base, the allocation and its layout. The
/// allocation asks for `T`'s own alignment plus [`SLAB_ALIGNMENT_BYTES`] of slack, because
/// the system allocator zeroes an over-aligned request with a memset, while a plainly
/// aligned one is a `calloc` that takes fresh, already-zero pages.
fn allocate_default<T: Zeroable>(
    row_count: usize,
    stride: usize,
) -> (NonNull<T>, NonNull<u8>, Layout) {
    let element_count = row_count
        .checked_mul(stride)
        .expect("slab element count overflows usize");
    let size_bytes = element_count
        .checked_mul(size_of::<T>())
        .expect("slab size in bytes overflows usize");
    if size_bytes == 0 {
        // Nothing to allocate; a dangling, well-aligned pointer is valid for zero-byte
        // accesses and for slices of zero-sized `T`.
        let layout = Layout::from_size_align(0, 1).expect("empty layout");
        return (NonNull::dangling(), NonNull::dangling(), layout);
    }
    const { assert!(SLAB_ALIGNMENT_BYTES.is_power_of_two()) };
    let layout = Layout::from_size_align(
        size_bytes
            .checked_add(SLAB_ALIGNMENT_BYTES)
            .expect("slab size overflows usize"),
        align_of::<T>(),
    )
    .expect("slab size overflows isize");
    // SAFETY: the layout has a non-zero size.
    let raw = unsafe { alloc_zeroed(layout) };
    let Some(allocation) = NonNull::new(raw) else {
        handle_alloc_error(layout)
    };
    advise_huge_pages(raw, layout.size());
    let padding = raw.align_offset(SLAB_ALIGNMENT_BYTES.max(align_of::<T>()));
    assert!(padding < SLAB_ALIGNMENT_BYTES, "aligned within the slack");
    // SAFETY: `padding + size_bytes <= layout.size()`, so the base and its elements lie in
    // the allocation; the base is aligned for `T` (64 is a multiple of `align_of::<T>()`
    // for every `Zeroable` type). Zeroed memory holds `T::default()` in every element
    // (`T: Zeroable`), so every element is initialised.
    let base = unsafe { NonNull::new_unchecked(raw.add(padding).cast::<T>()) };
    (base, allocation, layout)
}

/// Asks the kernel to back the whole 2 MiB pages of a large allocation with huge pages
/// (where transparent huge pages are in `madvise` mode): a loaded segment's rows then take
/// one page fault per 2 MiB instead of per 4 KiB. Advice only; failure changes nothing.
fn advise_huge_pages(start: *mut u8, size: usize) {
    const HUGE: usize = 2 << 20;
    if size < 2 * HUGE {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let first = start.align_offset(HUGE);
        let length = (size - first) / HUGE * HUGE;
        if length > 0 {
            // SAFETY: `[start + first, start + first + length)` lies inside the live
            // allocation of `size` bytes at `start`; MADV_HUGEPAGE changes no contents.
            unsafe {
                libc::madvise(start.add(first).cast(), length, libc::MADV_HUGEPAGE);
            }
        }
    }
}

/// `len` atomics, all 0, allocated zeroed: like [`AppendSlab`], a graph's link arrays for
/// nodes not yet added cost neither a memset nor resident memory.
pub fn zeroed_atomic_u32s(len: usize) -> Vec<AtomicU32> {
    const {
        assert!(size_of::<AtomicU32>() == size_of::<u32>());
        assert!(align_of::<AtomicU32>() == align_of::<u32>());
    };
    let mut zeros = std::mem::ManuallyDrop::new(vec![0u32; len]);
    // SAFETY: `AtomicU32` has the size, alignment (asserted above) and bit validity of
    // `u32`, so the allocation (made by the global allocator for `capacity` u32s, now not
    // dropped as a Vec<u32>) is a valid allocation of `capacity` AtomicU32s, `len` of them
    // initialised.
    unsafe {
        Vec::from_raw_parts(
            zeros.as_mut_ptr().cast::<AtomicU32>(),
            zeros.len(),
            zeros.capacity(),
        )
    }
}

/// Frees an allocation made by `allocate_default`.
///
/// # Safety
/// `allocation` and `layout` come from one `allocate_default` call, the allocation is not
/// freed yet and nothing borrows it.
unsafe fn free(allocation: NonNull<u8>, layout: Layout) {
    if layout.size() != 0 {
        // SAFETY: guaranteed by the caller; zero-size layouts were never allocated.
        unsafe { dealloc(allocation.as_ptr(), layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slab_is_send_and_sync() {
        fn assert_send_sync<S: Send + Sync>() {}
        assert_send_sync::<AppendSlab<f32>>();
        assert_send_sync::<AppendSlab<i8>>();
    }

    #[test]
    fn base_is_aligned_and_rows_default() {
        let slab = AppendSlab::<f32>::new(10, 7);
        assert_eq!(slab.base.as_ptr() as usize % SLAB_ALIGNMENT_BYTES, 0);
        assert_eq!(slab.capacity(), 10);
        assert_eq!(slab.stride(), 7);
        assert!(slab.row(0).is_none());
        slab.write_row(3, &[1.0, 2.0]).unwrap();
        assert_eq!(slab.row(3).unwrap(), &[1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert!(slab.is_published(3));
        assert!(!slab.is_published(4));
        assert!(!slab.is_published(100));
        assert!(slab.row(100).is_none());
        assert_eq!(slab.memory_bytes(), 10 * 7 * 4 + 10);
    }

    #[test]
    fn errors() {
        let slab = AppendSlab::<i8>::new(4, 3);
        assert_eq!(
            slab.write_row(4, &[1]),
            Err(SlabError::RowOutOfRange {
                row: 4,
                capacity: 4
            })
        );
        assert_eq!(
            slab.write_row(0, &[1, 2, 3, 4]),
            Err(SlabError::WrongRowLength {
                expected: 3,
                received: 4
            })
        );
        assert!(
            !slab.is_published(0),
            "a rejected write must not publish the row"
        );
        slab.write_row(0, &[1, 2, 3]).unwrap();
        assert_eq!(
            slab.write_row(0, &[4, 5, 6]),
            Err(SlabError::RowAlreadyWritten { row: 0 })
        );
        assert_eq!(slab.row(0).unwrap(), &[1, 2, 3]);
        let message = SlabError::RowAlreadyWritten { row: 0 }.to_string();
        assert!(message.contains("row 0"));
    }

    #[test]
    fn zero_sizes() {
        let empty = AppendSlab::<f32>::new(0, 16);
        assert!(empty.row(0).is_none());
        assert_eq!(empty.memory_bytes(), 0);
        let zero_stride = AppendSlab::<f32>::new(3, 0);
        zero_stride.write_row(1, &[]).unwrap();
        assert_eq!(zero_stride.row(1), Some(&[][..]));
        let zero_sized = AppendSlab::<()>::new(3, 5);
        zero_sized.write_row(2, &[(), ()]).unwrap();
        assert_eq!(zero_sized.row(2).unwrap().len(), 5);
    }

    #[test]
    fn grow_keeps_rows_and_states() {
        let mut slab = AppendSlab::<u64>::new(2, 3);
        slab.write_row(1, &[7, 8, 9]).unwrap();
        slab.grow(5);
        assert_eq!(slab.capacity(), 5);
        assert_eq!(slab.base.as_ptr() as usize % SLAB_ALIGNMENT_BYTES, 0);
        assert!(slab.row(0).is_none());
        assert_eq!(slab.row(1).unwrap(), &[7, 8, 9]);
        assert_eq!(
            slab.write_row(1, &[1]),
            Err(SlabError::RowAlreadyWritten { row: 1 })
        );
        slab.write_row(4, &[1, 2]).unwrap();
        assert_eq!(slab.row(4).unwrap(), &[1, 2, 0]);
        slab.grow(1);
        assert_eq!(slab.capacity(), 5);
        let mut from_empty = AppendSlab::<f32>::new(0, 4);
        from_empty.grow(2);
        from_empty.write_row(1, &[1.0; 4]).unwrap();
        assert_eq!(from_empty.row(1).unwrap(), &[1.0; 4]);
    }

    #[test]
    fn aligned_stride() {
        assert_eq!(AppendSlab::<f32>::aligned_stride(0), 0);
        assert_eq!(AppendSlab::<f32>::aligned_stride(1), 16);
        assert_eq!(AppendSlab::<f32>::aligned_stride(100), 112);
        assert_eq!(AppendSlab::<i8>::aligned_stride(768), 768);
        assert_eq!(AppendSlab::<[u8; 3]>::aligned_stride(5), 5);
    }

    /// Writers fill distinct rows while readers poll; every row a reader sees must be
    /// complete (all elements equal to the row's tag).
    #[test]
    fn concurrent_writers_and_readers() {
        const ROW_COUNT: usize = 2_000;
        const STRIDE: usize = 67;
        const WRITER_COUNT: usize = 3;
        let slab = AppendSlab::<u64>::new(ROW_COUNT, STRIDE);
        std::thread::scope(|scope| {
            for writer_index in 0..WRITER_COUNT {
                let slab = &slab;
                scope.spawn(move || {
                    for row in (writer_index..ROW_COUNT).step_by(WRITER_COUNT) {
                        let tag = row as u64 * 1_000_003 + 1;
                        slab.write_row(row, &[tag; STRIDE]).unwrap();
                    }
                });
            }
            for _ in 0..2 {
                let slab = &slab;
                scope.spawn(move || {
                    let mut seen_rows = 0;
                    while seen_rows < ROW_COUNT {
                        seen_rows = 0;
                        for row in 0..ROW_COUNT {
                            if let Some(values) = slab.row(row) {
                                let tag = row as u64 * 1_000_003 + 1;
                                assert!(values.iter().all(|&value| value == tag), "torn row {row}");
                                seen_rows += 1;
                            }
                        }
                    }
                });
            }
        });
        for row in 0..ROW_COUNT {
            assert!(slab.is_published(row));
        }
    }

    /// Two threads race for the same rows: exactly one write per row succeeds.
    #[test]
    fn concurrent_double_writes() {
        const ROW_COUNT: usize = 1_000;
        let slab = AppendSlab::<u32>::new(ROW_COUNT, 4);
        let successes: Vec<usize> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2u32)
                .map(|thread_index| {
                    let slab = &slab;
                    scope.spawn(move || {
                        (0..ROW_COUNT)
                            .filter(|&row| slab.write_row(row, &[thread_index; 4]).is_ok())
                            .count()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().unwrap())
                .collect()
        });
        assert_eq!(successes.iter().sum::<usize>(), ROW_COUNT);
        for row in 0..ROW_COUNT {
            let values = slab.row(row).unwrap();
            assert!(values.iter().all(|&value| value == values[0]));
        }
    }
}
