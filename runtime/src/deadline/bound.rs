//! A call's deadline and which bound it is ([`Deadline`], [`Bound`]), and
//! the deadline a served request's `grpc-timeout` sets.

use std::fmt;
use std::time::Duration;

use http::HeaderMap;
use tokio::time::Instant;

use super::grpc_timeout::{GRPC_TIMEOUT, parse_grpc_timeout};

/// The deadline a served request's `grpc-timeout` sets, counted from
/// `received`, and that timeout; `None` without one that parses, or one
/// too long for the clock.
pub(crate) fn served_deadline(
    headers: &HeaderMap,
    received: Instant,
) -> Option<(Instant, Duration)> {
    let timeout = headers
        .get(GRPC_TIMEOUT)
        .and_then(|v| parse_grpc_timeout(v.as_bytes()))?;
    Some((received.checked_add(timeout)?, timeout))
}

/// How much longer than the caller's time left a `grpc-timeout` of
/// `timeout` may say: 1 % of it. A client may round the time left up
/// before it sends it (gRPC's C core, to three significant digits: 1 ms
/// steps below 1 s, 10 ms below 10 s, 100 ms below 100 s; grpc-go, to the
/// microsecond), so the caller may end the call that much before the
/// deadline its server reads.
pub(crate) fn encoding_step(timeout: Duration) -> Duration {
    timeout / 100
}

/// `d`, to the millisecond (down): how a duration a message shows is
/// rounded.
pub(crate) fn to_millis(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Which bound a call's deadline is, of the three a humus client takes the
/// earliest of; its timeout error (HTTP) or its `DEADLINE_EXCEEDED` status
/// (gRPC) names it, so that an operator raises that one, not another.
///
/// Small and `Copy`: a call carries it beside its deadline, and it is
/// written out only when the error or status is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bound {
    /// The client's `Settings::timeout`, of this length.
    Setting(Duration),
    /// The request's own timeout, of this length, shorter than the
    /// setting (HTTP: `RequestBuilder::timeout`; gRPC: its `grpc-timeout`,
    /// tonic's `Request::set_timeout`).
    Request(Duration),
    /// The deadline of the RPC being served ([`Inherited`]), earlier than
    /// the call's own; with the time it left when the call was made
    /// (whole milliseconds).
    Inherited(Duration),
}

/// `the client's timeout setting, 10s`, `the request's own timeout, 2s`,
/// `the deadline inherited from the RPC being served (300ms left when the
/// call was made), not the client's timeout setting`.
impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::Setting(d) => write!(f, "the client's timeout setting, {d:?}"),
            Bound::Request(d) => write!(f, "the request's own timeout, {d:?}"),
            Bound::Inherited(left) if left.is_zero() => f.write_str(
                "the deadline inherited from the RPC being served (passed before the call was made), not the client's timeout setting",
            ),
            Bound::Inherited(left) => write!(
                f,
                "the deadline inherited from the RPC being served ({left:?} left when the call was made), not the client's timeout setting",
            ),
        }
    }
}

/// A call's deadline, and which [`Bound`] it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Deadline {
    /// When the call ends.
    pub(crate) at: Instant,
    /// Which bound that is.
    pub(crate) bound: Bound,
    /// How long before `at` (besides the client's slack) a drop of the
    /// call may be the inherited deadline's: the step to which the served
    /// RPC's caller may have rounded its `grpc-timeout` up
    /// ([`encoding_step`]), less the time from `at` to the inherited
    /// deadline. Zero for a deadline of the call's own alone.
    pub(crate) step: Duration,
}

impl Deadline {
    /// The deadline of a call made at `now`: the earliest of `setting`
    /// (the client's timeout, `None` where it does not apply: a gRPC
    /// stream), `request` (the request's own timeout) and `inherited` (the
    /// served RPC's deadline); `None` if it has none (or only timeouts too
    /// long for the clock).
    ///
    /// Of two bounds that fall at the same instant, the call's own comes
    /// before the inherited one, and the setting before the request's own
    /// timeout: a request's timeout names the deadline only when shorter
    /// than the setting, and the inherited deadline only when earlier than
    /// both (the same choice for the HTTP and the gRPC client).
    #[inline]
    pub(crate) fn earliest(
        now: Instant,
        setting: Option<Duration>,
        request: Option<Duration>,
        inherited: Option<Instant>,
    ) -> Option<Deadline> {
        let (timeout, bound) = match (setting, request) {
            (Some(s), Some(r)) if r < s => (r, Bound::Request(r)),
            (Some(s), _) => (s, Bound::Setting(s)),
            (None, Some(r)) => (r, Bound::Request(r)),
            (None, None) => return inherited.map(|at| Deadline::inherited(now, at)),
        };
        match (now.checked_add(timeout), inherited) {
            (Some(at), Some(served)) if served < at => Some(Deadline::inherited(now, served)),
            (Some(at), _) => Some(Deadline {
                at,
                bound,
                step: Duration::ZERO,
            }),
            (None, served) => served.map(|at| Deadline::inherited(now, at)),
        }
    }

    /// The inherited deadline `at`, for a call made at `now`.
    fn inherited(now: Instant, at: Instant) -> Deadline {
        let left = at.saturating_duration_since(now);
        Deadline {
            at,
            bound: Bound::Inherited(to_millis(left)),
            step: Duration::ZERO,
        }
    }

