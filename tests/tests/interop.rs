//! Interop: the typed humus client of `grpc.testing.TestService` (generated
//! by humus-build from Debian's `grpc-proto`, see `build.rs`) against an
//! independent gRPC implementation, gRPC's C core through Python's grpcio
//! (`tests/interop/server.py`), over real loopback TCP, plain and over TLS.
//!
//! Each test picks the server's behaviour per request with the metadata
//! `x-test-id` and `x-script` (see the server's docstring) and reads what the
//! server saw from its trailer: `x-attempt`, `x-gap-ms`, `x-peer`.
//!
//! These tests run on real time (an external process): they assert lower
//! bounds and counts only, never an upper bound on wall-clock time.
//!
//! They need Python's `grpcio` and `grpcio-tools`. Without them the tests
//! skip with a message, unless `HUMUS_INTEROP=1` is set, which makes a
//! missing grpcio a failure (`.ci/run` sets it).
//!
//! Source: issue 9, "Interop"; runtime/docs/client.md.

// Needs Debian's grpc-proto; without it, tests/grpc_proto_missing.rs says so.
#![cfg(grpc_proto)]

use std::error::Error as _;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use humus::Setup;
use humus::circuit::Rejected;
use humus::grpc::client::{Client, Settings};
use humus::testing::{Ca, Issued};
use humus_tests::grpc_proto::grpc::testing::test_service_humus::TestServiceProtoClient;
use humus_tests::grpc_proto::grpc::testing::{
    Empty, Payload, ResponseParameters, SimpleRequest, StreamingInputCallRequest,
    StreamingOutputCallRequest,
};
use tonic::metadata::MetadataMap;
use tonic::{Code, Request, Status};

/// The grpcio server script.
const SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/server.py");

/// How to run these tests.
const HOW: &str = "pip install grpcio grpcio-tools, then \
     HUMUS_INTEROP=1 cargo test -p humus-tests --test interop";

