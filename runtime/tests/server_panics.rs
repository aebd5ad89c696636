//! A handler's panic, served on real loopback by humus's `Server` and by
//! a `tonic::transport::Server` with humus's `StripScenarioLayer`: the
//! caller is answered `INTERNAL` ("the handler panicked", never the
//! payload), the SERVER span records it as the server's error with the
//! payload in an `exception` event, and the connection serves the next
//! call. A stream that panics after its first message ends with `INTERNAL`
//! in its trailers. A panic of the `trust_scenario` function is answered
//! the same way, and the handler is not run.

mod client_support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};

use client_support::*;
use futures_util::StreamExt;
use humus::Setup;
use humus::fault::jsonscenario::Codec;
use humus::fault::{self, Fault, Injector, Rule, Scenario};
use humus::grpc::server::{Caller, Server, Settings, StripScenarioLayer, TrustScenario};
use humus::telemetry::names::*;
use humus::testing::Telemetry;
use opentelemetry::Context;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{
    SpanKind, Status as SpanStatus, TraceContextExt, Tracer, TracerProvider,
};
use opentelemetry_sdk::propagation::BaggagePropagator;
use opentelemetry_sdk::trace::SpanData;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::server::TcpConnectInfo;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Response, Status};
use tonic_prost::ProstCodec;

/// Carts whose GetCart and WatchCart panic for the cart `boom`, and whose
/// `call` itself panics for the method `CallPanics`; it keeps the remote
/// address of every request's connection.
#[derive(Clone, Default)]
struct Panicky {
    peers: Arc<Mutex<Vec<Option<SocketAddr>>>>,
}

impl NamedService for Panicky {
    const NAME: &'static str = "test.carts.v1.Carts";
}

impl tower_service::Service<http::Request<Body>> for Panicky {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let peer = req
            .extensions()
            .get::<TcpConnectInfo>()
            .and_then(|i| i.remote_addr);
        self.peers.lock().unwrap().push(peer);
        let path = req.uri().path().to_owned();
        assert_ne!(path, "/test.carts.v1.Carts/CallPanics", "secret in call");
        Box::pin(async move {
            let response = if path == GET_CART.full_name {
                let svc = tower::service_fn(|r: Request<CartRequest>| async move {
                    let id = r.into_inner().id;
                    if id == "boom" {
                        panic!("secret 42 in GetCart");
                    }
                    Ok::<_, Status>(Response::new(cart(&id, 0)))
                });
                tonic::server::Grpc::new(ProstCodec::<Cart, CartRequest>::default())
                    .unary(svc, req)
                    .await
            } else {
                let svc = tower::service_fn(|r: Request<CartRequest>| async move {
                    let id = r.into_inner().id;
                    let first = futures_util::stream::iter([Ok(cart(&id, 1))]);
                    // Pending once first, so that tonic sends the first
                    // message before the panic (it encodes what is ready
                    // into one frame).
                    let then = futures_util::stream::once(async {
                        tokio::task::yield_now().await;
                        if true {
                            panic!("secret 42 in WatchCart");
                        }
                        Ok(cart("never", 0))
                    });
                    Ok::<_, Status>(Response::new(first.chain(then)))
                });
                tonic::server::Grpc::new(ProstCodec::<Cart, CartRequest>::default())
                    .server_streaming(svc, req)
                    .await
            };
            Ok(response)
        })
    }
}

struct Serving {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), BoxError>>,
    channel: Channel,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const KEY: &str = "acme.fault";

/// An injector that is on, reading scenarios under [`KEY`].
fn injection_on() -> Injector {
    Injector::new(fault::Settings::new(Codec::new(KEY).unwrap())).unwrap()
}

/// A trust function that panics with a payload the caller must not see.
fn panicking_trust(_: &Caller<'_>) -> bool {
    panic!("secret 42 in trust_scenario")
}

impl Serving {
    async fn start(capture: &Telemetry, panicky: &Panicky) -> Serving {
        let setup = Setup::new().with_telemetry(capture.telemetry());
        Serving::start_with(&setup, Settings::default(), panicky).await
    }

