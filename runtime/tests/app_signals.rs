//! The App's real stop signals, in a child process (this test binary run
//! again as the App, on 127.0.0.1): a SIGTERM while init runs stops it and
//! runs the hooks of what it built; a first SIGTERM while serving starts a graceful stop
//! that would wait a long `shutdown_grace` for a call in flight; a second
//! one, while it drains, stops the App at once with exit 130, the call
//! answered UNAVAILABLE as its connection closes; the App, given no
//! telemetry function, writes its lifecycle on standard error. Real signals and real time: every wait is bounded, and the child
//! is killed if the test fails.
#![cfg(unix)]

mod client_support;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use client_support::*;
use humus::App;
use humus::grpc::server::{Server, Settings};
use tonic::{Code, Response};
use tonic_prost::ProstCodec;

/// Set in the child's environment: the test `child_app` runs the App.
const CHILD: &str = "HUMUS_APP_SIGNALS_CHILD";

/// The bound on each wait of the parent.
const BOUND: Duration = Duration::from_secs(30);

/// The child: an App with real signals serving carts on 127.0.0.1, whose
/// GetCart says so on standard output and then answers after an hour. It
/// prints its address, then exits with the App's exit code. Does nothing
/// unless run as the child.
#[test]
fn child_app() {
    let Some(mode) = std::env::var_os(CHILD) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let exit = runtime.block_on(App::new().run(|setup| async move {
        if mode == "starting" {
            // An init that takes an hour, with a hook of what it built.
            setup.on_stop(|| async { println!("on_stop ran") });
            println!("starting now");
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return Ok(vec![]);
        }
        let carts = Carts::new();
        carts.on_get_cart(|_, req| async move {
            println!("handling {}", req.id);
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(Response::new(cart(&req.id, 1)))
        });
        let mut server = Server::new(
            &setup,
            Settings {
                addr: "127.0.0.1:0".into(),
                shutdown_grace: Duration::from_secs(300),
                plaintext: true,
                ..Settings::default()
            },
        )?
        .add_service(CartsService(carts));
        server.bind().await?;
        println!("listening {}", server.local_addr().unwrap());
        Ok(vec![server])
    }));
    println!("exit {}", exit.code());
    drop(runtime);
    std::process::exit(i32::from(exit.code()));
}

/// The child process, killed when dropped before it exited.
struct Running {
    child: Child,
    /// What it prints on standard output, line by line.
    lines: mpsc::Receiver<String>,
    /// What it writes on standard error (the App's lifecycle, as it was
    /// given no telemetry function), line by line.
    logged: mpsc::Receiver<String>,
}

/// The lines read from `from`, on a thread of their own.
fn lines_of(from: impl std::io::Read + Send + 'static, echo: bool) -> mpsc::Receiver<String> {
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            if echo {
                eprintln!("{line}");
            }
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// What follows `prefix` in the first line of `lines` that holds it
/// (libtest may have begun the line), within [`BOUND`].
fn line_of(lines: &mpsc::Receiver<String>, prefix: &str) -> String {
    let deadline = Instant::now() + BOUND;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                if let Some(at) = line.find(prefix) {
                    return line[at + prefix.len()..].trim().to_owned();
                }
            }
            Err(e) => panic!("no line {prefix:?} from the child: {e}"),
        }
    }
}

impl Running {
    /// The child, serving (`mode` "serving") or in a long init
    /// ("starting").
    fn start(mode: &str) -> Running {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_app", "--nocapture", "--test-threads=1"])
            .env(CHILD, mode)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = lines_of(child.stdout.take().unwrap(), false);
        // Echoed, so that a failing test shows what the child said.
        let logged = lines_of(child.stderr.take().unwrap(), true);
        Running {
            child,
            lines,
            logged,
        }
    }

    /// What follows `prefix` in the first line the child prints on
    /// standard output that holds it, within [`BOUND`].
    fn line(&self, prefix: &str) -> String {
        line_of(&self.lines, prefix)
    }

    /// What follows `prefix` in the first line the child writes on
    /// standard error that holds it, within [`BOUND`].
    fn logged(&self, prefix: &str) -> String {
        line_of(&self.logged, prefix)
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{name}: {status}");
    }

    /// The child's exit code, within `bound`.
    fn exited(&mut self, bound: Duration) -> Option<i32> {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "the child did not exit within {bound:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Whether `addr` refuses a new connection (the App stopped accepting).
fn refuses(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err()
}

#[test]
fn a_second_sigterm_while_draining_exits_130_at_once_answering_the_call_unavailable() {
    let mut running = Running::start("serving");
    let addr: SocketAddr = running.line("listening ").parse().unwrap();

    let client = tokio::runtime::Runtime::new().unwrap();
    let call = client.spawn(async move {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.unwrap();
        grpc.unary::<_, Cart, _>(
            get("slow"),
            GET_CART.full_name.parse().unwrap(),
            ProstCodec::<CartRequest, Cart>::default(),
        )
        .await
    });
    assert_eq!(running.line("handling "), "slow");

    // The first signal: the App stops accepting, and drains.
    running.signal("TERM");
    let deadline = Instant::now() + BOUND;
    while !refuses(addr) {
        assert!(Instant::now() < deadline, "still accepting after {BOUND:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(running.child.try_wait().unwrap().is_none(), "it drains");

    // The second: it exits at once (its grace is 300 s), with 130.
    let forced = Instant::now();
    running.signal("TERM");
    assert_eq!(running.exited(BOUND), Some(130));
    assert!(
        forced.elapsed() < Duration::from_secs(20),
        "{:?}",
        forced.elapsed()
    );
    assert_eq!(running.line("exit "), "130");
    let status = client
        .block_on(async { tokio::time::timeout(BOUND, call).await })
        .expect("the call ends")
        .unwrap()
        .unwrap_err();
    // Answered before the connection closed: a stock client sees
    // UNAVAILABLE, which a retrying client may send again elsewhere.
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(status.message(), "the server stopped before the call ended");
}

#[test]
fn a_sigterm_during_init_runs_the_hooks_and_exits_0() {
    let mut running = Running::start("starting");
    assert_eq!(running.line("starting "), "now");
    running.signal("TERM");
    assert_eq!(running.exited(BOUND), Some(0));
    assert_eq!(running.line("on_stop "), "ran");
    assert_eq!(running.line("exit "), "0");
}

#[test]
fn an_app_given_no_telemetry_function_writes_its_lifecycle_on_standard_error() {
    let mut running = Running::start("serving");
    let addr = running.line("listening ");
    assert_eq!(running.logged("INFO humus::app: serving on "), addr);
    running.signal("TERM");
    assert_eq!(running.exited(BOUND), Some(0));
    assert_eq!(
        running.logged("INFO humus::app: "),
        "stopping: a stop signal"
    );
    assert_eq!(running.logged("INFO humus::app: "), "exit 0 (stopped)");
}
