//! A timer kept a little ahead of now in the runtime's timer wheel while a
//! client makes calls, so that arming the deadline timers of its calls does
//! not wake a parked worker thread. The gRPC client's connection keeps one
//! (its dial spawns the task, each call touches it), and so do the
//! RabbitMQ publisher (its dial, each publish), the Kafka producer and the
//! HTTP client (a call when the task is not running, each call).
//!
//! Every attempt with a deadline puts a timer in tokio's wheel, for the
//! call's deadline (and a tonic server in the same process arms one for
//! the `grpc-timeout` it receives). tokio wakes the thread parked on its driver
//! whenever a new timer expires before the driver's next planned wake-up,
//! so that the thread sleeps the right amount; with no other timer in the
//! wheel, that is the first timer of every call, seconds away, yet paid on
//! the call's path: an `eventfd` write, a thread woken to find nothing to
//! do, and the work it may then steal. With the anchor's timer due within
//! [`PERIOD`], the driver plans to wake up before any deadline of
//! [`PERIOD`] or more, and arming one is a plain insertion.
//!
//! It pays off when calls come faster than one a [`PERIOD`]: the anchor
//! itself costs about two wake-ups a [`PERIOD`] (its timer, and its
//! re-arming), and the first call after a pause still wakes the driver (its
//! timer enters the wheel before the anchor's). So the anchor runs only
//! while the client is used: a task that re-arms its timer every
//! [`PERIOD`] while calls keep coming, stops after a whole period without
//! one (then costs nothing), and is woken again by the next call. It ends
//! at once when the client's connection is closed or dropped.
//!
//! Source: tokio's timer driver (`runtime::time`: a timer that expires
//! before `next_wake` unparks the driver); a scheduling cost of the
//! deadlines the client gives every call ([design](crate::design::client#deadlines)).
//!
//! ## Deadlines in order ([`Expiry`])
//!
//! A client whose calls all get the same timeout from when they are made
//! (the Kafka producer's `delivery_timeout`) has deadlines that come in the
//! order the calls are made. The anchor's task keeps them in a queue, in
//! that order, and sleeps until the first: a call's deadline is then a
//! push and a removal under a lock, instead of a timer of its own in
//! tokio's wheel (its registration, the wheel's lock, the entry's clearing:
//! several times the work, on the path of every call). When the first
//! deadline passes, the task wakes its call, whose [`Expiry`] reads the
//! clock and ends; tokio's timer wakes the task, so the bound is the same
//! (tokio's millisecond). A deadline that cannot wait in order (earlier
//! than the last one queued, as a deadline inherited from a served RPC),
//! or that finds no task to keep it (the anchor ended by the client's
//! close, its task gone with its runtime, or on a current-thread runtime
//! other than the call's, which runs it only while driven), is a timer of
//! its own, as before; the queue's calls are handed their own timers when
//! the anchor ends or its task goes.
//!
//! Not done: relying on librdkafka's own report of a record past
//! `message.timeout.ms` (which the Kafka producer's deadline is), without
//! any timer: librdkafka scans its queues for timed-out records once a
//! second (`rd_kafka_broker_producer_serve`, `rd_kafka_broker_toppar_msgq_scan`
//! in `rdkafka_broker.c`; the internal broker's scan, for a partition with
//! no leader, on the same second), so it reports up to a second late: the
//! bound would change.

#[cfg(feature = "kafka")]
use std::collections::VecDeque;
#[cfg(feature = "kafka")]
use std::future::Future;
#[cfg(feature = "kafka")]
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
#[cfg(feature = "kafka")]
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::sync::Notify;
#[cfg(feature = "kafka")]
use tokio::time::Instant;

/// How far ahead of now the anchor's timer is at most: a deadline at least
/// this far away (the default timeout is 10 s) never wakes a parked thread
/// while calls keep coming. It also sets how often the anchor wakes while
/// calls are made, and how soon it stops once they are not.
pub(crate) const PERIOD: Duration = Duration::from_secs(1);

/// Armed; no call since the last re-arm.
const UNUSED: u8 = 0;
/// Armed; a call since the last re-arm.
const USED: u8 = 1;
/// Not armed, waiting for a call.
const IDLE: u8 = 2;
/// Ended: the connection was closed or dropped.
const ENDED: u8 = 3;

