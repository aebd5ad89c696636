//! The breaker's lock: a spin lock whose release is a plain store.
//!
//! Why not `std::sync::Mutex`: every settled call takes the breaker's lock
//! once, and on the machines this project runs on (AMD EPYC, Intel Xeon) an
//! uncontended atomic read-modify-write costs 8 ns or more, as much as the
//! rest of the call's bookkeeping. The standard mutex pays two per lock and
//! unlock (a compare-and-swap to take it, a swap to release it, since the
//! release must learn whether a thread sleeps on it); this lock pays one,
//! its release being a plain store (`benches/circuit.rs`, group `floor`,
//! measures both).
//!
//! That is right for this lock because what it guards is short and
//! bounded: a few field updates and a call of the policy (which must be
//! fast), never an `await`, never `observe`, and never an allocation but
//! the rare growth of the transition queue. A thread that finds it taken
//! spins briefly, then yields its time slice until it is free, so a holder
//! preempted by the scheduler is not starved by its waiters.
//!
//! There is no poisoning: the breaker's state is consistent at every point
//! where user code (a policy function) can panic, so a guard dropped while
//! a panic unwinds simply releases the lock, and the next call goes through
//! the breaker as before (a panicking policy leaves the breaker consistent).

use std::cell::UnsafeCell;
use std::hint;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

/// A value behind the breaker's lock.
pub(super) struct Lock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a `Guard`, and at most one
// `Guard` exists at a time (`locked` is taken with an acquiring
// compare-and-swap and released with a releasing store by the guard's
// drop), so sharing the lock between threads hands the `T` from one thread
// to the next, which needs `T: Send` and nothing more, as for `Mutex<T>`.
unsafe impl<T: Send> Sync for Lock<T> {}

/// Holds the lock; releases it when dropped, also while a panic unwinds.
pub(super) struct Guard<'a, T> {
    lock: &'a Lock<T>,
}

impl<T> Lock<T> {
    pub(super) fn new(value: T) -> Lock<T> {
        Lock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Waits until the lock is free, takes it, and returns the guard that
    /// releases it when dropped.
    #[inline]
    pub(super) fn lock(&self) -> Guard<'_, T> {
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        Guard { lock: self }
    }

    #[cold]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            while self.locked.load(Ordering::Relaxed) {
                if spins < 100 {
                    spins += 1;
                    hint::spin_loop();
                } else {
                    thread::yield_now();
                }
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock (see `Lock`'s `Sync`), so no
        // other reference to the value exists while it lives.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference
        // through this guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn threads_take_turns() {
        const THREADS: usize = 4;
        const ROUNDS: usize = 20_000;
        let lock = Arc::new(Lock::new((0usize, false)));
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                let lock = Arc::clone(&lock);
                thread::spawn(move || {
                    for _ in 0..ROUNDS {
                        let mut guard = lock.lock();
                        assert!(!guard.1, "two holders at once");
                        guard.1 = true;
                        guard.0 += 1;
                        hint::spin_loop();
                        guard.1 = false;
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(lock.lock().0, THREADS * ROUNDS);
    }

    #[test]
    fn a_panic_releases_the_lock() {
        let lock = Lock::new(1);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _guard = lock.lock();
            panic!("in the critical section");
        }));
        assert!(result.is_err());
        assert_eq!(*lock.lock(), 1);
    }
}
