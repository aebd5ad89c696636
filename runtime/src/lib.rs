//! humus: resilient, observable outbound gRPC calls for tonic.
//!
//! Every call made through a humus [`Client`](grpc::client::Client) goes
//! over one lazily dialled connection per dependency, is retried as a
//! classifier decides (bounded by `max_attempts`, a retry budget shared by
//! every call to the dependency as gRFC A6's retry throttling, the call's
//! deadline and the server's pushback), passes the dependency's circuit
//! breaker, is traced and measured with OpenTelemetry through the
//! [`Setup`]'s providers (never the globals), and is a failure-injection
//! point.
//!
//! Outbound HTTP calls get the same: an [`http::client::Client`] (a thin
//! client over `reqwest::Client`) has its own breaker, retry budget,
//! telemetry and failure point per dependency, recorded into the same
//! instruments as the gRPC client's.
//!
//! | module | what it holds |
//! |---|---|
//! | [`circuit`] | the circuit breaker's state machine |
//! | `call` | (crate-private) the one attempt loop every client runs on: breaker, failure injection, attempt deadline, classify, settle, retry, wait |
//! | [`retry`] | the retry budget, the backoff schedule and retry decisions |
//! | [`fault`] | failure injection: scenarios, the injector, `jsonscenario` |
//! | [`grpc`] | the gRPC client, and the server half |
//! | [`app`] | the lifecycle: telemetry, faults, init, serve, signals, stop, exit codes |
//! | [`http`] | the HTTP client (on reqwest) and the HTTP server's context and scenario layer |
//! | [`telemetry`] | the OpenTelemetry providers and propagator humus uses |
//! | [`health`] | readiness monitors |
//! | [`design`] | the design, in prose: client, breaker, failure injection |
//! | `rabbitmq` | (feature `rabbitmq`) the RabbitMQ consumer |
//! | `testing` | (feature `testing`) an in-memory network and a test CA |
//!
//! # Design
//!
//! The design each part implements is written out in [`design`]: the
//! [gRPC client](design::client), the [circuit breaker](design::circuit_breaker)
//! and [failure injection](design::failure_injection). The docs of each
//! item cite the section of those pages it implements, or the gRFC (gRFC
//! A6 is gRPC's retry design, whose retry throttling the retry budget
//! implements).
#![warn(
    missing_debug_implementations,
    missing_docs,
    rust_2018_idioms,
    unreachable_pub
)]
#![deny(rustdoc::broken_intra_doc_links)]
// docs.rs (`--cfg docsrs`, nightly) marks each feature-gated item with its feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod app;
pub mod circuit;
pub mod design;
pub mod fault;
pub mod grpc;
pub mod health;
pub mod http;
#[cfg(feature = "kafka")]
#[cfg_attr(docsrs, doc(cfg(feature = "kafka")))]
pub mod kafka;
pub mod retry;
pub mod telemetry;

mod call;
mod chain;
mod setup;
mod tls;
pub use app::App;
pub use setup::{Accepted, BoxIo, DialFuture, Host, Io, ListenFuture, Listener, OsHost, Setup};

#[cfg(feature = "rabbitmq")]
#[cfg_attr(docsrs, doc(cfg(feature = "rabbitmq")))]
pub mod rabbitmq;

#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

#[doc(hidden)]
pub mod codegen;

pub use humus_macros::client;
