//! The breaker, its tickets and its rejections.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::core::{Core, Settled, Tag};
use super::{Config, ConfigError, Outcome, Policy, State, Transition};
use parking_lot::{Mutex, MutexGuard};

type Observe = dyn Fn(&Transition) + Send + Sync;

/// A circuit breaker for one dependency (see the [module docs](super)).
///
/// Build one with [`Breaker::new`] at startup and share it with every task
/// that calls the dependency: a `Breaker` is a cheap handle, and its clones
/// share one breaker.
///
/// Design: [states](crate::design::circuit_breaker#states), [calls and tickets](crate::design::circuit_breaker#calls-and-tickets).
#[derive(Clone)]
pub struct Breaker {
    inner: Arc<Inner>,
}

// `repr(C)`, the lock first: the lock word then shares a cache line with
// the `Arc`'s counts, which every admitted call also updates. The lock is
// parking_lot's: a thread that finds it taken spins briefly, then parks,
// so a waiter behind a holder the scheduler preempted does not burn its
// core; it has no poisoning (a panicking policy leaves the core
// consistent, and the next call goes through as before).
#[repr(C)]
struct Inner {
    core: Mutex<Core>,
    /// The tag of a ticket admitted now (odd) while closed with no
    /// transition queued, else 0: lets `allow` admit a call while closed
    /// without taking the lock.
    gate: AtomicU64,
    /// While open with nothing to deliver, the end of the open period as
    /// time since `base`, [packed](pack), else 0: lets `allow` reject
    /// without the lock (the core packs it at the first rejection under
    /// the lock).
    open_until: AtomicU64,
    base: Instant,
    policy: Policy,
    observe: Box<Observe>,
    config: Config,
}

impl Breaker {
    /// A closed breaker with the settings `config`, that changes state as
    /// `policy` decides and reports every [`Transition`] to `observe`.
    ///
    /// `observe` is called outside the breaker's lock, one transition at a
    /// time and in order, so it may call the breaker; it must be safe to
    /// call from any thread.
    ///
    /// The window of results and the probe slots are allocated here, once:
    /// `config.window` bits and `config.probes` slots of a few words.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming every invalid field of `config`:
    /// [`window`](Config::window) or [`probes`](Config::probes) outside
    /// `1..=`[`MAX_COUNT`](super::MAX_COUNT), and
    /// [`open_for`](Config::open_for) or
    /// [`probe_timeout`](Config::probe_timeout) zero. No field is given a
    /// default, rounded or clamped.
    pub fn new(
        config: Config,
        policy: Policy,
        observe: impl Fn(&Transition) + Send + Sync + 'static,
    ) -> Result<Breaker, ConfigError> {
        config.check()?;
        let base = Instant::now();
        let core = Core::new(&config, base);
        Ok(Breaker {
            inner: Arc::new(Inner {
                gate: AtomicU64::new(gate(&core)),
                open_until: AtomicU64::new(0),
                base,
                core: Mutex::new(core),
                policy,
                observe: Box::new(observe),
                config,
            }),
        })
    }

