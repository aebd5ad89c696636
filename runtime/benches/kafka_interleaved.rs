//! The Kafka producer's overhead, interleaved: one record produced and
//! its delivery report awaited, through humus's `kafka::Producer` (a
//! default `Setup`: no-op telemetry, failure injection off) against a bare
//! `rdkafka::producer::FutureProducer` with the same librdkafka settings
//! (`acks=all`, idempotence on, the same `message.timeout.ms` and
//! `linger.ms`), and a control, `rdkafka-2` (a second bare producer: the
//! same code in a second client), on one librdkafka mock cluster. The
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
const TOPIC: &str = "bench";
const PEERS: [&str; 3] = ["rdkafka", "humus", "rdkafka-2"];

#[derive(Clone)]
enum Peer {
    Bare(FutureProducer),
    Humus(Producer),
}

impl Peer {
    async fn call(&self) {
        let value: &[u8] = b"{\"amount\":12}";
        match self {
            Peer::Bare(producer) => {
                producer
                    .send(
                        FutureRecord::<[u8], [u8]>::to(TOPIC).payload(value),
                        Duration::ZERO,
                    )
                    .await
                    .expect("the record is stored");
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mock: MockCluster<'static, DefaultProducerContext> =
        MockCluster::new(1).expect("a mock cluster");
    mock.create_topic(TOPIC, 1, 1).expect("the topic");
    let brokers = mock.bootstrap_servers();
    let timeout = Duration::from_secs(30);
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
        vec![Peer::Bare(bare()), Peer::Humus(humus), Peer::Bare(bare())]
    });

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
    for (i, name) in PEERS.iter().enumerate() {
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
