//! Disk indexes over several records files (extents). Appends (issue 15 §5, LIRE): every
//! kept and added vector is found at its own record across extents, exact search equals
//! brute force on the model, large partitions split and small ones dissolve, recall stays
//! near a fresh build's, and the appended index's RAM part round-trips. Striped builds:
//! the same index as one file, its partitions spread over N files.

mod common;

use std::cell::RefCell;
use std::sync::Arc;

use common::{brute_force, clustered, recall};
use sagitta_index::disk::{
    split_page_id, AppendStats, DiskIndex, DiskParams, Element, PageReader, SearchStats, Source,
};
use sagitta_index::Metric;
use sagitta_storage::codec::Writer;
use sagitta_storage::pageio::{Page, PAGE_BYTES};

/// The extents of an index in memory, by their number in the index.
struct Extents {
    files: RefCell<Vec<Vec<u8>>>,
}

impl PageReader for Extents {
    fn read(&self, pages: &[u64]) -> sagitta_index::error::Result<Vec<Arc<Page>>> {
        let files = self.files.borrow();
        Ok(pages
            .iter()
            .map(|id| {
                let (extent, page) = split_page_id(*id);
                let start = page as usize * PAGE_BYTES;
                let mut out = Page::zeroed();
                out.0
                    .copy_from_slice(&files[extent][start..start + PAGE_BYTES]);
                Arc::new(out)
            })
            .collect())
    }
}

fn params() -> DiskParams {
    DiskParams {
        partition_size: 100,
        seed: 11,
        threads: 2,
        extra_bits: 2,
        element: Element::F32,
        batch_bytes: DiskParams::default().batch_bytes,
    }
}

/// The index with its model: the vector each position holds, by label.
struct Model {
    dim: usize,
    index: DiskIndex,
    extents: Extents,
    /// Position → (label, vector).
    points: Vec<(u64, Vec<f32>)>,
}

impl Model {
    fn build(vectors: &[f32], dim: usize) -> Model {
        let mut file = Vec::new();
        let (index, order) =
            DiskIndex::build(vectors, dim, Metric::L2, params(), &mut file).unwrap();
        let points = order
            .iter()
            .map(|row| {
                let row = *row as usize;
                (row as u64, vectors[row * dim..(row + 1) * dim].to_vec())
            })
            .collect();
        Model {
            dim,
            index,
            extents: Extents {
                files: RefCell::new(vec![file]),
            },
            points,
        }
    }

    /// Appends `vectors` labelled from `first_label`, keeping the positions `keep` accepts.
    fn append(
        &mut self,
        keep: &dyn Fn(u32) -> bool,
        vectors: &[f32],
        first_label: u64,
    ) -> AppendStats {
        let mut file = Vec::new();
        let outcome = self
            .index
            .append(keep, vectors, &self.extents, params(), &mut file)
            .unwrap();
        let (index, sources, stats) = (outcome.index, outcome.sources, outcome.stats);
        let dim = self.dim;
        let points = sources
            .iter()
            .map(|source| match source {
                Source::Kept(position) => self.points[*position as usize].clone(),
                Source::Added(row) => {
                    let row = *row as usize;
                    (
                        first_label + row as u64,
                        vectors[row * dim..(row + 1) * dim].to_vec(),
                    )
                }
            })
            .collect();
        // the extents the new index still uses, in its order, then the new one
        let old = self.index.extents().to_vec();
        let mut files: Vec<Option<Vec<u8>>> = std::mem::take(&mut *self.extents.files.borrow_mut())
            .into_iter()
            .map(Some)
            .collect();
        let mut kept_files: Vec<Vec<u8>> = Vec::new();
        for (new, old_extent) in outcome.kept_extents.iter().enumerate() {
            assert_eq!(index.extents()[new], old[*old_extent]);
            kept_files.push(files[*old_extent].take().unwrap());
        }
        assert_eq!(outcome.kept_extents.len() + 1, index.extents().len());
        assert_eq!(
            file.len() as u64,
            index.extents().last().unwrap().pages * PAGE_BYTES as u64
        );
        kept_files.push(file);
        *self.extents.files.borrow_mut() = kept_files;
        self.index = index;
        self.points = points;
        stats
    }

    fn vectors(&self) -> Vec<f32> {
        self.points.iter().flat_map(|(_, v)| v.clone()).collect()
    }

