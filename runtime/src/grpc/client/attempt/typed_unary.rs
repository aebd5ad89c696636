//! A typed unary call's attempts: the request encoded once, each attempt
//! sent through tonic's `Grpc::unary`.

use std::future::Future;
use std::sync::Arc;

use futures_util::future::Either;
use opentelemetry::Context;
use tokio::time::Instant;
use tonic::Status;
use tonic::metadata::MetadataMap;

use super::{CallCtx, Grpc, Sends, TRANSPARENT_RETRIES, Unary, caller_metadata, require_runtime};
use crate::grpc::client::Method;
use crate::grpc::client::client::{Inner, deadline, own_timeout};
use crate::grpc::client::connection::{never_processed, transport_status};
use crate::grpc::client::hooks::{AttemptSpan, call_context};
use crate::grpc::deadline::Deadline;

/// A unary call of `method`: its deadline and context are read here, when
/// the call is made (not when its future is first polled), and the request
/// encoded once.
pub(in crate::grpc::client) fn unary<'a, Req, Resp>(
    inner: &'a Arc<Inner>,
    method: &'static Method,
    request: tonic::Request<Req>,
) -> impl Future<Output = Result<tonic::Response<Resp>, Status>> + Send + 'a
where
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    let deadline = deadline(
        Instant::now(),
        Some(inner.settings.timeout),
        own_timeout(request.metadata()),
    );
    let (metadata, extensions, message) = request.into_parts();
    // Framed once: every attempt sends these bytes.
    let frame = match crate::grpc::client::unary::frame(&message) {
        Ok(frame) => frame,
        // Longer than a frame can say: nothing is sent.
        Err(status) => return Either::Left(std::future::ready(Err(status))),
    };
    drop(message);
    let cx = call_context(&extensions);
    let metadata = caller_metadata(metadata);
    let send = TypedUnary {
        metadata,
        frame,
        _response: std::marker::PhantomData::<fn() -> Resp>,
    };
    Either::Right(run_unary(inner, method, cx, deadline, send))
}

/// The attempt loop of a unary call ([`crate::call`]): each attempt
/// passes the breaker, the fault point and the deadline, and is
/// classified, counted and retried as its classification and the budget
/// decide.
pub(in crate::grpc::client) fn run_unary<'a, S: Sends<Unary> + 'a>(
    inner: &'a Inner,
    method: &'static Method,
    cx: Context,
    deadline: Option<Deadline>,
    send: S,
) -> impl Future<Output = Result<S::Output, Status>> + 'a {
    // Made first, so that the call's state is kept once across every
    // await, the first included (not beside its own arguments).
    let mut call = Grpc::call(inner, method, cx, deadline, deadline, send);
    async move {
        require_runtime();
        call.run().await
    }
}

/// A typed unary call's attempts: the message framed once.
struct TypedUnary<Resp> {
    metadata: MetadataMap,
    /// The request's gRPC frame: its head and the message.
    frame: bytes::Bytes,
    _response: std::marker::PhantomData<fn() -> Resp>,
}

impl<Resp> Sends<Unary> for TypedUnary<Resp>
where
    Resp: prost::Message + Default + Send + 'static,
{
    type Output = tonic::Response<Resp>;

    fn send<'s>(
        &'s self,
        call: &'s CallCtx<'_>,
        attempt: u32,
        span: &'s mut AttemptSpan,
    ) -> impl Future<Output = Result<Self::Output, Status>> + Send + 's {
        send_unary::<Resp>(call, attempt, &self.metadata, span, &self.frame)
    }

    fn trailer(output: &Self::Output) -> Option<&MetadataMap> {
        Some(output.metadata())
    }

    fn is_resendable(&self) -> bool {
        true
    }
}

/// One unary attempt over the connection, sent again at once if the request
/// never reached the server, each send in a span of its own. Each send's
/// metadata is the caller's `base` with what [`CallCtx::metadata`] adds
/// (moved into the request: one copy of the caller's map per send); its
/// body is `frame`, and its response is read as tonic's `Grpc::unary`
/// reads it ([`unary::read`](crate::grpc::client::unary::read)). The path is made for
/// each send (from a `'static` string: no allocation), not held by the
/// call's future for its whole life.
async fn send_unary<Resp>(
    call: &CallCtx<'_>,
    attempt: u32,
    base: &MetadataMap,
    span: &mut AttemptSpan,
    frame: &bytes::Bytes,
) -> Result<tonic::Response<Resp>, Status>
where
    Resp: prost::Message + Default + Send + 'static,
{
    let mut resent = 0;
    loop {
        // Again for a resend: the connection that failed it has gone.
        let mut sender = call.sender().await?;
        let request = crate::grpc::client::unary::request(
            call.inner.conn.origin(),
            call.method.full_name,
            call.untimed_metadata(base, span),
            call.timeout(),
            frame.clone(),
        );
        let result = match sender.send(request).await {
            Ok(response) => {
                crate::grpc::client::unary::read::<Resp, _>(
                    response,
                    call.inner.settings.max_decoding_message_size,
                )
                .await
            }
            Err(err) => Err(Status::from_error(err)),
        }
        .map_err(transport_status);
        match result {
            Err(status) if resent < TRANSPARENT_RETRIES && never_processed(&status) => {
                resent += 1;
                call.resend(attempt, span, &status);
            }
            result => return result,
        }
    }
}
