//! A humus Client as the channel of a stock tonic client (docs/client.md,
//! "Stock tonic clients"): tonic's own `Grpc` dispatcher, as every
//! tonic-generated stub uses it, over `Client::channel()`, to carts on the
//! testing Host over TLS, on paused time. Each test asserts what reached
//! the dependency and what the caller got, and that a call through the
//! channel is the typed call's (attempts, breaker, telemetry, faults).

mod client_support;

use std::error::Error as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use client_support::*;
use http::uri::PathAndQuery;
use humus::circuit::{Policy, Rejected};
use humus::fault::{self, Fault, Injector, Rule, Scenario, jsonscenario};
use humus::grpc::client::{
    Channel, Client, CodeRule, DescriptorSetError, DuplicateMethod, Method, MethodPolicy, Methods,
    RETRY_BUFFER, RpcKind, Settings,
};
use humus::telemetry::names::*;
use humus::testing::{Ca, Host, Telemetry};
use opentelemetry::Context;
use opentelemetry::baggage::BaggageExt as _;
use tonic::client::Grpc;
use tonic::{Code, Request, Response, Status};
use tonic_prost::ProstCodec;

/// The stub a tonic-generated client is: `Grpc` over the channel.
fn stub(channel: Channel) -> Grpc<Channel> {
    Grpc::new(channel)
}

fn path(method: &Method) -> PathAndQuery {
    PathAndQuery::from_static(method.full_name)
}

async fn get_cart(channel: &Channel, request: Request<CartRequest>) -> Result<Cart, Status> {
    let mut grpc = stub(channel.clone());
    grpc.ready().await.expect("the channel is always ready");
    grpc.unary(request, path(&GET_CART), ProstCodec::default())
        .await
        .map(Response::into_inner)
}

fn carts_methods() -> Methods {
    static ALL: [&Method; 4] = [&GET_CART, &WATCH_CART, &ADD_ITEMS, &SYNC_ITEMS];
    Methods::new(&[&ALL]).unwrap()
}

/// GetCart with `never_retry`, as a `.proto` option makes it.
static GET_CART_ONCE: Method = Method {
    policy: MethodPolicy {
        never_retry: true,
        ..MethodPolicy::DEFAULT
    },
    ..GET_CART
};

#[tokio::test(start_paused = true)]
async fn a_listed_unary_call_is_retried_and_its_answer_reaches_tonic() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart_unavailable_until(3);
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let channel = client.channel().with_methods(carts_methods());
    let cart = get_cart(&channel, get("c-1")).await.unwrap();
    assert_eq!(cart.id, "c-1");
    assert_eq!(carts.arrivals(&GET_CART), 3);
}

/// A method the channel does not know may not be idempotent: it is sent
/// once, its `Unavailable` (which the client's classify retries) handed
/// to the caller, and counted in the breaker.
#[tokio::test(start_paused = true)]
async fn an_unknown_method_is_sent_once() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart_unavailable_until(3);
    let _carts = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let client = Client::new(
        &setup(&host),
        Settings {
            breaker_policy: policy,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let err = get_cart(&client.channel(), get("c-2")).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert_eq!(carts.arrivals(&GET_CART), 1, "sent once");
    assert_eq!(counted(&seen), (0, 1), "a failure, counted");
}

#[tokio::test(start_paused = true)]
async fn never_retry_from_the_registry_makes_one_attempt() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| async { Err::<Response<Cart>, _>(unavailable()) });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    static ONCE: [&Method; 1] = [&GET_CART_ONCE];
    let channel = client
        .channel()
        .with_methods(Methods::new(&[&ONCE]).unwrap());
    let err = get_cart(&channel, get("c-1")).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(err.message(), "carts is busy");
    assert_eq!(carts.arrivals(&GET_CART), 1);
}

#[tokio::test(start_paused = true)]
async fn a_method_table_from_the_registry_decides() {
    static TABLE: Method = Method {
        policy: MethodPolicy {
            table: &[CodeRule {
                code: Code::NotFound,
                retry: humus::retry::Verdict::Retry,
                breaker: humus::circuit::Outcome::Success,
            }],
            ..MethodPolicy::DEFAULT
        },
        ..GET_CART
    };
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| async { Err::<Response<Cart>, _>(Status::not_found("no cart")) });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    static LIST: [&Method; 1] = [&TABLE];
    let listed = client
        .channel()
        .with_methods(Methods::new(&[&LIST]).unwrap());
    let err = get_cart(&listed, get("c-1")).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(
        carts.arrivals(&GET_CART),
        3,
        "NotFound retried by the table"
    );
    let _ = get_cart(&client.channel(), get("c-1")).await.unwrap_err();
    assert_eq!(
        carts.arrivals(&GET_CART),
        4,
        "unlisted: the default classify"
    );
}

#[tokio::test(start_paused = true)]
async fn the_breaker_opens_and_rejects_without_sending() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| async { Err::<Response<Cart>, _>(unavailable()) });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(
        &setup(&host),
        Settings {
            breaker_policy: Policy::consecutive(2),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let channel = client.channel().with_methods(carts_methods());
    let err = get_cart(&channel, get("c-1")).await.unwrap_err();
    assert_eq!(
        carts.arrivals(&GET_CART),
        2,
        "the third attempt is rejected"
    );
    let rejected = |err: &Status| {
        err.source()
            .and_then(|s| s.downcast_ref::<Rejected>())
            .is_some()
    };
    assert!(rejected(&err), "{err:?}");
    let err = get_cart(&channel, get("c-1")).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert!(rejected(&err), "{err:?}");
    assert_eq!(carts.arrivals(&GET_CART), 2, "nothing sent while open");
}

/// A cart id of `len` bytes: a request body of about that size.
fn big(len: usize) -> Request<CartRequest> {
    get(&"x".repeat(len))
}

#[tokio::test(start_paused = true)]
async fn a_body_over_the_retry_buffer_is_sent_once_and_one_within_it_is_retried() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| async { Err::<Response<Cart>, _>(unavailable()) });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let channel = client.channel().with_methods(carts_methods());
    // The body is the message, its 5-byte gRPC frame head, and the id's
    // 1-byte tag with its 3-byte length.
    let within = RETRY_BUFFER - 5 - 4;
    let err = get_cart(&channel, big(within)).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(carts.arrivals(&GET_CART), 3, "within the buffer: retried");
    let err = get_cart(&channel, big(within + 1)).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(carts.arrivals(&GET_CART), 4, "over it: sent once");
}

