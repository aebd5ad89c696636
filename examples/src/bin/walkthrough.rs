//! The wallet walkthrough: `cargo run -p humus-examples --bin walkthrough`.
//!
//! Starts the ledger, the exchange-rate service and the wallet on loopback,
//! drives ten scripted phases, prints a table per phase read from the OpenTelemetry data it
//! collected, writes an SVG timeline, and exits 0 only if every phase
//! behaved as it says.

use humus::app::{Error, Exit};
use humus_examples::walkthrough::{self, Options};
use std::path::PathBuf;

/// The build's target directory: the one this binary was built into
/// (`<target>/<profile>/walkthrough`), so `CARGO_TARGET_DIR` is followed;
/// the workspace's `target/` if the binary's path cannot be read.
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.to_path_buf()))
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

#[tokio::main]
async fn main() -> Exit {
    let options = Options {
        svg: Some(target_dir().join("walkthrough/timeline.svg")),
        ..Options::default()
    };
    let report = match walkthrough::run(options).await {
        Ok(report) => report,
        Err(e) => return Exit::failed(e),
    };
    println!();
    println!("What each phase did, read from the OpenTelemetry data: calls and attempts are the");
    println!(
        "wallet's to the ledger, in phase 9 to the exchange-rate service over HTTP, in phase 10"
    );
    println!(
        "the Kafka producer's (a call the breaker rejects, or a record a fault aborts, makes no"
    );
    println!("attempt); p50 and p99 are the latencies of the wallet's own");
    println!("answers, from its server spans.");
    println!();
    print!("{}", report.table());
    println!();
    if let Some(svg) = &report.svg {
        let shown = svg.canonicalize().unwrap_or_else(|_| svg.clone());
        println!(
            "Timeline of the breakers' states and the attempts per second: {}",
            shown.display()
        );
    }
    let failed: Vec<&str> = report
        .phases
        .iter()
        .filter(|p| !p.passed())
        .map(|p| p.name)
        .collect();
    if failed.is_empty() {
        println!(
            "Every phase behaved as it says ({:.1}s).",
            report.took.as_secs_f64()
        );
        Exit::clean()
    } else {
        // Exit 1, naming them.
        Exit::failed(Error::other(format!(
            "these phases did not behave as they say: {}",
            failed.join(", ")
        )))
    }
}
