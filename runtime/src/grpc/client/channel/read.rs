//! A unary call's response, read whole before it is classified, with the
//! statuses tonic's decoder gives the typed call.

use std::pin::Pin;

use bytes::Bytes;
use tonic::Status;
use tonic::metadata::MetadataMap;

use super::body::{ChannelBody, Kind};
use super::replay::Chunks;
use crate::grpc::client::connection::transport_status;
use crate::grpc::client::limit::{FRAME_HEAD, Frames, message_len, too_large, too_long};
use crate::grpc::wire::{end_status, head_error, is_trailers_only};

/// A unary call's response, read whole: the head, the body's bytes as
/// they came (the framed message, handed on without a copy) and the
/// trailer.
pub(super) struct Read {
    parts: http::response::Parts,
    data: Chunks,
    pub(super) trailers: MetadataMap,
}

impl Read {
    /// The response tonic's decoder reads: the same head, bytes and
    /// trailer.
    pub(super) fn into_response(self) -> http::Response<ChannelBody> {
        let body = ChannelBody {
            kind: Kind::Read {
                data: self.data,
                trailers: Some(self.trailers.into_headers()),
            },
        };
        http::Response::from_parts(self.parts, body)
    }
}

/// Reads a unary call's whole response and its status as tonic's
/// `Grpc::unary` reads them for the typed call (the same statuses, with
/// the same messages and metadata): a trailers-only status; one message,
/// not compressed; the trailer's `grpc-status`, else gRPC's mapping of the
/// HTTP status; a broken body as the connection's error. A message longer
/// than `limit` bytes ([`Settings::max_decoding_message_size`](crate::grpc::client::Settings::max_decoding_message_size))
/// ends the call `ResourceExhausted` here ([`too_large`]), as the typed
/// call's does, whether it is the first or one sent after it; so does a
/// response whose frames together are longer than one message of `limit`
/// bytes and its head ([`too_long`]), so what a server sends after its
/// one message cannot make the call hold more. The bytes are kept as they
/// came, for the caller's decoder (which decodes and drops any message
/// after the first, as tonic's `Grpc::unary` does).
pub(super) async fn read_unary<B>(response: http::Response<B>, limit: usize) -> Result<Read, Status>
where
    B: http_body::Body<Data = Bytes, Error = crate::grpc::client::BoxError> + Unpin,
{
    let (parts, mut body) = response.into_parts();
    // A `grpc-status` in the head: a trailers-only status, or an `OK`
    // after which tonic reads the body's message and nothing of its
    // trailer (`Streaming::new_empty`).
    if let Some(status) = head_error(&parts.headers) {
        return Err(status);
    }
    let ok_in_head = is_trailers_only(&parts.headers);
    // As tonic's `Grpc::unary` (`Grpc::client_streaming`): a status met
    // before the message has arrived whole carries its own metadata (a
    // trailer's), then the headers, which replace a name both carry
    // (`MetadataMap::merge`); one met after it (reading on to the
    // trailer) carries its own alone.
    let failed = |status: Status, whole: bool| {
        let mut status = transport_status(status);
        if !whole {
            let mut merged = std::mem::take(status.metadata_mut()).into_headers();
            merged.extend(parts.headers.clone());
            *status.metadata_mut() = MetadataMap::from_headers(merged);
        }
        status
    };
    // Each frame's head as tonic's decoder checks it, in its words.
    let http_status = parts.status;
    let check = |head: &[u8; FRAME_HEAD]| match head[0] {
        0 if message_len(head) > limit => Err(too_large(message_len(head), limit)),
        0 => Ok(()),
        1 => Err(Status::internal(
            "protocol error: received message with compressed-flag but no grpc-encoding was specified",
        )),
        flag => Err(Status::internal(format!(
            "protocol error: received message with invalid compression flag: {flag} (valid flags are 0 and 1) while receiving response with status: {http_status}"
        ))),
    };
    let mut data = Chunks::default();
    let mut len = 0usize;
    let mut frames = Frames::default();
    // Where the first frame (its head and message) ends, once its head is
    // read. A frame after it is kept for tonic's decoder, which decodes
    // and drops it (failing the call when it does not decode), as long
    // as the response's frames stay within one message of `limit` bytes
    // and its head: what a server sends after its one message cannot make
    // the call hold more.
    let mut end: Option<usize> = None;
    let whole = |end: Option<usize>, len: usize| end.is_some_and(|end| len >= end);
    let mut trailer = None;
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|err| failed(Status::from_error(err), whole(end, len)))?;
        match frame.into_data() {
            Ok(chunk) => {
                let before = len;
                let mut at = 0;
                while let Some((head, starts)) = frames.next_head(&chunk, &mut at) {
                    if let Err(status) = check(&head) {
                        return Err(failed(status, whole(end, before + starts)));
                    }
                    end.get_or_insert(FRAME_HEAD + message_len(&head));
                }
                len += chunk.len();
                if len > FRAME_HEAD + limit {
                    return Err(failed(too_long(len, limit), whole(end, before)));
                }
                if !chunk.is_empty() {
                    data.push(chunk);
                }
            }
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    // The last frame (as tonic's decoder reads it: nothing
                    // after the trailer is polled).
                    trailer = Some(trailers);
                    break;
                }
            }
        }
    }
    // As tonic's decoder ends: a body that ends mid-frame, without a
    // trailer, is a truncated stream; then the trailer's status (none
    // after an `OK` in the head); a message cut short by an `OK` trailer
    // is none.
    let whole = whole(end, len);
    if trailer.is_none() && frames.is_mid_frame() {
        return Err(failed(
            Status::internal("Unexpected EOF decoding stream."),
            whole,
        ));
    }
    if !ok_in_head && let Err(status) = end_status(trailer.as_ref(), parts.status) {
        return Err(failed(status, whole));
    }
    if !whole {
        return Err(Status::internal("Missing response message."));
    }
    Ok(Read {
        parts,
        data,
        trailers: MetadataMap::from_headers(trailer.unwrap_or_default()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::uri::PathAndQuery;

    /// The channel's reading of a unary response, as the stock client
    /// sees it: `read_unary`'s status, or what tonic's `Grpc::unary`
    /// decodes of the response it hands on.
    async fn through_the_channel(
        response: http::Response<crate::grpc::client::unary::tests::Script>,
    ) -> Result<tonic::Response<crate::grpc::client::unary::tests::Cart>, Status> {
        let read = read_unary(response, 4 << 20).await?;
        let mut grpc = tonic::client::Grpc::new(crate::grpc::client::unary::Answered(Some(
            read.into_response(),
        )));
        grpc.unary(
            tonic::Request::new(()),
            PathAndQuery::from_static("/"),
            tonic_prost::ProstCodec::<(), crate::grpc::client::unary::tests::Cart>::default(),
        )
        .await
    }

    /// The typed reader's scripted responses, read by the channel and by
    /// tonic's `Grpc::unary` alone: the same message, metadata and
    /// extensions, or the same status (code, message, metadata, source).
    #[tokio::test]
    async fn a_unary_response_reads_through_the_channel_as_tonics_grpc_reads_it() {
        use crate::grpc::client::unary::tests::{Cart, as_the_clients, cases, response, seen};
        for (status, head, steps) in &cases() {
            let tonic = {
                let mut grpc = tonic::client::Grpc::new(crate::grpc::client::unary::Answered(
                    Some(response(*status, head, steps)),
                ));
                grpc.unary(
                    tonic::Request::new(()),
                    PathAndQuery::from_static("/"),
                    tonic_prost::ProstCodec::<(), Cart>::default(),
                )
                .await
            };
            let ours = through_the_channel(response(*status, head, steps)).await;
            assert_eq!(
                seen(ours),
                as_the_clients(seen(tonic)),
                "HTTP {status}, head {head:?}, body {:?}",
                steps.len()
            );
        }
    }
}
