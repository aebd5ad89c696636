//! Per-attempt layers and interceptors (docs/client.md, "Per-attempt
//! layers"): tower layers and tonic interceptors wrap each attempt, inside
//! the retries and the breaker. Calls through a real `Client` to carts on
//! the testing Host over TLS, on paused time.

mod client_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use client_support::*;
use futures_util::StreamExt as _;
use futures_util::future::BoxFuture;
use humus::circuit::{Counts, Policy, State};
use humus::grpc::client::{AttemptService, BoxError, Client, LayerError, Settings};
use humus::testing::{Ca, Host, Telemetry};
use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider};
use tonic::body::Body;
use tonic::metadata::MetadataMap;
use tonic::{Code, Response, Status};
use tower_service::Service;

/// What a layer does with the `n`th request it sees (1, 2, …): passes it
/// on (`None`), or fails it with an error.
type Decide = Arc<dyn Fn(usize, &http::Request<Body>) -> Option<BoxError> + Send + Sync>;

/// A tower layer that counts the requests it sees, keeps their headers,
/// and fails those `decide` says.
#[derive(Clone)]
struct Probe {
    seen: Arc<Mutex<Vec<http::HeaderMap>>>,
    decide: Decide,
}

impl Probe {
    fn new(
        decide: impl Fn(usize, &http::Request<Body>) -> Option<BoxError> + Send + Sync + 'static,
    ) -> Probe {
        Probe {
            seen: Arc::default(),
            decide: Arc::new(decide),
        }
    }

    fn passing() -> Probe {
        Probe::new(|_, _| None)
    }

    fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    fn headers(&self) -> Vec<http::HeaderMap> {
        self.seen.lock().unwrap().clone()
    }
}

impl tower_layer::Layer<AttemptService> for Probe {
    type Service = ProbeService;

    fn layer(&self, inner: AttemptService) -> ProbeService {
        ProbeService {
            probe: self.clone(),
            inner,
        }
    }
}

#[derive(Clone)]
struct ProbeService {
    probe: Probe,
    inner: AttemptService,
}

impl Service<http::Request<Body>> for ProbeService {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<http::Response<Body>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let n = {
            let mut seen = self.probe.seen.lock().unwrap();
            seen.push(request.headers().clone());
            seen.len()
        };
        if let Some(err) = (self.probe.decide)(n, &request) {
            return Box::pin(async move { Err(err) });
        }
        Box::pin(self.inner.call(request))
    }
}

fn with_layers(ca: &Ca, policy: Policy, settings: impl FnOnce(Settings) -> Settings) -> Settings {
    settings(Settings {
        breaker_policy: policy,
        ..carts_settings(ca)
    })
}

/// The `authorization` each request that reached carts carried.
fn tokens(seen: &Arc<Mutex<Vec<MetadataMap>>>) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|m| m.get("authorization").unwrap().to_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn an_interceptor_stamps_a_fresh_token_on_each_attempt() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let arrived = Arc::new(Mutex::new(Vec::new()));
    let log = arrived.clone();
    carts.on_get_cart(move |seen, req| {
        log.lock().unwrap().push(seen.metadata);
        async move {
            if seen.n < 3 {
                return Err(unavailable());
            }
            Ok(Response::new(cart(&req.id, 0)))
        }
    });
    let _carts = start_carts(&host, &ca, &carts);
    let minted = Arc::new(AtomicUsize::new(0));
    let mint = minted.clone();
    let settings = with_layers(&ca, recording().0, |s| {
        s.interceptor(move |mut request: tonic::Request<()>| {
            let n = mint.fetch_add(1, Ordering::Relaxed) + 1;
            let token = format!("Bearer token-{n}").parse().unwrap();
            request.metadata_mut().insert("authorization", token);
            Ok(request)
        })
    });
    let client = Client::new(&setup(&host), settings).unwrap();
    let cart: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
    assert_eq!(cart.get_ref().id, "c-1");
    assert_eq!(carts.arrivals(&GET_CART), 3);
    assert_eq!(
        tokens(&arrived),
        ["Bearer token-1", "Bearer token-2", "Bearer token-3"],
        "one fresh token per attempt"
    );
    assert_eq!(minted.load(Ordering::Relaxed), 3);
}

