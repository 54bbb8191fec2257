mod common;

use std::sync::atomic::{AtomicBool, Ordering};

use common::{brute_force, clustered, recall};
use sagitta_index::hnsw::{
    AddProgress, Codes, HnswIndex, HnswParams, HnswSearchParams, Quantization,
};
use sagitta_index::{IndexError, Metric};

const DIM: usize = 48;
const COUNT: usize = 4_000;
/// Recall floor for k=10, ef=64 on the clustered set: a correctness check (a broken graph,
/// quantizer or re-scoring drops far below it), not a speed test.
const RECALL_FLOOR: f64 = 0.95;

/// The tests' graph parameters: m 12, ef_construction 80.
fn params_for(metric: Metric, quantization: Quantization) -> HnswParams {
    let mut params = HnswParams::new(DIM, metric);
    params.quantization = quantization;
    params.m = 12;
    params.ef_construction = 80;
    params
}

fn build(metric: Metric, quantization: Quantization, base: &[f32], threads: usize) -> HnswIndex {
    let index = HnswIndex::new(params_for(metric, quantization), base.len() / DIM).unwrap();
    let labels: Vec<u64> = (0..(base.len() / DIM) as u64).collect();
    index.add(base, &labels, threads).unwrap();
    index
}

#[test]
fn hnsw_recall_meets_floor_for_every_metric_and_quantization() {
    let base = clustered(COUNT, DIM, 11);
    let queries = clustered(100, DIM, 12);
    for metric in [Metric::Cosine, Metric::Dot, Metric::L2] {
        let truth = brute_force(metric, &base, &queries, DIM, 10);
        for quantization in [Quantization::None, Quantization::Sq8] {
            let index = build(metric, quantization, &base, 2);
            let results = index
                .search_batch(&queries, HnswSearchParams::new(10, 64), 2)
                .unwrap();
            let measured = recall(&results.ids, &truth, 10);
            eprintln!("{metric:?}/{quantization:?}: recall@10 at ef=64 = {measured}");
            assert!(
                measured >= RECALL_FLOOR,
                "{metric:?}/{quantization:?}: recall {measured} < {RECALL_FLOOR}"
            );
        }
    }
}

fn small_params() -> HnswParams {
    params_for(Metric::L2, HnswParams::new(DIM, Metric::L2).quantization)
}

#[test]
fn add_with_progress_counts_each_linked_row_once_and_never_goes_back() {
    let base = clustered(COUNT, DIM, 31);
    let extra = clustered(100, DIM, 32);
    let index = HnswIndex::new(small_params(), COUNT + extra.len() / DIM).unwrap();
    let labels: Vec<u64> = (0..COUNT as u64).collect();
    let progress = AddProgress::new();
    let finished = AtomicBool::new(false);
    let samples = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            let mut samples = Vec::new();
            while !finished.load(Ordering::Acquire) {
                samples.push(progress.linked());
                std::thread::yield_now();
            }
            samples.push(progress.linked());
            samples
        });
        index
            .add_with_progress(&base, &labels, 2, Some(&progress))
            .unwrap();
        finished.store(true, Ordering::Release);
        watcher.join().unwrap()
    });
    assert!(
        samples.windows(2).all(|pair| pair[0] <= pair[1]),
        "progress went backwards"
    );
    assert_eq!(samples.last(), Some(&COUNT));
    assert!(
        samples.iter().any(|seen| (1..COUNT).contains(seen)),
        "no sample between 0 and {COUNT} in {} polls: the counter only moved at the end",
        samples.len()
    );
    // A rejected batch (duplicate label) counts nothing; a later call adds only its rows.
    let rejected = index.add_with_progress(&base[..DIM], &[0], 1, Some(&progress));
    assert!(matches!(rejected, Err(IndexError::DuplicateId { id: 0 })));
    assert_eq!(progress.linked(), COUNT);
    let more: Vec<u64> = (COUNT as u64..(COUNT + extra.len() / DIM) as u64).collect();
    index
        .add_with_progress(&extra, &more, 1, Some(&progress))
        .unwrap();
    assert_eq!(progress.linked(), COUNT + more.len());
    assert_eq!(index.len(), COUNT + more.len());
}

