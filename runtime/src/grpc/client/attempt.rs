//! The attempt loop ([design](crate::design::client#retries): retries, classification,
//! streams), with the breaker inside the
//! retries: one `allow` per attempt.

use std::borrow::Cow;
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
use super::connection::{AttemptBody, Sender, closing, never_processed, transport_status};
use super::decide::{StillConnecting, with_decision};
use super::hooks::{AttemptSpan, Hooks, call_context};
use super::layer::BoxError;
use super::limit::Limited;
use super::stream::{End, Holder, Settle, Streaming, deadline_exceeded};
use super::{AttemptTimeout, CallState, DEADLINE_SLACK, Ended, Method, RpcKind, classify_attempt};
use crate::call::{Call, Classification};
use crate::circuit::{Outcome, OwnedTicket, Rejected};
use crate::fault::InjectedError;
use crate::grpc::deadline::Deadline;
use crate::retry::Decision;

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

/// One gRPC call as the attempt loop ([`crate::call`]) runs it: what every
/// attempt reads ([`CallCtx`]) and what each sends (`send`), for a call of
/// kind `K` ([`Unary`] or [`Open`]).
pub(super) struct Grpc<'a, S, K> {
    ctx: CallCtx<'a>,
    send: S,
    _kind: std::marker::PhantomData<fn() -> K>,
}

/// What the attempts of a gRPC call are for: a unary call ([`Unary`]) or
/// a stream's open ([`Open`]).
pub(super) trait Kind {
    /// Whether the attempts open a stream: their sends' `grpc-timeout` is
    /// then the call's deadline (the stream, once open, may outlive the
    /// attempt's own), else the attempt's; and an attempt that answers is
    /// counted when the stream ends.
    const OPENS: bool;
}

/// A unary call's attempts ([`run_unary`]).
pub(super) enum Unary {}

impl Kind for Unary {
    const OPENS: bool = false;
}

/// A stream's attempts to open ([`run_open`]).
pub(super) enum Open {}

impl Kind for Open {
    const OPENS: bool = true;
}

/// What each attempt of a gRPC call of kind `K` sends: a typed call's
/// ([`TypedUnary`], [`TypedOpen`]) or a stock tonic client's, through the
/// channel.
pub(super) trait Sends<K: Kind>: Sync {
    /// The answer of an attempt that succeeded (that opened the stream).
    type Output: Send;

    /// One attempt (its transparent resends included): `call`'s metadata
    /// and span for attempt number `attempt`. To open a stream: `Ok(_)`
    /// opened (the server answered with its response headers); `Err` a
    /// failed open, classified and retried as a unary attempt: one nothing
    /// came back from, or the server's trailers-only status (gRFC A6: a
    /// call is committed by the response's headers, and a trailers-only
    /// answer has none).
    fn send<'s>(
        &'s self,
        call: &'s CallCtx<'_>,
        attempt: u32,
        span: &'s mut AttemptSpan,
    ) -> impl Future<Output = Result<Self::Output, Status>> + Send + 's;

    /// The trailer of a unary answer, for its classification (a stream
    /// that opened is classified at its end: `None`).
    fn trailer(output: &Self::Output) -> Option<&MetadataMap>;

    /// Whether what the last attempt sent can be sent again.
    fn is_resendable(&self) -> bool;
}

impl<'a, K: Kind, S: Sends<K>> Grpc<'a, S, K> {
    /// A call of `method` on `inner`'s connection, in the context `cx`,
    /// until `deadline`.
    /// Its sends' `grpc-timeout` says the time left before `sent` (a
    /// unary attempt's, once it starts, the attempt's own: see
    /// [`prepare`](crate::call::Transport::prepare)).
    fn call(
        inner: &'a Inner,
        method: &'static Method,
        cx: Context,
        deadline: Option<Deadline>,
        sent: Option<Deadline>,
        send: S,
    ) -> Call<'a, Grpc<'a, S, K>> {
        Call::new(
            &inner.breaker,
            Grpc {
                ctx: CallCtx {
                    inner,
                    method,
                    hooks: Hooks { inner, method, cx },
                    deadline,
                    send_deadline: sent.map(|d| d.at),
                    connecting: AtomicBool::new(false),
                },
                send,
                _kind: std::marker::PhantomData,
            },
        )
    }
}

