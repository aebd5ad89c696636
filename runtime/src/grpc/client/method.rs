//! The static per-method descriptor that generated code targets.

use crate::{circuit, retry};

use super::ClassifyFn;

/// The kind of an RPC, as its `.proto` declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RpcKind {
    /// One request, one response.
    Unary,
    /// A stream of requests, one response.
    ClientStreaming,
    /// One request, a stream of responses.
    ServerStreaming,
    /// Streams both ways.
    Streaming,
}

/// One entry of a method's classify table: what an attempt that ended with
/// `code` means, consulted before the client-wide classify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeRule {
    /// The gRPC status code this entry is for.
    pub code: tonic::Code,
    /// Whether another attempt follows.
    pub retry: retry::Verdict,
    /// How the attempt counts in the breaker.
    pub breaker: circuit::Outcome,
}

/// What one method needs that differs from the client's defaults,
/// declared at compile time (a `.proto` option or `#[humus::client]`).
#[derive(Clone, Copy, Debug)]
pub struct MethodPolicy {
    /// The method is never sent twice: a `Retry` verdict becomes `Stop`,
    /// and the breaker outcome stays what the classifier said. A request
    /// the server never saw is still sent again within its attempt
    /// (gRPC's transparent retry: a stream the server refused with
    /// `REFUSED_STREAM`, one past the last stream of its GOAWAY, one the
    /// connection closed before sending), as that sends nothing twice.
    pub never_retry: bool,
    /// Code → (verdict, outcome), consulted before the classify function.
    pub table: &'static [CodeRule],
    /// A classify function for this method alone, consulted after the
    /// table and before the client-wide classify.
    pub classify: Option<ClassifyFn>,
}

impl MethodPolicy {
    /// No override: the client's classify decides everything.
    pub const DEFAULT: MethodPolicy = MethodPolicy {
        never_retry: false,
        table: &[],
        classify: None,
    };
}

impl Default for MethodPolicy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A static descriptor of one RPC method: what the generated typed client
/// passes to [`Client`](super::Client) on each call, so that no policy is
/// looked up by string at run time.
#[derive(Clone, Copy, Debug)]
pub struct Method {
    /// The full method name, `/package.Service/Method`.
    pub full_name: &'static str,
    /// The failure-injection point, `grpc:package.Service/Method`.
    pub point: &'static str,
    /// The RPC's kind.
    pub kind: RpcKind,
    /// The method's compile-time policy.
    pub policy: MethodPolicy,
}
