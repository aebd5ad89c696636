//! The attempt loop ([design](crate::design::client#retries): retries, classification,
//! streams), with the breaker inside the
//! retries: one `allow` per attempt.

use std::error::Error as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use futures_util::Stream;
use futures_util::future::Either;
use http::uri::PathAndQuery;
use opentelemetry::Context;
use tokio::time::Instant;
use tonic::Status;
use tonic::metadata::MetadataMap;

use super::client::{GRPC_TIMEOUT, GRPC_TIMEOUT_HEADER, Inner, deadline, own_timeout};
use super::codec::PreEncoded;
use super::connection::{
    AttemptBody, Connection, DialFailure, Sender, closing, dial_failure, mapped_from_http,
    never_processed, transport_status,
};
use super::decide::{StillConnecting, with_decision};
use super::hooks::{AttemptSpan, Hooks, call_context};
use super::layer::BoxError;
use super::limit::Limited;
use super::stream::{End, Holder, Settle, Streaming, deadline_exceeded};
use super::{AttemptTimeout, CallState, DEADLINE_SLACK, Ended, Method, RpcKind, classify_attempt};
use crate::circuit::{Outcome, OwnedTicket, Rejected, Ticket};
use crate::fault::InjectedError;
use crate::grpc::deadline::Deadline;
use crate::retry::{self, Attempted, Decision, Next};

/// How many times one attempt is sent again, at once, when its request
/// never reached the server (gRPC's transparent retry).
pub(super) const TRANSPARENT_RETRIES: usize = 3;

/// The status of a call to the dependency at `addr` that the breaker
/// rejected: Unavailable, with the address and the rejection's message,
/// and the [`Rejected`] as its source, so a caller can tell nothing was
/// sent.
fn rejected_status(rejected: Rejected, addr: &str) -> Status {
    let mut status = Status::unavailable(format!("{addr}: {rejected}"));
    status.set_source(Arc::new(rejected));
    status
}

/// What ended one attempt, apart from its result.
enum Cut<T> {
    /// The attempt returned.
    Returned(Result<T, Status>),
    /// The call's deadline passed first.
    Deadline,
    /// The connection was closed (`Setup::stop`); with the status of an
    /// injected delay the close cut short, which keeps its
    /// [`InjectedError`].
    Closed(Option<Status>),
}

/// The status of an injected delay that the close cut short, if `polled`
/// is one; else nothing (the close's own status is the attempt's).
fn injected<T>(polled: Poll<Result<T, Status>>) -> Option<Status> {
    match polled {
        Poll::Ready(Err(status)) if InjectedError::from_status(&status).is_some() => Some(status),
        _ => None,
    }
}

/// Whether `status` is an injected delay's that a deadline (the attempt's
/// or the call's) cut short.
fn delay_cut_by_deadline(status: &Status) -> bool {
    InjectedError::from_status(status)
        .is_some_and(|e| e.cause() == Some(crate::fault::Cause::DeadlineExceeded))
}

/// Runs `attempt` until it returns, the deadline passes or the connection
/// closes (a close seen before or with an attempt's error wins; a success
/// that came first is kept).
///
/// The close needs no waiter here: it fails the IO of the connection the
/// attempt waits on (and any dial it waits for), which wakes the attempt's
/// task, and a fault's delay races the close itself; so on any wake-up the
/// flag is read first.
fn bounded<T, F>(inner: &Inner, deadline: Option<Instant>, attempt: F) -> Bounded<'_, F>
where
    F: Future<Output = Result<T, Status>>,
{
    Bounded {
        attempt,
        timer: deadline.map(tokio::time::sleep_until),
        conn: &inner.conn,
        deadline,
        registered: None,
    }
}

pin_project_lite::pin_project! {
    /// The future of [`bounded`], polled by hand rather than with
    /// `select!`: on each wake-up the close's flag is read and the attempt
    /// polled first, and the deadline costs a waker comparison. Its timer
    /// enters tokio's wheel when the attempt first waits (with coop budget
    /// left, which the timer needs), and again only when the task's waker
    /// changes; the timer's own wake-up is read as
    /// [`Sleep::is_elapsed`](tokio::time::Sleep::is_elapsed). The attempt
    /// is stored once, in place (an `async fn` would keep its argument and
    /// its pinned copy apart).
    struct Bounded<'a, F> {
        #[pin]
        attempt: F,
        #[pin]
        timer: Option<tokio::time::Sleep>,
        conn: &'a Connection,
        deadline: Option<Instant>,
        // The waker the timer was registered with.
        registered: Option<std::task::Waker>,
    }
}

impl<T, F> Future for Bounded<'_, F>
where
    F: Future<Output = Result<T, Status>>,
{
    type Output = Cut<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Cut<T>> {
        let mut this = self.project();
        if this.conn.is_closed() {
            // Polled once more: a fault's delay ends at the close with its
            // own error.
            return Poll::Ready(Cut::Closed(injected(this.attempt.poll(cx))));
        }
        if let Poll::Ready(result) = this.attempt.poll(cx) {
            return Poll::Ready(match result {
                // The close fails the connection under the attempt: an
                // error made so comes after the flag was set, and is the
                // close's (read again here, as it may have landed during
                // this poll), never a failure to count.
                Err(status) if this.conn.is_closed() => {
                    Cut::Closed(injected(Poll::Ready(Err::<T, _>(status))))
                }
                // An injected delay the deadline cut short keeps its own
                // status: DeadlineExceeded, with the injected error as source.
                Err(status)
                    if this.deadline.is_some_and(|d| Instant::now() >= d)
                        && InjectedError::from_status(&status).is_none() =>
                {
                    Cut::Deadline
                }
                result => Cut::Returned(result),
            });
        }
        if this.timer.is_none() {
            return Poll::Pending;
        }
        if this
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            if this
                .timer
                .as_ref()
                .as_pin_ref()
                .is_some_and(|t| t.is_elapsed())
            {
                return Poll::Ready(Cut::Deadline);
            }
            return Poll::Pending;
        }
        // First wait, or a new waker: (re)register the timer with it.
        // A `Sleep` polled when the task's coop budget is spent returns
        // Pending without entering the timer wheel (it wakes the task to
        // come back): the registration counts only if budget was left.
        let armed = tokio::task::coop::has_budget_remaining();
        if let Some(timer) = this.timer.as_mut().as_pin_mut()
            && timer.poll(cx).is_ready()
        {
            return Poll::Ready(Cut::Deadline);
        }
        // Not armed: no fast path until a poll with budget registers it.
        *this.registered = armed.then(|| cx.waker().clone());
        Poll::Pending
    }
}

