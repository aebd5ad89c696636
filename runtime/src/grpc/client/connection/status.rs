//! gRPC's status of what is not a gRPC server's answer: an HTTP answer
//! with no `grpc-status` (gRPC's HTTP to gRPC status mapping), and a
//! connection that broke (`Unavailable`); and whether a failed request
//! never reached the server.

use std::error::Error as StdError;
use std::io;
use std::sync::Arc;

use http::header::{CONTENT_TYPE, HeaderValue};
use tonic::Status;

use crate::grpc::client::classify::PUSHBACK_KEY;
use crate::grpc::client::layer::{BoxError, LayerError};
use crate::grpc::deadline::to_millis;
use crate::grpc::wire::{
    GRPC_MESSAGE, GRPC_MESSAGE_ESCAPED, GRPC_STATUS, http_to_grpc, is_grpc_content_type,
    is_trailers_only,
};
use crate::retry::{RetryAfter, retry_after};

/// `response` as tonic reads it: a gRPC response, or a non-gRPC one (a
/// proxy's error page: an HTTP 503 with a `text/plain` or HTML body)
/// turned into a trailers-only response whose `grpc-status` is gRPC's
/// mapping of the HTTP status, before anything reads the body (which
/// would be taken for gRPC frames).
///
/// A response is gRPC's when it has a `grpc-status` (a trailers-only
/// response, kept as it is whatever its HTTP status), or when its HTTP
/// status is 200 and its content-type is `application/grpc` (or
/// `application/grpc+proto`, `application/grpc;…`). Any other is mapped:
/// 400 `Internal`, 401 `Unauthenticated`, 403 `PermissionDenied`, 404
/// `Unimplemented`, 429, 502, 503 and 504 `Unavailable`, any other status
/// (200 with another content-type included) `Unknown`; the message says
/// the HTTP status and the content-type (for a 431, which an HTTP/2 server
/// answers to headers past its max header list size, that the request's
/// metadata is too large). Its body is never read.
///
/// A mapped response is marked, in its extensions, by an [`HttpAnswer`]:
/// what the sender then turns into the attempt's error ([`mapped_error`]),
/// a status whose source is that `HttpAnswer`, however its message reads.
///
/// A mapped 429 or 503 with a `Retry-After` (either form, as the HTTP
/// client reads it) is given that wait as its pushback
/// (`grpc-retry-pushback-ms`), unless it has one: the proxy's rate limit or
/// overload is then retried after the wait it asked for, or not at all
/// when the wait is longer than `backoff_max`, as a gRPC server's pushback
/// is.
///
/// Source: gRPC's "HTTP to gRPC Status Code Mapping"
/// (`http-grpc-status-mapping.md`), and gRPC over HTTP/2
/// (`PROTOCOL-HTTP2.md`, "Responses").
pub(super) fn grpc_response<B>(mut response: http::Response<B>) -> http::Response<B> {
    let headers = response.headers();
    if is_trailers_only(headers) {
        return response;
    }
    let content_type = headers.get(CONTENT_TYPE);
    let is_grpc = content_type.is_some_and(|v| is_grpc_content_type(v.as_bytes()));
    let http = response.status();
    if is_grpc && http == http::StatusCode::OK {
        return response;
    }
    let code = http_to_grpc(http);
    let reason = http.canonical_reason().unwrap_or("");
    let what = match content_type {
        None => "no content-type".to_owned(),
        Some(v) => format!("content-type {:?}", String::from_utf8_lossy(v.as_bytes())),
    };
    let message = if is_grpc {
        format!(
            "{MAPPED_FROM_HTTP}{} {reason} with no grpc-status",
            http.as_u16()
        )
    } else if http == http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE {
        // An HTTP/2 server's own refusal, before any handler, of headers
        // past the size it announced (its max header list size).
        format!(
            "{MAPPED_FROM_HTTP}431 {reason}: the request's metadata is larger than the server takes (its HTTP/2 max header list size); send less metadata, or raise the server's limit"
        )
    } else {
        format!(
            "{MAPPED_FROM_HTTP}{} {reason} with {what}, not a gRPC response (a proxy's error page?)",
            http.as_u16()
        )
    };
    let wait = match http {
        http::StatusCode::TOO_MANY_REQUESTS | http::StatusCode::SERVICE_UNAVAILABLE
            if !headers.contains_key(PUSHBACK_KEY) =>
        {
            match retry_after(headers, std::time::SystemTime::now()) {
                RetryAfter::After(wait) => Some(wait),
                RetryAfter::Absent | RetryAfter::Invalid => None,
            }
        }
        _ => None,
    };
    let message = match wait {
        Some(wait) if wait.is_zero() => {
            format!("{message}; it asks to be tried again at once (Retry-After)")
        }
        Some(wait) => {
            // To the millisecond: a date's wait is measured to the nanosecond.
            format!(
                "{message}; it asks to wait {:?} (Retry-After)",
                to_millis(wait)
            )
        }
        None => message,
    };
    let message = percent_encoding::utf8_percent_encode(&message, GRPC_MESSAGE_ESCAPED).to_string();
    let headers = response.headers_mut();
    if let Some(wait) = wait {
        let millis = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        headers.insert(PUSHBACK_KEY, HeaderValue::from(millis));
    }
    headers.insert(GRPC_STATUS, HeaderValue::from(code as i32));
    if let Ok(message) = HeaderValue::from_str(&message) {
        headers.insert(GRPC_MESSAGE, message);
    }
    response.extensions_mut().insert(HttpAnswer::new(http));
    response
}

