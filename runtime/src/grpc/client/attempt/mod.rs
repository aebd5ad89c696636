//! The attempt loop ([design](crate::design::client#retries): retries, classification,
//! streams), with the breaker inside the
//! retries: one `allow` per attempt.
//!
//! The parts: this file, a gRPC call as the attempt loop runs it
//! ([`Grpc`]) and what every attempt of one call reads ([`CallCtx`]);
//! [`timeout`], the `grpc-timeout` each send carries; [`typed_unary`], a
//! typed unary call's attempts; [`typed_open`], a typed stream's attempts
//! to open it, and its settling at its end.

mod timeout;
mod typed_open;
mod typed_unary;

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::Context;
use tokio::time::Instant;
use tonic::Status;
use tonic::metadata::MetadataMap;

use super::client::Inner;
use super::connection::{Sender, closing};
use super::decide::{StillConnecting, with_decision};
use super::hooks::{AttemptSpan, Hooks};
use super::stream_end::deadline_exceeded;
use super::{AttemptTimeout, CallState, DEADLINE_SLACK, Ended, Method, RpcKind, classify_attempt};
use crate::call::{Call, Classification};
use crate::circuit::Rejected;
use crate::fault::InjectedError;
use crate::grpc::deadline::Deadline;
use crate::grpc::wire::{GRPC_TIMEOUT, GRPC_TIMEOUT_HEADER, grpc_timeout};
use crate::retry::Decision;
use timeout::Timed;
pub(super) use typed_open::{Opened, Outbound, open, run_open};
pub(super) use typed_unary::{run_unary, unary};

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
/// ([`TypedUnary`](typed_unary::TypedUnary), [`TypedOpen`](typed_open::TypedOpen)) or a stock tonic client's, through the
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
            &inner.dependency.breaker,
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

    fn parts(&self) -> crate::call::Parts<'_> {
        let ctx = &self.ctx;
        ctx.inner.dependency.parts(&ctx.hooks.cx, ctx.at(), None)
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
        self.ctx.inner.dependency.attempt_timeout
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

/// Whether a call dropped at `now` was dropped by its `deadline`: at or
/// after it, or less than [`DEADLINE_SLACK`] before it (more, for an
/// inherited deadline whose caller may have rounded its `grpc-timeout`
/// up: [`Deadline::dropped_by`]).
pub(super) fn at_deadline(deadline: &Deadline, now: Instant) -> bool {
    deadline.dropped_by(now, DEADLINE_SLACK)
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
