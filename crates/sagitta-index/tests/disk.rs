//! The disk index against brute force: recall floor of the bound-driven search, exactness
//! of the exact scan, reads only of what can win, checked pages, and the RAM part's bytes.

mod common;

use common::{brute_force, clustered, recall, MemoryReader};
use sagitta_index::disk::{
    check_page, DiskIndex, DiskParams, Element, PageReader, RecordLayout, RecordsHeader,
    SearchStats, PAGE_PAYLOAD,
};
use sagitta_index::{IndexError, Metric};
use sagitta_storage::codec::Writer;
use sagitta_storage::pageio::{Page, PAGE_BYTES};

fn params(partition_size: usize, extra_bits: u32) -> DiskParams {
    DiskParams {
        partition_size,
        seed: 7,
        threads: 2,
        extra_bits,
        element: Element::F32,
        batch_bytes: DiskParams::default().batch_bytes,
    }
}

/// An index with the default extended codes (2 bits).
fn build(
    vectors: &[f32],
    dim: usize,
    metric: Metric,
    size: usize,
) -> (DiskIndex, Vec<u32>, MemoryReader) {
    build_with(vectors, dim, metric, size, DiskParams::default().extra_bits)
}

fn build_with(
    vectors: &[f32],
    dim: usize,
    metric: Metric,
    size: usize,
    extra_bits: u32,
) -> (DiskIndex, Vec<u32>, MemoryReader) {
    let mut file = Vec::new();
    let (index, order) =
        DiskIndex::build(vectors, dim, metric, params(size, extra_bits), &mut file).unwrap();
    assert_eq!(index.extra_bits(), extra_bits);
    assert_eq!(file.len() % PAGE_BYTES, 0, "whole pages");
    assert_eq!(file.len() as u64 / PAGE_BYTES as u64, index.record_pages());
    (index, order, MemoryReader::new(file))
}

/// Recall@10 of the bound-driven search over `queries`, and the mean stats.
fn measure(
    index: &DiskIndex,
    order: &[u32],
    reader: &MemoryReader,
    base: &[f32],
    queries: &[f32],
    dim: usize,
    probes: usize,
) -> (f64, SearchStats) {
    let k = 10;
    let truth = brute_force(index.metric(), base, queries, dim, k);
    let mut found = Vec::new();
    let mut stats = SearchStats::default();
    for query in queries.chunks_exact(dim) {
        let hits = index
            .search(query, k, probes, &|_| true, reader, &mut stats)
            .unwrap();
        assert_eq!(hits.len(), k);
        for hit in &hits {
            let row = order[hit.position as usize] as usize;
            assert_eq!(
                hit.vector,
                base[row * dim..(row + 1) * dim],
                "the record is the row"
            );
        }
        found.extend(
            hits.iter()
                .map(|hit| u64::from(order[hit.position as usize])),
        );
    }
    (recall(&found, &truth, k), stats)
}

#[test]
fn bound_driven_search_reaches_the_recall_floor_reading_few_records() {
    let dim = 96;
    let base = clustered(6_000, dim, 1);
    let queries = clustered(60, dim, 2);
    for metric in [Metric::L2, Metric::Dot] {
        let (index, order, reader) = build(&base, dim, metric, 200);
        assert_eq!(index.partitions(), 30);
        let (all_probes, stats) = measure(&index, &order, &reader, &base, &queries, dim, 30);
        // every partition probed: only the bound can lose a neighbor
        assert!(
            all_probes >= 0.99,
            "{metric:?}: recall {all_probes} with every partition"
        );
        let (some, _) = measure(&index, &order, &reader, &base, &queries, dim, 8);
        assert!(
            some >= 0.9,
            "{metric:?}: recall {some} with 8 of 30 partitions"
        );
        // the bound keeps reads far below the vectors scanned
        let per_query = stats.reranked / 60;
        assert!(
            stats.scanned / 60 == 6_000,
            "every vector estimated: {stats:?}"
        );
        assert!(
            per_query < 600,
            "{metric:?}: {per_query} records read a query ({stats:?})"
        );
        assert!(per_query >= 10, "at least k records read: {stats:?}");
    }
}

