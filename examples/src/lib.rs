//! The humus examples: the wallet walkthrough, a wallet service whose
//! handlers call its ledger through a typed humus client.
//!
//! | module | what it holds |
//! |---|---|
//! | [`pb`] | the messages and tonic stubs of `ledger.v1` and `wallet.v1` |
//! | [`config`] | settings from environment variables, checked; exit codes 78 and 1 |
//! | [`ledger`] | the ledger service: the dependency, with knobs that make it misbehave |
//! | [`recording`] | OpenTelemetry SDK providers recording in memory, and readers of what they hold |

pub mod config;
pub mod ledger;
pub mod recording;

/// The generated code of the walkthrough's protos.
pub mod pb {
    /// `ledger.v1`.
    pub mod ledger {
        /// `ledger.v1`: the ledger's messages and stubs.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/ledger.v1.rs"));
        }
    }
    /// `wallet.v1`.
    pub mod wallet {
        /// `wallet.v1`: the wallet's messages and stubs.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/wallet.v1.rs"));
        }
    }
}
