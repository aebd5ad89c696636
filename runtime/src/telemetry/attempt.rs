//! One gRPC client attempt in flight: its CLIENT span, its propagation and
//! its `rpc.client.call.duration` ([`Attempt`]).

use std::fmt;
use std::sync::Arc;

use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::{SpanBuilder, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};
use tokio::time::Instant;
use tonic::Code;
use tonic::metadata::MetadataMap;

use super::client::{DROPPED_MESSAGE, Recorder, code_name};
use super::metadata::{MetadataExtractor, MetadataInjector};
use super::names::*;
use crate::fault::InjectedError;

/// The `error.type` of a status: the code's name, or for a failure that
/// failure injection caused, [`fault::ERROR_TYPE`](crate::fault::ERROR_TYPE),
/// one value for every injected failure.
pub(super) fn error_type(code: Code, status: Option<&tonic::Status>) -> &'static str {
    match status {
        Some(status) if code != Code::Ok && InjectedError::from_status(status).is_some() => {
            InjectedError::ERROR_TYPE
        }
        _ => code_name(code),
    }
}

pub(super) fn end_span(cx: &Context, code: Code, message: &str, error_type: &'static str) {
    let span = cx.span();
    span.set_attribute(KeyValue::new(RPC_RESPONSE_STATUS_CODE, code_name(code)));
    if code != Code::Ok {
        span.set_attribute(KeyValue::new(ERROR_TYPE, error_type));
        span.set_status(Status::error(message.to_owned()));
    }
    span.end();
}

/// One attempt in flight, from [`ClientRecorder::start_attempt`](super::ClientRecorder::start_attempt): its
/// CLIENT span (in its [`context`](Self::context)) and its start time.
///
/// End it with [`end`](Self::end) when its status is known: a unary
/// attempt when it returns, a stream when it ends (one span from its open
/// to its end). An attempt dropped without `end`, because the caller
/// dropped the call's future or a stream before its end, ends as
/// `CANCELLED`.
pub struct Attempt(pub(super) InFlight);

impl fmt::Debug for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.debug("Attempt", f)
    }
}

/// What an attempt in flight holds, a gRPC one's ([`Attempt`]) and an
/// HTTP one's ([`HttpAttempt`](super::HttpAttempt)) alike.
pub(super) struct InFlight {
    pub(super) recorder: Arc<Recorder>,
    /// The caller's context, with the attempt's span active when traced.
    pub(super) cx: Context,
    pub(super) traced: bool,
    /// The method, as the attempt's metrics name it.
    pub(super) method: &'static str,
    /// When the attempt started; read only when it will be measured.
    pub(super) started: Option<Instant>,
    pub(super) ended: bool,
}

impl InFlight {
    /// An attempt of `method` starting now: a child of the span in `cx`,
    /// traced with `tracer` (the span `span` builds) when there is one,
    /// and measured when `recorder` has instruments.
    #[inline]
    pub(super) fn start(
        recorder: &Arc<Recorder>,
        tracer: Option<&BoxedTracer>,
        cx: &Context,
        method: &'static str,
        span: impl FnOnce() -> SpanBuilder,
    ) -> InFlight {
        let (cx, traced) = match tracer {
            Some(tracer) => {
                let span = tracer.build_with_context(span(), cx);
                (cx.with_span(span), true)
            }
            None => (cx.clone(), false),
        };
        InFlight {
            recorder: Arc::clone(recorder),
            cx,
            traced,
            method,
            started: recorder.kit.instruments.as_ref().map(|_| Instant::now()),
            ended: false,
        }
    }

    /// What an attempt shows of itself, as `name`.
    pub(super) fn debug(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(name)
            .field("method", &self.method)
            .field("traced", &self.traced)
            .field("started", &self.started)
            .finish_non_exhaustive()
    }
}

impl Attempt {
    /// The attempt's context: the call's context (its baggage) with the
    /// attempt's span as the active one. Without a tracer provider, the
    /// call's context as it was.
    pub fn context(&self) -> &Context {
        &self.0.cx
    }

    /// Writes the attempt's span context and the call's baggage into
    /// `metadata` with the [`Telemetry`](super::Telemetry)'s propagator, so a server that
    /// extracts them joins the trace, its span a child of this attempt's,
    /// and sees the baggage. Call it on each attempt's request metadata
    /// (or [`inject_with_baggage`](Self::inject_with_baggage) when the
    /// baggage to send differs from the call's).
    pub fn inject(&self, metadata: &mut MetadataMap) {
        self.0
            .recorder
            .kit
            .propagator
            .inject_context(&self.0.cx, &mut MetadataInjector(metadata));
    }

