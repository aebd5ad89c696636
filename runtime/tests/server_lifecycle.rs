//! The server half on the testing Host, both halves humus: a graceful
//! shutdown lets the unary calls in flight finish and ends the open
//! streams with UNAVAILABLE after its GOAWAY; `max_connection_age` moves a
//! client to new connections with no error; a call's deadline ends its
//! handler; health follows its monitors.

mod client_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use client_support::*;
use humus::Setup;
use humus::grpc::client::{self, Client};
use humus::grpc::server::{Health, ServeError, Server, Settings};
use humus::health::Monitor;
use humus::testing::{Ca, Host};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::{Code, Response, Status};

/// A humus server running in a task, until `stop`.
struct Serving {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServeError>>,
}

impl Serving {
    async fn start(server: Server) -> Serving {
        let mut server = server;
        server.bind().await.unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.serve(async move {
            let _ = stopped.await;
        }));
        Serving {
            stop: Some(stop),
            task,
        }
    }

    /// Starts the shutdown, without waiting for it.
    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    async fn stopped(mut self) {
        self.shutdown();
        (&mut self.task).await.unwrap().unwrap();
    }
}

fn tls_settings(ca: &Ca) -> Settings {
    Settings {
        addr: "carts:9090".into(),
        tls: Some(Arc::new(ca.issue("carts").server_config())),
        ..Settings::default()
    }
}

fn carts_server(host: &Host, settings: Settings, carts: &Carts) -> Server {
    Server::new(&setup(host), settings)
        .unwrap()
        .add_service(CartsService(carts.clone()))
}

fn client_of(host: &Host, ca: &Ca, max_attempts: u32) -> Client {
    Client::new(
        &setup(host),
        client::Settings {
            max_attempts,
            ..carts_settings(ca)
        },
    )
    .unwrap()
}

/// A stream of one update, then nothing until its caller goes away.
fn endless(id: String) -> impl futures_util::Stream<Item = Result<Cart, Status>> + Send {
    futures_util::stream::iter([Ok(cart(&id, 1))]).chain(futures_util::stream::pending())
}

use futures_util::StreamExt as _;

