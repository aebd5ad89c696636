//! Retries: the budget, the backoff schedule and decisions (seed 000,
//! "Which calls are retried"; gRFC A6).
//!
//! PLACEHOLDER: the budget and the schedule land with issue 3.

use std::fmt;

/// What a classifier answers of one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The attempt succeeded; no further attempt.
    Success,
    /// Another attempt may help.
    Retry,
    /// The call ends with this attempt's result.
    Stop,
}

/// What the retry loop decided after an attempt, as counted in
/// `humus.retry.decisions`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Decision {
    /// The call succeeded.
    Succeeded,
    /// Another attempt follows.
    Retried,
    /// The call ended without another attempt.
    Stopped,
    /// A retry the budget refused.
    Throttled,
    /// The call used every attempt.
    Exhausted,
    /// The call's deadline comes before the next attempt could start.
    Expired,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Decision::Succeeded => "succeeded",
            Decision::Retried => "retried",
            Decision::Stopped => "stopped",
            Decision::Throttled => "throttled",
            Decision::Exhausted => "exhausted",
            Decision::Expired => "expired",
        })
    }
}
