//! The wallet, alone: `LEDGER_ADDR=127.0.0.1:50051 cargo run -p
//! humus-examples --bin wallet`.
//!
//! Reads its settings from the environment (see `humus_examples::wallet`):
//! a bad value exits 78, naming every bad variable; settings its ledger
//! client refuses although each passed its check exit 1 (a fault in the
//! code). Serves `wallet.v1.Wallet` and `grpc.health.v1` on a humus server,
//! run by a humus App, until SIGTERM or Ctrl-C, then shuts down gracefully;
//! a second signal while it drains stops it at once (exit 130).

use std::process::ExitCode;

use humus_examples::config::{self, Env};
use humus_examples::wallet::{self, Settings};

#[tokio::main]
async fn main() -> ExitCode {
    let settings = match Settings::from_env(&Env::process()) {
        Ok(settings) => settings,
        Err(e) => return config::exit("wallet", Err(e.into())),
    };
    // No exporter here: a service in production gives the builder its SDK
    // providers (OTLP, Prometheus). The propagator alone carries its
    // callers' trace context and baggage on to the ledger.
    let telemetry = humus::telemetry::Telemetry::builder()
        .propagator(wallet::propagator())
        .build();
    let exit = wallet::app(telemetry, &settings)
        .run(move |setup| async move {
            let mut server = wallet::server(&setup, &settings)?;
            server.bind().await?;
            println!(
                "wallet: serving wallet.v1.Wallet and grpc.health.v1 on {}, calling the ledger at {}",
                settings.listen_addr, settings.ledger.addr
            );
            Ok(vec![server])
        })
        .await;
    config::exit_app("wallet", exit)
}