#[test]
fn a_cancelled_add_stops_linking_and_says_so() {
    let base = clustered(COUNT, DIM, 33);
    let labels: Vec<u64> = (0..COUNT as u64).collect();
    // cancelled before it starts: nothing changes
    let index = HnswIndex::new(small_params(), COUNT).unwrap();
    let progress = AddProgress::new();
    progress.cancel();
    assert_eq!(
        index.add_with_progress(&base, &labels, 2, Some(&progress)),
        Err(IndexError::Cancelled)
    );
    assert_eq!((index.len(), progress.linked()), (0, 0));
    index.add(&base[..DIM], &labels[..1], 1).unwrap();
    // cancelled while linking: stops long before the last row
    let index = HnswIndex::new(small_params(), COUNT).unwrap();
    let progress = AddProgress::new();
    let result = std::thread::scope(|scope| {
        let build = scope.spawn(|| index.add_with_progress(&base, &labels, 2, Some(&progress)));
        while progress.linked() < 100 && !build.is_finished() {
            std::thread::yield_now();
        }
        progress.cancel();
        build.join().unwrap()
    });
    assert_eq!(result, Err(IndexError::Cancelled));
    let linked = progress.linked();
    assert!(
        (100..COUNT / 2).contains(&linked),
        "{linked} rows linked after the cancel"
    );
}

#[test]
fn sq8_scores_are_exact_after_rescoring() {
    let base = clustered(1_000, DIM, 13);
    let index = build(Metric::L2, Quantization::Sq8, &base, 1);
    let query = &clustered(1, DIM, 14)[..];
    let hits = index.search(query, HnswSearchParams::new(5, 50)).unwrap();
    for hit in hits {
        let row = &base[hit.label as usize * DIM..(hit.label as usize + 1) * DIM];
        let exact = common::reference_distance(Metric::L2, query, row);
        assert!((f64::from(hit.score) - exact).abs() <= 1e-3 * (1.0 + exact));
    }
}

#[test]
fn deleted_points_and_rejected_points_are_never_returned() {
    let base = clustered(2_000, DIM, 15);
    let index = build(Metric::Cosine, Quantization::Sq8, &base, 2);
    let queries = clustered(20, DIM, 16);
    let first = index
        .search_batch(&queries, HnswSearchParams::new(10, 64), 1)
        .unwrap();
    let victims: Vec<u64> = first.ids.iter().step_by(3).copied().collect();
    for id in &victims {
        index.mark_deleted(*id);
    }
    let second = index
        .search_batch(&queries, HnswSearchParams::new(10, 64), 1)
        .unwrap();
    assert!(second.ids.iter().all(|id| !victims.contains(id)));
    assert!(second.ids.iter().all(|id| *id != sagitta_index::MISSING_ID));
    let hits = index
        .search_filtered(&queries[..DIM], HnswSearchParams::new(10, 64), |node| {
            index.label(node).is_multiple_of(5)
        })
        .unwrap();
    assert_eq!(hits.len(), 10);
    assert!(hits
        .iter()
        .all(|hit| hit.label.is_multiple_of(5) && !victims.contains(&hit.label)));
}

#[test]
fn concurrent_insert_and_search_stay_consistent() {
    let base = clustered(6_000, DIM, 17);
    let mut params = HnswParams::new(DIM, Metric::L2);
    params.m = 8;
    params.ef_construction = 40;
    let index = HnswIndex::new(params, 6_000).unwrap();
    index
        .add(&base[..1_000 * DIM], &(0..1_000).collect::<Vec<u64>>(), 1)
        .unwrap();
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for chunk in 1..6 {
                let rows = chunk * 1_000..(chunk + 1) * 1_000;
                let labels: Vec<u64> = rows.clone().map(|r| r as u64).collect();
                index
                    .add(&base[rows.start * DIM..rows.end * DIM], &labels, 2)
                    .unwrap();
            }
            done.store(true, Ordering::Release);
        });
        scope.spawn(|| {
            let queries = clustered(16, DIM, 18);
            let mut rounds = 0;
            while !done.load(Ordering::Acquire) || rounds < 3 {
                let results = index
                    .search_batch(&queries, HnswSearchParams::new(5, 32), 1)
                    .unwrap();
                assert!(
                    results.ids.iter().all(|id| *id < 6_000),
                    "{:?}",
                    results.ids
                );
                rounds += 1;
            }
        });
    });
    assert_eq!(index.len(), 6_000);
    let queries = clustered(50, DIM, 19);
    let truth = brute_force(Metric::L2, &base, &queries, DIM, 10);
    let results = index
        .search_batch(&queries, HnswSearchParams::new(10, 96), 2)
        .unwrap();
    assert!(recall(&results.ids, &truth, 10) >= RECALL_FLOOR);
}

