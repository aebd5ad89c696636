//! The resilient gRPC client (seed 000, humus `grpcclient`), on tonic.

mod classify;
#[allow(clippy::module_inception)]
mod client;
mod decide;
mod method;
mod settings;

pub use classify::{Classification, ClassifyFn};
pub use classify::{Classify, PUSHBACK_KEY, Pushback, classify_method, default_classify, pushback};
pub use client::{Client, NewError, Streaming};
pub use decide::{CallState, Ended, classify_attempt};
pub use method::{CodeRule, Method, MethodPolicy, RpcKind};
pub use settings::Settings;
