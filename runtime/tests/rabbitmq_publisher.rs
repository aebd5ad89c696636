//! The RabbitMQ publisher against a real broker (see `rabbitmq_support`):
//! confirms, the context in the headers, failure injection, the breaker, a
//! lost connection, the close; and the settings' checks, which need no
//! broker.

mod http_support;
mod rabbitmq_support;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use amqprs::channel::{BasicGetArguments, Channel, ExchangeDeclareArguments, QueueBindArguments};
use amqprs::{BasicProperties, FieldTable};
use http_support::{KEY, abort_at, attr, calls, context, events, setup, spans_of_kind};
use humus::app::{ErrorKind, check_rabbitmq_publisher};
use humus::circuit::{self, Policy};
use humus::fault;
use humus::http::server::ContextLayer;
use humus::rabbitmq::{
    Consumer, ConsumerSettings, Delivery, PublishErrorKind, Publisher, PublisherSettings,
};
use humus::retry::BudgetConfig;
use humus::telemetry::FieldTableExtractor;
use humus::telemetry::names::{
    HUMUS_RABBITMQ_CONNECTION, MESSAGING_CLIENT_OPERATION_DURATION, MESSAGING_CLIENT_SENT_MESSAGES,
    MESSAGING_DESTINATION_NAME, MESSAGING_OPERATION_NAME, MESSAGING_RABBITMQ_ROUTING_KEY,
    MESSAGING_SYSTEM, RABBITMQ_SCOPE,
};
use humus::testing::Telemetry;
use opentelemetry::Context;
use opentelemetry::baggage::BaggageExt as _;
use opentelemetry::propagation::Extractor as _;
use opentelemetry::trace::{SpanKind, TraceContextExt as _};
use rabbitmq_support::Broker;
use tokio::sync::mpsc;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";

fn publisher_settings(uri: String) -> PublisherSettings {
    PublisherSettings {
        uri,
        backoff_base: Duration::from_millis(1),
        backoff_max: Duration::from_millis(5),
        ..PublisherSettings::default()
    }
}

/// Declares the direct exchange `exchange` and the queue `queue` (purged)
/// bound to it with `key`.
async fn bound(channel: &Channel, exchange: &str, queue: &str, key: &str) {
    channel
        .exchange_declare(
            ExchangeDeclareArguments::new(exchange, "direct")
                .durable(true)
                .finish(),
        )
        .await
        .unwrap();
    Broker::queue(channel, queue, FieldTable::new()).await;
    channel
        .queue_bind(QueueBindArguments::new(queue, exchange, key))
        .await
        .unwrap();
}

/// Takes every message of `queue`: its properties and body.
async fn take_all(channel: &Channel, queue: &str) -> Vec<(BasicProperties, Vec<u8>)> {
    let mut taken = Vec::new();
    while let Some((_, properties, body)) = channel
        .basic_get(BasicGetArguments::new(queue).no_ack(true).finish())
        .await
        .unwrap()
    {
        taken.push((properties, body));
    }
    taken
}

/// The `baggage` header of a message.
fn baggage_of(properties: &BasicProperties) -> Option<String> {
    properties
        .headers()
        .and_then(|h| FieldTableExtractor(h).get("baggage").map(str::to_owned))
}

fn metric_sum(telemetry: &Telemetry, name: &str, attributes: &[(&str, &str)]) -> f64 {
    telemetry
        .metrics(RABBITMQ_SCOPE)
        .into_iter()
        .filter(|p| p.name == name && p.has(attributes))
        .map(|p| p.value.as_f64())
        .sum()
}

