//! The HTTP client's [`RequestBuilder`]: reqwest's own builder and the
//! call's [`CallOptions`].

use std::fmt;
use std::future::Future;
use std::time::Duration;

use opentelemetry::Context;

use super::{CallOptions, Client, Error, Kind};

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
    pub(super) client: Client,
    pub(super) inner: reqwest::RequestBuilder,
    pub(super) options: CallOptions,
    /// Why [`Client::request`] refused the path, if it did.
    pub(super) refused: Option<String>,
    /// Whether only humus's own methods touched the reqwest builder (not
    /// [`map`](RequestBuilder::map), which may give the request
    /// extensions of its own).
    pub(super) plain: bool,
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
    /// [`Settings::timeout`](super::Settings::timeout) ([`reqwest::RequestBuilder::timeout`]).
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
        let dependency = &self.client.inner.base_text;
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
                e.of(&client.inner.base_text)
            ))),
        }
    }
}
