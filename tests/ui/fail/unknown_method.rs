//! A method the service does not have.
use humus_tests::pb::ledger::v1::ledger_humus;

#[humus::client(service = ledger_humus)]
pub trait Ledger {
    #[humus(never_retry)]
    fn chrge();
}

fn main() {}
