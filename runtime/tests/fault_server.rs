//! The server layer on a tower service double: untrusted scenarios are
//! stripped before the handler, trusted ones kept, other members and the
//! trace context untouched; off does nothing (docs/failure-injection.md,
//! "Trust and stripping").

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http::{HeaderMap, HeaderValue, Request};
use humus::fault::{Decoder, Injector, Settings, jsonscenario};
use humus::grpc::deadline::{InheritLayer, Inherited};
use humus::grpc::server::{Caller, PeerCertificates, StripScenarioLayer};
use opentelemetry::Context;
use opentelemetry::baggage::BaggageExt;
use opentelemetry::propagation::{TextMapCompositePropagator, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use rustls_pki_types::CertificateDer;
use tower::{Layer, ServiceExt, service_fn};

const KEY: &str = "acme.fault";
const METHOD: &str = "/payments.v1.Payments/Charge";
const SCENARIO: &str = r#"{"rules":[{"point":"*","abort":true}]}"#;
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn codec() -> jsonscenario::Codec {
    jsonscenario::Codec::new(KEY).unwrap()
}

fn on() -> Injector {
    Injector::new(Settings::new(codec())).unwrap()
}

fn baggage_only() -> Arc<dyn TextMapPropagator + Send + Sync> {
    Arc::new(BaggagePropagator::new())
}

/// `baggage` header value: tenant=acme and, if asked, the scenario, written
/// by the propagator as a client would.
fn baggage_header(with_scenario: bool) -> String {
    let mut b = opentelemetry::baggage::Baggage::new();
    b.insert("tenant", "acme");
    if with_scenario {
        b.insert(KEY, SCENARIO);
    }
    let mut h = std::collections::HashMap::new();
    BaggagePropagator::new().inject_context(&Context::new().with_baggage(b), &mut h);
    h.remove("baggage").unwrap()
}

fn request(baggage: &str) -> Request<()> {
    Request::builder()
        .uri(format!("http://orders:9090{METHOD}"))
        .header("baggage", baggage)
        .header("traceparent", TRACEPARENT)
        .header("x-gateway", "mesh")
        .body(())
        .unwrap()
}

/// Runs `request` through `layer` into a handler double, and returns the
/// headers the handler saw (which it answers with).
async fn handled(layer: &StripScenarioLayer, request: Request<()>) -> HeaderMap {
    let svc = layer.layer(service_fn(|req: Request<()>| async move {
        let mut response = http::Response::new(tonic::body::Body::empty());
        *response.headers_mut() = req.headers().clone();
        Ok::<_, Infallible>(response)
    }));
    svc.oneshot(request).await.unwrap().headers().clone()
}

/// The scenario and the tenant a handler reads from `headers` with the
/// propagator.
fn seen(headers: &HeaderMap) -> (Option<String>, Option<String>) {
    let map: std::collections::HashMap<String, String> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    let cx = BaggagePropagator::new().extract(&map);
    let b = cx.baggage();
    (
        b.get(KEY).map(|v| v.as_str().to_owned()),
        b.get("tenant").map(|v| v.as_str().to_owned()),
    )
}

#[tokio::test]
async fn the_default_trusts_no_one_and_other_members_arrive() {
    let layer = StripScenarioLayer::new(on(), baggage_only());
    let headers = handled(&layer, request(&baggage_header(true))).await;
    assert_eq!(seen(&headers), (None, Some("acme".into())));
    assert_eq!(headers["traceparent"], TRACEPARENT);
    assert_eq!(headers["x-gateway"], "mesh");
    assert_eq!(headers.get_all("baggage").iter().count(), 1);
}

#[tokio::test]
async fn a_trusted_caller_keeps_its_scenario() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&asked);
    let layer =
        StripScenarioLayer::new(on(), baggage_only()).trust_scenario(move |c: &Caller<'_>| {
            log.lock().unwrap().push((
                c.method().to_owned(),
                c.headers()["x-gateway"].to_str().unwrap().to_owned(),
                c.metadata()
                    .get("x-gateway")
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned(),
            ));
            c.headers().get("x-gateway") == Some(&HeaderValue::from_static("mesh"))
        });
    let sent = baggage_header(true);
    let headers = handled(&layer, request(&sent)).await;
    assert_eq!(headers["baggage"], sent.as_str(), "untouched");
    assert_eq!(seen(&headers), (Some(SCENARIO.into()), Some("acme".into())));
    assert_eq!(
        *asked.lock().unwrap(),
        [(METHOD.to_owned(), "mesh".to_owned(), "mesh".to_owned())]
    );

    // The same layer strips a caller its function does not trust.
    let mut other = request(&sent);
    other
        .headers_mut()
        .insert("x-gateway", HeaderValue::from_static("internet"));
    let headers = handled(&layer, other).await;
    assert_eq!(seen(&headers), (None, Some("acme".into())));
}

