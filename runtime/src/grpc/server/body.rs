//! The response body of every RPC a [`Server`](super::Server) serves
//! ([`ResponseBody`]): it ends the RPC's record, ends an open stream with
//! `UNAVAILABLE` when its connection goes away, and with `INTERNAL` if the
//! handler's stream panics.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::Sleep;
use tonic::Code;

use super::rpc::{Record, StreamsEnd, deadline_passed, panicked_trailers};
use crate::grpc::deadline::Inherited;
use crate::grpc::wire::{ending_trailers, status_code, status_message};

/// The message an open stream ends with when its server stops.
pub(super) const GOING_AWAY: &str = "the server is going away: call again on a new connection";

/// The message an open stream ends with when its connection reached its
/// maximum age and the age's grace is over.
pub(super) const STREAM_AGED: &str =
    "the connection reached its maximum age: call again on a new connection";

pin_project_lite::pin_project! {
    /// The response body of every RPC a [`Server`](super::Server) serves,
    /// and of [`StripScenario`](super::StripScenario)'s: the service's own,
    /// frame for frame, except that a panic while it is polled (a
    /// handler's stream that panics after its headers went out) ends it
    /// with `INTERNAL` ("the handler panicked") in its trailers. On a
    /// [`Server`](super::Server), it also records the RPC's status when it
    /// ends, and ends with `UNAVAILABLE` when its connection's streams are
    /// told to end while it waits for its next message.
    pub struct ResponseBody<B> {
        #[pin]
        pub(super) inner: Option<B>,
        pub(super) record: Option<Record>,
        pub(super) streams_end: Option<Arc<StreamsEnd>>,
        pub(super) id: u64,
        pub(super) ended: bool,
        // The handler's deadline and context: the body is polled inside
        // them, and ends at the deadline.
        pub(super) scope: Option<Inherited>,
        pub(super) deadline: Option<Pin<Box<Sleep>>>,
        pub(super) timeout: Option<Duration>,
    }

    impl<B> PinnedDrop for ResponseBody<B> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(streams_end) = this.streams_end.as_ref() {
                streams_end.forget(*this.id);
            }
        }
    }
}

impl<B> std::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseBody")
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl<B> ResponseBody<B> {
    pub(super) fn empty() -> ResponseBody<B> {
        ResponseBody {
            inner: None,
            record: None,
            streams_end: None,
            id: 0,
            ended: true,
            scope: None,
            deadline: None,
            timeout: None,
        }
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let mut this = self.project();
        if *this.ended {
            return Poll::Ready(None);
        }
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            return Poll::Ready(None);
        };
        let scope = this.scope.as_ref();
        let polled = match catch_unwind(AssertUnwindSafe(|| match scope {
            Some(scope) => scope.clone().sync_scope(|| inner.poll_frame(cx)),
            None => inner.poll_frame(cx),
        })) {
            Ok(polled) => polled,
            Err(payload) => {
                // The handler's stream panicked after the headers went out:
                // the stream ends with INTERNAL in its trailers.
                *this.ended = true;
                let mut inner = this.inner;
                let _ = catch_unwind(AssertUnwindSafe(move || inner.set(None)));
                if let Some(record) = this.record.as_mut() {
                    record.panicked(&*payload);
                }
                return Poll::Ready(Some(Ok(Frame::trailers(panicked_trailers()))));
            }
        };
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref()
                    && let Some(record) = this.record.as_mut()
                {
                    let code = status_code(trailers).unwrap_or(Code::Unknown);
                    let message = if code == Code::Ok {
                        String::new()
                    } else {
                        status_message(trailers)
                    };
                    record.finish(code, &message);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                if let Some(record) = this.record.as_mut() {
                    record.finish(Code::Internal, "the response body failed");
                }
                *this.ended = true;
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                *this.ended = true;
                Poll::Ready(None)
            }
            Poll::Pending => {
                let expired = this
                    .deadline
                    .as_mut()
                    .is_some_and(|d| d.as_mut().poll(cx).is_ready());
                if expired {
                    // The RPC's deadline passed while the body (a stream)
                    // was still being written: it ends, its handler's
                    // stream dropped, with DEADLINE_EXCEEDED, as a
                    // handler that had not answered yet is.
                    *this.ended = true;
                    this.inner.set(None);
                    let message = deadline_passed(*this.timeout);
                    if let Some(record) = this.record.as_mut() {
                        record.finish(Code::DeadlineExceeded, &message);
                    }
                    let trailers = ending_trailers(Code::DeadlineExceeded, &message);
                    return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                }
                let ended = this
                    .streams_end
                    .as_ref()
                    .is_some_and(|s| s.poll_ended(*this.id, cx.waker()));
                if !ended {
                    return Poll::Pending;
                }
                // The connection is going away: end the stream now, with
                // UNAVAILABLE, so the caller opens it again elsewhere, and
                // say why (the server stops, or the connection's age).
                *this.ended = true;
                this.inner.set(None);
                let message = this
                    .streams_end
                    .as_ref()
                    .map_or(GOING_AWAY, |s| s.message());
                if let Some(record) = this.record.as_mut() {
                    record.finish(Code::Unavailable, message);
                }
                let trailers = ending_trailers(Code::Unavailable, message);
                Poll::Ready(Some(Ok(Frame::trailers(trailers))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Some(inner) if !self.ended => inner.size_hint(),
            _ => SizeHint::with_exact(0),
        }
    }
}
