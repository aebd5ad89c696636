//! The tower layer that serves each request of a tonic server inside its
//! [`Inherited::scope`](super::Inherited::scope): [`InheritLayer`], its
//! service, response future and body.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use http::HeaderMap;
use opentelemetry::Context;
use opentelemetry::baggage::BaggageExt;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt as _;
use tokio::time::Instant;
use tower_layer::Layer;
use tower_service::Service;

use super::{Inherited, Scoped};
use crate::fault::Injector;
use crate::fault::strip::{BAGGAGE, Gate};
use crate::telemetry::HeaderExtractor;

/// A tower [`Layer`] for a tonic server: each request is served inside
/// [`Inherited::scope`], with the deadline of its `grpc-timeout` and the
/// trace context and baggage its headers carry, so every humus call its
/// handler makes inherits them, and so does every call made for a message
/// of its response stream (the body is polled in the same scope, an
/// [`InheritBody`]).
///
/// ```no_run
/// # async fn serve(setup: humus::Setup, routes: tonic::service::Routes) -> Result<(), tonic::transport::Error> {
/// tonic::transport::Server::builder()
///     .layer(humus::grpc::deadline::InheritLayer::from_setup(&setup))
///     .add_routes(routes)
///     .serve("127.0.0.1:50051".parse().unwrap())
///     .await
/// # }
/// ```
///
/// With failure injection on, [`from_setup`](InheritLayer::from_setup)'s
/// layer trusts no caller: a failure scenario in a request's baggage never
/// reaches the calls its handler makes. To trust some callers (a test
/// harness, a chaos tool), add a
/// [`StripScenarioLayer`](crate::grpc::server::StripScenarioLayer) with its
/// `trust_scenario` on the same server, which then decides for both.
/// Either order is safe: added first
/// (outermost), the strip layer hands this layer the request already
/// stripped; added after it, the strip layer serves the handler in a scope
/// of its own, the inherited deadline and context without the scenario
/// (one more scope per stripped request). Strip first is the cheaper:
///
/// ```no_run
/// # async fn serve(setup: humus::Setup, routes: tonic::service::Routes,
/// #     strip: humus::grpc::server::StripScenarioLayer) -> Result<(), tonic::transport::Error> {
/// tonic::transport::Server::builder()
///     .layer(strip)
///     .layer(humus::grpc::deadline::InheritLayer::from_setup(&setup))
///     .add_routes(routes)
///     .serve("127.0.0.1:50051".parse().unwrap())
///     .await
/// # }
/// ```
///
/// The deadline is measured from when the request reaches the layer, a
/// moment after tonic's server measured its own (so the server's timer,
/// which drops the handler, fires first or on the same tick; the client
/// counts a call dropped that close to its deadline as the deadline's).
///
/// [`Layer`]: https://docs.rs/tower-layer/0.3/tower_layer/trait.Layer.html
#[derive(Clone, Debug)]
pub struct InheritLayer {
    propagator: Arc<dyn TextMapPropagator + Send + Sync>,
    scenarios: Scenarios,
}

/// What an [`InheritLayer`] hands on of a caller's baggage, when no
/// [`StripScenarioLayer`](crate::grpc::server::StripScenarioLayer) before
/// it decided.
#[derive(Clone, Debug)]
enum Scenarios {
    /// None of it: without the scenario convention the layer cannot tell
    /// a scenario from another member ([`InheritLayer::new`]).
    DropBaggage,
    /// All of it but the scenario, which this strip removes
    /// ([`InheritLayer::faults`]).
    Strip(Gate),
    /// All of it, scenario included ([`InheritLayer::trust_every_caller`]).
    TrustEveryCaller,
}

impl InheritLayer {
    /// A layer that reads each request's trace context and baggage with
    /// `propagator` (the service's own, so it reads what its callers'
    /// propagators write). It trusts no caller: knowing no scenario
    /// convention, it hands on the trace context and none of the caller's
    /// baggage, unless a
    /// [`StripScenarioLayer`](crate::grpc::server::StripScenarioLayer)
    /// before it decided. Give it the service's injector
    /// ([`faults`](InheritLayer::faults)) for it to hand on the baggage
    /// without the failure scenario, or trust every caller by name
    /// ([`trust_every_caller`](InheritLayer::trust_every_caller)).
    pub fn new(propagator: Arc<dyn TextMapPropagator + Send + Sync>) -> InheritLayer {
        InheritLayer {
            propagator,
            scenarios: Scenarios::DropBaggage,
        }
    }

