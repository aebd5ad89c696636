//! `never_retry` on a method whose `.proto` table retries a code
//! (`ledger.v1.Ledger/Transfer` retries ABORTED), with a table of its own
//! that stops that code.
use humus_tests::pb::ledger::v1::ledger_humus;

#[humus::client(service = ledger_humus)]
pub trait Ledger {
    #[humus(never_retry, classify(Aborted => (Stop, Success)))]
    fn transfer();
}

fn main() {
    let transfer = LedgerHumusClient::TRANSFER;
    assert!(transfer.policy.never_retry);
    assert_eq!(transfer.policy.table.len(), 1);
    assert_eq!(
        transfer.policy.table[0].retry,
        humus::retry::Verdict::Stop
    );
}
