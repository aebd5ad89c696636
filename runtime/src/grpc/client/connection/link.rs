//! Where the connection is, as the calls see it (down, dialling, up, or
//! failed until the next dial is due), and gRPC's connection backoff.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::future::{BoxFuture, Shared};
use tokio::time::Instant;

use super::dial::FailedDial;
use super::{SendRequest, lock};

/// gRPC's connection backoff (`connection-backoff.md` in gRPC's docs):
/// after a failed dial, the next is due 1 s after the failed one started,
/// then 1.6 times longer each time, ±20 % jitter, never longer than
/// [`Settings::connect_backoff_max`](crate::grpc::client::Settings::connect_backoff_max) (120 s by default, gRPC's). Calls
/// made meanwhile fail at once; a readiness check waits for the next dial
/// to be due (the checks and the calls share one backoff).
pub(super) const BACKOFF_BASE: Duration = Duration::from_secs(1);
const BACKOFF_MULTIPLIER: f64 = 1.6;
const BACKOFF_JITTER: f64 = 0.2;

/// The wait after a failed dial and that wait before jitter, given the
/// one before jitter after the previous failure (`None`: none since the
/// last success, so exactly [`BACKOFF_BASE`]); the wait, jitter included,
/// is never more than `max`, so `max` bounds the time from a failed dial's
/// start to the next dial.
pub(crate) fn backoff_after(last: Option<Duration>, max: Duration) -> (Duration, Duration) {
    match last {
        None => {
            let first = BACKOFF_BASE.min(max);
            (first, first)
        }
        Some(last) => {
            let next = last.mul_f64(BACKOFF_MULTIPLIER).min(max);
            (jittered(next).min(max), next)
        }
    }
}

/// `d`, ±[`BACKOFF_JITTER`] at random.
fn jittered(d: Duration) -> Duration {
    d.mul_f64(1.0 - BACKOFF_JITTER + 2.0 * BACKOFF_JITTER * fastrand::f64())
}

/// A dial every call waiting for the connection shares: its task goes on
/// if they stop waiting (a deadline), and the next call waits for it.
pub(super) type Dial = Shared<BoxFuture<'static, Result<SendRequest, Arc<FailedDial>>>>;

/// Where the connection is, as the calls see it.
pub(super) enum Link {
    /// Never dialled, or the last connection went away, or its dial
    /// failed: the next call (or readiness check) dials.
    Down,
    /// A dial in progress.
    Dialing(Dial),
    /// An HTTP/2 connection, usable until hyper reports it closed.
    Up(SendRequest),
    /// The last dial failed with `error`: calls fail at once until
    /// `retry_at`, when the next call dials again.
    Failed {
        error: Arc<FailedDial>,
        retry_at: Instant,
    },
}

/// The link and the connection backoff, under one lock.
pub(super) struct LinkState {
    pub(super) link: Link,
    /// The backoff the last failed dial waited, before jitter; `None`
    /// since the last dial that succeeded (and before the first).
    pub(super) backoff: Option<Duration>,
}

impl LinkState {
    /// The wait after the dial starting now, if it fails (the first after
    /// a success is exactly [`BACKOFF_BASE`]; later ones grow, jittered,
    /// up to `max`), and that wait before jitter.
    pub(super) fn next_backoff(&self, max: Duration) -> (Duration, Duration) {
        backoff_after(self.backoff, max)
    }
}

/// Where a dial's task sets the link: `Down` unless set otherwise, even if
/// the task panics or is dropped, so that the next call dials again.
pub(super) struct Landing(pub(super) Weak<Mutex<LinkState>>);

impl Landing {
    /// Sets the link, if the dial is still the connection's (a close sets
    /// it `Down`, and a dropped connection has none); the backoff starts
    /// over.
    pub(super) fn set(&self, to: Link) {
        self.land(to, None);
    }

    fn land(&self, to: Link, backoff: Option<Duration>) {
        if let Some(state) = self.0.upgrade() {
            let mut state = lock(&state);
            if matches!(state.link, Link::Dialing(_)) {
                state.link = to;
                state.backoff = backoff;
            }
        }
    }

    /// The dial failed with `error`: the next is due at `retry_at`, and the
    /// wait after it, if it fails too, grows from `backoff`.
    pub(super) fn fail(&self, error: Arc<FailedDial>, retry_at: Instant, backoff: Duration) {
        self.land(Link::Failed { error, retry_at }, Some(backoff));
    }
}

impl Drop for Landing {
    fn drop(&mut self) {
        self.set(Link::Down);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The backoff grows 1.6 times from 1 s, jittered, and neither the
    /// wait nor its growth ever passes the ceiling, however many dials
    /// failed; a ceiling below 1 s is the first wait too.
    #[test]
    fn the_connection_backoff_never_passes_its_ceiling() {
        let max = Duration::from_secs(3);
        assert_eq!(backoff_after(None, max), (BACKOFF_BASE, BACKOFF_BASE));
        let (wait, next) = backoff_after(Some(BACKOFF_BASE), max);
        assert_eq!(next, Duration::from_millis(1600));
        assert!((1280..=1920).contains(&wait.as_millis()), "{wait:?}");
        let mut last = None;
        for _ in 0..10_000 {
            let (wait, next) = backoff_after(last, max);
            assert!(wait <= max && next <= max, "{wait:?} {next:?}");
            last = Some(next);
        }
        assert_eq!(last, Some(max));
        let short = Duration::from_millis(250);
        assert_eq!(backoff_after(None, short), (short, short));
    }
}
