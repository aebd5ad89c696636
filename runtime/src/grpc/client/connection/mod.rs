//! The client's one connection: an HTTP/2 connection (hyper's client)
//! dialled lazily through the Setup's `Host`, with TLS by rustls, and
//! dialled again when it goes away; the `Connected` latch; and the close at
//! `Setup::stop()` ([design](crate::design::client#the-connection); [readiness](crate::design::client#readiness)).
//!
//! Calls go straight to hyper's handle on the connection, which every task
//! clones (`http2::SendRequest`), rather than through tonic's `Channel`:
//! the channel is a `tower::buffer::Buffer`, whose worker task receives
//! every request and hands its response future back (one more task, and
//! its wake-ups, on each call's path), and it arms a timer of its own for
//! every `grpc-timeout` sent, where the client enforces its deadline itself.
//! The rest of what the channel does is here: the scheme and authority of
//! each request (tonic's `Grpc::with_origin`), a `user-agent`, one dial at
//! a time however many calls wait for it, and a new dial once the
//! connection is gone (a GOAWAY, a broken socket).
//!
//! A dial is ready, as gRPC's clients have it, once the server's HTTP/2
//! settings have arrived (a server that accepts and says nothing, or
//! speaks another protocol, fails it), within [`CONNECT_TIMEOUT`]
//! (grpc-go's); and a readiness check dials as a call does, so the calls
//! then use the connection it made.
//!
//! The parts, one file each: [`dial`] (the Host's dial, TLS and hyper's
//! handshake, and a failed dial's status), [`preface`] (the HTTP/2 preface
//! gate on the dialled IO), [`link`] (where the connection is, and its
//! backoff), [`sender`] (what an attempt sends through), and [`status`]
//! (gRPC's status of an HTTP answer or a broken connection).

mod dial;
mod link;
mod preface;
mod sender;
mod status;

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use futures_util::FutureExt;
use http::Uri;
use hyper::client::conn::http2;
use rustls_pki_types::ServerName;
use tokio::sync::watch;
use tokio::time::Instant;
use tonic::Status;

use super::Settings;
use super::layer::AttemptService;
use crate::call::Anchor;
use crate::setup::Host;
use dial::{CONNECT_TIMEOUT, Dialer, FailedDial, backing_off_status, dial_status};
use link::{BACKOFF_BASE, Dial, Landing, Link, LinkState};

#[cfg(feature = "rabbitmq")]
pub(crate) use link::backoff_after;
pub(crate) use sender::{AttemptBody, Sender, send_on};
pub use status::HttpAnswer;
pub(crate) use status::{mapped_error, mapped_http_status, never_processed, transport_status};

/// The message of every call made after the connection was closed.
pub(crate) const CLOSING: &str = "the client connection is closing";

/// The status of a call made, or cut short, after the connection closed.
pub(crate) fn closing() -> Status {
    Status::cancelled(CLOSING)
}

/// hyper's handle on one HTTP/2 connection, for tonic's request bodies.
pub(crate) type SendRequest = http2::SendRequest<tonic::body::Body>;

/// Whether a [`Connection`] is closed, read by what may outlive it.
pub(crate) struct ClosedFlag(Arc<Dialer>);

impl ClosedFlag {
    /// Whether the connection is closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.0.is_closed()
    }

    /// The address the connection dials (its settings' `addr`).
    pub(crate) fn addr(&self) -> &str {
        &self.0.addr
    }
}

