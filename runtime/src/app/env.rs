//! Settings read from environment variables, every bad or missing one
//! named at once: [`from_env`] and [`Env`].

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::de::{self, DeserializeOwned, IntoDeserializer as _, Visitor};

use super::Error;
use crate::grpc::{client, server};
use crate::http::client as http_client;

/// Reads a service's settings from the process's environment variables:
/// `build` reads each group of settings from [`Env`] ([`Env::client`],
/// [`Env::http_client`], [`Env::server`], or a struct of the service's
/// own with [`Env::read`]), and its result is returned only when every
/// variable it read was good. [`Env::process`] then [`Env::read_all`].
///
/// A field is read from the variable named by the group's prefix and the
/// field's name in capitals; a section's field adds the section's name:
/// with the prefix `LEDGER_`, `timeout` is `LEDGER_TIMEOUT` and
/// `breaker.open_for` is `LEDGER_BREAKER_OPEN_FOR`. A duration is written
/// as `250ms`, `2s` or `1m30s`; a list as values separated by commas. A
/// variable that is not set leaves its field's default. A variable that
/// starts with a group's prefix but that no group, and no [`Env::get`],
/// read is refused too (`LEDGER_BREAKER_OPENFOR: is set, but ...`): a
/// misspelled setting is an error, not a silently kept default. The
/// variables Kubernetes sets for a Service named as the prefix
/// (`LEDGER_SERVICE_HOST`, `LEDGER_PORT`, `LEDGER_PORT_50051_TCP_ADDR`, ...)
/// are left alone.
///
/// ```
/// use humus::app::{Env, ErrorKind};
///
/// let env = Env::from_pairs([
///     ("LEDGER_BREAKER_OPEN_FOR", "soon"),
///     ("LEDGER_MAX_ATTEMPTS", "0"),
///     ("RATES_ATTEMPT_TIMEOUT", "250ms"),
/// ]);
/// let err = env
///     .read_all(|env| (env.client("LEDGER_"), env.http_client("RATES_")))
///     .unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Settings); // exit 78
/// assert_eq!(
///     err.to_string(),
///     r#"LEDGER_BREAKER_OPEN_FOR: "soon" is not a duration such as "2s", "250ms" or "1m30s"; LEDGER_ADDR: not set; LEDGER_MAX_ATTEMPTS: is 0, want 1 or more (1 turns retries off); RATES_BASE_URL: not set"#
/// );
/// ```
///
/// # Errors
///
/// [`Error::settings`] wrapping an [`EnvError`] that names every bad or
/// missing variable, of every group `build` read.
pub fn from_env<R>(build: impl FnOnce(&mut Env) -> R) -> Result<R, Error> {
    Env::process().read_all(build)
}

/// A snapshot of environment variables, and the bad or missing ones
/// found while reading settings from them: see [`from_env`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<String, String>,
    bad: Vec<VarError>,
    /// The prefixes of the groups read so far, each with the fields its
    /// settings set in code (never read from a variable).
    prefixes: BTreeMap<String, BTreeSet<&'static str>>,
    /// The variables read so far, by a group or by [`Env::get`].
    used: RefCell<BTreeSet<String>>,
    /// The variables of the fields of the groups read so far.
    known: BTreeSet<String>,
}

impl Env {
    /// The process's environment, now. A variable whose name or value is
    /// not Unicode is left out, as if it were not set.
    pub fn process() -> Env {
        Env::from_pairs(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        )
    }

    /// An environment of exactly these variables (a test's).
    pub fn from_pairs<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Env
    where
        K: Into<String>,
        V: Into<String>,
    {
        Env {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            bad: Vec::new(),
            prefixes: BTreeMap::new(),
            used: RefCell::default(),
            known: BTreeSet::new(),
        }
    }

    /// The value of the variable `name`, if set. A variable read this way
    /// is the service's own, and never refused as a misspelled setting of
    /// a group whose prefix it shares (see [`Env::read_all`]).
    pub fn get(&self, name: &str) -> Option<&str> {
        let value = self.vars.get(name).map(String::as_str);
        if value.is_some() {
            self.used.borrow_mut().insert(name.to_owned());
        }
        value
    }

    /// Every variable, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Runs `build`, which reads settings from this environment, and
    /// returns what it built when every variable it read was good.
    ///
    /// # Errors
    ///
    /// [`Error::settings`] (exit 78) wrapping an [`EnvError`] that names
    /// every bad or missing variable `build` read, in the order read, then
    /// every variable that starts with the prefix of a group `build` read
    /// (other than the empty prefix) but that nothing read: a misspelled
    /// setting, or a group's variable that is not its setting.
    pub fn read_all<R>(mut self, build: impl FnOnce(&mut Env) -> R) -> Result<R, Error> {
        let built = build(&mut self);
        self.unread();
        if self.bad.is_empty() {
            Ok(built)
        } else {
            Err(Error::settings(EnvError { vars: self.bad }))
        }
    }

