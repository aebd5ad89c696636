//! The response future of [`StripScenario`](super::StripScenario).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

pin_project_lite::pin_project! {
    /// The response future of [`StripScenario`](super::StripScenario): the
    /// inner service's, unchanged (the strip happens before the inner
    /// service is called).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn new(inner: F) -> Self {
        ResponseFuture { inner }
    }
}

impl<F: Future> Future for ResponseFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().inner.poll(cx)
    }
}
