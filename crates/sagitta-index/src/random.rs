//! splitmix64: the crate's one source of deterministic draws (levels, k-means samples,
//! link order, RaBitQ rotations), below every module that draws.

/// The splitmix64 finalizer: a well-mixed 64-bit hash of `x` (also the node levels').
pub(crate) fn splitmix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// splitmix64: a fixed sequence, so the same batch is always linked in the same order.
pub(crate) struct SplitMix64(pub u64);

impl SplitMix64 {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix64(self.0)
    }

    /// Uniform-enough in `0..bound` (`bound` > 0; the modulo bias is irrelevant here).
    pub(crate) fn below(&mut self, bound: usize) -> usize {
        #[allow(clippy::cast_possible_truncation)]
        let value = (self.next() % bound as u64) as usize;
        value
    }
}
