//! `Telemetry` for tests: everything a client records, captured in memory
//! with the OpenTelemetry SDK ([design](crate::design::client#testing)).

use std::sync::{Arc, Weak};
use std::time::Duration;

use opentelemetry::propagation::TextMapCompositePropagator;
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::logs::in_memory_exporter::LogDataWithResource;
use opentelemetry_sdk::logs::{InMemoryLogExporter, SdkLoggerProvider};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Temporality,
};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};

/// A [`telemetry::Telemetry`](crate::telemetry::Telemetry) that records
/// everything in memory, for tests to assert on.
///
/// - spans: the SDK's in-memory span exporter behind a simple (synchronous)
///   processor, so a span is readable with [`spans`](Self::spans) as soon as
///   it ends;
/// - metrics: a manual reader with cumulative temporality, read with
///   [`metrics`](Self::metrics) (which collects, so observable instruments
///   such as `humus.circuit.state` are read at that moment);
/// - log records: the SDK's in-memory log exporter behind a simple
///   processor, read with [`logs`](Self::logs);
/// - the propagator: W3C TraceContext and Baggage, as a server extracts
///   them.
///
/// Give [`telemetry`](Self::telemetry) to the `Setup` under test. Clones
/// share what they capture.
///
/// ```
/// use humus::telemetry::{ClientRecorder, names};
///
/// let capture = humus::testing::Telemetry::new();
/// let recorder = ClientRecorder::new(&capture.telemetry(), "ledger:443");
/// recorder.record_decision(humus::retry::Decision::Succeeded);
/// let points = capture.metrics(names::CLIENT_SCOPE);
/// assert!(points.iter().any(|p| p.name == names::HUMUS_RETRY_DECISIONS
///     && p.has(&[("humus.retry.decision", "succeeded"), ("server.port", "443")])));
/// ```
#[derive(Clone, Debug)]
pub struct Telemetry {
    telemetry: crate::telemetry::Telemetry,
    spans: InMemorySpanExporter,
    logs: InMemoryLogExporter,
    reader: Arc<ManualReader>,
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
    logger_provider: SdkLoggerProvider,
}

impl Default for Telemetry {
    fn default() -> Telemetry {
        Telemetry::new()
    }
}

impl Telemetry {
    /// A new capture, with nothing recorded.
    pub fn new() -> Telemetry {
        let spans = InMemorySpanExporter::default();
        let logs = InMemoryLogExporter::default();
        let reader = Arc::new(ManualReader::builder().build());
        let tracer_provider = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        let meter_provider = SdkMeterProvider::builder()
            .with_reader(SharedReader(Arc::clone(&reader)))
            .build();
        let logger_provider = SdkLoggerProvider::builder()
            .with_simple_exporter(logs.clone())
            .build();
        let propagator = TextMapCompositePropagator::new(vec![
            Box::new(TraceContextPropagator::new()),
            Box::new(BaggagePropagator::new()),
        ]);
        let telemetry = crate::telemetry::Telemetry::builder()
            .tracer_provider(tracer_provider.clone())
            .meter_provider(meter_provider.clone())
            .logger_provider(logger_provider.clone())
            .propagator(propagator)
            .build();
        Telemetry {
            telemetry,
            spans,
            logs,
            reader,
            tracer_provider,
            meter_provider,
            logger_provider,
        }
    }

    /// The telemetry to record with: give it to the `Setup` under test.
    pub fn telemetry(&self) -> crate::telemetry::Telemetry {
        self.telemetry.clone()
    }

    /// The SDK tracer provider, such as for a test server's own spans.
    pub fn tracer_provider(&self) -> &SdkTracerProvider {
        &self.tracer_provider
    }

    /// The SDK meter provider.
    pub fn meter_provider(&self) -> &SdkMeterProvider {
        &self.meter_provider
    }

    /// The SDK logger provider.
    pub fn logger_provider(&self) -> &SdkLoggerProvider {
        &self.logger_provider
    }

