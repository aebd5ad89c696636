//! The one attempt loop every client runs on
//! ([design](crate::design::client#retries)): whatever the transport, a
//! call is
//!
//! ```text
//! (deadline passed when made?  -> the transport's `expired` error, `expired`; nothing counted)
//! loop attempt n = 1..=max_attempts:
//!     closed?                   -> the transport's `closing` error, `stopped`
//!     breaker.allow()           (in the call's context) rejected -> `rejected` error, `stopped`
//!     the attempt's span starts
//!     the failure-injection point (abort, or a delay ended by the attempt's deadline or the close)
//!     send, within the attempt's deadline (attempt_timeout) and racing the close
//!     the span ends; classify; settle the ticket (in the call's context)
//!     retry::decide with the budget -> wait max(backoff, pushback), racing the close
//! ```
//!
//! A transport (the gRPC unary call and stream open, the HTTP client, the
//! RabbitMQ publisher, the Kafka producer) implements [`Transport`]: it sends one attempt, says
//! how its result classifies and whether its request can be sent again,
//! names its failure-injection point and makes the errors the loop ends
//! with. [`Call`] runs the loop over it, monomorphised: nothing boxed or
//! dynamically dispatched on a call's way.
//!
//! A call's future dropped with an attempt in flight (or while it waits
//! for the next) at or after its deadline, within [`DEADLINE_SLACK`], was
//! ended by the deadline: the attempt counts a failure, its span ends with
//! the deadline's error, and `humus.retry.decisions` records `expired`.
//! Dropped earlier, the caller gave up: the ticket is released (counting
//! nothing) and the span ends as dropped.

mod anchor;
mod classify;
mod dependency;
mod engine;
pub(crate) mod settings;

use std::borrow::Cow;
use std::future::Future;
use std::time::Duration;

use opentelemetry::Context;
use tokio::time::Instant;

use crate::circuit::{Outcome, Rejected};
use crate::fault::InjectedError;
use crate::{circuit, fault, retry, telemetry};

pub(crate) use anchor::Anchor;
pub(crate) use classify::classify_fn;
pub(crate) use dependency::{Dependency, Refused, Sections, sections};
pub(crate) use engine::{Call, Opened};
// The loop's error for an attempt cut, for a transport that cuts its own
// (the RabbitMQ publisher's confirm wait).
#[cfg(feature = "rabbitmq")]
pub(crate) use engine::cut_error;

/// How close before its deadline a dropped call still counts as ended by
/// the deadline: 20 ms.
///
/// A call's future dropped at or after its deadline, such as the handler a
/// tonic server drops at the served RPC's `grpc-timeout`, ended by the
/// deadline, and counts as a failure; one dropped earlier was given up on
/// by its caller, and counts nothing. Two timers decide which it is, the
/// client's and the server's, and they do not agree to the microsecond:
/// tokio fires timers on 1 ms ticks, and a tonic server measures the served
/// RPC's deadline when it receives the request, before a handler (or a
/// layer) can read the same `grpc-timeout`, so the server's timer for the
/// same deadline may fire a tick or a few before the client's. A drop less
/// than `DEADLINE_SLACK` before the deadline is the deadline's, so the
/// outcome is the same whichever timer fires first. The slack covers the
/// server's ticks and the time between its receiving the request and the
/// handler making the call, on a loaded machine.
pub const DEADLINE_SLACK: Duration = Duration::from_millis(20);

/// Whether a call dropped at `now` was dropped by its `deadline`: at or
/// after it, or less than [`DEADLINE_SLACK`] before it.
pub(crate) fn at_deadline(deadline: Instant, now: Instant) -> bool {
    now + DEADLINE_SLACK >= deadline
}

/// How one attempt's result counts: for retries and for the breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classification {
    /// Whether another attempt follows.
    pub retry: retry::Verdict,
    /// The server's pushback: the least time to wait before the next attempt.
    pub retry_after: Option<Duration>,
    /// How the attempt counts in the dependency's circuit breaker.
    pub breaker: circuit::Outcome,
}

