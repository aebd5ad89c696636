//! Telemetry: the OpenTelemetry providers and propagator humus records
//! with, and what each client records ([design](crate::design::client#telemetry)).
//!
//! Nothing reaches OpenTelemetry's globals. A [`Telemetry`] carries the
//! tracer, meter and logger providers and the propagator; the
//! [`Setup`](crate::Setup) holds one, and every client records through it
//! with a [`ClientRecorder`]. A process that sets global providers sees
//! none of a client's spans, metrics or log records. The default
//! `Telemetry` records nothing, and sends no trace context or baggage.
//!
//! # Spans
//!
//! Each attempt is one span of kind CLIENT, a child of the span in the
//! call's context, in the scope [`RPC_SCOPE`](names::RPC_SCOPE). A retried
//! call is one span per attempt, siblings under the caller's span; a stream
//! is one span from its open to its end.
//!
//! - Its name is the full method without its leading slash,
//!   `ledger.v1.Ledger/Transfer`.
//! - Its attributes follow OpenTelemetry's RPC semantic conventions:
//!   `rpc.system.name` = `grpc`, `rpc.method` = `ledger.v1.Ledger/Transfer`,
//!   `rpc.response.status_code` = the code's name (`UNAVAILABLE`, see
//!   [`code_name`]), `server.address` and `server.port` from the client's
//!   `host:port`, and on failure `error.type` = the code's name, or
//!   [`fault::ERROR_TYPE`](crate::fault::ERROR_TYPE) for every failure that
//!   failure injection caused (the status carries an
//!   [`InjectedError`](crate::fault::InjectedError)).
//! - Its status is Error, with the status's message, for every code but OK
//!   (NotFound included: a client counts every failed call as an error).
//!
//! A call the breaker rejected never reaches the transport, and still has a
//! span: one of humus's own scope, [`CLIENT_SCOPE`](names::CLIENT_SCOPE),
//! named and attributed as an attempt's, with `UNAVAILABLE`, ended at once
//! with status Error and the rejection's message.
//!
//! Each attempt carries its span's trace context and the call's baggage in
//! its metadata, written by the `Telemetry`'s
//! [`propagator`](Telemetry::propagator) ([`Attempt::inject`]), so a server
//! that extracts them (with [`MetadataExtractor`]) joins the trace, its
//! server span a child of the attempt's span, and sees the baggage.
//!
//! # Metrics
//!
//! Each attempt records `rpc.client.call.duration` (a histogram, in
//! seconds) in [`RPC_SCOPE`](names::RPC_SCOPE), with `rpc.system.name`,
//! `rpc.method`, `rpc.response.status_code`, `server.address`,
//! `server.port` and, on failure, `error.type`.
//!
//! The client records four instruments of humus's own, in
//! [`CLIENT_SCOPE`](names::CLIENT_SCOPE). Every data point carries
//! `server.address` and `server.port`, and nothing per call (no
//! `rpc.method`: `rpc.client.call.duration` breaks calls down already).
//! Each other attribute's value is the `Display` of
//! [`circuit::State`](crate::circuit::State),
//! [`circuit::Outcome`](crate::circuit::Outcome) or
//! [`retry::Decision`](crate::retry::Decision).
//!
//! | instrument | kind, unit | attribute | Prometheus |
//! |---|---|---|---|
//! | `humus.circuit.state` | observable up-down counter, `{breaker}` | `humus.circuit.state`: `closed`, `open`, `half-open` | `humus_circuit_state` |
//! | `humus.circuit.transitions` | counter, `{transition}` | `humus.circuit.state`: the state entered | `humus_circuit_transitions_total` |
//! | `humus.circuit.calls` | counter, `{call}` | `humus.circuit.outcome`: `success`, `failure`, `ignored`, `rejected`, `late` | `humus_circuit_calls_total` |
//! | `humus.retry.decisions` | counter, `{decision}` | `humus.retry.decision`: `succeeded`, `retried`, `stopped`, `throttled`, `exhausted`, `expired` | `humus_retry_decisions_total` |
//!
//! In Prometheus each attribute is a label with dots turned to
//! underscores: `humus_circuit_state`, `humus_circuit_outcome`,
//! `humus_retry_decision`, `server_address`, `server_port`.
//!
//! - `humus.circuit.state` is read, not tracked: at each collection it
//!   reads each registered breaker's state once
//!   ([`ClientRecorder::register_breaker`]), so it shows half-open as soon
//!   as the breaker's open time has passed, with no call made. It is a
//!   count of breakers in each state, every state reported (0 included), so
//!   two clients of one address add up, as closed 1 and open 1. A client
//!   dropped stops reporting, except in an [`App`](crate::app) that is
//!   stopping: it holds every breaker from its stop to its telemetry's
//!   flush, so the final export has them all.
//! - `humus.circuit.transitions` catches the short opens: a breaker can
//!   open, go half-open and close between two collections, and the state
//!   never shows it open.
//! - `humus.circuit.calls` counts a call when the breaker does: one unary
//!   attempt once it has returned, or one stream once it has ended, by the
//!   outcome the breaker counted; a call the breaker rejected is
//!   `rejected`, and one whose result the breaker discarded as late is
//!   `late` (the breaker changed state after admitting it, as when
//!   concurrent calls to a hung dependency time out together: the first
//!   failures open it, and the others' results count nothing). So its
//!   `failure` is what the breaker counted, the count in the open
//!   transition's log record. It is the one place the verdicts of the
//!   user's classifier show.
//! - `humus.retry.decisions` counts what the retry loop decided after each
//!   attempt: `throttled` the retries the budget refused, `exhausted` the
//!   calls that used every attempt, `expired` the calls whose deadline came
//!   before the next attempt could start. A rejected attempt is `stopped`,
//!   and a stream that opened `succeeded`, however it later ends.
//!
//! Two alert rules, one on the state and one on the transitions, which
//! catch the breakers that open and close between two scrapes:
//!
//! ```text
//! # A breaker is open now.
//! humus_circuit_state{humus_circuit_state="open"} > 0
//!
//! # A breaker opened in the last 5 minutes, however briefly.
//! increase(humus_circuit_transitions_total{humus_circuit_state="open"}[5m]) > 0
//! ```
//!
//! A View on the user's meter provider drops or renames any of them; humus
//! has no setting to turn them off.
//!
//! # Log records
//!
//! Each change of a breaker's state is one log record through the logger
//! provider, in [`CLIENT_SCOPE`](names::CLIENT_SCOPE), in the context of the
//! call that made it ([`ClientRecorder::record_transition`]): event name
//! `humus.circuit.transition`, attributes `server.address`, `server.port`,
//! `humus.circuit.state` (entered), `humus.circuit.previous_state` (left)
//! and the counts of the state left, `humus.circuit.successes`,
//! `humus.circuit.failures`, `humus.circuit.consecutive_successes`,
//! `humus.circuit.consecutive_failures` and `humus.circuit.timed_out`.
//! Nothing else is logged: errors are returned, not logged.
//!
//! # The HTTP client
//!
//! The [HTTP client](crate::http::client) records through the same
//! [`ClientRecorder`]: each attempt is a CLIENT span in the scope
//! [`HTTP_SCOPE`](names::HTTP_SCOPE) with OpenTelemetry's HTTP client
//! conventions ([`ClientRecorder::start_http_attempt`], [`HttpAttempt`]),
//! named after the method, with `http.request.method`, `server.address`,
//! `server.port`, `url.full`, `http.request.resend_count`,
//! `http.response.status_code` and `error.type`, and one point of
//! `http.client.request.duration` (seconds); a rejected call is a span of
//! [`CLIENT_SCOPE`](names::CLIENT_SCOPE) ([`ClientRecorder::record_http_rejected`]).
//! humus's four instruments and the breaker's log records are the ones
//! above, recorded by the same methods ([`ClientRecorder::record_call`],
//! [`ClientRecorder::record_decision`], the transition observer), with the
//! same names, scope and attributes: an HTTP dependency's breaker is one
//! more `server.address`/`server.port` on the same dashboard.
//! [`HeaderInjector`] and [`HeaderExtractor`] carry the propagator's
//! fields in HTTP headers.
//!
//! # How the client records a call
//!
//! ```
//! use humus::circuit::Outcome;
//! use humus::retry::Decision;
//! use humus::telemetry::{ClientRecorder, Telemetry};
//! use opentelemetry::Context;
//!
//! # let breaker_state = || humus::circuit::State::Closed;
//! let telemetry = Telemetry::default(); // setup.telemetry() in the client
//! // Once per client:
//! let recorder = ClientRecorder::new(&telemetry, "ledger:443");
//! let _observer = recorder.transition_observer(); // given to Breaker::new
//! let _registration = recorder.register_breaker(breaker_state); // kept by the client
//!
//! // Per attempt the breaker admits:
//! let cx = Context::current(); // the call's context
//! let attempt = recorder.start_attempt(&cx, "/ledger.v1.Ledger/Transfer");
//! // Failure injection evaluates in attempt.context(); with a scenario
//! // stripped, use attempt.inject_with_baggage(&stripped, …) instead.
//! let mut request = tonic::Request::new(());
//! attempt.inject(request.metadata_mut());
//! let status = tonic::Status::unavailable("connection refused"); // the call's result
//! attempt.end(Some(&status));
//! recorder.record_call(Outcome::Failure); // what the ticket was settled with
//! recorder.record_decision(Decision::Retried);
//!
//! // An attempt the breaker rejects:
//! recorder.record_rejected(&cx, "/ledger.v1.Ledger/Transfer", "circuit: call rejected: open for another 4.2s");
//! recorder.record_decision(Decision::Stopped);
//! ```

