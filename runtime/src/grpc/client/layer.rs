//! Per-attempt layers: tower layers and tonic interceptors around each send
//! of an attempt ([design](crate::design::client#per-attempt-layers)).
//!
//! The stack is built once per client, over [`Wire`], the send on the
//! connection. Each send hands the wire its connection's handle in the
//! request's extensions (the dial is the attempt's, before the layers), and
//! the wire marks the answers that came from the server, so that what a
//! layer answered or failed with is told apart from the server's answer
//! and from the connection's errors.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use tonic::Status;
use tonic::body::Body;
use tower::ServiceExt as _;
use tower::util::BoxCloneSyncService;
use tower_layer::Layer;
use tower_service::Service;

use super::connection::{AttemptBody, SendRequest, mapped_error, send_on};
use super::{AttemptTimeout, Settings};
use crate::grpc::wire::{head_error, is_trailers_only};

/// An error of any type, as tower's middleware returns them.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// One send of one attempt, as a per-attempt layer wraps it: an
/// `http::Request` whose body is the encoded request (its headers the
/// attempt's metadata: `grpc-timeout`, `traceparent`, `baggage`, the
/// caller's own), answered by an `http::Response` or an error.
///
/// Layers given to [`Settings::layer`] wrap a service of this type; what a
/// layer makes of it is boxed back into one.
pub type AttemptService = BoxCloneSyncService<http::Request<Body>, http::Response<Body>, BoxError>;

/// One layer, type-erased: wraps the service below it.
type Apply = Arc<dyn Fn(AttemptService) -> AttemptService + Send + Sync>;

/// The per-attempt layers of a client ([`Settings::layers`]), outermost
/// first: what [`Settings::layer`] and [`Settings::interceptor`] add to.
/// Empty by default, which costs the calls nothing.
#[derive(Clone, Default)]
pub struct AttemptLayers {
    layers: Vec<Apply>,
}

impl AttemptLayers {
    /// How many layers there are.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// Whether there is none (the client then sends each attempt straight
    /// over its connection).
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// The stack over the wire, if there is any layer: the first layer
    /// added is the outermost, as in tower's `ServiceBuilder`.
    pub(super) fn stack(&self) -> Option<AttemptService> {
        if self.layers.is_empty() {
            return None;
        }
        let mut service = AttemptService::new(Wire);
        for layer in self.layers.iter().rev() {
            service = layer(service);
        }
        Some(service)
    }
}

impl fmt::Debug for AttemptLayers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AttemptLayers")
            .field("len", &self.layers.len())
            .finish()
    }
}