#[tokio::test(start_paused = true)]
async fn a_retried_body_reaches_the_server_whole() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|seen, req| async move {
        if seen.n < 2 {
            return Err(unavailable());
        }
        Ok(Response::new(cart(&req.id, 0)))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let channel = client.channel().with_methods(carts_methods());
    let id = "y".repeat(100_000);
    let cart = get_cart(&channel, get(&id)).await.unwrap();
    assert_eq!(cart.id, id);
    assert_eq!(carts.arrivals(&GET_CART), 2);
}

/// One request's headers, (name, value) in the order sent.
type Sent = Vec<(String, String)>;

/// The headers of each GetCart that reached the server, in arrival order:
/// (name, value) in the order the map holds them (the order sent). The
/// first two after the `before` GetCarts so far fail `Unavailable`.
fn record_get_cart_headers(carts: &Carts, before: usize) -> Arc<Mutex<Vec<Sent>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    carts.on_get_cart(move |arrival, req| {
        let headers = arrival
            .metadata
            .clone()
            .into_headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        log.lock().unwrap().push(headers);
        async move {
            if arrival.n < before + 3 {
                return Err(unavailable());
            }
            Ok(Response::new(cart(&req.id, 0)))
        }
    });
    seen
}

/// A `grpc-timeout` value in seconds.
fn timeout_secs(value: &str) -> f64 {
    let (digits, unit) = value.split_at(value.len() - 1);
    let n: f64 = digits.parse().unwrap();
    n * match unit {
        "H" => 3600.0,
        "M" => 60.0,
        "S" => 1.0,
        "m" => 1e-3,
        "u" => 1e-6,
        "n" => 1e-9,
        other => panic!("grpc-timeout unit {other:?}"),
    }
}

/// Every send of a listed unary call carries what tonic's stub wrote (the
/// caller's metadata, each value of a name, in order; `te`,
/// `content-type`), the time left as `grpc-timeout` (at most the caller's
/// own) and the client's `user-agent`, the same names in the same order on
/// each: a call with no metadata (whose first send takes the stub's map),
/// one with metadata (each send a copy), one with its own deadline.
#[tokio::test(start_paused = true)]
async fn each_send_of_a_retried_call_carries_the_callers_headers_and_the_time_left() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let mut with_metadata = get("c-2");
    with_metadata
        .metadata_mut()
        .append("x-tag", "a".parse().unwrap());
    with_metadata
        .metadata_mut()
        .insert("x-one", "1".parse().unwrap());
    with_metadata
        .metadata_mut()
        .append("x-tag", "b".parse().unwrap());
    let mut with_deadline = get("c-3");
    with_deadline.set_timeout(Duration::from_secs(5));
    for (what, request, metadata, within) in [
        ("no metadata", get("c-1"), vec![], 10.0),
        (
            "metadata",
            with_metadata,
            vec![("x-tag", "a"), ("x-tag", "b"), ("x-one", "1")],
            10.0,
        ),
        ("its own deadline", with_deadline, vec![], 5.0),
    ] {
        // A client each: two retries each would empty one retry budget.
        let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
        let channel = client.channel().with_methods(carts_methods());
        let before = carts.arrivals(&GET_CART);
        let seen = record_get_cart_headers(&carts, before);
        get_cart(&channel, request).await.unwrap();
        assert_eq!(carts.arrivals(&GET_CART) - before, 3, "{what}");
        let sends = seen.lock().unwrap().clone();
        assert_eq!(sends.len(), 3, "{what}");
        let names = |send: &Sent| -> Vec<String> { send.iter().map(|(k, _)| k.clone()).collect() };
        for (i, send) in sends.iter().enumerate() {
            let value = |name: &str| -> Vec<&str> {
                send.iter()
                    .filter(|(k, _)| k == name)
                    .map(|(_, v)| v.as_str())
                    .collect()
            };
            assert_eq!(value("te"), ["trailers"], "{what}, send {i}");
            assert_eq!(
                value("content-type"),
                ["application/grpc"],
                "{what}, send {i}"
            );
            let agent = value("user-agent");
            assert!(
                agent.len() == 1 && agent[0].starts_with("grpc-rust-humus/"),
                "{what}, send {i}: {agent:?}"
            );
            let timeout = value("grpc-timeout");
            assert_eq!(timeout.len(), 1, "{what}, send {i}");
            let left = timeout_secs(timeout[0]);
            assert!(left > 0.0 && left <= within, "{what}, send {i}: {left}");
            let caller: Vec<(&str, &str)> = send
                .iter()
                .filter(|(k, _)| k.starts_with("x-"))
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            assert_eq!(caller, metadata, "{what}, send {i}");
            assert_eq!(names(send), names(&sends[0]), "{what}, send {i}: {sends:?}");
        }
    }
}

async fn watch(channel: &Channel, id: &str) -> Result<Vec<u32>, Status> {
    let mut grpc = stub(channel.clone());
    let mut stream = grpc
        .server_streaming(
            get(id),
            path(&WATCH_CART),
            ProstCodec::<CartRequest, Cart>::default(),
        )
        .await?
        .into_inner();
    let mut got = Vec::new();
    while let Some(cart) = stream.message().await? {
        got.push(cart.items);
    }
    Ok(got)
}

/// WatchCart with `never_retry`, as a `.proto` option makes it.
static WATCH_CART_ONCE: Method = Method {
    policy: MethodPolicy {
        never_retry: true,
        ..MethodPolicy::DEFAULT
    },
    ..WATCH_CART
};

/// A handler's trailers-only `Unavailable` until the `n`th open, which
/// (and every later one) streams three updates.
fn watch_unavailable_until(carts: &Carts, n: usize) {
    carts.on_watch_cart(move |seen, req| async move {
        if seen.n < n {
            return Err(unavailable());
        }
        let updates: Vec<Result<Cart, Status>> = (1..=3).map(|i| Ok(cart(&req.id, i))).collect();
        Ok(Response::new(futures_util::stream::iter(updates)))
    });
}

/// A stream's trailers-only status (no response headers: the stream never
/// opened) is an attempt's, retried as the typed call's is when the
/// channel lists the method; a method not known is sent once.
#[tokio::test(start_paused = true)]
async fn a_streams_trailers_only_unavailable_is_retried_if_listed() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    watch_unavailable_until(&carts, 3);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let listed = client.channel().with_methods(carts_methods());
    assert_eq!(watch(&listed, "c-1").await.unwrap(), [1, 2, 3]);
    assert_eq!(carts.arrivals(&WATCH_CART), 3);
    // Not known: one open.
    watch_unavailable_until(&carts, usize::MAX);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let err = watch(&client.channel(), "c-1").await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(carts.arrivals(&WATCH_CART), 4, "not known: sent once");
    // Listed `never_retry`: one open.
    static ONCE: [&Method; 1] = [&WATCH_CART_ONCE];
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let channel = client
        .channel()
        .with_methods(Methods::new(&[&ONCE]).unwrap());
    let err = watch(&channel, "c-1").await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(carts.arrivals(&WATCH_CART), 5, "never retried");
}

