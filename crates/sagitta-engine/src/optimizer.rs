//! The optimizer: decides when a shard's write buffer is sealed into an HNSW segment and
//! when segments are merged or vacuumed, and runs that work — and the indexer that grows
//! each write buffer's graph — on two background threads per database, at low priority, so
//! writers and readers never wait for an index build.
//!
//! Policy (per shard, first match wins):
//! 1. seal the buffer once it holds `seal_points` points, or any points after `seal_idle`
//!    without writes (so a collection becomes fully indexed soon after ingestion stops);
//! 2. vacuum a segment whose deleted points are at least `vacuum_min_deleted` and
//!    `vacuum_fraction` of it (rebuild it from its live points);
//! 3. merge the smallest segments when there are more than `max_segments`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};
use sagitta_storage::fs::FileSystem;

use crate::collection::Collection;

#[derive(Clone, Debug, PartialEq)]
pub struct OptimizerPolicy {
    pub seal_points: usize,
    pub seal_idle: Duration,
    pub vacuum_min_deleted: usize,
    pub vacuum_fraction: f64,
    pub max_segments: usize,
    /// After a failed seal or merge, leave the collection alone this long.
    pub retry_after_error: Duration,
    /// The indexer starts a write buffer's graph once the buffer holds this many slots
    /// (SQ8 trains on the first 1,000 rows; a smaller graph traverses in f32).
    pub index_min_rows: usize,
}

impl Default for OptimizerPolicy {
    fn default() -> Self {
        OptimizerPolicy {
            seal_points: 20_000,
            seal_idle: Duration::from_millis(500),
            vacuum_min_deleted: 1_000,
            vacuum_fraction: 0.2,
            max_segments: 8,
            retry_after_error: Duration::from_secs(5),
            index_min_rows: 1_000,
        }
    }
}

/// One unit of optimizer work in a shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Work {
    Seal,
    /// Rebuild these segments (by id) into one.
    Merge(Vec<u64>),
}

/// How often the background thread looks for work when it found none.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

struct Control {
    stopping: Mutex<bool>,
    wake: Condvar,
}

/// Slots the indexer adds to a write buffer's graph per step (per shard).
const INDEX_STEP_ROWS: usize = 1_024;

/// The background threads of a database — the optimizer (seals, merges, vacuums) and the
/// indexer (grows each write buffer's graph behind the writes, so a search scans only the
/// few points not yet in it, and a seal has nothing left to build); they stop, finishing
/// the current unit of work, when dropped.
pub(crate) struct Optimizer {
    control: Arc<Control>,
    threads: Vec<JoinHandle<()>>,
}

impl Optimizer {
    pub fn start(
        fs: Arc<dyn FileSystem>,
        collections: Arc<RwLock<BTreeMap<String, Arc<Collection>>>>,
    ) -> Optimizer {
        let control = Arc::new(Control {
            stopping: Mutex::new(false),
            wake: Condvar::new(),
        });
        let optimizer = {
            let (control, collections) = (Arc::clone(&control), Arc::clone(&collections));
            std::thread::Builder::new()
                .name("sagitta-optimizer".to_string())
                .spawn(move || {
                    lower_thread_priority();
                    run(&collections, &control, |collection| {
                        // An error is recorded on the collection (its status shows it) and
                        // the shard is poisoned or left as it was; the loop goes on.
                        collection.maintain(fs.as_ref()).unwrap_or(false)
                    });
                })
                .expect("spawning the optimizer thread")
        };
        let indexer = {
            let control = Arc::clone(&control);
            std::thread::Builder::new()
                .name("sagitta-indexer".to_string())
                .spawn(move || {
                    lower_thread_priority();
                    run(&collections, &control, |collection| {
                        collection.index_buffers(INDEX_STEP_ROWS)
                    });
                })
                .expect("spawning the indexer thread")
        };
        Optimizer {
            control,
            threads: vec![optimizer, indexer],
        }
    }
}

impl Drop for Optimizer {
    fn drop(&mut self) {
        *self.control.stopping.lock() = true;
        self.control.wake.notify_all();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Nice value of the optimizer thread (and of the index-build threads it spawns, which
/// inherit it): under CPU contention the kernel gives searches and writes (nice 0) about
/// ten times the CPU of a build, so a seal slows queries little, while an idle machine
/// still builds on every core.
const OPTIMIZER_NICE: i32 = 10;

/// Lowers the calling thread's scheduling priority to [`OPTIMIZER_NICE`]. Failure (not
/// Linux, a seccomp filter) only means builds compete at normal priority.
fn lower_thread_priority() {
    let _ = sagitta_kernels::sched::set_current_thread_nice(OPTIMIZER_NICE);
}

/// Gives every collection one unit of `work` per round until stopped, pausing for
/// [`POLL_INTERVAL`] after a round in which none had any.
fn run(
    collections: &RwLock<BTreeMap<String, Arc<Collection>>>,
    control: &Control,
    work: impl Fn(&Collection) -> bool,
) {
    loop {
        if *control.stopping.lock() {
            return;
        }
        let snapshot: Vec<Arc<Collection>> = collections.read().values().cloned().collect();
        // Every collection gets one unit of work per round, so none starves another.
        let worked = snapshot
            .iter()
            .fold(false, |worked, collection| work(collection) | worked);
        if !worked {
            let mut stopping = control.stopping.lock();
            if !*stopping {
                control.wake.wait_for(&mut stopping, POLL_INTERVAL);
            }
        }
    }
}
