//! Classification of an HTTP attempt's result, for retries and for the
//! breaker, and the `Retry-After` header (RFC 9110, 10.2.3).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, Method, StatusCode, header::RETRY_AFTER};

use super::{Error, Kind};
use crate::circuit::Outcome;
use crate::grpc::client::Classification;
use crate::retry::Verdict;

/// What an HTTP attempt ended with, as a classify function sees it: its
/// response (headers read, body not), or the error that left it without
/// one.
pub type AttemptResult<'a> = Result<&'a reqwest::Response, &'a Error>;

type DynClassify = dyn Fn(&Method, AttemptResult<'_>) -> Classification + Send + Sync;

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
#[derive(Clone)]
pub struct Classify {
    f: Arc<DynClassify>,
}

impl Classify {
    /// A classify of `f`.
    pub fn new(
        f: impl Fn(&Method, AttemptResult<'_>) -> Classification + Send + Sync + 'static,
    ) -> Classify {
        Classify { f: Arc::new(f) }
    }

    /// Classifies one attempt of `method` that ended with `result`.
    pub fn classify(&self, method: &Method, result: AttemptResult<'_>) -> Classification {
        (self.f)(method, result)
    }
}

impl Default for Classify {
    fn default() -> Classify {
        Classify::new(default_classify)
    }
}

impl fmt::Debug for Classify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Classify")
    }
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
        Ok(response) => classify_status(response.status(), response.headers(), SystemTime::now()),
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

/// What a response's `Retry-After` header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryAfter {
    /// No `Retry-After` header.
    Absent,
    /// Wait this long: the delay-seconds form, or the time from `now` to
    /// the HTTP-date form (zero for a date that has passed). Seconds too
    /// many for a `u64` are taken as `u64::MAX` of them.
    After(Duration),
    /// A header that is neither form, or more than one header.
    Invalid,
}

/// Reads `Retry-After` (RFC 9110, 10.2.3): delay-seconds (one or more ASCII
/// digits, nothing else) or an HTTP-date (the IMF-fixdate form, and the
/// two obsolete forms RFC 9110 says a recipient reads), the date measured
/// from `now`. Never panics, whatever the header holds.
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> RetryAfter {
    let mut values = headers.get_all(RETRY_AFTER).iter();
    let Some(value) = values.next() else {
        return RetryAfter::Absent;
    };
    if values.next().is_some() {
        return RetryAfter::Invalid;
    }
    let bytes = value.as_bytes();
    let trimmed = bytes.trim_ascii();
    if !trimmed.is_empty() && trimmed.iter().all(u8::is_ascii_digit) {
        let secs = trimmed.iter().try_fold(0u64, |n, &d| {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        });
        return RetryAfter::After(Duration::from_secs(secs.unwrap_or(u64::MAX)));
    }
    let Ok(text) = std::str::from_utf8(trimmed) else {
        return RetryAfter::Invalid;
    };
    match httpdate::parse_http_date(text) {
        Ok(at) => RetryAfter::After(at.duration_since(now).unwrap_or(Duration::ZERO)),
        Err(_) => RetryAfter::Invalid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(RETRY_AFTER, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn retry_after_reads_both_forms() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        let at = |v: &str| retry_after(&headers(&[v]), now);
        assert_eq!(retry_after(&HeaderMap::new(), now), RetryAfter::Absent);
        assert_eq!(at("120"), RetryAfter::After(Duration::from_secs(120)));
        assert_eq!(at("0"), RetryAfter::After(Duration::ZERO));
        assert_eq!(
            at("99999999999999999999999"),
            RetryAfter::After(Duration::from_secs(u64::MAX))
        );
        assert_eq!(
            at("Sun, 06 Nov 1994 08:49:40 GMT"),
            RetryAfter::After(Duration::from_secs(3))
        );
        // The obsolete RFC 850 and asctime forms.
        assert_eq!(
            at("Sunday, 06-Nov-94 08:50:37 GMT"),
            RetryAfter::After(Duration::from_secs(60))
        );
        assert_eq!(
            at("Sun Nov  6 08:49:38 1994"),
            RetryAfter::After(Duration::from_secs(1))
        );
        // A date that has passed: no wait.
        assert_eq!(
            at("Sat, 05 Nov 1994 08:49:37 GMT"),
            RetryAfter::After(Duration::ZERO)
        );
        for bad in ["-1", "1.5", "soon", "+3", ""] {
            assert_eq!(at(bad), RetryAfter::Invalid, "{bad:?}");
        }
        assert_eq!(retry_after(&headers(&["1", "2"]), now), RetryAfter::Invalid);
    }

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

    proptest::proptest! {
        #[test]
        fn retry_after_never_panics(v in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            if let Ok(value) = HeaderValue::from_bytes(&v) {
                let mut h = HeaderMap::new();
                h.insert(RETRY_AFTER, value);
                let _ = retry_after(&h, SystemTime::now());
            }
        }
    }
}
