//! `Server`: tonic services served on the Setup's host, every RPC through
//! [`Rpc`] first, with graceful shutdown and connection age.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tonic::server::NamedService;
use tonic::service::Routes;
use tonic::transport::server::TcpConnectInfo;
use tonic_health::ServingStatus;
use tower_service::Service;

use super::body::{GOING_AWAY, STREAM_AGED};
use super::health::{Health, LIVENESS, READINESS};
use super::rpc::{AGED, Rpc, RpcShared, STOPPED, StreamsEnd};
use super::service::{PeerCertificates, Shared};
use super::settings::{Settings, SettingsError};
use crate::Setup;
use crate::setup::{Accepted, BoxIo, Listener};

/// The name of the `grpc.health.v1` service.
const HEALTH_SERVICE: &str = "grpc.health.v1.Health";

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection whose grace is over (or whose stop was forced)
/// may still take to write the `UNAVAILABLE` answers of its calls and the
/// trailers of its streams before it is closed: the bound a grace's end
/// adds to a stop.
pub(crate) const CLOSE_FLUSH: Duration = Duration::from_millis(100);

/// A gRPC server: the user's tonic services, served on tonic's router and
/// hyper's HTTP/2 connection (the ones tonic's own server uses), at the
/// address of its [`Settings`], through the [`Setup`]'s
/// [`Host`](crate::Host); see the [module](super) docs.
///
/// ```no_run
/// # async fn f<S>(greeter: S) -> Result<(), Box<dyn std::error::Error>>
/// # where
/// #     S: tonic::codegen::Service<http::Request<tonic::body::Body>, Error = std::convert::Infallible, Response = http::Response<tonic::body::Body>>
/// #         + tonic::server::NamedService + Clone + Send + Sync + 'static,
/// #     S::Future: Send + 'static,
/// # {
/// # let _ = &greeter;
/// use humus::grpc::server::{Health, Server, Settings};
///
/// let setup = humus::Setup::new();
/// // Behind a mesh sidecar that terminates TLS: plain text, said.
/// let settings = Settings { addr: ":8443".into(), plaintext: true, ..Settings::default() };
/// let server = Server::new(&setup, settings)?
///     .add_service(greeter)
///     .health(Health::new());
/// server.serve(async { let _ = tokio::signal::ctrl_c().await; }).await?;
/// # Ok(())
/// # }
/// ```
pub struct Server {
    setup: Setup,
    settings: Settings,
    routes: Routes,
    services: Vec<&'static str>,
    health: Option<Health>,
    listener: Option<Listener>,
}

crate::debug::debug_fields!(Server {
    settings,
    services,
    health,
    bound: |s| s.listener.is_some(),
    ..
});

/// Why a [`Server`] stopped serving, or could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The server could not listen on its address. The App takes one the
    /// machine does not have (`AddrNotAvailable`) for a settings error.
    /// It names the setting, and the environment variable it was read from
    /// when it was ([`Settings::env_prefix`]): `listening on 0.0.0.0:50051
    /// (WALLET_ADDR, the server's addr setting): Address already in use`.
    #[error(
        "listening on {addr} ({}the server's addr setting): {source}",
        .var.as_deref().map(|v| format!("{v}, ")).unwrap_or_default()
    )]
    Listen {
        /// The address of the settings.
        addr: String,
        /// The environment variable the address was read from
        /// (`WALLET_ADDR`), if it was read from one.
        var: Option<String>,
        /// The host's error.
        #[source]
        source: io::Error,
    },
}

impl Server {
    /// A server with no service yet, built from `setup` (its host, its
    /// telemetry, its failure injector) and `settings`.
    ///
    /// # Errors
    ///
    /// [`SettingsError`] naming every field that fails its check.
    pub fn new(setup: &Setup, settings: Settings) -> Result<Server, SettingsError> {
        settings.check()?;
        Ok(Server {
            setup: setup.clone(),
            settings,
            routes: Routes::default(),
            services: Vec::new(),
            health: None,
            listener: None,
        })
    }

    /// Serves `service`, a tonic service (a generated `FooServer`, or one
    /// wrapped in the user's own tower layers or interceptors, which run
    /// after humus's).
    pub fn add_service<S>(mut self, service: S) -> Server
    where
        S: Service<http::Request<tonic::body::Body>, Error = Infallible>
            + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S: Service<http::Request<tonic::body::Body>, Response = http::Response<tonic::body::Body>>,
        S::Future: Send + 'static,
    {
        self.services.push(S::NAME);
        self.routes = self.routes.add_service(service);
        self
    }

    /// Also serves `grpc.health.v1` (tonic-health), reporting `health`'s
    /// readiness and liveness.
    pub fn health(mut self, health: Health) -> Server {
        self.health = Some(health);
        self
    }

