//! The exchange-rate service: the wallet's HTTP dependency, and the
//! wallet's humus HTTP client of it.
//!
//! - The service ([`serve`]) is an axum server in this process, answering
//!   `GET /v1/rates/{currency}` with the rate as text (`0.92`), behind
//!   humus's [`ContextLayer`](../../humus/http/server/struct.ContextLayer.html): each
//!   request's handler runs in its caller's trace context, extracted with
//!   the W3C propagators. A knob ([`Rates::set_down`]) makes it answer 503
//!   with a proxy's page, as a gateway in front of a service that is down
//!   does.
//! - The wallet's client of it is a [`humus::http::client::Client`](../../humus/http/client/struct.Client.html), read
//!   from the environment ([`settings`]), each variable through its field's
//!   check, and built once with the wallet's other client
//!   ([`wallet::server`](crate::wallet::server)). Its GETs are retried on a
//!   503 within the retry budget, pass their own circuit breaker, and are
//!   recorded into the same instruments as the ledger's client, told apart
//!   by `server.port`.
//! - [`quote`] is the wallet's `Quote`: the client's answers become the
//!   wallet's (an unknown currency is its `NOT_FOUND`, a service it cannot
//!   reach or whose breaker is open its `UNAVAILABLE`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use humus::Setup;
use humus::app::{Env, Error};
use humus::http::client::{self as http_client, Kind};
use humus::http::server::ContextLayer;
use humus::telemetry::Telemetry;
use opentelemetry::trace::{TraceContextExt, TraceId};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::Status;

/// The prefix of the exchange-rate client's settings: every field of
/// [`http::client::Settings`](../../humus/http/client/struct.Settings.html),
/// such as `RATES_BREAKER_OPEN_FOR` for `breaker.open_for`.
pub const PREFIX: &str = "RATES_";
/// `RATES_BASE_URL`: the exchange-rate service's base URL, such as
/// `http://127.0.0.1:8080/v1` (optional: with no variable under
/// [`PREFIX`] set the wallet quotes nothing; checked by
/// [`http::client::check_base_url`](../../humus/http/client/fn.check_base_url.html)).
pub const ENV_RATES_BASE_URL: &str = "RATES_BASE_URL";
/// `RATES_ATTEMPT_TIMEOUT`: how long one attempt may take (default: the
/// client's, 5s; checked by
/// [`check_attempt_timeout`](../../humus/http/client/fn.check_attempt_timeout.html)).
pub const ENV_RATES_ATTEMPT_TIMEOUT: &str = "RATES_ATTEMPT_TIMEOUT";
/// `RATES_BACKOFF_BASE`: the backoff's base (default: the client's).
pub const ENV_RATES_BACKOFF_BASE: &str = "RATES_BACKOFF_BASE";
/// `RATES_BACKOFF_MAX`: the backoff's ceiling (default: the client's).
pub const ENV_RATES_BACKOFF_MAX: &str = "RATES_BACKOFF_MAX";
/// `RATES_BREAKER_OPEN_FOR`: how long the client's breaker stays open
/// (default: the client's, 10s).
pub const ENV_RATES_BREAKER_OPEN_FOR: &str = "RATES_BREAKER_OPEN_FOR";

/// The rates the service quotes, per unit of the wallet's currency.
pub const RATES: [(&str, &str); 3] = [("EUR", "0.92"), ("GBP", "0.79"), ("JPY", "155.2")];

/// The exchange-rate client's settings, read from `env` under [`PREFIX`]
/// with [`Env::http_client`](../../humus/app/struct.Env.html#method.http_client),
/// each variable through its field's check; a bad one is recorded in
/// `env`, for its `read_all`. `None` when no variable under [`PREFIX`] is
/// set; one alone is enough to read them all, so `RATES_TIMEOUT` without
/// [`ENV_RATES_BASE_URL`] is refused (`RATES_BASE_URL: not set`) rather
/// than ignored.
pub fn settings(env: &mut Env) -> Option<http_client::Settings> {
    let wanted = env.iter().any(|(name, _)| name.starts_with(PREFIX));
    wanted.then(|| env.http_client(PREFIX))
}

