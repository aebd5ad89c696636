//! How an [`App`](super::App) ends: its [`Error`], the error's
//! [`ErrorKind`] and exit code, and the [`Exit`] `main` returns.

use std::fmt;
use std::process::{ExitCode, Termination};

use crate::InvalidSettings;
use crate::grpc::client;
use crate::grpc::server::ServeError;

/// A boxed error of the user's.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The exit code of a settings error: 78, `EX_CONFIG` of BSD's
/// `sysexits.h`.
pub const EXIT_CONFIG: u8 = 78;

/// The exit code of any other error: 1.
pub const EXIT_FAILURE: u8 = 1;

/// The exit code of a stop forced by a second stop signal while the App
/// was stopping: 130, what a shell reports for a program ended by Ctrl-C
/// (128 + SIGINT), whichever signal the second one was.
pub const EXIT_FORCED: u8 = 130;

/// What kind of error ended an [`App`](super::App), which decides its exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A bad setting: exit [`EXIT_CONFIG`] (78).
    Settings,
    /// Anything else, a fault in the code among them: exit
    /// [`EXIT_FAILURE`] (1).
    Other,
    /// A stop forced by a second stop signal, which ended the calls still
    /// in flight with `UNAVAILABLE` (while the servers stopped) and skipped
    /// what was left of the stop: exit [`EXIT_FORCED`] (130). Only the App
    /// makes it.
    Forced,
}

/// An error of a step of the [`App`](super::App): of the user's telemetry, failure
/// injection or init function, or of a server.
///
/// [`Error::settings`] marks a bad setting (exit 78): a configuration
/// loader's error that names the variable or the field's path, or the
/// error of a check run on settings once they are read ([`check_client`](super::check_client),
/// [`check_server`](super::check_server), which name every bad field). Every other error is
/// [`Error::other`] (exit 1), and so is a constructor's refusal with `?`
/// ([`client::NewError`] of `Client::new`, [`SettingsError`](crate::grpc::server::SettingsError) of
/// `Server::new`): they run the checks again, and settings that reach them
/// unchecked, or built in code, or a pair of values that no one field's
/// check sees together (a backoff ceiling below its base), are a fault in
/// the code. librdkafka's refusal to build a Kafka client with `?` is a
/// settings error: no check sees it before.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    source: BoxError,
}

impl Error {
    /// A settings error (exit 78).
    pub fn settings(source: impl Into<BoxError>) -> Error {
        Error {
            kind: ErrorKind::Settings,
            source: source.into(),
        }
    }

    /// Any other error (exit 1).
    pub fn other(source: impl Into<BoxError>) -> Error {
        Error {
            kind: ErrorKind::Other,
            source: source.into(),
        }
    }

    /// Its kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The exit code it ends the App with: 78, 1, or 130 for a forced
    /// stop.
    pub fn exit_code(&self) -> u8 {
        match self.kind {
            ErrorKind::Settings => EXIT_CONFIG,
            ErrorKind::Other => EXIT_FAILURE,
            ErrorKind::Forced => EXIT_FORCED,
        }
    }

    /// The error of a stop forced by a second stop signal (exit 130):
    /// while the servers stopped (`calls_ended`), or while the on-stop
    /// hooks ran.
    pub(super) fn forced(calls_ended: bool) -> Error {
        let what = if calls_ended {
            "calls still in flight were ended with UNAVAILABLE"
        } else {
            "the on-stop hooks not yet run, and the telemetry's flush, were skipped"
        };
        Error {
            kind: ErrorKind::Forced,
            source: format!("stopped at once by a second stop signal: {what}").into(),
        }
    }

