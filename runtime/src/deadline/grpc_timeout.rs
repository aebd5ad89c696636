//! The `grpc-timeout` header (gRPC over HTTP/2, "Timeout"), both ways:
//! its encoding of the time a call has left ([`grpc_timeout`], what a
//! client's send carries) and its parsing ([`parse_grpc_timeout`], what a
//! served request's deadline is read from). Here, beside the deadline, and
//! not under `grpc/`, because any transport's server reads it
//! ([`InheritLayer`](crate::deadline::InheritLayer)); gRPC's code reaches
//! it, with the rest of gRPC's wire details, through `grpc::wire`.

use std::time::Duration;

/// The metadata key of a call's deadline, the time left (gRPC over HTTP/2,
/// "Timeout").
pub(crate) const GRPC_TIMEOUT: &str = "grpc-timeout";

/// [`GRPC_TIMEOUT`] as a header name: inserted, read or removed without
/// parsing a string.
pub(crate) const GRPC_TIMEOUT_HEADER: http::HeaderName =
    http::HeaderName::from_static(GRPC_TIMEOUT);

/// Parses a `grpc-timeout` value: 1 to 8 digits and a unit (`H`, `M`,
/// `S`, `m`, `u`, `n`).
pub(crate) fn parse_grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// `left` as a `grpc-timeout` value: in the finest unit whose count fits
/// the header's 8 digits (nanoseconds below 100 ms, microseconds below
/// 100 s, milliseconds below about 27 hours, then seconds, minutes and
/// hours), truncated, as grpc-go writes it; a zero `left` is `1n`, the
/// least the header can say.
///
/// Down, never up, and by less than one unit (at most a microsecond below
/// 100 s): the time sent never exceeds the time left, so the deadline a
/// server inherits from it is never later than this call's, and a call its
/// handler makes ends by that deadline (counted as the deadline's, a
/// failure) before this client cuts the attempt, rather than being dropped
/// early by the cut (counted as nothing). And it is never shorter by more
/// than the request's time on the wire: a server that enforces the
/// deadline itself (tonic's answers `CANCELLED` at its `grpc-timeout`)
/// does so no earlier than this client's own timer, which ends the
/// attempt `DEADLINE_EXCEEDED`, a failure. A coarser rounding down (to
/// three significant digits, 10 ms below 10 s) would have such a server
/// answer first, up to 1 % early, and its `CANCELLED` counts nothing: a
/// hung dependency would never open the breaker.
///
/// Source: gRPC over HTTP/2 (`PROTOCOL-HTTP2.md`, "Timeout": at most 8
/// digits and a unit).
pub(crate) fn grpc_timeout(left: std::time::Duration) -> http::HeaderValue {
    let (value, unit) = timeout_value(left);
    if unit == b'S'
        && let Some(written) = usize::try_from(value)
            .ok()
            .and_then(|secs| whole_seconds().get(secs))
    {
        return written.clone();
    }
    // At most 8 digits and the unit.
    let mut digits = [0u8; 8];
    let mut n = 0;
    let mut v = value;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut buf = [0u8; 9];
    for (i, d) in digits[..n].iter().rev().enumerate() {
        buf[i] = *d;
    }
    buf[n] = unit;
    http::HeaderValue::from_bytes(&buf[..=n]).expect("digits and a unit letter are visible ASCII")
}

/// The `grpc-timeout` values `0S` to `300S`, written once: a send with a
/// whole number of seconds left (exactly as many seconds as the timeout,
/// on paused time) sends one of them, a
/// clone of a static value, where a value written from bytes is checked
/// and copied to the heap on every send.
fn whole_seconds() -> &'static [http::HeaderValue] {
    static VALUES: std::sync::LazyLock<Vec<http::HeaderValue>> = std::sync::LazyLock::new(|| {
        (0..=300)
            .map(|secs| {
                let text: &'static str = Box::leak(format!("{secs}S").into_boxed_str());
                http::HeaderValue::from_static(text)
            })
            .collect()
    });
    &VALUES
}

