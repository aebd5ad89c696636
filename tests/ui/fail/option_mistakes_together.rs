//! Every mistake in one `#[humus(...)]` is reported, not only the first:
//! an unknown option does not hide a repeated one, and a code written as a
//! path is named with its fix.
use humus_tests::pb::ledger::v1::plain_ledger_humus;

#[humus::client(service = plain_ledger_humus)]
pub trait Ledger {
    #[humus(never_retry, never_retry, retries = 3)]
    fn charge();
    #[humus(classify(tonic::Code::Aborted => (Retry, Success)))]
    fn transfer();
    const LIMIT: u32;
}

fn main() {}
