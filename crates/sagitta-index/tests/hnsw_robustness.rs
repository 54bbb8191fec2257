//! Crafted files, quantizer training edge cases and reserved ids: each must end in a typed
//! error or a correct index, never a panic, an abort or silently empty results.
mod common;

use common::{brute_force, clustered, recall};
use sagitta_index::hnsw::{
    HnswIndex, HnswParams, HnswSearchParams, Quantization, SQ8_TRAINING_ROWS_MIN,
};
use sagitta_index::{IndexError, Metric};

const DIM: usize = 16;

/// A section of an index file: tag and payload.
type Section = ([u8; 4], Vec<u8>);

/// Splits a saved file into its header and sections.
fn sections(bytes: &[u8]) -> (Vec<u8>, Vec<Section>) {
    let mut out = Vec::new();
    let mut offset = 64;
    while offset < bytes.len() {
        let tag: [u8; 4] = bytes[offset..offset + 4].try_into().unwrap();
        let length =
            u64::from_le_bytes(bytes[offset + 8..offset + 16].try_into().unwrap()) as usize;
        out.push((tag, bytes[offset + 24..offset + 24 + length].to_vec()));
        offset += 24 + length;
    }
    (bytes[..64].to_vec(), out)
}

/// Reassembles a file with correct checksums (so only structural checks can catch it).
fn assemble(header: &[u8], sections: &[Section]) -> Vec<u8> {
    let mut header = header.to_vec();
    let crc = crc32c::crc32c(&header[..60]);
    header[60..64].copy_from_slice(&crc.to_le_bytes());
    let mut out = header;
    for (tag, payload) in sections {
        out.extend_from_slice(tag);
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(payload);
    }
    out
}

fn saved_index(quantization: Quantization) -> Vec<u8> {
    let mut params = HnswParams::new(DIM, Metric::L2);
    params.m = 4;
    params.quantization = quantization;
    let index = HnswIndex::new(params, 2_000).unwrap();
    index
        .add(
            &clustered(2_000, DIM, 1),
            &(0..2_000).collect::<Vec<u64>>(),
            2,
        )
        .unwrap();
    let mut bytes = Vec::new();
    index.save(&mut bytes).unwrap();
    bytes
}

fn load_error(bytes: &[u8]) -> String {
    match HnswIndex::load(&mut &bytes[..]) {
        Err(IndexError::Format { reason }) => reason,
        Err(other) => panic!("expected a format error, got {other}"),
        Ok(_) => panic!("a crafted file was accepted"),
    }
}

#[test]
fn upper_layer_link_to_a_node_without_that_layer_is_rejected() {
    let bytes = saved_index(Quantization::Sq8);
    let (header, mut parts) = sections(&bytes);
    let levels = parts[1].1.clone();
    let low = levels.iter().position(|level| *level == 0).unwrap() as u32;
    let upper = &mut parts[3].1; // LNKU: first block belongs to the first node with level >= 1
    assert!(
        u32::from_le_bytes(upper[0..4].try_into().unwrap()) >= 1,
        "block has links"
    );
    upper[4..8].copy_from_slice(&low.to_le_bytes());
    let reason = load_error(&assemble(&header, &parts));
    assert!(reason.contains("which has level 0"), "{reason}");
}

#[test]
fn link_beyond_count_and_bad_header_bytes_are_rejected() {
    let bytes = saved_index(Quantization::None);
    let (header, mut parts) = sections(&bytes);
    parts[2].1[4..8].copy_from_slice(&5_000u32.to_le_bytes()); // LNK0, node 0, first link
    assert!(load_error(&assemble(&header, &parts)).contains("beyond count"));

    let (mut header, parts) = sections(&bytes);
    header[14] = 7; // has_codes must be 0 or 1
    assert!(load_error(&assemble(&header, &parts)).contains("has_codes"));
    let (mut header, parts) = sections(&bytes);
    header[57] = 1; // reserved
    assert!(load_error(&assemble(&header, &parts)).contains("reserved"));
}

#[test]
fn huge_counts_in_a_tiny_file_fail_cleanly_without_allocating() {
    let bytes = saved_index(Quantization::None);
    let (mut header, _) = sections(&bytes);
    header[16..20].copy_from_slice(&65_536u32.to_le_bytes()); // dim
    header[32..40].copy_from_slice(&(u64::from(u32::MAX) - 2).to_le_bytes()); // count
    let reason = load_error(&assemble(&header, &[]));
    assert!(reason.contains("truncated"), "{reason}");
}

