//! The calls of a generated typed client: one shared generic function per
//! RPC kind, each returning the humus client's future boxed in a [`Call`].
//!
//! Why a named, boxed future rather than `-> impl Future + Send + '_` in
//! each generated method: rustc type-checks every generated method, and
//! an opaque return type made it infer the method's hidden type and prove
//! its bounds there, once per RPC, over the whole call state machine
//! (auto traits such as `Send` leak through it); and its known-panics lint
//! computed the layout of that state machine, concrete in each method.
//! With [`Call`] a method's signature names a plain type and its body is
//! one call of a function here: the future is made and boxed (coerced to
//! `dyn Future + Send`) in this module's generic code, checked once, and
//! monomorphized per response type as before. Per RPC, the generated code
//! costs rustc about 2 M instructions less (`git show 6e348bc:BENCHMARKS.md`,
//! "The googleapis subset"); a call costs one allocation more, of the state
//! the call's future held inline.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Stream;
use tonic::{IntoRequest, IntoStreamingRequest, Response, Status};

use crate::grpc::client::{Client, Method, Streaming};

/// The future of a typed client's call, made when its method is called:
/// the humus client's own future ([`Client::unary`] and its siblings),
/// boxed. Its output is the call's response carrying a `T` (a message, or
/// a [`Streaming`] of them for a method whose responses stream), or its
/// last attempt's status.
///
/// It is `Send` and `Unpin`, and holds the typed client's borrow (`'a`).
#[must_use = "futures do nothing unless polled"]
pub struct Call<'a, T> {
    future: Pin<Box<dyn Future<Output = Result<Response<T>, Status>> + Send + 'a>>,
}

impl<'a, T> Call<'a, T> {
    /// `future`, boxed.
    fn new(future: impl Future<Output = Result<Response<T>, Status>> + Send + 'a) -> Self {
        Call {
            future: Box::pin(future),
        }
    }
}

impl<T> Future for Call<'_, T> {
    type Output = Result<Response<T>, Status>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.future.as_mut().poll(cx)
    }
}

impl<T> fmt::Debug for Call<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call").finish_non_exhaustive()
    }
}

/// [`Client::unary`] of `request`, made when this is called.
pub fn unary<'a, R, Req, Resp>(
    client: &'a Client,
    method: &'static Method,
    request: R,
) -> Call<'a, Resp>
where
    R: IntoRequest<Req>,
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    Call::new(client.unary(method, request.into_request()))
}

/// [`Client::server_streaming`] of `request`, made when this is called.
pub fn server_streaming<'a, R, Req, Resp>(
    client: &'a Client,
    method: &'static Method,
    request: R,
) -> Call<'a, Streaming<Resp>>
where
    R: IntoRequest<Req>,
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    Call::new(client.server_streaming(method, request.into_request()))
}

/// [`Client::client_streaming`] of `request`, made when this is called.
pub fn client_streaming<'a, R, Req, Resp>(
    client: &'a Client,
    method: &'static Method,
    request: R,
) -> Call<'a, Resp>
where
    R: IntoStreamingRequest<Message = Req>,
    R::Stream: Stream<Item = Req> + Send + 'static,
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    Call::new(client.client_streaming(method, request.into_streaming_request()))
}

/// [`Client::streaming`] of `request`, made when this is called.
pub fn streaming<'a, R, Req, Resp>(
    client: &'a Client,
    method: &'static Method,
    request: R,
) -> Call<'a, Streaming<Resp>>
where
    R: IntoStreamingRequest<Message = Req>,
    R::Stream: Stream<Item = Req> + Send + 'static,
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    Call::new(client.streaming(method, request.into_streaming_request()))
}
