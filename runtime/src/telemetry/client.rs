//! The per-client recorder: attempt spans, propagation, the client's
//! instruments and the breaker's log records ([design](crate::design::client#telemetry)).

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use opentelemetry::global::BoxedTracer;
use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, Severity};
use opentelemetry::metrics::{AsyncInstrument, Counter, Histogram, ObservableUpDownCounter};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanBuilder, SpanKind, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, InstrumentationScope, KeyValue};
use tonic::Code;

use super::attempt::{Attempt, InFlight, end_span, error_type};
use super::logs::BoxedLogger;
use super::names::*;
use super::providers::Telemetry;
use crate::circuit::{Outcome, State, Transition};
use crate::retry::Decision;

/// The name of a gRPC status code as the RPC semantic conventions and
/// gRPC's own documents spell it: `OK`, `CANCELLED`, `UNAVAILABLE`, …
/// (the value of `rpc.response.status_code` and `error.type`).
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// Splits a `host:port` address into `server.address` and `server.port`.
///
/// A bracketed IPv6 host loses its brackets (`[::1]:443` is `::1`, 443).
/// An address with no port, or a port that isn't a number from 0 to 65535,
/// is all host, with no port: the client's settings reject such an address
/// before a recorder sees it, and a recorder never fails.
pub(crate) fn split_host_port(addr: &str) -> (&str, Option<u16>) {
    if let Some(rest) = addr.strip_prefix('[') {
        if let Some((host, port)) = rest.split_once("]:")
            && let Ok(port) = port.parse()
        {
            return (host, Some(port));
        }
        return (addr, None);
    }
    match addr.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => match port.parse() {
            Ok(port) => (host, Some(port)),
            Err(_) => (addr, None),
        },
        _ => (addr, None),
    }
}

const STATES: [State; 3] = [State::Closed, State::Open, State::HalfOpen];

fn state_index(state: State) -> usize {
    match state {
        State::Closed => 0,
        State::Open => 1,
        State::HalfOpen => 2,
    }
}

const OUTCOMES: [Outcome; 3] = [Outcome::Success, Outcome::Failure, Outcome::Ignored];

fn outcome_index(outcome: Outcome) -> usize {
    match outcome {
        Outcome::Success => 0,
        Outcome::Failure => 1,
        Outcome::Ignored => 2,
    }
}

const DECISIONS: [Decision; 6] = [
    Decision::Succeeded,
    Decision::Retried,
    Decision::Stopped,
    Decision::Throttled,
    Decision::Exhausted,
    Decision::Expired,
];

fn decision_index(decision: Decision) -> usize {
    match decision {
        Decision::Succeeded => 0,
        Decision::Retried => 1,
        Decision::Stopped => 2,
        Decision::Throttled => 3,
        Decision::Exhausted => 4,
        Decision::Expired => 5,
    }
}

/// The bucket boundaries of `rpc.client.call.duration`, in seconds: those
/// the semantic conventions advise for durations.
pub(crate) const DURATION_BOUNDARIES: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// The span status message of an attempt dropped before it ended.
pub(super) const DROPPED_MESSAGE: &str = "the call was dropped before it ended";

