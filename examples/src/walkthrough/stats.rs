//! One phase's numbers, read from the OpenTelemetry data collected during
//! it: the difference of humus's cumulative counters between the phase's
//! start and end, and the spans that ended within it.

use std::collections::BTreeMap;
use std::time::Duration;

use opentelemetry::trace::SpanKind;
use opentelemetry_sdk::trace::SpanData;

use crate::recording::{Metrics, span_attribute, span_duration};

/// The names humus records under ([design](humus::design::client#telemetry)),
/// as the walkthrough reads them.
pub mod names {
    // Not inlined: each name's page is humus's, whose links resolve there.
    #[doc(no_inline)]
    pub use humus::telemetry::names::{
        CLIENT_SCOPE, HUMUS_CIRCUIT_CALLS as CIRCUIT_CALLS, HUMUS_CIRCUIT_OUTCOME as OUTCOME,
        HUMUS_CIRCUIT_STATE as STATE, HUMUS_CIRCUIT_STATE_INSTRUMENT as CIRCUIT_STATE,
        HUMUS_CIRCUIT_TRANSITIONS as CIRCUIT_TRANSITIONS, HUMUS_RETRY_DECISION as DECISION,
        HUMUS_RETRY_DECISIONS as RETRY_DECISIONS, RPC_CLIENT_CALL_DURATION,
        RPC_RESPONSE_STATUS_CODE as STATUS_CODE, RPC_SCOPE,
    };
    #[doc(no_inline)]
    pub use humus::telemetry::names::{
        ERROR_TYPE, HTTP_CLIENT_REQUEST_DURATION, HTTP_RESPONSE_STATUS_CODE, HTTP_SCOPE,
        KAFKA_SCOPE, MESSAGING_CLIENT_SENT_MESSAGES, SERVER_PORT,
    };
}

/// The instrumentation scope of the wallet's server spans: its humus
/// server's (the ledger's records nothing in the walkthrough).
pub const WALLET_SCOPE: &str = humus::telemetry::names::RPC_SERVER_SCOPE;

/// One phase's numbers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PhaseStats {
    /// Calls the wallet made to the dependency (the ledger, or the
    /// exchange-rate service): every call ends with one retry decision that
    /// is not `retried`. A client that never retries (the Kafka producer,
    /// whose retries are librdkafka's) makes no retry decision: its calls
    /// are those its breaker counted, `humus.circuit.calls`.
    pub calls: u64,
    /// Attempts that reached the transport: `rpc.client.call.duration`'s
    /// count, `http.client.request.duration`'s, and the records handed to
    /// librdkafka, `messaging.client.sent.messages` (a record an injected
    /// fault aborted is in none).
    pub attempts: u64,
    /// Attempts followed by another: `humus.retry.decisions{retried}`.
    pub retries: u64,
    /// Retries the budget refused: `humus.retry.decisions{throttled}`.
    pub throttled: u64,
    /// Calls the breaker rejected: `humus.circuit.calls{rejected}`.
    pub rejected: u64,
    /// Breaker transitions, by the state entered:
    /// `humus.circuit.transitions`.
    pub transitions: BTreeMap<String, u64>,
    /// Retry decisions, by decision.
    pub decisions: BTreeMap<String, u64>,
    /// Calls the breaker counted, by outcome.
    pub outcomes: BTreeMap<String, u64>,
    /// The attempts' spans, by the status code they ended with (an HTTP
    /// attempt's `http.response.status_code`, or its `error.type`).
    pub attempt_codes: BTreeMap<String, u64>,
    /// The wallet's answers to its callers (its server spans), by code.
    pub wallet_codes: BTreeMap<String, u64>,
    /// The wallet's calls served: its server spans.
    pub served: u64,
    /// The median of the wallet's server spans' durations.
    pub p50: Option<Duration>,
    /// The 99th percentile of the wallet's server spans' durations.
    pub p99: Option<Duration>,
}

impl PhaseStats {
    /// The numbers of a phase from the metrics collected at its start and
    /// at its end, and the spans that ended during it.
    pub fn new(before: &Metrics, after: &Metrics, spans: &[SpanData]) -> PhaseStats {
        PhaseStats::of(before, after, spans, None)
    }

