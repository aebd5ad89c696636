//! The ledger service (`ledger.v1.Ledger`): the wallet's dependency.
//!
//! An in-memory book of accounts, with what the walkthrough needs to show
//! a caller's resilience: transfers deduplicated by request id (so a retry
//! never moves money twice), and knobs that make the ledger misbehave on
//! purpose ([`Ledger::race_next_transfers`], [`Ledger::lose_next_replies`],
//! [`Ledger::set_charge_unavailable`], [`Ledger::set_transfers_unavailable`]).
//! It is served on a humus server ([`server()`]) as an App ([`serve`]). A
//! stopped ledger is its App stopped
//! ([`Serving::stop`](crate::running::Running::stop)), and serving it again
//! on the same address, with the same book, brings it back; a ledger that
//! listens but fails every payment is [`Ledger::set_transfers_unavailable`];
//! a rollout is
//! another ledger taking over the listening [`Socket`], then the first
//! one's graceful shutdown.
//!
//! The ledger also counts what reached it ([`Ledger::seen`]): the
//! dependency's own view, against which the walkthrough checks what its
//! client says it sent.

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::Stream;
use humus::app::{Env, Error};
use humus::grpc::server::{self, Health, Server};
use humus::{App, Setup};
use tokio::sync::{broadcast, mpsc};
use tonic::{Request, Response, Status};

use crate::pb::ledger::v1 as pb;
use pb::ledger_server::LedgerServer;

/// The prefix of the standalone ledger's server settings: every field of
/// [`server::Settings`](../../humus/grpc/server/struct.Settings.html),
/// read with [`Env::server`](../../humus/app/struct.Env.html#method.server)
/// ([`env()`]).
pub const PREFIX: &str = "LEDGER_";

/// `LEDGER_ADDR`: the address the standalone ledger listens on, the
/// server's `addr` (`host:port`; default [`DEFAULT_ADDR`]). The wallet
/// dials the same variable.
pub const ENV_ADDR: &str = "LEDGER_ADDR";

/// `LEDGER_PLAINTEXT`: the server's `plaintext`, `true` by default in the
/// standalone ledger ([`env()`]), which has no certificate: it runs on
/// loopback, or where a mesh sidecar terminates TLS.
pub const ENV_PLAINTEXT: &str = "LEDGER_PLAINTEXT";

/// The standalone ledger's listening address when [`ENV_ADDR`] is not
/// set.
pub const DEFAULT_ADDR: &str = "127.0.0.1:50051";

/// The standalone ledger's environment: the process's, over
/// [`ENV_ADDR`]`=`[`DEFAULT_ADDR`] and [`ENV_PLAINTEXT`]`=true`.
pub fn env() -> Env {
    over_defaults(&Env::process())
}

/// `env`'s variables over the standalone ledger's defaults.
fn over_defaults(env: &Env) -> Env {
    Env::from_pairs(
        [(ENV_ADDR, DEFAULT_ADDR), (ENV_PLAINTEXT, "true")]
            .into_iter()
            .chain(env.iter()),
    )
}

/// The ledger's book and knobs: cheap to clone, every clone the same
/// ledger, safe to use from many tasks at once.
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    book: Mutex<Book>,
    race_next: AtomicU32,
    lose_next: AtomicU32,
    charge_unavailable: AtomicBool,
    transfers_unavailable: AtomicBool,
    recorded: broadcast::Sender<pb::Entry>,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            book: Mutex::default(),
            race_next: AtomicU32::new(0),
            lose_next: AtomicU32::new(0),
            charge_unavailable: AtomicBool::new(false),
            transfers_unavailable: AtomicBool::new(false),
            recorded: broadcast::channel(1024).0,
        }
    }
}

#[derive(Debug, Default)]
struct Book {
    balances: HashMap<String, i64>,
    entries: Vec<pb::Entry>,
    /// Every applied transfer's receipt, by request id.
    transfers: HashMap<String, pb::TransferResponse>,
    /// Request ids a write race already aborted once.
    raced: HashSet<String>,
    /// How many times each transfer's request id reached the ledger.
    received: HashMap<String, u32>,
    charges: u64,
    seen: Seen,
}

/// What reached the ledger: one count per RPC that reached a handler,
/// whatever it answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// `Transfer` requests, retries included.
    pub transfers: u64,
    /// `Transfer` requests answered with the receipt of an earlier attempt
    /// of the same request id (deduplicated, not applied again).
    pub replays: u64,
    /// `Charge` requests.
    pub charges: u64,
    /// `Balance` requests.
    pub balances: u64,
    /// `WatchEntries` streams opened.
    pub watches: u64,
}

