//! The server under abusive clients, over real loopback sockets: many large bodies at once
//! (bounded in aggregate), a declared body over the limit (refused before it is sent),
//! stalled heads, stalled bodies and idle keep-alive connections (closed after their
//! timeouts), one address opening more connections than its share, and thousands of
//! half-open connections against a server with few file descriptors, while `/healthz` and
//! a search keep answering.
//!
//! Settings are given through `ServerConfig::apply_environment`, by the names of the
//! `SAGITTA_*` variables. The last test runs the server in a child process (this test
//! binary run again, see `child_server_process`) so that lowering its open-file limit does
//! not touch the clients' descriptors.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sagitta_server::{AppState, ServerConfig};
use serde_json::Value;

/// A server on a loopback port of its own runtime, stopped when dropped.
struct Running {
    runtime: Option<tokio::runtime::Runtime>,
    address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    serving: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    _directory: tempfile::TempDir,
}

fn settings_lookup(settings: &[(&str, &str)], name: &str) -> Option<String> {
    settings
        .iter()
        .find(|(key, _)| *key == name)
        .map(|(_, value)| (*value).to_string())
}

fn start(settings: &[(&str, &str)]) -> Running {
    let directory = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::default();
    config
        .apply_environment(|name| settings_lookup(settings, name))
        .unwrap();
    config.data_dir = directory.path().to_path_buf();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    let state = Arc::new(AppState::open(config).unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = runtime.spawn(sagitta_server::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    Running {
        runtime: Some(runtime),
        address,
        stop: Some(stop),
        serving: Some(serving),
        _directory: directory,
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The message of Qdrant's error envelope; panics on any other body.
    fn error(&self) -> String {
        let body: Value = serde_json::from_str(&self.body)
            .unwrap_or_else(|_| panic!("{}: body is not JSON: {:?}", self.status, self.body));
        body["status"]["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: not the error envelope: {body}", self.status))
            .to_string()
    }
}

/// Reads one response (head, then a `Content-Length` body or everything to EOF).
fn read_answer(stream: &mut TcpStream) -> Result<Answer, String> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match stream.read(&mut chunk) {
            Ok(0) => {
                return Err(format!(
                    "closed before a full response head ({} bytes)",
                    buffer.len()
                ))
            }
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            Err(error) => return Err(format!("reading the response head: {error}")),
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("bad status line in {head:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(key, value)| (key.trim().to_string(), value.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.parse::<usize>().ok());
    let mut body = buffer[head_end..].to_vec();
    match length {
        Some(length) => {
            while body.len() < length {
                match stream.read(&mut chunk) {
                    Ok(0) => return Err("closed inside the response body".to_string()),
                    Ok(n) => body.extend_from_slice(&chunk[..n]),
                    Err(error) => return Err(format!("reading the response body: {error}")),
                }
            }
            body.truncate(length);
        }
        None => loop {
            match stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => body.extend_from_slice(&chunk[..n]),
                Err(error) => return Err(format!("reading the response body: {error}")),
            }
        },
    }
    Ok(Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn connect(address: SocketAddr, timeout: Duration) -> Result<TcpStream, String> {
    let stream = TcpStream::connect_timeout(&address, timeout)
        .map_err(|error| format!("connect: {error}"))?;
    stream.set_read_timeout(Some(timeout)).unwrap();
    stream.set_write_timeout(Some(timeout)).unwrap();
    Ok(stream)
}

fn raw_request(method: &str, path: &str, body: &str, close: bool) -> Vec<u8> {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n{}\r\n{body}",
        body.len(),
        if close { "Connection: close\r\n" } else { "" }
    )
    .into_bytes()
}

/// One request on a new connection, answered within `timeout`.
fn call(
    address: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
    timeout: Duration,
) -> Result<Answer, String> {
    let mut stream = connect(address, timeout)?;
    stream
        .write_all(&raw_request(method, path, body, true))
        .map_err(|error| format!("write: {error}"))?;
    read_answer(&mut stream)
}

fn ok(address: SocketAddr, method: &str, path: &str, body: &str) {
    let answer = call(address, method, path, body, Duration::from_secs(10)).unwrap();
    assert_eq!(answer.status, 200, "{method} {path}: {}", answer.body);
}

/// Reads what the server sends until it closes the connection (true) or `within` passes
/// with the connection still open (false); the bytes read are appended to `received`.
fn closed_within(stream: &mut TcpStream, within: Duration, received: &mut Vec<u8>) -> bool {
    let deadline = Instant::now() + within;
    let mut chunk = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut chunk) {
            Ok(0) => return true,
            Ok(n) => received.extend_from_slice(&chunk[..n]),
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}

/// Whether the server has closed `stream`, without waiting (pending bytes are skipped).
fn closed_now(stream: &TcpStream) -> bool {
    let mut reader = stream;
    stream.set_nonblocking(true).unwrap();
    let mut chunk = [0u8; 4096];
    let closed = loop {
        match reader.read(&mut chunk) {
            Ok(0) => break true,
            Ok(_) => {}
            Err(error) if error.kind() == ErrorKind::WouldBlock => break false,
            Err(_) => break true,
        }
    };
    stream.set_nonblocking(false).unwrap();
    closed
}

fn upsert_body(id: u64, length: usize) -> String {
    let mut body = format!(r#"{{"points": [{{"id": {id}, "vector": [1, 0, 0, 0]}}]}}"#);
    assert!(body.len() <= length);
    body.extend(std::iter::repeat_n(' ', length - body.len()));
    body
}

fn create_collection(address: SocketAddr) {
    ok(
        address,
        "PUT",
        "/collections/docs",
        r#"{"vectors": {"size": 4, "distance": "Dot"}}"#,
    );
}

/// Item 1: bodies being received are bounded in aggregate. Three 3 MiB uploads are held
/// part-sent against a 10 MiB aggregate limit; a fourth is refused at once with 503 (or
/// 429) and `Retry-After`; once the three finish, large uploads succeed again.
#[test]
fn bodies_in_flight_are_bounded_in_aggregate() {
    const MIB: usize = 1 << 20;
    let server = start(&[
        ("SAGITTA_MAX_REQUEST_BYTES", "4194304"),
        ("SAGITTA_MAX_INFLIGHT_REQUEST_BYTES", "10485760"),
    ]);
    let address = server.address;
    create_collection(address);
    let path = "/collections/docs/points?wait=true";
    let mut held = Vec::new();
    for id in 0..3 {
        let request = raw_request("PUT", path, &upsert_body(id, 3 * MIB), false);
        let mut stream = connect(address, Duration::from_secs(10)).unwrap();
        let head = request.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        stream.write_all(&request[..head + MIB]).unwrap();
        held.push((stream, request, head + MIB));
    }
    std::thread::sleep(Duration::from_millis(300));

    let started = Instant::now();
    let mut fourth = connect(address, Duration::from_secs(5)).unwrap();
    let request = raw_request("PUT", path, &upsert_body(9, 3 * MIB), false);
    let head = request.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    fourth.write_all(&request[..head]).unwrap();
    let answer = read_answer(&mut fourth).expect("the fourth upload is answered at once");
    println!(
        "fourth upload refused in {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    assert!(
        answer.status == 503 || answer.status == 429,
        "{} {}",
        answer.status,
        answer.body
    );
    assert!(answer.header("retry-after").is_some(), "no Retry-After");
    let error = answer.error();
    assert!(error.contains("max_inflight_request_bytes"), "{error}");

    for (mut stream, request, sent) in held {
        stream.write_all(&request[sent..]).unwrap();
        let answer = read_answer(&mut stream).unwrap();
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    for id in 10..12 {
        let answer = call(
            address,
            "PUT",
            path,
            &upsert_body(id, 3 * MIB),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let count = call(
        address,
        "POST",
        "/collections/docs/points/count",
        "{}",
        Duration::from_secs(10),
    )
    .unwrap();
    assert!(count.body.contains("\"count\":5"), "{}", count.body);
}

/// Item 3: a `Content-Length` over `max_request_bytes` is refused with 413 in the envelope
/// before any of the body is sent.
#[test]
fn an_oversize_declared_body_is_refused_before_it_is_sent() {
    let server = start(&[("SAGITTA_MAX_REQUEST_BYTES", "4194304")]);
    let address = server.address;
    create_collection(address);
    let mut stream = connect(address, Duration::from_secs(5)).unwrap();
    stream
        .write_all(
            b"PUT /collections/docs/points HTTP/1.1\r\nHost: localhost\r\n\
              Content-Type: application/json\r\nContent-Length: 104857600\r\n\r\n",
        )
        .unwrap();
    let answer = read_answer(&mut stream).expect("answered without the body");
    assert_eq!(answer.status, 413, "{}", answer.body);
    assert!(answer.error().contains("4194304"), "{}", answer.body);
}

/// A chunked body (no declared length) is held to `max_request_bytes` as it arrives.
#[test]
fn a_chunked_body_is_bounded_as_it_arrives() {
    let server = start(&[("SAGITTA_MAX_REQUEST_BYTES", "65536")]);
    let address = server.address;
    create_collection(address);
    let chunked = |body: &str| {
        let mut request = b"PUT /collections/docs/points?wait=true HTTP/1.1\r\nHost: localhost\r\n\
            Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
        for piece in body.as_bytes().chunks(10_000) {
            request.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            request.extend_from_slice(piece);
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"0\r\n\r\n");
        let mut stream = connect(address, Duration::from_secs(5)).unwrap();
        // The server may answer and close before all of an oversize body is sent.
        let _ = stream.write_all(&request);
        read_answer(&mut stream).unwrap()
    };
    let answer = chunked(&upsert_body(1, 100_000));
    assert_eq!(answer.status, 413, "{}", answer.body);
    assert!(answer.error().contains("65536"), "{}", answer.body);
    let answer = chunked(&upsert_body(2, 60_000));
    assert_eq!(answer.status, 200, "{}", answer.body);
}

/// Item 3: a half-sent head, a declared body that never comes, an idle keep-alive
/// connection and a connection that sends nothing are each closed after their timeout
/// (1 s here); a keep-alive connection in use is not.
#[test]
fn stalled_and_idle_connections_are_closed() {
    let server = start(&[
        ("SAGITTA_HEADER_READ_TIMEOUT_SECS", "1"),
        ("SAGITTA_BODY_READ_TIMEOUT_SECS", "1"),
        ("SAGITTA_KEEP_ALIVE_TIMEOUT_SECS", "1"),
    ]);
    let address = server.address;
    create_collection(address);
    let timeout = Duration::from_secs(5);

    let mut half_head = connect(address, timeout).unwrap();
    half_head
        .write_all(b"POST /collections/docs/points/search HTTP/1.1\r\nHost: loc")
        .unwrap();
    let mut no_body = connect(address, timeout).unwrap();
    no_body
        .write_all(
            b"PUT /collections/docs/points HTTP/1.1\r\nHost: localhost\r\n\
              Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"points\"",
        )
        .unwrap();
    let mut silent = connect(address, timeout).unwrap();
    let mut idle = connect(address, timeout).unwrap();
    for _ in 0..3 {
        // Keep-alive works: three requests on one connection.
        idle.write_all(&raw_request("GET", "/healthz", "", false))
            .unwrap();
        assert_eq!(read_answer(&mut idle).unwrap().status, 200);
        std::thread::sleep(Duration::from_millis(200));
    }

    let started = Instant::now();
    let mut received = Vec::new();
    for (name, stream) in [
        ("half-sent head", &mut half_head),
        ("stalled body", &mut no_body),
        ("silent connection", &mut silent),
        ("idle keep-alive connection", &mut idle),
    ] {
        let mut bytes = Vec::new();
        let left = Duration::from_secs(8).saturating_sub(started.elapsed());
        assert!(
            closed_within(stream, left, &mut bytes),
            "{name} still open after {:.1} s",
            started.elapsed().as_secs_f64()
        );
        if name == "stalled body" {
            received = bytes;
        }
    }
    println!(
        "all four closed within {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let text = String::from_utf8_lossy(&received);
    assert!(
        text.starts_with("HTTP/1.1 408"),
        "stalled body got {text:?}"
    );
    assert!(text.contains("\"error\""), "{text:?}");
}

/// A shutdown closes idle and half-sent connections at once and gives a body still
/// arriving a few seconds, not its whole time limit (30 s by default, more as bytes come):
/// a stalled upload cannot hold a restart up.
#[test]
fn shutdown_does_not_wait_for_stalled_clients() {
    let mut server = start(&[]);
    let address = server.address;
    create_collection(address);
    let mut stalled = Vec::new();
    for head in [
        &b"PUT /collections/docs/points HTTP/1.1\r\nHost: localhost\r\n\
           Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"[..],
        b"POST /collections/docs/points/search HTTP/1.1\r\nHost: loc",
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n",
    ] {
        let mut stream = connect(address, Duration::from_secs(5)).unwrap();
        stream.write_all(head).unwrap();
        stalled.push(stream);
    }
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let _ = server.stop.take().unwrap().send(());
    let serving = server.serving.take().unwrap();
    let runtime = server.runtime.as_ref().unwrap();
    let stopped =
        runtime.block_on(async { tokio::time::timeout(Duration::from_secs(15), serving).await });
    let seconds = started.elapsed().as_secs_f64();
    println!("stopped {seconds:.1} s after the signal");
    assert!(stopped.is_ok(), "still serving after {seconds:.1} s");
    assert!(seconds < 10.0, "stopping took {seconds:.1} s");
}

/// Item 3: one address holding more than `max_connections_per_ip` connections loses its
/// oldest stalled ones to its new ones; other addresses are not affected.
#[test]
fn one_address_holds_at_most_its_share() {
    let server = start(&[("SAGITTA_MAX_CONNECTIONS_PER_IP", "20")]);
    let address = server.address;
    let runtime = server.runtime.as_ref().unwrap();
    let from_other_address = || {
        runtime.block_on(async {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
            let stream = socket.connect(address).await.unwrap();
            let stream = stream.into_std().unwrap();
            stream.set_nonblocking(false).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            stream
        })
    };
    let mut held = Vec::new();
    for _ in 0..60 {
        let mut stream = from_other_address();
        stream
            .write_all(b"POST /collections/docs/points/search HTTP/1.1\r\nHost: lo")
            .unwrap();
        held.push(stream);
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(500));
    let open = held.iter().filter(|s| !closed_now(s)).count();
    println!("{open} of 60 stalled connections from 127.0.0.2 still open");
    assert!(open <= 20, "{open} connections of one address open");
    assert!(
        held.iter().rev().take(10).all(|s| !closed_now(s)),
        "the newest connections were closed instead of the oldest"
    );
    // The address may still make requests (its stalled connections make room) ...
    let mut fresh = from_other_address();
    fresh
        .write_all(&raw_request("GET", "/healthz", "", true))
        .unwrap();
    assert_eq!(read_answer(&mut fresh).unwrap().status, 200);
    // ... and other addresses are unaffected.
    ok(address, "GET", "/healthz", "");
}

/// Not a test on its own: with `SAGITTA_ABUSE_CHILD_SERVER` set, this test binary, run
/// again by `health_answers_while_thousands_of_connections_stall`, becomes a server with an
/// open-file limit of `SAGITTA_ABUSE_CHILD_NOFILE`, configured from the environment, that
/// prints its port and serves until its standard input closes.
#[test]
fn child_server_process() {
    if std::env::var_os("SAGITTA_ABUSE_CHILD_SERVER").is_none() {
        return;
    }
    let nofile: u64 = std::env::var("SAGITTA_ABUSE_CHILD_NOFILE")
        .unwrap()
        .parse()
        .unwrap();
    let (_, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
    rlimit::setrlimit(rlimit::Resource::NOFILE, nofile, hard).unwrap();
    let directory = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::default();
    config
        .apply_environment(|name| std::env::var(name).ok())
        .unwrap();
    config.data_dir = directory.path().to_path_buf();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let state = Arc::new(AppState::open(config).unwrap());
    runtime.block_on(async move {
        // The accept queue a deployed server asks for (`sagitta_server::bind`): tokio's
        // `bind` asks for 128, which the attack's bursts overflow whenever the accept loop
        // waits a few milliseconds for a core (the SYNs are dropped, retried a second later).
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(4096).unwrap();
        println!(
            "SAGITTA_ABUSE_PORT={}",
            listener.local_addr().unwrap().port()
        );
        std::io::stdout().flush().unwrap();
        let stdin_closed = async {
            let _ = tokio::task::spawn_blocking(|| {
                let mut sink = Vec::new();
                let _ = std::io::stdin().read_to_end(&mut sink);
            })
            .await;
        };
        let serving = tokio::spawn(sagitta_server::serve(listener, state, stdin_closed));
        let _ = tokio::time::timeout(Duration::from_secs(60), serving).await;
    });
}

/// The child server, killed when dropped.
struct ChildServer {
    child: Child,
    address: SocketAddr,
}

impl ChildServer {
    fn start(nofile: u64, settings: &[(&str, &str)]) -> ChildServer {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "--exact",
                "child_server_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("SAGITTA_ABUSE_CHILD_SERVER", "1")
            .env("SAGITTA_ABUSE_CHILD_NOFILE", nofile.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (name, value) in settings {
            command.env(name, value);
        }
        let mut child = command.spawn().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut text = Vec::new();
        let mut byte = [0u8; 1];
        let port = loop {
            assert_eq!(stdout.read(&mut byte).unwrap(), 1, "child exited early");
            text.push(byte[0]);
            let line = String::from_utf8_lossy(&text);
            if let Some(rest) = line.rsplit("SAGITTA_ABUSE_PORT=").next() {
                if line.contains("SAGITTA_ABUSE_PORT=") && rest.ends_with('\n') {
                    break rest.trim().parse::<u16>().unwrap();
                }
            }
        };
        ChildServer {
            child,
            address: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Item 3, the probe's attack at a smaller scale: a server limited to 1,024 open files
/// (the probe's had 20,000) gets thousands of connections from one client at almost no
/// bandwidth: half-sent heads, declared bodies that never come, idle keep-alive
/// connections. Between the waves a normal client (new connection each time, as a health
/// checker makes) calls `/healthz` and a search; each must answer within 5 s (a liveness
/// bound; the measured figures are printed). Before the fix the server ran out of
/// descriptors and `/healthz` went unanswered until the attack ended.
#[test]
fn health_answers_while_thousands_of_connections_stall() {
    const SERVER_NOFILE: u64 = 1_024;
    const WANTED: u64 = 3_000;
    let soft = rlimit::increase_nofile_limit(WANTED + 256).unwrap();
    let attackers = WANTED.min(soft.saturating_sub(256));
    if attackers < WANTED {
        println!("open-file limit {soft}: attacking with {attackers} connections, not {WANTED}");
    }
    let server = ChildServer::start(SERVER_NOFILE, &[]);
    let address = server.address;
    create_collection(address);
    ok(
        address,
        "PUT",
        "/collections/docs/points?wait=true",
        r#"{"points": [{"id": 1, "vector": [1, 0, 0, 0]}, {"id": 2, "vector": [0, 1, 0, 0]}]}"#,
    );
    let search = r#"{"vector": [1, 0, 0, 0], "limit": 1}"#;

    let started = Instant::now();
    let mut held: Vec<TcpStream> = Vec::new();
    let mut connect_failures = 0u32;
    let mut latencies = Vec::new();
    let rounds = 10u64;
    for round in 0..rounds {
        for i in 0..attackers / rounds {
            if connect_failures >= 3 {
                break;
            }
            let mut stream = match connect(address, Duration::from_secs(1)) {
                Ok(stream) => stream,
                Err(error) => {
                    println!("attack connection {}: {error}", held.len());
                    connect_failures += 1;
                    continue;
                }
            };
            let bytes: &[u8] = match i % 3 {
                0 => b"POST /collections/docs/points/search HTTP/1.1\r\nHost: localho",
                1 => {
                    b"PUT /collections/docs/points HTTP/1.1\r\nHost: localhost\r\n\
                      Content-Type: application/json\r\nContent-Length: 30000000\r\n\r\n"
                }
                // Its answer is left unread: the connection then idles, kept alive.
                _ => b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n",
            };
            if stream.write_all(bytes).is_ok() {
                held.push(stream);
            }
        }
        for (method, path, body) in [
            ("GET", "/healthz", ""),
            ("POST", "/collections/docs/points/search", search),
        ] {
            let asked = Instant::now();
            let answer = call(address, method, path, body, Duration::from_secs(5));
            let seconds = asked.elapsed().as_secs_f64();
            match answer {
                Ok(answer) if answer.status == 200 => latencies.push((path, seconds)),
                Ok(answer) => panic!(
                    "round {round}: {method} {path} answered {} {} with {} attack connections made",
                    answer.status,
                    answer.body,
                    held.len()
                ),
                Err(error) => panic!(
                    "round {round}: {method} {path} unanswered after {seconds:.1} s ({error}) \
                     with {} attack connections made",
                    held.len()
                ),
            }
            assert!(seconds < 5.0, "{method} {path} took {seconds:.1} s");
        }
    }
    let open = held.iter().filter(|s| !closed_now(s)).count();
    for path in ["/healthz", "/collections/docs/points/search"] {
        let mut seconds: Vec<f64> = latencies
            .iter()
            .filter(|(p, _)| *p == path)
            .map(|(_, s)| *s)
            .collect();
        seconds.sort_by(f64::total_cmp);
        println!(
            "{path} under attack: {} calls, median {:.1} ms, max {:.1} ms",
            seconds.len(),
            seconds[seconds.len() / 2] * 1e3,
            seconds[seconds.len() - 1] * 1e3
        );
    }
    println!(
        "{} attack connections made in {:.1} s ({connect_failures} connects failed), \
         {open} still open at the end (server open-file limit {SERVER_NOFILE})",
        held.len(),
        started.elapsed().as_secs_f64()
    );
    let metrics = call(address, "GET", "/metrics", "", Duration::from_secs(5)).unwrap();
    let mut server_open = None;
    for line in metrics.body.lines() {
        if line.starts_with("sagitta_http_connections") || line.contains("bodies_refused") {
            println!("{line}");
        }
        if let Some(value) = line.strip_prefix("sagitta_http_connections_open ") {
            server_open = value.trim().parse::<u64>().ok();
        }
    }
    // The server never held more than its share of its descriptors.
    let server_open = server_open.expect("sagitta_http_connections_open in /metrics");
    assert!(server_open <= SERVER_NOFILE / 4 * 3, "{server_open} open");
    assert!(
        held.len() as u64 >= attackers * 9 / 10,
        "the attack itself was refused"
    );
}