/// A dependency that refuses every stream with a trailers-only
/// `Unavailable` trips the breaker (the default policy: 5 failures in a
/// row) through the channel as through the typed client, listed or not.
#[tokio::test(start_paused = true)]
async fn trailers_only_unavailable_opens_trip_the_breaker_listed_or_not() {
    let rejected = |err: &Status| {
        err.source()
            .and_then(|s| s.downcast_ref::<Rejected>())
            .is_some()
    };
    for listed in [true, false] {
        let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
        watch_unavailable_until(&carts, usize::MAX);
        let _carts = start_carts(&host, &ca, &carts);
        let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
        let channel = if listed {
            client.channel().with_methods(carts_methods())
        } else {
            client.channel()
        };
        let mut calls = 0;
        loop {
            calls += 1;
            // Listed: two calls of three and two attempts; not known,
            // five calls of one.
            assert!(calls <= 6, "the breaker never opened (listed: {listed})");
            let err = watch(&channel, "c-1").await.unwrap_err();
            assert_eq!(err.code(), Code::Unavailable);
            if rejected(&err) {
                break;
            }
        }
        assert_eq!(carts.arrivals(&WATCH_CART), 5, "listed: {listed}");
        let err = watch(&channel, "c-2").await.unwrap_err();
        assert!(rejected(&err), "{err:?}");
        assert_eq!(carts.arrivals(&WATCH_CART), 5, "nothing sent while open");
    }
}

#[tokio::test(start_paused = true)]
async fn a_stream_through_the_channel_delivers_as_it_arrives_and_counts_once_at_its_end() {
    let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Cart, Status>>(4);
    let rx = std::sync::Mutex::new(Some(rx));
    carts.on_watch_cart(move |_, _| {
        let rx = rx.lock().unwrap().take().expect("one watch");
        async move {
            Ok(Response::new(tokio_stream::wrappers::ReceiverStream::new(
                rx,
            )))
        }
    });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(
        &setup(&host).with_telemetry(capture.telemetry()),
        carts_settings(&ca),
    )
    .unwrap();
    let channel = client.channel().with_methods(carts_methods());
    let mut grpc = stub(channel);
    let mut stream = grpc
        .server_streaming(
            get("c"),
            path(&WATCH_CART),
            ProstCodec::<CartRequest, Cart>::default(),
        )
        .await
        .unwrap()
        .into_inner();
    tx.send(Ok(cart("c", 1))).await.unwrap();
    assert_eq!(
        stream.message().await.unwrap().unwrap().items,
        1,
        "not held back"
    );
    let calls = || {
        capture
            .metrics(CLIENT_SCOPE)
            .iter()
            .filter(|p| p.name == HUMUS_CIRCUIT_CALLS)
            .map(|p| p.value.as_f64())
            .sum::<f64>()
    };
    assert_eq!(calls(), 0.0, "counted at its end only");
    // DeadlineExceeded, the server's own: a failure, by the default.
    tx.send(Err(Status::deadline_exceeded("broke")))
        .await
        .unwrap();
    let err = stream.message().await.unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded);
    assert_eq!(carts.arrivals(&WATCH_CART), 1);
    let failures: f64 = capture
        .metrics(CLIENT_SCOPE)
        .iter()
        .filter(|p| p.name == HUMUS_CIRCUIT_CALLS && p.has(&[(HUMUS_CIRCUIT_OUTCOME, "failure")]))
        .map(|p| p.value.as_f64())
        .sum();
    assert_eq!((calls(), failures), (1.0, 1.0));
}

#[tokio::test(start_paused = true)]
async fn a_stream_ends_at_its_deadline() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_watch_cart(|_, _| async {
        Ok(Response::new(futures_util::stream::pending::<
            Result<Cart, Status>,
        >()))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let mut grpc = stub(client.channel().with_methods(carts_methods()));
    let mut request = get("c");
    request.set_timeout(Duration::from_secs(30));
    let started = tokio::time::Instant::now();
    let mut stream = grpc
        .server_streaming(
            request,
            path(&WATCH_CART),
            ProstCodec::<CartRequest, Cart>::default(),
        )
        .await
        .unwrap()
        .into_inner();
    let err = stream.message().await.unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(30),
        "not Settings::timeout's 10 s"
    );
}

#[tokio::test(start_paused = true)]
async fn client_and_bidirectional_streams_through_the_channel() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    for channel in [
        client.channel().with_methods(carts_methods()),
        client.channel(),
    ] {
        let mut grpc = stub(channel);
        let items = || {
            tokio_stream::iter((0..3).map(|n| Item {
                sku: format!("s-{n}"),
            }))
        };
        let added = grpc
            .client_streaming(
                Request::new(items()),
                path(&ADD_ITEMS),
                ProstCodec::<Item, Cart>::default(),
            )
            .await
            .unwrap();
        assert_eq!(added.into_inner().items, 3);
        let mut synced = grpc
            .streaming(
                Request::new(items()),
                path(&SYNC_ITEMS),
                ProstCodec::<Item, Cart>::default(),
            )
            .await
            .unwrap()
            .into_inner();
        let mut n = Vec::new();
        while let Some(cart) = synced.message().await.unwrap() {
            n.push(cart.items);
        }
        assert_eq!(n, [1, 2, 3]);
    }
}

#[test]
fn two_descriptors_of_one_path_are_refused_and_one_list_twice_is_one() {
    static A: [&Method; 1] = [&GET_CART];
    static B: [&Method; 1] = [&GET_CART_ONCE];
    let twice = Methods::new(&[&A, &A]).unwrap();
    assert_eq!(twice.len(), 1);
    assert!(std::ptr::eq(
        twice.get(GET_CART.full_name).unwrap(),
        &GET_CART
    ));
    let err = Methods::new(&[&A, &B]).unwrap_err();
    assert_eq!(
        err,
        DuplicateMethod {
            path: "/test.carts.v1.Carts/GetCart"
        }
    );
    assert!(
        err.to_string().contains("/test.carts.v1.Carts/GetCart"),
        "{err}"
    );
    assert!(Methods::default().is_empty());
    // In an App's init, `?` makes it an error of the code (exit 1).
    let app = humus::app::Error::from(err);
    assert_eq!(app.kind(), humus::app::ErrorKind::Other);
    assert!(app.to_string().contains("GetCart"), "{app}");
}

// ---- indistinguishable from the typed client ---------------------------

const KEY: &str = "acme.fault";

