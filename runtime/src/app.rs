//! The App: a service's lifecycle, from its telemetry to its exit code.
//!
//! [`App::run`] takes the user's init (which builds the clients and the
//! servers from the [`Setup`]) and runs, in this order:
//!
//! 1. the telemetry function ([`App::telemetry`]), which builds the
//!    providers the Setup records with (without one, the App writes its
//!    lifecycle and its breakers' transitions as plain lines on standard
//!    error);
//! 2. the failure-injection function ([`App::faults`]), after the
//!    telemetry and before init, so that every server and client init
//!    builds takes the injector from the Setup;
//! 3. init, given the Setup; it returns the [`Server`]s to run. A stop
//!    signal while init runs drops its future there (so init stops at its
//!    next `.await`), then runs the on-stop hooks of what it had built
//!    (step 6) and the telemetry's shutdown (step 7), and the App exits 0:
//!    a rollout may stop a service still starting up;
//! 4. every server, each listening on its address, until SIGTERM or
//!    SIGINT (or the signal given to [`App::stop_on`] or
//!    [`App::stop_signals`]), or until a server fails;
//! 5. a graceful shutdown of every server at once (each GOAWAYs its
//!    connections, ends its streams, and lets its unary calls finish
//!    within its grace, then answers those still in flight
//!    `UNAVAILABLE`);
//! 6. the Setup's on-stop hooks ([`Setup::stop`]), once every server has
//!    stopped, so no handler is still calling (bounded by
//!    [`App::stop_timeout`]: a hook that overruns its share of it is
//!    dropped, the others still run, and the App exits 1 naming it); they
//!    also run when the telemetry, failure-injection or init function
//!    fails, for what was built before (a hook the failing function
//!    registered among them);
//! 7. the telemetry's shutdown, which flushes what the providers hold
//!    (also after the failure-injection or init function failed); from
//!    the stop (step 5) to this flush, the App holds every client's
//!    breaker in `humus.circuit.state`, so the final export has the state
//!    of a client a server's handler owned, dropped with its server;
//!
//! and returns the [`Exit`]: 0 after a clean stop, 78 (`EX_CONFIG`) for a
//! settings error, which names every bad field or variable (and for a
//! server address the machine does not have), 1 for any
//! other error, and 130 for a stop a second signal forced (below). A panic is not an error: one in the user's functions (the
//! telemetry, init or a server's task) unwinds out of [`App::run`], so a
//! `main` that returns the [`Exit`] ends as Rust ends a panicking program
//! (exit 101). A stop is clean when every server stopped within its
//! `shutdown_grace`, even if calls were still in flight at its end: their
//! callers are answered `UNAVAILABLE` ("the server stopped before the call
//! ended"), which a retrying client may send again to another server, and
//! their connections closed, at most 100 ms after the grace (see
//! [`Server::serve`]).
//!
//! # A second signal stops at once
//!
//! A stop signal (SIGTERM, SIGINT or Ctrl-C, any of them) that comes while
//! the App is stopping, after a first one (while init ran, or while
//! serving) or after a server failed, forces the stop: what is left of
//! steps 5 to 7 is dropped, at once. One that comes while the hooks run
//! after init failed ends them too, and the App exits with init's error. While the
//! servers are still stopping, their grace ends then: the calls still in
//! flight are answered `UNAVAILABLE` ("the server stopped before the call
//! ended"), as at the end of a grace, and every connection is closed once
//! those answers are written, and in any case [`App::run`] returns at most
//! 200 ms after the signal (the answers are small, and written in well under
//! a millisecond on a healthy connection). The on-stop hooks that have not
//! run are not run, nor is the telemetry's flush (a provider's blocking
//! shutdown already running is not interrupted), and [`App::run`] returns
//! an [`Exit`] of [`EXIT_FORCED`] (130) whose error is
//! [`ErrorKind::Forced`]. So an operator who does not want to wait for
//! `shutdown_grace` presses Ctrl-C twice, and the callers still see
//! `UNAVAILABLE`, not a connection dropped under them (a caller whose
//! answer could not be written in time sees the connection close). The App
//! listens for the signals from the start of [`App::run`] until it has
//! stopped (one that comes while the telemetry or failure-injection
//! function runs stops the App as soon as init starts).
//!
//! These bounds hold for handlers that yield to tokio. A handler that
//! blocks its thread (`std::thread::sleep`, a blocking client, a long
//! computation with no `.await`) cannot be dropped until it returns, nor
//! can work it gave to `spawn_blocking`, so the stop waits for it, past
//! the grace and past a second signal: run blocking work in
//! `spawn_blocking` with a bound of its own, and leave Kubernetes'
//! `terminationGracePeriodSeconds` a margin over `shutdown_grace` (after
//! it, the pod is killed).
//!
//! Settings are read the way Rust services read them: the client's and
//! the server's are `serde::Deserialize`, for `envy`, `figment`, `config`
//! or a file's format; [`deserialize`] (and [`deserialize_strict`], which
//! also refuses misspelled keys) turns a refused value into a settings
//! error naming its path, and [`check_client`] and [`check_server`] run the
//! checks after, naming each bad field. From environment variables,
//! [`from_env`] reads and checks them, naming each bad or missing variable.
//!
//! # Which variable: [`from_env`]
//!
//! `envy` reads a [`Settings`](crate::http::client::Settings) in one line,
//! but its errors name no variable, or one without its prefix, and it
//! stops at the first:
//!
//! ```
//! use humus::http::client::Settings;
//!
//! let read = |name: &str, value: &str| {
//!     let vars = [("RATES_BASE_URL", "http://rates:8080"), (name, value)];
//!     envy::prefixed("RATES_")
//!         .from_iter::<_, Settings>(vars.map(|(k, v)| (k.to_owned(), v.to_owned())))
//! };
//! // No variable named:
//! let err = read("RATES_ATTEMPT_TIMEOUT", "soon").unwrap_err();
//! assert_eq!(err.to_string(), r#"invalid value: string "soon", expected a duration"#);
//! // Named without its prefix:
//! let err = read("RATES_MAX_ATTEMPTS", "three").unwrap_err();
//! assert!(err.to_string().contains("MAX_ATTEMPTS"), "{err}");
//! assert!(!err.to_string().contains("RATES_MAX_ATTEMPTS"), "{err}");
//! ```
//!
//! [`from_env`] reads the same settings from the same variables, runs
//! their checks, and names every bad or missing variable of every group it
//! reads, by its name, in one settings error (exit 78).
//!
//! ```no_run
//! use humus::App;
//! use humus::app::{Error, Exit};
//! use humus::grpc::server::{Health, Server, Settings};
//!
//! #[tokio::main]
//! async fn main() -> Exit {
//!     App::new()
//!         .run(|setup| async move {
//!             // Behind a mesh sidecar that terminates TLS: plain text, said.
//!             let settings = Settings { addr: ":8443".into(), plaintext: true, ..Settings::default() };
//!             humus::app::check_server(&settings)?; // exit 78 when bad
//!             let server = Server::new(&setup, settings)?.health(Health::new());
//!             Ok::<_, Error>(vec![server])
//!         })
//!         .await
//! }
//! ```

