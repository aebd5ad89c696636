//! The HTTP client against an in-process axum server on 127.0.0.1, on
//! paused time: the default classification, which requests are retried,
//! the breaker, the budget's decisions, and the telemetry.

mod http_support;

use std::time::Duration;

use http_support::*;
use humus::circuit::{self, State};
use humus::http::client::{Client, Kind, Settings};
use humus::telemetry::names::*;
use humus::testing::Telemetry;
use opentelemetry::trace::{SpanKind, Status};
use tokio::time::Instant;

fn settings() -> Settings {
    Settings::default()
}

fn decisions(telemetry: &Telemetry) -> Vec<(String, f64)> {
    let mut d: Vec<(String, f64)> = telemetry
        .metrics(CLIENT_SCOPE)
        .into_iter()
        .filter(|p| p.name == HUMUS_RETRY_DECISIONS)
        .map(|p| {
            (
                p.attribute(HUMUS_RETRY_DECISION)
                    .unwrap()
                    .as_str()
                    .into_owned(),
                p.value.as_f64(),
            )
        })
        .collect();
    d.sort_by(|a, b| a.0.cmp(&b.0));
    d
}

#[tokio::test(start_paused = true)]
async fn a_get_is_retried_on_502_503_504_until_max_attempts() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, false), &upstream, settings());
    upstream.script([Reply::status(502), Reply::status(503), Reply::status(504)]);
    let response = client.get("/rates").send().await.unwrap();
    assert_eq!(response.status(), 504);
    assert_eq!(upstream.seen().len(), 3);
    assert_eq!(
        decisions(&telemetry),
        [("exhausted".to_owned(), 1.0), ("retried".to_owned(), 2.0)]
    );
    assert_eq!(calls(&telemetry, "failure"), 3.0);

    upstream.script([Reply::status(503)]);
    let response = client.get("/rates").send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "ok");
    assert_eq!(upstream.seen().len(), 5);
}

#[tokio::test(start_paused = true)]
async fn other_5xx_and_429_count_against_the_dependency_and_4xx_for_it_neither_retried() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, false), &upstream, settings());
    upstream.script([Reply::status(500), Reply::status(404), Reply::status(429)]);
    for want in [500, 404, 429] {
        assert_eq!(client.get("/x").send().await.unwrap().status(), want);
    }
    assert_eq!(upstream.seen().len(), 3);
    assert_eq!(calls(&telemetry, "failure"), 2.0);
    assert_eq!(calls(&telemetry, "success"), 1.0);
    assert_eq!(decisions(&telemetry), [("stopped".to_owned(), 3.0)]);
}

/// A 429 is the dependency shedding load: each counts against it (a
/// dependency, or a proxy's rate limit in front of it, that sheds every
/// call opens the breaker), and it is sent again only after the
/// `Retry-After` it gives.
#[tokio::test(start_paused = true)]
async fn a_429_counts_against_the_dependency_and_is_retried_only_when_it_says_when() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(
        &setup(&telemetry, false),
        &upstream,
        Settings {
            breaker_policy: circuit::Policy::consecutive(3),
            ..settings()
        },
    );
    // No Retry-After: not sent again.
    upstream.script([Reply::status(429)]);
    assert_eq!(client.get("/x").send().await.unwrap().status(), 429);
    assert_eq!(upstream.seen().len(), 1);
    assert_eq!(calls(&telemetry, "failure"), 1.0);
    // A Retry-After: sent again after it.
    upstream.script([Reply::retry_after(429, "2")]);
    let started = Instant::now();
    assert_eq!(client.get("/x").send().await.unwrap().status(), 200);
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert_eq!(upstream.seen().len(), 3);
    assert_eq!(calls(&telemetry, "failure"), 2.0);
    assert_eq!(calls(&telemetry, "success"), 1.0);
    // Three in a row open the breaker: the next call sends nothing.
    upstream.script([Reply::status(429), Reply::status(429), Reply::status(429)]);
    for _ in 0..3 {
        assert_eq!(client.get("/x").send().await.unwrap().status(), 429);
    }
    assert_eq!(client.breaker_state(), State::Open);
    let err = client.get("/x").send().await.unwrap_err();
    assert_eq!(err.kind(), Kind::Rejected, "{err}");
    assert_eq!(upstream.seen().len(), 6);
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_waited_in_both_forms() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, false), &upstream, settings());

    upstream.script([Reply::retry_after(429, "3")]);
    let started = Instant::now();
    assert_eq!(client.get("/x").send().await.unwrap().status(), 200);
    assert_eq!(started.elapsed(), Duration::from_secs(3));

    // An HTTP-date about 4 s ahead (whole seconds, on the wall clock).
    let at = std::time::SystemTime::now() + Duration::from_secs(4);
    upstream.script([Reply::retry_after(503, &httpdate::fmt_http_date(at))]);
    let started = Instant::now();
    assert_eq!(client.get("/x").send().await.unwrap().status(), 200);
    let waited = started.elapsed();
    assert!(
        waited > Duration::from_secs(2) && waited <= Duration::from_secs(4),
        "{waited:?}"
    );
    assert_eq!(upstream.seen().len(), 4);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_longer_than_backoff_max_ends_the_call() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, false), &upstream, settings());
    upstream.script([Reply::retry_after(503, "60")]);
    let started = Instant::now();
    let response = client.get("/x").send().await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(upstream.seen().len(), 1);
    assert_eq!(decisions(&telemetry), [("stopped".to_owned(), 1.0)]);
}

