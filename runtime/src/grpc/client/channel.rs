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
//! ([`Methods::from_file_descriptor_set`]).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::BuildHasherDefault;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, Mutex, PoisonError, RwLock};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderName, Uri};
use http_body::{Body as _, Frame};
use tokio::time::{Instant, Sleep};
use tonic::metadata::MetadataMap;
use tonic::{Code, Status};
use tower_service::Service;

use super::attempt::{
    CallCtx, Open, Opened, Sends, TRANSPARENT_RETRIES, Unary, at_deadline, run_open, run_unary,
};
use super::client::{GRPC_TIMEOUT_HEADER, Inner, deadline, parse_grpc_timeout};
use super::connection::{ClosedFlag, closing, http_to_grpc, never_processed, transport_status};
use super::hooks::AttemptSpan;
use super::limit::{FRAME_HEAD, Frames, Limited, message_len, too_large, too_long};
use super::stream::{End, Settle, deadline_exceeded, missing_response};
use super::{Method, MethodPolicy, RpcKind};
use crate::grpc::deadline::Deadline;

/// The body of what the connection's send answers.
type WireBody = super::connection::AttemptBody;

/// `grpc-status`, `grpc-message` and `grpc-status-details-bin`, as
/// names: looked up without parsing a string.
pub(super) const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
const GRPC_STATUS_DETAILS: HeaderName = HeaderName::from_static("grpc-status-details-bin");

/// Whether `trailer` says `OK` as tonic reads it (`Status::from_header_map`
/// gives `Code::Ok`), told without making the status (which copies the
/// trailer): `grpc-status: 0`, a `grpc-message`, if any, that decodes (an
/// undecodable one makes tonic's status `Unknown`), and no details (which
/// tonic decodes too). Any other trailer is read by tonic.
pub(super) fn is_ok(trailer: &HeaderMap) -> bool {
    if trailer
        .get(&GRPC_STATUS)
        .is_none_or(|v| v.as_bytes() != b"0")
    {
        return false;
    }
    // The status alone (as tonic's servers end): nothing more to read.
    trailer.len() == 1
        || (trailer.get(&GRPC_MESSAGE).is_none_or(|m| {
            percent_encoding::percent_decode(m.as_bytes())
                .decode_utf8()
                .is_ok()
        }) && !trailer.contains_key(&GRPC_STATUS_DETAILS))
}

/// How many bytes of a call's request body the channel keeps to send it
/// again (grpc-go's retry buffer per call, 256 KiB): a call whose body is
/// longer is sent once, and not retried (a request the server never saw is
/// not sent again either).
pub const RETRY_BUFFER: usize = 256 * 1024;

/// The methods a [`Channel`] knows, by path (`/package.Service/Method`):
/// the descriptors humus-build generates for each service
/// (`ledger_humus::LedgerProtoClient::METHODS`), so that a stock tonic
/// client's call of a method gets that method's kind and policy
/// (`never_retry`, its classify table), as the typed client's does.
///
/// A list can also be made from an encoded `FileDescriptorSet`
/// ([`Methods::from_file_descriptor_set`]: tonic-health's, a googleapis
/// crate's, a build's own), which gives each method its kind and its
/// `humus.v1.policy`, and lists joined ([`Methods::join`]). The
/// well-known services ([`Methods::well_known`]) are known to every
/// channel.
///
/// A method not known gets [`Settings::classify`](super::Settings::classify),
/// the fault point `grpc:<path without its leading slash>`, and is called
/// as a stream that is sent once, bounded by the client's timeout until
/// its response headers (see [`Channel`]). Its path is kept
/// for the life of the process, for the first [`MAX_UNLISTED_PATHS`]
/// paths not listed; any further one is named `_OTHER` (see there).
#[derive(Clone, Default)]
pub struct Methods {
    by_path: Arc<HashMap<&'static str, &'static Method, BuildHasherDefault<PathHasher>>>,
}

/// The hash of [`Methods`]' paths, looked up on every call: eight bytes a
/// step (FxHash's step), where the standard library's SipHash costs about
/// five times as much for a path of 30 to 40 bytes. Its keys are the
/// paths of the services given to [`Methods::new`], fixed by the program,
/// so a path a caller makes up cannot fill it with collisions.
#[derive(Default)]
struct PathHasher(u64);

impl PathHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::Hasher for PathHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut le = [0u8; 8];
            le.copy_from_slice(word);
            self.add(u64::from_le_bytes(le));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut le = [0u8; 8];
            le[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(le));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn finish(&self) -> u64 {
        // The table's index is the low bits: fold the high ones, where the
        // multiplication carries most of what it mixed, into them.
        self.0 ^ (self.0 >> 32)
    }
}

impl fmt::Debug for Methods {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut paths: Vec<_> = self.by_path.keys().collect();
        paths.sort();
        f.debug_struct("Methods").field("paths", &paths).finish()
    }
}

/// Whether `a` and `b` describe one method alike: the same descriptor,
/// or two with the same names, kind and policy (a descriptor set's and a
/// well-known one), neither with a classify function of its own (which
/// cannot be told apart but by address).
fn same(a: &'static Method, b: &'static Method) -> bool {
    std::ptr::eq(a, b)
        || (a.full_name == b.full_name
            && a.point == b.point
            && a.kind == b.kind
            && a.policy.never_retry == b.policy.never_retry
            && a.policy.table == b.policy.table
            && a.policy.classify.is_none()
            && b.policy.classify.is_none())
}

/// Two different descriptors for one method path given to
/// [`Methods::new`]: two policies' lists of one service
/// (`Client::<Strict>::METHODS` and `Client::<Lenient>::METHODS`), or two
/// services generated with the same full name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Methods::new: two different descriptors for {path}: give each service's METHODS once, from one policy"
)]
pub struct DuplicateMethod {
    /// The method's path, `/package.Service/Method`.
    pub path: &'static str,
}

