//! The HTTP side: hyper 1's legacy pooled client (HTTP/1.1, keep-alive, TCP_NODELAY, no
//! TLS), one client (and so one connection) per simulated user, with a connector that counts
//! the connections it opens.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

/// Wraps hyper-util's connector and counts every connection it opens.
#[derive(Clone)]
pub struct CountingConnector {
    inner: HttpConnector,
    opened: Arc<AtomicU64>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ConnectFuture = Pin<Box<dyn Future<Output = Result<TokioIo<TcpStream>, BoxError>> + Send>>;

impl CountingConnector {
    /// A connector (TCP_NODELAY, plain http) that adds one to `opened` per connection.
    pub fn new(opened: &Arc<AtomicU64>) -> CountingConnector {
        let mut inner = HttpConnector::new();
        inner.set_nodelay(true);
        inner.enforce_http(true);
        CountingConnector {
            inner,
            opened: Arc::clone(opened),
        }
    }
}

impl tower_service::Service<Uri> for CountingConnector {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = ConnectFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(BoxError::from)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        self.opened.fetch_add(1, Ordering::Relaxed);
        let connecting = self.inner.call(uri);
        Box::pin(async move { connecting.await.map_err(BoxError::from) })
    }
}

pub type HttpClient = Client<CountingConnector, Full<Bytes>>;

/// A client that keeps at most one idle connection: used by one task issuing one request at
/// a time, it opens one connection and reuses it (a new one only after an error).
pub fn new_client(opened: &Arc<AtomicU64>) -> HttpClient {
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(1)
        .pool_idle_timeout(None)
        .retry_canceled_requests(false)
        .build(CountingConnector::new(opened))
}

/// Where the server is and how to authenticate.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// `http://host:port`, no trailing slash.
    pub base: String,
    pub api_key: Option<HeaderValue>,
    pub timeout: Duration,
}

/// A finished exchange.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Bytes,
    /// `Retry-After` in seconds, when sent.
    pub retry_after: Option<f64>,
}

/// A failure below HTTP: connect, I/O, timeout or a malformed response.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TransportError(pub String);

impl Endpoint {
    pub fn new(url: &str, api_key: Option<&str>, timeout: Duration) -> Result<Endpoint, String> {
        let base = url.trim_end_matches('/').to_string();
        let uri: Uri = base
            .parse()
            .map_err(|e| format!("--url {url:?} is not a URL: {e}"))?;
        if uri.scheme_str() != Some("http") {
            return Err(format!("--url {url:?}: only http:// is supported (no TLS)"));
        }
        if uri.path() != "/" && !uri.path().is_empty() {
            return Err(format!("--url {url:?}: give the server root, no path"));
        }
        let api_key = api_key
            .map(|key| {
                HeaderValue::from_str(key).map_err(|_| "--api-key is not a valid header value")
            })
            .transpose()?;
        Ok(Endpoint {
            base,
            api_key,
            timeout,
        })
    }

    /// The URI of `path` (which starts with '/').
    pub fn uri(&self, path: &str) -> Result<Uri, String> {
        format!("{}{path}", self.base)
            .parse()
            .map_err(|e| format!("bad request path {path:?}: {e}"))
    }

    fn request(&self, method: Method, uri: Uri, body: Bytes) -> Request<Full<Bytes>> {
        let mut builder = Request::builder().method(method).uri(uri);
        if !body.is_empty() {
            builder = builder.header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        if let Some(key) = &self.api_key {
            builder = builder.header("api-key", key.clone());
        }
        builder
            .body(Full::new(body))
            .expect("a request from a valid URI builds")
    }

    /// Sends one request and reads the whole response body, within the endpoint's timeout.
    pub async fn send(
        &self,
        client: &HttpClient,
        method: Method,
        uri: Uri,
        body: Bytes,
    ) -> Result<Reply, TransportError> {
        let request = self.request(method, uri, body);
        let exchange = async {
            let response = client
                .request(request)
                .await
                .map_err(|e| TransportError(error_chain(&e)))?;
            let status = response.status();
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.trim().parse::<f64>().ok());
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| TransportError(format!("reading the body: {}", error_chain(&e))))?
                .to_bytes();
            Ok(Reply {
                status,
                body,
                retry_after,
            })
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(TransportError(format!(
                "no complete response within {:.1} s",
                self.timeout.as_secs_f64()
            ))),
        }
    }
}

/// An error and its sources, one after another.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A short, printable excerpt of a response body.
pub fn body_excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]);
    text.replace('\n', " ")
}
