//! What a breaker keeps under its lock: its state, the counts, the window of
//! results, the probe slots and the queue of transitions to deliver.
//!
//! Everything here is allocated once, when the breaker is built, so no
//! admitted call allocates.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use super::{Config, Counts, Outcome, Policy, State, Transition};

/// What a ticket knows of where it was admitted, in one word, so that a
/// ticket is two words and moves in registers:
///
/// - `0`: settled, nothing held;
/// - odd, `epoch << 1 | 1`: admitted while closed, in `epoch`;
/// - even, `holder << 17 | index << 1`: a probe holding slot `index` (there
///   are at most [`MAX_COUNT`](super::MAX_COUNT) = 2^16 slots), admitted as
///   probe number `holder` (47 bits, from 1) of the breaker.
///
/// Probe numbers grow by one per probe admitted, so a probe belongs to the
/// current half-open period when its number is at least the period's first.
/// They wrap after 2^47 probes (over a month at 50 million probes a second);
/// a probe ticket still unsettled after 2^46 further probes could then be
/// taken for a current one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Tag(pub(super) u64);

const HOLDER_BITS: u32 = 47;
const HOLDER_MASK: u64 = (1 << HOLDER_BITS) - 1;

impl Tag {
    pub(super) const SETTLED: Tag = Tag(0);

    pub(super) fn closed(epoch: u64) -> Tag {
        Tag(epoch << 1 | 1)
    }

    fn probe(index: u32, holder: u64) -> Tag {
        debug_assert!(index < 1 << 16 && holder != 0 && holder <= HOLDER_MASK);
        Tag(holder << 17 | u64::from(index) << 1)
    }

    /// The slot index and probe number, for a probe's tag.
    fn slot(self) -> Option<(usize, u64)> {
        (self.0 != 0 && self.0 & 1 == 0)
            .then_some((((self.0 >> 1) & 0xffff) as usize, self.0 >> 17))
    }

    /// Whether the tag is a probe's, holding (or having held) a slot.
    #[inline]
    pub(super) fn is_probe(self) -> bool {
        self.0 != 0 && self.0 & 1 == 0
    }
}

/// The latest `window` results of the current state, one bit each
/// (set: failure), as a ring.
#[derive(Debug)]
struct Window {
    bits: Box<[u64]>,
    capacity: usize,
    len: usize,
    next: usize,
}

impl Window {
    fn new(capacity: usize) -> Window {
        Window {
            bits: vec![0; capacity.div_ceil(64)].into_boxed_slice(),
            capacity,
            len: 0,
            next: 0,
        }
    }

    fn clear(&mut self) {
        self.len = 0;
        self.next = 0;
    }

    /// Adds a result; returns the one it pushed out of a full window
    /// (`Some(true)` for a failure).
    #[inline]
    fn push(&mut self, failure: bool) -> Option<bool> {
        let i = self.next;
        let mask = 1u64 << (i % 64);
        // One bounds check for the read and the write.
        let word = &mut self.bits[i / 64];
        let evicted = if self.len == self.capacity {
            Some(*word & mask != 0)
        } else {
            self.len += 1;
            None
        };
        if failure {
            *word |= mask;
        } else {
            *word &= !mask;
        }
        self.next = if i + 1 == self.capacity { 0 } else { i + 1 };
        evicted
    }
}

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Slot {
    /// 0 when the slot is free.
    holder: u64,
    /// When the probe's timeout started counting (the breaker gives its
    /// admission time); `None`: it never times out.
    since: Option<Instant>,
    prev: u32,
    next: u32,
}

/// The probe slots: a fixed array, a stack of free slots, and the held
/// slots linked in order of admission, which is also the order of their
/// deadlines, since every probe gets the same timeout. A slot keeps the time
/// its probe's timeout counts from, not its deadline: the breaker adds the
/// timeout only when it has to (see [`Core::probe_due`]).
#[derive(Debug)]
struct Slots {
    slots: Box<[Slot]>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    next_holder: u64,
    /// The number of the first probe of the current half-open period.
    first_holder: u64,
}

impl Slots {
    fn new(n: usize) -> Slots {
        let empty = Slot {
            holder: 0,
            since: None,
            prev: NIL,
            next: NIL,
        };
        // `n <= MAX_COUNT`, so every index fits a u32.
        Slots {
            slots: vec![empty; n].into_boxed_slice(),
            free: (0..n as u32).rev().collect(),
            head: NIL,
            tail: NIL,
            next_holder: 1,
            first_holder: 1,
        }
    }

