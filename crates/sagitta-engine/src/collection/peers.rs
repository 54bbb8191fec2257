//! A collection spread over the ranks of a scale-out job (`sagitta-cluster`). Every rank
//! keeps its own copy of the collection holding the points it owns; rank 0's copy is
//! *linked* to the others through [`Peers`], and its public methods then answer for the
//! whole job: reads combine this rank's points with the other ranks' answers, writes go
//! to each point's owner, payload indexes to every rank. The other ranks answer rank 0's
//! [`PeerCall`]s with their unlinked copies ([`Collection::answer`]).
//!
//! Searches go out as [`Probe`]s, prepared on rank 0 (checked, normalized, sparse weights
//! multiplied by the job-wide IDF) so every rank scores exactly as one process would; the
//! job returns each probe's best ids and distances over every rank, and rank 0 then
//! fetches the points of only the hits it keeps.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::codec::Operation;
use crate::error::{EngineError, Result};
use crate::filter::Filter;
use crate::multi::MultiVector;
use crate::payload_index::FieldType;
use crate::point::{Distance, Point, PointId};
use crate::query::{ShardHit, SideQuery, Strategy};
use crate::shard::Shard;
use crate::sparse::SparseVector;

use super::Collection;

/// The other ranks of the job, as rank 0 reaches them.
pub trait Peers: Send + Sync {
    /// Ranks in the job, this one (rank 0) included.
    fn ranks(&self) -> usize;
    /// The rank owning point `id`.
    fn owner(&self, id: &PointId) -> usize;
    /// Each `(rank, call)` asked of its rank (never 0), all at once; each rank's answer
    /// in the same order: its refusal, or that it did not answer in time, as an error
    /// naming it.
    fn ask(&self, calls: Vec<(usize, PeerCall)>) -> Vec<std::result::Result<PeerAnswer, String>>;
    /// Each probe's best hits over every rank of the job, this one's included (searched
    /// with [`Collection::probe_here`]): `(id, distance)`, closest first then lower id, at
    /// most `probe.wanted` of them.
    fn probe(
        &self,
        collection: &str,
        probes: Vec<Probe>,
    ) -> std::result::Result<Vec<Vec<(PointId, f32)>>, String>;
}

/// What rank 0 asks another rank (about its copy of `collection`, or its database).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PeerCall {
    /// The live points among `ids`.
    Get {
        collection: String,
        ids: Vec<PointId>,
    },
    /// How many live points pass `filter`.
    Count {
        collection: String,
        filter: Option<Filter>,
    },
    /// The first `limit` live points passing `filter` from id `offset` on, in id order
    /// (of shard `shard` alone when given: shard i of a job is shard i of every rank).
    Scroll {
        collection: String,
        offset: Option<PointId>,
        limit: usize,
        filter: Option<Filter>,
        shard: Option<usize>,
    },
    /// The ids of the live points passing `filter` (every one without), of shard `shard`
    /// alone when given.
    Ids {
        collection: String,
        filter: Option<Filter>,
        shard: Option<usize>,
    },
    /// Every write acknowledged so far made durable ([`Collection::flush`]).
    Flush { collection: String },
    /// Every live point.
    Points { collection: String },
    /// For each of `indices`, how many live points have it in sparse space `space`; and
    /// how many live points there are.
    Frequencies {
        collection: String,
        space: usize,
        indices: Vec<u32>,
    },
    /// The rank's part of a write, its points as rank 0 prepared them (kept bit for bit);
    /// with `wait`, answered after the rank's logs are fsynced.
    Write {
        collection: String,
        operation: Operation,
        wait: bool,
    },
    /// A payload index made (`Some`) or dropped (`None`).
    Index {
        collection: String,
        field: String,
        kind: Option<FieldType>,
    },
    /// The collection's graph settings changed ([`Collection::set_graph`]).
    Graph {
        collection: String,
        graph: crate::graph::GraphConfig,
    },
    /// A collection made with this configuration
    /// ([`super::CollectionConfig::to_bytes`]).
    Create { name: String, config: Vec<u8> },
    /// A collection dropped (done already when the rank has none of that name).
    Drop { name: String },
}

