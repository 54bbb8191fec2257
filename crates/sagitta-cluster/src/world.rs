//! The MPI transport (feature `mpi`): this process's rank in the job, the broadcast of a
//! query batch, and the reduction of partial top-k lists up the binomial tree — or, as the
//! baseline the benchmark compares it with, a plain gather to rank 0.
//!
//! Every MPI call is made from the thread that initialised MPI (`Threading::Funneled`).
//! Nothing blocks inside MPI: sends are immediate (`MPI_Isend`) and, while one is in
//! flight, every message that arrives is taken in (`MPI_Improbe` + matched receive) into
//! a mailbox, so two ranks sending each other large (rendezvous) messages never wait on
//! each other; receives look in the mailbox against a deadline, so a rank that hangs makes
//! its parent give up with the ranks it did not hear from, and a late answer is dropped.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use mpi::point_to_point::MatchedReceiveVec;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, Destination, Source};
use sagitta_engine::Distance;

use crate::topk::Partial;
use crate::tree;

/// A query batch down the tree, partial lists up it, and (the baseline) straight to rank 0.
const TAG_BATCH: i32 = 10;
const TAG_REDUCE: i32 = 11;
const TAG_GATHER: i32 = 12;
/// A write request from rank 0 to an owner, and the owner's acknowledgement.
pub const TAG_WRITE: i32 = 13;
pub const TAG_ACK: i32 = 14;
/// A change every rank makes (rank 0 to each), acknowledged with `TAG_ACK`.
pub const TAG_ADMIN: i32 = 15;
/// A linked collection's call from rank 0 to one rank, and that rank's answer.
pub const TAG_CALL: i32 = 16;
pub const TAG_REPLY: i32 = 17;
/// Rank 0's stop, sent to every rank directly (a rank whose tree parent died would never
/// get the stop batch down the tree).
pub const TAG_STOP: i32 = 18;

/// Bytes of the buffer MPI copies buffered sends into (`MPI_Buffer_attach`; pages are
/// touched only as messages use them). A buffered send (`MPI_Bsend`) completes once
/// copied there, whether or not the receiver ever takes the message in, so a dead rank
/// cannot block the rank sending to it — an ordinary send of a message over the eager
/// limit (4 KiB over shared memory) never completes when its receiver is dead.
const SEND_BUFFER: usize = 256 << 20;

/// Largest message sent buffered; larger ones (a big write or answer) are sent ordinarily.
const BUFFERED_MAX: usize = 32 << 20;

/// Deadlines a rank misses in a row before it counts as down.
const MISSES_TO_DOWN: u32 = 3;

/// How long a rank that is down is skipped (nothing sent to it, nothing awaited from
/// it) before it gets another chance; anything it sends brings it back at once.
pub const DOWN_FOR: Duration = Duration::from_secs(30);

/// What went wrong between ranks.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("MPI could not be initialised (already initialised, or no MPI runtime)")]
    Init,
    #[error("ranks {ranks:?} did not answer within {waited:?}; their shards are unavailable")]
    Unavailable { ranks: Vec<usize>, waited: Duration },
    #[error("rank {rank} sent a malformed message: {reason}")]
    Wire { rank: usize, reason: String },
}

/// What this rank has sent and merged since [`Rank::take_traffic`] last asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    pub bytes_sent: u64,
    pub messages_sent: u64,
    /// Partial lists decoded and merged into this rank's own.
    pub lists_merged: u64,
    /// Time spent decoding and merging them (this rank's CPU for the reduction).
    pub merge_time: Duration,
}

/// This process's place in the job.
pub struct Rank {
    world: SimpleCommunicator,
    rank: usize,
    size: usize,
    /// Messages taken in and not yet asked for: (source rank, tag, bytes), oldest first.
    mailbox: RefCell<VecDeque<(usize, i32, Vec<u8>)>>,
    /// Ranks that missed deadlines: how many in a row, and when the last was missed.
    misses: RefCell<HashMap<usize, (u32, Instant)>>,
    traffic: Cell<Traffic>,
    /// Finalises MPI when dropped (see `Drop for Rank`).
    universe: Option<mpi::environment::Universe>,
}

