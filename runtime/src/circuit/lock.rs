//! The breaker's lock: a small spin lock whose release is a plain store.
//!
//! Why not `std::sync::Mutex`: an admitted call takes the lock once (in
//! `done`), and with `std`'s mutex the release is a second atomic
//! read-modify-write, since it must find out whether to wake a sleeper.
//! That one operation is about an eighth of an admitted call (measured in
//! `benches/circuit.rs`: about 8.8 ns with `std`'s mutex, 7.7 ns with this
//! lock, against 8.9 ns for `recloser`).
//!
//! The lock is held only for a few field updates and a call of the policy
//! (which must be fast), never across an `await` and never while `observe`
//! runs, so a waiter spins briefly and then yields its thread rather than
//! sleep.
//!
//! There is no poisoning: the breaker's state is consistent at every point
//! where user code (a policy function) can panic, and the guard's `Drop`
//! releases the lock while the panic unwinds.

use std::cell::UnsafeCell;
use std::hint;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

/// A value behind a spin lock.
pub(super) struct Lock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a `Guard`, and at most one
// `Guard` exists at a time: one is made only by the thread that turned
// `locked` from false to true (Acquire), and its `Drop` turns it back
// (Release), so every access to the value happens-before the next holder's.
// `T: Send` because the value moves between the threads that hold the lock.
unsafe impl<T: Send> Sync for Lock<T> {}

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
            // Wait, reading only, until it looks free; then try again.
            while self.locked.load(Ordering::Relaxed) {
                if spins < 64 {
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

/// The right to use the value of a [`Lock`], until dropped.
pub(super) struct Guard<'a, T> {
    lock: &'a Lock<T>,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock (see `Sync` above), so no other
        // reference to the value exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference
        // made through this guard.
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
            let mut guard = lock.lock();
            *guard = 2;
            panic!("while holding the lock");
        }));
        assert!(result.is_err());
        assert_eq!(*lock.lock(), 2);
    }
}
