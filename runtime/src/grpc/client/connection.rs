//! The client's one connection: a lazily dialled tonic `Channel` whose
//! connector dials through the Setup's `Host` and does TLS with rustls, the
//! `Connected` latch, and the close at `Setup::stop()` (seed 000, "The
//! connection", "TLS and plain text", "Readiness: Connected").

use std::error::Error as StdError;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::task::AtomicWaker;
use http::Uri;
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use tokio::sync::watch;
use tonic::Status;
use tonic::transport::{Channel, Endpoint};

use super::Settings;
use super::anchor::Anchor;
use crate::setup::{BoxIo, Host};

/// The message of every call made after the connection was closed.
pub(crate) const CLOSING: &str = "the client connection is closing";

/// The status of a call made, or cut short, after the connection closed.
pub(crate) fn closing() -> Status {
    Status::cancelled(CLOSING)
}

/// grpc-go's connection backoff, which a readiness check waits out
/// between failed dials: 1 s, growing 1.6 times to 120 s, ±20 % jitter.
const CHECK_BACKOFF_BASE: Duration = Duration::from_secs(1);
const CHECK_BACKOFF_MAX: Duration = Duration::from_secs(120);

/// What the connector needs, apart from the channel (so that the channel's
/// worker, which owns the connector, does not keep the channel alive).
struct Dialer {
    host: Arc<dyn Host>,
    addr: String,
    tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
    /// Latched once a dial (and its TLS handshake) first succeeds.
    ready: watch::Sender<bool>,
    /// Set when the connection is closed, for good.
    closed: AtomicBool,
    /// Wakes every wait for the close when `closed` is set: a dial in
    /// progress, a wait between attempts, a stream, a fault's delay, a
    /// readiness check.
    on_close: tokio::sync::Notify,
    /// The task driving each connection the channel dialled (a [`Gated`]
    /// connection's), woken when `closed` is set so that its IO fails.
    io_tasks: Mutex<Vec<Weak<AtomicWaker>>>,
    /// Serialises dials, and holds a connection a readiness check dialled
    /// until the channel takes it, so the client keeps one connection.
    stash: tokio::sync::Mutex<Option<BoxIo>>,
}

impl Dialer {
    async fn dial(&self) -> io::Result<BoxIo> {
        let io = self
            .host
            .dial(&self.addr)
            .await
            .map_err(|err| io::Error::new(err.kind(), format!("dial {}: {err}", self.addr)))?;
        let Some((connector, name)) = &self.tls else {
            return Ok(io);
        };
        let tls = connector.connect(name.clone(), io).await.map_err(|err| {
            io::Error::new(
                err.kind(),
                format!("TLS handshake with {}: {err}", self.addr),
            )
        })?;
        if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "TLS handshake with {}: the server did not choose h2 in ALPN",
                    self.addr
                ),
            ));
        }
        Ok(Box::new(tls))
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Resolves when the connection closes (at once if it has). Registers
    /// one waiter with the `Notify`, no other allocation or subscription.
    async fn wait_closed(&self) {
        let notified = self.on_close.notified();
        let mut notified = std::pin::pin!(notified);
        // Registered before the flag is read, so a close in between wakes it.
        notified.as_mut().enable();
        if self.is_closed() {
            return;
        }
        notified.await;
    }

    fn closed_error(&self) -> io::Error {
        io::Error::new(io::ErrorKind::NotConnected, CLOSING)
    }

    /// The channel's dial ([`Dialer::connect`]), cut short by a close, as
    /// a connection that fails its IO once the connection is closed.
    async fn connect_gated(self: Arc<Self>) -> io::Result<Gated> {
        let io = tokio::select! {
            biased;
            () = self.wait_closed() => return Err(self.closed_error()),
            io = self.connect() => io?,
        };
        let task = Arc::new(AtomicWaker::new());
        {
            let mut tasks = self.io_tasks.lock().unwrap_or_else(PoisonError::into_inner);
            tasks.retain(|t| t.strong_count() > 0);
            tasks.push(Arc::downgrade(&task));
        }
        // Read after the waker is listed: a close before this fails here,
        // one after it wakes the connection's task.
        if self.is_closed() {
            return Err(self.closed_error());
        }
        Ok(Gated {
            io,
            dialer: self,
            task,
        })
    }

    /// The channel's dial: a connection a readiness check made, or a new one.
    async fn connect(&self) -> io::Result<BoxIo> {
        if self.is_closed() {
            return Err(self.closed_error());
        }
        let mut stash = self.stash.lock().await;
        if let Some(io) = stash.take() {
            return Ok(io);
        }
        let io = self.dial().await?;
        if self.is_closed() {
            return Err(self.closed_error());
        }
        self.ready.send_replace(true);
        Ok(io)
    }

    /// A readiness check's dial: until a dial succeeds (this one or the
    /// channel's), with grpc-go's connection backoff between failures.
    async fn connect_for_check(&self) {
        let mut ready = self.ready.subscribe();
        let mut backoff = CHECK_BACKOFF_BASE;
        loop {
            {
                let mut stash = self.stash.lock().await;
                if *self.ready.borrow() {
                    return;
                }
                if let Ok(io) = self.dial().await {
                    *stash = Some(io);
                    self.ready.send_replace(true);
                    return;
                }
            }
            let jitter = 0.8 + 0.4 * fastrand::f64();
            tokio::select! {
                () = tokio::time::sleep(backoff.mul_f64(jitter)) => {}
                _ = ready.wait_for(|r| *r) => return,
            }
            backoff = backoff.mul_f64(1.6).min(CHECK_BACKOFF_MAX);
        }
    }
}

