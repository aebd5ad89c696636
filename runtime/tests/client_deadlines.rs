//! Deadlines as in production: a tonic server whose handler calls a hung
//! dependency through a humus client. tonic's server drops the handler at
//! the inbound RPC's `grpc-timeout`; the dropped call counts as the
//! deadline (a failure), so the dependency's breaker opens after the
//! default policy's 5 failures, whichever timer fires first. Both with the
//! deadline inherited through `InheritLayer` (the handler copies nothing)
//! and with the handler copying the inbound `grpc-timeout` by hand; on
//! paused time (testing Host, TLS) and in real time on loopback TCP. Then
//! what a dropped call counts as, and which bound the client's own
//! `DEADLINE_EXCEEDED` names.

mod client_support;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use client_support::*;
use humus::Setup;
use humus::grpc::client::{Client, Settings};
use humus::grpc::deadline::InheritLayer;
use humus::testing::{Ca, Host};
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tonic::body::Body;
use tonic::{Code, Request, Response, Status};
use tonic_prost::ProstCodec;
use tower::Layer;

/// The front service: PlaceOrder asks carts for the cart through a humus
/// client (with `stream`, it opens WatchCart and waits for its first
/// message). With `copy`, the handler copies the inbound `grpc-timeout`
/// onto its call by hand (as tonic users do today); without, it copies
/// nothing.
#[derive(Clone)]
struct Front {
    carts: Client,
    copy: bool,
    stream: bool,
}

impl tonic::server::NamedService for Front {
    const NAME: &'static str = "test.orders.v1.Orders";
}

