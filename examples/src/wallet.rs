//! The wallet service (`wallet.v1.Wallet`): a production-ready service that
//! calls another ([design](humus::design::client)).
//!
//! - Its settings come from environment variables, read with humus's
//!   [`app::Env`](../../humus/app/struct.Env.html) as any humus service
//!   reads them ([`Settings::read`]): the ledger client's under `LEDGER_`
//!   (`LEDGER_ADDR`, `LEDGER_BREAKER_OPEN_FOR`, ...), the server's and
//!   the wallet's own under `WALLET_` (`WALLET_ADDR`, `WALLET_PLAINTEXT`,
//!   `WALLET_FAULT_INJECTION`, ...), the exchange-rate client's under
//!   `RATES_`. Every bad, missing or misspelled variable is named at once,
//!   and fails startup with exit 78.
//! - One humus client of the ledger, built once at startup and shared by
//!   every handler ([`start`]): every call is retried as the method's
//!   policy says (`Transfer` is safe to retry, and a write race's
//!   `ABORTED` is retried and counts as a success; `Charge` is never sent
//!   twice), bounded by the client's retry budget, and passes its circuit
//!   breaker.
//! - Its handlers turn the ledger's answers into the wallet's own
//!   ([`from_ledger`]): too little money is the wallet's
//!   `FAILED_PRECONDITION`, a ledger it cannot reach (or whose breaker is
//!   open) its `UNAVAILABLE`.
//! - It serves `grpc.health.v1`, whose readiness is the ledger client's
//!   `Connected`: not ready until the client has connected, and ready from
//!   then on, through the ledger's outages.
//! - It is served on a humus server ([`server()`]) and runs as a humus App
//!   ([`app`]): each RPC is a SERVER span in the trace its caller sent,
//!   the parent of the ledger client's attempts, and a graceful shutdown
//!   lets the calls in flight finish.
//! - One humus HTTP client of the exchange-rate service, when
//!   `RATES_BASE_URL` is set ([`crate::rates`]): `Quote` calls it, with its own retry budget
//!   and breaker, in the trace of the wallet's RPC.
//! - One humus Kafka producer, when [`ENV_EVENTS_BROKERS`] is set: each
//!   payment the ledger applied is a "transfer applied" record on
//!   [`TRANSFERS_TOPIC`] ([`transfer_applied`]), produced in the payment's
//!   RPC context (its trace, and its baggage's failure scenario, which
//!   can abort that payment's record alone at `kafka:wallet.transfers`).
//!   A record that fails does not fail its payment: the ledger applied
//!   the transfer, and answering an error would tell the caller it had
//!   not. The failure is the record's PRODUCER span's error and a Failure
//!   in the producer's breaker (`humus.circuit.calls`); a service that must
//!   not lose an event writes it to an outbox in the ledger's transaction
//!   instead.
//! - It serves plain-text HTTP/2, and says so ([`ENV_PLAINTEXT`]): it runs
//!   where a mesh sidecar or a local proxy terminates TLS, or where only
//!   loopback reaches it.
//! - With failure injection on, a caller the gateway vouches for (its
//!   request carries [`SCENARIO_TOKEN_HEADER`] with the secret of
//!   [`ENV_SCENARIO_TOKEN`], a header only the gateway sets) may put a
//!   failure scenario in its baggage ([`SCENARIO_KEY`]), which the ledger
//!   client's injection points carry out for that request alone. Every
//!   other caller's scenario is stripped: trust goes by who the caller
//!   is, never by where it connects from (behind a sidecar or a local
//!   proxy every caller is loopback). A service that serves mTLS trusts
//!   by the caller's certificate instead (`Caller::peer_certificates`).

use std::time::Duration;

use humus::app::{Env, Error, Providers};
use humus::circuit;
use humus::fault::{self, Injector, jsonscenario};
use humus::grpc::client::{self, Client};
use humus::grpc::deadline::Inherited;
use humus::grpc::server::{self, Health, Server, TrustScenario};
use humus::kafka::{self, Producer, ProducerSettings, Record};
use humus::telemetry::Telemetry;
use humus::{App, Setup};
use opentelemetry::propagation::TextMapCompositePropagator;
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use serde::Deserialize;
use tokio::sync::mpsc;
use tonic::{Code, Request, Response, Status};

use crate::pb::ledger::v1 as ledger;
use crate::pb::wallet::v1 as pb;

/// The prefix of the wallet's server's settings and of its own
/// (`WALLET_ADDR`, `WALLET_PLAINTEXT`, `WALLET_FAULT_INJECTION`, ...):
/// both groups are read under it, and a variable under it that neither
/// reads is refused, naming the nearest setting.
pub const PREFIX: &str = "WALLET_";
/// The prefix of the ledger client's settings: every field of
/// [`client::Settings`](../../humus/grpc/client/struct.Settings.html),
/// such as `LEDGER_BREAKER_OPEN_FOR` for `breaker.open_for`.
pub const LEDGER_PREFIX: &str = "LEDGER_";

