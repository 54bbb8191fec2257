//! Scale-out: a collection's points spread over the ranks of an MPI job, each rank owning
//! the points a stable hash gives it; a batch of queries goes to every rank and the
//! ranks' partial top-k lists are merged up a binomial tree, so rank 0 merges at most
//! log2(N) lists per query instead of N.
//!
//! What needs no MPI lives here and is tested as plain Rust: who owns a point
//! ([`owner`]), the tree's shape ([`tree`]), the partial lists with their merge and
//! wire form ([`topk`]), query batches ([`batch`]) and the micro-batching window that
//! gathers them on rank 0 ([`window`]). The transport ([`world`], feature `mpi`) moves those bytes with
//! rsmpi over the system's OpenMPI or MPICH.

#![deny(unsafe_code)]

pub mod batch;
pub mod jobs;
pub mod link;
pub mod local;
pub mod owner;
pub mod probe;
#[cfg(feature = "mpi")]
pub mod service;
pub mod topk;
pub mod tree;
pub mod window;
#[cfg(feature = "mpi")]
pub mod world;
pub mod writes;
