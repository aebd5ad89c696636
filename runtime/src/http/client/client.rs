//! The HTTP `Client`: one dependency, one reqwest connection pool, one
//! budget, one breaker; and its [`RequestBuilder`].

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry::trace::TraceContextExt as _;
use reqwest::{Method, Url};
use tokio::time::Instant;

use super::error::Bound;
use super::settings::{is_dot_segment, redacted};
use super::{Error, Kind, NewError, Settings};
use std::borrow::Cow;

use crate::call::Classification;
use crate::circuit::{Outcome, Rejected};
use crate::deadline::{Deadline, Inherited};
use crate::fault::InjectedError;
use crate::retry;
use crate::telemetry::HttpAttempt;
use crate::{Setup, circuit, fault, telemetry};

/// A resilient HTTP client of one dependency: a thin client over a
/// [`reqwest::Client`] (see the [module](super) docs).
///
/// One `Client` is one dependency at one [base URL](Settings::base_url),
/// with one reqwest connection pool, one retry budget and one circuit
/// breaker, shared by every call and every task: build it once where the
/// service is set up, and clone it (a cheap handle). Two clients of one
/// base URL have their own pool, budget and breaker.
///
/// [`reqwest::Client`]: https://docs.rs/reqwest/0.13/reqwest/struct.Client.html
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    settings: Settings,
    base: Url,
    /// The base URL's text, which every error of a call names.
    dependency: Arc<str>,
    /// `http:<host>:<port>`, evaluated once per attempt.
    point: String,
    http: reqwest::Client,
    breaker: circuit::Breaker,
    budget: retry::Budget,
    backoff: retry::Exponential,
    recorder: telemetry::ClientRecorder,
    _registration: telemetry::BreakerRegistration,
    faults: fault::Injector,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.inner.base.as_str())
            .field("point", &self.inner.point)
            .finish_non_exhaustive()
    }
}

/// What a call may say beyond its [`reqwest::Request`], for
/// [`Client::execute_with`] (a [`RequestBuilder`] sets them with
/// [`retry`](RequestBuilder::retry) and [`context`](RequestBuilder::context)).
///
/// [`reqwest::Request`]: https://docs.rs/reqwest/0.13/reqwest/struct.Request.html
#[derive(Clone, Debug, Default)]
pub struct CallOptions {
    /// Whether the call may be sent more than once: `Some(true)` opts a
    /// request of any method in (a POST made safe to repeat by an
    /// idempotency key), `Some(false)` opts one out; `None`, the default,
    /// retries the idempotent methods of RFC 9110 (9.2.2: GET, HEAD,
    /// OPTIONS, TRACE, PUT, DELETE) and no other.
    pub retry: Option<bool>,
    /// The call's OpenTelemetry context (its span is the parent of each
    /// attempt's, its baggage is sent and carries the failure scenario);
    /// `None` takes the current one when the call starts.
    pub context: Option<Context>,
}

/// Whether RFC 9110 (9.2.2) calls `method` idempotent: GET, HEAD, OPTIONS,
/// TRACE, PUT and DELETE.
pub fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

impl Client {
    /// Builds the client of the dependency `settings` name, for `setup`,
    /// on a [`reqwest::Client`] of reqwest's defaults (no proxy, and
    /// reqwest's own retries of requests the server refused unprocessed)
    /// but one: a redirect is followed only within the base URL's origin
    /// (the same scheme, host and port), at most 10 in a row, as reqwest's
    /// default policy counts them; a redirect to another origin, or past
    /// the tenth, is not followed, and the call returns the 3xx response
    /// as it came, its `Location` for the caller to read. So every
    /// response a call returns, classifies and counts is the dependency's
    /// own, and the trace context and baggage (the failure scenario among
    /// them, with [`forward_scenario`](Settings::forward_scenario)) are
    /// sent to its origin alone. It records with `setup`'s telemetry and
    /// evaluates its failure injector. Connects nothing.
    ///
    /// # Errors
    ///
    /// [`NewError`] naming every bad field (a fault in the code that built
    /// `settings`: a service's main exits 1 on it).
    ///
    /// [`reqwest::Client`]: https://docs.rs/reqwest/0.13/reqwest/struct.Client.html
    pub fn new(setup: &Setup, settings: Settings) -> Result<Client, NewError> {
        Client::with_builder(setup, settings, reqwest::Client::builder().no_proxy())
    }

