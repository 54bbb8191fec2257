//! The binomial reduction tree over ranks `0..size`, rooted at rank 0.
//!
//! In round `j` (mask `m = 2^j`), a rank whose lowest set bit is `m` sends what it has
//! merged so far to `rank - m` and is done; a rank with no bit set at or below `m`
//! receives from `rank + m`, if that rank exists, and merges. After `ceil(log2(size))`
//! rounds rank 0 holds everything. Every rank merges at most `ceil(log2(size))` lists
//! (rank 0 the most): with a plain gather rank 0 would merge `size - 1`.

/// Where `rank` sits in the tree over `size` ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeRole {
    /// The ranks whose lists this rank merges, in the order they arrive (round by round).
    pub children: Vec<usize>,
    /// The rank this one sends its merged list to (`None` for rank 0).
    pub parent: Option<usize>,
}

/// The role of `rank` in the binomial tree over `size` ranks.
///
/// # Panics
/// If `rank` is not below `size`.
pub fn role(rank: usize, size: usize) -> TreeRole {
    assert!(rank < size, "rank {rank} of {size}");
    let mut children = Vec::new();
    let mut mask = 1;
    while mask < size {
        if rank & mask != 0 {
            return TreeRole {
                children,
                parent: Some(rank - mask),
            };
        }
        if rank + mask < size {
            children.push(rank + mask);
        }
        mask <<= 1;
    }
    TreeRole {
        children,
        parent: None,
    }
}

/// The rounds the tree takes over `size` ranks: `ceil(log2(size))`.
pub fn depth(size: usize) -> usize {
    size.next_power_of_two().trailing_zeros() as usize
}

#[cfg(test)]
mod tests {
    use super::{depth, role};

    #[test]
    fn every_rank_reaches_the_root_once_and_no_rank_merges_more_than_the_depth() {
        for size in 1..=70 {
            let mut received = vec![0_usize; size];
            for rank in 0..size {
                let it = role(rank, size);
                assert_eq!(it.parent.is_none(), rank == 0, "{rank}/{size}");
                assert!(it.children.len() <= depth(size), "{rank}/{size}: {it:?}");
                for &child in &it.children {
                    assert_eq!(role(child, size).parent, Some(rank));
                    received[child] += 1;
                }
                // following parents ends at rank 0 within `depth` hops
                let (mut at, mut hops) = (rank, 0);
                while let Some(parent) = role(at, size).parent {
                    at = parent;
                    hops += 1;
                }
                assert!(hops <= depth(size));
            }
            assert_eq!(received[0], 0);
            assert!(received[1..].iter().all(|&count| count == 1), "{size}");
        }
        assert_eq!(role(0, 8).children, vec![1, 2, 4]);
        assert_eq!(role(6, 8).children, vec![7]);
        assert_eq!(role(6, 8).parent, Some(4));
        assert_eq!((depth(1), depth(2), depth(5), depth(256)), (0, 1, 3, 8));
    }
}
