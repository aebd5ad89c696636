//! `ConsumerSettings`: one consumer's settings, their defaults and a check
//! per field.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::Delivery;
use super::uri::{self, AmqpUri};
use crate::call::settings::{Checks, InvalidValue, at_least_one, check_timeout, check_tls};
use crate::grpc::client::check_connect_backoff_max;
use crate::grpc::server::{SettingsError, check_grace};

/// Whose settings a [`SettingsError`] of a consumer is about, in its
/// message.
const OF: &str = "rabbitmq consumer";

/// Decides whether the failure scenario a delivery carries reaches the
/// processor: `true` keeps it, `false` strips it. See
/// [`ConsumerSettings::trust_scenario`].
#[derive(Clone)]
pub struct TrustScenario(pub(super) Arc<dyn Fn(&Delivery) -> bool + Send + Sync>);

impl TrustScenario {
    /// A trust function that runs `trust`.
    pub fn new(trust: impl Fn(&Delivery) -> bool + Send + Sync + 'static) -> TrustScenario {
        TrustScenario(Arc::new(trust))
    }

    /// Trusts the deliveries whose `user_id` property is one of `users`:
    /// RabbitMQ refuses a message whose `user_id` is not the user its
    /// publisher's connection logged in as, so `user_id` names the
    /// publisher. A message published with no `user_id` is not trusted.
    ///
    /// ```
    /// use humus::rabbitmq::{ConsumerSettings, TrustScenario};
    /// let settings = ConsumerSettings {
    ///     trust_scenario: Some(TrustScenario::user_ids(["chaos-tool"])),
    ///     ..ConsumerSettings::default()
    /// };
    /// # let _ = settings;
    /// ```
    pub fn user_ids<I, S>(users: I) -> TrustScenario
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let users: Vec<String> = users.into_iter().map(Into::into).collect();
        TrustScenario::new(move |delivery| {
            delivery
                .user_id()
                .is_some_and(|user| users.iter().any(|u| u == user))
        })
    }
}

impl fmt::Debug for TrustScenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TrustScenario(fn)")
    }
}

/// The settings of one [`Consumer`](super::Consumer): plain values, a
/// [`Default`], a public check per field, and `serde::Deserialize` (the
/// durations in humantime form, `"250ms"`, `"1m30s"`), so `envy`,
/// `figment` or `config` read them. [`Consumer::start`](super::Consumer::start)
/// runs every check and names every bad field in one [`SettingsError`];
/// [`check_rabbitmq_consumer`](crate::app::check_rabbitmq_consumer) does
/// the same as a settings error of the App (exit 78).
///
/// | field | default | check |
/// |---|---|---|
/// | [`uri`](ConsumerSettings::uri) | none (empty: refused) | [`check_uri`](super::check_uri) |
/// | [`queue`](ConsumerSettings::queue) | none (empty: refused) | [`check_queue`] |
/// | [`prefetch`](ConsumerSettings::prefetch) | 10 deliveries | [`check_prefetch`] |
/// | [`tls`](ConsumerSettings::tls) | `None`: the platform's roots, for `amqps://` | [`check_tls`] |
/// | [`connect_timeout`](ConsumerSettings::connect_timeout) | 10 s | [`check_timeout`] |
/// | [`connect_backoff_max`](ConsumerSettings::connect_backoff_max) | 120 s | [`check_connect_backoff_max`](crate::grpc::client::check_connect_backoff_max) |
/// | [`backoff_base`](ConsumerSettings::backoff_base) | 100 ms | [`check_backoff_base`](crate::grpc::client::check_backoff_base) |
/// | [`backoff_max`](ConsumerSettings::backoff_max) | 10 s | [`check_backoff_max`](crate::grpc::client::check_backoff_max), at least `backoff_base` |
/// | [`shutdown_grace`](ConsumerSettings::shutdown_grace) | 5 s | [`check_grace`] |
/// | [`trust_scenario`](ConsumerSettings::trust_scenario) | `None`: trusts no publisher | none (set in code) |
///
/// `tls` and `trust_scenario` are set in code and never deserialised.
#[derive(Clone, Deserialize)]
#[serde(try_from = "Read")]
pub struct ConsumerSettings {
    /// The broker: `amqp://user:password@host:port/vhost`, or `amqps://`
    /// for TLS ([`check_uri`](super::check_uri) says what each part may
    /// be). The password never shows in an error or a `Debug`.
    pub uri: String,

