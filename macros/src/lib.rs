//! `#[humus::client]`: a typed humus client defined in Rust, with
//! per-method policy checked at compile time.
//!
//! PLACEHOLDER: the attribute lands with issue 5.
#![warn(
    missing_debug_implementations,
    missing_docs,
    rust_2018_idioms,
    unreachable_pub
)]
#![deny(rustdoc::broken_intra_doc_links)]

use proc_macro::TokenStream;

/// Defines a typed humus client for a generated service, with per-method
/// policy. Not implemented yet.
#[proc_macro_attribute]
pub fn client(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let _ = item;
    "compile_error!(\"`#[humus::client]` is not implemented yet\");"
        .parse()
        .expect("a valid token stream")
}
