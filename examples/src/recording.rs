//! OpenTelemetry SDK providers that keep everything in memory: what the
//! walkthrough reads its table and its timeline from.
//!
//! A service in production gives its `humus::telemetry::Telemetry` SDK
//! providers that export (OTLP, Prometheus); the walkthrough gives it the
//! same SDK providers with in-memory exporters and a manual metric reader,
//! so it reads back exactly what an exporter would have sent:
//!
//! - spans: the SDK's in-memory span exporter behind a simple (synchronous)
//!   processor, so a span is readable as soon as it ends;
//! - metrics: a manual reader with cumulative temporality; each
//!   [`collect`](Recording::collect) reads the observable instruments (such
//!   as `humus.circuit.state`) at that moment;
//! - log records: the SDK's in-memory log exporter behind a simple
//!   processor (the breaker's transitions).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opentelemetry::logs::AnyValue;
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::logs::in_memory_exporter::LogDataWithResource;
use opentelemetry_sdk::logs::{InMemoryLogExporter, SdkLoggerProvider};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Temporality,
};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};

/// SDK tracer, meter and logger providers recording in memory. Clones
/// share what they record.
#[derive(Clone, Debug)]
pub struct Recording {
    spans: InMemorySpanExporter,
    logs: InMemoryLogExporter,
    reader: Arc<ManualReader>,
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
    logger_provider: SdkLoggerProvider,
}

impl Default for Recording {
    fn default() -> Recording {
        Recording::new()
    }
}

impl Recording {
    /// New providers, with nothing recorded.
    pub fn new() -> Recording {
        let spans = InMemorySpanExporter::default();
        let logs = InMemoryLogExporter::default();
        let reader = Arc::new(ManualReader::builder().build());
        Recording {
            tracer_provider: SdkTracerProvider::builder()
                .with_simple_exporter(spans.clone())
                .build(),
            meter_provider: SdkMeterProvider::builder()
                .with_reader(SharedReader(Arc::clone(&reader)))
                .build(),
            logger_provider: SdkLoggerProvider::builder()
                .with_simple_exporter(logs.clone())
                .build(),
            spans,
            logs,
            reader,
        }
    }

    /// The tracer provider.
    pub fn tracer_provider(&self) -> &SdkTracerProvider {
        &self.tracer_provider
    }

    /// The meter provider.
    pub fn meter_provider(&self) -> &SdkMeterProvider {
        &self.meter_provider
    }

    /// The logger provider.
    pub fn logger_provider(&self) -> &SdkLoggerProvider {
        &self.logger_provider
    }

    /// Every span that has ended, in the order they ended.
    pub fn spans(&self) -> Vec<SpanData> {
        // Fails only after a shutdown, which only `Drop` does.
        self.spans.get_finished_spans().unwrap_or_default()
    }

    /// Every log record emitted, in order.
    pub fn logs(&self) -> Vec<LogDataWithResource> {
        self.logs.get_emitted_logs().unwrap_or_default()
    }

    /// Collects every metric now, flattened to one [`Point`] per
    /// instrument and attribute set.
    pub fn collect(&self) -> Metrics {
        let mut metrics = ResourceMetrics::default();
        // Fails only after a shutdown, which only `Drop` does.
        let _ = self.reader.collect(&mut metrics);
        let mut points = Vec::new();
        for scope in metrics.scope_metrics() {
            for metric in scope.metrics() {
                flatten(scope.scope().name(), metric, &mut points);
            }
        }
        Metrics { points }
    }
}

/// One collection of every metric.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    /// One per instrument and attribute set.
    pub points: Vec<Point>,
}

impl Metrics {
    /// The sum of the values (a histogram's: its counts) of `instrument`'s
    /// points in `scope` whose attributes include every one of `attrs`.
    pub fn sum(&self, scope: &str, instrument: &str, attrs: &[(&str, &str)]) -> f64 {
        self.points
            .iter()
            .filter(|p| p.scope == scope && p.name == instrument && p.has(attrs))
            .map(|p| p.value)
            .sum()
    }

    /// `instrument`'s values in `scope` by the value of the attribute
    /// `key`, summed over the other attributes.
    pub fn by(&self, scope: &str, instrument: &str, key: &str) -> BTreeMap<String, f64> {
        self.by_where(scope, instrument, key, &[])
    }