    /// [`new`](Client::new) on a [`reqwest::ClientBuilder`] of the user's
    /// own (its pool, HTTP/2 or connection settings, its proxy, its
    /// default headers), so an existing reqwest set-up keeps working. The
    /// client sets its TLS config ([`Settings::tls`], or the platform's
    /// roots), its timeout ([`Settings::attempt_timeout`], reqwest's
    /// timer of each attempt) and its redirect policy (the one origin
    /// [`new`](Client::new) follows redirects within), so whatever TLS,
    /// timeout or redirect policy the builder was given is replaced. The
    /// redirect policy is replaced because a builder's own (reqwest's
    /// default follows up to 10 redirects to any host) would make another
    /// origin's response count as this dependency's, and send it the
    /// call's trace context and baggage: a caller that wants to follow a
    /// redirect elsewhere reads the 3xx response's `Location` and sends
    /// that request with a client of that origin.
    ///
    /// # Errors
    ///
    /// [`NewError`] as [`new`](Client::new) says, and `tls` when reqwest
    /// cannot build a client with the config.
    ///
    /// [`reqwest::ClientBuilder`]: https://docs.rs/reqwest/0.13/reqwest/struct.ClientBuilder.html
    pub fn with_builder(
        setup: &Setup,
        settings: Settings,
        builder: reqwest::ClientBuilder,
    ) -> Result<Client, NewError> {
        let base = settings.check()?;
        let tls = match &settings.tls {
            Some(tls) => (**tls).clone(),
            None => default_tls().map_err(|e| NewError::one("tls", e))?,
        };
        let mut tls = tls;
        if tls.alpn_protocols.is_empty() {
            tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        }
        // reqwest's own timer bounds each attempt: the client's, of
        // `attempt_timeout`, unless the attempt has less time left (the
        // call's deadline is nearer, or an injected delay took some), when
        // the attempt's request carries its own.
        let http = builder
            .tls_backend_preconfigured(tls)
            .timeout(settings.attempt_timeout)
            .redirect(same_origin_redirects(&base))
            .build()
            .map_err(|e| NewError::one("tls", e))?;
        let host = base.host_str().unwrap_or_default();
        let port = base.port_or_known_default().unwrap_or(0);
        let point = format!("http:{host}:{port}");
        let recorder = telemetry::ClientRecorder::new(setup.telemetry(), &format!("{host}:{port}"));
        let breaker = circuit::Breaker::new(
            settings.breaker,
            settings.breaker_policy.clone(),
            recorder.transition_observer(),
        )
        .map_err(|e| NewError::one("breaker", e))?;
        let registration = {
            let breaker = breaker.clone();
            recorder.register_breaker(move || breaker.state())
        };
        let budget = retry::Budget::new(settings.retry_budget)
            .map_err(|e| NewError::one("retry_budget", e))?;
        let backoff = retry::Exponential::new(settings.backoff_base, settings.backoff_max);
        Ok(Client {
            inner: Arc::new(Inner {
                settings,
                dependency: Arc::from(base.as_str()),
                base,
                point,
                http,
                breaker,
                budget,
                backoff,
                recorder,
                _registration: registration,
                faults: setup.faults().clone(),
            }),
        })
    }

    /// Replaces the backoff's random source (see
    /// [`Exponential::with_source`](retry::Exponential::with_source)), as
    /// tests do to make waits exact. Only on a client no clone of which
    /// has been made.
    ///
    /// # Panics
    ///
    /// If the client has been cloned (a programming error in the test).
    #[doc(hidden)]
    pub fn with_backoff_source(
        mut self,
        source: impl Fn(u64) -> u64 + Send + Sync + 'static,
    ) -> Client {
        let inner = Arc::get_mut(&mut self.inner).expect("with_backoff_source before any clone");
        inner.backoff = inner.backoff.clone().with_source(source);
        self
    }

    /// The client's settings, as given to [`Client::new`].
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// The base URL, parsed.
    pub fn base_url(&self) -> &Url {
        &self.inner.base
    }

    /// The client's failure-injection point, `http:<host>:<port>`.
    pub fn point(&self) -> &str {
        &self.inner.point
    }

    /// The reqwest client underneath. A request sent with it directly
    /// passes none of humus: no breaker, no retries, no telemetry (its
    /// timeout is [`Settings::attempt_timeout`], and it follows redirects
    /// within the base URL's origin only, as [`new`](Client::new) says).
    pub fn reqwest(&self) -> &reqwest::Client {
        &self.inner.http
    }

    /// The readable state of the client's breaker.
    pub fn breaker_state(&self) -> circuit::State {
        self.inner.breaker.state()
    }

