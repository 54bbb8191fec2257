//! The upload phase: recreate the collection, upsert pre-serialized batches (JSON bodies,
//! or gRPC messages) with a few requests in flight, then poll until the collection is
//! green.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::{Method, StatusCode, Uri};
use prost::Message;
use sagitta_server::grpc::api::UpsertPoints;
use serde_json::Value;

use crate::grpc::GrpcEndpoint;
use crate::http::{body_excerpt, new_client, Endpoint, HttpClient};
use crate::search::Connection;

/// How the upload went.
#[derive(Clone, Debug, Default)]
pub struct UploadResult {
    pub batches: usize,
    /// Bytes of JSON (REST) or of encoded protobuf (gRPC) sent, retries not counted.
    pub bytes: u64,
    pub seconds: f64,
    /// 429 (REST) or RESOURCE_EXHAUSTED with `retry-after` (gRPC) answers that were
    /// retried after the time the server asked for.
    pub retries: u64,
    pub connections: u64,
}

/// How waiting for green went.
#[derive(Clone, Debug)]
pub struct WaitResult {
    pub seconds: f64,
    pub polls: u64,
    /// `result` of the last `GET /collections/{c}`.
    pub info: Value,
}

/// Collection names go into URL paths unescaped, so only these characters are accepted.
pub fn check_collection_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return Err(format!(
            "--collection {name:?}: use letters, digits, '_', '-' and '.' only"
        ));
    }
    Ok(())
}

fn unexpected(what: &str, status: StatusCode, body: &[u8]) -> String {
    format!("{what}: HTTP {status}: {}", body_excerpt(body))
}

/// `DELETE` (a missing collection is fine) then `PUT` with `create_body`.
pub async fn recreate_collection(
    endpoint: &Endpoint,
    client: &HttpClient,
    name: &str,
    create_body: Bytes,
) -> Result<(), String> {
    let uri = endpoint.uri(&format!("/collections/{name}"))?;
    let reply = endpoint
        .send(client, Method::DELETE, uri.clone(), Bytes::new())
        .await
        .map_err(|e| format!("DELETE /collections/{name}: {e}"))?;
    if reply.status != StatusCode::OK && reply.status != StatusCode::NOT_FOUND {
        return Err(unexpected(
            &format!("DELETE /collections/{name}"),
            reply.status,
            &reply.body,
        ));
    }
    let reply = endpoint
        .send(client, Method::PUT, uri, create_body)
        .await
        .map_err(|e| format!("PUT /collections/{name}: {e}"))?;
    if reply.status != StatusCode::OK {
        return Err(unexpected(
            &format!("PUT /collections/{name}"),
            reply.status,
            &reply.body,
        ));
    }
    Ok(())
}

/// The batches of an upload and the API they go over.
#[derive(Clone)]
pub enum Batches {
    /// `PUT /collections/{c}/points?wait=false` with each body.
    Rest {
        endpoint: Endpoint,
        uri: Uri,
        bodies: Arc<Vec<Bytes>>,
    },
    /// `Points/Upsert` with each message (`wait=false`).
    Grpc {
        endpoint: GrpcEndpoint,
        messages: Arc<Vec<UpsertPoints>>,
    },
}

impl Batches {
    /// The REST upload of `bodies` into collection `name`.
    pub fn rest(
        endpoint: &Endpoint,
        name: &str,
        bodies: Arc<Vec<Bytes>>,
    ) -> Result<Batches, String> {
        Ok(Batches::Rest {
            endpoint: endpoint.clone(),
            uri: endpoint.uri(&format!("/collections/{name}/points?wait=false"))?,
            bodies,
        })
    }

    fn len(&self) -> usize {
        match self {
            Batches::Rest { bodies, .. } => bodies.len(),
            Batches::Grpc { messages, .. } => messages.len(),
        }
    }

    fn bytes(&self) -> u64 {
        match self {
            Batches::Rest { bodies, .. } => bodies.iter().map(|b| b.len() as u64).sum(),
            Batches::Grpc { messages, .. } => messages.iter().map(|m| m.encoded_len() as u64).sum(),
        }
    }

    fn connect(&self, opened: &Arc<AtomicU64>) -> Connection {
        match self {
            Batches::Rest { .. } => Connection::Http(Box::new(new_client(opened))),
            Batches::Grpc { endpoint, .. } => Connection::Grpc(endpoint.channel(opened)),
        }
    }

