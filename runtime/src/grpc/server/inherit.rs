//! The seam to the inherited deadline and context: the served RPC's
//! deadline (from its `grpc-timeout`) and its context (the caller's trace
//! context and baggage, with the server span) handed to the handler.

use std::future::Future;

use opentelemetry::Context;
use opentelemetry::context::{FutureExt as _, WithContext};
use tokio::time::{Duration, Instant};

/// The future a handler runs as: with its RPC's context current.
pub(super) type Scoped<F> = WithContext<F>;

/// Runs `fut` with `cx` as the current OpenTelemetry context.
pub(super) fn scope<F: Future>(_deadline: Option<Instant>, cx: Context, fut: F) -> Scoped<F> {
    fut.with_context(cx)
}

/// The deadline a request's `grpc-timeout` sets, counted from `received`.
pub(super) fn deadline(headers: &http::HeaderMap, received: Instant) -> Option<Instant> {
    let value = headers.get("grpc-timeout")?.as_bytes();
    let timeout = parse_timeout(value)?;
    received.checked_add(timeout)
}

/// A `grpc-timeout` value: at most 8 digits and a unit, `H`, `M`, `S`,
/// `m`, `u` or `n` (gRPC over HTTP/2).
fn parse_timeout(value: &[u8]) -> Option<Duration> {
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}
