//! What the benchmarks share: the dependency they call, an in-process tonic
//! server of `grpc.testing.TestService` on loopback TCP, and the clients of
//! it (tonic's generated client over a raw `Channel`, and humus's typed
//! client), and the order in which the interleaved benches' peers take
//! their turns ([`turns::Turns`]).

#![allow(dead_code, unreachable_pub)]

pub mod turns;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use humus::grpc::client::{Client, Settings};
use humus_tests::grpc_proto::grpc::testing::test_service_server::{TestService, TestServiceServer};
use humus_tests::grpc_proto::grpc::testing::{
    Empty, SimpleRequest, SimpleResponse, StreamingInputCallRequest, StreamingInputCallResponse,
    StreamingOutputCallRequest, StreamingOutputCallResponse, test_service_client,
    test_service_humus,
};
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Response, Status};

/// tonic's generated client over a raw `Channel`.
pub type TonicClient = test_service_client::TestServiceClient<tonic::transport::Channel>;
/// humus's typed client.
pub type HumusClient = test_service_humus::TestServiceProtoClient;
/// tonic's generated client over a humus Client's channel.
pub type ChannelClient = test_service_client::TestServiceClient<humus::grpc::client::Channel>;

/// How the dependency answers every unary call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// OK, with an empty response.
    Ok,
    /// `Unavailable`.
    Unavailable,
    /// `UnaryCall` is never answered: it is held until the client gives up.
    /// `EmptyCall` answers OK (a client connects with it).
    Hold,
}

/// The dependency: answers as told, and counts what it sees.
#[derive(Debug)]
pub struct Dependency {
    answer: Answer,
    /// Attempts per `(x-test-id, x-call)`, for requests that carry them.
    attempts: Mutex<HashMap<(String, u32), u32>>,
    /// Calls held so far ([`Answer::Hold`]).
    held: AtomicUsize,
}

impl Dependency {
    pub fn new(answer: Answer) -> Arc<Dependency> {
        Arc::new(Dependency {
            answer,
            attempts: Mutex::new(HashMap::new()),
            held: AtomicUsize::new(0),
        })
    }

    /// The attempts the server saw of each call of `test_id`, by call index
    /// (0 for a call it never saw), for `calls` calls.
    pub fn attempts(&self, test_id: &str, calls: u32) -> Vec<u32> {
        let attempts = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
        (0..calls)
            .map(|call| {
                attempts
                    .get(&(test_id.to_owned(), call))
                    .copied()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// Calls held so far.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    async fn answer<T: Default>(
        &self,
        request: &Request<impl Sized>,
        hold: bool,
    ) -> Result<Response<T>, Status> {
        let metadata = request.metadata();
        if let (Some(id), Some(call)) = (metadata.get("x-test-id"), metadata.get("x-call")) {
            let id = id.to_str().unwrap_or_default().to_owned();
            let call = call
                .to_str()
                .ok()
                .and_then(|c| c.parse().ok())
                .unwrap_or(u32::MAX);
            *self
                .attempts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry((id, call))
                .or_default() += 1;
        }
        match self.answer {
            Answer::Ok => Ok(Response::new(T::default())),
            Answer::Unavailable => Err(Status::unavailable("the dependency is down")),
            Answer::Hold if !hold => Ok(Response::new(T::default())),
            Answer::Hold => {
                self.held.fetch_add(1, Ordering::SeqCst);
                std::future::pending().await
            }
        }
    }
}

/// The tonic service of a shared [`Dependency`].
pub struct Service(pub Arc<Dependency>);

#[tonic::async_trait]
impl TestService for Service {
    async fn empty_call(&self, request: Request<Empty>) -> Result<Response<Empty>, Status> {
        self.0.answer(&request, false).await
    }

    async fn unary_call(
        &self,
        request: Request<SimpleRequest>,
    ) -> Result<Response<SimpleResponse>, Status> {
        self.0.answer(&request, true).await
    }

    async fn cacheable_unary_call(
        &self,
        request: Request<SimpleRequest>,
    ) -> Result<Response<SimpleResponse>, Status> {
        self.0.answer(&request, true).await
    }

    type StreamingOutputCallStream =
        futures_util::stream::Empty<Result<StreamingOutputCallResponse, Status>>;

    async fn streaming_output_call(
        &self,
        _request: Request<StreamingOutputCallRequest>,
    ) -> Result<Response<Self::StreamingOutputCallStream>, Status> {
        Err(Status::unimplemented("not in the benchmarks"))
    }

    async fn streaming_input_call(
        &self,
        _request: Request<tonic::Streaming<StreamingInputCallRequest>>,
    ) -> Result<Response<StreamingInputCallResponse>, Status> {
        Err(Status::unimplemented("not in the benchmarks"))
    }

    type FullDuplexCallStream =
        futures_util::stream::Empty<Result<StreamingOutputCallResponse, Status>>;

    async fn full_duplex_call(
        &self,
        _request: Request<tonic::Streaming<StreamingOutputCallRequest>>,
    ) -> Result<Response<Self::FullDuplexCallStream>, Status> {
        Err(Status::unimplemented("not in the benchmarks"))
    }

    type HalfDuplexCallStream =
        futures_util::stream::Empty<Result<StreamingOutputCallResponse, Status>>;

    async fn half_duplex_call(
        &self,
        _request: Request<tonic::Streaming<StreamingOutputCallRequest>>,
    ) -> Result<Response<Self::HalfDuplexCallStream>, Status> {
        Err(Status::unimplemented("not in the benchmarks"))
    }

    async fn unimplemented_call(
        &self,
        _request: Request<Empty>,
    ) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("not implemented"))
    }
}