#[test]
fn save_load_round_trip_and_corruption_is_detected() {
    let base = clustered(1_500, DIM, 20);
    let queries = clustered(10, DIM, 21);
    let cases = [
        (Quantization::None, Codes::Stored),
        (Quantization::Sq8, Codes::Stored),
        (Quantization::Sq8, Codes::Recomputed),
    ];
    for (quantization, codes) in cases {
        let index = build(Metric::Dot, quantization, &base, 2);
        index.mark_deleted(3);
        let mut bytes = Vec::new();
        index.save_with(&mut bytes, codes).unwrap();
        if codes == Codes::Recomputed {
            // the codes are left out of the file and recomputed identically on load
            let mut stored = Vec::new();
            index.save(&mut stored).unwrap();
            assert!(bytes.len() + 1_500 * DIM <= stored.len());
        }
        let loaded = HnswIndex::load(&mut bytes.as_slice()).unwrap();
        let params = HnswSearchParams::new(10, 40);
        assert_eq!(
            index.search_batch(&queries, params, 1).unwrap(),
            loaded.search_batch(&queries, params, 1).unwrap()
        );
        assert!(loaded.is_deleted(loaded.node_of(3).unwrap()));
        // every flipped byte past the magic is caught by a checksum or a structural check
        for position in [9, 20, 70, bytes.len() / 2, bytes.len() - 2] {
            let mut corrupt = bytes.clone();
            corrupt[position] ^= 0x10;
            assert!(
                matches!(
                    HnswIndex::load(&mut corrupt.as_slice()),
                    Err(IndexError::Format { .. })
                ),
                "flip at {position} not detected"
            );
        }
        let truncated = &bytes[..bytes.len() - 100];
        assert!(matches!(
            HnswIndex::load(&mut &truncated[..]),
            Err(IndexError::Format { .. })
        ));
        // a byte after the last section is damage too, named as such
        let mut longer = bytes.clone();
        longer.push(0);
        match HnswIndex::load(&mut longer.as_slice()) {
            Err(IndexError::Format { reason }) => {
                assert!(reason.contains("end of file"), "{reason}");
            }
            other => panic!("a trailing byte was accepted: {:?}", other.map(|i| i.len())),
        }
        // loaded indexes keep accepting inserts after growing
        let mut loaded = loaded;
        loaded.reserve(2_000).unwrap();
        let extra = clustered(10, DIM, 22);
        loaded
            .add(&extra, &(5_000..5_010).collect::<Vec<u64>>(), 1)
            .unwrap();
        assert_eq!(loaded.len(), 1_510);
    }
}

