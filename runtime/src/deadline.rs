//! The deadline and OpenTelemetry context a served RPC hands to the calls
//! its handler makes.
//!
//! A handler that calls its dependencies while serving an RPC works for a
//! caller who will wait only so long: the served RPC's `grpc-timeout`. A
//! call made on that caller's behalf cannot outlive it, and its trace
//! belongs under the served RPC's. As grpc-go passes its `ctx` and
//! grpc-java its `Context`, humus passes an [`Inherited`]: the served RPC's
//! deadline and context, current for the task that serves it, read by every
//! [`Client`](crate::grpc::client::Client) call made there without the handler
//! copying anything. A call's deadline is then the earliest of
//! [`Settings::timeout`](crate::grpc::client::Settings::timeout), the request's
//! own `grpc-timeout` and the inherited deadline; its context (the parent of
//! its attempts' spans, the baggage they carry) is the request extensions'
//! `opentelemetry::Context`, else the current one, which the scope attaches.
//!
//! Two ways in, neither tied to humus's own server:
//!
//! - [`InheritLayer`], one tower layer on a plain tonic server: it reads each
//!   request's trace context and baggage (with the service's propagator) and
//!   its `grpc-timeout`, and serves the request inside [`Inherited::scope`];
//! - [`Inherited::scope`] itself, for any other server, a tower layer of the
//!   user's, a job runner, or a test.
//!
//! ```no_run
//! use humus::grpc::deadline::InheritLayer;
//! # async fn serve(setup: humus::Setup) -> Result<(), tonic::transport::Error> {
//! # let router = tonic::service::Routes::default();
//! // Every handler's calls inherit its RPC's deadline and trace.
//! tonic::transport::Server::builder()
//!     .layer(InheritLayer::from_setup(&setup))
//!     .add_routes(router)
//!     .serve("127.0.0.1:50051".parse().unwrap())
//!     .await
//! # }
//! ```
//!
//! The scope is a tokio task-local: it holds while the served future is
//! polled, on whichever thread polls it, and not in a task the handler
//! spawns. humus's [`Server`](crate::grpc::server::Server), and
//! [`InheritLayer`] on a tonic server, also poll a response stream's body
//! inside it, so the calls made for a stream's messages inherit too. A handler
//! that hands work to a task of its own takes the inherited deadline
//! along:
//!
//! ```
//! use humus::grpc::deadline::Inherited;
//! # async fn handler() {
//! let work = async { /* calls through a humus Client */ };
//! let task = match Inherited::current() {
//!     Some(inherited) => tokio::spawn(inherited.scope(work)),
//!     None => tokio::spawn(async move { work.await }),
//! };
//! # let _ = task;
//! # }
//! ```
//!
//! A call dropped at or after its deadline, which is what a tonic server
//! does to a handler at the served RPC's `grpc-timeout`, counts as the
//! deadline (a failure for the circuit breaker), not as a caller who gave
//! up; see the [client's docs](crate::grpc::client#deadlines).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use http::HeaderMap;
use opentelemetry::Context;
use opentelemetry::baggage::BaggageExt;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt as _;
use tokio::task::futures::TaskLocalFuture;
use tokio::time::Instant;
use tower_layer::Layer;
use tower_service::Service;

use crate::fault::Injector;
use crate::fault::strip::{BAGGAGE, Gate};
use crate::telemetry::HeaderExtractor;

tokio::task_local! {
    static CURRENT: Inherited;
}

/// The deadline and OpenTelemetry context of the RPC being served, which
/// the calls made while serving it inherit.
///
/// Set it for a future with [`Inherited::scope`] (or for every request of
/// a tonic server with [`InheritLayer`]); read it with
/// [`Inherited::current`]. The humus client reads it when a call is made:
/// the call's deadline is the earliest of its own and this one.
#[derive(Clone)]
pub struct Inherited {
    deadline: Option<Instant>,
    /// How much earlier than `deadline` the caller's own may be: the step
    /// to which its `grpc-timeout` may have been rounded up
    /// ([`encoding_step`]); zero for a deadline given exactly.
    step: Duration,
    context: Context,
}

impl fmt::Debug for Inherited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inherited")
            .field("deadline", &self.deadline)
            .field("context", &self.context)
            .finish()
    }
}

impl Inherited {
    /// The inherited `deadline` (`None`: the served RPC has none) and
    /// `context` (its span is the parent of the calls' attempts; its
    /// baggage goes with them).
    pub fn new(deadline: Option<Instant>, context: Context) -> Inherited {
        Inherited {
            deadline,
            step: Duration::ZERO,
            context,
        }
    }

