//! HTTP: the resilient HTTP [`client`], on reqwest, and the [`server`]
//! layer that extracts the caller's trace context and baggage and strips
//! untrusted failure scenarios, for axum and hyper servers.

pub mod client;
pub mod server;
