//! `Setup`: what every humus client is built from, and the [`Host`] it
//! reaches the world through ([design](crate::design::client#one-client-per-dependency)).

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};

use crate::{fault, telemetry};

/// A byte stream to a peer: what [`Host::dial`] connects.
///
/// Implemented for every `AsyncRead + AsyncWrite + Send + Unpin + 'static`
/// type, such as a `tokio::net::TcpStream` or a `tokio::io::DuplexStream`.
pub trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T> Io for T where T: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

/// A boxed [`Io`], as a [`Host`] returns it.
pub type BoxIo = Box<dyn Io>;

/// The future [`Host::dial`] returns.
pub type DialFuture<'a> = Pin<Box<dyn Future<Output = io::Result<BoxIo>> + Send + 'a>>;

/// One connection a [`Listener`] accepted: its byte stream and, on a real
/// network, the peer's and the local socket addresses.
pub struct Accepted {
    /// The connection's byte stream.
    pub io: BoxIo,
    /// The peer's address; `None` on an in-memory network.
    pub remote_addr: Option<SocketAddr>,
    /// The local address the connection was accepted on; `None` on an
    /// in-memory network.
    pub local_addr: Option<SocketAddr>,
}

crate::debug::debug_fields!(Accepted {
    remote_addr,
    local_addr,
    ..
});

/// What listens on one address of a [`Host`]: a stream of the connections
/// made to it. Dropping it stops listening (a new dial is refused);
/// connections it accepted stay open.
pub struct Listener {
    /// The address it listens on, as the host resolved it: with port 0
    /// asked for, the port the system picked; `None` on an in-memory
    /// network, where the name is the address.
    pub local_addr: Option<SocketAddr>,
    /// The connections, in the order they arrive. An error is one failed
    /// accept, after which the stream goes on.
    pub incoming: Pin<Box<dyn futures_util::Stream<Item = io::Result<Accepted>> + Send>>,
}

impl Listener {
    /// A listener on a TCP socket that is already listening: one a
    /// supervisor passed to the process (systemd's socket activation), or
    /// one handed over from a server that is shutting down, so that a new
    /// server takes an address with no moment in which a dial to it is
    /// refused. [`OsHost`]'s listeners are made so: each accepted
    /// connection has `TCP_NODELAY` set.
    ///
    /// A [`Host`] that serves such sockets returns this from
    /// [`Host::listen`]. Dropping the listener closes its file descriptor;
    /// the socket stays open, with the connections waiting in its backlog,
    /// while another descriptor of it (a `try_clone`) is open.
    pub fn tcp(listener: tokio::net::TcpListener) -> Listener {
        let local_addr = listener.local_addr().ok();
        let incoming = futures_util::stream::unfold(listener, |listener| async move {
            let accepted = listener.accept().await.map(|(stream, remote)| {
                let _ = stream.set_nodelay(true);
                let local_addr = stream.local_addr().ok();
                Accepted {
                    io: Box::new(stream) as BoxIo,
                    remote_addr: Some(remote),
                    local_addr,
                }
            });
            Some((accepted, listener))
        });
        Listener {
            local_addr,
            incoming: Box::pin(incoming),
        }
    }
}

crate::debug::debug_fields!(Listener { local_addr, .. });

/// The future [`Host::listen`] returns.
pub type ListenFuture<'a> = Pin<Box<dyn Future<Output = io::Result<Listener>> + Send + 'a>>;