/// Whether the interop tests run: Python's grpcio is importable. Without
/// it, a test skips with a message, or fails if `HUMUS_INTEROP=1` is set.
fn enabled(test: &str) -> bool {
    static GRPCIO: OnceLock<Result<(), String>> = OnceLock::new();
    let grpcio = GRPCIO.get_or_init(|| {
        match Command::new("python3")
            .args(["-c", "import grpc, grpc_tools"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
        {
            Ok(out) if out.status.success() => Ok(()),
            Ok(out) => Err(String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("import failed")
                .to_owned()),
            Err(err) => Err(format!("python3: {err}")),
        }
    });
    let required = std::env::var("HUMUS_INTEROP").is_ok_and(|v| v == "1");
    match grpcio {
        Ok(()) => true,
        Err(why) if required => {
            panic!("HUMUS_INTEROP=1, but Python's grpcio is missing ({why}): {HOW}")
        }
        Err(why) => {
            humus_tests::skipped(
                test,
                format_args!("Python's grpcio is missing ({why}); {HOW}"),
            );
            false
        }
    }
}

/// Skips the test unless Python's grpcio is there (see [`enabled`]).
macro_rules! needs_grpcio {
    ($test:literal) => {
        if !enabled($test) {
            return;
        }
    };
}

/// How to start a [`Server`].
#[derive(Default)]
struct Options {
    /// The port to listen on; 0 picks a free one.
    port: u16,
    /// Serve TLS with this certificate.
    tls: Option<Issued>,
    /// `grpc.max_connection_age_ms`.
    max_connection_age_ms: Option<u32>,
}

/// A running grpcio server: a child process, killed when dropped. Its
/// standard input is a pipe, so it exits with the test process too.
struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
    /// Held open: the server's stdout.
    _stdout: BufReader<ChildStdout>,
}

impl Server {
    fn start(options: Options) -> Server {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "humus-interop-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create the server's temp dir");
        let log = dir.join("stderr.log");
        let mut command = Command::new("python3");
        command
            .arg(SERVER)
            .args(["--port", &options.port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("create the server's log"));
        if let Some(issued) = &options.tls {
            // The PEM holds the chain, then the key.
            let pem = issued.pem();
            let at = pem
                .find("-----BEGIN PRIVATE KEY-----")
                .expect("the PEM holds a key");
            let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
            std::fs::write(&cert, &pem[..at]).expect("write the certificate");
            std::fs::write(&key, &pem[at..]).expect("write the key");
            command
                .arg("--tls-cert")
                .arg(cert)
                .arg("--tls-key")
                .arg(key);
        }
        if let Some(ms) = options.max_connection_age_ms {
            command.args(["--max-connection-age-ms", &ms.to_string()]);
        }
        let mut child = command.spawn().expect("start python3");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
        let mut line = String::new();
        let read = stdout.read_line(&mut line);
        let port = line
            .strip_prefix("LISTENING ")
            .and_then(|p| p.trim().parse().ok());
        let Some(port) = port else {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("the grpcio server did not start ({read:?}, {line:?}):\n{log}");
        };
        Server {
            child,
            port,
            dir,
            _stdout: stdout,
        }
    }

    /// The plain-text server shared by the tests that need nothing of
    /// their own; each keeps to its own test ids.
    fn shared() -> &'static Server {
        static SHARED: OnceLock<Server> = OnceLock::new();
        SHARED.get_or_init(|| Server::start(Options::default()))
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Settings for `server`, with a short backoff so retries are quick.
fn settings(server: &Server) -> Settings {
    Settings {
        addr: server.addr(),
        backoff_base: Duration::from_millis(10),
        backoff_max: Duration::from_secs(1),
        ..Settings::default()
    }
}

fn client(settings: Settings) -> TestServiceProtoClient {
    TestServiceProtoClient::new(Client::new(&Setup::new(), settings).expect("valid settings"))
}

/// `message` with the test id and the script of the server's answers.
fn scripted<T>(message: T, id: &str, script: &str) -> Request<T> {
    let mut request = Request::new(message);
    let metadata = request.metadata_mut();
    metadata.insert("x-test-id", id.parse().expect("ASCII test id"));
    metadata.insert("x-script", script.parse().expect("ASCII script"));
    request
}

/// A trailer entry the server always sends.
fn trailer(metadata: &MetadataMap, key: &str) -> String {
    metadata
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in {metadata:?}"))
        .to_str()
        .expect("ASCII trailer")
        .to_owned()
}

/// The attempt number the server gave the answer (`x-attempt`).
fn attempt(metadata: &MetadataMap) -> u32 {
    trailer(metadata, "x-attempt").parse().expect("a number")
}

/// The status's breaker rejection, if the breaker rejected the call.
fn rejection(status: &Status) -> Option<&Rejected> {
    let mut source = status.source();
    while let Some(err) = source {
        if let Some(rejected) = err.downcast_ref::<Rejected>() {
            return Some(rejected);
        }
        source = err.source();
    }
    None
}

#[tokio::test]
async fn a_plain_call_and_each_rpc_kind() {
    needs_grpcio!("a_plain_call_and_each_rpc_kind");
    let server = Server::shared();
    let test = client(settings(server));

    let empty = test
        .empty_call(scripted(Empty {}, "kinds-empty", "OK"))
        .await
        .expect("EmptyCall");
    assert_eq!(attempt(empty.metadata()), 1);

    let unary = test
        .unary_call(scripted(
            SimpleRequest {
                response_size: 7,
                fill_username: true,
                ..SimpleRequest::default()
            },
            "kinds-unary",
            "OK",
        ))
        .await
        .expect("UnaryCall");
    assert_eq!(attempt(unary.metadata()), 1);
    let unary = unary.into_inner();
    assert_eq!(unary.username, "interop");
    assert_eq!(unary.payload.expect("a payload").body.len(), 7);

    let sizes = [1, 2, 3];
    let parameters = || {
        sizes
            .iter()
            .map(|&size| ResponseParameters {
                size,
                ..ResponseParameters::default()
            })
            .collect::<Vec<_>>()
    };
    let mut out = test
        .streaming_output_call(scripted(
            StreamingOutputCallRequest {
                response_parameters: parameters(),
                ..StreamingOutputCallRequest::default()
            },
            "kinds-server-streaming",
            "OK",
        ))
        .await
        .expect("StreamingOutputCall opens")
        .into_inner();
    let mut got = Vec::new();
    while let Some(message) = out.message().await.expect("StreamingOutputCall") {
        got.push(message.payload.expect("a payload").body.len());
    }
    assert_eq!(got, [1, 2, 3]);
    let trailers = out.trailers().await.expect("trailers").expect("a trailer");
    assert_eq!(attempt(&trailers), 1);

    let uploads: Vec<_> = [5, 6, 7]
        .into_iter()
        .map(|n| StreamingInputCallRequest {
            payload: Some(Payload {
                body: vec![0; n],
                ..Payload::default()
            }),
            ..StreamingInputCallRequest::default()
        })
        .collect();
    let sum = test
        .streaming_input_call(scripted(
            tokio_stream::iter(uploads),
            "kinds-client-streaming",
            "OK",
        ))
        .await
        .expect("StreamingInputCall");
    assert_eq!(sum.into_inner().aggregated_payload_size, 18);

    for (name, id) in [
        ("FullDuplexCall", "kinds-bidi"),
        ("HalfDuplexCall", "kinds-half"),
    ] {
        let requests: Vec<_> = (0..2)
            .map(|_| StreamingOutputCallRequest {
                response_parameters: parameters(),
                ..StreamingOutputCallRequest::default()
            })
            .collect();
        let request = scripted(tokio_stream::iter(requests), id, "OK");
        let response = if name == "FullDuplexCall" {
            test.full_duplex_call(request).await
        } else {
            test.half_duplex_call(request).await
        };
        let mut stream = response
            .unwrap_or_else(|s| panic!("{name} opens: {s:?}"))
            .into_inner();
        let mut got = Vec::new();
        while let Some(message) = stream.message().await.expect(name) {
            got.push(message.payload.expect("a payload").body.len());
        }
        assert_eq!(got, [1, 2, 3, 1, 2, 3], "{name}");
    }

    let unimplemented = test
        .unimplemented_call(scripted(Empty {}, "kinds-unimplemented", "OK"))
        .await
        .expect_err("UnimplementedCall is not implemented");
    assert_eq!(unimplemented.code(), Code::Unimplemented);
}

#[tokio::test]
async fn unavailable_twice_then_ok_succeeds_on_the_third_attempt() {
    needs_grpcio!("unavailable_twice_then_ok_succeeds_on_the_third_attempt");
    let test = client(settings(Server::shared()));
    let response = test
        .unary_call(scripted(
            SimpleRequest::default(),
            "unavailable-twice",
            "UNAVAILABLE;UNAVAILABLE;OK",
        ))
        .await
        .expect("the third attempt succeeds");
    assert_eq!(attempt(response.metadata()), 3);
}

#[tokio::test]
async fn a_pushback_of_300ms_is_waited_for() {
    needs_grpcio!("a_pushback_of_300ms_is_waited_for");
    let test = client(settings(Server::shared()));
    let started = Instant::now();
    let response = test
        .unary_call(scripted(
            SimpleRequest::default(),
            "pushback-300",
            "RESOURCE_EXHAUSTED@300;OK",
        ))
        .await
        .expect("the retry after the pushback succeeds");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(attempt(response.metadata()), 2);
    let gap: u64 = trailer(response.metadata(), "x-gap-ms").parse().unwrap();
    assert!(
        gap >= 300,
        "the server saw the retry {gap}ms after the first"
    );
}

#[tokio::test]
async fn resource_exhausted_without_a_pushback_is_not_retried() {
    needs_grpcio!("resource_exhausted_without_a_pushback_is_not_retried");
    let test = client(settings(Server::shared()));
    let status = test
        .unary_call(scripted(
            SimpleRequest::default(),
            "exhausted-no-pushback",
            "RESOURCE_EXHAUSTED;OK",
        ))
        .await
        .expect_err("not retried: a retry would have succeeded");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(attempt(status.metadata()), 1);
}

#[tokio::test]
async fn a_pushback_of_minus_one_stops_retries() {
    needs_grpcio!("a_pushback_of_minus_one_stops_retries");
    let test = client(settings(Server::shared()));
    for (id, script, code) in [
        (
            "pushback-minus-one-exhausted",
            "RESOURCE_EXHAUSTED@-1;OK",
            Code::ResourceExhausted,
        ),
        (
            "pushback-minus-one-unavailable",
            "UNAVAILABLE@-1;OK",
            Code::Unavailable,
        ),
    ] {
        let status = test
            .unary_call(scripted(SimpleRequest::default(), id, script))
            .await
            .expect_err("not retried: a retry would have succeeded");
        assert_eq!(status.code(), code, "{script}");
        assert_eq!(attempt(status.metadata()), 1, "{script}");
    }
}

#[tokio::test]
async fn a_pushback_over_backoff_max_ends_the_call() {
    needs_grpcio!("a_pushback_over_backoff_max_ends_the_call");
    // backoff_max is 1s: a pushback of 5s is more than the call waits for.
    let test = client(settings(Server::shared()));
    let status = test
        .unary_call(scripted(
            SimpleRequest::default(),
            "pushback-over-max",
            "RESOURCE_EXHAUSTED@5000;OK",
        ))
        .await
        .expect_err("the call ends with its first attempt's status");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(attempt(status.metadata()), 1);
}

#[tokio::test]
async fn calls_to_a_hanging_server_end_at_their_timeout_and_five_open_the_breaker() {
    needs_grpcio!("calls_to_a_hanging_server_end_at_their_timeout_and_five_open_the_breaker");
    let server = Server::shared();
    let timeout = Duration::from_millis(200);
    let test = client(Settings {
        timeout,
        ..settings(server)
    });
    let id = "hanging";
    // The default policy opens after five failures in a row: the first five
    // calls reach the server (so the first four did not open it) and end at
    // their timeout.
    for n in 1..=5 {
        let started = Instant::now();
        let status = test
            .unary_call(scripted(SimpleRequest::default(), id, "HANG"))
            .await
            .expect_err("a hanging server never answers");
        assert_eq!(
            status.code(),
            Code::DeadlineExceeded,
            "call {n}: {status:?}"
        );
        assert!(rejection(&status).is_none(), "call {n} was rejected");
        assert!(
            started.elapsed() >= timeout,
            "call {n} ended before its timeout"
        );
    }
    // The sixth is rejected, without reaching the server.
    let status = test
        .unary_call(scripted(SimpleRequest::default(), id, "HANG"))
        .await
        .expect_err("the breaker is open");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(rejection(&status).is_some(), "not a rejection: {status:?}");

    // The server saw five attempts of this test id: another client's next
    // call is its sixth.
    let other = client(settings(server));
    let response = other
        .unary_call(scripted(
            SimpleRequest::default(),
            id,
            "HANG;HANG;HANG;HANG;HANG;OK",
        ))
        .await
        .expect("the server answers the sixth attempt");
    assert_eq!(attempt(response.metadata()), 6);
}

#[tokio::test]
async fn calls_across_many_connection_ages_see_no_error() {
    needs_grpcio!("calls_across_many_connection_ages_see_no_error");
    let server = Server::start(Options {
        max_connection_age_ms: Some(100),
        ..Options::default()
    });
    let test = client(settings(&server));
    // Four callers, 80 calls each, 15ms apart: about 1.3s, more than ten
    // connection ages of ~100ms.
    let callers: Vec<_> = (0..4)
        .map(|caller| {
            let test = test.clone();
            tokio::spawn(async move {
                let mut peers = Vec::new();
                for n in 0..80 {
                    let response = test
                        .empty_call(scripted(Empty {}, &format!("age-{caller}"), "OK"))
                        .await
                        .unwrap_or_else(|s| panic!("caller {caller}, call {n}: {s:?}"));
                    peers.push(trailer(response.metadata(), "x-peer"));
                    tokio::time::sleep(Duration::from_millis(15)).await;
                }
                peers
            })
        })
        .collect();
    let mut peers = Vec::new();
    for caller in callers {
        peers.extend(caller.await.expect("no caller panicked"));
    }
    assert_eq!(peers.len(), 320);
    peers.sort();
    peers.dedup();
    assert!(
        peers.len() >= 5,
        "the calls went over {} connection(s), want several ages",
        peers.len()
    );
}

#[tokio::test]
async fn a_server_stopped_and_restarted_fails_unavailable_then_serves_with_connected_latched() {
    needs_grpcio!(
        "a_server_stopped_and_restarted_fails_unavailable_then_serves_with_connected_latched"
    );
    let server = Server::start(Options::default());
    let port = server.port;
    // The breaker is off: this test is about the connection.
    let test = client(Settings {
        breaker_policy: humus::circuit::Policy::new(|_| false, |_| humus::circuit::State::Closed),
        ..settings(&server)
    });
    let connected = test.client().connected();
    test.empty_call(scripted(Empty {}, "restart", "OK"))
        .await
        .expect("the server is up");
    assert!(
        connected.check().await,
        "connected once a call went through"
    );

    drop(server);
    for n in 1..=3 {
        let status = test
            .empty_call(scripted(Empty {}, "restart", "OK"))
            .await
            .expect_err("the server is down");
        assert_eq!(status.code(), Code::Unavailable, "call {n}: {status:?}");
        assert!(connected.check().await, "Connected latched while down");
    }

    let server = Server::start(Options {
        port,
        ..Options::default()
    });
    assert_eq!(server.port, port);
    // The server is listening; the client reconnects at its next call
    // (bounded: at most 50 calls, 100ms apart).
    let mut last = None;
    for _ in 0..50 {
        match test.empty_call(scripted(Empty {}, "restart", "OK")).await {
            Ok(_) => {
                last = None;
                break;
            }
            Err(status) => {
                assert_eq!(status.code(), Code::Unavailable, "{status:?}");
                last = Some(status);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    assert!(
        last.is_none(),
        "no call succeeded after the restart: {last:?}"
    );
    assert!(
        connected.check().await,
        "Connected latched after the restart"
    );
}

/// A TLS client trusting `ca` only.
fn tls_settings(server: &Server, ca: &Ca) -> Settings {
    Settings {
        tls: Some(std::sync::Arc::new(ca.client_config())),
        ..settings(server)
    }
}

#[tokio::test]
async fn tls_trusts_the_test_ca_only() {
    needs_grpcio!("tls_trusts_the_test_ca_only");
    let ca = Ca::new();
    let server = Server::start(Options {
        tls: Some(ca.issue("127.0.0.1")),
        ..Options::default()
    });
    let test = client(tls_settings(&server, &ca));
    let response = test
        .unary_call(scripted(
            SimpleRequest {
                fill_username: true,
                ..SimpleRequest::default()
            },
            "tls",
            "OK",
        ))
        .await
        .expect("a client trusting the test CA connects");
    assert_eq!(response.into_inner().username, "interop");
    assert!(test.client().connected().check().await);

    // A client that trusts another CA only does not.
    let other = client(tls_settings(&server, &Ca::new()));
    let status = other
        .unary_call(scripted(SimpleRequest::default(), "tls-other-ca", "OK"))
        .await
        .expect_err("the server's CA is not trusted");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("TLS handshake")
            && status.message().contains("invalid peer certificate"),
        "{status:?}"
    );
}

#[tokio::test]
async fn tls_a_certificate_for_another_name_fails_unavailable() {
    needs_grpcio!("tls_a_certificate_for_another_name_fails_unavailable");
    let ca = Ca::new();
    let server = Server::start(Options {
        tls: Some(ca.issue("carts")),
        ..Options::default()
    });
    let test = client(tls_settings(&server, &ca));
    let status = test
        .unary_call(scripted(SimpleRequest::default(), "tls-other-name", "OK"))
        .await
        .expect_err("the certificate is for carts, not 127.0.0.1");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("TLS handshake")
            && status.message().contains("not valid for name"),
        "{status:?}"
    );
}

/// The attempts the server has seen of `id`: another call's `x-attempt`,
/// less one.
async fn attempts_seen(server: &Server, id: &str) -> u32 {
    let response = client(settings(server))
        .empty_call(scripted(Empty {}, id, "OK"))
        .await
        .expect("the server answers OK");
    attempt(response.metadata()) - 1
}

#[tokio::test]
async fn the_retry_budget_spends_as_grpcs_retry_throttling() {
    needs_grpcio!("the_retry_budget_spends_as_grpcs_retry_throttling");
    const CALLS: u32 = 100;
    let server = Server::shared();
    // humus's default budget (10 tokens, ratio 0.1) and 3 attempts; the
    // breaker off, so that every call reaches the server.
    let test = client(Settings {
        breaker_policy: humus::circuit::Policy::new(|_| false, |_| humus::circuit::State::Closed),
        ..settings(server)
    });
    for n in 0..CALLS {
        let status = test
            .empty_call(scripted(Empty {}, "storm-humus", "UNAVAILABLE"))
            .await
            .expect_err("the server answers Unavailable");
        assert_eq!(status.code(), Code::Unavailable, "call {n}: {status:?}");
    }
    let humus = attempts_seen(server, "storm-humus").await;

    // grpcio's client, with gRPC retry throttling at the same tokens and
    // ratio, and 3 attempts.
    let out = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/interop/storm_client.py"
        ))
        .args(["--port", &server.port.to_string()])
        .args(["--calls", &CALLS.to_string()])
        .args(["--test-id", "storm-grpcio", "--script", "UNAVAILABLE"])
        .args(["--max-tokens", "10", "--token-ratio", "0.1"])
        .stdin(Stdio::null())
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "storm_client.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(r#""UNAVAILABLE": 100"#), "{said}");
    let grpc = attempts_seen(server, "storm-grpcio").await;

    assert_eq!(humus, grpc, "humus made {humus} attempts, grpcio {grpc}");
    // Calls 1 and 2 retried (3 and 2 attempts) until half the tokens were
    // spent; every call after made one attempt.
    assert_eq!(humus, CALLS + 3);
}

// ---- stock tonic clients over a humus Client -------------------------------
//
// tonic-health's `HealthClient` and the plain tonic-prost-build stub of
// `grpc.testing.TestService` (the `test_service_client` module next to the
// typed client), each over `Client::channel()`.

use humus::grpc::client::Methods;
use humus_tests::grpc_proto::grpc::testing::test_service_client::TestServiceClient;
use humus_tests::grpc_proto::grpc::testing::test_service_humus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};

