//! The resilient gRPC client (seed 000, humus `grpcclient`), on tonic.

mod attempt;
mod classify;
#[allow(clippy::module_inception)]
mod client;
mod codec;
mod connection;
mod hooks;
mod method;
mod settings;
mod stream;

pub use classify::{Classification, ClassifyFn};
pub use client::Client;
pub use method::{CodeRule, Method, MethodPolicy, RpcKind};
pub use settings::{
    InvalidValue, NewError, Settings, check_addr, check_backoff_base, check_backoff_max,
    check_breaker, check_max_attempts, check_retry_budget, check_server_name, check_timeout,
    check_tls,
};
pub use stream::Streaming;
