//! The Kafka consumer against librdkafka's in-process mock cluster: the
//! scenario of a record it does not trust is stripped (other members
//! kept), a trusted topic's is handed over, the trace continues from the
//! producer's span, a failing record is retried and its offset committed
//! only once it succeeded, the stop commits what was processed and loses
//! nothing; bad settings name their field.

mod http_support;
mod kafka_support;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_support::{KEY, abort_at, attr, context, events, setup};
use humus::app::{BoxError, ErrorKind, check_kafka_consumer};
use humus::fault::names as fit;
use humus::kafka::{
    Consumer, ConsumerSettings, Message as _, OwnedMessage, STOPPED_ERROR_TYPE, StartError,
    TrustScenario,
};
use humus::telemetry::names::*;
use humus::testing::Telemetry;
use kafka_support::{Cluster, eventually};
use opentelemetry::Context;
use opentelemetry::baggage::BaggageExt as _;
use opentelemetry::trace::{SpanKind, TraceContextExt as _, Tracer as _, TracerProvider as _};
use opentelemetry_sdk::trace::SpanData;
use rdkafka::message::Headers as _;

/// What the processor saw of each record: its value, the baggage members
/// of its context, and the record's `baggage` headers.
type Seen = Arc<Mutex<Vec<(String, Vec<(String, String)>, Vec<String>)>>>;

