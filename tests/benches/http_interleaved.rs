//! The HTTP client's overhead, interleaved: a GET through the humus HTTP
//! client (`humus::http::client::Client`, default settings, over its own
//! `reqwest::Client`) against the same GET on bare reqwest with the same
//! 10 s timeout (reqwest's `ClientBuilder::timeout`), a control,
//! `reqwest-2` (that reqwest again: the same code in a second client), and
//! bare reqwest with no timeout at all,
//! against one in-process axum server over loopback TCP (HTTP/1.1). The
//! clients take turns, call by call (one at a time) and batch by batch (64
//! at once), so a machine whose load changes during the run slows them all
//! alike.
//!
//! The order of the turns is drawn afresh every round (a permutation from a
//! fixed-seed generator, the same in every run: `support::turns::Turns`,
//! which `overhead_interleaved` and `server_interleaved` draw too), so each
//! client follows each other client, and takes each place in a round, about
//! equally often. A fixed rotation (round `r` calling `r, r+1, ...` in turn) made
//! every client follow the same one nearly always, and a call inherits the
//! runtime's state from the call before it: tokio wakes its I/O driver
//! when a timer is registered earlier than the wake the driver last
//! planned, and after a call with no timer (the no-timeout client's) it
//! planned none, so the next call's timer woke it. The client after the
//! no-timeout one (the first bare reqwest) was measured in other
//! conditions than its twin: the control landed at ×1.07 to ×1.11 of its
//! latency on an idle machine, ×0.98 on a loaded one. With the order drawn,
//! the control lands within ±0.3 % of its twin.
//!
//! The humus client keeps a timer anchor (a timer a little ahead of now,
//! while calls come: humus's `call::anchor`) in the runtime it calls
//! on, which is this one: no client's timer then wakes the driver, bare
//! reqwest's no more than humus's. Without it, humus's timer (its 5 s
//! `attempt_timeout`, earlier than the 10 s the driver planned after a
//! bare reqwest call) woke the driver after nearly every other client's
//! call: a cost on a loaded machine (humus ×1.05 instead of ×1.035), a
//! head start on an idle one, where the woken thread is up when the answer
//! comes.
//!
//! It prints the median latency of one call (one at a time), the median
//! time of a batch of 64 and the throughput it gives, each with its ratio
//! to bare reqwest (the first row). Each call reads the whole body.
//!
//! ```text
//! cargo bench -p humus-tests --bench http_interleaved
//! ```
//!
//! `HUMUS_HTTP_BENCH_PROFILE=humus` (or `reqwest`, `reqwest-2`, `none`
//! for the client with no timeout, or several of them separated by commas,
//! called in turn: `humus,reqwest`) makes only those clients' calls,
//! `HUMUS_HTTP_BENCH_CALLS` of them (default 10 000), in batches of
//! `HUMUS_HTTP_BENCH_BATCH` at once (default 1), and prints nothing else:
//! for a profiler that counts instructions (`valgrind --tool=callgrind`),
//! whose two runs' difference, over the number of calls, is the humus
//! client's cost per call in instructions, or one that counts system calls
//! and wake-ups (`perf stat -e 'syscalls:sys_enter_*,sched:sched_wakeup'`,
//! `strace -f -c`).
//!
//! Where humus's latency goes (measured at 8b8e6ea on a 2-core Xeon VM):
//! not into scheduling. Called alone, a humus call and a bare reqwest one
//! make the same system calls, all on one worker thread: two `epoll_wait`,
//! two `writev` and two `recvfrom` (the client's and the server's), no
//! `futex`, no `eventfd` write, no wake-up of the other worker (26 `futex`
//! and 14 `write` in all for 40,000 humus calls, 20 and 2 for bare
//! reqwest: the runtime's start, the anchor's one re-arming a second).
//! Called in turn, four clients on four connections, none wakes the time
//! driver either while humus's anchor runs (468 `eventfd` writes in 40,000
//! calls; 10,271 without humus, one for each bare reqwest call after the
//! no-timeout one). On an uncontended CPU (the process under `chrt -f`),
//! two clients called in turn wake the other worker about once a call
//! (`strace` shows the `futex` wake between one call's answer and the next
//! call's request, on the other connection), humus or not: 1.9 `futex`
//! and 1.75 wake-ups a call for `humus,reqwest`, 1.86 and 1.69 for
//! `reqwest,reqwest-2`. The
//! difference is time on the CPU for about the same instructions (345.2 M
//! against 346.1 M for 4,000 calls): humus's own code on the call's path
//! (its engine, breaker, telemetry, the request's copy for a retry) runs
//! once a call, about 290 distinct 64-byte lines of code, and evicts about
//! 310 more of hyper's, tokio's and reqwest's from the instruction cache
//! (callgrind's cache model, `--cache-sim=yes --branch-sim=yes`: 590 more
//! L1 instruction misses a call, 200 more L1 data misses, 100 more
//! mispredicted branches, two more clock reads), where bare reqwest's
//! extra work, parsing the URL string, is a few tight loops. A third of
//! those misses are in reqwest's redirect layer, which parses every
//! request's URL again (`Url::parse` of the URI's text, in both clients):
//! bare reqwest has just run that parser on its URL string, humus, which
//! builds its URL without parsing one, meets its code cold (234 misses a
//! call there, against 24). Alone, a
//! humus call takes 4 % more CPU time than a bare reqwest one on a loaded
//! machine and 2 to 11 % on an uncontended CPU (`perf stat -e task-clock`
//! of 100,000 calls, the best of 5 runs, and 40,000 calls under `chrt -f`):
//! the ×1.03 to ×1.16 here, a fixed cost the more visible the faster
//! the call around it.
//!
//! Since then (issue #35), the call's small steps in other codegen units
//! (the recorder's counts, `in_context`, the retry decision's success,
//! the anchor's fast paths, the transport's `start`, `end`, `classify`,
//! `finish`) are inlined and their cold halves kept out of line, an
//! attempt ended with no tracer and no meter records nothing at once, and
//! the retry copy of a request with no header clones no empty map:
//! callgrind's counts, humus minus bare reqwest on the same binary, 4,000
//! calls, went from 559 to about 480 L1 instruction misses a call (humus
//! alone: 16.27 M to 16.07–16.15 M; bare reqwest's own run moves by ±30 a
//! call from one build's layout to another's), 231 to about 200 L1 data
//! misses. Inlining the bigger steps as well (`prepare`, `send`,
//! `HttpCall::new`, `start_http_attempt`) added 60 misses a call: their
//! code, inlined into the call's state machine, spread over more lines.
//! Alternated with the build before, six runs each on a loaded machine:
//! humus's latency ratio ×1.03 to ×1.08 (median ×1.05), against ×1.05 to
//! ×1.13 (median ×1.10) before; the control within ±0.4 %.

