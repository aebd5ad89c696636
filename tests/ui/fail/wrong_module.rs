//! A module that is not a humus client module: tonic's client module.
use humus_tests::pb::ledger::v1::ledger_client;

#[humus::client(service = ledger_client)]
pub trait Ledger {
    fn charge();
}

fn main() {}