    /// Admits a call and returns the [`Ticket`] that settles it, or rejects
    /// it.
    ///
    /// Call it right before the call it guards, and settle the ticket with
    /// [`Ticket::done`] right after the call, before looking at the result:
    ///
    /// ```
    /// # use humus::circuit::{Breaker, Outcome, Rejected};
    /// # fn call() -> Result<u32, String> { Ok(1) }
    /// # fn example(breaker: &Breaker) -> Result<Result<u32, String>, Rejected> {
    /// let ticket = breaker.allow()?;
    /// let result = call();
    /// ticket.done(if result.is_ok() { Outcome::Success } else { Outcome::Failure });
    /// # Ok(result) }
    /// ```
    ///
    /// Before it admits the call, `allow` makes the changes time has made
    /// due (the end of the open period, probes that timed out) and delivers
    /// the transitions already queued to `observe`, unless another thread is
    /// delivering them, so `observe` never runs on this thread while the
    /// call holds a probe slot.
    ///
    /// # Errors
    ///
    /// [`Rejected`] while open (with how much longer it stays open), and
    /// while half-open when every probe slot is taken.
    ///
    /// # Panics
    ///
    /// If the policy's `probe` function or `observe` panics; the panic
    /// continues and the breaker stays consistent.
    #[inline]
    pub fn allow(&self) -> Result<Ticket<'_>, Rejected> {
        // Closed with nothing to deliver: admit without the lock.
        let gate = self.inner.gate.load(Ordering::Acquire);
        if gate & 1 == 1 {
            return Ok(Ticket {
                breaker: self,
                tag: Tag(gate),
                #[cfg(test)]
                epoch: gate >> 1,
            });
        }
        self.allow_not_closed()
    }

    /// `allow` when not closed (or with a transition to deliver). Open with
    /// nothing to deliver and not yet due to become half-open: a rejection
    /// without the lock, with how much longer it stays open. Otherwise the
    /// slow path, with the time read here, before the lock (the clock read
    /// and the lock's atomic operation then overlap).
    ///
    /// The probe's straight path ([`allow_unpacked`](Breaker::allow_unpacked))
    /// is inlined here, not called: a probe's admission then runs one
    /// function's prologue, not two. The rejection's path is apart from it.
    #[inline(never)]
    fn allow_not_closed(&self) -> Result<Ticket<'_>, Rejected> {
        let until = self.inner.open_until.load(Ordering::Acquire);
        let now = Instant::now();
        if until != 0 {
            let since = pack(now.saturating_duration_since(self.inner.base));
            if since < until {
                return Err(Rejected {
                    state: State::Open,
                    retry_after: packed_between(since, until),
                });
            }
            return self.allow_slow(now);
        }
        self.allow_unpacked(now)
    }

    /// [`allow_unpacked`](Breaker::allow_unpacked), out of line: for an
    /// open period that has ended but is still published.
    #[cold]
    #[inline(never)]
    fn allow_slow(&self, read: Instant) -> Result<Ticket<'_>, Rejected> {
        self.allow_unpacked(read)
    }

    /// Admits or rejects under the lock, with `read`, the time `allow` read
    /// just before taking it, when no end of an open period is published.
    /// Half-open with nothing to deliver and no probe due to time out, a
    /// probe's admission, straight (what
    /// [`allow_locked`](Breaker::allow_locked) does then); anything else
    /// there.
    #[inline(always)]
    fn allow_unpacked(&self, read: Instant) -> Result<Ticket<'_>, Rejected> {
        let mut core = self.inner.lock();
        if core.state == State::HalfOpen && core.queue.is_empty() {
            let now = core.now(Some(read));
            if core.probe_due(now) {
                // The timeouts are made due as of no later time than `now`.
                return self.allow_locked(core, Some(now));
            }
            self.inner.publish_if_changed(&mut core);
            let tag = core.take_slot(now);
            #[cfg(test)]
            let epoch = core.epoch;
            drop(core);
            return match tag {
                Some(tag) => Ok(Ticket {
                    breaker: self,
                    tag,
                    #[cfg(test)]
                    epoch,
                }),
                None => Err(Rejected {
                    state: State::HalfOpen,
                    retry_after: Duration::ZERO,
                }),
            };
        }
        self.allow_locked(core, Some(read))
    }

    /// Admits or rejects under the lock, `core`. `read` is the time `allow`
    /// read just before taking it (as `allow_not_closed` and, after
    /// delivering, `deliver` read it): the lock's holder reads the clock
    /// only if no such time was read, and the time used is never earlier
    /// than one a holder before it used, so time order matches lock order.
    #[cold]
    #[inline(never)]
    fn allow_locked<'a>(
        &'a self,
        mut core: MutexGuard<'a, Core>,
        read: Option<Instant>,
    ) -> Result<Ticket<'a>, Rejected> {
        let inner = &self.inner;
        let mut read = read;
        loop {
            let now = match core.state {
                State::Closed => None,
                _ => {
                    let now = core.now(read.take());
                    core.advance(now, &inner.policy);
                    Some(now)
                }
            };
            if !core.queue.is_empty() && !core.delivering {
                // The time after the last delivery, read before the lock is
                // taken again.
                core = inner.deliver(core, Some(&mut read));
                continue;
            }
            // Open: the first rejection under the lock packs the end of
            // the open period, so that the next ones need no lock.
            if core.state == State::Open
                && let Some(until) = core.until
                && core.open_until == 0
            {
                core.pack_open_until(until);
            }
            // What this holder changed (a transition left to the thread
            // delivering) is published before any return.
            inner.publish_if_changed(&mut core);
            let tag = match (core.state, now) {
                (State::Closed, _) => Tag::closed(core.epoch),
                (State::Open, Some(now)) => {
                    return Err(Rejected {
                        state: State::Open,
                        retry_after: core.until.map_or(Duration::MAX, |until| until - now),
                    });
                }
                (State::HalfOpen, Some(now)) => match core.take_slot(now) {
                    Some(tag) => tag,
                    None => {
                        return Err(Rejected {
                            state: State::HalfOpen,
                            retry_after: Duration::ZERO,
                        });
                    }
                },
                (_, None) => unreachable!("the clock is read whenever the breaker is not closed"),
            };
            #[cfg(test)]
            let epoch = core.epoch;
            drop(core);
            return Ok(Ticket {
                breaker: self,
                tag,
                #[cfg(test)]
                epoch,
            });
        }
    }

    /// The state of the breaker as time has left it.
    ///
    /// This is a pure read: once [`open_for`](Config::open_for) has passed
    /// it shows [`State::HalfOpen`], even though the breaker makes that
    /// transition (and tells `observe`) only at the next
    /// [`allow`](Breaker::allow) or [`done`](Ticket::done). It changes
    /// nothing and calls no user function (it does not ask the policy about
    /// a probe that has timed out), so a metrics callback may call it.
    pub fn state(&self) -> State {
        self.inner.lock().state_at(Instant::now)
    }

    /// The settings the breaker was built with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }
}

