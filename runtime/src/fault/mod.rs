//! Failure injection: one request fails on purpose, in production or in a
//! test, without failing anyone else's (seed 002, as its revisions 1–3
//! leave it).
//!
//! A request carries a failure [`Scenario`] in its OpenTelemetry baggage.
//! Each injection point it passes through, such as a humus client's
//! `grpc:<service>/<method>`, asks the service's [`Injector`] what
//! [`Fault`] it emulates for that request ([`Injector::eval`]) and carries
//! it out ([`Fault::inject`]): a delay, an abort, or both. A [`Decoder`] of
//! the user's own reads scenarios from baggage (the wire format is theirs;
//! [`jsonscenario`] is one ready-made choice), and an [`Encoder`] writes
//! them at the edge or in a test ([`with_scenario`]).
//!
//! A fault is a real failure to the client that meets it (seed 002,
//! revision 2): an abort is `Unavailable`, a delay cut short by the
//! deadline is `DeadlineExceeded`, and the client's classifier decides
//! them as it decides those failures, so they are retried and the breaker
//! counts them. A classify function can spare the breaker by answering
//! `Ignored` when [`InjectedError::from_status`] finds an injected error.
//!
//! Servers strip scenarios from callers they do not trust
//! ([`grpc::server`](crate::grpc::server)), and clients strip them from
//! what they send unless told to forward them ([`Injector::strip`]).
//!
//! Without [`Injector::new`], the [`Injector`] is off: nothing is evaluated,
//! stripped or recorded.

mod codec;
mod error;
pub mod jsonscenario;
mod model;

pub use codec::{DecodeError, Decoder, Encoder, with_scenario};
pub use error::{Cause, ERROR_TYPE, InjectedError};
pub use model::{Fault, Rule, Scenario};

/// Evaluates failure-injection points against the scenario a request
/// carries. The default is off: it evaluates and strips nothing.
///
/// PLACEHOLDER: settings, evaluation and stripping land next.
#[derive(Clone, Debug, Default)]
pub struct Injector {
    _private: (),
}
