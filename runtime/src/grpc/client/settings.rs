//! `Settings`: one dependency's client settings.
//!
//! PLACEHOLDER: every field, its default and its check land with issue 4.

/// The settings of one dependency's [`Client`](super::Client).
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// The dependency's address, `host:port`.
    pub addr: String,
}
