//! Every mistake of one attribute is reported at once.
use humus_tests::pb::ledger::v1::plain_ledger_humus;

#[humus::client(service = plain_ledger_humus)]
pub trait Ledger {
    #[humus(never_retry, classify(Aborted => (Retry, Success)))]
    fn charge();
    #[humus(classify(Abortd => (Retry, Success), Ok => (Retry, Success), Ok => (Stop, Success)))]
    fn transfer();
    fn balanse();
}

fn main() {}
