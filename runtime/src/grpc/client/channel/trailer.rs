//! How a trailer ends a call, as tonic's decoder reads it: `grpc-status`,
//! `grpc-message` and `grpc-status-details-bin`, and, with no trailer,
//! gRPC's mapping of the HTTP status.

use http::{HeaderMap, HeaderName};
use tonic::{Code, Status};

use crate::grpc::client::connection::http_to_grpc;

/// `grpc-status`, `grpc-message` and `grpc-status-details-bin`, as
/// names: looked up without parsing a string.
pub(in crate::grpc::client) const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
const GRPC_STATUS_DETAILS: HeaderName = HeaderName::from_static("grpc-status-details-bin");

/// Whether `trailer` says `OK` as tonic reads it (`Status::from_header_map`
/// gives `Code::Ok`), told without making the status (which copies the
/// trailer): `grpc-status: 0`, a `grpc-message`, if any, that decodes (an
/// undecodable one makes tonic's status `Unknown`), and no details (which
/// tonic decodes too). Any other trailer is read by tonic.
pub(in crate::grpc::client) fn is_ok(trailer: &HeaderMap) -> bool {
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
pub(super) fn end_status(
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
}
