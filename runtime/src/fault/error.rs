//! [`InjectedError`] and the per-attempt helper that waits or aborts
//! ([`Fault::inject`]) ([design](crate::design::failure_injection#a-fault-is-a-real-failure)).

use std::borrow::Cow;
use std::fmt;
use std::future::Future;

use tokio::time::Instant;

use super::Fault;

/// The `error.type` of every injected failure, an abort or a delay cut
/// short, in every client's spans and metrics: one value, so one query
/// finds every injected failure and tells it from a real one.
pub const ERROR_TYPE: &str = "humus::fault::InjectedError";

/// What cut an injected delay short.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cause {
    /// The attempt's deadline came before the delay ended.
    DeadlineExceeded,
    /// The caller gave up on the attempt before the delay ended (for
    /// example, the client was stopped).
    Canceled,
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Cause::DeadlineExceeded => "deadline exceeded",
            Cause::Canceled => "canceled",
        })
    }
}

impl std::error::Error for Cause {}

/// The error of an attempt that a fault ended at a point: an abort, or a
/// delay that the attempt's deadline or its caller cut short.
///
/// Its [`source`](std::error::Error::source) is the [`Cause`] of a delay
/// cut short, and `None` for an abort. Its `error.type` is [`ERROR_TYPE`]
/// either way.
///
/// # Mapping to a gRPC status
///
/// [`to_status`](InjectedError::to_status) gives the status the failure
/// emulates, with this error as the status's source so a classifier can
/// find it again with [`from_status`](InjectedError::from_status):
///
/// | what ended the attempt | status |
/// |---|---|
/// | an abort | `Unavailable` (the dependency cannot be reached) |
/// | a delay cut short by the deadline | `DeadlineExceeded` |
/// | a delay cut short by the caller | `Cancelled` |
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InjectedError {
    point: Cow<'static, str>,
    cause: Option<Cause>,
}

impl InjectedError {
    /// The `error.type` of every injected failure: [`ERROR_TYPE`].
    pub const ERROR_TYPE: &'static str = ERROR_TYPE;

    /// An abort at `point`.
    pub fn abort(point: impl Into<Cow<'static, str>>) -> InjectedError {
        InjectedError {
            point: point.into(),
            cause: None,
        }
    }

    /// A delay at `point` that `cause` cut short.
    pub fn cut_short(point: impl Into<Cow<'static, str>>, cause: Cause) -> InjectedError {
        InjectedError {
            point: point.into(),
            cause: Some(cause),
        }
    }

    /// The point whose fault ended the attempt.
    pub fn point(&self) -> &str {
        &self.point
    }

    /// What cut the delay short, or `None` for an abort.
    pub fn cause(&self) -> Option<Cause> {
        self.cause
    }

    /// Whether the fault was an abort (not a delay cut short).
    pub fn is_abort(&self) -> bool {
        self.cause.is_none()
    }

    /// The `error.type` of this error: always [`ERROR_TYPE`].
    pub fn error_type(&self) -> &'static str {
        ERROR_TYPE
    }

    /// The gRPC status this failure emulates (see the
    /// [table](InjectedError#mapping-to-a-grpc-status)), with a clone of
    /// this error as its source.
    pub fn to_status(&self) -> tonic::Status {
        let message = self.to_string();
        let mut status = match self.cause {
            None => tonic::Status::unavailable(message),
            Some(Cause::DeadlineExceeded) => tonic::Status::deadline_exceeded(message),
            Some(Cause::Canceled) => tonic::Status::cancelled(message),
        };
        status.set_source(std::sync::Arc::new(self.clone()));
        status
    }

    /// The injected error behind `status`, if a fault ended the attempt
    /// that returned it: the first [`InjectedError`] in its source chain.
    /// What a classify function asks to treat injected failures apart.
    pub fn from_status(status: &tonic::Status) -> Option<&InjectedError> {
        crate::chain::find(std::error::Error::source(status))
    }
}

impl fmt::Display for InjectedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.cause {
            None => write!(f, "injected failure at {}", self.point),
            Some(cause) => write!(f, "injected delay at {} cut short: {cause}", self.point),
        }
    }
}

impl std::error::Error for InjectedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause.as_ref().map(|c| c as _)
    }
}

