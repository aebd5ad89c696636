//! Overhead per call, interleaved: the clients of `benches/overhead.rs`
//! (tonic's generated client over a raw `Channel`, the same with a 10 s
//! deadline per request, humus's typed client, and tonic's generated client
//! over a humus client's channel, `tonic over humus`), and a control,
//! `tonic-generic` (tonic's client again, over a channel built with a
//! connector of its own: the same code, in a second copy), take turns, call by
//! call (one at a time) or batch by batch (64 at once), so that a machine
//! whose load changes during the run (2 cores shared with other builds)
//! slows them all alike. criterion's figures, one client after the other,
//! move with that load; these ratios do not.
//!
//! The order of the turns is drawn afresh every round
//! (`support::turns::Turns`: a permutation from a fixed-seed generator, the
//! same in every run), so each client follows each other client, and takes
//! each place in a round, about equally often: a call is slowed or sped by what the call before it left
//! behind (timers armed in tokio's timer wheel, a parked or a spinning
//! thread), and with a fixed rotation each client nearly always followed
//! the same one (`http_interleaved` measured that bias at several percent).
//!
//! It prints the median latency of one call (one at a time), the median
//! time of a batch of 64 concurrent calls and the throughput it gives, and
//! the process's CPU time per call (client and server, both in-process),
//! each with its ratio to tonic.
//!
//! ```text
//! cargo bench -p humus-tests --bench overhead_interleaved
//! cargo bench -p humus-tests --bench overhead_interleaved -- layers
//! ```
//!
//! With `layers`, the clients are those of `support::LAYER_PEERS`: tonic,
//! humus with no per-attempt layer, with one no-op tonic interceptor and
//! with one identity tower layer (what one trivial layer costs).
//!
//! `HUMUS_OVERHEAD_PROFILE=<client>` (a name of `support::PEERS` or
//! `support::LAYER_PEERS`) makes only that client's calls, nothing timed,
//! for a profiler (`valgrind --tool=callgrind`, `strace -c -f`):
//! `HUMUS_OVERHEAD_CALLS` of them (10,000 unless set), in batches of
//! `HUMUS_OVERHEAD_BATCH` at once (1 unless set), after one batch to dial.
//!
//! ```text
//! HUMUS_OVERHEAD_PROFILE=tonic HUMUS_OVERHEAD_CALLS=6400 HUMUS_OVERHEAD_BATCH=64 \
//!     valgrind --tool=callgrind target/release/deps/overhead_interleaved-<hash>
//! ```

mod support;

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use support::turns::Turns;
use support::{Answer, Dependency, LAYER_PEERS, PEERS, Peer};

/// Rounds of one call per client, after `WARM_UP` rounds.
const ROUNDS: usize = 20_000;
/// Rounds of one batch of `CONCURRENCY` calls per client.
const BATCH_ROUNDS: usize = 1_500;
const WARM_UP: usize = 1_000;
const CONCURRENCY: usize = 64;
/// Calls per client, one at a time, for the CPU figure.
const CPU_CALLS: usize = 20_000;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// `HUMUS_OVERHEAD_PROFILE`'s run: one client's calls, untimed.
fn profile(rt: &tokio::runtime::Runtime, addr: std::net::SocketAddr, name: &str) {
    let number = |var: &str, default: usize| -> usize {
        std::env::var(var)
            .ok()
            .map(|v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("{var}={v:?}: not a number"))
            })
            .unwrap_or(default)
    };
    let calls = number("HUMUS_OVERHEAD_CALLS", 10_000);
    let batch = number("HUMUS_OVERHEAD_BATCH", 1).max(1);
    let peer = Peer::new(name, addr)
        .unwrap_or_else(|| panic!("HUMUS_OVERHEAD_PROFILE={name:?}: not a client"));
    rt.block_on(tokio::spawn(async move {
        // The dial, apart from the calls counted.
        join_all((0..batch).map(|_| peer.call())).await;
        for _ in 0..calls / batch {
            join_all((0..batch).map(|_| peer.call())).await;
        }
    }))
    .expect("no call failed");
}

fn main() {
    let rt = support::runtime(2);
    let _guard = rt.enter();
    let addr = rt.block_on(support::serve(Dependency::new(Answer::Ok)));
    if let Ok(name) = std::env::var("HUMUS_OVERHEAD_PROFILE") {
        profile(&rt, addr, &name);
        return;
    }
    let names: &[&str] = if std::env::args().any(|a| a == "layers") {
        &LAYER_PEERS
    } else {
        &PEERS
    };
    let n = names.len();
    let clients: Vec<Peer> = names
        .iter()
        .map(|name| Peer::new(name, addr).expect("a client of PEERS"))
        .collect();

    // The calls are made from a task, as a service's handler makes them.
    let c = clients.clone();
    let (single, batch) = rt
        .block_on(tokio::spawn(async move {
            let mut single: Vec<Vec<Duration>> =
                (0..n).map(|_| Vec::with_capacity(ROUNDS)).collect();
            let mut turns = Turns::new(n);
            for round in 0..WARM_UP + ROUNDS {
                for &k in turns.next() {
                    let started = Instant::now();
                    c[k].call().await;
                    if round >= WARM_UP {
                        single[k].push(started.elapsed());
                    }
                }
            }
            let mut batch: Vec<Vec<Duration>> =
                (0..n).map(|_| Vec::with_capacity(BATCH_ROUNDS)).collect();
            for round in 0..WARM_UP / 10 + BATCH_ROUNDS {
                for &k in turns.next() {
                    let started = Instant::now();
                    join_all((0..CONCURRENCY).map(|_| c[k].call())).await;
                    if round >= WARM_UP / 10 {
                        batch[k].push(started.elapsed());
                    }
                }
            }
            (single, batch)
        }))
        .expect("no call failed");

    let mut cpu = vec![0.0; n];
    for _ in 0..2 {
        for (k, total) in cpu.iter_mut().enumerate() {
            let c = clients.clone();
            let before = support::cpu_seconds();
            rt.block_on(tokio::spawn(async move {
                for _ in 0..CPU_CALLS / 2 {
                    c[k].call().await;
                }
            }))
            .expect("no call failed");
            *total += support::cpu_seconds() - before;
        }
    }

    let single: Vec<Duration> = single.into_iter().map(median).collect();
    let batch: Vec<Duration> = batch.into_iter().map(median).collect();
    let cpu_per_call: Vec<f64> = cpu.iter().map(|c| c / CPU_CALLS as f64 * 1e6).collect();
    println!(
        "Unary calls over loopback TCP to an in-process tonic server; the clients take turns (2 worker threads)."
    );
    println!();
    support::print_overhead(names, &single, &batch, &cpu_per_call, CONCURRENCY);
}
