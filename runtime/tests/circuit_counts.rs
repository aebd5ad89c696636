//! What a breaker counts, and what its policy and observer see (docs/circuit-breaker.md:
//! "Counts and policy", `Ignored`, `Transition`).

mod circuit_support;

use std::time::Duration;

use circuit_support::{admit, breaker, call, config, consecutive, standard};
use humus::circuit::{Counts, Outcome, Policy, State};
use tokio::time::advance;

const OPEN_FOR: Duration = Duration::from_secs(10);

fn counts(successes: i64, failures: i64, cs: i64, cf: i64) -> Counts {
    Counts {
        successes,
        failures,
        consecutive_successes: cs,
        consecutive_failures: cf,
        timed_out: 0,
    }
}

#[tokio::test(start_paused = true)]
async fn successes_and_failures_cover_the_latest_window_results() {
    let (b, log) = breaker(
        config(3, 1, OPEN_FOR, OPEN_FOR),
        |_| false,
        |_| State::HalfOpen,
    );
    for outcome in [
        Outcome::Failure,
        Outcome::Success,
        Outcome::Success,
        Outcome::Success,
    ] {
        call(&b, outcome);
    }
    call(&b, Outcome::Failure);
    assert_eq!(
        log.trips(),
        [
            counts(0, 1, 0, 1),
            counts(1, 1, 1, 0),
            counts(2, 1, 2, 0),
            counts(3, 0, 3, 0), // the first failure left the window
            counts(2, 1, 0, 1),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn runs_are_not_bounded_by_the_window() {
    let (b, log) = consecutive(config(2, 1, OPEN_FOR, OPEN_FOR), 5);
    for _ in 0..4 {
        call(&b, Outcome::Failure);
    }
    assert_eq!(log.trips().last(), Some(&counts(0, 2, 0, 4)));
    assert_eq!(b.state(), State::Closed);
    call(&b, Outcome::Failure);
    assert_eq!(
        b.state(),
        State::Open,
        "five in a row, with a window of two"
    );
    assert_eq!(log.transitions()[0].counts, counts(0, 2, 0, 5));
}

#[tokio::test(start_paused = true)]
async fn counts_reset_on_every_change_of_state() {
    let (b, log) = breaker(
        config(10, 2, OPEN_FOR, Duration::from_secs(1)),
        |c| c.failures >= 2,
        |c| {
            if c.successes >= 2 {
                State::Closed
            } else if c.failures >= 2 {
                State::Open
            } else {
                State::HalfOpen
            }
        },
    );
    call(&b, Outcome::Success);
    call(&b, Outcome::Failure);
    call(&b, Outcome::Failure);
    let t = log.transitions();
    assert_eq!(
        t[0].counts,
        counts(1, 2, 0, 2),
        "the final counts of closed"
    );

    advance(OPEN_FOR).await;
    let hung = admit(&b);
    advance(Duration::from_secs(1)).await;
    call(&b, Outcome::Failure);
    assert_eq!(
        log.probes(),
        [
            Counts {
                timed_out: 1,
                ..Counts::default()
            },
            Counts {
                failures: 1,
                consecutive_failures: 1,
                timed_out: 1,
                ..Counts::default()
            },
        ],
        "half-open starts from zero"
    );
    call(&b, Outcome::Success);
    call(&b, Outcome::Success);
    assert_eq!(b.state(), State::Closed);
    drop(hung);

    call(&b, Outcome::Success);
    assert_eq!(
        log.trips().last(),
        Some(&counts(1, 0, 1, 0)),
        "closed starts from zero"
    );
    let moves: Vec<_> = log.transitions().iter().map(|t| (t.to, t.counts)).collect();
    assert_eq!(
        moves,
        [
            (State::Open, counts(1, 2, 0, 2)),
            (State::HalfOpen, Counts::default()),
            (
                State::Closed,
                Counts {
                    successes: 2,
                    failures: 1,
                    consecutive_successes: 2,
                    timed_out: 1,
                    ..Counts::default()
                }
            ),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn ignored_counts_nothing_extends_no_run_and_asks_nothing() {
    let (b, log) = consecutive(standard(1), 3);
    call(&b, Outcome::Failure);
    call(&b, Outcome::Ignored);
    call(&b, Outcome::Failure);
    assert_eq!(
        log.trips(),
        [counts(0, 1, 0, 1), counts(0, 2, 0, 2)],
        "no run ended or grew"
    );
    call(&b, Outcome::Ignored);
    call(&b, Outcome::Failure);
    assert_eq!(b.state(), State::Open);

    advance(OPEN_FOR).await;
    let probe = admit(&b);
    assert!(b.allow().is_err());
    assert!(probe.done(Outcome::Ignored), "current, though not counted");
    assert!(log.probes().is_empty(), "probe is not asked");
    let next = admit(&b); // the slot is free
    assert!(next.done(Outcome::Success));
    assert_eq!(log.probes(), [counts(1, 0, 1, 0)]);
}

#[tokio::test(start_paused = true)]
async fn open_to_half_open_carries_zero_counts() {
    let (b, log) = consecutive(standard(1), 1);
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    assert!(b.allow().is_ok());
    let t = log.transitions();
    assert_eq!(
        (t[1].from, t[1].to, t[1].counts),
        (State::Open, State::HalfOpen, Counts::default())
    );
    assert_eq!(t.iter().map(|t| t.generation).collect::<Vec<_>>(), [1, 2]);
}

#[test]
fn consecutive_policy() {
    let p = Policy::consecutive(2);
    assert!(!p.trip(&counts(5, 1, 0, 1)));
    assert!(p.trip(&counts(0, 2, 0, 2)));
    assert_eq!(p.probe(&counts(1, 0, 1, 0)), State::HalfOpen);
    assert_eq!(p.probe(&counts(2, 0, 2, 0)), State::Closed);
    assert_eq!(p.probe(&counts(1, 1, 0, 1)), State::Open);
    let timed_out = Counts {
        timed_out: 3,
        ..Counts::default()
    };
    assert_eq!(p.probe(&timed_out), State::HalfOpen);
}

#[test]
fn consecutive_or_half_policy_is_the_clients_default_shape() {
    let p = Policy::consecutive_or_half(5, 20, 3);
    assert!(!p.trip(&counts(0, 4, 0, 4)));
    assert!(p.trip(&counts(0, 5, 0, 5)), "five in a row");
    assert!(p.trip(&counts(10, 10, 1, 0)), "half of 20");
    assert!(!p.trip(&counts(11, 9, 0, 1)), "less than half of 20");
    assert!(
        !p.trip(&counts(9, 10, 0, 1)),
        "19 results are not enough for the ratio"
    );
    assert!(p.trip(&counts(0, 20, 0, 2)));
    assert_eq!(p.probe(&counts(2, 0, 2, 0)), State::HalfOpen);
    assert_eq!(p.probe(&counts(3, 0, 3, 0)), State::Closed);
    assert_eq!(p.probe(&counts(2, 1, 0, 1)), State::Open);
    let timed_out = Counts {
        timed_out: 1,
        ..Counts::default()
    };
    assert_eq!(p.probe(&timed_out), State::HalfOpen, "a timeout is neither");
    assert!(format!("{p:?}").starts_with("Policy"));
    let clone = p.clone();
    assert!(clone.trip(&counts(0, 5, 0, 5)));
}

/// The counts are signed, so a policy may subtract them: with unsigned
/// counts `failures - successes` panicked inside `done` in a debug build,
/// and in a release build wrapped and opened the breaker after one success.
#[tokio::test(start_paused = true)]
async fn a_policy_may_subtract_counts() {
    let (b, log) = breaker(
        standard(1),
        |c| c.failures - c.successes >= 5,
        |_| State::HalfOpen,
    );
    assert!(call(&b, Outcome::Success));
    assert_eq!(b.state(), State::Closed, "one success opens nothing");
    for _ in 0..5 {
        call(&b, Outcome::Failure);
    }
    assert_eq!(b.state(), State::Closed, "5 failures less 1 success");
    call(&b, Outcome::Failure);
    assert_eq!(b.state(), State::Open);
    assert_eq!(log.transitions()[0].counts, counts(1, 6, 0, 6));

    let policy = Policy::new(|c| c.failures - c.successes >= 5, |_| State::HalfOpen);
    assert!(!policy.trip(&counts(20, 0, 20, 0)));
}