    /// The inherited deadline of a request received with a `grpc-timeout`
    /// (`served`: the deadline it sets and the timeout, as
    /// [`served_deadline`] reads them), and `context`: the caller may
    /// have rounded its timeout up by up to one [`encoding_step`].
    pub(crate) fn served(served: Option<(Instant, Duration)>, context: Context) -> Inherited {
        Inherited {
            deadline: served.map(|(at, _)| at),
            step: served.map_or(Duration::ZERO, |(_, timeout)| encoding_step(timeout)),
            context,
        }
    }

    /// This deadline, with `context`.
    pub(crate) fn with_context(&self, context: Context) -> Inherited {
        Inherited {
            deadline: self.deadline,
            step: self.step,
            context,
        }
    }

    /// The deadline of a request whose `headers` arrived at `received`:
    /// its `grpc-timeout` (gRPC over HTTP/2, "Timeout": 1 to 8 digits and a
    /// unit, `H`, `M`, `S`, `m`, `u` or `n`) measured from `received`, and
    /// `context`. A missing or malformed `grpc-timeout` is no deadline, as
    /// tonic's server reads it.
    ///
    /// `received` is best taken when the request reaches the server's
    /// service, as tonic's server measures the same deadline there (and
    /// drops the handler at it).
    ///
    /// The caller's own deadline may be a little earlier, as a client may
    /// round the timeout it sends up (gRPC's C core to three significant
    /// digits): a call its handler makes that is dropped up to that step
    /// before this deadline still counts as the deadline's (see the
    /// [client's docs](crate::grpc::client#deadlines)).
    pub fn from_headers(headers: &HeaderMap, received: Instant, context: Context) -> Inherited {
        Inherited::served(served_deadline(headers, received), context)
    }

    /// The served RPC's deadline, if it has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The served RPC's OpenTelemetry context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The `Inherited` in scope for the running task ([`Inherited::scope`]),
    /// if any. `None` outside a scope, and outside a tokio task.
    pub fn current() -> Option<Inherited> {
        CURRENT.try_with(Clone::clone).ok()
    }

    /// The deadline in scope, without cloning the context.
    pub(crate) fn current_deadline() -> Option<Instant> {
        CURRENT.try_with(|i| i.deadline).ok().flatten()
    }

    /// The deadline in scope and its step ([`encoding_step`]), without
    /// cloning the context.
    pub(crate) fn current_stepped() -> Option<(Instant, Duration)> {
        CURRENT
            .try_with(|i| i.deadline.map(|at| (at, i.step)))
            .ok()
            .flatten()
    }

    /// Runs `fut` with this `Inherited` current ([`Inherited::current`]) and
    /// its context attached as OpenTelemetry's current context, while `fut`
    /// is polled (and dropped). A tokio task-local: it holds on whichever
    /// thread polls `fut`, but not in tasks `fut` spawns. Scopes nest: the
    /// innermost is current.
    ///
    /// humus's clients read the inherited deadline and context when a call
    /// is made (`client.get(..).send()`, `ledger.charge(..)`), not when its
    /// future is polled, so make the call inside the scoped future:
    ///
    /// ```ignore
    /// // Bounded by the scope: the call is made inside it.
    /// inherited.scope(async move { ledger.charge(request).await }).await;
    /// // Not bounded by it: the call was made before, outside the scope.
    /// inherited.scope(ledger.charge(request)).await;
    /// ```
    ///
    /// For the same reason a call made in a handler and then spawned
    /// (`tokio::spawn(ledger.charge(request))`) keeps the handler's
    /// deadline and context, while a call made inside the spawned task
    /// (`tokio::spawn(async move { ledger.charge(request).await })`) has
    /// none.
    pub fn scope<F: Future>(self, fut: F) -> Scoped<F> {
        let context = self.context.clone();
        Scoped {
            inner: CURRENT.scope(self, fut),
            context,
        }
    }

