//! The settings every client shares, defined once with their checks and
//! their serde mapping: `timeout`, `attempt_timeout`, the retry fields
//! (`max_attempts`, `backoff_base`, `backoff_max`, the `retry_budget`
//! section), the `breaker` section and `forward_scenario`; the durations'
//! bound; the one [`InvalidValue`] a field's check returns, and the one
//! [`InvalidSettings`] a whole settings' check returns, naming every bad
//! field by its path (`breaker.open_for`).
//!
//! Each transport's `Settings` (the gRPC and HTTP clients, the Kafka
//! producer and consumer, the RabbitMQ publisher and consumer) keeps the
//! shared fields flat, as its users write them, and:
//!
//! - reads them with [`settings_read!`], which defines its serde `Read`
//!   mirror from its own fields and the shared sections it names;
//! - checks them with [`Checks`], one check per shared section;
//! - is refused with [`InvalidSettings`] (each transport's public error
//!   name is an alias of it).
//!
//! A new shared setting is one section here (its keys in
//! [`settings_read!`], its check in [`Checks`]); a new transport's
//! settings name the sections they have. The public checks are
//! re-exported where a user looks for them, beside each client's settings
//! ([`grpc::client`](crate::grpc::client)).

mod invalid;
mod read;
#[cfg(test)]
mod tests;

/// Asserts that `check` accepts each of `ok`, and refuses each of `bad`
/// with a message that holds its `says`; the messages it refused with, for
/// what a caller asserts of them all. A field's check's table test.
#[cfg(test)]
pub(crate) fn assert_check(
    check: impl Fn(&str) -> Result<(), InvalidValue>,
    ok: &[&str],
    bad: &[(&str, &str)],
) -> Vec<String> {
    for ok in ok {
        assert_eq!(check(ok), Ok(()), "{ok}");
    }
    bad.iter()
        .map(|(bad, says)| {
            let err = check(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad:?}: {err}");
            err
        })
        .collect()
}

pub use invalid::InvalidSettings;
pub(crate) use invalid::{Checks, write_each};
pub(crate) use read::{
    AttemptTimeoutSetting, BreakerSection, BudgetSection, breaker_of, budget_of, settings_read,
};

use std::time::Duration;

use crate::{circuit, retry};

/// A call's timeout every client has by default: 10 s.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Most attempts of a call by default: 3 (two retries).
pub(crate) const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// The retry backoff's base by default: 100 ms.
pub(crate) const DEFAULT_BACKOFF_BASE: Duration = Duration::from_millis(100);
/// The retry backoff's ceiling by default: 5 s.
pub(crate) const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(5);
/// The `breaker` section by default: a window of 20 results, 1 probe, open
/// for 10 s, a probe's slot held at most 30 s.
pub(crate) const DEFAULT_BREAKER: circuit::Config = circuit::Config {
    window: 20,
    probes: 1,
    open_for: Duration::from_secs(10),
    probe_timeout: Duration::from_secs(30),
};

/// The breaker's policy by default: open after 5 failures in a row, or
/// half of the last 20 results failed once at least 3 were seen.
pub(crate) fn default_breaker_policy() -> circuit::Policy {
    circuit::Policy::consecutive_or_half(5, 20, 3)
}

/// Checks a client TLS config: it must be able to make a connection, with
/// at least one cipher suite and one key exchange group, and a
/// `max_fragment_size`, if any, from 32 to 16389. (rustls speaks only TLS
/// 1.2 and 1.3, so the version floor HTTP/2 needs always holds.)
///
/// # Errors
///
/// [`InvalidValue`] saying what is wrong.
///
/// Design: [the gRPC client's connection](crate::design::client#the-connection) (TLS).
pub fn check_tls(config: &rustls::ClientConfig) -> Result<(), InvalidValue> {
    check_provider(config.crypto_provider())?;
    if let Some(size) = config.max_fragment_size
        && !(32..=16389).contains(&size)
    {
        return Err(InvalidValue::new(format!(
            "has max_fragment_size {size}, want 32..=16389"
        )));
    }
    Ok(())
}

