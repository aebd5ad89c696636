//! The seams of the attempt loop for telemetry (issue 6) and failure
//! injection (issue 7). Every call goes through these functions at fixed
//! points; today they do nothing. Fill them in here, without touching the
//! loop.
//!
//! Where the loop calls them, per attempt of a unary call (and per attempt
//! to open a stream):
//!
//! ```text
//! breaker.allow()      rejected -> Hooks::rejected, Hooks::decided(Stopped), return
//! Hooks::attempt_start (the attempt's span, a child of the call's context)
//! Hooks::inject_fault  (inside the breaker and the deadline)
//!                      Err(status) -> that is the attempt's result
//! Hooks::propagate     (writes the metadata sent: trace context, baggage)
//! ... the attempt over the channel ...
//! Hooks::attempt_end   (the attempt's status; for a stream that opened, at its end)
//! ticket.done(outcome) -> Hooks::counted(outcome)
//! retry::decide        -> Hooks::decided(decision)
//! ```
//!
//! The breaker's transitions reach [`Hooks::transition`] (installed as the
//! breaker's observer in `Client::new`).

use std::time::Duration;

use opentelemetry::Context;
use tonic::Status;
use tonic::metadata::MetadataMap;

use super::Method;
use super::client::Inner;
use crate::circuit::{Outcome, Rejected, Transition};
use crate::retry::Decision;
use crate::telemetry::Telemetry;

/// The telemetry and fault seams of one call of one method.
pub(super) struct Hooks<'a> {
    #[allow(dead_code)]
    pub(super) inner: &'a Inner,
    #[allow(dead_code)]
    pub(super) method: &'static Method,
    /// The call's context, read when the call started: an
    /// `opentelemetry::Context` in the request's extensions, else the
    /// current one. Its span is the parent of each attempt's; its baggage
    /// carries the failure scenario.
    #[allow(dead_code)]
    pub(super) cx: Context,
}

/// What a started attempt carries until it ends: issue 6 puts the
/// attempt's CLIENT span here (and makes `cx` the context holding it).
pub(super) struct AttemptSpan {
    /// The attempt's context: what the fault point and the propagator see.
    #[allow(dead_code)]
    pub(super) cx: Context,
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
    /// The breaker rejected attempt `attempt`: nothing was sent. Issue 6: a
    /// span of humus's own scope with `UNAVAILABLE` and the rejection's
    /// message; `humus.circuit.calls` counts it as rejected.
    pub(super) fn rejected(&self, attempt: u32, rejected: &Rejected) {
        let _ = (attempt, rejected);
    }

    /// The fault point `method.point`, evaluated once per attempt, inside
    /// the breaker (after `allow`, before anything is sent). Issue 7: an
    /// abort returns `Err` (Unavailable wrapping the injected error), which
    /// becomes the attempt's result and is classified like any; a delay is
    /// waited here, inside the call's deadline (`deadline`, `None` for a
    /// stream without one).
    pub(super) async fn inject_fault(
        &self,
        span: &AttemptSpan,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<(), Status> {
        let _ = (span, deadline);
        Ok(())
    }

    /// Attempt `attempt` starts. Issue 6: start the attempt's CLIENT span,
    /// a child of the call's context [`Hooks::cx`].
    pub(super) fn attempt_start(&self, attempt: u32) -> AttemptSpan {
        let _ = attempt;
        AttemptSpan {
            cx: self.cx.clone(),
        }
    }

    /// Writes what the attempt sends besides the caller's metadata. Issue 6:
    /// inject the attempt's trace context and the call's baggage into
    /// `metadata` with the Setup's propagator; issue 7: strip the failure
    /// scenario from that baggage unless `Settings::forward_scenario`.
    pub(super) fn propagate(&self, span: &AttemptSpan, metadata: &mut MetadataMap) {
        let _ = (span, metadata);
    }

    /// An attempt ended (for a stream that opened: the stream ended) with
    /// `status` (`None` for OK), after `elapsed`. Issue 6: end the span with
    /// `rpc.response.status_code`, record `rpc.client.call.duration`.
    pub(super) fn attempt_end(
        &self,
        span: AttemptSpan,
        status: Option<&Status>,
        elapsed: Duration,
    ) {
        let _ = (span, status, elapsed);
    }

    /// The breaker counted an attempt (or a stream) as `outcome`. Issue 6:
    /// `humus.circuit.calls`.
    pub(super) fn counted(&self, outcome: Outcome) {
        let _ = outcome;
    }

    /// The retry loop decided `decision` after an attempt. Issue 6:
    /// `humus.retry.decisions`.
    pub(super) fn decided(&self, decision: Decision) {
        let _ = decision;
    }

    /// The breaker of the client of `addr` changed state. Issue 6: a log
    /// record and `humus.circuit.transitions`. Called from the breaker's
    /// observer, so outside its lock, one at a time, in order.
    pub(super) fn transition(telemetry: &Telemetry, addr: &str, transition: &Transition) {
        let _ = (telemetry, addr, transition);
    }
}
