//! `Telemetry`: the providers and the propagator, and its `Builder`.

use std::any::TypeId;
use std::fmt;
use std::sync::{Arc, OnceLock};

use opentelemetry::global::{BoxedTracer, ObjectSafeTracerProvider};
use opentelemetry::logs::LoggerProvider;
use opentelemetry::metrics::{Meter, MeterProvider};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::noop::{NoopTextMapPropagator, NoopTracer, NoopTracerProvider};
use opentelemetry::trace::{Span, Tracer, TracerProvider};
use opentelemetry::{InstrumentationScope, metrics::noop::NoopMeterProvider};

use super::client::{HeldBreakers, Kit};
use super::logs::{BoxedLogger, ObjectSafeLoggerProvider};

/// What [`Telemetry::inbound`] builds.
pub(crate) struct Inbound {
    pub(crate) tracer: Option<BoxedTracer>,
    /// Whether `tracer` is the no-op provider's: its span would have the
    /// parent's context and record nothing, so none is started for a
    /// request with no valid span in its context (it would have an
    /// invalid one).
    pub(crate) noop_tracer: bool,
    pub(crate) duration: Option<opentelemetry::metrics::Histogram<f64>>,
}

/// The tracer, meter and logger providers and the propagator that a
/// [`Setup`](crate::Setup) records with ([design](crate::design::client#telemetry)).
///
/// humus never reads or writes OpenTelemetry's globals: everything a client
/// records goes through the providers given here, and a process that sets
/// global providers sees none of it. [`Telemetry::default`] records
/// nothing: no-op providers and a no-op propagator, so a call carries no
/// trace context or baggage in its metadata.
///
/// Build one with [`Telemetry::builder`] from OpenTelemetry SDK providers
/// (or any implementation of the API's provider traits), once per process,
/// and clone it: clones are cheap and share the providers and humus's
/// instruments. Two `Telemetry` values built from the same meter provider
/// each register the `humus.circuit.state` callback, and the SDK keeps only
/// one of the two observations of an address, so build it once.
///
/// ```
/// use humus::telemetry::Telemetry;
/// use opentelemetry_sdk::propagation::TraceContextPropagator;
/// use opentelemetry_sdk::trace::SdkTracerProvider;
///
/// let tracer_provider = SdkTracerProvider::builder().build();
/// let telemetry = Telemetry::builder()
///     .tracer_provider(tracer_provider.clone())
///     .propagator(TraceContextPropagator::new())
///     .build();
/// assert!(format!("{telemetry:?}").contains("tracer_provider: true"));
/// ```
#[derive(Clone, Default)]
pub struct Telemetry {
    inner: Arc<Inner>,
}

struct Inner {
    tracer_provider: Option<Arc<dyn ObjectSafeTracerProvider + Send + Sync>>,
    meter_provider: Option<Arc<dyn MeterProvider + Send + Sync>>,
    /// Whether the tracer provider given is OpenTelemetry's
    /// [`NoopTracerProvider`]: its spans record nothing and have their
    /// parent's context.
    noop_tracer_provider: bool,
    /// Whether the meter provider given is OpenTelemetry's
    /// [`NoopMeterProvider`]: its instruments record nothing.
    noop_meter_provider: bool,
    logger_provider: Option<Arc<dyn ObjectSafeLoggerProvider>>,
    propagator: Arc<dyn TextMapPropagator + Send + Sync>,
    /// What every client of this telemetry shares, built by the first.
    kit: OnceLock<Arc<Kit>>,
}

impl Default for Inner {
    fn default() -> Inner {
        Inner {
            tracer_provider: None,
            meter_provider: None,
            noop_tracer_provider: false,
            noop_meter_provider: false,
            logger_provider: None,
            propagator: Arc::new(NoopTextMapPropagator::new()),
            kit: OnceLock::new(),
        }
    }
}

impl Inner {
    /// What a [`Telemetry`] and its [`Builder`] show: which providers are
    /// set, and the propagator.
    fn debug(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(name)
            .field("tracer_provider", &self.tracer_provider.is_some())
            .field("meter_provider", &self.meter_provider.is_some())
            .field("logger_provider", &self.logger_provider.is_some())
            .field("propagator", &self.propagator)
            .finish()
    }
}

impl fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.debug("Telemetry", f)
    }
}

