//! [`ConsumerSettings`] and [`ProducerSettings`]: a consumer's and a
//! producer's settings, their defaults and a check per field.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::message::OwnedMessage;
use serde::Deserialize;

use crate::call::settings::{
    BreakerSection, InvalidValue, breaker_checks, breaker_of, check_backoff_base,
    check_backoff_max, check_max_attempts, check_timeout, write_problems,
};
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
/// | [`max_attempts`](ConsumerSettings::max_attempts) | 5 | [`check_max_attempts`] |
/// | [`backoff_base`](ConsumerSettings::backoff_base) | 100 ms | [`check_backoff_base`] |
/// | [`backoff_max`](ConsumerSettings::backoff_max) | 10 s | [`check_backoff_max`], at least `backoff_base` |
/// | [`dead_letter_topic`](ConsumerSettings::dead_letter_topic) | `None`: a failing record holds its partition | [`check_topic`] |
/// | [`commit_interval`](ConsumerSettings::commit_interval) | 5 s (librdkafka's) | [`check_commit_interval`] |
/// | [`shutdown_grace`](ConsumerSettings::shutdown_grace) | 10 s | [`check_grace`] |
/// | [`librdkafka`](ConsumerSettings::librdkafka) | empty | [`check_librdkafka`] |
#[derive(Clone, Deserialize)]
#[serde(default)]
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
    #[serde(skip)]
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
    #[serde(with = "humantime_serde")]
    pub backoff_base: Duration,

    /// The largest backoff ceiling; a held record is retried this often.
    #[serde(with = "humantime_serde")]
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
    #[serde(with = "humantime_serde")]
    pub commit_interval: Duration,

    /// How long the consumer's stop lets the record in flight finish. At
    /// its end, a record still processing is dropped, its offset not
    /// committed (the group's next consumer processes it again). Zero is
    /// no grace.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,

    /// librdkafka configuration properties humus does not own, passed
    /// through unchanged: TLS and SASL (`security.protocol`,
    /// `sasl.mechanism`, ...), `client.id`, `session.timeout.ms`. The
    /// properties humus sets from the fields above, or sets itself
    /// (`bootstrap.servers`, `group.id`, `enable.auto.commit`,
    /// `enable.auto.offset.store`, `auto.commit.interval.ms`), are
    /// refused here. librdkafka itself refuses an unknown property or a
    /// bad value when the consumer starts.
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

