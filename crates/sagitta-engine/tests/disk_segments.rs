//! Collections whose vectors live on disk (issue 15) on real files — disk segments, and
//! HNSW segments with `vectors.on_disk` — : recall against the exact scan, every read path
//! (get, scroll, copy on write, merge) returning the stored vectors, the same answers
//! through io_uring, pread and in-memory pages, and a damaged records page reported as
//! corruption, never returned as a vector.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_engine::{
    Collection, CollectionConfig, Datatype, Distance, EngineError, OptimizerPolicy, Point, PointId,
    SearchRequest, SegmentKindName, StorageConfig, Strategy, DEFAULT_PARTITION_SIZE,
};
use sagitta_storage::error::Result as StorageResult;
use sagitta_storage::fs::{AppendFile, FileSystem, LockGuard, OsFileSystem, PageSource};
use sagitta_storage::pageio::{Backend, PageFile, PageIo, PageIoConfig, PageRead, PAGE_BYTES};

const DIM: usize = 48;

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let path = std::env::temp_dir().join(format!("sagitta-disk-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Scratch(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Points around 40 centers, as embeddings cluster; payload `{"n": id % 7}`.
fn points(ids: std::ops::Range<u64>, seed: u64) -> Vec<Point> {
    let mut centers_rng = ChaCha8Rng::seed_from_u64(99);
    let centers: Vec<Vec<f32>> = (0..40)
        .map(|_| (0..DIM).map(|_| centers_rng.gen_range(-1.0..1.0)).collect())
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    ids.map(|id| {
        let center = &centers[rng.gen_range(0..centers.len())];
        let vector = center
            .iter()
            .map(|c| c + rng.gen_range(-0.25..0.25))
            .collect();
        Point {
            id: PointId::Number(id),
            vector,
            payload: Some(format!("{{\"n\":{}}}", id % 7)),
            side: Vec::new(),
        }
    })
    .collect()
}

/// Files of the collection at `directory` whose names end with `suffix`, over its shards.
fn files(directory: &Path, suffix: &str) -> usize {
    std::fs::read_dir(directory)
        .unwrap()
        .flatten()
        .filter(|entry| entry.path().is_dir())
        .flat_map(|shard| std::fs::read_dir(shard.path()).unwrap().flatten())
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(suffix))
        .count()
}

fn disk_config(distance: Distance) -> CollectionConfig {
    CollectionConfig {
        dim: DIM,
        distance,
        shard_count: 2,
        storage: StorageConfig {
            segment_kind: SegmentKindName::Disk,
            page_cache_mb: 1,
            datatype: Datatype::Float32,
            partition_size: DEFAULT_PARTITION_SIZE,
            vectors_on_disk: false,
            graph: sagitta_engine::DEFAULT_GRAPH,
            placement: sagitta_engine::Placement::Spread,
            vectors_far: false,
        },
    }
}

/// HNSW segments, their vectors in records files (`on_disk`) or in RAM.
fn hnsw_config(distance: Distance, on_disk: bool) -> CollectionConfig {
    CollectionConfig {
        storage: StorageConfig {
            segment_kind: SegmentKindName::Hnsw,
            vectors_on_disk: on_disk,
            ..disk_config(distance).storage
        },
        ..disk_config(distance)
    }
}

fn policy() -> OptimizerPolicy {
    OptimizerPolicy {
        max_segments: 1,
        ..OptimizerPolicy::default()
    }
}

fn ids(hits: &[sagitta_engine::ScoredPoint]) -> Vec<PointId> {
    hits.iter().map(|hit| hit.id).collect()
}

fn search(collection: &Collection, query: &[f32], strategy: Strategy) -> Vec<PointId> {
    let request = SearchRequest {
        strategy,
        ..SearchRequest::new(query, 10)
    };
    ids(&collection.query(&request).unwrap())
}

/// Recall@10 of the default search against the exact one over `queries`.
fn recall(collection: &Collection, queries: &[Point]) -> f64 {
    let mut found = 0;
    for query in queries {
        let exact = search(collection, &query.vector, Strategy::Exact);
        let approximate = search(collection, &query.vector, Strategy::Auto);
        found += approximate.iter().filter(|id| exact.contains(id)).count();
    }
    #[allow(clippy::cast_precision_loss)]
    let recall = found as f64 / (queries.len() * 10) as f64;
    recall
}

#[test]
fn disk_segments_answer_like_the_exact_scan_and_keep_every_field() {
    let scratch = Scratch::new("answers");
    let fs = OsFileSystem;
    let directory = scratch.0.join("c");
    let queries = points(10_000..10_040, 7);
    for distance in [Distance::Euclid, Distance::Cosine, Distance::Dot] {
        let _ = std::fs::remove_dir_all(&directory);
        let collection = Collection::create(&fs, &directory, disk_config(distance)).unwrap();
        collection.set_policy(policy());
        let batches = [
            points(0..600, 1),
            points(600..1_200, 2),
            points(1_200..5_000, 3),
        ];
        // the vectors as stored (Cosine normalizes), read from the write buffer
        let mut stored = HashMap::new();
        for (number, batch) in batches.iter().enumerate() {
            collection.upsert(batch.clone(), true).unwrap();
            for point in batch.iter() {
                let got = collection.get(&point.id).unwrap().unwrap();
                stored.insert(point.id, got.vector);
            }
            // a seal reports the points of the segment it made (an append's host's too)
            assert!(collection.optimize(&fs).unwrap() >= batch.len());
            let sealed: usize = batches[..=number].iter().map(Vec::len).sum();
            assert_eq!(collection.status().indexed, sealed);
            // the second seal appends each shard's buffer to its segment (the new one
            // reads the first one's records file and its own); the third, larger than
            // the segment, builds a segment of its own
            let (ivf, records) = (files(&directory, ".ivf"), files(&directory, ".records"));
            let expected = [(2, 2), (2, 4), (4, 6)][number];
            assert_eq!(
                (ivf, records),
                expected,
                "{distance:?}: after seal {number}"
            );
        }
        let all: Vec<Point> = batches.concat();
        let status = collection.status();
        assert_eq!(
            (status.indexed, status.segments),
            (5_000, 4),
            "{distance:?}"
        );
        // every point has all its partitions probed by default: the bound alone can drop
        // a neighbor
        let before_merge = recall(&collection, &queries);
        assert!(before_merge >= 0.97, "{distance:?}: recall {before_merge}");
        // the merge reads the vectors it moves back from their records pages
        while collection.maintain(&fs).unwrap() {}
        assert_eq!(
            collection.status().segments,
            2,
            "{distance:?}: merged per shard"
        );
        // the smaller segment's points (read back from its records) were appended to the
        // larger: each shard's segment reads the larger's records file and its own new
        // one, and the smaller's two files are gone
        assert_eq!(files(&directory, ".records"), 4);
        assert_eq!(files(&directory, ".ivf"), 2);
        let merged = recall(&collection, &queries);
        assert!(
            merged >= 0.97,
            "{distance:?}: recall {merged} after the merge"
        );
        // copy on write reads a sealed point's vector from disk into the buffer
        let check = |collection: &Collection, context: &str| {
            check_every_point(collection, &all, &stored, context);
        };
        write_and_check(&collection, &all, &stored);
        check(&collection, "before reopening");
        let status = collection.status();
        let raw = 4_999 * DIM as u64 * 4;
        assert!(
            status.disk_bytes > raw,
            "records hold every vector: {status:?}"
        );
        assert!(
            status.index_ram_bytes < raw / 2,
            "RAM well under the vectors: {status:?}"
        );
        drop(collection);
        let reopened = Collection::open(&fs, &directory).unwrap();
        check(&reopened, "after reopening");
        let (page, _) = reopened.scroll(None, 100, None).unwrap();
        assert_eq!(page.len(), 100);
        assert!(page.iter().all(|point| point.vector.len() == DIM));
    }
}

/// The OS file system with page reads through one given engine.
struct PagedWith {
    io: Arc<PageIo>,
}

struct EnginePages {
    io: Arc<PageIo>,
    file: PageFile,
}

impl PageSource for EnginePages {
    fn page_count(&self) -> u64 {
        self.file.len() / PAGE_BYTES as u64
    }

    fn read_pages(&self, reads: &mut [PageRead<'_>]) -> StorageResult<()> {
        self.io.read(&self.file, reads)
    }

    fn path(&self) -> &Path {
        self.file.path()
    }
}

impl FileSystem for PagedWith {
    fn create_dir_all(&self, path: &Path) -> StorageResult<()> {
        OsFileSystem.create_dir_all(path)
    }
    fn open_append(&self, path: &Path) -> StorageResult<Box<dyn AppendFile>> {
        OsFileSystem.open_append(path)
    }
    fn read(&self, path: &Path) -> StorageResult<Option<Vec<u8>>> {
        OsFileSystem.read(path)
    }
    fn write_synced(&self, path: &Path, bytes: &[u8]) -> StorageResult<()> {
        OsFileSystem.write_synced(path, bytes)
    }
    fn truncate(&self, path: &Path, length: u64) -> StorageResult<()> {
        OsFileSystem.truncate(path, length)
    }
    fn rename(&self, from: &Path, to: &Path) -> StorageResult<()> {
        OsFileSystem.rename(from, to)
    }
    fn remove(&self, path: &Path) -> StorageResult<()> {
        OsFileSystem.remove(path)
    }
    fn sync_dir(&self, directory: &Path) -> StorageResult<()> {
        OsFileSystem.sync_dir(directory)
    }
    fn list(&self, directory: &Path) -> StorageResult<Vec<PathBuf>> {
        OsFileSystem.list(directory)
    }
    fn lock_exclusive(&self, path: &Path) -> StorageResult<LockGuard> {
        OsFileSystem.lock_exclusive(path)
    }
    fn open_pages(&self, path: &Path) -> StorageResult<Box<dyn PageSource>> {
        Ok(Box::new(EnginePages {
            io: Arc::clone(&self.io),
            file: self.io.open(path)?,
        }))
    }
}

/// Every answer of `collection` to `queries`: ids, scores and vectors, default and exact.
fn answers(collection: &Collection, queries: &[Point]) -> Vec<Vec<(PointId, u32, Vec<f32>)>> {
    let mut all = Vec::new();
    for query in queries {
        for strategy in [Strategy::Auto, Strategy::Beam(8), Strategy::Exact] {
            let request = SearchRequest {
                strategy,
                ..SearchRequest::new(&query.vector, 10)
            };
            let hits = collection.query(&request).unwrap();
            all.push(
                hits.into_iter()
                    .map(|hit| (hit.id, hit.score.to_bits(), hit.vector))
                    .collect(),
            );
        }
    }
    all
}

#[test]
fn io_uring_pread_and_memory_pages_give_identical_answers() {
    let scratch = Scratch::new("backends");
    for (name, config) in [
        ("disk", disk_config(Distance::Cosine)),
        ("hnsw-on-disk", hnsw_config(Distance::Cosine, true)),
    ] {
        backends_answer_alike(&scratch.0.join(name), config);
    }
}

/// [`io_uring_pread_and_memory_pages_give_identical_answers`] for one collection.
fn backends_answer_alike(directory: &Path, config: CollectionConfig) {
    let directory = directory.to_path_buf();
    let collection = Collection::create(&OsFileSystem, &directory, config).unwrap();
    collection.upsert(points(0..3_000, 3), true).unwrap();
    collection.optimize(&OsFileSystem).unwrap();
    drop(collection);
    let queries = points(20_000..20_030, 8);
    let config = PageIoConfig::default();
    let mut engines = vec![(
        "pread",
        PageIo::with_backend(Backend::Pread, config.clone()).unwrap(),
    )];
    match PageIo::with_backend(Backend::IoUring, config) {
        Ok(io) => engines.push(("io_uring", io)),
        // a sandbox that refuses io_uring: the pread and memory answers still compare
        Err(error) => eprintln!("io_uring refused here ({error}); comparing pread and memory"),
    }
    // the default page source: every page from the file read into memory
    let in_memory = {
        let bytes = std::fs::read(directory.join("shard-0/segment-0.records")).unwrap();
        assert!(bytes.len() > PAGE_BYTES, "shard 0 sealed a disk segment");
        let sim = sagitta_storage::sim::SimFileSystem::new();
        copy_tree(&sim, &directory);
        let collection = Collection::open(&sim, &directory).unwrap();
        answers(&collection, &queries)
    };
    for (name, io) in engines {
        let io = Arc::new(io);
        let fs = PagedWith {
            io: Arc::clone(&io),
        };
        let collection = Collection::open(&fs, &directory).unwrap();
        assert_eq!(answers(&collection, &queries), in_memory, "{name}");
        let counters = io.counters();
        assert!(
            counters.reads > 0 && counters.bytes >= counters.reads * PAGE_BYTES as u64,
            "{name}: {counters:?}"
        );
    }
}

/// Copies every file under `directory` on disk into the simulated file system.
fn copy_tree(to: &dyn FileSystem, directory: &Path) {
    to.create_dir_all(directory).unwrap();
    for entry in std::fs::read_dir(directory).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            copy_tree(to, &path);
        } else {
            to.write_synced(&path, &std::fs::read(&path).unwrap())
                .unwrap();
        }
    }
    to.sync_dir(directory).unwrap();
}

