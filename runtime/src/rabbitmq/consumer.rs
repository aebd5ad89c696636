//! `Consumer`: consumes a queue and hands each delivery to the user's
//! processor, in the delivery's context.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use amqprs::callbacks::DefaultChannelCallback;
use amqprs::channel::{
    BasicAckArguments, BasicCancelArguments, BasicConsumeArguments, BasicNackArguments,
    BasicQosArguments, Channel, ConsumerMessage,
};
use amqprs::connection::Connection;
use amqprs::{BasicProperties, FieldTable};
use opentelemetry::global::BoxedTracer;
use opentelemetry::logs::Severity;
use opentelemetry::metrics::Histogram;
use opentelemetry::trace::{
    FutureExt as _, Span as _, SpanKind, Status, TraceContextExt as _, Tracer as _,
};
use opentelemetry::{Context, InstrumentationScope, KeyValue};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinError, JoinHandle, JoinSet};
use tokio::time::Instant;

use super::settings::{ConsumerSettings, TrustScenario};
use super::uri::AmqpUri;
use crate::app::BoxError;
use crate::fault::strip::{BAGGAGE, Gate, Stripped, Unreadable};
use crate::grpc::server::SettingsError;
use crate::retry::Exponential;
use crate::telemetry::names::{
    ERROR_TYPE, HUMUS_RABBITMQ_CONNECTION, MESSAGING_DESTINATION_NAME,
    MESSAGING_DESTINATION_SUBSCRIPTION_NAME, MESSAGING_MESSAGE_ID, MESSAGING_OPERATION_NAME,
    MESSAGING_OPERATION_TYPE, MESSAGING_PROCESS_DURATION, MESSAGING_RABBITMQ_DELIVERY_TAG,
    MESSAGING_RABBITMQ_ROUTING_KEY, MESSAGING_SYSTEM, MESSAGING_SYSTEM_RABBITMQ, OTHER_ERROR_TYPE,
    RABBITMQ_SCOPE, SERVER_ADDRESS, SERVER_PORT,
};
use crate::telemetry::{BoxedLogger, to_header_map, write_back};
use crate::{Setup, grpc};

/// One message the broker delivered to a [`Consumer`]: its body, its
/// properties (headers among them) and where it came from.
///
/// The trust function sees it as it came; the processor sees it with the
/// failure scenario stripped from its `baggage` header when the
/// publisher is not trusted.
#[derive(Clone)]
pub struct Delivery {
    queue: Arc<str>,
    exchange: String,
    routing_key: String,
    delivery_tag: u64,
    redelivered: bool,
    properties: BasicProperties,
    body: Vec<u8>,
}

crate::debug::debug_fields!(Delivery {
    queue,
    exchange,
    routing_key,
    delivery_tag,
    redelivered,
    properties,
    body_len: |d| d.body.len(),
});

impl Delivery {
    /// The queue it was consumed from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The exchange it was published to (`""`: the default exchange).
    pub fn exchange(&self) -> &str {
        &self.exchange
    }

    /// The routing key it was published with.
    pub fn routing_key(&self) -> &str {
        &self.routing_key
    }

    /// Its delivery tag on the consumer's channel.
    pub fn delivery_tag(&self) -> u64 {
        self.delivery_tag
    }

    /// Whether the broker delivered it before (to this consumer or
    /// another) without its being acked.
    pub fn redelivered(&self) -> bool {
        self.redelivered
    }

    /// Its properties: content type, message id, headers, …
    pub fn properties(&self) -> &BasicProperties {
        &self.properties
    }

    /// Its headers, if it has any.
    pub fn headers(&self) -> Option<&FieldTable> {
        self.properties.headers()
    }

    /// Its `user_id` property: the user its publisher's connection logged
    /// in as, which RabbitMQ checks (it refuses a message whose `user_id`
    /// is another), so a trust function may rely on it.
    pub fn user_id(&self) -> Option<&str> {
        self.properties.user_id().map(String::as_str)
    }

    /// Its body.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// Its body, owned.
    pub fn into_body(self) -> Vec<u8> {
        self.body
    }
}

/// The future a processor returns.
type ProcessFuture = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;

/// The user's processor, boxed.
type Process = Arc<dyn Fn(Delivery) -> ProcessFuture + Send + Sync>;