pub(crate) fn scope(name: &'static str) -> InstrumentationScope {
    InstrumentationScope::builder(name)
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

/// What every client of one [`Telemetry`] shares: its tracers, its
/// instruments, its logger and the registry of breakers whose state
/// `humus.circuit.state` reads.
pub(crate) struct Kit {
    rpc_tracer: Option<BoxedTracer>,
    /// The tracer of the HTTP client's attempt spans
    /// ([`HTTP_SCOPE`](super::names::HTTP_SCOPE)).
    pub(super) http_tracer: Option<BoxedTracer>,
    pub(super) client_tracer: Option<BoxedTracer>,
    logger: BoxedLogger,
    pub(super) instruments: Option<Instruments>,
    registry: Arc<Registry>,
    pub(super) propagator: Arc<dyn TextMapPropagator + Send + Sync>,
}

/// The instruments of every client of one [`Telemetry`]: each protocol's
/// duration histogram, and humus's four instruments, which the gRPC and
/// the HTTP clients share (one dashboard serves both).
pub(super) struct Instruments {
    pub(super) call_duration: Histogram<f64>,
    /// `http.client.request.duration`, in [`HTTP_SCOPE`](super::names::HTTP_SCOPE).
    pub(super) http_duration: Histogram<f64>,
    transitions: Counter<u64>,
    pub(super) calls: Counter<u64>,
    decisions: Counter<u64>,
    _state: ObservableUpDownCounter<i64>,
}

impl Kit {
    pub(crate) fn new(telemetry: &Telemetry) -> Kit {
        let registry = Arc::new(Registry::default());
        let instruments = telemetry.has_meter_provider().then(|| {
            let rpc = telemetry.meter(scope(RPC_SCOPE));
            let own = telemetry.meter(scope(CLIENT_SCOPE));
            let http = telemetry.meter(scope(HTTP_SCOPE));
            let observed = Arc::clone(&registry);
            Instruments {
                http_duration: http
                    .f64_histogram(HTTP_CLIENT_REQUEST_DURATION)
                    .with_unit("s")
                    .with_description("Duration of HTTP client requests.")
                    .with_boundaries(DURATION_BOUNDARIES.to_vec())
                    .build(),
                call_duration: rpc
                    .f64_histogram(RPC_CLIENT_CALL_DURATION)
                    .with_unit("s")
                    .with_description("Measures the duration of outbound remote procedure calls.")
                    .with_boundaries(DURATION_BOUNDARIES.to_vec())
                    .build(),
                transitions: own
                    .u64_counter(HUMUS_CIRCUIT_TRANSITIONS)
                    .with_unit("{transition}")
                    .with_description("Circuit breaker transitions, by the state entered.")
                    .build(),
                calls: own
                    .u64_counter(HUMUS_CIRCUIT_CALLS)
                    .with_unit("{call}")
                    .with_description(
                        "Calls the circuit breaker counted, by outcome, and calls it rejected.",
                    )
                    .build(),
                decisions: own
                    .u64_counter(HUMUS_RETRY_DECISIONS)
                    .with_unit("{decision}")
                    .with_description("Retry decisions, by decision.")
                    .build(),
                _state: own
                    .i64_observable_up_down_counter(HUMUS_CIRCUIT_STATE_INSTRUMENT)
                    .with_unit("{breaker}")
                    .with_description("Circuit breakers in each state, read at each collection.")
                    .with_callback(move |observer| observed.observe(observer))
                    .build(),
            }
        });
        Kit {
            rpc_tracer: telemetry
                .has_tracer_provider()
                .then(|| telemetry.tracer(scope(RPC_SCOPE))),
            http_tracer: telemetry
                .has_tracer_provider()
                .then(|| telemetry.tracer(scope(HTTP_SCOPE))),
            client_tracer: telemetry
                .has_tracer_provider()
                .then(|| telemetry.tracer(scope(CLIENT_SCOPE))),
            logger: telemetry.logger(scope(CLIENT_SCOPE)),
            instruments,
            registry,
            propagator: telemetry.shared_propagator(),
        }
    }
}

impl Kit {
    /// Holds every breaker registered now in `humus.circuit.state` until
    /// the result is dropped ([`Telemetry::hold_breakers`]).
    pub(crate) fn hold_breakers(&self) -> HeldBreakers {
        HeldBreakers(self.registry.hold())
    }
}

/// The breakers registered when [`Telemetry::hold_breakers`] was called,
/// kept in `humus.circuit.state` while this lives, even once their clients
/// (and their registrations) are dropped: what an App holds from its stop
/// to its telemetry's flush, so the final export has the state of a client
/// that was dropped with the server whose handler held it.
#[derive(Default)]
pub(crate) struct HeldBreakers(Vec<Arc<Entry>>);

impl fmt::Debug for HeldBreakers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("HeldBreakers").field(&self.0.len()).finish()
    }
}

/// The breakers `humus.circuit.state` reads at each collection. It holds
/// them weakly: a [`BreakerRegistration`] dropped is gone at the next
/// collection.
#[derive(Default)]
struct Registry {
    entries: Mutex<Vec<Weak<Entry>>>,
}

struct Entry {
    endpoint: Arc<Endpoint>,
    state: Box<dyn Fn() -> State + Send + Sync>,
}