/// The calls' side of the anchor.
#[derive(Debug, Default)]
pub(crate) struct Anchor {
    state: AtomicU8,
    wake: Notify,
    /// Whether its task is alive (the runtime that ran it may have been
    /// dropped, and the client used in another).
    running: AtomicBool,
    /// The calls' deadlines its task keeps, in order ([`Expiry`]).
    #[cfg(feature = "kafka")]
    deadlines: parking_lot::Mutex<Deadlines>,
    /// Wakes the task when a deadline comes first in the queue, and when
    /// the anchor ends.
    #[cfg(feature = "kafka")]
    due: Notify,
}

/// The deadlines in order: each with its call's waker, and an id to find
/// it by (ids grow in queue order). Only the Kafka producer queues
/// deadlines: the queue, and the task's duty of keeping it, are built with
/// the `kafka` feature alone.
#[cfg(feature = "kafka")]
#[derive(Debug, Default)]
struct Deadlines {
    /// Whether the task keeps them: false before it is spawned, once it
    /// is gone and once the anchor has ended (a deadline is then a timer
    /// of its own).
    open: bool,
    /// The runtime of the task when it is a current-thread one, which
    /// runs its tasks only while it is driven (`block_on`): then only
    /// that runtime's calls queue (another's would wait for a task that
    /// may not run). A multi-thread runtime runs its tasks while it lives
    /// (and its end closes the queue).
    single_thread: Option<tokio::runtime::Id>,
    /// The id the next deadline gets.
    next_id: u64,
    /// When the task's timer is due, if it sleeps on one: a deadline
    /// queued no earlier needs no wake-up (the task reads the queue again
    /// then), so that calls in order do not wake it, even one at a time
    /// (the queue empty between them).
    armed: Option<Instant>,
    queue: VecDeque<Queued>,
}

/// A queued deadline.
#[cfg(feature = "kafka")]
#[derive(Debug)]
struct Queued {
    id: u64,
    at: Instant,
    /// Its call's.
    waker: Waker,
}

#[cfg(feature = "kafka")]
impl Deadlines {
    /// The index of the deadline `id`, if it is still queued.
    fn find(&self, id: u64) -> Option<usize> {
        // Almost always the first: calls end in about the order they came.
        match self.queue.front() {
            Some(first) if first.id == id => Some(0),
            _ => self.queue.binary_search_by_key(&id, |q| q.id).ok(),
        }
    }
}

impl Anchor {
    /// A call is made: keeps the anchor armed. A relaxed load when it
    /// already is (every call but the first of a period).
    #[inline]
    pub(crate) fn touch(&self) {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state == USED || state == ENDED {
                return;
            }
            match self
                .state
                .compare_exchange(state, USED, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(IDLE) => {
                    // Stays a permit if the task is not waiting yet.
                    self.wake.notify_one();
                    return;
                }
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
    }

    /// Ends the anchor's task, at once (armed or idle); the calls waiting
    /// for a deadline in its queue each get a timer of their own.
    pub(crate) fn end(&self) {
        self.state.store(ENDED, Ordering::Release);
        // Wakes the task whether it waits for its timer or for a call (a
        // permit, if it waits for neither yet).
        self.wake.notify_one();
        #[cfg(feature = "kafka")]
        {
            self.due.notify_one();
            self.close_deadlines();
        }
    }

    /// Closes the queue of deadlines and wakes each call in it: finding
    /// its deadline gone before it passed, its [`Expiry`] arms a timer of
    /// its own.
    #[cfg(feature = "kafka")]
    fn close_deadlines(&self) {
        let queued = {
            let mut deadlines = self.deadlines.lock();
            deadlines.open = false;
            deadlines.armed = None;
            std::mem::take(&mut deadlines.queue)
        };
        for q in queued {
            q.waker.wake();
        }
    }

    /// A future that is ready at `at` (tokio's clock): kept in the
    /// anchor's queue when `in_order` (a deadline of the client's own
    /// timeout from when its call was made) and the queue takes it, else
    /// a timer of its own (see the [module](self) docs).
    #[cfg(feature = "kafka")]
    pub(crate) fn expiry(&self, at: Instant, in_order: bool) -> Expiry<'_> {
        Expiry {
            anchor: self,
            at,
            state: if in_order {
                ExpiryState::New
            } else {
                ExpiryState::Own
            },
            own: None,
        }
    }