#[tokio::test(start_paused = true)]
async fn only_idempotent_methods_are_retried_unless_a_request_opts_in_or_out() {
    let upstream = Upstream::start().await;
    let client = client(&setup(&Telemetry::new(), false), &upstream, settings());

    for (method, want) in [
        (http::Method::POST, 1),
        (http::Method::PATCH, 1),
        (http::Method::PUT, 2),
        (http::Method::DELETE, 2),
        (http::Method::HEAD, 2),
        (http::Method::OPTIONS, 2),
    ] {
        let before = upstream.seen().len();
        upstream.script([Reply::status(503)]);
        let status = client
            .request(method.clone(), "/x")
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(upstream.seen().len() - before, want, "{method}");
        assert_eq!(status, if want == 1 { 503 } else { 200 }, "{method}");
        upstream.script([]);
        // Drain what a POST left in the script.
        if want == 1 {
            let _ = client.get("/drain").send().await.unwrap();
        }
    }

    let before = upstream.seen().len();
    upstream.script([Reply::status(503)]);
    let response = client
        .post("/charges")
        .header("idempotency-key", "c-1")
        .body("{\"amount\":5}")
        .retry(true)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let seen = upstream.seen();
    assert_eq!(seen.len() - before, 2);
    // The body is sent again in full.
    assert_eq!(seen[seen.len() - 1].body, seen[seen.len() - 2].body);
    assert_eq!(&seen[seen.len() - 1].body[..], b"{\"amount\":5}");

    let before = upstream.seen().len();
    upstream.script([Reply::status(503)]);
    let status = client.get("/x").retry(false).send().await.unwrap().status();
    assert_eq!(status, 503);
    assert_eq!(upstream.seen().len() - before, 1);
}

#[tokio::test(start_paused = true)]
async fn a_body_that_cannot_be_sent_again_is_sent_once() {
    let upstream = Upstream::start().await;
    let client = client(&setup(&Telemetry::new(), false), &upstream, settings());
    upstream.script([Reply::status(503)]);
    let body = reqwest::Body::wrap(http_body_util::Full::new(bytes::Bytes::from_static(
        b"chunk",
    )));
    let response = client.put("/upload").body(body).send().await.unwrap();
    assert_eq!(response.status(), 503);
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(&seen[0].body[..], b"chunk");
}

#[tokio::test(start_paused = true)]
async fn no_response_is_retried_and_counted_as_a_failure_and_the_breaker_opens_then_recovers() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let telemetry = Telemetry::new();
    let client = Client::new(
        &setup(&telemetry, false),
        Settings {
            base_url: format!("http://127.0.0.1:{port}"),
            ..settings()
        },
    )
    .unwrap()
    .with_backoff_source(|_| 0);
    let err = client.get("/x").send().await.unwrap_err();
    assert_eq!(err.kind(), Kind::Transport, "{err}");
    assert!(
        err.reqwest().is_some_and(reqwest::Error::is_connect),
        "{err:?}"
    );
    assert_eq!(calls(&telemetry, "failure"), 3.0);
    // Two more attempts of the next call open the breaker (five in a row),
    // and the budget refuses its third (5 of 10 tokens left);
    let err = client.get("/x").send().await.unwrap_err();
    assert_eq!(err.kind(), Kind::Transport, "{err}");
    // the next call is rejected: nothing is sent.
    let err = client.get("/x").send().await.unwrap_err();
    assert_eq!(err.kind(), Kind::Rejected, "{err}");
    assert!(err.rejected().is_some());
    assert_eq!(client.breaker_state(), State::Open);
    assert_eq!(calls(&telemetry, "failure"), 5.0);
    assert_eq!(calls(&telemetry, "rejected"), 1.0);

    // The dependency comes up; after the open time, probes close it.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    tokio::spawn(async move {
        let app = axum::Router::new().fallback(|| async { "ok" });
        axum::serve(listener, app).await.unwrap();
    });
    tokio::time::sleep(Duration::from_secs(10)).await;
    for _ in 0..3 {
        assert_eq!(client.get("/x").send().await.unwrap().status(), 200);
    }
    assert_eq!(client.breaker_state(), State::Closed);
    // The transitions' log records carry the gRPC client's names.
    let logs = telemetry.logs();
    let states: Vec<String> = logs
        .iter()
        .filter(|l| l.record.event_name() == Some(HUMUS_CIRCUIT_TRANSITION_EVENT))
        .map(|l| {
            l.record
                .attributes_iter()
                .find(|(k, _)| k.as_str() == HUMUS_CIRCUIT_STATE)
                .map(|(_, v)| format!("{v:?}"))
                .unwrap()
        })
        .collect();
    assert_eq!(states.len(), 3, "{states:?}");
    assert!(
        states[0].contains("open") && states[2].contains("closed"),
        "{states:?}"
    );
    let open = logs
        .iter()
        .find(|l| l.record.event_name() == Some(HUMUS_CIRCUIT_TRANSITION_EVENT))
        .unwrap();
    let keys: Vec<String> = open
        .record
        .attributes_iter()
        .map(|(k, _)| k.as_str().to_owned())
        .collect();
    for key in [
        SERVER_ADDRESS,
        SERVER_PORT,
        HUMUS_CIRCUIT_STATE,
        HUMUS_CIRCUIT_PREVIOUS_STATE,
        HUMUS_CIRCUIT_CONSECUTIVE_FAILURES,
    ] {
        assert!(keys.iter().any(|k| k == key), "{key} in {keys:?}");
    }
    let transitions = telemetry
        .metrics(CLIENT_SCOPE)
        .into_iter()
        .filter(|p| p.name == HUMUS_CIRCUIT_TRANSITIONS)
        .count();
    assert_eq!(transitions, 3);
    let state = telemetry
        .metrics(CLIENT_SCOPE)
        .into_iter()
        .find(|p| {
            p.name == HUMUS_CIRCUIT_STATE_INSTRUMENT && p.has(&[(HUMUS_CIRCUIT_STATE, "closed")])
        })
        .unwrap();
    assert!(state.has(&[
        (SERVER_ADDRESS, "127.0.0.1"),
        (SERVER_PORT, &port.to_string())
    ]));
    assert_eq!(state.value.as_f64(), 1.0);
}