#[tokio::test(start_paused = true)]
async fn a_graceful_shutdown_finishes_unary_calls_and_ends_streams_after_its_goaway() {
    let (ca, host) = (Ca::new(), Host::new());
    let old = Carts::new();
    old.on_get_cart(|_, req| async move {
        tokio::time::sleep(2 * SECOND).await;
        Ok(Response::new(cart(&req.id, 7)))
    });
    old.on_watch_cart(|_, req| async move { Ok(Response::new(endless(req.id))) });
    let settings = Settings {
        shutdown_grace: 5 * SECOND,
        ..tls_settings(&ca)
    };
    let mut serving = Serving::start(carts_server(&host, settings.clone(), &old)).await;
    // One attempt: an error reaches the test rather than a retry.
    let client = client_of(&host, &ca, 1);

    let mut stream = client
        .server_streaming::<_, Cart>(&WATCH_CART, get("c-1"))
        .await
        .unwrap()
        .into_inner();
    assert!(stream.message().await.unwrap().is_some());
    let in_flight = tokio::spawn({
        let client = client.clone();
        async move { client.unary::<_, Cart>(&GET_CART, get("c-2")).await }
    });
    settle().await;
    assert_eq!(old.arrivals(&GET_CART), 1);

    serving.shutdown();
    settle().await;
    // It stopped accepting at once; a new instance takes the address.
    assert!(!host.is_listening("carts:9090"));
    let new = Carts::new();
    new.on_watch_cart(|_, req| async move { Ok(Response::new(endless(req.id))) });
    let next = Serving::start(carts_server(&host, settings, &new)).await;

    // The open stream ended with UNAVAILABLE, long before the grace.
    let err = tokio::time::timeout(SECOND, stream.message())
        .await
        .expect("the stream ends at the shutdown, not at its grace")
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    assert_eq!(
        err.message(),
        "the server is going away: call again on a new connection"
    );
    // Opened again at once, it goes over a new connection, to the new
    // instance: the old one's GOAWAY came first.
    let mut again = client
        .server_streaming::<_, Cart>(&WATCH_CART, get("c-1"))
        .await
        .unwrap()
        .into_inner();
    assert!(again.message().await.unwrap().is_some());
    assert_eq!(old.arrivals(&WATCH_CART), 1);
    assert_eq!(new.arrivals(&WATCH_CART), 1);

    // The unary call in flight at the GOAWAY finishes, with no error.
    let answer = in_flight.await.unwrap().unwrap();
    assert_eq!(answer.get_ref().items, 7);
    serving.stopped().await;
    assert_eq!(host.accepted("carts:9090"), 2);
    drop(again);
    next.stopped().await;
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_answers_a_call_outliving_the_grace_unavailable_and_closes_its_connection() {
    let (ca, host) = (Ca::new(), Host::new());
    let carts = Carts::new();
    carts.on_get_cart(|_, req| async move {
        tokio::time::sleep(60 * SECOND).await;
        Ok(Response::new(cart(&req.id, 1)))
    });
    let settings = Settings {
        shutdown_grace: 3 * SECOND,
        ..tls_settings(&ca)
    };
    let mut serving = Serving::start(carts_server(&host, settings, &carts)).await;
    let client = client_of(&host, &ca, 1);
    let call = tokio::spawn(async move { client.unary::<_, Cart>(&GET_CART, get("slow")).await });
    settle().await;
    let started = tokio::time::Instant::now();
    serving.shutdown();
    serving.stopped().await;
    let took = started.elapsed();
    assert!(
        took >= 3 * SECOND && took < 4 * SECOND,
        "the server stopped after {took:?}"
    );
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    assert_eq!(err.message(), "the server stopped before the call ended");
}

#[tokio::test(start_paused = true)]
async fn max_connection_age_moves_200_sequential_calls_to_new_connections_with_no_error() {
    let (ca, host) = (Ca::new(), Host::new());
    let carts = Carts::new();
    carts.on_get_cart(|_, req| async move {
        tokio::time::sleep(Duration::from_millis(40)).await;
        Ok(Response::new(cart(&req.id, 1)))
    });
    let settings = Settings {
        max_connection_age: Some(SECOND),
        max_connection_age_grace: Some(SECOND),
        ..tls_settings(&ca)
    };
    let serving = Serving::start(carts_server(&host, settings, &carts)).await;
    let client = client_of(&host, &ca, 1);
    for n in 0..200 {
        let answer = client
            .unary::<_, Cart>(&GET_CART, get(&format!("c-{n}")))
            .await;
        assert!(answer.is_ok(), "call {n}: {:?}", answer.err());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // 200 calls of 50 ms are 10 s: about ten ages of about a second.
    let accepted = host.accepted("carts:9090");
    assert!((7..=13).contains(&accepted), "{accepted} connections");
    assert_eq!(carts.arrivals(&GET_CART), 200, "no call was sent twice");
    serving.stopped().await;
}

#[tokio::test(start_paused = true)]
async fn a_stream_outliving_its_connections_age_ends_unavailable_after_the_grace() {
    let (ca, host) = (Ca::new(), Host::new());
    let carts = Carts::new();
    carts.on_watch_cart(|_, req| async move { Ok(Response::new(endless(req.id))) });
    let settings = Settings {
        max_connection_age: Some(10 * SECOND),
        max_connection_age_grace: Some(5 * SECOND),
        ..tls_settings(&ca)
    };
    let serving = Serving::start(carts_server(&host, settings, &carts)).await;
    let client = client_of(&host, &ca, 1);
    let started = tokio::time::Instant::now();
    let mut stream = client
        .server_streaming::<_, Cart>(&WATCH_CART, get("c-1"))
        .await
        .unwrap()
        .into_inner();
    assert!(stream.message().await.unwrap().is_some());
    let err = stream.message().await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    // The age's message, not a stopping server's.
    assert_eq!(
        err.message(),
        "the connection reached its maximum age: call again on a new connection"
    );
    let took = started.elapsed();
    // Its age is within 10 % of 10 s, then the grace of 5 s.
    assert!(
        took >= Duration::from_secs(14) && took <= Duration::from_secs(16),
        "the stream ended after {took:?}"
    );
    // A call after it goes over a new connection.
    assert!(client.unary::<_, Cart>(&GET_CART, get("c-2")).await.is_ok());
    assert_eq!(host.accepted("carts:9090"), 2);
    serving.stopped().await;
}

#[tokio::test(start_paused = true)]
async fn a_handler_ends_at_its_calls_deadline() {
    let (ca, host) = (Ca::new(), Host::new());
    let carts = Carts::new();
    let finished = Arc::new(AtomicBool::new(false));
    let done = finished.clone();
    carts.on_get_cart(move |_, req| {
        let done = done.clone();
        async move {
            tokio::time::sleep(10 * SECOND).await;
            done.store(true, Ordering::SeqCst);
            Ok(Response::new(cart(&req.id, 1)))
        }
    });
    let serving = Serving::start(carts_server(&host, tls_settings(&ca), &carts)).await;
    let client = client_of(&host, &ca, 1);
    let mut request = get("slow");
    request.set_timeout(2 * SECOND);
    let started = tokio::time::Instant::now();
    let err = client
        .unary::<_, Cart>(&GET_CART, request)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err}");
    assert!(started.elapsed() <= 2 * SECOND + Duration::from_millis(50));
    tokio::time::sleep(20 * SECOND).await;
    assert!(
        !finished.load(Ordering::SeqCst),
        "the handler was dropped at the deadline"
    );
    serving.stopped().await;
}

/// A plain tonic client over a bare HTTP/2 connection to `carts:9090` on
/// `host`: one that ends no call or stream at its deadline itself, so the
/// server's own answer shows.
async fn bare_grpc(
    host: &Host,
) -> tonic::client::Grpc<
    impl tonic::client::GrpcService<
        tonic::body::Body,
        ResponseBody = hyper::body::Incoming,
        Error = hyper::Error,
        Future = impl Send,
    > + Clone,
> {
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let io = humus::Host::dial(host, "carts:9090").await.unwrap();
    let (send, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
            .await
            .unwrap();
    tokio::spawn(connection);
    let svc = tower::service_fn(move |req: http::Request<tonic::body::Body>| {
        let mut send = send.clone();
        async move { send.send_request(req).await }
    });
    tonic::client::Grpc::with_origin(svc, "http://carts".parse().unwrap())
}

/// The server's own DEADLINE_EXCEEDED, which a caller that does not end
/// the call at its deadline itself gets (a plain tonic client over a bare
/// HTTP/2 connection here), names the caller's `grpc-timeout` as received.
#[tokio::test(start_paused = true)]
async fn a_handler_past_its_deadline_is_answered_with_the_callers_grpc_timeout() {
    use tonic_prost::ProstCodec;

    let host = Host::new();
    let carts = Carts::new();
    carts.on_get_cart(|_, _| std::future::pending::<Result<Response<Cart>, Status>>());
    let plain = Settings {
        addr: "carts:9090".into(),
        plaintext: true,
        ..Settings::default()
    };
    let serving = Serving::start(carts_server(&host, plain, &carts)).await;
    let mut grpc = bare_grpc(&host).await;
    let mut request = get("c-1");
    request
        .metadata_mut()
        .insert("grpc-timeout", "1500m".parse().unwrap());
    grpc.ready().await.unwrap();
    let started = tokio::time::Instant::now();
    let err = grpc
        .unary::<_, Cart, _>(
            request,
            GET_CART.full_name.parse().unwrap(),
            ProstCodec::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err}");
    assert_eq!(
        err.message(),
        "the deadline passed: the caller's timeout (grpc-timeout), 1.5s"
    );
    assert_eq!(started.elapsed(), Duration::from_millis(1500));
    serving.stopped().await;
}

#[tokio::test(start_paused = true)]
async fn health_turns_serving_at_the_check_after_its_monitor_turns_healthy() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;

    let (ca, host) = (Ca::new(), Host::new());
    let healthy = Arc::new(AtomicBool::new(false));
    let seen = healthy.clone();
    let monitor = Monitor::from_fn(move || {
        let seen = seen.clone();
        async move { seen.load(Ordering::SeqCst) }
    });
    let health = Health::new().readiness(monitor).interval(SECOND);
    let server = carts_server(&host, tls_settings(&ca), &Carts::new()).health(health);
    let serving = Serving::start(server).await;
    let client = client_of(&host, &ca, 1);

    static CHECK: humus::grpc::client::Method = humus::grpc::client::Method {
        full_name: "/grpc.health.v1.Health/Check",
        point: "grpc:grpc.health.v1.Health/Check",
        kind: humus::grpc::client::RpcKind::Unary,
        policy: humus::grpc::client::MethodPolicy::DEFAULT,
    };
    let status = |service: &'static str| {
        let client = client.clone();
        async move {
            let request = tonic::Request::new(HealthCheckRequest {
                service: service.to_owned(),
            });
            let response: Response<tonic_health::pb::HealthCheckResponse> =
                client.unary(&CHECK, request).await.unwrap();
            ServingStatus::try_from(response.get_ref().status).unwrap()
        }
    };
    settle().await;
    for service in ["", "readiness", "test.carts.v1.Carts"] {
        assert_eq!(
            status(service).await,
            ServingStatus::NotServing,
            "{service:?}"
        );
    }
    // Liveness depends on nothing outside the process.
    assert_eq!(status("liveness").await, ServingStatus::Serving);

    healthy.store(true, Ordering::SeqCst);
    tokio::time::sleep(SECOND).await;
    settle().await;
    for service in ["", "readiness", "test.carts.v1.Carts"] {
        assert_eq!(status(service).await, ServingStatus::Serving, "{service:?}");
    }
    serving.stopped().await;
}

