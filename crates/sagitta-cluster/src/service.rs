//! Serving queries across the job (feature `mpi`). Rank 0 drains the micro-batching
//! window ([`crate::window`]) into batches — one per collection, limit, ef and width, in
//! arrival order — sends each down the tree, searches the points it owns, merges the
//! partial lists up the tree and answers every caller; the other ranks answer batches
//! until rank 0 sends the stop batch (limit 0).

use std::time::Duration;

use sagitta_engine::Distance;

use crate::batch::QueryBatch;
use crate::topk::{Hit, Partial};
use crate::window::{Waiting, Window};
use crate::world::{complete, Rank};

/// One query as a caller submits it to the window.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    pub collection: String,
    pub limit: usize,
    /// HNSW beam; 0 searches exactly.
    pub ef: usize,
    pub vector: Vec<f32>,
}

/// A query's merged best hits, or why the job could not answer it.
pub type Answer = Result<Vec<Hit>, String>;

/// What a rank searches: the points it owns.
pub trait Searcher {
    /// This rank's best `batch.limit` hits for each query of `batch`, with the
    /// collection's distance (which orders the merge).
    fn search(&self, batch: &QueryBatch) -> Result<(Vec<Vec<Hit>>, Distance), String>;
}

/// How long a rank that is not rank 0 waits for the next batch: as long as the job runs.
const IDLE: Duration = Duration::from_secs(365 * 24 * 3600);

/// Rank 0: answers the window's queries until it is closed and drained, then stops the
/// other ranks.
pub fn lead(
    rank: &Rank,
    window: &Window<Query, Answer>,
    searcher: &impl Searcher,
    timeout: Duration,
) {
    let mut number = 0;
    while let Some(waiting) = window.next_batch() {
        for group in by_kind(waiting) {
            let first = &group[0].query;
            if first.limit == 0 || first.vector.is_empty() {
                // nothing a rank could answer (callers validate first; this is the backstop)
                for waiting in group {
                    let _ = waiting
                        .reply
                        .send(Err("a query needs a vector and a limit".into()));
                }
                continue;
            }
            number += 1;
            let batch = QueryBatch {
                number,
                collection: first.collection.clone(),
                limit: first.limit,
                ef: first.ef,
                dim: first.vector.len(),
                vectors: group
                    .iter()
                    .flat_map(|w| w.query.vector.iter().copied())
                    .collect(),
            };
            rank.broadcast(batch.encode(), timeout);
            let answers = answer(rank, searcher, &batch, timeout);
            for (waiting, answer) in group.into_iter().zip(answers) {
                // a caller that gave up has dropped its receiver: nothing to do
                let _ = waiting.reply.send(answer);
            }
        }
    }
    let stop = QueryBatch {
        number: number + 1,
        collection: String::new(),
        limit: 0,
        ef: 0,
        dim: 1,
        vectors: Vec::new(),
    };
    rank.broadcast(stop.encode(), timeout);
}

/// Every other rank: answers batches until the stop batch (or a malformed one).
pub fn follow(rank: &Rank, searcher: &impl Searcher, timeout: Duration) {
    while let Some(bytes) = rank.broadcast(Vec::new(), IDLE) {
        let Ok(batch) = QueryBatch::decode(&bytes) else {
            return;
        };
        if batch.limit == 0 {
            return;
        }
        let _ = answer(rank, searcher, &batch, timeout);
    }
}

/// Searches `batch` here and merges up the tree; on rank 0, each query's answer. A rank
/// whose own search fails reports itself missing, so rank 0 names it.
fn answer(
    rank: &Rank,
    searcher: &impl Searcher,
    batch: &QueryBatch,
    timeout: Duration,
) -> Vec<Answer> {
    let (mine, distance) = match searcher.search(batch) {
        Ok((lists, distance)) => (
            Partial {
                batch: batch.number,
                lists,
                missing: Vec::new(),
            },
            distance,
        ),
        Err(_) => {
            let lists = vec![Vec::new(); batch.len()];
            (
                Partial {
                    batch: batch.number,
                    lists,
                    missing: vec![rank.rank()],
                },
                Distance::Cosine,
            )
        }
    };
    let merged = match rank.reduce_tree(mine, batch.limit, distance, timeout) {
        Ok(Some(merged)) => complete(merged, timeout).map_err(|error| error.to_string()),
        Ok(None) => return Vec::new(),
        Err(error) => Err(error.to_string()),
    };
    match merged {
        Ok(merged) => merged.lists.into_iter().map(Ok).collect(),
        Err(error) => vec![Err(error); batch.len()],
    }
}

/// The window's queries grouped by what a batch shares (collection, limit, ef, width),
/// groups in order of their first query, queries in arrival order.
fn by_kind(waiting: Vec<Waiting<Query, Answer>>) -> Vec<Vec<Waiting<Query, Answer>>> {
    let mut groups: Vec<Vec<Waiting<Query, Answer>>> = Vec::new();
    for one in waiting {
        let key = |q: &Query| (q.collection.clone(), q.limit, q.ef, q.vector.len());
        match groups
            .iter_mut()
            .find(|group| key(&group[0].query) == key(&one.query))
        {
            Some(group) => group.push(one),
            None => groups.push(vec![one]),
        }
    }
    groups
}
