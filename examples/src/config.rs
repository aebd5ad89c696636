//! Settings from environment variables, checked, with every bad variable
//! named at once ([design](humus::design::client#the-settings): the service sources each field and
//! passes the field's check; a bad value fails startup with exit 78).
//!
//! [`read`] runs a function that sources each field from an `Env` ([`humus::app::Env`]) through
//! [`Vars`], and returns its result only when every variable was good:
//!
//! ```
//! use std::time::Duration;
//! use humus_examples::config::{self, Env, parse};
//!
//! let env = Env::from_pairs([("LEDGER_TIMEOUT", "250ms")]);
//! let timeout = config::read(&env, |vars| {
//!     vars.or(
//!         "LEDGER_TIMEOUT",
//!         Duration::from_secs(10),
//!         parse::duration,
//!     )
//! })?;
//! assert_eq!(timeout, Duration::from_millis(250));
//!
//! let bad = Env::from_pairs([("LEDGER_TIMEOUT", "soon")]);
//! let err = config::read(&bad, |vars| {
//!     vars.or("LEDGER_TIMEOUT", Duration::from_secs(10), parse::duration)
//! })
//! .unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     r#"LEDGER_TIMEOUT: "soon" is not a duration (such as 250ms, 2s, 1m30s)"#,
//! );
//! # Ok::<(), config::ConfigError>(())
//! ```
//!
//! A binary's `main` turns a [`ConfigError`] into exit code
//! [`EXIT_CONFIG`] (78, `EX_CONFIG`), and a fault in its own code (settings
//! that a client refuses although each variable passed its check) into
//! [`EXIT_SOFTWARE`] (1); see [`Failure`].

use std::fmt;
use std::process::ExitCode;
use std::time::Duration;

/// The exit code of a bad setting: 78, `EX_CONFIG` of BSD's `sysexits.h`.
pub const EXIT_CONFIG: u8 = 78;

/// The exit code of a fault in the program itself: 1.
pub const EXIT_SOFTWARE: u8 = 1;

/// A snapshot of environment variables: humus's, which also reads a
/// settings struct from prefixed variables ([`humus::app::from_env`]).
/// Not inlined: its docs link to humus's items.
#[doc(no_inline)]
pub use humus::app::Env;

/// One bad variable: its name and what is wrong with its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VarError {
    /// The variable's name, such as `LEDGER_ADDR`.
    pub name: String,
    /// What is wrong, without the name: `not set`, or the check's message.
    pub problem: String,
}

/// Why [`read`] failed: every bad variable, in the order they were read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    vars: Vec<VarError>,
}

