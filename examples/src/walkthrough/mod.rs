//! The wallet walkthrough: the services on loopback, scripted traffic
//! through ten phases, and what the OpenTelemetry data says happened.
//!
//! [`run`] starts the ledger and the wallet in this process, on real TCP
//! ports of 127.0.0.1 that the system picks, and drives the wallet as its
//! callers would, with tonic's own client, while turning the ledger's
//! knobs. The wallet calls the ledger through its humus client, which
//! records into in-memory OpenTelemetry SDK providers
//! ([`Recording`]). Each phase's row of the table is read from that data
//! ([`PhaseStats`]), and each phase checks that it behaved as it says, on
//! counts and states, never on durations.
//!
//! # What it runs
//!
//! `cargo run -p humus-examples --bin walkthrough` starts, in one process, on
//! ports of 127.0.0.1 the system picks:
//!
//! - the **ledger** ([`crate::ledger`]), an
//!   in-memory book of accounts that deduplicates transfers by request id,
//!   with knobs the walkthrough turns: abort the next transfers as write
//!   races, lose a reply after applying a transfer, answer `Charge`
//!   `UNAVAILABLE`, answer every `Transfer` `UNAVAILABLE`, stop (a graceful
//!   shutdown), serve again;
//! - the **wallet** ([`crate::wallet`]),
//!   whose handlers call the ledger through its humus client, with its
//!   settings read from the environment the walkthrough prints (a breaker
//!   `open_for` of 1s, so it all takes seconds; of the secret
//!   `WALLET_SCENARIO_TOKEN` it prints only that it is set, by itself as
//!   the gateway, never the value);
//!
//! each a `humus::grpc::server::Server` run by a `humus::App` ([`crate::running`]), stopped as
//! SIGTERM would stop it, and required to exit 0; and
//!
//! - the **exchange-rate service** ([`crate::rates`]),
//!   the wallet's HTTP dependency: an axum server behind
//!   `humus::http::server::ContextLayer`, answering `GET /v1/rates/{currency}`,
//!   with a knob that makes it answer 503 pages as a gateway does for a
//!   service that is down. The wallet's `Quote` calls it through a
//!   `humus::http::client::Client`, whose settings the wallet reads with
//!   `humus::app::Env::http_client("RATES_")` (`RATES_BASE_URL`,
//!   `RATES_BREAKER_OPEN_FOR`, ...);
//!
//! then calls the wallet as its callers would, with tonic's own client, in
//! ten phases. It prints each phase as it goes, each check it makes of the
//! phase with ✓ or ✗, then a table:
//!
//! ```text
//! phase                  calls  attempts  retries  throttled  rejected  breaker transitions              p50    p99
//! ---------------------------------------------------------------------------------------------------------------------
//! 1 readiness                0         0        0          0         0  -                              354µs  5.0ms  ok
//! 2 normal                  26        26        0          0         0  -                              1.9ms  7.4ms  ok
//! 3 write races              5         9        4          0         0  -                               10ms   15ms  ok
//! 4 charge unavailable       3         3        0          0         0  -                              2.2ms  2.8ms  ok
//! 5 outage                  18         6        1          5        13  open 2, half-open 1            832µs   11ms  ok
//! 6 recovery                 6         6        0          0         0  half-open 1, closed 1          1.9ms  7.9ms  ok
//! 7 rollout                121       121        0          0         0  -                              2.3ms  8.1ms  ok
//! 8 fault scenario          10        12        2          0         0  -                              8.7ms   10ms  ok
//! 9 rates outage (http)     15        12        3          1         6  open 1, half-open 1, closed 1  1.6ms   33ms  ok
//! 10 events (kafka)         10         9        0          0         0  -                              6.4ms  9.9ms  ok
//!
//! Timeline of the breakers' states and the attempts per second: …/target/walkthrough/timeline.svg
//! Every phase behaved as it says (6.8s).
//! ```
//!
//! Every number is read from the OpenTelemetry data the wallet's client
//! recorded, not from counters of the walkthrough's own: **calls** and
//! **retries**, **throttled** (retries the retry budget refused) from
//! `humus.retry.decisions`; **attempts** from `rpc.client.call.duration`
//! (and, for the HTTP client of phase 9, `http.client.request.duration`;
//! for the Kafka producer of phase 10, `messaging.client.sent.messages`,
//! its calls those its breaker counted, as it makes no retry decision; a
//! call the breaker rejects makes none); **rejected** from
//! `humus.circuit.calls`; **breaker transitions** from
//! `humus.circuit.transitions`, by the state entered; **p50/p99** are the
//! latencies of the wallet's own answers, from its server spans. Latencies
//! vary from run to run and machine to machine; the counts do not.
//!
//! 1. **readiness**: the wallet starts before the ledger listens, and its
//!    `grpc.health.v1` says `NOT_SERVING`; once the ledger listens,
//!    `SERVING`. Readiness is the client's `Connected`, which makes no call:
//!    0 attempts.
//! 2. **normal**: top-ups (`Charge`), payments (`Transfer`), balances and a
//!    statement (the server-streaming `WatchEntries`), one attempt each.
//!    Carol's overdraft is the ledger's `FAILED_PRECONDITION`, passed on as
//!    the wallet's, and not retried.
//! 3. **write races**: the ledger aborts 3 transfers as write races and loses
//!    the reply of a fourth after applying it. Each is retried once (4
//!    retries, 9 attempts for 5 calls) and applied once: the lost reply's
//!    retry carries the same request id, and the ledger answers it with the
//!    first receipt. `ABORTED` counts for the ledger, so the breaker stays
//!    closed.
//! 4. **charge unavailable**: the card processor is down, and the ledger
//!    answers `Charge` `UNAVAILABLE`. `Charge` is `never_retry`: one attempt
//!    per call, the wallet answers `UNAVAILABLE`, and the caller decides to
//!    try again later (the third top-up succeeds).
//! 5. **outage**: first the ledger stops listening. The wallet's client
//!    dials it once, and the dial is refused: a failed attempt, counted as
//!    a failure in the breaker and retried; its retries, and the next
//!    payments' attempts, find gRPC's connection backoff (the next dial is
//!    due 1 s after the refused one): they fail at once, without a dial,
//!    each a failed attempt too, retried while the retry budget allows
//!    (then **throttled**). After five such failures in a row the breaker
//!    opens (`open`), as it would for a ledger that hangs, and the last
//!    payments fail at once, **rejected**, without a dial, and the wallet
//!    says so ("the ledger is failing, its circuit breaker is open"). Then
//!    the ledger listens again, but its database is down: it answers every
//!    payment `UNAVAILABLE`. Once `open_for` has passed the breaker reads
//!    `half-open`; the next payment is its probe, which dials (the
//!    connection's next dial is due by then), reaches the ledger, fails,
//!    and reopens the breaker (`open 2, half-open 1`); the other payments
//!    are rejected. Readiness stays `SERVING`: an outage of a dependency
//!    must not take every replica out of its load balancer.
//! 6. **recovery**: the ledger's database is back. Once `open_for` has
//!    passed, `humus.circuit.state` reads `half-open` with no call made; the
//!    next calls are probes, and three successful ones close the breaker
//!    (`half-open 1, closed 1`). `open_for` bounds this recovery because the
//!    ledger kept listening, so the connection was up. A dependency that
//!    stopped listening is reached again only at the connection's next
//!    dial, at most `connect_backoff_max` (120 s by default, gRPC's
//!    ceiling) after the last refused one started; until then a half-open
//!    probe fails at once with that dial's error and its age (`connection
//!    refused, 95s ago`) and reopens the breaker, and the first probe after
//!    the next dial reaches it. So recovery from a long
//!    outage takes up to `connect_backoff_max`, then the probes: a service
//!    that must recover sooner sets it lower.
//! 7. **rollout**: the ledger is rolled while four callers pay: a new
//!    ledger, on the same book, takes over the old one's listening socket (as
//!    a supervisor hands a socket from one process to the next, with
//!    `humus::Listener::tcp`), then the old ledger shuts down gracefully (it
//!    stops accepting, sends a GOAWAY, lets its calls in flight finish, and
//!    exits 0). The address never refuses a dial: a refused one would put
//!    the wallet's client in gRPC's connection backoff, failing its calls
//!    fast for a second, each a failure in the breaker, which would open
//!    for its `open_for`. Then the new ledger's connections reach their
//!    `max_connection_age` (300ms) several times. The wallet's client moves
//!    to each new connection with no error: every payment succeeds, each is
//!    applied once, and the breaker stays closed.
//! 8. **fault scenario**: ten concurrent payments, one of which carries a
//!    failure scenario in its W3C baggage
//!    (`humus.fault={"rules":[{"point":"grpc:ledger.v1.Ledger/Transfer","abort":true}]}`).
//!    The walkthrough, as the gateway, vouches for that request with its
//!    secret (`x-scenario-token`), so the wallet trusts its scenario (it
//!    would strip any other caller's, on loopback or not), and its ledger client
//!    aborts that request's attempts at its injection point: that request
//!    alone fails, and the ledger never sees it (its retries are aborted at
//!    the client too).
//! 9. **rates outage (http)**: the wallet's HTTP dependency, through the same
//!    telemetry (its row is the HTTP client's: the two clients' instruments
//!    are the same, told apart by `server.port`). Three quotes succeed; then
//!    the exchange-rate service answers 503 pages: each GET is retried while
//!    the budget allows, the HTTP client's own breaker opens after five
//!    failures in a row, and the later quotes are rejected without a request
//!    (the wallet says "its circuit breaker is open"), while the ledger's
//!    breaker stays closed. The service comes back; after the breaker's
//!    `open_for` (500ms here) it reads `half-open` with no call made, and
//!    three good probes close it. Every request the service received ran in
//!    the trace of the wallet's RPC that made it, as `ContextLayer` extracted
//!    it.
//!
//! 10. **events (kafka)**: the wallet produces a "transfer applied" record
//!     ([`wallet::transfer_applied`]) for each payment the ledger applied,
//!     through its humus Kafka producer, to librdkafka's mock cluster,
//!     started in this process; an audit consumer (a `humus::kafka::Consumer`
//!     of its own group) reads them. Ten concurrent payments, one of which
//!     carries the scenario `kafka:wallet.transfers` aborts, vouched for as
//!     in phase 8: every payment succeeds and is applied (a payment does not
//!     fail for its event), that payment's record alone is never sent (its
//!     PRODUCER span ends with the injected fault's `error.type`, a failed
//!     attempt in the timeline), the producer's breaker counts nine
//!     successes and one failure and stays closed, and the audit consumer
//!     reads the nine others.
//!
//! The process exits 0 only if every check of every phase held. The SVG
//! timeline shows the phases, each client's breaker's state (the ledger's
//! and the exchange-rate service's, from their transition log records) and
//! the attempts per second of the clients, split into succeeded, failed and
//! rejected (from the attempts' spans, and the Kafka records' PRODUCER
//! spans: phase 10's aborted record is a failed one).
//!
//! # Each service alone
//!
//! Each service also runs alone, reading its environment:
//!
//! ```sh
//! cargo run -p humus-examples --bin ledger        # LEDGER_ADDR, default 127.0.0.1:50051
//! LEDGER_ADDR=127.0.0.1:50051 WALLET_PLAINTEXT=true cargo run -p humus-examples --bin wallet
//! ```
//!
//! Each reads its settings with humus's `humus::app::Env`, as the README's
//! quick start does: the wallet its ledger client's with
//! `env.client("LEDGER_")` (every client setting, such as
//! `LEDGER_BREAKER_OPEN_FOR`), its server's with `env.server("WALLET_")`
//! (`WALLET_ADDR`, default 127.0.0.1:50052, and `WALLET_PLAINTEXT=true`),
//! its own (`WALLET_FAULT_INJECTION=true`, `WALLET_SCENARIO_TOKEN`,
//! `WALLET_EVENTS_BROKERS`) with `env.read("WALLET_")`, and the
//! exchange-rate client's with `env.http_client("RATES_")`; the ledger its
//! server's with `env.server("LEDGER_")`. The variables the walkthrough
//! sets are the `ENV_` constants of [`crate::wallet`], [`crate::rates`] and
//! [`crate::ledger`]. A bad, missing or misspelled variable (one under a
//! group's prefix that no setting reads) exits 78 naming every one; a
//! server that cannot listen (its address taken) exits 1.

