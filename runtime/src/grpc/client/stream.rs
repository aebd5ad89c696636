//! Streams: the response stream that settles the breaker's ticket once,
//! when it ends, and the holder that lets a request stream be sent again
//! by a retried open as long as nothing has read it ([design](crate::design::client#streams)).

use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures_util::{FutureExt, Stream};
use tonic::Status;
use tonic::metadata::MetadataMap;

use super::connection::ClosedFlag;
use super::stream_end::{Settle, StreamEnd};
use crate::grpc::deadline::Deadline;

/// A stream of responses from a server- or bidirectional-streaming call.
///
/// It exists once the stream has opened, that is once the server answered
/// with its response headers (gRFC A6: the call is then committed). An
/// open that failed before (no connection, a failed dial, a refused
/// stream, the breaker), or that the server answered with a trailers-only
/// status (no response headers), never opened: that attempt is classified,
/// retried and counted as a unary attempt; see
/// [the design](crate::design::client#streams).
///
/// It is counted in the client's circuit breaker once, when it ends: its
/// clean end (`None`), its error, or its deadline. Until then it holds the
/// breaker's ticket (a probe's slot while the breaker is half-open, for at
/// most the breaker's `probe_timeout`). A stream that ends with
/// `Unavailable` (its server or connection went away) is ignored; any
/// other end counts as the client's classify says, given the stream's
/// trailer.
///
/// Its deadline is the earlier of the request's `grpc-timeout` and the
/// deadline inherited from the RPC being served
/// ([`Inherited`](crate::grpc::deadline::Inherited)); `Settings::timeout`
/// does not apply. At the deadline the stream ends `DeadlineExceeded`
/// (its message naming which of the two it was) and counts as a failure, even while messages keep arriving (the deadline
/// is read with each of them), and its HTTP/2 stream is cancelled.
///
/// Dropped before its end, a stream counts as what dropped it: at or after
/// its deadline (within [`DEADLINE_SLACK`](super::DEADLINE_SLACK)), the
/// deadline, a failure; earlier, its caller gave up, and it counts nothing.
/// After [`Setup::stop`](crate::Setup::stop) it ends `Canceled`, counting
/// nothing.
///
/// A message over the client's decoding limit
/// ([`Settings::max_decoding_message_size`](super::Settings::max_decoding_message_size))
/// ends the stream `ResourceExhausted` at its head (the messages before it
/// are read), as a unary call's does; a status the server ends the stream
/// with (a tonic server's `OutOfRange` for a request message over its own
/// limit) is returned as sent.
///
/// The stream of a client-streaming call must carry its one response: a
/// clean end with no message is `Internal` (`Missing response message.`)
/// and counts as the classify says of `Internal`.
///
/// Like [`tonic::Streaming`](https://docs.rs/tonic/0.14/tonic/codec/struct.Streaming.html), it is a
/// [`Stream`](https://docs.rs/futures-core/0.3/futures_core/stream/trait.Stream.html) of messages and has
/// [`message`](Streaming::message) and [`trailers`](Streaming::trailers).
///
/// Design: [streams](crate::design::client#streams).
pub struct Streaming<T> {
    /// The stream on the wire and its end, settled once.
    end: StreamEnd<tonic::Streaming<T>>,
    trailers: Option<MetadataMap>,
}

impl<T> fmt::Debug for Streaming<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Streaming")
            .field("ended", &self.end.is_ended())
            .field("deadline", &self.end.deadline())
            .finish_non_exhaustive()
    }
}

impl<T> Streaming<T> {
    pub(super) fn new(
        inner: tonic::Streaming<T>,
        settle: Settle,
        deadline: Option<Deadline>,
        closed: ClosedFlag,
    ) -> Streaming<T> {
        Streaming {
            end: StreamEnd::new(inner, settle, deadline, closed),
            trailers: None,
        }
    }

    /// Makes it the stream of a client-streaming call (`one`): a clean
    /// end with no message is the server's error, `INTERNAL`.
    pub(super) fn one_response(mut self, one: bool) -> Streaming<T> {
        self.end.one_response(one);
        self
    }

    /// The next message, `None` at the end of the stream.
    ///
    /// # Errors
    ///
    /// The status the stream ended with.
    pub async fn message(&mut self) -> Result<Option<T>, Status> {
        match futures_util::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await {
            Some(Ok(m)) => Ok(Some(m)),
            Some(Err(status)) => Err(status),
            None => Ok(None),
        }
    }

    /// The stream's trailer, once it has ended: reads (and drops) every
    /// message left until the end.
    ///
    /// # Errors
    ///
    /// The status the stream ended with.
    pub async fn trailers(&mut self) -> Result<Option<MetadataMap>, Status> {
        while self.message().await?.is_some() {}
        Ok(self.trailers.clone())
    }
}

impl<T> Stream for Streaming<T> {
    type Item = Result<T, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let Some(inner) = this.end.wire() else {
            return Poll::Ready(None);
        };
        match Pin::new(&mut *inner).poll_next(cx) {
            Poll::Ready(Some(Ok(message))) => {
                Poll::Ready(Some(this.end.message(true).map(|()| message)))
            }
            Poll::Ready(Some(Err(status))) => Poll::Ready(Some(Err(this.end.failed(status)))),
            Poll::Ready(None) => {
                // The stream has ended, so its trailer is already read:
                // taking it completes at once.
                let trailers = inner
                    .trailers()
                    .now_or_never()
                    .and_then(Result::ok)
                    .flatten()
                    .unwrap_or_default();
                let end = this.end.finished(&trailers);
                this.trailers = Some(trailers);
                Poll::Ready(end.err().map(Err))
            }
            Poll::Pending => this.end.poll_idle(cx).map(|status| Some(Err(status))),
        }
    }
}

/// Holds a call's request stream between the attempts to open it: each
/// attempt sends a [`Lent`] stream, which takes the request stream out of
/// the holder when it is first read. An attempt that failed before reading
/// it leaves it in the holder, for the next attempt; one that read it used
/// it up, and the open cannot be retried.
pub(super) struct Holder<S> {
    slot: Arc<Mutex<Option<S>>>,
}

impl<S> Holder<S> {
    pub(super) fn new(stream: S) -> Holder<S> {
        Holder {
            slot: Arc::new(Mutex::new(Some(stream))),
        }
    }

    /// Whether the request stream is still unread, so an attempt may send it.
    pub(super) fn is_unread(&self) -> bool {
        self.slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// A stream for one attempt to send.
    pub(super) fn lend(&self) -> Lent<S> {
        Lent {
            slot: self.slot.clone(),
            stream: None,
        }
    }
}

/// The request stream as one attempt sends it.
pub(super) struct Lent<S> {
    slot: Arc<Mutex<Option<S>>>,
    stream: Option<S>,
}

impl<S: Stream + Unpin> Stream for Lent<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let this = &mut *self;
        if this.stream.is_none() {
            this.stream = this
                .slot
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
        }
        match this.stream.as_mut() {
            Some(stream) => Pin::new(stream).poll_next(cx),
            // Another attempt read it: nothing left to send.
            None => Poll::Ready(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    #[tokio::test]
    async fn a_lent_stream_unread_stays_in_the_holder() {
        let holder = Holder::new(futures_util::stream::iter([1, 2, 3]));
        drop(holder.lend());
        assert!(holder.is_unread());
        let mut lent = holder.lend();
        assert_eq!(lent.next().await, Some(1));
        assert!(!holder.is_unread());
        assert_eq!(
            holder.lend().next().await,
            None,
            "used up by the last attempt"
        );
        assert_eq!(lent.collect::<Vec<_>>().await, [2, 3]);
    }
}