    /// Starts a request of `method` to `path` under the base URL: `path` is
    /// appended to the base URL's path, and the request stays under it
    /// (`/charges?limit=5` or `charges?limit=5` under
    /// `https://payments:8443/v1` is `https://payments:8443/v1/charges?limit=5`;
    /// `""`, `"?limit=5"` and `"#top"` are the base URL itself, as written,
    /// with that query or fragment).
    ///
    /// This is not a URL parser's join (`Url::join` resolves `charges`
    /// against `/v1` to `/charges`, and `../x` or `https://other/x` leave the
    /// base path or the origin): a path that would leave the base URL's
    /// path is refused, and [`send`](RequestBuilder::send) and
    /// [`build`](RequestBuilder::build) return [`Kind::Request`] with
    /// nothing sent. Refused are a `.` or `..` segment (`../ok`,
    /// `a/./b`, percent-encoded `%2e%2e` too, and one between
    /// percent-encoded separators, `..%2Fadmin`, which a server that
    /// decodes `%2F` or `%5C` before routing reads as `../admin`; an
    /// encoded slash inside a name, `objects/a%2Fb`, passes; and one with
    /// parameters, `..;/admin` or `%2e%2e%3b`, which servlet containers
    /// read as `..`; a name with parameters, `a;v=1`, passes), a backslash (which URL
    /// parsers read as `/`), an absolute URL (`https://other/x`), a path
    /// that starts with `//` (which names a host), and white space or a
    /// control character anywhere in the text, query and fragment included
    /// (URL parsers drop a tab, LF or CR, so `.\n.` would be `..`:
    /// percent-encode instead, `%20` for a space). A request to another
    /// URL of the same origin goes through [`execute`](Client::execute),
    /// with a [`reqwest::Request`] built with the URL in full.
    ///
    /// [`reqwest::Request`]: https://docs.rs/reqwest/0.13/reqwest/struct.Request.html
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let (url, refused) = match check_path(path) {
            Ok(()) => (self.url_of(path), None),
            Err(why) => (self.inner.base.clone(), Some(why)),
        };
        RequestBuilder {
            client: self.clone(),
            inner: self.inner.http.request(method, url),
            options: CallOptions::default(),
            refused,
            plain: true,
        }
    }

    /// The URL of `path` (which [`check_path`] passed) under the base URL:
    /// the base URL's path (without its trailing `/`), `/`, and `path`'s
    /// path, then `path`'s query and fragment, as parsing the base URL's
    /// text with `path` appended gives it, without parsing the base URL
    /// again. A `path` with no path of its own (`""`, `"?q"`, `"#f"`)
    /// keeps the base URL's path as it is.
    fn url_of(&self, path: &str) -> Url {
        let mut url = self.inner.base.clone();
        let end = path.find(['?', '#']).unwrap_or(path.len());
        let (own, rest) = path.split_at(end);
        if !own.is_empty() {
            let base = url.path();
            let base = base.strip_suffix('/').unwrap_or(base);
            let mut joined = String::with_capacity(base.len() + own.len() + 1);
            joined.push_str(base);
            if !own.starts_with('/') {
                joined.push('/');
            }
            joined.push_str(own);
            url.set_path(&joined);
        }
        let (query, fragment) = match rest.split_once('#') {
            Some((query, fragment)) => (query, Some(fragment)),
            None => (rest, None),
        };
        if let Some(query) = query.strip_prefix('?') {
            url.set_query(Some(query));
        }
        if fragment.is_some() {
            url.set_fragment(fragment);
        }
        url
    }

    /// [`request`](Client::request) with GET.
    pub fn get(&self, path: &str) -> RequestBuilder {
        self.request(Method::GET, path)
    }

    /// [`request`](Client::request) with POST (not retried unless the
    /// request opts in with [`RequestBuilder::retry`]).
    pub fn post(&self, path: &str) -> RequestBuilder {
        self.request(Method::POST, path)
    }

    /// [`request`](Client::request) with PUT.
    pub fn put(&self, path: &str) -> RequestBuilder {
        self.request(Method::PUT, path)
    }

    /// [`request`](Client::request) with PATCH (not retried unless the
    /// request opts in).
    pub fn patch(&self, path: &str) -> RequestBuilder {
        self.request(Method::PATCH, path)
    }

    /// [`request`](Client::request) with DELETE.
    pub fn delete(&self, path: &str) -> RequestBuilder {
        self.request(Method::DELETE, path)
    }

    /// [`request`](Client::request) with HEAD.
    pub fn head(&self, path: &str) -> RequestBuilder {
        self.request(Method::HEAD, path)
    }

    /// Sends `request`, a [`reqwest::Request`] built with any reqwest code,
    /// with the default [`CallOptions`]: see [`execute_with`](Client::execute_with).
    ///
    /// # Errors
    ///
    /// As [`execute_with`](Client::execute_with).
    ///
    /// # Panics
    ///
    /// As [`execute_with`](Client::execute_with).
    ///
    /// [`reqwest::Request`]: https://docs.rs/reqwest/0.13/reqwest/struct.Request.html
    pub fn execute(
        &self,
        request: reqwest::Request,
    ) -> impl Future<Output = Result<reqwest::Response, Error>> + Send + use<> {
        self.execute_with(request, CallOptions::default())
    }

    /// Sends `request` in up to [`max_attempts`](Settings::max_attempts)
    /// attempts, and returns the last attempt's response, whatever its
    /// status.
    ///
    /// Each attempt passes the breaker (a rejection of the first attempt
    /// ends the call with [`Kind::Rejected`]: nothing was sent; a rejection
    /// of a retry ends it with the answer of the attempt before, which was
    /// sent); is the failure-injection point
    /// [`point`](Client::point), inside `attempt_timeout`; carries the
    /// attempt's trace context and the call's baggage (without its failure
    /// scenario, unless [`forward_scenario`](Settings::forward_scenario))
    /// in the headers the Setup's propagator writes; and is classified
    /// ([`Settings::classify`]) for the breaker and for retries. A retry
    /// happens only for a request that may be sent again: an idempotent
    /// method unless [`CallOptions::retry`] says otherwise, and a body that
    /// can be sent again (a stream is sent once). Retries are bounded by
    /// `max_attempts`, the retry budget and the call's timeout, and wait the
    /// larger of the backoff and the response's `Retry-After`. The call's
    /// timeout is [`Settings::timeout`], or the request's own when shorter,
    /// or the deadline of the RPC being served
    /// ([`Inherited`](crate::grpc::deadline::Inherited)) when earlier.
    ///
    /// # Errors
    ///
    /// [`Error`] when the last attempt got no response: [`Kind::Timeout`]
    /// once the call's deadline has passed, its message naming which of
    /// the three bounds above it was (at once, with nothing sent, for a
    /// timeout of zero or a served RPC's deadline already passed);
    /// [`Kind::Rejected`], [`Kind::Transport`] or [`Kind::AttemptTimeout`]
    /// otherwise; [`Kind::Request`] for a request whose URL is not on the
    /// base URL's origin (nothing is sent or counted). Every error's
    /// message names the dependency, by the client's base URL
    /// (`http call to https://rates:8443/v1 rejected by the circuit breaker`),
    /// the cause its [`source()`](std::error::Error::source) ([`Error::chain`]
    /// prints both).
    ///
    /// # Panics
    ///
    /// When polled outside a tokio runtime, or on one without its time and
    /// I/O drivers (`Builder::enable_all`): the client's timers and
    /// reqwest's connections run on tokio. And whatever the classify or
    /// breaker policy functions panic with.
    pub fn execute_with(
        &self,
        request: reqwest::Request,
        options: CallOptions,
    ) -> impl Future<Output = Result<reqwest::Response, Error>> + Send + use<> {
        self.clone().into_call(request, options, false)
    }

    /// [`execute_with`](Client::execute_with); `plain` says `request` was
    /// built by a [`RequestBuilder`] whose reqwest builder only humus's own
    /// methods touched, so it carries no extension but its timeout, and an
    /// attempt's copy of it can be made part by part ([`copy_of`]).
    fn into_call(
        self,
        request: reqwest::Request,
        options: CallOptions,
        plain: bool,
    ) -> impl Future<Output = Result<reqwest::Response, Error>> + Send + use<> {
        // The call's context is read now, before the future moves to
        // another task.
        let cx = options.context.unwrap_or_else(Context::current);
        let inherited = Inherited::current_deadline();
        let client = self;
        // Not boxed (no allocation per call): the call's state is kept
        // small instead (a retry's answer is boxed).
        async move {
            require_runtime();
            let inner = &*client.inner;
            let result = match HttpCall::new(inner, request, options.retry, plain, cx, inherited) {
                Ok(call) => {
                    let mut call = crate::call::Call::new(&inner.breaker, call);
                    match call.run().await {
                        // A rejection of a retry: the answer of the attempt
                        // before, which was sent.
                        Err(e) if e.kind() == Kind::Rejected => {
                            match call.transport_mut().previous.take() {
                                Some(previous) => *previous,
                                None => Err(e),
                            }
                        }
                        result => result,
                    }
                }
                Err(e) => Err(e),
            };
            result.map_err(|e| e.of(&inner.dependency))
        }
    }
}

