//! The retry budget: gRPC retry throttling (gRFC A6), lock-free.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// Thousandths of a token: gRFC A6 gives the ratio at most 3 decimals, so
/// every amount the budget ever holds is a whole number of these.
const MILLI: u32 = 1000;

/// The most tokens a budget may hold (gRFC A6).
pub const MAX_TOKENS_LIMIT: u32 = 1000;

/// The configuration of a [`Budget`]: plain values, with
/// [`BudgetConfig::DEFAULT`] (gRFC A6's example: 10 tokens, ratio 0.1) and a
/// check per field ([`check_max_tokens`], [`check_token_ratio`]).
///
/// Design: [retries](crate::design::client#retries); gRFC A6, "Retry Throttling".
#[derive(Clone, Copy, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    /// How many tokens the budget holds when full, and starts with: a count
    /// from 1 to [`MAX_TOKENS_LIMIT`]. Retries stop while half of them or
    /// fewer are left.
    pub max_tokens: u32,
    /// The tokens one successful attempt gives back: a number greater than
    /// zero, with at most 3 decimal places (0.1 gives back a tenth of one).
    pub token_ratio: f64,
}

impl BudgetConfig {
    /// gRFC A6's example: 10 tokens, a tenth of one given back per success.
    pub const DEFAULT: BudgetConfig = BudgetConfig {
        max_tokens: 10,
        token_ratio: 0.1,
    };

    /// Checks both fields, `max_tokens` first.
    ///
    /// # Errors
    ///
    /// The first [`BudgetError`] of [`check_max_tokens`] or
    /// [`check_token_ratio`]; [`BudgetError::field`] says which field.
    pub fn check(&self) -> Result<(), BudgetError> {
        check_max_tokens(self.max_tokens)?;
        check_token_ratio(self.token_ratio)
    }
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Why a [`BudgetConfig`] value is invalid. Its message names the rule and
/// the value, not the field, so that a settings layer can put its own name
/// for the field in front; [`BudgetError::field`] gives the
/// [`BudgetConfig`] field's name.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BudgetError {
    /// `max_tokens` is 0 or above [`MAX_TOKENS_LIMIT`].
    #[error("must be from 1 to {MAX_TOKENS_LIMIT} tokens, got {0}")]
    MaxTokensOutOfRange(u32),
    /// `token_ratio` is not a finite number (NaN or infinite).
    #[error("must be a finite number, got {0}")]
    RatioNotFinite(f64),
    /// `token_ratio` is zero or negative.
    #[error("must be greater than 0, got {0}")]
    RatioNotPositive(f64),
    /// `token_ratio` has more than 3 decimal places.
    #[error("must have at most 3 decimal places, got {0}")]
    RatioTooPrecise(f64),
}

impl BudgetError {
    /// The name of the [`BudgetConfig`] field the error is about:
    /// `"max_tokens"` or `"token_ratio"`.
    pub fn field(&self) -> &'static str {
        match self {
            BudgetError::MaxTokensOutOfRange(_) => "max_tokens",
            BudgetError::RatioNotFinite(_)
            | BudgetError::RatioNotPositive(_)
            | BudgetError::RatioTooPrecise(_) => "token_ratio",
        }
    }
}

/// Checks a budget's `max_tokens`: a count from 1 to [`MAX_TOKENS_LIMIT`]
/// (gRFC A6's bounds).
///
/// # Errors
///
/// [`BudgetError::MaxTokensOutOfRange`] otherwise.
pub fn check_max_tokens(max_tokens: u32) -> Result<(), BudgetError> {
    if (1..=MAX_TOKENS_LIMIT).contains(&max_tokens) {
        Ok(())
    } else {
        Err(BudgetError::MaxTokensOutOfRange(max_tokens))
    }
}

/// Checks a budget's `token_ratio`: a finite number greater than zero with
/// at most 3 decimal places (gRFC A6), such as `0.1` or `0.005`.
///
/// A decimal such as `0.007` has no exact binary form, so "3 decimal
/// places" means: a thousand times the value is a whole number, to within
/// the rounding of an `f64`.
///
/// # Errors
///
/// [`BudgetError::RatioNotFinite`], [`BudgetError::RatioNotPositive`] or
/// [`BudgetError::RatioTooPrecise`].
pub fn check_token_ratio(token_ratio: f64) -> Result<(), BudgetError> {
    if !token_ratio.is_finite() {
        return Err(BudgetError::RatioNotFinite(token_ratio));
    }
    if token_ratio <= 0.0 {
        return Err(BudgetError::RatioNotPositive(token_ratio));
    }
    let thousandths = token_ratio * f64::from(MILLI);
    // A few ulps of slack, relative to the size of the value.
    let slack = thousandths.abs().max(1.0) * 1e-9;
    if (thousandths - thousandths.round()).abs() > slack || thousandths.round() < 1.0 {
        return Err(BudgetError::RatioTooPrecise(token_ratio));
    }
    Ok(())
}

