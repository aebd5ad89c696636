//! The circuit breaker's cost per call, side by side with the `failsafe`
//! (1.3.0) and `recloser` (1.3.1) crates doing the same work, **interleaved**:
//! in each round every breaker runs one batch of operations, the order of
//! the breakers rotating from round to round, so that a machine whose load
//! changes during the run (shared cores, other builds) slows them alike. It
//! prints each breaker's median time per operation and, for each peer, the
//! median over the rounds of humus's time over the peer's in that round
//! (below 1: humus is faster), with the quartiles of that ratio.
//!
//! ```text
//! cargo bench -p humus --bench circuit            # a few seconds
//! cargo bench -p humus --bench circuit -- probe   # the groups whose name contains "probe"
//! # criterion's flags (`--warm-up-time 1`) are ignored, with a notice.
//! # humus's case of one group only, 100000 operations, untimed, for a profiler:
//! HUMUS_PROFILE=probe_cycle:100000 valgrind --tool=callgrind target/release/deps/circuit-<hash>
//! ```
//!
//! - `closed`: one call admitted and settled as a success while closed
//!   (humus: `allow` + `done`; the peers: `call` with a closure returning
//!   `Ok`). humus trips on 5 failures in a row or half of the last 20
//!   results, failsafe on 5 in a row, recloser on half of the last 20;
//! - `rejected`: one call rejected while open (humus also computes how
//!   long it stays open);
//! - `probe`: one half-open probe admitted and settled as a success, the
//!   policy keeping the breaker half-open. failsafe has no such policy (a
//!   successful probe always closes it), so it is not in this group.
//!   recloser has no probe limit and no probe timeout, so it reads no clock
//!   in half-open; humus reads it twice (the probe's deadline at `allow`,
//!   the probes' timeouts at `done`);
//! - `probe_cycle`: a failure trips the breaker, the open period (as short
//!   as each crate allows: 1 ns, or zero) passes, and a successful probe
//!   closes it again: three transitions, each delivered to a no-op
//!   observer in humus's case (failsafe has no observer and closes on any
//!   successful probe);
//! - `contended`: as `closed`, but from more threads than the machine has
//!   cores (twice as many, at least 4), all calling one breaker: a batch's
//!   operations are split among them and its time is the batch's wall
//!   time over its operations. The threads are started once per breaker
//!   and handed each batch, so no thread start is timed;
//! - `floor`: what the machine charges for the parts every breaker is made
//!   of, for reading the others: one clock read (`Instant::now`), one
//!   uncontended atomic read-modify-write, and one lock and unlock of an
//!   uncontended `std::sync::Mutex` and of a `parking_lot::Mutex` (the
//!   breaker's lock).
//!
//! The figures, as ratios, are in `BENCHMARKS.md`.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use failsafe::CircuitBreaker as _;
use humus::circuit::{Breaker, Config, Outcome, Policy, State};

const HOUR: Duration = Duration::from_secs(3600);

/// Rounds per group; each breaker runs one batch per round.
const ROUNDS: usize = 600;
/// Rounds run first and not counted.
const WARM_UP: usize = 60;
/// About how long one batch takes, to pick its size.
const BATCH_TIME: Duration = Duration::from_micros(150);

/// One breaker of a group: its name, and a function that runs `n` operations.
type Case<'a> = (&'static str, Box<dyn FnMut(u64) + 'a>);

fn humus(open_for: Duration, policy: Policy) -> Breaker {
    let config = Config {
        window: 20,
        probes: 1,
        open_for,
        probe_timeout: HOUR,
    };
    Breaker::new(config, policy, |_| {}).unwrap()
}

fn failsafe(failures: u32, open_for: Duration) -> impl failsafe::CircuitBreaker + std::fmt::Debug {
    let policy = failsafe::failure_policy::consecutive_failures(
        failures,
        failsafe::backoff::constant(open_for),
    );
    failsafe::Config::new().failure_policy(policy).build()
}

fn recloser(closed_len: usize, half_open_len: usize, open_wait: Duration) -> recloser::Recloser {
    recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(closed_len)
        .half_open_len(half_open_len)
        .open_wait(open_wait)
        .build()
}

fn ok() -> Result<(), ()> {
    Ok(())
}

fn err() -> Result<(), ()> {
    Err(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn quartiles(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 4], v[v.len() * 3 / 4])
}