/// One call of the HTTP client, the transport of the attempt loop
/// ([`crate::call`]).
struct HttpCall<'a> {
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
    /// [`CallOptions::retry`] say so, and its body can be sent again (a
    /// stream cannot).
    resendable: bool,
    plain: bool,
    /// The answer of the attempt before a retry: what the call returns if
    /// the breaker rejects the retry (the attempt was sent, and answered).
    /// Boxed: only a retry makes one, and the call's state stays small.
    previous: Option<Box<Result<reqwest::Response, Error>>>,
}

impl<'a> HttpCall<'a> {
    /// The call of `request`, or the error of one the client refuses
    /// ([`Kind::Request`]: its URL is not on the base URL's origin).
    fn new(
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
        let url_full = if inner.recorder.traces_http() {
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

    fn core(&self) -> crate::call::Core<'_> {
        let inner = self.inner;
        crate::call::Core {
            budget: &inner.budget,
            backoff: &inner.backoff,
            recorder: &inner.recorder,
            faults: &inner.faults,
            max_attempts: inner.settings.max_attempts,
            backoff_max: inner.settings.backoff_max,
        }
    }

    fn context(&self) -> &Context {
        &self.cx
    }

    fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    fn started(&self) -> Option<Instant> {
        Some(self.started)
    }

    fn attempt_timeout(&self) -> Option<Duration> {
        Some(self.inner.settings.attempt_timeout)
    }

    fn point(&self) -> Cow<'static, str> {
        Cow::Owned(self.inner.point.clone())
    }

    fn start(&self, attempt: u32) -> HttpAttempt {
        self.inner
            .recorder
            .start_http_attempt(&self.cx, &self.method, &self.url_full, attempt - 1)
    }

