//! One publish, the transport of the attempt loop ([`crate::call`]):
//! [`PublishCall`], its deadline, headers, attempts and errors.

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use amqprs::{BasicProperties, FieldTable};
use opentelemetry::Context;
use opentelemetry::trace::{TraceContextExt as _, Tracer as _};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::super::error::{PublishError, PublishErrorKind};
use super::{Confirm, Destination, Inner, Instruments, PublishSpan, Publisher};
use crate::call::{Attempt, Classification, Parts, Transport, cut_error};
use crate::circuit::Rejected;
use crate::fault::InjectedError;
use crate::fault::strip::BAGGAGE;
use crate::telemetry::{FieldTableInjector, to_header_map, write_back};
use crate::{circuit, fault, retry};

/// One publish, the transport of the attempt loop ([`crate::call`]).
pub(super) struct PublishCall<'a> {
    pub(super) inner: &'a Inner,
    pub(super) cx: Context,
    pub(super) started: Instant,
    pub(super) deadline: Option<Instant>,
    /// Where it goes, kept by the publish's future.
    pub(super) destination: &'a Arc<Destination>,
    /// The caller's properties, where the publish's future keeps them
    /// (borrowed, not moved into the call: the future would keep them
    /// twice).
    pub(super) properties: &'a BasicProperties,
    /// The body; the last attempt takes it (a copy is sent while another
    /// may follow).
    pub(super) body: Option<Vec<u8>>,
}

impl<'a> PublishCall<'a> {
    pub(super) fn new(
        inner: &'a Inner,
        cx: Context,
        inherited: Option<Instant>,
        destination: &'a Arc<Destination>,
        properties: &'a BasicProperties,
        body: Vec<u8>,
    ) -> PublishCall<'a> {
        let started = Instant::now();
        let own = started.checked_add(inner.settings.timeout);
        let deadline = match (own, inherited) {
            (Some(own), Some(inherited)) => Some(own.min(inherited)),
            (own, inherited) => own.or(inherited),
        };
        PublishCall {
            inner,
            cx,
            started,
            deadline,
            destination,
            properties,
            body: Some(body),
        }
    }

    pub(super) fn error(&self, kind: PublishErrorKind, detail: impl Into<String>) -> PublishError {
        // `exchange:routing key`, what every error names (made only for an
        // error: a publish that is confirmed never needs it).
        let point = Publisher::point(&self.destination.exchange, &self.destination.routing_key);
        let destination: Arc<str> = match point.strip_prefix("rabbitmq:") {
            Some(d) => Arc::from(d),
            None => Arc::from("the default exchange"),
        };
        PublishError::new(kind, &destination, detail)
    }

    /// The message's properties for the attempt of `span`: the caller's,
    /// with the attempt's [`headers`](PublishCall::headers).
    pub(super) fn properties(&self, span: &PublishSpan<'_>) -> BasicProperties {
        let mut properties = self.properties.clone();
        if let Some(headers) = self.headers(span) {
            properties.with_headers(headers);
        }
        properties
    }

    /// The message's headers for an attempt: the caller's, with the
    /// attempt's trace context and the call's baggage written over the
    /// propagator's fields, the scenario stripped unless `forward_scenario`.
    /// `None` when the message has no headers and nothing is to be
    /// written (no propagator fields): its properties are sent as given.
    fn headers(&self, span: &PublishSpan<'_>) -> Option<FieldTable> {
        let inner = self.inner;
        let propagator = &inner.telemetry.propagator;
        // No headers of the caller's and a propagator that writes no
        // field (telemetry off): nothing to write, nothing to strip.
        if self.properties.headers().is_none() && !inner.telemetry.propagates {
            return None;
        }
        let mut headers = self.properties.headers().cloned().unwrap_or_default();
        for field in propagator.fields() {
            if let Ok(name) = amqprs::FieldName::try_from(field) {
                headers.remove(&name);
            }
        }
        let stripped =
            if inner.dependency.faults.reads_scenarios() && !inner.settings.forward_scenario {
                inner.dependency.faults.strip(&span.cx)
            } else {
                None
            };
        let mut injector = FieldTableInjector(&mut headers);
        match stripped {
            Some(cx) if span.traced => {
                let span_context = span.cx.span().span_context().clone();
                propagator
                    .inject_context(&cx.with_remote_span_context(span_context), &mut injector);
            }
            Some(cx) => propagator.inject_context(&cx, &mut injector),
            None => propagator.inject_context(&span.cx, &mut injector),
        }
        // A `baggage` header the caller wrote (kept where the propagator
        // writes none) is stripped as a server strips it.
        if inner.dependency.faults.reads_scenarios()
            && !inner.settings.forward_scenario
            && headers
                .as_ref()
                .keys()
                .any(|k| k.as_ref().as_str().eq_ignore_ascii_case(BAGGAGE.as_str()))
        {
            let (mut map, _) = to_header_map(&headers);
            if let Some(stripped) = inner.dependency.faults.strip_headers(&mut map) {
                stripped.record(&span.cx.span());
                write_back(&mut headers, &map, [BAGGAGE.as_str()]);
            }
        }
        if headers.as_ref().is_empty() && self.properties.headers().is_none() {
            return None;
        }
        Some(headers)
    }

    /// What the broker's answer (or its absence) makes of the attempt.
    fn answer(
        &self,
        attempt: Attempt,
        answer: Result<Confirm, oneshot::error::RecvError>,
    ) -> Result<(), PublishError> {
        match answer {
            Ok(Confirm::Ack) => Ok(()),
            Ok(Confirm::TimedOut) => Err(cut_error(self, attempt, None)),
            Ok(Confirm::Nack) => Err(self.error(
                PublishErrorKind::Nacked,
                "the broker nacked the message",
            )),
            Ok(Confirm::Returned { code, text }) => Err(self
                .error(
                    PublishErrorKind::Unroutable,
                    format!("the broker returned the message as unroutable ({code} {text}): no queue is bound for it"),
                )
                .with_reply_code(code)),
            Ok(Confirm::Closed { code, text }) => {
                let kind = if matches!(code, 403 | 404 | 406) {
                    PublishErrorKind::Refused
                } else {
                    PublishErrorKind::Connection
                };
                Err(self
                    .error(kind, format!("the broker closed the channel: {code} {text}"))
                    .with_reply_code(code))
            }
            Err(_) => Err(self.error(
                PublishErrorKind::Connection,
                format!(
                    "the connection to {} was lost before the confirm",
                    self.inner.addr
                ),
            )),
        }
    }
}

