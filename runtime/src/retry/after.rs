//! The `Retry-After` header (RFC 9110, 10.2.3): the pushback of an HTTP
//! answer, which the HTTP client and the gRPC client (for an HTTP answer
//! in place of a gRPC one) both read.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, header::RETRY_AFTER};

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
    let value = match Given::of(headers.get_all(RETRY_AFTER).iter()) {
        Given::Absent => return RetryAfter::Absent,
        Given::Once(value) => value,
        Given::More => return RetryAfter::Invalid,
    };
    let trimmed = value.as_bytes().trim_ascii();
    if let Some(secs) = whole_number(trimmed) {
        return RetryAfter::After(Duration::from_secs(secs));
    }
    let Ok(text) = std::str::from_utf8(trimmed) else {
        return RetryAfter::Invalid;
    };
    match httpdate::parse_http_date(text) {
        Ok(at) => RetryAfter::After(at.duration_since(now).unwrap_or(Duration::ZERO)),
        Err(_) => RetryAfter::Invalid,
    }
}

/// How often a server gave a field it gives at most once (an HTTP
/// header, a gRPC trailer), from its values.
pub(crate) enum Given<T> {
    /// Not at all.
    Absent,
    /// Once, this.
    Once(T),
    /// More than once.
    More,
}

impl<T> Given<T> {
    /// How often `values` give the field.
    pub(crate) fn of(mut values: impl Iterator<Item = T>) -> Given<T> {
        match (values.next(), values.next()) {
            (None, _) => Given::Absent,
            (Some(value), None) => Given::Once(value),
            (Some(_), Some(_)) => Given::More,
        }
    }
}

/// The number `digits` write, when they are one or more ASCII digits and
/// nothing else (no sign, no space, no point): a number too large for a
/// `u64` is `u64::MAX`. The delay of a `Retry-After` (seconds) and of a
/// gRPC pushback (milliseconds).
pub(crate) fn whole_number(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    });
    Some(n.unwrap_or(u64::MAX))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use http::HeaderValue;

    /// A header map with a `Retry-After` header of each of `values`.
    pub(crate) fn headers(values: &[&str]) -> HeaderMap {
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
