//! Failed dials and the connection backoff, as the breaker, the retries
//! and the retry budget see them (design: "What the client decides", "The
//! circuit breaker"): a failed dial counts once, as a Failure, however
//! many attempts waited for it, and is not retried within the call; an
//! attempt that fails at once in the backoff counts nothing, is not
//! retried, and takes no retry-budget token. On the testing Host over TLS,
//! on paused time, with default settings unless said otherwise.

mod client_support;

use std::time::Duration;

use client_support::*;
use humus::grpc::client::{Client, Settings};
use humus::telemetry::names::*;
use humus::testing::{Ca, Host, MetricPoint, Telemetry};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;
use tonic::{Code, Response, Status};

fn setup_with(host: &Host, capture: &Telemetry) -> humus::Setup {
    setup(host).with_telemetry(capture.telemetry())
}

/// The value of the point of `name` with `attributes`; 0 if none.
fn value(points: &[MetricPoint], name: &str, attributes: &[(&str, &str)]) -> f64 {
    points
        .iter()
        .filter(|p| p.name == name && p.has(attributes))
        .map(|p| p.value.as_f64())
        .sum()
}

/// The client's own counts: `humus.circuit.calls` by outcome and
/// `humus.retry.decisions` by decision.
struct Counts(Vec<MetricPoint>);

impl Counts {
    fn of(capture: &Telemetry) -> Counts {
        Counts(capture.metrics(CLIENT_SCOPE))
    }
    fn calls(&self, outcome: &str) -> f64 {
        value(
            &self.0,
            HUMUS_CIRCUIT_CALLS,
            &[(HUMUS_CIRCUIT_OUTCOME, outcome)],
        )
    }
    fn decisions(&self, decision: &str) -> f64 {
        value(
            &self.0,
            HUMUS_RETRY_DECISIONS,
            &[(HUMUS_RETRY_DECISION, decision)],
        )
    }
    fn transitions(&self, to: &str) -> f64 {
        value(
            &self.0,
            HUMUS_CIRCUIT_TRANSITIONS,
            &[(HUMUS_CIRCUIT_STATE, to)],
        )
    }
}

async fn get_cart(client: &Client, id: &str) -> Result<Response<Cart>, Status> {
    client.unary::<_, Cart>(&GET_CART, get(id)).await
}

