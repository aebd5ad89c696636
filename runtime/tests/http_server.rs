//! The HTTP server's context layer on an axum front whose handler calls an
//! upstream through the humus HTTP client: the caller's trace context and
//! baggage reach the handler and its outbound calls; a scenario from a
//! caller `trust_scenario` does not trust is stripped first. A panic of
//! `trust_scenario` or of the handler is answered 500 on a connection that
//! serves the next request (hyper's HTTP/1.1 client on one connection, and
//! reqwest).

mod http_support;

use std::sync::{Arc, Mutex};

use axum::extract::Request;
use http_support::*;
use humus::fault::names as fit;
use humus::http::client::Settings;
use humus::http::server::ContextLayer;
use humus::testing::Telemetry;
use opentelemetry::Context;
use opentelemetry::baggage::BaggageExt;
use opentelemetry::trace::{SpanKind, TraceContextExt, Tracer, TracerProvider};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";

/// What the front's handler saw, and the front's address.
struct Front {
    url: String,
    seen: Arc<Mutex<Vec<Option<String>>>>,
}

/// Starts the front: `layer` around a handler that records the scenario
/// member it sees and calls `upstream` through a humus client (forwarding
/// scenarios, so what the upstream sees is what the handler had); an
/// outer layer puts a server span's context in the request when `span`.
async fn front(
    telemetry: &Telemetry,
    faults: bool,
    upstream: &Upstream,
    trust: Option<fn(&http::Request<()>) -> bool>,
    span: bool,
) -> Front {
    let setup = setup(telemetry, faults);
    let client = client(
        &setup,
        upstream,
        Settings {
            forward_scenario: true,
            max_attempts: 1,
            ..Settings::default()
        },
    );
    let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let record = Arc::clone(&seen);
    let handler = move |request: Request| {
        let client = client.clone();
        let record = Arc::clone(&record);
        async move {
            let cx = Context::current();
            // A gRPC client's call made here inherits the same context.
            let inherited = humus::grpc::deadline::Inherited::current().unwrap();
            assert_eq!(
                inherited.context().span().span_context().trace_id(),
                cx.span().span_context().trace_id()
            );
            let from_extensions = request.extensions().get::<Context>().cloned().unwrap();
            assert_eq!(
                cx.span().span_context().trace_id(),
                from_extensions.span().span_context().trace_id()
            );
            record
                .lock()
                .unwrap()
                .push(cx.baggage().get(KEY).map(|v| v.as_str().to_owned()));
            match client.get("/charge").send().await {
                Ok(response) => response.status().as_u16().to_string(),
                Err(e) => format!("error: {}", e.chain()),
            }
        }
    };
    let mut layer = ContextLayer::new(&setup);
    if let Some(trust) = trust {
        layer = layer.trust_scenario(trust);
    }
    let tracer = telemetry.tracer_provider().tracer("test.server");
    let router = axum::Router::new().fallback(handler).layer(layer);
    let router = if span {
        router.layer(tower::util::MapRequestLayer::new(move |mut r: Request| {
            let span = tracer
                .span_builder("GET /pay")
                .with_kind(SpanKind::Server)
                .start(&tracer);
            r.extensions_mut().insert(Context::new().with_span(span));
            r
        }))
    } else {
        router
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    Front { url, seen }
}

/// The edge: a GET with a traceparent and the given baggage headers.
async fn edge(front: &Front, baggage: &[&str], trusted: bool) -> String {
    let mut request = bare_reqwest()
        .get(format!("{}/pay", front.url))
        .header("traceparent", format!("00-{TRACE_ID}-{PARENT_ID}-01"));
    for b in baggage {
        request = request.header("baggage", *b);
    }
    if trusted {
        request = request.header("x-trusted", "1");
    }
    request.send().await.unwrap().text().await.unwrap()
}

fn scenario_header(point: &str) -> String {
    let cx = context(Some(&abort_at(point)));
    let mut headers = http::HeaderMap::new();
    opentelemetry::propagation::TextMapPropagator::inject_context(
        &opentelemetry_sdk::propagation::BaggagePropagator::new(),
        &cx,
        &mut humus::telemetry::HeaderInjector(&mut headers),
    );
    headers["baggage"].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn an_untrusted_scenario_is_stripped_and_the_rest_reaches_the_handler_and_its_calls() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let front = front(&telemetry, true, &upstream, None, true).await;
    // The scenario would abort the front's call if it were kept.
    let baggage = scenario_header(&upstream.point());
    assert_eq!(edge(&front, &[&baggage], false).await, "200");
    assert_eq!(*front.seen.lock().unwrap(), [None]);
    let seen = &upstream.seen()[0];
    assert_eq!(seen.member("tenant").as_deref(), Some("acme"));
    assert_eq!(seen.member(KEY), None);
    // The outer server span got the strip event, and is the parent of the
    // handler's outbound attempt.
    let spans = telemetry.spans();
    let server = spans
        .iter()
        .find(|s| s.span_kind == SpanKind::Server)
        .unwrap();
    assert_eq!(events(server, fit::STRIP).len(), 1);
    let attempt = spans
        .iter()
        .find(|s| s.span_kind == SpanKind::Client)
        .unwrap();
    assert_eq!(attempt.parent_span_id, server.span_context.span_id());
}

#[tokio::test]
async fn a_trusted_scenario_reaches_the_handler_and_fails_its_call() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let trust: fn(&http::Request<()>) -> bool = |r| r.headers().contains_key("x-trusted");
    let front = front(&telemetry, true, &upstream, Some(trust), false).await;
    let baggage = scenario_header(&upstream.point());
    let answer = edge(&front, &[&baggage], true).await;
    assert!(answer.contains("injected failure"), "{answer}");
    assert!(upstream.seen().is_empty());
    // The same request without the trusted header is stripped.
    assert_eq!(edge(&front, &[&baggage], false).await, "200");
    let seen = front.seen.lock().unwrap().clone();
    assert!(seen[0].is_some() && seen[1].is_none(), "{seen:?}");
}