    /// Listens on the settings' address now, so that
    /// [`local_addr`](Server::local_addr) is known before
    /// [`serve`](Server::serve) (which otherwise listens itself). Dials to
    /// the address wait in the listener's backlog until `serve`.
    ///
    /// # Errors
    ///
    /// [`ServeError::Listen`] when the host cannot listen there.
    pub async fn bind(&mut self) -> Result<(), ServeError> {
        if self.listener.is_none() {
            let listener = self
                .setup
                .host()
                .listen(&self.settings.addr)
                .await
                .map_err(|source| ServeError::Listen {
                    addr: self.settings.addr.clone(),
                    var: self
                        .settings
                        .env_prefix
                        .as_deref()
                        .map(|prefix| crate::app::var_name(prefix, "addr")),
                    source,
                })?;
            self.listener = Some(listener);
        }
        Ok(())
    }

    /// The address the server listens on, once [`bind`](Server::bind) has
    /// run: with port 0 asked for, the port the system picked. `None`
    /// before, and on an in-memory host, where the name is the address.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.as_ref().and_then(|l| l.local_addr)
    }

    /// The settings' address.
    pub fn addr(&self) -> &str {
        &self.settings.addr
    }

    /// Serves until `shutdown` completes, then shuts down gracefully: stops
    /// accepting (the listener is dropped at once), turns readiness
    /// `NOT_SERVING`, sends every connection a GOAWAY, then ends their open
    /// streams with `UNAVAILABLE`, lets the unary calls in flight finish
    /// within [`Settings::shutdown_grace`], and at its end answers the
    /// calls still in flight `UNAVAILABLE` ("the server stopped before the
    /// call ended") and closes their connections, once those answers are
    /// written or at most 100 ms after the grace. Returns once every
    /// connection is closed.
    ///
    /// # Errors
    ///
    /// [`ServeError::Listen`] when the host cannot listen on the address.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), ServeError> {
        self.serve_or_force(shutdown, std::future::pending()).await
    }

    /// [`serve`](Server::serve), whose stop `force` ends at once: when it
    /// completes (after `shutdown` or instead of it), every call still in
    /// flight is answered `UNAVAILABLE` and every connection is closed once
    /// the answers are written, or after [`CLOSE_FLUSH`] at most, with no
    /// grace. The App's forced stop.
    pub(crate) async fn serve_or_force(
        mut self,
        shutdown: impl Future<Output = ()> + Send,
        force: impl Future<Output = ()> + Send,
    ) -> Result<(), ServeError> {
        self.bind().await?;
        let Some(listener) = self.listener.take() else {
            unreachable!("bind sets the listener");
        };
        let mut routes = self.routes;
        let mut health_task = None;
        if let Some(health) = self.health.take() {
            let (reporter, service) = tonic_health::server::health_reporter();
            let mut names: Vec<String> = vec![String::new(), READINESS.to_owned()];
            names.extend(self.services.iter().map(|s| (*s).to_owned()));
            for name in &names {
                reporter
                    .set_service_status(name, ServingStatus::NotServing)
                    .await;
            }
            routes = routes.add_service(service);
            self.services.push(HEALTH_SERVICE);
            health_task = Some((
                tokio::spawn(health.report(reporter.clone(), names.clone())),
                reporter,
                names,
            ));
        }
        let routes = routes.prepare();

        let mut strip = Shared::new(
            self.setup.faults().clone(),
            self.setup.telemetry().shared_propagator(),
        );
        strip.trust = self.settings.trust_scenario.clone().map(|t| t.0);
        let shared = Arc::new(RpcShared::new(
            self.setup.telemetry(),
            strip,
            self.services.clone(),
        ));
        let conn = Arc::new(ConnSettings {
            tls: self.settings.tls.as_ref().map(|tls| {
                let mut tls = (**tls).clone();
                tls.alpn_protocols = vec![b"h2".to_vec()];
                tokio_rustls::TlsAcceptor::from(Arc::new(tls))
            }),
            max_age: self.settings.max_connection_age,
            max_age_grace: self.settings.max_connection_age_grace,
            shutdown_grace: self.settings.shutdown_grace,
            keepalive_interval: self.settings.keepalive_interval,
            keepalive_timeout: self.settings.keepalive_timeout,
            max_header_list_size: self.settings.max_header_list_size,
        });

        let (stop, stopping) = watch::channel(Stop::Serving);
        let mut connections = JoinSet::new();
        let mut force = pin!(force);
        let mut forced = false;
        {
            let mut incoming = listener.incoming;
            let mut shutdown = pin!(shutdown);
            let mut accepts = AcceptPause::default();
            loop {
                tokio::select! {
                    biased;
                    () = &mut shutdown => break,
                    () = &mut force => {
                        forced = true;
                        break;
                    }
                    Some(done) = connections.join_next() => {
                        if let Err(e) = done && e.is_panic() {
                            std::panic::resume_unwind(e.into_panic());
                        }
                    }
                    () = accepts.paused(), if accepts.is_paused() => accepts.resume(),
                    accepted = incoming.next(), if !accepts.is_paused() => match accepted {
                        Some(Ok(accepted)) => {
                            accepts.accepted();
                            connections.spawn(serve_connection(
                                accepted,
                                routes.clone(),
                                Arc::clone(&shared),
                                Arc::clone(&conn),
                                stopping.clone(),
                            ));
                        }
                        // One failed accept; the listener goes on, after
                        // a pause if the process is out of a resource.
                        Some(Err(e)) => accepts.failed(&e),
                        None => break,
                    },
                }
            }
            // The listener is dropped here: a new dial is refused.
        }
        if let Some((task, reporter, names)) = health_task.take() {
            task.abort();
            for name in &names {
                reporter
                    .set_service_status(name, ServingStatus::NotServing)
                    .await;
            }
            reporter
                .set_service_status(LIVENESS, ServingStatus::NotServing)
                .await;
        }
        stop.send_replace(if forced { Stop::Forced } else { Stop::Graceful });
        loop {
            let done = tokio::select! {
                biased;
                done = connections.join_next() => done,
                () = &mut force, if !forced => {
                    forced = true;
                    stop.send_replace(Stop::Forced);
                    continue;
                }
            };
            let Some(done) = done else { break };
            if let Err(e) = done
                && e.is_panic()
            {
                std::panic::resume_unwind(e.into_panic());
            }
        }
        Ok(())
    }
}

