//! The RabbitMQ publisher's overhead, interleaved: one message published
//! and its confirm awaited through `humus::rabbitmq::Publisher` (default
//! settings, no telemetry, injection off) against the same on bare amqprs
//! with the same channel settings (one connection, one channel in confirm
//! mode, `mandatory`, a channel callback that hands each confirm to its
//! publisher by delivery tag), and a control, `amqprs-2` (the same bare
//! code on a second connection), on one broker (Debian's rabbitmq-server,
//! started as the tests start it), to the default exchange and a queue
//! that keeps its last 1000 messages. The peers take turns, publish by
//! publish (one at a time) and batch by batch (64 at once), the order
//! rotating every round, so a machine whose load changes during the run
//! slows them all alike.
//!
//! A second control, `amqprs+timer`, is the bare code with a
//! `tokio::time::timeout` (5 s, humus's default `attempt_timeout`) around
//! the confirm's wait: what an attempt's timer costs on its own. It runs in
//! the same runtime as humus's publisher, whose timer anchor
//! (`call::anchor`, a timer kept due within 1 s while publishes come)
//! keeps registering a timer 5 s ahead from waking tokio's time driver,
//! for every peer alike: without that anchor this control measured
//! ×1.02–×1.10 the bare latency, with it about ×1.01.
//!
//! It prints the median latency of one publish, the median time of a batch
//! of 64 and the throughput it gives, each with its ratio to bare amqprs.
//!
//! Where humus's cost a publish goes at 64 in flight (callgrind, the
//! profile runs below, issue #37): bare amqprs 10,700 instructions, humus
//! 14,200 (15,500 before the send was kept unboxed, the confirms' waits
//! given one timer a channel and the pending confirms kept as slots by
//! delivery tag); one at a time 21,050 against 22,950 (24,040 before).
//! What is left: the publish's state (2.6 KB against bare's 1.3 KB,
//! amqprs's publish future alone 1,168 B) copied as it is built and moved
//! (1,300), the attempt loop with the breaker's admit and settle and the
//! retry decision (900), the properties cloned for each attempt (200),
//! the context and the destination (180). Not the system calls: with
//! `strace -f`, one `sendto` a publish for both (amqprs writes a publish's
//! three frames at once and no two publishes together), the client's
//! `recvfrom`s 0.14 a publish against 0.17, the broker's 0.6 against 1.0;
//! nor the allocations: 7.5 a publish against bare's 7.7. Interleaved on 2
//! cores shared with other builds (load 2.5 to 4.7, 16 runs each), the
//! throughput ratio at 64 went from ×0.92 (×0.90–0.97) to ×0.96
//! (×0.93–1.00), `amqprs-2` within 1 %; the latency ratio under that load
//! is ×1.08 before and after (`amqprs-2` ×1.01–1.02).
//!
//! ```text
//! HUMUS_INTEROP=1 cargo bench -p humus --bench rabbitmq_interleaved
//! ```
//!
//! Without rabbitmq-server installed it prints one line and exits.
//! `HUMUS_RABBITMQ_BENCH_PROFILE=humus` (or `amqprs`) publishes 20 000
//! messages through that peer only, `HUMUS_RABBITMQ_BENCH_BATCH` at once
//! (default 1), and prints nothing else, for a profiler that counts
//! instructions (`valgrind --tool=callgrind`): the two peers' runs'
//! difference, over 20 000, is humus's cost a publish.

#[path = "../tests/rabbitmq_support/mod.rs"]
mod rabbitmq_support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use amqprs::callbacks::{ChannelCallback, DefaultConnectionCallback};
use amqprs::channel::{BasicPublishArguments, Channel, ConfirmSelectArguments};
use amqprs::connection::{Connection, OpenConnectionArguments};
use amqprs::{Ack, BasicProperties, Cancel, CloseChannel, FieldTable, FieldValue, Nack, Return};
use futures_util::future::join_all;
use humus::rabbitmq::{Publisher, PublisherSettings};
use rabbitmq_support::Broker;
use tokio::sync::oneshot;

const ROUNDS: usize = 3_000;
const BATCH_ROUNDS: usize = 300;
const WARM_UP: usize = 300;
const CONCURRENCY: usize = 64;
const QUEUE: &str = "bench";
const PEERS: [&str; 4] = ["amqprs", "humus", "amqprs-2", "amqprs+timer"];

/// The bare client's confirms: each publish's sender, by delivery tag.
type Waiting = Arc<Mutex<BTreeMap<u64, oneshot::Sender<bool>>>>;

struct Confirms(Waiting);

impl Confirms {
    fn settle(&self, tag: u64, multiple: bool, ack: bool) {
        let mut waiting = self.0.lock().unwrap();
        let tags: Vec<u64> = if multiple {
            waiting.range(..=tag).map(|(t, _)| *t).collect()
        } else {
            vec![tag]
        };
        for t in tags {
            if let Some(tx) = waiting.remove(&t) {
                let _ = tx.send(ack);
            }
        }
    }
}

#[async_trait::async_trait]
impl ChannelCallback for Confirms {
    async fn close(&mut self, _: &Channel, _: CloseChannel) -> Result<(), amqprs::error::Error> {
        Ok(())
    }
    async fn cancel(&mut self, _: &Channel, _: Cancel) -> Result<(), amqprs::error::Error> {
        Ok(())
    }
    async fn flow(&mut self, _: &Channel, active: bool) -> Result<bool, amqprs::error::Error> {
        Ok(active)
    }
    async fn publish_ack(&mut self, _: &Channel, ack: Ack) {
        self.settle(ack.delivery_tag(), ack.mutiple(), true);
    }
    async fn publish_nack(&mut self, _: &Channel, nack: Nack) {
        self.settle(nack.delivery_tag(), nack.multiple(), false);
    }
    async fn publish_return(&mut self, _: &Channel, _: Return, _: BasicProperties, _: Vec<u8>) {}
}

