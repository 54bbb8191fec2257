//! Serving the job (feature `mpi`). Rank 0 drains the micro-batching window
//! ([`crate::window`]): writes first, in arrival order, each split by owner and sent to
//! the owning ranks, answered once every owner has acknowledged (after its fsync when the
//! caller waits); then searches, in batches — one per collection, limit, ef and width —
//! sent down the tree, searched on every rank, merged up the tree. The other ranks serve
//! both until rank 0 sends the stop batch (limit 0). A write is not atomic across ranks:
//! each owner applies its part or says why not, and the caller hears every refusal.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use sagitta_engine::codec::Operation;
use sagitta_engine::collection::peers::{Probe, SILENCE};
use sagitta_engine::Distance;

use crate::batch::QueryBatch;
pub use crate::jobs::{Answer, Job, Local, Outcome, Query};
use crate::probe::ProbeBatch;
use crate::topk::{Hit, Partial};
use crate::window::Window;
use crate::world::{complete, Rank, TAG_ACK, TAG_ADMIN, TAG_CALL, TAG_REPLY, TAG_STOP, TAG_WRITE};
use crate::writes::{
    decode_ack, decode_admin, encode_ack, encode_admin, split_by_owner, Admin, WriteRequest,
};

/// How long a rank that is not rank 0 waits for the next batch: as long as the job runs.
const IDLE: Duration = Duration::from_secs(365 * 24 * 3600);

/// Rank 0: answers the window's jobs until it is closed and drained, then stops the
/// other ranks.
pub fn lead(rank: &Rank, window: &Window<Job, Outcome>, local: &impl Local, timeout: Duration) {
    let (mut batches, mut writes) = (0, 0);
    while let Some(waiting) = window.next_batch() {
        let mut searches = Vec::new();
        let mut probes = Vec::new();
        for one in waiting {
            match one.job {
                Job::Write {
                    collection,
                    wait,
                    operation,
                } => {
                    writes += 1;
                    let written =
                        write(rank, local, (writes, &collection, wait), operation, timeout);
                    let _ = one.reply.send(Outcome::Written(written));
                }
                Job::Admin(admin) => {
                    writes += 1;
                    let done = everywhere(rank, local, writes, &admin, timeout);
                    let _ = one.reply.send(Outcome::Written(done));
                }
                Job::Ask(calls) => {
                    writes += 1;
                    let answers = ask(rank, writes, calls, timeout);
                    let _ = one.reply.send(Outcome::Answers(answers));
                }
                Job::Search(query) => searches.push((query, one.reply)),
                Job::Probe { collection, probe } => probes.push((collection, probe, one.reply)),
            }
        }
        for group in by_kind(searches) {
            batches += 1;
            search_batch(rank, local, batches, group, timeout);
        }
        for group in probe_groups(probes) {
            batches += 1;
            probe_batch(rank, local, batches, group, timeout);
        }
    }
    let stop = QueryBatch {
        number: batches + 1,
        collection: String::new(),
        limit: 0,
        ef: 0,
        dim: 1,
        vectors: Vec::new(),
    };
    rank.broadcast(stop.encode(), timeout);
    // and to each rank directly: one under a dead parent hears no stop from the tree
    for other in 1..rank.size() {
        rank.send(other, TAG_STOP, &[]);
    }
}

/// One batch of alike queries from rank 0: down the tree, searched, merged, answered.
fn search_batch(
    rank: &Rank,
    local: &impl Local,
    number: u64,
    group: Vec<Caller>,
    timeout: Duration,
) {
    let first = &group[0].0;
    if first.limit == 0 || first.vector.is_empty() {
        // nothing a rank could answer (callers validate first; this is the backstop)
        for (_, reply) in group {
            let _ = reply.send(Outcome::Hits(Err(
                "a query needs a vector and a limit".into()
            )));
        }
        return;
    }
    let batch = QueryBatch {
        number,
        collection: first.collection.clone(),
        limit: first.limit,
        ef: first.ef,
        dim: first.vector.len(),
        vectors: group
            .iter()
            .flat_map(|(query, _)| query.vector.iter().copied())
            .collect(),
    };
    rank.broadcast(batch.encode(), timeout);
    let answers = answer(rank, local, &batch, timeout);
    for ((_, reply), answer) in group.into_iter().zip(answers) {
        // a caller that gave up has dropped its receiver: nothing to do
        let _ = reply.send(Outcome::Hits(answer));
    }
}

