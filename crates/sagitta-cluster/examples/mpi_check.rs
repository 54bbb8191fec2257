//! Run under MPI (`mpirun -n 4 target/release/examples/mpi_check`): every rank keeps the
//! points it owns in a collection of its own, rank 0 also keeps all of them in one (the
//! single-process answer), and a batch of queries broadcast from rank 0 and reduced up
//! the tree — and by a plain gather — must give the single process's answers: exact
//! searches identical in ids and score bits, HNSW recall within 0.01. Exits non-zero
//! (a panic, which makes mpirun fail) on any difference.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_cluster::batch::QueryBatch;
use sagitta_cluster::local::{apply, DatabaseLocal};
use sagitta_cluster::owner::owner_rank;
use sagitta_cluster::service::{follow, lead, Job, Outcome, Query};
use sagitta_cluster::topk::Partial;
use sagitta_cluster::window::{Bounds, Window};
use sagitta_cluster::world::{complete, Rank};
use sagitta_cluster::writes::Admin;
use sagitta_engine::codec::Operation;
use sagitta_engine::database::DatabaseOptions;
use sagitta_engine::{
    Collection, CollectionConfig, Database, Distance, Point, PointId, SearchRequest, StorageConfig,
    Strategy, VectorSpaces,
};
use sagitta_storage::fs::OsFileSystem;

const DIM: usize = 96;
const POINTS: u64 = 20_000;
const QUERIES: usize = 64;
const LIMIT: usize = 10;
const EF: usize = 10;
const TIMEOUT: Duration = Duration::from_secs(60);
/// The deadline in the batch where one rank hangs, and how long it hangs.
const SHORT: Duration = Duration::from_millis(300);
const HANG: Duration = Duration::from_secs(3);