impl Ledger {
    /// An empty ledger: every account holds zero, every knob is off.
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// Makes the next `n` transfers whose request id the ledger has not
    /// seen lose a write race: each is answered `ABORTED` once, unapplied,
    /// and succeeds when it is sent again.
    pub fn race_next_transfers(&self, n: u32) {
        self.inner.race_next.store(n, Ordering::SeqCst);
    }

    /// Makes the next `n` transfers that the ledger applies lose their
    /// reply: each is applied and answered `UNAVAILABLE`, as when the
    /// connection breaks after the request reached the ledger. Sent again
    /// with the same request id, it is answered with its receipt and not
    /// applied twice.
    pub fn lose_next_replies(&self, n: u32) {
        self.inner.lose_next.store(n, Ordering::SeqCst);
    }

    /// While on, every `Charge` is answered `UNAVAILABLE` (the card
    /// processor is down), and nothing is charged.
    pub fn set_charge_unavailable(&self, on: bool) {
        self.inner.charge_unavailable.store(on, Ordering::SeqCst);
    }

    /// While on, every `Transfer` is answered `UNAVAILABLE` (the ledger's
    /// database is down), and nothing is applied; the transfer still counts
    /// as having reached the ledger ([`Seen::transfers`]).
    pub fn set_transfers_unavailable(&self, on: bool) {
        self.inner.transfers_unavailable.store(on, Ordering::SeqCst);
    }

    /// What has reached the ledger so far.
    pub fn seen(&self) -> Seen {
        self.book().seen
    }

    /// How many times a transfer with `request_id` reached the ledger.
    pub fn received(&self, request_id: &str) -> u32 {
        self.book().received.get(request_id).copied().unwrap_or(0)
    }

    /// `account`'s balance, in cents.
    pub fn balance(&self, account: &str) -> i64 {
        self.book().balances.get(account).copied().unwrap_or(0)
    }

    /// How many transfers the ledger has applied (each request id once).
    pub fn applied_transfers(&self) -> usize {
        self.book().transfers.len()
    }

