//! `Publisher`: publishes with confirms, each publish a call of the shared
//! attempt loop ([`crate::call`]).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;

use amqprs::callbacks::ChannelCallback;
use amqprs::channel::{BasicPublishArguments, Channel, ConfirmSelectArguments};
use amqprs::connection::Connection;
use amqprs::{Ack, BasicProperties, Cancel, CloseChannel, Nack, Return};
use opentelemetry::global::BoxedTracer;
use opentelemetry::logs::Severity;
use opentelemetry::metrics::{Counter, Histogram};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanBuilder, SpanKind, Status, TraceContextExt as _};
use opentelemetry::{Context, KeyValue};
use tokio::sync::{Notify, oneshot, watch};
use tokio::time::Instant;

use super::error::{PublishError, PublishErrorKind};
use super::publisher_settings::PublisherSettings;
use super::uri::AmqpUri;
use crate::call::{Anchor, Dependency, Refused, sections};
use crate::grpc::deadline::Inherited;
use crate::grpc::server::SettingsError;
use crate::telemetry::names::{
    ERROR_TYPE, HUMUS_RABBITMQ_CONNECTION, MESSAGING_CLIENT_OPERATION_DURATION,
    MESSAGING_CLIENT_SENT_MESSAGES, MESSAGING_DESTINATION_NAME, MESSAGING_MESSAGE_ID,
    MESSAGING_OPERATION_NAME, MESSAGING_OPERATION_PUBLISH, MESSAGING_OPERATION_TYPE,
    MESSAGING_OPERATION_TYPE_SEND, MESSAGING_RABBITMQ_ROUTING_KEY, MESSAGING_SYSTEM,
    MESSAGING_SYSTEM_RABBITMQ, RABBITMQ_SCOPE, SERVER_ADDRESS, SERVER_PORT,
};
use crate::telemetry::{BoxedLogger, ClientRecorder, scope};
use crate::{Setup, circuit, grpc, telemetry};

mod call;
use call::PublishCall;

/// A resilient publisher to one RabbitMQ broker: every publish waits for
/// the broker's confirm, runs on the shared attempt loop (the breaker, the
/// failure-injection point, retries bounded by the budget and the
/// deadline) and carries its context in the message's headers. See the
/// [module](super) docs.
///
/// One `Publisher` is one broker with one connection and one channel, one
/// retry budget and one breaker, shared by every publish and every task:
/// build it once where the service is set up and clone it (a cheap
/// handle).
#[derive(Clone)]
pub struct Publisher {
    inner: Arc<Inner>,
}

struct Inner {
    settings: PublisherSettings,
    uri: AmqpUri,
    /// `host:port`, what messages name the broker by.
    addr: String,
    /// The breaker, budget, backoff, recorder and failure injector every
    /// publish runs with.
    dependency: Dependency,
    telemetry: Arc<Instruments>,
    logger: BoxedLogger,
    /// The destinations published to lately, shared by their publishes.
    destinations: Destinations,
    /// The connection and channel, dialled on first use and again (after
    /// the connection backoff) once lost. Held across the dial and each
    /// `basic.publish` (the broker numbers a channel's publishes in the
    /// order it receives them), never across a confirm's wait.
    link: tokio::sync::Mutex<Link>,
    /// Set by [`Publisher::close`]: no attempt starts after it.
    closed: watch::Sender<bool>,
    /// `closed`'s value, set before it, which each attempt reads (on each
    /// wake-up) without the watch's lock.
    is_closed: AtomicBool,
    /// Keeps a timer ahead of the publishes' timers while publishes come
    /// (a channel's [`watch_deadlines`], and an attempt's that waits for
    /// the channel), so that registering one does not wake tokio's time
    /// driver: spawned by the dial, touched by each publish, ended by the
    /// close.
    anchor: Arc<Anchor>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.anchor.end();
    }
}

crate::debug::debug_fields!(Publisher {
    broker: |p| &p.inner.addr,
    closed: |p| p.inner.is_closed.load(Ordering::Acquire),
    ..
});

