//! The wire convention: [`Decoder`] and [`Encoder`] over OpenTelemetry
//! baggage. Both are the user's (the organisation owns the wire format:
//! [design](crate::design::failure_injection#scenarios-in-baggage)); [`jsonscenario`](super::jsonscenario) is one
//! ready-made choice.

use std::borrow::Cow;
use std::error::Error;
use std::fmt;

use opentelemetry::Context;
use opentelemetry::baggage::{Baggage, BaggageExt};

use super::Scenario;

/// Reads the failure scenario a request carries from its baggage, and says
/// which baggage members carry it.
///
/// It owns the wire convention: which members carry a scenario, their
/// grammar, size, expiry and any signature. The edge that writes scenarios
/// (with an [`Encoder`]) and every service that reads them agree on it.
/// One decoder serves every request at once, so it must be `Send + Sync`.
///
/// Baggage values are held decoded: a W3C baggage propagator
/// percent-decodes each member's value when it extracts the `baggage`
/// header, and percent-encodes it when it injects one.
pub trait Decoder: fmt::Debug + Send + Sync + 'static {
    /// The scenario `baggage` carries: `Ok(None)` when it carries none.
    ///
    /// # Errors
    ///
    /// A [`DecodeError`] when the members this decoder owns are there but
    /// do not hold a valid scenario. The injector records it on the
    /// request's span and the request goes on as if it carried no
    /// scenario. Bad input is an error, never a panic.
    fn decode(&self, baggage: &Baggage) -> Result<Option<Scenario>, DecodeError>;

    /// Whether the baggage member named `key` is one this decoder reads a
    /// scenario from. A request carries a scenario when one of its members
    /// is; stripping removes exactly these members and keeps every other.
    fn owns(&self, key: &str) -> bool;
}

/// Writes a failure scenario into baggage, in the convention a
/// [`Decoder`] reads. Used by an edge or a test to put a request under
/// test; see [`with_scenario`].
pub trait Encoder {
    /// Why a scenario could not be written.
    type Error: Error + Send + Sync + 'static;

    /// Returns `baggage` with `scenario` written into it, replacing any
    /// scenario it carried and keeping every other member.
    ///
    /// # Errors
    ///
    /// [`Encoder::Error`] when the scenario cannot be written in this
    /// convention (too large, a value it cannot express, ...).
    fn encode(&self, baggage: &Baggage, scenario: &Scenario) -> Result<Baggage, Self::Error>;
}

/// Returns `cx` with `scenario` written into its baggage by `encoder`,
/// every other baggage member kept: how an edge or a test puts a request
/// under test. A propagator then carries it on.
///
/// # Errors
///
/// The encoder's error when it cannot write the scenario.
pub fn with_scenario<E: Encoder + ?Sized>(
    cx: &Context,
    encoder: &E,
    scenario: &Scenario,
) -> Result<Context, E::Error> {
    let baggage = encoder.encode(cx.baggage(), scenario)?;
    Ok(cx.with_baggage(baggage))
}

/// Why a [`Decoder`] rejected the scenario a request carries.
///
/// It names an `error.type` (OpenTelemetry's attribute: a low-cardinality
/// name of the kind of failure) and a message, both recorded on the
/// request's `humus.fit.evaluation` event.
#[derive(Debug)]
pub struct DecodeError {
    error_type: Cow<'static, str>,
    error: Box<dyn Error + Send + Sync + 'static>,
}

impl DecodeError {
    /// A rejection of kind `error_type` (for example
    /// `humus::fault::jsonscenario::DecodeError`, or `acme.BadSignature`),
    /// whose message is `error`'s. A `&str` or `String` is an error too.
    pub fn new(
        error_type: impl Into<Cow<'static, str>>,
        error: impl Into<Box<dyn Error + Send + Sync + 'static>>,
    ) -> DecodeError {
        DecodeError {
            error_type: error_type.into(),
            error: error.into(),
        }
    }

    /// The kind of failure, recorded as `error.type`.
    pub fn error_type(&self) -> &str {
        &self.error_type
    }

    /// The error this wraps.
    pub fn get_ref(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.error
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl Error for DecodeError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.error.source()
    }
}

/// A copy of `baggage` without the members `drop` selects, metadata kept.
pub(crate) fn baggage_without(baggage: &Baggage, drop: impl Fn(&str) -> bool) -> Baggage {
    baggage
        .iter()
        .filter(|(key, _)| !drop(key.as_str()))
        .map(|(key, (value, metadata))| (key.clone(), (value.clone(), metadata.clone())))
        .collect()
}
