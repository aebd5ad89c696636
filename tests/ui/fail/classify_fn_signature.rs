//! Classify functions of the wrong type.
use humus_tests::pb::ledger::v1::ledger_humus;

fn by_code(code: tonic::Code) -> bool {
    code == tonic::Code::Ok
}

#[humus::client(service = ledger_humus)]
pub trait Ledger {
    #[humus(classify_fn = by_code)]
    fn balance();
    #[humus(classify_fn = 42)]
    fn transfer();
}

fn main() {}
