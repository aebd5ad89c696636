//! One call of the HTTP client: the transport of the attempt loop
//! ([`crate::call`]), and the errors an attempt and a call return.

use std::borrow::Cow;
use std::future::Future;
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry::trace::TraceContextExt as _;
use reqwest::Method;
use tokio::time::Instant;

use super::client::Inner;
use super::error::Bound;
use super::settings::redacted;
use super::{Error, Kind, is_idempotent};
use crate::call::Classification;
use crate::circuit::{Outcome, Rejected};
use crate::deadline::Deadline;
use crate::fault::InjectedError;
use crate::retry;
use crate::telemetry::HttpAttempt;

/// One call of the HTTP client, the transport of the attempt loop
/// ([`crate::call`]).
pub(super) struct HttpCall<'a> {
    inner: &'a Inner,
    /// The request; taken by the last attempt (a copy is sent while another
    /// attempt may follow).
    original: Option<reqwest::Request>,
    cx: Context,
    started: Instant,
    deadline: Option<Instant>,
    /// Which bound the call's deadline is (its timeout error names it: an
    /// operator raises that one, not another).
    bound: Bound,
    method: Method,
    /// `url.full`, only made when a span records it.
    url_full: String,
    /// Whether the request may be sent more than once: its method or
    /// [`CallOptions::retry`](super::CallOptions::retry) say so, and its body can be sent again (a
    /// stream cannot).
    resendable: bool,
    plain: bool,
    /// The answer of the attempt before a retry: what the call returns if
    /// the breaker rejects the retry (the attempt was sent, and answered).
    /// Boxed: only a retry makes one, and the call's state stays small.
    pub(super) previous: Option<Box<Result<reqwest::Response, Error>>>,
}

impl<'a> HttpCall<'a> {
    /// The call of `request`, or the error of one the client refuses
    /// ([`Kind::Request`]: its URL is not on the base URL's origin).
    pub(super) fn new(
        inner: &'a Inner,
        request: reqwest::Request,
        retry: Option<bool>,
        plain: bool,
        cx: Context,
        inherited: Option<Instant>,
    ) -> Result<HttpCall<'a>, Error> {
        let url = request.url();
        // A request a RequestBuilder built is on the base URL's origin: its
        // path was checked ([`Client::request`]).
        if !plain
            && (url.scheme() != inner.base.scheme()
                || url.host_str() != inner.base.host_str()
                || url.port_or_known_default() != inner.base.port_or_known_default())
        {
            return Err(Error::says(
                Kind::Request,
                format!(
                    "{} is not on the origin of the client's base URL {}",
                    redacted(url),
                    inner.base
                ),
            ));
        }
        let started = Instant::now();
        let (deadline, bound) = match Deadline::earliest(
            started,
            Some(inner.settings.timeout),
            request.timeout().copied(),
            inherited,
        ) {
            Some(d) => (Some(d.at), d.bound),
            // A timeout too long for the clock, and nothing inherited.
            None => (None, Bound::Setting(inner.settings.timeout)),
        };
        let retryable = retry.unwrap_or_else(|| is_idempotent(request.method()));
        // A body of bytes can be sent again; a stream cannot.
        let replayable = request.body().is_none_or(|b| b.as_bytes().is_some());
        let method = request.method().clone();
        let url_full = if inner.dependency.recorder.traces_http() {
            redacted(url)
        } else {
            String::new()
        };
        Ok(HttpCall {
            inner,
            original: Some(request),
            cx,
            started,
            deadline,
            bound,
            method,
            url_full,
            resendable: retryable && replayable,
            plain,
            previous: None,
        })
    }
}