impl Settings {
    /// Adds a tower layer around each send of every attempt, inside the
    /// retries and the breaker: it runs once per attempt (and again for a
    /// transparent resend of one the server never saw), after the breaker
    /// admitted it and after its failure-injection point, on the attempt's
    /// own request, whose headers carry the attempt's metadata (its
    /// `grpc-timeout`, its trace context) and may be changed. The first
    /// layer added is the outermost. The layer wraps the client once
    /// ([`Client::new`](super::Client::new) calls its `layer`), so state it
    /// keeps (a limit, a cache) is shared by every call of the client.
    ///
    /// An error the layer returns ends the attempt with a status: the
    /// [`Status`](https://docs.rs/tonic/0.14/tonic/struct.Status.html) the error is or carries in its `source()` chain (its code,
    /// message and metadata), else `Unknown` with the error's message; its
    /// source is a [`LayerError`] holding the layer's error, and it is
    /// classified, retried and counted as any attempt's status (the
    /// default classification takes `Unknown` for the dependency's answer:
    /// not retried, a success for the breaker). Two of tower's errors are
    /// the client's own facts instead, whatever the classify functions
    /// say:
    ///
    /// - `Elapsed` (a `TimeoutLayer`'s): the attempt's timeout, as
    ///   [`attempt_timeout`](Settings::attempt_timeout)'s, `DeadlineExceeded`
    ///   with an [`AttemptTimeout`] (holding the [`LayerError`]) as source,
    ///   a failure for the breaker, retried unless the method is never
    ///   sent twice;
    /// - `Overloaded` (a `LoadShedLayer`'s, over a full
    ///   `ConcurrencyLimitLayer` say): `Unavailable`, naming the shedding;
    ///   nothing was sent, so it counts nothing in the breaker and is not
    ///   retried (another attempt would meet the same full limit), as a
    ///   breaker's rejection ([`LayerError::is_shed`]).
    ///
    /// To decide another code for a layer's own error, have the layer
    /// return a `Status` (or an error carrying one as its source), such as
    /// `Status::unavailable`: its code is then the attempt's. A
    /// trailers-only response the layer answers with itself (a
    /// `grpc-status` in its headers, as tonic's interceptors answer an
    /// `Err`) ends the attempt with that status, with a [`LayerError`] as
    /// source too; for a stream it is a failed open, retried as its status
    /// says. An error of the connection the layer passes on (hyper's) is
    /// the connection's, as without layers.
    ///
    /// Each attempt's timeout is a setting of its own,
    /// [`attempt_timeout`](Settings::attempt_timeout), which needs no
    /// layer; a layer adds what the client has not, such as a limit on the
    /// calls in flight:
    ///
    /// ```
    /// use std::time::Duration;
    /// use humus::grpc::client::Settings;
    ///
    /// let settings = Settings {
    ///     addr: "carts:9090".into(),
    ///     // Each attempt ends after 1 s, a failure, and is retried.
    ///     attempt_timeout: Some(Duration::from_secs(1)),
    ///     ..Settings::default()
    /// }
    /// // At most 64 attempts in flight; one more fails at once,
    /// // `Unavailable`, counting nothing against carts.
    /// .layer(tower::load_shed::LoadShedLayer::new())
    /// .layer(tower::limit::ConcurrencyLimitLayer::new(64));
    /// assert_eq!(settings.layers.len(), 2);
    /// ```
    ///
    /// Design: [per-attempt layers](crate::design::client#per-attempt-layers).
    #[must_use]
    pub fn layer<L, S, B>(mut self, layer: L) -> Settings
    where
        L: Layer<AttemptService, Service = S> + Send + Sync + 'static,
        S: Service<http::Request<Body>, Response = http::Response<B>>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        self.layers
            .layers
            .push(Arc::new(move |inner: AttemptService| {
                AttemptService::new(
                    layer
                        .layer(inner)
                        .map_response(|response: http::Response<B>| response.map(Body::new))
                        .map_err(Into::into),
                )
            }));
        self
    }

    /// Adds a tonic [`Interceptor`](tonic::service::Interceptor) around each
    /// send of every attempt: [`Settings::layer`] with tonic's
    /// [`InterceptorLayer`](tonic::service::InterceptorLayer). It sees the
    /// attempt's metadata (`grpc-timeout`, `traceparent`, the caller's),
    /// may change it, and runs again for each attempt, so a token it stamps
    /// is fresh on every retry. An `Err(status)` it returns is answered as
    /// a trailers-only response, and ends the attempt with that status
    /// (retried if its code says so), with a [`LayerError`] as its source.
    ///
    /// ```
    /// use humus::grpc::client::Settings;
    /// use tonic::metadata::MetadataValue;
    ///
    /// let settings = Settings {
    ///     addr: "carts:9090".into(),
    ///     ..Settings::default()
    /// }
    /// .interceptor(|mut request: tonic::Request<()>| {
    ///     // A token read on each attempt: a retry carries a fresh one.
    ///     let token: MetadataValue<_> = "Bearer t0k3n".parse().expect("ASCII");
    ///     request.metadata_mut().insert("authorization", token);
    ///     Ok(request)
    /// });
    /// assert_eq!(settings.layers.len(), 1);
    /// ```
    ///
    /// Design: [per-attempt layers](crate::design::client#per-attempt-layers).
    #[must_use]
    pub fn interceptor<I>(self, interceptor: I) -> Settings
    where
        I: tonic::service::Interceptor + Clone + Send + Sync + 'static,
    {
        self.layer(tonic::service::InterceptorLayer::new(interceptor))
    }
}

/// The source of a status a per-attempt layer ended an attempt with: the
/// layer's error, or nothing if the layer answered with a trailers-only
/// response of its own.
///
/// The client's own view of a failed connection stops here: an I/O error
/// a layer returns is the layer's (`Unknown`), not a broken connection.
pub struct LayerError {
    error: Option<BoxError>,
}

impl LayerError {
    /// The `LayerError` of `status`, if a per-attempt layer ended the
    /// attempt with it: in its `source()` chain (a call that could not be
    /// retried again has a [`NoRetry`](super::NoRetry) first).
    pub fn from_status(status: &Status) -> Option<&LayerError> {
        crate::chain::find(status.source())
    }

    /// The layer's error; `None` when the layer answered with a
    /// trailers-only response.
    pub fn error(&self) -> Option<&(dyn StdError + Send + Sync + 'static)> {
        self.error.as_deref()
    }