impl fmt::Debug for Breaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("state", &self.state())
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Inner {
    #[inline]
    fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock()
    }

    /// Refreshes the lock-free admission gate and rejection from the core.
    fn publish(&self, core: &mut Core) {
        let open_until = if core.queue.is_empty() {
            core.open_until
        } else {
            0
        };
        self.open_until.store(open_until, Ordering::Release);
        self.gate.store(gate(core), Ordering::Release);
        core.changed = false;
    }

    /// [`publish`](Inner::publish)es if the state or the queue changed
    /// since the last time: what is published depends on nothing else, and
    /// every holder of the lock publishes what it changed before it lets
    /// go, so the published words are right whenever the lock is free.
    #[inline]
    fn publish_if_changed(&self, core: &mut Core) {
        if core.changed {
            self.publish(core);
        }
    }

    /// Hands the queued transitions to `observe` one at a time, outside the
    /// lock, unless another thread is already doing so; then that thread
    /// delivers what this one queued. Returns the lock, taken again.
    ///
    /// With `read`, the clock is read after each delivery to a state other
    /// than closed, just before the lock is taken again (`allow`, which
    /// needs the time after the deliveries, reads it there instead of under
    /// the lock: the read and the lock's atomic operation then overlap).
    #[inline(always)]
    fn deliver<'a>(
        &'a self,
        mut core: MutexGuard<'a, Core>,
        mut read: Option<&mut Option<Instant>>,
    ) -> MutexGuard<'a, Core> {
        if !core.delivering {
            // Copied once, out of the queue (a `pop_front` moved it twice).
            while let Some(&transition) = core.queue.front() {
                core.queue.pop_front();
                core.delivering = true;
                self.publish(&mut core);
                drop(core);
                // If `observe` panics, the panic continues; the next `allow`
                // or `done` delivers the rest.
                let unwinding = Unwinding(self);
                (self.observe)(&transition);
                std::mem::forget(unwinding);
                if let Some(read) = read.as_deref_mut() {
                    *read = (transition.to != State::Closed).then(Instant::now);
                }
                core = self.lock();
                core.delivering = false;
            }
        }
        self.publish_if_changed(&mut core);
        core
    }

    /// Settles `tag` with `outcome`: only the dispatch on the kind of
    /// ticket is inlined into `done`, so that a probe's `done` goes straight
    /// to [`settle_probe`](Inner::settle_probe) and a closed ticket's to
    /// [`settle_closed`](Inner::settle_closed), without passing through the
    /// prologue of a function that holds both paths.
    #[inline]
    fn settle(&self, tag: Tag, outcome: Outcome) -> bool {
        if tag.is_probe() {
            self.settle_probe(tag, outcome)
        } else {
            self.settle_closed(tag, outcome)
        }
    }

    /// A closed ticket's result.
    #[inline(never)]
    fn settle_closed(&self, tag: Tag, outcome: Outcome) -> bool {
        let mut core = self.lock();
        // Closed, and the ticket is current: count without reading the
        // clock; most results change nothing else.
        if core.is_closed_for(tag) {
            match core.count_closed(outcome, &self.policy) {
                false => return true,
                true => {
                    // Tripped: the queue now holds the transition.
                    drop(self.deliver(core, None));
                    return true;
                }
            }
        }
        self.settle_slow(core, tag, outcome, None)
    }

    /// A probe's result needs the time (probe timeouts are made due first):
    /// it is read before the lock, as `allow` reads it, so that the read and
    /// the lock's atomic operation overlap. (A closed ticket's result reads
    /// the clock only if it trips the breaker.)
    #[cold]
    #[inline(never)]
    fn settle_probe(&self, tag: Tag, outcome: Outcome) -> bool {
        let read = Instant::now();
        let mut core = self.lock();
        // Still half-open, with no probe due to time out: what
        // `settle_slow` does then, straight.
        if core.state == State::HalfOpen {
            let now = core.now(Some(read));
            if !core.probe_due(now) {
                let settled = core.settle_half_open(tag, outcome, &self.policy, || now);
                if core.queue.is_empty() {
                    self.publish_if_changed(&mut core);
                } else {
                    self.deliver_queued(core);
                }
                return settled == Settled::Current;
            }
            return self.settle_slow(core, tag, outcome, Some(now));
        }
        self.settle_slow(core, tag, outcome, Some(read))
    }

    /// [`deliver`](Inner::deliver)s the queued transitions, then lets go
    /// of the lock: out of line, for a probe's `done` that changed state.
    #[cold]
    #[inline(never)]
    fn deliver_queued(&self, core: MutexGuard<'_, Core>) {
        drop(self.deliver(core, None));
    }

    #[cold]
    fn settle_slow(
        &self,
        mut core: MutexGuard<'_, Core>,
        tag: Tag,
        outcome: Outcome,
        read: Option<Instant>,
    ) -> bool {
        let now = match core.state {
            State::Closed => None,
            _ => {
                let now = core.now(read);
                core.advance(now, &self.policy);
                Some(now)
            }
        };
        let settled = core.settle(tag, outcome, &self.policy, || {
            now.unwrap_or_else(Instant::now)
        });
        if core.queue.is_empty() {
            self.publish_if_changed(&mut core);
        } else {
            drop(self.deliver(core, None));
        }
        settled == Settled::Current
    }

    #[cold]
    fn release(&self, tag: Tag) {
        self.lock().release(tag);
    }

    /// Settles a ticket's `tag` with `outcome` ([`Ticket::done`],
    /// [`OwnedTicket::done`]), then marks it settled: nothing left for its
    /// `Drop` to free. (If `settle` panics, the tag stays, and `Drop` frees
    /// the slot if it is still held.)
    #[inline]
    fn settle_ticket(&self, tag: &mut Tag, outcome: Outcome) -> bool {
        let current = self.settle(*tag, outcome);
        *tag = Tag::SETTLED;
        current
    }

    /// A ticket's `tag` dropped: frees its probe slot, if it holds one
    /// still.
    #[inline]
    fn drop_ticket(&self, tag: Tag) {
        if tag.is_probe() {
            self.release(tag);
        }
    }
}

