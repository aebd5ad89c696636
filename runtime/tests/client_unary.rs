//! The attempt loop of unary calls (docs/client.md, "Retries",
//! "Classification", "The circuit breaker"), on the testing
//! Host over TLS on paused time. Each test asserts what reached the
//! dependency and what the caller got.

mod client_support;

use std::error::Error as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use client_support::*;
use humus::circuit::{self, Policy, Rejected, State};
use humus::grpc::client::{Client, Settings};
use humus::testing::{Ca, Host};
use tokio::time::Instant;
use tonic::{Code, Response, Status};

fn with_pushback(code: Code, millis: &str) -> Status {
    let mut md = tonic::metadata::MetadataMap::new();
    md.insert("grpc-retry-pushback-ms", millis.parse().unwrap());
    Status::with_metadata(code, "pushed back", md)
}

#[tokio::test(start_paused = true)]
async fn unavailable_is_retried_until_an_attempt_succeeds() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart_unavailable_until(3);
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let cart: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    assert_eq!(cart.get_ref().id, "c-1");
    assert_eq!(carts.arrivals(&GET_CART), 3);
}

/// A timeout too long for the clock is refused by the settings' check,
/// naming the field; the longest one allowed (365 days) is no panic: the
/// calls and their retries go on.
#[tokio::test(start_paused = true)]
async fn a_timeout_too_long_for_the_clock_is_refused_or_no_deadline_and_no_panic() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart_unavailable_until(2);
    let _carts = start_carts(&host, &ca, &carts);
    let huge = humantime_serde::re::humantime::parse_duration("300000000000y").unwrap();
    let err = humus::app::check_client(&Settings {
        timeout: huge,
        ..carts_settings(&ca)
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("timeout") && err.contains("want at most 365 days"),
        "{err}"
    );
    let settings = Settings {
        timeout: Duration::from_secs(365 * 24 * 3600),
        ..carts_settings(&ca)
    };
    humus::app::check_client(&settings).unwrap();
    let client = Client::new(&setup(&host), settings).unwrap();
    let cart: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    assert_eq!(cart.get_ref().id, "c-1");
    assert_eq!(carts.arrivals(&GET_CART), 2);
}