#[test]
fn bad_settings_each_name_their_field() {
    let valid = PublisherSettings {
        uri: "amqp://rabbit".into(),
        ..PublisherSettings::default()
    };
    for (settings, field, says) in [
        (
            PublisherSettings {
                uri: "amqp:///shop".into(),
                ..valid.clone()
            },
            "uri",
            r#"uri "amqp:///shop" has no host"#,
        ),
        (
            PublisherSettings {
                uri: "http://rabbit:5672".into(),
                ..valid.clone()
            },
            "uri",
            r#"uri "http://rabbit:5672" has the scheme "http", want amqp://"#,
        ),
        (
            PublisherSettings {
                timeout: Duration::ZERO,
                ..valid.clone()
            },
            "timeout",
            "timeout is zero, want a duration more than zero",
        ),
    ] {
        let err = settings.check().unwrap_err();
        assert_eq!(err.fields().collect::<Vec<_>>(), [field]);
        let err = check_rabbitmq_publisher(&settings).unwrap_err();
        assert_eq!((err.kind(), err.exit_code()), (ErrorKind::Settings, 78));
        assert!(err.to_string().contains(says), "{err}");
        assert!(
            Publisher::new(&humus::Setup::new(), settings)
                .unwrap_err()
                .to_string()
                .contains(says)
        );
    }
}

#[test]
fn the_point_leaves_out_what_is_empty() {
    assert_eq!(
        Publisher::point("orders", "accepted"),
        "rabbitmq:orders:accepted"
    );
    assert_eq!(Publisher::point("", "accepted"), "rabbitmq:accepted");
    assert_eq!(Publisher::point("orders", ""), "rabbitmq:orders");
    assert_eq!(Publisher::point("", ""), "rabbitmq");
}

#[tokio::test]
async fn published_in_a_served_context_is_consumed_with_its_trace_and_baggage() {
    let Some(broker) = Broker::get() else { return };
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, true);
    let (connection, channel) = broker.open(&broker.uri()).await;
    bound(&channel, "traced", "traced-q", "created").await;
    let publisher = Publisher::new(&setup, publisher_settings(broker.uri())).unwrap();
    // A served request: humus's HTTP server layer gives its handler the
    // caller's context (trusting its scenario, which the publisher strips).
    let handler = move |_: axum::extract::Request| {
        let publisher = publisher.clone();
        async move {
            let properties = BasicProperties::default().with_message_id("m-7").finish();
            match publisher
                .publish("traced", "created", properties, b"order 7".to_vec())
                .await
            {
                Ok(()) => "published".to_owned(),
                Err(e) => e.to_string(),
            }
        }
    };
    let router = axum::Router::new()
        .fallback(handler)
        .layer(ContextLayer::new(&setup).trust_scenario(|_| true));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/orders", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let mut baggage = http::HeaderMap::new();
    opentelemetry::propagation::TextMapPropagator::inject_context(
        &opentelemetry_sdk::propagation::BaggagePropagator::new(),
        &context(Some(&abort_at("grpc:*"))),
        &mut humus::telemetry::HeaderInjector(&mut baggage),
    );
    let answer = http_support::bare_reqwest()
        .post(url)
        .header("traceparent", format!("00-{TRACE_ID}-{PARENT_ID}-01"))
        .header("baggage", baggage["baggage"].to_str().unwrap())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(answer, "published");
    let trace_id = opentelemetry::trace::TraceId::from_hex(TRACE_ID).unwrap();

    let (tx, mut rx) = mpsc::unbounded_channel();
    let _consumer = Consumer::start(
        &setup,
        ConsumerSettings {
            uri: broker.uri(),
            queue: "traced-q".into(),
            ..ConsumerSettings::default()
        },
        move |delivery: Delivery| {
            let tx = tx.clone();
            async move {
                let cx = Context::current();
                let _ = tx.send((
                    delivery.into_body(),
                    cx.span().span_context().trace_id(),
                    cx.baggage().get("tenant").map(|v| v.as_str().to_owned()),
                    cx.baggage().get(KEY).is_some(),
                ));
                Ok(())
            }
        },
    )
    .unwrap();
    let (body, got_trace, tenant, scenario) =
        tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("a delivery within 30 s")
            .unwrap();
    assert_eq!(body, b"order 7");
    assert_eq!(got_trace, trace_id, "the trace continues");
    assert_eq!(tenant.as_deref(), Some("acme"), "the other members go");
    assert!(!scenario, "the publisher stripped the scenario");
    setup.stop().await;

    let producers = spans_of_kind(&telemetry, SpanKind::Producer);
    assert_eq!(producers.len(), 1, "{producers:?}");
    let span = &producers[0];
    assert_eq!(span.name, "publish traced");
    assert_eq!(
        span.parent_span_id,
        opentelemetry::trace::SpanId::from_hex(PARENT_ID).unwrap()
    );
    assert_eq!(span.span_context.trace_id(), trace_id);
    assert_eq!(attr(span, MESSAGING_SYSTEM).as_deref(), Some("rabbitmq"));
    assert_eq!(
        attr(span, MESSAGING_OPERATION_NAME).as_deref(),
        Some("publish")
    );
    assert_eq!(
        attr(span, MESSAGING_DESTINATION_NAME).as_deref(),
        Some("traced")
    );
    assert_eq!(
        attr(span, MESSAGING_RABBITMQ_ROUTING_KEY).as_deref(),
        Some("created")
    );
    assert_eq!(attr(span, "messaging.message.id").as_deref(), Some("m-7"));
    assert_eq!(events(span, fault::names::STRIP).len(), 1);
    let consumers = spans_of_kind(&telemetry, SpanKind::Consumer);
    assert_eq!(consumers.len(), 1);
    assert_eq!(
        consumers[0].parent_span_id,
        span.span_context.span_id(),
        "the consumer's span is the publisher's child"
    );
    let publish = [(MESSAGING_DESTINATION_NAME, "traced")];
    assert_eq!(
        metric_sum(&telemetry, MESSAGING_CLIENT_SENT_MESSAGES, &publish),
        1.0
    );
    assert!(
        telemetry
            .metrics(RABBITMQ_SCOPE)
            .iter()
            .any(|p| p.name == MESSAGING_CLIENT_OPERATION_DURATION && p.has(&publish))
    );
    connection.close().await.unwrap();
}

