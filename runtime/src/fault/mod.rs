//! Failure injection: one request fails on purpose, in production or in a
//! test, while every other request goes as usual
//! ([design](crate::design::failure_injection)). Only the request that
//! carries the scenario meets its faults; but they count in the shared
//! breaker and retry budget of the client that meets them, as real
//! failures do, so enough of them open the breaker for every caller
//! (below).
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
//! A fault is a real failure to the client that meets it
//! ([design](crate::design::failure_injection#a-fault-is-a-real-failure)): an abort is `Unavailable`, a delay cut short by the
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
//!
//! # In a client's attempt
//!
//! A client evaluates its point once per attempt, after its breaker
//! admitted the attempt (a rejected attempt evaluates nothing) and inside
//! the attempt's deadline; then strips the scenario from what it sends,
//! unless the dependency takes part in failure injection:
//!
//! ```
//! use humus::fault::{InjectedError, Injector};
//! use opentelemetry::Context;
//! use tokio::time::Instant;
//!
//! /// One attempt's failure injection: the context to send, or the status
//! /// the attempt ends with (to classify like any other).
//! async fn attempt(
//!     faults: &Injector,
//!     cx: &Context,              // the attempt's context (its span, the call's baggage)
//!     point: &'static str,       // "grpc:payments.v1.Payments/Charge"
//!     deadline: Option<Instant>, // the call's deadline
//!     forward_scenario: bool,
//! ) -> Result<Context, tonic::Status> {
//!     faults
//!         .eval(cx, point)
//!         .inject(point, deadline)
//!         .await
//!         .map_err(|e: InjectedError| e.to_status())?; // Unavailable / DeadlineExceeded
//!     if forward_scenario {
//!         return Ok(cx.clone());
//!     }
//!     Ok(faults.strip(cx).unwrap_or_else(|| cx.clone()))
//! }
//! ```

mod codec;
mod error;
mod injector;
pub mod jsonscenario;
mod model;
mod settings;
pub(crate) mod strip;

pub(crate) use codec::baggage_without;
pub use codec::{DecodeError, Decoder, Encoder, with_scenario};
pub use error::{Cause, ERROR_TYPE, InjectedError};
pub use injector::Injector;
pub(crate) use injector::record_strip;
pub use model::{Fault, POINT_ERROR_TYPE, PointError, Rule, Scenario, check_point};
pub use settings::{
    DEFAULT_MAX_DELAY, FieldError, InvalidMaxDelay, Settings, SettingsError, check_max_delay,
};

/// The telemetry names failure injection records ([design](crate::design::failure_injection#telemetry),
/// under humus's `humus.` prefix). Both are span events, modelled on
/// OpenTelemetry's `feature_flag.evaluation`.
pub mod names {
    /// The span event of every evaluation on a request that carries a
    /// scenario, on the span in the point's context.
    pub const EVALUATION: &str = "humus.fit.evaluation";
    /// The span event of every strip, on the span where the strip
    /// happens: with no attributes, or with [`UNREADABLE`] when the
    /// whole `baggage` header was dropped.
    pub const STRIP: &str = "humus.fit.strip";
    /// Why a strip dropped a caller's whole `baggage` header (string), on
    /// a `humus.fit.strip` event: it could not be read whole (not text,
    /// over 8192 bytes or over 64 members, W3C Baggage's limits), so a
    /// scenario could hide in what a propagator would not read. A strip of
    /// a scenario's members alone has no attributes.
    pub const UNREADABLE: &str = "humus.fit.unreadable";
    /// The evaluated point's name (string); always on an evaluation.
    pub const POINT: &str = "humus.fit.point";
    /// The matched rule's point pattern (string); when a rule matched.
    pub const RULE: &str = "humus.fit.rule";
    /// The fault's clamped delay, in seconds (float); when a rule matched.
    pub const DELAY: &str = "humus.fit.delay";
    /// Whether the fault aborts (bool); when a rule matched.
    pub const ABORT: &str = "humus.fit.abort";
    /// OpenTelemetry's `error.type`: the decoder's kind of rejection on an
    /// evaluation, and [`ERROR_TYPE`](super::ERROR_TYPE) on the span of an
    /// attempt a fault ended.
    pub const ERROR_TYPE: &str = "error.type";
    /// OpenTelemetry's `error.message`: why the decoder rejected the
    /// scenario.
    pub const ERROR_MESSAGE: &str = "error.message";
}
