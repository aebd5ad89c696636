//! [`Error`]: why an HTTP call through the humus client returned no
//! response.

use std::error::Error as StdError;
use std::fmt;

use crate::circuit::Rejected;
use crate::fault::InjectedError;

/// What kind of failure an [`Error`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// The request could not be made: reqwest could not build it, or its
    /// URL is not on the client's base URL's origin. Nothing was sent, and
    /// nothing is counted.
    Request,
    /// The circuit breaker rejected the attempt: nothing was sent. Its
    /// source is the [`Rejected`].
    Rejected,
    /// The attempt got no response: the connection was refused or lost,
    /// TLS failed, or failure injection aborted it (then its source is the
    /// [`InjectedError`]).
    Transport,
    /// [`Settings::attempt_timeout`](super::Settings::attempt_timeout) cut
    /// the attempt short before its response's headers came (its source is
    /// the [`InjectedError`] when an injected delay was what it cut).
    AttemptTimeout,
    /// The call's [`Settings::timeout`](super::Settings::timeout) (or the
    /// request's own, shorter one) elapsed: the client's own timeout error,
    /// whatever cut the last attempt short (its source is reqwest's timeout
    /// error when reqwest's timer fired, and never an injected error).
    Timeout,
}

/// Why an HTTP call made through the humus [`Client`](super::Client)
/// returned no response.
///
/// A response of any status is not an error: the call returns the last
/// attempt's [`reqwest::Response`], as reqwest does (use
/// [`reqwest::Response::error_for_status`]).
///
/// [`reqwest::Response`]: https://docs.rs/reqwest/0.13/reqwest/struct.Response.html
/// [`reqwest::Response::error_for_status`]: https://docs.rs/reqwest/0.13/reqwest/struct.Response.html#method.error_for_status
pub struct Error {
    kind: Kind,
    source: Option<Box<dyn StdError + Send + Sync>>,
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("source", &self.source)
            .finish()
    }
}

impl Error {
    pub(super) fn new(kind: Kind, source: impl Into<Box<dyn StdError + Send + Sync>>) -> Error {
        Error {
            kind,
            source: Some(source.into()),
        }
    }

    pub(super) fn bare(kind: Kind) -> Error {
        Error { kind, source: None }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Whether a timeout ended the call or its last attempt
    /// ([`Kind::Timeout`] or [`Kind::AttemptTimeout`]).
    pub fn is_timeout(&self) -> bool {
        matches!(self.kind, Kind::Timeout | Kind::AttemptTimeout)
    }

    /// The injected error behind this one, if failure injection ended the
    /// attempt (an abort, or a delay that `attempt_timeout` cut short).
    pub fn injected(&self) -> Option<&InjectedError> {
        self.find::<InjectedError>()
    }

    /// The breaker's rejection, for [`Kind::Rejected`].
    pub fn rejected(&self) -> Option<&Rejected> {
        self.find::<Rejected>()
    }

    /// reqwest's error behind this one, if reqwest returned one.
    pub fn reqwest(&self) -> Option<&reqwest::Error> {
        self.find::<reqwest::Error>()
    }

    fn find<E: StdError + 'static>(&self) -> Option<&E> {
        let mut next: Option<&(dyn StdError + 'static)> = self.source.as_deref().map(|e| e as _);
        while let Some(e) = next {
            if let Some(found) = e.downcast_ref::<E>() {
                return Some(found);
            }
            next = e.source();
        }
        None
    }

    /// The attempt's `error.type`, as its span and
    /// `http.client.request.duration` record it:
    /// [`fault::ERROR_TYPE`](crate::fault::ERROR_TYPE) for every failure
    /// failure injection caused, `timeout` for a timeout,
    /// [`HTTP_REJECTED_ERROR_TYPE`](crate::telemetry::names::HTTP_REJECTED_ERROR_TYPE)
    /// for a rejection, and for a transport error `connect` (the
    /// connection could not be made) or `transport`.
    pub fn error_type(&self) -> &'static str {
        if self.injected().is_some() {
            return InjectedError::ERROR_TYPE;
        }
        match self.kind {
            Kind::Request => "request",
            Kind::Rejected => crate::telemetry::names::HTTP_REJECTED_ERROR_TYPE,
            Kind::AttemptTimeout | Kind::Timeout => "timeout",
            Kind::Transport => match self.reqwest() {
                Some(e) if e.is_connect() => "connect",
                _ => "transport",
            },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind {
            Kind::Request => "http request could not be made",
            Kind::Rejected => "http call rejected by the circuit breaker",
            Kind::Transport => "http attempt got no response",
            Kind::AttemptTimeout => "http attempt timed out (attempt_timeout)",
            Kind::Timeout => "http call timed out (timeout)",
        })?;
        if let Some(source) = &self.source {
            write!(f, ": {source}")?;
        }
        Ok(())
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source.as_deref().map(|e| e as _)
    }
}
