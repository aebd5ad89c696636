//! The attempt loop ([design](crate::design::client#retries): retries, classification,
//! streams), with the breaker inside the
//! retries: one `allow` per attempt.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use futures_util::Stream;
use http::uri::PathAndQuery;
use opentelemetry::Context;
use tokio::time::Instant;
use tonic::Status;
use tonic::metadata::MetadataMap;

use super::client::{GRPC_TIMEOUT, Inner, deadline};
use super::codec::{PreEncoded, encode_once};
use super::connection::{Connection, closing, never_processed, transport_status};
use super::hooks::{AttemptSpan, Hooks, call_context};
use super::stream::{End, Holder, Settle, Streaming, deadline_exceeded};
use super::{CallState, Ended, Method, classify_attempt};
use crate::circuit::{Outcome, OwnedTicket, Rejected, Ticket};
use crate::fault::InjectedError;
use crate::retry::{self, Attempted, Decision, Next};

/// How many times one attempt is sent again, at once, when its request
/// never reached the server (gRPC's transparent retry).
const TRANSPARENT_RETRIES: usize = 3;

/// The status of a call the breaker rejected: Unavailable, with the
/// rejection's message, and the [`Rejected`] as its source, so a caller can
/// tell nothing was sent.
fn rejected_status(rejected: Rejected) -> Status {
    let mut status = Status::unavailable(rejected.to_string());
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
struct Call<'a> {
    inner: &'a Inner,
    method: &'static Method,
    hooks: Hooks<'a>,
    deadline: Option<Instant>,
    attempt: u32,
}

impl<'a> Call<'a> {
    fn new(
        inner: &'a Inner,
        method: &'static Method,
        cx: Context,
        deadline: Option<Instant>,
    ) -> Call<'a> {
        Call {
            inner,
            method,
            hooks: Hooks { inner, method, cx },
            deadline,
            attempt: 0,
        }
    }

    /// Admits the next attempt through the breaker.
    fn allow(&mut self) -> Result<Ticket<'a>, Status> {
        self.attempt += 1;
        if self.inner.conn.is_closed() {
            return Err(closing());
        }
        let allowed = self.hooks.in_call(|| self.inner.breaker.allow());
        allowed.map_err(|rejected| {
            self.hooks.rejected(self.attempt, &rejected);
            self.hooks.decided(Decision::Stopped);
            rejected_status(rejected)
        })
    }

    /// Counts a finished attempt in the breaker and decides what follows.
    /// `resendable` is false when what the attempt sent cannot be sent
    /// again (a request stream it read): a Retry then becomes Stop.
    fn settle(
        &self,
        ticket: Ticket<'_>,
        status: Option<&Status>,
        trailer: &MetadataMap,
        resendable: bool,
    ) -> Next {
        let now = Instant::now();
        let call = CallState {
            cancelled: false,
            deadline_passed: self.deadline.is_some_and(|d| now >= d),
        };
        let mut c = classify_attempt(
            self.method,
            &self.inner.settings.classify,
            Ended::Attempt { status, trailer },
            call,
        );
        if !resendable && c.retry == retry::Verdict::Retry {
            c.retry = retry::Verdict::Stop;
            c.retry_after = None;
        }
        self.hooks.in_call(|| ticket.done(c.breaker));
        self.hooks.counted(c.breaker);
        let next = retry::decide(
            &self.inner.budget,
            &Attempted {
                verdict: c.retry,
                retry_after: c.retry_after,
                attempt: self.attempt,
                max_attempts: self.inner.settings.max_attempts,
                // Drawn only for a retry: nothing else waits it out.
                backoff: if c.retry == retry::Verdict::Retry {
                    self.inner.backoff.backoff(self.attempt)
                } else {
                    std::time::Duration::ZERO
                },
                backoff_max: self.inner.settings.backoff_max,
                now,
                deadline: self.deadline,
            },
        );
        self.hooks.decided(next.decision());
        next
    }

    /// The send of `span` never reached the server (`status`, a transparent
    /// resend follows): its span ends with that status, with its own
    /// `rpc.client.call.duration` point, and the resend gets a span of its
    /// own, a sibling under the call's context. Nothing is classified: the
    /// attempt goes on.
    fn resend(&self, span: &mut AttemptSpan, status: &Status) {
        let next = self.hooks.attempt_start(self.attempt);
        self.hooks
            .attempt_end(std::mem::replace(span, next), Some(status));
    }

    /// Waits before the next attempt; `Err` if the connection closes first.
    async fn wait(&self, after: std::time::Duration) -> Result<(), Status> {
        tokio::select! {
            () = self.inner.conn.closed_ref() => Err(closing()),
            () = tokio::time::sleep(after) => Ok(()),
        }
    }

    /// The metadata one send of an attempt carries: the caller's, with the
    /// time left before the deadline as its `grpc-timeout`, and the
    /// attempt's trace context.
    fn metadata(&self, base: &MetadataMap, span: &AttemptSpan) -> MetadataMap {
        let mut metadata = base.clone();
        if let Some(deadline) = self.deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            metadata.insert(grpc_timeout_key(), grpc_timeout(left));
        }
        self.hooks.propagate(span, &mut metadata);
        metadata
    }
}

