//! The names humus records under: instrumentation scopes, instruments,
//! attribute keys and the log record's event name.
//!
//! OpenTelemetry's own names follow its semantic conventions for RPC
//! (`rpc.*`, `server.*`, `error.type`); every name humus defines of its own
//! starts with `humus.`. They are plain constants
//! rather than a dependency on `opentelemetry-semantic-conventions`: the
//! newest RPC conventions (`rpc.system.name`, `rpc.response.status_code`,
//! `rpc.client.call.duration` in seconds) are only a handful of strings.

/// The instrumentation scope of each attempt's CLIENT span and of
/// [`RPC_CLIENT_CALL_DURATION`]: the RPC semantic-convention
/// instrumentation, the part OpenTelemetry's gRPC instrumentation (`otelgrpc`)
/// plays in the [design](crate::design::client#telemetry).
pub const RPC_SCOPE: &str = "humus::grpc::client::otel";

/// The instrumentation scope of what every humus client (gRPC, HTTP, the
/// Kafka producer, the RabbitMQ publisher) records of its own: the span of
/// a call the breaker rejected, humus's four instruments and the breaker's
/// log records ([design](crate::design::client#telemetry)).
pub const CLIENT_SCOPE: &str = "humus::client";

/// The instrumentation scope of an [`App`](crate::App)'s log records of
/// its lifecycle: [`HUMUS_APP_SERVING`], [`HUMUS_APP_STOPPING`] and
/// [`HUMUS_APP_EXIT`].
pub const APP_SCOPE: &str = "humus::app";

/// The event name of an App's log record of a server it serves, once the
/// server listens: `serving on <address>`.
pub const HUMUS_APP_SERVING: &str = "humus.app.serving";

/// The event name of an App's log record of a stop signal: `stopping`, or
/// `stopping at once` for a second one.
pub const HUMUS_APP_STOPPING: &str = "humus.app.stopping";

/// The event name of an App's log record of its exit: its code and why,
/// with the error that ended it (`exit 78 (a bad setting): LEDGER_ADDR:
/// not set`), so that the record says what is wrong. It is recorded after
/// the telemetry's flush, so an SDK provider, shut down by then, drops it;
/// [`LineLogs`](super::LineLogs) writes it.
pub const HUMUS_APP_EXIT: &str = "humus.app.exit";

/// The instrumentation scope of each served RPC's SERVER span and of
/// [`RPC_SERVER_CALL_DURATION`] (the part OpenTelemetry's gRPC
/// instrumentation plays on a server).
pub const RPC_SERVER_SCOPE: &str = "humus::grpc::server::otel";

/// The instrumentation scope of each HTTP attempt's CLIENT span and of
/// [`HTTP_CLIENT_REQUEST_DURATION`]: the HTTP semantic-convention
/// instrumentation of [`http::client`](crate::http::client). What the HTTP
/// client records of its own (a rejected call's span, humus's four
/// instruments, the breaker's log records) is in [`CLIENT_SCOPE`], with the
/// gRPC client's, so one dashboard serves both.
pub const HTTP_SCOPE: &str = "humus::http::client::otel";

/// `rpc.system.name`: the RPC system, always [`RPC_SYSTEM_GRPC`].
pub const RPC_SYSTEM_NAME: &str = "rpc.system.name";
/// The value of [`RPC_SYSTEM_NAME`] for gRPC.
pub const RPC_SYSTEM_GRPC: &str = "grpc";
/// `rpc.method`: the fully-qualified method, `package.Service/Method`, as
/// the newest RPC conventions define it (the full method without its
/// leading slash, the same as the span's name).
pub const RPC_METHOD: &str = "rpc.method";
/// `rpc.response.status_code`: the name of the gRPC status code an attempt
/// ended with, such as `UNAVAILABLE` (see
/// [`code_name`](super::code_name)).
pub const RPC_RESPONSE_STATUS_CODE: &str = "rpc.response.status_code";
/// `server.address`: the host of the dependency's `host:port` address.
pub const SERVER_ADDRESS: &str = "server.address";
/// `server.port`: the port of the dependency's `host:port` address.
pub const SERVER_PORT: &str = "server.port";
/// `error.type`: on a failed attempt, the name of its status code, as the
/// RPC conventions ask when a status code was returned.
pub const ERROR_TYPE: &str = "error.type";