/// `WALLET_EVENTS_BROKERS`: the Kafka brokers the wallet produces its
/// "transfer applied" records to, `host:port` separated by commas (unset:
/// it produces none; checked by
/// [`kafka::check_brokers`](../../humus/kafka/fn.check_brokers.html)).
pub const ENV_EVENTS_BROKERS: &str = "WALLET_EVENTS_BROKERS";
/// The topic of the wallet's "transfer applied" records.
pub const TRANSFERS_TOPIC: &str = "wallet.transfers";

/// `WALLET_ADDR`: the address the wallet's server listens on, the
/// server's `addr` (default [`DEFAULT_ADDR`] in the standalone wallet,
/// [`env()`]).
pub const ENV_ADDR: &str = "WALLET_ADDR";
/// `LEDGER_ADDR`: the ledger's address, `host:port` (required; checked by
/// [`client::check_addr`](../../humus/grpc/client/fn.check_addr.html)).
pub const ENV_LEDGER_ADDR: &str = "LEDGER_ADDR";
/// `LEDGER_TIMEOUT`: how long one call to the ledger may take, retries
/// included (default: the client's, 10s; checked by
/// [`client::check_timeout`](../../humus/grpc/client/fn.check_timeout.html)).
pub const ENV_LEDGER_TIMEOUT: &str = "LEDGER_TIMEOUT";
/// `LEDGER_MAX_ATTEMPTS`: the most attempts of one call (default: the
/// client's, 3; checked by [`client::check_max_attempts`](../../humus/grpc/client/fn.check_max_attempts.html)).
pub const ENV_LEDGER_MAX_ATTEMPTS: &str = "LEDGER_MAX_ATTEMPTS";
/// `LEDGER_BACKOFF_BASE`: the backoff's base (default: the client's;
/// checked by [`client::check_backoff_base`](../../humus/grpc/client/fn.check_backoff_base.html)).
pub const ENV_LEDGER_BACKOFF_BASE: &str = "LEDGER_BACKOFF_BASE";
/// `LEDGER_BACKOFF_MAX`: the backoff's ceiling (default: the client's;
/// checked by [`client::check_backoff_max`](../../humus/grpc/client/fn.check_backoff_max.html)).
pub const ENV_LEDGER_BACKOFF_MAX: &str = "LEDGER_BACKOFF_MAX";
/// `LEDGER_BREAKER_OPEN_FOR`: how long the ledger client's breaker stays
/// open (default: the client's, 10s; checked by
/// [`client::check_open_for`](../../humus/grpc/client/fn.check_open_for.html)).
pub const ENV_LEDGER_BREAKER_OPEN_FOR: &str = "LEDGER_BREAKER_OPEN_FOR";
/// `WALLET_FAULT_INJECTION`: `true` to carry out the failure scenarios
/// that trusted callers ([`ENV_SCENARIO_TOKEN`]) put in their baggage
/// (default `false`).
pub const ENV_FAULT_INJECTION: &str = "WALLET_FAULT_INJECTION";

/// `WALLET_PLAINTEXT`: must be `true`, the server's `plaintext`. The
/// wallet has no certificate settings of its own, and a humus server
/// serves plain text only when its settings say so: where a mesh sidecar
/// or a local proxy terminates TLS, or where only loopback reaches the
/// wallet. Unset or `false` fails startup, exit 78.
pub const ENV_PLAINTEXT: &str = "WALLET_PLAINTEXT";

/// `WALLET_SCENARIO_TOKEN`: the secret the gateway puts in
/// [`SCENARIO_TOKEN_HEADER`] of the requests whose failure scenarios the
/// wallet is to trust (the gateway removes the header from every request
/// it did not vouch for), at least 16 characters. Unset: the wallet
/// trusts no caller's scenario.
pub const ENV_SCENARIO_TOKEN: &str = "WALLET_SCENARIO_TOKEN";

/// The request header that carries the gateway's [`ENV_SCENARIO_TOKEN`].
pub const SCENARIO_TOKEN_HEADER: &str = "x-scenario-token";

/// The standalone wallet's listening address when [`ENV_ADDR`] is not
/// set ([`env()`]).
pub const DEFAULT_ADDR: &str = "127.0.0.1:50052";

/// The baggage member a failure scenario travels in, as JSON
/// ([`jsonscenario`](../../humus/fault/jsonscenario/index.html)).
pub const SCENARIO_KEY: &str = "humus.fault";

/// How often the readiness reported by `grpc.health.v1` is checked again.
pub const READINESS_INTERVAL: Duration = Duration::from_millis(100);

/// How long one readiness check may wait for the ledger client to connect.
pub const READINESS_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// The standalone wallet's environment: the process's, over
/// [`ENV_ADDR`]`=`[`DEFAULT_ADDR`].
pub fn env() -> Env {
    over_defaults(&Env::process())
}

/// `env`'s variables over the standalone wallet's defaults.
fn over_defaults(env: &Env) -> Env {
    Env::from_pairs([(ENV_ADDR, DEFAULT_ADDR)].into_iter().chain(env.iter()))
}

