//! Memory: the heap an idle client holds, and the heap each call in flight
//! holds with 10,000 calls in flight, for humus's typed client and for
//! tonic's generated client over a raw `Channel` (the peer), measured with
//! a counting global allocator.
//!
//! The dependency runs in a child process (this binary, with `--serve`), so
//! the count is the client's heap only: an in-process tonic server that
//! never answers `UnaryCall`, so calls stay in flight, and answers
//! `EmptyCall` (with which a client connects first). The child prints how
//! many calls it holds; the figure is read once it holds all 10,000.
//!
//! ```text
//! cargo bench -p humus-tests --bench memory
//! HUMUS_MEMORY_SIZES=1 cargo bench -p humus-tests --bench memory   # and what a call in flight holds, by block size
//! HUMUS_MEMORY_TRACE=1 cargo bench -p humus-tests --bench memory   # and where a typed call's allocations come from
//! ```
//!
//! Figures in `BENCHMARKS.md`. Source: the project's memory target (per idle client, per call in flight).

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use humus::grpc::client::{Client, Settings};
use humus_tests::grpc_proto::grpc::testing::{Empty, SimpleRequest, SimpleResponse};
use support::{Answer, Dependency, HumusClient, TonicClient};

/// Counts the bytes the process holds on the heap.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

/// With `HUMUS_MEMORY_SIZES=1`: the live blocks of each size (sizes up to
/// [`SIZES`] bytes; larger ones in the last), to say what a call in flight
/// holds.
static BY_SIZE: [AtomicIsize; SIZES + 1] = [const { AtomicIsize::new(0) }; SIZES + 1];
static COUNT_SIZES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
const SIZES: usize = 8192;

/// With `HUMUS_MEMORY_TRACE=1`: each allocation's size and backtrace,
/// while [`TRACED`] typed calls run, to say where a call's allocations
/// come from.
static TRACE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static TRACES: std::sync::Mutex<Vec<(usize, std::backtrace::Backtrace)>> =
    std::sync::Mutex::new(Vec::new());
/// Typed calls traced with `HUMUS_MEMORY_TRACE=1`.
const TRACED: usize = 10;
/// Frames printed of each allocation's backtrace (the allocator's own
/// skipped).
const FRAMES: usize = 14;

