//! A retry entry on a method the `.proto` declares never_retry
//! (`ledger.v1.Ledger/Charge`).
use humus_tests::pb::ledger::v1::ledger_humus;

#[humus::client(service = ledger_humus)]
pub trait Ledger {
    #[humus(classify(Aborted => (Retry, Success)))]
    fn charge();
}

fn main() {}
