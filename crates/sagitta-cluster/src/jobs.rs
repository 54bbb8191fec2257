//! What callers on rank 0 hand the job through the micro-batching window, what they get
//! back, and what each rank keeps ([`Local`]). Served by [`crate::service`] (feature
//! `mpi`); reached from a linked collection through [`crate::link::Link`].

use sagitta_engine::codec::Operation;
use sagitta_engine::collection::peers::Probe;
use sagitta_engine::Distance;

use crate::batch::QueryBatch;
use crate::probe::ProbeBatch;
use crate::topk::Hit;
use crate::writes::Admin;

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

/// What a rank keeps: the points it owns.
pub trait Local {
    /// This rank's best `batch.limit` hits for each query of `batch`, with the
    /// collection's distance (which orders the merge).
    fn search(&self, batch: &QueryBatch) -> Result<(Vec<Vec<Hit>>, Distance), String>;
    /// Checks a whole write as this rank's copy of the collection would take it (every
    /// point's vectors and payload), storing nothing: rank 0 refuses a write with one bad
    /// point before any owner stores any of it.
    fn check(&self, collection: &str, operation: &Operation) -> Result<(), String>;
    /// Applies this rank's part of a write; with `wait`, returns after it is durable.
    fn apply(&self, collection: &str, operation: Operation, wait: bool) -> Result<(), String>;
    /// Makes a change every rank makes (a collection created or dropped).
    fn admin(&self, admin: &Admin) -> Result<(), String>;
    /// This rank's best hits for each probe of `batch` (ids and engine distances, closest
    /// first), among its own points.
    fn probe(&self, batch: &ProbeBatch) -> Result<Vec<Vec<Hit>>, String> {
        let _ = batch;
        Err("this rank keeps no linked collections".to_string())
    }
    /// Rank 0's call (see [`crate::probe::decode_call`]) answered, encoded
    /// ([`crate::probe::encode_answer`]).
    fn call(&self, request: &[u8]) -> Vec<u8> {
        let _ = request;
        crate::probe::encode_answer(&Err("this rank keeps no linked collections".into()))
    }
}

/// What a caller asks of the job.
#[derive(Clone, Debug, PartialEq)]
pub enum Job {
    Search(Query),
    Write {
        collection: String,
        wait: bool,
        operation: Operation,
    },
    /// A change made on every rank; answered as [`Outcome::Written`].
    Admin(Admin),
    /// Calls for other ranks (rank, encoded call), all sent at once; answered as
    /// [`Outcome::Answers`] in the same order.
    Ask(Vec<(usize, Vec<u8>)>),
    /// One search of a linked collection, batched with others of the same collection and
    /// size, answered as [`Outcome::Hits`] (scores are engine distances).
    Probe {
        collection: String,
        probe: Probe,
    },
}

/// What the job answers.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Hits(Answer),
    Written(Result<(), String>),
    /// Each asked rank's encoded answer, or that it did not answer in time (an error
    /// naming it, ending with [`sagitta_engine::collection::peers::SILENCE`]).
    Answers(Vec<Result<Vec<u8>, String>>),
}
