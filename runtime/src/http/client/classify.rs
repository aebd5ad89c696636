//! Classification of an HTTP attempt's result, for retries and for the
//! breaker, with the `Retry-After` header
//! ([`retry_after`](crate::retry::retry_after)) as its pushback.

use std::time::SystemTime;

use http::{HeaderMap, Method, StatusCode};

use super::{Error, Kind};
use crate::call::Classification;
use crate::circuit::Outcome;
use crate::retry::Verdict;
use crate::retry::{RetryAfter, retry_after};

/// What an HTTP attempt ended with, as a classify function sees it: its
/// response (headers read, body not), or the error that left it without
/// one.
pub type AttemptResult<'a> = Result<&'a reqwest::Response, &'a Error>;

crate::call::classify_fn! {
    /// The HTTP client's classify function, as
    /// [`Settings::classify`](super::Settings::classify) holds it: a cheaply
    /// cloned wrapper of any closure of the attempt's method and result.
    /// [`Classify::default`] is [`default_classify`].
    ///
    /// It is asked about every attempt that was sent (or that failure
    /// injection ended), from many tasks at once; a 2xx too, so answer
    /// `Success` for it as the default does. Whatever it answers, the client
    /// retries only a request it may send again (see
    /// [`Client`](super::Client)), and once the call's timeout has passed it
    /// ends the call and counts the attempt as a failure without asking.
    ///
    /// ```
    /// use humus::circuit::Outcome;
    /// use humus::grpc::client::Classification;
    /// use humus::http::client::Classify;
    ///
    /// // Spare the breaker when failure injection ended an attempt.
    /// let default = Classify::default();
    /// let classify = Classify::new(move |method, result| match result {
    ///     Err(e) if e.injected().is_some() => Classification::stop(Outcome::Ignored),
    ///     _ => default.classify(method, result),
    /// });
    /// # let _ = classify;
    /// ```
    pub struct Classify;
    /// Classifies one attempt of `method` that ended with `result`.
    pub fn classify(&self, method: &Method, result: AttemptResult<'_>);
    default default_classify;
}

/// The default classification of an HTTP attempt, for retries and for the
/// dependency's breaker:
///
/// | the attempt | retry | breaker |
/// |---|---|---|
/// | 1xx, 2xx, 3xx | Success | Success |
/// | no response ([`Kind::Transport`], an injected abort included, or [`Kind::AttemptTimeout`]) | Retry | Failure |
/// | 502, 504 | Retry | Failure |
/// | 503 | Retry, after its `Retry-After` when it has one | Failure |
/// | 429 with a `Retry-After` | Retry after it | Failure |
/// | 429 without one | Stop | Failure |
/// | any other 5xx | Stop | Failure |
/// | any other 4xx (the dependency answered) | Stop | Success |
/// | the call's own [`Kind::Timeout`] | Stop | Failure |
/// | [`Kind::Request`], [`Kind::Rejected`] (never sent) | Stop | Ignored |
///
/// A 429 is the dependency (or the gateway in front of it) shedding load,
/// as a gRPC `ResourceExhausted` is: it counts against the dependency, so
/// a dependency that sheds every call opens its breaker, and it is sent
/// again only when it says when.
///
/// A `Retry-After` is read in both its forms ([`retry_after`]); one longer
/// than `backoff_max` ends the call with the attempt's response, as a
/// gRPC pushback does. One that cannot be read is ignored (a 503 is then
/// retried after the backoff). `method` plays no part: whether a method may
/// be sent again is the client's rule, not the classifier's.
pub fn default_classify(method: &Method, result: AttemptResult<'_>) -> Classification {
    let _ = method;
    match result {
        Ok(response) => {
            let status = response.status();
            // The wall clock is read only for a status whose Retry-After
            // counts (an HTTP-date is read against it), not on every call.
            let now = match status.as_u16() {
                429 | 503 => SystemTime::now(),
                _ => SystemTime::UNIX_EPOCH,
            };
            classify_status(status, response.headers(), now)
        }
        Err(e) => match e.kind() {
            Kind::Transport | Kind::AttemptTimeout => Classification {
                retry: Verdict::Retry,
                retry_after: None,
                breaker: Outcome::Failure,
            },
            Kind::Timeout => Classification::stop(Outcome::Failure),
            Kind::Request | Kind::Rejected => Classification::stop(Outcome::Ignored),
        },
    }
}

/// The rows of [`default_classify`] for a response: its status and its
/// `Retry-After` (an HTTP-date is read against `now`).
pub fn classify_status(status: StatusCode, headers: &HeaderMap, now: SystemTime) -> Classification {
    let retry = |retry_after, breaker| Classification {
        retry: Verdict::Retry,
        retry_after,
        breaker,
    };
    match status.as_u16() {
        502 | 504 => retry(None, Outcome::Failure),
        503 => match retry_after(headers, now) {
            RetryAfter::After(after) => retry(Some(after), Outcome::Failure),
            RetryAfter::Absent | RetryAfter::Invalid => retry(None, Outcome::Failure),
        },
        429 => match retry_after(headers, now) {
            RetryAfter::After(after) => retry(Some(after), Outcome::Failure),
            RetryAfter::Absent | RetryAfter::Invalid => Classification::stop(Outcome::Failure),
        },
        500..=599 => Classification::stop(Outcome::Failure),
        400..=499 => Classification::stop(Outcome::Success),
        _ => Classification {
            retry: Verdict::Success,
            retry_after: None,
            breaker: Outcome::Success,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::after::tests::headers;
    use std::time::Duration;

    #[test]
    fn the_default_table() {
        let now = SystemTime::now();
        let c = |code: u16, h: &HeaderMap| {
            let c = classify_status(StatusCode::from_u16(code).unwrap(), h, now);
            (c.retry, c.retry_after, c.breaker)
        };
        let none = HeaderMap::new();
        let two = headers(&["2"]);
        use Outcome::*;
        use Verdict::{Retry, Stop};
        assert_eq!(c(200, &none), (Verdict::Success, None, Success));
        assert_eq!(c(204, &none), (Verdict::Success, None, Success));
        assert_eq!(c(304, &none), (Verdict::Success, None, Success));
        assert_eq!(c(502, &none), (Retry, None, Failure));
        assert_eq!(c(504, &none), (Retry, None, Failure));
        assert_eq!(c(503, &none), (Retry, None, Failure));
        assert_eq!(c(503, &two), (Retry, Some(Duration::from_secs(2)), Failure));
        assert_eq!(c(503, &headers(&["soon"])), (Retry, None, Failure));
        assert_eq!(c(429, &two), (Retry, Some(Duration::from_secs(2)), Failure));
        assert_eq!(c(429, &none), (Stop, None, Failure));
        assert_eq!(c(429, &headers(&["soon"])), (Stop, None, Failure));
        assert_eq!(c(500, &none), (Stop, None, Failure));
        assert_eq!(c(501, &two), (Stop, None, Failure));
        assert_eq!(c(404, &none), (Stop, None, Success));
        assert_eq!(c(400, &two), (Stop, None, Success));
    }

    #[test]
    fn errors() {
        let m = Method::GET;
        let c = |kind| {
            let e = Error::bare(kind);
            let c = default_classify(&m, Err(&e));
            (c.retry, c.breaker)
        };
        assert_eq!(c(Kind::Transport), (Verdict::Retry, Outcome::Failure));
        assert_eq!(c(Kind::AttemptTimeout), (Verdict::Retry, Outcome::Failure));
        assert_eq!(c(Kind::Timeout), (Verdict::Stop, Outcome::Failure));
        assert_eq!(c(Kind::Rejected), (Verdict::Stop, Outcome::Ignored));
        assert_eq!(c(Kind::Request), (Verdict::Stop, Outcome::Ignored));
    }
}
