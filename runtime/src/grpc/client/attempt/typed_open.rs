//! A typed stream's attempts to open it, and the stream's settling (its
//! outcome counted) when it ends.

use std::error::Error as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::Stream;
use http::uri::PathAndQuery;
use opentelemetry::Context;
use tokio::time::Instant;
use tonic::Status;
use tonic::metadata::MetadataMap;

use super::{CallCtx, Grpc, Open, Sends, TRANSPARENT_RETRIES, caller_metadata, require_runtime};
use crate::circuit::{Outcome, OwnedTicket};
use crate::grpc::client::client::{Inner, deadline, own_timeout};
use crate::grpc::client::codec::PreEncoded;
use crate::grpc::client::connection::{closing, never_processed, transport_status};
use crate::grpc::client::hooks::{AttemptSpan, Hooks, call_context};
use crate::grpc::client::stream::{Holder, Streaming};
use crate::grpc::client::stream_end::{End, Settle, deadline_exceeded};
use crate::grpc::client::{CallState, Ended, Method, classify_attempt};
use crate::grpc::deadline::Deadline;

/// What the request of a stream is, for [`open`].
pub(in crate::grpc::client) enum Outbound<S> {
    /// One message, encoded once (server streaming).
    One(bytes::Bytes),
    /// A stream of messages, held between attempts (client and
    /// bidirectional streaming).
    Many(Holder<Pin<Box<S>>>),
}

impl<S> Outbound<S> {
    /// Whether what an attempt sent can be sent again: one message always;
    /// a stream only while no attempt has read it (reading uses it up).
    fn is_resendable(&self) -> bool {
        match self {
            Outbound::One(_) => true,
            Outbound::Many(held) => held.is_unread(),
        }
    }
}

/// Opens a stream of `method`: the open is retried as a unary attempt is
/// (with the backoff, not `Settings::timeout`: a stream ends with its
/// caller's own deadline, or the inherited one); once open (once the
/// server answered with its response headers), the stream is never
/// retried, and its ticket is settled when it ends. A trailers-only
/// answer (a status and no headers) has not opened it: that attempt
/// failed with the status, as a unary attempt does.
///
/// The stream's deadline and context are read here, when the call is made.
/// `one_response`: a client-streaming call, whose stream must carry one
/// message before its end.
pub(in crate::grpc::client) fn open<'a, S, Req, Resp>(
    inner: &'a Arc<Inner>,
    method: &'static Method,
    request: tonic::Request<Outbound<S>>,
    one_response: bool,
) -> impl Future<Output = Result<tonic::Response<Streaming<Resp>>, Status>> + Send + 'a
where
    S: Stream<Item = Req> + Send + 'static,
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    let deadline = deadline(Instant::now(), None, own_timeout(request.metadata()));
    let (metadata, extensions, outbound) = request.into_parts();
    let cx = call_context(&extensions);
    let metadata = caller_metadata(metadata);
    let send = TypedOpen::<S, Req, Resp> {
        path: PathAndQuery::from_static(method.full_name),
        metadata,
        outbound,
        _response: std::marker::PhantomData,
    };
    async move {
        let Opened { response, settle } =
            run_open(inner, method, cx, deadline, deadline, send).await?;
        let (headers, stream, extensions) = response.into_parts();
        let stream = Streaming::new(stream, settle, deadline, inner.conn.closed_flag())
            .one_response(one_response);
        Ok(tonic::Response::from_parts(headers, stream, extensions))
    }
}

/// A stream that opened, and what counts it in the breaker at its end.
pub(in crate::grpc::client) struct Opened<T> {
    pub(in crate::grpc::client) response: T,
    pub(in crate::grpc::client) settle: Settle,
}

/// The attempt loop of a stream's open ([`crate::call`]): attempts as
/// [`run_unary`]'s until one opens the stream (the server's response
/// headers); the stream then keeps the attempt's ticket and span, and
/// `settle` counts it once, at its end. An attempt that failed,
/// trailers-only status included, is settled as a unary attempt is.
///
/// `open` bounds the attempts to open it; `deadline` is the stream's, which
/// its sends say in their `grpc-timeout` and its settle reads. They differ
/// only for a channel's method not listed, whose open alone has the
/// client's timeout.
pub(in crate::grpc::client) fn run_open<'a, S: Sends<Open> + 'a>(
    inner: &'a Arc<Inner>,
    method: &'static Method,
    cx: Context,
    open: Option<Deadline>,
    deadline: Option<Deadline>,
    send: S,
) -> impl Future<Output = Result<Opened<S::Output>, Status>> + 'a {
    let mut call = Grpc::call(inner, method, cx, open, deadline, send);
    async move {
        require_runtime();
        let crate::call::Opened {
            output: response,
            ticket,
            span,
        } = call.open().await?;
        let cx = call.transport().ctx.hooks.cx.clone();
        let settle = stream_settle(inner, method, cx, ticket, span, deadline);
        Ok(Opened { response, settle })
    }
}

/// A typed stream's attempts to open.
struct TypedOpen<S, Req, Resp> {
    path: PathAndQuery,
    metadata: MetadataMap,
    outbound: Outbound<S>,
    _response: std::marker::PhantomData<fn() -> (Req, Resp)>,
}

