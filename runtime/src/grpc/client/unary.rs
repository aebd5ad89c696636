//! A typed unary attempt's HTTP request and the reading of its response,
//! without tonic's `Grpc` (its encoding body, its `Streaming` decoder and
//! the status read from its trailer): the request is the gRPC frame
//! encoded once per call ([`frame`]), and a response is read whole
//! ([`read`]). A plain answer (one uncompressed message, an `OK` trailer as
//! tonic reads it, a message that decodes) is decoded here; a message over
//! the client's decoding limit ends the call here, `ResourceExhausted`;
//! any other is handed, as the bytes and frames read, to tonic's own
//! `Grpc::unary`, so that every status and its metadata are tonic's.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http::Uri;
use http::header::{CONTENT_TYPE, HeaderValue, TE};
use http::uri::PathAndQuery;
use http_body::{Body, Frame};
use tonic::Status;
use tonic::metadata::MetadataMap;

use super::channel::Whole;
use super::layer::BoxError;
use super::limit::{FRAME_HEAD, Limited, message_len, read_head, too_large};
use crate::grpc::wire::{
    CONTENT_TYPE_GRPC, GRPC_ENCODING, GRPC_TIMEOUT_HEADER, RESERVED, TE_TRAILERS, is_ok,
    is_trailers_only,
};

/// `message` as one uncompressed gRPC frame (its head, then the message),
/// encoded once, for every attempt of a call to send.
///
/// # Errors
///
/// tonic's `ResourceExhausted` for a message longer than a frame can say
/// (4 GiB), which tonic's encoder refuses too.
pub(super) fn frame<M: prost::Message>(message: &M) -> Result<Bytes, Status> {
    let len = message.encoded_len();
    let Ok(head_len) = u32::try_from(len) else {
        return Err(Status::resource_exhausted(format!(
            "Cannot return body with more than 4GB of data but got {len} bytes"
        )));
    };
    let mut buf = BytesMut::with_capacity(FRAME_HEAD + len);
    buf.put_u8(0);
    buf.put_u32(head_len);
    message
        .encode(&mut buf)
        .expect("a buffer of the message's encoded length has room for it");
    Ok(buf.freeze())
}

/// The request of one send: tonic's (`Grpc::unary`'s) for the same call,
/// the caller's `metadata` without the names tonic reserves, then `te`,
/// `content-type` and the send's `grpc-timeout`, and `frame` as its body,
/// in one DATA frame.
pub(super) fn request(
    origin: &Uri,
    path: &'static str,
    metadata: MetadataMap,
    timeout: Option<HeaderValue>,
    frame: Bytes,
) -> http::Request<tonic::body::Body> {
    let mut headers = metadata.into_headers();
    // An empty map (most calls) is not searched.
    if !headers.is_empty() {
        for name in &RESERVED {
            headers.remove(name);
        }
    }
    headers.insert(TE, TE_TRAILERS);
    headers.insert(CONTENT_TYPE, CONTENT_TYPE_GRPC);
    if let Some(timeout) = timeout {
        headers.insert(GRPC_TIMEOUT_HEADER, timeout);
    }
    let mut uri = origin.clone().into_parts();
    uri.path_and_query = Some(PathAndQuery::from_static(path));
    let mut request = http::Request::new(tonic::body::Body::new(Whole::one(frame)));
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = Uri::from_parts(uri).expect("an origin with a method's path is a URI");
    *request.version_mut() = http::Version::HTTP_2;
    *request.headers_mut() = headers;
    request
}

/// What reading the body stopped at, before a response is handed to
/// tonic.
enum Stop<E> {
    /// A frame that is not data (the trailer), an error, or the end.
    Polled(Option<Result<Frame<Bytes>, E>>),
    /// A frame's head tonic refuses (compressed), or data past
    /// the first frame: the rest is left unread, for tonic to read as it
    /// does (a refused frame is not read; further messages are decoded
    /// one by one, not kept).
    Handed,
}

