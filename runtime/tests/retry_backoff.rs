//! The backoff schedule: full jitter over `[0, min(max, base · 2^(n-1))]`
//! (docs/client.md, "Retries").

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use humus::retry::Exponential;
use proptest::prelude::*;

const MS: Duration = Duration::from_millis(1);

fn schedule() -> Exponential {
    Exponential::new(100 * MS, Duration::from_secs(2))
}

#[test]
fn ceiling_doubles_from_base_up_to_max() {
    let s = schedule();
    let ceilings: Vec<_> = (1..=7).map(|n| s.ceiling(n)).collect();
    assert_eq!(
        ceilings,
        [100, 200, 400, 800, 1600, 2000, 2000].map(|ms| ms * MS)
    );
}

#[test]
fn retry_zero_counts_as_the_first() {
    assert_eq!(schedule().ceiling(0), 100 * MS);
}

#[test]
fn huge_retry_numbers_do_not_overflow() {
    let s = schedule();
    for n in [31, 32, 63, 64, 65, 127, 128, 129, 1000, u32::MAX] {
        assert_eq!(s.ceiling(n), Duration::from_secs(2), "retry {n}");
        assert!(s.backoff(n) <= Duration::from_secs(2));
    }
    let huge = Exponential::new(Duration::MAX, Duration::MAX).with_source(|hi| hi);
    assert_eq!(huge.ceiling(u32::MAX), Duration::MAX);
    // Drawn in u64 nanoseconds: the largest draw is u64::MAX of them.
    assert_eq!(huge.backoff(u32::MAX), Duration::from_nanos(u64::MAX));
}

#[test]
fn max_below_base_caps_every_wait() {
    let s = Exponential::new(Duration::from_secs(1), 300 * MS).with_source(|hi| hi);
    assert_eq!(s.ceiling(1), 300 * MS);
    assert_eq!(s.backoff(1), 300 * MS);
}

#[test]
fn zero_base_never_waits() {
    let calls = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&calls);
    let s = Exponential::new(Duration::ZERO, Duration::from_secs(1)).with_source(move |hi| {
        seen.fetch_add(1, Ordering::Relaxed);
        hi
    });
    assert_eq!(s.backoff(5), Duration::ZERO);
    assert_eq!(calls.load(Ordering::Relaxed), 0, "nothing to draw from");
}

#[test]
fn draw_spans_zero_to_the_ceiling_inclusive() {
    let s = schedule().with_source(|_| 0);
    assert_eq!(s.backoff(3), Duration::ZERO);
    let s = schedule().with_source(|hi| hi);
    assert_eq!(s.backoff(3), 400 * MS);
    let s = schedule().with_source(|hi| hi / 4);
    assert_eq!(s.backoff(2), 50 * MS);
}

#[test]
fn source_gets_the_ceiling_in_nanoseconds() {
    let last = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&last);
    let s = schedule().with_source(move |hi| {
        seen.store(hi, Ordering::Relaxed);
        0
    });
    let _ = s.backoff(2);
    assert_eq!(last.load(Ordering::Relaxed), 200_000_000);
}

#[test]
fn source_out_of_range_counts_as_the_ceiling() {
    let s = schedule().with_source(|_| u64::MAX);
    assert_eq!(s.backoff(1), 100 * MS);
}

#[test]
fn default_source_is_jittered() {
    let s = Exponential::new(Duration::from_secs(1), Duration::from_secs(1));
    let draws: Vec<_> = (0..64).map(|_| s.backoff(1)).collect();
    assert!(draws.iter().all(|d| *d <= Duration::from_secs(1)));
    // 64 equal draws from a billion values is not jitter.
    assert!(draws.iter().any(|d| *d != draws[0]));
}

#[test]
fn accessors_and_debug() {
    let s = schedule();
    assert_eq!(s.base(), 100 * MS);
    assert_eq!(s.max(), Duration::from_secs(2));
    assert_eq!(format!("{s:?}"), "Exponential { base: 100ms, max: 2s, .. }");
}

proptest! {
    #[test]
    fn backoff_is_always_within_its_bounds(
        base_ns in 0u64..=10_000_000_000,
        max_ns in 0u64..=100_000_000_000,
        retry in any::<u32>(),
        pick in any::<u64>(),
    ) {
        let base = Duration::from_nanos(base_ns);
        let max = Duration::from_nanos(max_ns);
        let s = Exponential::new(base, max).with_source(move |hi| pick % (hi + 1));
        let ceiling = s.ceiling(retry);
        prop_assert!(ceiling <= max);
        let exact = base
            .checked_mul(1u32.checked_shl(retry.saturating_sub(1)).unwrap_or(u32::MAX))
            .unwrap_or(Duration::MAX);
        if retry <= 32 {
            prop_assert_eq!(ceiling, exact.min(max));
        }
        let wait = s.backoff(retry);
        prop_assert!(wait <= ceiling);
        let default_wait = Exponential::new(base, max).backoff(retry);
        prop_assert!(default_wait <= ceiling);
    }

    #[test]
    fn ceiling_never_shrinks_as_retries_grow(
        base_ns in 0u64..=10_000_000_000,
        max_ns in 0u64..=100_000_000_000,
        retry in 1u32..200,
    ) {
        let s = Exponential::new(Duration::from_nanos(base_ns), Duration::from_nanos(max_ns));
        prop_assert!(s.ceiling(retry) <= s.ceiling(retry + 1));
    }
}
