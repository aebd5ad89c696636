//! [`Producer`]: records produced as one call on the call engine
//! ([`crate::call`]), through the breaker, the failure-injection points
//! `kafka:<topic>`, and OpenTelemetry's messaging conventions.

use std::borrow::Cow;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::StreamExt as _;
use futures_util::future::join_all;
use futures_util::stream::FuturesUnordered;
use http::HeaderName;
use opentelemetry::metrics::{Counter, Histogram};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};
use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers as _, OwnedHeaders};
use rdkafka::producer::future_producer::OwnedDeliveryResult;
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer as _};
use rdkafka::util::Timeout;
use tokio::sync::watch;
use tokio::time::Instant;

use super::delivery::{Delivery, Error, Kind, RecordResult, failed, kafka_error_type};
use super::headers::header_map;
use super::settings::{ProducerSettings, SettingsError};
use crate::call::{Anchor, Classification, Dependency, Parts, Refused, Sections, Transport};
use crate::circuit::{Outcome, Rejected};
use crate::deadline::{Bound, Deadline, Inherited};
use crate::fault::strip::BAGGAGE;
use crate::fault::{Fault, InjectedError};
use crate::telemetry::names::{
    ERROR_TYPE, KAFKA_SCOPE, MESSAGING_CLIENT_OPERATION_DURATION, MESSAGING_CLIENT_SENT_MESSAGES,
    MESSAGING_DESTINATION_NAME, MESSAGING_DESTINATION_PARTITION_ID, MESSAGING_KAFKA_OFFSET,
    MESSAGING_OPERATION_NAME, MESSAGING_OPERATION_TYPE, MESSAGING_SYSTEM, MESSAGING_SYSTEM_KAFKA,
    SERVER_ADDRESS, SERVER_PORT,
};
use crate::telemetry::{DURATION_BOUNDARIES, HeaderInjector, scope};
use crate::{Setup, circuit, retry, telemetry};

/// One record to produce: its topic, key, value and headers. The
/// producer adds the trace context and baggage headers (see the
/// [module](super) docs).
///
/// ```
/// use humus::kafka::Record;
/// let record = Record::to("orders").key("o-7").value(r#"{"total": 12}"#).header("schema", "v2");
/// assert_eq!(record.topic, "orders");
/// ```
#[derive(Clone, Debug)]
pub struct Record {
    /// The topic.
    pub topic: String,
    /// The key, which picks the partition (librdkafka's partitioner);
    /// `None`: any partition.
    pub key: Option<Vec<u8>>,
    /// The value; `None` is a tombstone.
    pub value: Option<Vec<u8>>,
    /// The record's own headers. Those of the trace context the Setup's
    /// propagator writes (`traceparent`, `tracestate`) are the producer's:
    /// a record's own are replaced. A record's own `baggage` is kept, sent
    /// after the call's, its failure scenario stripped unless
    /// [`forward_scenario`](ProducerSettings::forward_scenario) (see the
    /// [module](super) docs).
    pub headers: Option<OwnedHeaders>,
}

impl Record {
    /// A record to `topic`, with no key, value or header yet.
    pub fn to(topic: impl Into<String>) -> Record {
        Record {
            topic: topic.into(),
            key: None,
            value: None,
            headers: None,
        }
    }

    /// This record with `key`.
    #[must_use]
    pub fn key(mut self, key: impl Into<Vec<u8>>) -> Record {
        self.key = Some(key.into());
        self
    }

    /// This record with `value`.
    #[must_use]
    pub fn value(mut self, value: impl Into<Vec<u8>>) -> Record {
        self.value = Some(value.into());
        self
    }

    /// This record with the header `key` = `value` added.
    #[must_use]
    pub fn header(mut self, key: &str, value: impl AsRef<[u8]>) -> Record {
        let headers = self.headers.take().unwrap_or_default();
        self.headers = Some(headers.insert(Header {
            key,
            value: Some(value.as_ref()),
        }));
        self
    }
}

/// Why [`Producer::new`] built no producer.
#[derive(Debug, thiserror::Error)]
pub enum NewError {
    /// The settings are bad: every bad field is named.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// librdkafka refused to build its client: a combination of
    /// properties it checks only then (the settings' check has run each
    /// property through librdkafka, [`check_producer_librdkafka`](super::check_producer_librdkafka)),
    /// or a resource it could not get.
    #[error("kafka producer of {brokers}: {source}")]
    Kafka {
        /// The brokers, comma-separated.
        brokers: String,
        /// librdkafka's error.
        #[source]
        source: KafkaError,
    },
}

/// A Kafka producer of one cluster, with a breaker, the failure-injection
/// points `kafka:<topic>` and OpenTelemetry's messaging telemetry (see the
/// [module](super) docs).
///
/// One per cluster: build it once where the service is set up, and clone
/// it (a cheap handle). Each [`produce`](Producer::produce) is one call of
/// the shared call engine, of one or more records.
#[derive(Clone)]
pub struct Producer {
    inner: Arc<Inner>,
}