impl PeerCall {
    /// The collection the call is about (the one created or dropped for those).
    pub fn collection(&self) -> &str {
        match self {
            PeerCall::Get { collection, .. }
            | PeerCall::Count { collection, .. }
            | PeerCall::Scroll { collection, .. }
            | PeerCall::Ids { collection, .. }
            | PeerCall::Points { collection }
            | PeerCall::Flush { collection }
            | PeerCall::Frequencies { collection, .. }
            | PeerCall::Write { collection, .. }
            | PeerCall::Index { collection, .. }
            | PeerCall::Graph { collection, .. } => collection,
            PeerCall::Create { name, .. } | PeerCall::Drop { name } => name,
        }
    }
}

/// The other ranks of a job, as [`crate::DatabaseOptions`] hands them to rank 0's
/// database.
#[derive(Clone)]
pub struct Linked(pub Arc<dyn Peers>);

impl std::fmt::Debug for Linked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Linked({} ranks)", self.0.ranks())
    }
}

/// A rank's answer to a [`PeerCall`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PeerAnswer {
    Points(Vec<Point>),
    Count(usize),
    Ids(Vec<PointId>),
    Frequencies { counts: Vec<usize>, total: usize },
    Done,
}

/// One search, ready for every rank.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    pub kind: ProbeKind,
    /// Hits wanted from each rank (the request's offset + limit).
    pub wanted: usize,
    /// The filter as rank 0 bound it ([`Collection::bind_filter`]).
    pub filter: Option<Filter>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ProbeKind {
    /// A dense query (unit length for Cosine) in the vector `using` names.
    Dense {
        query: Vec<f32>,
        using: Option<String>,
        strategy: Strategy,
    },
    /// A sparse query, its weights final (IDF applied on rank 0), in side space `space`.
    Sparse { query: SparseVector, space: usize },
    /// A multivector query (rows unit length for Cosine) in side space `space`.
    Multi {
        query: MultiVector,
        space: usize,
        distance: Distance,
    },
}

/// Rank 0's link to the other ranks, and the name they know the collection by.
#[derive(Clone)]
pub(super) struct PeerLink {
    pub peers: Arc<dyn Peers>,
    pub name: String,
}

impl PeerLink {
    /// `call(rank)` asked of every other rank.
    pub fn ask_all(&self, call: impl Fn() -> PeerCall) -> Result<Vec<PeerAnswer>> {
        let calls = (1..self.peers.ranks()).map(|rank| (rank, call())).collect();
        self.ask(calls)
    }

    pub fn ask(&self, calls: Vec<(usize, PeerCall)>) -> Result<Vec<PeerAnswer>> {
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        every_answer(self.peers.ask(calls))
    }

    /// `items` split by the rank owning each (its id given by `id`).
    pub fn by_owner<T>(&self, items: Vec<T>, id: impl Fn(&T) -> PointId) -> Vec<Vec<T>> {
        let mut owned: Vec<Vec<T>> = (0..self.peers.ranks()).map(|_| Vec::new()).collect();
        for item in items {
            owned[self.peers.owner(&id(&item))].push(item);
        }
        owned
    }
}

/// Every rank's answer, or one error naming each rank that failed.
pub(crate) fn every_answer(
    answers: Vec<std::result::Result<PeerAnswer, String>>,
) -> Result<Vec<PeerAnswer>> {
    let mut failures = Vec::new();
    let mut answered = Vec::with_capacity(answers.len());
    for answer in answers {
        match answer {
            Ok(answer) => answered.push(answer),
            Err(reason) => failures.push(reason),
        }
    }
    if failures.is_empty() {
        Ok(answered)
    } else {
        Err(unavailable(failures.join("; ")))
    }
}

/// Whether a rank's failure is that it did not answer in time (it may have done what it
/// was asked): the transport's words for it end so.
pub(crate) fn is_silence(reason: &str) -> bool {
    reason.ends_with(SILENCE)
}

/// How the transport ends the reason of a rank that did not answer in time.
pub const SILENCE: &str = "did not answer in time; its shards are unavailable";