    /// A layer with `setup`'s propagator
    /// ([`Telemetry::shared_propagator`](crate::telemetry::Telemetry::shared_propagator))
    /// and `setup`'s injector ([`faults`](InheritLayer::faults)).
    pub fn from_setup(setup: &crate::Setup) -> InheritLayer {
        InheritLayer::new(setup.telemetry().shared_propagator()).faults(setup.faults().clone())
    }

    /// Hands on each caller's baggage with the failure scenario stripped,
    /// as humus's [`Server`](crate::grpc::server::Server) does by default:
    /// with failure injection on in `injector` (or
    /// [strip-only](Injector::strip_only)), the scenario is removed from
    /// the request's `baggage` header (other members kept as they came)
    /// and so from what its handler's calls inherit, and a `baggage`
    /// value that cannot be read whole is dropped; a `humus.fit.strip`
    /// event goes on the span of the current context, where an outer
    /// tracing layer's server span is. Unless a
    /// [`StripScenarioLayer`](crate::grpc::server::StripScenarioLayer) on
    /// the same server decides (in either order: added after this layer,
    /// it is handed the scenario this layer withheld, and decides again):
    /// this layer alone trusts no caller. With injection off, the injector
    /// knows no scenario, and the baggage is handed on as it came, as
    /// humus's `Server` does with it.
    pub fn faults(mut self, injector: Injector) -> InheritLayer {
        self.scenarios = Scenarios::Strip(Gate::new(injector, Arc::clone(&self.propagator)));
        self
    }

    /// Hands on every caller's baggage as it came, failure scenario
    /// included: for a server whose every caller is trusted (a test
    /// harness), never for one that a caller outside the trust boundary
    /// can reach. A scenario that reaches a handler makes its calls fail
    /// for real, and those failures count in each client's circuit
    /// breaker, which every caller of that dependency shares.
    pub fn trust_every_caller(mut self) -> InheritLayer {
        self.scenarios = Scenarios::TrustEveryCaller;
        self
    }
}

impl<S> Layer<S> for InheritLayer {
    type Service = Inherit<S>;

    fn layer(&self, inner: S) -> Inherit<S> {
        Inherit {
            inner,
            propagator: self.propagator.clone(),
            scenarios: self.scenarios.clone(),
        }
    }
}

/// The service [`InheritLayer`] builds: serves each request inside
/// [`Inherited::scope`] (its `call`, its response future and its response
/// body alike).
#[derive(Clone, Debug)]
pub struct Inherit<S> {
    inner: S,
    propagator: Arc<dyn TextMapPropagator + Send + Sync>,
    scenarios: Scenarios,
}

/// The mark a [`StripScenarioLayer`](crate::grpc::server::StripScenarioLayer)
/// (with injection on) leaves on a request: it decided about its scenario,
/// so an inner [`InheritLayer`] hands on what it left.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScenarioVetted;

impl<S, B, RB> Service<http::Request<B>> for Inherit<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
{
    type Response = http::Response<InheritBody<RB>>;
    type Error = S::Error;
    type Future = InheritFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let received = Instant::now();
        let vetted = request.extensions().get::<ScenarioVetted>().is_some();
        let (mut parts, body) = request.into_parts();
        let context = match &self.scenarios {
            // A strip layer decided: what it left is handed on.
            _ if vetted => extract(&*self.propagator, &parts.headers),
            Scenarios::TrustEveryCaller => extract(&*self.propagator, &parts.headers),
            Scenarios::DropBaggage => extract(&*self.propagator, &parts.headers)
                .with_baggage(opentelemetry::baggage::Baggage::new()),
            Scenarios::Strip(gate) => {
                // No caller is trusted here; the scenario is withheld for an
                // inner strip layer to decide again.
                let withhold = |parts: &mut http::request::Parts| {
                    if let Some(value) = parts.headers.get(BAGGAGE) {
                        let withheld = Withheld(value.clone());
                        parts.extensions.insert(withheld);
                    }
                    Ok::<_, std::convert::Infallible>(false)
                };
                let Ok(vetted) = gate.vet(&mut parts, Some(withhold));
                if let Some(stripped) = vetted.stripped {
                    stripped.record(&Context::current().span());
                }
                vetted.cx
            }
        };
        let request = http::Request::from_parts(parts, body);
        let inherited = Inherited::from_headers(request.headers(), received, context);
        let inner = &mut self.inner;
        let future = inherited.clone().sync_scope(|| inner.call(request));
        InheritFuture::new(inherited, future)
    }
}

