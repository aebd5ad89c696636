//! A code listed twice in one table.
use humus_tests::pb::ledger::v1::ledger_humus;

#[humus::client(service = ledger_humus)]
pub trait Ledger {
    #[humus(classify(Aborted => (Retry, Success), Unavailable => (Retry, Failure), Aborted => (Stop, Failure)))]
    fn transfer();
}

fn main() {}