#[tokio::test]
async fn aborted_publishes_send_nothing_are_retried_and_open_the_breaker() {
    let Some(broker) = Broker::get() else { return };
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, true);
    let (connection, channel) = broker.open(&broker.uri()).await;
    bound(&channel, "orders", "orders-accepted", "accepted").await;
    let publisher = Publisher::new(
        &setup,
        PublisherSettings {
            max_attempts: 2,
            retry_budget: BudgetConfig {
                max_tokens: 1000,
                token_ratio: 0.1,
            },
            breaker: circuit::Config {
                open_for: Duration::from_secs(1),
                ..PublisherSettings::default().breaker
            },
            // Ten publishes of two attempts each: the twentieth failure
            // opens it.
            breaker_policy: Policy::consecutive(20),
            ..publisher_settings(broker.uri())
        },
    )
    .unwrap();
    let aborting = context(Some(&abort_at("rabbitmq:orders:accepted")));
    for _ in 0..10 {
        let err = publisher
            .publish_in(
                aborting.clone(),
                "orders",
                "accepted",
                BasicProperties::default(),
                b"never".to_vec(),
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind(), PublishErrorKind::Connection, "marked as lost");
        assert_eq!(
            err.to_string(),
            "rabbitmq: publishing to orders:accepted: fit: injected failure at rabbitmq:orders:accepted"
        );
        assert!(err.injected().is_some_and(|i| i.is_abort()));
    }
    assert_eq!(calls(&telemetry, "failure"), 20.0, "each retried once");
    assert_eq!(publisher.breaker_state(), circuit::State::Open);
    assert_eq!(
        Broker::ready(&channel, "orders-accepted").await,
        0,
        "nothing sent"
    );
    let err = publisher
        .publish_in(
            context(None),
            "orders",
            "accepted",
            BasicProperties::default(),
            b"rejected".to_vec(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), PublishErrorKind::Rejected, "{err}");
    assert_eq!(calls(&telemetry, "rejected"), 1.0);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    publisher
        .publish_in(
            context(None),
            "orders",
            "accepted",
            BasicProperties::default(),
            b"probe".to_vec(),
        )
        .await
        .expect("the probe is confirmed");
    let taken = take_all(&channel, "orders-accepted").await;
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].1, b"probe");
    let aborted: Vec<_> = spans_of_kind(&telemetry, SpanKind::Producer)
        .into_iter()
        .filter(|s| attr(s, "error.type").as_deref() == Some(fault::ERROR_TYPE))
        .collect();
    assert_eq!(aborted.len(), 20, "a span per attempt");
    setup.stop().await;
    connection.close().await.unwrap();
}