use std::future::Future;
use std::pin::{Pin, pin};

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::{Stream, StreamExt as _};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::fault::Injector;
use crate::grpc::server::{ServeError, Server};
use crate::telemetry::{HeldBreakers, LineLogs, Telemetry};
pub use crate::tls::{crypto_provider, install_crypto_provider};

mod env;
mod error;
mod lifecycle;
mod settings;
use crate::{Host, Setup};
pub(crate) use env::var_name;
pub use env::{Env, EnvError, VarError, from_env};
pub use error::{BoxError, EXIT_CONFIG, EXIT_FAILURE, EXIT_FORCED, Error, ErrorKind, Exit};
use lifecycle::Lifecycle;
pub use settings::{
    ReadError, check_client, check_http_client, check_server, deserialize, deserialize_strict,
};
#[cfg(feature = "kafka")]
pub use settings::{check_kafka_consumer, check_kafka_producer};
#[cfg(feature = "rabbitmq")]
pub use settings::{check_rabbitmq_consumer, check_rabbitmq_publisher};

/// The telemetry an [`App`] records with, and how to shut its providers
/// down: what the function given to [`App::telemetry`] builds.
pub struct Providers {
    telemetry: Telemetry,
    shutdown: Vec<Box<dyn FnOnce() -> Result<(), BoxError> + Send>>,
}

crate::debug::debug_fields!(Providers {
    telemetry,
    shutdown: |p| p.shutdown.len()
});

impl Providers {
    /// The App records with `telemetry`.
    pub fn new(telemetry: Telemetry) -> Providers {
        Providers {
            telemetry,
            shutdown: Vec::new(),
        }
    }