    /// [`new`](PhaseStats::new), of the client of the dependency on `port`
    /// alone (its instruments' and attempts' `server.port`), when `port`
    /// is given: the ledger's client and the exchange-rate client record
    /// into the same instruments.
    pub fn of(
        before: &Metrics,
        after: &Metrics,
        spans: &[SpanData],
        port: Option<u16>,
    ) -> PhaseStats {
        let port_text = port.map(|p| p.to_string());
        let filter: Vec<(&str, &str)> = port_text
            .as_deref()
            .map(|p| vec![(names::SERVER_PORT, p)])
            .unwrap_or_default();
        let delta = |name: &str, key: &str| -> BTreeMap<String, u64> {
            let b = before.by_where(names::CLIENT_SCOPE, name, key, &filter);
            after
                .by_where(names::CLIENT_SCOPE, name, key, &filter)
                .into_iter()
                .map(|(k, v)| {
                    let d = v - b.get(&k).copied().unwrap_or(0.0);
                    (k, d.round().max(0.0) as u64)
                })
                .filter(|(_, v)| *v > 0)
                .collect()
        };
        let decisions = delta(names::RETRY_DECISIONS, names::DECISION);
        let outcomes = delta(names::CIRCUIT_CALLS, names::OUTCOME);
        let transitions = delta(names::CIRCUIT_TRANSITIONS, names::STATE);
        let count = |m: &Metrics| {
            m.sum(names::RPC_SCOPE, names::RPC_CLIENT_CALL_DURATION, &filter)
                + m.sum(
                    names::HTTP_SCOPE,
                    names::HTTP_CLIENT_REQUEST_DURATION,
                    &filter,
                )
                + m.sum(
                    names::KAFKA_SCOPE,
                    names::MESSAGING_CLIENT_SENT_MESSAGES,
                    &filter,
                )
        };
        let attempts = (count(after) - count(before)).round().max(0.0) as u64;
        let ours = |span: &SpanData| {
            port_text.is_none()
                || span_attribute(span, names::SERVER_PORT).as_deref() == port_text.as_deref()
        };
        let get = |m: &BTreeMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0);

        let mut attempt_codes = BTreeMap::new();
        let mut wallet_codes = BTreeMap::new();
        let mut latencies = Vec::new();
        for span in spans {
            let scope = span.instrumentation_scope.name();
            if scope == names::RPC_SCOPE && ours(span) {
                let code = span_attribute(span, names::STATUS_CODE).unwrap_or_default();
                *attempt_codes.entry(code).or_default() += 1;
            } else if scope == names::HTTP_SCOPE && ours(span) {
                let code = span_attribute(span, names::HTTP_RESPONSE_STATUS_CODE)
                    .or_else(|| span_attribute(span, names::ERROR_TYPE))
                    .unwrap_or_default();
                *attempt_codes.entry(code).or_default() += 1;
            } else if scope == WALLET_SCOPE && span.span_kind == SpanKind::Server {
                let code = span_attribute(span, names::STATUS_CODE).unwrap_or_default();
                *wallet_codes.entry(code).or_default() += 1;
                latencies.push(span_duration(span));
            }
        }
        latencies.sort();

