//! A retry of `Ok`.
use humus_tests::pb::ledger::v1::ledger_humus;

#[humus::client(service = ledger_humus)]
pub trait Ledger {
    #[humus(classify(Ok => (Retry, Success)))]
    fn balance();
}

fn main() {}
