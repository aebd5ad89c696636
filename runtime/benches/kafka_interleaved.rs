//! The Kafka producer's overhead, interleaved: one record produced and
//! its delivery report awaited, through humus's `kafka::Producer` (a
//! default `Setup`: no-op telemetry, failure injection off) against a bare
//! `rdkafka::producer::FutureProducer` with the same librdkafka settings
//! (`acks=all`, idempotence on, the same `message.timeout.ms` and
//! `linger.ms`), and two controls, on one librdkafka mock cluster:
//! `rdkafka-2`, a second bare producer (the same code in a second client),
//! and `rdkafka+timer`, a bare producer that waits for each report against
//! a tokio timer of the same 30 s, as humus's producer bounds each call's
//! wait at its deadline (what that bound costs a bare client; humus's
//! timer anchor, `call::anchor`, running in the same runtime spares it
//! tokio's driver wake-up too, so it measures the timer's own cost). The
//! producers take turns, call by call (one record at a time) and batch by
//! batch (64 records in flight at once, each its own call), the order
//! rotating every round, so a machine whose load changes during the run
//! slows them all alike.
//!
//! It prints the median latency of one record, the median time of a batch
//! of 64 and the throughput it gives, each with its ratio to the bare
//! producer.
//!
//! ```text
//! cargo bench -p humus --bench kafka_interleaved
//! ```
//!
//! `HUMUS_KAFKA_BENCH_LINGER_MS` sets `linger.ms` for every producer
//! (default 0, so the linger does not hide the producers' own cost;
//! librdkafka's default is 5).
//!
//! `HUMUS_KAFKA_BENCH_SPIN_NS=300` adds a third control, `rdkafka+spin`: a
//! bare producer that spins that long before each send, for what a delay
//! before the enqueue costs at 64 in flight (at linger 0, librdkafka sends
//! what is queued as soon as the first record is: a slower enqueue makes
//! more, smaller requests, and costs more than the delay itself).
//!
//! `HUMUS_KAFKA_BENCH_PROFILE=humus` (or `rdkafka`, or a control's name,
//! `rdkafka+timer`) produces 20 000
//! records through that peer only, `HUMUS_KAFKA_BENCH_BATCH` at once
//! (default 1), and prints nothing else, for a profiler that counts
//! instructions (`valgrind --tool=callgrind --separate-threads=yes`): the
//! difference of the two peers' calling threads, over 20 000, is humus's
//! cost a record.
//!
//! Where it goes, at 64 in flight (linger 0, callgrind's calling thread,
//! at 706bf07): bare rdkafka about 5,080 instructions a record, the
//! `rdkafka+timer` control 1,040 more (its tokio timer and `select!`),
//! humus 3,910 more (4,420 before the producer's deadlines went to the
//! anchor's queue, `call::anchor::Expiry`, about 165 a record where a tokio
//! timer cost about 580). Of humus's: some 600 copying the call's state
//! (eight copies of the future and its parts on its first poll, against
//! one), some 600 in the allocator (three allocations more than bare:
//! the `Record`'s topic and value, owned, and the answer's `Vec`), about
//! 520 in the breaker's admit and settle, 300 dropping the call (the
//! record's buffers), 250 reading the clock and the inherited deadline,
//! and the rest in the engine's and the transport's state machines. At
//! linger 0 the calling thread's time is the batch's: each record's cost
//! before its enqueue also makes librdkafka's requests smaller (the
//! `rdkafka+spin` control, 300 ns, cost about as much as humus in 15 runs
//! on a loaded 2-core machine: ×0.74 both, `rdkafka+timer` ×0.86). What is
//! left is spread thin: the target of ×0.95 at linger 0 asks for humus
//! within some 250 instructions of a bare send, less than its breaker
//! alone; a borrowed or shared record (no copy of topic and value) and a
//! one-record answer would be an API change.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use humus::kafka::{Producer, ProducerSettings, Record};
use rdkafka::ClientConfig;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{DefaultProducerContext, FutureProducer, FutureRecord};

const ROUNDS: usize = 3_000;
const BATCH_ROUNDS: usize = 200;
const WARM_UP: usize = 300;
const CONCURRENCY: usize = 64;
const PROFILED: usize = 20_000;
const TOPIC: &str = "bench";

/// What a bare peer does besides its send.
#[derive(Clone, Copy)]
enum Extra {
    /// Nothing: `rdkafka` and `rdkafka-2`.
    None,
    /// Waits for the report against a timer of [`TIMEOUT`] (`select!`, the
    /// report first), as humus's producer waits: `rdkafka+timer`.
    Timer,
    /// Spins this long before the send: `rdkafka+spin`.
    Spin(Duration),
}

#[derive(Clone)]
enum Peer {
    Bare(FutureProducer, Extra),
    Humus(Producer),
}

/// Every producer's `message.timeout.ms`, and humus's `delivery_timeout`.
const TIMEOUT: Duration = Duration::from_secs(30);

