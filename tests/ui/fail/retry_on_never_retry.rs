//! A retry entry on a method the attribute declares never_retry.
use humus_tests::pb::ledger::v1::plain_ledger_humus;

#[humus::client(service = plain_ledger_humus)]
pub trait Ledger {
    #[humus(never_retry)]
    #[humus(classify(Aborted => (Retry, Success), Unavailable => (Stop, Failure)))]
    fn charge();
}

fn main() {}