impl Methods {
    /// The methods of `services`, each a generated service's list of
    /// descriptors (`ledger_humus::LedgerProtoClient::METHODS`). The same
    /// list given twice is one, and so is one method described alike
    /// twice (the same path, kind and policy, no classify function).
    ///
    /// # Errors
    ///
    /// [`DuplicateMethod`] when two different descriptors name one path.
    pub fn new(services: &[&'static [&'static Method]]) -> Result<Methods, DuplicateMethod> {
        Methods::of(services.iter().flat_map(|methods| methods.iter().copied()))
    }

    /// The methods `methods` lists; the same descriptor twice is one.
    pub(super) fn of(
        methods: impl IntoIterator<Item = &'static Method>,
    ) -> Result<Methods, DuplicateMethod> {
        let mut by_path = HashMap::default();
        for method in methods {
            match by_path.insert(method.full_name, method) {
                Some(before) if !same(before, method) => {
                    return Err(DuplicateMethod {
                        path: method.full_name,
                    });
                }
                _ => {}
            }
        }
        Ok(Methods {
            by_path: Arc::new(by_path),
        })
    }

    /// The methods `methods` lists, each at a path of its own (no check).
    pub(super) fn distinct(methods: impl IntoIterator<Item = &'static Method>) -> Methods {
        Methods {
            by_path: Arc::new(methods.into_iter().map(|m| (m.full_name, m)).collect()),
        }
    }

    /// The descriptors listed, in no order.
    pub fn iter(&self) -> impl Iterator<Item = &'static Method> + '_ {
        self.by_path.values().copied()
    }

    /// The descriptor of the method at `path` (`/package.Service/Method`),
    /// if it is listed.
    pub fn get(&self, path: &str) -> Option<&'static Method> {
        self.by_path.get(path).copied()
    }

    /// How many methods are listed.
    pub fn len(&self) -> usize {
        self.by_path.len()
    }

    /// Whether no method is listed.
    pub fn is_empty(&self) -> bool {
        self.by_path.is_empty()
    }
}

/// How many distinct paths not listed in any channel's [`Methods`] the
/// process keeps a descriptor for (its name, for telemetry and
/// classification, and its fault point): more than the methods of any set
/// of services a process calls, and a bound on what a client that makes
/// up its paths (a proxy, a client built from reflection) can make it
/// keep. Any further path not listed is still sent as it is, but its
/// calls are named `_OTHER` (OpenTelemetry's name for a method outside a
/// known set): their spans and metrics carry `rpc.method` `_OTHER`,
/// [`Settings::classify`](super::Settings::classify) is given the path
/// `_OTHER`, and their fault point is `grpc:_OTHER`. List such methods
/// ([`Methods`]) to keep their names.
pub const MAX_UNLISTED_PATHS: usize = 4096;

/// The descriptor every path not listed gets once
/// [`MAX_UNLISTED_PATHS`] are kept.
static OTHER: Method = Method {
    full_name: crate::telemetry::names::RPC_METHOD_OTHER,
    point: "grpc:_OTHER",
    kind: RpcKind::Streaming,
    policy: UNLISTED_POLICY,
};

/// The policy of a method the channel does not know: sent once (a
/// request the server never saw is still sent again within its attempt,
/// as for any `never_retry` method), since it may not be idempotent; the
/// client's classify decides the rest.
const UNLISTED_POLICY: MethodPolicy = MethodPolicy {
    never_retry: true,
    ..MethodPolicy::DEFAULT
};

/// The descriptor of a method the channel does not know: its path, the
/// fault point `grpc:<path>`, no policy. Made once per path in the process
/// and kept (the paths of generated code are a set fixed at build time),
/// for the first [`MAX_UNLISTED_PATHS`] paths; [`OTHER`] after them.
fn unknown(path: &str) -> &'static Method {
    unknown_in(path, MAX_UNLISTED_PATHS)
}

fn unknown_in(path: &str, max: usize) -> &'static Method {
    static SEEN: LazyLock<RwLock<HashMap<Box<str>, &'static Method>>> =
        LazyLock::new(RwLock::default);
    if let Some(method) = SEEN
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(path)
    {
        return method;
    }
    let mut seen = SEEN.write().unwrap_or_else(PoisonError::into_inner);
    if seen.len() >= max && !seen.contains_key(path) {
        return &OTHER;
    }
    seen.entry(path.into()).or_insert_with(|| {
        let full_name: &'static str = Box::leak(path.into());
        let point: &'static str =
            Box::leak(format!("grpc:{}", path.strip_prefix('/').unwrap_or(path)).into_boxed_str());
        Box::leak(Box::new(Method {
            full_name,
            point,
            // Not read: how an unknown method is called is the channel's
            // own rule (see `Channel`).
            kind: RpcKind::Streaming,
            policy: UNLISTED_POLICY,
        }))
    })
}

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

/// What each attempt of a call through the channel sends.
struct Attempts {
    uri: Uri,
    /// The caller's headers, without its `grpc-timeout` (each send says
    /// the time left).
    headers: SendHeaders,
    replay: Replay,
}

/// `te: trailers` and `content-type: application/grpc`: the headers
/// tonic's `Grpc` writes into every request it makes, and all a stock
/// client's request carries when its caller set no metadata.
fn tonic_headers(capacity: usize) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(capacity);
    headers.insert(http::header::TE, TE_TRAILERS);
    headers.insert(http::header::CONTENT_TYPE, CONTENT_TYPE_GRPC);
    headers
}

const TE_TRAILERS: http::HeaderValue = http::HeaderValue::from_static("trailers");
const CONTENT_TYPE_GRPC: http::HeaderValue = http::HeaderValue::from_static("application/grpc");

/// Whether `headers` are [`tonic_headers`]' two, in either order, told
/// without hashing a name.
fn is_tonic_headers(headers: &HeaderMap) -> bool {
    headers.len() == 2
        && headers.iter().all(|(name, value)| {
            (*name == http::header::TE && *value == TE_TRAILERS)
                || (*name == http::header::CONTENT_TYPE && *value == CONTENT_TYPE_GRPC)
        })
        && headers.keys_len() == 2
}

/// Room for what a send adds to the caller's headers without growing the
/// map: `grpc-timeout`, the connection's `user-agent`, a `traceparent` and
/// a `baggage`.
const ADDED_HEADERS: usize = 4;

/// The caller's headers, as each send of its call gets them. A send's map
/// is consumed by hyper (h2 writes it on the connection's task), so each
/// send needs one of its own.
enum SendHeaders {
    /// tonic's two headers alone ([`tonic_headers`], a caller that set no
    /// metadata: most calls): the first send takes the caller's map (no
    /// copy), any later one writes the same two headers anew.
    Tonic(Mutex<Option<HeaderMap>>),
    /// Anything else: each send a copy, with room for what it adds.
    Caller(HeaderMap),
}

