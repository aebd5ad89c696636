//! The rules the client applies to an attempt before, and after, asking
//! the classifier ([design](crate::design::client#what-the-client-decides)).

use tonic::metadata::MetadataMap;
use tonic::{Code, Status};

use super::{Classification, Classify, Method, classify_method};
use crate::circuit::Outcome;
use crate::retry::Verdict;

/// How an attempt ended, as the attempt loop saw it.
#[derive(Clone, Copy, Debug)]
pub enum Ended<'a> {
    /// The circuit breaker rejected the attempt: nothing was sent.
    Rejected,
    /// A unary attempt, or an attempt to open a stream, ended with
    /// `status` (`None` for OK) and `trailer` (empty for a failed open:
    /// nothing came back).
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
    /// caller set) had passed when the attempt ended. Read it from the same
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
///
/// Whatever the classifiers say, a stream that opened is never retried: a
/// Retry for an [`Ended::Stream`] becomes Stop, with no `retry_after`. (A
/// `retry_after` longer than `backoff_max` is the other rule that holds
/// whatever the classifier says; [`retry::decide`](crate::retry::decide)
/// applies it, since it knows `backoff_max`.)
///
/// OK is never an error: an attempt that succeeded is classified, even
/// after a cancel or the deadline.
///
/// How the loop uses the result:
///
/// - a unary attempt, or a failed open: settle the breaker's ticket with
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
    }
    let c = classify_method(&method.policy, classify, method.full_name, status, trailer);
    if stream && c.retry == Verdict::Retry {
        Classification::stop(c.breaker)
    } else {
        c
    }
}
