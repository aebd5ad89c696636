//! The ledger, alone: `cargo run -p humus-examples --bin ledger`.
//!
//! Reads its server's settings as any humus server reads them, with
//! `Env::server("LEDGER_")`: it listens on `LEDGER_ADDR` (default
//! `127.0.0.1:50051`), plain-text HTTP/2 (`LEDGER_PLAINTEXT`, default
//! `true` here), and takes every other server setting under `LEDGER_`
//! (`LEDGER_SHUTDOWN_GRACE=5s`). It runs on a humus server run by a humus
//! App until SIGTERM or Ctrl-C, then shuts down gracefully; a second
//! signal while it drains stops it at once (exit 130). A bad, missing or
//! misspelled variable exits 78, naming every one.

use humus::App;
use humus::app::Exit;
use humus_examples::ledger::{self, Ledger};

#[tokio::main]
async fn main() -> Exit {
    App::new()
        .run(|setup| async move {
            // Exit 78, naming every bad variable.
            let settings = ledger::env().read_all(|env| env.server(ledger::PREFIX))?;
            let configured = settings.addr.clone();
            let mut server = ledger::server(&setup, settings, &Ledger::new())?;
            server.bind().await?;
            let addr = server.local_addr().map_or(configured, |a| a.to_string());
            println!("ledger: serving ledger.v1.Ledger on {addr}");
            Ok(vec![server])
        })
        .await
}