    /// A struct of settings (the service's own, or any
    /// `serde::Deserialize` one) from the variables that start with
    /// `prefix`, named as [`from_env`] says. Every bad variable, and every
    /// missing one of a field that has no default, is recorded for
    /// [`Env::read_all`], and `T::default()` stands in, so that the
    /// caller goes on reading the rest.
    pub fn read<T: DeserializeOwned + Default>(&mut self, prefix: &str) -> T {
        self.read_checked(prefix, None, |_: &mut T| Vec::new())
    }

    /// A gRPC client's settings from the variables that start with
    /// `prefix` ([`Env::read`]), checked: a value its check refuses is
    /// recorded under its variable's name (`LEDGER_ADDR: not set`), as
    /// [`check_client`](super::check_client) would refuse it by its field's.
    pub fn client(&mut self, prefix: &str) -> client::Settings {
        self.read_settings(prefix, |_| {})
    }

    /// An HTTP client's settings from the variables that start with
    /// `prefix`, checked: [`Env::client`]'s for
    /// [`check_http_client`](super::check_http_client).
    ///
    /// An App's HTTP dependency, whole:
    ///
    /// ```no_run
    /// use humus::app::{self, Exit};
    /// use humus::http::client as http_client;
    ///
    /// #[tokio::main]
    /// async fn main() -> Exit {
    ///     humus::App::new()
    ///         .run(|setup| async move {
    ///             // RATES_BASE_URL=https://rates:8443/v1: the point is http:rates:8443
    ///             let rates = app::from_env(|env| env.http_client("RATES_"))?; // exit 78, naming every bad variable
    ///             let rates = http_client::Client::new(&setup, rates)?; // connects nothing yet
    ///             # let _ = quote(&rates);
    ///             Ok(vec![]) // the servers whose handlers call `rates`
    ///         })
    ///         .await
    /// }
    ///
    /// // In a handler: reqwest's builder methods, sent through humus.
    /// async fn quote(rates: &http_client::Client) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    ///     // A GET is retried on 502, 503, 504 or no response, and waits a
    ///     // 429's or 503's Retry-After.
    ///     let quote = rates.get("/rates/EUR").send().await?.error_for_status()?;
    ///     // A POST is sent once unless it opts in.
    ///     rates.post("/quotes").header("idempotency-key", "q-7").body("{}").retry(true).send().await?;
    ///     Ok(quote.text().await?)
    /// }
    /// ```
    pub fn http_client(&mut self, prefix: &str) -> http_client::Settings {
        self.read_settings(prefix, |_| {})
    }

    /// A server's settings from the variables that start with `prefix`,
    /// checked: [`Env::client`]'s for [`check_server`](super::check_server).
    /// A server with no TLS config must say `<prefix>PLAINTEXT=true`; one
    /// that serves TLS is read with [`Env::server_with_tls`].
    pub fn server(&mut self, prefix: &str) -> server::Settings {
        self.read_settings(prefix, |s: &mut server::Settings| {
            s.env_prefix = Some(prefix.to_owned());
        })
    }

    /// A TLS server's settings: as [`Env::server`], with `tls` (its
    /// certificate and key, which no variable holds) set before the check,
    /// so that `<prefix>PLAINTEXT` need not be set (and setting it true is
    /// refused: a server serves one or the other).
    pub fn server_with_tls(
        &mut self,
        prefix: &str,
        tls: std::sync::Arc<rustls::ServerConfig>,
    ) -> server::Settings {
        self.read_settings(prefix, |s: &mut server::Settings| {
            s.tls = Some(tls);
            s.env_prefix = Some(prefix.to_owned());
        })
    }

