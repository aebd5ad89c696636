//! Failure injection at the client's point, end to end (issue 7;
//! docs/failure-injection.md): an edge calls a front (orders) over
//! the testing Host, whose handler calls the backend (carts) through a
//! humus `Client` with failure injection on; a scenario rides in the
//! call's baggage (`jsonscenario`). Everything over TLS, on paused time.

mod client_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use client_support::*;
use humus::circuit::{self, Outcome, Rejected, State};
use humus::fault::{self, Fault, InjectedError, Injector, Rule, Scenario, jsonscenario};
use humus::grpc::client::{Classification, Classify, Client, Settings, default_classify};
use humus::grpc::server::StripScenarioLayer;
use humus::telemetry::MetadataExtractor;
use humus::telemetry::names::*;
use humus::testing::{Ca, Host, MetricPoint, Telemetry};
use opentelemetry::baggage::BaggageExt;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::{Context, KeyValue, Value};
use opentelemetry_sdk::trace::SpanData;
use tokio::time::Instant;
use tonic::body::Body;
use tonic::metadata::MetadataMap;
use tonic::{Code, Request, Response, Status};
use tonic_prost::ProstCodec;
use tower_layer::Layer as _;

const KEY: &str = "acme.fault";
const CARTS_SPAN: &str = "test.carts.v1.Carts/GetCart";

fn codec() -> jsonscenario::Codec {
    jsonscenario::Codec::new(KEY).unwrap()
}

fn injector() -> Injector {
    Injector::new(fault::Settings::new(codec())).unwrap()
}

fn abort_at(point: &str) -> Scenario {
    Scenario::new([Rule::new(
        point,
        Fault {
            delay: Duration::ZERO,
            abort: true,
        },
    )])
}

fn delay_at(point: &str, delay: Duration) -> Scenario {
    Scenario::new([Rule::new(
        point,
        Fault {
            delay,
            abort: false,
        },
    )])
}

/// A context whose baggage has `tenant=acme` and, if given, `scenario`.
fn context(scenario: Option<&Scenario>) -> Context {
    let cx = Context::new().with_baggage([KeyValue::new("tenant", "acme")]);
    match scenario {
        Some(s) => fault::with_scenario(&cx, &codec(), s).unwrap(),
        None => cx,
    }
}

/// The baggage members `scenario` and `tenant` in `metadata`, as a server
/// with W3C propagators reads them.
fn members(metadata: &MetadataMap) -> (Option<String>, Option<String>) {
    let cx = Telemetry::new()
        .telemetry()
        .propagator()
        .extract(&MetadataExtractor(metadata));
    let get = |k: &str| cx.baggage().get(k).map(|v| v.as_str().to_owned());
    (get(KEY), get("tenant"))
}

// ---- the front: orders, whose handler calls carts ---------------------

/// What one call to carts returned: its code, and the injected error
/// behind it, if any.
type CallResult = (Code, Option<InjectedError>);

/// What the front's handler saw and got.
#[derive(Clone, Default)]
struct FrontLog {
    /// The metadata of each request that reached the handler.
    seen: Arc<Mutex<Vec<MetadataMap>>>,
    /// What each call to carts returned: its code, and the injected error
    /// behind it, if any.
    results: Arc<Mutex<Vec<CallResult>>>,
}

/// PlaceOrder: extracts the call's context from the metadata with the
/// front's propagator, and calls carts in it.
#[derive(Clone)]
struct Front {
    carts: Client,
    propagator: Arc<dyn TextMapPropagator + Send + Sync>,
    log: FrontLog,
}

impl tower_service::Service<http::Request<Body>> for Front {
    type Response = http::Response<Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, std::convert::Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let svc = tower::service_fn(move |r: Request<OrderRequest>| {
                let this = this.clone();
                async move {
                    this.log.seen.lock().unwrap().push(r.metadata().clone());
                    let cx = this.propagator.extract(&MetadataExtractor(r.metadata()));
                    let mut out = Request::new(CartRequest {
                        id: r.get_ref().cart_id.clone(),
                    });
                    out.extensions_mut().insert(cx);
                    let result = this.carts.unary::<_, Cart>(&GET_CART, out).await;
                    this.log.results.lock().unwrap().push(match &result {
                        Ok(_) => (Code::Ok, None),
                        Err(s) => (s.code(), InjectedError::from_status(s).cloned()),
                    });
                    let cart = result?;
                    Ok::<_, Status>(Response::new(Order {
                        summary: format!("orders, via {}", cart.get_ref().served_by),
                    }))
                }
            });
            Ok(
                tonic::server::Grpc::new(ProstCodec::<Order, OrderRequest>::default())
                    .unary(svc, req)
                    .await,
            )
        })
    }
}

/// How the front is set up.
struct FrontSetup {
    faults: Injector,
    settings: Settings,
    trust_scenario: bool,
}

impl FrontSetup {
    fn new(ca: &Ca) -> FrontSetup {
        FrontSetup {
            faults: injector(),
            settings: carts_settings(ca),
            trust_scenario: true,
        }
    }
}