#[tokio::test]
async fn the_callers_trace_continues_in_the_handlers_calls() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let front = front(&telemetry, false, &upstream, None, false).await;
    assert_eq!(edge(&front, &["tenant=acme"], false).await, "200");
    let seen = &upstream.seen()[0];
    let traceparent = seen.headers["traceparent"].to_str().unwrap();
    assert!(traceparent.contains(TRACE_ID), "{traceparent}");
    assert!(!traceparent.contains(PARENT_ID), "{traceparent}");
    assert_eq!(seen.member("tenant").as_deref(), Some("acme"));
    let attempt = &spans_of_kind(&telemetry, SpanKind::Client)[0];
    assert_eq!(attempt.parent_span_id.to_string(), PARENT_ID);
    assert_eq!(attempt.span_context.trace_id().to_string(), TRACE_ID);
}

#[tokio::test]
async fn with_injection_off_nothing_is_stripped() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let front = front(&telemetry, false, &upstream, None, true).await;
    let baggage = scenario_header("http:elsewhere:1");
    assert_eq!(edge(&front, &[&baggage], false).await, "200");
    assert!(front.seen.lock().unwrap()[0].is_some());
    assert!(upstream.seen()[0].member(KEY).is_some());
    let spans = telemetry.spans();
    let server = spans
        .iter()
        .find(|s| s.span_kind == SpanKind::Server)
        .unwrap();
    assert!(events(server, fit::STRIP).is_empty());
}

#[tokio::test]
async fn a_scenario_in_a_second_baggage_header_is_stripped_too() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let front = front(&telemetry, true, &upstream, None, false).await;
    let baggage = scenario_header(&upstream.point());
    let scenario_only = baggage
        .split(',')
        .find(|m| m.starts_with(KEY))
        .unwrap()
        .to_owned();
    // In either order: the scenario is found, and the tenant is kept.
    for baggage in [
        ["tenant=acme", &scenario_only],
        [&scenario_only, "tenant=acme"],
    ] {
        assert_eq!(edge(&front, &baggage, false).await, "200");
    }
    assert_eq!(*front.seen.lock().unwrap(), [None, None]);
    for seen in upstream.seen() {
        assert_eq!(seen.member("tenant").as_deref(), Some("acme"));
    }
}

