//! The wallet over real loopback TCP, beside a ledger, called with tonic's
//! own client: its answers, its readiness, and failure injection off.

use std::time::Duration;

use humus::app::Env;
use humus::fault::{self, Fault, Rule, Scenario, jsonscenario};
use humus::telemetry::{MetadataInjector, Telemetry};
use humus_examples::ledger::{self, Ledger};
use humus_examples::pb::wallet::v1 as pb;
use humus_examples::wallet::{self, Settings};
use opentelemetry::Context;
use opentelemetry::propagation::TextMapPropagator;
use pb::wallet_client::WalletClient;
use tokio::net::TcpListener;
use tonic::Code;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

struct Wallet {
    serving: wallet::Serving,
    client: WalletClient<Channel>,
    health: HealthClient<Channel>,
}

/// The gateway's secret, which the tests' trusted requests carry.
const TOKEN: &str = "the-gateways-own-secret";

async fn start_wallet(ledger_addr: std::net::SocketAddr, fault_injection: &str) -> Wallet {
    let settings = Settings::from_env(Env::from_pairs([
        (wallet::ENV_ADDR, "127.0.0.1:0".to_owned()),
        (wallet::ENV_LEDGER_ADDR, ledger_addr.to_string()),
        (wallet::ENV_LEDGER_TIMEOUT, "2s".to_owned()),
        (wallet::ENV_LEDGER_BACKOFF_BASE, "10ms".to_owned()),
        (wallet::ENV_LEDGER_BACKOFF_MAX, "50ms".to_owned()),
        (wallet::ENV_FAULT_INJECTION, fault_injection.to_owned()),
        (wallet::ENV_PLAINTEXT, "true".to_owned()),
        (wallet::ENV_SCENARIO_TOKEN, TOKEN.to_owned()),
    ]))
    .unwrap();
    let telemetry = Telemetry::builder()
        .propagator(wallet::propagator())
        .build();
    let serving = wallet::start(telemetry, &settings).await.unwrap();
    let channel = Channel::from_shared(format!("http://{}", serving.local_addr()))
        .unwrap()
        .connect_lazy();
    Wallet {
        serving,
        client: WalletClient::new(channel.clone()),
        health: HealthClient::new(channel),
    }
}

impl Wallet {
    async fn status(&mut self) -> ServingStatus {
        let status = self
            .health
            .check(HealthCheckRequest {
                service: "wallet.v1.Wallet".into(),
            })
            .await
            .unwrap()
            .into_inner()
            .status;
        ServingStatus::try_from(status).unwrap()
    }