/// What a service reaches the world through: it dials addresses, listens
/// on them and reads files. A [`Setup`] holds one; the gRPC client dials
/// through it, the gRPC server and the App listen through it, and nothing
/// else, so a test can run a gRPC service and its gRPC dependencies on an
/// in-memory network (`humus::testing::Host`, feature `testing`). The
/// clients built on another library open their own connections and do not
/// go through it: the HTTP client (reqwest), Kafka (librdkafka) and
/// RabbitMQ (amqprs); a test runs those against a server on 127.0.0.1
/// (for Kafka, librdkafka's mock cluster, as the `kafka` module says).
///
/// Design: [one client per dependency](crate::design::client#one-client-per-dependency),
/// [testing](crate::design::client#testing).
pub trait Host: Send + Sync + fmt::Debug + 'static {
    /// Connects a byte stream to `addr`, a `host:port` with no scheme
    /// (`carts:9090`, `10.0.0.7:9090`, `[::1]:9090`). A name is resolved
    /// at each dial, so a new dial finds addresses the last one did not.
    ///
    /// # Errors
    ///
    /// The I/O error of the dial: the name does not resolve, or no address
    /// accepts.
    fn dial<'a>(&'a self, addr: &'a str) -> DialFuture<'a>;

    /// Reads the whole file at `path`.
    ///
    /// # Errors
    ///
    /// The I/O error of the read, such as [`io::ErrorKind::NotFound`].
    fn read_file(&self, path: &Path) -> io::Result<Vec<u8>>;

    /// Listens on `addr`, a `host:port` (`127.0.0.1:8443`, `[::1]:0`), or
    /// `:port` for every address of the machine: what a humus server
    /// serves on. The default refuses, for a host that only dials.
    ///
    /// # Errors
    ///
    /// The I/O error of the bind, such as [`io::ErrorKind::AddrInUse`];
    /// [`io::ErrorKind::Unsupported`] from the default.
    fn listen<'a>(&'a self, addr: &'a str) -> ListenFuture<'a> {
        Box::pin(async move {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("this host cannot listen (on {addr})"),
            ))
        })
    }
}

/// The operating system's network and file system.
///
/// [`dial`](Host::dial) resolves the name with tokio's `lookup_host` at
/// each dial, tries the addresses in the order the lookup returns them, and
/// keeps the first connection that succeeds. An IPv6 address may carry its
/// zone, an interface's name or index (`[fe80::1%eth0]:50051`). It reads no proxy variable
/// (`HTTPS_PROXY` and the rest) and uses no resolver of the gRPC stack.
///
/// Design: [the connection](crate::design::client#the-connection).
#[derive(Clone, Copy, Debug, Default)]
pub struct OsHost;

impl OsHost {
    async fn dial_addr(addr: &str) -> io::Result<BoxIo> {
        let addrs = resolve(addr).await?;
        let mut last = None;
        for a in addrs {
            match tokio::net::TcpStream::connect(a).await {
                Ok(stream) => {
                    // Small gRPC frames go out at once; a failure to set it
                    // costs latency, not correctness.
                    let _ = stream.set_nodelay(true);
                    return Ok(Box::new(stream));
                }
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{addr} resolves to no address"),
            )
        }))
    }
}

/// The socket addresses of `addr`, a `host:port`. An IPv6 address with a
/// zone that names an interface (`[fe80::1%eth0]:50051`), which Rust's
/// parser does not read, is resolved as its host and its port, so the
/// system reads the interface's name.
async fn resolve(addr: &str) -> io::Result<Vec<SocketAddr>> {
    if let Some(rest) = addr.strip_prefix('[')
        && let Some((host, port)) = rest.split_once("]:")
        && host.contains('%')
        && let Ok(port) = port.parse::<u16>()
    {
        return Ok(tokio::net::lookup_host((host, port)).await?.collect());
    }
    Ok(tokio::net::lookup_host(addr).await?.collect())
}

impl Host for OsHost {
    fn dial<'a>(&'a self, addr: &'a str) -> DialFuture<'a> {
        Box::pin(Self::dial_addr(addr))
    }

    fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    /// Binds a TCP listener with tokio; `:port` binds every address, IPv6
    /// and IPv4 alike (one dual-stack socket on `[::]:port`), or every
    /// IPv4 address (`0.0.0.0:port`) on a machine with no IPv6. Each
    /// accepted connection has `TCP_NODELAY` set.
    fn listen<'a>(&'a self, addr: &'a str) -> ListenFuture<'a> {
        Box::pin(async move {
            if let Some(port) = addr.strip_prefix(':')
                && let Ok(port) = port.parse::<u16>()
            {
                return Ok(Listener::tcp(listen_every_address(port)?));
            }
            let bind = match addr.strip_prefix(':') {
                Some(port) => format!("0.0.0.0:{port}"),
                None => addr.to_owned(),
            };
            Ok(Listener::tcp(tokio::net::TcpListener::bind(&bind).await?))
        })
    }
}

/// A listener on every address of the machine at `port`: one IPv6 socket
/// that takes IPv4 connections too (whatever the system's `bindv6only`),
/// as Go's `:port` does; IPv4 alone where the machine has no IPv6 (the
/// socket cannot be made, or `::` cannot be bound).
fn listen_every_address(port: u16) -> io::Result<tokio::net::TcpListener> {
    let no_ipv6 = |e: &io::Error| {
        // EAFNOSUPPORT (97 on Linux), or an address not available.
        e.raw_os_error() == Some(97)
            || matches!(
                e.kind(),
                io::ErrorKind::AddrNotAvailable | io::ErrorKind::Unsupported
            )
    };
    match dual_stack(std::net::Ipv6Addr::UNSPECIFIED, port) {
        Ok(listener) => tokio::net::TcpListener::from_std(listener),
        Err(e) if no_ipv6(&e) => {
            let v4 = std::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, port))?;
            v4.set_nonblocking(true)?;
            tokio::net::TcpListener::from_std(v4)
        }
        Err(e) => Err(e),
    }
}

/// A listening IPv6 socket on `ip` and `port` that takes IPv4
/// connections too (`IPV6_V6ONLY` off), non-blocking.
fn dual_stack(ip: std::net::Ipv6Addr, port: u16) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};

    let socket = Socket::new(Domain::IPV6, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_only_v6(false)?;
    // As tokio's bind does on Unix: a restarted server rebinds at once.
    #[cfg(unix)]
    socket.set_reuse_address(true)?;
    socket.bind(&SocketAddr::from((ip, port)).into())?;
    socket.listen(1024)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// The on-stop hooks not yet run, and how many were ever registered (an
/// unnamed hook is named by its place in that count).
#[derive(Default)]
struct Hooks {
    registered: usize,
    waiting: Vec<Hook>,
}

/// An on-stop hook, with the name it is reported by when it overruns.
struct Hook {
    name: String,
    run: Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>,
}

/// What a service's clients are built from: its telemetry, its failure
/// injector, the [`Host`] it dials through, and its on-stop hooks.
///
/// A `Setup` is a cheap handle: clones share the host and the hooks.
/// [`Setup::new`] (and `Default`) is the real world: [`OsHost`], no-op
/// telemetry, failure injection off.
///
/// Design: [one client per dependency](crate::design::client#one-client-per-dependency).
#[derive(Clone)]
pub struct Setup {
    telemetry: telemetry::Telemetry,
    faults: fault::Injector,
    host: Arc<dyn Host>,
    hooks: Arc<Mutex<Hooks>>,
}

impl fmt::Debug for Setup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hooks = self
            .hooks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .waiting
            .len();
        f.debug_struct("Setup")
            .field("telemetry", &self.telemetry)
            .field("faults", &self.faults)
            .field("host", &self.host)
            .field("on_stop_hooks", &hooks)
            .finish()
    }
}

impl Default for Setup {
    fn default() -> Self {
        Setup::new()
    }
}

impl Setup {
    /// A setup of the real world: [`OsHost`], no-op telemetry, failure
    /// injection off, no on-stop hooks.
    pub fn new() -> Setup {
        Setup {
            telemetry: telemetry::Telemetry::default(),
            faults: fault::Injector::default(),
            host: Arc::new(OsHost),
            hooks: Arc::default(),
        }
    }