/// TestService with `UnaryCall` never sent twice: its descriptors go to a
/// stock stub's channel.
#[humus::client(service = test_service_humus)]
pub trait Strict {
    /// Never sent twice.
    #[humus(never_retry)]
    fn unary_call();
}

fn humus_client(settings: Settings) -> Client {
    Client::new(&Setup::new(), settings).expect("valid settings")
}

#[tokio::test]
async fn a_stock_stub_over_a_humus_client_retries_unavailable_twice_then_ok() {
    needs_grpcio!("a_stock_stub_over_a_humus_client_retries_unavailable_twice_then_ok");
    // A client per call: each spends the retry budget of its own.
    let client = || humus_client(settings(Server::shared()));
    let methods = Methods::new(&[StrictHumusClient::METHODS]).expect("one list");
    let mut test = TestServiceClient::new(client().channel().with_methods(methods));
    let response = test
        .empty_call(scripted(
            Empty {},
            "channel-unavailable-twice-listed",
            "UNAVAILABLE;UNAVAILABLE;OK",
        ))
        .await
        .expect("the third attempt succeeds");
    assert_eq!(attempt(response.metadata()), 3);
    // Not listed: the channel cannot know it is idempotent, and sends it
    // once.
    let mut test = TestServiceClient::new(client().channel());
    let status = test
        .empty_call(scripted(
            Empty {},
            "channel-unavailable-twice",
            "UNAVAILABLE;UNAVAILABLE;OK",
        ))
        .await
        .expect_err("sent once");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(attempt(status.metadata()), 1);
    // Health is well known: retried with no list.
    let mut health = HealthClient::new(client().channel());
    let response = health
        .check(scripted(
            HealthCheckRequest::default(),
            "channel-health",
            "UNAVAILABLE;UNAVAILABLE;OK",
        ))
        .await
        .expect("the third attempt succeeds");
    assert_eq!(attempt(response.metadata()), 3);
    assert_eq!(response.into_inner().status(), ServingStatus::Serving);
}