/// What the loop keeps of one call.
///
/// It owns the attempt in flight (its breaker ticket and its span), so a
/// call whose future is dropped settles that attempt in its `Drop`: before
/// the deadline, the caller gave up (the ticket is released, counting
/// nothing, and the span ends `CANCELLED`); at or after it (within
/// [`DEADLINE_SLACK`]), the deadline ended the call (a failure for the
/// breaker, `DEADLINE_EXCEEDED` on the span, `expired` in
/// `humus.retry.decisions`).
struct Call<'a> {
    /// What the attempts read; borrowed by an attempt's future while the
    /// loop holds the rest.
    ctx: CallCtx<'a>,
    attempt: u32,
    /// The attempt under way: admitted by the breaker, not yet settled.
    in_flight: Option<InFlight<'a>>,
    /// Waiting out the backoff before the next attempt.
    waiting: bool,
}

/// What every attempt of one call reads.
pub(super) struct CallCtx<'a> {
    pub(super) inner: &'a Inner,
    method: &'static Method,
    hooks: Hooks<'a>,
    /// The call's deadline, and which bound it is (its status names it).
    deadline: Option<Deadline>,
    /// What the attempt's sends say in their `grpc-timeout`: a unary
    /// attempt's deadline (the earlier of the call's and the attempt's
    /// own), or a stream's, the call's alone.
    send_deadline: Option<Instant>,
    /// An attempt is waiting for the connection (its dial): set while
    /// [`CallCtx::sender`] waits, and left set if the attempt is cut
    /// there, so that the deadline's status can say so.
    connecting: AtomicBool,
}

/// The attempt under way: what settling it needs.
struct InFlight<'a> {
    ticket: Ticket<'a>,
    span: AttemptSpan,
}

