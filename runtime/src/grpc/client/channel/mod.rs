//! The channel stock tonic clients take: a [`Client`](super::Client) as a
//! `tonic::client::GrpcService`, so any tonic-generated client
//! (`HealthClient::new(client.channel())`) calls through the client's
//! attempt loop, breaker, budget, deadline, telemetry and fault point
//! ([design](crate::design::client#stock-tonic-clients)).
//!
//! tonic's generated code hands the channel an HTTP request whose body is
//! already gRPC-framed, and reads the channel's HTTP response with its own
//! decoder. In between, the channel runs the same loop as the typed
//! client's calls ([`run_unary`], [`run_open`]), with its own send:
//!
//! - the request's body is kept as it is read, up to [`RETRY_BUFFER`]
//!   bytes, so another attempt can send it again ([`Replay`]); a body over
//!   that is sent once, and its call is not retried. A unary call's body
//!   (one message, ready at once) is read whole by the caller's task when
//!   the call is made, as the typed client encodes its message, so each
//!   send is those bytes, ending with their DATA frame;
//! - a unary method's response is read whole before it is classified (its
//!   `grpc-status` is in the trailer), with the statuses tonic's decoder
//!   gives the typed call, and handed on as the bytes and trailer read,
//!   uncopied ([`read_unary`]);
//! - a stream's response is handed on as it arrives, and counted in the
//!   breaker once, at its end ([`Live`]).
//!
//! Which a call is comes from its method: listed ([`Channel::with_methods`]),
//! well known ([`Methods::well_known`]: health and reflection), or not
//! known at all. A method not known is sent once (not retried: it may not
//! be idempotent) and bounded by the client's timeout until the server
//! answers with its response headers (unary and streaming alike; see
//! [`Channel`]); to change either, list it, from humus-build's
//! descriptors ([`Methods::new`]) or from a descriptor set
//!
//! The parts: this file, the [`Channel`] and its `Service`; [`methods`],
//! the [`Methods`] it knows; [`attempts`], what each attempt sends;
//! [`read`], a unary response read whole; [`replay`], the request body kept
//! to be sent again; [`body`], the [`ChannelBody`] handed to tonic;
//! [`trailer`], how a trailer ends a call, as tonic reads it.

mod attempts;
mod body;
mod methods;
mod read;
mod replay;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::BuildHasherDefault;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Uri;
use http::uri::PathAndQuery;
use tokio::time::Instant;
use tonic::Status;
use tower_service::Service;

use super::attempt::{Opened, run_open, run_unary};
use super::client::{Inner, deadline};
use super::limit::Limited;
use super::{Method, RpcKind};
use crate::grpc::wire::{GRPC_TIMEOUT_HEADER, parse_grpc_timeout};
use attempts::{Attempts, SendHeaders, is_tonic_headers};
pub use body::ChannelBody;
use body::Live;
use methods::PathHasher;
use methods::unknown;
pub use methods::{DuplicateMethod, MAX_UNLISTED_PATHS, Methods};
pub use replay::RETRY_BUFFER;
use replay::Replay;
pub(super) use replay::Whole;

/// The body of what the connection's send answers.
type WireBody = super::connection::AttemptBody;

