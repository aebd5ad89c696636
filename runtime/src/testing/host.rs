//! The in-memory network and file system a whole service is tested on.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, ready};

use futures_util::Stream;
use futures_util::stream::FuturesUnordered;
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::sync::mpsc;

use crate::setup::{BoxIo, DialFuture};

/// How many bytes one direction of an in-memory connection buffers.
const PIPE_BUFFER: usize = 64 * 1024;

/// An in-memory network and file system: a [`Host`](crate::Host) for
/// tests, on which a gRPC service and its gRPC dependencies run with no
/// port, no file and no real time (the HTTP, Kafka and RabbitMQ clients
/// dial on their own: see [`Host`](crate::Host)).
///
/// A test server [`listen`](Host::listen)s on a name such as
/// `"carts:9090"` and serves the [`Listener`] (or its
/// [`tls`](Listener::tls) form) with tonic's `serve_with_incoming`; a
/// client whose [`Setup`](crate::Setup) has this host dials it there. A
/// dial to a name nothing listens on is refused at once. Dropping the
/// listener stops listening (an outage); listening again is a restart.
/// [`cut`](Host::cut) breaks every open connection to a name, as a crash
/// or a network failure would.
///
/// The host counts what happened on it ([`dials`](Host::dials),
/// [`accepted`](Host::accepted)), so a test can assert how many
/// connections a client made.
///
/// `Host` is a cheap handle: clones share one network.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use humus::Host as _;
/// let host = humus::testing::Host::new();
/// assert!(host.dial("carts:9090").await.is_err());
/// let _listener = host.listen("carts:9090");
/// assert!(host.dial("carts:9090").await.is_ok());
/// assert_eq!(host.dials("carts:9090"), 2);
/// assert_eq!(host.accepted("carts:9090"), 1);
/// # });
/// ```
///
/// Design: [testing](crate::design::client#testing).
#[derive(Clone, Default)]
pub struct Host {
    net: Arc<Mutex<Net>>,
}

#[derive(Default)]
struct Net {
    next_id: u64,
    listeners: HashMap<String, (u64, mpsc::UnboundedSender<Conn>)>,
    files: HashMap<PathBuf, Vec<u8>>,
    dials: HashMap<String, usize>,
    accepted: HashMap<String, usize>,
    conns: Vec<(String, Weak<Wire>)>,
}

impl fmt::Debug for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let net = self.lock();
        let mut listening: Vec<&String> = net.listeners.keys().collect();
        listening.sort();
        f.debug_struct("testing::Host")
            .field("listening", &listening)
            .field("files", &net.files.len())
            .finish_non_exhaustive()
    }
}

impl Host {
    /// An empty network with no file.
    pub fn new() -> Host {
        Host::default()
    }

    fn lock(&self) -> MutexGuard<'_, Net> {
        self.net.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// This host with a file at `path` holding `contents`.
    pub fn with_file(self, path: impl Into<PathBuf>, contents: impl Into<Vec<u8>>) -> Host {
        self.write_file(path, contents);
        self
    }

    /// Writes a file at `path` holding `contents`, replacing any.
    pub fn write_file(&self, path: impl Into<PathBuf>, contents: impl Into<Vec<u8>>) {
        self.lock().files.insert(path.into(), contents.into());
    }

    /// Listens on `addr` (`"carts:9090"`): dials to it connect from now on,
    /// until the returned [`Listener`] is dropped.
    ///
    /// # Panics
    ///
    /// If something already listens on `addr`: a test that does so has a
    /// bug, as a second bind to one port would.
    pub fn listen(&self, addr: &str) -> Listener {
        let mut net = self.lock();
        assert!(
            !net.listeners.contains_key(addr),
            "testing::Host: something already listens on {addr}"
        );
        net.next_id += 1;
        let id = net.next_id;
        let (tx, rx) = mpsc::unbounded_channel();
        net.listeners.insert(addr.to_owned(), (id, tx));
        Listener {
            addr: addr.to_owned(),
            id,
            rx,
            net: Arc::downgrade(&self.net),
        }
    }

