//! With no per-attempt layer set, a unary call allocates what it did
//! before layers existed; one trivial layer costs a few allocations more
//! (docs/client.md, "Per-attempt layers"). A counting allocator, in its
//! own test binary since the allocator is global; it counts the
//! allocations of the test's thread, where the current-thread runtime runs
//! the client, its connection and the in-process server (plain text on the
//! testing Host, paused time).

mod client_support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use client_support::*;
use humus::grpc::client::{Client, Settings};
use humus::testing::Host;

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

fn count() -> usize {
    ALLOCATIONS.with(Cell::get)
}

/// Calls measured after the warm-up ones.
const CALLS: usize = 200;

/// Allocations per unary call of a client with `settings` (plain text to
/// an in-process carts), client and server together, the fewest of three
/// rounds of [`CALLS`] calls (after warm-up calls, so the connection's
/// tables have grown).
async fn per_call(host: &Host, settings: Settings) -> usize {
    let client = Client::new(&setup(host), settings).unwrap();
    for _ in 0..50 {
        client.unary::<_, Cart>(&GET_CART, get("c")).await.unwrap();
    }
    let mut fewest = usize::MAX;
    for _ in 0..3 {
        let before = count();
        for _ in 0..CALLS {
            client.unary::<_, Cart>(&GET_CART, get("c")).await.unwrap();
        }
        fewest = fewest.min((count() - before).div_ceil(CALLS));
    }
    fewest
}

fn plain() -> Settings {
    Settings {
        addr: "carts:9090".into(),
        ..Settings::default()
    }
}

/// What a call allocated before per-attempt layers (this test's figure on
/// `main` at 42f353e, client and server together, with humus's client
/// code of then): the no-layer path must not allocate more.
const BEFORE_LAYERS: usize = 62;

/// What hyper's tasks cost since they are spawned boxed (the request's
/// task and its body's, each a ~1.4 KB future that tokio's spawn moved by
/// value several times: boxed, it is moved once), less the `grpc-timeout`
/// value no longer copied to the heap for a whole number of seconds.
const BOXED_TASKS: usize = 2 - 1;

/// What a typed unary call saves since it sends its frame and reads its
/// response without tonic's `Grpc` (63 allocations before, 56 after): no
/// encoding body and its buffer (the frame, encoded once per call, is what
/// each attempt sends), no `Streaming` decoder and its buffer (a plain
/// answer is decoded from the bytes received), no per-call `Grpc` config.
const WITHOUT_GRPC: usize = 7;

/// What the dependencies' update with rustls 0.23.48 (hyper 1.13, h2
/// 0.4.21, http 1.6) costs, client and server together: 56 allocations per
/// call before, 58 after, measured on one commit of humus's code (f95b130)
/// with each lock file. Not humus's code.
const DEPENDENCIES: usize = 2;

/// What a typed unary call saves since its send holds hyper's response
/// future in the call's state, not in a box of its own, and its response's
/// one data chunk is kept without a vector: the client's two allocations
/// that h2 0.4.21 added (it sizes a response's header map to the recent
/// blocks' field count, so merging the trailer into it regrows it), won
/// back in humus's code (58 allocations per call before, 56 after).
const UNBOXED_SEND_AND_CHUNK: usize = 2;

#[tokio::test(start_paused = true)]
async fn no_layer_allocates_what_a_call_did_before_and_one_layer_a_few_more() {
    let host = Host::new();
    let carts = Carts::new();
    let _carts = serve_plain(&host, "carts:9090", carts.clone());
    let direct = per_call(&host, plain()).await;
    let layered = per_call(&host, plain().layer(tower::layer::util::Identity::new())).await;
    let intercepted = per_call(&host, plain().interceptor(Ok)).await;
    println!(
        "allocations per call: no layer {direct}, identity layer {layered}, no-op interceptor {intercepted}"
    );
    assert!(
        direct
            <= BEFORE_LAYERS + BOXED_TASKS - WITHOUT_GRPC + DEPENDENCIES - UNBOXED_SEND_AND_CHUNK,
        "no layer: {direct}, before layers: {BEFORE_LAYERS} (+{BOXED_TASKS}, boxed tasks, -{WITHOUT_GRPC} without tonic's Grpc, +{DEPENDENCIES} the dependencies' update, -{UNBOXED_SEND_AND_CHUNK} the send unboxed and the chunk kept in place)"
    );
    assert!(layered > direct);
    assert!(layered <= direct + 10, "one identity layer: {layered}");
    assert!(
        intercepted <= direct + 10,
        "one no-op interceptor: {intercepted}"
    );
}