struct Inner {
    settings: ProducerSettings,
    kafka: FutureProducer,
    /// The breaker, recorder and failure injector every call runs with
    /// (one attempt a call: its budget is never spent).
    dependency: Dependency,
    /// `None` without a tracer provider: no span is made.
    tracer: Option<opentelemetry::global::BoxedTracer>,
    propagator: Arc<dyn TextMapPropagator + Send + Sync>,
    /// The headers the producer writes: `baggage` and the propagator's.
    fields: Vec<HeaderName>,
    /// `server.address` and `server.port` of the first broker.
    server: Vec<KeyValue>,
    /// `None` without a meter provider, or with the no-op one.
    instruments: Option<Messaging>,
    /// Set by [`Producer::close`]: no call is admitted after it.
    closed: watch::Sender<bool>,
    /// Keeps a timer ahead of the calls' deadline timers while calls
    /// come, so that registering each call's (which bounds its wait) does
    /// not wake tokio's time driver ([`Anchor`]), and keeps the deadlines
    /// of `delivery_timeout` in a queue, in the order the calls came, so
    /// that those need no timer of their own ([`Anchor::expiry`]): spawned
    /// by a call when it is not running, touched by each, ended by the
    /// close and the drop.
    anchor: Arc<Anchor>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.anchor.end();
    }
}

/// The producer's messaging instruments.
struct Messaging {
    duration: Histogram<f64>,
    sent: Counter<u64>,
}

impl fmt::Debug for Producer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("brokers", &self.inner.settings.brokers)
            .finish_non_exhaustive()
    }
}

