//! The response body of a call through the channel ([`ChannelBody`]): a
//! unary call's, read whole, or a stream's as it arrives, counted in the
//! breaker once, at its end ([`Live`]).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body as _, Frame};
use tokio::time::{Instant, Sleep};
use tonic::Status;
use tonic::metadata::MetadataMap;

use super::WireBody;
use super::replay::Chunks;
use super::trailer::end_status;
use crate::grpc::client::attempt::at_deadline;
use crate::grpc::client::connection::{ClosedFlag, closing, transport_status};
use crate::grpc::client::limit::Limited;
use crate::grpc::client::stream::{End, Settle, deadline_exceeded, missing_response};
use crate::grpc::deadline::Deadline;

/// The response body of a [`Channel`](super::Channel)'s call, as tonic's decoder reads
/// it: a unary call's, read whole before it was classified; or a
/// stream's, as it arrives, counted in the client's breaker once, at its
/// end (its trailer, its error, its deadline), as
/// [`Streaming`](crate::grpc::client::Streaming) counts a typed stream. Its errors are
/// [`Status`](https://docs.rs/tonic/0.14/tonic/struct.Status.html)es (a broken connection's `Unavailable`, the deadline's
/// `DeadlineExceeded`, `Cancelled` after [`Setup::stop`](crate::Setup::stop)),
/// which tonic hands to the caller as they are.
pub struct ChannelBody {
    pub(super) kind: Kind,
}

pub(super) enum Kind {
    Read {
        data: Chunks,
        trailers: Option<HeaderMap>,
    },
    Live(Box<Live>),
}

impl fmt::Debug for ChannelBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Read { .. } => "read",
            Kind::Live(_) => "stream",
        };
        f.debug_struct("ChannelBody")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}

impl ChannelBody {
    pub(super) fn live(live: Live) -> ChannelBody {
        ChannelBody {
            kind: Kind::Live(Box::new(live)),
        }
    }
}

/// An empty body, ended: what tonic's `InterceptedService` answers with
/// when an interceptor refuses a call, so that a tonic-generated client's
/// `with_interceptor(client.channel(), f)` takes a humus channel, as it
/// takes tonic's `Channel`.
impl Default for ChannelBody {
    fn default() -> ChannelBody {
        ChannelBody {
            kind: Kind::Read {
                data: Chunks::default(),
                trailers: None,
            },
        }
    }
}

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        match &mut self.kind {
            Kind::Read { data, trailers } => Poll::Ready(
                data.pop_front()
                    .map(Frame::data)
                    .or_else(|| trailers.take().map(Frame::trailers))
                    .map(Ok),
            ),
            Kind::Live(live) => live.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Read { trailers, .. } => trailers.is_none(),
            Kind::Live(live) => live.ended,
        }
    }
}

/// A stream's response body that settles its ticket once, at its end.
pub(super) struct Live {
    /// Dropped (which cancels the HTTP/2 stream) once it ends at its
    /// deadline. A message over the client's decoding limit fails it
    /// `ResourceExhausted`.
    inner: Option<Limited<WireBody>>,
    settle: Option<Settle>,
    deadline: Option<Pin<Box<Sleep>>>,
    /// The deadline: which bound it is (its status names it), and how
    /// early a drop is still its.
    limit: Option<Deadline>,
    closed: ClosedFlag,
    /// The HTTP status, for a trailer without `grpc-status`.
    http: http::StatusCode,
    /// A trailers-only OK: the status of the stream's end.
    trailers_only: Option<MetadataMap>,
    ended: bool,
    /// A client-streaming call's: its stream must carry one message.
    one_response: bool,
    received: bool,
}

impl Live {
    pub(super) fn new(
        inner: Limited<WireBody>,
        parts: &http::response::Parts,
        settle: Settle,
        deadline: Option<Deadline>,
        closed: ClosedFlag,
    ) -> Live {
        let trailers_only = parts
            .headers
            .contains_key("grpc-status")
            .then(|| MetadataMap::from_headers(parts.headers.clone()));
        Live {
            inner: Some(inner),
            settle: Some(settle),
            deadline: deadline.map(|d| Box::pin(tokio::time::sleep_until(d.at))),
            limit: deadline,
            closed,
            http: parts.status,
            trailers_only,
            ended: false,
            one_response: false,
            received: false,
        }
    }