    /// A Kafka producer's settings from the variables that start with
    /// `prefix`, checked: [`Env::client`]'s for
    /// [`check_kafka_producer`](super::check_kafka_producer) (feature
    /// `kafka`). `brokers` is a list (`kafka-1:9092,kafka-2:9092`);
    /// librdkafka's properties ([`librdkafka`](crate::kafka::ProducerSettings::librdkafka))
    /// are one variable each, `<prefix>LIBRDKAFKA_` then the property's
    /// name in capitals, `_` for `.`: `LEDGER_KAFKA_LIBRDKAFKA_LINGER_MS=5`
    /// is `linger.ms` (no property set from a string has a `_` of its own
    /// but `log_level`, which cannot be set so). A refused property is
    /// named under `<prefix>LIBRDKAFKA`.
    ///
    /// ```
    /// use humus::app::{Env, EnvError};
    ///
    /// let ledger = [
    ///     ("LEDGER_KAFKA_BROKERS", "kafka-1:9092,kafka-2:9092"),
    ///     ("LEDGER_KAFKA_DELIVERY_TIMEOUT", "5s"),
    ///     ("LEDGER_KAFKA_LIBRDKAFKA_QUEUE_BUFFERING_MAX_MESSAGES", "1000"),
    /// ];
    /// let settings = Env::from_pairs(ledger)
    ///     .read_all(|env| env.kafka_producer("LEDGER_KAFKA_"))
    ///     .unwrap();
    /// assert_eq!(settings.brokers, ["kafka-1:9092", "kafka-2:9092"]);
    /// assert_eq!(settings.delivery_timeout, std::time::Duration::from_secs(5));
    /// assert_eq!(settings.librdkafka["queue.buffering.max.messages"], "1000");
    ///
    /// // Every bad variable of every group, named.
    /// let audit = [("AUDIT_BROKERS", "kafka://kafka-1:9092"), ("AUDIT_TOPICS", "transfers")];
    /// let err = Env::from_pairs(ledger.into_iter().chain(audit))
    ///     .read_all(|env| (env.kafka_producer("LEDGER_KAFKA_"), env.kafka_consumer("AUDIT_")))
    ///     .unwrap_err();
    /// let vars = err.get_ref().downcast_ref::<EnvError>().unwrap().vars();
    /// let names: Vec<_> = vars.iter().map(|v| v.name()).collect();
    /// assert_eq!(names, ["AUDIT_BROKERS", "AUDIT_GROUP"]);
    /// assert!(vars[0].problem().contains("names a scheme"), "{err}");
    /// ```
    #[cfg(feature = "kafka")]
    #[cfg_attr(docsrs, doc(cfg(feature = "kafka")))]
    pub fn kafka_producer(&mut self, prefix: &str) -> crate::kafka::ProducerSettings {
        self.read_settings(prefix, |s: &mut crate::kafka::ProducerSettings| {
            s.librdkafka = librdkafka_properties(std::mem::take(&mut s.librdkafka));
        })
    }

    /// A Kafka consumer's settings from the variables that start with
    /// `prefix`, checked: [`Env::kafka_producer`]'s for
    /// [`check_kafka_consumer`](super::check_kafka_consumer) (feature
    /// `kafka`). `brokers` and `topics` are lists; librdkafka's properties
    /// are read as the producer's. Set
    /// [`trust_scenario`](crate::kafka::ConsumerSettings::trust_scenario)
    /// in code.
    #[cfg(feature = "kafka")]
    #[cfg_attr(docsrs, doc(cfg(feature = "kafka")))]
    pub fn kafka_consumer(&mut self, prefix: &str) -> crate::kafka::ConsumerSettings {
        self.read_settings(prefix, |s: &mut crate::kafka::ConsumerSettings| {
            s.librdkafka = librdkafka_properties(std::mem::take(&mut s.librdkafka));
        })
    }

    /// A RabbitMQ publisher's settings from the variables that start with
    /// `prefix`, checked: [`Env::client`]'s for
    /// [`check_rabbitmq_publisher`](super::check_rabbitmq_publisher)
    /// (feature `rabbitmq`). Set `tls` and `classify` in code.
    ///
    /// ```
    /// use humus::app::{Env, EnvError};
    ///
    /// let err = Env::from_pairs([("EVENTS_URI", "http://rabbit"), ("EVENTS_MAX_ATTEMPTS", "0")])
    ///     .read_all(|env| env.rabbitmq_publisher("EVENTS_"))
    ///     .unwrap_err();
    /// let vars = err.get_ref().downcast_ref::<EnvError>().unwrap().vars();
    /// let names: Vec<_> = vars.iter().map(|v| v.name()).collect();
    /// assert_eq!(names, ["EVENTS_URI", "EVENTS_MAX_ATTEMPTS"]);
    /// ```
    #[cfg(feature = "rabbitmq")]
    #[cfg_attr(docsrs, doc(cfg(feature = "rabbitmq")))]
    pub fn rabbitmq_publisher(&mut self, prefix: &str) -> crate::rabbitmq::PublisherSettings {
        self.read_settings(prefix, |_| {})
    }

    /// A RabbitMQ consumer's settings from the variables that start with
    /// `prefix`, checked: [`Env::client`]'s for
    /// [`check_rabbitmq_consumer`](super::check_rabbitmq_consumer)
    /// (feature `rabbitmq`). Set `tls` and `trust_scenario` in code.
    #[cfg(feature = "rabbitmq")]
    #[cfg_attr(docsrs, doc(cfg(feature = "rabbitmq")))]
    pub fn rabbitmq_consumer(&mut self, prefix: &str) -> crate::rabbitmq::ConsumerSettings {
        self.read_settings(prefix, |_| {})
    }

