//! Properties of `jsonscenario`: the decoder never panics, whatever arrives;
//! what the encoder writes, the decoder reads back, through the propagator
//! too; and the size limit is the member's size as the propagator sends it
//! (docs/failure-injection.md, "Scenarios in baggage").

use std::collections::HashMap;
use std::time::Duration;

use humus::fault::{self, Decoder, Encoder, Fault, Rule, Scenario, jsonscenario};
use opentelemetry::Context;
use opentelemetry::baggage::{Baggage, BaggageExt};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry_sdk::propagation::BaggagePropagator;
use proptest::prelude::*;

fn codec() -> jsonscenario::Codec {
    jsonscenario::Codec::new("acme.fault").unwrap()
}

fn decode(value: &str) -> Result<Option<Scenario>, fault::DecodeError> {
    let mut b = Baggage::new();
    b.insert("acme.fault", value.to_owned());
    codec().decode(&b)
}

/// Text made of JSON's pieces, so the decoder sees near-misses of the
/// grammar as well as noise.
fn jsonish() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just(",".to_owned()),
        Just(":".to_owned()),
        Just("\"rules\"".to_owned()),
        Just("\"point\"".to_owned()),
        Just("\"delay_ms\"".to_owned()),
        Just("\"abort\"".to_owned()),
        Just("true".to_owned()),
        Just("null".to_owned()),
        Just("\"\\u0000\"".to_owned()),
        Just("\"\\ud800\"".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|n| n.to_string()),
        "\"[^\"\\\\]{0,8}\"",
        "[ \t\n]{1,2}",
    ];
    prop::collection::vec(token, 0..24).prop_map(|t| t.concat())
}

fn whole_ms_fault() -> impl Strategy<Value = Fault> {
    (0u64..=u64::MAX, any::<bool>()).prop_map(|(ms, abort)| Fault {
        delay: Duration::from_millis(ms),
        abort,
    })
}

fn scenario(point: impl Strategy<Value = String>) -> impl Strategy<Value = Scenario> {
    prop::collection::vec(
        (point, whole_ms_fault()).prop_map(|(p, f)| Rule::new(p, f)),
        0..6,
    )
    .prop_map(Scenario::new)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn decoding_any_text_never_panics(value in any::<String>()) {
        let _ = decode(&value);
    }

    #[test]
    fn decoding_near_json_never_panics(value in jsonish()) {
        if let Err(e) = decode(&value) {
            prop_assert_eq!(e.error_type(), jsonscenario::DECODE_ERROR_TYPE);
        }
    }
}

/// Whether `point` has a `*` before its end, which matches nothing.
fn star_before_end(point: &str) -> bool {
    point.find('*').is_some_and(|at| at + 1 < point.len())
}

/// Points with a `*` somewhere, often where it is not a wildcard.
fn starry_point() -> impl Strategy<Value = String> {
    "[a*:/é]{1,8}"
}

proptest! {
    #[test]
    fn what_encode_writes_decode_reads(s in scenario(any::<String>().prop_filter("non-empty", |p| !p.is_empty()))) {
        match codec().encode(&Baggage::new(), &s) {
            Ok(b) => prop_assert_eq!(codec().decode(&b).unwrap(), Some(s)),
            Err(jsonscenario::EncodeError::TooLarge { size, .. }) => prop_assert!(size > 2048),
            Err(jsonscenario::EncodeError::StarNotAtEnd { index, .. }) => {
                prop_assert!(star_before_end(&s.rules[index].point));
            }
            Err(e) => prop_assert!(false, "unexpected {e}"),
        }
    }

    /// Every way in agrees on patterns: the decoder, the encoder and
    /// `check_point` reject a point exactly when it has a `*` before its
    /// end, and the decoder's error names the rule and the point.
    #[test]
    fn a_star_is_accepted_only_at_the_end(point in starry_point()) {
        let json = serde_json::json!({ "rules": [{ "point": point }] }).to_string();
        let decoded = codec().from_json(&json);
        let encoded = codec().to_json(&Scenario::new([Rule::new(point.clone(), Fault::NONE)]));
        let checked = fault::check_point(&point);
        if star_before_end(&point) {
            let msg = decoded.unwrap_err().to_string();
            prop_assert!(msg.contains("rule 0: point "), "{}", msg);
            prop_assert!(msg.contains(&format!("{point:?}")), "{}", msg);
            prop_assert!(msg.contains("only at the end of a point"), "{}", msg);
            let is_star_error = matches!(encoded, Err(jsonscenario::EncodeError::StarNotAtEnd { index: 0, .. }));
            prop_assert!(is_star_error);
            let is_star_error = matches!(checked, Err(fault::PointError::StarNotAtEnd { .. }));
            prop_assert!(is_star_error);
        } else {
            prop_assert!(decoded.is_ok());
            prop_assert!(encoded.is_ok());
            prop_assert!(checked.is_ok());
        }
    }

    /// Points without `%`, which opentelemetry_sdk's propagator does not
    /// percent-encode (see the module's caveat), nor `*`, which
    /// `a_star_is_accepted_only_at_the_end` covers.
    #[test]
    fn a_scenario_crosses_the_propagator(s in scenario("[^%*]{1,40}")) {
        let mut b = Baggage::new();
        b.insert("tenant", "acme");
        let cx = Context::new().with_baggage(b);
        let Ok(cx) = fault::with_scenario(&cx, &codec(), &s) else {
            return Ok(()); // too large to send
        };
        let mut headers = HashMap::new();
        BaggagePropagator::new().inject_context(&cx, &mut headers);
        let got = BaggagePropagator::new().extract(&headers);
        prop_assert_eq!(codec().decode(got.baggage()).unwrap(), Some(s));
        prop_assert_eq!(got.baggage().get("tenant").map(|v| v.as_str()), Some("acme"));
    }
}