/// The retry budget of one dependency: gRPC retry throttling as gRFC A6
/// specifies it, shared by every call and thread of a client.
///
/// The budget holds up to `max_tokens` tokens and starts full. Each attempt
/// classified Retry takes one token ([`Budget::take`]); each successful
/// attempt gives back `token_ratio` of one ([`Budget::give_back`]). Retries
/// are refused while half the tokens or fewer are left. So while a
/// dependency fails, its calls make one attempt each rather than
/// `max_attempts`, and retries do not multiply its load.
///
/// First attempts are never limited: the attempt loop consults the budget
/// only after an attempt, never before a first one.
///
/// Tokens are kept in thousandths in one atomic integer, so the ratio is
/// exact and both operations are lock-free (a compare-and-swap loop).
/// Cloning is cheap (an [`Arc`]) and a clone shares the same tokens.
///
/// Design: [retries](crate::design::client#retries); gRFC A6, "Retry Throttling".
#[derive(Clone)]
pub struct Budget {
    inner: Arc<Inner>,
}

struct Inner {
    /// Tokens left, in thousandths: `0..=max`.
    tokens: AtomicU32,
    /// `max_tokens` in thousandths.
    max: u32,
    /// `token_ratio` in thousandths: `1..=max`.
    ratio: u32,
}

impl Budget {
    /// Builds a full budget from `config`.
    ///
    /// # Errors
    ///
    /// The first [`BudgetError`] of [`BudgetConfig::check`].
    pub fn new(config: BudgetConfig) -> Result<Budget, BudgetError> {
        config.check()?;
        let max = config.max_tokens * MILLI;
        // Checked: finite, positive and a whole number of thousandths. A
        // ratio above max_tokens fills the budget in one step, as max would.
        let ratio = (config.token_ratio * f64::from(MILLI))
            .round()
            .clamp(1.0, f64::from(max)) as u32;
        Ok(Budget {
            inner: Arc::new(Inner {
                tokens: AtomicU32::new(max),
                max,
                ratio,
            }),
        })
    }

    /// Records an attempt classified Retry: takes one token (none are taken
    /// below zero) and says whether a retry may follow, which it may while
    /// more than half of `max_tokens` are left after the take.
    ///
    /// The token is taken whether or not the retry is allowed, as gRFC A6
    /// counts every retryable failure. Call it once per Retry verdict, when
    /// the retry is decided, before any backoff: retries waiting out their
    /// backoff then cannot overshoot the budget.
    #[must_use = "false means the retry is throttled"]
    pub fn take(&self) -> bool {
        let inner = &*self.inner;
        let before = match inner
            .tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                (t > 0).then(|| t.saturating_sub(MILLI))
            }) {
            Ok(before) | Err(before) => before,
        };
        let after = before.saturating_sub(MILLI);
        // after > max / 2, in integers: max is a multiple of 1000.
        u64::from(after) * 2 > u64::from(inner.max)
    }

    /// Records a successful attempt: gives back `token_ratio` of a token,
    /// up to `max_tokens`.
    #[inline]
    pub fn give_back(&self) {
        let inner = &*self.inner;
        // A full budget (the usual case) costs one load and no write.
        let _ = inner
            .tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                (t < inner.max).then(|| t.saturating_add(inner.ratio).min(inner.max))
            });
    }

    /// Whether a retry would be allowed now, without taking a token: more
    /// than half of `max_tokens` are left, even after taking one.
    pub fn would_allow(&self) -> bool {
        let after = self.tokens_milli().saturating_sub(MILLI);
        u64::from(after) * 2 > u64::from(self.inner.max)
    }

    /// The tokens left now, in thousandths of a token (`0..=max_tokens·1000`).
    pub fn tokens_milli(&self) -> u32 {
        self.inner.tokens.load(Ordering::Relaxed)
    }

    /// The tokens left now (`0.0..=max_tokens`), to three decimals.
    pub fn tokens(&self) -> f64 {
        f64::from(self.tokens_milli()) / f64::from(MILLI)
    }

    /// The configured `max_tokens`.
    pub fn max_tokens(&self) -> u32 {
        self.inner.max / MILLI
    }

    /// The configured `token_ratio`, in thousandths of a token.
    pub fn token_ratio_milli(&self) -> u32 {
        self.inner.ratio
    }
}

impl Default for Budget {
    /// A full budget of [`BudgetConfig::DEFAULT`].
    fn default() -> Self {
        let max = BudgetConfig::DEFAULT.max_tokens * MILLI;
        Budget {
            inner: Arc::new(Inner {
                tokens: AtomicU32::new(max),
                max,
                // 0.1 of a token.
                ratio: 100,
            }),
        }
    }
}

impl fmt::Debug for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Budget")
            .field("tokens", &self.tokens())
            .field("max_tokens", &self.max_tokens())
            .field(
                "token_ratio",
                &(f64::from(self.inner.ratio) / f64::from(MILLI)),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_is_grfc_a6_example() {
        assert_eq!(BudgetConfig::default().max_tokens, 10);
        assert_eq!(BudgetConfig::default().token_ratio, 0.1);
        let b = Budget::default();
        assert_eq!(b.tokens_milli(), 10_000);
        assert_eq!(b.token_ratio_milli(), 100);
        let built = Budget::new(BudgetConfig::DEFAULT).unwrap();
        assert_eq!(built.tokens_milli(), b.tokens_milli());
        assert_eq!(built.token_ratio_milli(), b.token_ratio_milli());
    }

    #[test]
    fn ratio_above_max_fills_in_one_step() {
        let b = Budget::new(BudgetConfig {
            max_tokens: 2,
            token_ratio: 5.0,
        })
        .unwrap();
        assert_eq!(b.token_ratio_milli(), 2000);
        let _ = b.take();
        let _ = b.take();
        assert_eq!(b.tokens_milli(), 0);
        b.give_back();
        assert_eq!(b.tokens_milli(), 2000);
    }
}
