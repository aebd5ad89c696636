//! A ticket settled without a result: released, dropped, dropped by a
//! panic, dropped with the future holding it (docs/circuit-breaker.md,
//! "Calls and tickets").
//!
//! Settling twice does not compile: see the `compile_fail` example on
//! `Ticket`.

mod circuit_support;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use circuit_support::{admit, breaker, call, standard};
use humus::circuit::{Breaker, Outcome, OwnedTicket, State, Ticket};
use tokio::time::advance;

const OPEN_FOR: Duration = Duration::from_secs(10);

/// A breaker that is half-open with one probe slot, whose policy never
/// leaves half-open.
async fn half_open() -> (Breaker, std::sync::Arc<circuit_support::Log>) {
    let (b, log) = breaker(standard(1), |c| c.failures > 0, |_| State::HalfOpen);
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    assert_eq!(b.state(), State::HalfOpen);
    (b, log)
}

#[test]
fn tickets_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<OwnedTicket>();
    fn assert_send_sync_borrowed<'a, T: Send + Sync + 'a>() {}
    assert_send_sync_borrowed::<Ticket<'_>>();
    assert_send_sync::<Breaker>();
}

#[tokio::test(start_paused = true)]
async fn release_counts_nothing_and_frees_the_slot_at_once() {
    let (b, log) = half_open().await;
    let probe = admit(&b);
    assert!(b.allow().is_err());
    probe.release();
    let next = admit(&b);
    assert!(log.probes().is_empty(), "nothing counted, nothing asked");
    drop(next);

    // While closed too: nothing counted.
    let (b, log) = breaker(standard(1), |_| false, |_| State::HalfOpen);
    admit(&b).release();
    drop(admit(&b));
    assert!(log.trips().is_empty());
}

#[tokio::test(start_paused = true)]
async fn drop_counts_nothing_and_frees_the_slot_at_once() {
    let (b, log) = half_open().await;
    drop(admit(&b));
    drop(admit(&b));
    assert!(log.probes().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_panic_while_holding_a_ticket_frees_its_slot() {
    let (b, log) = half_open().await;
    let result = catch_unwind(AssertUnwindSafe(|| {
        let _probe = admit(&b);
        panic!("the code between allow and done panicked");
    }));
    assert!(result.is_err());
    let next = admit(&b);
    assert!(log.probes().is_empty());
    assert!(next.done(Outcome::Success));
    assert_eq!(log.probes().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_future_frees_its_slot() {
    let (b, log) = half_open().await;
    let call = {
        let b = b.clone();
        async move {
            let ticket = b.allow().expect("admitted");
            std::future::pending::<()>().await; // a call that never ends
            ticket.done(Outcome::Success)
        }
    };
    // The caller gives up after 1 ms, dropping the future.
    let gave_up = tokio::time::timeout(Duration::from_millis(1), call).await;
    assert!(gave_up.is_err());
    let next = admit(&b);
    assert!(
        log.probes().is_empty(),
        "the caller giving up counts nothing"
    );
    drop(next);

    // An aborted task too.
    let task = tokio::spawn({
        let b = b.clone();
        async move {
            let _ticket = b.allow().expect("admitted");
            std::future::pending::<()>().await;
        }
    });
    tokio::task::yield_now().await;
    assert!(b.allow().is_err(), "the task holds the slot");
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    drop(admit(&b));
}

#[tokio::test(start_paused = true)]
async fn a_ticket_can_be_settled_on_another_thread() {
    let (b, log) = half_open().await;
    // The hand-off: the ticket takes a handle of its own on the breaker.
    let probe: OwnedTicket = admit(&b).into_owned();
    let settled = std::thread::spawn(move || probe.done(Outcome::Success))
        .join()
        .unwrap();
    assert!(settled);
    assert_eq!(log.probes().len(), 1);
    assert!(format!("{:?}", admit(&b)).contains("probe: true"));
}
