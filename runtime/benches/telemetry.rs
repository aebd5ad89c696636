//! What the client's telemetry costs per attempt: the recorder with no-op
//! `Telemetry` against the OpenTelemetry SDK recording everything
//! (`humus::testing::Telemetry`: in-memory span and log exporters behind
//! simple processors, a manual metric reader).
//!
//! Run: `cargo bench -p humus --bench telemetry -- --warm-up-time 1 --measurement-time 3`
//!
//! The full version of this benchmark, a unary call over the in-memory
//! network with each telemetry, needs the client's attempt loop.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use humus::circuit::Outcome;
use humus::retry::Decision;
use humus::telemetry::{ClientRecorder, Telemetry};
use opentelemetry::baggage::BaggageExt;
use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Context, KeyValue};
use tonic::metadata::MetadataMap;

const METHOD: &str = "/ledger.v1.Ledger/Transfer";

/// One admitted attempt as the client loop records it.
fn attempt(recorder: &ClientRecorder, cx: &Context) {
    let attempt = recorder.start_attempt(cx, METHOD);
    let mut metadata = MetadataMap::new();
    attempt.inject(&mut metadata);
    black_box(&metadata);
    attempt.end(None);
    recorder.record_call(Outcome::Success);
    recorder.record_decision(Decision::Succeeded);
}

/// One attempt the breaker rejects.
fn rejected(recorder: &ClientRecorder, cx: &Context) {
    recorder.record_rejected(cx, METHOD, "circuit: call rejected: open for another 4.2s");
    recorder.record_decision(Decision::Stopped);
}

fn bench(c: &mut Criterion) {
    let capture = humus::testing::Telemetry::new();
    let caller = capture.tracer_provider().tracer("caller").start("caller");
    let cx = Context::new()
        .with_span(caller)
        .with_baggage([KeyValue::new("tenant", "acme")]);
    let noop = ClientRecorder::new(&Telemetry::default(), "ledger:443");
    let sdk = ClientRecorder::new(&capture.telemetry(), "ledger:443");
    let _registration = sdk.register_breaker(|| humus::circuit::State::Closed);

    // Each sample forgets the spans it made, outside the timing, so the
    // in-memory exporter doesn't grow through the run.
    let timed = |recorder: &ClientRecorder, f: fn(&ClientRecorder, &Context), iters: u64| {
        let start = Instant::now();
        for _ in 0..iters {
            f(recorder, &cx);
        }
        let elapsed: Duration = start.elapsed();
        capture.reset();
        elapsed
    };

    let mut group = c.benchmark_group("telemetry/attempt");
    group.bench_function("noop", |b| b.iter_custom(|n| timed(&noop, attempt, n)));
    group.bench_function("sdk", |b| b.iter_custom(|n| timed(&sdk, attempt, n)));
    group.finish();

    let mut group = c.benchmark_group("telemetry/rejected");
    group.bench_function("noop", |b| b.iter_custom(|n| timed(&noop, rejected, n)));
    group.bench_function("sdk", |b| b.iter_custom(|n| timed(&sdk, rejected, n)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
