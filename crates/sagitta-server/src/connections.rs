//! The accept loop and the limits on client connections.
//!
//! `axum::serve` has no timeouts and no connection limits: one client opening 20,000
//! half-open requests at almost no bandwidth took every file descriptor, and `/healthz`
//! went unanswered until they closed. Here each connection is served by hyper's HTTP/1
//! connection under these rules:
//!
//! - **Phases.** A connection is in one of four phases: `HEAD` (opened, or the first bytes of
//!   a request arrived, until its head is complete), `BODY` (a request is dispatched and
//!   its body not yet received), `BUSY` (the request is being handled or its response
//!   written) and `IDLE` (kept alive between requests). The I/O wrapper, the service and
//!   the request and response bodies move a connection between them.
//! - **Timeouts.** `HEAD` longer than `header_read_timeout_secs` and `IDLE` longer than
//!   `keep_alive_timeout_secs` close the connection. A body gets
//!   `body_read_timeout_secs` plus one second per `min_body_bytes_per_sec` bytes received;
//!   past that its reader gets [`BodyReadTimeout`] (answered 408) and the connection is
//!   closed after the answer. A response write that makes no progress for
//!   `body_read_timeout_secs` closes the connection. `BUSY` has no limit: engine work takes
//!   what it takes.
//! - **Caps.** At most `max_connections` (never more than three quarters of the open-file
//!   limit, so the database keeps descriptors) and `max_connections_per_ip` per client
//!   address (an IPv6 /64 is one address). A new connection past a cap is admitted by
//!   closing the stalest connection that is not handling a request (`IDLE`, `HEAD` or
//!   `BODY`; stalest = the largest share of its phase's timeout used) — of the same
//!   address for the per-address cap, of the address holding the most connections for the
//!   server's cap. Only when every such connection is handling a request is the new one
//!   refused, with a short 429 (its address is at its cap) or 503 (the server is full) in
//!   the error envelope. So a flood of idle or half-sent connections pushes out its own
//!   oldest members and never locks out a health check.
//! - **Declared bodies** over `max_request_bytes` are answered 413 before any of the body
//!   is read.
//!
//! The gRPC listener (`grpc/connections.rs`) admits its HTTP/2 connections into the same
//! [`Table`] through the same `accept_loop`, so the caps count both listeners'
//! connections; it counts a connection's phase by its calls, and each call's message is
//! under the body time limit (`grpc/message.rs`).
//!
//! Accept errors (`EMFILE` when descriptors run out anyway) close the stalest evictable
//! connection and retry after 10 ms. When the server stops, connections that are idle or
//! sending a head close at once, bodies still arriving get 5 s, requests being handled
//! finish.

use std::collections::{BTreeSet, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use http_body::{Body as _, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify};

use crate::config::ServerConfig;
use crate::error::ApiError;
use crate::metrics::ConnectionMetrics;
use crate::SharedState;

pub(crate) const HEAD: u8 = 0;
const BODY: u8 = 1;
pub(crate) const BUSY: u8 = 2;
pub(crate) const IDLE: u8 = 3;

/// Once the server stops, how long a request body still arriving may take to finish.
const SHUTDOWN_BODY_GRACE_MS: u64 = 5_000;

/// Milliseconds since the first call: the clock of every deadline here.
pub(crate) fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn instant_of(ms: u64) -> tokio::time::Instant {
    let now = now_ms();
    tokio::time::Instant::now() + Duration::from_millis(ms.saturating_sub(now))
}

/// The connection limits, in the units the code uses.
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    pub header_read_timeout_ms: u64,
    pub body_read_timeout_ms: u64,
    pub min_body_bytes_per_sec: u64,
    pub keep_alive_timeout_ms: u64,
    pub max_request_bytes: usize,
}

/// `max_connections`, lowered to three quarters of the open-file soft limit when that is
/// smaller: the rest stays for the database's files and the listener.
pub fn effective_max_connections(config: &ServerConfig) -> usize {
    let files = rlimit::getrlimit(rlimit::Resource::NOFILE)
        .ok()
        .map_or(u64::MAX, |(soft, _)| soft);
    let share = usize::try_from(files / 4 * 3).unwrap_or(usize::MAX).max(1);
    config.max_connections.min(share)
}