/// `exception`: the span event a [`Server`](crate::grpc::server::Server)
/// records when a handler panics (OpenTelemetry's exception event).
pub const EXCEPTION_EVENT: &str = "exception";
/// `exception.type`: on the [`EXCEPTION_EVENT`] of a handler's panic,
/// [`EXCEPTION_TYPE_PANIC`].
pub const EXCEPTION_TYPE: &str = "exception.type";
/// The [`EXCEPTION_TYPE`] of a handler's panic.
pub const EXCEPTION_TYPE_PANIC: &str = "panic";
/// `exception.message`: on the [`EXCEPTION_EVENT`] of a handler's panic,
/// its payload when it is a string (never sent to the caller).
pub const EXCEPTION_MESSAGE: &str = "exception.message";

/// `rpc.client.call.duration`: a histogram of each attempt's duration, in
/// seconds (unit `s`), from its start to its status (a stream's: from its
/// open to its end).
pub const RPC_CLIENT_CALL_DURATION: &str = "rpc.client.call.duration";

/// `rpc.server.call.duration`: a histogram of each served RPC's duration,
/// in seconds (unit `s`), from its request's arrival to its status (a
/// stream's: to its end).
pub const RPC_SERVER_CALL_DURATION: &str = "rpc.server.call.duration";

/// The value of [`RPC_METHOD`] (and the span's name) for a method the
/// server does not serve, so that a caller's random paths do not become
/// metric series.
pub const RPC_METHOD_OTHER: &str = "_OTHER";

/// `humus.circuit.state`: an observable up-down counter of breakers in
/// each state (unit `{breaker}`), read at each collection. Its attribute is
/// [`HUMUS_CIRCUIT_STATE`].
pub const HUMUS_CIRCUIT_STATE_INSTRUMENT: &str = "humus.circuit.state";
/// `humus.circuit.transitions`: a counter of breaker transitions (unit
/// `{transition}`), by the state entered ([`HUMUS_CIRCUIT_STATE`]).
pub const HUMUS_CIRCUIT_TRANSITIONS: &str = "humus.circuit.transitions";
/// `humus.circuit.calls`: a counter of calls the breaker counted (unit
/// `{call}`), by outcome ([`HUMUS_CIRCUIT_OUTCOME`]).
pub const HUMUS_CIRCUIT_CALLS: &str = "humus.circuit.calls";
/// `humus.retry.decisions`: a counter of retry decisions (unit
/// `{decision}`), by decision ([`HUMUS_RETRY_DECISION`]).
pub const HUMUS_RETRY_DECISIONS: &str = "humus.retry.decisions";

/// Attribute `humus.circuit.state`: a breaker's state, the `Display` of
/// [`circuit::State`](crate::circuit::State) (`closed`, `open`,
/// `half-open`). On `humus.circuit.transitions` and the log record, the
/// state entered.
pub const HUMUS_CIRCUIT_STATE: &str = "humus.circuit.state";
/// Attribute `humus.circuit.outcome`: how a call counted, the `Display` of
/// [`circuit::Outcome`](crate::circuit::Outcome) (`success`, `failure`,
/// `ignored`), or [`REJECTED`], or [`LATE`].
pub const HUMUS_CIRCUIT_OUTCOME: &str = "humus.circuit.outcome";
/// The value of [`HUMUS_CIRCUIT_OUTCOME`] for a call the breaker rejected.
pub const REJECTED: &str = "rejected";
/// The value of [`HUMUS_CIRCUIT_OUTCOME`] for a call whose result the
/// breaker discarded as late: the breaker changed state after admitting
/// it (it opened on other calls' failures meanwhile), so its result,
/// whatever it was, counted nothing ([`Ticket::done`](crate::circuit::Ticket::done)
/// returned `false`).
pub const LATE: &str = "late";
/// Attribute `humus.retry.decision`: the `Display` of
/// [`retry::Decision`](crate::retry::Decision) (`succeeded`, `retried`,
/// `stopped`, `throttled`, `exhausted`, `expired`).
pub const HUMUS_RETRY_DECISION: &str = "humus.retry.decision";