/// tonic's own `InterceptorLayer` given to `Settings::layer` is the same
/// as `Settings::interceptor`.
#[tokio::test(start_paused = true)]
async fn tonics_interceptor_layer_fits_settings_layer() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let arrived = Arc::new(Mutex::new(Vec::new()));
    let log = arrived.clone();
    carts.on_get_cart(move |seen, req| {
        log.lock().unwrap().push(seen.metadata);
        async move { Ok(Response::new(cart(&req.id, 0))) }
    });
    let _carts = start_carts(&host, &ca, &carts);
    let settings = with_layers(&ca, recording().0, |s| {
        s.layer(tonic::service::InterceptorLayer::new(
            |mut request: tonic::Request<()>| {
                request
                    .metadata_mut()
                    .insert("authorization", "Bearer layered".parse().unwrap());
                Ok(request)
            },
        ))
    });
    let client = Client::new(&setup(&host), settings).unwrap();
    client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap();
    assert_eq!(tokens(&arrived), ["Bearer layered"]);
}

#[tokio::test(start_paused = true)]
async fn an_interceptors_unavailable_is_retried_and_its_permission_denied_is_not() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let calls = Arc::new(AtomicUsize::new(0));
    let count = calls.clone();
    let (policy, seen) = recording();
    let settings = with_layers(&ca, policy, |s| {
        s.interceptor(move |request: tonic::Request<()>| {
            match count.fetch_add(1, Ordering::Relaxed) + 1 {
                1 | 2 => Err(Status::unavailable("no token yet")),
                3 => Ok(request),
                _ => Err(Status::permission_denied("token revoked")),
            }
        })
    });
    let client = Client::new(&setup(&host), settings).unwrap();
    client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 3, "once per attempt");
    assert_eq!(carts.arrivals(&GET_CART), 1, "two attempts never left");
    assert_eq!(counted(&seen), (1, 2), "Unavailable is a failure");

    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    assert_eq!(err.message(), "token revoked");
    let layer = LayerError::from_status(&err).expect("the layer's");
    assert!(layer.error().is_none(), "a trailers-only answer");
    assert_eq!(calls.load(Ordering::Relaxed), 4, "not retried");
    assert_eq!(
        counted(&seen),
        (2, 2),
        "PermissionDenied: the default's success"
    );
}

#[tokio::test(start_paused = true)]
async fn a_layers_unavailable_error_is_retried() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    // A status wrapped in an error of the layer's own.
    #[derive(Debug, thiserror::Error)]
    #[error("refreshing")]
    struct Refreshing(#[source] Status);
    let probe = Probe::new(|n, _| {
        (n < 3).then(|| BoxError::from(Refreshing(Status::unavailable("token refresh"))))
    });
    let (policy, seen) = recording();
    let client = Client::new(
        &setup(&host),
        with_layers(&ca, policy, |s| s.layer(probe.clone())),
    )
    .unwrap();
    client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap();
    assert_eq!(probe.count(), 3);
    assert_eq!(carts.arrivals(&GET_CART), 1);
    assert_eq!(counted(&seen), (1, 2));

    // Every attempt fails so: the last one's status, the layer's, behind
    // the NoRetry that says why no attempt followed.
    let always = Probe::new(|_, _| Some(BoxError::from(Status::unavailable("token refresh"))));
    let client = Client::new(
        &setup(&host),
        with_layers(&ca, recording().0, |s| s.layer(always.clone())),
    )
    .unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(err.message(), "token refresh");
    assert!(LayerError::from_status(&err).is_some(), "{err:?}");
    assert_eq!(always.count(), 3, "max_attempts");
}

#[tokio::test(start_paused = true)]
async fn a_layers_plain_io_error_is_unknown_and_not_retried() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    // An I/O error, which from the connection would be Unavailable.
    let probe = Probe::new(|_, _| {
        Some(BoxError::from(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )))
    });
    let (policy, seen) = recording();
    let client = Client::new(
        &setup(&host),
        with_layers(&ca, policy, |s| s.layer(probe.clone())),
    )
    .unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unknown, "{err:?}");
    let layer = LayerError::from_status(&err).expect("the layer's");
    let io = layer.error().unwrap().downcast_ref::<std::io::Error>();
    assert_eq!(io.unwrap().kind(), std::io::ErrorKind::ConnectionReset);
    assert_eq!(probe.count(), 1, "Unknown is not retried");
    assert_eq!(carts.arrivals(&GET_CART), 0);
    assert_eq!(
        counted(&seen),
        (1, 0),
        "the default counts Unknown a success"
    );
}