mod support;

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use support::turns::Turns;

const ROUNDS: usize = 20_000;
const BATCH_ROUNDS: usize = 1_000;
const WARM_UP: usize = 1_000;
const CONCURRENCY: usize = 64;
const PEERS: [&str; 4] = ["reqwest", "humus", "reqwest-2", "reqwest, no timeout"];

#[derive(Clone)]
enum Peer {
    Bare(reqwest::Client, String),
    Humus(humus::http::client::Client),
}

impl Peer {
    async fn call(&self) {
        let response = match self {
            Peer::Bare(client, url) => client.get(url).send().await.expect("a response"),
            Peer::Humus(client) => client.get("/rates/EUR").send().await.expect("a response"),
        };
        assert!(response.status().is_success());
        let body = response.bytes().await.expect("a body");
        assert_eq!(body.len(), 4);
    }
}

/// reqwest as a user builds it here: rustls with `ring` (the workspace's
/// provider), no proxy.
fn bare_reqwest(timeout: Option<Duration>) -> reqwest::Client {
    let tls = rustls::ClientConfig::builder_with_provider(humus::app::crypto_provider())
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let builder = reqwest::Client::builder()
        .no_proxy()
        .tls_backend_preconfigured(tls);
    match timeout {
        Some(timeout) => builder.timeout(timeout),
        None => builder,
    }
    .build()
    .expect("a reqwest client")
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let _guard = rt.enter();
    let addr = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let addr = listener.local_addr().expect("an address");
        let app = axum::Router::new().fallback(|| async { "1.08" });
        tokio::spawn(async move { axum::serve(listener, app).await.expect("served") });
        addr
    });
    let setup = humus::Setup::new();
    let humus = humus::http::client::Client::new(
        &setup,
        humus::http::client::Settings {
            base_url: format!("http://{addr}"),
            ..humus::http::client::Settings::default()
        },
    )
    .expect("a humus client");
    let url = format!("http://{addr}/rates/EUR");
    // The same call: reqwest with the humus client's default 10 s
    // timeout (a production reqwest client has one), and without.
    let timeout = Some(Duration::from_secs(10));
    let peers = vec![
        Peer::Bare(bare_reqwest(timeout), url.clone()),
        Peer::Humus(humus),
        Peer::Bare(bare_reqwest(timeout), url.clone()),
        Peer::Bare(bare_reqwest(None), url),
    ];
    let n = peers.len();

    if let Ok(only) = std::env::var("HUMUS_HTTP_BENCH_PROFILE") {
        let calls: usize = std::env::var("HUMUS_HTTP_BENCH_CALLS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000);
        let only: Vec<Peer> = only
            .split(',')
            .map(|name| match name {
                "humus" => peers[1].clone(),
                "reqwest" => peers[0].clone(),
                "reqwest-2" => peers[2].clone(),
                "none" => peers[3].clone(),
                other => panic!("HUMUS_HTTP_BENCH_PROFILE={other:?}: want humus, reqwest, reqwest-2 or none, separated by commas"),
            })
            .collect();
        let batch: usize = std::env::var("HUMUS_HTTP_BENCH_BATCH")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        rt.block_on(tokio::spawn(async move {
            for i in 0..calls / batch {
                let peer = &only[i % only.len()];
                join_all((0..batch).map(|_| peer.call())).await;
            }
        }))
        .expect("no call failed");
        return;
    }

    let c = peers.clone();
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

    let single: Vec<Duration> = single.into_iter().map(median).collect();
    let batch: Vec<Duration> = batch.into_iter().map(median).collect();
    println!(
        "GET over loopback TCP (HTTP/1.1) to an in-process axum server; the clients take turns (2 worker threads)."
    );
    println!();
    println!(
        "| client | median latency, 1 at a time | ratio | median time of {CONCURRENCY} at once | throughput, calls/s | ratio |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let throughput = |d: Duration| CONCURRENCY as f64 / d.as_secs_f64();
    for (k, name) in PEERS.iter().enumerate() {
        println!(
            "| {name} | {:.1} µs | {:.3} | {:.0} µs | {:.0} | {:.3} |",
            single[k].as_secs_f64() * 1e6,
            single[k].as_secs_f64() / single[0].as_secs_f64(),
            batch[k].as_secs_f64() * 1e6,
            throughput(batch[k]),
            throughput(batch[k]) / throughput(batch[0]),
        );
    }
}
