//! Failed dials and the connection backoff, as the breaker, the retries
//! and the retry budget see them (design: "What the client decides", "The
//! circuit breaker"; issue 32, item 4): a refused dial, and an attempt
//! that finds the connection backing off after one, are failed attempts
//! as any other `UNAVAILABLE`: retried within `max_attempts` and the retry
//! budget, and each a breaker Failure, so a dependency that is down opens
//! the breaker after five of them, as one that hangs does. On the testing
//! Host over TLS, on paused time, with default settings unless said
//! otherwise.

mod client_support;

use std::time::Duration;

use client_support::*;
use humus::grpc::client::{Client, NoRetry, Settings};
use humus::retry::Decision;
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

/// Whether `err` is the breaker's rejection.
fn rejected(err: &Status) -> bool {
    err.message()
        .starts_with("carts:9090: circuit: call rejected")
}

/// Nothing listens, one call every 100 ms, one attempt each: the first
/// call's dial is refused, the next four find the connection backing off
/// (they fail at once, without dialling, saying so and when the next dial
/// is due); each is one Failure, so the fifth opens the breaker (five
/// failures in a row, the default policy), and the sixth is rejected
/// without a dial.
#[tokio::test(start_paused = true)]
async fn five_failed_opens_open_the_breaker_and_the_sixth_call_is_rejected_without_a_dial() {
    let (ca, host, capture) = (Ca::new(), Host::new(), Telemetry::new());
    let settings = Settings {
        max_attempts: 1,
        ..carts_settings(&ca)
    };
    let client = Client::new(&setup_with(&host, &capture), settings).unwrap();
    for n in 0..5 {
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
        let transitions = Counts::of(&capture).transitions("open");
        assert_eq!(transitions, if n == 4 { 1.0 } else { 0.0 }, "call {n}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let err = get_cart(&client, "c").await.unwrap_err();
    assert!(rejected(&err), "{err:?}");
    assert_eq!(
        host.dials("carts:9090"),
        1,
        "no dial in the backoff, none rejected"
    );
    let counts = Counts::of(&capture);
    assert_eq!(
        counts.calls("failure"),
        5.0,
        "the refused dial and the backoff"
    );
    assert_eq!(counts.calls("rejected"), 1.0);
    assert_eq!(counts.calls("ignored"), 0.0);
    assert_eq!(counts.transitions("open"), 1.0);
}

/// The retries of a refused dial are bounded as any other's. A breaker
/// that never opens here, so that only the retries show: the first call's
/// dial is refused and its two retries find the connection backing off
/// (three attempts, `max_attempts`, then `exhausted`); each attempt
/// classified Retry takes a budget token (10, retries stop at half), so
/// the second call is retried once and then throttled, and the later calls
/// make one attempt each. Each attempt is one Failure. Every call ends
/// within the 1 s backoff: one dial in all.
#[tokio::test(start_paused = true)]
async fn retries_of_a_refused_dial_are_bounded_by_max_attempts_and_the_budget() {
    let (ca, host, capture) = (Ca::new(), Host::new(), Telemetry::new());
    let mut settings = carts_settings(&ca);
    settings.breaker_policy = humus::circuit::Policy::consecutive_or_half(1_000, 1_000, 1);
    let client = Client::new(&setup_with(&host, &capture), settings).unwrap();
    let start = Instant::now();
    let mut decisions = Vec::new();
    for _ in 0..5 {
        let err = get_cart(&client, "c").await.unwrap_err();
        assert_eq!(err.code(), Code::Unavailable, "{err:?}");
        assert!(err.message().starts_with("dial carts:9090: "), "{err:?}");
        decisions.push(NoRetry::from_status(&err).map(NoRetry::decision));
    }
    assert!(start.elapsed() < SECOND, "{:?}", start.elapsed());
    assert_eq!(host.dials("carts:9090"), 1);
    assert_eq!(
        decisions,
        [
            Some(Decision::Exhausted),
            Some(Decision::Throttled),
            Some(Decision::Throttled),
            Some(Decision::Throttled),
            Some(Decision::Throttled),
        ]
    );
    let counts = Counts::of(&capture);
    assert_eq!(counts.decisions("retried"), 3.0);
    assert_eq!(counts.decisions("exhausted"), 1.0);
    assert_eq!(counts.decisions("throttled"), 4.0);
    assert_eq!(counts.calls("failure"), 3.0 + 2.0 + 3.0, "one per attempt");
}

/// Calls waiting for the same dial all get its error, and each is a
/// failed attempt: one Failure each. The server here accepts, and closes
/// 100 ms later without its HTTP/2 settings (the client speaks plain
/// text): a failed dial too. One attempt per call: four failures, one
/// short of opening the breaker.
#[tokio::test(start_paused = true)]
async fn calls_waiting_for_one_failed_dial_each_count_a_failure() {
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
        max_attempts: 1,
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
    assert_eq!(host.dials("carts:9090"), 1);
    let counts = Counts::of(&capture);
    assert_eq!(counts.calls("failure"), 4.0);
    assert_eq!(counts.calls("ignored"), 0.0);
    assert_eq!(counts.transitions("open"), 0.0);
    server.abort();
}

/// With retries (the defaults), a dependency that refuses connections
/// opens the breaker within its first two calls: the first call's three
/// attempts and the second's two (the budget refuses its second retry)
/// are five failures in a row. Open,
/// it rejects calls without a dial; once `open_for` (10 s) has passed, its
/// half-open probe dials (the 1 s backoff is over by then), is refused,
/// and reopens it.
#[tokio::test(start_paused = true)]
async fn a_dependency_that_refuses_connections_opens_the_breaker_within_two_calls() {
    let (ca, host, capture) = (Ca::new(), Host::new(), Telemetry::new());
    let client = Client::new(&setup_with(&host, &capture), carts_settings(&ca)).unwrap();
    let first = get_cart(&client, "c").await.unwrap_err();
    assert!(first.message().starts_with("dial carts:9090"), "{first:?}");
    let second = get_cart(&client, "c").await.unwrap_err();
    assert!(second.message().contains("backing off"), "{second:?}");
    assert_eq!(
        NoRetry::from_status(&second).map(NoRetry::decision),
        Some(Decision::Throttled),
        "its first retry, the 5th failure, opened the breaker: {second:?}"
    );
    assert_eq!(Counts::of(&capture).transitions("open"), 1.0);
    let third = get_cart(&client, "c").await.unwrap_err();
    assert!(rejected(&third), "{third:?}");
    assert_eq!(host.dials("carts:9090"), 1);
    let counts = Counts::of(&capture);
    assert_eq!(counts.calls("failure"), 5.0);
    assert_eq!(counts.calls("rejected"), 1.0);

    // The probe, once open_for has passed: a real dial, refused.
    tokio::time::sleep(10 * SECOND).await;
    let err = get_cart(&client, "c").await.unwrap_err();
    assert!(err.message().starts_with("dial carts:9090"), "{err:?}");
    assert_eq!(host.dials("carts:9090"), 2);
    assert_eq!(Counts::of(&capture).transitions("open"), 2.0, "reopened");
}

/// A half-open probe that lands in the connection backoff fails at once,
/// without a dial, and is a failed probe: it reopens the breaker. The
/// first probe after the next dial is due dials, and closes it. Here the
/// breaker opens after one failure, for 500 ms, shorter than the 1 s
/// backoff, and closes after one good probe; one attempt per call.
#[tokio::test(start_paused = true)]
async fn a_probe_in_the_backoff_is_a_failed_probe_and_the_next_one_dials() {
    let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
    let mut settings = carts_settings(&ca);
    settings.max_attempts = 1;
    settings.breaker_policy = humus::circuit::Policy::consecutive_or_half(1, 20, 1);
    settings.breaker.open_for = Duration::from_millis(500);
    let client = Client::new(&setup_with(&host, &capture), settings).unwrap();
    let err = get_cart(&client, "c").await.unwrap_err();
    assert!(err.message().starts_with("dial carts:9090"), "{err:?}");
    let _carts = start_carts(&host, &ca, &carts);
    // Half-open at 500 ms; the next dial is due at 1 s.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let err = get_cart(&client, "c").await.unwrap_err();
    assert!(err.message().contains("backing off"), "{err:?}");
    assert_eq!(Counts::of(&capture).transitions("open"), 2.0, "reopened");
    // Open until 1.1 s: rejected without a dial.
    let err = get_cart(&client, "c").await.unwrap_err();
    assert!(rejected(&err), "{err:?}");
    tokio::time::sleep(Duration::from_millis(550)).await;
    let cart = get_cart(&client, "c").await.unwrap();
    assert_eq!(cart.get_ref().id, "c");
    assert_eq!(host.dials("carts:9090"), 2);
    let counts = Counts::of(&capture);
    assert_eq!(counts.transitions("closed"), 1.0);
    assert_eq!(counts.calls("failure"), 2.0);
    assert_eq!(counts.calls("success"), 1.0);
}

/// A plain restart on the same address: the old server stops gracefully
/// (a GOAWAY), the new one listens 300 ms later, while 4 callers call
/// every 20 ms. The resends after the GOAWAY dial, and the dial is
/// refused; the calls in its backoff fail at once, and those failures
/// open the breaker. The calls then fail fast with the rejection for
/// `open_for` (10 s), and succeed again once its probes have closed it.
/// (A restart that must not cost `open_for` hands the listening socket
/// over, as the walkthrough's rollout does.)
#[tokio::test(start_paused = true)]
async fn a_restart_that_refuses_a_dial_opens_the_breaker_for_open_for() {
    let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
    let old = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup_with(&host, &capture), carts_settings(&ca)).unwrap();
    get_cart(&client, "warm").await.unwrap();
    let start = Instant::now();
    let callers = (0..4).map(|w| {
        let client = client.clone();
        tokio::spawn(async move {
            let mut answers = Vec::new();
            while start.elapsed() < 13 * SECOND {
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
    assert!(
        failed
            .iter()
            .any(|(_, a)| a.as_ref().unwrap_err().starts_with("dial carts:9090")),
        "the restart refused a dial"
    );
    for (at, answer) in &failed {
        let err = answer.as_ref().unwrap_err();
        assert!(
            err.starts_with("dial carts:9090")
                || err.starts_with("carts:9090: circuit: call rejected"),
            "{at:?}: {err}"
        );
        assert!(
            *at >= stopped && *at < stopped + 11 * SECOND,
            "{at:?}: {err}"
        );
    }
    let last_failed = failed.last().map(|(at, _)| *at).unwrap();
    assert!(
        answers
            .iter()
            .filter(|(at, _)| *at > last_failed + Duration::from_millis(100))
            .all(|(_, a)| a.is_ok()),
        "every call after the probes succeeded"
    );
    assert!(
        answers.iter().any(|(at, a)| *at > last_failed && a.is_ok()),
        "calls succeeded again after open_for"
    );
    let counts = Counts::of(&capture);
    assert_eq!(counts.transitions("open"), 1.0, "opened once");
    assert_eq!(counts.transitions("closed"), 1.0, "closed by its probes");
    assert!(counts.calls("rejected") >= 1.0);
}

/// On loopback and in real time: a port of 127.0.0.1 that refuses
/// connections, a call every 100 ms with a breaker that never opens, and
/// a server listening on that port from 300 ms on. The first call's dial
/// is refused; the attempts until the next dial is due (1 s after it)
/// fail at once in the backoff; the first call after it succeeds.
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
            breaker_policy: humus::circuit::Policy::consecutive_or_half(1_000, 1_000, 1),
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
    for message in &failed {
        assert!(message.starts_with(&format!("dial {addr}: ")), "{failed:?}");
    }
    for message in &failed[1..] {
        assert!(message.contains("backing off"), "{failed:?}");
    }
    if let Some(server) = serving {
        server.abort();
    }
}
