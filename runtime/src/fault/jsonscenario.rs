//! A ready-made wire format: a [`Scenario`] as JSON in one baggage member
//! whose key the user names ([design](crate::design::failure_injection#scenarios-in-baggage)).
//! Nothing requires it; any [`Decoder`] will do.
//!
//! ```text
//! acme.fault={"rules":[{"point":"grpc:payments.v1.Payments/Charge","abort":true},{"point":"*","delay_ms":250}]}
//! ```
//!
//! The grammar, `{"rules":[{"point":…,"delay_ms":…,"abort":…}]}`:
//!
//! - `rules` is required (it may be empty); each rule's `point` is
//!   required, not empty, and has a `*` only at its end (see
//!   [`Rule::point`] for patterns and [`check_point`]
//!   for the check);
//! - `delay_ms` is a non-negative whole number of milliseconds, default 0;
//! - `abort` is a boolean, default `false`;
//! - unknown fields, duplicate fields and anything after the JSON value
//!   are rejected, so a typo such as `"abrot"` is an error the evaluation
//!   event reports, not a rule that silently spares its point.
//!
//! On the wire the member is percent-encoded; the propagator does that
//! when it injects the `baggage` header and undoes it when it extracts it,
//! so the
//! [`Baggage`](https://docs.rs/opentelemetry/0.33/opentelemetry/baggage/struct.Baggage.html)
//! value holds the JSON itself. [`Codec::encode`]
//! measures the member as it is sent (`key=value`, percent-encoded as the
//! OpenTelemetry SDK's `BaggagePropagator` writes it: controls, non-ASCII
//! bytes, space, `"`, `,`, `;` and `=` each become three bytes; and `%` and
//! `\` too, which W3C Baggage asks to encode, so a stricter propagator
//! sends no more than is measured) and rejects one over
//! [`MAX_MEMBER_BYTES`]: a quarter of W3C's 8192-byte guarantee, since a
//! propagator drops all of an oversized header's baggage, every other
//! member with it. So a point of 2000 `=` is about 6000 bytes, and
//! rejected, though its JSON is about 2000.
//!
//! It has no signature and no expiry: trust comes from where a request
//! came from (servers strip scenarios from callers they do not trust). A
//! signed format, or a registry of scenario IDs, is a [`Decoder`] of the
//! user's.
//!
//! ```
//! use std::time::Duration;
//! use humus::fault::{self, Fault, Injector, Rule, Scenario, Settings, jsonscenario};
//! use opentelemetry::Context;
//!
//! let codec = jsonscenario::Codec::new("acme.fault")?;
//!
//! // The edge (or a test) puts a request under test ...
//! let scenario = Scenario::new([Rule::new(
//!     "grpc:payments.v1.Payments/*",
//!     Fault { delay: Duration::from_millis(250), abort: true },
//! )]);
//! let cx = fault::with_scenario(&Context::new(), &codec, &scenario)?;
//!
//! // ... and a service whose injector reads the same member evaluates it.
//! let faults = Injector::new(Settings::new(codec))?;
//! let got = faults.eval(&cx, "grpc:payments.v1.Payments/Charge");
//! assert!(got.abort);
//! assert_eq!(got.delay, Duration::from_millis(250));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Caveat: `opentelemetry_sdk` 0.33's `BaggagePropagator` does not
//! percent-encode `%` when it injects, so a point name containing `%` may
//! not survive a hop through it.

use std::time::Duration;

use opentelemetry::baggage::Baggage;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde::{Deserialize, Serialize};

use super::codec::baggage_without;
use super::{DecodeError, Decoder, Encoder, Fault, PointError, Rule, Scenario, check_point};

/// The largest member [`Codec::encode`] writes, in bytes, percent-encoded
/// (`key=value`): 2048.
pub const MAX_MEMBER_BYTES: usize = 2048;

/// The `error.type` of a scenario this codec rejects, recorded on the
/// `humus.fit.evaluation` event.
pub const DECODE_ERROR_TYPE: &str = "humus::fault::jsonscenario::DecodeError";

