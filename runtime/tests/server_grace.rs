//! The end of a grace, seen by a stock tonic client (`tonic::transport::Channel`):
//! a call still in flight when a server's `shutdown_grace` (or its
//! connection's age grace) is over is answered `UNAVAILABLE`, trailers-only,
//! with a message that says why, before the connection closes, rather
//! than cut with the connection (which such a client reports as `Unknown`
//! "transport error", a code no client retries). Paused time on the
//! in-memory host, and one test in real time on 127.0.0.1, every wait
//! bounded.

mod client_support;

use std::sync::Arc;
use std::time::Duration;

use client_support::*;
use futures_util::StreamExt as _;
use humus::Host as _;
use humus::Setup;
use humus::grpc::server::{ServeError, Server, Settings};
use humus::testing::Host;
use hyper_util::rt::TokioIo;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Response, Status};
use tonic_prost::ProstCodec;

/// What a call cut by its server's stop is answered with.
const STOPPED: &str = "the server stopped before the call ended";

/// Carts whose GetCart never answers, and whose WatchCart sends one
/// update and then nothing.
fn endless_carts() -> Carts {
    let carts = Carts::new();
    carts.on_get_cart(|_, _| std::future::pending());
    carts.on_watch_cart(|_, req| async move {
        Ok(Response::new(
            futures_util::stream::iter([Ok(cart(&req.id, 1))])
                .chain(futures_util::stream::pending()),
        ))
    });
    carts
}

/// A humus server serving `carts` in a task, until `stop`.
struct Serving {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServeError>>,
}

/// A server of `carts` on `setup`, listening.
async fn bound(setup: &Setup, settings: Settings, carts: &Carts) -> Server {
    let mut server = Server::new(setup, settings)
        .unwrap()
        .add_service(CartsService(carts.clone()));
    server.bind().await.unwrap();
    server
}

impl Serving {
    fn start(server: Server) -> Serving {
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.serve(async move {
            let _ = stopped.await;
        }));
        Serving {
            stop: Some(stop),
            task,
        }
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A stock tonic channel to `carts:9090` on the in-memory `host`.
async fn channel_on(host: &Host) -> Channel {
    let host = host.clone();
    Endpoint::from_static("http://carts:9090")
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let host = host.clone();
            async move { host.dial("carts:9090").await.map(TokioIo::new) }
        }))
        .await
        .unwrap()
}

/// GetCart over a stock tonic client.
async fn get_cart(channel: Channel, id: &str) -> Result<Cart, Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    grpc.unary(
        Request::new(CartRequest { id: id.into() }),
        GET_CART.full_name.parse().unwrap(),
        ProstCodec::<CartRequest, Cart>::default(),
    )
    .await
    .map(Response::into_inner)
}