#[tokio::test]
async fn trust_is_asked_only_about_a_scenario_and_only_when_on() {
    let asked = Arc::new(Mutex::new(0));
    let trust = |count: Arc<Mutex<i32>>| {
        move |_: &Caller<'_>| {
            *count.lock().unwrap() += 1;
            false
        }
    };
    // No scenario: not asked, nothing changes.
    let layer = StripScenarioLayer::new(on(), baggage_only()).trust_scenario(trust(asked.clone()));
    let sent = baggage_header(false);
    let headers = handled(&layer, request(&sent)).await;
    assert_eq!(headers["baggage"], sent.as_str());
    assert_eq!(*asked.lock().unwrap(), 0);

    // Off: not asked, nothing stripped.
    let layer = StripScenarioLayer::new(Injector::default(), baggage_only())
        .trust_scenario(trust(asked.clone()));
    let sent = baggage_header(true);
    let headers = handled(&layer, request(&sent)).await;
    assert_eq!(headers["baggage"], sent.as_str());
    assert_eq!(seen(&headers), (Some(SCENARIO.into()), Some("acme".into())));
    assert_eq!(*asked.lock().unwrap(), 0);

    // On, with a scenario: asked once.
    let layer = StripScenarioLayer::new(on(), baggage_only()).trust_scenario(trust(asked.clone()));
    handled(&layer, request(&sent)).await;
    assert_eq!(*asked.lock().unwrap(), 1);
}

#[tokio::test]
async fn an_invalid_scenario_is_stripped_too() {
    let layer = StripScenarioLayer::new(on(), baggage_only());
    let headers = handled(&layer, request("tenant=acme,acme.fault=not-json")).await;
    assert_eq!(seen(&headers), (None, Some("acme".into())));
}

#[tokio::test]
async fn a_scenario_alone_leaves_no_baggage_header() {
    let layer = StripScenarioLayer::new(on(), baggage_only());
    let headers = handled(&layer, request("acme.fault=%7B%22rules%22:[]%7D")).await;
    assert!(headers.get("baggage").is_none(), "{headers:?}");
    assert_eq!(headers["traceparent"], TRACEPARENT);
}

#[tokio::test]
async fn a_scenario_in_a_second_baggage_header_is_stripped() {
    let layer = StripScenarioLayer::new(on(), baggage_only());
    let mut req = request("tenant=acme");
    let scenario_only = baggage_header(true).replace("tenant=acme", "region=eu");
    req.headers_mut()
        .append("baggage", HeaderValue::from_str(&scenario_only).unwrap());
    let headers = handled(&layer, req).await;
    assert_eq!(headers.get_all("baggage").iter().count(), 1);
    let (scenario, tenant) = seen(&headers);
    assert_eq!((scenario, tenant), (None, Some("acme".into())));
    assert!(headers["baggage"].to_str().unwrap().contains("region=eu"));
}