fn injector() -> Injector {
    Injector::new(fault::Settings::new(jsonscenario::Codec::new(KEY).unwrap())).unwrap()
}

fn aborted_at(point: &str) -> Context {
    let scenario = Scenario::new([Rule::new(
        point,
        Fault {
            delay: Duration::ZERO,
            abort: true,
        },
    )]);
    let cx = Context::new().with_baggage([opentelemetry::KeyValue::new("tenant", "acme")]);
    fault::with_scenario(&cx, &jsonscenario::Codec::new(KEY).unwrap(), &scenario).unwrap()
}

#[tokio::test(start_paused = true)]
async fn the_fault_point_is_the_methods_listed_or_not() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let setup = setup(&host).with_faults(injector());
    let client = Client::new(&setup, carts_settings(&ca)).unwrap();
    let cx = aborted_at("grpc:test.carts.v1.Carts/GetCart");
    for channel in [
        client.channel(),
        client.channel().with_methods(carts_methods()),
    ] {
        let mut request = get("c-1");
        request.extensions_mut().insert(cx.clone());
        let err = get_cart(&channel, request).await.unwrap_err();
        assert_eq!(err.code(), Code::Unavailable);
        assert!(
            humus::fault::InjectedError::from_status(&err).is_some(),
            "{err:?}"
        );
    }
    assert_eq!(carts.arrivals(&GET_CART), 0, "every attempt aborted");
}

/// What a call leaves in telemetry, apart from times and ids: each span's
/// name, kind, scope, attributes and status, and each metric point.
fn shape(capture: &Telemetry) -> (Vec<String>, Vec<String>) {
    let spans = capture
        .spans()
        .into_iter()
        .map(|s| {
            let mut attributes: Vec<_> = s
                .attributes
                .iter()
                .map(|kv| format!("{}={}", kv.key, kv.value))
                .collect();
            attributes.sort();
            format!(
                "{} {:?} {} {:?} {attributes:?}",
                s.name,
                s.span_kind,
                s.instrumentation_scope.name(),
                s.status
            )
        })
        .collect();
    let mut metrics: Vec<_> = [CLIENT_SCOPE, RPC_SCOPE]
        .iter()
        .flat_map(|scope| capture.metrics(scope))
        .map(|p| {
            // A duration's count, not its times.
            let value = match p.name.as_str() {
                RPC_CLIENT_CALL_DURATION => String::from("-"),
                _ => format!("{}", p.value.as_f64()),
            };
            format!("{} {} {:?} {value}", p.name, p.unit, p.attributes)
        })
        .collect();
    metrics.sort();
    (spans, metrics)
}

#[tokio::test(start_paused = true)]
async fn a_call_through_the_channel_leaves_the_typed_calls_telemetry() {
    let mut shapes = Vec::new();
    for through_channel in [false, true] {
        let (ca, host, carts, capture) = (Ca::new(), Host::new(), Carts::new(), Telemetry::new());
        carts.on_get_cart_unavailable_until(3);
        let _carts = start_carts(&host, &ca, &carts);
        let client = Client::new(
            &setup(&host).with_telemetry(capture.telemetry()),
            carts_settings(&ca),
        )
        .unwrap();
        if through_channel {
            get_cart(&client.channel().with_methods(carts_methods()), get("c-1"))
                .await
                .unwrap();
        } else {
            let _: Response<Cart> = client.unary(&GET_CART, get("c-1")).await.unwrap();
        }
        shapes.push(shape(&capture));
    }
    assert_eq!(shapes[0].0.len(), 3, "{:#?}", shapes[0]);
    assert_eq!(shapes[0], shapes[1]);
}

/// A descriptor that says GetCart streams: it is called as a stream, with
/// no `Settings::timeout`, where listed as unary it is cut at it.
#[tokio::test(start_paused = true)]
async fn a_listed_method_of_any_kind_is_called_by_its_kind() {
    static AS_STREAM: Method = Method {
        kind: RpcKind::ServerStreaming,
        ..GET_CART
    };
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, req| async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        Ok(Response::new(cart(&req.id, 0)))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(
        &setup(&host),
        Settings {
            timeout: Duration::from_secs(1),
            max_attempts: 1,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let err = get_cart(&client.channel().with_methods(carts_methods()), get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "listed unary");
    static LIST: [&Method; 1] = [&AS_STREAM];
    let channel = client
        .channel()
        .with_methods(Methods::new(&[&LIST]).unwrap());
    assert_eq!(get_cart(&channel, get("c-1")).await.unwrap().id, "c-1");
}

/// A proxy's error page, not gRPC: the connection maps it, and through the
/// channel it is retried (listed, and a stream's failed open); a method
/// not known is sent once.
#[tokio::test(start_paused = true)]
async fn a_proxys_503_page_is_retried_through_the_channel() {
    let host = Host::new();
    let _proxy = h2_server(&host, "carts:9090", move |n, _, respond| {
        if n % 3 == 0 {
            answer_grpc(respond, &cart("c", 0));
        } else {
            answer_http(respond, 503, Some("text/html"), "<h1>503</h1>");
        }
    });
    // A client per call: each has a retry budget of its own.
    let client = || {
        Client::new(
            &setup(&host),
            Settings {
                addr: "carts:9090".into(),
                ..Settings::default()
            },
        )
        .unwrap()
    };
    let listed = || client().channel().with_methods(carts_methods());
    assert_eq!(get_cart(&listed(), get("c")).await.unwrap().id, "c");
    // Not known: sent once (the 4th request).
    let err = get_cart(&client().channel(), get("c")).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    let _ = get_cart(&listed(), get("c")).await.unwrap();
    let mut grpc = stub(listed());
    let mut stream = grpc
        .server_streaming(
            get("c"),
            path(&WATCH_CART),
            ProstCodec::<CartRequest, Cart>::default(),
        )
        .await
        .expect("the third attempt opens")
        .into_inner();
    assert_eq!(stream.message().await.unwrap().unwrap().id, "c");
}

/// An unlisted method may be a stream that lives for hours: no
/// `Settings::timeout`, and its messages are not held back.
#[tokio::test(start_paused = true)]
async fn an_unlisted_stream_is_not_cut_at_the_settings_timeout() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Cart, Status>>(4);
    let rx = std::sync::Mutex::new(Some(rx));
    carts.on_watch_cart(move |_, _| {
        let rx = rx.lock().unwrap().take().expect("one watch");
        async move {
            Ok(Response::new(tokio_stream::wrappers::ReceiverStream::new(
                rx,
            )))
        }
    });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let mut grpc = stub(client.channel());
    let mut stream = grpc
        .server_streaming(
            get("c"),
            path(&WATCH_CART),
            ProstCodec::<CartRequest, Cart>::default(),
        )
        .await
        .unwrap()
        .into_inner();
    tx.send(Ok(cart("c", 1))).await.unwrap();
    assert_eq!(stream.message().await.unwrap().unwrap().items, 1);
    let waited = tokio::time::timeout(Duration::from_secs(60), stream.message()).await;
    assert!(waited.is_err(), "still open after 60 s: {waited:?}");
    tx.send(Ok(cart("c", 2))).await.unwrap();
    assert_eq!(stream.message().await.unwrap().unwrap().items, 2);
}

/// A response over tonic's 4 MiB decoding limit ends as the typed call's:
/// `ResourceExhausted`, with the same message.
#[tokio::test(start_paused = true)]
async fn a_response_over_the_limit_is_the_typed_calls_resource_exhausted() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| async { Ok(Response::new(cart(&"z".repeat(5 << 20), 0))) });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let typed = client
        .unary::<_, Cart>(&GET_CART, get("c"))
        .await
        .unwrap_err();
    let channel = get_cart(&client.channel().with_methods(carts_methods()), get("c"))
        .await
        .unwrap_err();
    assert_eq!(typed.code(), Code::ResourceExhausted, "{typed:?}");
    assert_eq!(
        (channel.code(), channel.message()),
        (typed.code(), typed.message())
    );
}