    /// This setup, dialling and reading files through `host` instead.
    pub fn with_host(self, host: impl Host) -> Setup {
        Setup {
            host: Arc::new(host),
            ..self
        }
    }

    /// This setup, recording with `telemetry` instead.
    pub fn with_telemetry(self, telemetry: telemetry::Telemetry) -> Setup {
        Setup { telemetry, ..self }
    }

    /// This setup, evaluating failure-injection points with `faults`
    /// instead.
    pub fn with_faults(self, faults: fault::Injector) -> Setup {
        Setup { faults, ..self }
    }

    /// The host every client of this setup dials through.
    pub fn host(&self) -> &Arc<dyn Host> {
        &self.host
    }

    /// The telemetry every client of this setup records with.
    pub fn telemetry(&self) -> &telemetry::Telemetry {
        &self.telemetry
    }

    /// The failure injector every client of this setup evaluates.
    pub fn faults(&self) -> &fault::Injector {
        &self.faults
    }

    /// Registers `hook` to run at [`stop`](Setup::stop). Hooks run one at a
    /// time, the last registered first, so what was built last is closed
    /// first. A [`Client`](crate::grpc::client::Client) registers the close
    /// of its connection here.
    ///
    /// An App bounds the hooks by its
    /// [`stop_timeout`](crate::App::stop_timeout), and names a hook that
    /// overruns its share by the order it was registered in (`#2`, the
    /// second registered on this setup); [`on_stop_named`](Setup::on_stop_named)
    /// gives it a name instead.
    pub fn on_stop<F, Fut>(&self, hook: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.push_hook(None, hook);
    }

    /// [`on_stop`](Setup::on_stop), with the `name` an App's error gives
    /// the hook if it overruns its share of the
    /// [`stop_timeout`](crate::App::stop_timeout) (`flushing the
    /// ledger's cache`).
    pub fn on_stop_named<F, Fut>(&self, name: impl Into<String>, hook: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.push_hook(Some(name.into()), hook);
    }

    fn push_hook<F, Fut>(&self, name: Option<String>, hook: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let mut hooks = self.hooks.lock().unwrap_or_else(PoisonError::into_inner);
        let name = name.unwrap_or_else(|| format!("#{}", hooks.registered + 1));
        hooks.registered += 1;
        hooks.waiting.push(Hook {
            name,
            run: Box::new(move || Box::pin(hook())),
        });
    }

    /// Runs every on-stop hook registered so far, in reverse order of
    /// registration, each to its end before the next. Each hook runs once:
    /// a second `stop` runs only hooks registered since the first.
    ///
    /// Call it after every service of the process has stopped: once a
    /// client's hook has run, its calls fail `Canceled`.
    ///
    /// # Panics
    ///
    /// If a hook panics: the panic goes on, and the hooks after it do not
    /// run.
    pub async fn stop(&self) {
        for hook in self.take_hooks() {
            (hook.run)().await;
        }
    }

    /// Runs every on-stop hook registered so far, as [`stop`](Setup::stop)
    /// does, within `timeout` altogether: each hook may take its share of
    /// the time left, that time divided by the hooks left to run (itself
    /// among them), so that a hook that finishes early leaves its time to
    /// the ones after it. A hook still running at the end of its share is
    /// dropped, and the next one runs.
    ///
    /// Returns the names of the hooks dropped, in the order they ran.
    ///
    /// # Panics
    ///
    /// As [`stop`](Setup::stop).
    pub(crate) async fn stop_within(&self, timeout: Duration) -> Vec<String> {
        let hooks = self.take_hooks();
        let mut time_left = timeout;
        let mut dropped = Vec::new();
        let count = hooks.len();
        for (ran, hook) in hooks.into_iter().enumerate() {
            let started = tokio::time::Instant::now();
            // `count - ran` counts this hook: never zero.
            let share = time_left / u32::try_from(count - ran).unwrap_or(u32::MAX);
            if tokio::time::timeout(share, (hook.run)()).await.is_err() {
                dropped.push(hook.name);
            }
            time_left = time_left.saturating_sub(started.elapsed());
        }
        dropped
    }