/// A failure of the other ranks as the engine reports it.
pub(super) fn unavailable(reason: String) -> EngineError {
    EngineError::Unavailable { reason }
}

/// An answer of another kind than the call asks for.
pub(super) fn unexpected(answer: &PeerAnswer) -> EngineError {
    unavailable(format!("a rank answered out of turn: {answer:?}"))
}

impl Collection {
    /// This collection as rank 0 of a scale-out job holds it: its public methods answer
    /// for every rank's points, which `peers` reaches, knowing the collection as `name`.
    #[must_use]
    pub fn linked(mut self, peers: Arc<dyn Peers>, name: &str) -> Collection {
        self.link = Some(PeerLink {
            peers,
            name: name.to_string(),
        });
        self
    }

    /// Whether this collection answers for the other ranks of a job too.
    pub fn is_linked(&self) -> bool {
        self.link.is_some()
    }

    /// `probe`'s best hits among this rank's points alone: `(id, distance)`, closest
    /// first then lower id, at most `probe.wanted`.
    pub fn probe_here(&self, probe: &Probe) -> Result<Vec<(PointId, f32)>> {
        let mut found = self.probe_batch_here(std::slice::from_ref(probe))?;
        Ok(found.pop().unwrap_or_default())
    }

    /// [`Collection::probe_here`] of every probe: each shard's node pool searches its
    /// shard for every probe, in chunks spread over the pool's threads (as
    /// `query_batch` does), and each probe's hits are merged over the shards.
    pub fn probe_batch_here(&self, probes: &[Probe]) -> Result<Vec<Vec<(PointId, f32)>>> {
        let every: Vec<usize> = (0..probes.len()).collect();
        let hits = self.in_every_shard(probes.len(), &every, |shard, at| {
            self.probe_shard(shard, &probes[at])
        })?;
        Ok(hits
            .into_iter()
            .zip(probes)
            .map(|(hits, probe)| {
                let mut found: Vec<(PointId, f32)> = hits
                    .into_iter()
                    .map(|hit| (hit.point.id, hit.distance))
                    .collect();
                found.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
                found.truncate(probe.wanted);
                found
            })
            .collect())
    }

    /// `probe`'s best hits in `shard`.
    fn probe_shard(&self, shard: &Shard, probe: &Probe) -> Result<Vec<ShardHit>> {
        let (filter, wanted) = (probe.filter.as_ref(), probe.wanted);
        match &probe.kind {
            ProbeKind::Dense {
                query,
                using,
                strategy,
            } => {
                let space = self.space_for(using.as_deref())?;
                shard.search(query, wanted, filter, *strategy, space)
            }
            ProbeKind::Sparse { query, space } => {
                shard.search_side(SideQuery::Sparse(query), *space, wanted, filter)
            }
            ProbeKind::Multi {
                query,
                space,
                distance,
            } => shard.search_side(SideQuery::Multi(query, *distance), *space, wanted, filter),
        }
    }