#[tokio::test(start_paused = true)]
async fn the_retry_budget_throttles_retries() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(
        &setup(&telemetry, false),
        &upstream,
        Settings {
            max_attempts: 2,
            retry_budget: humus::retry::BudgetConfig {
                max_tokens: 4,
                token_ratio: 0.1,
            },
            breaker_policy: circuit::Policy::consecutive(1000),
            ..settings()
        },
    );
    upstream.script((0..20).map(|_| Reply::status(503)));
    for _ in 0..6 {
        let _ = client.get("/x").send().await.unwrap();
    }
    let d = decisions(&telemetry);
    assert!(d.iter().any(|(k, n)| k == "throttled" && *n > 0.0), "{d:?}");
}

#[tokio::test(start_paused = true)]
async fn an_attempt_span_follows_the_http_client_conventions() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, false), &upstream, settings());
    upstream.script([Reply::status(503)]);
    let url = format!("http://user:secret@{}/rates?c=EUR", upstream.addr);
    // reqwest's builder would move the credentials into a header: a
    // request made by hand keeps them in its URL.
    let request = reqwest::Request::new(http::Method::GET, url.parse().unwrap());
    assert_eq!(client.execute(request).await.unwrap().status(), 200);

    let spans = spans_of_kind(&telemetry, SpanKind::Client);
    assert_eq!(spans.len(), 2);
    let port = upstream.addr.port().to_string();
    for (i, span) in spans.iter().enumerate() {
        assert_eq!(span.name, "GET");
        assert_eq!(span.instrumentation_scope.name(), HTTP_SCOPE);
        assert_eq!(attr(span, HTTP_REQUEST_METHOD).as_deref(), Some("GET"));
        assert_eq!(attr(span, SERVER_ADDRESS).as_deref(), Some("127.0.0.1"));
        assert_eq!(attr(span, SERVER_PORT), Some(port.clone()));
        let full = attr(span, URL_FULL).unwrap();
        assert_eq!(
            full,
            format!("http://REDACTED:REDACTED@127.0.0.1:{port}/rates?c=EUR")
        );
        let resend = attr(span, HTTP_REQUEST_RESEND_COUNT);
        assert_eq!(resend, (i == 1).then(|| "1".to_owned()));
    }
    assert_eq!(
        attr(&spans[0], HTTP_RESPONSE_STATUS_CODE).as_deref(),
        Some("503")
    );
    assert_eq!(attr(&spans[0], ERROR_TYPE).as_deref(), Some("503"));
    assert!(matches!(spans[0].status, Status::Error { .. }));
    assert_eq!(
        attr(&spans[1], HTTP_RESPONSE_STATUS_CODE).as_deref(),
        Some("200")
    );
    assert_eq!(attr(&spans[1], ERROR_TYPE), None);
    assert_eq!(spans[1].status, Status::Unset);

    // Each attempt sent its own span's trace context.
    let seen = upstream.seen();
    for (span, seen) in spans.iter().zip(&seen) {
        let traceparent = seen.headers["traceparent"].to_str().unwrap().to_owned();
        assert!(
            traceparent.contains(&span.span_context.span_id().to_string()),
            "{traceparent}"
        );
    }

    let points: Vec<_> = telemetry
        .metrics(HTTP_SCOPE)
        .into_iter()
        .filter(|p| p.name == HTTP_CLIENT_REQUEST_DURATION)
        .collect();
    assert_eq!(points.len(), 2, "{points:?}");
    assert!(points.iter().all(|p| p.unit == "s"
        && p.has(&[
            (HTTP_REQUEST_METHOD, "GET"),
            (SERVER_ADDRESS, "127.0.0.1"),
            (SERVER_PORT, &port)
        ])));
    assert!(
        points
            .iter()
            .any(|p| p.has(&[(HTTP_RESPONSE_STATUS_CODE, "503"), (ERROR_TYPE, "503")]))
    );
    assert!(
        points
            .iter()
            .any(|p| p.has(&[(HTTP_RESPONSE_STATUS_CODE, "200")])
                && p.attribute(ERROR_TYPE).is_none())
    );
}

/// A call the open breaker rejects at once still takes a unit of its
/// task's cooperative budget: a task that loops on rejected calls yields
/// to the runtime's other tasks.
#[tokio::test(start_paused = true)]
async fn a_loop_of_rejected_calls_yields_to_other_tasks() {
    const CALLS: usize = 10_000;
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(
        &setup(&telemetry, false),
        &upstream,
        Settings {
            max_attempts: 1,
            breaker_policy: circuit::Policy::consecutive(1),
            ..settings()
        },
    );
    upstream.script([Reply::status(500)]);
    assert_eq!(client.get("/x").send().await.unwrap().status(), 500);
    let made = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let spinner = tokio::spawn({
        let (client, made) = (client.clone(), made.clone());
        async move {
            for _ in 0..CALLS {
                let err = client.get("/x").send().await.unwrap_err();
                assert_eq!(err.kind(), Kind::Rejected);
                made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    // This test's task runs again once the spinner yields.
    tokio::task::yield_now().await;
    let made_before = made.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        made_before < CALLS,
        "the loop of rejected calls yielded before its end ({made_before} of {CALLS} calls)"
    );
    spinner.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_rejected_call_has_a_span_of_humus_own_scope_and_sends_nothing() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(
        &setup(&telemetry, false),
        &upstream,
        Settings {
            max_attempts: 1,
            breaker_policy: circuit::Policy::consecutive(1),
            ..settings()
        },
    );
    upstream.script([Reply::status(500)]);
    assert_eq!(client.get("/x").send().await.unwrap().status(), 500);
    let err = client.get("/x").send().await.unwrap_err();
    assert_eq!(err.kind(), Kind::Rejected);
    assert_eq!(upstream.seen().len(), 1);
    let rejected: Vec<_> = telemetry
        .spans()
        .into_iter()
        .filter(|s| s.instrumentation_scope.name() == CLIENT_SCOPE)
        .collect();
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0].name, "GET");
    assert_eq!(
        attr(&rejected[0], ERROR_TYPE).as_deref(),
        Some(HTTP_REJECTED_ERROR_TYPE)
    );
    assert_eq!(calls(&telemetry, "rejected"), 1.0);
}

#[tokio::test(start_paused = true)]
async fn a_request_to_another_origin_is_refused_and_counts_nothing() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, false), &upstream, settings());
    let request = client
        .reqwest()
        .get("http://127.0.0.1:1/x")
        .build()
        .unwrap();
    let err = client.execute(request).await.unwrap_err();
    assert_eq!(err.kind(), Kind::Request);
    assert!(err.to_string().contains("not on the origin"), "{err}");
    assert!(telemetry.spans().is_empty());
    assert_eq!(
        calls(&telemetry, "failure") + calls(&telemetry, "success"),
        0.0
    );
}

