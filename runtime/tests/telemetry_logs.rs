//! One log record per breaker transition, through the logger provider
//! (docs/client.md, "Telemetry").

mod lines_support;

use humus::circuit::{Counts, State, Transition};
use humus::telemetry::names::CLIENT_SCOPE;
use humus::telemetry::{ClientRecorder, Telemetry};
use lines_support::Lines;
use opentelemetry::logs::{AnyValue, Severity};
use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Context, Key};
use opentelemetry_sdk::logs::SdkLogRecord;

fn attribute<'a>(record: &'a SdkLogRecord, key: &str) -> Option<&'a AnyValue> {
    record
        .attributes_iter()
        .find(|(k, _)| k.as_str() == key)
        .map(|(_, v)| v)
}

fn keys(record: &SdkLogRecord) -> Vec<&str> {
    let mut keys: Vec<_> = record
        .attributes_iter()
        .map(|(k, _)| Key::as_str(k))
        .collect();
    keys.sort();
    keys
}

#[test]
fn a_transition_is_one_record_with_the_counts_of_the_state_left() {
    let capture = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&capture.telemetry(), "ledger:443");
    let tracer = capture.tracer_provider().tracer("caller");
    let cx = Context::new().with_span(tracer.start("caller"));
    let counts = Counts {
        successes: 15,
        failures: 5,
        consecutive_successes: 0,
        consecutive_failures: 5,
        timed_out: 0,
    };
    recorder.record_transition(
        &cx,
        &Transition {
            from: State::Closed,
            to: State::Open,
            generation: 1,
            counts,
        },
    );

    let logs = capture.logs();
    assert_eq!(logs.len(), 1);
    let log = &logs[0];
    assert_eq!(log.instrumentation.name(), CLIENT_SCOPE);
    let record = &log.record;
    assert_eq!(record.event_name(), Some("humus.circuit.transition"));
    assert_eq!(record.severity_number(), Some(Severity::Warn));
    assert_eq!(record.severity_text(), Some("WARN"));
    assert_eq!(
        record.body(),
        Some(&AnyValue::from(
            "circuit breaker changed from closed to open"
        ))
    );
    assert!(record.timestamp().is_some());
    let expected: [(&str, AnyValue); 9] = [
        ("server.address", "ledger".into()),
        ("server.port", 443_i64.into()),
        ("humus.circuit.state", "open".into()),
        ("humus.circuit.previous_state", "closed".into()),
        ("humus.circuit.successes", 15_i64.into()),
        ("humus.circuit.failures", 5_i64.into()),
        ("humus.circuit.consecutive_successes", 0_i64.into()),
        ("humus.circuit.consecutive_failures", 5_i64.into()),
        ("humus.circuit.timed_out", 0_i64.into()),
    ];
    for (key, value) in &expected {
        assert_eq!(attribute(record, key), Some(value), "{key}");
    }
    let mut expected_keys: Vec<_> = expected.iter().map(|(k, _)| *k).collect();
    expected_keys.sort();
    assert_eq!(keys(record), expected_keys);

    // In the context of the call that made it.
    let trace = record.trace_context().expect("a trace context");
    assert_eq!(trace.trace_id, cx.span().span_context().trace_id());
    assert_eq!(trace.span_id, cx.span().span_context().span_id());
}

#[test]
fn the_observer_logs_in_the_current_context_at_info_but_for_open() {
    let capture = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&capture.telemetry(), "ledger:443");
    let observe = recorder.transition_observer();
    let tracer = capture.tracer_provider().tracer("caller");
    let cx = Context::new().with_span(tracer.start("caller"));
    {
        let _guard = cx.clone().attach();
        observe(&Transition {
            from: State::Open,
            to: State::HalfOpen,
            generation: 2,
            counts: Counts::default(),
        });
    }
    observe(&Transition {
        from: State::HalfOpen,
        to: State::Closed,
        generation: 3,
        counts: Counts {
            successes: 3,
            consecutive_successes: 3,
            timed_out: 1,
            ..Counts::default()
        },
    });

    let logs = capture.logs();
    assert_eq!(logs.len(), 2);
    let (half_open, closed) = (&logs[0].record, &logs[1].record);
    assert_eq!(half_open.severity_number(), Some(Severity::Info));
    assert_eq!(
        attribute(half_open, "humus.circuit.previous_state"),
        Some(&AnyValue::from("open"))
    );
    assert_eq!(
        half_open.trace_context().map(|t| t.span_id),
        Some(cx.span().span_context().span_id())
    );
    assert_eq!(closed.severity_number(), Some(Severity::Info));
    assert_eq!(
        attribute(closed, "humus.circuit.state"),
        Some(&AnyValue::from("closed"))
    );
    assert_eq!(
        attribute(closed, "humus.circuit.timed_out"),
        Some(&AnyValue::from(1_i64))
    );
    assert!(closed.trace_context().is_none(), "no span was current");

    // The transitions are counted too.
    let points = capture.metrics(CLIENT_SCOPE);
    assert_eq!(
        points
            .iter()
            .filter(|p| p.name == "humus.circuit.transitions")
            .count(),
        2
    );
}

#[test]
fn nothing_else_is_logged() {
    let capture = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&capture.telemetry(), "ledger:443");
    let cx = Context::new();
    let attempt = recorder.start_attempt(&cx, "/ledger.v1.Ledger/Transfer");
    attempt.end(Some(&tonic::Status::internal("boom")));
    recorder.record_rejected(&cx, "/ledger.v1.Ledger/Transfer", "rejected");
    recorder.record_call(humus::circuit::Outcome::Failure);
    recorder.record_decision(humus::retry::Decision::Stopped);
    assert!(capture.logs().is_empty());
}

#[test]
fn without_a_logger_provider_a_transition_is_still_counted() {
    let capture = humus::testing::Telemetry::new();
    let telemetry = Telemetry::builder()
        .meter_provider(capture.meter_provider().clone())
        .build();
    let recorder = ClientRecorder::new(&telemetry, "ledger:443");
    recorder.record_transition(&Context::new(), &opened(Counts::default()));
    assert!(capture.logs().is_empty());
    assert!(
        capture
            .metrics(CLIENT_SCOPE)
            .iter()
            .any(|p| p.name == "humus.circuit.transitions")
    );
}

/// The breaker's first opening, with the `counts` of its closed state.
fn opened(counts: Counts) -> Transition {
    Transition {
        from: State::Closed,
        to: State::Open,
        generation: 1,
        counts,
    }
}

#[test]
fn line_logs_write_a_transition_as_one_plain_line() {
    let out = Lines::default();
    let telemetry = Telemetry::builder()
        .logger_provider(humus::telemetry::LineLogs::to(out.clone()))
        .build();
    let recorder = ClientRecorder::new(&telemetry, "ledger:443");
    recorder.record_transition(
        &Context::new(),
        &opened(Counts {
            failures: 5,
            consecutive_failures: 5,
            ..Counts::default()
        }),
    );
    assert_eq!(
        out.written(),
        "WARN humus::client: circuit breaker changed from closed to open \
         server.address=ledger server.port=443 humus.circuit.state=open \
         humus.circuit.previous_state=closed humus.circuit.successes=0 humus.circuit.failures=5 \
         humus.circuit.consecutive_successes=0 humus.circuit.consecutive_failures=5 \
         humus.circuit.timed_out=0\n"
    );
}
