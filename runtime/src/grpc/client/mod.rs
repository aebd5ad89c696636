//! The resilient gRPC client (seed 000, humus `grpcclient`), on tonic.

mod classify;
mod method;

pub use classify::{Classification, ClassifyFn};
pub use method::{CodeRule, Method, MethodPolicy, RpcKind};
