//! A collection answers alike whether its shards run on one worker pool or on several
//! simulated NUMA nodes' pools: exact searches identical, HNSW recall within 0.005, a
//! batch equal to its searches one by one; writes and segment builds bound to a shard's
//! node keep every point and leave the caller's own CPU binding as it was.

use std::path::Path;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_engine::database::DatabaseOptions;
use sagitta_engine::machine::Machine;
use sagitta_engine::topology::{NumaNode, Source, Topology};
use sagitta_engine::{
    Collection, CollectionConfig, Database, Distance, Placement, Point, PointId, SearchRequest,
    StorageConfig, Strategy,
};
use sagitta_storage::sim::SimFileSystem;

const DIM: usize = 16;

fn random_vector(rng: &mut ChaCha8Rng) -> Vec<f32> {
    (0..DIM).map(|_| rng.gen_range(-1.0..1.0)).collect()
}

fn points(rng: &mut ChaCha8Rng, ids: std::ops::Range<u64>) -> Vec<Point> {
    ids.map(|id| Point {
        id: PointId::Number(id),
        vector: random_vector(rng),
        payload: Some(format!(r#"{{"group":{}}}"#, id % 5)),
        side: Vec::new(),
    })
    .collect()
}

fn config(shard_count: usize, placement: Placement) -> CollectionConfig {
    CollectionConfig {
        dim: DIM,
        distance: Distance::Cosine,
        shard_count,
        storage: StorageConfig {
            placement,
            ..StorageConfig::default()
        },
    }
}

/// Ids and score bits of a result list.
fn ranked(hits: &[sagitta_engine::ScoredPoint]) -> Vec<(PointId, u32)> {
    hits.iter()
        .map(|hit| (hit.id, hit.score.to_bits()))
        .collect()
}

struct Answers {
    exact: Vec<Vec<(PointId, u32)>>,
    hnsw: Vec<Vec<(PointId, u32)>>,
}

fn answers(collection: &Collection, queries: &[Vec<f32>]) -> Answers {
    fn request(query: &[f32], strategy: Strategy) -> SearchRequest<'_> {
        SearchRequest {
            strategy,
            ..SearchRequest::new(query, 10)
        }
    }
    let exact: Vec<SearchRequest<'_>> = queries
        .iter()
        .map(|query| request(query, Strategy::Exact))
        .collect();
    let hnsw: Vec<SearchRequest<'_>> = queries
        .iter()
        .map(|query| request(query, Strategy::Beam(16)))
        .collect();
    let one_by_one = |requests: &[SearchRequest<'_>]| -> Vec<Vec<(PointId, u32)>> {
        requests
            .iter()
            .map(|request| ranked(&collection.query(request).unwrap()))
            .collect()
    };
    let batched = |requests: &[SearchRequest<'_>]| -> Vec<Vec<(PointId, u32)>> {
        let results = collection.query_batch(requests).unwrap();
        results.iter().map(|hits| ranked(hits)).collect()
    };
    let answers = Answers {
        exact: one_by_one(&exact),
        hnsw: one_by_one(&hnsw),
    };
    assert_eq!(
        batched(&exact),
        answers.exact,
        "a batch answers as its searches"
    );
    assert_eq!(
        batched(&hnsw),
        answers.hnsw,
        "a batch answers as its searches"
    );
    answers
}

fn recall(found: &[Vec<(PointId, u32)>], exact: &[Vec<(PointId, u32)>]) -> f64 {
    let hits: usize = found
        .iter()
        .zip(exact)
        .map(|(found, exact)| {
            found
                .iter()
                .filter(|(id, _)| exact.iter().any(|(truth, _)| truth == id))
                .count()
        })
        .sum();
    hits as f64 / exact.iter().map(Vec::len).sum::<usize>() as f64
}

#[test]
fn a_collection_answers_alike_on_one_pool_and_on_simulated_nodes() {
    let fs = SimFileSystem::new();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let collection =
        Collection::create(&fs, Path::new("/c"), config(3, Placement::Spread)).unwrap();
    collection.upsert(points(&mut rng, 0..3_000), true).unwrap();
    assert_eq!(collection.optimize(&fs).unwrap(), 3_000);
    // and some in the write buffers, searched beside the segments
    collection
        .upsert(points(&mut rng, 3_000..3_300), true)
        .unwrap();
    let queries: Vec<Vec<f32>> = (0..40).map(|_| random_vector(&mut rng)).collect();
    let one_pool = answers(&collection, &queries);
    let one_pool_recall = recall(&one_pool.hnsw, &one_pool.exact);
    assert!(one_pool_recall > 0.5, "HNSW recall {one_pool_recall}");
    let mut collection = collection;
    for nodes in [2, 3, 4] {
        collection = collection.placed_on(Arc::new(Machine::new(Topology::simulated(nodes))));
        let expected: Vec<usize> = (0..3).map(|shard| shard % nodes).collect();
        assert_eq!(collection.status().placement.nodes, expected);
        let got = answers(&collection, &queries);
        assert_eq!(got.exact, one_pool.exact, "{nodes} nodes: exact answers");
        let got_recall = recall(&got.hnsw, &got.exact);
        assert!(
            got_recall >= one_pool_recall - 0.005,
            "{nodes} nodes: recall {got_recall} against {one_pool_recall} on one pool"
        );
    }
}

#[test]
fn writes_and_builds_on_simulated_nodes_keep_every_point_and_the_callers_binding() {
    let fs = Arc::new(SimFileSystem::new());
    let options = DatabaseOptions {
        background_optimizer: false,
        machine: Some(Arc::new(Machine::new(Topology::simulated(2)))),
        ..DatabaseOptions::default()
    };
    let binding = sagitta_kernels::sched::allowed_cpus();
    let database = Database::open_with(fs.clone(), Path::new("/db"), options).unwrap();
    let spread = database
        .create_collection("spread", config(4, Placement::Spread))
        .unwrap();
    assert_eq!(spread.status().placement.nodes, vec![0, 1, 0, 1]);
    let pinned = database
        .create_collection("pinned", config(2, Placement::Node(1)))
        .unwrap();
    assert_eq!(pinned.status().placement.nodes, vec![1, 1]);
    let missing = database
        .create_collection("missing", config(2, Placement::Node(5)))
        .unwrap();
    let placed = missing.status().placement;
    assert_eq!(placed.nodes, vec![0, 1]);
    assert!(placed.note.unwrap().contains("node 5"));

    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let written = points(&mut rng, 0..1_200);
    for batch in written.chunks(100) {
        spread.upsert(batch.to_vec(), true).unwrap();
    }
    assert_eq!(binding, sagitta_kernels::sched::allowed_cpus(), "writes");
    assert_eq!(spread.optimize(fs.as_ref()).unwrap(), 1_200);
    assert_eq!(binding, sagitta_kernels::sched::allowed_cpus(), "builds");
    let status = spread.status();
    assert_eq!((status.points, status.indexed), (1_200, 1_200));
    for point in &written {
        let stored = spread.get(&point.id).unwrap().expect("every point kept");
        // Cosine keeps unit vectors
        let norm = point.vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        for (kept, given) in stored.vector.iter().zip(&point.vector) {
            assert!((kept - given / norm).abs() < 1e-5, "{:?}", point.id);
        }
        assert_eq!(stored.payload, point.payload);
        // the point finds itself first
        let hits = spread.search(&point.vector, 1, None).unwrap();
        assert_eq!(hits[0].id, point.id);
    }
    drop(spread);
    drop(pinned);
    drop(missing);
    drop(database);
    // reopened: the placement policy is kept in the manifest
    let options = DatabaseOptions {
        background_optimizer: false,
        machine: Some(Arc::new(Machine::new(Topology::simulated(2)))),
        ..DatabaseOptions::default()
    };
    let database = Database::open_with(fs, Path::new("/db"), options).unwrap();
    let pinned = database.collection("pinned").unwrap();
    assert_eq!(pinned.config().storage.placement, Placement::Node(1));
    assert_eq!(pinned.status().placement.nodes, vec![1, 1]);
}

/// A machine of this process's CPUs as node `compute` and a memory-only node `far`
/// (listed in ascending id order, as sysfs lists them).
fn with_far_tier(compute: usize, far: usize) -> Arc<Machine> {
    let cpus = sagitta_kernels::sched::allowed_cpus().unwrap_or_else(|| vec![0]);
    let node = |id: usize, cpus: Vec<usize>| NumaNode {
        id,
        has_cpus: !cpus.is_empty(),
        cpus,
        memory_bytes: 1 << 30,
        distances: Vec::new(),
    };
    let mut nodes = vec![node(compute, cpus), node(far, Vec::new())];
    nodes.sort_by_key(|node| node.id);
    for (at, node) in nodes.iter_mut().enumerate() {
        node.distances = vec![20, 20];
        node.distances[at] = 10;
    }
    let topology = Topology {
        nodes,
        source: Source::Simulated,
    };
    Arc::new(Machine::new(topology))
}

fn far_options(machine: Arc<Machine>) -> DatabaseOptions {
    DatabaseOptions {
        background_optimizer: false,
        machine: Some(machine),
        ..DatabaseOptions::default()
    }
}

/// Every point of `written` is stored as written and finds itself first.
fn assert_kept(collection: &Collection, written: &[Point]) {
    for point in written {
        let stored = collection
            .get(&point.id)
            .unwrap()
            .expect("every point kept");
        let norm = point.vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        for (kept, given) in stored.vector.iter().zip(&point.vector) {
            assert!((kept - given / norm).abs() < 1e-5, "{:?}", point.id);
        }
        assert_eq!(stored.payload, point.payload);
        assert_eq!(
            collection.search(&point.vector, 1, None).unwrap()[0].id,
            point.id
        );
    }
}

#[test]
fn far_tier_vectors_move_to_the_memory_node_and_a_refusal_is_reported() {
    // whether this kernel (or container) lets a process set a memory policy at all
    let probe = sagitta_kernels::AppendSlab::<u8>::new(16, 4096);
    probe.write_row(0, &[1; 4096]).unwrap();
    let allowed = probe.prefer_node(0);
    let fs = Arc::new(SimFileSystem::new());
    // node 0 (which every Linux machine has) posing as a CPU-less far node
    let database = Database::open_with(
        fs.clone(),
        Path::new("/db"),
        far_options(with_far_tier(1, 0)),
    )
    .unwrap();
    let mut far = config(2, Placement::Spread);
    far.storage.vectors_far = true;
    let collection = database.create_collection("far", far).unwrap();
    let status = collection.status();
    assert_eq!(status.placement.nodes, vec![1, 1]);
    assert_eq!(status.placement.far_nodes, vec![Some(0), Some(0)]);
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let written = points(&mut rng, 0..1_500);
    for batch in written.chunks(250) {
        collection.upsert(batch.to_vec(), true).unwrap();
    }
    assert_eq!(collection.optimize(fs.as_ref()).unwrap(), 1_500);
    let pages = collection.vector_pages_by_node();
    match &allowed {
        Ok(()) => {
            assert_eq!(collection.status().vectors_tier_error, None);
            let pages = pages.unwrap();
            assert!(
                !pages.is_empty() && pages.iter().all(|&(node, _)| node == 0),
                "{pages:?}"
            );
        }
        Err(reason) => {
            let error = collection
                .status()
                .vectors_tier_error
                .expect("refusal kept");
            assert!(error.starts_with("mbind to node 0"), "{error} / {reason}");
        }
    }
    assert_kept(&collection, &written);
    drop(collection);
    drop(database);

    // reopened on a machine whose far node does not exist: the kernel refuses, collection
    // info says why, and nothing is lost
    let database = Database::open_with(
        fs.clone(),
        Path::new("/db"),
        far_options(with_far_tier(1, 7)),
    )
    .unwrap();
    let collection = database.collection("far").unwrap();
    assert!(collection.config().storage.vectors_far, "the tier is kept");
    assert_eq!(
        collection.status().placement.far_nodes,
        vec![Some(7), Some(7)]
    );
    let error = collection
        .status()
        .vectors_tier_error
        .expect("refusal kept");
    assert!(error.starts_with("mbind to node 7: "), "{error}");
    assert_kept(&collection, &written);

    // a machine without a memory-only node keeps the vectors local and reports no far node
    let two_nodes = Arc::new(Machine::new(Topology::simulated(2)));
    let elsewhere = Database::open_with(fs, Path::new("/db2"), far_options(two_nodes)).unwrap();
    let local = elsewhere.create_collection("local", far).unwrap();
    assert_eq!(local.status().placement.far_nodes, vec![None, None]);
    assert_eq!(local.status().vectors_tier_error, None);

    // a far tier cannot hold vectors kept on disk
    let mut on_disk = far;
    on_disk.storage.vectors_on_disk = true;
    let refused = database
        .create_collection("on_disk", on_disk)
        .err()
        .expect("refused");
    assert!(
        refused
            .to_string()
            .contains("`sagitta.vectors_tier` far cannot be combined with `vectors.on_disk`"),
        "{refused}"
    );
}