pub mod stats;
pub mod timeline;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use humus::Setup;
use humus::fault::{self, Fault, Rule, Scenario, jsonscenario};
use humus::kafka::{Consumer, ConsumerSettings, Message as _, OwnedMessage};
use opentelemetry::Context;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{
    Span as _, SpanKind, TraceContextExt, TraceId, Tracer, TracerProvider as _,
};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use tokio::net::TcpListener;
use tonic::transport::Channel;
use tonic::{Code, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::ledger::{self, Ledger};
use crate::pb::wallet::v1 as pb;
use crate::rates::{self, Rates};
use crate::recording::{Metrics, Recording, log_attribute, log_time, span_attribute};
use crate::wallet;
use humus::app::{Env, Error};
use humus::telemetry::MetadataInjector;
use pb::wallet_client::WalletClient;
pub use stats::PhaseStats;
use stats::names;
pub use timeline::Timeline;

/// How the walkthrough runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long the wallet's breaker stays open (`LEDGER_BREAKER_OPEN_FOR`).
    /// Default 1s, so the walkthrough finishes in seconds.
    pub open_for: Duration,
    /// Where to write the SVG timeline; `None` writes none.
    pub svg: Option<PathBuf>,
    /// Whether to print progress to standard output as it goes.
    pub progress: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            open_for: Duration::from_secs(1),
            svg: Some(PathBuf::from("target/walkthrough/timeline.svg")),
            progress: true,
        }
    }
}

/// One check a phase makes of itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// What was checked, as a sentence.
    pub what: String,
    /// Whether it held.
    pub passed: bool,
    /// What was seen, when it did not hold.
    pub seen: String,
}

/// One phase: its name, what it shows, its numbers and its checks.
#[derive(Clone, Debug)]
pub struct PhaseReport {
    /// Its short name, such as `outage`.
    pub name: &'static str,
    /// What it shows, in one sentence.
    pub says: &'static str,
    /// Its numbers, read from the OpenTelemetry data.
    pub stats: PhaseStats,
    /// Its checks.
    pub checks: Vec<Check>,
}

impl PhaseReport {
    /// Whether every check held.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }
}

/// What the walkthrough saw.
#[derive(Clone, Debug)]
pub struct Report {
    /// Each phase, in order.
    pub phases: Vec<PhaseReport>,
    /// The picture's data.
    pub timeline: Timeline,
    /// Where the SVG was written, if it was.
    pub svg: Option<PathBuf>,
    /// How long the walkthrough took.
    pub took: Duration,
}

impl Report {
    /// Whether every phase behaved as it says.
    pub fn passed(&self) -> bool {
        self.phases.iter().all(PhaseReport::passed)
    }

    /// The table: one row per phase.
    pub fn table(&self) -> String {
        let mut rows = vec![[
            "phase".to_owned(),
            "calls".to_owned(),
            "attempts".to_owned(),
            "retries".to_owned(),
            "throttled".to_owned(),
            "rejected".to_owned(),
            "breaker transitions".to_owned(),
            "p50".to_owned(),
            "p99".to_owned(),
            "".to_owned(),
        ]];
        for (i, phase) in self.phases.iter().enumerate() {
            let s = &phase.stats;
            rows.push([
                format!("{} {}", i + 1, phase.name),
                s.calls.to_string(),
                s.attempts.to_string(),
                s.retries.to_string(),
                s.throttled.to_string(),
                s.rejected.to_string(),
                s.transitions_text(),
                latency(s.p50),
                latency(s.p99),
                if phase.passed() { "ok" } else { "FAILED" }.to_owned(),
            ]);
        }
        let mut widths = [0; 10];
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for (r, row) in rows.iter().enumerate() {
            let mut line = String::new();
            for (c, (cell, w)) in row.iter().zip(widths).enumerate() {
                let pad = w - cell.chars().count();
                // Names and transitions to the left, numbers to the right.
                if c == 0 || c == 6 || c == 9 {
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad));
                } else {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                }
                line.push_str("  ");
            }
            out.push_str(line.trim_end());
            out.push('\n');
            if r == 0 {
                out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * 9));
                out.push('\n');
            }
        }
        out
    }
}

fn latency(d: Option<Duration>) -> String {
    match d {
        None => "-".to_owned(),
        Some(d) if d < Duration::from_millis(1) => format!("{}µs", d.as_micros()),
        Some(d) if d < Duration::from_millis(10) => format!("{:.1}ms", d.as_secs_f64() * 1e3),
        Some(d) => format!("{}ms", d.as_millis()),
    }
}

/// The wallet's exchange-rate client's settings the walkthrough uses, as
/// the environment the standalone wallet would read them from: its breaker
/// stays open for half of `open_for`.
pub fn rates_env(base_url: &str, open_for: Duration) -> Env {
    Env::from_pairs([
        (rates::ENV_RATES_BASE_URL, base_url.to_owned()),
        (rates::ENV_RATES_ATTEMPT_TIMEOUT, "1s".to_owned()),
        (rates::ENV_RATES_BACKOFF_BASE, "10ms".to_owned()),
        (rates::ENV_RATES_BACKOFF_MAX, "100ms".to_owned()),
        (
            rates::ENV_RATES_BREAKER_OPEN_FOR,
            format!("{}ms", (open_for / 2).as_millis().max(1)),
        ),
    ])
}

/// The wallet's settings the walkthrough uses, as the environment the
/// standalone wallet would read them from.
pub fn wallet_env(ledger: SocketAddr, open_for: Duration) -> Env {
    Env::from_pairs([
        (wallet::ENV_ADDR, "127.0.0.1:0".to_owned()),
        (wallet::ENV_LEDGER_ADDR, ledger.to_string()),
        (wallet::ENV_LEDGER_TIMEOUT, "2s".to_owned()),
        (wallet::ENV_LEDGER_BACKOFF_BASE, "10ms".to_owned()),
        (wallet::ENV_LEDGER_BACKOFF_MAX, "100ms".to_owned()),
        (
            wallet::ENV_LEDGER_BREAKER_OPEN_FOR,
            format!("{}ms", open_for.as_millis()),
        ),
        (wallet::ENV_FAULT_INJECTION, "true".to_owned()),
        // On loopback: plain text, said.
        (wallet::ENV_PLAINTEXT, "true".to_owned()),
        (wallet::ENV_SCENARIO_TOKEN, GATEWAY_TOKEN.to_owned()),
    ])
}

