//! The server layer on a real tonic server, over an in-memory connection:
//! an untrusted caller's scenario never reaches the handler while other
//! members do; a caller trusted by its certificate (the connection's
//! `PeerCertificates` connect info) keeps it (docs/failure-injection.md,
//! "Trust and stripping"); with an `InheritLayer` on the same server, in
//! either order, what the handler's calls inherit follows the strip; an
//! `InheritLayer` with the service's injector and no strip layer trusts
//! no caller.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};

use http::uri::PathAndQuery;
use humus::fault::{self, Fault, Injector, Rule, Scenario, Settings, jsonscenario};
use humus::grpc::deadline::{InheritLayer, Inherited};
use humus::grpc::server::{Caller, PeerCertificates, StripScenarioLayer};
use hyper_util::rt::TokioIo;
use opentelemetry::Context;
use opentelemetry::baggage::BaggageExt;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry_sdk::propagation::BaggagePropagator;
use rustls_pki_types::CertificateDer;
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio_stream::wrappers::ReceiverStream;
use tonic::server::NamedService;
use tonic::transport::server::Connected;
use tonic::transport::{Endpoint, Server};
use tonic_prost::ProstCodec;

const KEY: &str = "acme.fault";

/// What the handler saw: the scenario member and the tenant member.
type Seen = Arc<Mutex<Vec<(Option<String>, Option<String>)>>>;

/// What the handler's outbound calls would inherit: for each request, the
/// scenario member of the current `Inherited`'s baggage (`None` without
/// one) and of the current context's.
type Inheriting = Arc<Mutex<Vec<(Option<String>, Option<String>)>>>;

/// A one-method gRPC service, `/test.Orders/Pay`, taking and returning the
/// empty message, that records the baggage its handler reads.
#[derive(Clone)]
struct Orders {
    seen: Seen,
    inheriting: Inheriting,
}

impl NamedService for Orders {
    const NAME: &'static str = "test.Orders";
}

impl tower::Service<http::Request<tonic::body::Body>> for Orders {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let seen = self.seen.clone();
        let inheriting = self.inheriting.clone();
        let handler = tower::service_fn(move |req: tonic::Request<()>| {
            let scenario = |cx: &Context| cx.baggage().get(KEY).map(|v| v.as_str().to_owned());
            inheriting.lock().unwrap().push((
                Inherited::current().and_then(|i| scenario(i.context())),
                scenario(&Context::current()),
            ));
            let mut carrier = HashMap::new();
            if let Some(b) = req.metadata().get("baggage") {
                carrier.insert("baggage".to_owned(), b.to_str().unwrap().to_owned());
            }
            let cx = BaggagePropagator::new().extract(&carrier);
            let b = cx.baggage();
            seen.lock().unwrap().push((
                b.get(KEY).map(|v| v.as_str().to_owned()),
                b.get("tenant").map(|v| v.as_str().to_owned()),
            ));
            async { Ok::<_, tonic::Status>(tonic::Response::new(())) }
        });
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ProstCodec::<(), ()>::default());
            Ok(grpc.unary(handler, req).await)
        })
    }
}

/// A connection whose peer presented `certs`, as a TLS acceptor would
/// record them.
struct CertIo {
    io: DuplexStream,
    certs: PeerCertificates,
}

impl Connected for CertIo {
    type ConnectInfo = PeerCertificates;

    fn connect_info(&self) -> PeerCertificates {
        self.certs.clone()
    }
}

impl AsyncRead for CertIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for CertIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Where an `InheritLayer` goes, next to the strip layer.
#[derive(Clone, Copy, Debug)]
enum Inherit {
    /// None.
    No,
    /// Added before the strip layer: outermost, it reads the request first.
    Before,
    /// Added after it: it reads the stripped request.
    After,
    /// Alone, without the strip layer (which is then not used).
    Alone,
}

