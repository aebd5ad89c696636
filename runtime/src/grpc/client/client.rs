//! The `Client`: one dependency, one connection, one budget, one breaker.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::Stream;
use tokio::time::Instant;

use super::attempt::{self, Outbound};
use super::codec::encode_once;
use super::connection::Connection;
use super::stream::Holder;
use super::{Method, NewError, Settings, Streaming};
use crate::call::{Dependency, Refused, sections};
use crate::grpc::deadline::{Deadline, Inherited};
use crate::{Setup, health, telemetry};

/// A resilient gRPC client of one dependency ([design](crate::design::client)).
///
/// A `Client` is one dependency at one [`addr`](Settings::addr), over one
/// HTTP/2 connection, with one retry budget and one circuit breaker, shared
/// by every call and every task: build it once, where the service is set
/// up, and clone it (a cheap handle) wherever it is needed. Two clients of
/// one address have their own connection, budget and breaker.
///
/// [`Client::new`] dials nothing: the first call, or the first check of
/// [`connected`](Client::connected), dials, through the
/// [`Setup`]'s [`Host`](crate::Host). A dependency that is down fails calls
/// with `Unavailable` until it is reachable, and never fails `new`. When
/// the server sends a GOAWAY (its shutdown, or its `max_connection_age`),
/// the calls in flight finish and later calls go over a new connection.
/// After [`Setup::stop`] every call fails `Canceled` with the message `the
/// client connection is closing`; the client has no close of its own.
///
/// Generated typed clients call it through a static [`Method`] descriptor
/// per RPC ([`unary`](Client::unary), [`server_streaming`](Client::server_streaming),
/// [`client_streaming`](Client::client_streaming), [`streaming`](Client::streaming)).
///
/// Design: [one client per dependency](crate::design::client#one-client-per-dependency),
/// [the connection](crate::design::client#the-connection).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) settings: Settings,
    pub(super) conn: Arc<Connection>,
    /// The breaker, budget, backoff, recorder and failure injector every
    /// call runs with.
    pub(super) dependency: Dependency,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("addr", &self.inner.settings.addr)
            .field("connection", &self.inner.conn)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Builds the client of the dependency `settings` name, for `setup`:
    /// it dials through `setup`'s host, records with its telemetry,
    /// evaluates its failure injector, and registers the close of its
    /// connection with [`Setup::on_stop`]. Dials nothing.
    ///
    /// It runs every field's check again, and the checks that take two
    /// fields (`backoff_max` below `backoff_base`).
    ///
    /// # Errors
    ///
    /// [`NewError`] naming every bad field: a fault in the code that built
    /// `settings` (a service's main exits 1 on it).
    pub fn new(setup: &Setup, settings: Settings) -> Result<Client, NewError> {
        settings.check()?;
        let recorder = telemetry::ClientRecorder::new(setup.telemetry(), &settings.addr);
        let dependency =
            Dependency::new(setup, recorder, sections!(settings)).map_err(|e| match e {
                Refused::Breaker(e) => super::settings::breaker_refused(e),
                Refused::Budget(e) => super::settings::budget_refused(e),
            })?;
        let conn = Arc::new(Connection::new(setup.host().clone(), &settings));
        let closer = conn.closer();
        let hook = format!("closing the gRPC client's connection to {}", settings.addr);
        setup.on_stop_named(hook, move || async move {
            if let Some(conn) = closer.upgrade() {
                conn.close();
            }
        });
        Ok(Client {
            inner: Arc::new(Inner {
                settings,
                conn,
                dependency,
            }),
        })
    }

    /// The client's settings, as given to [`Client::new`].
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// A readiness monitor that is healthy once the client has connected
    /// to its dependency, and stays healthy from then on.
    ///
    /// It is unhealthy until the connection is first ready (dialled, its
    /// TLS handshake done, and the server's HTTP/2 settings received, as
    /// gRPC's clients require), then healthy through outages, GOAWAYs and
    /// idle closes: it latches, so an outage of the dependency, which hits
    /// every replica of the service at once, does not take them all out of
    /// their load balancer. Every monitor of one client reads the same
    /// latch. Until the connection has been ready, a check dials (if no
    /// dial is under way; the calls then use the connection it made) and
    /// waits until the connection is ready, is closed, or the check is
    /// dropped (a probe's timeout), dialling again after a failure with
    /// grpc-go's connection backoff (1 s, growing 1.6 times to
    /// [`Settings::connect_backoff_max`], 120 s by default), so
    /// a service started long before its dependency turns ready up to one
    /// backoff (plus the health check's interval) after the dependency
    /// listens. A check makes no RPC. After [`Setup::stop`] it is unhealthy.
    ///
    /// Use it for readiness only: restarting a service does not bring its
    /// dependency back.
    ///
    /// Design: [readiness](crate::design::client#readiness).
    pub fn connected(&self) -> health::Monitor {
        let conn = self.inner.conn.clone();
        health::Monitor::from_fn(move || conn.check())
    }

    /// This client as the channel of any tonic-generated client
    /// (`HealthClient::new(client.channel())`): its calls go through this
    /// client's attempts, breaker, budget, deadline, telemetry and fault
    /// points, as the typed client's do. A cheap handle; give it the
    /// descriptors of the services it calls
    /// ([`Channel::with_methods`](super::Channel::with_methods): humus-build's,
    /// or a descriptor set's, [`Methods::from_file_descriptor_set`](super::Methods::from_file_descriptor_set))
    /// so that each method keeps its kind and policy. The health and
    /// reflection services are known without them; any other method is
    /// sent once and bounded by [`Settings::timeout`] until its response
    /// headers (see [`Channel`](super::Channel)).
    ///
    /// Every response through the channel, listed or not, unary or
    /// stream, is held to the client's decoding limit
    /// ([`Settings::max_decoding_message_size`], 4 MiB by default) before
    /// the stock client's own decoder holds it to its own (tonic's
    /// `max_decoding_message_size` on the stub, 4 MiB by default): the
    /// smaller of the two wins. A message over the channel's limit ends
    /// the call `ResourceExhausted` (counted against the dependency); one
    /// within it but over the stub's is the stub's own `OutOfRange`, after
    /// the channel counted the call. To take larger messages, raise both.
    ///
    /// Design: [stock tonic clients](crate::design::client#stock-tonic-clients).
    pub fn channel(&self) -> super::Channel {
        super::Channel::new(self.inner.clone())
    }

    /// Makes a unary call of `method`: the request is encoded once, and
    /// sent in up to [`max_attempts`](Settings::max_attempts) attempts, as
    /// the classification of each decides (the method's
    /// [policy](super::MethodPolicy), then [`Settings::classify`]), bounded
    /// by the retry budget and the call's deadline: the earliest of
    /// [`Settings::timeout`], the request's own `grpc-timeout`
    /// ([`tonic::Request::set_timeout`](https://docs.rs/tonic/0.14/tonic/struct.Request.html#method.set_timeout)) and the deadline inherited from the
    /// RPC being served ([`Inherited`](crate::grpc::deadline::Inherited)), which covers every attempt and
    /// every wait between them. The deadline and the call's context are
    /// taken when this method is called, not when the future is first
    /// polled. Each attempt passes the circuit breaker
    /// first; a rejection ends the call at once with `Unavailable`, the
    /// rejection's message, and the [`circuit::Rejected`](crate::circuit::Rejected) as its source
    /// (so a caller can tell nothing was sent). The wait before a retry is
    /// the larger of the backoff and the server's pushback; a pushback
    /// longer than [`Settings::backoff_max`] ends the call. A caller who
    /// drops the returned future before the deadline gives up: nothing is
    /// counted; dropped at the deadline (within [`DEADLINE_SLACK`](super::DEADLINE_SLACK)), the
    /// call counts as the deadline, a failure (see the
    /// [module docs](super#deadlines)). With
    /// [`Settings::attempt_timeout`] set, each attempt has the earlier of
    /// the call's deadline and its own: one still under way when its own
    /// passes is cancelled and ends `DeadlineExceeded`
    /// ([`AttemptTimeout`](super::AttemptTimeout)), a failure, retried
    /// unless the method is never sent twice.
    ///
    /// The request's metadata is sent with every attempt; its extensions
    /// are not sent, but an [`opentelemetry::Context`](https://docs.rs/opentelemetry/0.33/opentelemetry/context/struct.Context.html) among them is the
    /// call's context (else the current one, when this method is called:
    /// `.with_context(cx)` on the returned future is too late; attach `cx`
    /// around the call instead, `async move { .. }.with_context(cx)`).
    /// Each attempt tells the
    /// server the time left (before the call's deadline, or the attempt's
    /// own if earlier) as its `grpc-timeout`, truncated to the finest unit
    /// its 8 digits allow (so a server sees less than a microsecond less
    /// than is left below 100 s, never more, and a humus server's
    /// handler's own calls end by its deadline before this call cuts it);
    /// the call itself ends at its deadline.
    ///
    /// # Errors
    ///
    /// The last attempt's status: `DeadlineExceeded` once the deadline has
    /// passed (its message names the dependency and which of the three
    /// bounds it was: `carts:9090: the call's deadline passed: the client's
    /// timeout setting, 10s`), or the
    /// last attempt's own timeout, `Canceled` (`the client connection is closing`) after
    /// [`Setup::stop`]. When the budget refused a retry, `max_attempts` was
    /// reached, or the deadline came before the next attempt, its source is
    /// a [`NoRetry`](super::NoRetry) saying which.
    ///
    /// # Panics
    ///
    /// When polled outside a tokio runtime, or on one without its time and
    /// I/O drivers (`Builder::enable_all`): the client's timers, dials and
    /// connection task run on tokio. If `method.full_name` is not a valid
    /// HTTP path, which generated descriptors never are; and whatever a
    /// classify or breaker policy function panics with (nothing is
    /// caught).
    ///
    /// Design: [retries](crate::design::client#retries), [classification](crate::design::client#classification),
    /// [the circuit breaker](crate::design::client#the-circuit-breaker).
    pub fn unary<Req, Resp>(
        &self,
        method: &'static Method,
        request: tonic::Request<Req>,
    ) -> impl Future<Output = Result<tonic::Response<Resp>, tonic::Status>> + Send + '_
    where
        Req: prost::Message + Send + 'static,
        Resp: prost::Message + Default + Send + 'static,
    {
        attempt::unary(&self.inner, method, request)
    }

    /// Opens a server-streaming call of `method`.
    ///
    /// Only the open is retried, as a unary attempt is (through the
    /// breaker, with the backoff and the budget, but not
    /// [`Settings::timeout`]: a stream lives as long as its caller wants,
    /// and ends with the request's own `grpc-timeout` or the inherited
    /// deadline, taken when this method is called). Each attempt to open
    /// it is bounded by [`Settings::attempt_timeout`], if set, until the
    /// server's response headers; the open stream is not (its
    /// `grpc-timeout` is the call's deadline alone). A stream that opened
    /// (the server answered with its response headers) is never retried:
    /// [`Streaming`] counts it in the breaker once, when it ends. A
    /// trailers-only status (the server's answer with no response
    /// headers, such as a handler's error before any message) has not
    /// opened it: that attempt failed with the status, classified,
    /// retried and counted as a unary attempt's.
    ///
    /// # Errors
    ///
    /// The status of the last attempt to open the stream.
    ///
    /// # Panics
    ///
    /// As [`unary`](Client::unary).
    ///
    /// Design: [streams](crate::design::client#streams).
    pub fn server_streaming<Req, Resp>(
        &self,
        method: &'static Method,
        request: tonic::Request<Req>,
    ) -> impl Future<Output = Result<tonic::Response<Streaming<Resp>>, tonic::Status>> + Send + '_
    where
        Req: prost::Message + Send + 'static,
        Resp: prost::Message + Default + Send + 'static,
    {
        let request = request.map(|message| Outbound::One(encode_once(&message)));
        attempt::open::<futures_util::stream::Empty<Req>, Req, Resp>(
            &self.inner,
            method,
            request,
            false,
        )
    }

    /// Makes a client-streaming call of `method`: it streams the
    /// request's messages and returns the one response.
    ///
    /// The open is retried as [`server_streaming`](Client::server_streaming)'s
    /// is, as long as no attempt has read the request stream (so a stream
    /// never polled, refused by a breaker or a dial, is sent whole by the
    /// next attempt); once any attempt has read it, the call is not
    /// retried. The call counts in the breaker once, at its one response
    /// (or its error); a server that ends it OK without a message makes it
    /// `Internal` (`Missing response message.`), counted as that.
    ///
    /// # Errors
    ///
    /// The call's status.
    ///
    /// # Panics
    ///
    /// As [`unary`](Client::unary).
    ///
    /// Design: [streams](crate::design::client#streams).
    pub fn client_streaming<S, Req, Resp>(
        &self,
        method: &'static Method,
        request: tonic::Request<S>,
    ) -> impl Future<Output = Result<tonic::Response<Resp>, tonic::Status>> + Send + '_
    where
        S: Stream<Item = Req> + Send + 'static,
        Req: prost::Message + Send + 'static,
        Resp: prost::Message + Default + Send + 'static,
    {
        let open = self.streaming_counted::<S, Req, Resp>(method, request, true);
        async move {
            let (headers, mut stream, extensions) = open.await?.into_parts();
            let message = match stream.message().await {
                Ok(Some(message)) => message,
                // Counted as INTERNAL by the stream's end: see `Streaming`.
                Ok(None) => return Err(super::stream_end::missing_response()),
                Err(status) => return Err(status),
            };
            let mut metadata = headers.into_headers();
            if let Some(trailers) = stream.trailers().await? {
                metadata.extend(trailers.into_headers());
            }
            Ok(tonic::Response::from_parts(
                tonic::metadata::MetadataMap::from_headers(metadata),
                message,
                extensions,
            ))
        }
    }

    /// Opens a bidirectional-streaming call of `method`.
    ///
    /// The open is retried as [`server_streaming`](Client::server_streaming)'s
    /// is, as long as no attempt has read the request stream; once open,
    /// the stream is never retried, and [`Streaming`] counts it in the
    /// breaker once, when it ends.
    ///
    /// # Errors
    ///
    /// The status of the last attempt to open the stream.
    ///
    /// # Panics
    ///
    /// As [`unary`](Client::unary).
    ///
    /// Design: [streams](crate::design::client#streams).
    pub fn streaming<S, Req, Resp>(
        &self,
        method: &'static Method,
        request: tonic::Request<S>,
    ) -> impl Future<Output = Result<tonic::Response<Streaming<Resp>>, tonic::Status>> + Send + '_
    where
        S: Stream<Item = Req> + Send + 'static,
        Req: prost::Message + Send + 'static,
        Resp: prost::Message + Default + Send + 'static,
    {
        self.streaming_counted(method, request, false)
    }

    /// [`streaming`](Client::streaming); `one_response` for a
    /// client-streaming call, whose stream must carry one message.
    fn streaming_counted<S, Req, Resp>(
        &self,
        method: &'static Method,
        request: tonic::Request<S>,
        one_response: bool,
    ) -> impl Future<Output = Result<tonic::Response<Streaming<Resp>>, tonic::Status>> + Send + '_
    where
        S: Stream<Item = Req> + Send + 'static,
        Req: prost::Message + Send + 'static,
        Resp: prost::Message + Default + Send + 'static,
    {
        let request = request.map(|stream| Outbound::Many(Holder::new(Box::pin(stream))));
        attempt::open::<S, Req, Resp>(&self.inner, method, request, one_response)
    }
}