/// Runs the cases of a group in turns, and prints their times and humus's
/// ratio to each of the others (the first case is humus, or the reference).
fn group(name: &str, filter: Option<&str>, mut cases: Vec<Case<'_>>) {
    if let Some((group, n)) = profile() {
        // Profiling: humus's case of the one group named, `n` times, untimed.
        if group == name {
            (cases[0].1)(n);
        }
        return;
    }
    if filter.is_some_and(|f| !name.contains(f)) {
        return;
    }
    // A batch size per case that takes about BATCH_TIME.
    let sizes: Vec<u64> = cases
        .iter_mut()
        .map(|(_, run)| {
            let mut n = 16;
            loop {
                let start = Instant::now();
                run(n);
                if start.elapsed() >= BATCH_TIME / 4 || n >= 1 << 24 {
                    break (n * 4).max(16);
                }
                n *= 2;
            }
        })
        .collect();
    let k = cases.len();
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(ROUNDS); k];
    for round in 0..WARM_UP + ROUNDS {
        let mut this = vec![0.0; k];
        for turn in 0..k {
            let i = (round + turn) % k;
            let start = Instant::now();
            (cases[i].1)(sizes[i]);
            this[i] = start.elapsed().as_nanos() as f64 / sizes[i] as f64;
        }
        if round >= WARM_UP {
            for (t, x) in times.iter_mut().zip(this) {
                t.push(x);
            }
        }
    }
    println!("{name}");
    for i in 0..k {
        let own = median(times[i].clone());
        if i == 0 {
            println!("  {:<10} {own:8.2} ns", cases[i].0);
        } else {
            let ratios: Vec<f64> = (0..ROUNDS).map(|r| times[0][r] / times[i][r]).collect();
            let (q1, q3) = quartiles(ratios.clone());
            println!(
                "  {:<10} {own:8.2} ns   {} / {} = {:.3} (quartiles {q1:.3}-{q3:.3})",
                cases[i].0,
                cases[0].0,
                cases[i].0,
                median(ratios),
            );
        }
    }
}

/// `HUMUS_PROFILE=<group>:<n>`: run only humus's case of that group, `n`
/// operations, for a profiler such as `valgrind --tool=callgrind`.
fn profile() -> Option<(String, u64)> {
    let v = std::env::var("HUMUS_PROFILE").ok()?;
    let (group, n) = v.split_once(':')?;
    Some((group.to_owned(), n.parse().ok()?))
}

/// The groups, in the order they run.
const GROUPS: [&str; 6] = [
    "closed",
    "contended",
    "rejected",
    "probe",
    "probe_cycle",
    "floor",
];

/// The group filter among the arguments: the first that is neither a flag
/// (`cargo bench` passes `--bench`) nor the value of one of criterion's
/// flags (`--warm-up-time 1`), which this bench's own rounds ignore.
///
/// # Panics
///
/// When the filter names no group (a typo would otherwise measure
/// nothing, silently).
fn filter_of(args: impl Iterator<Item = String>) -> Option<String> {
    let mut args = args.skip(1);
    let mut filter = None;
    while let Some(arg) = args.next() {
        if let Some(flag) = arg.strip_prefix("--") {
            if flag == "bench" {
                continue;
            }
            // criterion's flags that take a value, say `--measurement-time 3`.
            const WITH_VALUE: [&str; 12] = [
                "warm-up-time",
                "measurement-time",
                "sample-size",
                "save-baseline",
                "baseline",
                "noise-threshold",
                "confidence-level",
                "significance-level",
                "nresamples",
                "profile-time",
                "output-format",
                "color",
            ];
            let value = if WITH_VALUE.contains(&flag) {
                args.next().unwrap_or_default()
            } else {
                String::new()
            };
            eprintln!(
                "circuit: ignoring --{flag} {value}: this bench times its own interleaved rounds"
            );
        } else if !arg.starts_with('-') && filter.is_none() {
            filter = Some(arg);
        }
    }
    if let Some(f) = &filter {
        assert!(
            GROUPS.iter().any(|g| g.contains(f.as_str())),
            "circuit: no group's name contains {f:?}; the groups are {GROUPS:?}"
        );
    }
    filter
}