#[tokio::test]
async fn a_composite_propagator_leaves_the_trace_context_alone() {
    let composite: Arc<dyn TextMapPropagator + Send + Sync> =
        Arc::new(TextMapCompositePropagator::new(vec![
            Box::new(TraceContextPropagator::new()),
            Box::new(BaggagePropagator::new()),
        ]));
    let layer = StripScenarioLayer::new(on(), composite);
    let mut req = request(&baggage_header(true));
    req.headers_mut()
        .insert("tracestate", HeaderValue::from_static("vendor=opaque"));
    let headers = handled(&layer, req).await;
    assert_eq!(seen(&headers), (None, Some("acme".into())));
    assert_eq!(headers["traceparent"], TRACEPARENT);
    assert_eq!(headers["tracestate"], "vendor=opaque");
}

#[tokio::test]
async fn the_trust_function_sees_the_peer_certificates() {
    let leaf = CertificateDer::from(vec![1u8, 2, 3]);
    let layer = StripScenarioLayer::new(on(), baggage_only()).trust_scenario(|c: &Caller<'_>| {
        c.peer_certificates()
            .is_some_and(|certs| certs.first().map(|c| c.as_ref()) == Some(&[1u8, 2, 3][..]))
    });
    let mut mtls = request(&baggage_header(true));
    mtls.extensions_mut()
        .insert(PeerCertificates::new(vec![leaf.clone()]));
    let headers = handled(&layer, mtls).await;
    assert_eq!(
        seen(&headers).0,
        Some(SCENARIO.into()),
        "trusted by certificate"
    );

    let plain = request(&baggage_header(true));
    let headers = handled(&layer, plain).await;
    assert_eq!(seen(&headers).0, None, "no certificate, no trust");
}

#[tokio::test]
async fn a_strip_is_an_event_on_the_server_span() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let span = provider.tracer("test").start("server");
    let server_cx = Context::new().with_span(span);

    let layer = StripScenarioLayer::new(on(), baggage_only());
    let mut req = request(&baggage_header(true));
    req.extensions_mut().insert(server_cx.clone());
    handled(&layer, req).await;
    // No scenario, no strip, no event.
    let mut req = request(&baggage_header(false));
    req.extensions_mut().insert(server_cx.clone());
    handled(&layer, req).await;
    server_cx.span().end();

    let spans = exporter.get_finished_spans().unwrap();
    let names: Vec<_> = spans[0].events.iter().map(|e| e.name.to_string()).collect();
    assert_eq!(names, ["humus.fit.strip"]);
    assert!(spans[0].events[0].attributes.is_empty());
}