    /// Queues the deadline `at` of the call `waker` wakes; its id, or
    /// `None` when the queue does not take it (no task keeps it, or a
    /// deadline later than `at` is queued).
    #[cfg(feature = "kafka")]
    fn queue(&self, at: Instant, waker: &Waker) -> Option<u64> {
        let (id, sooner) = {
            let mut deadlines = self.deadlines.lock();
            if !deadlines.open || deadlines.queue.back().is_some_and(|q| q.at > at) {
                return None;
            }
            if let Some(task) = deadlines.single_thread
                && tokio::runtime::Handle::try_current().map(|h| h.id()).ok() != Some(task)
            {
                return None;
            }
            let id = deadlines.next_id;
            deadlines.next_id += 1;
            deadlines.queue.push_back(Queued {
                id,
                at,
                waker: waker.clone(),
            });
            let sooner = deadlines.armed.is_none_or(|armed| at < armed);
            if sooner {
                deadlines.armed = Some(at);
            }
            (id, sooner)
        };
        if sooner {
            // The task waits for a deadline, or sleeps until a later one.
            self.due.notify_one();
        }
        Some(id)
    }

    /// The deadline `id` is still queued: keeps `waker` as its call's.
    /// `false` when it is not (passed, or the queue closed).
    #[cfg(feature = "kafka")]
    fn requeue(&self, id: u64, waker: &Waker) -> bool {
        let replaced = {
            let mut deadlines = self.deadlines.lock();
            let Some(i) = deadlines.find(id) else {
                return false;
            };
            let queued = &mut deadlines.queue[i];
            (!queued.waker.will_wake(waker))
                .then(|| std::mem::replace(&mut queued.waker, waker.clone()))
        };
        // The waker replaced dropped outside the lock.
        drop(replaced);
        true
    }

    /// The call of the deadline `id` ends: out of the queue.
    #[cfg(feature = "kafka")]
    fn dequeue(&self, id: u64) {
        let queued = {
            let mut deadlines = self.deadlines.lock();
            match deadlines.find(id) {
                Some(0) => deadlines.queue.pop_front(),
                Some(i) => deadlines.queue.remove(i),
                None => None,
            }
        };
        // Its waker dropped outside the lock.
        drop(queued);
    }

    /// Wakes the calls whose deadline has passed, and takes them out of
    /// the queue; the first deadline still to come, which the task then
    /// sleeps until ([`Deadlines::armed`]).
    #[cfg(feature = "kafka")]
    fn fire(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut passed = Vec::new();
        let next = {
            let mut deadlines = self.deadlines.lock();
            while deadlines.queue.front().is_some_and(|q| q.at <= now) {
                passed.extend(deadlines.queue.pop_front());
            }
            deadlines.armed = deadlines.queue.front().map(|q| q.at);
            deadlines.armed
        };
        for q in passed {
            q.waker.wake();
        }
        next
    }

    /// The task's second duty: wakes each queued call at its deadline,
    /// until the anchor ends.
    #[cfg(feature = "kafka")]
    async fn keep_deadlines(&self) {
        loop {
            if self.state.load(Ordering::Acquire) == ENDED {
                return;
            }
            match self.fire() {
                Some(at) => tokio::select! {
                    biased;
                    () = self.due.notified() => {}
                    () = tokio::time::sleep_until(at) => {}
                },
                None => self.due.notified().await,
            }
        }
    }

    /// Spawns the anchor's task on the current runtime, unless it runs
    /// already or the anchor has ended (two loads then: a client may ask
    /// at every call).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (tokio's own panic): the client's dials,
    /// which spawn it, run inside one.
    #[inline]
    pub(crate) fn spawn(self: &Arc<Self>) {
        // The usual case, inlined into the caller: the task runs.
        if self.running.load(Ordering::Acquire) {
            return;
        }
        self.spawn_task();
    }

    /// [`spawn`](Anchor::spawn) when the task was not running: out of
    /// line, so a call's code holds only the one load above.
    #[cold]
    #[inline(never)]
    fn spawn_task(self: &Arc<Self>) {
        if self.running.load(Ordering::Acquire)
            || self.state.load(Ordering::Acquire) == ENDED
            || self.running.swap(true, Ordering::AcqRel)
        {
            return;
        }
        /// Marks the task gone however it goes: ended, or dropped with its
        /// runtime.
        struct Running(Arc<Anchor>);
        impl Drop for Running {
            fn drop(&mut self) {
                // Closed before `running` is cleared: a task spawned after
                // it opens the queue again.
                #[cfg(feature = "kafka")]
                self.0.close_deadlines();
                self.0.running.store(false, Ordering::Release);
            }
        }
        let runtime = tokio::runtime::Handle::current();
        #[cfg(feature = "kafka")]
        {
            let mut deadlines = self.deadlines.lock();
            deadlines.open = true;
            deadlines.single_thread = (runtime.runtime_flavor()
                == tokio::runtime::RuntimeFlavor::CurrentThread)
                .then(|| runtime.id());
        }
        let running = Running(Arc::clone(self));
        runtime.spawn(async move {
            let anchor = &running.0;
            #[cfg(feature = "kafka")]
            tokio::join!(anchor.keep(), anchor.keep_deadlines());
            #[cfg(not(feature = "kafka"))]
            anchor.keep().await;
        });
    }