    /// The queue to consume, which must exist (the consumer declares
    /// nothing): 1 to 255 bytes.
    pub queue: String,

    /// How many deliveries the broker sends before the first is acked
    /// (AMQP's `basic.qos` prefetch count, per consumer), which is also how
    /// many the processor runs at once.
    pub prefetch: u16,

    /// The TLS config an `amqps://` URI connects with; `None` trusts the
    /// platform's roots. Set it for a private CA or a client certificate.
    /// Ignored for `amqp://`.
    pub tls: Option<Arc<rustls::ClientConfig>>,

    /// How long a connection may take to open, TCP, TLS and AMQP's
    /// handshake together, before the attempt fails and the next is
    /// made after the connection backoff.
    pub connect_timeout: Duration,

    /// The longest wait between two attempts to connect: after a failed
    /// one, the next is made 1 s later, then 1.6 times longer each time,
    /// ±20 % jitter, up to this (the gRPC client's connection backoff).
    pub connect_backoff_max: Duration,

    /// The first wait before a delivery whose processor failed is handed
    /// back to the broker; each failure in a row doubles the ceiling of
    /// the wait (full jitter), up to [`backoff_max`](Self::backoff_max),
    /// and a success resets it. So a processor that keeps failing does not
    /// spin through the queue.
    pub backoff_base: Duration,

    /// The ceiling of the wait before a failed delivery is handed back.
    pub backoff_max: Duration,

    /// How long a stop lets the deliveries being processed finish (each
    /// is acked when its processor succeeds). Those still running at its
    /// end are dropped, unacked, and the broker delivers them again. Zero
    /// is no grace.
    pub shutdown_grace: Duration,

    /// Whether the failure scenario a delivery carries reaches the
    /// processor. It is asked only about a delivery that carries a
    /// scenario, and only when the Setup's injection is on (or
    /// strip-only), before the processor runs; a delivery it does not
    /// trust has the scenario stripped from its context and its headers,
    /// every other baggage member kept (a `humus.fit.strip` event on its
    /// span). [`TrustScenario::user_ids`] trusts publishers by the
    /// `user_id` the broker validated. Set in code.
    ///
    /// A panic in it is not caught: it ends the consumer (see the
    /// [module](super) docs).
    ///
    /// Default: `None`, which trusts no publisher.
    pub trust_scenario: Option<TrustScenario>,
}

impl Default for ConsumerSettings {
    fn default() -> Self {
        ConsumerSettings {
            uri: String::new(),
            queue: String::new(),
            prefetch: 10,
            tls: None,
            connect_timeout: Duration::from_secs(10),
            connect_backoff_max: Duration::from_secs(120),
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(5),
            trust_scenario: None,
        }
    }
}

crate::call::settings::settings_read! {
    /// [`ConsumerSettings`] as read: each field given, or not (then it
    /// keeps its default), with the shared backoff.
    struct Read for ConsumerSettings {
        uri: String => uri::redacted(uri),
        queue: String,
        prefetch: u16,
        in_code tls => tls.as_ref().map(|_| "rustls::ClientConfig"),
        #[serde(default, with = "humantime_serde")]
        connect_timeout: Duration,
        #[serde(default, with = "humantime_serde")]
        connect_backoff_max: Duration,
        use backoff,
        #[serde(default, with = "humantime_serde")]
        shutdown_grace: Duration,
        in_code trust_scenario,
    }
}

/// Checks a queue's name: 1 to 255 bytes (AMQP's short string).
///
/// # Errors
///
/// [`InvalidValue`] for an empty name or a longer one.
pub fn check_queue(queue: &str) -> Result<(), InvalidValue> {
    if queue.is_empty() {
        return Err(InvalidValue::new("is empty, want the name of a queue"));
    }
    if queue.len() > 255 {
        return Err(InvalidValue::new(format!(
            "is {} bytes long, want at most 255",
            queue.len()
        )));
    }
    Ok(())
}

/// Checks a prefetch count: at least 1 (AMQP's 0 would be no limit).
///
/// # Errors
///
/// [`InvalidValue`] for zero.
pub fn check_prefetch(prefetch: u16) -> Result<(), InvalidValue> {
    at_least_one(
        prefetch,
        "is 0, want 1 to 65535 deliveries (0 would be no limit)",
    )
}