impl<K: Kind, S: Sends<K>> crate::call::Transport for Grpc<'_, S, K> {
    type Output = S::Output;
    type Error = Status;
    type Span = AttemptSpan;
    type Prepared = ();

    fn core(&self) -> crate::call::Core<'_> {
        let inner = self.ctx.inner;
        crate::call::Core {
            budget: &inner.budget,
            backoff: &inner.backoff,
            recorder: &inner.recorder,
            faults: &inner.faults,
            max_attempts: inner.settings.max_attempts,
            backoff_max: inner.settings.backoff_max,
        }
    }

    fn context(&self) -> &Context {
        &self.ctx.hooks.cx
    }

    fn deadline(&self) -> Option<Instant> {
        self.ctx.at()
    }

    fn dropped_by_deadline(&self, now: Instant) -> bool {
        self.ctx.deadline.is_some_and(|d| at_deadline(&d, now))
    }

    /// [`Settings::attempt_timeout`](super::Settings::attempt_timeout),
    /// but for a client stream's open, which is its whole upload (a server
    /// answers once it has read the stream): the caller's pace, not the
    /// dependency's.
    fn attempt_timeout(&self) -> Option<std::time::Duration> {
        if self.ctx.method.kind == RpcKind::ClientStreaming {
            return None;
        }
        self.ctx.inner.settings.attempt_timeout
    }

    fn point(&self) -> Cow<'static, str> {
        Cow::Borrowed(self.ctx.method.point)
    }

    fn is_closed(&self) -> bool {
        self.ctx.inner.conn.is_closed()
    }

    fn closed(&self) -> impl Future<Output = ()> + Send + '_ {
        self.ctx.inner.conn.closed_ref()
    }

    fn start(&self, attempt: u32) -> AttemptSpan {
        self.ctx.hooks.attempt_start(attempt)
    }

    fn span_context(span: &AttemptSpan) -> &Context {
        span.cx()
    }

    fn end(&self, span: AttemptSpan, result: Result<&S::Output, &Status>) {
        self.ctx.hooks.attempt_end(span, result.err());
    }

    /// A unary attempt's sends say its deadline in their `grpc-timeout`
    /// (read from there once it is cut: no copy is kept across the
    /// attempt); a stream's, the call's.
    fn prepare(&mut self, attempt: crate::call::Attempt) {
        if !K::OPENS {
            self.ctx.send_deadline = attempt.bound;
        }
    }

    fn send<'s>(
        &'s self,
        attempt: crate::call::Attempt,
        (): (),
        span: &'s mut AttemptSpan,
    ) -> impl Future<Output = Result<S::Output, Status>> + Send + 's {
        self.send.send(&self.ctx, attempt.n, span)
    }

    /// The method's table, else `Settings::classify`. A failed dial, and
    /// an attempt that finds the connection backing off after one, are
    /// failed attempts as any other: their `UNAVAILABLE` is classified so
    /// (by default retried within the budget and `max_attempts`, and a
    /// breaker Failure).
    fn classify(
        &self,
        result: Result<&S::Output, &Status>,
        deadline_passed: bool,
    ) -> Classification {
        let empty;
        let (status, trailer) = match result {
            Ok(output) => (
                None,
                match S::trailer(output) {
                    Some(trailer) => trailer,
                    None => {
                        empty = MetadataMap::new();
                        &empty
                    }
                },
            ),
            Err(status) => (Some(status), status.metadata()),
        };
        let call = CallState {
            cancelled: false,
            deadline_passed,
        };
        classify_attempt(
            self.ctx.method,
            &self.ctx.inner.settings.classify,
            Ended::Attempt { status, trailer },
            call,
        )
    }

    fn is_resendable(&self) -> bool {
        self.send.is_resendable()
    }

    fn finish(
        &self,
        result: Result<S::Output, Status>,
        decision: Decision,
        _deadline_passed: bool,
    ) -> Result<S::Output, Status> {
        result.map_err(|status| with_decision(status, decision))
    }

    fn rejected(&self, attempt: u32, rejected: Rejected) -> Status {
        let status = rejected_status(rejected, &self.ctx.inner.settings.addr);
        self.ctx.hooks.rejected(attempt, status.message());
        status
    }

    fn expired(&self) -> Status {
        with_decision(self.ctx.deadline_exceeded(), Decision::Expired)
    }

    fn deadline_exceeded(&self) -> Status {
        self.ctx.deadline_exceeded()
    }

    fn attempt_timed_out(
        &self,
        after: std::time::Duration,
        injected: Option<InjectedError>,
    ) -> Status {
        let connecting = self.ctx.connecting.load(Ordering::Relaxed);
        AttemptTimeout::status(after, connecting, &self.ctx.inner.settings.addr, injected)
    }

    fn injected(&self, error: InjectedError) -> Status {
        error.to_status()
    }

    fn closing(&self) -> Status {
        closing()
    }
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