impl Limits {
    pub fn new(config: &ServerConfig) -> Limits {
        Limits {
            max_connections: effective_max_connections(config),
            max_connections_per_ip: config.max_connections_per_ip,
            header_read_timeout_ms: config.header_read_timeout_secs.saturating_mul(1000),
            body_read_timeout_ms: config.body_read_timeout_secs.saturating_mul(1000),
            min_body_bytes_per_sec: config.min_body_bytes_per_sec.max(1),
            keep_alive_timeout_ms: config.keep_alive_timeout_secs.saturating_mul(1000),
            max_request_bytes: config.max_request_bytes,
        }
    }
}

/// The address a per-address cap counts: IPv4 as is, IPv6 by its /64 (one host is
/// usually given a whole /64).
fn address_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
        v4 => v4,
    }
}

/// One client connection's state, shared by its task, its I/O, its requests' bodies and
/// the table.
pub struct Connection {
    id: u64,
    address: IpAddr,
    pub(crate) phase: AtomicU8,
    /// When the current phase began (`now_ms`).
    since_ms: AtomicU64,
    /// 0, or 1 + when a write started to wait for the client.
    pub(crate) write_blocked_ms: AtomicU64,
    /// Set by a body reader that stopped before the end: the answer says
    /// `Connection: close`.
    close_after_response: AtomicBool,
    /// Set when the table evicts this connection.
    pub(crate) evicted: AtomicBool,
    /// Wakes the task: a phase changed, a write blocked, or eviction.
    pub(crate) changed: Notify,
}

impl Connection {
    pub(crate) fn set_phase(&self, phase: u8) {
        self.since_ms.store(now_ms(), Ordering::Relaxed);
        self.phase.store(phase, Ordering::Release);
        self.changed.notify_one();
    }

    /// Marks the connection to be closed once the current response is written.
    pub fn close_after_response(&self) {
        self.close_after_response.store(true, Ordering::Relaxed);
    }

    /// When the connection must close unless its phase changes, in `now_ms` time.
    pub(crate) fn deadline_ms(&self, limits: &Limits) -> Option<u64> {
        let since = self.since_ms.load(Ordering::Relaxed);
        let phase = match self.phase.load(Ordering::Acquire) {
            HEAD => Some(since.saturating_add(limits.header_read_timeout_ms)),
            IDLE => Some(since.saturating_add(limits.keep_alive_timeout_ms)),
            _ => None,
        };
        let blocked = self.write_blocked_ms.load(Ordering::Relaxed);
        let write =
            (blocked != 0).then(|| (blocked - 1).saturating_add(limits.body_read_timeout_ms));
        match (phase, write) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// How much of its phase's time limit the connection has used (evictions take the
    /// largest first); `None` while it handles a request, which is never evicted.
    fn staleness(&self, limits: &Limits, now: u64) -> Option<f64> {
        let limit = match self.phase.load(Ordering::Acquire) {
            HEAD => limits.header_read_timeout_ms,
            BODY => limits.body_read_timeout_ms,
            IDLE => limits.keep_alive_timeout_ms,
            _ => return None,
        };
        let used = now.saturating_sub(self.since_ms.load(Ordering::Relaxed));
        #[allow(clippy::cast_precision_loss)] // milliseconds, far below 2^52
        Some(used as f64 / limit.max(1) as f64)
    }
}

/// Why a connection was not admitted.
pub(crate) enum Refusal {
    AddressFull,
    ServerFull,
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    connections: HashMap<u64, Arc<Connection>>,
    by_address: HashMap<IpAddr, BTreeSet<u64>>,
}

impl Registry {
    fn stalest_of(&self, ids: &BTreeSet<u64>, limits: &Limits, now: u64) -> Option<u64> {
        let mut best: Option<(f64, u64)> = None;
        for id in ids {
            let Some(connection) = self.connections.get(id) else {
                continue;
            };
            if let Some(staleness) = connection.staleness(limits, now) {
                // Ties go to the older connection (the lower id).
                if best.is_none_or(|(most, _)| staleness > most) {
                    best = Some((staleness, *id));
                }
            }
        }
        best.map(|(_, id)| id)
    }