impl<'a> Call<'a> {
    fn new(
        inner: &'a Inner,
        method: &'static Method,
        cx: Context,
        deadline: Option<Deadline>,
    ) -> Call<'a> {
        Call {
            ctx: CallCtx {
                inner,
                method,
                hooks: Hooks { inner, method, cx },
                deadline,
                send_deadline: deadline.map(|d| d.at),
                connecting: AtomicBool::new(false),
            },
            attempt: 0,
            in_flight: None,
            waiting: false,
        }
    }

    /// Admits the next attempt through the breaker and starts its span:
    /// the attempt is then in flight (until [`Call::end_attempt`]).
    fn allow(&mut self) -> Result<(), Status> {
        self.attempt += 1;
        let ctx = &self.ctx;
        if ctx.inner.conn.is_closed() {
            ctx.hooks.decided(Decision::Stopped);
            return Err(closing());
        }
        match ctx.hooks.in_call(|| ctx.inner.breaker.allow()) {
            Ok(ticket) => {
                let span = ctx.hooks.attempt_start(self.attempt);
                self.in_flight = Some(InFlight { ticket, span });
                Ok(())
            }
            Err(rejected) => {
                let status = rejected_status(rejected, &ctx.inner.settings.addr);
                ctx.hooks.rejected(self.attempt, status.message());
                ctx.hooks.decided(Decision::Stopped);
                Err(status)
            }
        }
    }

    /// The deadline of the attempt starting now: the earlier of the call's
    /// and, when [`Settings::attempt_timeout`](super::Settings::attempt_timeout)
    /// is set, that long from now (the call's if the clock cannot say
    /// when). Unset, it reads no clock.
    fn attempt_deadline(&self) -> Option<Instant> {
        let call = self.ctx.at();
        let Some(after) = self.ctx.inner.settings.attempt_timeout else {
            return call;
        };
        if self.ctx.method.kind == RpcKind::ClientStreaming {
            // Its open is its whole upload (a server answers once it has
            // read the stream): the caller's pace, not the dependency's.
            return call;
        }
        match Instant::now().checked_add(after) {
            Some(own) if call.is_none_or(|d| own < d) => Some(own),
            _ => call,
        }
    }

    /// The status of an attempt its deadline, `bound`, cut short: the
    /// attempt's own timeout when `bound` is not the call's deadline
    /// ([`Call::attempt_deadline`] gives another only when the attempt's
    /// own is the earlier), unless the call's deadline has passed too.
    /// `injected` is the status of the injected delay the deadline cut
    /// short, if it cut one: the attempt's timeout keeps its
    /// [`InjectedError`] as a source, and the call's deadline returns it
    /// as it is.
    fn cut_status(&self, bound: Option<Instant>, injected: Option<Status>) -> Status {
        let call = self.ctx.at();
        match self.ctx.inner.settings.attempt_timeout {
            Some(after) if bound != call && call.is_none_or(|d| Instant::now() < d) => {
                let connecting = self.ctx.connecting.load(Ordering::Relaxed);
                let injected = injected
                    .as_ref()
                    .and_then(InjectedError::from_status)
                    .cloned();
                AttemptTimeout::status(after, connecting, &self.ctx.inner.settings.addr, injected)
            }
            _ => injected.unwrap_or_else(|| self.ctx.deadline_exceeded()),
        }
    }

    /// The status of a call whose deadline had passed when it was made
    /// (an inherited one, or its own of zero), if it had: the call ends
    /// `DEADLINE_EXCEEDED` before the breaker is asked, with no attempt,
    /// no attempt span and nothing counted; `expired` in
    /// `humus.retry.decisions`.
    fn expired(&self) -> Option<Status> {
        let at = self.ctx.at()?;
        if Instant::now() < at {
            return None;
        }
        self.ctx.hooks.decided(Decision::Expired);
        Some(with_decision(
            self.ctx.deadline_exceeded(),
            Decision::Expired,
        ))
    }

    /// The attempt in flight, for its future to send with (the context
    /// shared, its span to write, the attempt's number).
    fn attempt_parts(&mut self) -> (&CallCtx<'a>, &mut AttemptSpan, u32) {
        let span = &mut self
            .in_flight
            .as_mut()
            .expect("an attempt is in flight between allow and end_attempt")
            .span;
        (&self.ctx, span, self.attempt)
    }

    /// Takes the attempt in flight, to settle or to hand to a stream.
    fn take_attempt(&mut self) -> InFlight<'a> {
        self.in_flight
            .take()
            .expect("an attempt is in flight between allow and end_attempt")
    }

    /// Ends the attempt in flight's span with `status` (`None` for OK),
    /// and hands back its ticket, to settle.
    fn end_attempt(&mut self, status: Option<&Status>) -> Ticket<'a> {
        let InFlight { ticket, span } = self.take_attempt();
        self.ctx.hooks.attempt_end(span, status);
        ticket
    }

    /// The connection closed under the attempt in flight: its span ends
    /// with `status` (`CANCELLED`, or the injected delay the close cut
    /// short), its ticket is released (counting nothing), and the call ends
    /// without another attempt (`stopped`).
    fn closed(&mut self, status: Status) -> Status {
        let ticket = self.end_attempt(Some(&status));
        ticket.release();
        self.ctx.hooks.decided(Decision::Stopped);
        status
    }

    /// Waits before the next attempt; `Err` if the connection closes first
    /// (the call then ends, `stopped`).
    async fn wait(&mut self, after: std::time::Duration) -> Result<(), Status> {
        self.waiting = true;
        let waited = tokio::select! {
            () = self.ctx.inner.conn.closed_ref() => Err(closing()),
            () = tokio::time::sleep(after) => Ok(()),
        };
        self.waiting = false;
        if waited.is_err() {
            self.ctx.hooks.decided(Decision::Stopped);
        }
        waited
    }

    /// The stream opened: the call succeeded, however the stream ends
    /// (`succeeded` in `humus.retry.decisions`, and the budget's share).
    fn opened(&self) {
        let ctx = &self.ctx;
        ctx.hooks.decided(
            retry::decide(
                &ctx.inner.budget,
                &Attempted {
                    verdict: retry::Verdict::Success,
                    retry_after: None,
                    attempt: self.attempt,
                    max_attempts: ctx.inner.settings.max_attempts,
                    backoff: std::time::Duration::ZERO,
                    backoff_max: ctx.inner.settings.backoff_max,
                    now: Instant::now(),
                    deadline: ctx.at(),
                },
            )
            .decision(),
        );
    }

    /// Counts a finished attempt in the breaker and decides what follows.
    /// `resendable` is false when what the attempt sent cannot be sent
    /// again (a request stream it read): a Retry then becomes Stop.
    fn settle(
        &self,
        ticket: Ticket<'a>,
        status: Option<&Status>,
        trailer: &MetadataMap,
        resendable: bool,
    ) -> Next {
        let ctx = &self.ctx;
        let now = Instant::now();
        let call = CallState {
            cancelled: false,
            deadline_passed: ctx.at().is_some_and(|d| now >= d),
        };
        // A failure of the connection's dial is the client's to classify:
        // the first attempt of those that waited for a failed dial counts
        // it, once.
        let ended = match status.and_then(dial_failure) {
            Some(DialFailure::BackingOff) => Ended::BackingOff,
            Some(DialFailure::Failed(dial)) => Ended::DialFailed {
                first: dial.claim(),
            },
            None => Ended::Attempt { status, trailer },
        };
        let mut c = classify_attempt(ctx.method, &ctx.inner.settings.classify, ended, call);
        if !resendable && c.retry == retry::Verdict::Retry {
            c.retry = retry::Verdict::Stop;
            c.retry_after = None;
        }
        ctx.hooks.in_call(|| ticket.done(c.breaker));
        ctx.hooks.counted(c.breaker);
        let next = retry::decide(
            &ctx.inner.budget,
            &Attempted {
                verdict: c.retry,
                retry_after: c.retry_after,
                attempt: self.attempt,
                max_attempts: ctx.inner.settings.max_attempts,
                // Drawn only for a retry: nothing else waits it out.
                backoff: if c.retry == retry::Verdict::Retry {
                    ctx.inner.backoff.backoff(self.attempt)
                } else {
                    std::time::Duration::ZERO
                },
                backoff_max: ctx.inner.settings.backoff_max,
                now,
                deadline: ctx.at(),
            },
        );
        ctx.hooks.decided(next.decision());
        next
    }
}