/// Checks a TLS config's crypto provider, a client's or a server's: it
/// has at least one cipher suite and one key exchange group, which making
/// a connection takes.
pub(crate) fn check_provider(
    provider: &rustls::crypto::CryptoProvider,
) -> Result<(), InvalidValue> {
    if provider.cipher_suites.is_empty() {
        return Err(InvalidValue::new("has no cipher suite"));
    }
    if provider.kx_groups.is_empty() {
        return Err(InvalidValue::new("has no key exchange group"));
    }
    Ok(())
}

/// Why a value fails its field's check. The message says what is wrong
/// with the value and does not name the field, so the caller can put its
/// own name in front (`CARTS_ADDR: names a scheme (…)`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct InvalidValue {
    pub(crate) reason: String,
}

impl InvalidValue {
    pub(crate) fn new(reason: impl Into<String>) -> InvalidValue {
        InvalidValue {
            reason: reason.into(),
        }
    }
}

/// The longest duration a humus setting takes where no tighter bound
/// applies (a timeout, a backoff, a breaker's period, a server's
/// connection age, failure injection's `max_delay`): 365 days. A longer
/// one is a typo (`300000000000y`), and one past what the clock can count
/// would overflow the deadline computed from it.
pub(crate) const LONGEST_SETTING: Duration = Duration::from_secs(365 * 24 * 3600);

/// What is wrong with `d` when it is longer than [`LONGEST_SETTING`]
/// (`is 400days, want at most 365 days`), for each check to word as its
/// error.
pub(crate) fn longer_than_a_year(d: Duration) -> Option<String> {
    (d > LONGEST_SETTING).then(|| {
        format!(
            "is {}, want at most 365 days",
            humantime_serde::re::humantime::format_duration(d)
        )
    })
}

/// More than zero and at most [`LONGEST_SETTING`].
pub(crate) fn positive_within_a_year(d: Duration) -> Result<(), InvalidValue> {
    if d.is_zero() {
        return Err(InvalidValue::new("is zero, want a duration more than zero"));
    }
    at_most_a_year(d)
}

/// A count of at least 1: zero refused, saying `why` (what 0 would be,
/// what to give instead).
pub(crate) fn at_least_one<N: PartialEq + Default>(
    n: N,
    why: &'static str,
) -> Result<(), InvalidValue> {
    if n == N::default() {
        Err(InvalidValue::new(why))
    } else {
        Ok(())
    }
}

/// At most [`LONGEST_SETTING`].
pub(crate) fn at_most_a_year(d: Duration) -> Result<(), InvalidValue> {
    match longer_than_a_year(d) {
        Some(why) => Err(InvalidValue::new(why)),
        None => Ok(()),
    }
}

/// Checks a unary call's timeout: more than zero, and at most 365 days.
///
/// # Errors
///
/// [`InvalidValue`] for zero, or for more than 365 days.
pub fn check_timeout(timeout: Duration) -> Result<(), InvalidValue> {
    positive_within_a_year(timeout)
}

/// Checks an attempt's timeout (a client's `attempt_timeout`, such as
/// [the gRPC client's](crate::grpc::client::Settings::attempt_timeout), when set):
/// more than zero, and at most 365 days.
///
/// ```
/// use std::time::Duration;
/// use humus::grpc::client::check_attempt_timeout;
/// assert!(check_attempt_timeout(Duration::from_millis(100)).is_ok());
/// assert_eq!(
///     check_attempt_timeout(Duration::ZERO).unwrap_err().to_string(),
///     "is zero, want a duration more than zero (leave it unset for no timeout of its own)"
/// );
/// ```
///
/// # Errors
///
/// [`InvalidValue`] for zero, or for more than 365 days.
pub fn check_attempt_timeout(attempt_timeout: Duration) -> Result<(), InvalidValue> {
    if attempt_timeout.is_zero() {
        Err(InvalidValue::new(
            "is zero, want a duration more than zero (leave it unset for no timeout of its own)",
        ))
    } else {
        at_most_a_year(attempt_timeout)
    }
}

/// Checks a call's most attempts: at least 1 (1 turns retries off).
///
/// # Errors
///
/// [`InvalidValue`] for zero.
pub fn check_max_attempts(max_attempts: u32) -> Result<(), InvalidValue> {
    at_least_one(max_attempts, "is 0, want 1 or more (1 turns retries off)")
}

