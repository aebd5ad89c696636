//! The status a gRPC response ends with, read and written: `grpc-status`,
//! `grpc-message` (percent-encoded) and `grpc-status-details-bin`, in a
//! trailer or in a trailers-only response's headers; gRPC's mapping of an
//! HTTP status with no `grpc-status`; the trailers a server ends a stream
//! with.

use http::{HeaderMap, HeaderName, HeaderValue};
use tonic::{Code, Status};

/// `grpc-status`, `grpc-message` and `grpc-status-details-bin`, as
/// names: looked up without parsing a string.
pub(crate) const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
pub(crate) const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
pub(crate) const GRPC_STATUS_DETAILS: HeaderName =
    HeaderName::from_static("grpc-status-details-bin");

/// What a `grpc-message` percent-encodes: every byte outside visible ASCII
/// and space, and `%` (gRPC over HTTP/2, "Responses").
pub(crate) const GRPC_MESSAGE_ESCAPED: &percent_encoding::AsciiSet =
    &percent_encoding::CONTROLS.add(b'%');

/// Whether a response's `headers` carry its status: a trailers-only
/// response (no body, no trailer), or one whose `OK` came first.
pub(crate) fn is_trailers_only(headers: &HeaderMap) -> bool {
    headers.contains_key(&GRPC_STATUS)
}

/// The status in a response's `headers` when it is not `OK`, as tonic
/// reads it: a trailers-only answer's error (its server's, or a layer's),
/// which ends the attempt with no body to read; a stream so answered has
/// not opened (gRFC A6: a call is committed by its response headers).
pub(crate) fn head_error(headers: &HeaderMap) -> Option<Status> {
    if !is_trailers_only(headers) {
        return None;
    }
    Status::from_header_map(headers).filter(|status| status.code() != Code::Ok)
}

/// Whether `trailer` says `OK` as tonic reads it (`Status::from_header_map`
/// gives `Code::Ok`), told without making the status (which copies the
/// trailer): `grpc-status: 0`, a `grpc-message`, if any, that decodes (an
/// undecodable one makes tonic's status `Unknown`), and no details (which
/// tonic decodes too). Any other trailer is read by tonic.
pub(crate) fn is_ok(trailer: &HeaderMap) -> bool {
    if trailer
        .get(&GRPC_STATUS)
        .is_none_or(|v| v.as_bytes() != b"0")
    {
        return false;
    }
    // The status alone (as tonic's servers end): nothing more to read.
    trailer.len() == 1
        || (trailer.get(&GRPC_MESSAGE).is_none_or(|m| {
            percent_encoding::percent_decode(m.as_bytes())
                .decode_utf8()
                .is_ok()
        }) && !trailer.contains_key(&GRPC_STATUS_DETAILS))
}

/// The status a stream ended with, as tonic's decoder reads its trailer:
/// its `grpc-status`; without one, gRPC's mapping of the HTTP status
/// (`Unknown` for a 200), with tonic's messages.
pub(crate) fn end_status(
    trailer: Option<&HeaderMap>,
    http: http::StatusCode,
) -> Result<(), Status> {
    if trailer.is_some_and(is_ok) {
        return Ok(());
    }
    if let Some(status) = trailer.and_then(Status::from_header_map) {
        return if status.code() == Code::Ok {
            Ok(())
        } else {
            Err(status)
        };
    }
    // tonic's `infer_grpc_status`, word for word.
    if http == http::StatusCode::OK {
        return Err(Status::unknown(
            "protocol error: missing grpc-status trailer, stream was terminated without a final status (possible truncation by a proxy or load balancer)",
        ));
    }
    Err(Status::new(
        http_to_grpc(http),
        format!(
            "grpc-status header missing, mapped from HTTP status code {}",
            http.as_u16()
        ),
    ))
}

/// gRPC's mapping of an HTTP status with no gRPC status.
pub(crate) fn http_to_grpc(status: http::StatusCode) -> Code {
    match status.as_u16() {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502 | 503 | 504 => Code::Unavailable,
        _ => Code::Unknown,
    }
}

/// The code of the `grpc-status` in `headers`, if it has one that parses.
pub(crate) fn status_code(headers: &HeaderMap) -> Option<Code> {
    let value = headers.get(&GRPC_STATUS)?;
    let n: i32 = std::str::from_utf8(value.as_bytes()).ok()?.parse().ok()?;
    Some(Code::from_i32(n))
}

/// The message of the status in `headers` (its `grpc-message`, decoded),
/// empty without one.
pub(crate) fn status_message(headers: &HeaderMap) -> String {
    Status::from_header_map(headers)
        .map(|s| s.message().to_owned())
        .unwrap_or_default()
}