impl CallCtx<'_> {
    /// When the call's deadline is, if it has one.
    fn at(&self) -> Option<Instant> {
        self.deadline.map(|d| d.at)
    }

    /// The call's `DEADLINE_EXCEEDED`, naming its deadline's bound, and
    /// saying so when the attempt was still waiting for the connection
    /// (the server accepted, or not, but never finished the dial).
    fn deadline_exceeded(&self) -> Status {
        let status = deadline_exceeded(self.deadline.map(|d| d.bound), &self.inner.settings.addr);
        if !self.connecting.load(Ordering::Relaxed) {
            return status;
        }
        Status::deadline_exceeded(format!("{}{StillConnecting}", status.message()))
    }

    /// The connection's sender ([`Connection::sender`](super::connection::Connection::sender)),
    /// dialled first if need be; while it waits, the call is marked as
    /// waiting for its connection.
    pub(super) async fn sender(&self) -> Result<Sender, Status> {
        self.connecting.store(true, Ordering::Relaxed);
        let sender = self.inner.conn.sender().await;
        self.connecting.store(false, Ordering::Relaxed);
        sender
    }

    /// The send of `span` never reached the server (`status`, a transparent
    /// resend follows): its span ends with that status, with its own
    /// `rpc.client.call.duration` point, and the resend gets a span of its
    /// own, a sibling under the call's context. Nothing is classified: the
    /// attempt goes on.
    pub(super) fn resend(&self, attempt: u32, span: &mut AttemptSpan, status: &Status) {
        let next = self.hooks.attempt_start(attempt);
        self.hooks
            .attempt_end(std::mem::replace(span, next), Some(status));
    }

    /// The headers one send of an attempt carries: `headers` (the
    /// caller's, or a copy of them), with the time left before the
    /// deadline as its `grpc-timeout`, and the attempt's trace context.
    pub(super) fn stamp(
        &self,
        mut headers: http::HeaderMap,
        span: &AttemptSpan,
    ) -> http::HeaderMap {
        if let Some(timeout) = self.timeout() {
            headers.insert(GRPC_TIMEOUT_HEADER, timeout);
        }
        let mut metadata = MetadataMap::from_headers(headers);
        self.hooks.propagate(span, &mut metadata);
        metadata.into_headers()
    }

    /// The time left before the send's deadline as a `grpc-timeout`
    /// value, if it has one: a unary attempt's (the earlier of the call's
    /// deadline and the attempt's own), a stream's (the call's).
    fn timeout(&self) -> Option<http::HeaderValue> {
        let deadline = self.send_deadline?;
        Some(grpc_timeout(
            deadline.saturating_duration_since(Instant::now()),
        ))
    }

    /// What a typed stream's open goes through: tonic's `Grpc` over the
    /// connection's sender ([`Timed`]), which adds the send's
    /// `grpc-timeout` (the time left now) to the request tonic makes.
    /// Its metadata is then [`CallCtx::untimed_metadata`].
    async fn grpc(&self) -> Result<tonic::client::Grpc<Timed>, Status> {
        let sender = self.sender().await?;
        let timed = Timed {
            sender,
            timeout: self.timeout(),
            limit: self.inner.settings.max_decoding_message_size,
        };
        // tonic's decoder's limit is the client's, which [`Limited`] has
        // applied first.
        Ok(
            tonic::client::Grpc::with_origin(timed, self.inner.conn.origin().clone())
                .max_decoding_message_size(self.inner.settings.max_decoding_message_size),
        )
    }

    /// The caller's metadata with the attempt's trace context, for a send
    /// through [`CallCtx::grpc`], which adds the `grpc-timeout`.
    fn untimed_metadata(&self, base: &MetadataMap, span: &AttemptSpan) -> MetadataMap {
        let mut metadata = base.clone();
        self.hooks.propagate(span, &mut metadata);
        metadata
    }
}

/// The connection's sender under tonic's `Grpc`, for one typed open: it
/// adds the send's `grpc-timeout` to the request tonic made of the
/// caller's metadata, so that the map tonic takes its reserved headers out
/// of is the caller's own (empty for most calls, where each of those
/// removals is a search in a map that is not empty with the timeout in
/// it). The per-attempt layers, if any, see the header as before. The
/// response's body is read through [`Limited`]: a message over the
/// client's decoding limit fails the stream `ResourceExhausted` before
/// tonic's decoder reads it.
struct Timed {
    sender: Sender,
    timeout: Option<http::HeaderValue>,
    /// [`Settings::max_decoding_message_size`](super::Settings::max_decoding_message_size).
    limit: usize,
}

/// The sender's response.
type Sent = <Sender as tower_service::Service<http::Request<tonic::body::Body>>>::Response;

impl tower_service::Service<http::Request<tonic::body::Body>> for Timed {
    type Response = http::Response<Limited<AttemptBody>>;
    type Error = <Sender as tower_service::Service<http::Request<tonic::body::Body>>>::Error;
    type Future = TimedFuture;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.sender.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<tonic::body::Body>) -> TimedFuture {
        if let Some(timeout) = self.timeout.take() {
            request.headers_mut().insert(GRPC_TIMEOUT_HEADER, timeout);
        }
        TimedFuture {
            sent: self.sender.call(request),
            limit: self.limit,
        }
    }
}

/// [`Timed`]'s response future: the sender's, its body [`Limited`].
struct TimedFuture {
    sent: <Sender as tower_service::Service<http::Request<tonic::body::Body>>>::Future,
    limit: usize,
}

impl Future for TimedFuture {
    type Output = Result<http::Response<Limited<AttemptBody>>, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let limit = self.limit;
        let sent: Result<Sent, BoxError> = std::task::ready!(self.sent.as_mut().poll(cx));
        Poll::Ready(sent.map(|response| response.map(|body| Limited::new(body, limit))))
    }
}

impl Drop for Call<'_> {
    /// The call's future was dropped: settles the attempt in flight as
    /// the deadline's (at or after it, within [`DEADLINE_SLACK`]) or as
    /// the caller's giving up (before it: its ticket and span are dropped,
    /// which release the ticket and end the span `CANCELLED`).
    fn drop(&mut self) {
        // A call that ended (or never started an attempt) has nothing to
        // settle: no clock read.
        if self.in_flight.is_none() && !self.waiting {
            return;
        }
        let ctx = &self.ctx;
        let at_deadline = ctx
            .deadline
            .is_some_and(|d| at_deadline(&d, Instant::now()));
        if !at_deadline {
            return;
        }
        if let Some(InFlight { ticket, span }) = self.in_flight.take() {
            ctx.hooks.attempt_end(span, Some(&ctx.deadline_exceeded()));
            ctx.hooks.in_call(|| ticket.done(Outcome::Failure));
            ctx.hooks.counted(Outcome::Failure);
            ctx.hooks.decided(Decision::Expired);
        } else if self.waiting {
            // Nothing in flight to count; the wait ended with the call.
            ctx.hooks.decided(Decision::Expired);
        }
    }
}

/// Whether a call dropped at `now` was dropped by its `deadline`: at or
/// after it, or less than [`DEADLINE_SLACK`] before it (more, for an
/// inherited deadline whose caller may have rounded its `grpc-timeout`
/// up: [`Deadline::dropped_by`]).
pub(super) fn at_deadline(deadline: &Deadline, now: Instant) -> bool {
    deadline.dropped_by(now, DEADLINE_SLACK)
}