impl Publisher {
    /// Checks `settings` and builds the publisher of their broker, for
    /// `setup`: it records with `setup`'s telemetry, evaluates its failure
    /// injector, and registers [`close`](Publisher::close) as an on-stop
    /// hook, so an [`App`](crate::App) closes it once its servers have
    /// stopped. Connects nothing: the first publish dials.
    ///
    /// # Errors
    ///
    /// [`SettingsError`] naming every bad field.
    pub fn new(setup: &Setup, settings: PublisherSettings) -> Result<Publisher, SettingsError> {
        let uri = settings.checked()?;
        let addr = uri.addr();
        let recorder = ClientRecorder::new(setup.telemetry(), &addr);
        let bad = |field: &'static str, e: String| {
            SettingsError::one("rabbitmq publisher", addr.clone(), field, e)
        };
        let dependency =
            Dependency::new(setup, recorder, sections!(settings)).map_err(|e| match e {
                Refused::Breaker(e) => bad("breaker", e.to_string()),
                Refused::Budget(e) => bad("retry_budget", e.to_string()),
            })?;
        let telemetry = Arc::new(Instruments::new(setup.telemetry(), &uri));
        let publisher = Publisher {
            inner: Arc::new(Inner {
                logger: setup.telemetry().logger(scope(RABBITMQ_SCOPE)),
                settings,
                addr,
                uri,
                dependency,
                telemetry,
                destinations: Destinations::default(),
                link: tokio::sync::Mutex::new(Link::default()),
                closed: watch::Sender::new(false),
                is_closed: AtomicBool::new(false),
                anchor: Arc::default(),
            }),
        };
        let hook = publisher.clone();
        setup.on_stop_named(
            format!("closing the rabbitmq publisher of {}", publisher.inner.addr),
            move || async move { hook.close().await },
        );
        Ok(publisher)
    }

    /// The publisher's settings, as given to [`Publisher::new`].
    pub fn settings(&self) -> &PublisherSettings {
        &self.inner.settings
    }

    /// The readable state of the publisher's breaker.
    pub fn breaker_state(&self) -> circuit::State {
        self.inner.dependency.breaker.state()
    }

    /// The failure-injection point of a publish to `exchange` with
    /// `routing_key`: `rabbitmq:<exchange>:<routing key>`, leaving out what
    /// is empty (`rabbitmq:orders:accepted`, `rabbitmq:accepted` on the
    /// default exchange, `rabbitmq:orders` with no routing key).
    pub fn point(exchange: &str, routing_key: &str) -> String {
        let mut point = String::from("rabbitmq");
        for part in [exchange, routing_key] {
            if !part.is_empty() {
                point.push(':');
                point.push_str(part);
            }
        }
        point
    }

    /// Publishes `body` to `exchange` with `routing_key` and `properties`,
    /// in the current context, and waits for the broker's confirm: see
    /// [`publish_in`](Publisher::publish_in).
    ///
    /// # Errors
    ///
    /// As [`publish_in`](Publisher::publish_in).
    pub fn publish(
        &self,
        exchange: &str,
        routing_key: &str,
        properties: BasicProperties,
        body: Vec<u8>,
    ) -> impl Future<Output = Result<(), PublishError>> + Send + use<> {
        self.publish_in(Context::current(), exchange, routing_key, properties, body)
    }

    /// Publishes `body` to `exchange` (`""`: the default exchange) with
    /// `routing_key` and `properties`, in the context `cx` (its span is the
    /// parent of each attempt's, its baggage goes in the message's
    /// headers), and waits for the broker's confirm.
    ///
    /// Each attempt passes the breaker, then the failure-injection point
    /// [`point`](Publisher::point), then sends the message (`mandatory`,
    /// its headers carrying the attempt's trace context and the baggage,
    /// the failure scenario stripped unless
    /// [`forward_scenario`](PublisherSettings::forward_scenario)) and waits
    /// for its confirm, within the attempt's deadline. Its result is
    /// classified ([`PublisherSettings::classify`]); retries are bounded by
    /// `max_attempts`, the retry budget and the call's timeout.
    ///
    /// A publish retried after a lost confirm (the connection lost, or the
    /// attempt's time up, after the broker took the message) may be
    /// delivered twice: delivery is at least once.
    ///
    /// # Errors
    ///
    /// [`PublishError`] of the last attempt, or of the call: its
    /// [`kind`](PublishError::kind) says which, its message names the
    /// destination.
    pub fn publish_in(
        &self,
        cx: Context,
        exchange: &str,
        routing_key: &str,
        properties: BasicProperties,
        body: Vec<u8>,
    ) -> impl Future<Output = Result<(), PublishError>> + Send + use<> {
        let inherited = Inherited::current_deadline();
        let publisher = self.clone();
        let destination = self.inner.destinations.get(exchange, routing_key);
        async move {
            let inner = &*publisher.inner;
            let call = PublishCall::new(inner, cx, inherited, &destination, &properties, body);
            crate::call::Call::new(&inner.dependency.breaker, call)
                .run()
                .await
        }
    }

    /// Closes the publisher: no attempt starts after it (a publish fails
    /// at once, [`PublishErrorKind::Closed`]), one waiting for its next
    /// attempt ends, and the channel and connection are closed. The
    /// Setup's on-stop hook calls it. A second call returns at once.
    pub async fn close(&self) {
        self.inner.is_closed.store(true, Ordering::Release);
        if self.inner.closed.send_replace(true) {
            return;
        }
        self.inner.anchor.end();
        let session = self.inner.link.lock().await.session.take();
        if let Some(session) = session {
            let _ = session.channel.close().await;
            let _ = session.connection.close().await;
        }
    }
}

/// The connection and its channel, or when the next dial may be.
#[derive(Default)]
struct Link {
    session: Option<Session>,
    /// The last connection backoff, for the next (gRPC's growth).
    backoff: Option<Duration>,
    /// No dial before then: the connection backoff after a failure.
    next_dial: Option<Instant>,
    /// Why the last dial failed, or how the connection was lost.
    why: String,
}

/// One connection's channel, in confirm mode.
struct Session {
    connection: Connection,
    channel: Channel,
    confirms: Arc<Confirms>,
    /// The delivery tag the broker gives the next publish on the channel.
    next_tag: u64,
}

/// What the broker answers about a publish.
enum Confirm {
    Ack,
    Nack,
    Returned {
        code: u16,
        text: String,
    },
    /// The broker closed the channel.
    Closed {
        code: u16,
        text: String,
    },
    /// No confirm by the attempt's deadline: the channel's [`watch_deadlines`] ended
    /// the wait.
    TimedOut,
}

/// Where a publish goes: its exchange and routing key, shared by the
/// publishes to it (with their confirms, their spans and their errors).
pub(super) struct Destination {
    pub(super) exchange: Box<str>,
    pub(super) routing_key: Box<str>,
}

/// How many destinations [`Destinations`] keeps.
const RECENT_DESTINATIONS: usize = 8;

