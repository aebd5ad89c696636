//! The RabbitMQ consumer against a real broker (see `rabbitmq_support`):
//! the publisher's context reaches the processor, an untrusted scenario
//! does not, nothing is lost on a processor's error or a stop; and the
//! settings' checks, which need no broker.

mod http_support;
mod rabbitmq_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use amqprs::BasicProperties;
use amqprs::{FieldTable, FieldValue};
use http_support::{KEY, abort_at, attr, context, events, setup, spans_of_kind};
use humus::app::{ErrorKind, check_rabbitmq_consumer};
use humus::fault;
use humus::rabbitmq::{Consumer, ConsumerSettings, Delivery, TrustScenario};
use humus::telemetry::names::{
    MESSAGING_DESTINATION_SUBSCRIPTION_NAME, MESSAGING_PROCESS_DURATION, MESSAGING_SYSTEM,
    RABBITMQ_SCOPE,
};
use humus::telemetry::{FieldTableExtractor, FieldTableInjector};
use humus::testing::Telemetry;
use opentelemetry::Context;
use opentelemetry::baggage::BaggageExt as _;
use opentelemetry::trace::{
    SpanKind, Status, TraceContextExt as _, Tracer as _, TracerProvider as _,
};
use rabbitmq_support::{Broker, publish};
use tokio::sync::mpsc;

/// What a processor saw of one delivery.
#[derive(Debug)]
struct Seen {
    body: String,
    /// The baggage of the context the processor ran in.
    tenant: Option<String>,
    scenario: bool,
    /// The delivery's `baggage` header.
    header: Option<String>,
    /// Whether the delivery has a `baggage` header, of any type.
    has_baggage: bool,
    redelivered: bool,
    trace_id: opentelemetry::trace::TraceId,
}

fn seen(delivery: &Delivery) -> Seen {
    let cx = Context::current();
    let header = delivery.headers().and_then(|h| {
        opentelemetry::propagation::Extractor::get(&FieldTableExtractor(h), "baggage")
            .map(str::to_owned)
    });
    Seen {
        body: String::from_utf8_lossy(delivery.body()).into_owned(),
        tenant: cx.baggage().get("tenant").map(|v| v.as_str().to_owned()),
        scenario: cx.baggage().get(KEY).is_some(),
        header,
        has_baggage: delivery
            .headers()
            .is_some_and(|h| h.get(&"baggage".try_into().unwrap()).is_some()),
        redelivered: delivery.redelivered(),
        trace_id: cx.span().span_context().trace_id(),
    }
}

/// Headers carrying `cx`'s trace context and baggage, written with the
/// W3C propagator of `telemetry` through humus's carrier.
fn headers_of(telemetry: &Telemetry, cx: &Context) -> FieldTable {
    let mut headers = FieldTable::new();
    telemetry
        .telemetry()
        .propagator()
        .inject_context(cx, &mut FieldTableInjector(&mut headers));
    headers
}

fn consumer_settings(broker: &Broker, queue: &str) -> ConsumerSettings {
    ConsumerSettings {
        uri: broker.uri(),
        queue: queue.into(),
        backoff_base: Duration::from_millis(10),
        backoff_max: Duration::from_millis(50),
        ..ConsumerSettings::default()
    }
}

/// A consumer whose processor sends what it saw to the returned receiver.
fn recording(
    setup: &humus::Setup,
    settings: ConsumerSettings,
) -> (Consumer, mpsc::UnboundedReceiver<Seen>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let consumer = Consumer::start(setup, settings, move |delivery: Delivery| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(seen(&delivery));
            Ok(())
        }
    })
    .unwrap();
    (consumer, rx)
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("a delivery within 30 s")
        .expect("the consumer runs")
}

