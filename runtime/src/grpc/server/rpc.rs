//! What every RPC a [`Server`](super::Server) serves passes before the
//! user's services: the extraction of the caller's trace context and
//! baggage, the scenario strip, the SERVER span and
//! `rpc.server.call.duration`, the deadline, and the handler run with its
//! RPC's deadline and context, answered `INTERNAL` if it panics (or the
//! trust function does); and the
//! response body that ends the span, ends an open stream with
//! `UNAVAILABLE` once its connection was told to go away, and with
//! `INTERNAL` if the handler's stream panics; a call whose handler has not
//! answered when its connection's grace is over is answered `UNAVAILABLE`.

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use http_body::Body;
use opentelemetry::global::BoxedTracer;
use opentelemetry::metrics::Histogram;
use opentelemetry::trace::{Span as _, SpanKind, Status as SpanStatus, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};
use tokio::time::{Instant, Sleep};
use tonic::Code;
use tower_service::Service;

use super::body::{GOING_AWAY, ResponseBody};
use super::inherit::{self, Scoped};
use super::server::ConnInfo;
use super::service::Shared;
use crate::grpc::deadline::Inherited;
use crate::grpc::wire::{GRPC_MESSAGE, GRPC_STATUS, status_code, status_message};
use crate::kept::{Kept, kept};
use crate::telemetry::names::{
    ERROR_TYPE, EXCEPTION_EVENT, EXCEPTION_MESSAGE, EXCEPTION_TYPE, EXCEPTION_TYPE_PANIC,
    RPC_METHOD, RPC_METHOD_OTHER, RPC_RESPONSE_STATUS_CODE, RPC_SERVER_CALL_DURATION,
    RPC_SERVER_SCOPE, RPC_SYSTEM_GRPC, RPC_SYSTEM_NAME,
};
use crate::telemetry::{Telemetry, code_name};

/// What every connection's [`Rpc`] shares: built once per server.
pub(super) struct RpcShared {
    pub(super) strip: Shared,
    tracer: Option<BoxedTracer>,
    /// Whether `tracer` is the no-op provider's: its span would have the
    /// parent's context and record nothing, so none is started when the
    /// RPC's context has no valid span (it would have an invalid context).
    noop_tracer: bool,
    /// The duration histogram; `None` without a meter provider or with the
    /// no-op one (whose instruments record nothing).
    duration: Option<Histogram<f64>>,
    /// The names of the services served (`ledger.v1.Ledger`), so that an
    /// unknown method is recorded as `_OTHER`.
    services: Vec<&'static str>,
}

impl RpcShared {
    pub(super) fn new(
        telemetry: &Telemetry,
        strip: Shared,
        services: Vec<&'static str>,
    ) -> RpcShared {
        let inbound = telemetry.inbound(
            RPC_SERVER_SCOPE,
            RPC_SERVER_CALL_DURATION,
            "Measures the duration of inbound remote procedure calls.",
        );
        // A name with a slash is never a served service's (the method's
        // service is what comes before its path's first slash).
        let mut services = services;
        services.retain(|s| !s.contains('/'));
        RpcShared {
            strip,
            tracer: inbound.tracer,
            noop_tracer: inbound.noop_tracer,
            duration: inbound.duration,
            services,
        }
    }

    /// The method's name as recorded: the path without its slash when the
    /// server serves its service, else `_OTHER`.
    fn method_name(&self, path: &str) -> &'static str {
        let name = path.strip_prefix('/').unwrap_or(path);
        // `service/method`, `method` not empty, for a served `service`
        // (which has no slash: its end is the name's first slash).
        let served = self.services.iter().any(|service| {
            name.len() > service.len() + 1
                && name.as_bytes()[service.len()] == b'/'
                && name.starts_with(service)
        });
        if served {
            intern(name)
        } else {
            RPC_METHOD_OTHER
        }
    }
}

/// How many method names [`intern`] keeps, over every server of the
/// process: more than any service has, and a bound on what callers that
/// send made-up methods of a served service can make it keep.
const MAX_METHOD_NAMES: usize = 4096;

/// The `&'static str` of a method name, leaked once per name, for the
/// first [`MAX_METHOD_NAMES`] names; `_OTHER` after them.
fn intern(name: &str) -> &'static str {
    static NAMES: std::sync::LazyLock<Kept<str>> = std::sync::LazyLock::new(RwLock::default);
    kept(&NAMES, name, MAX_METHOD_NAMES, RPC_METHOD_OTHER, || {
        let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
        (leaked, leaked)
    })
}

