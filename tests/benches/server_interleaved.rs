//! The server half's overhead per call, interleaved: one unary call
//! (`grpc.testing.TestService/UnaryCall`, answered at once) through
//! `humus::grpc::server::Server` against the same generated service on bare
//! `tonic::transport::Server`, and a control (a second bare tonic server:
//! how far it measures from the first is the run's noise). Each server has
//! its own client, tonic's generated client over its own connection, so
//! only the server differs. The humus server does all it does per RPC:
//! the extraction with a W3C trace-context and baggage propagator, the
//! scenario check with failure injection on, a SERVER span through a no-op
//! tracer provider, `rpc.server.call.duration` through a no-op meter
//! provider, and the handler in its RPC's inherited scope. A fourth row,
//! `humus (bare Setup)`, is the humus server of a default `Setup` (no
//! provider, no propagator, injection off), which skips that work.
//!
//! The servers take turns, call by call (one at a time) and batch by batch
//! (64 at once), so that a load that changes during the run slows them all
//! alike. The order of the turns is drawn afresh every round
//! (`support::turns::Turns`: a permutation from a fixed-seed generator, the
//! same in every run), so each server's call follows each other server's,
//! and takes each place in a round, about equally often: a call inherits
//! what the call before it left behind (timers armed in tokio's timer
//! wheel, a parked or a spinning thread), and with a fixed rotation each
//! server nearly always followed the same one (`http_interleaved` measured
//! that bias at several percent).
//!
//! It prints the median latency of one call, the median time of a batch
//! and the throughput it gives, and the process's CPU time per call
//! (client and server, both in process), each with its ratio to tonic's
//! server.
//!
//! ```text
//! cargo bench -p humus-tests --bench server_interleaved
//! ```

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use humus::fault::{self, Injector, jsonscenario};
use humus::grpc::server::{Server, Settings};
use humus::telemetry::Telemetry;
use humus_tests::grpc_proto::grpc::testing::SimpleRequest;
use opentelemetry::propagation::TextMapCompositePropagator;
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use support::turns::Turns;
use support::{Answer, Dependency, TonicClient};
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::TcpListenerStream;

const ROUNDS: usize = 20_000;
const BATCH_ROUNDS: usize = 1_500;
const WARM_UP: usize = 1_000;
const CONCURRENCY: usize = 64;
const CPU_CALLS: usize = 20_000;

const SERVERS: [&str; 4] = ["tonic", "humus", "tonic (control)", "humus (bare Setup)"];
const N: usize = SERVERS.len();

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

async fn tonic_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("a bound address");
    let incoming = TcpListenerStream::new(listener).map(|conn| {
        conn.inspect(|stream| {
            let _ = stream.set_nodelay(true);
        })
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .max_concurrent_streams(20_000)
            .add_service(support::test_service(Dependency::new(Answer::Ok)))
            .serve_with_incoming(incoming),
    );
    addr
}

async fn humus_server() -> SocketAddr {
    let setup = humus::Setup::new()
        .with_telemetry(noop_telemetry())
        .with_faults(injector());
    humus_server_of(&setup).await
}

/// Telemetry with no-op providers and W3C trace context and baggage: the
/// server makes its span and records its duration, to no effect.
fn noop_telemetry() -> Telemetry {
    Telemetry::builder()
        .tracer_provider(opentelemetry::trace::noop::NoopTracerProvider::new())
        .meter_provider(opentelemetry::metrics::noop::NoopMeterProvider::new())
        .propagator(TextMapCompositePropagator::new(vec![
            Box::new(TraceContextPropagator::new()),
            Box::new(BaggagePropagator::new()),
        ]))
        .build()
}

/// Failure injection on: every request is checked for a scenario.
fn injector() -> Injector {
    let codec = jsonscenario::Codec::new("humus.fault").expect("a valid key");
    Injector::new(fault::Settings::new(codec)).expect("valid settings")
}

async fn humus_server_of(setup: &humus::Setup) -> SocketAddr {
    let mut server = Server::new(
        setup,
        Settings {
            addr: "127.0.0.1:0".into(),
            plaintext: true,
            ..Settings::default()
        },
    )
    .expect("valid settings")
    .add_service(support::test_service(Dependency::new(Answer::Ok)));
    server.bind().await.expect("bind a loopback port");
    let addr = server.local_addr().expect("a TCP address");
    tokio::spawn(server.serve(std::future::pending()));
    addr
}

async fn call(client: &TonicClient) {
    client
        .clone()
        .unary_call(SimpleRequest::default())
        .await
        .expect("the server answers");
}

fn main() {
    let rt = support::runtime(2);
    let _guard = rt.enter();
    let addrs = rt.block_on(async {
        vec![
            tonic_server().await,
            humus_server().await,
            tonic_server().await,
            humus_server_of(&humus::Setup::new()).await,
        ]
    });
    let clients: Vec<TonicClient> = addrs.iter().map(|a| support::tonic_client(*a)).collect();

    let c = clients.clone();
    let (single, batch) = rt
        .block_on(tokio::spawn(async move {
            let mut single: Vec<Vec<Duration>> =
                (0..N).map(|_| Vec::with_capacity(ROUNDS)).collect();
            let mut turns = Turns::new(N);
            for round in 0..WARM_UP + ROUNDS {
                for &k in turns.next() {
                    let started = Instant::now();
                    call(&c[k]).await;
                    if round >= WARM_UP {
                        single[k].push(started.elapsed());
                    }
                }
            }
            let mut batch: Vec<Vec<Duration>> =
                (0..N).map(|_| Vec::with_capacity(BATCH_ROUNDS)).collect();
            for round in 0..WARM_UP / 10 + BATCH_ROUNDS {
                for &k in turns.next() {
                    let started = Instant::now();
                    join_all((0..CONCURRENCY).map(|_| call(&c[k]))).await;
                    if round >= WARM_UP / 10 {
                        batch[k].push(started.elapsed());
                    }
                }
            }
            (single, batch)
        }))
        .expect("the bench task");
    let single: Vec<Duration> = single.into_iter().map(median).collect();
    let batch: Vec<Duration> = batch.into_iter().map(median).collect();

    // CPU per call: each server alone, one call at a time.
    let mut cpu = Vec::new();
    for client in &clients {
        let client = client.clone();
        let before = support::cpu_seconds();
        rt.block_on(tokio::spawn(async move {
            for _ in 0..CPU_CALLS {
                call(&client).await;
            }
        }))
        .expect("the CPU task");
        cpu.push((support::cpu_seconds() - before) / CPU_CALLS as f64 * 1e6);
    }

    println!(
        "| server | median latency, 1 at a time | ratio | median time of {CONCURRENCY} at once | throughput, calls/s | ratio | CPU per call (client + server) | ratio |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let throughput = |k: usize| CONCURRENCY as f64 / batch[k].as_secs_f64();
    for (k, name) in SERVERS.iter().enumerate() {
        println!(
            "| {name} | {:.1} µs | {:.3} | {:.0} µs | {:.0} | {:.3} | {:.1} µs | {:.3} |",
            single[k].as_secs_f64() * 1e6,
            single[k].as_secs_f64() / single[0].as_secs_f64(),
            batch[k].as_secs_f64() * 1e6,
            throughput(k),
            throughput(k) / throughput(0),
            cpu[k],
            cpu[k] / cpu[0],
        );
    }
}