/// A front whose handler panics for `/boom` (and answers "ok" otherwise),
/// behind the layer with `trust` and an outer layer's server span; its
/// address.
async fn panicky_front(
    telemetry: &Telemetry,
    trust: Option<fn(&http::Request<()>) -> bool>,
) -> std::net::SocketAddr {
    let setup = setup(telemetry, true);
    let handler = |request: Request| async move {
        assert_ne!(request.uri().path(), "/boom", "secret 42 in the handler");
        "ok"
    };
    let mut layer = ContextLayer::new(&setup);
    if let Some(trust) = trust {
        layer = layer.trust_scenario(trust);
    }
    let tracer = telemetry.tracer_provider().tracer("test.server");
    let router = axum::Router::new().fallback(handler).layer(layer).layer(
        tower::util::MapRequestLayer::new(move |mut r: Request| {
            let span = tracer
                .span_builder("GET")
                .with_kind(SpanKind::Server)
                .start(&tracer);
            r.extensions_mut().insert(Context::new().with_span(span));
            r
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// The bound on every wait of the panic tests.
const BOUND: std::time::Duration = std::time::Duration::from_secs(10);

/// One HTTP/1.1 connection to `addr` (hyper's client), on which each
/// request goes in turn: the same connection, or an error.
struct OneConnection {
    sender: hyper::client::conn::http1::SendRequest<http_body_util::Empty<bytes::Bytes>>,
    addr: std::net::SocketAddr,
}

impl OneConnection {
    async fn open(addr: std::net::SocketAddr) -> OneConnection {
        let stream = tokio::time::timeout(BOUND, tokio::net::TcpStream::connect(addr))
            .await
            .unwrap()
            .unwrap();
        let (sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(connection);
        OneConnection { sender, addr }
    }

    /// GET `path` with `baggage`: its status and body.
    async fn get(&mut self, path: &str, baggage: Option<&str>) -> (u16, String) {
        use http_body_util::BodyExt as _;
        let mut request = http::Request::get(path).header("host", self.addr.to_string());
        if let Some(baggage) = baggage {
            request = request.header("baggage", baggage);
        }
        let request = request.body(http_body_util::Empty::new()).unwrap();
        let exchange = async {
            self.sender.ready().await?;
            let response = self.sender.send_request(request).await?;
            let status = response.status().as_u16();
            let body = response.into_body().collect().await?.to_bytes();
            Ok::<_, hyper::Error>((status, String::from_utf8_lossy(&body).into_owned()))
        };
        tokio::time::timeout(BOUND, exchange)
            .await
            .expect("answered within the bound")
            .unwrap_or_else(|e| panic!("the connection failed on {path}: {e:?}"))
    }
}

/// The `exception` events of the outer server spans.
fn panics_recorded(telemetry: &Telemetry) -> Vec<String> {
    spans_of_kind(telemetry, SpanKind::Server)
        .iter()
        .flat_map(|s| {
            events(s, "exception")
                .into_iter()
                .map(|e| {
                    e.attributes
                        .iter()
                        .find(|kv| kv.key.as_str() == "exception.message")
                        .map(|kv| kv.value.to_string())
                        .unwrap_or_default()
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test]
async fn a_panic_of_trust_scenario_is_answered_500_and_the_connection_serves_the_next_request() {
    let telemetry = Telemetry::new();
    let trust: fn(&http::Request<()>) -> bool = |_| panic!("secret 42 in trust_scenario");
    let addr = panicky_front(&telemetry, Some(trust)).await;
    let baggage = scenario_header("http:elsewhere:1");

    let mut connection = OneConnection::open(addr).await;
    let (status, body) = connection.get("/pay", Some(&baggage)).await;
    assert_eq!(status, 500);
    assert!(!body.contains("secret"), "{body}");
    // The same connection: a request with no scenario reaches the handler.
    assert_eq!(connection.get("/pay", None).await, (200, "ok".to_owned()));
    // And with reqwest, as a user would call it.
    let response = tokio::time::timeout(
        BOUND,
        bare_reqwest()
            .get(format!("http://{addr}/pay"))
            .header("baggage", &baggage)
            .send(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(response.status(), 500);
    let recorded = panics_recorded(&telemetry);
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    assert!(
        recorded
            .iter()
            .all(|m| m.contains("secret 42 in trust_scenario")),
        "{recorded:?}"
    );
}

#[tokio::test]
async fn a_panic_of_the_handler_is_answered_500_and_the_connection_serves_the_next_request() {
    let telemetry = Telemetry::new();
    let addr = panicky_front(&telemetry, None).await;
    let mut connection = OneConnection::open(addr).await;
    let (status, body) = connection.get("/boom", None).await;
    assert_eq!(status, 500);
    assert!(!body.contains("secret"), "{body}");
    assert_eq!(connection.get("/pay", None).await, (200, "ok".to_owned()));
    let response = tokio::time::timeout(
        BOUND,
        bare_reqwest().get(format!("http://{addr}/boom")).send(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(response.status(), 500);
    let recorded = panics_recorded(&telemetry);
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    assert!(
        recorded
            .iter()
            .all(|m| m.contains("secret 42 in the handler")),
        "{recorded:?}"
    );
}

/// A streamed response body is polled in the request's scope too: each
/// chunk, made after the handler returned, sees the caller's baggage as
/// the current context (and so would the calls made for it).
#[tokio::test]
async fn a_streamed_bodys_chunks_are_made_in_the_callers_context() {
    let telemetry = Telemetry::new();
    let setup = setup(&telemetry, true);
    let handler = |_request: Request| async move {
        let chunks = futures_util::stream::unfold(0u32, |n| async move {
            if n == 3 {
                return None;
            }
            tokio::task::yield_now().await;
            let tenant = Context::current()
                .baggage()
                .get("tenant")
                .map_or_else(|| "none".to_owned(), |v| v.as_str().to_owned());
            Some((Ok::<_, std::io::Error>(format!("{tenant};")), n + 1))
        });
        axum::body::Body::from_stream(chunks)
    };
    let router = axum::Router::new()
        .fallback(handler)
        .layer(ContextLayer::new(&setup));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/feed", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let body = tokio::time::timeout(BOUND, async {
        bare_reqwest()
            .get(url)
            .header("baggage", "tenant=acme")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(body, "acme;acme;acme;");
}

/// Runs `request` through `layer` into a handler double: the headers the
/// handler saw, and the scenario member of its context.
async fn layered(layer: &ContextLayer, request: http::Request<()>) -> (http::HeaderMap, String) {
    use tower::{Layer as _, ServiceExt as _};
    let svc = layer.layer(tower::service_fn(|req: http::Request<()>| async move {
        let scenario = Context::current()
            .baggage()
            .get(KEY)
            .map(|v| v.as_str().to_owned())
            .unwrap_or_default();
        let mut response = http::Response::new(scenario);
        *response.headers_mut() = req.headers().clone();
        Ok::<_, std::convert::Infallible>(response)
    }));
    let response = svc.oneshot(request).await.unwrap();
    let headers = response.headers().clone();
    let scenario = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap();
    (headers, scenario.to_bytes().escape_ascii().to_string())
}

fn with_baggage(baggage: &str) -> http::Request<()> {
    http::Request::builder()
        .uri("/pay")
        .header("baggage", baggage)
        .body(())
        .unwrap()
}

#[tokio::test]
async fn the_layer_strips_with_the_no_op_propagator_and_drops_what_it_cannot_read_whole() {
    // No telemetry: the Setup's propagator is the no-op one.
    let layer = ContextLayer::new(&humus::Setup::new().with_faults(injector()));
    let (headers, _) = layered(&layer, with_baggage(&scenario_header("x:1"))).await;
    let baggage = headers["baggage"].to_str().unwrap();
    assert!(!baggage.contains(KEY), "{baggage}");
    assert!(baggage.contains("tenant=acme"), "{baggage}");

    let layer = ContextLayer::new(&setup(&Telemetry::new(), true));
    let mut members: Vec<String> = (0..64).map(|i| format!("m{i}=v")).collect();
    members.push(scenario_header("x:1"));
    let (headers, scenario) = layered(&layer, with_baggage(&members.join(","))).await;
    assert!(headers.get("baggage").is_none(), "{headers:?}");
    assert_eq!(scenario, "");
}

#[tokio::test]
async fn trust_is_asked_only_about_a_request_that_carries_a_scenario() {
    let asked = Arc::new(Mutex::new(0));
    let count = Arc::clone(&asked);
    let layer = ContextLayer::new(&setup(&Telemetry::new(), true)).trust_scenario(move |_| {
        *count.lock().unwrap() += 1;
        true
    });
    let (headers, scenario) = layered(&layer, with_baggage("tenant=acme")).await;
    assert_eq!(headers["baggage"], "tenant=acme");
    assert_eq!((scenario.as_str(), *asked.lock().unwrap()), ("", 0));
    let (_, scenario) = layered(&layer, with_baggage(&scenario_header("x:1"))).await;
    assert!(!scenario.is_empty(), "trusted");
    assert_eq!(*asked.lock().unwrap(), 1);
    // Injection off: never asked.
    let count = Arc::clone(&asked);
    let off = ContextLayer::new(&setup(&Telemetry::new(), false)).trust_scenario(move |_| {
        *count.lock().unwrap() += 1;
        false
    });
    layered(&off, with_baggage(&scenario_header("x:1"))).await;
    assert_eq!(*asked.lock().unwrap(), 1);
}
