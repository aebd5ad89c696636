//! Nothing the client records reaches OpenTelemetry's globals: a process
//! that sets recording global providers and a global propagator sees none
//! of a client's spans or metrics, and a client with the default (no-op)
//! telemetry sends no trace context or baggage (issue 6; seed 000,
//! "Telemetry").
//!
//! One test in its own binary, since the globals are the process's.

mod client_support;

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use client_support::*;
use humus::grpc::client::{Client, Settings};
use humus::testing::{Ca, Host, Telemetry};
use opentelemetry::baggage::BaggageExt;
use opentelemetry::global;
use opentelemetry::propagation::TextMapCompositePropagator;
use opentelemetry::trace::{TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Temporality,
};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tonic::metadata::MetadataMap;
use tonic::{Response, Status};

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

/// Five failures (the breaker opens), a rejected call, then a success
/// after the open period: every kind of record a client makes.
async fn exercise(client: &Client, cx: &Context) {
    for _ in 0..6 {
        let mut request = get("c");
        request.extensions_mut().insert(cx.clone());
        let _ = client.unary::<_, Cart>(&GET_CART, request).await;
    }
    tokio::time::advance(SECOND * 10).await;
    let mut request = get("ok");
    request.extensions_mut().insert(cx.clone());
    let _ = client.unary::<_, Cart>(&GET_CART, request).await;
}

#[tokio::test(start_paused = true)]
async fn recording_global_providers_see_nothing_of_the_client() {
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

    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let seen: Arc<Mutex<Vec<MetadataMap>>> = Arc::default();
    {
        let seen = seen.clone();
        carts.on_get_cart(move |s, req| {
            seen.lock().unwrap().push(s.metadata.clone());
            async move {
                if req.id == "ok" {
                    return Ok(Response::new(cart(&req.id, 0)));
                }
                Err(Status::unavailable("down"))
            }
        });
    }
    let _carts = start_carts(&host, &ca, &carts);
    let settings = || Settings {
        max_attempts: 1,
        ..carts_settings(&ca)
    };

    // A caller context with a span of the global provider and baggage:
    // the current context too, as a caller's instrumentation would leave it.
    let caller = global::tracer("caller").start("caller");
    let cx = Context::new()
        .with_span(caller)
        .with_baggage([KeyValue::new("tenant", "acme")]);

    // The default telemetry: no-op, whatever the globals are.
    let quiet = Client::new(&setup(&host), settings()).unwrap();
    exercise(&quiet, &cx).await;
    let sent = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(
        sent.len(),
        6,
        "5 failures, then 1 success after the open period"
    );
    for metadata in &sent {
        assert!(metadata.get("traceparent").is_none(), "{metadata:?}");
        assert!(metadata.get("baggage").is_none(), "{metadata:?}");
    }

    // A recording telemetry of its own: it sees everything, the globals
    // nothing.
    let capture = Telemetry::new();
    let recording = Client::new(
        &setup(&host).with_telemetry(capture.telemetry()),
        settings(),
    )
    .unwrap();
    exercise(&recording, &cx).await;
    let sent = std::mem::take(&mut *seen.lock().unwrap());
    assert!(sent.iter().all(|m| m.get("traceparent").is_some()));
    assert_eq!(capture.spans().len(), 7, "6 attempts, 1 rejected");
    assert_eq!(capture.logs().len(), 2, "closed → open → half-open");
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
    drop(cx);
}