#[tokio::test]
async fn forward_scenario_decides_whether_the_headers_carry_the_scenario() {
    let Some(broker) = Broker::get() else { return };
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, true);
    let (connection, channel) = broker.open(&broker.uri()).await;
    bound(&channel, "forwarding", "forwarding-q", "k").await;
    let scenario = context(Some(&abort_at("grpc:*")));
    for forward in [false, true] {
        let publisher = Publisher::new(
            &setup,
            PublisherSettings {
                forward_scenario: forward,
                ..publisher_settings(broker.uri())
            },
        )
        .unwrap();
        publisher
            .publish_in(
                scenario.clone(),
                "forwarding",
                "k",
                BasicProperties::default(),
                b"m".to_vec(),
            )
            .await
            .unwrap();
        let taken = take_all(&channel, "forwarding-q").await;
        assert_eq!(taken.len(), 1);
        let baggage = baggage_of(&taken[0].0).unwrap_or_default();
        assert!(baggage.contains("tenant=acme"), "{baggage}");
        assert_eq!(
            baggage.contains(KEY),
            forward,
            "forward {forward}: {baggage}"
        );
    }
    let strips: Vec<usize> = spans_of_kind(&telemetry, SpanKind::Producer)
        .iter()
        .map(|s| events(s, fault::names::STRIP).len())
        .collect();
    assert_eq!(strips, [1, 0]);
    setup.stop().await;
    connection.close().await.unwrap();
}

#[tokio::test]
async fn an_unroutable_or_refused_publish_is_the_callers_and_counts_nothing() {
    let Some(broker) = Broker::get() else { return };
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, false);
    let (connection, channel) = broker.open(&broker.uri()).await;
    bound(&channel, "routed", "routed-q", "bound").await;
    let publisher = Publisher::new(&setup, publisher_settings(broker.uri())).unwrap();
    let err = publisher
        .publish(
            "routed",
            "unbound",
            BasicProperties::default(),
            b"x".to_vec(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), PublishErrorKind::Unroutable, "{err}");
    assert_eq!(err.reply_code(), Some(312));
    let err = publisher
        .publish(
            "no-such-exchange",
            "k",
            BasicProperties::default(),
            b"x".to_vec(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), PublishErrorKind::Refused, "{err}");
    assert_eq!(err.reply_code(), Some(404));
    assert_eq!(
        calls(&telemetry, "ignored"),
        2.0,
        "not retried, not counted"
    );
    assert_eq!(calls(&telemetry, "failure"), 0.0);
    // A new channel for the next publish, on the same connection.
    publisher
        .publish(
            "routed",
            "bound",
            BasicProperties::default(),
            b"ok".to_vec(),
        )
        .await
        .unwrap();
    assert_eq!(Broker::ready(&channel, "routed-q").await, 1);
    setup.stop().await;
    connection.close().await.unwrap();
}

