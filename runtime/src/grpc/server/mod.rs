//! Server side: a tower layer for tonic servers that strips failure
//! scenarios from callers it does not trust ([design](crate::design::failure_injection#trust-and-stripping)).
//!
//! A server is a trust boundary: a caller on the internet must not be able
//! to fail this service's calls to its dependencies by sending a scenario.
//! [`StripScenarioLayer`] reads each request's baggage from its W3C
//! `baggage` header with the service's propagator and, when it carries a
//! scenario and injection is on, asks the `trust_scenario` function about
//! the caller ([`Caller`]: its metadata, its method and its peer
//! certificates). An untrusted request has the scenario's members removed
//! from its headers before any handler runs; every other baggage member,
//! and the trace context, arrive untouched. The default trusts no one.
//!
//! ```
//! use std::sync::Arc;
//! use humus::grpc::server::StripScenarioLayer;
//! # fn propagator() -> Arc<dyn opentelemetry::propagation::TextMapPropagator + Send + Sync> {
//! #     Arc::new(opentelemetry_sdk::propagation::BaggagePropagator::new())
//! # }
//! # let setup = humus::Setup::default();
//!
//! // Trust callers that present a client certificate (mTLS); strip the rest.
//! let strip = StripScenarioLayer::new(setup.faults().clone(), propagator())
//!     .trust_scenario(|caller| caller.peer_certificates().is_some_and(|c| !c.is_empty()));
//! // tonic::transport::Server::builder().layer(strip).add_service(...)
//! # let _ = strip;
//! ```

pub mod future;
mod layer;
mod service;

pub use layer::StripScenarioLayer;
pub use service::{Caller, PeerCertificates, StripScenario};