    /// The stalest evictable connection of the address holding the most connections that
    /// has one.
    fn victim(&self, limits: &Limits, now: u64) -> Option<u64> {
        let mut addresses: Vec<(&IpAddr, usize)> = self
            .by_address
            .iter()
            .map(|(address, ids)| (address, ids.len()))
            .collect();
        addresses.sort_unstable_by_key(|&(_, count)| std::cmp::Reverse(count));
        addresses
            .into_iter()
            .find_map(|(address, _)| self.stalest_of(&self.by_address[address], limits, now))
    }

    fn remove(&mut self, id: u64) -> Option<Arc<Connection>> {
        let connection = self.connections.remove(&id)?;
        if let Some(ids) = self.by_address.get_mut(&connection.address) {
            ids.remove(&id);
            if ids.is_empty() {
                self.by_address.remove(&connection.address);
            }
        }
        Some(connection)
    }
}

/// Every open connection, by id and by address: the REST and gRPC listeners share one, so
/// the caps count both.
pub struct Table {
    registry: Mutex<Registry>,
    pub(crate) limits: Limits,
    pub(crate) state: SharedState,
}

impl Table {
    /// An empty table under the limits of `state.config`.
    pub fn new(state: &SharedState) -> Arc<Table> {
        Arc::new(Table {
            registry: Mutex::new(Registry::default()),
            limits: Limits::new(&state.config),
            state: Arc::clone(state),
        })
    }

    pub(crate) fn counters(&self) -> &ConnectionMetrics {
        &self.state.metrics.connections
    }

    /// Admits a connection from `ip`, evicting one to make room if a cap is reached.
    pub(crate) fn admit(&self, ip: IpAddr) -> Result<Arc<Connection>, Refusal> {
        let address = address_key(ip);
        let now = now_ms();
        let mut evicted = Vec::new();
        let admitted = {
            let mut registry = self.registry.lock();
            let from_address = registry.by_address.get(&address).map_or(0, BTreeSet::len);
            if from_address >= self.limits.max_connections_per_ip {
                let ids = &registry.by_address[&address];
                match registry.stalest_of(ids, &self.limits, now) {
                    Some(id) => evicted.extend(registry.remove(id)),
                    None => return Err(Refusal::AddressFull),
                }
            }
            if registry.connections.len() >= self.limits.max_connections {
                match registry.victim(&self.limits, now) {
                    Some(id) => evicted.extend(registry.remove(id)),
                    None => {
                        for connection in evicted.drain(..) {
                            // Put back: nothing is evicted for a connection not admitted.
                            registry
                                .by_address
                                .entry(connection.address)
                                .or_default()
                                .insert(connection.id);
                            registry.connections.insert(connection.id, connection);
                        }
                        return Err(Refusal::ServerFull);
                    }
                }
            }
            registry.next_id += 1;
            let connection = Arc::new(Connection {
                id: registry.next_id,
                address,
                phase: AtomicU8::new(HEAD),
                since_ms: AtomicU64::new(now),
                write_blocked_ms: AtomicU64::new(0),
                close_after_response: AtomicBool::new(false),
                evicted: AtomicBool::new(false),
                changed: Notify::new(),
            });
            registry
                .by_address
                .entry(address)
                .or_default()
                .insert(connection.id);
            registry
                .connections
                .insert(connection.id, Arc::clone(&connection));
            connection
        };
        for connection in evicted {
            self.evict(&connection);
        }
        Ok(admitted)
    }

    fn evict(&self, connection: &Connection) {
        connection.evicted.store(true, Ordering::Release);
        connection.changed.notify_one();
        self.counters().evicted.fetch_add(1, Ordering::Relaxed);
    }