impl Telemetry {
    /// A builder of a `Telemetry`; whatever it isn't given is no-op.
    pub fn builder() -> Builder {
        Builder {
            inner: Inner::default(),
        }
    }

    /// The propagator each attempt writes its trace context and its
    /// call's baggage with, and a server reads them with.
    pub fn propagator(&self) -> &(dyn TextMapPropagator + Send + Sync) {
        &*self.inner.propagator
    }

    /// A tracer of the given instrumentation scope from the tracer
    /// provider (a no-op tracer without one).
    pub fn tracer(&self, scope: InstrumentationScope) -> BoxedTracer {
        match &self.inner.tracer_provider {
            Some(provider) => BoxedTracer::new(provider.boxed_tracer(scope)),
            None => BoxedTracer::new(Box::new(NoopTracer::new())),
        }
    }

    /// A meter of the given instrumentation scope from the meter provider
    /// (a no-op meter without one).
    pub fn meter(&self, scope: InstrumentationScope) -> Meter {
        match &self.inner.meter_provider {
            Some(provider) => provider.meter_with_scope(scope),
            None => NoopMeterProvider::new().meter_with_scope(scope),
        }
    }

    /// A logger of the given instrumentation scope from the logger
    /// provider (a no-op logger without one).
    pub fn logger(&self, scope: InstrumentationScope) -> BoxedLogger {
        BoxedLogger::new(
            self.inner
                .logger_provider
                .as_ref()
                .map(|provider| provider.boxed_logger(scope)),
        )
    }

    /// Whether a tracer provider was given.
    pub(crate) fn has_tracer_provider(&self) -> bool {
        self.inner.tracer_provider.is_some()
    }

    /// Whether a meter provider was given.
    pub(crate) fn has_meter_provider(&self) -> bool {
        self.inner.meter_provider.is_some()
    }

    /// Whether the tracer provider given is OpenTelemetry's
    /// [`NoopTracerProvider`], whose every span has its parent's span
    /// context (an invalid one without a parent) and records nothing.
    pub(crate) fn is_noop_tracer_provider(&self) -> bool {
        self.inner.noop_tracer_provider
    }

    /// Whether the meter provider given is OpenTelemetry's
    /// [`NoopMeterProvider`], whose instruments record nothing.
    pub(crate) fn is_noop_meter_provider(&self) -> bool {
        self.inner.noop_meter_provider
    }

    /// What a server-side instrumentation (a server's, a consumer's)
    /// records with, in the scope `scope`: its tracer, `None` without a
    /// tracer provider, and its duration histogram `duration` (seconds,
    /// described by `description`), `None` without a meter provider or
    /// with the no-op one (whose instruments record nothing).
    pub(crate) fn inbound(
        &self,
        scope: &'static str,
        duration: &'static str,
        description: &'static str,
    ) -> Inbound {
        let scope = || {
            InstrumentationScope::builder(scope)
                .with_version(env!("CARGO_PKG_VERSION"))
                .build()
        };
        let tracer = self.has_tracer_provider().then(|| self.tracer(scope()));
        let duration = (self.has_meter_provider() && !self.is_noop_meter_provider()).then(|| {
            self.meter(scope())
                .f64_histogram(duration)
                .with_unit("s")
                .with_description(description)
                .with_boundaries(super::DURATION_BOUNDARIES.to_vec())
                .build()
        });
        Inbound {
            tracer,
            noop_tracer: self.is_noop_tracer_provider(),
            duration,
        }
    }

    /// The same propagator as [`propagator`](Self::propagator), as a shared
    /// handle, for what keeps one (such as the server layer
    /// [`StripScenarioLayer`](crate::grpc::server::StripScenarioLayer)).
    pub fn shared_propagator(&self) -> Arc<dyn TextMapPropagator + Send + Sync> {
        Arc::clone(&self.inner.propagator)
    }