/// `left` as a `grpc-timeout` value, rounded up to about three significant
/// digits as gRPC's C core writes it: to 1 ms below 1 s, 10 ms below 10 s,
/// 100 ms below 100 s and 1 s from there (then minutes and hours once the
/// seconds need more than 8 digits); a zero `left` is `1n`, the least the
/// header can say.
///
/// Rounding makes the calls of a client repeat a few values ("10S" for a
/// first attempt under the default 10 s timeout), which HPACK indexes once;
/// a value exact to the microsecond differs on every call, and each would
/// be one more entry in the connection's header tables, searched and
/// evicted on both sides. The server may so see up to 1 % (at least 1 ms)
/// more time than the caller has: the client's own timer ends the call at
/// the deadline itself.
///
/// Source: gRPC over HTTP/2 (`PROTOCOL-HTTP2.md`, "Timeout": at most 8
/// digits and a unit), and the rounding of gRPC core's timeout encoding.
fn grpc_timeout(left: std::time::Duration) -> tonic::metadata::AsciiMetadataValue {
    let (value, unit) = timeout_value(left);
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
    tonic::metadata::AsciiMetadataValue::try_from(&buf[..=n])
        .expect("digits and a unit letter are visible ASCII")
}

/// The value and unit of [`grpc_timeout`]: `value` has 1 to 8 digits.
fn timeout_value(left: std::time::Duration) -> (u64, u8) {
    const MAX: u64 = 99_999_999;
    if left.is_zero() {
        return (1, b'n');
    }
    // Whole milliseconds, rounded up: below 100 s, to 1, 10 or 100 ms.
    let millis = left.as_nanos().div_ceil(1_000_000);
    let step = match millis {
        0..=1_000 => 1,
        1_001..=10_000 => 10,
        10_001..=100_000 => 100,
        _ => 1_000,
    };
    // Rounded up to its step: a whole number of seconds from 100 s on.
    let millis = millis.div_ceil(step) * step;
    if millis % 1_000 != 0 {
        // Below 100 s here: at most 6 digits.
        return (millis as u64, b'm');
    }
    // Whole seconds from here (saturating: more seconds than u64 holds
    // would need more than 8 digits of hours anyway).
    let secs = u64::try_from(millis / 1_000).unwrap_or(u64::MAX);
    if secs <= MAX {
        (secs, b'S')
    } else if secs.div_ceil(60) <= MAX {
        (secs.div_ceil(60), b'M')
    } else {
        (secs.div_ceil(3_600).min(MAX), b'H')
    }
}

/// The caller's metadata, without the `grpc-timeout` each attempt sets.
fn caller_metadata(mut metadata: MetadataMap) -> MetadataMap {
    // An empty map (most calls) is left as it is, without parsing the key.
    if !metadata.is_empty() {
        metadata.remove(GRPC_TIMEOUT);
    }
    metadata
}

/// The `grpc-timeout` key, checked once (inserting by `&str` would parse
/// it on every send).
fn grpc_timeout_key() -> tonic::metadata::AsciiMetadataKey {
    static KEY: std::sync::LazyLock<tonic::metadata::AsciiMetadataKey> =
        std::sync::LazyLock::new(|| tonic::metadata::AsciiMetadataKey::from_static(GRPC_TIMEOUT));
    KEY.clone()
}

/// Panics, saying why, when the call is polled outside a tokio runtime
/// (tokio's own panic, deep in a timer, would not say what to do).
fn require_runtime() {
    if tokio::runtime::Handle::try_current().is_err() {
        panic!(
            "humus::grpc::client::Client: a call was polled outside a tokio runtime; \
             its deadline, dials and connection run on tokio: await it on a runtime \
             built with its time and I/O drivers (tokio::main, or Builder::enable_all)"
        );
    }
}