#[cfg(feature = "rabbitmq")]
mod amqp;
mod attempt;
mod client;
mod headers;
mod http;
mod lines;
mod logs;
mod metadata;
pub mod names;
mod providers;

pub use self::http::{HTTP_CANCELED_ERROR_TYPE, HttpAttempt, http_method_name};
#[cfg(feature = "rabbitmq")]
#[cfg_attr(docsrs, doc(cfg(feature = "rabbitmq")))]
pub use amqp::{FieldTableExtractor, FieldTableInjector};
#[cfg(feature = "rabbitmq")]
pub(crate) use amqp::{to_header_map, write_back};
pub use attempt::Attempt;
#[cfg(any(feature = "kafka", feature = "rabbitmq"))]
pub(crate) use client::scope;
pub use client::{BreakerRegistration, ClientRecorder, code_name};
pub(crate) use client::{DURATION_BOUNDARIES, HeldBreakers};
pub(crate) use headers::join_repeated;
pub use headers::{HeaderExtractor, HeaderInjector};
pub use lines::{LineLogger, LineLogs};
pub use logs::{BoxedLogRecord, BoxedLogger};
pub use metadata::{MetadataExtractor, MetadataInjector};
pub use providers::{Builder, Telemetry};

/// Runs `f` (a call of a breaker's `allow` or a ticket's `done`) with `cx`
/// current, so the log record of a transition it makes carries the call's
/// trace context. `f` is synchronous: the guard never crosses an
/// `.await`. A context with no span is not attached (the record would
/// carry nothing of it). The gRPC and the HTTP client both call it.
#[inline]
pub(crate) fn in_context<T>(cx: &opentelemetry::Context, f: impl FnOnce() -> T) -> T {
    use opentelemetry::trace::TraceContextExt as _;
    if cx.has_active_span() {
        let _guard = cx.clone().attach();
        f()
    } else {
        f()
    }
}

