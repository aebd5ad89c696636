//! Nothing reaches OpenTelemetry's globals: a process that sets recording
//! global providers sees none of a client's spans or metrics, and its
//! global propagator writes nothing (seed 000, "Telemetry").
//!
//! One test in its own binary, since the globals are the process's.

use std::sync::{Arc, Weak};
use std::time::Duration;

use humus::circuit::{Counts, Outcome, State, Transition};
use humus::retry::Decision;
use humus::telemetry::{ClientRecorder, Telemetry};
use opentelemetry::Context;
use opentelemetry::baggage::BaggageExt;
use opentelemetry::global;
use opentelemetry::propagation::TextMapCompositePropagator;
use opentelemetry::trace::{TraceContextExt, Tracer};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Temporality,
};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tonic::metadata::MetadataMap;

#[derive(Debug)]
struct Shared(Arc<ManualReader>);

impl MetricReader for Shared {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline)
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

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
    let spans = InMemorySpanExporter::default();
    global::set_tracer_provider(
        SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build(),
    );
    let reader = Arc::new(ManualReader::builder().build());
    global::set_meter_provider(
        SdkMeterProvider::builder()
            .with_reader(Shared(Arc::clone(&reader)))
            .build(),
    );
    global::set_text_map_propagator(TextMapCompositePropagator::new(vec![
        Box::new(TraceContextPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ]));
    // The globals record: a span of their own is seen.
    global::tracer("test").in_span("global", |_| {});
    assert_eq!(spans.get_finished_spans().unwrap().len(), 1);
    spans.reset();

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

    assert!(spans.get_finished_spans().unwrap().is_empty());
    let mut global_metrics = ResourceMetrics::default();
    reader.collect(&mut global_metrics).unwrap();
    let scopes: Vec<_> = global_metrics
        .scope_metrics()
        .map(|s| s.scope().name().to_owned())
        .collect();
    assert!(
        scopes.is_empty(),
        "the global meter provider saw {scopes:?}"
    );
}