pub(super) async fn unary<Req, Resp>(
    inner: &Arc<Inner>,
    method: &'static Method,
    request: tonic::Request<Req>,
) -> Result<tonic::Response<Resp>, Status>
where
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    require_runtime();
    let deadline = deadline(
        Instant::now(),
        Some(inner.settings.timeout),
        request.metadata(),
    );
    let (metadata, extensions, message) = request.into_parts();
    let cx = call_context(&extensions);
    let metadata = caller_metadata(metadata);
    // Encoded once: every attempt sends these bytes.
    let body = encode_once(&message);
    drop(message);
    let path = PathAndQuery::from_static(method.full_name);
    let mut call = Call::new(inner, method, cx, deadline);
    loop {
        let ticket = call.allow()?;
        let mut span = call.hooks.attempt_start(call.attempt);
        let attempt = bounded(inner, deadline, async {
            call.hooks.inject_fault(&span, deadline).await?;
            send_unary::<Resp>(&call, &path, &metadata, &mut span, &body).await
        });
        let result = match attempt.await {
            Cut::Returned(result) => result,
            Cut::Deadline => Err(deadline_exceeded()),
            Cut::Closed(injected) => {
                let status = injected.unwrap_or_else(closing);
                call.hooks.attempt_end(span, Some(&status));
                ticket.release();
                return Err(status);
            }
        };
        call.hooks.attempt_end(span, result.as_ref().err());
        let next = match &result {
            Ok(response) => call.settle(ticket, None, response.metadata(), true),
            Err(status) => call.settle(ticket, Some(status), status.metadata(), true),
        };
        match next {
            Next::Retry { after } => call.wait(after).await?,
            _ => return result,
        }
    }
}

