//! A binary that includes generated code and uses none of it, with every
//! warning denied: the generated humus modules (their `Client` alias, the
//! callback macro's re-export) are as quiet as tonic's and prost's items
//! in a binary crate, where unused public items warn. Built by `cargo test`
//! (which builds examples), so a warning fails the build.
#![deny(warnings)]

// This workspace's own lints, which tonic's and prost's items do not
// meet either.
#[allow(missing_docs, unreachable_pub)]
mod pb {
    include!(concat!(env!("OUT_DIR"), "/ledger.v1.rs"));
}

fn main() {}
