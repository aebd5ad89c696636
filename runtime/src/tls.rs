//! The rustls crypto provider humus's TLS uses.

use std::sync::{Arc, OnceLock};

use rustls::crypto::CryptoProvider;

/// rustls's `ring` provider, the one humus is built with: the HTTP
/// client's default TLS config, the test CA and [`install_crypto_provider`]
/// use it, whatever provider the process installed as its default.
///
/// It is built once; each call shares it.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    static RING: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    RING.get_or_init(|| {
        // rustls 0.23.48 deprecates ring's constructor (ring has no
        // post-quantum key exchange) and names no replacement within 0.23:
        // ring's provider moves to its own crate with rustls 0.24. This is
        // the one place humus calls it, so that neither humus nor a
        // service built with `-D warnings` sees the warning; `allow`, not
        // `expect`, as the versions before 0.23.48 do not deprecate it.
        #[allow(deprecated)]
        let ring = rustls::crypto::ring::default_provider();
        Arc::new(ring)
    })
    .clone()
}

/// Installs [`crypto_provider`] (`ring`) as the process's default rustls
/// provider, unless the process already has one, and returns the default.
///
/// humus builds reqwest with rustls and no crypto provider of reqwest's
/// choosing, and Cargo turns that on for the service's reqwest too: a
/// plain `reqwest::Client::new()` elsewhere in the service then needs a
/// process-wide provider, or it panics. [`App::run`](crate::App::run)
/// calls this first; code that runs without an App (a test, a tool) calls
/// it before building such a client.
pub fn install_crypto_provider() -> Arc<CryptoProvider> {
    if let Some(installed) = CryptoProvider::get_default() {
        return installed.clone();
    }
    // Another thread may have installed one since: that one wins.
    let _ = CryptoProvider::install_default((*crypto_provider()).clone());
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(crypto_provider)
}