/// A [`Client`](super::Client) as the channel of any tonic-generated
/// client: a cheap handle ([`Client::channel`](super::Client::channel)),
/// cloned as tonic's clients clone theirs, that implements
/// `tower::Service<http::Request<tonic::body::Body>>` and so tonic's
/// `GrpcService`:
///
/// ```
/// # use humus::grpc::client::{Client, Methods, Settings};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let setup = humus::Setup::new();
/// let client = Client::new(&setup, Settings { addr: "ledger:9090".into(), ..Settings::default() })?;
/// // Every call of this stub goes through the client's breaker, budget,
/// // retries, deadline, telemetry and fault points.
/// let health = tonic_health::pb::health_client::HealthClient::new(client.channel());
/// // With the descriptors humus-build generated, each method keeps its
/// // kind and policy (`never_retry`, its classify table):
/// let methods = Methods::new(&[/* ledger_humus::LedgerProtoClient::METHODS, ... */])?;
/// let _channel = client.channel().with_methods(methods);
/// # drop(health);
/// # Ok(())
/// # }
/// ```
///
/// A call through the channel is one of the client's calls, as the typed
/// client makes them: the same attempts, span names and attributes,
/// instruments, fault point, classification and decisions. How each is
/// sent depends on what [`Methods`] says of its path:
///
/// - **A unary method**: each attempt sends the request's body again and
///   reads the whole response (a message of at most
///   [`Settings::max_decoding_message_size`](super::Settings::max_decoding_message_size)
///   bytes, as the typed client's; what a server sends after its one
///   message counts against that limit too: the call ends
///   `ResourceExhausted` when the whole response is longer) before it is
///   classified; the deadline is the
///   typed call's ([`Settings::timeout`](super::Settings::timeout), the
///   request's `grpc-timeout`, the inherited one). The request's body is
///   kept for the retries up to [`RETRY_BUFFER`] bytes; a call with a
///   longer body is sent once, and not retried.
/// - **A streaming method**: only the open is retried; once the server
///   has answered with its response headers, the stream is never
///   retried, and it is counted in the breaker once, at its end, as
///   [`Streaming`](super::Streaming) is. A trailers-only status (the
///   server answered nothing but its status) has not opened it: it is
///   the attempt's, classified and retried as a unary attempt's, as for
///   a typed stream. Its deadline is the request's own `grpc-timeout` or
///   the inherited one, as a typed stream's.
/// - **A well-known method** (`grpc.health.v1.Health`'s `Check`, `List`
///   and `Watch`, `grpc.reflection`'s `ServerReflectionInfo`, v1 and
///   v1alpha: [`Methods::well_known`]) is called by its kind, as if it
///   were listed, with the client's policy; a list that names it wins.
///   So `HealthClient::new(client.channel())`'s `check` is a unary call,
///   bounded by [`Settings::timeout`](super::Settings::timeout).
/// - **A method not known** (neither listed nor well known) is called
///   as a stream, since the channel cannot tell a unary call from a
///   stream that may live for hours; what it gets is chosen to be safe
///   whatever the method is:
///   - *Sent once.* Its attempt is not retried, whatever
///     [`Settings::classify`](super::Settings::classify) says (as for a
///     `never_retry` method): it may not be idempotent, and a charge
///     sent twice is worse than an error. A request the server never saw
///     (refused, past a GOAWAY) is still sent again within the attempt,
///     as for every method. Its result is classified and counted in the
///     breaker as any call's.
///   - *Bounded until its response headers.* The client's
///     [`Settings::timeout`](super::Settings::timeout) (or the request's
///     own `grpc-timeout`, or the inherited deadline, if earlier) bounds
///     the call until the server answers with its response headers: a
///     hung dependency ends the call `DeadlineExceeded` at the timeout,
///     counted as a breaker failure, whether the method is unary or a
///     stream (a unary server, tonic's or grpc-go's, sends its headers
///     with its answer). Once the headers have come, the call is a
///     stream, bounded only by the request's own or the inherited
///     deadline, and counted at its end: the timeout is not sent in its
///     `grpc-timeout`, and does not cut a stream that lives longer.
///
///   To change either, list the method ([`Channel::with_methods`]):
///   humus-build's descriptors ([`Methods::new`]), or those of the stub's
///   descriptor set ([`Methods::from_file_descriptor_set`]), give a unary
///   method the typed call's retries and bound on its whole response; a
///   [`Method`] written by hand gives any kind and policy. A request's own
///   timeout (`tonic::Request::set_timeout`) bounds the whole call.
///   Buffering a whole response before the caller sees it (what a unary
///   call needs to be classified on its trailer) would break a server
///   stream, so it is done only for the methods known to be unary.
///
/// A response message over the client's decoding limit
/// ([`Settings::max_decoding_message_size`](super::Settings::max_decoding_message_size))
/// ends the call, or the stream, `ResourceExhausted`, whatever the method;
/// the stock client's own limit applies after it (see
/// [`Client::channel`](super::Client::channel)).
///
/// The request's extensions are not sent, but an `opentelemetry::Context`
/// among them is the call's context (else the current one), as for the
/// typed client. Responses are read uncompressed: a stub's
/// `accept_compressed` is not supported (humus's tonic has no compression).
///
/// # Errors
///
/// A call's future fails with the [`Status`](https://docs.rs/tonic/0.14/tonic/struct.Status.html) the typed call would return
/// (its source a [`NoRetry`](super::NoRetry) when retries stopped, a
/// [`circuit::Rejected`](crate::circuit::Rejected) when the breaker
/// rejected it); tonic hands it to the caller as it is. `poll_ready` never
/// fails.
///
/// # Panics
///
/// As [`Client::unary`](super::Client::unary): when a call is polled
/// outside a tokio runtime.
#[derive(Clone)]
pub struct Channel {
    inner: Arc<Inner>,
    methods: Methods,
    /// Each listed method's descriptor and the URI of its sends (the
    /// connection's scheme and authority, its path), made once, when the
    /// methods are given, rather than on every call.
    listed: Arc<HashMap<&'static str, Listed, BuildHasherDefault<PathHasher>>>,
}

/// A method of a [`Channel`]'s [`Methods`].
struct Listed {
    method: &'static Method,
    uri: Option<Uri>,
}

impl fmt::Debug for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Channel")
            .field("addr", &self.inner.settings.addr)
            .field("methods", &self.methods.len())
            .finish_non_exhaustive()
    }
}

impl Channel {
    pub(super) fn new(inner: Arc<Inner>) -> Channel {
        Channel {
            inner,
            methods: Methods::default(),
            listed: Arc::default(),
        }
    }

    /// The same channel, knowing `methods` (which replace any it knew).
    #[must_use]
    pub fn with_methods(mut self, methods: Methods) -> Channel {
        let origin = self.inner.conn.origin();
        let listed = methods
            .by_path
            .iter()
            .map(|(&path, &method)| {
                // None for a descriptor whose path is not one (never one
                // humus-build makes): its calls make their URI.
                let uri = PathAndQuery::from_maybe_shared(Bytes::from_static(path.as_bytes()))
                    .ok()
                    .map(|path| request_uri(origin, path));
                (path, Listed { method, uri })
            })
            .collect();
        self.methods = methods;
        self.listed = Arc::new(listed);
        self
    }

