//! The HTTP server's trust boundary and propagation: a tower layer for
//! axum and hyper servers ([`ContextLayer`]).
//!
//! For each request it:
//!
//! 1. when failure injection is on (or strip-only), strips the request's
//!    `baggage` header, read whatever the [`Setup`](crate::Setup)'s
//!    propagator (every entry, joined): a value that cannot be read whole
//!    (not text, over 8192 bytes or 64 members) is dropped; one that
//!    carries a scenario has `trust_scenario` asked about the request
//!    (default: no caller is trusted) and, for an untrusted one, the
//!    scenario's members removed (every other member, and the trace
//!    context, arrive untouched); either way with a `humus.fit.strip`
//!    event ([design](crate::design::failure_injection#every-entry-point));
//! 2. extracts the caller's trace context and baggage from the headers so
//!    left, with the Setup's propagator;
//! 3. hands the handler that context: in the request's extensions (an
//!    [`opentelemetry::Context`]), and as the current context and the
//!    [`Inherited`](crate::grpc::deadline::Inherited) scope (with no
//!    deadline: an HTTP request carries none) while the handler's future
//!    runs and while its response's body is polled (a streamed body's
//!    chunks). So the outbound calls the handler makes, HTTP
//!    ([`http::client`](crate::http::client)) or gRPC
//!    ([`grpc::client`](crate::grpc::client)), both of which take the
//!    current context, continue the caller's trace and carry its baggage
//!    (and its scenario, when trusted).
//!
//! When an outer layer (a tracing layer's server span) put an
//! `opentelemetry::Context` with a span in the request's extensions, or
//! made one current, that span stays the handler's parent and gets the
//! `humus.fit.strip` event; its baggage is replaced by the caller's, as
//! stripped.
//!
//! # A panic
//!
//! A panic of the `trust_scenario` function (the request then reaches no
//! handler), or of the handler the layer wraps (its service's `call` or
//! its future), is answered `500 Internal Server Error` with an empty
//! body, as a failed request, and the connection serves its next request;
//! alone, hyper would drop an HTTP/1.1 connection under the request (a
//! reqwest caller sees a connection error) and reset an HTTP/2 stream.
//! The payload never reaches the caller: it is an `exception` event on
//! the span of an outer layer's context, when there is one. It is the HTTP
//! form of the gRPC server's `INTERNAL` "the handler panicked"
//! ([`grpc::server`](crate::grpc::server#a-panic-of-a-handler)). The
//! inner service's response body must be `Default` (axum's is, and so are
//! `http_body_util`'s `Full` and `Empty`) for the layer to build that
//! answer.
//!
//! ```
//! use axum::{Router, routing::get};
//! use humus::http::server::ContextLayer;
//!
//! let setup = humus::Setup::default();
//! // Trust the scenarios of requests from the test harness's own header
//! // (behind a gateway that strips it from the internet's requests).
//! let layer = ContextLayer::new(&setup)
//!     .trust_scenario(|request| request.headers().contains_key("x-chaos-harness"));
//! let app: Router = Router::new().route("/pay", get(|| async { "ok" })).layer(layer);
//! # let _ = app;
//! ```
//!
//! [`opentelemetry::Context`]: https://docs.rs/opentelemetry/0.33/opentelemetry/context/struct.Context.html

pub mod future;
mod layer;

pub use layer::{ContextLayer, ContextService};
