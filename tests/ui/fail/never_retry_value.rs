//! `never_retry` given a value.
use humus_tests::pb::ledger::v1::ledger_humus;

#[humus::client(service = ledger_humus)]
pub trait Ledger {
    #[humus(never_retry = true)]
    fn balance();
}

fn main() {}