/// The user's report, on paused time: nothing listens, one call every
/// 100 ms with default settings. The first call's dial is refused: one
/// Failure, and no retry (its retry would land in the backoff). The calls
/// made during the backoff fail at once, with the dial's error and when
/// the next dial is due, make no dial, are not retried and count nothing:
/// the breaker stays closed, and the retry budget keeps every token (a
/// call that needs two retries later gets them).
#[tokio::test(start_paused = true)]
async fn one_refused_dial_is_one_failure_and_calls_in_its_backoff_count_nothing() {
    let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
    let client = Client::new(&setup_with(&host, &capture), carts_settings(&ca)).unwrap();
    let start = Instant::now();
    for n in 0..9 {
        let called = Instant::now();
        let err = get_cart(&client, "c").await.unwrap_err();
        assert_eq!(called.elapsed(), Duration::ZERO, "call {n} waited");
        assert_eq!(err.code(), Code::Unavailable, "{err:?}");
        assert!(
            err.message()
                .starts_with("dial carts:9090: connection refused: nothing listens on carts:9090"),
            "{err:?}"
        );
        if n > 0 {
            let due = 1000 - 100 * n;
            assert!(
                err.message().ends_with(&format!(
                    "(the connection is backing off: the next dial is due in {due}ms)"
                )),
                "call {n}: {err:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(start.elapsed(), Duration::from_millis(900));
    assert_eq!(host.dials("carts:9090"), 1, "no dial during the backoff");
    let counts = Counts::of(&capture);
    assert_eq!(counts.calls("failure"), 1.0, "the refused dial, once");
    assert_eq!(counts.calls("ignored"), 8.0, "the calls in the backoff");
    assert_eq!(counts.decisions("stopped"), 9.0);
    for not in ["retried", "throttled", "exhausted", "expired"] {
        assert_eq!(counts.decisions(not), 0.0, "{not}");
    }
    assert_eq!(counts.transitions("open"), 0.0, "the breaker stayed closed");

    // Carts comes up busy: its first two answers are UNAVAILABLE. The
    // next dial is due 1 s after the first: the call then dials, and the
    // budget, untouched, allows both of its retries.
    carts.on_get_cart_unavailable_until(3);
    let _carts = start_carts(&host, &ca, &carts);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cart = get_cart(&client, "c").await.unwrap();
    assert_eq!(cart.get_ref().id, "c");
    assert_eq!(host.dials("carts:9090"), 2);
    let counts = Counts::of(&capture);
    assert_eq!(counts.decisions("retried"), 2.0);
    assert_eq!(counts.decisions("succeeded"), 1.0);
}

/// Calls waiting for the same dial all get its error; the dial counts
/// once (the first attempt to be classified counts Failure, the others
/// nothing), and none of them is retried. The server here accepts, and
/// closes 100 ms later without its HTTP/2 settings (the client speaks
/// plain text): a failed dial too.
#[tokio::test(start_paused = true)]
async fn calls_waiting_for_one_failed_dial_count_one_failure() {
    let (host, capture) = (Host::new(), Telemetry::new());
    let mut listener = host.listen("carts:9090");
    let server = tokio::spawn(async move {
        loop {
            let mut conn = listener.accept().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            let _ = conn.shutdown().await;
            drop(conn);
        }
    });
    let plain = Settings {
        addr: "carts:9090".into(),
        ..Settings::default()
    };
    let client = Client::new(&setup_with(&host, &capture), plain).unwrap();
    let calls = (0..4).map(|n| {
        let client = client.clone();
        tokio::spawn(async move { get_cart(&client, &format!("c-{n}")).await })
    });
    let start = Instant::now();
    for call in futures_util::future::join_all(calls).await {
        let err = call.unwrap().unwrap_err();
        assert_eq!(err.code(), Code::Unavailable, "{err:?}");
        assert!(
            err.message().starts_with(
                "dial carts:9090: the connection closed before the server sent anything"
            ),
            "the dial's error: {err:?}"
        );
        assert!(!err.message().contains("backing off"), "{err:?}");
    }
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    assert_eq!(host.dials("carts:9090"), 1, "one dial, no retry");
    let counts = Counts::of(&capture);
    assert_eq!(counts.calls("failure"), 1.0);
    assert_eq!(counts.calls("ignored"), 3.0);
    assert_eq!(counts.decisions("stopped"), 4.0);
    assert_eq!(counts.decisions("retried"), 0.0);
    server.abort();
}

/// A dependency that stays down still opens the breaker: each failed dial
/// is one Failure, so with the default policy (5 failures in a row) the
/// 5th failed dial opens it. With the default connection backoff (1 s,
/// then 1.6 times longer, ±20 %), and a call every 100 ms, that dial is
/// made 7.6 to 10.9 s after the first. Open, it rejects calls without a
/// dial; once `open_for` (10 s) has passed, its half-open probe dials (the
/// backoff after the 5th dial, 6.6 s ± 20 %, is over by then), is
/// refused, and reopens it.
#[tokio::test(start_paused = true)]
async fn a_dependency_down_long_enough_opens_the_breaker_at_the_fifth_failed_dial() {
    let (ca, host, capture) = (Ca::new(), Host::new(), Telemetry::new());
    let client = Client::new(&setup_with(&host, &capture), carts_settings(&ca)).unwrap();
    let start = Instant::now();
    let mut opened = None;
    for _ in 0..200 {
        let err = get_cart(&client, "c").await.unwrap_err();
        if err
            .message()
            .starts_with("carts:9090: circuit: call rejected")
        {
            opened = Some(start.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let opened = opened.expect("the breaker opened");
    assert_eq!(host.dials("carts:9090"), 5, "opened at {opened:?}");
    assert!(
        opened >= Duration::from_millis(7_600) && opened <= Duration::from_millis(11_000),
        "{opened:?}"
    );
    let counts = Counts::of(&capture);
    assert_eq!(counts.calls("failure"), 5.0);
    assert_eq!(counts.transitions("open"), 1.0);
    assert_eq!(counts.decisions("retried"), 0.0);

    // The probe, once open_for has passed: a real dial, refused.
    tokio::time::sleep(10 * SECOND).await;
    let err = get_cart(&client, "c").await.unwrap_err();
    assert!(err.message().starts_with("dial carts:9090"), "{err:?}");
    assert_eq!(host.dials("carts:9090"), 6);
    assert_eq!(Counts::of(&capture).transitions("open"), 2.0, "reopened");
}

/// A half-open probe that lands in the connection backoff makes no dial
/// and counts nothing: it frees its slot, the breaker stays half-open, and
/// the next call probes. Here the breaker opens after one failure, for
/// 500 ms, shorter than the 1 s backoff: the probes until the next dial is
/// due fail at once, and the first probe after it dials and closes the
/// breaker.
#[tokio::test(start_paused = true)]
async fn a_probe_in_the_backoff_frees_its_slot_for_a_real_probe() {
    let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
    let mut settings = carts_settings(&ca);
    settings.breaker_policy = humus::circuit::Policy::consecutive_or_half(1, 20, 1);
    settings.breaker.open_for = Duration::from_millis(500);
    let client = Client::new(&setup_with(&host, &capture), settings).unwrap();
    let err = get_cart(&client, "c").await.unwrap_err();
    assert!(err.message().starts_with("dial carts:9090"), "{err:?}");
    let _carts = start_carts(&host, &ca, &carts);
    tokio::time::sleep(Duration::from_millis(600)).await;
    // Half-open; the next dial is due in 400 ms.
    let mut in_backoff = 0;
    let cart = loop {
        match get_cart(&client, "c").await {
            Ok(cart) => break cart,
            Err(err) => {
                assert!(err.message().contains("backing off"), "{err:?}");
                in_backoff += 1;
                assert!(in_backoff < 100);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(cart.get_ref().id, "c");
    assert_eq!(in_backoff, 8, "probes at 600 to 950 ms");
    assert_eq!(host.dials("carts:9090"), 2);
    let counts = Counts::of(&capture);
    assert_eq!(counts.transitions("open"), 1.0, "never reopened");
    assert_eq!(counts.transitions("closed"), 1.0);
    assert_eq!(counts.calls("ignored"), 8.0);
}

/// A plain restart on the same address: the old server stops gracefully
/// (a GOAWAY), the new one listens 300 ms later, while 4 callers call
/// every 20 ms. The resends after the GOAWAY dial, and the dial is
/// refused: one Failure, and the calls of one backoff fail at once. The
/// calls succeed again as soon as the next dial is due (1 s after the
/// refused one), not after the breaker's `open_for`: it never opens.
#[tokio::test(start_paused = true)]
async fn a_restart_on_the_same_address_costs_one_backoff_not_open_for() {
    let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
    let old = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup_with(&host, &capture), carts_settings(&ca)).unwrap();
    get_cart(&client, "warm").await.unwrap();
    let start = Instant::now();
    let callers = (0..4).map(|w| {
        let client = client.clone();
        tokio::spawn(async move {
            let mut answers = Vec::new();
            while start.elapsed() < 3 * SECOND {
                let called = start.elapsed();
                let answer = get_cart(&client, &format!("c-{w}")).await;
                answers.push((
                    called,
                    answer.map(|_| ()).map_err(|e| e.message().to_owned()),
                ));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            answers
        })
    });
    let callers = futures_util::future::join_all(callers);
    let restart = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        old.stop().await;
        let stopped = start.elapsed();
        tokio::time::sleep(Duration::from_millis(300)).await;
        (stopped, start_carts(&host, &ca, &carts))
    };
    let (answers, (stopped, _new)) = tokio::join!(callers, restart);
    let answers: Vec<_> = answers.into_iter().flat_map(Result::unwrap).collect();
    let failed: Vec<_> = answers.iter().filter(|(_, a)| a.is_err()).collect();
    assert!(!failed.is_empty(), "the restart refused a dial");
    for (at, answer) in &failed {
        let err = answer.as_ref().unwrap_err();
        assert!(err.starts_with("dial carts:9090"), "{at:?}: {err}");
        // Refused by then, and the next dial is due 1 s after the refused
        // one, made before the new server listened.
        assert!(
            *at >= stopped && *at < stopped + Duration::from_millis(1_300),
            "{at:?}: {err}"
        );
    }
    let last_failed = failed.last().unwrap().0;
    assert!(
        answers
            .iter()
            .filter(|(at, _)| *at > last_failed)
            .all(|(_, a)| a.is_ok()),
        "every call after the backoff succeeded"
    );
    assert!(
        answers
            .iter()
            .any(|(at, a)| *at < stopped + 2 * SECOND && *at > last_failed && a.is_ok()),
        "calls succeeded again within the second after the refused dial"
    );
    let counts = Counts::of(&capture);
    assert_eq!(counts.calls("failure"), 1.0, "the refused dial");
    assert_eq!(counts.transitions("open"), 0.0, "the breaker stayed closed");
    assert_eq!(counts.decisions("retried"), 0.0);
}

/// The report again, on loopback and in real time: a port of 127.0.0.1
/// that refuses connections, a call every 100 ms with default settings,
/// and a server listening on that port from 300 ms on. The first call's
/// dial is refused; the calls until the next dial is due (1 s after it)
/// fail at once in the backoff; the first call after it succeeds, well
/// before the breaker's `open_for` (10 s) could have passed: it never
/// opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_time_a_refused_port_is_reached_at_the_next_dial() {
    // Bound and closed at once: the port refuses until the server binds it.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let client = Client::new(
        &humus::Setup::new(),
        Settings {
            addr: addr.to_string(),
            ..Settings::default()
        },
    )
    .unwrap();
    let start = Instant::now();
    let mut answers = Vec::new();
    let mut serving = None;
    let bounded = tokio::time::timeout(Duration::from_secs(8), async {
        loop {
            if serving.is_none() && start.elapsed() >= Duration::from_millis(300) {
                let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
                let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
                serving = Some(tokio::spawn(
                    tonic::transport::Server::builder()
                        .add_service(CartsService(Carts::new()))
                        .serve_with_incoming(incoming),
                ));
            }
            let answer = get_cart(&client, "c").await;
            let ok = answer.is_ok();
            answers.push((start.elapsed(), answer));
            if ok {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    bounded.await.expect("reached within 8 s");
    let (reached, _) = answers.last().unwrap();
    assert!(*reached < Duration::from_secs(5), "{reached:?}");
    let failed: Vec<String> = answers
        .iter()
        .filter_map(|(_, a)| a.as_ref().err().map(|e| e.message().to_owned()))
        .collect();
    assert!(!failed.is_empty());
    assert!(
        failed[0].starts_with(&format!("dial {addr}: ")),
        "{failed:?}"
    );
    for message in &failed[1..] {
        assert!(message.contains("backing off"), "{failed:?}");
    }
    if let Some(server) = serving {
        server.abort();
    }
}
