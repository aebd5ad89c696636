//! The pushback trailer, `grpc-retry-pushback-ms` (docs/client.md, "The
//! pushback"; gRFC A6).

use std::time::Duration;

use humus::grpc::client::{PUSHBACK_KEY, Pushback, pushback};
use proptest::prelude::*;
use tonic::metadata::{MetadataMap, MetadataValue};

fn trailer(values: &[&str]) -> MetadataMap {
    let mut t = MetadataMap::new();
    for v in values {
        t.append(PUSHBACK_KEY, v.parse().unwrap());
    }
    t
}

fn after(ms: u64) -> Pushback {
    Pushback::After(Duration::from_millis(ms))
}

#[test]
fn the_key_is_grfc_a6s() {
    assert_eq!(PUSHBACK_KEY, "grpc-retry-pushback-ms");
}

#[test]
fn absent_says_nothing() {
    assert_eq!(pushback(&MetadataMap::new()), Pushback::Absent);
    let mut other = MetadataMap::new();
    other.insert("grpc-retry-pushback", "100".parse().unwrap());
    other.insert("retry-after", "100".parse().unwrap());
    assert_eq!(pushback(&other), Pushback::Absent);
}

#[test]
fn a_non_negative_whole_number_of_milliseconds_is_a_wait() {
    assert_eq!(pushback(&trailer(&["0"])), after(0));
    assert_eq!(pushback(&trailer(&["1"])), after(1));
    assert_eq!(pushback(&trailer(&["2000"])), after(2000));
    assert_eq!(pushback(&trailer(&["0042"])), after(42));
}

#[test]
fn a_number_too_large_saturates() {
    assert_eq!(
        pushback(&trailer(&["18446744073709551615"])),
        after(u64::MAX)
    );
    assert_eq!(
        pushback(&trailer(&["99999999999999999999999999"])),
        after(u64::MAX)
    );
}

#[test]
fn a_negative_value_means_do_not_retry() {
    for v in ["-1", "-0", "-2000"] {
        assert_eq!(pushback(&trailer(&[v])), Pushback::DoNotRetry, "{v}");
    }
}

#[test]
fn a_value_that_is_not_a_number_means_do_not_retry() {
    for v in [
        "", "soon", "1.5", "1e3", "+5", " 5", "5 ", "0x10", "5ms", "١٢", "NaN",
    ] {
        let value = match MetadataValue::try_from(v.as_bytes()) {
            Ok(value) => value,
            // Not a valid header value at all: nothing to test.
            Err(_) => continue,
        };
        let mut t = MetadataMap::new();
        t.insert(PUSHBACK_KEY, value);
        assert_eq!(pushback(&t), Pushback::DoNotRetry, "{v:?}");
    }
}

#[test]
fn a_value_that_is_not_text_means_do_not_retry() {
    let mut t = MetadataMap::new();
    t.insert(
        PUSHBACK_KEY,
        MetadataValue::try_from(&b"1\xff"[..]).unwrap(),
    );
    assert_eq!(pushback(&t), Pushback::DoNotRetry);
}

#[test]
fn the_key_given_more_than_once_means_do_not_retry() {
    assert_eq!(pushback(&trailer(&["100", "100"])), Pushback::DoNotRetry);
    assert_eq!(pushback(&trailer(&["100", "-1"])), Pushback::DoNotRetry);
    assert_eq!(pushback(&trailer(&["1", "2", "3"])), Pushback::DoNotRetry);
}

#[test]
fn read_from_a_trailer_as_http_gives_it() {
    let mut headers = http::HeaderMap::new();
    headers.insert("grpc-retry-pushback-ms", "250".parse().unwrap());
    assert_eq!(pushback(&MetadataMap::from_headers(headers)), after(250));
}

fn value_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..24),
        "[0-9]{1,30}".prop_map(String::into_bytes),
        "-[0-9]{1,30}".prop_map(String::into_bytes),
        "[ +\\-.0-9a-z]{0,12}".prop_map(String::into_bytes),
    ]
}

proptest! {
    #[test]
    fn never_panics_and_agrees_with_the_rule(
        values in proptest::collection::vec(value_bytes(), 0..4),
    ) {
        let mut t = MetadataMap::new();
        let mut kept = Vec::new();
        for v in values {
            if let Ok(value) = MetadataValue::try_from(&v[..]) {
                t.append(PUSHBACK_KEY, value);
                kept.push(v);
            }
        }
        let got = pushback(&t);
        match kept.as_slice() {
            [] => prop_assert_eq!(got, Pushback::Absent),
            [one] => {
                if !one.is_empty() && one.iter().all(u8::is_ascii_digit) {
                    let ms = std::str::from_utf8(one).unwrap().parse::<u64>().unwrap_or(u64::MAX);
                    prop_assert_eq!(got, after(ms));
                } else {
                    prop_assert_eq!(got, Pushback::DoNotRetry);
                }
            }
            _ => prop_assert_eq!(got, Pushback::DoNotRetry),
        }
    }

    #[test]
    fn never_panics_on_any_header_map(
        entries in proptest::collection::vec(
            ("[a-z\\-]{1,24}", proptest::collection::vec(any::<u8>(), 0..16)), 0..8),
    ) {
        let mut headers = http::HeaderMap::new();
        for (name, value) in entries {
            let name = if name.len() % 2 == 0 { PUSHBACK_KEY.to_owned() } else { name };
            if let (Ok(name), Ok(value)) = (
                http::HeaderName::from_bytes(name.as_bytes()),
                http::HeaderValue::from_bytes(&value),
            ) {
                headers.append(name, value);
            }
        }
        let _ = pushback(&MetadataMap::from_headers(headers));
    }
}