#[test]
fn bad_input_is_rejected_with_named_fields_and_nothing_is_stored() {
    let index = HnswIndex::new(HnswParams::new(4, Metric::Cosine), 3).unwrap();
    assert!(matches!(
        index.add(&[1.0, 2.0, 3.0], &[1], 1),
        Err(IndexError::WrongVectorDimension { expected: 4, .. })
    ));
    assert!(matches!(
        index.add(&[1.0, f32::NAN, 3.0, 4.0], &[1], 1),
        Err(IndexError::NonFiniteValue {
            row: 0,
            position: 1
        })
    ));
    assert!(matches!(
        index.add(&[1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0], &[1, 1], 1),
        Err(IndexError::DuplicateId { id: 1 })
    ));
    assert!(index.is_empty());
    index.add(&[1.0, 2.0, 3.0, 4.0], &[1], 1).unwrap();
    assert!(matches!(
        index.add(&[1.0, 2.0, 3.0, 4.0], &[1], 1),
        Err(IndexError::DuplicateId { id: 1 })
    ));
    assert!(matches!(
        index.add(&[0.5; 12], &[2, 3, 4], 1),
        Err(IndexError::CapacityExceeded { capacity: 3 })
    ));
    assert_eq!(index.len(), 1);
    assert!(matches!(
        index.search(&[1.0, 2.0, 3.0, 4.0], HnswSearchParams::new(1, 0)),
        Err(IndexError::ParameterOutOfRange { name: "ef", .. })
    ));
    assert!(matches!(
        index.search(&[1.0, 2.0, 3.0, 4.0], HnswSearchParams::new(100_000, 10)),
        Err(IndexError::ParameterOutOfRange { name: "k", .. })
    ));
    let mut params = HnswParams::new(4, Metric::L2);
    params.m = 1;
    assert!(matches!(
        HnswIndex::new(params, 1),
        Err(IndexError::ParameterOutOfRange { name: "m", .. })
    ));
    params.m = 16;
    params.ef_construction = 100_000;
    assert!(matches!(
        HnswIndex::new(params, 1),
        Err(IndexError::ParameterOutOfRange {
            name: "ef_construction",
            ..
        })
    ));
    assert!(matches!(
        HnswIndex::new(HnswParams::new(100_000, Metric::L2), 1),
        Err(IndexError::ParameterOutOfRange { name: "dim", .. })
    ));
}

#[test]
fn empty_index_returns_nothing() {
    let index = HnswIndex::new(HnswParams::new(8, Metric::Dot), 0).unwrap();
    assert!(index
        .search(&[0.5; 8], HnswSearchParams::new(3, 10))
        .unwrap()
        .is_empty());
}

/// An index loaded with spare capacity takes points up to that capacity, SQ8 codes and all,
/// whether its file stored the codes or they were recomputed (the codes' slab held only the
/// file's rows: the first add past them panicked, and a restarted server's buffer joining a
/// loaded segment's graph turned the collection red).
#[test]
fn a_loaded_index_takes_points_up_to_its_capacity() {
    let base = clustered(1_200, DIM, 30);
    let (first, more) = base.split_at(1_000 * DIM);
    for codes in [Codes::Stored, Codes::Recomputed] {
        let index = build(Metric::L2, Quantization::Sq8, first, 2);
        let mut bytes = Vec::new();
        index.save_with(&mut bytes, codes).unwrap();
        let loaded =
            HnswIndex::load_with_capacity(&mut bytes.as_slice(), |count| 2 * count).unwrap();
        assert!(loaded.capacity() >= 1_200);
        let labels: Vec<u64> = (1_000..1_200).collect();
        loaded.add(more, &labels, 2).unwrap();
        assert_eq!(loaded.len(), 1_200);
        let hits = loaded
            .search(&more[..DIM], HnswSearchParams::new(1, 64))
            .unwrap();
        assert_eq!(hits[0].label, 1_000, "{codes:?}");
    }
}

fn recall_at(
    index: &HnswIndex,
    queries: &[f32],
    truth: &[Vec<usize>],
    ef: usize,
    first_pass: bool,
) -> f64 {
    let mut params = HnswSearchParams::new(10, ef);
    params.first_pass = first_pass;
    let results = index.search_batch(queries, params, 2).unwrap();
    recall(&results.ids, truth, 10)
}