/// Where a server's stop is, as its connections see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// Not stopping.
    Serving,
    /// A graceful shutdown, with its grace.
    Graceful,
    /// A stop forced: no grace.
    Forced,
}

/// What every connection of a server is served with.
struct ConnSettings {
    tls: Option<tokio_rustls::TlsAcceptor>,
    max_age: Option<Duration>,
    max_age_grace: Option<Duration>,
    shutdown_grace: Duration,
    keepalive_interval: Option<Duration>,
    keepalive_timeout: Duration,
    max_header_list_size: u32,
}

/// `age` with a jitter of up to 10 % either way (gRFC A9).
fn jittered(age: Duration) -> Duration {
    age.mul_f64(0.9 + 0.2 * fastrand::f64())
}

/// The request extensions of one connection: its addresses, and the
/// client's certificates over TLS.
#[derive(Clone)]
pub(super) struct ConnInfo {
    tcp: Option<TcpConnectInfo>,
    peer: Option<PeerCertificates>,
}

impl ConnInfo {
    pub(super) fn insert(&self, extensions: &mut http::Extensions) {
        if let Some(tcp) = &self.tcp {
            extensions.insert(tcp.clone());
        }
        if let Some(peer) = &self.peer {
            extensions.insert(peer.clone());
        }
    }
}