    /// The hooks not yet run, the last registered first; none are left.
    fn take_hooks(&self) -> Vec<Hook> {
        let waiting = std::mem::take(
            &mut self
                .hooks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .waiting,
        );
        waiting.into_iter().rev().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stop_runs_hooks_in_reverse_once() {
        let setup = Setup::new();
        let order = Arc::new(Mutex::new(Vec::new()));
        for i in 0..3 {
            let order = order.clone();
            setup.on_stop(move || async move { order.lock().unwrap().push(i) });
        }
        // A clone shares the hooks.
        setup.clone().stop().await;
        assert_eq!(*order.lock().unwrap(), vec![2, 1, 0]);
        setup.stop().await;
        assert_eq!(order.lock().unwrap().len(), 3, "a hook runs once");
    }

    #[tokio::test]
    async fn os_host_resolves_an_ipv6_address_with_its_zone() {
        // `lo`, Linux's loopback interface, has index 1; resolving it
        // needs no network.
        let addrs = resolve("[fe80::1%lo]:50051").await.unwrap();
        let v6 = addrs.iter().find_map(|a| match a {
            SocketAddr::V6(v6) => Some(*v6),
            SocketAddr::V4(_) => None,
        });
        let v6 = v6.expect("an IPv6 address");
        assert_eq!(v6.port(), 50051);
        assert_eq!(v6.scope_id(), 1, "{addrs:?}");
        let numeric = resolve("[fe80::1%1]:50051").await.unwrap();
        assert_eq!(numeric, addrs);
        let plain = resolve("127.0.0.1:9").await.unwrap();
        assert_eq!(plain, ["127.0.0.1:9".parse::<SocketAddr>().unwrap()]);
    }

    #[tokio::test]
    async fn os_host_dials_the_first_address_that_accepts() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accept = tokio::spawn(async move { listener.accept().await.map(|_| ()) });
        let conn = OsHost.dial(&format!("localhost:{}", addr.port())).await;
        // `localhost` may resolve to ::1 first, which refuses: the dial
        // goes on to 127.0.0.1.
        assert!(conn.is_ok(), "{conn:?}", conn = conn.err());
        accept.await.unwrap().unwrap();
    }

    /// The socket of `:port` takes IPv4 connections as well as IPv6 ones:
    /// an IPv4 dial to 127.0.0.1 reaches it (bound here to 127.0.0.1's
    /// IPv4-mapped address rather than to every address, so that the test
    /// listens on loopback only).
    #[tokio::test]
    async fn every_address_is_one_socket_for_ipv6_and_ipv4() {
        let mapped = std::net::Ipv4Addr::LOCALHOST.to_ipv6_mapped();
        let listener = match dual_stack(mapped, 0) {
            Ok(l) => tokio::net::TcpListener::from_std(l).unwrap(),
            Err(e) => {
                eprintln!("skipped: this machine has no IPv6 ({e})");
                return;
            }
        };
        let port = listener.local_addr().unwrap().port();
        let accept = tokio::spawn(async move { listener.accept().await.map(|_| ()) });
        let conn = OsHost.dial(&format!("127.0.0.1:{port}")).await;
        assert!(conn.is_ok(), "{:?}", conn.err());
        accept.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn os_host_reports_a_refused_dial() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let err = OsHost.dial(&addr.to_string()).await.err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
    }

    #[test]
    fn os_host_reads_files() {
        let path = std::env::temp_dir().join(format!("humus-setup-{}", std::process::id()));
        std::fs::write(&path, b"pem").unwrap();
        assert_eq!(OsHost.read_file(&path).unwrap(), b"pem");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            OsHost.read_file(&path).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }
}
