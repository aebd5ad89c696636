//! What the client's telemetry costs on a whole unary call: one call of
//! `carts` through a humus `Client` over the testing Host's in-memory
//! network, with TLS, with no-op `Telemetry` against the OpenTelemetry SDK
//! recording everything (`humus::testing::Telemetry`: in-memory span and
//! log exporters behind simple processors, a manual metric reader). The
//! caller's context has a span and baggage in both, so the difference is
//! the attempt's span, its propagation, `rpc.client.call.duration` and
//! humus's counters.
//!
//! Run: `cargo bench -p humus --bench client -- --warm-up-time 1 --measurement-time 3`

#[path = "../tests/client_support/mod.rs"]
mod client_support;

use std::time::{Duration, Instant};

use client_support::*;
use criterion::{Criterion, criterion_group, criterion_main};
use humus::grpc::client::Client;
use humus::testing::{Ca, Host, Telemetry};
use opentelemetry::baggage::BaggageExt;
use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Context, KeyValue};
use tonic::Response;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let capture = Telemetry::new();
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let (_server, noop, sdk) = rt.block_on(async {
        let server = start_carts(&host, &ca, &carts);
        let noop = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
        let sdk = Client::new(
            &setup(&host).with_telemetry(capture.telemetry()),
            carts_settings(&ca),
        )
        .unwrap();
        (server, noop, sdk)
    });
    let caller = capture.tracer_provider().tracer("caller").start("caller");
    let cx = Context::new()
        .with_span(caller)
        .with_baggage([KeyValue::new("tenant", "acme")]);

    // Each sample forgets the spans it made, outside the timing, so the
    // in-memory exporter doesn't grow through the run.
    let timed = |client: &Client, iters: u64| {
        let elapsed: Duration = rt.block_on(async {
            let start = Instant::now();
            for _ in 0..iters {
                let mut request = get("c-1");
                request.extensions_mut().insert(cx.clone());
                let cart: Response<Cart> = client.unary(&GET_CART, request).await.unwrap();
                std::hint::black_box(cart);
            }
            start.elapsed()
        });
        capture.reset();
        elapsed
    };

    let mut group = c.benchmark_group("client/unary");
    group.bench_function("noop", |b| b.iter_custom(|n| timed(&noop, n)));
    group.bench_function("sdk", |b| b.iter_custom(|n| timed(&sdk, n)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