#[test]
fn small_first_batch_defers_sq8_training_until_explicit() {
    let mut params = HnswParams::new(DIM, Metric::Cosine);
    params.quantization = Quantization::Sq8;
    let mut index = HnswIndex::new(params, 3_000).unwrap();
    // A first batch of one zero vector must not fix the scale for everything after it.
    index.add(&[0.0; DIM], &[0], 1).unwrap();
    assert_eq!(index.sq8_scale(), None);
    let base = clustered(2_999, DIM, 2);
    let labels: Vec<u64> = (1..3_000).collect();
    index.add(&base, &labels, 2).unwrap();
    assert_eq!(index.sq8_scale(), None, "untrained until train_quantizer");
    let queries = clustered(30, DIM, 3);
    let mut all = vec![0.0; DIM];
    all.extend_from_slice(&base);
    let truth = brute_force(Metric::Cosine, &all, &queries, DIM, 10);
    let before = index
        .search_batch(&queries, HnswSearchParams::new(10, 64), 1)
        .unwrap();
    assert!(recall(&before.ids, &truth, 10) >= 0.95);

    // an untrained sq8 index with points saves and loads
    let mut bytes = Vec::new();
    index.save(&mut bytes).unwrap();
    assert_eq!(
        HnswIndex::load(&mut bytes.as_slice()).unwrap().sq8_scale(),
        None
    );

    assert!(index.train_quantizer().unwrap());
    assert!(index.sq8_scale().unwrap() > 0.0);
    assert!(!index.train_quantizer().unwrap(), "second call is a no-op");
    let after = index
        .search_batch(&queries, HnswSearchParams::new(10, 64), 1)
        .unwrap();
    assert!(recall(&after.ids, &truth, 10) >= 0.95);
    // rows added after training get codes and stay reachable
    index.reserve(3_100).unwrap();
    let extra = clustered(100, DIM, 4);
    index
        .add(&extra, &(5_000..5_100).collect::<Vec<u64>>(), 1)
        .unwrap();
    let hits = index
        .search(&extra[..DIM], HnswSearchParams::new(1, 32))
        .unwrap();
    assert_eq!(hits[0].label, 5_000);
}

#[test]
fn first_batch_of_training_size_trains_immediately() {
    let mut params = HnswParams::new(DIM, Metric::Dot);
    params.quantization = Quantization::Sq8;
    let index = HnswIndex::new(params, SQ8_TRAINING_ROWS_MIN).unwrap();
    let labels: Vec<u64> = (0..SQ8_TRAINING_ROWS_MIN as u64).collect();
    index
        .add(&clustered(SQ8_TRAINING_ROWS_MIN, DIM, 5), &labels, 2)
        .unwrap();
    assert!(index.sq8_scale().is_some());
}

#[test]
fn the_missing_id_marker_cannot_be_used_as_an_id() {
    let index = HnswIndex::new(HnswParams::new(DIM, Metric::L2), 1).unwrap();
    assert!(matches!(
        index.add(&[0.5; DIM], &[u64::MAX], 1),
        Err(IndexError::ReservedId { id: u64::MAX })
    ));
    assert!(index.is_empty());
    let mut flat = sagitta_index::flat::FlatIndex::new(DIM, Metric::L2).unwrap();
    assert!(matches!(
        flat.add(&[0.5; DIM], &[u64::MAX]),
        Err(IndexError::ReservedId { .. })
    ));
    flat.add(&[0.5; DIM], &[3]).unwrap();
    assert!(matches!(
        flat.add(&[0.5; DIM], &[3]),
        Err(IndexError::DuplicateId { id: 3 })
    ));
    assert_eq!(flat.len(), 1);
}

#[test]
fn huge_but_finite_values_still_fill_flat_results() {
    let mut flat = sagitta_index::flat::FlatIndex::new(2, Metric::L2).unwrap();
    flat.add(&[3.0e38, 3.0e38, 0.0, 0.0], &[1, 2]).unwrap();
    let results = flat.search(&[-3.0e38, -3.0e38], 2, 1).unwrap();
    assert!(results.ids.contains(&1) && results.ids.contains(&2));
}

/// A reader handing out at most 7 bytes a call, as a slow stream might.
struct Trickle<'a>(&'a [u8]);

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let taken = buffer.len().min(7).min(self.0.len());
        buffer[..taken].copy_from_slice(&self.0[..taken]);
        self.0 = &self.0[taken..];
        Ok(taken)
    }
}

#[test]
fn streamed_load_equals_the_whole_file_load_and_names_damage_as_a_checksum() {
    let bytes = saved_index(Quantization::Sq8);
    let whole = HnswIndex::load_from_bytes(&bytes, |count| count).unwrap();
    let streamed =
        HnswIndex::load_stream(&mut Trickle(&bytes), bytes.len() as u64, |count| count).unwrap();
    let queries = clustered(20, DIM, 9);
    let params = HnswSearchParams::new(10, 64);
    assert_eq!(
        whole.search_batch(&queries, params, 1).unwrap(),
        streamed.search_batch(&queries, params, 1).unwrap()
    );
    assert_eq!(streamed.node_of(1_999), Some(1_999));
    assert_eq!(streamed.node_of(2_000), None);

    // a link turned into a target past the count, checksum left stale: the error is the
    // checksum's (damage), not the structural check the bad row met first
    let (header, parts) = sections(&bytes);
    let layer0_at = 64 + 24 * 3 + parts[0].1.len() + parts[1].1.len();
    let mut damaged = bytes.clone();
    damaged[layer0_at + 4..layer0_at + 8].copy_from_slice(&5_000u32.to_le_bytes());
    let reason = load_error(&damaged);
    assert!(
        reason.contains("checksum") && reason.contains("links layer 0"),
        "{reason}"
    );
    // the same link with a fresh checksum: the structural check names it
    let mut parts = parts;
    parts[2].1[4..8].copy_from_slice(&5_000u32.to_le_bytes());
    assert!(load_error(&assemble(&header, &parts)).contains("beyond count"));
    // a stream shorter than the length it was said to have
    let cut = &bytes[..bytes.len() - 10];
    match HnswIndex::load_stream(&mut Trickle(cut), bytes.len() as u64, |count| count) {
        Err(IndexError::Format { reason }) => assert!(reason.contains("truncated"), "{reason}"),
        other => panic!("a cut stream loaded: {:?}", other.map(|index| index.len())),
    }
}
