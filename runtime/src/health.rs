//! Health: readiness monitors ([design](crate::design::client#readiness)).
//!
//! A [`Monitor`] answers one question, "healthy now?", each time it is
//! checked. [`Client::connected`](crate::grpc::client::Client::connected)
//! returns one for readiness; whatever serves the probes (tonic-health's
//! reporter, an HTTP endpoint) checks it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

type CheckFn = dyn Fn() -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync;

/// A health check: a cheap, cloneable handle whose [`check`](Monitor::check)
/// says whether what it watches is healthy now.
///
/// A check never fails: it answers `true` or `false`. A caller that gives
/// up on a check drops its future; a probe's timeout is
/// `tokio::time::timeout(limit, monitor.check())`, and a check cut short
/// that way counts as unhealthy.
///
/// Design: [readiness](crate::design::client#readiness).
#[derive(Clone)]
pub struct Monitor {
    check: Arc<CheckFn>,
}

impl fmt::Debug for Monitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Monitor").finish_non_exhaustive()
    }
}

impl Monitor {
    /// A monitor whose check runs `check` and answers what it returns.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let always = humus::health::Monitor::from_fn(|| async { true });
    /// assert!(always.check().await);
    /// # });
    /// ```
    pub fn from_fn<F, Fut>(check: F) -> Monitor
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = bool> + Send + 'static,
    {
        Monitor {
            check: Arc::new(move || Box::pin(check())),
        }
    }

    /// Whether what the monitor watches is healthy now.
    pub async fn check(&self) -> bool {
        (self.check)().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test]
    async fn clones_share_the_check() {
        let flag = Arc::new(AtomicBool::new(false));
        let seen = flag.clone();
        let monitor = Monitor::from_fn(move || {
            let seen = seen.clone();
            async move { seen.load(Ordering::SeqCst) }
        });
        let other = monitor.clone();
        assert!(!monitor.check().await);
        flag.store(true, Ordering::SeqCst);
        assert!(other.check().await);
    }
}
