//! What the client's whole-service tests share: hand-written prost messages
//! and tonic services (carts, the dependency; orders, whose handler calls
//! carts through a humus Client), served on the testing Host over TLS.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use humus::Setup;
use humus::grpc::client::{Client, Method, MethodPolicy, RpcKind, Settings};
use humus::testing::{Ca, Host};
use tokio::task::JoinHandle;
use tonic::body::Body;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
pub type BoxStream<T> = Pin<Box<dyn Stream<Item = T> + Send>>;

// ---- messages ---------------------------------------------------------

#[derive(Clone, PartialEq, prost::Message)]
pub struct CartRequest {
    #[prost(string, tag = "1")]
    pub id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Cart {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub served_by: String,
    #[prost(uint32, tag = "3")]
    pub items: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Item {
    #[prost(string, tag = "1")]
    pub sku: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OrderRequest {
    #[prost(string, tag = "1")]
    pub cart_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Order {
    #[prost(string, tag = "1")]
    pub summary: String,
}

// ---- descriptors (what generated code would hold) ---------------------

pub static GET_CART: Method = Method {
    full_name: "/test.carts.v1.Carts/GetCart",
    point: "grpc:test.carts.v1.Carts/GetCart",
    kind: RpcKind::Unary,
    policy: MethodPolicy::DEFAULT,
};

pub static WATCH_CART: Method = Method {
    full_name: "/test.carts.v1.Carts/WatchCart",
    point: "grpc:test.carts.v1.Carts/WatchCart",
    kind: RpcKind::ServerStreaming,
    policy: MethodPolicy::DEFAULT,
};

pub static ADD_ITEMS: Method = Method {
    full_name: "/test.carts.v1.Carts/AddItems",
    point: "grpc:test.carts.v1.Carts/AddItems",
    kind: RpcKind::ClientStreaming,
    policy: MethodPolicy::DEFAULT,
};

pub static SYNC_ITEMS: Method = Method {
    full_name: "/test.carts.v1.Carts/SyncItems",
    point: "grpc:test.carts.v1.Carts/SyncItems",
    kind: RpcKind::Streaming,
    policy: MethodPolicy::DEFAULT,
};

pub static PLACE_ORDER: Method = Method {
    full_name: "/test.orders.v1.Orders/PlaceOrder",
    point: "grpc:test.orders.v1.Orders/PlaceOrder",
    kind: RpcKind::Unary,
    policy: MethodPolicy::DEFAULT,
};

// ---- the carts service ------------------------------------------------

/// What a carts handler sees of one request that reached it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// 1 for the first request of this method to reach the server, then 2…
    pub n: usize,
    /// The request's `:authority`.
    pub authority: String,
    pub metadata: MetadataMap,
}

type GetCart =
    Arc<dyn Fn(Seen, CartRequest) -> BoxFuture<Result<Response<Cart>, Status>> + Send + Sync>;
type WatchCart = Arc<
    dyn Fn(
            Seen,
            CartRequest,
        ) -> BoxFuture<Result<Response<BoxStream<Result<Cart, Status>>>, Status>>
        + Send
        + Sync,
>;
type AddItems = Arc<
    dyn Fn(Seen, tonic::Streaming<Item>) -> BoxFuture<Result<Response<Cart>, Status>> + Send + Sync,
>;
type SyncItems = Arc<
    dyn Fn(
            Seen,
            tonic::Streaming<Item>,
        ) -> BoxFuture<Result<Response<BoxStream<Result<Cart, Status>>>, Status>>
        + Send
        + Sync,
>;

struct CartsState {
    get_cart: Mutex<GetCart>,
    watch_cart: Mutex<WatchCart>,
    add_items: Mutex<AddItems>,
    sync_items: Mutex<SyncItems>,
    arrivals: Mutex<HashMap<String, usize>>,
    authorities: Mutex<Vec<String>>,
}

/// The dependency: a carts service whose handlers a test scripts, and
/// which counts the requests that reach it.
#[derive(Clone)]
pub struct Carts {
    state: Arc<CartsState>,
}

/// Carts, under its service name, as a generated server would be: what a
/// humus `Server` or tonic's router adds.
#[derive(Clone)]
pub struct CartsService(pub Carts);

impl tonic::server::NamedService for CartsService {
    const NAME: &'static str = "test.carts.v1.Carts";
}

impl tower_service::Service<http::Request<Body>> for CartsService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        self.0.call(req)
    }
}

/// The status of a busy Carts.
pub fn unavailable() -> Status {
    Status::unavailable("carts is busy")
}

pub fn cart(id: &str, items: u32) -> Cart {
    Cart {
        id: id.to_owned(),
        served_by: "carts".to_owned(),
        items,
    }
}

impl Default for Carts {
    fn default() -> Self {
        Carts::new()
    }
}

impl Carts {
    /// Carts that answer every call: GetCart with the cart, WatchCart with
    /// three updates then its end, AddItems with the count of items,
    /// SyncItems with one cart per item.
    pub fn new() -> Carts {
        let get_cart: GetCart =
            Arc::new(|_, req| Box::pin(async move { Ok(Response::new(cart(&req.id, 0))) }));
        let watch_cart: WatchCart = Arc::new(|_, req| {
            Box::pin(async move {
                let updates: Vec<Result<Cart, Status>> =
                    (1..=3).map(|n| Ok(cart(&req.id, n))).collect();
                Ok(Response::new(
                    Box::pin(futures_util::stream::iter(updates)) as BoxStream<_>
                ))
            })
        });
        let add_items: AddItems = Arc::new(|_, mut items| {
            Box::pin(async move {
                let mut n = 0;
                while items.message().await?.is_some() {
                    n += 1;
                }
                Ok(Response::new(cart("c", n)))
            })
        });
        let sync_items: SyncItems = Arc::new(|_, items| {
            Box::pin(async move {
                let mut n = 0;
                let out = items.map(move |item| {
                    item.map(|_| {
                        n += 1;
                        cart("c", n)
                    })
                });
                Ok(Response::new(Box::pin(out) as BoxStream<_>))
            })
        });
        Carts {
            state: Arc::new(CartsState {
                get_cart: Mutex::new(get_cart),
                watch_cart: Mutex::new(watch_cart),
                add_items: Mutex::new(add_items),
                sync_items: Mutex::new(sync_items),
                arrivals: Mutex::default(),
                authorities: Mutex::default(),
            }),
        }
    }