thread_local! {
    /// This thread is recording an allocation (whose own allocations are
    /// not recorded).
    static IN_TRACE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Records an allocation of `size` bytes, if tracing.
fn trace(size: usize) {
    if !TRACE.load(Ordering::Relaxed) || IN_TRACE.with(std::cell::Cell::get) {
        return;
    }
    IN_TRACE.with(|t| t.set(true));
    let backtrace = std::backtrace::Backtrace::force_capture();
    TRACES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push((size, backtrace));
    IN_TRACE.with(|t| t.set(false));
}

/// Prints the allocations recorded, grouped by call site (the first
/// [`FRAMES`] frames below the allocator), with how many each call made
/// and their bytes.
fn print_traces(calls: usize) {
    let traces = std::mem::take(
        &mut *TRACES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let mut sites: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
    for (size, backtrace) in traces {
        let text = backtrace.to_string();
        let frames: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with("at "))
            .map(|l| l.split_once(": ").map_or(l, |(_, name)| name))
            .filter(|name| {
                !(name.contains("memory::trace")
                    || name.contains("backtrace")
                    || name.starts_with("__rust")
                    || name.starts_with("alloc::alloc")
                    || name.contains("GlobalAlloc"))
            })
            .take(FRAMES)
            .collect();
        let site = sites.entry(frames.join("\n    ")).or_default();
        site.0 += 1;
        site.1 += size;
    }
    let total: usize = sites.values().map(|(n, _)| n).sum();
    println!(
        "humus typed client: {:.1} allocations per call, by call site",
        total as f64 / calls as f64
    );
    for (site, (n, bytes)) in sites {
        println!(
            "{:.1} per call, {} B each on average\n    {site}",
            n as f64 / calls as f64,
            bytes / n
        );
    }
}

fn count_size(size: usize, n: isize) {
    if COUNT_SIZES.load(Ordering::Relaxed) {
        BY_SIZE[size.min(SIZES)].fetch_add(n, Ordering::Relaxed);
    }
}

fn sizes() -> Vec<isize> {
    BY_SIZE.iter().map(|n| n.load(Ordering::SeqCst)).collect()
}

/// Prints, per block size, how many more live blocks `after` holds than
/// `before`, per call (of `calls`).
fn print_sizes(who: &str, before: &[isize], after: &[isize], calls: usize) {
    println!("{who}: live blocks per call in flight, by size (bytes: blocks per call)");
    for (size, (b, a)) in before.iter().zip(after).enumerate() {
        let per = (a - b) as f64 / calls as f64;
        if per.abs() >= 0.05 {
            let size = if size == SIZES {
                format!(">{SIZES}")
            } else {
                size.to_string()
            };
            println!("  {size:>6}: {per:.2}");
        }
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments,
// and only adds bookkeeping of sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            count_size(layout.size(), 1);
            trace(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            count_size(layout.size(), 1);
            trace(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        count_size(layout.size(), -1);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            trace(new_size);
            count_size(layout.size(), -1);
            count_size(new_size, 1);
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes on the heap now.
fn live() -> isize {
    LIVE.load(Ordering::SeqCst)
}

/// Heap allocations so far (reallocations included).
fn allocs() -> usize {
    ALLOCS.load(Ordering::SeqCst)
}

/// Sequential calls for the allocations-per-call figure.
const SEQUENTIAL: usize = 1000;

/// Calls in flight.
const IN_FLIGHT: usize = 10_000;
/// Calls started at once, until [`IN_FLIGHT`] are in flight.
const BATCH: usize = 500;
/// Clients built for the idle figure.
const CLIENTS: usize = 100;
/// Clients connected for the connected-idle figure.
const CONNECTED: usize = 20;

/// Calls the child server has held so far, as it last said.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// The child: serves, says how many calls it holds, exits when its stdin
/// closes.
fn serve() {
    let rt = support::runtime(1);
    let dependency = Dependency::new(Answer::Hold);
    let addr = rt.block_on(support::serve(dependency.clone()));
    println!("LISTENING {}", addr.port());
    std::thread::spawn(move || {
        let mut said = usize::MAX;
        loop {
            let held = dependency.held();
            if held != said {
                println!("HELD {held}");
                let _ = std::io::stdout().flush();
                said = held;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    std::process::exit(0);
}

/// Waits until the child has held `n` calls in all.
fn wait_held(n: usize) {
    let started = Instant::now();
    while HELD.load(Ordering::SeqCst) < n {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the server holds {} calls, want {n}",
            HELD.load(Ordering::SeqCst)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn humus_settings() -> Settings {
    Settings {
        // The calls stay in flight: no timeout ends them.
        timeout: Duration::from_secs(3600),
        ..Settings::default()
    }
}

/// Bytes per item of what `make` builds `n` of, kept alive together.
fn per<T>(n: usize, make: impl FnMut(usize) -> T) -> (f64, Vec<T>) {
    let mut kept = Vec::with_capacity(n);
    let before = live();
    kept.extend((0..n).map(make));
    let after = live();
    ((after - before) as f64 / n as f64, kept)
}

fn main() {
    if std::env::args().any(|a| a == "--serve") {
        return serve();
    }
    if std::env::var_os("HUMUS_MEMORY_SIZES").is_some_and(|v| v == "1") {
        COUNT_SIZES.store(true, Ordering::SeqCst);
    }
    let exe = std::env::current_exe().expect("this binary's path");
    let mut child = Command::new(exe)
        .arg("--serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the server");
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let first = lines.next().expect("the server says").expect("a line");
    let port: u16 = first
        .strip_prefix("LISTENING ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the server said {first:?}"));
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if let Some(n) = line.strip_prefix("HELD ").and_then(|n| n.parse().ok()) {
                HELD.store(n, Ordering::SeqCst);
            }
        }
    });
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));

    let rt = support::runtime(2);
    let _guard = rt.enter();
    let setup = humus::Setup::new();

    // What a client's tasks free after it is dropped is freed before the
    // next figure is taken.
    let settle = || std::thread::sleep(Duration::from_millis(200));

    // Idle: built, never called.
    let (tonic_idle, kept) = per(CLIENTS, |_| support::tonic_client(addr));
    drop(kept);
    settle();
    let (humus_idle, kept) = per(CLIENTS, |_| {
        let settings = Settings {
            addr: addr.to_string(),
            ..humus_settings()
        };
        HumusClient::new(Client::new(&setup, settings).expect("valid settings"))
    });
    drop(kept);
    settle();

    // Idle after one call: connected.
    let before = live();
    let tonic_clients: Vec<TonicClient> = (0..CONNECTED)
        .map(|_| {
            let mut client = support::tonic_client(addr);
            rt.block_on(client.empty_call(Empty {})).expect("connects");
            client
        })
        .collect();
    settle();
    let tonic_connected = (live() - before) as f64 / CONNECTED as f64;
    drop(tonic_clients);
    settle();
    let before = live();
    let humus_clients: Vec<HumusClient> = (0..CONNECTED)
        .map(|_| {
            let settings = Settings {
                addr: addr.to_string(),
                ..humus_settings()
            };
            let client = HumusClient::new(Client::new(&setup, settings).expect("valid"));
            rt.block_on(client.empty_call(Empty {})).expect("connects");
            client
        })
        .collect();
    settle();
    let humus_connected = (live() - before) as f64 / CONNECTED as f64;
    drop(humus_clients);
    settle();

    // Allocations per call: sequential calls on a connected client.
    let mut tonic = support::tonic_client(addr);
    rt.block_on(tonic.empty_call(Empty {})).expect("connects");
    let before = allocs();
    rt.block_on(async {
        for _ in 0..SEQUENTIAL {
            tonic.empty_call(Empty {}).await.expect("OK");
        }
    });
    let tonic_allocs = (allocs() - before) as f64 / SEQUENTIAL as f64;
    drop(tonic);
    let humus = support::humus_client(addr, humus_settings());
    rt.block_on(humus.empty_call(Empty {})).expect("connects");
    let before = allocs();
    rt.block_on(async {
        for _ in 0..SEQUENTIAL {
            humus.empty_call(Empty {}).await.expect("OK");
        }
    });
    let humus_allocs = (allocs() - before) as f64 / SEQUENTIAL as f64;
    if std::env::var_os("HUMUS_MEMORY_TRACE").is_some_and(|v| v == "1") {
        TRACE.store(true, Ordering::SeqCst);
        rt.block_on(async {
            for _ in 0..TRACED {
                humus.empty_call(Empty {}).await.expect("OK");
            }
        });
        TRACE.store(false, Ordering::SeqCst);
        print_traces(TRACED);
    }
    drop(humus);
    // The same with one trivial per-attempt layer: a no-op interceptor.
    let intercepted = support::humus_client(
        addr,
        humus_settings().interceptor(Ok::<tonic::Request<()>, tonic::Status>),
    );
    rt.block_on(intercepted.empty_call(Empty {}))
        .expect("connects");
    let before = allocs();
    rt.block_on(async {
        for _ in 0..SEQUENTIAL {
            intercepted.empty_call(Empty {}).await.expect("OK");
        }
    });
    let intercepted_allocs = (allocs() - before) as f64 / SEQUENTIAL as f64;
    drop(intercepted);
    // A stock tonic client over the channel of a humus client with its
    // defaults, the service's methods listed (`tonic over humus`).
    let mut channel = support::channel_client(addr);
    rt.block_on(channel.empty_call(Empty {})).expect("connects");
    let before = allocs();
    rt.block_on(async {
        for _ in 0..SEQUENTIAL {
            channel.empty_call(Empty {}).await.expect("OK");
        }
    });
    let channel_allocs = (allocs() - before) as f64 / SEQUENTIAL as f64;
    drop(channel);
    settle();

    // In flight: 10,000 calls held by the server.
    let mut held = 0;
    let mut in_flight = |who: &str, spawn: &mut dyn FnMut() -> tokio::task::JoinHandle<()>| {
        let mut tasks = Vec::with_capacity(IN_FLIGHT);
        let sizes_before = sizes();
        let before = live();
        // In batches the server keeps up with: h2's server sends a GOAWAY
        // (ENHANCE_YOUR_CALM, too_many_data_frames) when too many small
        // DATA frames wait for streams it has not accepted yet.
        for _ in 0..IN_FLIGHT / BATCH {
            tasks.extend((0..BATCH).map(|_| spawn()));
            held += BATCH;
            wait_held(held);
        }
        settle();
        assert_eq!(
            HELD.load(Ordering::SeqCst),
            held,
            "the server holds every call"
        );
        let ended = tasks.iter().filter(|t| t.is_finished()).count();
        assert_eq!(ended, 0, "calls ended: the figure would be wrong");
        let per_call = (live() - before) as f64 / IN_FLIGHT as f64;
        if COUNT_SIZES.load(Ordering::Relaxed) {
            print_sizes(who, &sizes_before, &sizes(), IN_FLIGHT);
        }
        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            let _ = rt.block_on(task);
        }
        settle();
        per_call
    };
    let mut tonic = support::tonic_client(addr);
    rt.block_on(tonic.empty_call(Empty {})).expect("connects");
    let tonic_call = in_flight("tonic", &mut || {
        let mut tonic = tonic.clone();
        tokio::spawn(async move {
            let _ = tonic.unary_call(SimpleRequest::default()).await;
        })
    });
    drop(tonic);
    let humus = support::humus_client(addr, humus_settings());
    rt.block_on(humus.empty_call(Empty {})).expect("connects");
    let humus_call = in_flight("humus", &mut || {
        let humus = humus.clone();
        tokio::spawn(async move {
            let _ = humus.unary_call(SimpleRequest::default()).await;
        })
    });

    // The size of one call's future, which a task holding the call stores.
    let tonic = support::tonic_client(addr);
    let humus = support::humus_client(addr, humus_settings());
    let tonic_future = {
        let mut tonic = tonic.clone();
        std::mem::size_of_val(&async move { tonic.unary_call(SimpleRequest::default()).await })
    };
    let humus_future = {
        let humus = humus.clone();
        std::mem::size_of_val(&async move { humus.unary_call(SimpleRequest::default()).await })
    };
    // A typed method's future (`humus::codegen::Call`) boxes the humus
    // client's: the state of the call is on the heap, outside the size
    // above (and inside "per call in flight").
    let humus_boxed = std::mem::size_of_val(&humus.client().unary::<_, SimpleResponse>(
        HumusClient::UNARY_CALL,
        tonic::Request::new(SimpleRequest::default()),
    ));

    println!("Heap held by the client process, bytes (a counting global allocator).");
    println!();
    println!("| | tonic `Channel` + generated client | humus typed client | humus / tonic |");
    println!("|---|---:|---:|---:|");
    for (what, t, h) in [
        (
            "idle client, never called (per client, of 100)",
            tonic_idle,
            humus_idle,
        ),
        (
            "idle client, connected (per client, of 20)",
            tonic_connected,
            humus_connected,
        ),
        ("per call in flight, of 10,000", tonic_call, humus_call),
    ] {
        println!("| {what} | {t:.0} | {h:.0} | {:.2} |", h / t);
    }
    println!(
        "| size of one unary call's future (bytes; a task holding the call stores it) | {tonic_future} | {humus_future} | {:.2} |",
        humus_future as f64 / tonic_future as f64
    );
    println!(
        "| the typed call's boxed state, on the heap (bytes; not in the size above) | | {humus_boxed} | |"
    );
    println!(
        "| size of one unary call's future and its boxed state (bytes) | {tonic_future} | {} | {:.2} |",
        humus_future + humus_boxed,
        (humus_future + humus_boxed) as f64 / tonic_future as f64
    );
    println!(
        "| heap allocations per unary call (count, of {SEQUENTIAL} sequential) | {tonic_allocs:.1} | {humus_allocs:.1} | {:.2} |",
        humus_allocs / tonic_allocs
    );
    println!(
        "| heap allocations per unary call, humus with one no-op interceptor (count, of {SEQUENTIAL} sequential) | {tonic_allocs:.1} | {intercepted_allocs:.1} | {:.2} |",
        intercepted_allocs / tonic_allocs
    );
    println!(
        "| heap allocations per unary call, tonic's client over humus's `Client::channel()` (count, of {SEQUENTIAL} sequential) | {tonic_allocs:.1} | {channel_allocs:.1} | {:.2} |",
        channel_allocs / tonic_allocs
    );
    drop(child.stdin.take());
    let _ = child.wait();
}