    fn span_context(span: &HttpAttempt) -> &Context {
        span.context()
    }

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
        let injecting = inner.faults.reads_scenarios();
        let stripped = if injecting && !inner.settings.forward_scenario {
            inner.faults.strip(span.context())
        } else {
            None
        };
        // Saturating: an attempt_timeout too long for the clock is no
        // timer of the client's own.
        let now = Instant::now();
        let bound = attempt
            .bound
            .unwrap_or_else(|| later(now, inner.settings.attempt_timeout));
        // An injected delay took some of the attempt's time.
        if injecting || request.timeout().is_some() || !attempt.own {
            *request.timeout_mut() = Some(bound.saturating_duration_since(now));
        }
        span.inject(stripped.as_ref(), request.headers_mut());
        // The request's own `baggage` header, whatever the propagator
        // writes: stripped as a server strips it.
        if !inner.settings.forward_scenario
            && let Some(stripped) = inner.faults.strip_headers(request.headers_mut())
        {
            stripped.record(&span.context().span());
        }
        let own = attempt.own;
        async move {
            inner
                .http
                .execute(request)
                .await
                .map_err(|e| reqwest_error(e, bound, own))
        }
    }

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

    fn is_resendable(&self) -> bool {
        self.resendable
    }

    fn retrying(&mut self, result: Result<reqwest::Response, Error>, deadline_passed: bool) {
        self.previous = Some(Box::new(
            result.map_err(|e| finish(e, deadline_passed, self.bound)),
        ));
    }

    fn finish(
        &self,
        result: Result<reqwest::Response, Error>,
        _decision: retry::Decision,
        deadline_passed: bool,
    ) -> Result<reqwest::Response, Error> {
        result.map_err(|e| finish(e, deadline_passed, self.bound))
    }

    fn rejected(&self, _attempt: u32, rejected: Rejected) -> Error {
        self.inner.recorder.record_http_rejected(
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

/// How many redirects in a row a client follows: reqwest's default
/// policy's limit.
const MAX_REDIRECTS: usize = 10;

/// The redirect policy of a client of `base`: follow a redirect to a URL of
/// `base`'s origin (its scheme, host and port, the scheme's when the URL
/// has none), up to [`MAX_REDIRECTS`] in a row; else stop, and the 3xx
/// response is the attempt's answer.
fn same_origin_redirects(base: &Url) -> reqwest::redirect::Policy {
    let origin = base.origin();
    reqwest::redirect::Policy::custom(move |attempt| {
        // `previous` holds the URLs requested so far, the first among them:
        // at the first redirect, one.
        if attempt.previous().len() > MAX_REDIRECTS || attempt.url().origin() != origin {
            attempt.stop()
        } else {
            attempt.follow()
        }
    })
}

/// Panics, saying what to do, when a call is polled outside a tokio
/// runtime (reqwest's own panic comes from deep inside hyper, and names
/// neither the client nor the fix).
fn require_runtime() {
    // A task of tokio's (the usual case) is polled on a runtime: a
    // thread-local read, where `Handle::try_current` clones the runtime's
    // handle (an atomic increment and decrement of a counter the runtime's
    // workers share) on every call.
    if tokio::task::try_id().is_none() && tokio::runtime::Handle::try_current().is_err() {
        panic!(
            "humus::http::client::Client: a call was polled outside a tokio runtime; \
             its timers and its reqwest connections run on tokio: await it on a runtime \
             built with its time and I/O drivers (tokio::main, or Builder::enable_all)"
        );
    }
}

/// `at + d`, or, when that is past what the clock can count (a setting of
/// hundreds of years), an instant about 30 years after `at` (as tokio's own
/// timers saturate): no panic on any duration a setting holds.
fn later(at: Instant, d: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 3600);
    at.checked_add(d)
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}

/// Why a path given to [`Client::request`] would leave the base URL's
/// path, if it would.
fn check_path(path: &str) -> Result<(), String> {
    // First, over the whole text: a URL parser drops a tab, LF or CR
    // wherever it is (`.\n.` is `..` to it), so no other check could see
    // the path it reads; nor is white space part of a URL.
    if let Some((i, c)) = path
        .char_indices()
        .find(|(_, c)| c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "the path {path:?} holds {c:?} at byte {i}: a path has no white space or control character (a URL parser drops a tab or newline, which could make a '..' that leaves the base URL's path); percent-encode it (a space is %20)"
        ));
    }
    // Most paths hold no backslash, no `//` start, no `:` and no `.`
    // segment: one pass over the bytes tells.
    let end = path.find(['?', '#']).unwrap_or(path.len());
    let bytes = &path.as_bytes()[..end];
    if !bytes
        .iter()
        .any(|b| matches!(b, b'\\' | b':' | b'.' | b'%'))
        && !path.starts_with("//")
    {
        return Ok(());
    }
    if path.contains('\\') {
        return Err(format!(
            "the path {path:?} holds a backslash, which URL parsers read as '/', so it could leave the base URL's path: write '/' (or %5C for a backslash in a segment)"
        ));
    }
    if path.starts_with("//") {
        return Err(format!(
            "the path {path:?} starts with \"//\", which names a host: a client's paths are under its base URL"
        ));
    }
    let first = path[..end].split('/').next().unwrap_or_default();
    if let Some(colon) = first.find(':')
        && path[colon..].starts_with("://")
    {
        return Err(format!(
            "the path {path:?} is an absolute URL: a client's paths are under its base URL (send a request built with the URL in full through Client::execute)"
        ));
    }
    if let Some(segment) = path[..end].split('/').find(|s| is_dot_segment(s)) {
        return Err(format!(
            "the path {path:?} has the segment {segment:?}, a dot segment, which URL resolution removes ('..' with the segment before it), so the request would not go where written ('..' could leave the base URL's path): write the path without it"
        ));
    }
    // A server (or a proxy before it) that decodes `%2F` or `%5C` before it
    // routes reads `..%2Fadmin` as `../admin`: a dot segment between
    // encoded separators is refused too. An encoded slash elsewhere
    // (`objects/a%2Fb`) is a name's own character and passes.
    if let Some(segment) = path[..end]
        .split('/')
        .find(|s| encoded_parts(s).any(is_dot_segment))
    {
        return Err(format!(
            "the path {path:?} has the segment {segment:?}, which a server that decodes %2F or %5C before routing reads as holding a '.' or '..' segment that would leave the base URL's path: a client's paths are under its base URL"
        ));
    }
    // Servlet containers (Tomcat, and the frameworks on it) drop a
    // segment's parameters, from `;` on, before they route: `..;/admin`,
    // `..;x=1` or `%2e%2e%3b` is `..` to them.
    if let Some(segment) = path[..end].split('/').find(|s| {
        encoded_parts(s).any(|part| {
            let stem = without_parameters(part);
            stem.len() < part.len() && is_dot_segment(stem)
        })
    }) {
        return Err(format!(
            "the path {path:?} has the segment {segment:?}, which a server that drops a segment's parameters (from ';' on, as servlet containers do) reads as a '.' or '..' segment that would leave the base URL's path: a client's paths are under its base URL"
        ));
    }
    Ok(())
}

/// `part` up to its first `;` or percent-encoded `;` (`%3B`, either case):
/// the segment as a server that drops path parameters routes it.
fn without_parameters(part: &str) -> &str {
    let bytes = part.as_bytes();
    let end = (0..bytes.len())
        .find(|&i| {
            bytes[i] == b';'
                || (bytes[i] == b'%'
                    && bytes
                        .get(i + 1..i + 3)
                        .is_some_and(|b| b.eq_ignore_ascii_case(b"3b")))
        })
        .unwrap_or(bytes.len());
    // `end` is on an ASCII byte or the end: a character boundary.
    &part[..end]
}

