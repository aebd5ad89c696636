//! The calls of a generated typed client: one shared generic function per
//! RPC kind, each returning the humus client's future in a [`Call`] marked with the
//! typed client's policy type `P`.
//!
//! Why not `self.client.unary(..)` in each generated method: rustc lints
//! every function's MIR for known panics, and to do so computes the layout
//! of each of its locals, the returned future included. The humus client's
//! future is concrete in a generated method (its request and response types
//! are), so rustc worked out the layout of the whole call state machine
//! once per RPC: more than a third of the cost of checking a generated
//! method (BENCHMARKS.md, "The googleapis subset"). [`Call`]'s first field
//! has the layout of the method's request parameter, generic there, so that
//! layout is given up at once; after monomorphization it is what it was.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Stream;
use tonic::{IntoRequest, IntoStreamingRequest, Response, Status};

use crate::grpc::client::{Client, Method, Streaming};

pin_project_lite::pin_project! {
    /// The future of a typed client's call: the humus client's own, with
    /// the same output, size and behaviour.
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct Call<P, F> {
        // Zero-sized, never holds a `P`; first, so that rustc gives up on
        // the layout where `P` is generic (see the module docs).
        policy: [P; 0],
        #[pin]
        future: F,
    }
}

// SAFETY: `policy` is an empty array: a `Call` never holds a `P` (a
// policy type is a marker), so whether it may move to or be shared with
// another thread is the future's alone.
unsafe impl<P, F: Send> Send for Call<P, F> {}
// SAFETY: as for `Send`.
unsafe impl<P, F: Sync> Sync for Call<P, F> {}

impl<P, F: Future> Future for Call<P, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().future.poll(cx)
    }
}

impl<P, F> Call<P, F> {
    fn new(future: F) -> Self {
        Call { policy: [], future }
    }
}

/// [`Client::unary`] of `request`, made when this is called.
pub fn unary<'a, P: 'static, R, Req, Resp>(
    client: &'a Client,
    method: &'static Method,
    request: R,
) -> Call<P, impl Future<Output = Result<Response<Resp>, Status>> + Send + 'a>
where
    R: IntoRequest<Req>,
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    Call::new(client.unary(method, request.into_request()))
}

/// [`Client::server_streaming`] of `request`, made when this is called.
pub fn server_streaming<'a, P: 'static, R, Req, Resp>(
    client: &'a Client,
    method: &'static Method,
    request: R,
) -> Call<P, impl Future<Output = Result<Response<Streaming<Resp>>, Status>> + Send + 'a>
where
    R: IntoRequest<Req>,
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    Call::new(client.server_streaming(method, request.into_request()))
}

/// [`Client::client_streaming`] of `request`, made when this is called.
pub fn client_streaming<'a, P: 'static, R, Req, Resp>(
    client: &'a Client,
    method: &'static Method,
    request: R,
) -> Call<P, impl Future<Output = Result<Response<Resp>, Status>> + Send + 'a>
where
    R: IntoStreamingRequest<Message = Req>,
    R::Stream: Stream<Item = Req> + Send + 'static,
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    Call::new(client.client_streaming(method, request.into_streaming_request()))
}

/// [`Client::streaming`] of `request`, made when this is called.
pub fn streaming<'a, P: 'static, R, Req, Resp>(
    client: &'a Client,
    method: &'static Method,
    request: R,
) -> Call<P, impl Future<Output = Result<Response<Streaming<Resp>>, Status>> + Send + 'a>
where
    R: IntoStreamingRequest<Message = Req>,
    R::Stream: Stream<Item = Req> + Send + 'static,
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    Call::new(client.streaming(method, request.into_streaming_request()))
}
