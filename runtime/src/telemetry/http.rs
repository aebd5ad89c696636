//! What the HTTP client records per attempt: its CLIENT span, with
//! OpenTelemetry's HTTP client conventions, and
//! `http.client.request.duration`. Everything else it records (humus's four
//! instruments, the breaker's log records) goes through the same
//! [`ClientRecorder`] methods as the gRPC client's, with the same names and
//! attributes.

use std::borrow::Cow;
use std::fmt;

use http::HeaderMap;
use http::header::HeaderName;
use opentelemetry::trace::{SpanBuilder, SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};

use super::attempt::InFlight;
use super::client::{ClientRecorder, DROPPED_MESSAGE};
use super::headers::HeaderInjector;
use super::names::*;

/// The `error.type` of an HTTP attempt dropped before it ended.
pub const HTTP_CANCELED_ERROR_TYPE: &str = "canceled";

/// The value of `http.request.method` for `method`: its name for the nine
/// methods of RFC 9110 and RFC 5789 (`PATCH`), else `_OTHER`.
pub fn http_method_name(method: &http::Method) -> &'static str {
    match *method {
        http::Method::GET => "GET",
        http::Method::HEAD => "HEAD",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::DELETE => "DELETE",
        http::Method::CONNECT => "CONNECT",
        http::Method::OPTIONS => "OPTIONS",
        http::Method::TRACE => "TRACE",
        http::Method::PATCH => "PATCH",
        _ => "_OTHER",
    }
}

impl ClientRecorder {
    /// Whether HTTP attempts are traced (a tracer provider was given): a
    /// client need not make a span's `url.full` otherwise.
    pub(crate) fn traces_http(&self) -> bool {
        self.inner.kit.http_tracer.is_some()
    }

    /// Starts an HTTP attempt of `method` to `url_full` (the absolute URL,
    /// without credentials) as a CLIENT span, a child of the span in `cx`,
    /// in the scope [`HTTP_SCOPE`](super::names::HTTP_SCOPE).
    ///
    /// The span is named after the method (`GET`: the client knows no route
    /// template), with `http.request.method` (and
    /// `http.request.method_original` for a method the conventions do not
    /// know), `server.address`, `server.port`, `url.full` and, from the
    /// second attempt on, `http.request.resend_count` = `resends`. Its
    /// [context](HttpAttempt::context) keeps `cx`'s baggage: the one failure
    /// injection evaluates the attempt in. Its clock is tokio's.
    pub fn start_http_attempt(
        &self,
        cx: &Context,
        method: &http::Method,
        url_full: &str,
        resends: u32,
    ) -> HttpAttempt {
        let tracer = self.inner.kit.http_tracer.as_ref();
        HttpAttempt(InFlight::start(
            &self.inner,
            tracer,
            cx,
            http_method_name(method),
            || {
                let mut builder = self.http_span_builder(method, url_full);
                if resends > 0 {
                    builder
                        .attributes
                        .get_or_insert_with(Vec::new)
                        .push(KeyValue::new(HTTP_REQUEST_RESEND_COUNT, i64::from(resends)));
                }
                builder
            },
        ))
    }

    /// Records an HTTP call the breaker rejected: a span of humus's own
    /// scope ([`CLIENT_SCOPE`](super::names::CLIENT_SCOPE)), named and
    /// attributed as an attempt's, a child of the span in `cx`, ended at
    /// once with `error.type`
    /// [`HTTP_REJECTED_ERROR_TYPE`](super::names::HTTP_REJECTED_ERROR_TYPE)
    /// and status Error with `message`; and one `humus.circuit.calls` of
    /// outcome `rejected`, as the gRPC client counts one. Nothing was sent,
    /// so no `http.client.request.duration`.
    pub fn record_http_rejected(
        &self,
        cx: &Context,
        method: &http::Method,
        url_full: &str,
        message: &str,
    ) {
        if let Some(tracer) = &self.inner.kit.client_tracer {
            let span = tracer.build_with_context(self.http_span_builder(method, url_full), cx);
            let cx = cx.with_span(span);
            let span = cx.span();
            span.set_attribute(KeyValue::new(ERROR_TYPE, HTTP_REJECTED_ERROR_TYPE));
            span.set_status(Status::error(message.to_owned()));
            span.end();
        }
        if let Some(instruments) = &self.inner.kit.instruments {
            instruments
                .calls
                .add(1, &self.inner.endpoint.call_attributes[3]);
        }
    }

    fn http_span_builder(&self, method: &http::Method, url_full: &str) -> SpanBuilder {
        let endpoint = &self.inner.endpoint;
        let name = http_method_name(method);
        let mut attributes = Vec::with_capacity(7);
        attributes.push(KeyValue::new(HTTP_REQUEST_METHOD, name));
        if name == "_OTHER" {
            attributes.push(KeyValue::new(
                HTTP_REQUEST_METHOD_ORIGINAL,
                method.as_str().to_owned(),
            ));
        }
        attributes.push(endpoint.address_kv.clone());
        attributes.extend(endpoint.port_kv.clone());
        attributes.push(KeyValue::new(URL_FULL, url_full.to_owned()));
        SpanBuilder::from_name(Cow::Borrowed(if name == "_OTHER" { "HTTP" } else { name }))
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
    }
}