    /// humus's server, on `setup`, with `settings` but for its address.
    async fn start_with(setup: &Setup, settings: Settings, panicky: &Panicky) -> Serving {
        let mut server = Server::new(
            setup,
            Settings {
                addr: "127.0.0.1:0".into(),
                plaintext: true,
                ..settings
            },
        )
        .unwrap()
        .add_service(panicky.clone());
        server.bind().await.unwrap();
        let addr = server.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            server
                .serve(async move {
                    let _ = stopped.await;
                })
                .await
                .map_err(BoxError::from)
        });
        Serving::connected(addr, stop, task).await
    }

    /// tonic's own server, with `layer` (humus's) on it, and the context
    /// of an outer layer's span in every request's extensions when `outer`
    /// is given.
    async fn start_tonic(
        layer: StripScenarioLayer,
        outer: Option<Context>,
        panicky: &Panicky,
    ) -> Serving {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let outer_layer = tower::util::MapRequestLayer::new(move |mut r: http::Request<Body>| {
            if let Some(cx) = &outer {
                r.extensions_mut().insert(cx.clone());
            }
            r
        });
        let router = tonic::transport::Server::builder()
            .layer(outer_layer)
            .layer(layer)
            .add_service(panicky.clone());
        let task = tokio::spawn(async move {
            router
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async move {
                    let _ = stopped.await;
                })
                .await
                .map_err(BoxError::from)
        });
        Serving::connected(addr, stop, task).await
    }

    async fn connected(
        addr: SocketAddr,
        stop: oneshot::Sender<()>,
        task: JoinHandle<Result<(), BoxError>>,
    ) -> Serving {
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        Serving {
            stop: Some(stop),
            task,
            channel,
        }
    }

    async fn get_cart(&self, id: &str) -> Result<Cart, Status> {
        self.get_cart_with(Request::new(CartRequest { id: id.into() }))
            .await
    }

    /// GetCart with a failure scenario in the request's W3C baggage.
    async fn get_cart_under_test(&self, id: &str) -> Result<Cart, Status> {
        let codec = Codec::new(KEY).unwrap();
        let scenario = Scenario::new([Rule::new(
            "grpc:test.carts.v1.Carts/*",
            Fault {
                abort: true,
                ..Fault::NONE
            },
        )]);
        let cx = fault::with_scenario(&Context::new(), &codec, &scenario).unwrap();
        let mut headers = std::collections::HashMap::new();
        BaggagePropagator::new().inject_context(&cx, &mut headers);
        let mut request = Request::new(CartRequest { id: id.into() });
        request
            .metadata_mut()
            .insert("baggage", headers["baggage"].parse().unwrap());
        self.get_cart_with(request).await
    }

    async fn get_cart_with(&self, request: Request<CartRequest>) -> Result<Cart, Status> {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        grpc.ready().await.unwrap();
        grpc.unary(
            request,
            GET_CART.full_name.parse().unwrap(),
            ProstCodec::<CartRequest, Cart>::default(),
        )
        .await
        .map(Response::into_inner)
    }

    async fn stopped(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap().unwrap();
    }
}

fn server_span(capture: &Telemetry, name: &str) -> SpanData {
    let spans = capture.spans();
    spans
        .iter()
        .rfind(|s| s.span_kind == SpanKind::Server && s.name == name)
        .unwrap_or_else(|| panic!("no SERVER span {name}: {spans:#?}"))
        .clone()
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.as_str().into_owned())
}

/// The span records the panic as the server's INTERNAL, with the payload
/// in its `exception` event only.
fn assert_panicked(span: &SpanData, payload: &str) {
    assert_eq!(
        attribute(span, RPC_RESPONSE_STATUS_CODE).as_deref(),
        Some("INTERNAL")
    );
    assert_eq!(attribute(span, ERROR_TYPE).as_deref(), Some("INTERNAL"));
    assert_eq!(span.status, SpanStatus::error("the handler panicked"));
    let event = span
        .events
        .iter()
        .find(|e| e.name == EXCEPTION_EVENT)
        .unwrap_or_else(|| panic!("no exception event: {span:#?}"));
    let of = |key: &str| {
        event
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.as_str().into_owned())
    };
    assert_eq!(of(EXCEPTION_TYPE).as_deref(), Some(EXCEPTION_TYPE_PANIC));
    assert_eq!(of(EXCEPTION_MESSAGE).as_deref(), Some(payload));
}

