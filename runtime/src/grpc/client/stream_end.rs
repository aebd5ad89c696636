//! A stream's end, bookkept once ([`StreamEnd`]): for the typed client's
//! [`Streaming`](super::Streaming) and the channel's response body alike,
//! the stream under it, its deadline, the client's close, and the settle
//! function that counts it in the breaker and ends its span, called at
//! most once: at its trailer, its error, its deadline, the close, or when
//! it is dropped at its deadline ([design](crate::design::client#streams)).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::{Instant, Sleep};
use tonic::Status;
use tonic::metadata::MetadataMap;

use super::attempt::at_deadline;
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

/// The end of a stream that opened, owned in one place: the stream on the
/// wire (`I`: tonic's decoded stream, or the channel's raw body), and
/// what settles it once it ends.
///
/// Its settle runs before the wire stream is dropped, which cancels the
/// HTTP/2 stream: at the deadline ([`StreamEnd::end_at_deadline`]) and on
/// a drop ([`Drop`]) alike, the breaker and the attempt's span see the
/// stream's end before its server sees the cancel.
pub(super) struct StreamEnd<I> {
    /// Taken, and run, once the stream has ended; `None` after.
    settle: Option<Settle>,
    /// Dropped (which cancels the HTTP/2 stream) once it ends at its
    /// deadline, or with this.
    wire: Option<I>,
    deadline: Option<Pin<Box<Sleep>>>,
    /// The deadline: which bound it is (its status names it), and how
    /// early a drop is still its.
    limit: Option<Deadline>,
    /// The client's connection's close: it fails the IO under the stream,
    /// which wakes it, and the flag tells that error from a broken
    /// connection's.
    closed: ClosedFlag,
    /// A client-streaming call's: its stream must carry one message.
    one_response: bool,
    /// Whether a message has arrived.
    received: bool,
}

impl<I> StreamEnd<I> {
    pub(super) fn new(
        wire: I,
        settle: Settle,
        deadline: Option<Deadline>,
        closed: ClosedFlag,
    ) -> StreamEnd<I> {
        StreamEnd {
            settle: Some(settle),
            wire: Some(wire),
            deadline: deadline.map(|d| Box::pin(tokio::time::sleep_until(d.at))),
            limit: deadline,
            closed,
            one_response: false,
            received: false,
        }
    }

    /// Makes it the end of a client-streaming call's stream (`one`): a
    /// clean end with no message is the server's error, `INTERNAL`.
    pub(super) fn one_response(&mut self, one: bool) {
        self.one_response = one;
    }

    /// Whether the stream has ended (and was settled).
    pub(super) fn is_ended(&self) -> bool {
        self.settle.is_none()
    }

    /// When the stream's deadline is, if it has one.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.deadline.as_ref().map(|d| d.deadline())
    }

    /// The stream on the wire, to read, until the stream has ended.
    pub(super) fn wire(&mut self) -> Option<&mut I> {
        if self.is_ended() {
            return None;
        }
        self.wire.as_mut()
    }

    /// Settles the stream's end `how`, once.
    fn end(&mut self, how: End<'_>) {
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

    /// Ends the stream at its deadline: counts it a failure, then cancels
    /// the HTTP/2 stream (the server sees the call cancelled).
    fn end_at_deadline(&mut self) -> Status {
        self.end(End::DeadlinePassed);
        self.wire = None;
        deadline_exceeded(self.limit.map(|d| d.bound), self.closed.addr())
    }

    /// A message arrived (`counts`: one with bytes, as a message the
    /// caller reads). A stream whose messages keep coming is never idle:
    /// its deadline is read with each of them, and a passed one ends it
    /// with its status.
    pub(super) fn message(&mut self, counts: bool) -> Result<(), Status> {
        if self.deadline_passed() {
            return Err(self.end_at_deadline());
        }
        self.received |= counts;
        Ok(())
    }

    /// The wire stream failed with `status`: ends the stream with the
    /// close's `Canceled` (a close fails the connection's IO under the
    /// stream), its deadline's `DeadlineExceeded`, or the status as a
    /// connection's error reads; the status it ended with.
    pub(super) fn failed(&mut self, status: Status) -> Status {
        if self.closed.is_closed() {
            self.end(End::Closed);
            return closing();
        }
        let status = transport_status(status);
        if self.deadline_passed() {
            return self.end_at_deadline();
        }
        self.end(End::Failed(&status));
        status
    }

    /// The stream ended with this status (its trailer's, not OK).
    pub(super) fn ended_with(&mut self, status: &Status) {
        self.end(End::Failed(status));
    }

    /// The stream's clean end with `trailer`; a client-streaming call's
    /// with no message is the `INTERNAL` status returned (its metadata the
    /// trailer), which the caller gets and which counts as the classify
    /// says of it.
    pub(super) fn finished(&mut self, trailer: &MetadataMap) -> Result<(), Status> {
        if self.one_response && !self.received {
            // A client-streaming call answered OK with no message: the
            // server broke the call.
            let mut status = missing_response();
            *status.metadata_mut() = trailer.clone();
            self.end(End::Failed(&status));
            return Err(status);
        }
        self.end(End::Finished(trailer));
        Ok(())
    }

    /// With the wire stream pending: the stream's deadline, or the
    /// client's close, which end it with their status.
    pub(super) fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<Status> {
        if let Some(deadline) = self.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(self.end_at_deadline());
        }
        if !self.closed.is_closed() {
            return Poll::Pending;
        }
        self.end(End::Closed);
        Poll::Ready(closing())
    }
}