/// A stock stub's GetCart through `channel`, its own decoding limit `limit`
/// bytes (tonic's `max_decoding_message_size`).
async fn get_cart_limited(
    channel: &Channel,
    limit: usize,
    request: Request<CartRequest>,
) -> Result<Cart, Status> {
    let mut grpc = stub(channel.clone()).max_decoding_message_size(limit);
    grpc.ready().await.expect("the channel is always ready");
    grpc.unary(request, path(&GET_CART), ProstCodec::default())
        .await
        .map(Response::into_inner)
}

/// tonic's server's words for a request over its decoding limit (4 MiB):
/// a `CartRequest` whose id is 5 MiB is 5242885 bytes.
const SERVERS_OUT_OF_RANGE: &str =
    "Error, decoded message length too large: found 5242885 bytes, the limit is: 4194304 bytes";

/// A server's `OutOfRange` for a request over its own limit reaches the
/// stock client as sent, listed or not (and the typed call's is the
/// same): the limit exceeded is the server's.
#[tokio::test(start_paused = true)]
async fn a_servers_out_of_range_for_a_large_request_reaches_the_stock_client_as_sent() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let big = || get(&"x".repeat(5 << 20));
    let typed = client.unary::<_, Cart>(&GET_CART, big()).await.unwrap_err();
    let listed = get_cart(&client.channel().with_methods(carts_methods()), big())
        .await
        .unwrap_err();
    let unlisted = get_cart(&client.channel(), big()).await.unwrap_err();
    for (how, status) in [("typed", typed), ("listed", listed), ("unlisted", unlisted)] {
        assert_eq!(
            (status.code(), status.message()),
            (Code::OutOfRange, SERVERS_OUT_OF_RANGE),
            "{how}: {status:?}"
        );
    }
    assert_eq!(carts.arrivals(&GET_CART), 3, "none retried");
}

/// The channel's decoding limit is the client's setting, listed or not,
/// and applies before the stock client's own: a 5 MiB response to a stub
/// whose own limit is 16 MiB is `ResourceExhausted` under the default
/// setting (4 MiB) and read with the setting at 8 MiB; a stub with
/// tonic's default limit (4 MiB) then refuses it itself (`OutOfRange`,
/// tonic's): the smaller of the two wins.
#[tokio::test(start_paused = true)]
async fn the_channels_limit_is_the_clients_setting_before_the_stock_clients() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart(|_, _| async { Ok(Response::new(cart(&"z".repeat(5 << 20), 0))) });
    let _carts = start_carts(&host, &ca, &carts);
    let default = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let raised = Client::new(
        &setup(&host),
        Settings {
            max_decoding_message_size: 8 << 20,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    for listed in [true, false] {
        let channel = |client: &Client| {
            if listed {
                client.channel().with_methods(carts_methods())
            } else {
                client.channel()
            }
        };
        let err = get_cart_limited(&channel(&default), 16 << 20, get("c"))
            .await
            .unwrap_err();
        assert_eq!(
            err.code(),
            Code::ResourceExhausted,
            "listed {listed}: {err:?}"
        );
        assert_eq!(
            err.message(),
            "the response message is larger than the limit: found 5242892 bytes, the limit is: 4194304 bytes",
            "listed {listed}"
        );
        let cart = get_cart_limited(&channel(&raised), 16 << 20, get("c"))
            .await
            .unwrap();
        assert_eq!(cart.id.len(), 5 << 20, "listed {listed}");
        let err = get_cart(&channel(&raised), get("c")).await.unwrap_err();
        assert_eq!(err.code(), Code::OutOfRange, "listed {listed}: {err:?}");
        assert!(
            err.message()
                .starts_with("Error, decoded message length too large"),
            "listed {listed}: {err:?}"
        );
    }
}

/// The client's per-attempt layers wrap the channel's attempts too: an
/// interceptor runs once per attempt of a stock stub's call.
#[tokio::test(start_paused = true)]
async fn the_clients_interceptor_runs_once_per_attempt_of_the_channel() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_get_cart_unavailable_until(3);
    let _carts = start_carts(&host, &ca, &carts);
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let settings = carts_settings(&ca).interceptor(move |request: tonic::Request<()>| {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(request)
    });
    let client = Client::new(&setup(&host), settings).unwrap();
    get_cart(&client.channel().with_methods(carts_methods()), get("c-1"))
        .await
        .unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 3, "listed: 3 attempts");
    // Arrivals 4 and 5 fail, the 6th answers.
    carts.on_get_cart_unavailable_until(6);
    get_cart(&client.channel(), get("c-1")).await.unwrap_err();
    assert_eq!(seen.load(Ordering::SeqCst), 4, "unlisted: sent once");
    get_cart(&client.channel().with_methods(carts_methods()), get("c-1"))
        .await
        .unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 6, "listed: 2 attempts more");
    assert_eq!(carts.arrivals(&GET_CART), 6);
}

