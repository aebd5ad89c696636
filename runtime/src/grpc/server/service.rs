//! [`StripScenario`], the service [`StripScenarioLayer`](super::StripScenarioLayer)
//! builds, and what its trust function is given ([`Caller`]).

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use bytes::Bytes;
use http::header::HeaderMap;
use http_body::Body;
use opentelemetry::Context;
use opentelemetry::baggage::BaggageExt;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use rustls_pki_types::CertificateDer;
use tower_service::Service;

use super::body::ResponseBody;
use super::rpc::{Payload, Record, ResponseFuture, call_caught};
use crate::fault::strip::{BAGGAGE, Gate, Panicked, Vetted};
use crate::fault::{Injector, baggage_without};
use crate::grpc::deadline::{Inherited, MaybeScoped, ScenarioVetted, Withheld};

pub(super) type TrustFn = Arc<dyn Fn(&Caller<'_>) -> bool + Send + Sync>;

/// What the layer and each of its services share: the strip every server
/// entry point runs, and the trust function it asks.
#[derive(Clone)]
pub(super) struct Shared {
    pub(super) gate: Gate,
    pub(super) trust: Option<TrustFn>,
}

impl Shared {
    pub(super) fn new(
        injector: Injector,
        propagator: Arc<dyn TextMapPropagator + Send + Sync>,
    ) -> Shared {
        Shared {
            gate: Gate::new(injector, propagator),
            trust: None,
        }
    }
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("injector", &self.gate.injector)
            .field("propagator", &self.gate.propagator)
            .field("trust_scenario", &self.trust.as_ref().map(|_| "fn"))
            .finish()
    }
}

/// The certificates a caller presented over TLS, leaf first, as the
/// server's TLS acceptor verified them: a request extension that
/// [`Caller::peer_certificates`] reads.
///
/// A TLS acceptor puts it in each request's extensions: with tonic's
/// `serve_with_incoming`, make it the connection type's
/// `tonic::transport::server::Connected::ConnectInfo` (tonic inserts the
/// connect info into every request of the connection), or insert it with
/// a layer outside this one. With tonic's own TLS (its `tls-*` features),
/// read tonic's `TlsConnectInfo` from [`Caller::extensions`] instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerCertificates {
    certificates: Arc<[CertificateDer<'static>]>,
}

impl PeerCertificates {
    /// The certificates `certificates`, leaf first.
    pub fn new(certificates: impl Into<Arc<[CertificateDer<'static>]>>) -> PeerCertificates {
        PeerCertificates {
            certificates: certificates.into(),
        }
    }

    /// The certificates, leaf first.
    pub fn certificates(&self) -> &[CertificateDer<'static>] {
        &self.certificates
    }
}

/// The caller of a request that carries a failure scenario: what a
/// `trust_scenario` function decides on. Everything is the request as it
/// arrived, before any handler.
#[derive(Debug)]
pub struct Caller<'a> {
    method: &'a str,
    headers: &'a HeaderMap,
    extensions: &'a http::Extensions,
}

impl Caller<'_> {
    /// The gRPC method's full name, the request's path:
    /// `/package.Service/Method`.
    pub fn method(&self) -> &str {
        self.method
    }

    /// The request's HTTP/2 headers: its gRPC metadata (ASCII keys), and
    /// anything a gateway set.
    pub fn headers(&self) -> &HeaderMap {
        self.headers
    }

    /// The request's gRPC metadata (a copy of [`headers`](Caller::headers)
    /// as tonic presents it).
    pub fn metadata(&self) -> tonic::metadata::MetadataMap {
        tonic::metadata::MetadataMap::from_headers(self.headers.clone())
    }

    /// The certificates the caller presented over TLS, leaf first, when
    /// the acceptor recorded them as [`PeerCertificates`]; `None` without
    /// TLS, or when it did not.
    pub fn peer_certificates(&self) -> Option<&[CertificateDer<'static>]> {
        self.extensions
            .get::<PeerCertificates>()
            .map(PeerCertificates::certificates)
    }

    /// The request's extensions: what the transport and outer layers put
    /// there (connection info, tonic's `TlsConnectInfo`, ...).
    pub fn extensions(&self) -> &http::Extensions {
        self.extensions
    }
}

