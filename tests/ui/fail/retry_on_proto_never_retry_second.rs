//! A retry entry on a method the `.proto` declares never_retry
//! (`ledger.v1.Ledger/Charge`), after another method's retry entry, which
//! is fine: the error points at `charge`'s own entry, not at `transfer`'s.
use humus_tests::pb::ledger::v1::ledger_humus;

#[humus::client(service = ledger_humus)]
pub trait Ledger {
    #[humus(classify(Aborted => (Retry, Success)))]
    fn transfer();
    #[humus(classify(Unavailable => (Retry, Failure)))]
    fn charge();
}

fn main() {}