/// The client's one connection to its dependency.
pub(crate) struct Connection {
    dialer: Arc<Dialer>,
    /// The scheme and authority of every request.
    origin: Uri,
    /// Shared with a dial's task while it runs, which sets it when done.
    link: Arc<Mutex<LinkState>>,
    /// Keeps the calls' deadline timers from waking parked threads; its
    /// task starts with the first dial.
    anchor: Arc<Anchor>,
    /// The per-attempt layers over the connection, if there are any.
    layers: Option<AttemptService>,
    /// The ceiling of the connection backoff
    /// ([`Settings::connect_backoff_max`]).
    backoff_max: Duration,
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

/// `mutex`'s guard, poisoned or not: what it guards is whole between any
/// two statements.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Connection {
    /// A connection to `settings.addr`; dials nothing.
    ///
    /// `settings` must have passed their checks.
    pub(crate) fn new(host: Arc<dyn Host>, settings: &Settings) -> Connection {
        let addr_host = host_of(&settings.addr);
        let authority = settings
            .authority
            .as_deref()
            .or(settings.server_name.as_deref())
            .unwrap_or(&settings.addr);
        let tls = settings.tls.as_ref().map(|config| {
            let mut config = rustls::ClientConfig::clone(config);
            config.alpn_protocols = vec![b"h2".to_vec()];
            let name = settings.server_name.as_deref().unwrap_or(addr_host);
            let name = ServerName::try_from(name.to_owned())
                .expect("check_addr and check_server_name accept only valid names");
            (tokio_rustls::TlsConnector::from(Arc::new(config)), name)
        });
        let scheme = if tls.is_some() { "https" } else { "http" };
        let origin: Uri = format!("{scheme}://{authority}").parse().expect(
            "check_addr, check_server_name and check_authority accept only valid authorities",
        );
        Connection {
            dialer: Arc::new(Dialer {
                host,
                addr: settings.addr.clone(),
                tls,
                ready: watch::Sender::new(false),
                closed: AtomicBool::new(false),
                on_close: tokio::sync::Notify::new(),
                io_tasks: Mutex::new(Vec::new()),
            }),
            origin,
            link: Arc::new(Mutex::new(LinkState {
                link: Link::Down,
                backoff: None,
            })),
            anchor: Arc::default(),
            layers: settings.layers.stack(),
            backoff_max: settings.connect_backoff_max,
        }
    }

    /// What an attempt sends through (the
    /// per-attempt layers, if any, over the connection), dialled first if
    /// there is none (at the first call, and after the last connection
    /// went away); a dial in progress is shared. The channel sends
    /// requests already made (a stock tonic client's, its body
    /// gRPC-framed) through it too, their URI given
    /// [`Connection::origin`].
    ///
    /// # Errors
    ///
    /// `Canceled` once the connection is closed; `Unavailable` if the
    /// dial fails (the `Host`'s error, TLS's or HTTP/2's).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime when it must dial (tokio's panic); and with
    /// the panic of the dial's task, if it panicked.
    pub(crate) async fn sender(&self) -> Result<Sender, Status> {
        let send = self.send_request().await?;
        Ok(match &self.layers {
            None => Sender::Direct(send),
            Some(stack) => Sender::Layered {
                stack: stack.clone(),
                send,
            },
        })
    }

    /// The scheme and authority of every request.
    pub(crate) fn origin(&self) -> &Uri {
        &self.origin
    }

    /// hyper's handle on the connection, dialled first if need be
    /// ([`Connection::sender`]). While the connection backs off after a
    /// failed dial, fails at once with that dial's error.
    async fn send_request(&self) -> Result<SendRequest, Status> {
        let dial = {
            let mut state = lock(&self.link);
            if self.dialer.is_closed() {
                return Err(closing());
            }
            match &state.link {
                Link::Up(send) if !send.is_closed() => {
                    let send = send.clone();
                    drop(state);
                    self.anchor.touch();
                    return Ok(send);
                }
                Link::Dialing(dial) => dial.clone(),
                Link::Failed { error, retry_at } if Instant::now() < *retry_at => {
                    return Err(backing_off_status(
                        error,
                        retry_at.saturating_duration_since(Instant::now()),
                    ));
                }
                _ => {
                    // At the first dial, and again if the runtime that ran
                    // the anchor's task is gone (and with it the connection).
                    self.anchor.spawn();
                    let dial = self.dial(state.next_backoff(self.backoff_max));
                    state.link = Link::Dialing(dial.clone());
                    dial
                }
            }
        };
        self.anchor.touch();
        dial.await.map_err(|err| dial_status(&err))
    }

