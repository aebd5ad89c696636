//! The circuit breaker (seed 004, bedrock `circuit`).
//!
//! PLACEHOLDER: the full state machine lands with issue 2.

use std::fmt;

/// The state of a [circuit breaker](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Every call is admitted.
    Closed,
    /// Every call is rejected.
    Open,
    /// A few probe calls are admitted to find out whether the dependency is back.
    HalfOpen,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half-open",
        })
    }
}

/// How one admitted call counts in the breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The dependency worked.
    Success,
    /// The dependency failed.
    Failure,
    /// The result says nothing of the dependency; nothing is counted.
    Ignored,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
            Outcome::Ignored => "ignored",
        })
    }
}

/// The counts a breaker keeps of its current state, which its policy reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Successes among the latest `window` results of the current state.
    pub successes: usize,
    /// Failures among the latest `window` results of the current state.
    pub failures: usize,
    /// Successes in a row, not bounded by the window; saturating.
    pub consecutive_successes: usize,
    /// Failures in a row, not bounded by the window; saturating.
    pub consecutive_failures: usize,
    /// Probes that held their slot past `probe_timeout`.
    pub timed_out: usize,
}

/// One change of a breaker's state, as given to its observer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The state left.
    pub from: State,
    /// The state entered.
    pub to: State,
    /// 1 for the breaker's first transition, then 2, 3, …
    pub generation: u64,
    /// The final counts of the state left (zero for Open → HalfOpen).
    pub counts: Counts,
}