#[tokio::test]
async fn a_unary_handlers_panic_is_internal_and_the_connection_serves_the_next_call() {
    let capture = Telemetry::new();
    let panicky = Panicky::default();
    let serving = Serving::start(&capture, &panicky).await;

    let status = serving.get_cart("boom").await.unwrap_err();
    assert_eq!(status.code(), Code::Internal, "{status:?}");
    assert_eq!(status.message(), "the handler panicked");
    assert_panicked(
        &server_span(&capture, "test.carts.v1.Carts/GetCart"),
        "secret 42 in GetCart",
    );

    let cart = serving.get_cart("c-1").await.unwrap();
    assert_eq!(cart.id, "c-1");
    let span = server_span(&capture, "test.carts.v1.Carts/GetCart");
    assert_eq!(
        attribute(&span, RPC_RESPONSE_STATUS_CODE).as_deref(),
        Some("OK")
    );
    assert_eq!(span.status, SpanStatus::Unset);
    // Both calls came over one connection.
    let peers = panicky.peers.lock().unwrap().clone();
    assert_eq!(peers.len(), 2);
    assert!(peers[0].is_some());
    assert_eq!(peers[0], peers[1]);
    serving.stopped().await;
}

#[tokio::test]
async fn a_panic_in_a_services_call_is_internal() {
    let capture = Telemetry::new();
    let serving = Serving::start(&capture, &Panicky::default()).await;
    let mut grpc = tonic::client::Grpc::new(serving.channel.clone());
    grpc.ready().await.unwrap();
    let status = grpc
        .unary::<_, Cart, _>(
            Request::new(CartRequest { id: "c-1".into() }),
            "/test.carts.v1.Carts/CallPanics".parse().unwrap(),
            ProstCodec::<CartRequest, Cart>::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Internal, "{status:?}");
    assert_eq!(status.message(), "the handler panicked");
    let span = server_span(&capture, "test.carts.v1.Carts/CallPanics");
    assert_eq!(
        attribute(&span, RPC_RESPONSE_STATUS_CODE).as_deref(),
        Some("INTERNAL")
    );
    assert_eq!(span.status, SpanStatus::error("the handler panicked"));
    assert!(serving.get_cart("c-2").await.is_ok());
    serving.stopped().await;
}

/// Opens WatchCart for `c-1` through `grpc` (ready): its first message
/// arrives, then the stream ends `INTERNAL` "the handler panicked" in its
/// trailers.
async fn watch_cart_panics_after_one_message(grpc: &mut tonic::client::Grpc<Channel>) {
    let mut stream = grpc
        .server_streaming(
            Request::new(CartRequest { id: "c-1".into() }),
            WATCH_CART.full_name.parse().unwrap(),
            ProstCodec::<CartRequest, Cart>::default(),
        )
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert_eq!((first.id.as_str(), first.items), ("c-1", 1));
    let status = stream.message().await.unwrap_err();
    assert_eq!(status.code(), Code::Internal, "{status:?}");
    assert_eq!(status.message(), "the handler panicked");
}

#[tokio::test]
async fn a_stream_that_panics_after_its_headers_ends_internal_in_its_trailers() {
    let capture = Telemetry::new();
    let serving = Serving::start(&capture, &Panicky::default()).await;
    let mut grpc = tonic::client::Grpc::new(serving.channel.clone());
    grpc.ready().await.unwrap();
    watch_cart_panics_after_one_message(&mut grpc).await;
    assert_panicked(
        &server_span(&capture, "test.carts.v1.Carts/WatchCart"),
        "secret 42 in WatchCart",
    );
    assert!(serving.get_cart("c-2").await.is_ok());
    serving.stopped().await;
}

/// Calls GetCart for `c-1`, then under test (its scenario asks the trust
/// function, which panics), then `c-2`: the middle call is answered
/// INTERNAL without reaching the handler, over the connection the others
/// use.
async fn assert_a_panicking_trust_is_internal(serving: &Serving, panicky: &Panicky) {
    assert!(serving.get_cart("c-1").await.is_ok());
    let status = serving.get_cart_under_test("c-1").await.unwrap_err();
    assert_eq!(status.code(), Code::Internal, "{status:?}");
    assert_eq!(status.message(), "the handler panicked");
    assert!(!status.message().contains("secret"));
    assert!(serving.get_cart("c-2").await.is_ok());
    // The handler saw the two calls without a scenario only, both over
    // one connection.
    let peers = panicky.peers.lock().unwrap().clone();
    assert_eq!(peers.len(), 2, "{peers:?}");
    assert!(peers[0].is_some());
    assert_eq!(peers[0], peers[1]);
}