    /// Frees a descriptor when accepting failed (the process ran out of them anyway).
    fn evict_any(&self) {
        let victim = {
            let mut registry = self.registry.lock();
            let id = registry.victim(&self.limits, now_ms());
            id.and_then(|id| registry.remove(id))
        };
        if let Some(connection) = victim {
            self.evict(&connection);
        }
    }

    /// Takes `connection` out once its task is done, and updates the gauge.
    pub(crate) fn remove(&self, connection: &Connection) {
        self.registry.lock().remove(connection.id);
        self.counters()
            .open
            .store(self.open() as u64, Ordering::Relaxed);
    }

    fn open(&self) -> usize {
        self.registry.lock().connections.len()
    }
}

/// The error a request body's reader gets when the body arrives too slowly.
#[derive(Debug, thiserror::Error)]
#[error(
    "the request body did not arrive in time ({received} bytes in {seconds:.1} s; \
     body_read_timeout_secs and min_body_bytes_per_sec set the pace)"
)]
pub struct BodyReadTimeout {
    pub received: u64,
    pub seconds: f64,
}

/// A request body under the body time limit. On HTTP/1 (`connection` set) it moves its
/// connection from `BODY` to `BUSY` when it ends, fails, or is dropped unread; an HTTP/2
/// call's body (a gRPC message) leaves the phase to the count of calls.
pub(crate) struct TimedBody {
    inner: Incoming,
    connection: Option<Arc<Connection>>,
    started: Instant,
    received: u64,
    grace_ms: u64,
    min_rate: u64,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    done: bool,
}

impl TimedBody {
    pub(crate) fn new(
        inner: Incoming,
        connection: Option<Arc<Connection>>,
        limits: &Limits,
    ) -> TimedBody {
        let done = inner.is_end_stream();
        TimedBody {
            inner,
            connection,
            started: Instant::now(),
            received: 0,
            grace_ms: limits.body_read_timeout_ms,
            min_rate: limits.min_body_bytes_per_sec,
            sleep: None,
            done,
        }
    }

    fn close_after_response(&self) {
        if let Some(connection) = &self.connection {
            connection.close_after_response();
        }
    }

    fn deadline(&self) -> tokio::time::Instant {
        let extra_ms = self.received.saturating_mul(1000) / self.min_rate;
        tokio::time::Instant::from_std(self.started)
            + Duration::from_millis(self.grace_ms.saturating_add(extra_ms))
    }

    fn finish(&mut self) {
        if !self.done {
            self.done = true;
            if let Some(connection) = &self.connection {
                if connection.phase.load(Ordering::Acquire) == BODY {
                    connection.set_phase(BUSY);
                }
            }
        }
    }
}

