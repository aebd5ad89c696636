//! A classify table: several entries, every verdict and outcome, a
//! trailing comma.
use humus::codegen::{Code, Outcome, Verdict};
use humus_tests::pb::ledger::v1::plain_ledger_humus;

#[humus::client(service = plain_ledger_humus)]
pub trait Ledger {
    #[humus(classify(
        Aborted => (Retry, Success),
        Unavailable => (Retry, Failure),
        NotFound => (Success, Ignored),
        Ok => (Success, Success),
        InvalidArgument => (Stop, Ignored,),
    ))]
    fn transfer();
}

fn main() {
    let table = LedgerHumusClient::TRANSFER.policy.table;
    assert_eq!(table.len(), 5);
    assert_eq!(table[0].code, Code::Aborted);
    assert_eq!(table[0].retry, Verdict::Retry);
    assert_eq!(table[0].breaker, Outcome::Success);
    assert_eq!(table[4].retry, Verdict::Stop);
}