#[tokio::test(start_paused = true)]
async fn the_call_timeout_bounds_every_attempt_and_wait() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(
        &setup(&telemetry, false),
        &upstream,
        Settings {
            timeout: Duration::from_secs(4),
            ..settings()
        },
    );
    // A 503 asking for 5 s: the wait would end after the deadline.
    upstream.script([Reply::retry_after(503, "5")]);
    let started = Instant::now();
    let response = client.get("/x").send().await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(decisions(&telemetry), [("expired".to_owned(), 1.0)]);
}

/// A duration too long for the clock is refused by the settings' check,
/// naming the field; the longest allowed (365 days) is no panic when an
/// instant is computed from it, with or without the fault point, and
/// neither is a request's own timeout too long for the clock.
#[tokio::test(start_paused = true)]
async fn a_duration_too_long_for_the_clock_is_refused_or_no_timer_and_no_panic() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let huge = humantime_serde::re::humantime::parse_duration("300000000000y").unwrap();
    let settings: Settings = serde_json::from_str(&format!(
        r#"{{"base_url": "{}", "timeout": "300000000000y", "attempt_timeout": "300000000000y"}}"#,
        upstream.url()
    ))
    .unwrap();
    assert_eq!(settings.attempt_timeout, huge);
    let err = humus::app::check_http_client(&settings)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("attempt_timeout") && err.contains("want at most 365 days"),
        "{err}"
    );
    for faults in [false, true] {
        let settings: Settings = serde_json::from_str(&format!(
            r#"{{"base_url": "{}", "timeout": "365days", "attempt_timeout": "365days"}}"#,
            upstream.url()
        ))
        .unwrap();
        humus::app::check_http_client(&settings).unwrap();
        let client = Client::new(&setup(&telemetry, faults), settings).unwrap();
        let response = client.get("/x").send().await.unwrap();
        assert_eq!(response.status(), 200);
        let response = client.get("/x").timeout(huge).send().await.unwrap();
        assert_eq!(response.status(), 200);
        // A retried answer: each attempt's deadline is computed again.
        upstream.script([Reply::status(503)]);
        let response = client.get("/x").send().await.unwrap();
        assert_eq!(response.status(), 200);
    }
    // The breaker's periods are capped where they are read.
    for key in ["breaker_open_for", "breaker_probe_timeout"] {
        let settings: Settings = serde_json::from_str(&format!(
            r#"{{"base_url": "{}", "{key}": "300000000000y"}}"#,
            upstream.url()
        ))
        .unwrap();
        let err = humus::app::check_http_client(&settings)
            .unwrap_err()
            .to_string();
        assert!(err.contains("want at most 365 days"), "{err}");
    }
}

#[test]
fn new_names_every_bad_field() {
    let err = Client::new(
        &humus::Setup::new(),
        Settings {
            base_url: "ftp://x".into(),
            max_attempts: 0,
            ..settings()
        },
    )
    .unwrap_err();
    assert_eq!(
        err.fields().collect::<Vec<_>>(),
        ["base_url", "max_attempts"]
    );
}

#[test]
fn the_point_has_the_schemes_port_when_the_url_has_none() {
    let setup = humus::Setup::new();
    let point = |url: &str| {
        Client::new(
            &setup,
            Settings {
                base_url: url.into(),
                ..settings()
            },
        )
        .unwrap()
        .point()
        .to_owned()
    };
    assert_eq!(point("https://payments"), "http:payments:443");
    assert_eq!(point("http://payments/v1"), "http:payments:80");
    assert_eq!(point("https://payments:8443"), "http:payments:8443");
}

#[tokio::test(start_paused = true)]
async fn a_call_made_while_serving_an_rpc_ends_by_its_deadline() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, false), &upstream, settings());
    upstream.script([Reply::retry_after(503, "3")]);
    let served = humus::grpc::deadline::Inherited::new(
        Some(Instant::now() + Duration::from_secs(2)),
        opentelemetry::Context::new(),
    );
    let response = served
        .scope(async { client.get("/x").send().await })
        .await
        .unwrap();
    // The 3 s wait would end after the served RPC's deadline.
    assert_eq!(response.status(), 503);
    assert_eq!(decisions(&telemetry), [("expired".to_owned(), 1.0)]);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_already_passed_sends_nothing_and_counts_nothing() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, false), &upstream, settings());
    upstream.script([Reply::status(502), Reply::status(502)]);
    // A request's own timeout of zero.
    let err = client
        .get("/x")
        .timeout(Duration::ZERO)
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Kind::Timeout);
    assert!(
        std::error::Error::source(&err).is_some_and(|s| s.to_string().contains("nothing was sent")),
        "{err:?}"
    );
    // The deadline of the RPC being served, already passed.
    let served = humus::grpc::deadline::Inherited::new(
        Some(Instant::now() - Duration::from_millis(1)),
        opentelemetry::Context::new(),
    );
    let err = served
        .scope(async { client.get("/x").send().await })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Kind::Timeout);
    assert!(upstream.seen().is_empty(), "{:?}", upstream.seen());
    assert!(telemetry.spans().is_empty());
    assert_eq!(
        calls(&telemetry, "failure") + calls(&telemetry, "success"),
        0.0
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_answer_is_cut_by_attempt_timeout_and_retried_then_by_timeout() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(
        &setup(&telemetry, false),
        &upstream,
        Settings {
            timeout: Duration::from_secs(7),
            attempt_timeout: Duration::from_secs(5),
            ..settings()
        },
    );
    // Cut at 5 s, retried, answered at once.
    upstream.script([Reply::slow(200, Duration::from_secs(8))]);
    let started = Instant::now();
    let response = client.get("/x").send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    let spans = spans_of_kind(&telemetry, SpanKind::Client);
    assert_eq!(attr(&spans[0], ERROR_TYPE).as_deref(), Some("timeout"));

    // Cut at 5 s, retried, cut again by the call's 7 s: reqwest's own
    // timeout error.
    upstream.script([
        Reply::slow(200, Duration::from_secs(8)),
        Reply::slow(200, Duration::from_secs(8)),
    ]);
    let started = Instant::now();
    let err = client.get("/x").send().await.unwrap_err();
    assert_eq!(started.elapsed(), Duration::from_secs(7));
    assert_eq!(err.kind(), Kind::Timeout, "{err}");
    assert!(
        err.reqwest().is_some_and(reqwest::Error::is_timeout),
        "{err:?}"
    );
    assert_eq!(calls(&telemetry, "failure"), 3.0);
}