    /// The error it wraps.
    pub fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.source
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.source, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

/// A constructor's refusal of its settings with `?` (`Client::new`'s
/// [`client::NewError`], `Server::new`'s [`SettingsError`](crate::grpc::server::SettingsError), the HTTP, Kafka
/// and RabbitMQ clients' alike): exit 1, a fault in the code, as the
/// checks run where the settings are read ([`check_client`](super::check_client)
/// and the others) make a bad value exit 78.
impl From<InvalidSettings> for Error {
    fn from(e: InvalidSettings) -> Error {
        Error::other(e)
    }
}

/// `From` a Kafka client's refusal, `$error`: its settings' check's
/// [`SettingsError`](crate::kafka::SettingsError) as every constructor's;
/// librdkafka's error a settings error (exit 78) when it refused the
/// client's configuration ([`refused_config`]), else exit 1.
#[cfg(feature = "kafka")]
macro_rules! from_kafka_error {
    ($($(#[$doc:meta])* $error:ident,)*) => {$(
        $(#[$doc])*
        #[cfg_attr(docsrs, doc(cfg(feature = "kafka")))]
        impl From<crate::kafka::$error> for Error {
            fn from(e: crate::kafka::$error) -> Error {
                use crate::kafka::$error;
                match e {
                    $error::Settings(e) => Error::from(e),
                    $error::Kafka { ref source, .. } if refused_config(source) => {
                        Error::settings(e)
                    }
                    $error::Kafka { .. } => Error::other(e),
                }
            }
        }
    )*};
}

#[cfg(feature = "kafka")]
from_kafka_error!(
    /// The Kafka producer's refusal with `?` (`Producer::new`'s
    /// [`NewError`](crate::kafka::NewError)): its settings' check
    /// as every constructor's refusal (exit 1: [`check_kafka_producer`](super::check_kafka_producer) and
    /// [`Env::kafka_producer`](super::Env::kafka_producer) run it where the
    /// settings are read, librdkafka's check of each property among them);
    /// librdkafka's refusal to build its client, a settings error (exit 78).
    ///
    /// rdkafka 0.39 builds a producer in three steps that can fail:
    /// `ClientConfig::create_native_config` and the `log.queue` property
    /// (`KafkaError::ClientConfig`: `rd_kafka_conf_set` refusing a name or a
    /// value), `rd_kafka_new` (`KafkaError::ClientCreation`: librdkafka's
    /// check of the properties together, such as `linger.ms` not below
    /// `message.timeout.ms`, and of what they name, a TLS key or a SASL
    /// mechanism; its only other failure, a thread it could not start, is
    /// not one rdkafka tells apart), and `rd_kafka_set_log_queue`
    /// (`KafkaError::Global`, not the configuration's: exit 1). The first two
    /// only the configuration mends, and no field's check sees the second.
    NewError,
    /// The Kafka consumer's refusal with `?` (`Consumer::start`'s
    /// [`StartError`](crate::kafka::StartError)), as the producer's: its settings'
    /// check exit 1, librdkafka's refusal to build its client (or its
    /// dead-letter producer) exit 78, any other of librdkafka's errors (the
    /// subscription's) exit 1.
    StartError,
);

/// Whether `e` is librdkafka's refusal of a client's configuration: a
/// property's name or value (`rd_kafka_conf_set`), or the properties
/// together when it builds the client (`rd_kafka_new`).
#[cfg(feature = "kafka")]
fn refused_config(e: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::error::KafkaError;
    matches!(
        e,
        KafkaError::ClientConfig(..) | KafkaError::ClientCreation(_)
    )
}

/// A [`Methods`](client::Methods) registry refused with `?` (two services'
/// descriptors for one method path): exit 1, a fault in the code that
/// builds it.
impl From<client::DuplicateMethod> for Error {
    fn from(e: client::DuplicateMethod) -> Error {
        Error::other(e)
    }
}

impl From<ServeError> for Error {
    /// A settings error (exit 78) for an address the machine does not
    /// have, which only the settings can mend; any other error is
    /// [`Error::other`] (an address in use, say, is another process's).
    fn from(e: ServeError) -> Error {
        match &e {
            ServeError::Listen { source, .. }
                if source.kind() == std::io::ErrorKind::AddrNotAvailable =>
            {
                Error::settings(e)
            }
            _ => Error::other(e),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::other(e)
    }
}

impl From<BoxError> for Error {
    fn from(e: BoxError) -> Error {
        Error::other(e)
    }
}

/// How an [`App`](super::App) ended: its exit code and, unless it is 0, the error.
///
/// It is a [`Termination`], so `main` can return it: it prints the error
/// to standard error and exits with the code.
#[derive(Debug)]
pub struct Exit {
    pub(super) code: u8,
    pub(super) error: Option<Error>,
}

impl Exit {
    /// The exit code: 0, [`EXIT_CONFIG`], [`EXIT_FAILURE`] or
    /// [`EXIT_FORCED`].
    pub fn code(&self) -> u8 {
        self.code
    }

    /// The error that ended the App, if it did not stop cleanly.
    pub fn error(&self) -> Option<&Error> {
        self.error.as_ref()
    }

    /// The exit of a clean stop: code 0, no error. For a `main` that ends
    /// before or without [`App::run`](crate::App::run) the way it does.
    pub fn clean() -> Exit {
        Exit {
            code: 0,
            error: None,
        }
    }

    /// The exit for `error`: its [`Error::exit_code`] (78 for a bad
    /// setting, 1 otherwise), the error written on standard error when
    /// `main` returns it. For a `main` that fails before [`App::run`](crate::App::run)
    /// (`Exit::failed(e.into())`, or `Exit::from(e)`).
    ///
    /// ```
    /// use humus::app::{Error, Exit};
    ///
    /// let exit = Exit::failed(Error::settings("LEDGER_ADDR: not set"));
    /// assert_eq!(exit.code(), 78);
    /// assert_eq!(Exit::from(Error::settings("x")).code(), 78);
    /// assert_eq!(Exit::clean().code(), 0);
    /// ```
    pub fn failed(error: Error) -> Exit {
        Exit {
            code: error.exit_code(),
            error: Some(error),
        }
    }
}

impl From<Error> for Exit {
    fn from(error: Error) -> Exit {
        Exit::failed(error)
    }
}

impl Exit {
    /// What `main` writes on standard error when it returns this exit:
    /// nothing after a clean stop; `error: ` and the error; the bad
    /// variables of an [`EnvError`](super::EnvError) one a line, when there
    /// are several, so that a terminal shows each.
    fn report_text(&self) -> Option<String> {
        let error = self.error.as_ref()?;
        match error.get_ref().downcast_ref::<super::EnvError>() {
            Some(env) if env.vars().len() > 1 => {
                let mut text = format!("error: {} bad settings:", env.vars().len());
                for var in env.vars() {
                    text.push_str(&format!("\n  {}: {}", var.name(), var.problem()));
                }
                Some(text)
            }
            _ => Some(format!("error: {error}")),
        }
    }
}

impl Termination for Exit {
    fn report(self) -> ExitCode {
        if let Some(text) = self.report_text() {
            eprintln!("{text}");
        }
        ExitCode::from(self.code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_bad_variables_are_written_one_a_line() {
        let exit = crate::app::Env::from_pairs([("LEDGER_MAX_ATTEMPTS", "0")])
            .read_all(|env| env.client("LEDGER_"))
            .map(|_| ())
            .map_or_else(Exit::failed, |()| Exit::clean());
        assert_eq!(exit.code(), 78);
        assert_eq!(
            exit.report_text().unwrap(),
            "error: 2 bad settings:\n  LEDGER_ADDR: not set\n  LEDGER_MAX_ATTEMPTS: is 0, want 1 or more (1 turns retries off)"
        );
        let one = crate::app::Env::from_pairs([
            ("LEDGER_ADDR", "ledger:50051"),
            ("LEDGER_MAX_ATTEMPTS", "0"),
        ])
        .read_all(|env| env.client("LEDGER_"))
        .map(|_| ())
        .map_or_else(Exit::failed, |()| Exit::clean());
        assert_eq!(
            one.report_text().unwrap(),
            "error: LEDGER_MAX_ATTEMPTS: is 0, want 1 or more (1 turns retries off)"
        );
        assert_eq!(Exit::clean().report_text(), None);
    }
}