impl Producer {
    /// Builds the producer of the cluster `settings` name, for `setup`: it
    /// records with `setup`'s telemetry, evaluates its failure injector,
    /// and registers [`close`](Producer::close) (which flushes the records
    /// in flight) with `setup`'s on-stop hooks ([`Setup::on_stop`]),
    /// bounded by the App's stop timeout. Connects nothing yet (librdkafka connects in the
    /// background).
    ///
    /// # Errors
    ///
    /// [`NewError::Settings`] naming every bad field;
    /// [`NewError::Kafka`] when librdkafka refuses its configuration.
    pub fn new(setup: &Setup, settings: ProducerSettings) -> Result<Producer, NewError> {
        settings.check()?;
        let brokers = settings.brokers.join(",");
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &brokers)
            .set(
                "message.timeout.ms",
                settings.delivery_timeout.as_millis().to_string(),
            )
            .set("acks", settings.acks.as_librdkafka())
            .set(
                "enable.idempotence",
                if settings.idempotence {
                    "true"
                } else {
                    "false"
                },
            );
        if !settings.client_id.is_empty() {
            config.set("client.id", &settings.client_id);
        }
        for (key, value) in &settings.librdkafka {
            config.set(key, value);
        }
        let kafka: FutureProducer = config.create().map_err(|source| NewError::Kafka {
            brokers: brokers.clone(),
            source,
        })?;
        let telemetry = setup.telemetry();
        let recorder = telemetry::ClientRecorder::new(telemetry, &settings.brokers[0]);
        let sections = Sections {
            breaker: settings.breaker,
            breaker_policy: settings.breaker_policy.clone(),
            retry_budget: retry::BudgetConfig::default(),
            max_attempts: 1,
            backoff_base: Duration::ZERO,
            backoff_max: Duration::ZERO,
            // librdkafka's `message.timeout.ms` bounds each record.
            attempt_timeout: None,
        };
        let dependency = Dependency::new(setup, recorder, sections).map_err(|e| {
            // The settings' check ran the breaker's checks: a programming
            // error if it refuses them now; named as a settings error all
            // the same. (The default budget is valid.)
            let source = match e {
                Refused::Breaker(e) => KafkaError::ClientCreation(e.to_string()),
                Refused::Budget(e) => KafkaError::ClientCreation(e.to_string()),
            };
            NewError::Kafka {
                brokers: brokers.clone(),
                source,
            }
        })?;
        let recorder = &dependency.recorder;
        let mut server = vec![KeyValue::new(
            SERVER_ADDRESS,
            recorder.server_address().to_owned(),
        )];
        if let Some(port) = recorder.server_port() {
            server.push(KeyValue::new(SERVER_PORT, i64::from(port)));
        }
        let mut fields = vec![BAGGAGE];
        for field in telemetry.propagator().fields() {
            if let Ok(name) = HeaderName::try_from(field)
                && !fields.contains(&name)
            {
                fields.push(name);
            }
        }
        let instruments = (telemetry.has_meter_provider() && !telemetry.is_noop_meter_provider())
            .then(|| {
                let meter = telemetry.meter(scope(KAFKA_SCOPE));
                Messaging {
                    duration: meter
                        .f64_histogram(MESSAGING_CLIENT_OPERATION_DURATION)
                        .with_unit("s")
                        .with_description(
                            "Duration of messaging operation initiated by a producer or consumer client.",
                        )
                        .with_boundaries(DURATION_BOUNDARIES.to_vec())
                        .build(),
                    sent: meter
                        .u64_counter(MESSAGING_CLIENT_SENT_MESSAGES)
                        .with_unit("{message}")
                        .with_description(
                            "Number of messages producer attempted to send to the broker.",
                        )
                        .build(),
                }
            });
        let inner = Arc::new(Inner {
            kafka,
            dependency,
            tracer: telemetry
                .has_tracer_provider()
                .then(|| telemetry.tracer(scope(KAFKA_SCOPE))),
            propagator: telemetry.shared_propagator(),
            fields,
            server,
            instruments,
            settings,
            closed: watch::Sender::new(false),
            anchor: Arc::default(),
        });
        let closing = Arc::downgrade(&inner);
        setup.on_stop_named(
            format!("closing the kafka producer of {brokers}"),
            move || async move {
                if let Some(inner) = closing.upgrade() {
                    Producer { inner }.close().await;
                }
            },
        );
        Ok(Producer { inner })
    }

    /// Closes the producer: no call is admitted after it (a produce fails
    /// at once, [`Kind::Stopped`], nothing sent or counted), and the
    /// records in flight are flushed: librdkafka sends them at once, and
    /// this waits until each is stored or failed, within
    /// [`delivery_timeout`](ProducerSettings::delivery_timeout). A call
    /// made before it ends as it would have (its records flushed). The
    /// Setup's on-stop hook calls it, so the App's stop timeout bounds it
    /// there. A second call returns at once.
    pub async fn close(&self) {
        if self.inner.closed.send_replace(true) {
            return;
        }
        self.inner.anchor.end();
        // librdkafka's flush blocks: a record in flight is stored or failed
        // within delivery_timeout, so that bounds it.
        let inner = Arc::clone(&self.inner);
        let _ = tokio::task::spawn_blocking(move || {
            let timeout = inner.settings.delivery_timeout;
            let _ = inner.kafka.flush(Timeout::After(timeout));
        })
        .await;
    }

    /// The producer's settings, as given to [`Producer::new`].
    pub fn settings(&self) -> &ProducerSettings {
        &self.inner.settings
    }

    /// The readable state of the producer's breaker.
    pub fn breaker_state(&self) -> circuit::State {
        self.inner.dependency.breaker.state()
    }

    /// librdkafka's out-queue length (`rd_kafka_outq_len`): the records it
    /// holds that are not yet stored or failed, plus the requests to its
    /// brokers and the reports it has not yet handed over (0 once
    /// everything is delivered and reported).
    pub fn in_flight(&self) -> i32 {
        self.inner.kafka.in_flight_count()
    }

    /// Produces `records` as one call, in the current OpenTelemetry
    /// context: [`produce_in`](Producer::produce_in) with
    /// [`Context::current`](opentelemetry::Context::current), read when this is called.
    ///
    /// # Errors
    ///
    /// As [`produce_in`](Producer::produce_in).
    pub fn produce<I>(
        &self,
        records: I,
    ) -> impl Future<Output = Result<Vec<Delivery>, Error>> + Send + use<I>
    where
        I: IntoIterator<Item = Record>,
    {
        self.produce_in(Context::current(), records)
    }

    /// Produces `records` as one call in the context `cx` (its span the
    /// parent of each record's, its baggage sent with each record and
    /// carrying the failure scenario), and waits until each record is
    /// stored: where each went, in the order given. No records: `Ok` at
    /// once, nothing counted.
    ///
    /// The call is admitted by the breaker once; each record's point
    /// `kafka:<topic>` is evaluated just after (with injection on); then
    /// every record is handed to librdkafka, in order, with the trace
    /// context and baggage headers (the scenario stripped unless
    /// [`forward_scenario`](ProducerSettings::forward_scenario)); the call
    /// ends when each is stored or failed, within
    /// [`delivery_timeout`](ProducerSettings::delivery_timeout) or, when
    /// earlier, the deadline of the RPC being served
    /// ([`Inherited`](crate::deadline::Inherited), read when this is
    /// called), and is classified once ([`ProducerSettings::classify`]).
    /// Dropped before that, it counts nothing (librdkafka still stores
    /// the records handed to it).
    ///
    /// # Errors
    ///
    /// [`Error`]: [`Kind::Rejected`] when the breaker rejects the call
    /// (nothing sent); [`Kind::Transport`] with
    /// [`injected`](Error::injected) when a record's fault aborts (every
    /// record unsent); [`Kind::Timeout`] for a record not stored within
    /// `delivery_timeout` or by the inherited deadline (an injected delay
    /// that reaches it too; at once, nothing sent, for an inherited
    /// deadline already passed);
    /// [`Kind::Transport`] for another failure of the cluster's;
    /// [`Kind::Record`] for the caller's own (a record too large, an
    /// unknown topic); [`Kind::Stopped`] at once, nothing sent, once the
    /// producer is closed ([`close`](Producer::close)). [`Error::records`]
    /// says what became of each.
    ///
    /// # Panics
    ///
    /// When polled outside a tokio runtime (its timers are tokio's), and
    /// with what the classify or breaker policy functions panic with.
    pub fn produce_in<I>(
        &self,
        cx: Context,
        records: I,
    ) -> impl Future<Output = Result<Vec<Delivery>, Error>> + Send + use<I>
    where
        I: IntoIterator<Item = Record>,
    {
        let records = Records::new(records);
        // Read now, before the future moves to another task: the deadline
        // of the RPC being served, as every humus client reads it.
        let inherited = Inherited::current_deadline();
        let producer = self.clone();
        async move {
            if records.is_empty() {
                return Ok(Vec::new());
            }
            let inner = &*producer.inner;
            let started = Instant::now();
            let delivery_timeout = inner.settings.delivery_timeout;
            let (deadline, bound) =
                match Deadline::earliest(started, Some(delivery_timeout), None, inherited) {
                    Some(d) => (Some(d.at), d.bound),
                    // A delivery timeout too long for the clock, nothing
                    // inherited.
                    None => (None, Bound::Setting(delivery_timeout)),
                };
            // At the first call, and again if the runtime that ran the
            // anchor's task is gone.
            inner.anchor.spawn();
            inner.anchor.touch();
            let call = KafkaCall {
                inner,
                deadline,
                bound,
                started,
                records,
                cx,
                reports: OnceLock::new(),
                closed: *inner.closed.borrow(),
            };
            crate::call::Call::new(&inner.dependency.breaker, call)
                .run()
                .await
        }
    }
}