    /// Runs `f` with this `Inherited` current and its context attached.
    pub(crate) fn sync_scope<R>(self, f: impl FnOnce() -> R) -> R {
        let _guard = self.context.clone().attach();
        CURRENT.sync_scope(self, f)
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Inherited::scope`]: `F`, with an [`Inherited`]
    /// current and its context attached while it is polled. Its output is
    /// `F`'s.
    pub struct Scoped<F: Future> {
        #[pin]
        inner: TaskLocalFuture<Inherited, F>,
        context: Context,
    }
}

impl<F: Future> fmt::Debug for Scoped<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scoped")
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _guard = this.context.clone().attach();
        this.inner.poll(cx)
    }
}

pin_project_lite::pin_project! {
    /// A future that is either `F` as it is, or `F` inside a scope of its
    /// own ([`Inherited::scope`]): the inner service's future under
    /// [`StripScenario`](crate::grpc::server::StripScenario), rescoped when
    /// it stripped a scenario that an outer [`InheritLayer`] had already
    /// read (see [`InheritLayer`]'s order). Its output is `F`'s.
    pub struct MaybeScoped<F: Future> {
        #[pin]
        inner: Either<F>,
    }
}

pin_project_lite::pin_project! {
    #[project = EitherProj]
    enum Either<F: Future> {
        As {
            #[pin]
            future: F,
        },
        Scoped {
            #[pin]
            future: Scoped<F>,
        },
    }
}

impl<F: Future> MaybeScoped<F> {
    /// `future`, polled in whatever scope polls it.
    pub(crate) fn unscoped(future: F) -> MaybeScoped<F> {
        MaybeScoped {
            inner: Either::As { future },
        }
    }

    /// `future`, polled inside `inherited`'s scope.
    pub(crate) fn scoped(inherited: Inherited, future: F) -> MaybeScoped<F> {
        MaybeScoped {
            inner: Either::Scoped {
                future: inherited.scope(future),
            },
        }
    }
}

impl<F: Future> fmt::Debug for MaybeScoped<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scoped = matches!(self.inner, Either::Scoped { .. });
        f.debug_struct("MaybeScoped")
            .field("scoped", &scoped)
            .finish_non_exhaustive()
    }
}

impl<F: Future> Future for MaybeScoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        match self.project().inner.project() {
            EitherProj::As { future } => future.poll(cx),
            EitherProj::Scoped { future } => future.poll(cx),
        }
    }
}

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
#[derive(Clone)]
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

impl fmt::Debug for InheritLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InheritLayer")
            .field("propagator", &self.propagator)
            .field("scenarios", &self.scenarios)
            .finish()
    }
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
#[derive(Clone)]
pub struct Inherit<S> {
    inner: S,
    propagator: Arc<dyn TextMapPropagator + Send + Sync>,
    scenarios: Scenarios,
}

impl<S: fmt::Debug> fmt::Debug for Inherit<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inherit")
            .field("inner", &self.inner)
            .field("propagator", &self.propagator)
            .field("scenarios", &self.scenarios)
            .finish()
    }
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

/// The metadata key of a call's deadline, the time left (gRPC over HTTP/2,
/// "Timeout").
pub(crate) const GRPC_TIMEOUT: &str = "grpc-timeout";

/// [`GRPC_TIMEOUT`] as a header name: inserted, read or removed without
/// parsing a string.
pub(crate) const GRPC_TIMEOUT_HEADER: http::HeaderName =
    http::HeaderName::from_static(GRPC_TIMEOUT);

/// The deadline a served request's `grpc-timeout` sets, counted from
/// `received`, and that timeout; `None` without one that parses, or one
/// too long for the clock.
pub(crate) fn served_deadline(
    headers: &HeaderMap,
    received: Instant,
) -> Option<(Instant, Duration)> {
    let timeout = headers
        .get(GRPC_TIMEOUT)
        .and_then(|v| parse_grpc_timeout(v.as_bytes()))?;
    Some((received.checked_add(timeout)?, timeout))
}

/// How much longer than the caller's time left a `grpc-timeout` of
/// `timeout` may say: 1 % of it. A client may round the time left up
/// before it sends it (gRPC's C core, to three significant digits: 1 ms
/// steps below 1 s, 10 ms below 10 s, 100 ms below 100 s; grpc-go, to the
/// microsecond), so the caller may end the call that much before the
/// deadline its server reads.
pub(crate) fn encoding_step(timeout: Duration) -> Duration {
    timeout / 100
}

/// `d`, to the millisecond (down): how a duration a message shows is
/// rounded.
pub(crate) fn to_millis(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Parses a `grpc-timeout` value: 1 to 8 digits and a unit (`H`, `M`,
/// `S`, `m`, `u`, `n`).
pub(crate) fn parse_grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Which bound a call's deadline is, of the three a humus client takes the
/// earliest of; its timeout error (HTTP) or its `DEADLINE_EXCEEDED` status
/// (gRPC) names it, so that an operator raises that one, not another.
///
/// Small and `Copy`: a call carries it beside its deadline, and it is
/// written out only when the error or status is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bound {
    /// The client's `Settings::timeout`, of this length.
    Setting(Duration),
    /// The request's own timeout, of this length, shorter than the
    /// setting (HTTP: `RequestBuilder::timeout`; gRPC: its `grpc-timeout`,
    /// tonic's `Request::set_timeout`).
    Request(Duration),
    /// The deadline of the RPC being served ([`Inherited`]), earlier than
    /// the call's own; with the time it left when the call was made
    /// (whole milliseconds).
    Inherited(Duration),
}

/// `the client's timeout setting, 10s`, `the request's own timeout, 2s`,
/// `the deadline inherited from the RPC being served (300ms left when the
/// call was made), not the client's timeout setting`.
impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::Setting(d) => write!(f, "the client's timeout setting, {d:?}"),
            Bound::Request(d) => write!(f, "the request's own timeout, {d:?}"),
            Bound::Inherited(left) if left.is_zero() => f.write_str(
                "the deadline inherited from the RPC being served (passed before the call was made), not the client's timeout setting",
            ),
            Bound::Inherited(left) => write!(
                f,
                "the deadline inherited from the RPC being served ({left:?} left when the call was made), not the client's timeout setting",
            ),
        }
    }
}