    /// This deadline of a call that inherited `inherited`, a deadline
    /// and its [`encoding_step`] ([`Inherited::current_stepped`]): a drop
    /// within that step before the inherited deadline is its.
    pub(crate) fn stepped(mut self, inherited: Option<(Instant, Duration)>) -> Deadline {
        if let Some((at, step)) = inherited {
            self.step = step.saturating_sub(at.saturating_duration_since(self.at));
        }
        self
    }

    /// Whether a call (or a stream) dropped at `now` was dropped by this
    /// deadline rather than given up on by its caller: at or after it, or
    /// less than `slack` (the client's, for the two timers that end the
    /// call) and [`Deadline::step`] before it.
    pub(crate) fn dropped_by(&self, now: Instant, slack: Duration) -> bool {
        now + slack + self.step >= self.at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The earliest bound names the deadline; of two at the same instant,
    /// the setting before the request's own timeout, and either before the
    /// inherited deadline.
    #[test]
    fn the_earliest_bound_names_the_deadline_and_ties_go_to_the_calls_own() {
        let now = Instant::now();
        let (s1, s2) = (Duration::from_secs(1), Duration::from_secs(2));
        let earliest = |setting, request, inherited| {
            Deadline::earliest(now, setting, request, inherited).map(|d| (d.at, d.bound))
        };
        assert_eq!(earliest(None, None, None), None);
        assert_eq!(
            earliest(None, None, Some(now + s1)),
            Some((now + s1, Bound::Inherited(s1)))
        );
        assert_eq!(
            earliest(Some(s2), Some(s1), Some(now + s2)),
            Some((now + s1, Bound::Request(s1)))
        );
        assert_eq!(
            earliest(Some(s1), Some(s2), Some(now + s2)),
            Some((now + s1, Bound::Setting(s1)))
        );
        assert_eq!(
            earliest(Some(s2), Some(s2), Some(now + s1)),
            Some((now + s1, Bound::Inherited(s1)))
        );
        assert_eq!(
            earliest(None, Some(s2), Some(now + s1)),
            Some((now + s1, Bound::Inherited(s1)))
        );
        // Ties.
        assert_eq!(
            earliest(Some(s1), Some(s1), None),
            Some((now + s1, Bound::Setting(s1)))
        );
        assert_eq!(
            earliest(Some(s1), Some(s1), Some(now + s1)),
            Some((now + s1, Bound::Setting(s1)))
        );
        assert_eq!(
            earliest(None, Some(s1), Some(now + s1)),
            Some((now + s1, Bound::Request(s1)))
        );
        // The time left is in whole milliseconds, none once passed.
        let tiny = Duration::from_micros(1500);
        assert_eq!(
            earliest(None, None, Some(now + tiny)),
            Some((now + tiny, Bound::Inherited(Duration::from_millis(1))))
        );
        assert_eq!(
            Deadline::earliest(now + s1, None, None, Some(now)).map(|d| d.bound),
            Some(Bound::Inherited(Duration::ZERO))
        );
        // A timeout too long for the clock is no deadline.
        assert_eq!(earliest(Some(Duration::MAX), None, None), None);
        assert_eq!(
            earliest(Some(Duration::MAX), None, Some(now + s1)),
            Some((now + s1, Bound::Inherited(s1)))
        );
    }

    /// A drop counts as an inherited deadline's up to its step before
    /// it, beside the slack; the step shrinks by how much earlier the
    /// call's own deadline is, and a deadline of the call's own alone has
    /// none.
    #[test]
    fn an_inherited_deadlines_step_widens_what_a_drop_counts_as() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        let served = (now + ms(15_100), encoding_step(ms(15_100)));
        assert_eq!(served.1, ms(151));
        let earliest = |setting| {
            Deadline::earliest(now, Some(setting), None, Some(served.0))
                .unwrap()
                .stepped(Some(served))
        };
        let inherited = earliest(Duration::from_secs(60));
        assert_eq!((inherited.at, inherited.step), (served.0, ms(151)));
        assert!(inherited.dropped_by(now + ms(15_050), ms(20)));
        assert!(!inherited.dropped_by(now + ms(14_900), ms(20)));
        let own = earliest(ms(15_000));
        assert_eq!((own.at, own.step), (now + ms(15_000), ms(51)));
        let alone = Deadline::earliest(now, Some(ms(15_000)), None, None)
            .unwrap()
            .stepped(None);
        assert_eq!(alone.step, Duration::ZERO);
        assert!(!alone.dropped_by(now + ms(14_950), ms(20)));
    }

    #[test]
    fn bounds_are_written_as_the_http_client_words_them() {
        assert_eq!(
            Bound::Setting(Duration::from_secs(2)).to_string(),
            "the client's timeout setting, 2s"
        );
        assert_eq!(
            Bound::Request(Duration::from_millis(500)).to_string(),
            "the request's own timeout, 500ms"
        );
        assert_eq!(
            Bound::Inherited(Duration::from_millis(300)).to_string(),
            "the deadline inherited from the RPC being served (300ms left when the call was made), not the client's timeout setting"
        );
    }
}