/// `left` as a `grpc-timeout` value, rounded down to about three
/// significant digits: to the nanosecond below 1 ms, the microsecond
/// below 100 ms, 1 ms below 1 s,
/// 10 ms below 10 s, 100 ms below 100 s and 1 s from there (then minutes
/// and hours once the seconds need more than 8 digits); a zero `left` is
/// `1n`, the least the header can say.
///
/// Down, never up: the time sent never exceeds the time left, so the
/// deadline a server inherits from it is never later than this call's,
/// and a call its handler makes ends by that deadline (counted as the
/// deadline's, a failure) before this client cuts the attempt, rather
/// than being dropped early by the cut (counted as nothing).
///
/// Rounding makes the calls of a client repeat a few values, which HPACK
/// indexes once; a value exact to the microsecond differs on every call,
/// and each would be one more entry in the connection's header tables,
/// searched and evicted on both sides. The server may so see up to 1 %
/// less time than the caller has.
///
/// Source: gRPC over HTTP/2 (`PROTOCOL-HTTP2.md`, "Timeout": at most 8
/// digits and a unit), and the three significant digits of gRPC core's
/// timeout encoding (which rounds up).
fn grpc_timeout(left: std::time::Duration) -> http::HeaderValue {
    let (value, unit) = timeout_value(left);
    if unit == b'S'
        && let Some(written) = usize::try_from(value)
            .ok()
            .and_then(|secs| whole_seconds().get(secs))
    {
        return written.clone();
    }
    // At most 8 digits and the unit.
    let mut digits = [0u8; 8];
    let mut n = 0;
    let mut v = value;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut buf = [0u8; 9];
    for (i, d) in digits[..n].iter().rev().enumerate() {
        buf[i] = *d;
    }
    buf[n] = unit;
    http::HeaderValue::from_bytes(&buf[..=n]).expect("digits and a unit letter are visible ASCII")
}

/// The `grpc-timeout` values `0S` to `300S`, written once: a send with a
/// whole number of seconds left (once rounded down: from 100 s, or exactly
/// as many seconds as the timeout, on paused time) sends one of them, a
/// clone of a static value, where a value written from bytes is checked
/// and copied to the heap on every send.
fn whole_seconds() -> &'static [http::HeaderValue] {
    static VALUES: std::sync::LazyLock<Vec<http::HeaderValue>> = std::sync::LazyLock::new(|| {
        (0..=300)
            .map(|secs| {
                let text: &'static str = Box::leak(format!("{secs}S").into_boxed_str());
                http::HeaderValue::from_static(text)
            })
            .collect()
    });
    &VALUES
}

/// The value and unit of [`grpc_timeout`]: `value` has 1 to 8 digits.
fn timeout_value(left: std::time::Duration) -> (u64, u8) {
    const MAX: u64 = 99_999_999;
    let nanos = left.as_nanos();
    if nanos < 1_000_000 {
        // Below 1 ms: to the nanosecond (at most 6 digits).
        return ((nanos as u64).max(1), b'n');
    }
    if nanos < 100_000_000 {
        // Below 100 ms: to the microsecond (at most 5 digits).
        return ((nanos / 1_000) as u64, b'u');
    }
    // Whole milliseconds, rounded down: below 100 s, to 1, 10 or 100 ms.
    let millis = nanos / 1_000_000;
    let step = match millis {
        0..=999 => 1,
        1_000..=9_999 => 10,
        10_000..=99_999 => 100,
        _ => 1_000,
    };
    let millis = millis / step * step;
    if !millis.is_multiple_of(1_000) {
        // From 100 ms to 100 s here: at most 5 digits.
        return (millis as u64, b'm');
    }
    // Whole seconds from here (saturating: more seconds than u64 holds
    // would need more than 8 digits of hours anyway).
    let secs = u64::try_from(millis / 1_000).unwrap_or(u64::MAX);
    if secs <= MAX {
        (secs, b'S')
    } else if secs / 60 <= MAX {
        (secs / 60, b'M')
    } else {
        ((secs / 3_600).min(MAX), b'H')
    }
}

/// The caller's metadata, without the `grpc-timeout` each attempt sets.
pub(super) fn caller_metadata(mut metadata: MetadataMap) -> MetadataMap {
    // An empty map (most calls) is left as it is, without parsing the key.
    if !metadata.is_empty() {
        metadata.remove(GRPC_TIMEOUT);
    }
    metadata
}

/// Panics, saying why, when the call is polled outside a tokio runtime
/// (tokio's own panic, deep in a timer, would not say what to do).
fn require_runtime() {
    // A task of tokio's (the usual case) is polled on a runtime: a
    // thread-local read, where `Handle::try_current` clones the runtime's
    // handle (an atomic increment and decrement of a counter the runtime's
    // workers share) on every call.
    if tokio::task::try_id().is_none() && tokio::runtime::Handle::try_current().is_err() {
        panic!(
            "humus::grpc::client::Client: a call was polled outside a tokio runtime; \
             its deadline, dials and connection run on tokio: await it on a runtime \
             built with its time and I/O drivers (tokio::main, or Builder::enable_all)"
        );
    }
}

/// A unary call of `method`: its deadline and context are read here, when
/// the call is made (not when its future is first polled), and the request
/// encoded once.
pub(super) fn unary<'a, Req, Resp>(
    inner: &'a Arc<Inner>,
    method: &'static Method,
    request: tonic::Request<Req>,
) -> impl Future<Output = Result<tonic::Response<Resp>, Status>> + Send + 'a
where
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    let deadline = deadline(
        Instant::now(),
        Some(inner.settings.timeout),
        own_timeout(request.metadata()),
    );
    let (metadata, extensions, message) = request.into_parts();
    // Framed once: every attempt sends these bytes.
    let frame = match super::unary::frame(&message) {
        Ok(frame) => frame,
        // Longer than a frame can say: nothing is sent.
        Err(status) => return Either::Left(std::future::ready(Err(status))),
    };
    drop(message);
    let cx = call_context(&extensions);
    let metadata = caller_metadata(metadata);
    let send = TypedUnary {
        metadata,
        frame,
        _response: std::marker::PhantomData::<fn() -> Resp>,
    };
    Either::Right(run_unary(inner, method, cx, deadline, send))
}

/// What each attempt of a unary call sends, for [`run_unary`]: a typed
/// call's ([`TypedUnary`]) or a stock tonic client's, through the channel.
pub(super) trait UnarySend: Sync {
    /// The answer of an attempt that succeeded.
    type Output: Send;

    /// One attempt (its transparent resends included): `call`'s metadata
    /// and span for attempt number `attempt`.
    fn send<'s>(
        &'s self,
        call: &'s CallCtx<'_>,
        attempt: u32,
        span: &'s mut AttemptSpan,
    ) -> impl Future<Output = Result<Self::Output, Status>> + Send + 's;

    /// The trailer of an answer that succeeded, for its classification.
    fn trailer(output: &Self::Output) -> &MetadataMap;

    /// Whether what the last attempt sent can be sent again.
    fn is_resendable(&self) -> bool {
        true
    }
}

