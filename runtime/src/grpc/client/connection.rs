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

use std::error::Error as StdError;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use futures_util::task::AtomicWaker;
use http::Uri;
use http::header::{CONTENT_TYPE, HeaderValue, USER_AGENT};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls_pki_types::ServerName;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use tonic::Status;

use super::Settings;
use super::anchor::Anchor;
use super::classify::PUSHBACK_KEY;
use super::layer::{AttemptService, BoxError, LayerError, send_layered};
use crate::grpc::deadline::to_millis;
use crate::retry::{RetryAfter, retry_after};
use crate::setup::{BoxIo, Host};

/// The message of every call made after the connection was closed.
pub(crate) const CLOSING: &str = "the client connection is closing";

/// The status of a call made, or cut short, after the connection closed.
pub(crate) fn closing() -> Status {
    Status::cancelled(CLOSING)
}

/// How long a dial may take, from the Host's dial to the server's HTTP/2
/// settings (TLS included), before it fails: grpc-go's minimum connect
/// timeout. A dial that hangs (a server that accepts and never answers)
/// fails so, and the next call dials again.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// gRPC's connection backoff (`connection-backoff.md` in gRPC's docs):
/// after a failed dial, the next is due 1 s after the failed one started,
/// then 1.6 times longer each time, ±20 % jitter, never longer than
/// [`Settings::connect_backoff_max`] (120 s by default, gRPC's). Calls
/// made meanwhile fail at once; a readiness check waits for the next dial
/// to be due (the checks and the calls share one backoff).
const BACKOFF_BASE: Duration = Duration::from_secs(1);
const BACKOFF_MULTIPLIER: f64 = 1.6;
const BACKOFF_JITTER: f64 = 0.2;

/// The wait after a failed dial and that wait before jitter, given the
/// one before jitter after the previous failure (`None`: none since the
/// last success, so exactly [`BACKOFF_BASE`]); the wait, jitter included,
/// is never more than `max`, so `max` bounds the time from a failed dial's
/// start to the next dial.
pub(crate) fn backoff_after(last: Option<Duration>, max: Duration) -> (Duration, Duration) {
    match last {
        None => {
            let first = BACKOFF_BASE.min(max);
            (first, first)
        }
        Some(last) => {
            let next = last.mul_f64(BACKOFF_MULTIPLIER).min(max);
            (jittered(next).min(max), next)
        }
    }
}

/// `d`, ±[`BACKOFF_JITTER`] at random.
fn jittered(d: Duration) -> Duration {
    d.mul_f64(1.0 - BACKOFF_JITTER + 2.0 * BACKOFF_JITTER * fastrand::f64())
}

