//! Attempt spans, rejected-call spans and `rpc.client.call.duration`, read
//! through the SDK's in-memory exporters (docs/client.md, "Telemetry").
//!
//! The gRPC client's attempt loop is not wired yet: these tests call the
//! recorder as the loop will, once per attempt.

use std::time::Duration;

use humus::telemetry::names::{CLIENT_SCOPE, RPC_SCOPE};
use humus::telemetry::{ClientRecorder, Telemetry};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Context, Value};
use opentelemetry_sdk::trace::SpanData;

const TRANSFER: &str = "/ledger.v1.Ledger/Transfer";

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn text(span: &SpanData, key: &str) -> Option<String> {
    attr(span, key).map(|v| v.as_str().into_owned())
}

/// A caller's span, as the server span of the RPC a handler serves.
fn caller(capture: &humus::testing::Telemetry) -> Context {
    let tracer = capture.tracer_provider().tracer("caller");
    Context::new().with_span(tracer.start("caller"))
}

#[tokio::test(start_paused = true)]
async fn a_retried_call_is_one_client_span_per_attempt_siblings_under_the_caller() {
    let capture = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&capture.telemetry(), "ledger:443");
    let cx = caller(&capture);

    let first = recorder.start_attempt(&cx, TRANSFER);
    tokio::time::advance(Duration::from_millis(250)).await;
    first.end(Some(&tonic::Status::unavailable("connection refused")));
    let second = recorder.start_attempt(&cx, TRANSFER);
    tokio::time::advance(Duration::from_millis(50)).await;
    second.end(None);

    let caller_span = cx.span().span_context().clone();
    let spans = capture.spans();
    assert_eq!(spans.len(), 2, "{spans:#?}");
    for span in &spans {
        assert_eq!(span.instrumentation_scope.name(), RPC_SCOPE);
        assert_eq!(span.name, "ledger.v1.Ledger/Transfer");
        assert_eq!(span.span_kind, SpanKind::Client);
        assert_eq!(span.span_context.trace_id(), caller_span.trace_id());
        assert_eq!(span.parent_span_id, caller_span.span_id());
        assert_eq!(text(span, "rpc.system.name").as_deref(), Some("grpc"));
        assert_eq!(
            text(span, "rpc.method").as_deref(),
            Some("ledger.v1.Ledger/Transfer")
        );
        assert_eq!(text(span, "server.address").as_deref(), Some("ledger"));
        assert_eq!(attr(span, "server.port"), Some(&Value::I64(443)));
    }
    assert_ne!(
        spans[0].span_context.span_id(),
        spans[1].span_context.span_id()
    );

    let (failed, succeeded) = (&spans[0], &spans[1]);
    assert_eq!(
        text(failed, "rpc.response.status_code").as_deref(),
        Some("UNAVAILABLE")
    );
    assert_eq!(text(failed, "error.type").as_deref(), Some("UNAVAILABLE"));
    assert_eq!(failed.status, Status::error("connection refused"));
    assert_eq!(
        text(succeeded, "rpc.response.status_code").as_deref(),
        Some("OK")
    );
    assert_eq!(text(succeeded, "error.type"), None);
    assert_eq!(succeeded.status, Status::Unset);

    // rpc.client.call.duration: one point per status, on paused time exactly.
    let points = capture.metrics(RPC_SCOPE);
    let durations: Vec<_> = points
        .iter()
        .filter(|p| p.name == "rpc.client.call.duration")
        .collect();
    assert_eq!(durations.len(), 2, "{durations:#?}");
    for point in &durations {
        assert_eq!(point.unit, "s");
        assert!(point.has(&[
            ("rpc.system.name", "grpc"),
            ("rpc.method", "ledger.v1.Ledger/Transfer"),
            ("server.address", "ledger"),
            ("server.port", "443"),
        ]));
    }
    let failed = durations
        .iter()
        .find(|p| p.has(&[("rpc.response.status_code", "UNAVAILABLE")]))
        .unwrap();
    assert!(failed.has(&[("error.type", "UNAVAILABLE")]));
    let humus::testing::PointValue::Histogram(h) = &failed.value else {
        panic!("not a histogram: {failed:?}");
    };
    assert_eq!((h.count, h.sum), (1, 0.25));
    let succeeded = durations
        .iter()
        .find(|p| p.has(&[("rpc.response.status_code", "OK")]))
        .unwrap();
    assert!(succeeded.attribute("error.type").is_none());
    let humus::testing::PointValue::Histogram(h) = &succeeded.value else {
        panic!("not a histogram: {succeeded:?}");
    };
    assert_eq!((h.count, h.sum), (1, 0.05));
}