    /// Every position's record is its model vector.
    fn check_records(&self) {
        assert_eq!(self.index.len(), self.points.len());
        let all: Vec<u32> = (0..self.points.len() as u32).collect();
        let read = self.index.vectors(&all, &self.extents).unwrap();
        for (position, (vector, (label, expected))) in read.iter().zip(&self.points).enumerate() {
            assert_eq!(vector, expected, "position {position} (label {label})");
        }
    }

    /// Recall@10 of the bound-driven search, and whether the exact scan equals brute force.
    fn search_quality(&self, queries: &[f32], probes: usize) -> f64 {
        let dim = self.dim;
        let base = self.vectors();
        let truth = brute_force(Metric::L2, &base, queries, dim, 10);
        let all: Vec<u32> = (0..self.points.len() as u32).collect();
        let mut found = Vec::new();
        for (query, expected) in queries.chunks_exact(dim).zip(&truth) {
            let mut stats = SearchStats::default();
            let exact = self
                .index
                .exact(query, 10, &all, &self.extents, &mut stats)
                .unwrap();
            let rows: Vec<usize> = exact.iter().map(|hit| hit.position as usize).collect();
            assert_eq!(&rows, expected, "the exact scan is brute force");
            let hits = self
                .index
                .search(query, 10, probes, &|_| true, &self.extents, &mut stats)
                .unwrap();
            found.extend(hits.iter().map(|hit| u64::from(hit.position)));
        }
        recall(&found, &truth, 10)
    }
}

#[test]
fn appends_split_dissolve_and_keep_every_vector_at_its_record() {
    let dim = 32;
    let mut model = Model::build(&clustered(2_000, dim, 1), dim);
    let queries = clustered(40, dim, 99);
    let initial = model.index.partitions();
    let mut totals = AppendStats::default();
    let mut label = 10_000u64;
    for round in 0..6u64 {
        // new points from one region only, so its partitions grow past twice the target
        let fresh: Vec<f32> = clustered(700, dim, 50 + round)
            .chunks_exact(dim)
            .flat_map(|row| row.iter().map(|v| v * 0.3 + 1.0).collect::<Vec<_>>())
            .collect();
        // deletes: every 5th position
        let stats = model.append(&|position| position % 5 != round as u32 % 5, &fresh, label);
        label += 1_000;
        totals.splits += stats.splits;
        totals.moved += stats.moved;
        totals.dissolved += stats.dissolved;
        model.check_records();
        let sizes = model.index.partition_sizes();
        assert!(
            sizes.iter().all(|size| *size > 0),
            "no empty partition is kept"
        );
        assert!(
            sizes.iter().all(|size| *size <= 3 * 100),
            "round {round}: a partition of {} (target 100)",
            sizes.iter().max().unwrap()
        );
        let recall = model.search_quality(&queries, 8);
        // a fresh build of the same vectors, probing the same number of partitions
        let fresh_model = Model::build(&model.vectors(), dim);
        let fresh_recall = fresh_model.search_quality(&queries, 8);
        assert!(
            recall >= fresh_recall - 0.05,
            "round {round}: recall {recall} after appends, {fresh_recall} fresh"
        );
    }
    assert!(totals.splits > 0, "{totals:?}");
    assert!(model.index.partitions() > initial, "splits made partitions");
    assert!(totals.moved > 0, "LIRE moved boundary vectors: {totals:?}");
    assert!(model.index.extents().len() > 1, "records span extents");
    assert!(
        model.index.dead_records() > 0,
        "deleted records are dead space"
    );
}

#[test]
fn a_partition_emptied_by_deletes_dissolves_and_unused_extents_drop() {
    let dim = 16;
    let mut model = Model::build(&clustered(1_000, dim, 3), dim);
    let sizes = model.index.partition_sizes();
    // delete all but 10 of partition 0
    let keep_below = sizes[0] as u32;
    let stats = model.append(&|position| position >= 10 || position >= keep_below, &[], 0);
    assert_eq!(stats.dissolved, 1, "{stats:?}");
    assert_eq!(model.index.partitions(), sizes.len() - 1);
    model.check_records();
    // every old record deleted: only the new extent is left
    let fresh = clustered(300, dim, 4);
    model.append(&|_| false, &fresh, 5_000);
    assert_eq!(model.index.extents().len(), 1);
    assert_eq!(model.index.len(), 300);
    assert_eq!(model.index.dead_records(), 0);
    model.check_records();
    let queries = clustered(20, dim, 5);
    assert!(model.search_quality(&queries, 100) >= 0.99);
}