/// Bare amqprs: a channel in confirm mode, its publishes numbered in the
/// order they are sent.
struct Bare {
    _connection: Connection,
    channel: Channel,
    waiting: Waiting,
    next_tag: tokio::sync::Mutex<u64>,
}

impl Bare {
    async fn open(port: u16) -> Bare {
        let args = OpenConnectionArguments::new("127.0.0.1", port, "guest", "guest");
        let connection = Connection::open(&args).await.unwrap();
        connection
            .register_callback(DefaultConnectionCallback)
            .await
            .unwrap();
        let channel = connection.open_channel(None).await.unwrap();
        let waiting = Waiting::default();
        channel
            .register_callback(Confirms(Arc::clone(&waiting)))
            .await
            .unwrap();
        channel
            .confirm_select(ConfirmSelectArguments::default())
            .await
            .unwrap();
        Bare {
            _connection: connection,
            channel,
            waiting,
            next_tag: tokio::sync::Mutex::new(1),
        }
    }

    async fn publish(&self, body: Vec<u8>, timer: bool) {
        let rx = {
            let mut tag = self.next_tag.lock().await;
            let (tx, rx) = oneshot::channel();
            self.waiting.lock().unwrap().insert(*tag, tx);
            self.channel
                .basic_publish(
                    BasicProperties::default(),
                    body,
                    BasicPublishArguments::new("", QUEUE)
                        .mandatory(true)
                        .finish(),
                )
                .await
                .unwrap();
            *tag += 1;
            rx
        };
        let acked = if timer {
            tokio::time::timeout(Duration::from_secs(5), rx)
                .await
                .expect("in time")
        } else {
            rx.await
        };
        assert!(acked.unwrap(), "acked");
    }
}

enum Peer {
    Bare(Bare, bool),
    Humus(Publisher),
}

impl Peer {
    async fn publish(&self) {
        let body = b"{\"order\":42}".to_vec();
        match self {
            Peer::Bare(bare, timer) => bare.publish(body, *timer).await,
            Peer::Humus(publisher) => publisher
                .publish("", QUEUE, BasicProperties::default(), body)
                .await
                .expect("confirmed"),
        }
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let Some(broker) = Broker::get() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (_admin, channel) = broker.open(&broker.uri()).await;
        let mut arguments = FieldTable::new();
        arguments.insert("x-max-length".try_into().unwrap(), FieldValue::l(1000));
        Broker::queue(&channel, QUEUE, arguments).await;
        let setup = humus::Setup::new();
        let humus = Publisher::new(
            &setup,
            PublisherSettings {
                uri: broker.uri(),
                ..PublisherSettings::default()
            },
        )
        .unwrap();
        let peers = [
            Peer::Bare(Bare::open(broker.port).await, false),
            Peer::Humus(humus),
            Peer::Bare(Bare::open(broker.port).await, false),
            Peer::Bare(Bare::open(broker.port).await, true),
        ];
        if let Ok(profile) = std::env::var("HUMUS_RABBITMQ_BENCH_PROFILE") {
            let peer = &peers[if profile == "humus" { 1 } else { 0 }];
            let batch: usize = std::env::var("HUMUS_RABBITMQ_BENCH_BATCH")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(1);
            for _ in 0..20_000 / batch {
                join_all((0..batch).map(|_| peer.publish())).await;
            }
            return;
        }
        for peer in &peers {
            for _ in 0..WARM_UP {
                peer.publish().await;
            }
        }

        let mut one: Vec<Vec<Duration>> = vec![Vec::with_capacity(ROUNDS); PEERS.len()];
        for round in 0..ROUNDS {
            for k in 0..PEERS.len() {
                let i = (round + k) % PEERS.len();
                let started = Instant::now();
                peers[i].publish().await;
                one[i].push(started.elapsed());
            }
        }
        let mut batch: Vec<Vec<Duration>> = vec![Vec::with_capacity(BATCH_ROUNDS); PEERS.len()];
        for round in 0..BATCH_ROUNDS {
            for k in 0..PEERS.len() {
                let i = (round + k) % PEERS.len();
                let started = Instant::now();
                join_all((0..CONCURRENCY).map(|_| peers[i].publish())).await;
                batch[i].push(started.elapsed());
            }
        }

        let one: Vec<Duration> = one.into_iter().map(median).collect();
        let batch: Vec<Duration> = batch.into_iter().map(median).collect();
        println!(
            "rabbitmq publish + confirm, interleaved ({ROUNDS} rounds one at a time, {BATCH_ROUNDS} rounds of {CONCURRENCY} at once)"
        );
        println!(
            "{:<10} {:>14} {:>8} {:>16} {:>14} {:>8}",
            "peer", "latency p50", "ratio", "batch of 64 p50", "msg/s", "ratio"
        );
        let base_rate = CONCURRENCY as f64 / batch[0].as_secs_f64();
        for (i, name) in PEERS.iter().enumerate() {
            let rate = CONCURRENCY as f64 / batch[i].as_secs_f64();
            println!(
                "{name:<10} {:>14.1?} {:>8.3} {:>16.1?} {:>14.0} {:>8.3}",
                one[i],
                one[i].as_secs_f64() / one[0].as_secs_f64(),
                batch[i],
                rate,
                rate / base_rate
            );
        }
        setup.stop().await;
    });
}
