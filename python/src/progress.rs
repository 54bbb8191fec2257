//! Progress of long engine calls reported to a Python `progress(done, total)` callback
//! (made by `sagittadb.progress.resolve`): the work runs on a Rust thread without the GIL
//! while the calling thread polls it, taking the GIL only to call the callback and to run
//! signal handlers, so the callback always runs on the caller's thread.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use pyo3::prelude::*;

/// How often a running call's progress is read and, when it changed, reported.
const POLL: Duration = Duration::from_millis(100);

/// Calls a resolved `progress` callback (None: nothing) with `(done, total)` pairs,
/// skipping repeats.
pub(crate) struct Reporter<'py> {
    callback: Bound<'py, PyAny>,
    reported: Option<(usize, usize)>,
}

impl<'py> Reporter<'py> {
    /// Reports to `callback`, a callable or None.
    pub(crate) fn new(callback: Bound<'py, PyAny>) -> Reporter<'py> {
        Reporter {
            callback,
            reported: None,
        }
    }

    /// The interpreter the callback belongs to.
    pub(crate) fn py(&self) -> Python<'py> {
        self.callback.py()
    }

    /// Calls the callback with `(done, total)` unless that pair was the last reported;
    /// returns what the callback raised.
    pub(crate) fn report(&mut self, done: usize, total: usize) -> PyResult<()> {
        if self.callback.is_none() || self.reported == Some((done, total)) {
            return Ok(());
        }
        self.reported = Some((done, total));
        self.callback.call1((done, total))?;
        Ok(())
    }

    /// Runs `work` on a new thread and, every [`POLL`] until it returns, reports `poll()`
    /// (a `total` of 0 means "not known yet" and is not reported) and runs pending signal
    /// handlers. The first exception either raises (the callback's, or `KeyboardInterrupt`)
    /// calls `cancel` once and stops the reporting; the work is always waited for, so
    /// nothing outlives the call. Returns the work's result and that exception. A panic in
    /// the work is resumed here (PyO3 raises it as `PanicException`).
    pub(crate) fn run<T: Send>(
        &mut self,
        work: impl FnOnce() -> T + Send,
        poll: impl Fn() -> (usize, usize),
        cancel: impl FnOnce(),
    ) -> (T, Option<PyErr>) {
        let py = self.py();
        std::thread::scope(|scope| {
            let (finished, mut waiting) = mpsc::channel::<()>();
            let worker = scope.spawn(move || {
                let result = work();
                drop(finished); // wakes the poller at once (also when `work` panics)
                result
            });
            let mut cancel = Some(cancel);
            let mut failure = None;
            loop {
                // The receiver is moved in and back: `allow_threads` needs a `Send` closure.
                let (state, receiver) = py.allow_threads(move || {
                    let state = waiting.recv_timeout(POLL);
                    (state, waiting)
                });
                waiting = receiver;
                if state != Err(RecvTimeoutError::Timeout) {
                    break;
                }
                if failure.is_some() {
                    continue;
                }
                let (done, total) = poll();
                let reported = if total == 0 {
                    Ok(())
                } else {
                    self.report(done, total)
                };
                if let Err(error) = reported.and_then(|()| py.check_signals()) {
                    if let Some(cancel) = cancel.take() {
                        cancel();
                    }
                    failure = Some(error);
                }
            }
            match py.allow_threads(move || worker.join()) {
                Ok(result) => (result, failure),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }
}
