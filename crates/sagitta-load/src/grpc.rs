//! The gRPC side (`--api grpc`): Qdrant's `qdrant.Points` and `qdrant.Qdrant` services
//! over tonic, with the messages of `sagitta-server`'s proto/qdrant.proto (the contract
//! qdrant-client speaks on port 6334). One channel, and so one HTTP/2 connection, per
//! simulated user, opened by the same counting connector as the HTTP side.
//!
//! Request messages are built before the timed phases (as the JSON bodies are); each call
//! clones its message into the request, a copy of the vector data (1.5 KB for a 384-d
//! query), which prost then encodes: packed floats, no text formatting.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use sagitta_server::grpc::api;
use sagitta_server::grpc::api::points_client::PointsClient;
use sagitta_server::grpc::api::qdrant_client::QdrantClient;
use tonic::metadata::{AsciiMetadataValue, MetadataMap};
use tonic::transport::{Channel, Endpoint};

use crate::http::CountingConnector;

/// HTTP/2 flow-control window of each call (the server's too): a batch of points is MBs,
/// and HTTP/2's default 64 KiB window would cost a round trip per 64 KiB.
const WINDOW_BYTES: u32 = 8 << 20;

/// Where the gRPC API is and how to authenticate.
#[derive(Clone, Debug)]
pub struct GrpcEndpoint {
    /// `http://host:port`, as given.
    pub url: String,
    /// Shared: tonic's endpoint settings are large, and every client task holds a copy.
    endpoint: Arc<Endpoint>,
    api_key: Option<AsciiMetadataValue>,
    pub timeout: Duration,
}

/// A failed call: its kind ("gRPC UNAVAILABLE", "timeout", ...), the message, and the
/// server's `retry-after` (seconds) when it sent one.
#[derive(Debug)]
pub struct Failure {
    /// The status code, when the server answered (`None`: a timeout).
    pub code: Option<tonic::Code>,
    pub kind: String,
    pub message: String,
    pub retry_after: Option<f64>,
}

impl Failure {
    fn of(status: &tonic::Status) -> Failure {
        let code = format!("{:?}", status.code());
        Failure {
            code: Some(status.code()),
            kind: format!("gRPC {}", upper_snake(&code)),
            message: format!("gRPC {}: {}", upper_snake(&code), status.message()),
            retry_after: status
                .metadata()
                .get("retry-after")
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.trim().parse::<f64>().ok()),
        }
    }
}

/// `ResourceExhausted` -> `RESOURCE_EXHAUSTED`, the name gRPC's specification uses.
fn upper_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

impl GrpcEndpoint {
    pub fn new(
        url: &str,
        api_key: Option<&str>,
        timeout: Duration,
    ) -> Result<GrpcEndpoint, String> {
        let url = url.trim_end_matches('/').to_string();
        if !url.starts_with("http://") {
            return Err(format!(
                "--grpc-url {url:?}: only http:// is supported (no TLS)"
            ));
        }
        let endpoint = Endpoint::from_shared(url.clone())
            .map_err(|e| format!("--grpc-url {url:?} is not a URL: {e}"))?
            .tcp_nodelay(true)
            .initial_stream_window_size(WINDOW_BYTES)
            .initial_connection_window_size(4 * WINDOW_BYTES);
        let api_key = api_key
            .map(|key| {
                key.parse::<AsciiMetadataValue>()
                    .map_err(|_| "--api-key is not a valid gRPC metadata value".to_string())
            })
            .transpose()?;
        Ok(GrpcEndpoint {
            url,
            endpoint: Arc::new(endpoint),
            api_key,
            timeout,
        })
    }

    /// A channel over one HTTP/2 connection, opened at its first call and counted in
    /// `opened` (again after a broken connection).
    pub fn channel(&self, opened: &Arc<AtomicU64>) -> Channel {
        Endpoint::clone(&self.endpoint).connect_with_connector_lazy(CountingConnector::new(opened))
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Some(key) = &self.api_key {
            request.metadata_mut().insert("api-key", key.clone());
        }
        request
    }

    /// Runs `call` within the endpoint's timeout.
    async fn within<T>(
        &self,
        call: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, Failure> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => Err(Failure::of(&status)),
            Err(_) => Err(Failure {
                code: None,
                kind: "timeout".to_string(),
                message: format!("no response within {:.1} s", self.timeout.as_secs_f64()),
                retry_after: None,
            }),
        }
    }

    /// `Points/Query`: the ids of the hits, in order (uuids dropped: they cannot be row
    /// numbers).
    pub async fn query(
        &self,
        channel: &Channel,
        message: &api::QueryPoints,
    ) -> Result<Vec<u64>, Failure> {
        let mut client = PointsClient::new(channel.clone());
        let response = self
            .within(client.query(self.request(message.clone())))
            .await?;
        Ok(response.result.iter().filter_map(point_number).collect())
    }

    /// `Points/Upsert`.
    pub async fn upsert(
        &self,
        channel: &Channel,
        message: &api::UpsertPoints,
    ) -> Result<(), Failure> {
        let mut client = PointsClient::new(channel.clone()).max_encoding_message_size(usize::MAX);
        self.within(client.upsert(self.request(message.clone())))
            .await
            .map(|_| ())
    }

    /// `Qdrant/HealthCheck`: the gRPC stack's ceiling, as `GET /readyz` is HTTP's.
    pub async fn health(&self, channel: &Channel) -> Result<(), Failure> {
        let mut client = QdrantClient::new(channel.clone());
        self.within(client.health_check(self.request(api::HealthCheckRequest {})))
            .await
            .map(|_| ())
    }

    /// The metadata sent with every call (for tests).
    pub fn metadata(&self) -> MetadataMap {
        self.request(()).metadata().clone()
    }
}