/// Whether a call dropped at `now` was dropped by its `deadline`: at or
/// after it, or less than [`DEADLINE_SLACK`] before it (more, for an
/// inherited deadline whose caller may have rounded its `grpc-timeout`
/// up: [`Deadline::dropped_by`]).
pub(super) fn at_deadline(deadline: &Deadline, now: Instant) -> bool {
    deadline.dropped_by(now, DEADLINE_SLACK)
}

/// `left` as a `grpc-timeout` value: in the finest unit whose count fits
/// the header's 8 digits (nanoseconds below 100 ms, microseconds below
/// 100 s, milliseconds below about 27 hours, then seconds, minutes and
/// hours), truncated, as grpc-go writes it; a zero `left` is `1n`, the
/// least the header can say.
///
/// Down, never up, and by less than one unit (at most a microsecond below
/// 100 s): the time sent never exceeds the time left, so the deadline a
/// server inherits from it is never later than this call's, and a call its
/// handler makes ends by that deadline (counted as the deadline's, a
/// failure) before this client cuts the attempt, rather than being dropped
/// early by the cut (counted as nothing). And it is never shorter by more
/// than the request's time on the wire: a server that enforces the
/// deadline itself (tonic's answers `CANCELLED` at its `grpc-timeout`)
/// does so no earlier than this client's own timer, which ends the
/// attempt `DEADLINE_EXCEEDED`, a failure. A coarser rounding down (to
/// three significant digits, 10 ms below 10 s) would have such a server
/// answer first, up to 1 % early, and its `CANCELLED` counts nothing: a
/// hung dependency would never open the breaker.
///
/// Source: gRPC over HTTP/2 (`PROTOCOL-HTTP2.md`, "Timeout": at most 8
/// digits and a unit).
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
/// whole number of seconds left (exactly as many seconds as the timeout,
/// on paused time) sends one of them, a
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
    const MAX: u128 = 99_999_999;
    let nanos = left.as_nanos();
    if nanos.is_multiple_of(1_000_000_000) && nanos > 0 && nanos / 1_000_000_000 <= MAX {
        // Whole seconds (a timeout of whole seconds on paused time): the
        // shortest form, which `whole_seconds` has written once.
        return ((nanos / 1_000_000_000) as u64, b'S');
    }
    let units: [(u128, u8); 6] = [
        (1, b'n'),
        (1_000, b'u'),
        (1_000_000, b'm'),
        (1_000_000_000, b'S'),
        (60 * 1_000_000_000, b'M'),
        (3_600 * 1_000_000_000, b'H'),
    ];
    for (unit, letter) in units {
        let count = nanos / unit;
        if count <= MAX {
            return ((count as u64).max(1), letter);
        }
    }
    (MAX as u64, b'H')
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

/// The attempt loop of a unary call ([`crate::call`]): each attempt
/// passes the breaker, the fault point and the deadline, and is
/// classified, counted and retried as its classification and the budget
/// decide.
pub(super) fn run_unary<'a, S: Sends<Unary> + 'a>(
    inner: &'a Inner,
    method: &'static Method,
    cx: Context,
    deadline: Option<Deadline>,
    send: S,
) -> impl Future<Output = Result<S::Output, Status>> + 'a {
    // Made first, so that the call's state is kept once across every
    // await, the first included (not beside its own arguments).
    let mut call = Grpc::call(inner, method, cx, deadline, deadline, send);
    async move {
        require_runtime();
        call.run().await
    }
}

/// A typed unary call's attempts: the message framed once.
struct TypedUnary<Resp> {
    metadata: MetadataMap,
    /// The request's gRPC frame: its head and the message.
    frame: bytes::Bytes,
    _response: std::marker::PhantomData<fn() -> Resp>,
}

impl<Resp> Sends<Unary> for TypedUnary<Resp>
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

    fn trailer(output: &Self::Output) -> Option<&MetadataMap> {
        Some(output.metadata())
    }

    fn is_resendable(&self) -> bool {
        true
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
        let result = match sender.send(request).await {
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
        let Opened { response, settle } =
            run_open(inner, method, cx, deadline, deadline, send).await?;
        let (headers, stream, extensions) = response.into_parts();
        let stream = Streaming::new(stream, settle, deadline, inner.conn.closed_flag())
            .one_response(one_response);
        Ok(tonic::Response::from_parts(headers, stream, extensions))
    }
}

