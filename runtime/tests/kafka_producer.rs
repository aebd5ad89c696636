//! The Kafka producer against librdkafka's in-process mock cluster: the
//! trace and the baggage's other members reach the consumer; aborted
//! calls store nothing and open the breaker, whose probe stores once it
//! half-opens; a delay waits the longest of a call's records, and one past
//! `delivery_timeout` is a Failure; a broker that is down opens the
//! breaker and probes close it once it is back; a record over the size
//! limit does not count against the cluster; a record that finds
//! librdkafka's queue full waits for room; a timer anchor runs while
//! calls come and ends at the close; bad settings name their
//! field; a call ends at its delivery timeout, not at librdkafka's later
//! report, a Failure; a call made in a served RPC's scope ends at its
//! inherited deadline, a Failure; librdkafka's refusal ends the App with
//! exit 78; the App's stop flushes what is in flight and
//! closes the producer.
//!
//! librdkafka runs its own threads on real time: the tests that wait for
//! it use real time with bounded waits; only those whose waits are
//! humus's own (an injected delay, the breaker's `open_for`) pause tokio's
//! clock, and resume it while librdkafka stores (paused, a call's deadline
//! passes as soon as the runtime is idle).

mod http_support;
mod kafka_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt as _;
use http_support::{KEY, abort_at, attr, calls, context, delay_at, events, setup};
use humus::app::{BoxError, Env, ErrorKind, check_kafka_producer};
use humus::circuit::{Outcome, Policy, State};
use humus::deadline::Inherited;
use humus::fault::names as fit;
use humus::fault::{Fault, Rule, Scenario};
use humus::grpc::client::Classification;
use humus::kafka::{
    Classify, Consumer, Kind, NewError, OwnedMessage, Producer, ProducerSettings, Record,
    RecordResult, TrustScenario, inject_context,
};
use humus::telemetry::names::*;
use humus::testing::{Host, Telemetry};
use kafka_support::{Cluster, eventually};
use opentelemetry::baggage::BaggageExt as _;
use opentelemetry::trace::{
    Span as _, SpanKind, TraceContextExt as _, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::BaggagePropagator;
use opentelemetry_sdk::trace::SpanData;
use rdkafka::message::{Headers as _, Message as _, OwnedHeaders};
use tokio::time::Instant;

/// The baggage members each record's processor saw.
type Seen = Arc<Mutex<Vec<Vec<(String, String)>>>>;

/// The `baggage` headers of each record a processor was handed, and the
/// tenant its context's baggage had.
type SeenHeaders = Arc<Mutex<Vec<(Vec<String>, Option<String>)>>>;

/// Producer settings of `cluster`: a short delivery timeout, no linger.
/// Produces a first record to `orders` until one is stored: the broker's
/// metadata known and the idempotent producer's id given, so that a timed
/// call after it waits for nothing else (on a loaded machine, maybe not
/// within a first record's short delivery timeout).
async fn first_record_stored(producer: &Producer) {
    eventually("a first record is stored", || async {
        producer
            .produce([Record::to("orders").value("first")])
            .await
            .is_ok()
    })
    .await;
}

fn settings(cluster: &Cluster) -> ProducerSettings {
    let mut settings = ProducerSettings {
        brokers: cluster.brokers(),
        delivery_timeout: Duration::from_secs(10),
        ..ProducerSettings::default()
    };
    settings.librdkafka.insert("linger.ms".into(), "0".into());
    settings
}

fn producer_spans(telemetry: &Telemetry) -> Vec<SpanData> {
    telemetry
        .spans()
        .into_iter()
        .filter(|s| s.span_kind == SpanKind::Producer)
        .collect()
}

/// The messaging data points named `name` of the producer.
fn messaging(telemetry: &Telemetry, name: &str) -> f64 {
    telemetry
        .metrics(KAFKA_SCOPE)
        .into_iter()
        .filter(|p| p.name == name)
        .map(|p| p.value.as_f64())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consumer_continues_the_producers_trace_with_the_baggage_but_the_scenario() {
    for forward in [false, true] {
        let cluster = Cluster::new(&["orders"]);
        let telemetry = Telemetry::new();
        let setup = setup(&telemetry, true);
        let producer = Producer::new(
            &setup,
            ProducerSettings {
                forward_scenario: forward,
                ..settings(&cluster)
            },
        )
        .unwrap();
        // The served RPC's span, and its baggage: a tenant and a scenario
        // that injects nothing here.
        let tracer = telemetry.tracer_provider().tracer("served");
        let served = tracer.start("ledger.v1.Ledger/Transfer");
        let served_id = served.span_context().clone();
        let cx = context(Some(&abort_at("grpc:elsewhere"))).with_span(served);
        let stored = producer
            .produce_in(cx, [Record::to("orders").key("o-1").value("v")])
            .await
            .unwrap();
        assert_eq!(stored[0].offset, 0);

        let seen: Seen = Arc::default();
        let mut consumer_settings = cluster.settings(&format!("audit-{forward}"), "orders");
        consumer_settings.trust_scenario = Some(TrustScenario::topics(["orders"]));
        let consumer = Consumer::start(&setup, consumer_settings, {
            let seen = Arc::clone(&seen);
            move |_m: OwnedMessage| {
                let baggage = Context::current()
                    .baggage()
                    .iter()
                    .map(|(k, (v, _))| (k.to_string(), v.to_string()))
                    .collect();
                seen.lock().unwrap().push(baggage);
                std::future::ready(Ok::<_, BoxError>(()))
            }
        })
        .unwrap();
        eventually("the record is processed", || async {
            !seen.lock().unwrap().is_empty()
        })
        .await;
        consumer.stop().await;

        let baggage = seen.lock().unwrap()[0].clone();
        assert!(
            baggage.contains(&("tenant".into(), "acme".into())),
            "{baggage:?}"
        );
        assert_eq!(
            baggage.iter().any(|(k, _)| k == KEY),
            forward,
            "forward_scenario {forward}: {baggage:?}"
        );
        let spans = telemetry.spans();
        let send = spans
            .iter()
            .find(|s| s.span_kind == SpanKind::Producer)
            .expect("the record's PRODUCER span");
        assert_eq!(send.name, "send orders");
        assert_eq!(send.parent_span_id, served_id.span_id());
        assert_eq!(send.span_context.trace_id(), served_id.trace_id());
        assert_eq!(attr(send, MESSAGING_SYSTEM).as_deref(), Some("kafka"));
        assert_eq!(
            attr(send, MESSAGING_OPERATION_TYPE).as_deref(),
            Some("send")
        );
        assert_eq!(
            attr(send, MESSAGING_DESTINATION_NAME).as_deref(),
            Some("orders")
        );
        assert_eq!(
            attr(send, MESSAGING_DESTINATION_PARTITION_ID).as_deref(),
            Some("0")
        );
        assert_eq!(attr(send, MESSAGING_KAFKA_OFFSET).as_deref(), Some("0"));
        // The strip, on the record's span, unless forwarded; the
        // evaluation, in the record's unstripped context.
        assert_eq!(events(send, fit::STRIP).len(), usize::from(!forward));
        assert_eq!(events(send, fit::EVALUATION).len(), 1);
        let process = spans
            .iter()
            .find(|s| s.span_kind == SpanKind::Consumer)
            .expect("the record's CONSUMER span");
        assert_eq!(process.parent_span_id, send.span_context.span_id());
        assert_eq!(process.span_context.trace_id(), served_id.trace_id());
        assert_eq!(messaging(&telemetry, MESSAGING_CLIENT_SENT_MESSAGES), 1.0);
        assert_eq!(
            messaging(&telemetry, MESSAGING_CLIENT_OPERATION_DURATION),
            1.0
        );
        assert_eq!(calls(&telemetry, "success"), 1.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_records_own_baggage_header_is_kept_its_scenario_stripped_unless_forwarded() {
    for forward in [false, true] {
        let cluster = Cluster::new(&["orders"]);
        let telemetry = Telemetry::new();
        let setup = setup(&telemetry, true);
        let producer = Producer::new(
            &setup,
            ProducerSettings {
                forward_scenario: forward,
                ..settings(&cluster)
            },
        )
        .unwrap();
        // The caller's own `baggage` header: a tenant and a scenario.
        let scenario = context(Some(&abort_at("grpc:elsewhere")));
        let member = scenario.baggage().get(KEY).unwrap().to_string();
        let own = Context::new().with_baggage([
            KeyValue::new("tenant", "globex"),
            KeyValue::new(KEY, member),
        ]);
        let headers = inject_context(&BaggagePropagator::new(), &own, OwnedHeaders::new());
        let record = Record {
            headers: Some(headers),
            ..Record::to("orders").value("own")
        };
        // Produced in a context with no baggage: the record's own header is
        // the only one.
        producer.produce_in(Context::new(), [record]).await.unwrap();
        // Produced in a context whose baggage has tenant=acme: both go, the
        // record's own after, so a reader sees its tenant.
        producer
            .produce_in(
                context(None),
                [Record::to("orders")
                    .value("both")
                    .header("baggage", "tenant=globex")],
            )
            .await
            .unwrap();

        let seen: SeenHeaders = Arc::default();
        let mut consumer_settings = cluster.settings(&format!("own-{forward}"), "orders");
        // Trusted: the processor sees the headers as they were sent.
        consumer_settings.trust_scenario = Some(TrustScenario::topics(["orders"]));
        let consumer = Consumer::start(&setup, consumer_settings, {
            let seen = Arc::clone(&seen);
            move |m: OwnedMessage| {
                let baggage = m
                    .headers()
                    .map(|h| {
                        h.iter()
                            .filter(|h| h.key == "baggage")
                            .map(|h| String::from_utf8_lossy(h.value.unwrap()).into_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                let tenant = Context::current()
                    .baggage()
                    .get("tenant")
                    .map(|v| v.to_string());
                seen.lock().unwrap().push((baggage, tenant));
                std::future::ready(Ok::<_, BoxError>(()))
            }
        })
        .unwrap();
        eventually("both records are processed", || async {
            seen.lock().unwrap().len() == 2
        })
        .await;
        consumer.stop().await;

        let seen = seen.lock().unwrap().clone();
        let (sent, tenant) = &seen[0];
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(sent[0].contains("tenant=globex"), "{sent:?}");
        assert_eq!(
            sent[0].contains(KEY),
            forward,
            "forward_scenario {forward}: {sent:?}"
        );
        if !forward {
            assert_eq!(sent[0], "tenant=globex");
        }
        assert_eq!(tenant.as_deref(), Some("globex"));
        let (sent, tenant) = &seen[1];
        assert_eq!(sent, &["tenant=acme", "tenant=globex"]);
        assert_eq!(tenant.as_deref(), Some("globex"));
        // The strip of the record's own header, on its span, unless
        // forwarded.
        let spans = producer_spans(&telemetry);
        assert_eq!(events(&spans[0], fit::STRIP).len(), usize::from(!forward));
        assert_eq!(events(&spans[1], fit::STRIP).len(), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn aborted_calls_store_nothing_open_the_breaker_and_a_probe_stores_after_open_for() {
    let cluster = Cluster::new(&["orders"]);
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, true);
    let mut settings = settings(&cluster);
    settings.breaker_policy = Policy::consecutive_or_half(10, 20, 1);
    settings.breaker.open_for = Duration::from_secs(5);
    let producer = Producer::new(&setup, settings).unwrap();
    let aborting = context(Some(&abort_at("kafka:orders")));
    for i in 0..10 {
        let records = [
            Record::to("orders").value(format!("a{i}")),
            Record::to("orders").value(format!("b{i}")),
        ];
        let e = producer
            .produce_in(aborting.clone(), records)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), Kind::Transport, "{e}");
        assert_eq!(e.injected().unwrap().point(), "kafka:orders");
        assert!(matches!(
            e.records(),
            [RecordResult::Unsent, RecordResult::Unsent]
        ));
    }
    assert_eq!(producer.breaker_state(), State::Open);
    let spans = producer_spans(&telemetry);
    assert_eq!(spans.len(), 20);
    for span in &spans {
        assert_eq!(events(span, fit::EVALUATION).len(), 1, "{span:?}");
        assert_eq!(
            attr(span, ERROR_TYPE).as_deref(),
            Some(humus::fault::ERROR_TYPE)
        );
    }
    assert_eq!(calls(&telemetry, "failure"), 10.0);
    // Aborted records were never sent: not in the messaging instruments.
    assert_eq!(messaging(&telemetry, MESSAGING_CLIENT_SENT_MESSAGES), 0.0);

    // An eleventh call, with no scenario: rejected, nothing sent.
    let e = producer
        .produce_in(context(None), [Record::to("orders").value("c")])
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Kind::Rejected, "{e}");
    assert_eq!(calls(&telemetry, "rejected"), 1.0);
    assert_eq!(cluster.stored("orders").await, 0);

    // After open_for, a probe stores, and closes the breaker. librdkafka
    // stores on real time: the clock runs for the probe (paused, the
    // call's deadline would pass as soon as the runtime is idle).
    tokio::time::advance(Duration::from_secs(5)).await;
    tokio::time::resume();
    let stored = producer
        .produce_in(context(None), [Record::to("orders").value("probe")])
        .await
        .unwrap();
    assert_eq!(stored[0].offset, 0);
    assert_eq!(producer.breaker_state(), State::Closed);
    assert_eq!(cluster.stored("orders").await, 1);
}

#[tokio::test(start_paused = true)]
async fn a_delay_waits_the_longest_of_the_calls_records_and_past_delivery_timeout_fails() {
    let cluster = Cluster::new(&["orders", "audit"]);
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, true);
    let producer = Producer::new(
        &setup,
        ProducerSettings {
            delivery_timeout: Duration::from_secs(2),
            ..settings(&cluster)
        },
    )
    .unwrap();
    let delays = Scenario::new([
        Rule::new(
            "kafka:orders",
            Fault {
                delay: Duration::from_millis(300),
                abort: false,
            },
        ),
        Rule::new(
            "kafka:audit",
            Fault {
                delay: Duration::from_millis(700),
                abort: false,
            },
        ),
    ]);
    // Connected first, so the timed call waits for nothing else; on real
    // time while librdkafka stores (paused, the call's deadline would pass
    // as soon as the runtime is idle).
    tokio::time::resume();
    producer
        .produce_in(context(None), [Record::to("orders").value("first")])
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let stored = producer
        .produce_in(
            context(Some(&delays)),
            [
                Record::to("orders").value("o"),
                Record::to("audit").value("a"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(stored.len(), 2);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(700) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    assert_eq!(calls(&telemetry, "success"), 2.0);

    // A delay past delivery_timeout: cut short at it, nothing sent, a
    // Failure (humus's own waits, on paused time).
    tokio::time::pause();
    let started = tokio::time::Instant::now();
    let e = producer
        .produce_in(
            context(Some(&delay_at("kafka:orders", Duration::from_secs(5)))),
            [Record::to("orders").value("late")],
        )
        .await
        .unwrap_err();
    // At it, to the timer's millisecond (the clock paused off one).
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited <= Duration::from_millis(2001),
        "{waited:?}"
    );
    assert_eq!(e.kind(), Kind::Timeout, "{e}");
    assert!(e.injected().is_some());
    assert_eq!(calls(&telemetry, "failure"), 1.0);

    // Made with an inherited deadline earlier than delivery_timeout: the
    // delay is cut short at that deadline.
    let started = tokio::time::Instant::now();
    let delayed = context(Some(&delay_at("kafka:orders", Duration::from_secs(5))));
    let e = Inherited::new(Some(started + Duration::from_millis(300)), delayed)
        .scope(async {
            producer
                .produce([Record::to("orders").value("later")])
                .await
        })
        .await
        .unwrap_err();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited <= Duration::from_millis(301),
        "{waited:?}"
    );
    assert_eq!(e.kind(), Kind::Timeout, "{e}");
    assert!(e.injected().is_some());
    assert!(matches!(e.records(), [RecordResult::Unsent]), "{e:?}");
    assert_eq!(calls(&telemetry, "failure"), 2.0);
    assert_eq!(cluster.stored("orders").await, 2);
}

#[tokio::test(start_paused = true)]
async fn a_call_ends_at_the_deadline_it_inherits_a_failure_with_its_records_in_flight() {
    let cluster = Cluster::new(&["orders"]);
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, false);
    let producer = Producer::new(&setup, settings(&cluster)).unwrap();
    // Connected first, so the timed call waits for nothing else; on real
    // time while librdkafka stores (paused, the call's deadline would pass
    // as soon as the runtime is idle).
    tokio::time::resume();
    producer
        .produce_in(context(None), [Record::to("orders").value("first")])
        .await
        .unwrap();
    tokio::time::pause();
    cluster.broker_down();

    // Made in a served RPC's scope with 200 ms left: the call ends then,
    // not at the delivery timeout of 10 s; its record still in flight.
    let served = Duration::from_millis(200);
    let started = Instant::now();
    let e = Inherited::new(Some(started + served), context(None))
        .scope(async { producer.produce([Record::to("orders").value("late")]).await })
        .await
        .unwrap_err();
    // At it, to the timer's millisecond (the clock paused off one).
    let waited = started.elapsed();
    assert!(
        waited >= served && waited <= served + Duration::from_millis(1),
        "{waited:?}"
    );
    assert_eq!(e.kind(), Kind::Timeout, "{e}");
    assert!(
        e.to_string().contains(
            "by the deadline inherited from the RPC being served (200ms left when the call was made), not the delivery timeout of 10s"
        ),
        "{e}"
    );
    assert!(matches!(e.records(), [RecordResult::InFlight]), "{e:?}");
    // Still held by librdkafka (its out-queue also counts a request or
    // report of its own at times, with the broker down: at least one).
    assert!(producer.in_flight() >= 1, "{}", producer.in_flight());
    // A Failure, as the gRPC and HTTP clients count a call their
    // inherited deadline ends; the record's span ends with it, and the
    // record was sent.
    assert_eq!(calls(&telemetry, "failure"), 1.0);
    let late = producer_spans(&telemetry)
        .into_iter()
        .find(|s| attr(s, ERROR_TYPE).is_some())
        .expect("the late record's span");
    assert_eq!(attr(&late, ERROR_TYPE).as_deref(), Some("timeout"));
    assert_eq!(messaging(&telemetry, MESSAGING_CLIENT_SENT_MESSAGES), 2.0);

    // Made once the inherited deadline has passed: nothing sent, nothing
    // counted.
    let e = Inherited::new(Some(Instant::now()), context(None))
        .scope(async {
            producer
                .produce([Record::to("orders").value("spent")])
                .await
        })
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Kind::Timeout, "{e}");
    assert!(matches!(e.records(), [RecordResult::Unsent]), "{e:?}");
    // Never handed to librdkafka: the messaging count below is unchanged.
    assert_eq!(calls(&telemetry, "failure"), 1.0);
    assert_eq!(messaging(&telemetry, MESSAGING_CLIENT_SENT_MESSAGES), 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_stored_before_the_inherited_deadline_end_the_call_as_usual() {
    let cluster = Cluster::new(&["orders", "audit"]);
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, false);
    let producer = Producer::new(&setup, settings(&cluster)).unwrap();
    // An inherited deadline earlier than the delivery timeout (10 s), far
    // enough for a loaded machine.
    let stored = Inherited::new(Some(Instant::now() + Duration::from_secs(8)), context(None))
        .scope(async {
            producer
                .produce([
                    Record::to("orders").value("o"),
                    Record::to("audit").value("a"),
                    Record::to("orders").value("p"),
                ])
                .await
        })
        .await
        .unwrap();
    let offsets: Vec<_> = stored.iter().map(|d| d.offset).collect();
    assert_eq!(offsets, [0, 0, 1]);
    assert_eq!(calls(&telemetry, "success"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_is_down_opens_the_breaker_and_probes_close_it_once_it_is_back() {
    let cluster = Cluster::new(&["orders"]);
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, false);
    let mut settings = ProducerSettings {
        delivery_timeout: Duration::from_millis(500),
        ..settings(&cluster)
    };
    settings.breaker_policy = Policy::consecutive_or_half(3, 20, 1);
    settings.breaker.open_for = Duration::from_millis(300);
    let producer = Producer::new(&setup, settings).unwrap();
    first_record_stored(&producer).await;
    let failures_before = calls(&telemetry, "failure");

    cluster.broker_down();
    for _ in 0..3 {
        let e = producer
            .produce([Record::to("orders").value("lost")])
            .await
            .unwrap_err();
        assert_eq!(e.kind(), Kind::Timeout, "{e}");
    }
    assert_eq!(producer.breaker_state(), State::Open);
    assert_eq!(calls(&telemetry, "failure") - failures_before, 3.0);
    let e = producer
        .produce([Record::to("orders").value("rejected")])
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Kind::Rejected, "{e}");

    cluster.broker_up();
    eventually("a probe stores, and closes the breaker", || async {
        let _ = producer
            .produce([Record::to("orders").value("probe")])
            .await;
        producer.breaker_state() == State::Closed
    })
    .await;
    assert!(cluster.stored("orders").await >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_ends_at_its_delivery_timeout_not_at_librdkafkas_report() {
    let cluster = Cluster::new(&["orders"]);
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, false);
    let delivery_timeout = Duration::from_secs(1);
    let mut settings = ProducerSettings {
        delivery_timeout,
        ..settings(&cluster)
    };
    settings.breaker_policy = Policy::consecutive_or_half(3, 20, 1);
    settings.breaker.open_for = Duration::from_secs(60);
    let producer = Producer::new(&setup, settings).unwrap();
    first_record_stored(&producer).await;
    let failures_before = calls(&telemetry, "failure");

    // librdkafka reports a record past message.timeout.ms only at its
    // next timeout scan, and much later with the partition's leader
    // unknown: each call still ends at its delivery timeout (generous
    // bound for a loaded machine), one of one record and one of several.
    cluster.broker_down();
    let opened = Instant::now();
    let calls_made: [&[&str]; 3] = [&["a"], &["b", "c", "d"], &["e"]];
    for values in calls_made {
        let started = Instant::now();
        let e = producer
            .produce(values.iter().map(|v| Record::to("orders").value(*v)))
            .await
            .unwrap_err();
        let took = started.elapsed();
        assert!(took >= delivery_timeout, "{took:?}");
        assert!(took < Duration::from_millis(1800), "{took:?}");
        assert_eq!(e.kind(), Kind::Timeout, "{e}");
        assert!(
            e.to_string()
                .contains("not every record was stored within the delivery timeout of 1s"),
            "{e}"
        );
        assert_eq!(e.records().len(), values.len());
        assert!(
            e.records()
                .iter()
                .all(|r| matches!(r, RecordResult::InFlight | RecordResult::Failed(_))),
            "{e:?}"
        );
    }
    // Each a Failure: the breaker opens after its policy's three.
    assert_eq!(producer.breaker_state(), State::Open);
    assert_eq!(calls(&telemetry, "failure") - failures_before, 3.0);
    assert!(opened.elapsed() < Duration::from_millis(3 * 1800));
    let e = producer
        .produce([Record::to("orders").value("rejected")])
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Kind::Rejected, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_over_the_size_limit_fails_without_counting_against_the_cluster() {
    let cluster = Cluster::new(&["orders"]);
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, false);
    let producer = Producer::new(&setup, settings(&cluster)).unwrap();
    let e = producer
        .produce([Record::to("orders").value(vec![0u8; 2_000_000])])
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Kind::Record, "{e}");
    assert!(matches!(e.records(), [RecordResult::Failed(_)]));
    assert_eq!(calls(&telemetry, "ignored"), 1.0);
    assert_eq!(calls(&telemetry, "failure"), 0.0);
    assert_eq!(producer.breaker_state(), State::Closed);
    let send = &producer_spans(&telemetry)[0];
    assert_eq!(
        attr(send, ERROR_TYPE).as_deref(),
        Some("MessageSizeTooLarge")
    );

    // The classification is the settings' own: one that counts the
    // caller's errors too.
    let strict = Producer::new(
        &setup,
        ProducerSettings {
            classify: Classify::new(|result| match result {
                Ok(_) => Classification::stop(Outcome::Success),
                Err(_) => Classification::stop(Outcome::Failure),
            }),
            ..settings(&cluster)
        },
    )
    .unwrap();
    strict
        .produce([Record::to("orders").value(vec![0u8; 2_000_000])])
        .await
        .unwrap_err();
    assert_eq!(calls(&telemetry, "failure"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_its_caller_drops_counts_nothing() {
    let cluster = Cluster::new(&["orders"]);
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, false);
    let producer = Producer::new(&setup, settings(&cluster)).unwrap();
    cluster.broker_down();
    let dropped = tokio::time::timeout(
        Duration::from_millis(200),
        producer.produce([Record::to("orders").value("v")]),
    )
    .await;
    assert!(dropped.is_err(), "the call was still waiting");
    for outcome in ["success", "failure", "ignored", "rejected"] {
        assert_eq!(calls(&telemetry, outcome), 0.0, "{outcome}");
    }
    assert_eq!(producer.breaker_state(), State::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_finds_librdkafkas_queue_full_waits_for_room_within_its_call() {
    let cluster = Cluster::new(&["orders"]);
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, false);
    let mut settings = settings(&cluster);
    // Room for one record in librdkafka's queue.
    settings
        .librdkafka
        .insert("queue.buffering.max.messages".into(), "1".into());
    let producer = Producer::new(&setup, settings).unwrap();
    first_record_stored(&producer).await;
    let stored_before = cluster.stored("orders").await;

    // The broker down, the first record holds the queue's room; the
    // second finds it full and waits, rather than failing at once, until
    // the first is stored and leaves it room.
    cluster.broker_down();
    let first = tokio::spawn({
        let producer = producer.clone();
        async move { producer.produce([Record::to("orders").value("a")]).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = tokio::spawn({
        let producer = producer.clone();
        async move { producer.produce([Record::to("orders").value("b")]).await }
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!first.is_finished());
    assert!(
        !second.is_finished(),
        "the second call ended at once: {:?}",
        second.await
    );
    cluster.broker_up();
    let (first, second) = tokio::time::timeout(Duration::from_secs(8), async {
        (first.await.unwrap(), second.await.unwrap())
    })
    .await
    .expect("both calls end within their delivery timeout");
    first.unwrap();
    second.unwrap();
    assert_eq!(cluster.stored("orders").await, stored_before + 2);
    assert_eq!(calls(&telemetry, "failure"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_anchor_runs_while_calls_come_and_ends_at_the_close() {
    let cluster = Cluster::new(&["orders"]);
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, false);
    let producer = Producer::new(&setup, settings(&cluster)).unwrap();
    let tasks = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let before = tasks();
    // The first call spawns the task that keeps a timer ahead of the
    // calls' deadline timers (so that arming those does not wake tokio's
    // time driver); the next calls keep it.
    first_record_stored(&producer).await;
    producer
        .produce([Record::to("orders").value("second")])
        .await
        .unwrap();
    assert_eq!(tasks(), before + 1, "the anchor's task");
    producer.close().await;
    eventually("the anchor's task ends with the close", || async {
        tasks() == before
    })
    .await;
}

/// Settings of a broker with one librdkafka property.
fn with_property(key: &str, value: &str) -> ProducerSettings {
    let mut settings = ProducerSettings {
        brokers: vec!["k:9092".into()],
        ..ProducerSettings::default()
    };
    settings.librdkafka.insert(key.into(), value.into());
    settings
}

#[tokio::test]
async fn bad_settings_each_name_their_field() {
    let setup = humus::Setup::new();
    for (settings, field, says) in [
        (ProducerSettings::default(), "brokers", "is empty"),
        (
            ProducerSettings {
                brokers: vec!["kafka://k:9092".into()],
                ..ProducerSettings::default()
            },
            "brokers",
            "names a scheme",
        ),
        (
            ProducerSettings {
                brokers: vec!["k:9092".into()],
                delivery_timeout: Duration::ZERO,
                ..ProducerSettings::default()
            },
            "delivery_timeout",
            "",
        ),
        (
            ProducerSettings {
                brokers: vec!["k:9092".into()],
                acks: humus::kafka::Acks::Leader,
                ..ProducerSettings::default()
            },
            "acks",
            "idempotence",
        ),
        // librdkafka's own refusals, named before it builds a client.
        (
            with_property("linger.ms", "abc"),
            "librdkafka",
            r#"sets "linger.ms" to "abc", which librdkafka refuses: Invalid value for configuration property "queue.buffering.max.ms""#,
        ),
        (
            with_property("linger", "5"),
            "librdkafka",
            r#"sets "linger" to "5", which librdkafka refuses: No such configuration property: "linger""#,
        ),
    ] {
        let e = check_kafka_producer(&settings).unwrap_err();
        assert_eq!((e.kind(), e.exit_code()), (ErrorKind::Settings, 78));
        let text = e.to_string();
        assert!(
            text.contains(&format!("invalid kafka producer settings: {field} "))
                && text.contains(says),
            "{text}"
        );
        match Producer::new(&setup, settings) {
            Err(NewError::Settings(e)) => assert_eq!(e.fields().collect::<Vec<_>>(), [field]),
            other => panic!("{other:?}"),
        }
    }
    // A property humus owns, passed through.
    let mut settings = ProducerSettings {
        brokers: vec!["k:9092".into()],
        ..ProducerSettings::default()
    };
    settings
        .librdkafka
        .insert("message.timeout.ms".into(), "5".into());
    let e = check_kafka_producer(&settings).unwrap_err();
    assert!(
        e.to_string()
            .contains("librdkafka sets \"message.timeout.ms\""),
        "{e}"
    );
    // Read with serde: the shared breaker section and its flat keys.
    let read: ProducerSettings = serde_json::from_str(
        r#"{"brokers": ["k:9092"], "breaker_window": 7, "delivery_timeout": "3s", "acks": "all"}"#,
    )
    .unwrap();
    assert_eq!(read.breaker.window, 7);
    assert_eq!(read.delivery_timeout, Duration::from_secs(3));
    let both = serde_json::from_str::<ProducerSettings>(
        r#"{"breaker": {"window": 3}, "breaker_window": 7}"#,
    );
    assert!(both.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apps_stop_flushes_what_is_in_flight_and_closes_the_producer() {
    let cluster = Cluster::new(&["orders"]);
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, false);
    let mut settings = settings(&cluster);
    // Records wait a while in librdkafka's queue before they are sent:
    // without the stop's flush, the record would still be in flight.
    settings
        .librdkafka
        .insert("linger.ms".into(), "2000".into());
    let producer = Producer::new(&setup, settings).unwrap();
    let call = tokio::spawn(producer.produce([Record::to("orders").value("v")]));
    eventually("the record is in flight", || async {
        producer.in_flight() >= 1
    })
    .await;
    // The stop returns once the record is stored, not before.
    setup.stop().await;
    assert_eq!(producer.in_flight(), 0);
    call.await.unwrap().unwrap();
    assert_eq!(cluster.stored("orders").await, 1);

    // Closed: a produce fails at once (its first poll), saying so, and
    // nothing is sent or counted.
    let e = producer
        .produce([Record::to("orders").value("after")])
        .now_or_never()
        .expect("a produce after the stop fails at once")
        .unwrap_err();
    assert_eq!(e.kind(), Kind::Stopped, "{e}");
    assert_eq!(
        e.to_string(),
        "kafka produce stopped: the producer is closed: nothing was sent"
    );
    assert!(matches!(e.records(), [RecordResult::Unsent]), "{e:?}");
    assert_eq!(producer.in_flight(), 0);
    assert_eq!(calls(&telemetry, "success"), 1.0);
    for outcome in ["failure", "ignored", "rejected"] {
        assert_eq!(calls(&telemetry, outcome), 0.0, "{outcome}");
    }
    assert_eq!(producer_spans(&telemetry).len(), 1);
    assert_eq!(cluster.stored("orders").await, 1);
}

#[tokio::test]
async fn librdkafkas_refusals_end_the_app_with_exit_78_and_a_refused_check_1() {
    // A bad property read from the environment: the settings' check runs
    // it through librdkafka and names its variable.
    let exit = humus::App::new()
        .host(Host::new())
        .run(|_| async move {
            let _settings = Env::from_pairs([
                ("LEDGER_KAFKA_BROKERS", "k:9092"),
                ("LEDGER_KAFKA_LIBRDKAFKA_LINGER_MS", "abc"),
            ])
            .read_all(|env| env.kafka_producer("LEDGER_KAFKA_"))?;
            Ok(vec![])
        })
        .await;
    assert_eq!(exit.code(), 78);
    let text = exit.error().unwrap().to_string();
    assert!(
        text.contains(
            r#"LEDGER_KAFKA_LIBRDKAFKA: sets "linger.ms" to "abc", which librdkafka refuses"#
        ),
        "{text}"
    );

    // Properties librdkafka refuses only together, when it builds its
    // client (linger.ms not below message.timeout.ms): exit 78 with `?`.
    let exit = humus::App::new()
        .host(Host::new())
        .run(|setup| async move {
            let settings = ProducerSettings {
                delivery_timeout: Duration::from_secs(1),
                ..with_property("linger.ms", "5000")
            };
            Producer::new(&setup, settings)?;
            Ok(vec![])
        })
        .await;
    assert_eq!(exit.code(), 78);
    let text = exit.error().unwrap().to_string();
    assert!(
        text.contains("kafka producer of k:9092") && text.contains("linger.ms"),
        "{text}"
    );

    // Settings built in code that the check refuses: a fault in the code,
    // as every constructor's refusal.
    let exit = humus::App::new()
        .host(Host::new())
        .run(|setup| async move {
            Producer::new(&setup, with_property("linger", "5"))?;
            Ok(vec![])
        })
        .await;
    assert_eq!(exit.code(), 1);
    let text = exit.error().unwrap().to_string();
    assert!(text.contains(r#"sets "linger" to "5""#), "{text}");
}