#[test]
fn a_damaged_records_page_is_reported_never_returned_as_a_vector() {
    let scratch = Scratch::new("damage");
    for (name, config) in [
        ("disk", disk_config(Distance::Euclid)),
        ("hnsw-on-disk", hnsw_config(Distance::Euclid, true)),
    ] {
        damage_is_reported(&scratch.0.join(name), config);
    }
}

/// [`a_damaged_records_page_is_reported_never_returned_as_a_vector`] for one collection.
fn damage_is_reported(directory: &Path, mut config: CollectionConfig) {
    let fs = OsFileSystem;
    config.shard_count = 1;
    config.storage.page_cache_mb = 0;
    let collection = Collection::create(&fs, directory, config).unwrap();
    let stored = points(0..1_500, 4);
    collection.upsert(stored.clone(), true).unwrap();
    collection.optimize(&fs).unwrap();
    drop(collection);
    let records = directory.join("shard-0/segment-0.records");
    let mut bytes = std::fs::read(&records).unwrap();
    let damaged_page = 3;
    bytes[damaged_page * PAGE_BYTES + 100] ^= 0x04;
    std::fs::write(&records, &bytes).unwrap();
    let collection = Collection::open(&fs, directory).unwrap();
    // the exact scan reads every page: it must fail, naming the file and the page
    let request = SearchRequest {
        strategy: Strategy::Exact,
        ..SearchRequest::new(&stored[0].vector, 5)
    };
    let error = collection.query(&request).unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, EngineError::Corrupt { .. })
            && message.contains("segment-0.records")
            && message.contains(&format!("records page {damaged_page}")),
        "{message}"
    );
    // each point either reads back exactly as stored or fails as corrupt: never a
    // different vector
    let (mut failed, mut read) = (0, 0);
    for point in &stored {
        match collection.get(&point.id) {
            Ok(Some(got)) => {
                assert_eq!(got.vector, point.vector);
                read += 1;
            }
            Ok(None) => panic!("{:?} missing", point.id),
            Err(EngineError::Corrupt { .. }) => failed += 1,
            Err(other) => panic!("{other}"),
        }
    }
    assert!(failed > 0 && read > 0, "{failed} failed, {read} read");
}