#[tokio::test(start_paused = true)]
async fn max_attempts_bounds_each_call() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| async { Err::<Response<Cart>, _>(unavailable()) });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(err.message(), "carts is busy", "the last attempt's status");
    assert_eq!(carts.arrivals(&GET_CART), 3);

    let once = Client::new(
        &setup(&host),
        Settings {
            max_attempts: 1,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let _ = once
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(carts.arrivals(&GET_CART), 4, "1 turns retries off");
}

/// gRFC A6 with 10 tokens: the first call makes 3 attempts, the second 2,
/// then every call makes one. The breaker is off so it does not interfere.
#[tokio::test(start_paused = true)]
async fn the_budget_bounds_retries_across_calls() {
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
    let mut per_call = Vec::new();
    for _ in 0..5 {
        let before = carts.arrivals(&GET_CART);
        let _ = client
            .unary::<_, Cart>(&GET_CART, get("c-1"))
            .await
            .unwrap_err();
        per_call.push(carts.arrivals(&GET_CART) - before);
    }
    assert_eq!(per_call, [3, 2, 1, 1, 1]);
}

/// Each attempt passes the breaker: a breaker that opens after two
/// failures in a row rejects the call's third attempt.
#[tokio::test(start_paused = true)]
async fn the_breaker_is_inside_the_retries() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| async { Err::<Response<Cart>, _>(unavailable()) });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(
        &setup(&host),
        Settings {
            breaker_policy: Policy::consecutive(2),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(carts.arrivals(&GET_CART), 2);
    assert!(
        err.source()
            .and_then(|s| s.downcast_ref::<Rejected>())
            .is_some(),
        "{err:?}"
    );
}

/// Carts whose GetCart never answers, served, and a client of it whose
/// calls end at a 1 s timeout.
fn hung_carts() -> (Carts, Running, Host, Client) {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| std::future::pending::<Result<Response<Cart>, Status>>());
    let running = start_carts(&host, &ca, &carts);
    let client = Client::new(
        &setup(&host),
        Settings {
            timeout: SECOND,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    (carts, running, host, client)
}

/// A hung dependency: every call ends by its deadline, each is a breaker
/// failure, and after five the breaker opens and rejects at once, with
/// Unavailable, the rejection's message, and the `Rejected` as the source.
#[tokio::test(start_paused = true)]
async fn a_hung_dependency_ends_every_call_by_deadline_and_opens_the_breaker() {
    let (carts, _running, _host, client) = hung_carts();
    for n in 1..=5 {
        let start = Instant::now();
        let err = client
            .unary::<_, Cart>(&GET_CART, get("c-1"))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
        assert_eq!(
            err.message(),
            "carts:9090: the call's deadline passed: the client's timeout setting, 1s",
            "connected: nothing said of the connection"
        );
        assert_eq!(start.elapsed(), SECOND, "the timeout ends the call");
        assert_eq!(
            carts.arrivals(&GET_CART),
            n,
            "a call past its deadline is not retried"
        );
    }
    let start = Instant::now();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(start.elapsed(), Duration::ZERO, "rejected at once");
    assert_eq!(err.code(), Code::Unavailable);
    assert!(
        err.message()
            .starts_with("carts:9090: circuit: call rejected: open for another"),
        "{err:?}"
    );
    let rejected = err
        .source()
        .and_then(|s| s.downcast_ref::<Rejected>())
        .copied();
    assert_eq!(rejected.map(|r| r.state), Some(State::Open));
    assert_eq!(carts.arrivals(&GET_CART), 5, "nothing was sent");
}

/// A call the open breaker rejects at once still takes a unit of its
/// task's cooperative budget, as a tokio resource does: a task that loops
/// on rejected calls (a consumer retrying during an outage) yields to the
/// runtime's other tasks instead of holding its thread.
#[tokio::test(start_paused = true)]
async fn a_loop_of_rejected_calls_yields_to_other_tasks() {
    const CALLS: usize = 10_000;
    let (_carts, _running, _host, client) = hung_carts();
    for _ in 1..=5 {
        let _ = client.unary::<_, Cart>(&GET_CART, get("c-1")).await;
    }
    let made = std::sync::Arc::new(AtomicUsize::new(0));
    let spinner = tokio::spawn({
        let (client, made) = (client.clone(), made.clone());
        async move {
            for _ in 0..CALLS {
                let err = client
                    .unary::<_, Cart>(&GET_CART, get("c-1"))
                    .await
                    .unwrap_err();
                assert!(err.source().is_some_and(|s| s.is::<Rejected>()), "{err:?}");
                made.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    // This test's task runs again once the spinner yields.
    tokio::task::yield_now().await;
    let made_before = made.load(Ordering::Relaxed);
    assert!(
        made_before < CALLS,
        "the loop of rejected calls yielded before its end ({made_before} of {CALLS} calls)"
    );
    spinner.await.unwrap();
}

/// A dependency down at start: calls fail Unavailable; the failed dial and
/// each attempt failing at once in the connection backoff after it are
/// breaker failures, so the breaker opens within the first calls, after
/// one dial; once the dependency is up and the breaker's open period is
/// over, probes close it again.
#[tokio::test(start_paused = true)]
async fn a_dependency_down_at_start_that_comes_up_later() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let mut rejected = false;
    for _ in 0..200 {
        let err = client
            .unary::<_, Cart>(&GET_CART, get("c-1"))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unavailable);
        if err.source().is_some_and(|s| s.is::<Rejected>()) {
            rejected = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(rejected, "the failed opens opened the breaker");
    assert_eq!(host.dials("carts:9090"), 1);
    let _carts = start_carts(&host, &ca, &carts);
    tokio::time::sleep(10 * SECOND).await; // the breaker's open period
    for _ in 0..3 {
        let _: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    }
    assert_eq!(carts.arrivals(&GET_CART), 3);
}

/// The timeout covers every attempt and the waits between them: a wait
/// that would end after the deadline is not started, and the call returns
/// the last attempt's status at once.
#[tokio::test(start_paused = true)]
async fn the_timeout_covers_the_whole_call_including_the_waits() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| async {
        Err::<Response<Cart>, _>(with_pushback(Code::Unavailable, "2000"))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(
        &setup(&host),
        Settings {
            timeout: 5 * SECOND,
            max_attempts: 10,
            breaker_policy: never_opens(),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let start = Instant::now();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    // Attempts at 0 s, 2 s and 4 s; a fourth would start at 6 s.
    assert_eq!(start.elapsed(), 4 * SECOND);
    assert_eq!(
        err.code(),
        Code::Unavailable,
        "the last attempt's status: {err:?}"
    );
    assert_eq!(carts.arrivals(&GET_CART), 3);
}

/// The caller's earlier deadline wins; a later one does not extend the
/// timeout. The deadline reaches the server as `grpc-timeout`.
#[tokio::test(start_paused = true)]
async fn the_earlier_of_the_timeout_and_the_callers_deadline_ends_the_call() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let timeouts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = timeouts.clone();
    carts.on_get_cart(move |s, _| {
        seen.lock()
            .unwrap()
            .push(s.metadata.get("grpc-timeout").cloned());
        std::future::pending::<Result<Response<Cart>, Status>>()
    });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(
        &setup(&host),
        Settings {
            timeout: 10 * SECOND,
            breaker_policy: never_opens(),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    for (own, ends) in [
        (Duration::from_millis(300), Duration::from_millis(300)),
        (60 * SECOND, 10 * SECOND),
    ] {
        let mut request = get("c-1");
        request.set_timeout(own);
        let start = Instant::now();
        let err = client
            .unary::<_, Cart>(&GET_CART, request)
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::DeadlineExceeded);
        assert_eq!(start.elapsed(), ends);
    }
    let timeouts = timeouts.lock().unwrap();
    assert_eq!(timeouts.len(), 2);
    assert_eq!(timeouts[0].as_ref().unwrap(), "300000u");
    assert_eq!(timeouts[1].as_ref().unwrap(), "10S");
}

/// A caller who drops the call's future gives up: nothing is counted. With a
/// breaker that opens on one failure, five abandoned calls leave it closed.
#[tokio::test(start_paused = true)]
async fn a_caller_that_drops_the_call_counts_nothing() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|s, req| async move {
        if s.n <= 5 {
            std::future::pending::<()>().await;
        }
        Ok(Response::new(cart(&req.id, 0)))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(
        &setup(&host),
        Settings {
            breaker_policy: Policy::consecutive(1),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    for _ in 0..5 {
        let call = client.unary::<_, Cart>(&GET_CART, get("c-1"));
        assert!(tokio::time::timeout(SECOND, call).await.is_err());
    }
    assert_eq!(carts.arrivals(&GET_CART), 5);
    let _: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    assert_eq!(carts.arrivals(&GET_CART), 6, "the breaker stayed closed");
}

/// A pushback longer than `backoff_max` ends the call with that attempt's
/// status, without waiting.
#[tokio::test(start_paused = true)]
async fn a_pushback_longer_than_backoff_max_ends_the_call() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| async {
        Err::<Response<Cart>, _>(with_pushback(Code::Unavailable, "6000"))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let start = Instant::now();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(err.message(), "pushed back");
    assert_eq!(carts.arrivals(&GET_CART), 1);
}

/// The wait before a retry is the larger of the backoff and the pushback:
/// a pushback of 300 ms, above every backoff of the first retry (at most
/// 100 ms), is waited exactly.
#[tokio::test(start_paused = true)]
async fn the_wait_before_a_retry_is_the_larger_of_backoff_and_pushback() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let arrivals = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let at = arrivals.clone();
    carts.on_get_cart(move |s, req| {
        at.lock().unwrap().push(Instant::now());
        async move {
            if s.n == 1 {
                return Err(with_pushback(Code::ResourceExhausted, "300"));
            }
            Ok(Response::new(cart(&req.id, 0)))
        }
    });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let _: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    let at: Vec<Instant> = arrivals.lock().unwrap().clone();
    assert_eq!(at.len(), 2);
    assert_eq!(at[1] - at[0], Duration::from_millis(300));

    // Without a pushback, the wait is the backoff: at most the base.
    let plain = Client::new(
        &setup(&host),
        Settings {
            backoff_base: Duration::from_millis(800),
            backoff_max: Duration::from_millis(800),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    carts.on_get_cart(|s, req| async move {
        if s.n == 3 {
            return Err(unavailable());
        }
        Ok(Response::new(cart(&req.id, 0)))
    });
    let start = Instant::now();
    let _: Response<Cart> = plain.unary(&GET_CART, get("c-1")).await.unwrap();
    assert!(
        start.elapsed() <= Duration::from_millis(800),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(carts.arrivals(&GET_CART), 4);
}

static ENCODES: AtomicUsize = AtomicUsize::new(0);

/// A message that counts how many times it is encoded, and encodes as a
/// `CartRequest`.
#[derive(Clone, Debug, Default, PartialEq)]
struct Counted {
    id: String,
}

impl prost::Message for Counted {
    fn encode_raw(&self, buf: &mut impl bytes::BufMut) {
        ENCODES.fetch_add(1, Ordering::SeqCst);
        prost::encoding::string::encode(1, &self.id, buf);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: prost::encoding::WireType,
        buf: &mut impl bytes::Buf,
        ctx: prost::encoding::DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        if tag == 1 {
            prost::encoding::string::merge(wire_type, &mut self.id, buf, ctx)
        } else {
            prost::encoding::skip_field(wire_type, tag, buf, ctx)
        }
    }

    fn encoded_len(&self) -> usize {
        prost::encoding::string::encoded_len(1, &self.id)
    }

    fn clear(&mut self) {
        self.id.clear();
    }
}

#[tokio::test(start_paused = true)]
async fn the_request_is_encoded_once_for_every_attempt() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart_unavailable_until(3);
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let request = tonic::Request::new(Counted { id: "c-9".into() });
    let cart: Response<Cart> = client.unary(&GET_CART, request).await.unwrap();
    assert_eq!(
        cart.get_ref().id,
        "c-9",
        "every attempt sent the whole message"
    );
    assert_eq!(carts.arrivals(&GET_CART), 3);
    assert_eq!(ENCODES.load(Ordering::SeqCst), 1);
}

/// Two clients of one address have their own breaker: while one rejects,
/// the other's calls go through.
#[tokio::test(start_paused = true)]
async fn two_clients_of_one_address_have_their_own_breaker_and_budget() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, req| async move {
        if req.id == "bad" {
            return Err(unavailable());
        }
        Ok(Response::new(cart(&req.id, 0)))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let payments = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let ledger = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    for _ in 0..3 {
        let _ = payments.unary::<_, Cart>(&GET_CART, get("bad")).await;
    }
    let err = payments
        .unary::<_, Cart>(&GET_CART, get("good"))
        .await
        .unwrap_err();
    assert!(err.source().is_some_and(|s| s.is::<Rejected>()), "{err:?}");
    let _: Response<Cart> = ledger.unary(&GET_CART, get("good")).await.unwrap();
    // ledger's budget is full: its failing call still makes 3 attempts.
    let before = carts.arrivals(&GET_CART);
    let _ = ledger.unary::<_, Cart>(&GET_CART, get("bad")).await;
    assert_eq!(carts.arrivals(&GET_CART) - before, 3);
}

/// A method that must never be sent twice makes one attempt, whatever the
/// classifier says.
#[tokio::test(start_paused = true)]
async fn a_method_that_never_retries_makes_one_attempt() {
    static CHARGE: humus::grpc::client::Method = humus::grpc::client::Method {
        full_name: "/test.carts.v1.Carts/GetCart",
        point: "grpc:test.carts.v1.Carts/GetCart",
        kind: humus::grpc::client::RpcKind::Unary,
        policy: humus::grpc::client::MethodPolicy {
            never_retry: true,
            ..humus::grpc::client::MethodPolicy::DEFAULT
        },
    };
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| async { Err::<Response<Cart>, _>(unavailable()) });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let err = client
        .unary::<_, Cart>(&CHARGE, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(carts.arrivals(&GET_CART), 1);
}

fn never_opens() -> Policy {
    Policy::new(
        |_: &circuit::Counts| false,
        |_: &circuit::Counts| State::Closed,
    )
}