/// Reads a typed unary call's response as tonic's `Grpc::unary` does,
/// with the same message, metadata and extensions, or the same status.
///
/// A response with a `grpc-encoding` or a `grpc-status` in its head
/// (trailers-only) is tonic's to read, as is any body that is not one
/// uncompressed message followed by an `OK` trailer ([`is_ok`]), or whose
/// message does not decode. An uncompressed message over `limit` bytes
/// ([`Settings::max_decoding_message_size`](super::Settings::max_decoding_message_size))
/// ends the call `ResourceExhausted` ([`too_large`]) as soon as its head
/// is read, with the response's headers as its metadata (those tonic gives
/// a status met before the message), whoever reads the body.
pub(super) async fn read<Resp, B>(
    response: http::Response<B>,
    limit: usize,
) -> Result<tonic::Response<Resp>, Status>
where
    Resp: prost::Message + Default + Send + 'static,
    B: Body<Data = Bytes, Error = BoxError> + Send + Unpin + 'static,
{
    let (parts, mut body) = response.into_parts();
    if parts.headers.contains_key(&GRPC_ENCODING) || is_trailers_only(&parts.headers) {
        return Box::pin(by_tonic(
            parts,
            Replayed::new(Chunks::default(), None, body),
            limit,
        ))
        .await;
    }
    let mut chunks = Chunks::default();
    let mut len = 0usize;
    let mut head = [0u8; FRAME_HEAD];
    let stop = loop {
        match std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(chunk) => {
                    read_head(&mut head, len, &chunk);
                    len += chunk.len();
                    if !chunk.is_empty() {
                        chunks.push(chunk);
                    }
                    if len >= FRAME_HEAD && head[0] == 0 && message_len(&head) > limit {
                        let mut status = too_large(message_len(&head), limit);
                        *status.metadata_mut() = MetadataMap::from_headers(parts.headers);
                        return Err(status);
                    }
                    if len >= FRAME_HEAD && (head[0] != 0 || len > FRAME_HEAD + message_len(&head))
                    {
                        break Stop::Handed;
                    }
                }
                Err(frame) => break Stop::Polled(Some(Ok(frame))),
            },
            polled => break Stop::Polled(polled),
        }
    };
    if let Stop::Polled(Some(Ok(frame))) = &stop
        && let Some(trailer) = frame.trailers_ref()
        && is_ok(trailer)
        && len >= FRAME_HEAD
        && len - FRAME_HEAD == message_len(&head)
        && let Ok(message) = decode::<Resp>(&chunks)
    {
        let Stop::Polled(Some(Ok(frame))) = stop else {
            unreachable!("matched above")
        };
        let trailer = frame.into_trailers().unwrap_or_default();
        let http::response::Parts {
            mut headers,
            extensions,
            ..
        } = parts;
        // tonic's `MetadataMap::merge`: the trailer's names replace the
        // head's.
        headers.extend(trailer);
        return Ok(tonic::Response::from_parts(
            MetadataMap::from_headers(headers),
            message,
            extensions,
        ));
    }
    let held = match stop {
        Stop::Polled(polled) => Some(polled),
        Stop::Handed => None,
    };
    Box::pin(by_tonic(parts, Replayed::new(chunks, held, body), limit)).await
}

/// The data chunks of a response read so far, in order: the first held
/// in place, the others in a vector, so that an answer whose frame comes
/// in one chunk (most) allocates no vector for it.
#[derive(Default)]
struct Chunks {
    first: Option<Bytes>,
    more: Vec<Bytes>,
}

impl Chunks {
    /// Keeps `chunk`, after those kept before it.
    fn push(&mut self, chunk: Bytes) {
        if self.first.is_none() {
            self.first = Some(chunk);
        } else {
            self.more.push(chunk);
        }
    }

    /// The chunks, in order.
    fn iter(&self) -> impl Iterator<Item = &Bytes> {
        self.first.iter().chain(&self.more)
    }
}

/// The message of the one frame `chunks` hold, as prost decodes it.
fn decode<Resp: prost::Message + Default>(chunks: &Chunks) -> Result<Resp, prost::DecodeError> {
    match chunks {
        Chunks {
            first: Some(one),
            more,
        } if more.is_empty() => Resp::decode(one.slice(FRAME_HEAD..)),
        _ => {
            let mut whole = BytesMut::with_capacity(chunks.iter().map(Bytes::len).sum());
            for chunk in chunks.iter() {
                whole.extend_from_slice(chunk);
            }
            Resp::decode(whole.freeze().slice(FRAME_HEAD..))
        }
    }
}

