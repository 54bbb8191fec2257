//! A call's request message as it arrives, under the limits a REST body is under: the body
//! time limit (`body_read_timeout_secs` plus a second per `min_body_bytes_per_sec` bytes,
//! the same [`TimedBody`]) and the bytes of all bodies being received at once
//! (`max_inflight_request_bytes`, reserved frame by frame and given back when tonic has
//! read the message). Without them a call is `BUSY` without limit while its message
//! trickles in, and holds memory outside the server's budget.
//!
//! A breach ends the call with the status the REST route's answer maps to, and the same
//! message: DEADLINE_EXCEEDED for a late message (REST's 408), UNAVAILABLE with
//! `retry-after` metadata when the budget is full (REST's 503). tonic passes a `Status` it
//! finds in the body's error on as the call's answer.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Bytes;
use http_body::{Body, Frame, SizeHint};
use tonic::metadata::MetadataMap;
use tonic::Status;

use crate::body::{inflight_full, too_slow, Reservation};
use crate::connections::{BodyReadTimeout, TimedBody};
use crate::grpc::rest::code_of;
use crate::{ApiError, SharedState};

/// A body's error, as hyper and tonic pass it on.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One call's request body; see the module's text.
pub(crate) struct Message {
    inner: TimedBody,
    held: Option<Reservation>,
    state: SharedState,
}

impl Message {
    pub(crate) fn new(inner: TimedBody, state: SharedState) -> Message {
        Message {
            inner,
            held: state.inflight_bytes.reserve(0),
            state,
        }
    }

    /// Reserves `bytes` more of the budget, or the answer that it is full.
    fn reserve(&mut self, bytes: usize) -> Result<(), BoxError> {
        if self.held.as_mut().is_some_and(|held| held.grow(bytes)) {
            return Ok(());
        }
        Err(refusal(inflight_full(&self.state, bytes)))
    }

    /// A late message's error becomes REST's 408 as a status, counted with REST's.
    fn late(&self, error: BoxError) -> BoxError {
        match error.downcast::<BodyReadTimeout>() {
            Ok(timeout) => refusal(too_slow(&self.state, &timeout)),
            Err(error) => error,
        }
    }
}

/// REST's refusal as the gRPC status Qdrant pairs with its HTTP status, with the same
/// message, and its `Retry-After` as `retry-after` metadata.
fn refusal(error: ApiError) -> BoxError {
    let mut metadata = MetadataMap::new();
    if let Some(seconds) = error.retry_after_seconds {
        metadata.insert("retry-after", seconds.into());
    }
    Box::new(Status::with_metadata(
        code_of(error.status),
        error.message,
        metadata,
    ))
}

impl Body for Message {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    if let Err(full) = this.reserve(data.len()) {
                        return Poll::Ready(Some(Err(full)));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(this.late(error)))),
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
