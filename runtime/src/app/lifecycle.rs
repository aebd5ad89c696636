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

    /// The App ends with `exit`. The record carries the error, so that a
    /// reader of the log sees what is wrong (the bad variables of a
    /// settings refusal) in the record that says the App exits, not after
    /// it: `exit 78 (a bad setting): LEDGER_ADDR: not set`. The error is
    /// also the caller's to print (an [`Exit`] returned from `main` prints
    /// it, one bad variable a line): an SDK logger provider, shut down by
    /// now, drops this record.
    pub(super) fn exited(&self, exit: &Exit) {
        let code = exit.code();
        let (severity, body) = match exit.error() {
            None => (Severity::Info, format!("exit {code} (stopped)")),
            Some(e) => (
                Severity::Error,
                match e.kind() {
                    super::ErrorKind::Settings => format!("exit {code} (a bad setting): {e}"),
                    super::ErrorKind::Other => format!("exit {code} (an error): {e}"),
                    // Its error says it was stopped at once, and what that
                    // skipped.
                    super::ErrorKind::Forced => format!("exit {code} ({e})"),
                },
            ),
        };
        self.record(HUMUS_APP_EXIT, severity, body);
    }

    fn record(&self, event: &'static str, severity: Severity, body: String) {
        self.logger.event(APP_SCOPE, event, severity, || body);
    }
}
