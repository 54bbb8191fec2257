//! An HNSW index whose f32 rows are kept outside it (issue 15 §3): saved without its
//! vectors, loaded back with the graph and the SQ8 codes only, searched on its codes, and
//! re-scored from a records file of rows read a page at a time. The re-scored results must
//! be exactly those of the index that kept its rows in memory.

mod common;

use common::{brute_force, clustered, recall, MemoryReader};
use sagitta_index::disk::{Element, RecordLayout, RowRecords, PAGE_PAYLOAD};
use sagitta_index::hnsw::{HnswIndex, HnswParams, HnswSearchParams, Quantization};
use sagitta_index::{IndexError, Metric};
use sagitta_storage::pageio::PAGE_BYTES;

const DIM: usize = 48;

fn built(rows: &[f32], metric: Metric, quantization: Quantization) -> HnswIndex {
    let mut params = HnswParams::new(DIM, metric);
    params.quantization = quantization;
    let count = rows.len() / DIM;
    let index = HnswIndex::new(params, count).unwrap();
    let labels: Vec<u64> = (0..count as u64).collect();
    index.add(rows, &labels, 2).unwrap();
    index
}

/// The index saved without vectors and loaded back, and its rows as a records file.
fn outside(index: &HnswIndex, element: Element) -> (HnswIndex, RowRecords, MemoryReader) {
    let mut file = Vec::new();
    index.save_without_vectors(&mut file).unwrap();
    let loaded = HnswIndex::load_from_bytes(&file, |count| count).unwrap();
    let count = index.len();
    let mut records = Vec::new();
    let rows = (0..count as u32).map(|node| index.vector(node).unwrap());
    let layout = RecordLayout::new(DIM, element);
    let written = RowRecords::write(&mut records, layout, count, rows).unwrap();
    (loaded, written, MemoryReader::new(records))
}

/// Top `k` of `index`'s code candidates re-scored on the rows `records` holds.
fn rescored(
    index: &HnswIndex,
    records: &RowRecords,
    reader: &MemoryReader,
    query: &[f32],
    params: HnswSearchParams,
    metric: Metric,
) -> Vec<u32> {
    let candidates = index.search_codes(query, params, |_| true).unwrap();
    let nodes: Vec<u32> = candidates.iter().map(|(node, _)| *node).collect();
    let rows = records.read(&nodes, reader).unwrap();
    let mut scored: Vec<(f32, u32)> = nodes
        .iter()
        .zip(&rows)
        .map(|(node, row)| {
            let distance = match metric {
                Metric::L2 => query.iter().zip(row).map(|(a, b)| (a - b) * (a - b)).sum(),
                _ => -query.iter().zip(row).map(|(a, b)| a * b).sum::<f32>(),
            };
            (distance, *node)
        })
        .collect();
    scored.sort_by(|a, b| a.0.total_cmp(&b.0));
    scored.truncate(params.k);
    scored.into_iter().map(|(_, node)| node).collect()
}

#[test]
fn rows_on_pages_give_the_results_of_rows_in_memory() {
    for metric in [Metric::L2, Metric::Dot] {
        let base = clustered(3_000, DIM, 11);
        let queries = clustered(40, DIM, 12);
        let index = built(&base, metric, Quantization::Sq8);
        let (loaded, records, reader) = outside(&index, Element::F32);
        assert!(loaded.rows_outside());
        assert_eq!(loaded.len(), index.len());
        let memory = loaded.memory_usage();
        assert_eq!(memory.vectors_bytes, 0, "no f32 rows in RAM");
        assert!(memory.codes_bytes > 0 && memory.graph_bytes > 0);
        // 48-d f32: 21 records a page, 3,000 rows on 143 pages after the header
        assert_eq!(
            reader.bytes.len(),
            (1 + 3_000usize.div_ceil(21)) * PAGE_BYTES
        );
        let params = HnswSearchParams::new(10, 64);
        for query in queries.chunks_exact(DIM) {
            let expected: Vec<u32> = index
                .search(query, params)
                .unwrap()
                .iter()
                .map(|hit| hit.node)
                .collect();
            let found = rescored(&loaded, &records, &reader, query, params, metric);
            assert_eq!(found, expected, "{metric:?}");
        }
    }
}

#[test]
fn a_small_untrained_index_is_trained_for_its_file() {
    let base = clustered(300, DIM, 21);
    let queries = clustered(20, DIM, 22);
    let index = built(&base, Metric::L2, Quantization::Sq8);
    assert_eq!(
        index.sq8_scale(),
        None,
        "300 rows do not train the quantizer"
    );
    let (loaded, records, reader) = outside(&index, Element::F32);
    assert!(loaded.sq8_scale().is_some());
    // re-scoring every row walked is exact search over a graph of 300
    let mut params = HnswSearchParams::new(10, 300);
    params.rescore = Some(300);
    let truth = brute_force(Metric::L2, &base, &queries, DIM, 10);
    let mut found = Vec::new();
    for query in queries.chunks_exact(DIM) {
        let nodes = rescored(&loaded, &records, &reader, query, params, Metric::L2);
        found.extend(nodes.iter().map(|node| loaded.label(*node)));
    }
    assert!(recall(&found, &truth, 10) >= 0.99);
}

