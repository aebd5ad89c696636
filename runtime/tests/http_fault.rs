//! Failure injection at the HTTP client's point `http:<host>:<port>`,
//! against an in-process axum server on paused time: aborts are transport
//! errors, retried and counted; delays are waited inside
//! `attempt_timeout`; a call that `timeout` ends returns the client's own
//! timeout error; the scenario is stripped unless `forward_scenario`.

mod http_support;

use std::time::Duration;

use http_support::*;
use humus::circuit::{Outcome, State};
use humus::fault::{Cause, InjectedError, names as fit};
use humus::grpc::client::Classification;
use humus::http::client::{Classify, Kind, Settings};
use humus::telemetry::names::*;
use humus::testing::Telemetry;
use opentelemetry::trace::SpanKind;
use opentelemetry::{KeyValue, Value};
use tokio::time::Instant;

fn client_spans(telemetry: &Telemetry) -> Vec<opentelemetry_sdk::trace::SpanData> {
    spans_of_kind(telemetry, SpanKind::Client)
        .into_iter()
        .filter(|s| s.instrumentation_scope.name() == HTTP_SCOPE)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn an_aborted_get_is_retried_up_to_max_attempts_and_sends_nothing() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, true), &upstream, Settings::default());
    let point = upstream.point();
    let err = client
        .get("/pay")
        .context(context(Some(&abort_at(&point))))
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Kind::Transport, "{err}");
    let injected = err.injected().expect("an InjectedError in the chain");
    assert!(injected.is_abort());
    assert_eq!(injected.point(), point);
    // The error names the dependency, as reqwest's own errors name a URL.
    assert!(
        err.to_string().starts_with(&format!(
            "http attempt to {} got no response",
            client.base_url()
        )),
        "{err}"
    );
    assert!(
        upstream.seen().is_empty(),
        "an aborted attempt sends nothing"
    );

    let spans = client_spans(&telemetry);
    assert_eq!(spans.len(), 3);
    for span in &spans {
        assert_eq!(
            attr(span, ERROR_TYPE).as_deref(),
            Some(InjectedError::ERROR_TYPE)
        );
        let ev = &events(span, fit::EVALUATION)[0];
        assert!(
            ev.attributes
                .contains(&KeyValue::new(fit::POINT, point.clone()))
        );
        assert!(ev.attributes.contains(&KeyValue::new(fit::ABORT, true)));
    }
    assert_eq!(calls(&telemetry, "failure"), 3.0);
}

#[tokio::test(start_paused = true)]
async fn after_the_fifth_aborted_attempt_the_breaker_opens_and_sheds_a_clean_request() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(
        &setup(&telemetry, true),
        &upstream,
        Settings {
            max_attempts: 1,
            ..Settings::default()
        },
    );
    let abort = context(Some(&abort_at(&upstream.point())));
    for i in 1..=5 {
        let err = client
            .get("/pay")
            .context(abort.clone())
            .send()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), Kind::Transport, "call {i}: {err}");
        let want = if i < 5 { State::Closed } else { State::Open };
        assert_eq!(client.breaker_state(), want, "after call {i}");
    }
    let err = client
        .get("/pay")
        .context(context(None))
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Kind::Rejected, "{err}");
    assert!(upstream.seen().is_empty());
    assert_eq!(calls(&telemetry, "rejected"), 1.0);
}