/// Starts `orders` behind `layer` and returns a client channel to it. With
/// `certs`, each connection presents them.
async fn serve(
    layer: StripScenarioLayer,
    certs: Option<PeerCertificates>,
) -> (tonic::transport::Channel, Seen) {
    let (channel, seen, _) = serve_inheriting(layer, certs, Inherit::No).await;
    (channel, seen)
}

/// [`serve`], with an `InheritLayer` where `inherit` says.
async fn serve_inheriting(
    layer: StripScenarioLayer,
    certs: Option<PeerCertificates>,
    inherit: Inherit,
) -> (tonic::transport::Channel, Seen, Inheriting) {
    serve_inheriting_with(layer, certs, inherit, injector()).await
}

/// [`serve_inheriting`], the `InheritLayer` with `injector`.
async fn serve_inheriting_with(
    layer: StripScenarioLayer,
    certs: Option<PeerCertificates>,
    inherit: Inherit,
    injector: Injector,
) -> (tonic::transport::Channel, Seen, Inheriting) {
    let seen = Seen::default();
    let inheriting = Inheriting::default();
    let orders = Orders {
        seen: seen.clone(),
        inheriting: inheriting.clone(),
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<CertIo, io::Error>>(4);
    let incoming = ReceiverStream::new(rx);
    let propagator = Arc::new(BaggagePropagator::new());
    // The service's injector, as `InheritLayer::from_setup` takes it.
    let inherit_layer = InheritLayer::new(propagator).faults(injector);
    match inherit {
        Inherit::No => {
            let server = Server::builder().layer(layer).add_service(orders);
            tokio::spawn(server.serve_with_incoming(incoming));
        }
        Inherit::Before => {
            let server = Server::builder()
                .layer(inherit_layer)
                .layer(layer)
                .add_service(orders);
            tokio::spawn(server.serve_with_incoming(incoming));
        }
        Inherit::After => {
            let server = Server::builder()
                .layer(layer)
                .layer(inherit_layer)
                .add_service(orders);
            tokio::spawn(server.serve_with_incoming(incoming));
        }
        Inherit::Alone => {
            drop(layer);
            let server = Server::builder().layer(inherit_layer).add_service(orders);
            tokio::spawn(server.serve_with_incoming(incoming));
        }
    }
    let certs = certs.unwrap_or_else(|| PeerCertificates::new(Vec::new()));
    let channel = Endpoint::from_static("http://orders:9090")
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let (client, server) = tokio::io::duplex(64 * 1024);
            let tx = tx.clone();
            let certs = certs.clone();
            async move {
                tx.send(Ok(CertIo { io: server, certs }))
                    .await
                    .map_err(|_| io::Error::other("server gone"))?;
                Ok::<_, io::Error>(TokioIo::new(client))
            }
        }))
        .await
        .unwrap();
    (channel, seen, inheriting)
}

/// Calls `/test.Orders/Pay` with `cx`'s baggage in the `baggage` header,
/// as a client's propagator writes it.
async fn pay(channel: &tonic::transport::Channel, cx: &Context) {
    let mut headers = HashMap::new();
    BaggagePropagator::new().inject_context(cx, &mut headers);
    let mut req = tonic::Request::new(());
    req.metadata_mut()
        .insert("baggage", headers["baggage"].parse().unwrap());
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.unwrap();
    grpc.unary::<(), (), _>(
        req,
        PathAndQuery::from_static("/test.Orders/Pay"),
        ProstCodec::default(),
    )
    .await
    .unwrap();
}

fn codec() -> jsonscenario::Codec {
    jsonscenario::Codec::new(KEY).unwrap()
}

/// A request under test, aborting payments, with tenant=acme.
fn under_test() -> (Context, String) {
    let cx = Context::new().with_baggage([opentelemetry::KeyValue::new("tenant", "acme")]);
    let scenario = Scenario::new([Rule::new(
        "grpc:payments.v1.Payments/*",
        Fault {
            abort: true,
            ..Fault::NONE
        },
    )]);
    let json = codec().to_json(&scenario).unwrap();
    (
        fault::with_scenario(&cx, &codec(), &scenario).unwrap(),
        json,
    )
}

