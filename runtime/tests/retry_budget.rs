//! The retry budget: gRFC A6 retry throttling (docs/client.md,
//! "Retries").

use std::sync::{Arc, Barrier};
use std::thread;

use humus::retry::{
    Budget, BudgetConfig, BudgetError, MAX_TOKENS_LIMIT, check_max_tokens, check_token_ratio,
};
use proptest::prelude::*;

fn budget(max_tokens: u32, token_ratio: f64) -> Budget {
    Budget::new(BudgetConfig {
        max_tokens,
        token_ratio,
    })
    .unwrap()
}

#[test]
fn default_is_grfc_a6_example() {
    assert_eq!(
        BudgetConfig::default(),
        BudgetConfig {
            max_tokens: 10,
            token_ratio: 0.1
        }
    );
    let b = Budget::default();
    assert_eq!(b.max_tokens(), 10);
    assert_eq!(b.tokens(), 10.0);
    assert_eq!(b.token_ratio_milli(), 100);
}

#[test]
fn starts_full() {
    assert_eq!(budget(7, 0.5).tokens_milli(), 7000);
}

#[test]
fn retries_stop_while_half_or_fewer_tokens_are_left() {
    // 10 tokens: the takes leave 9, 8, 7, 6 (allowed), then 5 (half: refused).
    let b = Budget::default();
    for left in [9, 8, 7, 6] {
        assert!(b.take(), "a take leaving {left} tokens is allowed");
        assert_eq!(b.tokens_milli(), left * 1000);
    }
    assert!(!b.take(), "a take leaving half the tokens is refused");
    assert_eq!(b.tokens_milli(), 5000);
}

#[test]
fn refused_take_still_takes_a_token() {
    let b = Budget::default();
    for _ in 0..5 {
        let _ = b.take();
    }
    assert!(!b.take());
    assert_eq!(b.tokens_milli(), 4000);
}

#[test]
fn take_never_goes_below_zero() {
    let b = budget(2, 0.1);
    for _ in 0..5 {
        assert!(!b.take());
    }
    assert_eq!(b.tokens_milli(), 0);
}

#[test]
fn each_success_gives_back_the_ratio_exactly() {
    let b = Budget::default();
    for _ in 0..5 {
        let _ = b.take();
    }
    assert_eq!(b.tokens_milli(), 5000);
    // Ten tenths are exactly one token: fixed point, no float drift.
    for _ in 0..10 {
        b.give_back();
    }
    assert_eq!(b.tokens_milli(), 6000);
    assert_eq!(b.tokens(), 6.0);
}

#[test]
fn retries_resume_once_above_half_again() {
    let b = Budget::default();
    for _ in 0..5 {
        let _ = b.take();
    }
    assert!(!b.would_allow());
    // 5 → 6.1 tokens: a take leaves 5.1, more than half.
    for _ in 0..11 {
        b.give_back();
    }
    assert!(b.would_allow());
    assert!(b.take());
    assert_eq!(b.tokens_milli(), 5100);
}

#[test]
fn give_back_never_goes_above_max() {
    let b = budget(3, 0.7);
    b.give_back();
    assert_eq!(b.tokens_milli(), 3000);
    let _ = b.take();
    b.give_back();
    b.give_back();
    assert_eq!(b.tokens_milli(), 3000);
}

#[test]
fn clones_share_the_tokens() {
    let a = Budget::default();
    let b = a.clone();
    let _ = a.take();
    assert_eq!(b.tokens_milli(), 9000);
    b.give_back();
    assert_eq!(a.tokens_milli(), 9100);
}

#[test]
fn smallest_ratio_is_one_thousandth() {
    let b = budget(1, 0.001);
    let _ = b.take();
    b.give_back();
    assert_eq!(b.tokens_milli(), 1);
}

#[test]
fn one_token_budget_never_allows_a_retry() {
    // Any take leaves at most 0 tokens, not more than half of 1.
    let b = budget(1, 1.0);
    assert!(!b.take());
    b.give_back();
    assert!(!b.take());
}

#[test]
fn max_tokens_bounds() {
    assert_eq!(
        check_max_tokens(0),
        Err(BudgetError::MaxTokensOutOfRange(0))
    );
    assert_eq!(check_max_tokens(1), Ok(()));
    assert_eq!(check_max_tokens(1000), Ok(()));
    assert_eq!(MAX_TOKENS_LIMIT, 1000);
    assert_eq!(
        check_max_tokens(1001),
        Err(BudgetError::MaxTokensOutOfRange(1001))
    );
    assert_eq!(
        check_max_tokens(u32::MAX),
        Err(BudgetError::MaxTokensOutOfRange(u32::MAX))
    );
}

#[test]
fn token_ratio_accepts_up_to_three_decimals() {
    for ok in [0.001, 0.007, 0.1, 0.25, 0.333, 1.0, 2.5, 999.999, 1e12] {
        assert_eq!(check_token_ratio(ok), Ok(()), "{ok}");
    }
}

#[test]
fn token_ratio_rejects_more_than_three_decimals() {
    for bad in [0.0001, 0.1234, 0.0015, 1.0005, 1e-12] {
        assert_eq!(
            check_token_ratio(bad),
            Err(BudgetError::RatioTooPrecise(bad)),
            "{bad}"
        );
    }
}

#[test]
fn token_ratio_rejects_zero_and_negatives() {
    for bad in [0.0, -0.0, -0.1, -5.0] {
        assert_eq!(
            check_token_ratio(bad),
            Err(BudgetError::RatioNotPositive(bad))
        );
    }
}

