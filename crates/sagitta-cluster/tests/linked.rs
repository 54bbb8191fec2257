//! A linked collection (rank 0 of a job, its points spread over three ranks) answers
//! every read and write exactly as one process holding every point does. The ranks are
//! three databases in this process; the job's transport is stood in for by a thread
//! serving rank 0's window the way `service::lead` does (calls answered by each rank's
//! `DatabaseLocal`, probes searched on every rank and merged) — the MPI transport itself
//! is tested under `mpirun` by `examples/mpi_check.rs` and `python/tests/test_mpi_serve.py`.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_cluster::jobs::{Job, Local, Outcome};
use sagitta_cluster::link::Link;
use sagitta_cluster::local::DatabaseLocal;
use sagitta_cluster::owner::owner_rank;
use sagitta_cluster::probe::ProbeBatch;
use sagitta_cluster::topk::Partial;
use sagitta_cluster::window::{Bounds, Window};
use sagitta_engine::collection::peers::Linked;
use sagitta_engine::database::DatabaseOptions;
use sagitta_engine::{
    Collection, CollectionConfig, Database, Distance, FieldType, Filter, Point, PointId,
    SearchRequest, StorageConfig, Strategy,
};
use sagitta_storage::sim::SimFileSystem;
use serde_json::json;

const RANKS: usize = 3;
const DIM: usize = 8;

/// Serves rank 0's window until it closes: what `service::lead` does, minus MPI.
fn stand_in(window: &Window<Job, Outcome>, ranks: Vec<Arc<Database>>) {
    let locals: Vec<DatabaseLocal> = ranks.into_iter().map(DatabaseLocal).collect();
    while let Some(batch) = window.next_batch() {
        for waiting in batch {
            let outcome = match waiting.job {
                Job::Ask(calls) => Outcome::Answers(
                    calls
                        .iter()
                        .map(|(rank, call)| Ok(locals[*rank].call(call)))
                        .collect(),
                ),
                Job::Probe { collection, probe } => {
                    let batch = ProbeBatch {
                        number: 1,
                        collection,
                        wanted: probe.wanted,
                        probes: vec![probe],
                    };
                    let mut merged: Option<Partial> = None;
                    for local in &locals {
                        let lists = local.probe(&batch).expect("every rank searches");
                        let mine = Partial {
                            batch: 1,
                            lists,
                            missing: Vec::new(),
                        };
                        match &mut merged {
                            None => merged = Some(mine),
                            Some(all) => all.merge(mine, batch.wanted, Distance::Euclid),
                        }
                    }
                    let hits = merged.expect("ranks").lists.remove(0);
                    Outcome::Hits(Ok(hits))
                }
                other => panic!("a linked collection sent {other:?}"),
            };
            let _ = waiting.reply.send(outcome);
        }
    }
}

