//! Nothing the client records reaches OpenTelemetry's globals: a process
//! that sets recording global providers and a global propagator sees none
//! of a client's spans or metrics, and a client with the default (no-op)
//! telemetry sends no trace context or baggage (issue 6;
//! docs/client.md, "Telemetry").
//!
//! One test in its own binary, since the globals are the process's.

mod client_support;

use std::sync::{Arc, Mutex};

use client_support::*;
use humus::grpc::client::{Client, Settings};
use humus::testing::{Ca, Host, Telemetry};
use opentelemetry::baggage::BaggageExt;
use opentelemetry::global;
use opentelemetry::propagation::TextMapCompositePropagator;
use opentelemetry::trace::{TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use tonic::metadata::MetadataMap;
use tonic::{Response, Status};

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

    assert!(globals.spans().is_empty());
    let scopes = globals.metric_scopes();
    assert!(
        scopes.is_empty(),
        "the global meter provider saw {scopes:?}"
    );
    drop(cx);
}