/// The parts of a path segment between its percent-encoded slashes and
/// backslashes (`%2F`, `%5C`, in either case): what a server that decodes
/// them before routing takes for segments.
fn encoded_parts(segment: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(segment);
    std::iter::from_fn(move || {
        let text = rest?;
        let bytes = text.as_bytes();
        let at = (0..bytes.len()).find(|&i| {
            bytes[i] == b'%'
                && bytes
                    .get(i + 1..i + 3)
                    .is_some_and(|b| b.eq_ignore_ascii_case(b"2f") || b.eq_ignore_ascii_case(b"5c"))
        });
        match at {
            // Three ASCII bytes: `text[i + 3..]` starts on a character.
            Some(i) => {
                rest = Some(&text[i + 3..]);
                Some(&text[..i])
            }
            None => {
                rest = None;
                Some(text)
            }
        }
    })
}

/// A copy of a plain `request` (one whose only extension, if any, is its
/// timeout: see [`Client::into_call`]) for an attempt another may
/// follow, or `None` for a body that cannot be sent again. One with no
/// body is copied part by part, so that a request with no timeout gets no
/// extension map (reqwest's `try_clone` gives every copy one).
fn copy_of(request: &reqwest::Request) -> Option<reqwest::Request> {
    if request.body().is_some() {
        return request.try_clone();
    }
    let mut copy = reqwest::Request::new(request.method().clone(), request.url().clone());
    *copy.headers_mut() = request.headers().clone();
    *copy.version_mut() = request.version();
    if let Some(timeout) = request.timeout() {
        *copy.timeout_mut() = Some(*timeout);
    }
    Some(copy)
}

/// The error of an attempt reqwest failed: a timeout once the attempt's
/// time (`bound`) is up, its own (`own`) or the call's, else a transport
/// error.
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
fn finish(e: Error, deadline_passed: bool, bound: Bound) -> Error {
    if deadline_passed && e.kind() != Kind::Timeout {
        return Error::bare(Kind::Timeout).bounded(bound);
    }
    if e.kind() == Kind::Timeout && e.injected().is_some() {
        return Error::bare(Kind::Timeout).bounded(bound);
    }
    e.bounded(bound)
}

/// The default TLS config: rustls with `ring`, trusting the platform's
/// roots (the RabbitMQ consumer's too).
pub(crate) fn default_tls() -> Result<rustls::ClientConfig, rustls::Error> {
    use rustls_platform_verifier::BuilderVerifierExt as _;
    Ok(
        rustls::ClientConfig::builder_with_provider(crate::tls::crypto_provider())
            .with_safe_default_protocol_versions()?
            .with_platform_verifier()?
            .with_no_client_auth(),
    )
}

/// A request under construction: reqwest's own
/// [`reqwest::RequestBuilder`], and the [`CallOptions`] of the call, from
/// [`Client::request`] and the like. [`send`](RequestBuilder::send) sends
/// it through the humus client.
///
/// The common reqwest methods are here under their reqwest names; any
/// other (`json`, `query`, `form` with reqwest's features, `multipart`)
/// through [`map`](RequestBuilder::map).
///
/// [`reqwest::RequestBuilder`]: https://docs.rs/reqwest/0.13/reqwest/struct.RequestBuilder.html
#[derive(Debug)]
#[must_use = "a request does nothing until it is sent"]
pub struct RequestBuilder {
    client: Client,
    inner: reqwest::RequestBuilder,
    options: CallOptions,
    /// Why [`Client::request`] refused the path, if it did.
    refused: Option<String>,
    /// Whether only humus's own methods touched the reqwest builder (not
    /// [`map`](RequestBuilder::map), which may give the request
    /// extensions of its own).
    plain: bool,
}

impl RequestBuilder {
    /// Adds a header ([`reqwest::RequestBuilder::header`]).
    ///
    /// [`reqwest::RequestBuilder::header`]: https://docs.rs/reqwest/0.13/reqwest/struct.RequestBuilder.html#method.header
    pub fn header<K, V>(self, key: K, value: V) -> RequestBuilder
    where
        http::HeaderName: TryFrom<K>,
        <http::HeaderName as TryFrom<K>>::Error: Into<http::Error>,
        http::HeaderValue: TryFrom<V>,
        <http::HeaderValue as TryFrom<V>>::Error: Into<http::Error>,
    {
        self.apply(|b| b.header(key, value))
    }

    /// Adds headers ([`reqwest::RequestBuilder::headers`]).
    ///
    /// [`reqwest::RequestBuilder::headers`]: https://docs.rs/reqwest/0.13/reqwest/struct.RequestBuilder.html#method.headers
    pub fn headers(self, headers: http::HeaderMap) -> RequestBuilder {
        self.apply(|b| b.headers(headers))
    }

    /// Sets basic authentication ([`reqwest::RequestBuilder::basic_auth`]).
    ///
    /// [`reqwest::RequestBuilder::basic_auth`]: https://docs.rs/reqwest/0.13/reqwest/struct.RequestBuilder.html#method.basic_auth
    pub fn basic_auth<U: fmt::Display, P: fmt::Display>(
        self,
        username: U,
        password: Option<P>,
    ) -> RequestBuilder {
        self.apply(|b| b.basic_auth(username, password))
    }