#[tokio::test(start_paused = true)]
async fn a_retry_the_breaker_rejects_returns_the_answer_of_the_attempt_before() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(
        &setup(&telemetry, false),
        &upstream,
        Settings {
            breaker_policy: circuit::Policy::consecutive(1),
            ..settings()
        },
    );
    // The first attempt is sent and answered 502, which opens the breaker;
    // its retry is rejected, and the call returns that 502, not a
    // rejection that would say nothing was sent.
    upstream.script([Reply::status(502)]);
    let response = client.get("/x").send().await.unwrap();
    assert_eq!(response.status(), 502);
    assert_eq!(upstream.seen().len(), 1);
    assert_eq!(client.breaker_state(), State::Open);
    assert_eq!(calls(&telemetry, "rejected"), 1.0);
    // The next call's first attempt is rejected: nothing is sent.
    let err = client.get("/x").send().await.unwrap_err();
    assert_eq!(err.kind(), Kind::Rejected, "{err}");
    assert_eq!(upstream.seen().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_path_is_appended_to_the_base_path_and_stays_under_it() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = Client::new(
        &setup(&telemetry, false),
        Settings {
            base_url: format!("{}/v1", upstream.url()),
            ..settings()
        },
    )
    .unwrap();
    // Appended, with or without a leading '/', not joined as a URL parser
    // joins (which would resolve "rates" against "/v1" to "/rates").
    for (path, want) in [
        ("/rates/EUR", "/v1/rates/EUR"),
        ("rates/EUR?at=now", "/v1/rates/EUR?at=now"),
        ("", "/v1"),
        ("?at=now", "/v1?at=now"),
        ("a..b/.c/d.", "/v1/a..b/.c/d."),
        ("rates:latest", "/v1/rates:latest"),
    ] {
        let response = client.get(path).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(upstream.seen().last().unwrap().path, want, "{path}");
    }
    let sent = upstream.seen().len();

    // Refused before anything is sent or counted, each saying why.
    for (path, says) in [
        ("../ok", "the segment \"..\""),
        ("/../ok", "the segment \"..\""),
        ("rates/../../ok", "the segment \"..\""),
        ("./ok", "the segment \".\""),
        ("rates/%2e%2E/ok", "the segment \"%2e%2E\""),
        ("..", "the segment \"..\""),
        ("..?x=1", "the segment \"..\""),
        ("https://elsewhere/x", "is an absolute URL"),
        ("http://127.0.0.1:1/x", "is an absolute URL"),
        ("//elsewhere/x", "names a host"),
        ("..\\ok", "backslash"),
        // A URL parser drops a tab, LF or CR, which would make these `..`.
        ("rates/.\n./..\n/admin", "holds '\\n'"),
        (".\n./etc", "holds '\\n'"),
        ("%2e\t%2e/etc", "holds '\\t'"),
        (".\r./etc", "holds '\\r'"),
        ("/rates?at=.\n.", "holds '\\n'"),
        ("/a b", "holds ' '"),
    ] {
        let err = client.get(path).send().await.unwrap_err();
        assert_eq!(err.kind(), Kind::Request, "{path}");
        let text = err.to_string();
        assert!(text.contains(says), "{path}: {text}");
        assert!(text.contains("base URL"), "{path}: {text}");
        let err = client.post(path).build().unwrap_err();
        assert_eq!(err.kind(), Kind::Request, "{path}");
    }
    let err = client.get("./ok").send().await.unwrap_err().to_string();
    assert!(
        err.contains("which URL resolution removes") && err.contains("write the path without it"),
        "{err}"
    );
    assert_eq!(upstream.seen().len(), sent);
    assert_eq!(
        calls(&telemetry, "failure") + calls(&telemetry, "success"),
        6.0
    );
}