/// Ten aborted calls: a classify that answers Stop, Ignored for an
/// injected failure keeps the breaker closed, an eleventh call with no
/// scenario goes through, and the ten attempts are one data point of
/// `http.client.request.duration` with the injected error's `error.type`.
#[tokio::test(start_paused = true)]
async fn ten_aborted_calls_a_classify_can_spare_the_breaker_and_one_data_point_counts_them() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let default = Classify::default();
    let client = client(
        &setup(&telemetry, true),
        &upstream,
        Settings {
            classify: Classify::new(move |method, result| match result {
                Err(e) if e.injected().is_some() => Classification::stop(Outcome::Ignored),
                _ => default.classify(method, result),
            }),
            ..Settings::default()
        },
    );
    let abort = context(Some(&abort_at(&upstream.point())));
    for _ in 0..10 {
        let err = client
            .get("/pay")
            .context(abort.clone())
            .send()
            .await
            .unwrap_err();
        assert!(err.injected().is_some(), "{err}");
    }
    assert_eq!(client.breaker_state(), State::Closed);
    let ok = client
        .get("/pay")
        .context(context(None))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(upstream.seen().len(), 1);
    assert_eq!(calls(&telemetry, "ignored"), 10.0);

    let points: Vec<_> = telemetry
        .metrics(HTTP_SCOPE)
        .into_iter()
        .filter(|p| p.name == HTTP_CLIENT_REQUEST_DURATION)
        .collect();
    let injected: Vec<_> = points
        .iter()
        .filter(|p| p.has(&[(ERROR_TYPE, InjectedError::ERROR_TYPE)]))
        .collect();
    assert_eq!(injected.len(), 1, "{points:?}");
    assert_eq!(injected[0].value.as_f64(), 10.0);
    assert_eq!(injected[0].attribute(HTTP_RESPONSE_STATUS_CODE), None);
}

#[tokio::test(start_paused = true)]
async fn the_scenario_is_stripped_unless_forward_scenario() {
    let upstream = Upstream::start().await;
    // A scenario that spares this dependency.
    let spare = context(Some(&abort_at("http:elsewhere:1")));
    for forward in [false, true] {
        let telemetry = Telemetry::new();
        let client = client(
            &setup(&telemetry, true),
            &upstream,
            Settings {
                forward_scenario: forward,
                ..Settings::default()
            },
        );
        let before = upstream.seen().len();
        let ok = client
            .get("/pay")
            // A scenario the caller wrote by hand is replaced too.
            .header("baggage", "acme.fault=%7B%7D")
            .context(spare.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(ok.status(), 200);
        let seen = &upstream.seen()[before];
        assert_eq!(
            seen.member("tenant").as_deref(),
            Some("acme"),
            "forward {forward}"
        );
        assert_eq!(seen.member(KEY).is_some(), forward, "forward {forward}");
        assert_eq!(seen.headers.get_all("baggage").iter().count(), 1);
        let span = &client_spans(&telemetry)[0];
        let traceparent = seen.headers["traceparent"].to_str().unwrap();
        assert!(traceparent.contains(&span.span_context.span_id().to_string()));
        assert_eq!(events(span, fit::STRIP).len(), usize::from(!forward));
        assert_eq!(events(span, fit::EVALUATION).len(), 1);
    }
}

/// The `baggage` header a caller set on the request is stripped whatever
/// the Setup's propagator (the no-op one, which writes nothing over it),
/// and a value too large to read whole is not sent.
#[tokio::test(start_paused = true)]
async fn a_baggage_header_of_the_callers_is_stripped_with_the_no_op_propagator() {
    let upstream = Upstream::start().await;
    let setup = humus::Setup::new().with_faults(injector());
    let client = client(&setup, &upstream, Settings::default());
    let scenario = "acme.fault=%7B%22rules%22%3A%5B%5D%7D";
    let mut past_the_limit: Vec<String> = (0..64).map(|i| format!("m{i}=v")).collect();
    past_the_limit.push(scenario.to_owned());
    for (sent, arrives) in [
        (format!("tenant=acme,{scenario}"), Some("tenant=acme")),
        (past_the_limit.join(","), None),
    ] {
        let before = upstream.seen().len();
        let ok = client
            .get("/pay")
            .header("baggage", sent.as_str())
            .send()
            .await
            .unwrap();
        assert_eq!(ok.status(), 200);
        let seen = &upstream.seen()[before];
        let header = seen.headers.get("baggage").map(|v| v.to_str().unwrap());
        assert_eq!(header, arrives, "{sent}");
    }
}

#[tokio::test(start_paused = true)]
async fn with_injection_off_nothing_is_evaluated_or_stripped() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, false), &upstream, Settings::default());
    let ok = client
        .get("/pay")
        .context(context(Some(&abort_at(&upstream.point()))))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert!(upstream.seen()[0].member(KEY).is_some());
    let span = &client_spans(&telemetry)[0];
    assert!(span.events.is_empty());
}

