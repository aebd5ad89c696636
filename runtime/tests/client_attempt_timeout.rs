//! Each attempt's own timeout (`Settings::attempt_timeout`, docs/client.md,
//! "Deadlines"): an attempt still under way when it passes is cancelled,
//! ends `DeadlineExceeded` with an `AttemptTimeout` as its source, counts
//! as a failure and is retried (unless the method is never sent twice);
//! a per-attempt layer's tower timeout is the same; a layer that sheds
//! the attempt (tower's `Overloaded`) counts nothing and is not retried.
//! Calls to carts on the testing Host over TLS, on paused time, and one
//! race of the client's timer and tonic's server's on loopback TCP.

mod client_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use client_support::*;
use humus::Setup;
use humus::circuit::{Policy, Rejected};
use humus::grpc::client::{
    AttemptTimeout, Client, LayerError, Method, MethodPolicy, NoRetry, RpcKind, Settings,
};
use humus::retry::Decision;
use humus::testing::{Ca, Host};
use tokio::time::Instant;
use tonic::{Code, Response, Status};

const MS: Duration = Duration::from_millis(1);

/// GetCart, never sent twice.
static GET_CART_ONCE: Method = Method {
    full_name: "/test.carts.v1.Carts/GetCart",
    point: "grpc:test.carts.v1.Carts/GetCart",
    kind: RpcKind::Unary,
    policy: MethodPolicy {
        never_retry: true,
        ..MethodPolicy::DEFAULT
    },
};

struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// GetCart hangs for the arrivals `hang` says (1, 2, …), answering the
/// others; the count of hung handlers the server dropped (the client's
/// cancel reached it).
fn hanging(
    carts: &Carts,
    hang: impl Fn(usize) -> bool + Send + Sync + 'static,
) -> Arc<AtomicUsize> {
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = dropped.clone();
    carts.on_get_cart(move |seen, req| {
        let guard = hang(seen.n).then(|| DropCount(d.clone()));
        async move {
            if let Some(_guard) = guard {
                std::future::pending::<()>().await;
            }
            Ok(Response::new(cart(&req.id, 1)))
        }
    });
    dropped
}

/// Carts' settings with `attempt_timeout` and the breaker `policy`.
fn with_attempt_timeout(ca: &Ca, attempt_timeout: Duration, policy: Policy) -> Settings {
    Settings {
        attempt_timeout: Some(attempt_timeout),
        breaker_policy: policy,
        ..carts_settings(ca)
    }
}

#[tokio::test(start_paused = true)]
async fn a_hanging_attempt_is_cut_at_its_timeout_and_the_retry_answers() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let dropped = hanging(&carts, |n| n == 1);
    let (policy, seen) = recording();
    let client = Client::new(&setup(&host), with_attempt_timeout(&ca, 100 * MS, policy)).unwrap();
    let started = Instant::now();
    let cart: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    let took = started.elapsed();
    assert_eq!(cart.get_ref().items, 1, "the second attempt's answer");
    assert_eq!(carts.arrivals(&GET_CART), 2);
    // Cut at 100 ms, then at most the first backoff (100 ms) before the
    // retry, which answers at once.
    assert!(took >= 100 * MS && took <= 201 * MS, "{took:?}");
    assert_eq!(counted(&seen), (1, 1), "the cut attempt is a failure");
    settle().await;
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the cut attempt's request was cancelled at the server"
    );
}

#[tokio::test(start_paused = true)]
async fn without_attempt_timeout_a_hanging_attempt_runs_to_the_calls_deadline() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let _dropped = hanging(&carts, |n| n == 1);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let started = Instant::now();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded);
    assert!(AttemptTimeout::from_status(&err).is_none(), "{err:?}");
    assert_eq!(started.elapsed(), 10 * SECOND, "the default timeout");
    assert_eq!(carts.arrivals(&GET_CART), 1);
}

