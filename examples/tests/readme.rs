//! The README's quick start, compiled and run.
//!
//! Every ```` ```rust ```` and ```` ```proto ```` block of `README.md` is a
//! part of a file compiled here: this one (the service), `examples/build.rs`
//! or `examples/proto/ledger/v1/ledger.proto`
//! ([`every_snippet_of_the_readme_is_compiled_here`]). A line `// ...` in a
//! snippet leaves lines out; the parts on either side of it appear in the
//! file in that order, each line for line (indentation and blank lines
//! aside). The service then runs end to end on the in-memory network
//! ([`the_quick_start_runs_end_to_end`]).

use std::pin::Pin;

use tonic::{Request, Response, Status};

/// The ledger's messages, tonic stubs and typed humus client.
pub mod ledger {
    include!(concat!(env!("OUT_DIR"), "/ledger.v1.rs"));
}
// ledger::ledger_server::LedgerServer      tonic's server stub
// ledger::ledger_client::LedgerClient      tonic's client stub
// ledger::ledger_humus::LedgerProtoClient  a typed humus client, with the .proto's policy
/// The wallet's own API: messages, tonic stubs, typed humus client.
pub mod wallet {
    include!(concat!(env!("OUT_DIR"), "/wallet.v1.rs"));
}

#[humus::client(service = crate::ledger::ledger_humus)] // the module included above
pub trait Ledger {
    /// A write race is over by the next attempt: retried, and counted
    /// for the ledger rather than against it.
    #[humus(classify(Aborted => (Retry, Success)))]
    fn transfer();
}
// `LedgerHumusClient`, generated beside the trait, is the typed client: the
// .proto's policy (Charge's never_retry) and the attribute's.

use ledger::{TransferRequest, WatchEntriesRequest};
use wallet::wallet_server::WalletServer;
use wallet::{SendRequest, SendResponse, StatementLine, StatementRequest};

/// The wallet's handlers.
#[derive(Debug)]
pub struct Wallet {
    ledger: LedgerHumusClient,
}

type Lines = Pin<Box<dyn tokio_stream::Stream<Item = Result<StatementLine, Status>> + Send>>;

#[tonic::async_trait]
impl wallet::wallet_server::Wallet for Wallet {
    async fn send(&self, request: Request<SendRequest>) -> Result<Response<SendResponse>, Status> {
        let pay = request.into_inner();
        // A typed call is a future of Result<tonic::Response<TransferResponse>, tonic::Status>:
        // retried, through the breaker, within this RPC's deadline, traced.
        let receipt = self
            .ledger
            .transfer(TransferRequest {
                request_id: pay.request_id,
                from: pay.from,
                to: pay.to,
                cents: pay.cents,
            })
            .await?
            .into_inner();
        Ok(Response::new(SendResponse {
            payment_id: receipt.transfer_id,
            balance: receipt.from_balance,
        }))
    }

    type StatementStream = Lines;

    async fn statement(
        &self,
        request: Request<StatementRequest>,
    ) -> Result<Response<Lines>, Status> {
        let account = request.into_inner().account;
        // A streaming call: its open is retried, never the stream once open.
        let mut entries = self
            .ledger
            .watch_entries(WatchEntriesRequest {
                account,
                follow: false,
            })
            .await?
            .into_inner(); // humus::grpc::client::Streaming<Entry>
        let mut lines = Vec::new();
        while let Some(entry) = entries.message().await? {
            lines.push(Ok(StatementLine {
                sequence: entry.sequence,
                cents: entry.cents,
                reference: entry.reference,
            }));
        }
        Ok(Response::new(Box::pin(tokio_stream::iter(lines))))
    }

    async fn top_up(
        &self,
        _: Request<wallet::TopUpRequest>,
    ) -> Result<Response<wallet::TopUpResponse>, Status> {
        Err(Status::unimplemented("not in the quick start"))
    }

    async fn get_balance(
        &self,
        _: Request<wallet::GetBalanceRequest>,
    ) -> Result<Response<wallet::GetBalanceResponse>, Status> {
        Err(Status::unimplemented("not in the quick start"))
    }

    async fn quote(
        &self,
        _: Request<wallet::QuoteRequest>,
    ) -> Result<Response<wallet::QuoteResponse>, Status> {
        Err(Status::unimplemented("not in the quick start"))
    }
}

/// The service's `main`, as the README shows it (a binary's `main`; here
/// only compiled, since it reads its settings from the environment and runs
/// until SIGTERM).
#[allow(dead_code)]
mod bin {
    use super::{LedgerHumusClient, Wallet, WalletServer};

    use humus::app::{self, Exit};
    use humus::grpc::client::Client;
    use humus::grpc::server::{Health, Server};

    #[tokio::main]
    async fn main() -> Exit {
        humus::App::new()
            .run(|setup| async move {
                // LEDGER_ADDR=ledger:50051 WALLET_ADDR=0.0.0.0:50051 WALLET_PLAINTEXT=true
                let (ledger, api) =
                    app::from_env(|env| (env.client("LEDGER_"), env.server("WALLET_")))?;
                let client = Client::new(&setup, ledger)?; // dials nothing yet
                let health = Health::new().readiness(client.connected());
                let wallet = Wallet {
                    ledger: LedgerHumusClient::new(client),
                };
                Ok(vec![
                    Server::new(&setup, api)?
                        .add_service(WalletServer::new(wallet))
                        .health(health),
                ])
            })
            .await
    }
}