#[tokio::test(start_paused = true)]
async fn every_code_but_ok_is_an_error_not_found_included() {
    let capture = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&capture.telemetry(), "ledger:443");
    recorder
        .start_attempt(&Context::new(), TRANSFER)
        .end(Some(&tonic::Status::not_found("no such account")));
    recorder
        .start_attempt(&Context::new(), TRANSFER)
        .end(Some(&tonic::Status::ok("")));
    let spans = capture.spans();
    assert_eq!(spans[0].status, Status::error("no such account"));
    assert_eq!(text(&spans[0], "error.type").as_deref(), Some("NOT_FOUND"));
    assert_eq!(spans[1].status, Status::Unset);
    assert_eq!(text(&spans[1], "error.type"), None);
}

#[tokio::test(start_paused = true)]
async fn a_stream_is_one_span_from_its_open_to_its_end() {
    let capture = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&capture.telemetry(), "ledger:443");
    let attempt = recorder.start_attempt(&Context::new(), "/ledger.v1.Ledger/Watch");
    tokio::time::advance(Duration::from_secs(90)).await;
    assert!(capture.spans().is_empty(), "the span ends with the stream");
    attempt.end(None);
    let spans = capture.spans();
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].name, "ledger.v1.Ledger/Watch");
    let point = capture
        .metrics(RPC_SCOPE)
        .into_iter()
        .find(|p| p.name == "rpc.client.call.duration")
        .unwrap();
    let humus::testing::PointValue::Histogram(h) = point.value else {
        panic!("not a histogram");
    };
    assert_eq!(h.sum, 90.0);
}

#[tokio::test(start_paused = true)]
async fn an_attempt_dropped_before_its_end_is_cancelled() {
    let capture = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&capture.telemetry(), "ledger:443");
    drop(recorder.start_attempt(&Context::new(), TRANSFER));
    let spans = capture.spans();
    assert_eq!(spans.len(), 1);
    assert_eq!(
        text(&spans[0], "rpc.response.status_code").as_deref(),
        Some("CANCELLED")
    );
    assert!(matches!(spans[0].status, Status::Error { .. }));
}

#[test]
fn a_rejected_call_has_a_span_of_humus_own_scope() {
    let capture = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&capture.telemetry(), "ledger:443");
    let cx = caller(&capture);
    let message = "circuit: call rejected: open for another 4.2s";
    recorder.record_rejected(&cx, TRANSFER, message);

    let spans = capture.spans();
    assert_eq!(spans.len(), 1);
    let span = &spans[0];
    assert_eq!(span.instrumentation_scope.name(), CLIENT_SCOPE);
    assert_eq!(span.name, "ledger.v1.Ledger/Transfer");
    assert_eq!(span.span_kind, SpanKind::Client);
    assert_eq!(span.parent_span_id, cx.span().span_context().span_id());
    assert_eq!(text(span, "rpc.system.name").as_deref(), Some("grpc"));
    assert_eq!(
        text(span, "rpc.method").as_deref(),
        Some("ledger.v1.Ledger/Transfer")
    );
    assert_eq!(
        text(span, "rpc.response.status_code").as_deref(),
        Some("UNAVAILABLE")
    );
    assert_eq!(text(span, "error.type").as_deref(), Some("UNAVAILABLE"));
    assert_eq!(text(span, "server.address").as_deref(), Some("ledger"));
    assert_eq!(attr(span, "server.port"), Some(&Value::I64(443)));
    assert_eq!(span.status, Status::error(message));

    // Nothing was sent: no rpc.client.call.duration.
    assert!(
        capture
            .metrics(RPC_SCOPE)
            .iter()
            .all(|p| p.name != "rpc.client.call.duration")
    );
}

