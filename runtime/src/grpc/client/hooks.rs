//! Telemetry in the gRPC client's attempts: the functions its transport
//! of the attempt loop ([`crate::call`]) calls at fixed points of every
//! call, over the client's [`ClientRecorder`](crate::telemetry::ClientRecorder)
//! and the [`Setup`](crate::Setup)'s [`Injector`](crate::fault::Injector).
//!
//! Where they are called, per attempt of a unary call (and per attempt
//! to open a stream):
//!
//! ```text
//! breaker.allow()      rejected -> Hooks::rejected, `stopped`, return
//! Hooks::attempt_start (the attempt's CLIENT span, a child of the call's context)
//! the fault point      (`method.point`, in the loop, inside the breaker and the deadline)
//! Hooks::propagate     (writes the metadata sent: trace context, baggage
//!                       without the scenario unless `forward_scenario`)
//! ... the attempt over the connection ...
//! Hooks::attempt_end   (the attempt's status; for a stream that opened, at its end)
//! ticket.done(outcome) -> Hooks::counted(outcome, current) (a stream's, at its end; `late` if discarded)
//! retry::decide        -> `humus.retry.decisions`, in the loop
//! ```
//!
//! The breaker's transitions reach the recorder's
//! [`transition_observer`](crate::telemetry::ClientRecorder::transition_observer),
//! installed in `Client::new`; the loop makes the call's context current
//! around `allow` and `done` ([`Hooks::in_call`]), so each transition's log
//! record carries the trace context of the call that made it.

use opentelemetry::Context;
use opentelemetry::trace::TraceContextExt as _;
use tonic::Status;
use tonic::metadata::MetadataMap;

use super::Method;
use super::client::Inner;
use crate::circuit::Outcome;
use crate::telemetry::Attempt;

/// The telemetry and fault seams of one call of one method.
pub(super) struct Hooks<'a> {
    pub(super) inner: &'a Inner,
    pub(super) method: &'static Method,
    /// The call's context, read when the call started: an
    /// `opentelemetry::Context` in the request's extensions, else the
    /// current one. Its span is the parent of each attempt's; its baggage
    /// carries the failure scenario.
    pub(super) cx: Context,
}

/// One started attempt until it ends: its CLIENT span (one from a
/// stream's open to its end) and the context failure injection and the
/// propagator see.
pub(super) struct AttemptSpan {
    attempt: Attempt,
}

impl AttemptSpan {
    /// The attempt's context: the call's baggage, the attempt's span.
    pub(super) fn cx(&self) -> &Context {
        self.attempt.context()
    }
}

/// The call's context: the `opentelemetry::Context` in the request's
/// extensions, else the current one. Read synchronously at the call's
/// start, before the call's future moves to another thread.
pub(super) fn call_context(extensions: &tonic::Extensions) -> Context {
    extensions
        .get::<Context>()
        .cloned()
        .unwrap_or_else(Context::current)
}

impl Hooks<'_> {
    /// Runs `f` (a call of the breaker's `allow` or a ticket's `done`) with
    /// the call's context current ([`telemetry::in_context`](crate::telemetry::in_context)).
    pub(super) fn in_call<T>(&self, f: impl FnOnce() -> T) -> T {
        crate::telemetry::in_context(&self.cx, f)
    }

    /// The breaker rejected attempt `attempt`: nothing was sent. A span of
    /// humus's own scope with `UNAVAILABLE` and the call's status's
    /// `message` (the dependency and the rejection);
    /// `humus.circuit.calls` counts it as rejected. Nothing is evaluated.
    pub(super) fn rejected(&self, attempt: u32, message: &str) {
        let _ = attempt;
        self.inner
            .dependency
            .recorder
            .record_rejected(&self.cx, self.method.full_name, message);
    }

    /// Attempt `attempt` starts: its CLIENT span, a child of the call's
    /// context [`Hooks::cx`], keeping its baggage.
    pub(super) fn attempt_start(&self, attempt: u32) -> AttemptSpan {
        let _ = attempt;
        AttemptSpan {
            attempt: self
                .inner
                .dependency
                .recorder
                .start_attempt(&self.cx, self.method.full_name),
        }
    }

    /// Writes what the attempt sends besides the caller's metadata: the
    /// attempt's trace context and the call's baggage, with the Setup's
    /// propagator, the failure scenario stripped from that baggage unless
    /// `Settings::forward_scenario` (every other member goes).
    ///
    /// A strip removes the propagator's fields from the caller's metadata
    /// before it injects: a propagator writes no `baggage` for an empty
    /// baggage, and the caller's own header (inbound metadata a proxy
    /// forwards) would go out with the scenario. Then what goes out is
    /// stripped as a server strips it, whatever the propagator: every
    /// `baggage` entry of the caller's is read (joined into one), the
    /// scenario's members removed, a value that cannot be read whole
    /// dropped.
    pub(super) fn propagate(&self, span: &AttemptSpan, metadata: &mut MetadataMap) {
        let faults = &self.inner.dependency.faults;
        if self.inner.settings.forward_scenario || !faults.reads_scenarios() {
            span.attempt.inject(metadata);
            return;
        }
        let cx = span.cx();
        match faults.strip(cx) {
            Some(cx) => span.attempt.replace_with_baggage(&cx, metadata),
            None => span.attempt.inject(metadata),
        }
        if metadata.is_empty() {
            return;
        }
        let mut headers = std::mem::take(metadata).into_headers();
        if let Some(stripped) = faults.strip_headers(&mut headers) {
            stripped.record(&cx.span());
        }
        *metadata = MetadataMap::from_headers(headers);
    }

    /// An attempt ended (for a stream that opened: the stream ended) with
    /// `status` (`None` for OK): ends its span with
    /// `rpc.response.status_code` (and `error.type`, the code's name or
    /// the injected error's), records `rpc.client.call.duration`, timed by
    /// the attempt's own clock.
    pub(super) fn attempt_end(&self, span: AttemptSpan, status: Option<&Status>) {
        span.attempt.end(status);
    }

    /// A stream's ticket was settled with `outcome`: `humus.circuit.calls`
    /// by that outcome if the breaker counted it (`current`, what `done`
    /// returned), else `late`.
    pub(super) fn counted(&self, outcome: Outcome, current: bool) {
        self.inner
            .dependency
            .recorder
            .record_settled(outcome, current);
    }
}
