//! Settings read with serde and checked, a bad value a settings error
//! (exit 78): the `check_*` functions, [`deserialize`],
//! [`deserialize_strict`] and their [`ReadError`].

use std::fmt;

use super::Error;
use crate::grpc::client;

/// Runs every check of a client's `settings`, as
/// [`Client::new`](client::Client::new) will: call it once the settings
/// are read (deserialised with `envy`, `figment` or `config`), so that a
/// bad value is a settings error (exit 78) naming every bad field.
///
/// # Errors
///
/// [`Error::settings`] wrapping the [`client::NewError`] that names every
/// bad field.
pub fn check_client(settings: &client::Settings) -> Result<(), Error> {
    settings.check().map_err(Error::settings)
}

/// Runs every check of an HTTP client's `settings`, as
/// [`http::client::Client::new`](crate::http::client::Client::new) will:
/// call it once the settings are read (deserialised with `envy`, `figment`
/// or `config`), so that a bad value is a settings error (exit 78) naming
/// every bad field. The HTTP client's [`check_client`].
///
/// # Errors
///
/// [`Error::settings`] wrapping the
/// [`http::client::NewError`](crate::http::client::NewError) that names
/// every bad field.
pub fn check_http_client(settings: &crate::http::client::Settings) -> Result<(), Error> {
    settings.check().map(|_| ()).map_err(Error::settings)
}

/// Runs every check of a server's `settings` ([`Settings::check`](crate::grpc::server::Settings::check)),
/// so that a bad value is a settings error (exit 78) naming every bad
/// field.
///
/// # Errors
///
/// [`Error::settings`] wrapping the [`SettingsError`](crate::grpc::server::SettingsError) that names every bad
/// field.
pub fn check_server(settings: &crate::grpc::server::Settings) -> Result<(), Error> {
    settings.check().map_err(Error::settings)
}

/// Runs every check of a RabbitMQ consumer's `settings`
/// ([`ConsumerSettings::check`](crate::rabbitmq::ConsumerSettings::check)),
/// so that a bad value is a settings error (exit 78) naming every bad
/// field.
///
/// ```
/// use humus::app::{ErrorKind, check_rabbitmq_consumer};
/// use humus::rabbitmq::ConsumerSettings;
///
/// let settings = ConsumerSettings { uri: "http://rabbit".into(), queue: "orders".into(), ..Default::default() };
/// let err = check_rabbitmq_consumer(&settings).unwrap_err();
/// assert_eq!((err.kind(), err.exit_code()), (ErrorKind::Settings, 78));
/// assert!(err.to_string().contains(r#"uri "http://rabbit" has the scheme "http""#), "{err}");
/// ```
///
/// # Errors
///
/// [`Error::settings`] wrapping the [`SettingsError`](crate::grpc::server::SettingsError) that names every bad
/// field.
#[cfg(feature = "rabbitmq")]
#[cfg_attr(docsrs, doc(cfg(feature = "rabbitmq")))]
pub fn check_rabbitmq_consumer(settings: &crate::rabbitmq::ConsumerSettings) -> Result<(), Error> {
    settings.check().map_err(Error::settings)
}

/// Runs every check of a RabbitMQ publisher's `settings`
/// ([`PublisherSettings::check`](crate::rabbitmq::PublisherSettings::check)),
/// as [`Publisher::new`](crate::rabbitmq::Publisher::new) will: call it
/// once the settings are read, so that a bad value is a settings error
/// (exit 78) naming every bad field.
///
/// # Errors
///
/// [`Error::settings`] wrapping the [`SettingsError`](crate::grpc::server::SettingsError) that names every bad
/// field.
#[cfg(feature = "rabbitmq")]
#[cfg_attr(docsrs, doc(cfg(feature = "rabbitmq")))]
pub fn check_rabbitmq_publisher(
    settings: &crate::rabbitmq::PublisherSettings,
) -> Result<(), Error> {
    settings.check().map_err(Error::settings)
}