    /// Whether something listens on `addr` now.
    pub fn is_listening(&self, addr: &str) -> bool {
        self.lock().listeners.contains_key(addr)
    }

    /// How many dials to `addr` were made, refused ones included.
    pub fn dials(&self, addr: &str) -> usize {
        self.lock().dials.get(addr).copied().unwrap_or(0)
    }

    /// How many connections to `addr` a listener was handed.
    pub fn accepted(&self, addr: &str) -> usize {
        self.lock().accepted.get(addr).copied().unwrap_or(0)
    }

    /// How many connections to `addr` are open now: neither end dropped
    /// nor [`cut`](Host::cut).
    pub fn open_connections(&self, addr: &str) -> usize {
        let net = self.lock();
        net.conns
            .iter()
            .filter(|(a, wire)| a == addr && wire.upgrade().is_some_and(|w| w.is_open()))
            .count()
    }

    /// Breaks every open connection to `addr`: each end's next read or
    /// write fails with [`io::ErrorKind::ConnectionReset`], and one waiting
    /// is woken. Listening is untouched.
    pub fn cut(&self, addr: &str) {
        let wires: Vec<Arc<Wire>> = {
            let mut net = self.lock();
            net.conns.retain(|(_, w)| w.strong_count() > 0);
            net.conns
                .iter()
                .filter(|(a, _)| a == addr)
                .filter_map(|(_, w)| w.upgrade())
                .collect()
        };
        for wire in wires {
            wire.cut();
        }
    }

    fn connect(&self, addr: &str) -> io::Result<Conn> {
        let mut net = self.lock();
        *net.dials.entry(addr.to_owned()).or_default() += 1;
        net.conns.retain(|(_, w)| w.strong_count() > 0);
        let refused = || {
            io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("connection refused: nothing listens on {addr}"),
            )
        };
        let Some((_, tx)) = net.listeners.get(addr) else {
            return Err(refused());
        };
        let (client, server) = tokio::io::duplex(PIPE_BUFFER);
        let wire = Arc::new(Wire {
            ends: Mutex::new([Some(client), Some(server)]),
        });
        let server = Conn {
            wire: wire.clone(),
            end: 1,
        };
        if tx.send(server).is_err() {
            return Err(refused());
        }
        *net.accepted.entry(addr.to_owned()).or_default() += 1;
        net.conns.push((addr.to_owned(), Arc::downgrade(&wire)));
        Ok(Conn { wire, end: 0 })
    }
}

impl crate::Host for Host {
    fn dial<'a>(&'a self, addr: &'a str) -> DialFuture<'a> {
        let conn = self.connect(addr);
        Box::pin(async move { conn.map(|c| Box::new(c) as BoxIo) })
    }

    fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.lock().files.get(path).cloned().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no such file on the testing host", path.display()),
            )
        })
    }

    /// Listens on the name `addr` (as [`Host::listen`] does, but an address
    /// already listened on is [`io::ErrorKind::AddrInUse`], not a panic).
    fn listen<'a>(&'a self, addr: &'a str) -> crate::setup::ListenFuture<'a> {
        let listener = if self.is_listening(addr) {
            Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("testing::Host: something already listens on {addr}"),
            ))
        } else {
            Ok(Host::listen(self, addr))
        };
        Box::pin(async move {
            let listener = listener?;
            Ok(crate::setup::Listener {
                local_addr: None,
                incoming: Box::pin(futures_util::StreamExt::map(listener, |conn| {
                    conn.map(|conn| crate::setup::Accepted {
                        io: Box::new(conn) as BoxIo,
                        remote_addr: None,
                        local_addr: None,
                    })
                })),
            })
        })
    }
}

/// Both ends of one in-memory connection, so the host can cut it.
struct Wire {
    ends: Mutex<[Option<DuplexStream>; 2]>,
}

