//! The response future of [`ContextService`](super::ContextService).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use opentelemetry::Context;

pin_project_lite::pin_project! {
    /// The response future of [`ContextService`](super::ContextService):
    /// the inner service's, polled with the request's context current.
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        cx: Context,
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn new(inner: F, cx: Context) -> Self {
        ResponseFuture { inner, cx }
    }
}

impl<F: Future> Future for ResponseFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, task: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _guard = this.cx.clone().attach();
        this.inner.poll(task)
    }
}