#[tokio::test]
async fn bad_settings_name_every_field() {
    let err = Server::new(
        &Setup::new(),
        Settings {
            addr: "tcp://:1".into(),
            max_connection_age: Some(Duration::ZERO),
            plaintext: true,
            ..Settings::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        err.fields().collect::<Vec<_>>(),
        ["addr", "max_connection_age"]
    );
}

/// A host on the machine's network whose listens are new descriptors of
/// one listening socket (a supervisor's, handed from a server to the next).
#[derive(Debug)]
struct OneSocket(std::net::TcpListener);

impl humus::Host for OneSocket {
    fn dial<'a>(&'a self, addr: &'a str) -> humus::DialFuture<'a> {
        humus::OsHost.dial(addr)
    }

    fn read_file(&self, path: &std::path::Path) -> std::io::Result<Vec<u8>> {
        humus::OsHost.read_file(path)
    }

    fn listen<'a>(&'a self, _addr: &'a str) -> humus::ListenFuture<'a> {
        Box::pin(async move {
            let listener = tokio::net::TcpListener::from_std(self.0.try_clone()?)?;
            Ok(humus::Listener::tcp(listener))
        })
    }
}

/// A server that takes over the listening socket of one shutting down
/// (`Listener::tcp`) leaves no moment in which the address refuses a dial
/// (which would put the client in its connection backoff, failing calls
/// fast for a second): every call of a client through the handover
/// succeeds, the later ones served by the new server. Real loopback, one
/// attempt per call so that any error shows.
#[tokio::test]
async fn a_server_taking_over_the_socket_of_one_shutting_down_loses_no_call() {
    let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    socket.set_nonblocking(true).unwrap();
    let addr = socket.local_addr().unwrap().to_string();
    let setup = Setup::new().with_host(OneSocket(socket));
    let server = |carts: &Carts| {
        Server::new(
            &setup,
            Settings {
                addr: addr.clone(),
                plaintext: true,
                ..Settings::default()
            },
        )
        .unwrap()
        .add_service(CartsService(carts.clone()))
    };
    let (old, new) = (Carts::new(), Carts::new());
    let mut serving = Serving::start(server(&old)).await;
    let client = Client::new(
        &setup,
        client::Settings {
            addr: addr.clone(),
            max_attempts: 1,
            ..client::Settings::default()
        },
    )
    .unwrap();
    let call = |n: usize| {
        let client = client.clone();
        async move {
            let answer = client
                .unary::<_, Cart>(&GET_CART, get(&format!("c-{n}")))
                .await;
            assert!(answer.is_ok(), "call {n}: {:?}", answer.err());
        }
    };
    for n in 0..5 {
        call(n).await;
    }
    let next = Serving::start(server(&new)).await;
    serving.shutdown();
    for n in 5..40 {
        call(n).await;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    serving.stopped().await;
    for n in 40..45 {
        call(n).await;
    }
    assert_eq!(old.arrivals(&GET_CART) + new.arrivals(&GET_CART), 45);
    assert!(
        new.arrivals(&GET_CART) >= 5,
        "the new server serves the last calls"
    );
    next.stopped().await;
}

/// A host whose listener fails every accept with `error` (counting them)
/// `failures` times, then waits for ever.
#[derive(Debug)]
struct FailingAccepts {
    error: std::io::ErrorKind,
    raw: Option<i32>,
    failures: usize,
    accepts: Arc<std::sync::atomic::AtomicUsize>,
}

impl humus::Host for FailingAccepts {
    fn dial<'a>(&'a self, addr: &'a str) -> humus::DialFuture<'a> {
        humus::OsHost.dial(addr)
    }

    fn read_file(&self, path: &std::path::Path) -> std::io::Result<Vec<u8>> {
        humus::OsHost.read_file(path)
    }

    fn listen<'a>(&'a self, _addr: &'a str) -> humus::ListenFuture<'a> {
        let (error, raw, accepts) = (self.error, self.raw, self.accepts.clone());
        let failing = futures_util::stream::iter(0..self.failures).map(move |_| {
            accepts.fetch_add(1, Ordering::Relaxed);
            Err(match raw {
                Some(code) => std::io::Error::from_raw_os_error(code),
                None => std::io::Error::from(error),
            })
        });
        Box::pin(async move {
            Ok(humus::Listener {
                local_addr: None,
                incoming: Box::pin(failing.chain(futures_util::stream::pending())),
            })
        })
    }
}

/// Out of file descriptors, every accept fails at once until a connection
/// closes: the loop pauses 5 ms, doubling to 1 s, rather than spin a core
/// (accepts at 0, 5, 15, 35, ... 635 and 1275 ms, then 1 s later: 9 in
/// the first 2 s, where a loop with no pause takes all 1000), and still stops
/// at once. A connection's own failure (aborted before it was accepted)
/// pauses nothing.
#[tokio::test(start_paused = true)]
async fn accepts_out_of_descriptors_pause_and_double_and_a_stop_is_heard() {
    const EMFILE: i32 = 24;
    for (what, error, raw, within_2s) in [
        ("EMFILE", std::io::ErrorKind::Other, Some(EMFILE), 9),
        ("aborted", std::io::ErrorKind::ConnectionAborted, None, 1000),
    ] {
        let accepts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let host = FailingAccepts {
            error,
            raw,
            failures: 1000,
            accepts: accepts.clone(),
        };
        let mut server = Server::new(
            &Setup::new().with_host(host),
            Settings {
                addr: "127.0.0.1:1".into(),
                plaintext: true,
                ..Settings::default()
            },
        )
        .unwrap();
        server.bind().await.unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.serve(async move {
            let _ = stopped.await;
        }));
        tokio::time::sleep(Duration::from_millis(2_000)).await;
        assert_eq!(accepts.load(Ordering::Relaxed), within_2s, "{what}");
        let start = tokio::time::Instant::now();
        stop.send(()).unwrap();
        task.await.unwrap().unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO, "{what}: stopped at once");
    }
}