impl Drop for TimedBody {
    fn drop(&mut self) {
        if !self.done && !self.inner.is_end_stream() {
            // Unread: hyper closes the connection rather than drain it; say so.
            self.close_after_response();
        }
        self.finish();
    }
}

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                    let deadline = this.deadline();
                    if let Some(sleep) = &mut this.sleep {
                        sleep.as_mut().reset(deadline);
                    }
                }
                if this.inner.is_end_stream() {
                    this.finish();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                this.close_after_response();
                this.finish();
                Poll::Ready(Some(Err(Box::new(error))))
            }
            Poll::Ready(None) => {
                this.finish();
                Poll::Ready(None)
            }
            Poll::Pending => {
                let deadline = this.deadline();
                let sleep = this
                    .sleep
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                if sleep.as_mut().poll(cx).is_ready() {
                    this.close_after_response();
                    this.finish();
                    return Poll::Ready(Some(Err(Box::new(BodyReadTimeout {
                        received: this.received,
                        seconds: this.started.elapsed().as_secs_f64(),
                    }))));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body holding `guard` until hyper drops it (written, or the connection
/// ended).
pub(crate) struct Guarded<B, G> {
    pub(crate) inner: B,
    pub(crate) _guard: G,
}

impl<B: http_body::Body + Unpin, G: Unpin> http_body::Body for Guarded<B, G> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Puts its connection `IDLE` when dropped with its response body.
struct IdleWhenSent(Arc<Connection>);

impl Drop for IdleWhenSent {
    fn drop(&mut self) {
        self.0.set_phase(IDLE);
    }
}

/// The connection a request came on, in the request's extensions, so a body reader can
/// ask for the connection to be closed after its answer.
#[derive(Clone)]
pub struct ConnectionHandle(pub Arc<Connection>);

/// The declared `Content-Length`, if any and well formed.
pub fn declared_length(headers: &axum::http::HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The per-connection service: phase bookkeeping, the early 413, then the router.
#[derive(Clone)]
struct Front {
    router: Router,
    connection: Arc<Connection>,
    limits: Arc<Limits>,
    state: SharedState,
}

impl hyper::service::Service<Request<Incoming>> for Front {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let connection = Arc::clone(&self.connection);
        let has_body = !request.body().is_end_stream();
        connection.set_phase(if has_body { BODY } else { BUSY });
        let limit = self.limits.max_request_bytes;
        if let Some(declared) = declared_length(request.headers()) {
            if declared > limit as u64 {
                self.state
                    .metrics
                    .connections
                    .declared_too_large
                    .fetch_add(1, Ordering::Relaxed);
                connection.close_after_response();
                let response = ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "Payload error: the declared body of {declared} bytes is over the \
                         limit of {limit} bytes (max_request_bytes)"
                    ),
                )
                .into_response();
                drop(request);
                return Box::pin(std::future::ready(Ok(finish_response(
                    response, connection,
                ))));
            }
        }
        let mut request = request.map(|inner| {
            Body::new(TimedBody::new(
                inner,
                Some(Arc::clone(&connection)),
                &self.limits,
            ))
        });
        request
            .extensions_mut()
            .insert(ConnectionHandle(Arc::clone(&connection)));
        let mut router = self.router.clone();
        Box::pin(async move {
            let response = tower_service::Service::call(&mut router, request).await?;
            Ok(finish_response(response, connection))
        })
    }
}

fn finish_response(mut response: Response, connection: Arc<Connection>) -> Response {
    if connection.close_after_response.load(Ordering::Relaxed) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response.map(|inner| {
        Body::new(Guarded {
            inner,
            _guard: IdleWhenSent(connection),
        })
    })
}

/// The socket, noting writes that wait for the client and (HTTP/1, where bytes after an
/// idle spell are a new request's head) the first bytes read after an idle spell.
pub(crate) struct TrackedIo {
    pub(crate) stream: TcpStream,
    pub(crate) connection: Arc<Connection>,
    /// HTTP/1: reading while `IDLE` starts a head. Not for HTTP/2, whose idle
    /// connections read pings and settings too.
    pub(crate) http1: bool,
}

impl TrackedIo {
    fn note_write<T>(&self, poll: &Poll<io::Result<T>>) {
        let blocked = &self.connection.write_blocked_ms;
        if poll.is_pending() {
            if blocked.load(Ordering::Relaxed) == 0 {
                blocked.store(now_ms() + 1, Ordering::Relaxed);
                self.connection.changed.notify_one();
            }
        } else if blocked.load(Ordering::Relaxed) != 0 {
            blocked.store(0, Ordering::Relaxed);
        }
    }
}

impl AsyncRead for TrackedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.stream).poll_read(cx, buf);
        if self.http1
            && buf.filled().len() > before
            && self.connection.phase.load(Ordering::Acquire) == IDLE
        {
            self.connection.set_phase(HEAD);
        }
        poll
    }
}

impl AsyncWrite for TrackedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.note_write(&poll);
        poll
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.note_write(&poll);
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.stream).poll_flush(cx);
        self.note_write(&poll);
        poll
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Writes a short refusal in the error envelope, without waiting, then drops the socket.
fn refuse(stream: &TcpStream, status: StatusCode, message: &str) {
    let body = serde_json::json!({"status": {"error": message}, "time": 0.0}).to_string();
    let response = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    );
    let _ = stream.try_write(response.as_bytes());
}

