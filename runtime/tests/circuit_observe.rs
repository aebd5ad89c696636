//! Delivery of transitions to `observe` (docs/circuit-breaker.md, "Observers").

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use humus::circuit::{Breaker, Config, Outcome, Policy, State, Transition};
use tokio::time::advance;

const OPEN_FOR: Duration = Duration::from_secs(10);
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

fn config() -> Config {
    Config {
        window: 10,
        probes: 1,
        open_for: OPEN_FOR,
        probe_timeout: PROBE_TIMEOUT,
    }
}

/// Opens on any failure; while half-open, reopens when a probe times out
/// or fails, closes on a success.
fn policy() -> Policy {
    Policy::new(
        |c| c.failures > 0,
        |c| {
            if c.timed_out > 0 || c.failures > 0 {
                State::Open
            } else {
                State::Closed
            }
        },
    )
}

fn call(b: &Breaker, outcome: Outcome) -> bool {
    b.allow().expect("admitted").done(outcome)
}

#[tokio::test(start_paused = true)]
async fn transitions_arrive_in_order_from_the_last_to_with_the_final_counts() {
    let seen = Arc::new(Mutex::new(Vec::<Transition>::new()));
    let log = seen.clone();
    let b = Breaker::new(config(), policy(), move |t| log.lock().unwrap().push(*t)).unwrap();
    for _ in 0..3 {
        call(&b, Outcome::Failure);
        advance(OPEN_FOR).await;
        call(&b, Outcome::Success);
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 9);
    let mut last = State::Closed;
    for (i, t) in seen.iter().enumerate() {
        assert_eq!(t.generation, i as u64 + 1);
        assert_eq!(t.from, last);
        last = t.to;
    }
    assert_eq!(
        seen[0].counts.failures, 1,
        "the result that tripped it is counted"
    );
    assert_eq!(
        seen[2].counts.successes, 1,
        "the probe that closed it is counted"
    );
}