    /// Runs `shutdown` as the App's last step, after the on-stop hooks:
    /// an SDK provider's `shutdown`, which flushes what it holds
    /// (`move || tracer_provider.shutdown().map_err(Into::into)`). It may
    /// block; several run in the order given. Its error is not the App's:
    /// the App has stopped by then.
    pub fn on_shutdown(
        mut self,
        shutdown: impl FnOnce() -> Result<(), BoxError> + Send + 'static,
    ) -> Providers {
        self.shutdown.push(Box::new(shutdown));
        self
    }

    /// What an App given no telemetry function records with: log records
    /// as plain lines on standard error ([`LineLogs`]), nothing else.
    fn lines() -> Providers {
        Providers::new(
            Telemetry::builder()
                .logger_provider(LineLogs::stderr())
                .build(),
        )
    }

    async fn shut_down(self) {
        for shutdown in self.shutdown {
            // A provider's own blocking flush runs off the runtime's
            // threads; its failure cannot change how the App ended.
            let _ = tokio::task::spawn_blocking(shutdown).await;
        }
    }
}

/// Why an App whose failure injection is on, but whose telemetry's
/// propagator does not carry W3C baggage, does not start.
const NO_BAGGAGE_PROPAGATOR: &str = "failure injection is on, but the telemetry's propagator does not read or write the W3C `baggage` header, where a request's failure scenario travels: no scenario would reach this service or go on to its dependencies. Give App::telemetry a Telemetry whose propagator includes W3C Baggage (a TextMapCompositePropagator of opentelemetry_sdk's TraceContextPropagator and BaggagePropagator), or leave failure injection off";

/// Whether `telemetry`'s propagator reads and writes the `baggage` header.
fn carries_baggage(telemetry: &Telemetry) -> bool {
    telemetry
        .propagator()
        .fields()
        .any(|field| field.eq_ignore_ascii_case("baggage"))
}

type TelemetryFn = Box<dyn FnOnce(&Setup) -> Result<Providers, Error> + Send>;
type FaultsFn = Box<dyn FnOnce(&Setup) -> Result<Injector, Error> + Send>;
/// The stop signals: each item is one.
type StopSignals = Pin<Box<dyn Stream<Item = ()> + Send>>;

/// A service's lifecycle; see the [module](self) docs.
pub struct App {
    setup: Setup,
    telemetry: Option<TelemetryFn>,
    faults: Option<FaultsFn>,
    stop: Option<StopSignals>,
    stop_timeout: Duration,
}

crate::debug::debug_fields!(App {
    setup,
    telemetry: |a| a.telemetry.is_some(),
    faults: |a| a.faults.is_some(),
    stop_on: |a| a.stop.is_some(),
    stop_timeout,
});

impl Default for App {
    fn default() -> Self {
        App::new()
    }
}

impl App {
    /// An App on the real world ([`OsHost`](crate::OsHost)), with no-op
    /// telemetry and failure injection off until told otherwise, stopped
    /// by SIGTERM or SIGINT, and at once by a second one while it stops.
    pub fn new() -> App {
        App {
            setup: Setup::new(),
            telemetry: None,
            faults: None,
            stop: None,
            stop_timeout: Duration::from_secs(10),
        }
    }

    /// Dials, listens and reads files through `host` (a test's
    /// `humus::testing::Host`).
    pub fn host(mut self, host: impl Host) -> App {
        self.setup = self.setup.with_host(host);
        self
    }

    /// Builds the App's telemetry with `build`, the App's first step.
    ///
    /// Without it (or when it fails), the App records only log records,
    /// as plain lines on standard error ([`LineLogs`]): each server it
    /// serves (`INFO humus::app: serving on 127.0.0.1:50051`), a stop
    /// signal, its exit code and why, with the error that ended it
    /// (`INFO humus::app: exit 0 (stopped)`, `ERROR humus::app: exit 78
    /// (a bad setting): LEDGER_ADDR: not set`), and its clients' breakers' transitions (`WARN
    /// humus::client: circuit breaker changed from closed to open
    /// server.address=ledger ...`). Given providers, the same are
    /// OpenTelemetry log records of its logger provider (the exit's
    /// comes after the flush, so an SDK provider drops it), with no line;
    /// given providers without a logger provider, they are still lines
    /// (give OpenTelemetry's `NoopLoggerProvider` for none).
    ///
    /// With failure injection on ([`App::faults`]), the telemetry's
    /// propagator must carry W3C baggage, where scenarios travel: an App
    /// whose propagator does not (none given is a no-op one) exits 78
    /// saying so, before init.
    pub fn telemetry(
        mut self,
        build: impl FnOnce(&Setup) -> Result<Providers, Error> + Send + 'static,
    ) -> App {
        self.telemetry = Some(Box::new(build));
        self
    }

