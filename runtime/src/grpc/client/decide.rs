//! The rules the client applies to an attempt before, and after, asking
//! the classifier ([design](crate::design::client#what-the-client-decides)).

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tonic::metadata::MetadataMap;
use tonic::{Code, Status};

use super::{Classification, Classify, LayerError, Method, classify_method};
use crate::circuit::Outcome;
use crate::fault::InjectedError;
use crate::retry::{Decision, Verdict};

/// How an attempt ended, as the attempt loop saw it.
#[derive(Clone, Copy, Debug)]
pub enum Ended<'a> {
    /// The circuit breaker rejected the attempt: nothing was sent.
    Rejected,
    /// A unary attempt, or an attempt to open a stream, ended with
    /// `status` (`None` for OK) and `trailer` (empty for an open nothing
    /// came back from; a trailers-only status's own metadata). An attempt
    /// whose connection could not be had is one too: a failed dial
    /// (refused, unreachable, a failed TLS or HTTP/2 handshake, a server
    /// whose first bytes are no HTTP/2 settings, or none within the
    /// connect timeout), or a connection backing off after one, ends it
    /// `UNAVAILABLE` with nothing sent, its message starting `dial
    /// <addr>: ` (and saying `the connection is backing off` for the
    /// latter), and the dial's `io::Error` among its sources.
    Attempt {
        /// The attempt's status; `None` for OK.
        status: Option<&'a Status>,
        /// The attempt's trailer.
        trailer: &'a MetadataMap,
    },
    /// A stream that had opened ended: with `status` (`None` for its clean
    /// end, or a client-streaming call's one response) and its `trailer`.
    Stream {
        /// The stream's final status; `None` for OK.
        status: Option<&'a Status>,
        /// The stream's trailer.
        trailer: &'a MetadataMap,
    },
}

/// What the client knows of the call, apart from the attempt's result,
/// when an attempt ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallState {
    /// The caller gave up on the call (cancelled it, or dropped a stream)
    /// before the attempt ended.
    pub cancelled: bool,
    /// The call's deadline (`Settings.timeout`, or an earlier one the
    /// caller set or the call inherited) had passed when the attempt ended. Read it from the same
    /// `now` that is given to [`retry::decide`](crate::retry::decide).
    pub deadline_passed: bool,
}