    /// Every span that has ended, in the order they ended.
    ///
    /// # Panics
    ///
    /// If the tracer provider was shut down (a test's own mistake).
    pub fn spans(&self) -> Vec<SpanData> {
        self.spans
            .get_finished_spans()
            .expect("humus::testing::Telemetry: the tracer provider was shut down")
    }

    /// Every log record emitted, in order, each with its instrumentation
    /// scope.
    ///
    /// # Panics
    ///
    /// If the logger provider was shut down (a test's own mistake).
    pub fn logs(&self) -> Vec<LogDataWithResource> {
        self.logs
            .get_emitted_logs()
            .expect("humus::testing::Telemetry: the logger provider was shut down")
    }

    /// Forgets every span and log record captured so far. Metrics are
    /// cumulative and stay.
    pub fn reset(&self) {
        self.spans.reset();
        self.logs.reset();
    }

    /// Collects every metric now, as the SDK exports them: observable
    /// instruments are read at this moment.
    ///
    /// # Panics
    ///
    /// If the meter provider was shut down (a test's own mistake).
    pub fn collect(&self) -> ResourceMetrics {
        let mut metrics = ResourceMetrics::default();
        self.reader
            .collect(&mut metrics)
            .expect("humus::testing::Telemetry: the meter provider was shut down");
        metrics
    }

    /// Collects every metric now, and returns the names of the
    /// instrumentation scopes that recorded any, in the SDK's order (empty
    /// when nothing was recorded through these providers).
    ///
    /// # Panics
    ///
    /// If the meter provider was shut down (a test's own mistake).
    pub fn metric_scopes(&self) -> Vec<String> {
        self.collect()
            .scope_metrics()
            .map(|s| s.scope().name().to_owned())
            .collect()
    }

    /// Collects every metric now, and returns the data points of the
    /// instrumentation scope named `scope` (such as
    /// [`names::CLIENT_SCOPE`](crate::telemetry::names::CLIENT_SCOPE)), one
    /// per metric and attribute set, flattened for assertions.
    ///
    /// # Panics
    ///
    /// If the meter provider was shut down (a test's own mistake).
    pub fn metrics(&self, scope: &str) -> Vec<MetricPoint> {
        let metrics = self.collect();
        let mut points = Vec::new();
        for scope_metrics in metrics
            .scope_metrics()
            .filter(|s| s.scope().name() == scope)
        {
            for metric in scope_metrics.metrics() {
                flatten(metric, &mut points);
            }
        }
        points
    }
}

fn flatten(metric: &opentelemetry_sdk::metrics::data::Metric, points: &mut Vec<MetricPoint>) {
    let mut push = |attributes: Vec<KeyValue>, value: PointValue| {
        let mut attributes = attributes;
        attributes.sort_by(|a, b| a.key.as_str().cmp(b.key.as_str()));
        points.push(MetricPoint {
            name: metric.name().to_owned(),
            unit: metric.unit().to_owned(),
            attributes,
            value,
        });
    };
    match metric.data() {
        AggregatedMetrics::F64(data) => flatten_data(data, PointValue::F64, &mut push),
        AggregatedMetrics::U64(data) => flatten_data(data, PointValue::U64, &mut push),
        AggregatedMetrics::I64(data) => flatten_data(data, PointValue::I64, &mut push),
    }
}