/// A signal to a connection's calls, used twice per connection. As the
/// signal to its streams, it tells the open streams (the response bodies
/// waiting for their next message) to end with `UNAVAILABLE`: raised once
/// the connection's GOAWAY went out (at a shutdown), or when its age's
/// grace is over. As the signal to its calls, it tells the calls whose
/// handler has not answered yet (unary calls, and streams not yet open) to
/// be answered `UNAVAILABLE`: raised when the connection's grace is over,
/// just before it is closed.
#[derive(Default)]
pub(super) struct StreamsEnd {
    ended: AtomicBool,
    next: AtomicU64,
    wakers: Mutex<HashMap<u64, Waker>>,
    /// The message the calls are answered with, set when it is raised.
    message: std::sync::OnceLock<&'static str>,
}

impl StreamsEnd {
    /// Raises the signal with `message`, the one the calls it ends are
    /// answered with (the first one given, if raised twice).
    pub(super) fn end_with(&self, message: &'static str) {
        let _ = self.message.set(message);
        self.ended.store(true, Ordering::SeqCst);
        let wakers = std::mem::take(&mut *self.lock());
        for (_, waker) in wakers {
            waker.wake();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Waker>> {
        self.wakers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is_ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    /// Whether the signal is raised; if not, `waker` is woken when it is.
    pub(super) fn poll_ended(&self, id: u64, waker: &Waker) -> bool {
        if self.is_ended() {
            return true;
        }
        self.lock().insert(id, waker.clone());
        // Raised between the check and the registration: `end` may have
        // taken the map before the insert.
        self.is_ended()
    }

    pub(super) fn forget(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// The message the calls it ends are answered with.
    pub(super) fn message(&self) -> &'static str {
        self.message.get().copied().unwrap_or(GOING_AWAY)
    }

    /// A new id to register a waker under.
    fn id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

/// The message a call is answered with, `UNAVAILABLE`, when its server
/// stopped (its `shutdown_grace` is over, or a second stop signal forced
/// the stop) before its handler answered.
pub(super) const STOPPED: &str = "the server stopped before the call ended";

/// The message a call is answered with, `UNAVAILABLE`, when its
/// connection reached its age and its grace is over before its handler
/// answered.
pub(super) const AGED: &str =
    "the connection reached its maximum age before the call ended: call again on a new connection";

/// The service every RPC of one connection goes through first.
pub(super) struct Rpc<S> {
    pub(super) inner: S,
    pub(super) shared: Arc<RpcShared>,
    pub(super) streams_end: Arc<StreamsEnd>,
    pub(super) calls_end: Arc<StreamsEnd>,
    pub(super) info: ConnInfo,
}

impl<S: Clone> Clone for Rpc<S> {
    fn clone(&self) -> Self {
        Rpc {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
            streams_end: Arc::clone(&self.streams_end),
            calls_end: Arc::clone(&self.calls_end),
            info: self.info.clone(),
        }
    }
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for Rpc<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    ResBody: Body<Data = Bytes>,
{
    type Response = http::Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<Scoped<S::Future>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<ReqBody>) -> Self::Future {
        let received = Instant::now();
        self.info.insert(request.extensions_mut());
        let shared = &self.shared;
        // 1. The scenario strip, for a caller not trusted, then the
        // caller's trace context and baggage. A panic of the trust function
        // is answered as a handler's, with no handler run.
        let (mut parts, body) = request.into_parts();
        let (cx, stripped, trust_panic) = match shared.strip.vet_caught(&mut parts) {
            Ok(vetted) => (vetted.cx, vetted.stripped, None),
            Err(panicked) => (panicked.cx, None, Some(panicked.payload)),
        };
        let request = http::Request::from_parts(parts, body);
        // 2. The SERVER span, a child of the caller's, and the duration.
        // The no-op tracer's span has its parent's context: with no valid
        // parent, an invalid one, which the span would be dropped for.
        let tracer = shared
            .tracer
            .as_ref()
            .filter(|_| !shared.noop_tracer || cx.span().span_context().is_valid());
        let method = if tracer.is_some() || shared.duration.is_some() {
            shared.method_name(request.uri().path())
        } else {
            RPC_METHOD_OTHER
        };
        let (cx, traced) = match tracer {
            Some(tracer) => {
                let span = tracer
                    .span_builder(method)
                    .with_kind(SpanKind::Server)
                    .with_attributes([
                        KeyValue::new(RPC_SYSTEM_NAME, RPC_SYSTEM_GRPC),
                        KeyValue::new(RPC_METHOD, method),
                    ])
                    .start_with_context(tracer, &cx);
                if span.span_context().is_valid() {
                    let cx = cx.with_span(span);
                    if let Some(stripped) = stripped {
                        stripped.record(&cx.span());
                    }
                    (cx, true)
                } else {
                    // A span with no context of its own (a no-op tracer's)
                    // records nothing and parents nothing: the handler's
                    // calls are children of the caller's span, as under it.
                    (cx, false)
                }
            }
            None => (cx, false),
        };
        // 3. The handler, with its RPC's deadline and context.
        let deadline = inherit::deadline(request.headers(), received);
        let record = Record {
            shared: Some(Arc::clone(shared)),
            span: traced.then(|| RecordSpan::Own(cx.clone())),
            method,
            received,
            done: false,
        };
        let call = match trust_panic {
            Some(payload) => Err(payload),
            None => call_caught(&mut self.inner, request),
        };
        let inherited = Inherited::served(deadline, cx);
        ResponseFuture::new(
            call.map(|call| inherited.clone().scope(call)),
            deadline,
            record,
            Some(Arc::clone(&self.streams_end)),
        )
        .ended_by(Arc::clone(&self.calls_end))
        .scoping_body(inherited)
    }
}

/// The payload of a caught panic.
pub(super) type Payload = Box<dyn Any + Send>;

/// Calls `inner` with `request`, catching a panic in its `call` (a
/// hand-written tower service's), which is answered as one in its future.
pub(super) fn call_caught<S, R>(inner: &mut S, request: R) -> Result<S::Future, Payload>
where
    S: Service<R>,
{
    catch_unwind(AssertUnwindSafe(|| inner.call(request)))
}

pin_project_lite::pin_project! {
    /// The response future of humus's server (every RPC it serves) and of
    /// [`StripScenario`](super::StripScenario): the handler's, answered
    /// `INTERNAL` ("the handler panicked", trailers-only) if it panics, in
    /// the service's `call` or in its future, or if the server's
    /// `trust_scenario` function panicked before it (then the handler is
    /// never called). On a [`Server`](super::Server), a call whose handler
    /// has not answered when its connection's grace is over is answered
    /// `UNAVAILABLE` (trailers-only), and its handler dropped. Its
    /// response's body is a [`ResponseBody`].
    pub struct ResponseFuture<F> {
        // `None` once the handler panicked (or its call did).
        #[pin]
        call: Option<F>,
        // The payload of the call's panic, until it is answered.
        panic: Option<Payload>,
        deadline: Option<Pin<Box<Sleep>>>,
        // The caller's `grpc-timeout` that set the deadline, which its
        // DEADLINE_EXCEEDED names.
        timeout: Option<Duration>,
        record: Option<Record>,
        streams_end: Option<Arc<StreamsEnd>>,
        // The signal that answers the call UNAVAILABLE, and the id of its
        // waker there.
        calls_end: Option<(Arc<StreamsEnd>, u64)>,
        // The handler's deadline and context, which its response body (a
        // stream's messages) is polled in too.
        scope: Option<Inherited>,
    }

    impl<F> PinnedDrop for ResponseFuture<F> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some((calls_end, id)) = this.calls_end.as_ref() {
                calls_end.forget(*id);
            }
        }
    }
}

impl<F> std::fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("panicked", &self.call.is_none())
            .field("deadline", &self.deadline.as_ref().map(|d| d.deadline()))
            .finish_non_exhaustive()
    }
}

