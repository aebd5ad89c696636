//! The ledger service over real loopback TCP, called with tonic's own
//! client: what each knob makes it answer, and what reaches it.

use humus_examples::ledger::{self, Ledger};
use humus_examples::pb::ledger::v1 as pb;
use pb::ledger_client::LedgerClient;
use tonic::Code;
use tonic::transport::Channel;

async fn start(ledger: &Ledger) -> (ledger::Serving, LedgerClient<Channel>) {
    let serving = ledger::serve(ledger, ledger::settings("127.0.0.1:0"))
        .await
        .unwrap();
    let channel = Channel::from_shared(format!("http://{}", serving.local_addr()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (serving, LedgerClient::new(channel))
}

fn transfer(id: &str, from: &str, to: &str, cents: i64) -> pb::TransferRequest {
    pb::TransferRequest {
        request_id: id.into(),
        from: from.into(),
        to: to.into(),
        cents,
    }
}

fn charge(account: &str, cents: i64) -> pb::ChargeRequest {
    pb::ChargeRequest {
        account: account.into(),
        cents,
    }
}

#[tokio::test]
async fn a_transfer_sent_twice_is_applied_once() {
    let ledger = Ledger::new();
    let (serving, mut client) = start(&ledger).await;
    client.charge(charge("alice", 1000)).await.unwrap();

    let first = client
        .transfer(transfer("r1", "alice", "bob", 300))
        .await
        .unwrap()
        .into_inner();
    let again = client
        .transfer(transfer("r1", "alice", "bob", 300))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first, again);
    assert_eq!(first.from_balance, 700);
    assert_eq!(ledger.balance("alice"), 700);
    assert_eq!(ledger.balance("bob"), 300);
    assert_eq!(ledger.received("r1"), 2);
    assert_eq!(ledger.applied_transfers(), 1);
    assert_eq!(ledger.seen().replays, 1);
    serving.stop().await.unwrap();
}

#[tokio::test]
async fn insufficient_balance_is_failed_precondition_and_moves_nothing() {
    let ledger = Ledger::new();
    let (serving, mut client) = start(&ledger).await;
    client.charge(charge("alice", 100)).await.unwrap();
    let err = client
        .transfer(transfer("r1", "alice", "bob", 101))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("insufficient balance"), "{err}");
    assert_eq!(ledger.balance("alice"), 100);
    assert_eq!(ledger.applied_transfers(), 0);

    for bad in [
        transfer("", "alice", "bob", 1),
        transfer("r2", "alice", "alice", 1),
        transfer("r3", "alice", "bob", 0),
    ] {
        let err = client.transfer(bad).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    }
    serving.stop().await.unwrap();
}

#[tokio::test]
async fn a_raced_transfer_is_aborted_once_then_applied() {
    let ledger = Ledger::new();
    let (serving, mut client) = start(&ledger).await;
    client.charge(charge("alice", 1000)).await.unwrap();
    ledger.race_next_transfers(2);

    for id in ["r1", "r2"] {
        let err = client
            .transfer(transfer(id, "alice", "bob", 10))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Aborted);
        assert_eq!(ledger.balance("bob"), if id == "r1" { 0 } else { 10 });
        client
            .transfer(transfer(id, "alice", "bob", 10))
            .await
            .unwrap();
    }
    // The knob is spent.
    client
        .transfer(transfer("r3", "alice", "bob", 10))
        .await
        .unwrap();
    assert_eq!(ledger.balance("bob"), 30);
    assert_eq!(ledger.seen().transfers, 5);
    serving.stop().await.unwrap();
}

#[tokio::test]
async fn a_lost_reply_is_applied_and_its_retry_replayed() {
    let ledger = Ledger::new();
    let (serving, mut client) = start(&ledger).await;
    client.charge(charge("alice", 1000)).await.unwrap();
    ledger.lose_next_replies(1);

    let err = client
        .transfer(transfer("r1", "alice", "bob", 10))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(ledger.balance("bob"), 10);
    let receipt = client
        .transfer(transfer("r1", "alice", "bob", 10))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(receipt.from_balance, 990);
    assert_eq!(ledger.balance("bob"), 10);
    assert_eq!(ledger.seen().replays, 1);
    serving.stop().await.unwrap();
}