impl<S, Req, Resp> Sends<Open> for TypedOpen<S, Req, Resp>
where
    S: Stream<Item = Req> + Send + 'static,
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    type Output = tonic::Response<tonic::Streaming<Resp>>;

    fn send<'s>(
        &'s self,
        call: &'s CallCtx<'_>,
        attempt: u32,
        span: &'s mut AttemptSpan,
    ) -> impl Future<Output = Result<Self::Output, Status>> + Send + 's {
        send_open::<S, Req, Resp>(
            call,
            attempt,
            &self.path,
            &self.metadata,
            span,
            &self.outbound,
        )
    }

    fn trailer(_: &Self::Output) -> Option<&MetadataMap> {
        None
    }

    fn is_resendable(&self) -> bool {
        self.outbound.is_resendable()
    }
}

/// One attempt to open a stream, sent again at once if the request never
/// reached the server and its request stream is still unread, each send
/// in a span of its own ([`send_unary`](super::typed_unary::send_unary)).
///
/// `Ok` is an open stream: the server answered with its response headers.
/// `Err` is a failed open: one nothing came back from (no connection, a
/// failed dial, a refused stream), or the server's trailers-only status
/// (the stream never opened: that status is the attempt's). tonic gives a
/// status it read from the server no source, and one made of a transport
/// error the error as its source; only the latter may be sent again at
/// once.
async fn send_open<S, Req, Resp>(
    call: &CallCtx<'_>,
    attempt: u32,
    path: &PathAndQuery,
    base: &MetadataMap,
    span: &mut AttemptSpan,
    outbound: &Outbound<S>,
) -> Result<tonic::Response<tonic::Streaming<Resp>>, Status>
where
    S: Stream<Item = Req> + Send + 'static,
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    let mut resent = 0;
    loop {
        // Again for a resend: the connection that failed it has gone.
        let mut grpc = call.grpc().await?;
        let result = match outbound {
            Outbound::One(body) => {
                let request = tonic::Request::from_parts(
                    call.untimed_metadata(base, span),
                    tonic::Extensions::default(),
                    body.clone(),
                );
                grpc.server_streaming(request, path.clone(), PreEncoded::<Resp>::new(body.len()))
                    .await
            }
            Outbound::Many(held) => {
                let request = tonic::Request::from_parts(
                    call.untimed_metadata(base, span),
                    tonic::Extensions::default(),
                    held.lend(),
                );
                grpc.streaming(
                    request,
                    path.clone(),
                    tonic_prost::ProstCodec::<Req, Resp>::default(),
                )
                .await
            }
        };
        match result {
            Ok(response) => return Ok(response),
            // The server's own trailers-only status (a proxy's error page,
            // no gRPC server's answer, has an `HttpAnswer` as its source):
            // the attempt's, as the server sent it; the server saw the
            // request, so it is not sent again at once.
            Err(status) if status.source().is_none() => {
                return Err(status);
            }
            Err(status) => {
                let status = transport_status(status);
                if resent < TRANSPARENT_RETRIES
                    && outbound.is_resendable()
                    && never_processed(&status)
                {
                    resent += 1;
                    call.resend(attempt, span, &status);
                } else {
                    return Err(status);
                }
            }
        }
    }
}

/// The settle function of a stream that opened: counts it in the breaker
/// once, at its end.
pub(super) fn stream_settle(
    inner: &Arc<Inner>,
    method: &'static Method,
    cx: Context,
    ticket: OwnedTicket,
    span: AttemptSpan,
    deadline: Option<Deadline>,
) -> Settle {
    // The stream may outlive the call that opened it: it keeps its own
    // handle on the client.
    let inner = inner.clone();
    Box::new(move |end: End<'_>| {
        let hooks = Hooks {
            inner: &inner,
            method,
            cx,
        };
        let classify = |status: Option<&Status>, trailer: &MetadataMap| {
            let call = CallState {
                cancelled: false,
                deadline_passed: status.is_some()
                    && deadline.is_some_and(|d| Instant::now() >= d.at),
            };
            let ended = Ended::Stream { status, trailer };
            classify_attempt(method, &inner.settings.classify, ended, call).breaker
        };
        let outcome = match end {
            End::Finished(trailer) => {
                hooks.attempt_end(span, None);
                Some(classify(None, trailer))
            }
            End::Failed(status) => {
                hooks.attempt_end(span, Some(status));
                Some(classify(Some(status), status.metadata()))
            }
            End::DeadlinePassed => {
                let bound = deadline.map(|d| d.bound);
                hooks.attempt_end(span, Some(&deadline_exceeded(bound, &inner.settings.addr)));
                Some(Outcome::Failure)
            }
            End::Closed => {
                // The connection closed under it: the caller's side, not the
                // dependency's. Counts nothing.
                hooks.attempt_end(span, Some(&closing()));
                None
            }
        };
        match outcome {
            Some(outcome) => {
                let current = hooks.in_call(|| ticket.done(outcome));
                hooks.counted(outcome, current);
            }
            None => ticket.release(),
        }
    })
}