    async fn ready_within(&mut self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < deadline {
            if self.status().await == ServingStatus::Serving {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    async fn stop(self) {
        // The App's shutdown runs the ledger client's on-stop hook, and
        // must exit 0.
        self.serving.stop().await.unwrap();
    }
}

fn send(id: &str, from: &str, to: &str, cents: i64) -> pb::SendRequest {
    pb::SendRequest {
        request_id: id.into(),
        from: from.into(),
        to: to.into(),
        cents,
    }
}

async fn start_ledger(book: &Ledger) -> ledger::Serving {
    ledger::serve(book, ledger::settings("127.0.0.1:0"))
        .await
        .unwrap()
}

#[tokio::test]
async fn the_wallet_answers_with_its_own_codes() {
    let book = Ledger::new();
    let ledger = start_ledger(&book).await;
    let mut wallet = start_wallet(ledger.local_addr(), "false").await;
    assert!(wallet.ready_within(Duration::from_secs(10)).await);

    let top_up = wallet
        .client
        .top_up(pb::TopUpRequest {
            account: "alice".into(),
            cents: 1000,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(top_up.balance, 1000);
    let paid = wallet
        .client
        .send(send("p1", "alice", "bob", 400))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(paid.balance, 600);

    let overdraft = wallet
        .client
        .send(send("p2", "alice", "bob", 601))
        .await
        .unwrap_err();
    assert_eq!(overdraft.code(), Code::FailedPrecondition, "{overdraft}");
    assert!(overdraft.message().contains("insufficient balance"));

    let bad = wallet
        .client
        .send(send("p3", "alice", "alice", 1))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument, "{bad}");
    assert_eq!(book.seen().transfers, 2, "the wallet checked p3 itself");

    let balance = wallet
        .client
        .get_balance(pb::GetBalanceRequest {
            account: "bob".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(balance.cents, 400);

    // The ledger stops: the wallet answers UNAVAILABLE, and stays ready.
    ledger.stop().await.unwrap();
    let down = wallet
        .client
        .send(send("p4", "alice", "bob", 1))
        .await
        .unwrap_err();
    assert_eq!(down.code(), Code::Unavailable, "{down}");
    assert!(down.message().contains("ledger"), "{down}");
    assert_eq!(wallet.status().await, ServingStatus::Serving);
    wallet.stop().await;
}

#[tokio::test]
async fn the_wallet_is_not_ready_while_its_ledger_client_has_never_connected() {
    // A port nothing listens on.
    let addr = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let mut wallet = start_wallet(addr, "false").await;
    for _ in 0..3 {
        assert_eq!(wallet.status().await, ServingStatus::NotServing);
        tokio::time::sleep(wallet::READINESS_INTERVAL).await;
    }
    let err = wallet
        .client
        .send(send("p1", "alice", "bob", 1))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    wallet.stop().await;
}

/// A context whose scenario aborts the ledger's `Transfer`.
fn aborting_transfers() -> Context {
    let codec = jsonscenario::Codec::new(wallet::SCENARIO_KEY).unwrap();
    let scenario = Scenario::new([Rule::new(
        "grpc:ledger.v1.Ledger/Transfer",
        Fault {
            delay: Duration::ZERO,
            abort: true,
        },
    )]);
    fault::with_scenario(&Context::new(), &codec, &scenario).unwrap()
}

/// A payment `id` with `cx`'s baggage, and the gateway's `token` when given.
fn with_scenario(cx: &Context, id: &str, token: Option<&str>) -> tonic::Request<pb::SendRequest> {
    let mut request = tonic::Request::new(send(id, "alice", "bob", 1));
    wallet::propagator().inject_context(cx, &mut MetadataInjector(request.metadata_mut()));
    if let Some(token) = token {
        request
            .metadata_mut()
            .insert(wallet::SCENARIO_TOKEN_HEADER, token.parse().unwrap());
    }
    request
}

#[tokio::test]
async fn a_scenario_does_nothing_while_fault_injection_is_off() {
    let book = Ledger::new();
    let ledger = start_ledger(&book).await;
    let mut off = start_wallet(ledger.local_addr(), "false").await;
    let mut on = start_wallet(ledger.local_addr(), "true").await;
    off.client
        .top_up(pb::TopUpRequest {
            account: "alice".into(),
            cents: 10,
        })
        .await
        .unwrap();

    let cx = aborting_transfers();
    let faulted = |id: &str| with_scenario(&cx, id, Some(TOKEN));

    off.client.send(faulted("off-1")).await.unwrap();
    assert_eq!(book.received("off-1"), 1);

    let err = on.client.send(faulted("on-1")).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    assert_eq!(book.received("on-1"), 0);

    off.stop().await;
    on.stop().await;
    ledger.stop().await.unwrap();
}

/// The wallet trusts a scenario by who sends it (the gateway's secret in
/// its header), not by where it connects from: every caller of this test
/// is on loopback, and only the one with the secret has its scenario kept.
#[tokio::test]
async fn the_wallet_trusts_a_scenario_by_the_gateways_secret_not_by_loopback() {
    let book = Ledger::new();
    let ledger = start_ledger(&book).await;
    let mut on = start_wallet(ledger.local_addr(), "true").await;
    on.client
        .top_up(pb::TopUpRequest {
            account: "alice".into(),
            cents: 10,
        })
        .await
        .unwrap();
    let cx = aborting_transfers();
    // On loopback, without the secret or with a wrong one: stripped.
    on.client
        .send(with_scenario(&cx, "plain-1", None))
        .await
        .unwrap();
    on.client
        .send(with_scenario(
            &cx,
            "wrong-1",
            Some("not-the-gateways-secret"),
        ))
        .await
        .unwrap();
    assert_eq!((book.received("plain-1"), book.received("wrong-1")), (1, 1));
    // With it: carried out.
    let err = on
        .client
        .send(with_scenario(&cx, "vouched-1", Some(TOKEN)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    assert_eq!(book.received("vouched-1"), 0);
    on.stop().await;
    ledger.stop().await.unwrap();
}
