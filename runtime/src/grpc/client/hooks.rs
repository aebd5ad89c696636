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
//! Hooks::inject_fault  (inside the breaker)  Err(status) -> that is the attempt's result
//! Hooks::attempt_start (may write metadata: trace context, baggage)
//! ... the attempt over the channel ...
//! Hooks::attempt_end   (the attempt's status; for a stream that opened, at its end)
//! ticket.done(outcome) -> Hooks::counted(outcome)
//! retry::decide        -> Hooks::decided(decision)
//! ```
//!
//! The breaker's transitions reach [`Hooks::transition`] (installed as the
//! breaker's observer in `Client::new`).

use std::time::Duration;

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
}

/// What a started attempt carries until it ends: issue 6 puts the
/// attempt's CLIENT span and its start time here.
pub(super) struct AttemptSpan {
    _private: (),
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
        attempt: u32,
        metadata: &MetadataMap,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<(), Status> {
        let _ = (attempt, metadata, deadline);
        Ok(())
    }

    /// Attempt `attempt` starts; `metadata` is what it sends. Issue 6: start
    /// the attempt's CLIENT span (a child of the caller's context), inject
    /// its trace context and the call's baggage into `metadata` with the
    /// Setup's propagator; issue 7: strip the failure scenario from the
    /// baggage unless `Settings::forward_scenario`.
    pub(super) fn attempt_start(&self, attempt: u32, metadata: &mut MetadataMap) -> AttemptSpan {
        let _ = (attempt, metadata);
        AttemptSpan { _private: () }
    }

    /// An attempt ended (for a stream that opened: the stream ended) with
    /// `status` (`None` for OK), after `elapsed`. Issue 6: end the span with
    /// `rpc.response.status_code`, record `rpc.client.call.duration`.
    pub(super) fn attempt_end(&self, span: AttemptSpan, status: Option<&Status>, elapsed: Duration) {
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
