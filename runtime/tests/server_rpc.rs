//! What every RPC a humus server serves passes, before the user's code:
//! the caller's trace context and baggage are extracted, an untrusted
//! caller's scenario is stripped (with no layer to remember), a SERVER
//! span is the child of the caller's and the parent of the handler's own
//! calls, and `rpc.server.call.duration` is recorded, all through the
//! Setup's providers.

mod client_support;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};

use client_support::*;
use futures_util::StreamExt as _;
use humus::Setup;
use humus::fault::{self, Fault, Injector, Rule, Scenario, jsonscenario};
use humus::grpc::client::{Client, Method, MethodPolicy, RpcKind};
use humus::grpc::server::{ServeError, Server, Settings, TrustScenario};
use humus::telemetry::names::*;
use humus::testing::{Ca, Host, Telemetry};
use opentelemetry::baggage::BaggageExt;
use opentelemetry::trace::{SpanKind, TraceContextExt, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SpanData;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::{Code, Response};

const KEY: &str = "acme.fault";

macro_rules! named {
    ($name:ident, $inner:ty, $service:literal) => {
        #[derive(Clone)]
        struct $name($inner);

        impl NamedService for $name {
            const NAME: &'static str = $service;
        }

        impl tower_service::Service<http::Request<Body>> for $name {
            type Response = http::Response<Body>;
            type Error = Infallible;
            type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

            fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
                self.0.poll_ready(cx)
            }

            fn call(&mut self, req: http::Request<Body>) -> Self::Future {
                self.0.call(req)
            }
        }
    };
}

named!(CartsService, Carts, "test.carts.v1.Carts");
named!(OrdersService, Orders, "test.orders.v1.Orders");

struct Serving {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServeError>>,
}

impl Serving {
    async fn start(mut server: Server) -> Serving {
        server.bind().await.unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.serve(async move {
            let _ = stopped.await;
        }));
        Serving {
            stop: Some(stop),
            task,
        }
    }

    async fn stopped(mut self) {
        let _ = self.stop.take().unwrap().send(());
        (&mut self.task).await.unwrap().unwrap();
    }
}

fn codec() -> jsonscenario::Codec {
    jsonscenario::Codec::new(KEY).unwrap()
}

fn injector() -> Injector {
    Injector::new(fault::Settings::new(codec())).unwrap()
}

/// A caller's context: its own span, a tenant member and a scenario.
fn caller(capture: &Telemetry) -> Context {
    let span =
        opentelemetry::trace::Tracer::start(&capture.tracer_provider().tracer("caller"), "caller");
    let cx = Context::new()
        .with_span(span)
        .with_baggage([KeyValue::new("tenant", "acme")]);
    let scenario = Scenario::new([Rule::new(
        "grpc:payments.v1.Payments/*",
        Fault {
            abort: true,
            ..Fault::NONE
        },
    )]);
    fault::with_scenario(&cx, &codec(), &scenario).unwrap()
}

fn request_in(cx: &Context, id: &str) -> tonic::Request<CartRequest> {
    let mut request = get(id);
    request.extensions_mut().insert(cx.clone());
    request
}

fn tls(ca: &Ca, name: &str) -> Option<Arc<rustls::ServerConfig>> {
    Some(Arc::new(ca.issue(name).server_config()))
}

/// What carts' handler saw of the scenario and the tenant, in its current
/// context and in its metadata.
type Seen = Arc<Mutex<Vec<(Option<String>, Option<String>, Option<String>)>>>;

fn recording_carts() -> (Carts, Seen) {
    let carts = Carts::new();
    let seen = Seen::default();
    let saw = seen.clone();
    carts.on_get_cart(move |s, req| {
        let cx = Context::current();
        let baggage = cx.baggage();
        saw.lock().unwrap().push((
            baggage.get(KEY).map(|v| v.as_str().to_owned()),
            baggage.get("tenant").map(|v| v.as_str().to_owned()),
            s.metadata
                .get("baggage")
                .map(|v| v.to_str().unwrap().to_owned()),
        ));
        async move { Ok(Response::new(cart(&req.id, 1))) }
    });
    (carts, seen)
}