/// The wallet's answer to `Quote`: `cents` in `currency`, at the rate
/// the exchange-rate service gives through `rates`, and that rate.
///
/// # Errors
///
/// The wallet's `tonic::Status`: `INVALID_ARGUMENT` for a currency that is not
/// three capital letters, `NOT_FOUND` for one the service does not quote,
/// `UNAVAILABLE` for no answer, an open breaker, or any other answer.
pub async fn quote(
    rates: &http_client::Client,
    cents: i64,
    currency: &str,
) -> Result<(i64, String), Status> {
    if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(Status::invalid_argument(format!(
            "currency: want three capital letters such as EUR, got {currency:?}"
        )));
    }
    let response = rates
        .get(&format!("/rates/{currency}"))
        .send()
        .await
        .map_err(|e| from_rates(&e))?;
    match response.status().as_u16() {
        200 => {}
        404 => {
            return Err(Status::not_found(format!(
                "the exchange-rate service quotes no {currency}"
            )));
        }
        status => {
            return Err(Status::unavailable(format!(
                "the exchange-rate service is unavailable: it answered {status}"
            )));
        }
    }
    let rate = response.text().await.map_err(|e| {
        Status::unavailable(format!(
            "the exchange-rate service is unavailable: reading its answer: {e}"
        ))
    })?;
    let parsed: f64 = rate.trim().parse().map_err(|_| {
        Status::unavailable(format!(
            "the exchange-rate service answered {rate:?}, which is no rate"
        ))
    })?;
    Ok((
        (cents as f64 * parsed).round() as i64,
        rate.trim().to_owned(),
    ))
}

/// The wallet's `UNAVAILABLE` for a call to the exchange-rate service that
/// got no response, saying whether its breaker rejected the call.
pub fn from_rates(e: &http_client::Error) -> Status {
    let why = if e.kind() == Kind::Rejected {
        "the exchange-rate service is failing, its circuit breaker is open"
    } else {
        "the exchange-rate service is unavailable"
    };
    Status::unavailable(format!("{why}: {}", e.chain()))
}

/// The exchange-rate service's state, shared with its handlers: the knob,
/// and what it received.
#[derive(Clone, Debug, Default)]
pub struct Rates {
    inner: Arc<State>,
}

#[derive(Debug, Default)]
struct State {
    down: AtomicBool,
    seen: AtomicU64,
    traces: Mutex<Vec<TraceId>>,
}

impl Rates {
    /// A service that is up.
    pub fn new() -> Rates {
        Rates::default()
    }

    /// Makes it answer every request 503 with a proxy's page (`true`), or
    /// quote again (`false`).
    pub fn set_down(&self, down: bool) {
        self.inner.down.store(down, Ordering::SeqCst);
    }

    /// How many requests it has received.
    pub fn seen(&self) -> u64 {
        self.inner.seen.load(Ordering::SeqCst)
    }

    /// The trace id of each request it received, as its handler's current
    /// context had it (`TraceId::INVALID` for a request with no trace
    /// context), in order.
    pub fn traces(&self) -> Vec<TraceId> {
        self.inner.traces.lock().expect("not poisoned").clone()
    }

    async fn answer(&self, currency: String) -> axum::response::Response {
        use axum::http::StatusCode;
        use axum::response::IntoResponse as _;
        // ContextLayer made the caller's context the current one.
        let trace = opentelemetry::Context::current()
            .span()
            .span_context()
            .trace_id();
        self.inner.traces.lock().expect("not poisoned").push(trace);
        self.inner.seen.fetch_add(1, Ordering::SeqCst);
        if self.inner.down.load(Ordering::SeqCst) {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                [("content-type", "text/html")],
                "<html><head><title>503 Service Temporarily Unavailable</title></head></html>\n",
            )
                .into_response();
        }
        match RATES.iter().find(|(c, _)| *c == currency) {
            Some((_, rate)) => (*rate).into_response(),
            None => (StatusCode::NOT_FOUND, "no such currency").into_response(),
        }
    }
}