/// Extended codes refine the 1-bit estimates before any read: at the same probes the
/// recall holds while far fewer records are read, and more bits read fewer still.
#[test]
fn extended_codes_read_fewer_records_at_the_same_recall() {
    let dim = 128;
    let base = clustered(6_000, dim, 21);
    let queries = clustered(60, dim, 22);
    for metric in [Metric::L2, Metric::Dot] {
        let mut previous: Option<(f64, usize)> = None;
        for extra_bits in 0..=3 {
            let (index, order, reader) = build_with(&base, dim, metric, 200, extra_bits);
            let (recall, stats) = measure(&index, &order, &reader, &base, &queries, dim, 10);
            let read = stats.reranked;
            assert_eq!(stats.refined > 0, extra_bits > 0, "{stats:?}");
            if let Some((recall_before, read_before)) = previous {
                assert!(
                    recall >= recall_before - 0.01,
                    "{metric:?} {extra_bits} bits: recall {recall} < {recall_before}"
                );
                assert!(
                    read * 10 < read_before * 9,
                    "{metric:?} {extra_bits} bits: read {read} vs {read_before}"
                );
            }
            previous = Some((recall, read));
        }
    }
}

/// A rerank limit caps the records read a query (never below k); a limit above what the
/// bound reads changes nothing.
#[test]
fn rerank_limit_caps_reads_and_a_loose_limit_changes_nothing() {
    let dim = 96;
    let base = clustered(3_000, dim, 5);
    let queries = clustered(20, dim, 6);
    let (index, order, reader) = build(&base, dim, Metric::L2, 150);
    let truth = brute_force(Metric::L2, &base, &queries, dim, 10);
    let mut capped_found = Vec::new();
    for query in queries.chunks_exact(dim) {
        let mut free = SearchStats::default();
        let unlimited = index
            .search(query, 10, 20, &|_| true, &reader, &mut free)
            .unwrap();
        let mut loose = SearchStats::default();
        let same = index
            .search_within(query, 10, 20, free.reranked, &|_| true, &reader, &mut loose)
            .unwrap();
        let positions = |hits: &[sagitta_index::disk::DiskHit]| -> Vec<u32> {
            hits.iter().map(|hit| hit.position).collect()
        };
        assert_eq!(positions(&unlimited), positions(&same));
        assert_eq!(free.reranked, loose.reranked);
        for limit in [0, 10, 13, 25] {
            let mut capped = SearchStats::default();
            let hits = index
                .search_within(query, 10, 20, limit, &|_| true, &reader, &mut capped)
                .unwrap();
            assert!(
                capped.reranked <= limit.max(10) && capped.reranked >= 10.min(free.reranked),
                "limit {limit}: read {}",
                capped.reranked
            );
            assert_eq!(hits.len(), 10);
            if limit == 25 {
                capped_found.extend(
                    hits.iter()
                        .map(|hit| u64::from(order[hit.position as usize])),
                );
            }
        }
    }
    // the best 25 estimates of 3,000 still hold most of the true 10
    let capped = recall(&capped_found, &truth, 10);
    assert!(capped >= 0.8, "recall {capped} reading 25 records a query");
}

#[test]
fn exact_scan_equals_brute_force_and_accept_excludes() {
    let dim = 40;
    let base = clustered(1_500, dim, 3);
    let queries = clustered(10, dim, 4);
    let (index, order, reader) = build(&base, dim, Metric::L2, 100);
    let truth = brute_force(Metric::L2, &base, &queries, dim, 5);
    let all: Vec<u32> = (0..1_500).collect();
    for (query, expected) in queries.chunks_exact(dim).zip(&truth) {
        let mut stats = SearchStats::default();
        let hits = index.exact(query, 5, &all, &reader, &mut stats).unwrap();
        let rows: Vec<usize> = hits
            .iter()
            .map(|hit| order[hit.position as usize] as usize)
            .collect();
        assert_eq!(&rows, expected);
        assert_eq!(stats.reranked, 1_500);
        // excluding the best position: the search never returns it
        let banned = hits[0].position;
        let accepted = |position: u32| position != banned;
        let again = index
            .search(query, 5, 15, &accepted, &reader, &mut stats)
            .unwrap();
        assert!(again.iter().all(|hit| hit.position != banned));
    }
}

#[test]
fn records_larger_than_a_page_span_pages_and_read_back_whole() {
    let dim = 1_100; // 4,400 bytes: two pages a record
    let layout = RecordLayout::new(dim, Element::F32);
    assert_eq!((layout.per_page, layout.pages_per_record), (1, 2));
    assert_eq!(RecordLayout::new(768, Element::F32).per_page, 1);
    assert_eq!(RecordLayout::new(384, Element::F32).per_page, 2);
    assert_eq!(
        RecordLayout::new(PAGE_PAYLOAD / 4, Element::F32).per_page,
        1
    );
    assert_eq!(RecordLayout::new(768, Element::F16).per_page, 2);
    assert_eq!(
        RecordLayout::new(2_100, Element::F16).pages_per_record,
        2,
        "4,200 bytes of f16"
    );
    let base = clustered(300, dim, 5);
    let (index, order, reader) = build(&base, dim, Metric::Dot, 64);
    let positions: Vec<u32> = (0..300).collect();
    let vectors = index.vectors(&positions, &reader).unwrap();
    for (position, vector) in vectors.iter().enumerate() {
        let row = order[position] as usize;
        assert_eq!(vector, &base[row * dim..(row + 1) * dim]);
    }
    let query = &base[..dim];
    let mut stats = SearchStats::default();
    let hits = index
        .search(query, 3, 10, &|_| true, &reader, &mut stats)
        .unwrap();
    assert_eq!(
        order[hits[0].position as usize], 0,
        "a vector finds itself first"
    );
}