/// The attempt loop of a unary call: each attempt passes the breaker,
/// the fault point and the deadline, and is classified, counted and
/// retried as its classification and the budget decide.
pub(super) async fn run_unary<S: UnarySend>(
    inner: &Inner,
    method: &'static Method,
    cx: Context,
    deadline: Option<Deadline>,
    send: S,
) -> Result<S::Output, Status> {
    require_runtime();
    // Made first, so that the call's state is kept once across every
    // await, the first included (not beside its own arguments).
    let mut call = Call::new(inner, method, cx, deadline);
    // A call takes a unit of the task's cooperative budget, as a tokio
    // resource does: a loop of calls failed at once (the breaker open)
    // still yields to the runtime.
    tokio::task::coop::consume_budget().await;
    if let Some(status) = call.expired() {
        return Err(status);
    }
    loop {
        call.allow()?;
        // The attempt's deadline, which its sends' `grpc-timeout` says
        // (read from there once it is cut: no copy is kept across the
        // attempt), and which an injected delay ends at.
        let bound = call.attempt_deadline();
        call.ctx.send_deadline = bound;
        let (ctx, span, n) = call.attempt_parts();
        let send = &send;
        let attempt = bounded(inner, bound, async move {
            ctx.hooks.inject_fault(span, bound).await?;
            send.send(ctx, n, span).await
        });
        let result = match attempt.await {
            Cut::Returned(Err(status)) if delay_cut_by_deadline(&status) => {
                Err(call.cut_status(call.ctx.send_deadline, Some(status)))
            }
            Cut::Returned(result) => result,
            Cut::Deadline => Err(call.cut_status(call.ctx.send_deadline, None)),
            Cut::Closed(injected) => {
                return Err(call.closed(injected.unwrap_or_else(closing)));
            }
        };
        let ticket = call.end_attempt(result.as_ref().err());
        let resendable = send.is_resendable();
        let next = match &result {
            Ok(output) => call.settle(ticket, None, S::trailer(output), resendable),
            Err(status) => call.settle(ticket, Some(status), status.metadata(), resendable),
        };
        match next {
            Next::Retry { after } => call.wait(after).await?,
            next => return result.map_err(|status| with_decision(status, next.decision())),
        }
    }
}

/// A typed unary call's attempts: the message framed once.
struct TypedUnary<Resp> {
    metadata: MetadataMap,
    /// The request's gRPC frame: its head and the message.
    frame: bytes::Bytes,
    _response: std::marker::PhantomData<fn() -> Resp>,
}

impl<Resp> UnarySend for TypedUnary<Resp>
where
    Resp: prost::Message + Default + Send + 'static,
{
    type Output = tonic::Response<Resp>;

    fn send<'s>(
        &'s self,
        call: &'s CallCtx<'_>,
        attempt: u32,
        span: &'s mut AttemptSpan,
    ) -> impl Future<Output = Result<Self::Output, Status>> + Send + 's {
        send_unary::<Resp>(call, attempt, &self.metadata, span, &self.frame)
    }

    fn trailer(output: &Self::Output) -> &MetadataMap {
        output.metadata()
    }
}

/// One unary attempt over the connection, sent again at once if the request
/// never reached the server, each send in a span of its own. Each send's
/// metadata is the caller's `base` with what [`CallCtx::metadata`] adds
/// (moved into the request: one copy of the caller's map per send); its
/// body is `frame`, and its response is read as tonic's `Grpc::unary`
/// reads it ([`unary::read`](super::unary::read)). The path is made for
/// each send (from a `'static` string: no allocation), not held by the
/// call's future for its whole life.
async fn send_unary<Resp>(
    call: &CallCtx<'_>,
    attempt: u32,
    base: &MetadataMap,
    span: &mut AttemptSpan,
    frame: &bytes::Bytes,
) -> Result<tonic::Response<Resp>, Status>
where
    Resp: prost::Message + Default + Send + 'static,
{
    let mut resent = 0;
    loop {
        // Again for a resend: the connection that failed it has gone.
        let mut sender = call.sender().await?;
        let request = super::unary::request(
            call.inner.conn.origin(),
            call.method.full_name,
            call.untimed_metadata(base, span),
            call.timeout(),
            frame.clone(),
        );
        let result = match tower_service::Service::call(&mut sender, request).await {
            Ok(response) => {
                super::unary::read::<Resp, _>(
                    response,
                    call.inner.settings.max_decoding_message_size,
                )
                .await
            }
            Err(err) => Err(Status::from_error(err)),
        }
        .map_err(transport_status);
        match result {
            Err(status) if resent < TRANSPARENT_RETRIES && never_processed(&status) => {
                resent += 1;
                call.resend(attempt, span, &status);
            }
            result => return result,
        }
    }
}

/// What the request of a stream is, for [`open`].
pub(super) enum Outbound<S> {
    /// One message, encoded once (server streaming).
    One(bytes::Bytes),
    /// A stream of messages, held between attempts (client and
    /// bidirectional streaming).
    Many(Holder<Pin<Box<S>>>),
}

impl<S> Outbound<S> {
    /// Whether what an attempt sent can be sent again: one message always;
    /// a stream only while no attempt has read it (reading uses it up).
    fn is_resendable(&self) -> bool {
        match self {
            Outbound::One(_) => true,
            Outbound::Many(held) => held.is_unread(),
        }
    }
}