#[tokio::test]
async fn a_lost_connection_is_dialled_again_after_the_backoff_and_nothing_confirmed_is_lost() {
    let Some(broker) = Broker::get() else { return };
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, false);
    let user = "dropped";
    let uri = broker.user(user);
    let (connection, channel) = broker.open(&broker.uri()).await;
    bound(&channel, "lossy", "lossy-q", "k").await;
    let publisher = Publisher::new(
        &setup,
        PublisherSettings {
            // Retries for about 3 s: past the first connection backoff (1 s).
            max_attempts: 20,
            backoff_base: Duration::from_millis(150),
            backoff_max: Duration::from_millis(150),
            retry_budget: BudgetConfig {
                max_tokens: 1000,
                token_ratio: 0.1,
            },
            breaker_policy: Policy::consecutive(1000),
            ..publisher_settings(uri)
        },
    )
    .unwrap();
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let publishing = {
        let publisher = publisher.clone();
        tokio::spawn(async move {
            let mut confirmed = Vec::new();
            let mut failed = 0;
            let mut i = 0;
            while !*stopping.borrow() {
                let body = format!("{i}");
                i += 1;
                let started = std::time::Instant::now();
                match publisher
                    .publish(
                        "lossy",
                        "k",
                        BasicProperties::default(),
                        body.clone().into_bytes(),
                    )
                    .await
                {
                    Ok(()) => confirmed.push((body, started)),
                    Err(e) => {
                        assert_eq!(e.kind(), PublishErrorKind::Connection, "{e}");
                        failed += 1;
                    }
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            (confirmed, failed)
        })
    };
    // Mid-publish: the broker closes the publisher's connection.
    tokio::time::sleep(Duration::from_millis(300)).await;
    broker.ctl(&["close_all_user_connections", user, "the test closes it"]);
    let closed = std::time::Instant::now();
    // Past the connection backoff (1 s, +20 %).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let _ = stop.send(true);
    let (confirmed, failed) = publishing.await.unwrap();
    let in_queue: HashSet<String> = take_all(&channel, "lossy-q")
        .await
        .into_iter()
        .map(|(_, body)| String::from_utf8(body).unwrap())
        .collect();
    for (body, _) in &confirmed {
        assert!(in_queue.contains(body), "{body} was confirmed, and lost");
    }
    assert!(
        confirmed
            .iter()
            .any(|(_, started)| *started > closed + Duration::from_millis(1500)),
        "confirmed again on a new connection: {} confirmed, {failed} failed",
        confirmed.len()
    );
    assert!(
        telemetry
            .logs()
            .iter()
            .any(|l| l.record.event_name() == Some(HUMUS_RABBITMQ_CONNECTION)),
        "the lost connection is logged"
    );

    // The broker refuses the publisher (its password changed) and comes
    // back: publishes fail, then are confirmed again.
    broker.ctl(&["change_password", user, "changed"]);
    broker.ctl(&["close_all_user_connections", user, "the test closes it"]);
    let err = publisher
        .publish(
            "lossy",
            "k",
            BasicProperties::default(),
            b"refused".to_vec(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), PublishErrorKind::Connection, "{err}");
    broker.ctl(&["change_password", user, user]);
    let back = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if publisher
                .publish("lossy", "k", BasicProperties::default(), b"back".to_vec())
                .await
                .is_ok()
            {
                break;
            }
        }
    })
    .await;
    assert!(back.is_ok(), "confirmed again once the broker is back");
    setup.stop().await;
    connection.close().await.unwrap();
}