/// `response`, or, when [`grpc_response`] mapped it from a non-gRPC
/// answer (its [`HttpAnswer`] mark), the attempt's error: the mapped
/// status (its code, message and metadata, the pushback included) with
/// the `HttpAnswer` as its source, as tonic hands on a status a service
/// fails with. A status a gRPC server sent has no such source whatever
/// its message says, so the two are told apart by type
/// ([`mapped_http_status`]), never by text.
pub(crate) fn mapped_error<B>(response: http::Response<B>) -> Result<http::Response<B>, BoxError> {
    let Some(answer) = response.extensions().get::<HttpAnswer>().copied() else {
        return Ok(response);
    };
    let mut status = Status::from_header_map(response.headers())
        .unwrap_or_else(|| Status::new(http_to_grpc(answer.status()), answer.to_string()));
    status.set_source(Arc::new(answer));
    Err(Box::new(status))
}

/// How the message of a status [`grpc_response`] mapped from a non-gRPC
/// answer starts (for the reader: the client tells such a status by its
/// source, an [`HttpAnswer`], never by this text).
const MAPPED_FROM_HTTP: &str = "the server answered HTTP ";

/// The source of a status the client mapped from an answer that is not a
/// gRPC server's (a proxy's error page: an HTTP 429 from a gateway's rate
/// limit, a 502 from a load balancer): the answer's HTTP status. A status
/// whose [`source`](std::error::Error::source) is one was made by the
/// client; a status a gRPC server sent never has one, whatever its
/// message says. [`mapped_http_status`](crate::grpc::client::mapped_http_status) reads
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpAnswer {
    status: http::StatusCode,
}

impl HttpAnswer {
    /// The mark of an answer of HTTP status `status`: what the client
    /// sets as the source of the status it maps such an answer to (and
    /// what a test of a classify function sets, to make one).
    pub fn new(status: http::StatusCode) -> HttpAnswer {
        HttpAnswer { status }
    }

    /// The answer's HTTP status.
    pub fn status(&self) -> http::StatusCode {
        self.status
    }
}

impl std::fmt::Display for HttpAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "an HTTP {} answer with no gRPC status", self.status)
    }
}

impl StdError for HttpAnswer {}

/// The mark of a status [`grpc_response`] mapped from a non-gRPC answer
/// (a proxy's error page, not a gRPC server's answer: a stream's open
/// answered so has not opened): its [`HttpAnswer`] source.
pub(crate) fn http_answer(status: &tonic::Status) -> Option<&HttpAnswer> {
    status.source()?.downcast_ref::<HttpAnswer>()
}

