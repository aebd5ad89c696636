//! Classification of an attempt's result ([design](crate::design::client#classification);
//! [the pushback](crate::design::client#the-pushback)).
//!
//! An attempt's result is classified twice: for retries (a
//! [`Verdict`](retry::Verdict)) and for the dependency's circuit breaker (an
//! [`Outcome`](circuit::Outcome)). What a dependency's codes mean is the
//! [`Classify`] function's to say ([`default_classify`] unless the user
//! sets another); a method's compile-time [`MethodPolicy`] comes first
//! ([`classify_method`]); the rules that are about the call rather than
//! the dependency are the client's own
//! ([`classify_attempt`](super::classify_attempt)).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tonic::metadata::MetadataMap;
use tonic::{Code, Status};

use super::MethodPolicy;
use super::connection;
use crate::circuit::Outcome;
use crate::retry::Verdict;
use crate::retry::after::{Given, whole_number};

pub use crate::call::Classification;

/// A classify function: given the full method name (`/pkg.Service/Method`),
/// the attempt's status (`None` for OK) and the attempt's trailer, it says
/// how the attempt counts. Must be callable from many tasks at once.
pub type ClassifyFn = fn(
    method: &str,
    status: Option<&tonic::Status>,
    trailer: &tonic::metadata::MetadataMap,
) -> Classification;

/// The trailer in which a server says how long to wait before the next
/// attempt, in milliseconds (gRFC A6).
pub const PUSHBACK_KEY: &str = "grpc-retry-pushback-ms";

/// What an attempt's trailer says under [`PUSHBACK_KEY`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pushback {
    /// The key is absent: the server says nothing.
    Absent,
    /// One non-negative whole number of milliseconds: wait at least this
    /// long before the next attempt. A number too large for a `u64` of
    /// milliseconds is taken as `u64::MAX` of them.
    After(Duration),
    /// A negative value, one that is not a number, or the key given more
    /// than once: the server asks not to be tried again.
    DoNotRetry,
}

/// Reads the pushback of `trailer` ([`PUSHBACK_KEY`]).
///
/// A value is a number only when it is one or more ASCII digits and
/// nothing else: no sign, no spaces, no decimal point. Never panics,
/// whatever the trailer holds.
///
/// Design: [the pushback](crate::design::client#the-pushback); gRFC A6, "Pushback".
pub fn pushback(trailer: &MetadataMap) -> Pushback {
    let value = match Given::of(trailer.get_all(PUSHBACK_KEY).iter()) {
        Given::Absent => return Pushback::Absent,
        Given::Once(value) => value,
        Given::More => return Pushback::DoNotRetry,
    };
    match whole_number(value.as_encoded_bytes()) {
        Some(millis) => Pushback::After(Duration::from_millis(millis)),
        None => Pushback::DoNotRetry,
    }
}

impl Pushback {
    /// Applies the pushback to a verdict of a code other than OK: a
    /// `Retry` takes the pushback as its `retry_after`, or becomes `Stop`
    /// when the server asks not to be tried again; `Success` and `Stop`
    /// are left as they are, with no `retry_after`.
    fn apply(self, retry: Verdict, breaker: Outcome) -> Classification {
        match (retry, self) {
            (Verdict::Retry, Pushback::Absent) => Classification {
                retry,
                retry_after: None,
                breaker,
            },
            (Verdict::Retry, Pushback::After(after)) => Classification {
                retry,
                retry_after: Some(after),
                breaker,
            },
            (Verdict::Retry, Pushback::DoNotRetry) => Classification::stop(breaker),
            (Verdict::Success | Verdict::Stop, _) => Classification {
                retry,
                retry_after: None,
                breaker,
            },
        }
    }
}

