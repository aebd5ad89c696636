//! The resilient gRPC client, on tonic ([design](crate::design::client)).
//!
//! A [`Client`] is one dependency: one address, one lazily dialled HTTP/2
//! connection (through the [`Setup`](crate::Setup)'s [`Host`](crate::Host),
//! with rustls), one retry budget and one circuit breaker, shared by every
//! call. Build it once from [`Settings`] where the service is set up, and
//! hand it to generated code, which calls it with a static [`Method`] per
//! RPC:
//!
//! ```
//! use std::sync::Arc;
//! use humus::grpc::client::{Client, Settings, check_addr};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A rustls client config trusting the dependency's CA: here a test CA
//! // (feature `testing`); in production, one built from your CA's PEM.
//! let ca = humus::testing::Ca::new();
//! let setup = humus::Setup::new();
//! // Each value read from configuration goes through its field's check,
//! // so an operator's mistake names the variable it came from (exit 78).
//! let addr = "carts:9090".to_owned();
//! check_addr(&addr).map_err(|e| format!("CARTS_ADDR: {e}"))?;
//! let carts = Client::new(
//!     &setup,
//!     Settings {
//!         addr,
//!         // Trusts the roots of this config only; `None` is plain text.
//!         tls: Some(Arc::new(ca.client_config())),
//!         ..Settings::default()
//!     },
//! )?; // a `NewError` is the code's fault (exit 1)
//! // Nothing is dialled yet. Readiness: healthy once connected, latched.
//! let _ready = carts.connected();
//! # Ok(())
//! # }
//! ```
//!
//! One unary call, end to end ([`Client::unary`]): the request is encoded
//! once; each attempt passes the breaker (a rejection ends the call
//! `Unavailable`, with the [`Rejected`](crate::circuit::Rejected) as its
//! source), goes over the connection (a request the server never saw, such
//! as one a GOAWAY cut off, is sent again at once), and is classified for
//! the breaker and for retries ([`classify_attempt`]); retries are bounded
//! by `max_attempts`, the budget and the deadline, and wait the larger of
//! the backoff and the server's pushback. Streams retry their open only,
//! and count in the breaker once, when they end ([`Streaming`]).

mod anchor;
mod attempt;
mod classify;
#[allow(clippy::module_inception)]
mod client;
mod codec;
mod connection;
mod decide;
mod hooks;
mod method;
mod settings;
mod stream;

pub use classify::{Classification, ClassifyFn};
pub use classify::{Classify, PUSHBACK_KEY, Pushback, classify_method, default_classify, pushback};
pub use client::Client;
pub use decide::{CallState, Ended, classify_attempt};
pub use method::{CodeRule, Method, MethodPolicy, RpcKind};
pub use settings::{
    InvalidValue, NewError, Settings, check_addr, check_authority, check_backoff_base,
    check_backoff_max, check_breaker, check_max_attempts, check_retry_budget, check_server_name,
    check_timeout, check_tls,
};
pub use stream::Streaming;