    /// Whether the layer shed the attempt: its error is, or carries,
    /// tower's `Overloaded` (a `LoadShedLayer` over a service that was not
    /// ready, such as a full `ConcurrencyLimitLayer`). Nothing was sent:
    /// the attempt ends `Unavailable`, counts nothing in the breaker, and
    /// is not retried ([`classify_attempt`](super::classify_attempt)).
    pub fn is_shed(&self) -> bool {
        self.error
            .as_deref()
            .is_some_and(|e| in_chain::<tower::load_shed::error::Overloaded>(e))
    }
}

impl fmt::Debug for LayerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LayerError")
            .field("error", &self.error)
            .finish()
    }
}

impl fmt::Display for LayerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.error {
            Some(error) => write!(f, "a per-attempt layer failed the attempt: {error}"),
            None => f.write_str("a per-attempt layer answered the attempt itself"),
        }
    }
}

impl StdError for LayerError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.error
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

/// The connection's handle, handed to the [`Wire`] in the request's
/// extensions by each send.
#[derive(Clone)]
pub(super) struct Wired(pub(super) SendRequest);

/// Marks a response with a `grpc-status` in its headers (a trailers-only
/// answer) as the server's.
#[derive(Clone, Copy)]
struct FromWire;

/// An error of the connection (hyper's), through the layers.
#[derive(Debug)]
struct WireError(hyper::Error);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl StdError for WireError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&self.0)
    }
}

/// What a request that reached the wire without its connection's handle
/// fails with: a layer replaced its extensions.
#[derive(Debug, thiserror::Error)]
#[error(
    "the request reached the connection without humus's handle in its extensions: a per-attempt layer replaced the request's extensions (keep them, as http::Request::into_parts and from_parts do)"
)]
struct NoHandle;

/// The bottom of the stack: the send on the connection whose handle the
/// request carries.
#[derive(Clone, Copy)]
struct Wire;

impl Service<http::Request<Body>> for Wire {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<http::Response<Body>, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        let Some(Wired(mut send)) = request.extensions_mut().remove::<Wired>() else {
            return Box::pin(std::future::ready(Err(BoxError::from(NoHandle))));
        };
        Box::pin(send_on(&mut send, request).map(|sent| match sent {
            Ok(mut response) => {
                if is_trailers_only(response.headers()) {
                    response.extensions_mut().insert(FromWire);
                }
                Ok(response.map(Body::new))
            }
            Err(err) => Err(BoxError::from(WireError(err))),
        }))
    }
}

/// A stack whose one send was made: what a [`Sender`](super::connection::Sender)
/// keeps after its call (boxing it allocates nothing).
#[derive(Clone, Copy)]
struct Spent;

#[derive(Debug, thiserror::Error)]
#[error("this attempt's sender was used twice: each send takes a new one")]
struct Twice;

impl Service<http::Request<Body>> for Spent {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = std::future::Ready<Result<http::Response<Body>, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<Body>) -> Self::Future {
        std::future::ready(Err(BoxError::from(Twice)))
    }
}

/// Sends `request` through the layers `stack` (taken out of `slot`, which
/// keeps a spent one), over the connection `send`; its answer as tonic
/// reads it, with what a layer answered or failed with made a status of
/// its own ([`Settings::layer`]).
pub(super) fn send_layered(
    slot: &mut AttemptService,
    send: &SendRequest,
    mut request: http::Request<Body>,
) -> impl Future<Output = Result<http::Response<AttemptBody>, BoxError>> + Send + use<> {
    request.extensions_mut().insert(Wired(send.clone()));
    let stack = std::mem::replace(slot, AttemptService::new(Spent));
    stack.oneshot(request).map(|sent| match sent {
        Ok(response) => answered(response),
        Err(err) => Err(failed(err)),
    })
}

/// The stack's response: a trailers-only answer no server gave (a layer's)
/// is the attempt's error; any other goes to tonic.
fn answered(response: http::Response<Body>) -> Result<http::Response<AttemptBody>, BoxError> {
    // A proxy's page the connection mapped (its `HttpAnswer` mark, kept
    // through the layers): the attempt's error, as without layers.
    let response = mapped_error(response)?;
    if response.extensions().get::<FromWire>().is_none()
        && let Some(mut status) = head_error(response.headers())
    {
        status.set_source(Arc::new(LayerError { error: None }));
        return Err(Box::new(status));
    }
    Ok(response.map(|body| AttemptBody::Layered { body }))
}