#[tokio::test(start_paused = true)]
async fn strip_only_evaluates_nothing_and_strips_the_scenario() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let setup = humus::Setup::new()
        .with_telemetry(telemetry.telemetry())
        .with_faults(humus::fault::Injector::strip_only(codec()));
    let client = client(&setup, &upstream, Settings::default());
    let ok = client
        .get("/pay")
        .context(context(Some(&abort_at(&upstream.point()))))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200, "nothing injected");
    let seen = &upstream.seen()[0];
    assert!(seen.member(KEY).is_none(), "stripped");
    assert_eq!(seen.member("tenant").as_deref(), Some("acme"));
    let span = &client_spans(&telemetry)[0];
    assert_eq!(events(span, fit::STRIP).len(), 1);
    assert!(events(span, fit::EVALUATION).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_delay_is_waited_inside_the_attempt_and_the_call_succeeds() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, true), &upstream, Settings::default());
    let started = Instant::now();
    let ok = client
        .get("/pay")
        .context(context(Some(&delay_at(
            &upstream.point(),
            Duration::from_secs(1),
        ))))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert!(started.elapsed() >= Duration::from_secs(1));
    // The span is timed on the wall clock, the duration on tokio's (paused).
    let point = telemetry
        .metrics(HTTP_SCOPE)
        .into_iter()
        .find(|p| p.name == HTTP_CLIENT_REQUEST_DURATION)
        .unwrap();
    match &point.value {
        humus::testing::PointValue::Histogram(h) => assert!(h.sum >= 1.0, "{h:?}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_delay_cut_short_by_attempt_timeout_is_an_attempt_timeout_wrapping_the_injected_error() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(
        &setup(&telemetry, true),
        &upstream,
        Settings {
            max_attempts: 1,
            attempt_timeout: Duration::from_secs(5),
            ..Settings::default()
        },
    );
    let started = Instant::now();
    let err = client
        .get("/pay")
        .context(context(Some(&delay_at(
            &upstream.point(),
            Duration::from_secs(8),
        ))))
        .send()
        .await
        .unwrap_err();
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert_eq!(err.kind(), Kind::AttemptTimeout, "{err}");
    assert!(err.is_timeout());
    let injected = err.injected().unwrap();
    assert_eq!(injected.cause(), Some(Cause::DeadlineExceeded));
    assert!(!injected.is_abort());
    assert!(upstream.seen().is_empty());
    assert_eq!(calls(&telemetry, "failure"), 1.0);
}

/// Revision 3: an 8 s delay is cut short by the 5 s `attempt_timeout`,
/// retried, cut short again, until the 12 s `timeout` ends the call; each
/// cut attempt counts as a failure and its span carries the injected
/// error's `error.type`; the call returns the client's own timeout error,
/// with no injected error in its chain.
#[tokio::test(start_paused = true)]
async fn a_delay_cut_short_again_and_again_until_timeout_ends_the_call() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(
        &setup(&telemetry, true),
        &upstream,
        Settings {
            timeout: Duration::from_secs(12),
            attempt_timeout: Duration::from_secs(5),
            ..Settings::default()
        },
    );
    let started = Instant::now();
    let err = client
        .get("/pay")
        .context(context(Some(&delay_at(
            &upstream.point(),
            Duration::from_secs(8),
        ))))
        .send()
        .await
        .unwrap_err();
    assert_eq!(started.elapsed(), Duration::from_secs(12));
    assert_eq!(err.kind(), Kind::Timeout, "{err}");
    assert!(err.is_timeout());
    assert!(err.injected().is_none(), "{err:?}");
    // A timeout is a timeout: the injected delay counts as the time it
    // took, and the call's error names the bound it ran into.
    assert_eq!(err.error_type(), "timeout");
    assert!(
        err.to_string()
            .contains("timed out (the client's timeout setting, 12s)"),
        "{err}"
    );
    assert!(upstream.seen().is_empty());
    assert_eq!(calls(&telemetry, "failure"), 3.0);
    let spans = client_spans(&telemetry);
    assert_eq!(spans.len(), 3);
    for span in &spans {
        assert_eq!(
            attr(span, ERROR_TYPE).as_deref(),
            Some(InjectedError::ERROR_TYPE)
        );
        let ev = &events(span, fit::EVALUATION)[0];
        assert!(
            ev.attributes
                .iter()
                .any(|kv| kv.key.as_str() == fit::DELAY && kv.value == Value::F64(8.0))
        );
    }
}
