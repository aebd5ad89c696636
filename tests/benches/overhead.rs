//! Overhead per call: a unary call over loopback TCP to one in-process
//! tonic server, through tonic's generated client over a raw `Channel`
//! (the peer, `tonic`) and through humus's typed client (no-op telemetry,
//! failure injection off, the default settings: `humus`), one call at a
//! time and 64 at once; with the two other clients of `support::PEERS`.
//!
//! humus gives every call a deadline (`Settings::timeout`, 10 s by default):
//! it sends it as `grpc-timeout` and enforces it with a timer. A second
//! peer, `tonic+deadline`, is tonic's client with the same 10 s set on each
//! request (`Request::set_timeout`, which tonic's `Channel` sends and
//! enforces with a timer of its own), so what a deadline costs shows apart.
//! `tonic-generic` is tonic's client again, over a channel built with a
//! connector (`support::tonic_generic_client`): the same code as `tonic`'s,
//! so how far apart the two measure is the noise of the run.
//!
//! Each client's calls are made from a task of the runtime, as a service's
//! handler makes them (not from `block_on`'s thread, which is no worker).
//! criterion measures one client after the other, so the machine's load
//! can move between them: `overhead_interleaved` and `overhead_processes`
//! have the clients take turns, and are the figures to trust.
//!
//! Target (issue 9): humus adds under 5% to the median latency, and loses
//! under 5% of the throughput. Figures in `BENCHMARKS.md`.
//!
//! ```text
//! cargo bench -p humus-tests --bench overhead -- --warm-up-time 1 --measurement-time 3
//! ```

mod support;

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures_util::future::join_all;
use support::{Answer, Dependency, PEERS, Peer};

fn overhead(c: &mut Criterion) {
    let rt = support::runtime(2);
    let _guard = rt.enter();
    let addr = rt.block_on(support::serve(Dependency::new(Answer::Ok)));
    let peers: Vec<Peer> = PEERS
        .iter()
        .map(|name| Peer::new(name, addr).expect("a client of PEERS"))
        .collect();
    for peer in &peers {
        // Connected before any measurement.
        rt.block_on(peer.call());
    }

    for concurrency in [1usize, 64] {
        let mut group = c.benchmark_group(format!("unary/concurrency-{concurrency}"));
        group.throughput(Throughput::Elements(concurrency as u64));
        for (name, peer) in PEERS.iter().zip(&peers) {
            group.bench_function(*name, |b| {
                b.to_async(&rt).iter_custom(|iters| {
                    let peer = peer.clone();
                    async move {
                        tokio::spawn(async move {
                            let started = Instant::now();
                            for _ in 0..iters {
                                join_all((0..concurrency).map(|_| peer.call())).await;
                            }
                            started.elapsed()
                        })
                        .await
                        .expect("no call failed")
                    }
                })
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1));
    targets = overhead
}
criterion_main!(benches);
