//! The HTTP `Client`: one dependency, one reqwest connection pool, one
//! budget, one breaker.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use opentelemetry::Context;
use reqwest::{Method, Url};

use super::builder::RequestBuilder;
use super::call::HttpCall;
use super::path::check_path;
use super::{Error, Kind, NewError, Settings};

use crate::call::{Anchor, Dependency, Refused, sections};
use crate::deadline::Inherited;
use crate::{Setup, circuit, telemetry};

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
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) settings: Settings,
    pub(super) base: Url,
    /// The base URL's text, which every error of a call names.
    pub(super) base_text: Arc<str>,
    /// `http:<host>:<port>`, evaluated once per attempt.
    pub(super) point: String,
    pub(super) http: reqwest::Client,
    /// The breaker, budget, backoff, recorder and failure injector every
    /// call runs with.
    pub(super) dependency: Dependency,
    /// Keeps a timer ahead of the attempts' timers (reqwest's, of
    /// `attempt_timeout` or the call's time left) while calls come, so that
    /// registering each does not wake tokio's time driver ([`Anchor`]):
    /// spawned by a call when it is not running, touched by each, ended
    /// when the last clone of the client is dropped.
    anchor: Arc<Anchor>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.anchor.end();
    }
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
            None => default_tls()
                .map_err(|e| NewError::one(super::settings::OF, String::new(), "tls", e))?,
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
            .map_err(|e| NewError::one(super::settings::OF, String::new(), "tls", e))?;
        let host = base.host_str().unwrap_or_default();
        let port = base.port_or_known_default().unwrap_or(0);
        let point = format!("http:{host}:{port}");
        let recorder = telemetry::ClientRecorder::new(setup.telemetry(), &format!("{host}:{port}"));
        let dependency =
            Dependency::new(setup, recorder, sections!(settings)).map_err(|e| match e {
                Refused::Breaker(e) => {
                    NewError::one(super::settings::OF, String::new(), "breaker", e)
                }
                Refused::Budget(e) => {
                    NewError::one(super::settings::OF, String::new(), "retry_budget", e)
                }
            })?;
        Ok(Client {
            inner: Arc::new(Inner {
                settings,
                base_text: Arc::from(base.as_str()),
                base,
                point,
                http,
                dependency,
                anchor: Arc::default(),
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
        inner.dependency.backoff = inner.dependency.backoff.clone().with_source(source);
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
        self.inner.dependency.breaker.state()
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
            if base.is_empty() && own.starts_with('/') {
                // A base URL with no path (`http://rates:8080`, the usual
                // one): `path`'s own, with no string joined to hold it.
                url.set_path(own);
            } else {
                let mut joined = String::with_capacity(base.len() + own.len() + 1);
                joined.push_str(base);
                if !own.starts_with('/') {
                    joined.push('/');
                }
                joined.push_str(own);
                url.set_path(&joined);
            }
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
    /// attempt's copy of it can be made part by part ([`copy_of`](super::call::copy_of)).
    pub(super) fn into_call(
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
            // At the first call, and again if the runtime that ran the
            // anchor's task is gone.
            inner.anchor.spawn();
            inner.anchor.touch();
            let result = match HttpCall::new(inner, request, options.retry, plain, cx, inherited) {
                Ok(call) => {
                    let mut call = crate::call::Call::new(&inner.dependency.breaker, call);
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
            result.map_err(|e| e.of(&inner.base_text))
        }
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
#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::client::path::without_parameters;
    use crate::http::client::settings::is_dot_segment;

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