/// Runs every check of a Kafka consumer's `settings`
/// ([`ConsumerSettings::check`](crate::kafka::ConsumerSettings::check)), as
/// [`Consumer::start`](crate::kafka::Consumer::start) will: call it once
/// the settings are read, so that a bad value is a settings error (exit
/// 78) naming every bad field.
///
/// # Errors
///
/// [`Error::settings`] wrapping the
/// [`kafka::SettingsError`](crate::kafka::SettingsError) that names every
/// bad field.
#[cfg(feature = "kafka")]
#[cfg_attr(docsrs, doc(cfg(feature = "kafka")))]
pub fn check_kafka_consumer(settings: &crate::kafka::ConsumerSettings) -> Result<(), Error> {
    settings.check().map_err(Error::settings)
}

/// Runs every check of a Kafka producer's `settings`
/// ([`ProducerSettings::check`](crate::kafka::ProducerSettings::check)),
/// as [`Producer::new`](crate::kafka::Producer::new) will: call it once
/// the settings are read, so that a bad value is a settings error (exit
/// 78) naming every bad field.
///
/// ```
/// use humus::app::{ErrorKind, check_kafka_producer};
/// use humus::kafka::ProducerSettings;
///
/// let settings = ProducerSettings { brokers: vec!["kafka://k:9092".into()], ..Default::default() };
/// let err = check_kafka_producer(&settings).unwrap_err();
/// assert_eq!((err.kind(), err.exit_code()), (ErrorKind::Settings, 78));
/// assert!(err.to_string().contains("brokers \"kafka://k:9092\" names a scheme"), "{err}");
/// ```
///
/// # Errors
///
/// [`Error::settings`] wrapping the
/// [`kafka::SettingsError`](crate::kafka::SettingsError) that names every
/// bad field.
#[cfg(feature = "kafka")]
#[cfg_attr(docsrs, doc(cfg(feature = "kafka")))]
pub fn check_kafka_producer(settings: &crate::kafka::ProducerSettings) -> Result<(), Error> {
    settings.check().map_err(Error::settings)
}

/// Deserialises settings (a client's or a server's [`Settings`](crate::grpc::client::Settings), or a
/// service's own struct of them) from `deserializer`, a file format's or a
/// loader's (`serde_json`'s, `toml`'s), so that a value serde refuses is a
/// settings error (exit 78) naming its path, then the format's own
/// message (serde_json's ends with where it is): `breaker.window: invalid
/// type: string "many", expected usize at line 1 column 51`, `timeout:
/// invalid value: string "10 parsecs", expected a duration such as "2s",
/// "250ms" or "1m30s" at line 1 column 46` (the examples below). The checks run after, with [`check_client`] and
/// [`check_server`].
///
/// An unknown top-level key is ignored here, as serde ignores it, so that
/// one environment or file can hold the settings of other parts of the
/// service; [`deserialize_strict`] refuses it. An unknown key inside a
/// section (`breaker`, `retry_budget`) is always an error naming the keys
/// it takes.
///
/// ```
/// use humus::app::{self, ErrorKind};
/// use humus::grpc::client::Settings;
///
/// let json = r#"{"addr": "carts:9090", "breaker": {"window": "many"}}"#;
/// let err = app::deserialize::<Settings, _>(&mut serde_json::Deserializer::from_str(json))
///     .unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Settings);
/// assert_eq!(
///     err.to_string(),
///     r#"breaker.window: invalid type: string "many", expected usize at line 1 column 51"#
/// );
///
/// let json = r#"{"addr": "carts:9090", "timeout": "10 parsecs"}"#;
/// let err = app::deserialize::<Settings, _>(&mut serde_json::Deserializer::from_str(json))
///     .unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     r#"timeout: invalid value: string "10 parsecs", expected a duration such as "2s", "250ms" or "1m30s" at line 1 column 46"#
/// );
/// ```
///
/// # Errors
///
/// [`Error::settings`] wrapping a [`ReadError`] whose message starts with
/// the path of the refused value.
pub fn deserialize<'de, T, D>(deserializer: D) -> Result<T, Error>
where
    T: serde::Deserialize<'de>,
    D: serde::Deserializer<'de>,
{
    serde_path_to_error::deserialize(deserializer).map_err(|e| Error::settings(ReadError::of(&e)))
}