/// The wallet's settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The wallet's server's settings, from the variables under [`PREFIX`]
    /// ([`ENV_ADDR`], [`ENV_PLAINTEXT`], and every other server setting,
    /// such as `WALLET_SHUTDOWN_GRACE`); its `trust_scenario` is set in
    /// code ([`server()`]).
    pub server: server::Settings,
    /// The ledger client's settings, from the variables under
    /// [`LEDGER_PREFIX`].
    pub ledger: client::Settings,
    /// The exchange-rate client's settings, if any variable under
    /// [`crate::rates::PREFIX`] is set ([`crate::rates::settings`]).
    pub rates: Option<humus::http::client::Settings>,
    /// The Kafka producer's settings of the "transfer applied" records,
    /// if [`ENV_EVENTS_BROKERS`] is set.
    pub events: Option<ProducerSettings>,
    /// Whether failure injection is on ([`ENV_FAULT_INJECTION`]).
    pub fault_injection: bool,
    /// The gateway's secret that makes a caller's scenario trusted
    /// ([`ENV_SCENARIO_TOKEN`]); `None` trusts no caller.
    pub scenario_token: Option<Secret>,
}

/// A secret: its `Debug` does not show it. Read from a variable, it must
/// be at least 16 characters: a secret a caller could guess trusts every
/// caller.
#[derive(Clone, Deserialize)]
#[serde(try_from = "String")]
pub struct Secret(pub String);

impl TryFrom<String> for Secret {
    type Error = &'static str;

    fn try_from(secret: String) -> Result<Secret, &'static str> {
        if secret.chars().count() < 16 {
            return Err(
                "is shorter than 16 characters: a secret a caller could guess trusts every caller",
            );
        }
        Ok(Secret(secret))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// Kafka brokers read from a variable: `host:port` separated by commas,
/// checked by [`kafka::check_brokers`](../../humus/kafka/fn.check_brokers.html).
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "Vec<String>")]
struct Brokers(Vec<String>);

impl TryFrom<Vec<String>> for Brokers {
    type Error = String;

    fn try_from(brokers: Vec<String>) -> Result<Brokers, String> {
        kafka::check_brokers(&brokers).map_err(|e| e.to_string())?;
        Ok(Brokers(brokers))
    }
}

/// The wallet's own settings, beside its server's under [`PREFIX`]: each
/// field is the variable `WALLET_` and its name in capitals.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Own {
    fault_injection: bool,
    scenario_token: Option<Secret>,
    events_brokers: Option<Brokers>,
}

impl Settings {
    /// Reads the settings from `env`, as a service reads its groups
    /// inside [`humus::app::from_env`](../../humus/app/fn.from_env.html):
    /// the ledger client's under [`LEDGER_PREFIX`] (`env.client`), the
    /// server's under [`PREFIX`] (`env.server`), the wallet's own under
    /// the same prefix (`env.read`: [`ENV_FAULT_INJECTION`],
    /// [`ENV_SCENARIO_TOKEN`], [`ENV_EVENTS_BROKERS`]), and the
    /// exchange-rate client's ([`crate::rates::settings`]). A bad variable
    /// is recorded in `env`, for its `read_all`.
    pub fn read(env: &mut Env) -> Settings {
        let ledger = env.client(LEDGER_PREFIX);
        let server = env.server(PREFIX);
        let own: Own = env.read(PREFIX);
        let rates = crate::rates::settings(env);
        Settings {
            server,
            ledger,
            rates,
            events: own.events_brokers.map(|Brokers(brokers)| ProducerSettings {
                brokers,
                client_id: "wallet".to_owned(),
                ..ProducerSettings::default()
            }),
            fault_injection: own.fault_injection,
            scenario_token: own.scenario_token,
        }
    }

    /// The settings read from `env` ([`Settings::read`]), when every
    /// variable was good.
    ///
    /// # Errors
    ///
    /// A settings [`Error`] (exit 78) naming every bad or missing
    /// variable, and every variable under [`PREFIX`], [`LEDGER_PREFIX`] or
    /// [`crate::rates::PREFIX`] that no setting reads.
    pub fn from_env(env: Env) -> Result<Settings, Error> {
        env.read_all(Settings::read)
    }
}

