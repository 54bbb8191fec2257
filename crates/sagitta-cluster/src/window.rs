//! The micro-batching window on rank 0: queries from many HTTP threads are gathered into
//! one batch for the ranks, so one broadcast and one tree reduction serve many queries.
//!
//! A batch closes when it holds `max_queries` queries or when its first query has waited
//! `max_wait`, whichever comes first: under load batches fill at once (no wait added);
//! alone, a query waits at most `max_wait` for company. Queries keep their arrival order,
//! and each caller gets its own answer back.

use std::collections::VecDeque;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// The window's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Most queries in one batch.
    pub max_queries: usize,
    /// Longest a batch's first query waits for others.
    pub max_wait: Duration,
}

impl Default for Bounds {
    /// 64 queries or 200 µs. Under load a batch fills before the wait ends (64 queries
    /// take ~7 ms to search on one rank: debian-minilm, BENCHMARKS.md); a lone query waits
    /// up to 200 µs, about two single-query searches, for others to share its broadcast.
    fn default() -> Bounds {
        Bounds {
            max_queries: 64,
            max_wait: Duration::from_micros(200),
        }
    }
}

/// A job (a query, a write) waiting in the window with where its answer goes.
pub struct Waiting<Q, A> {
    pub job: Q,
    pub reply: mpsc::Sender<A>,
}

struct State<Q, A> {
    queue: VecDeque<(Instant, Waiting<Q, A>)>,
    closed: bool,
}

/// The window: [`Window::submit`] from any thread, [`Window::next_batch`] from the one
/// that sends batches to the ranks.
pub struct Window<Q, A> {
    bounds: Bounds,
    state: Mutex<State<Q, A>>,
    arrived: Condvar,
}

impl<Q, A> Window<Q, A> {
    /// # Panics
    /// If `bounds.max_queries` is 0.
    pub fn new(bounds: Bounds) -> Window<Q, A> {
        assert!(bounds.max_queries > 0, "a batch holds at least one query");
        Window {
            bounds,
            state: Mutex::new(State {
                queue: VecDeque::new(),
                closed: false,
            }),
            arrived: Condvar::new(),
        }
    }

    /// Queues `query`; its answer arrives on the returned receiver (which reports a
    /// disconnect if the window is closed before the query is taken).
    pub fn submit(&self, query: Q) -> mpsc::Receiver<A> {
        let (reply, answer) = mpsc::channel();
        let mut state = self.state.lock();
        if !state.closed {
            state
                .queue
                .push_back((Instant::now(), Waiting { job: query, reply }));
            self.arrived.notify_one();
        }
        answer
    }

    /// The next batch: waits for a first query, then until the batch is full or that query
    /// has waited `max_wait`. `None` once the window is closed and empty.
    pub fn next_batch(&self) -> Option<Vec<Waiting<Q, A>>> {
        let mut state = self.state.lock();
        loop {
            if let Some(&(first, _)) = state.queue.front() {
                let deadline = first + self.bounds.max_wait;
                let full = state.queue.len() >= self.bounds.max_queries;
                if full || state.closed || Instant::now() >= deadline {
                    let take = state.queue.len().min(self.bounds.max_queries);
                    return Some(state.queue.drain(..take).map(|(_, w)| w).collect());
                }
                self.arrived.wait_until(&mut state, deadline);
            } else if state.closed {
                return None;
            } else {
                self.arrived.wait(&mut state);
            }
        }
    }

    /// Stops taking queries; what is queued is still handed out.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.arrived.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::{Bounds, Window};
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn batches_fill_to_the_size_bound_in_arrival_order() {
        let window = Window::<usize, usize>::new(Bounds {
            max_queries: 4,
            max_wait: Duration::from_secs(3600),
        });
        let answers: Vec<_> = (0..10).map(|query| window.submit(query)).collect();
        let sizes: Vec<Vec<usize>> = (0..2)
            .map(|_| {
                let batch = window.next_batch().unwrap();
                for waiting in &batch {
                    waiting.reply.send(waiting.job * 10).unwrap();
                }
                batch.iter().map(|waiting| waiting.job).collect()
            })
            .collect();
        assert_eq!(sizes, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        // the last two wait for company an hour; closing hands them out now
        window.close();
        let rest: Vec<usize> = window.next_batch().unwrap().iter().map(|w| w.job).collect();
        assert_eq!(rest, vec![8, 9]);
        assert!(window.next_batch().is_none());
        for (query, answer) in answers.iter().enumerate().take(8) {
            assert_eq!(answer.recv().unwrap(), query * 10);
        }
        // dropped unanswered: the caller sees the disconnect, not a hang
        assert!(answers[8].recv().is_err());
        assert!(window.submit(11).recv().is_err(), "closed: refused at once");
    }

    #[test]
    fn a_lone_query_leaves_after_the_wait_bound_and_callers_on_threads_get_their_own() {
        let window = Arc::new(Window::<u64, u64>::new(Bounds {
            max_queries: 1_000,
            max_wait: Duration::from_millis(1),
        }));
        // one query, nobody else: the batch closes by time, not by size
        let lone = window.submit(7);
        let batch = window.next_batch().unwrap();
        assert_eq!(batch.len(), 1);
        batch[0].reply.send(batch[0].job + 1).unwrap();
        assert_eq!(lone.recv().unwrap(), 8);
        // 8 threads × 50 queries, answered by a server thread: everyone gets query + 1
        let server = {
            let window = Arc::clone(&window);
            std::thread::spawn(move || {
                let mut served = 0;
                while let Some(batch) = window.next_batch() {
                    assert!(!batch.is_empty() && batch.len() <= 1_000);
                    for waiting in batch {
                        waiting.reply.send(waiting.job + 1).unwrap();
                        served += 1;
                    }
                }
                served
            })
        };
        let callers: Vec<_> = (0..8_u64)
            .map(|caller| {
                let window = Arc::clone(&window);
                std::thread::spawn(move || {
                    for i in 0..50 {
                        let query = caller * 1_000 + i;
                        assert_eq!(window.submit(query).recv().unwrap(), query + 1);
                    }
                })
            })
            .collect();
        for caller in callers {
            caller.join().unwrap();
        }
        window.close();
        assert_eq!(server.join().unwrap(), 400);
    }
}