#[test]
fn the_first_pass_keeps_recall_and_skips_code_rows() {
    let base = clustered(COUNT, DIM, 21);
    let queries = clustered(200, DIM, 22);
    for metric in [Metric::Cosine, Metric::Dot, Metric::L2] {
        let truth = brute_force(metric, &base, &queries, DIM, 10);
        let mut index = build(metric, Quantization::Sq8, &base, 2);
        assert!(index.enable_first_pass(2).unwrap());
        assert!(
            !index.enable_first_pass(2).unwrap(),
            "a second call does nothing"
        );
        for ef in [16, 32, 64] {
            let plain = recall_at(&index, &queries, &truth, ef, false);
            let screened = recall_at(&index, &queries, &truth, ef, true);
            eprintln!("{metric:?} ef {ef}: recall {plain} without the first pass, {screened} with");
            assert!(
                screened >= plain - 0.005,
                "{metric:?} ef {ef}: first pass recall {screened} < {plain} - 0.005"
            );
        }
        // the pass does screen: fewer SQ8 rows scored than without it
        let mut with = HnswSearchParams::new(10, 64);
        with.first_pass = true;
        let without = HnswSearchParams::new(10, 64);
        let (mut scored_with, mut scored_without, mut screened) = (0, 0, 0);
        for query in queries.chunks_exact(DIM) {
            let (_, stats) = index.search_with_stats(query, with).unwrap();
            scored_with += stats.traversal_distance_count;
            screened += stats.screened_count;
            let (_, stats) = index.search_with_stats(query, without).unwrap();
            scored_without += stats.traversal_distance_count;
            assert_eq!(stats.screened_count, 0);
        }
        eprintln!("{metric:?}: {scored_without} SQ8 rows without, {scored_with} with, {screened} screened");
        assert!(screened > 0 && scored_with < scored_without, "{metric:?}");
        // a saved and loaded index codes its rows again (they are not stored): same answers
        let mut bytes = Vec::new();
        index.save(&mut bytes).unwrap();
        let mut loaded = HnswIndex::load(&mut bytes.as_slice()).unwrap();
        let (_, stats) = loaded.search_with_stats(&queries[..DIM], with).unwrap();
        assert_eq!(stats.screened_count, 0, "the codes are not saved");
        assert!(loaded.enable_first_pass(1).unwrap());
        for query in queries.chunks_exact(DIM).take(20) {
            let (hits, stats) = loaded.search_with_stats(query, with).unwrap();
            assert!(
                stats.screened_count > 0,
                "{metric:?}: loaded index has no first pass"
            );
            assert_eq!(hits, index.search(query, with).unwrap(), "{metric:?}");
        }
    }
}

#[test]
fn the_bit_walk_traverses_on_one_bit_codes_and_scores_the_beam_exactly() {
    let base = clustered(COUNT, DIM, 41);
    let queries = clustered(100, DIM, 42);
    for metric in [Metric::Cosine, Metric::Dot, Metric::L2] {
        let truth = brute_force(metric, &base, &queries, DIM, 10);
        let mut index = build(metric, Quantization::Sq8, &base, 2);
        let mut walk = HnswSearchParams::new(10, 128);
        walk.bit_walk = true;
        // without the codes the flag changes nothing
        let (plain, _) = index.search_with_stats(&queries[..DIM], walk).unwrap();
        assert_eq!(
            plain,
            index
                .search(&queries[..DIM], HnswSearchParams::new(10, 128))
                .unwrap()
        );
        assert!(index.enable_first_pass(2).unwrap());
        let results = index.search_batch(&queries, walk, 2).unwrap();
        let found = recall(&results.ids, &truth, 10);
        eprintln!("{metric:?}: bit walk recall {found} at ef 128");
        assert!(found >= RECALL_FLOOR, "{metric:?}: {found}");
        for query in queries.chunks_exact(DIM).take(10) {
            let (hits, stats) = index.search_with_stats(query, walk).unwrap();
            // the walk scores 1-bit codes only; SQ8 re-scores the beam (ef nodes) once
            assert!(stats.screened_count > 128, "{metric:?}: {stats:?}");
            assert_eq!(stats.traversal_distance_count, 128, "{metric:?}");
            assert_eq!(stats.rescore_distance_count, 40, "{metric:?}");
            for hit in hits {
                let row = &base[hit.label as usize * DIM..(hit.label as usize + 1) * DIM];
                let exact = common::reference_distance(metric, query, row);
                // the score maps back to a distance by its own inverse (a sign)
                let distance = f64::from(metric.score_from_distance(hit.score));
                assert!(
                    (distance - exact).abs() <= 1e-3 * (1.0 + exact.abs()),
                    "{metric:?}: {distance} vs {exact}"
                );
            }
        }
    }
}