impl<F> ResponseFuture<F> {
    /// The future of `call` (or the answer to its panic), bounded by
    /// `deadline` (and the caller's `grpc-timeout` that set it), recording
    /// its end with `record`; its body ends when `streams_end` is raised.
    pub(super) fn new(
        call: Result<F, Payload>,
        deadline: Option<(Instant, Duration)>,
        record: Record,
        streams_end: Option<Arc<StreamsEnd>>,
    ) -> ResponseFuture<F> {
        let (call, panic) = match call {
            Ok(call) => (Some(call), None),
            Err(payload) => (None, Some(payload)),
        };
        ResponseFuture {
            call,
            panic,
            deadline: deadline.map(|(at, _)| Box::pin(tokio::time::sleep_until(at))),
            timeout: deadline.map(|(_, timeout)| timeout),
            record: Some(record),
            streams_end,
            calls_end: None,
            scope: None,
        }
    }

    /// The same future, whose response body is polled inside `scope`
    /// (the handler's own): a stream's messages, made as the body is
    /// polled, inherit the RPC's deadline and context as the handler
    /// does. The body also ends at the deadline.
    pub(super) fn scoping_body(mut self, scope: Inherited) -> ResponseFuture<F> {
        self.scope = Some(scope);
        self
    }

    /// The same future, answered `UNAVAILABLE` when `calls_end` is raised
    /// before its handler answered.
    pub(super) fn ended_by(mut self, calls_end: Arc<StreamsEnd>) -> ResponseFuture<F> {
        let id = calls_end.id();
        self.calls_end = Some((calls_end, id));
        self
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    B: Body<Data = Bytes>,
{
    type Output = Result<http::Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let polled = match this.call.as_mut().as_pin_mut() {
            Some(call) => catch_unwind(AssertUnwindSafe(|| call.poll(cx))),
            None => Err(this
                .panic
                .take()
                .unwrap_or_else(|| Box::new("polled after it was answered"))),
        };
        let polled = match polled {
            Ok(polled) => polled,
            Err(payload) => {
                // The handler panicked: it is dropped (a panic in its drop
                // is caught too), and the caller is answered INTERNAL,
                // trailers-only, without the payload.
                let mut call = this.call;
                let _ = catch_unwind(AssertUnwindSafe(move || call.set(None)));
                if let Some(mut record) = this.record.take() {
                    record.panicked(&*payload);
                }
                return Poll::Ready(Ok(panicked_response()));
            }
        };
        let response = match polled {
            Poll::Ready(Ok(response)) => response,
            Poll::Ready(Err(e)) => {
                if let Some(mut record) = this.record.take() {
                    record.finish(Code::Internal, "the service failed");
                }
                return Poll::Ready(Err(e));
            }
            Poll::Pending => {
                let expired = this
                    .deadline
                    .as_mut()
                    .is_some_and(|d| d.as_mut().poll(cx).is_ready());
                if !expired {
                    let ended = this
                        .calls_end
                        .as_ref()
                        .filter(|(calls_end, id)| calls_end.poll_ended(*id, cx.waker()))
                        .map(|(calls_end, _)| calls_end.message());
                    let Some(message) = ended else {
                        return Poll::Pending;
                    };
                    // The connection's grace is over: the handler is
                    // dropped (a panic in its drop is caught), and the
                    // caller is answered UNAVAILABLE, which a retrying
                    // client may send again, before the connection closes.
                    let mut call = this.call;
                    let _ = catch_unwind(AssertUnwindSafe(move || call.set(None)));
                    if let Some(mut record) = this.record.take() {
                        record.finish(Code::Unavailable, message);
                    }
                    let (parts, ()) = tonic::Status::unavailable(message)
                        .into_http::<()>()
                        .into_parts();
                    return Poll::Ready(Ok(http::Response::from_parts(
                        parts,
                        ResponseBody::empty(),
                    )));
                }
                // The deadline passed: the handler is dropped with this
                // future, and the caller is told so, with the timeout it
                // gave (written only now).
                let message = deadline_passed(*this.timeout);
                let mut record = this.record.take();
                if let Some(record) = record.as_mut() {
                    record.finish(Code::DeadlineExceeded, &message);
                }
                let (parts, ()) = tonic::Status::deadline_exceeded(message)
                    .into_http::<()>()
                    .into_parts();
                return Poll::Ready(Ok(http::Response::from_parts(parts, ResponseBody::empty())));
            }
        };
        let (parts, body) = response.into_parts();
        let mut record = this.record.take();
        // A trailers-only response carries its status in its headers.
        if let Some(code) = status_code(&parts.headers)
            && let Some(r) = record.as_mut()
        {
            let message = status_message(&parts.headers);
            r.finish(code, &message);
        }
        let id = this.streams_end.as_ref().map_or(0, |s| s.id());
        let scope = this.scope.take();
        // The deadline goes on bounding the body, when it is scoped.
        let deadline = scope.is_some().then(|| this.deadline.take()).flatten();
        Poll::Ready(Ok(http::Response::from_parts(
            parts,
            ResponseBody {
                inner: Some(body),
                record,
                streams_end: this.streams_end.clone(),
                id,
                ended: false,
                scope,
                deadline,
                timeout: *this.timeout,
            },
        )))
    }
}

/// The message a caller is answered with, `INTERNAL`, when the handler
/// panics; the panic's payload is recorded on the SERVER span only.
pub(super) const PANICKED: &str = "the handler panicked";

/// The message of the `DEADLINE_EXCEEDED` a call is answered with when
/// its deadline passes before its handler answered: `the deadline passed:
/// the caller's timeout (grpc-timeout), 1.5s`, the caller's `grpc-timeout`
/// as received, so that the server's span and the caller both tell a
/// caller's short budget from a slow handler (`timeout` is `None` only for
/// a deadline with no timeout, which the server never sets).
pub(super) fn deadline_passed(timeout: Option<Duration>) -> String {
    const PASSED: &str = "the deadline passed";
    match timeout {
        Some(d) => format!("{PASSED}: the caller's timeout (grpc-timeout), {d:?}"),
        None => PASSED.to_owned(),
    }
}

/// The trailers-only `INTERNAL` answer to a call whose handler panicked.
fn panicked_response<B>() -> http::Response<ResponseBody<B>> {
    let (parts, ()) = tonic::Status::internal(PANICKED)
        .into_http::<()>()
        .into_parts();
    http::Response::from_parts(parts, ResponseBody::empty())
}

/// The trailers that end a stream whose handler panicked after its
/// headers went out.
pub(super) fn panicked_trailers() -> HeaderMap {
    let mut trailers = HeaderMap::with_capacity(2);
    trailers.insert(GRPC_STATUS, HeaderValue::from_static("13"));
    trailers.insert(
        GRPC_MESSAGE,
        HeaderValue::from_static("the%20handler%20panicked"),
    );
    trailers
}

/// A panic's payload, when it is a string (`panic!`'s).
fn payload_message(payload: &(dyn Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&'static str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

/// What is recorded of one RPC when it ends: its span's end and its
/// duration (humus's server), or only a panic's event on the span of an
/// outer layer ([`StripScenario`](super::StripScenario) on another server).
pub(super) struct Record {
    /// The server's instruments; `None` for the layer alone.
    shared: Option<Arc<RpcShared>>,
    /// The span the RPC's end or panic is recorded on, if any.
    span: Option<RecordSpan>,
    method: &'static str,
    received: Instant,
    done: bool,
}

/// The span a [`Record`] records on.
enum RecordSpan {
    /// The server span humus's server started: the record sets its status
    /// and attributes, and ends it.
    Own(Context),
    /// The span of an outer layer's context: the record adds a panic's
    /// `exception` event to it, and leaves the rest to its owner.
    Outer(Context),
}

impl Record {
    /// The record of [`StripScenario`](super::StripScenario), which owns
    /// no span: a panic is an event on `outer`'s span, when it has one.
    pub(super) fn outer(outer: Option<Context>) -> Record {
        Record {
            shared: None,
            span: outer.map(RecordSpan::Outer),
            method: RPC_METHOD_OTHER,
            received: Instant::now(),
            done: false,
        }
    }
}

/// The codes a server counts as its own errors (OpenTelemetry's RPC
/// conventions for gRPC servers): the span's status is Error only for
/// these, since the rest say something about the request.
fn is_server_error(code: Code) -> bool {
    matches!(
        code,
        Code::Unknown
            | Code::DeadlineExceeded
            | Code::Unimplemented
            | Code::Internal
            | Code::Unavailable
            | Code::DataLoss
    )
}

impl Record {
    /// Ends the RPC as `INTERNAL` for a handler's panic, with an
    /// `exception` event that holds the payload (when it is a string).
    pub(super) fn panicked(&mut self, payload: &(dyn Any + Send)) {
        if self.done {
            return;
        }
        if let Some(RecordSpan::Own(cx) | RecordSpan::Outer(cx)) = &self.span {
            let mut attributes = vec![KeyValue::new(EXCEPTION_TYPE, EXCEPTION_TYPE_PANIC)];
            if let Some(message) = payload_message(payload) {
                attributes.push(KeyValue::new(EXCEPTION_MESSAGE, message.to_owned()));
            }
            cx.span().add_event(EXCEPTION_EVENT, attributes);
        }
        self.finish(Code::Internal, PANICKED);
    }

    pub(super) fn finish(&mut self, code: Code, message: &str) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let name = code_name(code);
        let error = is_server_error(code);
        if let Some(RecordSpan::Own(cx)) = &self.span {
            let span = cx.span();
            span.set_attribute(KeyValue::new(RPC_RESPONSE_STATUS_CODE, name));
            if error {
                span.set_attribute(KeyValue::new(ERROR_TYPE, name));
                span.set_status(SpanStatus::error(message.to_owned()));
            }
            span.end();
        }
        if let Some(duration) = self.shared.as_ref().and_then(|s| s.duration.as_ref()) {
            let attributes = [
                KeyValue::new(RPC_SYSTEM_NAME, RPC_SYSTEM_GRPC),
                KeyValue::new(RPC_METHOD, self.method),
                KeyValue::new(RPC_RESPONSE_STATUS_CODE, name),
                KeyValue::new(ERROR_TYPE, name),
            ];
            // error.type only on a failure.
            let attributes = if error {
                &attributes[..]
            } else {
                &attributes[..3]
            };
            duration.record(self.received.elapsed().as_secs_f64(), attributes);
        }
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        // The response was dropped before its status: the caller cancelled
        // (RST_STREAM), or the connection closed.
        self.finish(Code::Cancelled, "the call was cancelled");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http::{HeaderMap, HeaderValue};
    use opentelemetry::metrics::noop::NoopMeterProvider;
    use opentelemetry::trace::noop::NoopTracerProvider;
    use opentelemetry_sdk::metrics::SdkMeterProvider;
    use opentelemetry_sdk::propagation::BaggagePropagator;
    use opentelemetry_sdk::trace::SdkTracerProvider;

    use super::super::service::Shared;
    use super::*;
    use crate::fault::Injector;

    fn shared(telemetry: &Telemetry, services: Vec<&'static str>) -> RpcShared {
        let strip = Shared::new(Injector::off(), Arc::new(BaggagePropagator::new()));
        RpcShared::new(telemetry, strip, services)
    }

    #[test]
    fn a_method_is_named_only_for_a_served_service_and_a_method() {
        let rpc = shared(&Telemetry::default(), vec!["a.B", "x/y"]);
        assert_eq!(rpc.method_name("/a.B/Get"), "a.B/Get");
        assert_eq!(rpc.method_name("/a.B/Get/More"), "a.B/Get/More");
        assert_eq!(rpc.method_name("/a.B/"), RPC_METHOD_OTHER);
        assert_eq!(rpc.method_name("/a.B"), RPC_METHOD_OTHER);
        assert_eq!(rpc.method_name("/a.Bc/Get"), RPC_METHOD_OTHER);
        assert_eq!(rpc.method_name("/a/Get"), RPC_METHOD_OTHER);
        // A service named with a slash is never the path's.
        assert_eq!(rpc.method_name("/x/y/Get"), RPC_METHOD_OTHER);
    }

    #[test]
    fn the_noop_providers_start_no_span_and_build_no_histogram() {
        let noop = Telemetry::builder()
            .tracer_provider(NoopTracerProvider::new())
            .meter_provider(NoopMeterProvider::new())
            .build();
        let rpc = shared(&noop, vec!["a.B"]);
        assert!(rpc.tracer.is_some() && rpc.noop_tracer);
        assert!(rpc.duration.is_none());

        let sdk = Telemetry::builder()
            .tracer_provider(SdkTracerProvider::builder().build())
            .meter_provider(SdkMeterProvider::builder().build())
            .build();
        let rpc = shared(&sdk, vec!["a.B"]);
        assert!(rpc.tracer.is_some() && !rpc.noop_tracer);
        assert!(rpc.duration.is_some());
    }

    #[test]
    fn the_propagators_fields_are_found_among_few_headers_and_many() {
        let rpc = shared(&Telemetry::default(), vec!["a.B"]);
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/grpc"));
        assert!(!rpc.strip.gate.carries_fields(&headers));
        headers.insert("baggage", HeaderValue::from_static("k=v"));
        assert!(rpc.strip.gate.carries_fields(&headers));
        for i in 0..20 {
            headers.insert(
                http::HeaderName::try_from(format!("x-extra-{i}")).unwrap(),
                HeaderValue::from_static("1"),
            );
        }
        assert!(rpc.strip.gate.carries_fields(&headers));
        headers.remove("baggage");
        assert!(!rpc.strip.gate.carries_fields(&headers));
    }
}