impl Classification {
    /// A `Stop` with no `retry_after`, counted in the breaker as `breaker`.
    pub const fn stop(breaker: circuit::Outcome) -> Classification {
        Classification {
            retry: retry::Verdict::Stop,
            retry_after: None,
            breaker,
        }
    }
}

/// What the loop reads of the client a call is made with (besides its
/// breaker, which [`Call::new`] is given): its budget, backoff, recorder and failure injector, and the retry settings
/// ([`Dependency::core`]).
pub(crate) struct Core<'a> {
    pub(crate) budget: &'a retry::Budget,
    pub(crate) backoff: &'a retry::Exponential,
    pub(crate) recorder: &'a telemetry::ClientRecorder,
    pub(crate) faults: &'a fault::Injector,
    /// At most this many attempts per call, the first included.
    pub(crate) max_attempts: u32,
    /// The longest wait between two attempts.
    pub(crate) backoff_max: Duration,
}

/// What the loop reads of one call ([`Transport::parts`]): the client's
/// [`Dependency`], and the call's context, deadline and start
/// ([`Dependency::parts`]).
#[derive(Clone, Copy)]
pub(crate) struct Parts<'a> {
    /// The client's parts the loop reads.
    pub(crate) dependency: &'a Dependency,
    /// The call's context: its span is the parent of each attempt's, its
    /// baggage carries the failure scenario.
    pub(crate) cx: &'a Context,
    /// The call's deadline, if it has one.
    pub(crate) deadline: Option<Instant>,
    /// When the call was made, if the transport read the clock then (the
    /// first attempt starts then; the loop reads the clock otherwise).
    pub(crate) started: Option<Instant>,
}

/// One attempt about to be sent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Attempt {
    /// Its number, from 1.
    pub(crate) n: u32,
    /// When it must have ended: the earlier of the call's deadline and
    /// `attempt_timeout` from its start; `None` with neither.
    pub(crate) bound: Option<Instant>,
    /// Whether `bound` is the attempt's own timeout (earlier than the
    /// call's deadline), not the call's deadline.
    pub(crate) own: bool,
}

/// One call of a transport, as the loop of [`Call`] drives it: the
/// transport's half of a call (what it sends, how it reads the answer),
/// for one call.
pub(crate) trait Transport: Sync {
    /// An attempt's answer, when it has one.
    type Output: Send;
    /// An attempt's failure, and the call's error.
    type Error: Send;
    /// An attempt's span, from its start to its end.
    type Span: Send;
    /// What [`Transport::prepare`] makes for one attempt's send (the
    /// request, or a copy of it, for a transport that sends it by value).
    type Prepared: Send;

    /// Whether the loop's timer ends an attempt at its deadline. `false`:
    /// the transport's send bounds itself ([`Attempt::bound`]), as the
    /// HTTP client's reqwest timeout does, the Kafka producer's wait, and
    /// the RabbitMQ publisher's one timer for a channel's confirms
    /// ([`cut_error`] makes the loop's error for it).
    const TIMES_ATTEMPTS: bool = true;

