//! A dial: the Host's dial, TLS, hyper's HTTP/2 handshake and the
//! server's settings, within [`CONNECT_TIMEOUT`]; and the status of a call
//! whose dial failed, or that finds the connection backing off after one.

use std::error::Error as StdError;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::task::AtomicWaker;
use hyper::client::conn::http2;
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls_pki_types::ServerName;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use tonic::Status;

use super::preface::{Gated, Heard, Preface, not_http2};
use super::{CLOSING, SendRequest, lock};
use crate::grpc::deadline::to_millis;
use crate::setup::{BoxIo, Host};

/// How long a dial may take, from the Host's dial to the server's HTTP/2
/// settings (TLS included), before it fails: grpc-go's minimum connect
/// timeout. A dial that hangs (a server that accepts and never answers)
/// fails so, and the next call dials again.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// What a dial needs, apart from the connection's link (so that hyper's
/// task, whose IO holds this, does not keep the link alive).
pub(super) struct Dialer {
    pub(super) host: Arc<dyn Host>,
    pub(super) addr: String,
    pub(super) tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
    /// Latched once a dial first succeeds: TLS done, and the server's
    /// HTTP/2 settings received.
    pub(super) ready: watch::Sender<bool>,
    /// Set when the connection is closed, for good.
    pub(super) closed: AtomicBool,
    /// Wakes every wait for the close when `closed` is set: a dial in
    /// progress, a wait between attempts, a stream, a fault's delay, a
    /// readiness check.
    pub(super) on_close: tokio::sync::Notify,
    /// The task driving each HTTP/2 connection dialled (a [`Gated`]
    /// connection's), woken when `closed` is set so that its IO fails.
    pub(super) io_tasks: Mutex<Vec<Weak<AtomicWaker>>>,
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
                format!("TLS handshake with {}: {err}{}", self.addr, tls_hint(&err)),
            )
        })?;
        match tls.get_ref().1.alpn_protocol() {
            Some(b"h2") => Ok(Box::new(tls)),
            chose => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                match chose {
                    None => format!(
                        "TLS handshake with {}: the server chose no ALPN protocol, where gRPC needs h2 (it serves no HTTP/2 over TLS: is it a gRPC server?)",
                        self.addr
                    ),
                    Some(other) => format!(
                        "TLS handshake with {}: the server chose {:?} in ALPN, where gRPC needs h2",
                        self.addr,
                        String::from_utf8_lossy(other)
                    ),
                },
            )),
        }
    }

    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Resolves when the connection closes (at once if it has). Registers
    /// one waiter with the `Notify`, no other allocation or subscription.
    pub(super) async fn wait_closed(&self) {
        let notified = self.on_close.notified();
        let mut notified = std::pin::pin!(notified);
        // Registered before the flag is read, so a close in between wakes it.
        notified.as_mut().enable();
        if self.is_closed() {
            return;
        }
        notified.await;
    }

    pub(super) fn closed_error(&self) -> io::Error {
        io::Error::new(io::ErrorKind::NotConnected, CLOSING)
    }

    /// [`Dialer::connect`], cut short by a close, as a connection that
    /// fails its IO once the connection is closed, and that tells
    /// `preface` the server's first bytes (up to a frame head's 9), or
    /// that they are HTTP/2 settings.
    async fn connect_gated(self: Arc<Self>, preface: oneshot::Sender<Heard>) -> io::Result<Gated> {
        let io = tokio::select! {
            biased;
            () = self.wait_closed() => return Err(self.closed_error()),
            io = self.connect() => io?,
        };
        let task = Arc::new(AtomicWaker::new());
        {
            let mut tasks = lock(&self.io_tasks);
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
            preface: Some(Preface {
                head: [0; 9],
                len: 0,
                heard: preface,
            }),
        })
    }

    /// The Host's dial and TLS, unless the connection is closed.
    async fn connect(&self) -> io::Result<BoxIo> {
        if self.is_closed() {
            return Err(self.closed_error());
        }
        let io = self.dial().await?;
        if self.is_closed() {
            return Err(self.closed_error());
        }
        Ok(io)
    }
}

/// What a failed TLS handshake probably means, when rustls's error says it:
/// a server in plain text (its bytes are no TLS record), or one that
/// offers no `h2` in ALPN; else nothing.
fn tls_hint(err: &io::Error) -> &'static str {
    match err
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)) => {
            ": the server probably speaks plain text: set Settings::tls to None"
        }
        Some(rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol)) => {
            ": the server offers no h2 in ALPN (it serves no HTTP/2 over TLS: is it a gRPC server?)"
        }
        _ => "",
    }
}