/// An edge, a front (orders) and a backend (carts) on one testing Host.
struct World {
    carts: Carts,
    front: FrontLog,
    /// What the front records.
    capture: Telemetry,
    edge: Client,
    _servers: Vec<Running>,
}

impl World {
    fn new(f: impl FnOnce(&mut FrontSetup)) -> World {
        let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
        let mut front = FrontSetup::new(&ca);
        f(&mut front);
        let setup = setup(&host)
            .with_telemetry(capture.telemetry())
            .with_faults(front.faults.clone());
        let log = FrontLog::default();
        let svc = Front {
            carts: Client::new(&setup, front.settings).unwrap(),
            propagator: capture.telemetry().shared_propagator(),
            log: log.clone(),
        };
        let mut layer =
            StripScenarioLayer::new(front.faults, capture.telemetry().shared_propagator());
        if front.trust_scenario {
            layer = layer.trust_scenario(|_| true);
        }
        let servers = vec![
            start_carts(&host, &ca, &carts),
            serve_tls(
                &host,
                &ca,
                "orders:9090",
                "orders",
                tonic::transport::Server::builder(),
                // The layer's body, as tonic's (a router's) is.
                tower::ServiceExt::map_response(layer.layer(svc), |r: http::Response<_>| {
                    r.map(Body::new)
                }),
            ),
        ];
        // The edge: W3C propagation, no failure injection of its own (it
        // sends the baggage as it is), one attempt per call and a breaker
        // that never opens, so each call reaches the front once.
        let edge_telemetry = Telemetry::new();
        let edge = Client::new(
            &humus::Setup::new()
                .with_host(host.clone())
                .with_telemetry(edge_telemetry.telemetry()),
            Settings {
                addr: "orders:9090".into(),
                tls: Some(Arc::new(ca.client_config())),
                max_attempts: 1,
                breaker_policy: circuit::Policy::new(|_| false, |_| State::Closed),
                ..Settings::default()
            },
        )
        .unwrap();
        World {
            carts,
            front: log,
            capture,
            edge,
            _servers: servers,
        }
    }

    /// Places an order from the edge, in `cx`.
    async fn place(&self, cx: &Context) -> Result<Response<Order>, Status> {
        let mut request = Request::new(OrderRequest {
            cart_id: "c-1".into(),
        });
        request.extensions_mut().insert(cx.clone());
        self.edge.unary(&PLACE_ORDER, request).await
    }

    /// The front's spans of its calls to carts.
    fn carts_spans(&self) -> Vec<SpanData> {
        self.capture
            .spans()
            .into_iter()
            .filter(|s| s.name == CARTS_SPAN)
            .collect()
    }

    fn results(&self) -> Vec<CallResult> {
        self.front.results.lock().unwrap().clone()
    }

    fn metric(&self, name: &str, attributes: &[(&str, &str)]) -> f64 {
        sum(&self.capture.metrics(CLIENT_SCOPE), name, attributes)
    }
}

fn sum(points: &[MetricPoint], name: &str, attributes: &[(&str, &str)]) -> f64 {
    points
        .iter()
        .filter(|p| p.name == name && p.has(attributes))
        .map(|p| p.value.as_f64())
        .sum()
}

fn attribute(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

fn events<'a>(span: &'a SpanData, name: &str) -> Vec<&'a opentelemetry::trace::Event> {
    span.events.iter().filter(|e| e.name == name).collect()
}