    /// Sends batch `i` once: `Ok(None)` when it was taken, `Ok(Some(seconds))` when the
    /// server asked to retry after that long (REST's 429, 0.1 s without `Retry-After`;
    /// gRPC's RESOURCE_EXHAUSTED with `retry-after`), an error for any other answer.
    async fn send(&self, connection: &Connection, i: usize) -> Result<Option<f64>, String> {
        match (self, connection) {
            (
                Batches::Rest {
                    endpoint,
                    uri,
                    bodies,
                },
                Connection::Http(client),
            ) => {
                let reply = endpoint
                    .send(client, Method::PUT, uri.clone(), bodies[i].clone())
                    .await
                    .map_err(|e| format!("upsert batch {i}: {e}"))?;
                match reply.status {
                    StatusCode::OK => Ok(None),
                    StatusCode::TOO_MANY_REQUESTS => Ok(Some(reply.retry_after.unwrap_or(0.1))),
                    status => Err(unexpected(
                        &format!("upsert batch {i}"),
                        status,
                        &reply.body,
                    )),
                }
            }
            (Batches::Grpc { endpoint, messages }, Connection::Grpc(channel)) => {
                match endpoint.upsert(channel, &messages[i]).await {
                    Ok(()) => Ok(None),
                    Err(failure) => match failure.retry_after {
                        Some(wait) if failure.code == Some(tonic::Code::ResourceExhausted) => {
                            Ok(Some(wait))
                        }
                        _ => Err(format!("upsert batch {i}: {}", failure.message)),
                    },
                }
            }
            _ => Err("a batch and a connection of different APIs".to_string()),
        }
    }
}

/// Sends every batch, `parallel` requests in flight, each uploader on its own connection.
/// A batch the server asks to retry later is retried after that time; any other refusal
/// stops the upload with an error.
pub async fn upload(batches: Batches, parallel: usize) -> Result<UploadResult, String> {
    let next = Arc::new(AtomicUsize::new(0));
    let retries = Arc::new(AtomicU64::new(0));
    let opened = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..parallel.max(1) {
        let batches = batches.clone();
        let (next, retries, opened) =
            (Arc::clone(&next), Arc::clone(&retries), Arc::clone(&opened));
        handles.push(tokio::spawn(async move {
            let connection = batches.connect(&opened);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= batches.len() {
                    return Ok(());
                }
                loop {
                    match batches.send(&connection, i).await {
                        Ok(None) => break,
                        Ok(Some(wait)) => {
                            retries.fetch_add(1, Ordering::Relaxed);
                            let wait = wait.clamp(0.01, 10.0);
                            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
                        }
                        Err(error) => {
                            // Stop the other uploaders too.
                            next.store(usize::MAX / 2, Ordering::Relaxed);
                            return Err(error);
                        }
                    }
                }
            }
        }));
    }
    let mut first_error = None;
    for handle in handles {
        let outcome = handle
            .await
            .unwrap_or_else(|e| Err(format!("uploader task failed: {e}")));
        if let Err(error) = outcome {
            first_error.get_or_insert(error);
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    if let Some(error) = first_error {
        return Err(error);
    }
    Ok(UploadResult {
        batches: batches.len(),
        bytes: batches.bytes(),
        seconds,
        retries: retries.load(Ordering::Relaxed),
        connections: opened.load(Ordering::Relaxed),
    })
}

/// `result` of `GET /collections/{name}`.
pub async fn collection_info(
    endpoint: &Endpoint,
    client: &HttpClient,
    name: &str,
) -> Result<Value, String> {
    let uri = endpoint.uri(&format!("/collections/{name}"))?;
    let reply = endpoint
        .send(client, Method::GET, uri, Bytes::new())
        .await
        .map_err(|e| format!("GET /collections/{name}: {e}"))?;
    if reply.status != StatusCode::OK {
        return Err(unexpected(
            &format!("GET /collections/{name}"),
            reply.status,
            &reply.body,
        ));
    }
    let mut document: Value = serde_json::from_slice(&reply.body).map_err(|e| {
        format!(
            "GET /collections/{name}: not JSON ({e}): {}",
            body_excerpt(&reply.body)
        )
    })?;
    Ok(document["result"].take())
}

/// Polls `GET /collections/{name}` every `interval` until `result.status` is "green".
pub async fn wait_for_green(
    endpoint: &Endpoint,
    client: &HttpClient,
    name: &str,
    interval: Duration,
    timeout: Duration,
) -> Result<WaitResult, String> {
    let started = Instant::now();
    let mut polls = 0;
    loop {
        let info = collection_info(endpoint, client, name).await?;
        polls += 1;
        if info["status"] == "green" {
            return Ok(WaitResult {
                seconds: started.elapsed().as_secs_f64(),
                polls,
                info,
            });
        }
        if started.elapsed() > timeout {
            return Err(format!(
                "collection {name} not green after {:.0} s (status {}, points {}, indexed {})",
                timeout.as_secs_f64(),
                info["status"],
                info["points_count"],
                info["indexed_vectors_count"]
            ));
        }
        tokio::time::sleep(interval).await;
    }
}

/// GET `path` and parse the body as JSON (`None` on any failure).
pub async fn get_json(endpoint: &Endpoint, client: &HttpClient, path: &str) -> Option<Value> {
    let uri = endpoint.uri(path).ok()?;
    let reply = endpoint
        .send(client, Method::GET, uri, Bytes::new())
        .await
        .ok()?;
    if reply.status != StatusCode::OK {
        return None;
    }
    serde_json::from_slice(&reply.body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_names_are_checked() {
        assert!(check_collection_name("bench_1.a-b").is_ok());
        assert!(check_collection_name("").is_err());
        assert!(check_collection_name("a/b").is_err());
        assert!(check_collection_name("a b").is_err());
    }
}
