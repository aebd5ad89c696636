//! [`ContextLayer`] and its [`ContextService`].

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use opentelemetry::Context;
use opentelemetry::baggage::BaggageExt as _;
use opentelemetry::trace::TraceContextExt as _;
use tower_layer::Layer;
use tower_service::Service;

use super::future::{Payload, ResponseFuture};
use crate::Setup;
use crate::deadline::{InheritBody, InheritFuture, Inherited};
use crate::fault::baggage_without;
use crate::fault::strip::Gate;

type TrustFn = Arc<dyn Fn(&http::Request<()>) -> bool + Send + Sync>;

/// A tower [`Layer`] for HTTP servers (axum's `Router::layer`, hyper's
/// services) that hands each handler its caller's trace context and
/// baggage, with the failure scenario stripped from callers
/// `trust_scenario` does not trust; see the [module](super) docs.
///
/// [`Layer`]: https://docs.rs/tower-layer/0.3/tower_layer/trait.Layer.html
#[derive(Clone)]
pub struct ContextLayer {
    shared: Arc<Shared>,
}

struct Shared {
    gate: Gate,
    trust: Option<TrustFn>,
}

impl fmt::Debug for ContextLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextLayer")
            .field("injector", &self.shared.gate.injector)
            .field("propagator", &self.shared.gate.propagator)
            .field("trust_scenario", &self.shared.trust.as_ref().map(|_| "fn"))
            .finish()
    }
}

impl ContextLayer {
    /// The layer of `setup`'s service: its telemetry's propagator reads
    /// (and rewrites) the headers, its failure injector's decoder finds
    /// scenarios. It trusts no caller's scenario until
    /// [`trust_scenario`](ContextLayer::trust_scenario) says otherwise.
    pub fn new(setup: &Setup) -> ContextLayer {
        ContextLayer {
            shared: Arc::new(Shared {
                gate: Gate::new(
                    setup.faults().clone(),
                    setup.telemetry().shared_propagator(),
                ),
                trust: None,
            }),
        }
    }

    /// Sets the function that decides whether a request's scenario reaches
    /// the handler: `true` keeps it, `false` strips it. It sees the request
    /// as it arrived (its method, URI, headers and extensions, such as a
    /// TLS acceptor's peer certificates; not its body), and is asked only
    /// about a request that carries a scenario, valid or not, when failure
    /// injection is on. It is the user's code: a panic in it is answered
    /// as the layer answers a handler's panic, `500 Internal Server Error`
    /// with the connection kept (see [`ContextService`]), and the request
    /// reaches no handler.
    ///
    /// Trust only callers you control (tests, a chaos tool): a scenario
    /// that reaches a handler makes its calls fail for real, and those
    /// failures count in each client's circuit breaker, which every caller
    /// of that dependency shares: with the default settings, two aborted
    /// requests (each retried) can open it for everyone, unless the
    /// client's classifier spares injected failures.
    ///
    /// Default: none, which trusts no caller.
    pub fn trust_scenario(
        self,
        trust: impl Fn(&http::Request<()>) -> bool + Send + Sync + 'static,
    ) -> ContextLayer {
        let shared = Shared {
            gate: self.shared.gate.clone(),
            trust: Some(Arc::new(trust)),
        };
        ContextLayer {
            shared: Arc::new(shared),
        }
    }
}

impl<S> Layer<S> for ContextLayer {
    type Service = ContextService<S>;

    fn layer(&self, inner: S) -> ContextService<S> {
        ContextService {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// The service of [`ContextLayer`]: gives each request its caller's
/// context (stripped when untrusted), then calls the inner service with
/// that context current.
///
/// A panic of the layer's `trust_scenario` function, of the inner
/// service's `call`, or of its response future (an axum handler's) is
/// answered `500 Internal Server Error`, with an empty body (the
/// response body type's `Default`), and the connection serves its next
/// request, where hyper alone would drop the connection (HTTP/1.1) or
/// reset the stream (HTTP/2). The handler is dropped; the payload never
/// reaches the caller: it is an `exception` event (`exception.type`
/// `panic`, `exception.message` the payload when it is a string) on the
/// span of an outer layer's context, when there is one, and the panic
/// hook prints it, as for any panic. A panic while the response body is
/// read, after the status went out, is not the layer's to answer.
pub struct ContextService<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S: fmt::Debug> fmt::Debug for ContextService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S: Clone> Clone for ContextService<S> {
    fn clone(&self) -> Self {
        ContextService {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S, B, ResBody> Service<http::Request<B>> for ContextService<S>
where
    S: Service<http::Request<B>, Response = http::Response<ResBody>>,
    ResBody: Default,
{
    type Response = http::Response<InheritBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let (mut request, cx) = match self.shared.context_of(request) {
            Ok(of) => of,
            // The trust function panicked: no handler is called.
            Err((outer, payload)) => return ResponseFuture::new(Err(payload), outer),
        };
        request.extensions_mut().insert(cx.clone());
        let future = {
            let _guard = cx.clone().attach();
            catch_unwind(AssertUnwindSafe(|| self.inner.call(request)))
        };
        let scoped =
            future.map(|future| InheritFuture::new(Inherited::new(None, cx.clone()), future));
        ResponseFuture::new(scoped, cx)
    }
}

impl Shared {
    /// The request (its headers stripped when untrusted) and the context
    /// its handler runs in; or, when the trust function panicked, the
    /// outer layer's context and the panic's payload.
    fn context_of<B>(
        &self,
        request: http::Request<B>,
    ) -> Result<(http::Request<B>, Context), (Context, Payload)> {
        let outer = request
            .extensions()
            .get::<Context>()
            .cloned()
            .unwrap_or_else(Context::current);
        let (mut parts, body) = request.into_parts();
        let trust = self.trust.as_ref().map(|trust| {
            |parts: &mut http::request::Parts| {
                // The trust function sees the request's head as it came.
                let empty = http::Request::new(()).into_parts().0;
                let head = http::Request::from_parts(std::mem::replace(parts, empty), ());
                let trusted = catch_unwind(AssertUnwindSafe(|| trust(&head)));
                *parts = head.into_parts().0;
                trusted
            }
        });
        let caller = match self.gate.vet(&mut parts, trust) {
            Ok(vetted) => {
                if let Some(stripped) = vetted.stripped {
                    stripped.record(&outer.span());
                }
                vetted.cx
            }
            Err(panicked) => return Err((outer, panicked.payload)),
        };
        let request = http::Request::from_parts(parts, body);
        let cx = if outer.has_active_span() {
            outer.with_baggage(baggage_without(caller.baggage(), |_| false))
        } else {
            caller
        };
        Ok((request, cx))
    }
}