impl SendHeaders {
    /// The headers of the next send, before what the send adds.
    fn next(&self) -> HeaderMap {
        match self {
            SendHeaders::Tonic(first) => lock(first)
                .take()
                .unwrap_or_else(|| tonic_headers(2 + ADDED_HEADERS)),
            SendHeaders::Caller(headers) => {
                // `clone` would give a map with no room, which the headers
                // the send adds would grow (a reallocation each).
                let mut copy = HeaderMap::with_capacity(headers.len() + ADDED_HEADERS);
                // In order, each value of a name after its first.
                for (name, value) in headers {
                    copy.append(name.clone(), value.clone());
                }
                copy
            }
        }
    }
}

impl Attempts {
    /// The request of one send: the caller's headers with what the
    /// attempt adds (the time left, the trace context), the body again.
    fn request(&self, call: &CallCtx<'_>, span: &AttemptSpan) -> http::Request<tonic::body::Body> {
        let mut request = http::Request::new(self.replay.lend());
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = http::Version::HTTP_2;
        *request.headers_mut() = call.stamp(self.headers.next(), span);
        request
    }

    /// One send of an attempt, sent again at once (up to
    /// [`TRANSPARENT_RETRIES`] times, each in a span of its own) while the
    /// server never saw it and its body can be sent again; `answer` reads
    /// the response.
    async fn send_with<T, A, F>(
        &self,
        call: &CallCtx<'_>,
        attempt: u32,
        span: &mut AttemptSpan,
        answer: A,
    ) -> Result<T, Status>
    where
        A: Fn(http::Response<WireBody>) -> F,
        F: Future<Output = Result<T, Status>>,
    {
        let mut resent = 0;
        loop {
            // Again for a resend: the connection that failed it has gone.
            let mut sender = call.sender().await?;
            let status = match sender.call(self.request(call, span)).await {
                Ok(response) => return answer(response).await,
                Err(err) => transport_status(Status::from_error(err)),
            };
            if resent < TRANSPARENT_RETRIES
                && self.replay.is_resendable()
                && never_processed(&status)
            {
                resent += 1;
                call.resend(attempt, span, &status);
            } else {
                return Err(status);
            }
        }
    }
}

impl Sends<Unary> for Attempts {
    type Output = Read;

    fn send<'s>(
        &'s self,
        call: &'s CallCtx<'_>,
        attempt: u32,
        span: &'s mut AttemptSpan,
    ) -> impl Future<Output = Result<Read, Status>> + Send + 's {
        let limit = call.inner.settings.max_decoding_message_size;
        self.send_with(call, attempt, span, move |response| {
            read_unary(response, limit)
        })
    }

    fn trailer(output: &Read) -> Option<&MetadataMap> {
        Some(&output.trailers)
    }

    fn is_resendable(&self) -> bool {
        self.replay.is_resendable()
    }
}

impl Sends<Open> for Attempts {
    type Output = http::Response<WireBody>;

    fn send<'s>(
        &'s self,
        call: &'s CallCtx<'_>,
        attempt: u32,
        span: &'s mut AttemptSpan,
    ) -> impl Future<Output = Result<Self::Output, Status>> + Send + 's {
        let answered = |response: http::Response<WireBody>| async move {
            match Status::from_header_map(response.headers()) {
                // A trailers-only status other than OK (the server's; a
                // proxy's page is the sender's error already): no response
                // headers, so the stream has not opened (gRFC A6: a call
                // is committed by them). The caller has seen nothing but
                // a status, a unary attempt's answer, whatever the
                // method's kind, listed or not.
                Some(status) if status.code() != Code::Ok => Err(status),
                _ => Ok(response),
            }
        };
        self.send_with(call, attempt, span, answered)
    }

    fn trailer(_: &Self::Output) -> Option<&MetadataMap> {
        None
    }

    fn is_resendable(&self) -> bool {
        self.replay.is_resendable()
    }
}

/// A unary call's response, read whole: the head, the body's bytes as
/// they came (the framed message, handed on without a copy) and the
/// trailer.
struct Read {
    parts: http::response::Parts,
    data: Chunks,
    trailers: MetadataMap,
}

impl Read {
    /// The response tonic's decoder reads: the same head, bytes and
    /// trailer.
    fn into_response(self) -> http::Response<ChannelBody> {
        let body = ChannelBody {
            kind: Kind::Read {
                data: self.data,
                trailers: Some(self.trailers.into_headers()),
            },
        };
        http::Response::from_parts(self.parts, body)
    }
}

