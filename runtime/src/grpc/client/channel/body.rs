//! The response body of a call through the channel ([`ChannelBody`]): a
//! unary call's, read whole, or a stream's as it arrives, counted in the
//! breaker once, at its end ([`Live`]).

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body as _, Frame};
use tonic::Status;
use tonic::metadata::MetadataMap;

use super::WireBody;
use super::replay::Chunks;
use crate::grpc::client::connection::ClosedFlag;
use crate::grpc::client::limit::Limited;
use crate::grpc::client::stream_end::{Settle, StreamEnd};
use crate::grpc::deadline::Deadline;
use crate::grpc::wire::{end_status, is_trailers_only};

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
            Kind::Live(live) => live.end.is_ended(),
        }
    }
}

/// A stream's response body that settles its ticket once, at its end.
pub(super) struct Live {
    /// The body on the wire, and its end. A message over the client's
    /// decoding limit fails it `ResourceExhausted`.
    end: StreamEnd<Limited<WireBody>>,
    /// The HTTP status, for a trailer without `grpc-status`.
    http: http::StatusCode,
    /// A trailers-only OK: the status of the stream's end.
    trailers_only: Option<MetadataMap>,
}

impl Live {
    pub(super) fn new(
        inner: Limited<WireBody>,
        parts: &http::response::Parts,
        settle: Settle,
        deadline: Option<Deadline>,
        closed: ClosedFlag,
    ) -> Live {
        let trailers_only = is_trailers_only(&parts.headers)
            .then(|| MetadataMap::from_headers(parts.headers.clone()));
        Live {
            end: StreamEnd::new(inner, settle, deadline, closed),
            http: parts.status,
            trailers_only,
        }
    }

    pub(super) fn one_response(mut self, one: bool) -> Live {
        self.end.one_response(one);
        self
    }

    /// Counts the stream's clean end with `trailer` (its `grpc-status`,
    /// as tonic reads it).
    fn finish(&mut self, trailer: Option<&HeaderMap>) {
        match end_status(trailer, self.http) {
            Ok(()) => {
                let trailer = trailer.map(|t| MetadataMap::from_headers(t.clone()));
                // A missing response's status is tonic's decoder's to give
                // the caller: here it is only counted.
                let _ = self.end.finished(&trailer.unwrap_or_default());
            }
            Err(status) => self.end.ended_with(&status),
        }
    }

    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let Some(inner) = self.end.wire() else {
            return Poll::Ready(None);
        };
        match Pin::new(&mut *inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    if let Err(status) = self.end.message(!data.is_empty()) {
                        return Poll::Ready(Some(Err(status)));
                    }
                } else if let Some(trailer) = frame.trailers_ref() {
                    let trailer = trailer.clone();
                    self.finish(Some(&trailer));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(err))) => {
                Poll::Ready(Some(Err(self.end.failed(Status::from_error(err)))))
            }
            Poll::Ready(None) => {
                // The end with no trailer: a trailers-only answer's (its
                // status was in the headers), else a missing status.
                let trailer = self.trailers_only.take().map(MetadataMap::into_headers);
                self.finish(trailer.as_ref());
                Poll::Ready(None)
            }
            Poll::Pending => self.end.poll_idle(cx).map(|status| Some(Err(status))),
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
