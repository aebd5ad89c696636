//! `never_retry` alone on a method whose `.proto` classify table retries a
//! code (`ledger.v1.Ledger/Transfer` retries ABORTED).
use humus_tests::pb::ledger::v1::ledger_humus;

#[humus::client(service = ledger_humus)]
pub trait Ledger {
    #[humus(never_retry)]
    fn transfer();
}

fn main() {}
