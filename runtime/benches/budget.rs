//! The retry budget's take and give-back (issue 3: tens of nanoseconds, no
//! lock), against two peers measured in the same run: a mutex around a
//! float, as grpc-go's `retryThrottler` keeps its tokens, and tower's
//! `TpsBudget` (`tower::retry::budget`), a well-kept library's retry budget.

use std::hint::black_box;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use humus::retry::{Budget, BudgetConfig};
use tower::retry::budget::{Budget as _, TpsBudget};

/// gRFC A6 as grpc-go writes it: a float behind a mutex.
struct MutexBudget {
    tokens: Mutex<f64>,
    max: f64,
    ratio: f64,
}

impl MutexBudget {
    fn new(max: f64, ratio: f64) -> Self {
        MutexBudget {
            tokens: Mutex::new(max),
            max,
            ratio,
        }
    }
    fn take(&self) -> bool {
        let mut t = self.tokens.lock().unwrap();
        *t = (*t - 1.0).max(0.0);
        *t > self.max / 2.0
    }
    fn give_back(&self) {
        let mut t = self.tokens.lock().unwrap();
        *t = (*t + self.ratio).min(self.max);
    }
}

fn humus_budget() -> Budget {
    // A ratio of 1 keeps the level steady: every take and every give-back
    // writes.
    Budget::new(BudgetConfig {
        max_tokens: 1000,
        token_ratio: 1.0,
    })
    .unwrap()
}

fn single_thread(c: &mut Criterion) {
    let mut g = c.benchmark_group("budget/take+give_back");
    let humus = humus_budget();
    g.bench_function("humus", |b| {
        b.iter(|| {
            let allowed = black_box(&humus).take();
            black_box(&humus).give_back();
            allowed
        })
    });
    let mutex = MutexBudget::new(1000.0, 1.0);
    g.bench_function("mutex_f64", |b| {
        b.iter(|| {
            let allowed = black_box(&mutex).take();
            black_box(&mutex).give_back();
            allowed
        })
    });
    let tower = TpsBudget::new(Duration::from_secs(10), 10, 1.0);
    g.bench_function("tower_tps", |b| {
        b.iter(|| {
            let allowed = black_box(&tower).withdraw();
            black_box(&tower).deposit();
            allowed
        })
    });
    g.finish();

    let mut g = c.benchmark_group("budget/give_back_full");
    let humus = Budget::default();
    g.bench_function("humus", |b| b.iter(|| black_box(&humus).give_back()));
    let mutex = MutexBudget::new(10.0, 0.1);
    g.bench_function("mutex_f64", |b| b.iter(|| black_box(&mutex).give_back()));
    g.finish();
}

/// Two threads sharing one budget, each doing half the pairs.
fn contended(c: &mut Criterion) {
    fn run(iters: u64, pair: impl Fn() + Sync) -> Duration {
        let start = Instant::now();
        thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..iters / 2 {
                        pair();
                    }
                });
            }
        });
        start.elapsed()
    }
    let mut g = c.benchmark_group("budget/take+give_back_2_threads");
    let humus = humus_budget();
    g.bench_function("humus", |b| {
        b.iter_custom(|iters| {
            run(iters, || {
                black_box(humus.take());
                humus.give_back();
            })
        })
    });
    let mutex = MutexBudget::new(1000.0, 1.0);
    g.bench_function("mutex_f64", |b| {
        b.iter_custom(|iters| {
            run(iters, || {
                black_box(mutex.take());
                mutex.give_back();
            })
        })
    });
    g.finish();
}

criterion_group!(benches, single_thread, contended);
criterion_main!(benches);