/// [`deserialize`], which also refuses every key the settings do not take,
/// at any depth, naming each (`unknown setting timout`): for a file that
/// holds these settings and nothing else, where a misspelled key would
/// otherwise be ignored and its field keep its default without a word.
///
/// ```
/// use humus::app;
/// use humus::grpc::client::Settings;
///
/// let json = r#"{"addr": "carts:9090", "timout": "2s"}"#;
/// let err = app::deserialize_strict::<Settings, _>(&mut serde_json::Deserializer::from_str(json))
///     .unwrap_err();
/// assert_eq!(err.to_string(), "unknown setting timout (is it misspelled?)");
/// ```
///
/// # Errors
///
/// [`Error::settings`] wrapping a [`ReadError`]: every unknown key, or
/// the path of a refused value (an unknown key inside a section is one)
/// after the unknown keys read before it; what follows a refused value is
/// not read.
pub fn deserialize_strict<'de, T, D>(deserializer: D) -> Result<T, Error>
where
    T: serde::Deserialize<'de>,
    D: serde::Deserializer<'de>,
{
    let mut unknown = Vec::new();
    let mut ignored = |path: serde_ignored::Path<'_>| unknown.push(path.to_string());
    let read = serde_path_to_error::deserialize(serde_ignored::Deserializer::new(
        deserializer,
        &mut ignored,
    ));
    let settings = match read {
        Ok(settings) => settings,
        // The unknown keys read before the refused value are named too.
        Err(e) if !unknown.is_empty() => {
            let mut error = ReadError::unknown(unknown);
            let refused = ReadError::of(&e);
            error.message = format!("{}; {}", error.message, refused.message);
            error.paths.extend(refused.paths);
            return Err(Error::settings(error));
        }
        Err(e) => return Err(Error::settings(ReadError::of(&e))),
    };
    if unknown.is_empty() {
        Ok(settings)
    } else {
        Err(Error::settings(ReadError::unknown(unknown)))
    }
}

/// Durations as humantime reads them, to show with "a duration".
pub(super) const DURATION_EXAMPLES: &str = r#"such as "2s", "250ms" or "1m30s""#;

/// Why [`deserialize`] or [`deserialize_strict`] could not read settings:
/// the path of the value serde refused, and why; or the keys the settings
/// do not take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadError {
    paths: Vec<String>,
    message: String,
}

impl ReadError {
    fn of<E: fmt::Display>(e: &serde_path_to_error::Error<E>) -> ReadError {
        let path = e.path().to_string();
        // toml's message ends with a newline.
        let mut inner = e.inner().to_string().trim_end().to_owned();
        // humantime's words for any value that is not one: show the form.
        if inner.contains("expected a duration") && !inner.contains(DURATION_EXAMPLES) {
            inner = inner.replacen(
                "expected a duration",
                &format!("expected a duration {DURATION_EXAMPLES}"),
                1,
            );
        }
        if path == "." {
            // Refused as a whole (not a map, or a missing field of a struct
            // of the user's): serde's message says which.
            ReadError {
                paths: Vec::new(),
                message: inner,
            }
        } else {
            ReadError {
                message: format!("{path}: {inner}"),
                paths: vec![path],
            }
        }
    }

    fn unknown(paths: Vec<String>) -> ReadError {
        let (what, these) = if paths.len() == 1 {
            ("setting", "is it")
        } else {
            ("settings", "are they")
        };
        ReadError {
            message: format!("unknown {what} {} ({these} misspelled?)", paths.join(", ")),
            paths,
        }
    }

    /// The paths the error is about (`breaker.window`, `timeout`): the
    /// refused value's, or every unknown key's; none when the input was
    /// refused as a whole.
    pub fn paths(&self) -> impl Iterator<Item = &str> + '_ {
        self.paths.iter().map(String::as_str)
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ReadError {}
