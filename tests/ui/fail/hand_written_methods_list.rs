//! A policy type written by hand whose misspelled name is caught where its
//! descriptors' list is evaluated, with no client made.
use humus::codegen::{Changes, Override};
use humus_tests::pb::ledger::v1::plain_ledger_humus;

pub enum MyPolicy {}

impl plain_ledger_humus::Policy for MyPolicy {
    const CHANGES: Changes = &[("balanse", Override::NONE)];
}

fn main() {
    let methods = plain_ledger_humus::Client::<MyPolicy>::METHODS;
    assert_eq!(methods.len(), 6);
}
