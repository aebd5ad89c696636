//! Kafka (feature `kafka`, on [rdkafka](https://docs.rs/rdkafka/0.39)):
//! a [`Producer`] whose calls pass the breaker, the failure-injection
//! points `kafka:<topic>` and OpenTelemetry's messaging telemetry, as
//! every humus client's do; a [`Consumer`] that hands each record of a consumer group to your
//! processor in its producer's trace and baggage, strips the failure
//! scenarios of records it does not trust, and commits a record's offset
//! only once it was processed; and the header carrier
//! ([`inject_context`], [`extract_context`]) that writes and reads the
//! trace context and baggage of records.
//!
//! librdkafka is built from the crate's bundled source, with the machine's
//! C compiler and `make` (no cmake, no system librdkafka): a few minutes
//! the first time. It is built without TLS or SASL support, so librdkafka
//! refuses those properties (`security.protocol=sasl_ssl`) until a
//! service turns them on in the one librdkafka it links: rdkafka's
//! feature `ssl` (the system's OpenSSL) or `ssl-vendored` (OpenSSL built
//! from source) for TLS and SASL PLAIN and SCRAM, and `gssapi` for
//! Kerberos, in the service's own `Cargo.toml` (`rdkafka = { version =
//! "0.39", features = ["ssl-vendored"] }`); cargo builds rdkafka once,
//! with every feature asked of it.
//!
//! ```no_run
//! use humus::App;
//! use humus::app::{BoxError, Exit};
//! use humus::kafka::{Consumer, ConsumerSettings, TrustScenario};
//! use rdkafka::Message as _;
//!
//! #[tokio::main]
//! async fn main() -> Exit {
//!     App::new()
//!         .run(|setup| async move {
//!             // AUDIT_BROKERS=kafka-1:9092,kafka-2:9092 AUDIT_GROUP=audit AUDIT_TOPICS=transfers
//!             let mut audit: ConsumerSettings =
//!                 humus::app::from_env(|env| env.kafka_consumer("AUDIT_"))?; // exit 78, naming every bad variable
//!             audit.trust_scenario = Some(TrustScenario::topics(["transfers"]));
//!             Consumer::start(&setup, audit, |record| async move {
//!                 // Runs in the producer's trace and baggage: humus calls
//!                 // made here are children of this record's span.
//!                 let _transfer = record.payload().unwrap_or_default();
//!                 Ok::<_, BoxError>(())
//!             })?; // librdkafka's refusal of its configuration: exit 78
//!             Ok(vec![]) // the App's servers
//!         })
//!         .await
//! }
//! ```
//!
//! # The producer
//!
//! ```no_run
//! use humus::App;
//! use humus::app::Exit;
//! use humus::kafka::{Producer, ProducerSettings, Record};
//!
//! #[tokio::main]
//! async fn main() -> Exit {
//!     App::new()
//!         .run(|setup| async move {
//!             // LEDGER_KAFKA_BROKERS=kafka-1:9092 LEDGER_KAFKA_DELIVERY_TIMEOUT=5s
//!             // LEDGER_KAFKA_LIBRDKAFKA_LINGER_MS=5 (librdkafka's linger.ms)
//!             let settings: ProducerSettings =
//!                 humus::app::from_env(|env| env.kafka_producer("LEDGER_KAFKA_"))?; // exit 78, naming every bad variable
//!             // librdkafka's refusal of the properties together (linger.ms
//!             // not below delivery_timeout): exit 78.
//!             let events = Producer::new(&setup, settings)?;
//!             // In a handler: in the served RPC's trace and baggage.
//!             let _stored = events
//!                 .produce([Record::to("transfers").key("t-7").value(r#"{"amount": 12}"#)])
//!                 .await;
//!             Ok(vec![]) // the App's servers
//!         })
//!         .await
//! }
//! ```
//!
//! [`app::Env::kafka_producer`](crate::app::Env::kafka_producer) reads
//! them from environment variables (`<prefix>` and the field's name in
//! capitals; librdkafka's properties one variable each,
//! `<prefix>LIBRDKAFKA_LINGER_MS` for `linger.ms`), naming every bad one;
//! any `serde` format reads them too, checked with
//! [`check_kafka_producer`](crate::app::check_kafka_producer).
//! [`ProducerSettings`] lists every field with its default and its check.
//! In short: `brokers` (`host:port` each, no scheme); `client_id` (empty:
//! librdkafka's); `delivery_timeout` (30 s: how long a record may take to
//! be stored, librdkafka's `message.timeout.ms`, its idempotent retries
//! within it); `acks` (`all`) and `idempotence` (on); the clients' shared
//! `breaker` section (window 20, 1 probe, open 10 s, probe timeout 30 s)
//! and `breaker_policy`; `forward_scenario` (`false`); `classify` (in
//! code); and `librdkafka`, the properties humus does not own (TLS, SASL,
//! `linger.ms`, `message.max.bytes`), passed through.
//!
//! Each [`Producer::produce`] of one or more records is **one call** of
//! humus's call engine, with one attempt (librdkafka's retries are the
//! only ones). Its deadline is the earlier of `delivery_timeout` and the
//! deadline of the RPC being served, when the call is made in one
//! ([`Inherited`](crate::deadline::Inherited), read when `produce` is
//! called, as every humus client reads it): a produce in a handler whose
//! caller gave it 200 ms waits 200 ms at most, not `delivery_timeout`.
//! A call made once that deadline has passed fails at once
//! ([`Kind::Timeout`]): nothing is sent or counted.
//!
//! 1. The breaker admits the call once; a rejected call sends nothing and
//!    fails at once ([`Kind::Rejected`]).
//! 2. Each record's span starts: a PRODUCER span `send <topic>`, a child
//!    of the span in the call's context.
//! 3. With failure injection on, each record's point `kafka:<topic>` is
//!    evaluated once, in the record's own (unstripped) context, the
//!    evaluation event on its span. If any record's fault aborts, the whole
//!    call aborts: every record fails unsent with that point's
//!    [`InjectedError`](crate::fault::InjectedError), librdkafka is never
//!    reached, and the call is a breaker Failure. A delay waits the longest
//!    of the records' delays, inside the call's deadline; cut short by it,
//!    the call is a Failure ([`Kind::Timeout`]).
//! 4. Each record carries the trace context of its span and the call's
//!    baggage, written with the Setup's propagator (W3C by default), the
//!    failure scenario stripped unless `forward_scenario` (every other
//!    member, a tenant, kept; a `humus.fit.strip` event on the record's
//!    span). A record's own trace context headers (`traceparent`,
//!    `tracestate`) are replaced. A record's own `baggage` header is kept,
//!    written after the call's (a reader that joins them, as the
//!    consumer does, sees the record's own member where both carry one),
//!    under the same trust rule as a caller's own header in the gRPC and
//!    HTTP clients: unless `forward_scenario`, it is stripped as a server
//!    strips one (its scenario's members removed, every other member kept,
//!    a value that cannot be read whole dropped; a `humus.fit.strip`
//!    event on the record's span).
//! 5. The records go to librdkafka in the order given, and the call ends
//!    once each is stored, or failed: where each went
//!    ([`Delivery`]), or an [`Error`] saying what became of each
//!    ([`Error::records`]). The call's wait ends at its deadline, whichever
//!    it is ([`Kind::Timeout`], its message naming the one to raise:
//!    `delivery_timeout`, or the inherited deadline), each record stored
//!    by then [`Stored`](RecordResult::Stored), each librdkafka failed
//!    [`Failed`](RecordResult::Failed), the others
//!    [`InFlight`](RecordResult::InFlight): librdkafka keeps them and may
//!    still store them within `delivery_timeout` of their send (it fails
//!    a record past it only at its next timeout scan, and later when the
//!    partition's leader is unknown, so humus does not wait for that).
//!    On tokio's paused clock (a test's `start_paused`) that deadline
//!    passes as soon as the runtime is idle, while librdkafka keeps real
//!    time: a test resumes the clock (`tokio::time::resume`) while
//!    librdkafka stores.
//!
//! What counts, by [`default_classify`] (override it with
//! [`ProducerSettings::classify`]): every record stored is a Success; a
//! record not stored within `delivery_timeout` (a broker that cannot be
//! reached), a broker's transport error, or an injected fault is a
//! Failure; the caller's own errors ([`Kind::Record`]: a record over the
//! size limit, an unknown or unauthorised topic) are Ignored: they do not
//! count against the cluster. A call its deadline ended is a Failure
//! without asking the classify, whichever the deadline was: a record not
//! stored by the deadline inherited from the RPC being served counts as
//! the gRPC and HTTP clients count a call that deadline ends (a
//! dependency too slow for its callers' deadlines fails them), and its
//! span ends with `error.type` `timeout`; it was handed to librdkafka, so
//! it is in the messaging instruments. A call its caller drops counts
//! nothing (librdkafka still stores the records handed to it), unless it
//! is dropped at its deadline (within
//! [`DEADLINE_SLACK`](crate::grpc::client::DEADLINE_SLACK)), as a server drops a
//! handler at the served RPC's deadline: a Failure, as the deadline's.
//!
//! On the App's stop (an on-stop hook of the Setup's, after the servers
//! stopped), the producer is closed ([`Producer::close`]): a produce made
//! after it fails at once with [`Kind::Stopped`] ("the producer is
//! closed"), nothing sent or counted (`stopped` in
//! `humus.retry.decisions`), as the RabbitMQ publisher's does; and it
//! flushes the records in flight: librdkafka sends them at once and the
//! hook waits until each is stored or failed, within `delivery_timeout`
//! and the App's stop timeout. A call made before the stop ends as it
//! would have, its records flushed.
//!
//! # The consumer's settings
//!
//! [`app::Env::kafka_consumer`](crate::app::Env::kafka_consumer) reads
//! them from environment variables as the producer's, naming every bad
//! one; [`trust_scenario`](ConsumerSettings::trust_scenario) is set in
//! code. [`ConsumerSettings`] lists every field with its default and its
//! check.
//! In short: `brokers` (`host:port` each, no scheme), `group`, `topics`;
//! `max_attempts` (5) with `backoff_base` (100 ms) and `backoff_max`
//! (10 s) for a failing record; `dead_letter_topic` (none);
//! `commit_interval` (5 s); `shutdown_grace` (10 s); and `librdkafka`, the
//! properties humus does not own (TLS, SASL, `client.id`), passed through.
//!
//! # Each record
//!
//! 1. Its trace context and baggage are read from its headers with the
//!    Setup's propagator ([`extract_context`]).
//! 2. Its span starts: a CONSUMER span `process <topic>`, a child of the
//!    producer's span (below).
//! 3. When the Setup's failure injection is on (or
//!    [strip-only](crate::fault::Injector::strip_only)) and the record's
//!    baggage carries a scenario, the settings'
//!    [`trust_scenario`](ConsumerSettings::trust_scenario) decides whether
//!    the processor sees it. Unset, it trusts no record, and the scenario
//!    is stripped, every other baggage member (a tenant) kept, with a
//!    `humus.fit.strip` event on the record's span: from the context and
//!    from the record's `baggage` header the processor is handed, read from
//!    the header itself whatever the Setup's propagator (the servers'
//!    strip, [design](crate::design::failure_injection#trust-and-stripping)). Trust by topic
//!    ([`TrustScenario::topics`]): the cluster's ACLs decide who may
//!    produce to a topic. A panic in the trust function is not recovered
//!    (see [`Consumer`]).
//! 4. The processor runs with the record's context current (the span and
//!    the baggage), so the humus calls it makes join the record's trace and
//!    carry its baggage.
//! 5. `Ok`: the record's offset is stored, and committed with the next
//!    commit (every `commit_interval`, and at the stop). `Err`: the
//!    processor runs again after a backoff (the clients' full-jitter
//!    schedule of `backoff_base` and `backoff_max`). After `max_attempts`
//!    failures the record is produced to `dead_letter_topic`, when one is
//!    set, and its offset committed; otherwise it holds its partition: it
//!    is reported (a `humus.kafka.record_held` event on its span and an
//!    ERROR log record) and retried until it succeeds.
//!
//! No record is skipped: an offset is committed only after its record was
//! processed (or dead-lettered), so a record is processed at least once,
//! and more than once when a consumer dies before its commit. A new group
//! starts at each partition's earliest record.
//!
//! The consumer processes one record at a time, in the order it fetches
//! them: a record that holds its partition holds the consumer's other
//! partitions too, until it succeeds. (A processor that must not be held
//! sets `dead_letter_topic`.)
//!
//! # The stop
//!
//! On the App's stop (an on-stop hook of the Setup's: after the servers
//! stopped), or on [`Consumer::stop`]: the consumer fetches no more
//! records, lets the record in flight finish within `shutdown_grace`
//! (then drops it, its offset not committed: the group processes it
//! again), commits the offsets of the records processed, and leaves the
//! group, so its partitions go to the group's other members at once.
//!
//! # Telemetry
//!
//! Through the Setup's providers, never OpenTelemetry's globals, in the
//! scope [`KAFKA_SCOPE`](crate::telemetry::names::KAFKA_SCOPE), with
//! OpenTelemetry's messaging conventions:
//!
//! - Each produced record is one PRODUCER span `send <topic>`, with
//!   `messaging.system` = `kafka`, `messaging.operation.name` and
//!   `messaging.operation.type` = `send`, `messaging.destination.name`
//!   (the topic), `server.address` and `server.port` (the first broker),
//!   and once stored `messaging.destination.partition.id` and
//!   `messaging.kafka.offset`; a record that failed ends with status Error
//!   and `error.type`: librdkafka's code (`MessageTimedOut`,
//!   `MessageSizeTooLarge`), [`fault::ERROR_TYPE`](crate::fault::ERROR_TYPE)
//!   for an injected fault, `humus::circuit::Rejected` for a rejected call.
//! - `messaging.client.operation.duration` (a histogram, in seconds, from
//!   the record's span's start to its delivery report) and
//!   `messaging.client.sent.messages` (a counter), once per record handed
//!   to librdkafka, with the span's attributes but the offset and
//!   `error.type` when it failed. A record failure injection or the
//!   breaker kept from librdkafka is in neither.
//! - humus's own client instruments and log records, in the scope
//!   [`CLIENT_SCOPE`](crate::telemetry::names::CLIENT_SCOPE), by the first
//!   broker's `server.address`: `humus.circuit.calls` once per call (by
//!   its outcome, `rejected` for a rejected call), `humus.circuit.state`,
//!   `humus.circuit.transitions` and the breaker's transition log records,
//!   as every client's.
//!
//! - Each record is one CONSUMER span `process <topic>`, a child of the span
//!   its headers name (the producer's), with `messaging.system` = `kafka`,
//!   `messaging.operation.name` and `messaging.operation.type` =
//!   `process`, `messaging.destination.name` (the topic),
//!   `messaging.destination.partition.id`, `messaging.kafka.offset` and
//!   `messaging.consumer.group.name`. Each failed run of the processor is
//!   an `exception` event (`exception.message`, `humus.kafka.attempts`). A
//!   record dead-lettered, or dropped by the stop, ends with status Error
//!   and `error.type` (`_OTHER`, or [`STOPPED_ERROR_TYPE`]). A stripped
//!   scenario is a `humus.fit.strip` event.
//! - `messaging.process.duration` (a histogram, in seconds), once per
//!   record, from its span's start to its end, with the span's messaging
//!   attributes but the offset, and `error.type` as on the span.
//!
//! # Testing
//!
//! librdkafka opens its own connections, not through the Setup's
//! [`Host`](crate::Host), so the in-memory network does not reach Kafka.
//! librdkafka's mock cluster does, in process and with no port to set up:
//! rdkafka's [`MockCluster`](rdkafka::mocking::MockCluster) (add `rdkafka
//! = "0.39"`, the version humus uses, to the test's dependencies). Its
//! `bootstrap_servers()` are the producer's and consumer's `brokers`;
//! `broker_down(1)` and `broker_up(1)` make an outage. humus's own tests
//! of the producer and the consumer run on it (`runtime/tests/kafka_*.rs`
//! in the repository), and so do the walkthrough's Kafka events.
//!
//! ```
//! use humus::kafka::{Producer, ProducerSettings, Record};
//! use rdkafka::mocking::MockCluster;
//! use rdkafka::producer::DefaultProducerContext;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let cluster: MockCluster<'static, DefaultProducerContext> = MockCluster::new(1)?;
//! cluster.create_topic("transfers", 1, 1)?;
//! let events = Producer::new(
//!     &humus::Setup::new(),
//!     ProducerSettings {
//!         brokers: cluster.bootstrap_servers().split(',').map(str::to_owned).collect(),
//!         ..ProducerSettings::default()
//!     },
//! )?;
//! let stored = events.produce([Record::to("transfers").value("t-7")]).await?;
//! assert_eq!(stored.len(), 1);
//! # Ok(())
//! # }
//! ```
//! - A record that failed `max_attempts` times is one log record:
//!   `humus.kafka.record_held` (ERROR, it holds its partition) or
//!   `humus.kafka.dead_lettered` (WARN), with the record's topic,
//!   partition, offset, group and `humus.kafka.attempts`, in its span's
//!   trace; the same event is on its span.

mod consumer;
mod delivery;
mod headers;
mod producer;
mod settings;

pub use consumer::{Consumer, STOPPED_ERROR_TYPE, StartError};
pub use delivery::{CallResult, Classify, Delivery, Error, Kind, RecordResult, default_classify};
pub use headers::{extract_context, inject_context};
pub use producer::{NewError, Producer, Record};
// Not inlined: rdkafka's own docs link to its other items, which are not
// this crate's (they would render as text here).
#[doc(no_inline)]
pub use rdkafka::message::{Message, OwnedMessage};
pub use settings::{
    Acks, ConsumerSettings, ProducerSettings, SettingsError, TrustScenario, check_brokers,
    check_client_id, check_commit_interval, check_delivery_timeout, check_group, check_librdkafka,
    check_producer_librdkafka, check_topic, check_topics,
};
