//! A collection's graph config (Qdrant's `hnsw_config` m and ef_construct): segments are
//! built with it, a change is kept in the manifest across restarts and power cuts, and
//! the optimizer rebuilds the segments built otherwise — with every point and every
//! answer kept, a crash in the middle of a rebuild included.

use std::path::Path;

use rand::rngs::StdRng;
use rand::SeedableRng;
use sagitta_engine::{
    Collection, CollectionConfig, Distance, EngineError, GraphConfig, Health, Point, PointId,
    SearchRequest, Strategy, DEFAULT_GRAPH,
};
use sagitta_storage::sim::SimFileSystem;

const DIM: usize = 16;
const POINTS: u64 = 1_500;

fn vector(id: u64) -> Vec<f32> {
    let mut state = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..DIM)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 2_001) as f32 / 1_000.0 - 1.0
        })
        .collect()
}

fn points(ids: std::ops::Range<u64>) -> Vec<Point> {
    ids.map(|id| Point {
        id: PointId::Number(id),
        vector: vector(id),
        payload: Some(format!("{{\"n\":{id}}}")),
        side: Vec::new(),
    })
    .collect()
}

fn config() -> CollectionConfig {
    CollectionConfig {
        dim: DIM,
        distance: Distance::Euclid,
        shard_count: 1,
        storage: Default::default(),
    }
}

/// A sealed collection of `POINTS` points under `directory`.
fn sealed(fs: &SimFileSystem, directory: &Path) -> Collection {
    let collection = Collection::create(fs, directory, config()).unwrap();
    collection.upsert(points(0..POINTS), true).unwrap();
    collection.optimize(fs).unwrap();
    let status = collection.status();
    assert_eq!((status.indexed, status.stale_segments), (1_500, 0));
    collection
}

/// Every point is there with its vector and payload, and an exact search agrees with a
/// brute-force ranking.
fn check_points(collection: &Collection) {
    assert_eq!(collection.count(None).unwrap(), POINTS as usize);
    for id in 0..POINTS {
        let point = collection.get(&PointId::Number(id)).unwrap().expect("kept");
        assert_eq!(point.vector, vector(id), "id {id}");
        assert_eq!(point.payload, Some(format!("{{\"n\":{id}}}")));
    }
    let query = vector(7_777);
    let mut ranked: Vec<(f32, u64)> = (0..POINTS)
        .map(|id| {
            let d: f32 = vector(id)
                .iter()
                .zip(&query)
                .map(|(a, b)| (a - b) * (a - b))
                .sum();
            (d, id)
        })
        .collect();
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
    let request = SearchRequest {
        strategy: Strategy::Exact,
        ..SearchRequest::new(&query, 10)
    };
    let hits: Vec<PointId> = collection
        .query(&request)
        .unwrap()
        .into_iter()
        .map(|hit| hit.id)
        .collect();
    let expected: Vec<PointId> = ranked[..10]
        .iter()
        .map(|(_, id)| PointId::Number(*id))
        .collect();
    assert_eq!(hits, expected);
}

/// Runs the optimizer until it has nothing left to do.
fn settle(collection: &Collection, fs: &SimFileSystem) {
    while collection.maintain(fs).unwrap() {}
}

