//! What each attempt of a call through the channel sends: the request's
//! URI, the caller's headers, and its body kept to be sent again.

use std::future::Future;
use std::sync::Mutex;

use http::{HeaderMap, Uri};
use tonic::Status;
use tonic::metadata::MetadataMap;
use tower_service::Service;

use super::WireBody;
use super::read::{Read, read_unary};
use super::replay::{Replay, lock};
use crate::grpc::client::attempt::{CallCtx, Open, Sends, TRANSPARENT_RETRIES, Unary};
use crate::grpc::client::connection::{never_processed, transport_status};
use crate::grpc::client::hooks::AttemptSpan;
use crate::grpc::wire::{CONTENT_TYPE_GRPC, TE_TRAILERS, head_error};

/// What each attempt of a call through the channel sends.
pub(super) struct Attempts {
    pub(super) uri: Uri,
    /// The caller's headers, without its `grpc-timeout` (each send says
    /// the time left).
    pub(super) headers: SendHeaders,
    pub(super) replay: Replay,
}

/// `te: trailers` and `content-type: application/grpc`: the headers
/// tonic's `Grpc` writes into every request it makes, and all a stock
/// client's request carries when its caller set no metadata.
fn tonic_headers(capacity: usize) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(capacity);
    headers.insert(http::header::TE, TE_TRAILERS);
    headers.insert(http::header::CONTENT_TYPE, CONTENT_TYPE_GRPC);
    headers
}

/// Whether `headers` are [`tonic_headers`]' two, in either order, told
/// without hashing a name.
pub(super) fn is_tonic_headers(headers: &HeaderMap) -> bool {
    headers.len() == 2
        && headers.iter().all(|(name, value)| {
            (*name == http::header::TE && *value == TE_TRAILERS)
                || (*name == http::header::CONTENT_TYPE && *value == CONTENT_TYPE_GRPC)
        })
        && headers.keys_len() == 2
}

/// Room for what a send adds to the caller's headers without growing the
/// map: `grpc-timeout`, the connection's `user-agent`, a `traceparent` and
/// a `baggage`.
const ADDED_HEADERS: usize = 4;

/// The caller's headers, as each send of its call gets them. A send's map
/// is consumed by hyper (h2 writes it on the connection's task), so each
/// send needs one of its own.
pub(super) enum SendHeaders {
    /// tonic's two headers alone ([`tonic_headers`], a caller that set no
    /// metadata: most calls): the first send takes the caller's map (no
    /// copy), any later one writes the same two headers anew.
    Tonic(Mutex<Option<HeaderMap>>),
    /// Anything else: each send a copy, with room for what it adds.
    Caller(HeaderMap),
}

impl SendHeaders {
    /// The headers of the next send, before what the send adds.
    fn next(&self) -> HeaderMap {
        match self {
            SendHeaders::Tonic(first) => lock(first)
                .take()
                .unwrap_or_else(|| tonic_headers(2 + ADDED_HEADERS)),
            SendHeaders::Caller(headers) => {
                // `clone` would give a map with no room, which the headers
                // the send adds would grow (a reallocation each).
                let mut copy = HeaderMap::with_capacity(headers.len() + ADDED_HEADERS);
                // In order, each value of a name after its first.
                for (name, value) in headers {
                    copy.append(name.clone(), value.clone());
                }
                copy
            }
        }
    }
}

impl Attempts {
    /// The request of one send: the caller's headers with what the
    /// attempt adds (the time left, the trace context), the body again.
    fn request(&self, call: &CallCtx<'_>, span: &AttemptSpan) -> http::Request<tonic::body::Body> {
        let mut request = http::Request::new(self.replay.lend());
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = http::Version::HTTP_2;
        *request.headers_mut() = call.stamp(self.headers.next(), span);
        request
    }

    /// One send of an attempt, sent again at once (up to
    /// [`TRANSPARENT_RETRIES`] times, each in a span of its own) while the
    /// server never saw it and its body can be sent again; `answer` reads
    /// the response.
    async fn send_with<T, A, F>(
        &self,
        call: &CallCtx<'_>,
        attempt: u32,
        span: &mut AttemptSpan,
        answer: A,
    ) -> Result<T, Status>
    where
        A: Fn(http::Response<WireBody>) -> F,
        F: Future<Output = Result<T, Status>>,
    {
        let mut resent = 0;
        loop {
            // Again for a resend: the connection that failed it has gone.
            let mut sender = call.sender().await?;
            let status = match sender.call(self.request(call, span)).await {
                Ok(response) => return answer(response).await,
                Err(err) => transport_status(Status::from_error(err)),
            };
            if resent < TRANSPARENT_RETRIES
                && self.replay.is_resendable()
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

impl Sends<Unary> for Attempts {
    type Output = Read;

    fn send<'s>(
        &'s self,
        call: &'s CallCtx<'_>,
        attempt: u32,
        span: &'s mut AttemptSpan,
    ) -> impl Future<Output = Result<Read, Status>> + Send + 's {
        let limit = call.inner.settings.max_decoding_message_size;
        self.send_with(call, attempt, span, move |response| {
            read_unary(response, limit)
        })
    }

    fn trailer(output: &Read) -> Option<&MetadataMap> {
        Some(&output.trailers)
    }

    fn is_resendable(&self) -> bool {
        self.replay.is_resendable()
    }
}

impl Sends<Open> for Attempts {
    type Output = http::Response<WireBody>;

    fn send<'s>(
        &'s self,
        call: &'s CallCtx<'_>,
        attempt: u32,
        span: &'s mut AttemptSpan,
    ) -> impl Future<Output = Result<Self::Output, Status>> + Send + 's {
        let answered = |response: http::Response<WireBody>| async move {
            match head_error(response.headers()) {
                // A trailers-only status other than OK (the server's; a
                // proxy's page is the sender's error already): no response
                // headers, so the stream has not opened (gRFC A6: a call
                // is committed by them). The caller has seen nothing but
                // a status, a unary attempt's answer, whatever the
                // method's kind, listed or not.
                Some(status) => Err(status),
                None => Ok(response),
            }
        };
        self.send_with(call, attempt, span, answered)
    }

    fn trailer(_: &Self::Output) -> Option<&MetadataMap> {
        None
    }

    fn is_resendable(&self) -> bool {
        self.replay.is_resendable()
    }
}