/// The tower connector tonic's channel dials with.
#[derive(Clone)]
struct Connector {
    dialer: Arc<Dialer>,
}

impl tower_service::Service<Uri> for Connector {
    type Response = TokioIo<Gated>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TokioIo<Gated>>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _uri: Uri) -> Self::Future {
        // The channel's URI is a placeholder: the address is dialled as
        // given, through the Host, which resolves it.
        let dialer = self.dialer.clone();
        Box::pin(async move { dialer.connect_gated().await.map(TokioIo::new) })
    }
}

/// Whether a [`Connection`] is closed, read by what may outlive it.
pub(crate) struct ClosedFlag(Arc<Dialer>);

impl ClosedFlag {
    /// Whether the connection is closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

/// One connection of the channel, which fails every read and write once
/// the client's connection is closed: hyper's connection task then ends,
/// and with it every call and stream in flight on it, woken by h2 as for
/// any broken connection. So a call pays nothing to be ended by
/// [`Connection::close`]: no waiter of its own, just the flag it reads
/// when woken.
struct Gated {
    io: BoxIo,
    dialer: Arc<Dialer>,
    /// The task that last found the IO not ready, woken at the close.
    task: Arc<AtomicWaker>,
}

impl Gated {
    /// `poll` of the IO, failed once the connection is closed. The waker
    /// of a poll that waits is kept for the close (read again after it is
    /// kept, so a close in between is not missed).
    fn gate<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(Pin<&mut BoxIo>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if self.dialer.is_closed() {
            return Poll::Ready(Err(self.dialer.closed_error()));
        }
        let polled = poll(Pin::new(&mut self.io), cx);
        if polled.is_pending() {
            self.task.register(cx.waker());
            if self.dialer.is_closed() {
                return Poll::Ready(Err(self.dialer.closed_error()));
            }
        }
        polled
    }
}

impl tokio::io::AsyncRead for Gated {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.get_mut().gate(cx, |io, cx| io.poll_read(cx, buf))
    }
}