impl tower_service::Service<http::Request<Body>> for Front {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let Front {
            carts,
            copy,
            stream,
        } = self.clone();
        Box::pin(async move {
            let svc = tower::service_fn(move |r: Request<OrderRequest>| {
                let carts = carts.clone();
                async move {
                    let mut out = Request::new(CartRequest {
                        id: r.get_ref().cart_id.clone(),
                    });
                    if copy && let Some(t) = r.metadata().get("grpc-timeout") {
                        out.metadata_mut().insert("grpc-timeout", t.clone());
                    }
                    let served_by = if stream {
                        let mut held = carts
                            .server_streaming::<_, Cart>(&WATCH_CART, out)
                            .await?
                            .into_inner();
                        held.message().await?.map(|c| c.served_by)
                    } else {
                        let cart: Response<Cart> = carts.unary(&GET_CART, out).await?;
                        Some(cart.into_inner().served_by)
                    };
                    Ok::<_, Status>(Response::new(Order {
                        summary: format!("orders, via {}", served_by.unwrap_or_default()),
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

fn propagator() -> Arc<dyn TextMapPropagator + Send + Sync> {
    Arc::new(TraceContextPropagator::new())
}

/// Carts whose GetCart never answers; counts the handlers dropped (the
/// call cancelled by the humus client).
fn hung_carts() -> (Carts, Arc<AtomicUsize>) {
    let carts = Carts::new();
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = dropped.clone();
    carts.on_get_cart(move |_, _| {
        let guard = DropCount(d.clone());
        async move {
            let _guard = guard;
            std::future::pending::<Result<Response<Cart>, Status>>().await
        }
    });
    (carts, dropped)
}

/// Carts whose GetCart never answers and whose WatchCart opens and sends
/// nothing.
fn wholly_hung_carts() -> Carts {
    let (carts, _) = hung_carts();
    carts.on_watch_cart(|_, _| async {
        Ok(Response::new(futures_util::stream::pending::<
            Result<Cart, Status>,
        >()))
    });
    carts
}

struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The inbound caller: a plain tonic client over one HTTP/2 connection,
/// which sends each call's `grpc-timeout` and leaves ending the call to the
/// front's server (its own bound is later), as the caller does.
#[derive(Clone)]
struct Caller {
    send: hyper::client::conn::http2::SendRequest<Body>,
}

impl Caller {
    async fn over<IO>(io: IO) -> Caller
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let (send, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
                .await
                .unwrap();
        tokio::spawn(connection);
        Caller { send }
    }

    /// A stock tonic client over this connection, to `origin`.
    fn grpc(&self, origin: &str) -> tonic::client::Grpc<Caller> {
        tonic::client::Grpc::with_origin(self.clone(), origin.parse().unwrap())
    }

    /// One PlaceOrder with `grpc-timeout: 1S`; its code.
    async fn place(&self, id: usize) -> Code {
        self.place_with(id, "1S", Duration::from_secs(3))
            .await
            .expect("the front's server ended the call")
    }

    /// One PlaceOrder with `grpc-timeout` `timeout`, dropped after `cut`;
    /// its code, or `None` if it was dropped.
    async fn place_with(&self, id: usize, timeout: &str, cut: Duration) -> Option<Code> {
        let mut grpc = self.grpc("http://orders");
        let mut request = Request::new(OrderRequest {
            cart_id: format!("c-{id}"),
        });
        request
            .metadata_mut()
            .insert("grpc-timeout", timeout.parse().unwrap());
        let call = async {
            grpc.ready().await.unwrap();
            grpc.unary::<_, Order, _>(
                request,
                PLACE_ORDER.full_name.parse().unwrap(),
                ProstCodec::default(),
            )
            .await
        };
        match tokio::time::timeout(cut, call).await {
            Ok(Ok(_)) => Some(Code::Ok),
            Ok(Err(status)) => Some(status.code()),
            Err(_) => None,
        }
    }
}

/// Sends each request on the connection.
impl tower_service::Service<http::Request<Body>> for Caller {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = hyper::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, hyper::Error>> + Send>,
    >;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), hyper::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        Box::pin(self.send.send_request(request))
    }
}

/// `n` calls of PlaceOrder at once; their codes.
async fn place(caller: &Caller, n: usize) -> Vec<Code> {
    let calls: Vec<_> = (0..n)
        .map(|i| {
            let caller = caller.clone();
            tokio::spawn(async move { caller.place(i).await })
        })
        .collect();
    let mut codes = Vec::new();
    for call in calls {
        codes.push(call.await.unwrap());
    }
    codes
}

/// The 8 inbound calls: 5 at once, which hang until their deadline and
/// open the breaker; then, once the front has dropped them, 3 more, which
/// the open breaker rejects at once. `dropped` counts the hung handlers
/// carts saw cancelled.
async fn eight_calls(orders: &Caller, carts: &Carts, dropped: &AtomicUsize) {
    let first = place(orders, 5).await;
    assert!(
        first.iter().all(|c| *c != Code::Ok),
        "the hung dependency answers nothing: {first:?}"
    );
    for _ in 0..500 {
        if dropped.load(Ordering::SeqCst) == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(dropped.load(Ordering::SeqCst), 5, "carts saw 5 cancels");
    assert_eq!(carts.arrivals(&GET_CART), 5);
    let started = tokio::time::Instant::now();
    let rest = place(orders, 3).await;
    assert_eq!(rest, [Code::Unavailable; 3], "the open breaker rejects");
    assert!(started.elapsed() < Duration::from_millis(500), "at once");
    assert_eq!(
        carts.arrivals(&GET_CART),
        5,
        "the breaker opened after the default policy's 5 failures"
    );
}

// ---- paused time, the testing Host -------------------------------------

async fn paused(copy: bool) {
    let (ca, host) = (Ca::new(), Host::new());
    let (carts, dropped) = hung_carts();
    let _carts = start_carts(&host, &ca, &carts);
    let setup = setup(&host);
    // The default settings: the default breaker policy, a 10 s timeout.
    let carts_client = Client::new(&setup, carts_settings(&ca)).unwrap();
    let front = Front {
        carts: carts_client,
        copy,
        stream: false,
    };
    let _front = if copy {
        serve_plain(&host, "orders:9090", front)
    } else {
        serve_plain(
            &host,
            "orders:9090",
            InheritLayer::new(propagator()).layer(front),
        )
    };
    let orders = Caller::over(humus::Host::dial(&host, "orders:9090").await.unwrap()).await;
    eight_calls(&orders, &carts, &dropped).await;
}

#[tokio::test(start_paused = true)]
async fn paused_a_hung_dependency_opens_the_breaker_through_the_inherited_deadline() {
    paused(false).await;
}

#[tokio::test(start_paused = true)]
async fn paused_a_hung_dependency_opens_the_breaker_with_a_hand_copied_grpc_timeout() {
    paused(true).await;
}

/// Under `InheritLayer` on a tonic server, a response stream's messages,
/// made as tonic polls the body after the handler's future completed, are
/// made in the RPC's scope too: each sees the deadline of the caller's
/// `grpc-timeout`.
#[tokio::test(start_paused = true)]
async fn paused_a_response_streams_messages_inherit_the_deadline_under_the_layer() {
    let host = Host::new();
    let carts = Carts::new();
    carts.on_watch_cart(|_, _req| async move {
        let messages = futures_util::stream::unfold(0u32, |n| async move {
            if n == 3 {
                return None;
            }
            tokio::time::sleep(SECOND).await;
            let left = humus::grpc::deadline::Inherited::current()
                .and_then(|i| i.deadline())
                .map(|d| d.saturating_duration_since(tokio::time::Instant::now()));
            Some((Ok(cart(&format!("{left:?}"), n)), n + 1))
        });
        Ok(Response::new(messages))
    });
    let _carts = serve_plain(
        &host,
        "carts:9090",
        InheritLayer::new(propagator()).layer(CartsService(carts.clone())),
    );
    let caller = Caller::over(humus::Host::dial(&host, "carts:9090").await.unwrap()).await;
    let mut grpc = caller.grpc("http://carts");
    let mut request = get("c-1");
    request
        .metadata_mut()
        .insert("grpc-timeout", "10S".parse().unwrap());
    grpc.ready().await.unwrap();
    let mut stream = grpc
        .server_streaming::<_, Cart, _>(
            request,
            WATCH_CART.full_name.parse().unwrap(),
            ProstCodec::<CartRequest, Cart>::default(),
        )
        .await
        .unwrap()
        .into_inner();
    let mut seen = Vec::new();
    while let Some(message) = stream.message().await.unwrap() {
        seen.push(message.id);
    }
    assert_eq!(seen, ["Some(9s)", "Some(8s)", "Some(7s)"]);
}

// ---- real time, loopback TCP -------------------------------------------

/// Serves `svc` on a fresh port of 127.0.0.1, with tonic's server and,
/// unless `copy`, one `InheritLayer`; stops when the returned sender drops.
async fn serve_tcp<S>(svc: S, inherit: bool) -> (String, tokio::sync::oneshot::Sender<()>)
where
    S: tower_service::Service<
            http::Request<Body>,
            Response = http::Response<Body>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        let _ = rx.await;
    };
    if inherit {
        let server = tonic::transport::Server::builder().layer(InheritLayer::new(propagator()));
        tokio::spawn(server.serve_with_incoming_shutdown(svc, incoming, shutdown));
    } else {
        let server = tonic::transport::Server::builder();
        tokio::spawn(server.serve_with_incoming_shutdown(svc, incoming, shutdown));
    }
    (addr, tx)
}

async fn real_time(copy: bool) {
    let (carts, dropped) = hung_carts();
    let (carts_addr, _stop_carts) = serve_tcp(carts.clone(), false).await;
    let setup = Setup::new();
    let carts_client = Client::new(
        &setup,
        Settings {
            addr: carts_addr,
            tls: None,
            ..Settings::default()
        },
    )
    .unwrap();
    let front = Front {
        carts: carts_client,
        copy,
        stream: false,
    };
    let (orders_addr, _stop_orders) = serve_tcp(front, !copy).await;
    let stream = tokio::net::TcpStream::connect(&orders_addr).await.unwrap();
    // As gRPC's clients do: without it, the request's DATA frame may wait
    // out a delayed ACK (40 ms on Linux) behind its HEADERS, and the
    // handler copies the deadline that much after the server measured it.
    stream.set_nodelay(true).unwrap();
    let orders = Caller::over(stream).await;
    let bound = tokio::time::timeout(
        Duration::from_secs(10),
        eight_calls(&orders, &carts, &dropped),
    );
    bound.await.expect("bounded: a few seconds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_time_a_hung_dependency_opens_the_breaker_through_the_inherited_deadline() {
    real_time(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_time_a_hung_dependency_opens_the_breaker_with_a_hand_copied_grpc_timeout() {
    real_time(true).await;
}

// ---- what a dropped call counts as -------------------------------------

mod dropped {
    use super::*;
    use humus::grpc::client::DEADLINE_SLACK;
    use humus::grpc::deadline::Inherited;
    use humus::telemetry::names::*;
    use humus::testing::{MetricPoint, Telemetry};
    use opentelemetry::Context as OtelContext;
    use opentelemetry::trace::{TraceContextExt, TracerProvider};
    use opentelemetry_sdk::trace::SpanData;
    use tokio::time::Instant;

    const METHOD_NAME: &str = "test.carts.v1.Carts/GetCart";

    struct World {
        carts: Carts,
        client: Client,
        capture: Telemetry,
        _carts: Running,
        _host: Host,
    }

    fn world() -> World {
        let (ca, host, capture) = (Ca::new(), Host::new(), Telemetry::new());
        let (carts, _) = hung_carts();
        let running = start_carts(&host, &ca, &carts);
        let setup = setup(&host).with_telemetry(capture.telemetry());
        let client = Client::new(&setup, carts_settings(&ca)).unwrap();
        World {
            carts,
            client,
            capture,
            _carts: running,
            _host: host,
        }
    }

    fn code(span: &SpanData) -> String {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == RPC_RESPONSE_STATUS_CODE)
            .map(|kv| kv.value.as_str().into_owned())
            .unwrap()
    }

    fn points(points: &[MetricPoint], name: &str, attributes: &[(&str, &str)]) -> f64 {
        points
            .iter()
            .filter(|p| p.name == name && p.has(attributes))
            .map(|p| p.value.as_f64())
            .sum()
    }

    impl World {
        fn spans(&self) -> Vec<SpanData> {
            self.capture
                .spans()
                .into_iter()
                .filter(|s| s.name == METHOD_NAME)
                .collect()
        }
        fn decisions(&self, d: &str) -> f64 {
            let own = self.capture.metrics(CLIENT_SCOPE);
            points(&own, HUMUS_RETRY_DECISIONS, &[(HUMUS_RETRY_DECISION, d)])
        }
        fn calls(&self, o: &str) -> f64 {
            let own = self.capture.metrics(CLIENT_SCOPE);
            points(&own, HUMUS_CIRCUIT_CALLS, &[(HUMUS_CIRCUIT_OUTCOME, o)])
        }
        /// A call with a 1 s deadline, dropped `before` its deadline.
        async fn drop_before_deadline(&self, before: Duration) {
            let mut request = get("c-1");
            request.set_timeout(SECOND);
            let call = self.client.unary::<_, Cart>(&GET_CART, request);
            // Cut at the deadline itself, the client's own timer may end
            // the call first: the same outcome.
            let cut = tokio::time::timeout(SECOND - before, call).await;
            assert!(before.is_zero() || cut.is_err(), "dropped, not ended");
        }
    }

    /// Dropped within the slack of its deadline (the server's timer a tick
    /// or a few ahead of the client's), a call counts as the deadline: a
    /// failure, `DEADLINE_EXCEEDED` on its span, `expired`.
    #[tokio::test(start_paused = true)]
    async fn a_call_dropped_at_its_deadline_counts_the_deadline() {
        let w = world();
        for before in [Duration::ZERO, DEADLINE_SLACK / 2, DEADLINE_SLACK] {
            w.drop_before_deadline(before).await;
            settle().await;
        }
        let spans = w.spans();
        assert_eq!(spans.len(), 3);
        assert!(spans.iter().all(|s| code(s) == "DEADLINE_EXCEEDED"));
        // Its status names the bound, as the status of a call the client
        // ended itself does.
        let named = opentelemetry::trace::Status::error(
            "carts:9090: the call's deadline passed: the request's own timeout (grpc-timeout), 1s",
        );
        assert!(spans.iter().all(|s| s.status == named), "{spans:#?}");
        assert_eq!(w.calls("failure"), 3.0);
        assert_eq!(w.decisions("expired"), 3.0);
        assert_eq!(w.carts.arrivals(&GET_CART), 3);
    }

    /// Dropped before that, the caller gave up: nothing is counted, the
    /// span ends `CANCELLED`, no decision is recorded.
    #[tokio::test(start_paused = true)]
    async fn a_call_dropped_before_its_deadline_counts_nothing() {
        let w = world();
        w.drop_before_deadline(DEADLINE_SLACK + Duration::from_millis(1))
            .await;
        w.drop_before_deadline(Duration::from_millis(500)).await;
        settle().await;
        let spans = w.spans();
        assert_eq!(spans.len(), 2);
        assert!(spans.iter().all(|s| code(s) == "CANCELLED"), "{spans:#?}");
        assert_eq!(w.calls("failure") + w.calls("success"), 0.0);
        assert_eq!(w.decisions("expired"), 0.0);
    }

    /// An inherited deadline is a deadline like the call's own: dropped at
    /// it, the call counts a failure; its `grpc-timeout` tells the
    /// dependency the inherited time left; a later inherited deadline does
    /// not extend `Settings::timeout`.
    #[tokio::test(start_paused = true)]
    async fn a_call_inherits_the_earlier_deadline_of_the_rpc_it_serves() {
        let w = world();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        w.carts.on_get_cart(move |seen, _| {
            s.lock().unwrap().push(
                seen.metadata
                    .get("grpc-timeout")
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned(),
            );
            std::future::pending::<Result<Response<Cart>, Status>>()
        });
        let deadline = Instant::now() + Duration::from_millis(1500);
        let served = Inherited::new(Some(deadline), OtelContext::new());
        let client = w.client.clone();
        let cut = served.scope(async move {
            let call = client.unary::<_, Cart>(&GET_CART, get("c-1"));
            // The server's timer, a tick ahead of the client's.
            tokio::time::timeout(Duration::from_millis(1499), call).await
        });
        assert!(
            cut.await.is_err(),
            "the handler was dropped at its deadline"
        );
        settle().await;
        assert_eq!(w.calls("failure"), 1.0);
        assert_eq!(w.decisions("expired"), 1.0);

        // A later inherited deadline: the 10 s timeout wins.
        let later = Inherited::new(
            Some(Instant::now() + Duration::from_secs(60)),
            OtelContext::new(),
        );
        let client = w.client.clone();
        let err = later
            .scope(async move { client.unary::<_, Cart>(&GET_CART, get("c-2")).await })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::DeadlineExceeded);
        assert_eq!(*seen.lock().unwrap(), ["1500000u", "10S"]);
    }

    /// A call made once its deadline has passed (an inherited one, or its
    /// own of zero), a unary call or a stream, ends `DEADLINE_EXCEEDED`
    /// before the breaker is asked: no attempt, no span, nothing counted,
    /// `expired`. So such calls never open a healthy dependency's breaker.
    #[tokio::test(start_paused = true)]
    async fn a_call_made_after_its_deadline_is_never_attempted() {
        use humus::grpc::client::NoRetry;
        use humus::retry::Decision;
        let w = world();
        w.carts
            .on_get_cart(|_, req| async move { Ok(Response::new(cart(&req.id, 1))) });
        let passed = Inherited::new(Some(Instant::now()), OtelContext::new());
        tokio::time::advance(Duration::from_millis(5)).await;
        let expired = |err: Status| {
            assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
            let decision = NoRetry::from_status(&err).map(NoRetry::decision);
            assert_eq!(decision, Some(Decision::Expired), "{err:?}");
        };
        for i in 0..5 {
            let client = w.client.clone();
            let call = async move {
                client
                    .unary::<_, Cart>(&GET_CART, get(&format!("c-{i}")))
                    .await
            };
            expired(passed.clone().scope(call).await.unwrap_err());
        }
        let client = w.client.clone();
        let open = async move {
            client
                .server_streaming::<_, Cart>(&WATCH_CART, get("s-1"))
                .await
                .map(drop)
        };
        expired(passed.clone().scope(open).await.unwrap_err());
        let mut own = get("c-own");
        own.set_timeout(Duration::ZERO);
        expired(w.client.unary::<_, Cart>(&GET_CART, own).await.unwrap_err());
        settle().await;
        assert!(w.capture.spans().is_empty(), "no attempt span");
        assert_eq!(w.calls("failure") + w.calls("success"), 0.0);
        assert_eq!(w.decisions("expired"), 7.0);
        assert_eq!(w.carts.arrivals(&GET_CART), 0);
        let _: Response<Cart> = w
            .client
            .unary(&GET_CART, get("c-ok"))
            .await
            .expect("the breaker is closed");
    }

    /// The call's context and deadline are read when the call is made, not
    /// when its future is first polled: a future made inside `cx.attach()`
    /// and inside an inherited scope, awaited outside both, keeps them.
    #[tokio::test(start_paused = true)]
    // The scope's future yields the call's future, unawaited, on purpose.
    #[allow(clippy::async_yields_async)]
    async fn the_context_and_deadline_are_taken_when_the_call_is_made() {
        let w = world();
        let tracer = w.capture.tracer_provider().tracer("caller");
        let cx =
            OtelContext::new().with_span(opentelemetry::trace::Tracer::start(&tracer, "caller"));
        let client = &w.client;
        let call = {
            let _guard = cx.clone().attach();
            client.unary::<_, Cart>(&GET_CART, get("c-1"))
        };
        let made_in_scope = {
            let deadline = Instant::now() + Duration::from_millis(300);
            let inherited = Inherited::new(Some(deadline), cx.clone());
            // Made (not awaited) in the scope.
            let made =
                inherited.scope(async move { client.unary::<_, Cart>(&GET_CART, get("c-2")) });
            futures_util::FutureExt::now_or_never(made).expect("making a call does not wait")
        };
        let start = Instant::now();
        let err = made_in_scope.await.unwrap_err();
        assert_eq!(err.code(), Code::DeadlineExceeded);
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(300),
            "the inherited deadline"
        );
        let err = call.await.unwrap_err();
        assert_eq!(err.code(), Code::DeadlineExceeded);
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(10),
            "Settings::timeout"
        );
        let spans = w.spans();
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].parent_span_id, cx.span().span_context().span_id());
        assert_eq!(spans[0].parent_span_id, cx.span().span_context().span_id());
    }
}

// ---- which bound the DEADLINE_EXCEEDED names ---------------------------

/// The `DEADLINE_EXCEEDED` the client makes at a call's deadline names
/// which bound set it: the client's `timeout`, the request's own
/// `grpc-timeout`, or the deadline inherited from the RPC being served;
/// for a typed call, a typed stream, and a stock tonic client over
/// `Client::channel()`. On paused time, carts hung.
mod bound {
    use super::*;
    use humus::grpc::client::{Channel, Method, Methods};
    use humus::grpc::deadline::Inherited;
    use humus::testing::Telemetry;
    use opentelemetry::Context as OtelContext;
    use tokio::time::Instant;

    const PASSED: &str = "carts:9090: the call's deadline passed: ";
    /// The message of an inherited deadline with `left` when the call
    /// was made.
    fn inherited(left: &str) -> String {
        let left = if left == "0" {
            "passed before the call was made".to_owned()
        } else {
            format!("{left} left when the call was made")
        };
        format!(
            "carts:9090: the call's deadline passed: the deadline inherited from the RPC being served \
             ({left}), not the client's timeout setting"
        )
    }

    struct World {
        client: Client,
        capture: Telemetry,
        _carts: Running,
        _host: Host,
    }

    /// A client of hung carts (GetCart never answers, WatchCart opens and
    /// sends nothing), its `timeout` `timeout`, one attempt a call.
    fn world(timeout: Duration) -> World {
        let (ca, host, capture) = (Ca::new(), Host::new(), Telemetry::new());
        let carts = wholly_hung_carts();
        let running = start_carts(&host, &ca, &carts);
        let setup = setup(&host).with_telemetry(capture.telemetry());
        let settings = Settings {
            timeout,
            max_attempts: 1,
            ..carts_settings(&ca)
        };
        World {
            client: Client::new(&setup, settings).unwrap(),
            capture,
            _carts: running,
            _host: host,
        }
    }

    /// `request` with its own timeout `d`.
    fn timed(mut request: Request<CartRequest>, d: Duration) -> Request<CartRequest> {
        request.set_timeout(d);
        request
    }

    /// Asserts `status` is the client's DEADLINE_EXCEEDED with `message`.
    #[track_caller]
    fn assert_names(status: &Status, message: &str) {
        assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
        assert_eq!(status.message(), message);
    }

    impl World {
        /// A typed unary call of GetCart; its status and how long it took.
        async fn unary(&self, request: Request<CartRequest>) -> (Status, Duration) {
            let started = Instant::now();
            let err = self
                .client
                .unary::<_, Cart>(&GET_CART, request)
                .await
                .unwrap_err();
            (err, started.elapsed())
        }

        /// A typed WatchCart stream: its first message's status, and how
        /// long after the open that came.
        async fn stream(&self, request: Request<CartRequest>) -> (Status, Duration) {
            let started = Instant::now();
            let mut stream = self
                .client
                .server_streaming::<_, Cart>(&WATCH_CART, request)
                .await
                .unwrap()
                .into_inner();
            let err = stream.message().await.unwrap_err();
            (err, started.elapsed())
        }

        /// The status descriptions of the client's attempt spans.
        fn span_messages(&self) -> Vec<String> {
            self.capture
                .spans()
                .into_iter()
                .filter(|s| s.span_kind == opentelemetry::trace::SpanKind::Client)
                .filter_map(|s| match s.status {
                    opentelemetry::trace::Status::Error { description } => {
                        Some(description.into_owned())
                    }
                    _ => None,
                })
                .collect()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_clients_timeout_setting_is_named_with_its_value() {
        let w = world(Duration::from_secs(2));
        let (err, took) = w.unary(get("c-1")).await;
        assert_names(
            &err,
            "carts:9090: the call's deadline passed: the client's timeout setting, 2s",
        );
        assert_eq!(took, Duration::from_secs(2));
        // A request's own timeout no shorter than the setting: the setting.
        let (err, _) = w.unary(timed(get("c-2"), Duration::from_secs(5))).await;
        assert_names(
            &err,
            "carts:9090: the call's deadline passed: the client's timeout setting, 2s",
        );
        settle().await;
        assert_eq!(
            w.span_messages(),
            ["carts:9090: the call's deadline passed: the client's timeout setting, 2s"; 2],
            "the attempt's span says the same"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_requests_own_grpc_timeout_is_named_with_its_value() {
        let w = world(Duration::from_secs(2));
        let (err, took) = w.unary(timed(get("c-1"), Duration::from_millis(500))).await;
        assert_names(
            &err,
            "carts:9090: the call's deadline passed: the request's own timeout (grpc-timeout), 500ms",
        );
        assert_eq!(took, Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn the_inherited_deadline_is_named() {
        let w = world(Duration::from_secs(2));
        let served = Inherited::new(
            Some(Instant::now() + Duration::from_millis(300)),
            OtelContext::new(),
        );
        let (err, took) = served
            .scope(w.unary(timed(get("c-1"), Duration::from_secs(1))))
            .await;
        assert_names(&err, &inherited("300ms"));
        assert_eq!(took, Duration::from_millis(300));
        // An inherited deadline that had already passed: the same, at once.
        let passed = Inherited::new(Some(Instant::now()), OtelContext::new());
        let (err, took) = passed.scope(w.unary(get("c-2"))).await;
        assert_names(&err, &inherited("0"));
        assert_eq!(took, Duration::ZERO);
    }

    /// Of two bounds at the same instant, the setting is named before the
    /// request's own timeout, and the call's own before the inherited.
    #[tokio::test(start_paused = true)]
    async fn of_two_equal_bounds_the_calls_own_and_then_the_setting_is_named() {
        let w = world(Duration::from_secs(2));
        let (err, _) = w.unary(timed(get("c-1"), Duration::from_secs(2))).await;
        assert_names(
            &err,
            "carts:9090: the call's deadline passed: the client's timeout setting, 2s",
        );
        let served = Inherited::new(
            Some(Instant::now() + Duration::from_secs(1)),
            OtelContext::new(),
        );
        let (err, _) = served
            .scope(w.unary(timed(get("c-2"), Duration::from_secs(1))))
            .await;
        assert_names(
            &err,
            "carts:9090: the call's deadline passed: the request's own timeout (grpc-timeout), 1s",
        );
    }

    /// A stream's deadline (no `timeout`: the request's own or the
    /// inherited one) is named as a unary call's.
    #[tokio::test(start_paused = true)]
    async fn a_typed_streams_deadline_names_its_bound() {
        let w = world(Duration::from_secs(2));
        let (err, took) = w.stream(timed(get("c-1"), Duration::from_secs(30))).await;
        assert_names(
            &err,
            &format!("{PASSED}the request's own timeout (grpc-timeout), 30s"),
        );
        assert_eq!(took, Duration::from_secs(30));
        let served = Inherited::new(
            Some(Instant::now() + Duration::from_secs(3)),
            OtelContext::new(),
        );
        let (err, took) = served.scope(w.stream(get("c-2"))).await;
        assert_names(&err, &inherited("3s"));
        assert_eq!(took, Duration::from_secs(3));
    }

    /// A stock tonic client over `Client::channel()`: a listed unary
    /// method takes the `timeout`, an unlisted one the `timeout` until its
    /// response headers (or its own `grpc-timeout`, if shorter), and a
    /// stream the inherited deadline; each named.
    #[tokio::test(start_paused = true)]
    async fn a_stock_tonic_clients_deadline_names_its_bound() {
        static ALL: [&Method; 2] = [&GET_CART, &WATCH_CART];
        let w = world(Duration::from_secs(2));
        let listed = w
            .client
            .channel()
            .with_methods(Methods::new(&[&ALL]).unwrap());
        async fn get_cart(channel: Channel, request: Request<CartRequest>) -> Status {
            let mut grpc = tonic::client::Grpc::new(channel);
            grpc.ready().await.unwrap();
            grpc.unary::<_, Cart, _>(
                request,
                GET_CART.full_name.parse().unwrap(),
                ProstCodec::default(),
            )
            .await
            .unwrap_err()
        }
        let err = get_cart(listed.clone(), get("c-1")).await;
        assert_names(
            &err,
            "carts:9090: the call's deadline passed: the client's timeout setting, 2s",
        );
        // Unlisted: the timeout until its headers, or its own if shorter.
        let err = get_cart(
            w.client.channel(),
            timed(get("c-2"), Duration::from_secs(4)),
        )
        .await;
        assert_names(
            &err,
            "carts:9090: the call's deadline passed: the client's timeout setting, 2s",
        );
        let err = get_cart(
            w.client.channel(),
            timed(get("c-2"), Duration::from_secs(1)),
        )
        .await;
        assert_names(
            &err,
            "carts:9090: the call's deadline passed: the request's own timeout (grpc-timeout), 1s",
        );
        let served = Inherited::new(
            Some(Instant::now() + Duration::from_secs(1)),
            OtelContext::new(),
        );
        let mut grpc = tonic::client::Grpc::new(listed);
        let err = served
            .scope(async move {
                grpc.ready().await.unwrap();
                let mut stream = grpc
                    .server_streaming::<_, Cart, _>(
                        get("c-3"),
                        WATCH_CART.full_name.parse().unwrap(),
                        ProstCodec::default(),
                    )
                    .await
                    .unwrap()
                    .into_inner();
                stream.message().await.unwrap_err()
            })
            .await;
        assert_names(&err, &inherited("1s"));
    }
}

// ---- a deadline inherited through a humus -> humus hop ------------------

/// An edge humus client calls a middle humus server whose handler calls a
/// hung dependency (carts) through a humus client, with nothing copied:
/// the middle call inherits the edge's deadline. The edge's `grpc-timeout`
/// is rounded down, so the middle's own call ends by that deadline, before
/// the edge cuts its attempt: it counts a failure, and five such calls
/// open the middle's breaker. A stock caller that rounds its timeout up
/// (as gRPC's C core does) and cuts the call at its own deadline, earlier
/// than the middle's by up to that step, is recognised the same.
mod hop {
    use super::*;
    use humus::grpc::server::{Server, Settings as ServerSettings};
    use humus::telemetry::names::*;
    use humus::testing::Telemetry;

    /// The time the edge has left when it calls: over 10 s, where the
    /// encoding's step is 100 ms.
    const LEFT: Duration = Duration::from_millis(15_050);

    struct World {
        host: Host,
        carts: Carts,
        /// What the middle records.
        capture: Telemetry,
        _carts: Running,
        _middle: tokio::task::JoinHandle<()>,
    }

    /// Hung carts (WatchCart opens and sends nothing), and the middle
    /// humus server in plain text at orders:9090 (a [`Front`] that copies
    /// nothing), its carts client with a
    /// `timeout` longer than the edge's time left (the inherited deadline
    /// is the middle call's).
    async fn world(stream: bool) -> World {
        let (ca, host, capture) = (Ca::new(), Host::new(), Telemetry::new());
        let carts = wholly_hung_carts();
        let running = start_carts(&host, &ca, &carts);
        let setup = setup(&host).with_telemetry(capture.telemetry());
        let settings = Settings {
            timeout: Duration::from_secs(60),
            ..carts_settings(&ca)
        };
        let middle = Front {
            carts: Client::new(&setup, settings).unwrap(),
            copy: false,
            stream,
        };
        let settings = ServerSettings {
            addr: "orders:9090".into(),
            tls: None,
            plaintext: true,
            ..ServerSettings::default()
        };
        let mut server = Server::new(&setup, settings).unwrap().add_service(middle);
        server.bind().await.unwrap();
        let serving = tokio::spawn(async move {
            server.serve(std::future::pending()).await.unwrap();
        });
        World {
            host,
            carts,
            capture,
            _carts: running,
            _middle: serving,
        }
    }

    impl World {
        /// The edge: a humus client of the middle, one attempt a call, a
        /// breaker that never opens and a `timeout` over its time left.
        fn edge(&self) -> Client {
            let settings = Settings {
                addr: "orders:9090".into(),
                tls: None,
                timeout: Duration::from_secs(60),
                max_attempts: 1,
                breaker_policy: humus::circuit::Policy::new(
                    |_| false,
                    |_| humus::circuit::State::Closed,
                ),
                ..Settings::default()
            };
            Client::new(&setup(&self.host), settings).unwrap()
        }

        /// What the middle's client counted in its breaker as `outcome`.
        fn counted(&self, outcome: &str) -> f64 {
            self.middle_metric(HUMUS_CIRCUIT_CALLS, &[(HUMUS_CIRCUIT_OUTCOME, outcome)])
        }

        fn middle_metric(&self, name: &str, attributes: &[(&str, &str)]) -> f64 {
            self.capture
                .metrics(CLIENT_SCOPE)
                .iter()
                .filter(|p| p.name == name && p.has(attributes))
                .map(|p| p.value.as_f64())
                .sum()
        }

        /// How many of the middle's calls carts saw, of either method.
        fn arrivals(&self) -> usize {
            self.carts.arrivals(&GET_CART) + self.carts.arrivals(&WATCH_CART)
        }

        /// Five orders, each with `place` (its code), one after another,
        /// then a sixth, which the middle's open breaker rejects at once:
        /// each of the five counted a failure in the middle.
        async fn five_open_the_breaker<F, Fut>(&self, place: F, stream: bool)
        where
            F: Fn(usize) -> Fut,
            Fut: std::future::Future<Output = Code>,
        {
            for i in 1..=5 {
                let code = place(i).await;
                assert_ne!(code, Code::Ok, "carts is hung");
                settle().await;
                assert_eq!(self.counted("failure"), i as f64, "order {i}");
                if !stream {
                    let expired = self
                        .middle_metric(HUMUS_RETRY_DECISIONS, &[(HUMUS_RETRY_DECISION, "expired")]);
                    assert_eq!(expired, i as f64, "order {i}");
                }
            }
            assert_eq!(self.arrivals(), 5);
            let started = tokio::time::Instant::now();
            assert_eq!(place(6).await, Code::Unavailable, "the open breaker");
            assert!(started.elapsed() < SECOND, "at once");
            assert_eq!(self.arrivals(), 5, "the breaker opened after 5");
        }
    }

    /// An order from the edge humus client, with `LEFT` left; its code.
    async fn order_from(edge: &Client, i: usize) -> Code {
        let mut request = Request::new(OrderRequest {
            cart_id: format!("c-{i}"),
        });
        request.set_timeout(LEFT);
        match edge.unary::<_, Order>(&PLACE_ORDER, request).await {
            Ok(_) => Code::Ok,
            Err(status) => status.code(),
        }
    }

    async fn from_a_humus_edge(stream: bool) {
        let w = world(stream).await;
        let edge = w.edge();
        w.five_open_the_breaker(|i| order_from(&edge, i), stream)
            .await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_dependency_opens_the_middles_breaker_through_a_humus_hop() {
        from_a_humus_edge(false).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_the_handler_holds_open_opens_the_middles_breaker_through_a_humus_hop() {
        from_a_humus_edge(true).await;
    }

    /// A stock caller that sends `15100m` for its 15.05 s left (rounded up
    /// to 100 ms, as gRPC's C core writes it) and drops the call at its own
    /// deadline: the middle's call, dropped 50 ms before its inherited
    /// deadline, is still the deadline's.
    #[tokio::test(start_paused = true)]
    async fn a_caller_that_rounds_its_timeout_up_is_recognised() {
        for stream in [false, true] {
            let w = world(stream).await;
            let io = humus::Host::dial(&w.host, "orders:9090").await.unwrap();
            let caller = Caller::over(io).await;
            // Cut by the caller's own deadline: `None`.
            let place = |i: usize| {
                let caller = caller.clone();
                async move {
                    let cut = caller.place_with(i, "15100m", LEFT).await;
                    cut.unwrap_or(Code::DeadlineExceeded)
                }
            };
            w.five_open_the_breaker(place, stream).await;
        }
    }
}