/// What a dial needs, apart from the connection's link (so that hyper's
/// task, whose IO holds this, does not keep the link alive).
struct Dialer {
    host: Arc<dyn Host>,
    addr: String,
    tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
    /// Latched once a dial first succeeds: TLS done, and the server's
    /// HTTP/2 settings received.
    ready: watch::Sender<bool>,
    /// Set when the connection is closed, for good.
    closed: AtomicBool,
    /// Wakes every wait for the close when `closed` is set: a dial in
    /// progress, a wait between attempts, a stream, a fault's delay, a
    /// readiness check.
    on_close: tokio::sync::Notify,
    /// The task driving each HTTP/2 connection dialled (a [`Gated`]
    /// connection's), woken when `closed` is set so that its IO fails.
    io_tasks: Mutex<Vec<Weak<AtomicWaker>>>,
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

/// hyper's handle on one HTTP/2 connection, for tonic's request bodies.
pub(crate) type SendRequest = http2::SendRequest<tonic::body::Body>;

/// A dial every call waiting for the connection shares: its task goes on
/// if they stop waiting (a deadline), and the next call waits for it.
type Dial = Shared<BoxFuture<'static, Result<SendRequest, Arc<FailedDial>>>>;

/// The `user-agent` of every request, after the caller's own if it set one
/// (gRPC over HTTP/2, "User-Agent": `grpc-<language>-<implementation>`).
const USER_AGENT_VALUE: &str = concat!("grpc-rust-humus/", env!("CARGO_PKG_VERSION"));

/// Where the connection is, as the calls see it.
enum Link {
    /// Never dialled, or the last connection went away, or its dial
    /// failed: the next call (or readiness check) dials.
    Down,
    /// A dial in progress.
    Dialing(Dial),
    /// An HTTP/2 connection, usable until hyper reports it closed.
    Up(SendRequest),
    /// The last dial failed with `error`: calls fail at once until
    /// `retry_at`, when the next call dials again.
    Failed {
        error: Arc<FailedDial>,
        retry_at: Instant,
    },
}

/// The link and the connection backoff, under one lock.
struct LinkState {
    link: Link,
    /// The backoff the last failed dial waited, before jitter; `None`
    /// since the last dial that succeeded (and before the first).
    backoff: Option<Duration>,
}

impl LinkState {
    /// The wait after the dial starting now, if it fails (the first after
    /// a success is exactly [`BACKOFF_BASE`]; later ones grow, jittered,
    /// up to `max`), and that wait before jitter.
    fn next_backoff(&self, max: Duration) -> (Duration, Duration) {
        backoff_after(self.backoff, max)
    }
}

impl Dialer {
    /// One HTTP/2 connection: a [`Gated`] dial, hyper's handshake on it,
    /// the connection's task spawned, and the server's settings received
    /// (the server's preface, which gRPC's clients wait for before they
    /// call a connection ready): within `within` at most. Latches
    /// `ready`.
    async fn open(self: Arc<Self>, within: Duration) -> io::Result<SendRequest> {
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

/// Where a dial's task sets the link: `Down` unless set otherwise, even if
/// the task panics or is dropped, so that the next call dials again.
struct Landing(Weak<Mutex<LinkState>>);

impl Landing {
    /// Sets the link, if the dial is still the connection's (a close sets
    /// it `Down`, and a dropped connection has none); the backoff starts
    /// over.
    fn set(&self, to: Link) {
        self.land(to, None);
    }

    fn land(&self, to: Link, backoff: Option<Duration>) {
        if let Some(state) = self.0.upgrade() {
            let mut state = lock(&state);
            if matches!(state.link, Link::Dialing(_)) {
                state.link = to;
                state.backoff = backoff;
            }
        }
    }

    /// The dial failed with `error`: the next is due at `retry_at`, and the
    /// wait after it, if it fails too, grows from `backoff`.
    fn fail(&self, error: Arc<FailedDial>, retry_at: Instant, backoff: Duration) {
        self.land(Link::Failed { error, retry_at }, Some(backoff));
    }
}

impl Drop for Landing {
    fn drop(&mut self) {
        self.set(Link::Down);
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
    fn new(error: io::Error) -> FailedDial {
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
fn dial_status(err: &Arc<FailedDial>) -> Status {
    let mut status = Status::unavailable(err.to_string());
    status.set_source(err.clone());
    status
}

/// The status of a call made while the connection backs off: the last
/// dial's error, how long ago it failed (so that an operator tells a
/// stale error from a fresh one), and when the next dial is due (`left`),
/// both to the millisecond.
fn backing_off_status(err: &Arc<FailedDial>, left: Duration) -> Status {
    let (age, left) = (to_millis(err.at.elapsed()), to_millis(left));
    let mut status = Status::unavailable(format!(
        "{err}, {age:?} ago (the connection is backing off: the next dial is due in {left:?})"
    ));
    status.set_source(Arc::new(BackingOff(err.clone())));
    status
}

/// What an attempt sends its request through (a typed unary call's
/// request, one tonic's `Grpc` made for a typed stream, the channel's):
/// hyper's handle on the connection, straight (no per-attempt layer: no
/// box, no allocation more), or under the client's layers.
#[derive(Clone)]
pub(crate) enum Sender {
    /// Straight over the connection.
    Direct(SendRequest),
    /// Through the client's per-attempt layers, down to the connection.
    Layered {
        stack: AttemptService,
        send: SendRequest,
    },
}

/// The response future of [`Sender`].
type Responding =
    Pin<Box<dyn Future<Output = Result<http::Response<AttemptBody>, BoxError>> + Send>>;

impl tower_service::Service<http::Request<tonic::body::Body>> for Sender {
    type Response = http::Response<AttemptBody>;
    type Error = BoxError;
    type Future = Responding;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match self {
            Sender::Direct(send) => send.poll_ready(cx).map_err(Into::into),
            // The stack's readiness is awaited in its send.
            Sender::Layered { .. } => Poll::Ready(Ok(())),
        }
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Responding {
        match self {
            // `map`, not an `async` block: the box holds hyper's future
            // once (an `async move` block would keep the future it awaits
            // twice, as its captured variable and as its awaitee).
            Sender::Direct(send) => Box::pin(send_on(send, request).map(|sent| match sent {
                Ok(response) => mapped_error(response.map(|body| AttemptBody::Wire { body })),
                Err(err) => Err(err.into()),
            })),
            Sender::Layered { stack, send } => Box::pin(send_layered(stack, send, request)),
        }
    }
}

/// Sends `request` on the connection `send`, with the client's
/// `user-agent` after the caller's, and reads the answer as tonic does
/// ([`grpc_response`]).
pub(crate) fn send_on(
    send: &mut SendRequest,
    mut request: http::Request<tonic::body::Body>,
) -> impl Future<Output = Result<http::Response<hyper::body::Incoming>, hyper::Error>> + Send + use<>
{
    let ours = HeaderValue::from_static(USER_AGENT_VALUE);
    if let Ok(Some(theirs)) = request.headers_mut().try_insert(USER_AGENT, ours) {
        let mut both = theirs.as_bytes().to_vec();
        both.push(b' ');
        both.extend_from_slice(USER_AGENT_VALUE.as_bytes());
        if let Ok(both) = HeaderValue::from_bytes(&both) {
            request.headers_mut().insert(USER_AGENT, both);
        }
    }
    // On a connection that has just closed, the request fails unsent
    // (hyper's `Canceled`): a transparent retry, on a new connection.
    send.send_request(request)
        .map(|sent| sent.map(grpc_response))
}

pin_project_lite::pin_project! {
    /// The body of a response as tonic reads it: hyper's, or what the
    /// per-attempt layers gave back.
    #[project = AttemptBodyProj]
    #[derive(Debug)]
    pub(crate) enum AttemptBody {
        Wire { #[pin] body: hyper::body::Incoming },
        Layered { #[pin] body: tonic::body::Body },
    }
}

impl http_body::Body for AttemptBody {
    type Data = bytes::Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, BoxError>>> {
        match self.project() {
            AttemptBodyProj::Wire { body } => body
                .poll_frame(cx)
                .map(|frame| frame.map(|f| f.map_err(Into::into))),
            AttemptBodyProj::Layered { body } => body
                .poll_frame(cx)
                .map(|frame| frame.map(|f| f.map_err(Into::into))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            AttemptBody::Wire { body } => body.is_end_stream(),
            AttemptBody::Layered { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            AttemptBody::Wire { body } => body.size_hint(),
            AttemptBody::Layered { body } => body.size_hint(),
        }
    }
}

/// `response` as tonic reads it: a gRPC response, or a non-gRPC one (a
/// proxy's error page: an HTTP 503 with a `text/plain` or HTML body)
/// turned into a trailers-only response whose `grpc-status` is gRPC's
/// mapping of the HTTP status, before anything reads the body (which
/// would be taken for gRPC frames).
///
/// A response is gRPC's when it has a `grpc-status` (a trailers-only
/// response, kept as it is whatever its HTTP status), or when its HTTP
/// status is 200 and its content-type is `application/grpc` (or
/// `application/grpc+proto`, `application/grpc;…`). Any other is mapped:
/// 400 `Internal`, 401 `Unauthenticated`, 403 `PermissionDenied`, 404
/// `Unimplemented`, 429, 502, 503 and 504 `Unavailable`, any other status
/// (200 with another content-type included) `Unknown`; the message says
/// the HTTP status and the content-type (for a 431, which an HTTP/2 server
/// answers to headers past its max header list size, that the request's
/// metadata is too large). Its body is never read.
///
/// A mapped response is marked, in its extensions, by an [`HttpAnswer`]:
/// what the sender then turns into the attempt's error ([`mapped_error`]),
/// a status whose source is that `HttpAnswer`, however its message reads.
///
/// A mapped 429 or 503 with a `Retry-After` (either form, as the HTTP
/// client reads it) is given that wait as its pushback
/// (`grpc-retry-pushback-ms`), unless it has one: the proxy's rate limit or
/// overload is then retried after the wait it asked for, or not at all
/// when the wait is longer than `backoff_max`, as a gRPC server's pushback
/// is.
///
/// Source: gRPC's "HTTP to gRPC Status Code Mapping"
/// (`http-grpc-status-mapping.md`), and gRPC over HTTP/2
/// (`PROTOCOL-HTTP2.md`, "Responses").
fn grpc_response<B>(mut response: http::Response<B>) -> http::Response<B> {
    let headers = response.headers();
    if headers.contains_key(GRPC_STATUS) {
        return response;
    }
    let content_type = headers.get(CONTENT_TYPE);
    let is_grpc = content_type.is_some_and(|v| is_grpc_content_type(v.as_bytes()));
    let http = response.status();
    if is_grpc && http == http::StatusCode::OK {
        return response;
    }
    let code = http_to_grpc(http);
    let reason = http.canonical_reason().unwrap_or("");
    let what = match content_type {
        None => "no content-type".to_owned(),
        Some(v) => format!("content-type {:?}", String::from_utf8_lossy(v.as_bytes())),
    };
    let message = if is_grpc {
        format!(
            "{MAPPED_FROM_HTTP}{} {reason} with no grpc-status",
            http.as_u16()
        )
    } else if http == http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE {
        // An HTTP/2 server's own refusal, before any handler, of headers
        // past the size it announced (its max header list size).
        format!(
            "{MAPPED_FROM_HTTP}431 {reason}: the request's metadata is larger than the server takes (its HTTP/2 max header list size); send less metadata, or raise the server's limit"
        )
    } else {
        format!(
            "{MAPPED_FROM_HTTP}{} {reason} with {what}, not a gRPC response (a proxy's error page?)",
            http.as_u16()
        )
    };
    let wait = match http {
        http::StatusCode::TOO_MANY_REQUESTS | http::StatusCode::SERVICE_UNAVAILABLE
            if !headers.contains_key(PUSHBACK_KEY) =>
        {
            match retry_after(headers, std::time::SystemTime::now()) {
                RetryAfter::After(wait) => Some(wait),
                RetryAfter::Absent | RetryAfter::Invalid => None,
            }
        }
        _ => None,
    };
    let message = match wait {
        Some(wait) if wait.is_zero() => {
            format!("{message}; it asks to be tried again at once (Retry-After)")
        }
        Some(wait) => {
            // To the millisecond: a date's wait is measured to the nanosecond.
            format!(
                "{message}; it asks to wait {:?} (Retry-After)",
                to_millis(wait)
            )
        }
        None => message,
    };
    let message = percent_encoding::utf8_percent_encode(&message, GRPC_MESSAGE_ESCAPED).to_string();
    let headers = response.headers_mut();
    if let Some(wait) = wait {
        let millis = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        headers.insert(PUSHBACK_KEY, HeaderValue::from(millis));
    }
    headers.insert(GRPC_STATUS, HeaderValue::from(code as i32));
    if let Ok(message) = HeaderValue::from_str(&message) {
        headers.insert(GRPC_MESSAGE, message);
    }
    response.extensions_mut().insert(HttpAnswer::new(http));
    response
}

/// `response`, or, when [`grpc_response`] mapped it from a non-gRPC
/// answer (its [`HttpAnswer`] mark), the attempt's error: the mapped
/// status (its code, message and metadata, the pushback included) with
/// the `HttpAnswer` as its source, as tonic hands on a status a service
/// fails with. A status a gRPC server sent has no such source whatever
/// its message says, so the two are told apart by type
/// ([`mapped_http_status`]), never by text.
pub(crate) fn mapped_error<B>(response: http::Response<B>) -> Result<http::Response<B>, BoxError> {
    let Some(answer) = response.extensions().get::<HttpAnswer>().copied() else {
        return Ok(response);
    };
    let mut status = Status::from_header_map(response.headers())
        .unwrap_or_else(|| Status::new(http_to_grpc(answer.status()), answer.to_string()));
    status.set_source(Arc::new(answer));
    Err(Box::new(status))
}

pub(crate) const GRPC_STATUS: &str = "grpc-status";
const GRPC_MESSAGE: &str = "grpc-message";

/// How the message of a status [`grpc_response`] mapped from a non-gRPC
/// answer starts (for the reader: the client tells such a status by its
/// source, an [`HttpAnswer`], never by this text).
const MAPPED_FROM_HTTP: &str = "the server answered HTTP ";

/// The source of a status the client mapped from an answer that is not a
/// gRPC server's (a proxy's error page: an HTTP 429 from a gateway's rate
/// limit, a 502 from a load balancer): the answer's HTTP status. A status
/// whose [`source`](std::error::Error::source) is one was made by the
/// client; a status a gRPC server sent never has one, whatever its
/// message says. [`mapped_http_status`](super::mapped_http_status) reads
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpAnswer {
    status: http::StatusCode,
}

impl HttpAnswer {
    /// The mark of an answer of HTTP status `status`: what the client
    /// sets as the source of the status it maps such an answer to (and
    /// what a test of a classify function sets, to make one).
    pub fn new(status: http::StatusCode) -> HttpAnswer {
        HttpAnswer { status }
    }

    /// The answer's HTTP status.
    pub fn status(&self) -> http::StatusCode {
        self.status
    }
}

impl std::fmt::Display for HttpAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "an HTTP {} answer with no gRPC status", self.status)
    }
}

impl StdError for HttpAnswer {}

/// The mark of a status [`grpc_response`] mapped from a non-gRPC answer
/// (a proxy's error page, not a gRPC server's answer: a stream's open
/// answered so has not opened): its [`HttpAnswer`] source.
pub(crate) fn http_answer(status: &tonic::Status) -> Option<&HttpAnswer> {
    status.source()?.downcast_ref::<HttpAnswer>()
}

/// The HTTP status of a status [`grpc_response`] mapped from a non-gRPC
/// answer: its [`HttpAnswer`] source's, when the status's code is the one
/// that HTTP status maps to.
pub(crate) fn mapped_http_status(status: &tonic::Status) -> Option<http::StatusCode> {
    let http = http_answer(status)?.status();
    (http_to_grpc(http) == status.code()).then_some(http)
}

/// What a `grpc-message` percent-encodes: every byte outside visible ASCII
/// and space, and `%` (gRPC over HTTP/2, "Responses").
const GRPC_MESSAGE_ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b'%');

/// Whether `content_type` is gRPC's: `application/grpc`, alone or followed
/// by `+` (a message format) or `;` (parameters), in any case.
fn is_grpc_content_type(content_type: &[u8]) -> bool {
    const GRPC: &[u8] = b"application/grpc";
    content_type.len() >= GRPC.len()
        && content_type[..GRPC.len()].eq_ignore_ascii_case(GRPC)
        && matches!(content_type.get(GRPC.len()), None | Some(b'+' | b';'))
}

/// gRPC's mapping of an HTTP status with no gRPC status.
pub(super) fn http_to_grpc(status: http::StatusCode) -> tonic::Code {
    use tonic::Code;
    match status.as_u16() {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502 | 503 | 504 => Code::Unavailable,
        _ => Code::Unknown,
    }
}

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

/// One dialled connection, which fails every read and write once
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
    /// Until the server's first 9 bytes are read: what they are so far.
    preface: Option<Preface>,
}

/// The error of a dial whose server's first bytes, `first` (up to 9; none
/// if it closed first), are no HTTP/2 settings frame, saying what they
/// tell: an HTTP/1 answer (`HTTP/1.1 502 Bad Gateway` from a proxy not
/// set up for gRPC), a TLS record (a TLS server, to a plain-text client),
/// or neither.
fn not_http2(addr: &str, first: &[u8], plain_text: bool) -> io::Error {
    const TLS_HINT: &str = "the server probably speaks TLS: set Settings::tls to a TLS config that trusts its certificate";
    // A TLS record's head: an alert (21) or a handshake (22), version 3.x.
    let tls_record = first.len() >= 2 && matches!(first[0], 0x15 | 0x16) && first[1] == 0x03;
    let (kind, text) = if first.is_empty() {
        // Nothing to go by: a server failing or shedding connections, or,
        // in plain text, a TLS server that closes on bytes that are no
        // ClientHello.
        let hint = if plain_text {
            " (a server failing or refusing connections, or one that speaks TLS: then set Settings::tls to a TLS config that trusts its certificate)"
        } else {
            ""
        };
        (
            io::ErrorKind::ConnectionAborted,
            format!("dial {addr}: the connection closed before the server sent anything{hint}"),
        )
    } else if first.starts_with(b"HTTP/1.") {
        (
            io::ErrorKind::InvalidData,
            format!(
                "dial {addr}: the server answered in HTTP/1 (its first bytes are {:?}), not HTTP/2, which gRPC needs end to end: the likeliest cause is a proxy or server that is not set up for gRPC (HTTP/2{})",
                String::from_utf8_lossy(first),
                if plain_text {
                    " in plain text, h2c), or a TLS port answering a plain-text request (as nginx does, with a 400: then set Settings::tls"
                } else {
                    ""
                }
            ),
        )
    } else if tls_record && plain_text {
        (
            io::ErrorKind::InvalidData,
            format!(
                "dial {addr}: the server does not speak HTTP/2 in plain text (its first bytes are a TLS record, {first:02x?}): {TLS_HINT}"
            ),
        )
    } else {
        (
            io::ErrorKind::InvalidData,
            format!(
                "dial {addr}: the server does not speak HTTP/2 (its first bytes, {first:02x?}, are no settings frame)"
            ),
        )
    };
    io::Error::new(kind, text)
}

/// What a server's first bytes were: an HTTP/2 settings frame's head, or
/// other bytes (fewer than 9 if the connection ended first).
#[derive(Debug)]
enum Heard {
    Settings,
    Other { head: [u8; 9], len: usize },
}

/// The head of the first frame a server sends, which HTTP/2 requires to be
/// a SETTINGS frame that is not an acknowledgement (RFC 9113, 3.4): 9
/// bytes, type 4, no ACK flag, stream 0.
struct Preface {
    head: [u8; 9],
    len: usize,
    /// Told whether the head is a settings frame's, or what it is; told
    /// the bytes so far at the end of the stream; dropped unsent if the
    /// connection fails first.
    heard: oneshot::Sender<Heard>,
}

impl Preface {
    /// Takes in `read`, the bytes just read; `Some` once the head is whole.
    fn read(&mut self, read: &[u8]) -> Option<bool> {
        let n = read.len().min(self.head.len() - self.len);
        self.head[self.len..self.len + n].copy_from_slice(&read[..n]);
        self.len += n;
        (self.len == self.head.len())
            .then(|| self.head[3] == 4 && self.head[4] & 1 == 0 && self.head[5..] == [0; 4])
    }
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
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = this.gate(cx, |io, cx| io.poll_read(cx, buf));
        if let Some(preface) = &mut this.preface
            && let Poll::Ready(Ok(())) = polled
        {
            let read = preface.read(&buf.filled()[before..]);
            let ended = read.is_none() && buf.filled().len() == before;
            if (read.is_some() || ended)
                && let Some(preface) = this.preface.take()
            {
                // The settings, other bytes, or the end of the stream
                // before the settings (with the bytes so far).
                let heard = match read {
                    Some(true) => Heard::Settings,
                    _ => Heard::Other {
                        head: preface.head,
                        len: preface.len,
                    },
                };
                let _ = preface.heard.send(heard);
            }
        }
        polled
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

/// A status tonic made of a failed connection becomes `Unavailable`, as
/// gRPC reports a connection that went away or never worked, so retries and
/// the breaker treat it so; the original status is kept as its source.
///
/// A failed connection is any error of the connection rather than of the
/// call's stream: an I/O error, hyper's request that was never sent because
/// the connection had closed (which tonic reports as `Cancelled`), an
/// HTTP/2 GOAWAY or connection error (tonic reports h2's reasons as
/// `Internal` and the like, and an I/O error as `Unknown`). A stream the
/// server reset (`RST_STREAM`) keeps tonic's code, which is gRPC's mapping
/// of the reason (`REFUSED_STREAM` is `Unavailable`, `CANCEL` is
/// `Cancelled`, ...). A status the server sent has no source, and is
/// returned as it is, whatever its code and message: a tonic server's
/// `OutOfRange` for a request over its own decoding limit is the server's
/// answer. (A response over the client's own limit is refused where its
/// frame's head is read, as `ResourceExhausted`: see `limit.rs`.)
///
/// Source: gRPC over HTTP/2 (`PROTOCOL-HTTP2.md`, "Errors"), and grpc-go,
/// which fails calls on a broken or unusable connection with `Unavailable`.
pub(crate) fn transport_status(status: Status) -> Status {
    if status.code() == tonic::Code::Unavailable || !connection_failed(&status) {
        return status;
    }
    let mut unavailable =
        Status::unavailable(format!("the connection broke: {}", status.message()));
    unavailable.set_source(Arc::new(status));
    unavailable
}

/// Whether `status` came of a failed connection ([`transport_status`]).
fn connection_failed(status: &Status) -> bool {
    // hyper's errors wrap an h2 or I/O error, decided below; one that wraps
    // neither (a closed connection) is the connection's too.
    let mut hyper = false;
    let mut source: Option<&(dyn StdError + 'static)> = status.source();
    while let Some(err) = source {
        if err.is::<LayerError>() {
            // A per-attempt layer's error, whatever it holds.
            return false;
        }
        if let Some(err) = err.downcast_ref::<h2::Error>() {
            // A GOAWAY (the server's, or this side's on a protocol error)
            // and an I/O error end the connection; a stream reset, by
            // either side, or a reason made by tonic (a cancel), is the
            // call's.
            return err.is_go_away() || err.is_io();
        }
        if let Some(err) = err.downcast_ref::<hyper::Error>() {
            if err.is_canceled() {
                return true;
            }
            hyper = true;
        }
        if err.is::<io::Error>() {
            return true;
        }
        source = err.source();
    }
    hyper
}

/// Whether a failed call's request never reached the server, so sending it
/// again repeats nothing the server saw (gRPC's transparent retry): hyper
/// dropped it before it was written (`Canceled`, such as a connection that
/// had just received a GOAWAY), or the server's GOAWAY said it was never
/// processed, or the server refused the stream (`REFUSED_STREAM`).
pub(crate) fn never_processed(status: &Status) -> bool {
    let mut source: Option<&(dyn StdError + 'static)> = status.source();
    while let Some(err) = source {
        if err.is::<LayerError>() {
            // A per-attempt layer's error: the server may have seen it.
            return false;
        }
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

    /// The backoff grows 1.6 times from 1 s, jittered, and neither the
    /// wait nor its growth ever passes the ceiling, however many dials
    /// failed; a ceiling below 1 s is the first wait too.
    #[test]
    fn the_connection_backoff_never_passes_its_ceiling() {
        let max = Duration::from_secs(3);
        assert_eq!(backoff_after(None, max), (BACKOFF_BASE, BACKOFF_BASE));
        let (wait, next) = backoff_after(Some(BACKOFF_BASE), max);
        assert_eq!(next, Duration::from_millis(1600));
        assert!((1280..=1920).contains(&wait.as_millis()), "{wait:?}");
        let mut last = None;
        for _ in 0..10_000 {
            let (wait, next) = backoff_after(last, max);
            assert!(wait <= max && next <= max, "{wait:?} {next:?}");
            last = Some(next);
        }
        assert_eq!(last, Some(max));
        let short = Duration::from_millis(250);
        assert_eq!(backoff_after(None, short), (short, short));
    }

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
        // A tonic server's answer to a request over its decoding limit.
        let text = "Error, decoded message length too large: found 5242885 bytes, the limit is: 4194304 bytes";
        let theirs = transport_status(Status::out_of_range(text));
        assert_eq!(
            (theirs.code(), theirs.message()),
            (tonic::Code::OutOfRange, text)
        );
    }

    #[test]
    fn a_failed_connection_is_unavailable_whatever_code_tonic_gave_it() {
        // An error of the connection's I/O, whatever code tonic gave it.
        let mut broken = Status::internal("h2 protocol error");
        broken.set_source(Arc::new(io::Error::from(io::ErrorKind::BrokenPipe)));
        assert_eq!(transport_status(broken).code(), tonic::Code::Unavailable);
        // tonic's own cancel of a stream (a bare reason) is the call's.
        let mut cancelled = Status::cancelled("client cancelled");
        cancelled.set_source(Arc::new(h2::Error::from(h2::Reason::CANCEL)));
        let cancelled = transport_status(cancelled);
        assert_eq!(cancelled.code(), tonic::Code::Cancelled);
        assert_eq!(cancelled.message(), "client cancelled");
        // Already Unavailable: kept as it is.
        let mut refused = Status::unavailable("refused");
        refused.set_source(Arc::new(io::Error::other("y")));
        assert_eq!(transport_status(refused).message(), "refused");
    }

    /// What the first bytes of a server that is no HTTP/2 one tell.
    #[test]
    fn a_dial_that_hears_no_settings_says_what_it_heard() {
        let said = |first: &[u8], plain_text: bool| not_http2("a:1", first, plain_text).to_string();
        // A proxy's HTTP/1.1 answer; in plain text, perhaps a TLS port's.
        for plain_text in [true, false] {
            let text = said(b"HTTP/1.1 ", plain_text);
            assert!(text.starts_with("dial a:1: the server answered in HTTP/1 (its first bytes are \"HTTP/1.1 \"), not HTTP/2"), "{text}");
            assert!(text.contains("not set up for gRPC"), "{text}");
            assert_eq!(
                text.contains("a TLS port answering a plain-text request"),
                plain_text,
                "{text}"
            );
        }
        assert!(said(b"HTTP/1.0", true).contains("answered in HTTP/1"));
        // A TLS alert (and a handshake record) to a plain-text client.
        for record in [
            &[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32][..],
            &[0x16, 0x03, 0x01, 0, 0, 0, 0, 0, 0],
        ] {
            let text = said(record, true);
            assert!(text.contains("its first bytes are a TLS record"), "{text}");
            assert!(text.ends_with("the server probably speaks TLS: set Settings::tls to a TLS config that trusts its certificate"), "{text}");
        }
        // Neither: said as bytes, with no guess.
        let text = said(b"SSH-2.0-x", true);
        assert_eq!(
            text,
            "dial a:1: the server does not speak HTTP/2 (its first bytes, [53, 53, 48, 2d, 32, 2e, 30, 2d, 78], are no settings frame)"
        );
        assert!(!said(&[0x15, 0x03], false).contains("TLS"));
        // Nothing read: a failing server, or, in plain text, a TLS one.
        assert_eq!(
            said(&[], true),
            "dial a:1: the connection closed before the server sent anything (a server failing or refusing connections, or one that speaks TLS: then set Settings::tls to a TLS config that trusts its certificate)"
        );
        assert_eq!(
            said(&[], false),
            "dial a:1: the connection closed before the server sent anything"
        );
    }

    #[test]
    fn the_servers_first_frame_must_be_settings_without_ack() {
        let read = |chunks: &[&[u8]]| {
            let (heard, _told) = oneshot::channel();
            let mut preface = Preface {
                head: [0; 9],
                len: 0,
                heard,
            };
            chunks.iter().map(|c| preface.read(c)).collect::<Vec<_>>()
        };
        // SETTINGS, 6 bytes long (one setting), flags 0, stream 0; in parts.
        let settings = [0, 0, 6, 4, 0, 0, 0, 0, 0];
        assert_eq!(read(&[&settings[..4], &settings[4..]]), [None, Some(true)]);
        assert_eq!(
            read(&[&[0, 0, 0, 4, 1, 0, 0, 0, 0]]),
            [Some(false)],
            "an ACK"
        );
        assert_eq!(read(&[b"HTTP/1.1 400"]), [Some(false)], "HTTP/1.1");
        assert_eq!(
            read(&[&[0, 0, 0, 4, 0, 0, 0, 0, 1]]),
            [Some(false)],
            "stream 1"
        );
    }

    #[test]
    fn a_mapped_429_or_503_takes_its_retry_after_as_its_pushback() {
        let answer = |status: u16, headers: &[(&str, &str)]| {
            let mut r = http::Response::builder()
                .status(status)
                .header(CONTENT_TYPE, "text/html");
            for (k, v) in headers {
                r = r.header(*k, *v);
            }
            grpc_response(r.body(()).unwrap())
        };
        let pushback = |r: &http::Response<()>| {
            r.headers()
                .get(PUSHBACK_KEY)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        let in_a_minute =
            httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(61));
        assert_eq!(
            pushback(&answer(429, &[("retry-after", "3")])).as_deref(),
            Some("3000")
        );
        let dated = pushback(&answer(503, &[("retry-after", &in_a_minute)])).unwrap();
        let dated: u64 = dated.parse().unwrap();
        assert!((59_000..=61_000).contains(&dated), "{dated}");
        // Not for another status, an unreadable value, or a response that
        // has a pushback of its own.
        assert_eq!(pushback(&answer(502, &[("retry-after", "3")])), None);
        assert_eq!(pushback(&answer(503, &[("retry-after", "soon")])), None);
        assert_eq!(
            pushback(&answer(503, &[("retry-after", "3"), (PUSHBACK_KEY, "10")])).as_deref(),
            Some("10")
        );
        let status = Status::from_header_map(answer(503, &[]).headers()).unwrap();
        assert!(!status.message().contains("Retry-After"), "{status:?}");
        let status =
            Status::from_header_map(answer(503, &[("retry-after", "0")]).headers()).unwrap();
        assert!(
            status
                .message()
                .ends_with("; it asks to be tried again at once (Retry-After)"),
            "{status:?}"
        );
        let status =
            Status::from_header_map(answer(503, &[("retry-after", &in_a_minute)]).headers())
                .unwrap();
        let said = status.message().rsplit("wait ").next().unwrap();
        assert!(
            said.ends_with("s (Retry-After)") && !said.contains("ns") && said.len() <= 22,
            "to the millisecond: {status:?}"
        );
    }

    #[test]
    fn a_mapped_status_tells_its_http_status() {
        let mapped = |status: u16, content_type: Option<&str>| {
            let mut r = http::Response::builder().status(status);
            if let Some(ct) = content_type {
                r = r.header(CONTENT_TYPE, ct);
            }
            r = r.header("retry-after", "1");
            let err = mapped_error(grpc_response(r.body(()).unwrap())).unwrap_err();
            *err.downcast::<Status>().unwrap()
        };
        for (http, ct) in [
            (429, Some("text/html")),
            (503, Some("text/plain; charset=utf-8")),
            (502, None),
            (504, Some("application/grpc")),
            (400, None),
            (401, None),
            (403, None),
            (404, Some("text/html")),
            (500, Some("text/html")),
            (200, Some("text/html")),
            (418, None),
        ] {
            let status = mapped(http, ct);
            assert_eq!(
                mapped_http_status(&status).map(|s| s.as_u16()),
                Some(http),
                "{status:?}"
            );
        }
        // A server's own status, whatever its code or message, is none:
        // the mark is the source, not the text.
        let page = mapped(429, Some("text/html"));
        for status in [
            Status::unavailable("connection refused"),
            Status::resource_exhausted("slow down"),
            Status::unavailable(page.message()),
            Status::from_header_map(
                grpc_response(http::Response::builder().status(429).body(()).unwrap()).headers(),
            )
            .unwrap(),
            Status::ok(""),
        ] {
            assert_eq!(mapped_http_status(&status), None, "{status:?}");
        }
        // A mapped 429's source under another code than the one it maps to.
        let mut recoded = Status::internal(page.message());
        recoded.set_source(Arc::new(HttpAnswer::new(
            http::StatusCode::TOO_MANY_REQUESTS,
        )));
        assert_eq!(mapped_http_status(&recoded), None);
        // The mapped status keeps the answer's pushback as its metadata.
        assert_eq!(
            page.metadata()
                .get(PUSHBACK_KEY)
                .map(|v| v.to_str().unwrap()),
            Some("1000")
        );
        // A gRPC server's answer is no error of the sender's.
        let mut theirs = http::Response::new(());
        theirs
            .headers_mut()
            .insert(GRPC_STATUS, HeaderValue::from(14));
        assert!(mapped_error(grpc_response(theirs)).is_ok());
    }

    #[test]
    fn a_non_grpc_response_gets_the_mapped_status_and_a_grpc_one_is_kept() {
        let answer = |status: u16, content_type: Option<&str>| {
            let mut r = http::Response::builder().status(status);
            if let Some(ct) = content_type {
                r = r.header(CONTENT_TYPE, ct);
            }
            grpc_response(r.body(()).unwrap())
        };
        let status_of = |r: &http::Response<()>| Status::from_header_map(r.headers());
        for grpc in [
            "application/grpc",
            "application/grpc+proto",
            "Application/GRPC; x=1",
        ] {
            assert!(status_of(&answer(200, Some(grpc))).is_none(), "{grpc}");
        }
        let page = status_of(&answer(503, Some("text/html"))).unwrap();
        assert_eq!(page.code(), tonic::Code::Unavailable);
        assert_eq!(
            page.message(),
            "the server answered HTTP 503 Service Unavailable with content-type \"text/html\", not a gRPC response (a proxy's error page?)"
        );
        assert_eq!(
            status_of(&answer(200, Some("application/grpcx")))
                .unwrap()
                .code(),
            tonic::Code::Unknown
        );
        assert_eq!(
            status_of(&answer(404, None)).unwrap().code(),
            tonic::Code::Unimplemented
        );
        let grpc_503 = status_of(&answer(503, Some("application/grpc"))).unwrap();
        assert!(
            grpc_503.message().ends_with("with no grpc-status"),
            "{grpc_503:?}"
        );
        // A trailers-only response keeps its own status.
        let mut theirs = http::Response::new(());
        *theirs.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
        theirs
            .headers_mut()
            .insert(GRPC_STATUS, HeaderValue::from(5));
        assert_eq!(
            status_of(&grpc_response(theirs)).unwrap().code(),
            tonic::Code::NotFound
        );
    }

    #[test]
    fn an_ordinary_status_was_processed() {
        assert!(!never_processed(&Status::unavailable("down")));
        let mut status = Status::internal("x");
        status.set_source(Arc::new(io::Error::other("y")));
        assert!(!never_processed(&status));
    }
}
