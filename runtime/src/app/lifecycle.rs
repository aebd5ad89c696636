//! The App's log records of its lifecycle: each server it serves, a stop
//! signal, its exit.

use std::net::SocketAddr;

use opentelemetry::InstrumentationScope;
use opentelemetry::logs::Severity;

use super::Exit;
use crate::telemetry::names::{APP_SCOPE, HUMUS_APP_EXIT, HUMUS_APP_SERVING, HUMUS_APP_STOPPING};
use crate::telemetry::{BoxedLogger, Telemetry};

/// Records an App's lifecycle with its telemetry's logger: as plain lines
/// on standard error for an App given no telemetry function
/// ([`LineLogs`](crate::telemetry::LineLogs)), as OpenTelemetry log
/// records for one given providers.
pub(super) struct Lifecycle {
    logger: BoxedLogger,
}

impl Lifecycle {
    pub(super) fn new(telemetry: &Telemetry) -> Lifecycle {
        Lifecycle {
            logger: telemetry.logger(
                InstrumentationScope::builder(APP_SCOPE)
                    .with_version(env!("CARGO_PKG_VERSION"))
                    .build(),
            ),
        }
    }

    /// A server listens on `addr` and serves.
    pub(super) fn serving(&self, addr: SocketAddr) {
        self.record(
            HUMUS_APP_SERVING,
            Severity::Info,
            format!("serving on {addr}"),
        );
    }

    /// A stop signal came: the first (`at_once` false), or one that
    /// forces the stop.
    pub(super) fn stopping(&self, at_once: bool) {
        let body = if at_once {
            "stopping at once: a second stop signal"
        } else {
            "stopping: a stop signal"
        };
        self.record(HUMUS_APP_STOPPING, Severity::Info, body.to_owned());
    }

    /// The App ends with `exit`; its error is the caller's to print (an
    /// [`Exit`] returned from `main` prints it).
    pub(super) fn exited(&self, exit: &Exit) {
        let (severity, why) = match exit.error() {
            None => (Severity::Info, "stopped"),
            Some(e) => (
                Severity::Error,
                match e.kind() {
                    super::ErrorKind::Settings => "a bad setting",
                    super::ErrorKind::Other => "an error",
                    super::ErrorKind::Forced => "stopped at once by a second stop signal",
                },
            ),
        };
        self.record(
            HUMUS_APP_EXIT,
            severity,
            format!("exit {} ({why})", exit.code()),
        );
    }

    fn record(&self, event: &'static str, severity: Severity, body: String) {
        self.logger.event(APP_SCOPE, event, severity, || body);
    }
}