impl Dialer {
    /// One HTTP/2 connection: a [`Gated`] dial, hyper's handshake on it,
    /// the connection's task spawned, and the server's settings received
    /// (the server's preface, which gRPC's clients wait for before they
    /// call a connection ready): within `within` at most. Latches
    /// `ready`.
    pub(super) async fn open(self: Arc<Self>, within: Duration) -> io::Result<SendRequest> {
        let addr = self.addr.clone();
        let opened = tokio::time::timeout(within, self.clone().open_now()).await;
        let send = opened.unwrap_or_else(|_| {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("dial {addr}: no HTTP/2 connection within {within:?}"),
            ))
        })?;
        if self.is_closed() {
            return Err(self.closed_error());
        }
        self.ready.send_replace(true);
        Ok(send)
    }

    async fn open_now(self: Arc<Self>) -> io::Result<SendRequest> {
        let addr = self.addr.clone();
        let plain_text = self.tls.is_none();
        let (heard, preface) = oneshot::channel();
        let io = self.connect_gated(heard).await?;
        let (send, connection) = http2::Builder::new(BoxingExecutor)
            .timer(TokioTimer::new())
            // Boxed: hyper spawns a task per request (and one more for a
            // request's body that h2 cannot take at once), each the size of
            // its largest kind, the connection's own, which holds the IO.
            // A 72-byte `Gated` there made every such task a 128-byte
            // block larger than with an 8-byte one (`benches/memory.rs`).
            .handshake(TokioIo::new(Box::new(io)))
            .await
            .map_err(|err| {
                io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    format!("HTTP/2 handshake with {addr}: {err}"),
                )
            })?;
        // Its end (an error, or the server's GOAWAY) reaches the calls on
        // it and closes `send`, so the next call dials again.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        match preface.await {
            Ok(Heard::Settings) => Ok(send),
            Ok(Heard::Other { head, len }) => Err(not_http2(&addr, &head[..len], plain_text)),
            Err(_) => Err(not_http2(&addr, &[], plain_text)),
        }
    }
}

/// The executor of hyper's tasks on a connection: each spawned boxed, as
/// tonic's own channel spawns them. hyper spawns a task per request (and one
/// for a request's body that h2 cannot take at once), each the size of its
/// largest kind, the connection's; in a task of its own, that future would
/// be copied whole as tokio moves it into its task and sets its stages,
/// where a box is copied once and then moved as a pointer.
#[derive(Clone, Copy, Debug)]
struct BoxingExecutor;

impl<F> hyper::rt::Executor<F> for BoxingExecutor
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, future: F) {
        tokio::spawn(Box::pin(future));
    }
}

/// One failed dial, shared by every attempt that waited for it: its
/// error, and when it failed.
///
/// It is the source of the status of each of those attempts
/// ([`dial_status`]), and of the attempts that fail at once while the
/// connection backs off after it ([`BackingOff`]); its own source is the
/// dial's error, so code that walks a status's sources still finds the
/// `io::Error`. Each such attempt is a failed attempt, classified as any
/// other `UNAVAILABLE`.
#[derive(Debug)]
pub(crate) struct FailedDial {
    error: io::Error,
    /// When the dial failed, so that a call failing at once in the
    /// backoff says how old the error is.
    at: Instant,
}

impl FailedDial {
    pub(super) fn new(error: io::Error) -> FailedDial {
        FailedDial {
            error,
            at: Instant::now(),
        }
    }
}

impl std::fmt::Display for FailedDial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl StdError for FailedDial {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&self.error)
    }
}

/// The source of the status of an attempt that failed at once because the
/// connection backs off after a failed dial (no dial made, nothing sent):
/// that dial, as its own source.
#[derive(Debug)]
pub(crate) struct BackingOff(Arc<FailedDial>);

impl std::fmt::Display for BackingOff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the connection is backing off after a failed dial")
    }
}

impl StdError for BackingOff {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.0)
    }
}

/// The status of a call whose connection could not be dialled.
pub(super) fn dial_status(err: &Arc<FailedDial>) -> Status {
    let mut status = Status::unavailable(err.to_string());
    status.set_source(err.clone());
    status
}

/// The status of a call made while the connection backs off: the last
/// dial's error, how long ago it failed (so that an operator tells a
/// stale error from a fresh one), and when the next dial is due (`left`),
/// both to the millisecond.
pub(super) fn backing_off_status(err: &Arc<FailedDial>, left: Duration) -> Status {
    let (age, left) = (to_millis(err.at.elapsed()), to_millis(left));
    let mut status = Status::unavailable(format!(
        "{err}, {age:?} ago (the connection is backing off: the next dial is due in {left:?})"
    ));
    status.set_source(Arc::new(BackingOff(err.clone())));
    status
}