/// A running exchange-rate service, until [`stop`](Serving::stop).
#[derive(Debug)]
pub struct Serving {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Serving {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its base URL, `http://<addr>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Stops it gracefully (the requests in flight finish), within 5 s.
    ///
    /// # Errors
    ///
    /// [`humus::app::Error`](../../humus/app/struct.Error.html) when it failed, or did not stop in time.
    pub async fn stop(mut self) -> Result<(), Error> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match tokio::time::timeout(Duration::from_secs(5), &mut self.task).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(Error::other(e)),
            Ok(Err(e)) => Err(Error::other(e)),
            Err(_) => Err(Error::other(
                "the exchange-rate service did not stop within 5s",
            )),
        }
    }
}

/// Serves `rates` on a port of 127.0.0.1 the system picks, behind
/// [`ContextLayer`](../../humus/http/server/struct.ContextLayer.html) with the W3C propagators, and returns once it listens.
/// It records no telemetry of its own.
///
/// # Errors
///
/// [`humus::app::Error`](../../humus/app/struct.Error.html) when no port can be bound.
pub async fn serve(rates: &Rates) -> Result<Serving, Error> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(Error::other)?;
    let addr = listener.local_addr().map_err(Error::other)?;
    let setup = Setup::new().with_telemetry(
        Telemetry::builder()
            .propagator(crate::wallet::propagator())
            .build(),
    );
    let state = rates.clone();
    let app = axum::Router::new()
        .route(
            "/v1/rates/{currency}",
            axum::routing::get(
                move |axum::extract::Path(currency): axum::extract::Path<String>| {
                    let state = state.clone();
                    async move { state.answer(currency).await }
                },
            ),
        )
        .layer(ContextLayer::new(&setup));
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });
    Ok(Serving {
        addr,
        stop: Some(stop),
        task,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names of the variables `env` is refused for, and the error.
    fn refused(env: Env) -> (Vec<String>, String) {
        crate::refused(env.read_all(settings).unwrap_err())
    }

    #[test]
    fn settings_come_from_the_environment_and_are_optional() {
        let env = Env::from_pairs([
            (ENV_RATES_BASE_URL, "http://127.0.0.1:8080/v1"),
            (ENV_RATES_ATTEMPT_TIMEOUT, "300ms"),
            (ENV_RATES_BACKOFF_BASE, "5ms"),
            (ENV_RATES_BACKOFF_MAX, "50ms"),
            (ENV_RATES_BREAKER_OPEN_FOR, "500ms"),
            // Any setting of the client's, not only those the walkthrough sets.
            ("RATES_MAX_ATTEMPTS", "4"),
        ]);
        let s = env.read_all(settings).unwrap().unwrap();
        assert_eq!(s.base_url, "http://127.0.0.1:8080/v1");
        assert_eq!(s.attempt_timeout, Duration::from_millis(300));
        assert_eq!(s.backoff_base, Duration::from_millis(5));
        assert_eq!(s.backoff_max, Duration::from_millis(50));
        assert_eq!(s.breaker.open_for, Duration::from_millis(500));
        assert_eq!(s.max_attempts, 4);
        assert!(humus::app::check_http_client(&s).is_ok());

        assert!(Env::default().read_all(settings).unwrap().is_none());
    }

    #[test]
    fn every_bad_variable_is_named() {
        let (vars, err) = refused(Env::from_pairs([
            (ENV_RATES_BASE_URL, "http:///v1"),
            (ENV_RATES_ATTEMPT_TIMEOUT, "0s"),
            (ENV_RATES_BREAKER_OPEN_FOR, "soon"),
        ]));
        assert_eq!(
            vars,
            [
                ENV_RATES_BREAKER_OPEN_FOR,
                ENV_RATES_BASE_URL,
                ENV_RATES_ATTEMPT_TIMEOUT,
            ],
            "{err}"
        );
        assert!(
            err.contains("RATES_BASE_URL: \"http:///v1\" has no host"),
            "{err}"
        );
    }

    #[test]
    fn one_variable_reads_the_group_and_a_missing_base_url_is_named() {
        let (vars, err) = refused(Env::from_pairs([(ENV_RATES_BACKOFF_MAX, "1s")]));
        assert_eq!(vars, [ENV_RATES_BASE_URL], "{err}");
        let (vars, err) = refused(Env::from_pairs([
            (ENV_RATES_BASE_URL, "http://rates:8080"),
            ("RATES_URL", "http://rates:8080"),
        ]));
        assert_eq!(vars, ["RATES_URL"], "{err}");
    }

    #[tokio::test]
    async fn quotes_and_their_failures_become_the_wallets_answers() {
        let rates = Rates::new();
        let serving = serve(&rates).await.unwrap();
        let client = http_client::Client::new(
            &Setup::new(),
            http_client::Settings {
                base_url: serving.base_url(),
                max_attempts: 1,
                ..http_client::Settings::default()
            },
        )
        .unwrap();
        assert_eq!(
            quote(&client, 10_000, "EUR").await.unwrap(),
            (9_200, "0.92".to_owned())
        );
        let code = |r: Result<(i64, String), Status>| r.unwrap_err().code();
        assert_eq!(code(quote(&client, 1, "XXX").await), tonic::Code::NotFound);
        assert_eq!(
            code(quote(&client, 1, "eur").await),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            code(quote(&client, 1, "../x").await),
            tonic::Code::InvalidArgument
        );
        rates.set_down(true);
        let down = quote(&client, 1, "EUR").await.unwrap_err();
        assert_eq!(down.code(), tonic::Code::Unavailable);
        assert!(down.message().contains("answered 503"), "{down:?}");
        assert_eq!(rates.seen(), 3);
        serving.stop().await.unwrap();
    }
}