/// The HTTP status of a non-gRPC answer the client mapped to `status` (a
/// proxy's error page: an HTTP 429 from a gateway's rate limit, a 503 from
/// a load balancer with no backend), or `None` for a status a gRPC server
/// sent (or an interceptor, a layer or the transport made).
///
/// The client maps an answer with no `grpc-status` and no gRPC
/// content-type (or an HTTP status other than 200) to a gRPC status by
/// gRPC's mapping (429, 502, 503, 504 → Unavailable; 400 → Internal; 401 →
/// Unauthenticated; 403 → PermissionDenied; 404 → Unimplemented; any other
/// → Unknown), says the HTTP status in the message it writes, and gives
/// the status an [`HttpAnswer`](super::HttpAnswer) as its
/// [`source`](std::error::Error::source); this reads that source, so a
/// classify function tells a proxy's page from the backend's own
/// Unavailable by type: a server's status whose message reads like the
/// client's is still the server's (`None`). A status whose code is not the
/// one its HTTP status maps to is not one the client mapped: `None`.
///
/// ```
/// use humus::circuit::Outcome;
/// use humus::grpc::client::{Classification, Classify, mapped_http_status};
///
/// // This gateway answers 502 while it deploys, which is over in a
/// // moment: retry it, but spare the breaker.
/// let default = Classify::default();
/// let ours = Classify::new(move |method, status, trailer| {
///     let c = default.classify(method, status, trailer);
///     match status.and_then(mapped_http_status) {
///         Some(http::StatusCode::BAD_GATEWAY) => Classification { breaker: Outcome::Ignored, ..c },
///         _ => c,
///     }
/// });
/// # let _ = ours;
/// let theirs = tonic::Status::unavailable("the server answered HTTP 502 Bad Gateway");
/// assert_eq!(mapped_http_status(&theirs), None);
/// ```
///
/// Design: [the default](crate::design::client#the-default).
pub fn mapped_http_status(status: &Status) -> Option<http::StatusCode> {
    connection::mapped_http_status(status)
}

/// The default classify: decides by the status code and the
/// [`pushback`] alone, never a status's message or details, and whatever
/// the method; except that a proxy's rate limit (an HTTP 429 the client
/// mapped to Unavailable, as [`mapped_http_status`] tells by the status's
/// typed source) is the dependency shedding load, classified as
/// ResourceExhausted is (and as the HTTP client's
/// [default](crate::http::client::default_classify) classifies a 429):
/// counted against the dependency, retried only when it says when.
///
/// | code | retry | breaker |
/// |---|---|---|
/// | OK (no status, or [`Code::Ok`](https://docs.rs/tonic/0.14/tonic/enum.Code.html#variant.Ok)) | Success | Success |
/// | Unavailable mapped from a proxy's HTTP 429, with a pushback (its `Retry-After`) | Retry after it | Failure |
/// | Unavailable mapped from a proxy's HTTP 429, without one | Stop | Failure |
/// | Unavailable (any other, a proxy's 502, 503 and 504 included) | Retry | Failure |
/// | ResourceExhausted | Retry with a pushback, else Stop | Failure |
/// | DeadlineExceeded (the server's: the call's own deadline, and each attempt's timeout, are the client's to decide) | Stop | Failure |
/// | Cancelled (the server's, or the connection closing) | Stop | Ignored |
/// | any other code, Unknown included (the dependency answered) | Stop | Success |
///
/// A Retry takes a valid pushback as its `retry_after`; a pushback that is
/// negative, not a number or given more than once turns it into Stop. OK
/// is never affected by the pushback.
///
/// An error with no gRPC status (such as one an interceptor or the
/// transport makes) reaches the classifier as tonic's [`Code::Unknown`](https://docs.rs/tonic/0.14/tonic/enum.Code.html#variant.Unknown).
///
/// Design: [the default](crate::design::client#the-default), [the pushback](crate::design::client#the-pushback).
pub fn default_classify(
    method: &str,
    status: Option<&Status>,
    trailer: &MetadataMap,
) -> Classification {
    let _ = method;
    let code = status.map_or(Code::Ok, Status::code);
    let (retry, breaker) = match code {
        Code::Ok => {
            return Classification {
                retry: Verdict::Success,
                retry_after: None,
                breaker: Outcome::Success,
            };
        }
        // A rate limit is load shed, as ResourceExhausted is (the HTTP
        // client's rule for a 429): retried only after the wait it asks
        // for, and counted against the dependency.
        Code::Unavailable
            if status.and_then(mapped_http_status) == Some(http::StatusCode::TOO_MANY_REQUESTS) =>
        {
            return load_shed(trailer);
        }
        Code::Unavailable => (Verdict::Retry, Outcome::Failure),
        Code::ResourceExhausted => return load_shed(trailer),
        Code::DeadlineExceeded => (Verdict::Stop, Outcome::Failure),
        Code::Cancelled => (Verdict::Stop, Outcome::Ignored),
        _ => (Verdict::Stop, Outcome::Success),
    };
    pushback(trailer).apply(retry, breaker)
}

/// A load shed (ResourceExhausted, or a rate limit's 429): retried only
/// after the wait `trailer`'s pushback asks for, and a Failure.
fn load_shed(trailer: &MetadataMap) -> Classification {
    let push = pushback(trailer);
    let retry = match push {
        Pushback::After(_) => Verdict::Retry,
        Pushback::Absent | Pushback::DoNotRetry => Verdict::Stop,
    };
    push.apply(retry, Outcome::Failure)
}

