//! The settings of a breaker that come from configuration, and their checks.

use std::error::Error;
use std::fmt;
use std::time::Duration;

/// The largest [`Config::window`] and [`Config::probes`] that
/// [`Breaker::new`](super::Breaker::new) accepts: 65 536.
///
/// Both are allocated when the breaker is built, so the bound turns a typo
/// in configuration (`window: 1 << 40`) into a [`ConfigError`] instead of an
/// out-of-memory crash at startup.
///
/// Design: [validation](crate::design::circuit_breaker#validation).
pub const MAX_COUNT: usize = 1 << 16;

/// The settings of a [`Breaker`](super::Breaker) that come from
/// configuration.
///
/// Every field is required, and there is deliberately no `Default`:
/// [`Breaker::new`](super::Breaker::new) rejects a zero or out-of-range
/// value with a [`ConfigError`] rather than replacing it with a default.
///
/// Design: [validation](crate::design::circuit_breaker#validation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// How many of the latest successes and failures of the current state
    /// [`Counts::successes`](super::Counts::successes) and
    /// [`Counts::failures`](super::Counts::failures) cover, a count of
    /// results from 1 to [`MAX_COUNT`]. The window counts results, not time.
    pub window: usize,

    /// How many probes a half-open breaker has in flight at once, a count
    /// from 1 to [`MAX_COUNT`].
    pub probes: usize,

    /// How long an open breaker rejects every call before it becomes
    /// half-open. Must be more than zero. A period too long for the clock to
    /// represent means the breaker never becomes half-open.
    #[serde(with = "humantime_serde")]
    pub open_for: Duration,

    /// How long a probe holds its slot. A probe not settled by then stops
    /// holding it, so that another probe can be admitted, and is counted in
    /// [`Counts::timed_out`](super::Counts::timed_out). The call itself is
    /// not cancelled, and its result still counts if it arrives before the
    /// breaker changes state. Must be more than zero.
    #[serde(with = "humantime_serde")]
    pub probe_timeout: Duration,
}

impl Config {
    /// Checks every field, and names every invalid one in a single error.
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        for (field, value) in [("window", self.window), ("probes", self.probes)] {
            if !(1..=MAX_COUNT).contains(&value) {
                problems.push(Problem {
                    field,
                    detail: format!("{field} is {value}, want 1..={MAX_COUNT}"),
                });
            }
        }
        for (field, value) in [
            ("open_for", self.open_for),
            ("probe_timeout", self.probe_timeout),
        ] {
            if value.is_zero() {
                problems.push(Problem {
                    field,
                    detail: format!("{field} is zero, want a duration more than zero"),
                });
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError { problems })
        }
    }
}

/// The error of [`Breaker::new`](super::Breaker::new) for a [`Config`] with
/// invalid fields. It names every invalid field, not just the first:
///
/// ```text
/// circuit: invalid config: window is 0, want 1..=65536; open_for is zero, want a duration more than zero
/// ```
///
/// Design: [validation](crate::design::circuit_breaker#validation) (one error naming every invalid
/// field; nothing is given a default, rounded or clamped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    problems: Vec<Problem>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Problem {
    field: &'static str,
    detail: String,
}

impl ConfigError {
    /// The names of the invalid fields of [`Config`], in declaration order:
    /// some of `"window"`, `"probes"`, `"open_for"` and `"probe_timeout"`.
    pub fn fields(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.problems.iter().map(|p| p.field)
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("circuit: invalid config: ")?;
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            f.write_str(&problem.detail)?;
        }
        Ok(())
    }
}

impl Error for ConfigError {}
