//! Shared helpers of the circuit breaker's tests: a breaker whose policy and
//! observer record every call.
#![allow(dead_code, unreachable_pub)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use humus::circuit::{Breaker, Config, Counts, Outcome, Policy, State, Ticket, Transition};

/// What the policy and the observer of a breaker saw.
#[derive(Debug, Default)]
pub struct Log {
    /// The counts `trip` was asked about, in order.
    pub trips: Mutex<Vec<Counts>>,
    /// The counts `probe` was asked about, in order.
    pub probes: Mutex<Vec<Counts>>,
    /// Every transition delivered to `observe`, in order.
    pub transitions: Mutex<Vec<Transition>>,
}

impl Log {
    pub fn trips(&self) -> Vec<Counts> {
        self.trips.lock().unwrap().clone()
    }

    pub fn probes(&self) -> Vec<Counts> {
        self.probes.lock().unwrap().clone()
    }

    pub fn transitions(&self) -> Vec<Transition> {
        self.transitions.lock().unwrap().clone()
    }

    /// The moves delivered so far, as `(from, to)`.
    pub fn moves(&self) -> Vec<(State, State)> {
        self.transitions().iter().map(|t| (t.from, t.to)).collect()
    }
}

pub fn config(window: usize, probes: usize, open_for: Duration, probe_timeout: Duration) -> Config {
    Config {
        window,
        probes,
        open_for,
        probe_timeout,
    }
}

/// The usual test config: a window of 10, `probes` probes, open for 10 s,
/// probes time out after 1 s.
pub fn standard(probes: usize) -> Config {
    config(10, probes, Duration::from_secs(10), Duration::from_secs(1))
}

/// A breaker with the given policy functions, recording every call of them
/// and every transition.
pub fn breaker(
    config: Config,
    trip: impl Fn(&Counts) -> bool + Send + Sync + 'static,
    probe: impl Fn(&Counts) -> State + Send + Sync + 'static,
) -> (Breaker, Arc<Log>) {
    let log = Arc::new(Log::default());
    let (l1, l2, l3) = (log.clone(), log.clone(), log.clone());
    let policy = Policy::new(
        move |c| {
            l1.trips.lock().unwrap().push(*c);
            trip(c)
        },
        move |c| {
            l2.probes.lock().unwrap().push(*c);
            probe(c)
        },
    );
    let breaker = Breaker::new(config, policy, move |t| {
        l3.transitions.lock().unwrap().push(*t)
    })
    .expect("valid config");
    (breaker, log)
}

/// Opens after `n` failures in a row; reopens on a failed probe, closes
/// after `n` good probes, keeps probing otherwise (timeouts included).
pub fn consecutive(config: Config, n: i64) -> (Breaker, Arc<Log>) {
    breaker(
        config,
        move |c| c.consecutive_failures >= n,
        move |c| {
            if c.failures > 0 {
                State::Open
            } else if c.consecutive_successes >= n {
                State::Closed
            } else {
                State::HalfOpen
            }
        },
    )
}

/// Admits a call and settles it at once with `outcome`.
pub fn call(breaker: &Breaker, outcome: Outcome) -> bool {
    breaker.allow().expect("admitted").done(outcome)
}

/// Admits a call, or panics with the rejection.
pub fn admit(breaker: &Breaker) -> Ticket<'_> {
    breaker.allow().expect("admitted")
}

pub const NS: Duration = Duration::from_nanos(1);