    /// The methods it was given ([`Channel::with_methods`]); the
    /// well-known ones ([`Methods::well_known`]) are known besides.
    pub fn methods(&self) -> &Methods {
        &self.methods
    }
}

/// The response future of a [`Channel`]'s call.
pub struct ChannelFuture {
    inner: Pin<Box<dyn Future<Output = Result<http::Response<ChannelBody>, Status>> + Send>>,
}

impl fmt::Debug for ChannelFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelFuture").finish_non_exhaustive()
    }
}

impl Future for ChannelFuture {
    type Output = Result<http::Response<ChannelBody>, Status>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl Service<http::Request<tonic::body::Body>> for Channel {
    type Response = http::Response<ChannelBody>;
    type Error = Status;
    type Future = ChannelFuture;

    /// Always ready: the client's connection is dialled by the call.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    /// Makes the call: its deadline and context are read here, when the
    /// call is made.
    fn call(&mut self, request: http::Request<tonic::body::Body>) -> ChannelFuture {
        let (parts, body) = request.into_parts();
        let path_and_query = parts.uri.path_and_query();
        let path = path_and_query.map_or("/", PathAndQuery::path);
        let known = self.listed.get(path);
        let listed = known
            .map(|known| known.method)
            .or_else(|| super::described::well_known(path));
        let method = listed.unwrap_or_else(|| unknown(path));
        let uri = match known.and_then(|known| known.uri.as_ref()) {
            // The listed path alone, no query: the URI made for it.
            Some(uri) if path_and_query.is_some_and(|pq| pq.as_str().len() == path.len()) => {
                uri.clone()
            }
            _ => request_uri(
                self.inner.conn.origin(),
                path_and_query
                    .cloned()
                    .unwrap_or_else(|| PathAndQuery::from_static("/")),
            ),
        };
        let mut headers = parts.headers;
        // The caller's `grpc-timeout`, taken out of the headers (each send
        // says the time left): one look-up, by name, where reading it and
        // then removing it (`deadline`, `caller_metadata`) would parse its
        // key twice; none for tonic's two headers alone (a caller that set
        // no metadata).
        let tonic_headers = is_tonic_headers(&headers);
        let own = if tonic_headers {
            None
        } else {
            headers
                .remove(&GRPC_TIMEOUT_HEADER)
                .and_then(|v| parse_grpc_timeout(v.as_bytes()))
        };
        let unary = listed.is_some_and(|m| m.kind == RpcKind::Unary);
        let now = Instant::now();
        // A method not listed has the client's timeout until the server
        // answers with its response headers (see `Channel`), which its
        // sends do not say (a stream, once open, is not cut by it).
        let open = listed
            .is_none()
            .then(|| deadline(now, Some(self.inner.settings.timeout), own));
        let timeout = unary.then_some(self.inner.settings.timeout);
        let deadline = deadline(now, timeout, own);
        let cx = parts
            .extensions
            .get::<opentelemetry::Context>()
            .cloned()
            .unwrap_or_else(opentelemetry::Context::current);
        let send = Attempts {
            uri,
            headers: if tonic_headers {
                SendHeaders::Tonic(Mutex::new(Some(headers)))
            } else {
                SendHeaders::Caller(headers)
            },
            // A unary stub's body is its one message, ready at once.
            replay: if unary {
                Replay::read_ahead(body)
            } else {
                Replay::new(body)
            },
        };
        let inner = self.inner.clone();
        let future: Pin<Box<dyn Future<Output = _> + Send>> = if unary {
            Box::pin(async move {
                let read = run_unary(&inner, method, cx, deadline, send).await?;
                Ok(read.into_response())
            })
        } else {
            let one_response = listed.is_some_and(|m| m.kind == RpcKind::ClientStreaming);
            Box::pin(async move {
                let replay = send.replay.clone();
                let Opened { response, settle } =
                    run_open(&inner, method, cx, open.unwrap_or(deadline), deadline, send).await?;
                // Opened: never sent again, so nothing more is kept.
                replay.commit();
                let (parts, body) = response.into_parts();
                // The client's decoding limit, before the stock client's.
                let body = Limited::new(body, inner.settings.max_decoding_message_size);
                let live = Live::new(body, &parts, settle, deadline, inner.conn.closed_flag())
                    .one_response(one_response);
                Ok(http::Response::from_parts(parts, ChannelBody::live(live)))
            })
        };
        ChannelFuture { inner: future }
    }
}

/// The URI of every send of a call: the connection's scheme and
/// authority, the request's path.
fn request_uri(origin: &Uri, path: PathAndQuery) -> Uri {
    let mut parts = origin.clone().into_parts();
    parts.path_and_query = Some(path);
    Uri::from_parts(parts).expect("an origin's scheme and authority with a path form a URI")
}