#[test]
fn bad_settings_each_name_their_field() {
    let valid = ConsumerSettings {
        uri: "amqp://rabbit".into(),
        queue: "orders".into(),
        ..ConsumerSettings::default()
    };
    for (settings, field, says) in [
        (
            ConsumerSettings {
                uri: "amqp:///shop".into(),
                ..valid.clone()
            },
            "uri",
            r#"uri "amqp:///shop" has no host"#,
        ),
        (
            ConsumerSettings {
                uri: "http://rabbit:5672".into(),
                ..valid.clone()
            },
            "uri",
            r#"uri "http://rabbit:5672" has the scheme "http", want amqp://"#,
        ),
        (
            ConsumerSettings {
                connect_timeout: Duration::ZERO,
                ..valid.clone()
            },
            "connect_timeout",
            "connect_timeout is zero, want a duration more than zero",
        ),
    ] {
        let err = settings.check().unwrap_err();
        assert_eq!(err.fields().collect::<Vec<_>>(), [field]);
        let err = check_rabbitmq_consumer(&settings).unwrap_err();
        assert_eq!((err.kind(), err.exit_code()), (ErrorKind::Settings, 78));
        assert!(err.to_string().contains(says), "{err}");
    }
}

#[tokio::test]
async fn untrusted_scenario_is_stripped_and_the_trace_continues() {
    let Some(broker) = Broker::get() else { return };
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, true);
    let (connection, channel) = broker.open(&broker.uri()).await;
    let queue = "untrusted";
    Broker::queue(&channel, queue, FieldTable::new()).await;
    // Published in the context of a span of the publisher's, with a
    // scenario and another baggage member.
    let tracer = telemetry.tracer_provider().tracer("publisher");
    let span = tracer.start_with_context("publish", &context(Some(&abort_at("grpc:*"))));
    let publishing = context(Some(&abort_at("grpc:*"))).with_span(span);
    let published_trace = publishing.span().span_context().trace_id();
    let publish_span = publishing.span().span_context().span_id();
    let properties = BasicProperties::default()
        .with_headers(headers_of(&telemetry, &publishing))
        .with_message_id("m-1")
        .finish();
    publish(&channel, queue, properties, b"one").await;

    let (consumer, mut rx) = recording(&setup, consumer_settings(broker, queue));
    let got = next(&mut rx).await;
    assert_eq!(got.body, "one");
    assert_eq!(
        got.tenant.as_deref(),
        Some("acme"),
        "other members are kept"
    );
    assert!(!got.scenario, "no trust function: the scenario is stripped");
    assert_eq!(
        got.header.as_deref(),
        Some("tenant=acme"),
        "and from the delivery's header"
    );
    assert_eq!(got.trace_id, published_trace, "the trace continues");
    setup.stop().await;
    let _ = consumer;

    let spans = spans_of_kind(&telemetry, SpanKind::Consumer);
    assert_eq!(spans.len(), 1, "{spans:?}");
    let span = &spans[0];
    assert_eq!(span.name, format!("process {queue}"));
    assert_eq!(span.parent_span_id, publish_span);
    assert_eq!(span.span_context.trace_id(), published_trace);
    assert_eq!(attr(span, MESSAGING_SYSTEM).as_deref(), Some("rabbitmq"));
    assert_eq!(
        attr(span, MESSAGING_DESTINATION_SUBSCRIPTION_NAME).as_deref(),
        Some(queue)
    );
    assert_eq!(attr(span, "messaging.message.id").as_deref(), Some("m-1"));
    assert_eq!(events(span, fault::names::STRIP).len(), 1);
    let durations: Vec<_> = telemetry
        .metrics(RABBITMQ_SCOPE)
        .into_iter()
        .filter(|p| p.name == MESSAGING_PROCESS_DURATION)
        .collect();
    assert_eq!(durations.len(), 1, "{durations:?}");
    assert!(durations[0].has(&[(MESSAGING_SYSTEM, "rabbitmq")]));
    assert_eq!(Broker::ready(&channel, queue).await, 0, "acked");
    connection.close().await.unwrap();
}

