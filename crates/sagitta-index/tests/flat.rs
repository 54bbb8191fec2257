mod common;

use common::{brute_force, clustered, recall};
use sagitta_index::flat::FlatIndex;
use sagitta_index::{IndexError, Metric, MISSING_ID};

const DIM: usize = 37; // odd on purpose: exercises kernel tails

#[test]
fn flat_recall_is_exactly_one_for_every_metric() {
    let base = clustered(3_000, DIM, 1);
    let queries = clustered(50, DIM, 2);
    for metric in [Metric::Cosine, Metric::Dot, Metric::L2] {
        let mut index = FlatIndex::new(DIM, metric).unwrap();
        let labels: Vec<u64> = (0..3_000).collect();
        index.add(&base, &labels).unwrap();
        let truth = brute_force(metric, &base, &queries, DIM, 10);
        for threads in [1, 2, 3] {
            let results = index.search(&queries, 10, threads).unwrap();
            assert_eq!(
                recall(&results.ids, &truth, 10),
                1.0,
                "{metric:?} threads={threads}"
            );
        }
    }
}

#[test]
fn flat_scores_are_similarities_or_squared_distances() {
    let mut index = FlatIndex::new(2, Metric::L2).unwrap();
    index.add(&[0.0, 0.0, 3.0, 4.0], &[7, 9]).unwrap();
    let results = index.search(&[0.0, 0.0], 2, 1).unwrap();
    assert_eq!(results.ids, vec![7, 9]);
    assert_eq!(results.scores, vec![0.0, 25.0]);

    let mut index = FlatIndex::new(2, Metric::Cosine).unwrap();
    index.add(&[2.0, 0.0, 0.0, 5.0], &[1, 2]).unwrap();
    let results = index.search(&[1.0, 0.0], 2, 1).unwrap();
    assert_eq!(results.ids, vec![1, 2]);
    assert!((results.scores[0] - 1.0).abs() < 1e-6 && results.scores[1].abs() < 1e-6);
}

#[test]
fn flat_fills_missing_slots_when_k_exceeds_len() {
    let mut index = FlatIndex::new(DIM, Metric::Dot).unwrap();
    index.add(&clustered(3, DIM, 3), &[10, 11, 12]).unwrap();
    let results = index.search(&clustered(1, DIM, 4), 5, 1).unwrap();
    assert_eq!(
        results.ids.iter().filter(|id| **id == MISSING_ID).count(),
        2
    );
}

#[test]
fn flat_filtered_search_only_returns_accepted_rows() {
    let base = clustered(500, DIM, 5);
    let mut index = FlatIndex::new(DIM, Metric::L2).unwrap();
    index.add(&base, &(0..500).collect::<Vec<u64>>()).unwrap();
    let results = index
        .search_filtered(&clustered(5, DIM, 6), 10, 2, |row| row % 7 == 3)
        .unwrap();
    assert!(results.ids.iter().all(|id| id % 7 == 3));
}

#[test]
fn flat_rejects_bad_input_and_stays_unchanged() {
    let mut index = FlatIndex::new(4, Metric::Cosine).unwrap();
    assert!(matches!(
        index.add(&[1.0, 2.0, 3.0], &[1]),
        Err(IndexError::WrongVectorDimension { expected: 4, .. })
    ));
    assert!(matches!(
        index.add(&[1.0, 2.0, 3.0, 4.0, 1.0, f32::NAN, 0.0, 0.0], &[1, 2]),
        Err(IndexError::NonFiniteValue {
            row: 1,
            position: 1
        })
    ));
    assert!(matches!(
        index.add(&[1.0, 2.0, 3.0, f32::INFINITY], &[1]),
        Err(IndexError::NonFiniteValue {
            row: 0,
            position: 3
        })
    ));
    assert!(matches!(
        index.add(&[1.0, 2.0, 3.0, 4.0], &[1, 2]),
        Err(IndexError::WrongIdCount {
            expected: 1,
            received: 2
        })
    ));
    assert!(index.is_empty());
    assert!(matches!(
        index.search(&[1.0, 2.0], 1, 1),
        Err(IndexError::WrongVectorDimension { .. })
    ));
    assert!(matches!(
        index.search(&[1.0, 2.0, 3.0, 4.0], 0, 1),
        Err(IndexError::ParameterOutOfRange { name: "k", .. })
    ));
    assert!(matches!(
        FlatIndex::new(0, Metric::Dot),
        Err(IndexError::ParameterOutOfRange { name: "dim", .. })
    ));
}

#[test]
fn flat_save_load_round_trip_and_corruption_is_detected() {
    let base = clustered(200, DIM, 7);
    let mut index = FlatIndex::new(DIM, Metric::Cosine).unwrap();
    index.add(&base, &(100..300).collect::<Vec<u64>>()).unwrap();
    let mut bytes = Vec::new();
    index.save(&mut bytes).unwrap();
    let loaded = FlatIndex::load(&mut bytes.as_slice()).unwrap();
    let queries = clustered(10, DIM, 8);
    assert_eq!(
        index.search(&queries, 5, 1).unwrap(),
        loaded.search(&queries, 5, 1).unwrap()
    );

    let mut corrupt = bytes.clone();
    let last = corrupt.len() - 3;
    corrupt[last] ^= 0x40;
    assert!(matches!(
        FlatIndex::load(&mut corrupt.as_slice()),
        Err(IndexError::Format { .. })
    ));
    let truncated = &bytes[..bytes.len() / 2];
    assert!(matches!(
        FlatIndex::load(&mut &truncated[..]),
        Err(IndexError::Format { .. })
    ));
    let mut bad_header = bytes.clone();
    bad_header[17] ^= 1;
    assert!(matches!(
        FlatIndex::load(&mut bad_header.as_slice()),
        Err(IndexError::Format { .. })
    ));
}