/// The destinations published to lately (at most
/// [`RECENT_DESTINATIONS`], the oldest replaced first): a publish to one
/// of them shares it rather than copying its exchange and routing key
/// again.
#[derive(Default)]
struct Destinations {
    recent: Mutex<(Vec<Arc<Destination>>, usize)>,
}

impl Destinations {
    /// The destination of `exchange` and `routing_key`: a recent one, or a
    /// new one that replaces the oldest.
    fn get(&self, exchange: &str, routing_key: &str) -> Arc<Destination> {
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        let (list, next) = &mut *recent;
        if let Some(found) = list
            .iter()
            .find(|d| *d.exchange == *exchange && *d.routing_key == *routing_key)
        {
            return Arc::clone(found);
        }
        let made = Arc::new(Destination {
            exchange: exchange.into(),
            routing_key: routing_key.into(),
        });
        if list.len() < RECENT_DESTINATIONS {
            list.push(Arc::clone(&made));
        } else {
            list[*next] = Arc::clone(&made);
            *next = (*next + 1) % RECENT_DESTINATIONS;
        }
        made
    }
}

/// The publishes waiting for their confirm on one channel, and what
/// ends the waits that pass their attempt's deadline (the channel's
/// [`watch_deadlines`]).
#[derive(Default)]
struct Confirms {
    book: Mutex<Book>,
    /// Wakes the channel's [`watch_deadlines`]: a deadline earlier than the one it
    /// sleeps until, or the channel's end.
    wake: Notify,
}

/// What [`Confirms`] guards.
#[derive(Default)]
struct Book {
    /// The publishes sent and not yet answered, by delivery tag.
    pending: Tags,
    /// No pending publish has an earlier deadline: the [`watch_deadlines`] wakes
    /// then. It may be earlier than every one (a publish answered since
    /// leaves it), which costs the watch one wake-up that finds nothing.
    earliest: Option<Instant>,
    /// The channel's callback is gone: the watch ends.
    ended: bool,
}

/// A channel's pending publishes by delivery tag. The broker numbers a
/// channel's publishes 1, 2, 3… in the order it receives them, so they
/// are slots from the oldest pending one's tag (`base`): an insertion is a
/// push at the back, a removal empties its slot, and the empty slots at
/// the front are dropped (a B-tree's insertion and removal cost each
/// publish about 300 instructions more).
#[derive(Default)]
struct Tags {
    /// The tag of the first slot.
    base: u64,
    slots: VecDeque<Option<Pending>>,
}

impl Tags {
    /// `pending` waits with `tag` (a tag past the last one, or one whose
    /// publish was taken out unsent, sent again).
    fn insert(&mut self, tag: u64, pending: Pending) {
        if self.slots.is_empty() {
            self.base = tag;
        }
        while tag < self.base {
            self.slots.push_front(None);
            self.base -= 1;
        }
        let i = usize::try_from(tag - self.base).expect("the tags of publishes in flight");
        if i == self.slots.len() {
            // The next tag: the usual case.
            self.slots.push_back(Some(pending));
            return;
        }
        if self.slots.len() < i {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some(pending);
    }

    /// Takes out the publish of `tag`, if it waits.
    fn remove(&mut self, tag: u64) -> Option<Pending> {
        let i = usize::try_from(tag.checked_sub(self.base)?).ok()?;
        let pending = self.slots.get_mut(i)?.take();
        self.drop_empty();
        pending
    }

    /// Takes out every publish up to `tag` (a multiple confirm's), into
    /// `out`, in the order of their tags.
    fn take_through(&mut self, tag: u64, out: &mut Vec<Pending>) {
        while self.base <= tag
            && let Some(slot) = self.slots.pop_front()
        {
            self.base += 1;
            out.extend(slot);
        }
        self.drop_empty();
    }

    /// The empty slots at the front dropped.
    fn drop_empty(&mut self) {
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.base += 1;
        }
    }

    /// The publishes waiting, with their tags, in order.
    fn iter(&self) -> impl Iterator<Item = (u64, &Pending)> {
        (self.base..)
            .zip(&self.slots)
            .filter_map(|(tag, slot)| slot.as_ref().map(|p| (tag, p)))
    }

    /// Every publish waiting, taken out.
    fn into_pending(self) -> impl Iterator<Item = Pending> {
        self.slots.into_iter().flatten()
    }

    /// How many publishes wait.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.iter().flatten().count()
    }

    fn clear(&mut self) {
        self.slots.clear();
    }
}

struct Pending {
    tx: oneshot::Sender<Confirm>,
    destination: Arc<Destination>,
    /// The broker returned it (its `basic.return` precedes its confirm).
    returned: Option<(u16, String)>,
    /// The attempt's deadline, if it has one: at it the [`watch_deadlines`] ends the
    /// wait with [`Confirm::TimedOut`].
    deadline: Option<Instant>,
}

impl Confirms {
    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `pending`, sent with delivery tag `tag`, waits for its confirm.
    fn insert(&self, tag: u64, pending: Pending) {
        let deadline = pending.deadline;
        let earlier = {
            let mut book = self.lock();
            book.pending.insert(tag, pending);
            // The watch sleeps until `earliest`: woken only for an earlier
            // deadline (or a first one), so most publishes compare one.
            let earlier = deadline.is_some_and(|at| book.earliest.is_none_or(|e| at < e));
            if earlier {
                book.earliest = deadline;
            }
            earlier
        };
        if earlier {
            self.wake.notify_one();
        }
    }
}