#[test]
fn token_ratio_rejects_nan_and_infinities() {
    assert!(matches!(
        check_token_ratio(f64::NAN),
        Err(BudgetError::RatioNotFinite(_))
    ));
    for bad in [f64::INFINITY, f64::NEG_INFINITY] {
        assert_eq!(
            check_token_ratio(bad),
            Err(BudgetError::RatioNotFinite(bad))
        );
    }
}

#[test]
fn errors_say_what_is_wrong_without_naming_the_field() {
    let cases = [
        (
            BudgetError::MaxTokensOutOfRange(0),
            "must be from 1 to 1000 tokens, got 0",
            "max_tokens",
        ),
        (
            BudgetError::RatioNotPositive(-0.5),
            "must be greater than 0, got -0.5",
            "token_ratio",
        ),
        (
            BudgetError::RatioTooPrecise(0.1234),
            "must have at most 3 decimal places, got 0.1234",
            "token_ratio",
        ),
        (
            BudgetError::RatioNotFinite(f64::INFINITY),
            "must be a finite number, got inf",
            "token_ratio",
        ),
    ];
    for (err, message, field) in cases {
        assert_eq!(err.to_string(), message);
        assert!(!err.to_string().contains(field));
        assert_eq!(err.field(), field);
    }
}

#[test]
fn new_checks_both_fields() {
    let bad_max = Budget::new(BudgetConfig {
        max_tokens: 0,
        token_ratio: 0.1,
    })
    .unwrap_err();
    assert_eq!(bad_max.field(), "max_tokens");
    let bad_ratio = Budget::new(BudgetConfig {
        max_tokens: 10,
        token_ratio: 0.0,
    })
    .unwrap_err();
    assert_eq!(bad_ratio.field(), "token_ratio");
    assert_eq!(
        BudgetConfig {
            max_tokens: 2000,
            token_ratio: -1.0
        }
        .check(),
        Err(BudgetError::MaxTokensOutOfRange(2000))
    );
}

#[test]
fn debug_shows_tokens() {
    let b = Budget::default();
    let _ = b.take();
    assert_eq!(
        format!("{b:?}"),
        "Budget { tokens: 9.0, max_tokens: 10, token_ratio: 0.1 }"
    );
}

/// The budget as gRFC A6 states it, in thousandths, one step at a time.
#[derive(Debug)]
struct Model {
    tokens: i64,
    max: i64,
    ratio: i64,
}

impl Model {
    fn take(&mut self) -> bool {
        self.tokens = (self.tokens - 1000).max(0);
        self.tokens * 2 > self.max
    }
    fn give_back(&mut self) {
        self.tokens = (self.tokens + self.ratio).min(self.max);
    }
}

proptest! {
    #[test]
    fn any_valid_config_builds(max in 1u32..=1000, ratio_milli in 1u32..=1_000_000) {
        let ratio = f64::from(ratio_milli) / 1000.0;
        prop_assert_eq!(check_token_ratio(ratio), Ok(()));
        let b = budget(max, ratio);
        prop_assert_eq!(b.token_ratio_milli(), ratio_milli.min(max * 1000));
    }

    #[test]
    fn matches_the_model_one_step_at_a_time(
        max in 1u32..=20,
        ratio_milli in 1u32..=3000,
        ops in proptest::collection::vec(any::<bool>(), 0..200),
    ) {
        let b = budget(max, f64::from(ratio_milli) / 1000.0);
        let mut m = Model {
            tokens: i64::from(max) * 1000,
            max: i64::from(max) * 1000,
            ratio: i64::from(ratio_milli.min(max * 1000)),
        };
        for take in ops {
            if take {
                prop_assert_eq!(b.take(), m.take());
            } else {
                b.give_back();
                m.give_back();
            }
            prop_assert_eq!(i64::from(b.tokens_milli()), m.tokens);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn stays_within_bounds_under_any_interleaving_of_threads(
        max in 1u32..=10,
        ratio_milli in 1u32..=2000,
        plans in proptest::collection::vec(
            proptest::collection::vec(any::<bool>(), 1..300), 2..5),
    ) {
        let b = budget(max, f64::from(ratio_milli) / 1000.0);
        let limit = max * 1000;
        let start = Arc::new(Barrier::new(plans.len() + 1));
        let workers: Vec<_> = plans
            .into_iter()
            .map(|plan| {
                let b = b.clone();
                let start = Arc::clone(&start);
                thread::spawn(move || {
                    start.wait();
                    let mut seen_max = 0;
                    for take in plan {
                        if take {
                            let _ = b.take();
                        } else {
                            b.give_back();
                        }
                        seen_max = seen_max.max(b.tokens_milli());
                    }
                    seen_max
                })
            })
            .collect();
        start.wait();
        for _ in 0..500 {
            let t = b.tokens_milli();
            prop_assert!(t <= limit, "{} > {}", t, limit);
        }
        for w in workers {
            let seen = w.join().unwrap();
            prop_assert!(seen <= limit);
        }
        prop_assert!(b.tokens_milli() <= limit);
    }

    #[test]
    fn concurrent_takes_from_full_are_all_counted(
        threads in 2usize..5,
        per_thread in 0u32..50,
    ) {
        // No saturation can happen, so every take lands, in any order.
        let b = budget(1000, 0.1);
        let start = Arc::new(Barrier::new(threads));
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let b = b.clone();
                let start = Arc::clone(&start);
                thread::spawn(move || {
                    start.wait();
                    (0..per_thread).filter(|_| b.take()).count()
                })
            })
            .collect();
        let allowed: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
        let taken = threads as u32 * per_thread;
        prop_assert_eq!(b.tokens_milli(), 1_000_000 - taken * 1000);
        prop_assert_eq!(allowed, taken as usize);
    }
}