impl Registry {
    fn register(&self, entry: &Arc<Entry>) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|e| e.strong_count() > 0);
        entries.push(Arc::downgrade(entry));
    }

    /// The breakers registered now, held: each stays in
    /// `humus.circuit.state` while the result lives, whether or not its
    /// registration does.
    fn hold(&self) -> Vec<Arc<Entry>> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|e| e.strong_count() > 0);
        entries.iter().filter_map(Weak::upgrade).collect()
    }

    fn observe(&self, observer: &dyn AsyncInstrument<i64>) {
        // Read the live entries, then call no user code with the lock held.
        let live: Vec<Arc<Entry>> = {
            let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
            entries.retain(|e| e.strong_count() > 0);
            entries.iter().filter_map(Weak::upgrade).collect()
        };
        let mut groups: Vec<(&Endpoint, [i64; 3])> = Vec::new();
        for entry in &live {
            let index = state_index((entry.state)());
            match groups
                .iter_mut()
                .find(|(endpoint, _)| endpoint.same_as(&entry.endpoint))
            {
                Some((_, counts)) => counts[index] += 1,
                None => {
                    let mut counts = [0; 3];
                    counts[index] = 1;
                    groups.push((&entry.endpoint, counts));
                }
            }
        }
        for (endpoint, counts) in groups {
            for (index, count) in counts.into_iter().enumerate() {
                observer.observe(count, &endpoint.state_attributes[index]);
            }
        }
    }
}

/// One dependency's address and the attribute sets of its data points.
pub(super) struct Endpoint {
    address: String,
    port: Option<u16>,
    pub(super) address_kv: KeyValue,
    pub(super) port_kv: Option<KeyValue>,
    /// `server.address`, `server.port`, `humus.circuit.state` per state.
    state_attributes: [Vec<KeyValue>; 3],
    /// `server.address`, `server.port`, `humus.circuit.outcome` per outcome,
    /// then `rejected`, then `late`.
    pub(super) call_attributes: [Vec<KeyValue>; 5],
    /// `server.address`, `server.port`, `humus.retry.decision` per decision.
    decision_attributes: [Vec<KeyValue>; 6],
}

impl Endpoint {
    fn new(addr: &str) -> Endpoint {
        let (address, port) = split_host_port(addr);
        let address_kv = KeyValue::new(SERVER_ADDRESS, address.to_owned());
        let port_kv = port.map(|port| KeyValue::new(SERVER_PORT, i64::from(port)));
        let with = |key: &'static str, value: String| {
            let mut attributes = vec![address_kv.clone()];
            attributes.extend(port_kv.clone());
            attributes.push(KeyValue::new(key, value));
            attributes
        };
        Endpoint {
            address: address.to_owned(),
            port,
            state_attributes: STATES.map(|s| with(HUMUS_CIRCUIT_STATE, s.to_string())),
            call_attributes: [
                with(HUMUS_CIRCUIT_OUTCOME, OUTCOMES[0].to_string()),
                with(HUMUS_CIRCUIT_OUTCOME, OUTCOMES[1].to_string()),
                with(HUMUS_CIRCUIT_OUTCOME, OUTCOMES[2].to_string()),
                with(HUMUS_CIRCUIT_OUTCOME, REJECTED.to_owned()),
                with(HUMUS_CIRCUIT_OUTCOME, LATE.to_owned()),
            ],
            decision_attributes: DECISIONS.map(|d| with(HUMUS_RETRY_DECISION, d.to_string())),
            address_kv,
            port_kv,
        }
    }

    fn same_as(&self, other: &Endpoint) -> bool {
        self.address == other.address && self.port == other.port
    }
}

/// What one client records with: created once per client, from the
/// [`Setup`](crate::Setup)'s [`Telemetry`] and the client's address.
///
/// This is the seam between the gRPC client's attempt loop and
/// OpenTelemetry. The loop calls it as the [module docs](super) show:
///
/// | when | call |
/// |---|---|
/// | building the client | [`ClientRecorder::new`], then [`transition_observer`](Self::transition_observer) as the breaker's observer, then [`register_breaker`](Self::register_breaker) and keep the registration |
/// | each attempt the breaker admits | [`start_attempt`](Self::start_attempt); failure injection in [`Attempt::context`]; [`Attempt::inject`] into the request's metadata (or [`Attempt::inject_with_baggage`] with the stripped context); the call; [`Attempt::end`] with its status (an injected abort too) |
/// | each attempt's settled ticket | [`record_call`](Self::record_call) with the outcome given to the ticket, or [`record_late`](Self::record_late) when the breaker discarded it (`done` returned `false`) |
/// | each attempt the breaker rejects | [`record_rejected`](Self::record_rejected) |
/// | each decision of the retry loop | [`record_decision`](Self::record_decision) |
///
/// A clone is cheap and records to the same place.
#[derive(Clone)]
pub struct ClientRecorder {
    pub(super) inner: Arc<Recorder>,
}

