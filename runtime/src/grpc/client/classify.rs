//! Classification of an attempt's result (seed 000, "How an attempt's
//! result counts").
//!
//! PLACEHOLDER: the default classify and the pushback land with issue 3.

use std::time::Duration;

use crate::{circuit, retry};

/// How one attempt's result counts: for retries and for the breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classification {
    /// Whether another attempt follows.
    pub retry: retry::Verdict,
    /// The server's pushback: the least time to wait before the next attempt.
    pub retry_after: Option<Duration>,
    /// How the attempt counts in the dependency's circuit breaker.
    pub breaker: circuit::Outcome,
}

/// A classify function: given the full method name (`/pkg.Service/Method`),
/// the attempt's status (`None` for OK) and the attempt's trailer, it says
/// how the attempt counts. Must be callable from many tasks at once.
pub type ClassifyFn = fn(
    method: &str,
    status: Option<&tonic::Status>,
    trailer: &tonic::metadata::MetadataMap,
) -> Classification;
