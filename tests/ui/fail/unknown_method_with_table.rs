//! A method the service does not have, with a table that retries: one
//! error, listing the service's methods, and nothing about descriptors.
use humus_tests::pb::ledger::v1::ledger_humus;

#[humus::client(service = ledger_humus)]
pub trait Ledger {
    #[humus(classify(Unavailable => (Retry, Failure)))]
    fn refnud();
}

fn main() {}
