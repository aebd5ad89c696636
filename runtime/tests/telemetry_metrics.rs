//! humus's four instruments, read through a manual reader (docs/client.md,
//! "Telemetry").
//!
//! The gRPC client's attempt loop is not wired yet: these tests script what
//! the loop will record, through the recorder.

use std::sync::{Arc, Mutex};

use humus::circuit::{Counts, Outcome, State, Transition};
use humus::retry::Decision;
use humus::telemetry::ClientRecorder;
use humus::telemetry::names::CLIENT_SCOPE;
use humus::testing::MetricPoint;
use opentelemetry::Context;

/// The value of the one point of `name` with `attributes`, if any.
fn value(points: &[MetricPoint], name: &str, attributes: &[(&str, &str)]) -> Option<f64> {
    let matching: Vec<_> = points
        .iter()
        .filter(|p| p.name == name && p.has(attributes))
        .collect();
    assert!(matching.len() <= 1, "several points match: {matching:#?}");
    matching.first().map(|p| p.value.as_f64())
}

fn ledger<'a>(attributes: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut all = vec![("server.address", "ledger"), ("server.port", "443")];
    all.extend_from_slice(attributes);
    all
}

fn state(points: &[MetricPoint], addr: &str, state: &str) -> Option<f64> {
    value(
        points,
        "humus.circuit.state",
        &[("server.address", addr), ("humus.circuit.state", state)],
    )
}

fn transition(from: State, to: State, generation: u64, counts: Counts) -> Transition {
    Transition {
        from,
        to,
        generation,
        counts,
    }
}

/// A breaker's state as the test scripts it.
fn scripted(
    initial: State,
) -> (
    Arc<Mutex<State>>,
    impl Fn() -> State + Send + Sync + 'static,
) {
    let shared = Arc::new(Mutex::new(initial));
    let read = Arc::clone(&shared);
    (shared, move || *read.lock().unwrap())
}

#[tokio::test(start_paused = true)]
async fn each_instrument_after_closed_open_half_open_closed() {
    let capture = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&capture.telemetry(), "ledger:443");
    let (breaker, read) = scripted(State::Closed);
    let _registration = recorder.register_breaker(read);
    let cx = Context::new();

    // Closed: one call that fails three attempts and runs out of them.
    for decision in [Decision::Retried, Decision::Retried, Decision::Exhausted] {
        recorder.record_call(Outcome::Failure);
        recorder.record_decision(decision);
    }
    // A call whose answer says nothing of the dependency.
    recorder.record_call(Outcome::Ignored);
    recorder.record_decision(Decision::Stopped);
    let points = capture.metrics(CLIENT_SCOPE);
    assert_eq!(state(&points, "ledger", "closed"), Some(1.0));
    assert_eq!(state(&points, "ledger", "open"), Some(0.0));
    assert_eq!(state(&points, "ledger", "half-open"), Some(0.0));
    assert_eq!(
        value(&points, "humus.circuit.transitions", &[]),
        None,
        "no transition yet"
    );

    // Open: the failures trip it; two calls are rejected.
    recorder.record_call(Outcome::Failure);
    *breaker.lock().unwrap() = State::Open;
    let left = Counts {
        failures: 4,
        consecutive_failures: 4,
        ..Counts::default()
    };
    recorder.record_transition(&cx, &transition(State::Closed, State::Open, 1, left));
    recorder.record_decision(Decision::Stopped);
    for _ in 0..2 {
        recorder.record_rejected(&cx, "/ledger.v1.Ledger/Transfer", "circuit: call rejected");
        recorder.record_decision(Decision::Stopped);
    }
    let points = capture.metrics(CLIENT_SCOPE);
    assert_eq!(state(&points, "ledger", "closed"), Some(0.0));
    assert_eq!(state(&points, "ledger", "open"), Some(1.0));
    assert_eq!(
        value(
            &points,
            "humus.circuit.transitions",
            &ledger(&[("humus.circuit.state", "open")])
        ),
        Some(1.0)
    );

    // Half-open, read at the collection with no call made.
    *breaker.lock().unwrap() = State::HalfOpen;
    recorder.record_transition(
        &cx,
        &transition(State::Open, State::HalfOpen, 2, Counts::default()),
    );
    let points = capture.metrics(CLIENT_SCOPE);
    assert_eq!(state(&points, "ledger", "open"), Some(0.0));
    assert_eq!(state(&points, "ledger", "half-open"), Some(1.0));

    // A probe succeeds and closes it.
    recorder.record_call(Outcome::Success);
    *breaker.lock().unwrap() = State::Closed;
    let left = Counts {
        successes: 1,
        consecutive_successes: 1,
        ..Counts::default()
    };
    recorder.record_transition(&cx, &transition(State::HalfOpen, State::Closed, 3, left));
    recorder.record_decision(Decision::Succeeded);
    // A retry the budget refused.
    recorder.record_call(Outcome::Failure);
    recorder.record_decision(Decision::Throttled);

    let points = capture.metrics(CLIENT_SCOPE);
    assert_eq!(state(&points, "ledger", "closed"), Some(1.0));
    assert_eq!(state(&points, "ledger", "open"), Some(0.0));
    assert_eq!(state(&points, "ledger", "half-open"), Some(0.0));
    for entered in ["open", "half-open", "closed"] {
        assert_eq!(
            value(
                &points,
                "humus.circuit.transitions",
                &ledger(&[("humus.circuit.state", entered)])
            ),
            Some(1.0),
            "transitions into {entered}"
        );
    }
    for (outcome, count) in [
        ("failure", 5.0),
        ("ignored", 1.0),
        ("success", 1.0),
        ("rejected", 2.0),
    ] {
        assert_eq!(
            value(
                &points,
                "humus.circuit.calls",
                &ledger(&[("humus.circuit.outcome", outcome)])
            ),
            Some(count),
            "calls {outcome}"
        );
    }
    for (decision, count) in [
        ("retried", 2.0),
        ("exhausted", 1.0),
        ("stopped", 4.0),
        ("succeeded", 1.0),
        ("throttled", 1.0),
    ] {
        assert_eq!(
            value(
                &points,
                "humus.retry.decisions",
                &ledger(&[("humus.retry.decision", decision)])
            ),
            Some(count),
            "decisions {decision}"
        );
    }
    assert_eq!(
        value(
            &points,
            "humus.retry.decisions",
            &[("humus.retry.decision", "expired")]
        ),
        None
    );

    // Every point carries server.address, server.port and its own
    // attribute, and nothing per call.
    for point in &points {
        let keys: Vec<_> = point.attributes.iter().map(|kv| kv.key.as_str()).collect();
        let own = match point.name.as_str() {
            "humus.circuit.state" | "humus.circuit.transitions" => "humus.circuit.state",
            "humus.circuit.calls" => "humus.circuit.outcome",
            "humus.retry.decisions" => "humus.retry.decision",
            other => panic!("unexpected instrument {other}"),
        };
        let mut expected = vec![own, "server.address", "server.port"];
        expected.sort();
        assert_eq!(keys, expected, "{point:?}");
    }
    let units: Vec<_> = [
        "humus.circuit.state",
        "humus.circuit.transitions",
        "humus.circuit.calls",
        "humus.retry.decisions",
    ]
    .iter()
    .map(|name| {
        points
            .iter()
            .find(|p| p.name == *name)
            .map(|p| p.unit.as_str())
            .unwrap()
    })
    .collect();
    assert_eq!(units, ["{breaker}", "{transition}", "{call}", "{decision}"]);
}

