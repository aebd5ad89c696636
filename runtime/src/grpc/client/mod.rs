//! The resilient gRPC client (seed 000, humus `grpcclient`), on tonic.

mod classify;
#[allow(clippy::module_inception)]
mod client;
mod method;
mod settings;

pub use classify::{Classification, ClassifyFn};
pub use client::{Client, NewError, Streaming};
pub use method::{CodeRule, Method, MethodPolicy, RpcKind};
pub use settings::Settings;