#[test]
fn an_appended_index_round_trips_and_refuses_a_bad_address() {
    let dim = 24;
    let mut model = Model::build(&clustered(800, dim, 6), dim);
    model.append(
        &|position| position % 3 != 0,
        &clustered(400, dim, 7),
        9_000,
    );
    let mut out = Writer::new();
    model.index.encode(&mut out);
    let bytes = out.into_bytes();
    let loaded = DiskIndex::decode(&bytes).unwrap();
    let mut again = Writer::new();
    loaded.encode(&mut again);
    assert_eq!(again.as_bytes(), &bytes[..]);
    let query = &clustered(1, dim, 8)[..];
    let (mut a, mut b) = (SearchStats::default(), SearchStats::default());
    assert_eq!(
        model
            .index
            .search(query, 5, 4, &|_| true, &model.extents, &mut a)
            .unwrap(),
        loaded
            .search(query, 5, 4, &|_| true, &model.extents, &mut b)
            .unwrap()
    );
    // the first vector entry's address: after the header, starts, centroids and extents
    let partitions = model.index.partitions();
    let extents = model.index.extents().len();
    let entry = 28 + 4 * (partitions + 1) + 4 * partitions * dim + 4 + 16 * extents;
    for (byte, what) in [(7, "outside its extent"), (2, "outside its extent")] {
        let mut bad = bytes.clone();
        bad[entry + byte] ^= 0x10; // the extent (top byte) or the page
        let error = DiskIndex::decode(&bad).unwrap_err().to_string();
        assert!(error.contains(what), "{error}");
    }
    let mut twice = bytes.clone();
    let second = entry + (bytes.len() - entry) / model.index.len();
    let first_address: [u8; 8] = bytes[entry..entry + 8].try_into().unwrap();
    twice[second..second + 8].copy_from_slice(&first_address);
    let error = DiskIndex::decode(&twice).unwrap_err().to_string();
    assert!(error.contains("share the record"), "{error}");
}

/// A build striped over three files is the one-file build's index (same answers, same
/// codes) with its partitions dealt round-robin over the files; every record reads back.
#[test]
fn a_striped_build_spreads_partitions_over_files_and_answers_the_same() {
    let dim = 40;
    let base = clustered(3_000, dim, 12);
    let one = Model::build(&base, dim);
    let mut files = vec![Vec::new(), Vec::new(), Vec::new()];
    let (index, order) = {
        let [a, b, c] = &mut files[..] else {
            unreachable!()
        };
        let mut outs: [&mut dyn std::io::Write; 3] = [a, b, c];
        DiskIndex::build_striped(&base, dim, Metric::L2, params(), &mut outs).unwrap()
    };
    assert_eq!(index.extents().len(), 3);
    for (extent, file) in index.extents().iter().zip(&files) {
        assert_eq!(extent.pages * PAGE_BYTES as u64, file.len() as u64);
        assert!(extent.records > 0);
    }
    let total: u64 = index.extents().iter().map(|extent| extent.records).sum();
    assert_eq!(total, 3_000);
    let striped = Model {
        dim,
        index,
        extents: Extents {
            files: RefCell::new(files),
        },
        points: order
            .iter()
            .map(|row| {
                let row = *row as usize;
                (row as u64, base[row * dim..(row + 1) * dim].to_vec())
            })
            .collect(),
    };
    striped.check_records();
    assert_eq!(striped.index.partition_sizes(), one.index.partition_sizes());
    let queries = clustered(10, dim, 13);
    for query in queries.chunks_exact(dim) {
        let (mut a, mut b) = (SearchStats::default(), SearchStats::default());
        let hits = |model: &Model, stats: &mut SearchStats| {
            model
                .index
                .search(query, 10, 6, &|_| true, &model.extents, stats)
                .unwrap()
        };
        assert_eq!(hits(&striped, &mut a), hits(&one, &mut b));
        assert_eq!(a.reranked, b.reranked);
    }
    // every file holds records
    let mut read_from = std::collections::BTreeSet::new();
    let all: Vec<u32> = (0..3_000).collect();
    for position in all {
        let (page, _, _) = striped.index.record_location(position);
        read_from.insert(split_page_id(page).0);
    }
    assert_eq!(read_from.len(), 3);
}
