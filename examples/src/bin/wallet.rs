//! The wallet, alone: `LEDGER_ADDR=127.0.0.1:50051 cargo run -p
//! humus-examples --bin wallet`.
//!
//! Reads its settings from the environment (see `humus_examples::wallet`):
//! a bad value exits 78, naming every bad variable; settings its ledger
//! client refuses although each passed its check exit 1 (a fault in the
//! code). Serves `wallet.v1.Wallet` and `grpc.health.v1` until Ctrl-C.

use std::process::ExitCode;

use humus::Setup;
use humus_examples::config::{self, Env, Failure};
use humus_examples::wallet::{self, Settings};

#[tokio::main]
async fn main() -> ExitCode {
    config::exit("wallet", run(Env::process()).await)
}

async fn run(env: Env) -> Result<(), Failure> {
    let settings = Settings::from_env(&env)?;
    // No exporter here: a service in production gives the builder its SDK
    // providers (OTLP, Prometheus). The propagator alone carries its
    // callers' trace context and baggage on to the ledger.
    let telemetry = humus::telemetry::Telemetry::builder()
        .propagator(wallet::propagator())
        .build();
    let setup = Setup::new()
        .with_telemetry(telemetry)
        .with_faults(wallet::faults(settings.fault_injection));
    let listener = tokio::net::TcpListener::bind(settings.listen_addr)
        .await
        .map_err(|e| Failure::software(format!("listening on {}: {e}", settings.listen_addr)))?;
    let serving = wallet::start(&setup, &settings, listener).await?;
    println!(
        "wallet: serving wallet.v1.Wallet and grpc.health.v1 on {}, calling the ledger at {}",
        serving.local_addr(),
        settings.ledger.addr
    );
    tokio::signal::ctrl_c().await.map_err(Failure::software)?;
    println!("wallet: stopping");
    serving.stop().await.map_err(Failure::software)?;
    setup.stop().await;
    Ok(())
}