    /// Builds the App's failure injector with `build`, after the telemetry
    /// and before init. Without it, injection is off, and a caller's
    /// scenario goes on with its baggage to the App's dependencies: an App
    /// whose dependencies trust it, but which takes no part in failure
    /// injection, builds [`Injector::strip_only`]
    /// ([design](crate::design::failure_injection#trust-and-stripping)).
    pub fn faults(
        mut self,
        build: impl FnOnce(&Setup) -> Result<Injector, Error> + Send + 'static,
    ) -> App {
        self.faults = Some(Box::new(build));
        self
    }

    /// Stops the App when `stop` completes, instead of at SIGTERM or
    /// SIGINT (for tests). It is one signal: no second one can force the
    /// stop ([`stop_signals`](App::stop_signals) can).
    pub fn stop_on(mut self, stop: impl Future<Output = ()> + Send + 'static) -> App {
        self.stop = Some(Box::pin(futures_util::stream::once(stop)));
        self
    }

    /// Takes each item of `signals` as a stop signal, instead of SIGTERM
    /// and SIGINT (for tests, or a service's own signals): the first stops
    /// the App gracefully, and one while it is stopping forces the stop
    /// (see the [module](self) docs). Once `signals` ends, no other signal
    /// comes.
    pub fn stop_signals(mut self, signals: impl Stream<Item = ()> + Send + 'static) -> App {
        self.stop = Some(Box::pin(signals));
        self
    }

    /// How long the on-stop hooks may run, together (default 10 s). They
    /// run one at a time, and each may take its share: the time left
    /// divided by the hooks left to run, itself among them, so the time a
    /// quick hook (a client's connection close) leaves goes to the ones
    /// after it. A hook still running at the end of its share is dropped
    /// and the next one runs; once every hook has run or been dropped, the
    /// App shuts its telemetry down and exits 1, with an error naming each
    /// hook dropped (unless the stop already had an error of its own,
    /// which it keeps). [`Setup::on_stop_named`] names a hook; one
    /// registered with [`Setup::on_stop`] is named by the order it was
    /// registered in (`#1` the first).
    ///
    /// So give it what the slowest hook needs times the number of hooks,
    /// or register the slow hook first: it runs last, and has whatever
    /// time the others left.
    pub fn stop_timeout(mut self, timeout: Duration) -> App {
        self.stop_timeout = timeout;
        self
    }

    /// Runs the App's lifecycle with `init`; see the [module](self) docs,
    /// which also say how a second stop signal ends it at once (exit
    /// [`EXIT_FORCED`]).
    ///
    /// First, unless the process already has one, it installs rustls's
    /// ring provider as the process-wide default, so that a plain
    /// `reqwest::Client::new()` elsewhere in the service works: humus
    /// builds reqwest with no provider of reqwest's own choosing, and Cargo
    /// turns that on for the service's reqwest too.
    pub async fn run<F, Fut>(self, init: F) -> Exit
    where
        F: FnOnce(Setup) -> Fut,
        Fut: Future<Output = Result<Vec<Server>, Error>>,
    {
        let life = std::sync::OnceLock::new();
        let exit = self.run_recorded(init, &life).await;
        if let Some(life) = life.get() {
            life.exited(&exit);
        }
        exit
    }