    /// Answers rank 0's `call` about this rank's points alone (an unlinked copy).
    pub fn answer(
        &self,
        fs: &dyn sagitta_storage::fs::FileSystem,
        call: PeerCall,
    ) -> Result<PeerAnswer> {
        Ok(match call {
            PeerCall::Get { ids, .. } => {
                let mut points = Vec::with_capacity(ids.len());
                for id in &ids {
                    points.extend(self.get_here(id)?);
                }
                PeerAnswer::Points(points)
            }
            PeerCall::Count { filter, .. } => PeerAnswer::Count(self.count_here(filter.as_ref())),
            PeerCall::Scroll {
                offset,
                limit,
                filter,
                shard,
                ..
            } => {
                let shards = self.some_shards(shard)?;
                let (points, _) = self.scroll_shards(shards, offset, limit, filter.as_ref())?;
                PeerAnswer::Points(points)
            }
            PeerCall::Ids { filter, shard, .. } => {
                PeerAnswer::Ids(self.ids_here(self.some_shards(shard)?, filter.as_ref()))
            }
            PeerCall::Flush { .. } => {
                self.flush()?;
                PeerAnswer::Done
            }
            PeerCall::Points { .. } => PeerAnswer::Points(self.points_here()?),
            PeerCall::Frequencies { space, indices, .. } => {
                let mut counts = vec![0; indices.len()];
                for shard in &self.shards {
                    shard.sparse_frequencies(space, &indices, &mut counts);
                }
                let (indexed, buffered) = self.point_counts();
                PeerAnswer::Frequencies {
                    counts,
                    total: indexed + buffered,
                }
            }
            PeerCall::Write {
                operation, wait, ..
            } => {
                self.apply_here(operation, wait)?;
                PeerAnswer::Done
            }
            PeerCall::Index { field, kind, .. } => {
                match kind {
                    Some(kind) => self.create_payload_index(fs, &field, kind)?,
                    None => self.delete_payload_index(fs, &field)?,
                }
                PeerAnswer::Done
            }
            PeerCall::Graph { graph, .. } => {
                self.set_graph(fs, graph)?;
                PeerAnswer::Done
            }
            PeerCall::Create { .. } | PeerCall::Drop { .. } => {
                return Err(unavailable(
                    "a collection cannot create or drop a collection".into(),
                ))
            }
        })
    }

    /// The live points among `ids` (missing ones left out, order kept per owner), over
    /// every rank when linked.
    pub fn get_many(&self, ids: &[PointId]) -> Result<HashMap<PointId, Point>> {
        let mut found = HashMap::with_capacity(ids.len());
        let Some(link) = &self.link else {
            for id in ids {
                if let Some(point) = self.get_here(id)? {
                    found.insert(*id, point);
                }
            }
            return Ok(found);
        };
        let mut owned = link.by_owner(ids.to_vec(), |id| *id);
        for id in std::mem::take(&mut owned[0]) {
            if let Some(point) = self.get_here(&id)? {
                found.insert(id, point);
            }
        }
        let calls = owned
            .into_iter()
            .enumerate()
            .filter(|(_, ids)| !ids.is_empty())
            .map(|(rank, ids)| {
                let collection = link.name.clone();
                (rank, PeerCall::Get { collection, ids })
            })
            .collect();
        for answer in link.ask(calls)? {
            let PeerAnswer::Points(points) = answer else {
                return Err(unexpected(&answer));
            };
            found.extend(points.into_iter().map(|point| (point.id, point)));
        }
        Ok(found)
    }

    /// Applies `operation` as this rank's part of a write: points kept as rank 0 prepared
    /// them (validated again, not normalized again).
    fn apply_here(&self, operation: Operation, wait: bool) -> Result<()> {
        match operation {
            Operation::Upsert(points) => {
                for point in &points {
                    self.config.prepare(&self.spaces, point.clone())?;
                }
                self.write_points(points, wait)
            }
            other => {
                let ids = other.ids().unwrap_or_default();
                self.write_by_id_here(ids, wait, |ids| other.with_ids(ids))
            }
        }
    }

    /// Writes `operation` (one id-addressed kind, or an upsert of prepared points) to the
    /// ranks owning its points: this rank's part here, the others' at their owners, all at
    /// once; returns when every part is done (durable with `wait`).
    pub(super) fn write_linked(
        &self,
        link: &PeerLink,
        operation: Operation,
        wait: bool,
    ) -> Result<()> {
        let parts = operation.split_by(link.peers.ranks(), |id| link.peers.owner(id));
        let mut calls = Vec::new();
        let mut own = None;
        for (rank, part) in parts.into_iter().enumerate() {
            match part {
                Some(operation) if rank == 0 => own = Some(operation),
                Some(operation) => calls.push((
                    rank,
                    PeerCall::Write {
                        collection: link.name.clone(),
                        operation,
                        wait,
                    },
                )),
                None => {}
            }
        }
        std::thread::scope(|scope| {
            let remote = scope.spawn(|| link.ask(calls));
            let here = own.map_or(Ok(()), |operation| self.apply_here(operation, wait));
            let remote = remote.join().expect("asking the ranks does not panic");
            here.and(remote.map(|_| ()))
        })
    }
}