#[tokio::test(start_paused = true)]
async fn a_never_retry_methods_attempt_is_cut_and_not_retried() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let _dropped = hanging(&carts, |n| n == 1);
    let (policy, seen) = recording();
    let client = Client::new(&setup(&host), with_attempt_timeout(&ca, 100 * MS, policy)).unwrap();
    let started = Instant::now();
    let err = client
        .unary::<_, Cart>(&GET_CART_ONCE, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(started.elapsed(), 100 * MS);
    assert_eq!(err.code(), Code::DeadlineExceeded);
    assert_eq!(
        err.message(),
        "carts:9090: the attempt's timeout passed: the client's attempt_timeout setting, 100ms"
    );
    let timeout = AttemptTimeout::from_status(&err).expect("the attempt's timeout");
    assert_eq!(timeout.after(), Some(100 * MS));
    assert_eq!(carts.arrivals(&GET_CART), 1, "never sent twice");
    assert_eq!(counted(&seen), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn attempts_that_time_out_open_the_breaker() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let _dropped = hanging(&carts, |_| true);
    // The default breaker policy: open after 5 failures in a row.
    let client = Client::new(
        &setup(&host),
        Settings {
            attempt_timeout: Some(100 * MS),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let first = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(first.code(), Code::DeadlineExceeded);
    assert!(AttemptTimeout::from_status(&first).is_some());
    assert_eq!(
        NoRetry::from_status(&first).map(NoRetry::decision),
        Some(Decision::Exhausted),
        "each of the 3 attempts timed out and was retried"
    );
    assert_eq!(carts.arrivals(&GET_CART), 3);
    let second = client
        .unary::<_, Cart>(&GET_CART, get("c-2"))
        .await
        .unwrap_err();
    assert!(AttemptTimeout::from_status(&second).is_some());
    assert_eq!(
        NoRetry::from_status(&second).map(NoRetry::decision),
        Some(Decision::Throttled),
        "each retry took a token of the budget's 10, which stops at half"
    );
    assert_eq!(carts.arrivals(&GET_CART), 5, "the fifth failure opens it");
    let rejected = client
        .unary::<_, Cart>(&GET_CART, get("c-3"))
        .await
        .unwrap_err();
    assert_eq!(rejected.code(), Code::Unavailable, "{rejected:?}");
    assert!(
        std::error::Error::source(&rejected).is_some_and(|e| e.is::<Rejected>()),
        "{rejected:?}"
    );
    assert_eq!(carts.arrivals(&GET_CART), 5, "nothing more reached carts");
}

/// The `grpc-timeout` of every GetCart that reached carts.
fn timeouts(carts: &Carts) -> Arc<Mutex<Vec<String>>> {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let s = sent.clone();
    carts.on_get_cart(move |seen, req| {
        let timeout = seen
            .metadata
            .get("grpc-timeout")
            .map(|v| v.to_str().unwrap().to_owned());
        s.lock().unwrap().push(timeout.unwrap_or_default());
        async move { Ok(Response::new(cart(&req.id, 0))) }
    });
    sent
}

#[tokio::test(start_paused = true)]
async fn a_unary_attempt_sends_the_earlier_of_its_own_bound_and_the_calls_deadline() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let sent = timeouts(&carts);
    let client = Client::new(
        &setup(&host),
        with_attempt_timeout(&ca, 250 * MS, Settings::default().breaker_policy),
    )
    .unwrap();
    let _: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    let mut shorter = get("c-2");
    shorter.set_timeout(100 * MS);
    let _: Response<Cart> = client.unary(&GET_CART, shorter).await.unwrap();
    assert_eq!(*sent.lock().unwrap(), ["250000u", "100000u"]);

    // Unset: the call's deadline, the default timeout's.
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let sent = timeouts(&carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let _: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    assert_eq!(*sent.lock().unwrap(), ["10S"]);
}

#[tokio::test(start_paused = true)]
async fn a_streams_hanging_open_is_cut_and_retried_and_the_open_stream_outlives_the_timeout() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let timeouts = Arc::new(Mutex::new(Vec::new()));
    let t = timeouts.clone();
    carts.on_watch_cart(move |seen, req| {
        t.lock()
            .unwrap()
            .push(seen.metadata.get("grpc-timeout").cloned());
        async move {
            if seen.n == 1 {
                // No response headers: the stream never opens.
                std::future::pending::<()>().await;
            }
            let updates = futures_util::stream::unfold(1, move |n| {
                let id = req.id.clone();
                async move {
                    if n > 2 {
                        return None;
                    }
                    // Far past the attempt's timeout between messages.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    Some((Ok::<_, Status>(cart(&id, n)), n + 1))
                }
            });
            Ok(Response::new(updates))
        }
    });
    let (policy, seen) = recording();
    let client = Client::new(&setup(&host), with_attempt_timeout(&ca, 100 * MS, policy)).unwrap();
    let mut stream = client
        .server_streaming::<_, Cart>(&WATCH_CART, get("c-1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(carts.arrivals(&WATCH_CART), 2, "the first open was cut");
    assert_eq!(stream.message().await.unwrap().unwrap().items, 1);
    assert_eq!(stream.message().await.unwrap().unwrap().items, 2);
    assert!(stream.message().await.unwrap().is_none(), "its clean end");
    assert_eq!(counted(&seen), (1, 1));
    assert_eq!(
        *timeouts.lock().unwrap(),
        [None, None],
        "an open stream is not bounded by the attempt's timeout at the server either"
    );
}

#[tokio::test(start_paused = true)]
async fn a_layers_tower_timeout_is_the_attempts_timeout() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let _dropped = hanging(&carts, |n| n == 1);
    let (policy, seen) = recording();
    let client = Client::new(
        &setup(&host),
        Settings {
            breaker_policy: policy,
            ..carts_settings(&ca)
        }
        .layer(tower::timeout::TimeoutLayer::new(100 * MS)),
    )
    .unwrap();
    let cart: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    assert_eq!(cart.get_ref().items, 1);
    assert_eq!(carts.arrivals(&GET_CART), 2, "retried");
    assert_eq!(counted(&seen), (1, 1), "the elapsed attempt is a failure");

    // Now every attempt hangs; a method never sent twice is not retried.
    let _dropped = hanging(&carts, |_| true);
    let err = client
        .unary::<_, Cart>(&GET_CART_ONCE, get("c-2"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    let timeout = AttemptTimeout::from_status(&err).expect("the attempt's timeout");
    assert_eq!(timeout.after(), None, "a layer's");
    let layer = LayerError::from_status(&err).expect("the layer's error, kept");
    assert!(
        layer
            .error()
            .unwrap()
            .is::<tower::timeout::error::Elapsed>()
    );
    assert!(err.message().contains("per-attempt layer"), "{err:?}");
    assert_eq!(carts.arrivals(&GET_CART), 3);
    assert_eq!(counted(&seen), (1, 2));
}

#[tokio::test(start_paused = true)]
async fn a_layer_that_sheds_the_attempt_counts_nothing_and_is_not_retried() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let _dropped = hanging(&carts, |n| n == 1);
    let (policy, seen) = recording();
    let client = Client::new(
        &setup(&host),
        Settings {
            breaker_policy: policy,
            ..carts_settings(&ca)
        }
        .layer(tower::load_shed::LoadShedLayer::new())
        .layer(tower::limit::ConcurrencyLimitLayer::new(1)),
    )
    .unwrap();
    // The first call holds the one slot while carts leaves it hanging.
    let hung = {
        let client = client.clone();
        tokio::spawn(async move { client.unary::<_, Cart>(&GET_CART, get("c-1")).await })
    };
    for _ in 0..100 {
        if carts.arrivals(&GET_CART) == 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(carts.arrivals(&GET_CART), 1);
    let started = Instant::now();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-2"))
        .await
        .unwrap_err();
    assert_eq!(started.elapsed(), Duration::ZERO, "at once");
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(err.message().contains("shed"), "{err:?}");
    assert!(LayerError::from_status(&err).unwrap().is_shed());
    assert_eq!(carts.arrivals(&GET_CART), 1, "nothing was sent");
    assert_eq!(counted(&seen), (0, 0), "and nothing counted");
    hung.abort();
}

// ---- real time, loopback TCP -------------------------------------------

/// The client's timer and tonic's server's, which ends the handler at the
/// attempt's `grpc-timeout` (the same bound, measured from when the
/// request arrived) with `Cancelled`, race on every attempt: whichever
/// fires first, the attempt is the client's timeout, a failure, retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_time_the_servers_grpc_timeout_and_the_attempts_timer_race_to_the_same_end() {
    let carts = Carts::new();
    let _dropped = hanging(&carts, |_| true);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(
        tonic::transport::Server::builder().serve_with_incoming_shutdown(
            carts.clone(),
            incoming,
            async move {
                let _ = stopped.await;
            },
        ),
    );
    let (policy, seen) = recording();
    let client = Client::new(
        &Setup::new(),
        Settings {
            addr,
            attempt_timeout: Some(Duration::from_millis(50)),
            max_attempts: 2,
            backoff_base: Duration::from_millis(5),
            // Room for every retry: the default's 10 tokens stop at half.
            retry_budget: humus::retry::BudgetConfig {
                max_tokens: 100,
                token_ratio: 0.1,
            },
            breaker_policy: policy,
            ..Settings::default()
        },
    )
    .unwrap();
    let calls = async {
        for i in 1..=5 {
            let err = client
                .unary::<_, Cart>(&GET_CART, get(&format!("c-{i}")))
                .await
                .unwrap_err();
            assert_eq!(err.code(), Code::DeadlineExceeded, "call {i}: {err:?}");
            assert!(AttemptTimeout::from_status(&err).is_some(), "{err:?}");
            assert_eq!(carts.arrivals(&GET_CART), 2 * i, "each call retried once");
            assert_eq!(counted(&seen), (0, 2 * i as i64), "each attempt a failure");
        }
    };
    tokio::time::timeout(Duration::from_secs(10), calls)
        .await
        .expect("bounded: under a second");
    let _ = stop.send(());
}

/// An attempt whose own timeout passes while it still waits for its
/// connection (a server that accepts and never speaks) ends the call, not
/// retried (a retry would wait on the same dial), counted once as a
/// failure, as a call whose deadline passes there is; its status says it
/// was waiting for its connection. Five such calls open the breaker, as
/// five calls' deadlines would without the setting.
#[tokio::test(start_paused = true)]
async fn an_attempt_cut_while_it_waits_for_its_connection_is_not_retried() {
    let (ca, host) = (Ca::new(), Host::new());
    let mut silent = host.listen("carts:9090");
    let held = tokio::spawn(async move {
        let conn = silent.accept().await;
        tokio::time::sleep(Duration::from_secs(3600)).await;
        drop((conn, silent));
    });
    let client = Client::new(
        &setup(&host),
        Settings {
            timeout: 500 * MS,
            attempt_timeout: Some(100 * MS),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    for _ in 0..5 {
        let start = Instant::now();
        let err = client
            .unary::<_, Cart>(&GET_CART, get("c-1"))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
        assert_eq!(
            err.message(),
            "carts:9090: the attempt's timeout passed: the client's attempt_timeout setting, 100ms; it was still waiting for its connection (the dial had not finished)"
        );
        assert!(AttemptTimeout::from_status(&err).is_some_and(AttemptTimeout::was_connecting));
        assert_eq!(start.elapsed(), 100 * MS, "one attempt, not retried");
    }
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert!(
        std::error::Error::source(&err).is_some_and(|s| s.is::<Rejected>()),
        "five failures opened the breaker: {err:?}"
    );
    assert_eq!(host.dials("carts:9090"), 1, "one dial, still under way");
    held.abort();
}

/// A client-streaming call's open is its whole upload (the server answers
/// once it has read the stream): a caller slower than `attempt_timeout` to
/// produce its messages is not cut, nor counted against the dependency.
#[tokio::test(start_paused = true)]
async fn a_client_streams_slow_upload_is_not_the_attempts_timeout() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_add_items(|_, mut items| async move {
        let mut n = 0;
        while items.message().await?.is_some() {
            n += 1;
        }
        Ok(Response::new(cart("c-1", n)))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let client = Client::new(&setup(&host), with_attempt_timeout(&ca, 100 * MS, policy)).unwrap();
    // Three items, 60 ms apart: 180 ms of the caller's own pace.
    let items = futures_util::stream::unfold(0, |n| async move {
        if n == 3 {
            return None;
        }
        tokio::time::sleep(60 * MS).await;
        Some((
            Item {
                sku: format!("s-{n}"),
            },
            n + 1,
        ))
    });
    let start = Instant::now();
    let cart: Response<Cart> = client
        .client_streaming(&ADD_ITEMS, tonic::Request::new(items))
        .await
        .unwrap();
    assert_eq!(cart.get_ref().items, 3);
    assert_eq!(start.elapsed(), 180 * MS);
    assert_eq!(carts.arrivals(&ADD_ITEMS), 1);
    assert_eq!(counted(&seen), (1, 0));
}
