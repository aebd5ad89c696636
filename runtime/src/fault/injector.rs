//! [`Injector`]: a service's failure injection ([design](crate::design::failure_injection#the-model);
//! [telemetry](crate::design::failure_injection#telemetry)).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::baggage::{Baggage, BaggageExt};
use opentelemetry::trace::{SpanRef, TraceContextExt};
use opentelemetry::{Context, KeyValue};
use tokio::time::Instant;

use super::codec::baggage_without;
use super::settings::validate;
use super::strip::{self, Read, Stripped};
use super::{
    DecodeError, Decoder, Fault, InjectedError, POINT_ERROR_TYPE, Scenario, Settings,
    SettingsError, check_point, names,
};

/// A service's failure injection: every humus client evaluates its point
/// with it, and every humus server strips untrusted scenarios with it. A
/// [`Setup`](crate::Setup) holds one.
///
/// The default is off: [`eval`](Injector::eval) returns [`Fault::NONE`],
/// [`strip`](Injector::strip) strips nothing, and nothing is recorded.
/// Clones share one decoder; it is cheap to clone and safe to use from
/// many tasks at once. Evaluating is stateless: each call decodes the
/// scenario from the request's baggage afresh.
#[derive(Clone, Default)]
pub struct Injector {
    on: Option<Arc<On>>,
}

struct On {
    decoder: Arc<dyn Decoder>,
    max_delay: Duration,
    /// False for [`Injector::strip_only`]: no point injects anything.
    inject: bool,
}

impl fmt::Debug for Injector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.on {
            None => f.write_str("Injector(off)"),
            Some(on) if !on.inject => f
                .debug_struct("Injector")
                .field("strip_only", &true)
                .field("decoder", &on.decoder)
                .finish(),
            Some(on) => f
                .debug_struct("Injector")
                .field("decoder", &on.decoder)
                .field("max_delay", &on.max_delay)
                .finish(),
        }
    }
}

impl Injector {
    /// Checks `settings` and builds an injector that is on.
    ///
    /// # Errors
    ///
    /// [`SettingsError`] naming every bad field at once: an unset
    /// `decoder`, a `max_delay` that is not positive.
    pub fn new(settings: Settings) -> Result<Injector, SettingsError> {
        let (decoder, max_delay) = validate(settings)?;
        Ok(Injector {
            on: Some(Arc::new(On {
                decoder,
                max_delay,
                inject: true,
            })),
        })
    }

    /// An injector that knows the scenario convention of `decoder` and
    /// never injects a fault: for a service that takes no part in failure
    /// injection but stands between callers and services that do.
    ///
    /// Off, a service cannot tell a scenario from any other baggage
    /// member, so it strips nothing: its handlers' calls pass a caller's
    /// scenario on with the rest of the baggage, and a dependency that
    /// trusts this service (an in-cluster caller) would then inject what
    /// an untrusted caller of this service asked for. Strip-only, its
    /// servers strip the scenario of every caller their `trust_scenario`
    /// does not trust and its clients strip it from what they send unless
    /// `forward_scenario`, exactly as with injection on, while
    /// [`eval`](Injector::eval) returns [`Fault::NONE`] and records
    /// nothing. [`is_on`](Injector::is_on) is `false`.
    ///
    /// Design: [trust and stripping](crate::design::failure_injection#trust-and-stripping).
    pub fn strip_only(decoder: impl Decoder) -> Injector {
        Injector {
            on: Some(Arc::new(On {
                decoder: Arc::new(decoder),
                max_delay: Duration::ZERO,
                inject: false,
            })),
        }
    }

    /// An injector that is off (the default).
    pub fn off() -> Injector {
        Injector::default()
    }

    /// Whether failure injection is on: points inject what scenarios ask
    /// for. `false` when off and when [strip-only](Injector::strip_only).
    pub fn is_on(&self) -> bool {
        self.on.as_ref().is_some_and(|on| on.inject)
    }

    /// Whether the injector knows the scenario convention (on, or
    /// [strip-only](Injector::strip_only)): servers then strip untrusted
    /// scenarios and clients strip what they send.
    pub(crate) fn reads_scenarios(&self) -> bool {
        self.on.is_some()
    }

    /// The longest delay a point waits, or `None` when no point injects
    /// (off, or [strip-only](Injector::strip_only)).
    pub fn max_delay(&self) -> Option<Duration> {
        self.on
            .as_ref()
            .filter(|on| on.inject)
            .map(|on| on.max_delay)
    }

    /// Whether the decoder owns the baggage member `key` (never when off).
    pub(crate) fn owns(&self, key: &str) -> bool {
        self.on.as_ref().is_some_and(|on| on.decoder.owns(key))
    }

    /// Strips what a client sends in `headers`, when the injector knows
    /// the scenario convention: joins its `baggage` headers into one,
    /// drops a value that cannot be read whole, removes the scenario's
    /// members (every other kept as it came). What it stripped, to record
    /// on the attempt's span; `None` when nothing.
    pub(crate) fn strip_headers(&self, headers: &mut http::HeaderMap) -> Option<Stripped> {
        if !self.reads_scenarios() {
            return None;
        }
        let owns = |key: &str| self.owns(key);
        match strip::read(headers, owns) {
            Read::Clean => None,
            Read::Dropped(why) => Some(Stripped::Unreadable(why)),
            Read::Scenario => {
                strip::remove_scenario(headers, owns);
                Some(Stripped::Scenario)
            }
        }
    }