#[tokio::test]
async fn a_publish_after_the_stop_fails_at_once_saying_the_publisher_is_closed() {
    let Some(broker) = Broker::get() else { return };
    let setup = humus::Setup::new();
    let (connection, channel) = broker.open(&broker.uri()).await;
    bound(&channel, "closing", "closing-q", "k").await;
    let publisher = Arc::new(Publisher::new(&setup, publisher_settings(broker.uri())).unwrap());
    publisher
        .publish(
            "closing",
            "k",
            BasicProperties::default(),
            b"before".to_vec(),
        )
        .await
        .unwrap();
    setup.stop().await;
    let started = std::time::Instant::now();
    let err = publisher
        .publish(
            "closing",
            "k",
            BasicProperties::default(),
            b"after".to_vec(),
        )
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_millis(100));
    assert_eq!(err.kind(), PublishErrorKind::Closed);
    assert_eq!(
        err.to_string(),
        "rabbitmq: publishing to closing:k: the publisher is closed"
    );
    assert_eq!(Broker::ready(&channel, "closing-q").await, 1);
    connection.close().await.unwrap();
}

#[tokio::test]
async fn a_nack_is_retried_and_a_failure() {
    let Some(broker) = Broker::get() else { return };
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, false);
    let (connection, channel) = broker.open(&broker.uri()).await;
    // A queue of one message that refuses the next: the broker nacks it.
    let mut arguments = FieldTable::new();
    for (key, value) in [
        ("x-max-length", amqprs::FieldValue::l(1)),
        ("x-overflow", amqprs::FieldValue::from("reject-publish")),
    ] {
        arguments.insert(key.try_into().unwrap(), value);
    }
    Broker::queue(&channel, "full", arguments).await;
    let publisher = Publisher::new(
        &setup,
        PublisherSettings {
            max_attempts: 2,
            ..publisher_settings(broker.uri())
        },
    )
    .unwrap();
    publisher
        .publish("", "full", BasicProperties::default(), b"first".to_vec())
        .await
        .unwrap();
    let err = publisher
        .publish("", "full", BasicProperties::default(), b"second".to_vec())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), PublishErrorKind::Nacked, "{err}");
    assert_eq!(
        err.to_string(),
        "rabbitmq: publishing to full: the broker nacked the message"
    );
    assert_eq!(calls(&telemetry, "failure"), 2.0, "retried, each a failure");
    let spans = spans_of_kind(&telemetry, SpanKind::Producer);
    assert_eq!(spans.len(), 3);
    assert!(spans.iter().all(|s| s.name == "publish amq.default"));
    assert_eq!(
        metric_sum(
            &telemetry,
            MESSAGING_CLIENT_SENT_MESSAGES,
            &[("error.type", "nacked")]
        ),
        2.0
    );
    setup.stop().await;
    connection.close().await.unwrap();
}

#[tokio::test]
async fn a_delay_past_the_attempt_timeout_is_retried_until_the_deadline() {
    let Some(broker) = Broker::get() else { return };
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, true);
    let (connection, channel) = broker.open(&broker.uri()).await;
    bound(&channel, "slow", "slow-q", "k").await;
    let publisher = Publisher::new(
        &setup,
        PublisherSettings {
            timeout: Duration::from_millis(700),
            attempt_timeout: Duration::from_millis(200),
            max_attempts: 10,
            ..publisher_settings(broker.uri())
        },
    )
    .unwrap();
    let delayed = context(Some(&http_support::delay_at(
        "rabbitmq:slow:k",
        Duration::from_secs(5),
    )));
    let started = std::time::Instant::now();
    let err = publisher
        .publish_in(
            delayed,
            "slow",
            "k",
            BasicProperties::default(),
            b"x".to_vec(),
        )
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(err.kind(), PublishErrorKind::Timeout, "{err}");
    let failures = calls(&telemetry, "failure");
    assert!((3.0..=4.0).contains(&failures), "{failures} attempts");
    assert_eq!(Broker::ready(&channel, "slow-q").await, 0, "nothing sent");
    setup.stop().await;
    connection.close().await.unwrap();
}