/// Checks a retry budget: `max_tokens` from 1 to 1000, and a
/// `token_ratio` more than zero with at most 3 decimals (gRFC A6).
///
/// # Errors
///
/// [`InvalidValue`] saying which part is wrong, and how.
pub fn check_retry_budget(budget: &retry::BudgetConfig) -> Result<(), InvalidValue> {
    budget
        .check()
        .map_err(|e| InvalidValue::new(format!("has {}: {e}", e.field())))
}

/// Checks a breaker config: each field with its own check
/// ([`check_window`], [`check_probes`], [`check_open_for`],
/// [`check_probe_timeout`]). A service that reads the fields from
/// configuration runs each field's check on its value instead, so the
/// message names the variable.
///
/// # Errors
///
/// [`InvalidValue`] naming every bad part of the config.
pub fn check_breaker(config: &circuit::Config) -> Result<(), InvalidValue> {
    let problems: Vec<String> = [
        ("window", check_window(config.window)),
        ("probes", check_probes(config.probes)),
        ("open_for", check_open_for(config.open_for)),
        ("probe_timeout", check_probe_timeout(config.probe_timeout)),
    ]
    .into_iter()
    .filter_map(|(part, checked)| checked.err().map(|e| format!("{part} {e}")))
    .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(InvalidValue::new(problems.join("; ")))
    }
}

/// The path in a client's settings of the budget's field `e` is about.
pub(crate) fn budget_path(e: &retry::BudgetError) -> &'static str {
    match e.field() {
        "max_tokens" => "retry_budget.max_tokens",
        _ => "retry_budget.token_ratio",
    }
}

/// Checks a count of the breaker's: from 1 to [`circuit::MAX_COUNT`].
fn count(n: usize, unit: &str) -> Result<(), InvalidValue> {
    if (1..=circuit::MAX_COUNT).contains(&n) {
        Ok(())
    } else {
        Err(InvalidValue::new(format!(
            "is {n}, want 1 to {} {unit}",
            circuit::MAX_COUNT
        )))
    }
}

/// Checks the breaker's window ([`circuit::Config::window`]): a count of
/// results from 1 to [`circuit::MAX_COUNT`].
///
/// # Errors
///
/// [`InvalidValue`] for 0 or more than [`circuit::MAX_COUNT`].
pub fn check_window(window: usize) -> Result<(), InvalidValue> {
    count(window, "results")
}

/// Checks how many probes the half-open breaker lets through at once
/// ([`circuit::Config::probes`]): from 1 to [`circuit::MAX_COUNT`].
///
/// # Errors
///
/// [`InvalidValue`] for 0 or more than [`circuit::MAX_COUNT`].
pub fn check_probes(probes: usize) -> Result<(), InvalidValue> {
    count(probes, "probes")
}

/// Checks how long the breaker stays open ([`circuit::Config::open_for`]):
/// more than zero, and at most 365 days.
///
/// # Errors
///
/// [`InvalidValue`] for zero, or for more than 365 days.
pub fn check_open_for(open_for: Duration) -> Result<(), InvalidValue> {
    positive_within_a_year(open_for)
}

/// Checks how long a probe holds its slot
/// ([`circuit::Config::probe_timeout`]): more than zero, and at most 365
/// days.
///
/// # Errors
///
/// [`InvalidValue`] for zero, or for more than 365 days.
pub fn check_probe_timeout(probe_timeout: Duration) -> Result<(), InvalidValue> {
    positive_within_a_year(probe_timeout)
}

/// Checks the backoff's base: more than zero, and at most 365 days.
///
/// # Errors
///
/// [`InvalidValue`] for zero, or for more than 365 days.
pub fn check_backoff_base(base: Duration) -> Result<(), InvalidValue> {
    positive_within_a_year(base)
}

/// Checks the backoff's ceiling: more than zero, and at most 365 days.
/// Whether it is at least the base takes both fields, which
/// each client's `new` checks.
///
/// # Errors
///
/// [`InvalidValue`] for zero, or for more than 365 days.
pub fn check_backoff_max(max: Duration) -> Result<(), InvalidValue> {
    positive_within_a_year(max)
}