fn plain(grace: Duration) -> Settings {
    Settings {
        addr: "carts:9090".into(),
        shutdown_grace: grace,
        plaintext: true,
        ..Settings::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_unary_call_in_flight_at_the_end_of_the_grace_is_answered_unavailable() {
    let host = Host::new();
    let carts = endless_carts();
    let mut serving = Serving::start(bound(&setup(&host), plain(3 * SECOND), &carts).await);
    let channel = channel_on(&host).await;
    let call = tokio::spawn(get_cart(channel, "slow"));
    settle().await;
    assert_eq!(carts.arrivals(&GET_CART), 1);

    let started = Instant::now();
    serving.shutdown();
    let status = tokio::time::timeout(10 * SECOND, call)
        .await
        .expect("answered within the grace and its bound")
        .unwrap()
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(status.message(), STOPPED);
    let answered = started.elapsed();
    assert!(
        answered >= 3 * SECOND && answered <= 3 * SECOND + Duration::from_millis(100),
        "answered after {answered:?}"
    );
    // The server stopped within the grace and the bound on the answers.
    tokio::time::timeout(SECOND, serving.task)
        .await
        .expect("stopped after its grace")
        .unwrap()
        .unwrap();
    let took = started.elapsed();
    assert!(
        took <= 3 * SECOND + Duration::from_millis(100),
        "stopped after {took:?}"
    );
    assert_eq!(host.open_connections("carts:9090"), 0);
}

#[tokio::test(start_paused = true)]
async fn an_open_stream_ends_unavailable_at_the_goaway_and_a_unary_call_at_the_grace() {
    let host = Host::new();
    let carts = endless_carts();
    let mut serving = Serving::start(bound(&setup(&host), plain(5 * SECOND), &carts).await);
    let channel = channel_on(&host).await;

    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.unwrap();
    let mut stream = grpc
        .server_streaming(
            Request::new(CartRequest { id: "w".into() }),
            WATCH_CART.full_name.parse().unwrap(),
            ProstCodec::<CartRequest, Cart>::default(),
        )
        .await
        .unwrap()
        .into_inner();
    assert!(stream.message().await.unwrap().is_some());
    let call = tokio::spawn(get_cart(channel, "slow"));
    settle().await;

    let started = Instant::now();
    serving.shutdown();
    let status = tokio::time::timeout(SECOND, stream.message())
        .await
        .expect("the stream ends at the GOAWAY")
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(started.elapsed() < SECOND, "{:?}", started.elapsed());

    let status = tokio::time::timeout(10 * SECOND, call)
        .await
        .expect("answered at the grace")
        .unwrap()
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(status.message(), STOPPED);
    assert!(started.elapsed() >= 5 * SECOND, "{:?}", started.elapsed());
    tokio::time::timeout(SECOND, serving.task)
        .await
        .expect("stopped after its grace")
        .unwrap()
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_unary_call_outliving_its_connections_age_grace_is_answered_unavailable() {
    let host = Host::new();
    let carts = endless_carts();
    let settings = Settings {
        max_connection_age: Some(10 * SECOND),
        max_connection_age_grace: Some(5 * SECOND),
        ..plain(SECOND)
    };
    let mut serving = Serving::start(bound(&setup(&host), settings, &carts).await);
    let channel = channel_on(&host).await;
    let started = Instant::now();
    let call = tokio::spawn(get_cart(channel, "slow"));
    let status = tokio::time::timeout(30 * SECOND, call)
        .await
        .expect("answered after the age and its grace")
        .unwrap()
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("maximum age"),
        "{}",
        status.message()
    );
    // Its age is within 10 % of 10 s, then the grace of 5 s.
    let took = started.elapsed();
    assert!(
        took >= 14 * SECOND && took <= 16 * SECOND + Duration::from_millis(100),
        "answered after {took:?}"
    );
    serving.shutdown();
    tokio::time::timeout(5 * SECOND, serving.task)
        .await
        .expect("stopped")
        .unwrap()
        .unwrap();
}

/// Real time and real sockets: a stock tonic client on 127.0.0.1, a
/// handler that never answers, a grace of 200 ms.
#[tokio::test]
async fn on_loopback_a_stock_client_sees_unavailable_at_the_end_of_the_grace() {
    const BOUND: Duration = Duration::from_secs(10);
    let carts = endless_carts();
    let entered = Arc::new(Notify::new());
    carts.on_get_cart({
        let entered = Arc::clone(&entered);
        move |_, _| {
            entered.notify_one();
            std::future::pending()
        }
    });
    let settings = Settings {
        addr: "127.0.0.1:0".into(),
        shutdown_grace: Duration::from_millis(200),
        plaintext: true,
        ..Settings::default()
    };
    let server = bound(&Setup::new(), settings, &carts).await;
    let addr = server.local_addr().unwrap();
    let mut serving = Serving::start(server);
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(BOUND)
        .connect()
        .await
        .unwrap();
    let call = tokio::spawn(get_cart(channel, "slow"));
    tokio::time::timeout(BOUND, entered.notified())
        .await
        .expect("the handler runs");

    let started = std::time::Instant::now();
    serving.shutdown();
    let status = tokio::time::timeout(BOUND, call)
        .await
        .expect("the call ends")
        .unwrap()
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(status.message(), STOPPED);
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
    tokio::time::timeout(BOUND, serving.task)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();
}