const NANOS_BITS: u32 = 30; // 10^9 < 2^30

/// A duration in one word, `seconds << 30 | nanoseconds`, ordered as the
/// durations are; `u64::MAX` from 2^34 s (544 years) on. (Shifts, not
/// nanoseconds: a multiplication to pack and a division to unpack cost a
/// rejection 3 ns more on an AMD EPYC.)
pub(super) fn pack(d: Duration) -> u64 {
    let secs = d.as_secs();
    if secs >> (64 - NANOS_BITS) != 0 {
        return u64::MAX;
    }
    secs << NANOS_BITS | u64::from(d.subsec_nanos())
}

#[cfg(test)]
fn unpack(packed: u64) -> Duration {
    Duration::new(
        packed >> NANOS_BITS,
        (packed & ((1 << NANOS_BITS) - 1)) as u32,
    )
}

/// `unpack(until) - unpack(since)`, for `since < until`, without
/// normalizing either (a rejection computes it every time).
#[inline]
fn packed_between(since: u64, until: u64) -> Duration {
    const NANOS: u64 = (1 << NANOS_BITS) - 1;
    let secs = (until >> NANOS_BITS) - (since >> NANOS_BITS);
    let (until_nanos, since_nanos) = (until & NANOS, since & NANOS);
    if until_nanos >= since_nanos {
        Duration::new(secs, (until_nanos - since_nanos) as u32)
    } else {
        Duration::new(secs - 1, (until_nanos + 1_000_000_000 - since_nanos) as u32)
    }
}