#[tokio::test(start_paused = true)]
async fn a_requests_own_shorter_timeout_ends_the_call_and_every_attempt_has_its_headers() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, false), &upstream, settings());
    // A 503, then an answer slower than the request's own 1 s: the retry
    // is cut when the call's time is up, not at attempt_timeout (5 s).
    upstream.script([Reply::status(503), Reply::slow(200, Duration::from_secs(3))]);
    let started = Instant::now();
    let err = client
        .get("/slow")
        .header("x-humus", "1")
        .timeout(Duration::from_secs(1))
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Kind::Timeout, "{err}");
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    let seen = upstream.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|s| s.headers["x-humus"] == "1"));

    // A request whose builder the caller mapped is copied by reqwest for
    // each attempt: its retry carries what it carried.
    upstream.script([Reply::status(503)]);
    let response = client
        .get("/mapped?a=b")
        .map(|b| b.header("x-mapped", "2"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let seen = upstream.seen();
    assert_eq!(seen.len(), 4);
    for s in &seen[2..] {
        assert_eq!(s.headers["x-mapped"], "2");
        assert_eq!(s.path, "/mapped?a=b");
    }

    // Without a timeout of its own, a slow attempt is cut at
    // attempt_timeout (the reqwest client's timer) and retried.
    upstream.script([Reply::slow(200, Duration::from_secs(60))]);
    let started = Instant::now();
    let response = client.get("/x").send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(started.elapsed(), Settings::default().attempt_timeout);
}

/// The call's future holds the call's state once, and small: `send`'s is
/// not an async block holding the future it awaits (it was 6.8 KB, copied
/// at every move), an attempt's is reqwest's future made before it is
/// awaited (an async block making it held the request too: 1,960 B in
/// all), and a retry's wait and answer are boxed.
#[tokio::test(start_paused = true)]
async fn a_calls_future_is_small() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, false), &upstream, settings());
    let send = client.get("/x").send();
    let size = std::mem::size_of_val(&send);
    // 1,768 B on reqwest 0.13.5, in a release build and a debug one.
    assert!(size <= 1856, "{size} B");
    let request = client.reqwest().get(upstream.url()).build().unwrap();
    let execute = client.execute(request);
    assert!(std::mem::size_of_val(&execute) <= size, "{size} B");
    assert_eq!(send.await.unwrap().status(), 200);
    assert_eq!(execute.await.unwrap().status(), 200);
}

/// A call keeps a timer anchor running (a task holding a timer ahead of
/// the attempts' timers, so that arming each does not wake tokio's time
/// driver): the first call spawns it, the next ones keep it, and it ends
/// when the last clone of the client is dropped.
#[tokio::test(start_paused = true)]
async fn a_timer_anchor_runs_while_calls_come_and_ends_with_the_client() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, false), &upstream, settings());
    let tasks = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let settle = || async {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    };
    // A request on the reqwest client underneath, which passes none of
    // humus: the pooled connection's tasks, and no anchor. Its pool
    // outlives the humus client.
    let http = client.reqwest().clone();
    let response = http.get(upstream.url()).send().await.unwrap();
    response.bytes().await.unwrap();
    settle().await;
    let before = tasks();
    for _ in 0..3 {
        let response = client.get("/x").send().await.unwrap();
        assert_eq!(response.bytes().await.unwrap(), "ok");
    }
    settle().await;
    assert_eq!(tasks(), before + 1, "the anchor's task, spawned once");
    // A while without calls: idle, still there for the next call.
    tokio::time::sleep(Duration::from_secs(5)).await;
    settle().await;
    assert_eq!(tasks(), before + 1);
    client.get("/x").send().await.unwrap();
    settle().await;
    assert_eq!(tasks(), before + 1);
    let clone = client.clone();
    drop(client);
    settle().await;
    assert_eq!(tasks(), before + 1, "a clone keeps it");
    drop(clone);
    settle().await;
    assert_eq!(tasks(), before, "ended with the client");
    // The connection is the pool's, still in use.
    http.get(upstream.url()).send().await.unwrap();
}

/// A redirect to another origin (another port, another host, another
/// scheme) is not followed: the call returns the 3xx as it came, and the
/// other origin is sent nothing (no trace context, no baggage).
#[tokio::test(start_paused = true)]
async fn a_redirect_to_another_origin_is_returned_not_followed() {
    let upstream = Upstream::start().await;
    let other = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, false), &upstream, settings());
    let port = upstream.addr.port();
    for location in [
        format!("{}/elsewhere", other.url()),
        format!("http://localhost:{port}/elsewhere"),
        format!("https://127.0.0.1:{port}/elsewhere"),
    ] {
        upstream.script([Reply::redirect(302, &location)]);
        let response = client
            .get("/x")
            .context(context(None))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 302, "{location}");
        assert_eq!(response.headers()["location"], location.as_str());
        assert_eq!(response.url().as_str(), format!("{}/x", upstream.url()));
    }
    assert!(other.seen().is_empty(), "{:?}", other.seen());
    assert_eq!(upstream.seen().len(), 3);
    // Each call was one attempt, the 302 its answer, counted once.
    assert_eq!(
        calls(&telemetry, "failure") + calls(&telemetry, "success"),
        3.0
    );
}

/// A redirect within the base URL's origin is followed, up to 10 in a
/// row; the eleventh is returned.
#[tokio::test(start_paused = true)]
async fn a_redirect_within_the_origin_is_followed_up_to_ten_in_a_row() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, false), &upstream, settings());
    upstream.script([
        Reply::redirect(302, "/moved"),
        Reply::redirect(307, &format!("{}/moved/again", upstream.url())),
    ]);
    let response = client.get("/x").send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.url().as_str(),
        format!("{}/moved/again", upstream.url())
    );
    let paths: Vec<_> = upstream.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(paths, ["/x", "/moved", "/moved/again"]);

    // A loop: ten redirects followed, the eleventh returned.
    upstream.script((0..12).map(|_| Reply::redirect(302, "/loop")));
    let response = client.get("/loop").send().await.unwrap();
    assert_eq!(response.status(), 302);
    assert_eq!(upstream.seen().len(), 3 + 11);
}

/// A builder of the user's own keeps none of its redirect policy: the
/// client's rule (its origin only) replaces it, as its TLS and timeout do.
#[tokio::test(start_paused = true)]
async fn with_builder_follows_redirects_within_the_origin_whatever_the_builders_policy() {
    let upstream = Upstream::start().await;
    let other = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = Client::with_builder(
        &setup(&telemetry, false),
        Settings {
            base_url: upstream.url(),
            ..settings()
        },
        reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::limited(10)),
    )
    .unwrap();
    upstream.script([
        Reply::redirect(302, "/moved"),
        Reply::redirect(302, &format!("{}/elsewhere", other.url())),
    ]);
    let response = client.get("/x").send().await.unwrap();
    assert_eq!(response.status(), 302);
    assert_eq!(response.url().as_str(), format!("{}/moved", upstream.url()));
    assert!(other.seen().is_empty(), "{:?}", other.seen());
    assert_eq!(upstream.seen().len(), 2);
    // The reqwest client underneath, used directly, follows the same rule.
    upstream.script([Reply::redirect(302, &format!("{}/elsewhere", other.url()))]);
    let response = client
        .reqwest()
        .get(format!("{}/y", upstream.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 302);
    assert!(other.seen().is_empty(), "{:?}", other.seen());
}