    /// [`App::run`], recording the lifecycle with the telemetry's logger
    /// put in `life` once the telemetry is built.
    async fn run_recorded<F, Fut>(self, init: F, life: &std::sync::OnceLock<Lifecycle>) -> Exit
    where
        F: FnOnce(Setup) -> Fut,
        Fut: Future<Output = Result<Vec<Server>, Error>>,
    {
        let App {
            setup,
            telemetry,
            faults,
            stop,
            stop_timeout,
        } = self;
        // The signals are listened for from the start, so that none is
        // missed, nor ends the process as an unhandled one would: a stop
        // signal before or while init runs drops init and runs the hooks of
        // what it built.
        let mut signals = stop.unwrap_or_else(os_signals);
        // A plain reqwest client elsewhere in the service needs a
        // process-wide rustls provider (humus builds reqwest with none of
        // its own): ring, the one humus uses, unless the service chose one.
        install_crypto_provider();
        // A failing telemetry or failure-injection function ends the App
        // as a failing init does: the hooks registered so far run, then
        // the telemetry's shutdown (none when it was the telemetry's
        // function that failed).
        let (providers, mut failed) = match telemetry.map(|build| build(&setup)) {
            Some(Ok(providers)) => (providers, None),
            Some(Err(e)) => (Providers::lines(), Some(e)),
            None => (Providers::lines(), None),
        };
        let telemetry = providers.telemetry.or_line_logs();
        let setup = setup.with_telemetry(telemetry.clone());
        let life = life.get_or_init(|| Lifecycle::new(&telemetry));
        let setup = match faults {
            Some(build) if failed.is_none() => match build(&setup) {
                Ok(injector) if injector.is_on() && !carries_baggage(&telemetry) => {
                    failed = Some(Error::settings(NO_BAGGAGE_PROPAGATOR));
                    setup
                }
                Ok(injector) => setup.with_faults(injector),
                Err(e) => {
                    failed = Some(e);
                    setup
                }
            },
            _ => setup,
        };
        let mut listening = true;
        let initialized = match failed {
            Some(e) => Some(Err(e)),
            None => {
                let init = init(setup.clone());
                let mut init = pin!(init);
                loop {
                    tokio::select! {
                        // A signal that came before init is seen before init
                        // starts.
                        biased;
                        signal = signals.next(), if listening => match signal {
                            Some(()) => {
                                life.stopping(false);
                                break None;
                            }
                            None => listening = false,
                        },
                        result = &mut init => break Some(result),
                    }
                }
            }
        };
        let servers = match initialized {
            Some(Ok(servers)) => servers,
            outcome => {
                // A function failed, or a stop signal came while init ran:
                // the hooks of what was built, then the telemetry's shutdown. A signal
                // meanwhile ends them at once, as it would after serving;
                // an init's error is kept as the reason.
                let (exit, forced) = match outcome {
                    Some(Err(e)) => (Exit::failed(e), None),
                    _ => (Exit::clean(), Some(Exit::failed(Error::forced(false)))),
                };
                let stopped = async {
                    let hooks = stop_hooks(&setup, stop_timeout).await;
                    providers.shut_down().await;
                    hooks
                };
                let mut stopped = pin!(stopped);
                loop {
                    tokio::select! {
                        // Init's error, else the hooks' overrun, if any.
                        hooks = &mut stopped => return match (exit.error, hooks) {
                            (None, Err(e)) => Exit::failed(e),
                            (error, _) => Exit { error, ..exit },
                        },
                        signal = signals.next(), if listening => match signal {
                            Some(()) => return forced.unwrap_or(exit),
                            None => listening = false,
                        },
                    }
                }
            }
        };
        // No receiver yet: `serve` subscribes once its servers listen. A
        // stop (or a forced one) that comes before must still be there
        // then, so each is sent with `send_replace`, which keeps the value
        // whether or not anyone receives (`send` drops it when no receiver
        // exists, and the App would serve on, deaf to that stop).
        let stopping = watch::Sender::new(false);
        let forcing = watch::Sender::new(false);
        let serving = AtomicBool::new(true);
        let stopped = async {
            // `held`: every client's breaker, kept in `humus.circuit.state`
            // from the stop to the flush, so the final export has the
            // state of a client a server's handler held (dropped with the
            // server before that last collection).
            let (result, held) = serve(servers, &stopping, &forcing, life, &telemetry).await;
            serving.store(false, Ordering::SeqCst);
            if *forcing.borrow() {
                // Forced while the servers stopped: no hook, no flush.
                return Err(Error::forced(true));
            }
            let hooks = stop_hooks(&setup, stop_timeout).await;
            providers.shut_down().await;
            drop(held);
            result.and(hooks)
        };
        let mut stopped = pin!(stopped);
        // Once forced while the servers stop: when the App returns at the
        // latest.
        let forced_by = pin!(tokio::time::sleep(Duration::ZERO));
        let mut forced_by = forced_by;
        let mut forced = false;
        let result = loop {
            tokio::select! {
                result = &mut stopped => break result,
                () = forced_by.as_mut(), if forced => return Exit::failed(Error::forced(true)),
                signal = signals.next(), if listening && !forced => match signal {
                    // A signal while the App is already stopping (after a
                    // first one, or a server's failure) forces the stop.
                    // While the servers stop, they answer the calls in
                    // flight UNAVAILABLE and close their connections, within
                    // FORCED_STOP; after, what is left of the stop (the
                    // hooks, the flush) is dropped here, at once.
                    Some(()) if *stopping.borrow() => {
                        life.stopping(true);
                        if !serving.load(Ordering::SeqCst) {
                            return Exit::failed(Error::forced(false));
                        }
                        forcing.send_replace(true);
                        forced = true;
                        forced_by
                            .as_mut()
                            .reset(tokio::time::Instant::now() + FORCED_STOP);
                    }
                    Some(()) => {
                        life.stopping(false);
                        stopping.send_replace(true);
                    }
                    None => listening = false,
                },
            }
        };
        match result {
            Ok(()) => Exit::clean(),
            Err(e) => Exit::failed(e),
        }
    }
}