/// Opens a stream of `method`: the open is retried as a unary attempt is
/// (with the backoff, not `Settings::timeout`: a stream ends with its
/// caller's own deadline, or the inherited one); once open (once the
/// server answered with its response headers), the stream is never
/// retried, and its ticket is settled when it ends. A trailers-only
/// answer (a status and no headers) has not opened it: that attempt
/// failed with the status, as a unary attempt does.
///
/// The stream's deadline and context are read here, when the call is made.
/// `one_response`: a client-streaming call, whose stream must carry one
/// message before its end.
pub(super) fn open<'a, S, Req, Resp>(
    inner: &'a Arc<Inner>,
    method: &'static Method,
    request: tonic::Request<Outbound<S>>,
    one_response: bool,
) -> impl Future<Output = Result<tonic::Response<Streaming<Resp>>, Status>> + Send + 'a
where
    S: Stream<Item = Req> + Send + 'static,
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    let deadline = deadline(Instant::now(), None, own_timeout(request.metadata()));
    let (metadata, extensions, outbound) = request.into_parts();
    let cx = call_context(&extensions);
    let metadata = caller_metadata(metadata);
    let send = TypedOpen::<S, Req, Resp> {
        path: PathAndQuery::from_static(method.full_name),
        metadata,
        outbound,
        _response: std::marker::PhantomData,
    };
    async move {
        let Opened { response, settle } = run_open(inner, method, cx, deadline, send).await?;
        let (headers, stream, extensions) = response.into_parts();
        let stream = Streaming::new(stream, settle, deadline, inner.conn.closed_flag())
            .one_response(one_response);
        Ok(tonic::Response::from_parts(headers, stream, extensions))
    }
}

/// What each attempt to open a stream sends, for [`run_open`]: a typed
/// call's ([`TypedOpen`]) or a stock tonic client's, through the channel.
pub(super) trait OpenSend: Sync {
    /// The answer of an attempt that opened the stream.
    type Output: Send;

    /// One attempt to open the stream (its transparent resends included):
    /// `Ok(_)` opened (the server answered with its response headers);
    /// `Err` a failed open, classified and retried as a unary attempt: one
    /// nothing came back from, or the server's trailers-only status
    /// (gRFC A6: a call is committed by the response's headers, and a
    /// trailers-only answer has none).
    fn send<'s>(
        &'s self,
        call: &'s CallCtx<'_>,
        attempt: u32,
        span: &'s mut AttemptSpan,
    ) -> impl Future<Output = Result<Self::Output, Status>> + Send + 's;

    /// Whether what the last attempt sent can be sent again.
    fn is_resendable(&self) -> bool;
}

/// A stream that opened, and what counts it in the breaker at its end.
pub(super) struct Opened<T> {
    pub(super) response: T,
    pub(super) settle: Settle,
}

/// The attempt loop of a stream's open: attempts as [`run_unary`]'s until
/// one opens the stream (the server's response headers); the stream then
/// keeps the attempt's ticket and span, and `settle` counts it once, at
/// its end. An attempt that failed, trailers-only status included, is
/// settled as a unary attempt is.
pub(super) async fn run_open<S: OpenSend>(
    inner: &Arc<Inner>,
    method: &'static Method,
    cx: Context,
    deadline: Option<Deadline>,
    send: S,
) -> Result<Opened<S::Output>, Status> {
    require_runtime();
    // Made first, so that the call's state is kept once across every
    // await, the first included (not beside its own arguments).
    let mut call = Call::new(inner, method, cx, deadline);
    // A call takes a unit of the task's cooperative budget, as a tokio
    // resource does: a loop of calls failed at once (the breaker open)
    // still yields to the runtime.
    tokio::task::coop::consume_budget().await;
    if let Some(status) = call.expired() {
        return Err(status);
    }
    loop {
        call.allow()?;
        // The open's deadline, which an injected delay ends at; its
        // `grpc-timeout` stays the call's, as the stream, once open, may
        // outlive the attempt's own.
        let bound = call.attempt_deadline();
        let (ctx, span, n) = call.attempt_parts();
        let send = &send;
        let attempt = bounded(inner, bound, async move {
            ctx.hooks.inject_fault(span, bound).await?;
            send.send(ctx, n, span).await
        });
        let result = match attempt.await {
            Cut::Returned(Err(status)) if delay_cut_by_deadline(&status) => {
                Err(call.cut_status(bound, Some(status)))
            }
            Cut::Returned(result) => result,
            Cut::Deadline => Err(call.cut_status(bound, None)),
            Cut::Closed(injected) => {
                return Err(call.closed(injected.unwrap_or_else(closing)));
            }
        };
        let status = match result {
            Ok(response) => {
                // Opened: the call succeeded, however the stream ends; the
                // stream keeps the ticket, and settles it at its end.
                call.opened();
                let InFlight { ticket, span } = call.take_attempt();
                let settle = stream_settle(
                    inner,
                    method,
                    call.ctx.hooks.cx.clone(),
                    ticket.into_owned(),
                    span,
                    deadline,
                );
                return Ok(Opened { response, settle });
            }
            // Not opened (a trailers-only status among them): the
            // attempt's failure.
            Err(status) => status,
        };
        let ticket = call.end_attempt(Some(&status));
        let next = call.settle(
            ticket,
            Some(&status),
            status.metadata(),
            send.is_resendable(),
        );
        match next {
            Next::Retry { after } => call.wait(after).await?,
            next => return Err(with_decision(status, next.decision())),
        }
    }
}

/// A typed stream's attempts to open.
struct TypedOpen<S, Req, Resp> {
    path: PathAndQuery,
    metadata: MetadataMap,
    outbound: Outbound<S>,
    _response: std::marker::PhantomData<fn() -> (Req, Resp)>,
}

impl<S, Req, Resp> OpenSend for TypedOpen<S, Req, Resp>
where
    S: Stream<Item = Req> + Send + 'static,
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    type Output = tonic::Response<tonic::Streaming<Resp>>;

    fn send<'s>(
        &'s self,
        call: &'s CallCtx<'_>,
        attempt: u32,
        span: &'s mut AttemptSpan,
    ) -> impl Future<Output = Result<Self::Output, Status>> + Send + 's {
        send_open::<S, Req, Resp>(
            call,
            attempt,
            &self.path,
            &self.metadata,
            span,
            &self.outbound,
        )
    }

    fn is_resendable(&self) -> bool {
        self.outbound.is_resendable()
    }
}