/// The deadline of a call made `now`, and which bound it is: the earliest
/// of `timeout` (none for a stream), the request's own `grpc-timeout`
/// (`own`, as [`own_timeout`] reads it) and the deadline inherited from the
/// RPC being served ([`Inherited::current`]). Of two at the same instant,
/// the setting names it before the request's own, and either before the
/// inherited one ([`Deadline::earliest`]).
pub(super) fn deadline(
    now: Instant,
    timeout: Option<Duration>,
    own: Option<Duration>,
) -> Option<Deadline> {
    let inherited = Inherited::current_stepped();
    Deadline::earliest(now, timeout, own, inherited.map(|(at, _)| at)).map(|d| d.stepped(inherited))
}

/// The request's own `grpc-timeout` (tonic's `Request::set_timeout`), if
/// it has one that parses.
pub(super) fn own_timeout(metadata: &tonic::metadata::MetadataMap) -> Option<Duration> {
    // An empty map (most calls) is not searched (that parses the key).
    (!metadata.is_empty())
        .then(|| metadata.get(GRPC_TIMEOUT))
        .flatten()
        .and_then(|v| parse_grpc_timeout(v.as_bytes()))
}

use crate::grpc::wire::{GRPC_TIMEOUT, parse_grpc_timeout};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::deadline::Bound;

    #[test]
    fn the_earlier_deadline_wins_and_names_its_bound() {
        let now = Instant::now();
        let mut request = tonic::Request::new(());
        let deadline = |now, timeout, metadata: &tonic::metadata::MetadataMap| {
            deadline(now, timeout, own_timeout(metadata)).map(|d| (d.at, d.bound))
        };
        let (s2, s10, s20) = (
            Duration::from_secs(2),
            Duration::from_secs(10),
            Duration::from_secs(20),
        );
        assert_eq!(deadline(now, None, request.metadata()), None);
        assert_eq!(
            deadline(now, Some(s10), request.metadata()),
            Some((now + s10, Bound::Setting(s10)))
        );
        request.set_timeout(s2);
        assert_eq!(
            deadline(now, Some(s10), request.metadata()),
            Some((now + s2, Bound::Request(s2)))
        );
        request.set_timeout(s20);
        assert_eq!(
            deadline(now, Some(s10), request.metadata()),
            Some((now + s10, Bound::Setting(s10)))
        );
        assert_eq!(
            deadline(now, None, request.metadata()),
            Some((now + s20, Bound::Request(s20)))
        );
    }
}
