//! Unknown status codes: a typo, and a `.proto` spelling.
use humus_tests::pb::ledger::v1::ledger_humus;

#[humus::client(service = ledger_humus)]
pub trait Ledger {
    #[humus(classify(Abortd => (Retry, Success), UNAVAILABLE => (Retry, Failure)))]
    fn transfer();
}

fn main() {}