fn gate(core: &Core) -> u64 {
    if core.open_gate() {
        Tag::closed(core.epoch).0
    } else {
        0
    }
}

/// Marks delivery finished if `observe` panics.
struct Unwinding<'a>(&'a Inner);

impl Drop for Unwinding<'_> {
    fn drop(&mut self) {
        let mut core = self.0.lock();
        core.delivering = false;
        self.0.publish(&mut core);
    }
}

/// One call admitted by [`Breaker::allow`], to be settled once.
///
/// Settle it with [`done`](Ticket::done) and the call's [`Outcome`] right
/// after the call. A ticket dropped or [released](Ticket::release) without
/// `done`, because the code holding it returned early, panicked, or was a
/// future the caller dropped, counts nothing and frees its probe slot at
/// once. Both `done` and `release` take the ticket by value, so settling
/// twice does not compile:
///
/// ```compile_fail,E0382
/// # use humus::circuit::{Breaker, Outcome};
/// # fn twice(breaker: &Breaker) {
/// let ticket = breaker.allow().unwrap();
/// ticket.done(Outcome::Success);
/// ticket.done(Outcome::Failure); // error: use of moved value
/// # }
/// ```
///
/// A ticket borrows the [`Breaker`] it came from (`'a`), so admitting a
/// call costs no reference count. [`into_owned`](Ticket::into_owned) turns
/// it into an [`OwnedTicket`] with a handle of its own, for a hand-off
/// that outlives the borrow. A ticket is `Send` and `Sync`, so a response
/// stream can carry it to whichever thread reads the end of the stream.
/// A ticket never settled
/// costs nothing while closed; a half-open probe holds its slot for at most
/// [`Config::probe_timeout`].
///
/// Design: [calls and tickets](crate::design::circuit_breaker#calls-and-tickets) (dropping is releasing;
/// settling twice cannot compile).
#[must_use = "a ticket dropped at once settles the call without a result; call `done` after the call"]
pub struct Ticket<'a> {
    breaker: &'a Breaker,
    tag: Tag,
    /// The state it was admitted in, for the stress test.
    #[cfg(test)]
    epoch: u64,
}