/// One HTTP attempt in flight, from [`ClientRecorder::start_http_attempt`]:
/// its CLIENT span (in its [`context`](Self::context)) and its start time.
///
/// End it with [`end_response`](Self::end_response) once the response's
/// headers have come, or [`end_error`](Self::end_error); an attempt
/// dropped without either (the caller dropped the call) ends with
/// `error.type` [`HTTP_CANCELED_ERROR_TYPE`].
pub struct HttpAttempt(InFlight);

impl fmt::Debug for HttpAttempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.debug("HttpAttempt", f)
    }
}

impl HttpAttempt {
    /// The attempt's context: the call's context (its baggage) with the
    /// attempt's span as the active one; without a tracer provider, the
    /// call's context as it was.
    pub fn context(&self) -> &Context {
        &self.0.cx
    }

    /// Writes the attempt's span context and a context's baggage into
    /// `headers` with the [`Telemetry`](super::Telemetry)'s propagator,
    /// first removing every header the propagator writes (what the caller
    /// set there is replaced, so a scenario the caller wrote by hand is
    /// stripped too). The baggage is `baggage`'s when given (the context
    /// failure injection returned once it stripped the scenario), else the
    /// call's.
    pub fn inject(&self, baggage: Option<&Context>, headers: &mut HeaderMap) {
        let propagator = &self.0.recorder.kit.propagator;
        for field in propagator.fields() {
            if let Ok(name) = HeaderName::try_from(field) {
                headers.remove(name);
            }
        }
        let mut injector = HeaderInjector(headers);
        match baggage {
            Some(cx) if self.0.traced => {
                let span_context = self.0.cx.span().span_context().clone();
                propagator
                    .inject_context(&cx.with_remote_span_context(span_context), &mut injector);
            }
            Some(cx) => propagator.inject_context(cx, &mut injector),
            None => propagator.inject_context(&self.0.cx, &mut injector),
        }
    }

    /// Ends the attempt with the status code of its response: sets
    /// `http.response.status_code`; from 400 on, `error.type` = the code
    /// (`"503"`) and the span's status Error (a client counts a 4xx as an
    /// error, as the HTTP conventions ask of a CLIENT span); ends the span;
    /// records `http.client.request.duration` in seconds with
    /// `http.request.method`, `server.address`, `server.port`,
    /// `http.response.status_code` and, from 400 on, `error.type`.
    #[inline]
    pub fn end_response(mut self, status: u16) {
        self.0.ended = true;
        // Nothing records (no tracer, no meter): no code of the span's or
        // the metric's runs, nor is the status written out.
        if !self.records() {
            return;
        }
        let error = (status >= 400).then(|| status.to_string());
        self.finish(Some(status), error.map(Cow::Owned), "");
    }

    /// Whether ending the attempt records anything: its span is traced,
    /// or `http.client.request.duration` is.
    #[inline]
    fn records(&self) -> bool {
        self.0.traced || self.0.started.is_some()
    }

    /// Ends the attempt with an error and no response: `error.type` =
    /// `error_type` (such as `timeout`, or
    /// [`fault::ERROR_TYPE`](crate::fault::ERROR_TYPE) for every failure
    /// that failure injection caused), the span's status Error with
    /// `message`; records `http.client.request.duration` with
    /// `error.type` and no status code.
    pub fn end_error(mut self, error_type: &'static str, message: &str) {
        self.finish(None, Some(Cow::Borrowed(error_type)), message);
    }

    #[inline(never)]
    fn finish(
        &mut self,
        status: Option<u16>,
        error_type: Option<Cow<'static, str>>,
        message: &str,
    ) {
        self.0.ended = true;
        if self.0.traced {
            let span = self.0.cx.span();
            if let Some(status) = status {
                span.set_attribute(KeyValue::new(HTTP_RESPONSE_STATUS_CODE, i64::from(status)));
            }
            if let Some(error_type) = &error_type {
                span.set_attribute(KeyValue::new(ERROR_TYPE, error_type.clone()));
                span.set_status(Status::error(if message.is_empty() {
                    error_type.clone().into_owned()
                } else {
                    message.to_owned()
                }));
            }
            span.end();
        }
        let (Some(instruments), Some(started)) = (&self.0.recorder.kit.instruments, self.0.started)
        else {
            return;
        };
        let seconds = started.elapsed().as_secs_f64();
        let endpoint = &self.0.recorder.endpoint;
        let mut attributes = Vec::with_capacity(5);
        attributes.push(KeyValue::new(HTTP_REQUEST_METHOD, self.0.method));
        attributes.push(endpoint.address_kv.clone());
        attributes.extend(endpoint.port_kv.clone());
        if let Some(status) = status {
            attributes.push(KeyValue::new(HTTP_RESPONSE_STATUS_CODE, i64::from(status)));
        }
        if let Some(error_type) = error_type {
            attributes.push(KeyValue::new(ERROR_TYPE, error_type));
        }
        instruments.http_duration.record(seconds, &attributes);
    }
}

impl Drop for HttpAttempt {
    fn drop(&mut self) {
        if !self.0.ended {
            self.finish(
                None,
                Some(Cow::Borrowed(HTTP_CANCELED_ERROR_TYPE)),
                DROPPED_MESSAGE,
            );
        }
    }
}