/// One produce call, the transport of the attempt loop ([`crate::call`]).
struct KafkaCall<'a> {
    inner: &'a Inner,
    records: Records,
    cx: Context,
    started: Instant,
    /// The earlier of `delivery_timeout` from `started` and the deadline
    /// inherited from the RPC being served.
    deadline: Option<Instant>,
    /// Which of the two `deadline` is (its timeout error names it).
    bound: Bound,
    /// What became of each record, once known, for the error of a call
    /// its deadline ended ([`Transport::deadline_exceeded`]): set by the
    /// send when librdkafka failed a record, or when the deadline cut
    /// the wait of a call of several records short.
    reports: OnceLock<Vec<RecordResult>>,
    /// Whether the producer was closed when the call was made: then it is
    /// not admitted. (A call made before the close ends as it would have:
    /// the close flushes its records.)
    closed: bool,
}

/// A call's records, in order: one kept inline (the usual call: no
/// vector to allocate and free), or any number.
enum Records {
    One([Record; 1]),
    Many(Vec<Record>),
}

impl Records {
    fn new(records: impl IntoIterator<Item = Record>) -> Records {
        let mut records = records.into_iter();
        let Some(first) = records.next() else {
            return Records::Many(Vec::new());
        };
        let Some(second) = records.next() else {
            return Records::One([first]);
        };
        let mut many = Vec::with_capacity(2 + records.size_hint().0);
        many.push(first);
        many.push(second);
        many.extend(records);
        Records::Many(many)
    }
}

impl std::ops::Deref for Records {
    type Target = [Record];

    fn deref(&self) -> &[Record] {
        match self {
            Records::One(one) => one,
            Records::Many(many) => many,
        }
    }
}

/// The PRODUCER spans of a call's records, one per record, in order.
struct Spans {
    /// The first record's (a call has one at least).
    first: Context,
    /// The others': empty, and never allocated, for a call of one record.
    rest: Vec<Context>,
    started: Instant,
}

impl Spans {
    /// Each record's span, in order.
    fn records(&self) -> impl Iterator<Item = &Context> {
        std::iter::once(&self.first).chain(&self.rest)
    }
}

impl KafkaCall<'_> {
    /// The messaging attributes of `topic`'s record, for its span and its
    /// data points.
    fn attributes(&self, topic: &str) -> Vec<KeyValue> {
        let mut attributes = Vec::with_capacity(6);
        attributes.push(KeyValue::new(MESSAGING_SYSTEM, MESSAGING_SYSTEM_KAFKA));
        attributes.push(KeyValue::new(MESSAGING_OPERATION_NAME, "send"));
        attributes.push(KeyValue::new(MESSAGING_DESTINATION_NAME, topic.to_owned()));
        attributes.extend(self.inner.server.iter().cloned());
        attributes
    }

    /// A record's span, started now: `send <topic>`, a child of the span
    /// in the call's context, which keeps the call's baggage.
    fn record_span(&self, topic: &str) -> Context {
        let Some(tracer) = &self.inner.tracer else {
            return self.cx.clone();
        };
        let mut attributes = self.attributes(topic);
        attributes.push(KeyValue::new(MESSAGING_OPERATION_TYPE, "send"));
        let span = tracer
            .span_builder(format!("send {topic}"))
            .with_kind(SpanKind::Producer)
            .with_attributes(attributes)
            .start_with_context(tracer, &self.cx);
        if span.span_context().is_valid() {
            self.cx.with_span(span)
        } else {
            self.cx.clone()
        }
    }

    /// The call's records, each failed unsent as `error` says.
    fn unsent(&self, mut error: Error) -> Error {
        error.records = vec![RecordResult::Unsent; self.records.len()];
        error
    }
}