/// Rank 0's calls: each sent to its rank, every answer awaited until `timeout`; a rank
/// that stays silent is named as such.
fn ask(
    rank: &Rank,
    number: u64,
    calls: Vec<(usize, Vec<u8>)>,
    timeout: Duration,
) -> Vec<Result<Vec<u8>, String>> {
    let mut ranks = Vec::with_capacity(calls.len());
    for (to, call) in calls {
        let mut message = number.to_le_bytes().to_vec();
        message.extend_from_slice(&call);
        rank.send(to, TAG_CALL, &message);
        ranks.push(to);
    }
    let deadline = Instant::now() + timeout;
    ranks
        .into_iter()
        .map(|from| {
            reply(rank, from, number, deadline).ok_or_else(|| {
                if rank.is_down(from) {
                    format!("rank {from} (down: it missed its last deadlines) {SILENCE}")
                } else {
                    format!("rank {from} (waited {timeout:?}) {SILENCE}")
                }
            })
        })
        .collect()
}

/// `from`'s answer to call `number` (older ones, arriving late, are dropped), or `None`
/// by `deadline`.
fn reply(rank: &Rank, from: usize, number: u64, deadline: Instant) -> Option<Vec<u8>> {
    while let Some(bytes) = rank.receive(from, TAG_REPLY, deadline) {
        if bytes.len() >= 8 && bytes[..8] == number.to_le_bytes() {
            return Some(bytes[8..].to_vec());
        }
    }
    None
}