/// A client of carts that sends the whole baggage (its setup has no
/// injector, so it neither evaluates nor strips).
fn edge_client(host: &Host, ca: &Ca, capture: &Telemetry) -> Client {
    Client::new(
        &setup(host).with_telemetry(capture.telemetry()),
        carts_settings(ca),
    )
    .unwrap()
}

fn servers(capture: &Telemetry) -> Vec<SpanData> {
    capture
        .spans()
        .into_iter()
        .filter(|s| s.span_kind == SpanKind::Server)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn an_untrusted_callers_scenario_is_stripped_with_no_layer_added() {
    let (ca, host, capture) = (Ca::new(), Host::new(), Telemetry::new());
    let (carts, seen) = recording_carts();
    let setup = setup(&host)
        .with_telemetry(capture.telemetry())
        .with_faults(injector());
    let server = Server::new(
        &setup,
        Settings {
            addr: "carts:9090".into(),
            tls: tls(&ca, "carts"),
            ..Settings::default()
        },
    )
    .unwrap()
    .add_service(CartsService(carts));
    let serving = Serving::start(server).await;

    let client = edge_client(&host, &ca, &capture);
    let _: Response<Cart> = client
        .unary(&GET_CART, request_in(&caller(&capture), "c-1"))
        .await
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    let (scenario, tenant, header) = &seen[0];
    assert_eq!(scenario, &None, "the handler's context has no scenario");
    assert_eq!(tenant.as_deref(), Some("acme"), "other members arrive");
    let header = header.as_deref().unwrap();
    assert!(!header.contains(KEY), "{header}");
    assert!(header.contains("tenant=acme"), "{header}");
    let server = &servers(&capture)[0];
    assert!(
        server.events.iter().any(|e| e.name == fault::names::STRIP),
        "{server:#?}"
    );
    serving.stopped().await;
}

#[tokio::test(start_paused = true)]
async fn a_trusted_callers_scenario_reaches_the_handler() {
    let (ca, host, capture) = (Ca::new(), Host::new(), Telemetry::new());
    let (carts, seen) = recording_carts();
    let setup = setup(&host)
        .with_telemetry(capture.telemetry())
        .with_faults(injector());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let methods = asked.clone();
    let server = Server::new(
        &setup,
        Settings {
            addr: "carts:9090".into(),
            tls: tls(&ca, "carts"),
            trust_scenario: Some(TrustScenario::new(move |caller| {
                methods.lock().unwrap().push(caller.method().to_owned());
                true
            })),
            ..Settings::default()
        },
    )
    .unwrap()
    .add_service(CartsService(carts));
    let serving = Serving::start(server).await;
    let client = edge_client(&host, &ca, &capture);
    let _: Response<Cart> = client
        .unary(&GET_CART, request_in(&caller(&capture), "c-1"))
        .await
        .unwrap();
    // Asked only about a request that carries a scenario.
    let _: Response<Cart> = client.unary(&GET_CART, get("plain")).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert!(seen[0].0.is_some(), "the scenario reached the handler");
    assert_eq!(*asked.lock().unwrap(), [GET_CART.full_name]);
    serving.stopped().await;
}

#[tokio::test(start_paused = true)]
async fn the_server_span_is_the_callers_child_and_its_handlers_calls_parent() {
    let (ca, host, capture) = (Ca::new(), Host::new(), Telemetry::new());
    let carts = Carts::new();
    let _carts = start_carts(&host, &ca, &carts);
    // orders: a humus server whose handler calls carts through a humus
    // client of the same setup.
    let orders_setup = setup(&host).with_telemetry(capture.telemetry());
    let carts_client = Client::new(&orders_setup, carts_settings(&ca)).unwrap();
    let server = Server::new(
        &orders_setup,
        Settings {
            addr: "orders:8443".into(),
            tls: tls(&ca, "orders"),
            ..Settings::default()
        },
    )
    .unwrap()
    .add_service(OrdersService(Orders {
        carts: carts_client,
    }));
    let serving = Serving::start(server).await;

    let edge = Client::new(
        &setup(&host).with_telemetry(capture.telemetry()),
        humus::grpc::client::Settings {
            addr: "orders:8443".into(),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let cx = caller(&capture);
    let mut request = tonic::Request::new(OrderRequest {
        cart_id: "c-1".into(),
    });
    request.extensions_mut().insert(cx.clone());
    let order: Response<Order> = edge.unary(&PLACE_ORDER, request).await.unwrap();
    assert_eq!(order.get_ref().summary, "orders, via carts");

    let spans = capture.spans();
    let find = |kind: SpanKind, name: &str| -> SpanData {
        spans
            .iter()
            .find(|s| s.span_kind == kind && s.name == name)
            .unwrap_or_else(|| panic!("no {kind:?} span {name}: {spans:#?}"))
            .clone()
    };
    let edge_attempt = find(SpanKind::Client, "test.orders.v1.Orders/PlaceOrder");
    let server = find(SpanKind::Server, "test.orders.v1.Orders/PlaceOrder");
    let carts_attempt = find(SpanKind::Client, "test.carts.v1.Carts/GetCart");
    assert_eq!(server.instrumentation_scope.name(), RPC_SERVER_SCOPE);
    assert_eq!(server.parent_span_id, edge_attempt.span_context.span_id());
    assert_eq!(
        server.span_context.trace_id(),
        cx.span().span_context().trace_id()
    );
    assert_eq!(carts_attempt.parent_span_id, server.span_context.span_id());
    let text = |key: &str| {
        server
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.as_str().into_owned())
    };
    assert_eq!(text(RPC_SYSTEM_NAME).as_deref(), Some("grpc"));
    assert_eq!(
        text(RPC_METHOD).as_deref(),
        Some("test.orders.v1.Orders/PlaceOrder")
    );
    assert_eq!(text(RPC_RESPONSE_STATUS_CODE).as_deref(), Some("OK"));

    // A method of no service the server serves is `_OTHER`.
    static NOWHERE: Method = Method {
        full_name: "/test.nowhere.v1.Nowhere/Call",
        point: "grpc:test.nowhere.v1.Nowhere/Call",
        kind: RpcKind::Unary,
        policy: MethodPolicy::DEFAULT,
    };
    let err = edge
        .unary::<_, Order>(&NOWHERE, tonic::Request::new(OrderRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);

    let points = capture.metrics(RPC_SERVER_SCOPE);
    let durations: Vec<_> = points
        .iter()
        .filter(|p| p.name == RPC_SERVER_CALL_DURATION)
        .collect();
    assert!(
        durations.iter().any(|p| p.unit == "s"
            && p.has(&[
                (RPC_SYSTEM_NAME, "grpc"),
                (RPC_METHOD, "test.orders.v1.Orders/PlaceOrder"),
                (RPC_RESPONSE_STATUS_CODE, "OK"),
            ])),
        "{durations:#?}"
    );
    assert!(
        durations.iter().any(|p| p.has(&[
            (RPC_METHOD, RPC_METHOD_OTHER),
            (RPC_RESPONSE_STATUS_CODE, "UNIMPLEMENTED"),
            (ERROR_TYPE, "UNIMPLEMENTED"),
        ])),
        "{durations:#?}"
    );
    serving.stopped().await;
    let _ = Setup::new();
}

/// orders, whose handler calls carts through a humus client and copies
/// nothing from its own request.
#[derive(Clone)]
struct Forwarding {
    carts: Client,
}

impl NamedService for Forwarding {
    const NAME: &'static str = "test.orders.v1.Orders";
}

impl tower_service::Service<http::Request<Body>> for Forwarding {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let carts = self.carts.clone();
        Box::pin(async move {
            let svc = tower::service_fn(move |r: tonic::Request<OrderRequest>| {
                let carts = carts.clone();
                async move {
                    let inherited = humus::grpc::deadline::Inherited::current()
                        .expect("the handler runs in its RPC's scope");
                    let left = inherited
                        .deadline()
                        .expect("the served RPC's grpc-timeout")
                        .saturating_duration_since(tokio::time::Instant::now());
                    assert!(
                        left <= std::time::Duration::from_secs(3) && !left.is_zero(),
                        "{left:?} left"
                    );
                    let cart: Response<Cart> =
                        carts.unary(&GET_CART, get(&r.get_ref().cart_id)).await?;
                    Ok::<_, tonic::Status>(Response::new(Order {
                        summary: format!("orders, via {}", cart.get_ref().served_by),
                    }))
                }
            });
            Ok(
                tonic::server::Grpc::new(tonic_prost::ProstCodec::<Order, OrderRequest>::default())
                    .unary(svc, req)
                    .await,
            )
        })
    }
}

#[tokio::test(start_paused = true)]
async fn the_handlers_calls_inherit_the_served_rpcs_deadline() {
    let (ca, host) = (Ca::new(), Host::new());
    let carts = Carts::new();
    let timeouts = Arc::new(Mutex::new(Vec::new()));
    let seen = timeouts.clone();
    carts.on_get_cart(move |s, req| {
        seen.lock().unwrap().push(
            s.metadata
                .get("grpc-timeout")
                .map(|v| v.to_str().unwrap().to_owned()),
        );
        async move { Ok(Response::new(cart(&req.id, 1))) }
    });
    let _carts = start_carts(&host, &ca, &carts);
    let orders_setup = setup(&host);
    let server = Server::new(
        &orders_setup,
        Settings {
            addr: "orders:8443".into(),
            tls: tls(&ca, "orders"),
            ..Settings::default()
        },
    )
    .unwrap()
    .add_service(Forwarding {
        carts: Client::new(&orders_setup, carts_settings(&ca)).unwrap(),
    });
    let serving = Serving::start(server).await;
    let edge = Client::new(
        &setup(&host),
        humus::grpc::client::Settings {
            addr: "orders:8443".into(),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let mut request = tonic::Request::new(OrderRequest {
        cart_id: "c-1".into(),
    });
    request.set_timeout(std::time::Duration::from_secs(3));
    let _: Response<Order> = edge.unary(&PLACE_ORDER, request).await.unwrap();
    let timeouts = timeouts.lock().unwrap().clone();
    // The client's own timeout is 10 s: what carts got is the served RPC's.
    let sent = timeouts[0].clone().expect("a grpc-timeout");
    let (digits, unit) = sent.split_at(sent.len() - 1);
    let n: u64 = digits.parse().unwrap();
    let sent_for = match unit {
        "S" => std::time::Duration::from_secs(n),
        "m" => std::time::Duration::from_millis(n),
        "u" => std::time::Duration::from_micros(n),
        "n" => std::time::Duration::from_nanos(n),
        other => panic!("unit {other}"),
    };
    assert!(
        sent_for <= std::time::Duration::from_secs(3),
        "carts got grpc-timeout {sent}"
    );
    serving.stopped().await;
}

/// Starts carts behind a humus server of `setup` (TLS), and a client of it
/// whose Setup has `capture`'s telemetry and no injector, so it sends the
/// caller's baggage, and its metadata, as they are.
async fn carts_behind(
    host: &Host,
    setup: &Setup,
    ca: &Ca,
    carts: Carts,
    capture: &Telemetry,
) -> (Serving, Client) {
    let server = Server::new(
        setup,
        Settings {
            addr: "carts:9090".into(),
            tls: tls(ca, "carts"),
            ..Settings::default()
        },
    )
    .unwrap()
    .add_service(CartsService(carts));
    (Serving::start(server).await, edge_client(host, ca, capture))
}

/// A GetCart request whose own metadata carries `baggage` (as a proxy
/// forwards what it was sent), with no baggage in its context.
fn with_baggage_metadata(baggage: &str) -> tonic::Request<CartRequest> {
    let mut request = get("c-1");
    request
        .metadata_mut()
        .insert("baggage", baggage.parse().unwrap());
    request
}

#[tokio::test(start_paused = true)]
async fn the_scenario_is_stripped_with_the_default_propagator() {
    let (ca, host, capture) = (Ca::new(), Host::new(), Telemetry::new());
    let (carts, seen) = recording_carts();
    // No telemetry: the Setup's propagator is the no-op one.
    let setup = setup(&host).with_faults(injector());
    let (serving, client) = carts_behind(&host, &setup, &ca, carts, &capture).await;
    let _: Response<Cart> = client
        .unary(&GET_CART, request_in(&caller(&capture), "c-1"))
        .await
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    let header = seen[0].2.as_deref().unwrap();
    assert!(!header.contains(KEY), "{header}");
    assert!(header.contains("tenant=acme"), "{header}");
    serving.stopped().await;
}

#[tokio::test(start_paused = true)]
async fn a_baggage_header_past_the_propagators_limits_is_dropped_and_the_strip_says_why() {
    let (ca, host, capture) = (Ca::new(), Host::new(), Telemetry::new());
    let (carts, seen) = recording_carts();
    let setup = setup(&host)
        .with_telemetry(capture.telemetry())
        .with_faults(injector());
    let (serving, client) = carts_behind(&host, &setup, &ca, carts, &capture).await;
    // The scenario is the 65th member: past what the propagator reads.
    let mut members: Vec<String> = (0..64).map(|i| format!("m{i}=v")).collect();
    members.push(format!("{KEY}=%7B%22rules%22%3A%5B%5D%7D"));
    let _: Response<Cart> = client
        .unary(&GET_CART, with_baggage_metadata(&members.join(",")))
        .await
        .unwrap();
    // An 8 KiB+ header, the scenario first.
    let long = format!("{KEY}=%7B%22rules%22%3A%5B%5D%7D,pad={}", "x".repeat(8192));
    let _: Response<Cart> = client
        .unary(&GET_CART, with_baggage_metadata(&long))
        .await
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    for (scenario, _, header) in &seen {
        assert_eq!((scenario, header), (&None, &None), "dropped whole");
    }
    let servers = servers(&capture);
    let why: Vec<String> = servers
        .iter()
        .flat_map(|s| s.events.iter())
        .filter(|e| e.name == fault::names::STRIP)
        .map(|e| {
            let attribute = e
                .attributes
                .iter()
                .find(|a| a.key.as_str() == fault::names::UNREADABLE)
                .expect("the strip says why");
            attribute.value.to_string()
        })
        .collect();
    assert_eq!(
        why,
        [
            "the baggage header has 65 members, over the 64 a propagator reads".to_owned(),
            format!(
                "the baggage header is {} bytes, over the 8192 a propagator reads",
                long.len()
            ),
        ]
    );
    serving.stopped().await;
}

#[tokio::test(start_paused = true)]
async fn a_streams_untrusted_scenario_reaches_neither_its_handler_nor_its_messages() {
    let (ca, host, capture) = (Ca::new(), Host::new(), Telemetry::new());
    let carts = Carts::new();
    // What the handler saw (its context, its metadata), then each message
    // as the response stream made it (the context current then).
    let seen = Arc::new(Mutex::new(Vec::<(bool, bool)>::new()));
    let saw = seen.clone();
    carts.on_watch_cart(move |s, req| {
        let has = |cx: &Context| cx.baggage().get(KEY).is_some();
        let header = s
            .metadata
            .get("baggage")
            .is_some_and(|v| v.to_str().unwrap().contains(KEY));
        saw.lock().unwrap().push((has(&Context::current()), header));
        let saw = saw.clone();
        let updates = futures_util::stream::iter(1..=2).map(move |n| {
            saw.lock().unwrap().push((has(&Context::current()), false));
            Ok(cart(&req.id, n))
        });
        async move { Ok(Response::new(updates)) }
    });
    let setup = setup(&host)
        .with_telemetry(capture.telemetry())
        .with_faults(injector());
    let (serving, client) = carts_behind(&host, &setup, &ca, carts, &capture).await;
    let mut stream = client
        .server_streaming::<_, Cart>(&WATCH_CART, request_in(&caller(&capture), "c-1"))
        .await
        .unwrap()
        .into_inner();
    while stream.message().await.unwrap().is_some() {}
    assert_eq!(*seen.lock().unwrap(), [(false, false); 3]);
    let server = &servers(&capture)[0];
    assert!(
        server.events.iter().any(|e| e.name == fault::names::STRIP),
        "{server:#?}"
    );
    serving.stopped().await;
}