/// Classifies an attempt of `method`: the client's own rules first, then,
/// only when none applies, the method's policy and the client-wide
/// `classify` ([`classify_method`]).
///
/// The client decides, without asking any classify function, and ends
/// the call (`Stop`), since another attempt could not help:
///
/// | how the attempt ended | breaker |
/// |---|---|
/// | [`Ended::Rejected`]: the breaker rejected it | Ignored (there is no ticket to settle) |
/// | an error after the caller gave up ([`CallState::cancelled`]) | Ignored |
/// | an error once the deadline passed ([`CallState::deadline_passed`]) | Failure |
/// | [`Ended::Stream`] with Unavailable: its server or connection went away | Ignored |
/// | a per-attempt layer shed the attempt (tower's `Overloaded`, [`LayerError::is_shed`]): nothing was sent | Ignored |
///
/// and one rule in which the client retries:
///
/// | how the attempt ended | retry | breaker |
/// |---|---|---|
/// | its own timeout ([`AttemptTimeout`] in its status's sources: [`Settings::attempt_timeout`](super::Settings::attempt_timeout), or a per-attempt layer's `Elapsed`), before the call's deadline | Retry, unless the method is [`never_retry`](super::MethodPolicy::never_retry), or the attempt was still waiting for its connection ([`AttemptTimeout::was_connecting`]: a retry would wait on the same dial) (then Stop) | Failure; for an injected delay it cut short (an [`InjectedError`] among its sources), what the classifiers say of its status |
///
/// The attempt's timeout is the client's own bound, as the call's deadline
/// is: no classify function or method table is asked about it (a method's
/// `DeadlineExceeded` rule is about the server's answer), and the
/// dependency that left an attempt hanging counts as failed. Another
/// attempt may be quicker, so it is retried, within `max_attempts`, the
/// retry budget, the backoff and the call's deadline, unless the method
/// is never sent twice.
///
/// A failed open is not among these rules: an attempt whose dial failed
/// (every attempt that waited for that dial), or that found the
/// connection backing off after a failed dial (it fails at once, without
/// dialling: the next dial is not due yet), ends `UNAVAILABLE` with
/// nothing sent, and is classified as any other attempt's `UNAVAILABLE`
/// (by default: Retry, and a breaker Failure). Its retries are bounded as
/// any other's, by `max_attempts` and the retry budget, and a dependency
/// that is down opens the breaker after five such results in a row with
/// the default policy, as one that hangs does. The status says what
/// happened: its message starts `dial <addr>: ` with the dial's error,
/// and for the backoff adds how old that error is and when the next dial
/// is due (`the connection is backing off`); the dial's `io::Error` is
/// among its sources.
///
/// Whatever the classifiers say, a stream that opened is never retried: a
/// Retry for an [`Ended::Stream`] becomes Stop, with no `retry_after`. (A
/// `retry_after` longer than `backoff_max` is the other rule that holds
/// whatever the classifier says; [`retry::decide`](crate::retry::decide)
/// applies it, since it knows `backoff_max`.)
///
/// OK is never an error: an attempt that succeeded is classified, even
/// after a cancel or the deadline, and is never sent again: a Retry for OK
/// (a hand-written classify table or function's) becomes Success, with no
/// `retry_after`; its breaker outcome is kept.
///
/// How the loop uses the result:
///
/// - a unary attempt, or a failed open (a trailers-only status at the
///   open, a failed dial and the connection's backoff included): settle the breaker's ticket with
///   `breaker`, then call [`retry::decide`](crate::retry::decide) with
///   `retry` and `retry_after`, and record its decision;
/// - [`Ended::Rejected`]: no ticket; [`retry::decide`](crate::retry::decide)
///   gives [`Next::Stopped`](crate::retry::Next::Stopped) (its `Stop`);
/// - a stream that opened: [`Next::Succeeded`](crate::retry::Next::Succeeded)
///   was decided at the open; at its end, only `breaker` is used, to settle
///   the ticket the stream kept.
///
/// # Panics
///
/// Whatever a classify function panics with; nothing is caught.
///
/// Design: [what the client decides](crate::design::client#what-the-client-decides),
/// [streams](crate::design::client#streams), [the circuit breaker](crate::design::client#the-circuit-breaker).
pub fn classify_attempt(
    method: &Method,
    classify: &Classify,
    ended: Ended<'_>,
    call: CallState,
) -> Classification {
    let (status, trailer, stream) = match ended {
        Ended::Rejected => return Classification::stop(Outcome::Ignored),
        Ended::Attempt { status, trailer } => (status, trailer, false),
        Ended::Stream { status, trailer } => (status, trailer, true),
    };
    let code = status.map_or(Code::Ok, Status::code);
    if code != Code::Ok {
        if call.cancelled {
            return Classification::stop(Outcome::Ignored);
        }
        if call.deadline_passed {
            return Classification::stop(Outcome::Failure);
        }
        if stream && code == Code::Unavailable {
            return Classification::stop(Outcome::Ignored);
        }
        if let Some(status) = status
            && StdError::source(status).is_some()
        {
            if let Some(timeout) = AttemptTimeout::from_status(status) {
                // An injected delay it cut short is the scenario's
                // failure: the classifiers say how it counts, so one that
                // spares injected failures spares it.
                let breaker = if InjectedError::from_status(status).is_some() {
                    classify_method(
                        &method.policy,
                        classify,
                        method.full_name,
                        Some(status),
                        trailer,
                    )
                    .breaker
                } else {
                    Outcome::Failure
                };
                return Classification {
                    // A retry would wait on the same dial: the call ends,
                    // counted once, as one whose deadline passed there.
                    retry: if method.policy.never_retry || timeout.was_connecting() {
                        Verdict::Stop
                    } else {
                        Verdict::Retry
                    },
                    retry_after: None,
                    breaker,
                };
            }
            if LayerError::from_status(status).is_some_and(LayerError::is_shed) {
                return Classification::stop(Outcome::Ignored);
            }
        }
    }
    let mut c = classify_method(&method.policy, classify, method.full_name, status, trailer);
    if code == Code::Ok && c.retry == Verdict::Retry {
        // An attempt that succeeded is never sent again, whatever a
        // hand-written table or classify function says: the call succeeded.
        c.retry = Verdict::Success;
        c.retry_after = None;
    }
    if stream && c.retry == Verdict::Retry {
        Classification::stop(c.breaker)
    } else {
        c
    }
}

