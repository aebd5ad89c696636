//! The retry decision after one attempt, as one pure function.

use std::time::Duration;

use tokio::time::Instant;

use super::{Budget, Decision, Verdict};

/// What the attempt loop knows after an attempt, for [`decide`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempted {
    /// The attempt's verdict, once the client's own rules have been applied
    /// (for gRPC, `grpc::client::classify_attempt`'s `retry`).
    pub verdict: Verdict,
    /// The server's pushback, the least wait before the next attempt
    /// (the classification's `retry_after`).
    pub retry_after: Option<Duration>,
    /// The attempt just made: 1 for the first.
    pub attempt: u32,
    /// The most attempts the call may make (`max_attempts`, 1 turns retries
    /// off; 0 counts as 1).
    pub max_attempts: u32,
    /// The wait drawn for the retry that would follow:
    /// [`Exponential::backoff(attempt)`](super::Exponential::backoff).
    pub backoff: Duration,
    /// The longest wait a pushback may ask for (`backoff_max`).
    pub backoff_max: Duration,
    /// The time the attempt ended, read from [`Instant::now`](https://docs.rs/tokio/1/tokio/time/struct.Instant.html#method.now) (tokio's, so
    /// paused-time tests move it).
    pub now: Instant,
    /// The call's deadline, if it has one (a stream may have none).
    pub deadline: Option<Instant>,
}

/// What to do after an attempt: end the call with this attempt's result,
/// recording one of five [`Decision`]s, or retry after a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// The attempt succeeded: return its result.
    Succeeded,
    /// No retry: the verdict was Stop, or the pushback asked for longer
    /// than `backoff_max`. Return the attempt's result.
    Stopped,
    /// The budget refused the retry. Return the attempt's result.
    Throttled,
    /// The attempt was the last one `max_attempts` allows. Return its result.
    Exhausted,
    /// The deadline has passed, or the wait would end at or after it.
    /// Return the attempt's result at once, without waiting.
    Expired,
    /// Wait `after`, then make the next attempt.
    Retry {
        /// The wait: the larger of the backoff drawn and the pushback.
        after: Duration,
    },
}

impl Next {
    /// The decision to count in `humus.retry.decisions`: [`Decision::Retried`]
    /// for [`Next::Retry`], the namesake for every other.
    pub fn decision(&self) -> Decision {
        match self {
            Next::Succeeded => Decision::Succeeded,
            Next::Stopped => Decision::Stopped,
            Next::Throttled => Decision::Throttled,
            Next::Exhausted => Decision::Exhausted,
            Next::Expired => Decision::Expired,
            Next::Retry { .. } => Decision::Retried,
        }
    }
}

/// Decides what follows an attempt, and keeps `budget` up to date. The
/// rules, in order:
///
/// 1. `Success`: gives back to the budget ([`Budget::give_back`]);
///    [`Next::Succeeded`].
/// 2. Any other verdict once the deadline has passed (`now >= deadline`):
///    [`Next::Expired`]. No token is taken.
/// 3. `Stop`: [`Next::Stopped`]. No token is taken.
/// 4. `Retry`: one token is taken ([`Budget::take`]), whatever follows,
///    since every attempt classified Retry takes one (gRFC A6 counts every
///    retryable failure).
/// 5. A `retry_after` longer than `backoff_max`: the server asks for a
///    wait no call in flight should make, so the call ends,
///    [`Next::Stopped`]. Else, if the attempt was the last `max_attempts`
///    allows, [`Next::Exhausted`]; else if the budget refused,
///    [`Next::Throttled`].
/// 6. The wait is the larger of `backoff` and `retry_after`. A wait that
///    would end at or after the deadline is not started:
///    [`Next::Expired`] (the token stays taken).
/// 7. Otherwise [`Next::Retry`] after that wait.
///
/// So a token is taken when a retry is decided, before its wait: retries
/// waiting out a backoff cannot overshoot the budget. First attempts never
/// consult the budget, so they are never limited.
///
/// The only effect is on `budget`; everything else is read from
/// `attempted`. The loop calls it once per attempt that reached the
/// dependency, records [`Next::decision`], and then waits or returns.
///
/// Design: [retries](crate::design::client#retries), [the pushback](crate::design::client#the-pushback),
/// [telemetry](crate::design::client#telemetry) (`humus.retry.decisions`); gRFC A6.
#[inline]
pub fn decide(budget: &Budget, attempted: &Attempted) -> Next {
    // A success, every call's usual end, inlined where the loop decides;
    // the rest out of line.
    if attempted.verdict == Verdict::Success {
        budget.give_back();
        return Next::Succeeded;
    }
    decide_after_failure(budget, attempted)
}

/// [`decide`] for an attempt that did not succeed.
#[inline(never)]
fn decide_after_failure(budget: &Budget, attempted: &Attempted) -> Next {
    let expired = |at: Option<Instant>| match (at, attempted.deadline) {
        (_, None) => false,
        (Some(at), Some(deadline)) => at >= deadline,
        // A wait too long to add to an Instant ends after any deadline.
        (None, Some(_)) => true,
    };
    match attempted.verdict {
        Verdict::Success => {
            budget.give_back();
            return Next::Succeeded;
        }
        _ if expired(Some(attempted.now)) => return Next::Expired,
        Verdict::Stop => return Next::Stopped,
        Verdict::Retry => {}
    }
    let allowed = budget.take();
    let pushback = attempted.retry_after.unwrap_or(Duration::ZERO);
    if pushback > attempted.backoff_max {
        return Next::Stopped;
    }
    if attempted.attempt >= attempted.max_attempts.max(1) {
        return Next::Exhausted;
    }
    if !allowed {
        return Next::Throttled;
    }
    let after = attempted.backoff.max(pushback);
    if expired(attempted.now.checked_add(after)) {
        return Next::Expired;
    }
    Next::Retry { after }
}