    /// The client's dependency and the call's context, deadline and start,
    /// which the accessors below read by default.
    fn parts(&self) -> Parts<'_>;
    /// The client's parts the loop reads.
    fn core(&self) -> Core<'_> {
        self.parts().dependency.core()
    }
    /// The call's context: its span is the parent of each attempt's, its
    /// baggage carries the failure scenario.
    fn context(&self) -> &Context {
        self.parts().cx
    }
    /// The call's deadline, if it has one.
    fn deadline(&self) -> Option<Instant> {
        self.parts().deadline
    }
    /// Whether the call, dropped at `now` with an attempt in flight (or
    /// waiting for the next), was dropped by its deadline: at or after
    /// it, or less than [`DEADLINE_SLACK`] before it, by default.
    fn dropped_by_deadline(&self, now: Instant) -> bool {
        self.deadline().is_some_and(|d| at_deadline(d, now))
    }
    /// When the call was made, if the transport read the clock then (the
    /// first attempt starts then; the loop reads the clock otherwise).
    fn started(&self) -> Option<Instant> {
        self.parts().started
    }
    /// How long one attempt may take, if bounded apart from the call's
    /// deadline: the client's `attempt_timeout` by default.
    fn attempt_timeout(&self) -> Option<Duration> {
        self.parts().dependency.attempt_timeout
    }
    /// The failure-injection point, evaluated once per attempt.
    fn point(&self) -> Cow<'static, str>;
    /// The attempt's failure injection, with injection on: the fault to
    /// carry out (a delay, an abort) and the point its error names. By
    /// default [`Transport::point`], evaluated once in the attempt's
    /// context. A transport that sends several messages in one attempt
    /// (the Kafka producer's records) evaluates each one's point, and
    /// carries them out as one.
    fn evaluate(&self, span: &Self::Span) -> (fault::Fault, Cow<'static, str>) {
        let point = self.point();
        let fault = self.core().faults.eval(Self::span_context(span), &point);
        (fault, point)
    }
    /// Whether the client was closed (`Setup::stop`): no attempt starts.
    fn is_closed(&self) -> bool {
        false
    }
    /// Completes when the client is closed; an injected delay and the wait
    /// between attempts race it.
    fn closed(&self) -> impl Future<Output = ()> + Send + '_ {
        std::future::pending()
    }

    /// Attempt number `attempt` starts: its span.
    fn start(&self, attempt: u32) -> Self::Span;
    /// The attempt's context (the call's baggage, the attempt's span),
    /// which the failure-injection point is evaluated in.
    fn span_context(span: &Self::Span) -> &Context;
    /// The attempt ended with `result`: ends its span.
    fn end(&self, span: Self::Span, result: Result<&Self::Output, &Self::Error>);
    /// The attempt `attempt` is about to start (its failure-injection
    /// point, then [`Transport::send`]): what its send is given.
    fn prepare(&mut self, attempt: Attempt) -> Self::Prepared;
    /// Sends one attempt (its transparent resends included).
    fn send<'s>(
        &'s self,
        attempt: Attempt,
        prepared: Self::Prepared,
        span: &'s mut Self::Span,
    ) -> impl Future<Output = Result<Self::Output, Self::Error>> + Send + 's;
    /// How the attempt's `result` counts, for retries and the breaker;
    /// `deadline_passed` when the call's deadline has passed.
    fn classify(
        &self,
        result: Result<&Self::Output, &Self::Error>,
        deadline_passed: bool,
    ) -> Classification;
    /// Whether what the last attempt sent can be sent again: a retry
    /// becomes a stop when it cannot.
    fn is_resendable(&self) -> bool;
    /// A retry follows the attempt that ended with `result` (the transport
    /// may keep it); dropped by default.
    fn retrying(&mut self, result: Result<Self::Output, Self::Error>, deadline_passed: bool) {
        let _ = (result, deadline_passed);
    }
    /// What the call returns, the last attempt having ended with `result`
    /// and the loop having decided `decision`.
    fn finish(
        &self,
        result: Result<Self::Output, Self::Error>,
        decision: retry::Decision,
        deadline_passed: bool,
    ) -> Result<Self::Output, Self::Error>;

    /// The breaker rejected attempt `attempt`: records the rejection and
    /// makes the call's error. Nothing was sent.
    fn rejected(&self, attempt: u32, rejected: Rejected) -> Self::Error;
    /// The error of a call whose deadline had passed when it was made:
    /// nothing was sent or counted.
    fn expired(&self) -> Self::Error;
    /// The error of an attempt the call's deadline cut short.
    fn deadline_exceeded(&self) -> Self::Error;
    /// The error of an attempt its own timeout, `after`, cut short; with
    /// the injected delay it cut short, if it cut one.
    fn attempt_timed_out(&self, after: Duration, injected: Option<InjectedError>) -> Self::Error;
    /// The error of an injected fault: an abort, or a delay the call's
    /// deadline or the close cut short.
    fn injected(&self, error: InjectedError) -> Self::Error;
    /// The error of a call the client's close ended.
    fn closing(&self) -> Self::Error;
}

/// How an attempt counts in the breaker when it ends because its call
/// was dropped at its deadline.
const DROPPED_AT_DEADLINE: Outcome = Outcome::Failure;
