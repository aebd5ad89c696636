//! Test support (feature `testing`): an in-memory network ([`Host`]) and a
//! test certificate authority ([`Ca`]), so a whole service and its
//! dependencies run over TLS with no port, no file and no real time
//! ([design](crate::design::client#testing)); and telemetry capture ([`Telemetry`]).

mod ca;
mod host;
mod telemetry;

pub use ca::{Ca, Issued};
pub use host::{Conn, Host, Listener, TlsConn, TlsListener};
pub use telemetry::{HistogramPoint, MetricPoint, PointValue, Telemetry};
