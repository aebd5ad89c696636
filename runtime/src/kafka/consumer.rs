//! [`Consumer`]: a consumer group's records, each handed to the user's
//! processor in its producer's context.

use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use opentelemetry::context::FutureExt as _;
use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, Severity};
use opentelemetry::metrics::Histogram;
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};
use rdkafka::ClientConfig;
use rdkafka::Message as _;
use rdkafka::consumer::{CommitMode, Consumer as _, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders, OwnedMessage};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::headers::{header_map, replace};
use super::producer::{NewError, Producer, Record};
use super::settings::{
    ConsumerSettings, PRODUCER_OWNED_PROPERTIES, ProducerSettings, SettingsError, TrustScenario,
};
use crate::Setup;
use crate::app::BoxError;
use crate::fault::strip::{BAGGAGE, Gate, Stripped};
use crate::retry::Exponential;
use crate::telemetry::names::{
    ERROR_TYPE, EXCEPTION_EVENT, EXCEPTION_MESSAGE, HUMUS_KAFKA_ATTEMPTS,
    HUMUS_KAFKA_DEAD_LETTERED, HUMUS_KAFKA_RECORD_HELD, KAFKA_SCOPE, MESSAGING_CONSUMER_GROUP_NAME,
    MESSAGING_DESTINATION_NAME, MESSAGING_DESTINATION_PARTITION_ID, MESSAGING_KAFKA_OFFSET,
    MESSAGING_OPERATION_NAME, MESSAGING_OPERATION_TYPE, MESSAGING_PROCESS_DURATION,
    MESSAGING_SYSTEM, MESSAGING_SYSTEM_KAFKA, OTHER_ERROR_TYPE,
};
use crate::telemetry::{BoxedLogger, DURATION_BOUNDARIES, scope};

/// The processor of a consumer: one record in, done or an error.
type Processor =
    Arc<dyn Fn(OwnedMessage) -> BoxFuture<'static, Result<(), BoxError>> + Send + Sync>;

/// The `error.type` of a record whose processor failed: its error's type
/// is the user's, unknown to humus (OpenTelemetry's `_OTHER`).
const PROCESSOR_ERROR_TYPE: &str = OTHER_ERROR_TYPE;

/// The `error.type` of a record the consumer's stop dropped before it was
/// processed (its offset not committed).
pub const STOPPED_ERROR_TYPE: &str = "humus::kafka::Stopped";

/// How long the consumer waits after librdkafka reported an error (a
/// broker it cannot reach, a topic it cannot read) before it fetches
/// again; librdkafka reconnects by itself meanwhile.
const FETCH_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// How long the stop serves the consumer's events after it unsubscribed,
/// so that the revoke of its partitions is answered and it leaves the
/// group at once.
const LEAVE_SERVING: Duration = Duration::from_millis(200);

/// Why [`Consumer::start`] did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The settings are bad: every bad field is named.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// librdkafka refused to build its client (a combination of
    /// properties it checks only then: the settings' check has run each
    /// property through librdkafka, [`check_librdkafka`](super::check_librdkafka)),
    /// or the subscription.
    #[error("kafka consumer of group {group}: {source}")]
    Kafka {
        /// The consumer group.
        group: String,
        /// librdkafka's error.
        #[source]
        source: KafkaError,
    },
}

/// A consumer group's member: it subscribes to the settings' topics and
/// hands each record to the processor, one record at a time, in the
/// context of the record's producer; see the [module](super) docs for what
/// it records and how it commits.
///
/// Built by [`Consumer::start`], in the App's init; it stops on the App's
/// stop (a hook of the [`Setup`]'s, [`Setup::on_stop`]), or on
/// [`Consumer::stop`]. Clones are handles of one consumer.
///
/// Nothing of the user's code is recovered: a panic of the processor or of
/// the trust function ends the consumer (the record's offset is not
/// committed), and comes out of its [`stop`](Consumer::stop), so out of the
/// App's.
#[derive(Clone)]
pub struct Consumer {
    group: Arc<str>,
    stop: watch::Sender<bool>,
    task: Arc<Mutex<Option<JoinHandle<()>>>>,
}

crate::debug::debug_fields!(Consumer {
    group,
    stopping: |c| *c.stop.borrow()
});

