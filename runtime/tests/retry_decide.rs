//! What follows an attempt: `retry::decide` (docs/client.md,
//! "Retries", "The pushback", "Telemetry").

use std::time::Duration;

use humus::retry::{Attempted, Budget, BudgetConfig, Decision, Next, Verdict, decide};
use proptest::prelude::*;
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);

fn attempted(verdict: Verdict) -> Attempted {
    let now = Instant::now();
    Attempted {
        verdict,
        retry_after: None,
        attempt: 1,
        max_attempts: 3,
        backoff: 40 * MS,
        backoff_max: Duration::from_secs(1),
        now,
        deadline: Some(now + Duration::from_secs(5)),
    }
}

fn drained() -> Budget {
    let b = Budget::default();
    while b.would_allow() {
        let _ = b.take();
    }
    b
}

#[test]
fn success_gives_back_and_succeeds() {
    let b = Budget::default();
    let _ = b.take();
    assert_eq!(decide(&b, &attempted(Verdict::Success)), Next::Succeeded);
    assert_eq!(b.tokens_milli(), 9100);
}

#[test]
fn success_succeeds_whatever_the_budget_attempts_or_deadline() {
    let b = drained();
    let mut a = attempted(Verdict::Success);
    a.attempt = 3;
    a.deadline = Some(a.now);
    assert_eq!(decide(&b, &a), Next::Succeeded);
}

#[test]
fn stop_stops_without_a_token() {
    let b = Budget::default();
    assert_eq!(decide(&b, &attempted(Verdict::Stop)), Next::Stopped);
    assert_eq!(b.tokens_milli(), 10_000);
}

#[test]
fn retry_takes_a_token_and_waits_the_backoff() {
    let b = Budget::default();
    let next = decide(&b, &attempted(Verdict::Retry));
    assert_eq!(next, Next::Retry { after: 40 * MS });
    assert_eq!(next.decision(), Decision::Retried);
    assert_eq!(b.tokens_milli(), 9000);
}

#[test]
fn wait_is_the_larger_of_backoff_and_pushback() {
    let b = Budget::default();
    let mut a = attempted(Verdict::Retry);
    a.retry_after = Some(300 * MS);
    assert_eq!(decide(&b, &a), Next::Retry { after: 300 * MS });
    a.retry_after = Some(10 * MS);
    assert_eq!(decide(&b, &a), Next::Retry { after: 40 * MS });
    a.retry_after = Some(Duration::ZERO);
    assert_eq!(decide(&b, &a), Next::Retry { after: 40 * MS });
}

#[test]
fn pushback_up_to_backoff_max_is_waited() {
    let b = Budget::default();
    let mut a = attempted(Verdict::Retry);
    a.retry_after = Some(a.backoff_max);
    assert_eq!(
        decide(&b, &a),
        Next::Retry {
            after: a.backoff_max
        }
    );
}

#[test]
fn pushback_longer_than_backoff_max_stops_and_still_takes_the_token() {
    // The attempt was classified Retry, so it counts against the budget
    // even though the client ends the call.
    let b = Budget::default();
    let mut a = attempted(Verdict::Retry);
    a.retry_after = Some(a.backoff_max + MS);
    assert_eq!(decide(&b, &a), Next::Stopped);
    assert_eq!(b.tokens_milli(), 9_000);
}

#[test]
fn budget_refusal_is_throttled_and_still_takes_the_token() {
    let b = drained();
    let before = b.tokens_milli();
    let next = decide(&b, &attempted(Verdict::Retry));
    assert_eq!(next, Next::Throttled);
    assert_eq!(next.decision(), Decision::Throttled);
    assert_eq!(b.tokens_milli(), before - 1000);
}

#[test]
fn last_attempt_is_exhausted_and_takes_a_token() {
    let b = Budget::default();
    let mut a = attempted(Verdict::Retry);
    a.attempt = 3;
    assert_eq!(decide(&b, &a), Next::Exhausted);
    assert_eq!(b.tokens_milli(), 9000);
}

#[test]
fn last_attempt_is_exhausted_even_when_the_budget_would_refuse() {
    // No retry was left to refuse: the call used every attempt.
    let mut a = attempted(Verdict::Retry);
    a.attempt = 3;
    assert_eq!(decide(&drained(), &a), Next::Exhausted);
}

#[test]
fn one_max_attempt_turns_retries_off() {
    let mut a = attempted(Verdict::Retry);
    a.max_attempts = 1;
    assert_eq!(decide(&Budget::default(), &a), Next::Exhausted);
    a.max_attempts = 0;
    assert_eq!(decide(&Budget::default(), &a), Next::Exhausted);
}

#[test]
fn deadline_passed_is_expired_without_a_token() {
    for verdict in [Verdict::Retry, Verdict::Stop] {
        let b = Budget::default();
        let mut a = attempted(verdict);
        a.deadline = Some(a.now);
        assert_eq!(decide(&b, &a), Next::Expired, "{verdict:?}");
        a.deadline = Some(a.now - MS);
        assert_eq!(decide(&b, &a), Next::Expired, "{verdict:?}");
        assert_eq!(b.tokens_milli(), 10_000);
    }
}

#[test]
fn wait_ending_at_or_after_the_deadline_is_not_started() {
    let b = Budget::default();
    let mut a = attempted(Verdict::Retry);
    a.deadline = Some(a.now + a.backoff);
    let next = decide(&b, &a);
    assert_eq!(next, Next::Expired);
    assert_eq!(next.decision(), Decision::Expired);
    // The retry was decided, so its token is taken.
    assert_eq!(b.tokens_milli(), 9000);
    a.retry_after = Some(200 * MS);
    a.deadline = Some(a.now + 100 * MS);
    assert_eq!(decide(&b, &a), Next::Expired);
}

