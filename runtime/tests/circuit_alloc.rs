//! An admitted call costs no heap allocation: a counting allocator proves
//! it. Its own test binary, since the allocator is global; it counts only
//! the allocations of the thread under test.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use humus::circuit::{Breaker, Config, Outcome, Policy, State};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: defers every call to `System`; counting touches only a
// const-initialised thread-local `Cell` with no destructor.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// How many allocations `f` makes on this thread.
fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

fn config(open_for: Duration) -> Config {
    Config {
        window: 20,
        probes: 4,
        open_for,
        probe_timeout: Duration::from_secs(3600),
    }
}

#[test]
fn the_counter_counts() {
    assert_eq!(allocations(|| drop(Box::new(1u64))), 1);
}

#[test]
fn an_admitted_call_allocates_nothing_while_closed() {
    let b = Breaker::new(
        config(Duration::from_secs(10)),
        Policy::consecutive_or_half(5, 20, 3),
        |_| {},
    )
    .unwrap();
    let n = allocations(|| {
        for i in 0..10_000 {
            let ticket = b.allow().expect("closed");
            match i % 10 {
                0 => drop(ticket),
                1 => ticket.release(),
                2 => assert!(ticket.done(Outcome::Ignored)),
                3 => assert!(ticket.done(Outcome::Failure)),
                _ => assert!(ticket.done(Outcome::Success)),
            }
        }
        let _ = b.state();
    });
    assert_eq!(b.state(), State::Closed);
    assert_eq!(n, 0, "allocations for 10 000 admitted calls");
}

#[test]
fn a_probe_and_a_rejection_allocate_nothing() {
    // Trips on a failure; stays half-open whatever the probes say. Real
    // time: the open period is 1 ns.
    let b = Breaker::new(
        config(Duration::from_nanos(1)),
        Policy::new(|c| c.failures > 0, |_| State::HalfOpen),
        |_| {},
    )
    .unwrap();
    b.allow().unwrap().done(Outcome::Failure);
    std::thread::sleep(Duration::from_millis(1));
    assert_eq!(b.state(), State::HalfOpen);
    b.allow().unwrap().release(); // makes the transition
    let n = allocations(|| {
        for _ in 0..1000 {
            let probes: [_; 4] = std::array::from_fn(|_| b.allow().expect("a free slot"));
            assert!(b.allow().is_err(), "every slot taken");
            let [a, b_, c, d] = probes;
            assert!(a.done(Outcome::Success));
            assert!(b_.done(Outcome::Ignored));
            c.release();
            drop(d);
        }
    });
    assert_eq!(n, 0, "allocations for 4 000 probes and 1 000 rejections");

    // Rejected while open, too.
    let open = Breaker::new(
        config(Duration::from_secs(3600)),
        Policy::consecutive(1),
        |_| {},
    )
    .unwrap();
    open.allow().unwrap().done(Outcome::Failure);
    assert_eq!(
        allocations(|| for _ in 0..1000 {
            assert!(open.allow().is_err());
        }),
        0
    );
}

#[test]
fn a_whole_cycle_of_transitions_allocates_nothing() {
    let b = Breaker::new(
        config(Duration::from_nanos(1)),
        Policy::consecutive(1),
        |_| {},
    )
    .unwrap();
    let n = allocations(|| {
        for _ in 0..100 {
            b.allow().unwrap().done(Outcome::Failure); // closed -> open
            let probe = loop {
                // open -> half-open once 1 ns has passed
                if let Ok(ticket) = b.allow() {
                    break ticket;
                }
            };
            assert!(probe.done(Outcome::Success)); // half-open -> closed
        }
    });
    assert_eq!(b.state(), State::Closed);
    assert_eq!(n, 0);
}