impl Ticket<'_> {
    /// The same ticket, holding a handle of its own on the breaker instead
    /// of borrowing the caller's: the hand-off to something that outlives
    /// the borrow, such as a response stream or another thread, which
    /// settles it later.
    ///
    /// A ticket from [`Breaker::allow`] borrows the breaker, which costs
    /// nothing; this clones the breaker's handle (one reference count) once.
    pub fn into_owned(mut self) -> OwnedTicket {
        // What is left of `self` holds nothing to settle.
        let tag = std::mem::replace(&mut self.tag, Tag::SETTLED);
        OwnedTicket {
            breaker: self.breaker.clone(),
            tag,
        }
    }

    /// Settles the ticket with the outcome of its call, and reports whether
    /// the result reached the state the call was admitted in.
    ///
    /// A [`Success`](Outcome::Success) or [`Failure`](Outcome::Failure) is
    /// counted and the policy decides; an [`Ignored`](Outcome::Ignored)
    /// result counts nothing, asks no policy function, and frees its probe
    /// slot. `false` means the breaker changed state since the call was
    /// admitted, and the result was discarded: a late result never moves a
    /// newer state.
    ///
    /// Like [`Breaker::allow`], `done` first makes the changes time has made
    /// due, and after counting it delivers the queued transitions to
    /// `observe`.
    ///
    /// # Panics
    ///
    /// If the policy or `observe` panics; the panic continues, the ticket's
    /// slot is freed, what was counted stays counted, and the state does not
    /// change.
    #[inline]
    pub fn done(mut self, outcome: Outcome) -> bool {
        self.breaker.inner.settle_ticket(&mut self.tag, outcome)
    }

    /// Settles the ticket without a result: it counts nothing, frees its
    /// probe slot, and calls no user function. Dropping the ticket does the
    /// same.
    pub fn release(self) {
        drop(self);
    }
}

impl Drop for Ticket<'_> {
    #[inline]
    fn drop(&mut self) {
        self.breaker.inner.drop_ticket(self.tag);
    }
}

impl fmt::Debug for Ticket<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("probe", &self.tag.is_probe())
            .finish_non_exhaustive()
    }
}

/// A [`Ticket`] with a handle of its own on its breaker, from
/// [`Ticket::into_owned`]: for a call whose result is known only after the
/// code that admitted it has returned, such as the end of a response
/// stream. It is settled as a `Ticket` is, with [`done`](OwnedTicket::done)
/// or, counting nothing, [`release`](OwnedTicket::release) or `Drop`; it is
/// `Send`, `Sync` and `'static`.
#[must_use = "a ticket dropped at once settles the call without a result; call `done` after the call"]
pub struct OwnedTicket {
    breaker: Breaker,
    tag: Tag,
}

impl OwnedTicket {
    /// Settles the ticket with the outcome of its call, and reports whether
    /// the result reached the state the call was admitted in, as
    /// [`Ticket::done`] does.
    ///
    /// # Panics
    ///
    /// As [`Ticket::done`]: if the policy or `observe` panics.
    pub fn done(mut self, outcome: Outcome) -> bool {
        self.breaker.inner.settle_ticket(&mut self.tag, outcome)
    }

    /// Settles the ticket without a result, as [`Ticket::release`] does.
    pub fn release(self) {
        drop(self);
    }
}

impl Drop for OwnedTicket {
    fn drop(&mut self) {
        self.breaker.inner.drop_ticket(self.tag);
    }
}

impl fmt::Debug for OwnedTicket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedTicket")
            .field("probe", &self.tag.is_probe())
            .finish_non_exhaustive()
    }
}