impl tokio::io::AsyncWrite for Gated {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().gate(cx, |io, cx| io.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .gate(cx, |io, cx| io.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().gate(cx, |io, cx| io.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // A shutdown is the connection ending anyway: let it through.
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// The client's one connection to its dependency.
pub(crate) struct Connection {
    dialer: Arc<Dialer>,
    endpoint: Endpoint,
    channel: Mutex<Option<Channel>>,
    /// Keeps the calls' deadline timers from waking parked threads; its
    /// task starts with the channel.
    anchor: Arc<Anchor>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.dialer.addr)
            .field("tls", &self.dialer.tls.is_some())
            .field("ready", &*self.dialer.ready.borrow())
            .field("closed", &self.dialer.is_closed())
            .finish()
    }
}

impl Connection {
    /// A connection to `settings.addr`; dials nothing.
    ///
    /// `settings` must have passed their checks.
    pub(crate) fn new(host: Arc<dyn Host>, settings: &Settings) -> Connection {
        let addr_host = host_of(&settings.addr);
        let authority = settings.server_name.as_deref().unwrap_or(&settings.addr);
        let tls = settings.tls.as_ref().map(|config| {
            let mut config = rustls::ClientConfig::clone(config);
            config.alpn_protocols = vec![b"h2".to_vec()];
            let name = settings.server_name.as_deref().unwrap_or(addr_host);
            let name = ServerName::try_from(name.to_owned())
                .expect("check_addr and check_server_name accept only valid names");
            (tokio_rustls::TlsConnector::from(Arc::new(config)), name)
        });
        let scheme = if tls.is_some() { "https" } else { "http" };
        let origin: Uri = format!("{scheme}://{authority}")
            .parse()
            .expect("check_addr and check_server_name accept only valid authorities");
        let endpoint = Endpoint::from_shared(format!("http://{}", settings.addr))
            .expect("check_addr accepts only valid authorities")
            .origin(origin);
        Connection {
            dialer: Arc::new(Dialer {
                host,
                addr: settings.addr.clone(),
                tls,
                ready: watch::Sender::new(false),
                closed: AtomicBool::new(false),
                on_close: tokio::sync::Notify::new(),
                io_tasks: Mutex::new(Vec::new()),
                stash: tokio::sync::Mutex::new(None),
            }),
            endpoint,
            channel: Mutex::new(None),
            anchor: Arc::default(),
        }
    }

    /// The channel every attempt goes over, built at the first one (it
    /// needs the tokio runtime, where the [`Anchor`] starts too);
    /// `Canceled` once the connection is closed.
    pub(crate) fn channel(&self) -> Result<Channel, Status> {
        let mut channel = self.channel.lock().unwrap_or_else(PoisonError::into_inner);
        if self.dialer.is_closed() {
            return Err(closing());
        }
        let channel = channel
            .get_or_insert_with(|| {
                self.anchor.spawn();
                self.endpoint.connect_with_connector_lazy(Connector {
                    dialer: self.dialer.clone(),
                })
            })
            .clone();
        self.anchor.touch();
        Ok(channel)
    }

    /// Whether the connection is closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.dialer.is_closed()
    }

    /// [`Connection::is_closed`] for what may outlive the connection (an
    /// open stream), without keeping its channel.
    pub(crate) fn closed_flag(&self) -> ClosedFlag {
        ClosedFlag(self.dialer.clone())
    }

    /// Resolves when the connection closes (at once if it has); owns what
    /// it needs, so it may outlive `self`.
    pub(crate) fn closed(&self) -> impl Future<Output = ()> + Send + use<> {
        let dialer = self.dialer.clone();
        async move { dialer.wait_closed().await }
    }

    /// [`Connection::closed`], borrowing the connection: what a wait
    /// between attempts races (no reference count to take and give back).
    pub(crate) fn closed_ref(&self) -> impl Future<Output = ()> + Send + '_ {
        self.dialer.wait_closed()
    }