/// One attempt to open a stream, sent again at once if the request never
/// reached the server and its request stream is still unread, each send
/// in a span of its own ([`send_unary`]).
///
/// `Ok` is an open stream: the server answered with its response headers.
/// `Err` is a failed open: one nothing came back from (no connection, a
/// failed dial, a refused stream), or the server's trailers-only status
/// (the stream never opened: that status is the attempt's). tonic gives a
/// status it read from the server no source, and one made of a transport
/// error the error as its source; only the latter may be sent again at
/// once.
async fn send_open<S, Req, Resp>(
    call: &CallCtx<'_>,
    attempt: u32,
    path: &PathAndQuery,
    base: &MetadataMap,
    span: &mut AttemptSpan,
    outbound: &Outbound<S>,
) -> Result<tonic::Response<tonic::Streaming<Resp>>, Status>
where
    S: Stream<Item = Req> + Send + 'static,
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    let mut resent = 0;
    loop {
        // Again for a resend: the connection that failed it has gone.
        let mut grpc = call.grpc().await?;
        let result = match outbound {
            Outbound::One(body) => {
                let request = tonic::Request::from_parts(
                    call.untimed_metadata(base, span),
                    tonic::Extensions::default(),
                    body.clone(),
                );
                grpc.server_streaming(request, path.clone(), PreEncoded::<Resp>::new(body.len()))
                    .await
            }
            Outbound::Many(held) => {
                let request = tonic::Request::from_parts(
                    call.untimed_metadata(base, span),
                    tonic::Extensions::default(),
                    held.lend(),
                );
                grpc.streaming(
                    request,
                    path.clone(),
                    tonic_prost::ProstCodec::<Req, Resp>::default(),
                )
                .await
            }
        };
        match result {
            Ok(response) => return Ok(response),
            // The server's own trailers-only status (not a proxy's error
            // page, which is no gRPC server's answer): the attempt's, as
            // the server sent it; the server saw the request, so it is not
            // sent again at once.
            Err(status) if status.source().is_none() && !mapped_from_http(&status) => {
                return Err(status);
            }
            Err(status) => {
                let status = transport_status(status);
                if resent < TRANSPARENT_RETRIES
                    && outbound.is_resendable()
                    && never_processed(&status)
                {
                    resent += 1;
                    call.resend(attempt, span, &status);
                } else {
                    return Err(status);
                }
            }
        }
    }
}

/// The settle function of a stream that opened: counts it in the breaker
/// once, at its end.
pub(super) fn stream_settle(
    inner: &Arc<Inner>,
    method: &'static Method,
    cx: Context,
    ticket: OwnedTicket,
    span: AttemptSpan,
    deadline: Option<Deadline>,
) -> Settle {
    // The stream may outlive the call that opened it: it keeps its own
    // handle on the client.
    let inner = inner.clone();
    Box::new(move |end: End<'_>| {
        let hooks = Hooks {
            inner: &inner,
            method,
            cx,
        };
        let classify = |status: Option<&Status>, trailer: &MetadataMap| {
            let call = CallState {
                cancelled: false,
                deadline_passed: status.is_some()
                    && deadline.is_some_and(|d| Instant::now() >= d.at),
            };
            let ended = Ended::Stream { status, trailer };
            classify_attempt(method, &inner.settings.classify, ended, call).breaker
        };
        let outcome = match end {
            End::Finished(trailer) => {
                hooks.attempt_end(span, None);
                Some(classify(None, trailer))
            }
            End::Failed(status) => {
                hooks.attempt_end(span, Some(status));
                Some(classify(Some(status), status.metadata()))
            }
            End::DeadlinePassed => {
                let bound = deadline.map(|d| d.bound);
                hooks.attempt_end(span, Some(&deadline_exceeded(bound, &inner.settings.addr)));
                Some(Outcome::Failure)
            }
            End::Closed => {
                // The connection closed under it: the caller's side, not the
                // dependency's. Counts nothing.
                hooks.attempt_end(span, Some(&closing()));
                None
            }
        };
        match outcome {
            Some(outcome) => {
                hooks.in_call(|| ticket.done(outcome));
                hooks.counted(outcome);
            }
            None => ticket.release(),
        }
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::grpc_timeout;

    fn written(d: Duration) -> String {
        grpc_timeout(d).to_str().expect("ASCII").to_owned()
    }

    #[test]
    fn grpc_timeout_rounds_down_to_about_three_digits() {
        let cases = [
            (Duration::ZERO, "1n"),
            (Duration::from_nanos(1), "1n"),
            (Duration::from_micros(999), "999000n"),
            (Duration::from_nanos(1_500_999), "1500u"),
            (Duration::from_nanos(99_999_999), "99999u"),
            (Duration::from_millis(300), "300m"),
            (Duration::from_micros(300_999), "300m"),
            (Duration::from_micros(999_999), "999m"),
            (Duration::from_millis(1_000), "1S"),
            (Duration::from_micros(1_009_999), "1S"),
            (Duration::from_millis(2_345), "2340m"),
            (Duration::from_micros(9_999_999), "9990m"),
            (Duration::from_secs(10), "10S"),
            (Duration::from_millis(10_099), "10S"),
            (Duration::from_millis(15_050), "15S"),
            (Duration::from_millis(15_150), "15100m"),
            (Duration::from_millis(29_999), "29900m"),
            (Duration::from_millis(100_999), "100S"),
            (Duration::from_secs(300), "300S"),
            (Duration::from_secs(99_999_999), "99999999S"),
            (Duration::from_secs(100_000_000), "1666666M"),
            (Duration::from_secs(60 * 99_999_999 + 59), "99999999M"),
            (Duration::from_secs(60 * 100_000_000), "1666666H"),
        ];
        for (d, want) in cases {
            assert_eq!(written(d), want, "{d:?}");
        }
    }

    proptest::proptest! {
        /// What is written parses (as tonic's server parses it) to at
        /// most the time left (one nanosecond for none) and at least 1 %
        /// less.
        #[test]
        fn grpc_timeout_never_lengthens_and_barely_shortens(nanos in proptest::prop_oneof![0u64..=10u64.pow(12), proptest::num::u64::ANY]) {
            let left = Duration::from_nanos(nanos);
            let parsed = crate::grpc::deadline::parse_grpc_timeout(written(left).as_bytes())
                .expect("parses");
            proptest::prop_assert!(parsed <= left.max(Duration::from_nanos(1)), "{left:?} -> {parsed:?}");
            proptest::prop_assert!(left - parsed.min(left) <= left / 100, "{left:?} -> {parsed:?}");
        }
    }

    #[test]
    fn an_unrealistic_grpc_timeout_is_capped() {
        assert_eq!(written(Duration::from_secs(u64::MAX)), "99999999H");
    }
}