    /// Sets a bearer token ([`reqwest::RequestBuilder::bearer_auth`]).
    ///
    /// [`reqwest::RequestBuilder::bearer_auth`]: https://docs.rs/reqwest/0.13/reqwest/struct.RequestBuilder.html#method.bearer_auth
    pub fn bearer_auth<T: fmt::Display>(self, token: T) -> RequestBuilder {
        self.apply(|b| b.bearer_auth(token))
    }

    /// Sets the body ([`reqwest::RequestBuilder::body`]). A body of bytes
    /// or a string is sent again by each retry; a stream
    /// ([`reqwest::Body::wrap`] of an `http_body::Body`, such as
    /// `http_body_util::StreamBody`; humus builds reqwest without its
    /// `stream` feature, so `Body::wrap_stream` is there only if the
    /// service turns that feature on) is sent once.
    ///
    /// [`reqwest::Body::wrap`]: https://docs.rs/reqwest/0.13/reqwest/struct.Body.html#method.wrap
    /// [`reqwest::RequestBuilder::body`]: https://docs.rs/reqwest/0.13/reqwest/struct.RequestBuilder.html#method.body
    pub fn body<T: Into<reqwest::Body>>(self, body: T) -> RequestBuilder {
        self.apply(|b| b.body(body))
    }

    /// Sets the call's timeout, when shorter than
    /// [`Settings::timeout`] ([`reqwest::RequestBuilder::timeout`]).
    ///
    /// [`reqwest::RequestBuilder::timeout`]: https://docs.rs/reqwest/0.13/reqwest/struct.RequestBuilder.html#method.timeout
    pub fn timeout(self, timeout: Duration) -> RequestBuilder {
        self.apply(|b| b.timeout(timeout))
    }