/// The `baggage` header a request came with, before an
/// [`InheritLayer`] stripped its scenario: an inner
/// [`StripScenarioLayer`](crate::grpc::server::StripScenarioLayer) puts it
/// back and decides about the caller itself.
#[derive(Clone, Debug)]
pub(crate) struct Withheld(pub(crate) http::HeaderValue);

/// The caller's context, as `propagator` reads it from `headers`.
fn extract(propagator: &dyn TextMapPropagator, headers: &HeaderMap) -> Context {
    propagator.extract(&HeaderExtractor(headers))
}

pin_project_lite::pin_project! {
    /// The response future of [`Inherit`]: the inner service's, polled
    /// inside the request's [`Inherited::scope`]; its response's body is
    /// an [`InheritBody`] in the same scope. Like most futures, it panics
    /// if polled again after it completed.
    pub struct InheritFuture<F: Future> {
        #[pin]
        inner: Scoped<F>,
        body_scope: Option<Inherited>,
    }
}

impl<F: Future> InheritFuture<F> {
    /// `future`, and the body of its response, polled inside `inherited`.
    pub(crate) fn new(inherited: Inherited, future: F) -> InheritFuture<F> {
        InheritFuture {
            body_scope: Some(inherited.clone()),
            inner: inherited.scope(future),
        }
    }
}

impl<F: Future> fmt::Debug for InheritFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InheritFuture").finish_non_exhaustive()
    }
}

impl<F, RB, E> Future for InheritFuture<F>
where
    F: Future<Output = Result<http::Response<RB>, E>>,
{
    type Output = Result<http::Response<InheritBody<RB>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = std::task::ready!(this.inner.poll(cx));
        let scope = this
            .body_scope
            .take()
            .expect("an InheritFuture is not polled after it completed");
        Poll::Ready(response.map(|response| response.map(|inner| InheritBody::new(inner, scope))))
    }
}

pin_project_lite::pin_project! {
    /// The response body of [`Inherit`] (and of humus's HTTP server
    /// layer, [`ContextService`](crate::http::server::ContextService)):
    /// the inner service's, frame for
    /// frame, each frame polled inside the request's [`Inherited::scope`].
    /// A response stream's messages are made as its body is polled, after
    /// the handler's future has completed, so the calls made for each
    /// message inherit the RPC's deadline and context as the handler's do.
    pub struct InheritBody<B> {
        #[pin]
        inner: B,
        // `None` for a body made in no scope (a panic's answer).
        scope: Option<Inherited>,
    }
}

impl<B> InheritBody<B> {
    /// `inner`, polled inside `scope`.
    pub(crate) fn new(inner: B, scope: Inherited) -> InheritBody<B> {
        InheritBody {
            inner,
            scope: Some(scope),
        }
    }

    /// The inner service's body, out of its scope.
    pub fn into_inner(self) -> B {
        self.inner
    }
}

/// An empty body (`B`'s default) in no scope.
impl<B: Default> Default for InheritBody<B> {
    fn default() -> Self {
        InheritBody {
            inner: B::default(),
            scope: None,
        }
    }
}

impl<B> fmt::Debug for InheritBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InheritBody").finish_non_exhaustive()
    }
}

impl<B: http_body::Body> http_body::Body for InheritBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        let this = self.project();
        match this.scope {
            Some(scope) => scope.clone().sync_scope(|| this.inner.poll_frame(cx)),
            None => this.inner.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