/// Reads a unary call's whole response and its status as tonic's
/// `Grpc::unary` reads them for the typed call (the same statuses, with
/// the same messages and metadata): a trailers-only status; one message,
/// not compressed; the trailer's `grpc-status`, else gRPC's mapping of the
/// HTTP status; a broken body as the connection's error. A message longer
/// than `limit` bytes ([`Settings::max_decoding_message_size`](super::Settings::max_decoding_message_size))
/// ends the call `ResourceExhausted` here ([`too_large`]), as the typed
/// call's does, whether it is the first or one sent after it; so does a
/// response whose frames together are longer than one message of `limit`
/// bytes and its head ([`too_long`]), so what a server sends after its
/// one message cannot make the call hold more. The bytes are kept as they
/// came, for the caller's decoder (which decodes and drops any message
/// after the first, as tonic's `Grpc::unary` does).
async fn read_unary<B>(response: http::Response<B>, limit: usize) -> Result<Read, Status>
where
    B: http_body::Body<Data = Bytes, Error = super::BoxError> + Unpin,
{
    let (parts, mut body) = response.into_parts();
    // A `grpc-status` in the head: a trailers-only status, or an `OK`
    // after which tonic reads the body's message and nothing of its
    // trailer (`Streaming::new_empty`).
    let ok_in_head = match parts
        .headers
        .contains_key(&GRPC_STATUS)
        .then(|| Status::from_header_map(&parts.headers))
        .flatten()
    {
        Some(status) if status.code() != Code::Ok => return Err(status),
        Some(_) => true,
        None => false,
    };
    // As tonic's `Grpc::unary` (`Grpc::client_streaming`): a status met
    // before the message has arrived whole carries its own metadata (a
    // trailer's), then the headers, which replace a name both carry
    // (`MetadataMap::merge`); one met after it (reading on to the
    // trailer) carries its own alone.
    let failed = |status: Status, whole: bool| {
        let mut status = transport_status(status);
        if !whole {
            let mut merged = std::mem::take(status.metadata_mut()).into_headers();
            merged.extend(parts.headers.clone());
            *status.metadata_mut() = MetadataMap::from_headers(merged);
        }
        status
    };
    // Each frame's head as tonic's decoder checks it, in its words.
    let http_status = parts.status;
    let check = |head: &[u8; FRAME_HEAD]| match head[0] {
        0 if message_len(head) > limit => Err(too_large(message_len(head), limit)),
        0 => Ok(()),
        1 => Err(Status::internal(
            "protocol error: received message with compressed-flag but no grpc-encoding was specified",
        )),
        flag => Err(Status::internal(format!(
            "protocol error: received message with invalid compression flag: {flag} (valid flags are 0 and 1) while receiving response with status: {http_status}"
        ))),
    };
    let mut data = Chunks::default();
    let mut len = 0usize;
    let mut frames = Frames::default();
    // Where the first frame (its head and message) ends, once its head is
    // read. A frame after it is kept for tonic's decoder, which decodes
    // and drops it (failing the call when it does not decode), as long
    // as the response's frames stay within one message of `limit` bytes
    // and its head: what a server sends after its one message cannot make
    // the call hold more.
    let mut end: Option<usize> = None;
    let whole = |end: Option<usize>, len: usize| end.is_some_and(|end| len >= end);
    let mut trailer = None;
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|err| failed(Status::from_error(err), whole(end, len)))?;
        match frame.into_data() {
            Ok(chunk) => {
                let before = len;
                let mut at = 0;
                while let Some((head, starts)) = frames.next_head(&chunk, &mut at) {
                    if let Err(status) = check(&head) {
                        return Err(failed(status, whole(end, before + starts)));
                    }
                    end.get_or_insert(FRAME_HEAD + message_len(&head));
                }
                len += chunk.len();
                if len > FRAME_HEAD + limit {
                    return Err(failed(too_long(len, limit), whole(end, before)));
                }
                if !chunk.is_empty() {
                    data.push(chunk);
                }
            }
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    // The last frame (as tonic's decoder reads it: nothing
                    // after the trailer is polled).
                    trailer = Some(trailers);
                    break;
                }
            }
        }
    }
    // As tonic's decoder ends: a body that ends mid-frame, without a
    // trailer, is a truncated stream; then the trailer's status (none
    // after an `OK` in the head); a message cut short by an `OK` trailer
    // is none.
    let whole = whole(end, len);
    if trailer.is_none() && frames.is_mid_frame() {
        return Err(failed(
            Status::internal("Unexpected EOF decoding stream."),
            whole,
        ));
    }
    if !ok_in_head && let Err(status) = end_status(trailer.as_ref(), parts.status) {
        return Err(failed(status, whole));
    }
    if !whole {
        return Err(Status::internal("Missing response message."));
    }
    Ok(Read {
        parts,
        data,
        trailers: MetadataMap::from_headers(trailer.unwrap_or_default()),
    })
}

/// Byte chunks in order, the first held inline: a unary message most often
/// comes, and is sent, in one chunk, which then needs no allocation.
#[derive(Default, Clone)]
struct Chunks {
    first: Option<Bytes>,
    rest: std::collections::VecDeque<Bytes>,
}

impl Chunks {
    /// Adds `chunk` after the others.
    fn push(&mut self, chunk: Bytes) {
        if self.first.is_none() && self.rest.is_empty() {
            self.first = Some(chunk);
        } else {
            self.rest.push_back(chunk);
        }
    }

    /// Takes the first chunk.
    fn pop_front(&mut self) -> Option<Bytes> {
        self.first.take().or_else(|| self.rest.pop_front())
    }

    /// The chunk at `index`, of chunks none of which was taken.
    fn get(&self, index: usize) -> Option<&Bytes> {
        match index {
            0 => self.first.as_ref(),
            _ => self.rest.get(index - 1),
        }
    }

    /// How many chunks there are.
    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }
}

/// A call's request body, kept as it is read (up to [`RETRY_BUFFER`]
/// bytes) so that another attempt sends it again: each attempt sends a
/// [`Lent`] body, which replays what was kept, then reads on; or, for a
/// body read whole before the first send ([`Replay::read_ahead`]), the
/// same bytes each time ([`Whole`]).
enum Replay {
    Reading(Arc<Mutex<Kept>>),
    Whole {
        /// What every send after the first sends.
        kept: Chunks,
        /// What the first send sends: the chunks as the caller's body gave
        /// them (slices of tonic's encoder buffer), which h2 frees once
        /// written, on the connection's task, as tonic's own channel
        /// lets them go; `kept` holds copies of the small ones
        /// ([`own`]).
        first: Mutex<Option<Chunks>>,
    },
}

impl Clone for Replay {
    fn clone(&self) -> Replay {
        match self {
            Replay::Reading(state) => Replay::Reading(state.clone()),
            Replay::Whole { kept, .. } => Replay::Whole {
                kept: kept.clone(),
                first: Mutex::new(None),
            },
        }
    }
}

struct Kept {
    /// The caller's body, read by the attempt under way; dropped once it
    /// has ended (by the task that read its end: hyper's connection task,
    /// as tonic's own channel drops it).
    source: Option<tonic::body::Body>,
    /// What was read of it, in order, while it fits the buffer.
    chunks: Chunks,
    len: usize,
    /// A frame read ahead ([`Replay::read_ahead`]) and not kept (data
    /// past the buffer, trailers, an error): the next frame a send reads
    /// after the kept chunks, as if read from the source then.
    held: Option<Result<Frame<Bytes>, Status>>,
    /// Read past the buffer (or committed): what was read is not kept, and
    /// nothing can be sent again.
    spent: bool,
    /// The latest attempt's body: an older one reads nothing more.
    epoch: u64,
}

