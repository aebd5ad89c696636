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
//! the backoff and the server's pushback. An attempt that outlives
//! [`Settings::attempt_timeout`] (unset by default) is cancelled, counted
//! as a failure and retried ([`AttemptTimeout`]). Streams retry their open only,
//! and count in the breaker once, when they end ([`Streaming`]).
//!
//! # Per-attempt layers and interceptors
//!
//! [`Settings::layer`] takes a tower layer, and [`Settings::interceptor`] a
//! tonic interceptor, that wrap each attempt, inside the retries and the
//! breaker, after the attempt's failure-injection point: they run once
//! per attempt (and for each transparent resend), on the attempt's own
//! request ([`AttemptService`]), see its metadata (its `grpc-timeout`, its
//! `traceparent`) and may change it:
//!
//! ```
//! use humus::grpc::client::Settings;
//!
//! let settings = Settings {
//!     addr: "carts:9090".into(),
//!     ..Settings::default()
//! }
//! .interceptor(|mut request: tonic::Request<()>| {
//!     // Read on every attempt: a retry carries a fresh token.
//!     let token = "Bearer t0k3n".parse().expect("ASCII");
//!     request.metadata_mut().insert("authorization", token);
//!     Ok(request)
//! });
//! # let _ = settings;
//! ```
//!
//! An error a layer returns ends the attempt with the [`Status`](https://docs.rs/tonic/0.14/tonic/struct.Status.html)
//! it carries (in its `source()` chain), else `Unknown`, with a
//! [`LayerError`] as the status's source; a trailers-only answer of its own
//! (an interceptor's `Err(status)`) ends it with that status. Either is
//! classified, retried and counted as any attempt's result, except tower's
//! `Elapsed`, which is the attempt's timeout ([`AttemptTimeout`]: a
//! failure, retried), and tower's `Overloaded`, a shed attempt
//! (`Unavailable`, counting nothing, not retried). Each attempt's timeout
//! needs no layer: it is [`Settings::attempt_timeout`]. With no layer
//! set the attempt is sent as before, with no box or allocation more.
//! Design: [per-attempt layers](crate::design::client#per-attempt-layers).
//!
//! # Stock tonic clients
//!
//! [`Client::channel`] is the channel any tonic-generated client takes
//! (`HealthClient::new(client.channel())`): a [`Channel`], a tower
//! `Service` of HTTP requests and so tonic's `GrpcService`, whose calls run
//! the same attempt loop as the typed client's, with the same breaker,
//! budget, deadline, telemetry, fault point and classification. Given the
//! generated descriptors ([`Methods`], [`Channel::with_methods`]), or
//! those of an encoded `FileDescriptorSet`
//! ([`Methods::from_file_descriptor_set`]: tonic-health's, a googleapis
//! crate's, a build's own), each method keeps its kind and policy; the
//! health and reflection services are known without them
//! ([`Methods::well_known`]). A method not known gets
//! [`Settings::classify`] and the fault point `grpc:<package.Service/Method>`,
//! and is called as a stream that is sent once (never retried: it may not
//! be idempotent) and bounded by [`Settings::timeout`] until the server
//! answers with its response headers. A unary request's body is kept for the retries
//! up to [`RETRY_BUFFER`] bytes (a longer one is sent once, not retried);
//! see [`Channel`].
//!
//! # The connection and its backoff
//!
//! Every call goes over one HTTP/2 connection, dialled when the first call
//! (or readiness check) needs it and again when it goes away (a GOAWAY, a
//! broken socket), at once. A dial is done once TLS is and the server's
//! HTTP/2 settings have arrived, within 20 s (or the backoff, if longer).
//! A dial that fails starts gRPC's connection backoff: the next dial is
//! due 1 s after the failed one started, then 1.6 times later each time
//! (±20 % jitter), up to [`Settings::connect_backoff_max`] (120 s by
//! default), and a dial that succeeds starts it over. Meanwhile calls do
//! not dial and do not wait: each attempt fails at once `Unavailable`,
//! with the last dial's error, how long ago it failed, and when the next
//! dial is due. Each such attempt, and each that waited for a dial that
//! failed, is a failed attempt classified as any other `Unavailable`
//! ([`classify_attempt`]): by default retried within `max_attempts` and
//! the retry budget, and a breaker failure. So a dependency that refuses
//! connections costs it a dial per backoff, however many calls are made,
//! opens the breaker after five such failures in a row (within its first
//! two calls, by default), as one that hangs does, and one that comes back
//! is reached by the first call (or half-open probe) after the backoff. The readiness check ([`Client::connected`]) dials on its
//! own schedule, whatever the calls' backoff.
//!
//! # What the server's answer means
//!
//! A response whose HTTP status is 200 and whose content-type is
//! `application/grpc` (or `application/grpc+…`) is read as gRPC, and so is
//! a trailers-only response (one with a `grpc-status`). Any other answer,
//! such as a proxy's error page (an HTTP 503 with a `text/plain` or HTML
//! body, as Envoy or nginx sends), ends the attempt with gRPC's mapping of
//! its HTTP status, its body unread: 400 `Internal`, 401
//! `Unauthenticated`, 403 `PermissionDenied`, 404 `Unimplemented`, 429,
//! 502, 503 and 504 `Unavailable` (a 502, 503 or 504 page is retried, and
//! counted against the dependency), any other `Unknown`. A 429 or 503
//! page's `Retry-After` is its pushback: the retry waits for it, or is not
//! made when it is longer than [`Settings::backoff_max`]. A 429 page is
//! the dependency, or the gateway in front of it, shedding load, as a
//! `ResourceExhausted` is: the [`default_classify`] retries it only after
//! its `Retry-After` and counts it against the dependency (as the HTTP
//! client's default counts a 429), so a dependency that sheds every call
//! opens its breaker. The status mapped from an HTTP answer has an
//! [`HttpAnswer`] as its [`source`](std::error::Error::source): a
//! classifier of one's own tells a mapped page from a gRPC server's status
//! by [`mapped_http_status`] (its HTTP status, `None` for a server's status
//! whatever its message says), and may spare the breaker a 429; a method's
//! table entry for `Unavailable` applies to it as to any other. A response message over the decoding
//! limit ([`Settings::max_decoding_message_size`], 4 MiB by default) ends
//! `ResourceExhausted`; a status the server sent (a tonic server's
//! `OutOfRange` for a request over its own limit) is returned as it is. A request the server never saw
//! (a stream it refused with `REFUSED_STREAM`, one past the last stream of
//! its GOAWAY, one the connection closed before sending) is sent again at
//! once, up to 3 times, within the same attempt and whatever the method's
//! retry policy ([`MethodPolicy::never_retry`] included), each send with
//! a span and a `rpc.client.call.duration` point of its own.
//!
//! # TLS: the certificate's name and the `:authority`
//!
//! [`Settings::tls`] is the rustls config the client dials with (a copy of
//! it, with `h2` as its only ALPN protocol, which the server must choose);
//! `None` is plain text. Two settings name the server, apart:
//! [`Settings::server_name`] is the name its certificate is checked for
//! (otherwise the host of [`Settings::addr`]), and [`Settings::authority`]
//! is the `:authority` of every call (otherwise the server name, else the
//! address). A client of `10.0.0.7:9090` may so require a certificate for
//! `carts` and send `:authority carts-api`. A dial that fails because one
//! side speaks TLS and the other does not says so, and names
//! [`Settings::tls`]; one whose server answers in HTTP/1 (a proxy not set
//! up for gRPC, answering `HTTP/1.1 502 Bad Gateway`) says that instead.