/// The event name of the log record of a breaker transition.
pub const HUMUS_CIRCUIT_TRANSITION_EVENT: &str = "humus.circuit.transition";
/// Log attribute `humus.circuit.previous_state`: the state the breaker left.
pub const HUMUS_CIRCUIT_PREVIOUS_STATE: &str = "humus.circuit.previous_state";
/// Log attribute `humus.circuit.successes`: successes in the window of the
/// state left.
pub const HUMUS_CIRCUIT_SUCCESSES: &str = "humus.circuit.successes";
/// Log attribute `humus.circuit.failures`: failures in the window of the
/// state left.
pub const HUMUS_CIRCUIT_FAILURES: &str = "humus.circuit.failures";
/// Log attribute `humus.circuit.consecutive_successes`: the run of
/// successes the state left ended with.
pub const HUMUS_CIRCUIT_CONSECUTIVE_SUCCESSES: &str = "humus.circuit.consecutive_successes";
/// Log attribute `humus.circuit.consecutive_failures`: the run of failures
/// the state left ended with.
pub const HUMUS_CIRCUIT_CONSECUTIVE_FAILURES: &str = "humus.circuit.consecutive_failures";
/// Log attribute `humus.circuit.timed_out`: probes of the state left that
/// held their slot past the probe timeout.
pub const HUMUS_CIRCUIT_TIMED_OUT: &str = "humus.circuit.timed_out";

/// `http.request.method`: an HTTP attempt's method, `GET`, or `_OTHER` for
/// a method the HTTP semantic conventions do not know (the method itself is
/// then [`HTTP_REQUEST_METHOD_ORIGINAL`]).
pub const HTTP_REQUEST_METHOD: &str = "http.request.method";
/// `http.request.method_original`: the method as sent, when
/// [`HTTP_REQUEST_METHOD`] is `_OTHER`.
pub const HTTP_REQUEST_METHOD_ORIGINAL: &str = "http.request.method_original";
/// `http.response.status_code`: the status code of an attempt's response
/// (an integer).
pub const HTTP_RESPONSE_STATUS_CODE: &str = "http.response.status_code";
/// `http.request.resend_count`: on an attempt after the first, how many
/// attempts came before it (1 on the second).
pub const HTTP_REQUEST_RESEND_COUNT: &str = "http.request.resend_count";
/// `url.full`: the attempt's absolute URL, its user name and password (if
/// any) replaced by `REDACTED`.
pub const URL_FULL: &str = "url.full";
/// `http.client.request.duration`: a histogram of each HTTP attempt's
/// duration, in seconds (unit `s`), from its start to its response's
/// headers or its error.
pub const HTTP_CLIENT_REQUEST_DURATION: &str = "http.client.request.duration";
/// The `error.type` of an HTTP call the breaker rejected (nothing was sent).
pub const HTTP_REJECTED_ERROR_TYPE: &str = "humus::circuit::Rejected";

/// The value of [`ERROR_TYPE`] when no better one is known, such as a
/// processor's error: `_OTHER`, as OpenTelemetry's conventions name it.
pub const OTHER_ERROR_TYPE: &str = "_OTHER";