impl<'a> Transport for PublishCall<'a> {
    type Output = ();
    type Error = PublishError;
    type Span = PublishSpan<'a>;
    type Prepared = Vec<u8>;

    /// The send bounds itself: a timer for a step that waits (the
    /// channel's lock, a dial, room in amqprs's queue), made only if it
    /// waits, and for the confirm's wait the channel's one timer
    /// ([`watch_deadlines`](super::watch_deadlines)), rather than one an
    /// attempt.
    const TIMES_ATTEMPTS: bool = false;

    fn parts(&self) -> Parts<'_> {
        self.inner
            .dependency
            .parts(&self.cx, self.deadline, Some(self.started))
    }

    fn point(&self) -> Cow<'static, str> {
        // Asked only when failure injection is on.
        Cow::Owned(Publisher::point(
            &self.destination.exchange,
            &self.destination.routing_key,
        ))
    }

    fn is_closed(&self) -> bool {
        self.inner.is_closed.load(Ordering::Acquire)
    }

    fn closed(&self) -> impl Future<Output = ()> + Send + '_ {
        let mut closed = self.inner.closed.subscribe();
        async move {
            let _ = closed.wait_for(|c| *c).await;
        }
    }

    fn start(&self, _attempt: u32) -> PublishSpan<'a> {
        let instruments: &'a Instruments = &self.inner.telemetry;
        let (cx, traced) = match &instruments.tracer {
            Some(tracer) => {
                let builder = instruments.span_builder(
                    &self.destination.exchange,
                    &self.destination.routing_key,
                    self.properties.message_id().map(String::as_str),
                );
                let span = tracer.build_with_context(builder, &self.cx);
                (self.cx.with_span(span), true)
            }
            None => (self.cx.clone(), false),
        };
        PublishSpan {
            instruments,
            cx,
            traced,
            destination: self.destination,
            started: instruments.duration.as_ref().map(|_| Instant::now()),
            sent: false,
            ended: false,
        }
    }

    fn span_context<'s>(span: &'s PublishSpan<'a>) -> &'s Context {
        &span.cx
    }

    fn end(&self, mut span: PublishSpan<'a>, result: Result<&(), &PublishError>) {
        match result {
            Ok(()) => span.finish(None),
            Err(e) => span.finish(Some((e.error_type(), e.to_string()))),
        }
    }

    /// A copy of the body while another attempt may follow; else the body
    /// itself.
    fn prepare(&mut self, attempt: Attempt) -> Vec<u8> {
        if attempt.n >= self.inner.settings.max_attempts
            && let Some(body) = self.body.take()
        {
            return body;
        }
        self.body.clone().unwrap_or_default()
    }

    /// Bounded by the attempt's deadline itself ([`TIMES_ATTEMPTS`]
    /// `false`): the wait for the channel (and a dial) by a timer made only
    /// if it waits at all, the wait for the confirm by the channel's one
    /// timer ([`watch_deadlines`](super::watch_deadlines)). An error at or
    /// after the deadline is the deadline's, as the loop makes it.
    ///
    /// [`TIMES_ATTEMPTS`]: Transport::TIMES_ATTEMPTS
    async fn send<'s>(
        &'s self,
        attempt: Attempt,
        body: Vec<u8>,
        span: &'s mut PublishSpan<'a>,
    ) -> Result<(), PublishError> {
        // Not boxed: amqprs's publish future alone is 1,168 B, past
        // glibc's per-thread cache of small chunks, so a box cost each
        // attempt an allocation from the arena and a free from another
        // thread (callgrind, 64 publishes at once: 216 instructions a
        // publish more than keeping the send in the call's state and
        // copying that larger state; 550 more one at a time).
        let result = match self.inner.send(self, span, body, attempt.bound).await {
            Ok((rx, guard)) => {
                let answer = rx.await;
                guard.answered();
                self.answer(attempt, answer)
            }
            Err(e) => Err(e),
        };
        // The attempt bounds itself (`TIMES_ATTEMPTS`): an error at or
        // after its deadline is the deadline's, as the loop makes it.
        match result {
            Err(_) if attempt.bound.is_some_and(|at| Instant::now() >= at) => {
                Err(cut_error(self, attempt, None))
            }
            result => result,
        }
    }

    fn classify(
        &self,
        result: Result<&(), &PublishError>,
        deadline_passed: bool,
    ) -> Classification {
        match result {
            Err(_) if deadline_passed => Classification::stop(circuit::Outcome::Failure),
            Ok(()) => self.inner.settings.classify.classify(Ok(())),
            Err(e) => self.inner.settings.classify.classify(Err(e)),
        }
    }

    fn is_resendable(&self) -> bool {
        true
    }

    fn finish(
        &self,
        result: Result<(), PublishError>,
        _decision: retry::Decision,
        deadline_passed: bool,
    ) -> Result<(), PublishError> {
        match result {
            Err(e)
                if deadline_passed
                    && !matches!(
                        e.kind(),
                        PublishErrorKind::Timeout
                            | PublishErrorKind::Unroutable
                            | PublishErrorKind::Refused
                    ) =>
            {
                Err(self.error(
                    PublishErrorKind::Timeout,
                    format!("no confirm within the call's deadline; the last attempt: {e}"),
                ))
            }
            result => result,
        }
    }

    fn rejected(&self, _attempt: u32, rejected: Rejected) -> PublishError {
        let error = self.error(PublishErrorKind::Rejected, rejected.to_string());
        let mut span = self.start(0);
        span.finish(Some((error.error_type(), error.to_string())));
        self.inner.dependency.recorder.record_rejected_call();
        error
    }

    fn expired(&self) -> PublishError {
        self.error(
            PublishErrorKind::Timeout,
            "the call's deadline had passed before its first attempt: nothing was sent",
        )
    }

    fn deadline_exceeded(&self) -> PublishError {
        self.error(
            PublishErrorKind::Timeout,
            "no confirm within the call's deadline",
        )
    }

    fn attempt_timed_out(&self, after: Duration, injected: Option<InjectedError>) -> PublishError {
        let e = self.error(
            PublishErrorKind::AttemptTimeout,
            format!("no confirm within attempt_timeout {after:?}"),
        );
        match injected {
            Some(injected) => e.with_injected(injected),
            None => e,
        }
    }

    /// An abort is marked as a lost connection (nothing was sent), so both
    /// classifiers decide it the same; a delay cut short is the deadline's
    /// or the close's.
    fn injected(&self, injected: InjectedError) -> PublishError {
        let kind = match injected.cause() {
            None => PublishErrorKind::Connection,
            Some(fault::Cause::DeadlineExceeded) => PublishErrorKind::Timeout,
            Some(fault::Cause::Canceled) => PublishErrorKind::Closed,
        };
        self.error(kind, format!("fit: {injected}"))
            .with_injected(injected)
    }

    fn closing(&self) -> PublishError {
        self.error(PublishErrorKind::Closed, "the publisher is closed")
    }
}