impl Rank {
    /// Initialises MPI (once per process).
    pub fn init() -> Result<Rank, ClusterError> {
        let (mut universe, _) =
            mpi::initialize_with_threading(mpi::Threading::Funneled).ok_or(ClusterError::Init)?;
        universe.set_buffer_size(SEND_BUFFER);
        let world = universe.world();
        let rank = usize::try_from(world.rank()).map_err(|_| ClusterError::Init)?;
        let size = usize::try_from(world.size()).map_err(|_| ClusterError::Init)?;
        Ok(Rank {
            world,
            rank,
            size,
            mailbox: RefCell::default(),
            misses: RefCell::default(),
            traffic: Cell::default(),
            universe: Some(universe),
        })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// What this rank sent and merged since the last call.
    pub fn take_traffic(&self) -> Traffic {
        self.traffic.take()
    }

    /// The ranks where `ok` is false (each rank calls this with its own; it waits for
    /// all), ascending.
    pub fn failed(&self, ok: bool) -> Vec<usize> {
        use mpi::collective::CommunicatorCollectives;
        let mine = u8::from(ok);
        let mut every = vec![0u8; self.size];
        self.world.all_gather_into(&mine, &mut every[..]);
        (0..self.size).filter(|&rank| every[rank] == 0).collect()
    }

    /// Waits until every rank has called this.
    pub fn barrier(&self) {
        mpi::collective::CommunicatorCollectives::barrier(&self.world);
    }

    /// Rank 0's `bytes` on every rank (what other ranks pass is ignored), sent down the
    /// binomial tree (each rank forwards to its children, largest subtree first). A rank
    /// that hears nothing from its parent within `timeout` gets `None`.
    pub fn broadcast(&self, bytes: Vec<u8>, timeout: Duration) -> Option<Vec<u8>> {
        let bytes = match tree::role(self.rank, self.size).parent {
            None => bytes,
            Some(parent) => self.receive(parent, TAG_BATCH, Instant::now() + timeout)?,
        };
        self.forward_down(&bytes);
        Some(bytes)
    }

    /// Sends a broadcast's `bytes` on to this rank's children in the tree.
    pub fn forward_down(&self, bytes: &[u8]) {
        for &child in tree::role(self.rank, self.size).children.iter().rev() {
            self.send(child, TAG_BATCH, bytes);
        }
    }

    /// The tree parent's broadcast tag and rank (`None` on rank 0), for
    /// [`Rank::receive_any`] beside other messages.
    pub fn batch_source(&self) -> Option<(usize, i32)> {
        tree::role(self.rank, self.size)
            .parent
            .map(|parent| (parent, TAG_BATCH))
    }

    /// Merges every rank's `mine` up the binomial tree, keeping each query's best `limit`:
    /// rank 0 returns the whole job's lists, other ranks `None` once they have passed
    /// theirs up. A child that has not answered batch `mine.batch` by its deadline —
    /// `timeout` × (the child's height + 1) after this call began, so a parent outwaits
    /// its children's own waits — is left out, and its subtree's ranks are listed in
    /// `missing`; its late answer is dropped when it arrives.
    pub fn reduce_tree(
        &self,
        mut mine: Partial,
        limit: usize,
        distance: Distance,
        timeout: Duration,
    ) -> Result<Option<Partial>, ClusterError> {
        let started = Instant::now();
        let role = tree::role(self.rank, self.size);
        for child in role.children {
            let height = tree::role(child, self.size).children.len();
            let deadline = started + timeout * u32::try_from(height + 1).unwrap_or(u32::MAX);
            let into = (&mut mine, limit, distance);
            if !self.receive_into(into, child, TAG_REDUCE, deadline)? {
                mine.missing.extend(subtree(child, self.size));
                mine.missing.sort_unstable();
            }
        }
        match role.parent {
            Some(parent) => {
                self.send(parent, TAG_REDUCE, &mine.encode());
                Ok(None)
            }
            None => Ok(Some(mine)),
        }
    }

    /// The baseline: every rank sends its lists straight to rank 0, which merges all
    /// `size - 1` of them itself (a rank silent after `timeout` is listed in `missing`).
    pub fn gather_to_root(
        &self,
        mut mine: Partial,
        limit: usize,
        distance: Distance,
        timeout: Duration,
    ) -> Result<Option<Partial>, ClusterError> {
        if self.rank != 0 {
            self.send(0, TAG_GATHER, &mine.encode());
            return Ok(None);
        }
        let deadline = Instant::now() + timeout;
        for rank in 1..self.size {
            if !self.receive_into((&mut mine, limit, distance), rank, TAG_GATHER, deadline)? {
                mine.missing.push(rank);
            }
        }
        Ok(Some(mine))
    }

    /// Merges `from`'s answer to the same batch as `mine` into it (keeping `limit` per
    /// query under `distance`); answers to earlier batches, arriving late, are dropped.
    /// `false` if none has come by `deadline`.
    fn receive_into(
        &self,
        (mine, limit, distance): (&mut Partial, usize, Distance),
        from: usize,
        tag: i32,
        deadline: Instant,
    ) -> Result<bool, ClusterError> {
        while let Some(bytes) = self.receive(from, tag, deadline) {
            let started = Instant::now();
            let theirs = Partial::decode(&bytes).map_err(|error| ClusterError::Wire {
                rank: from,
                reason: error.to_string(),
            })?;
            if theirs.batch != mine.batch {
                continue;
            }
            mine.merge(theirs, limit, distance);
            let mut traffic = self.traffic.get();
            traffic.lists_merged += 1;
            traffic.merge_time += started.elapsed();
            self.traffic.set(traffic);
            return Ok(true);
        }
        Ok(false)
    }

    /// Whether `rank` is down: it missed [`MISSES_TO_DOWN`] deadlines in a row, the last
    /// less than [`DOWN_FOR`] ago, and has sent nothing since.
    pub fn is_down(&self, rank: usize) -> bool {
        self.misses
            .borrow()
            .get(&rank)
            .is_some_and(|(count, last)| *count >= MISSES_TO_DOWN && last.elapsed() < DOWN_FOR)
    }

    /// Notes that `rank` missed a deadline.
    fn missed(&self, rank: usize) {
        let mut misses = self.misses.borrow_mut();
        let entry = misses.entry(rank).or_insert((0, Instant::now()));
        *entry = (entry.0 + 1, Instant::now());
    }

    /// Sends `bytes` to `to`: buffered (returns once copied) up to [`BUFFERED_MAX`],
    /// else taking in whatever arrives until the send has completed; nothing is sent to a
    /// rank that is down.
    pub fn send(&self, to: usize, tag: i32, bytes: &[u8]) {
        // late answers first: they bring a rank that was down back
        self.take_in();
        if self.is_down(to) {
            return;
        }
        let mut traffic = self.traffic.get();
        traffic.bytes_sent += bytes.len() as u64;
        traffic.messages_sent += 1;
        self.traffic.set(traffic);
        let destination = self.world.process_at_rank(as_mpi(to));
        if bytes.len() <= BUFFERED_MAX {
            destination.buffered_send_with_tag(bytes, tag);
            return;
        }
        mpi::request::scope(|scope| {
            let mut request = destination.immediate_send_with_tag(scope, bytes, tag);
            let mut idle = Idle::default();
            loop {
                match request.test() {
                    Ok(_) => break,
                    Err(pending) => request = pending,
                }
                if !self.take_in() {
                    idle.wait();
                }
            }
        });
    }

    /// The oldest message from `from` with `tag`, waiting for one until `deadline` (not
    /// at all when `from` is down); a wait that ends empty counts as a miss for `from`.
    pub fn receive(&self, from: usize, tag: i32, deadline: Instant) -> Option<Vec<u8>> {
        self.take_in();
        let deadline = if self.is_down(from) {
            Instant::now()
        } else {
            deadline
        };
        let received = self
            .receive_any(&[(from, tag)], deadline)
            .map(|(_, _, bytes)| bytes);
        if received.is_none() {
            self.missed(from);
        }
        received
    }

    /// The oldest message matching any of `wanted` (source rank, tag), with its source and
    /// tag, waiting for one until `deadline`.
    pub fn receive_any(
        &self,
        wanted: &[(usize, i32)],
        deadline: Instant,
    ) -> Option<(usize, i32, Vec<u8>)> {
        let mut idle = Idle::default();
        loop {
            {
                let mut mailbox = self.mailbox.borrow_mut();
                let at = mailbox
                    .iter()
                    .position(|(source, tag, _)| wanted.contains(&(*source, *tag)));
                if let Some(message) = at.and_then(|at| mailbox.remove(at)) {
                    return Some(message);
                }
            }
            if !self.take_in() {
                if Instant::now() > deadline {
                    return None;
                }
                idle.wait();
            }
        }
    }

    /// Takes every message that has arrived into the mailbox; whether there was one. A
    /// rank heard from is no longer missing deadlines.
    fn take_in(&self) -> bool {
        let mut any = false;
        while let Some(probed) = self.world.any_process().immediate_matched_probe() {
            let (bytes, status) = probed.matched_receive_vec::<u8>();
            let source = usize::try_from(status.source_rank()).expect("a rank");
            self.misses.borrow_mut().remove(&source);
            self.mailbox
                .borrow_mut()
                .push_back((source, status.tag(), bytes));
            any = true;
        }
        any
    }
}

impl Drop for Rank {
    /// Finalises MPI, unless a rank is silent: detaching the send buffer waits until every
    /// buffered message has gone out, which a message to a dead rank never does, so then
    /// the process ends without finalising (mpirun reports it; the job was broken anyway).
    fn drop(&mut self) {
        if !self.misses.borrow().is_empty() {
            // one write, as sagitta's other lines: mpirun merges the ranks' outputs. Not
            // the log facade: `sagitta import --mpi` installs no logger, and this must show
            let line = format!(
                "rank {}: ranks {:?} are silent; leaving without MPI_Finalize\n",
                self.rank,
                self.misses.borrow().keys().collect::<Vec<_>>()
            );
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
            std::mem::forget(self.universe.take());
        }
    }
}

/// Backing off while nothing arrives: spin briefly (answers usually come within
/// microseconds), then sleep 50 µs at a time.
#[derive(Default)]
struct Idle {
    spins: u32,
}

impl Idle {
    fn wait(&mut self) {
        self.spins = self.spins.saturating_add(1);
        if self.spins < 1_000 {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// Rank 0's merged lists as an answer: an error naming the ranks that did not answer
/// (their shards are unavailable), waited for up to `waited`.
pub fn complete(partial: Partial, waited: Duration) -> Result<Partial, ClusterError> {
    if partial.missing.is_empty() {
        Ok(partial)
    } else {
        Err(ClusterError::Unavailable {
            ranks: partial.missing,
            waited,
        })
    }
}

/// `rank` and every rank whose lists reach the root through it.
pub fn subtree(rank: usize, size: usize) -> Vec<usize> {
    (0..size)
        .filter(|&other| {
            let mut at = other;
            loop {
                if at == rank {
                    return true;
                }
                match tree::role(at, size).parent {
                    Some(parent) => at = parent,
                    None => return false,
                }
            }
        })
        .collect()
}

fn as_mpi(rank: usize) -> mpi::topology::Rank {
    mpi::topology::Rank::try_from(rank).expect("ranks fit an MPI rank")
}