#[tokio::test]
async fn a_publish_its_caller_drops_counts_nothing() {
    let Some(broker) = Broker::get() else { return };
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, true);
    let publisher = Publisher::new(&setup, publisher_settings(broker.uri())).unwrap();
    let delayed = context(Some(&http_support::delay_at(
        "rabbitmq:dropped",
        Duration::from_secs(5),
    )));
    let dropped = tokio::time::timeout(
        Duration::from_millis(100),
        publisher.publish_in(
            delayed,
            "",
            "dropped",
            BasicProperties::default(),
            b"x".to_vec(),
        ),
    )
    .await;
    assert!(dropped.is_err(), "still waiting when dropped");
    for outcome in ["success", "failure", "ignored", "rejected"] {
        assert_eq!(calls(&telemetry, outcome), 0.0, "{outcome}");
    }
    let spans = spans_of_kind(&telemetry, SpanKind::Producer);
    assert_eq!(spans.len(), 1);
    assert_eq!(attr(&spans[0], "error.type").as_deref(), Some("canceled"));
    setup.stop().await;
}

/// A TCP proxy to the broker whose answers (the broker's side) are held
/// while `hold` is true: what the client sends reaches the broker, what
/// the broker sends back (a publish's confirm) waits.
async fn holding_proxy(broker_port: u16, hold: tokio::sync::watch::Receiver<bool>) -> u16 {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((client, _)) = listener.accept().await else {
                return;
            };
            let broker = tokio::net::TcpStream::connect(("127.0.0.1", broker_port))
                .await
                .unwrap();
            let (mut client_read, mut client_write) = client.into_split();
            let (mut broker_read, mut broker_write) = broker.into_split();
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut client_read, &mut broker_write).await;
            });
            let mut hold = hold.clone();
            tokio::spawn(async move {
                let mut buf = vec![0; 64 * 1024];
                loop {
                    if hold.wait_for(|held| !*held).await.is_err() {
                        return;
                    }
                    let n = match broker_read.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    // Read before the hold: still held back until it ends.
                    if hold.wait_for(|held| !*held).await.is_err()
                        || client_write.write_all(&buf[..n]).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A confirm that does not come ends each attempt at its `attempt_timeout`
/// (a failure, retried) and the call at its deadline: the channel's one
/// timer for its confirms' waits ends them. Each attempt's message was
/// sent (at least once); the confirms let through again, publishes are
/// confirmed again.
#[tokio::test]
async fn a_confirm_that_does_not_come_ends_the_attempt_at_its_timeout() {
    let Some(broker) = Broker::get() else { return };
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, false);
    let (connection, channel) = broker.open(&broker.uri()).await;
    Broker::queue(&channel, "unconfirmed", FieldTable::new()).await;
    let (hold, held) = tokio::sync::watch::channel(false);
    let port = holding_proxy(broker.port, held).await;
    let publisher = Publisher::new(
        &setup,
        PublisherSettings {
            timeout: Duration::from_millis(700),
            attempt_timeout: Duration::from_millis(200),
            max_attempts: 10,
            ..publisher_settings(format!("amqp://guest:guest@127.0.0.1:{port}"))
        },
    )
    .unwrap();
    let publish =
        || publisher.publish("", "unconfirmed", BasicProperties::default(), b"x".to_vec());
    publish().await.unwrap();
    hold.send_replace(true);
    let started = std::time::Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(10), publish())
        .await
        .expect("ended by its deadline")
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.kind(), PublishErrorKind::Timeout, "{err}");
    assert!(
        (Duration::from_millis(650)..Duration::from_secs(2)).contains(&took),
        "{took:?}"
    );
    let failures = calls(&telemetry, "failure");
    assert!((3.0..=4.0).contains(&failures), "{failures} attempts");
    // The broker has each attempt's message, the first publish's too.
    let ready = f64::from(Broker::ready(&channel, "unconfirmed").await);
    assert!((4.0..=failures + 1.0).contains(&ready), "{ready} messages");
    hold.send_replace(false);
    publish().await.unwrap();
    setup.stop().await;
    connection.close().await.unwrap();
}