#[tokio::test]
async fn a_panic_of_the_trust_function_is_internal_and_recorded_on_the_server_span() {
    let capture = Telemetry::new();
    let panicky = Panicky::default();
    let setup = Setup::new()
        .with_telemetry(capture.telemetry())
        .with_faults(injection_on());
    let settings = Settings {
        trust_scenario: Some(TrustScenario::new(panicking_trust)),
        plaintext: true,
        ..Settings::default()
    };
    let serving = Serving::start_with(&setup, settings, &panicky).await;
    assert_a_panicking_trust_is_internal(&serving, &panicky).await;
    let spans = capture.spans();
    let get_carts: Vec<_> = spans
        .iter()
        .filter(|s| s.span_kind == SpanKind::Server && s.name == "test.carts.v1.Carts/GetCart")
        .collect();
    assert_eq!(get_carts.len(), 3, "{spans:#?}");
    assert_panicked(get_carts[1], "secret 42 in trust_scenario");
    serving.stopped().await;
}

#[tokio::test]
async fn tonics_server_with_humus_layer_answers_a_handlers_panic_internal() {
    let panicky = Panicky::default();
    let layer = StripScenarioLayer::new(Injector::off(), Arc::new(BaggagePropagator::new()));
    let serving = Serving::start_tonic(layer, None, &panicky).await;

    let status = serving.get_cart("boom").await.unwrap_err();
    assert_eq!(status.code(), Code::Internal, "{status:?}");
    assert_eq!(status.message(), "the handler panicked");
    let cart = serving.get_cart("c-1").await.unwrap();
    assert_eq!(cart.id, "c-1");
    // Both calls came over one connection.
    let peers = panicky.peers.lock().unwrap().clone();
    assert_eq!(peers.len(), 2);
    assert!(peers[0].is_some());
    assert_eq!(peers[0], peers[1]);
    serving.stopped().await;
}

#[tokio::test]
async fn tonics_server_with_humus_layer_answers_a_panic_in_call_and_in_a_stream_internal() {
    let panicky = Panicky::default();
    let layer = StripScenarioLayer::new(Injector::off(), Arc::new(BaggagePropagator::new()));
    let serving = Serving::start_tonic(layer, None, &panicky).await;
    let mut grpc = tonic::client::Grpc::new(serving.channel.clone());
    grpc.ready().await.unwrap();
    let status = grpc
        .unary::<_, Cart, _>(
            Request::new(CartRequest { id: "c-1".into() }),
            "/test.carts.v1.Carts/CallPanics".parse().unwrap(),
            ProstCodec::<CartRequest, Cart>::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Internal, "{status:?}");
    assert_eq!(status.message(), "the handler panicked");

    grpc.ready().await.unwrap();
    watch_cart_panics_after_one_message(&mut grpc).await;
    assert!(serving.get_cart("c-2").await.is_ok());
    serving.stopped().await;
}

#[tokio::test]
async fn tonics_server_with_humus_layer_answers_a_panicking_trust_internal_with_an_event() {
    let capture = Telemetry::new();
    let tracer = capture.tracer_provider().tracer("outer");
    let outer = Context::new().with_span(tracer.start("outer server span"));
    let panicky = Panicky::default();
    let layer = StripScenarioLayer::new(injection_on(), Arc::new(BaggagePropagator::new()))
        .trust_scenario(panicking_trust);
    let serving = Serving::start_tonic(layer, Some(outer.clone()), &panicky).await;
    assert_a_panicking_trust_is_internal(&serving, &panicky).await;
    outer.span().end();

    // The outer layer's span has the panic's event, and only it.
    let spans = capture.spans();
    let span = spans
        .iter()
        .find(|s| s.name == "outer server span")
        .unwrap_or_else(|| panic!("no outer span: {spans:#?}"));
    let events: Vec<_> = span.events.iter().collect();
    assert_eq!(events.len(), 1, "{span:#?}");
    assert_eq!(events[0].name, EXCEPTION_EVENT);
    let message = events[0]
        .attributes
        .iter()
        .find(|kv| kv.key.as_str() == EXCEPTION_MESSAGE)
        .map(|kv| kv.value.as_str().into_owned());
    assert_eq!(message.as_deref(), Some("secret 42 in trust_scenario"));
    serving.stopped().await;
}
