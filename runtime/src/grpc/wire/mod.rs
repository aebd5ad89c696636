//! gRPC's wire details, in one place, for the client and the server alike
//! (gRPC over HTTP/2, `PROTOCOL-HTTP2.md`):
//!
//! - the request's headers: `te: trailers`, the `application/grpc`
//!   content-type and its check ([`is_grpc_content_type`]), the names
//!   tonic reserves ([`RESERVED`]), `grpc-encoding`;
//! - the `grpc-timeout` header, written ([`grpc_timeout`]) and read
//!   ([`parse_grpc_timeout`]); its code lives beside the deadline
//!   (`deadline/grpc_timeout.rs`), which any transport's server reads it
//!   for, and is reached from here;
//! - the status a response ends with ([`status`]): `grpc-status`,
//!   `grpc-message` and `grpc-status-details-bin` read from a trailer or
//!   from a trailers-only response's headers, gRPC's mapping of an HTTP
//!   status with none, and the trailers a server ends a stream with.

use http::{HeaderName, HeaderValue};

pub(crate) mod status;

pub(crate) use crate::deadline::{
    GRPC_TIMEOUT, GRPC_TIMEOUT_HEADER, grpc_timeout, parse_grpc_timeout,
};
pub(crate) use status::{
    GRPC_MESSAGE, GRPC_MESSAGE_ESCAPED, GRPC_STATUS, end_status, ending_trailers, head_error,
    http_to_grpc, is_ok, is_trailers_only, status_code, status_message,
};

/// The content-type of a gRPC request and response (its message format
/// protobuf, unsaid).
pub(crate) const CONTENT_TYPE_GRPC: HeaderValue = HeaderValue::from_static("application/grpc");

/// The `te` value every gRPC request carries.
pub(crate) const TE_TRAILERS: HeaderValue = HeaderValue::from_static("trailers");

/// The header of a message's compression.
pub(crate) const GRPC_ENCODING: HeaderName = HeaderName::from_static("grpc-encoding");

/// What tonic takes out of the caller's metadata before sending it
/// (`MetadataMap::into_sanitized_headers`).
pub(crate) const RESERVED: [HeaderName; 5] = [
    HeaderName::from_static("te"),
    HeaderName::from_static("content-type"),
    GRPC_MESSAGE,
    HeaderName::from_static("grpc-message-type"),
    GRPC_STATUS,
];

/// Whether `content_type` is gRPC's: `application/grpc`, alone or followed
/// by `+` (a message format) or `;` (parameters), in any case.
pub(crate) fn is_grpc_content_type(content_type: &[u8]) -> bool {
    const GRPC: &[u8] = b"application/grpc";
    content_type.len() >= GRPC.len()
        && content_type[..GRPC.len()].eq_ignore_ascii_case(GRPC)
        && matches!(content_type.get(GRPC.len()), None | Some(b'+' | b';'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpcs_content_types_are_told_from_others() {
        for grpc in [
            &b"application/grpc"[..],
            b"application/grpc+proto",
            b"Application/GRPC; x=1",
        ] {
            assert!(is_grpc_content_type(grpc), "{grpc:?}");
        }
        for other in [
            &b"application/grpcx"[..],
            b"text/html",
            b"application/grp",
            b"",
        ] {
            assert!(!is_grpc_content_type(other), "{other:?}");
        }
    }
}