struct Job3 {
    linked: Arc<Database>,
    ranks: Vec<Arc<Database>>,
    single: Database,
    window: Arc<Window<Job, Outcome>>,
    server: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Job3 {
    fn drop(&mut self) {
        self.window.close();
        if let Some(server) = self.server.take() {
            server.join().expect("the stand-in does not panic");
        }
    }
}

fn options(peers: Option<Linked>) -> DatabaseOptions {
    DatabaseOptions {
        background_optimizer: false,
        peers,
        ..DatabaseOptions::default()
    }
}

/// Rank 0 linked to ranks 1 and 2, and a one-process database beside them.
fn job() -> Job3 {
    let fs = Arc::new(SimFileSystem::new());
    let open = |name: &str, peers| {
        Database::open_with(fs.clone(), std::path::Path::new(name), options(peers)).unwrap()
    };
    let window = Arc::new(Window::new(Bounds::default()));
    let link = Link::new(Arc::clone(&window), RANKS);
    let mut ranks = vec![];
    let linked = Arc::new(open("/rank-0", Some(Linked(Arc::new(link)))));
    ranks.push(Arc::clone(&linked));
    for rank in 1..RANKS {
        ranks.push(Arc::new(open(&format!("/rank-{rank}"), None)));
    }
    let served = ranks.clone();
    let serving = Arc::clone(&window);
    let server = std::thread::spawn(move || stand_in(&serving, served));
    Job3 {
        linked,
        ranks,
        single: open("/single", None),
        window,
        server: Some(server),
    }
}

fn point(rng: &mut ChaCha8Rng, id: u64) -> Point {
    let tags = ["red", "green", "blue"];
    Point {
        id: PointId::Number(id),
        vector: (0..DIM).map(|_| rng.gen_range(-1.0..1.0)).collect(),
        payload: Some(
            json!({"n": id, "tag": tags[(id % 3) as usize], "text": format!("doc {}", id % 7)})
                .to_string(),
        ),
        side: Vec::new(),
    }
}

fn filter(value: &serde_json::Value) -> Filter {
    Filter::parse(value, "filter").unwrap()
}

/// Every page of a scroll from the start, `limit` at a time.
fn all_pages(collection: &Collection, limit: usize, filter: Option<&Filter>) -> Vec<Point> {
    let (mut all, mut offset) = (Vec::new(), None);
    loop {
        let (page, next) = collection.scroll(offset, limit, filter).unwrap();
        all.extend(page);
        match next {
            Some(next) => offset = Some(next),
            None => return all,
        }
    }
}

#[test]
fn a_linked_collection_answers_as_one_process_does() {
    let job = job();
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Cosine,
        shard_count: 2,
        storage: StorageConfig::default(),
    };
    let linked = job.linked.create_collection("docs", config).unwrap();
    let single = job.single.create_collection("docs", config).unwrap();
    // creation reached every rank
    for rank in &job.ranks {
        assert!(rank.collection("docs").is_ok());
    }
    for target in [&linked, &single] {
        target
            .create_payload_index(job.linked.file_system(), "tag", FieldType::Keyword)
            .unwrap();
    }
    assert_eq!(
        job.ranks[2]
            .collection("docs")
            .unwrap()
            .payload_schema()
            .len(),
        1,
        "the index reached rank 2"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let points: Vec<Point> = (0..600).map(|id| point(&mut rng, id)).collect();
    linked.upsert(points.clone(), true).unwrap();
    single.upsert(points, true).unwrap();
    // each rank holds exactly the points it owns
    for (rank, database) in job.ranks.iter().enumerate() {
        let here = database.collection("docs").unwrap();
        let owned = (0..600)
            .filter(|id| owner_rank(&PointId::Number(*id), RANKS) == rank)
            .count();
        let unlinked_count = if rank == 0 {
            here.status().points - (600 - owned)
        } else {
            here.count(None).unwrap()
        };
        assert_eq!(unlinked_count, owned, "rank {rank}");
        assert!(owned > 100, "rank {rank} owns {owned}");
    }
    let deleted: Vec<PointId> = (0..600).step_by(9).map(PointId::Number).collect();
    let reds = filter(&json!({"must": [{"key": "tag", "match": {"value": "red"}}]}));
    for target in [&linked, &single] {
        target.delete(&deleted, true).unwrap();
        target
            .set_payload(
                &[PointId::Number(10), PointId::Number(11)],
                r#"{"extra": 1}"#,
                true,
            )
            .unwrap();
        target
            .delete_payload_keys(&[PointId::Number(12)], &["text".into()], false)
            .unwrap();
        target
            .overwrite_payload(&[PointId::Number(13)], r#"{"tag": "red"}"#, false)
            .unwrap();
        let removed = target
            .delete_by_filter(
                &filter(&json!({"must": [{"key": "n", "range": {"gte": 590}}]})),
                true,
            )
            .unwrap();
        assert_eq!(removed, 9);
    }
    assert_eq!(linked.count(None).unwrap(), single.count(None).unwrap());
    assert_eq!(linked.status().points, single.count(None).unwrap());
    assert_eq!(
        linked.count(Some(&reds)).unwrap(),
        single.count(Some(&reds)).unwrap()
    );
    for id in [0, 10, 12, 13, 14, 599, 1_000] {
        let id = PointId::Number(id);
        assert_eq!(
            linked.get(&id).unwrap(),
            single.get(&id).unwrap(),
            "point {id}"
        );
    }
    let asked: Vec<PointId> = [1, 2, 9, 3, 4_000, 5].map(PointId::Number).to_vec();
    assert_eq!(
        linked.first_missing(&asked).unwrap(),
        Some(PointId::Number(9))
    );
    assert_eq!(
        linked.first_missing(&asked).unwrap(),
        single.first_missing(&asked).unwrap()
    );
    let mut matched = linked.matching_ids(&reds).unwrap();
    matched.sort_unstable();
    let mut expected = single.matching_ids(&reds).unwrap();
    expected.sort_unstable();
    assert_eq!(matched, expected);
    // scroll: every page in id order, whole points, with and without a filter
    assert_eq!(all_pages(&linked, 37, None), all_pages(&single, 37, None));
    assert_eq!(
        all_pages(&linked, 10, Some(&reds)),
        all_pages(&single, 10, Some(&reds))
    );
    assert_eq!(
        linked.facet("tag", None, 10).unwrap(),
        single.facet("tag", None, 10).unwrap()
    );
    let mut everything = linked.points().unwrap();
    everything.sort_unstable_by_key(|point| point.id);
    assert_eq!(everything, all_pages(&single, 1_000, None));
    // exact searches: ids, scores and payloads identical; offsets, thresholds, filters
    for n in 0..20 {
        let query: Vec<f32> = (0..DIM).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let request = SearchRequest {
            offset: n % 4,
            filter: (n % 2 == 0).then_some(&reds),
            score_threshold: (n % 5 == 0).then_some(0.1),
            strategy: Strategy::Exact,
            ..SearchRequest::new(&query, 7)
        };
        assert_eq!(
            linked.query(&request).unwrap(),
            single.query(&request).unwrap(),
            "query {n}"
        );
    }
    let queries: Vec<Vec<f32>> = (0..5)
        .map(|_| (0..DIM).map(|_| rng.gen_range(-1.0..1.0)).collect())
        .collect();
    let requests: Vec<SearchRequest<'_>> = queries
        .iter()
        .map(|query| SearchRequest {
            strategy: Strategy::Exact,
            ..SearchRequest::new(query, 5)
        })
        .collect();
    assert_eq!(
        linked.query_batch(&requests).unwrap(),
        single.query_batch(&requests).unwrap()
    );
    // graph settings reach every rank
    let graph = sagitta_engine::GraphConfig {
        m: 8,
        ..linked.graph()
    };
    linked.set_graph(job.linked.file_system(), graph).unwrap();
    for rank in &job.ranks {
        assert_eq!(rank.collection("docs").unwrap().graph(), graph);
    }
    // a collection snapshot of a linked collection holds every rank's points
    let mut snapshot = Vec::new();
    let written = linked.write_snapshot(&mut snapshot).unwrap();
    assert_eq!(written as usize, single.count(None).unwrap());
    // dropping reaches every rank
    job.linked.drop_collection("docs").unwrap();
    for rank in &job.ranks {
        assert!(rank.collection("docs").is_err());
    }
}

#[test]
fn a_bad_point_is_refused_before_any_rank_stores_any_of_the_write() {
    let job = job();
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Dot,
        shard_count: 1,
        storage: StorageConfig::default(),
    };
    let linked = job.linked.create_collection("c", config).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let mut points: Vec<Point> = (0..50).map(|id| point(&mut rng, id)).collect();
    points[31].vector.push(1.0);
    let error = linked.upsert(points, true).unwrap_err().to_string();
    assert!(error.contains("point 31"), "{error}");
    assert_eq!(linked.count(None).unwrap(), 0);
    // a bad configuration is refused as one process refuses it, before any rank makes it
    let bad = CollectionConfig { dim: 0, ..config };
    let Err(refused) = job.linked.create_collection("bad", bad) else {
        panic!("a collection of dimension 0 was made")
    };
    let Err(alone) = job.single.create_collection("bad", bad) else {
        panic!("a collection of dimension 0 was made")
    };
    assert_eq!(refused, alone);
    assert!(job.ranks[1].collection("bad").is_err());
    // a collection one rank already has cannot be made on any (and none is left behind)
    job.ranks[2].create_collection("taken", config).unwrap();
    let error = match job.linked.create_collection("taken", config) {
        Ok(_) => panic!("made although rank 2 has it"),
        Err(error) => error.to_string(),
    };
    assert!(error.contains("rank 2"), "{error}");
    assert!(job.linked.collection("taken").is_err());
    assert!(job.ranks[1].collection("taken").is_err());
    assert!(
        job.ranks[2].collection("taken").is_ok(),
        "the rank that refused keeps its own"
    );
}

#[test]
fn a_shard_snapshot_of_a_linked_collection_holds_that_shard_of_every_rank() {
    let job = job();
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Euclid,
        shard_count: 2,
        storage: StorageConfig::default(),
    };
    let linked = job.linked.create_collection("docs", config).unwrap();
    let single = job.single.create_collection("docs", config).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let points: Vec<Point> = (0..1_300).map(|id| point(&mut rng, id)).collect();
    linked.upsert(points.clone(), true).unwrap();
    single.upsert(points, true).unwrap();
    // shard i of the job is shard i of every rank: the same file one process writes
    let mut taken = Vec::new();
    for shard in 0..2 {
        let (mut ours, mut alone) = (Vec::new(), Vec::new());
        let written = linked.write_shard_snapshot(shard, &mut ours).unwrap();
        single.write_shard_snapshot(shard, &mut alone).unwrap();
        assert!(written > 500, "shard {shard} holds {written}");
        assert!(ours == alone, "shard {shard}'s snapshot differs");
        taken.push(ours);
    }
    assert!(linked.write_shard_snapshot(2, &mut Vec::new()).is_err());
    // then shard 1 changes on every rank: points replaced, added and deleted
    let changed: Vec<Point> = (1_200..1_400).map(|id| point(&mut rng, id)).collect();
    let deleted: Vec<PointId> = (0..1_300).step_by(7).map(PointId::Number).collect();
    for target in [&linked, &single] {
        target.upsert(changed.clone(), true).unwrap();
        target.delete(&deleted, true).unwrap();
    }
    assert_eq!(all_pages(&linked, 100, None), all_pages(&single, 100, None));
    // recovering shard 1 brings back its points as they were, on the ranks that own them
    let snapshot = &taken[1];
    let verified = linked
        .verify_shard_snapshot(1, &mut snapshot.as_slice())
        .unwrap();
    assert!(linked
        .verify_shard_snapshot(0, &mut snapshot.as_slice())
        .is_err());
    for target in [&linked, &single] {
        let recovered = target.recover_shard(1, &mut snapshot.as_slice()).unwrap();
        assert_eq!(recovered, verified);
    }
    let after = all_pages(&linked, 100, None);
    assert_eq!(after, all_pages(&single, 100, None));
    let mut again = Vec::new();
    linked.write_shard_snapshot(1, &mut again).unwrap();
    assert!(&again == snapshot, "shard 1 is as the snapshot holds it");
    // ranks 1 and 2 (unlinked copies) hold exactly the points they own
    for rank in 1..RANKS {
        let mut held = job.ranks[rank]
            .collection("docs")
            .unwrap()
            .points()
            .unwrap();
        held.sort_unstable_by_key(|point| point.id);
        let owned: Vec<Point> = after
            .iter()
            .filter(|point| owner_rank(&point.id, RANKS) == rank)
            .cloned()
            .collect();
        assert_eq!(held, owned, "rank {rank}");
    }
}
