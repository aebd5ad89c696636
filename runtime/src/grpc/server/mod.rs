//! The server half: [`Server`] serves tonic services with what every humus
//! server owes its callers and its own clients, built in rather than left
//! for the user to remember.
//!
//! Every RPC passes, in this order and before any layer or interceptor of
//! the user's:
//!
//! 1. the scenario strip, read from the `baggage` header itself (every
//!    entry, joined into one), whatever the [`Setup`](crate::Setup)'s
//!    propagator: a request that carries a failure scenario, from a caller
//!    that [`Settings::trust_scenario`] does not trust, has the scenario's
//!    members removed from that header (every other member kept as it
//!    came), and a `baggage` value that cannot be read whole (not text,
//!    over 8192 bytes or 64 members) is dropped whoever the caller, using
//!    the Setup's injector; the default trusts no one, and with injection
//!    off nothing is read or stripped (an injector that is
//!    [strip-only](crate::fault::Injector::strip_only) strips and injects
//!    nothing: [design](crate::design::failure_injection#trust-and-stripping));
//! 2. the extraction of the caller's trace context and baggage, with the
//!    Setup's propagator, from the headers as the strip left them;
//! 3. a SERVER span, a child of the caller's span, through the Setup's
//!    tracer provider (never the global one), named after the method
//!    (`ledger.v1.Ledger/Transfer`) with OpenTelemetry's RPC attributes
//!    (`rpc.system.name`, `rpc.method`, `rpc.response.status_code`, and
//!    `error.type` with the span's status Error for the codes that are the
//!    server's own errors: `UNKNOWN`, `DEADLINE_EXCEEDED`, `UNIMPLEMENTED`,
//!    `INTERNAL`, `UNAVAILABLE`, `DATA_LOSS`); and `rpc.server.call.duration`
//!    (seconds) through the Setup's meter provider. A method of no service
//!    the server serves is recorded as `_OTHER`;
//! 4. the handler, run with its RPC's deadline (its `grpc-timeout`) and
//!    context (the caller's baggage and the server span) current, so the
//!    humus client calls it makes inherit both with nothing copied, and
//!    their CLIENT spans are children of the server span. At the deadline
//!    the handler is dropped and the caller is answered
//!    `DEADLINE_EXCEEDED`, with the message (also the server span's) "the
//!    deadline passed: the caller's timeout (grpc-timeout), 1.5s", the
//!    caller's `grpc-timeout` as received. A response stream is made as
//!    its body is polled, after the handler returned: it is polled with
//!    the same deadline and context current (the calls made for each
//!    message inherit them too), and it ends at the deadline, its
//!    handler's stream dropped, with the same `DEADLINE_EXCEEDED` in its
//!    trailers (a caller's own client may not end a stream at its
//!    deadline: tonic's does not).
//!
//! # A panic of a handler
//!
//! A handler that panics (in a service's `call`, in its future, or in its
//! response stream) does not take its connection down, nor reset its
//! stream: its caller is answered `INTERNAL` with the message "the handler
//! panicked" (trailers-only, or, for a stream whose headers went out, in
//! its trailers after the messages sent before), a code a client's default
//! classifier counts as a failure. The payload is never sent to the
//! caller: the SERVER span records `INTERNAL` as the server's error
//! (status Error, `error.type`) with an `exception` event whose
//! `exception.message` is the payload when it is a string (and the panic
//! hook prints it, as for any panic). The handler is dropped.
//!
//! A panic in a [`Settings::trust_scenario`] function is answered the same
//! way, with the same code and message, and recorded the same way on the
//! SERVER span: the request is not handed to any handler, and the
//! connection serves its other calls.
//!
//! # Connections: shutdown and age
//!
//! [`Server::serve`]'s graceful shutdown stops accepting, sends every
//! connection a GOAWAY, and only then ends its open streams with
//! `UNAVAILABLE`, so that a stream opened again at once goes over a new
//! connection (to the next instance); the unary calls in flight finish
//! within [`Settings::shutdown_grace`]. A humus client sees no error for a
//! unary call in flight at the GOAWAY, and sends its next call over a new
//! connection.
//!
//! At the end of the grace, a call whose handler has not answered (a
//! unary call, or a stream whose handler has not returned its response
//! yet) is answered `UNAVAILABLE` with the message "the server stopped
//! before the call ended" (trailers-only; a stream whose headers went out
//! was already ended in its trailers), and its handler is dropped. The
//! connection is then closed, as soon as those answers are written and at
//! most 100 ms after the grace: the bound the answers add to a stop. So
//! the caller sees a gRPC status, not a connection dropped under it (which
//! a stock tonic client reports as `UNKNOWN` "transport error", a code
//! no client retries): `UNAVAILABLE`, which a retrying client may send
//! again, to another instance. A handler dropped mid-way may have done
//! part of its work: one that must not be done twice finishes within the
//! grace, or is a method its clients never retry.
//!
//! [`Settings::max_connection_age`] sends a connection a GOAWAY when it
//! reaches its age, drawn within ±10 % of the setting for each connection
//! (gRFC A9), so that clients spread over the instances of a service as
//! they come and go; after [`Settings::max_connection_age_grace`] its open
//! streams end with `UNAVAILABLE`, its calls in flight are answered
//! `UNAVAILABLE` ("the connection reached its maximum age before the call
//! ended: call again on a new connection"), and it is closed, with the
//! same bound of 100 ms.
//!
//! [`Settings::keepalive_interval`] (2 h by default, gRPC's) pings a
//! connection that has sent nothing for that long, and
//! [`Settings::keepalive_timeout`] (20 s) closes it when the ping is not
//! answered: a client that vanished without closing (its node gone, a NAT
//! that dropped the flow) does not hold its connection and handlers until
//! the server stops. [`Settings::max_header_list_size`] (16 KiB) bounds a
//! request's metadata: a larger request is refused with HTTP 431 before
//! any handler sees it (humus's client says the metadata is too large).
//! An accept that fails for want of a resource
//! (out of file descriptors) pauses the accept loop, 5 ms doubling to 1 s,
//! rather than spinning a core, while the open connections are served.
//!
//! The HTTP/2 is hyper's, and the routing tonic's (`tonic::service::Routes`),
//! as in `tonic::transport::Server`, whose own accept loop has neither a
//! per-connection jitter of the age nor a bound on a shutdown's drain, and
//! whose age with a grace closes a connection without a GOAWAY first; so
//! the server keeps its own loop over hyper's connections.
//!
//! # Health
//!
//! [`Health`] adds `grpc.health.v1` (tonic-health): readiness from a set of
//! [`Monitor`](crate::health::Monitor)s, and liveness that depends on
//! nothing outside the process.
//!
//! # The layer alone
//!
//! [`StripScenarioLayer`] is the strip alone, for a server that is not a
//! humus [`Server`] (a plain `tonic::transport::Server`). It also answers
//! a handler's panic (and one of its `trust_scenario` function) as a
//! humus [`Server`] does, `INTERNAL` "the handler panicked" with the
//! connection kept, where tonic's own server would reset the stream, or
//! drop the connection for a panic in a service's `call`. It starts no
//! span of its own: a panic is an `exception` event on the span of an
//! outer layer's context, when there is one
//! ([`StripScenario`] says which):
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
//!
//! Next to an [`InheritLayer`](crate::grpc::deadline::InheritLayer), in
//! either order, the calls a handler makes inherit its caller's scenario
//! only when the caller is trusted; adding the strip layer first
//! (outermost) is the cheaper order.

mod body;
pub mod future;
mod health;
mod inherit;
mod layer;
mod rpc;
#[allow(clippy::module_inception)]
mod server;
mod service;
mod settings;

pub use health::{Health, LIVENESS, READINESS};
pub use layer::StripScenarioLayer;
pub use server::{ServeError, Server};
pub use service::{Caller, PeerCertificates, StripScenario};
pub use settings::{
    DEFAULT_MAX_HEADER_LIST_SIZE, InvalidValue, MAX_CONNECTION_AGE_LIMIT, Settings, SettingsError,
    TrustScenario, check_addr, check_grace, check_keepalive, check_max_connection_age,
    check_max_header_list_size, check_plaintext, check_tls,
};
