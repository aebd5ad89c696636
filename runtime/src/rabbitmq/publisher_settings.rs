//! `PublisherSettings`: one publisher's settings, their defaults and a
//! check per field; and its classification of an attempt.

use std::sync::Arc;
use std::time::Duration;

use super::error::{PublishError, PublishErrorKind};
use super::settings::check_connection;
use super::uri::{self, AmqpUri};
use crate::call::settings::Checks;
use crate::circuit::Outcome;
use crate::grpc::client::Classification;
use crate::grpc::server::SettingsError;

use crate::retry::Verdict;
use crate::{circuit, retry};

/// Whose settings a [`SettingsError`] of a publisher is about, in its
/// message.
const OF: &str = "rabbitmq publisher";

/// What a publish's attempt ended with, as a classify function sees it:
/// `Ok` once the broker confirmed the message.
pub type PublishResult<'a> = Result<(), &'a PublishError>;

crate::call::classify_fn! {
    /// The publisher's classify function, as
    /// [`PublisherSettings::classify`] holds it: a cheaply cloned wrapper of
    /// any closure of an attempt's result. [`PublishClassify::default`] is
    /// [`default_classify`].
    ///
    /// ```
    /// use humus::circuit::Outcome;
    /// use humus::grpc::client::Classification;
    /// use humus::rabbitmq::{PublishClassify, PublishErrorKind};
    ///
    /// // A nack is the broker's flow control here: retry, spare the breaker.
    /// let default = PublishClassify::default();
    /// let classify = PublishClassify::new(move |result| match result {
    ///     Err(e) if e.kind() == PublishErrorKind::Nacked => Classification {
    ///         breaker: Outcome::Ignored,
    ///         ..default.classify(result)
    ///     },
    ///     _ => default.classify(result),
    /// });
    /// # let _ = classify;
    /// ```
    pub struct PublishClassify;
    /// Classifies one attempt that ended with `result`.
    pub fn classify(&self, result: PublishResult<'_>);
    default default_classify;
}

/// The default classification of a publish's attempt, for retries and for
/// the broker's breaker:
///
/// | the attempt | retry | breaker |
/// |---|---|---|
/// | confirmed (`basic.ack`) | success | Success |
/// | no connection, or the connection or channel lost before the confirm (an injected abort too) | Retry | Failure |
/// | nacked | Retry | Failure |
/// | no confirm within `attempt_timeout` | Retry | Failure |
/// | no confirm within the call's deadline | Stop | Failure |
/// | returned unroutable, or refused (a channel closed with 403, 404, 406) | Stop | Ignored |
///
/// A retry after a lost confirm or a timeout may deliver the message twice:
/// the publisher delivers at least once.
pub fn default_classify(result: PublishResult<'_>) -> Classification {
    let Err(e) = result else {
        return Classification {
            retry: Verdict::Success,
            retry_after: None,
            breaker: Outcome::Success,
        };
    };
    let retry = |breaker| Classification {
        retry: Verdict::Retry,
        retry_after: None,
        breaker,
    };
    match e.kind() {
        PublishErrorKind::Connection
        | PublishErrorKind::Nacked
        | PublishErrorKind::AttemptTimeout => retry(Outcome::Failure),
        PublishErrorKind::Timeout => Classification::stop(Outcome::Failure),
        PublishErrorKind::Unroutable
        | PublishErrorKind::Refused
        | PublishErrorKind::Rejected
        | PublishErrorKind::Closed => Classification::stop(Outcome::Ignored),
    }
}

/// The settings of one broker's [`Publisher`](super::Publisher): plain
/// values, a [`Default`], a public check per field, and
/// `serde::Deserialize` read exactly as the
/// [HTTP client's](crate::http::client::Settings) settings are (the
/// `retry_budget` and `breaker` sections, or their flat keys such as
/// `breaker_open_for`; durations in humantime form, `"250ms"`).
/// [`Publisher::new`](super::Publisher::new) runs every check and names
/// every bad field in one [`SettingsError`];
/// [`check_rabbitmq_publisher`](crate::app::check_rabbitmq_publisher) does
/// the same as a settings error of the App (exit 78).
///
/// | field | default | check |
/// |---|---|---|
/// | [`uri`](PublisherSettings::uri) | none (empty: refused) | [`check_uri`](super::check_uri) |
/// | [`tls`](PublisherSettings::tls) | `None`: the platform's roots, for `amqps://` | [`check_tls`](crate::grpc::client::check_tls) |
/// | [`connect_timeout`](PublisherSettings::connect_timeout) | 10 s | [`check_timeout`](crate::grpc::client::check_timeout) |
/// | [`connect_backoff_max`](PublisherSettings::connect_backoff_max) | 120 s | [`check_connect_backoff_max`](crate::grpc::client::check_connect_backoff_max) |
/// | [`timeout`](PublisherSettings::timeout), [`max_attempts`](PublisherSettings::max_attempts), [`retry_budget`](PublisherSettings::retry_budget), [`backoff_base`](PublisherSettings::backoff_base), [`backoff_max`](PublisherSettings::backoff_max), [`breaker`](PublisherSettings::breaker), [`breaker_policy`](PublisherSettings::breaker_policy), [`forward_scenario`](PublisherSettings::forward_scenario) | the [gRPC client's](crate::grpc::client::Settings) | the same checks, listed there |
/// | [`attempt_timeout`](PublisherSettings::attempt_timeout) | 5 s | [`check_attempt_timeout`](crate::http::client::check_attempt_timeout) |
/// | [`classify`](PublisherSettings::classify) | [`default_classify`] | none (set in code) |
#[derive(Clone, serde::Deserialize)]
#[serde(try_from = "Read")]
pub struct PublisherSettings {
    /// The broker: `amqp://user:password@host:port/vhost`, or `amqps://`
    /// for TLS ([`check_uri`](super::check_uri) says what each part may
    /// be). The password never shows in an error or a `Debug`.
    pub uri: String,

    /// The TLS config an `amqps://` URI connects with; `None` trusts the
    /// platform's roots. Ignored for `amqp://`. Set in code.
    pub tls: Option<Arc<rustls::ClientConfig>>,

    /// How long a connection may take to open (TCP, TLS, AMQP's handshake,
    /// the channel and its `confirm.select` together).
    pub connect_timeout: Duration,

    /// The longest wait before the connection is dialled again after a
    /// failed dial or a lost connection: 1 s first, then 1.6 times longer
    /// each time, ±20 % jitter, up to this (the gRPC client's connection
    /// backoff). A publish while the publisher waits fails at once, as a
    /// lost connection ([`PublishErrorKind::Connection`]).
    pub connect_backoff_max: Duration,

    /// How long one publish may take: every attempt and every wait between
    /// them (or the deadline of the RPC being served, when earlier).
    pub timeout: Duration,

    /// How long one attempt may take, from its failure-injection point to
    /// the broker's confirm (the smaller of this and what is left of
    /// [`timeout`](Self::timeout)).
    pub attempt_timeout: Duration,

    /// The most attempts one publish makes: 1 turns retries off.
    pub max_attempts: u32,

    /// The retry budget shared by every publish of the publisher (gRFC A6's
    /// retry throttling), as the gRPC client's.
    pub retry_budget: retry::BudgetConfig,

    /// The backoff's base: the wait before retry `n` is drawn from 0 up to
    /// the smaller of [`backoff_max`](Self::backoff_max) and
    /// `backoff_base · 2ⁿ⁻¹` (full jitter).
    pub backoff_base: Duration,

    /// The backoff's ceiling.
    pub backoff_max: Duration,

    /// How each attempt's result counts, for retries and for the breaker.
    /// Set in code.
    pub classify: PublishClassify,

    /// The breaker's settings from configuration.
    pub breaker: circuit::Config,

    /// When the breaker opens and closes. Set in code.
    pub breaker_policy: circuit::Policy,

    /// Whether a failure scenario in a publish's baggage is sent on in the
    /// message's headers; by default it is stripped (a `humus.fit.strip`
    /// event on the attempt's span), every other member kept.
    pub forward_scenario: bool,
}

impl Default for PublisherSettings {
    fn default() -> Self {
        let http = crate::http::client::Settings::default();
        PublisherSettings {
            uri: String::new(),
            tls: None,
            connect_timeout: Duration::from_secs(10),
            connect_backoff_max: Duration::from_secs(120),
            timeout: http.timeout,
            attempt_timeout: http.attempt_timeout,
            max_attempts: http.max_attempts,
            retry_budget: http.retry_budget,
            backoff_base: http.backoff_base,
            backoff_max: http.backoff_max,
            classify: PublishClassify::default(),
            breaker: http.breaker,
            breaker_policy: http.breaker_policy,
            forward_scenario: false,
        }
    }
}

crate::call::settings::settings_read! {
    /// [`PublisherSettings`] as read: each field given, or not (then it
    /// keeps its default), with the shared sections and their flat keys.
    struct Read for PublisherSettings {
        uri: String => uri::redacted(uri),
        in_code tls => tls.as_ref().map(|_| "rustls::ClientConfig"),
        #[serde(default, with = "humantime_serde")]
        connect_timeout: Duration,
        #[serde(default, with = "humantime_serde")]
        connect_backoff_max: Duration,
        use timeout,
        use attempt_timeout,
        use max_attempts,
        use retry_budget,
        use backoff,
        in_code classify,
        use breaker,
        in_code breaker_policy,
        use forward_scenario,
    }
}

impl PublisherSettings {
    /// Runs every field's check, and names every bad field in one error;
    /// the parsed URI.
    pub(crate) fn checked(&self) -> Result<AmqpUri, SettingsError> {
        let PublisherSettings {
            uri,
            tls,
            connect_timeout,
            connect_backoff_max,
            timeout,
            attempt_timeout,
            max_attempts,
            retry_budget,
            backoff_base,
            backoff_max,
            classify: _,
            breaker,
            breaker_policy: _,
            forward_scenario: _,
        } = self;
        let mut checks = Checks::default();
        let parsed = checks.parsed("uri", uri::parse(uri));
        check_connection(
            &mut checks,
            tls.as_deref(),
            *connect_timeout,
            *connect_backoff_max,
        );
        checks.timeout(*timeout);
        checks.attempt_timeout(*attempt_timeout);
        checks.max_attempts(*max_attempts);
        checks.backoff(*backoff_base, *backoff_max);
        checks.retry_budget(retry_budget);
        checks.breaker(breaker);
        checks.finish_with(OF, parsed, |parsed| {
            parsed.map(AmqpUri::addr).unwrap_or_default()
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

    fn valid() -> PublisherSettings {
        PublisherSettings {
            uri: "amqp://rabbit".into(),
            ..PublisherSettings::default()
        }
    }

    #[test]
    fn every_bad_field_is_named() {
        assert_eq!(valid().check(), Ok(()));
        let err = PublisherSettings {
            timeout: Duration::ZERO,
            attempt_timeout: Duration::ZERO,
            max_attempts: 0,
            backoff_base: Duration::from_secs(2),
            backoff_max: Duration::from_secs(1),
            breaker: circuit::Config {
                probes: 0,
                ..valid().breaker
            },
            ..valid()
        }
        .check()
        .unwrap_err();
        assert_eq!(
            err.fields().collect::<Vec<_>>(),
            [
                "timeout",
                "attempt_timeout",
                "max_attempts",
                "backoff_max",
                "breaker.probes"
            ]
        );
        let text = err.to_string();
        assert!(
            text.starts_with("invalid rabbitmq publisher settings of rabbit:5672: timeout is zero"),
            "{text}"
        );
        let err = PublisherSettings {
            uri: "http://u:secret@rabbit".into(),
            ..valid()
        }
        .check()
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with(r#"invalid rabbitmq publisher settings: uri "http://u:REDACTED@rabbit/" has the scheme "http""#),
            "{err}"
        );
        let shown = format!(
            "{:?}",
            PublisherSettings {
                uri: "amqp://u:secret@rabbit".into(),
                ..valid()
            }
        );
        assert!(!shown.contains("secret"), "{shown}");
    }

    #[test]
    fn serde_reads_sections_and_flat_keys_and_keeps_defaults() {
        let read: PublisherSettings = serde_json::from_str(
            r#"{"uri": "amqp://rabbit", "attempt_timeout": "250ms", "breaker_open_for": "3s",
                "retry_budget": {"max_tokens": 4}, "forward_scenario": true}"#,
        )
        .unwrap();
        assert_eq!(read.attempt_timeout, Duration::from_millis(250));
        assert_eq!(read.breaker.open_for, Duration::from_secs(3));
        assert_eq!(read.retry_budget.max_tokens, 4);
        assert!(read.forward_scenario);
        assert_eq!(read.timeout, Duration::from_secs(10));
        assert_eq!(read.connect_backoff_max, Duration::from_secs(120));
        assert_eq!(read.check(), Ok(()));
        let twice = serde_json::from_str::<PublisherSettings>(
            r#"{"breaker": {"window": 5}, "breaker_window": 6}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(twice.contains("given twice"), "{twice}");
    }

    #[test]
    fn default_classification() {
        let destination: Arc<str> = Arc::from("orders:accepted");
        let of = |kind| default_classify(Err(&PublishError::new(kind, &destination, "x")));
        assert_eq!(default_classify(Ok(())).breaker, Outcome::Success);
        for kind in [
            PublishErrorKind::Connection,
            PublishErrorKind::Nacked,
            PublishErrorKind::AttemptTimeout,
        ] {
            let c = of(kind);
            assert_eq!((c.retry, c.breaker), (Verdict::Retry, Outcome::Failure));
        }
        let c = of(PublishErrorKind::Timeout);
        assert_eq!((c.retry, c.breaker), (Verdict::Stop, Outcome::Failure));
        for kind in [PublishErrorKind::Unroutable, PublishErrorKind::Refused] {
            let c = of(kind);
            assert_eq!((c.retry, c.breaker), (Verdict::Stop, Outcome::Ignored));
        }
    }
}