/// The response `parts` with `body` read by tonic's `Grpc::unary`, as if
/// it had come from the connection: the same statuses, metadata and
/// message; a message over `limit` bytes is the client's
/// `ResourceExhausted` ([`Limited`]), met before tonic's decoder reads its
/// head.
async fn by_tonic<Resp, B>(
    parts: http::response::Parts,
    body: Replayed<B>,
    limit: usize,
) -> Result<tonic::Response<Resp>, Status>
where
    Resp: prost::Message + Default + Send + 'static,
    B: Body<Data = Bytes, Error = BoxError> + Send + Unpin + 'static,
{
    let response = http::Response::from_parts(parts, Limited::new(body, limit));
    let mut grpc =
        tonic::client::Grpc::new(Answered(Some(response))).max_decoding_message_size(limit);
    grpc.unary(
        tonic::Request::new(()),
        PathAndQuery::from_static("/"),
        tonic_prost::ProstCodec::<(), Resp>::default(),
    )
    .await
}

/// A service that answers its one call with a response already received
/// (tonic's reading of it is all that is wanted; its request is dropped
/// unsent).
pub(super) struct Answered<T>(pub(super) Option<T>);

impl<T> tower_service::Service<http::Request<tonic::body::Body>> for Answered<T> {
    type Response = T;
    type Error = Status;
    type Future = std::future::Ready<Result<T, Status>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _request: http::Request<tonic::body::Body>) -> Self::Future {
        std::future::ready(
            self.0
                .take()
                .ok_or_else(|| Status::internal("an answered response is read once")),
        )
    }
}

pin_project_lite::pin_project! {
    /// A response body read this far, again: the data chunks read, then
    /// the last thing polled (if any), then the rest of the body.
    struct Replayed<B: Body> {
        first: Option<Bytes>,
        more: std::vec::IntoIter<Bytes>,
        held: Option<Option<Result<Frame<Bytes>, B::Error>>>,
        #[pin]
        rest: B,
    }
}

impl<B: Body> Replayed<B> {
    fn new(chunks: Chunks, held: Option<Option<Result<Frame<Bytes>, B::Error>>>, rest: B) -> Self {
        Replayed {
            first: chunks.first,
            more: chunks.more.into_iter(),
            held,
            rest,
        }
    }
}

impl<B> Body for Replayed<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        if let Some(chunk) = this.first.take().or_else(|| this.more.next()) {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        if let Some(held) = this.held.take() {
            return Poll::Ready(held);
        }
        this.rest.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none()
            && self.more.len() == 0
            && match &self.held {
                Some(held) => held.is_none(),
                None => self.rest.is_end_stream(),
            }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::VecDeque;

    use http_body_util::BodyExt;

    use super::*;

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Cart {
        #[prost(string, tag = "1")]
        id: String,
        #[prost(uint32, tag = "2")]
        items: u32,
    }

    /// A response body that yields its steps in order, then ends.
    pub(crate) struct Script(VecDeque<Result<Frame<Bytes>, BoxError>>);