        PhaseStats {
            calls: if decisions.is_empty() {
                outcomes.values().sum()
            } else {
                decisions.values().sum::<u64>() - get(&decisions, "retried")
            },
            attempts,
            retries: get(&decisions, "retried"),
            throttled: get(&decisions, "throttled"),
            rejected: get(&outcomes, "rejected"),
            served: latencies.len() as u64,
            p50: quantile(&latencies, 0.50),
            p99: quantile(&latencies, 0.99),
            transitions,
            decisions,
            outcomes,
            attempt_codes,
            wallet_codes,
        }
    }

    /// The transitions as `open 1, half-open 1, closed 1` (in the order a
    /// breaker goes through them), or `-` for none.
    pub fn transitions_text(&self) -> String {
        let order = ["open", "half-open", "closed"];
        let mut parts: Vec<String> = order
            .iter()
            .filter_map(|s| self.transitions.get(*s).map(|n| format!("{s} {n}")))
            .collect();
        parts.extend(
            self.transitions
                .iter()
                .filter(|(s, _)| !order.contains(&s.as_str()))
                .map(|(s, n)| format!("{s} {n}")),
        );
        if parts.is_empty() {
            "-".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// The nearest-rank quantile (0 to 1) of sorted values.
pub fn quantile(sorted: &[Duration], q: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::Point;
    use opentelemetry::KeyValue;

    fn point(scope: &str, name: &str, attrs: &[(&'static str, &'static str)], value: f64) -> Point {
        Point {
            scope: scope.into(),
            name: name.into(),
            attributes: attrs.iter().map(|(k, v)| KeyValue::new(*k, *v)).collect(),
            value,
        }
    }

    #[test]
    fn a_phase_is_the_difference_of_two_collections() {
        let before = Metrics {
            points: vec![
                point(
                    names::CLIENT_SCOPE,
                    names::RETRY_DECISIONS,
                    &[(names::DECISION, "succeeded")],
                    10.0,
                ),
                point(
                    names::RPC_SCOPE,
                    names::RPC_CLIENT_CALL_DURATION,
                    &[("rpc.method", "a")],
                    10.0,
                ),
            ],
        };
        let after = Metrics {
            points: vec![
                point(
                    names::CLIENT_SCOPE,
                    names::RETRY_DECISIONS,
                    &[(names::DECISION, "succeeded")],
                    14.0,
                ),
                point(
                    names::CLIENT_SCOPE,
                    names::RETRY_DECISIONS,
                    &[(names::DECISION, "retried")],
                    3.0,
                ),
                point(
                    names::CLIENT_SCOPE,
                    names::RETRY_DECISIONS,
                    &[(names::DECISION, "throttled")],
                    1.0,
                ),
                point(
                    names::CLIENT_SCOPE,
                    names::CIRCUIT_CALLS,
                    &[(names::OUTCOME, "rejected")],
                    2.0,
                ),
                point(
                    names::CLIENT_SCOPE,
                    names::CIRCUIT_TRANSITIONS,
                    &[(names::STATE, "half-open")],
                    1.0,
                ),
                point(
                    names::CLIENT_SCOPE,
                    names::CIRCUIT_TRANSITIONS,
                    &[(names::STATE, "open")],
                    1.0,
                ),
                point(
                    names::RPC_SCOPE,
                    names::RPC_CLIENT_CALL_DURATION,
                    &[("rpc.method", "a")],
                    15.0,
                ),
                point(
                    names::RPC_SCOPE,
                    names::RPC_CLIENT_CALL_DURATION,
                    &[("rpc.method", "b")],
                    2.0,
                ),
            ],
        };
        let stats = PhaseStats::new(&before, &after, &[]);
        assert_eq!(stats.calls, 5);
        assert_eq!(stats.attempts, 7);
        assert_eq!(stats.retries, 3);
        assert_eq!(stats.throttled, 1);
        assert_eq!(stats.rejected, 2);
        assert_eq!(stats.transitions_text(), "open 1, half-open 1");
        assert_eq!(stats.p50, None);
    }

    #[test]
    fn a_producers_calls_are_its_breakers_and_its_attempts_the_records_sent() {
        let before = Metrics { points: vec![] };
        let after = Metrics {
            points: vec![
                point(
                    names::CLIENT_SCOPE,
                    names::CIRCUIT_CALLS,
                    &[(names::OUTCOME, "success")],
                    9.0,
                ),
                point(
                    names::CLIENT_SCOPE,
                    names::CIRCUIT_CALLS,
                    &[(names::OUTCOME, "failure")],
                    1.0,
                ),
                point(
                    names::KAFKA_SCOPE,
                    names::MESSAGING_CLIENT_SENT_MESSAGES,
                    &[("messaging.destination.name", "wallet.transfers")],
                    9.0,
                ),
            ],
        };
        let stats = PhaseStats::new(&before, &after, &[]);
        assert_eq!(stats.calls, 10);
        assert_eq!(stats.attempts, 9);
        assert_eq!(stats.retries, 0);
        assert_eq!(stats.rejected, 0);
    }

    #[test]
    fn nearest_rank_quantiles() {
        let ms: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(quantile(&ms, 0.5), Some(Duration::from_millis(50)));
        assert_eq!(quantile(&ms, 0.99), Some(Duration::from_millis(99)));
        assert_eq!(quantile(&ms[..1], 0.99), Some(Duration::from_millis(1)));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