impl ConfigError {
    /// The bad variables, in the order they were read. Never empty.
    pub fn vars(&self) -> &[VarError] {
        &self.vars
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.vars.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", v.name, v.problem)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Reads variables for [`read`]'s function, recording each bad one.
#[derive(Debug)]
pub struct Vars<'a> {
    env: &'a Env,
    errors: Vec<VarError>,
}

impl Vars<'_> {
    /// The value of the required variable `name`, parsed and checked by
    /// `parse`. Not set, or rejected by `parse`: the error is recorded and
    /// `T::default()` stands in, so the caller goes on reading the rest.
    pub fn required<T: Default>(
        &mut self,
        name: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> T {
        match self.env.get(name) {
            None => {
                self.fail(name, "not set".to_owned());
                T::default()
            }
            Some(raw) => self.parse(name, raw, parse).unwrap_or_default(),
        }
    }

    /// The value of the variable `name` parsed and checked by `parse`, or
    /// `default` when it is not set. Rejected by `parse`: the error is
    /// recorded and `default` stands in.
    pub fn or<T>(
        &mut self,
        name: &str,
        default: T,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> T {
        match self.env.get(name) {
            None => default,
            Some(raw) => self.parse(name, raw, parse).unwrap_or(default),
        }
    }

    fn parse<T>(
        &mut self,
        name: &str,
        raw: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        match parse(raw) {
            Ok(v) => Some(v),
            Err(problem) => {
                self.fail(name, problem);
                None
            }
        }
    }

    /// Records that the variable `name` is bad, for `problem` (a check
    /// that takes more than its value to make).
    pub fn refuse(&mut self, name: &str, problem: String) {
        self.fail(name, problem);
    }

    fn fail(&mut self, name: &str, problem: String) {
        self.errors.push(VarError {
            name: name.to_owned(),
            problem,
        });
    }
}

/// Runs `build`, which sources settings from `env` through [`Vars`], and
/// returns what it built when every variable it read was good.
///
/// # Errors
///
/// [`ConfigError`] naming every bad variable `build` read.
pub fn read<T>(env: &Env, build: impl FnOnce(&mut Vars<'_>) -> T) -> Result<T, ConfigError> {
    let mut vars = Vars {
        env,
        errors: Vec::new(),
    };
    let built = build(&mut vars);
    if vars.errors.is_empty() {
        Ok(built)
    } else {
        Err(ConfigError { vars: vars.errors })
    }
}

/// Parsers for [`Vars`], each returning the problem (without the
/// variable's name) when the value is bad.
pub mod parse {
    use std::fmt::Display;
    use std::net::SocketAddr;
    use std::time::Duration;

    /// A duration: one or more of a decimal number and a unit (`ns`, `us`,
    /// `µs`, `ms`, `s`, `m`, `h`), such as `250ms`, `1.5s` or `1m30s`; `0`
    /// alone is zero.
    ///
    /// # Errors
    ///
    /// The problem, when `raw` is not such a duration or is too long to
    /// hold.
    pub fn duration(raw: &str) -> Result<Duration, String> {
        super::parse_duration(raw)
            .ok_or_else(|| format!("{raw:?} is not a duration (such as 250ms, 2s, 1m30s)"))
    }

    /// A whole number from 0 to `u32::MAX`.
    ///
    /// # Errors
    ///
    /// The problem, when `raw` is not such a number.
    pub fn u32(raw: &str) -> Result<u32, String> {
        raw.parse()
            .map_err(|_| format!("{raw:?} is not a whole number from 0 to {}", u32::MAX))
    }

    /// `on` or `off` (also `true`/`false`, `1`/`0`).
    ///
    /// # Errors
    ///
    /// The problem, when `raw` is none of those.
    pub fn on_off(raw: &str) -> Result<bool, String> {
        match raw {
            "on" | "true" | "1" => Ok(true),
            "off" | "false" | "0" => Ok(false),
            _ => Err(format!("{raw:?} is neither on nor off")),
        }
    }

    /// An address to listen on: an IP address and a port,
    /// `127.0.0.1:50051` or `[::1]:50051` (port 0 picks a free one).
    ///
    /// # Errors
    ///
    /// The problem, when `raw` is not such an address.
    pub fn listen_addr(raw: &str) -> Result<SocketAddr, String> {
        raw.parse()
            .map_err(|_| format!("{raw:?} is not an IP address and port (such as 127.0.0.1:50051)"))
    }

    /// A check of the value's own, such as one of
    /// `humus::grpc::client`'s, after the parse: its error's message is the
    /// problem.
    ///
    /// # Errors
    ///
    /// The problem, when `check` rejects the value.
    pub fn checked<T, E: Display>(
        value: T,
        check: impl FnOnce(&T) -> Result<(), E>,
    ) -> Result<T, String> {
        check(&value).map_err(|e| e.to_string())?;
        Ok(value)
    }
}

/// The nanoseconds of each unit [`parse::duration`] knows.
const UNITS: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

fn parse_duration(raw: &str) -> Option<Duration> {
    if raw == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = raw;
    let mut total: u128 = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(digits);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let (_, scale) = UNITS.iter().find(|(name, _)| *name == unit)?;
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        let mut nanos = whole.checked_mul(*scale)?;
        // Each fractional digit adds a tenth of the one before, down to
        // a nanosecond.
        let mut place = *scale;
        for digit in fraction.chars() {
            let digit = u128::from(digit.to_digit(10)?);
            place /= 10;
            nanos = nanos.checked_add(digit * place)?;
        }
        total = total.checked_add(nanos)?;
        rest = after;
    }
    let secs = u64::try_from(total / 1_000_000_000).ok()?;
    Some(Duration::new(secs, (total % 1_000_000_000) as u32))
}

/// Why a service's `main` failed, and so its exit code.
#[derive(Debug)]
pub enum Failure {
    /// A bad setting (the operator's): exit [`EXIT_CONFIG`].
    Config(ConfigError),
    /// A fault in the program (a setting built in code that a check
    /// refuses, a server that failed): exit [`EXIT_SOFTWARE`].
    Software(Box<dyn std::error::Error + Send + Sync>),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Config(e) => write!(f, "bad settings: {e}"),
            Failure::Software(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Failure {}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Failure {
        Failure::Config(e)
    }
}

impl Failure {
    /// A fault in the program.
    pub fn software(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Failure {
        Failure::Software(e.into())
    }

    /// The process's exit code: [`EXIT_CONFIG`] or [`EXIT_SOFTWARE`].
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Config(_) => EXIT_CONFIG,
            Failure::Software(_) => EXIT_SOFTWARE,
        }
    }
}

/// What a binary's `main` returns for an App's `exit`: its code, and its
/// error printed to standard error as `<program>: <error>`.
pub fn exit_app(program: &str, exit: humus::app::Exit) -> ExitCode {
    if let Some(error) = exit.error() {
        eprintln!("{program}: {error}");
    }
    ExitCode::from(exit.code())
}

/// What a binary's `main` returns: success, or the failure printed to
/// standard error as `<program>: <failure>` and its exit code.
pub fn exit(program: &str, result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("{program}: {failure}");
            ExitCode::from(failure.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let ok = [
            ("0", Duration::ZERO),
            ("250ms", Duration::from_millis(250)),
            ("2s", Duration::from_secs(2)),
            ("1.5s", Duration::from_millis(1500)),
            (".5s", Duration::from_millis(500)),
            ("1m30s", Duration::from_secs(90)),
            ("1h", Duration::from_secs(3600)),
            ("100us", Duration::from_micros(100)),
            ("7ns", Duration::from_nanos(7)),
        ];
        for (raw, want) in ok {
            assert_eq!(parse_duration(raw), Some(want), "{raw}");
        }
        for raw in [
            "",
            "s",
            "10",
            "1.s.",
            "2 s",
            "-1s",
            "1d",
            ".s",
            "99999999999999999999h",
        ] {
            assert_eq!(parse_duration(raw), None, "{raw}");
        }
    }

    #[test]
    fn every_bad_variable_is_named_once() {
        let env = Env::from_pairs([("B", "x"), ("C", "7")]);
        let err = read(&env, |vars| {
            let a: u32 = vars.required("A", parse::u32);
            let b = vars.or("B", 3, parse::u32);
            let c = vars.or("C", 3, parse::u32);
            (a, b, c)
        })
        .unwrap_err();
        assert_eq!(
            err.vars(),
            [
                VarError {
                    name: "A".into(),
                    problem: "not set".into()
                },
                VarError {
                    name: "B".into(),
                    problem: "\"x\" is not a whole number from 0 to 4294967295".into()
                },
            ]
        );
        assert_eq!(Failure::from(err).exit_code(), 78);
    }

    #[test]
    fn a_check_after_the_parse_names_its_problem() {
        let env = Env::from_pairs([("N", "0")]);
        let err = read(&env, |vars| {
            vars.or("N", 3, |raw| {
                parse::checked(parse::u32(raw)?, |n| {
                    if *n == 0 {
                        Err("must be at least 1")
                    } else {
                        Ok(())
                    }
                })
            })
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "N: must be at least 1");
    }

    #[test]
    fn unset_optional_variables_take_their_default() {
        let got = read(&Env::default(), |vars| vars.or("X", true, parse::on_off)).unwrap();
        assert!(got);
        assert_eq!(Failure::software("boom").exit_code(), 1);
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn composite_durations_add_up(h in 0u64..1000, m in 0u64..1000, s in 0u64..1000, ms in 0u64..1000, us in 0u64..1000) {
            let raw = format!("{h}h{m}m{s}s{ms}ms{us}us");
            let want = Duration::from_secs(h * 3600 + m * 60 + s)
                + Duration::from_millis(ms)
                + Duration::from_micros(us);
            prop_assert_eq!(parse_duration(&raw), Some(want));
        }

        #[test]
        fn decimal_seconds_are_exact_to_the_nanosecond(whole in 0u64..100_000, nanos in 0u32..1_000_000_000) {
            let raw = format!("{whole}.{nanos:09}s");
            prop_assert_eq!(parse_duration(&raw), Some(Duration::new(whole, nanos)));
        }

        #[test]
        fn any_text_parses_or_is_rejected_without_a_panic(raw in "\\PC{0,24}") {
            let _ = parse::duration(&raw);
        }
    }
}