    impl Body for Script {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            Poll::Ready(self.0.pop_front())
        }
    }

    /// Header names and values, in order.
    pub(crate) type Pairs = Vec<(&'static str, &'static [u8])>;

    /// A response: its HTTP status, its head and its body's steps.
    pub(crate) type Case = (u16, Pairs, Vec<Step>);

    /// One step of a scripted response body.
    #[derive(Clone)]
    pub(crate) enum Step {
        Data(Vec<u8>),
        Trailer(Pairs),
        Fail(&'static str),
    }

    fn map(pairs: &[(&'static str, &'static [u8])]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_static(name),
                HeaderValue::from_bytes(value).expect("a header value"),
            );
        }
        map
    }

    /// An extension the connection's response carries, which the call's
    /// response must too.
    #[derive(Clone, Debug, PartialEq)]
    pub(crate) struct Marker(u32);

    pub(crate) fn response(
        status: u16,
        head: &[(&'static str, &'static [u8])],
        steps: &[Step],
    ) -> http::Response<Script> {
        let steps = steps
            .iter()
            .map(|step| match step {
                Step::Data(bytes) => Ok(Frame::data(Bytes::from(bytes.clone()))),
                Step::Trailer(pairs) => Ok(Frame::trailers(map(pairs))),
                Step::Fail(message) => Err(BoxError::from(*message)),
            })
            .collect();
        let mut response = http::Response::new(Script(steps));
        *response.status_mut() = http::StatusCode::from_u16(status).expect("an HTTP status");
        *response.headers_mut() = map(head);
        response.extensions_mut().insert(Marker(7));
        response
    }

    fn framed(cart: &Cart) -> Vec<u8> {
        frame(cart).expect("a small message frames").to_vec()
    }

    /// What a caller can see of a call's result.
    #[derive(Debug, PartialEq)]
    pub(crate) enum Seen {
        Ok(Cart, http::HeaderMap, Option<Marker>),
        Err(tonic::Code, String, http::HeaderMap, bool),
    }

    /// What tonic's reading `seen` is as the client's: its decoder's
    /// `OutOfRange` for a message over the limit (none of the scripted
    /// servers says it) is the client's `ResourceExhausted`, with the same
    /// sizes and metadata.
    pub(crate) fn as_the_clients(seen: Seen) -> Seen {
        match seen {
            Seen::Err(tonic::Code::OutOfRange, message, metadata, false) => {
                let sizes = message
                    .strip_prefix("Error, decoded message length too large: ")
                    .expect("tonic's decoder's message");
                Seen::Err(
                    tonic::Code::ResourceExhausted,
                    format!("the response message is larger than the limit: {sizes}"),
                    metadata,
                    false,
                )
            }
            seen => seen,
        }
    }

    pub(crate) fn seen(result: Result<tonic::Response<Cart>, Status>) -> Seen {
        match result {
            Ok(response) => {
                let (metadata, cart, extensions) = response.into_parts();
                Seen::Ok(
                    cart,
                    metadata.into_headers(),
                    extensions.get::<Marker>().cloned(),
                )
            }
            Err(status) => Seen::Err(
                status.code(),
                status.message().to_owned(),
                status.metadata().clone().into_headers(),
                std::error::Error::source(&status).is_some(),
            ),
        }
    }

    /// Scripted responses: plain answers, split frames, statuses in the
    /// head and in the trailer, headers and trailers with names in common,
    /// compressed and oversized frames, broken bodies.
    pub(crate) fn cases() -> Vec<Case> {
        let cart = Cart {
            id: "c-1".into(),
            items: 3,
        };
        let one = framed(&cart);
        let ok = Step::Trailer(vec![("grpc-status", b"0")]);
        let compressed = {
            let mut bytes = one.clone();
            bytes[0] = 1;
            bytes
        };
        let flagged = {
            let mut bytes = one.clone();
            bytes[0] = 2;
            bytes
        };
        let two = [one.clone(), one.clone()].concat();
        vec![
            (200, vec![], vec![Step::Data(one.clone()), ok.clone()]),
            (
                200,
                vec![("x-both", b"head"), ("x-head", b"1")],
                vec![
                    Step::Data(one.clone()),
                    Step::Trailer(vec![("grpc-status", b"0"), ("x-both", b"trailer")]),
                ],
            ),
            (
                200,
                vec![],
                vec![
                    Step::Data(one[..3].to_vec()),
                    Step::Data(one[3..7].to_vec()),
                    Step::Data(Vec::new()),
                    Step::Data(one[7..].to_vec()),
                    ok.clone(),
                ],
            ),
            (
                200,
                vec![],
                vec![Step::Data(vec![0, 0, 0, 0, 0]), ok.clone()],
            ),
            (200, vec![], vec![ok.clone()]),
            (200, vec![], vec![]),
            (
                200,
                vec![("x-head", b"1")],
                vec![Step::Trailer(vec![
                    ("grpc-status", b"14"),
                    ("grpc-message", b"down"),
                ])],
            ),
            (
                200,
                vec![("x-head", b"1")],
                vec![
                    Step::Data(one.clone()),
                    Step::Trailer(vec![("grpc-status", b"14"), ("x-trailer", b"2")]),
                ],
            ),
            (
                200,
                vec![("x-both", b"head"), ("x-head", b"1")],
                vec![
                    Step::Data(one.clone()),
                    Step::Trailer(vec![
                        ("grpc-status", b"14"),
                        ("x-both", b"trailer"),
                        ("x-trailer", b"2"),
                    ]),
                ],
            ),
            (
                200,
                vec![("x-both", b"head")],
                vec![Step::Trailer(vec![
                    ("grpc-status", b"9"),
                    ("x-both", b"trailer"),
                ])],
            ),
            (
                200,
                vec![],
                vec![
                    Step::Data(one.clone()),
                    Step::Trailer(vec![("grpc-status", b"0"), ("grpc-message", b"%FF")]),
                ],
            ),
            (
                200,
                vec![],
                vec![
                    Step::Data(one.clone()),
                    Step::Trailer(vec![("grpc-status", b"0"), ("grpc-message", b"fine")]),
                ],
            ),
            (
                200,
                vec![],
                vec![
                    Step::Data(one.clone()),
                    Step::Trailer(vec![
                        ("grpc-status", b"0"),
                        ("grpc-status-details-bin", b""),
                    ]),
                ],
            ),
            (
                200,
                vec![],
                vec![
                    Step::Data(one.clone()),
                    Step::Trailer(vec![("x-only", b"1")]),
                ],
            ),
            (
                503,
                vec![],
                vec![Step::Data(one.clone()), Step::Trailer(vec![])],
            ),
            (200, vec![], vec![Step::Data(one.clone())]),
            (
                200,
                vec![("grpc-status", b"14"), ("grpc-message", b"gone")],
                vec![],
            ),
            (200, vec![("grpc-status", b"0")], vec![]),
            (
                200,
                vec![("grpc-status", b"0")],
                vec![Step::Data(one.clone()), ok.clone()],
            ),
            (200, vec![], vec![Step::Data(compressed), ok.clone()]),
            (200, vec![], vec![Step::Data(flagged), ok.clone()]),
            (
                200,
                vec![],
                vec![Step::Data(vec![0, 0, 0x40, 0, 1]), ok.clone()],
            ),
            (200, vec![], vec![Step::Data(one[..8].to_vec()), ok.clone()]),
            (200, vec![], vec![Step::Data(one[..3].to_vec()), ok.clone()]),
            (200, vec![], vec![Step::Data(two.clone()), ok.clone()]),
            (
                200,
                vec![],
                vec![
                    Step::Data(one.clone()),
                    Step::Data(vec![0, 0, 0, 0, 1, 0xff]),
                    ok.clone(),
                ],
            ),
            (
                200,
                vec![],
                vec![Step::Data(vec![0, 0, 0, 0, 1, 0xff]), ok.clone()],
            ),
            (
                200,
                vec![("x-head", b"1")],
                vec![
                    Step::Data(one[..4].to_vec()),
                    Step::Fail("connection reset"),
                ],
            ),
            (
                200,
                vec![],
                vec![Step::Data(one.clone()), Step::Fail("connection reset")],
            ),
            (
                200,
                vec![("grpc-encoding", b"gzip")],
                vec![Step::Data(one.clone()), ok.clone()],
            ),
            (
                200,
                vec![("grpc-encoding", b"identity")],
                vec![Step::Data(one.clone()), ok.clone()],
            ),
        ]
    }

    #[tokio::test]
    async fn a_response_reads_as_tonics_grpc_reads_it() {
        let cases = cases();
        for (status, head, steps) in &cases {
            let tonic = {
                let mut grpc =
                    tonic::client::Grpc::new(Answered(Some(response(*status, head, steps))));
                grpc.unary(
                    tonic::Request::new(()),
                    PathAndQuery::from_static("/"),
                    tonic_prost::ProstCodec::<(), Cart>::default(),
                )
                .await
            };
            let ours = read::<Cart, _>(response(*status, head, steps), 4 << 20).await;
            assert_eq!(
                seen(ours),
                as_the_clients(seen(tonic)),
                "HTTP {status}, head {head:?}, body {:?}",
                steps.len()
            );
        }
    }

    /// The limit is the client's setting: a message just over it ends the
    /// call as tonic's decoder with that limit would (as the client's
    /// status), one at it is read, whoever reads the body.
    #[tokio::test]
    async fn a_message_over_the_set_limit_is_resource_exhausted() {
        let cart = Cart {
            id: "c-4".into(),
            items: 9,
        };
        let one = framed(&cart);
        let len = one.len() - FRAME_HEAD;
        let ok = Step::Trailer(vec![("grpc-status", b"0")]);
        for head in [
            vec![("x-head", b"1".as_slice())],
            vec![("grpc-encoding", b"identity")],
        ] {
            let steps = [Step::Data(one.clone()), ok.clone()];
            for limit in [len - 1, len] {
                let tonic = {
                    let mut grpc =
                        tonic::client::Grpc::new(Answered(Some(response(200, &head, &steps))))
                            .max_decoding_message_size(limit);
                    grpc.unary(
                        tonic::Request::new(()),
                        PathAndQuery::from_static("/"),
                        tonic_prost::ProstCodec::<(), Cart>::default(),
                    )
                    .await
                };
                let ours = read::<Cart, _>(response(200, &head, &steps), limit).await;
                assert_eq!(seen(ours), as_the_clients(seen(tonic)), "{head:?} {limit}");
            }
        }
    }

    #[tokio::test]
    async fn a_plain_answer_is_read_without_tonic() {
        // The fast path's own result, not a fallback's: a body tonic has
        // not read keeps a step after the trailer unread.
        let cart = Cart {
            id: "c-2".into(),
            items: 1,
        };
        let mut response = response(
            200,
            &[],
            &[
                Step::Data(framed(&cart)),
                Step::Trailer(vec![("grpc-status", b"0")]),
            ],
        );
        response
            .body_mut()
            .0
            .push_back(Err(BoxError::from("never polled")));
        let read = read::<Cart, _>(response, 4 << 20)
            .await
            .expect("an OK answer");
        assert_eq!(read.into_inner(), cart);
    }

    /// A service that keeps the request it is given and answers nothing.
    #[derive(Clone, Default)]
    struct Keep(std::sync::Arc<std::sync::Mutex<Option<http::Request<tonic::body::Body>>>>);

    impl tower_service::Service<http::Request<tonic::body::Body>> for Keep {
        type Response = http::Response<tonic::body::Body>;
        type Error = Status;
        type Future = std::future::Ready<Result<Self::Response, Status>>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
            *self.0.lock().unwrap() = Some(request);
            std::future::ready(Err(Status::unavailable("kept")))
        }
    }

    async fn parts(
        request: http::Request<tonic::body::Body>,
    ) -> (http::Method, Uri, http::Version, http::HeaderMap, Bytes) {
        let (parts, body) = request.into_parts();
        let body = body.collect().await.expect("a body").to_bytes();
        (parts.method, parts.uri, parts.version, parts.headers, body)
    }

    #[tokio::test]
    async fn a_request_is_what_tonics_grpc_sends() {
        let cart = Cart {
            id: "c-3".into(),
            items: 2,
        };
        let origin: Uri = "http://carts:9090".parse().unwrap();
        let path = "/carts.v1.Carts/GetCart";
        for pairs in [
            &[][..],
            &[("x-caller", b"1".as_slice())][..],
            &[
                ("te", b"gzip".as_slice()),
                ("content-type", b"text/plain"),
                ("grpc-status", b"3"),
                ("grpc-message", b"no"),
                ("grpc-message-type", b"x"),
                ("x-caller", b"2"),
            ][..],
        ] {
            let metadata = MetadataMap::from_headers(map(pairs));
            let keep = Keep::default();
            let mut grpc = tonic::client::Grpc::with_origin(keep.clone(), origin.clone());
            let _ = grpc
                .unary(
                    tonic::Request::from_parts(
                        metadata.clone(),
                        tonic::Extensions::default(),
                        cart.clone(),
                    ),
                    PathAndQuery::from_static(path),
                    tonic_prost::ProstCodec::<Cart, Cart>::default(),
                )
                .await;
            let tonics = keep.0.lock().unwrap().take().expect("a request");
            let ours = request(&origin, path, metadata, None, frame(&cart).unwrap());
            assert_eq!(parts(ours).await, parts(tonics).await, "{pairs:?}");
        }
    }

    #[test]
    fn the_time_left_follows_tonics_headers() {
        let origin: Uri = "http://carts:9090".parse().unwrap();
        let request = request(
            &origin,
            "/carts.v1.Carts/GetCart",
            MetadataMap::new(),
            Some(HeaderValue::from_static("10S")),
            Bytes::from_static(&[0, 0, 0, 0, 0]),
        );
        let names: Vec<_> = request.headers().keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["te", "content-type", "grpc-timeout"]);
    }
}