#[tokio::test]
async fn a_stock_stub_with_a_tonic_interceptor_over_a_humus_client() {
    needs_grpcio!("a_stock_stub_with_a_tonic_interceptor_over_a_humus_client");
    // tonic's interceptor wraps the whole call (humus's own per-attempt
    // interceptor is `Settings::interceptor`): it runs once, the retries
    // under it.
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = seen.clone();
    let mut health = HealthClient::with_interceptor(
        humus_client(settings(Server::shared())).channel(),
        move |mut request: Request<()>| {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            request
                .metadata_mut()
                .insert("authorization", "Bearer t".parse().expect("ASCII"));
            Ok(request)
        },
    );
    let response = health
        .check(scripted(
            HealthCheckRequest::default(),
            "channel-tonic-interceptor",
            "UNAVAILABLE;UNAVAILABLE;OK",
        ))
        .await
        .expect("the third attempt succeeds");
    assert_eq!(attempt(response.metadata()), 3);
    assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), 1);
    // An interceptor's refusal reaches the caller as it is, unsent.
    let mut refused = HealthClient::with_interceptor(
        humus_client(settings(Server::shared())).channel(),
        |_: Request<()>| Err(Status::unauthenticated("no token")),
    );
    let status = refused
        .check(HealthCheckRequest::default())
        .await
        .expect_err("refused");
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
}

