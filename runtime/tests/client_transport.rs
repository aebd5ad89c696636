//! The client's connection, on the testing Host over TLS on paused time:
//! dialling, TLS and `:authority`, one connection per client, GOAWAY,
//! restarts, and the close at `Setup::stop()` (docs/client.md, "The connection").

mod client_support;

use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

use client_support::*;
use humus::grpc::client::{Client, Settings};
use humus::testing::{Ca, Host};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tonic::metadata::MetadataMap;
use tonic::{Code, Response, Status};

/// The design's "Testing": orders, whose handler calls carts through the
/// client, answers "orders, via carts", all on the testing host over TLS.
#[tokio::test(start_paused = true)]
async fn orders_calls_carts_through_the_client() {
    let ca = Ca::new();
    let host = Host::new();
    let carts = Carts::new();
    let _carts = start_carts(&host, &ca, &carts);

    let orders_setup = setup(&host);
    let to_carts = Client::new(&orders_setup, carts_settings(&ca)).unwrap();
    let _orders = serve_tls(
        &host,
        &ca,
        "orders:8443",
        "orders",
        tonic::transport::Server::builder(),
        Orders { carts: to_carts },
    );

    let test_setup = setup(&host);
    let to_orders = Client::new(
        &test_setup,
        Settings {
            addr: "orders:8443".into(),
            tls: Some(Arc::new(ca.client_config())),
            ..Settings::default()
        },
    )
    .unwrap();
    for _ in 0..2 {
        let order: Response<Order> = to_orders
            .unary(
                &PLACE_ORDER,
                tonic::Request::new(OrderRequest {
                    cart_id: "c-1".into(),
                }),
            )
            .await
            .unwrap();
        assert_eq!(order.get_ref().summary, "orders, via carts");
    }
    assert_eq!(carts.arrivals(&GET_CART), 2);
    assert_eq!(
        host.dials("carts:9090"),
        1,
        "one connection, shared by both calls"
    );
    test_setup.stop().await;
    orders_setup.stop().await;
}

#[tokio::test(start_paused = true)]
async fn new_dials_nothing_and_the_first_call_dials() {
    let ca = Ca::new();
    let host = Host::new();
    let carts = Carts::new();
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    settle().await;
    assert_eq!(host.dials("carts:9090"), 0);
    let cart: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    assert_eq!(cart.get_ref().id, "c-1");
    assert_eq!(host.dials("carts:9090"), 1);
}

#[test]
fn new_needs_no_runtime() {
    let ca = Ca::new();
    let client = Client::new(&setup(&Host::new()), carts_settings(&ca));
    assert!(client.is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_dependency_down_at_start_fails_calls_unavailable_until_it_comes_up() {
    let ca = Ca::new();
    let host = Host::new();
    let carts = Carts::new();
    let client = Client::new(
        &setup(&host),
        Settings {
            max_attempts: 1,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    for _ in 0..2 {
        let err = client
            .unary::<_, Cart>(&GET_CART, get("c-1"))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unavailable, "{err:?}");
        assert!(
            err.message().contains("nothing listens on carts:9090"),
            "{err:?}"
        );
    }
    let _carts = start_carts(&host, &ca, &carts);
    // The next dial is due 1 s after the failed one (the connection backoff).
    tokio::time::sleep(SECOND).await;
    let cart: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    assert_eq!(cart.get_ref().served_by, "carts");
    assert_eq!(
        carts.arrivals(&GET_CART),
        1,
        "the failed calls reached nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn the_client_trusts_only_the_roots_it_is_given() {
    let ca = Ca::new();
    let other = Ca::new();
    let host = Host::new();
    let carts = Carts::new();
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(
        &setup(&host),
        Settings {
            max_attempts: 1,
            ..carts_settings(&other)
        },
    )
    .unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(
        err.message().contains("TLS handshake with carts:9090"),
        "{err:?}"
    );
    assert_eq!(carts.arrivals(&GET_CART), 0);
}

#[tokio::test(start_paused = true)]
async fn a_certificate_for_another_name_fails_unavailable() {
    let ca = Ca::new();
    let host = Host::new();
    let carts = Carts::new();
    let _carts = serve_tls(
        &host,
        &ca,
        "carts:9090",
        "orders",
        tonic::transport::Server::builder(),
        carts.clone(),
    );
    let client = Client::new(
        &setup(&host),
        Settings {
            max_attempts: 1,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert_eq!(carts.arrivals(&GET_CART), 0);
}

#[tokio::test(start_paused = true)]
async fn no_tls_config_is_plain_text() {
    let host = Host::new();
    let carts = Carts::new();
    let _carts = serve_plain(&host, "carts:9090", carts.clone());
    let client = Client::new(
        &setup(&host),
        Settings {
            addr: "carts:9090".into(),
            ..Settings::default()
        },
    )
    .unwrap();
    let _: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    assert_eq!(carts.authorities(), ["carts:9090"]);
}

#[tokio::test(start_paused = true)]
async fn the_authority_is_the_address() {
    let ca = Ca::new();
    let host = Host::new();
    let carts = Carts::new();
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let _: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    assert_eq!(carts.authorities(), ["carts:9090"]);
}

/// Every request says who sent it: `grpc-rust-humus/<version>`, after the
/// caller's own `user-agent` if its metadata has one (gRPC over HTTP/2,
/// "User-Agent").
#[tokio::test(start_paused = true)]
async fn the_user_agent_is_humus_after_the_callers_own() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let agents = seen.clone();
    carts.on_get_cart(move |seen, req| {
        let agent = seen
            .metadata
            .get("user-agent")
            .map(|v| v.to_str().unwrap().to_owned());
        agents.lock().unwrap().push(agent);
        async move { Ok(Response::new(cart(&req.id, 0))) }
    });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let _: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    let mut theirs = get("c-2");
    theirs
        .metadata_mut()
        .insert("user-agent", "wallet/2.1".parse().unwrap());
    let _: Response<Cart> = client.unary(&GET_CART, theirs).await.unwrap();
    let ours = concat!("grpc-rust-humus/", env!("CARGO_PKG_VERSION"));
    assert_eq!(
        *seen.lock().unwrap(),
        [Some(ours.to_owned()), Some(format!("wallet/2.1 {ours}"))]
    );
}

/// A dial that takes 1.5 s (a slow network), under a 1 s timeout.
#[derive(Debug)]
struct SlowHost(Host);

impl humus::Host for SlowHost {
    fn dial<'a>(&'a self, addr: &'a str) -> humus::DialFuture<'a> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            humus::Host::dial(&self.0, addr).await
        })
    }

    fn read_file(&self, path: &std::path::Path) -> std::io::Result<Vec<u8>> {
        humus::Host::read_file(&self.0, path)
    }
}

/// A dial goes on when the call waiting for it gives up (its deadline), and
/// the next call takes the connection it made: one dial, not one per call.
#[tokio::test(start_paused = true)]
async fn a_dial_outlives_the_call_that_started_it() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(
        &humus::Setup::new().with_host(SlowHost(host.clone())),
        Settings {
            timeout: SECOND,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let start = Instant::now();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert_eq!(start.elapsed(), SECOND);
    let _: Response<Cart> = client.unary(&GET_CART, get("c-2")).await.unwrap();
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(1500),
        "the second call waited for the first call's dial"
    );
    assert_eq!(host.dials("carts:9090"), 1);
    assert_eq!(carts.arrivals(&GET_CART), 1);
}

/// A Host whose first dial panics (a bug in it).
#[derive(Debug)]
struct PanicsOnce(Host, std::sync::atomic::AtomicBool);

impl humus::Host for PanicsOnce {
    fn dial<'a>(&'a self, addr: &'a str) -> humus::DialFuture<'a> {
        assert!(
            self.1.swap(true, std::sync::atomic::Ordering::SeqCst),
            "the first dial's bug"
        );
        humus::Host::dial(&self.0, addr)
    }

    fn read_file(&self, path: &std::path::Path) -> std::io::Result<Vec<u8>> {
        humus::Host::read_file(&self.0, path)
    }
}

/// A dial that panics panics the call waiting for it, and leaves no dial
/// behind: the next call dials again.
#[tokio::test(start_paused = true)]
async fn a_dial_that_panics_panics_its_call_and_the_next_call_dials_again() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let setup = humus::Setup::new().with_host(PanicsOnce(host.clone(), Default::default()));
    let client = Client::new(&setup, carts_settings(&ca)).unwrap();
    let first = {
        let client = client.clone();
        tokio::spawn(async move { client.unary::<_, Cart>(&GET_CART, get("c-1")).await })
    };
    let panicked = first.await.unwrap_err();
    assert!(panicked.is_panic(), "{panicked:?}");
    let _: Response<Cart> = client.unary(&GET_CART, get("c-2")).await.unwrap();
    assert_eq!(
        host.dials("carts:9090"),
        1,
        "the panicking dial reached no host"
    );
}

/// A server that sends its HTTP/2 settings and closes at once: the dial
/// succeeds, the requests are never sent, and once the resends of a request
/// that never left are spent, the attempt fails Unavailable (not hyper's
/// Cancelled), so it is retried and the breaker counts it.
#[tokio::test(start_paused = true)]
async fn a_server_that_closes_every_connection_fails_calls_unavailable() {
    use tokio::io::AsyncWriteExt;
    let host = Host::new();
    let mut listener = host.listen("carts:9090");
    tokio::spawn(async move {
        loop {
            let mut conn = listener.accept().await;
            // An empty SETTINGS frame: the server's preface, and nothing more.
            let _ = conn.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await;
            drop(conn);
        }
    });
    let client = Client::new(
        &setup(&host),
        Settings {
            addr: "carts:9090".into(),
            ..Settings::default()
        },
    )
    .unwrap();
    for _ in 0..3 {
        let err = client
            .unary::<_, Cart>(&GET_CART, get("c-1"))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    }
    assert!(
        host.dials("carts:9090") > 3,
        "retried: {} dials",
        host.dials("carts:9090")
    );
}

/// A server that accepts and then says nothing (no TLS, no HTTP/2
/// settings): the dial fails after 20 s (grpc-go's connect timeout). A
/// call whose deadline passes first says it was still waiting for its
/// connection; a call waiting for it then gets its error, a failed
/// attempt as for any failed dial, and its retry dials again at once (the
/// backoff after a dial is measured from its start, and 20 s have passed),
/// and reaches the server that listens by then.
#[tokio::test(start_paused = true)]
async fn a_dial_that_hangs_fails_after_the_connect_timeout_and_the_retry_dials_again() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let mut silent = host.listen("carts:9090");
    let held = tokio::spawn(async move {
        let conn = silent.accept().await;
        drop(silent);
        // Keeps the connection open, silent.
        tokio::time::sleep(Duration::from_secs(3600)).await;
        drop(conn);
    });
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let start = Instant::now();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert_eq!(
        err.message(),
        "carts:9090: the call's deadline passed: the client's timeout setting, 10s; it was still waiting for its connection (the dial had not finished)"
    );
    assert_eq!(start.elapsed(), 10 * SECOND, "the call's own timeout");
    let _carts = start_carts(&host, &ca, &carts);
    tokio::time::sleep(SECOND).await;
    // Waits for the dial in progress, gets its error, and is retried: the
    // retry dials again, and reaches carts.
    let _: Response<Cart> = client.unary(&GET_CART, get("c-2")).await.unwrap();
    assert!(
        start.elapsed() >= 20 * SECOND && start.elapsed() < 21 * SECOND,
        "the first dial failed at 20 s: {:?}",
        start.elapsed()
    );
    assert_eq!(host.dials("carts:9090"), 2, "the retry dialled");
    assert_eq!(carts.arrivals(&GET_CART), 1);
    held.abort();
}