pub(super) struct Recorder {
    pub(super) kit: Arc<Kit>,
    pub(super) endpoint: Arc<Endpoint>,
}

crate::debug::debug_fields!(ClientRecorder {
    server_address: |r| &r.inner.endpoint.address,
    server_port: |r| r.inner.endpoint.port,
    ..
});

impl ClientRecorder {
    /// A recorder of the client of the dependency at `addr`, `host:port`,
    /// which gives every span, data point and log record its
    /// `server.address` and `server.port`.
    ///
    /// An `addr` with no valid port (which the client's settings reject
    /// first) is recorded whole as `server.address`, with no `server.port`.
    pub fn new(telemetry: &Telemetry, addr: &str) -> ClientRecorder {
        ClientRecorder {
            inner: Arc::new(Recorder {
                kit: telemetry.kit(),
                endpoint: Arc::new(Endpoint::new(addr)),
            }),
        }
    }

    /// The `server.address` this recorder records.
    pub fn server_address(&self) -> &str {
        &self.inner.endpoint.address
    }

    /// The `server.port` this recorder records, if the address had one.
    pub fn server_port(&self) -> Option<u16> {
        self.inner.endpoint.port
    }

    /// Has `humus.circuit.state` read a breaker's state with `state` at each
    /// collection, for as long as the returned registration lives.
    ///
    /// `state` is typically `move || breaker.state()` over a clone of the
    /// client's breaker; it runs on the thread that collects metrics, so it
    /// must be a quick, pure read that doesn't panic. Every breaker
    /// registered for one address, from every client of one [`Telemetry`],
    /// adds up: two clients of `ledger:443`, one closed and one open, report
    /// closed 1, open 1, half-open 0. The client keeps the registration as
    /// long as it lives; once every registration of an address is dropped,
    /// the address has no more data points.
    pub fn register_breaker<F>(&self, state: F) -> BreakerRegistration
    where
        F: Fn() -> State + Send + Sync + 'static,
    {
        let entry = Arc::new(Entry {
            endpoint: Arc::clone(&self.inner.endpoint),
            state: Box::new(state),
        });
        if self.inner.kit.instruments.is_some() {
            self.inner.kit.registry.register(&entry);
        }
        BreakerRegistration { _entry: entry }
    }