impl<I> Drop for StreamEnd<I> {
    /// A stream dropped before its end: at or after its deadline (within
    /// [`DEADLINE_SLACK`](super::DEADLINE_SLACK)), such as one a served
    /// RPC's handler holds when the server drops it at its deadline, it
    /// ended by the deadline and counts as a failure; before, its caller
    /// gave up, and it counts nothing (its ticket is let go). Either way,
    /// before the wire stream is dropped with the fields, which cancels it.
    fn drop(&mut self) {
        let Some(settle) = self.settle.take() else {
            return;
        };
        if self.limit.is_some_and(|d| at_deadline(&d, Instant::now())) {
            settle(End::DeadlinePassed);
        } else {
            drop(settle);
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::grpc::client::Settings;
    use crate::grpc::client::connection::Connection;

    /// What happened to a stream, in order.
    type Log = Arc<Mutex<Vec<String>>>;

    /// The stream on the wire: its drop is the HTTP/2 stream's cancel.
    struct Wire(Log);

    impl Drop for Wire {
        fn drop(&mut self) {
            self.0.lock().unwrap().push("cancel".to_owned());
        }
    }

    /// What a settle function holds (the breaker's ticket, the span):
    /// its drop lets them go.
    struct Held(Log);

    impl Drop for Held {
        fn drop(&mut self) {
            self.0.lock().unwrap().push("released".to_owned());
        }
    }

    /// A stream's end, with a deadline `after` from now, that logs each
    /// settle and what it held.
    fn stream(log: &Log, after: Duration) -> (StreamEnd<Wire>, Connection) {
        let held = Held(log.clone());
        let settled = log.clone();
        let settle: Settle = Box::new(move |end: End<'_>| {
            let how = match end {
                End::Finished(_) => "finished",
                End::Failed(_) => "failed",
                End::DeadlinePassed => "deadline",
                End::Closed => "closed",
            };
            settled.lock().unwrap().push(how.to_owned());
            drop(held);
        });
        let settings = Settings {
            addr: "carts:9090".to_owned(),
            ..Settings::default()
        };
        let conn = Connection::new(crate::Setup::new().host().clone(), &settings);
        let deadline = Deadline {
            at: Instant::now() + after,
            bound: Bound::Setting(after),
            step: Duration::ZERO,
        };
        let end = StreamEnd::new(
            Wire(log.clone()),
            settle,
            Some(deadline),
            conn.closed_flag(),
        );
        (end, conn)
    }

    fn taken(log: &Log) -> Vec<String> {
        std::mem::take(&mut *log.lock().unwrap())
    }

    /// Dropped at its deadline, a stream settles the deadline, then is
    /// cancelled; dropped before, it lets its ticket go, then is cancelled.
    #[tokio::test(start_paused = true)]
    async fn a_dropped_stream_settles_before_it_is_cancelled() {
        let log = Log::default();
        let (end, _conn) = stream(&log, Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(1)).await;
        drop(end);
        assert_eq!(taken(&log), ["deadline", "released", "cancel"]);
        let (end, _conn) = stream(&log, Duration::from_secs(1));
        drop(end);
        assert_eq!(taken(&log), ["released", "cancel"]);
    }

    /// A stream's end is settled once: at its deadline (which cancels it at
    /// once, after the settle), not again by what follows.
    #[tokio::test(start_paused = true)]
    async fn a_stream_ends_once_and_its_deadline_settles_then_cancels() {
        let log = Log::default();
        let (mut end, _conn) = stream(&log, Duration::from_secs(1));
        assert!(end.message(true).is_ok());
        tokio::time::advance(Duration::from_secs(1)).await;
        let status = end.message(true).expect_err("the deadline passed");
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        assert_eq!(
            status.message(),
            "carts:9090: the call's deadline passed: the client's timeout setting, 1s"
        );
        assert_eq!(taken(&log), ["deadline", "released", "cancel"]);
        assert!(end.is_ended() && end.wire().is_none());
        end.ended_with(&Status::internal("later"));
        assert!(end.finished(&MetadataMap::new()).is_ok());
        drop(end);
        assert_eq!(taken(&log), Vec::<String>::new());
    }

    /// A client-streaming call's clean end with no message is `INTERNAL`,
    /// counted as a failure with the trailer; with one, it finishes.
    #[tokio::test(start_paused = true)]
    async fn a_one_response_stream_must_carry_its_message() {
        let log = Log::default();
        let (mut end, _conn) = stream(&log, Duration::from_secs(1));
        end.one_response(true);
        let mut trailer = MetadataMap::new();
        trailer.insert("x-why", "none".parse().unwrap());
        let status = end.finished(&trailer).expect_err("no message");
        assert_eq!(status.code(), tonic::Code::Internal);
        assert_eq!(status.message(), "Missing response message.");
        assert_eq!(status.metadata().get("x-why").unwrap(), "none");
        drop(end);
        assert_eq!(taken(&log), ["failed", "released", "cancel"]);
        let (mut end, _conn) = stream(&log, Duration::from_secs(1));
        end.one_response(true);
        assert!(end.message(true).is_ok());
        assert!(end.finished(&trailer).is_ok());
        drop(end);
        assert_eq!(taken(&log), ["finished", "released", "cancel"]);
    }
}