/// The propagator to give the wallet's telemetry: W3C Trace Context and
/// Baggage. The wallet reads its callers' trace context and baggage (and
/// so their failure scenarios) with its telemetry's propagator, and its
/// ledger client writes them with it.
pub fn propagator() -> TextMapCompositePropagator {
    TextMapCompositePropagator::new(vec![
        Box::new(TraceContextPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ])
}

/// The wallet's failure injector: on, reading [`SCENARIO_KEY`] as JSON, or
/// off.
pub fn faults(on: bool) -> Injector {
    if !on {
        return Injector::off();
    }
    let codec = jsonscenario::Codec::new(SCENARIO_KEY).expect("SCENARIO_KEY is a valid key");
    Injector::new(fault::Settings::new(codec)).expect("the default max delay is valid")
}

/// The ledger, as the wallet calls it: the `.proto`'s policy (`Charge` is
/// never sent twice), and the wallet's own knowledge of the ledger's
/// codes, declared here: a write race is over by the next attempt, so the
/// ledger's `ABORTED` is retried, and counts for the ledger rather than
/// against it.
#[humus::client(service = crate::pb::ledger::v1::ledger_humus)]
pub trait Ledger {
    /// A write race is over by the next attempt.
    #[humus(classify(Aborted => (Retry, Success)))]
    fn transfer();
}

/// The `wallet.v1.Wallet` handlers.
///
/// They hold no telemetry of their own: the humus server they are served on
/// makes each RPC's SERVER span (the child of its caller's) and runs each
/// handler with its RPC's deadline and context, so the ledger client's
/// attempts are children of that span and end with the wallet's caller's
/// deadline, with nothing copied here.
#[derive(Clone, Debug)]
pub struct Wallet {
    ledger: LedgerHumusClient,
    rates: Option<humus::http::client::Client>,
    events: Option<Producer>,
}

impl Wallet {
    /// Handlers that call the ledger through `ledger`, and quote nothing.
    pub fn new(ledger: Client) -> Wallet {
        Wallet {
            ledger: LedgerHumusClient::new(ledger),
            rates: None,
            events: None,
        }
    }

    /// The same handlers, whose `Send` produces a "transfer applied" record
    /// through `events` for each payment the ledger applied.
    pub fn with_events(self, events: Producer) -> Wallet {
        Wallet {
            events: Some(events),
            ..self
        }
    }

    /// The same handlers, whose `Quote` calls the exchange-rate service
    /// through `rates`.
    pub fn with_rates(self, rates: humus::http::client::Client) -> Wallet {
        Wallet {
            rates: Some(rates),
            ..self
        }
    }
}

/// The "transfer applied" record of a payment the ledger applied: on
/// [`TRANSFERS_TOPIC`], keyed by the payment's request id, its value a JSON
/// object (`event`, `request_id`, `transfer_id`, `from`, `to`, `cents`).
pub fn transfer_applied(
    request_id: &str,
    transfer_id: &str,
    from: &str,
    to: &str,
    cents: i64,
) -> Record {
    let value = serde_json::json!({
        "event": "transfer applied",
        "request_id": request_id,
        "transfer_id": transfer_id,
        "from": from,
        "to": to,
        "cents": cents,
    });
    Record::to(TRANSFERS_TOPIC)
        .key(request_id)
        .value(value.to_string())
}

/// The wallet's answer for the ledger's `status`.
///
/// | the ledger answered | the wallet answers |
/// |---|---|
/// | `FAILED_PRECONDITION` (too little money) | `FAILED_PRECONDITION` |
/// | `INVALID_ARGUMENT`, `NOT_FOUND` | the same |
/// | `CANCELLED` (the wallet's caller gave up) | `CANCELLED` |
/// | anything else: unreachable, the breaker open, a timeout, a race still lost after every attempt | `UNAVAILABLE` |
pub fn from_ledger(status: Status) -> Status {
    match status.code() {
        Code::FailedPrecondition => Status::failed_precondition(status.message()),
        Code::InvalidArgument => Status::invalid_argument(status.message()),
        Code::NotFound => Status::not_found(status.message()),
        Code::Cancelled => Status::cancelled(status.message()),
        _ => {
            let why = if rejected_by_breaker(&status) {
                "the ledger is failing, its circuit breaker is open"
            } else {
                "the ledger is unavailable"
            };
            Status::unavailable(format!("{why}: {}", status.message()))
        }
    }
}

/// Whether the client's breaker rejected the call: nothing was sent.
pub fn rejected_by_breaker(status: &Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(e) = source {
        if e.is::<circuit::Rejected>() {
            return true;
        }
        source = e.source();
    }
    false
}

fn check_amount(cents: i64) -> Result<(), Status> {
    if cents <= 0 {
        return Err(Status::invalid_argument(format!(
            "cents: must be more than zero, got {cents}"
        )));
    }
    Ok(())
}

fn check_account(field: &str, account: &str) -> Result<(), Status> {
    if account.is_empty() {
        return Err(Status::invalid_argument(format!(
            "{field}: must not be empty"
        )));
    }
    Ok(())
}

type LineStream =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<pb::StatementLine, Status>> + Send>>;

#[tonic::async_trait]
impl pb::wallet_server::Wallet for Wallet {
    async fn send(
        &self,
        request: Request<pb::SendRequest>,
    ) -> Result<Response<pb::SendResponse>, Status> {
        let req = request.into_inner();
        {
            check_account("from", &req.from)?;
            check_account("to", &req.to)?;
            check_amount(req.cents)?;
            if req.from == req.to {
                return Err(Status::invalid_argument("to: must differ from from"));
            }
            let request_id = if req.request_id.is_empty() {
                format!("wallet-{:016x}", fastrand::u64(..))
            } else {
                req.request_id
            };
            let receipt = self
                .ledger
                .transfer(ledger::TransferRequest {
                    request_id: request_id.clone(),
                    from: req.from.clone(),
                    to: req.to.clone(),
                    cents: req.cents,
                })
                .await
                .map_err(from_ledger)?
                .into_inner();
            if let Some(events) = &self.events {
                // In this RPC's context: its trace, and its scenario. The
                // payment is applied whatever becomes of its record: the
                // failure is the record's span's and the breaker's.
                let _stored = events
                    .produce([transfer_applied(
                        &request_id,
                        &receipt.transfer_id,
                        &req.from,
                        &req.to,
                        req.cents,
                    )])
                    .await;
            }
            Ok(Response::new(pb::SendResponse {
                payment_id: receipt.transfer_id,
                balance: receipt.from_balance,
            }))
        }
    }

    async fn top_up(
        &self,
        request: Request<pb::TopUpRequest>,
    ) -> Result<Response<pb::TopUpResponse>, Status> {
        let req = request.into_inner();
        {
            check_account("account", &req.account)?;
            check_amount(req.cents)?;
            let receipt = self
                .ledger
                .charge(ledger::ChargeRequest {
                    account: req.account,
                    cents: req.cents,
                })
                .await
                .map_err(from_ledger)?
                .into_inner();
            Ok(Response::new(pb::TopUpResponse {
                top_up_id: receipt.charge_id,
                balance: receipt.balance,
            }))
        }
    }

    async fn get_balance(
        &self,
        request: Request<pb::GetBalanceRequest>,
    ) -> Result<Response<pb::GetBalanceResponse>, Status> {
        let req = request.into_inner();
        {
            check_account("account", &req.account)?;
            let balance = self
                .ledger
                .balance(ledger::BalanceRequest {
                    account: req.account,
                })
                .await
                .map_err(from_ledger)?
                .into_inner();
            Ok(Response::new(pb::GetBalanceResponse {
                cents: balance.cents,
            }))
        }
    }

    async fn quote(
        &self,
        request: Request<pb::QuoteRequest>,
    ) -> Result<Response<pb::QuoteResponse>, Status> {
        let req = request.into_inner();
        check_amount(req.cents)?;
        let Some(rates) = &self.rates else {
            return Err(Status::unavailable(
                "the wallet has no exchange-rate service (RATES_BASE_URL is not set)",
            ));
        };
        let (cents, rate) = crate::rates::quote(rates, req.cents, &req.currency).await?;
        Ok(Response::new(pb::QuoteResponse { cents, rate }))
    }

    type StatementStream = LineStream;

    async fn statement(
        &self,
        request: Request<pb::StatementRequest>,
    ) -> Result<Response<LineStream>, Status> {
        let req = request.into_inner();
        check_account("account", &req.account)?;
        let opened = self
            .ledger
            .watch_entries(ledger::WatchEntriesRequest {
                account: req.account,
                follow: false,
            })
            .await
            .map_err(from_ledger)?
            .into_inner();
        let (tx, rx) = mpsc::channel(16);
        // The stream is read in a task of its own, which takes the served
        // RPC's deadline and context along.
        let inherited = Inherited::current();
        let forward = async move {
            let mut entries = opened;
            loop {
                let line = match entries.message().await {
                    Ok(Some(entry)) => Ok(pb::StatementLine {
                        sequence: entry.sequence,
                        cents: entry.cents,
                        reference: entry.reference,
                    }),
                    Ok(None) => return,
                    Err(status) => Err(from_ledger(status)),
                };
                let end = line.is_err();
                if tx.send(line).await.is_err() || end {
                    return;
                }
            }
        };
        match inherited {
            Some(inherited) => tokio::spawn(inherited.scope(forward)),
            None => tokio::spawn(forward),
        };
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}

/// A wallet running as an App, until [`stop`](crate::running::Running::stop).
pub type Serving = crate::running::Running;

/// The wallet's humus server on `setup`: its ledger client, built once and
/// shared by every handler, `wallet.v1.Wallet`, and `grpc.health.v1`
/// whose readiness is the ledger client's `Connected` (checked every
/// [`READINESS_INTERVAL`]). Plain-text HTTP/2 ([`ENV_PLAINTEXT`]). It
/// trusts the failure scenarios of the callers the gateway vouches for
/// ([`SCENARIO_TOKEN_HEADER`]), and strips everyone else's.
///
/// # Errors
///
/// [`humus::app::Error`](../../humus/app/struct.Error.html) (exit 1) when the client or the server refuses
/// its settings: each was checked where it was read, so that is a fault in
/// the code.
pub fn server(setup: &Setup, settings: &Settings) -> Result<Server, humus::app::Error> {
    let ledger = Client::new(setup, settings.ledger.clone())?;
    // Its settings were checked where they were read: a refusal is exit 1.
    let rates = match &settings.rates {
        Some(rates) => Some(humus::http::client::Client::new(setup, rates.clone())?),
        None => None,
    };
    // Its settings were checked where they were read: a refusal is exit 1.
    let events = match &settings.events {
        Some(events) => Some(Producer::new(setup, events.clone())?),
        None => None,
    };
    let health = Health::new()
        .readiness(ledger.connected())
        .interval(READINESS_INTERVAL)
        .check_timeout(READINESS_CHECK_TIMEOUT);
    let token = settings.scenario_token.clone();
    let server_settings = server::Settings {
        // Who the caller is, never where it connects from: behind a
        // sidecar or a local proxy every caller is loopback.
        trust_scenario: Some(TrustScenario::new(move |caller| {
            let sent = caller.headers().get(SCENARIO_TOKEN_HEADER);
            match (&token, sent) {
                (Some(token), Some(sent)) => same_secret(token.0.as_bytes(), sent.as_bytes()),
                _ => false,
            }
        })),
        // Read from WALLET_ADDR, WALLET_PLAINTEXT (which must be true:
        // the wallet has no certificate) and the rest under WALLET_.
        ..settings.server.clone()
    };
    Ok(Server::new(setup, server_settings)?
        .add_service(pb::wallet_server::WalletServer::new({
            let wallet = match rates {
                Some(rates) => Wallet::new(ledger).with_rates(rates),
                None => Wallet::new(ledger),
            };
            match events {
                Some(events) => wallet.with_events(events),
                None => wallet,
            }
        }))
        .health(health))
}

/// Whether `sent` is `secret`, compared in a time that does not tell how
/// much of it matched.
fn same_secret(secret: &[u8], sent: &[u8]) -> bool {
    secret.len() == sent.len()
        && secret
            .iter()
            .zip(sent)
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
}

/// The wallet's App: `telemetry` (a production service gives it its SDK
/// providers' exporters; the walkthrough its in-memory recording), and
/// failure injection as `settings` say.
pub fn app(telemetry: Telemetry, settings: &Settings) -> App {
    let on = settings.fault_injection;
    App::new()
        .telemetry(move |_| Ok(Providers::new(telemetry)))
        .faults(move |_| Ok(faults(on)))
}

/// Runs the wallet's App in a task of its own, with `telemetry`, and
/// returns once it listens.
///
/// # Errors
///
/// [`humus::app::Error`](../../humus/app/struct.Error.html) when it cannot
/// start: the client refuses its settings, or the address is taken.
pub async fn start(telemetry: Telemetry, settings: &Settings) -> Result<Serving, Error> {
    let settings = settings.clone();
    crate::running::start(app(telemetry, &settings), move |setup| async move {
        server(&setup, &settings)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How a service tests its code that calls a dependency through a
    /// generated client, with no port and no real time: the dependency
    /// (here the ledger, a tonic service) is served by a humus server on
    /// humus's in-memory network (`humus::testing::Host`, feature
    /// `testing`) with a certificate from a test CA, and the client dials
    /// its name through the same `Setup`.
    #[tokio::test(start_paused = true)]
    async fn a_generated_client_calls_its_dependency_on_the_in_memory_network() {
        use std::sync::Arc;

        use humus::testing::{Ca, Host};

        let (ca, host) = (Ca::new(), Host::new());
        let setup = Setup::new().with_host(host);
        let book = crate::ledger::Ledger::new();
        let mut ledger = Server::new(
            &setup,
            server::Settings {
                addr: "ledger:50051".into(),
                tls: Some(Arc::new(ca.issue("ledger").server_config())),
                ..server::Settings::default()
            },
        )
        .unwrap()
        .add_service(book.service());
        ledger.bind().await.unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(ledger.serve(async {
            let _ = stopped.await;
        }));

        let client = Client::new(
            &setup,
            client::Settings {
                addr: "ledger:50051".into(),
                tls: Some(Arc::new(ca.client_config())),
                ..client::Settings::default()
            },
        )
        .unwrap();
        let ledger_client = LedgerHumusClient::new(client);
        let balance = ledger_client
            .balance(ledger::BalanceRequest {
                account: "alice".into(),
            })
            .await
            .unwrap();
        assert_eq!(balance.into_inner().cents, 0);
        assert_eq!(book.seen().balances, 1);

        stop.send(()).unwrap();
        serving.await.unwrap().unwrap();
    }

    #[test]
    fn the_policies_reach_the_descriptors() {
        use crate::pb::ledger::v1::ledger_humus;
        // From the .proto's option.
        assert!(ledger_humus::LedgerProtoClient::CHARGE.policy.never_retry);
        assert!(LedgerHumusClient::CHARGE.policy.never_retry);
        // From #[humus::client].
        let transfer = LedgerHumusClient::TRANSFER;
        assert_eq!(transfer.full_name, "/ledger.v1.Ledger/Transfer");
        assert_eq!(transfer.point, "grpc:ledger.v1.Ledger/Transfer");
        assert!(!transfer.policy.never_retry);
        assert_eq!(transfer.policy.table.len(), 1);
        let rule = transfer.policy.table[0];
        assert_eq!(rule.code, Code::Aborted);
        assert_eq!(rule.retry, humus::retry::Verdict::Retry);
        assert_eq!(rule.breaker, circuit::Outcome::Success);
        // The .proto's own descriptor has no rule for Transfer.
        assert!(
            ledger_humus::LedgerProtoClient::TRANSFER
                .policy
                .table
                .is_empty()
        );
    }

    #[test]
    fn the_ledgers_answers_become_the_wallets() {
        let cases = [
            (
                Status::failed_precondition("insufficient balance"),
                Code::FailedPrecondition,
            ),
            (Status::invalid_argument("cents"), Code::InvalidArgument),
            (Status::not_found("no such account"), Code::NotFound),
            (Status::cancelled("gave up"), Code::Cancelled),
            (Status::unavailable("connection refused"), Code::Unavailable),
            (Status::deadline_exceeded("timeout"), Code::Unavailable),
            (Status::aborted("write race"), Code::Unavailable),
            (Status::resource_exhausted("quota"), Code::Unavailable),
            (Status::internal("bug"), Code::Unavailable),
        ];
        for (ledger, want) in cases {
            let message = ledger.message().to_owned();
            let got = from_ledger(ledger);
            assert_eq!(got.code(), want, "{message}");
            assert!(got.message().contains(&message), "{got}");
        }
        assert!(!rejected_by_breaker(&Status::unavailable("refused")));
    }

    /// The names of the variables `env` is refused for, in order.
    fn refused(env: Env) -> (Vec<String>, String) {
        crate::refused(Settings::from_env(env).unwrap_err())
    }

    #[test]
    fn settings_come_from_the_environment() {
        let env = Env::from_pairs([
            (ENV_LEDGER_ADDR, "ledger:50051"),
            (ENV_LEDGER_TIMEOUT, "2s"),
            (ENV_LEDGER_MAX_ATTEMPTS, "5"),
            (ENV_LEDGER_BACKOFF_BASE, "10ms"),
            (ENV_LEDGER_BACKOFF_MAX, "100ms"),
            (ENV_LEDGER_BREAKER_OPEN_FOR, "1500ms"),
            // Any client setting, not only those the walkthrough sets.
            ("LEDGER_ATTEMPT_TIMEOUT", "300ms"),
            ("LEDGER_RETRY_BUDGET_MAX_TOKENS", "20"),
            (ENV_FAULT_INJECTION, "true"),
            (ENV_ADDR, "127.0.0.1:0"),
            (ENV_PLAINTEXT, "true"),
            // Any server setting too.
            ("WALLET_SHUTDOWN_GRACE", "3s"),
            (ENV_SCENARIO_TOKEN, "a-secret-of-16-chars"),
        ]);
        let s = Settings::from_env(env).unwrap();
        assert_eq!(
            s.scenario_token.as_ref().map(|t| t.0.as_str()),
            Some("a-secret-of-16-chars")
        );
        assert!(!format!("{s:?}").contains("a-secret"), "Debug hides it");
        assert_eq!(s.ledger.addr, "ledger:50051");
        assert_eq!(s.ledger.timeout, Duration::from_secs(2));
        assert_eq!(s.ledger.max_attempts, 5);
        assert_eq!(s.ledger.backoff_base, Duration::from_millis(10));
        assert_eq!(s.ledger.backoff_max, Duration::from_millis(100));
        assert_eq!(s.ledger.breaker.open_for, Duration::from_millis(1500));
        assert_eq!(s.ledger.attempt_timeout, Some(Duration::from_millis(300)));
        assert_eq!(s.ledger.retry_budget.max_tokens, 20);
        assert!(s.fault_injection);
        assert_eq!(s.server.addr, "127.0.0.1:0");
        assert!(s.server.plaintext);
        assert_eq!(s.server.shutdown_grace, Duration::from_secs(3));
        assert!(s.rates.is_none(), "no RATES_ variable: no client");

        let d = client::Settings::default();
        let s = Settings::from_env(Env::from_pairs([
            (ENV_LEDGER_ADDR, "ledger:1"),
            (ENV_ADDR, "127.0.0.1:0"),
            (ENV_PLAINTEXT, "true"),
        ]))
        .unwrap();
        assert!(s.scenario_token.is_none(), "trusts no caller");
        assert_eq!(s.ledger.timeout, d.timeout);
        assert_eq!(s.ledger.breaker.open_for, d.breaker.open_for);
        assert!(!s.fault_injection);
        assert!(s.events.is_none());
    }

    #[test]
    fn the_servers_and_the_wallets_own_variables_share_their_prefix() {
        // Each variable under WALLET_ is read by one of the two groups:
        // none is refused as unread.
        let base = [
            (ENV_LEDGER_ADDR, "ledger:1"),
            (ENV_ADDR, "127.0.0.1:0"),
            (ENV_PLAINTEXT, "true"),
            ("WALLET_SHUTDOWN_GRACE", "1s"),
            (ENV_FAULT_INJECTION, "false"),
            (ENV_SCENARIO_TOKEN, "a-secret-of-16-chars"),
            (ENV_EVENTS_BROKERS, "kafka-1:9092"),
        ];
        Settings::from_env(Env::from_pairs(base)).unwrap();

        // A misspelled one of either group is refused, naming the nearest.
        for (typo, meant) in [
            ("WALLET_FAULT_INJECTON", ENV_FAULT_INJECTION),
            ("WALLET_SHUTDOWN_GRAC", "WALLET_SHUTDOWN_GRACE"),
        ] {
            let (vars, err) = refused(Env::from_pairs(base.into_iter().chain([(typo, "1s")])));
            assert_eq!(vars, [typo], "{err}");
            assert!(err.contains(&format!("did you mean {meant}?")), "{err}");
        }
        // So is a misspelled one of the ledger client's.
        let (vars, err) = refused(Env::from_pairs(
            base.into_iter().chain([("LEDGER_BREAKER_OPENFOR", "2s")]),
        ));
        assert_eq!(vars, ["LEDGER_BREAKER_OPENFOR"], "{err}");
        assert!(
            err.contains("did you mean LEDGER_BREAKER_OPEN_FOR?"),
            "{err}"
        );
    }

    #[test]
    fn every_bad_variable_is_named() {
        let (vars, err) = refused(Env::from_pairs([
            (ENV_LEDGER_ADDR, "ledger"),
            (ENV_LEDGER_TIMEOUT, "0"),
            (ENV_LEDGER_BREAKER_OPEN_FOR, "0s"),
            (ENV_ADDR, "anywhere"),
            (ENV_FAULT_INJECTION, "on"),
            (ENV_SCENARIO_TOKEN, "guessable"),
        ]));
        assert_eq!(
            vars,
            [
                ENV_LEDGER_ADDR,
                ENV_LEDGER_TIMEOUT,
                ENV_LEDGER_BREAKER_OPEN_FOR,
                ENV_ADDR,
                ENV_PLAINTEXT,
                ENV_FAULT_INJECTION,
                ENV_SCENARIO_TOKEN,
            ],
            "{err}"
        );
        for problem in [
            "WALLET_FAULT_INJECTION: \"on\" is not true or false",
            "WALLET_SCENARIO_TOKEN: is shorter than 16 characters",
            "WALLET_PLAINTEXT: is not set",
        ] {
            assert!(err.contains(problem), "{problem:?} not in {err}");
        }
    }

    #[test]
    fn the_standalone_wallet_listens_on_its_default_address_unless_told() {
        let env = over_defaults(&Env::from_pairs([(ENV_LEDGER_ADDR, "ledger:1")]));
        assert_eq!(env.get(ENV_ADDR), Some(DEFAULT_ADDR));
        assert_eq!(env.get(ENV_LEDGER_ADDR), Some("ledger:1"));
        let env = over_defaults(&Env::from_pairs([(ENV_ADDR, "127.0.0.1:0")]));
        assert_eq!(env.get(ENV_ADDR), Some("127.0.0.1:0"));
    }

    #[test]
    fn the_events_brokers_come_from_the_environment_and_a_bad_one_is_named() {
        let base = [
            (ENV_LEDGER_ADDR, "ledger:9090"),
            (ENV_ADDR, "127.0.0.1:0"),
            (ENV_PLAINTEXT, "true"),
        ];
        let s = Settings::from_env(Env::from_pairs(base)).unwrap();
        assert!(s.events.is_none(), "unset: no producer");

        let env = Env::from_pairs(
            base.into_iter()
                .chain([(ENV_EVENTS_BROKERS, "kafka-1:9092, kafka-2:9092")]),
        );
        let events = Settings::from_env(env).unwrap().events.unwrap();
        assert_eq!(events.brokers, ["kafka-1:9092", "kafka-2:9092"]);
        assert_eq!(events.client_id, "wallet");

        let (vars, err) = refused(Env::from_pairs(
            base.into_iter()
                .chain([(ENV_EVENTS_BROKERS, "kafka://kafka-1:9092")]),
        ));
        assert_eq!(vars, [ENV_EVENTS_BROKERS]);
        assert!(err.contains("scheme"), "{err}");
    }

    #[test]
    fn a_bad_breaker_open_for_names_its_variable_only() {
        let (vars, err) = refused(Env::from_pairs([
            (ENV_LEDGER_ADDR, "ledger:9090"),
            (ENV_LEDGER_BREAKER_OPEN_FOR, "0s"),
            (ENV_ADDR, "127.0.0.1:0"),
            (ENV_PLAINTEXT, "true"),
        ]));
        assert_eq!(vars, [ENV_LEDGER_BREAKER_OPEN_FOR]);
        assert!(
            err.contains("LEDGER_BREAKER_OPEN_FOR: is zero, want a duration more than zero"),
            "{err}"
        );
        assert!(!err.contains("open_for"), "{err}");
    }
}