/// The instrumentation scope of each RabbitMQ delivery's CONSUMER span, of
/// [`MESSAGING_PROCESS_DURATION`], and of the publisher's PRODUCER spans,
/// [`MESSAGING_CLIENT_OPERATION_DURATION`] and
/// [`MESSAGING_CLIENT_SENT_MESSAGES`]: the messaging semantic-convention
/// instrumentation of `humus::rabbitmq` (feature `rabbitmq`).
pub const RABBITMQ_SCOPE: &str = "humus::rabbitmq::otel";
/// `messaging.system`: the messaging system, such as
/// [`MESSAGING_SYSTEM_RABBITMQ`].
pub const MESSAGING_SYSTEM: &str = "messaging.system";
/// The [`MESSAGING_SYSTEM`] of RabbitMQ: `rabbitmq`.
pub const MESSAGING_SYSTEM_RABBITMQ: &str = "rabbitmq";
/// The instrumentation scope of each Kafka record's CONSUMER span, of
/// [`MESSAGING_PROCESS_DURATION`] and of the consumer's log records: the
/// messaging semantic-convention instrumentation of `humus::kafka`
/// (feature `kafka`).
pub const KAFKA_SCOPE: &str = "humus::kafka::otel";
/// The [`MESSAGING_SYSTEM`] of Kafka: `kafka`.
pub const MESSAGING_SYSTEM_KAFKA: &str = "kafka";
/// `messaging.operation.name`: the operation, such as `process`.
pub const MESSAGING_OPERATION_NAME: &str = "messaging.operation.name";
/// `messaging.operation.type`: the kind of operation, such as `process`.
pub const MESSAGING_OPERATION_TYPE: &str = "messaging.operation.type";
/// `messaging.destination.name`: for RabbitMQ, the exchange a message was
/// published to (`""` for the default exchange); for Kafka, the topic.
pub const MESSAGING_DESTINATION_NAME: &str = "messaging.destination.name";
/// `messaging.destination.subscription.name`: what a consumer consumes
/// from; for RabbitMQ, the queue.
pub const MESSAGING_DESTINATION_SUBSCRIPTION_NAME: &str = "messaging.destination.subscription.name";
/// `messaging.message.id`: the message's id, when it has one.
pub const MESSAGING_MESSAGE_ID: &str = "messaging.message.id";
/// `messaging.rabbitmq.destination.routing_key`: the routing key a message
/// was published with, when not empty.
pub const MESSAGING_RABBITMQ_ROUTING_KEY: &str = "messaging.rabbitmq.destination.routing_key";
/// `messaging.rabbitmq.message.delivery_tag`: a delivery's tag on its
/// consumer's channel (an integer).
pub const MESSAGING_RABBITMQ_DELIVERY_TAG: &str = "messaging.rabbitmq.message.delivery_tag";
/// `messaging.process.duration`: a histogram of how long each message took
/// to process, in seconds (unit `s`).
pub const MESSAGING_PROCESS_DURATION: &str = "messaging.process.duration";
/// `messaging.destination.partition.id`: the partition, as a string (`"0"`).
pub const MESSAGING_DESTINATION_PARTITION_ID: &str = "messaging.destination.partition.id";
/// `messaging.consumer.group.name`: the consumer group.
pub const MESSAGING_CONSUMER_GROUP_NAME: &str = "messaging.consumer.group.name";
/// `messaging.kafka.offset`: the record's offset in its partition (an
/// integer).
pub const MESSAGING_KAFKA_OFFSET: &str = "messaging.kafka.offset";
/// `messaging.kafka.message.key`: the record's key, when it is UTF-8 text.
pub const MESSAGING_KAFKA_MESSAGE_KEY: &str = "messaging.kafka.message.key";
/// The event name of the log record of a Kafka record whose processing
/// keeps failing: `humus.kafka.record_held` (its partition is held) or
/// [`HUMUS_KAFKA_DEAD_LETTERED`].
pub const HUMUS_KAFKA_RECORD_HELD: &str = "humus.kafka.record_held";
/// The event name of the log record (and span event) of a Kafka record
/// produced to the dead-letter topic: `humus.kafka.dead_lettered`.
pub const HUMUS_KAFKA_DEAD_LETTERED: &str = "humus.kafka.dead_lettered";
/// How many times the processor has been run for a record so far (an
/// integer), on the consumer's span events and log records.
pub const HUMUS_KAFKA_ATTEMPTS: &str = "humus.kafka.attempts";
/// The event name of the log record (warning) of a RabbitMQ consumer's
/// failed connection attempt, or of its connection lost: what failed, and
/// when it connects again.
pub const HUMUS_RABBITMQ_CONNECTION: &str = "humus.rabbitmq.connection";
/// `messaging.client.operation.duration`: a histogram of how long each
/// publish's attempt took, from its start to the broker's confirm (or its
/// failure), or each Kafka record, from its `send` span's start to its
/// delivery report, in seconds (unit `s`).
pub const MESSAGING_CLIENT_OPERATION_DURATION: &str = "messaging.client.operation.duration";
/// `messaging.client.sent.messages`: a counter of the messages a producer
/// attempted to send to the broker (one per attempt that sent its message),
/// with `error.type` for those that were not confirmed.
pub const MESSAGING_CLIENT_SENT_MESSAGES: &str = "messaging.client.sent.messages";
/// The `messaging.operation.name` of a RabbitMQ publish: `publish`.
pub const MESSAGING_OPERATION_PUBLISH: &str = "publish";
/// The `messaging.operation.type` of a publish: `send`.
pub const MESSAGING_OPERATION_TYPE_SEND: &str = "send";
