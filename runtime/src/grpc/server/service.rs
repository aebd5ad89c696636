//! [`StripScenario`], the service [`StripScenarioLayer`](super::StripScenarioLayer)
//! builds, and what its trust function is given ([`Caller`]).

use std::collections::HashMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http_body::Body;
use opentelemetry::Context;
use opentelemetry::baggage::BaggageExt;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use rustls_pki_types::CertificateDer;
use tower_service::Service;

use super::rpc::{Payload, Record, ResponseBody, ResponseFuture, call_caught};
use crate::fault::{Injector, record_strip};
use crate::grpc::deadline::{Inherited, MaybeScoped, ScenarioVetted};

pub(super) type TrustFn = Arc<dyn Fn(&Caller<'_>) -> bool + Send + Sync>;

/// What the layer and each of its services share.
#[derive(Clone)]
pub(super) struct Shared {
    pub(super) injector: Injector,
    pub(super) propagator: Arc<dyn TextMapPropagator + Send + Sync>,
    /// The propagator's header names, parsed once.
    pub(super) fields: Arc<[HeaderName]>,
    pub(super) trust: Option<TrustFn>,
}

impl Shared {
    pub(super) fn new(
        injector: Injector,
        propagator: Arc<dyn TextMapPropagator + Send + Sync>,
    ) -> Shared {
        let fields = propagator
            .fields()
            .filter_map(|f| HeaderName::try_from(f).ok())
            .collect();
        Shared {
            injector,
            propagator,
            fields,
            trust: None,
        }
    }
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("injector", &self.injector)
            .field("propagator", &self.propagator)
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
        if self.shared.injector.reads_scenarios() {
            // An inner InheritLayer reads the request as this layer left it.
            request.extensions_mut().insert(ScenarioVetted);
        }
        let call = match self.shared.strip_untrusted(&mut request, outer.as_ref()) {
            // An outer InheritLayer read the request's baggage before this
            // layer decided: the handler is served in a scope of its own,
            // whose baggage has the scenario as this layer decided (without
            // it when stripped; with it when the caller is trusted, which
            // an outer InheritLayer with an injector had stripped).
            Ok(Some(decided)) => match self.shared.rescoped(&decided) {
                Some(inherited) => {
                    let inner = &mut self.inner;
                    inherited
                        .clone()
                        .sync_scope(|| call_caught(inner, request))
                        .map(|future| MaybeScoped::scoped(inherited, future))
                }
                None => call_caught(&mut self.inner, request).map(MaybeScoped::unscoped),
            },
            Ok(None) => call_caught(&mut self.inner, request).map(MaybeScoped::unscoped),
            Err(payload) => Err(payload),
        };
        ResponseFuture::new(call, None, Record::outer(outer), None)
    }
}

impl Shared {
    /// Strips the scenario of an untrusted caller from `request`, with a
    /// `humus.fit.strip` event on `span`'s span.
    ///
    /// # Errors
    ///
    /// The payload of the trust function's panic.
    /// Returns, when the request carried a scenario, the context its
    /// handler is to see (stripped, or as it came from a trusted caller).
    fn strip_untrusted<B>(
        &self,
        request: &mut http::Request<B>,
        span: Option<&Context>,
    ) -> Result<Option<Context>, Payload> {
        if !self.injector.reads_scenarios() {
            return Ok(None);
        }
        let extracted = self.extract(request);
        if !self.injector.carries_scenario(&extracted) {
            return Ok(None);
        }
        let (decided, stripped) = self
            .strip_extracted(request, extracted)
            .map_err(|panicked| panicked.payload)?;
        if stripped && let Some(span) = span {
            record_strip(&span.span());
        }
        Ok(Some(decided))
    }

    /// The current [`Inherited`] (an outer `InheritLayer`'s, which read the
    /// request before this layer decided) with the scenario as `decided`
    /// has it (stripped, or a trusted caller's); `None` when there is no
    /// such scope, or it already agrees.
    fn rescoped(&self, decided: &Context) -> Option<Inherited> {
        let current = Inherited::current()?;
        let inherited = current.context();
        let baggage = if self.injector.carries_scenario(decided) {
            if self.injector.carries_scenario(inherited) {
                return None;
            }
            // A trusted caller's scenario, which the outer layer dropped.
            decided
                .baggage()
                .iter()
                .map(|(k, (v, m))| {
                    opentelemetry::baggage::KeyValueMetadata::new(k.clone(), v.clone(), m.clone())
                })
                .collect()
        } else {
            self.injector.strip_baggage(inherited.baggage())?
        };
        let context = inherited.with_baggage(baggage);
        Some(Inherited::new(current.deadline(), context))
    }