impl fmt::Debug for ConsumerSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // librdkafka's properties may hold passwords: their keys only.
        f.debug_struct("ConsumerSettings")
            .field("brokers", &self.brokers)
            .field("group", &self.group)
            .field("topics", &self.topics)
            .field("trust_scenario", &self.trust_scenario)
            .field("max_attempts", &self.max_attempts)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_max", &self.backoff_max)
            .field("dead_letter_topic", &self.dead_letter_topic)
            .field("commit_interval", &self.commit_interval)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("librdkafka", &self.librdkafka.keys().collect::<Vec<_>>())
            .finish()
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
    if topic.len() > 249 {
        return Err(InvalidValue::new(format!(
            "is {} characters long, want at most 249",
            topic.len()
        )));
    }
    if let Some(c) = topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(InvalidValue::new(format!(
            "{topic:?} holds {c:?}: a topic name has ASCII letters, digits, '.', '_' and '-'"
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
/// field, or is how humus commits).
///
/// # Errors
///
/// [`InvalidValue`] naming the first such property.
pub fn check_librdkafka(properties: &BTreeMap<String, String>) -> Result<(), InvalidValue> {
    refuse_owned(
        properties,
        &OWNED_PROPERTIES,
        "the consumer's own setting (brokers, group, commit_interval)",
    )
}

/// Checks the librdkafka properties a producer passes through: none that
/// humus sets itself (`bootstrap.servers`, `client.id`,
/// `message.timeout.ms` and its alias `delivery.timeout.ms`, `acks` and
/// its alias `request.required.acks`, `enable.idempotence`; each has its
/// field in [`ProducerSettings`]).
///
/// # Errors
///
/// [`InvalidValue`] naming the first such property.
pub fn check_producer_librdkafka(
    properties: &BTreeMap<String, String>,
) -> Result<(), InvalidValue> {
    refuse_owned(
        properties,
        &PRODUCER_OWNED_PROPERTIES,
        "the producer's own setting (brokers, client_id, delivery_timeout, acks, idempotence)",
    )
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

/// Why a [`Consumer`](super::Consumer) refused its settings: every bad
/// field, each with what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingsError {
    /// Whose settings: `consumer` or `producer`.
    client: &'static str,
    /// The group as set, which names a consumer in the message (unless it
    /// is itself empty; a producer's is).
    group: String,
    problems: Vec<(&'static str, String)>,
}

impl SettingsError {
    /// The names of the bad fields, in the order of [`ConsumerSettings`]
    /// or [`ProducerSettings`] (`"brokers"`, `"backoff_base"`, ...).
    pub fn fields(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.problems.iter().map(|(field, _)| *field)
    }
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.trim().is_empty() {
            write!(f, "invalid kafka {} settings: ", self.client)?;
        } else {
            write!(
                f,
                "invalid kafka {} settings of group {}: ",
                self.client, self.group
            )?;
        }
        write_problems(f, &self.problems)
    }
}

impl std::error::Error for SettingsError {}

impl ConsumerSettings {
    /// Runs every field's check, and the checks that take two fields.
    ///
    /// # Errors
    ///
    /// [`SettingsError`] naming every bad field.
    pub fn check(&self) -> Result<(), SettingsError> {
        let mut problems = Vec::new();
        let mut put = |field: &'static str, r: Result<(), InvalidValue>| {
            if let Err(e) = r {
                problems.push((field, e.to_string()));
            }
        };
        put("brokers", check_brokers(&self.brokers));
        put("group", check_group(&self.group));
        put("topics", check_topics(&self.topics));
        put("max_attempts", check_max_attempts(self.max_attempts));
        put("backoff_base", check_backoff_base(self.backoff_base));
        put("backoff_max", check_backoff_max(self.backoff_max));
        if !self.backoff_max.is_zero() && self.backoff_max < self.backoff_base {
            put(
                "backoff_max",
                Err(InvalidValue::new(format!(
                    "{:?} is below backoff_base {:?}",
                    self.backoff_max, self.backoff_base
                ))),
            );
        }
        if let Some(topic) = &self.dead_letter_topic {
            put("dead_letter_topic", check_topic(topic));
            if self.topics.contains(topic) {
                put(
                    "dead_letter_topic",
                    Err(InvalidValue::new(format!(
                        "{topic:?} is one of the topics consumed: a failing record would come back to fail again"
                    ))),
                );
            }
        }
        put(
            "commit_interval",
            check_commit_interval(self.commit_interval),
        );
        put(
            "shutdown_grace",
            // The server's check, of its own error type.
            check_grace(self.shutdown_grace).map_err(|e| InvalidValue::new(e.to_string())),
        );
        put("librdkafka", check_librdkafka(&self.librdkafka));
        if problems.is_empty() {
            Ok(())
        } else {
            Err(SettingsError {
                client: "consumer",
                group: self.group.clone(),
                problems,
            })
        }
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
/// | [`breaker`](ProducerSettings::breaker) | window 20, 1 probe, open 10 s, probe timeout 30 s (the clients') | one per field, as [`check_breaker`](crate::grpc::client::check_breaker) |
/// | [`breaker_policy`](ProducerSettings::breaker_policy) | the clients' | none (set in code) |
/// | [`forward_scenario`](ProducerSettings::forward_scenario) | `false` | none |
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
    #[serde(with = "humantime_serde")]
    pub delivery_timeout: Duration,

    /// Which acknowledgement stores a record (librdkafka's `acks`).
    pub acks: Acks,

    /// Whether librdkafka's idempotent producer is on
    /// (`enable.idempotence`): its retries never store a record twice nor
    /// out of order. Needs [`Acks::All`].
    pub idempotence: bool,

    /// How a call's result counts in the breaker. Set in code.
    #[serde(skip)]
    pub classify: super::Classify,

    /// The breaker's settings from configuration: the clients' shared
    /// section.
    pub breaker: circuit::Config,

    /// When the breaker opens and closes. Set in code.
    #[serde(skip)]
    pub breaker_policy: circuit::Policy,

    /// Whether a failure scenario in a record's baggage is sent on to its
    /// consumers; by default the producer strips it (a `humus.fit.strip`
    /// event on the record's span), every other baggage member kept.
    pub forward_scenario: bool,

    /// librdkafka configuration properties humus does not own, passed
    /// through unchanged: TLS and SASL (`security.protocol`,
    /// `sasl.mechanism`, ...), `linger.ms`, `compression.type`,
    /// `message.max.bytes`. The properties humus sets from the fields
    /// above are refused here. librdkafka itself refuses an unknown
    /// property or a bad value when the producer is built.
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

impl fmt::Debug for ProducerSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // librdkafka's properties may hold passwords: their keys only.
        f.debug_struct("ProducerSettings")
            .field("brokers", &self.brokers)
            .field("client_id", &self.client_id)
            .field("delivery_timeout", &self.delivery_timeout)
            .field("acks", &self.acks)
            .field("idempotence", &self.idempotence)
            .field("classify", &self.classify)
            .field("breaker", &self.breaker)
            .field("breaker_policy", &self.breaker_policy)
            .field("forward_scenario", &self.forward_scenario)
            .field("librdkafka", &self.librdkafka.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// [`ProducerSettings`] as read: each field given, or not (then it keeps
/// its default), with the clients' `breaker` section and flat keys.
#[derive(Deserialize)]
struct ProducerRead {
    brokers: Option<Vec<String>>,
    client_id: Option<String>,
    #[serde(default, with = "humantime_serde")]
    delivery_timeout: Option<Duration>,
    acks: Option<Acks>,
    idempotence: Option<bool>,
    breaker: Option<BreakerSection>,
    breaker_window: Option<usize>,
    breaker_probes: Option<usize>,
    #[serde(default, with = "humantime_serde")]
    breaker_open_for: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    breaker_probe_timeout: Option<Duration>,
    forward_scenario: Option<bool>,
    librdkafka: Option<BTreeMap<String, String>>,
}

impl TryFrom<ProducerRead> for ProducerSettings {
    type Error = String;

    fn try_from(read: ProducerRead) -> Result<ProducerSettings, String> {
        let d = ProducerSettings::default();
        Ok(ProducerSettings {
            brokers: read.brokers.unwrap_or(d.brokers),
            client_id: read.client_id.unwrap_or(d.client_id),
            delivery_timeout: read.delivery_timeout.unwrap_or(d.delivery_timeout),
            acks: read.acks.unwrap_or(d.acks),
            idempotence: read.idempotence.unwrap_or(d.idempotence),
            breaker: breaker_of(
                read.breaker,
                (read.breaker_window, read.breaker_probes),
                (read.breaker_open_for, read.breaker_probe_timeout),
                d.breaker,
            )?,
            forward_scenario: read.forward_scenario.unwrap_or(d.forward_scenario),
            librdkafka: read.librdkafka.unwrap_or(d.librdkafka),
            ..d
        })
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
    if client_id.len() > 255 {
        return Err(InvalidValue::new(format!(
            "is {} characters long, want at most 255",
            client_id.len()
        )));
    }
    if let Some(c) = client_id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(InvalidValue::new(format!(
            "{client_id:?} holds {c:?}: a client id has ASCII letters, digits, '.', '_' and '-'"
        )));
    }
    Ok(())
}

impl ProducerSettings {
    /// Runs every field's check, and the checks that take two fields
    /// (`idempotence` needs `acks` all).
    ///
    /// # Errors
    ///
    /// [`SettingsError`] naming every bad field.
    pub fn check(&self) -> Result<(), SettingsError> {
        let mut problems = Vec::new();
        let mut put = |field: &'static str, r: Result<(), InvalidValue>| {
            if let Err(e) = r {
                problems.push((field, e.to_string()));
            }
        };
        put("brokers", check_brokers(&self.brokers));
        put("client_id", check_client_id(&self.client_id));
        put(
            "delivery_timeout",
            check_delivery_timeout(self.delivery_timeout),
        );
        if self.idempotence && self.acks != Acks::All {
            put(
                "acks",
                Err(InvalidValue::new(format!(
                    "{:?} with idempotence: the idempotent producer needs all (or set idempotence false)",
                    self.acks
                ))),
            );
        }
        for (field, result) in breaker_checks(&self.breaker) {
            put(field, result);
        }
        put("librdkafka", check_producer_librdkafka(&self.librdkafka));
        if problems.is_empty() {
            Ok(())
        } else {
            Err(SettingsError {
                client: "producer",
                group: String::new(),
                problems,
            })
        }
    }
}
