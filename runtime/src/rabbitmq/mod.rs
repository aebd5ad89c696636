//! RabbitMQ (feature `rabbitmq`): a [`Publisher`] whose every publish is
//! confirmed by the broker, with the clients' retries, budget, breaker,
//! failure injection and telemetry; and a [`Consumer`] that hands each
//! delivery of a queue to the service's processor, in the delivery's trace
//! context, and loses none; on [amqprs](https://docs.rs/amqprs/2), an AMQP
//! 0-9-1 client that runs on the service's tokio runtime.
//!
//! # Publishing
//!
//! ```no_run
//! use humus::App;
//! use humus::app::{Error, Exit, check_rabbitmq_publisher};
//! use humus::rabbitmq::{BasicProperties, Publisher, PublisherSettings};
//!
//! #[tokio::main]
//! async fn main() -> Exit {
//!     App::new()
//!         .run(|setup| async move {
//!             // ORDERS_URI=amqp://orders:secret@rabbit:5672/shop ORDERS_BREAKER_OPEN_FOR=5s
//!             let settings: PublisherSettings =
//!                 envy::prefixed("ORDERS_").from_env().map_err(Error::settings)?;
//!             check_rabbitmq_publisher(&settings)?; // exit 78, naming every bad field
//!             // Closed by an on-stop hook of the Setup, after the servers stop.
//!             let orders = Publisher::new(&setup, settings)?;
//!             // In a handler: confirmed by the broker, or an error.
//!             orders
//!                 .publish("orders", "accepted", BasicProperties::default(), b"{}".to_vec())
//!                 .await
//!                 .map_err(Error::other)?;
//!             Ok(vec![])
//!         })
//!         .await
//! }
//! ```
//!
//! One [`Publisher`] is one broker: one connection and one channel, dialled
//! on the first publish, one retry budget and one circuit breaker, shared by
//! every clone. [`PublisherSettings`] lists each field with its default and
//! check: the URI as [`check_uri`] checks it, TLS for `amqps://`, and the
//! same `timeout`, `attempt_timeout`, `max_attempts`, `retry_budget`,
//! `backoff_*`, `breaker` and `forward_scenario` as the HTTP client's,
//! read by serde the same way.
//!
//! Each publish is a call on the attempt loop every humus client runs on
//! ([design](crate::design::client#retries)):
//!
//! 1. the breaker admits the attempt (or the publish fails,
//!    [`PublishErrorKind::Rejected`], nothing sent);
//! 2. the failure-injection point `rabbitmq:<exchange>:<routing key>`
//!    ([`Publisher::point`], leaving out what is empty:
//!    `rabbitmq:orders:accepted`) is evaluated in the attempt's context,
//!    once per attempt; an abort sends nothing and fails the attempt as a
//!    lost connection does ([`PublishErrorKind::Connection`], its message
//!    `rabbitmq: publishing to orders:accepted: fit: injected failure at
//!    rabbitmq:orders:accepted`), so both are classified alike; a delay is
//!    waited within the attempt's deadline;
//! 3. the message is sent, `mandatory`, its headers carrying the attempt's
//!    trace context and the call's baggage (written by the Setup's
//!    propagator over the caller's headers of the same names), the failure
//!    scenario stripped unless
//!    [`forward_scenario`](PublisherSettings::forward_scenario) (a
//!    `humus.fit.strip` event on the attempt's span);
//! 4. the attempt waits for the broker's confirm (publisher confirms,
//!    `confirm.select`, on the channel) within its deadline, the smaller
//!    of [`attempt_timeout`](PublisherSettings::attempt_timeout) and what
//!    is left of the call's [`timeout`](PublisherSettings::timeout) (or of
//!    the served RPC's deadline);
//! 5. the result is classified ([`default_classify`], overridable with
//!    [`PublisherSettings::classify`]): a lost connection or channel
//!    before the confirm, a nack, or no confirm within the attempt's
//!    timeout is retried and a breaker failure; no confirm within the
//!    call's deadline is a failure that ends the call
//!    ([`PublishErrorKind::Timeout`]); a return (no queue bound for the
//!    routing key, [`PublishErrorKind::Unroutable`]) or a channel the broker
//!    closed over the publish (an exchange that does not exist,
//!    [`PublishErrorKind::Refused`]) is the caller's: not retried, counted
//!    nothing against the broker. Retries are bounded by `max_attempts`,
//!    the retry budget and the deadline. A caller that drops the publish
//!    counts nothing.
//!
//! **At least once.** A publish retried after its confirm was lost (the
//! connection dropped, or the attempt's time ran out, after the broker took
//! the message) may be delivered twice; consumers should be idempotent (a
//! message id helps them tell).
//!
//! **The connection.** It is dialled on the first publish, and again after
//! it is lost, with the gRPC client's connection backoff: 1 s after the
//! first failure, growing 1.6 times to
//! [`connect_backoff_max`](PublisherSettings::connect_backoff_max) (120 s),
//! ±20 % jitter. While it waits, an attempt fails at once as a lost
//! connection (and is retried within the call's bounds); each failed dial
//! and each lost connection is a WARN log record
//! `humus.rabbitmq.connection`. A channel the broker closed (a refused
//! publish) is opened again at once on the same connection. amqprs opens
//! its TCP connection itself, so the publisher does not dial through the
//! Setup's [`Host`](crate::Host).
//!
//! **Stopping.** [`Publisher::new`] registers [`Publisher::close`] as an
//! on-stop hook of the Setup, so an [`App`](crate::App) closes the
//! channel and the connection once its servers have stopped; a publish
//! after it fails at once ([`PublishErrorKind::Closed`], `the publisher is
//! closed`), and one waiting for its next attempt ends.
//!
//! **Telemetry**, through the Setup's providers, never the globals: each
//! attempt is a span of kind PRODUCER named `publish <exchange>`
//! (`publish amq.default` for the default exchange), a child of the
//! call's span, in the scope
//! [`RABBITMQ_SCOPE`](crate::telemetry::names::RABBITMQ_SCOPE), with
//! `messaging.system` = `rabbitmq`, `messaging.operation.name` =
//! `publish`, `messaging.operation.type` = `send`,
//! `messaging.destination.name` (the exchange),
//! `messaging.rabbitmq.destination.routing_key` (when not empty),
//! `messaging.message.id` (when set), `server.address` and `server.port`;
//! a failed attempt has `error.type` (its kind, or
//! [`fault::ERROR_TYPE`](crate::fault::ERROR_TYPE) for an injected
//! failure) and status Error. `messaging.client.operation.duration`
//! (seconds) records each attempt and `messaging.client.sent.messages`
//! each attempt that sent its message, with `error.type` when it was not
//! confirmed. The breaker's and the retries' instruments and log records
//! (`humus.circuit.*`, `humus.retry.decisions`) are the other clients',
//! by the broker's `server.address` and `server.port`.
//!
//! ```no_run
//! use humus::App;
//! use humus::app::{Error, Exit, check_rabbitmq_consumer};
//! use humus::rabbitmq::{Consumer, ConsumerSettings, Delivery, TrustScenario};
//!
//! #[tokio::main]
//! async fn main() -> Exit {
//!     App::new()
//!         .run(|setup| async move {
//!             // ORDERS_URI=amqp://orders:secret@rabbit:5672/shop ORDERS_QUEUE=accepted
//!             let mut orders: ConsumerSettings =
//!                 envy::prefixed("ORDERS_").from_env().map_err(Error::settings)?;
//!             orders.trust_scenario = Some(TrustScenario::user_ids(["chaos-tool"]));
//!             check_rabbitmq_consumer(&orders)?; // exit 78, naming every bad field
//!             // Consumes until the App stops (an on-stop hook of the Setup).
//!             Consumer::start(&setup, orders, |delivery: Delivery| async move {
//!                 // Runs in the delivery's context: its trace, its baggage.
//!                 println!("order {} bytes", delivery.body().len());
//!                 Ok(())
//!             })?;
//!             Ok(vec![])
//!         })
//!         .await
//! }
//! ```
//!
//! # Consuming: settings
//!
//! [`ConsumerSettings`] lists each field with its default, unit and check.
//! The broker is named by one URI, `amqp://user:password@host:port/vhost`
//! (`amqps://` for TLS), checked by [`check_uri`]. The queue must exist:
//! the consumer declares nothing, so the queue's type and arguments (a
//! dead-letter exchange, a delivery limit) stay where the broker's
//! operators set them.
//!
//! # Processing, acks and redelivery
//!
//! The broker sends up to [`prefetch`](ConsumerSettings::prefetch)
//! deliveries before the first is acked, and the consumer processes them
//! at once, each in a task of its own. Nothing is lost:
//!
//! - a delivery is acked only after its processor returned `Ok`;
//! - a processor's error hands the delivery back to the broker (a
//!   `basic.nack` with requeue), which delivers it again, to this consumer
//!   or another, with its `redelivered` flag set. The hand-back waits
//!   first, a full-jitter exponential backoff from
//!   [`backoff_base`](ConsumerSettings::backoff_base) to
//!   [`backoff_max`](ConsumerSettings::backoff_max) that grows with the
//!   processor's failures in a row and resets at its next success, so a
//!   processor that keeps failing (its database down) does not spin
//!   through the queue. A quorum queue with a delivery limit
//!   (`x-delivery-limit`) and a dead-letter exchange moves a delivery that
//!   keeps failing there instead; a classic queue delivers it again until
//!   it succeeds;
//! - a lost connection leaves every unacked delivery to the broker, which
//!   delivers it again; the consumer connects again after gRPC's
//!   connection backoff (1 s, growing 1.6 times to
//!   [`connect_backoff_max`](ConsumerSettings::connect_backoff_max),
//!   ±20 % jitter). A processor still running then is dropped. Each
//!   failed attempt and each lost connection is a log record (below).
//!
//! Delivery is at least once: a processor may see a message twice (its
//! ack lost with the connection, or the consumer stopped past its grace),
//! so processing should be idempotent.
//!
//! # Stopping
//!
//! [`Consumer::start`] registers the consumer's [`stop`](Consumer::stop)
//! as an on-stop hook of the [`Setup`](crate::Setup), so an
//! [`App`](crate::App) stops it once its servers have stopped, and before
//! the clients built before it close. The stop cancels the consumption (no
//! new delivery), hands back what was delivered but not started, lets the
//! deliveries in flight finish within
//! [`shutdown_grace`](ConsumerSettings::shutdown_grace) (5 s), acking each
//! that succeeds, drops the rest (the broker delivers them again), and
//! closes the channel and the connection. The App's
//! [`stop_timeout`](crate::App::stop_timeout) bounds the hooks: keep the
//! grace well below it.
//!
//! # Failure scenarios and trust
//!
//! A failure scenario in a delivery's baggage reaches the processor's
//! context (and so every humus client it calls) only from a publisher the
//! consumer trusts. With the Setup's failure injection on (or
//! [strip-only](crate::fault::Injector::strip_only)), each delivery that
//! carries a scenario is shown to
//! [`trust_scenario`](ConsumerSettings::trust_scenario) before the
//! processor runs; one it does not trust, and every one when it is unset
//! (the default: trust no publisher), has the scenario stripped from its
//! context and from its `baggage` header, every other member kept, and a
//! `humus.fit.strip` event on its span
//! ([design](crate::design::failure_injection)). The strip is the one
//! every server entry point runs: it reads the `baggage` header itself,
//! whatever propagator the telemetry uses, and drops a `baggage` header
//! it cannot read whole (over W3C Baggage's limits, or not a string),
//! trusted publisher or not.
//!
//! Trust a publisher by its `user_id` ([`TrustScenario::user_ids`]):
//! RabbitMQ refuses a message whose `user_id` property is not the user of
//! the connection that published it, so the property names the publisher,
//! where a header could say anything. A panic in the trust function, as
//! in a processor, is not caught: it ends the consumer (what it had not
//! acked is delivered again) and comes out of [`Consumer::stop`], so out
//! of the App's stop.
//!
//! # Telemetry
//!
//! Through the Setup's providers, never the globals, in the scope
//! [`RABBITMQ_SCOPE`](crate::telemetry::names::RABBITMQ_SCOPE), after
//! OpenTelemetry's messaging conventions:
//!
//! - each delivery is one span of kind CONSUMER named `process <queue>`, a
//!   child of the span its publisher's context carries (read from its
//!   headers by the Setup's propagator, through
//!   [`FieldTableExtractor`](crate::telemetry::FieldTableExtractor)), with
//!   `messaging.system` = `rabbitmq`, `messaging.operation.name` and
//!   `messaging.operation.type` = `process`, `messaging.destination.name`
//!   (the exchange), `messaging.destination.subscription.name` (the
//!   queue), `messaging.rabbitmq.destination.routing_key` (when not
//!   empty), `messaging.rabbitmq.message.delivery_tag`,
//!   `messaging.message.id` (when set), `server.address` and
//!   `server.port`; a processor's error sets its status to Error, with
//!   the error's message, and `error.type` = `_OTHER`. It ends once the
//!   delivery is acked or handed back;
//! - `messaging.process.duration` (a histogram, in seconds) records each
//!   processor's run, with `messaging.system`, `messaging.operation.name`,
//!   `messaging.destination.name`,
//!   `messaging.destination.subscription.name`, `server.address`,
//!   `server.port` and, on failure, `error.type`.
//!
//! - a failed connection attempt, or a lost connection, is a log record
//!   of severity WARN and event name `humus.rabbitmq.connection`
//!   ([`HUMUS_RABBITMQ_CONNECTION`](crate::telemetry::names::HUMUS_RABBITMQ_CONNECTION)):
//!   `rabbitmq consumer of orders on rabbit:5672: could not connect: …;
//!   connecting again in 1.6s` (a plain line on standard error for an App
//!   given no telemetry function).
//!
//! The processor runs with the delivery's context current (its span and
//! baggage), so the calls it makes are children of the delivery's span
//! and carry its baggage. A publisher puts its context in a message's
//! headers with [`FieldTableInjector`](crate::telemetry::FieldTableInjector)
//! and the Setup's propagator.
//!
//! # The client library
//!
//! amqprs runs as tasks on the service's tokio runtime, and speaks TLS
//! through tokio-rustls with the [`tls`](ConsumerSettings::tls) config.
//! It opens its TCP connection itself, so a consumer does not dial
//! through the Setup's [`Host`](crate::Host).

mod consumer;
mod error;
mod publisher;
mod publisher_settings;
mod settings;
mod uri;

pub use amqprs::{BasicProperties, FieldTable, FieldValue};
pub use consumer::{Consumer, Delivery};
pub use error::{PublishError, PublishErrorKind};
pub use publisher::Publisher;
pub use publisher_settings::{PublishClassify, PublishResult, PublisherSettings, default_classify};
pub use settings::{ConsumerSettings, TrustScenario, check_prefetch, check_queue};
pub use uri::{AMQP_PORT, AMQPS_PORT, check_uri};
