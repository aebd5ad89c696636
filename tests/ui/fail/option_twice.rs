//! Options given twice, an unknown option.
use humus_tests::pb::ledger::v1::ledger_humus;

fn f(_: &str, _: Option<&tonic::Status>, _: &tonic::metadata::MetadataMap) -> humus::codegen::Classification {
    unimplemented!()
}

#[humus::client(service = ledger_humus)]
pub trait Ledger {
    #[humus(never_retry, never_retry)]
    fn charge();
    #[humus(classify(Aborted => (Retry, Success)))]
    #[humus(classify(Unavailable => (Retry, Failure)))]
    fn transfer();
    #[humus(classify_fn = f, classify_fn = f)]
    fn balance();
    #[humus(retry_never)]
    fn entries();
}

fn main() {}
