//! The resilient gRPC client (seed 000, humus `grpcclient`), on tonic.

mod attempt;
mod classify;
#[allow(clippy::module_inception)]
mod client;
mod codec;
mod connection;
mod decide;
mod hooks;
mod method;
mod settings;
mod stream;

pub use classify::{Classification, ClassifyFn};
pub use classify::{Classify, PUSHBACK_KEY, Pushback, classify_method, default_classify, pushback};
pub use client::Client;
pub use decide::{CallState, Ended, classify_attempt};
pub use method::{CodeRule, Method, MethodPolicy, RpcKind};
pub use settings::{
    InvalidValue, NewError, Settings, check_addr, check_backoff_base, check_backoff_max,
    check_breaker, check_max_attempts, check_retry_budget, check_server_name, check_timeout,
    check_tls,
};
pub use stream::Streaming;