    /// Records, as bad, each variable under a prefix read that nothing read.
    fn unread(&mut self) {
        let used = self.used.borrow();
        let unread: Vec<VarError> = self
            .vars
            .keys()
            .filter(|name| !used.contains(*name) && !self.bad.iter().any(|v| &v.name == *name))
            .filter_map(|name| {
                let (prefix, in_code) = self
                    .prefixes
                    .iter()
                    .filter(|(p, _)| !p.is_empty() && name.starts_with(p.as_str()))
                    .max_by_key(|(p, _)| p.len())?;
                let rest = &name[prefix.len()..];
                if is_service_link(rest) {
                    return None;
                }
                if let Some(why) = set_in_code(rest, in_code) {
                    return Some(VarError {
                        name: name.clone(),
                        problem: format!("is set, but {why}: unset it"),
                    });
                }
                let near = nearest(name, self.known.iter().filter(|k| k.starts_with(prefix.as_str())));
                if let Some(near) = near.filter(|near| self.vars.contains_key(*near)) {
                    // The setting it looks like is set too: that one is read.
                    return Some(VarError {
                        name: name.clone(),
                        problem: format!(
                            "is set, but no setting of the {prefix} group has this name: did you mean {near}? {near} is set too, and is the one read: keep {near} and unset {name}"
                        ),
                    });
                }
                let hint = match near {
                    Some(near) => format!("did you mean {near}?"),
                    None => "check its spelling (a section's field is the section's name, '_', then the field's)".to_owned(),
                };
                Some(VarError {
                    name: name.clone(),
                    problem: format!(
                        "is set, but no setting of the {prefix} group has this name: {hint}; or unset it, or, if another program sets it, give the group a prefix of the service's own"
                    ),
                })
            })
            .collect();
        drop(used);
        self.bad.extend(unread);
    }

    /// Reads a `T` from the variables that start with `prefix`, then runs
    /// `check` on what was read: its problems, each a field's path
    /// (`breaker.open_for`) and what is wrong, are recorded under the
    /// field's variable, unless that variable was already found bad.
    /// Reads the settings `S` of a transport from the variables that start
    /// with `prefix`, `prepare`s them (what reading them takes beyond
    /// serde), and records every problem their check finds.
    fn read_settings<S: Checked>(&mut self, prefix: &str, prepare: impl FnOnce(&mut S)) -> S {
        self.read_checked(prefix, Some(S::IN_CODE), |s: &mut S| {
            prepare(s);
            s.problems()
        })
    }

    /// Reads a `T` from the variables that start with `prefix`, then runs
    /// `check` on it. `in_code` is `None` for a struct of the service's
    /// own, which has no check but its types, and a transport's fields
    /// set in code for its settings, which have their check.
    fn read_checked<T: DeserializeOwned + Default>(
        &mut self,
        prefix: &str,
        in_code: Option<&[&'static str]>,
        check: impl FnOnce(&mut T) -> Vec<(&'static str, String)>,
    ) -> T {
        self.prefixes
            .entry(prefix.to_owned())
            .or_default()
            .extend(in_code.unwrap_or_default());
        let (read, mut bad) = read_group::<T>(
            &self.vars,
            prefix,
            in_code.is_some(),
            &mut self.used.borrow_mut(),
            &mut self.known,
        );
        let Some(mut read) = read else {
            self.bad.append(&mut bad);
            return T::default();
        };
        for (path, problem) in check(&mut read) {
            let name = var_name(prefix, &path.replace('.', "_"));
            if bad.iter().any(|v| v.name == name) {
                continue;
            }
            // Unset, a field is "not set" (an empty address, say), unless
            // its check says more of what not setting it means.
            // A map's entries are variables under its own (`LIBRDKAFKA_`).
            let entries = format!("{name}_");
            let problem = if self.vars.contains_key(&name)
                || problem.starts_with("is not set")
                || self.vars.keys().any(|v| v.starts_with(&entries))
            {
                problem
            } else if let Some(other) = self.vars.keys().find(|k| k.eq_ignore_ascii_case(&name)) {
                format!("not set ({other} is: a variable's name is in capitals)")
            } else {
                "not set".to_owned()
            };
            bad.push(VarError { name, problem });
        }
        let ok = bad.is_empty();
        self.bad.append(&mut bad);
        if ok { read } else { T::default() }
    }
}

/// One bad or missing environment variable: its name, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VarError {
    name: String,
    problem: String,
}

impl VarError {
    /// The variable's name, such as `LEDGER_ADDR`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What is wrong with it, without its name: `not set`, or why its
    /// value was refused.
    pub fn problem(&self) -> &str {
        &self.problem
    }
}

impl fmt::Display for VarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.problem)
    }
}

/// Why [`from_env`] or [`Env::read_all`] refused the settings: every bad
/// or missing variable, `NAME: problem`, separated by `; `.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvError {
    vars: Vec<VarError>,
}

impl EnvError {
    /// The bad or missing variables, in the order they were read. Never
    /// empty.
    pub fn vars(&self) -> &[VarError] {
        &self.vars
    }
}