    /// The observer to give the client's breaker: it records each
    /// [`Transition`] with [`record_transition`](Self::record_transition)
    /// in the current OpenTelemetry context.
    ///
    /// The breaker calls its observer on the thread of the call that made
    /// the change, from `allow` or `done`. For the log record to carry that
    /// call's trace context, the loop makes the call's context current
    /// around them (`let _guard = cx.clone().attach();`: both are
    /// synchronous, so the guard never crosses an `.await`).
    pub fn transition_observer(&self) -> impl Fn(&Transition) + Send + Sync + 'static {
        let recorder = self.clone();
        // Not `Context::map_current`: it keeps the current context borrowed,
        // and the SDK's processors attach a context of their own on emit.
        move |transition: &Transition| recorder.record_transition(&Context::current(), transition)
    }

    /// Starts an attempt of `method`, the full method name with its leading
    /// slash (`"/ledger.v1.Ledger/Transfer"`, a
    /// [`Method::full_name`](crate::grpc::client::Method)), as a CLIENT
    /// span, a child of the span in `cx`.
    ///
    /// The span is named after the method without its leading slash
    /// (`ledger.v1.Ledger/Transfer`), in the scope
    /// [`RPC_SCOPE`](super::names::RPC_SCOPE), with `rpc.system.name`
    /// `grpc`, `rpc.method` (the same name), `server.address` and
    /// `server.port`. Its [context](Attempt::context) keeps `cx`'s
    /// baggage: the one failure injection evaluates the attempt in. The
    /// attempt's clock, for `rpc.client.call.duration`, is tokio's, so
    /// paused-time tests measure exactly.
    pub fn start_attempt(&self, cx: &Context, method: &'static str) -> Attempt {
        let method = method.strip_prefix('/').unwrap_or(method);
        let tracer = self.inner.kit.rpc_tracer.as_ref();
        Attempt(InFlight::start(&self.inner, tracer, cx, method, || {
            self.span_builder(method)
        }))
    }

    /// Records a call the breaker rejected: a span of humus's own scope
    /// ([`CLIENT_SCOPE`](super::names::CLIENT_SCOPE)), named and attributed
    /// as an attempt's, a child of the span in `cx`, ended at once with
    /// `rpc.response.status_code` and `error.type` `UNAVAILABLE` and status
    /// Error with `message` (the rejection's, such as `circuit: call
    /// rejected: open for another 4.2s`); and one `humus.circuit.calls` of
    /// outcome `rejected`. It records no `rpc.client.call.duration`: nothing
    /// was sent. The loop records the decision (`stopped`) itself.
    pub fn record_rejected(&self, cx: &Context, method: &'static str, message: &str) {
        self.unsent_span(
            cx,
            method,
            Code::Unavailable,
            message,
            code_name(Code::Unavailable),
        );
        if let Some(instruments) = &self.inner.kit.instruments {
            instruments
                .calls
                .add(1, &self.inner.endpoint.call_attributes[3]);
        }
    }

    /// Records an attempt that ended before anything was sent for another
    /// reason than the breaker, such as an injected abort: a span of
    /// humus's own scope, as [`record_rejected`](Self::record_rejected)
    /// makes, with `status`'s code and message, and `error.type`
    /// [`fault::ERROR_TYPE`](crate::fault::ERROR_TYPE) when `status` carries
    /// an [`InjectedError`](crate::fault::InjectedError). It counts no call: the
    /// attempt's ticket is settled, and [`record_call`](Self::record_call)
    /// counts it, as any other attempt's.
    pub fn record_unsent(&self, cx: &Context, method: &'static str, status: &tonic::Status) {
        self.unsent_span(
            cx,
            method,
            status.code(),
            status.message(),
            error_type(status.code(), Some(status)),
        );
    }

    /// Counts one call the breaker rejected in `humus.circuit.calls`
    /// (outcome `rejected`), for a client that records the rejection's span
    /// itself (the RabbitMQ publisher's PRODUCER span, the Kafka producer's
    /// one per record).
    #[cfg(any(feature = "kafka", feature = "rabbitmq"))]
    pub(crate) fn record_rejected_call(&self) {
        if let Some(instruments) = &self.inner.kit.instruments {
            instruments
                .calls
                .add(1, &self.inner.endpoint.call_attributes[3]);
        }
    }

    /// Counts one call in `humus.circuit.calls`, by the outcome the breaker
    /// counted it with. Call it once per settled ticket (a unary attempt
    /// once it has returned, a stream once it has ended), with the outcome
    /// given to `Ticket::done`, when `done` returned `true`; a result
    /// `done` discarded as late is [`record_late`](Self::record_late)'s,
    /// and a released ticket counts nothing.
    #[inline]
    pub fn record_call(&self, outcome: Outcome) {
        if let Some(instruments) = &self.inner.kit.instruments {
            instruments.calls.add(
                1,
                &self.inner.endpoint.call_attributes[outcome_index(outcome)],
            );
        }
    }

    /// Counts one call in `humus.circuit.calls` as
    /// [`late`](super::names::LATE): its ticket was settled, but
    /// `Ticket::done` returned `false`, the breaker having changed state
    /// since it admitted the call, so the breaker counted nothing of it.
    /// So the metric's `failure` is what the breaker counted: the count
    /// in a transition's log record.
    pub fn record_late(&self) {
        if let Some(instruments) = &self.inner.kit.instruments {
            instruments
                .calls
                .add(1, &self.inner.endpoint.call_attributes[4]);
        }
    }

    /// Counts one settled ticket in `humus.circuit.calls`: by `outcome`
    /// ([`record_call`](Self::record_call)) when the breaker counted it
    /// (`current`, what `Ticket::done` returned), else as
    /// [`late`](Self::record_late).
    #[inline]
    pub(crate) fn record_settled(&self, outcome: Outcome, current: bool) {
        if current {
            self.record_call(outcome);
        } else {
            self.record_late();
        }
    }

    /// Counts one decision of the retry loop in `humus.retry.decisions`:
    /// one per attempt, `retried` for each one that is followed by another,
    /// and the decision that ended the call for the last one (a rejected
    /// attempt is `stopped`, a stream that opened `succeeded`).
    #[inline]
    pub fn record_decision(&self, decision: Decision) {
        if let Some(instruments) = &self.inner.kit.instruments {
            instruments.decisions.add(
                1,
                &self.inner.endpoint.decision_attributes[decision_index(decision)],
            );
        }
    }

    /// Records one breaker transition: one `humus.circuit.transitions` by
    /// the state entered, and one log record in humus's own scope.
    ///
    /// The record's event name is `humus.circuit.transition`, its severity
    /// WARN when the breaker opens and INFO otherwise, its body
    /// `circuit breaker changed from <from> to <to>`, and its attributes
    /// `server.address`, `server.port`, `humus.circuit.state` (the state
    /// entered), `humus.circuit.previous_state` (the state left) and the
    /// counts of the state left: `humus.circuit.successes`, `…failures`,
    /// `…consecutive_successes`, `…consecutive_failures`, `…timed_out`. It
    /// carries the trace context of the span in `cx`, if any.
    pub fn record_transition(&self, cx: &Context, transition: &Transition) {
        let kit = &self.inner.kit;
        let endpoint = &self.inner.endpoint;
        if let Some(instruments) = &kit.instruments {
            instruments
                .transitions
                .add(1, &endpoint.state_attributes[state_index(transition.to)]);
        }
        if kit.logger.is_noop() {
            return;
        }
        let severity = if transition.to == State::Open {
            Severity::Warn
        } else {
            Severity::Info
        };
        let Some(mut record) = kit.logger.event_record(
            CLIENT_SCOPE,
            HUMUS_CIRCUIT_TRANSITION_EVENT,
            severity,
            || {
                format!(
                    "circuit breaker changed from {} to {}",
                    transition.from, transition.to
                )
            },
        ) else {
            return;
        };
        record.add_attribute(SERVER_ADDRESS, endpoint.address.clone());
        if let Some(port) = endpoint.port {
            record.add_attribute(SERVER_PORT, i64::from(port));
        }
        let counts = &transition.counts;
        record.add_attributes([
            (
                HUMUS_CIRCUIT_STATE,
                AnyValue::from(transition.to.to_string()),
            ),
            (
                HUMUS_CIRCUIT_PREVIOUS_STATE,
                AnyValue::from(transition.from.to_string()),
            ),
            (HUMUS_CIRCUIT_SUCCESSES, AnyValue::from(counts.successes)),
            (HUMUS_CIRCUIT_FAILURES, AnyValue::from(counts.failures)),
            (
                HUMUS_CIRCUIT_CONSECUTIVE_SUCCESSES,
                AnyValue::from(counts.consecutive_successes),
            ),
            (
                HUMUS_CIRCUIT_CONSECUTIVE_FAILURES,
                AnyValue::from(counts.consecutive_failures),
            ),
            (HUMUS_CIRCUIT_TIMED_OUT, AnyValue::from(counts.timed_out)),
        ]);
        record.set_trace_of(cx);
        kit.logger.emit(record);
    }

    fn span_builder(&self, method: &'static str) -> SpanBuilder {
        let endpoint = &self.inner.endpoint;
        let mut attributes = Vec::with_capacity(6);
        attributes.push(KeyValue::new(RPC_SYSTEM_NAME, RPC_SYSTEM_GRPC));
        attributes.push(KeyValue::new(RPC_METHOD, method));
        attributes.push(endpoint.address_kv.clone());
        attributes.extend(endpoint.port_kv.clone());
        SpanBuilder::from_name(Cow::Borrowed(method))
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
    }

    fn unsent_span(
        &self,
        cx: &Context,
        method: &'static str,
        code: Code,
        message: &str,
        error_type: &'static str,
    ) {
        let Some(tracer) = &self.inner.kit.client_tracer else {
            return;
        };
        let method = method.strip_prefix('/').unwrap_or(method);
        let span = tracer.build_with_context(self.span_builder(method), cx);
        let cx = cx.with_span(span);
        end_span(&cx, code, message, error_type);
    }
}