/// `attempt_timeout` bounds the attempts of a stock client's calls too: a
/// listed unary call's attempt (whose `grpc-timeout` says the bound), cut,
/// counted and retried; and an unlisted method's open, cut and counted,
/// not retried (it is sent once).
#[tokio::test(start_paused = true)]
async fn attempt_timeout_cuts_and_retries_a_stock_clients_hanging_attempt() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = sent.clone();
    carts.on_get_cart(move |seen, req| {
        s.lock()
            .unwrap()
            .push(seen.metadata.get("grpc-timeout").cloned());
        async move {
            if seen.n % 2 == 1 {
                std::future::pending::<()>().await;
            }
            Ok(Response::new(cart(&req.id, 0)))
        }
    });
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(
        &setup(&host),
        Settings {
            attempt_timeout: Some(Duration::from_millis(100)),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let listed = client.channel().with_methods(carts_methods());
    assert_eq!(get_cart(&listed, get("c-1")).await.unwrap().id, "c-1");
    assert_eq!(carts.arrivals(&GET_CART), 2);
    // Not known: cut, and not retried.
    let err = get_cart(&client.channel(), get("c-2")).await.unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert_eq!(carts.arrivals(&GET_CART), 3);
    assert_eq!(
        get_cart(&client.channel(), get("c-2")).await.unwrap().id,
        "c-2"
    );
    assert_eq!(carts.arrivals(&GET_CART), 4);
    let sent: Vec<_> = sent
        .lock()
        .unwrap()
        .iter()
        .map(|v| v.as_ref().map(|v| v.to_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        sent,
        [
            Some("100000u".to_owned()),
            Some("100000u".to_owned()),
            None,
            None
        ],
        "a listed unary attempt sends its bound; an unlisted call sends none (its open's bound is the client's own)"
    );
}

/// A raw server whose GetCart answers one cart, then `after` (64 MiB more
/// of frames, or of a frame's head and part of its message), then `OK`.
fn answer_then(host: &Host, after: fn() -> Vec<bytes::Bytes>) -> tokio::task::JoinHandle<()> {
    use prost::Message as _;
    h2_server(host, "carts:9090", move |_, _, respond| {
        let first = grpc_frame(&cart("c", 1).encode_to_vec());
        answer_grpc_frames(respond, std::iter::once(first).chain(after()));
    })
}

const MIB: usize = 1 << 20;

/// A listed unary response is bounded whatever follows its one message:
/// a frame after it over the decoding limit (64 MiB) ends the call
/// `ResourceExhausted`, as it ends the typed call; so do 64 frames of
/// 1 MiB after it, once the response is longer than the limit: what the
/// call holds stays within it.
#[tokio::test(start_paused = true)]
async fn a_listed_unary_response_is_bounded_whatever_the_server_sends_after_its_message() {
    let host = Host::new();
    let settings = || Settings {
        addr: "carts:9090".into(),
        ..Settings::default()
    };
    let server = answer_then(&host, || {
        // The head of a 64 MiB message, then its first MiB.
        vec![grpc_frame(&[]).slice(..1), {
            let mut rest = u32::try_from(64 * MIB).unwrap().to_be_bytes().to_vec();
            rest.resize(4 + MIB, 7);
            rest.into()
        }]
    });
    let client = Client::new(&setup(&host), settings()).unwrap();
    let channel = client.channel().with_methods(carts_methods());
    let err = get_cart(&channel, get("c")).await.unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (
            Code::ResourceExhausted,
            "the response message is larger than the limit: found 67108864 bytes, the limit is: 4194304 bytes"
        ),
        "{err:?}"
    );
    let typed = client
        .unary::<_, Cart>(&GET_CART, get("c"))
        .await
        .unwrap_err();
    assert_eq!((typed.code(), typed.message()), (err.code(), err.message()));
    server.abort();

    let host = Host::new();
    let _server = answer_then(&host, || {
        (0..64).map(|_| grpc_frame(&vec![7; MIB - 5])).collect()
    });
    let client = Client::new(&setup(&host), settings()).unwrap();
    let channel = client.channel().with_methods(carts_methods());
    let err = get_cart(&channel, get("c")).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(
        err.message()
            .starts_with("the response is larger than the limit: found 4"),
        "{err:?}"
    );
    assert!(
        err.message().ends_with("the limit is: 4194304 bytes"),
        "{err:?}"
    );
}

// ---- methods not listed: the well-known, a descriptor set's, unknown ----

/// A raw server at `carts:9090` that never answers: it holds each
/// request's stream open, and records each request's `grpc-timeout`.
struct Hung {
    sent: Arc<Mutex<Vec<Option<String>>>>,
    _held: Arc<Mutex<Vec<h2::server::SendResponse<bytes::Bytes>>>>,
    _server: tokio::task::JoinHandle<()>,
}

impl Hung {
    fn start(host: &Host) -> Hung {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let held = Arc::new(Mutex::new(Vec::new()));
        let (s, h) = (sent.clone(), held.clone());
        let server = h2_server(host, "carts:9090", move |_, headers, respond| {
            s.lock().unwrap().push(
                headers
                    .get("grpc-timeout")
                    .map(|v| v.to_str().unwrap().to_owned()),
            );
            h.lock().unwrap().push(respond);
        });
        Hung {
            sent,
            _held: held,
            _server: server,
        }
    }

    fn sent(&self) -> Vec<Option<String>> {
        self.sent.lock().unwrap().clone()
    }
}

/// `call`'s result, which must come within a minute (of paused time): a
/// call with no bound against the hung server fails the test there.
async fn bounded<T>(call: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .expect("unbounded: no answer after 60 s")
}

/// A client of the hung server at `carts:9090`, in plain text, with a
/// 2 s timeout and a breaker policy that records what it counts.
fn hung_client(host: &Host) -> (Client, Arc<Mutex<humus::circuit::Counts>>) {
    let (policy, seen) = recording();
    let client = Client::new(
        &setup(host),
        Settings {
            addr: "carts:9090".into(),
            timeout: 2 * SECOND,
            breaker_policy: policy,
            ..Settings::default()
        },
    )
    .unwrap();
    (client, seen)
}

/// tonic-health's stub over the channel, given no descriptor: its `Check`
/// is known as unary, so a hung dependency ends it `DeadlineExceeded` at
/// the client's timeout (which its request says), a breaker failure.
#[tokio::test(start_paused = true)]
async fn a_stock_health_check_ends_at_the_clients_timeout_against_a_hung_server() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let host = Host::new();
    let hung = Hung::start(&host);
    let (client, seen) = hung_client(&host);
    let mut health = HealthClient::new(client.channel());
    let started = tokio::time::Instant::now();
    let err = bounded(health.check(HealthCheckRequest {
        service: "carts".into(),
    }))
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert_eq!(started.elapsed(), 2 * SECOND);
    assert!(
        err.message().contains("the client's timeout setting, 2s"),
        "{err:?}"
    );
    assert_eq!(counted(&seen), (0, 1), "a failure, counted");
    assert_eq!(hung.sent(), [Some("2S".to_owned())]);
}