/// Ends the wait of each publish on one channel whose attempt's deadline
/// passes before its confirm ([`Confirm::TimedOut`]), until the channel's
/// callback is gone: one timer for the channel, set for the earliest
/// deadline, rather than one for each attempt (registering a timer in
/// tokio's wheel and taking it out again cost each publish about 500
/// instructions, a tenth of the publisher's overhead over bare amqprs).
/// While publishes keep coming with the same `attempt_timeout`, each new
/// deadline is later than the one it sleeps until: it wakes once an
/// `attempt_timeout`, and a publish only compares its deadline with it.
///
/// Not the anchor's queue of deadlines (`call::anchor`'s `Expiry`):
/// a pending confirm already is an entry under the channel's lock, which
/// the deadline rides with, and its wait already is a `oneshot` the watch
/// can answer; so a publish adds no lock, no waker and no removal of its
/// own, and its deadline may come in any order (a call's deadline shorter
/// than `attempt_timeout`, publishes that take the channel in another
/// order than they started).
async fn watch_deadlines(confirms: Arc<Confirms>) {
    let mut expired = Vec::new();
    loop {
        let next = {
            let mut book = confirms.lock();
            if book.ended {
                return;
            }
            let now = Instant::now();
            if book.earliest.is_some_and(|at| at <= now) {
                let mut earliest: Option<Instant> = None;
                let mut tags = Vec::new();
                for (tag, p) in book.pending.iter() {
                    match p.deadline {
                        Some(at) if at <= now => tags.push(tag),
                        Some(at) => earliest = Some(earliest.map_or(at, |e| e.min(at))),
                        None => {}
                    }
                }
                expired.extend(tags.iter().filter_map(|tag| book.pending.remove(*tag)));
                book.earliest = earliest;
            }
            book.earliest
        };
        // Answered after the lock, as the callback answers.
        for p in expired.drain(..) {
            let _ = p.tx.send(Confirm::TimedOut);
        }
        match next {
            Some(at) => tokio::select! {
                () = tokio::time::sleep_until(at) => {}
                () = confirms.wake.notified() => {}
            },
            None => confirms.wake.notified().await,
        }
    }
}

/// The channel's callback: it settles each pending publish with its
/// confirm. Dropped when the channel's dispatcher ends (the channel or the
/// connection lost), it drops every pending publish's sender, which their
/// waits read as a lost connection.
struct Callback {
    confirms: Arc<Confirms>,
    /// Returns not yet matched with a pending publish.
    returns: VecDeque<Return>,
    /// Where [`Callback::settle`] puts the publishes a multiple confirm
    /// covers: empty between confirms, its room kept for the next.
    settled: Vec<Pending>,
}

impl Callback {
    /// Settles the publishes a confirm of `tag` (`multiple`: and every
    /// one before it) covers, matching the returns seen since the last
    /// confirm with the first covered publish of their exchange and routing
    /// key (RabbitMQ sends a message's `basic.return` before its confirm).
    fn settle(&mut self, tag: u64, multiple: bool, ack: bool) {
        // Taken out under the lock, answered after it: a publisher woken
        // by its answer does not find the lock still held.
        let mut one = None;
        let mut many = std::mem::take(&mut self.settled);
        {
            let pending = &mut self.confirms.lock().pending;
            if multiple {
                pending.take_through(tag, &mut many);
            } else {
                one = pending.remove(tag);
            }
        }
        // In the order of their tags.
        let settled: &mut [Pending] = match &mut one {
            Some(p) => std::slice::from_mut(p),
            None => &mut many,
        };
        // Most confirms follow no return: no drain to set up and drop.
        if !self.returns.is_empty() {
            for ret in self.returns.drain(..) {
                if let Some(p) = settled.iter_mut().find(|p| {
                    p.returned.is_none()
                        && *p.destination.exchange == **ret.exchange()
                        && *p.destination.routing_key == **ret.routing_key()
                }) {
                    p.returned = Some((ret.reply_code(), ret.reply_text().clone()));
                }
            }
        }
        let answer = |p: Pending| {
            let confirm = match p.returned {
                Some((code, text)) => Confirm::Returned { code, text },
                None if ack => Confirm::Ack,
                None => Confirm::Nack,
            };
            let _ = p.tx.send(confirm);
        };
        match one {
            Some(p) => answer(p),
            None => many.drain(..).for_each(answer),
        }
        self.settled = many;
    }
}

impl Drop for Callback {
    fn drop(&mut self) {
        {
            let mut book = self.confirms.lock();
            book.pending.clear();
            book.ended = true;
        }
        self.confirms.wake.notify_one();
    }
}

#[async_trait::async_trait]
impl ChannelCallback for Callback {
    async fn close(
        &mut self,
        _channel: &Channel,
        close: CloseChannel,
    ) -> Result<(), amqprs::error::Error> {
        let pending = std::mem::take(&mut self.confirms.lock().pending);
        for p in pending.into_pending() {
            let _ = p.tx.send(Confirm::Closed {
                code: close.reply_code(),
                text: close.reply_text().clone(),
            });
        }
        Ok(())
    }

    async fn cancel(
        &mut self,
        _channel: &Channel,
        _cancel: Cancel,
    ) -> Result<(), amqprs::error::Error> {
        Ok(())
    }

    async fn flow(
        &mut self,
        _channel: &Channel,
        active: bool,
    ) -> Result<bool, amqprs::error::Error> {
        Ok(active)
    }

    async fn publish_ack(&mut self, _channel: &Channel, ack: Ack) {
        self.settle(ack.delivery_tag(), ack.mutiple(), true);
    }