/// The bytes a member's value is measured percent-encoded with: those the
/// OpenTelemetry SDK's `BaggagePropagator` encodes when it injects
/// (controls, space, `"`, `;`, `,`, `=`; non-ASCII bytes always are), and
/// `%` and `\`, which a W3C `baggage-octet` excludes too, so the measure
/// is at least what either writes.
const ON_THE_WIRE: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b',')
    .add(b';')
    .add(b'=')
    .add(b'\\')
    .add(b'%');

/// The size of the member `key=value` on the wire, in bytes (see
/// [`ON_THE_WIRE`]).
fn wire_size(key: &str, value: &str) -> usize {
    let encoded = |s: &str| {
        utf8_percent_encode(s, ON_THE_WIRE)
            .map(str::len)
            .sum::<usize>()
    };
    encoded(key) + 1 + encoded(value)
}

/// Carries a [`Scenario`] as JSON in the one baggage member named by its
/// key: a [`Decoder`] and an [`Encoder`]. It holds only its key; cheap to
/// clone, safe to share.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Codec {
    key: String,
}

/// Why [`Codec::new`] rejected a key: it is not a valid W3C baggage key
/// (an HTTP token: one or more of `A-Z a-z 0-9 ! # $ % & ' * + - . ^ _ `` ` `` | ~`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid baggage key {key:?}: {problem}")]
pub struct InvalidKey {
    key: String,
    problem: &'static str,
}

impl InvalidKey {
    /// The rejected key.
    pub fn key(&self) -> &str {
        &self.key
    }
}

