//! Telemetry: the OpenTelemetry providers and propagator humus records
//! with (seed 000, "Telemetry"). Nothing reaches OpenTelemetry's globals.
//!
//! PLACEHOLDER: providers, instruments and log records land with issue 6.

/// The tracer, meter and logger providers and the propagator a
/// [`Setup`](crate::Setup) records with. The default records nothing.
#[derive(Clone, Debug, Default)]
pub struct Telemetry {
    _private: (),
}