/// The secret the walkthrough, as the gateway, vouches for its faulted
/// request with ([`wallet::ENV_SCENARIO_TOKEN`]).
pub const GATEWAY_TOKEN: &str = "walkthrough-gateway-secret";

/// How the walkthrough prints the wallet's environment: `NAME=value` pairs
/// on one line, but for the secret [`wallet::ENV_SCENARIO_TOKEN`] (it lets
/// a caller inject failures), whose value is never printed: a line of its
/// own says that it is set and where it comes from.
fn settings_lines(env: &Env) -> Vec<String> {
    let vars: Vec<String> = env
        .iter()
        .filter(|(k, _)| *k != wallet::ENV_SCENARIO_TOKEN)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut lines = vec![vars.join(" ")];
    if env.iter().any(|(k, _)| k == wallet::ENV_SCENARIO_TOKEN) {
        lines.push(format!(
            "{} is set (not shown): the walkthrough's own gateway secret \
             (walkthrough::GATEWAY_TOKEN), which it sends in {} with the faulted request",
            wallet::ENV_SCENARIO_TOKEN,
            wallet::SCENARIO_TOKEN_HEADER,
        ));
    }
    lines
}

/// Runs the walkthrough.
///
/// # Errors
///
/// [`humus::app::Error`](../../humus/app/struct.Error.html) when a service cannot start (a port cannot be bound, the
/// wallet's settings are refused). A phase that misbehaves is not an
/// error: its checks fail, and [`Report::passed`] says so.
pub async fn run(options: Options) -> Result<Report, Error> {
    let mut run = Run::start(&options).await?;
    run.readiness().await?;
    run.normal().await;
    run.write_races().await;
    run.charge_unavailable().await;
    run.outage().await?;
    run.recovery().await?;
    run.rollout().await?;
    run.fault_scenario().await;
    run.rates_outage().await?;
    run.events().await;
    run.finish(&options).await
}

/// A walkthrough in progress.
struct Run {
    progress: bool,
    recording: Recording,
    ledger: Ledger,
    ledger_addr: SocketAddr,
    ledger_serving: Option<ledger::Serving>,
    /// The socket the ledger serves on, while one does: the rollout's new
    /// ledger takes it over from the old one. Dropped before the ledger
    /// stops, so that a stopped ledger's address refuses dials.
    ledger_socket: Option<ledger::Socket>,
    wallet_serving: Option<wallet::Serving>,
    rates: Rates,
    rates_serving: Option<rates::Serving>,
    rates_port: u16,
    wallet: WalletClient<Channel>,
    health: HealthClient<Channel>,
    open_for: Duration,
    started: SystemTime,
    started_at: Instant,
    phases: Vec<PhaseReport>,
    bounds: Vec<(String, Duration, Duration)>,
    /// The current phase's start: its metrics, its span count, its time.
    phase: Option<(Metrics, usize, Duration)>,
    /// librdkafka's in-process mock cluster, the wallet's "transfer
    /// applied" records' ([`wallet::TRANSFERS_TOPIC`]).
    _kafka: MockCluster<'static, DefaultProducerContext>,
    /// The mock cluster's broker's port: the producer's `server.port`.
    kafka_port: u16,
    /// The audit consumer of the wallet's records, until the end.
    audit: Option<Consumer>,
    /// The keys (request ids) of the records the audit consumer read.
    audited: Arc<Mutex<Vec<String>>>,
}

/// The audit consumer's group.
const AUDIT_GROUP: &str = "walkthrough-audit";

/// The longest the walkthrough waits for the audit consumer to read a
/// phase's records: generous, for a loaded machine (a record goes through
/// the mock cluster in milliseconds, a consumer joins its group in about a
/// second).
const AUDIT_PATIENCE: Duration = Duration::from_secs(60);

/// The pause after each call of a phase that calls one at a time, so its
/// traffic spreads over time in the timeline as a caller's would.
const PACE: Duration = Duration::from_millis(20);

/// How many phases the walkthrough runs.
const PHASES: usize = 10;

/// What a call to the wallet answered: its code and message.
type Answer = Result<(), Status>;

fn code_of(answer: &Answer) -> Code {
    match answer {
        Ok(()) => Code::Ok,
        Err(s) => s.code(),
    }
}

/// `n` and the word for it: `1 attempt`, `2 attempts`, `0 attempts`.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn check(what: impl Into<String>, passed: bool, seen: impl Into<String>) -> Check {
    Check {
        what: what.into(),
        passed,
        seen: if passed { String::new() } else { seen.into() },
    }
}

impl Run {
    async fn start(options: &Options) -> Result<Run, Error> {
        let started = SystemTime::now();
        let started_at = Instant::now();
        let recording = Recording::new();

        // A free port for the ledger, which is not listening yet: the
        // wallet starts first.
        let probe = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(Error::other)?;
        let ledger_addr = probe.local_addr().map_err(Error::other)?;
        drop(probe);

        // The exchange-rate service listens from the start.
        let rates = Rates::new();
        let rates_serving = rates::serve(&rates).await?;
        let rates_port = rates_serving.local_addr().port();

        // The wallet's Kafka cluster: librdkafka's mock, in this process.
        let kafka = MockCluster::new(1)
            .map_err(|e| Error::other(format!("could not start the mock Kafka cluster: {e}")))?;
        kafka
            .create_topic(wallet::TRANSFERS_TOPIC, 1, 1)
            .map_err(|e| {
                Error::other(format!(
                    "could not create the topic {}: {e}",
                    wallet::TRANSFERS_TOPIC
                ))
            })?;
        let brokers = kafka.bootstrap_servers();
        let kafka_port = brokers
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| {
                Error::other(format!("the mock cluster's broker {brokers:?} has no port"))
            })?;

        let env = Env::from_pairs(
            wallet_env(ledger_addr, options.open_for)
                .iter()
                .chain(rates_env(&rates_serving.base_url(), options.open_for).iter())
                .chain([(wallet::ENV_EVENTS_BROKERS, brokers.as_str())]),
        );
        let settings = wallet::Settings::from_env(env.clone())?;
        let telemetry = humus::telemetry::Telemetry::builder()
            .tracer_provider(recording.tracer_provider().clone())
            .meter_provider(recording.meter_provider().clone())
            .logger_provider(recording.logger_provider().clone())
            .propagator(wallet::propagator())
            .build();
        let wallet_serving = wallet::start(telemetry.clone(), &settings).await?;

        // The audit consumer reads the wallet's records from the start (a
        // new group reads from each partition's first record), with the
        // same telemetry: its spans continue the payments' traces.
        let audited: Arc<Mutex<Vec<String>>> = Arc::default();
        let audit = Consumer::start(
            &Setup::new().with_telemetry(telemetry),
            ConsumerSettings {
                brokers: vec![brokers.clone()],
                group: AUDIT_GROUP.to_owned(),
                topics: vec![wallet::TRANSFERS_TOPIC.to_owned()],
                commit_interval: Duration::from_millis(200),
                shutdown_grace: Duration::from_secs(1),
                ..ConsumerSettings::default()
            },
            {
                let audited = Arc::clone(&audited);
                move |record: OwnedMessage| {
                    let key =
                        String::from_utf8_lossy(record.key().unwrap_or_default()).into_owned();
                    audited.lock().expect("no reader panics").push(key);
                    std::future::ready(Ok::<_, humus::app::BoxError>(()))
                }
            },
        )
        .map_err(Error::other)?;
        let wallet_addr = wallet_serving.local_addr();
        let channel = Channel::from_shared(format!("http://{wallet_addr}"))
            .map_err(Error::other)?
            .connect_lazy();