    /// GetCart answers [`unavailable`] until its `n`th arrival, which (and
    /// every later one) gets the cart asked for, with no items.
    pub fn on_get_cart_unavailable_until(&self, n: usize) {
        self.on_get_cart(move |seen, req| async move {
            if seen.n < n {
                return Err(unavailable());
            }
            Ok(Response::new(cart(&req.id, 0)))
        });
    }

    pub fn on_get_cart<F, Fut>(&self, f: F)
    where
        F: Fn(Seen, CartRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Response<Cart>, Status>> + Send + 'static,
    {
        *self.state.get_cart.lock().unwrap() = Arc::new(move |s, r| Box::pin(f(s, r)));
    }

    pub fn on_watch_cart<F, Fut, S>(&self, f: F)
    where
        F: Fn(Seen, CartRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Response<S>, Status>> + Send + 'static,
        S: Stream<Item = Result<Cart, Status>> + Send + 'static,
    {
        let f = Arc::new(f);
        *self.state.watch_cart.lock().unwrap() = Arc::new(move |s, r| {
            let fut = f(s, r);
            Box::pin(async move {
                fut.await
                    .map(|resp| resp.map(|s| Box::pin(s) as BoxStream<_>))
            })
        });
    }

    pub fn on_add_items<F, Fut>(&self, f: F)
    where
        F: Fn(Seen, tonic::Streaming<Item>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Response<Cart>, Status>> + Send + 'static,
    {
        *self.state.add_items.lock().unwrap() = Arc::new(move |s, r| Box::pin(f(s, r)));
    }

    pub fn on_sync_items<F, Fut, S>(&self, f: F)
    where
        F: Fn(Seen, tonic::Streaming<Item>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Response<S>, Status>> + Send + 'static,
        S: Stream<Item = Result<Cart, Status>> + Send + 'static,
    {
        let f = Arc::new(f);
        *self.state.sync_items.lock().unwrap() = Arc::new(move |s, r| {
            let fut = f(s, r);
            Box::pin(async move {
                fut.await
                    .map(|resp| resp.map(|s| Box::pin(s) as BoxStream<_>))
            })
        });
    }

    /// How many requests of `method` reached the server.
    pub fn arrivals(&self, method: &Method) -> usize {
        self.state
            .arrivals
            .lock()
            .unwrap()
            .get(method.full_name)
            .copied()
            .unwrap_or(0)
    }

    /// The `:authority` of every request that reached the server.
    pub fn authorities(&self) -> Vec<String> {
        self.state.authorities.lock().unwrap().clone()
    }
}

fn unimplemented_response() -> http::Response<Body> {
    let mut response = http::Response::new(Body::default());
    let headers = response.headers_mut();
    headers.insert("grpc-status", (tonic::Code::Unimplemented as i32).into());
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}

impl tower_service::Service<http::Request<Body>> for Carts {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let path = req.uri().path().to_owned();
        let authority = req
            .uri()
            .authority()
            .map(|a| a.to_string())
            .unwrap_or_default();
        self.state
            .authorities
            .lock()
            .unwrap()
            .push(authority.clone());
        let n = {
            let mut arrivals = self.state.arrivals.lock().unwrap();
            let n = arrivals.entry(path.clone()).or_default();
            *n += 1;
            *n
        };
        let seen = move |metadata: &MetadataMap| Seen {
            n,
            authority: authority.clone(),
            metadata: metadata.clone(),
        };
        let state = self.state.clone();
        Box::pin(async move {
            let response = match path.as_str() {
                p if p == GET_CART.full_name => {
                    let handler = state.get_cart.lock().unwrap().clone();
                    let svc = tower::service_fn(move |r: Request<CartRequest>| {
                        let s = seen(r.metadata());
                        handler(s, r.into_inner())
                    });
                    tonic::server::Grpc::new(ProstCodec::<Cart, CartRequest>::default())
                        .unary(svc, req)
                        .await
                }
                p if p == WATCH_CART.full_name => {
                    let handler = state.watch_cart.lock().unwrap().clone();
                    let svc = tower::service_fn(move |r: Request<CartRequest>| {
                        let s = seen(r.metadata());
                        handler(s, r.into_inner())
                    });
                    tonic::server::Grpc::new(ProstCodec::<Cart, CartRequest>::default())
                        .server_streaming(svc, req)
                        .await
                }
                p if p == ADD_ITEMS.full_name => {
                    let handler = state.add_items.lock().unwrap().clone();
                    let svc = tower::service_fn(move |r: Request<tonic::Streaming<Item>>| {
                        let s = seen(r.metadata());
                        handler(s, r.into_inner())
                    });
                    tonic::server::Grpc::new(ProstCodec::<Cart, Item>::default())
                        .client_streaming(svc, req)
                        .await
                }
                p if p == SYNC_ITEMS.full_name => {
                    let handler = state.sync_items.lock().unwrap().clone();
                    let svc = tower::service_fn(move |r: Request<tonic::Streaming<Item>>| {
                        let s = seen(r.metadata());
                        handler(s, r.into_inner())
                    });
                    tonic::server::Grpc::new(ProstCodec::<Cart, Item>::default())
                        .streaming(svc, req)
                        .await
                }
                _ => unimplemented_response(),
            };
            Ok(response)
        })
    }
}

// ---- the orders service -----------------------------------------------

/// The service under test: PlaceOrder asks carts for the cart, through a
/// humus Client, and answers with a summary; a status from carts is
/// passed on.
#[derive(Clone)]
pub struct Orders {
    pub carts: Client,
}

impl tower_service::Service<http::Request<Body>> for Orders {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let carts = self.carts.clone();
        Box::pin(async move {
            if req.uri().path() != PLACE_ORDER.full_name {
                return Ok(unimplemented_response());
            }
            let svc = tower::service_fn(move |r: Request<OrderRequest>| {
                let carts = carts.clone();
                async move {
                    // The call to carts ends with the inbound call's deadline.
                    let mut out = Request::new(CartRequest {
                        id: r.get_ref().cart_id.clone(),
                    });
                    if let Some(t) = r.metadata().get("grpc-timeout") {
                        out.metadata_mut().insert("grpc-timeout", t.clone());
                    }
                    let cart: Response<Cart> = carts.unary(&GET_CART, out).await?;
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

// ---- running services on the testing Host -----------------------------

/// A server running on the testing host.
pub struct Running {
    addr: String,
    host: Host,
    task: Option<JoinHandle<()>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Running {
    /// Shuts the server down gracefully: it stops listening, sends every
    /// client a GOAWAY, and waits for the calls in flight.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap();
        }
    }

    /// Crashes the server: it stops listening and every open connection to
    /// it breaks.
    pub async fn crash(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
        self.host.cut(&self.addr);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Serves `svc` on `host` at `addr` over TLS with a certificate for
/// `cert_for` from `ca`, with tonic's server `builder`.
pub fn serve_tls<S>(
    host: &Host,
    ca: &Ca,
    addr: &str,
    cert_for: &str,
    builder: tonic::transport::Server,
    svc: S,
) -> Running
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
    let incoming = host.listen(addr).tls(ca.issue(cert_for).acceptor());
    spawn(host, addr, builder, svc, incoming)
}

/// Serves `svc` on `host` at `addr` over TLS with `config` (a server
/// config of the test's own: mutual TLS, another ALPN list).
pub fn serve_tls_config<S>(host: &Host, addr: &str, config: rustls::ServerConfig, svc: S) -> Running
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
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let incoming = host.listen(addr).tls(acceptor);
    spawn(
        host,
        addr,
        tonic::transport::Server::builder(),
        svc,
        incoming,
    )
}

/// Serves `svc` on `host` at `addr` in plain text.
pub fn serve_plain<S, RB>(host: &Host, addr: &str, svc: S) -> Running
where
    RB: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    RB::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S: tower_service::Service<
            http::Request<Body>,
            Response = http::Response<RB>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let incoming = host.listen(addr);
    spawn(
        host,
        addr,
        tonic::transport::Server::builder(),
        svc,
        incoming,
    )
}

fn spawn<S, RB, I, IO>(
    host: &Host,
    addr: &str,
    builder: tonic::transport::Server,
    svc: S,
    incoming: I,
) -> Running
where
    RB: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    RB::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S: tower_service::Service<
            http::Request<Body>,
            Response = http::Response<RB>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    I: Stream<Item = std::io::Result<IO>> + Send + 'static,
    IO: tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + tonic::transport::server::Connected
        + Unpin
        + Send
        + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        builder
            .serve_with_incoming_shutdown(svc, incoming, async move {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    Running {
        addr: addr.to_owned(),
        host: host.clone(),
        task: Some(task),
        shutdown: Some(tx),
    }
}

/// Serves carts on `host` at `carts:9090` over TLS with a certificate for
/// `carts`.
pub fn start_carts(host: &Host, ca: &Ca, carts: &Carts) -> Running {
    serve_tls(
        host,
        ca,
        "carts:9090",
        "carts",
        tonic::transport::Server::builder(),
        carts.clone(),
    )
}

/// The settings of a client of carts: `carts:9090`, trusting `ca`.
pub fn carts_settings(ca: &Ca) -> Settings {
    Settings {
        addr: "carts:9090".into(),
        tls: Some(Arc::new(ca.client_config())),
        ..Settings::default()
    }
}

/// A setup of `host`.
pub fn setup(host: &Host) -> Setup {
    Setup::new().with_host(host.clone())
}

/// A request for cart `id`.
pub fn get(id: &str) -> Request<CartRequest> {
    Request::new(CartRequest { id: id.to_owned() })
}

/// Lets every task run until none can make progress without time passing.
pub async fn settle() {
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
}

pub const SECOND: Duration = Duration::from_secs(1);

// ---- raw HTTP/2 servers (h2's, no gRPC) --------------------------------

/// A raw HTTP/2 server on `host` at `addr`, in plain text: h2's server,
/// with `answer` given the number of each request (1, 2, …, across
/// connections), its headers and its response handle, to answer as it likes (an HTTP
/// error page, a stream reset, a hand-made gRPC response). Stops when the
/// returned task is aborted or dropped with the test's runtime.
pub fn h2_server<F>(host: &Host, addr: &str, answer: F) -> JoinHandle<()>
where
    F: Fn(usize, &http::HeaderMap, h2::server::SendResponse<bytes::Bytes>) + Send + Sync + 'static,
{
    let mut listener = host.listen(addr);
    let answer = Arc::new(answer);
    let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    tokio::spawn(async move {
        loop {
            let conn = listener.accept().await;
            let (answer, n) = (answer.clone(), n.clone());
            tokio::spawn(async move {
                let Ok(mut h2) = h2::server::handshake(conn).await else {
                    return;
                };
                while let Some(Ok((request, respond))) = h2.accept().await {
                    let n = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    answer(n, request.headers(), respond);
                }
            });
        }
    })
}

/// Answers `respond` with an HTTP `status`, a `content-type` if given,
/// and `body`.
pub fn answer_http(
    mut respond: h2::server::SendResponse<bytes::Bytes>,
    status: u16,
    content_type: Option<&str>,
    body: &'static str,
) {
    let mut response = http::Response::builder().status(status);
    if let Some(ct) = content_type {
        response = response.header("content-type", ct);
    }
    let Ok(mut send) = respond.send_response(response.body(()).unwrap(), body.is_empty()) else {
        return;
    };
    if !body.is_empty() {
        let _ = send.send_data(bytes::Bytes::from_static(body.as_bytes()), true);
    }
}

/// Answers `respond` with a gRPC response of one `message`, status OK.
pub fn answer_grpc<M: prost::Message>(
    respond: h2::server::SendResponse<bytes::Bytes>,
    message: &M,
) {
    answer_grpc_frames(respond, [grpc_frame(&message.encode_to_vec())]);
}

/// A gRPC frame of `message`'s bytes, uncompressed.
pub fn grpc_frame(message: &[u8]) -> bytes::Bytes {
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.push(0);
    frame.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    frame.extend_from_slice(message);
    frame.into()
}

/// Answers `respond` with a gRPC response whose body is `chunks`, each a
/// DATA frame, then status OK.
pub fn answer_grpc_frames(
    mut respond: h2::server::SendResponse<bytes::Bytes>,
    chunks: impl IntoIterator<Item = bytes::Bytes>,
) {
    let response = http::Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
        .body(())
        .unwrap();
    let Ok(mut send) = respond.send_response(response, false) else {
        return;
    };
    for chunk in chunks {
        let _ = send.send_data(chunk, false);
    }
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let _ = send.send_trailers(trailers);
}

/// A breaker policy that never opens and records the counts it is shown,
/// which it is after every success or failure the breaker counts.
pub fn recording() -> (humus::circuit::Policy, Arc<Mutex<humus::circuit::Counts>>) {
    use humus::circuit::{Counts, Policy, State};
    let seen = Arc::new(Mutex::new(Counts::default()));
    let s = seen.clone();
    let policy = Policy::new(
        move |c: &Counts| {
            *s.lock().unwrap() = *c;
            false
        },
        |_: &Counts| State::Closed,
    );
    (policy, seen)
}

/// The successes and failures a [`recording`] policy was last shown.
pub fn counted(seen: &Arc<Mutex<humus::circuit::Counts>>) -> (i64, i64) {
    let c = *seen.lock().unwrap();
    (c.successes, c.failures)
}
