//! Retry storm: a dependency that answers every call `Unavailable`, and
//! 1,000 calls made one after another. How many attempts reach it per call:
//!
//! - with humus's retry budget (the defaults: 10 tokens, ratio 0.1, 3
//!   attempts), its breaker off so that every call reaches the dependency;
//! - the same with humus's default breaker on, for reference;
//! - with a plain three-attempt retry loop, as a Rust user writes it
//!   (`backon`, over tonic's generated client);
//! - with grpcio's own client (gRPC's C core, `tests/interop/storm_client.py`)
//!   and gRPC retry throttling at the same max tokens and ratio.
//!
//! The dependency (an in-process tonic server) counts the attempts of each
//! call, by the `x-test-id` and `x-call` metadata every attempt carries.
//! The figure is a count, not a time: it prints a table.
//!
//! Target (issue 9): humus's attempts per call equal grpc's within 1%, and
//! are exactly 1.0 once the budget is drained (calls 11 to 1,000: a budget
//! of 10 tokens is drained by then, since every failed call takes one).
//!
//! ```text
//! cargo bench -p humus-tests --bench retry_storm
//! ```
//!
//! grpcio's row needs Python's grpcio (`pip install grpcio`); without it
//! the row says so.

mod support;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use humus::circuit::{Policy, State};
use humus::grpc::client::Settings;
use humus_tests::grpc_proto::grpc::testing::Empty;
use support::{Answer, Dependency};
use tonic::{Code, Request};

/// Calls per client.
const CALLS: u32 = 1000;
/// The first calls, after which a budget of 10 tokens is drained.
const DRAINING: usize = 10;

const STORM_CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/storm_client.py");

/// An `EmptyCall` request carrying the test id and the call's index.
fn request(test_id: &str, call: u32) -> Request<Empty> {
    let mut request = Request::new(Empty {});
    let metadata = request.metadata_mut();
    metadata.insert("x-test-id", test_id.parse().expect("ASCII"));
    metadata.insert("x-call", call.to_string().parse().expect("ASCII"));
    request
}

/// The humus client's calls; `breaker` keeps the default breaker, else it
/// never opens.
async fn humus_storm(addr: SocketAddr, test_id: &str, breaker: bool) {
    let mut settings = Settings::default();
    if !breaker {
        settings.breaker_policy = Policy::new(|_| false, |_| State::Closed);
    }
    let client = support::humus_client(addr, settings);
    for call in 0..CALLS {
        let status = client
            .empty_call(request(test_id, call))
            .await
            .expect_err("the dependency is down");
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    }
}

/// A plain three-attempt retry loop over tonic's client: backon's
/// exponential backoff (1ms, 2ms: the wait does not change the count) with
/// two retries, of `Unavailable` only.
async fn backon_storm(addr: SocketAddr, test_id: &str) {
    let client = support::tonic_client(addr);
    let retries = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(1))
        .with_max_delay(Duration::from_millis(10))
        .with_max_times(2);
    for call in 0..CALLS {
        let attempt = || {
            let mut client = client.clone();
            async move { client.empty_call(request(test_id, call)).await }
        };
        let status = attempt
            .retry(retries)
            .when(|status| status.code() == Code::Unavailable)
            .await
            .expect_err("the dependency is down");
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    }
}

/// grpcio's client, in a Python process; `Err` says why it did not run.
fn grpcio_storm(addr: SocketAddr, test_id: &str) -> Result<String, String> {
    let out = Command::new("python3")
        .arg(STORM_CLIENT)
        .args(["--port", &addr.port().to_string()])
        .args(["--calls", &CALLS.to_string()])
        .args(["--test-id", test_id])
        .args(["--max-tokens", "10", "--token-ratio", "0.1"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(stderr.lines().last().unwrap_or("failed").to_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// One row of the table, from the attempts of each call.
fn row(name: &str, attempts: &[u32], note: &str) {
    let total: u32 = attempts.iter().sum();
    let per_call = f64::from(total) / attempts.len() as f64;
    let drained = &attempts[DRAINING..];
    let drained_per_call = f64::from(drained.iter().sum::<u32>()) / drained.len() as f64;
    let first: Vec<String> = attempts[..DRAINING].iter().map(u32::to_string).collect();
    println!(
        "| {name} | {total} | {per_call:.3} | {drained_per_call:.3} | {} | {note} |",
        first.join(" ")
    );
}

fn main() {
    let rt = support::runtime(2);
    let dependency = Dependency::new(Answer::Unavailable);
    let addr = rt.block_on(support::serve(dependency.clone()));

    println!(
        "Retry storm: {CALLS} calls, one after another, to a dependency answering every call Unavailable."
    );
    println!();
    println!(
        "| client | attempts | attempts per call | attempts per call, calls {}-{CALLS} | attempts of calls 1-{DRAINING} | |",
        DRAINING + 1
    );
    println!("|---|---:|---:|---:|---|---|");

    rt.block_on(humus_storm(addr, "humus", false));
    row(
        "humus (budget 10 tokens, ratio 0.1, 3 attempts; breaker off)",
        &dependency.attempts("humus", CALLS),
        "",
    );

    match grpcio_storm(addr, "grpcio") {
        Ok(result) => row(
            "grpcio (retryThrottling maxTokens 10, tokenRatio 0.1; maxAttempts 3)",
            &dependency.attempts("grpcio", CALLS),
            &result,
        ),
        Err(why) => println!("| grpcio | skipped: {why} | | | | |"),
    }

    rt.block_on(backon_storm(addr, "backon"));
    row(
        "backon, 3 attempts, over tonic",
        &dependency.attempts("backon", CALLS),
        "",
    );

    rt.block_on(humus_storm(addr, "humus-breaker", true));
    row(
        "humus, default breaker on (reference)",
        &dependency.attempts("humus-breaker", CALLS),
        "0 = rejected by the open breaker",
    );
}