impl fmt::Display for EnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, var) in self.vars.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            fmt::Display::fmt(var, f)?;
        }
        Ok(())
    }
}

impl std::error::Error for EnvError {}

/// Whether `rest`, a variable's name after a group's prefix, is one of the
/// variables Kubernetes sets for a Service whose name the prefix also is
/// (a Service `ledger` gives every pod `LEDGER_SERVICE_HOST`,
/// `LEDGER_SERVICE_PORT`, `LEDGER_SERVICE_PORT_<port name>`, `LEDGER_PORT`
/// and `LEDGER_PORT_<port>_<TCP, UDP or SCTP>`, alone or with `_PROTO`,
/// `_PORT` or `_ADDR`): no humus setting has such a name, so they are left
/// alone rather than refused as misspellings.
fn is_service_link(rest: &str) -> bool {
    if rest == "SERVICE_HOST" || rest == "SERVICE_PORT" || rest == "PORT" {
        return true;
    }
    if let Some(name) = rest.strip_prefix("SERVICE_PORT_") {
        return !name.is_empty();
    }
    let Some(tail) = rest.strip_prefix("PORT_") else {
        return false;
    };
    let Some((port, tail)) = tail.split_once('_') else {
        return false;
    };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let (protocol, field) = tail.split_once('_').unwrap_or((tail, ""));
    matches!(protocol, "TCP" | "UDP" | "SCTP") && matches!(field, "" | "PROTO" | "PORT" | "ADDR")
}

/// Why `rest`, a variable's name after a group's prefix, is not read: one
/// of the group's fields set in code (`in_code`: a TLS config, a classify
/// function, a breaker policy, per-attempt layers, a trust function), or a
/// client's `PLAINTEXT`, which is a server's setting.
fn set_in_code(rest: &str, in_code: &BTreeSet<&'static str>) -> Option<String> {
    let field = rest.to_ascii_lowercase();
    if in_code.contains(field.as_str()) {
        return Some(format!(
            "`{field}` is set in code, never read from a variable"
        ));
    }
    (rest == "PLAINTEXT").then(|| {
        "a client has no `plaintext` setting: it dials plain text unless its `tls` is set in code"
            .to_owned()
    })
}

/// The name among `known` nearest to `name`, if it is near enough to be
/// a misspelling of it: at most 2 edits, or a quarter of its length.
fn nearest<'k>(name: &str, known: impl Iterator<Item = &'k String>) -> Option<&'k str> {
    let most = (name.len() / 4).max(2);
    known
        .map(|k| (edits(name, k), k))
        .filter(|(d, _)| *d <= most)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.as_str())
}

/// The Levenshtein distance between `a` and `b`, by bytes.
fn edits(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.as_bytes().iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// librdkafka's properties as read from their variables' names
/// (`linger_ms`): `.` for each `_` (`linger.ms`).
#[cfg(feature = "kafka")]
fn librdkafka_properties(read: BTreeMap<String, String>) -> BTreeMap<String, String> {
    read.into_iter()
        .map(|(k, v)| (k.replace('_', "."), v))
        .collect()
}

/// The variable of a field (or a section) under `prefix`: `addr` under
/// `WALLET_` is `WALLET_ADDR`.
pub(crate) fn var_name(prefix: &str, field: &str) -> String {
    format!("{prefix}{}", field.to_ascii_uppercase())
}

/// Reads one group: a `T`, whose fields of bad variables keep their
/// defaults (none when a variable it needs could not be read at all), and
/// every bad or missing variable.
///
/// serde stops at the first error; so each pass that meets one records
/// it, and the next pass reads on without that variable (its field keeps
/// its default) or, for a field with none, with a stand-in value, until a
/// pass reads the whole struct. A field whose type takes no stand-in (an
/// empty string, zero, an empty list) ends the reading there.
fn read_group<T: DeserializeOwned>(
    vars: &BTreeMap<String, String>,
    prefix: &str,
    checked: bool,
    used: &mut BTreeSet<String>,
    known: &mut BTreeSet<String>,
) -> (Option<T>, Vec<VarError>) {
    let mut pass = Pass {
        vars,
        checked,
        skip: BTreeSet::new(),
        stand_in: BTreeSet::new(),
        used: RefCell::default(),
        known: RefCell::default(),
        owner: RefCell::default(),
    };
    let mut bad: Vec<VarError> = Vec::new();
    let read = loop {
        // Each pass gives the variables to the fields afresh.
        pass.owner.borrow_mut().clear();
        let top = Field {
            pass: &pass,
            name: format!("{prefix}*"),
            prefix: prefix.to_owned(),
            value: None,
            stand_in: false,
        };
        match T::deserialize(top) {
            Ok(read) => {
                break Some(read);
            }
            Err(DeError::Var {
                name,
                problem,
                missing,
            }) => {
                if !bad.iter().any(|v| v.name == name) {
                    bad.push(VarError {
                        name: name.clone(),
                        problem,
                    });
                }
                let next = if missing {
                    pass.stand_in.insert(name)
                } else {
                    !pass.stand_in.contains(&name) && pass.skip.insert(name)
                };
                if !next {
                    break None;
                }
            }
            Err(DeError::Missing(field)) => {
                bad.push(VarError {
                    name: var_name(prefix, field),
                    problem: "not set".to_owned(),
                });
                break None;
            }
            Err(DeError::Other(problem)) => {
                // Refused as a whole (a check of the struct's own across
                // fields): under the group's prefix.
                bad.push(VarError {
                    name: format!("{prefix}*"),
                    problem,
                });
                break None;
            }
        }
    };
    used.extend(pass.used.take());
    known.extend(pass.known.take());
    (read, bad)
}

/// One pass over the variables: those found bad are skipped, and those
/// missing with no default stand in.
struct Pass<'a> {
    vars: &'a BTreeMap<String, String>,
    /// Whether a check of the settings' own follows the reading (a
    /// transport's), which says a field's valid range: a whole number
    /// that does not parse then says only that, not its type's range,
    /// which is not the field's (a breaker's window is 1 to 65536, not
    /// 0 to 18446744073709551615). A struct of the service's own has no
    /// check but its types, so its range is its type's.
    checked: bool,
    skip: BTreeSet<String>,
    stand_in: BTreeSet<String>,
    /// The variables read, set or found bad.
    used: RefCell<BTreeSet<String>>,
    /// The variable of every field of the structs read: the names a
    /// misspelled variable is compared with.
    known: RefCell<BTreeSet<String>>,
    /// Each variable's owner in this pass, the field's variable
    /// [`Pass::present`] gave it to (its longest): a section's fields read only the
    /// variables owned by the section, so a flat key's variable
    /// (`LEDGER_BREAKER_OPEN_FOR`, `breaker_open_for`'s) is not read again
    /// as the section's field of the same name (`breaker.open_for`).
    owner: RefCell<BTreeMap<String, String>>,
}