impl crate::call::Transport for HttpCall<'_> {
    type Output = reqwest::Response;
    type Error = Error;
    type Span = HttpAttempt;
    type Prepared = reqwest::Request;

    /// reqwest's own timer bounds each attempt ([`Transport::send`]).
    const TIMES_ATTEMPTS: bool = false;

    #[inline]
    fn parts(&self) -> crate::call::Parts<'_> {
        self.inner
            .dependency
            .parts(&self.cx, self.deadline, Some(self.started))
    }

    fn point(&self) -> Cow<'static, str> {
        Cow::Owned(self.inner.point.clone())
    }

    #[inline]
    fn start(&self, attempt: u32) -> HttpAttempt {
        self.inner.dependency.recorder.start_http_attempt(
            &self.cx,
            &self.method,
            &self.url_full,
            attempt - 1,
        )
    }

    #[inline]
    fn span_context(span: &HttpAttempt) -> &Context {
        span.context()
    }

    #[inline]
    fn end(&self, span: HttpAttempt, result: Result<&reqwest::Response, &Error>) {
        match result {
            Ok(response) => span.end_response(response.status().as_u16()),
            Err(e) => span.end_error(e.error_type(), &e.chain().to_string()),
        }
    }

    /// A copy of the request while another attempt may follow; else the
    /// request itself (a stream's body is sent once).
    fn prepare(&mut self, attempt: crate::call::Attempt) -> reqwest::Request {
        let last = !self.resendable || attempt.n >= self.inner.settings.max_attempts;
        let plain = self.plain;
        match self
            .original
            .as_ref()
            .filter(|_| !last)
            .and_then(|r| if plain { copy_of(r) } else { r.try_clone() })
        {
            Some(copy) => copy,
            None => self
                .original
                .take()
                .expect("the last attempt takes the request, and no attempt follows it"),
        }
    }

    /// The attempt: the propagation headers (the scenario stripped unless
    /// `forward_scenario`), then reqwest, whose one timer per attempt also
    /// bounds reading the body of the response returned: the reqwest
    /// client's (`attempt_timeout` from when it sends) when the attempt has
    /// all of it, else the attempt's time left.
    fn send<'s>(
        &'s self,
        attempt: crate::call::Attempt,
        mut request: reqwest::Request,
        span: &'s mut HttpAttempt,
    ) -> impl Future<Output = Result<reqwest::Response, Error>> + Send + 's {
        let inner = self.inner;
        let injecting = inner.dependency.faults.reads_scenarios();
        let stripped = if injecting && !inner.settings.forward_scenario {
            inner.dependency.faults.strip(span.context())
        } else {
            None
        };
        // Saturating: an attempt_timeout too long for the clock is no
        // timer of the client's own. The clock is read only when needed:
        // an attempt with all of its own time, the usual one, reads none.
        let (bound, now) = match attempt.bound {
            Some(bound) => (bound, None),
            None => {
                let now = Instant::now();
                (later(now, inner.settings.attempt_timeout), Some(now))
            }
        };
        // An injected delay took some of the attempt's time.
        if injecting || request.timeout().is_some() || !attempt.own {
            let now = now.unwrap_or_else(Instant::now);
            *request.timeout_mut() = Some(bound.saturating_duration_since(now));
        }
        span.inject(stripped.as_ref(), request.headers_mut());
        // The request's own `baggage` header, whatever the propagator
        // writes: stripped as a server strips it.
        if !inner.settings.forward_scenario
            && let Some(stripped) = inner.dependency.faults.strip_headers(request.headers_mut())
        {
            stripped.record(&span.context().span());
        }
        let own = attempt.own;
        // reqwest's future made now (it is awaited at once), not in an
        // async block: the block would hold the request as well as that
        // future, hundreds of bytes more in the call's state.
        let pending = inner.http.execute(request);
        async move { pending.await.map_err(|e| reqwest_error(e, bound, own)) }
    }

    #[inline]
    fn classify(
        &self,
        result: Result<&reqwest::Response, &Error>,
        deadline_passed: bool,
    ) -> Classification {
        match result {
            Err(_) if deadline_passed => Classification::stop(Outcome::Failure),
            result => self.inner.settings.classify.classify(&self.method, result),
        }
    }

    #[inline]
    fn is_resendable(&self) -> bool {
        self.resendable
    }

    fn retrying(&mut self, result: Result<reqwest::Response, Error>, deadline_passed: bool) {
        self.previous = Some(Box::new(
            result.map_err(|e| finish(e, deadline_passed, self.bound)),
        ));
    }

    #[inline]
    fn finish(
        &self,
        result: Result<reqwest::Response, Error>,
        _decision: retry::Decision,
        deadline_passed: bool,
    ) -> Result<reqwest::Response, Error> {
        result.map_err(|e| finish(e, deadline_passed, self.bound))
    }

    fn rejected(&self, _attempt: u32, rejected: Rejected) -> Error {
        self.inner.dependency.recorder.record_http_rejected(
            &self.cx,
            &self.method,
            &self.url_full,
            &rejected.to_string(),
        );
        Error::new(Kind::Rejected, rejected)
    }

    /// A deadline that has already passed (a timeout of zero, or the
    /// served RPC's deadline) leaves no time for an attempt: nothing is
    /// sent or counted, as the gRPC client does.
    fn expired(&self) -> Error {
        Error::new(
            Kind::Timeout,
            "the call's deadline had passed before its first attempt: nothing was sent",
        )
        .bounded(self.bound)
    }

    fn deadline_exceeded(&self) -> Error {
        Error::bare(Kind::Timeout).bounded(self.bound)
    }

    fn attempt_timed_out(&self, _after: Duration, injected: Option<InjectedError>) -> Error {
        match injected {
            Some(injected) => Error::new(Kind::AttemptTimeout, injected),
            None => Error::bare(Kind::AttemptTimeout),
        }
    }

    fn injected(&self, injected: InjectedError) -> Error {
        match injected.cause() {
            None => Error::new(Kind::Transport, injected),
            Some(_) => Error::new(Kind::Timeout, injected),
        }
    }

    /// The HTTP client is never closed; a transport error if it were.
    fn closing(&self) -> Error {
        Error::bare(Kind::Transport)
    }
}

