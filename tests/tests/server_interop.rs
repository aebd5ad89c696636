//! Interop of the server half: gRPC's C core client (Python's grpcio,
//! `tests/interop/shutdown_client.py`) across a humus server's graceful
//! shutdown, over real loopback TCP. A unary call in flight at the GOAWAY
//! finishes with no error, and the client's next call, on the same channel,
//! goes over a new connection to the server that took the port.
//!
//! Real time and an external process: bounded waits, no upper bound on
//! durations asserted. Needs Python's `grpcio`; without it the test skips
//! with one line, unless `HUMUS_INTEROP=1` is set, which makes a missing
//! grpcio a failure.

use std::convert::Infallible;
use std::io::{BufRead, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use humus::Setup;
use humus::grpc::server::{ServeError, Server, Settings};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::body::Body;
use tonic::codegen::Service;
use tonic::codegen::http;
use tonic::server::NamedService;

const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/shutdown_client.py");

const HOW: &str =
    "pip install grpcio, then HUMUS_INTEROP=1 cargo test -p humus-tests --test server_interop";

/// Whether Python's grpcio is importable; without it the test skips, or
/// fails under `HUMUS_INTEROP=1`.
fn enabled(test: &str) -> bool {
    let found = Command::new("python3")
        .args(["-c", "import grpc"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let required = std::env::var("HUMUS_INTEROP").is_ok_and(|v| v == "1");
    if !found && required {
        panic!("HUMUS_INTEROP=1, but Python's grpcio is missing: {HOW}");
    }
    if !found {
        humus_tests::skipped(test, format_args!("Python's grpcio is missing; {HOW}"));
    }
    found
}

/// `grpc.testing.TestService`'s `EmptyCall`, which sleeps for the
/// request's `x-sleep-ms` first, and counts its calls.
#[derive(Clone, Default)]
struct TestService {
    calls: Arc<AtomicUsize>,
}

impl NamedService for TestService {
    const NAME: &'static str = "grpc.testing.TestService";
}

impl Service<http::Request<Body>> for TestService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future =
        std::pin::Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let calls = self.calls.clone();
        Box::pin(async move {
            if req.uri().path() != "/grpc.testing.TestService/EmptyCall" {
                let (parts, ()) = tonic::Status::unimplemented("")
                    .into_http::<()>()
                    .into_parts();
                return Ok(http::Response::from_parts(parts, Body::empty()));
            }
            let handler = EmptyCall(calls);
            let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::<(), ()>::default());
            Ok(grpc.unary(handler, req).await)
        })
    }
}

/// The handler of `EmptyCall`.
struct EmptyCall(Arc<AtomicUsize>);

impl tonic::server::UnaryService<()> for EmptyCall {
    type Response = ();
    type Future =
        std::pin::Pin<Box<dyn Future<Output = Result<tonic::Response<()>, tonic::Status>> + Send>>;

    fn call(&mut self, request: tonic::Request<()>) -> Self::Future {
        self.0.fetch_add(1, Ordering::SeqCst);
        let sleep = request
            .metadata()
            .get("x-sleep-ms")
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(0);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(sleep)).await;
            Ok(tonic::Response::new(()))
        })
    }
}

struct Serving {
    port: u16,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServeError>>,
}

async fn serve(addr: &str, service: &TestService) -> Result<Serving, ServeError> {
    let settings = Settings {
        addr: addr.to_owned(),
        shutdown_grace: Duration::from_secs(10),
        // The interop client dials loopback in plain text.
        plaintext: true,
        ..Settings::default()
    };
    let mut server = Server::new(&Setup::new(), settings)
        .unwrap()
        .add_service(service.clone());
    server.bind().await?;
    let port = server.local_addr().unwrap().port();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(async move {
        let _ = stopped.await;
    }));
    Ok(Serving {
        port,
        stop: Some(stop),
        task,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcios_call_in_flight_at_a_graceful_shutdown_finishes_and_its_next_goes_to_the_new_server()
 {
    if !enabled("server_interop") {
        return;
    }
    let (old, new) = (TestService::default(), TestService::default());
    let mut first = serve("127.0.0.1:0", &old).await.unwrap();
    let port = first.port;

    let mut client = Command::new("python3")
        .arg(CLIENT)
        .args(["--port", &port.to_string(), "--sleep-ms", "1500"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut stdout = BufReader::new(client.stdout.take().unwrap());
    let mut stdin = client.stdin.take().unwrap();
    let mut line = String::new();
    let read = tokio::task::spawn_blocking(move || {
        stdout.read_line(&mut line).unwrap();
        (stdout, line)
    });
    let (mut stdout, line) = tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("the client starts within 30s")
        .unwrap();
    assert_eq!(line.trim(), "IN FLIGHT");
    // The first call has reached the handler.
    for _ in 0..300 {
        if old.calls.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(old.calls.load(Ordering::SeqCst), 1);

    // The graceful shutdown: the old server stops accepting at once; the
    // new one takes the port.
    let _ = first.stop.take().unwrap().send(());
    let mut second = None;
    for _ in 0..200 {
        match serve(&format!("127.0.0.1:{port}"), &new).await {
            Ok(serving) => {
                second = Some(serving);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    let mut second = second.expect("the new server takes the port within 2s");
    writeln!(stdin, "NEXT").unwrap();
    stdin.flush().unwrap();

    let read = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        line
    });
    let result = tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("the client ends within 30s")
        .unwrap();
    assert!(
        result.contains(r#""first": "OK""#) && result.contains(r#""second": "OK""#),
        "{result}"
    );
    assert_eq!(old.calls.load(Ordering::SeqCst), 1, "{result}");
    assert_eq!(new.calls.load(Ordering::SeqCst), 1, "{result}");
    assert!(client.wait().unwrap().success());

    tokio::time::timeout(Duration::from_secs(15), first.task)
        .await
        .expect("the old server stops within its grace")
        .unwrap()
        .unwrap();
    let _ = second.stop.take().unwrap().send(());
    tokio::time::timeout(Duration::from_secs(15), &mut second.task)
        .await
        .expect("the new server stops")
        .unwrap()
        .unwrap();
}