/// A method not known against a hung dependency: bounded by the
/// client's timeout until its response headers (not sent in its
/// `grpc-timeout`, which would cut a stream), sent once, a breaker
/// failure; five such calls open the breaker.
#[tokio::test(start_paused = true)]
async fn an_unknown_method_is_bounded_by_the_clients_timeout_until_its_headers() {
    let host = Host::new();
    let hung = Hung::start(&host);
    let (client, seen) = hung_client(&host);
    let started = tokio::time::Instant::now();
    let err = bounded(get_cart(&client.channel(), get("c")))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert_eq!(started.elapsed(), 2 * SECOND);
    assert!(
        err.message().contains("the client's timeout setting, 2s"),
        "{err:?}"
    );
    assert_eq!(counted(&seen), (0, 1), "a failure, counted");
    assert_eq!(hung.sent(), [None], "sent once, with no grpc-timeout");
    // A stream not known, the same.
    let mut grpc = stub(client.channel());
    let err = bounded(grpc.server_streaming(
        get("c"),
        path(&WATCH_CART),
        ProstCodec::<CartRequest, Cart>::default(),
    ))
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert_eq!(started.elapsed(), 4 * SECOND);
    assert_eq!(counted(&seen), (0, 2));
    // The request's own timeout, shorter, bounds it (and is sent).
    let mut request = get("c");
    request.set_timeout(Duration::from_millis(500));
    let err = get_cart(&client.channel(), request).await.unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert_eq!(started.elapsed(), 4 * SECOND + Duration::from_millis(500));
    assert_eq!(hung.sent().len(), 3);
    assert!(hung.sent()[2].is_some(), "{:?}", hung.sent());
}

/// Once its response headers have come, a method not known is a stream:
/// the client's timeout no longer bounds it (see also
/// `an_unlisted_stream_is_not_cut_at_the_settings_timeout`), here with a
/// raw server that answers headers, then nothing for a minute.
#[tokio::test(start_paused = true)]
async fn an_unknown_method_with_its_headers_is_not_cut_by_the_clients_timeout() {
    let host = Host::new();
    let held = Arc::new(Mutex::new(Vec::new()));
    let h = held.clone();
    let _server = h2_server(&host, "carts:9090", move |_, _, mut respond| {
        let response = http::Response::builder()
            .status(200)
            .header("content-type", "application/grpc")
            .body(())
            .unwrap();
        let send = respond.send_response(response, false).unwrap();
        h.lock().unwrap().push(send);
    });
    let (client, _seen) = hung_client(&host);
    let mut grpc = stub(client.channel());
    let mut stream = grpc
        .server_streaming(
            get("c"),
            path(&WATCH_CART),
            ProstCodec::<CartRequest, Cart>::default(),
        )
        .await
        .expect("opened by its headers")
        .into_inner();
    let waited = tokio::time::timeout(Duration::from_secs(60), stream.message()).await;
    assert!(waited.is_err(), "still open after 60 s: {waited:?}");
    let mut send = held.lock().unwrap().pop().unwrap();
    use prost::Message as _;
    send.send_data(grpc_frame(&cart("c", 1).encode_to_vec()), false)
        .unwrap();
    assert_eq!(stream.message().await.unwrap().unwrap().items, 1);
}

/// tonic-health's descriptor set lists `Check` as unary and `Watch` as a
/// server stream, with the client's policy; built again, or joined with
/// the well-known methods that describe them alike, they are the same.
#[test]
fn methods_from_tonic_healths_descriptor_set() {
    let methods = Methods::from_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .expect("tonic-health's set");
    let check = methods.get("/grpc.health.v1.Health/Check").unwrap();
    assert_eq!(check.kind, RpcKind::Unary);
    assert_eq!(check.point, "grpc:grpc.health.v1.Health/Check");
    assert!(!check.policy.never_retry);
    assert!(check.policy.table.is_empty());
    let watch = methods.get("/grpc.health.v1.Health/Watch").unwrap();
    assert_eq!(watch.kind, RpcKind::ServerStreaming);
    let again = Methods::from_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET).unwrap();
    assert!(std::ptr::eq(
        again.get("/grpc.health.v1.Health/Check").unwrap(),
        check
    ));
    let known = Methods::well_known();
    for version in ["v1", "v1alpha"] {
        let path = format!("/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo");
        assert_eq!(known.get(&path).unwrap().kind, RpcKind::Streaming, "{path}");
    }
    let joined = methods.join(&Methods::well_known()).expect("alike");
    assert_eq!(joined.len(), Methods::well_known().len());
    let carts = carts_methods().join(&methods).unwrap();
    assert_eq!(carts.len(), carts_methods().len() + methods.len());
}

/// Bytes that are no descriptor set are a clear error, never a panic.
#[test]
fn a_bad_descriptor_set_is_a_clear_error() {
    let set = tonic_health::pb::FILE_DESCRIPTOR_SET;
    let err = Methods::from_file_descriptor_set(&set[..set.len() / 2]).unwrap_err();
    assert!(matches!(err, DescriptorSetError::Decode(_)), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("Methods::from_file_descriptor_set: the bytes are not an encoded google.protobuf.FileDescriptorSet: "),
        "{err}"
    );
    let err = Methods::from_file_descriptor_set(b"service Health {}").unwrap_err();
    assert!(matches!(err, DescriptorSetError::Decode(_)), "{err:?}");
    let err = Methods::from_file_descriptor_set(&[]).unwrap_err();
    assert_eq!(err, DescriptorSetError::Empty);
    assert!(err.to_string().contains("has no file"), "{err}");
}