/// The value and unit of [`grpc_timeout`]: `value` has 1 to 8 digits.
fn timeout_value(left: std::time::Duration) -> (u64, u8) {
    const MAX: u128 = 99_999_999;
    let nanos = left.as_nanos();
    if nanos.is_multiple_of(1_000_000_000) && nanos > 0 && nanos / 1_000_000_000 <= MAX {
        // Whole seconds (a timeout of whole seconds on paused time): the
        // shortest form, which `whole_seconds` has written once.
        return ((nanos / 1_000_000_000) as u64, b'S');
    }
    let units: [(u128, u8); 6] = [
        (1, b'n'),
        (1_000, b'u'),
        (1_000_000, b'm'),
        (1_000_000_000, b'S'),
        (60 * 1_000_000_000, b'M'),
        (3_600 * 1_000_000_000, b'H'),
    ];
    for (unit, letter) in units {
        let count = nanos / unit;
        if count <= MAX {
            return ((count as u64).max(1), letter);
        }
    }
    (MAX as u64, b'H')
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{grpc_timeout, parse_grpc_timeout};

    #[test]
    fn grpc_timeouts() {
        assert_eq!(parse_grpc_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout(b"2M"), Some(Duration::from_secs(120)));
        assert_eq!(parse_grpc_timeout(b"3S"), Some(Duration::from_secs(3)));
        assert_eq!(parse_grpc_timeout(b"40m"), Some(Duration::from_millis(40)));
        assert_eq!(parse_grpc_timeout(b"5u"), Some(Duration::from_micros(5)));
        assert_eq!(
            parse_grpc_timeout(b"99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
        for bad in [&b""[..], b"S", b"123456789S", b"1x", b"-1S", b"1.5S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
    }

    fn written(d: Duration) -> String {
        grpc_timeout(d).to_str().expect("ASCII").to_owned()
    }

    #[test]
    fn grpc_timeout_is_the_finest_unit_that_fits_truncated() {
        let cases = [
            (Duration::ZERO, "1n"),
            (Duration::from_nanos(1), "1n"),
            (Duration::from_micros(999), "999000n"),
            (Duration::from_nanos(1_500_999), "1500999n"),
            (Duration::from_nanos(99_999_999), "99999999n"),
            (Duration::from_nanos(100_000_001), "100000u"),
            (Duration::from_millis(300), "300000u"),
            (Duration::from_micros(999_999), "999999u"),
            (Duration::from_millis(1_000), "1S"),
            (Duration::from_micros(1_009_999), "1009999u"),
            (Duration::from_millis(1_234), "1234000u"),
            (Duration::from_nanos(9_999_999_999), "9999999u"),
            (Duration::from_secs(10), "10S"),
            (Duration::from_millis(15_050), "15050000u"),
            (Duration::from_micros(99_999_999), "99999999u"),
            (Duration::from_micros(100_000_001), "100000m"),
            (Duration::from_secs(300), "300S"),
            (Duration::from_millis(99_999_999_999), "99999999S"),
            (Duration::from_secs(99_999_999), "99999999S"),
            (Duration::from_secs(100_000_000), "1666666M"),
            (Duration::from_secs(60 * 99_999_999 + 59), "99999999M"),
            (Duration::from_secs(60 * 100_000_000), "1666666H"),
        ];
        for (d, want) in cases {
            assert_eq!(written(d), want, "{d:?}");
        }
    }

    proptest::proptest! {
        /// What is written parses (as tonic's server parses it) to at
        /// most the time left (one nanosecond for none), and less by at
        /// most a hundred-thousandth of it (less than one unit).
        #[test]
        fn grpc_timeout_never_lengthens_and_barely_shortens(nanos in proptest::prop_oneof![0u64..=10u64.pow(12), proptest::num::u64::ANY]) {
            let left = Duration::from_nanos(nanos);
            let parsed = parse_grpc_timeout(written(left).as_bytes())
                .expect("parses");
            proptest::prop_assert!(parsed <= left.max(Duration::from_nanos(1)), "{left:?} -> {parsed:?}");
            proptest::prop_assert!(left - parsed.min(left) <= left / 100_000, "{left:?} -> {parsed:?}");
        }
    }

    #[test]
    fn an_unrealistic_grpc_timeout_is_capped() {
        assert_eq!(written(Duration::from_secs(u64::MAX)), "99999999H");
    }
}