    async fn publish_nack(&mut self, _channel: &Channel, nack: Nack) {
        self.settle(nack.delivery_tag(), nack.multiple(), false);
    }

    async fn publish_return(
        &mut self,
        _channel: &Channel,
        ret: Return,
        _properties: BasicProperties,
        _content: Vec<u8>,
    ) {
        self.returns.push_back(ret);
    }
}

/// Removes a publish from the pending ones when its attempt ends without
/// its confirm (its time up, or the call dropped).
struct PendingGuard {
    /// `None` once the publish was answered ([`PendingGuard::answered`]).
    confirms: Option<Arc<Confirms>>,
    tag: u64,
}

impl PendingGuard {
    /// The publish's receiver returned: whoever answered it (a confirm, a
    /// return, the channel's close) or dropped its sender (the callback
    /// gone) took it out of the pending ones first, so there is nothing
    /// left to remove (and no lock to take).
    fn answered(mut self) {
        self.confirms = None;
    }
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        if let Some(confirms) = &self.confirms {
            confirms.lock().pending.remove(self.tag);
        }
    }
}

impl Inner {
    /// Opens a connection and a channel in confirm mode, within the
    /// connect timeout.
    async fn dial(&self) -> Result<Session, String> {
        let open = async {
            let name = format!("humus publisher of {}", self.addr);
            let connection = (self.uri.open(&name, self.settings.tls.as_ref()).await)
                .map_err(|e| e.to_string())?;
            let (channel, confirms) = open_channel(&connection).await?;
            Ok::<_, String>(Session {
                connection,
                channel,
                confirms,
                next_tag: 1,
            })
        };
        match tokio::time::timeout(self.settings.connect_timeout, open).await {
            Ok(session) => session,
            Err(_) => Err(format!(
                "connecting took over {:?} (connect_timeout)",
                self.settings.connect_timeout
            )),
        }
    }

    /// Sends one message on the channel (dialled first if need be), and
    /// what its confirm comes through: by `deadline` (the attempt's), if it
    /// has one, the confirm or [`Confirm::TimedOut`].
    ///
    /// The message's properties are made here, once the channel is held
    /// ([`PublishCall::properties`]), and go straight into amqprs's
    /// publish: an argument of this `async fn` (or a local across its
    /// wait for the channel) would be kept in its future for its whole
    /// life, twice the size of the properties (400 B) over what amqprs's
    /// publish keeps of them.
    async fn send(
        &self,
        call: &PublishCall<'_>,
        span: &mut PublishSpan<'_>,
        body: Vec<u8>,
        deadline: Option<Instant>,
    ) -> Result<(oneshot::Receiver<Confirm>, PendingGuard), PublishError> {
        let destination = call.destination;
        let lost = |detail: String| call.error(PublishErrorKind::Connection, detail);
        // By the attempt's deadline (`None`: it passed), as the dial, the
        // new channel and the publish below.
        let cut = || crate::call::Transport::deadline_exceeded(call);
        let mut link = match self.link.try_lock() {
            Ok(link) => link,
            Err(_) => within(deadline, self.link.lock()).await.ok_or_else(cut)?,
        };
        if link
            .session
            .as_ref()
            .is_some_and(|s| !s.connection.is_open())
        {
            // Lost since the last publish: the backoff starts now.
            link.session = None;
            self.failed(&mut link, "lost its connection".to_owned());
        }
        if let Some(session) = &mut link.session
            && !session.channel.is_open()
        {
            // The broker closed the channel (a publish it refused): a new
            // one on the same connection.
            // Boxed, as the dial below: a rare path whose futures would
            // otherwise size (and be copied with) every publish's state.
            let opened = Box::pin(within(deadline, open_channel(&session.connection)));
            match opened.await.ok_or_else(cut)? {
                Ok((channel, confirms)) => {
                    session.channel = channel;
                    session.confirms = confirms;
                    session.next_tag = 1;
                }
                Err(e) => {
                    link.session = None;
                    self.failed(&mut link, format!("could not open a channel: {e}"));
                    return Err(lost(link.why.clone()));
                }
            }
        }
        if link.session.is_none() {
            if self.is_closed.load(Ordering::Acquire) {
                return Err(call.error(PublishErrorKind::Closed, "the publisher is closed"));
            }
            if let Some(at) = link.next_dial {
                let now = Instant::now();
                if now < at {
                    return Err(lost(format!(
                        "not connected to {}: {}; connecting again in {}",
                        self.addr,
                        link.why,
                        humantime_serde::re::humantime::format_duration(round_millis(at - now))
                    )));
                }
            }
            // At the first dial, and again if the runtime that ran the
            // anchor's task is gone (and with it the connection).
            self.anchor.spawn();
            match Box::pin(within(deadline, self.dial()))
                .await
                .ok_or_else(cut)?
            {
                Ok(session) => {
                    link.session = Some(session);
                    link.backoff = None;
                    link.next_dial = None;
                }
                Err(e) => {
                    self.failed(&mut link, format!("could not connect: {e}"));
                    return Err(lost(format!("could not connect to {}: {e}", self.addr)));
                }
            }
        }
        let session = link.session.as_mut().expect("connected above");
        self.anchor.touch();
        let tag = session.next_tag;
        let (tx, rx) = oneshot::channel();
        let pending = Pending {
            tx,
            destination: Arc::clone(destination),
            returned: None,
            deadline,
        };
        session.confirms.insert(tag, pending);
        let guard = PendingGuard {
            confirms: Some(Arc::clone(&session.confirms)),
            tag,
        };
        // Made as is: the builder's `finish` would copy both names again.
        let args = BasicPublishArguments {
            // From the `str`s: a `Box<str>`'s `to_string` goes through
            // its `Display`, a formatter.
            exchange: String::from(&*destination.exchange),
            routing_key: String::from(&*destination.routing_key),
            mandatory: true,
            immediate: false,
        };
        let properties = call.properties(span);
        let published = Within {
            fut: session.channel.basic_publish(properties, body, args),
            timer: None,
            at: deadline,
        };
        // Cut by the deadline, nothing was sent: the publish waited for
        // room in amqprs's queue of outgoing frames.
        match published.await.ok_or_else(cut)? {
            Ok(()) => {
                session.next_tag += 1;
                span.sent = true;
                Ok((rx, guard))
            }
            Err(e) => {
                link.session = None;
                self.failed(&mut link, format!("lost its connection: {e}"));
                Err(lost(format!(
                    "the connection to {} was lost: {e}",
                    self.addr
                )))
            }
        }
    }