fn flatten_data<T: Copy + Into<AsF64>>(
    data: &MetricData<T>,
    scalar: fn(T) -> PointValue,
    push: &mut impl FnMut(Vec<KeyValue>, PointValue),
) {
    match data {
        MetricData::Gauge(gauge) => {
            for p in gauge.data_points() {
                push(p.attributes().cloned().collect(), scalar(p.value()));
            }
        }
        MetricData::Sum(sum) => {
            for p in sum.data_points() {
                push(p.attributes().cloned().collect(), scalar(p.value()));
            }
        }
        MetricData::Histogram(histogram) => {
            for p in histogram.data_points() {
                push(
                    p.attributes().cloned().collect(),
                    PointValue::Histogram(HistogramPoint {
                        count: p.count(),
                        sum: p.sum().into().0,
                        min: p.min().map(|v| v.into().0),
                        max: p.max().map(|v| v.into().0),
                        bounds: p.bounds().collect(),
                        bucket_counts: p.bucket_counts().collect(),
                    }),
                );
            }
        }
        MetricData::ExponentialHistogram(histogram) => {
            for p in histogram.data_points() {
                push(
                    p.attributes().cloned().collect(),
                    PointValue::Histogram(HistogramPoint {
                        count: p.count() as u64,
                        sum: p.sum().into().0,
                        min: p.min().map(|v| v.into().0),
                        max: p.max().map(|v| v.into().0),
                        bounds: Vec::new(),
                        bucket_counts: Vec::new(),
                    }),
                );
            }
        }
    }
}

/// A number as `f64`, for a histogram's sum, min and max of any type.
struct AsF64(f64);

impl From<f64> for AsF64 {
    fn from(v: f64) -> AsF64 {
        AsF64(v)
    }
}

impl From<u64> for AsF64 {
    fn from(v: u64) -> AsF64 {
        AsF64(v as f64)
    }
}

impl From<i64> for AsF64 {
    fn from(v: i64) -> AsF64 {
        AsF64(v as f64)
    }
}

/// One data point of one metric, as [`Telemetry::metrics`] returns them.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricPoint {
    /// The instrument's name, such as `humus.circuit.calls`.
    pub name: String,
    /// The instrument's unit, such as `s` or `{call}`.
    pub unit: String,
    /// The point's attributes, sorted by key.
    pub attributes: Vec<KeyValue>,
    /// The point's value.
    pub value: PointValue,
}

impl MetricPoint {
    /// The value of the attribute `key`, if the point has it.
    pub fn attribute(&self, key: &str) -> Option<&Value> {
        self.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| &kv.value)
    }

    /// Whether the point has every attribute of `attributes`, each value
    /// compared as text (`("server.port", "443")` matches the integer 443).
    pub fn has(&self, attributes: &[(&str, &str)]) -> bool {
        attributes.iter().all(|(key, value)| {
            self.attribute(key)
                .is_some_and(|actual| actual.as_str() == *value)
        })
    }
}

/// The value of a [`MetricPoint`].
#[derive(Clone, Debug, PartialEq)]
pub enum PointValue {
    /// A sum's or gauge's `i64` value.
    I64(i64),
    /// A sum's or gauge's `u64` value.
    U64(u64),
    /// A sum's or gauge's `f64` value.
    F64(f64),
    /// A histogram's point.
    Histogram(HistogramPoint),
}

impl PointValue {
    /// A sum's or gauge's value as `f64`; for a histogram, its count.
    pub fn as_f64(&self) -> f64 {
        match self {
            PointValue::I64(v) => *v as f64,
            PointValue::U64(v) => *v as f64,
            PointValue::F64(v) => *v,
            PointValue::Histogram(h) => h.count as f64,
        }
    }
}

/// One histogram data point.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramPoint {
    /// How many values were recorded.
    pub count: u64,
    /// Their sum.
    pub sum: f64,
    /// The smallest, if recorded.
    pub min: Option<f64>,
    /// The largest, if recorded.
    pub max: Option<f64>,
    /// The upper bounds of the buckets but the last (empty for an
    /// exponential histogram).
    pub bounds: Vec<f64>,
    /// The count of each bucket, one more than `bounds`.
    pub bucket_counts: Vec<u64>,
}

/// A manual reader the capture keeps a handle on after the meter provider
/// takes it.
#[derive(Debug)]
struct SharedReader(Arc<ManualReader>);

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline)
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