    /// Whether `cx`'s baggage carries a scenario: a member the decoder
    /// owns, valid or not. Always `false` when off (strip-only knows the
    /// members, so it answers as when on).
    pub fn carries_scenario(&self, cx: &Context) -> bool {
        self.on
            .as_ref()
            .is_some_and(|on| carries(&*on.decoder, cx.baggage()))
    }

    /// The fault the injection point named `point` emulates for the
    /// request `cx` belongs to, its delay clamped to the max delay.
    ///
    /// A request with no scenario gets [`Fault::NONE`] and records
    /// nothing. On a request with one, every evaluation, matched or not,
    /// adds a `humus.fit.evaluation` event to the span in `cx`, with
    /// `humus.fit.point`; when a rule matched, `humus.fit.rule` (its
    /// pattern), `humus.fit.delay` (the clamped delay, in seconds, a
    /// float) and `humus.fit.abort`; when the decoder rejected the
    /// scenario, or a rule's point fails [`check_point`] (whatever the
    /// decoder: error type [`POINT_ERROR_TYPE`]), `error.type` and
    /// `error.message`, and the request goes on unharmed ([`Fault::NONE`]).
    /// Off or [strip-only](Injector::strip_only): [`Fault::NONE`], nothing
    /// recorded.
    ///
    /// Any code can be a point: `injector.eval(&cx, "postgresql:orders")`,
    /// then [`Fault::inject`] (or both at once with
    /// [`inject`](Injector::inject)). Name such a point
    /// `<system>:<name>`, after OpenTelemetry's `*.system` attribute.
    pub fn eval(&self, cx: &Context, point: &str) -> Fault {
        let Some(on) = self.on.as_ref().filter(|on| on.inject) else {
            return Fault::NONE;
        };
        let span = cx.span();
        match on.decoder.decode(cx.baggage()).and_then(checked) {
            Ok(None) => Fault::NONE,
            Err(e) => {
                span.add_event(
                    names::EVALUATION,
                    vec![
                        KeyValue::new(names::POINT, point.to_owned()),
                        KeyValue::new(names::ERROR_TYPE, e.error_type().to_owned()),
                        KeyValue::new(names::ERROR_MESSAGE, e.to_string()),
                    ],
                );
                Fault::NONE
            }
            Ok(Some(scenario)) => {
                let Some(rule) = scenario.rule_for(point) else {
                    span.add_event(
                        names::EVALUATION,
                        vec![KeyValue::new(names::POINT, point.to_owned())],
                    );
                    return Fault::NONE;
                };
                let fault = Fault {
                    delay: rule.fault.delay.min(on.max_delay),
                    abort: rule.fault.abort,
                };
                span.add_event(
                    names::EVALUATION,
                    vec![
                        KeyValue::new(names::POINT, point.to_owned()),
                        KeyValue::new(names::RULE, rule.point.clone()),
                        KeyValue::new(names::DELAY, fault.delay.as_secs_f64()),
                        KeyValue::new(names::ABORT, fault.abort),
                    ],
                );
                fault
            }
        }
    }

    /// [`eval`](Injector::eval) then [`Fault::inject`]: carries out the
    /// fault that the point named `point` emulates for `cx`'s request,
    /// within `deadline`. For a point of the user's own code, such as
    /// `"postgresql:orders"`.
    ///
    /// # Errors
    ///
    /// [`InjectedError`] when the fault aborts, or when `deadline` cuts
    /// its delay short.
    pub async fn inject(
        &self,
        cx: &Context,
        point: impl Into<Cow<'static, str>>,
        deadline: Option<Instant>,
    ) -> Result<(), InjectedError> {
        let point = point.into();
        let fault = self.eval(cx, &point);
        fault.inject(point, deadline).await
    }

    /// `cx` with the decoder's members removed from its baggage, every
    /// other member (and its metadata) kept, or `None` when there was
    /// nothing to strip (or injection is off): keep using `cx` then.
    ///
    /// A strip adds a `humus.fit.strip` event, with no attributes, to the
    /// span in `cx`.
    pub fn strip(&self, cx: &Context) -> Option<Context> {
        let stripped = self.strip_baggage(cx.baggage())?;
        record_strip(&cx.span());
        Some(cx.with_baggage(stripped))
    }

    /// `baggage` without the decoder's members, every other member kept,
    /// or `None` when it has none of them (or injection is off). Records
    /// nothing; [`strip`](Injector::strip) is the recorded form.
    pub fn strip_baggage(&self, baggage: &Baggage) -> Option<Baggage> {
        let on = self.on.as_ref()?;
        if !carries(&*on.decoder, baggage) {
            return None;
        }
        Some(baggage_without(baggage, |key| on.decoder.owns(key)))
    }
}

fn carries(decoder: &dyn Decoder, baggage: &Baggage) -> bool {
    baggage.iter().any(|(key, _)| decoder.owns(key.as_str()))
}

/// Adds the `humus.fit.strip` event to `span`.
pub(crate) fn record_strip(span: &SpanRef<'_>) {
    span.add_event(names::STRIP, Vec::new());
}

/// What a decoder decoded, its rules' points checked as
/// [`check_point`] does, whatever the decoder (one of the user's too): a
/// scenario with a point that would match nothing is rejected, of type
/// [`POINT_ERROR_TYPE`], and injects nothing (fails closed).
fn checked(decoded: Option<Scenario>) -> Result<Option<Scenario>, DecodeError> {
    if let Some(scenario) = &decoded {
        for (index, rule) in scenario.rules.iter().enumerate() {
            if let Err(problem) = check_point(&rule.point) {
                return Err(DecodeError::new(
                    POINT_ERROR_TYPE,
                    format!("invalid scenario: rule {index}: {problem}"),
                ));
            }
        }
    }
    Ok(decoded)
}
