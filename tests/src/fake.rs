//! A scripted ledger server for end-to-end tests: each unary method answers
//! with the codes scripted for it, in order (the last one repeats; `Ok`
//! when none is scripted), and every attempt is counted. It serves both
//! `ledger.v1.Ledger` and `ledger.v1.PlainLedger`, so the same script
//! exercises the `.proto`-declared and the attribute-declared policies.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tonic::{Code, Request, Response, Status};

use crate::pb::ledger::v1::{
    BalanceRequest, BalanceResponse, ChargeRequest, ChargeResponse, EntriesRequest, Entry,
    ImportResponse, TransferRequest, TransferResponse, ledger_server, plain_ledger_server,
};

/// The scripted server. Clones share their script and counts.
#[derive(Clone, Debug, Default)]
pub struct FakeLedger {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    scripts: HashMap<&'static str, Vec<Code>>,
    attempts: HashMap<&'static str, usize>,
}

impl FakeLedger {
    /// A server answering `Ok` to everything.
    pub fn new() -> FakeLedger {
        FakeLedger::default()
    }

    /// Scripts `method` (`"Transfer"`, `"Charge"`, `"Balance"`, or
    /// `"Entries"` for the opening of its stream) to answer `codes` in
    /// order, the last one to every later attempt.
    pub fn answer(self, method: &'static str, codes: &[Code]) -> FakeLedger {
        self.lock().scripts.insert(method, codes.to_vec());
        self
    }

    /// How many attempts of `method` reached the server.
    pub fn attempts(&self, method: &str) -> usize {
        self.lock().attempts.get(method).copied().unwrap_or(0)
    }

    /// The tonic service of `ledger.v1.Ledger` over this script.
    pub fn ledger_service(&self) -> ledger_server::LedgerServer<FakeLedger> {
        ledger_server::LedgerServer::new(self.clone())
    }

    /// The tonic service of `ledger.v1.PlainLedger` over this script.
    pub fn plain_ledger_service(&self) -> plain_ledger_server::PlainLedgerServer<FakeLedger> {
        plain_ledger_server::PlainLedgerServer::new(self.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts an attempt of `method` and says how it ends.
    fn attempt(&self, method: &'static str) -> Result<(), Status> {
        let mut state = self.lock();
        let count = state.attempts.entry(method).or_insert(0);
        *count += 1;
        let n = *count;
        let code = state
            .scripts
            .get(method)
            .and_then(|codes| codes.get(n - 1).or(codes.last()))
            .copied()
            .unwrap_or(Code::Ok);
        if code == Code::Ok {
            Ok(())
        } else {
            Err(Status::new(code, format!("{method} attempt {n}: scripted")))
        }
    }
}

type EntryStream = futures_util::stream::Iter<std::vec::IntoIter<Result<Entry, Status>>>;

/// Implements one of the two services' tonic traits over the script.
macro_rules! serve {
    ($service:path) => {
        #[tonic::async_trait]
        impl $service for FakeLedger {
            async fn transfer(
                &self,
                _: Request<TransferRequest>,
            ) -> Result<Response<TransferResponse>, Status> {
                self.attempt("Transfer")?;
                Ok(Response::new(TransferResponse { id: "t-1".into() }))
            }

            async fn charge(
                &self,
                _: Request<ChargeRequest>,
            ) -> Result<Response<ChargeResponse>, Status> {
                self.attempt("Charge")?;
                Ok(Response::new(ChargeResponse { id: "c-1".into() }))
            }

            async fn balance(
                &self,
                _: Request<BalanceRequest>,
            ) -> Result<Response<BalanceResponse>, Status> {
                self.attempt("Balance")?;
                Ok(Response::new(BalanceResponse { cents: 100 }))
            }

            type EntriesStream = EntryStream;

            async fn entries(
                &self,
                request: Request<EntriesRequest>,
            ) -> Result<Response<EntryStream>, Status> {
                self.attempt("Entries")?;
                let account = request.into_inner().account;
                let entries = (1..=3)
                    .map(|cents| {
                        Ok(Entry {
                            account: account.clone(),
                            cents,
                        })
                    })
                    .collect::<Vec<_>>();
                Ok(Response::new(futures_util::stream::iter(entries)))
            }

            async fn import(
                &self,
                request: Request<tonic::Streaming<Entry>>,
            ) -> Result<Response<ImportResponse>, Status> {
                self.attempt("Import")?;
                let mut stream = request.into_inner();
                let mut count = 0;
                while stream.message().await?.is_some() {
                    count += 1;
                }
                Ok(Response::new(ImportResponse { count }))
            }

            type SyncStream = EntryStream;

            async fn sync(
                &self,
                request: Request<tonic::Streaming<Entry>>,
            ) -> Result<Response<EntryStream>, Status> {
                self.attempt("Sync")?;
                let mut stream = request.into_inner();
                let mut echoed = Vec::new();
                while let Some(entry) = stream.message().await? {
                    echoed.push(Ok(entry));
                }
                Ok(Response::new(futures_util::stream::iter(echoed)))
            }
        }
    };
}

serve!(ledger_server::Ledger);
serve!(plain_ledger_server::PlainLedger);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_play_in_order_and_the_last_answer_repeats() {
        let fake = FakeLedger::new().answer("Charge", &[Code::Unavailable, Code::Ok]);
        assert_eq!(
            fake.attempt("Charge").unwrap_err().code(),
            Code::Unavailable
        );
        assert!(fake.attempt("Charge").is_ok());
        assert!(fake.attempt("Charge").is_ok());
        assert!(fake.attempt("Balance").is_ok());
        assert_eq!(fake.attempts("Charge"), 3);
        assert_eq!(fake.attempts("Balance"), 1);
        assert_eq!(fake.attempts("Transfer"), 0);
    }
}
