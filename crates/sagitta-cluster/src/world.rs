//! The MPI transport (feature `mpi`): this process's rank in the job, the broadcast of a
//! query batch, and the reduction of partial top-k lists up the binomial tree — or, as the
//! baseline the benchmark compares it with, a plain gather to rank 0.
//!
//! Every MPI call is made from the thread that initialised MPI (`Threading::Funneled`).
//! Receives poll (`MPI_Improbe`) against a deadline instead of blocking, so a rank that
//! hangs makes its parent give up with an error naming the ranks it did not hear from.

use std::time::{Duration, Instant};

use mpi::point_to_point::MatchedReceiveVec;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, Destination, Root, Source};
use sagitta_engine::Distance;

use crate::topk::Partial;
use crate::tree;

const TAG_REDUCE: i32 = 11;
const TAG_GATHER: i32 = 12;

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

/// This process's place in the job.
pub struct Rank {
    world: SimpleCommunicator,
    rank: usize,
    size: usize,
    /// Finalises MPI when dropped.
    _universe: mpi::environment::Universe,
}

impl Rank {
    /// Initialises MPI (once per process).
    pub fn init() -> Result<Rank, ClusterError> {
        let (universe, _) =
            mpi::initialize_with_threading(mpi::Threading::Funneled).ok_or(ClusterError::Init)?;
        let world = universe.world();
        let rank = usize::try_from(world.rank()).map_err(|_| ClusterError::Init)?;
        let size = usize::try_from(world.size()).map_err(|_| ClusterError::Init)?;
        Ok(Rank {
            world,
            rank,
            size,
            _universe: universe,
        })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Waits until every rank has called this.
    pub fn barrier(&self) {
        mpi::collective::CommunicatorCollectives::barrier(&self.world);
    }

    /// Rank 0's `bytes` on every rank (what other ranks pass is ignored): the length,
    /// then the bytes, each an `MPI_Bcast` (itself a tree inside the MPI library).
    pub fn broadcast(&self, bytes: Vec<u8>) -> Vec<u8> {
        let root = self.world.process_at_rank(0);
        let mut length = bytes.len() as u64;
        root.broadcast_into(&mut length);
        let mut buffer = if self.rank == 0 {
            bytes
        } else {
            vec![0_u8; usize::try_from(length).expect("a message this process can hold")]
        };
        root.broadcast_into(&mut buffer[..]);
        buffer
    }

    /// Merges every rank's `mine` up the binomial tree, keeping each query's best `limit`:
    /// rank 0 returns the whole job's lists, other ranks `None` once they have passed
    /// theirs up. A child that sends nothing within `timeout` fails the reduction with the
    /// ranks of its subtree.
    pub fn reduce_tree(
        &self,
        mut mine: Partial,
        limit: usize,
        distance: Distance,
        timeout: Duration,
    ) -> Result<Option<Partial>, ClusterError> {
        let role = tree::role(self.rank, self.size);
        for child in role.children {
            let theirs = self.receive_partial(child, TAG_REDUCE, timeout)?;
            mine.merge(theirs, limit, distance);
        }
        match role.parent {
            Some(parent) => {
                self.world
                    .process_at_rank(as_mpi(parent))
                    .send_with_tag(&mine.encode()[..], TAG_REDUCE);
                Ok(None)
            }
            None => Ok(Some(mine)),
        }
    }

    /// The baseline: every rank sends its lists straight to rank 0, which merges all
    /// `size - 1` of them itself.
    pub fn gather_to_root(
        &self,
        mut mine: Partial,
        limit: usize,
        distance: Distance,
        timeout: Duration,
    ) -> Result<Option<Partial>, ClusterError> {
        if self.rank != 0 {
            self.world
                .process_at_rank(0)
                .send_with_tag(&mine.encode()[..], TAG_GATHER);
            return Ok(None);
        }
        for rank in 1..self.size {
            let theirs = self.receive_partial(rank, TAG_GATHER, timeout)?;
            mine.merge(theirs, limit, distance);
        }
        Ok(Some(mine))
    }

    /// The next message from `from` with `tag`, decoded, or an error naming the ranks
    /// whose lists it would have carried once `timeout` has passed without one.
    fn receive_partial(
        &self,
        from: usize,
        tag: i32,
        timeout: Duration,
    ) -> Result<Partial, ClusterError> {
        let source = self.world.process_at_rank(as_mpi(from));
        let started = Instant::now();
        let mut spins = 0_u32;
        let probed = loop {
            if let Some(probed) = source.immediate_matched_probe_with_tag(tag) {
                break probed;
            }
            if started.elapsed() > timeout {
                let ranks = if tag == TAG_REDUCE {
                    subtree(from, self.size)
                } else {
                    vec![from]
                };
                return Err(ClusterError::Unavailable {
                    ranks,
                    waited: timeout,
                });
            }
            // spin briefly (answers usually arrive within microseconds), then yield
            spins = spins.saturating_add(1);
            if spins < 1_000 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        };
        let (bytes, _) = probed.matched_receive_vec::<u8>();
        Partial::decode(&bytes).map_err(|error| ClusterError::Wire {
            rank: from,
            reason: error.to_string(),
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