#[tokio::test(start_paused = true)]
async fn a_layer_sees_a_streams_open_once_per_open_attempt() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    // The first two opens never leave: the layer fails them Unavailable, a
    // failed open (retried), not a stream that opened and ended.
    let probe = Probe::new(|n, _| (n <= 2).then(|| BoxError::from(Status::unavailable("not yet"))));
    let client = Client::new(
        &setup(&host),
        with_layers(&ca, recording().0, |s| s.layer(probe.clone())),
    )
    .unwrap();
    let opened = client
        .server_streaming::<_, Cart>(&WATCH_CART, get("c-1"))
        .await
        .unwrap();
    assert_eq!(probe.count(), 3, "three opens");
    assert_eq!(carts.arrivals(&WATCH_CART), 1);
    let items: Vec<_> = opened.into_inner().collect().await;
    assert_eq!(items.len(), 3);
    assert!(items.iter().all(Result::is_ok));
    assert_eq!(probe.count(), 3, "nothing more for the stream's messages");

    // The server's own trailers-only answer has not opened the stream
    // either: each open the retries make passes the layer once.
    carts.on_watch_cart(|_, _| async {
        Err::<Response<futures_util::stream::Empty<Result<Cart, Status>>>, _>(unavailable())
    });
    let err = client
        .server_streaming::<_, Cart>(&WATCH_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert!(LayerError::from_status(&err).is_none(), "the server's");
    assert_eq!(probe.count(), 6, "three opens");
    assert_eq!(carts.arrivals(&WATCH_CART), 4);
}

#[tokio::test(start_paused = true)]
async fn a_layer_sees_the_attempts_grpc_timeout_and_traceparent_and_may_change_them() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let arrived = Arc::new(Mutex::new(Vec::new()));
    let log = arrived.clone();
    carts.on_get_cart(move |seen, req| {
        log.lock().unwrap().push(seen.metadata);
        async move {
            if seen.n < 2 {
                return Err(unavailable());
            }
            Ok(Response::new(cart(&req.id, 0)))
        }
    });
    let _carts = start_carts(&host, &ca, &carts);
    let capture = Telemetry::new();
    let probe = Probe::passing();
    // A layer under the probe that drops the caller's header.
    let strip = tower::layer::layer_fn(|inner: AttemptService| {
        tower::util::MapRequest::new(inner, |mut request: http::Request<Body>| {
            request.headers_mut().remove("x-secret");
            request
        })
    });
    let client = Client::new(
        &setup(&host).with_telemetry(capture.telemetry()),
        with_layers(&ca, recording().0, |s| s.layer(probe.clone()).layer(strip)),
    )
    .unwrap();
    let span = capture.tracer_provider().tracer("caller").start("caller");
    let cx = opentelemetry::Context::new().with_span(span);
    let mut request = get("c-1");
    request.extensions_mut().insert(cx);
    request
        .metadata_mut()
        .insert("x-secret", "s".parse().unwrap());
    client.unary::<_, Cart>(&GET_CART, request).await.unwrap();
    let headers = probe.headers();
    assert_eq!(headers.len(), 2);
    // The default timeout, 10 s, less the backoff before the second.
    assert_eq!(headers[0].get("grpc-timeout").unwrap(), "10S");
    assert!(headers[1].get("grpc-timeout").is_some());
    let parents: Vec<_> = headers
        .iter()
        .map(|h| h.get("traceparent").unwrap().to_str().unwrap().to_owned())
        .collect();
    assert_ne!(parents[0], parents[1], "each attempt's own span");
    assert!(headers.iter().all(|h| h.get("x-secret").is_some()));
    let arrived = arrived.lock().unwrap();
    assert!(
        arrived.iter().all(|m| m.get("x-secret").is_none()),
        "changed by a layer"
    );
    let sent: Vec<_> = arrived
        .iter()
        .map(|m| m.get("traceparent").unwrap().to_str().unwrap().to_owned())
        .collect();
    assert_eq!(sent, parents, "what the layers saw is what was sent");
}

/// The breaker is outside the layers: an attempt it rejects never reaches
/// them.
#[tokio::test(start_paused = true)]
async fn a_layer_runs_after_the_breaker_admits_the_attempt() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| async { Err::<Response<Cart>, _>(unavailable()) });
    let _carts = start_carts(&host, &ca, &carts);
    let probe = Probe::passing();
    // Opens after the first failure, and stays open.
    let opens = Policy::new(|c: &Counts| c.failures >= 1, |_: &Counts| State::Open);
    let client = Client::new(
        &setup(&host),
        with_layers(&ca, opens, |s| Settings {
            max_attempts: 1,
            ..s.layer(probe.clone())
        }),
    )
    .unwrap();
    let first = client.unary::<_, Cart>(&GET_CART, get("c-1")).await;
    assert_eq!(first.unwrap_err().code(), Code::Unavailable);
    let rejected = client
        .unary::<_, Cart>(&GET_CART, get("c-1"))
        .await
        .unwrap_err();
    assert!(rejected.source_ref().is_some(), "{rejected:?}");
    assert_eq!(
        probe.count(),
        1,
        "a rejected attempt never reaches the layers"
    );
}