impl Replay {
    fn new(source: tonic::body::Body) -> Replay {
        Replay::Reading(Arc::new(Mutex::new(Kept {
            source: Some(source),
            chunks: Chunks::default(),
            len: 0,
            held: None,
            spent: false,
            epoch: 0,
        })))
    }

    /// The caller's `source`, read in the caller's task, before the first
    /// send, as far as it is ready and fits the buffer: a unary stub's body
    /// (one message, encoded when read) is whole at once, and every send
    /// then has the same bytes ([`Whole`]), with no lock, and ends with its
    /// last DATA frame. What is not ready yet, or does not fit, is read by
    /// the sends as [`Replay::new`]'s.
    fn read_ahead(mut source: tonic::body::Body) -> Replay {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut chunks = Chunks::default();
        let mut first = Chunks::default();
        let mut len = 0;
        let mut held = None;
        loop {
            match Pin::new(&mut source).poll_frame(&mut cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) if len + data.len() <= RETRY_BUFFER => {
                        len += data.len();
                        chunks.push(own(&data));
                        first.push(data);
                    }
                    Ok(data) => {
                        held = Some(Ok(Frame::data(data)));
                        break;
                    }
                    Err(frame) => {
                        held = Some(Ok(frame));
                        break;
                    }
                },
                Poll::Ready(Some(Err(status))) => {
                    held = Some(Err(status));
                    break;
                }
                Poll::Ready(None) => {
                    return Replay::Whole {
                        kept: chunks,
                        first: Mutex::new(Some(first)),
                    };
                }
                Poll::Pending => break,
            }
        }
        Replay::Reading(Arc::new(Mutex::new(Kept {
            source: Some(source),
            chunks,
            len,
            held,
            spent: false,
            epoch: 0,
        })))
    }

    /// The body of the next send.
    fn lend(&self) -> tonic::body::Body {
        let state = match self {
            Replay::Reading(state) => state,
            Replay::Whole { kept, first } => {
                let chunks = lock(first).take().unwrap_or_else(|| kept.clone());
                return tonic::body::Body::new(Whole { chunks });
            }
        };
        let epoch = {
            let mut kept = lock(state);
            kept.epoch += 1;
            kept.epoch
        };
        // Unlocked: `Body::new` asks the body whether it has ended.
        tonic::body::Body::new(Lent {
            state: state.clone(),
            epoch,
            next: 0,
        })
    }

    /// Whether what was read can be sent again: none of it was let go.
    fn is_resendable(&self) -> bool {
        match self {
            Replay::Reading(state) => !lock(state).spent,
            Replay::Whole { .. } => true,
        }
    }

    /// The call is committed (its stream opened): nothing more is kept.
    fn commit(&self) {
        if let Replay::Reading(state) = self {
            let mut kept = lock(state);
            kept.spent = true;
            kept.chunks = Chunks::default();
        }
    }
}

/// tonic's encoder writes a request into a buffer of 8 KiB (its default
/// `buffer_size`, grown for a larger message) and hands on a slice of it,
/// which holds the whole buffer.
const ENCODER_BUFFER: usize = 8 * 1024;

/// `chunk` to keep for the call's life: a copy of its bytes when they are
/// fewer than the encoder's buffer, which the chunk holds. tonic's own
/// channel lets that buffer go once the request is written; a kept slice
/// would hold it until the call ends (64 calls of a small message in
/// flight: 512 KiB for a few bytes each, which the allocator then gives
/// back to the system and faults in again, batch after batch). A larger
/// chunk is most of its buffer, and is kept as it is (no copy).
fn own(chunk: &Bytes) -> Bytes {
    if chunk.len() < ENCODER_BUFFER {
        Bytes::copy_from_slice(chunk)
    } else {
        chunk.clone()
    }
}