/// One unary attempt over the connection, sent again at once if the request
/// never reached the server. Each send's metadata is the caller's `base`
/// with what [`Call::metadata`] adds (moved into the request: one copy of
/// the caller's map per send).
async fn send_unary<Resp>(
    call: &Call<'_>,
    path: &PathAndQuery,
    base: &MetadataMap,
    span: &mut AttemptSpan,
    body: &bytes::Bytes,
) -> Result<tonic::Response<Resp>, Status>
where
    Resp: prost::Message + Default + Send + 'static,
{
    let mut resent = 0;
    loop {
        // Again for a resend: the connection that failed it has gone.
        let mut grpc = call.inner.conn.grpc().await?;
        let request = tonic::Request::from_parts(
            call.metadata(base, span),
            tonic::Extensions::default(),
            body.clone(),
        );
        match grpc
            .unary(request, path.clone(), PreEncoded::<Resp>::new())
            .await
            .map_err(transport_status)
        {
            Err(status) if resent < TRANSPARENT_RETRIES && never_processed(&status) => {
                resent += 1;
                call.resend(span, &status);
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
/// caller's own deadline); once open, the stream is never retried, and its
/// ticket is settled when it ends.
pub(super) async fn open<S, Req, Resp>(
    inner: &Arc<Inner>,
    method: &'static Method,
    metadata: MetadataMap,
    cx: Context,
    outbound: Outbound<S>,
) -> Result<tonic::Response<Streaming<Resp>>, Status>
where
    S: Stream<Item = Req> + Send + 'static,
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    require_runtime();
    let deadline = deadline(Instant::now(), None, &metadata);
    let metadata = caller_metadata(metadata);
    let path = PathAndQuery::from_static(method.full_name);
    let mut call = Call::new(inner, method, cx, deadline);
    loop {
        let ticket = call.allow()?;
        let mut span = call.hooks.attempt_start(call.attempt);
        let attempt = bounded(inner, deadline, async {
            call.hooks.inject_fault(&span, deadline).await?;
            send_open::<S, Req, Resp>(&call, &path, &metadata, &mut span, &outbound).await
        });
        let result = match attempt.await {
            Cut::Returned(result) => result,
            Cut::Deadline => Err(deadline_exceeded()),
            Cut::Closed(injected) => {
                let status = injected.unwrap_or_else(closing);
                call.hooks.attempt_end(span, Some(&status));
                ticket.release();
                return Err(status);
            }
        };
        let status = match result {
            Ok(response) => {
                // Opened: the call succeeded, however the stream ends; the
                // stream keeps the ticket, and settles it at its end.
                call.hooks.decided(
                    retry::decide(
                        &inner.budget,
                        &Attempted {
                            verdict: retry::Verdict::Success,
                            retry_after: None,
                            attempt: call.attempt,
                            max_attempts: inner.settings.max_attempts,
                            backoff: std::time::Duration::ZERO,
                            backoff_max: inner.settings.backoff_max,
                            now: Instant::now(),
                            deadline,
                        },
                    )
                    .decision(),
                );
                let (headers, stream, extensions) = response.into_parts();
                let settle = stream_settle(
                    inner,
                    method,
                    call.hooks.cx.clone(),
                    ticket.into_owned(),
                    span,
                    deadline,
                );
                let stream = Streaming::new(stream, settle, deadline, inner.conn.closed_flag());
                return Ok(tonic::Response::from_parts(headers, stream, extensions));
            }
            Err(status) => status,
        };
        call.hooks.attempt_end(span, Some(&status));
        let next = call.settle(
            ticket,
            Some(&status),
            status.metadata(),
            outbound.is_resendable(),
        );
        match next {
            Next::Retry { after } => call.wait(after).await?,
            _ => return Err(status),
        }
    }
}

/// One attempt to open a stream, sent again at once if the request never
/// reached the server and its request stream is still unread, each send
/// in a span of its own ([`send_unary`]).
async fn send_open<S, Req, Resp>(
    call: &Call<'_>,
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
        let mut grpc = call.inner.conn.grpc().await?;
        let result = match outbound {
            Outbound::One(body) => {
                let request = tonic::Request::from_parts(
                    call.metadata(base, span),
                    tonic::Extensions::default(),
                    body.clone(),
                );
                grpc.server_streaming(request, path.clone(), PreEncoded::<Resp>::new())
                    .await
            }
            Outbound::Many(held) => {
                let request = tonic::Request::from_parts(
                    call.metadata(base, span),
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
        match result.map_err(transport_status) {
            Err(status)
                if resent < TRANSPARENT_RETRIES
                    && outbound.is_resendable()
                    && never_processed(&status) =>
            {
                resent += 1;
                call.resend(span, &status);
            }
            result => return result,
        }
    }
}

/// The settle function of a stream that opened: counts it in the breaker
/// once, at its end.
fn stream_settle(
    inner: &Arc<Inner>,
    method: &'static Method,
    cx: Context,
    ticket: OwnedTicket,
    span: AttemptSpan,
    deadline: Option<Instant>,
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
                deadline_passed: status.is_some() && deadline.is_some_and(|d| Instant::now() >= d),
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
                hooks.attempt_end(span, Some(&deadline_exceeded()));
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
    fn grpc_timeout_rounds_up_to_about_three_digits() {
        let cases = [
            (Duration::ZERO, "1n"),
            (Duration::from_nanos(1), "1m"),
            (Duration::from_micros(999), "1m"),
            (Duration::from_millis(300), "300m"),
            (Duration::from_micros(300_001), "301m"),
            (Duration::from_micros(999_999), "1S"),
            (Duration::from_millis(1_000), "1S"),
            (Duration::from_micros(1_000_001), "1010m"),
            (Duration::from_millis(2_345), "2350m"),
            (Duration::from_micros(9_999_999), "10S"),
            (Duration::from_millis(9_990), "9990m"),
            (Duration::from_secs(10), "10S"),
            (Duration::from_millis(10_001), "10100m"),
            (Duration::from_millis(29_999), "30S"),
            (Duration::from_millis(99_999), "100S"),
            (Duration::from_millis(100_001), "101S"),
            (Duration::from_secs(300), "300S"),
            (Duration::from_secs(99_999_999), "99999999S"),
            (Duration::from_secs(100_000_000), "1666667M"),
            (Duration::from_secs(60 * 99_999_999), "99999999M"),
            (Duration::from_secs(60 * 100_000_000), "1666667H"),
        ];
        for (d, want) in cases {
            assert_eq!(written(d), want, "{d:?}");
        }
    }

    proptest::proptest! {
        /// What is written parses (as tonic's server parses it) to at
        /// least the time left and at most 1 % or 1 ms more.
        #[test]
        fn grpc_timeout_never_shortens_and_barely_lengthens(nanos in proptest::prop_oneof![0u64..=10u64.pow(12), proptest::num::u64::ANY]) {
            let left = Duration::from_nanos(nanos);
            let parsed = crate::grpc::deadline::parse_grpc_timeout(written(left).as_bytes())
                .expect("parses");
            proptest::prop_assert!(parsed >= left, "{left:?} -> {parsed:?}");
            let slack = (left / 100).max(Duration::from_millis(1));
            proptest::prop_assert!(parsed - left <= slack, "{left:?} -> {parsed:?}");
        }
    }

    #[test]
    fn an_unrealistic_grpc_timeout_is_capped() {
        assert_eq!(written(Duration::from_secs(u64::MAX)), "99999999H");
    }
}