    /// Whether `headers` hold any of the propagator's fields.
    pub(super) fn carries_fields(&self, headers: &HeaderMap) -> bool {
        // A few headers (a usual request's) are quicker compared by name
        // than looked up by hash, once per field.
        if headers.keys_len() <= SCAN_HEADERS {
            headers.keys().any(|k| self.fields.contains(k))
        } else {
            self.fields.iter().any(|f| headers.contains_key(f))
        }
    }

    /// The trace context and baggage of `request`, read with the
    /// propagator. With injection on, a propagator field sent in several
    /// headers is first joined into one (so a scenario in a second
    /// `baggage` header cannot slip past).
    pub(super) fn extract<B>(&self, request: &mut http::Request<B>) -> Context {
        if self.injector.reads_scenarios() {
            combine_repeated(request.headers_mut(), &self.fields);
        }
        self.propagator
            .extract_with_context(&Context::new(), &HeaderExtractor(request.headers()))
    }

    /// Strips the scenario from `extracted` (what [`extract`](Self::extract)
    /// read from `request`) and from `request`'s headers when the caller is
    /// not trusted: returns the context the handler is to see, and whether
    /// it stripped. Does nothing when injection is off, or the request
    /// carries no scenario.
    ///
    /// # Errors
    ///
    /// [`TrustPanicked`] when the trust function panicked: the request is
    /// left as it came, and is not to reach a handler.
    pub(super) fn strip_extracted<B>(
        &self,
        request: &mut http::Request<B>,
        extracted: Context,
    ) -> Result<(Context, bool), TrustPanicked> {
        if !self.injector.carries_scenario(&extracted) {
            return Ok((extracted, false));
        }
        let caller = Caller {
            method: request.uri().path(),
            headers: request.headers(),
            extensions: request.extensions(),
        };
        if let Some(trust) = &self.trust {
            // The user's code: a panic is answered as a handler's is.
            match catch_unwind(AssertUnwindSafe(|| trust(&caller))) {
                Ok(true) => return Ok((extracted, false)),
                Ok(false) => {}
                Err(payload) => {
                    return Err(TrustPanicked {
                        cx: extracted,
                        payload,
                    });
                }
            }
        }
        let Some(baggage) = self.injector.strip_baggage(extracted.baggage()) else {
            return Ok((extracted, false));
        };
        let stripped = extracted.with_baggage(baggage);
        rewrite(
            request.headers_mut(),
            &self.fields,
            &*self.propagator,
            &extracted,
            &stripped,
        );
        Ok((stripped, true))
    }
}

/// A trust function's panic, caught: the context extracted from the
/// request, unstripped, and the panic's payload.
pub(super) struct TrustPanicked {
    pub(super) cx: Context,
    pub(super) payload: Payload,
}

/// Joins a propagator field sent in several headers into one, comma
/// separated, as W3C Baggage reads several `baggage` headers: so that a
/// scenario in a second header cannot slip past a propagator that reads
/// only the first.
/// Up to how many header names [`Shared::carries_fields`] compares each
/// with the propagator's fields rather than looks the fields up.
const SCAN_HEADERS: usize = 8;

fn combine_repeated(headers: &mut HeaderMap, fields: &[HeaderName]) {
    for field in fields {
        let mut values = headers.get_all(field).iter();
        let (Some(first), Some(_)) = (values.next(), values.next()) else {
            continue;
        };
        let mut joined = first.as_bytes().to_vec();
        for v in headers.get_all(field).iter().skip(1) {
            joined.push(b',');
            joined.extend_from_slice(v.as_bytes());
        }
        match HeaderValue::from_bytes(&joined) {
            Ok(v) => {
                headers.insert(field.clone(), v);
            }
            Err(_) => {
                headers.remove(field);
            }
        }
    }
}

/// Rewrites the propagator's headers whose value stripping changed, and
/// only those: the trace context and every other field stay as they came.
fn rewrite(
    headers: &mut HeaderMap,
    fields: &[HeaderName],
    propagator: &dyn TextMapPropagator,
    before: &Context,
    after: &Context,
) {
    let mut was: HashMap<String, String> = HashMap::new();
    propagator.inject_context(before, &mut was);
    let mut now: HashMap<String, String> = HashMap::new();
    propagator.inject_context(after, &mut now);
    for field in fields {
        let value = now.get(field.as_str());
        if was.get(field.as_str()) == value {
            continue;
        }
        // A value that is not a valid header drops the field entirely:
        // stripping errs on the side of removing the scenario.
        match value.and_then(|v| HeaderValue::from_str(v).ok()) {
            Some(v) => {
                headers.insert(field.clone(), v);
            }
            None => {
                headers.remove(field);
            }
        }
    }
}

/// Reads a request's headers for a propagator.
struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}