#[tokio::test]
async fn a_never_retry_method_from_the_registry_makes_one_attempt() {
    needs_grpcio!("a_never_retry_method_from_the_registry_makes_one_attempt");
    let client = humus_client(settings(Server::shared()));
    let methods = Methods::new(&[StrictHumusClient::METHODS]).expect("one list");
    let mut test = TestServiceClient::new(client.channel().with_methods(methods));
    let status = test
        .unary_call(scripted(
            SimpleRequest::default(),
            "channel-never-retry",
            "UNAVAILABLE;OK",
        ))
        .await
        .expect_err("sent once");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(attempt(status.metadata()), 1);
    // Without the registry, the method is not known: sent once too.
    let mut plain = TestServiceClient::new(client.channel());
    let status = plain
        .unary_call(scripted(
            SimpleRequest::default(),
            "channel-never-retry-plain",
            "UNAVAILABLE;OK",
        ))
        .await
        .expect_err("sent once");
    assert_eq!(attempt(status.metadata()), 1);
}

#[tokio::test]
async fn through_a_stock_stub_the_breaker_opens_and_rejects_without_sending() {
    needs_grpcio!("through_a_stock_stub_the_breaker_opens_and_rejects_without_sending");
    let server = Server::shared();
    let client = humus_client(Settings {
        max_attempts: 1,
        ..settings(server)
    });
    let mut health = HealthClient::new(client.channel());
    let id = "channel-breaker";
    // The default policy opens after five failures in a row.
    for n in 1..=5 {
        let status = health
            .check(scripted(HealthCheckRequest::default(), id, "UNAVAILABLE"))
            .await
            .expect_err("scripted");
        assert_eq!(status.code(), Code::Unavailable);
        assert!(rejection(&status).is_none(), "call {n} was rejected");
        assert_eq!(attempt(status.metadata()), n);
    }
    let status = health
        .check(scripted(HealthCheckRequest::default(), id, "UNAVAILABLE"))
        .await
        .expect_err("the breaker is open");
    assert!(rejection(&status).is_some(), "not a rejection: {status:?}");
    // Nothing was sent: the server's next attempt of this id is its sixth.
    let mut other = HealthClient::new(
        humus_client(Settings {
            max_attempts: 1,
            ..settings(server)
        })
        .channel(),
    );
    let status = other
        .check(scripted(HealthCheckRequest::default(), id, "UNAVAILABLE"))
        .await
        .expect_err("scripted");
    assert_eq!(attempt(status.metadata()), 6);
}

