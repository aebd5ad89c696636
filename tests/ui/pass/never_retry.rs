//! `never_retry` on one method; the others keep the `.proto`'s policy.
use humus_tests::pb::ledger::v1::plain_ledger_humus;

#[humus::client(service = plain_ledger_humus)]
pub trait Ledger {
    #[humus(never_retry)]
    fn charge();
}

fn main() {
    assert!(LedgerHumusClient::CHARGE.policy.never_retry);
    assert!(!LedgerHumusClient::TRANSFER.policy.never_retry);
}
