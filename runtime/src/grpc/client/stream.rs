//! Streams: the response stream that settles the breaker's ticket once,
//! when it ends, and the holder that lets a request stream be sent again
//! by a retried open as long as nothing has read it ([design](crate::design::client#streams)).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures_util::{FutureExt, Stream};
use tokio::time::{Instant, Sleep};
use tonic::Status;
use tonic::metadata::MetadataMap;

use super::connection::{ClosedFlag, closing, transport_status};
use crate::grpc::deadline::{Bound, Deadline};

/// How a stream that opened ended, as its settle function is told.
pub(super) enum End<'a> {
    /// The stream's clean end (or a client-streaming call's one response),
    /// with its trailer.
    Finished(&'a MetadataMap),
    /// The stream ended with this error, after it opened.
    Failed(&'a Status),
    /// The stream's deadline passed before it ended.
    DeadlinePassed,
    /// The client's connection was closed (`Setup::stop`).
    Closed,
}

/// Counts a stream's end: called at most once, when the stream ends. A
/// stream dropped before its end never calls it, and counts nothing.
pub(super) type Settle = Box<dyn for<'a> FnOnce(End<'a>) + Send>;

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
    /// Dropped (which cancels the HTTP/2 stream) once it ends at its
    /// deadline.
    inner: Option<tonic::Streaming<T>>,
    settle: Option<Settle>,
    deadline: Option<Pin<Box<Sleep>>>,
    /// The deadline: which bound it is (its status names it), and how
    /// early a drop is still its.
    limit: Option<Deadline>,
    /// The client's connection's close: it fails the IO under the stream,
    /// which wakes it, and the flag tells that error from a broken
    /// connection's.
    closed: ClosedFlag,
    trailers: Option<MetadataMap>,
    ended: bool,
    /// A client-streaming call's: its stream must carry one message.
    one_response: bool,
    /// Whether a message has arrived.
    received: bool,
}

impl<T> fmt::Debug for Streaming<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Streaming")
            .field("ended", &self.ended)
            .field("deadline", &self.deadline.as_ref().map(|d| d.deadline()))
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
            inner: Some(inner),
            settle: Some(settle),
            deadline: deadline.map(|d| Box::pin(tokio::time::sleep_until(d.at))),
            limit: deadline,
            closed,
            trailers: None,
            ended: false,
            one_response: false,
            received: false,
        }
    }

    /// Makes it the stream of a client-streaming call (`one`): a clean
    /// end with no message is the server's error, `INTERNAL`.
    pub(super) fn one_response(mut self, one: bool) -> Streaming<T> {
        self.one_response = one;
        self
    }

    fn end(&mut self, how: End<'_>) {
        self.ended = true;
        if let Some(settle) = self.settle.take() {
            settle(how);
        }
    }

    /// Whether the stream's deadline has passed.
    fn deadline_passed(&self) -> bool {
        self.deadline
            .as_ref()
            .is_some_and(|d| Instant::now() >= d.deadline())
    }

    /// Ends the stream at its deadline: counts it a failure, and cancels
    /// the HTTP/2 stream (the server sees the call cancelled).
    fn end_at_deadline(&mut self) -> Status {
        self.end(End::DeadlinePassed);
        self.inner = None;
        deadline_exceeded(self.limit.map(|d| d.bound), self.closed.addr())
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
        if this.ended {
            return Poll::Ready(None);
        }
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(&mut *inner).poll_next(cx) {
            Poll::Ready(Some(Ok(message))) => {
                // A stream whose messages keep coming is never idle: its
                // deadline is read with each of them.
                if this.deadline_passed() {
                    return Poll::Ready(Some(Err(this.end_at_deadline())));
                }
                this.received = true;
                return Poll::Ready(Some(Ok(message)));
            }
            Poll::Ready(Some(Err(status))) => {
                // A close fails the connection's IO under the stream: that
                // error is the close's.
                if this.closed.is_closed() {
                    this.end(End::Closed);
                    return Poll::Ready(Some(Err(closing())));
                }
                let status = transport_status(status);
                if this.deadline_passed() {
                    return Poll::Ready(Some(Err(this.end_at_deadline())));
                }
                this.end(End::Failed(&status));
                return Poll::Ready(Some(Err(status)));
            }
            Poll::Ready(None) => {
                // The stream has ended, so its trailer is already read:
                // taking it completes at once.
                let trailers = inner
                    .trailers()
                    .now_or_never()
                    .and_then(Result::ok)
                    .flatten()
                    .unwrap_or_default();
                if this.one_response && !this.received {
                    // A client-streaming call answered OK with no message:
                    // the server broke the call, and it counts as the
                    // INTERNAL the caller gets.
                    let mut status = missing_response();
                    *status.metadata_mut() = trailers.clone();
                    this.end(End::Failed(&status));
                    this.trailers = Some(trailers);
                    return Poll::Ready(Some(Err(status)));
                }
                this.end(End::Finished(&trailers));
                this.trailers = Some(trailers);
                return Poll::Ready(None);
            }
            Poll::Pending => {}
        }
        if let Some(deadline) = this.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Some(Err(this.end_at_deadline())));
        }
        if !this.closed.is_closed() {
            return Poll::Pending;
        }
        this.end(End::Closed);
        Poll::Ready(Some(Err(closing())))
    }
}

impl<T> Drop for Streaming<T> {
    /// A stream dropped before its end: at or after its deadline (within
    /// [`DEADLINE_SLACK`](super::DEADLINE_SLACK)), such as one a served
    /// RPC's handler holds when the server drops it at its deadline, it
    /// ended by the deadline and counts as a failure; before, its caller
    /// gave up, and it counts nothing.
    fn drop(&mut self) {
        if self.ended || self.settle.is_none() {
            return;
        }
        let at_deadline = self
            .limit
            .is_some_and(|d| super::attempt::at_deadline(&d, Instant::now()));
        if at_deadline {
            self.end(End::DeadlinePassed);
        }
    }
}

/// The status of a client-streaming call whose server ended it OK without
/// its one response message (tonic's message for it).
pub(super) fn missing_response() -> Status {
    Status::internal("Missing response message.")
}

/// The `DEADLINE_EXCEEDED` status of a call (or a stream) to the
/// dependency at `addr` that the client ended at its deadline, naming the
/// dependency and which bound the deadline was: `carts:9090: the call's
/// deadline passed: the client's timeout setting, 10s`, `...: the
/// request's own timeout (grpc-timeout), 500ms`, `...: the deadline
/// inherited from the RPC being served (300ms left when the call was
/// made), not the client's timeout setting`
/// (the wording of the HTTP client's timeout error). Written only here,
/// when the status is made; a call with a deadline always knows its bound
/// (`None` writes the message alone).
pub(super) fn deadline_exceeded(bound: Option<Bound>, addr: &str) -> Status {
    const PASSED: &str = "the call's deadline passed";
    Status::deadline_exceeded(match bound {
        // The header's name too: it is what the caller set, directly or
        // with tonic's `Request::set_timeout`.
        Some(Bound::Request(d)) => {
            format!("{addr}: {PASSED}: the request's own timeout (grpc-timeout), {d:?}")
        }
        Some(bound) => format!("{addr}: {PASSED}: {bound}"),
        None => format!("{addr}: {PASSED}"),
    })
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
