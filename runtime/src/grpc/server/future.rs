//! The response future and body of [`StripScenario`](super::StripScenario),
//! which are those of every RPC humus's [`Server`](super::Server) serves:
//! the handler's, with its panic answered `INTERNAL`.

pub use super::body::ResponseBody;
pub use super::rpc::ResponseFuture;
