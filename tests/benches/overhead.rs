//! Overhead per call: a unary call over loopback TCP to one in-process
//! tonic server, through tonic's generated client over a raw `Channel`
//! (the peer, `tonic`) and through humus's typed client (no-op telemetry,
//! failure injection off, the default settings: `humus`), one call at a
//! time and 64 at once.
//!
//! humus gives every call a deadline (`Settings::timeout`, 10 s by default):
//! it sends it as `grpc-timeout` and enforces it with a timer. A second
//! peer, `tonic+deadline`, is tonic's client with the same 10 s set on each
//! request (`Request::set_timeout`, which tonic's `Channel` sends and
//! enforces the same way), so what humus adds beyond a deadline shows apart.
//!
//! Target (issue 9): humus adds under 5% to the median latency, and loses
//! under 5% of the throughput. Figures in `BENCHMARKS.md`.
//!
//! ```text
//! cargo bench -p humus-tests --bench overhead -- --warm-up-time 1 --measurement-time 3
//! ```

mod support;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures_util::future::join_all;
use humus::grpc::client::Settings;
use humus_tests::grpc_proto::grpc::testing::SimpleRequest;
use support::{Answer, Dependency};

fn overhead(c: &mut Criterion) {
    let rt = support::runtime(2);
    let _guard = rt.enter();
    let addr = rt.block_on(support::serve(Dependency::new(Answer::Ok)));
    let tonic = support::tonic_client(addr);
    let humus = support::humus_client(addr, Settings::default());
    // Both connected before measuring.
    rt.block_on(async {
        tonic
            .clone()
            .unary_call(SimpleRequest::default())
            .await
            .expect("tonic reaches the server");
        humus
            .unary_call(SimpleRequest::default())
            .await
            .expect("humus reaches the server");
    });

    for concurrency in [1usize, 64] {
        let mut group = c.benchmark_group(format!("unary/concurrency-{concurrency}"));
        group.throughput(Throughput::Elements(concurrency as u64));
        group.bench_function("tonic", |b| {
            b.to_async(&rt).iter(|| {
                join_all((0..concurrency).map(|_| {
                    let mut tonic = tonic.clone();
                    async move {
                        black_box(
                            tonic
                                .unary_call(SimpleRequest::default())
                                .await
                                .expect("OK"),
                        )
                    }
                }))
            })
        });
        group.bench_function("tonic+deadline", |b| {
            b.to_async(&rt).iter(|| {
                join_all((0..concurrency).map(|_| {
                    let mut tonic = tonic.clone();
                    async move {
                        let mut request = tonic::Request::new(SimpleRequest::default());
                        request.set_timeout(Duration::from_secs(10));
                        black_box(tonic.unary_call(request).await.expect("OK"))
                    }
                }))
            })
        });
        group.bench_function("humus", |b| {
            b.to_async(&rt).iter(|| {
                join_all((0..concurrency).map(|_| async {
                    black_box(
                        humus
                            .unary_call(SimpleRequest::default())
                            .await
                            .expect("OK"),
                    )
                }))
            })
        });
        group.finish();
    }
}

criterion_group!(benches, overhead);
criterion_main!(benches);