    async fn keep(&self) {
        loop {
            // Armed: the timer is in the wheel until it fires, or until the
            // anchor ends (the only notification while armed).
            tokio::select! {
                biased;
                () = self.wake.notified() => {}
                () = tokio::time::sleep(PERIOD) => {}
            }
            match self
                .state
                .compare_exchange(USED, UNUSED, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => continue,
                Err(ENDED) => return,
                Err(_) => {}
            }
            // A period without a call: idle, unless one came just now.
            match self
                .state
                .compare_exchange(UNUSED, IDLE, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => self.wake.notified().await,
                Err(ENDED) => return,
                Err(_) => continue,
            }
            if self.state.load(Ordering::Acquire) == ENDED {
                return;
            }
        }
    }
}

/// A call's deadline ([`Anchor::expiry`]): ready once tokio's clock has
/// reached it. Kept in the anchor's queue when it can be, else a timer of
/// its own; out of the queue when dropped.
#[cfg(feature = "kafka")]
pub(crate) struct Expiry<'a> {
    anchor: &'a Anchor,
    at: Instant,
    state: ExpiryState,
    /// Its own timer, once it has one (boxed: only a deadline the queue
    /// does not keep has one, and the call's state stays small).
    own: Option<Pin<Box<tokio::time::Sleep>>>,
}

#[cfg(feature = "kafka")]
enum ExpiryState {
    /// To queue at its first wait.
    New,
    /// In the anchor's queue, with this id.
    Queued(u64),
    /// A timer of its own.
    Own,
}

#[cfg(feature = "kafka")]
impl Future for Expiry<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if let ExpiryState::New | ExpiryState::Queued(_) = this.state {
            let queued = match this.state {
                // Woken by the queue's task at its deadline, or by the
                // queue's close, or by the call's other future.
                ExpiryState::Queued(_) if Instant::now() >= this.at => return Poll::Ready(()),
                ExpiryState::Queued(id) => this.anchor.requeue(id, cx.waker()).then_some(id),
                // No clock read: a deadline that has already passed is
                // fired by the task as soon as it reads the queue (its
                // own, or an earlier one's, timer is due).
                _ => this.anchor.queue(this.at, cx.waker()),
            };
            match queued {
                Some(id) => {
                    this.state = ExpiryState::Queued(id);
                    return Poll::Pending;
                }
                None => this.state = ExpiryState::Own,
            }
        }
        this.own
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(this.at)))
            .as_mut()
            .poll(cx)
    }
}