impl Wire {
    fn lock(&self) -> MutexGuard<'_, [Option<DuplexStream>; 2]> {
        self.ends.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is_open(&self) -> bool {
        self.lock().iter().all(Option::is_some)
    }

    fn cut(&self) {
        // Dropping both halves closes the pipe both ways and wakes every
        // task waiting on it; their next poll finds the end gone.
        let ends = std::mem::take(&mut *self.lock());
        drop(ends);
    }
}

/// One end of an in-memory connection: what [`Host::dial`](crate::Host::dial)
/// returns to a client, and what a [`Listener`] yields to a server.
pub struct Conn {
    wire: Arc<Wire>,
    end: usize,
}

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("testing::Conn")
            .field("end", &if self.end == 0 { "client" } else { "server" })
            .field("open", &self.wire.is_open())
            .finish()
    }
}

fn reset() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        "connection cut by the testing host",
    )
}

impl Conn {
    fn with<R>(
        &self,
        f: impl FnOnce(Pin<&mut DuplexStream>) -> Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        let mut ends = self.wire.lock();
        match ends[self.end].as_mut() {
            Some(io) => f(Pin::new(io)),
            None => Poll::Ready(Err(reset())),
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Dropping this end closes the peer's reads, as closing a socket does.
        let end = self.wire.lock()[self.end].take();
        drop(end);
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.with(|io| io.poll_read(cx, buf))
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.with(|io| io.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.with(|io| io.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.with(|io| io.poll_shutdown(cx))
    }
}

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

/// What listens on one name of a [`Host`]: a stream of the connections
/// dialled to it, for tonic's `serve_with_incoming`. Dropping it stops
/// listening; connections already made stay open.
pub struct Listener {
    addr: String,
    id: u64,
    rx: mpsc::UnboundedReceiver<Conn>,
    net: Weak<Mutex<Net>>,
}

impl fmt::Debug for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("testing::Listener")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Listener {
    /// The name this listener listens on.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The next connection dialled to this name.
    pub async fn accept(&mut self) -> Conn {
        self.rx
            .recv()
            .await
            .expect("a listener's sender lives while it is listening")
    }

    /// This listener with TLS: each connection is handed on once
    /// `acceptor`'s handshake is done (several handshakes run at once). A
    /// failed handshake is yielded as an error, which tonic's server skips.
    pub fn tls(self, acceptor: tokio_rustls::TlsAcceptor) -> TlsListener {
        TlsListener {
            listener: Some(self),
            acceptor,
            handshakes: FuturesUnordered::new(),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(net) = self.net.upgrade() {
            let mut net = net.lock().unwrap_or_else(PoisonError::into_inner);
            if net
                .listeners
                .get(&self.addr)
                .is_some_and(|(id, _)| *id == self.id)
            {
                net.listeners.remove(&self.addr);
            }
        }
    }
}

impl Stream for Listener {
    type Item = io::Result<Conn>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx).map(|c| c.map(Ok))
    }
}

/// A connection whose TLS handshake, as a server, is done: what a
/// [`TlsListener`] yields.
pub struct TlsConn {
    inner: tokio_rustls::server::TlsStream<Conn>,
}

impl fmt::Debug for TlsConn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (io, session) = self.inner.get_ref();
        f.debug_struct("testing::TlsConn")
            .field("io", io)
            .field("alpn", &session.alpn_protocol())
            .finish()
    }
}

impl TlsConn {
    /// The TLS server name (SNI) the client asked for, if it sent one.
    pub fn server_name(&self) -> Option<&str> {
        self.inner.get_ref().1.server_name()
    }
}