/// The trailers that end a stream the server cuts short with `code` and
/// `message` (its `grpc-message` percent-encoded as tonic encodes it).
pub(crate) fn ending_trailers(code: Code, message: &str) -> HeaderMap {
    let mut trailers = HeaderMap::with_capacity(2);
    if Status::new(code, message)
        .add_header(&mut trailers)
        .is_err()
    {
        // A message no header can hold: the code alone.
        trailers.insert(GRPC_STATUS, HeaderValue::from(code as i32));
    }
    trailers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trailer(pairs: &[(&'static str, &'static [u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_static(name),
                http::HeaderValue::from_bytes(value).expect("a header value"),
            );
        }
        map
    }

    #[test]
    fn a_trailer_ends_a_call_as_tonic_reads_it() {
        let trailers = [
            trailer(&[("grpc-status", b"0")]),
            trailer(&[("grpc-status", b"0"), ("grpc-message", b"")]),
            trailer(&[("grpc-status", b"0"), ("grpc-message", b"fine%20thanks")]),
            // Not UTF-8 once decoded: tonic's status is Unknown.
            trailer(&[("grpc-status", b"0"), ("grpc-message", b"%FF")]),
            trailer(&[("grpc-status", b"0"), ("grpc-status-details-bin", b"")]),
            trailer(&[("grpc-status", b"0"), ("x-extra", b"1")]),
            trailer(&[("grpc-status", b"0"), ("grpc-status", b"14")]),
            trailer(&[("grpc-status", b"14"), ("grpc-status", b"0")]),
            trailer(&[("grpc-status", b"00")]),
            trailer(&[("grpc-status", b" 0")]),
            trailer(&[("grpc-status", b"14")]),
            trailer(&[("grpc-status", b"14"), ("grpc-message", b"down")]),
            trailer(&[("x-extra", b"1")]),
            trailer(&[]),
        ];
        for trailer in &trailers {
            let tonic = Status::from_header_map(trailer).map(|s| s.code());
            let ours = end_status(Some(trailer), http::StatusCode::OK);
            assert_eq!(ours.is_ok(), tonic == Some(Code::Ok), "{trailer:?}");
            if let Err(status) = ours {
                assert_eq!(
                    Some(status.code()),
                    tonic.or(Some(Code::Unknown)),
                    "{trailer:?}"
                );
            }
        }
    }

    /// A server's ending trailers read back as the status they were
    /// written with, message decoded; a trailers-only response is told by
    /// its headers' `grpc-status`.
    #[test]
    fn ending_trailers_read_back_as_their_status() {
        let trailers = ending_trailers(Code::Unavailable, "going away: 100% sure");
        assert!(is_trailers_only(&trailers));
        assert_eq!(status_code(&trailers), Some(Code::Unavailable));
        assert_eq!(status_message(&trailers), "going away: 100% sure");
        // A control character is percent-encoded, and decoded back.
        let trailers = ending_trailers(Code::Internal, "a\nb");
        assert_eq!(status_code(&trailers), Some(Code::Internal));
        assert_eq!(status_message(&trailers), "a\nb");
        assert!(!is_trailers_only(&trailer(&[("x-extra", b"1")])));
        assert_eq!(status_code(&trailer(&[("grpc-status", b"x")])), None);
        assert_eq!(status_message(&HeaderMap::new()), "");
    }

    /// A head's status is an error unless it is `OK` as tonic reads it.
    #[test]
    fn a_heads_status_is_an_error_unless_ok() {
        assert!(head_error(&trailer(&[("content-type", b"application/grpc")])).is_none());
        assert!(head_error(&trailer(&[("grpc-status", b"0")])).is_none());
        let status = head_error(&trailer(&[
            ("grpc-status", b"5"),
            ("grpc-message", b"gone%21"),
        ]))
        .expect("an error");
        assert_eq!((status.code(), status.message()), (Code::NotFound, "gone!"));
        // Not UTF-8 once decoded: tonic's status is Unknown.
        let status = head_error(&trailer(&[("grpc-status", b"0"), ("grpc-message", b"%FF")]));
        assert_eq!(status.map(|s| s.code()), Some(Code::Unknown));
    }

    #[test]
    fn an_http_status_with_no_grpc_status_maps_as_grpc_says() {
        let cases = [
            (400, Code::Internal),
            (401, Code::Unauthenticated),
            (403, Code::PermissionDenied),
            (404, Code::Unimplemented),
            (429, Code::Unavailable),
            (502, Code::Unavailable),
            (503, Code::Unavailable),
            (504, Code::Unavailable),
            (200, Code::Unknown),
            (500, Code::Unknown),
        ];
        for (http, code) in cases {
            let http = http::StatusCode::from_u16(http).unwrap();
            assert_eq!(http_to_grpc(http), code, "{http}");
        }
    }
}
