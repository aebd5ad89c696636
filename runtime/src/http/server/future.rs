//! The response future of [`ContextService`](super::ContextService).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use crate::grpc::deadline::Scoped;

pin_project_lite::pin_project! {
    /// The response future of [`ContextService`](super::ContextService):
    /// the inner service's, polled inside the request's
    /// [`Inherited`](crate::grpc::deadline::Inherited) scope (its context
    /// current, no deadline: an HTTP request carries none).
    pub struct ResponseFuture<F: Future> {
        #[pin]
        inner: Scoped<F>,
    }
}

impl<F: Future> std::fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("inner", &self.inner)
            .finish()
    }
}

impl<F: Future> ResponseFuture<F> {
    pub(super) fn new(inner: Scoped<F>) -> Self {
        ResponseFuture { inner }
    }
}

impl<F: Future> Future for ResponseFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, task: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        self.project().inner.poll(task)
    }
}
