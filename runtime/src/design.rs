//! The design humus implements, in three pages: what each part does and
//! why, apart from how its API is called. The same pages are in the
//! repository's `runtime/docs/` folder.
//!
//! | page | what it covers |
//! |---|---|
//! | [`client`] | the gRPC client: settings, the connection, deadlines, retries, classification, the pushback, the breaker in the client, streams, telemetry, readiness |
//! | [`circuit_breaker`] | the circuit breaker: states, tickets, counts and policy, probes, late results, observers, time, validation |
//! | [`failure_injection`] | failure injection: the model, points, a fault as a real failure, scenarios in baggage, trust and stripping, telemetry |
//!
//! Where the design follows gRPC's own, the pages cite the gRFC (A6, retry
//! throttling and the pushback; A9, the maximum connection age) or the RFC
//! (RFC 9113, HTTP/2).

#[doc = include_str!("../docs/client.md")]
pub mod client {}

#[doc = include_str!("../docs/circuit-breaker.md")]
pub mod circuit_breaker {}

#[doc = include_str!("../docs/failure-injection.md")]
pub mod failure_injection {}