/// Sets through `injector` what every carrier's injector is tested with: a
/// `traceparent`, a field whose key is no header name, one whose value
/// holds a line break, then the `traceparent` again (`00-def`, replacing
/// `00-abc`). Only `traceparent: 00-def` is to be written.
#[cfg(test)]
pub(crate) fn set_bad_and_repeated(injector: &mut dyn opentelemetry::propagation::Injector) {
    injector.set("traceparent", "00-abc".to_owned());
    injector.set("bad key", "v".to_owned());
    injector.set("baggage", "line\nbreak".to_owned());
    injector.set("traceparent", "00-def".to_owned());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The HTTP and the gRPC carriers' injectors write what they can and
    /// skip the rest, a field set again replacing the first (the AMQP
    /// one's, which its extractor reads back, is tested beside it).
    #[test]
    fn an_injector_skips_what_is_no_header_and_replaces_a_field_set_again() {
        let mut headers = ::http::HeaderMap::new();
        set_bad_and_repeated(&mut HeaderInjector(&mut headers));
        assert_eq!(headers.len(), 1);
        assert_eq!(headers["traceparent"], "00-def");
        let mut metadata = tonic::metadata::MetadataMap::new();
        set_bad_and_repeated(&mut MetadataInjector(&mut metadata));
        assert_eq!(metadata.len(), 1);
        assert_eq!(metadata.get("traceparent").unwrap(), "00-def");
    }
}
