//! A circuit breaker: the state machine that stops calls to a dependency
//! that keeps failing, and lets a few through now and then to learn when it
//! has recovered.
//!
//! Design: [the circuit breaker](crate::design::circuit_breaker). The two-step
//! [`allow`](Breaker::allow) / [`done`](Ticket::done) API is the only way
//! in. The pattern is Michael Nygard's, from *Release It!* (2007).
//!
//! # The model
//!
//! A [`Breaker`] stands in front of one dependency (one host, one gRPC
//! service) and is in one of three [states](State):
//!
//! - **closed**: every call is admitted and its result counted. After each
//!   success or failure, the [`Policy`]'s `trip` function decides whether it
//!   opens;
//! - **open**: every call is rejected with [`Rejected`] until
//!   [`Config::open_for`] has passed. The first [`allow`](Breaker::allow) or
//!   [`done`](Ticket::done) after that makes it half-open, as of the moment
//!   the open period ended;
//! - **half-open**: at most [`Config::probes`] calls, the probes, are in
//!   flight at once, and the rest are rejected. After each probe's success
//!   or failure, and after each probe that times out, the policy's `probe`
//!   function decides whether it closes, reopens or keeps probing.
//!
//! This module is that state machine only: it does no I/O and starts no
//! task, timer or thread. Wrapping a transport, exporting metrics and
//! reading the [`Config`] from configuration belong to the code built on it
//! (the humus gRPC client).
//!
//! # Calls
//!
//! A call goes through a breaker inline, in the caller's own code, not as a
//! closure the breaker runs. [`Breaker::allow`] admits the call and returns
//! a [`Ticket`], or rejects it; the ticket is settled once, right after the
//! call and before anything looks at the result:
//!
//! ```
//! # use humus::circuit::{Breaker, Outcome, Rejected};
//! # async fn call() -> Result<(), std::io::Error> { Ok(()) }
//! # async fn example(breaker: &Breaker) -> Result<(), Box<dyn std::error::Error>> {
//! let ticket = breaker.allow()?; // Err(Rejected): the call is not made
//! let result = call().await;
//! ticket.done(match &result {
//!     Ok(_) => Outcome::Success,
//!     Err(_) => Outcome::Failure,
//! });
//! result?; // only now look at the result
//! # Ok(()) }
//! ```
//!
//! Settling first matters: an early `return` (or `?`) between the call and
//! `done` drops the ticket, which counts nothing, and a breaker whose
//! failures are lost never opens.
//!
//! A call ends in one of three ways:
//!
//! 1. **settled with an [`Outcome`]** by [`Ticket::done`]: a
//!    [`Success`](Outcome::Success) or [`Failure`](Outcome::Failure) is
//!    counted and the policy decides; an [`Ignored`](Outcome::Ignored)
//!    result (the caller gave up, say) counts nothing, extends no run, asks
//!    no policy function, and frees its probe slot;
//! 2. **settled without a result**: the ticket is [released](Ticket::release)
//!    or dropped, because the code holding it returned early, panicked, or
//!    was a future the caller dropped. It counts nothing and frees its probe
//!    slot at once. `Drop` is the guard: there is nothing to defer;
//! 3. **never settled**: the call hangs, or the ticket was handed to
//!    something that keeps it (a response stream nobody reads). While closed
//!    that costs nothing; a probe holds its slot for at most
//!    [`Config::probe_timeout`], after which another probe may go,
//!    [`Counts::timed_out`] grows and the policy decides. The call is not
//!    cancelled, and its result still counts if it arrives before the state
//!    changes.
//!
//! `done` and `release` take the ticket by value, so settling twice does
//! not compile. A result known only later, such as the end of a response
//! stream, is settled by whatever holds the ticket then: moving the ticket
//! into the stream is the hand-off (see the second example). A ticket from
//! `allow` borrows the breaker, which costs nothing per call;
//! [`Ticket::into_owned`] gives it a handle of its own (one reference
//! count), an [`OwnedTicket`], for a hand-off that outlives the borrow.
//!
//! # Counts and policy
//!
//! This module decides which [`Counts`] a breaker keeps; the [`Policy`]
//! decides what they mean. The counts are the successes and failures among
//! the latest [`Config::window`] results of the current state, the runs of
//! successes or failures in a row (not bounded by the window, saturating),
//! and the probes that timed out. Every change of state starts them again
//! from zero. The window counts results, not time: at low traffic it
//! reaches back a long way, so a policy that must react to recent results
//! reads the runs.
//!
//! A policy is two plain functions of a [`Counts`] value, so it is tested
//! without a breaker. [`Policy::consecutive`] and
//! [`Policy::consecutive_or_half`] build the usual ones. Policy functions
//! run under the breaker's lock: they must be fast and must not call the
//! breaker. One that panics leaves the breaker consistent: what was counted
//! stays counted, the state does not change, and later calls work.
//!
//! # Late results
//!
//! A result belongs to the state its call was admitted in. One that arrives
//! after that state has ended (a slow call admitted while closed that
//! finishes after the breaker opened) is discarded: [`Ticket::done`] returns
//! `false`, and the newer state's counts are untouched. A late result never
//! closes, reopens or trips a breaker in a state it was not admitted in.
//!
//! # Observing transitions
//!
//! The `observe` function given to [`Breaker::new`] receives every
//! [`Transition`], one at a time and in order: `generation` 1, 2, 3…, each
//! one's `from` the last one's `to`, with the final counts of the state
//! left (zero for open → half-open, which time makes). It is called outside
//! the breaker's lock and never concurrently with itself, so it may call the
//! breaker, and a gauge it sets needs no lock of its own.
//!
//! A transition is delivered before the call that made it returns, unless
//! another thread is delivering at that moment, in which case that thread
//! delivers it. If `observe` panics, the panic continues, and the rest of
//! the queue is delivered by the next [`allow`](Breaker::allow) or
//! [`done`](Ticket::done). `allow` delivers what is queued before it admits
//! its call, so `observe` never runs while that call holds a probe slot.
//!
//! # Time
//!
//! Time is read with
//! [`tokio::time::Instant::now`](https://docs.rs/tokio/1/tokio/time/struct.Instant.html#method.now)
//! and nothing else: no
//! clock is injected, and nothing runs in the background, so tests run on
//! paused tokio time and check each boundary to the nanosecond. A change
//! that time makes due (becoming half-open, a probe timing out) is made by
//! the next `allow` or `done`, as of the moment it fell due, so the breaker
//! behaves the same whichever call notices. [`Breaker::state`] is a pure
//! read: it shows half-open as soon as the open period has passed, with no
//! traffic, changes nothing and calls no user function.
//!
//! # Examples
//!
//! Two failures in a row open the breaker, and it rejects calls without
//! making them until its open period has passed. Then it is half-open, and
//! two successful probes close it:
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//!
//! use humus::circuit::{Breaker, Config, Outcome, Policy, Transition};
//!
//! // A client of a payments service that calls it through a breaker.
//! struct Payments {
//!     breaker: Breaker,
//!     results: Mutex<Vec<Result<(), String>>>, // how it answers, in order
//! }
//!
//! impl Payments {
//!     async fn charge(&self) -> Result<(), String> {
//!         let ticket = self.breaker.allow().map_err(|rejected| {
//!             format!("rejected while {}", rejected.state)
//!         })?;
//!         let result = self.send().await;
//!         ticket.done(if result.is_ok() { Outcome::Success } else { Outcome::Failure });
//!         result
//!     }
//!
//!     // Stands in for the request to the service.
//!     async fn send(&self) -> Result<(), String> {
//!         self.results.lock().unwrap().remove(0)
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread()
//! #     .enable_time()
//! #     .start_paused(true)
//! #     .build()
//! #     .unwrap()
//! #     .block_on(async {
//! let log = Arc::new(Mutex::new(Vec::new()));
//! let say = { let log = log.clone(); move |line: String| log.lock().unwrap().push(line) };
//!
//! // At startup: the config would come from configuration.
//! let config = Config {
//!     window: 20,
//!     probes: 1,
//!     open_for: Duration::from_secs(10),
//!     probe_timeout: Duration::from_secs(1),
//! };
//! let observe = {
//!     let say = say.clone();
//!     move |t: &Transition| say(format!(
//!         "observe: #{} {} -> {} after {} failed, {} succeeded",
//!         t.generation, t.from, t.to, t.counts.failures, t.counts.successes,
//!     ))
//! };
//! let breaker = Breaker::new(config, Policy::consecutive(2), observe).unwrap();
//! let unavailable = || Err("payments: unavailable".to_string());
//! let payments = Payments {
//!     breaker: breaker.clone(),
//!     results: Mutex::new(vec![unavailable(), unavailable(), Ok(()), Ok(())]),
//! };
//!
//! // Per outbound call.
//! for _ in 0..3 {
//!     say(format!("charge: {:?}", payments.charge().await));
//! }
//! tokio::time::advance(config.open_for).await;
//! say(format!("state: {}", breaker.state()));
//! for _ in 0..2 {
//!     say(format!("charge: {:?}", payments.charge().await));
//! }
//! say(format!("state: {}", breaker.state()));
//!
//! assert_eq!(*log.lock().unwrap(), [
//!     r#"charge: Err("payments: unavailable")"#,
//!     "observe: #1 closed -> open after 2 failed, 0 succeeded",
//!     r#"charge: Err("payments: unavailable")"#,
//!     r#"charge: Err("rejected while open")"#,
//!     "state: half-open",
//!     "observe: #2 open -> half-open after 0 failed, 0 succeeded",
//!     "charge: Ok(())",
//!     "observe: #3 half-open -> closed after 0 failed, 2 succeeded",
//!     "charge: Ok(())",
//!     "state: closed",
//! ]);
//! # });
//! ```
//!
//! A response whose body fails while the caller reads it counts as a
//! failure. `allow` admits the request when it starts; the ticket moves
//! into the body, which settles it when the result is known: at the end of
//! the body, at an error while reading it, or (counting nothing) when the
//! body is dropped unread:
//!
//! ```
//! use std::collections::VecDeque;
//! use std::time::Duration;
//!
//! use humus::circuit::{Breaker, Config, OwnedTicket, Outcome, Policy, State};
//!
//! // A streamed response body that settles its ticket once, when it ends.
//! struct Body {
//!     chunks: VecDeque<Result<&'static str, &'static str>>,
//!     ticket: Option<OwnedTicket>, // dropped with the body if never settled
//! }
//!
//! impl Body {
//!     fn read(&mut self) -> Option<Result<&'static str, &'static str>> {
//!         let chunk = self.chunks.pop_front();
//!         let outcome = match chunk {
//!             None => Some(Outcome::Success),       // the end
//!             Some(Err(_)) => Some(Outcome::Failure), // failed partway
//!             Some(Ok(_)) => None,
//!         };
//!         if let Some(outcome) = outcome {
//!             if let Some(ticket) = self.ticket.take() {
//!                 ticket.done(outcome);
//!             }
//!         }
//!         chunk
//!     }
//! }
//!
//! // The request: admitted now, its result known once the body is read.
//! fn get(breaker: &Breaker) -> Result<Body, String> {
//!     let ticket = breaker.allow().map_err(|rejected| rejected.to_string())?;
//!     Ok(Body {
//!         chunks: VecDeque::from([Ok("first chunk, "), Err("connection reset")]),
//!         ticket: Some(ticket.into_owned()), // the hand-off
//!     })
//! }
//!
//! let config = Config {
//!     window: 20,
//!     probes: 1,
//!     open_for: Duration::from_secs(10),
//!     probe_timeout: Duration::from_secs(1),
//! };
//! let breaker = Breaker::new(config, Policy::consecutive(1), |t| {
//!     println!("observe: #{} {} -> {}", t.generation, t.from, t.to)
//! })
//! .unwrap();
//!
//! let mut body = get(&breaker).unwrap();
//! assert_eq!(breaker.state(), State::Closed); // nothing known yet
//! let mut read = String::new();
//! let error = loop {
//!     match body.read() {
//!         Some(Ok(chunk)) => read.push_str(chunk),
//!         Some(Err(error)) => break Some(error),
//!         None => break None,
//!     }
//! };
//! assert_eq!((read.as_str(), error), ("first chunk, ", Some("connection reset")));
//! assert_eq!(breaker.state(), State::Open);
//! let rejected = get(&breaker).err().unwrap(); // the request is not made
//! assert!(rejected.starts_with("circuit: call rejected: open for another "));
//! ```
//!
//! # Out of scope
//!
//! The breaker does not retry, back off, time out, rate-limit or bound the
//! concurrency of calls (see [`retry`](crate::retry)); does not share its
//! state between processes; keeps no registry of named breakers; and ships
//! no transport, classifier or observer.

mod breaker;
mod config;
mod core;
mod policy;

pub use breaker::{Breaker, OwnedTicket, Rejected, Ticket};
pub use config::{Config, ConfigError, MAX_COUNT};
pub use policy::Policy;

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
///
/// Every count is a signed `i64`, never negative, so that a policy's
/// arithmetic on them cannot wrap or panic: `c.failures - c.successes >= 5`
/// is a valid policy, and is simply false while successes outnumber
/// failures. (With unsigned counts it would panic in a debug build and, in
/// a release build, wrap to a huge number and open the breaker after one
/// success.) `successes + failures` is at most the window
/// ([`MAX_COUNT`] at most); the runs and `timed_out` stop at `i64::MAX`
/// rather than wrap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Successes among the latest `window` results of the current state.
    pub successes: i64,
    /// Failures among the latest `window` results of the current state.
    pub failures: i64,
    /// Successes in a row, not bounded by the window; saturating at
    /// `i64::MAX`.
    pub consecutive_successes: i64,
    /// Failures in a row, not bounded by the window; saturating at
    /// `i64::MAX`.
    pub consecutive_failures: i64,
    /// Probes that held their slot past `probe_timeout`; saturating at
    /// `i64::MAX`.
    pub timed_out: i64,
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
