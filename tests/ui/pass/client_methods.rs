//! The client a `#[humus::client]` trait defines has the generated
//! client's methods, of all four kinds, and is built from a humus client.
use humus_tests::pb::ledger::v1::{
    BalanceRequest, ChargeRequest, EntriesRequest, Entry, plain_ledger_humus,
};

#[humus::client(service = plain_ledger_humus)]
pub trait Ledger {
    #[humus(never_retry)]
    fn charge();
}

#[allow(dead_code)]
async fn calls(client: humus::grpc::client::Client) -> Result<(), tonic::Status> {
    let ledger = LedgerHumusClient::new(client);
    let _ = ledger.clone();
    let _ = format!("{ledger:?}");
    ledger.charge(ChargeRequest::default()).await?;
    ledger
        .balance(tonic::Request::new(BalanceRequest::default()))
        .await?;
    let mut entries = ledger
        .entries(EntriesRequest::default())
        .await?
        .into_inner();
    while let Some(_entry) = entries.message().await? {}
    let _count = ledger
        .import(tokio_stream::iter(vec![Entry::default()]))
        .await?;
    let _both = ledger.sync(tokio_stream::iter(vec![Entry::default()])).await?;
    let _inner: &humus::grpc::client::Client = ledger.client();
    Ok(())
}

fn main() {}
