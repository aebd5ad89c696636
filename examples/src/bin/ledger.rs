//! The ledger, alone: `cargo run -p humus-examples --bin ledger`.
//!
//! Listens on `LEDGER_LISTEN_ADDR` (default `127.0.0.1:50051`), plain-text
//! HTTP/2, until Ctrl-C. A bad value exits 78, naming the variable.

use std::process::ExitCode;

use humus_examples::config::{self, Env, Failure, parse};
use humus_examples::ledger::{self, Ledger};

#[tokio::main]
async fn main() -> ExitCode {
    config::exit("ledger", run(Env::process()).await)
}

async fn run(env: Env) -> Result<(), Failure> {
    let addr = config::read(&env, |vars| {
        vars.or(
            ledger::ENV_LISTEN_ADDR,
            ledger::DEFAULT_LISTEN_ADDR
                .parse()
                .expect("a valid default"),
            parse::listen_addr,
        )
    })?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Failure::software(format!("listening on {addr}: {e}")))?;
    let serving = ledger::serve(&Ledger::new(), listener).map_err(Failure::software)?;
    println!(
        "ledger: serving ledger.v1.Ledger on {}",
        serving.local_addr()
    );
    tokio::signal::ctrl_c().await.map_err(Failure::software)?;
    println!("ledger: stopping");
    serving.stop().await.map_err(Failure::software)
}