/// The error of a call the breaker does not admit.
///
/// It renders as `circuit: call rejected: open for another 4.2s` (the
/// remaining time rounded up to the millisecond, as [`Duration`]'s `Debug`
/// prints it: `10s`, `4.2s`, `1ms`) or `circuit: call rejected: half-open,
/// and every probe slot is taken`, or `circuit: call rejected: open with
/// no end (...)` when [`retry_after`](Rejected::retry_after) is
/// [`Duration::MAX`]. `retry_after` keeps the exact time.
///
/// Design: [states](crate::design::circuit_breaker#states).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejected {
    /// [`State::Open`], or [`State::HalfOpen`] when every probe slot is
    /// taken.
    pub state: State,
    /// How much longer the breaker stays open, measured when the call was
    /// rejected; zero when half-open, since a slot frees as soon as a probe
    /// is settled. [`Duration::MAX`] if the open period is too long for the
    /// clock to represent.
    pub retry_after: Duration,
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.state {
            State::HalfOpen => {
                f.write_str("circuit: call rejected: half-open, and every probe slot is taken")
            }
            _ if self.retry_after == Duration::MAX => write!(
                f,
                "circuit: call rejected: {} with no end (its open_for is past what the clock can count)",
                self.state
            ),
            _ => write!(
                f,
                "circuit: call rejected: {} for another {:?}",
                self.state,
                ceil_millis(self.retry_after)
            ),
        }
    }
}

/// `d` rounded up to a whole number of milliseconds, so that a message never
/// says less time is left than there is (`Duration::MAX` stays as it is).
fn ceil_millis(d: Duration) -> Duration {
    const MILLI: u32 = 1_000_000;
    match d.subsec_nanos() % MILLI {
        0 => d,
        rest => d
            .checked_add(Duration::from_nanos(u64::from(MILLI - rest)))
            .unwrap_or(d),
    }
}

impl Error for Rejected {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc;
    use std::thread;

    #[test]
    fn packed_durations_keep_their_value_and_order() {
        let ds = [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_nanos(999_999_999),
            Duration::from_secs(1),
            Duration::new(4, 200_000_000),
            Duration::new((1 << 34) - 1, 999_999_999),
        ];
        for pair in ds.windows(2) {
            assert!(pack(pair[0]) < pack(pair[1]), "{pair:?}");
        }
        for d in ds {
            assert_eq!(unpack(pack(d)), d);
        }
        assert_eq!(pack(Duration::from_secs(1 << 34)), u64::MAX);
        for pair in ds.windows(2) {
            for (a, b) in [(pair[0], pair[1]), (ds[0], pair[1])] {
                assert_eq!(packed_between(pack(a), pack(b)), b - a, "{a:?} to {b:?}");
            }
        }
        let (a, b) = (Duration::new(3, 900_000_000), Duration::new(5, 100_000_000));
        assert_eq!(
            packed_between(pack(a), pack(b)),
            Duration::new(1, 200_000_000)
        );
        assert_eq!(pack(Duration::MAX), u64::MAX);
    }

    /// Threads mix every operation on one breaker that goes through all its
    /// states; no more than `probes` probes of one half-open period are ever
    /// in flight, transitions arrive in order with no gaps, and neither
    /// `observe` nor the policy overlaps itself.
    ///
    /// Real time, not paused: the open period is 1 ns, so the breaker
    /// reopens and probes again all the time, whatever the timing. Each
    /// thread does a fixed number of operations; the checks hold for every
    /// interleaving.
    #[test]
    fn stress() {
        stress_with(Duration::from_secs(3600), true);
    }

    /// The same with probes timing out all the time (a timed-out probe
    /// stops holding its slot while its holder still counts itself in
    /// flight, so the count of probes in flight is not checked).
    #[test]
    fn stress_with_probe_timeouts() {
        stress_with(Duration::from_micros(1), false);
    }