async fn serve_connection(
    accepted: Accepted,
    routes: Routes,
    shared: Arc<RpcShared>,
    conn: Arc<ConnSettings>,
    mut stopping: watch::Receiver<Stop>,
) {
    let tcp = (accepted.remote_addr.is_some() || accepted.local_addr.is_some()).then_some(
        TcpConnectInfo {
            local_addr: accepted.local_addr,
            remote_addr: accepted.remote_addr,
        },
    );
    let (io, peer): (BoxIo, _) = match &conn.tls {
        None => (accepted.io, None),
        Some(acceptor) => {
            let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(accepted.io));
            let stopped = async { stopping.wait_for(|s| *s != Stop::Serving).await.map(|_| ()) };
            let tls = tokio::select! {
                done = handshake => match done {
                    Ok(Ok(tls)) => tls,
                    // A failed or slow handshake drops the connection.
                    _ => return,
                },
                _ = stopped => return,
            };
            let peer = tls
                .get_ref()
                .1
                .peer_certificates()
                .map(|certs| PeerCertificates::new(certs.to_vec()));
            (Box::new(tls) as BoxIo, peer)
        }
    };
    let streams_end = Arc::new(StreamsEnd::default());
    let calls_end = Arc::new(StreamsEnd::default());
    let service = Rpc {
        inner: routes,
        shared,
        streams_end: Arc::clone(&streams_end),
        calls_end: Arc::clone(&calls_end),
        info: ConnInfo { tcp, peer },
    };
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .keep_alive_interval(conn.keepalive_interval)
        .keep_alive_timeout(conn.keepalive_timeout)
        .max_header_list_size(conn.max_header_list_size);
    let connection = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
    let mut connection = pin!(connection);

    let far = || Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600);
    let age = pin!(tokio::time::sleep_until(match conn.max_age {
        Some(age) => Instant::now() + jittered(age),
        None => far(),
    }));
    let mut age = age;
    let grace = pin!(tokio::time::sleep_until(far()));
    let mut grace = grace;
    // One future for the whole connection, polled only until it is done.
    let mut force_signal = stopping.clone();
    let stop_signal = pin!(async move {
        let _ = stopping.wait_for(|s| *s != Stop::Serving).await;
    });
    let mut stop_signal = stop_signal;
    let force_signal = pin!(async move {
        let _ = force_signal.wait_for(|s| *s == Stop::Forced).await;
    });
    let mut force_signal = force_signal;
    let mut going_away = false;
    let mut stopped = false;
    let mut end_streams = false;
    let mut streams_ended = false;
    // Whether the calls still in flight were answered UNAVAILABLE: the
    // grace is over, and `grace` is then the bound on writing the answers.
    let mut cut = false;
    // What they are answered with: STOPPED once the server stops.
    let mut cut_message = AGED;
    loop {
        tokio::select! {
            biased;
            _ = connection.as_mut() => break,
            // Polled after the connection, which has written the GOAWAY.
            () = async {}, if end_streams => {
                end_streams = false;
                streams_ended = true;
                // Before the stop, only the age's grace ends them.
                streams_end.end_with(if stopped { GOING_AWAY } else { STREAM_AGED });
            }
            () = grace.as_mut(), if going_away => {
                if cut {
                    // Past the grace, and past the bound on the answers.
                    break;
                }
                // The grace is over: the calls still in flight are
                // answered UNAVAILABLE, and the open streams end, with a
                // short bound to write it before the connection closes
                // (it closes as soon as every call is answered).
                cut = true;
                calls_end.end_with(cut_message);
                if !streams_ended {
                    end_streams = true;
                }
                grace.as_mut().reset(Instant::now() + CLOSE_FLUSH);
            }
            () = age.as_mut(), if conn.max_age.is_some() && !going_away => {
                going_away = true;
                connection.as_mut().graceful_shutdown();
                grace.as_mut().reset(match conn.max_age_grace {
                    Some(g) => Instant::now() + g,
                    None => far(),
                });
            }
            () = stop_signal.as_mut(), if !stopped => {
                stopped = true;
                cut_message = STOPPED;
                if !going_away {
                    going_away = true;
                    connection.as_mut().graceful_shutdown();
                }
                // Streams end right after the GOAWAY; unary calls have the
                // shutdown's grace (or what is left of the age's).
                if !streams_ended {
                    end_streams = true;
                }
                let by = Instant::now() + conn.shutdown_grace;
                if !cut && by < grace.deadline() {
                    grace.as_mut().reset(by);
                }
            }
            // Polled after the stop, which is raised with it: no grace.
            () = force_signal.as_mut(), if stopped && !cut => {
                cut = true;
                calls_end.end_with(STOPPED);
                grace.as_mut().reset(Instant::now() + CLOSE_FLUSH);
            }
        }
    }
}

/// The first pause of the accept loop after an accept fails for want of a
/// resource; each failure in a row doubles it, up to [`ACCEPT_PAUSE_MAX`].
/// (Go's `net/http` server: 5 ms to 1 s.)
const ACCEPT_PAUSE_MIN: Duration = Duration::from_millis(5);
/// The longest pause of the accept loop.
const ACCEPT_PAUSE_MAX: Duration = Duration::from_secs(1);

/// The accept loop's pause after a failed accept. An accept that fails for
/// want of a resource (out of file descriptors, `EMFILE` or `ENFILE`, or of
/// memory) fails again at once until a connection closes: accepting again
/// at once would spin a core, so the loop pauses, 5 ms and doubling up to
/// 1 s, while its connections go on being served and a stop is heard at
/// once. A failure of one connection only (reset or aborted before it was
/// accepted) does not pause it; an accepted connection ends the doubling.
#[derive(Default)]
struct AcceptPause {
    /// Until when accepts are paused.
    until: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The next pause.
    next: Option<Duration>,
}

impl AcceptPause {
    fn is_paused(&self) -> bool {
        self.until.is_some()
    }

    /// Completes when the pause ends (never when not paused).
    async fn paused(&mut self) {
        match &mut self.until {
            Some(until) => until.as_mut().await,
            None => std::future::pending().await,
        }
    }

    fn resume(&mut self) {
        self.until = None;
    }

    fn accepted(&mut self) {
        self.next = None;
    }

    fn failed(&mut self, e: &io::Error) {
        if matches!(
            e.kind(),
            io::ErrorKind::ConnectionAborted
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionRefused
                | io::ErrorKind::Interrupted
        ) {
            return;
        }
        let pause = self.next.unwrap_or(ACCEPT_PAUSE_MIN);
        self.next = Some((pause * 2).min(ACCEPT_PAUSE_MAX));
        self.until = Some(Box::pin(tokio::time::sleep(pause)));
    }
}
