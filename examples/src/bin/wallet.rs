//! The wallet, alone: `LEDGER_ADDR=127.0.0.1:50051 WALLET_PLAINTEXT=true
//! cargo run -p humus-examples --bin wallet`.
//!
//! Reads its settings with humus's `app::Env`, as the README's quick start
//! does (see `humus_examples::wallet`): the ledger client's under
//! `LEDGER_`, its server's (`WALLET_ADDR`, default `127.0.0.1:50052`;
//! `WALLET_PLAINTEXT=true`, which it must be told) and its own
//! (`WALLET_FAULT_INJECTION`, `WALLET_SCENARIO_TOKEN`,
//! `WALLET_EVENTS_BROKERS`) under `WALLET_`, the exchange-rate client's
//! under `RATES_`. A bad, missing or misspelled variable exits 78, naming
//! every one (a pair of values that no one field's check sees wrong, such
//! as `LEDGER_BACKOFF_MAX` below `LEDGER_BACKOFF_BASE`, too); a server that
//! cannot listen (its address taken) exits 1. Serves `wallet.v1.Wallet` and
//! `grpc.health.v1` on a humus server, run by a humus App, until SIGTERM
//! or Ctrl-C, then shuts down gracefully; a second signal while it drains
//! stops it at once (exit 130).

use humus::app::Exit;
use humus_examples::wallet::{self, Settings};

#[tokio::main]
async fn main() -> Exit {
    // Read before the App: whether failure injection is on decides how
    // the App is built.
    let settings = match Settings::from_env(wallet::env()) {
        Ok(settings) => settings,
        // Exit 78, naming every bad variable.
        Err(e) => return Exit::failed(e),
    };
    // No exporter here: a service in production gives the builder its SDK
    // providers (OTLP, Prometheus). The propagator alone carries its
    // callers' trace context and baggage on to the ledger.
    let telemetry = humus::telemetry::Telemetry::builder()
        .propagator(wallet::propagator())
        .build();
    wallet::app(telemetry, &settings)
        .run(move |setup| async move {
            let mut server = wallet::server(&setup, &settings)?;
            server.bind().await?;
            let addr = server
                .local_addr()
                .map_or_else(|| settings.server.addr.clone(), |a| a.to_string());
            println!(
                "wallet: serving wallet.v1.Wallet and grpc.health.v1 on {addr}, calling the ledger at {}",
                settings.ledger.addr
            );
            Ok(vec![server])
        })
        .await
}
