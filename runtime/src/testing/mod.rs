//! Test support (feature `testing`): an in-memory network, a test CA and
//! telemetry capture.
//!
//! PLACEHOLDER: lands with issues 4 and 6.

mod telemetry;
pub use telemetry::{HistogramPoint, MetricPoint, PointValue, Telemetry};