/// The stack's error: the connection's as tonic would have had it without
/// layers; a layer's made a status with a [`LayerError`] as its source.
fn failed(err: BoxError) -> BoxError {
    let err = match err.downcast::<WireError>() {
        Ok(wire) => return Box::new(wire.0),
        Err(err) => err,
    };
    if in_chain::<WireError>(&*err) {
        // A layer wrapped the connection's error: still the connection's.
        return err;
    }
    if in_chain::<tower::timeout::error::Elapsed>(&*err) {
        // The layer's timeout of the attempt: the client's own.
        return Box::new(AttemptTimeout::of_layer(LayerError { error: Some(err) }));
    }
    let mut status = if in_chain::<tower::load_shed::error::Overloaded>(&*err) {
        Status::unavailable(format!(
            "a per-attempt layer shed the attempt, nothing was sent: {err}"
        ))
    } else {
        match find_status(&*err) {
            Some(theirs) => Status::with_details_and_metadata(
                theirs.code(),
                theirs.message().to_owned(),
                bytes::Bytes::copy_from_slice(theirs.details()),
                theirs.metadata().clone(),
            ),
            None => Status::unknown(err.to_string()),
        }
    };
    status.set_source(Arc::new(LayerError { error: Some(err) }));
    Box::new(status)
}

/// The first [`Status`] in `err`'s `source()` chain, `err` included.
fn find_status<'e>(err: &'e (dyn StdError + 'static)) -> Option<&'e Status> {
    crate::chain::find(Some(err))
}

/// Whether an error of type `E` is in `err`'s `source()` chain, `err`
/// included.
fn in_chain<E: StdError + 'static>(err: &(dyn StdError + 'static)) -> bool {
    crate::chain::find::<E>(Some(err)).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_error_is_unknown_with_the_layers_error_as_source() {
        let err = failed(Box::new(std::io::Error::other("no token")));
        let status = err.downcast::<Status>().expect("a status");
        assert_eq!(status.code(), tonic::Code::Unknown);
        assert_eq!(status.message(), "no token");
        let layer = LayerError::from_status(&status).expect("a LayerError");
        assert!(layer.error().unwrap().is::<std::io::Error>());
    }

    #[test]
    fn towers_elapsed_is_the_attempts_timeout_and_overloaded_is_shed() {
        let elapsed = failed(Box::new(tower::timeout::error::Elapsed::new()))
            .downcast::<Status>()
            .unwrap();
        assert_eq!(elapsed.code(), tonic::Code::DeadlineExceeded);
        let timeout = AttemptTimeout::from_status(&elapsed).expect("the attempt's timeout");
        assert_eq!(timeout.after(), None);
        let layer = LayerError::from_status(&elapsed).expect("the layer's error, kept");
        assert!(!layer.is_shed());
        assert!(
            layer
                .error()
                .unwrap()
                .is::<tower::timeout::error::Elapsed>()
        );

        let shed = failed(Box::new(tower::load_shed::error::Overloaded::new()))
            .downcast::<Status>()
            .unwrap();
        assert_eq!(shed.code(), tonic::Code::Unavailable);
        assert_eq!(
            shed.message(),
            "a per-attempt layer shed the attempt, nothing was sent: service overloaded"
        );
        assert!(LayerError::from_status(&shed).unwrap().is_shed());
        assert!(AttemptTimeout::from_status(&shed).is_none());
    }

    #[derive(Debug, thiserror::Error)]
    #[error("wrapped")]
    struct Wrapped(#[source] Status);

    #[test]
    fn a_status_in_the_chain_gives_its_code_message_and_metadata() {
        let mut md = tonic::metadata::MetadataMap::new();
        md.insert("grpc-retry-pushback-ms", "10".parse().unwrap());
        let theirs = Status::with_metadata(tonic::Code::Unavailable, "later", md);
        let status = failed(Box::new(Wrapped(theirs)))
            .downcast::<Status>()
            .unwrap();
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(status.message(), "later");
        assert_eq!(
            status.metadata().get("grpc-retry-pushback-ms").unwrap(),
            "10"
        );
        assert!(LayerError::from_status(&status).is_some());
    }

    #[test]
    fn a_layers_trailers_only_answer_is_its_status_and_the_servers_is_kept() {
        let trailers_only = |code: tonic::Code| {
            let (parts, ()) = Status::new(code, "no").into_http::<()>().into_parts();
            http::Response::from_parts(parts, Body::empty())
        };
        let err = answered(trailers_only(tonic::Code::PermissionDenied)).unwrap_err();
        let status = err.downcast::<Status>().unwrap();
        assert_eq!(status.code(), tonic::Code::PermissionDenied);
        assert!(LayerError::from_status(&status).unwrap().error().is_none());
        let mut theirs = trailers_only(tonic::Code::PermissionDenied);
        theirs.extensions_mut().insert(FromWire);
        assert!(
            answered(theirs).is_ok(),
            "the server's answer is tonic's to read"
        );
    }
}
