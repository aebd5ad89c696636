//! Overhead per call, interleaved: the clients of `benches/overhead.rs`
//! (tonic's generated client over a raw `Channel`, the same with a 10 s
//! deadline per request, and humus's typed client), and a control,
//! `tonic-generic` (tonic's client again, over a channel built with a
//! connector of its own: the same code, in a second copy), take turns, call by
//! call (one at a time) or batch by batch (64 at once), so that a machine
//! whose load changes during the run (2 cores shared with other builds)
//! slows them all alike. The order of the turns rotates from round to
//! round, so no client always follows the same one. criterion's figures, one client after the other,
//! move with that load; these ratios do not.
//!
//! It prints the median latency of one call (one at a time), the median
//! time of a batch of 64 concurrent calls and the throughput it gives, and
//! the process's CPU time per call (client and server, both in-process),
//! each with its ratio to tonic.
//!
//! ```text
//! cargo bench -p humus-tests --bench overhead_interleaved
//! ```

mod support;

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use humus::grpc::client::Settings;
use humus_tests::grpc_proto::grpc::testing::SimpleRequest;
use support::{Answer, Dependency, HumusClient, TonicClient};

/// Rounds of one call per client, after `WARM_UP` rounds.
const ROUNDS: usize = 20_000;
/// Rounds of one batch of `CONCURRENCY` calls per client.
const BATCH_ROUNDS: usize = 1_500;
const WARM_UP: usize = 1_000;
const CONCURRENCY: usize = 64;
/// Calls per client, one at a time, for the CPU figure.
const CPU_CALLS: usize = 20_000;

const NAMES: [&str; 4] = ["tonic", "tonic+deadline", "humus", "tonic-generic"];
const N: usize = NAMES.len();

/// The process's CPU time (user and system), in seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("Linux /proc");
    // The fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("a command") + 2..]
        .split(' ')
        .collect();
    let ticks = |i: usize| fields[i].parse::<f64>().expect("a number");
    // utime and stime, in clock ticks of 1/100 s (Linux's USER_HZ).
    (ticks(11) + ticks(12)) / 100.0
}

#[derive(Clone)]
struct Clients {
    tonic: TonicClient,
    generic: TonicClient,
    humus: HumusClient,
}

impl Clients {
    /// One call through client `k` of [`NAMES`].
    async fn call(&self, k: usize) {
        match k {
            0 => {
                let mut tonic = self.tonic.clone();
                tonic
                    .unary_call(SimpleRequest::default())
                    .await
                    .expect("OK");
            }
            1 => {
                let mut tonic = self.tonic.clone();
                let mut request = tonic::Request::new(SimpleRequest::default());
                request.set_timeout(Duration::from_secs(10));
                tonic.unary_call(request).await.expect("OK");
            }
            3 => {
                let mut tonic = self.generic.clone();
                tonic
                    .unary_call(SimpleRequest::default())
                    .await
                    .expect("OK");
            }
            _ => {
                self.humus
                    .unary_call(SimpleRequest::default())
                    .await
                    .expect("OK");
            }
        }
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let rt = support::runtime(2);
    let _guard = rt.enter();
    let addr = rt.block_on(support::serve(Dependency::new(Answer::Ok)));
    let clients = Clients {
        tonic: support::tonic_client(addr),
        generic: support::tonic_generic_client(addr),
        humus: support::humus_client(addr, Settings::default()),
    };

    // The calls are made from a task, as a service's handler makes them.
    let c = clients.clone();
    let (single, batch) = rt
        .block_on(tokio::spawn(async move {
            let mut single: Vec<Vec<Duration>> =
                (0..N).map(|_| Vec::with_capacity(ROUNDS)).collect();
            for round in 0..WARM_UP + ROUNDS {
                // Each client goes first, second, third and last in turn: a call
                // is slowed or sped by what the call before it left behind
                // (timers, a parked or a spinning thread).
                for turn in 0..N {
                    let k = (round + turn) % N;
                    let started = Instant::now();
                    c.call(k).await;
                    if round >= WARM_UP {
                        single[k].push(started.elapsed());
                    }
                }
            }
            let mut batch: Vec<Vec<Duration>> =
                (0..N).map(|_| Vec::with_capacity(BATCH_ROUNDS)).collect();
            for round in 0..WARM_UP / 10 + BATCH_ROUNDS {
                for turn in 0..N {
                    let k = (round + turn) % N;
                    let started = Instant::now();
                    join_all((0..CONCURRENCY).map(|_| c.call(k))).await;
                    if round >= WARM_UP / 10 {
                        batch[k].push(started.elapsed());
                    }
                }
            }
            (single, batch)
        }))
        .expect("no call failed");

    let mut cpu = [0.0; N];
    for _ in 0..2 {
        for (k, total) in cpu.iter_mut().enumerate() {
            let c = clients.clone();
            let before = cpu_seconds();
            rt.block_on(tokio::spawn(async move {
                for _ in 0..CPU_CALLS / 2 {
                    c.call(k).await;
                }
            }))
            .expect("no call failed");
            *total += cpu_seconds() - before;
        }
    }

    let single: Vec<Duration> = single.into_iter().map(median).collect();
    let batch: Vec<Duration> = batch.into_iter().map(median).collect();
    println!(
        "Unary calls over loopback TCP to an in-process tonic server; the clients take turns (2 worker threads)."
    );
    println!();
    println!(
        "| client | median latency, 1 at a time | ratio | median time of {CONCURRENCY} at once | throughput, calls/s | ratio | CPU per call (client + server) | ratio |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for k in 0..N {
        let throughput = CONCURRENCY as f64 / batch[k].as_secs_f64();
        let base = CONCURRENCY as f64 / batch[0].as_secs_f64();
        let cpu_per_call = cpu[k] / CPU_CALLS as f64 * 1e6;
        let cpu_base = cpu[0] / CPU_CALLS as f64 * 1e6;
        println!(
            "| {} | {:.1} µs | {:.3} | {:.0} µs | {throughput:.0} | {:.3} | {cpu_per_call:.1} µs | {:.3} |",
            NAMES[k],
            single[k].as_secs_f64() * 1e6,
            single[k].as_secs_f64() / single[0].as_secs_f64(),
            batch[k].as_secs_f64() * 1e6,
            throughput / base,
            cpu_per_call / cpu_base,
        );
    }
}