/// A stream that opened, and what counts it in the breaker at its end.
pub(super) struct Opened<T> {
    pub(super) response: T,
    pub(super) settle: Settle,
}

/// The attempt loop of a stream's open ([`crate::call`]): attempts as
/// [`run_unary`]'s until one opens the stream (the server's response
/// headers); the stream then keeps the attempt's ticket and span, and
/// `settle` counts it once, at its end. An attempt that failed,
/// trailers-only status included, is settled as a unary attempt is.
///
/// `open` bounds the attempts to open it; `deadline` is the stream's, which
/// its sends say in their `grpc-timeout` and its settle reads. They differ
/// only for a channel's method not listed, whose open alone has the
/// client's timeout.
pub(super) fn run_open<'a, S: Sends<Open> + 'a>(
    inner: &'a Arc<Inner>,
    method: &'static Method,
    cx: Context,
    open: Option<Deadline>,
    deadline: Option<Deadline>,
    send: S,
) -> impl Future<Output = Result<Opened<S::Output>, Status>> + 'a {
    let mut call = Grpc::call(inner, method, cx, open, deadline, send);
    async move {
        require_runtime();
        let crate::call::Opened {
            output: response,
            ticket,
            span,
        } = call.open().await?;
        let cx = call.transport().ctx.hooks.cx.clone();
        let settle = stream_settle(inner, method, cx, ticket, span, deadline);
        Ok(Opened { response, settle })
    }
}

/// A typed stream's attempts to open.
struct TypedOpen<S, Req, Resp> {
    path: PathAndQuery,
    metadata: MetadataMap,
    outbound: Outbound<S>,
    _response: std::marker::PhantomData<fn() -> (Req, Resp)>,
}

impl<S, Req, Resp> Sends<Open> for TypedOpen<S, Req, Resp>
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

    fn trailer(_: &Self::Output) -> Option<&MetadataMap> {
        None
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
            // The server's own trailers-only status (a proxy's error page,
            // no gRPC server's answer, has an `HttpAnswer` as its source):
            // the attempt's, as the server sent it; the server saw the
            // request, so it is not sent again at once.
            Err(status) if status.source().is_none() => {
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
                let current = hooks.in_call(|| ticket.done(outcome));
                hooks.counted(outcome, current);
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
    fn grpc_timeout_is_the_finest_unit_that_fits_truncated() {
        let cases = [
            (Duration::ZERO, "1n"),
            (Duration::from_nanos(1), "1n"),
            (Duration::from_micros(999), "999000n"),
            (Duration::from_nanos(1_500_999), "1500999n"),
            (Duration::from_nanos(99_999_999), "99999999n"),
            (Duration::from_nanos(100_000_001), "100000u"),
            (Duration::from_millis(300), "300000u"),
            (Duration::from_micros(999_999), "999999u"),
            (Duration::from_millis(1_000), "1S"),
            (Duration::from_micros(1_009_999), "1009999u"),
            (Duration::from_millis(1_234), "1234000u"),
            (Duration::from_nanos(9_999_999_999), "9999999u"),
            (Duration::from_secs(10), "10S"),
            (Duration::from_millis(15_050), "15050000u"),
            (Duration::from_micros(99_999_999), "99999999u"),
            (Duration::from_micros(100_000_001), "100000m"),
            (Duration::from_secs(300), "300S"),
            (Duration::from_millis(99_999_999_999), "99999999S"),
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
        /// most the time left (one nanosecond for none), and less by at
        /// most a hundred-thousandth of it (less than one unit).
        #[test]
        fn grpc_timeout_never_lengthens_and_barely_shortens(nanos in proptest::prop_oneof![0u64..=10u64.pow(12), proptest::num::u64::ANY]) {
            let left = Duration::from_nanos(nanos);
            let parsed = crate::grpc::deadline::parse_grpc_timeout(written(left).as_bytes())
                .expect("parses");
            proptest::prop_assert!(parsed <= left.max(Duration::from_nanos(1)), "{left:?} -> {parsed:?}");
            proptest::prop_assert!(left - parsed.min(left) <= left / 100_000, "{left:?} -> {parsed:?}");
        }
    }

    #[test]
    fn an_unrealistic_grpc_timeout_is_capped() {
        assert_eq!(written(Duration::from_secs(u64::MAX)), "99999999H");
    }
}
