//! The recorder with a real `circuit::Breaker` on paused time: the
//! breaker's observer records transitions, `humus.circuit.state` reads
//! `Breaker::state` at each collection (docs/client.md,
//! "Telemetry").
//!
//! The gRPC client's attempt loop is not wired yet: `attempt` below plays
//! it, calling the breaker and the recorder as the loop will.

use std::time::Duration;

use humus::circuit::{Breaker, Config, Outcome, Policy, Rejected};
use humus::retry::Decision;
use humus::telemetry::ClientRecorder;
use humus::telemetry::names::CLIENT_SCOPE;
use humus::testing::MetricPoint;
use opentelemetry::Context;
use opentelemetry::logs::AnyValue;
use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider};

const TRANSFER: &str = "/ledger.v1.Ledger/Transfer";

/// One attempt as the client's loop records it: through the breaker (with
/// the call's context current around `allow` and `done`, so transition
/// records carry it), one span, one call counted, one decision.
fn attempt(
    recorder: &ClientRecorder,
    breaker: &Breaker,
    cx: &Context,
    status: Option<tonic::Status>,
    outcome: Outcome,
) -> Result<(), Rejected> {
    let admitted = {
        let _current = cx.clone().attach();
        breaker.allow()
    };
    let ticket = match admitted {
        Ok(ticket) => ticket,
        Err(rejected) => {
            recorder.record_rejected(cx, TRANSFER, &rejected.to_string());
            recorder.record_decision(Decision::Stopped);
            return Err(rejected);
        }
    };
    let span = recorder.start_attempt(cx, TRANSFER);
    span.end(status.as_ref());
    {
        let _current = cx.clone().attach();
        ticket.done(outcome);
    }
    recorder.record_call(outcome);
    recorder.record_decision(match status {
        None => Decision::Succeeded,
        Some(_) => Decision::Stopped,
    });
    Ok(())
}

fn value(points: &[MetricPoint], name: &str, attributes: &[(&str, &str)]) -> f64 {
    let matching: Vec<_> = points
        .iter()
        .filter(|p| p.name == name && p.has(attributes))
        .collect();
    assert_eq!(matching.len(), 1, "{name} {attributes:?}: {points:#?}");
    matching[0].value.as_f64()
}

fn states(points: &[MetricPoint]) -> [f64; 3] {
    ["closed", "open", "half-open"].map(|s| {
        value(
            points,
            "humus.circuit.state",
            &[("server.address", "ledger"), ("humus.circuit.state", s)],
        )
    })
}

fn transitions(points: &[MetricPoint], entered: &str) -> f64 {
    points
        .iter()
        .filter(|p| {
            p.name == "humus.circuit.transitions" && p.has(&[("humus.circuit.state", entered)])
        })
        .map(|p| p.value.as_f64())
        .sum()
}