fn injector() -> Injector {
    Injector::new(Settings::new(codec())).unwrap()
}

fn layer() -> StripScenarioLayer {
    StripScenarioLayer::new(injector(), Arc::new(BaggagePropagator::new()))
}

#[tokio::test]
async fn an_untrusted_scenario_is_stripped_and_other_members_arrive() {
    let (channel, seen) = serve(layer(), None).await;
    let (cx, _) = under_test();
    pay(&channel, &cx).await;
    assert_eq!(*seen.lock().unwrap(), [(None, Some("acme".to_owned()))]);
}

#[tokio::test]
async fn a_caller_trusted_by_its_certificate_keeps_its_scenario() {
    let trusted = layer().trust_scenario(|c: &Caller<'_>| {
        c.method() == "/test.Orders/Pay"
            && c.peer_certificates()
                .is_some_and(|certs| certs.first().is_some_and(|leaf| leaf.as_ref() == b"mesh"))
    });
    let mesh = PeerCertificates::new(vec![CertificateDer::from(b"mesh".to_vec())]);
    let (channel, seen) = serve(trusted.clone(), Some(mesh)).await;
    let (cx, json) = under_test();
    pay(&channel, &cx).await;
    assert_eq!(
        *seen.lock().unwrap(),
        [(Some(json), Some("acme".to_owned()))]
    );

    let stranger = PeerCertificates::new(vec![CertificateDer::from(b"other".to_vec())]);
    let (channel, seen) = serve(trusted, Some(stranger)).await;
    pay(&channel, &cx).await;
    assert_eq!(*seen.lock().unwrap(), [(None, Some("acme".to_owned()))]);
}

#[tokio::test]
async fn injection_off_strips_nothing() {
    let off = StripScenarioLayer::new(Injector::default(), Arc::new(BaggagePropagator::new()));
    let (channel, seen) = serve(off, None).await;
    let (cx, json) = under_test();
    pay(&channel, &cx).await;
    assert_eq!(
        *seen.lock().unwrap(),
        [(Some(json), Some("acme".to_owned()))]
    );
}

/// With injection on, or strip-only (a service that takes no part in
/// failure injection), in both layers, alone or together.
#[tokio::test]
async fn an_untrusted_scenario_is_not_inherited_whichever_layer_is_outermost() {
    let on_and_strip_only = [injector, || Injector::strip_only(codec())];
    for (inherit, faults) in [Inherit::Before, Inherit::After, Inherit::Alone]
        .into_iter()
        .flat_map(|inherit| on_and_strip_only.map(|faults| (inherit, faults)))
    {
        let layer = StripScenarioLayer::new(faults(), Arc::new(BaggagePropagator::new()));
        let (channel, seen, inheriting) =
            serve_inheriting_with(layer, None, inherit, faults()).await;
        let (cx, _) = under_test();
        pay(&channel, &cx).await;
        if !matches!(inherit, Inherit::Alone) {
            assert_eq!(
                *seen.lock().unwrap(),
                [(None, Some("acme".to_owned()))],
                "{inherit:?}"
            );
        }
        assert_eq!(*inheriting.lock().unwrap(), [(None, None)], "{inherit:?}");
    }
}

#[tokio::test]
async fn a_trusted_scenario_is_inherited_whichever_layer_is_outermost() {
    for inherit in [Inherit::Before, Inherit::After] {
        let trusted = layer().trust_scenario(|_: &Caller<'_>| true);
        let (channel, _, inheriting) = serve_inheriting(trusted, None, inherit).await;
        let (cx, json) = under_test();
        pay(&channel, &cx).await;
        assert_eq!(
            *inheriting.lock().unwrap(),
            [(Some(json.clone()), Some(json))],
            "{inherit:?}"
        );
    }
}