#[test]
fn wait_ending_before_the_deadline_is_started() {
    let mut a = attempted(Verdict::Retry);
    a.deadline = Some(a.now + a.backoff + Duration::from_nanos(1));
    assert_eq!(
        decide(&Budget::default(), &a),
        Next::Retry { after: a.backoff }
    );
}

#[test]
fn no_deadline_never_expires() {
    let mut a = attempted(Verdict::Retry);
    a.deadline = None;
    a.backoff = Duration::MAX;
    a.backoff_max = Duration::MAX;
    assert_eq!(
        decide(&Budget::default(), &a),
        Next::Retry {
            after: Duration::MAX
        }
    );
}

#[test]
fn wait_too_long_for_an_instant_is_expired_not_a_panic() {
    let mut a = attempted(Verdict::Retry);
    a.backoff = Duration::MAX;
    a.backoff_max = Duration::MAX;
    assert_eq!(decide(&Budget::default(), &a), Next::Expired);
}

#[test]
fn every_next_maps_to_its_decision() {
    let cases = [
        (Next::Succeeded, "succeeded"),
        (Next::Stopped, "stopped"),
        (Next::Throttled, "throttled"),
        (Next::Exhausted, "exhausted"),
        (Next::Expired, "expired"),
        (Next::Retry { after: MS }, "retried"),
    ];
    for (next, name) in cases {
        assert_eq!(next.decision().to_string(), name);
    }
}

#[test]
fn a_failing_call_retries_until_its_attempts_run_out() {
    let b = Budget::default();
    let mut a = attempted(Verdict::Retry);
    let mut decisions = Vec::new();
    for attempt in 1..=3 {
        a.attempt = attempt;
        decisions.push(decide(&b, &a).decision());
    }
    assert_eq!(
        decisions,
        [Decision::Retried, Decision::Retried, Decision::Exhausted]
    );
    assert_eq!(b.tokens_milli(), 7000);
}

#[test]
fn retries_decided_together_cannot_overshoot_the_budget() {
    // Ten calls fail at once; each decides its retry before any wait ends.
    let b = Budget::default();
    let decisions: Vec<_> = (0..10)
        .map(|_| decide(&b, &attempted(Verdict::Retry)).decision())
        .collect();
    let retried = decisions
        .iter()
        .filter(|d| **d == Decision::Retried)
        .count();
    assert_eq!(retried, 4, "{decisions:?}");
    assert!(decisions[4..].iter().all(|d| *d == Decision::Throttled));
}

#[test]
fn while_the_dependency_fails_each_call_makes_one_attempt() {
    let b = Budget::new(BudgetConfig::DEFAULT).unwrap();
    let mut attempts = 0;
    for _call in 0..100 {
        let mut a = attempted(Verdict::Retry);
        loop {
            attempts += 1;
            match decide(&b, &a) {
                Next::Retry { .. } => a.attempt += 1,
                _ => break,
            }
        }
    }
    // The first call makes 3 attempts (10 → 7 tokens), the second 2 (its
    // retry leaves 6, its next is refused at 5), then one attempt per call.
    assert_eq!(attempts, 3 + 2 + 98);
}

fn verdicts() -> impl Strategy<Value = Verdict> {
    prop_oneof![
        Just(Verdict::Success),
        Just(Verdict::Retry),
        Just(Verdict::Stop)
    ]
}

proptest! {
    #[test]
    fn retry_waits_are_within_the_deadline_and_at_least_the_pushback(
        verdict in verdicts(),
        retry_after_ms in proptest::option::of(0u64..3000),
        attempt in 1u32..6,
        max_attempts in 0u32..6,
        backoff_ms in 0u64..3000,
        backoff_max_ms in 0u64..3000,
        deadline_ms in proptest::option::of(0u64..10_000),
        takes in 0usize..12,
    ) {
        let b = Budget::default();
        for _ in 0..takes {
            let _ = b.take();
        }
        let before = b.tokens_milli();
        let now = Instant::now();
        let a = Attempted {
            verdict,
            retry_after: retry_after_ms.map(Duration::from_millis),
            attempt,
            max_attempts,
            backoff: Duration::from_millis(backoff_ms),
            backoff_max: Duration::from_millis(backoff_max_ms),
            now,
            deadline: deadline_ms.map(|ms| now + Duration::from_millis(ms)),
        };
        let next = decide(&b, &a);
        match next {
            Next::Retry { after } => {
                prop_assert_eq!(verdict, Verdict::Retry);
                prop_assert!(attempt < max_attempts);
                prop_assert!(after >= a.backoff);
                prop_assert!(after >= a.retry_after.unwrap_or_default());
                prop_assert!(after <= a.backoff.max(a.backoff_max));
                if let Some(deadline) = a.deadline {
                    prop_assert!(now + after < deadline);
                }
                prop_assert_eq!(b.tokens_milli(), before.saturating_sub(1000));
            }
            Next::Succeeded => {
                prop_assert_eq!(verdict, Verdict::Success);
                prop_assert!(b.tokens_milli() >= before);
            }
            Next::Stopped if verdict == Verdict::Retry => {
                prop_assert!(a.retry_after.unwrap_or_default() > a.backoff_max);
                prop_assert_eq!(b.tokens_milli(), before.saturating_sub(1000));
            }
            Next::Stopped => prop_assert_eq!(b.tokens_milli(), before),
            Next::Throttled | Next::Exhausted => {
                prop_assert_eq!(verdict, Verdict::Retry);
                prop_assert_eq!(b.tokens_milli(), before.saturating_sub(1000));
            }
            Next::Expired => prop_assert!(a.deadline.is_some()),
        }
    }
}
