//! A policy type written by hand, without `#[humus::client]`, whose
//! classify table retries `Ok`: a call that succeeded would be sent again,
//! so reading the method's descriptor fails the build, naming the method.
use humus::codegen::{Changes, Code, CodeRule, Outcome, Override, Verdict};
use humus_tests::pb::ledger::v1::plain_ledger_humus;

enum MyPolicy {}

impl plain_ledger_humus::Policy for MyPolicy {
    const CHANGES: Changes = &[(
        "transfer",
        Override {
            table: Some(&[CodeRule {
                code: Code::Ok,
                retry: Verdict::Retry,
                breaker: Outcome::Success,
            }]),
            ..Override::NONE
        },
    )];
}

fn main() {
    let _ = plain_ledger_humus::Client::<MyPolicy>::TRANSFER;
}