/// Runs the on-stop hooks, for at most `timeout` altogether, each within
/// its share ([`Setup::stop_within`]).
///
/// # Errors
///
/// When a hook overran its share (it was dropped, and the others ran): an
/// error naming each such hook, with the bound.
async fn stop_hooks(setup: &Setup, timeout: Duration) -> Result<(), Error> {
    let dropped = setup.stop_within(timeout).await;
    if dropped.is_empty() {
        return Ok(());
    }
    let (hooks, its, was) = if dropped.len() == 1 {
        ("hook", "its share", "was")
    } else {
        ("hooks", "their shares", "were")
    };
    Err(Error::other(format!(
        "on-stop {hooks} {} overran {its} of the App's stop_timeout ({}) and {was} dropped; every other hook ran",
        dropped.join(", "),
        humantime_serde::re::humantime::format_duration(timeout)
    )))
}

/// How long a forced stop may take, at most, while the servers answer the
/// calls in flight `UNAVAILABLE` and close their connections: the
/// servers' bound on writing those answers, and as much again for the
/// connections' tasks to end.
const FORCED_STOP: Duration = Duration::from_millis(200);

/// Runs every server until `stopping` turns true (at a stop signal) or a
/// server fails (which turns it true), then shuts them all down and waits
/// for each; a server whose stop `forcing` turns true stops at once.
///
/// Also returns the breakers of `telemetry`'s clients as the stop began
/// ([`Telemetry::hold_breakers`]), held: a client that a server's handler
/// owns is dropped with the server, and its breaker would be gone from
/// `humus.circuit.state` before the telemetry's final collection.
async fn serve(
    mut servers: Vec<Server>,
    stopping: &watch::Sender<bool>,
    forcing: &watch::Sender<bool>,
    life: &Lifecycle,
    telemetry: &Telemetry,
) -> (Result<(), Error>, HeldBreakers) {
    // Every server listens before any serves: an address in use fails the
    // App before it answers anything.
    for server in &mut servers {
        if let Err(e) = server.bind().await {
            return (Err(e.into()), HeldBreakers::default());
        }
    }
    let mut running = JoinSet::new();
    for server in servers {
        if let Some(addr) = server.local_addr() {
            life.serving(addr);
        }
        let mut stopping = stopping.subscribe();
        let mut forcing = forcing.subscribe();
        running.spawn(server.serve_or_force(
            async move {
                let _ = stopping.wait_for(|s| *s).await;
            },
            async move {
                let _ = forcing.wait_for(|s| *s).await;
            },
        ));
    }
    let mut stop = stopping.subscribe();
    let mut failure = None;
    tokio::select! {
        _ = stop.wait_for(|s| *s) => {}
        Some(done) = running.join_next() => failure = joined(done),
    }
    stopping.send_replace(true);
    // Before any server ends, and drops what its handlers hold.
    let held = telemetry.hold_breakers();
    while let Some(done) = running.join_next().await {
        if let Some(e) = joined(done) {
            failure.get_or_insert(e);
        }
    }
    let result = match failure {
        Some(e) => Err(e),
        None => Ok(()),
    };
    (result, held)
}

fn joined(done: Result<Result<(), ServeError>, tokio::task::JoinError>) -> Option<Error> {
    match done {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.into()),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Some(Error::other(e)),
    }
}

/// SIGTERM and SIGINT, each delivery one item, registered now (Ctrl-C
/// where there are no Unix signals, or where they cannot be registered).
fn os_signals() -> StopSignals {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        if let (Ok(term), Ok(int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            let each = |s: Signal| {
                futures_util::stream::unfold(
                    s,
                    |mut s| async move { s.recv().await.map(|()| ((), s)) },
                )
            };
            return Box::pin(futures_util::stream::select(each(term), each(int)));
        }
    }
    Box::pin(futures_util::stream::unfold((), |()| async {
        tokio::signal::ctrl_c().await.ok().map(|()| ((), ()))
    }))
}
