//! `Ok` counted as a breaker `Failure`.
use humus_tests::pb::ledger::v1::ledger_humus;

#[humus::client(service = ledger_humus)]
pub trait Ledger {
    #[humus(classify(Ok => (Stop, Failure)))]
    fn balance();
}

fn main() {}
