//! The Injector: settings, evaluation and its events, clamping, stripping,
//! a point of the user's own (docs/failure-injection.md).

use std::time::Duration;

use humus::fault::{
    self, Cause, DEFAULT_MAX_DELAY, DecodeError, Decoder, Fault, Injector, Rule, Scenario,
    Settings, jsonscenario, names,
};
use opentelemetry::baggage::{Baggage, BaggageExt};
use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Context, KeyValue, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};

const KEY: &str = "acme.fault";
const POINT: &str = "grpc:payments.v1.Payments/Charge";

fn codec() -> jsonscenario::Codec {
    jsonscenario::Codec::new(KEY).unwrap()
}

fn injector() -> Injector {
    Injector::new(Settings::new(codec())).unwrap()
}

fn abort() -> Fault {
    Fault {
        abort: true,
        ..Fault::NONE
    }
}

fn delay(d: Duration) -> Fault {
    Fault {
        delay: d,
        abort: false,
    }
}

/// Baggage with `tenant=acme` and, when given, the scenario's member as
/// raw JSON.
fn baggage(json: Option<&str>) -> Baggage {
    let mut b = Baggage::new();
    b.insert("tenant", "acme");
    if let Some(json) = json {
        b.insert(KEY, json.to_owned());
    }
    b
}

/// Runs `f` with a context holding `baggage` and a recording span, and
/// returns the events that span ended with.
fn events_of(baggage: Baggage, f: impl FnOnce(&Context)) -> Vec<(String, Vec<KeyValue>)> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let span = provider.tracer("test").start("request");
    let cx = Context::new().with_baggage(baggage).with_span(span);
    f(&cx);
    cx.span().end();
    let spans = exporter.get_finished_spans().unwrap();
    assert_eq!(spans.len(), 1);
    spans[0]
        .events
        .iter()
        .map(|e| (e.name.to_string(), e.attributes.clone()))
        .collect()
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attrs
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

#[test]
fn check_max_delay_accepts_positive_and_rejects_zero_without_naming_the_field() {
    fault::check_max_delay(Duration::from_nanos(1)).unwrap();
    fault::check_max_delay(DEFAULT_MAX_DELAY).unwrap();
    let err = fault::check_max_delay(Duration::ZERO).unwrap_err();
    assert_eq!(err.value(), Duration::ZERO);
    assert_eq!(err.to_string(), "must be positive, got 0ns");
}

#[test]
fn default_settings() {
    let s = Settings::default();
    assert!(s.decoder.is_none());
    assert_eq!(s.max_delay, Duration::from_secs(10));
    assert_eq!(Settings::new(codec()).max_delay, Duration::from_secs(10));
}

#[test]
fn new_reports_every_bad_field_at_once() {
    let err = Injector::new(Settings {
        decoder: None,
        max_delay: Duration::ZERO,
    })
    .unwrap_err();
    let fields: Vec<_> = err.fields().iter().map(|f| f.field).collect();
    assert_eq!(fields, ["decoder", "max_delay"]);
    assert_eq!(
        err.to_string(),
        "invalid failure-injection settings: decoder: must be set; max_delay: must be positive, got 0ns"
    );

    let err = Injector::new(Settings::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid failure-injection settings: decoder: must be set"
    );

    let err = Injector::new(Settings {
        max_delay: Duration::ZERO,
        ..Settings::new(codec())
    })
    .unwrap_err();
    assert_eq!(err.fields().len(), 1);
    assert_eq!(err.fields()[0].field, "max_delay");

    let on = injector();
    assert!(on.is_on());
    assert_eq!(on.max_delay(), Some(DEFAULT_MAX_DELAY));
}

