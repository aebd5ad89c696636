//! The `grpc-timeout` each send carries: the sender that adds it to the
//! request tonic makes ([`Timed`]); its encoding is gRPC's wire's
//! ([`grpc_timeout`](crate::grpc::wire::grpc_timeout)).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use crate::grpc::client::connection::{AttemptBody, Sender};
use crate::grpc::client::layer::BoxError;
use crate::grpc::client::limit::Limited;
use crate::grpc::wire::GRPC_TIMEOUT_HEADER;

/// The connection's sender under tonic's `Grpc`, for one typed open: it
/// adds the send's `grpc-timeout` to the request tonic made of the
/// caller's metadata, so that the map tonic takes its reserved headers out
/// of is the caller's own (empty for most calls, where each of those
/// removals is a search in a map that is not empty with the timeout in
/// it). The per-attempt layers, if any, see the header as before. The
/// response's body is read through [`Limited`]: a message over the
/// client's decoding limit fails the stream `ResourceExhausted` before
/// tonic's decoder reads it.
pub(super) struct Timed {
    pub(super) sender: Sender,
    pub(super) timeout: Option<http::HeaderValue>,
    /// [`Settings::max_decoding_message_size`](crate::grpc::client::Settings::max_decoding_message_size).
    pub(super) limit: usize,
}

/// The sender's response.
type Sent = <Sender as tower_service::Service<http::Request<tonic::body::Body>>>::Response;

impl tower_service::Service<http::Request<tonic::body::Body>> for Timed {
    type Response = http::Response<Limited<AttemptBody>>;
    type Error = <Sender as tower_service::Service<http::Request<tonic::body::Body>>>::Error;
    type Future = TimedFuture;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.sender.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<tonic::body::Body>) -> TimedFuture {
        if let Some(timeout) = self.timeout.take() {
            request.headers_mut().insert(GRPC_TIMEOUT_HEADER, timeout);
        }
        TimedFuture {
            sent: self.sender.call(request),
            limit: self.limit,
        }
    }
}

/// [`Timed`]'s response future: the sender's, its body [`Limited`].
pub(super) struct TimedFuture {
    sent: <Sender as tower_service::Service<http::Request<tonic::body::Body>>>::Future,
    limit: usize,
}

impl Future for TimedFuture {
    type Output = Result<http::Response<Limited<AttemptBody>>, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let limit = self.limit;
        let sent: Result<Sent, BoxError> = std::task::ready!(self.sent.as_mut().poll(cx));
        Poll::Ready(sent.map(|response| response.map(|body| Limited::new(body, limit))))
    }
}
