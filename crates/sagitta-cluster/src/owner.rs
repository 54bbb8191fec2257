//! Which rank owns a point: a stable function of its id and the number of ranks.

use sagitta_engine::PointId;

/// The rank (of `ranks`) that owns `id`. It takes the high bits of the id's routing hash
/// (multiply-high: `hash × ranks / 2^64`), while a rank's collection picks the shard from
/// the low bits (`hash mod shards`), so with any rank and shard counts every rank's shards
/// fill evenly. Stable across runs, builds and platforms: a restarted job finds every
/// point where it left it (with the same number of ranks).
///
/// # Panics
/// If `ranks` is 0.
pub fn owner_rank(id: &PointId, ranks: usize) -> usize {
    assert!(ranks > 0, "a job has at least one rank");
    let wide = u128::from(id.routing_hash()) * ranks as u128;
    usize::try_from(wide >> 64).expect("below ranks")
}

#[cfg(test)]
mod tests {
    use super::owner_rank;
    use sagitta_engine::PointId;

    #[test]
    fn owners_are_stable_and_even_and_independent_of_the_shard() {
        // pinned: a change of the function would strand every stored point
        let pinned: Vec<usize> = (0..8)
            .map(|id| owner_rank(&PointId::Number(id), 4))
            .collect();
        assert_eq!(pinned, [0, 1, 3, 0, 2, 2, 3, 0]);
        assert_eq!(
            owner_rank(&PointId::Uuid(7 << 90), 3),
            owner_rank(&PointId::Uuid(7 << 90), 3)
        );
        assert_eq!(owner_rank(&PointId::Number(5), 1), 0);
        // 4 ranks × 2 shards each: all 8 (rank, shard) cells near 1/8 of the points
        let mut cells = [0_usize; 8];
        for id in 0..80_000 {
            let id = PointId::Number(id);
            let shard = (id.routing_hash() % 2) as usize;
            cells[owner_rank(&id, 4) * 2 + shard] += 1;
        }
        for count in cells {
            assert!((9_000..11_000).contains(&count), "{cells:?}");
        }
    }
}