#[test]
fn two_clients_of_one_address_add_up_and_a_dropped_one_stops_reporting() {
    let capture = humus::testing::Telemetry::new();
    let telemetry = capture.telemetry();
    let ledger = ClientRecorder::new(&telemetry, "ledger:443");
    let payments = ClientRecorder::new(&telemetry.clone(), "ledger:443");
    let other = ClientRecorder::new(&telemetry, "carts:9090");
    let (_, closed) = scripted(State::Closed);
    let (_, open) = scripted(State::Open);
    let (_, half_open) = scripted(State::HalfOpen);
    let first = ledger.register_breaker(closed);
    let second = payments.register_breaker(open);
    let third = other.register_breaker(half_open);

    let points = capture.metrics(CLIENT_SCOPE);
    assert_eq!(state(&points, "ledger", "closed"), Some(1.0));
    assert_eq!(state(&points, "ledger", "open"), Some(1.0));
    assert_eq!(state(&points, "ledger", "half-open"), Some(0.0));
    assert_eq!(state(&points, "carts", "half-open"), Some(1.0));
    assert_eq!(state(&points, "carts", "closed"), Some(0.0));
    assert!(
        points
            .iter()
            .filter(|p| p.has(&[("server.address", "carts")]))
            .all(|p| p.has(&[("server.port", "9090")]))
    );

    drop(second);
    let points = capture.metrics(CLIENT_SCOPE);
    assert_eq!(state(&points, "ledger", "closed"), Some(1.0));
    assert_eq!(state(&points, "ledger", "open"), Some(0.0));

    drop(first);
    let points = capture.metrics(CLIENT_SCOPE);
    assert!(
        points
            .iter()
            .all(|p| !p.has(&[("server.address", "ledger")])),
        "{points:#?}"
    );
    assert_eq!(state(&points, "carts", "half-open"), Some(1.0));
    drop(third);
    assert!(capture.metrics(CLIENT_SCOPE).is_empty());
}

#[test]
fn a_registration_outlives_nothing_it_does_not_own() {
    // The state reader is dropped with its registration, so a reader that
    // holds the client's breaker never keeps it alive past the client.
    let capture = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&capture.telemetry(), "ledger:443");
    let held = Arc::new(());
    let in_reader = Arc::clone(&held);
    let registration = recorder.register_breaker(move || {
        let _ = &in_reader;
        State::Closed
    });
    assert_eq!(Arc::strong_count(&held), 2);
    drop(registration);
    assert_eq!(Arc::strong_count(&held), 1);
    drop(recorder);
    let _ = capture.metrics(CLIENT_SCOPE);
}
