//! Retries: the budget, the backoff schedule and decisions
//! ([design](crate::design::client#retries); gRFC A6). Nothing here knows of gRPC.
//!
//! | item | what it is |
//! |---|---|
//! | [`Verdict`] | what a classifier answers of one attempt |
//! | [`Budget`], [`BudgetConfig`] | gRFC A6 retry throttling, shared by every call of a client |
//! | [`Exponential`] | the full-jitter exponential backoff schedule |
//! | [`decide`], [`Attempted`], [`Next`] | what follows an attempt |
//! | [`Decision`] | what [`decide`] decided, as `humus.retry.decisions` counts it |
//!
//! The attempt loop, after each attempt that reached the dependency:
//!
//! ```
//! use std::time::Duration;
//! use humus::retry::{decide, Attempted, Budget, Exponential, Next, Verdict};
//!
//! let budget = Budget::default();
//! let schedule = Exponential::new(Duration::from_millis(100), Duration::from_secs(1))
//!     .with_source(|hi| hi / 2);
//! let now = tokio::time::Instant::now();
//! let attempt = 1;
//! let next = decide(&budget, &Attempted {
//!     verdict: Verdict::Retry,
//!     retry_after: None,
//!     attempt,
//!     max_attempts: 3,
//!     backoff: schedule.backoff(attempt),
//!     backoff_max: schedule.max(),
//!     now,
//!     deadline: Some(now + Duration::from_secs(5)),
//! });
//! assert_eq!(next, Next::Retry { after: Duration::from_millis(50) });
//! assert_eq!(next.decision().to_string(), "retried");
//! ```

use std::fmt;

pub(crate) mod after;
mod backoff;
mod budget;
mod decide;

pub use after::{RetryAfter, retry_after};
pub use backoff::Exponential;
pub use budget::{
    Budget, BudgetConfig, BudgetError, MAX_TOKENS_LIMIT, check_max_tokens, check_token_ratio,
};
pub use decide::{Attempted, Next, decide};

/// What a classifier answers of one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The attempt succeeded; no further attempt. It gives back to the
    /// retry budget and is counted `succeeded` in
    /// `humus.retry.decisions`. A classifier may give it for an error
    /// status that is a normal answer of a healthy dependency (a
    /// `NotFound` a lookup expects): the call still returns that status,
    /// and the budget fills as for an `OK`. Beside a breaker `Failure`
    /// (which the retry verdict does not check), it fills the budget while
    /// counting against the dependency: a `Stop` is what such a status
    /// usually wants.
    Success,
    /// Another attempt may help.
    Retry,
    /// The call ends with this attempt's result. Nothing goes back to the
    /// retry budget; `humus.retry.decisions` counts it `stopped`.
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
