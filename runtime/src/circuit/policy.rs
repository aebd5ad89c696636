//! When a breaker changes state: two functions of its counts.

use std::fmt;
use std::sync::Arc;

use super::{Counts, State};

type Trip = dyn Fn(&Counts) -> bool + Send + Sync;
type Probe = dyn Fn(&Counts) -> State + Send + Sync;

/// Decides when a [`Breaker`](super::Breaker) changes state, from its
/// [`Counts`] alone.
///
/// A policy is two functions:
///
/// - `trip` is asked after every success or failure counted while closed,
///   and returns whether the breaker opens;
/// - `probe` is asked while half-open after every success or failure of a
///   probe and after every probe that times out, and returns
///   [`State::Closed`] to close the breaker, [`State::Open`] to reopen it,
///   or [`State::HalfOpen`] to keep probing.
///
/// Splitting the decision in two makes an invalid move, such as closed to
/// half-open, impossible to express, and keeps how many probes may be in
/// flight ([`Config::probes`](super::Config::probes)) apart from how many
/// good probes close the breaker.
///
/// Both run with the breaker's lock held, on the thread of the call that
/// counted the result (or that found the probe timed out), so they must be
/// fast and must not call the breaker. A function that panics leaves the
/// breaker consistent: what was counted stays counted, the state does not
/// change, and later calls work. A policy is cheap to clone; clones share
/// the two functions.
///
/// Because a policy reads nothing but a [`Counts`] value, it can be tested
/// without a breaker:
///
/// ```
/// use humus::circuit::{Counts, Policy, State};
///
/// let policy = Policy::consecutive_or_half(5, 20, 3);
/// let counts = Counts { failures: 5, consecutive_failures: 5, ..Counts::default() };
/// assert!(policy.trip(&counts));
/// let probes = Counts { successes: 3, consecutive_successes: 3, ..Counts::default() };
/// assert_eq!(policy.probe(&probes), State::Closed);
/// ```
///
/// Design: [counts and policy](crate::design::circuit_breaker#counts-and-policy).
#[derive(Clone)]
pub struct Policy {
    trip: Arc<Trip>,
    probe: Arc<Probe>,
}

impl Policy {
    /// A policy of the two given functions: `trip` while closed, `probe`
    /// while half-open (see [`Policy`]).
    pub fn new(
        trip: impl Fn(&Counts) -> bool + Send + Sync + 'static,
        probe: impl Fn(&Counts) -> State + Send + Sync + 'static,
    ) -> Policy {
        Policy {
            trip: Arc::new(trip),
            probe: Arc::new(probe),
        }
    }

    /// Opens after `n` failures in a row; while half-open, reopens on any
    /// failed probe, closes after `n` successful probes in a row, and keeps
    /// probing otherwise (a probe that times out changes nothing).
    ///
    /// With `n`
    /// zero it opens on the first counted result and closes on the first
    /// successful probe.
    ///
    /// Design: [counts and policy](crate::design::circuit_breaker#counts-and-policy).
    pub fn consecutive(n: i64) -> Policy {
        Policy::new(
            move |c| c.consecutive_failures >= n,
            move |c| half_open(c, n),
        )
    }

    /// Opens after `in_a_row` failures in a row, or once at least
    /// `min_results` results are in the window and half of them or more
    /// failed; while half-open, reopens on any failed probe, closes after
    /// `close_after` successful probes in a row, and keeps probing
    /// otherwise, also after a probe times out.
    ///
    /// The ratio rule needs `min_results` results in the window, so with a
    /// [`Config::window`](super::Config::window) below `min_results` only
    /// the rule of failures in a row trips it.
    ///
    /// The humus gRPC client's default is `consecutive_or_half(5, 20, 3)`
    /// (with, in its settings, a window of 20, one probe at a time and an
    /// open period of 10 s): open after 5 failures in a row or half of the
    /// last 20 or more results; a failed probe reopens, 3 good ones close.
    ///
    /// Design: [counts and policy](crate::design::circuit_breaker#counts-and-policy); the client's
    /// [circuit breaker](crate::design::client#the-circuit-breaker).
    pub fn consecutive_or_half(in_a_row: i64, min_results: i64, close_after: i64) -> Policy {
        Policy::new(
            move |c| {
                let n = c.successes + c.failures;
                c.consecutive_failures >= in_a_row
                    || (n >= min_results && c.failures.saturating_mul(2) >= n)
            },
            move |c| half_open(c, close_after),
        )
    }

    /// Asks the policy's `trip` function: does a closed breaker with these
    /// counts open?
    #[inline]
    pub fn trip(&self, counts: &Counts) -> bool {
        (self.trip)(counts)
    }

    /// Asks the policy's `probe` function: where does a half-open breaker
    /// with these counts go?
    #[inline]
    pub fn probe(&self, counts: &Counts) -> State {
        (self.probe)(counts)
    }
}

/// Reopens on any failed probe, closes after `close_after` good ones.
fn half_open(c: &Counts, close_after: i64) -> State {
    if c.failures > 0 {
        State::Open
    } else if c.consecutive_successes >= close_after {
        State::Closed
    } else {
        State::HalfOpen
    }
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy").finish_non_exhaustive()
    }
}