impl Transport for KafkaCall<'_> {
    type Output = Vec<Delivery>;
    type Error = Error;
    type Span = Spans;
    type Prepared = ();

    /// The send ends its own wait at the call's deadline: it says then
    /// which records were stored or failed and which are still in flight,
    /// which a timer of the loop's would not know.
    const TIMES_ATTEMPTS: bool = false;

    fn parts(&self) -> Parts<'_> {
        self.inner
            .dependency
            .parts(&self.cx, self.deadline, Some(self.started))
    }

    fn is_closed(&self) -> bool {
        self.closed
    }

    /// The first record's point; [`evaluate`](Transport::evaluate)
    /// evaluates each record's.
    fn point(&self) -> Cow<'static, str> {
        Cow::Owned(format!("kafka:{}", self.records[0].topic))
    }

    /// Each record's point `kafka:<topic>`, evaluated in the record's own
    /// context (its span gets the evaluation event), carried out as one:
    /// the longest delay, and an abort if any record's aborts (the point
    /// it names is the aborting record's, else the longest delay's).
    fn evaluate(&self, spans: &Spans) -> (Fault, Cow<'static, str>) {
        let faults = &self.inner.dependency.faults;
        let mut all = Fault::NONE;
        let mut point: Option<String> = None;
        for (record, cx) in self.records.iter().zip(spans.records()) {
            let at = format!("kafka:{}", record.topic);
            let fault = faults.eval(cx, &at);
            if fault.is_none() {
                continue;
            }
            let names = point.is_none()
                || (fault.abort && !all.abort)
                || (!all.abort && fault.delay > all.delay);
            if names {
                point = Some(at);
            }
            all = Fault {
                delay: all.delay.max(fault.delay),
                abort: all.abort || fault.abort,
            };
        }
        (all, Cow::Owned(point.unwrap_or_default()))
    }

    fn start(&self, _attempt: u32) -> Spans {
        let mut records = self.records.iter().map(|r| self.record_span(&r.topic));
        let first = records.next().expect("a call has one record at least");
        let inner = self.inner;
        Spans {
            first,
            rest: if self.records.len() > 1 {
                records.collect()
            } else {
                Vec::new()
            },
            // Read only for what records it ([`end`](Transport::end)).
            started: if inner.tracer.is_some() || inner.instruments.is_some() {
                Instant::now()
            } else {
                self.started
            },
        }
    }

    fn span_context(spans: &Spans) -> &Context {
        &spans.first
    }

    /// Ends each record's span: with its partition and offset once
    /// stored, else with its error; records its duration and that it was
    /// sent, unless failure injection ended the call before librdkafka
    /// was reached.
    fn end(&self, spans: Spans, result: Result<&Vec<Delivery>, &Error>) {
        let inner = self.inner;
        if inner.tracer.is_none() && inner.instruments.is_none() {
            return;
        }
        let elapsed = spans.started.elapsed().as_secs_f64();
        let sent = !matches!(result, Err(e) if e.injected().is_some());
        for (i, (record, cx)) in self.records.iter().zip(spans.records()).enumerate() {
            let span = cx.span();
            let outcome = match result {
                Ok(deliveries) => deliveries.get(i).copied().map(Ok),
                Err(e) => match e.records.get(i) {
                    Some(RecordResult::Stored(d)) => Some(Ok(*d)),
                    Some(RecordResult::Failed(k)) => {
                        Some(Err((kafka_error_type(k), k.to_string())))
                    }
                    _ => Some(Err((e.error_type(), e.to_string()))),
                },
            };
            let mut points = self.attributes(&record.topic);
            match outcome {
                Some(Ok(d)) => {
                    let partition =
                        KeyValue::new(MESSAGING_DESTINATION_PARTITION_ID, d.partition.to_string());
                    span.set_attribute(partition.clone());
                    span.set_attribute(KeyValue::new(MESSAGING_KAFKA_OFFSET, d.offset));
                    points.push(partition);
                }
                Some(Err((error_type, message))) => {
                    span.set_attribute(KeyValue::new(ERROR_TYPE, error_type.clone()));
                    span.set_status(Status::error(message));
                    points.push(KeyValue::new(ERROR_TYPE, error_type));
                }
                None => {}
            }
            span.end();
            if let Some(instruments) = inner.instruments.as_ref().filter(|_| sent) {
                instruments.duration.record(elapsed, &points);
                instruments.sent.add(1, &points);
            }
        }
    }

    fn prepare(&mut self, _attempt: crate::call::Attempt) {}

    /// Hands each record to librdkafka, in order, with the trace context
    /// of its span and the call's baggage (the scenario stripped unless
    /// `forward_scenario`), and waits for each one's delivery report.
    fn send<'s>(
        &'s self,
        _attempt: crate::call::Attempt,
        _prepared: (),
        spans: &'s mut Spans,
    ) -> impl Future<Output = Result<Vec<Delivery>, Error>> + Send + 's {
        let inner = self.inner;
        let strip = inner.dependency.faults.reads_scenarios() && !inner.settings.forward_scenario;
        // One record, the usual call: its send alone, no vector.
        let single = self.records.len() == 1;
        let mut one = None;
        let mut sends = Vec::with_capacity(if single { 0 } else { self.records.len() });
        for (record, cx) in self.records.iter().zip(spans.records()) {
            let stripped = if strip {
                inner.dependency.faults.strip(cx)
            } else {
                None
            };
            let mut written = http::HeaderMap::new();
            inner.propagator.inject_context(
                stripped.as_ref().unwrap_or(cx),
                &mut HeaderInjector(&mut written),
            );
            let mut kafka = FutureRecord::<[u8], [u8]>::to(&record.topic);
            // No header at all when there is none to write: librdkafka
            // copies what it is given.
            if record.headers.is_some() || !written.is_empty() {
                let mut headers = own_headers(record.headers.as_ref(), &inner.fields);
                for (name, value) in &written {
                    headers = headers.insert(Header {
                        key: name.as_str(),
                        value: Some(value.as_bytes()),
                    });
                }
                if let Some(own) = &record.headers {
                    let faults = strip.then_some(&inner.dependency.faults);
                    headers = with_own_baggage(headers, own, faults, cx);
                }
                kafka = kafka.headers(headers);
            }
            if let Some(key) = &record.key {
                kafka = kafka.key(key.as_slice());
            }
            if let Some(value) = &record.value {
                kafka = kafka.payload(value.as_slice());
            }
            // Enqueued at once (`send_result`): the wait keeps only the
            // report's receiver, not rdkafka's `send` future (some 600
            // bytes, moved with the call's state at each step).
            let sending = Sending::new(&inner.kafka, kafka, self.deadline);
            if single {
                one = Some(sending);
            } else {
                sends.push(sending);
            }
        }
        // The wait ends at the call's deadline, whichever bound it is:
        // librdkafka's `message.timeout.ms` fails a record only at its
        // next timeout scan (and much later when the partition's leader is
        // unknown), so a record not reported by then is in flight, and the
        // call fails then. A record that found librdkafka's queue full
        // waits for room within that time too.
        //
        // A deadline of `delivery_timeout` from the call's start comes in
        // the order the calls were made: the anchor's task keeps it
        // (`Anchor::expiry`), rather than a timer of the call's own.
        let cut_at = self.deadline;
        let in_order = matches!(self.bound, Bound::Setting(_));
        async move {
            let results = match (cut_at, one) {
                // One record, the usual call: no join, and no allocation
                // but the answer's.
                (cut_at, Some(sending)) => {
                    let report = match cut_at {
                        Some(at) => tokio::select! {
                            biased;
                            report = sending => report,
                            () = inner.anchor.expiry(at, in_order) => {
                                // Its record in flight
                                // (`deadline_exceeded` says so when no
                                // report is set).
                                return Err(self.deadline_exceeded());
                            }
                        },
                        None => sending.await,
                    };
                    match report {
                        Ok(d) => return Ok(vec![d]),
                        failed => vec![failed],
                    }
                }
                (None, None) => join_all(sends).await,
                (Some(at), None) => match until(inner.anchor.expiry(at, in_order), sends).await {
                    Ok(results) => results,
                    Err(records) => {
                        let _ = self.reports.set(records);
                        return Err(self.deadline_exceeded());
                    }
                },
            };
            if results.iter().all(Result::is_ok) {
                return Ok(results.into_iter().flatten().collect());
            }
            let error = failed(results);
            // The loop returns its deadline's error for a failure that
            // comes at or after the deadline: it says what became of each.
            let _ = self.reports.set(error.records.clone());
            Err(error)
        }
    }

    fn classify(
        &self,
        result: Result<&Vec<Delivery>, &Error>,
        deadline_passed: bool,
    ) -> Classification {
        match result {
            Err(_) if deadline_passed => Classification::stop(Outcome::Failure),
            result => self
                .inner
                .settings
                .classify
                .classify(result.map(Vec::as_slice)),
        }
    }

    fn is_resendable(&self) -> bool {
        false
    }

    fn finish(
        &self,
        result: Result<Vec<Delivery>, Error>,
        _decision: retry::Decision,
        _deadline_passed: bool,
    ) -> Result<Vec<Delivery>, Error> {
        result
    }

    /// Each record's span, ended at once with the rejection, and one
    /// `humus.circuit.calls` of outcome `rejected` (no messaging
    /// instrument: nothing was sent).
    fn rejected(&self, _attempt: u32, rejected: Rejected) -> Error {
        let error = self.unsent(Error::new(Kind::Rejected, rejected.to_string()));
        for record in self.records.iter().filter(|_| self.inner.tracer.is_some()) {
            let cx = self.record_span(&record.topic);
            let span = cx.span();
            span.set_attribute(KeyValue::new(ERROR_TYPE, error.error_type()));
            span.set_status(Status::error(error.to_string()));
            span.end();
        }
        self.inner.dependency.recorder.record_rejected_call();
        error
    }

    /// Only an inherited deadline can have passed when the call is made
    /// (`delivery_timeout` is never zero).
    fn expired(&self) -> Error {
        self.unsent(Error::new(
            Kind::Timeout,
            "the deadline inherited from the RPC being served had passed before the call: nothing was sent",
        ))
    }

    /// Names the bound that ended the call: `delivery_timeout`, or the
    /// deadline inherited from the RPC being served; each record
    /// [`Stored`](RecordResult::Stored), [`Failed`](RecordResult::Failed)
    /// or still [`InFlight`](RecordResult::InFlight).
    fn deadline_exceeded(&self) -> Error {
        let delivery_timeout = self.inner.settings.delivery_timeout;
        let message = match self.bound {
            Bound::Inherited(left) if left.is_zero() => format!(
                "not every record was stored by the deadline inherited from the RPC being served, not the delivery timeout of {delivery_timeout:?}"
            ),
            Bound::Inherited(left) => format!(
                "not every record was stored by the deadline inherited from the RPC being served ({left:?} left when the call was made), not the delivery timeout of {delivery_timeout:?}"
            ),
            Bound::Setting(_) | Bound::Request(_) => format!(
                "not every record was stored within the delivery timeout of {delivery_timeout:?}"
            ),
        };
        let mut error = Error::new(Kind::Timeout, message);
        error.records = match self.reports.get() {
            Some(records) => records.clone(),
            None => vec![RecordResult::InFlight; self.records.len()],
        };
        error
    }

    fn attempt_timed_out(&self, _after: Duration, injected: Option<InjectedError>) -> Error {
        match injected {
            Some(injected) => self.injected(injected),
            None => self.deadline_exceeded(),
        }
    }

    fn injected(&self, injected: InjectedError) -> Error {
        let kind = match injected.cause() {
            None => Kind::Transport,
            Some(_) => Kind::Timeout,
        };
        let mut error = self.unsent(Error::new(kind, format!("{injected}: no record was sent")));
        error.injected = Some(injected);
        error
    }

    fn closing(&self) -> Error {
        self.unsent(Error::new(
            Kind::Stopped,
            "the producer is closed: nothing was sent",
        ))
    }
}