    pub(super) fn one_response(mut self, one: bool) -> Live {
        self.one_response = one;
        self
    }

    fn end(&mut self, how: End<'_>) {
        self.ended = true;
        if let Some(settle) = self.settle.take() {
            settle(how);
        }
    }

    fn deadline_passed(&self) -> bool {
        self.deadline
            .as_ref()
            .is_some_and(|d| Instant::now() >= d.deadline())
    }

    fn end_at_deadline(&mut self) -> Status {
        self.end(End::DeadlinePassed);
        self.inner = None;
        deadline_exceeded(self.limit.map(|d| d.bound), self.closed.addr())
    }

    /// Counts the stream's clean end with `trailer` (its `grpc-status`,
    /// as tonic reads it).
    fn finish(&mut self, trailer: Option<&HeaderMap>) {
        match end_status(trailer, self.http) {
            Ok(()) if self.one_response && !self.received => {
                let mut status = missing_response();
                if let Some(trailer) = trailer {
                    *status.metadata_mut() = MetadataMap::from_headers(trailer.clone());
                }
                self.end(End::Failed(&status));
            }
            Ok(()) => {
                let empty = MetadataMap::new();
                let trailer = trailer.map(|t| MetadataMap::from_headers(t.clone()));
                self.end(End::Finished(trailer.as_ref().unwrap_or(&empty)));
            }
            Err(status) => self.end(End::Failed(&status)),
        }
    }

    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(&mut *inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    // A stream whose messages keep coming is never idle:
                    // its deadline is read with each of them.
                    if self.deadline_passed() {
                        return Poll::Ready(Some(Err(self.end_at_deadline())));
                    }
                    self.received |= !data.is_empty();
                } else if let Some(trailer) = frame.trailers_ref() {
                    let trailer = trailer.clone();
                    self.finish(Some(&trailer));
                }
                return Poll::Ready(Some(Ok(frame)));
            }
            Poll::Ready(Some(Err(err))) => {
                if self.closed.is_closed() {
                    self.end(End::Closed);
                    return Poll::Ready(Some(Err(closing())));
                }
                let status = transport_status(Status::from_error(err));
                if self.deadline_passed() {
                    return Poll::Ready(Some(Err(self.end_at_deadline())));
                }
                self.end(End::Failed(&status));
                return Poll::Ready(Some(Err(status)));
            }
            Poll::Ready(None) => {
                // The end with no trailer: a trailers-only answer's (its
                // status was in the headers), else a missing status.
                let trailer = self.trailers_only.take().map(MetadataMap::into_headers);
                self.finish(trailer.as_ref());
                return Poll::Ready(None);
            }
            Poll::Pending => {}
        }
        if let Some(deadline) = self.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Some(Err(self.end_at_deadline())));
        }
        if !self.closed.is_closed() {
            return Poll::Pending;
        }
        self.end(End::Closed);
        Poll::Ready(Some(Err(closing())))
    }
}

impl Drop for Live {
    /// As a typed [`Streaming`](crate::grpc::client::Streaming) dropped before its end:
    /// at its deadline it counts as the deadline, before it nothing.
    fn drop(&mut self) {
        if self.ended || self.settle.is_none() {
            return;
        }
        let at = self.limit.is_some_and(|d| at_deadline(&d, Instant::now()));
        if at {
            self.end(End::DeadlinePassed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default body, as tonic's interceptor answers with, is empty
    /// and ended.
    #[test]
    fn the_default_body_is_empty_and_ended() {
        let mut body = ChannelBody::default();
        assert!(http_body::Body::is_end_stream(&body));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(matches!(
            Pin::new(&mut body).poll_frame(&mut cx),
            Poll::Ready(None)
        ));
    }
}