    /// Closes the connection for good: calls fail `Canceled` from now on,
    /// and those in flight end so. Idempotent.
    pub(crate) fn close(&self) {
        self.dialer.closed.store(true, Ordering::Release);
        self.dialer.on_close.notify_waiters();
        self.anchor.end();
        // The flag is set first: a connection's task woken here fails its IO.
        let tasks = std::mem::take(
            &mut *self
                .dialer
                .io_tasks
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for task in tasks.iter().filter_map(Weak::upgrade) {
            task.wake();
        }
        let channel = self
            .channel
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(channel);
        if let Ok(mut stash) = self.dialer.stash.try_lock() {
            stash.take();
        }
    }

    /// The `Connected` check: healthy once the connection has first been
    /// ready, from then on until it is closed; the first check dials.
    pub(crate) fn check(&self) -> impl Future<Output = bool> + Send + use<> {
        let dialer = self.dialer.clone();
        let closed = self.closed();
        async move {
            if dialer.is_closed() {
                return false;
            }
            if *dialer.ready.borrow() {
                return true;
            }
            tokio::select! {
                () = closed => false,
                () = dialer.connect_for_check() => !dialer.is_closed(),
            }
        }
    }

    /// A handle that closes this connection, without keeping it alive.
    pub(crate) fn closer(self: &Arc<Self>) -> Weak<Connection> {
        Arc::downgrade(self)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.anchor.end();
    }
}

/// The host of a checked `host:port`, without brackets for IPv6.
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// A status tonic made of a broken connection (an I/O, HTTP/2 or hyper
/// error, which tonic reports as `Unknown`) becomes `Unavailable`, as gRPC
/// reports a connection that went away, so retries and the breaker treat it
/// so; the original status is kept as its source. A status the server sent
/// has no source, and is returned as it is.
pub(crate) fn transport_status(status: Status) -> Status {
    if status.code() != tonic::Code::Unknown {
        return status;
    }
    let mut source: Option<&(dyn StdError + 'static)> = status.source();
    let mut broken = false;
    while let Some(err) = source {
        if err.is::<hyper::Error>() || err.is::<h2::Error>() || err.is::<io::Error>() {
            broken = true;
            break;
        }
        source = err.source();
    }
    if !broken {
        return status;
    }
    let mut unavailable =
        Status::unavailable(format!("the connection broke: {}", status.message()));
    unavailable.set_source(Arc::new(status));
    unavailable
}

/// Whether a failed call's request never reached the server, so sending it
/// again repeats nothing the server saw (gRPC's transparent retry): hyper
/// dropped it before it was written (`Canceled`, such as a connection that
/// had just received a GOAWAY), or the server's GOAWAY said it was never
/// processed, or the server refused the stream (`REFUSED_STREAM`).
pub(crate) fn never_processed(status: &Status) -> bool {
    let mut source: Option<&(dyn StdError + 'static)> = status.source();
    while let Some(err) = source {
        if let Some(err) = err.downcast_ref::<hyper::Error>()
            && err.is_canceled()
        {
            return true;
        }
        if let Some(err) = err.downcast_ref::<h2::Error>() {
            return (err.is_go_away() && err.is_remote())
                || (err.is_reset()
                    && err.is_remote()
                    && err.reason() == Some(h2::Reason::REFUSED_STREAM));
        }
        source = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        assert_eq!(host_of("carts:9090"), "carts");
        assert_eq!(host_of("10.0.0.7:9090"), "10.0.0.7");
        assert_eq!(host_of("[::1]:9090"), "::1");
    }

    #[test]
    fn a_broken_connection_is_unavailable_and_a_servers_unknown_is_kept() {
        let mut broken = Status::unknown("transport error");
        broken.set_source(Arc::new(io::Error::from(io::ErrorKind::ConnectionReset)));
        let status = transport_status(broken);
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(status.message(), "the connection broke: transport error");
        let theirs = transport_status(Status::unknown("from the server"));
        assert_eq!(theirs.code(), tonic::Code::Unknown);
        let internal = transport_status(Status::internal("x"));
        assert_eq!(internal.code(), tonic::Code::Internal);
    }

    #[test]
    fn an_ordinary_status_was_processed() {
        assert!(!never_processed(&Status::unavailable("down")));
        let mut status = Status::internal("x");
        status.set_source(Arc::new(io::Error::other("y")));
        assert!(!never_processed(&status));
    }
}
