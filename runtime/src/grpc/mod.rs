//! gRPC: the resilient [`client`], the server-side scenario layer
//! ([`server`]), and the [`deadline`] and context a served RPC hands to the
//! calls its handler makes.

pub mod client;
pub mod server;
pub(crate) mod wire;

pub(crate) use crate::addr;
/// The inherited deadline and context, shared by every transport:
/// [`crate::deadline`], here where gRPC's users look for it.
pub use crate::deadline;