#[test]
fn f16_rows_round_to_the_nearest_half() {
    let base = clustered(1_500, DIM, 31);
    let index = built(&base, Metric::L2, Quantization::Sq8);
    let (_, records, reader) = outside(&index, Element::F16);
    assert_eq!(records.layout.per_page, PAGE_PAYLOAD / (DIM * 2));
    let nodes: Vec<u32> = (0..1_500).step_by(7).collect();
    for (node, row) in nodes.iter().zip(records.read(&nodes, &reader).unwrap()) {
        let stored = index.vector(*node).unwrap();
        for (value, half) in stored.iter().zip(&row) {
            assert_eq!(*half, half::f16::from_f32(*value).to_f32());
        }
    }
}

#[test]
fn an_index_without_its_rows_refuses_what_needs_them() {
    let base = clustered(1_200, DIM, 41);
    let index = built(&base, Metric::L2, Quantization::Sq8);
    let (loaded, _, _) = outside(&index, Element::F32);
    let query = &base[..DIM];
    let params = HnswSearchParams::new(5, 32);
    let elsewhere = |error: IndexError| matches!(error, IndexError::VectorsElsewhere { .. });
    assert!(elsewhere(loaded.search(query, params).unwrap_err()));
    assert!(elsewhere(
        loaded.search_batch(query, params, 1).unwrap_err()
    ));
    assert!(elsewhere(loaded.add(query, &[9_999], 1).unwrap_err()));
    assert!(elsewhere(loaded.save(&mut Vec::new()).unwrap_err()));
    assert!(loaded
        .search_codes(&base[..DIM - 1], params, |_| true)
        .is_err());
    // saved again without vectors, it is the same file
    let (mut first, mut again) = (Vec::new(), Vec::new());
    index.save_without_vectors(&mut first).unwrap();
    loaded.save_without_vectors(&mut again).unwrap();
    assert_eq!(first, again);
    // deletes follow the index: a deleted node is never a candidate
    let best = loaded.search_codes(query, params, |_| true).unwrap()[0].0;
    assert!(loaded.mark_deleted(loaded.label(best)));
    let after = loaded.search_codes(query, params, |_| true).unwrap();
    assert!(after.iter().all(|(node, _)| *node != best));
    // an index without codes cannot be saved so
    let plain = built(&base, Metric::L2, Quantization::None);
    assert_eq!(
        plain.save_without_vectors(&mut Vec::new()).unwrap_err(),
        IndexError::NoCodes
    );
    assert_eq!(
        plain.search_codes(query, params, |_| true).unwrap_err(),
        IndexError::NoCodes
    );
}

#[test]
fn damaged_rows_and_headers_are_reported() {
    let base = clustered(1_200, DIM, 51);
    let index = built(&base, Metric::L2, Quantization::Sq8);
    let (_, records, mut reader) = outside(&index, Element::F32);
    // a byte of page 3 flipped: its rows are reported, never returned
    reader.bytes[3 * PAGE_BYTES + 100] ^= 0x40;
    let on_page_3 = 2 * records.layout.per_page as u32;
    let error = records.read(&[on_page_3], &reader).unwrap_err();
    assert!(error.to_string().contains("page 3"), "{error}");
    assert!(
        records.read(&[0], &reader).is_ok(),
        "other pages still read"
    );
    assert!(
        records.read(&[1_200], &reader).is_err(),
        "past the last row"
    );
    // a header that says otherwise is refused
    let mut file = Vec::new();
    index.save_without_vectors(&mut file).unwrap();
    let mut other = records;
    other.rows = 1_199;
    let header = sagitta_index::disk::RecordsHeader::decode(&page_zero(&reader)).unwrap();
    assert!(other.check_header(&header).is_err());
    assert!(records.check_header(&header).is_ok());
    // the index file's vectors byte must be 0 or 1, with stored codes
    let mut bad = file.clone();
    bad[15] = 2;
    let crc = crc32c::crc32c(&bad[..60]);
    bad[60..64].copy_from_slice(&crc.to_le_bytes());
    assert!(HnswIndex::load_from_bytes(&bad, |count| count).is_err());
    bad[15] = 1;
    bad[14] = 2; // codes to recompute from vectors it does not have
    let crc = crc32c::crc32c(&bad[..60]);
    bad[60..64].copy_from_slice(&crc.to_le_bytes());
    assert!(HnswIndex::load_from_bytes(&bad, |count| count).is_err());
}

fn page_zero(reader: &MemoryReader) -> sagitta_storage::pageio::Page {
    let mut page = sagitta_storage::pageio::Page::zeroed();
    page.0.copy_from_slice(&reader.bytes[..PAGE_BYTES]);
    page
}
