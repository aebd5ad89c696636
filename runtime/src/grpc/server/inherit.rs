//! The seam to the inherited deadline and context
//! ([`crate::grpc::deadline`]): the served RPC's deadline (from its
//! `grpc-timeout`) and its context (the caller's trace context and
//! baggage, with the server span), handed to the handler.

use std::time::Duration;

use tokio::time::Instant;

use crate::grpc::deadline::served_deadline;

/// The future a handler runs as: with its RPC's deadline and context
/// current.
pub(super) type Scoped<F> = crate::grpc::deadline::Scoped<F>;

/// The deadline a request's `grpc-timeout` sets, counted from `received`
/// (as [`Inherited::from_headers`](crate::grpc::deadline::Inherited::from_headers) reads it), and that timeout (its
/// `DEADLINE_EXCEEDED` names it).
pub(super) fn deadline(
    headers: &http::HeaderMap,
    received: Instant,
) -> Option<(Instant, Duration)> {
    served_deadline(headers, received)
}