#[tokio::test]
async fn a_trusted_user_id_keeps_the_scenario_for_that_publisher_only() {
    let Some(broker) = Broker::get() else { return };
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, true);
    let chaos_uri = broker.user("chaos");
    let (chaos, chaos_channel) = broker.open(&chaos_uri).await;
    let (guest, guest_channel) = broker.open(&broker.uri()).await;
    let queue = "trusted";
    Broker::queue(&guest_channel, queue, FieldTable::new()).await;
    let scenario = context(Some(&abort_at("grpc:*")));
    let as_user = |user: &str, body: &str| {
        (
            BasicProperties::default()
                .with_headers(headers_of(&telemetry, &scenario))
                .with_user_id(user)
                .finish(),
            body.to_owned(),
        )
    };
    let (properties, body) = as_user("chaos", "from chaos");
    publish(&chaos_channel, queue, properties, body.as_bytes()).await;
    let (properties, body) = as_user("guest", "from guest");
    publish(&guest_channel, queue, properties, body.as_bytes()).await;

    let mut settings = consumer_settings(broker, queue);
    settings.trust_scenario = Some(TrustScenario::user_ids(["chaos"]));
    let (_consumer, mut rx) = recording(&setup, settings);
    let mut got = [next(&mut rx).await, next(&mut rx).await];
    got.sort_by(|a, b| a.body.cmp(&b.body));
    assert_eq!(got[0].body, "from chaos");
    let has_scenario = |seen: &Seen| seen.header.as_deref().is_some_and(|h| h.contains(KEY));
    assert!(got[0].scenario && has_scenario(&got[0]), "{:?}", got[0]);
    assert_eq!(got[1].body, "from guest");
    assert!(!got[1].scenario && !has_scenario(&got[1]), "{:?}", got[1]);
    assert_eq!(got[1].tenant.as_deref(), Some("acme"));
    setup.stop().await;
    chaos.close().await.unwrap();
    guest.close().await.unwrap();
}

#[tokio::test]
async fn a_processor_error_redelivers_after_the_backoff() {
    let Some(broker) = Broker::get() else { return };
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, false);
    let (connection, channel) = broker.open(&broker.uri()).await;
    let queue = "failing";
    Broker::queue(&channel, queue, FieldTable::new()).await;
    publish(&channel, queue, BasicProperties::default(), b"retry me").await;

    let runs = Arc::new(Mutex::new(Vec::new()));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let seen_runs = Arc::clone(&runs);
    let _consumer = Consumer::start(&setup, consumer_settings(broker, queue), move |delivery| {
        let runs = Arc::clone(&seen_runs);
        let tx = tx.clone();
        async move {
            let mut runs = runs.lock().unwrap();
            runs.push(delivery.redelivered());
            if runs.len() < 3 {
                return Err("the database is down".into());
            }
            let _ = tx.send(seen(&delivery));
            Ok(())
        }
    })
    .unwrap();
    let got = next(&mut rx).await;
    assert_eq!(got.body, "retry me");
    assert!(got.redelivered);
    assert_eq!(*runs.lock().unwrap(), [false, true, true]);
    setup.stop().await;
    assert_eq!(Broker::ready(&channel, queue).await, 0, "acked at last");
    let failed: Vec<_> = spans_of_kind(&telemetry, SpanKind::Consumer)
        .into_iter()
        .filter(|s| matches!(s.status, Status::Error { .. }))
        .collect();
    assert_eq!(failed.len(), 2);
    assert_eq!(attr(&failed[0], "error.type").as_deref(), Some("_OTHER"));
    connection.close().await.unwrap();
}

#[tokio::test]
async fn stop_acks_what_was_processed_and_loses_nothing() {
    let Some(broker) = Broker::get() else { return };
    let setup = humus::Setup::new();
    let (connection, channel) = broker.open(&broker.uri()).await;
    let queue = "stopping";
    Broker::queue(&channel, queue, FieldTable::new()).await;
    for i in 0..6 {
        publish(
            &channel,
            queue,
            BasicProperties::default(),
            format!("{i}").as_bytes(),
        )
        .await;
    }
    // Three at once: the first three are in flight at the stop, and finish
    // within the grace; the other three stay in the queue.
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let done = Arc::new(Mutex::new(Vec::new()));
    let finished = Arc::clone(&done);
    let settings = ConsumerSettings {
        prefetch: 3,
        shutdown_grace: Duration::from_secs(20),
        ..consumer_settings(broker, queue)
    };
    let _consumer = Consumer::start(&setup, settings, move |delivery| {
        let started = started_tx.clone();
        let done = Arc::clone(&finished);
        async move {
            let _ = started.send(());
            tokio::time::sleep(Duration::from_millis(300)).await;
            done.lock().unwrap().push(delivery.into_body());
            Ok(())
        }
    })
    .unwrap();
    for _ in 0..3 {
        tokio::time::timeout(Duration::from_secs(30), started.recv())
            .await
            .unwrap();
    }
    setup.stop().await;
    assert_eq!(done.lock().unwrap().len(), 3, "those in flight finished");
    assert_eq!(
        Broker::ready(&channel, queue).await,
        3,
        "acked, and the rest kept"
    );

    // A processor that outlives the grace: dropped, and its delivery kept.
    let setup = humus::Setup::new();
    let settings = ConsumerSettings {
        shutdown_grace: Duration::from_millis(100),
        ..consumer_settings(broker, queue)
    };
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let _consumer = Consumer::start(&setup, settings, move |_| {
        let started = started_tx.clone();
        async move {
            let _ = started.send(());
            std::future::pending::<()>().await;
            Ok(())
        }
    })
    .unwrap();
    tokio::time::timeout(Duration::from_secs(30), started.recv())
        .await
        .unwrap();
    setup.stop().await;
    // The broker requeues the unacked once the consumer's channel closes.
    let mut ready = 0;
    for _ in 0..100 {
        ready = Broker::ready(&channel, queue).await;
        if ready == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ready, 3, "nothing lost");
    connection.close().await.unwrap();
}