/// The HTTP status of a status [`grpc_response`] mapped from a non-gRPC
/// answer: its [`HttpAnswer`] source's, when the status's code is the one
/// that HTTP status maps to.
pub(crate) fn mapped_http_status(status: &tonic::Status) -> Option<http::StatusCode> {
    let http = http_answer(status)?.status();
    (http_to_grpc(http) == status.code()).then_some(http)
}

/// A status tonic made of a failed connection becomes `Unavailable`, as
/// gRPC reports a connection that went away or never worked, so retries and
/// the breaker treat it so; the original status is kept as its source.
///
/// A failed connection is any error of the connection rather than of the
/// call's stream: an I/O error, hyper's request that was never sent because
/// the connection had closed (which tonic reports as `Cancelled`), an
/// HTTP/2 GOAWAY or connection error (tonic reports h2's reasons as
/// `Internal` and the like, and an I/O error as `Unknown`). A stream the
/// server reset (`RST_STREAM`) keeps tonic's code, which is gRPC's mapping
/// of the reason (`REFUSED_STREAM` is `Unavailable`, `CANCEL` is
/// `Cancelled`, ...). A status the server sent has no source, and is
/// returned as it is, whatever its code and message: a tonic server's
/// `OutOfRange` for a request over its own decoding limit is the server's
/// answer. (A response over the client's own limit is refused where its
/// frame's head is read, as `ResourceExhausted`: see `limit.rs`.)
///
/// Source: gRPC over HTTP/2 (`PROTOCOL-HTTP2.md`, "Errors"), and grpc-go,
/// which fails calls on a broken or unusable connection with `Unavailable`.
pub(crate) fn transport_status(status: Status) -> Status {
    if status.code() == tonic::Code::Unavailable || !connection_failed(&status) {
        return status;
    }
    let mut unavailable =
        Status::unavailable(format!("the connection broke: {}", status.message()));
    unavailable.set_source(Arc::new(status));
    unavailable
}