/// A server stream's messages are made as its body is polled, after the
/// handler returned: they inherit the RPC's deadline and context as the
/// handler does (a call made for each message is bounded by the caller's
/// deadline and carries its baggage), and the stream ends at the
/// deadline, `DEADLINE_EXCEEDED`, for a caller that does not end it itself
/// (a plain tonic client reads a stream past its `grpc-timeout`).
#[tokio::test(start_paused = true)]
async fn a_streams_messages_inherit_the_rpcs_deadline_and_context_and_it_ends_at_the_deadline() {
    use humus::grpc::deadline::Inherited;
    use opentelemetry::baggage::BaggageExt;
    use tonic_prost::ProstCodec;

    let host = Host::new();
    let carts = Carts::new();
    // Each message says how long is left of the inherited deadline (in
    // ms, -1 with none) and the caller's `tenant`, one every 400 ms.
    carts.on_watch_cart(|_, _| async move {
        let updates = futures_util::stream::unfold(0u32, |n| async move {
            tokio::time::sleep(Duration::from_millis(400)).await;
            let (left, tenant) = match Inherited::current() {
                Some(i) => (
                    i.deadline().map_or(-1, |d| {
                        d.saturating_duration_since(tokio::time::Instant::now())
                            .as_millis() as i64
                    }),
                    i.context()
                        .baggage()
                        .get("tenant")
                        .map_or("none".to_owned(), |v| v.to_string()),
                ),
                None => (-2, "no scope".to_owned()),
            };
            Some((Ok(cart(&format!("{left} {tenant}"), n)), n + 1))
        });
        Ok(Response::new(updates))
    });
    let plain = Settings {
        addr: "carts:9090".into(),
        plaintext: true,
        ..Settings::default()
    };
    // W3C propagators, which read the caller's baggage.
    let telemetry = humus::testing::Telemetry::new();
    let server = Server::new(&setup(&host).with_telemetry(telemetry.telemetry()), plain)
        .unwrap()
        .add_service(CartsService(carts.clone()));
    let serving = Serving::start(server).await;
    let mut grpc = bare_grpc(&host).await;
    let mut request = get("c-1");
    let metadata = request.metadata_mut();
    metadata.insert("grpc-timeout", "1000m".parse().unwrap());
    metadata.insert("baggage", "tenant=acme".parse().unwrap());
    grpc.ready().await.unwrap();
    let started = tokio::time::Instant::now();
    let mut stream = grpc
        .server_streaming::<_, Cart, _>(
            request,
            WATCH_CART.full_name.parse().unwrap(),
            ProstCodec::default(),
        )
        .await
        .unwrap()
        .into_inner();
    let mut seen = Vec::new();
    let err = loop {
        match stream.message().await {
            Ok(Some(update)) => seen.push(update.id),
            Ok(None) => panic!("the stream ended OK after {seen:?}"),
            Err(status) => break status,
        }
        assert!(seen.len() <= 5, "not ended at its deadline: {seen:?}");
    };
    assert_eq!(seen, ["600 acme", "200 acme"]);
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err}");
    assert_eq!(
        err.message(),
        "the deadline passed: the caller's timeout (grpc-timeout), 1s"
    );
    assert_eq!(started.elapsed(), Duration::from_millis(1000));
    serving.stopped().await;
}

