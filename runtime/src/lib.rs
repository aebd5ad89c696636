//! humus: resilient, observable outbound calls for Rust services, gRPC
//! (on tonic) first, then HTTP, Kafka and RabbitMQ, with one model of a call.
//!
//! Every outbound call goes over one lazily dialled connection per
//! dependency, is retried as a classifier decides (bounded by
//! `max_attempts`, a retry budget shared by every call to the dependency as
//! gRFC A6's retry throttling, the call's deadline and the server's
//! pushback), passes the dependency's circuit breaker, is traced and
//! measured with OpenTelemetry through the [`Setup`]'s providers (never the
//! globals), and is a failure-injection point. Every inbound path (the gRPC
//! server, the HTTP layer, the consumers) hands its caller's deadline and
//! context to the calls its handler makes, and strips the failure scenarios
//! of callers it does not trust. [`App`] runs the lifecycle around them.
//!
//! # Example
//!
//! A dependency served by a humus [`Server`](grpc::server::Server) and called
//! through a humus [`Client`](grpc::client::Client), on the in-memory network
//! and test CA of the `testing` feature (no port, no certificate file). A
//! service's own code calls through the typed client `humus-build` generates
//! (the README's quick start); any tonic stub, here tonic-health's, takes the
//! client's [`channel`](grpc::client::Client::channel) and gets the same
//! retries, breaker, budget, deadline, telemetry and failure injection:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use humus::grpc::{client, server};
//! use humus::testing::{Ca, Host};
//! use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};
//! use tonic_health::pb::health_client::HealthClient;
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // One Setup per process: its host (here the in-memory network), its
//!     // telemetry (none given: no-op) and its failure injector (off).
//!     let setup = humus::Setup::new().with_host(Host::new());
//!     let ca = Ca::new();
//!
//!     // The dependency: a humus server, here serving grpc.health.v1 only
//!     // (a service adds its tonic services with `add_service`).
//!     let mut ledger = server::Server::new(
//!         &setup,
//!         server::Settings {
//!             addr: "ledger:50051".into(), // required: where it listens
//!             tls: Some(Arc::new(ca.issue("ledger").server_config())),
//!             ..server::Settings::default()
//!         },
//!     )?
//!     .health(server::Health::new());
//!     ledger.bind().await?;
//!     let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//!     let serving = tokio::spawn(ledger.serve(async {
//!         let _ = stopped.await;
//!     }));
//!
//!     // The caller: one client per dependency. It dials nothing yet.
//!     let ledger = client::Client::new(
//!         &setup,
//!         client::Settings {
//!             addr: "ledger:50051".into(), // required: host:port, no scheme
//!             tls: Some(Arc::new(ca.client_config())), // None: plain text
//!             ..client::Settings::default()
//!         },
//!     )?;
//!     let mut health = HealthClient::new(ledger.channel());
//!     let mut check = tonic::Request::new(HealthCheckRequest::default());
//!     check.set_timeout(Duration::from_secs(1));
//!     // Result<tonic::Response<HealthCheckResponse>, tonic::Status>
//!     let answer = health.check(check).await?;
//!     assert_eq!(answer.into_inner().status(), ServingStatus::Serving);
//!
//!     stop.send(()).ok(); // a graceful shutdown
//!     serving.await??;
//!     Ok(())
//! }
//! ```
//!
//! # Modules
//!
//! | module | what it holds |
//! |---|---|
//! | [`grpc::client`] | the gRPC client: settings (units, defaults, checks), typed calls and streams, the channel for stock tonic stubs, per-attempt layers, readiness |
//! | [`grpc::server`] | the gRPC server: serving, the scenario strip, health, graceful shutdown |
//! | `grpc::wire` | (crate-private) gRPC's wire details, for client and server alike: `grpc-status`, `grpc-message` and trailers-only responses, the content-type, `grpc-timeout` |
//! | [`deadline`] | the deadline and context a served request (gRPC, HTTP, a consumed message) hands the calls its handler makes, whatever their transport (also at `grpc::deadline`) |
//! | [`http`] | the HTTP client (on reqwest) and the HTTP server's context and scenario layer (axum, hyper) |
//! | `kafka` | (feature `kafka`) Kafka on rdkafka: the producer (on the call engine), the consumer, the context in record headers |
//! | `rabbitmq` | (feature `rabbitmq`) RabbitMQ on amqprs: the publisher (confirmed publishes, on the call engine), the consumer, the context in message headers |
//! | [`app`] | [`App`], the lifecycle: telemetry, faults, init, serve, signals, stop, exit codes; settings from the environment ([`app::from_env`]) |
//! | [`circuit`] | the circuit breaker's state machine |
//! | [`retry`] | the retry budget, the backoff schedule, retry decisions and `Retry-After` |
//! | [`fault`] | failure injection: scenarios, the injector, the strip, `jsonscenario` |
//! | [`telemetry`] | the OpenTelemetry providers and propagator humus records with, and its instruments' names |
//! | [`health`] | readiness monitors |
//! | `testing` | (feature `testing`) the in-memory network ([`Host`] implementation), a test CA, captured telemetry |
//! | [`design`] | the design, in prose: the gRPC client, the circuit breaker, failure injection |
//!
//! Every client (gRPC, HTTP, the Kafka producer, the RabbitMQ publisher)
//! runs on one crate-private attempt loop (`call`): breaker,
//! failure injection, attempt deadline, send, classify, settle, retry,
//! wait, written once for every transport, with what every client holds
//! for it (`call::Dependency`: its breaker, budget, backoff, recorder and
//! failure injector, built once in the client's `new`) and the settings every client
//! shares (`call::settings`: the timeout, retry, budget, breaker and
//! `forward_scenario` sections, their serde mapping and checks, and the one
//! settings error every transport returns, [`InvalidSettings`]), and the
//! timer every client keeps armed while its calls come (`call::anchor`), so
//! that arming an attempt's own timer does not wake tokio's time driver
//! (its task also keeps, in a queue, the deadlines of a client whose calls
//! all get one timeout, the Kafka producer's, which then need no timer of
//! their own). The modules every transport uses (`deadline`, `retry`,
//! `telemetry`, the crate-private `addr` of `host:port` parsing) import
//! no transport; no transport's folder imports one that imports it back.
//!
//! # Features
//!
//! | feature | adds | needs |
//! |---|---|---|
//! | `testing` | `humus::testing`: the in-memory `Host`, the test `Ca`, in-memory telemetry capture (for a service's own tests: usually in `[dev-dependencies]`) | nothing more |
//! | `kafka` | `humus::kafka` | C and C++ compilers and make: librdkafka is built from rdkafka's bundled source (a few minutes the first time) |
//! | `rabbitmq` | `humus::rabbitmq` | nothing more (amqprs is pure Rust) |
//!
//! None is on by default. To read the docs of a feature's items, `cargo
//! doc --open --features humus/testing` (or `--all-features` in this
//! repository); built with `--cfg docsrs`, each gated item is marked with
//! its feature.
//!
//! # Where to read next
//!
//! - The README's quick start: a service with `build.rs`, an annotated
//!   `.proto`, `#[humus::client]`, and an [`App`] serving and calling.
//! - [`grpc::client`] for what a call does and every client setting;
//!   [`App`] for the lifecycle; [`http::client`] for HTTP dependencies.
//! - The design pages, [`design`]: the [gRPC client](design::client), the
//!   [circuit breaker](design::circuit_breaker) and [failure
//!   injection](design::failure_injection). Each item's docs cite the
//!   section it implements, or the gRFC (gRFC A6 is gRPC's retry design,
//!   whose retry throttling the retry budget implements).
//! - `CONTRIBUTING.md` in the repository, to change humus.
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
pub mod deadline;
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

mod addr;
mod call;
mod chain;
mod debug;
mod kept;
mod setup;
mod tls;
pub use app::App;
pub use call::settings::InvalidSettings;
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