#[tokio::test]
async fn each_rpc_kind_through_a_stock_stub() {
    needs_grpcio!("each_rpc_kind_through_a_stock_stub");
    let client = humus_client(settings(Server::shared()));
    let methods = Methods::new(&[StrictHumusClient::METHODS]).expect("one list");
    for channel in [client.channel(), client.channel().with_methods(methods)] {
        let mut test = TestServiceClient::new(channel);
        let parameters: Vec<_> = [1, 2, 3]
            .into_iter()
            .map(|size| ResponseParameters {
                size,
                ..ResponseParameters::default()
            })
            .collect();
        let mut out = test
            .streaming_output_call(scripted(
                StreamingOutputCallRequest {
                    response_parameters: parameters,
                    ..StreamingOutputCallRequest::default()
                },
                "channel-kinds-server-streaming",
                "OK",
            ))
            .await
            .expect("opens")
            .into_inner();
        let mut got = Vec::new();
        while let Some(message) = out.message().await.expect("StreamingOutputCall") {
            got.push(message.payload.expect("a payload").body.len());
        }
        assert_eq!(got, [1, 2, 3]);
        let uploads: Vec<_> = [5, 6, 7]
            .into_iter()
            .map(|n| StreamingInputCallRequest {
                payload: Some(Payload {
                    body: vec![0; n],
                    ..Payload::default()
                }),
                ..StreamingInputCallRequest::default()
            })
            .collect();
        let sum = test
            .streaming_input_call(scripted(
                tokio_stream::iter(uploads),
                "channel-kinds-client-streaming",
                "OK",
            ))
            .await
            .expect("StreamingInputCall");
        assert_eq!(sum.into_inner().aggregated_payload_size, 18);
    }
}