/// A client of 10.0.0.7:9090 whose server name is carts sends `:authority
/// carts` and requires a certificate for carts.
#[tokio::test(start_paused = true)]
async fn a_server_name_changes_the_name_checked_and_the_authority() {
    let ca = Ca::new();
    let host = Host::new();
    let carts = Carts::new();
    let _carts = serve_tls(
        &host,
        &ca,
        "10.0.0.7:9090",
        "carts",
        tonic::transport::Server::builder(),
        carts.clone(),
    );
    let by_ip = Settings {
        addr: "10.0.0.7:9090".into(),
        max_attempts: 1,
        ..carts_settings(&ca)
    };
    // Without the override, the certificate is checked for 10.0.0.7.
    let plain = Client::new(&setup(&host), by_ip.clone()).unwrap();
    let err = plain
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");

    let named = Client::new(
        &setup(&host),
        Settings {
            server_name: Some("carts".into()),
            ..by_ip
        },
    )
    .unwrap();
    let _: Response<Cart> = named.unary(&GET_CART, get("c-1")).await.unwrap();
    assert_eq!(carts.authorities(), ["carts"]);
}

#[tokio::test(start_paused = true)]
async fn one_connection_per_client_shared_by_every_task() {
    let ca = Ca::new();
    let host = Host::new();
    let carts = Carts::new();
    carts.on_get_cart(|_, req| async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        Ok(Response::new(cart(&req.id, 0)))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let one = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let calls: Vec<_> = (0..20)
        .map(|i| {
            let one = one.clone();
            tokio::spawn(async move {
                one.unary::<_, Cart>(&GET_CART, get(&format!("c-{i}")))
                    .await
            })
        })
        .collect();
    for call in calls {
        call.await.unwrap().unwrap();
    }
    assert_eq!(host.dials("carts:9090"), 1);

    let two = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let _: Response<Cart> = two.unary(&GET_CART, get("c-1")).await.unwrap();
    let _: Response<Cart> = one.unary(&GET_CART, get("c-1")).await.unwrap();
    assert_eq!(
        host.dials("carts:9090"),
        2,
        "a second client has its own connection"
    );
    assert_eq!(carts.arrivals(&GET_CART), 22);
}

/// A server whose connections age out sends GOAWAY: the call in flight
/// finishes, and every later call goes over a new connection with no error.
#[tokio::test(start_paused = true)]
async fn goaway_moves_the_client_to_a_new_connection() {
    let ca = Ca::new();
    let host = Host::new();
    let carts = Carts::new();
    carts.on_get_cart(|_, req| async move {
        let hold = if req.id == "slow" {
            3 * SECOND
        } else {
            Duration::from_millis(10)
        };
        tokio::time::sleep(hold).await;
        Ok(Response::new(cart(&req.id, 0)))
    });
    let _carts = serve_tls(
        &host,
        &ca,
        "carts:9090",
        "carts",
        tonic::transport::Server::builder().max_connection_age(2 * SECOND),
        carts.clone(),
    );
    let client = Client::new(
        &setup(&host),
        Settings {
            // No retries: any error would reach the caller.
            max_attempts: 1,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    // In flight across the first connection's age.
    let slow = {
        let client = client.clone();
        tokio::spawn(async move { client.unary::<_, Cart>(&GET_CART, get("slow")).await })
    };
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed() < 15 * SECOND {
        let result = client
            .unary::<_, Cart>(&GET_CART, get(&format!("c-{n}")))
            .await;
        assert!(
            result.is_ok(),
            "call {n} at {:?}: {result:?}",
            start.elapsed()
        );
        n += 1;
        tokio::time::sleep(Duration::from_millis(90)).await;
    }
    slow.await.unwrap().unwrap();
    assert!(
        host.dials("carts:9090") >= 5,
        "dials: {}",
        host.dials("carts:9090")
    );
    assert_eq!(carts.arrivals(&GET_CART), n + 1);
}

/// A graceful restart (GOAWAY, then listening again): calls in flight
/// finish, and calls after the restart succeed.
#[tokio::test(start_paused = true)]
async fn a_server_that_restarts() {
    let ca = Ca::new();
    let host = Host::new();
    let carts = Carts::new();
    carts.on_get_cart(|_, req| async move {
        tokio::time::sleep(SECOND).await;
        Ok(Response::new(cart(&req.id, 0)))
    });
    let running = start_carts(&host, &ca, &carts);
    let client = Client::new(
        &setup(&host),
        Settings {
            max_attempts: 1,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let _: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    let in_flight = {
        let client = client.clone();
        tokio::spawn(async move { client.unary::<_, Cart>(&GET_CART, get("c-2")).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    running.stop().await;
    in_flight.await.unwrap().unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-3"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "down: {err:?}");
    let _carts = start_carts(&host, &ca, &carts);
    tokio::time::sleep(SECOND).await;
    let _: Response<Cart> = client.unary(&GET_CART, get("c-4")).await.unwrap();
    assert_eq!(carts.arrivals(&GET_CART), 3);
    assert_eq!(host.accepted("carts:9090"), 2);
}

/// A crash (connections cut, nothing listening), then a new server.
#[tokio::test(start_paused = true)]
async fn a_server_that_crashes_and_comes_back() {
    let ca = Ca::new();
    let host = Host::new();
    let carts = Carts::new();
    let running = start_carts(&host, &ca, &carts);
    let client = Client::new(
        &setup(&host),
        Settings {
            max_attempts: 1,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let _: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    running.crash().await;
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-2"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    let _carts = start_carts(&host, &ca, &carts);
    tokio::time::sleep(SECOND).await;
    let _: Response<Cart> = client.unary(&GET_CART, get("c-3")).await.unwrap();
    assert_eq!(carts.arrivals(&GET_CART), 2);
}

#[tokio::test(start_paused = true)]
async fn after_stop_every_call_fails_canceled() {
    let ca = Ca::new();
    let host = Host::new();
    let carts = Carts::new();
    carts.on_get_cart(|_, req| async move {
        if req.id == "slow" {
            tokio::time::sleep(5 * SECOND).await;
        }
        Ok(Response::new(cart(&req.id, 0)))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let setup = setup(&host);
    let client = Client::new(&setup, carts_settings(&ca)).unwrap();
    let _: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    let in_flight = {
        let client = client.clone();
        tokio::spawn(async move { client.unary::<_, Cart>(&GET_CART, get("slow")).await })
    };
    tokio::time::sleep(SECOND).await;
    setup.stop().await;
    for err in [
        in_flight.await.unwrap().unwrap_err(),
        client
            .unary::<_, Cart>(&GET_CART, get("c-2"))
            .await
            .unwrap_err(),
    ] {
        assert_eq!(err.code(), Code::Cancelled, "{err:?}");
        assert_eq!(err.message(), "the client connection is closing");
    }
    assert_eq!(
        carts.arrivals(&GET_CART),
        2,
        "nothing was sent after the stop"
    );
}

/// A call in flight when the connection breaks ends Unavailable (tonic
/// says Unknown), so it is retried: here, on the restarted server.
#[tokio::test(start_paused = true)]
async fn a_call_in_flight_when_the_connection_breaks_is_unavailable_and_retried() {
    let ca = Ca::new();
    let host = Host::new();
    let carts = Carts::new();
    carts.on_get_cart(|s, req| async move {
        if s.n == 1 {
            std::future::pending::<()>().await;
        }
        Ok(Response::new(cart(&req.id, 0)))
    });
    let running = start_carts(&host, &ca, &carts);
    let once = Client::new(
        &setup(&host),
        Settings {
            max_attempts: 1,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let retried = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let first = {
        let once = once.clone();
        tokio::spawn(async move { once.unary::<_, Cart>(&GET_CART, get("c-1")).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    running.crash().await;
    let err = first.await.unwrap().unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(err.message().starts_with("the connection broke"), "{err:?}");

    carts.on_get_cart(|s, req| async move {
        if s.n == 2 {
            std::future::pending::<()>().await;
        }
        Ok(Response::new(cart(&req.id, 0)))
    });
    let running = start_carts(&host, &ca, &carts);
    let second = {
        let retried = retried.clone();
        tokio::spawn(async move { retried.unary::<_, Cart>(&GET_CART, get("c-2")).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    running.crash().await;
    let _carts = start_carts(&host, &ca, &carts);
    let cart = second.await.unwrap().unwrap();
    assert_eq!(cart.get_ref().id, "c-2");
    assert_eq!(carts.arrivals(&GET_CART), 3);
}

/// `Client::new` runs every check again and names every bad field in one
/// error; it dials nothing and registers nothing when it fails.
#[test]
fn new_rejects_bad_settings_naming_every_field() {
    let host = Host::new();
    let err = Client::new(
        &setup(&host),
        Settings {
            addr: "dns:///carts:9090".into(),
            timeout: Duration::ZERO,
            backoff_base: Duration::from_secs(2),
            backoff_max: Duration::from_secs(1),
            ..Settings::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        err.fields().collect::<Vec<_>>(),
        ["addr", "timeout", "backoff_max"]
    );
    assert!(err.to_string().contains("names a scheme"), "{err}");
    // An IPv6 address with its zone is refused, a server name or not: the
    // address is every call's :authority, which has no zone.
    let ca = Ca::new();
    let addr = "[fe80::1%eth0]:9090";
    for server_name in [None, Some("carts".to_owned())] {
        let err = Client::new(
            &setup(&host),
            Settings {
                addr: addr.into(),
                server_name,
                ..carts_settings(&ca)
            },
        )
        .unwrap_err();
        assert_eq!(err.fields().collect::<Vec<_>>(), ["addr"], "{addr}");
        assert!(err.to_string().contains("an IPv6 zone"), "{err}");
    }
    let missing = Client::new(&setup(&host), Settings::default()).unwrap_err();
    assert_eq!(missing.fields().collect::<Vec<_>>(), ["addr"]);
    assert_eq!(host.dials("carts:9090"), 0);
}

/// Polls `call` from this task until the server has seen `arrivals` calls
/// of GetCart, then hands it to a task of its own: the call is woken
/// through the waker of whichever task polls it last.
async fn move_to_a_new_task<T: Send + 'static>(
    carts: &Carts,
    arrivals: usize,
    call: impl std::future::Future<Output = T> + Send + 'static,
) -> tokio::task::JoinHandle<T> {
    let mut call = Box::pin(call);
    while carts.arrivals(&GET_CART) < arrivals {
        assert!(
            futures_util::poll!(call.as_mut()).is_pending(),
            "the call ended before the server saw it"
        );
        tokio::task::yield_now().await;
    }
    assert!(futures_util::poll!(call.as_mut()).is_pending());
    tokio::spawn(call)
}

/// A Carts that answers GetCart after 5 s, and a client of it with the
/// Setup that stops it.
fn carts_that_answer_in_5s() -> (Carts, Running, humus::Setup, Client) {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, req| async move {
        tokio::time::sleep(5 * SECOND).await;
        Ok(Response::new(cart(&req.id, 0)))
    });
    let running = start_carts(&host, &ca, &carts);
    let setup = setup(&host);
    let client = Client::new(&setup, carts_settings(&ca)).unwrap();
    (carts, running, setup, client)
}

/// A call polled by one task and then by another still ends when the
/// client stops: the close wakes the task that polled it last.
#[tokio::test(start_paused = true)]
async fn a_call_that_changes_tasks_still_ends_at_stop() {
    let (carts, _running, setup, client) = carts_that_answer_in_5s();
    let start = Instant::now();
    let call = {
        let client = client.clone();
        async move { client.unary::<_, Cart>(&GET_CART, get("c-1")).await }
    };
    let moved = move_to_a_new_task(&carts, 1, call).await;
    tokio::time::sleep(SECOND).await;
    setup.stop().await;
    let err = moved.await.unwrap().unwrap_err();
    assert_eq!(err.code(), Code::Cancelled, "{err:?}");
    assert_eq!(start.elapsed(), SECOND);
}

/// A call waiting for its connection's dial (here a TLS handshake the
/// server never answers) ends at stop, at once: the close cuts the dial.
#[tokio::test(start_paused = true)]
async fn a_call_waiting_for_its_dial_ends_at_stop() {
    let (ca, host) = (Ca::new(), Host::new());
    // Accepts nothing, answers nothing: the handshake waits.
    let _listener = host.listen("carts:9090");
    let setup = setup(&host);
    let client = Client::new(&setup, carts_settings(&ca)).unwrap();
    let start = Instant::now();
    let call = {
        let client = client.clone();
        tokio::spawn(async move { client.unary::<_, Cart>(&GET_CART, get("c-1")).await })
    };
    tokio::time::sleep(SECOND).await;
    assert_eq!(host.dials("carts:9090"), 1);
    setup.stop().await;
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(err.code(), Code::Cancelled, "{err:?}");
    assert_eq!(err.message(), "the client connection is closing");
    assert_eq!(start.elapsed(), SECOND);
}

/// A Carts that never answers GetCart, serving a client whose timeout is
/// `timeout`.
fn carts_that_never_answer(timeout: Duration) -> (Carts, Running, Client) {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| std::future::pending::<Result<Response<Cart>, tonic::Status>>());
    let running = start_carts(&host, &ca, &carts);
    let client = Client::new(
        &setup(&host),
        Settings {
            timeout,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    (carts, running, client)
}

/// A call polled by one task and then by another still ends at its
/// deadline: the timer wakes the task that polled it last. (The deadline,
/// 1234 ms, is sent as `1234000u`: tonic's own timer for that header fires
/// no earlier than the client's.)
#[tokio::test(start_paused = true)]
async fn a_call_that_changes_tasks_still_ends_at_its_deadline() {
    let (carts, _running, client) = carts_that_never_answer(Duration::from_millis(1234));
    let start = Instant::now();
    let call = {
        let client = client.clone();
        async move { client.unary::<_, Cart>(&GET_CART, get("c-1")).await }
    };
    let moved = move_to_a_new_task(&carts, 1, call).await;
    let err = tokio::time::timeout(10 * SECOND, moved)
        .await
        .expect("the deadline ended the call")
        .unwrap()
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert_eq!(start.elapsed(), Duration::from_millis(1234));
}

/// A call first polled by a task that has spent its coop budget still ends
/// at its deadline: tokio's timer does not register a `Sleep` polled
/// without budget, so the call registers it at its next poll. (1234 ms,
/// sent as `1234000u`: tonic's own timer fires no earlier than the
/// client's.)
#[tokio::test(start_paused = true)]
async fn a_call_first_polled_without_coop_budget_still_ends_at_its_deadline() {
    let (_carts, _running, client) = carts_that_never_answer(Duration::from_millis(1234));
    let start = Instant::now();
    let mut call = Box::pin(client.unary::<_, Cart>(&GET_CART, get("c-1")));
    let mut first = true;
    let ended = std::future::poll_fn(|cx| {
        if std::mem::take(&mut first) {
            // Spend the task's budget, as a busy task would have.
            while let std::task::Poll::Ready(spent) = tokio::task::coop::poll_proceed(cx) {
                spent.made_progress();
            }
        }
        call.as_mut().poll(cx)
    });
    let err = tokio::time::timeout(10 * SECOND, ended)
        .await
        .expect("the deadline ended the call")
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert_eq!(start.elapsed(), Duration::from_millis(1234));
}

/// A call polled once through another waker with no coop budget left, and
/// then again through its first waker, still ends when the client stops:
/// the poll without budget moved the close's registration to the other
/// waker, so the next poll must register again rather than trust the old
/// one.
#[tokio::test(start_paused = true)]
async fn a_call_polled_back_after_a_poll_without_budget_still_ends_at_stop() {
    let (carts, _running, setup, client) = carts_that_answer_in_5s();
    let start = Instant::now();
    let mut call = Box::pin(client.unary::<_, Cart>(&GET_CART, get("c-1")));
    while carts.arrivals(&GET_CART) < 1 {
        assert!(futures_util::poll!(call.as_mut()).is_pending());
        tokio::task::yield_now().await;
    }
    // Registered with this task's waker.
    assert!(futures_util::poll!(call.as_mut()).is_pending());
    // Once through another waker, with the budget spent.
    let other = futures_util::task::noop_waker();
    std::future::poll_fn(|cx| {
        while let std::task::Poll::Ready(spent) = tokio::task::coop::poll_proceed(cx) {
            spent.made_progress();
        }
        let mut elsewhere = std::task::Context::from_waker(&other);
        assert!(call.as_mut().poll(&mut elsewhere).is_pending());
        std::task::Poll::Ready(())
    })
    .await;
    // Back with this task's waker: the stop must wake it.
    let (ended, ()) = tokio::join!(call, async {
        tokio::time::sleep(SECOND).await;
        setup.stop().await;
    });
    assert_eq!(ended.unwrap_err().code(), Code::Cancelled);
    assert_eq!(start.elapsed(), SECOND);
}

/// gRPC's connection backoff: with the breaker off, 50 calls to an address
/// that refuses connections over 2.6 s make at most 3 dials (at 0, 1 s,
/// then 1.6 s ± 20 % later), each call failing `Unavailable` at once with
/// the last dial's error and when the next dial is due; a dependency that
/// comes back is reached by the first call after the backoff, with one
/// more dial.
#[tokio::test(start_paused = true)]
async fn failed_dials_back_off_and_calls_meanwhile_fail_at_once() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let client = Client::new(
        &setup(&host),
        Settings {
            max_attempts: 1,
            breaker_policy: humus::circuit::Policy::new(
                |_| false,
                |_| humus::circuit::State::Closed,
            ),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let start = Instant::now();
    for n in 0..50 {
        let called = Instant::now();
        let err = client
            .unary::<_, Cart>(&GET_CART, get("c"))
            .await
            .unwrap_err();
        assert_eq!(called.elapsed(), Duration::ZERO, "call {n} waited");
        assert_eq!(err.code(), Code::Unavailable, "{err:?}");
        assert!(
            err.message().contains("nothing listens on carts:9090"),
            "{err:?}"
        );
        if n == 1 {
            assert!(
                err.message()
                    .ends_with("(the connection is backing off: the next dial is due in 948ms)"),
                "{err:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(52)).await;
    }
    assert!(start.elapsed() >= Duration::from_millis(2600));
    let dials = host.dials("carts:9090");
    assert!((2..=3).contains(&dials), "{dials} dials");

    let _carts = start_carts(&host, &ca, &carts);
    let up = Instant::now();
    let mut failed = 0;
    loop {
        match client.unary::<_, Cart>(&GET_CART, get("c")).await {
            Ok(_) => break,
            Err(err) => {
                assert!(err.message().contains("backing off"), "{err:?}");
                failed += 1;
                assert!(failed < 1000);
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(up.elapsed() < Duration::from_secs(4), "{:?}", up.elapsed());
    assert_eq!(
        host.dials("carts:9090"),
        dials + 1,
        "reached at the next dial"
    );
    assert_eq!(carts.arrivals(&GET_CART), 1);
}

/// A dial that succeeds resets the backoff: after failures have grown it,
/// a connection that was up and went away is dialled again at once, and
/// if that dial fails, the next is due 1 s later, not longer.
#[tokio::test(start_paused = true)]
async fn a_successful_dial_resets_the_backoff() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let client = Client::new(
        &setup(&host),
        Settings {
            max_attempts: 1,
            breaker_policy: humus::circuit::Policy::new(
                |_| false,
                |_| humus::circuit::State::Closed,
            ),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    // Three failed dials: at 0, 1 s and 2.6 s ± 0.32 s.
    for _ in 0..300 {
        let _ = client.unary::<_, Cart>(&GET_CART, get("c")).await;
        if host.dials("carts:9090") == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(host.dials("carts:9090"), 3);
    let running = start_carts(&host, &ca, &carts);
    tokio::time::sleep(4 * SECOND).await;
    let _: Response<Cart> = client.unary(&GET_CART, get("c")).await.unwrap();
    assert_eq!(host.dials("carts:9090"), 4);
    running.crash().await;
    // The connection went away: the next call dials at once, and fails.
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c"))
        .await
        .unwrap_err();
    assert_eq!(host.dials("carts:9090"), 5, "{err:?}");
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c"))
        .await
        .unwrap_err();
    assert!(
        err.message().ends_with("the next dial is due in 1s)"),
        "the backoff starts over: {err:?}"
    );
}

/// `connect_backoff_max` caps the connection backoff: with 3 s, a
/// dependency down for five minutes is dialled again at most 3 s after
/// each failed dial (the jitter stays below the ceiling), where the
/// default (120 s) would have let the gaps grow to two minutes; once it
/// is back, the first call after the next dial reaches it, within 3 s.
#[tokio::test(start_paused = true)]
async fn connect_backoff_max_caps_the_wait_between_dials() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let client = Client::new(
        &setup(&host),
        Settings {
            max_attempts: 1,
            connect_backoff_max: Duration::from_secs(3),
            breaker_policy: humus::circuit::Policy::new(
                |_| false,
                |_| humus::circuit::State::Closed,
            ),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let tick = Duration::from_millis(10);
    let start = Instant::now();
    let mut dialled_at = vec![];
    while start.elapsed() < Duration::from_secs(300) {
        let _ = client.unary::<_, Cart>(&GET_CART, get("c")).await;
        if host.dials("carts:9090") > dialled_at.len() {
            dialled_at.push(Instant::now());
        }
        tokio::time::sleep(tick).await;
    }
    assert_eq!(dialled_at.len(), host.dials("carts:9090"));
    let gaps: Vec<Duration> = dialled_at.windows(2).map(|w| w[1] - w[0]).collect();
    let longest = gaps.iter().max().copied().unwrap();
    assert!(
        longest <= Duration::from_secs(3) + tick,
        "longest gap {longest:?}: {gaps:?}"
    );
    // 1 s, 1.6 s, 2.56 s, then 2.4 s to 3 s (the jitter, below the ceiling).
    assert!(gaps.len() >= 95, "{} dials", dialled_at.len());
    assert!(longest > Duration::from_millis(2400), "{gaps:?}");

    let _carts = start_carts(&host, &ca, &carts);
    let up = Instant::now();
    loop {
        match client.unary::<_, Cart>(&GET_CART, get("c")).await {
            Ok(_) => break,
            Err(err) => assert!(err.message().contains("backing off"), "{err:?}"),
        }
        tokio::time::sleep(tick).await;
    }
    assert!(up.elapsed() <= Duration::from_secs(3), "{:?}", up.elapsed());
}

/// A call failing at once in the backoff says how old the last dial's
/// error is, so a stale error (the port may accept by now) is told from a
/// fresh one; the status's source is still that dial.
#[tokio::test(start_paused = true)]
async fn a_call_in_the_backoff_says_how_old_the_dial_error_is() {
    let (ca, host) = (Ca::new(), Host::new());
    let client = Client::new(
        &setup(&host),
        Settings {
            max_attempts: 1,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c"))
        .await
        .unwrap_err();
    assert!(!err.message().contains("ago"), "{err:?}");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c"))
        .await
        .unwrap_err();
    assert_eq!(
        err.message(),
        "dial carts:9090: connection refused: nothing listens on carts:9090, 700ms ago \
         (the connection is backing off: the next dial is due in 300ms)"
    );
    let io = std::iter::successors(err.source(), |e| (*e).source())
        .find_map(|e| e.downcast_ref::<std::io::Error>())
        .expect("the dial's io::Error, among the status's sources");
    assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
    assert_eq!(host.dials("carts:9090"), 1);
}

/// The readiness check keeps dialling on its own schedule: a check made
/// while calls are backing off dials at once.
#[tokio::test(start_paused = true)]
async fn a_readiness_check_dials_while_calls_back_off() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    let dials = host.dials("carts:9090");
    let _carts = start_carts(&host, &ca, &carts);
    let ready = client.connected();
    assert!(ready.check().await, "the check dialled");
    assert_eq!(host.dials("carts:9090"), dials + 1);
    let _: Response<Cart> = client.unary(&GET_CART, get("c")).await.unwrap();
}

/// A plain-text client of `addr` on `host`, with `settings` over the
/// defaults.
fn plain_client(host: &Host, addr: &str, settings: Settings) -> Client {
    Client::new(
        &setup(host),
        Settings {
            addr: addr.into(),
            tls: None,
            ..settings
        },
    )
    .unwrap()
}

/// A proxy's error page (HTTP 503, `text/plain` as Envoy sends it, or HTML
/// as nginx does) is `Unavailable` without its body being read as gRPC:
/// retried, and counted against the dependency (here its breaker opens
/// after 3 failures in a row and rejects the next call).
#[tokio::test(start_paused = true)]
async fn a_proxys_503_page_is_unavailable_retried_and_counted() {
    for (content_type, body) in [
        (
            "text/plain",
            "upstream connect error or disconnect/reset before headers",
        ),
        (
            "text/html",
            "<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>",
        ),
    ] {
        let host = Host::new();
        let _proxy = h2_server(&host, "carts:9090", move |_, _, respond| {
            answer_http(respond, 503, Some(content_type), body);
        });
        let client = plain_client(
            &host,
            "carts:9090",
            Settings {
                breaker_policy: humus::circuit::Policy::consecutive(3),
                ..Settings::default()
            },
        );
        let err = client
            .unary::<_, Cart>(&GET_CART, get("c"))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unavailable, "{err:?}");
        assert_eq!(
            err.message(),
            format!(
                "the server answered HTTP 503 Service Unavailable with content-type \"{content_type}\", not a gRPC response (a proxy's error page?)"
            )
        );
        let err = client
            .unary::<_, Cart>(&GET_CART, get("c"))
            .await
            .unwrap_err();
        assert!(
            err.message().starts_with("carts:9090: circuit"),
            "three attempts failed, the breaker is open: {err:?}"
        );
    }
}

/// A proxy's 429 page with a `Retry-After` is retried after the wait it
/// asks for (taken as the server's pushback), and not at all when the wait
/// is longer than `backoff_max`; the message says the wait.
#[tokio::test(start_paused = true)]
async fn a_proxys_retry_after_is_the_pushback() {
    for (retry_after, retried) in [("2", true), ("60", false)] {
        let host = Host::new();
        let _proxy = h2_server(&host, "carts:9090", move |n, _, mut respond| {
            if n == 1 {
                let response = http::Response::builder()
                    .status(429)
                    .header("content-type", "text/html")
                    .header("retry-after", retry_after)
                    .body(())
                    .unwrap();
                let _ = respond.send_response(response, true);
            } else {
                answer_grpc(respond, &cart("c", 1));
            }
        });
        let client = plain_client(&host, "carts:9090", Settings::default());
        let start = Instant::now();
        let result = client.unary::<_, Cart>(&GET_CART, get("c")).await;
        if retried {
            assert_eq!(result.unwrap().into_inner(), cart("c", 1));
            assert_eq!(start.elapsed(), 2 * SECOND, "retried after the wait asked");
        } else {
            let err = result.unwrap_err();
            assert_eq!(err.code(), Code::Unavailable, "{err:?}");
            assert_eq!(
                err.message(),
                "the server answered HTTP 429 Too Many Requests with content-type \"text/html\", not a gRPC response (a proxy's error page?); it asks to wait 60s (Retry-After)"
            );
            assert_eq!(
                start.elapsed(),
                Duration::ZERO,
                "a wait past backoff_max is not made"
            );
        }
    }
}

/// A gateway's rate limit (nginx's `limit_req`: HTTP 429 with a
/// `Retry-After`) answering every call is the dependency shedding load, as
/// a `ResourceExhausted` is: each 429 counts against it, so a burst of 8
/// calls opens the breaker (open after 3 failures in a row), as the same
/// burst answered by a 503 page does, and the next call is rejected.
#[tokio::test(start_paused = true)]
async fn a_proxys_rate_limit_counts_against_the_dependency() {
    for http in [429, 503] {
        let host = Host::new();
        let _proxy = h2_server(&host, "carts:9090", move |n, _, mut respond| {
            if n <= 8 {
                let response = http::Response::builder()
                    .status(http)
                    .header("content-type", "text/html")
                    .header("retry-after", "1")
                    .body(())
                    .unwrap();
                let _ = respond.send_response(response, true);
            } else {
                answer_grpc(respond, &cart("c", 1));
            }
        });
        let client = plain_client(
            &host,
            "carts:9090",
            Settings {
                breaker_policy: humus::circuit::Policy::consecutive(3),
                ..Settings::default()
            },
        );
        let burst: Vec<_> = (0..8)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move { client.unary::<_, Cart>(&GET_CART, get("c")).await })
            })
            .collect();
        let mut rejected = 0;
        for call in burst {
            if let Err(err) = call.await.unwrap() {
                assert_eq!(err.code(), Code::Unavailable, "{http}: {err:?}");
                if err.message().starts_with("carts:9090: circuit") {
                    rejected += 1;
                }
            }
        }
        assert!(rejected > 0, "{http}: retries after the wait were rejected");
        let err = client
            .unary::<_, Cart>(&GET_CART, get("c"))
            .await
            .unwrap_err();
        assert!(
            err.message().starts_with("carts:9090: circuit"),
            "{http}: the breaker is open: {err:?}"
        );
    }
}

/// A classify can tell a proxy's 429 from the backend's Unavailable by
/// [`mapped_http_status`](humus::grpc::client::mapped_http_status) (the
/// status's [`HttpAnswer`](humus::grpc::client::HttpAnswer) source), and
/// spare the breaker for it: a gateway whose rate limit says nothing of
/// the backend. The caller's error has that source too.
#[tokio::test(start_paused = true)]
async fn a_classify_can_spare_the_breaker_a_proxys_429() {
    use humus::circuit::Outcome;
    use humus::grpc::client::{Classification, Classify, HttpAnswer, mapped_http_status};

    let host = Host::new();
    let _proxy = h2_server(&host, "carts:9090", |_, _, respond| {
        answer_http(respond, 429, Some("text/plain"), "slow down");
    });
    let default = Classify::default();
    let classify = Classify::new(move |method, status, trailer| {
        let c = default.classify(method, status, trailer);
        match status.and_then(mapped_http_status) {
            Some(http::StatusCode::TOO_MANY_REQUESTS) => Classification {
                breaker: Outcome::Success,
                ..c
            },
            _ => c,
        }
    });
    let client = plain_client(
        &host,
        "carts:9090",
        Settings {
            classify,
            breaker_policy: humus::circuit::Policy::consecutive(3),
            ..Settings::default()
        },
    );
    for _ in 0..5 {
        let err = client
            .unary::<_, Cart>(&GET_CART, get("c"))
            .await
            .unwrap_err();
        assert!(
            err.message().starts_with("the server answered HTTP 429"),
            "the breaker stays closed: {err:?}"
        );
        let answer = err
            .source()
            .and_then(|s| s.downcast_ref::<HttpAnswer>())
            .expect("an HttpAnswer source");
        assert_eq!(answer.status(), http::StatusCode::TOO_MANY_REQUESTS);
    }
}

/// A status mapped from an HTTP answer is known by its typed source, never
/// by its text: a gRPC server's own `UNAVAILABLE` whose message is the
/// client's for a proxy's 429 page, word for word, is the server's: no
/// `HttpAnswer` source, no mapped HTTP status, and retried as any
/// Unavailable (three attempts), where the proxy's page itself (no
/// `Retry-After`) is sent once; on a typed unary call, a stub over the
/// client's channel, and a typed stream's open.
#[tokio::test(start_paused = true)]
async fn a_servers_unavailable_that_reads_like_a_proxys_page_is_the_servers() {
    use humus::grpc::client::{HttpAnswer, mapped_http_status};
    use std::sync::atomic::{AtomicUsize, Ordering};

    const PAGE: &str = "the server answered HTTP 429 Too Many Requests with content-type \"text/html\", not a gRPC response (a proxy's error page?)";
    for servers in [true, false] {
        let host = Host::new();
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = seen.clone();
        let _server = h2_server(&host, "carts:9090", move |_, _, mut respond| {
            counter.fetch_add(1, Ordering::SeqCst);
            let response = if servers {
                http::Response::builder()
                    .status(200)
                    .header("content-type", "application/grpc")
                    .header("grpc-status", "14")
                    .header("grpc-message", PAGE)
            } else {
                http::Response::builder()
                    .status(429)
                    .header("content-type", "text/html")
            };
            let _ = respond.send_response(response.body(()).unwrap(), true);
        });
        static LISTED: [&humus::grpc::client::Method; 2] = [&GET_CART, &WATCH_CART];
        for way in [
            "typed unary",
            "stub over the channel",
            "typed stream's open",
        ] {
            // A client of its own for each way: a full retry budget.
            let client = plain_client(&host, "carts:9090", Settings::default());
            let methods = humus::grpc::client::Methods::new(&[&LISTED]).unwrap();
            let channel = client.channel().with_methods(methods);
            let err = match way {
                "typed unary" => client
                    .unary::<_, Cart>(&GET_CART, get("c"))
                    .await
                    .unwrap_err(),
                "stub over the channel" => {
                    let mut stub = tonic::client::Grpc::new(channel.clone());
                    stub.ready().await.unwrap();
                    stub.unary::<_, Cart, _>(
                        get("c"),
                        http::uri::PathAndQuery::from_static(GET_CART.full_name),
                        tonic_prost::ProstCodec::default(),
                    )
                    .await
                    .unwrap_err()
                }
                _ => client
                    .server_streaming::<_, Cart>(&WATCH_CART, get("c"))
                    .await
                    .unwrap_err(),
            };
            let sent = seen.swap(0, Ordering::SeqCst);
            assert_eq!(err.code(), Code::Unavailable, "{way}: {err:?}");
            assert_eq!(err.message(), PAGE, "{way}");
            let answer = err.source().and_then(|s| s.downcast_ref::<HttpAnswer>());
            if servers {
                assert_eq!(mapped_http_status(&err), None, "{way}: {err:?}");
                assert!(answer.is_none(), "{way}: {err:?}");
                assert_eq!(sent, 3, "{way}: the server's Unavailable is retried");
            } else {
                assert_eq!(
                    mapped_http_status(&err),
                    Some(http::StatusCode::TOO_MANY_REQUESTS),
                    "{way}"
                );
                assert!(answer.is_some(), "{way}: {err:?}");
                assert_eq!(sent, 1, "{way}: a 429 without a Retry-After is sent once");
            }
        }
    }
}

/// gRPC's mapping of the other HTTP statuses a non-gRPC answer may have,
/// body or not.
#[tokio::test(start_paused = true)]
async fn a_non_grpc_answer_maps_its_http_status() {
    let cases = [
        (400, Some("text/plain"), "bad request", Code::Internal),
        (
            401,
            Some("text/html"),
            "<p>log in</p>",
            Code::Unauthenticated,
        ),
        (403, None, "", Code::PermissionDenied),
        (
            404,
            Some("text/html"),
            "<h1>404 Not Found</h1>",
            Code::Unimplemented,
        ),
        (429, Some("text/plain"), "slow down", Code::Unavailable),
        (
            502,
            Some("text/html"),
            "<h1>502 Bad Gateway</h1>",
            Code::Unavailable,
        ),
        (504, None, "", Code::Unavailable),
        (500, Some("text/plain"), "oops", Code::Unknown),
        (200, Some("text/html"), "<h1>it works</h1>", Code::Unknown),
        (503, Some("application/grpc"), "", Code::Unavailable),
    ];
    for (status, content_type, body, code) in cases {
        let host = Host::new();
        let _server = h2_server(&host, "carts:9090", move |_, _, respond| {
            answer_http(respond, status, content_type, body);
        });
        let client = plain_client(
            &host,
            "carts:9090",
            Settings {
                max_attempts: 1,
                ..Settings::default()
            },
        );
        let err = client
            .unary::<_, Cart>(&GET_CART, get("c"))
            .await
            .unwrap_err();
        assert_eq!(err.code(), code, "HTTP {status} {content_type:?}: {err:?}");
        assert!(err.message().contains(&format!("HTTP {status}")), "{err:?}");
    }
}

/// A response over the decoding limit (4 MiB) ends the call
/// `ResourceExhausted`, as other gRPC clients answer it (tonic says
/// `OutOfRange`, which the default classification counts as the
/// dependency working): not retried, counted as a failure.
#[tokio::test(start_paused = true)]
async fn a_response_over_the_size_limit_is_resource_exhausted() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| async move { Ok(Response::new(cart(&"x".repeat(5 << 20), 0))) });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(
        err.message()
            .starts_with("the response message is larger than the limit: found 52"),
        "{err:?}"
    );
    assert_eq!(carts.arrivals(&GET_CART), 1, "not retried");
    assert!(err.source().is_none(), "the client's own status: {err:?}");
}

/// tonic's server's words for a request over its decoding limit (4 MiB):
/// a `CartRequest` whose id is 5 MiB is 5242885 bytes.
const SERVERS_OUT_OF_RANGE: &str =
    "Error, decoded message length too large: found 5242885 bytes, the limit is: 4194304 bytes";

/// A server that refuses a request over its own decoding limit answers
/// `OutOfRange` (trailers-only); the call ends with the server's status,
/// as sent: the limit exceeded is the server's, not the client's
/// (`ResourceExhausted` is only for a response over the client's limit).
/// The default classification counts `OutOfRange` as the dependency
/// working, and does not retry it.
#[tokio::test(start_paused = true)]
async fn a_servers_out_of_range_for_a_request_over_its_limit_is_returned_as_sent() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get(&"x".repeat(5 << 20)))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (Code::OutOfRange, SERVERS_OUT_OF_RANGE),
        "{err:?}"
    );
    assert!(err.source().is_none(), "the server's status: {err:?}");
    assert_eq!(carts.arrivals(&GET_CART), 1, "not retried");
    let classified =
        humus::grpc::client::default_classify(GET_CART.full_name, Some(&err), &MetadataMap::new());
    assert_eq!(classified.breaker, humus::circuit::Outcome::Success);
    // The client is still fine, and small calls go on.
    let cart = client.unary::<_, Cart>(&GET_CART, get("c")).await.unwrap();
    assert_eq!(cart.get_ref().id, "c");
}

/// The client's decoding limit is its setting: a 5 MiB response is read
/// with the limit raised to 8 MiB, and is `ResourceExhausted` under the
/// default (4 MiB) or a limit set below it.
#[tokio::test(start_paused = true)]
async fn the_decoding_limit_is_the_clients_setting() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| async move { Ok(Response::new(cart(&"x".repeat(5 << 20), 0))) });
    let _carts = start_carts(&host, &ca, &carts);
    let raised = Settings {
        max_decoding_message_size: 8 << 20,
        ..carts_settings(&ca)
    };
    let client = Client::new(&setup(&host), raised).unwrap();
    let read = client.unary::<_, Cart>(&GET_CART, get("c")).await.unwrap();
    assert_eq!(read.get_ref().id.len(), 5 << 20);
    let lowered = Settings {
        max_decoding_message_size: 1024,
        ..carts_settings(&ca)
    };
    carts.on_get_cart(|_, _| async move { Ok(Response::new(cart(&"x".repeat(2000), 0))) });
    let client = Client::new(&setup(&host), lowered).unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(
        err.message().ends_with("bytes, the limit is: 1024 bytes"),
        "{err:?}"
    );
}

/// A typed stream's message over the client's limit ends the stream
/// `ResourceExhausted` (the setting raises the limit); a stream the server
/// ends with its own `OutOfRange`, whatever its words, ends with it.
#[tokio::test(start_paused = true)]
async fn a_stream_message_over_the_limit_is_resource_exhausted_and_a_servers_status_is_kept() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_watch_cart(|_, req| async move {
        let last = if req.id == "big" {
            Ok(cart(&"x".repeat(5 << 20), 2))
        } else {
            Err(Status::out_of_range(SERVERS_OUT_OF_RANGE))
        };
        Ok(Response::new(futures_util::stream::iter(vec![
            Ok(cart(&req.id, 1)),
            last,
        ])))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let read = |settings: Settings, id: &'static str| {
        let host = host.clone();
        async move {
            let client = Client::new(&setup(&host), settings).unwrap();
            let mut stream = client
                .server_streaming::<_, Cart>(&WATCH_CART, get(id))
                .await
                .unwrap()
                .into_inner();
            let mut items = Vec::new();
            loop {
                match stream.message().await {
                    Ok(Some(cart)) => items.push(cart.items),
                    Ok(None) => return (items, None),
                    Err(status) => return (items, Some(status)),
                }
            }
        }
    };
    let (items, end) = read(carts_settings(&ca), "big").await;
    let end = end.expect("an error");
    assert_eq!(items, [1]);
    assert_eq!(end.code(), Code::ResourceExhausted, "{end:?}");
    assert!(
        end.message()
            .starts_with("the response message is larger than the limit: found 52"),
        "{end:?}"
    );
    let raised = Settings {
        max_decoding_message_size: 8 << 20,
        ..carts_settings(&ca)
    };
    let (items, end) = read(raised, "big").await;
    assert_eq!(items, [1, 2]);
    assert!(end.is_none(), "{end:?}");
    let (items, end) = read(carts_settings(&ca), "theirs").await;
    let end = end.expect("the server's status");
    assert_eq!(items, [1]);
    assert_eq!(
        (end.code(), end.message()),
        (Code::OutOfRange, SERVERS_OUT_OF_RANGE)
    );
}

// ---- transparent resends ----------------------------------------------

/// A carts on a raw HTTP/2 server that refuses its first stream
/// (`REFUSED_STREAM`: never processed) and answers the next with a cart;
/// the `traceparent` each request carried.
fn carts_that_refuse_the_first_stream(
    host: &Host,
) -> (JoinHandle<()>, Arc<std::sync::Mutex<Vec<String>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let server = h2_server(host, "carts:9090", move |n, headers, mut respond| {
        let parent = headers
            .get("traceparent")
            .map(|v| v.to_str().unwrap().to_owned());
        log.lock().unwrap().push(parent.unwrap_or_default());
        if n == 1 {
            respond.send_reset(h2::Reason::REFUSED_STREAM);
        } else {
            answer_grpc(respond, &cart("c", 0));
        }
    });
    (server, seen)
}

/// The spans of GetCart and the `rpc.client.call.duration` points, by code.
fn resend_telemetry(
    capture: &humus::testing::Telemetry,
) -> (Vec<opentelemetry_sdk::trace::SpanData>, Vec<(String, f64)>) {
    use humus::telemetry::names::*;
    let spans: Vec<_> = capture
        .spans()
        .into_iter()
        .filter(|s| s.name == "test.carts.v1.Carts/GetCart")
        .collect();
    let points = capture
        .metrics(RPC_SCOPE)
        .into_iter()
        .filter(|p| p.name == RPC_CLIENT_CALL_DURATION)
        .map(|p| {
            let code = p
                .attribute(RPC_RESPONSE_STATUS_CODE)
                .unwrap()
                .as_str()
                .into_owned();
            (code, p.value.as_f64())
        })
        .collect();
    (spans, points)
}

/// Asserts what a call resent once transparently leaves: two sibling spans
/// under the caller's (the refused send `UNAVAILABLE`, the resend `OK`),
/// each with its own duration point, each request carrying its own span's
/// trace context; one attempt for the breaker and the retries.
fn assert_one_transparent_resend(
    capture: &humus::testing::Telemetry,
    parent: &opentelemetry::trace::SpanContext,
    traceparents: &[String],
) {
    use humus::telemetry::names::*;
    use opentelemetry::trace::Status as SpanStatus;
    let (mut spans, mut points) = resend_telemetry(capture);
    spans.sort_by_key(|s| s.start_time);
    assert_eq!(spans.len(), 2, "a span per send: {spans:#?}");
    for span in &spans {
        assert_eq!(span.parent_span_id, parent.span_id(), "siblings");
        assert_eq!(span.span_context.trace_id(), parent.trace_id());
    }
    assert!(
        matches!(spans[0].status, SpanStatus::Error { .. }),
        "{:?}",
        spans[0].status
    );
    assert_eq!(spans[1].status, SpanStatus::Unset);
    assert_eq!(traceparents.len(), 2);
    for (span, sent) in spans.iter().zip(traceparents) {
        assert!(
            sent.contains(&span.span_context.span_id().to_string()),
            "{sent} carries {:?}",
            span.span_context.span_id()
        );
    }
    points.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        points,
        [("OK".to_owned(), 1.0), ("UNAVAILABLE".to_owned(), 1.0)]
    );
    let humus_points = capture.metrics(CLIENT_SCOPE);
    let count = |name: &str, attributes: &[(&str, &str)]| -> f64 {
        humus_points
            .iter()
            .filter(|p| p.name == name && p.has(attributes))
            .map(|p| p.value.as_f64())
            .sum()
    };
    assert_eq!(
        count(HUMUS_CIRCUIT_CALLS, &[]),
        1.0,
        "one attempt for the breaker"
    );
    assert_eq!(
        count(
            HUMUS_RETRY_DECISIONS,
            &[(HUMUS_RETRY_DECISION, "succeeded")]
        ),
        1.0
    );
}

/// A client of carts on `host` in plain text recording to `capture`, with
/// one attempt per call: only a transparent resend sends twice.
fn traced_client(host: &Host, capture: &humus::testing::Telemetry) -> Client {
    Client::new(
        &setup(host).with_telemetry(capture.telemetry()),
        Settings {
            addr: "carts:9090".into(),
            max_attempts: 1,
            ..Settings::default()
        },
    )
    .unwrap()
}

/// The caller's context: a span of its own.
fn caller(capture: &humus::testing::Telemetry) -> opentelemetry::Context {
    use opentelemetry::trace::{TraceContextExt as _, Tracer as _, TracerProvider as _};
    let span = capture.tracer_provider().tracer("caller").start("caller");
    opentelemetry::Context::new().with_span(span)
}

/// A stream the server refused (`REFUSED_STREAM`) is sent again at once,
/// in the same attempt (`max_attempts` 1), as a span of its own.
#[tokio::test(start_paused = true)]
async fn a_refused_stream_is_resent_as_a_span_of_its_own() {
    use opentelemetry::trace::TraceContextExt as _;
    let (host, capture) = (Host::new(), humus::testing::Telemetry::new());
    let (_server, traceparents) = carts_that_refuse_the_first_stream(&host);
    let client = traced_client(&host, &capture);
    let cx = caller(&capture);
    let mut request = get("c");
    request.extensions_mut().insert(cx.clone());
    let got: Response<Cart> = client.unary(&GET_CART, request).await.unwrap();
    assert_eq!(got.get_ref().id, "c");
    assert_one_transparent_resend(
        &capture,
        cx.span().span_context(),
        &traceparents.lock().unwrap(),
    );
}

/// A method that is never sent twice is still resent transparently: the
/// server never saw the refused request, so nothing is sent twice.
#[tokio::test(start_paused = true)]
async fn a_never_retry_method_is_resent_when_the_server_never_saw_it() {
    use opentelemetry::trace::TraceContextExt as _;
    static CHARGE: humus::grpc::client::Method = humus::grpc::client::Method {
        policy: humus::grpc::client::MethodPolicy {
            never_retry: true,
            ..humus::grpc::client::MethodPolicy::DEFAULT
        },
        ..GET_CART
    };
    let (host, capture) = (Host::new(), humus::testing::Telemetry::new());
    let (_server, traceparents) = carts_that_refuse_the_first_stream(&host);
    let client = Client::new(
        &setup(&host).with_telemetry(capture.telemetry()),
        Settings {
            addr: "carts:9090".into(),
            ..Settings::default()
        },
    )
    .unwrap();
    let cx = caller(&capture);
    let mut request = get("c");
    request.extensions_mut().insert(cx.clone());
    let _: Response<Cart> = client.unary(&CHARGE, request).await.unwrap();
    assert_one_transparent_resend(
        &capture,
        cx.span().span_context(),
        &traceparents.lock().unwrap(),
    );
}

/// A server whose first connection answers the client's first request
/// with a GOAWAY whose last stream id (0) is below it (HTTP/2's "never
/// processed"), written frame by frame; later connections are served by
/// h2, answering with a cart. The `traceparent` of every request h2 saw.
fn carts_that_goaway_below_the_first_stream(
    host: &Host,
) -> (JoinHandle<()>, Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let mut listener = host.listen("carts:9090");
    let server = tokio::spawn(async move {
        let mut first = listener.accept().await;
        let first = tokio::spawn(async move {
            // SETTINGS, empty.
            first.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
            let mut preface = [0; 24];
            first.read_exact(&mut preface).await.unwrap();
            assert_eq!(&preface, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
            loop {
                let mut head = [0; 9];
                if first.read_exact(&mut head).await.is_err() {
                    return;
                }
                let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
                let mut payload = vec![0; len];
                first.read_exact(&mut payload).await.unwrap();
                match (head[3], head[4] & 1) {
                    // The client's SETTINGS: acknowledged.
                    (4, 0) => first.write_all(&[0, 0, 0, 4, 1, 0, 0, 0, 0]).await.unwrap(),
                    // HEADERS of stream 1: GOAWAY, last stream 0, NO_ERROR.
                    (1, _) => {
                        first
                            .write_all(&[0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
                            .await
                            .unwrap();
                    }
                    _ => {}
                }
            }
        });
        let rest = {
            let log = log.clone();
            tokio::spawn(async move {
                loop {
                    let conn = listener.accept().await;
                    let log = log.clone();
                    tokio::spawn(async move {
                        let Ok(mut h2) = h2::server::handshake(conn).await else {
                            return;
                        };
                        while let Some(Ok((request, respond))) = h2.accept().await {
                            let parent = request.headers().get("traceparent");
                            log.lock().unwrap().push(
                                parent
                                    .map(|v| v.to_str().unwrap().to_owned())
                                    .unwrap_or_default(),
                            );
                            answer_grpc(respond, &cart("c", 0));
                        }
                    });
                }
            })
        };
        let _ = first.await;
        rest.await.unwrap();
    });
    (server, seen)
}

/// A request past the last stream id of the server's GOAWAY was never
/// processed: it is sent again at once over a new connection, in the same
/// attempt, as a span of its own.
#[tokio::test(start_paused = true)]
async fn a_request_past_a_goaways_last_stream_is_resent_as_a_span_of_its_own() {
    use opentelemetry::trace::TraceContextExt as _;
    let (host, capture) = (Host::new(), humus::testing::Telemetry::new());
    let (_server, traceparents) = carts_that_goaway_below_the_first_stream(&host);
    let client = traced_client(&host, &capture);
    let cx = caller(&capture);
    let mut request = get("c");
    request.extensions_mut().insert(cx.clone());
    let got: Response<Cart> = client.unary(&GET_CART, request).await.unwrap();
    assert_eq!(got.get_ref().id, "c");
    assert_eq!(host.dials("carts:9090"), 2, "resent over a new connection");
    let (mut spans, _) = resend_telemetry(&capture);
    spans.sort_by_key(|s| s.start_time);
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let seen = traceparents.lock().unwrap();
    assert_eq!(seen.len(), 1, "h2 saw the resend only");
    assert!(seen[0].contains(&spans[1].span_context.span_id().to_string()));
    // The rest is as for a refused stream, but for the first request's
    // traceparent, which only the raw server saw.
    let parent = cx.span().span_context().clone();
    for span in &spans {
        assert_eq!(span.parent_span_id, parent.span_id(), "siblings");
    }
    let (_, mut points) = resend_telemetry(&capture);
    points.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        points,
        [("OK".to_owned(), 1.0), ("UNAVAILABLE".to_owned(), 1.0)]
    );
}

// ---- TLS --------------------------------------------------------------

/// The TLS server name and the `:authority` are two settings: a client of
/// 10.0.0.7:9090 may require a certificate for carts and send `:authority
/// carts-api`.
#[tokio::test(start_paused = true)]
async fn the_server_name_and_the_authority_are_two_settings() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = serve_tls(
        &host,
        &ca,
        "10.0.0.7:9090",
        "carts",
        tonic::transport::Server::builder(),
        carts.clone(),
    );
    let client = Client::new(
        &setup(&host),
        Settings {
            addr: "10.0.0.7:9090".into(),
            server_name: Some("carts".into()),
            authority: Some("carts-api".into()),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let _: Response<Cart> = client.unary(&GET_CART, get("c")).await.unwrap();
    // The authority alone, in plain text.
    let plain = Host::new();
    let _plain = serve_plain(&plain, "10.0.0.7:9090", carts.clone());
    let client = Client::new(
        &setup(&plain),
        Settings {
            addr: "10.0.0.7:9090".into(),
            authority: Some("carts-api:443".into()),
            ..Settings::default()
        },
    )
    .unwrap();
    let _: Response<Cart> = client.unary(&GET_CART, get("c")).await.unwrap();
    assert_eq!(carts.authorities(), ["carts-api", "carts-api:443"]);
}

/// Mutual TLS: a server that verifies its clients' certificates accepts a
/// client whose config presents one from its CA, and refuses one that
/// presents none.
#[tokio::test(start_paused = true)]
async fn mutual_tls_with_a_client_certificate_the_server_verifies() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = serve_tls_config(
        &host,
        "carts:9090",
        ca.mtls_server_config(&ca.issue("carts")),
        carts.clone(),
    );
    let orders = ca.issue_client("orders");
    let client = Client::new(
        &setup(&host),
        Settings {
            tls: Some(Arc::new(orders.client_config(&ca))),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let _: Response<Cart> = client.unary(&GET_CART, get("c")).await.unwrap();
    let anonymous = Client::new(
        &setup(&host),
        Settings {
            max_attempts: 1,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let err = anonymous
        .unary::<_, Cart>(&GET_CART, get("c"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert_eq!(
        carts.arrivals(&GET_CART),
        1,
        "the anonymous call reached nothing"
    );
}

/// The client dials with a copy of the caller's rustls config, `h2` its
/// only ALPN protocol: the config given is the same and unchanged after.
#[tokio::test(start_paused = true)]
async fn the_callers_tls_config_is_unchanged_after_dialling() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let mut config = ca.client_config();
    config.alpn_protocols = vec![b"acme/1".to_vec()];
    let config = Arc::new(config);
    let client = Client::new(
        &setup(&host),
        Settings {
            tls: Some(config.clone()),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let _: Response<Cart> = client.unary(&GET_CART, get("c")).await.unwrap();
    let given = client.settings().tls.as_ref().unwrap();
    assert!(Arc::ptr_eq(given, &config));
    assert_eq!(config.alpn_protocols, [b"acme/1".to_vec()]);
}

/// A TLS server that does not select `h2` in ALPN (it offers none, or only
/// HTTP/1.1, when it answers with TLS's `no_application_protocol` alert)
/// is refused at the dial with an error that says so.
#[tokio::test(start_paused = true)]
async fn a_tls_server_that_does_not_select_h2_is_refused() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let mut config = ca.issue("carts").server_config();
    config.alpn_protocols = vec![];
    let _carts = serve_tls_config(&host, "carts:9090", config, carts.clone());
    let settings = Settings {
        max_attempts: 1,
        ..carts_settings(&ca)
    };
    let client = Client::new(&setup(&host), settings.clone()).unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(
        err.message()
            .contains("the server chose no ALPN protocol, where gRPC needs h2"),
        "{err:?}"
    );
    assert_eq!(carts.arrivals(&GET_CART), 0);

    // Only HTTP/1.1: rustls's server refuses the handshake with its alert,
    // written to the wire before the connection closes.
    let host = Host::new();
    let mut listener = host.listen("carts:9090");
    let mut config = ca.issue("carts").server_config();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let config = Arc::new(config);
    let _server = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        loop {
            let mut conn = listener.accept().await;
            let mut tls = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut buf = vec![0; 16 * 1024];
            loop {
                let n = conn.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                tls.read_tls(&mut &buf[..n]).unwrap();
                if tls.process_new_packets().is_err() {
                    let mut alert = Vec::new();
                    while tls.wants_write() {
                        tls.write_tls(&mut alert).unwrap();
                    }
                    conn.write_all(&alert).await.unwrap();
                    tokio::time::sleep(SECOND).await;
                    break;
                }
            }
        }
    });
    let client = Client::new(&setup(&host), settings).unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(
        err.message().contains("the server offers no h2 in ALPN"),
        "{err:?}"
    );
}

/// A plain-text client of a TLS server, and a TLS client of a plain-text
/// server: each error says what is probably wrong, and names
/// `Settings::tls`.
#[tokio::test(start_paused = true)]
async fn a_tls_mismatch_says_how_to_fix_it() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let plain = Client::new(
        &setup(&host),
        Settings {
            addr: "carts:9090".into(),
            max_attempts: 1,
            ..Settings::default()
        },
    )
    .unwrap();
    let err = plain
        .unary::<_, Cart>(&GET_CART, get("c"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(
        err.message()
            .contains("speaks TLS: then set Settings::tls to a TLS config"),
        "{err:?}"
    );

    let host = Host::new();
    let _carts = serve_plain(&host, "carts:9090", carts.clone());
    let tls = Client::new(
        &setup(&host),
        Settings {
            max_attempts: 1,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let err = tls.unary::<_, Cart>(&GET_CART, get("c")).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(
        err.message()
            .contains("the server probably speaks plain text: set Settings::tls to None"),
        "{err:?}"
    );
    assert_eq!(carts.arrivals(&GET_CART), 0);
}

/// A call polled outside a tokio runtime panics saying so (rather than
/// deep in a timer of tokio's): the requirement is under `# Panics`.
#[test]
fn a_call_outside_a_tokio_runtime_panics_saying_why() {
    let ca = Ca::new();
    let client = Client::new(&setup(&Host::new()), carts_settings(&ca)).unwrap();
    for stream in [false, true] {
        let client = client.clone();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let waker = futures_util::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            if stream {
                let call = client.server_streaming::<_, Cart>(&WATCH_CART, get("c"));
                let _ = std::pin::pin!(call).poll(&mut cx);
            } else {
                let call = client.unary::<_, Cart>(&GET_CART, get("c"));
                let _ = std::pin::pin!(call).poll(&mut cx);
            }
        }))
        .unwrap_err();
        let message = panicked
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panicked.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default();
        assert!(
            message.contains("a call was polled outside a tokio runtime"),
            "{message}"
        );
    }
}

/// The two TLS mistakes over real TCP on loopback, where a peer's close and
/// its alert race the client's reads: a plain-text client of a TLS server,
/// and a TLS client of a plain-text HTTP/2 server, each told to fix
/// `Settings::tls`. Bounded: every call ends within 5 s.
#[tokio::test]
async fn a_tls_mismatch_over_loopback_says_how_to_fix_it() {
    let ca = Ca::new();
    // A TLS server: its handshake fails on a plain-text client's bytes.
    let tls_server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tls_addr = tls_server.local_addr().unwrap().to_string();
    let acceptor = ca.issue("127.0.0.1").acceptor();
    let tls_task = tokio::spawn(async move {
        loop {
            let (conn, _) = tls_server.accept().await.unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _ = acceptor.accept(conn).await;
            });
        }
    });
    // A plain-text HTTP/2 server (h2's): a ClientHello is no preface.
    let plain_server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let plain_addr = plain_server.local_addr().unwrap().to_string();
    let plain_task = tokio::spawn(async move {
        loop {
            let (conn, _) = plain_server.accept().await.unwrap();
            tokio::spawn(async move {
                let handshake: Result<h2::server::Connection<_, bytes::Bytes>, _> =
                    h2::server::handshake(conn).await;
                if let Ok(mut h2) = handshake {
                    while let Some(Ok(_)) = h2.accept().await {}
                }
            });
        }
    });
    let cases = [
        (
            Settings {
                addr: tls_addr,
                ..Settings::default()
            },
            "speaks TLS: then set Settings::tls to a TLS config",
        ),
        (
            Settings {
                addr: plain_addr,
                ..carts_settings(&ca)
            },
            "the server probably speaks plain text: set Settings::tls to None",
        ),
    ];
    for (settings, says) in cases {
        let client = Client::new(
            &humus::Setup::new(),
            Settings {
                max_attempts: 1,
                ..settings
            },
        )
        .unwrap();
        let err = tokio::time::timeout(5 * SECOND, client.unary::<_, Cart>(&GET_CART, get("c")))
            .await
            .expect("the call ends")
            .unwrap_err();
        assert_eq!(err.code(), Code::Unavailable, "{err:?}");
        assert!(err.message().contains(says), "{err:?}");
    }
    tls_task.abort();
    plain_task.abort();
}
