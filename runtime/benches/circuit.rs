//! The circuit breaker's cost per call, side by side with the `failsafe`
//! (1.3.0) and `recloser` (1.3.1) crates doing the same work in the same
//! run:
//!
//! ```text
//! cargo bench -p humus --bench circuit -- --warm-up-time 1 --measurement-time 3
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
//!   successful probe always closes it), so it is not in this group;
//! - `probe_cycle`: a failure trips the breaker, the open period (as short
//!   as each crate allows: 1 ns, or zero) passes, and a successful probe
//!   closes it again: three transitions, each delivered to a no-op
//!   observer in humus's case.
//!
//! The figures, as ratios, are in `BENCHMARKS.md`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use failsafe::CircuitBreaker as _;
use humus::circuit::{Breaker, Config, Outcome, Policy, State};

const HOUR: Duration = Duration::from_secs(3600);

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

fn closed(c: &mut Criterion) {
    let mut group = c.benchmark_group("closed");

    let b = humus(HOUR, Policy::consecutive_or_half(5, 20, 3));
    group.bench_function("humus", |bench| {
        bench.iter(|| {
            let ticket = b.allow().unwrap();
            black_box(ticket.done(black_box(Outcome::Success)))
        })
    });

    let f = failsafe(5, HOUR);
    group.bench_function("failsafe", |bench| {
        bench.iter(|| black_box(f.call(black_box(ok))).unwrap())
    });

    let r = recloser(20, 3, HOUR);
    group.bench_function("recloser", |bench| {
        bench.iter(|| black_box(r.call(black_box(ok))).unwrap())
    });
    group.finish();
}

fn rejected(c: &mut Criterion) {
    let mut group = c.benchmark_group("rejected");

    let b = humus(HOUR, Policy::consecutive(1));
    b.allow().unwrap().done(Outcome::Failure);
    assert_eq!(b.state(), State::Open);
    group.bench_function("humus", |bench| {
        bench.iter(|| black_box(b.allow()).unwrap_err())
    });

    let f = failsafe(1, HOUR);
    let _ = f.call(err);
    assert!(!f.is_call_permitted());
    group.bench_function("failsafe", |bench| {
        bench.iter(|| black_box(f.call(black_box(ok))).unwrap_err())
    });

    // recloser computes a failure rate only once its ring is full, so a
    // ring of one trips at the second failure.
    let r = recloser(1, 1, HOUR);
    let _ = r.call(err);
    let _ = r.call(err);
    group.bench_function("recloser", |bench| {
        bench.iter(|| match black_box(r.call(black_box(ok))) {
            Err(recloser::Error::Rejected) => {}
            other => panic!("not rejected: {other:?}"),
        })
    });
    group.finish();
}

fn probe(c: &mut Criterion) {
    let mut group = c.benchmark_group("probe");

    // Trips on the first failure; once half-open, stays half-open.
    let policy = Policy::new(|c| c.failures > 0, |_| State::HalfOpen);
    let b = humus(Duration::from_nanos(1), policy);
    b.allow().unwrap().done(Outcome::Failure);
    std::thread::sleep(Duration::from_millis(1));
    assert_eq!(b.state(), State::HalfOpen);
    group.bench_function("humus", |bench| {
        bench.iter(|| {
            let ticket = b.allow().unwrap();
            black_box(ticket.done(black_box(Outcome::Success)))
        })
    });
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
    group.bench_function("recloser", |bench| {
        bench.iter(|| black_box(r.call(black_box(ok))).unwrap())
    });
    group.finish();
}

fn probe_cycle(c: &mut Criterion) {
    let mut group = c.benchmark_group("probe_cycle");

    let b = humus(Duration::from_nanos(1), Policy::consecutive(1));
    group.bench_function("humus", |bench| {
        bench.iter(|| {
            b.allow().unwrap().done(Outcome::Failure);
            let probe = loop {
                if let Ok(ticket) = b.allow() {
                    break ticket;
                }
            };
            black_box(probe.done(Outcome::Success))
        })
    });
    assert_eq!(b.state(), State::Closed);

    let f = failsafe(1, Duration::ZERO);
    group.bench_function("failsafe", |bench| {
        bench.iter(|| {
            f.call(err).unwrap_err();
            loop {
                if let Ok(()) = f.call(ok) {
                    break;
                }
            }
        })
    });

    // recloser computes a failure rate only once its ring is full: with
    // rings of one, two failures trip it and two successful probes close it.
    let r = recloser(1, 1, Duration::ZERO);
    group.bench_function("recloser", |bench| {
        bench.iter(|| {
            r.call(err).unwrap_err();
            r.call(err).unwrap_err();
            loop {
                if let Ok(()) = r.call(ok) {
                    break;
                }
            }
            r.call(ok).unwrap();
        })
    });
    group.finish();
}

criterion_group!(benches, closed, rejected, probe, probe_cycle);
criterion_main!(benches);