    /// This telemetry, or, when it has no logger provider, a copy of it
    /// whose log records are plain lines on standard error
    /// ([`LineLogs`](super::LineLogs)): what an App records with, so that
    /// its lifecycle and its breakers' transitions are seen whatever
    /// providers it was given (give a no-op logger provider for silence).
    pub(crate) fn or_line_logs(&self) -> Telemetry {
        if self.inner.logger_provider.is_some() {
            return self.clone();
        }
        let inner = &self.inner;
        Telemetry {
            inner: Arc::new(Inner {
                tracer_provider: inner.tracer_provider.clone(),
                meter_provider: inner.meter_provider.clone(),
                noop_tracer_provider: inner.noop_tracer_provider,
                noop_meter_provider: inner.noop_meter_provider,
                logger_provider: Some(Arc::new(super::LineLogs::stderr())),
                propagator: Arc::clone(&inner.propagator),
                kit: OnceLock::new(),
            }),
        }
    }

    /// What the clients of this telemetry share: tracers, instruments, the
    /// logger and the registry of breakers, built on first use.
    pub(crate) fn kit(&self) -> Arc<Kit> {
        Arc::clone(self.inner.kit.get_or_init(|| Arc::new(Kit::new(self))))
    }

    /// Holds every client's breaker registered now in `humus.circuit.state`
    /// until the result is dropped, whether or not the clients live on
    /// (none when no client was built with this telemetry).
    pub(crate) fn hold_breakers(&self) -> HeldBreakers {
        self.inner
            .kit
            .get()
            .map(|kit| kit.hold_breakers())
            .unwrap_or_default()
    }
}

/// Builds a [`Telemetry`]. Every provider and the propagator are optional;
/// what isn't set is no-op.
///
/// Each setter takes an OpenTelemetry SDK provider (`SdkTracerProvider`,
/// `SdkMeterProvider`, `SdkLoggerProvider`, which are cheap handles: pass a
/// clone and keep one to shut it down) or any other implementation of the
/// API's provider trait.
pub struct Builder {
    inner: Inner,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.debug("Builder", f)
    }
}

impl Builder {
    /// Records spans with `provider`.
    pub fn tracer_provider<P, T, S>(mut self, provider: P) -> Builder
    where
        P: TracerProvider<Tracer = T> + Send + Sync + 'static,
        T: Tracer<Span = S> + Send + Sync + 'static,
        S: Span + Send + Sync + 'static,
    {
        self.inner.noop_tracer_provider = TypeId::of::<P>() == TypeId::of::<NoopTracerProvider>();
        self.inner.tracer_provider = Some(Arc::new(provider));
        self
    }

    /// Records metrics with `provider`.
    pub fn meter_provider<P>(mut self, provider: P) -> Builder
    where
        P: MeterProvider + Send + Sync + 'static,
    {
        self.inner.noop_meter_provider = TypeId::of::<P>() == TypeId::of::<NoopMeterProvider>();
        self.inner.meter_provider = Some(Arc::new(provider));
        self
    }

    /// Emits log records with `provider`.
    pub fn logger_provider<P>(mut self, provider: P) -> Builder
    where
        P: LoggerProvider + Send + Sync + 'static,
        P::Logger: Send + Sync + 'static,
    {
        self.inner.logger_provider = Some(Arc::new(provider));
        self
    }

    /// Writes and reads trace context and baggage with `propagator`, such
    /// as a composite of W3C TraceContext and Baggage.
    pub fn propagator<P>(mut self, propagator: P) -> Builder
    where
        P: TextMapPropagator + Send + Sync + 'static,
    {
        self.inner.propagator = Arc::new(propagator);
        self
    }

    /// The [`Telemetry`].
    pub fn build(self) -> Telemetry {
        Telemetry {
            inner: Arc::new(self.inner),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::logs::NoopLoggerProvider;

    /// An App's telemetry without a logger provider logs lines (its
    /// lifecycle and breakers would be silent otherwise); one with a logger
    /// provider keeps it, and the rest is the same.
    #[test]
    fn or_line_logs_adds_lines_only_without_a_logger_provider() {
        let bare = Telemetry::builder()
            .propagator(opentelemetry_sdk::propagation::BaggagePropagator::new())
            .build();
        assert!(bare.inner.logger_provider.is_none());
        let lined = bare.or_line_logs();
        assert!(lined.inner.logger_provider.is_some());
        assert!(Arc::ptr_eq(&lined.inner.propagator, &bare.inner.propagator));

        let given = Telemetry::builder()
            .logger_provider(NoopLoggerProvider::new())
            .build();
        assert!(Arc::ptr_eq(&given.or_line_logs().inner, &given.inner));
    }
}
