//! [`ConsumerSettings`] and [`ProducerSettings`]: a consumer's and a
//! producer's settings, their defaults and a check per field.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::message::OwnedMessage;
use serde::Deserialize;

use crate::call::settings::{Checks, InvalidValue, check_timeout};
use crate::circuit;
use crate::grpc::server::check_grace;

/// Decides whether the failure scenario a record carries reaches the
/// processor: `true` keeps it, `false` strips it. See
/// [`ConsumerSettings::trust_scenario`].
#[derive(Clone)]
pub struct TrustScenario(pub(super) Arc<dyn Fn(&OwnedMessage) -> bool + Send + Sync>);

impl TrustScenario {
    /// A trust function that runs `trust`.
    pub fn new(trust: impl Fn(&OwnedMessage) -> bool + Send + Sync + 'static) -> TrustScenario {
        TrustScenario(Arc::new(trust))
    }

    /// The trust of the [module](super) docs: a record of one of `topics`
    /// is trusted, any other is not. The cluster's ACLs decide who may
    /// produce to a topic, so a topic only trusted services write to is a
    /// trusted caller.
    pub fn topics<I, S>(topics: I) -> TrustScenario
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let topics: Vec<String> = topics.into_iter().map(Into::into).collect();
        TrustScenario::new(move |m| {
            use rdkafka::Message as _;
            topics.iter().any(|t| t == m.topic())
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
/// durations in humantime form, `"250ms"`, `"1m30s"`; a list such as
/// `brokers` from a sequence, or, with `envy`, a comma-separated
/// variable). [`Consumer::start`](super::Consumer::start) runs every check
/// and names every bad field in one [`SettingsError`];
/// [`app::check_kafka_consumer`](crate::app::check_kafka_consumer) runs them where the
/// settings are read, so that a bad value exits 78.
///
/// | field | default | check |
/// |---|---|---|
/// | [`brokers`](ConsumerSettings::brokers) | none (empty: refused) | [`check_brokers`] |
/// | [`group`](ConsumerSettings::group) | none (empty: refused) | [`check_group`] |
/// | [`topics`](ConsumerSettings::topics) | none (empty: refused) | [`check_topics`] |
/// | [`trust_scenario`](ConsumerSettings::trust_scenario) | `None`: trusts no record | none (set in code) |
/// | [`max_attempts`](ConsumerSettings::max_attempts) | 5 | [`check_max_attempts`](crate::grpc::client::check_max_attempts) |
/// | [`backoff_base`](ConsumerSettings::backoff_base) | 100 ms | [`check_backoff_base`](crate::grpc::client::check_backoff_base) |
/// | [`backoff_max`](ConsumerSettings::backoff_max) | 10 s | [`check_backoff_max`](crate::grpc::client::check_backoff_max), at least `backoff_base` |
/// | [`dead_letter_topic`](ConsumerSettings::dead_letter_topic) | `None`: a failing record holds its partition | [`check_topic`] |
/// | [`commit_interval`](ConsumerSettings::commit_interval) | 5 s (librdkafka's) | [`check_commit_interval`] |
/// | [`shutdown_grace`](ConsumerSettings::shutdown_grace) | 10 s | [`check_grace`] |
/// | [`librdkafka`](ConsumerSettings::librdkafka) | empty | [`check_librdkafka`] |
#[derive(Clone, Deserialize)]
#[serde(try_from = "ConsumerRead")]
pub struct ConsumerSettings {
    /// The brokers the consumer first connects to (librdkafka's
    /// `bootstrap.servers`), each `host:port` with no scheme
    /// (`kafka-1:9092`); it learns the rest of the cluster from them.
    pub brokers: Vec<String>,

    /// The consumer group (`group.id`): the consumers of one group share
    /// the topics' partitions, and its committed offsets are where a
    /// restarted consumer resumes. A group with no committed offset starts
    /// at each partition's earliest record, so no record is skipped.
    pub group: String,

    /// The topics to consume.
    pub topics: Vec<String>,

    /// Whether the failure scenario a record carries reaches the
    /// processor. It is asked only about a record that carries a scenario,
    /// and only when the Setup's failure injection is on (or strip-only),
    /// after the record's span started and before the processor runs; a
    /// record it does not trust has the scenario stripped from its baggage
    /// (a `humus.fit.strip` event on its span), every other member kept.
    /// Set in code. It is the user's code: a panic in it is not recovered
    /// (see [`Consumer`](super::Consumer)).
    ///
    /// Trust by topic ([`TrustScenario::topics`]): the cluster's ACLs
    /// decide who may produce to a topic.
    ///
    /// Default: `None`, which trusts no record: a topic nobody decided
    /// about is a trust boundary.
    pub trust_scenario: Option<TrustScenario>,

    /// How many times the processor is run for one record before the record
    /// counts as failing for good: it is then produced to
    /// [`dead_letter_topic`](ConsumerSettings::dead_letter_topic) when one
    /// is set, or else reported held (its span and a log record) and
    /// retried every [`backoff_max`](ConsumerSettings::backoff_max) until
    /// it succeeds or the consumer stops.
    pub max_attempts: u32,

    /// The first retry's backoff ceiling: the wait before retry `n` is drawn
    /// from zero to `min(backoff_max, backoff_base · 2^(n-1))` (full
    /// jitter, the clients' schedule:
    /// [`retry::Exponential`](crate::retry::Exponential)).
    pub backoff_base: Duration,

    /// The largest backoff ceiling; a held record is retried this often.
    pub backoff_max: Duration,

    /// The topic a record that failed
    /// [`max_attempts`](ConsumerSettings::max_attempts) times is produced
    /// to (with humus's [`Producer`](super::Producer), of the consumer's
    /// brokers and librdkafka properties, in the record's context: its
    /// breaker, the point `kafka:<topic>` and its span), unchanged (its key, value and headers, with `humus.dlq.topic`,
    /// `humus.dlq.partition`, `humus.dlq.offset` and `humus.dlq.error`
    /// headers added), before its offset is committed. `None`: the record
    /// holds its partition.
    pub dead_letter_topic: Option<String>,

    /// How often the offsets of processed records are committed
    /// (librdkafka's `auto.commit.interval.ms`). A record whose offset was
    /// not committed yet when the consumer dies is processed again by the
    /// group's next consumer: processing is at least once. The consumer's
    /// stop commits at once.
    pub commit_interval: Duration,

    /// How long the consumer's stop lets the record in flight finish. At
    /// its end, a record still processing is dropped, its offset not
    /// committed (the group's next consumer processes it again). Zero is
    /// no grace.
    pub shutdown_grace: Duration,

    /// librdkafka configuration properties humus does not own, passed
    /// through unchanged: TLS and SASL (`security.protocol`,
    /// `sasl.mechanism`, ...; librdkafka must be built with them, as
    /// [the module](super) says), `client.id`, `session.timeout.ms`. The
    /// properties humus sets from the fields above, or sets itself
    /// (`bootstrap.servers`, `group.id`, `enable.auto.commit`,
    /// `enable.auto.offset.store`, `auto.commit.interval.ms`), are
    /// refused here, and so is an unknown property or a bad value:
    /// librdkafka checks each ([`check_librdkafka`]).
    pub librdkafka: BTreeMap<String, String>,
}

impl Default for ConsumerSettings {
    fn default() -> Self {
        ConsumerSettings {
            brokers: Vec::new(),
            group: String::new(),
            topics: Vec::new(),
            trust_scenario: None,
            max_attempts: 5,
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
            dead_letter_topic: None,
            commit_interval: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(10),
            librdkafka: BTreeMap::new(),
        }
    }
}

crate::call::settings::settings_read! {
    /// [`ConsumerSettings`] as read: each field given, or not (then it
    /// keeps its default), with the shared retry fields.
    struct ConsumerRead for ConsumerSettings {
        brokers: Vec<String>,
        group: String,
        topics: Vec<String>,
        in_code trust_scenario,
        use max_attempts,
        use backoff,
        dead_letter_topic: Option<String>,
        #[serde(default, with = "humantime_serde")]
        commit_interval: Duration,
        #[serde(default, with = "humantime_serde")]
        shutdown_grace: Duration,
        librdkafka: BTreeMap<String, String> => librdkafka.keys().collect::<Vec<_>>(),
    }
}

/// The librdkafka properties humus sets itself, which
/// [`ConsumerSettings::librdkafka`] may not.
pub(super) const OWNED_PROPERTIES: [&str; 6] = [
    "bootstrap.servers",
    "metadata.broker.list",
    "group.id",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "auto.commit.interval.ms",
];

/// Checks a list of brokers: at least one, each `host:port` with no scheme
/// (`kafka-1:9092`, `[::1]:9092`), as a client's address
/// ([`grpc::client::check_addr`](crate::grpc::client::check_addr)).
///
/// ```
/// use humus::kafka::check_brokers;
/// assert!(check_brokers(&["kafka-1:9092".into(), "[::1]:9092".into()]).is_ok());
/// assert_eq!(
///     check_brokers(&[]).unwrap_err().to_string(),
///     "is empty, want at least one broker as host:port, such as \"kafka-1:9092\""
/// );
/// assert!(check_brokers(&["kafka://kafka-1:9092".into()]).unwrap_err().to_string().contains("names a scheme"));
/// ```
///
/// # Errors
///
/// [`InvalidValue`] saying which broker is wrong and how.
pub fn check_brokers(brokers: &[String]) -> Result<(), InvalidValue> {
    if brokers.is_empty() {
        return Err(InvalidValue::new(
            "is empty, want at least one broker as host:port, such as \"kafka-1:9092\"",
        ));
    }
    for broker in brokers {
        if broker.contains(":/") {
            return Err(InvalidValue::new(format!(
                "{broker:?} names a scheme, want host:port with none, such as \"kafka-1:9092\" (TLS is librdkafka's security.protocol, in `librdkafka`)"
            )));
        }
        crate::grpc::client::check_addr(broker)?;
    }
    Ok(())
}

/// Checks a consumer group: not empty.
///
/// # Errors
///
/// [`InvalidValue`] when it is empty.
pub fn check_group(group: &str) -> Result<(), InvalidValue> {
    if group.trim().is_empty() {
        return Err(InvalidValue::new(
            "is empty, want the consumer group's name (its group.id)",
        ));
    }
    Ok(())
}

/// Checks a topic name as Kafka does: 1 to 249 characters of ASCII
/// letters, digits, `.`, `_` and `-`, and neither `.` nor `..`.
///
/// # Errors
///
/// [`InvalidValue`] saying what is wrong.
pub fn check_topic(topic: &str) -> Result<(), InvalidValue> {
    if topic.is_empty() {
        return Err(InvalidValue::new("is empty, want a topic name"));
    }
    if topic == "." || topic == ".." {
        return Err(InvalidValue::new(format!(
            "{topic:?} is no topic name: Kafka refuses \".\" and \"..\""
        )));
    }
    check_name(topic, 249, "a topic name")
}

/// Checks a name Kafka takes (`what`: a topic name, a client id): at most
/// `longest` characters of ASCII letters, digits, `.`, `_` and `-`.
fn check_name(name: &str, longest: usize, what: &str) -> Result<(), InvalidValue> {
    if name.len() > longest {
        return Err(InvalidValue::new(format!(
            "is {} characters long, want at most {longest}",
            name.len()
        )));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(InvalidValue::new(format!(
            "{name:?} holds {c:?}: {what} has ASCII letters, digits, '.', '_' and '-'"
        )));
    }
    Ok(())
}

/// Checks the topics to consume: at least one, each a topic name
/// ([`check_topic`]).
///
/// # Errors
///
/// [`InvalidValue`] saying which topic is wrong and how.
pub fn check_topics(topics: &[String]) -> Result<(), InvalidValue> {
    if topics.is_empty() {
        return Err(InvalidValue::new("is empty, want at least one topic"));
    }
    for topic in topics {
        check_topic(topic)?;
    }
    Ok(())
}

/// Checks the commit interval: more than zero.
///
/// # Errors
///
/// [`InvalidValue`] for zero.
pub fn check_commit_interval(interval: Duration) -> Result<(), InvalidValue> {
    // The clients' check of a duration that must be more than zero.
    check_timeout(interval)
}

/// Checks the librdkafka properties passed through: none that humus sets
/// itself (`bootstrap.servers`, `group.id`, `enable.auto.commit`,
/// `enable.auto.offset.store`, `auto.commit.interval.ms`; each has its
/// field, or is how humus commits), and each one librdkafka itself takes
/// (a known name, a value of its type and range), as it sets them on a
/// client's configuration, without connecting.
///
/// ```
/// use std::collections::BTreeMap;
/// use humus::kafka::check_librdkafka;
///
/// let ok = BTreeMap::from([("session.timeout.ms".to_owned(), "30000".to_owned())]);
/// assert!(check_librdkafka(&ok).is_ok());
/// let bad = BTreeMap::from([("session.timeout.ms".to_owned(), "soon".to_owned())]);
/// let err = check_librdkafka(&bad).unwrap_err();
/// assert!(err.to_string().contains("\"session.timeout.ms\" to \"soon\", which librdkafka refuses"), "{err}");
/// ```
///
/// # Errors
///
/// [`InvalidValue`] naming the first property humus sets, else every
/// property librdkafka refuses, with its reason.
pub fn check_librdkafka(properties: &BTreeMap<String, String>) -> Result<(), InvalidValue> {
    refuse_owned(
        properties,
        &OWNED_PROPERTIES,
        "the consumer's own setting (brokers, group, commit_interval)",
    )?;
    librdkafka_takes(properties)
}

/// Each of `properties` set on a librdkafka configuration of its own
/// (`rd_kafka_conf_set`, which checks the name and the value; nothing
/// connects): every one it refuses, with librdkafka's reason.
fn librdkafka_takes(properties: &BTreeMap<String, String>) -> Result<(), InvalidValue> {
    let refused: Vec<String> = properties
        .iter()
        .filter_map(|(key, value)| {
            let mut config = ClientConfig::new();
            config.set(key, value);
            let reason = match config.create_native_config() {
                Ok(_) => return None,
                Err(KafkaError::ClientConfig(_, reason, _, _)) => reason,
                Err(e) => e.to_string(),
            };
            Some(format!(
                "sets {key:?} to {value:?}, which librdkafka refuses: {reason}"
            ))
        })
        .collect();
    if refused.is_empty() {
        Ok(())
    } else {
        Err(InvalidValue::new(refused.join("; ")))
    }
}

/// Checks the librdkafka properties a producer passes through: none that
/// humus sets itself (`bootstrap.servers`, `client.id`,
/// `message.timeout.ms` and its alias `delivery.timeout.ms`, `acks` and
/// its alias `request.required.acks`, `enable.idempotence`; each has its
/// field in [`ProducerSettings`]), and each one librdkafka itself takes,
/// as [`check_librdkafka`] checks them.
///
/// ```
/// use std::collections::BTreeMap;
/// use humus::kafka::check_producer_librdkafka;
///
/// let bad = BTreeMap::from([("linger.ms".to_owned(), "abc".to_owned())]);
/// let err = check_producer_librdkafka(&bad).unwrap_err();
/// assert!(err.to_string().contains("\"linger.ms\" to \"abc\", which librdkafka refuses: Invalid value"), "{err}");
/// ```
///
/// # Errors
///
/// [`InvalidValue`] naming the first property humus sets, else every
/// property librdkafka refuses, with its reason.
pub fn check_producer_librdkafka(
    properties: &BTreeMap<String, String>,
) -> Result<(), InvalidValue> {
    refuse_owned(
        properties,
        &PRODUCER_OWNED_PROPERTIES,
        "the producer's own setting (brokers, client_id, delivery_timeout, acks, idempotence)",
    )?;
    librdkafka_takes(properties)
}

/// The first of `properties` that is one of `owned`, refused, pointing to
/// `instead`.
fn refuse_owned(
    properties: &BTreeMap<String, String>,
    owned: &[&str],
    instead: &str,
) -> Result<(), InvalidValue> {
    if let Some(owned) = properties.keys().find(|k| owned.contains(&k.as_str())) {
        return Err(InvalidValue::new(format!(
            "sets {owned:?}, which humus sets: use {instead} instead"
        )));
    }
    Ok(())
}

/// Why a [`Consumer`](super::Consumer) or a [`Producer`](super::Producer)
/// refused its settings: every bad field, each named by its path in
/// [`ConsumerSettings`] or [`ProducerSettings`] (`"brokers"`,
/// `"backoff_base"`, `"breaker.window"`), the message naming a consumer's
/// group (`invalid kafka consumer settings of group billing: ...`). The
/// one settings error of every transport,
/// [`InvalidSettings`](crate::InvalidSettings).
pub type SettingsError = crate::InvalidSettings;

impl ConsumerSettings {
    /// Runs every field's check, and the checks that take two fields.
    ///
    /// # Errors
    ///
    /// [`SettingsError`] naming every bad field.
    pub fn check(&self) -> Result<(), SettingsError> {
        let ConsumerSettings {
            brokers,
            group,
            topics,
            trust_scenario: _,
            max_attempts,
            backoff_base,
            backoff_max,
            dead_letter_topic,
            commit_interval,
            shutdown_grace,
            librdkafka,
        } = self;
        let mut checks = Checks::default();
        checks.put("brokers", check_brokers(brokers));
        checks.put("group", check_group(group));
        checks.put("topics", check_topics(topics));
        checks.max_attempts(*max_attempts);
        checks.backoff(*backoff_base, *backoff_max);
        if let Some(topic) = dead_letter_topic {
            checks.put("dead_letter_topic", check_topic(topic));
            if topics.contains(topic) {
                checks.put(
                    "dead_letter_topic",
                    Err(InvalidValue::new(format!(
                        "{topic:?} is one of the topics consumed: a failing record would come back to fail again"
                    ))),
                );
            }
        }
        checks.put("commit_interval", check_commit_interval(*commit_interval));
        checks.put("shutdown_grace", check_grace(*shutdown_grace));
        checks.put("librdkafka", check_librdkafka(librdkafka));
        checks.finish("kafka consumer", || {
            if group.trim().is_empty() {
                String::new()
            } else {
                format!("group {group}")
            }
        })
    }
}

/// The librdkafka properties humus sets for a producer, which
/// [`ProducerSettings::librdkafka`] may not.
pub(super) const PRODUCER_OWNED_PROPERTIES: [&str; 8] = [
    "bootstrap.servers",
    "metadata.broker.list",
    "client.id",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "acks",
    "request.required.acks",
    "enable.idempotence",
];

/// Which acknowledgement a broker sends before a record counts as stored
/// (librdkafka's `acks`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Acks {
    /// Every in-sync replica has the record (`acks=all`): nothing
    /// acknowledged is lost with one broker. The default; idempotence
    /// needs it.
    #[default]
    All,
    /// The partition's leader has it (`acks=1`).
    Leader,
    /// No acknowledgement (`acks=0`): a record counts as stored once sent.
    None,
}

impl Acks {
    /// librdkafka's value.
    pub(super) fn as_librdkafka(self) -> &'static str {
        match self {
            Acks::All => "all",
            Acks::Leader => "1",
            Acks::None => "0",
        }
    }
}

/// The settings of one [`Producer`](super::Producer): plain values, a
/// [`Default`], a public check per field, and `serde::Deserialize` as the
/// other clients' settings (durations in humantime form, `"250ms"`; the
/// shared `breaker` section, each of its fields also a flat key,
/// `breaker_open_for`; a list such as `brokers` from a sequence, or, with
/// `envy`, a comma-separated variable; the fields set in code,
/// `classify` and `breaker_policy`, are never read).
/// [`Producer::new`](super::Producer::new) runs every check and names
/// every bad field in one [`SettingsError`];
/// [`app::check_kafka_producer`](crate::app::check_kafka_producer) runs
/// them where the settings are read, so that a bad value exits 78.
///
/// | field | default | check |
/// |---|---|---|
/// | [`brokers`](ProducerSettings::brokers) | none (empty: refused) | [`check_brokers`] |
/// | [`client_id`](ProducerSettings::client_id) | `""`: librdkafka's (`rdkafka`) | [`check_client_id`] |
/// | [`delivery_timeout`](ProducerSettings::delivery_timeout) | 30 s | [`check_delivery_timeout`] |
/// | [`acks`](ProducerSettings::acks) | [`Acks::All`] | `all` when `idempotence` |
/// | [`idempotence`](ProducerSettings::idempotence) | `true` | none |
/// | [`classify`](ProducerSettings::classify) | [`default_classify`](super::default_classify) | none (set in code) |
/// | [`breaker`](ProducerSettings::breaker), [`breaker_policy`](ProducerSettings::breaker_policy), [`forward_scenario`](ProducerSettings::forward_scenario) | the [gRPC client's](crate::grpc::client::Settings) | the same checks, listed there |
/// | [`librdkafka`](ProducerSettings::librdkafka) | empty | [`check_producer_librdkafka`] |
///
/// ```
/// let orders: humus::kafka::ProducerSettings = serde_json::from_str(
///     r#"{"brokers": ["kafka-1:9092"], "delivery_timeout": "5s", "breaker": {"open_for": "3s"}}"#,
/// )
/// .unwrap();
/// assert_eq!(orders.delivery_timeout, std::time::Duration::from_secs(5));
/// assert_eq!(orders.breaker.open_for, std::time::Duration::from_secs(3));
/// assert!(humus::app::check_kafka_producer(&orders).is_ok());
/// ```
#[derive(Clone, Deserialize)]
#[serde(try_from = "ProducerRead")]
pub struct ProducerSettings {
    /// The brokers the producer first connects to (librdkafka's
    /// `bootstrap.servers`), each `host:port` with no scheme
    /// (`kafka-1:9092`). The first names the producer's breaker in
    /// telemetry (`server.address`, `server.port`).
    pub brokers: Vec<String>,