    /// A dial failed or the connection was lost (`why`): the next dial
    /// waits the connection backoff; a log record says so.
    fn failed(&self, link: &mut Link, why: String) {
        let (wait, next) =
            grpc::client::backoff_after(link.backoff, self.settings.connect_backoff_max);
        link.backoff = Some(next);
        link.next_dial = Some(Instant::now() + wait);
        self.logger.event(
            RABBITMQ_SCOPE,
            HUMUS_RABBITMQ_CONNECTION,
            Severity::Warn,
            || {
                format!(
                    "rabbitmq publisher to {}: {why}; connecting again in {}",
                    self.addr,
                    humantime_serde::re::humantime::format_duration(round_millis(wait))
                )
            },
        );
        link.why = why;
    }
}

/// Opens a channel on `connection` in confirm mode, with its callback.
async fn open_channel(connection: &Connection) -> Result<(Channel, Arc<Confirms>), String> {
    let channel = connection
        .open_channel(None)
        .await
        .map_err(|e| e.to_string())?;
    let confirms = Arc::new(Confirms::default());
    channel
        .register_callback(Callback {
            confirms: Arc::clone(&confirms),
            returns: VecDeque::new(),
            settled: Vec::new(),
        })
        .await
        .map_err(|e| e.to_string())?;
    channel
        .confirm_select(ConfirmSelectArguments::default())
        .await
        .map_err(|e| e.to_string())?;
    // Ends with the callback, that is with the channel (on the runtime
    // that runs the connection's tasks).
    tokio::spawn(watch_deadlines(Arc::clone(&confirms)));
    Ok((channel, confirms))
}

/// `fut`, ended at `at` if it has not ended by then (`None`).
async fn within<F: Future>(at: Option<Instant>, fut: F) -> Option<F::Output> {
    Within {
        fut,
        timer: None,
        at,
    }
    .await
}

pin_project_lite::pin_project! {
    /// The future of [`within`]: `fut`, polled first, and a timer for `at`
    /// made only when `fut` waits (most of a publish's steps end at their
    /// first poll, and then cost no timer). Boxed, the timer adds a
    /// pointer to every publish's state, not a `Sleep`.
    struct Within<F> {
        #[pin]
        fut: F,
        timer: Option<Pin<Box<tokio::time::Sleep>>>,
        at: Option<Instant>,
    }
}

impl<F: Future> Future for Within<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(output) = this.fut.poll(cx) {
            return Poll::Ready(Some(output));
        }
        let Some(at) = *this.at else {
            return Poll::Pending;
        };
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// `d` to the millisecond, for a message.
fn round_millis(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What the publisher records with, in the scope
/// [`RABBITMQ_SCOPE`](crate::telemetry::names::RABBITMQ_SCOPE): the
/// PRODUCER spans' tracer, and the messaging conventions' two instruments.
struct Instruments {
    tracer: Option<BoxedTracer>,
    duration: Option<Histogram<f64>>,
    sent: Option<Counter<u64>>,
    propagator: Arc<dyn TextMapPropagator + Send + Sync>,
    /// Whether the propagator writes any field (telemetry off: none), read
    /// once rather than asked of it at each publish.
    propagates: bool,
    server_address: KeyValue,
    server_port: KeyValue,
}

impl Instruments {
    fn new(telemetry: &telemetry::Telemetry, uri: &AmqpUri) -> Instruments {
        let inbound = telemetry.inbound(
            RABBITMQ_SCOPE,
            MESSAGING_CLIENT_OPERATION_DURATION,
            "Duration of messaging operation initiated by a producer or consumer client.",
        );
        let sent = inbound.duration.as_ref().map(|_| {
            telemetry
                .meter(scope(RABBITMQ_SCOPE))
                .u64_counter(MESSAGING_CLIENT_SENT_MESSAGES)
                .with_unit("{message}")
                .with_description("Number of messages producer attempted to send to the broker.")
                .build()
        });
        Instruments {
            tracer: inbound.tracer,
            duration: inbound.duration,
            sent,
            propagates: telemetry.shared_propagator().fields().next().is_some(),
            propagator: telemetry.shared_propagator(),
            server_address: KeyValue::new(SERVER_ADDRESS, uri.host.clone()),
            server_port: KeyValue::new(SERVER_PORT, i64::from(uri.port)),
        }
    }

    fn span_builder(
        &self,
        exchange: &str,
        routing_key: &str,
        message_id: Option<&str>,
    ) -> SpanBuilder {
        let mut attributes = vec![
            KeyValue::new(MESSAGING_SYSTEM, MESSAGING_SYSTEM_RABBITMQ),
            KeyValue::new(MESSAGING_OPERATION_NAME, MESSAGING_OPERATION_PUBLISH),
            KeyValue::new(MESSAGING_OPERATION_TYPE, MESSAGING_OPERATION_TYPE_SEND),
            KeyValue::new(MESSAGING_DESTINATION_NAME, exchange.to_owned()),
            self.server_address.clone(),
            self.server_port.clone(),
        ];
        if !routing_key.is_empty() {
            attributes.push(KeyValue::new(
                MESSAGING_RABBITMQ_ROUTING_KEY,
                routing_key.to_owned(),
            ));
        }
        if let Some(id) = message_id {
            attributes.push(KeyValue::new(MESSAGING_MESSAGE_ID, id.to_owned()));
        }
        let destination = if exchange.is_empty() {
            "amq.default"
        } else {
            exchange
        };
        SpanBuilder::from_name(format!("publish {destination}"))
            .with_kind(SpanKind::Producer)
            .with_attributes(attributes)
    }
}

/// One attempt's PRODUCER span (in its context) and its start.
struct PublishSpan<'a> {
    instruments: &'a Instruments,
    cx: Context,
    traced: bool,
    destination: &'a Destination,
    started: Option<Instant>,
    /// Whether the attempt sent its message.
    sent: bool,
    ended: bool,
}