/// A record handed to librdkafka (`send_result`, which enqueues it at
/// once): the future of its delivery report.
enum Sending<'r> {
    /// In librdkafka's queue: its report to come.
    Queued(DeliveryFuture),
    /// librdkafka's queue was full: handed again every 100 ms until the
    /// call's deadline, as rdkafka's own `send` waits for room. Boxed:
    /// only a record that found the queue full waits here, and the call's
    /// state stays small.
    Full(Pin<Box<dyn Future<Output = Result<Delivery, KafkaError>> + Send + 'r>>),
    /// librdkafka refused it (a record over `message.max.bytes`, an
    /// unknown partition).
    Refused(KafkaError),
}

/// How often a record that found librdkafka's queue full is handed again
/// (rdkafka's `FutureProducer::send` waits as long).
const QUEUE_FULL_RETRY: Duration = Duration::from_millis(100);

impl<'r> Sending<'r> {
    /// Hands `record` to `kafka`; if its queue is full, again every
    /// [`QUEUE_FULL_RETRY`] while `until` has not passed (never without
    /// one: the queue's error then).
    fn new(
        kafka: &'r FutureProducer,
        record: FutureRecord<'r, [u8], [u8]>,
        until: Option<Instant>,
    ) -> Sending<'r> {
        match kafka.send_result(record) {
            Ok(report) => Sending::Queued(report),
            Err((e, record)) if is_queue_full(&e) => Sending::Full(Box::pin(async move {
                let mut record = record;
                loop {
                    if until.is_none_or(|at| Instant::now() >= at) {
                        return Err(KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull));
                    }
                    tokio::time::sleep(QUEUE_FULL_RETRY).await;
                    match kafka.send_result(record) {
                        Ok(report) => return reported(report.await),
                        Err((e, again)) if is_queue_full(&e) => record = again,
                        Err((e, _)) => return Err(e),
                    }
                }
            })),
            Err((e, _)) => Sending::Refused(e),
        }
    }
}