/// A call's timeout error names the bound that ended it, the client's
/// `timeout`, the request's own or the deadline of the RPC being served,
/// so that an operator raises the right one; and the dependency.
#[tokio::test(start_paused = true)]
async fn a_timeout_error_names_the_bound_that_ended_the_call_and_the_dependency() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(
        &setup(&telemetry, false),
        &upstream,
        Settings {
            timeout: Duration::from_secs(3),
            attempt_timeout: Duration::from_secs(5),
            ..settings()
        },
    );
    let base = client.base_url().to_string();
    let slow = || Reply::slow(200, Duration::from_secs(8));

    // The client's own timeout.
    upstream.script([slow()]);
    let started = Instant::now();
    let err = client.get("/x").send().await.unwrap_err();
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    assert_eq!(err.kind(), Kind::Timeout);
    assert!(
        err.to_string().starts_with(&format!(
            "http call to {base} timed out (the client's timeout setting, 3s)"
        )),
        "{err}"
    );

    // The request's own, shorter.
    upstream.script([slow()]);
    let started = Instant::now();
    let err = client
        .get("/x")
        .timeout(Duration::from_secs(1))
        .send()
        .await
        .unwrap_err();
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    assert!(
        err.to_string().starts_with(&format!(
            "http call to {base} timed out (the request's own timeout, 1s)"
        )),
        "{err}"
    );

    // The served RPC's, earlier than both: not the client's timeout.
    upstream.script([slow()]);
    let served = humus::grpc::deadline::Inherited::new(
        Some(Instant::now() + Duration::from_millis(1500)),
        opentelemetry::Context::new(),
    );
    let started = Instant::now();
    let err = served
        .scope(async {
            client
                .get("/x")
                .timeout(Duration::from_secs(2))
                .send()
                .await
        })
        .await
        .unwrap_err();
    assert_eq!(started.elapsed(), Duration::from_millis(1500));
    assert_eq!(err.kind(), Kind::Timeout);
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "http call to {base} timed out (the deadline inherited from the RPC being served (1.5s left when the call was made), not the client's timeout setting)"
        )),
        "{text}"
    );
    assert!(!text.contains("3s") && !text.contains("2s"), "{text}");

    // The served RPC's, already passed: nothing is sent.
    let served = humus::grpc::deadline::Inherited::new(
        Some(Instant::now() - Duration::from_millis(1)),
        opentelemetry::Context::new(),
    );
    let err = served
        .scope(async { client.get("/x").send().await })
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("(the deadline inherited from the RPC being served"),
        "{err}"
    );
    assert_eq!(upstream.seen().len(), 3);
}

/// A rejection and a request that could not be made name the dependency
/// (its base URL), so that two clients' errors are told apart.
#[tokio::test(start_paused = true)]
async fn a_rejection_and_a_refused_request_name_the_dependency() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(
        &setup(&telemetry, false),
        &upstream,
        Settings {
            max_attempts: 1,
            breaker_policy: circuit::Policy::consecutive(1),
            ..settings()
        },
    );
    let base = client.base_url().to_string();
    upstream.script([Reply::status(500)]);
    assert_eq!(client.get("/x").send().await.unwrap().status(), 500);
    let err = client.get("/x").send().await.unwrap_err();
    assert_eq!(err.kind(), Kind::Rejected);
    assert!(
        err.to_string().starts_with(&format!(
            "http call to {base} rejected by the circuit breaker"
        )),
        "{err}"
    );
    for err in [
        client.get("../x").send().await.unwrap_err(),
        client.get("../x").build().unwrap_err(),
    ] {
        assert_eq!(err.kind(), Kind::Request);
        assert!(
            err.to_string()
                .starts_with(&format!("http request to {base} could not be made")),
            "{err}"
        );
    }
}

/// A call the served RPC's handler makes, dropped at that RPC's deadline
/// (as a tonic server drops its handler at `grpc-timeout`, its timer a
/// little ahead of the client's) while the
/// dependency has not answered: ended by the deadline, it counts a failure
/// and the decision `expired`. Dropped well before the deadline, the
/// caller gave up: nothing counts.
#[tokio::test(start_paused = true)]
async fn a_call_dropped_at_the_served_deadline_counts_and_one_dropped_before_does_not() {
    let upstream = Upstream::start().await;
    let telemetry = Telemetry::new();
    let client = client(&setup(&telemetry, false), &upstream, settings());
    let deadline = Instant::now() + Duration::from_secs(2);
    // The handler's future is dropped at the deadline, the answer 5 s away.
    upstream.script([Reply::slow(200, Duration::from_secs(5))]);
    let served =
        humus::grpc::deadline::Inherited::new(Some(deadline), opentelemetry::Context::new());
    // A server's timer for the same deadline may fire a tick or a few
    // before the client's own: dropped 10 ms before it (within
    // the client's 20 ms deadline slack), the drop is the deadline's.
    let dropped = tokio::time::timeout_at(
        deadline - Duration::from_millis(10),
        served.scope(async { client.get("/x").send().await }),
    )
    .await;
    assert!(dropped.is_err(), "the answer came: {dropped:?}");
    assert_eq!(calls(&telemetry, "failure"), 1.0);
    assert_eq!(decisions(&telemetry), [("expired".to_owned(), 1.0)]);

    // Dropped 1 s before its deadline: given up on, counting nothing.
    let telemetry = Telemetry::new();
    let client = client_of(&telemetry, &upstream);
    upstream.script([Reply::slow(200, Duration::from_secs(5))]);
    let deadline = Instant::now() + Duration::from_secs(2);
    let served =
        humus::grpc::deadline::Inherited::new(Some(deadline), opentelemetry::Context::new());
    let dropped = tokio::time::timeout_at(
        deadline - Duration::from_secs(1),
        served.scope(async { client.get("/x").send().await }),
    )
    .await;
    assert!(dropped.is_err(), "the answer came: {dropped:?}");
    assert_eq!(
        calls(&telemetry, "failure") + calls(&telemetry, "success"),
        0.0
    );
    assert!(
        decisions(&telemetry).is_empty(),
        "{:?}",
        decisions(&telemetry)
    );
}