    /// [`by`](Metrics::by), of the points whose attributes include every
    /// one of `attrs` alone.
    pub fn by_where(
        &self,
        scope: &str,
        instrument: &str,
        key: &str,
        attrs: &[(&str, &str)],
    ) -> BTreeMap<String, f64> {
        let mut by = BTreeMap::new();
        for p in self
            .points
            .iter()
            .filter(|p| p.scope == scope && p.name == instrument && p.has(attrs))
        {
            if let Some(v) = p.attribute(key) {
                *by.entry(v.as_str().into_owned()).or_default() += p.value;
            }
        }
        by
    }
}

/// One data point of one metric, flattened.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The instrumentation scope's name.
    pub scope: String,
    /// The instrument's name, such as `humus.circuit.calls`.
    pub name: String,
    /// The point's attributes.
    pub attributes: Vec<KeyValue>,
    /// A sum's or gauge's value; a histogram's count.
    pub value: f64,
}

impl Point {
    /// The value of the attribute `key`, if the point has it.
    pub fn attribute(&self, key: &str) -> Option<&Value> {
        self.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| &kv.value)
    }

    /// Whether the point has every attribute of `attrs`, each value
    /// compared as text.
    pub fn has(&self, attrs: &[(&str, &str)]) -> bool {
        attrs
            .iter()
            .all(|(k, v)| self.attribute(k).is_some_and(|got| got.as_str() == *v))
    }
}

fn flatten(scope: &str, metric: &opentelemetry_sdk::metrics::data::Metric, out: &mut Vec<Point>) {
    let mut push = |attributes: Vec<KeyValue>, value: f64| {
        out.push(Point {
            scope: scope.to_owned(),
            name: metric.name().to_owned(),
            attributes,
            value,
        });
    };
    match metric.data() {
        AggregatedMetrics::F64(data) => flatten_data(data, |v| v, &mut push),
        AggregatedMetrics::U64(data) => flatten_data(data, |v| v as f64, &mut push),
        AggregatedMetrics::I64(data) => flatten_data(data, |v| v as f64, &mut push),
    }
}

fn flatten_data<T: Copy>(
    data: &MetricData<T>,
    as_f64: fn(T) -> f64,
    push: &mut impl FnMut(Vec<KeyValue>, f64),
) {
    match data {
        MetricData::Gauge(gauge) => {
            for p in gauge.data_points() {
                push(p.attributes().cloned().collect(), as_f64(p.value()));
            }
        }
        MetricData::Sum(sum) => {
            for p in sum.data_points() {
                push(p.attributes().cloned().collect(), as_f64(p.value()));
            }
        }
        MetricData::Histogram(histogram) => {
            for p in histogram.data_points() {
                push(p.attributes().cloned().collect(), p.count() as f64);
            }
        }
        MetricData::ExponentialHistogram(histogram) => {
            for p in histogram.data_points() {
                push(p.attributes().cloned().collect(), p.count() as f64);
            }
        }
    }
}

/// The manual reader, shared between the meter provider (which owns its
/// reader) and the [`Recording`] (which collects through it).
#[derive(Debug)]
struct SharedReader(Arc<ManualReader>);

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: std::sync::Weak<Pipeline>) {
        self.0.register_pipeline(pipeline);
    }

    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

/// A span's duration (zero if its clock went backwards).
pub fn span_duration(span: &SpanData) -> Duration {
    span.end_time
        .duration_since(span.start_time)
        .unwrap_or_default()
}

/// The value of a span's attribute `key`, as text.
pub fn span_attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.as_str().into_owned())
}

/// The value of a log record's attribute `key`, as text.
pub fn log_attribute(log: &LogDataWithResource, key: &str) -> Option<String> {
    log.record
        .attributes_iter()
        .find(|(k, _)| k.as_str() == key)
        .map(|(_, v)| match v {
            AnyValue::String(s) => s.as_str().to_owned(),
            AnyValue::Int(i) => i.to_string(),
            AnyValue::Double(d) => d.to_string(),
            AnyValue::Boolean(b) => b.to_string(),
            other => format!("{other:?}"),
        })
}

/// When a log record happened: its timestamp, else when it was observed.
pub fn log_time(log: &LogDataWithResource) -> Option<SystemTime> {
    log.record
        .timestamp()
        .or_else(|| log.record.observed_timestamp())
}