fn event_attribute(event: &opentelemetry::trace::Event, key: &str) -> Option<Value> {
    event
        .attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

// ---- the design's list -------------------------------------------------

#[tokio::test(start_paused = true)]
async fn ten_aborted_calls_are_retried_and_open_the_breaker_then_a_call_with_no_scenario_is_rejected()
 {
    let world = World::new(|_| {});
    let cx = context(Some(&abort_at(GET_CART.point)));
    for _ in 0..10 {
        let err = world.place(&cx).await.unwrap_err();
        assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    }
    assert_eq!(world.carts.arrivals(&GET_CART), 0, "every attempt aborted");

    // The first call's 3 attempts and the second call's 2 (the retry
    // budget's tokens run out) are aborted: 5 failures in a row open the
    // breaker (the default policy), which rejects every later call.
    let results = world.results();
    assert_eq!(results.len(), 10);
    for (code, injected) in &results[..2] {
        assert_eq!(*code, Code::Unavailable);
        let injected = injected.as_ref().unwrap();
        assert!(injected.is_abort());
        assert_eq!(injected.point(), GET_CART.point);
    }
    assert!(
        results[2..]
            .iter()
            .all(|(code, e)| *code == Code::Unavailable && e.is_none())
    );

    let spans = world.carts_spans();
    let (attempts, rejected): (Vec<_>, Vec<_>) = spans
        .iter()
        .partition(|s| s.instrumentation_scope.name() == RPC_SCOPE);
    assert_eq!((attempts.len(), rejected.len()), (5, 8));
    for span in &attempts {
        assert_eq!(
            attribute(span, ERROR_TYPE),
            Some(Value::from(fault::ERROR_TYPE))
        );
        assert_eq!(
            attribute(span, RPC_RESPONSE_STATUS_CODE),
            Some(Value::from("UNAVAILABLE"))
        );
        let evaluations = events(span, fault::names::EVALUATION);
        assert_eq!(evaluations.len(), 1, "evaluated once per attempt");
        assert_eq!(
            event_attribute(evaluations[0], fault::names::ABORT),
            Some(Value::Bool(true))
        );
    }
    for span in &rejected {
        assert!(
            span.events.is_empty(),
            "a rejected attempt evaluates nothing"
        );
        assert_eq!(
            attribute(span, ERROR_TYPE),
            Some(Value::from("UNAVAILABLE"))
        );
    }
    assert_eq!(
        world.metric(HUMUS_CIRCUIT_TRANSITIONS, &[(HUMUS_CIRCUIT_STATE, "open")]),
        1.0
    );
    assert_eq!(
        world.metric(HUMUS_CIRCUIT_CALLS, &[(HUMUS_CIRCUIT_OUTCOME, "failure")]),
        5.0
    );
    assert_eq!(
        world.metric(HUMUS_RETRY_DECISIONS, &[(HUMUS_RETRY_DECISION, "retried")]),
        3.0
    );
    assert_eq!(
        world.metric(
            HUMUS_RETRY_DECISIONS,
            &[(HUMUS_RETRY_DECISION, "throttled")]
        ),
        1.0
    );
    assert_eq!(
        world.metric(HUMUS_RETRY_DECISIONS, &[(HUMUS_RETRY_DECISION, "stopped")]),
        8.0,
        "a rejected attempt is stopped"
    );
    let durations = sum(
        &world.capture.metrics(RPC_SCOPE),
        RPC_CLIENT_CALL_DURATION,
        &[(ERROR_TYPE, fault::ERROR_TYPE)],
    );
    assert_eq!(durations, 5.0, "every aborted attempt is measured");

    // The open breaker sheds a call that carries no scenario.
    let err = world.place(&context(None)).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert!(
        err.message().starts_with("carts:9090: circuit"),
        "{}",
        err.message()
    );
    assert_eq!(world.carts.arrivals(&GET_CART), 0);
    assert_eq!(
        world.metric(HUMUS_CIRCUIT_CALLS, &[(HUMUS_CIRCUIT_OUTCOME, "rejected")]),
        9.0
    );
}

#[tokio::test(start_paused = true)]
async fn a_classify_that_ignores_injected_errors_keeps_the_breaker_closed() {
    let world = World::new(|front| front.settings.classify = sparing_injected());
    let cx = context(Some(&abort_at(GET_CART.point)));
    for _ in 0..10 {
        let err = world.place(&cx).await.unwrap_err();
        assert_eq!(err.code(), Code::Unavailable);
    }
    assert!(
        world.results().iter().all(|(_, e)| e.is_some()),
        "never rejected"
    );
    assert_eq!(
        world.metric(HUMUS_CIRCUIT_TRANSITIONS, &[]),
        0.0,
        "the breaker never moved"
    );
    let ignored = world.metric(HUMUS_CIRCUIT_CALLS, &[(HUMUS_CIRCUIT_OUTCOME, "ignored")]);
    assert!(ignored >= 10.0, "{ignored}");
    assert_eq!(
        world.metric(HUMUS_CIRCUIT_CALLS, &[(HUMUS_CIRCUIT_OUTCOME, "failure")]),
        0.0
    );
    // Still retried as Unavailable is: more attempts than calls.
    assert!(world.carts_spans().len() > 10);

    // A call with no scenario goes through.
    world.place(&context(None)).await.unwrap();
    assert_eq!(world.carts.arrivals(&GET_CART), 1);
}

#[tokio::test(start_paused = true)]
async fn an_untrusted_scenario_is_stripped_at_the_server_while_other_members_arrive() {
    let world = World::new(|front| front.trust_scenario = false);
    let cx = context(Some(&abort_at(GET_CART.point)));
    world.place(&cx).await.unwrap();

    let seen = world.front.seen.lock().unwrap().clone();
    assert_eq!(members(&seen[0]), (None, Some("acme".into())));
    assert_eq!(world.results(), [(Code::Ok, None)]);
    assert_eq!(world.carts.arrivals(&GET_CART), 1);
    let spans = world.carts_spans();
    assert_eq!(spans.len(), 1);
    assert!(spans[0].events.is_empty(), "no scenario, nothing evaluated");

    // The same call, trusted: the scenario arrives and aborts.
    let trusted = World::new(|_| {});
    let err = trusted.place(&cx).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    let seen = trusted.front.seen.lock().unwrap().clone();
    assert!(members(&seen[0]).0.is_some());
}

#[tokio::test(start_paused = true)]
async fn the_client_strips_the_scenario_unless_forward_scenario() {
    // A scenario for another dependency: the front's calls to carts go on.
    let scenario = abort_at("grpc:test.payments.v1.Payments/*");
    let cx = context(Some(&scenario));
    let carts_seen = |world: &World| {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        world.carts.on_get_cart(move |s, req| {
            log.lock().unwrap().push(s.metadata.clone());
            async move { Ok(Response::new(cart(&req.id, 0))) }
        });
        seen
    };

    // Off (the default): every member but the scenario goes.
    let world = World::new(|_| {});
    let seen = carts_seen(&world);
    world.place(&cx).await.unwrap();
    let sent = seen.lock().unwrap()[0].clone();
    assert_eq!(members(&sent), (None, Some("acme".into())));
    let span = &world.carts_spans()[0];
    assert_eq!(events(span, fault::names::STRIP).len(), 1);
    let evaluation = events(span, fault::names::EVALUATION);
    assert_eq!(
        event_attribute(evaluation[0], fault::names::POINT),
        Some(Value::from(GET_CART.point)),
        "evaluated, matched no rule"
    );
    assert_eq!(event_attribute(evaluation[0], fault::names::RULE), None);

    // On: the scenario goes too, as it came.
    let world = World::new(|front| front.settings.forward_scenario = true);
    let seen = carts_seen(&world);
    world.place(&cx).await.unwrap();
    let sent = seen.lock().unwrap()[0].clone();
    let (forwarded, tenant) = members(&sent);
    assert_eq!(tenant.as_deref(), Some("acme"));
    let forwarded = codec().from_json(&forwarded.unwrap()).unwrap();
    assert_eq!(forwarded, scenario);
    assert!(events(&world.carts_spans()[0], fault::names::STRIP).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_delay_under_the_timeout_is_waited_and_one_over_it_ends_deadline_exceeded() {
    let world = World::new(|front| front.settings.timeout = SECOND * 5);

    // 2s, under the 5s timeout: waited before the call, which succeeds.
    let started = Instant::now();
    world
        .place(&context(Some(&delay_at(GET_CART.point, SECOND * 2))))
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(took >= SECOND * 2 && took < SECOND * 3, "{took:?}");
    assert_eq!(world.carts.arrivals(&GET_CART), 1);
    let span = &world.carts_spans()[0];
    let evaluation = events(span, fault::names::EVALUATION);
    assert_eq!(
        event_attribute(evaluation[0], fault::names::DELAY),
        Some(Value::F64(2.0))
    );
    let duration = sum(
        &world.capture.metrics(RPC_SCOPE),
        RPC_CLIENT_CALL_DURATION,
        &[(RPC_RESPONSE_STATUS_CODE, "OK")],
    );
    assert_eq!(duration, 1.0);
    let histogram = world
        .capture
        .metrics(RPC_SCOPE)
        .into_iter()
        .find(|p| p.name == RPC_CLIENT_CALL_DURATION)
        .unwrap();
    match histogram.value {
        humus::testing::PointValue::Histogram(h) => assert!(h.sum >= 2.0, "{h:?}"),
        other => panic!("{other:?}"),
    }

    // 8s, over the 5s timeout: cut short at the deadline, as a real
    // DeadlineExceeded; not retried, counted as a failure; nothing sent.
    world.capture.reset();
    let started = Instant::now();
    let err = world
        .place(&context(Some(&delay_at(GET_CART.point, SECOND * 8))))
        .await
        .unwrap_err();
    assert_eq!(started.elapsed(), SECOND * 5);
    assert_eq!(err.code(), Code::DeadlineExceeded);
    assert_eq!(world.carts.arrivals(&GET_CART), 1, "nothing more sent");
    let (code, injected) = world.results()[1].clone();
    assert_eq!(code, Code::DeadlineExceeded);
    assert_eq!(
        injected.unwrap().cause(),
        Some(fault::Cause::DeadlineExceeded)
    );
    let spans = world.carts_spans();
    assert_eq!(spans.len(), 1, "one attempt");
    assert_eq!(
        attribute(&spans[0], ERROR_TYPE),
        Some(Value::from(fault::ERROR_TYPE))
    );
    assert_eq!(
        attribute(&spans[0], RPC_RESPONSE_STATUS_CODE),
        Some(Value::from("DEADLINE_EXCEEDED"))
    );
    assert_eq!(
        world.metric(HUMUS_CIRCUIT_CALLS, &[(HUMUS_CIRCUIT_OUTCOME, "failure")]),
        1.0
    );
}

#[tokio::test(start_paused = true)]
async fn injection_off_evaluates_and_strips_nothing() {
    let world = World::new(|front| front.faults = Injector::off());
    let seen = Arc::new(Mutex::new(Vec::new()));
    {
        let seen = seen.clone();
        world.carts.on_get_cart(move |s, req| {
            seen.lock().unwrap().push(s.metadata.clone());
            async move { Ok(Response::new(cart(&req.id, 0))) }
        });
    }
    let cx = context(Some(&abort_at(GET_CART.point)));
    world.place(&cx).await.unwrap();
    assert_eq!(world.carts.arrivals(&GET_CART), 1, "nothing aborted");
    let sent = seen.lock().unwrap()[0].clone();
    let (scenario, tenant) = members(&sent);
    assert!(scenario.is_some(), "nothing stripped");
    assert_eq!(tenant.as_deref(), Some("acme"));
    let span = &world.carts_spans()[0];
    assert!(
        span.events.is_empty(),
        "nothing evaluated: {:?}",
        span.events
    );
}

/// A service that takes no part in failure injection but stands between
/// callers and services that do: strip-only, it injects nothing, and its
/// server and client strip a scenario as with injection on (off, both
/// pass it on: `injection_off_evaluates_and_strips_nothing`).
#[tokio::test(start_paused = true)]
async fn strip_only_injects_nothing_and_strips_as_injection_on_does() {
    let cx = context(Some(&abort_at(GET_CART.point)));

    // An untrusted caller: its scenario never reaches the handler.
    let world = World::new(|front| {
        front.faults = Injector::strip_only(codec());
        front.trust_scenario = false;
    });
    world.place(&cx).await.unwrap();
    let seen = world.front.seen.lock().unwrap().clone();
    assert_eq!(members(&seen[0]), (None, Some("acme".into())));

    // A trusted one: the handler sees it, but its call to carts is not
    // aborted, nothing is evaluated, and it is not sent on.
    let world = World::new(|front| front.faults = Injector::strip_only(codec()));
    let sent = carts_seen(&world.carts);
    world.place(&cx).await.unwrap();
    let seen = world.front.seen.lock().unwrap().clone();
    assert!(
        members(&seen[0]).0.is_some(),
        "trusted: the handler sees it"
    );
    assert_eq!(world.results(), [(Code::Ok, None)]);
    assert_eq!(world.carts.arrivals(&GET_CART), 1);
    let sent = sent.lock().unwrap()[0].clone();
    assert_eq!(members(&sent), (None, Some("acme".into())));
    let span = &world.carts_spans()[0];
    assert_eq!(events(span, fault::names::STRIP).len(), 1);
    assert!(events(span, fault::names::EVALUATION).is_empty());

    // With forward_scenario, it goes on as it came.
    let world = World::new(|front| {
        front.faults = Injector::strip_only(codec());
        front.settings.forward_scenario = true;
    });
    let sent = carts_seen(&world.carts);
    world.place(&cx).await.unwrap();
    let sent = sent.lock().unwrap()[0].clone();
    assert!(members(&sent).0.is_some());
}

// ---- streams, and the status a caller gets -----------------------------

/// A client of carts with failure injection on, for the stream tests: the
/// test is its front.
fn carts_client(host: &Host, ca: &Ca, capture: &Telemetry) -> Client {
    Client::new(
        &setup(host)
            .with_telemetry(capture.telemetry())
            .with_faults(injector()),
        carts_settings(ca),
    )
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn an_abort_is_unavailable_wrapping_the_injected_error() {
    let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
    let _carts = start_carts(&host, &ca, &carts);
    let client = carts_client(&host, &ca, &capture);
    let mut request = get("c");
    request
        .extensions_mut()
        .insert(context(Some(&abort_at("grpc:test.carts.v1.Carts/*"))));
    let err = client
        .unary::<_, Cart>(&GET_CART, request)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    let injected = InjectedError::from_status(&err).unwrap();
    assert!(injected.is_abort());
    assert_eq!(injected.point(), GET_CART.point);
    assert!(std::error::Error::source(&err).is_some_and(|e| !e.is::<Rejected>()));
    assert_eq!(carts.arrivals(&GET_CART), 0);
    assert_eq!(capture.spans().len(), 3, "retried as Unavailable is");
}

/// Evaluations are recorded on the request's trace alone: a call under
/// test, aborted and delayed, adds no instrument and no log record of
/// failure injection, in any scope.
#[tokio::test(start_paused = true)]
async fn no_instrument_or_log_record_records_evaluations() {
    let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
    carts.on_get_cart(|_, req| async move { Ok(Response::new(cart(&req.id, 1))) });
    let _carts = start_carts(&host, &ca, &carts);
    let client = carts_client(&host, &ca, &capture);
    for scenario in [
        abort_at("grpc:test.carts.v1.Carts/*"),
        delay_at("grpc:test.carts.v1.Carts/*", Duration::from_millis(10)),
    ] {
        let mut request = get("c");
        request.extensions_mut().insert(context(Some(&scenario)));
        let _ = client.unary::<_, Cart>(&GET_CART, request).await;
    }
    assert_eq!(carts.arrivals(&GET_CART), 1, "the delayed call went on");
    let metrics = capture.collect();
    let names: Vec<String> = metrics
        .scope_metrics()
        .flat_map(|s| s.metrics().map(|m| m.name().to_owned()))
        .collect();
    assert!(
        names.iter().any(|n| n == HUMUS_CIRCUIT_CALLS),
        "the client's own instruments recorded: {names:?}"
    );
    assert!(
        names.iter().all(|n| !n.starts_with("humus.fit")),
        "{names:?}"
    );
    let logs = capture.logs();
    assert!(
        logs.iter()
            .all(|l| !format!("{:?}", l.record).contains("humus.fit")),
        "{logs:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn streams_opens_are_aborted_like_unary_attempts() {
    let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
    let _carts = start_carts(&host, &ca, &carts);
    let client = carts_client(&host, &ca, &capture);
    let cx = context(Some(&Scenario::new([
        Rule::new(
            WATCH_CART.point,
            Fault {
                delay: Duration::ZERO,
                abort: true,
            },
        ),
        Rule::new(
            SYNC_ITEMS.point,
            Fault {
                delay: Duration::ZERO,
                abort: true,
            },
        ),
    ])));

    let mut request = Request::new(CartRequest { id: "c".into() });
    request.extensions_mut().insert(cx.clone());
    let err = client
        .server_streaming::<_, Cart>(&WATCH_CART, request)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert!(InjectedError::from_status(&err).is_some_and(InjectedError::is_abort));
    assert_eq!(carts.arrivals(&WATCH_CART), 0);

    // A bidirectional stream whose request stream was never read is
    // opened again, and aborted again.
    let items = futures_util::stream::iter([Item { sku: "a".into() }]);
    let mut request = Request::new(items);
    request.extensions_mut().insert(cx.clone());
    let err = client
        .streaming::<_, Item, Cart>(&SYNC_ITEMS, request)
        .await
        .unwrap_err();
    assert!(InjectedError::from_status(&err).is_some());
    assert_eq!(carts.arrivals(&SYNC_ITEMS), 0);

    let spans = capture.spans();
    let per = |name: &str| spans.iter().filter(|s| s.name == name).count();
    assert_eq!(
        [
            per("test.carts.v1.Carts/WatchCart"),
            per("test.carts.v1.Carts/SyncItems")
        ],
        [3, 2],
        "retried opens, as far as the retry budget allows"
    );
    for span in &spans {
        if span.instrumentation_scope.name() == RPC_SCOPE {
            assert_eq!(
                attribute(span, ERROR_TYPE),
                Some(Value::from(fault::ERROR_TYPE))
            );
        }
    }
    assert_eq!(
        sum(
            &capture.metrics(CLIENT_SCOPE),
            HUMUS_CIRCUIT_CALLS,
            &[(HUMUS_CIRCUIT_OUTCOME, "failure")]
        ),
        5.0
    );

    // A stream with no fault for its point opens and ends as usual.
    let mut request = Request::new(CartRequest { id: "c".into() });
    request.extensions_mut().insert(context(None));
    tokio::time::advance(SECOND * 10).await;
    let mut stream = client
        .server_streaming::<_, Cart>(&WATCH_CART, request)
        .await
        .unwrap()
        .into_inner();
    while stream.message().await.unwrap().is_some() {}
    assert_eq!(carts.arrivals(&WATCH_CART), 1);
}

/// A delay that `Setup::stop` cuts short keeps its injected error, as one
/// the deadline cuts does: the caller gets `Cancelled` with the
/// [`InjectedError`] (cut short, `Canceled`) as its source, and the span's
/// `error.type` is the injected error's. Nothing is sent, nothing counted.
#[tokio::test(start_paused = true)]
async fn a_delay_cut_short_by_stop_keeps_its_injected_error() {
    let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
    let _carts = start_carts(&host, &ca, &carts);
    let setup = setup(&host)
        .with_telemetry(capture.telemetry())
        .with_faults(injector());
    let client = Client::new(&setup, carts_settings(&ca)).unwrap();
    let mut request = get("c");
    request
        .extensions_mut()
        .insert(context(Some(&delay_at(GET_CART.point, SECOND * 5))));
    let call = tokio::spawn(async move { client.unary::<_, Cart>(&GET_CART, request).await });
    tokio::time::sleep(SECOND).await;
    let started = Instant::now();
    setup.stop().await;
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(started.elapsed(), Duration::ZERO, "ended at the stop");
    assert_eq!(err.code(), Code::Cancelled, "{err:?}");
    let injected = InjectedError::from_status(&err).expect("the injected error is kept");
    assert_eq!(injected.cause(), Some(fault::Cause::Canceled));
    assert_eq!(injected.point(), GET_CART.point);
    assert_eq!(carts.arrivals(&GET_CART), 0);
    let spans = capture.spans();
    assert_eq!(spans.len(), 1);
    assert_eq!(
        attribute(&spans[0], ERROR_TYPE),
        Some(Value::from(fault::ERROR_TYPE))
    );
    assert_eq!(
        sum(&capture.metrics(CLIENT_SCOPE), HUMUS_CIRCUIT_CALLS, &[]),
        0.0,
        "the close counts nothing"
    );
}

/// The metadata carts saw on each GetCart.
fn carts_seen(carts: &Carts) -> Arc<Mutex<Vec<MetadataMap>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    carts.on_get_cart(move |s, req| {
        log.lock().unwrap().push(s.metadata.clone());
        async move { Ok(Response::new(cart(&req.id, 0))) }
    });
    seen
}

/// A caller that forwards its inbound metadata as it came (a proxy's
/// habit) puts a `baggage` header with the scenario in the request: the
/// client strips it there too, whether the scenario is the baggage's only
/// member (the stripped baggage is empty, so the propagator writes no
/// header over the caller's) or one of several; and from the caller's
/// header when the call's context has no baggage at all.
#[tokio::test(start_paused = true)]
async fn the_strip_reaches_a_baggage_header_the_caller_put_in_the_metadata() {
    use humus::telemetry::MetadataInjector;
    let scenario = abort_at("grpc:test.payments.v1.Payments/*");
    let only = fault::with_scenario(&Context::new(), &codec(), &scenario).unwrap();
    let with_tenant = context(Some(&scenario));
    // (the call's context, the context the caller's header was written from)
    let cases = [
        ("the scenario alone", only.clone(), only.clone(), None),
        (
            "with others",
            with_tenant.clone(),
            with_tenant.clone(),
            Some("acme"),
        ),
        (
            "in the metadata only",
            Context::new(),
            with_tenant.clone(),
            Some("acme"),
        ),
    ];
    for (what, call_cx, header_cx, tenant) in cases {
        let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
        let seen = carts_seen(&carts);
        let _carts = start_carts(&host, &ca, &carts);
        let client = carts_client(&host, &ca, &capture);
        let mut request = get("c");
        capture
            .telemetry()
            .propagator()
            .inject_context(&header_cx, &mut MetadataInjector(request.metadata_mut()));
        assert!(request.metadata().contains_key("baggage"), "{what}");
        request.extensions_mut().insert(call_cx);
        client.unary::<_, Cart>(&GET_CART, request).await.unwrap();
        let sent = seen.lock().unwrap()[0].clone();
        assert_eq!(
            members(&sent),
            (None, tenant.map(str::to_owned)),
            "{what}: {:?}",
            sent.get("baggage")
        );
        if tenant.is_none() {
            assert!(sent.get("baggage").is_none(), "{what}: no header at all");
        }
        let spans = capture.spans();
        assert_eq!(events(&spans[0], fault::names::STRIP).len(), 1, "{what}");
    }
}

/// A classify that counts an injected failure as nothing in the breaker
/// (the default's classification otherwise).
fn sparing_injected() -> Classify {
    Classify::new(|method, status, trailer| {
        let c = default_classify(method, status, trailer);
        if status.and_then(InjectedError::from_status).is_some() {
            return Classification {
                breaker: Outcome::Ignored,
                ..c
            };
        }
        c
    })
}

/// A delay that `attempt_timeout` cuts short keeps its injected error, as
/// one the call's deadline cuts does: the caller's `DEADLINE_EXCEEDED` is
/// the attempt's timeout with the [`InjectedError`] (cut short,
/// `DeadlineExceeded`) among its sources, each attempt's span has the
/// injected error's `error.type`, and a classify that spares injected
/// failures spares it. Nothing is sent.
#[tokio::test(start_paused = true)]
async fn a_delay_cut_short_by_attempt_timeout_keeps_its_injected_error() {
    let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
    let _carts = start_carts(&host, &ca, &carts);
    let setup = setup(&host)
        .with_telemetry(capture.telemetry())
        .with_faults(injector());
    let settings = Settings {
        attempt_timeout: Some(SECOND),
        max_attempts: 2,
        classify: sparing_injected(),
        ..carts_settings(&ca)
    };
    let client = Client::new(&setup, settings).unwrap();
    let mut request = get("c");
    request
        .extensions_mut()
        .insert(context(Some(&delay_at(GET_CART.point, SECOND * 5))));
    let err = client
        .unary::<_, Cart>(&GET_CART, request)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    let timeout = humus::grpc::client::AttemptTimeout::from_status(&err).expect("the attempt's");
    assert_eq!(timeout.after(), Some(SECOND));
    let injected = InjectedError::from_status(&err).expect("the injected error is kept");
    assert_eq!(injected.cause(), Some(fault::Cause::DeadlineExceeded));
    assert_eq!(injected.point(), GET_CART.point);
    assert!(
        err.message()
            .ends_with("; it cut short an injected delay at grpc:test.carts.v1.Carts/GetCart"),
        "{err:?}"
    );
    assert_eq!(carts.arrivals(&GET_CART), 0);
    let spans = capture.spans();
    assert_eq!(spans.len(), 2, "retried, as an attempt's timeout is");
    for span in &spans {
        assert_eq!(
            attribute(span, ERROR_TYPE),
            Some(Value::from(fault::ERROR_TYPE))
        );
    }
    let calls = |outcome| {
        sum(
            &capture.metrics(CLIENT_SCOPE),
            HUMUS_CIRCUIT_CALLS,
            &[(HUMUS_CIRCUIT_OUTCOME, outcome)],
        )
    };
    assert_eq!((calls("ignored"), calls("failure")), (2.0, 0.0));
}

/// An injected delay at a stream's open: under the stream's deadline it is
/// waited, and the stream then opens and ends as usual; over it, the open
/// ends at the deadline `DEADLINE_EXCEEDED` with the [`InjectedError`],
/// nothing sent, a failure; cut short by `attempt_timeout`, the open's
/// status is the attempt's timeout, which keeps the injected error too.
#[tokio::test(start_paused = true)]
async fn a_delay_at_a_streams_open_is_waited_or_cut_short_by_its_deadline() {
    let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
    let _carts = start_carts(&host, &ca, &carts);
    let client = carts_client(&host, &ca, &capture);
    let watch = |delay: Duration| {
        let mut request = get("c");
        request.set_timeout(SECOND * 5);
        request
            .extensions_mut()
            .insert(context(Some(&delay_at(WATCH_CART.point, delay))));
        request
    };

    let started = Instant::now();
    let mut stream = client
        .server_streaming::<_, Cart>(&WATCH_CART, watch(SECOND * 2))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(started.elapsed(), SECOND * 2, "the delay, then the open");
    while stream.message().await.unwrap().is_some() {}
    assert_eq!(carts.arrivals(&WATCH_CART), 1);

    let started = Instant::now();
    let err = client
        .server_streaming::<_, Cart>(&WATCH_CART, watch(SECOND * 8))
        .await
        .unwrap_err();
    assert_eq!(started.elapsed(), SECOND * 5, "the stream's deadline");
    assert_eq!(err.code(), Code::DeadlineExceeded);
    let injected = InjectedError::from_status(&err).expect("the injected error is kept");
    assert_eq!(injected.cause(), Some(fault::Cause::DeadlineExceeded));
    assert_eq!(injected.point(), WATCH_CART.point);
    assert_eq!(carts.arrivals(&WATCH_CART), 1, "nothing sent");
    let failures = |capture: &Telemetry| {
        sum(
            &capture.metrics(CLIENT_SCOPE),
            HUMUS_CIRCUIT_CALLS,
            &[(HUMUS_CIRCUIT_OUTCOME, "failure")],
        )
    };
    assert_eq!(failures(&capture), 1.0);

    let timed = Client::new(
        &setup(&host)
            .with_telemetry(capture.telemetry())
            .with_faults(injector()),
        Settings {
            attempt_timeout: Some(SECOND),
            max_attempts: 1,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let started = Instant::now();
    let err = timed
        .server_streaming::<_, Cart>(&WATCH_CART, watch(SECOND * 3))
        .await
        .unwrap_err();
    assert_eq!(started.elapsed(), SECOND, "the open's own timeout");
    assert_eq!(err.code(), Code::DeadlineExceeded);
    assert!(humus::grpc::client::AttemptTimeout::from_status(&err).is_some());
    let injected = InjectedError::from_status(&err).expect("the injected error is kept");
    assert_eq!(injected.point(), WATCH_CART.point);
    assert_eq!(carts.arrivals(&WATCH_CART), 1, "nothing sent");
    assert_eq!(failures(&capture), 2.0);
}

/// Every `baggage` entry a caller put in the metadata is read, joined, as
/// a server reads them: a scenario in the second goes no further; a value
/// too large for a propagator to read whole is not sent at all, and the
/// strip says why; and the client strips whatever its Setup's propagator
/// (the no-op one of a Setup without telemetry).
#[tokio::test(start_paused = true)]
async fn the_client_strips_every_baggage_entry_and_drops_what_it_cannot_read_whole() {
    let scenario = fault::with_scenario(&Context::new(), &codec(), &abort_at("x:*")).unwrap();
    let mut header = std::collections::HashMap::new();
    opentelemetry_sdk::propagation::BaggagePropagator::new().inject_context(&scenario, &mut header);
    let member = header.remove("baggage").unwrap();
    let mut past_the_limit: Vec<String> = (0..64).map(|i| format!("m{i}=v")).collect();
    past_the_limit.push(member.clone());
    let cases: [(&str, Vec<String>, Option<&str>, bool); 4] = [
        (
            "in a second entry",
            vec!["tenant=acme".into(), member.clone()],
            Some("tenant=acme"),
            true,
        ),
        (
            "the 65th member",
            vec![past_the_limit.join(",")],
            None,
            true,
        ),
        (
            "with the no-op propagator",
            vec![format!("tenant=acme,{member}")],
            Some("tenant=acme"),
            false,
        ),
        (
            "the scenario alone, no-op propagator",
            vec![member.clone()],
            None,
            false,
        ),
    ];
    for (what, entries, sent_header, telemetry) in cases {
        let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
        let seen = carts_seen(&carts);
        let _carts = start_carts(&host, &ca, &carts);
        let client = if telemetry {
            carts_client(&host, &ca, &capture)
        } else {
            Client::new(&setup(&host).with_faults(injector()), carts_settings(&ca)).unwrap()
        };
        let mut request = get("c");
        for entry in &entries {
            request
                .metadata_mut()
                .append("baggage", entry.parse().unwrap());
        }
        client.unary::<_, Cart>(&GET_CART, request).await.unwrap();
        let sent = seen.lock().unwrap()[0].clone();
        let sent: Vec<&str> = sent
            .get_all("baggage")
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(sent, Vec::from_iter(sent_header), "{what}");
        if telemetry {
            let spans = capture.spans();
            let strips = events(&spans[0], fault::names::STRIP);
            assert_eq!(strips.len(), 1, "{what}");
            let why = strips[0]
                .attributes
                .iter()
                .find(|a| a.key.as_str() == fault::names::UNREADABLE)
                .map(|a| a.value.to_string());
            let expected = sent_header.is_none().then(|| {
                "the baggage header has 65 members, over the 64 a propagator reads".to_owned()
            });
            assert_eq!(why, expected, "{what}");
        }
    }
}
