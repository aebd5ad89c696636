//! The backoff schedule: exponential, with full jitter.

use std::sync::Arc;
use std::time::Duration;

/// A source of randomness for [`Exponential`]: given an inclusive upper
/// bound `hi` (nanoseconds), it returns a value drawn uniformly from
/// `0..=hi`. A value above `hi` is taken as `hi`.
type Source = Arc<dyn Fn(u64) -> u64 + Send + Sync>;

/// The exponential backoff schedule with full jitter: the wait before retry
/// `n` (`n = 1` is the first retry, after attempt 1) is drawn uniformly from
/// `[0, min(max, base · 2^(n-1))]`.
///
/// The ceiling never overflows: once `base · 2^(n-1)` is past `max` (or past
/// what a [`Duration`] holds) it is `max`, for any `n` up to [`u32::MAX`].
/// The draw is in whole nanoseconds, and a ceiling above `u64::MAX`
/// nanoseconds (some 584 years) is drawn from as if it were that.
///
/// The random source is [`fastrand`](https://docs.rs/fastrand/2)'s thread-local generator unless
/// [`Exponential::with_source`] injects another, as tests do. Cloning is
/// cheap and a clone shares the source.
///
/// Design: [retries](crate::design::client#retries) (the full-jitter schedule of
/// `backoff_base` and `backoff_max`).
#[derive(Clone)]
pub struct Exponential {
    base: Duration,
    max: Duration,
    source: Source,
}

impl Exponential {
    /// A schedule whose first retry waits up to `base`, doubling with each
    /// retry up to `max`. A `max` below `base` caps every wait at `max`.
    pub fn new(base: Duration, max: Duration) -> Exponential {
        Exponential {
            base,
            max,
            source: Arc::new(|hi| fastrand::u64(0..=hi)),
        }
    }

    /// Replaces the random source: `source(hi)` must return a value drawn
    /// uniformly from `0..=hi` (nanoseconds). It is called once per
    /// [`Exponential::backoff`], from many threads at once; a value above
    /// `hi` counts as `hi`. `|hi| hi` always waits the ceiling, `|_| 0`
    /// never waits.
    pub fn with_source(self, source: impl Fn(u64) -> u64 + Send + Sync + 'static) -> Exponential {
        Exponential {
            source: Arc::new(source),
            ..self
        }
    }

    /// The first retry's ceiling (`BackoffBase`).
    pub fn base(&self) -> Duration {
        self.base
    }

    /// The largest ceiling (`BackoffMax`).
    pub fn max(&self) -> Duration {
        self.max
    }

    /// The ceiling of the wait before retry `retry` (1 for the first
    /// retry): `min(max, base · 2^(retry-1))`. `retry` 0 counts as 1.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let max = self.max.as_nanos();
        let shift = retry.saturating_sub(1);
        let grown = if shift >= 128 {
            None
        } else {
            self.base.as_nanos().checked_mul(1u128 << shift)
        };
        let nanos = grown.map_or(max, |g| g.min(max));
        from_nanos(nanos)
    }

    /// Draws the wait before retry `retry` (1 for the first retry) from
    /// `[0, ceiling(retry)]`, uniformly.
    pub fn backoff(&self, retry: u32) -> Duration {
        let hi = u64::try_from(self.ceiling(retry).as_nanos()).unwrap_or(u64::MAX);
        if hi == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos((self.source)(hi).min(hi))
    }
}

fn from_nanos(nanos: u128) -> Duration {
    const PER_SEC: u128 = 1_000_000_000;
    // Never above a Duration's range: nanos is at most `max.as_nanos()`.
    let secs = u64::try_from(nanos / PER_SEC).unwrap_or(u64::MAX);
    Duration::new(secs, (nanos % PER_SEC) as u32)
}

crate::debug::debug_fields!(Exponential { base, max, .. });