/// The `baggage` header the OpenTelemetry SDK's propagator writes for a
/// baggage holding `members`.
fn header_of(members: Baggage) -> String {
    let mut headers = HashMap::new();
    BaggagePropagator::new().inject_context(&Context::new().with_baggage(members), &mut headers);
    headers.remove("baggage").unwrap_or_default()
}

/// Points made of what the propagator escapes (`=`, `"`, space, `,`, `;`,
/// controls, non-ASCII) and what W3C asks it to (`%`, `\`), long enough
/// to reach the limit either side.
fn escaped_point() -> impl Strategy<Value = String> {
    "[=a\"% ,;\\\\\u{1}é]{1,1100}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// `encode` measures the member as the SDK's propagator writes it
    /// (plus two bytes for each `%` and `\` it leaves as they are, which a
    /// stricter propagator escapes): a member it accepts is at most 2048
    /// bytes on the wire, and one it rejects reports that size.
    #[test]
    fn the_limit_is_the_size_on_the_wire(s in scenario(escaped_point())) {
        let json = codec().to_json(&s).unwrap();
        let mut alone = Baggage::new();
        if alone.insert("acme.fault", json.clone()).is_none() && alone.is_empty() {
            // Over the 8192 bytes a baggage holds, unescaped: far too large.
            let too_large = matches!(
                codec().encode(&Baggage::new(), &s),
                Err(jsonscenario::EncodeError::TooLarge { .. })
            );
            prop_assert!(too_large);
            return Ok(());
        }
        let sent = header_of(alone).len();
        let unescaped = json.bytes().filter(|b| matches!(b, b'%' | b'\\')).count();
        let measured = sent + 2 * unescaped;
        match codec().encode(&Baggage::new(), &s) {
            Ok(b) => {
                prop_assert!(measured <= jsonscenario::MAX_MEMBER_BYTES, "{measured}");
                prop_assert_eq!(header_of(b).len(), sent);
            }
            Err(jsonscenario::EncodeError::TooLarge { size, limit, .. }) => {
                prop_assert_eq!(size, measured);
                prop_assert!(size > limit);
            }
            Err(e) => prop_assert!(false, "unexpected {e}"),
        }
    }
}

/// A point of 2000 `=` is about 2000 bytes of JSON and about 6000 on the
/// wire (`%3D` each): rejected, so that it cannot push the request's
/// baggage over the 8192 bytes past which the propagator drops all of it.
#[test]
fn a_point_of_2000_equals_signs_is_over_the_limit() {
    let s = Scenario::new([Rule::new("=".repeat(2000), Fault::NONE)]);
    let json = codec().to_json(&s).unwrap();
    assert!(json.len() < 2048, "{}", json.len());
    match codec().encode(&Baggage::new(), &s) {
        Err(jsonscenario::EncodeError::TooLarge { size, .. }) => {
            assert!(size > 6000, "{size}");
        }
        other => panic!("{other:?}"),
    }
}

/// A scenario over 2048 bytes is refused where it is written, the error
/// saying its size and the limit; one that arrives anyway (another
/// language's encoder, a hand-written header) is read, as the design says:
/// the limit guards the request's other baggage on the way, and a member
/// that made it through has done no harm to it.
#[test]
fn a_scenario_over_2048_bytes_is_refused_by_encode_and_read_by_decode() {
    let point = "p".repeat(3000);
    let s = Scenario::new([Rule::new(
        point.clone(),
        Fault {
            delay: Duration::from_millis(5),
            abort: true,
        },
    )]);
    let err = codec().encode(&Baggage::new(), &s).unwrap_err();
    match &err {
        jsonscenario::EncodeError::TooLarge { size, limit, .. } => {
            assert_eq!(*limit, jsonscenario::MAX_MEMBER_BYTES);
            assert!(*size > 3000, "{size}");
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.starts_with("baggage member \"acme.fault\" is ")
            && text.ends_with(" bytes percent-encoded, over the limit of 2048"),
        "{text}"
    );
    let json = codec().to_json(&s).unwrap();
    assert!(json.len() > 2048, "{}", json.len());
    assert_eq!(decode(&json).unwrap(), Some(s));
}