    /// Writes the attempt's span context and `cx`'s baggage into
    /// `metadata`, as [`inject`](Self::inject) does: for the context failure
    /// injection returns once it has stripped the scenario from what is
    /// sent ([`Injector::strip`](crate::fault::Injector::strip)). Whatever
    /// span `cx` holds, the span context written is this attempt's.
    pub fn inject_with_baggage(&self, cx: &Context, metadata: &mut MetadataMap) {
        let propagator = &self.0.recorder.kit.propagator;
        let mut injector = MetadataInjector(metadata);
        if self.0.traced {
            let span_context = self.0.cx.span().span_context().clone();
            propagator.inject_context(&cx.with_remote_span_context(span_context), &mut injector);
        } else {
            propagator.inject_context(cx, &mut injector);
        }
    }

    /// What the [`Telemetry`](super::Telemetry)'s propagator reads from `metadata` (the
    /// caller's own, such as inbound metadata a proxy forwards as it came),
    /// or `None` when `metadata` holds none of the propagator's fields.
    pub fn extract_from(&self, metadata: &MetadataMap) -> Option<Context> {
        let propagator = &self.0.recorder.kit.propagator;
        if metadata.is_empty() || !propagator.fields().any(|f| metadata.contains_key(f)) {
            return None;
        }
        Some(propagator.extract(&MetadataExtractor(metadata)))
    }

    /// [`inject_with_baggage`](Self::inject_with_baggage), after removing
    /// every field the propagator writes from `metadata`: so a field the
    /// caller put there (a `baggage` header that still holds what `cx`'s
    /// baggage was stripped of) never goes out where the propagator writes
    /// nothing, as it writes no `baggage` for an empty baggage.
    pub fn replace_with_baggage(&self, cx: &Context, metadata: &mut MetadataMap) {
        if !metadata.is_empty() {
            for field in self.0.recorder.kit.propagator.fields() {
                metadata.remove(field);
            }
        }
        self.inject_with_baggage(cx, metadata);
    }

    /// Ends the attempt with its status, `None` for OK (as
    /// [`ClassifyFn`](crate::grpc::client::ClassifyFn) gets it): sets
    /// `rpc.response.status_code` to the code's name, and for every code but
    /// OK `error.type` to the same name (or, for a failure that failure
    /// injection caused, [`fault::ERROR_TYPE`](crate::fault::ERROR_TYPE)) and
    /// the span's status to Error with the status's message; ends the span; records
    /// `rpc.client.call.duration` in seconds with `rpc.system.name`,
    /// `rpc.method`, `rpc.response.status_code`, `server.address`,
    /// `server.port` and, on failure, `error.type`.
    pub fn end(mut self, status: Option<&tonic::Status>) {
        match status {
            None => self.finish(Code::Ok, "", "OK"),
            Some(status) => self.finish(
                status.code(),
                status.message(),
                error_type(status.code(), Some(status)),
            ),
        }
    }

    fn finish(&mut self, code: Code, message: &str, error_type: &'static str) {
        self.0.ended = true;
        if self.0.traced {
            end_span(&self.0.cx, code, message, error_type);
        }
        let (Some(instruments), Some(started)) = (&self.0.recorder.kit.instruments, self.0.started)
        else {
            return;
        };
        let seconds = started.elapsed().as_secs_f64();
        let endpoint = &self.0.recorder.endpoint;
        let name = code_name(code);
        let empty = || KeyValue::new("", "");
        let mut attributes = [
            KeyValue::new(RPC_SYSTEM_NAME, RPC_SYSTEM_GRPC),
            KeyValue::new(RPC_METHOD, self.0.method),
            KeyValue::new(RPC_RESPONSE_STATUS_CODE, name),
            endpoint.address_kv.clone(),
            empty(),
            empty(),
        ];
        let mut len = 4;
        if let Some(port) = &endpoint.port_kv {
            attributes[len] = port.clone();
            len += 1;
        }
        if code != Code::Ok {
            attributes[len] = KeyValue::new(ERROR_TYPE, error_type);
            len += 1;
        }
        instruments
            .call_duration
            .record(seconds, &attributes[..len]);
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if !self.0.ended {
            self.finish(Code::Cancelled, DROPPED_MESSAGE, code_name(Code::Cancelled));
        }
    }
}
