//! `Setup`: what every humus client is built from.
//!
//! PLACEHOLDER: `Host`, `OsHost` and on-stop hooks land with issue 4.

use crate::{fault, telemetry};

/// What a service's clients are built from: its telemetry, its failure
/// injector, the host it dials through, and its on-stop hooks.
#[derive(Clone, Debug, Default)]
pub struct Setup {
    telemetry: telemetry::Telemetry,
    faults: fault::Injector,
}

impl Setup {
    /// The telemetry every client of this setup records with.
    pub fn telemetry(&self) -> &telemetry::Telemetry {
        &self.telemetry
    }

    /// The failure injector every client of this setup evaluates.
    pub fn faults(&self) -> &fault::Injector {
        &self.faults
    }
}