/// Rank 0's write: each owner's part sent (its own applied here), then every owner's
/// acknowledgement awaited until `timeout`; the error names each owner that refused or
/// stayed silent.
fn write(
    rank: &Rank,
    local: &impl Local,
    (number, collection, wait): (u64, &str, bool),
    operation: Operation,
    timeout: Duration,
) -> Result<(), String> {
    local.check(collection, &operation)?;
    let mut sent = Vec::new();
    let mut own = None;
    for (owner, part) in split_by_owner(operation, rank.size())
        .into_iter()
        .enumerate()
    {
        let Some(operation) = part else { continue };
        if owner == rank.rank() {
            own = Some(operation);
            continue;
        }
        let request = WriteRequest {
            number,
            collection: collection.to_string(),
            wait,
            operation,
        };
        rank.send(owner, TAG_WRITE, &request.encode());
        sent.push(owner);
    }
    let mut errors = Vec::new();
    if let Some(operation) = own {
        if let Err(error) = local.apply(collection, operation, wait) {
            errors.push(format!("rank {}: {error}", rank.rank()));
        }
    }
    let silent = acknowledgements(rank, &sent, number, timeout, &mut errors);
    if !silent.is_empty() {
        errors.push(format!(
            "ranks {silent:?} did not acknowledge within {timeout:?}; their shards are unavailable"
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// Rank 0's change on every rank: sent to the others, made here, every acknowledgement
/// awaited until `timeout`; the error names each rank that refused or stayed silent.
fn everywhere(
    rank: &Rank,
    local: &impl Local,
    number: u64,
    admin: &Admin,
    timeout: Duration,
) -> Result<(), String> {
    let others: Vec<usize> = (0..rank.size())
        .filter(|&other| other != rank.rank())
        .collect();
    let bytes = encode_admin(number, admin);
    for &other in &others {
        rank.send(other, TAG_ADMIN, &bytes);
    }
    let mut errors = Vec::new();
    if let Err(error) = local.admin(admin) {
        errors.push(format!("rank {}: {error}", rank.rank()));
    }
    let silent = acknowledgements(rank, &others, number, timeout, &mut errors);
    if !silent.is_empty() {
        errors.push(format!(
            "ranks {silent:?} did not acknowledge within {timeout:?}"
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// Every one of `ranks`' acknowledgements of request `number`, awaited until `timeout`
/// from now: each refusal added to `errors` naming its rank; the silent ranks returned.
fn acknowledgements(
    rank: &Rank,
    ranks: &[usize],
    number: u64,
    timeout: Duration,
    errors: &mut Vec<String>,
) -> Vec<usize> {
    let deadline = Instant::now() + timeout;
    let mut silent = Vec::new();
    for &owner in ranks {
        match acknowledgement(rank, owner, number, deadline) {
            Some(Ok(())) => {}
            Some(Err(error)) => errors.push(format!("rank {owner}: {error}")),
            None => silent.push(owner),
        }
    }
    silent
}

/// `owner`'s acknowledgement of write `number` (older ones, arriving late, are dropped),
/// or `None` by `deadline`.
fn acknowledgement(
    rank: &Rank,
    owner: usize,
    number: u64,
    deadline: Instant,
) -> Option<Result<(), String>> {
    while let Some(bytes) = rank.receive(owner, TAG_ACK, deadline) {
        match decode_ack(&bytes) {
            Ok((acknowledged, result)) if acknowledged == number => return Some(result),
            Ok(_) => {}
            Err(error) => return Some(Err(format!("malformed acknowledgement: {error}"))),
        }
    }
    None
}

/// Every other rank: applies rank 0's writes and answers batches, in the order they
/// came, until the stop batch (or a malformed one).
pub fn follow(rank: &Rank, local: &impl Local, timeout: Duration) {
    let mut wanted = vec![(0, TAG_WRITE), (0, TAG_ADMIN), (0, TAG_CALL), (0, TAG_STOP)];
    wanted.extend(rank.batch_source());
    while let Some((_, tag, bytes)) = rank.receive_any(&wanted, Instant::now() + IDLE) {
        if tag == TAG_STOP {
            return;
        }
        if tag == TAG_CALL {
            let (number, call) = bytes.split_at(8.min(bytes.len()));
            let mut message = number.to_vec();
            message.extend_from_slice(&local.call(call));
            rank.send(0, TAG_REPLY, &message);
            continue;
        }
        if tag == TAG_WRITE {
            let (number, result) = match WriteRequest::decode(&bytes) {
                Ok(request) => (
                    request.number,
                    local.apply(&request.collection, request.operation, request.wait),
                ),
                Err(error) => (0, Err(format!("malformed write request: {error}"))),
            };
            rank.send(0, TAG_ACK, &encode_ack(number, &result));
            continue;
        }
        if tag == TAG_ADMIN {
            let (number, result) = match decode_admin(&bytes) {
                Ok((number, admin)) => (number, local.admin(&admin)),
                Err(error) => (0, Err(format!("malformed admin request: {error}"))),
            };
            rank.send(0, TAG_ACK, &encode_ack(number, &result));
            continue;
        }
        rank.forward_down(&bytes);
        if ProbeBatch::is_probe_batch(&bytes) {
            match ProbeBatch::decode(&bytes) {
                Ok(batch) => {
                    let _ = answer_probes(rank, local, &batch, timeout);
                }
                Err(_) => return,
            }
            continue;
        }
        let Ok(batch) = QueryBatch::decode(&bytes) else {
            return;
        };
        if batch.limit == 0 {
            return;
        }
        let _ = answer(rank, local, &batch, timeout);
    }
}

/// Searches `batch` here and merges up the tree; on rank 0, each query's answer. A rank
/// whose own search fails reports itself missing, so rank 0 names it.
fn answer(rank: &Rank, local: &impl Local, batch: &QueryBatch, timeout: Duration) -> Vec<Answer> {
    let (lists, distance) = match local.search(batch) {
        Ok((lists, distance)) => (Ok(lists), distance),
        Err(error) => (Err(error), Distance::Cosine),
    };
    let at = (batch.number, batch.len(), batch.limit);
    merge_up(rank, at, lists, distance, timeout)
}

/// Searches probe `batch` here and merges up the tree (closest distance first); on rank
/// 0, each probe's answer.
fn answer_probes(
    rank: &Rank,
    local: &impl Local,
    batch: &ProbeBatch,
    timeout: Duration,
) -> Vec<Answer> {
    let lists = local.probe(batch);
    let at = (batch.number, batch.probes.len(), batch.wanted);
    // engine distances: lower is closer for every metric, as Euclid's scores are
    merge_up(rank, at, lists, Distance::Euclid, timeout)
}

/// This rank's `lists` for batch `number` (of `len` queries, `limit` hits each) merged
/// up the tree; a rank whose own search failed reports itself missing, so rank 0 names
/// it. Rank 0 gets every query's answer; the others an empty list.
fn merge_up(
    rank: &Rank,
    (number, len, limit): (u64, usize, usize),
    lists: Result<Vec<Vec<Hit>>, String>,
    distance: Distance,
    timeout: Duration,
) -> Vec<Answer> {
    let mine = match lists {
        Ok(lists) => Partial {
            batch: number,
            lists,
            missing: Vec::new(),
        },
        Err(_) => Partial {
            batch: number,
            lists: vec![Vec::new(); len],
            missing: vec![rank.rank()],
        },
    };
    let merged = match rank.reduce_tree(mine, limit, distance, timeout) {
        Ok(Some(merged)) => complete(merged, timeout).map_err(|error| error.to_string()),
        Ok(None) => return Vec::new(),
        Err(error) => Err(error.to_string()),
    };
    match merged {
        Ok(merged) => merged.lists.into_iter().map(Ok).collect(),
        Err(error) => vec![Err(error); len],
    }
}

/// A probe of a collection and where its outcome goes.
type Prober = (String, Probe, mpsc::Sender<Outcome>);

/// Probes grouped by what a batch shares (collection, hits wanted), groups in order of
/// their first probe, probes in arrival order.
fn probe_groups(probes: Vec<Prober>) -> Vec<Vec<Prober>> {
    let mut groups: Vec<Vec<Prober>> = Vec::new();
    for one in probes {
        let alike =
            |group: &&mut Vec<Prober>| group[0].0 == one.0 && group[0].1.wanted == one.1.wanted;
        match groups.iter_mut().find(alike) {
            Some(group) => group.push(one),
            None => groups.push(vec![one]),
        }
    }
    groups
}

/// One batch of probes from rank 0: down the tree, searched, merged, answered.
fn probe_batch(
    rank: &Rank,
    local: &impl Local,
    number: u64,
    group: Vec<Prober>,
    timeout: Duration,
) {
    let mut replies = Vec::with_capacity(group.len());
    let mut probes = Vec::with_capacity(group.len());
    let collection = group[0].0.clone();
    for (_, probe, reply) in group {
        probes.push(probe);
        replies.push(reply);
    }
    let batch = ProbeBatch {
        number,
        collection,
        wanted: probes[0].wanted,
        probes,
    };
    rank.broadcast(batch.encode(), timeout);
    let answers = answer_probes(rank, local, &batch, timeout);
    for (reply, answer) in replies.into_iter().zip(answers) {
        let _ = reply.send(Outcome::Hits(answer));
    }
}

/// A query and where its outcome goes.
type Caller = (Query, mpsc::Sender<Outcome>);

/// Queries grouped by what a batch shares (collection, limit, ef, width), groups in
/// order of their first query, queries in arrival order.
fn by_kind(callers: Vec<Caller>) -> Vec<Vec<Caller>> {
    let key = |q: &Query| (q.collection.clone(), q.limit, q.ef, q.vector.len());
    let mut groups: Vec<Vec<Caller>> = Vec::new();
    for one in callers {
        match groups
            .iter_mut()
            .find(|group| key(&group[0].0) == key(&one.0))
        {
            Some(group) => group.push(one),
            None => groups.push(vec![one]),
        }
    }
    groups
}