/// The parts of `descriptor.proto` (and humus's method option, field
/// 51917 of `MethodOptions`) a test's descriptor set is written with, as
/// protoc or humus-build encode them.
mod descriptor {
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct FileDescriptorSet {
        #[prost(message, repeated, tag = "1")]
        pub(super) file: Vec<File>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct File {
        #[prost(string, optional, tag = "1")]
        pub(super) name: Option<String>,
        #[prost(string, optional, tag = "2")]
        pub(super) package: Option<String>,
        #[prost(message, repeated, tag = "6")]
        pub(super) service: Vec<Service>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Service {
        #[prost(string, optional, tag = "1")]
        pub(super) name: Option<String>,
        #[prost(message, repeated, tag = "2")]
        pub(super) method: Vec<Rpc>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Rpc {
        #[prost(string, optional, tag = "1")]
        pub(super) name: Option<String>,
        #[prost(string, optional, tag = "2")]
        pub(super) input_type: Option<String>,
        #[prost(string, optional, tag = "3")]
        pub(super) output_type: Option<String>,
        #[prost(message, optional, tag = "4")]
        pub(super) options: Option<Options>,
        #[prost(bool, optional, tag = "6")]
        pub(super) server_streaming: Option<bool>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Options {
        #[prost(bool, optional, tag = "33")]
        pub(super) deprecated: Option<bool>,
        #[prost(message, optional, tag = "51917")]
        pub(super) policy: Option<Policy>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Policy {
        #[prost(bool, tag = "1")]
        pub(super) never_retry: bool,
        #[prost(message, repeated, tag = "2")]
        pub(super) classify: Vec<Rule>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Rule {
        #[prost(string, tag = "1")]
        pub(super) code: String,
        #[prost(string, tag = "2")]
        pub(super) retry: String,
        #[prost(string, tag = "3")]
        pub(super) breaker: String,
    }
}

/// The encoded descriptor set of `test/carts/v1/carts.proto`: GetCart
/// (unary, with `policy` as its `humus.v1.policy` option, if any) and
/// WatchCart (a server stream).
fn carts_descriptor_set(policy: Option<descriptor::Policy>) -> Vec<u8> {
    use descriptor::*;
    use prost::Message as _;
    let rpc = |name: &str, server_streaming, policy| Rpc {
        name: Some(name.into()),
        input_type: Some(".test.carts.v1.CartRequest".into()),
        output_type: Some(".test.carts.v1.Cart".into()),
        options: Some(Options {
            deprecated: Some(false),
            policy,
        }),
        server_streaming: Some(server_streaming),
    };
    FileDescriptorSet {
        file: vec![File {
            name: Some("test/carts/v1/carts.proto".into()),
            package: Some("test.carts.v1".into()),
            service: vec![Service {
                name: Some("Carts".into()),
                method: vec![rpc("GetCart", false, policy), rpc("WatchCart", true, None)],
            }],
        }],
    }
    .encode_to_vec()
}

fn rule(code: &str, retry: &str, breaker: &str) -> descriptor::Rule {
    descriptor::Rule {
        code: code.into(),
        retry: retry.into(),
        breaker: breaker.into(),
    }
}

/// A descriptor set's unary method is a unary call over the channel:
/// retried (an unknown one is sent once); its `humus.v1.policy` is
/// honoured: `never_retry` sends it once, a classify entry decides.
#[tokio::test(start_paused = true)]
async fn a_descriptor_sets_methods_keep_their_kind_and_policy() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    carts.on_get_cart_unavailable_until(3);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let methods = Methods::from_file_descriptor_set(&carts_descriptor_set(None)).unwrap();
    let listed = methods.get(GET_CART.full_name).unwrap();
    assert_eq!(listed.kind, RpcKind::Unary);
    assert_eq!(listed.point, GET_CART.point);
    assert_eq!(
        methods.get(WATCH_CART.full_name).unwrap().kind,
        RpcKind::ServerStreaming
    );
    let channel = client.channel().with_methods(methods);
    assert_eq!(get_cart(&channel, get("c")).await.unwrap().id, "c");
    assert_eq!(carts.arrivals(&GET_CART), 3, "retried");

    // never_retry: once.
    carts.on_get_cart(|_, _| async { Err::<Response<Cart>, _>(unavailable()) });
    let once = Methods::from_file_descriptor_set(&carts_descriptor_set(Some(descriptor::Policy {
        never_retry: true,
        classify: vec![],
    })))
    .unwrap();
    assert!(once.get(GET_CART.full_name).unwrap().policy.never_retry);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let err = get_cart(&client.channel().with_methods(once), get("c"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(carts.arrivals(&GET_CART), 4, "never_retry: sent once");

    // A classify entry: NotFound retried.
    carts.on_get_cart(|_, _| async { Err::<Response<Cart>, _>(Status::not_found("no cart")) });
    let table =
        Methods::from_file_descriptor_set(&carts_descriptor_set(Some(descriptor::Policy {
            never_retry: false,
            classify: vec![rule("NotFound", "RETRY", "SUCCESS")],
        })))
        .unwrap();
    assert_eq!(
        table.get(GET_CART.full_name).unwrap().policy.table,
        [CodeRule {
            code: Code::NotFound,
            retry: humus::retry::Verdict::Retry,
            breaker: humus::circuit::Outcome::Success,
        }]
    );
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let err = get_cart(&client.channel().with_methods(table), get("c"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(
        carts.arrivals(&GET_CART),
        7,
        "NotFound retried by the table"
    );
}

/// A `humus.v1.policy` humus-build would refuse is refused, naming the
/// file, the method and the entry; two sets that describe one method
/// differently cannot be joined.
#[test]
fn a_descriptor_sets_bad_policy_is_a_clear_error() {
    let policy = |never_retry, classify| {
        Some(descriptor::Policy {
            never_retry,
            classify,
        })
    };
    let cases = [
        (
            policy(false, vec![rule("ABORTD", "RETRY", "SUCCESS")]),
            "classify entry 1: unknown gRPC status code \"ABORTD\"",
        ),
        (
            policy(false, vec![rule("ABORTED", "AGAIN", "SUCCESS")]),
            "classify entry 1: unknown retry verdict \"AGAIN\"",
        ),
        (
            policy(false, vec![rule("ABORTED", "RETRY", "")]),
            "classify entry 1: unknown breaker outcome \"\"",
        ),
        (
            policy(
                false,
                vec![
                    rule("ABORTED", "RETRY", "SUCCESS"),
                    rule("Aborted", "STOP", "FAILURE"),
                ],
            ),
            "classify lists ABORTED twice (entries 1 and 2)",
        ),
        (
            policy(true, vec![rule("UNAVAILABLE", "RETRY", "FAILURE")]),
            "classify entry 1 retries UNAVAILABLE, but the method is never_retry",
        ),
        (
            policy(false, vec![rule("OK", "RETRY", "SUCCESS")]),
            "classify entry 1 retries OK",
        ),
    ];
    for (policy, problem) in cases {
        let err = Methods::from_file_descriptor_set(&carts_descriptor_set(policy)).unwrap_err();
        assert!(matches!(err, DescriptorSetError::Policy { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.starts_with("Methods::from_file_descriptor_set: test/carts/v1/carts.proto: /test.carts.v1.Carts/GetCart: humus.v1.policy: "),
            "{text}"
        );
        assert!(text.contains(problem), "{text} lacks {problem}");
    }
    let plain = Methods::from_file_descriptor_set(&carts_descriptor_set(None)).unwrap();
    let once =
        Methods::from_file_descriptor_set(&carts_descriptor_set(policy(true, vec![]))).unwrap();
    let err = plain.join(&once).unwrap_err();
    assert_eq!(err.path, GET_CART.full_name);
}
