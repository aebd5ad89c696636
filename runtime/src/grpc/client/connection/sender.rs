//! The sender: what an attempt sends its request through (hyper's handle
//! on the connection, or the client's per-attempt layers over it), with
//! the client's `user-agent`, and the body of the response it reads.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::FutureExt;
use http::header::{HeaderValue, USER_AGENT};

use super::SendRequest;
use super::status::{grpc_response, mapped_error};
use crate::grpc::client::layer::{AttemptService, BoxError, send_layered};

/// The `user-agent` of every request, after the caller's own if it set one
/// (gRPC over HTTP/2, "User-Agent": `grpc-<language>-<implementation>`).
const USER_AGENT_VALUE: &str = concat!("grpc-rust-humus/", env!("CARGO_PKG_VERSION"));

/// What an attempt sends its request through (a typed unary call's
/// request, one tonic's `Grpc` made for a typed stream, the channel's):
/// hyper's handle on the connection, straight (no per-attempt layer: no
/// box, no allocation more), or under the client's layers.
#[derive(Clone)]
pub(crate) enum Sender {
    /// Straight over the connection.
    Direct(SendRequest),
    /// Through the client's per-attempt layers, down to the connection.
    Layered {
        stack: AttemptService,
        send: SendRequest,
    },
}

/// The response future of [`Sender`].
type Responding =
    Pin<Box<dyn Future<Output = Result<http::Response<AttemptBody>, BoxError>> + Send>>;

impl tower_service::Service<http::Request<tonic::body::Body>> for Sender {
    type Response = http::Response<AttemptBody>;
    type Error = BoxError;
    type Future = Responding;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match self {
            Sender::Direct(send) => send.poll_ready(cx).map_err(Into::into),
            // The stack's readiness is awaited in its send.
            Sender::Layered { .. } => Poll::Ready(Ok(())),
        }
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Responding {
        match self {
            Sender::Direct(send) => Box::pin(direct(send, request)),
            Sender::Layered { stack, send } => Box::pin(send_layered(stack, send, request)),
        }
    }
}

impl Sender {
    /// [`Service::call`](tower_service::Service::call) for a caller that
    /// stores the future itself (a typed unary attempt, whose state is
    /// boxed once already): straight over the connection, hyper's future
    /// is held unboxed (one allocation fewer per send); through the
    /// layers, boxed as `call`'s.
    pub(crate) fn send(
        &mut self,
        request: http::Request<tonic::body::Body>,
    ) -> impl Future<Output = Result<http::Response<AttemptBody>, BoxError>> + Send + use<> {
        match self {
            Sender::Direct(send) => futures_util::future::Either::Left(direct(send, request)),
            Sender::Layered { stack, send } => {
                futures_util::future::Either::Right(Box::pin(send_layered(stack, send, request)))
            }
        }
    }
}

/// A send straight over the connection ([`send_on`]), its answer read as
/// an attempt's. `map`, not an `async` block: a caller that boxes it holds
/// hyper's future once (an `async move` block would keep the future it
/// awaits twice, as its captured variable and as its awaitee).
fn direct(
    send: &mut SendRequest,
    request: http::Request<tonic::body::Body>,
) -> impl Future<Output = Result<http::Response<AttemptBody>, BoxError>> + Send + use<> {
    send_on(send, request).map(|sent| match sent {
        Ok(response) => mapped_error(response.map(|body| AttemptBody::Wire { body })),
        Err(err) => Err(err.into()),
    })
}

/// Sends `request` on the connection `send`, with the client's
/// `user-agent` after the caller's, and reads the answer as tonic does
/// ([`grpc_response`]).
pub(crate) fn send_on(
    send: &mut SendRequest,
    mut request: http::Request<tonic::body::Body>,
) -> impl Future<Output = Result<http::Response<hyper::body::Incoming>, hyper::Error>> + Send + use<>
{
    let ours = HeaderValue::from_static(USER_AGENT_VALUE);
    if let Ok(Some(theirs)) = request.headers_mut().try_insert(USER_AGENT, ours) {
        let mut both = theirs.as_bytes().to_vec();
        both.push(b' ');
        both.extend_from_slice(USER_AGENT_VALUE.as_bytes());
        if let Ok(both) = HeaderValue::from_bytes(&both) {
            request.headers_mut().insert(USER_AGENT, both);
        }
    }
    // On a connection that has just closed, the request fails unsent
    // (hyper's `Canceled`): a transparent retry, on a new connection.
    send.send_request(request)
        .map(|sent| sent.map(grpc_response))
}

pin_project_lite::pin_project! {
    /// The body of a response as tonic reads it: hyper's, or what the
    /// per-attempt layers gave back.
    #[project = AttemptBodyProj]
    #[derive(Debug)]
    pub(crate) enum AttemptBody {
        Wire { #[pin] body: hyper::body::Incoming },
        Layered { #[pin] body: tonic::body::Body },
    }
}

impl http_body::Body for AttemptBody {
    type Data = bytes::Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, BoxError>>> {
        match self.project() {
            AttemptBodyProj::Wire { body } => body
                .poll_frame(cx)
                .map(|frame| frame.map(|f| f.map_err(Into::into))),
            AttemptBodyProj::Layered { body } => body
                .poll_frame(cx)
                .map(|frame| frame.map(|f| f.map_err(Into::into))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            AttemptBody::Wire { body } => body.is_end_stream(),
            AttemptBody::Layered { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            AttemptBody::Wire { body } => body.size_hint(),
            AttemptBody::Layered { body } => body.size_hint(),
        }
    }
}
