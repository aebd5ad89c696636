//! Several options in one or more attributes, doc comments, a named policy
//! type, restricted visibility, and a method named with no option.
use humus_tests::pb::ledger::v1::ledger_humus;

fn stop(
    _: &str,
    _: Option<&tonic::Status>,
    _: &tonic::metadata::MetadataMap,
) -> humus::codegen::Classification {
    humus::codegen::Classification {
        retry: humus::codegen::Verdict::Stop,
        retry_after: None,
        breaker: humus::codegen::Outcome::Failure,
    }
}

mod clients {
    use super::*;

    /// The ledger as the wallet calls it.
    #[humus::client(service = ledger_humus, policy = WalletLedgerPolicy)]
    pub(crate) trait WalletLedger {
        /// Never twice, and a table that only stops.
        #[humus(never_retry, classify(Aborted => (Stop, Success)))]
        #[humus(classify_fn = super::stop)]
        fn charge();
        /// Named, nothing changed.
        fn balance();
    }
}

fn main() {
    use clients::{WalletLedgerHumusClient, WalletLedgerPolicy};
    let charge = WalletLedgerHumusClient::CHARGE;
    assert!(charge.policy.never_retry);
    assert_eq!(charge.policy.table.len(), 1);
    assert!(charge.policy.classify.is_some());
    assert!(WalletLedgerHumusClient::BALANCE.policy.table.is_empty());
    // Transfer keeps the .proto's table.
    assert_eq!(WalletLedgerHumusClient::TRANSFER.policy.table.len(), 1);
    let _: Option<WalletLedgerPolicy> = None;
}
