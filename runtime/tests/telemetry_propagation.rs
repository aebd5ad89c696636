//! Each attempt carries its span's trace context and the call's baggage in
//! its metadata, as a server extracts them (docs/client.md, "Telemetry").

use humus::telemetry::names::RPC_SCOPE;
use humus::telemetry::{ClientRecorder, MetadataExtractor, Telemetry};
use opentelemetry::baggage::BaggageExt;
use opentelemetry::propagation::TextMapCompositePropagator;
use opentelemetry::trace::{SpanKind, TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use tonic::metadata::MetadataMap;

const TRANSFER: &str = "/ledger.v1.Ledger/Transfer";

#[test]
fn a_server_that_extracts_the_metadata_joins_the_trace_and_sees_the_baggage() {
    let client = humus::testing::Telemetry::new();
    let server = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&client.telemetry(), "ledger:443");
    let caller = client.tracer_provider().tracer("caller").start("caller");
    let cx = Context::new()
        .with_span(caller)
        .with_baggage([KeyValue::new("tenant", "acme")]);

    let attempt = recorder.start_attempt(&cx, TRANSFER);
    let mut request = tonic::Request::new(());
    attempt.inject(request.metadata_mut());
    let attempt_span = attempt.context().span().span_context().clone();
    assert!(attempt_span.is_valid());
    assert!(request.metadata().get("traceparent").is_some());
    assert_eq!(request.metadata().get("baggage").unwrap(), "tenant=acme");

    // The server reads the metadata with its own propagator.
    let extracted = server
        .telemetry()
        .propagator()
        .extract_with_context(&Context::new(), &MetadataExtractor(request.metadata()));
    let remote = extracted.span().span_context().clone();
    assert!(remote.is_remote());
    assert_eq!(remote.trace_id(), attempt_span.trace_id());
    assert_eq!(remote.span_id(), attempt_span.span_id());
    assert_eq!(
        extracted.baggage().get("tenant").map(|v| v.as_str()),
        Some("acme")
    );

    // Its server span is a child of the attempt's client span.
    let tracer = server.tracer_provider().tracer("server");
    let mut server_span = tracer
        .span_builder("ledger.v1.Ledger/Transfer")
        .with_kind(SpanKind::Server)
        .start_with_context(&tracer, &extracted);
    opentelemetry::trace::Span::end(&mut server_span);
    attempt.end(None);

    let server_spans = server.spans();
    assert_eq!(server_spans.len(), 1);
    assert_eq!(server_spans[0].parent_span_id, attempt_span.span_id());
    assert_eq!(
        server_spans[0].span_context.trace_id(),
        attempt_span.trace_id()
    );
    let client_spans = client.spans();
    assert_eq!(client_spans.len(), 1);
    assert_eq!(client_spans[0].instrumentation_scope.name(), RPC_SCOPE);
    assert_eq!(
        client_spans[0].span_context.span_id(),
        attempt_span.span_id()
    );
}

#[test]
fn each_attempt_writes_its_own_span_over_what_the_metadata_held() {
    let client = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&client.telemetry(), "ledger:443");
    let mut metadata = MetadataMap::new();
    let first = recorder.start_attempt(&Context::new(), TRANSFER);
    first.inject(&mut metadata);
    let second = recorder.start_attempt(&Context::new(), TRANSFER);
    second.inject(&mut metadata);
    let traceparent = metadata.get("traceparent").unwrap().to_str().unwrap();
    let span_id = second.context().span().span_context().span_id();
    assert!(traceparent.contains(&span_id.to_string()), "{traceparent}");
    assert_eq!(metadata.get_all("traceparent").iter().count(), 1);
}

#[test]
fn the_default_propagator_writes_nothing() {
    let client = humus::testing::Telemetry::new();
    let caller = client.tracer_provider().tracer("caller").start("caller");
    let cx = Context::new()
        .with_span(caller)
        .with_baggage([KeyValue::new("tenant", "acme")]);
    let recorder = ClientRecorder::new(&Telemetry::default(), "ledger:443");
    let mut metadata = MetadataMap::new();
    recorder.start_attempt(&cx, TRANSFER).inject(&mut metadata);
    assert!(metadata.is_empty());
}

#[test]
fn a_propagator_without_a_tracer_provider_passes_the_callers_context_on() {
    let client = humus::testing::Telemetry::new();
    let caller = client.tracer_provider().tracer("caller").start("caller");
    let cx = Context::new()
        .with_span(caller)
        .with_baggage([KeyValue::new("tenant", "acme")]);
    let telemetry = Telemetry::builder()
        .propagator(TextMapCompositePropagator::new(vec![
            Box::new(TraceContextPropagator::new()),
            Box::new(BaggagePropagator::new()),
        ]))
        .build();
    let recorder = ClientRecorder::new(&telemetry, "ledger:443");
    let mut metadata = MetadataMap::new();
    recorder.start_attempt(&cx, TRANSFER).inject(&mut metadata);
    let extracted = telemetry
        .propagator()
        .extract_with_context(&Context::new(), &MetadataExtractor(&metadata));
    assert_eq!(
        extracted.span().span_context().span_id(),
        cx.span().span_context().span_id()
    );
    assert_eq!(
        extracted.baggage().get("tenant").map(|v| v.as_str()),
        Some("acme")
    );
}

#[test]
fn the_shared_propagator_is_the_same_propagator() {
    let telemetry = humus::testing::Telemetry::new().telemetry();
    let mut fields: Vec<_> = telemetry.propagator().fields().collect();
    let shared = telemetry.shared_propagator();
    let mut shared_fields: Vec<_> = shared.fields().collect();
    fields.sort();
    shared_fields.sort();
    assert_eq!(shared_fields, fields);
    assert_eq!(fields, ["baggage", "traceparent", "tracestate"]);
    assert_eq!(Telemetry::default().propagator().fields().count(), 0);
}

#[test]
fn a_stripped_context_sends_its_baggage_with_the_attempts_span() {
    let client = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&client.telemetry(), "ledger:443");
    let cx = Context::new().with_baggage([
        KeyValue::new("tenant", "acme"),
        KeyValue::new("scenario", "abort"),
    ]);
    let attempt = recorder.start_attempt(&cx, TRANSFER);
    let attempt_span = attempt.context().span().span_context().span_id();
    // What failure injection's strip returns: the attempt's context with
    // less baggage; and a context with no span at all.
    let stripped = attempt
        .context()
        .with_baggage([KeyValue::new("tenant", "acme")]);
    for sent in [
        stripped,
        Context::new().with_baggage([KeyValue::new("tenant", "acme")]),
    ] {
        let mut metadata = MetadataMap::new();
        attempt.inject_with_baggage(&sent, &mut metadata);
        let extracted = client
            .telemetry()
            .propagator()
            .extract_with_context(&Context::new(), &MetadataExtractor(&metadata));
        assert_eq!(extracted.span().span_context().span_id(), attempt_span);
        assert_eq!(metadata.get("baggage").unwrap(), "tenant=acme");
    }
    // inject sends the call's baggage as it was.
    let mut metadata = MetadataMap::new();
    attempt.inject(&mut metadata);
    let baggage = metadata.get("baggage").unwrap().to_str().unwrap();
    assert!(baggage.contains("scenario=abort"), "{baggage}");
}
