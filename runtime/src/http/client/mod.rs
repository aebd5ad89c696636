//! The resilient HTTP client: the gRPC client's breaker, retry budget,
//! backoff, telemetry and failure injection, for outbound HTTP calls, on
//! reqwest.
//!
//! A [`Client`] is one HTTP dependency (a [base URL](Settings::base_url)):
//! one reqwest connection pool, one retry budget and one circuit breaker,
//! shared by every call and every task.
//!
//! ```no_run
//! use humus::http::client::{Client, Settings, check_base_url};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let setup = humus::Setup::new();
//! // Each value read from configuration goes through its field's check.
//! let base_url = "https://rates:8443/v1".to_owned();
//! check_base_url(&base_url).map_err(|e| format!("RATES_BASE_URL: {e}"))?;
//! let rates = Client::new(&setup, Settings { base_url, ..Settings::default() })?;
//!
//! // reqwest's builder methods, sent through humus: GET is retried on a
//! // 502, 503, 504 or no response, inside the breaker and the budget.
//! let response = rates
//!     .get("/rates/EUR")
//!     .bearer_auth("token")
//!     .send()
//!     .await?
//!     .error_for_status()?;
//! let _body = response.text().await?;
//!
//! // A POST is sent once, unless it opts in (it carries an idempotency key).
//! rates.post("/quotes").header("idempotency-key", "q-7").body("{}").retry(true).send().await?;
//!
//! // Any reqwest::Request, built with the user's own reqwest code.
//! let request = rates.reqwest().get("https://rates:8443/v1/health").build()?;
//! rates.execute(request).await?;
//! # Ok(())
//! # }
//! ```
//!
//! In a service run by the [`App`](crate::App), the settings are read
//! from environment variables with
//! [`app::Env::http_client`](crate::app::Env::http_client)
//! (`RATES_BASE_URL`, `RATES_TIMEOUT`, ...: every bad one named, exit 78),
//! or with serde (`envy`, `figment`, `config`: [`Settings`] deserialises as
//! the gRPC client's settings do) and checked with
//! [`app::check_http_client`](crate::app::check_http_client), which makes
//! a bad value exit 78 naming every bad field; `?` on [`Client::new`]'s
//! [`NewError`] is exit 1. A path given to [`Client::get`] and the rest is
//! appended to the base URL's path and stays under it
//! ([`Client::request`]).
//!
//! The same service's gRPC dependency is a [`grpc::client::Client`](crate::grpc::client::Client),
//! built from the same [`Setup`](crate::Setup): both record into the same
//! instruments and logs, and are injection points of the same scenarios.
//!
//! # Why a thin client over `reqwest::Client`
//!
//! The client takes and returns reqwest's own types: a
//! [`reqwest::Request`] built with any reqwest code ([`Client::execute`]),
//! reqwest's builder methods ([`Client::get`] and the rest, with
//! [`RequestBuilder::map`] for any of them), and a [`reqwest::Response`]
//! read as reqwest reads it. So a service's reqwest code keeps working: it
//! swaps `reqwest_client.execute(request)` for `humus_client.execute(request)`,
//! and can keep its own [`reqwest::ClientBuilder`] ([`Client::with_builder`]).
//! A reqwest-middleware middleware was the other choice; it was not taken
//! because the humus client needs what that design cannot give it:
//!
//! - errors that say what happened: a middleware's errors travel as an
//!   `anyhow::Error`, while [`Error`] tells a breaker's rejection, an
//!   injected failure, an attempt timeout and the call's own timeout apart
//!   ([`Kind`]), which both the caller and the classifier need;
//! - one dependency per client: the base URL names the breaker, the budget,
//!   the telemetry's `server.address` and the injection point, and the
//!   client refuses a request to another origin, where a middleware sees
//!   every URL its client is given; nor does it follow a redirect to
//!   another origin (one within it is followed, up to 10 in a row): the
//!   call returns the 3xx response, so another origin's answer is never
//!   counted as the dependency's, nor sent its trace context and baggage;
//! - the attempt's time left as reqwest's own timer, which keeps bounding
//!   the body after the response is returned.
//!
//! reqwest does the HTTP (HTTP/1.1 and HTTP/2, with rustls): humus has no
//! HTTP stack of its own. reqwest's own retries of a request the server
//! refused before processing it (an HTTP/2 REFUSED_STREAM) are left on,
//! as the gRPC client's transparent retry is: they are not attempts.
//!
//! # One call
//!
//! ```text
//! deadline = start + timeout (or the request's shorter timeout), or the served RPC's, when earlier
//! loop attempt n = 1..=max_attempts:
//!    breaker.allow()          rejected -> a span, humus.circuit.calls rejected, Err(Kind::Rejected)
//!    the attempt's CLIENT span (HTTP client conventions)
//!    faults.eval("http:<host>:<port>") inside attempt_timeout
//!                             abort -> Err(Kind::Transport, InjectedError); delay -> waited
//!    strip the scenario unless forward_scenario; inject trace context + baggage
//!    reqwest, its own timer the attempt's time left (attempt_timeout, within timeout)
//!    classification = Settings.classify (default_classify), unless the deadline passed
//!    no retry for a request that may not be sent again
//!    ticket.done(breaker outcome); retry::decide (budget, backoff, Retry-After, deadline)
//! ```
//!
//! # What a call records
//!
//! Per attempt, a CLIENT span in the scope
//! [`HTTP_SCOPE`](crate::telemetry::names::HTTP_SCOPE) named after the
//! method, with `http.request.method`, `server.address`, `server.port`,
//! `url.full` (credentials redacted), `http.request.resend_count` from the
//! second attempt, `http.response.status_code` and, for a status from 400
//! or an error, `error.type` (the status code, `timeout`, `connect`,
//! `transport`, or [`fault::ERROR_TYPE`](crate::fault::ERROR_TYPE) for an
//! injected failure: an abort, or a delay a timeout cut short; a call
//! whose deadline such a delay ran into still returns a plain
//! [`Kind::Timeout`], see [`Error::error_type`]); and `http.client.request.duration`, in seconds. An
//! attempt that failure injection evaluated has its `humus.fit.evaluation`
//! event, and a strip its `humus.fit.strip` event, on the attempt's span.
//! humus's four instruments (`humus.circuit.state`,
//! `humus.circuit.transitions`, `humus.circuit.calls`,
//! `humus.retry.decisions`) and the breaker's `humus.circuit.transition`
//! log records are the gRPC client's, with the same names, scope and
//! attributes ([`telemetry`](crate::telemetry)).
//!
//! [`reqwest::Request`]: https://docs.rs/reqwest/0.13/reqwest/struct.Request.html
//! [`reqwest::Response`]: https://docs.rs/reqwest/0.13/reqwest/struct.Response.html
//! [`reqwest::ClientBuilder`]: https://docs.rs/reqwest/0.13/reqwest/struct.ClientBuilder.html

mod builder;
mod call;
mod classify;
#[allow(clippy::module_inception)]
mod client;
mod error;
mod path;
mod settings;

pub use builder::RequestBuilder;
pub use classify::{AttemptResult, Classify, classify_status, default_classify};
#[cfg(feature = "rabbitmq")]
pub(crate) use client::default_tls;
pub use client::{CallOptions, Client, is_idempotent};
pub use error::{Error, Kind};
pub use settings::{NewError, Settings, check_attempt_timeout, check_base_url};

pub use crate::call::Classification;
pub use crate::call::settings::{
    InvalidValue, check_backoff_base, check_backoff_max, check_breaker, check_max_attempts,
    check_retry_budget, check_timeout, check_tls,
};
pub use crate::retry::{RetryAfter, retry_after};
