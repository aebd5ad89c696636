//! `Client::connected()`: the readiness latch (docs/client.md,
//! "Readiness"), on the testing Host over TLS on paused time.

mod client_support;

use std::time::Duration;

use client_support::*;
use humus::grpc::client::Client;
use humus::testing::{Ca, Host};
use tokio::time::timeout;
use tonic::Response;

#[tokio::test(start_paused = true)]
async fn the_first_check_dials_makes_no_rpc_and_the_first_call_reuses_its_connection() {
    let ca = Ca::new();
    let host = Host::new();
    let carts = Carts::new();
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let connected = client.connected();
    settle().await;
    assert_eq!(
        host.dials("carts:9090"),
        0,
        "nothing dials before the first check"
    );

    assert!(connected.check().await);
    assert_eq!(host.dials("carts:9090"), 1);
    assert!(carts.authorities().is_empty(), "the check made no RPC");

    let _: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    assert_eq!(
        host.dials("carts:9090"),
        1,
        "the call went over the check's connection"
    );
    assert_eq!(host.accepted("carts:9090"), 1);
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_dependency_fails_the_probe_by_its_timeout_until_it_is_up() {
    let ca = Ca::new();
    let host = Host::new();
    let carts = Carts::new();
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let connected = client.connected();
    // A probe with its own timeout: the check is still waiting when it ends.
    assert!(timeout(5 * SECOND, connected.check()).await.is_err());
    assert!(
        host.dials("carts:9090") >= 2,
        "the check dialled again while it waited"
    );

    // A check under way when the dependency comes up turns healthy.
    let waiting = {
        let connected = connected.clone();
        tokio::spawn(async move { connected.check().await })
    };
    tokio::time::sleep(3 * SECOND).await;
    let _carts = start_carts(&host, &ca, &carts);
    assert!(timeout(10 * SECOND, waiting).await.unwrap().unwrap());
    assert!(connected.check().await);
    assert_eq!(carts.arrivals(&GET_CART), 0);
}

#[tokio::test(start_paused = true)]
async fn a_server_the_client_does_not_trust_never_turns_it_healthy() {
    let ca = Ca::new();
    let other = Ca::new();
    let host = Host::new();
    let _carts = start_carts(&host, &ca, &Carts::new());
    let client = Client::new(&setup(&host), carts_settings(&other)).unwrap();
    assert!(
        timeout(30 * SECOND, client.connected().check())
            .await
            .is_err()
    );
}

#[tokio::test(start_paused = true)]
async fn it_latches_through_crashes_restarts_and_goaways() {
    let ca = Ca::new();
    let host = Host::new();
    let carts = Carts::new();
    let running = serve_tls(
        &host,
        &ca,
        "carts:9090",
        "carts",
        tonic::transport::Server::builder().max_connection_age(SECOND),
        carts.clone(),
    );
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let connected = client.connected();
    let _: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    assert!(
        connected.check().await,
        "a call's connection latches it too"
    );

    tokio::time::sleep(3 * SECOND).await; // the connection aged out: GOAWAY
    assert!(connected.check().await);
    running.stop().await;
    assert!(connected.check().await, "healthy through an outage");
    let running = start_carts(&host, &ca, &carts);
    running.crash().await;
    assert!(connected.check().await, "healthy through a crash");
    assert!(
        host.dials("carts:9090") <= 2,
        "checks dialled nothing once latched"
    );
}

#[tokio::test(start_paused = true)]
async fn every_monitor_of_a_client_shares_the_latch_and_another_clients_does_not() {
    let ca = Ca::new();
    let host = Host::new();
    let _carts = start_carts(&host, &ca, &Carts::new());
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let (a, b) = (client.connected(), client.connected());
    assert!(a.check().await);
    assert!(b.check().await);
    assert_eq!(host.dials("carts:9090"), 1);

    let other = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    assert!(other.connected().check().await);
    assert_eq!(
        host.dials("carts:9090"),
        2,
        "another client dials its own connection"
    );
}

#[tokio::test(start_paused = true)]
async fn after_stop_it_is_unhealthy() {
    let ca = Ca::new();
    let host = Host::new();
    let _carts = start_carts(&host, &ca, &Carts::new());
    let setup = setup(&host);
    let client = Client::new(&setup, carts_settings(&ca)).unwrap();
    let connected = client.connected();
    assert!(connected.check().await);
    setup.stop().await;
    assert!(!connected.check().await);
}

#[tokio::test(start_paused = true)]
async fn a_check_waiting_when_the_client_stops_ends_unhealthy() {
    let ca = Ca::new();
    let host = Host::new();
    let setup = setup(&host);
    let client = Client::new(&setup, carts_settings(&ca)).unwrap();
    let waiting = {
        let connected = client.connected();
        tokio::spawn(async move { connected.check().await })
    };
    tokio::time::sleep(Duration::from_millis(2500)).await;
    setup.stop().await;
    assert!(!waiting.await.unwrap());
}

/// The check's connection is the client's: when the server behind it
/// restarts, the next call, even one with a single attempt, goes over a
/// new connection; and a server that stops gracefully is not held up by it.
#[tokio::test(start_paused = true)]
async fn a_checked_connection_that_breaks_is_dialled_again_by_the_next_call() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let running = start_carts(&host, &ca, &carts);
    let client = Client::new(
        &setup(&host),
        humus::grpc::client::Settings {
            max_attempts: 1,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    assert!(client.connected().check().await);
    timeout(Duration::from_secs(1), running.stop())
        .await
        .expect("a graceful stop ends the idle connection at once");
    let _running = start_carts(&host, &ca, &carts);
    settle().await;
    let _: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    assert_eq!(host.dials("carts:9090"), 2);
}

/// A server that answers, but not in HTTP/2 (a proxy's HTTP/1.1 502 page on the
/// port): the dial fails, the call is Unavailable, and the client never
/// turns healthy.
#[tokio::test(start_paused = true)]
async fn a_server_that_does_not_speak_http2_is_not_connected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = Host::new();
    let mut listener = host.listen("carts:9090");
    tokio::spawn(async move {
        loop {
            let mut conn = listener.accept().await;
            tokio::spawn(async move {
                let mut request = [0u8; 64];
                let _ = conn.read(&mut request).await;
                let _ = conn
                    .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/html\r\ncontent-length: 24\r\n\r\n<html>Bad Gateway</html>")
                    .await;
                let _ = conn.read(&mut request).await;
            });
        }
    });
    let client = Client::new(
        &setup(&host),
        humus::grpc::client::Settings {
            addr: "carts:9090".into(),
            ..Default::default()
        },
    )
    .unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    // Told it answered in HTTP/1: a proxy without h2c, or a TLS port.
    assert!(
        err.message().contains(
            "the server answered in HTTP/1 (its first bytes are \"HTTP/1.1 \"), not HTTP/2"
        ),
        "{err:?}"
    );
    assert!(
        err.message()
            .contains("or a TLS port answering a plain-text request"),
        "{err:?}"
    );
    assert!(
        timeout(Duration::from_secs(5), client.connected().check())
            .await
            .is_err(),
        "never healthy"
    );
}

/// The checks share the connection's backoff (1 s, growing 1.6 times to
/// 120 s, jittered) rather than each starting over at 1 s: checked once a
/// second, each check cut after 1 s (as `Health` probes), a dependency
/// where nothing listens is dialled at most 10 times in 120 s.
#[tokio::test(start_paused = true)]
async fn checks_once_a_second_share_the_connections_backoff() {
    let (ca, host) = (Ca::new(), Host::new());
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let connected = client.connected();
    for _ in 0..120 {
        let started = tokio::time::Instant::now();
        assert!(timeout(SECOND, connected.check()).await.is_err());
        tokio::time::sleep_until(started + SECOND).await;
    }
    let dials = host.dials("carts:9090");
    assert!((2..=10).contains(&dials), "{dials} dials in 120 s");
}