trait SourceRef {
    fn source_ref(&self) -> Option<&humus::circuit::Rejected>;
}

impl SourceRef for Status {
    fn source_ref(&self) -> Option<&humus::circuit::Rejected> {
        std::error::Error::source(self)?.downcast_ref()
    }
}

/// A transparent resend (the server refused the first stream, so it never
/// saw the request) is a request of its own: the interceptor runs again,
/// and the refusal it passed on is still the connection's (sent again at
/// once, within the one attempt).
#[tokio::test(start_paused = true)]
async fn a_transparent_resend_goes_through_the_layers_again() {
    let host = Host::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let _server = h2_server(&host, "carts:9090", move |n, headers, mut respond| {
        let token = headers.get("authorization").unwrap().to_str().unwrap();
        log.lock().unwrap().push(token.to_owned());
        if n == 1 {
            respond.send_reset(h2::Reason::REFUSED_STREAM);
        } else {
            answer_grpc(respond, &cart("c", 0));
        }
    });
    let minted = Arc::new(AtomicUsize::new(0));
    let mint = minted.clone();
    let (policy, counts) = recording();
    let settings = Settings {
        addr: "carts:9090".into(),
        breaker_policy: policy,
        ..Settings::default()
    }
    .interceptor(move |mut request: tonic::Request<()>| {
        let n = mint.fetch_add(1, Ordering::Relaxed) + 1;
        let token = format!("token-{n}").parse().unwrap();
        request.metadata_mut().insert("authorization", token);
        Ok(request)
    });
    let client = Client::new(&setup(&host), settings).unwrap();
    client.unary::<_, Cart>(&GET_CART, get("c")).await.unwrap();
    assert_eq!(*seen.lock().unwrap(), ["token-1", "token-2"]);
    assert_eq!(counted(&counts), (1, 0), "one attempt, for the breaker");
}

/// An interceptor's `Err(Unavailable)` on a stream's open is a failed
/// open, retried; not a stream that opened and ended.
#[tokio::test(start_paused = true)]
async fn an_interceptors_unavailable_on_a_streams_open_is_retried() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let calls = Arc::new(AtomicUsize::new(0));
    let count = calls.clone();
    let settings = with_layers(&ca, recording().0, |s| {
        s.interceptor(move |request: tonic::Request<()>| {
            if count.fetch_add(1, Ordering::Relaxed) == 0 {
                return Err(Status::unavailable("no token yet"));
            }
            Ok(request)
        })
    });
    let client = Client::new(&setup(&host), settings).unwrap();
    let opened = client
        .server_streaming::<_, Cart>(&WATCH_CART, get("c-1"))
        .await
        .unwrap();
    let items: Vec<_> = opened.into_inner().collect().await;
    assert_eq!(items.len(), 3);
    assert_eq!(calls.load(Ordering::Relaxed), 2);
    assert_eq!(carts.arrivals(&WATCH_CART), 1);
}

/// A proxy's page the connection mapped comes through the layers as it
/// does without them: the attempt's error, a status whose source is the
/// `HttpAnswer` (its HTTP status), never taken for a status a layer made;
/// a 429 with no `Retry-After` is sent once, and counted against the
/// dependency.
#[tokio::test(start_paused = true)]
async fn a_proxys_page_through_the_layers_keeps_its_http_answer() {
    use humus::grpc::client::{HttpAnswer, mapped_http_status};
    use std::error::Error as _;

    let host = Host::new();
    let _proxy = h2_server(&host, "carts:9090", |_, _, respond| {
        answer_http(respond, 429, Some("text/html"), "<h1>slow down</h1>");
    });
    let probe = Probe::passing();
    let (policy, counts) = recording();
    let settings = Settings {
        addr: "carts:9090".into(),
        breaker_policy: policy,
        ..Settings::default()
    }
    .layer(probe.clone());
    let client = Client::new(&setup(&host), settings).unwrap();
    let err = client
        .unary::<_, Cart>(&GET_CART, get("c"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert_eq!(
        mapped_http_status(&err),
        Some(http::StatusCode::TOO_MANY_REQUESTS),
        "{err:?}"
    );
    assert!(
        err.source().is_some_and(|s| s.is::<HttpAnswer>()),
        "{err:?}"
    );
    assert_eq!(probe.count(), 1, "not retried without a Retry-After");
    assert_eq!(counted(&counts), (0, 1), "one failure, for the breaker");
}
