//! The breaker's states and the moves between them, on paused tokio time
//! (docs/circuit-breaker.md: "States", "Time", "Late results", "Probes").

mod circuit_support;

use std::time::Duration;

use circuit_support::{NS, admit, breaker, call, config, consecutive, standard};
use humus::circuit::{Outcome, Rejected, State};
use tokio::time::advance;

const OPEN_FOR: Duration = Duration::from_secs(10);
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

#[tokio::test(start_paused = true)]
async fn closed_admits_every_call_and_trip_decides_after_each_success_or_failure() {
    let (b, log) = consecutive(standard(1), 3);
    // Admits every call, also with many in flight.
    let held: Vec<_> = (0..100).map(|_| admit(&b)).collect();
    assert!(log.trips().is_empty(), "admitting asks nothing");
    for (i, ticket) in held.into_iter().enumerate() {
        let outcome = if i % 2 == 0 {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        assert!(ticket.done(outcome));
    }
    assert_eq!(log.trips().len(), 100, "trip is asked after every result");
    assert_eq!(b.state(), State::Closed);

    // Ignored asks nothing.
    call(&b, Outcome::Ignored);
    assert_eq!(log.trips().len(), 100);

    call(&b, Outcome::Failure);
    call(&b, Outcome::Failure);
    assert_eq!(b.state(), State::Closed);
    call(&b, Outcome::Failure);
    assert_eq!(b.state(), State::Open, "trip decided");
    assert_eq!(log.moves(), [(State::Closed, State::Open)]);
}

#[tokio::test(start_paused = true)]
async fn open_rejects_until_open_for_has_passed_to_the_nanosecond() {
    let (b, log) = consecutive(standard(1), 1);
    call(&b, Outcome::Failure);

    let rejected = b.allow().unwrap_err();
    assert_eq!(
        rejected,
        Rejected {
            state: State::Open,
            retry_after: OPEN_FOR
        }
    );

    advance(OPEN_FOR - NS).await;
    assert_eq!(b.state(), State::Open);
    let rejected = b.allow().unwrap_err();
    assert_eq!(
        rejected,
        Rejected {
            state: State::Open,
            retry_after: NS
        }
    );
    assert_eq!(log.moves(), [(State::Closed, State::Open)]);

    advance(NS).await;
    assert_eq!(b.state(), State::HalfOpen);
    let probe = admit(&b);
    assert_eq!(
        log.moves(),
        [(State::Closed, State::Open), (State::Open, State::HalfOpen)],
        "the first allow after open_for makes it half-open"
    );
    drop(probe);
}

#[tokio::test(start_paused = true)]
async fn the_first_done_after_open_for_makes_it_half_open() {
    let (b, log) = consecutive(standard(1), 1);
    let slow = admit(&b);
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    assert_eq!(log.moves(), [(State::Closed, State::Open)]);
    // A late result: discarded, but the call still makes the due change.
    assert!(!slow.done(Outcome::Success));
    assert_eq!(
        log.moves(),
        [(State::Closed, State::Open), (State::Open, State::HalfOpen)]
    );
    assert!(log.probes().is_empty(), "the late result counted nothing");
}

#[tokio::test(start_paused = true)]
async fn a_change_made_late_is_made_as_of_the_moment_it_fell_due() {
    // A probe times out at t0 + 1 s, and the policy reopens then: open
    // until t0 + 11 s, however late the breaker notices.
    let (b, log) = breaker(
        standard(1),
        |c| c.failures > 0,
        |c| {
            if c.timed_out > 0 {
                State::Open
            } else {
                State::HalfOpen
            }
        },
    );
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    let _hung = admit(&b); // t0
    advance(Duration::from_secs(3)).await; // t0 + 3 s
    let rejected = b.allow().unwrap_err();
    assert_eq!(
        rejected,
        Rejected {
            state: State::Open,
            retry_after: Duration::from_secs(8)
        },
        "open as of t0 + 1 s, not t0 + 3 s"
    );
    assert_eq!(log.transitions().last().unwrap().counts.timed_out, 1);

    // Both due changes at once: the open period ends at t0 + 11 s; noticed
    // at t0 + 20 s, the breaker is half-open and a probe goes.
    advance(Duration::from_secs(17)).await;
    assert_eq!(b.state(), State::HalfOpen);
    let probe = admit(&b);
    assert_eq!(
        log.moves()[2..],
        [
            (State::HalfOpen, State::Open),
            (State::Open, State::HalfOpen)
        ]
    );
    drop(probe);
}

#[tokio::test(start_paused = true)]
async fn half_open_admits_at_most_probes_calls_at_once() {
    let (b, _log) = breaker(standard(3), |c| c.failures > 0, |_| State::HalfOpen);
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    let probes: Vec<_> = (0..3).map(|_| admit(&b)).collect();
    let rejected = b.allow().unwrap_err();
    assert_eq!(
        rejected,
        Rejected {
            state: State::HalfOpen,
            retry_after: Duration::ZERO
        }
    );
    assert_eq!(
        rejected.to_string(),
        "circuit: call rejected: half-open, and every probe slot is taken"
    );
    let mut probes = probes.into_iter();
    assert!(probes.next().unwrap().done(Outcome::Success));
    let again = admit(&b); // the freed slot
    assert!(b.allow().is_err());
    drop((again, probes));
}

#[tokio::test(start_paused = true)]
async fn probe_decides_after_each_probe_result() {
    // Closes after two good probes; reopens on a failure.
    let (b, log) = consecutive(standard(2), 2);
    call(&b, Outcome::Failure);
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;

    assert!(call(&b, Outcome::Success));
    assert_eq!(b.state(), State::HalfOpen, "probe said keep probing");
    assert!(call(&b, Outcome::Success));
    assert_eq!(b.state(), State::Closed, "probe said close");
    assert_eq!(log.probes().len(), 2);
    let closed = log.transitions()[2];
    assert_eq!(
        (closed.from, closed.to, closed.counts.successes),
        (State::HalfOpen, State::Closed, 2)
    );

    call(&b, Outcome::Failure);
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    assert!(call(&b, Outcome::Failure));
    assert_eq!(b.state(), State::Open, "probe said reopen");
    assert_eq!(
        b.allow().unwrap_err().retry_after,
        OPEN_FOR,
        "a new open period, from the failed probe"
    );
}

#[tokio::test(start_paused = true)]
async fn a_probe_holds_its_slot_for_at_most_probe_timeout() {
    let (b, log) = consecutive(standard(1), 1);
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    let hung = admit(&b);

    advance(PROBE_TIMEOUT - NS).await;
    assert_eq!(b.allow().unwrap_err().state, State::HalfOpen, "still held");
    assert!(log.probes().is_empty());

    advance(NS).await;
    let next = admit(&b); // the slot is free again
    let asked = log.probes();
    assert_eq!(asked.len(), 1, "probe decides after the timeout");
    assert_eq!(asked[0].timed_out, 1);
    assert_eq!((asked[0].successes, asked[0].failures), (0, 0));

    // The late result of the timed-out probe still counts: the state has
    // not changed.
    assert!(hung.done(Outcome::Success));
    assert_eq!(b.state(), State::Closed, "the slow probe closed it");
    assert_eq!(log.transitions().last().unwrap().counts.timed_out, 1);
    assert!(!next.done(Outcome::Success), "its state has ended");
}

#[tokio::test(start_paused = true)]
async fn a_probes_result_comes_after_the_timeouts_due_before_it() {
    // Two probes: the first hangs past its timeout; the second's result,
    // settled after that, is counted after the timeout, which the policy
    // hears of first (done makes what time made due before it counts).
    let (b, log) = breaker(standard(2), |c| c.failures > 0, |_| State::HalfOpen);
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    let hung = admit(&b); // t0
    advance(PROBE_TIMEOUT / 2).await;
    let second = admit(&b); // t0 + 0.5 s
    advance(PROBE_TIMEOUT / 2).await; // t0 + 1 s: the first is due
    assert!(second.done(Outcome::Success));
    let asked = log.probes();
    assert_eq!(asked.len(), 2, "the timeout, then the success");
    assert_eq!((asked[0].timed_out, asked[0].successes), (1, 0));
    assert_eq!((asked[1].timed_out, asked[1].successes), (1, 1));
    // Both slots are free: the timed-out probe's and the settled one's.
    let probes = (admit(&b), admit(&b));
    assert!(b.allow().is_err());
    drop((hung, probes));
}

#[tokio::test(start_paused = true)]
async fn each_probe_times_out_at_its_own_deadline_whatever_was_checked_before() {
    // The breaker checks the time against a bound below every probe's
    // deadline and computes a deadline only past it: the bound set when no
    // probe was held (t0 + 1 s) and the one set from an older probe must
    // neither time out a probe admitted later early nor let it hold its
    // slot past its own deadline.
    let (b, log) = breaker(standard(2), |c| c.failures > 0, |_| State::HalfOpen);
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    assert!(call(&b, Outcome::Success)); // t0, with no probe held
    advance(PROBE_TIMEOUT / 2).await;
    let hung = admit(&b); // t0 + 0.5 s: due at t0 + 1.5 s
    advance(PROBE_TIMEOUT / 2).await; // t0 + 1 s
    assert!(call(&b, Outcome::Success), "the other slot");
    advance(PROBE_TIMEOUT / 2 - NS).await; // t0 + 1.5 s - 1 ns
    assert!(call(&b, Outcome::Success));
    let asked = log.probes();
    assert_eq!(asked.len(), 3, "no timeout yet: {asked:?}");
    assert_eq!(asked[2].timed_out, 0);
    let held = admit(&b); // t0 + 1.5 s - 1 ns: due at t0 + 2.5 s - 1 ns
    assert_eq!(b.allow().unwrap_err().state, State::HalfOpen, "both held");

    advance(NS).await; // t0 + 1.5 s
    let freed = admit(&b); // the slot of the probe timed out now
    let asked = log.probes();
    assert_eq!(asked.len(), 4, "the timeout: {asked:?}");
    assert_eq!(asked[3].timed_out, 1);
    drop(freed);

    // The next deadline is the younger probe's, not one from the bound.
    advance(PROBE_TIMEOUT - 2 * NS).await; // t0 + 2.5 s - 2 ns
    let other = admit(&b);
    assert_eq!(log.probes().len(), 4, "the younger probe still holds");
    assert_eq!(b.allow().unwrap_err().state, State::HalfOpen);
    advance(NS).await; // t0 + 2.5 s - 1 ns
    let freed = admit(&b);
    let asked = log.probes();
    assert_eq!(asked.len(), 5, "its timeout: {asked:?}");
    assert_eq!(asked[4].timed_out, 2);
    drop((hung, held, other, freed));
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_probe_is_discarded_once_the_state_changed() {
    let (b, log) = consecutive(standard(1), 1);
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    let hung = admit(&b);
    advance(PROBE_TIMEOUT).await;
    let next = admit(&b);
    assert!(next.done(Outcome::Failure));
    assert_eq!(b.state(), State::Open);
    assert!(
        !hung.done(Outcome::Success),
        "late: its half-open period ended"
    );
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        log.probes().len(),
        2,
        "timeout, then the failure; nothing for the late result"
    );
}

#[tokio::test(start_paused = true)]
async fn a_late_result_never_moves_a_newer_state() {
    let (b, log) = consecutive(standard(1), 2);
    let slow_failure = admit(&b);
    let slow_success = admit(&b);
    call(&b, Outcome::Failure);
    call(&b, Outcome::Failure);
    assert_eq!(b.state(), State::Open);
    assert!(!slow_failure.done(Outcome::Failure));
    assert_eq!(log.trips().len(), 2);

    advance(OPEN_FOR).await;
    let probe = admit(&b);
    assert!(!slow_success.done(Outcome::Success));
    assert!(
        log.probes().is_empty(),
        "a result from closed is not a probe's"
    );
    assert!(probe.done(Outcome::Success));
    assert_eq!(b.state(), State::HalfOpen, "one good probe of two");

    // A probe of an earlier half-open period: its slot index is reused by
    // a newer probe, which it must not free.
    let old = admit(&b);
    assert!(old.done(Outcome::Success));
    assert_eq!(b.state(), State::Closed);
    call(&b, Outcome::Failure);
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    let old_probe = admit(&b);
    call_failure_then_wait(&b, &old_probe).await;
    let newer = admit(&b); // takes the slot index `old_probe` had
    old_probe.release();
    assert!(b.allow().is_err(), "the newer probe still holds its slot");
    assert!(newer.done(Outcome::Success));
}

/// Reopens the breaker while `_probe` is in flight (its slot freed by the
/// move), and waits until it is half-open again.
async fn call_failure_then_wait(b: &humus::circuit::Breaker, _probe: &humus::circuit::Ticket<'_>) {
    advance(PROBE_TIMEOUT).await;
    let failing = admit(b); // the timeout freed the slot
    assert!(failing.done(Outcome::Failure));
    assert_eq!(b.state(), State::Open);
    advance(OPEN_FOR).await;
}

#[tokio::test(start_paused = true)]
async fn state_is_a_pure_read() {
    let (b, log) = breaker(
        standard(1),
        |c| c.failures > 0,
        |c| {
            if c.timed_out > 0 {
                State::Open
            } else {
                State::HalfOpen
            }
        },
    );
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    // Half-open with no traffic, and no transition made.
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(log.moves(), [(State::Closed, State::Open)]);

    let _hung = admit(&b);
    advance(PROBE_TIMEOUT * 2).await;
    // The probe timed out; the policy would reopen, but state() asks it
    // nothing.
    let asked = log.probes().len();
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(log.probes().len(), asked);
    assert_eq!(log.transitions().len(), 2);
    // The next call makes the change.
    assert_eq!(b.allow().unwrap_err().state, State::Open);
    assert_eq!(b.state(), State::Open);
}

#[tokio::test(start_paused = true)]
async fn rejected_renders_the_remaining_time() {
    let (b, _log) = consecutive(config(10, 1, OPEN_FOR, PROBE_TIMEOUT), 1);
    call(&b, Outcome::Failure);
    advance(Duration::from_millis(5800)).await;
    let rejected = b.allow().unwrap_err();
    assert_eq!(rejected.retry_after, Duration::from_millis(4200));
    assert_eq!(
        rejected.to_string(),
        "circuit: call rejected: open for another 4.2s"
    );
    let error: &dyn std::error::Error = &rejected;
    assert!(error.source().is_none());

    // The message rounds up to the millisecond; `retry_after` is exact.
    advance(Duration::from_nanos(136_786)).await;
    let rejected = b.allow().unwrap_err();
    assert_eq!(rejected.retry_after, Duration::new(4, 199_863_214));
    assert_eq!(
        rejected.to_string(),
        "circuit: call rejected: open for another 4.2s"
    );
    advance(Duration::from_millis(199)).await;
    assert_eq!(
        b.allow().unwrap_err().to_string(),
        "circuit: call rejected: open for another 4.001s"
    );

    advance(Duration::from_millis(4001) - Duration::from_nanos(136_786) - NS).await;
    let rejected = b.allow().unwrap_err();
    assert_eq!(rejected.retry_after, NS);
    assert_eq!(
        rejected.to_string(),
        "circuit: call rejected: open for another 1ms",
        "never less than is left"
    );
}

#[tokio::test(start_paused = true)]
async fn rejected_rounds_a_fresh_open_period_to_the_millisecond() {
    let (b, _log) = consecutive(config(10, 1, OPEN_FOR, PROBE_TIMEOUT), 1);
    call(&b, Outcome::Failure);
    advance(Duration::from_nanos(136_786)).await;
    let rejected = b.allow().unwrap_err();
    assert_eq!(rejected.retry_after, Duration::new(9, 999_863_214));
    assert_eq!(
        rejected.to_string(),
        "circuit: call rejected: open for another 10s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_very_long_open_period_is_measured_exactly() {
    // Beyond what the lock-free rejection represents (2^34 s).
    let open_for = Duration::from_secs(1 << 35);
    let (b, _log) = consecutive(config(10, 1, open_for, PROBE_TIMEOUT), 1);
    call(&b, Outcome::Failure);
    assert_eq!(b.allow().unwrap_err().retry_after, open_for);
    advance(open_for - NS).await;
    assert_eq!(b.allow().unwrap_err().retry_after, NS);
    advance(NS).await;
    assert!(b.allow().is_ok());
}

#[tokio::test(start_paused = true)]
async fn an_open_period_too_long_for_the_clock_never_ends() {
    let (b, _log) = consecutive(config(10, 1, Duration::MAX, PROBE_TIMEOUT), 1);
    call(&b, Outcome::Failure);
    advance(Duration::from_secs(1 << 40)).await;
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.allow().unwrap_err().retry_after, Duration::MAX);
    // Said in words, not as 18446744073709551615.999999999s.
    assert_eq!(
        b.allow().unwrap_err().to_string(),
        "circuit: call rejected: open with no end (its open_for is past what the clock can count)"
    );
}

#[tokio::test(start_paused = true)]
async fn a_probe_timeout_too_long_for_the_clock_never_ends() {
    let (b, log) = consecutive(config(10, 1, OPEN_FOR, Duration::MAX), 1);
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    let _hung = admit(&b);
    advance(Duration::from_secs(1 << 40)).await;
    assert_eq!(b.allow().unwrap_err().state, State::HalfOpen);
    assert!(log.probes().is_empty());
}