pub use crate::call::DEADLINE_SLACK;

/// Why a call made no further attempt: the [`Decision`] of the retry loop
/// after its last attempt, carried as the source of the call's [`Status`](https://docs.rs/tonic/0.14/tonic/struct.Status.html)
/// when it was [`Throttled`](Decision::Throttled) (the retry budget refused
/// a retry), [`Exhausted`](Decision::Exhausted) (every attempt
/// `max_attempts` allows was made) or [`Expired`](Decision::Expired) (the
/// deadline came before the next attempt could start).
///
/// The status itself is the last attempt's, with the same code, message
/// and metadata; the attempt's status as it was (with its own source: a
/// transport error, an [`InjectedError`](crate::fault::InjectedError)) is
/// this error's [`source`](std::error::Error::source), so code that walks
/// the chain of sources still finds it. Read it with [`NoRetry::from_status`]:
///
/// ```
/// use humus::grpc::client::NoRetry;
/// use humus::retry::Decision;
///
/// fn budget_refused(status: &tonic::Status) -> bool {
///     NoRetry::from_status(status).is_some_and(|n| n.decision() == Decision::Throttled)
/// }
/// # assert!(!budget_refused(&tonic::Status::unavailable("x")));
/// ```
#[derive(Debug, Clone)]
pub struct NoRetry {
    decision: Decision,
    /// The last attempt's status, as it was.
    last: Status,
}

impl NoRetry {
    /// What the retry loop decided after the call's last attempt.
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// The `NoRetry` in `status`'s chain of sources, if any.
    pub fn from_status(status: &Status) -> Option<&NoRetry> {
        crate::chain::find(StdError::source(status))
    }
}

impl fmt::Display for NoRetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.decision {
            Decision::Throttled => "not retried: the retry budget refused the retry (throttled)",
            Decision::Exhausted => "not retried: every attempt max_attempts allows was made (exhausted)",
            Decision::Expired => {
                "not retried: the call's deadline came before the next attempt could start (expired)"
            }
            Decision::Succeeded => "not retried: the call succeeded",
            Decision::Retried => "retried",
            Decision::Stopped => "not retried (stopped)",
        })
    }
}

impl StdError for NoRetry {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&self.last)
    }
}

/// `status` with why no further attempt was made as its source, when the
/// call was throttled, exhausted or expired ([`NoRetry`]); as it is
/// otherwise.
pub(super) fn with_decision(mut status: Status, decision: Decision) -> Status {
    if matches!(
        decision,
        Decision::Throttled | Decision::Exhausted | Decision::Expired
    ) {
        let last = status.clone();
        status.set_source(Arc::new(NoRetry { decision, last }));
    }
    status
}