/// Pending connections the kernel queues for `accept`: tokio's `TcpListener::bind` asks
/// for 128, which a burst of clients overflows whenever the accept loop waits a few
/// milliseconds for a core (their SYNs are then dropped and retried after a second).
pub const LISTEN_BACKLOG: u32 = 4096;

/// Listens on `address` (`host:port`, the host a name or an address) with
/// [`LISTEN_BACKLOG`] (the kernel caps it at `net.core.somaxconn`).
pub async fn bind(address: &str) -> io::Result<TcpListener> {
    let mut last_error = None;
    for resolved in tokio::net::lookup_host(address).await? {
        let socket = if resolved.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(resolved) {
            Ok(()) => return socket.listen(LISTEN_BACKLOG),
            Err(error) => last_error = Some(error),
        }
    }
    Err(last_error.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{address} resolves to no address"),
        )
    }))
}

/// Serves `router` on `listener` under the connection limits of `table` until `shutdown`
/// resolves, then waits for the requests in flight.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    table: Arc<Table>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let spawner = Spawner {
        router,
        limits: Arc::new(table.limits.clone()),
        state: Arc::clone(&table.state),
        table: Arc::clone(&table),
    };
    accept_loop(listener, &table, shutdown, &spawner).await
}

/// What a listener does with the connections its accept loop admits or keeps out.
pub(crate) trait Spawn {
    /// Serves `stream`, admitted as `connection`, on a task of its own that watches `stop`
    /// and holds `running` until it is done.
    fn spawn(
        &self,
        stream: TcpStream,
        connection: Arc<Connection>,
        stop: watch::Receiver<bool>,
        running: mpsc::Sender<()>,
    );

    /// Answers (or just closes) a connection that `refusal` keeps out.
    fn refuse(&self, stream: &TcpStream, refusal: &Refusal);
}

/// Accepts on `listener` under `table`'s caps until `shutdown` resolves, handing each
/// admitted connection to `spawner`; then tells the connection tasks to stop and waits for
/// the last of them.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    table: &Arc<Table>,
    shutdown: impl Future<Output = ()>,
    spawner: &impl Spawn,
) -> io::Result<()> {
    let (stop_sender, stop) = watch::channel(false);
    let (running, mut all_done) = mpsc::channel::<()>(1);
    let mut shutdown = std::pin::pin!(shutdown);
    let counters = table.counters();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                recover_from_accept_error(table, &error).await;
                continue;
            }
        };
        let connection = match table.admit(peer.ip()) {
            Ok(connection) => connection,
            Err(refusal) => {
                match refusal {
                    Refusal::AddressFull => &counters.refused_address_full,
                    Refusal::ServerFull => &counters.refused_server_full,
                }
                .fetch_add(1, Ordering::Relaxed);
                spawner.refuse(&stream, &refusal);
                continue;
            }
        };
        counters.accepted.fetch_add(1, Ordering::Relaxed);
        counters.open.store(table.open() as u64, Ordering::Relaxed);
        spawner.spawn(stream, connection, stop.clone(), running.clone());
    }
    drop(listener);
    let _ = stop_sender.send(true);
    drop(running);
    drop(stop);
    // Every connection task holds a sender; `None` once the last has finished.
    let _ = all_done.recv().await;
    Ok(())
}

