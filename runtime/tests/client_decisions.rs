//! Why a call made no further attempt: the status of a throttled,
//! exhausted or expired call carries its `retry::Decision` (`NoRetry`),
//! and a call the client's close ends records its final decision. On the
//! testing Host over TLS, on paused time.

mod client_support;

use std::time::Duration;

use client_support::*;
use humus::circuit::{Policy, State};
use humus::grpc::client::{Client, NoRetry, Settings};
use humus::retry::Decision;
use humus::telemetry::names::*;
use humus::testing::{Ca, Host, Telemetry};
use tonic::{Code, Response, Status};

fn with_pushback(code: Code, millis: &str) -> Status {
    let mut md = tonic::metadata::MetadataMap::new();
    md.insert("grpc-retry-pushback-ms", millis.parse().unwrap());
    Status::with_metadata(code, "pushed back", md)
}

fn never_opens() -> Policy {
    Policy::new(|_| false, |_| State::Closed)
}

fn decision(err: &Status) -> Option<Decision> {
    NoRetry::from_status(err).map(NoRetry::decision)
}

#[tokio::test(start_paused = true)]
async fn an_exhausted_then_a_throttled_call_says_so() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| async { Err::<Response<Cart>, _>(unavailable()) });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(
        &setup(&host),
        Settings {
            breaker_policy: never_opens(),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    // 10 tokens: the first call uses its 3 attempts, the budget refuses the
    // second's second retry.
    let first = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    let second = client
        .unary::<_, Cart>(&GET_CART, get("c-2"))
        .await
        .unwrap_err();
    for err in [&first, &second] {
        assert_eq!(err.code(), Code::Unavailable, "the last attempt's status");
        assert_eq!(err.message(), "carts is busy");
    }
    assert_eq!(decision(&first), Some(Decision::Exhausted));
    assert_eq!(decision(&second), Some(Decision::Throttled));
    let source = std::error::Error::source(&second).unwrap();
    assert_eq!(
        source.to_string(),
        "not retried: the retry budget refused the retry (throttled)"
    );
    // The attempt's status, as it was, under it.
    let under = std::error::Error::source(source).unwrap();
    assert_eq!(
        under.downcast_ref::<Status>().unwrap().message(),
        "carts is busy"
    );
}

/// The deadline comes before the pushback's wait would end: expired, at
/// once, with the attempt's status.
#[tokio::test(start_paused = true)]
async fn an_expired_call_says_so() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| async {
        Err::<Response<Cart>, _>(with_pushback(Code::Unavailable, "2000"))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let mut request = get("c-1");
    request.set_timeout(Duration::from_secs(1));
    let err = client
        .unary::<_, Cart>(&GET_CART, request)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(err.message(), "pushed back");
    assert_eq!(decision(&err), Some(Decision::Expired));
    assert_eq!(carts.arrivals(&GET_CART), 1);
}

/// A call that stopped (a code not retried, a rejection) or succeeded
/// carries no `NoRetry`; a failed open of a stream that exhausted its
/// attempts does.
#[tokio::test(start_paused = true)]
async fn only_throttled_exhausted_and_expired_calls_carry_it() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, req| async move {
        if req.id == "missing" {
            return Err(Status::not_found("no such cart"));
        }
        Ok(Response::new(cart(&req.id, 0)))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("missing"))
        .await
        .unwrap_err();
    assert_eq!(decision(&err), None);
    assert!(std::error::Error::source(&err).is_none());
    // A stream whose every open is answered UNAVAILABLE, trailers-only.
    carts.on_watch_cart(|_, _| async {
        Err::<Response<futures_util::stream::Empty<Result<Cart, Status>>>, _>(unavailable())
    });
    let err = client
        .server_streaming::<_, Cart>(&WATCH_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(decision(&err), Some(Decision::Exhausted));
    // A stream whose open fails at the dial (nothing listens): a failed
    // attempt as any other, retried (its retries find the connection
    // backing off) until `max_attempts`; the status is the dial's.
    let down = Client::new(
        &setup(&host),
        Settings {
            addr: "nowhere:9090".into(),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let err = down
        .server_streaming::<_, Cart>(&WATCH_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(decision(&err), Some(Decision::Exhausted));
    assert!(err.message().starts_with("dial nowhere:9090"), "{err:?}");
    assert!(err.message().contains("backing off"), "{err:?}");
}

/// A close while a call waits before its next attempt, or at an attempt's
/// `allow`, ends the call `Canceled` and records `stopped`.
#[tokio::test(start_paused = true)]
async fn a_close_during_a_wait_or_at_allow_records_stopped() {
    let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
    carts.on_get_cart(|_, _| async {
        Err::<Response<Cart>, _>(with_pushback(Code::Unavailable, "300"))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let setup = setup(&host).with_telemetry(capture.telemetry());
    let client = Client::new(&setup, carts_settings(&ca)).unwrap();
    let call = {
        let client = client.clone();
        tokio::spawn(async move { client.unary::<_, Cart>(&GET_CART, get("c-1")).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(carts.arrivals(&GET_CART), 1, "waiting out the pushback");
    setup.stop().await;
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(err.code(), Code::Cancelled);
    let after = client
        .unary::<_, Cart>(&GET_CART, get("c-2"))
        .await
        .unwrap_err();
    assert_eq!(after.code(), Code::Cancelled);
    let own = capture.metrics(CLIENT_SCOPE);
    let decisions = |d: &str| -> f64 {
        own.iter()
            .filter(|p| p.name == HUMUS_RETRY_DECISIONS && p.has(&[(HUMUS_RETRY_DECISION, d)]))
            .map(|p| p.value.as_f64())
            .sum()
    };
    assert_eq!(decisions("retried"), 1.0);
    assert_eq!(
        decisions("stopped"),
        2.0,
        "the wait's close and the allow's"
    );
}