/// A processor that records what it sees and succeeds.
fn recording(seen: &Seen) -> impl Fn(OwnedMessage) -> Done + Send + Sync + 'static {
    let seen = Arc::clone(seen);
    move |m| {
        let baggage = Context::current()
            .baggage()
            .iter()
            .map(|(k, (v, _))| (k.to_string(), v.to_string()))
            .collect();
        let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
        let headers = m
            .headers()
            .map(|h| {
                h.iter()
                    .filter(|h| h.key == "baggage")
                    .map(|h| String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        seen.lock().unwrap().push((value, baggage, headers));
        done()
    }
}

/// A processor's result at once.
type Done = std::future::Ready<Result<(), BoxError>>;

fn done() -> Done {
    std::future::ready(Ok(()))
}

fn consumer_spans(telemetry: &Telemetry) -> Vec<SpanData> {
    telemetry
        .spans()
        .into_iter()
        .filter(|s| s.span_kind == SpanKind::Consumer)
        .collect()
}

async fn seen_count(seen: &Seen) -> usize {
    seen.lock().unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_reaches_the_processor_only_from_a_trusted_topic_and_the_tenant_always() {
    for trusted in [false, true] {
        let topic = "orders";
        let cluster = Cluster::new(&[topic]);
        let telemetry = Telemetry::new();
        let setup = setup(&telemetry, true);
        let mut settings = cluster.settings("audit", topic);
        if trusted {
            settings.trust_scenario = Some(TrustScenario::topics([topic]));
        }
        let seen = Seen::default();
        let consumer = Consumer::start(&setup, settings, recording(&seen)).unwrap();
        cluster
            .produce(
                &telemetry,
                &context(Some(&abort_at("kafka:orders"))),
                topic,
                "one",
            )
            .await;
        eventually("the record is processed", || async {
            seen_count(&seen).await == 1
        })
        .await;
        consumer.stop().await;
        let (value, baggage, headers) = seen.lock().unwrap()[0].clone();
        assert_eq!(value, "one");
        let member = |key: &str| {
            baggage
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            member("tenant").as_deref(),
            Some("acme"),
            "trusted {trusted}"
        );
        assert_eq!(
            member(KEY).is_some(),
            trusted,
            "trusted {trusted}: {baggage:?}"
        );
        // The record's own headers as well: a processor that passes them
        // on passes no scenario on.
        assert_eq!(headers.len(), 1, "{headers:?}");
        assert_eq!(headers[0].contains(KEY), trusted, "{headers:?}");
        assert!(headers[0].contains("tenant=acme"), "{headers:?}");
        let spans = consumer_spans(&telemetry);
        assert_eq!(spans.len(), 1);
        assert_eq!(events(&spans[0], fit::STRIP).len(), usize::from(!trusted));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strip_only_strips_and_off_hands_the_baggage_over_as_it_came() {
    // Off, the consumer cannot tell a scenario from any other member.
    let topic = "orders";
    let cluster = Cluster::new(&[topic]);
    let telemetry = Telemetry::new();
    let seen = Seen::default();
    let consumer = Consumer::start(
        &setup(&telemetry, false),
        cluster.settings("audit", topic),
        recording(&seen),
    )
    .unwrap();
    let cx = context(Some(&abort_at("*")));
    cluster.produce(&telemetry, &cx, topic, "off").await;
    eventually("the record is processed", || async {
        seen_count(&seen).await == 1
    })
    .await;
    consumer.stop().await;
    assert!(seen.lock().unwrap()[0].1.iter().any(|(k, _)| k == KEY));
    // Strip-only knows the convention, and strips as with injection on.
    let telemetry = Telemetry::new();
    let seen = Seen::default();
    let strip_only = humus::Setup::new()
        .with_telemetry(telemetry.telemetry())
        .with_faults(humus::fault::Injector::strip_only(http_support::codec()));
    let consumer = Consumer::start(
        &strip_only,
        cluster.settings("audit-2", topic),
        recording(&seen),
    )
    .unwrap();
    eventually("the record is processed", || async {
        seen_count(&seen).await == 1
    })
    .await;
    consumer.stop().await;
    let baggage = &seen.lock().unwrap()[0].1;
    assert!(!baggage.iter().any(|(k, _)| k == KEY), "{baggage:?}");
    assert!(baggage.iter().any(|(k, _)| k == "tenant"), "{baggage:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_record_span_is_a_child_of_the_producers_and_current_in_the_processor() {
    let topic = "transfers";
    let cluster = Cluster::new(&[topic]);
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, true);
    let current = Arc::new(Mutex::new(None));
    let processor = {
        let current = Arc::clone(&current);
        move |_| {
            *current.lock().unwrap() = Some(Context::current().span().span_context().clone());
            done()
        }
    };
    let consumer = Consumer::start(&setup, cluster.settings("ledger", topic), processor).unwrap();
    // The producer's span, in a served request's context.
    let tracer = telemetry.tracer_provider().tracer("producer");
    let producer_span = tracer.start_with_context("send transfers", &context(None));
    let producing = context(None).with_span(producer_span);
    let producer = producing.span().span_context().clone();
    cluster.produce(&telemetry, &producing, topic, "t-1").await;
    eventually("the record is processed", || async {
        current.lock().unwrap().is_some()
    })
    .await;
    consumer.stop().await;
    let spans = consumer_spans(&telemetry);
    assert_eq!(spans.len(), 1);
    let span = &spans[0];
    assert_eq!(span.name, "process transfers");
    assert_eq!(span.instrumentation_scope.name(), KAFKA_SCOPE);
    assert_eq!(span.span_context.trace_id(), producer.trace_id());
    assert_eq!(span.parent_span_id, producer.span_id());
    let current = current.lock().unwrap().clone().unwrap();
    assert_eq!(current.span_id(), span.span_context.span_id());
    for (key, value) in [
        (MESSAGING_SYSTEM, "kafka"),
        (MESSAGING_OPERATION_NAME, "process"),
        (MESSAGING_OPERATION_TYPE, "process"),
        (MESSAGING_DESTINATION_NAME, topic),
        (MESSAGING_DESTINATION_PARTITION_ID, "0"),
        (MESSAGING_CONSUMER_GROUP_NAME, "ledger"),
        (MESSAGING_KAFKA_OFFSET, "0"),
    ] {
        assert_eq!(attr(span, key).as_deref(), Some(value), "{key}");
    }
    let points = telemetry.metrics(KAFKA_SCOPE);
    let durations: Vec<_> = points
        .iter()
        .filter(|p| p.name == MESSAGING_PROCESS_DURATION)
        .collect();
    assert_eq!(durations.len(), 1, "{points:?}");
    assert!(durations[0].has(&[
        (MESSAGING_SYSTEM, "kafka"),
        (MESSAGING_DESTINATION_NAME, topic),
        (MESSAGING_CONSUMER_GROUP_NAME, "ledger"),
    ]));
    assert_eq!(durations[0].attribute(ERROR_TYPE), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_record_is_retried_and_its_offset_committed_only_once_it_succeeded() {
    let topic = "payments";
    let cluster = Cluster::new(&[topic]);
    let telemetry = Telemetry::new();
    let attempts = Arc::new(AtomicU32::new(0));
    let failing = Arc::new(AtomicBool::new(true));
    let processor = {
        let (attempts, failing) = (Arc::clone(&attempts), Arc::clone(&failing));
        move |_| {
            attempts.fetch_add(1, Ordering::SeqCst);
            let failing = failing.load(Ordering::SeqCst);
            std::future::ready(if failing {
                Err::<(), BoxError>("the ledger is down".into())
            } else {
                Ok(())
            })
        }
    };
    let settings = ConsumerSettings {
        max_attempts: 1000,
        ..cluster.settings("payments", topic)
    };
    let consumer = Consumer::start(&setup(&telemetry, true), settings, processor).unwrap();
    cluster
        .produce(&telemetry, &context(None), topic, "p-1")
        .await;
    eventually("a few failed attempts", || async {
        attempts.load(Ordering::SeqCst) >= 3
    })
    .await;
    // Many commit intervals later, nothing is committed.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(cluster.committed("payments", topic).await, None);
    failing.store(false, Ordering::SeqCst);
    eventually("the offset after the record is committed", || async {
        cluster.committed("payments", topic).await == Some(1)
    })
    .await;
    let tries = attempts.load(Ordering::SeqCst);
    consumer.stop().await;
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        tries,
        "no attempt after success"
    );
    let spans = consumer_spans(&telemetry);
    assert_eq!(spans.len(), 1);
    assert_eq!(events(&spans[0], EXCEPTION_EVENT).len() as u32, tries - 1);
    assert_eq!(attr(&spans[0], ERROR_TYPE), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_failing_max_attempts_times_holds_its_partition_and_is_reported() {
    let topic = "payments";
    let cluster = Cluster::new(&[topic]);
    let telemetry = Telemetry::new();
    let attempts = Arc::new(AtomicU32::new(0));
    let processor = {
        let attempts = Arc::clone(&attempts);
        move |_| {
            attempts.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Err::<(), BoxError>("the ledger is down".into()))
        }
    };
    let settings = ConsumerSettings {
        max_attempts: 3,
        ..cluster.settings("payments", topic)
    };
    let consumer = Consumer::start(&setup(&telemetry, true), settings, processor).unwrap();
    cluster
        .produce(&telemetry, &context(None), topic, "p-1")
        .await;
    cluster
        .produce(&telemetry, &context(None), topic, "p-2")
        .await;
    eventually("the record is reported held", || async {
        telemetry
            .logs()
            .iter()
            .any(|l| l.record.event_name() == Some(HUMUS_KAFKA_RECORD_HELD))
    })
    .await;
    eventually("more attempts after the report", || async {
        attempts.load(Ordering::SeqCst) >= 5
    })
    .await;
    consumer.stop().await;
    assert_eq!(cluster.committed("payments", topic).await, None);
    let spans = consumer_spans(&telemetry);
    assert_eq!(spans.len(), 1, "the second record was never processed");
    assert_eq!(events(&spans[0], HUMUS_KAFKA_RECORD_HELD).len(), 1);
    assert_eq!(
        attr(&spans[0], ERROR_TYPE).as_deref(),
        Some(STOPPED_ERROR_TYPE)
    );
    let held: Vec<_> = telemetry
        .logs()
        .into_iter()
        .filter(|l| l.record.event_name() == Some(HUMUS_KAFKA_RECORD_HELD))
        .collect();
    assert_eq!(held.len(), 1);
    assert_eq!(
        held[0].record.trace_context().map(|t| t.span_id),
        Some(spans[0].span_context.span_id())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_failing_for_good_goes_to_the_dead_letter_topic_and_its_offset_is_committed() {
    let (topic, dead) = ("payments", "payments.dlq");
    let cluster = Cluster::new(&[topic, dead]);
    let telemetry = Telemetry::new();
    let processor = |m: OwnedMessage| {
        let poison = m.payload() == Some(b"poison");
        std::future::ready(if poison {
            Err::<(), BoxError>("cannot parse".into())
        } else {
            Ok(())
        })
    };
    let settings = ConsumerSettings {
        max_attempts: 2,
        dead_letter_topic: Some(dead.to_owned()),
        ..cluster.settings("payments", topic)
    };
    let consumer = Consumer::start(&setup(&telemetry, true), settings, processor).unwrap();
    cluster
        .produce(&telemetry, &context(None), topic, "poison")
        .await;
    cluster
        .produce(&telemetry, &context(None), topic, "fine")
        .await;
    eventually("both offsets are committed", || async {
        cluster.committed("payments", topic).await == Some(2)
    })
    .await;
    consumer.stop().await;
    // The dead-letter topic holds the poison record.
    let dead_seen = Seen::default();
    let reader = Consumer::start(
        &setup(&Telemetry::new(), false),
        cluster.settings("reader", dead),
        recording(&dead_seen),
    )
    .unwrap();
    eventually("the dead-lettered record is read", || async {
        seen_count(&dead_seen).await == 1
    })
    .await;
    reader.stop().await;
    assert_eq!(dead_seen.lock().unwrap()[0].0, "poison");
    let spans = consumer_spans(&telemetry);
    assert_eq!(spans.len(), 2);
    assert_eq!(events(&spans[0], HUMUS_KAFKA_DEAD_LETTERED).len(), 1);
    assert_eq!(attr(&spans[0], ERROR_TYPE).as_deref(), Some("_OTHER"));
    assert_eq!(attr(&spans[1], ERROR_TYPE), None);
    // Produced with humus's producer, in the poison record's context: its
    // PRODUCER span a child of the record's, its call counted.
    let sends: Vec<_> = telemetry
        .spans()
        .into_iter()
        .filter(|s| s.span_kind == SpanKind::Producer)
        .collect();
    assert_eq!(sends.len(), 1);
    assert_eq!(sends[0].name, "send payments.dlq");
    assert_eq!(sends[0].parent_span_id, spans[0].span_context.span_id());
    assert_eq!(http_support::calls(&telemetry, "success"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stop_commits_what_was_processed_and_loses_nothing() {
    let topic = "events";
    let cluster = Cluster::new(&[topic]);
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, true);
    // Commits only at the stop. The mock cluster holds a new member's
    // join for the group's session timeout less a second, however the
    // group's last member left: a short one keeps the test short.
    let settings = ConsumerSettings {
        commit_interval: Duration::from_secs(3600),
        librdkafka: [("session.timeout.ms".to_owned(), "6000".to_owned())].into(),
        ..cluster.settings("audit", topic)
    };
    // Records "e-0" to "e-2" are processed; "e-3" never finishes.
    let seen = Seen::default();
    let processor = {
        let seen = Arc::clone(&seen);
        move |m: OwnedMessage| {
            let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
            let seen = Arc::clone(&seen);
            async move {
                if value == "e-3" {
                    std::future::pending::<()>().await;
                }
                seen.lock().unwrap().push((value, Vec::new(), Vec::new()));
                Ok::<_, BoxError>(())
            }
        }
    };
    let _consumer = Consumer::start(&setup, settings.clone(), processor).unwrap();
    for i in 0..5 {
        cluster
            .produce(&telemetry, &context(None), topic, &format!("e-{i}"))
            .await;
    }
    eventually("three records are processed", || async {
        seen_count(&seen).await == 3
    })
    .await;
    assert_eq!(cluster.committed("audit", topic).await, None);
    // The App's stop runs the Setup's hooks.
    setup.stop().await;
    assert_eq!(cluster.committed("audit", topic).await, Some(3));
    let spans = consumer_spans(&telemetry);
    assert_eq!(
        attr(spans.last().unwrap(), ERROR_TYPE).as_deref(),
        Some(STOPPED_ERROR_TYPE)
    );
    // The group's next consumer starts at the record the stop dropped.
    let next = Seen::default();
    let consumer = Consumer::start(
        &http_support::setup(&Telemetry::new(), true),
        settings,
        recording(&next),
    )
    .unwrap();
    eventually("the rest is processed", || async {
        seen_count(&next).await == 2
    })
    .await;
    consumer.stop().await;
    let values: Vec<_> = next
        .lock()
        .unwrap()
        .iter()
        .map(|(v, _, _)| v.clone())
        .collect();
    assert_eq!(values, ["e-3", "e-4"]);
    assert_eq!(cluster.committed("audit", topic).await, Some(5));
}

#[tokio::test]
async fn bad_settings_each_name_their_field() {
    let good = ConsumerSettings {
        brokers: vec!["kafka-1:9092".into()],
        group: "audit".into(),
        topics: vec!["orders".into()],
        ..ConsumerSettings::default()
    };
    assert!(good.check().is_ok());
    let cases: Vec<(ConsumerSettings, &str, &str)> = vec![
        (
            ConsumerSettings {
                brokers: vec![],
                ..good.clone()
            },
            "brokers",
            "brokers is empty, want at least one broker as host:port",
        ),
        (
            ConsumerSettings {
                brokers: vec!["kafka://kafka-1:9092".into()],
                ..good.clone()
            },
            "brokers",
            "brokers \"kafka://kafka-1:9092\" names a scheme, want host:port",
        ),
        (
            ConsumerSettings {
                backoff_base: Duration::ZERO,
                ..good.clone()
            },
            "backoff_base",
            "backoff_base is zero, want a duration more than zero",
        ),
        (
            ConsumerSettings {
                backoff_max: Duration::ZERO,
                ..good.clone()
            },
            "backoff_max",
            "backoff_max is zero, want a duration more than zero",
        ),
        (
            ConsumerSettings {
                commit_interval: Duration::ZERO,
                ..good.clone()
            },
            "commit_interval",
            "commit_interval is zero, want a duration more than zero",
        ),
        (
            ConsumerSettings {
                group: String::new(),
                ..good.clone()
            },
            "group",
            "group is empty",
        ),
        (
            ConsumerSettings {
                topics: vec!["orders!".into()],
                ..good.clone()
            },
            "topics",
            "topics \"orders!\" holds '!'",
        ),
        (
            ConsumerSettings {
                dead_letter_topic: Some("orders".into()),
                ..good.clone()
            },
            "dead_letter_topic",
            "dead_letter_topic \"orders\" is one of the topics consumed",
        ),
        (
            ConsumerSettings {
                librdkafka: [("group.id".to_owned(), "x".to_owned())].into(),
                ..good.clone()
            },
            "librdkafka",
            "librdkafka sets \"group.id\", which humus sets",
        ),
    ];
    let setup = humus::Setup::new();
    for (settings, field, message) in cases {
        let err = settings.check().unwrap_err();
        assert_eq!(err.fields().collect::<Vec<_>>(), [field], "{err}");
        assert!(err.to_string().contains(message), "{err}");
        let app = check_kafka_consumer(&settings).unwrap_err();
        assert_eq!(app.kind(), ErrorKind::Settings, "{app}"); // exit 78
        match Consumer::start(&setup, settings, recording(&Seen::default())) {
            Err(StartError::Settings(e)) => assert_eq!(e, err),
            other => panic!("{other:?}"),
        }
    }
    // Every bad field at once.
    let all = ConsumerSettings {
        brokers: vec![],
        backoff_base: Duration::ZERO,
        commit_interval: Duration::ZERO,
        ..good.clone()
    };
    let err = all.check().unwrap_err();
    assert_eq!(
        err.fields().collect::<Vec<_>>(),
        ["brokers", "backoff_base", "commit_interval"]
    );
    assert!(
        err.to_string()
            .starts_with("invalid kafka consumer settings of group audit: "),
        "{err}"
    );
    // librdkafka's refusal of what it does not know is the settings'
    // check's, before the consumer starts.
    let unknown = ConsumerSettings {
        librdkafka: [("no.such.property".to_owned(), "1".to_owned())].into(),
        ..good
    };
    match Consumer::start(&setup, unknown, recording(&Seen::default())) {
        Err(StartError::Settings(e)) => {
            assert_eq!(e.fields().collect::<Vec<_>>(), ["librdkafka"]);
            assert!(
                e.to_string().contains(
                    r#"sets "no.such.property" to "1", which librdkafka refuses: No such configuration property"#
                ),
                "{e}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scenario_is_stripped_from_the_record_whatever_the_propagator() {
    // The service's telemetry reads no baggage (none set up): the strip
    // reads the record's baggage header itself.
    let topic = "orders";
    let cluster = Cluster::new(&[topic]);
    let producing = Telemetry::new();
    let seen = Seen::default();
    let no_telemetry = humus::Setup::new().with_faults(http_support::injector());
    let consumer = Consumer::start(
        &no_telemetry,
        cluster.settings("audit", topic),
        recording(&seen),
    )
    .unwrap();
    let cx = context(Some(&abort_at("*")));
    cluster.produce(&producing, &cx, topic, "one").await;
    eventually("the record is processed", || async {
        seen_count(&seen).await == 1
    })
    .await;
    consumer.stop().await;
    let headers = &seen.lock().unwrap()[0].2;
    assert_eq!(headers.len(), 1, "{headers:?}");
    assert!(!headers[0].contains(KEY), "{headers:?}");
    assert!(headers[0].contains("tenant=acme"), "{headers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_of_the_trust_function_is_not_recovered_and_comes_out_of_the_stop() {
    use futures_util::FutureExt as _;
    let topic = "orders";
    let cluster = Cluster::new(&[topic]);
    let telemetry = Telemetry::new();
    let seen = Seen::default();
    let asked = Arc::new(AtomicBool::new(false));
    let trust = {
        let asked = Arc::clone(&asked);
        move |_: &OwnedMessage| {
            asked.store(true, Ordering::SeqCst);
            panic!("the trust function broke")
        }
    };
    let settings = ConsumerSettings {
        trust_scenario: Some(TrustScenario::new(trust)),
        ..cluster.settings("audit", topic)
    };
    let consumer = Consumer::start(&setup(&telemetry, true), settings, recording(&seen)).unwrap();
    cluster
        .produce(&telemetry, &context(Some(&abort_at("*"))), topic, "one")
        .await;
    cluster
        .produce(&telemetry, &context(None), topic, "two")
        .await;
    eventually("the trust function is asked", || async {
        asked.load(Ordering::SeqCst)
    })
    .await;
    // Nothing after the record is processed, and its offset is never
    // committed.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopped = std::panic::AssertUnwindSafe(consumer.stop())
        .catch_unwind()
        .await;
    let payload = stopped.expect_err("the stop resumes the panic");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"the trust function broke")
    );
    assert_eq!(seen_count(&seen).await, 0);
    assert_eq!(cluster.committed("audit", topic).await, None);
}