#[tokio::test]
async fn charges_fail_unavailable_while_the_processor_is_down() {
    let ledger = Ledger::new();
    let (serving, mut client) = start(&ledger).await;
    ledger.set_charge_unavailable(true);
    let err = client.charge(charge("alice", 100)).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(ledger.balance("alice"), 0);
    ledger.set_charge_unavailable(false);
    let receipt = client
        .charge(charge("alice", 100))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(receipt.balance, 100);
    assert_eq!(ledger.seen().charges, 2);
    let balance = client
        .balance(pb::BalanceRequest {
            account: "alice".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(balance.cents, 100);
    serving.stop().await.unwrap();
}

#[tokio::test]
async fn transfers_fail_unavailable_while_the_database_is_down() {
    let ledger = Ledger::new();
    let (serving, mut client) = start(&ledger).await;
    client.charge(charge("alice", 500)).await.unwrap();
    ledger.set_transfers_unavailable(true);
    let err = client
        .transfer(transfer("t-1", "alice", "bob", 100))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(ledger.applied_transfers(), 0);
    assert_eq!(ledger.seen().transfers, 1, "it reached the ledger");
    ledger.set_transfers_unavailable(false);
    let receipt = client
        .transfer(transfer("t-1", "alice", "bob", 100))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(receipt.from_balance, 400);
    assert_eq!(ledger.applied_transfers(), 1);
    serving.stop().await.unwrap();
}

#[tokio::test]
async fn watch_streams_past_entries_then_follows_until_the_ledger_stops() {
    let ledger = Ledger::new();
    let (serving, mut client) = start(&ledger).await;
    client.charge(charge("alice", 500)).await.unwrap();
    client.charge(charge("bob", 1)).await.unwrap();

    // Without follow: the past entries, then the end.
    let mut past = client
        .watch_entries(pb::WatchEntriesRequest {
            account: "alice".into(),
            follow: false,
        })
        .await
        .unwrap()
        .into_inner();
    let first = past.message().await.unwrap().unwrap();
    assert_eq!((first.sequence, first.cents), (1, 500));
    assert_eq!(past.message().await.unwrap(), None);

    // With follow: new entries as they come, then UNAVAILABLE at stop.
    let mut live = client
        .watch_entries(pb::WatchEntriesRequest {
            account: "alice".into(),
            follow: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(live.message().await.unwrap().unwrap().sequence, 1);
    client
        .transfer(transfer("r1", "alice", "bob", 200))
        .await
        .unwrap();
    let debit = live.message().await.unwrap().unwrap();
    assert_eq!(
        (debit.cents, debit.reference.as_str()),
        (-200, "transfer t1")
    );

    let stopped = tokio::spawn(serving.stop());
    let end = live.message().await.unwrap_err();
    assert_eq!(end.code(), Code::Unavailable, "{end}");
    stopped.await.unwrap().unwrap();
    assert_eq!(ledger.seen().watches, 2);
}

#[tokio::test]
async fn a_stopped_ledger_refuses_connections_and_comes_back_with_its_book() {
    let ledger = Ledger::new();
    let (serving, mut client) = start(&ledger).await;
    client.charge(charge("alice", 500)).await.unwrap();
    let addr = serving.local_addr();
    serving.stop().await.unwrap();

    assert!(tokio::net::TcpStream::connect(addr).await.is_err());

    let serving = ledger::serve(&ledger, ledger::settings(addr.to_string()))
        .await
        .unwrap();
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let balance = LedgerClient::new(channel)
        .balance(pb::BalanceRequest {
            account: "alice".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(balance.cents, 500);
    serving.stop().await.unwrap();
}