fn all_points() -> Vec<Point> {
    let mut rng = ChaCha8Rng::seed_from_u64(2026);
    (0..POINTS)
        .map(|id| Point {
            id: PointId::Number(id * 7 + 3),
            vector: (0..DIM).map(|_| rng.gen_range(-1.0..1.0)).collect(),
            payload: Some(format!(r#"{{"n":{id}}}"#)),
            side: Vec::new(),
        })
        .collect()
}

fn collection(database: &Database, name: &str, points: &[Point]) -> Arc<Collection> {
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Cosine,
        shard_count: 2,
        storage: StorageConfig::default(),
    };
    let made = database.create_collection(name, config).expect("create");
    for chunk in points.chunks(500) {
        made.upsert(chunk.to_vec(), true).expect("upsert");
    }
    let sealed = made.optimize(&OsFileSystem).expect("seal");
    let status = made.status();
    eprintln!(
        "{name}: sealed {sealed}, indexed {} of {}",
        status.indexed, status.points
    );
    made
}

/// This rank's answers to `batch` from `collection`.
fn search(collection: &Collection, batch: &QueryBatch) -> Partial {
    batch.search(collection).expect("search")
}

fn recall(found: &Partial, truth: &Partial) -> f64 {
    let mut hit = 0;
    for (mine, exact) in found.lists.iter().zip(&truth.lists) {
        hit += mine
            .iter()
            .filter(|h| exact.iter().any(|e| e.id == h.id))
            .count();
    }
    hit as f64 / (truth.lists.len() * LIMIT) as f64
}

fn main() {
    let rank = Rank::init().expect("MPI");
    let directory = tempfile::tempdir().expect("a temporary directory");
    let options = DatabaseOptions {
        background_optimizer: false,
        ..DatabaseOptions::default()
    };
    let database = Arc::new(
        Database::open_with(Arc::new(OsFileSystem), directory.path(), options).expect("database"),
    );
    let points = all_points();
    let owned: Vec<Point> = points
        .iter()
        .filter(|point| owner_rank(&point.id, rank.size()) == rank.rank())
        .cloned()
        .collect();
    let owned_count = owned.len();
    let local = collection(&database, "docs", &owned);
    let whole = (rank.rank() == 0).then(|| collection(&database, "whole", &points));

    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let vectors: Vec<f32> = (0..QUERIES * DIM)
        .map(|_| rng.gen_range(-1.0..1.0))
        .collect();
    let mut answers = Vec::new();
    // batch 1 exact, 2 HNSW, 3 with the last rank hung past the deadline, 4 HNSW again:
    // the hung rank's late answer to batch 3 must not be taken for its answer to 4
    let hang = rank.size() > 1;
    let batches: &[(u64, usize)] = if hang {
        &[(1, 0), (2, EF), (3, EF), (4, EF)]
    } else {
        &[(1, 0), (2, EF), (4, EF)]
    };
    for &(number, ef) in batches {
        let batch = QueryBatch {
            number,
            collection: "docs".to_string(),
            limit: LIMIT,
            ef,
            dim: DIM,
            vectors: vectors.clone(),
        };
        // rank 0's bytes reach every rank; the others pass nothing
        let sent = if rank.rank() == 0 {
            batch.encode()
        } else {
            Vec::new()
        };
        let received = rank.broadcast(sent, TIMEOUT).expect("rank 0 sends");
        let received = QueryBatch::decode(&received).expect("batch");
        assert_eq!(received, batch);
        let hung = number == 3;
        if hung && rank.rank() == rank.size() - 1 {
            std::thread::sleep(HANG);
        }
        let mut mine = search(&local, &received);
        mine.batch = number;
        if hung {
            let started = Instant::now();
            let tree = rank.reduce_tree(mine, LIMIT, Distance::Cosine, SHORT);
            if let Some(merged) = tree.expect("tree") {
                let waited = started.elapsed();
                let error = complete(merged, SHORT).unwrap_err().to_string();
                let last = rank.size() - 1;
                assert!(
                    error.starts_with(&format!("ranks [{last}] did not answer")),
                    "{error}"
                );
                // bounded: the root waits at most SHORT × (tree depth + 1), not forever
                assert!(waited < HANG, "{waited:?}");
                println!("mpi_check: a hung rank: {error} (after {waited:?})");
            }
            continue;
        }
        let tree = rank
            .reduce_tree(mine.clone(), LIMIT, Distance::Cosine, TIMEOUT)
            .expect("tree");
        let gather = rank
            .gather_to_root(mine, LIMIT, Distance::Cosine, TIMEOUT)
            .expect("gather");
        if let (Some(tree), Some(gather), Some(whole)) = (tree, gather, &whole) {
            assert_eq!(tree, gather, "tree and gather merge alike (batch {number})");
            let tree = complete(tree, TIMEOUT).expect("every rank answered");
            answers.push((tree, search(whole, &received)));
        }
    }
    rank.barrier();
    println!("rank {}: {owned_count} points", rank.rank());
    if let [(exact, single_exact), (hnsw, single_hnsw), (again, _)] = &answers[..] {
        assert_eq!(
            hnsw.lists, again.lists,
            "the same batch after a hang, the same answer"
        );
        let bits = |partial: &Partial| -> Vec<Vec<(PointId, u32)>> {
            partial
                .lists
                .iter()
                .map(|list| list.iter().map(|h| (h.id, h.score.to_bits())).collect())
                .collect()
        };
        assert_eq!(bits(exact), bits(single_exact), "exact search identical");
        let (spread, single) = (recall(hnsw, exact), recall(single_hnsw, exact));
        assert!(spread >= single - 0.01, "recall {spread} against {single}");
        println!(
            "mpi_check: {} ranks, {QUERIES} queries: exact identical to one process; \
             HNSW ef {EF} recall {spread:.3} (one process {single:.3})",
            rank.size()
        );
    }
    serve_through_the_window(&rank, &database, whole.as_ref(), &vectors);
}

/// A collection made, written, searched and dropped through the job; made twice, every
/// rank refuses, each named.
fn admin_through_the_window(window: &Window<Job, Outcome>, database: &Database, ranks: usize) {
    let submit = |job: Job| window.submit(job).recv().expect("answered");
    let config = CollectionConfig {
        dim: 4,
        distance: Distance::Dot,
        shard_count: 2,
        storage: StorageConfig::default(),
    };
    let create = Job::Admin(Admin::Create {
        name: "made".to_string(),
        config,
        spaces: VectorSpaces::default(),
    });
    assert_eq!(submit(create.clone()), Outcome::Written(Ok(())));
    let single = database
        .create_collection("made_single", config)
        .expect("create");
    let points: Vec<Point> = (0..40_u64)
        .map(|id| Point {
            id: PointId::Number(id),
            vector: vec![id as f32, 1.0, -(id as f32) / 3.0, 0.5],
            payload: None,
            side: Vec::new(),
        })
        .collect();
    let operation = Operation::Upsert(points);
    let write = Job::Write {
        collection: "made".to_string(),
        wait: true,
        operation: operation.clone(),
    };
    assert_eq!(submit(write), Outcome::Written(Ok(())));
    apply(&single, operation, true).expect("one process");
    // one bad point (3 values for 4 dimensions): the whole write refused, nothing stored
    let mixed: Vec<Point> = (100..110_u64)
        .map(|id| Point {
            id: PointId::Number(id),
            vector: vec![9.0; if id == 107 { 3 } else { 4 }],
            payload: None,
            side: Vec::new(),
        })
        .collect();
    let bad = Job::Write {
        collection: "made".to_string(),
        wait: true,
        operation: Operation::Upsert(mixed),
    };
    let Outcome::Written(Err(error)) = submit(bad) else {
        panic!("a bad point was taken")
    };
    assert!(error.contains("107") && error.contains("dim"), "{error}");
    let query = Query {
        collection: "made".to_string(),
        limit: 5,
        ef: 0,
        vector: vec![1.0, 0.0, 2.0, 1.0],
    };
    let Outcome::Hits(Ok(hits)) = submit(Job::Search(query)) else {
        panic!("a search failed")
    };
    let request = SearchRequest {
        strategy: Strategy::Exact,
        ..SearchRequest::new(&[1.0, 0.0, 2.0, 1.0], 5)
    };
    let expected: Vec<PointId> = single
        .query(&request)
        .expect("search")
        .iter()
        .map(|hit| hit.id)
        .collect();
    assert_eq!(hits.iter().map(|hit| hit.id).collect::<Vec<_>>(), expected);
    // a second create: every rank has it, every rank refuses, each named
    let Outcome::Written(Err(error)) = submit(create) else {
        panic!("a second create was taken")
    };
    for rank in 0..ranks {
        assert!(error.contains(&format!("rank {rank}: ")), "{error}");
    }
    let drop_made = Job::Admin(Admin::Drop {
        name: "made".to_string(),
    });
    assert_eq!(submit(drop_made.clone()), Outcome::Written(Ok(())));
    // dropped everywhere: made again, then dropped again
    let recreate = Job::Admin(Admin::Create {
        name: "made".to_string(),
        config,
        spaces: VectorSpaces::default(),
    });
    assert_eq!(submit(recreate), Outcome::Written(Ok(())));
    assert_eq!(submit(drop_made), Outcome::Written(Ok(())));
}

/// Writes through the job, the same writes to the one-process collection: every point
/// a multiple of 7 deleted, 300 new ones upserted (a third replacing deleted ids).
fn write_through_the_window(window: &Window<Job, Outcome>, whole: &Collection) {
    let deleted: Vec<PointId> = (0..POINTS)
        .step_by(7)
        .map(|n| PointId::Number(n * 7 + 3))
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let added: Vec<Point> = (0..300_u64)
        .map(|n| Point {
            id: PointId::Number(if n % 3 == 0 {
                n * 49 + 3
            } else {
                1_000_000 + n
            }),
            vector: (0..DIM).map(|_| rng.gen_range(-1.0..1.0)).collect(),
            payload: None,
            side: Vec::new(),
        })
        .collect();
    for operation in [Operation::Delete(deleted), Operation::Upsert(added)] {
        let job = Job::Write {
            collection: "docs".to_string(),
            wait: true,
            operation: operation.clone(),
        };
        let outcome = window.submit(job).recv().expect("answered");
        assert_eq!(outcome, Outcome::Written(Ok(())));
        apply(whole, operation, true).expect("one process");
    }
}

/// The service: writes through the window, then 8 caller threads on rank 0 submit exact
/// queries, the main thread leads, the other ranks follow; every answer must equal one
/// process's after the same writes.
fn serve_through_the_window(
    rank: &Rank,
    database: &Arc<Database>,
    whole: Option<&Arc<Collection>>,
    vectors: &[f32],
) {
    let served = DatabaseLocal(Arc::clone(database));
    let Some(whole) = whole else {
        follow(rank, &served, TIMEOUT);
        return;
    };
    let window: Arc<Window<Job, Outcome>> = Arc::new(Window::new(Bounds::default()));
    let callers = {
        let (window, whole) = (Arc::clone(&window), Arc::clone(whole));
        let (database, ranks) = (Arc::clone(database), rank.size());
        let vectors = vectors.to_vec();
        std::thread::spawn(move || {
            write_through_the_window(&window, &whole);
            admin_through_the_window(&window, &database, ranks);
            let queries: Vec<_> = (0..8)
                .map(|caller| {
                    let (window, whole, vectors) =
                        (Arc::clone(&window), Arc::clone(&whole), vectors.clone());
                    std::thread::spawn(move || {
                        query_through_the_window(&window, &whole, &vectors, caller);
                    })
                })
                .collect();
            queries.into_iter().all(|caller| caller.join().is_ok())
        })
    };
    // closes the window whatever the callers did, so the ranks always stop
    let closer = {
        let window = Arc::clone(&window);
        std::thread::spawn(move || {
            let ok = callers.join().unwrap_or(false);
            window.close();
            ok
        })
    };
    lead(rank, &window, &served, TIMEOUT);
    assert!(
        closer.join().expect("closer"),
        "a write failed or an answer differed"
    );
    println!(
        "mpi_check: writes routed to their owners, a collection made, written, searched and \
         dropped on every rank, then {QUERIES} queries from 8 threads through the window: \
         identical to one process"
    );
}

fn query_through_the_window(
    window: &Window<Job, Outcome>,
    whole: &Collection,
    vectors: &[f32],
    caller: usize,
) {
    for i in (caller..QUERIES).step_by(8) {
        let vector = vectors[i * DIM..][..DIM].to_vec();
        let query = Query {
            collection: "docs".to_string(),
            limit: LIMIT,
            ef: 0,
            vector: vector.clone(),
        };
        let Outcome::Hits(answer) = window.submit(Job::Search(query)).recv().expect("answered")
        else {
            panic!("a search answered as a write");
        };
        let found: Vec<(PointId, u32)> = answer
            .expect("every rank answered")
            .iter()
            .map(|hit| (hit.id, hit.score.to_bits()))
            .collect();
        let request = SearchRequest {
            strategy: Strategy::Exact,
            ..SearchRequest::new(&vector, LIMIT)
        };
        let single: Vec<(PointId, u32)> = whole
            .query(&request)
            .expect("search")
            .iter()
            .map(|hit| (hit.id, hit.score.to_bits()))
            .collect();
        assert_eq!(found, single, "query {i}");
    }
}