        let run = Run {
            progress: options.progress,
            recording,
            ledger: Ledger::new(),
            ledger_addr,
            ledger_serving: None,
            ledger_socket: None,
            wallet_serving: Some(wallet_serving),
            rates,
            rates_port,
            rates_serving: Some(rates_serving),
            wallet: WalletClient::new(channel.clone()),
            health: HealthClient::new(channel),
            open_for: options.open_for,
            started,
            started_at,
            phases: Vec::new(),
            bounds: Vec::new(),
            phase: None,
            _kafka: kafka,
            kafka_port,
            audit: Some(audit),
            audited,
        };
        run.say("humus wallet walkthrough: a wallet whose handlers call its ledger through a humus client");
        run.say(&format!(
            "  ledger  {ledger_addr}  (in this process; plain-text HTTP/2 on loopback)"
        ));
        run.say(&format!(
            "  rates   127.0.0.1:{rates_port}  (the exchange-rate service: HTTP/1.1, axum behind humus's ContextLayer)"
        ));
        run.say(&format!(
            "  kafka   {brokers}  (librdkafka's mock cluster, in this process; the wallet produces to {}, an audit consumer reads it)",
            wallet::TRANSFERS_TOPIC
        ));
        run.say(&format!("  wallet  {wallet_addr}  with the settings:"));
        for line in settings_lines(&env) {
            run.say(&format!("          {line}"));
        }
        run.say("  telemetry: OpenTelemetry SDK providers recording in memory; every number below is read from them");
        Ok(run)
    }

    fn say(&self, line: &str) {
        if self.progress {
            println!("{line}");
        }
    }

    fn elapsed(&self) -> Duration {
        self.started_at.elapsed()
    }

    fn begin(&mut self, name: &'static str, says: &'static str) {
        let n = self.phases.len() + 1;
        self.say("");
        self.say(&format!("[{n}/{PHASES}] {name}: {says}"));
        let metrics = self.recording.collect();
        let spans = self.recording.spans().len();
        self.phase = Some((metrics, spans, self.elapsed()));
    }

    /// Ends the current phase; `checks` computes its checks from its
    /// numbers, which are the ledger client's.
    fn end(
        &mut self,
        name: &'static str,
        says: &'static str,
        checks: impl FnOnce(&PhaseStats) -> Vec<Check>,
    ) {
        let port = self.ledger_addr.port();
        self.end_of(port, name, says, checks);
    }

    /// [`end`](Run::end), with the numbers of the client of the dependency
    /// on `port`.
    fn end_of(
        &mut self,
        port: u16,
        name: &'static str,
        says: &'static str,
        checks: impl FnOnce(&PhaseStats) -> Vec<Check>,
    ) {
        let (before, mark, start) = self.phase.take().expect("a phase began");
        let after = self.recording.collect();
        let spans = self.recording.spans();
        let stats = PhaseStats::of(
            &before,
            &after,
            spans.get(mark..).unwrap_or_default(),
            Some(port),
        );
        let checks = checks(&stats);
        for c in &checks {
            if c.passed {
                self.say(&format!("      ✓ {}", c.what));
            } else {
                self.say(&format!("      ✗ {} (saw {})", c.what, c.seen));
            }
        }
        self.bounds.push((name.to_owned(), start, self.elapsed()));
        self.phases.push(PhaseReport {
            name,
            says,
            stats,
            checks,
        });
    }

    /// The ledger client's breaker's state now, as `humus.circuit.state`
    /// reads it.
    fn breaker_state(&self) -> String {
        self.breaker_state_of(self.ledger_addr.port())
    }

    /// The state of the breaker of the client of the dependency on `port`
    /// now, as `humus.circuit.state` reads it.
    fn breaker_state_of(&self, port: u16) -> String {
        let port = port.to_string();
        let by = self.recording.collect().by_where(
            names::CLIENT_SCOPE,
            names::CIRCUIT_STATE,
            names::STATE,
            &[(names::SERVER_PORT, &port)],
        );
        by.into_iter()
            .find(|(_, n)| *n >= 1.0)
            .map(|(s, _)| s)
            .unwrap_or_else(|| "unknown".to_owned())
    }

    async fn readiness_status(&self) -> Option<ServingStatus> {
        let mut health = self.health.clone();
        let mut request = tonic::Request::new(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        });
        request.set_timeout(Duration::from_secs(2));
        let status = health.check(request).await.ok()?.into_inner().status;
        ServingStatus::try_from(status).ok()
    }

    async fn serve_ledger(&mut self) -> Result<(), Error> {
        let failed = |e: &dyn std::fmt::Display| {
            Error::other(format!(
                "could not serve the ledger on {} again: {e}",
                self.ledger_addr
            ))
        };
        let socket = ledger::Socket::bind(self.ledger_addr).map_err(|e| failed(&e))?;
        let settings = ledger::settings(self.ledger_addr.to_string());
        let serving = ledger::serve_on(&self.ledger, settings, &socket)
            .await
            .map_err(|e| failed(&e))?;
        self.ledger_serving = Some(serving);
        self.ledger_socket = Some(socket);
        Ok(())
    }

    /// Stops the ledger (gracefully, as SIGTERM would), and closes its
    /// socket: its address refuses dials.
    async fn stop_ledger(&mut self) -> Result<(), Error> {
        self.ledger_socket = None;
        if let Some(serving) = self.ledger_serving.take() {
            serving.stop().await?;
        }
        Ok(())
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.set_timeout(Duration::from_secs(10));
        request
    }

    async fn send(&self, id: &str, from: &str, to: &str, cents: i64) -> Answer {
        let request = self.request(pb::SendRequest {
            request_id: id.to_owned(),
            from: from.to_owned(),
            to: to.to_owned(),
            cents,
        });
        let answer = self.wallet.clone().send(request).await.map(|_| ());
        tokio::time::sleep(PACE).await;
        answer
    }

    async fn top_up(&self, account: &str, cents: i64) -> Answer {
        let request = self.request(pb::TopUpRequest {
            account: account.to_owned(),
            cents,
        });
        let answer = self.wallet.clone().top_up(request).await.map(|_| ());
        tokio::time::sleep(PACE).await;
        answer
    }

    async fn balance(&self, account: &str) -> Result<i64, Status> {
        let request = self.request(pb::GetBalanceRequest {
            account: account.to_owned(),
        });
        Ok(self
            .wallet
            .clone()
            .get_balance(request)
            .await?
            .into_inner()
            .cents)
    }

    async fn statement(&self, account: &str) -> Result<Vec<pb::StatementLine>, Status> {
        let request = self.request(pb::StatementRequest {
            account: account.to_owned(),
        });
        let mut lines = self.wallet.clone().statement(request).await?.into_inner();
        let mut got = Vec::new();
        while let Some(line) = lines.message().await? {
            got.push(line);
        }
        Ok(got)
    }

    async fn readiness(&mut self) -> Result<(), Error> {
        const NAME: &str = "readiness";
        const SAYS: &str = "the wallet is ready only once its ledger client has connected";
        self.begin(NAME, SAYS);
        // Two readiness checks' worth, with the ledger not listening.
        tokio::time::sleep(wallet::READINESS_INTERVAL * 3).await;
        let before = self.readiness_status().await;
        self.say(&format!(
            "      the ledger is not listening yet: wallet health says {}",
            status_name(before)
        ));
        self.serve_ledger().await?;
        let waited = Instant::now();
        let mut after = None;
        while waited.elapsed() < Duration::from_secs(10) {
            after = self.readiness_status().await;
            if after == Some(ServingStatus::Serving) {
                break;
            }
            tokio::time::sleep(wallet::READINESS_INTERVAL / 2).await;
        }
        self.say(&format!(
            "      the ledger is listening: wallet health says {} after {}ms",
            status_name(after),
            waited.elapsed().as_millis()
        ));
        let seen = self.ledger.seen();
        self.end(NAME, SAYS, |s| {
            vec![
                check(
                    "not ready while the ledger was down",
                    before == Some(ServingStatus::NotServing),
                    status_name(before),
                ),
                check(
                    "ready once the ledger client connected",
                    after == Some(ServingStatus::Serving),
                    status_name(after),
                ),
                check(
                    "readiness made no call: no attempt, nothing reached the ledger",
                    s.attempts == 0 && seen == ledger::Seen::default(),
                    format!(
                        "{}, the ledger saw {seen:?}",
                        count(s.attempts, "attempt", "attempts")
                    ),
                ),
            ]
        });
        Ok(())
    }

    async fn normal(&mut self) {
        const NAME: &str = "normal";
        const SAYS: &str = "top-ups, payments, balances and a statement; an overdraft is refused";
        self.begin(NAME, SAYS);
        let seen = self.ledger.seen();
        let mut answers = vec![
            self.top_up("alice", 10_000).await,
            self.top_up("bob", 10_000).await,
        ];
        for i in 1..=20 {
            let (from, to, cents) = if i % 2 == 1 {
                ("alice", "bob", 100)
            } else {
                ("bob", "alice", 50)
            };
            answers.push(self.send(&format!("normal-{i}"), from, to, cents).await);
        }
        let alice = self.balance("alice").await;
        let bob = self.balance("bob").await;
        let overdraft = self.send("normal-overdraft", "carol", "alice", 500).await;
        let statement = self.statement("bob").await;
        self.say(&format!(
            "      22 wallet calls (2 top-ups, 20 payments) OK; balances alice {} bob {}; carol's overdraft: {}; bob's statement: {} lines",
            alice.as_ref().map_or_else(|e| e.to_string(), i64::to_string),
            bob.as_ref().map_or_else(|e| e.to_string(), i64::to_string),
            overdraft
                .as_ref()
                .err()
                .map_or("accepted".to_owned(), |s| format!("{:?} {:?}", s.code(), s.message())),
            statement.as_ref().map_or(0, Vec::len),
        ));
        let all_ok = answers.iter().all(Result::is_ok);
        let balances_ok = alice.as_ref().ok() == Some(&(10_000 - 500))
            && bob.as_ref().ok() == Some(&(10_000 + 500));
        let lines = statement.as_ref().map_or(0, Vec::len);
        let transfers = self.ledger.seen().transfers - seen.transfers;
        let overdraft_code = code_of(&overdraft);
        self.end(NAME, SAYS, |s| {
            vec![
                check(
                    "every top-up and payment succeeded, and the balances add up",
                    all_ok && balances_ok,
                    format!(
                        "answers {:?}, alice {alice:?}, bob {bob:?}",
                        answers.iter().map(code_of).collect::<Vec<_>>()
                    ),
                ),
                check(
                    "the overdraft is the wallet's FAILED_PRECONDITION, not retried",
                    overdraft_code == Code::FailedPrecondition,
                    format!("{overdraft_code:?}"),
                ),
                check(
                    "the statement streamed bob's 21 entries",
                    lines == 21,
                    format!("{lines} lines"),
                ),
                check(
                    "26 ledger calls (the 22 above, 2 balances, the overdraft, the statement), one attempt each, no retry, no rejection, the breaker closed",
                    s.calls == 26
                        && s.attempts == 26
                        && s.retries == 0
                        && s.rejected == 0
                        && s.transitions.is_empty(),
                    format!(
                        "{}, {}, {}, {} rejected, transitions {}",
                        count(s.calls, "call", "calls"),
                        count(s.attempts, "attempt", "attempts"),
                        count(s.retries, "retry", "retries"),
                        s.rejected,
                        s.transitions_text()
                    ),
                ),
                check(
                    "the ledger saw each of the 21 transfers once",
                    transfers == 21,
                    format!("{transfers}"),
                ),
            ]
        });
    }

    async fn write_races(&mut self) {
        const NAME: &str = "write races";
        const SAYS: &str = "transfers the ledger aborts as write races, and one whose reply is lost, are retried and applied once";
        self.begin(NAME, SAYS);
        let seen = self.ledger.seen();
        let (alice, bob) = (self.ledger.balance("alice"), self.ledger.balance("bob"));
        self.ledger.race_next_transfers(3);
        let mut answers = Vec::new();
        for i in 1..=3 {
            answers.push(self.send(&format!("race-{i}"), "alice", "bob", 10).await);
        }
        self.ledger.lose_next_replies(1);
        answers.push(self.send("race-lost-reply", "alice", "bob", 10).await);
        answers.push(self.send("race-after", "alice", "bob", 10).await);
        let moved_once =
            self.ledger.balance("alice") == alice - 50 && self.ledger.balance("bob") == bob + 50;
        let now = self.ledger.seen();
        let (transfers, replays) = (now.transfers - seen.transfers, now.replays - seen.replays);
        self.say(&format!(
            "      5 payments: {} OK; the ledger saw {transfers} transfer requests, replayed {replays}, applied each once: {moved_once}",
            answers.iter().filter(|a| a.is_ok()).count()
        ));
        self.end(NAME, SAYS, |s| {
            let aborted = s.attempt_codes.get("ABORTED").copied().unwrap_or(0);
            let unavailable = s.attempt_codes.get("UNAVAILABLE").copied().unwrap_or(0);
            vec![
                check(
                    "every payment succeeded",
                    answers.iter().all(Result::is_ok),
                    format!("{:?}", answers.iter().map(code_of).collect::<Vec<_>>()),
                ),
                check(
                    "5 calls, 9 attempts: 3 ABORTED and 1 UNAVAILABLE attempts each retried once",
                    s.calls == 5
                        && s.attempts == 9
                        && s.retries == 4
                        && aborted == 3
                        && unavailable == 1,
                    format!(
                        "{}, {}, {}, {aborted} ABORTED, {unavailable} UNAVAILABLE",
                        count(s.calls, "call", "calls"),
                        count(s.attempts, "attempt", "attempts"),
                        count(s.retries, "retry", "retries")
                    ),
                ),
                check(
                    "the money moved once per payment: the lost reply's retry was a replay",
                    moved_once && transfers == 9 && replays == 1,
                    format!("moved once {moved_once}, {transfers} requests, {replays} replays"),
                ),
                check(
                    "the breaker stayed closed (a race counts for the ledger)",
                    s.transitions.is_empty(),
                    s.transitions_text(),
                ),
            ]
        });
    }

    async fn charge_unavailable(&mut self) {
        const NAME: &str = "charge unavailable";
        const SAYS: &str =
            "the ledger answers Charge UNAVAILABLE: each top-up is sent once, never retried";
        self.begin(NAME, SAYS);
        let seen = self.ledger.seen();
        let balance = self.ledger.balance("carol");
        self.ledger.set_charge_unavailable(true);
        let failed = [
            self.top_up("carol", 700).await,
            self.top_up("carol", 300).await,
        ];
        let unchanged = self.ledger.balance("carol") == balance;
        self.ledger.set_charge_unavailable(false);
        let again = self.top_up("carol", 700).await;
        let charges = self.ledger.seen().charges - seen.charges;
        self.say(&format!(
            "      2 top-ups while the processor is down: {:?}; one more once it is back: {:?}; the ledger saw {charges} charges",
            failed.iter().map(code_of).collect::<Vec<_>>(),
            code_of(&again)
        ));
        self.end(NAME, SAYS, |s| {
            vec![
                check(
                    "each top-up is the wallet's UNAVAILABLE, and charged nothing",
                    failed.iter().all(|a| code_of(a) == Code::Unavailable) && unchanged,
                    format!("{:?}", failed.iter().map(code_of).collect::<Vec<_>>()),
                ),
                check(
                    "3 calls, 3 attempts, no retry: the ledger saw each charge once",
                    s.calls == 3 && s.attempts == 3 && s.retries == 0 && charges == 3,
                    format!(
                        "{}, {}, {}, the ledger saw {charges}",
                        count(s.calls, "call", "calls"),
                        count(s.attempts, "attempt", "attempts"),
                        count(s.retries, "retry", "retries")
                    ),
                ),
                check(
                    "the caller decides to try again: the next top-up succeeds",
                    again.is_ok(),
                    format!("{:?}", code_of(&again)),
                ),
            ]
        });
    }

    async fn outage(&mut self) -> Result<(), Error> {
        const NAME: &str = "outage";
        const SAYS: &str = "the ledger stops: its refused dial and the attempts in the connection backoff are failed attempts, and after five the breaker opens, calls fail fast with the rejection; back, it fails every call: the half-open probe reaches it and reopens the breaker; readiness stays true";
        self.begin(NAME, SAYS);
        let seen = self.ledger.seen();
        let applied = self.ledger.applied_transfers();
        self.stop_ledger().await?;
        self.say(&format!(
            "      the ledger stopped: {} refuses connections",
            self.ledger_addr
        ));
        let mut stopped = Vec::new();
        for i in 1..=6 {
            stopped.push(self.send(&format!("stopped-{i}"), "alice", "bob", 10).await);
        }
        let stopped_state = self.breaker_state();
        let says =
            |a: &Answer, what: &str| a.as_ref().err().is_some_and(|s| s.message().contains(what));
        let rejected_stopped = stopped
            .iter()
            .filter(|a| says(a, "circuit breaker is open"))
            .count();
        let dial_failed = stopped.iter().filter(|a| says(a, "dial ")).count();
        self.say(&format!(
            "      6 payments: {} UNAVAILABLE, {dial_failed} by failed opens (the refused dial, then attempts in the connection backoff: no dial, retried within the budget, each a breaker failure), {rejected_stopped} fast by the breaker they opened after five; breaker {stopped_state}",
            stopped
                .iter()
                .filter(|a| code_of(a) == Code::Unavailable)
                .count(),
        ));
        // Back, but failing every payment. The breaker reads half-open
        // once open_for has passed, by which time the connection's next
        // dial (1 s after the refused one, which came first) is due.
        self.ledger.set_transfers_unavailable(true);
        self.serve_ledger().await?;
        self.say(&format!(
            "      the ledger listens again on {}, and answers every payment UNAVAILABLE (its database is down)",
            self.ledger_addr
        ));
        let waited = Instant::now();
        let mut half_open = self.breaker_state();
        while half_open != "half-open" && waited.elapsed() < self.open_for + Duration::from_secs(10)
        {
            tokio::time::sleep(Duration::from_millis(25)).await;
            half_open = self.breaker_state();
        }
        let mut answers = Vec::new();
        for i in 1..=12 {
            answers.push(self.send(&format!("outage-{i}"), "alice", "bob", 10).await);
        }
        let state = self.breaker_state();
        let ready = self.readiness_status().await;
        let fast = answers
            .iter()
            .filter(|a| says(a, "circuit breaker is open"))
            .count();
        let reached = self.ledger.seen().transfers - seen.transfers;
        let applied_now = self.ledger.applied_transfers() - applied;
        self.say(&format!(
            "      breaker {half_open} after open_for; 12 payments: {} UNAVAILABLE, {fast} of them failed fast by the open breaker; {reached} attempts reached the ledger; breaker {state}; wallet health {}",
            answers
                .iter()
                .filter(|a| code_of(a) == Code::Unavailable)
                .count(),
            status_name(ready)
        ));
        self.end(NAME, SAYS, |s| {
            vec![
                check(
                    "the stopped ledger: 6 payments UNAVAILABLE, the first by its refused dial; its failed opens opened the breaker, which rejected the last payments without a dial",
                    stopped.iter().all(|a| code_of(a) == Code::Unavailable)
                        && says(&stopped[0], "dial ")
                        && rejected_stopped >= 1
                        && says(&stopped[5], "circuit breaker is open")
                        && stopped_state == "open",
                    format!(
                        "{:?}, {dial_failed} failed opens, {rejected_stopped} rejected, state {stopped_state}",
                        stopped.iter().map(code_of).collect::<Vec<_>>()
                    ),
                ),
                check(
                    "back and failing: every payment is the wallet's UNAVAILABLE, the half-open probe reached the ledger, and none was applied",
                    half_open == "half-open"
                        && answers.iter().all(|a| code_of(a) == Code::Unavailable)
                        && reached >= 1
                        && applied_now == 0,
                    format!(
                        "{half_open} after open_for, {:?}, {reached} reached, {applied_now} applied",
                        answers.iter().map(code_of).collect::<Vec<_>>()
                    ),
                ),
                check(
                    "the breaker opened, reopened on the failed probe, and rejected calls without sending them",
                    s.transitions.get("open").copied().unwrap_or(0) >= 2
                        && !s.transitions.contains_key("closed")
                        && s.rejected >= 2
                        && (fast + rejected_stopped) as u64 == s.rejected
                        && state != "closed",
                    format!(
                        "transitions {}, {} rejected ({} answers said so), state {state}",
                        s.transitions_text(),
                        s.rejected,
                        fast + rejected_stopped
                    ),
                ),
                check(
                    "the retry budget and the breaker kept the attempts below 3 per call",
                    s.attempts < 3 * s.calls,
                    format!(
                        "{} for {}",
                        count(s.attempts, "attempt", "attempts"),
                        count(s.calls, "call", "calls")
                    ),
                ),
                check(
                    "readiness stayed true: Connected latches",
                    ready == Some(ServingStatus::Serving),
                    status_name(ready),
                ),
            ]
        });
        Ok(())
    }

    async fn recovery(&mut self) -> Result<(), Error> {
        const NAME: &str = "recovery";
        const SAYS: &str = "the ledger is well again: after open_for the breaker is half-open, and probes close it";
        self.begin(NAME, SAYS);
        self.ledger.set_transfers_unavailable(false);
        self.say("      the ledger's database is back: it answers payments again");
        let waited = Instant::now();
        let mut state = self.breaker_state();
        while state != "half-open"
            && state != "closed"
            && waited.elapsed() < self.open_for + Duration::from_secs(10)
        {
            tokio::time::sleep(Duration::from_millis(25)).await;
            state = self.breaker_state();
        }
        self.say(&format!(
            "      humus.circuit.state reads {state} {}ms after the ledger came back, with no call made (the breaker opened during the outage; open_for {}ms)",
            waited.elapsed().as_millis(),
            self.open_for.as_millis()
        ));
        let mut answers = Vec::new();
        for i in 1..=6 {
            answers.push(
                self.send(&format!("recovery-{i}"), "alice", "bob", 10)
                    .await,
            );
        }
        let end_state = self.breaker_state();
        self.say(&format!(
            "      6 payments: {} OK; breaker {end_state}",
            answers.iter().filter(|a| a.is_ok()).count()
        ));
        self.end(NAME, SAYS, |s| {
            vec![
                check(
                    "the breaker read half-open once open_for passed, before any call",
                    state == "half-open",
                    state.clone(),
                ),
                check(
                    "every payment succeeded",
                    answers.iter().all(Result::is_ok),
                    format!("{:?}", answers.iter().map(code_of).collect::<Vec<_>>()),
                ),
                check(
                    "successful probes closed the breaker, once, with no rejection",
                    s.transitions.get("closed") == Some(&1)
                        && !s.transitions.contains_key("open")
                        && s.rejected == 0
                        && end_state == "closed",
                    format!(
                        "transitions {}, {} rejected, state {end_state}",
                        s.transitions_text(),
                        s.rejected
                    ),
                ),
            ]
        });
        Ok(())
    }

    async fn rollout(&mut self) -> Result<(), Error> {
        const NAME: &str = "rollout";
        const SAYS: &str = "the ledger is rolled, then its connections age: no payment fails";
        /// Payments each of the 4 callers makes, one after the other, while
        /// the ledger is rolled.
        const EACH: usize = 20;
        self.begin(NAME, SAYS);
        let _ = self.top_up("alice", 100_000).await;
        let applied = self.ledger.applied_transfers();
        let old = self
            .ledger_serving
            .take()
            .ok_or_else(|| Error::other("the ledger is not serving"))?;
        let callers = (0..4).map(|w| {
            let wallet = self.wallet.clone();
            let request = move |i: usize| {
                let mut request = tonic::Request::new(pb::SendRequest {
                    request_id: format!("roll-{w}-{i}"),
                    from: "alice".into(),
                    to: "bob".into(),
                    cents: 1,
                });
                request.set_timeout(Duration::from_secs(10));
                request
            };
            async move {
                let mut answers = Vec::new();
                for i in 0..EACH {
                    let mut wallet = wallet.clone();
                    answers.push(wallet.send(request(i)).await.map(|_| ()));
                    tokio::time::sleep(PACE).await;
                }
                answers
            }
        });
        let callers = futures_util::future::join_all(callers);
        // The roll, while the callers pay: the new ledger, on the same book
        // (the shared database), with connections that live about 300ms
        // each, takes over the ledger's socket (as a supervisor hands a
        // listening socket from one process to the next), so the address
        // never refuses a dial; then the old one shuts down gracefully: it
        // stops accepting and sends its connections a GOAWAY, and the
        // wallet's next dial is accepted by the new one.
        let socket = self
            .ledger_socket
            .clone()
            .ok_or_else(|| Error::other("the ledger has no socket"))?;
        let settings = humus::grpc::server::Settings {
            max_connection_age: Some(Duration::from_millis(300)),
            max_connection_age_grace: Some(Duration::from_secs(1)),
            ..ledger::settings(self.ledger_addr.to_string())
        };
        let roll = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let new = ledger::serve_on(&self.ledger, settings, &socket).await;
            let stopped = old.stop().await;
            (new, stopped)
        };
        let (answers, (new, stopped)) = tokio::join!(callers, roll);
        let answers: Vec<Answer> = answers.into_iter().flatten().collect();
        let new = new.map_err(|e| {
            Error::other(format!(
                "the new ledger could not take over {}: {e}",
                self.ledger_addr
            ))
        })?;
        self.ledger_serving = Some(new);
        self.say(&format!(
            "      the new ledger took over {}'s socket, the old one shut down gracefully ({})",
            self.ledger_addr,
            match &stopped {
                Ok(()) => "exit 0".to_owned(),
                Err(e) => format!("{e}"),
            }
        ));
        // Then the new ledger's connections reach their age, several times.
        let mut aged = Vec::new();
        for i in 0..40 {
            aged.push(self.send(&format!("aged-{i}"), "alice", "bob", 1).await);
        }
        let total = answers.len() + aged.len();
        let applied = self.ledger.applied_transfers() - applied;
        let failed = answers.iter().chain(&aged).filter(|a| a.is_err()).count();
        self.say(&format!(
            "      {} payments through the roll and {} across the new ledger's connection ages: {failed} failed; {applied} applied",
            answers.len(),
            aged.len()
        ));
        let codes: Vec<Code> = answers.iter().chain(&aged).map(code_of).collect();
        self.end(NAME, SAYS, |s| {
            vec![
                check(
                    "every payment succeeded: the wallet's callers saw no error",
                    failed == 0 && s.wallet_codes.keys().all(|c| c == "OK"),
                    format!(
                        "{:?}; the wallet answered {:?}; the first failure: {:?}",
                        codes.iter().filter(|c| **c != Code::Ok).collect::<Vec<_>>(),
                        s.wallet_codes,
                        answers
                            .iter()
                            .chain(&aged)
                            .find_map(|a| a.as_ref().err().map(Status::message))
                    ),
                ),
                check(
                    "each payment was applied once",
                    applied == total,
                    format!("{applied} applied for {total} payments"),
                ),
                check(
                    "the old ledger finished its calls in flight and exited 0",
                    stopped.is_ok(),
                    format!("{stopped:?}"),
                ),
                check(
                    "the breaker stayed closed",
                    s.transitions.is_empty(),
                    s.transitions_text(),
                ),
            ]
        });
        Ok(())
    }

    /// Sends `n` payments of `cents` at once, `{prefix}-1` to `{prefix}-{n}`;
    /// payment number `faulted` carries, vouched for by the gateway's token,
    /// a scenario aborting `point`, in a trace of its own whose root span is
    /// `span`. Each payment's id and answer, the faulted one's id, and its
    /// trace.
    async fn pay_with_one_aborted(
        &self,
        prefix: &str,
        n: usize,
        cents: i64,
        faulted: usize,
        point: &str,
        span: &'static str,
    ) -> (Vec<(String, Answer)>, String, TraceId) {
        let codec = jsonscenario::Codec::new(wallet::SCENARIO_KEY).expect("a valid key");
        let scenario = Scenario::new([Rule::new(
            point,
            Fault {
                delay: Duration::ZERO,
                abort: true,
            },
        )]);
        let tracer = self
            .recording
            .tracer_provider()
            .tracer("humus-examples/walkthrough");
        let root = tracer.start(span);
        let trace_id = root.span_context().trace_id();
        let cx = Context::new().with_span(root);
        let cx = fault::with_scenario(&cx, &codec, &scenario).expect("a small scenario encodes");
        let faulted = format!("{prefix}-{faulted}");
        let calls = (1..=n).map(|i| {
            let id = format!("{prefix}-{i}");
            let mut request = self.request(pb::SendRequest {
                request_id: id.clone(),
                from: "alice".into(),
                to: "bob".into(),
                cents,
            });
            if id == faulted {
                wallet::propagator()
                    .inject_context(&cx, &mut MetadataInjector(request.metadata_mut()));
                // The gateway vouches for it: the wallet trusts its scenario.
                request.metadata_mut().insert(
                    wallet::SCENARIO_TOKEN_HEADER,
                    GATEWAY_TOKEN.parse().expect("a valid header value"),
                );
            }
            let mut wallet = self.wallet.clone();
            async move { (id, wallet.send(request).await.map(|_| ())) }
        });
        let answers: Vec<(String, Answer)> = futures_util::future::join_all(calls).await;
        cx.span().end();
        (answers, faulted, trace_id)
    }

    async fn fault_scenario(&mut self) {
        const NAME: &str = "fault scenario";
        const SAYS: &str =
            "one request carries a failure scenario in its baggage: only that request fails";
        self.begin(NAME, SAYS);
        let point = "grpc:ledger.v1.Ledger/Transfer";
        // The faulted request is its own trace, so its spans can be told
        // apart from the others'.
        let (answers, faulted, trace_id) = self
            .pay_with_one_aborted(
                "fault",
                10,
                10,
                5,
                point,
                "walkthrough fault scenario request",
            )
            .await;
        let faulted = faulted.as_str();
        let failed: Vec<&str> = answers
            .iter()
            .filter(|(_, a)| a.is_err())
            .map(|(id, _)| id.as_str())
            .collect();
        let reached = self.ledger.received(faulted);
        let spans = self.recording.spans();
        let mut faulted_attempts = 0;
        let mut others = 0;
        for span in &spans {
            let injected = span.events.iter().any(|e| {
                e.name == fault::names::EVALUATION
                    && e.attributes
                        .iter()
                        .any(|kv| kv.key.as_str() == fault::names::ABORT && kv.value == true.into())
            });
            if injected {
                if span.span_context.trace_id() == trace_id {
                    faulted_attempts += 1;
                } else {
                    others += 1;
                }
            }
        }
        self.say(&format!(
            "      10 concurrent payments, {faulted} with {}={}: failed {failed:?}; the ledger saw {faulted} {reached} times; attempts the scenario aborted: {faulted_attempts}",
            wallet::SCENARIO_KEY,
            scenario_text(point)
        ));
        let code = answers
            .iter()
            .find(|(id, _)| id == faulted)
            .map(|(_, a)| code_of(a));
        self.end(NAME, SAYS, |s| {
            vec![
                check(
                    "only the request with the scenario failed, with the wallet's UNAVAILABLE",
                    failed == [faulted] && code == Some(Code::Unavailable),
                    format!("failed {failed:?}, its code {code:?}"),
                ),
                check(
                    "its attempts were aborted at the client, and never reached the ledger",
                    faulted_attempts >= 1 && others == 0 && reached == 0,
                    format!("{faulted_attempts} aborted attempts in its trace, {others} elsewhere, the ledger saw it {reached} times"),
                ),
                check(
                    "the breaker stayed closed",
                    s.transitions.is_empty(),
                    s.transitions_text(),
                ),
            ]
        });
    }

    /// How many keys the audit consumer has read that start with `prefix`.
    fn audited(&self, prefix: &str) -> Vec<String> {
        self.audited
            .lock()
            .expect("no reader panics")
            .iter()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect()
    }

    async fn events(&mut self) {
        const NAME: &str = "events (kafka)";
        const SAYS: &str = "each payment produces a \"transfer applied\" record; one request's scenario aborts its record alone";
        const PAYMENTS: usize = 10;
        self.begin(NAME, SAYS);
        let point = format!("kafka:{}", wallet::TRANSFERS_TOPIC);
        let (answers, faulted, trace_id) = self
            .pay_with_one_aborted(
                "event",
                PAYMENTS,
                5,
                4,
                &point,
                "walkthrough kafka scenario request",
            )
            .await;
        let faulted = faulted.as_str();
        let failed: Vec<&str> = answers
            .iter()
            .filter(|(_, a)| a.is_err())
            .map(|(id, _)| id.as_str())
            .collect();
        let applied = answers
            .iter()
            .filter(|(id, _)| self.ledger.received(id) >= 1)
            .count();

        // The records go through in milliseconds; the wait is bounded,
        // and generous.
        let deadline = Instant::now() + AUDIT_PATIENCE;
        while self.audited("event-").len() < PAYMENTS - 1 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut audited = self.audited("event-");
        audited.sort();
        audited.dedup();

        let spans = self.recording.spans();
        let sends: Vec<_> = spans
            .iter()
            .filter(|s| {
                s.span_kind == SpanKind::Producer
                    && s.instrumentation_scope.name() == names::KAFKA_SCOPE
                    && span_attribute(s, "messaging.destination.name").as_deref()
                        == Some(wallet::TRANSFERS_TOPIC)
            })
            .collect();
        let failed_sends: Vec<(bool, Option<String>)> = sends
            .iter()
            .filter(|s| span_attribute(s, names::ERROR_TYPE).is_some())
            .map(|s| {
                (
                    s.span_context.trace_id() == trace_id,
                    span_attribute(s, names::ERROR_TYPE),
                )
            })
            .collect();
        self.say(&format!(
            "      {PAYMENTS} concurrent payments, {faulted} with {}={}: failed {failed:?}; the ledger applied {applied}; the audit consumer read {} records{}",
            wallet::SCENARIO_KEY,
            scenario_text(&point),
            audited.len(),
            if audited.iter().any(|k| k == faulted) {
                format!(", {faulted}'s among them")
            } else {
                format!(", not {faulted}'s")
            }
        ));
        let port = self.kafka_port;
        let read = audited.len();
        let faulted_read = audited.iter().any(|k| k == faulted);
        self.end_of(port, NAME, SAYS, |s| {
            let success = s.outcomes.get("success").copied().unwrap_or(0);
            let failure = s.outcomes.get("failure").copied().unwrap_or(0);
            vec![
                check(
                    "every payment succeeded and was applied once, the one whose event failed too",
                    failed.is_empty() && applied == PAYMENTS,
                    format!("failed {failed:?}, applied {applied} of {PAYMENTS}"),
                ),
                check(
                    format!("the audit consumer read {} records, not {faulted}'s", PAYMENTS - 1),
                    read == PAYMENTS - 1 && !faulted_read,
                    format!("{read} records, {faulted}'s among them: {faulted_read}"),
                ),
                check(
                    format!(
                        "the producer's breaker counted {} stored calls and one failure, and stayed closed",
                        PAYMENTS - 1
                    ),
                    success == (PAYMENTS - 1) as u64
                        && failure == 1
                        && s.rejected == 0
                        && s.transitions.is_empty(),
                    format!("{:?}, transitions {}", s.outcomes, s.transitions_text()),
                ),
                check(
                    "the one failed record's span is the injected fault's, in the faulted request's trace",
                    failed_sends == [(true, Some(fault::ERROR_TYPE.to_owned()))],
                    format!("{failed_sends:?}"),
                ),
            ]
        });
    }

    async fn quote(&self, currency: &str, cents: i64) -> Result<(i64, String), Status> {
        let request = self.request(pb::QuoteRequest {
            cents,
            currency: currency.to_owned(),
        });
        let answer = self.wallet.clone().quote(request).await;
        tokio::time::sleep(PACE).await;
        let quoted = answer?.into_inner();
        Ok((quoted.cents, quoted.rate))
    }

    async fn rates_outage(&mut self) -> Result<(), Error> {
        const NAME: &str = "rates outage (http)";
        const SAYS: &str = "the exchange-rate service (HTTP) answers 503: its breaker opens, quotes fail fast, then it recovers";
        /// Quotes asked while the service is down.
        const DOWN: usize = 8;
        self.begin(NAME, SAYS);
        let port = self.rates_port;
        let seen = self.rates.seen();
        let traces_before = self.rates.traces().len();
        let spans_before = self.recording.spans().len();

        let mut up = Vec::new();
        for cents in [10_000, 2_500, 99] {
            up.push(self.quote("EUR", cents).await);
        }
        self.say(&format!(
            "      3 quotes in EUR through the wallet's HTTP client: {:?}",
            up.iter()
                .map(|q| q.as_ref().map_or_else(
                    |s| format!("{:?}", s.code()),
                    |(c, r)| format!("{c} at {r}")
                ))
                .collect::<Vec<_>>()
        ));

        // The service goes down behind its gateway: 503 pages.
        self.rates.set_down(true);
        let seen_down = self.rates.seen();
        let mut down = Vec::new();
        for _ in 0..DOWN {
            down.push(self.quote("EUR", 1_000).await);
        }
        let reached_down = self.rates.seen() - seen_down;
        let state_down = self.breaker_state_of(port);
        let rejected_answers = down
            .iter()
            .filter(|q| {
                q.as_ref()
                    .err()
                    .is_some_and(|s| s.message().contains("circuit breaker is open"))
            })
            .count();
        self.say(&format!(
            "      the service answers 503: {DOWN} quotes, {} UNAVAILABLE ({rejected_answers} of them told the breaker is open); it received {reached_down} requests; its breaker is {state_down}",
            down.iter().filter(|q| q.as_ref().err().map(Status::code) == Some(Code::Unavailable)).count()
        ));

        // It comes back; once open_for passes the breaker reads half-open.
        self.rates.set_down(false);
        let waited = Instant::now();
        let mut state = self.breaker_state_of(port);
        while state != "half-open"
            && state != "closed"
            && waited.elapsed() < Duration::from_secs(15)
        {
            tokio::time::sleep(Duration::from_millis(25)).await;
            state = self.breaker_state_of(port);
        }
        self.say(&format!(
            "      the service is back: humus.circuit.state of http:127.0.0.1:{port} reads {state} after {}ms, with no call made",
            waited.elapsed().as_millis()
        ));
        let mut recovered = Vec::new();
        for _ in 0..4 {
            recovered.push(self.quote("GBP", 10_000).await);
        }
        let end_state = self.breaker_state_of(port);
        self.say(&format!(
            "      4 quotes in GBP: {} OK; breaker {end_state}",
            recovered.iter().filter(|q| q.is_ok()).count()
        ));

        let reached = self.rates.seen() - seen;
        // Every request the service received ran in the trace of the
        // wallet's RPC that made it (its SERVER span's), as ContextLayer
        // extracted it.
        let traces = self.rates.traces().split_off(traces_before);
        let wallet_traces: std::collections::HashSet<_> = self.recording.spans()[spans_before..]
            .iter()
            .filter(|s| s.instrumentation_scope.name() == stats::WALLET_SCOPE)
            .map(|s| s.span_context.trace_id())
            .collect();
        let continued = traces.iter().filter(|t| wallet_traces.contains(t)).count();
        let up_ok = up
            .iter()
            .all(|q| q.as_ref().is_ok_and(|(c, r)| r == "0.92" && *c > 0));
        let down_codes: Vec<Code> = down
            .iter()
            .map(|q| q.as_ref().err().map_or(Code::Ok, Status::code))
            .collect();
        let recovered_ok = recovered
            .iter()
            .all(|q| q.as_ref().is_ok_and(|(_, r)| r == "0.79"));
        let ledger_state = self.breaker_state();
        self.end_of(port, NAME, SAYS, |s| {
            vec![
                check(
                    "the first quotes succeeded, at the service's rate",
                    up_ok,
                    format!("{up:?}"),
                ),
                check(
                    "every quote while it answered 503 was the wallet's UNAVAILABLE",
                    down_codes.iter().all(|c| *c == Code::Unavailable),
                    format!("{down_codes:?}"),
                ),
                check(
                    "the 503s were retried, then the breaker opened once and later quotes were rejected without a request",
                    s.retries >= 1
                        && s.transitions.get("open") == Some(&1)
                        && s.rejected >= 1
                        && rejected_answers >= 1
                        && state_down == "open"
                        && reached_down < 3 * DOWN as u64,
                    format!(
                        "{} retries, transitions {}, {} rejected ({rejected_answers} answers said so), state {state_down}, {reached_down} requests for {DOWN} quotes",
                        s.retries,
                        s.transitions_text(),
                        s.rejected
                    ),
                ),
                check(
                    "each attempt the client recorded reached the service, and no rejected call did",
                    s.attempts == reached,
                    format!(
                        "{}, the service received {reached}",
                        count(s.attempts, "attempt", "attempts")
                    ),
                ),
                check(
                    "after open_for the breaker read half-open before any call, and good probes closed it",
                    state == "half-open"
                        && recovered_ok
                        && s.transitions.get("half-open") == Some(&1)
                        && s.transitions.get("closed") == Some(&1)
                        && end_state == "closed",
                    format!(
                        "state {state} then {end_state}, transitions {}, quotes {recovered:?}",
                        s.transitions_text()
                    ),
                ),
                check(
                    "every request the service received continued the trace of the wallet's RPC (ContextLayer)",
                    !traces.is_empty() && continued == traces.len(),
                    format!("{continued} of {} requests", traces.len()),
                ),
                check(
                    "the ledger client's breaker, apart from this one, stayed closed",
                    ledger_state == "closed",
                    ledger_state.clone(),
                ),
            ]
        });
        Ok(())
    }

    async fn finish(mut self, options: &Options) -> Result<Report, Error> {
        // Each App shuts down as SIGTERM would stop it, and must exit 0.
        if let Some(wallet) = self.wallet_serving.take() {
            wallet.stop().await?;
        }
        if let Some(audit) = self.audit.take() {
            audit.stop().await;
        }
        self.stop_ledger().await?;
        if let Some(rates) = self.rates_serving.take() {
            rates.stop().await?;
        }
        let took = self.elapsed();
        let timeline = self.timeline(took);
        let svg = match &options.svg {
            None => None,
            Some(path) => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(Error::other)?;
                }
                std::fs::write(path, timeline.to_svg()).map_err(Error::other)?;
                Some(path.clone())
            }
        };
        Ok(Report {
            phases: self.phases,
            timeline,
            svg,
            took,
        })
    }

    /// The picture's data, from the spans and the breaker's log records.
    fn timeline(&self, length: Duration) -> Timeline {
        let since = |t: SystemTime| t.duration_since(self.started).unwrap_or_default();
        let mut attempts = Vec::new();
        let mut rejected = Vec::new();
        for span in self.recording.spans() {
            match span.instrumentation_scope.name() {
                names::RPC_SCOPE => {
                    let ok = span_attribute(&span, names::STATUS_CODE).as_deref() == Some("OK");
                    attempts.push((since(span.start_time), ok));
                }
                // An HTTP attempt failed when it has an `error.type` (no
                // response, or a status from 400).
                names::HTTP_SCOPE => {
                    let ok = span_attribute(&span, names::ERROR_TYPE).is_none();
                    attempts.push((since(span.start_time), ok));
                }
                // A produced record's span: failed when it has an
                // `error.type` (not stored, or aborted by a fault).
                names::KAFKA_SCOPE if span.span_kind == SpanKind::Producer => {
                    let ok = span_attribute(&span, names::ERROR_TYPE).is_none();
                    attempts.push((since(span.start_time), ok));
                }
                names::CLIENT_SCOPE => rejected.push(since(span.start_time)),
                _ => {}
            }
        }
        let logs = self.recording.logs();
        let transitions_of = |port: u16| {
            let port = port.to_string();
            let mut transitions: Vec<(Duration, String)> = logs
                .iter()
                .filter(|log| log.instrumentation.name() == names::CLIENT_SCOPE)
                .filter(|log| log_attribute(log, names::SERVER_PORT).as_deref() == Some(&port))
                .filter_map(|log| Some((since(log_time(log)?), log_attribute(log, names::STATE)?)))
                .collect();
            transitions.sort_by_key(|(t, _)| *t);
            transitions
        };
        let transitions = transitions_of(self.ledger_addr.port());
        let http_transitions = transitions_of(self.rates_port);
        Timeline {
            length,
            phases: self.bounds.clone(),
            initial_state: "closed".to_owned(),
            transitions,
            http_transitions,
            attempts,
            rejected,
        }
    }
}

