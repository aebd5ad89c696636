//! A policy type written by hand, without `#[humus::client]`, that names a
//! method the service does not have (`chrage` for `charge`): the change
//! would never apply, so making a client of it fails the build.
use humus::codegen::{Changes, Override};
use humus::grpc::client::{Client, Settings};
use humus_tests::pb::ledger::v1::ledger_humus;

pub enum MyPolicy {}

impl ledger_humus::Policy for MyPolicy {
    const CHANGES: Changes = &[(
        "chrage",
        Override {
            never_retry: true,
            ..Override::NONE
        },
    )];
}

fn make(client: Client) -> ledger_humus::Client<MyPolicy> {
    ledger_humus::Client::new(client)
}

fn main() {
    if let Ok(client) = Client::new(&humus::Setup::new(), Settings::default()) {
        let _ = make(client);
    }
}