#[test]
fn a_new_graph_config_rebuilds_the_segments_built_otherwise() {
    let fs = SimFileSystem::new();
    let directory = Path::new("/db/graph");
    let collection = sealed(&fs, directory);
    assert_eq!(collection.graph(), DEFAULT_GRAPH);
    let before = collection.status().index_ram_bytes;
    let wider = GraphConfig {
        m: 32,
        ef_construct: 40,
    };
    collection.set_graph(&fs, wider).unwrap();
    assert_eq!(collection.config().storage.graph, wider);
    let status = collection.status();
    assert_eq!((status.health, status.stale_segments), (Health::Yellow, 1));
    // answers stay exact while the old graph is in use
    check_points(&collection);
    settle(&collection, &fs);
    let status = collection.status();
    assert_eq!((status.health, status.stale_segments), (Health::Green, 0));
    // twice the links per node: the graph takes more RAM (a real rebuild, not a relabel)
    assert!(status.index_ram_bytes > before, "{before} -> {status:?}");
    check_points(&collection);
    drop(collection);
    let reopened = Collection::open(&fs, directory).unwrap();
    assert_eq!(reopened.graph(), wider);
    assert_eq!(reopened.status().stale_segments, 0);
    check_points(&reopened);
    // back to the default: one more rebuild, and the graph shrinks again
    reopened.set_graph(&fs, DEFAULT_GRAPH).unwrap();
    settle(&reopened, &fs);
    let status = reopened.status();
    assert_eq!(status.stale_segments, 0);
    assert!(
        status.index_ram_bytes < before + before / 4,
        "{before} -> {status:?}"
    );
}

#[test]
fn a_graph_config_out_of_range_is_refused_by_name_and_changes_nothing() {
    let fs = SimFileSystem::new();
    let directory = Path::new("/db/bad");
    let collection = sealed(&fs, directory);
    for (bad, field) in [
        (
            GraphConfig {
                m: 0,
                ef_construct: 100,
            },
            "hnsw_config.m",
        ),
        (
            GraphConfig {
                m: 300,
                ef_construct: 100,
            },
            "hnsw_config.m",
        ),
        (
            GraphConfig {
                m: 16,
                ef_construct: 3,
            },
            "hnsw_config.ef_construct",
        ),
        (
            GraphConfig {
                m: 16,
                ef_construct: 5_000,
            },
            "hnsw_config.ef_construct",
        ),
    ] {
        let error = collection.set_graph(&fs, bad).unwrap_err();
        assert!(
            matches!(error, EngineError::ParameterOutOfRange { name, .. } if name == field),
            "{bad:?}: {error}"
        );
    }
    assert_eq!(collection.graph(), DEFAULT_GRAPH);
    assert_eq!(collection.status().stale_segments, 0);
    let created = CollectionConfig {
        storage: sagitta_engine::StorageConfig {
            graph: GraphConfig {
                m: 1,
                ef_construct: 100,
            },
            ..Default::default()
        },
        ..config()
    };
    let Err(error) = Collection::create(&fs, Path::new("/db/bad-create"), created) else {
        panic!("m 1 was accepted");
    };
    assert!(error.to_string().contains("hnsw_config.m"), "{error}");
    drop(collection);
    assert_eq!(
        Collection::open(&fs, directory).unwrap().graph(),
        DEFAULT_GRAPH
    );
}

/// Power cuts: right after `set_graph` returns (the change is durable), and at every
/// write of the rebuild that follows (the old segment serves until the new one is
/// published). After each, every point is there, the graph config is the new one, and
/// the optimizer finishes the rebuild.
#[test]
fn power_cuts_during_a_graph_change_and_its_rebuild_lose_nothing() {
    let wider = GraphConfig {
        m: 24,
        ef_construct: 32,
    };
    let mut cuts = 0;
    for fail_at in [0u64, 1, 2, 3, 5, 8, 13, 21, 34] {
        let fs = SimFileSystem::new();
        let directory = Path::new("/db/cut");
        let collection = sealed(&fs, directory);
        collection.set_graph(&fs, wider).unwrap();
        if fail_at > 0 {
            fs.fail_write_after(fail_at);
            if collection.maintain(&fs).is_err() {
                cuts += 1;
            }
        }
        drop(collection);
        fs.crash(&mut StdRng::seed_from_u64(fail_at));
        let reopened = Collection::open(&fs, directory).unwrap();
        assert_eq!(reopened.graph(), wider, "cut at write {fail_at}");
        check_points(&reopened);
        settle(&reopened, &fs);
        assert_eq!(
            reopened.status().stale_segments,
            0,
            "cut at write {fail_at}"
        );
        check_points(&reopened);
    }
    assert!(cuts >= 3, "only {cuts} rebuilds were cut short");
}
