//! [`Error`]: why an HTTP call through the humus client returned no
//! response.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use crate::circuit::Rejected;
pub(super) use crate::deadline::Bound;
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
    /// The call's deadline passed: the earliest of its
    /// [`Settings::timeout`](super::Settings::timeout), the request's own
    /// timeout ([`RequestBuilder::timeout`](super::RequestBuilder::timeout))
    /// and the deadline of the RPC being served
    /// ([`Inherited`](crate::grpc::deadline::Inherited)), and the error's
    /// message says which of the three it was. The client's own timeout
    /// error, whatever cut the last attempt short: its source is reqwest's
    /// timeout error when reqwest's timer fired, and never an injected
    /// error (an injected delay that ran into the deadline counts as the
    /// time it took, as a slow dependency's would; the attempt's span
    /// still records it as injected: [`Error::error_type`]).
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
#[derive(Debug)]
pub struct Error {
    kind: Kind,
    /// For [`Kind::Timeout`]: which bound the call's deadline was.
    bound: Option<Bound>,
    /// The dependency: its client's base URL, which every error of a call
    /// names.
    dependency: Option<Arc<str>>,
    /// What the client says of the failure itself, after its kind (why a
    /// request could not be made): part of the message, not a cause.
    detail: Option<Box<str>>,
    source: Option<Box<dyn StdError + Send + Sync>>,
}

impl Error {
    pub(super) fn new(kind: Kind, source: impl Into<Box<dyn StdError + Send + Sync>>) -> Error {
        Error {
            kind,
            bound: None,
            dependency: None,
            detail: None,
            source: Some(source.into()),
        }
    }

    /// An error of `kind` with no cause, whose message says `detail` after
    /// its kind's words.
    pub(super) fn says(kind: Kind, detail: impl Into<String>) -> Error {
        Error {
            detail: Some(detail.into().into_boxed_str()),
            ..Error::bare(kind)
        }
    }

    pub(super) fn bare(kind: Kind) -> Error {
        Error {
            kind,
            bound: None,
            dependency: None,
            detail: None,
            source: None,
        }
    }

    /// This error, of a call whose deadline was `bound` (which only a
    /// [`Kind::Timeout`] says).
    pub(super) fn bounded(mut self, bound: Bound) -> Error {
        if self.kind == Kind::Timeout {
            self.bound = Some(bound);
        }
        self
    }

    /// This error, of the dependency at `base_url` (its client's).
    pub(super) fn of(mut self, base_url: &Arc<str>) -> Error {
        self.dependency = Some(base_url.clone());
        self
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
    /// attempt (an abort, or a delay that `attempt_timeout` cut short;
    /// never for [`Kind::Timeout`]: see [`error_type`](Error::error_type)).
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
        crate::chain::find(self.source.as_deref().map(|e| e as _))
    }

    /// The `error.type` of this error, as an attempt's span and
    /// `http.client.request.duration` record it:
    /// [`fault::ERROR_TYPE`](crate::fault::ERROR_TYPE) for an error whose
    /// source is an [`InjectedError`] (an injected abort,
    /// [`Kind::Transport`], and an injected delay that
    /// [`attempt_timeout`](super::Settings::attempt_timeout) cut short,
    /// [`Kind::AttemptTimeout`]), `timeout` for any other timeout,
    /// [`HTTP_REJECTED_ERROR_TYPE`](crate::telemetry::names::HTTP_REJECTED_ERROR_TYPE)
    /// for a rejection, `request` for a request that could not be made,
    /// and for a transport error `connect` (the connection could not be
    /// made) or `transport`.
    ///
    /// A call that its deadline ended is [`Kind::Timeout`], whose
    /// `error.type` is `timeout` even when an injected delay was what ran
    /// into the deadline: the call returns its own timeout error, as for a
    /// dependency that was slow. Its attempts' spans, which record the
    /// error of each attempt before the call's is made, still have
    /// [`fault::ERROR_TYPE`](crate::fault::ERROR_TYPE), so a query tells an
    /// injected delay from a real one.
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

/// `http call to https://rates:8443/v1 timed out (the client's timeout
/// setting, 10s)`: what failed, where and why (`http request to … could
/// not be made: <why>`). A call's error names the dependency (its
/// client's base URL); an attempt's that reqwest returned names the
/// request's URL, path included, credentials redacted. The cause is left
/// to [`source()`](StdError::source): a chain printer (`anyhow`'s `{:#}`,
/// `tracing`'s error chain, [`Error::chain`]) shows each cause once (`http
/// attempt to http://rates:8080/v1/quotes got no response: Connection
/// refused (os error 111)`).
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind {
            Kind::Request => "http request",
            Kind::AttemptTimeout | Kind::Transport => "http attempt",
            Kind::Rejected | Kind::Timeout => "http call",
        })?;
        if let Some(dependency) = &self.dependency {
            match self.request_url() {
                Some(url) => write!(f, " to {}", super::settings::redacted(url))?,
                None => write!(f, " to {dependency}")?,
            }
        }
        match (self.kind, self.bound) {
            (Kind::Request, _) => f.write_str(" could not be made")?,
            (Kind::Rejected, _) => f.write_str(" rejected by the circuit breaker")?,
            (Kind::Transport, _) => f.write_str(" got no response")?,
            (Kind::AttemptTimeout, _) => f.write_str(" timed out (attempt_timeout)")?,
            (Kind::Timeout, Some(bound)) => write!(f, " timed out ({bound})")?,
            (Kind::Timeout, None) => f.write_str(" timed out")?,
        }
        if let Some(detail) = &self.detail {
            write!(f, ": {detail}")?;
        }
        Ok(())
    }
}

impl Error {
    /// The URL of the request an attempt's error is of, when reqwest
    /// returned it (reqwest's errors carry it).
    fn request_url(&self) -> Option<&reqwest::Url> {
        match self.kind {
            Kind::Transport | Kind::AttemptTimeout => self.reqwest()?.url(),
            _ => None,
        }
    }
}

impl StdError for Error {
    /// The cause: for an error reqwest returned, the I/O error at the root
    /// of its chain when there is one (a refused connection's
    /// `ConnectionRefused`, a reset), one step away rather than under
    /// reqwest's and hyper's wrappers ([`Error::reqwest`] still finds
    /// reqwest's error); else the source as it is (reqwest's timeout, the
    /// breaker's [`Rejected`], an [`InjectedError`], why a request could
    /// not be made).
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        let source: &(dyn StdError + 'static) = self.source.as_deref()?;
        if source.is::<reqwest::Error>()
            && let Some(io) = crate::chain::find::<std::io::Error>(source.source())
        {
            return Some(io);
        }
        Some(source)
    }
}

impl Error {
    /// This error and its causes, each once, joined by `": "`: `http attempt to
    /// http://127.0.0.1:9/x got no response: Connection refused (os error
    /// 111)`. What an attempt's span says as its status, and what to log
    /// where no chain printer is at hand.
    pub fn chain(&self) -> impl fmt::Display + '_ {
        Chain(self)
    }
}

/// [`Error::chain`]'s text.
struct Chain<'e>(&'e Error);

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut next = StdError::source(self.0);
        while let Some(err) = next {
            write!(f, ": {err}")?;
            next = err.source();
        }
        Ok(())
    }
}