/// Threads that run one operation over and over, a batch at a time, for the
/// `contended` group: each batch's operations are split among them.
struct Crew {
    go: Vec<mpsc::Sender<u64>>,
    done: mpsc::Receiver<()>,
}

impl Crew {
    /// Starts `threads` threads running `op`; they end when the crew is
    /// dropped.
    fn new(threads: usize, op: impl Fn() + Send + Sync + 'static) -> Crew {
        let op = Arc::new(op);
        let (finished, done) = mpsc::channel();
        let go = (0..threads)
            .map(|_| {
                let (go, batches) = mpsc::channel::<u64>();
                let op = Arc::clone(&op);
                let finished = finished.clone();
                std::thread::spawn(move || {
                    for n in batches {
                        for _ in 0..n {
                            op();
                        }
                        finished.send(()).expect("the crew waits for its batch");
                    }
                });
                go
            })
            .collect();
        Crew { go, done }
    }

    /// Runs `n` operations (rounded up to a multiple of the threads),
    /// split among the threads, and waits for all of them.
    fn run(&self, n: u64) {
        let each = n.div_ceil(self.go.len() as u64);
        for go in &self.go {
            go.send(each)
                .expect("a crew's thread runs until the crew is dropped");
        }
        for _ in &self.go {
            self.done
                .recv()
                .expect("a crew's thread finishes its batch");
        }
    }
}

/// How many threads the `contended` group calls one breaker from: more
/// than the machine has cores.
fn contending_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (cores * 2).max(4)
}

