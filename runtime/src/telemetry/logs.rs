//! An object-safe logger over any `opentelemetry::logs::LoggerProvider`.
//!
//! OpenTelemetry's logs bridge API has no boxed logger (its `LogRecord`
//! trait has generic methods), so [`Telemetry`](super::Telemetry) keeps its
//! logger provider behind a small trait of its own: a record is built as an
//! owned [`BoxedLogRecord`] and copied into the provider's record on `emit`.

use std::borrow::Cow;
use std::fmt;
use std::time::SystemTime;

use opentelemetry::logs::{AnyValue, LogRecord, Logger, LoggerProvider, Severity};
use opentelemetry::trace::{SpanId, TraceFlags, TraceId};
use opentelemetry::{InstrumentationScope, Key};

/// A [`LoggerProvider`] behind a trait object.
pub(crate) trait ObjectSafeLoggerProvider: Send + Sync {
    fn boxed_logger(&self, scope: InstrumentationScope) -> Box<dyn ObjectSafeLogger>;
}

impl<P> ObjectSafeLoggerProvider for P
where
    P: LoggerProvider + Send + Sync,
    P::Logger: Send + Sync + 'static,
{
    fn boxed_logger(&self, scope: InstrumentationScope) -> Box<dyn ObjectSafeLogger> {
        Box::new(self.logger_with_scope(scope))
    }
}

/// A [`Logger`] behind a trait object: it takes an owned record.
pub(crate) trait ObjectSafeLogger: Send + Sync {
    fn emit_boxed(&self, record: BoxedLogRecord);
    fn event_enabled_boxed(&self, level: Severity, target: &str, name: Option<&str>) -> bool;
}

impl<L> ObjectSafeLogger for L
where
    L: Logger + Send + Sync,
{
    fn emit_boxed(&self, record: BoxedLogRecord) {
        let mut target = self.create_log_record();
        record.copy_into(&mut target);
        self.emit(target);
    }

    fn event_enabled_boxed(&self, level: Severity, target: &str, name: Option<&str>) -> bool {
        self.event_enabled(level, target, name)
    }
}

/// A logger of any provider a [`Telemetry`](super::Telemetry) was built
/// with, from [`Telemetry::logger`](super::Telemetry::logger). Without a
/// logger provider it drops every record and reports every event disabled.
pub struct BoxedLogger(Option<Box<dyn ObjectSafeLogger>>);

impl BoxedLogger {
    pub(crate) fn new(inner: Option<Box<dyn ObjectSafeLogger>>) -> BoxedLogger {
        BoxedLogger(inner)
    }

    /// Whether this logger records anything at all (false for the no-op
    /// one), so a caller can skip building a record.
    pub fn is_noop(&self) -> bool {
        self.0.is_none()
    }

    /// Emits a record of the event `event` of the scope `scope`, stamped
    /// now, with `severity` and the text `body`, when the logger records
    /// it (`body` is built only then).
    pub(crate) fn event(
        &self,
        scope: &'static str,
        event: &'static str,
        severity: Severity,
        body: impl FnOnce() -> String,
    ) {
        if let Some(record) = self.event_record(scope, event, severity, body) {
            self.emit(record);
        }
    }

    /// The record [`event`](Self::event) emits, for the caller to add to
    /// (attributes, a trace context) and emit; `None` when the logger does
    /// not record it (`body` is built only otherwise).
    pub(crate) fn event_record(
        &self,
        scope: &'static str,
        event: &'static str,
        severity: Severity,
        body: impl FnOnce() -> String,
    ) -> Option<BoxedLogRecord> {
        if self.is_noop() || !self.event_enabled(severity, scope, Some(event)) {
            return None;
        }
        let mut record = self.create_log_record();
        record.set_event_name(event);
        record.set_timestamp(SystemTime::now());
        record.set_severity_number(severity);
        record.set_severity_text(severity.name());
        record.set_body(AnyValue::from(body()));
        Some(record)
    }
}

impl fmt::Debug for BoxedLogger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "BoxedLogger"
        } else {
            "BoxedLogger(no-op)"
        })
    }
}

impl Logger for BoxedLogger {
    type LogRecord = BoxedLogRecord;

    fn create_log_record(&self) -> BoxedLogRecord {
        BoxedLogRecord::default()
    }

    fn emit(&self, record: BoxedLogRecord) {
        if let Some(logger) = &self.0 {
            logger.emit_boxed(record);
        }
    }

    fn event_enabled(&self, level: Severity, target: &str, name: Option<&str>) -> bool {
        match &self.0 {
            Some(logger) => logger.event_enabled_boxed(level, target, name),
            None => false,
        }
    }
}