/// The checks of a RabbitMQ client's connection: its `tls` config, if
/// any, `connect_timeout` and `connect_backoff_max` (a consumer's and a
/// publisher's alike).
pub(super) fn check_connection(
    checks: &mut Checks,
    tls: Option<&rustls::ClientConfig>,
    connect_timeout: Duration,
    connect_backoff_max: Duration,
) {
    if let Some(tls) = tls {
        checks.put("tls", check_tls(tls));
    }
    checks.put("connect_timeout", check_timeout(connect_timeout));
    checks.put(
        "connect_backoff_max",
        check_connect_backoff_max(connect_backoff_max),
    );
}

impl ConsumerSettings {
    /// Runs every field's check, and names every bad field in one error;
    /// the parsed URI.
    pub(crate) fn checked(&self) -> Result<AmqpUri, SettingsError> {
        let ConsumerSettings {
            uri,
            queue,
            prefetch,
            tls,
            connect_timeout,
            connect_backoff_max,
            backoff_base,
            backoff_max,
            shutdown_grace,
            trust_scenario: _,
        } = self;
        let mut checks = Checks::default();
        let parsed = checks.parsed("uri", uri::parse(uri));
        checks.put("queue", check_queue(queue));
        checks.put("prefetch", check_prefetch(*prefetch));
        check_connection(
            &mut checks,
            tls.as_deref(),
            *connect_timeout,
            *connect_backoff_max,
        );
        checks.backoff(*backoff_base, *backoff_max);
        checks.put("shutdown_grace", check_grace(*shutdown_grace));
        checks.finish_with(OF, parsed, |parsed| match parsed {
            Some(uri) if !queue.is_empty() => format!("queue {queue:?} on {}", uri.addr()),
            Some(uri) => uri.addr(),
            None if !queue.is_empty() => format!("queue {queue:?}"),
            None => String::new(),
        })
    }

    /// Runs every field's check, and names every bad field in one error.
    ///
    /// # Errors
    ///
    /// [`SettingsError`] naming every bad field.
    pub fn check(&self) -> Result<(), SettingsError> {
        self.checked().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> ConsumerSettings {
        ConsumerSettings {
            uri: "amqp://rabbit".into(),
            queue: "orders".into(),
            ..ConsumerSettings::default()
        }
    }

    #[test]
    fn every_bad_field_is_named() {
        assert_eq!(valid().check(), Ok(()));
        let err = ConsumerSettings {
            queue: String::new(),
            prefetch: 0,
            connect_timeout: Duration::ZERO,
            backoff_base: Duration::from_secs(2),
            backoff_max: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(7200),
            ..valid()
        }
        .check()
        .unwrap_err();
        assert_eq!(
            err.fields().collect::<Vec<_>>(),
            [
                "queue",
                "prefetch",
                "connect_timeout",
                "backoff_max",
                "shutdown_grace"
            ]
        );
        let text = err.to_string();
        assert!(
            text.starts_with("invalid rabbitmq consumer settings of rabbit:5672: queue is empty"),
            "{text}"
        );
        let err = ConsumerSettings {
            uri: "http://u:secret@rabbit".into(),
            ..valid()
        }
        .check()
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with(r#"invalid rabbitmq consumer settings of queue "orders": uri "http://u:REDACTED@rabbit/" has the scheme "http""#),
            "{err}"
        );
        let shown = format!(
            "{:?}",
            ConsumerSettings {
                uri: "amqp://u:secret@rabbit".into(),
                ..valid()
            }
        );
        assert!(!shown.contains("secret"), "{shown}");
    }

    #[test]
    fn serde_reads_durations_and_keeps_defaults() {
        let read: ConsumerSettings = serde_json::from_str(
            r#"{"uri": "amqp://rabbit", "queue": "orders", "prefetch": 3, "shutdown_grace": "1s"}"#,
        )
        .unwrap();
        assert_eq!(read.prefetch, 3);
        assert_eq!(read.shutdown_grace, Duration::from_secs(1));
        assert_eq!(read.connect_timeout, Duration::from_secs(10));
        assert_eq!(read.check(), Ok(()));
    }
}