/// A client that went silent (its node gone: it sends nothing and
/// answers no PING) is found by the server's keepalive: after
/// `keepalive_interval` with no frame from it, a PING, and
/// `keepalive_timeout` later, with no answer, its connection is closed.
/// Without keepalive, the connection stays.
#[tokio::test(start_paused = true)]
async fn a_silent_client_is_closed_after_the_keepalive_interval_and_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    for (keepalive_interval, closed_within) in [
        (Some(10 * SECOND), Some(14 * SECOND..16 * SECOND)),
        (None, None),
    ] {
        let host = Host::new();
        let settings = Settings {
            addr: "carts:9090".into(),
            keepalive_interval,
            keepalive_timeout: 5 * SECOND,
            plaintext: true,
            ..Settings::default()
        };
        let serving = Serving::start(carts_server(&host, settings, &Carts::new())).await;
        let mut io = humus::Host::dial(&host, "carts:9090").await.unwrap();
        // The client's preface and an empty SETTINGS frame, then nothing:
        // the server's frames (its SETTINGS, its PING) are read, never
        // answered.
        io.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
            .await
            .unwrap();
        let started = tokio::time::Instant::now();
        let mut buf = [0u8; 1024];
        let read_to_end = async {
            loop {
                match io.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        };
        let closed = tokio::time::timeout(60 * SECOND, read_to_end).await.is_ok();
        let took = started.elapsed();
        match &closed_within {
            Some(range) => assert!(
                closed && range.contains(&took),
                "{keepalive_interval:?}: closed {closed} after {took:?}"
            ),
            None => assert!(!closed, "no keepalive: closed after {took:?}"),
        }
        serving.stopped().await;
    }
}

