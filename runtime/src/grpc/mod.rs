//! gRPC: the resilient [`client`], the server-side scenario layer
//! ([`server`]), and the [`deadline`] and context a served RPC hands to the
//! calls its handler makes.

pub(crate) mod addr;
pub mod client;
pub mod deadline;
pub mod server;