impl Consumer {
    /// Checks `settings`, joins the group, subscribes to its topics and
    /// starts handing their records to `processor`, each in its own task's
    /// turn: `processor` is given the record (its key, value, headers,
    /// topic, partition and offset) and runs with the record's context
    /// current. `Ok` commits the record's offset; `Err` runs it again, as
    /// the settings say.
    ///
    /// The consumer registers its stop with `setup`'s on-stop hooks, so
    /// the App stops it: it stops fetching, lets the record in flight
    /// finish within [`shutdown_grace`](ConsumerSettings::shutdown_grace),
    /// commits the offsets of the records processed, and leaves the group.
    ///
    /// # Errors
    ///
    /// [`StartError::Settings`] naming every bad field;
    /// [`StartError::Kafka`] when librdkafka refuses its configuration.
    /// A cluster it cannot reach is no error: librdkafka keeps trying.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (it spawns the consumer's task).
    pub fn start<F, Fut>(
        setup: &Setup,
        settings: ConsumerSettings,
        processor: F,
    ) -> Result<Consumer, StartError>
    where
        F: Fn(OwnedMessage) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        settings.check()?;
        let group: Arc<str> = settings.group.as_str().into();
        let kafka = |source| StartError::Kafka {
            group: settings.group.clone(),
            source,
        };
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", settings.brokers.join(","))
            .set("group.id", &settings.group)
            // A new group starts at each partition's first record: none is
            // skipped.
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "true")
            .set("enable.auto.offset.store", "false")
            .set(
                "auto.commit.interval.ms",
                settings.commit_interval.as_millis().to_string(),
            );
        for (key, value) in &settings.librdkafka {
            config.set(key, value);
        }
        let consumer: StreamConsumer = config.create().map_err(kafka)?;
        let topics: Vec<&str> = settings.topics.iter().map(String::as_str).collect();
        consumer.subscribe(&topics).map_err(kafka)?;
        // The dead-letter topic is produced to with humus's own producer
        // (its breaker, failure injection and telemetry), in the failing
        // record's context. Built before the consumer's stop is
        // registered: the consumer stops first, then the producer flushes.
        let dead_letter = match &settings.dead_letter_topic {
            Some(topic) => {
                let producer =
                    Producer::new(setup, dead_letter_settings(&settings)).map_err(|e| match e {
                        NewError::Settings(e) => StartError::Settings(e),
                        NewError::Kafka { source, .. } => kafka(source),
                    })?;
                Some((topic.clone(), producer))
            }
            None => None,
        };
        let telemetry = setup.telemetry();
        let mut fields = vec![BAGGAGE];
        for field in telemetry.propagator().fields() {
            if let Ok(name) = http::HeaderName::try_from(field)
                && !fields.contains(&name)
            {
                fields.push(name);
            }
        }
        let shared = Shared {
            processor: Arc::new(move |m| processor(m).boxed()),
            gate: Gate::new(setup.faults().clone(), telemetry.shared_propagator()),
            fields,
            trust: settings.trust_scenario.clone(),
            tracer: telemetry.tracer(scope(KAFKA_SCOPE)),
            logger: telemetry.logger(scope(KAFKA_SCOPE)),
            duration: telemetry
                .meter(scope(KAFKA_SCOPE))
                .f64_histogram(MESSAGING_PROCESS_DURATION)
                .with_unit("s")
                .with_description("Duration of processing operation.")
                .with_boundaries(DURATION_BOUNDARIES.to_vec())
                .build(),
            backoff: Exponential::new(settings.backoff_base, settings.backoff_max),
            max_attempts: settings.max_attempts,
            grace: settings.shutdown_grace,
            group: Arc::clone(&group),
            dead_letter,
        };
        let (stop, stopping) = watch::channel(false);
        let task = tokio::spawn(run(shared, consumer, stopping));
        let handle = Consumer {
            group,
            stop,
            task: Arc::new(Mutex::new(Some(task))),
        };
        let hook = handle.clone();
        setup.on_stop(move || async move { hook.stop().await });
        Ok(handle)
    }

    /// The consumer group.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// Stops the consumer, as the App's stop does: no record is fetched
    /// any more, the record in flight may finish within
    /// [`shutdown_grace`](ConsumerSettings::shutdown_grace) (then it is
    /// dropped, its offset not committed), the offsets of the records
    /// processed are committed, and the consumer leaves its group, so the
    /// group's other members take its partitions at once. Returns once all
    /// of that is done; a second call returns at once.
    ///
    /// # Panics
    ///
    /// When the processor or the trust function panicked: that panic goes
    /// on from here.
    pub async fn stop(&self) {
        self.stop.send_replace(true);
        let task = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task
            && let Err(e) = task.await
            && e.is_panic()
        {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

/// What the consumer's task holds.
struct Shared {
    processor: Processor,
    gate: Gate,
    /// The headers the strip may rewrite: `baggage` and the propagator's.
    fields: Vec<http::HeaderName>,
    trust: Option<TrustScenario>,
    tracer: opentelemetry::global::BoxedTracer,
    logger: BoxedLogger,
    duration: Histogram<f64>,
    backoff: Exponential,
    max_attempts: u32,
    grace: Duration,
    group: Arc<str>,
    dead_letter: Option<(String, Producer)>,
}

/// How a record's handling ended.
enum Ended {
    /// The processor succeeded: commit its offset.
    Processed,
    /// It failed for good and went to the dead-letter topic: commit its
    /// offset.
    DeadLettered { attempts: u32, error: String },
    /// The consumer stopped first: its offset is not committed.
    Stopped,
}

/// The consumer's task: fetch, process, store the offset, until the stop;
/// then commit and leave the group.
async fn run(shared: Shared, consumer: StreamConsumer, mut stopping: watch::Receiver<bool>) {
    loop {
        let received = tokio::select! {
            biased;
            _ = stopping.wait_for(|s| *s) => break,
            received = consumer.recv() => received.map(|m| m.detach()),
        };
        let message = match received {
            Ok(message) => message,
            Err(_) => {
                // librdkafka reports a broker it cannot reach (and keeps
                // trying): wait a little, and fetch again.
                tokio::select! {
                    _ = stopping.wait_for(|s| *s) => break,
                    () = tokio::time::sleep(FETCH_ERROR_PAUSE) => continue,
                }
            }
        };
        let (topic, partition, offset) = (
            message.topic().to_owned(),
            message.partition(),
            message.offset(),
        );
        match shared.handle(message, &stopping).await {
            Ended::Processed | Ended::DeadLettered { .. } => {
                // Stored, the offset is committed with the next commit
                // (librdkafka's, every commit_interval, or the stop's).
                let _ = consumer.store_offset(&topic, partition, offset);
            }
            Ended::Stopped => break,
        }
    }
    // The stop: commit what was processed (blocking on librdkafka), then
    // leave the group.
    let consumer = tokio::task::spawn_blocking(move || {
        let _ = consumer.commit_consumer_state(CommitMode::Sync);
        consumer
    })
    .await
    .expect("the commit does not panic");
    leave(consumer).await;
}

/// Leaves the group: unsubscribes, answers the revoke of the assignment
/// that follows (which `recv` serves), then closes the consumer.
async fn leave(consumer: StreamConsumer) {
    consumer.unsubscribe();
    let serving = async {
        loop {
            // The records fetched meanwhile are not processed: their offsets
            // were not stored.
            let _ = consumer.recv().await;
        }
    };
    let _ = tokio::time::timeout(LEAVE_SERVING, serving).await;
    let _ = tokio::task::spawn_blocking(move || drop(consumer)).await;
}

impl Shared {
    /// One record: its context (the scenario stripped unless trusted), its
    /// span, the processor with retries, its duration.
    async fn handle(&self, message: OwnedMessage, stopping: &watch::Receiver<bool>) -> Ended {
        let started = Instant::now();
        let (message, parent, stripped) = self.vet(message);
        let message = &message;
        let topic = message.topic();
        let partition = message.partition().to_string();
        let common = [
            KeyValue::new(MESSAGING_SYSTEM, MESSAGING_SYSTEM_KAFKA),
            KeyValue::new(MESSAGING_OPERATION_NAME, "process"),
            KeyValue::new(MESSAGING_DESTINATION_NAME, topic.to_owned()),
            KeyValue::new(MESSAGING_DESTINATION_PARTITION_ID, partition),
            KeyValue::new(MESSAGING_CONSUMER_GROUP_NAME, self.group.to_string()),
        ];
        let mut attributes = common.to_vec();
        attributes.push(KeyValue::new(MESSAGING_OPERATION_TYPE, "process"));
        attributes.push(KeyValue::new(MESSAGING_KAFKA_OFFSET, message.offset()));
        let span = self
            .tracer
            .span_builder(format!("process {topic}"))
            .with_kind(SpanKind::Consumer)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        // A no-op tracer's span has no context of its own: the processor's
        // calls are then children of the producer's span, as under it.
        let cx = if span.span_context().is_valid() {
            parent.with_span(span)
        } else {
            parent
        };
        if let Some(stripped) = stripped {
            stripped.record(&cx.span());
        }
        let mut stop = stopping.clone();
        let grace = self.grace;
        let deadline = async move {
            let _ = stop.wait_for(|s| *s).await;
            tokio::time::sleep(grace).await;
        };
        let ended = tokio::select! {
            ended = self.attempts(message, &cx, stopping.clone()) => ended,
            () = deadline => Ended::Stopped,
        };
        let span = cx.span();
        let mut points = common.to_vec();
        match &ended {
            Ended::Processed => {}
            Ended::DeadLettered { attempts, error } => {
                span.set_attribute(KeyValue::new(ERROR_TYPE, PROCESSOR_ERROR_TYPE));
                span.set_status(Status::error(format!(
                    "failed {attempts} times, and went to the dead-letter topic: {error}"
                )));
                points.push(KeyValue::new(ERROR_TYPE, PROCESSOR_ERROR_TYPE));
            }
            Ended::Stopped => {
                span.set_attribute(KeyValue::new(ERROR_TYPE, STOPPED_ERROR_TYPE));
                span.set_status(Status::error(
                    "the consumer stopped before the record was processed; its offset is not committed",
                ));
                points.push(KeyValue::new(ERROR_TYPE, STOPPED_ERROR_TYPE));
            }
        }
        self.duration
            .record(started.elapsed().as_secs_f64(), &points);
        span.end();
        ended
    }

    /// The record as its processor is to see it, the context it runs in,
    /// and what was stripped of its scenario: the servers' strip
    /// ([`Gate`]) over the record's text headers, asking the trust function
    /// (whose panic goes on). A stripped record's propagator and `baggage`
    /// headers are the stripped ones, so a processor that passes them on
    /// passes no scenario on.
    fn vet(&self, message: OwnedMessage) -> (OwnedMessage, Context, Option<Stripped>) {
        let mut parts = http::Request::new(()).into_parts().0;
        if let Some(headers) = message.headers() {
            parts.headers = header_map(headers);
        }
        let trust = |_: &mut http::request::Parts| {
            Ok::<_, Infallible>(self.trust.as_ref().is_some_and(|trust| (trust.0)(&message)))
        };
        let vetted = match self.gate.vet(&mut parts, Some(trust)) {
            Ok(vetted) => vetted,
            Err(panicked) => match panicked.payload {},
        };
        let message = match (vetted.stripped, message.headers()) {
            (Some(_), Some(headers)) => {
                let headers = replace(headers, &parts.headers, &self.fields);
                message.replace_headers(Some(headers))
            }
            _ => message,
        };
        (message, vetted.cx, vetted.stripped)
    }

    /// Runs the processor until it succeeds, the record goes to the
    /// dead-letter topic, or the consumer stops.
    async fn attempts(
        &self,
        message: &OwnedMessage,
        cx: &Context,
        mut stopping: watch::Receiver<bool>,
    ) -> Ended {
        let mut held = false;
        let mut attempts = 0u32;
        loop {
            attempts = attempts.saturating_add(1);
            // The processor's own code runs in the record's context, up to
            // its future and in every poll of it.
            let processing = {
                let _current = cx.clone().attach();
                (self.processor)(message.clone())
            };
            let error = match processing.with_context(cx.clone()).await {
                Ok(()) => return Ended::Processed,
                Err(e) => e.to_string(),
            };
            cx.span().add_event(
                EXCEPTION_EVENT,
                vec![
                    KeyValue::new(EXCEPTION_MESSAGE, error.clone()),
                    KeyValue::new(HUMUS_KAFKA_ATTEMPTS, i64::from(attempts)),
                ],
            );
            if attempts >= self.max_attempts {
                if let Some((topic, producer)) = &self.dead_letter {
                    match dead_letter(producer, topic, message, &error, cx).await {
                        Ok(()) => {
                            self.report(cx, message, attempts, &error, Some(topic));
                            return Ended::DeadLettered { attempts, error };
                        }
                        Err(e) => cx.span().add_event(
                            EXCEPTION_EVENT,
                            vec![KeyValue::new(
                                EXCEPTION_MESSAGE,
                                format!("producing to the dead-letter topic {topic}: {e}"),
                            )],
                        ),
                    }
                }
                if !held {
                    held = true;
                    self.report(cx, message, attempts, &error, None);
                }
            }
            if *stopping.borrow() {
                return Ended::Stopped;
            }
            tokio::select! {
                () = tokio::time::sleep(self.backoff.backoff(attempts)) => {}
                _ = stopping.wait_for(|s| *s) => return Ended::Stopped,
            }
        }
    }

    /// The span event and the log record of a record that failed
    /// `max_attempts` times: dead-lettered to `topic`, or held.
    fn report(
        &self,
        cx: &Context,
        message: &OwnedMessage,
        attempts: u32,
        error: &str,
        topic: Option<&String>,
    ) {
        let (event, severity, body) = match topic {
            Some(topic) => (
                HUMUS_KAFKA_DEAD_LETTERED,
                Severity::Warn,
                format!(
                    "kafka record {}/{}@{} failed {attempts} times, and went to the dead-letter topic {topic}: {error}",
                    message.topic(),
                    message.partition(),
                    message.offset()
                ),
            ),
            None => (
                HUMUS_KAFKA_RECORD_HELD,
                Severity::Error,
                format!(
                    "kafka record {}/{}@{} failed {attempts} times and holds its partition (retried until it succeeds; set dead_letter_topic to move such records aside): {error}",
                    message.topic(),
                    message.partition(),
                    message.offset()
                ),
            ),
        };
        let attributes = [
            KeyValue::new(MESSAGING_SYSTEM, MESSAGING_SYSTEM_KAFKA),
            KeyValue::new(MESSAGING_DESTINATION_NAME, message.topic().to_owned()),
            KeyValue::new(
                MESSAGING_DESTINATION_PARTITION_ID,
                message.partition().to_string(),
            ),
            KeyValue::new(MESSAGING_KAFKA_OFFSET, message.offset()),
            KeyValue::new(MESSAGING_CONSUMER_GROUP_NAME, self.group.to_string()),
            KeyValue::new(HUMUS_KAFKA_ATTEMPTS, i64::from(attempts)),
        ];
        cx.span().add_event(event, attributes.to_vec());
        let Some(mut record) = self
            .logger
            .event_record(KAFKA_SCOPE, event, severity, || body)
        else {
            return;
        };
        record.add_attributes(
            attributes
                .into_iter()
                .map(|kv| (kv.key, AnyValue::from(kv.value.to_string()))),
        );
        record.set_trace_of(cx);
        self.logger.emit(record);
    }
}

/// The settings of a consumer's dead-letter producer: its brokers, and
/// its librdkafka properties but those a producer sets itself (its
/// `client.id` becomes the producer's client id).
fn dead_letter_settings(settings: &ConsumerSettings) -> ProducerSettings {
    let mut producer = ProducerSettings {
        brokers: settings.brokers.clone(),
        ..ProducerSettings::default()
    };
    for (key, value) in &settings.librdkafka {
        if key == "client.id" {
            producer.client_id.clone_from(value);
        } else if !PRODUCER_OWNED_PROPERTIES.contains(&key.as_str()) {
            producer.librdkafka.insert(key.clone(), value.clone());
        }
    }
    producer
}

/// Produces `message` to the dead-letter `topic`, in the record's
/// context `cx` (the dead-lettered record's span a child of the record's):
/// its key, value and headers, and where it came from and why it failed.
async fn dead_letter(
    producer: &Producer,
    topic: &str,
    message: &OwnedMessage,
    error: &str,
    cx: &Context,
) -> Result<(), super::Error> {
    let mut headers = message.headers().cloned().unwrap_or_else(OwnedHeaders::new);
    let partition = message.partition().to_string();
    let offset = message.offset().to_string();
    for (key, value) in [
        ("humus.dlq.topic", message.topic()),
        ("humus.dlq.partition", &partition),
        ("humus.dlq.offset", &offset),
        ("humus.dlq.error", error),
    ] {
        headers = headers.insert(Header {
            key,
            value: Some(value),
        });
    }
    let record = Record {
        topic: topic.to_owned(),
        key: message.key().map(<[u8]>::to_vec),
        value: message.payload().map(<[u8]>::to_vec),
        headers: Some(headers),
    };
    producer.produce_in(cx.clone(), [record]).await.map(|_| ())
}