    /// The tonic service of this ledger. Its `WatchEntries` streams end
    /// when their caller cancels; served by a humus server, also with
    /// `UNAVAILABLE` at the server's shutdown.
    pub fn service(&self) -> LedgerServer<Service> {
        LedgerServer::new(Service {
            ledger: self.clone(),
        })
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        // A panic while the book was held is a bug of this module; the
        // book's invariants hold between statements, so keep going.
        self.inner
            .book
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn transfer(&self, req: pb::TransferRequest) -> Result<pb::TransferResponse, Status> {
        let mut book = self.book();
        book.seen.transfers += 1;
        *book.received.entry(req.request_id.clone()).or_default() += 1;
        if self.inner.transfers_unavailable.load(Ordering::SeqCst) {
            return Err(Status::unavailable("the ledger's database is unavailable"));
        }
        if req.request_id.is_empty() {
            return Err(Status::invalid_argument("request_id: must not be empty"));
        }
        if let Some(receipt) = book.transfers.get(&req.request_id).cloned() {
            book.seen.replays += 1;
            return Ok(receipt);
        }
        if req.from.is_empty() || req.to.is_empty() {
            return Err(Status::invalid_argument("from, to: must not be empty"));
        }
        if req.from == req.to {
            return Err(Status::invalid_argument("to: must differ from from"));
        }
        if req.cents <= 0 {
            return Err(Status::invalid_argument(format!(
                "cents: must be more than zero, got {}",
                req.cents
            )));
        }
        if !book.raced.contains(&req.request_id) && take_one(&self.inner.race_next) {
            book.raced.insert(req.request_id.clone());
            return Err(Status::aborted(format!(
                "write race on account {:?}: try again",
                req.from
            )));
        }
        let held = book.balances.get(&req.from).copied().unwrap_or(0);
        if held < req.cents {
            return Err(Status::failed_precondition(format!(
                "insufficient balance: account {:?} holds {held} cents, the transfer needs {}",
                req.from, req.cents
            )));
        }
        let transfer_id = format!("t{}", book.transfers.len() + 1);
        let reference = format!("transfer {transfer_id}");
        let from_balance = held - req.cents;
        book.balances.insert(req.from.clone(), from_balance);
        *book.balances.entry(req.to.clone()).or_default() += req.cents;
        let receipt = pb::TransferResponse {
            transfer_id,
            from_balance,
        };
        book.transfers.insert(req.request_id, receipt.clone());
        self.record(&mut book, &req.from, -req.cents, &reference);
        self.record(&mut book, &req.to, req.cents, &reference);
        if take_one(&self.inner.lose_next) {
            return Err(Status::unavailable(
                "the connection broke before the reply was sent",
            ));
        }
        Ok(receipt)
    }

    fn charge(&self, req: pb::ChargeRequest) -> Result<pb::ChargeResponse, Status> {
        let mut book = self.book();
        book.seen.charges += 1;
        if req.account.is_empty() {
            return Err(Status::invalid_argument("account: must not be empty"));
        }
        if req.cents <= 0 {
            return Err(Status::invalid_argument(format!(
                "cents: must be more than zero, got {}",
                req.cents
            )));
        }
        if self.inner.charge_unavailable.load(Ordering::SeqCst) {
            return Err(Status::unavailable("the card processor is unavailable"));
        }
        book.charges += 1;
        let charge_id = format!("c{}", book.charges);
        let balance = {
            let held = book.balances.entry(req.account.clone()).or_default();
            *held += req.cents;
            *held
        };
        self.record(
            &mut book,
            &req.account,
            req.cents,
            &format!("charge {charge_id}"),
        );
        Ok(pb::ChargeResponse { charge_id, balance })
    }

    fn record(&self, book: &mut Book, account: &str, cents: i64, reference: &str) {
        let entry = pb::Entry {
            sequence: book.entries.len() as u64 + 1,
            account: account.to_owned(),
            cents,
            reference: reference.to_owned(),
        };
        book.entries.push(entry.clone());
        // No watcher is not an error.
        let _ = self.inner.recorded.send(entry);
    }
}

/// Takes one from a knob's count, if any is left.
fn take_one(count: &AtomicU32) -> bool {
    count
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

/// The `ledger.v1.Ledger` handlers over a [`Ledger`].
#[derive(Clone, Debug)]
pub struct Service {
    ledger: Ledger,
}

type EntryStream = Pin<Box<dyn Stream<Item = Result<pb::Entry, Status>> + Send>>;

#[tonic::async_trait]
impl pb::ledger_server::Ledger for Service {
    async fn transfer(
        &self,
        request: Request<pb::TransferRequest>,
    ) -> Result<Response<pb::TransferResponse>, Status> {
        self.ledger
            .transfer(request.into_inner())
            .map(Response::new)
    }

    async fn charge(
        &self,
        request: Request<pb::ChargeRequest>,
    ) -> Result<Response<pb::ChargeResponse>, Status> {
        self.ledger.charge(request.into_inner()).map(Response::new)
    }

    async fn balance(
        &self,
        request: Request<pb::BalanceRequest>,
    ) -> Result<Response<pb::BalanceResponse>, Status> {
        let account = request.into_inner().account;
        let mut book = self.ledger.book();
        book.seen.balances += 1;
        let cents = book.balances.get(&account).copied().unwrap_or(0);
        Ok(Response::new(pb::BalanceResponse { cents }))
    }

    type WatchEntriesStream = EntryStream;

    async fn watch_entries(
        &self,
        request: Request<pb::WatchEntriesRequest>,
    ) -> Result<Response<EntryStream>, Status> {
        let pb::WatchEntriesRequest { account, follow } = request.into_inner();
        let (past, mut recorded) = {
            let mut book = self.ledger.book();
            book.seen.watches += 1;
            let past: Vec<pb::Entry> = book
                .entries
                .iter()
                .filter(|e| e.account == account)
                .cloned()
                .collect();
            // Subscribed under the book's lock: no entry falls between.
            (past, self.ledger.inner.recorded.subscribe())
        };
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            for entry in past {
                if tx.send(Ok(entry)).await.is_err() {
                    return;
                }
            }
            if !follow {
                return;
            }
            loop {
                tokio::select! {
                    got = recorded.recv() => match got {
                        Ok(entry) if entry.account == account => {
                            if tx.send(Ok(entry)).await.is_err() {
                                return;
                            }
                        }
                        Ok(_) => {}
                        Err(broadcast::error::RecvError::Lagged(n)) => {
                            let _ = tx
                                .send(Err(Status::data_loss(format!(
                                    "the watch fell {n} entries behind"
                                ))))
                                .await;
                            return;
                        }
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                    () = tx.closed() => return,
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}

/// A ledger running as an App, until [`stop`](crate::running::Running::stop).
pub type Serving = crate::running::Running;

/// Settings of a ledger server listening on `addr` in plain-text HTTP/2
/// (said: the ledger of these examples runs on loopback, or where a mesh
/// sidecar terminates TLS), with the server's defaults otherwise.
pub fn settings(addr: impl Into<String>) -> server::Settings {
    server::Settings {
        addr: addr.into(),
        plaintext: true,
        ..server::Settings::default()
    }
}

/// The ledger's humus server on `setup`: `ledger.v1.Ledger` over `ledger`,
/// and `grpc.health.v1`. A graceful shutdown sends its connections a
/// GOAWAY, then ends the open `WatchEntries` streams with `UNAVAILABLE`,
/// and lets the calls in flight finish.
///
/// # Errors
///
/// [`humus::app::Error`](../../humus/app/struct.Error.html) when the server refuses `settings`.
pub fn server(
    setup: &Setup,
    settings: server::Settings,
    ledger: &Ledger,
) -> Result<Server, humus::app::Error> {
    Ok(Server::new(setup, settings)?
        .add_service(ledger.service())
        .health(Health::new()))
}

/// A listening socket that ledgers hand over to one another, as a
/// supervisor (systemd's socket activation) passes one from a process to
/// the next: each ledger served on it ([`serve_on`]) listens on a
/// descriptor of its own of the one socket, so a new ledger takes the
/// address while the old one still holds it, and a dial made while the old
/// one shuts down waits in the socket's backlog for the new one instead of
/// being refused. Dropping the last clone, and stopping every ledger served
/// on it, closes the socket: dials are refused again.
#[derive(Clone, Debug)]
pub struct Socket(Arc<std::net::TcpListener>);

impl Socket {
    /// Listens on `addr`.
    ///
    /// # Errors
    ///
    /// The bind's error ([`std::io::ErrorKind::AddrInUse`] when the address
    /// is taken).
    pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<Socket> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Socket(Arc::new(listener)))
    }

    /// The address it listens on.
    ///
    /// # Errors
    ///
    /// The system's error reading the socket's address.
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.0.local_addr()
    }
}

/// The [`Host`](humus::Host) of a ledger served on a [`Socket`]: it listens
/// on a new descriptor of the socket (while the socket is open), and dials
/// and reads files as the operating system's.
#[derive(Debug)]
struct OnSocket(std::sync::Weak<std::net::TcpListener>);

impl humus::Host for OnSocket {
    fn dial<'a>(&'a self, addr: &'a str) -> humus::DialFuture<'a> {
        humus::OsHost.dial(addr)
    }

    fn read_file(&self, path: &std::path::Path) -> std::io::Result<Vec<u8>> {
        humus::OsHost.read_file(path)
    }

    fn listen<'a>(&'a self, addr: &'a str) -> humus::ListenFuture<'a> {
        Box::pin(async move {
            let socket = self.0.upgrade().ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    format!("the socket of {addr} is closed"),
                )
            })?;
            let listener = tokio::net::TcpListener::from_std(socket.try_clone()?)?;
            Ok(humus::Listener::tcp(listener))
        })
    }
}