fn lock<T>(state: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One send's request body of chunks all at hand: of a body read whole
/// ahead ([`Replay`]), or a typed unary call's one frame
/// ([`Whole::one`]). Its last DATA frame ends the stream.
pub(super) struct Whole {
    chunks: Chunks,
}

impl Whole {
    /// A body of one DATA frame, `chunk`, which ends the stream.
    pub(super) fn one(chunk: Bytes) -> Whole {
        Whole {
            chunks: Chunks {
                first: Some(chunk),
                rest: std::collections::VecDeque::new(),
            },
        }
    }
}

impl http_body::Body for Whole {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        Poll::Ready(self.chunks.pop_front().map(|chunk| Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.len() == 0
    }

    // No exact `size_hint`: hyper would add a `content-length` header,
    // which tonic's request, and the caller's body sent alone, have not.
}

/// One send's request body ([`Replay`]).
struct Lent {
    state: Arc<Mutex<Kept>>,
    epoch: u64,
    /// The next kept chunk to send.
    next: usize,
}

impl http_body::Body for Lent {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        let mut kept = lock(&this.state);
        let kept = &mut *kept;
        if kept.epoch != this.epoch {
            // A later send took over.
            return Poll::Ready(None);
        }
        if !kept.spent
            && let Some(chunk) = kept.chunks.get(this.next)
        {
            this.next += 1;
            return Poll::Ready(Some(Ok(Frame::data(chunk.clone()))));
        }
        let read = match kept.held.take() {
            Some(read) => read,
            None => {
                let Some(source) = kept.source.as_mut() else {
                    // Ended.
                    return Poll::Ready(None);
                };
                match Pin::new(&mut *source).poll_frame(cx) {
                    Poll::Ready(Some(read)) => read,
                    Poll::Ready(None) => {
                        kept.source = None;
                        return Poll::Ready(None);
                    }
                    Poll::Pending => return Poll::Pending,
                }
            }
        };
        match read {
            Ok(frame) => {
                if let Some(data) = frame.data_ref()
                    && !kept.spent
                {
                    kept.len += data.len();
                    if kept.len > RETRY_BUFFER {
                        kept.spent = true;
                        kept.chunks = Chunks::default();
                    } else {
                        kept.chunks.push(data.clone());
                        this.next = kept.chunks.len();
                    }
                }
                // Known now, so the frame just read carries END_STREAM
                // (no empty DATA frame after it), as the caller's body
                // sent alone would.
                if kept
                    .source
                    .as_ref()
                    .is_some_and(http_body::Body::is_end_stream)
                {
                    kept.source = None;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Err(status) => {
                // The caller's body failed (an encoding error): what it
                // sends cannot be sent again.
                kept.spent = true;
                kept.chunks = Chunks::default();
                Poll::Ready(Some(Err(status)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        let kept = lock(&self.state);
        kept.epoch != self.epoch
            || (kept.source.is_none()
                && kept.held.is_none()
                && (kept.spent || self.next >= kept.chunks.len()))
    }
}

/// The response body of a [`Channel`]'s call, as tonic's decoder reads
/// it: a unary call's, read whole before it was classified; or a
/// stream's, as it arrives, counted in the client's breaker once, at its
/// end (its trailer, its error, its deadline), as
/// [`Streaming`](super::Streaming) counts a typed stream. Its errors are
/// [`Status`](https://docs.rs/tonic/0.14/tonic/struct.Status.html)es (a broken connection's `Unavailable`, the deadline's
/// `DeadlineExceeded`, `Cancelled` after [`Setup::stop`](crate::Setup::stop)),
/// which tonic hands to the caller as they are.
pub struct ChannelBody {
    kind: Kind,
}

enum Kind {
    Read {
        data: Chunks,
        trailers: Option<HeaderMap>,
    },
    Live(Box<Live>),
}

impl fmt::Debug for ChannelBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Read { .. } => "read",
            Kind::Live(_) => "stream",
        };
        f.debug_struct("ChannelBody")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}

impl ChannelBody {
    fn live(live: Live) -> ChannelBody {
        ChannelBody {
            kind: Kind::Live(Box::new(live)),
        }
    }
}

/// An empty body, ended: what tonic's `InterceptedService` answers with
/// when an interceptor refuses a call, so that a tonic-generated client's
/// `with_interceptor(client.channel(), f)` takes a humus channel, as it
/// takes tonic's `Channel`.
impl Default for ChannelBody {
    fn default() -> ChannelBody {
        ChannelBody {
            kind: Kind::Read {
                data: Chunks::default(),
                trailers: None,
            },
        }
    }
}

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        match &mut self.kind {
            Kind::Read { data, trailers } => Poll::Ready(
                data.pop_front()
                    .map(Frame::data)
                    .or_else(|| trailers.take().map(Frame::trailers))
                    .map(Ok),
            ),
            Kind::Live(live) => live.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Read { trailers, .. } => trailers.is_none(),
            Kind::Live(live) => live.ended,
        }
    }
}

/// A stream's response body that settles its ticket once, at its end.
struct Live {
    /// Dropped (which cancels the HTTP/2 stream) once it ends at its
    /// deadline. A message over the client's decoding limit fails it
    /// `ResourceExhausted`.
    inner: Option<Limited<WireBody>>,
    settle: Option<Settle>,
    deadline: Option<Pin<Box<Sleep>>>,
    /// The deadline: which bound it is (its status names it), and how
    /// early a drop is still its.
    limit: Option<Deadline>,
    closed: ClosedFlag,
    /// The HTTP status, for a trailer without `grpc-status`.
    http: http::StatusCode,
    /// A trailers-only OK: the status of the stream's end.
    trailers_only: Option<MetadataMap>,
    ended: bool,
    /// A client-streaming call's: its stream must carry one message.
    one_response: bool,
    received: bool,
}

impl Live {
    fn new(
        inner: Limited<WireBody>,
        parts: &http::response::Parts,
        settle: Settle,
        deadline: Option<Deadline>,
        closed: ClosedFlag,
    ) -> Live {
        let trailers_only = parts
            .headers
            .contains_key("grpc-status")
            .then(|| MetadataMap::from_headers(parts.headers.clone()));
        Live {
            inner: Some(inner),
            settle: Some(settle),
            deadline: deadline.map(|d| Box::pin(tokio::time::sleep_until(d.at))),
            limit: deadline,
            closed,
            http: parts.status,
            trailers_only,
            ended: false,
            one_response: false,
            received: false,
        }
    }

    fn one_response(mut self, one: bool) -> Live {
        self.one_response = one;
        self
    }

    fn end(&mut self, how: End<'_>) {
        self.ended = true;
        if let Some(settle) = self.settle.take() {
            settle(how);
        }
    }

    fn deadline_passed(&self) -> bool {
        self.deadline
            .as_ref()
            .is_some_and(|d| Instant::now() >= d.deadline())
    }

    fn end_at_deadline(&mut self) -> Status {
        self.end(End::DeadlinePassed);
        self.inner = None;
        deadline_exceeded(self.limit.map(|d| d.bound), self.closed.addr())
    }

    /// Counts the stream's clean end with `trailer` (its `grpc-status`,
    /// as tonic reads it).
    fn finish(&mut self, trailer: Option<&HeaderMap>) {
        match end_status(trailer, self.http) {
            Ok(()) if self.one_response && !self.received => {
                let mut status = missing_response();
                if let Some(trailer) = trailer {
                    *status.metadata_mut() = MetadataMap::from_headers(trailer.clone());
                }
                self.end(End::Failed(&status));
            }
            Ok(()) => {
                let empty = MetadataMap::new();
                let trailer = trailer.map(|t| MetadataMap::from_headers(t.clone()));
                self.end(End::Finished(trailer.as_ref().unwrap_or(&empty)));
            }
            Err(status) => self.end(End::Failed(&status)),
        }
    }

    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(&mut *inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    // A stream whose messages keep coming is never idle:
                    // its deadline is read with each of them.
                    if self.deadline_passed() {
                        return Poll::Ready(Some(Err(self.end_at_deadline())));
                    }
                    self.received |= !data.is_empty();
                } else if let Some(trailer) = frame.trailers_ref() {
                    let trailer = trailer.clone();
                    self.finish(Some(&trailer));
                }
                return Poll::Ready(Some(Ok(frame)));
            }
            Poll::Ready(Some(Err(err))) => {
                if self.closed.is_closed() {
                    self.end(End::Closed);
                    return Poll::Ready(Some(Err(closing())));
                }
                let status = transport_status(Status::from_error(err));
                if self.deadline_passed() {
                    return Poll::Ready(Some(Err(self.end_at_deadline())));
                }
                self.end(End::Failed(&status));
                return Poll::Ready(Some(Err(status)));
            }
            Poll::Ready(None) => {
                // The end with no trailer: a trailers-only answer's (its
                // status was in the headers), else a missing status.
                let trailer = self.trailers_only.take().map(MetadataMap::into_headers);
                self.finish(trailer.as_ref());
                return Poll::Ready(None);
            }
            Poll::Pending => {}
        }
        if let Some(deadline) = self.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Some(Err(self.end_at_deadline())));
        }
        if !self.closed.is_closed() {
            return Poll::Pending;
        }
        self.end(End::Closed);
        Poll::Ready(Some(Err(closing())))
    }
}