impl Fault {
    /// Carries this fault out at `point`, once per attempt: waits the
    /// delay, then fails if the fault aborts.
    ///
    /// - No fault: `Ok(())` at once.
    /// - A delay that ends before `deadline` (or with no deadline): waits
    ///   it, then `Ok(())`, or `Err` with [`InjectedError::abort`] when the
    ///   fault also aborts.
    /// - A delay that would reach or pass `deadline`: waits until the
    ///   deadline, then `Err` cut short with [`Cause::DeadlineExceeded`].
    ///   The attempt had no time left for the call anyway.
    /// - An abort with no delay: `Err` at once.
    ///
    /// The delay is measured on `tokio::time`, so paused-time tests move
    /// it exactly. A caller that gives up drops the future; nothing more
    /// happens. Call it inside the attempt: after the breaker admitted it,
    /// inside its deadline.
    ///
    /// # Errors
    ///
    /// [`InjectedError`] as above, carrying `point`.
    pub async fn inject(
        self,
        point: impl Into<Cow<'static, str>>,
        deadline: Option<Instant>,
    ) -> Result<(), InjectedError> {
        self.inject_until(point, deadline, std::future::pending())
            .await
    }

    /// [`inject`](Fault::inject), also cut short when `canceled` completes
    /// first (for example a client's stop signal): then `Err` cut short
    /// with [`Cause::Canceled`].
    ///
    /// # Errors
    ///
    /// [`InjectedError`] as [`inject`](Fault::inject) says, or cut short by
    /// [`Cause::Canceled`].
    pub async fn inject_until(
        self,
        point: impl Into<Cow<'static, str>>,
        deadline: Option<Instant>,
        canceled: impl Future<Output = ()>,
    ) -> Result<(), InjectedError> {
        if !self.delay.is_zero() {
            // A delay past what the clock counts ends at no instant: it
            // waits for the deadline, or for good.
            let end = Instant::now().checked_add(self.delay);
            let (until, cut) = match (deadline, end) {
                (Some(d), Some(end)) if d > end => (Some(end), None),
                (Some(d), _) => (Some(d), Some(Cause::DeadlineExceeded)),
                (None, end) => (end, None),
            };
            let waited = async {
                match until {
                    Some(until) => tokio::time::sleep_until(until).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = canceled => {
                    return Err(InjectedError::cut_short(point, Cause::Canceled));
                }
                () = waited => {}
            }
            if let Some(cause) = cut {
                return Err(InjectedError::cut_short(point, cause));
            }
        }
        if self.abort {
            return Err(InjectedError::abort(point));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const POINT: &str = "grpc:a.A/M";

    fn delay(ms: u64) -> Fault {
        Fault {
            delay: Duration::from_millis(ms),
            abort: false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn no_fault_returns_at_once() {
        let start = Instant::now();
        Fault::NONE.inject(POINT, None).await.unwrap();
        Fault::NONE
            .inject(POINT, Some(start - Duration::from_secs(1)))
            .await
            .unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn abort_fails_at_once() {
        let start = Instant::now();
        let abort = Fault {
            abort: true,
            ..Fault::NONE
        };
        let err = abort.inject(POINT, None).await.unwrap_err();
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert!(err.is_abort());
        assert_eq!(err.point(), POINT);
        assert_eq!(err.cause(), None);
        assert!(std::error::Error::source(&err).is_none());
        assert_eq!(err.to_string(), "injected failure at grpc:a.A/M");
    }

    #[tokio::test(start_paused = true)]
    async fn delay_is_waited_in_full_before_the_deadline() {
        let start = Instant::now();
        delay(1000)
            .inject(POINT, Some(start + Duration::from_secs(5)))
            .await
            .unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        delay(1000).inject(POINT, None).await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn delay_over_the_deadline_is_cut_short_at_the_deadline() {
        let start = Instant::now();
        let err = delay(8000)
            .inject(POINT, Some(start + Duration::from_secs(5)))
            .await
            .unwrap_err();
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        assert_eq!(err.cause(), Some(Cause::DeadlineExceeded));
        assert!(!err.is_abort());
        let source = std::error::Error::source(&err).unwrap();
        assert_eq!(
            source.downcast_ref::<Cause>(),
            Some(&Cause::DeadlineExceeded)
        );
        assert_eq!(
            err.to_string(),
            "injected delay at grpc:a.A/M cut short: deadline exceeded"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn delay_reaching_the_deadline_exactly_is_cut_short() {
        let start = Instant::now();
        let err = delay(5000)
            .inject(POINT, Some(start + Duration::from_secs(5)))
            .await
            .unwrap_err();
        assert_eq!(err.cause(), Some(Cause::DeadlineExceeded));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn delay_past_a_passed_deadline_fails_at_once() {
        let start = Instant::now();
        let err = delay(10)
            .inject(POINT, Some(start - Duration::from_millis(1)))
            .await
            .unwrap_err();
        assert_eq!(err.cause(), Some(Cause::DeadlineExceeded));
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    /// A delay past what the clock counts (a fault built by hand, not
    /// clamped by an injector's `max_delay`) is no panic: it waits for
    /// the deadline, or until canceled.
    #[tokio::test(start_paused = true)]
    async fn a_delay_past_what_the_clock_counts_waits_for_the_deadline_or_a_cancel() {
        let endless = Fault {
            delay: Duration::MAX,
            abort: false,
        };
        let start = Instant::now();
        let err = endless
            .inject(POINT, Some(start + Duration::from_secs(5)))
            .await
            .unwrap_err();
        assert_eq!(err.cause(), Some(Cause::DeadlineExceeded));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        let start = Instant::now();
        let canceled = tokio::time::sleep(Duration::from_secs(7));
        let err = endless
            .inject_until(POINT, None, canceled)
            .await
            .unwrap_err();
        assert_eq!(err.cause(), Some(Cause::Canceled));
        assert_eq!(start.elapsed(), Duration::from_secs(7));
    }

    #[tokio::test(start_paused = true)]
    async fn delay_then_abort() {
        let start = Instant::now();
        let both = Fault {
            delay: Duration::from_millis(250),
            abort: true,
        };
        let err = both.inject(POINT, None).await.unwrap_err();
        assert!(err.is_abort());
        assert_eq!(start.elapsed(), Duration::from_millis(250));
        // The deadline wins over the abort when it comes first.
        let start = Instant::now();
        let err = both
            .inject(POINT, Some(start + Duration::from_millis(100)))
            .await
            .unwrap_err();
        assert_eq!(err.cause(), Some(Cause::DeadlineExceeded));
    }

    #[tokio::test(start_paused = true)]
    async fn caller_cancel_cuts_the_delay_short() {
        let start = Instant::now();
        let cancel = tokio::time::sleep(Duration::from_millis(300));
        let err = delay(1000)
            .inject_until(POINT, None, cancel)
            .await
            .unwrap_err();
        assert_eq!(start.elapsed(), Duration::from_millis(300));
        assert_eq!(err.cause(), Some(Cause::Canceled));
        assert_eq!(
            err.to_string(),
            "injected delay at grpc:a.A/M cut short: canceled"
        );
    }

    #[test]
    fn statuses_carry_the_injected_error() {
        let abort = InjectedError::abort(POINT);
        let status = abort.to_status();
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(status.message(), "injected failure at grpc:a.A/M");
        assert_eq!(InjectedError::from_status(&status), Some(&abort));

        let cut = InjectedError::cut_short(POINT, Cause::DeadlineExceeded);
        let status = cut.to_status();
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        assert_eq!(InjectedError::from_status(&status), Some(&cut));

        let canceled = InjectedError::cut_short(String::from("x"), Cause::Canceled);
        assert_eq!(canceled.to_status().code(), tonic::Code::Cancelled);

        assert_eq!(
            InjectedError::from_status(&tonic::Status::unavailable("real")),
            None
        );
    }

    #[test]
    fn one_error_type_for_every_injected_failure() {
        assert_eq!(ERROR_TYPE, "humus::fault::InjectedError");
        assert_eq!(InjectedError::abort("a").error_type(), ERROR_TYPE);
        assert_eq!(
            InjectedError::cut_short("a", Cause::Canceled).error_type(),
            ERROR_TYPE
        );
        assert_eq!(InjectedError::ERROR_TYPE, ERROR_TYPE);
    }
}