/// Why [`Codec::encode`] could not write a scenario.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The member, percent-encoded, is over [`MAX_MEMBER_BYTES`].
    #[error("baggage member {key:?} is {size} bytes percent-encoded, over the limit of {limit}")]
    TooLarge {
        /// The member's key.
        key: String,
        /// Its size, in bytes, percent-encoded.
        size: usize,
        /// The limit, [`MAX_MEMBER_BYTES`].
        limit: usize,
    },
    /// A rule's delay is not a whole number of milliseconds.
    #[error("rule {index} ({point:?}): delay {delay:?} is not a whole number of milliseconds")]
    DelayNotWholeMillis {
        /// The rule's index in the scenario.
        index: usize,
        /// The rule's point pattern.
        point: String,
        /// The delay.
        delay: Duration,
    },
    /// A rule's delay, in milliseconds, does not fit the grammar's number.
    #[error("rule {index} ({point:?}): delay {delay:?} is too long to write in milliseconds")]
    DelayTooLong {
        /// The rule's index in the scenario.
        index: usize,
        /// The rule's point pattern.
        point: String,
        /// The delay.
        delay: Duration,
    },
    /// A rule's point pattern is empty.
    #[error("rule {index}: point must not be empty")]
    EmptyPoint {
        /// The rule's index in the scenario.
        index: usize,
    },
    /// A rule's point pattern has a `*` before its end
    /// ([`PointError::StarNotAtEnd`]), so the rule would match no point.
    #[error("rule {index}: {problem}")]
    StarNotAtEnd {
        /// The rule's index in the scenario.
        index: usize,
        /// What is wrong with the point, and how to fix it.
        problem: PointError,
    },
    /// The baggage refused the member: it already holds as many members,
    /// or as many bytes, as W3C Baggage allows (64 members, 8192 bytes).
    #[error("the baggage has no room for member {key:?}")]
    BaggageFull {
        /// The member's key.
        key: String,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireScenario {
    rules: Vec<WireRule>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireRule {
    point: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    delay_ms: u64,
    #[serde(default, skip_serializing_if = "is_false")]
    abort: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Why a member did not hold a valid scenario.
#[derive(Debug, thiserror::Error)]
enum Invalid {
    #[error("baggage member {key:?}: invalid scenario: {error}")]
    Json {
        key: String,
        #[source]
        error: serde_json::Error,
    },
    #[error("baggage member {key:?}: invalid scenario: rule {index}: point must not be empty")]
    EmptyPoint { key: String, index: usize },
    #[error("baggage member {key:?}: invalid scenario: rule {index}: {problem}")]
    Point {
        key: String,
        index: usize,
        problem: PointError,
    },
}

impl Codec {
    /// The codec of the baggage member named `key`. There is no default
    /// key: the user names it (for example `acme.fault`).
    ///
    /// # Errors
    ///
    /// [`InvalidKey`] when `key` is not a valid W3C baggage key (an HTTP
    /// token).
    pub fn new(key: impl Into<String>) -> Result<Codec, InvalidKey> {
        let key = key.into();
        let problem = if key.is_empty() {
            Some("must not be empty")
        } else if !key.bytes().all(is_tchar) {
            Some("must be an HTTP token: letters, digits and !#$%&'*+-.^_`|~")
        } else {
            None
        };
        match problem {
            Some(problem) => Err(InvalidKey { key, problem }),
            None => Ok(Codec { key }),
        }
    }

    /// The key of the member this codec reads and writes.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// `scenario` as this codec's JSON.
    ///
    /// # Errors
    ///
    /// [`EncodeError`] for a rule it cannot express: an empty point, a
    /// point with a `*` before its end (which the decoder rejects), a
    /// delay that is not whole milliseconds or is too long.
    pub fn to_json(&self, scenario: &Scenario) -> Result<String, EncodeError> {
        let rules = scenario
            .rules
            .iter()
            .enumerate()
            .map(|(index, rule)| wire_rule(index, rule))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(serde_json::to_string(&WireScenario { rules })
            .expect("a scenario of strings, integers and booleans always serializes"))
    }

    /// The scenario `json` holds, in this codec's grammar.
    ///
    /// # Errors
    ///
    /// [`DecodeError`] (of type [`DECODE_ERROR_TYPE`]) naming the key and
    /// what is wrong: bad JSON, an unknown, missing or duplicate field, a
    /// negative or fractional `delay_ms`, an empty point, a point with a
    /// `*` before its end (which would match no point), trailing data.
    pub fn from_json(&self, json: &str) -> Result<Scenario, DecodeError> {
        let wire: WireScenario = serde_json::from_str(json).map_err(|error| {
            invalid(Invalid::Json {
                key: self.key.clone(),
                error,
            })
        })?;
        let rules = wire
            .rules
            .into_iter()
            .enumerate()
            .map(|(index, r)| {
                match check_point(&r.point) {
                    Ok(()) => {}
                    Err(PointError::Empty) => {
                        return Err(invalid(Invalid::EmptyPoint {
                            key: self.key.clone(),
                            index,
                        }));
                    }
                    Err(problem) => {
                        return Err(invalid(Invalid::Point {
                            key: self.key.clone(),
                            index,
                            problem,
                        }));
                    }
                }
                Ok(Rule {
                    point: r.point,
                    fault: Fault {
                        delay: Duration::from_millis(r.delay_ms),
                        abort: r.abort,
                    },
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Scenario { rules })
    }
}

fn invalid(e: Invalid) -> DecodeError {
    DecodeError::new(DECODE_ERROR_TYPE, e)
}

fn wire_rule(index: usize, rule: &Rule) -> Result<WireRule, EncodeError> {
    match check_point(&rule.point) {
        Ok(()) => {}
        Err(PointError::Empty) => return Err(EncodeError::EmptyPoint { index }),
        Err(problem) => return Err(EncodeError::StarNotAtEnd { index, problem }),
    }
    let delay = rule.fault.delay;
    if !delay.subsec_nanos().is_multiple_of(1_000_000) {
        return Err(EncodeError::DelayNotWholeMillis {
            index,
            point: rule.point.clone(),
            delay,
        });
    }
    let delay_ms = u64::try_from(delay.as_millis()).map_err(|_| EncodeError::DelayTooLong {
        index,
        point: rule.point.clone(),
        delay,
    })?;
    Ok(WireRule {
        point: rule.point.clone(),
        delay_ms,
        abort: rule.fault.abort,
    })
}

/// RFC 7230 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

impl Decoder for Codec {
    /// The scenario in the member named by the key, `Ok(None)` when there
    /// is no such member.
    fn decode(&self, baggage: &Baggage) -> Result<Option<Scenario>, DecodeError> {
        match baggage.get(&self.key) {
            None => Ok(None),
            Some(value) => self.from_json(value.as_str()).map(Some),
        }
    }

    /// Whether `key` is this codec's key.
    fn owns(&self, key: &str) -> bool {
        key == self.key
    }
}

impl Encoder for Codec {
    type Error = EncodeError;

    /// `baggage` with the member named by the key set to `scenario`'s
    /// JSON, every other member kept.
    fn encode(&self, baggage: &Baggage, scenario: &Scenario) -> Result<Baggage, EncodeError> {
        let json = self.to_json(scenario)?;
        let size = wire_size(&self.key, &json);
        if size > MAX_MEMBER_BYTES {
            return Err(EncodeError::TooLarge {
                key: self.key.clone(),
                size,
                limit: MAX_MEMBER_BYTES,
            });
        }
        let mut out = baggage_without(baggage, |k| k == self.key);
        out.insert(self.key.clone(), json.clone());
        if out.get(&self.key).map(|v| v.as_str()) != Some(json.as_str()) {
            return Err(EncodeError::BaggageFull {
                key: self.key.clone(),
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec() -> Codec {
        Codec::new("acme.fault").unwrap()
    }

    fn baggage(members: &[(&str, &str)]) -> Baggage {
        let mut b = Baggage::new();
        for (k, v) in members {
            b.insert(k.to_string(), v.to_string());
        }
        b
    }

    fn decode(json: &str) -> Result<Option<Scenario>, DecodeError> {
        codec().decode(&baggage(&[("acme.fault", json)]))
    }

    #[test]
    fn decodes_the_grammar() {
        let s = decode(
            r#"{"rules":[{"point":"http:payments:8443","abort":true},{"point":"*","delay_ms":250}]}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            s,
            Scenario::new([
                Rule::new(
                    "http:payments:8443",
                    Fault {
                        abort: true,
                        ..Fault::NONE
                    }
                ),
                Rule::new(
                    "*",
                    Fault {
                        delay: Duration::from_millis(250),
                        abort: false
                    }
                ),
            ])
        );
    }

    #[test]
    fn defaults_and_whitespace() {
        let s = decode(" {\"rules\" : [ {\"point\":\"a\"} ] }\n")
            .unwrap()
            .unwrap();
        assert_eq!(s.rules[0].fault, Fault::NONE);
        assert_eq!(
            decode(r#"{"rules":[]}"#).unwrap().unwrap(),
            Scenario::default()
        );
        let s = decode(r#"{"rules":[{"point":"a","delay_ms":0,"abort":false}]}"#)
            .unwrap()
            .unwrap();
        assert_eq!(s.rules[0].fault, Fault::NONE);
        let big = decode(r#"{"rules":[{"point":"a","delay_ms":18446744073709551615}]}"#)
            .unwrap()
            .unwrap();
        assert_eq!(big.rules[0].fault.delay, Duration::from_millis(u64::MAX));
    }

    #[test]
    fn no_member_is_no_scenario() {
        assert!(codec().decode(&Baggage::new()).unwrap().is_none());
        assert!(
            codec()
                .decode(&baggage(&[("tenant", "acme")]))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn rejects_what_the_grammar_does_not_allow() {
        let cases = [
            (
                "unknown rule field",
                r#"{"rules":[{"point":"a","abrot":true}]}"#,
            ),
            ("unknown top field", r#"{"rules":[],"extra":1}"#),
            ("missing point", r#"{"rules":[{"abort":true}]}"#),
            ("empty point", r#"{"rules":[{"point":""}]}"#),
            ("missing rules", r#"{}"#),
            (
                "negative delay",
                r#"{"rules":[{"point":"a","delay_ms":-1}]}"#,
            ),
            (
                "fractional delay",
                r#"{"rules":[{"point":"a","delay_ms":1.5}]}"#,
            ),
            ("float delay", r#"{"rules":[{"point":"a","delay_ms":1.0}]}"#),
            (
                "exponent delay",
                r#"{"rules":[{"point":"a","delay_ms":1e3}]}"#,
            ),
            (
                "string delay",
                r#"{"rules":[{"point":"a","delay_ms":"5"}]}"#,
            ),
            (
                "delay overflow",
                r#"{"rules":[{"point":"a","delay_ms":18446744073709551616}]}"#,
            ),
            ("null delay", r#"{"rules":[{"point":"a","delay_ms":null}]}"#),
            (
                "string abort",
                r#"{"rules":[{"point":"a","abort":"true"}]}"#,
            ),
            ("numeric point", r#"{"rules":[{"point":7}]}"#),
            (
                "duplicate field",
                r#"{"rules":[{"point":"a","point":"b"}]}"#,
            ),
            ("trailing data", r#"{"rules":[]}x"#),
            ("two values", r#"{"rules":[]}{"rules":[]}"#),
            ("not an object", r#"[]"#),
            ("truncated", r#"{"rules":[{"point":"a""#),
            ("empty", ""),
            ("percent-encoded", "%7B%22rules%22%3A%5B%5D%7D"),
        ];
        for (what, json) in cases {
            let err = decode(json).expect_err(what);
            assert_eq!(err.error_type(), DECODE_ERROR_TYPE, "{what}");
            let msg = err.to_string();
            assert!(
                msg.starts_with("baggage member \"acme.fault\": invalid scenario: "),
                "{what}: {msg}"
            );
        }
        let msg = decode(r#"{"rules":[{"point":"a","abrot":true}]}"#)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("abrot"), "{msg}");
        let msg = decode(r#"{"rules":[{"point":"a"},{"point":""}]}"#)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("rule 1: point must not be empty"), "{msg}");
    }

    /// A `*` is a wildcard only at a point's end, so a rule with one
    /// before it matches nothing: the trial's `grpc:*/Greet` is an error
    /// naming the rule, the point, where the `*` is and the fix, not a
    /// rule accepted to do nothing.
    #[test]
    fn rejects_a_star_before_the_end_of_a_point() {
        let err = decode(r#"{"rules":[{"point":"*"},{"point":"grpc:*/Greet","abort":true}]}"#)
            .unwrap_err();
        assert_eq!(err.error_type(), DECODE_ERROR_TYPE);
        assert_eq!(
            err.to_string(),
            "baggage member \"acme.fault\": invalid scenario: rule 1: point \"grpc:*/Greet\" has a \
             `*` after \"grpc:\", but a `*` is a wildcard only at the end of a point, so this rule \
             would match no point: end the point at the `*` (\"grpc:*\") to match every point \
             starting with \"grpc:\", or remove the `*`"
        );
        for json in [
            r#"{"rules":[{"point":"grpc:*"}]}"#,
            r#"{"rules":[{"point":"*"}]}"#,
        ] {
            assert!(decode(json).unwrap().is_some(), "{json}");
        }
        // The encoder refuses what the decoder would.
        let s = Scenario::new([Rule::new("**", Fault::NONE)]);
        match codec().to_json(&s).unwrap_err() {
            EncodeError::StarNotAtEnd { index: 0, problem } => {
                assert_eq!(
                    problem,
                    PointError::StarNotAtEnd {
                        point: "**".into(),
                        before: String::new(),
                        suggestion: "*".into(),
                    }
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn new_checks_the_key() {
        for key in ["acme.fault", "x", "a-b_c~d!#$%&'*+.^`|9"] {
            assert_eq!(Codec::new(key).unwrap().key(), key);
        }
        for key in [
            "",
            "acme fault",
            "a=b",
            "a,b",
            "a;b",
            "a/b",
            "a:b",
            "a\"b",
            "a(b)",
            "a{b}",
            "a[b]",
            "a@b",
            "a?b",
            "a\\b",
            "a\tb",
            "é",
        ] {
            let err = Codec::new(key).expect_err(key);
            assert_eq!(err.key(), key);
            assert!(err.to_string().starts_with("invalid baggage key"), "{err}");
        }
    }

    #[test]
    fn encode_round_trips_and_keeps_other_members() {
        let s = Scenario::new([
            Rule::new(
                "grpc:a.A/M",
                Fault {
                    abort: true,
                    ..Fault::NONE
                },
            ),
            Rule::new(
                "*",
                Fault {
                    delay: Duration::from_millis(250),
                    abort: true,
                },
            ),
        ]);
        let before = baggage(&[("tenant", "acme"), ("acme.fault", "stale")]);
        let after = codec().encode(&before, &s).unwrap();
        assert_eq!(after.len(), 2);
        assert_eq!(after.get("tenant").unwrap().as_str(), "acme");
        assert_eq!(
            after.get("acme.fault").unwrap().as_str(),
            r#"{"rules":[{"point":"grpc:a.A/M","abort":true},{"point":"*","delay_ms":250,"abort":true}]}"#
        );
        assert_eq!(codec().decode(&after).unwrap(), Some(s));
    }

    #[test]
    fn encode_rejects_delays_it_cannot_write() {
        let s = Scenario::new([
            Rule::new("a", Fault::NONE),
            Rule::new(
                "b",
                Fault {
                    delay: Duration::from_micros(1500),
                    abort: false,
                },
            ),
        ]);
        assert_eq!(
            codec().encode(&Baggage::new(), &s).unwrap_err(),
            EncodeError::DelayNotWholeMillis {
                index: 1,
                point: "b".into(),
                delay: Duration::from_micros(1500)
            }
        );
        let s = Scenario::new([Rule::new(
            "b",
            Fault {
                delay: Duration::MAX,
                abort: false,
            },
        )]);
        assert!(matches!(
            codec().to_json(&s),
            Err(EncodeError::DelayNotWholeMillis { .. })
        ));
        let s = Scenario::new([Rule::new(
            "b",
            Fault {
                delay: Duration::from_secs(u64::MAX),
                abort: false,
            },
        )]);
        assert!(matches!(
            codec().to_json(&s),
            Err(EncodeError::DelayTooLong { index: 0, .. })
        ));
        let s = Scenario::new([Rule::new("", Fault::NONE)]);
        assert_eq!(
            codec().to_json(&s).unwrap_err(),
            EncodeError::EmptyPoint { index: 0 }
        );
    }

    /// A scenario whose member is exactly `size` bytes percent-encoded.
    fn scenario_of_size(size: usize) -> Scenario {
        // acme.fault={"rules":[{"point":"…"}]} with `"` as %22: the member
        // around the point is `acme.fault=` (11) + `{%22rules%22:[{%22point%22:%22`
        // (30) + `%22}]}` (6) = 47 bytes.
        let point = "p".repeat(size - 47);
        let s = Scenario::new([Rule::new(point, Fault::NONE)]);
        let json = codec().to_json(&s).unwrap();
        let encoded = utf8_percent_encode(&json, ON_THE_WIRE).to_string();
        assert_eq!(11 + encoded.len(), size);
        s
    }

    #[test]
    fn encode_rejects_a_member_over_2048_bytes_encoded() {
        codec()
            .encode(&Baggage::new(), &scenario_of_size(2048))
            .unwrap();
        assert_eq!(
            codec()
                .encode(&Baggage::new(), &scenario_of_size(2049))
                .unwrap_err(),
            EncodeError::TooLarge {
                key: "acme.fault".into(),
                size: 2049,
                limit: 2048
            }
        );
        // The encoded size counts: 700 spaces are 2100 bytes on the wire.
        let s = Scenario::new([Rule::new(" ".repeat(700), Fault::NONE)]);
        assert!(matches!(
            codec().encode(&Baggage::new(), &s),
            Err(EncodeError::TooLarge { .. })
        ));
    }

    #[test]
    fn encode_reports_a_full_baggage() {
        let mut full = Baggage::new();
        for i in 0..64 {
            full.insert(format!("m{i}"), "v");
        }
        assert_eq!(full.len(), 64);
        let s = Scenario::new([Rule::new("a", Fault::NONE)]);
        assert_eq!(
            codec().encode(&full, &s).unwrap_err(),
            EncodeError::BaggageFull {
                key: "acme.fault".into()
            }
        );
    }

    #[test]
    fn owns_only_its_key() {
        assert!(codec().owns("acme.fault"));
        assert!(!codec().owns("acme.faults"));
        assert!(!codec().owns("tenant"));
    }
}