impl Peer {
    async fn call(&self) {
        let value: &[u8] = b"{\"amount\":12}";
        match self {
            Peer::Bare(producer, extra) => {
                if let Extra::Spin(d) = extra {
                    let start = Instant::now();
                    while start.elapsed() < *d {
                        std::hint::spin_loop();
                    }
                }
                let send = producer.send(
                    FutureRecord::<[u8], [u8]>::to(TOPIC).payload(value),
                    Duration::ZERO,
                );
                let report = if let Extra::Timer = extra {
                    let at = tokio::time::Instant::now() + TIMEOUT;
                    tokio::select! {
                        biased;
                        report = send => report,
                        () = tokio::time::sleep_until(at) => panic!("no report in time"),
                    }
                } else {
                    send.await
                };
                report.expect("the record is stored");
            }
            Peer::Humus(producer) => {
                producer
                    .produce([Record::to(TOPIC).value(value)])
                    .await
                    .expect("the record is stored");
            }
        }
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let linger = std::env::var("HUMUS_KAFKA_BENCH_LINGER_MS").unwrap_or_else(|_| "0".into());
    let spin = std::env::var("HUMUS_KAFKA_BENCH_SPIN_NS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_nanos);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mock: MockCluster<'static, DefaultProducerContext> =
        MockCluster::new(1).expect("a mock cluster");
    mock.create_topic(TOPIC, 1, 1).expect("the topic");
    let brokers = mock.bootstrap_servers();
    let timeout = TIMEOUT;
    let bare = || -> FutureProducer {
        ClientConfig::new()
            .set("bootstrap.servers", &brokers)
            .set("message.timeout.ms", timeout.as_millis().to_string())
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("linger.ms", &linger)
            .create()
            .expect("a bare producer")
    };
    let peers: Vec<Peer> = rt.block_on(async {
        let mut settings = ProducerSettings {
            brokers: brokers.split(',').map(str::to_owned).collect(),
            delivery_timeout: timeout,
            ..ProducerSettings::default()
        };
        settings
            .librdkafka
            .insert("linger.ms".into(), linger.clone());
        let humus = Producer::new(&humus::Setup::new(), settings).expect("a humus producer");
        let mut peers = vec![
            Peer::Bare(bare(), Extra::None),
            Peer::Humus(humus),
            Peer::Bare(bare(), Extra::None),
            Peer::Bare(bare(), Extra::Timer),
        ];
        if let Some(spin) = spin {
            peers.push(Peer::Bare(bare(), Extra::Spin(spin)));
        }
        peers
    });
    let mut names = vec!["rdkafka", "humus", "rdkafka-2", "rdkafka+timer"];
    if spin.is_some() {
        names.push("rdkafka+spin");
    }

    if let Ok(profile) = std::env::var("HUMUS_KAFKA_BENCH_PROFILE") {
        let peer = &peers[names.iter().position(|n| *n == profile).unwrap_or(0)];
        let batch: usize = std::env::var("HUMUS_KAFKA_BENCH_BATCH")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        rt.block_on(async {
            for _ in 0..PROFILED / batch {
                join_all((0..batch).map(|_| peer.call())).await;
            }
        });
        return;
    }

    rt.block_on(async {
        for _ in 0..WARM_UP {
            for peer in &peers {
                peer.call().await;
            }
        }
    });

    // One record at a time.
    let mut single: Vec<Vec<Duration>> = vec![Vec::with_capacity(ROUNDS); peers.len()];
    rt.block_on(async {
        for round in 0..ROUNDS {
            for k in 0..peers.len() {
                let i = (round + k) % peers.len();
                let start = Instant::now();
                peers[i].call().await;
                single[i].push(start.elapsed());
            }
        }
    });

    // 64 records in flight at once, each its own call.
    let mut batch: Vec<Vec<Duration>> = vec![Vec::with_capacity(BATCH_ROUNDS); peers.len()];
    rt.block_on(async {
        for round in 0..BATCH_ROUNDS {
            for k in 0..peers.len() {
                let i = (round + k) % peers.len();
                let peer = &peers[i];
                let start = Instant::now();
                join_all((0..CONCURRENCY).map(|_| peer.call())).await;
                batch[i].push(start.elapsed());
            }
        }
    });

    let single: Vec<Duration> = single.into_iter().map(median).collect();
    let batch: Vec<Duration> = batch.into_iter().map(median).collect();
    println!(
        "kafka producer, interleaved (mock cluster, linger.ms={linger}; {ROUNDS} rounds of one record, {BATCH_ROUNDS} of {CONCURRENCY} in flight)"
    );
    println!(
        "{:<12} {:>14} {:>8} {:>16} {:>14} {:>8}",
        "producer", "median 1", "ratio", "median batch", "records/s", "ratio"
    );
    let throughput = |d: Duration| CONCURRENCY as f64 / d.as_secs_f64();
    for (i, name) in names.iter().enumerate() {
        println!(
            "{:<12} {:>14?} {:>8.3} {:>16?} {:>14.0} {:>8.3}",
            name,
            single[i],
            single[i].as_secs_f64() / single[0].as_secs_f64(),
            batch[i],
            throughput(batch[i]),
            throughput(batch[i]) / throughput(batch[0]),
        );
    }
}