fn client_of(telemetry: &Telemetry, upstream: &Upstream) -> Client {
    client(&setup(telemetry, false), upstream, settings())
}

/// The texts a chain printer shows for `err`: its `Display`, then each
/// source's in turn.
fn chain_of(err: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut texts = Vec::new();
    let mut next = Some(err);
    while let Some(e) = next {
        texts.push(e.to_string());
        next = e.source();
    }
    texts
}

/// Each text of a chain is its own: none repeats a cause after it (a
/// `Display` that wrote its source would show it twice).
fn assert_each_once(chain: &[String]) {
    assert!(chain.len() >= 2, "a cause: {chain:?}");
    for (i, text) in chain.iter().enumerate() {
        assert!(!text.is_empty(), "{chain:?}");
        for later in &chain[i + 1..] {
            assert!(
                !text.contains(later.as_str()),
                "{text:?} repeats {later:?}: {chain:?}"
            );
        }
    }
}

/// A client of one attempt whose base URL is a port nothing listens on,
/// then `path`; and that port.
fn refused_client(telemetry: &Telemetry, path: &str) -> (Client, u16) {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let client = Client::new(
        &setup(telemetry, false),
        Settings {
            base_url: format!("http://127.0.0.1:{port}{path}"),
            max_attempts: 1,
            ..settings()
        },
    )
    .unwrap();
    (client, port)
}

/// The trial's `http attempt to http://localhots:8099/v1 got no response`
/// named the base URL: an attempt that got no response names the
/// request's URL, path included and credentials redacted; its cause is
/// its `source()`, which `Error::chain` adds.
#[tokio::test(start_paused = true)]
async fn no_response_names_the_requests_url_and_its_cause() {
    let telemetry = Telemetry::new();
    let (refused, port) = refused_client(&telemetry, "/v1");
    // A request of the caller's own, its URL holding credentials: redacted.
    let url = format!("http://ops:s3cret@127.0.0.1:{port}/v1/quotes?q=1");
    let request = reqwest::Request::new(reqwest::Method::GET, url.parse().unwrap());
    let own = refused.execute(request).await.unwrap_err();
    let cause = std::error::Error::source(&own).unwrap().to_string();
    assert!(cause.contains("refused"), "{cause}");
    assert_eq!(
        own.to_string(),
        format!(
            "http attempt to http://REDACTED:REDACTED@127.0.0.1:{port}/v1/quotes?q=1 got no response"
        )
    );

    // The builder's: the base URL's path, then the request's.
    let err = refused.get("/rates/EUR").send().await.unwrap_err();
    assert_eq!(err.kind(), Kind::Transport, "{err}");
    let text = err.to_string();
    assert_eq!(
        text,
        format!("http attempt to http://127.0.0.1:{port}/v1/rates/EUR got no response")
    );
    assert_eq!(err.chain().to_string(), format!("{text}: {cause}"));
}

/// A chain printer shows the HTTP client's error and each cause once: the
/// error's `Display` does not repeat its `source()`; a refused
/// connection's `ConnectionRefused` is its source, one step away (reqwest's
/// error still found by `Error::reqwest`); `Error::chain` is the printer's
/// text, and an attempt's span says it.
#[tokio::test(start_paused = true)]
async fn a_chain_printer_shows_each_cause_once_and_a_refused_connection_in_one_step() {
    let telemetry = Telemetry::new();
    let (refused, port) = refused_client(&telemetry, "");
    let err = refused.get("/x").send().await.unwrap_err();
    assert_eq!(err.kind(), Kind::Transport, "{err}");
    let cause = std::error::Error::source(&err)
        .and_then(|e| e.downcast_ref::<std::io::Error>())
        .expect("the I/O error, one step away");
    assert_eq!(
        cause.kind(),
        std::io::ErrorKind::ConnectionRefused,
        "{cause:?}"
    );
    assert!(
        err.reqwest().is_some_and(reqwest::Error::is_connect),
        "{err:?}"
    );
    let chain = chain_of(&err);
    assert_each_once(&chain);
    assert_eq!(
        chain[0],
        format!("http attempt to http://127.0.0.1:{port}/x got no response")
    );
    assert_eq!(err.chain().to_string(), chain.join(": "));
    let spans = spans_of_kind(&telemetry, SpanKind::Client);
    let Status::Error { description } = &spans.last().unwrap().status else {
        panic!("{:?}", spans.last().unwrap().status)
    };
    assert_eq!(
        description.as_ref(),
        format!("http attempt got no response: {}", chain[1])
    );

    // A timeout: reqwest's, under the client's.
    let upstream = Upstream::start().await;
    let client = client(
        &setup(&telemetry, false),
        &upstream,
        Settings {
            timeout: Duration::from_secs(3),
            attempt_timeout: Duration::from_secs(5),
            ..settings()
        },
    );
    upstream.script([Reply::slow(200, Duration::from_secs(8))]);
    let err = client.get("/x").send().await.unwrap_err();
    assert_eq!(err.kind(), Kind::Timeout, "{err}");
    let chain = chain_of(&err);
    assert_each_once(&chain);
    assert_eq!(
        chain[0],
        format!(
            "http call to {} timed out (the client's timeout setting, 3s)",
            client.base_url()
        )
    );
    assert!(
        std::error::Error::source(&err).is_some_and(|e| e.is::<reqwest::Error>()),
        "{err:?}"
    );
    assert_eq!(err.chain().to_string(), chain.join(": "));
}