#[test]
fn a_damaged_or_misplaced_page_is_an_error_never_a_vector() {
    let dim = 32;
    let base = clustered(800, dim, 6);
    let (index, _, reader) = build(&base, dim, Metric::L2, 100);
    let header = RecordsHeader::decode(&reader.read(&[0]).unwrap()[0]).unwrap();
    index.check_records_header(0, &header).unwrap();
    let all: Vec<u32> = (0..800).collect();
    let clean = reader.bytes.clone();
    let pages = clean.len() / PAGE_BYTES;
    for page in 1..pages {
        for byte in [0, 1_000, PAGE_PAYLOAD + 1, PAGE_BYTES - 1] {
            let mut damaged = clean.clone();
            damaged[page * PAGE_BYTES + byte] ^= 0x10;
            let reader = MemoryReader::new(damaged);
            let mut stats = SearchStats::default();
            let error = index
                .exact(&base[..dim], 3, &all, &reader, &mut stats)
                .unwrap_err();
            let message = error.to_string();
            assert!(
                matches!(error, IndexError::Format { .. })
                    && message.contains(&format!("page {page}")),
                "page {page} byte {byte}: {message}"
            );
        }
    }
    // a page copied to another place: its checksum holds, its number does not
    let mut moved = clean.clone();
    moved.copy_within(PAGE_BYTES..2 * PAGE_BYTES, 2 * PAGE_BYTES);
    let page = Page(moved[2 * PAGE_BYTES..3 * PAGE_BYTES].try_into().unwrap());
    let message = check_page(&page, 2).unwrap_err().to_string();
    assert!(message.contains("holds page 1"), "{message}");
    // a damaged header page
    let mut bad = reader.read(&[0]).unwrap()[0].as_ref().clone();
    bad.0[20] ^= 1;
    assert!(RecordsHeader::decode(&bad).is_err());
}

#[test]
fn the_ram_part_round_trips_and_rejects_damage() {
    for extra_bits in [0, 2, 3] {
        round_trip(extra_bits);
    }
}