/// Whether `status` came of a failed connection ([`transport_status`]).
fn connection_failed(status: &Status) -> bool {
    // hyper's errors wrap an h2 or I/O error, decided below; one that wraps
    // neither (a closed connection) is the connection's too.
    let mut hyper = false;
    let mut source: Option<&(dyn StdError + 'static)> = status.source();
    while let Some(err) = source {
        if err.is::<LayerError>() {
            // A per-attempt layer's error, whatever it holds.
            return false;
        }
        if let Some(err) = err.downcast_ref::<h2::Error>() {
            // A GOAWAY (the server's, or this side's on a protocol error)
            // and an I/O error end the connection; a stream reset, by
            // either side, or a reason made by tonic (a cancel), is the
            // call's.
            return err.is_go_away() || err.is_io();
        }
        if let Some(err) = err.downcast_ref::<hyper::Error>() {
            if err.is_canceled() {
                return true;
            }
            hyper = true;
        }
        if err.is::<io::Error>() {
            return true;
        }
        source = err.source();
    }
    hyper
}

/// Whether a failed call's request never reached the server, so sending it
/// again repeats nothing the server saw (gRPC's transparent retry): hyper
/// dropped it before it was written (`Canceled`, such as a connection that
/// had just received a GOAWAY), or the server's GOAWAY said it was never
/// processed, or the server refused the stream (`REFUSED_STREAM`).
pub(crate) fn never_processed(status: &Status) -> bool {
    let mut source: Option<&(dyn StdError + 'static)> = status.source();
    while let Some(err) = source {
        if err.is::<LayerError>() {
            // A per-attempt layer's error: the server may have seen it.
            return false;
        }
        if let Some(err) = err.downcast_ref::<hyper::Error>()
            && err.is_canceled()
        {
            return true;
        }
        if let Some(err) = err.downcast_ref::<h2::Error>() {
            return (err.is_go_away() && err.is_remote())
                || (err.is_reset()
                    && err.is_remote()
                    && err.reason() == Some(h2::Reason::REFUSED_STREAM));
        }
        source = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// An HTTP answer of `status`, with `content_type` and `headers`, as
    /// the client reads it.
    fn http_answer(
        status: u16,
        content_type: Option<&str>,
        headers: &[(&str, &str)],
    ) -> http::Response<()> {
        let mut r = http::Response::builder().status(status);
        if let Some(ct) = content_type {
            r = r.header(CONTENT_TYPE, ct);
        }
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        grpc_response(r.body(()).unwrap())
    }

    #[test]
    fn a_broken_connection_is_unavailable_and_a_servers_unknown_is_kept() {
        let mut broken = Status::unknown("transport error");
        broken.set_source(Arc::new(io::Error::from(io::ErrorKind::ConnectionReset)));
        let status = transport_status(broken);
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(status.message(), "the connection broke: transport error");
        let theirs = transport_status(Status::unknown("from the server"));
        assert_eq!(theirs.code(), tonic::Code::Unknown);
        let internal = transport_status(Status::internal("x"));
        assert_eq!(internal.code(), tonic::Code::Internal);
        // A tonic server's answer to a request over its decoding limit.
        let text = "Error, decoded message length too large: found 5242885 bytes, the limit is: 4194304 bytes";
        let theirs = transport_status(Status::out_of_range(text));
        assert_eq!(
            (theirs.code(), theirs.message()),
            (tonic::Code::OutOfRange, text)
        );
    }

    #[test]
    fn a_failed_connection_is_unavailable_whatever_code_tonic_gave_it() {
        // An error of the connection's I/O, whatever code tonic gave it.
        let mut broken = Status::internal("h2 protocol error");
        broken.set_source(Arc::new(io::Error::from(io::ErrorKind::BrokenPipe)));
        assert_eq!(transport_status(broken).code(), tonic::Code::Unavailable);
        // tonic's own cancel of a stream (a bare reason) is the call's.
        let mut cancelled = Status::cancelled("client cancelled");
        cancelled.set_source(Arc::new(h2::Error::from(h2::Reason::CANCEL)));
        let cancelled = transport_status(cancelled);
        assert_eq!(cancelled.code(), tonic::Code::Cancelled);
        assert_eq!(cancelled.message(), "client cancelled");
        // Already Unavailable: kept as it is.
        let mut refused = Status::unavailable("refused");
        refused.set_source(Arc::new(io::Error::other("y")));
        assert_eq!(transport_status(refused).message(), "refused");
    }

    #[test]
    fn a_mapped_429_or_503_takes_its_retry_after_as_its_pushback() {
        let answer =
            |status: u16, headers: &[(&str, &str)]| http_answer(status, Some("text/html"), headers);
        let pushback = |r: &http::Response<()>| {
            r.headers()
                .get(PUSHBACK_KEY)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        let in_a_minute =
            httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(61));
        assert_eq!(
            pushback(&answer(429, &[("retry-after", "3")])).as_deref(),
            Some("3000")
        );
        let dated = pushback(&answer(503, &[("retry-after", &in_a_minute)])).unwrap();
        let dated: u64 = dated.parse().unwrap();
        assert!((59_000..=61_000).contains(&dated), "{dated}");
        // Not for another status, an unreadable value, or a response that
        // has a pushback of its own.
        assert_eq!(pushback(&answer(502, &[("retry-after", "3")])), None);
        assert_eq!(pushback(&answer(503, &[("retry-after", "soon")])), None);
        assert_eq!(
            pushback(&answer(503, &[("retry-after", "3"), (PUSHBACK_KEY, "10")])).as_deref(),
            Some("10")
        );
        let status = Status::from_header_map(answer(503, &[]).headers()).unwrap();
        assert!(!status.message().contains("Retry-After"), "{status:?}");
        let status =
            Status::from_header_map(answer(503, &[("retry-after", "0")]).headers()).unwrap();
        assert!(
            status
                .message()
                .ends_with("; it asks to be tried again at once (Retry-After)"),
            "{status:?}"
        );
        let status =
            Status::from_header_map(answer(503, &[("retry-after", &in_a_minute)]).headers())
                .unwrap();
        let said = status.message().rsplit("wait ").next().unwrap();
        assert!(
            said.ends_with("s (Retry-After)") && !said.contains("ns") && said.len() <= 22,
            "to the millisecond: {status:?}"
        );
    }

    #[test]
    fn a_mapped_status_tells_its_http_status() {
        let mapped = |status: u16, content_type: Option<&str>| {
            let answer = http_answer(status, content_type, &[("retry-after", "1")]);
            *mapped_error(answer)
                .unwrap_err()
                .downcast::<Status>()
                .unwrap()
        };
        for (http, ct) in [
            (429, Some("text/html")),
            (503, Some("text/plain; charset=utf-8")),
            (502, None),
            (504, Some("application/grpc")),
            (400, None),
            (401, None),
            (403, None),
            (404, Some("text/html")),
            (500, Some("text/html")),
            (200, Some("text/html")),
            (418, None),
        ] {
            let status = mapped(http, ct);
            assert_eq!(
                mapped_http_status(&status).map(|s| s.as_u16()),
                Some(http),
                "{status:?}"
            );
        }
        // A server's own status, whatever its code or message, is none:
        // the mark is the source, not the text.
        let page = mapped(429, Some("text/html"));
        for status in [
            Status::unavailable("connection refused"),
            Status::resource_exhausted("slow down"),
            Status::unavailable(page.message()),
            Status::from_header_map(
                grpc_response(http::Response::builder().status(429).body(()).unwrap()).headers(),
            )
            .unwrap(),
            Status::ok(""),
        ] {
            assert_eq!(mapped_http_status(&status), None, "{status:?}");
        }
        // A mapped 429's source under another code than the one it maps to.
        let mut recoded = Status::internal(page.message());
        recoded.set_source(Arc::new(HttpAnswer::new(
            http::StatusCode::TOO_MANY_REQUESTS,
        )));
        assert_eq!(mapped_http_status(&recoded), None);
        // The mapped status keeps the answer's pushback as its metadata.
        assert_eq!(
            page.metadata()
                .get(PUSHBACK_KEY)
                .map(|v| v.to_str().unwrap()),
            Some("1000")
        );
        // A gRPC server's answer is no error of the sender's.
        let mut theirs = http::Response::new(());
        theirs
            .headers_mut()
            .insert(GRPC_STATUS, HeaderValue::from(14));
        assert!(mapped_error(grpc_response(theirs)).is_ok());
    }

    #[test]
    fn a_non_grpc_response_gets_the_mapped_status_and_a_grpc_one_is_kept() {
        let answer =
            |status: u16, content_type: Option<&str>| http_answer(status, content_type, &[]);
        let status_of = |r: &http::Response<()>| Status::from_header_map(r.headers());
        for grpc in [
            "application/grpc",
            "application/grpc+proto",
            "Application/GRPC; x=1",
        ] {
            assert!(status_of(&answer(200, Some(grpc))).is_none(), "{grpc}");
        }
        let page = status_of(&answer(503, Some("text/html"))).unwrap();
        assert_eq!(page.code(), tonic::Code::Unavailable);
        assert_eq!(
            page.message(),
            "the server answered HTTP 503 Service Unavailable with content-type \"text/html\", not a gRPC response (a proxy's error page?)"
        );
        assert_eq!(
            status_of(&answer(200, Some("application/grpcx")))
                .unwrap()
                .code(),
            tonic::Code::Unknown
        );
        assert_eq!(
            status_of(&answer(404, None)).unwrap().code(),
            tonic::Code::Unimplemented
        );
        let grpc_503 = status_of(&answer(503, Some("application/grpc"))).unwrap();
        assert!(
            grpc_503.message().ends_with("with no grpc-status"),
            "{grpc_503:?}"
        );
        // A trailers-only response keeps its own status.
        let mut theirs = http::Response::new(());
        *theirs.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
        theirs
            .headers_mut()
            .insert(GRPC_STATUS, HeaderValue::from(5));
        assert_eq!(
            status_of(&grpc_response(theirs)).unwrap().code(),
            tonic::Code::NotFound
        );
    }

    #[test]
    fn an_ordinary_status_was_processed() {
        assert!(!never_processed(&Status::unavailable("down")));
        let mut status = Status::internal("x");
        status.set_source(Arc::new(io::Error::other("y")));
        assert!(!never_processed(&status));
    }
}
