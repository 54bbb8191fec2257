//! The gRPC listener under the REST listener's connection rules ([`crate::connections`]):
//! the same table (so `max_connections` and `max_connections_per_ip` count REST and gRPC
//! connections together), the same timeouts and the same eviction of the stalest
//! connection that is not handling a call.
//!
//! An HTTP/2 connection carries many calls at once, so its phase is counted by calls: `HEAD`
//! from its opening until its first call (the client preface and first request must come
//! within `header_read_timeout_secs`), `BUSY` while at least one call is running (its
//! response not yet sent), `IDLE` when none is (for at most `keep_alive_timeout_secs`).
//! Reads do not move the phase: an idle HTTP/2 connection reads pings and settings. A
//! call's message is under a REST body's limits ([`crate::grpc::message`]): one that
//! trickles in is answered DEADLINE_EXCEEDED instead of keeping its connection `BUSY`.
//! A response write that makes no progress for `body_read_timeout_secs` closes the
//! connection, as on REST.
//!
//! A connection that times out, is evicted or is idle when the server stops is sent
//! GOAWAY (clients then open a new connection for their next call, without failing it)
//! and dropped after [`GOAWAY_GRACE_MS`]; calls running when the server stops finish
//! first. A connection kept out by a cap is closed at once (no HTTP/2 exchange yet to
//! answer in). HTTP/2 pings every [`KEEPALIVE`] find peers that vanished mid-call.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tonic::service::Routes;

use crate::connections::{
    accept_loop, now_ms, sleep_until_ms, timed_out, Connection, Guarded, Refusal, Spawn, Table,
    TimedBody, TrackedIo, BUSY, IDLE,
};
use crate::grpc::message::Message;
use crate::SharedState;

/// HTTP/2 flow-control window of each call: a batch of points (MBs) arrives without
/// waiting on window updates (HTTP/2's default is 64 KiB).
pub const WINDOW_BYTES: u32 = 8 << 20;

/// Calls one connection may run at once.
const MAX_CONCURRENT_STREAMS: u32 = 256;

/// How often an HTTP/2 ping checks the peer, and how long its answer may take.
const KEEPALIVE: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a connection sent GOAWAY while not handling a call has to close by itself.
pub const GOAWAY_GRACE_MS: u64 = 1_000;

/// Serves `routes` on `listener` under `table` until `shutdown` resolves, then lets the
/// calls in flight finish.
pub async fn serve(
    listener: TcpListener,
    routes: Routes,
    table: Arc<Table>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let spawner = Spawner {
        routes,
        table: Arc::clone(&table),
    };
    accept_loop(listener, &table, shutdown, &spawner).await
}

struct Spawner {
    routes: Routes,
    table: Arc<Table>,
}

impl Spawn for Spawner {
    fn refuse(&self, _stream: &TcpStream, _refusal: &Refusal) {
        // dropping the stream closes it; the refusal is counted by the accept loop
    }

    fn spawn(
        &self,
        stream: TcpStream,
        connection: Arc<Connection>,
        stop: watch::Receiver<bool>,
        running: mpsc::Sender<()>,
    ) {
        let calls = Calls {
            routes: self.routes.clone(),
            connection: Arc::clone(&connection),
            running: Arc::new(AtomicUsize::new(0)),
            table: Arc::clone(&self.table),
        };
        let table = Arc::clone(&self.table);
        tokio::spawn(async move {
            serve_connection(stream, calls, &table, stop).await;
            table.remove(&connection);
            drop(running);
        });
    }
}