    /// The client id the brokers see (librdkafka's `client.id`), in their
    /// logs and quotas; empty: librdkafka's own, `rdkafka`.
    pub client_id: String,

    /// How long a record may take to be stored, librdkafka's
    /// `message.timeout.ms`: its idempotent retries happen within it, and
    /// a record not stored by then fails the call (a breaker Failure). An
    /// injected delay waits inside it. At most 2³¹-1 ms (24 days).
    pub delivery_timeout: Duration,

    /// Which acknowledgement stores a record (librdkafka's `acks`).
    pub acks: Acks,

    /// Whether librdkafka's idempotent producer is on
    /// (`enable.idempotence`): its retries never store a record twice nor
    /// out of order. Needs [`Acks::All`].
    pub idempotence: bool,

    /// How a call's result counts in the breaker. Set in code.
    pub classify: super::Classify,

    /// The breaker's settings from configuration: the clients' shared
    /// section.
    pub breaker: circuit::Config,

    /// When the breaker opens and closes. Set in code.
    pub breaker_policy: circuit::Policy,

    /// Whether a failure scenario in a record's baggage is sent on to its
    /// consumers; by default the producer strips it (a `humus.fit.strip`
    /// event on the record's span), every other baggage member kept.
    pub forward_scenario: bool,

    /// librdkafka configuration properties humus does not own, passed
    /// through unchanged: TLS and SASL (`security.protocol`,
    /// `sasl.mechanism`, ...; librdkafka must be built with them, as
    /// [the module](super) says), `linger.ms`, `compression.type`,
    /// `message.max.bytes`. The properties humus sets from the fields
    /// above are refused here, and so is an unknown property or a bad
    /// value: librdkafka checks each ([`check_producer_librdkafka`]).
    pub librdkafka: BTreeMap<String, String>,
}

impl Default for ProducerSettings {
    fn default() -> Self {
        let grpc = crate::grpc::client::Settings::default();
        ProducerSettings {
            brokers: Vec::new(),
            client_id: String::new(),
            delivery_timeout: Duration::from_secs(30),
            acks: Acks::All,
            idempotence: true,
            classify: super::Classify::default(),
            breaker: grpc.breaker,
            breaker_policy: grpc.breaker_policy,
            forward_scenario: false,
            librdkafka: BTreeMap::new(),
        }
    }
}

crate::call::settings::settings_read! {
    /// [`ProducerSettings`] as read: each field given, or not (then it
    /// keeps its default), with the shared `breaker` section and its flat
    /// keys.
    struct ProducerRead for ProducerSettings {
        brokers: Vec<String>,
        client_id: String,
        #[serde(default, with = "humantime_serde")]
        delivery_timeout: Duration,
        acks: Acks,
        idempotence: bool,
        in_code classify,
        use breaker,
        in_code breaker_policy,
        use forward_scenario,
        librdkafka: BTreeMap<String, String> => librdkafka.keys().collect::<Vec<_>>(),
    }
}

/// The longest `delivery_timeout` librdkafka takes: 2³¹-1 ms.
const MAX_DELIVERY_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// Checks a delivery timeout: more than zero, and at most 2³¹-1 ms
/// (librdkafka's `message.timeout.ms` limit).
///
/// ```
/// use humus::kafka::check_delivery_timeout;
/// use std::time::Duration;
/// assert!(check_delivery_timeout(Duration::from_secs(30)).is_ok());
/// assert!(check_delivery_timeout(Duration::ZERO).is_err());
/// ```
///
/// # Errors
///
/// [`InvalidValue`] for zero, or for a timeout past librdkafka's limit.
pub fn check_delivery_timeout(timeout: Duration) -> Result<(), InvalidValue> {
    // The clients' check of a duration that must be more than zero.
    check_timeout(timeout)?;
    if timeout > MAX_DELIVERY_TIMEOUT {
        return Err(InvalidValue::new(format!(
            "{timeout:?} is past librdkafka's limit of {MAX_DELIVERY_TIMEOUT:?}"
        )));
    }
    Ok(())
}

/// Checks a client id: empty (librdkafka's own), or up to 255 ASCII
/// letters, digits, `.`, `_` and `-`.
///
/// # Errors
///
/// [`InvalidValue`] saying what is wrong.
pub fn check_client_id(client_id: &str) -> Result<(), InvalidValue> {
    check_name(client_id, 255, "a client id")
}

impl ProducerSettings {
    /// Runs every field's check, and the checks that take two fields
    /// (`idempotence` needs `acks` all).
    ///
    /// # Errors
    ///
    /// [`SettingsError`] naming every bad field.
    pub fn check(&self) -> Result<(), SettingsError> {
        let ProducerSettings {
            brokers,
            client_id,
            delivery_timeout,
            acks,
            idempotence,
            classify: _,
            breaker,
            breaker_policy: _,
            forward_scenario: _,
            librdkafka,
        } = self;
        let mut checks = Checks::default();
        checks.put("brokers", check_brokers(brokers));
        checks.put("client_id", check_client_id(client_id));
        checks.put(
            "delivery_timeout",
            check_delivery_timeout(*delivery_timeout),
        );
        if *idempotence && *acks != Acks::All {
            checks.put(
                "acks",
                Err(InvalidValue::new(format!(
                    "{acks:?} with idempotence: the idempotent producer needs all (or set idempotence false)"
                ))),
            );
        }
        checks.breaker(breaker);
        checks.put("librdkafka", check_producer_librdkafka(librdkafka));
        checks.finish("kafka producer", String::new)
    }
}