impl Pass<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        if self.skip.contains(name) {
            return None;
        }
        let value = self.vars.get(name).map(String::as_str);
        if value.is_some() {
            self.used.borrow_mut().insert(name.to_owned());
        }
        value
    }

    /// The fields of a struct under `prefix` that have a variable (their
    /// own, or a section's field's), or stand in: a variable is its
    /// longest field's (`LEDGER_BREAKER_OPEN_FOR` is `breaker_open_for`'s
    /// if the struct has that field, else `breaker`'s). A section's
    /// (`prefix` `LEDGER_BREAKER_`) fields see only the variables its
    /// parent gave the section.
    fn present(&self, prefix: &str, fields: &'static [&'static str]) -> Vec<&'static str> {
        let names: Vec<String> = fields.iter().map(|f| var_name(prefix, f)).collect();
        self.known.borrow_mut().extend(names.iter().cloned());
        let mut present = vec![false; fields.len()];
        for (i, name) in names.iter().enumerate() {
            if self.stand_in.contains(name) {
                present[i] = true;
            }
        }
        let section = prefix.strip_suffix('_').unwrap_or(prefix);
        let vars: Vec<&String> = {
            let owner = self.owner.borrow();
            self.vars
                .keys()
                .filter(|v| !self.skip.contains(*v))
                .filter(|v| owner.get(*v).is_none_or(|o| o == section))
                .collect()
        };
        for var in vars {
            let owner = names
                .iter()
                .enumerate()
                .filter(|(_, name)| {
                    var.strip_prefix(name.as_str())
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with('_'))
                })
                .max_by_key(|(_, name)| name.len());
            if let Some((i, name)) = owner {
                present[i] = true;
                self.owner.borrow_mut().insert(var.clone(), name.clone());
            }
        }
        fields
            .iter()
            .zip(present)
            .filter_map(|(f, p)| p.then_some(*f))
            .collect()
    }
}

/// A reading error: a variable's (bad, or `missing` with no default), a
/// field missing from a struct (named by its struct's deserializer), or
/// another.
#[derive(Debug)]
enum DeError {
    Var {
        name: String,
        problem: String,
        missing: bool,
    },
    Missing(&'static str),
    Other(String),
}

impl DeError {
    /// The error as `name`'s, unless it is already a variable's.
    fn of(self, name: &str) -> DeError {
        match self {
            DeError::Other(problem) => DeError::Var {
                name: name.to_owned(),
                problem,
                missing: false,
            },
            e => e,
        }
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeError::Var { name, problem, .. } => write!(f, "{name}: {problem}"),
            DeError::Missing(field) => write!(f, "missing field {field}"),
            DeError::Other(problem) => f.write_str(problem),
        }
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> DeError {
        DeError::Other(msg.to_string())
    }