/// A consumer of one RabbitMQ queue: it hands each delivery to the
/// processor, in the delivery's context, acks it once the processor
/// succeeded, and hands it back to the broker when the processor failed.
/// See the [module](super) docs.
///
/// A cheap handle: clones share the consumer. Dropping every handle does
/// not stop it; [`stop`](Consumer::stop) or the [`Setup`]'s on-stop hooks
/// do.
#[derive(Clone)]
pub struct Consumer {
    inner: Arc<Handle>,
}

struct Handle {
    queue: Arc<str>,
    stop: watch::Sender<bool>,
    consuming: watch::Receiver<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

crate::debug::debug_fields!(Consumer {
    queue: |c| &c.inner.queue,
    stopped: |c| *c.inner.stop.borrow(),
});

impl Consumer {
    /// Checks `settings`, and starts consuming their queue in a task of
    /// its own: it connects (again after the connection backoff whenever
    /// the connection fails or is lost), and runs `process` on each
    /// delivery, up to [`prefetch`](ConsumerSettings::prefetch) at once.
    /// It registers its [`stop`](Consumer::stop) as an on-stop hook of
    /// `setup`, so an [`App`](crate::App) stops it after its servers and
    /// before the clients built before it.
    ///
    /// `process` returns `Ok` for a delivery to be acked, an error for it
    /// to be delivered again (after the backoff; see the [module](super)
    /// docs).
    ///
    /// # Errors
    ///
    /// [`SettingsError`] naming every bad field.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn start<P, Fut>(
        setup: &Setup,
        settings: ConsumerSettings,
        process: P,
    ) -> Result<Consumer, SettingsError>
    where
        P: Fn(Delivery) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        let uri = settings.checked()?;
        let process: Process = Arc::new(move |delivery| Box::pin(process(delivery)));
        let shared = Arc::new(Shared::new(setup, settings, uri, process));
        let (stop, stopping) = watch::channel(false);
        let (consuming_tx, consuming) = watch::channel(false);
        let task = tokio::spawn(run(Arc::clone(&shared), stopping, consuming_tx));
        let consumer = Consumer {
            inner: Arc::new(Handle {
                queue: Arc::clone(&shared.queue),
                stop,
                consuming,
                task: Mutex::new(Some(task)),
            }),
        };
        let hook = consumer.clone();
        setup.on_stop_named(
            format!("stopping the rabbitmq consumer of {}", shared.queue),
            move || async move { hook.stop().await },
        );
        Ok(consumer)
    }

    /// Waits until the consumer consumes its queue (its first
    /// `basic.consume` was answered): a readiness check, or a test's wait.
    /// Returns at once if it is stopped.
    pub async fn consuming(&self) {
        let mut consuming = self.inner.consuming.clone();
        let mut stopped = self.inner.stop.subscribe();
        tokio::select! {
            _ = consuming.wait_for(|c| *c) => {}
            _ = stopped.wait_for(|s| *s) => {}
        }
    }

    /// Stops the consumer: cancels its consumption, so no new delivery
    /// comes; hands back at once what was delivered but not yet started;
    /// lets the deliveries being processed finish within
    /// [`shutdown_grace`](ConsumerSettings::shutdown_grace), acking each
    /// that succeeds; drops those still running at its end (the broker
    /// delivers them again); and closes the channel and the connection.
    /// A second call returns at once.
    ///
    /// # Panics
    ///
    /// With the panic of the trust function or of a processor, which
    /// ended the consumer.
    pub async fn stop(&self) {
        self.inner.stop.send_replace(true);
        let task = self
            .inner
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            resume_panic(task.await);
        }
    }
}

