//! Qdrant's gRPC API (port 6334 by default): the `qdrant.Qdrant`, `qdrant.Collections`,
//! `qdrant.Points` and `qdrant.Snapshots` services of proto/qdrant.proto over tonic, so
//! qdrant-client with `prefer_grpc=True`, vector-db-benchmark's `qdrant` engine and
//! VectorDBBench's `qdrant_cloud` client work unchanged.
//!
//! Every RPC is answered by the REST route that does the same ([`rest`]): the request
//! message becomes that route's JSON body ([`request`], [`query`], [`collections`]), the
//! route's answer becomes the reply message ([`reply`]), and its error becomes the gRPC
//! status Qdrant gives it with the same message. One set of handlers therefore holds the
//! checks, limits (`max_request_bytes` bounds a gRPC message too, and [`message`] puts its
//! arrival under a REST body's time and in-flight limits), API keys (the
//! `api-key` metadata; the read-only key may call only the reads) and metrics of both.

pub mod api {
    #![allow(clippy::all, clippy::pedantic, missing_docs, unused_qualifications)]
    tonic::include_proto!("qdrant");
}
mod collections;
mod connections;
mod message;
mod points;
mod query;
mod reply;
mod request;
pub mod rest;
mod service;
mod strict;

use std::sync::Arc;

use api::collections_server::CollectionsServer;
use api::points_server::PointsServer;
use api::qdrant_server::QdrantServer;
use api::snapshots_server::SnapshotsServer;
use tonic::service::Routes;

use crate::connections::Table;

/// Requests may come gzip-compressed (qdrant-client's `grpc_compression`).
const GZIP: tonic::codec::CompressionEncoding = tonic::codec::CompressionEncoding::Gzip;

/// Serves the gRPC API on `listener` under the connection limits of `table` (shared with
/// the REST listener) until `shutdown` resolves (calls in flight finish).
pub async fn serve(
    listener: tokio::net::TcpListener,
    table: Arc<Table>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let state = Arc::clone(&table.state);
    let rest = rest::Rest::new(crate::router(Arc::clone(&state)));
    let limit = state.config.max_request_bytes;
    let service = || service::Service { rest: rest.clone() };
    let routes = Routes::new(QdrantServer::new(service()).accept_compressed(GZIP))
        .add_service(
            CollectionsServer::new(service())
                .accept_compressed(GZIP)
                .max_decoding_message_size(limit),
        )
        .add_service(
            PointsServer::new(points::PointsService { rest: rest.clone() })
                .accept_compressed(GZIP)
                .max_decoding_message_size(limit)
                .max_encoding_message_size(usize::MAX),
        )
        .add_service(
            SnapshotsServer::new(service())
                .accept_compressed(GZIP)
                .max_decoding_message_size(limit),
        )
        .prepare();
    connections::serve(listener, routes, table, shutdown).await
}