/// An owned log record, as [`BoxedLogger`] creates them. Every field is
/// copied into the provider's own record when it is emitted.
#[derive(Clone, Debug, Default)]
pub struct BoxedLogRecord {
    event_name: Option<&'static str>,
    target: Option<Cow<'static, str>>,
    timestamp: Option<SystemTime>,
    observed_timestamp: Option<SystemTime>,
    severity_text: Option<&'static str>,
    severity_number: Option<Severity>,
    body: Option<AnyValue>,
    attributes: Vec<(Key, AnyValue)>,
    trace_context: Option<(TraceId, SpanId, Option<TraceFlags>)>,
}

impl BoxedLogRecord {
    /// The record as one plain line, without its end: its severity, the
    /// scope it was recorded in, its body, then each attribute as
    /// `key=value` (quoted when it holds a space, a quote or an `=`).
    pub(super) fn line(&self, scope: &str) -> String {
        let severity = self
            .severity_text
            .or_else(|| self.severity_number.map(|s| s.name()))
            .unwrap_or("INFO");
        let mut line = format!("{severity} {scope}:");
        if let Some(body) = &self.body {
            line.push(' ');
            line.push_str(&plain(body));
        }
        for (key, value) in &self.attributes {
            line.push(' ');
            line.push_str(key.as_str());
            line.push('=');
            let value = plain(value);
            if value.is_empty() || value.contains([' ', '"', '=']) {
                line.push_str(&format!("{value:?}"));
            } else {
                line.push_str(&value);
            }
        }
        // One record, one line.
        line.replace('\n', " ")
    }

    /// Puts the record in the trace of the span in `cx`, when it has one.
    pub(crate) fn set_trace_of(&mut self, cx: &opentelemetry::Context) {
        use opentelemetry::trace::TraceContextExt as _;
        let span = cx.span();
        let span_context = span.span_context();
        if span_context.is_valid() {
            self.trace_context = Some((
                span_context.trace_id(),
                span_context.span_id(),
                Some(span_context.trace_flags()),
            ));
        }
    }

    fn copy_into<R: LogRecord>(self, target: &mut R) {
        if let Some(name) = self.event_name {
            target.set_event_name(name);
        }
        if let Some(t) = self.target {
            target.set_target(t);
        }
        if let Some(t) = self.timestamp {
            target.set_timestamp(t);
        }
        if let Some(t) = self.observed_timestamp {
            target.set_observed_timestamp(t);
        }
        if let Some(text) = self.severity_text {
            target.set_severity_text(text);
        }
        if let Some(number) = self.severity_number {
            target.set_severity_number(number);
        }
        if let Some(body) = self.body {
            target.set_body(body);
        }
        if !self.attributes.is_empty() {
            target.add_attributes(self.attributes);
        }
        if let Some((trace_id, span_id, flags)) = self.trace_context {
            target.set_trace_context(trace_id, span_id, flags);
        }
    }
}

impl LogRecord for BoxedLogRecord {
    fn set_event_name(&mut self, name: &'static str) {
        self.event_name = Some(name);
    }

    fn set_target<T>(&mut self, target: T)
    where
        T: Into<Cow<'static, str>>,
    {
        self.target = Some(target.into());
    }

    fn set_timestamp(&mut self, timestamp: SystemTime) {
        self.timestamp = Some(timestamp);
    }

    fn set_observed_timestamp(&mut self, timestamp: SystemTime) {
        self.observed_timestamp = Some(timestamp);
    }

    fn set_severity_text(&mut self, text: &'static str) {
        self.severity_text = Some(text);
    }

    fn set_severity_number(&mut self, number: Severity) {
        self.severity_number = Some(number);
    }

    fn set_body(&mut self, body: AnyValue) {
        self.body = Some(body);
    }

    fn add_attributes<I, K, V>(&mut self, attributes: I)
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<Key>,
        V: Into<AnyValue>,
    {
        self.attributes
            .extend(attributes.into_iter().map(|(k, v)| (k.into(), v.into())));
    }

    fn add_attribute<K, V>(&mut self, key: K, value: V)
    where
        K: Into<Key>,
        V: Into<AnyValue>,
    {
        self.attributes.push((key.into(), value.into()));
    }

    fn set_trace_context(
        &mut self,
        trace_id: TraceId,
        span_id: SpanId,
        trace_flags: Option<TraceFlags>,
    ) {
        self.trace_context = Some((trace_id, span_id, trace_flags));
    }
}

/// A value as plain text: a string as it is, a number or a boolean as
/// Rust writes it, anything else as its debug form.
fn plain(value: &AnyValue) -> String {
    match value {
        AnyValue::String(s) => s.as_str().to_owned(),
        AnyValue::Int(i) => i.to_string(),
        AnyValue::Double(d) => d.to_string(),
        AnyValue::Boolean(b) => b.to_string(),
        other => format!("{other:?}"),
    }
}