mod attempt;
mod channel;
mod classify;
#[allow(clippy::module_inception)]
mod client;
mod codec;
mod connection;
#[cfg(feature = "rabbitmq")]
pub(crate) use connection::backoff_after;
mod decide;
mod described;
pub use described::DescriptorSetError;
mod hooks;
mod layer;
mod limit;
mod method;
mod settings;
mod stream;
mod stream_end;
mod unary;

pub use channel::{
    Channel, ChannelBody, ChannelFuture, DuplicateMethod, MAX_UNLISTED_PATHS, Methods, RETRY_BUFFER,
};
pub use classify::{Classification, ClassifyFn};
pub use classify::{
    Classify, PUSHBACK_KEY, Pushback, classify_method, default_classify, mapped_http_status,
    pushback,
};
pub use client::Client;
pub use connection::HttpAnswer;
pub use decide::{AttemptTimeout, CallState, DEADLINE_SLACK, Ended, NoRetry, classify_attempt};
pub use layer::{AttemptLayers, AttemptService, BoxError, LayerError};
pub use method::{CodeRule, Method, MethodPolicy, RpcKind};
pub use settings::{
    InvalidValue, NewError, Settings, check_addr, check_attempt_timeout, check_authority,
    check_backoff_base, check_backoff_max, check_breaker, check_connect_backoff_max,
    check_max_attempts, check_max_decoding_message_size, check_open_for, check_probe_timeout,
    check_probes, check_retry_budget, check_server_name, check_timeout, check_tls, check_window,
};
pub use stream::Streaming;