fn main() {
    // Any argument but a flag filters the groups.
    let filter = filter_of(std::env::args());
    let filter = filter.as_deref();

    // closed
    let b = humus(HOUR, Policy::consecutive_or_half(5, 20, 3));
    let f = failsafe(5, HOUR);
    let r = recloser(20, 3, HOUR);
    group(
        "closed",
        filter,
        vec![
            (
                "humus",
                Box::new(|n| {
                    for _ in 0..n {
                        let ticket = b.allow().unwrap();
                        black_box(ticket.done(black_box(Outcome::Success)));
                    }
                }),
            ),
            (
                "failsafe",
                Box::new(|n| {
                    for _ in 0..n {
                        black_box(f.call(black_box(ok))).unwrap();
                    }
                }),
            ),
            (
                "recloser",
                Box::new(|n| {
                    for _ in 0..n {
                        black_box(r.call(black_box(ok))).unwrap();
                    }
                }),
            ),
        ],
    );
    assert_eq!(b.state(), State::Closed);

    // contended
    let threads = contending_threads();
    let b = humus(HOUR, Policy::consecutive_or_half(5, 20, 3));
    let f = Arc::new(failsafe(5, HOUR));
    let r = Arc::new(recloser(20, 3, HOUR));
    let crews = [
        {
            let b = b.clone();
            Crew::new(threads, move || {
                let ticket = b.allow().unwrap();
                black_box(ticket.done(black_box(Outcome::Success)));
            })
        },
        {
            let f = Arc::clone(&f);
            Crew::new(threads, move || {
                black_box(f.call(black_box(ok))).unwrap();
            })
        },
        {
            let r = Arc::clone(&r);
            Crew::new(threads, move || {
                black_box(r.call(black_box(ok))).unwrap();
            })
        },
    ];
    if filter.is_none_or(|f| "contended".contains(f)) && profile().is_none() {
        println!("contended: {threads} threads");
    }
    let [h, fs, rc] = &crews;
    group(
        "contended",
        filter,
        vec![
            ("humus", Box::new(|n| h.run(n))),
            ("failsafe", Box::new(|n| fs.run(n))),
            ("recloser", Box::new(|n| rc.run(n))),
        ],
    );
    drop(crews);
    assert_eq!(b.state(), State::Closed);

    // rejected
    let b = humus(HOUR, Policy::consecutive(1));
    b.allow().unwrap().done(Outcome::Failure);
    assert_eq!(b.state(), State::Open);
    let f = failsafe(1, HOUR);
    let _ = f.call(err);
    assert!(!f.is_call_permitted());
    // recloser computes a failure rate only once its ring is full, so a
    // ring of one trips at the second failure.
    let r = recloser(1, 1, HOUR);
    let _ = r.call(err);
    let _ = r.call(err);
    group(
        "rejected",
        filter,
        vec![
            (
                "humus",
                Box::new(|n| {
                    for _ in 0..n {
                        black_box(b.allow()).unwrap_err();
                    }
                }),
            ),
            (
                "failsafe",
                Box::new(|n| {
                    for _ in 0..n {
                        black_box(f.call(black_box(ok))).unwrap_err();
                    }
                }),
            ),
            (
                "recloser",
                Box::new(|n| {
                    for _ in 0..n {
                        match black_box(r.call(black_box(ok))) {
                            Err(recloser::Error::Rejected) => {}
                            other => panic!("not rejected: {other:?}"),
                        }
                    }
                }),
            ),
        ],
    );

    // probe: trips on the first failure; once half-open, stays half-open.
    let policy = Policy::new(|c| c.failures > 0, |_| State::HalfOpen);
    let b = humus(Duration::from_nanos(1), policy);
    b.allow().unwrap().done(Outcome::Failure);
    std::thread::sleep(Duration::from_millis(1));
    assert_eq!(b.state(), State::HalfOpen);
    // A half-open threshold below any failure rate: no success closes it.
    let r = recloser::Recloser::custom()
        .error_rate_closed(0.5)
        .error_rate_half_open(-0.5)
        .closed_len(1)
        .half_open_len(10)
        .open_wait(Duration::ZERO)
        .build();
    let _ = r.call(err);
    let _ = r.call(err);
    std::thread::sleep(Duration::from_millis(1));
    group(
        "probe",
        filter,
        vec![
            (
                "humus",
                Box::new(|n| {
                    for _ in 0..n {
                        let ticket = b.allow().unwrap();
                        black_box(ticket.done(black_box(Outcome::Success)));
                    }
                }),
            ),
            (
                "recloser",
                Box::new(|n| {
                    for _ in 0..n {
                        black_box(r.call(black_box(ok))).unwrap();
                    }
                }),
            ),
        ],
    );
    assert_eq!(b.state(), State::HalfOpen);

    // probe_cycle
    let b = humus(Duration::from_nanos(1), Policy::consecutive(1));
    let f = failsafe(1, Duration::ZERO);
    // recloser computes a failure rate only once its ring is full: with
    // rings of one, two failures trip it and two successful probes close it.
    let r = recloser(1, 1, Duration::ZERO);
    group(
        "probe_cycle",
        filter,
        vec![
            (
                "humus",
                Box::new(|n| {
                    for _ in 0..n {
                        b.allow().unwrap().done(Outcome::Failure);
                        let probe = loop {
                            if let Ok(ticket) = b.allow() {
                                break ticket;
                            }
                        };
                        black_box(probe.done(Outcome::Success));
                    }
                }),
            ),
            (
                "failsafe",
                Box::new(|n| {
                    for _ in 0..n {
                        f.call(err).unwrap_err();
                        loop {
                            if let Ok(()) = f.call(ok) {
                                break;
                            }
                        }
                    }
                }),
            ),
            (
                "recloser",
                Box::new(|n| {
                    for _ in 0..n {
                        r.call(err).unwrap_err();
                        r.call(err).unwrap_err();
                        loop {
                            if let Ok(()) = r.call(ok) {
                                break;
                            }
                        }
                        r.call(ok).unwrap();
                    }
                }),
            ),
        ],
    );
    assert_eq!(b.state(), State::Closed);

    // floor: the parts, for reading the rows above.
    let word = AtomicU64::new(0);
    let mutex = Mutex::new(0u64);
    let parking = parking_lot::Mutex::new(0u64);
    group(
        "floor",
        filter,
        vec![
            (
                "clock",
                Box::new(|n| {
                    for _ in 0..n {
                        black_box(tokio::time::Instant::now());
                    }
                }),
            ),
            (
                "std clock",
                Box::new(|n| {
                    for _ in 0..n {
                        black_box(Instant::now());
                    }
                }),
            ),
            (
                "rmw",
                Box::new(|n| {
                    for _ in 0..n {
                        black_box(black_box(&word).fetch_add(1, Ordering::AcqRel));
                    }
                }),
            ),
            (
                "mutex",
                Box::new(|n| {
                    for _ in 0..n {
                        *black_box(&mutex).lock().unwrap() += 1;
                    }
                }),
            ),
            (
                "parking",
                Box::new(|n| {
                    for _ in 0..n {
                        *black_box(&parking).lock() += 1;
                    }
                }),
            ),
        ],
    );
}