/// `at + d`, or, when that is past what the clock can count (a setting of
/// hundreds of years), an instant about 30 years after `at` (as tokio's own
/// timers saturate): no panic on any duration a setting holds.
pub(super) fn later(at: Instant, d: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 3600);
    at.checked_add(d)
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}

/// A copy of a plain `request` (one whose only extension, if any, is its
/// timeout: see [`Client::into_call`](super::Client::into_call)) for an attempt another may
/// follow, or `None` for a body that cannot be sent again. One with no
/// body is copied part by part, so that a request with no timeout gets no
/// extension map (reqwest's `try_clone` gives every copy one).
pub(super) fn copy_of(request: &reqwest::Request) -> Option<reqwest::Request> {
    if request.body().is_some() {
        return request.try_clone();
    }
    let mut copy = reqwest::Request::new(request.method().clone(), request.url().clone());
    // A request with no header (a GET the builder made, the usual one)
    // keeps the copy's own empty map: no clone of an empty one, nor the
    // drop of the map it would replace.
    if !request.headers().is_empty() {
        *copy.headers_mut() = request.headers().clone();
    }
    *copy.version_mut() = request.version();
    if let Some(timeout) = request.timeout() {
        *copy.timeout_mut() = Some(*timeout);
    }
    Some(copy)
}

/// The error of an attempt reqwest failed: a timeout once the attempt's
/// time (`bound`) is up, its own (`own`) or the call's, else a transport
/// error.
#[cold]
#[inline(never)]
fn reqwest_error(e: reqwest::Error, bound: Instant, own: bool) -> Error {
    if e.is_timeout() && Instant::now() >= bound {
        if own {
            return Error::new(Kind::AttemptTimeout, e);
        }
        return Error::new(Kind::Timeout, e);
    }
    Error::new(Kind::Transport, e)
}

/// The error a call returns: once its deadline (`bound`) has passed, the
/// client's own timeout error, whatever cut the last attempt short (its
/// span still records what did: an injected delay's `error.type`, say).
#[cold]
#[inline(never)]
fn finish(e: Error, deadline_passed: bool, bound: Bound) -> Error {
    if deadline_passed && e.kind() != Kind::Timeout {
        return Error::bare(Kind::Timeout).bounded(bound);
    }
    if e.kind() == Kind::Timeout && e.injected().is_some() {
        return Error::bare(Kind::Timeout).bounded(bound);
    }
    e.bounded(bound)
}