/// Runs `ledger` as an App in a task of its own, serving on `socket` (its
/// address is `settings.addr`'s), and returns once it listens: at once,
/// since the socket already does, even while another ledger serves on it.
///
/// # Errors
///
/// [`humus::app::Error`](../../humus/app/struct.Error.html) when it cannot start (the socket is closed).
pub async fn serve_on(
    ledger: &Ledger,
    settings: server::Settings,
    socket: &Socket,
) -> Result<Serving, Error> {
    let ledger = ledger.clone();
    let app = App::new().host(OnSocket(Arc::downgrade(&socket.0)));
    crate::running::start(app, move |setup| async move {
        server(&setup, settings, &ledger)
    })
    .await
}

/// Runs `ledger` as an App in a task of its own, serving on
/// `settings.addr`, and returns once it listens.
///
/// # Errors
///
/// [`humus::app::Error`](../../humus/app/struct.Error.html) when it cannot start (its address is taken).
pub async fn serve(ledger: &Ledger, settings: server::Settings) -> Result<Serving, Error> {
    let ledger = ledger.clone();
    crate::running::start(App::new(), move |setup| async move {
        server(&setup, settings, &ledger)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standalone_ledger_reads_its_server_over_its_defaults() {
        let settings = over_defaults(&Env::default())
            .read_all(|env| env.server(PREFIX))
            .unwrap();
        assert_eq!(settings.addr, DEFAULT_ADDR);
        assert!(settings.plaintext);

        let settings = over_defaults(&Env::from_pairs([
            (ENV_ADDR, "127.0.0.1:0"),
            ("LEDGER_SHUTDOWN_GRACE", "2s"),
        ]))
        .read_all(|env| env.server(PREFIX))
        .unwrap();
        assert_eq!(settings.addr, "127.0.0.1:0");
        assert_eq!(settings.shutdown_grace, std::time::Duration::from_secs(2));

        let err = over_defaults(&Env::from_pairs([
            (ENV_ADDR, "ledger"),
            (ENV_PLAINTEXT, "yes"),
            ("LEDGER_LISTEN_ADDR", "127.0.0.1:1"),
        ]))
        .read_all(|env| env.server(PREFIX))
        .unwrap_err();
        assert_eq!(err.exit_code(), 78);
        let err = err.to_string();
        for var in [
            "LEDGER_ADDR: ",
            "LEDGER_PLAINTEXT: ",
            "LEDGER_LISTEN_ADDR: ",
        ] {
            assert!(err.contains(var), "{var:?} not in {err}");
        }
    }
}