fn point_number(point: &api::ScoredPoint) -> Option<u64> {
    match point.id.as_ref()?.point_id_options {
        Some(api::point_id::PointIdOptions::Num(num)) => Some(num),
        _ => None,
    }
}

fn dense(vector: &[f32]) -> api::DenseVector {
    api::DenseVector {
        data: vector.to_vec(),
    }
}

/// The `Points/Query` message of a nearest-neighbour query: the gRPC twin of
/// [`crate::body::query_body`] (no payload, `hnsw_ef` when set).
pub fn query_message(
    collection: &str,
    vector: &[f32],
    limit: usize,
    hnsw_ef: Option<usize>,
) -> api::QueryPoints {
    api::QueryPoints {
        collection_name: collection.to_string(),
        query: Some(api::Query {
            variant: Some(api::query::Variant::Nearest(api::VectorInput {
                variant: Some(api::vector_input::Variant::Dense(dense(vector))),
            })),
        }),
        limit: Some(limit as u64),
        params: hnsw_ef.map(|ef| api::SearchParams {
            hnsw_ef: Some(ef as u64),
            ..api::SearchParams::default()
        }),
        with_payload: Some(api::WithPayloadSelector {
            selector_options: Some(api::with_payload_selector::SelectorOptions::Enable(false)),
        }),
        ..api::QueryPoints::default()
    }
}

/// `Points/Upsert` messages for all of `data` (row-major, `dim` wide) in batches of `batch`
/// rows, ids = row numbers, `wait=false`: the gRPC twin of [`crate::body::upsert_bodies`].
pub fn upsert_messages(
    collection: &str,
    data: &[f32],
    dim: usize,
    batch: usize,
) -> Vec<api::UpsertPoints> {
    let dim = dim.max(1);
    data.chunks(dim * batch.max(1))
        .enumerate()
        .map(|(i, rows)| api::UpsertPoints {
            collection_name: collection.to_string(),
            wait: Some(false),
            points: rows
                .chunks_exact(dim)
                .zip((i * batch.max(1)) as u64..)
                .map(|(vector, id)| api::PointStruct {
                    id: Some(api::PointId {
                        point_id_options: Some(api::point_id::PointIdOptions::Num(id)),
                    }),
                    vectors: Some(api::Vectors {
                        vectors_options: Some(api::vectors::VectorsOptions::Vector(api::Vector {
                            vector: Some(api::vector::Vector::Dense(dense(vector))),
                            ..api::Vector::default()
                        })),
                    }),
                    ..api::PointStruct::default()
                })
                .collect(),
            ..api::UpsertPoints::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_take_grpc_spec_names() {
        assert_eq!(upper_snake("ResourceExhausted"), "RESOURCE_EXHAUSTED");
        assert_eq!(upper_snake("Ok"), "OK");
        let mut status = tonic::Status::resource_exhausted("too many requests");
        status
            .metadata_mut()
            .insert("retry-after", "2".parse().unwrap());
        let failure = Failure::of(&status);
        assert_eq!(failure.kind, "gRPC RESOURCE_EXHAUSTED");
        assert_eq!(failure.code, Some(tonic::Code::ResourceExhausted));
        assert!(failure.message.contains("too many requests"));
        assert_eq!(failure.retry_after, Some(2.0));
    }

    #[test]
    fn upsert_messages_cover_every_row_with_row_ids() {
        let data: Vec<f32> = (0..14).map(|v| v as f32).collect();
        let messages = upsert_messages("c", &data, 2, 3);
        assert_eq!(messages.len(), 3);
        let ids: Vec<Vec<u64>> = messages
            .iter()
            .map(|m| {
                m.points
                    .iter()
                    .map(|p| match p.id.as_ref().unwrap().point_id_options {
                        Some(api::point_id::PointIdOptions::Num(n)) => n,
                        _ => panic!("numeric ids"),
                    })
                    .collect()
            })
            .collect();
        assert_eq!(ids, vec![vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
        let last = &messages[2].points[0];
        let Some(api::vectors::VectorsOptions::Vector(vector)) =
            &last.vectors.as_ref().unwrap().vectors_options
        else {
            panic!("a single dense vector");
        };
        assert_eq!(
            vector.vector,
            Some(api::vector::Vector::Dense(dense(&[12.0, 13.0])))
        );
        assert!(messages.iter().all(|m| m.wait == Some(false)));
    }

    #[test]
    fn endpoints_are_checked_and_carry_the_key() {
        let timeout = Duration::from_secs(1);
        assert!(GrpcEndpoint::new("https://h:6334", None, timeout).is_err());
        assert!(GrpcEndpoint::new("http://h:6334", Some("bad\nkey"), timeout).is_err());
        let endpoint = GrpcEndpoint::new("http://h:6334/", Some("secret"), timeout).unwrap();
        assert_eq!(endpoint.url, "http://h:6334");
        assert_eq!(endpoint.metadata().get("api-key").unwrap(), "secret");
        let message = query_message("c", &[0.5], 10, Some(64));
        assert_eq!(message.limit, Some(10));
        assert_eq!(message.params.unwrap().hnsw_ef, Some(64));
    }
}