    /// Starts a dial, in a task of its own, which sets the link when done
    /// (unless the connection was closed or dropped meanwhile): `Up`, or
    /// `Failed` until `wait` after the dial's start, the wait after the
    /// next failure growing from `backoff`. The dial may take
    /// [`CONNECT_TIMEOUT`], or `wait` if that is longer (as gRPC's
    /// connection backoff has it).
    fn dial(&self, (wait, backoff): (Duration, Duration)) -> Dial {
        let dialer = self.dialer.clone();
        let link = Arc::downgrade(&self.link);
        let started = Instant::now();
        let task = tokio::spawn(async move {
            let landing = Landing(link);
            let opened = dialer
                .clone()
                .open(CONNECT_TIMEOUT.max(wait))
                .await
                .map_err(|error| Arc::new(FailedDial::new(error)));
            match &opened {
                Ok(send) if !dialer.is_closed() => landing.set(Link::Up(send.clone())),
                Err(error) if !dialer.is_closed() => {
                    landing.fail(error.clone(), started + wait, backoff);
                }
                _ => {}
            }
            opened
        });
        async move {
            match task.await {
                Ok(opened) => opened,
                Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
                Err(_) => Err(Arc::new(FailedDial::new(io::Error::other(
                    "the dial was cancelled: its runtime is shutting down",
                )))),
            }
        }
        .boxed()
        .shared()
    }

    /// Whether the connection is closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.dialer.is_closed()
    }

    /// [`Connection::is_closed`] for what may outlive the connection (an
    /// open stream), without keeping its link.
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
        let tasks = std::mem::take(&mut *lock(&self.dialer.io_tasks));
        for task in tasks.iter().filter_map(Weak::upgrade) {
            task.wake();
        }
        // The calls and dials to come see the flag; dropping the handle
        // lets hyper's task end once the IO has failed.
        let link = std::mem::replace(&mut lock(&self.link).link, Link::Down);
        drop(link);
    }

    /// When the next dial is due, while the connection backs off after a
    /// failed dial.
    fn next_dial(&self) -> Option<Instant> {
        match lock(&self.link).link {
            Link::Failed { retry_at, .. } => Some(retry_at),
            _ => None,
        }
    }

    /// The `Connected` check: healthy once the connection has first been
    /// ready (its dial done, TLS and the server's HTTP/2 settings), from
    /// then on until it is closed. Until then a check dials, as a call
    /// does (the same dial, which the calls then use), and waits until a
    /// dial succeeds, or until the connection closes. It makes no call.
    /// Its dials share the connection's backoff with the calls': while
    /// the connection backs off after a failed dial, a check waits for
    /// the next dial to be due rather than dialling, so checks made once
    /// a second of a dependency that is down dial as seldom as the calls
    /// do.
    pub(crate) fn check(self: &Arc<Self>) -> impl Future<Output = bool> + Send + use<> {
        let conn = Arc::clone(self);
        async move {
            let mut ready = conn.dialer.ready.subscribe();
            loop {
                if conn.dialer.is_closed() {
                    return false;
                }
                if *ready.borrow_and_update() {
                    return true;
                }
                tokio::select! {
                    () = conn.closed() => return false,
                    dialled = conn.send_request() => if dialled.is_ok() {
                        return !conn.dialer.is_closed();
                    },
                }
                // Failed, or backing off: until the next dial is due (or
                // the connection is ready, made by a call's dial).
                let due = conn
                    .next_dial()
                    .unwrap_or_else(|| Instant::now() + BACKOFF_BASE.min(conn.backoff_max));
                tokio::select! {
                    () = conn.closed() => return false,
                    () = tokio::time::sleep_until(due) => {}
                    _ = ready.changed() => {}
                }
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
pub(super) fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
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
}