fn round_trip(extra_bits: u32) {
    let dim = 24;
    let base = clustered(700, dim, 8);
    let queries = clustered(5, dim, 9);
    let (index, _, reader) = build_with(&base, dim, Metric::Dot, 100, extra_bits);
    let mut out = Writer::new();
    index.encode(&mut out);
    let bytes = out.into_bytes();
    let loaded = DiskIndex::decode(&bytes).unwrap();
    let mut again = Writer::new();
    loaded.encode(&mut again);
    assert_eq!(
        again.as_bytes(),
        &bytes[..],
        "decode then encode gives the same bytes"
    );
    for query in queries.chunks_exact(dim) {
        let (mut a, mut b) = (SearchStats::default(), SearchStats::default());
        assert_eq!(
            index
                .search(query, 5, 3, &|_| true, &reader, &mut a)
                .unwrap(),
            loaded
                .search(query, 5, 3, &|_| true, &reader, &mut b)
                .unwrap()
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(DiskIndex::decode(&longer).is_err(), "a trailing byte");
    assert!(
        DiskIndex::decode(&bytes[..bytes.len() - 1]).is_err(),
        "cut short"
    );
    let mut table = bytes.clone();
    table[28] ^= 0xff; // partition 0's start
    assert!(
        DiskIndex::decode(&table).is_err(),
        "an inconsistent partition table"
    );
    let mut too_many = bytes.clone();
    too_many[14] = 4; // extra bits
    let error = DiskIndex::decode(&too_many).unwrap_err().to_string();
    assert!(error.contains("extra bits"), "{error}");
    let mut element = bytes.clone();
    element[15] = 2; // neither f32 nor f16
    let error = DiskIndex::decode(&element).unwrap_err().to_string();
    assert!(error.contains("element type 2"), "{error}");
    for version in [1, 2, 3] {
        let mut old = bytes.clone();
        old[0] = version;
        let error = DiskIndex::decode(&old).unwrap_err().to_string();
        assert!(error.contains(&format!("version {version}")), "{error}");
    }
}

/// Half-precision records: twice the records a page, so about half the file, and every
/// vector read back is the row rounded to f16. Codes and norms describe the rounded
/// vectors, so the search ranks them as exactly as it ranks f32 records.
#[test]
fn half_precision_records_halve_the_file_and_rank_the_stored_vectors() {
    let dim = 768;
    let base = clustered(2_000, dim, 12);
    let queries = clustered(30, dim, 13);
    let rounded: Vec<f32> = base
        .iter()
        .map(|value| half::f16::from_f32(*value).to_f32())
        .collect();
    assert_ne!(rounded, base, "the data is not already half precision");
    let build = |element| {
        let mut file = Vec::new();
        let params = DiskParams {
            element,
            ..params(200, 2)
        };
        let (index, order) = DiskIndex::build(&base, dim, Metric::L2, params, &mut file).unwrap();
        (index, order, MemoryReader::new(file))
    };
    let (full, _, full_reader) = build(Element::F32);
    let (half, order, reader) = build(Element::F16);
    assert_eq!(half.layout().element, Element::F16);
    assert!(
        half.record_pages() * 100 <= full.record_pages() * 55,
        "{} pages of f16 records, {} of f32",
        half.record_pages(),
        full.record_pages()
    );
    let header = RecordsHeader::decode(&reader.read(&[0]).unwrap()[0]).unwrap();
    half.check_records_header(0, &header).unwrap();
    let full_header = RecordsHeader::decode(&full_reader.read(&[0]).unwrap()[0]).unwrap();
    assert!(
        half.check_records_header(0, &full_header).is_err(),
        "an f32 records file does not pass for the f16 index"
    );
    // `measure` checks each hit's vector against the stored (rounded) row and the recall
    // against brute force over the stored rows.
    let (every, _) = measure(&half, &order, &reader, &rounded, &queries, dim, 10);
    assert!(every >= 0.99, "recall {every} with every partition");
    let mut out = Writer::new();
    half.encode(&mut out);
    let loaded = DiskIndex::decode(out.as_bytes()).unwrap();
    assert_eq!(loaded.layout(), half.layout());
    let (again, _) = measure(&loaded, &order, &reader, &rounded, &queries, dim, 10);
    assert!((again - every).abs() < f64::EPSILON);
}

#[test]
fn extra_bits_beyond_three_are_refused_by_name() {
    let base = clustered(50, 8, 3);
    let mut file = Vec::new();
    let error = DiskIndex::build(&base, 8, Metric::L2, params(100, 4), &mut file)
        .unwrap_err()
        .to_string();
    assert!(error.contains("extra_bits"), "{error}");
}

#[test]
fn an_empty_index_and_a_single_partition_work() {
    let dim = 8;
    let (index, order, reader) = build(&[], dim, Metric::L2, 100);
    assert!(index.is_empty() && order.is_empty());
    let mut stats = SearchStats::default();
    assert!(index
        .search(&[0.0; 8], 3, 4, &|_| true, &reader, &mut stats)
        .unwrap()
        .is_empty());
    let base = clustered(50, dim, 10);
    let (index, _, reader) = build(&base, dim, Metric::L2, 100);
    assert_eq!(index.partitions(), 1);
    let hits = index
        .search(&base[..dim], 50, 4, &|_| true, &reader, &mut stats)
        .unwrap();
    assert_eq!(hits.len(), 50);
}

/// Input larger than the build's batch budget (a memory-mapped file larger than RAM) is
/// grouped, gathered and written a batch at a time; the index and the records file are
/// the same bytes as a build that held every row at once. 30,000 rows into 600
/// partitions takes the two-level path; a 64 KiB budget makes dozens of batches.
#[test]
fn a_build_in_batches_writes_the_same_index_and_records() {
    let dim = 16;
    let base = clustered(30_000, dim, 14);
    let build = |batch_bytes| {
        let mut file = Vec::new();
        let params = DiskParams {
            batch_bytes,
            ..params(50, 2)
        };
        let (index, order) = DiskIndex::build(&base, dim, Metric::L2, params, &mut file).unwrap();
        let mut encoded = Writer::new();
        index.encode(&mut encoded);
        (encoded.into_bytes(), order, file, index.partitions())
    };
    let (whole, whole_order, whole_records, partitions) = build(usize::MAX);
    assert!(partitions > 256, "{partitions} partitions: two levels");
    let (batched, batched_order, batched_records, _) = build(64 << 10);
    assert_eq!(batched_order, whole_order);
    assert!(batched == whole, "the index bytes differ");
    assert!(batched_records == whole_records, "the records differ");
}