#[tokio::test(start_paused = true)]
async fn a_breaker_closed_open_half_open_closed_on_paused_time() {
    let capture = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&capture.telemetry(), "ledger:443");
    let config = Config {
        window: 20,
        probes: 1,
        open_for: Duration::from_secs(10),
        probe_timeout: Duration::from_secs(5),
    };
    let breaker = Breaker::new(
        config,
        Policy::consecutive_or_half(2, 20, 1),
        recorder.transition_observer(),
    )
    .unwrap();
    let reader = breaker.clone();
    let _registration = recorder.register_breaker(move || reader.state());
    let tracer = capture.tracer_provider().tracer("caller");
    let cx = Context::new().with_span(tracer.start("caller"));
    let down = || Some(tonic::Status::unavailable("connection refused"));

    assert_eq!(states(&capture.metrics(CLIENT_SCOPE)), [1.0, 0.0, 0.0]);

    // Two failures in a row open it.
    attempt(&recorder, &breaker, &cx, down(), Outcome::Failure).unwrap();
    attempt(&recorder, &breaker, &cx, down(), Outcome::Failure).unwrap();
    let points = capture.metrics(CLIENT_SCOPE);
    assert_eq!(states(&points), [0.0, 1.0, 0.0]);
    assert_eq!(transitions(&points, "open"), 1.0);

    // Open: a call is rejected at once, with a span of its own.
    let rejected = attempt(&recorder, &breaker, &cx, None, Outcome::Success).unwrap_err();
    assert_eq!(
        rejected.to_string(),
        "circuit: call rejected: open for another 10s"
    );
    let rejected_span = capture.spans().pop().unwrap();
    assert_eq!(rejected_span.instrumentation_scope.name(), CLIENT_SCOPE);
    assert_eq!(
        rejected_span.status,
        opentelemetry::trace::Status::error("circuit: call rejected: open for another 10s")
    );

    // Once open_for has passed, the state reads half-open with no call
    // made, and no transition has happened yet.
    tokio::time::advance(Duration::from_secs(10)).await;
    let points = capture.metrics(CLIENT_SCOPE);
    assert_eq!(states(&points), [0.0, 0.0, 1.0]);
    assert_eq!(transitions(&points, "half-open"), 0.0);

    // A successful probe: the breaker goes half-open, then closed.
    attempt(&recorder, &breaker, &cx, None, Outcome::Success).unwrap();
    let points = capture.metrics(CLIENT_SCOPE);
    assert_eq!(states(&points), [1.0, 0.0, 0.0]);
    for entered in ["open", "half-open", "closed"] {
        assert_eq!(transitions(&points, entered), 1.0, "into {entered}");
    }
    let calls = |outcome| {
        value(
            &points,
            "humus.circuit.calls",
            &[("humus.circuit.outcome", outcome)],
        )
    };
    assert_eq!(
        [calls("failure"), calls("success"), calls("rejected")],
        [2.0, 1.0, 1.0]
    );

    // One log record per transition, in the caller's context, with the
    // counts of the state left.
    let logs = capture.logs();
    let moves: Vec<_> = logs
        .iter()
        .map(|log| {
            let attribute = |key: &str| {
                log.record
                    .attributes_iter()
                    .find(|(k, _)| k.as_str() == key)
                    .map(|(_, v)| v.clone())
            };
            (
                attribute("humus.circuit.previous_state"),
                attribute("humus.circuit.state"),
                attribute("humus.circuit.consecutive_failures"),
                attribute("humus.circuit.consecutive_successes"),
            )
        })
        .collect();
    let s = |v: &str| Some(AnyValue::from(v.to_owned()));
    let n = |v: i64| Some(AnyValue::from(v));
    assert_eq!(
        moves,
        [
            (s("closed"), s("open"), n(2), n(0)),
            (s("open"), s("half-open"), n(0), n(0)),
            (s("half-open"), s("closed"), n(0), n(1)),
        ]
    );
    let caller = cx.span().span_context().span_id();
    for log in &logs {
        assert_eq!(log.instrumentation.name(), CLIENT_SCOPE);
        assert_eq!(log.record.trace_context().map(|t| t.span_id), Some(caller));
    }
}

#[tokio::test(start_paused = true)]
async fn two_real_breakers_of_one_address_add_up_until_one_client_is_dropped() {
    let capture = humus::testing::Telemetry::new();
    let telemetry = capture.telemetry();
    let config = Config {
        window: 20,
        probes: 1,
        open_for: Duration::from_secs(10),
        probe_timeout: Duration::from_secs(5),
    };
    // Two clients of one address, each with its recorder, breaker and
    // registration, as each client holds them.
    let client = || {
        let recorder = ClientRecorder::new(&telemetry, "ledger:443");
        let breaker = Breaker::new(
            config,
            Policy::consecutive(1),
            recorder.transition_observer(),
        )
        .unwrap();
        let reader = breaker.clone();
        let registration = recorder.register_breaker(move || reader.state());
        (recorder, breaker, registration)
    };
    let ledger = client();
    let payments = client();
    let cx = Context::new();
    attempt(
        &payments.0,
        &payments.1,
        &cx,
        Some(tonic::Status::unavailable("down")),
        Outcome::Failure,
    )
    .unwrap();
    assert_eq!(states(&capture.metrics(CLIENT_SCOPE)), [1.0, 1.0, 0.0]);

    drop(payments);
    assert_eq!(states(&capture.metrics(CLIENT_SCOPE)), [1.0, 0.0, 0.0]);
    drop(ledger);
    assert!(
        capture
            .metrics(CLIENT_SCOPE)
            .iter()
            .all(|p| p.name != "humus.circuit.state")
    );
}