impl AsyncRead for TlsConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for TlsConn {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

/// A [`Listener`] whose connections are handed on after a TLS handshake:
/// a stream for tonic's `serve_with_incoming`.
pub struct TlsListener {
    listener: Option<Listener>,
    acceptor: tokio_rustls::TlsAcceptor,
    handshakes: FuturesUnordered<tokio_rustls::Accept<Conn>>,
}

impl fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("testing::TlsListener")
            .field("listener", &self.listener)
            .field("handshakes", &self.handshakes.len())
            .finish_non_exhaustive()
    }
}

impl Stream for TlsListener {
    type Item = io::Result<TlsConn>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(listener) = this.listener.as_mut() {
            while let Poll::Ready(conn) = Pin::new(&mut *listener).poll_next(cx) {
                match conn {
                    Some(Ok(conn)) => this.handshakes.push(this.acceptor.accept(conn)),
                    Some(Err(err)) => return Poll::Ready(Some(Err(err))),
                    None => {
                        this.listener = None;
                        break;
                    }
                }
            }
        }
        if this.handshakes.is_empty() {
            return if this.listener.is_none() {
                Poll::Ready(None)
            } else {
                Poll::Pending
            };
        }
        match ready!(Pin::new(&mut this.handshakes).poll_next(cx)) {
            Some(done) => Poll::Ready(Some(done.map(|inner| TlsConn { inner }))),
            None if this.listener.is_none() => Poll::Ready(None),
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Host as _;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A host on which a client dialled `carts:9090` and was accepted: the
    /// host, its listener (still listening), the client's end and the
    /// server's.
    async fn connected() -> (Host, Listener, crate::BoxIo, Conn) {
        let host = Host::new();
        let mut listener = host.listen("carts:9090");
        let client = host.dial("carts:9090").await.unwrap();
        let server = listener.accept().await;
        (host, listener, client, server)
    }

    #[tokio::test]
    async fn a_dial_reaches_the_listener_and_bytes_flow_both_ways() {
        let (_host, _listener, mut client, mut server) = connected().await;
        client.write_all(b"ping").await.unwrap();
        let mut buf = [0; 4];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
        server.write_all(b"pong").await.unwrap();
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
    }

    #[tokio::test]
    async fn nothing_listening_refuses_and_listening_again_accepts() {
        let host = Host::new();
        let err = host.dial("carts:9090").await.err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
        let listener = host.listen("carts:9090");
        assert!(host.is_listening("carts:9090"));
        drop(listener);
        assert!(!host.is_listening("carts:9090"));
        assert!(host.dial("carts:9090").await.is_err());
        let _again = host.listen("carts:9090");
        assert!(host.dial("carts:9090").await.is_ok());
        assert_eq!(host.dials("carts:9090"), 3);
        assert_eq!(host.accepted("carts:9090"), 1);
    }

    #[tokio::test]
    async fn a_cut_wakes_a_waiting_reader_with_a_reset() {
        let (host, _listener, mut client, _server) = connected().await;
        assert_eq!(host.open_connections("carts:9090"), 1);
        let reader = tokio::spawn(async move {
            let mut buf = [0; 1];
            client.read(&mut buf).await
        });
        tokio::task::yield_now().await;
        host.cut("carts:9090");
        let err = reader.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
        assert_eq!(host.open_connections("carts:9090"), 0);
    }

    #[tokio::test]
    async fn dropping_one_end_ends_the_peers_reads() {
        let (_host, _listener, mut client, server) = connected().await;
        drop(server);
        let mut buf = Vec::new();
        assert_eq!(client.read_to_end(&mut buf).await.unwrap(), 0);
    }

    #[test]
    fn files_are_read_back() {
        let host = Host::new().with_file("ca.pem", "pem");
        assert_eq!(host.read_file(Path::new("ca.pem")).unwrap(), b"pem");
        let err = host.read_file(Path::new("missing.pem")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    #[should_panic(expected = "already listens on carts:9090")]
    fn listening_twice_is_a_bug() {
        let host = Host::new();
        let _a = host.listen("carts:9090");
        let _b = host.listen("carts:9090");
    }
}