#[test]
fn the_layer_is_debug_and_clone() {
    let layer = StripScenarioLayer::new(on(), baggage_only()).trust_scenario(|_: &Caller<'_>| true);
    let s = format!("{:?}", layer.clone());
    assert!(s.contains("StripScenarioLayer"), "{s}");
    assert!(codec().owns(KEY));
}

/// The no-op propagator: what a Setup without telemetry reads with.
fn no_op() -> Arc<dyn TextMapPropagator + Send + Sync> {
    Arc::new(opentelemetry::trace::noop::NoopTextMapPropagator::new())
}

/// `tenant=acme`, then `n` more members, then the scenario.
fn past_the_members_limit(n: usize) -> String {
    let mut members: Vec<String> = (0..n).map(|i| format!("m{i}=v")).collect();
    members.insert(0, "tenant=acme".into());
    members.push(format!("{KEY}=%7B%22rules%22%3A%5B%5D%7D"));
    members.join(",")
}

#[tokio::test]
async fn the_strip_layer_strips_whatever_the_propagator() {
    let layer = StripScenarioLayer::new(on(), no_op());
    let headers = handled(&layer, request(&baggage_header(true))).await;
    assert_eq!(seen(&headers), (None, Some("acme".into())));
    assert_eq!(headers["traceparent"], TRACEPARENT);
}

#[tokio::test]
async fn a_baggage_header_past_the_limits_is_dropped_untrusted_or_not() {
    let asked = Arc::new(Mutex::new(0));
    let count = asked.clone();
    let layer = StripScenarioLayer::new(on(), baggage_only()).trust_scenario(move |_| {
        *count.lock().unwrap() += 1;
        true
    });
    // 64 members: read whole, and the trusted scenario kept.
    let headers = handled(&layer, request(&past_the_members_limit(62))).await;
    assert!(headers["baggage"].to_str().unwrap().contains(KEY));
    assert_eq!(*asked.lock().unwrap(), 1);
    // 65, or 8 KiB+: dropped whole, and nobody is asked.
    let long = format!("{},pad={}", baggage_header(true), "x".repeat(8192));
    for sent in [past_the_members_limit(63), long] {
        let headers = handled(&layer, request(&sent)).await;
        assert!(headers.get("baggage").is_none(), "{headers:?}");
        assert_eq!(headers["traceparent"], TRACEPARENT);
    }
    assert_eq!(*asked.lock().unwrap(), 1);
}

#[tokio::test]
async fn a_dropped_header_is_a_strip_event_that_says_why() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let server_cx = Context::new().with_span(provider.tracer("test").start("server"));
    let layer = StripScenarioLayer::new(on(), baggage_only());
    let mut req = request(&past_the_members_limit(63));
    req.extensions_mut().insert(server_cx.clone());
    handled(&layer, req).await;
    server_cx.span().end();
    let spans = exporter.get_finished_spans().unwrap();
    let event = &spans[0].events[0];
    assert_eq!(event.name, "humus.fit.strip");
    assert_eq!(
        event.attributes,
        [opentelemetry::KeyValue::new(
            "humus.fit.unreadable",
            "the baggage header has 65 members, over the 64 a propagator reads"
        )]
    );
}

/// Runs `request` through `layer` into a handler double, and returns the
/// headers the handler saw and the scenario its calls would inherit.
async fn inherited(layer: &InheritLayer, request: Request<()>) -> (HeaderMap, Option<String>) {
    let svc = layer.layer(service_fn(|req: Request<()>| async move {
        let scenario = Inherited::current().and_then(|i| {
            i.context()
                .baggage()
                .get(KEY)
                .map(|v| v.as_str().to_owned())
        });
        let mut response = http::Response::new(scenario);
        *response.headers_mut() = req.headers().clone();
        Ok::<_, Infallible>(response)
    }));
    let response = svc.oneshot(request).await.unwrap();
    let headers = response.headers().clone();
    (headers, response.into_body().into_inner())
}

#[tokio::test]
async fn the_inherit_layer_trusts_no_caller_by_default() {
    let sent = baggage_header(true);
    // Without the scenario convention: none of the caller's baggage.
    let (_, scenario) = inherited(&InheritLayer::new(baggage_only()), request(&sent)).await;
    assert_eq!(scenario, None);
    // With it: the scenario stripped from the context and the headers,
    // whatever the propagator.
    for propagator in [baggage_only(), no_op()] {
        let layer = InheritLayer::new(propagator).faults(on());
        let (headers, scenario) = inherited(&layer, request(&sent)).await;
        assert_eq!(scenario, None);
        assert_eq!(seen(&headers), (None, Some("acme".into())));
        // A header past the limits is dropped.
        let (headers, _) = inherited(&layer, request(&past_the_members_limit(63))).await;
        assert!(headers.get("baggage").is_none(), "{headers:?}");
    }
    // Trusting every caller is a choice made by name.
    let layer = InheritLayer::new(baggage_only()).trust_every_caller();
    let (headers, scenario) = inherited(&layer, request(&sent)).await;
    assert_eq!(scenario.as_deref(), Some(SCENARIO));
    assert_eq!(headers["baggage"], sent.as_str());
}