    /// Applies any reqwest builder method: `.map(|b| b.json(&order))`.
    pub fn map(
        mut self,
        f: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> RequestBuilder {
        self.plain = false;
        self.apply(f)
    }

    /// One of humus's own builder methods.
    fn apply(
        mut self,
        f: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> RequestBuilder {
        self.inner = f(self.inner);
        self
    }

    /// Opts this request in to retries (`true`, such as a POST with an
    /// idempotency key) or out of them (`false`), whatever its method. A
    /// body made from a stream (`reqwest::Body::wrap`, `wrap_stream`) is sent once
    /// whatever this says: it cannot be sent again.
    pub fn retry(mut self, retry: bool) -> RequestBuilder {
        self.options.retry = Some(retry);
        self
    }

    /// Sets the call's OpenTelemetry context, instead of the current one.
    pub fn context(mut self, cx: Context) -> RequestBuilder {
        self.options.context = Some(cx);
        self
    }

    /// Builds the [`reqwest::Request`] and its options, to send later with
    /// [`Client::execute_with`].
    ///
    /// # Errors
    ///
    /// [`Kind::Request`] with reqwest's error, for a request reqwest cannot
    /// build (a bad URL or header), or saying why the path would leave the
    /// base URL's path ([`Client::request`]).
    ///
    /// [`reqwest::Request`]: https://docs.rs/reqwest/0.13/reqwest/struct.Request.html
    pub fn build(self) -> Result<(reqwest::Request, CallOptions), Error> {
        let dependency = &self.client.inner.dependency;
        if let Some(why) = self.refused {
            return Err(Error::says(Kind::Request, why).of(dependency));
        }
        let request = self
            .inner
            .build()
            .map_err(|e| Error::new(Kind::Request, e).of(dependency))?;
        Ok((request, self.options))
    }

    /// Sends the request through the humus client ([`Client::execute_with`]).
    ///
    /// # Errors
    ///
    /// As [`Client::execute_with`], and [`build`](RequestBuilder::build)'s.
    ///
    /// # Panics
    ///
    /// As [`Client::execute_with`]: when polled outside a tokio runtime.
    pub fn send(self) -> impl Future<Output = Result<reqwest::Response, Error>> + Send + use<> {
        let RequestBuilder {
            client,
            inner,
            options,
            refused,
            plain,
        } = self;
        // The builder's own handle moves into the call (no second clone of
        // the client's `Arc`). Either, not an async block holding the
        // future it then awaits, which would hold the call's state twice.
        let request = match refused {
            Some(why) => Err(Error::says(Kind::Request, why)),
            None => inner.build().map_err(|e| Error::new(Kind::Request, e)),
        };
        match request {
            Ok(request) => {
                futures_util::future::Either::Left(client.into_call(request, options, plain))
            }
            Err(e) => futures_util::future::Either::Right(std::future::ready(Err(
                e.of(&client.inner.dependency)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each path's URL is what parsing the base URL's text with the path
    /// appended gives.
    #[test]
    fn a_paths_url_is_the_base_urls_text_with_the_path_appended() {
        let setup = Setup::new();
        for base in [
            "http://a:8080",
            "http://a:8080/",
            "https://a/v1",
            "https://a/v1/",
            "http://[::1]:1/api/v2",
        ] {
            let client = Client::new(
                &setup,
                Settings {
                    base_url: base.into(),
                    ..Settings::default()
                },
            )
            .unwrap();
            for path in [
                "",
                "/",
                "x",
                "/x",
                "x/",
                "/rates/EUR",
                "rates/EUR?at=now&b=1",
                "?q=1",
                "?",
                "/x?q=a%20b",
                "/x#top",
                "x?q#f",
                "#f",
                "/a%20b/ü/%41",
                "/a//b",
                "/x:y",
                "/@x",
            ] {
                // No path of its own: the base URL itself, with the query
                // or fragment given.
                let text = client.inner.base.as_str();
                let want = if path.is_empty() || path.starts_with(['?', '#']) {
                    Url::parse(&format!("{text}{path}")).unwrap()
                } else {
                    let text = text.strip_suffix('/').unwrap_or(text);
                    let sep = if path.starts_with('/') { "" } else { "/" };
                    Url::parse(&format!("{text}{sep}{path}")).unwrap()
                };
                assert_eq!(client.url_of(path), want, "{base} + {path:?}");
            }
        }
    }

    /// A URL parser drops a tab, LF or CR anywhere in the text: a path
    /// with one is refused, before its dots could come together.
    #[test]
    fn white_space_and_control_characters_are_refused() {
        for path in [
            "users/.\n./..\n/admin",
            ".\n./etc",
            "%2e\t%2e/etc",
            ".\r.",
            "a\u{0}b",
            "a\u{7f}",
            "a\u{85}",
            "a b",
            "a\u{a0}b",
            "?q=a b",
            "#.\n.",
        ] {
            let why = check_path(path).unwrap_err();
            assert!(
                why.contains("white space or control character"),
                "{path:?}: {why}"
            );
        }
        // A `.` or `..` between encoded separators, which a server that
        // decodes `%2F` or `%5C` before routing reads as a segment.
        for path in [
            "..%2fadmin",
            "a/..%2Fadmin",
            "a%2F..%2Fb",
            "a%2f.",
            "%2e%2e%2fetc",
            "..%5cwindows",
            "x/%2E%5C..%5Cy?q=..%2f",
        ] {
            let why = check_path(path).unwrap_err();
            assert!(why.contains("decodes %2F or %5C"), "{path:?}: {why}");
        }
        // An encoded slash inside a name passes.
        for path in ["objects/a%2Fb", "a%2f.b", "%2f", "a%5c...b", "x?q=..%2f"] {
            assert_eq!(check_path(path), Ok(()), "{path:?}");
        }
        // A `.` or `..` with parameters, which a servlet container reads
        // as the dot segment alone.
        for path in [
            "..;/admin",
            "a/..;x=1/b",
            "%2e%2e%3b/admin",
            "..%3B",
            ".;",
            "a%2F..;%2Fb",
        ] {
            let why = check_path(path).unwrap_err();
            assert!(
                why.contains("drops a segment's parameters"),
                "{path:?}: {why}"
            );
        }
        // A name with parameters passes, and so do dots that are no segment.
        for path in ["a;v=1", "..a;b", "a/...;/b", ";..", "x?q=..;"] {
            assert_eq!(check_path(path), Ok(()), "{path:?}");
        }
        // A `%2` before a character of more than one byte is no dot (and
        // no panic).
        for path in ["%2é", "a/%2ü/b", "%2e%2é"] {
            assert_eq!(check_path(path), Ok(()), "{path:?}");
        }
    }

    use proptest::prelude::*;

    /// Outside a tokio runtime a call panics with the client's own message,
    /// not tokio's from deep inside reqwest.
    #[test]
    fn a_call_polled_outside_a_runtime_panics_saying_so() {
        let client = Client::new(
            &Setup::new(),
            Settings {
                base_url: "http://127.0.0.1:1".into(),
                ..Settings::default()
            },
        )
        .unwrap();
        let send = client.get("/x").send();
        let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut send = std::pin::pin!(send);
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            let _ = send.as_mut().poll(&mut cx);
        }))
        .unwrap_err();
        let text = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default();
        assert!(
            text.starts_with(
                "humus::http::client::Client: a call was polled outside a tokio runtime"
            ),
            "{text}"
        );
    }

    proptest! {
        /// Whatever path is accepted, the URL built stays on the base URL's
        /// origin and under its path.
        #[test]
        fn an_accepted_paths_url_stays_under_the_base_path(
            path in proptest::collection::vec(
                proptest::sample::select(vec![
                    ".", ".", "/", "/", "%2e", "%2E", "%2", "e", "a", "\t", "\n", "\r",
                    " ", "\\", ":", "//", "?", "#", "%", "\u{0}", "\u{b}", "\u{c}", "..",
                    "%5c", "%2f", "\u{3000}", "\u{ff0e}", "é", "ü", ";", "%3b",
                ]),
                0..12,
            ).prop_map(|parts| parts.concat())
        ) {
            let setup = Setup::new();
            let client = Client::new(
                &setup,
                Settings {
                    base_url: "http://127.0.0.1:1/api/v1".into(),
                    ..Settings::default()
                },
            )
            .unwrap();
            if check_path(&path).is_ok() {
                let url = client.url_of(&path);
                prop_assert_eq!(url.origin(), client.base_url().origin());
                prop_assert!(
                    url.path() == "/api/v1" || url.path().starts_with("/api/v1/"),
                    "{:?} gave {}", path, url
                );
                // Nor does a server that decodes encoded separators before
                // routing read a dot segment in it.
                let decoded = url.path().replace("%2f", "/").replace("%2F", "/")
                    .replace("%5c", "/").replace("%5C", "/");
                prop_assert!(
                    !decoded.split('/').any(is_dot_segment),
                    "{:?} gave {}, read as {}", path, url, decoded
                );
                // Nor one that drops a segment's parameters.
                prop_assert!(
                    !decoded.split('/').any(|s| is_dot_segment(without_parameters(s))),
                    "{:?} gave {}, read as {} without parameters", path, url, decoded
                );
                let (request, _) = client.get(&path).build().unwrap();
                prop_assert_eq!(request.url(), &url);
            }
        }
    }
}