impl Drop for Live {
    /// As a typed [`Streaming`](super::Streaming) dropped before its end:
    /// at its deadline it counts as the deadline, before it nothing.
    fn drop(&mut self) {
        if self.ended || self.settle.is_none() {
            return;
        }
        let at = self.limit.is_some_and(|d| at_deadline(&d, Instant::now()));
        if at {
            self.end(End::DeadlinePassed);
        }
    }
}

/// The status a stream ended with, as tonic's decoder reads its trailer:
/// its `grpc-status`; without one, gRPC's mapping of the HTTP status
/// (`Unknown` for a 200), with tonic's messages.
fn end_status(trailer: Option<&HeaderMap>, http: http::StatusCode) -> Result<(), Status> {
    if trailer.is_some_and(is_ok) {
        return Ok(());
    }
    if let Some(status) = trailer.and_then(Status::from_header_map) {
        return if status.code() == Code::Ok {
            Ok(())
        } else {
            Err(status)
        };
    }
    // tonic's `infer_grpc_status`, word for word.
    if http == http::StatusCode::OK {
        return Err(Status::unknown(
            "protocol error: missing grpc-status trailer, stream was terminated without a final status (possible truncation by a proxy or load balancer)",
        ));
    }
    Err(Status::new(
        http_to_grpc(http),
        format!(
            "grpc-status header missing, mapped from HTTP status code {}",
            http.as_u16()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A caller's body that yields `script` in order (a `Pending` wakes
    /// nothing: the tests poll again), then ends; like tonic's encoding
    /// body, it never says it has ended before it is read to its end.
    struct Script(VecDeque<Step>);

    /// One read of a body.
    type Step = Poll<Option<Result<Frame<Bytes>, Status>>>;

    impl http_body::Body for Script {
        type Data = Bytes;
        type Error = Status;

        fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Step {
            self.0.pop_front().unwrap_or(Poll::Ready(None))
        }
    }

    /// The default body, as tonic's interceptor answers with, is empty
    /// and ended.
    #[test]
    fn the_default_body_is_empty_and_ended() {
        let mut body = ChannelBody::default();
        assert!(http_body::Body::is_end_stream(&body));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(matches!(
            Pin::new(&mut body).poll_frame(&mut cx),
            Poll::Ready(None)
        ));
    }

    /// A path not listed is kept once, with its own name and fault point;
    /// once the process keeps as many as it may, a new path is `_OTHER`,
    /// and the paths already kept keep their descriptors.
    #[test]
    fn unlisted_paths_are_kept_up_to_a_bound() {
        let kept = unknown_in("/test.Unlisted/Kept", usize::MAX);
        assert_eq!(kept.full_name, "/test.Unlisted/Kept");
        assert_eq!(kept.point, "grpc:test.Unlisted/Kept");
        assert!(std::ptr::eq(kept, unknown("/test.Unlisted/Kept")));
        // With the bound reached (0 here: the set is the process's, shared
        // by every test of this binary), a new path is not kept.
        let other = unknown_in("/test.Unlisted/New", 0);
        assert_eq!(other.full_name, "_OTHER");
        assert_eq!(other.point, "grpc:_OTHER");
        assert!(std::ptr::eq(other, &OTHER));
        assert!(std::ptr::eq(kept, unknown_in("/test.Unlisted/Kept", 0)));
        // Not kept: under the real bound it gets its own descriptor.
        assert_eq!(
            unknown("/test.Unlisted/New").full_name,
            "/test.Unlisted/New"
        );
    }

    fn script(items: impl IntoIterator<Item = Step>) -> tonic::body::Body {
        tonic::body::Body::new(Script(items.into_iter().collect()))
    }

    fn data(bytes: &'static [u8]) -> Step {
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(bytes)))))
    }

    /// What one send of `replay` reads: its data and whether it ended
    /// with them (its last DATA frame carries END_STREAM), or the error.
    fn send(replay: &Replay) -> Result<(Vec<Bytes>, bool), Status> {
        let mut body = replay.lend();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut read = Vec::new();
        let mut ended_with_data = false;
        loop {
            match Pin::new(&mut body).poll_frame(&mut cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    read.push(frame.into_data().expect("data"));
                    ended_with_data = body.is_end_stream();
                    if ended_with_data {
                        return Ok((read, true));
                    }
                }
                Poll::Ready(Some(Err(status))) => return Err(status),
                Poll::Ready(None) => return Ok((read, ended_with_data)),
                Poll::Pending => {}
            }
        }
    }

    #[test]
    fn a_unary_body_is_read_ahead_and_each_send_ends_with_its_data() {
        let replay = Replay::read_ahead(script([data(b"\0\0\0\0\x01a"), Poll::Ready(None)]));
        assert!(matches!(replay, Replay::Whole { .. }));
        for _ in 0..2 {
            let (read, ended) = send(&replay).expect("sent");
            assert_eq!(read, [Bytes::from_static(b"\0\0\0\0\x01a")]);
            // One DATA frame with END_STREAM, no empty one after it.
            assert!(ended);
            assert!(replay.is_resendable());
        }
    }

    /// The buffer a chunk was sliced from, which says when it is freed.
    struct Buffer {
        bytes: Vec<u8>,
        freed: Arc<std::sync::atomic::AtomicBool>,
    }

    impl AsRef<[u8]> for Buffer {
        fn as_ref(&self) -> &[u8] {
            &self.bytes
        }
    }

    impl Drop for Buffer {
        fn drop(&mut self) {
            self.freed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn a_small_message_read_ahead_lends_the_encoders_buffer_to_the_first_send_only() {
        let freed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut bytes = vec![0u8; ENCODER_BUFFER];
        bytes[..6].copy_from_slice(b"\0\0\0\0\x01a");
        // As tonic's encoder hands on a message: a slice of its buffer.
        let chunk = Bytes::from_owner(Buffer {
            bytes,
            freed: freed.clone(),
        })
        .slice(..6);
        let replay = Replay::read_ahead(script([
            Poll::Ready(Some(Ok(Frame::data(chunk)))),
            Poll::Ready(None),
        ]));
        assert!(matches!(replay, Replay::Whole { .. }));
        // The first send has the buffer, as tonic's own channel sends it,
        // and lets it go once sent; the call keeps a copy.
        assert!(!freed.load(std::sync::atomic::Ordering::SeqCst));
        for _ in 0..2 {
            let (read, ended) = send(&replay).expect("sent");
            assert_eq!(read, [Bytes::from_static(b"\0\0\0\0\x01a")]);
            assert!(ended);
            drop(read);
            assert!(freed.load(std::sync::atomic::Ordering::SeqCst));
        }
    }

    #[test]
    fn a_body_not_ready_ahead_is_read_by_the_send_and_kept() {
        let replay = Replay::read_ahead(script([
            data(b"ab"),
            Poll::Pending,
            data(b"cd"),
            Poll::Ready(None),
        ]));
        assert!(matches!(replay, Replay::Reading(_)));
        let whole = [Bytes::from_static(b"ab"), Bytes::from_static(b"cd")];
        assert_eq!(send(&replay).expect("sent").0, whole);
        assert!(replay.is_resendable());
        assert_eq!(send(&replay).expect("sent again").0, whole);
    }

    #[test]
    fn a_body_failing_ahead_fails_its_first_send_which_is_not_sent_again() {
        let failed = Status::out_of_range("too large to encode");
        let replay = Replay::read_ahead(script([
            data(b"ab"),
            Poll::Ready(Some(Err(failed.clone()))),
        ]));
        assert!(replay.is_resendable());
        let status = send(&replay).expect_err("the body's error");
        assert_eq!(status.code(), failed.code());
        assert_eq!(status.message(), failed.message());
        assert!(!replay.is_resendable());
    }

    #[test]
    fn a_body_over_the_buffer_ahead_is_sent_once() {
        static BIG: [u8; RETRY_BUFFER + 1] = [7; RETRY_BUFFER + 1];
        let replay = Replay::read_ahead(script([data(b"ab"), data(&BIG), Poll::Ready(None)]));
        assert!(replay.is_resendable());
        let (read, _) = send(&replay).expect("sent");
        assert_eq!(read.len(), 2);
        assert_eq!(read[1].len(), RETRY_BUFFER + 1);
        assert!(!replay.is_resendable());
    }

    fn trailer(pairs: &[(&'static str, &'static [u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_static(name),
                http::HeaderValue::from_bytes(value).expect("a header value"),
            );
        }
        map
    }

    /// The channel's reading of a unary response, as the stock client
    /// sees it: `read_unary`'s status, or what tonic's `Grpc::unary`
    /// decodes of the response it hands on.
    async fn through_the_channel(
        response: http::Response<super::super::unary::tests::Script>,
    ) -> Result<tonic::Response<super::super::unary::tests::Cart>, Status> {
        let read = read_unary(response, 4 << 20).await?;
        let mut grpc =
            tonic::client::Grpc::new(super::super::unary::Answered(Some(read.into_response())));
        grpc.unary(
            tonic::Request::new(()),
            PathAndQuery::from_static("/"),
            tonic_prost::ProstCodec::<(), super::super::unary::tests::Cart>::default(),
        )
        .await
    }

    /// The typed reader's scripted responses, read by the channel and by
    /// tonic's `Grpc::unary` alone: the same message, metadata and
    /// extensions, or the same status (code, message, metadata, source).
    #[tokio::test]
    async fn a_unary_response_reads_through_the_channel_as_tonics_grpc_reads_it() {
        use super::super::unary::tests::{Cart, as_the_clients, cases, response, seen};
        for (status, head, steps) in &cases() {
            let tonic = {
                let mut grpc = tonic::client::Grpc::new(super::super::unary::Answered(Some(
                    response(*status, head, steps),
                )));
                grpc.unary(
                    tonic::Request::new(()),
                    PathAndQuery::from_static("/"),
                    tonic_prost::ProstCodec::<(), Cart>::default(),
                )
                .await
            };
            let ours = through_the_channel(response(*status, head, steps)).await;
            assert_eq!(
                seen(ours),
                as_the_clients(seen(tonic)),
                "HTTP {status}, head {head:?}, body {:?}",
                steps.len()
            );
        }
    }

    #[test]
    fn a_trailer_ends_a_call_as_tonic_reads_it() {
        let trailers = [
            trailer(&[("grpc-status", b"0")]),
            trailer(&[("grpc-status", b"0"), ("grpc-message", b"")]),
            trailer(&[("grpc-status", b"0"), ("grpc-message", b"fine%20thanks")]),
            // Not UTF-8 once decoded: tonic's status is Unknown.
            trailer(&[("grpc-status", b"0"), ("grpc-message", b"%FF")]),
            trailer(&[("grpc-status", b"0"), ("grpc-status-details-bin", b"")]),
            trailer(&[("grpc-status", b"0"), ("x-extra", b"1")]),
            trailer(&[("grpc-status", b"0"), ("grpc-status", b"14")]),
            trailer(&[("grpc-status", b"14"), ("grpc-status", b"0")]),
            trailer(&[("grpc-status", b"00")]),
            trailer(&[("grpc-status", b" 0")]),
            trailer(&[("grpc-status", b"14")]),
            trailer(&[("grpc-status", b"14"), ("grpc-message", b"down")]),
            trailer(&[("x-extra", b"1")]),
            trailer(&[]),
        ];
        for trailer in &trailers {
            let tonic = Status::from_header_map(trailer).map(|s| s.code());
            let ours = end_status(Some(trailer), http::StatusCode::OK);
            assert_eq!(ours.is_ok(), tonic == Some(Code::Ok), "{trailer:?}");
            if let Err(status) = ours {
                assert_eq!(
                    Some(status.code()),
                    tonic.or(Some(Code::Unknown)),
                    "{trailer:?}"
                );
            }
        }
    }
}