/// A call's deadline, and which [`Bound`] it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Deadline {
    /// When the call ends.
    pub(crate) at: Instant,
    /// Which bound that is.
    pub(crate) bound: Bound,
    /// How long before `at` (besides the client's slack) a drop of the
    /// call may be the inherited deadline's: the step to which the served
    /// RPC's caller may have rounded its `grpc-timeout` up
    /// ([`encoding_step`]), less the time from `at` to the inherited
    /// deadline. Zero for a deadline of the call's own alone.
    pub(crate) step: Duration,
}

impl Deadline {
    /// The deadline of a call made at `now`: the earliest of `setting`
    /// (the client's timeout, `None` where it does not apply: a gRPC
    /// stream), `request` (the request's own timeout) and `inherited` (the
    /// served RPC's deadline); `None` if it has none (or only timeouts too
    /// long for the clock).
    ///
    /// Of two bounds that fall at the same instant, the call's own comes
    /// before the inherited one, and the setting before the request's own
    /// timeout: a request's timeout names the deadline only when shorter
    /// than the setting, and the inherited deadline only when earlier than
    /// both (the same choice for the HTTP and the gRPC client).
    pub(crate) fn earliest(
        now: Instant,
        setting: Option<Duration>,
        request: Option<Duration>,
        inherited: Option<Instant>,
    ) -> Option<Deadline> {
        let (timeout, bound) = match (setting, request) {
            (Some(s), Some(r)) if r < s => (r, Bound::Request(r)),
            (Some(s), _) => (s, Bound::Setting(s)),
            (None, Some(r)) => (r, Bound::Request(r)),
            (None, None) => return inherited.map(|at| Deadline::inherited(now, at)),
        };
        match (now.checked_add(timeout), inherited) {
            (Some(at), Some(served)) if served < at => Some(Deadline::inherited(now, served)),
            (Some(at), _) => Some(Deadline {
                at,
                bound,
                step: Duration::ZERO,
            }),
            (None, served) => served.map(|at| Deadline::inherited(now, at)),
        }
    }

    /// The inherited deadline `at`, for a call made at `now`.
    fn inherited(now: Instant, at: Instant) -> Deadline {
        let left = at.saturating_duration_since(now);
        Deadline {
            at,
            bound: Bound::Inherited(to_millis(left)),
            step: Duration::ZERO,
        }
    }

    /// This deadline of a call that inherited `inherited`, a deadline
    /// and its [`encoding_step`] ([`Inherited::current_stepped`]): a drop
    /// within that step before the inherited deadline is its.
    pub(crate) fn stepped(mut self, inherited: Option<(Instant, Duration)>) -> Deadline {
        if let Some((at, step)) = inherited {
            self.step = step.saturating_sub(at.saturating_duration_since(self.at));
        }
        self
    }