    fn invalid_value(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> DeError {
        DeError::Other(is_not(unexp, exp))
    }

    fn invalid_type(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> DeError {
        DeError::Other(is_not(unexp, exp))
    }

    fn missing_field(field: &'static str) -> DeError {
        DeError::Missing(field)
    }
}

/// `"soon" is not a duration such as ...`: a value's problem, as an
/// operator reads it.
fn is_not(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> String {
    let value = match unexp {
        de::Unexpected::Str(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    let exp = exp.to_string();
    if exp == "a duration" {
        format!(
            "{value} is not a duration {}",
            super::settings::DURATION_EXAMPLES
        )
    } else {
        format!("{value} is not {exp}")
    }
}

/// The deserializer of one field (or, at the top, of the group): its
/// variable's value, or a section of variables under its name.
struct Field<'p, 'a> {
    pass: &'p Pass<'a>,
    /// The field's variable.
    name: String,
    /// The prefix of its fields' variables, if it is a section:
    /// `LEDGER_BREAKER_` (the group's own at the top).
    prefix: String,
    value: Option<String>,
    /// A field with no default whose variable is not set: a stand-in
    /// value, so the rest is read.
    stand_in: bool,
}

impl<'p, 'a> Field<'p, 'a> {
    fn of(pass: &'p Pass<'a>, name: String) -> Field<'p, 'a> {
        Field {
            value: pass.get(&name).map(str::to_owned),
            stand_in: pass.stand_in.contains(&name),
            prefix: format!("{name}_"),
            pass,
            name,
        }
    }

    /// Its value, parsed as `what` by `parse`.
    fn parse<T: std::str::FromStr>(&self, what: &dyn fmt::Display) -> Result<T, DeError> {
        let raw = self.raw()?;
        raw.parse()
            .map_err(|_| DeError::Other(format!("{raw:?} is not {what}")))
    }

    /// Its value. A field that is not a section has none when it was
    /// read for the variables under its name, which are no settings.
    fn raw(&self) -> Result<&str, DeError> {
        if self.stand_in {
            return Ok("");
        }
        self.value.as_deref().ok_or_else(|| {
            let under = self.pass.vars.keys().find(|v| v.starts_with(&self.prefix));
            DeError::Var {
                name: under.cloned().unwrap_or_else(|| self.name.clone()),
                problem: format!("is not a setting ({} is)", self.name),
                missing: false,
            }
        })
    }
}

impl Field<'_, '_> {
    /// Its value, a whole number of a type from `min` to `max`. One that
    /// does not parse is refused with the type's range when the type is
    /// the only check ([`Pass::checked`]); else with what it is (not a
    /// whole number, negative, too large), the settings' check saying
    /// the valid range of a value that parses (`is 0, want 1 to 65536
    /// results`), each range written once, in its check.
    fn whole<T: std::str::FromStr>(&self, min: i128, max: u128) -> Result<T, DeError> {
        let raw = self.raw()?;
        raw.parse().map_err(|_| {
            DeError::Other(if self.pass.checked {
                format!("{raw:?} {}", not_whole(raw, min))
            } else {
                format!("{raw:?} is not a whole number from {min} to {max}")
            })
        })
    }
}

/// What `raw`, which a whole number type from `min` does not parse, is:
/// a whole number out of the type's reach (negative, too large, too
/// small), or not a whole number at all.
fn not_whole(raw: &str, min: i128) -> &'static str {
    let (negative, digits) = match raw.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, raw.strip_prefix('+').unwrap_or(raw)),
    };
    let whole = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    let zero = digits.bytes().all(|b| b == b'0');
    match (whole, negative) {
        (true, false) => "is too large a number",
        (true, true) if !zero && min == 0 => "is negative",
        (true, true) if !zero => "is too small a number",
        _ => "is not a whole number",
    }
}

macro_rules! whole {
    ($($method:ident $visit:ident $t:ty;)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
            let v: $t = self.whole(<$t>::MIN as i128, <$t>::MAX as u128)?;
            visitor.$visit(v)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for Field<'_, '_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let raw = self.raw()?;
        visitor.visit_str(raw)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.stand_in {
            return visitor.visit_bool(false);
        }
        visitor.visit_bool(self.parse(&"true or false")?)
    }

    whole! {
        deserialize_i8 visit_i8 i8;
        deserialize_i16 visit_i16 i16;
        deserialize_i32 visit_i32 i32;
        deserialize_i64 visit_i64 i64;
        deserialize_u8 visit_u8 u8;
        deserialize_u16 visit_u16 u16;
        deserialize_u32 visit_u32 u32;
        deserialize_u64 visit_u64 u64;
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.stand_in {
            return visitor.visit_f64(0.0);
        }
        visitor.visit_f64(self.parse(&"a number")?)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.stand_in {
            return visitor.visit_none();
        }
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let raw = self.raw()?;
        let items: Vec<&str> = if raw.is_empty() {
            Vec::new()
        } else {
            raw.split(',').map(str::trim).collect()
        };
        visitor.visit_seq(de::value::SeqDeserializer::new(items.into_iter().map(
            |item| Field {
                pass: self.pass,
                name: self.name.clone(),
                prefix: self.prefix.clone(),
                value: Some(item.to_owned()),
                stand_in: false,
            },
        )))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        if self.value.is_some() {
            return Err(DeError::Var {
                name: self.name.clone(),
                problem: format!(
                    "is a section: set its fields, such as {}",
                    var_name(&self.prefix, fields.first().copied().unwrap_or_default())
                ),
                missing: false,
            });
        }
        let prefix = self.prefix;
        let present = self.pass.present(&prefix, fields);
        let section = Section {
            pass: self.pass,
            prefix: &prefix,
            fields: present.into_iter(),
            next: None,
        };
        visitor.visit_map(section).map_err(|e| match e {
            DeError::Missing(field) => DeError::Var {
                name: var_name(&prefix, field),
                problem: "not set".to_owned(),
                missing: true,
            },
            e => e,
        })
    }

    /// A map's entries are the variables under its name, each keyed by the
    /// rest of its name in lowercase: `LEDGER_LIBRDKAFKA_LINGER_MS` is the
    /// entry `linger_ms` of the map `librdkafka` of the group `LEDGER_`.
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.value.is_some() {
            return Err(DeError::Var {
                name: self.name.clone(),
                problem: format!("is a map: set one variable per entry, {}<KEY>", self.prefix),
                missing: false,
            });
        }
        let entries: Vec<(String, Field<'_, '_>)> = self
            .pass
            .vars
            .keys()
            .filter(|v| v.len() > self.prefix.len() && v.starts_with(&self.prefix))
            .filter(|v| !self.pass.skip.contains(*v))
            .map(|v| {
                (
                    v[self.prefix.len()..].to_ascii_lowercase(),
                    Field::of(self.pass, v.clone()),
                )
            })
            .collect();
        let mut map = de::value::MapDeserializer::new(entries.into_iter());
        let read = visitor.visit_map(&mut map)?;
        map.end()?;
        Ok(read)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let raw = self.raw()?.to_owned();
        visitor.visit_enum(raw.into_deserializer())
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        i128 u128 char str string bytes byte_buf unit unit_struct
        tuple_struct identifier
    }
}

/// The fields of a section that have a variable, one by one.
struct Section<'p, 'a, 's> {
    pass: &'p Pass<'a>,
    prefix: &'s str,
    fields: std::vec::IntoIter<&'static str>,
    next: Option<&'static str>,
}

impl<'de> de::MapAccess<'de> for Section<'_, '_, '_> {
    type Error = DeError;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some(field) = self.fields.next() else {
            return Ok(None);
        };
        self.next = Some(field);
        seed.deserialize(de::value::BorrowedStrDeserializer::new(field))
            .map(Some)
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, DeError> {
        let field = self.next.take().unwrap_or_default();
        let name = var_name(self.prefix, field);
        seed.deserialize(Field::of(self.pass, name.clone()))
            .map_err(|e| e.of(&name))
    }
}