#[cfg(feature = "kafka")]
impl Drop for Expiry<'_> {
    fn drop(&mut self) {
        if let ExpiryState::Queued(id) = self.state {
            self.anchor.dequeue(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lets the anchor's task run until it waits for time.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    /// The anchor's state.
    fn state(anchor: &Anchor) -> u8 {
        anchor.state.load(Ordering::Acquire)
    }

    /// A runtime of one thread with a clock, which a test drops to end
    /// the anchor's task with it.
    fn current_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn armed_while_used_idle_after_a_period_without_calls_and_woken_by_the_next() {
        let anchor = Arc::new(Anchor::default());
        anchor.spawn();
        anchor.touch();
        assert_eq!(state(&anchor), USED);
        for _ in 0..5 {
            tokio::time::sleep(PERIOD).await;
            settle().await;
            anchor.touch();
            assert_eq!(state(&anchor), USED, "re-armed while calls come");
        }
        tokio::time::sleep(PERIOD * 3).await;
        settle().await;
        assert_eq!(state(&anchor), IDLE, "idle after a period without calls");
        anchor.touch();
        settle().await;
        assert_eq!(state(&anchor), USED);
        tokio::time::sleep(PERIOD).await;
        settle().await;
        assert_eq!(state(&anchor), UNUSED, "armed again by the call");
    }

    #[test]
    fn spawned_again_once_its_runtime_is_gone_and_only_then() {
        let anchor = Arc::new(Anchor::default());
        let first = current_thread();
        first.block_on(async {
            anchor.spawn();
            anchor.spawn();
            settle().await;
        });
        assert_eq!(first.metrics().num_alive_tasks(), 1, "one task");
        assert!(anchor.running.load(Ordering::Acquire));
        drop(first);
        assert!(
            !anchor.running.load(Ordering::Acquire),
            "its task went with its runtime"
        );
        let second = current_thread();
        second.block_on(async {
            anchor.spawn();
            settle().await;
        });
        assert_eq!(second.metrics().num_alive_tasks(), 1, "running again");
        anchor.end();
        second.block_on(settle());
        assert_eq!(second.metrics().num_alive_tasks(), 0);
        second.block_on(async { anchor.spawn() });
        assert_eq!(
            second.metrics().num_alive_tasks(),
            0,
            "an ended anchor stays ended"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn end_ends_the_task_at_once_armed_or_idle() {
        for idle in [false, true] {
            let anchor = Arc::new(Anchor::default());
            let task = {
                let anchor = Arc::clone(&anchor);
                tokio::spawn(async move { anchor.keep().await })
            };
            anchor.touch();
            if idle {
                tokio::time::sleep(PERIOD * 3).await;
                settle().await;
                assert_eq!(state(&anchor), IDLE);
            }
            anchor.end();
            let ending = tokio::time::Instant::now();
            task.await.unwrap();
            assert_eq!(ending.elapsed(), Duration::ZERO, "ended without its timer");
            anchor.touch();
            assert_eq!(
                state(&anchor),
                ENDED,
                "a call after the end changes nothing"
            );
        }
    }

    #[cfg(feature = "kafka")]
    /// Polls `expiry` once, in the current task; whether it was ready.
    async fn poll_once(expiry: &mut Pin<&mut Expiry<'_>>) -> bool {
        std::future::poll_fn(|cx| Poll::Ready(expiry.as_mut().poll(cx).is_ready())).await
    }

    #[cfg(feature = "kafka")]
    fn queued(anchor: &Anchor) -> usize {
        anchor.deadlines.lock().queue.len()
    }

    #[cfg(feature = "kafka")]
    #[tokio::test(start_paused = true)]
    async fn deadlines_in_order_wait_in_the_queue_and_each_ends_at_its_own() {
        let anchor = Arc::new(Anchor::default());
        anchor.spawn();
        let start = Instant::now();
        let first = anchor.expiry(start + Duration::from_secs(1), true);
        let second = anchor.expiry(start + Duration::from_secs(2), true);
        tokio::pin!(first, second);
        assert!(!poll_once(&mut first).await);
        assert!(!poll_once(&mut second).await);
        assert_eq!(queued(&anchor), 2, "no timer of their own");
        assert!(first.own.is_none() && second.own.is_none());
        first.await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        second.await;
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        assert_eq!(queued(&anchor), 0);
    }

    #[cfg(feature = "kafka")]
    #[tokio::test(start_paused = true)]
    async fn a_dropped_deadline_leaves_the_queue_at_once() {
        let anchor = Arc::new(Anchor::default());
        anchor.spawn();
        let at = Instant::now() + Duration::from_secs(1);
        let mut kept = Box::pin(anchor.expiry(at, true));
        let mut dropped = Box::pin(anchor.expiry(at, true));
        assert!(!poll_once(&mut kept.as_mut()).await);
        assert!(!poll_once(&mut dropped.as_mut()).await);
        assert_eq!(queued(&anchor), 2);
        drop(kept);
        assert_eq!(queued(&anchor), 1, "the first out");
        drop(dropped);
        assert_eq!(queued(&anchor), 0);
    }

    #[cfg(feature = "kafka")]
    #[tokio::test(start_paused = true)]
    async fn a_deadline_out_of_order_or_without_a_task_has_a_timer_of_its_own() {
        let start = Instant::now();
        let idle = Arc::new(Anchor::default());
        let anchor = Arc::new(Anchor::default());
        anchor.spawn();
        let later = anchor.expiry(start + Duration::from_secs(5), true);
        let earlier = anchor.expiry(start + Duration::from_secs(1), true);
        let inherited = anchor.expiry(start + Duration::from_secs(2), false);
        let no_task = idle.expiry(start + Duration::from_secs(3), true);
        tokio::pin!(later, earlier, inherited, no_task);
        for expiry in [&mut later, &mut earlier, &mut inherited, &mut no_task] {
            assert!(!poll_once(expiry).await);
        }
        assert_eq!(queued(&anchor), 1, "only the first in order");
        assert!(earlier.own.is_some() && inherited.own.is_some() && no_task.own.is_some());
        earlier.await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        inherited.await;
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        no_task.await;
        assert_eq!(start.elapsed(), Duration::from_secs(3));
        later.await;
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    #[cfg(feature = "kafka")]
    #[tokio::test(start_paused = true)]
    async fn a_queued_deadline_outlives_the_anchors_end_on_a_timer_of_its_own() {
        let anchor = Arc::new(Anchor::default());
        anchor.spawn();
        let start = Instant::now();
        let expiry = anchor.expiry(start + Duration::from_secs(1), true);
        tokio::pin!(expiry);
        assert!(!poll_once(&mut expiry).await);
        assert_eq!(queued(&anchor), 1);
        anchor.end();
        assert_eq!(queued(&anchor), 0, "handed back at the end");
        assert!(
            !poll_once(&mut expiry).await,
            "not ended by the anchor's end"
        );
        assert!(expiry.own.is_some());
        expiry.await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        let after = anchor.expiry(start + Duration::from_secs(2), true);
        tokio::pin!(after);
        assert!(!poll_once(&mut after).await);
        assert!(after.own.is_some(), "an ended anchor queues nothing");
        after.await;
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }

    #[cfg(feature = "kafka")]
    #[tokio::test(start_paused = true)]
    async fn deadlines_one_at_a_time_wake_the_task_once() {
        let anchor = Arc::new(Anchor::default());
        anchor.spawn();
        settle().await;
        let start = Instant::now();
        let timeout = Duration::from_secs(10);
        for i in 0..5 {
            let at = start + Duration::from_millis(i) + timeout;
            let mut expiry = Box::pin(anchor.expiry(at, true));
            assert!(!poll_once(&mut expiry.as_mut()).await);
            if i == 0 {
                settle().await;
            }
            assert_eq!(
                anchor.deadlines.lock().armed,
                Some(start + timeout),
                "the task sleeps until the first call's deadline"
            );
            drop(expiry);
            assert_eq!(queued(&anchor), 0);
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        // Its timer due, it finds the queue empty, and waits for a deadline.
        tokio::time::sleep_until(start + timeout).await;
        settle().await;
        assert_eq!(anchor.deadlines.lock().armed, None);
    }

    #[cfg(feature = "kafka")]
    #[test]
    fn a_current_thread_runtimes_task_keeps_only_its_own_runtimes_deadlines() {
        let anchor = Arc::new(Anchor::default());
        let first = current_thread();
        first.block_on(async { anchor.spawn() });
        let second = current_thread();
        second.block_on(async {
            // The first runtime is not driven now: its task would not fire
            // this deadline.
            let at = Instant::now() + Duration::from_millis(20);
            let expiry = anchor.expiry(at, true);
            tokio::pin!(expiry);
            assert!(!poll_once(&mut expiry).await);
            assert_eq!(queued(&anchor), 0);
            assert!(expiry.own.is_some(), "a timer of its own");
            expiry.await;
            assert!(Instant::now() >= at);
        });
        first.block_on(async {
            let expiry = anchor.expiry(Instant::now() + Duration::from_secs(5), true);
            tokio::pin!(expiry);
            assert!(!poll_once(&mut expiry).await);
            assert_eq!(queued(&anchor), 1, "its own runtime's call queues");
        });
    }

    #[cfg(feature = "kafka")]
    #[test]
    fn a_queued_deadline_outlives_its_tasks_runtime_on_a_timer_of_its_own() {
        let anchor = Arc::new(Anchor::default());
        let first = current_thread();
        let at = std::time::Instant::now() + Duration::from_millis(20);
        let mut expiry = Box::pin(anchor.expiry(at.into(), true));
        first.block_on(async {
            anchor.spawn();
            assert!(!poll_once(&mut expiry.as_mut()).await);
            assert_eq!(queued(&anchor), 1);
        });
        drop(first);
        assert_eq!(queued(&anchor), 0, "handed back when its task went");
        current_thread().block_on(async {
            assert!(!poll_once(&mut expiry.as_mut()).await);
            assert!(expiry.own.is_some(), "a timer of its own");
            expiry.as_mut().await;
            assert!(Instant::now() >= at.into());
        });
    }
}