/// The service of [`StripScenarioLayer`](super::StripScenarioLayer): strips
/// the failure scenario from the `baggage` header of each request whose
/// caller is not trusted, then calls the inner service, whose panic it
/// answers `INTERNAL` ("the handler panicked") as humus's
/// [`Server`](super::Server) does.
///
/// Under an [`InheritLayer`](crate::grpc::deadline::InheritLayer) added
/// before it (outermost), which read the request's baggage before the
/// strip, it serves the handler in an [`Inherited`] scope of its own: the
/// outer one's deadline and context with the scenario stripped, so that
/// the handler's calls do not inject it either (its future is then a
/// [`MaybeScoped`] in a scope).
///
/// When it strips, it adds a `humus.fit.strip` event to the span of the
/// `opentelemetry::Context` an outer layer put in the request's extensions,
/// else to the span of the current context (`Context::current()`), which
/// is where an outer tracing layer's server span is. A panic (of the trust
/// function, or of the inner service) is an `exception` event on that
/// same span, with the payload as its `exception.message` when it is a
/// string; the span's status and end are its owner's.
#[derive(Debug)]
pub struct StripScenario<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S: Clone> Clone for StripScenario<S> {
    fn clone(&self) -> Self {
        StripScenario {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S> StripScenario<S> {
    pub(super) fn new(inner: S, shared: Arc<Shared>) -> Self {
        StripScenario { inner, shared }
    }
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for StripScenario<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    ResBody: Body<Data = Bytes>,
{
    type Response = http::Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<MaybeScoped<S::Future>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<ReqBody>) -> Self::Future {
        // The span a strip or a panic is recorded on: an outer layer's.
        let outer = request
            .extensions()
            .get::<Context>()
            .cloned()
            .unwrap_or_else(Context::current);
        let outer = outer.has_active_span().then_some(outer);
        if !self.shared.gate.injector.reads_scenarios() {
            let call = call_caught(&mut self.inner, request).map(MaybeScoped::unscoped);
            return ResponseFuture::new(call, None, Record::outer(outer), None);
        }
        // An inner InheritLayer reads the request as this layer left it.
        request.extensions_mut().insert(ScenarioVetted);
        // An outer one withheld the scenario for this layer to decide.
        if let Some(Withheld(value)) = request.extensions_mut().remove::<Withheld>() {
            request.headers_mut().insert(BAGGAGE, value);
        }
        let (mut parts, body) = request.into_parts();
        let vetted = self.shared.vet(&mut parts, outer.as_ref());
        let request = http::Request::from_parts(parts, body);
        let call = match vetted {
            // An outer InheritLayer read the request's baggage before this
            // layer decided: the handler is served in a scope of its own,
            // whose baggage has the scenario as this layer decided (without
            // it when stripped; with it when the caller is trusted, which
            // an outer InheritLayer with an injector had stripped).
            Ok(decided) => match self.shared.rescoped(&decided) {
                Some(inherited) => {
                    let inner = &mut self.inner;
                    inherited
                        .clone()
                        .sync_scope(|| call_caught(inner, request))
                        .map(|future| MaybeScoped::scoped(inherited, future))
                }
                None => call_caught(&mut self.inner, request).map(MaybeScoped::unscoped),
            },
            Err(payload) => Err(payload),
        };
        ResponseFuture::new(call, None, Record::outer(outer), None)
    }
}

impl Shared {
    /// Runs the strip on a request's `parts`, asking the trust function
    /// (a panic in it caught), with the `humus.fit.strip` event on
    /// `span`'s span.
    ///
    /// # Errors
    ///
    /// The payload of the trust function's panic.
    fn vet(
        &self,
        parts: &mut http::request::Parts,
        span: Option<&Context>,
    ) -> Result<Vetted, Payload> {
        let vetted = self
            .vet_caught(parts)
            .map_err(|panicked| panicked.payload)?;
        if let (Some(stripped), Some(span)) = (vetted.stripped, span) {
            stripped.record(&span.span());
        }
        Ok(vetted)
    }

    /// [`Gate::vet`] with this server's trust function, its panic caught:
    /// the strip humus's [`Server`](super::Server) and this layer share.
    pub(super) fn vet_caught(
        &self,
        parts: &mut http::request::Parts,
    ) -> Result<Vetted, Panicked<Payload>> {
        let trust = self.trust.as_ref().map(|trust| {
            |parts: &mut http::request::Parts| {
                let caller = Caller {
                    method: parts.uri.path(),
                    headers: &parts.headers,
                    extensions: &parts.extensions,
                };
                // The user's code: a panic is answered as a handler's is.
                catch_unwind(AssertUnwindSafe(|| trust(&caller)))
            }
        });
        self.gate.vet(parts, trust)
    }

    /// The current [`Inherited`] (an outer `InheritLayer`'s, which read the
    /// request before this layer decided) with the scenario as `decided`
    /// has it (stripped, or a trusted caller's); `None` when there is no
    /// such scope, or it already agrees.
    fn rescoped(&self, decided: &Vetted) -> Option<Inherited> {
        if decided.stripped.is_none() && !decided.trusted {
            return None;
        }
        let current = Inherited::current()?;
        let inherited = current.context();
        let injector = &self.gate.injector;
        let baggage = if decided.trusted {
            if injector.carries_scenario(inherited) {
                return None;
            }
            // A trusted caller's scenario, which the outer layer dropped.
            baggage_without(decided.cx.baggage(), |_| false)
        } else {
            injector.strip_baggage(inherited.baggage())?
        };
        let context = inherited.with_baggage(baggage);
        Some(current.with_context(context))
    }
}