    /// Whether a call (or a stream) dropped at `now` was dropped by this
    /// deadline rather than given up on by its caller: at or after it, or
    /// less than `slack` (the client's, for the two timers that end the
    /// call) and [`Deadline::step`] before it.
    pub(crate) fn dropped_by(&self, now: Instant, slack: Duration) -> bool {
        now + slack + self.step >= self.at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The earliest bound names the deadline; of two at the same instant,
    /// the setting before the request's own timeout, and either before the
    /// inherited deadline.
    #[test]
    fn the_earliest_bound_names_the_deadline_and_ties_go_to_the_calls_own() {
        let now = Instant::now();
        let (s1, s2) = (Duration::from_secs(1), Duration::from_secs(2));
        let earliest = |setting, request, inherited| {
            Deadline::earliest(now, setting, request, inherited).map(|d| (d.at, d.bound))
        };
        assert_eq!(earliest(None, None, None), None);
        assert_eq!(
            earliest(None, None, Some(now + s1)),
            Some((now + s1, Bound::Inherited(s1)))
        );
        assert_eq!(
            earliest(Some(s2), Some(s1), Some(now + s2)),
            Some((now + s1, Bound::Request(s1)))
        );
        assert_eq!(
            earliest(Some(s1), Some(s2), Some(now + s2)),
            Some((now + s1, Bound::Setting(s1)))
        );
        assert_eq!(
            earliest(Some(s2), Some(s2), Some(now + s1)),
            Some((now + s1, Bound::Inherited(s1)))
        );
        assert_eq!(
            earliest(None, Some(s2), Some(now + s1)),
            Some((now + s1, Bound::Inherited(s1)))
        );
        // Ties.
        assert_eq!(
            earliest(Some(s1), Some(s1), None),
            Some((now + s1, Bound::Setting(s1)))
        );
        assert_eq!(
            earliest(Some(s1), Some(s1), Some(now + s1)),
            Some((now + s1, Bound::Setting(s1)))
        );
        assert_eq!(
            earliest(None, Some(s1), Some(now + s1)),
            Some((now + s1, Bound::Request(s1)))
        );
        // The time left is in whole milliseconds, none once passed.
        let tiny = Duration::from_micros(1500);
        assert_eq!(
            earliest(None, None, Some(now + tiny)),
            Some((now + tiny, Bound::Inherited(Duration::from_millis(1))))
        );
        assert_eq!(
            Deadline::earliest(now + s1, None, None, Some(now)).map(|d| d.bound),
            Some(Bound::Inherited(Duration::ZERO))
        );
        // A timeout too long for the clock is no deadline.
        assert_eq!(earliest(Some(Duration::MAX), None, None), None);
        assert_eq!(
            earliest(Some(Duration::MAX), None, Some(now + s1)),
            Some((now + s1, Bound::Inherited(s1)))
        );
    }

    /// A drop counts as an inherited deadline's up to its step before
    /// it, beside the slack; the step shrinks by how much earlier the
    /// call's own deadline is, and a deadline of the call's own alone has
    /// none.
    #[test]
    fn an_inherited_deadlines_step_widens_what_a_drop_counts_as() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        let served = (now + ms(15_100), encoding_step(ms(15_100)));
        assert_eq!(served.1, ms(151));
        let earliest = |setting| {
            Deadline::earliest(now, Some(setting), None, Some(served.0))
                .unwrap()
                .stepped(Some(served))
        };
        let inherited = earliest(Duration::from_secs(60));
        assert_eq!((inherited.at, inherited.step), (served.0, ms(151)));
        assert!(inherited.dropped_by(now + ms(15_050), ms(20)));
        assert!(!inherited.dropped_by(now + ms(14_900), ms(20)));
        let own = earliest(ms(15_000));
        assert_eq!((own.at, own.step), (now + ms(15_000), ms(51)));
        let alone = Deadline::earliest(now, Some(ms(15_000)), None, None)
            .unwrap()
            .stepped(None);
        assert_eq!(alone.step, Duration::ZERO);
        assert!(!alone.dropped_by(now + ms(14_950), ms(20)));
    }

    #[test]
    fn bounds_are_written_as_the_http_client_words_them() {
        assert_eq!(
            Bound::Setting(Duration::from_secs(2)).to_string(),
            "the client's timeout setting, 2s"
        );
        assert_eq!(
            Bound::Request(Duration::from_millis(500)).to_string(),
            "the request's own timeout, 500ms"
        );
        assert_eq!(
            Bound::Inherited(Duration::from_millis(300)).to_string(),
            "the deadline inherited from the RPC being served (300ms left when the call was made), not the client's timeout setting"
        );
    }

    #[test]
    fn grpc_timeouts() {
        assert_eq!(parse_grpc_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout(b"2M"), Some(Duration::from_secs(120)));
        assert_eq!(parse_grpc_timeout(b"3S"), Some(Duration::from_secs(3)));
        assert_eq!(parse_grpc_timeout(b"40m"), Some(Duration::from_millis(40)));
        assert_eq!(parse_grpc_timeout(b"5u"), Some(Duration::from_micros(5)));
        assert_eq!(
            parse_grpc_timeout(b"99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
        for bad in [&b""[..], b"S", b"123456789S", b"1x", b"-1S", b"1.5S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
    }
}
