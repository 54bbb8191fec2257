//! The background threads of a database: the optimizer, which runs the seals, merges and
//! vacuums that [`crate::policy`] plans, and the indexer that grows each write buffer's
//! graph — at low priority, so writers and readers never wait for an index build.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};
use sagitta_storage::fs::FileSystem;

use crate::collection::Collection;
pub use crate::policy::OptimizerPolicy;

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