impl PublishSpan<'_> {
    /// Ends the attempt: the span's status and `error.type`, the duration
    /// and, when it sent its message, one sent message.
    fn finish(&mut self, error: Option<(&'static str, String)>) {
        self.ended = true;
        if self.traced {
            let span = self.cx.span();
            if let Some((error_type, message)) = &error {
                span.set_attribute(KeyValue::new(ERROR_TYPE, *error_type));
                span.set_status(Status::error(message.clone()));
            }
            span.end();
        }
        let i = &self.instruments;
        let (Some(duration), Some(started)) = (&i.duration, self.started) else {
            return;
        };
        let mut attributes = vec![
            KeyValue::new(MESSAGING_SYSTEM, MESSAGING_SYSTEM_RABBITMQ),
            KeyValue::new(MESSAGING_OPERATION_NAME, MESSAGING_OPERATION_PUBLISH),
            KeyValue::new(
                MESSAGING_DESTINATION_NAME,
                String::from(&*self.destination.exchange),
            ),
            i.server_address.clone(),
            i.server_port.clone(),
        ];
        if let Some((error_type, _)) = error {
            attributes.push(KeyValue::new(ERROR_TYPE, error_type));
        }
        duration.record(started.elapsed().as_secs_f64(), &attributes);
        if self.sent
            && let Some(sent) = &i.sent
        {
            sent.add(1, &attributes);
        }
    }
}