#[test]
fn off_evaluates_strips_and_records_nothing() {
    let off = Injector::default();
    assert!(!off.is_on());
    assert_eq!(off.max_delay(), None);
    assert_eq!(format!("{off:?}"), "Injector(off)");
    let events = events_of(
        baggage(Some(r#"{"rules":[{"point":"*","abort":true}]}"#)),
        |cx| {
            assert!(!off.carries_scenario(cx));
            assert_eq!(off.eval(cx, POINT), Fault::NONE);
            assert!(off.strip(cx).is_none());
            assert!(off.strip_baggage(cx.baggage()).is_none());
        },
    );
    assert!(events.is_empty(), "{events:?}");
}

#[test]
fn strip_only_evaluates_nothing_and_strips_as_on_does() {
    let strip_only = Injector::strip_only(codec());
    assert!(!strip_only.is_on());
    assert_eq!(strip_only.max_delay(), None);
    assert!(format!("{strip_only:?}").contains("strip_only: true"));
    let events = events_of(
        baggage(Some(r#"{"rules":[{"point":"*","abort":true}]}"#)),
        |cx| {
            assert!(strip_only.carries_scenario(cx));
            assert_eq!(strip_only.eval(cx, POINT), Fault::NONE);
            let stripped = strip_only.strip(cx).expect("stripped");
            assert!(!strip_only.carries_scenario(&stripped));
            assert_eq!(
                strip_only.strip_baggage(cx.baggage()).map(|b| b.len()),
                Some(cx.baggage().len() - 1)
            );
        },
    );
    // The strip is recorded; no evaluation is.
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, [names::STRIP]);
}

#[test]
fn no_scenario_is_no_fault_and_no_event() {
    let events = events_of(baggage(None), |cx| {
        let on = injector();
        assert!(!on.carries_scenario(cx));
        assert_eq!(on.eval(cx, POINT), Fault::NONE);
        assert!(on.strip(cx).is_none());
    });
    assert!(events.is_empty(), "{events:?}");
}

#[test]
fn a_matched_evaluation_is_an_event_with_the_rule() {
    let json =
        r#"{"rules":[{"point":"grpc:payments.v1.Payments/*","delay_ms":1500,"abort":true}]}"#;
    let events = events_of(baggage(Some(json)), |cx| {
        let on = injector();
        assert!(on.carries_scenario(cx));
        assert_eq!(
            on.eval(cx, POINT),
            Fault {
                delay: Duration::from_millis(1500),
                abort: true
            }
        );
    });
    assert_eq!(events.len(), 1);
    let (name, attrs) = &events[0];
    assert_eq!(name, names::EVALUATION);
    assert_eq!(name, "humus.fit.evaluation");
    assert_eq!(attr(attrs, "humus.fit.point"), Some(&Value::from(POINT)));
    assert_eq!(
        attr(attrs, "humus.fit.rule"),
        Some(&Value::from("grpc:payments.v1.Payments/*"))
    );
    assert_eq!(attr(attrs, "humus.fit.delay"), Some(&Value::F64(1.5)));
    assert_eq!(attr(attrs, "humus.fit.abort"), Some(&Value::Bool(true)));
    assert_eq!(attrs.len(), 4);
}

#[test]
fn an_unmatched_evaluation_lists_the_point_alone() {
    let json = r#"{"rules":[{"point":"kafka:orders","abort":true}]}"#;
    let events = events_of(baggage(Some(json)), |cx| {
        assert_eq!(injector().eval(cx, POINT), Fault::NONE);
        assert_eq!(injector().eval(cx, "grpc:other.v1.Other/Get"), Fault::NONE);
    });
    assert_eq!(events.len(), 2, "every evaluation is an event");
    for (name, attrs) in &events {
        assert_eq!(name, "humus.fit.evaluation");
        assert_eq!(attrs.len(), 1, "{attrs:?}");
    }
    assert_eq!(
        attr(&events[0].1, "humus.fit.point"),
        Some(&Value::from(POINT))
    );
}

#[test]
fn a_delay_over_max_delay_is_clamped_and_the_event_shows_it() {
    let on = Injector::new(Settings {
        max_delay: Duration::from_secs(2),
        ..Settings::new(codec())
    })
    .unwrap();
    let json = r#"{"rules":[{"point":"*","delay_ms":8000}]}"#;
    let events = events_of(baggage(Some(json)), |cx| {
        assert_eq!(on.eval(cx, POINT), delay(Duration::from_secs(2)));
    });
    assert_eq!(
        attr(&events[0].1, "humus.fit.delay"),
        Some(&Value::F64(2.0))
    );
    assert_eq!(
        attr(&events[0].1, "humus.fit.abort"),
        Some(&Value::Bool(false))
    );

    // A delay under the maximum is left alone.
    let json = r#"{"rules":[{"point":"*","delay_ms":250}]}"#;
    events_of(baggage(Some(json)), |cx| {
        assert_eq!(on.eval(cx, POINT), delay(Duration::from_millis(250)));
    });
}

#[test]
fn a_rejected_scenario_is_an_error_event_and_the_request_goes_on() {
    let json = r#"{"rules":[{"point":"*","abrot":true}]}"#;
    let events = events_of(baggage(Some(json)), |cx| {
        let on = injector();
        assert!(
            on.carries_scenario(cx),
            "an invalid scenario is still carried"
        );
        assert_eq!(on.eval(cx, POINT), Fault::NONE);
    });
    assert_eq!(events.len(), 1);
    let (name, attrs) = &events[0];
    assert_eq!(name, "humus.fit.evaluation");
    assert_eq!(attr(attrs, "humus.fit.point"), Some(&Value::from(POINT)));
    assert_eq!(
        attr(attrs, "error.type"),
        Some(&Value::from(jsonscenario::DECODE_ERROR_TYPE))
    );
    let message = attr(attrs, "error.message").unwrap().as_str();
    assert!(message.contains("abrot"), "{message}");
    assert!(attr(attrs, "humus.fit.rule").is_none());
}

#[test]
fn strip_keeps_every_other_member_and_records_an_event() {
    let mut b = Baggage::new();
    b.insert("tenant", "acme");
    b.insert_with_metadata("region", "eu", "sampled=1");
    b.insert(KEY, r#"{"rules":[]}"#);
    let events = events_of(b, |cx| {
        let on = injector();
        let stripped = on.strip(cx).expect("a scenario to strip");
        let after = stripped.baggage();
        assert_eq!(after.len(), 2);
        assert!(after.get(KEY).is_none());
        assert_eq!(after.get("tenant").unwrap().as_str(), "acme");
        let (value, metadata) = after.get_with_metadata("region").unwrap();
        assert_eq!(value.as_str(), "eu");
        assert_eq!(metadata.as_str(), "sampled=1");
        // The stripped context keeps the span, and carries no scenario.
        assert_eq!(
            stripped.span().span_context().span_id(),
            cx.span().span_context().span_id()
        );
        assert!(!on.carries_scenario(&stripped));
        assert!(on.strip(&stripped).is_none());
        assert_eq!(on.eval(&stripped, POINT), Fault::NONE);
    });
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].0, "humus.fit.strip");
    assert!(events[0].1.is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_users_own_code_is_a_point() {
    let json = r#"{"rules":[{"point":"postgresql:*","abort":true}]}"#;
    let cx = Context::new().with_baggage(baggage(Some(json)));
    let on = injector();
    assert_eq!(on.eval(&cx, "postgresql:orders"), abort());
    let err = on.inject(&cx, "postgresql:orders", None).await.unwrap_err();
    assert!(err.is_abort());
    assert_eq!(err.point(), "postgresql:orders");
    assert_eq!(err.error_type(), "humus::fault::InjectedError");
    // Another point is spared.
    on.inject(&cx, "redis:sessions", None).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_evaluated_delay_is_cut_short_by_the_deadline() {
    let json = r#"{"rules":[{"point":"*","delay_ms":8000}]}"#;
    let cx = Context::new().with_baggage(baggage(Some(json)));
    let start = tokio::time::Instant::now();
    let err = injector()
        .inject(&cx, POINT, Some(start + Duration::from_secs(5)))
        .await
        .unwrap_err();
    assert_eq!(err.cause(), Some(Cause::DeadlineExceeded));
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    assert_eq!(err.to_status().code(), tonic::Code::DeadlineExceeded);
}

#[test]
fn with_scenario_round_trips_through_the_baggage_propagator() {
    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry_sdk::propagation::BaggagePropagator;
    use std::collections::HashMap;

    let scenario = Scenario::new([
        Rule::new("grpc:payments.v1.Payments/Charge", abort()),
        Rule::new("*", delay(Duration::from_millis(250))),
    ]);
    let edge = Context::new().with_baggage(baggage(None));
    let edge = fault::with_scenario(&edge, &codec(), &scenario).unwrap();

    let mut headers = HashMap::new();
    BaggagePropagator::new().inject_context(&edge, &mut headers);
    let wire = &headers["baggage"];
    assert!(!wire.contains('"'), "the member is percent-encoded: {wire}");

    let server = BaggagePropagator::new().extract(&headers);
    assert_eq!(codec().decode(server.baggage()).unwrap(), Some(scenario));
    assert_eq!(server.baggage().get("tenant").unwrap().as_str(), "acme");
}

/// A decoder of the user's own, with its own error type.
#[derive(Debug)]
struct Signed;

impl Decoder for Signed {
    fn decode(&self, baggage: &Baggage) -> Result<Option<Scenario>, DecodeError> {
        match baggage.get("sig") {
            None => Ok(None),
            Some(_) => Err(DecodeError::new(
                "acme.BadSignature",
                "signature does not verify",
            )),
        }
    }

    fn owns(&self, key: &str) -> bool {
        key == "sig" || key == "sig.scenario"
    }
}

#[test]
fn a_users_decoder_names_its_error_type_and_members() {
    let on = Injector::new(Settings::new(Signed)).unwrap();
    let mut b = Baggage::new();
    b.insert("sig", "x");
    b.insert("sig.scenario", "y");
    b.insert("tenant", "acme");
    let events = events_of(b, |cx| {
        assert_eq!(on.eval(cx, POINT), Fault::NONE);
        let stripped = on.strip(cx).unwrap();
        assert_eq!(stripped.baggage().len(), 1);
        assert!(stripped.baggage().get("tenant").is_some());
    });
    assert_eq!(events.len(), 2);
    assert_eq!(
        attr(&events[0].1, "error.type"),
        Some(&Value::from("acme.BadSignature"))
    );
    assert_eq!(
        attr(&events[0].1, "error.message"),
        Some(&Value::from("signature does not verify"))
    );
    assert_eq!(events[1].0, "humus.fit.strip");
}

/// A user's decoder whose scenario has a point with a `*` before its end
/// (which, as a pattern, would match no point a client names): the
/// injector rejects the scenario through the same check as `jsonscenario`
/// (`check_point`), records why, and injects nothing, failing closed even
/// at a point named literally as the pattern.
#[test]
fn a_users_scenario_with_a_star_before_the_end_is_rejected_and_injects_nothing() {
    #[derive(Debug)]
    struct Starry;
    impl Decoder for Starry {
        fn decode(&self, baggage: &Baggage) -> Result<Option<Scenario>, DecodeError> {
            Ok(baggage.get("starry").map(|_| {
                Scenario::new([
                    Rule::new("*", delay(Duration::from_millis(5))),
                    Rule::new("grpc:*/Greet", abort()),
                ])
            }))
        }
        fn owns(&self, key: &str) -> bool {
            key == "starry"
        }
    }
    let on = Injector::new(Settings::new(Starry)).unwrap();
    let mut b = Baggage::new();
    b.insert("starry", "1");
    let events = events_of(b, |cx| {
        assert_eq!(on.eval(cx, "grpc:*/Greet"), Fault::NONE);
        assert_eq!(on.eval(cx, POINT), Fault::NONE);
    });
    assert_eq!(events.len(), 2);
    assert_eq!(
        attr(&events[0].1, "error.type"),
        Some(&Value::from(fault::POINT_ERROR_TYPE))
    );
    assert_eq!(
        attr(&events[0].1, "error.message"),
        Some(&Value::from(
            "invalid scenario: rule 1: point \"grpc:*/Greet\" has a `*` after \"grpc:\", but a `*` is a \
             wildcard only at the end of a point, so this rule would match no point: end the point at \
             the `*` (\"grpc:*\") to match every point starting with \"grpc:\", or remove the `*`"
        ))
    );
}

/// A decoder that panics: its panic goes on to the code that evaluated
/// (a handler's, which its server answers INTERNAL as any handler's
/// panic), not swallowed as a scenario the request did not carry. A strip
/// asks the decoder only which members are its own, so it still strips.
#[test]
fn a_decoder_that_panics_panics_the_evaluation_and_strips_still_work() {
    #[derive(Debug)]
    struct Panicking;
    impl Decoder for Panicking {
        fn decode(&self, _: &Baggage) -> Result<Option<Scenario>, DecodeError> {
            panic!("the decoder's own bug")
        }
        fn owns(&self, key: &str) -> bool {
            key == KEY
        }
    }
    let injector = Injector::new(Settings::new(Panicking)).unwrap();
    let with = || baggage(Some(r#"{"rules":[]}"#));
    let cx = Context::new().with_baggage(with());
    let panic =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| injector.eval(&cx, POINT)))
            .unwrap_err();
    assert_eq!(panic.downcast_ref::<&str>(), Some(&"the decoder's own bug"));
    let stripped = injector.strip_baggage(&with()).unwrap();
    assert_eq!(stripped.get(KEY), None);
    assert_eq!(stripped.get("tenant").map(|v| v.as_str()), Some("acme"));
}