#[test]
fn the_first_pass_codes_rows_added_after_it_and_needs_sq8() {
    let base = clustered(COUNT, DIM, 31);
    let queries = clustered(50, DIM, 32);
    let mut params = small_params();
    params.quantization = Quantization::Sq8;
    let mut index = HnswIndex::new(params, COUNT).unwrap();
    let half = COUNT / 2;
    let labels: Vec<u64> = (0..COUNT as u64).collect();
    index.add(&base[..half * DIM], &labels[..half], 2).unwrap();
    assert!(index.enable_first_pass(2).unwrap());
    // rows added after the call are coded as they are published
    index.add(&base[half * DIM..], &labels[half..], 2).unwrap();
    let mut search = HnswSearchParams::new(10, 32);
    search.first_pass = true;
    let truth = brute_force(Metric::L2, &base, &queries, DIM, 10);
    let results = index.search_batch(&queries, search, 2).unwrap();
    assert!(recall(&results.ids, &truth, 10) >= RECALL_FLOOR);
    // queries among the late rows: an uncoded row is never screened out, so the pass
    // saves SQ8 scores there only if the late rows were coded
    let without = HnswSearchParams::new(10, 32);
    let (mut scored_with, mut scored_without) = (0, 0);
    for query in base[(COUNT - 100) * DIM..].chunks_exact(DIM) {
        scored_with += index
            .search_with_stats(query, search)
            .unwrap()
            .1
            .traversal_distance_count;
        scored_without += index
            .search_with_stats(query, without)
            .unwrap()
            .1
            .traversal_distance_count;
    }
    eprintln!("late rows: {scored_without} SQ8 scores without the pass, {scored_with} with");
    assert!(scored_with * 10 < scored_without * 9);
    // without SQ8 codes there is nothing to screen with
    let mut plain = build(Metric::L2, Quantization::None, &base, 2);
    assert!(!plain.enable_first_pass(2).unwrap());
    assert_eq!(plain.memory_usage().screen_bytes, 0);
}

#[test]
fn interleaved_batches_answer_as_single_queries_do() {
    let base = clustered(COUNT, DIM, 41);
    // more queries than lanes, and not a multiple of them
    let queries = clustered(4 * sagitta_index::hnsw::LANES + 3, DIM, 42);
    for metric in [Metric::Cosine, Metric::Dot, Metric::L2] {
        let index = build(metric, Quantization::Sq8, &base, 2);
        for label in (0..COUNT as u64).step_by(7) {
            index.mark_deleted(label);
        }
        for (ef, rescore) in [(16, None), (64, None), (40, Some(12))] {
            let mut params = HnswSearchParams::new(10, ef);
            params.rescore = rescore;
            for threads in [1, 2] {
                let batch = index.search_batch(&queries, params, threads).unwrap();
                for (row, query) in queries.chunks_exact(DIM).enumerate() {
                    let single = index.search(query, params).unwrap();
                    let labels: Vec<u64> = single.iter().map(|hit| hit.label).collect();
                    let scores: Vec<f32> = single.iter().map(|hit| hit.score).collect();
                    assert_eq!(&batch.ids[row * 10..row * 10 + labels.len()], &labels[..]);
                    assert_eq!(
                        &batch.scores[row * 10..row * 10 + scores.len()],
                        &scores[..]
                    );
                    assert!(
                        labels.iter().all(|label| label % 7 != 0),
                        "deleted returned"
                    );
                }
            }
        }
    }
}

#[test]
fn a_shuffled_link_order_builds_a_graph_that_finds_every_row() {
    use sagitta_index::hnsw::LinkOrder;
    let base = clustered(COUNT, DIM, 51);
    let queries = clustered(100, DIM, 52);
    let truth = brute_force(Metric::Cosine, &base, &queries, DIM, 10);
    let index = HnswIndex::new(params_for(Metric::Cosine, Quantization::Sq8), COUNT).unwrap();
    let labels: Vec<u64> = (0..COUNT as u64).collect();
    index
        .add_in_order(&base, &labels, 2, None, LinkOrder::Shuffled)
        .unwrap();
    let results = index
        .search_batch(&queries, HnswSearchParams::new(10, 64), 2)
        .unwrap();
    assert!(recall(&results.ids, &truth, 10) >= RECALL_FLOOR);
    // every row was linked: each finds itself first
    for (row, vector) in base.chunks_exact(DIM).enumerate().step_by(97) {
        let hits = index.search(vector, HnswSearchParams::new(1, 32)).unwrap();
        assert_eq!(hits[0].label, row as u64);
    }
}

