//! [`StripScenarioLayer`].

use std::sync::Arc;

use opentelemetry::propagation::TextMapPropagator;
use tower_layer::Layer;

use super::Caller;
use super::service::{Shared, StripScenario, TrustFn};
use crate::fault::Injector;

/// A tower [`Layer`](https://docs.rs/tower-layer/0.3/tower_layer/trait.Layer.html) for tonic servers that strips failure scenarios from
/// callers its `trust_scenario` function does not trust ([design](crate::design::failure_injection#trust-and-stripping)),
/// and answers a panic of the handlers under it `INTERNAL` ("the handler
/// panicked", never the payload) with the connection kept, as humus's
/// [`Server`](super::Server) does; see the [module](super) docs.
///
/// Put it on the server (`tonic::transport::Server::builder().layer(..)`),
/// so it runs before any handler and any interceptor of the user's. The
/// response body becomes a [`ResponseBody`](super::future::ResponseBody)
/// of the inner service's, which tonic's server takes as it is. It needs:
///
/// - the service's [`Injector`] (`setup.faults().clone()`): when it is off,
///   nothing is read or stripped (panics are still answered), so a caller's
///   scenario reaches the handler's calls: a service that stands before
///   services which trust it strips with
///   [`Injector::strip_only`](crate::fault::Injector::strip_only);
/// - the service's telemetry's propagator, which reads the caller's
///   context once the strip is done (it may be a composite one that also
///   carries the trace context, which the layer leaves as it is). The
///   strip itself reads the `baggage` header, whatever the propagator: a
///   no-op one strips as well.
///
/// With injection on (or strip-only), a `baggage` value that cannot be
/// read whole (not text, over 8192 bytes or 64 members) is dropped before
/// any trust function is asked, with a `humus.fit.strip` event that says
/// why ([`names::UNREADABLE`](crate::fault::names::UNREADABLE)).
#[derive(Clone, Debug)]
pub struct StripScenarioLayer {
    shared: Shared,
}

impl StripScenarioLayer {
    /// A layer that strips every caller's scenario (it trusts no one until
    /// [`trust_scenario`](StripScenarioLayer::trust_scenario) says
    /// otherwise), using `injector`'s decoder to find scenarios in the
    /// `baggage` header and `propagator` to read the caller's context.
    pub fn new(
        injector: Injector,
        propagator: Arc<dyn TextMapPropagator + Send + Sync>,
    ) -> StripScenarioLayer {
        StripScenarioLayer {
            shared: Shared::new(injector, propagator),
        }
    }

    /// Sets the function that decides whether a caller's scenario reaches
    /// the handler: `true` keeps it, `false` strips it. It is asked only
    /// about a request that carries a scenario (valid or not), and only
    /// when injection is on, before any handler runs. It is the user's
    /// code: a panic in it is answered as a handler's panic is, `INTERNAL`
    /// "the handler panicked", with no handler run and the connection
    /// kept.
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
        mut self,
        trust: impl Fn(&Caller<'_>) -> bool + Send + Sync + 'static,
    ) -> StripScenarioLayer {
        let trust: TrustFn = Arc::new(trust);
        self.shared.trust = Some(trust);
        self
    }
}

impl<S> Layer<S> for StripScenarioLayer {
    type Service = StripScenario<S>;

    fn layer(&self, inner: S) -> StripScenario<S> {
        StripScenario::new(inner, Arc::new(self.shared.clone()))
    }
}
