//! Rank 0's [`Peers`]: a linked collection's calls and probes become jobs in the
//! micro-batching window, which the job's leader ([`crate::service::lead`]) sends to the
//! other ranks. Probes from many callers share one batch down the tree; a call goes
//! straight to the ranks it names.

use std::sync::Arc;

use sagitta_engine::collection::peers::{PeerAnswer, PeerCall, Peers, Probe};
use sagitta_engine::PointId;

use crate::jobs::{Job, Outcome};
use crate::owner::owner_rank;
use crate::probe::{decode_answer, encode_call};
use crate::window::Window;

/// The other ranks of a job of `ranks` ranks, reached through `window`.
pub struct Link {
    window: Arc<Window<Job, Outcome>>,
    ranks: usize,
}

impl Link {
    pub fn new(window: Arc<Window<Job, Outcome>>, ranks: usize) -> Link {
        Link { window, ranks }
    }
}

/// What a caller hears once the job has stopped serving.
const STOPPED: &str = "the job has stopped serving";

impl Peers for Link {
    fn ranks(&self) -> usize {
        self.ranks
    }

    fn owner(&self, id: &PointId) -> usize {
        owner_rank(id, self.ranks)
    }

    fn ask(&self, calls: Vec<(usize, PeerCall)>) -> Vec<Result<PeerAnswer, String>> {
        let ranks: Vec<usize> = calls.iter().map(|(rank, _)| *rank).collect();
        let encoded = calls
            .iter()
            .map(|(rank, call)| (*rank, encode_call(call)))
            .collect();
        let replies = match self.window.submit(Job::Ask(encoded)).recv() {
            Ok(Outcome::Answers(replies)) => replies,
            Ok(other) => vec![Err(format!("the job answered out of turn: {other:?}")); ranks.len()],
            Err(_) => vec![Err(STOPPED.to_string()); ranks.len()],
        };
        ranks
            .into_iter()
            .zip(replies)
            .map(|(rank, reply)| {
                let answer = reply.and_then(|bytes| decode_answer(&bytes)?);
                answer.map_err(|reason| {
                    if reason.starts_with("rank ") {
                        reason
                    } else {
                        format!("rank {rank}: {reason}")
                    }
                })
            })
            .collect()
    }

    fn probe(
        &self,
        collection: &str,
        probes: Vec<Probe>,
    ) -> Result<Vec<Vec<(PointId, f32)>>, String> {
        // every probe in the window first, so they can share a batch
        let receivers: Vec<_> = probes
            .into_iter()
            .map(|probe| {
                self.window.submit(Job::Probe {
                    collection: collection.to_string(),
                    probe,
                })
            })
            .collect();
        receivers
            .into_iter()
            .map(|receiver| match receiver.recv() {
                Ok(Outcome::Hits(hits)) => {
                    Ok(hits?.into_iter().map(|hit| (hit.id, hit.score)).collect())
                }
                Ok(other) => Err(format!("the job answered out of turn: {other:?}")),
                Err(_) => Err(STOPPED.to_string()),
            })
            .collect()
    }
}