#[tokio::test]
async fn the_strip_reads_the_header_whatever_the_propagator() {
    let Some(broker) = Broker::get() else { return };
    // Failure injection on, and no telemetry: the no-op propagator reads
    // no baggage, and the scenario is still stripped from the header.
    let setup = humus::Setup::new().with_faults(http_support::injector());
    let (connection, channel) = broker.open(&broker.uri()).await;
    let queue = "noop-propagator";
    Broker::queue(&channel, queue, FieldTable::new()).await;
    let w3c = Telemetry::new();
    let properties = BasicProperties::default()
        .with_headers(headers_of(&w3c, &context(Some(&abort_at("grpc:*")))))
        .finish();
    publish(&channel, queue, properties, b"text").await;
    // A baggage header that is no string cannot be read whole: dropped.
    let mut headers = FieldTable::new();
    headers.insert("baggage".try_into().unwrap(), amqprs::FieldValue::I(7));
    let properties = BasicProperties::default().with_headers(headers).finish();
    publish(&channel, queue, properties, b"number").await;

    let (_consumer, mut rx) = recording(&setup, consumer_settings(broker, queue));
    let mut got = [next(&mut rx).await, next(&mut rx).await];
    got.sort_by(|a, b| a.body.cmp(&b.body));
    assert_eq!(got[0].body, "number");
    assert!(!got[0].has_baggage, "{:?}", got[0]);
    assert_eq!(got[1].body, "text");
    assert_eq!(got[1].header.as_deref(), Some("tenant=acme"));
    assert!(!got[1].scenario && got[1].tenant.is_none(), "{:?}", got[1]);
    setup.stop().await;
    connection.close().await.unwrap();
}