#[test]
fn an_unsent_attempt_has_a_span_of_humus_own_scope_with_its_status() {
    let capture = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&capture.telemetry(), "ledger:443");
    recorder.record_unsent(
        &Context::new(),
        TRANSFER,
        &tonic::Status::unavailable("fault injected at grpc:ledger.v1.Ledger/Transfer"),
    );
    let spans = capture.spans();
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].instrumentation_scope.name(), CLIENT_SCOPE);
    assert_eq!(
        spans[0].status,
        Status::error("fault injected at grpc:ledger.v1.Ledger/Transfer")
    );
    // An unsent attempt is counted by record_call, as any other: not here.
    assert!(
        capture
            .metrics(CLIENT_SCOPE)
            .iter()
            .all(|p| p.name != "humus.circuit.calls")
    );
}

#[test]
fn an_address_without_a_port_is_all_server_address() {
    let capture = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&capture.telemetry(), "[::1]:50051");
    assert_eq!(
        (recorder.server_address(), recorder.server_port()),
        ("::1", Some(50051))
    );
    let recorder = ClientRecorder::new(&capture.telemetry(), "ledger");
    assert_eq!(
        (recorder.server_address(), recorder.server_port()),
        ("ledger", None)
    );
    recorder.start_attempt(&Context::new(), TRANSFER).end(None);
    let spans = capture.spans();
    assert_eq!(text(&spans[0], "server.address").as_deref(), Some("ledger"));
    assert_eq!(attr(&spans[0], "server.port"), None);
}

#[test]
fn no_op_telemetry_records_nothing_and_keeps_the_callers_context() {
    let capture = humus::testing::Telemetry::new();
    let cx = caller(&capture);
    let recorder = ClientRecorder::new(&Telemetry::default(), "ledger:443");
    let attempt = recorder.start_attempt(&cx, TRANSFER);
    assert_eq!(
        attempt.context().span().span_context(),
        cx.span().span_context()
    );
    let mut metadata = tonic::metadata::MetadataMap::new();
    attempt.inject(&mut metadata);
    assert!(metadata.is_empty());
    attempt.end(None);
    recorder.record_rejected(&cx, TRANSFER, "rejected");
    assert!(capture.spans().is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_injected_failure_has_one_error_type_in_spans_and_metrics() {
    let capture = humus::testing::Telemetry::new();
    let recorder = ClientRecorder::new(&capture.telemetry(), "ledger:443");
    let injected = humus::fault::InjectedError::abort("grpc:ledger.v1.Ledger/Transfer").to_status();
    recorder
        .start_attempt(&Context::new(), TRANSFER)
        .end(Some(&injected));
    recorder.record_unsent(&Context::new(), TRANSFER, &injected);

    let spans = capture.spans();
    assert_eq!(spans.len(), 2);
    for span in &spans {
        assert_eq!(
            text(span, "rpc.response.status_code").as_deref(),
            Some("UNAVAILABLE")
        );
        assert_eq!(
            text(span, "error.type").as_deref(),
            Some(humus::fault::ERROR_TYPE)
        );
    }
    let points = capture.metrics(RPC_SCOPE);
    assert_eq!(points.len(), 1);
    assert!(points[0].has(&[
        ("rpc.response.status_code", "UNAVAILABLE"),
        ("error.type", humus::fault::ERROR_TYPE),
    ]));
}
