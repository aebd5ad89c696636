//! A policy type written by hand, without `#[humus::client]`, that names
//! one method twice: only the first entry would apply, so making a client
//! of it (here with `From`) fails the build.
use humus::codegen::{Changes, Override};
use humus::grpc::client::{Client, Settings};
use humus_tests::pb::ledger::v1::plain_ledger_humus;

pub enum MyPolicy {}

impl plain_ledger_humus::Policy for MyPolicy {
    const CHANGES: Changes = &[
        ("transfer", Override::NONE),
        (
            "charge",
            Override {
                never_retry: true,
                ..Override::NONE
            },
        ),
        ("charge", Override::NONE),
    ];
}

fn make(client: Client) -> plain_ledger_humus::Client<MyPolicy> {
    client.into()
}

fn main() {
    if let Ok(client) = Client::new(&humus::Setup::new(), Settings::default()) {
        let _ = make(client);
    }
}