    /// Takes a free slot for a probe whose timeout counts from `since`.
    #[inline]
    fn take(&mut self, since: Option<Instant>) -> Option<Tag> {
        let index = self.free.pop()?;
        let holder = self.next_holder;
        self.next_holder = if holder == HOLDER_MASK { 1 } else { holder + 1 };
        self.slots[index as usize] = Slot {
            holder,
            since,
            prev: self.tail,
            next: NIL,
        };
        if self.tail == NIL {
            self.head = index;
        } else {
            self.slots[self.tail as usize].next = index;
        }
        self.tail = index;
        Some(Tag::probe(index, holder))
    }

    #[inline(always)]
    fn unlink(&mut self, index: u32) {
        let Slot { prev, next, .. } = self.slots[index as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
        self.slots[index as usize].holder = 0;
        self.free.push(index);
    }

    /// Frees the slot the probe of `tag` holds, if it still holds it.
    #[inline]
    fn free(&mut self, tag: Tag) {
        if let Some((index, holder)) = tag.slot()
            && self
                .slots
                .get(index)
                .is_some_and(|slot| slot.holder == holder)
        {
            self.unlink(index as u32);
        }
    }

    /// Starts a half-open period: probes admitted from now on are its own.
    fn start_period(&mut self) {
        self.first_holder = self.next_holder;
    }

    /// Whether the probe of `tag` was admitted in the current period.
    fn in_period(&self, tag: Tag) -> bool {
        tag.slot().is_some_and(|(_, holder)| {
            holder.wrapping_sub(self.first_holder) & HOLDER_MASK < 1 << (HOLDER_BITS - 1)
        })
    }

    /// When the oldest probe's timeout counts from, if that is at or
    /// before `cutoff`: with `cutoff` the time now less the timeout, the
    /// oldest probe has timed out.
    fn due(&self, cutoff: Instant) -> Option<Instant> {
        self.oldest().flatten().filter(|since| *since <= cutoff)
    }

    /// When the oldest probe's timeout counts from (`Some(None)`: it never
    /// times out); `None` when no probe holds a slot.
    fn oldest(&self) -> Option<Option<Instant>> {
        if self.head == NIL {
            return None;
        }
        Some(self.slots[self.head as usize].since)
    }

    fn pop_oldest(&mut self) {
        if self.head != NIL {
            self.unlink(self.head);
        }
    }

    fn clear(&mut self) {
        while self.head != NIL {
            self.unlink(self.head);
        }
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

/// What happened to a result given to [`Core::settle`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Settled {
    /// The ticket's state is still current (the result was counted, unless
    /// it was ignored).
    Current,
    /// The state the ticket was admitted in has ended; nothing counted.
    Late,
}

/// The state of one breaker, kept under its lock.
#[derive(Debug)]
pub(super) struct Core {
    pub(super) state: State,
    /// While open, when the open period ends; `None` while open for ever
    /// (an `open_for` too long for the clock to represent), and while not
    /// open.
    pub(super) until: Option<Instant>,
    /// Bumped on every change of state (the transition's generation); a
    /// ticket carries the epoch it was admitted in.
    pub(super) epoch: u64,
    counts: Counts,
    window: Window,
    slots: Slots,
    /// Transitions made and not yet handed to `observe`.
    pub(super) queue: VecDeque<Transition>,
    /// Whether some thread is running `observe` now.
    pub(super) delivering: bool,
    open_for: Duration,
    probe_timeout: Duration,
    /// The latest time a holder of the lock used.
    last_now: Instant,
    /// No probe times out before this time, neither one that holds a slot
    /// now nor one admitted later: a lower bound of their deadlines, as
    /// every probe gets the same timeout, counted from its admission, and
    /// probes are admitted in time order. [`probe_due`](Core::probe_due)
    /// compares the time with it and computes a deadline only once it has
    /// passed, so that most probes' admissions and results add no timeout
    /// to a time.
    no_timeout_before: Instant,
    /// The breaker's time zero, for `open_until`.
    base: Instant,
    /// While open, the end of the open period as time since `base`,
    /// [packed](super::breaker::pack), from the first rejection under the
    /// lock on ([`pack_open_until`](Core::pack_open_until)); 0 when not
    /// open, not packed yet, for ever, or beyond what a packed time holds
    /// (the lock-free rejection is then off, and the slow path rejects).
    pub(super) open_until: u64,
    /// Whether the state, the epoch or the queue changed since the breaker
    /// last published its lock-free words (`Inner::publish`).
    pub(super) changed: bool,
}

impl Core {
    pub(super) fn new(config: &Config, base: Instant) -> Core {
        Core {
            state: State::Closed,
            until: None,
            epoch: 0,
            counts: Counts::default(),
            window: Window::new(config.window),
            slots: Slots::new(config.probes),
            // A few transitions may queue up behind a slow or panicking
            // observer; the queue grows only then.
            queue: VecDeque::with_capacity(8),
            delivering: false,
            open_for: config.open_for,
            probe_timeout: config.probe_timeout,
            last_now: base,
            no_timeout_before: base,
            base,
            open_until: 0,
            changed: false,
        }
    }

    /// The time for this holder of the lock: `read` (a time read just
    /// before the lock was taken) or the clock, and never earlier than the
    /// time the holder before used, so that time order is lock order.
    #[inline]
    pub(super) fn now(&mut self, read: Option<Instant>) -> Instant {
        let read = read.unwrap_or_else(Instant::now);
        if read > self.last_now {
            self.last_now = read;
        }
        self.last_now
    }

    /// The state as time has left it, without making any change.
    pub(super) fn state_at(&self, now: impl FnOnce() -> Instant) -> State {
        match (self.state, self.until) {
            (State::Open, Some(until)) if until <= now() => State::HalfOpen,
            (state, _) => state,
        }
    }

    /// While open until `until`, packs the end of the open period for the
    /// lock-free rejection, if it is not packed yet: done by the first
    /// rejection under the lock, not when the breaker opens, so that a
    /// breaker whose open period ends before anyone is rejected (a short
    /// `open_for`) never pays for it.
    #[cold]
    pub(super) fn pack_open_until(&mut self, until: Instant) {
        let packed = super::breaker::pack(until.saturating_duration_since(self.base));
        if packed != u64::MAX {
            self.open_until = packed;
            self.changed = true;
        }
    }

    /// Whether `allow` may admit without taking the lock: closed, with no
    /// transition waiting to be delivered.
    pub(super) fn open_gate(&self) -> bool {
        self.state == State::Closed && self.queue.is_empty()
    }

    /// Whether the ticket of `tag` was admitted in the current closed
    /// state, with nothing queued.
    #[inline]
    pub(super) fn is_closed_for(&self, tag: Tag) -> bool {
        tag == Tag::closed(self.epoch) && self.state == State::Closed && self.queue.is_empty()
    }

    /// Whether the ticket of `tag` was admitted in the current state.
    fn is_current(&self, tag: Tag) -> bool {
        match self.state {
            State::Closed => tag == Tag::closed(self.epoch),
            State::HalfOpen => self.slots.in_period(tag),
            State::Open => false,
        }
    }

    /// Counts a result of the current closed state, and asks `trip`;
    /// returns whether the breaker opened. The clock is read only then.
    #[inline]
    pub(super) fn count_closed(&mut self, outcome: Outcome, policy: &Policy) -> bool {
        let failure = match outcome {
            Outcome::Success => false,
            Outcome::Failure => true,
            Outcome::Ignored => return false,
        };
        self.record(failure);
        if policy.trip(&self.counts) {
            let now = self.now(None);
            self.move_to(State::Open, now);
            true
        } else {
            false
        }
    }

    /// Makes the changes time has made due by `now`, in the order they fell
    /// due and each as of that moment: becoming half-open at the end of the
    /// open period, and each probe timing out (which asks `policy.probe`).
    #[inline(always)]
    pub(super) fn advance(&mut self, now: Instant, policy: &Policy) {
        match self.state {
            State::Closed => {}
            State::Open => {
                if let Some(until) = self.until
                    && until <= now
                {
                    // No probe holds a slot yet: nothing more is due.
                    self.move_to(State::HalfOpen, until);
                }
            }
            State::HalfOpen => {
                if self.probe_due(now) {
                    self.advance_due(now, policy);
                }
            }
        }
    }

    #[cold]
    fn advance_due(&mut self, now: Instant, policy: &Policy) {
        loop {
            match self.state {
                State::Closed => return,
                State::Open => {
                    if let Some(until) = self.until
                        && until <= now
                    {
                        // No probe holds a slot yet: nothing more is due.
                        self.move_to(State::HalfOpen, until);
                    }
                    return;
                }
                State::HalfOpen => {
                    let Some(due) = self.oldest_deadline(now) else {
                        return;
                    };
                    self.slots.pop_oldest();
                    self.counts.timed_out = self.counts.timed_out.saturating_add(1);
                    let to = policy.probe(&self.counts);
                    if to != State::HalfOpen {
                        self.move_to(to, due);
                    }
                }
            }
        }
    }

    /// Whether a probe's deadline has passed by `now`, while half-open:
    /// [`advance`](Core::advance) then has work to do. `now` is the time of
    /// this holder of the lock ([`now`](Core::now)), so no later probe is
    /// admitted before it.
    ///
    /// Before [`no_timeout_before`](Core::no_timeout_before), a comparison;
    /// from it on, the oldest probe's deadline is computed, and if it has
    /// not passed it is the new bound (with no probe held, the deadline of
    /// a probe admitted now is).
    #[inline]
    pub(super) fn probe_due(&mut self, now: Instant) -> bool {
        now >= self.no_timeout_before && self.probe_due_at_bound(now)
    }

    #[cold]
    #[inline(never)]
    fn probe_due_at_bound(&mut self, now: Instant) -> bool {
        let since = self.slots.oldest().unwrap_or(Some(now));
        match since.and_then(|since| since.checked_add(self.probe_timeout)) {
            Some(deadline) if deadline <= now => true,
            Some(deadline) => {
                self.no_timeout_before = deadline;
                false
            }
            // Never: nor are the probes admitted after it.
            None => false,
        }
    }

    /// The oldest probe's deadline, if it has passed by `now`.
    fn oldest_deadline(&self, now: Instant) -> Option<Instant> {
        // Admitted at or before `now - probe_timeout` (none, if that is
        // before the clock's first instant).
        let cutoff = now.checked_sub(self.probe_timeout)?;
        let since = self.slots.due(cutoff)?;
        since.checked_add(self.probe_timeout)
    }

    /// Takes a probe slot if one is free, for a probe admitted at `now`:
    /// its timeout counts from `now`.
    #[inline]
    pub(super) fn take_slot(&mut self, now: Instant) -> Option<Tag> {
        self.slots.take(Some(now))
    }

    /// Frees a probe slot if the ticket still holds it. Calls no user code.
    pub(super) fn release(&mut self, tag: Tag) {
        self.slots.free(tag);
    }

    /// Settles the ticket of `tag` with `outcome`, at `now` (read only if
    /// the state changes). Frees its slot; counts the result and asks the
    /// policy if the ticket's state is current.
    pub(super) fn settle(
        &mut self,
        tag: Tag,
        outcome: Outcome,
        policy: &Policy,
        now: impl FnOnce() -> Instant,
    ) -> Settled {
        if self.state == State::HalfOpen {
            return self.settle_half_open(tag, outcome, policy, now);
        }
        self.slots.free(tag);
        if !self.is_current(tag) {
            return Settled::Late;
        }
        if !self.count(outcome) {
            return Settled::Current;
        }
        if self.state == State::Closed && policy.trip(&self.counts) {
            self.move_to(State::Open, now());
        }
        // (No ticket is current while open.)
        Settled::Current
    }

    /// Counts a current ticket's `outcome` in the window: `false` for
    /// `Ignored`, which counts nothing.
    #[inline(always)]
    fn count(&mut self, outcome: Outcome) -> bool {
        let failure = match outcome {
            Outcome::Success => false,
            Outcome::Failure => true,
            Outcome::Ignored => return false,
        };
        self.record(failure);
        true
    }

    /// [`settle`](Core::settle) while half-open: a probe's `done` calls it
    /// straight, once it has made sure no probe is due to time out first.
    #[inline(always)]
    pub(super) fn settle_half_open(
        &mut self,
        tag: Tag,
        outcome: Outcome,
        policy: &Policy,
        now: impl FnOnce() -> Instant,
    ) -> Settled {
        debug_assert_eq!(self.state, State::HalfOpen);
        self.slots.free(tag);
        if !self.slots.in_period(tag) {
            return Settled::Late;
        }
        if !self.count(outcome) {
            return Settled::Current;
        }
        let to = policy.probe(&self.counts);
        if to != State::HalfOpen {
            self.move_to(to, now());
        }
        Settled::Current
    }

    #[inline(always)]
    fn record(&mut self, failure: bool) {
        let c = &mut self.counts;
        match self.window.push(failure) {
            Some(true) => c.failures -= 1,
            Some(false) => c.successes -= 1,
            None => {}
        }
        if failure {
            c.failures += 1;
            c.consecutive_failures = c.consecutive_failures.saturating_add(1);
            c.consecutive_successes = 0;
        } else {
            c.successes += 1;
            c.consecutive_successes = c.consecutive_successes.saturating_add(1);
            c.consecutive_failures = 0;
        }
    }

    /// Changes state as of `at`, starting a new epoch with zero counts and
    /// no probes, and queues the transition.
    #[inline(always)]
    fn move_to(&mut self, to: State, at: Instant) {
        let from = self.state;
        let counts = std::mem::take(&mut self.counts);
        self.window.clear();
        self.slots.clear();
        self.epoch += 1;
        self.open_until = 0;
        self.state = to;
        self.until = None;
        match to {
            State::Closed => {}
            State::Open => self.until = at.checked_add(self.open_for),
            State::HalfOpen => self.slots.start_period(),
        }
        self.changed = true;
        self.queue.push_back(Transition {
            from,
            to,
            generation: self.epoch,
            counts,
        });
    }

    #[cfg(test)]
    pub(super) fn counts(&self) -> Counts {
        self.counts
    }

    #[cfg(test)]
    pub(super) fn counts_mut(&mut self) -> &mut Counts {
        &mut self.counts
    }

    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.slots.held()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(window: usize, probes: usize) -> Config {
        Config {
            window,
            probes,
            open_for: Duration::from_secs(1),
            probe_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn window_keeps_the_latest_results() {
        let mut w = Window::new(3);
        assert_eq!(w.push(true), None);
        assert_eq!(w.push(false), None);
        assert_eq!(w.push(false), None);
        assert_eq!(w.push(false), Some(true));
        assert_eq!(w.push(true), Some(false));
        w.clear();
        assert_eq!(w.push(false), None);
    }

    #[test]
    fn window_spans_several_words() {
        let mut w = Window::new(130);
        for i in 0..130 {
            assert_eq!(w.push(i % 3 == 0), None);
        }
        for i in 0..130 {
            assert_eq!(w.push(false), Some(i % 3 == 0), "bit {i}");
        }
    }

    #[test]
    fn a_holders_time_is_never_earlier_than_the_one_before() {
        // A time read before the lock may be older than the time the
        // holder before used: the later one is used, so that time order is
        // lock order (the probes' timeouts rely on it).
        let t0 = Instant::now();
        let mut core = Core::new(&config(4, 1), t0);
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(core.now(Some(t1)), t1);
        assert_eq!(core.now(Some(t1 - Duration::from_nanos(1))), t1);
        assert_eq!(core.now(Some(t0)), t1);
        let t2 = t1 + Duration::from_nanos(1);
        assert_eq!(core.now(Some(t2)), t2);
        assert!(core.now(None) >= t2);
    }

    #[test]
    fn consecutive_counts_saturate() {
        let never = Policy::new(|_| false, |_| State::HalfOpen);
        let mut core = Core::new(&config(4, 1), Instant::now());
        core.counts_mut().consecutive_failures = i64::MAX - 1;
        for _ in 0..3 {
            core.settle(Tag::closed(0), Outcome::Failure, &never, Instant::now);
        }
        assert_eq!(core.counts().consecutive_failures, i64::MAX);
        assert_eq!(core.counts().failures, 3);
        core.settle(Tag::closed(0), Outcome::Success, &never, Instant::now);
        assert_eq!(core.counts().consecutive_successes, 1);
        assert_eq!(core.counts().consecutive_failures, 0);
        core.counts_mut().consecutive_successes = i64::MAX;
        core.settle(Tag::closed(0), Outcome::Success, &never, Instant::now);
        assert_eq!(core.counts().consecutive_successes, i64::MAX);
    }

    #[test]
    fn slots_free_only_their_holder_and_keep_admission_order() {
        let mut s = Slots::new(2);
        let t0 = Instant::now();
        let a = s.take(Some(t0)).unwrap();
        let b = s.take(Some(t0 + Duration::from_secs(1))).unwrap();
        assert!(s.take(None).is_none());
        s.free(a);
        let c = s.take(Some(t0 + Duration::from_secs(2))).unwrap();
        assert_eq!(c.slot().unwrap().0, a.slot().unwrap().0);
        s.free(a); // a no longer holds the slot c took
        assert_eq!(s.held(), 2);
        assert_eq!(
            s.due(t0 + Duration::from_secs(1)),
            Some(t0 + Duration::from_secs(1))
        );
        s.pop_oldest();
        assert_eq!(
            s.due(t0 + Duration::from_secs(5)),
            Some(t0 + Duration::from_secs(2))
        );
        s.free(b); // already gone
        s.clear();
        assert_eq!(s.held(), 0);
        assert_eq!(s.due(t0 + Duration::from_secs(5)), None);
    }
}
