//! The response future of [`ContextService`](super::ContextService).

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::Poll;

use opentelemetry::trace::TraceContextExt as _;
use opentelemetry::{Context, KeyValue};

use crate::deadline::{InheritBody, InheritFuture};
use crate::telemetry::names::{
    EXCEPTION_EVENT, EXCEPTION_MESSAGE, EXCEPTION_TYPE, EXCEPTION_TYPE_PANIC,
};

/// The payload of a caught panic.
pub(super) type Payload = Box<dyn Any + Send>;

pin_project_lite::pin_project! {
    /// The response future of [`ContextService`](super::ContextService):
    /// the inner service's, an [`InheritFuture`] in the request's
    /// [`Inherited`](crate::grpc::deadline::Inherited) scope (its context
    /// current, no deadline: an HTTP request carries none), and so is its
    /// response's body (an [`InheritBody`]). A panic of the
    /// layer's `trust_scenario` function, of the inner service's `call`,
    /// or of its future is answered `500 Internal Server Error` with an
    /// empty body, and the connection serves its next request.
    pub struct ResponseFuture<F: Future> {
        // `None` once the handler panicked (or its call, or the trust
        // function, did).
        #[pin]
        inner: Option<InheritFuture<F>>,
        // The payload of a panic before the future, until it is answered.
        panic: Option<Payload>,
        // The context whose span (an outer layer's) records a panic.
        cx: Context,
    }
}

impl<F: Future> std::fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<F: Future> ResponseFuture<F> {
    pub(super) fn new(inner: Result<InheritFuture<F>, Payload>, cx: Context) -> Self {
        let (inner, panic) = match inner {
            Ok(inner) => (Some(inner), None),
            Err(payload) => (None, Some(payload)),
        };
        ResponseFuture { inner, panic, cx }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    B: Default,
{
    type Output = Result<http::Response<InheritBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, task: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let payload = match this.inner.as_mut().as_pin_mut() {
            Some(inner) => match catch_unwind(AssertUnwindSafe(|| inner.poll(task))) {
                Ok(polled) => return polled,
                Err(payload) => {
                    // The handler is dropped (a panic in its drop is
                    // caught too).
                    let mut inner = this.inner;
                    let _ = catch_unwind(AssertUnwindSafe(move || inner.set(None)));
                    payload
                }
            },
            None => this
                .panic
                .take()
                .unwrap_or_else(|| Box::new("polled after it was answered")),
        };
        record_panic(this.cx, &*payload);
        let mut response = http::Response::new(InheritBody::default());
        *response.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
        Poll::Ready(Ok(response))
    }
}

/// An `exception` event on `cx`'s span (an outer layer's), when it has
/// one, with the payload when it is a string.
fn record_panic(cx: &Context, payload: &(dyn Any + Send)) {
    if !cx.has_active_span() {
        return;
    }
    let mut attributes = vec![KeyValue::new(EXCEPTION_TYPE, EXCEPTION_TYPE_PANIC)];
    let message = payload
        .downcast_ref::<&'static str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
    if let Some(message) = message {
        attributes.push(KeyValue::new(EXCEPTION_MESSAGE, message.to_owned()));
    }
    cx.span().add_event(EXCEPTION_EVENT, attributes);
}