/// A list's items are fields of their own, of the list's variable.
impl<'de, 'p, 'a> de::IntoDeserializer<'de, DeError> for Field<'p, 'a> {
    type Deserializer = Field<'p, 'a>;

    fn into_deserializer(self) -> Field<'p, 'a> {
        self
    }
}

/// A transport's settings, as [`Env`] reads them: the fields set in code
/// (a variable named after one is known, and says so), and the problems
/// of their check, each under its field's path.
trait Checked: DeserializeOwned + Default {
    /// The fields set in code, never read.
    const IN_CODE: &'static [&'static str];

    /// Every problem the settings' check finds.
    fn problems(&self) -> Vec<(&'static str, String)>;
}

/// [`Checked`] for each transport's settings: their `IN_CODE`, and their
/// `check`'s problems.
macro_rules! checked {
    ($($(#[$cfg:meta])* $settings:ty,)*) => {$(
        $(#[$cfg])*
        impl Checked for $settings {
            const IN_CODE: &'static [&'static str] = <$settings>::IN_CODE;

            fn problems(&self) -> Vec<(&'static str, String)> {
                self.check().err().map_or_else(Vec::new, |e| e.problems())
            }
        }
    )*};
}

checked!(
    client::Settings,
    http_client::Settings,
    server::Settings,
    #[cfg(feature = "kafka")]
    crate::kafka::ProducerSettings,
    #[cfg(feature = "kafka")]
    crate::kafka::ConsumerSettings,
    #[cfg(feature = "rabbitmq")]
    crate::rabbitmq::PublisherSettings,
    #[cfg(feature = "rabbitmq")]
    crate::rabbitmq::ConsumerSettings,
);