#[tokio::test(start_paused = true)]
async fn observe_runs_outside_the_lock_and_may_call_the_breaker() {
    let handle = Arc::new(OnceLock::<Breaker>::new());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (h, log) = (handle.clone(), seen.clone());
    let b = Breaker::new(config(), policy(), move |t| {
        let b = h.get().expect("set");
        // Each of these would deadlock if observe ran under the lock.
        let state = b.state();
        let admitted = b.allow().map(|ticket| ticket.release()).is_ok();
        log.lock().unwrap().push((t.to, state, admitted));
    })
    .unwrap();
    handle.set(b.clone()).unwrap();

    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    // allow delivers open -> half-open before it admits its own call, so
    // observe's allow finds the probe slot free.
    let probe = b.allow().unwrap();
    probe.done(Outcome::Success);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (State::Open, State::Open, false),
            (State::HalfOpen, State::HalfOpen, true),
            (State::Closed, State::Closed, true),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_panicking_observe_panics_and_the_rest_is_delivered_next_time() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let b = Breaker::new(config(), policy(), move |t: &Transition| {
        log.lock().unwrap().push(t.generation);
        if t.generation == 3 {
            panic!("observe failed");
        }
    })
    .unwrap();
    call(&b, Outcome::Failure); // #1 closed -> open
    advance(OPEN_FOR).await;
    let _hung = b.allow().unwrap(); // #2 open -> half-open
    // The probe times out (#3 half-open -> open, as of the timeout) and the
    // open period ends too (#4 open -> half-open): both are queued by one
    // call, and observe panics on the first.
    advance(PROBE_TIMEOUT + OPEN_FOR).await;
    let panicked = catch_unwind(AssertUnwindSafe(|| b.allow()));
    assert!(panicked.is_err(), "the panic continues");
    assert_eq!(*seen.lock().unwrap(), [1, 2, 3]);

    // The next allow delivers #4 before admitting its call.
    let probe = b.allow().expect("half-open, with the slot free");
    assert_eq!(*seen.lock().unwrap(), [1, 2, 3, 4]);
    assert!(probe.done(Outcome::Success));
    assert_eq!(*seen.lock().unwrap(), [1, 2, 3, 4, 5]);
    assert_eq!(b.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn done_delivers_what_a_panicking_observe_left_queued() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let b = Breaker::new(config(), policy(), move |t: &Transition| {
        log.lock().unwrap().push(t.generation);
        if t.generation == 3 {
            panic!("observe failed");
        }
    })
    .unwrap();
    let closed = b.allow().unwrap();
    call(&b, Outcome::Failure);
    advance(OPEN_FOR).await;
    let _hung = b.allow().unwrap();
    advance(PROBE_TIMEOUT + OPEN_FOR).await;
    assert!(catch_unwind(AssertUnwindSafe(|| b.allow())).is_err());
    assert!(!closed.done(Outcome::Success), "late");
    assert_eq!(*seen.lock().unwrap(), [1, 2, 3, 4]);
}

/// One thread is inside `observe` when another makes a transition: the
/// other does not call `observe` (no overlap); the first delivers it, in
/// order, before its own call returns. Real threads and real time: the
/// open period is 1 ns; channels order every step.
#[test]
fn a_delivering_thread_delivers_what_others_queue() {
    let (entered, wait_entered) = mpsc::channel::<()>();
    let (go, wait_go) = mpsc::channel::<()>();
    let wait_go = Mutex::new(wait_go);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let b = Breaker::new(
        Config {
            window: 10,
            probes: 1,
            open_for: Duration::from_nanos(1),
            probe_timeout: Duration::from_secs(3600),
        },
        policy(),
        move |t: &Transition| {
            log.lock()
                .unwrap()
                .push((t.generation, thread::current().id()));
            if t.generation == 1 {
                entered.send(()).unwrap();
                wait_go.lock().unwrap().recv().unwrap();
            }
        },
    )
    .unwrap();

    let tripping = {
        let b = b.clone();
        thread::spawn(move || {
            call(&b, Outcome::Failure); // #1, observe blocks in it
            thread::current().id()
        })
    };
    wait_entered.recv().unwrap();
    // Open -> half-open (#2) is queued by this thread, which does not
    // deliver it: the other thread is delivering.
    thread::sleep(Duration::from_millis(1));
    let probe = b.allow().expect("half-open after 1 ns");
    assert_eq!(seen.lock().unwrap().len(), 1, "#2 waits for the deliverer");
    go.send(()).unwrap();
    let deliverer = tripping.join().unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, [(1, deliverer), (2, deliverer)]);
    drop(probe);
}

#[test]
fn observe_never_overlaps_itself_across_threads() {
    let inside = Arc::new(AtomicU64::new(0));
    let count = Arc::new(AtomicU64::new(0));
    let (i, c) = (inside.clone(), count.clone());
    let b = Breaker::new(
        Config {
            window: 4,
            probes: 2,
            open_for: Duration::from_nanos(1),
            probe_timeout: Duration::from_secs(3600),
        },
        Policy::consecutive(1),
        move |t: &Transition| {
            assert_eq!(i.fetch_add(1, Ordering::SeqCst), 0, "overlap");
            assert_eq!(
                t.generation,
                c.fetch_add(1, Ordering::SeqCst) + 1,
                "gap or reorder"
            );
            thread::yield_now();
            i.fetch_sub(1, Ordering::SeqCst);
        },
    )
    .unwrap();
    let threads: Vec<_> = (0..4)
        .map(|n| {
            let b = b.clone();
            thread::spawn(move || {
                for k in 0..2000 {
                    if let Ok(ticket) = b.allow() {
                        let outcome = if (k + n) % 3 == 0 {
                            Outcome::Failure
                        } else {
                            Outcome::Success
                        };
                        ticket.done(outcome);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no overlap, no gap");
    }
    assert!(count.load(Ordering::SeqCst) > 0);
}