/// The quick start's wallet and the examples' ledger on the in-memory
/// network, over TLS from a test CA: a payment through the typed client's
/// unary call, and a statement through its stream.
#[tokio::test]
async fn the_quick_start_runs_end_to_end() {
    use std::sync::Arc;

    use humus::grpc::{client, server};
    use humus::testing::{Ca, Host};

    let (ca, setup) = (Ca::new(), humus::Setup::new().with_host(Host::new()));
    let serve = |name: &str, addr: &str| server::Settings {
        addr: addr.into(),
        tls: Some(Arc::new(ca.issue(name).server_config())),
        ..server::Settings::default()
    };
    let dial = |addr: &str| client::Settings {
        addr: addr.into(),
        tls: Some(Arc::new(ca.client_config())),
        ..client::Settings::default()
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|s| *s).await;
    };

    let book = humus_examples::ledger::Ledger::new();
    let mut ledger_server = server::Server::new(&setup, serve("ledger", "ledger:50051"))
        .unwrap()
        .add_service(book.service());
    ledger_server.bind().await.unwrap();
    let ledger_serving = tokio::spawn(ledger_server.serve(until_stopped(stopped.clone())));

    let ledger = client::Client::new(&setup, dial("ledger:50051")).unwrap();
    let wallet = Wallet {
        ledger: LedgerHumusClient::new(ledger.clone()),
    };
    let mut wallet_server = server::Server::new(&setup, serve("wallet", "wallet:50052"))
        .unwrap()
        .add_service(WalletServer::new(wallet));
    wallet_server.bind().await.unwrap();
    let wallet_serving = tokio::spawn(wallet_server.serve(until_stopped(stopped.clone())));

    // Alice's account gets money, then pays Bob through the wallet.
    LedgerHumusClient::new(ledger)
        .charge(ledger::ChargeRequest {
            account: "alice".into(),
            cents: 500,
        })
        .await
        .unwrap();
    let caller = client::Client::new(&setup, dial("wallet:50052")).unwrap();
    let wallet = wallet::wallet_humus::WalletProtoClient::new(caller);
    let paid = wallet
        .send(SendRequest {
            request_id: "p-1".into(),
            from: "alice".into(),
            to: "bob".into(),
            cents: 200,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(paid.balance, 300);

    let mut lines = wallet
        .statement(StatementRequest {
            account: "alice".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut cents = Vec::new();
    while let Some(line) = lines.message().await.unwrap() {
        cents.push(line.cents);
    }
    assert_eq!(cents, [500, -200]);

    stop.send(true).unwrap();
    wallet_serving.await.unwrap().unwrap();
    ledger_serving.await.unwrap().unwrap();
}

/// The files a README snippet may come from.
const SOURCES: [(&str, &str); 3] = [
    ("examples/tests/readme.rs", include_str!("readme.rs")),
    ("examples/build.rs", include_str!("../build.rs")),
    (
        "examples/proto/ledger/v1/ledger.proto",
        include_str!("../proto/ledger/v1/ledger.proto"),
    ),
];

/// The fenced blocks of `markdown` in `language`: each block's lines.
fn blocks<'a>(markdown: &'a str, language: &str) -> Vec<Vec<&'a str>> {
    let (mut found, mut open) = (Vec::new(), None::<Vec<&str>>);
    for line in markdown.lines() {
        match open.as_mut() {
            None if line.trim_start().strip_prefix("```") == Some(language) => {
                open = Some(Vec::new())
            }
            None => {}
            Some(_) if line.trim_start().starts_with("```") => found.extend(open.take()),
            Some(block) => block.push(line),
        }
    }
    found
}

/// Whether `part`'s lines are lines of `source`, one after another
/// (indentation and blank lines aside), starting after line `from`; the
/// line after them if so.
fn find(source: &[&str], part: &[&str], from: usize) -> Option<usize> {
    let last = source.len().checked_sub(part.len())?;
    (from..=last)
        .find(|&start| &source[start..start + part.len()] == part)
        .map(|start| start + part.len())
}

fn trimmed(lines: &[&str]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn every_snippet_of_the_readme_is_compiled_here() {
    let readme = include_str!("../../README.md");
    let mut checked = 0;
    for language in ["rust", "proto"] {
        for block in blocks(readme, language) {
            let parts: Vec<Vec<String>> = block
                .split(|l| l.trim() == "// ...")
                .map(trimmed)
                .filter(|p| !p.is_empty())
                .collect();
            let holds = SOURCES.iter().any(|(_, source)| {
                let source: Vec<String> = trimmed(&source.lines().collect::<Vec<_>>());
                let source: Vec<&str> = source.iter().map(String::as_str).collect();
                let mut at = Some(0);
                for part in &parts {
                    let part: Vec<&str> = part.iter().map(String::as_str).collect();
                    at = at.and_then(|from| find(&source, &part, from));
                }
                at.is_some()
            });
            assert!(
                holds,
                "this README snippet is in none of {:?} as written:\n{}",
                SOURCES.map(|(name, _)| name),
                block.join("\n")
            );
            checked += 1;
        }
    }
    // build.rs, the .proto, the include, the attribute, the handlers, main.
    assert!(checked >= 6, "only {checked} snippets found in README.md");
}
