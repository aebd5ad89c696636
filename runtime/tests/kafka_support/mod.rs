//! What the Kafka tests share: librdkafka's mock cluster (an in-process
//! broker speaking the Kafka protocol, started in milliseconds), a plain
//! rdkafka producer that writes humus's headers, the offsets a group
//! committed, and bounded waits (librdkafka keeps real time: no test here
//! runs on paused time).

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::time::Duration;

use humus::kafka::{ConsumerSettings, inject_context};
use humus::testing::Telemetry;
use opentelemetry::Context;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::OwnedHeaders;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{DefaultProducerContext, FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

/// The longest any wait of these tests takes before it fails: generous,
/// for a loaded 2-core machine (a record usually goes through in a few
/// milliseconds; a consumer joins its group in about a second).
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A mock cluster of one broker, with topics of one partition each.
pub struct Cluster {
    mock: MockCluster<'static, DefaultProducerContext>,
    producer: FutureProducer,
}

impl Cluster {
    /// A cluster with `topics` created (one partition each).
    pub fn new(topics: &[&str]) -> Cluster {
        let mock = MockCluster::new(1).expect("a mock cluster starts");
        for topic in topics {
            mock.create_topic(topic, 1, 1)
                .expect("the topic is created");
        }
        let producer = ClientConfig::new()
            .set("bootstrap.servers", mock.bootstrap_servers())
            .set("linger.ms", "0")
            .create()
            .expect("a producer of the mock cluster");
        Cluster { mock, producer }
    }

    /// The cluster's `host:port` brokers.
    pub fn brokers(&self) -> Vec<String> {
        self.mock
            .bootstrap_servers()
            .split(',')
            .map(str::to_owned)
            .collect()
    }

    /// Consumer settings for `group` on `topic`: quick commits and
    /// backoffs, a short grace.
    pub fn settings(&self, group: &str, topic: &str) -> ConsumerSettings {
        ConsumerSettings {
            brokers: self.brokers(),
            group: group.to_owned(),
            topics: vec![topic.to_owned()],
            backoff_base: Duration::from_millis(10),
            backoff_max: Duration::from_millis(50),
            commit_interval: Duration::from_millis(50),
            shutdown_grace: Duration::from_millis(200),
            ..ConsumerSettings::default()
        }
    }

    /// Produces `value` to `topic` with a plain rdkafka producer, its
    /// headers written by humus's carrier from `cx` with `telemetry`'s
    /// propagator; waits until the broker stored it.
    pub async fn produce(&self, telemetry: &Telemetry, cx: &Context, topic: &str, value: &str) {
        let headers = inject_context(telemetry.telemetry().propagator(), cx, OwnedHeaders::new());
        self.producer
            .send(
                FutureRecord::<(), str>::to(topic)
                    .payload(value)
                    .headers(headers),
                Duration::ZERO,
            )
            .await
            .expect("the record is stored");
    }

    /// Takes the cluster's broker down: it refuses connections, so
    /// records are not stored until it is back.
    pub fn broker_down(&self) {
        self.mock.broker_down(1).expect("the broker goes down");
    }

    /// Brings the cluster's broker back.
    pub fn broker_up(&self) {
        self.mock.broker_up(1).expect("the broker comes back");
    }

    /// How many records `topic`'s partition 0 holds (its high watermark).
    pub async fn stored(&self, topic: &str) -> i64 {
        let brokers = self.mock.bootstrap_servers();
        let topic = topic.to_owned();
        tokio::task::spawn_blocking(move || {
            let reader: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", brokers)
                .set("group.id", "humus-tests-watermarks")
                .create()
                .expect("a reader of the topic's watermarks");
            let (_low, high) = reader
                .fetch_watermarks(&topic, 0, PATIENCE)
                .expect("the topic's watermarks are read");
            high
        })
        .await
        .unwrap()
    }

    /// The offset `group` committed for `topic`'s partition 0 (the next
    /// record it would read), or `None` when it committed none.
    pub async fn committed(&self, group: &str, topic: &str) -> Option<i64> {
        let brokers = self.mock.bootstrap_servers();
        let (group, topic) = (group.to_owned(), topic.to_owned());
        tokio::task::spawn_blocking(move || {
            let reader: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", brokers)
                .set("group.id", &group)
                .create()
                .expect("a reader of the group's offsets");
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition(&topic, 0);
            let committed = reader
                .committed_offsets(tpl, PATIENCE)
                .expect("the group's offsets are read");
            match committed.find_partition(&topic, 0).map(|p| p.offset()) {
                Some(Offset::Offset(n)) => Some(n),
                _ => None,
            }
        })
        .await
        .unwrap()
    }
}

/// Waits until `check` holds, checking every 10 ms, for at most
/// [`PATIENCE`].
///
/// # Panics
///
/// When it still does not hold then, saying `what`.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited {PATIENCE:?} for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
