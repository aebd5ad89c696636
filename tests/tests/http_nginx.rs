//! The HTTP client against a server nobody here wrote: Debian's nginx as a
//! reverse proxy in front of an upstream that is down, then up. nginx
//! answers as proxies do: its own `502 Bad Gateway` page for a refused
//! upstream, and (on `/v2/`, as a maintenance page) `503 Service
//! Unavailable` with `Retry-After: 1`. The client retries, opens its
//! breaker, and closes it again once the upstream is back.
//!
//! nginx runs without root or any system path: its prefix, config, pid
//! file, logs and temporary folders are under a temporary folder of the
//! test's, as one process (`master_process off`, `daemon off`), on a free
//! 127.0.0.1 port, and is killed at the end of the test, pass or fail.
//!
//! Real time (an external process): the test asserts counts and lower
//! bounds only. It skips with one printed line unless `HUMUS_INTEROP=1`
//! is set (as `.ci/run` sets it); with it set, a missing nginx fails it.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use humus::circuit::{Config, State};
use humus::http::client::{Client, Kind, Settings};

const NGINX: &str = "/usr/sbin/nginx";

/// A free port on 127.0.0.1 (bound, then released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// nginx, running until dropped; its folder is removed then.
struct Nginx {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Nginx {
    fn start(upstream: u16) -> Nginx {
        let dir = std::env::temp_dir().join(format!(
            "humus-nginx-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        let port = free_port();
        let d = dir.display();
        let config = format!(
            r#"daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/logs/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    upstream backend {{
        server 127.0.0.1:{upstream} max_fails=0;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://backend;
            proxy_connect_timeout 1s;
        }}
        location /v2/ {{
            proxy_pass http://backend;
            proxy_connect_timeout 1s;
            error_page 502 504 = @unavailable;
        }}
        location @unavailable {{
            add_header Retry-After 1 always;
            return 503;
        }}
    }}
}}
"#
        );
        std::fs::write(dir.join("nginx.conf"), config).unwrap();
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(&dir)
            .arg("-e")
            .arg(dir.join("logs/error.log"))
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{NGINX}: {e}"));
        let mut nginx = Nginx { child, dir, port };
        nginx.wait_listening();
        nginx
    }

    /// Waits (at most 10 s) until nginx accepts connections.
    fn wait_listening(&mut self) {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "nginx exited with {status}: {}",
                    read(&self.dir.join("logs/error.log"))
                );
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "nginx did not listen on {addr} within 10 s: {}",
            read(&self.dir.join("logs/error.log"))
        );
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether the test runs: `HUMUS_INTEROP=1`, and then nginx must be there.
fn enabled() -> bool {
    if std::env::var("HUMUS_INTEROP").as_deref() != Ok("1") {
        humus_tests::skipped(
            "http_nginx",
            format_args!(
                "set HUMUS_INTEROP=1 to run the HTTP client against Debian's nginx ({NGINX})"
            ),
        );
        return false;
    }
    assert!(
        Path::new(NGINX).exists(),
        "HUMUS_INTEROP=1 but {NGINX} is missing: apt-get install nginx-light"
    );
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_in_front_of_a_down_upstream_trips_the_breaker_which_recovers_when_it_returns() {
    if !enabled() {
        return;
    }
    let upstream_port = free_port();
    let nginx = Nginx::start(upstream_port);
    let telemetry = humus::testing::Telemetry::new();
    let setup = humus::Setup::new().with_telemetry(telemetry.telemetry());
    let client = Client::new(
        &setup,
        Settings {
            base_url: format!("http://127.0.0.1:{}", nginx.port),
            backoff_base: Duration::from_millis(10),
            backoff_max: Duration::from_secs(2),
            breaker: Config {
                open_for: Duration::from_secs(1),
                ..Settings::default().breaker
            },
            ..Settings::default()
        },
    )
    .unwrap();

    // The upstream is down: nginx's 502 page, retried to max_attempts.
    let response = client.get("/rates/EUR").send().await.unwrap();
    assert_eq!(response.status(), 502);
    assert_eq!(
        response.headers()["server"]
            .to_str()
            .unwrap()
            .split('/')
            .next(),
        Some("nginx")
    );
    assert!(response.text().await.unwrap().contains("502 Bad Gateway"));
    assert_eq!(failures(&telemetry), 3.0);

    // nginx's 503 with Retry-After: 1 is waited for; the second attempt is
    // the fifth failure in a row, which opens the breaker (and the budget,
    // half spent, refuses a third).
    let started = Instant::now();
    let response = client.get("/v2/rates/EUR").send().await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "1");
    assert_eq!(client.breaker_state(), State::Open);
    assert_eq!(failures(&telemetry), 5.0);
    // The open breaker sheds the next call: nothing reaches nginx.
    let err = client.get("/rates/EUR").send().await.unwrap_err();
    assert_eq!(err.kind(), Kind::Rejected, "{err}");

    // The upstream returns; once the breaker's open time has passed, its
    // probes go through and close it.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", upstream_port))
        .await
        .unwrap();
    let server = tokio::spawn(async move {
        let app = axum::Router::new().fallback(|| async { "1.08" });
        axum::serve(listener, app).await.unwrap();
    });
    tokio::time::sleep(Duration::from_millis(1100)).await;
    for _ in 0..3 {
        let response = client.get("/rates/EUR").send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.unwrap(), "1.08");
    }
    assert_eq!(client.breaker_state(), State::Closed);
    server.abort();
    drop(nginx);
}

fn failures(telemetry: &humus::testing::Telemetry) -> f64 {
    telemetry
        .metrics(humus::telemetry::names::CLIENT_SCOPE)
        .into_iter()
        .filter(|p| {
            p.name == humus::telemetry::names::HUMUS_CIRCUIT_CALLS
                && p.has(&[(humus::telemetry::names::HUMUS_CIRCUIT_OUTCOME, "failure")])
        })
        .map(|p| p.value.as_f64())
        .sum()
}

/// The skip says so in `cargo test`'s output, without `--nocapture`: this
/// test binary, run again for the test above with `HUMUS_INTEROP` unset,
/// shows the skip line (libtest keeps what `println!` prints in a passing
/// test).
#[test]
fn a_skip_is_seen_without_nocapture() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "nginx_in_front_of_a_down_upstream_trips_the_breaker_which_recovers_when_it_returns",
        ])
        .env_remove("HUMUS_INTEROP")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "{stdout}");
    assert!(
        stderr.contains("http_nginx: skipped: set HUMUS_INTEROP=1"),
        "{stdout}\n{stderr}"
    );
}
