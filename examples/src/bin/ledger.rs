//! The ledger, alone: `cargo run -p humus-examples --bin ledger`.
//!
//! Listens on `LEDGER_LISTEN_ADDR` (default `127.0.0.1:50051`), plain-text
//! HTTP/2, on a humus server run by a humus App, until SIGTERM or Ctrl-C,
//! then shuts down gracefully; a second signal while it drains stops it at
//! once (exit 130). A bad value exits 78, naming the variable.

use std::process::ExitCode;

use humus::App;
use humus_examples::config::{self, Env, parse};
use humus_examples::ledger::{self, Ledger};

#[tokio::main]
async fn main() -> ExitCode {
    let addr = match config::read(&Env::process(), |vars| {
        vars.or(
            ledger::ENV_LISTEN_ADDR,
            ledger::DEFAULT_LISTEN_ADDR
                .parse()
                .expect("a valid default"),
            parse::listen_addr,
        )
    }) {
        Ok(addr) => addr,
        Err(e) => return config::exit("ledger", Err(e.into())),
    };
    let exit = App::new()
        .run(move |setup| async move {
            let mut server =
                ledger::server(&setup, ledger::settings(addr.to_string()), &Ledger::new())?;
            server.bind().await?;
            println!("ledger: serving ledger.v1.Ledger on {addr}");
            Ok(vec![server])
        })
        .await;
    config::exit_app("ledger", exit)
}
