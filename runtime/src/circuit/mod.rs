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
