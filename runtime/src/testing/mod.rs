//! Test support (feature `testing`): an in-memory network ([`Host`]) and a
//! test certificate authority ([`Ca`]), so a gRPC service and its gRPC
//! dependencies run over TLS with no port, no file and no real time
//! ([design](crate::design::client#testing)); and telemetry capture
//! ([`Telemetry`]). The HTTP, Kafka and RabbitMQ clients open their own
//! connections (through reqwest, librdkafka and amqprs), not through the
//! in-memory network: test them against a server on 127.0.0.1 (see
//! [`Host`](crate::Host)).

mod ca;
mod host;
mod telemetry;

pub use ca::{Ca, Issued};
pub use host::{Conn, Host, Listener, TlsConn, TlsListener};
pub use telemetry::{HistogramPoint, MetricPoint, PointValue, Telemetry};
