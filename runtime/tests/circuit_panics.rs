//! A policy function that panics leaves the breaker consistent: what was
//! counted stays counted, the state does not change, later calls work
//! (docs/circuit-breaker.md, "Counts and policy"; the panic continues: nothing here recovers it but
//! the test).

mod circuit_support;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use circuit_support::{admit, breaker, call, standard};
use humus::circuit::{Counts, Outcome, State};
use tokio::time::advance;

const OPEN_FOR: Duration = Duration::from_secs(10);

fn armed() -> (Arc<AtomicBool>, Arc<AtomicBool>) {
    let flag = Arc::new(AtomicBool::new(false));
    (flag.clone(), flag)
}

#[tokio::test(start_paused = true)]
async fn a_panicking_trip_keeps_the_count_and_the_state() {
    let (arm, armed) = armed();
    let (b, log) = breaker(
        standard(1),
        move |c| {
            if armed.swap(false, Ordering::SeqCst) {
                panic!("trip failed");
            }
            c.failures >= 2
        },
        |_| State::HalfOpen,
    );
    arm.store(true, Ordering::SeqCst);
    let ticket = admit(&b);
    assert!(catch_unwind(AssertUnwindSafe(|| ticket.done(Outcome::Failure))).is_err());
    assert_eq!(b.state(), State::Closed, "no change");
    // The failure stayed counted: the next one makes two.
    call(&b, Outcome::Failure);
    assert_eq!(log.trips()[1].failures, 2);
    assert_eq!(b.state(), State::Open);
    assert_eq!(log.moves(), [(State::Closed, State::Open)]);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_probe_keeps_the_count_the_state_and_frees_the_slot() {
    let (arm, armed) = armed();
    let (b, log) = breaker(
        standard(1),
        |c| c.failures > 0,
        move |c| {
            if armed.swap(false, Ordering::SeqCst) {
                panic!("probe failed");
            }
            if c.successes >= 2 {
                State::Closed
            } else {
                State::HalfOpen
            }
        },
    );
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    arm.store(true, Ordering::SeqCst);
    let probe = admit(&b);
    assert!(catch_unwind(AssertUnwindSafe(|| probe.done(Outcome::Success))).is_err());
    assert_eq!(b.state(), State::HalfOpen);
    let next = admit(&b); // the slot was freed
    assert!(next.done(Outcome::Success));
    assert_eq!(
        log.probes()[1].successes,
        2,
        "the first success stayed counted"
    );
    assert_eq!(b.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn a_probe_panicking_on_a_timeout_keeps_the_timeout_counted() {
    let (arm, armed) = armed();
    let (b, log) = breaker(
        standard(1),
        |c| c.failures > 0,
        move |c: &Counts| {
            if armed.swap(false, Ordering::SeqCst) {
                panic!("probe failed");
            }
            if c.timed_out >= 2 {
                State::Open
            } else {
                State::HalfOpen
            }
        },
    );
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    let _first = admit(&b);
    advance(Duration::from_secs(1)).await;
    arm.store(true, Ordering::SeqCst);
    assert!(catch_unwind(AssertUnwindSafe(|| b.allow())).is_err());
    assert_eq!(b.state(), State::HalfOpen);
    let _second = admit(&b); // the timed-out probe's slot is free
    advance(Duration::from_secs(1)).await;
    assert_eq!(b.allow().unwrap_err().state, State::Open);
    assert_eq!(
        log.probes().last().unwrap().timed_out,
        2,
        "the first timeout stayed counted"
    );
}

#[tokio::test(start_paused = true)]
async fn a_panicking_policy_does_not_poison_the_breaker_for_other_handles() {
    let (arm, armed) = armed();
    let (b, _log) = breaker(
        standard(1),
        move |_| {
            if armed.swap(false, Ordering::SeqCst) {
                panic!("trip failed");
            }
            false
        },
        |_| State::HalfOpen,
    );
    arm.store(true, Ordering::SeqCst);
    let other = b.clone();
    let handle = std::thread::spawn(move || call(&other, Outcome::Success));
    assert!(handle.join().is_err());
    for _ in 0..10 {
        assert!(call(&b, Outcome::Success));
    }
}