/// Copies sealed point 3 into the buffer with a new payload field (reading its vector
/// from disk) and deletes point 4, then checks every point.
fn write_and_check(collection: &Collection, all: &[Point], stored: &HashMap<PointId, Vec<f32>>) {
    collection
        .set_payload(&[PointId::Number(3)], r#"{"tag":"x"}"#, true)
        .unwrap();
    collection.delete(&[PointId::Number(4)], true).unwrap();
    check_every_point(collection, all, stored, "after the writes");
}

/// Every point of `all` as `stored` holds its vector, but 4 deleted and 3 with a `tag`.
fn check_every_point(
    collection: &Collection,
    all: &[Point],
    stored: &HashMap<PointId, Vec<f32>>,
    context: &str,
) {
    for point in all {
        let got = collection.get(&point.id).unwrap();
        if point.id == PointId::Number(4) {
            assert!(got.is_none(), "{context}: 4 was deleted");
            continue;
        }
        let got = got.unwrap_or_else(|| panic!("{context}: {:?} missing", point.id));
        assert_eq!(got.vector, stored[&point.id], "{context}: {:?}", point.id);
        let expected = if point.id == PointId::Number(3) {
            r#"{"n":3,"tag":"x"}"#.to_string()
        } else {
            point.payload.clone().unwrap()
        };
        assert_eq!(got.payload.unwrap(), expected, "{context}: payload");
    }
    assert_eq!(collection.count(None).unwrap(), all.len() - 1, "{context}");
    collection.check_invariants().unwrap();
}

/// Exact answers of `collection`: ids, vectors and scores.
fn exact_answers(collection: &Collection, queries: &[Point]) -> Vec<Vec<(PointId, Vec<f32>, f32)>> {
    queries
        .iter()
        .map(|query| {
            let request = SearchRequest {
                strategy: Strategy::Exact,
                ..SearchRequest::new(&query.vector, 10)
            };
            let hits = collection.query(&request).unwrap();
            hits.into_iter()
                .map(|hit| (hit.id, hit.vector, hit.score))
                .collect()
        })
        .collect()
}

#[test]
fn hnsw_vectors_on_disk_leave_ram_and_answer_from_their_records() {
    let scratch = Scratch::new("hnsw-on-disk");
    let fs = OsFileSystem;
    let queries = points(10_000..10_040, 7);
    let batches = [
        points(0..600, 1),
        points(600..1_200, 2),
        points(1_200..4_000, 3),
    ];
    let all: Vec<Point> = batches.concat();
    for distance in [Distance::Euclid, Distance::Cosine, Distance::Dot] {
        let on_disk_dir = scratch.0.join(format!("on-disk-{distance:?}"));
        let in_ram_dir = scratch.0.join(format!("in-ram-{distance:?}"));
        let on_disk = Collection::create(&fs, &on_disk_dir, hnsw_config(distance, true)).unwrap();
        let in_ram = Collection::create(&fs, &in_ram_dir, hnsw_config(distance, false)).unwrap();
        let mut stored = HashMap::new();
        for batch in &batches {
            for collection in [&on_disk, &in_ram] {
                collection.set_policy(policy());
                collection.upsert(batch.clone(), true).unwrap();
                collection.optimize(&fs).unwrap();
            }
            for point in batch {
                let got = on_disk.get(&point.id).unwrap().unwrap();
                stored.insert(point.id, got.vector);
            }
            // every sealed segment keeps its rows in a records file of its own
            assert_eq!(
                files(&on_disk_dir, ".records"),
                on_disk.status().segments,
                "{distance:?}"
            );
            assert_eq!(files(&in_ram_dir, ".records"), 0);
        }
        for collection in [&on_disk, &in_ram] {
            while collection.maintain(&fs).unwrap() {}
        }
        // merged to one segment a shard; the merged segments' records files are gone
        assert_eq!(on_disk.status().segments, 2, "{distance:?}");
        assert_eq!(files(&on_disk_dir, ".records"), 2, "{distance:?}");
        // the exact scan reads every row from the records: the in-RAM collection's answer
        let (read, kept) = (
            exact_answers(&on_disk, &queries),
            exact_answers(&in_ram, &queries),
        );
        for (read, kept) in read.iter().zip(&kept) {
            let ids = |hits: &[(PointId, Vec<f32>, f32)]| -> Vec<PointId> {
                hits.iter().map(|hit| hit.0).collect()
            };
            assert_eq!(ids(read), ids(kept), "{distance:?}");
            for (a, b) in read.iter().zip(kept) {
                assert_eq!(a.1, b.1, "{distance:?}: vectors");
                assert!(
                    (a.2 - b.2).abs() <= 1e-4 * b.2.abs().max(1.0),
                    "{distance:?}"
                );
            }
        }
        let found = recall(&on_disk, &queries);
        assert!(found >= 0.95, "{distance:?}: recall {found}");
        // RAM: the graph and codes only; the rows are on disk
        let raw = all.len() as u64 * DIM as u64 * 4;
        let (disk_status, ram_status) = (on_disk.status(), in_ram.status());
        assert!(
            disk_status.index_ram_bytes + raw <= ram_status.index_ram_bytes,
            "{disk_status:?} against {ram_status:?}"
        );
        assert!(disk_status.disk_bytes > raw, "{disk_status:?}");
        // copy on write reads the sealed point's row from its records file
        let check = |collection: &Collection, context: &str| {
            check_every_point(collection, &all, &stored, context);
        };
        write_and_check(&on_disk, &all, &stored);
        check(&on_disk, &format!("{distance:?}, before reopening"));
        drop(on_disk);
        let reopened = Collection::open(&fs, &on_disk_dir).unwrap();
        check(&reopened, &format!("{distance:?}, after reopening"));
        assert!(recall(&reopened, &queries) >= 0.95);
        // the records files count in the disk bytes of a reopened collection too
        assert!(
            reopened.status().disk_bytes > raw,
            "{:?}",
            reopened.status()
        );
    }
}

/// `.records` files directly in the shard directories under `root`.
fn records_under(root: &Path) -> usize {
    if root.exists() {
        files(root, ".records")
    } else {
        0
    }
}

#[test]
fn records_files_stripe_over_several_directories() {
    let scratch = Scratch::new("stripes");
    let fs = OsFileSystem;
    let roots: Vec<PathBuf> = (1..=2)
        .map(|device| scratch.0.join(format!("device-{device}")).join("c"))
        .collect();
    let striped_dir = scratch.0.join("main").join("c");
    let plain_dir = scratch.0.join("plain").join("c");
    let mut config = disk_config(Distance::Euclid);
    // partitions of 100: each build has a few on every stripe
    config.storage.partition_size = 100;
    let striped = Collection::create_striped(&fs, &striped_dir, config, &roots).unwrap();
    let plain = Collection::create(&fs, &plain_dir, config).unwrap();
    let batches = [
        points(0..600, 1),
        points(600..1_200, 2),
        points(1_200..5_000, 3),
    ];
    let mut stored = HashMap::new();
    for batch in &batches {
        for collection in [&striped, &plain] {
            collection.set_policy(policy());
            collection.upsert(batch.clone(), true).unwrap();
            collection.optimize(&fs).unwrap();
        }
        for point in batch {
            stored.insert(point.id, point.vector.clone());
        }
    }
    for collection in [&striped, &plain] {
        while collection.maintain(&fs).unwrap() {}
    }
    // builds spread their partitions over all three directories, appends go to one each
    for root in [&striped_dir, &roots[0], &roots[1]] {
        assert!(records_under(root) > 0, "{root:?} holds records files");
    }
    assert_eq!(
        records_under(&plain_dir),
        files(&plain_dir, ".records"),
        "the plain collection keeps its own"
    );
    // the same segments, their records elsewhere: every answer is the plain collection's
    let queries = points(30_000..30_030, 9);
    assert_eq!(answers(&striped, &queries), answers(&plain, &queries));
    let all: Vec<Point> = batches.concat();
    write_and_check(&striped, &all, &stored);
    drop(striped);
    // without its stripe directories the collection does not open, and says why
    let error = Collection::open(&fs, &striped_dir).err().expect("refused");
    assert!(error.to_string().contains("stripe"), "{error}");
    // a leftover of a build that crashed before publishing is removed at open
    let leftover = roots[1].join("shard-0").join("segment-999.records");
    std::fs::write(&leftover, b"partial").unwrap();
    let reopened = Collection::open_striped(&fs, &striped_dir, &roots).unwrap();
    assert!(!leftover.exists());
    check_every_point(&reopened, &all, &stored, "reopened with its stripes");
    drop(reopened);
    Collection::remove_striped_files(&fs, &striped_dir, &roots).unwrap();
    for root in [&striped_dir, &roots[0], &roots[1]] {
        assert_eq!(records_under(root), 0, "{root:?} emptied");
    }
}