/// Serves one connection until it closes, is closed by a limit, or the server stops.
async fn serve_connection(
    stream: TcpStream,
    calls: Calls,
    table: &Table,
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let connection = Arc::clone(&calls.connection);
    let io = TokioIo::new(TrackedIo {
        stream,
        connection: Arc::clone(&connection),
        http1: false,
    });
    let served = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .initial_stream_window_size(WINDOW_BYTES)
        .initial_connection_window_size(4 * WINDOW_BYTES)
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .keep_alive_interval(KEEPALIVE)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .serve_connection(io, TowerToHyperService::new(calls));
    let mut served = std::pin::pin!(served);
    let counters = table.counters();
    // When GOAWAY was sent (a limit, eviction, or the server stopping).
    let mut closing_since = None;
    loop {
        let stopping = *stop.borrow();
        if closing_since.is_none() && (stopping || connection.evicted.load(Ordering::Acquire)) {
            served.as_mut().graceful_shutdown();
            closing_since = Some(now_ms());
        }
        let deadline = match closing_since {
            // a running call finishes first (unless its answer stops being read, as on
            // REST); otherwise the client has GOAWAY_GRACE_MS to close
            Some(since) if connection.phase.load(Ordering::Acquire) != BUSY => {
                Some(since + GOAWAY_GRACE_MS)
            }
            _ => connection.deadline_ms(&table.limits),
        };
        let changed = connection.changed.notified();
        tokio::select! {
            _ = served.as_mut() => break,
            () = changed => {}
            () = sleep_until_ms(deadline) => {
                if closing_since.is_some() {
                    if deadline.is_some_and(|at| at <= now_ms()) {
                        break;
                    }
                } else if timed_out(&connection, &table.limits, None, counters) {
                    served.as_mut().graceful_shutdown();
                    closing_since = Some(now_ms());
                }
            }
            _ = stop.changed(), if !stopping => {}
        }
    }
}

/// The connection's calls: each one counted while it runs, the connection `BUSY` while
/// any does, its message under a REST body's limits, and each recorded in the metrics
/// (`sagitta_grpc_*`) when it ends.
#[derive(Clone)]
struct Calls {
    routes: Routes,
    connection: Arc<Connection>,
    running: Arc<AtomicUsize>,
    table: Arc<Table>,
}

/// One running call; its end (the response body dropped by hyper, sent or not) may leave
/// the connection `IDLE`, and records it: its method, its status code and its time.
pub(crate) struct Running {
    connection: Arc<Connection>,
    running: Arc<AtomicUsize>,
    state: SharedState,
    method: String,
    started: Instant,
    /// The answer's status code; `None` if the call ended before one (the client went).
    code: Option<tonic::Code>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.connection.set_phase(IDLE);
        }
        let code = self.code.unwrap_or(tonic::Code::Cancelled);
        // a client may send any path (answered UNIMPLEMENTED) or go before the answer:
        // those share one label, so the series stay as many as the methods served
        let method = match self.code {
            Some(code) if code != tonic::Code::Unimplemented => self.method.as_str(),
            _ => "other",
        };
        self.state.metrics.observe_grpc(
            method,
            &format!("{code:?}"),
            self.started.elapsed().as_secs_f64(),
        );
    }
}

/// A response's gRPC status: in its headers when the call failed before any message
/// (tonic answers a unary call's error that way), else OK (a later failure would be in
/// the trailers, which are not read here).
fn status_of<B>(response: &Response<B>) -> tonic::Code {
    response
        .headers()
        .get("grpc-status")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<i32>().ok())
        .map_or(tonic::Code::Ok, tonic::Code::from_i32)
}

impl tower_service::Service<Request<Incoming>> for Calls {
    /// The body holds the call's place in the count until hyper drops it.
    type Response = Response<Guarded<tonic::body::Body, Running>>;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        tower_service::Service::<Request<Incoming>>::poll_ready(&mut self.routes, cx)
    }

    fn call(&mut self, request: Request<Incoming>) -> Self::Future {
        if self.running.fetch_add(1, Ordering::AcqRel) == 0 {
            self.connection.set_phase(BUSY);
        }
        let state = &self.table.state;
        let mut running = Running {
            connection: Arc::clone(&self.connection),
            running: Arc::clone(&self.running),
            state: Arc::clone(state),
            method: request.uri().path().to_string(),
            started: Instant::now(),
            code: None,
        };
        // a call is BUSY, which has no time limit: its message is still under a REST
        // body's limits (time and bytes in flight)
        let request = request.map(|inner| {
            Message::new(
                TimedBody::new(inner, None, &self.table.limits),
                Arc::clone(state),
            )
        });
        let call = self.routes.call(request);
        Box::pin(async move {
            let response = call.await?;
            running.code = Some(status_of(&response));
            Ok(response.map(|inner| Guarded {
                inner,
                _guard: running,
            }))
        })
    }
}
