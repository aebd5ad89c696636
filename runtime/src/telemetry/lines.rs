//! `LineLogs`: log records as plain lines, on standard error or any writer.

use std::fmt;
use std::io::Write;
use std::sync::{Arc, Mutex};

use opentelemetry::InstrumentationScope;
use opentelemetry::logs::{Logger, LoggerProvider, Severity};

use super::logs::BoxedLogRecord;

/// A logger provider that writes each log record as one plain line: its
/// severity, its instrumentation scope, its body and its attributes as
/// `key=value`, such as
///
/// ```text
/// WARN humus::client: circuit breaker changed from closed to open server.address=ledger server.port=50051 ...
/// ```
///
/// An [`App`](crate::App) given no telemetry function records with one on
/// standard error, so that a new service shows what it does (its
/// lifecycle, its breakers' transitions) before it is given an
/// OpenTelemetry SDK's providers. Give it to
/// [`Builder::logger_provider`](super::Builder::logger_provider) to have
/// the same lines with spans and metrics of your own.
///
/// ```
/// use humus::telemetry::{LineLogs, Telemetry};
///
/// let telemetry = Telemetry::builder().logger_provider(LineLogs::stderr()).build();
/// # let _ = telemetry;
/// ```
#[derive(Clone)]
pub struct LineLogs {
    out: Arc<Mutex<dyn Write + Send>>,
}

impl fmt::Debug for LineLogs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LineLogs")
    }
}

impl LineLogs {
    /// Lines on the process's standard error.
    pub fn stderr() -> LineLogs {
        LineLogs::to(std::io::stderr())
    }

    /// Lines written to `out` (a test's buffer, a file), each with one
    /// `write_all`, then flushed. A write that fails is dropped: logging
    /// never fails the code that logs.
    pub fn to(out: impl Write + Send + 'static) -> LineLogs {
        LineLogs {
            out: Arc::new(Mutex::new(out)),
        }
    }

    /// Writes one line as it is (with its end added).
    pub(crate) fn write_line(&self, line: &str) {
        let mut line = line.to_owned();
        line.push('\n');
        // A writer that panicked mid-line poisons the lock; the lines go on.
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
}

impl LoggerProvider for LineLogs {
    type Logger = LineLogger;

    fn logger_with_scope(&self, scope: InstrumentationScope) -> LineLogger {
        LineLogger {
            logs: self.clone(),
            scope: scope.name().to_owned(),
        }
    }
}

/// The logger of a [`LineLogs`], for one instrumentation scope.
#[derive(Clone, Debug)]
pub struct LineLogger {
    logs: LineLogs,
    scope: String,
}

impl Logger for LineLogger {
    type LogRecord = BoxedLogRecord;

    fn create_log_record(&self) -> BoxedLogRecord {
        BoxedLogRecord::default()
    }

    fn emit(&self, record: BoxedLogRecord) {
        self.logs.write_line(&record.line(&self.scope));
    }

    fn event_enabled(&self, _level: Severity, _target: &str, _name: Option<&str>) -> bool {
        true
    }
}
