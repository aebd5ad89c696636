//! The humus examples: the wallet walkthrough, a wallet service whose
//! handlers call its ledger through a typed humus client
//! ([design](humus::design::client)).
//!
//! Run it with `cargo run -p humus-examples --bin walkthrough`; each
//! service also runs alone (`--bin ledger`, `--bin wallet`).
//!
//! Each reads its settings from environment variables with humus's
//! [`app::Env`](humus::app::Env), as the README's quick start does: a
//! group of settings per prefix (`env.client("LEDGER_")`,
//! `env.server("WALLET_")`, `env.http_client("RATES_")`), and the
//! service's own with `env.read`, every bad, missing or misspelled
//! variable named at once, exit 78 ([`wallet::Settings::read`]).
//!
//! | module | what it holds |
//! |---|---|
//! | [`pb`] | the code `humus-build` generates from `proto/`: messages, tonic stubs, typed humus clients |
//! | [`ledger`] | the ledger service: the dependency, with knobs that make it misbehave, on a humus server |
//! | [`wallet`] | the wallet service: its ledger client, its handlers, its readiness |
//! | [`rates`] | the exchange-rate service (HTTP, axum, humus's `ContextLayer`) and the wallet's humus HTTP client of it |
//! | [`recording`] | OpenTelemetry SDK providers recording in memory, and readers of what they hold |
//! | [`running`] | a service's App run in a task of this process, stopped on demand |
//! | [`walkthrough`] | the phases, the table and the timeline |

pub mod ledger;
pub mod rates;
pub mod recording;
pub mod running;
pub mod walkthrough;
pub mod wallet;

/// The code `humus-build` generates from `proto/`.
pub mod pb {
    /// `ledger.v1`.
    pub mod ledger {
        /// `ledger.v1`: the ledger's messages, tonic stubs and typed humus
        /// client (`ledger_humus::LedgerProtoClient`).
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/ledger.v1.rs"));
        }
    }
    /// `wallet.v1`.
    pub mod wallet {
        /// `wallet.v1`: the wallet's messages, tonic stubs and typed humus
        /// client.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/wallet.v1.rs"));
        }
    }
}

/// A settings error's refused variables, in order, and its message; the
/// error must be a settings one (exit 78) that names variables.
#[cfg(test)]
fn refused(err: humus::app::Error) -> (Vec<String>, String) {
    assert_eq!(err.exit_code(), 78, "{err}");
    let vars = err
        .get_ref()
        .downcast_ref::<humus::app::EnvError>()
        .expect("an EnvError")
        .vars()
        .iter()
        .map(|v| v.name().to_owned())
        .collect();
    (vars, err.to_string())
}