#[tokio::test]
async fn a_delivery_limit_moves_what_keeps_failing_to_the_dead_letter_queue() {
    let Some(broker) = Broker::get() else { return };
    let setup = humus::Setup::new();
    let (connection, channel) = broker.open(&broker.uri()).await;
    let (queue, dead) = ("limited", "limited-dead");
    Broker::queue(&channel, dead, FieldTable::new()).await;
    // A quorum queue that dead-letters a message delivered more than once
    // more, to `dead` through the default exchange.
    let mut arguments = FieldTable::new();
    for (key, value) in [
        ("x-queue-type", FieldValue::from("quorum")),
        ("x-delivery-limit", FieldValue::l(1)),
        ("x-dead-letter-exchange", FieldValue::from("")),
        ("x-dead-letter-routing-key", FieldValue::from(dead)),
    ] {
        arguments.insert(key.try_into().unwrap(), value);
    }
    Broker::queue(&channel, queue, arguments).await;
    publish(&channel, queue, BasicProperties::default(), b"poison").await;
    let runs = Arc::new(Mutex::new(0));
    let counted = Arc::clone(&runs);
    let _consumer = Consumer::start(&setup, consumer_settings(broker, queue), move |_| {
        *counted.lock().unwrap() += 1;
        async { Err("cannot parse it".into()) }
    })
    .unwrap();
    let mut moved = 0;
    for _ in 0..300 {
        moved = Broker::ready(&channel, dead).await;
        if moved == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(moved, 1, "dead-lettered, not lost");
    assert_eq!(*runs.lock().unwrap(), 2);
    setup.stop().await;
    assert_eq!(Broker::ready(&channel, queue).await, 0);
    connection.close().await.unwrap();
}

#[tokio::test]
async fn the_apps_stop_finishes_the_delivery_in_flight() {
    let Some(broker) = Broker::get() else { return };
    let (connection, channel) = broker.open(&broker.uri()).await;
    let queue = "app-stop";
    Broker::queue(&channel, queue, FieldTable::new()).await;
    for body in [b"first", b"other"] {
        publish(&channel, queue, BasicProperties::default(), body).await;
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let stop = Mutex::new(Some(stop));
    let done = Arc::new(Mutex::new(Vec::new()));
    let finished = Arc::clone(&done);
    let settings = ConsumerSettings {
        prefetch: 1,
        ..consumer_settings(broker, queue)
    };
    let exit = humus::App::new()
        .stop_on(async move {
            let _ = stopped.await;
        })
        .run(|setup| async move {
            Consumer::start(&setup, settings, move |delivery| {
                // The stop comes while the first delivery is processed;
                // the other is never delivered (one at a time).
                if let Some(stop) = stop.lock().unwrap().take() {
                    let _ = stop.send(());
                }
                let done = Arc::clone(&finished);
                async move {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    done.lock().unwrap().push(delivery.into_body());
                    Ok(())
                }
            })?;
            Ok(vec![])
        })
        .await;
    assert_eq!(exit.code(), 0, "{:?}", exit.error());
    assert_eq!(*done.lock().unwrap(), [b"first".to_vec()]);
    assert_eq!(
        Broker::ready(&channel, queue).await,
        1,
        "acked, and the other kept"
    );
    connection.close().await.unwrap();
}

#[tokio::test]
async fn a_panic_in_the_trust_function_ends_the_consumer_and_comes_out_of_stop() {
    use futures_util::FutureExt as _;
    let Some(broker) = Broker::get() else { return };
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, true);
    let (connection, channel) = broker.open(&broker.uri()).await;
    let queue = "trust-panics";
    Broker::queue(&channel, queue, FieldTable::new()).await;
    let properties = BasicProperties::default()
        .with_headers(headers_of(&telemetry, &context(Some(&abort_at("grpc:*")))))
        .finish();
    publish(&channel, queue, properties, b"x").await;
    let mut settings = consumer_settings(broker, queue);
    let (asked_tx, mut asked) = mpsc::unbounded_channel();
    settings.trust_scenario = Some(TrustScenario::new(move |_| {
        let _ = asked_tx.send(());
        panic!("trust is broken")
    }));
    let (consumer, _rx) = recording(&setup, settings);
    tokio::time::timeout(Duration::from_secs(30), asked.recv())
        .await
        .unwrap();
    // The consumer's task ended with the panic; its delivery goes back.
    let mut ready = 0;
    for _ in 0..300 {
        ready = Broker::ready(&channel, queue).await;
        if ready == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ready, 1, "not acked: delivered again");
    let panic = std::panic::AssertUnwindSafe(consumer.stop())
        .catch_unwind()
        .await
        .unwrap_err();
    assert_eq!(panic.downcast_ref::<&str>(), Some(&"trust is broken"));
    Broker::queue(&channel, queue, FieldTable::new()).await;
    connection.close().await.unwrap();
}

#[tokio::test]
async fn a_failed_connection_is_logged_and_tried_again() {
    // No broker: a port no one listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, false);
    let settings = ConsumerSettings {
        uri: format!("amqp://127.0.0.1:{port}"),
        queue: "nowhere".into(),
        ..ConsumerSettings::default()
    };
    let _consumer = Consumer::start(&setup, settings, |_| async { Ok(()) }).unwrap();
    let mut records = Vec::new();
    for _ in 0..100 {
        records = telemetry.logs();
        if records.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(records.len() >= 2, "two attempts, each logged: {records:?}");
    let record = &records[0].record;
    assert_eq!(records[0].instrumentation.name(), RABBITMQ_SCOPE);
    assert_eq!(record.event_name(), Some("humus.rabbitmq.connection"));
    let body = format!("{:?}", record.body());
    assert!(
        body.contains(&format!(
            "rabbitmq consumer of nowhere on 127.0.0.1:{port}: could not connect:"
        )) && body.contains("connecting again in 1s"),
        "{body}"
    );
    setup.stop().await;
}