/// A multi-threaded tokio runtime with `workers` worker threads, time and
/// I/O enabled: what every bench runs its clients (and, in-process, the
/// dependency) on.
pub fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Serves `dependency` on a free loopback port, on the current runtime;
/// returns its address. Up to 20,000 streams at once per connection.
pub async fn serve(dependency: Arc<Dependency>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("a bound address");
    let incoming = TcpListenerStream::new(listener).map(|conn| {
        conn.inspect(|stream| {
            let _ = stream.set_nodelay(true);
        })
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .max_concurrent_streams(20_000)
            .add_service(TestServiceServer::new(Service(dependency)))
            .serve_with_incoming(incoming),
    );
    addr
}

/// The generated tonic server of `dependency`, for a server of the bench's
/// own (the server bench's tonic and humus servers).
pub fn test_service(dependency: Arc<Dependency>) -> TestServiceServer<Service> {
    TestServiceServer::new(Service(dependency))
}

/// tonic's generated client over a raw, lazily connected `Channel` to `addr`.
pub fn tonic_client(addr: SocketAddr) -> TonicClient {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("a valid URI")
        .connect_lazy();
    TonicClient::new(channel)
}

/// The control of the overhead benches: tonic's generated client over a
/// `Channel` to `addr` built by `Endpoint::connect_with_connector_lazy`
/// with hyper-util's `HttpConnector`, set as tonic's `connect_lazy` sets it
/// (so the same code as [`tonic_client`]'s, in a second monomorphised
/// copy: how far it measures from `tonic` is the noise of the run, and in
/// one process the price of a second copy of hyper's code).
pub fn tonic_generic_client(addr: SocketAddr) -> TonicClient {
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("a valid URI")
        .connect_with_connector_lazy(http);
    TonicClient::new(channel)
}

/// humus's typed client of `addr` with `settings` (the defaults but the
/// address otherwise), with a new `Setup`: no-op telemetry, injection off.
pub fn humus_client(addr: SocketAddr, settings: Settings) -> HumusClient {
    let settings = Settings {
        addr: addr.to_string(),
        ..settings
    };
    HumusClient::new(Client::new(&humus::Setup::new(), settings).expect("valid settings"))
}

/// tonic's generated client over the channel of a humus client of `addr`
/// (default settings, a new `Setup`), which knows TestService's methods.
pub fn channel_client(addr: SocketAddr) -> ChannelClient {
    let settings = Settings {
        addr: addr.to_string(),
        ..Settings::default()
    };
    let client = Client::new(&humus::Setup::new(), settings).expect("valid settings");
    let methods = humus::grpc::client::Methods::new(&[HumusClient::METHODS]).expect("one list");
    test_service_client::TestServiceClient::new(client.channel().with_methods(methods))
}

/// The clients the overhead benches compare, by name; ratios are to the
/// first.
pub const PEERS: [&str; 5] = [
    "tonic",
    "tonic+deadline",
    "humus",
    "tonic-generic",
    "tonic over humus",
];

/// The clients `overhead_interleaved -- layers` compares: humus with no
/// per-attempt layer, with one no-op tonic interceptor, and with one
/// identity tower layer; ratios are to tonic.
pub const LAYER_PEERS: [&str; 4] = ["tonic", "humus", "humus+interceptor", "humus+layer"];

/// One of the overhead benches' clients of the dependency.
#[derive(Clone)]
pub enum Peer {
    /// tonic's client over `connect_lazy` ([`tonic_client`]).
    Tonic(TonicClient),
    /// The same, with a 10 s deadline per request (`Request::set_timeout`).
    Deadline(TonicClient),
    /// humus's typed client, default settings ([`humus_client`]); or
    /// with one trivial per-attempt layer ([`LAYER_PEERS`]).
    Humus(HumusClient),
    /// The control, [`tonic_generic_client`].
    Generic(TonicClient),
    /// tonic's client over a humus client's channel ([`channel_client`]).
    Channel(ChannelClient),
}

impl Peer {
    /// The client named `name` (one of [`PEERS`]) of `addr`; `None` for
    /// another name.
    pub fn new(name: &str, addr: SocketAddr) -> Option<Peer> {
        Some(match name {
            "tonic" => Peer::Tonic(tonic_client(addr)),
            "tonic+deadline" => Peer::Deadline(tonic_client(addr)),
            "humus" => Peer::Humus(humus_client(addr, Settings::default())),
            "humus+interceptor" => Peer::Humus(humus_client(
                addr,
                Settings::default().interceptor(Ok::<Request<()>, tonic::Status>),
            )),
            "humus+layer" => Peer::Humus(humus_client(
                addr,
                Settings::default().layer(tower_layer::Identity::new()),
            )),
            "tonic-generic" => Peer::Generic(tonic_generic_client(addr)),
            "tonic over humus" => Peer::Channel(channel_client(addr)),
            _ => return None,
        })
    }

    /// One unary call; panics if it fails (a broken bench prints nothing).
    pub async fn call(&self) {
        match self {
            Peer::Tonic(tonic) | Peer::Generic(tonic) => {
                let mut tonic = tonic.clone();
                tonic
                    .unary_call(SimpleRequest::default())
                    .await
                    .expect("OK");
            }
            Peer::Deadline(tonic) => {
                let mut tonic = tonic.clone();
                let mut request = Request::new(SimpleRequest::default());
                request.set_timeout(Duration::from_secs(10));
                tonic.unary_call(request).await.expect("OK");
            }
            Peer::Channel(channel) => {
                let mut channel = channel.clone();
                channel
                    .unary_call(SimpleRequest::default())
                    .await
                    .expect("OK");
            }
            Peer::Humus(humus) => {
                humus
                    .unary_call(SimpleRequest::default())
                    .await
                    .expect("OK");
            }
        }
    }
}

/// The process's CPU time (user and system), in seconds.
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("Linux /proc");
    // The fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("a command") + 2..]
        .split(' ')
        .collect();
    let ticks = |i: usize| fields[i].parse::<f64>().expect("a number");
    // utime and stime, in clock ticks of 1/100 s (Linux's USER_HZ).
    (ticks(11) + ticks(12)) / 100.0
}

/// Prints the overhead benches' table, one row per client of `names`:
/// the median latency of one call at a time, the median time of a batch
/// of `concurrency` calls and the throughput it gives, and the CPU time per
/// call (µs), each with its ratio to the first client.
pub fn print_overhead(
    names: &[&str],
    single: &[Duration],
    batch: &[Duration],
    cpu_per_call: &[f64],
    concurrency: usize,
) {
    println!(
        "| client | median latency, 1 at a time | ratio | median time of {concurrency} at once | throughput, calls/s | ratio | CPU per call (client + server) | ratio |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let throughput = |k: usize| concurrency as f64 / batch[k].as_secs_f64();
    for (k, name) in names.iter().enumerate() {
        println!(
            "| {name} | {:.1} µs | {:.3} | {:.0} µs | {:.0} | {:.3} | {:.1} µs | {:.3} |",
            single[k].as_secs_f64() * 1e6,
            single[k].as_secs_f64() / single[0].as_secs_f64(),
            batch[k].as_secs_f64() * 1e6,
            throughput(k),
            throughput(k) / throughput(0),
            cpu_per_call[k],
            cpu_per_call[k] / cpu_per_call[0],
        );
    }
}