impl Future for Sending<'_> {
    type Output = Result<Delivery, KafkaError>;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        match &mut *self {
            Sending::Queued(report) => Pin::new(report).poll(cx).map(reported),
            Sending::Full(retry) => retry.as_mut().poll(cx),
            Sending::Refused(e) => std::task::Poll::Ready(Err(e.clone())),
        }
    }
}

fn is_queue_full(e: &KafkaError) -> bool {
    *e == KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)
}

/// A delivery report as the call keeps it. Its sender dropped unsent
/// (`Err(Canceled)`: librdkafka gone with the records it held) is
/// [`KafkaError::Canceled`].
fn reported<C>(report: Result<OwnedDeliveryResult, C>) -> Result<Delivery, KafkaError> {
    match report {
        Ok(Ok(d)) => Ok(Delivery {
            partition: d.partition,
            offset: d.offset,
        }),
        Ok(Err((e, _))) => Err(e),
        Err(_) => Err(KafkaError::Canceled),
    }
}

/// The delivery reports of `sends`, in their order, unless `cut` (the
/// call's deadline) comes first: then what became of each by then
/// (`Stored`, `Failed`, or still `InFlight`).
async fn until<F>(
    cut: impl Future<Output = ()>,
    sends: Vec<F>,
) -> Result<Vec<Result<Delivery, KafkaError>>, Vec<RecordResult>>
where
    F: Future<Output = Result<Delivery, KafkaError>>,
{
    let mut pending: FuturesUnordered<_> = sends
        .into_iter()
        .enumerate()
        .map(|(i, send)| async move { (i, send.await) })
        .collect();
    let mut reports: Vec<Option<Result<Delivery, KafkaError>>> =
        (0..pending.len()).map(|_| None).collect();
    tokio::pin!(cut);
    loop {
        tokio::select! {
            biased;
            report = pending.next() => match report {
                Some((i, report)) => reports[i] = Some(report),
                None => return Ok(reports.into_iter().flatten().collect()),
            },
            () = &mut cut => break,
        }
    }
    Err(reports
        .into_iter()
        .map(|report| match report {
            Some(Ok(d)) => RecordResult::Stored(d),
            Some(Err(e)) => RecordResult::Failed(e),
            None => RecordResult::InFlight,
        })
        .collect())
}