impl Drop for PublishSpan<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.finish(Some((
                "canceled",
                "the publish was dropped before it ended".to_owned(),
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::sync::oneshot;
    use tokio::time::Instant;

    use super::{
        Callback, Confirm, Confirms, Destination, Destinations, Pending, RECENT_DESTINATIONS, Tags,
        watch_deadlines,
    };

    /// A publish sent with `tag`, waiting for its confirm until `deadline`.
    fn pend(
        confirms: &Confirms,
        tag: u64,
        deadline: Option<Instant>,
    ) -> oneshot::Receiver<Confirm> {
        let (tx, rx) = oneshot::channel();
        let destination = Arc::new(Destination {
            exchange: "".into(),
            routing_key: "q".into(),
        });
        confirms.insert(
            tag,
            Pending {
                tx,
                destination,
                returned: None,
                deadline,
            },
        );
        rx
    }

    /// How long `rx` waited for its answer from `start`, and whether it
    /// was the deadline's.
    async fn timed_out(start: Instant, rx: oneshot::Receiver<Confirm>) -> (Duration, bool) {
        let answer = tokio::time::timeout(Duration::from_secs(60), rx)
            .await
            .expect("answered within a minute");
        (start.elapsed(), matches!(answer, Ok(Confirm::TimedOut)))
    }

    #[test]
    fn pending_publishes_are_kept_by_tag_and_taken_out_in_order() {
        let pending = |tags: &Tags| -> Vec<u64> { tags.iter().map(|(tag, _)| tag).collect() };
        let confirms = Confirms::default();
        let mut receivers = Vec::new();
        for tag in 7..=12 {
            receivers.push(pend(&confirms, tag, None));
        }
        let mut book = confirms.lock();
        let tags = &mut book.pending;
        assert_eq!(pending(tags), [7, 8, 9, 10, 11, 12]);
        // Out of order, and one not waiting (or not yet sent).
        assert!(tags.remove(9).is_some());
        assert!(tags.remove(9).is_none());
        assert!(tags.remove(3).is_none());
        assert!(tags.remove(40).is_none());
        assert_eq!(pending(tags), [7, 8, 10, 11, 12]);
        // A multiple confirm of 10: 7, 8 and 10, in order.
        let mut many = Vec::new();
        tags.take_through(10, &mut many);
        assert_eq!(many.len(), 3);
        assert_eq!(pending(tags), [11, 12]);
        // The last one taken out unsent (its attempt cut), its tag sent
        // again; then the next.
        let again = tags.remove(12).unwrap();
        tags.insert(12, again);
        let next = tags.remove(11).unwrap();
        tags.insert(13, next);
        assert_eq!(pending(tags), [12, 13]);
        assert_eq!(tags.len(), 2);
        // Emptied, it starts again from the next tag.
        tags.take_through(13, &mut many);
        assert_eq!(tags.len(), 0);
        let p = many.pop().unwrap();
        tags.insert(14, p);
        assert_eq!(pending(tags), [14]);
        let taken: Vec<_> = std::mem::take(tags).into_pending().collect();
        assert_eq!(taken.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_channels_watch_ends_each_confirms_wait_at_its_deadline() {
        let confirms = Arc::new(Confirms::default());
        let watch = tokio::spawn(watch_deadlines(Arc::clone(&confirms)));
        let start = Instant::now();
        let five = Some(start + Duration::from_secs(5));
        let (rx1, rx2) = (pend(&confirms, 1, five), pend(&confirms, 2, five));
        let mut rx3 = pend(&confirms, 3, None);
        tokio::task::yield_now().await;
        // Earlier than the one the watch sleeps until: it is woken for it.
        let rx4 = pend(&confirms, 4, Some(start + Duration::from_secs(1)));
        assert_eq!(timed_out(start, rx4).await, (Duration::from_secs(1), true));
        // Confirmed before its deadline: left alone.
        let p1 = confirms.lock().pending.remove(1).unwrap();
        let _ = p1.tx.send(Confirm::Ack);
        assert!(matches!(rx1.await, Ok(Confirm::Ack)));
        assert_eq!(timed_out(start, rx2).await, (Duration::from_secs(5), true));
        // No deadline: never ended by the watch.
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(rx3.try_recv().is_err());
        assert_eq!(confirms.lock().pending.len(), 1);
        // The channel's callback gone, its waits end (the connection lost)
        // and so does the watch.
        drop(Callback {
            confirms: Arc::clone(&confirms),
            returns: VecDeque::new(),
            settled: Vec::new(),
        });
        assert!(rx3.await.is_err());
        tokio::time::timeout(Duration::from_secs(1), watch)
            .await
            .expect("the watch ends with the channel's callback")
            .unwrap();
    }

    #[test]
    fn a_destination_is_shared_by_its_publishes_and_the_oldest_is_replaced() {
        let destinations = Destinations::default();
        let first = destinations.get("orders", "eu");
        assert_eq!((&*first.exchange, &*first.routing_key), ("orders", "eu"));
        assert!(Arc::ptr_eq(&first, &destinations.get("orders", "eu")));
        // The same parts, told apart by where they go.
        let other = destinations.get("orderseu", "");
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!((&*other.exchange, &*other.routing_key), ("orderseu", ""));
        // Kept: the first and 7 more; one more replaces the oldest (the
        // first), which is then made again, as a new one.
        for key in 0..RECENT_DESTINATIONS - 1 {
            destinations.get("", &key.to_string());
        }
        assert!(Arc::ptr_eq(&other, &destinations.get("orderseu", "")));
        let again = destinations.get("orders", "eu");
        assert!(!Arc::ptr_eq(&first, &again));
        assert_eq!((&*again.exchange, &*again.routing_key), ("orders", "eu"));
        assert_eq!(
            destinations.recent.lock().unwrap().0.len(),
            RECENT_DESTINATIONS
        );
    }
}

#[cfg(test)]
mod sizes {
    use amqprs::BasicProperties;
    use amqprs::channel::Channel;
    use opentelemetry::Context;

    use super::call::PublishCall;
    use super::{Publisher, PublisherSettings};
    use crate::call::Transport as _;

    /// The size of the future `publish` returns given a channel.
    fn future_size<'a, F>(_: impl FnOnce(&'a Channel) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    #[test]
    fn a_publish_keeps_its_message_properties_once() {
        let setup = crate::Setup::new();
        let publisher = Publisher::new(
            &setup,
            PublisherSettings {
                uri: "amqp://127.0.0.1:5672".to_owned(),
                ..PublisherSettings::default()
            },
        )
        .unwrap();
        let inner = &*publisher.inner;
        let properties = BasicProperties::default();
        let destination = inner.destinations.get("", "q");
        let call = PublishCall::new(
            inner,
            Context::new(),
            None,
            &destination,
            &properties,
            vec![1],
        );
        let mut span = call.start(1);
        let send = inner.send(&call, &mut span, vec![1], None);
        // amqprs's publish keeps the properties (400 B) in its future; the
        // send adds its wait for the channel and its deadline (224 B with
        // the boxed timers of `Within`), not another copy of them (it was
        // 968 B over amqprs's, two copies of the properties).
        let amqprs = future_size(|c| {
            c.basic_publish(BasicProperties::default(), Vec::new(), Default::default())
        });
        let properties_size = std::mem::size_of::<BasicProperties>();
        let send_size = std::mem::size_of_val(&send);
        let over = send_size - amqprs;
        assert!(
            over < properties_size * 2 / 3,
            "send: {over} B over amqprs's"
        );
        drop(send);
        // The call borrows the properties the publish's future keeps.
        let call_size = std::mem::size_of_val(&call);
        assert!(
            call_size < properties_size / 2,
            "PublishCall: {call_size} B"
        );
        // The send is kept in the publish's future (not boxed: see
        // `PublishCall::send`); around it, the publish keeps the caller's
        // properties once (it was 1,648 B with the send boxed, the
        // properties kept twice).
        let publish = publisher.publish("", "q", BasicProperties::default(), vec![1]);
        let around = std::mem::size_of_val(&publish) - send_size;
        assert!(
            around < 3 * properties_size + 160,
            "publish: {around} B around its send"
        );
    }
}