fn scenario_text(point: &str) -> String {
    format!(r#"{{"rules":[{{"point":"{point}","abort":true}}]}}"#)
}

fn status_name(status: Option<ServingStatus>) -> String {
    match status {
        Some(s) => s.as_str_name().to_owned(),
        None => "no answer".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_settings_say_the_scenario_token_is_set_but_not_its_value() {
        let env = wallet_env("127.0.0.1:50051".parse().unwrap(), Duration::from_secs(1));
        let printed = settings_lines(&env).join("\n");
        assert!(
            !printed.contains(GATEWAY_TOKEN),
            "the secret is printed: {printed}"
        );
        assert!(
            printed.contains(
                "WALLET_SCENARIO_TOKEN is set (not shown): the walkthrough's own gateway secret (walkthrough::GATEWAY_TOKEN)"
            ),
            "{printed}"
        );
        // The other settings are still printed with their values.
        assert!(printed.contains("LEDGER_ADDR=127.0.0.1:50051"), "{printed}");
        assert!(printed.contains("WALLET_FAULT_INJECTION=true"), "{printed}");
    }

    #[test]
    fn without_a_scenario_token_the_printed_settings_say_nothing_of_it() {
        let env = Env::from_pairs([(wallet::ENV_FAULT_INJECTION, "true")]);
        assert_eq!(settings_lines(&env), ["WALLET_FAULT_INJECTION=true"]);
    }
}