/// Unwinds with a task's panic; a cancelled task is none.
fn resume_panic(joined: Result<(), JoinError>) {
    if let Err(e) = joined
        && e.is_panic()
    {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// What every delivery's processing shares.
struct Shared {
    uri: AmqpUri,
    queue: Arc<str>,
    settings: ConsumerSettings,
    trust: Option<TrustScenario>,
    /// The strip every server entry point runs, and the propagator that
    /// reads a delivery's context.
    gate: Gate,
    tracer: Option<BoxedTracer>,
    /// Whether `tracer` is the no-op provider's (see the gRPC server's
    /// span): no span is started for a delivery with no valid parent.
    noop_tracer: bool,
    duration: Option<Histogram<f64>>,
    /// Where a failed or lost connection is reported.
    logger: BoxedLogger,
    process: Process,
    /// The wait before a failed delivery is handed back.
    backoff: Exponential,
    /// The processor's failures in a row, across deliveries.
    failures: AtomicU32,
}

impl Shared {
    fn new(setup: &Setup, settings: ConsumerSettings, uri: AmqpUri, process: Process) -> Shared {
        let telemetry = setup.telemetry();
        let inbound = telemetry.inbound(
            RABBITMQ_SCOPE,
            MESSAGING_PROCESS_DURATION,
            "Duration of processing operation.",
        );
        Shared {
            queue: Arc::from(settings.queue.as_str()),
            trust: settings.trust_scenario.clone(),
            gate: Gate::new(setup.faults().clone(), telemetry.shared_propagator()),
            tracer: inbound.tracer,
            noop_tracer: inbound.noop_tracer,
            duration: inbound.duration,
            logger: telemetry.logger(
                InstrumentationScope::builder(RABBITMQ_SCOPE)
                    .with_version(env!("CARGO_PKG_VERSION"))
                    .build(),
            ),
            process,
            backoff: Exponential::new(settings.backoff_base, settings.backoff_max),
            failures: AtomicU32::new(0),
            uri,
            settings,
        }
    }

    /// Opens a connection and a channel, sets the prefetch and starts
    /// consuming, within the connect timeout.
    async fn connect(&self) -> Result<Session, BoxError> {
        let open = async {
            let name = format!("humus consumer of {}", self.queue);
            let connection = self.uri.open(&name, self.settings.tls.as_ref()).await?;
            let channel = connection.open_channel(None).await?;
            channel.register_callback(DefaultChannelCallback).await?;
            channel
                .basic_qos(BasicQosArguments::new(0, self.settings.prefetch, false))
                .await?;
            let (tag, deliveries) = channel
                .basic_consume_rx(
                    BasicConsumeArguments::new(&self.queue, "")
                        .manual_ack(true)
                        .finish(),
                )
                .await?;
            Ok::<_, BoxError>(Session {
                connection,
                channel,
                tag,
                deliveries,
            })
        };
        match tokio::time::timeout(self.settings.connect_timeout, open).await {
            Ok(session) => session,
            Err(_) => Err(format!(
                "rabbitmq: connecting to {} took over {:?}",
                self.uri.addr(),
                self.settings.connect_timeout
            )
            .into()),
        }
    }

    /// A delivery as the processor is to see it, and the context it runs
    /// in: the publisher's, read from its headers, with the delivery's
    /// span, and the scenario stripped unless trusted.
    fn prepare(&self, message: ConsumerMessage) -> Option<(Delivery, Context)> {
        let deliver = message.deliver?;
        let mut delivery = Delivery {
            queue: Arc::clone(&self.queue),
            exchange: deliver.exchange().clone(),
            routing_key: deliver.routing_key().clone(),
            delivery_tag: deliver.delivery_tag(),
            redelivered: deliver.redelivered(),
            properties: message.basic_properties.unwrap_or_default(),
            body: message.content.unwrap_or_default(),
        };
        let (cx, stripped) = self.vet(&mut delivery);
        let cx = self.start_span(&delivery, cx);
        if let Some(stripped) = stripped {
            stripped.record(&cx.span());
        }
        Some((delivery, cx))
    }

    /// The publisher's context, read from the delivery's headers, with the
    /// scenario stripped (from the context and the headers) unless the
    /// publisher is trusted, by the strip every server entry point runs
    /// ([`Gate::vet`]): it reads the `baggage` header itself, whatever the
    /// propagator, and drops one it cannot read whole (as a `baggage`
    /// header that is no long string). What it stripped, to record on the
    /// delivery's span.
    ///
    /// The trust function runs here, uncaught: its panic unwinds out of
    /// the consumer's task.
    fn vet(&self, delivery: &mut Delivery) -> (Context, Option<Stripped>) {
        let Some(table) = delivery.headers() else {
            return (Context::new(), None);
        };
        let (headers, unreadable) = to_header_map(table);
        let (mut parts, ()) = http::Request::new(()).into_parts();
        parts.headers = headers;
        let reads = self.gate.injector.reads_scenarios();
        let seen: &Delivery = delivery;
        let trust = self.trust.as_ref().map(|trust| {
            move |_: &mut http::request::Parts| Ok::<_, std::convert::Infallible>((trust.0)(seen))
        });
        let vetted = match self.gate.vet(&mut parts, trust) {
            Ok(vetted) => vetted,
            Err(panicked) => match panicked.payload {},
        };
        let mut stripped = vetted.stripped;
        if reads && unreadable {
            stripped.get_or_insert(Stripped::Unreadable(Unreadable::NotText));
        }
        if stripped.is_some() {
            let mut table = table.clone();
            let propagator = &self.gate.propagator;
            write_back(
                &mut table,
                &parts.headers,
                propagator.fields().chain([BAGGAGE.as_str()]),
            );
            delivery.properties.with_headers(table);
        }
        (vetted.cx, stripped)
    }

    /// `cx` with the delivery's CONSUMER span, a child of the span in
    /// `cx` (the publisher's).
    fn start_span(&self, delivery: &Delivery, cx: Context) -> Context {
        let Some(tracer) = self
            .tracer
            .as_ref()
            .filter(|_| !self.noop_tracer || cx.span().span_context().is_valid())
        else {
            return cx;
        };
        let mut attributes = vec![
            KeyValue::new(MESSAGING_SYSTEM, MESSAGING_SYSTEM_RABBITMQ),
            KeyValue::new(MESSAGING_OPERATION_NAME, "process"),
            KeyValue::new(MESSAGING_OPERATION_TYPE, "process"),
            KeyValue::new(MESSAGING_DESTINATION_NAME, delivery.exchange.clone()),
            KeyValue::new(
                MESSAGING_DESTINATION_SUBSCRIPTION_NAME,
                self.queue.to_string(),
            ),
            KeyValue::new(
                MESSAGING_RABBITMQ_DELIVERY_TAG,
                i64::try_from(delivery.delivery_tag).unwrap_or(i64::MAX),
            ),
            KeyValue::new(SERVER_ADDRESS, self.uri.host.clone()),
            KeyValue::new(SERVER_PORT, i64::from(self.uri.port)),
        ];
        if !delivery.routing_key.is_empty() {
            attributes.push(KeyValue::new(
                MESSAGING_RABBITMQ_ROUTING_KEY,
                delivery.routing_key.clone(),
            ));
        }
        if let Some(id) = delivery.properties.message_id() {
            attributes.push(KeyValue::new(MESSAGING_MESSAGE_ID, id.clone()));
        }
        let span = tracer
            .span_builder(format!("process {}", self.queue))
            .with_kind(SpanKind::Consumer)
            .with_attributes(attributes)
            .start_with_context(tracer, &cx);
        if span.span_context().is_valid() {
            cx.with_span(span)
        } else {
            cx
        }
    }

    /// Runs the processor on `delivery` in `cx`, records its span and
    /// duration, then acks it (success) or hands it back (failure, after
    /// the backoff, cut short by a stop).
    async fn process(
        self: Arc<Self>,
        channel: Channel,
        delivery: Delivery,
        cx: Context,
        mut stopping: watch::Receiver<bool>,
    ) {
        let tag = delivery.delivery_tag;
        let exchange = delivery.exchange.clone();
        let started = Instant::now();
        let result = (self.process)(delivery).with_context(cx.clone()).await;
        self.record(&cx, &exchange, started.elapsed(), result.as_ref().err());
        match result {
            Ok(()) => {
                self.failures.store(0, Ordering::Relaxed);
                // A failed ack (the channel lost) leaves it to the broker,
                // which delivers it again.
                let _ = channel.basic_ack(BasicAckArguments::new(tag, false)).await;
            }
            Err(_) => {
                let failures = self.failures.fetch_add(1, Ordering::Relaxed);
                let wait = self.backoff.backoff(failures.saturating_add(1));
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    _ = stopping.wait_for(|s| *s) => {}
                }
                let _ = channel
                    .basic_nack(BasicNackArguments::new(tag, false, true))
                    .await;
            }
        }
        cx.span().end();
    }

    fn record(&self, cx: &Context, exchange: &str, took: Duration, error: Option<&BoxError>) {
        if let Some(e) = error {
            let span = cx.span();
            span.set_attribute(KeyValue::new(ERROR_TYPE, OTHER_ERROR_TYPE));
            span.set_status(Status::error(e.to_string()));
        }
        if let Some(duration) = &self.duration {
            let mut attributes = vec![
                KeyValue::new(MESSAGING_SYSTEM, MESSAGING_SYSTEM_RABBITMQ),
                KeyValue::new(MESSAGING_OPERATION_NAME, "process"),
                KeyValue::new(MESSAGING_DESTINATION_NAME, exchange.to_owned()),
                KeyValue::new(
                    MESSAGING_DESTINATION_SUBSCRIPTION_NAME,
                    self.queue.to_string(),
                ),
                KeyValue::new(SERVER_ADDRESS, self.uri.host.clone()),
                KeyValue::new(SERVER_PORT, i64::from(self.uri.port)),
            ];
            if error.is_some() {
                attributes.push(KeyValue::new(ERROR_TYPE, OTHER_ERROR_TYPE));
            }
            duration.record(took.as_secs_f64(), &attributes);
        }
    }
}

/// One connection's consumption.
struct Session {
    connection: Connection,
    channel: Channel,
    tag: String,
    deliveries: mpsc::UnboundedReceiver<ConsumerMessage>,
}

/// How a session ended.
enum Ended {
    Stopped,
    Lost,
}

/// The consumer's task: connects, consumes until the connection is lost
/// (then connects again after the connection backoff) or the consumer is
/// stopped.
async fn run(
    shared: Arc<Shared>,
    mut stopping: watch::Receiver<bool>,
    consuming: watch::Sender<bool>,
) {
    let mut backoff = None;
    loop {
        let started = Instant::now();
        let session = tokio::select! {
            session = shared.connect() => session,
            _ = stopping.wait_for(|s| *s) => return,
        };
        let failure = match session {
            Ok(session) => {
                backoff = None;
                consuming.send_replace(true);
                if let Ended::Stopped = consume(&shared, session, &mut stopping).await {
                    return;
                }
                "lost its connection".to_owned()
            }
            Err(e) => format!("could not connect: {e}"),
        };
        let (wait, next) =
            grpc::client::backoff_after(backoff, shared.settings.connect_backoff_max);
        backoff = Some(next);
        let at = (started + wait).saturating_duration_since(Instant::now());
        shared.logger.event(
            RABBITMQ_SCOPE,
            HUMUS_RABBITMQ_CONNECTION,
            Severity::Warn,
            || {
                format!(
                    "rabbitmq consumer of {} on {}: {failure}; connecting again in {}",
                    shared.queue,
                    shared.uri.addr(),
                    humantime_serde::re::humantime::format_duration(round_tenths(at))
                )
            },
        );
        tokio::select! {
            () = tokio::time::sleep_until(started + wait) => {}
            _ = stopping.wait_for(|s| *s) => return,
        }
    }
}

/// Runs one session: each delivery processed in a task of its own, until
/// the channel ends (lost) or the consumer is stopped (then the stop's
/// steps, [`Consumer::stop`]).
async fn consume(
    shared: &Arc<Shared>,
    session: Session,
    stopping: &mut watch::Receiver<bool>,
) -> Ended {
    let Session {
        connection,
        channel,
        tag,
        mut deliveries,
    } = session;
    let mut tasks = JoinSet::new();
    let for_tasks = stopping.clone();
    let ended = loop {
        tokio::select! {
            biased;
            _ = stopping.wait_for(|s| *s) => break Ended::Stopped,
            Some(done) = tasks.join_next() => resume_panic(done),
            message = deliveries.recv() => match message {
                Some(message) => {
                    if let Some((delivery, cx)) = shared.prepare(message) {
                        tasks.spawn(Arc::clone(shared).process(
                            channel.clone(),
                            delivery,
                            cx,
                            for_tasks.clone(),
                        ));
                    }
                }
                None => break Ended::Lost,
            },
        }
    };
    if let Ended::Lost = ended {
        // Nothing can be acked on a lost channel: the broker delivers
        // what was in flight again.
        tasks.shutdown().await;
        return ended;
    }
    let grace_ends = Instant::now() + shared.settings.shutdown_grace;
    // No new delivery; those received but not started go back at once.
    let _ = tokio::time::timeout_at(
        grace_ends,
        channel.basic_cancel(BasicCancelArguments::new(&tag)),
    )
    .await;
    while let Ok(message) = deliveries.try_recv() {
        if let Some(deliver) = message.deliver {
            let _ = channel
                .basic_nack(BasicNackArguments::new(deliver.delivery_tag(), false, true))
                .await;
        }
    }
    // Those in flight finish within the grace, each acked as it succeeds.
    loop {
        tokio::select! {
            done = tasks.join_next() => match done {
                Some(done) => resume_panic(done),
                None => break,
            },
            () = tokio::time::sleep_until(grace_ends) => {
                tasks.shutdown().await;
                break;
            }
        }
    }
    let _ = channel.close().await;
    let _ = connection.close().await;
    ended
}

/// `d` to the nearest tenth of a second, for a message.
fn round_tenths(d: Duration) -> Duration {
    let tenths = (d.as_millis() + 50) / 100;
    Duration::from_millis(u64::try_from(tenths * 100).unwrap_or(u64::MAX))
}