/// `headers` with the record's `own` `baggage` headers added after them
/// (after the call's baggage the producer wrote: a reader that joins them,
/// as the consumer does, sees the record's own member where both carry
/// one): as they came, or with `faults`, stripped as a server strips a
/// caller's `baggage` header ([`Injector::strip_headers`](crate::fault::Injector),
/// the gRPC and HTTP clients' strip of what their caller set): joined
/// into one, the scenario's members removed (every other kept), a value
/// that cannot be read whole dropped, the strip recorded on the record's
/// span in `cx`.
fn with_own_baggage(
    mut headers: OwnedHeaders,
    own: &OwnedHeaders,
    faults: Option<&crate::fault::Injector>,
    cx: &Context,
) -> OwnedHeaders {
    let baggage = |key: &str| key.eq_ignore_ascii_case(BAGGAGE.as_str());
    if !own.iter().any(|h| baggage(h.key)) {
        return headers;
    }
    let Some(faults) = faults else {
        for header in own.iter().filter(|h| baggage(h.key)) {
            headers = headers.insert(header);
        }
        return headers;
    };
    let mut map = header_map(own);
    map.retain(|name, _| *name == BAGGAGE);
    if let Some(stripped) = faults.strip_headers(&mut map) {
        stripped.record(&cx.span());
    }
    for value in map.get_all(BAGGAGE) {
        headers = headers.insert(Header {
            key: BAGGAGE.as_str(),
            value: Some(value.as_bytes()),
        });
    }
    headers
}

/// A record's own headers without those the producer writes (`baggage`
/// and the propagator's, compared as header names are, without case): its
/// own `baggage` is added back after the producer's ([`with_own_baggage`]).
fn own_headers(headers: Option<&OwnedHeaders>, fields: &[HeaderName]) -> OwnedHeaders {
    let Some(headers) = headers else {
        return OwnedHeaders::new_with_capacity(fields.len());
    };
    let written =
        |key: &str| HeaderName::from_bytes(key.as_bytes()).is_ok_and(|name| fields.contains(&name));
    let mut out = OwnedHeaders::new_with_capacity(headers.count() + fields.len());
    for header in headers.iter().filter(|h| !written(h.key)) {
        out = out.insert(header);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The producer's headers replace a record's own; the rest are kept.
    #[test]
    fn a_records_own_propagation_headers_are_replaced() {
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "Baggage",
                value: Some("acme.fault=x"),
            })
            .insert(Header {
                key: "schema",
                value: Some("v2"),
            })
            .insert(Header {
                key: "traceparent",
                value: Some("00-x"),
            });
        let fields = [BAGGAGE, HeaderName::from_static("traceparent")];
        let kept = own_headers(Some(&headers), &fields);
        let keys: Vec<_> = kept.iter().map(|h| h.key).collect();
        assert_eq!(keys, ["schema"]);
    }
}