/// Keeps a breaker in `humus.circuit.state` while it lives, from
/// [`ClientRecorder::register_breaker`]. Dropping it stops reporting the
/// breaker from the next collection on.
#[must_use = "the breaker's state is reported only while the registration lives"]
pub struct BreakerRegistration {
    _entry: Arc<Entry>,
}

crate::debug::debug_fields!(BreakerRegistration {
    server_address: |r| &r._entry.endpoint.address,
    server_port: |r| r._entry.endpoint.port,
});

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn what_the_client_holds_is_send_and_sync() {
        fn send_sync<T: Send + Sync + 'static>() {}
        send_sync::<Telemetry>();
        send_sync::<ClientRecorder>();
        send_sync::<Attempt>();
        send_sync::<BreakerRegistration>();
    }

    #[test]
    fn code_names_are_grpc_names() {
        assert_eq!(code_name(Code::Ok), "OK");
        assert_eq!(code_name(Code::Unavailable), "UNAVAILABLE");
        assert_eq!(code_name(Code::DeadlineExceeded), "DEADLINE_EXCEEDED");
        assert_eq!(code_name(Code::Unauthenticated), "UNAUTHENTICATED");
        // Every code from 0 to 16 has its own name.
        let names: std::collections::HashSet<_> =
            (0..=16).map(|i| code_name(Code::from_i32(i))).collect();
        assert_eq!(names.len(), 17);
    }

    #[test]
    fn splits_host_and_port() {
        assert_eq!(split_host_port("ledger:443"), ("ledger", Some(443)));
        assert_eq!(split_host_port("10.0.0.1:9090"), ("10.0.0.1", Some(9090)));
        assert_eq!(split_host_port("[::1]:50051"), ("::1", Some(50051)));
        assert_eq!(split_host_port("ledger"), ("ledger", None));
        assert_eq!(split_host_port("ledger:grpc"), ("ledger:grpc", None));
        assert_eq!(split_host_port("ledger:70000"), ("ledger:70000", None));
        assert_eq!(split_host_port("::1"), ("::1", None));
        assert_eq!(split_host_port("[::1]"), ("[::1]", None));
        assert_eq!(split_host_port(":443"), ("", Some(443)));
    }

    proptest! {
        #[test]
        fn split_never_panics(addr in ".*") {
            let _ = split_host_port(&addr);
        }

        #[test]
        fn split_round_trips_host_port(host in "[a-z0-9.-]{0,20}", port: u16) {
            let addr = format!("{host}:{port}");
            prop_assert_eq!(split_host_port(&addr), (host.as_str(), Some(port)));
            let addr = format!("[{host}]:{port}");
            prop_assert_eq!(split_host_port(&addr), (host.as_str(), Some(port)));
        }
    }

    #[test]
    fn attribute_values_are_the_display_of_the_shared_types() {
        let endpoint = Endpoint::new("ledger:443");
        let value = |attributes: &Vec<KeyValue>| attributes[2].value.as_str().into_owned();
        assert_eq!(
            endpoint
                .state_attributes
                .iter()
                .map(value)
                .collect::<Vec<_>>(),
            ["closed", "open", "half-open"]
        );
        assert_eq!(
            endpoint
                .call_attributes
                .iter()
                .map(value)
                .collect::<Vec<_>>(),
            ["success", "failure", "ignored", "rejected", "late"]
        );
        assert_eq!(
            endpoint
                .decision_attributes
                .iter()
                .map(value)
                .collect::<Vec<_>>(),
            [
                "succeeded",
                "retried",
                "stopped",
                "throttled",
                "exhausted",
                "expired"
            ]
        );
        for state in STATES {
            assert_eq!(STATES[state_index(state)], state);
        }
        for outcome in OUTCOMES {
            assert_eq!(OUTCOMES[outcome_index(outcome)], outcome);
        }
        for decision in DECISIONS {
            assert_eq!(DECISIONS[decision_index(decision)], decision);
        }
    }
}
