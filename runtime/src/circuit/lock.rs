//! The breaker's lock: `std::sync::Mutex`, without poisoning.
//!
//! The lock is held only for a few field updates and a call of the policy
//! (which must be fast), never across an `await` and never while `observe`
//! runs. The breaker's state is consistent at every point where user code
//! (a policy function) can panic, so a lock poisoned by such a panic is
//! taken as it is: the next call goes through the breaker as before
//! ([design](crate::design::circuit_breaker#counts-and-policy): a panicking policy leaves the breaker consistent).

use std::sync::{Mutex, MutexGuard, PoisonError};

/// A value behind the breaker's lock.
pub(super) struct Lock<T> {
    value: Mutex<T>,
}

/// Holds the lock; releases it when dropped, also while a panic unwinds.
pub(super) type Guard<'a, T> = MutexGuard<'a, T>;

impl<T> Lock<T> {
    pub(super) fn new(value: T) -> Lock<T> {
        Lock {
            value: Mutex::new(value),
        }
    }

    /// Waits until the lock is free, takes it, and returns the guard that
    /// releases it when dropped.
    #[inline]
    pub(super) fn lock(&self) -> Guard<'_, T> {
        self.value.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