type DynClassify = dyn Fn(&str, Option<&Status>, &MetadataMap) -> Classification + Send + Sync;

/// The client-wide classify function, as `Settings` holds it: a cheaply
/// cloned (an [`Arc`]) wrapper of any closure with [`ClassifyFn`]'s
/// arguments. [`Classify::default`] is [`default_classify`].
///
/// The function is called once per attempt, on the task that made the
/// call, from many tasks at once. It is asked about OK too (status
/// `None`), so a classify that retries every result would send a call that
/// succeeded again: answer `Success` for OK, as the default does.
///
/// A classify of one's own usually handles what differs and hands the rest
/// to the default:
///
/// ```
/// use humus::circuit::Outcome;
/// use humus::grpc::client::{Classification, Classify};
/// use humus::retry::Verdict;
/// use tonic::Code;
///
/// // This API's Aborted means another write raced this one, which is over
/// // by the next attempt: retry it, and count it for the dependency.
/// let default = Classify::default();
/// let ours = Classify::new(move |method, status, trailer| {
///     if status.is_some_and(|s| s.code() == Code::Aborted) {
///         return Classification { retry: Verdict::Retry, retry_after: None, breaker: Outcome::Success };
///     }
///     default.classify(method, status, trailer)
/// });
/// let aborted = tonic::Status::aborted("raced");
/// let c = ours.classify("/ledger.v1.Ledger/Transfer", Some(&aborted), &Default::default());
/// assert_eq!(c.retry, Verdict::Retry);
/// ```
///
/// Design: [writing a classifier](crate::design::client#writing-a-classifier).
#[derive(Clone)]
pub struct Classify {
    f: Arc<DynClassify>,
    is_default: bool,
}

impl Classify {
    /// Wraps `f`, which gets the full method name (`/pkg.Service/Method`),
    /// the attempt's status (`None` for OK) and its trailer.
    pub fn new(
        f: impl Fn(&str, Option<&Status>, &MetadataMap) -> Classification + Send + Sync + 'static,
    ) -> Classify {
        Classify {
            f: Arc::new(f),
            is_default: false,
        }
    }

    /// Classifies one attempt of `method` that ended with `status` (`None`
    /// for OK) and `trailer`.
    ///
    /// # Panics
    ///
    /// Whatever the wrapped function panics with; nothing is caught.
    pub fn classify(
        &self,
        method: &str,
        status: Option<&Status>,
        trailer: &MetadataMap,
    ) -> Classification {
        (self.f)(method, status, trailer)
    }
}

impl Default for Classify {
    /// [`default_classify`].
    fn default() -> Self {
        Classify {
            f: Arc::new(default_classify),
            is_default: true,
        }
    }
}

impl fmt::Debug for Classify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_default {
            "Classify(default)"
        } else {
            "Classify(custom)"
        })
    }
}

/// Classifies an attempt of a method under its compile-time `policy`:
///
/// 1. the first entry of `policy.table` for the status's code ([`Code::Ok`](https://docs.rs/tonic/0.14/tonic/enum.Code.html#variant.Ok)
///    for OK) decides, with the server's [`pushback`] applied to a Retry as
///    the default applies it (a valid one becomes `retry_after`, an invalid
///    one turns Retry into Stop; OK ignores it);
/// 2. else `policy.classify`, if the method has its own;
/// 3. else the client-wide `classify`.
///
/// Then, when `policy.never_retry`, a Retry becomes Stop with no
/// `retry_after`; the breaker outcome stays what was classified.
///
/// `method` is the full method name (`/pkg.Service/Method`), passed to
/// the classify functions.
///
/// # Panics
///
/// Whatever a classify function panics with; nothing is caught.
///
/// Source: humus's compile-time per-method policy (what the code
/// generator bakes into each method's descriptor): [design](crate::design::client#per-method-policy).
pub fn classify_method(
    policy: &MethodPolicy,
    classify: &Classify,
    method: &str,
    status: Option<&Status>,
    trailer: &MetadataMap,
) -> Classification {
    let code = status.map_or(Code::Ok, Status::code);
    let c = if let Some(rule) = policy.table.iter().find(|r| r.code == code) {
        if code == Code::Ok {
            Classification {
                retry: rule.retry,
                retry_after: None,
                breaker: rule.breaker,
            }
        } else {
            pushback(trailer).apply(rule.retry, rule.breaker)
        }
    } else if let Some(own) = policy.classify {
        own(method, status, trailer)
    } else {
        classify.classify(method, status, trailer)
    };
    if policy.never_retry && c.retry == Verdict::Retry {
        Classification::stop(c.breaker)
    } else {
        c
    }
}