/// Rows of NaNs only are points without this vector: stored, never linked, never found —
/// and they skew neither the SQ8 scale nor the recall of the rows around them.
#[test]
fn absent_rows_are_stored_but_never_linked_or_found() {
    let mut base = clustered(COUNT, DIM, 41);
    let absent: Vec<usize> = (0..COUNT).step_by(7).collect();
    for row in &absent {
        base[row * DIM..(row + 1) * DIM].fill(f32::NAN);
    }
    let present: Vec<f32> = base
        .chunks_exact(DIM)
        .filter(|row| !row[0].is_nan())
        .flatten()
        .copied()
        .collect();
    let present_labels: Vec<u64> = (0..COUNT as u64)
        .filter(|label| !absent.contains(&(*label as usize)))
        .collect();
    let queries = clustered(50, DIM, 42);
    for metric in [Metric::Cosine, Metric::Dot, Metric::L2] {
        let truth: Vec<Vec<usize>> = brute_force(metric, &present, &queries, DIM, 10)
            .into_iter()
            .map(|row| row.iter().map(|at| present_labels[*at] as usize).collect())
            .collect();
        let index = build(metric, Quantization::Sq8, &base, 2);
        assert!(index.sq8_scale().is_some_and(f32::is_finite));
        assert!(index
            .vector(absent[1] as u32)
            .unwrap()
            .iter()
            .all(|v| v.is_nan()));
        let results = index
            .search_batch(&queries, HnswSearchParams::new(10, 64), 2)
            .unwrap();
        assert!(results
            .ids
            .iter()
            .all(|id| !absent.contains(&(*id as usize))));
        let measured = recall(&results.ids, &truth, 10);
        assert!(measured >= RECALL_FLOOR, "{metric:?}: recall {measured}");
    }
    // an index whose every row is absent has nothing to find
    let empty = build(Metric::L2, Quantization::None, &[f32::NAN; DIM * 3], 1);
    assert_eq!(empty.len(), 3);
    let hits = empty
        .search(&queries[..DIM], HnswSearchParams::new(10, 64))
        .unwrap();
    assert!(hits.is_empty());
    // a row with only some NaNs is refused
    let index = HnswIndex::new(small_params(), 1).unwrap();
    let mut partial = vec![f32::NAN; DIM];
    partial[3] = 1.0;
    assert!(matches!(
        index.add(&partial, &[1], 1),
        Err(IndexError::NonFiniteValue {
            row: 0,
            position: 0
        })
    ));
}

/// A first batch of absent rows trains nothing (they have no values): the scale comes from
/// present rows when [`HnswIndex::train_quantizer`] runs, never from the fallback.
#[test]
fn absent_rows_do_not_train_the_quantizer() {
    let base = clustered(3_000, DIM, 43);
    let mut index = HnswIndex::new(params_for(Metric::L2, Quantization::Sq8), 4_500).unwrap();
    let absent = vec![f32::NAN; 1_500 * DIM];
    let labels: Vec<u64> = (0..1_500).collect();
    index.add(&absent, &labels, 2).unwrap();
    assert_eq!(index.sq8_scale(), None, "no values to train on");
    assert!(!index.train_quantizer().unwrap(), "still none");
    let labels: Vec<u64> = (1_500..4_500).collect();
    index.add(&base, &labels, 2).unwrap();
    assert!(index.train_quantizer().unwrap());
    let scale = index.sq8_scale().unwrap();
    assert!(
        scale.is_finite() && scale < 0.5,
        "trained on the present rows: {scale}"
    );
    let queries = clustered(50, DIM, 44);
    let truth: Vec<Vec<usize>> = brute_force(Metric::L2, &base, &queries, DIM, 10)
        .into_iter()
        .map(|row| row.iter().map(|at| at + 1_500).collect())
        .collect();
    let results = index
        .search_batch(&queries, HnswSearchParams::new(10, 64), 2)
        .unwrap();
    let measured = recall(&results.ids, &truth, 10);
    assert!(measured >= RECALL_FLOOR, "recall {measured}");
}