/// The source of the status of an attempt that its own timeout ended,
/// before the call's deadline: [`Settings::attempt_timeout`](super::Settings::attempt_timeout)
/// passed (the request was cancelled, its HTTP/2 stream reset), or a
/// per-attempt layer ([`Settings::layer`](super::Settings::layer)) failed
/// it with tower's `Elapsed` (a `TimeoutLayer`'s).
///
/// The status is `DeadlineExceeded`, its message this error's. The client
/// classifies it itself ([`classify_attempt`]): a failure of the
/// dependency, retried unless the method is never sent twice. Read it with
/// [`AttemptTimeout::from_status`]:
///
/// ```
/// use humus::grpc::client::AttemptTimeout;
///
/// fn attempt_timed_out(status: &tonic::Status) -> bool {
///     AttemptTimeout::from_status(status).is_some()
/// }
/// // A server's DeadlineExceeded is not the attempt's timeout.
/// assert!(!attempt_timed_out(&tonic::Status::deadline_exceeded("late")));
/// ```
#[derive(Debug)]
pub struct AttemptTimeout {
    /// The setting's value; `None` for a layer's timeout.
    after: Option<Duration>,
    /// The layer's error, for a layer's timeout.
    layer: Option<LayerError>,
    /// Whether the attempt was still waiting for its connection (a dial
    /// that had not finished).
    connecting: bool,
    /// The injected delay the timeout cut short, if it cut one.
    injected: Option<InjectedError>,
}

impl AttemptTimeout {
    /// The status of an attempt that [`Settings::attempt_timeout`](super::Settings::attempt_timeout),
    /// `after`, ended: `DeadlineExceeded`, naming the dependency (`addr`),
    /// the setting and its value, and saying so when the attempt was still
    /// waiting for its connection (`connecting`), or when it cut short an
    /// injected delay (`injected`, then its source).
    pub(super) fn status(
        after: Duration,
        connecting: bool,
        addr: &str,
        injected: Option<InjectedError>,
    ) -> Status {
        let timeout = AttemptTimeout {
            after: Some(after),
            layer: None,
            connecting,
            injected,
        };
        let mut status = Status::deadline_exceeded(format!("{addr}: {timeout}"));
        status.set_source(Arc::new(timeout));
        status
    }

    /// The status of an attempt that a per-attempt layer's timeout (tower's
    /// `Elapsed`, held by `layer`) ended.
    pub(super) fn of_layer(layer: LayerError) -> Status {
        let timeout = AttemptTimeout {
            after: None,
            layer: Some(layer),
            connecting: false,
            injected: None,
        };
        let mut status = Status::deadline_exceeded(timeout.to_string());
        status.set_source(Arc::new(timeout));
        status
    }

    /// The `AttemptTimeout` in `status`'s chain of sources, if any (a call
    /// that could not be retried again has a [`NoRetry`] first).
    pub fn from_status(status: &Status) -> Option<&AttemptTimeout> {
        crate::chain::find(StdError::source(status))
    }

    /// The [`Settings::attempt_timeout`](super::Settings::attempt_timeout)
    /// that passed; `None` when a per-attempt layer's timeout ended the
    /// attempt.
    pub fn after(&self) -> Option<Duration> {
        self.after
    }

    /// Whether the attempt was still waiting for its connection (a dial
    /// that had not finished) when its timeout passed: nothing was sent.
    pub fn was_connecting(&self) -> bool {
        self.connecting
    }
}

impl fmt::Display for AttemptTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.after {
            Some(after) => {
                write!(
                    f,
                    "the attempt's timeout passed: the client's attempt_timeout setting, {}",
                    humantime_serde::re::humantime::format_duration(after)
                )?;
                if self.connecting {
                    StillConnecting.fmt(f)?;
                }
                if let Some(injected) = &self.injected {
                    write!(f, "; it cut short an injected delay at {}", injected.point())?;
                }
                Ok(())
            }
            None => f.write_str(
                "the attempt's timeout passed: a per-attempt layer's timeout elapsed (tower's Elapsed)",
            ),
        }
    }
}

/// What the message of an attempt's status adds when the attempt was
/// still waiting for its connection (a dial that had not finished),
/// whichever deadline cut it; the message names the address first.
pub(super) struct StillConnecting;

impl fmt::Display for StillConnecting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("; it was still waiting for its connection (the dial had not finished)")
    }
}

/// Its source is the per-attempt layer's error, or the [`InjectedError`]
/// of the injected delay it cut short
/// ([`InjectedError::from_status`] finds it).
impl StdError for AttemptTimeout {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match (&self.layer, &self.injected) {
            (Some(layer), _) => Some(layer),
            (None, Some(injected)) => Some(injected),
            (None, None) => None,
        }
    }
}
