//! What the HTTP client's and server layer's tests share: an in-process
//! axum upstream on 127.0.0.1 that records what it is sent and answers
//! from a script, and helpers over captured telemetry.

#![allow(dead_code, unreachable_pub)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use humus::fault::{self, Fault, Injector, Rule, Scenario, jsonscenario};
use humus::http::client::{Client, Settings};
use humus::telemetry::HeaderExtractor;
use humus::testing::Telemetry;
use opentelemetry::baggage::BaggageExt;
use opentelemetry::trace::SpanKind;
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SpanData;

pub const KEY: &str = "acme.fault";

/// One request the upstream received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Seen {
    /// The baggage member `key` as a W3C server reads it.
    pub fn member(&self, key: &str) -> Option<String> {
        let cx = Telemetry::new()
            .telemetry()
            .propagator()
            .extract(&HeaderExtractor(&self.headers));
        cx.baggage().get(key).map(|v| v.as_str().to_owned())
    }
}

/// One scripted answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub retry_after: Option<String>,
    /// Its `location` header.
    pub location: Option<String>,
    /// How long the upstream waits before it answers.
    pub delay: Duration,
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            retry_after: None,
            location: None,
            delay: Duration::ZERO,
        }
    }

    /// A redirect, `status` (302, 307, ...) to `location`.
    pub fn redirect(status: u16, location: &str) -> Reply {
        Reply {
            location: Some(location.to_owned()),
            ..Reply::status(status)
        }
    }

    pub fn slow(status: u16, delay: Duration) -> Reply {
        Reply {
            status,
            retry_after: None,
            location: None,
            delay,
        }
    }

    pub fn retry_after(status: u16, value: &str) -> Reply {
        Reply {
            status,
            retry_after: Some(value.to_owned()),
            location: None,
            delay: Duration::ZERO,
        }
    }
}

/// An axum server on 127.0.0.1 that answers each request with the next
/// scripted reply (200 `ok` once the script is empty).
#[derive(Clone)]
pub struct Upstream {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Arc<Mutex<VecDeque<Reply>>>,
}

impl Upstream {
    pub async fn start() -> Upstream {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let upstream = Upstream {
            addr,
            seen: Arc::default(),
            script: Arc::default(),
        };
        let state = upstream.clone();
        let app = axum::Router::new().fallback(move |request: Request| {
            let state = state.clone();
            async move { state.answer(request).await }
        });
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        upstream
    }

    async fn answer(&self, request: Request) -> Response {
        let (parts, body) = request.into_parts();
        let body = axum::body::to_bytes(body, usize::MAX)
            .await
            .unwrap_or_default();
        self.seen.lock().unwrap().push(Seen {
            method: parts.method.to_string(),
            path: parts
                .uri
                .path_and_query()
                .map(|p| p.as_str().to_owned())
                .unwrap_or_default(),
            headers: parts.headers,
            body,
        });
        let reply = self.script.lock().unwrap().pop_front();
        match reply {
            None => "ok".into_response(),
            Some(reply) => {
                tokio::time::sleep(reply.delay).await;
                let mut response = (
                    StatusCode::from_u16(reply.status).unwrap(),
                    format!("status {}", reply.status),
                )
                    .into_response();
                if let Some(v) = reply.retry_after {
                    response
                        .headers_mut()
                        .insert("retry-after", HeaderValue::from_str(&v).unwrap());
                }
                if let Some(v) = reply.location {
                    response
                        .headers_mut()
                        .insert("location", HeaderValue::from_str(&v).unwrap());
                }
                response
            }
        }
    }

    /// Answers the next requests with `replies`, in order.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.script.lock().unwrap().extend(replies);
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn point(&self) -> String {
        format!("http:127.0.0.1:{}", self.addr.port())
    }
}

pub fn codec() -> jsonscenario::Codec {
    jsonscenario::Codec::new(KEY).unwrap()
}

pub fn injector() -> Injector {
    Injector::new(fault::Settings::new(codec())).unwrap()
}

pub fn abort_at(point: &str) -> Scenario {
    Scenario::new([Rule::new(
        point,
        Fault {
            delay: Duration::ZERO,
            abort: true,
        },
    )])
}

pub fn delay_at(point: &str, delay: Duration) -> Scenario {
    Scenario::new([Rule::new(
        point,
        Fault {
            delay,
            abort: false,
        },
    )])
}

/// A context whose baggage has `tenant=acme` and, if given, `scenario`.
pub fn context(scenario: Option<&Scenario>) -> Context {
    let cx = Context::new().with_baggage([KeyValue::new("tenant", "acme")]);
    match scenario {
        Some(s) => fault::with_scenario(&cx, &codec(), s).unwrap(),
        None => cx,
    }
}

/// A setup recording into `telemetry`, with failure injection on or off.
pub fn setup(telemetry: &Telemetry, faults: bool) -> humus::Setup {
    let setup = humus::Setup::new().with_telemetry(telemetry.telemetry());
    if faults {
        setup.with_faults(injector())
    } else {
        setup
    }
}

/// The client of `upstream` with `settings` (its base URL set), whose
/// backoff never waits.
pub fn client(setup: &humus::Setup, upstream: &Upstream, settings: Settings) -> Client {
    Client::new(
        setup,
        Settings {
            base_url: upstream.url(),
            ..settings
        },
    )
    .unwrap()
    .with_backoff_source(|_| 0)
}

/// The `humus.circuit.calls` the breaker counted with `outcome`
/// (`success`, `failure`, `ignored`, `rejected`).
pub fn calls(telemetry: &Telemetry, outcome: &str) -> f64 {
    use humus::telemetry::names::{CLIENT_SCOPE, HUMUS_CIRCUIT_CALLS, HUMUS_CIRCUIT_OUTCOME};
    telemetry
        .metrics(CLIENT_SCOPE)
        .into_iter()
        .filter(|p| p.name == HUMUS_CIRCUIT_CALLS && p.has(&[(HUMUS_CIRCUIT_OUTCOME, outcome)]))
        .map(|p| p.value.as_f64())
        .sum()
}

pub fn spans_of_kind(telemetry: &Telemetry, kind: SpanKind) -> Vec<SpanData> {
    telemetry
        .spans()
        .into_iter()
        .filter(|s| s.span_kind == kind)
        .collect()
}

pub fn events<'a>(span: &'a SpanData, name: &str) -> Vec<&'a opentelemetry::trace::Event> {
    span.events.iter().filter(|e| e.name == name).collect()
}

pub fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.as_str().into_owned())
}

/// A bare reqwest client, as an edge or a benchmark's peer uses it: reqwest
/// is built here without a TLS provider of its own (the workspace uses
/// rustls with `ring`), so it is given one.
pub fn bare_reqwest() -> reqwest::Client {
    let tls = rustls::ClientConfig::builder_with_provider(humus::app::crypto_provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    reqwest::Client::builder()
        .no_proxy()
        .tls_backend_preconfigured(tls)
        .build()
        .unwrap()
}
