//! `Streaming`: a response stream that counts in the breaker once, when it
//! ends.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Stream;

/// A stream of responses that counts in the breaker once, when it ends.
#[derive(Debug)]
pub struct Streaming<T> {
    inner: tonic::Streaming<T>,
}

impl<T> Streaming<T> {
    /// The next message, `None` at the end of the stream.
    ///
    /// # Errors
    ///
    /// The status the stream ended with.
    pub async fn message(&mut self) -> Result<Option<T>, tonic::Status> {
        self.inner.message().await
    }
}

impl<T> Stream for Streaming<T> {
    type Item = Result<T, tonic::Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.inner).poll_next(cx)
    }
}
