//! The one settings error, [`InvalidSettings`], and [`Checks`], the whole
//! settings' check every transport runs: the shared sections' checks
//! written once, each naming its field by its path.

use std::fmt;
use std::time::Duration;

use super::{
    AttemptTimeoutSetting, InvalidValue, check_backoff_base, check_backoff_max, check_max_attempts,
    check_open_for, check_probe_timeout, check_probes, check_timeout, check_window,
};
use crate::{circuit, retry};

/// Why a transport refused its settings: every bad field, each named by
/// its path in the settings (a field's name, `timeout`, or a section's
/// and its field's, `breaker.window`, `retry_budget.token_ratio`, as a
/// configuration names them), with what is wrong with it.
///
/// Every transport's settings are refused with it: the gRPC client's
/// ([`grpc::client::NewError`](crate::grpc::client::NewError)), the HTTP
/// client's ([`http::client::NewError`](crate::http::client::NewError)),
/// the server's ([`grpc::server::SettingsError`](crate::grpc::server::SettingsError)),
/// the Kafka and RabbitMQ clients' (`kafka::SettingsError`, and the
/// server's name for RabbitMQ's). Its message names whose settings they
/// are, and which (`invalid client settings of carts:9090: timeout is
/// zero, want a duration more than zero`), so a service with several
/// clients tells which one is wrong.
///
/// Settings refused by a constructor (`Client::new`) are a fault in the
/// code (exit 1): each value read from configuration should have passed
/// its check where it was read ([`app::check_client`](crate::app::check_client)
/// and the others, exit 78), and a pair of values no single check sees
/// (`backoff_max` below `backoff_base`) is caught here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidSettings {
    /// Whose settings: `client`, `http client`, `server`, `kafka
    /// consumer`, `rabbitmq publisher`.
    of: &'static str,
    /// What names them in the message, when it is valid (the client's
    /// address, a consumer's group); empty: nothing.
    name: String,
    problems: Vec<(&'static str, String)>,
}

impl InvalidSettings {
    /// The settings of `of`, named `name` in the message (empty:
    /// unnamed), refused for one `field`, `problem`.
    pub(crate) fn one(
        of: &'static str,
        name: String,
        field: &'static str,
        problem: impl fmt::Display,
    ) -> Self {
        InvalidSettings {
            of,
            name,
            problems: vec![(field, problem.to_string())],
        }
    }

    /// The bad fields, in the order of the settings' fields, each by its
    /// path: a field's name (`"timeout"`), or a section's and its field's
    /// (`"breaker.window"`, `"retry_budget.token_ratio"`), as a
    /// configuration names them.
    pub fn fields(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.problems.iter().map(|(field, _)| *field)
    }

    /// Each bad field's path and what is wrong with it, for
    /// [`app::Env`](crate::app::Env) to name by its variable.
    pub(crate) fn problems(&self) -> Vec<(&'static str, String)> {
        self.problems.clone()
    }
}

impl fmt::Display for InvalidSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {} settings", self.of)?;
        if !self.name.is_empty() {
            write!(f, " of {}", self.name)?;
        }
        f.write_str(": ")?;
        write_each(f, &self.problems, |f, (field, problem)| {
            write!(f, "{field} {problem}")
        })
    }
}

