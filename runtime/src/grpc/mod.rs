//! gRPC: the resilient [`client`] and the server-side scenario layer
//! ([`server`]).

pub mod client;
pub mod server;
