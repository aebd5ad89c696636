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

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

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
}

impl Anchor {
    /// A call is made: keeps the anchor armed. A relaxed load when it
    /// already is (every call but the first of a period).
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

    /// Ends the anchor's task, at once (armed or idle).
    pub(crate) fn end(&self) {
        self.state.store(ENDED, Ordering::Release);
        // Wakes the task whether it waits for its timer or for a call (a
        // permit, if it waits for neither yet).
        self.wake.notify_one();
    }

    /// Spawns the anchor's task on the current runtime, unless it runs
    /// already or the anchor has ended (two loads then: a client may ask
    /// at every call).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (tokio's own panic): the client's dials,
    /// which spawn it, run inside one.
    pub(crate) fn spawn(self: &Arc<Self>) {
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
                self.0.running.store(false, Ordering::Release);
            }
        }
        let running = Running(Arc::clone(self));
        tokio::spawn(async move { running.0.keep().await });
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
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap()
        };
        let anchor = Arc::new(Anchor::default());
        let first = runtime();
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
        let second = runtime();
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
}