/// Writes each of `problems` with `write_one`, one after another, `; `
/// between them: how a settings error lists its bad fields (the
/// transports' [`InvalidSettings`], failure injection's).
pub(crate) fn write_each<T>(
    f: &mut fmt::Formatter<'_>,
    problems: impl IntoIterator<Item = T>,
    mut write_one: impl FnMut(&mut fmt::Formatter<'_>, T) -> fmt::Result,
) -> fmt::Result {
    for (i, problem) in problems.into_iter().enumerate() {
        if i > 0 {
            f.write_str("; ")?;
        }
        write_one(f, problem)?;
    }
    Ok(())
}

impl std::error::Error for InvalidSettings {}

/// A whole settings' check under way: each bad field's path and what is
/// wrong with it, in the order checked. The shared sections have one
/// check each here, which every transport runs on its fields of them; a
/// transport puts its own fields' checks in between, in the order of its
/// settings.
#[derive(Default)]
pub(crate) struct Checks {
    problems: Vec<(&'static str, String)>,
}

impl Checks {
    /// Records `checked`'s problem, if any, as `field`'s.
    pub(crate) fn put(&mut self, field: &'static str, checked: Result<(), InvalidValue>) {
        if let Err(e) = checked {
            self.problems.push((field, e.reason));
        }
    }

    /// The `timeout` section: [`check_timeout`].
    pub(crate) fn timeout(&mut self, timeout: Duration) {
        self.put("timeout", check_timeout(timeout));
    }

    /// The `attempt_timeout` section: more than zero and at most 365
    /// days, when set.
    pub(crate) fn attempt_timeout(&mut self, attempt_timeout: impl AttemptTimeoutSetting) {
        self.put("attempt_timeout", attempt_timeout.check());
    }

    /// The `max_attempts` section: [`check_max_attempts`].
    pub(crate) fn max_attempts(&mut self, max_attempts: u32) {
        self.put("max_attempts", check_max_attempts(max_attempts));
    }

    /// The backoff: `backoff_base` and `backoff_max` each, and the ceiling
    /// not below the base (unless it is already refused as zero).
    pub(crate) fn backoff(&mut self, base: Duration, max: Duration) {
        self.put("backoff_base", check_backoff_base(base));
        self.put("backoff_max", check_backoff_max(max));
        if !max.is_zero() && max < base {
            self.put(
                "backoff_max",
                Err(InvalidValue::new(format!(
                    "{max:?} is below backoff_base {base:?}"
                ))),
            );
        }
    }

    /// The `retry_budget` section, each field by its path
    /// (`retry_budget.max_tokens`, `retry_budget.token_ratio`).
    pub(crate) fn retry_budget(&mut self, budget: &retry::BudgetConfig) {
        let retry::BudgetConfig {
            max_tokens,
            token_ratio,
        } = *budget;
        let part =
            |r: Result<(), retry::BudgetError>| r.map_err(|e| InvalidValue::new(e.to_string()));
        self.put(
            "retry_budget.max_tokens",
            part(retry::check_max_tokens(max_tokens)),
        );
        self.put(
            "retry_budget.token_ratio",
            part(retry::check_token_ratio(token_ratio)),
        );
    }

    /// The `breaker` section, each field by its path (`breaker.window`,
    /// ...).
    pub(crate) fn breaker(&mut self, breaker: &circuit::Config) {
        let circuit::Config {
            window,
            probes,
            open_for,
            probe_timeout,
        } = *breaker;
        self.put("breaker.window", check_window(window));
        self.put("breaker.probes", check_probes(probes));
        self.put("breaker.open_for", check_open_for(open_for));
        self.put("breaker.probe_timeout", check_probe_timeout(probe_timeout));
    }

    /// The value `parsed` holds, when good, or else `None` with its
    /// problem put as `field`'s: for a field whose check parses it (a
    /// URL, a URI), which the transport uses once every field is good.
    pub(crate) fn parsed<T>(
        &mut self,
        field: &'static str,
        parsed: Result<T, InvalidValue>,
    ) -> Option<T> {
        parsed.map_err(|e| self.put(field, Err(e))).ok()
    }

    /// The settings of `of`, refused for every bad field and named by
    /// `name` (empty: unnamed), if any field is bad.
    pub(crate) fn finish(
        self,
        of: &'static str,
        name: impl FnOnce() -> String,
    ) -> Result<(), InvalidSettings> {
        self.finish_with(of, Some(()), |_| name())
    }

    /// [`Checks::finish`] of settings with a field [`Checks::parsed`]:
    /// its value when every field is good, else the settings refused and
    /// named by `name` of it (`None` when it is bad).
    pub(crate) fn finish_with<T>(
        self,
        of: &'static str,
        parsed: Option<T>,
        name: impl FnOnce(Option<&T>) -> String,
    ) -> Result<T, InvalidSettings> {
        match parsed {
            Some(value) if self.problems.is_empty() => Ok(value),
            // Never empty: a field not parsed is one of the problems.
            parsed => Err(InvalidSettings {
                of,
                name: name(parsed.as_ref()),
                problems: self.problems,
            }),
        }
    }
}
