//! Nothing reaches OpenTelemetry's globals: a process that sets recording
//! global providers sees none of a client's spans or metrics, and its
//! global propagator writes nothing (docs/client.md, "Telemetry").
//!
//! One test in its own binary, since the globals are the process's.

use humus::circuit::{Counts, Outcome, State, Transition};
use humus::retry::Decision;
use humus::telemetry::{ClientRecorder, Telemetry};
use opentelemetry::Context;
use opentelemetry::baggage::BaggageExt;
use opentelemetry::global;
use opentelemetry::propagation::TextMapCompositePropagator;
use opentelemetry::trace::{TraceContextExt, Tracer};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use tonic::metadata::MetadataMap;

fn record_everything(telemetry: &Telemetry, cx: &Context) -> MetadataMap {
    let recorder = ClientRecorder::new(telemetry, "ledger:443");
    let _registration = recorder.register_breaker(|| State::Open);
    let attempt = recorder.start_attempt(cx, "/ledger.v1.Ledger/Transfer");
    let mut metadata = MetadataMap::new();
    attempt.inject(&mut metadata);
    attempt.end(Some(&tonic::Status::unavailable("down")));
    recorder.record_call(Outcome::Failure);
    recorder.record_decision(Decision::Stopped);
    recorder.record_transition(
        cx,
        &Transition {
            from: State::Closed,
            to: State::Open,
            generation: 1,
            counts: Counts::default(),
        },
    );
    recorder.record_rejected(cx, "/ledger.v1.Ledger/Transfer", "rejected");
    recorder.transition_observer()(&Transition {
        from: State::Open,
        to: State::HalfOpen,
        generation: 2,
        counts: Counts::default(),
    });
    metadata
}

#[test]
fn recording_global_providers_see_nothing_of_the_client() {
    // Recording providers installed as OpenTelemetry's globals.
    let globals = humus::testing::Telemetry::new();
    global::set_tracer_provider(globals.tracer_provider().clone());
    global::set_meter_provider(globals.meter_provider().clone());
    global::set_text_map_propagator(TextMapCompositePropagator::new(vec![
        Box::new(TraceContextPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ]));
    // The globals record: a span of their own is seen.
    global::tracer("test").in_span("global", |_| {});
    assert_eq!(globals.spans().len(), 1);
    globals.reset();

    // A caller context with a span of the global provider and baggage.
    let caller = global::tracer("caller").start("caller");
    let cx = Context::new()
        .with_span(caller)
        .with_baggage([opentelemetry::KeyValue::new("tenant", "acme")]);

    // The default telemetry: no-op, whatever the globals are.
    let metadata = record_everything(&Telemetry::default(), &cx);
    assert!(metadata.is_empty(), "{metadata:?}");

    // A recording telemetry of its own: it sees everything, the globals nothing.
    let capture = humus::testing::Telemetry::new();
    let metadata = record_everything(&capture.telemetry(), &cx);
    assert!(metadata.get("traceparent").is_some());
    assert_eq!(capture.spans().len(), 2);
    assert_eq!(capture.logs().len(), 2);
    assert!(
        !capture
            .metrics(humus::telemetry::names::CLIENT_SCOPE)
            .is_empty()
    );
    assert!(
        !capture
            .metrics(humus::telemetry::names::RPC_SCOPE)
            .is_empty()
    );

    assert!(globals.spans().is_empty());
    let scopes = globals.metric_scopes();
    assert!(
        scopes.is_empty(),
        "the global meter provider saw {scopes:?}"
    );
}
