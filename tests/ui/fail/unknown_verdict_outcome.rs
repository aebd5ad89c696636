//! Unknown verdicts and outcomes, and a malformed entry.
use humus_tests::pb::ledger::v1::ledger_humus;

#[humus::client(service = ledger_humus)]
pub trait Ledger {
    #[humus(classify(Aborted => (Again, Success), Unavailable => (Retry, Broken)))]
    fn transfer();
    #[humus(classify(Aborted => Retry))]
    fn balance();
}

fn main() {}
