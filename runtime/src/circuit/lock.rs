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
//! Memory order: the lock is taken with an acquiring compare-and-swap and
//! released with a releasing store, so everything a holder wrote is seen
//! by the next holder. Taking it again on the thread that holds it waits
//! for ever (`std::sync::Mutex` may deadlock or panic there); nothing
//! under the lock calls the breaker, and a policy function must not
//! (`Policy`'s docs).
//!
//! There is no poisoning: the breaker's state is consistent at every point
//! where user code (a policy function) can panic, so a guard dropped while
//! a panic unwinds simply releases the lock, and the next call goes through
//! the breaker as before (a panicking policy leaves the breaker consistent).

use std::cell::UnsafeCell;
use std::hint;
use std::marker::PhantomData;
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
///
/// A guard gives `&T` to whoever shares it and `&mut T` to whoever has it,
/// so it is `Send` only if `T` is, and `Sync` only if `T` is too (as
/// `std::sync::MutexGuard`): the `&'a Lock<T>` alone would make it `Sync`
/// for any `T: Send`, which would let two threads read a `T` that is not
/// `Sync`, such as a `Cell`, through one guard at once. The marker says so.
pub(super) struct Guard<'a, T> {
    lock: &'a Lock<T>,
    _value: PhantomData<&'a mut T>,
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
        Guard {
            lock: self,
            _value: PhantomData,
        }
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

    /// A waiter spins, then yields, until a holder that sleeps releases the
    /// lock, and then sees what the holder wrote.
    #[test]
    fn a_waiter_waits_for_a_slow_holder() {
        let lock = Arc::new(Lock::new(0u64));
        let guard = lock.lock();
        let (started, waiting) = std::sync::mpsc::channel();
        let waiter = {
            let lock = Arc::clone(&lock);
            thread::spawn(move || {
                started.send(()).unwrap();
                *lock.lock()
            })
        };
        waiting.recv().unwrap();
        // Long enough for the waiter to spin out and yield.
        thread::sleep(std::time::Duration::from_millis(20));
        let mut guard = guard;
        *guard = 7;
        drop(guard);
        assert_eq!(waiter.join().unwrap(), 7);
    }

    /// `Guard<T>` is `Sync` only for a `T` that is `Sync` (a guard shared
    /// between threads hands each a `&T`), and `Send` for a `T` that is.
    /// Checked when the test compiles: without the guard's marker, this
    /// module's tests do not build.
    #[test]
    fn a_guard_is_sync_only_if_its_value_is() {
        use std::cell::Cell;

        // An inherent constant wins over the trait's where its bound holds.
        struct Check<T: ?Sized>(PhantomData<T>);
        trait NotSync {
            const SYNC: bool = false;
        }
        impl<T: ?Sized> NotSync for Check<T> {}
        impl<T: ?Sized + Sync> Check<T> {
            const SYNC: bool = true;
        }
        fn send<T: Send>() {}

        send::<Guard<'static, Cell<u8>>>();
        const {
            assert!(!Check::<Guard<'static, Cell<u8>>>::SYNC);
            assert!(Check::<Guard<'static, u8>>::SYNC);
            // The lock itself is `Sync` for a `T: Send`, as a `Mutex`.
            assert!(Check::<Lock<Cell<u8>>>::SYNC);
            assert!(!Check::<Lock<std::rc::Rc<u8>>>::SYNC);
        }
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