/// A request whose metadata is larger than `max_header_list_size` (16 KiB
/// by default) is refused before any handler sees it, with HTTP 431,
/// which the client reports and does not retry; a server with a larger
/// setting takes it.
#[tokio::test(start_paused = true)]
async fn request_metadata_past_max_header_list_size_is_refused_with_431() {
    let token = "t".repeat(20 * 1024);
    for (max, served) in [(None, false), (Some(64 * 1024), true)] {
        let host = Host::new();
        let carts = Carts::new();
        let mut settings = Settings {
            addr: "carts:9090".into(),
            plaintext: true,
            ..Settings::default()
        };
        if let Some(max) = max {
            settings.max_header_list_size = max;
        }
        let serving = Serving::start(carts_server(&host, settings, &carts)).await;
        let client = Client::new(
            &setup(&host),
            client::Settings {
                addr: "carts:9090".into(),
                tls: None,
                ..client::Settings::default()
            },
        )
        .unwrap();
        let mut request = get("c-1");
        request
            .metadata_mut()
            .insert("authorization", token.parse().unwrap());
        let answer = client.unary::<_, Cart>(&GET_CART, request).await;
        if served {
            assert_eq!(answer.unwrap().into_inner().id, "c-1");
            assert_eq!(carts.arrivals(&GET_CART), 1);
        } else {
            let status = answer.unwrap_err();
            // gRPC's mapping of an HTTP status it does not list.
            assert_eq!(status.code(), Code::Unknown, "{status:?}");
            assert_eq!(
                status.message(),
                "the server answered HTTP 431 Request Header Fields Too Large: the request's metadata is larger than the server takes (its HTTP/2 max header list size); send less metadata, or raise the server's limit"
            );
            assert_eq!(carts.arrivals(&GET_CART), 0);
            // A request of the usual size goes through on the same client.
            let small = client.unary::<_, Cart>(&GET_CART, get("c-2")).await;
            assert_eq!(small.unwrap().into_inner().id, "c-2");
        }
        serving.stopped().await;
    }
}