    fn stress_with(probe_timeout: Duration, check_in_flight: bool) {
        const THREADS: usize = 6;
        const OPS: usize = 20_000;
        const PROBES: usize = 3;

        let in_policy = Arc::new(AtomicBool::new(false));
        let guard = |flag: &AtomicBool| {
            assert!(!flag.swap(true, Ordering::SeqCst), "policy overlaps itself");
        };
        let (trip_flag, probe_flag) = (Arc::clone(&in_policy), Arc::clone(&in_policy));
        let policy = Policy::new(
            move |c| {
                guard(&trip_flag);
                let open = c.consecutive_failures >= 2;
                trip_flag.store(false, Ordering::SeqCst);
                open
            },
            move |c| {
                guard(&probe_flag);
                let to = if c.failures > 1 {
                    State::Open
                } else if c.consecutive_successes >= 3 {
                    State::Closed
                } else {
                    State::HalfOpen
                };
                probe_flag.store(false, Ordering::SeqCst);
                to
            },
        );

        let in_observe = Arc::new(AtomicBool::new(false));
        let (sender, transitions) = mpsc::channel();
        let flag = Arc::clone(&in_observe);
        let handle = Arc::new(std::sync::OnceLock::<Breaker>::new());
        let observer_handle = Arc::clone(&handle);
        let breaker = Breaker::new(
            Config {
                window: 8,
                probes: PROBES,
                open_for: Duration::from_nanos(1),
                probe_timeout,
            },
            policy,
            move |t: &Transition| {
                assert!(
                    !flag.swap(true, Ordering::SeqCst),
                    "observe overlaps itself"
                );
                // observe may call the breaker.
                if let Some(b) = observer_handle.get() {
                    let _ = b.state();
                    if t.generation.is_multiple_of(7)
                        && let Ok(ticket) = b.allow()
                    {
                        ticket.done(Outcome::Ignored);
                    }
                }
                sender.send(*t).unwrap();
                flag.store(false, Ordering::SeqCst);
            },
        )
        .unwrap();
        handle.set(breaker.clone()).unwrap();

        // Probes in flight per epoch, counted after admission and before
        // settling, so never more than the slots actually held.
        let in_flight = Arc::new(std::sync::Mutex::new(
            std::collections::HashMap::<u64, usize>::new(),
        ));
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let breaker = breaker.clone();
                let in_flight = Arc::clone(&in_flight);
                thread::spawn(move || {
                    let mut rng = fastrand::Rng::with_seed(t as u64);
                    let mut held = Vec::new();
                    for _ in 0..OPS {
                        match rng.u8(0..10) {
                            0 => {
                                let _ = breaker.state();
                            }
                            _ => {
                                if let Ok(ticket) = breaker.allow() {
                                    if ticket.tag.is_probe() {
                                        let mut map = in_flight.lock().unwrap();
                                        let n = map.entry(ticket.epoch).or_default();
                                        *n += 1;
                                        assert!(
                                            *n <= PROBES || !check_in_flight,
                                            "{n} probes in flight"
                                        );
                                    }
                                    held.push(ticket);
                                }
                            }
                        }
                        if held.len() > rng.usize(0..3) {
                            let ticket: Ticket<'_> = held.swap_remove(rng.usize(0..held.len()));
                            if ticket.tag.is_probe() {
                                *in_flight.lock().unwrap().get_mut(&ticket.epoch).unwrap() -= 1;
                            }
                            match rng.u8(0..5) {
                                0 => ticket.release(),
                                1 => drop(ticket),
                                2 => {
                                    ticket.done(Outcome::Ignored);
                                }
                                3 => {
                                    ticket.done(Outcome::Failure);
                                }
                                _ => {
                                    ticket.done(Outcome::Success);
                                }
                            }
                        }
                    }
                    for ticket in held {
                        if ticket.tag.is_probe() {
                            *in_flight.lock().unwrap().get_mut(&ticket.epoch).unwrap() -= 1;
                        }
                        ticket.done(Outcome::Success);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        // Every transition was delivered by the threads themselves.
        let core = breaker.inner.lock();
        assert!(core.queue.is_empty() && !core.delivering);
        assert_eq!(
            core.held(),
            0,
            "every slot is free once every ticket is settled"
        );
        drop(core);
        // (The observer holds a handle to its own breaker, which therefore
        // lives on; `try_iter` reads what it sent.)

        let mut last = State::Closed;
        let mut count = 0u64;
        for t in transitions.try_iter() {
            count += 1;
            assert_eq!(t.generation, count, "no gaps, in order");
            assert_eq!(t.from, last, "each from is the last to");
            assert_ne!(t.from, t.to);
            last = t.to;
        }
        assert!(
            count > 10,
            "the stress test went through the states ({count} transitions)"
        );
    }
}