/// After a failed `accept`: unless the client merely went away, frees a descriptor (the
/// likely cause is running out of them) and pauses before the next try.
async fn recover_from_accept_error(table: &Table, error: &io::Error) {
    if !matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        // Most likely out of descriptors: free one, let it close, retry.
        table.evict_any();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Answers a connection that `refusal` keeps out: 429 at the address's cap, 503 at the
/// server's.
fn refuse_over_cap(stream: &TcpStream, refusal: &Refusal, limits: &Limits) {
    match refusal {
        Refusal::AddressFull => {
            refuse(
                stream,
                StatusCode::TOO_MANY_REQUESTS,
                &format!(
                    "Too many connections: {} from your address are all handling \
                     requests (max_connections_per_ip); retry later",
                    limits.max_connections_per_ip
                ),
            );
        }
        Refusal::ServerFull => {
            refuse(
                stream,
                StatusCode::SERVICE_UNAVAILABLE,
                &format!(
                    "Service unavailable: all {} connections are handling requests \
                     (max_connections); retry later",
                    limits.max_connections
                ),
            );
        }
    }
}

/// What each connection task of one [`serve`] call starts with.
struct Spawner {
    router: Router,
    limits: Arc<Limits>,
    state: SharedState,
    table: Arc<Table>,
}

impl Spawn for Spawner {
    fn refuse(&self, stream: &TcpStream, refusal: &Refusal) {
        refuse_over_cap(stream, refusal, &self.limits);
    }

    fn spawn(
        &self,
        stream: TcpStream,
        connection: Arc<Connection>,
        stop: watch::Receiver<bool>,
        running: mpsc::Sender<()>,
    ) {
        let task = ConnectionTask {
            front: Front {
                router: self.router.clone(),
                connection,
                limits: Arc::clone(&self.limits),
                state: Arc::clone(&self.state),
            },
            table: Arc::clone(&self.table),
            stop,
            _running: running,
        };
        tokio::spawn(task.run(stream));
    }
}

struct ConnectionTask {
    front: Front,
    table: Arc<Table>,
    stop: watch::Receiver<bool>,
    _running: mpsc::Sender<()>,
}

impl ConnectionTask {
    async fn run(mut self, stream: TcpStream) {
        let connection = Arc::clone(&self.front.connection);
        let limits = Arc::clone(&self.front.limits);
        let io = TokioIo::new(TrackedIo {
            stream,
            connection: Arc::clone(&connection),
            http1: true,
        });
        let served =
            hyper::server::conn::http1::Builder::new().serve_connection(io, self.front.clone());
        let mut served = std::pin::pin!(served);
        // When the server stops: connections not handling a request close at once, a body
        // still arriving gets SHUTDOWN_BODY_GRACE_MS, requests being handled finish.
        let mut stopping_at = (*self.stop.borrow()).then(now_ms);
        if stopping_at.is_some() {
            served.as_mut().graceful_shutdown();
        }
        let counters = &self.front.state.metrics.connections;
        loop {
            if connection.evicted.load(Ordering::Acquire) {
                break;
            }
            let phase = connection.phase.load(Ordering::Acquire);
            let body_cut_at = stopping_at.map(|at| at + SHUTDOWN_BODY_GRACE_MS);
            if stopping_at.is_some() && matches!(phase, HEAD | IDLE) {
                break;
            }
            let mut deadline = connection.deadline_ms(&limits);
            if phase == BODY {
                if let Some(cut) = body_cut_at {
                    if now_ms() >= cut {
                        break;
                    }
                    deadline = Some(deadline.map_or(cut, |at| at.min(cut)));
                }
            }
            let changed = connection.changed.notified();
            tokio::select! {
                _ = served.as_mut() => break,
                () = changed => {}
                () = sleep_until_ms(deadline) => {
                    if timed_out(&connection, &limits, body_cut_at, counters) {
                        break;
                    }
                }
                _ = self.stop.changed(), if stopping_at.is_none() => {
                    stopping_at = Some(now_ms());
                    served.as_mut().graceful_shutdown();
                }
            }
        }
        self.table.remove(&connection);
    }
}

/// Sleeps until `deadline` (`now_ms` time), or for ever without one.
pub(crate) async fn sleep_until_ms(deadline: Option<u64>) {
    match deadline {
        Some(ms) => tokio::time::sleep_until(instant_of(ms)).await,
        None => std::future::pending().await,
    }
}

/// Whether `connection` must close now that its timer fired: its body is past the
/// shutdown cut (`body_cut_at`) or its deadline has passed (counted in `counters` by
/// cause).
pub(crate) fn timed_out(
    connection: &Connection,
    limits: &Limits,
    body_cut_at: Option<u64>,
    counters: &ConnectionMetrics,
) -> bool {
    let now = now_ms();
    if connection.phase.load(Ordering::Acquire) == BODY && body_cut_at.is_some_and(|cut| now >= cut)
    {
        return true;
    }
    if connection.deadline_ms(limits).is_some_and(|at| at <= now) {
        let counter = if connection.write_blocked_ms.load(Ordering::Relaxed) != 0 {
            &counters.closed_write_timeout
        } else if connection.phase.load(Ordering::Acquire) == HEAD {
            &counters.closed_header_timeout
        } else {
            &counters.closed_idle_timeout
        };
        counter.fetch_add(1, Ordering::Relaxed);
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_connections: 4,
            max_connections_per_ip: 2,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            min_body_bytes_per_sec: 4096,
            keep_alive_timeout_ms: 60_000,
            max_request_bytes: 1 << 20,
        }
    }

    fn table(limits: Limits) -> (Table, tempfile::TempDir) {
        let directory = tempfile::tempdir().unwrap();
        let state = crate::AppState::open(ServerConfig {
            data_dir: directory.path().to_path_buf(),
            ..ServerConfig::default()
        })
        .unwrap();
        let table = Table {
            registry: Mutex::new(Registry::default()),
            limits,
            state: Arc::new(state),
        };
        (table, directory)
    }

    #[test]
    fn ipv6_addresses_count_by_their_64_prefix() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(address_key(a), address_key(b));
        assert_ne!(address_key(a), address_key(c));
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(address_key(mapped), "10.0.0.1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn caps_evict_the_stalest_connection_that_is_not_busy() {
        let (table, _directory) = table(limits());
        let one: IpAddr = "10.0.0.1".parse().unwrap();
        let two: IpAddr = "10.0.0.2".parse().unwrap();
        let first = table.admit(one).ok().unwrap();
        let second = table.admit(one).ok().unwrap();
        // The address is at its cap: its older connection (same staleness) goes.
        let third = table.admit(one).ok().unwrap();
        assert!(first.evicted.load(Ordering::Acquire));
        assert!(!second.evicted.load(Ordering::Acquire));
        // Busy connections are never evicted: with both busy the address is refused.
        second.set_phase(BUSY);
        third.set_phase(BUSY);
        assert!(matches!(table.admit(one), Err(Refusal::AddressFull)));
        // The server's cap: two more from another address fill it ...
        let fourth = table.admit(two).ok().unwrap();
        let _fifth = table.admit(two).ok().unwrap();
        assert_eq!(table.open(), 4);
        // ... and a sixth from a third address evicts from the address holding the
        // most evictable connections, not the busy ones.
        let six = table.admit("10.0.0.3".parse().unwrap()).ok().unwrap();
        assert!(fourth.evicted.load(Ordering::Acquire));
        assert!(!second.evicted.load(Ordering::Acquire) && !third.evicted.load(Ordering::Acquire));
        assert_eq!(table.open(), 4);
        // All busy: refused, and nothing evicted for it.
        for connection in table.registry.lock().connections.values() {
            connection.set_phase(BUSY);
        }
        assert!(matches!(
            table.admit("10.0.0.4".parse().unwrap()),
            Err(Refusal::ServerFull)
        ));
        assert_eq!(table.open(), 4);
        assert!(!six.evicted.load(Ordering::Acquire));
    }

    #[test]
    fn deadlines_follow_the_phase() {
        let limits = limits();
        let (table, _directory) = table(limits.clone());
        let connection = table.admit("10.0.0.1".parse().unwrap()).ok().unwrap();
        let since = connection.since_ms.load(Ordering::Relaxed);
        assert_eq!(connection.deadline_ms(&limits), Some(since + 10_000));
        connection.set_phase(BUSY);
        assert_eq!(connection.deadline_ms(&limits), None);
        connection
            .write_blocked_ms
            .store(since + 1, Ordering::Relaxed);
        assert_eq!(connection.deadline_ms(&limits), Some(since + 30_000));
        connection.write_blocked_ms.store(0, Ordering::Relaxed);
        connection.set_phase(IDLE);
        let since = connection.since_ms.load(Ordering::Relaxed);
        assert_eq!(connection.deadline_ms(&limits), Some(since + 60_000));
    }
}
