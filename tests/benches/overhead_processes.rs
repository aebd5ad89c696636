//! Overhead per call, one process per client: the clients of
//! `benches/overhead_interleaved.rs` (tonic's generated client over a raw
//! `Channel`, the same with a 10 s deadline per request, humus's typed
//! client, and a control: tonic's client over a `Channel` built with
//! `Endpoint::connect_with_connector_lazy`) each run in a child process of
//! their own (this binary, with `HUMUS_OVERHEAD_CHILD=<client>`), with their
//! own in-process tonic server on loopback TCP and a runtime of 2 worker
//! threads. The parent tells the children, one after the other, to make a
//! turn of calls (one at a time) or of batches (64 calls at once), in
//! rounds; the order of the turns changes from round to round, through all
//! 120 orders (of its 5 clients), so a machine whose load changes during the run (2 cores
//! shared with other builds) slows them all alike, and no client always
//! follows the same one.
//!
//! Why processes: in `overhead_interleaved`, the clients share a process and
//! their calls alternate, so a client whose code is not the peer's (another
//! copy of hyper's and h2's code, monomorphised for it) pays for the caches
//! and branch predictors that the peer's calls left warm for the peer. The
//! control, tonic's own code in a second copy, measures 1–2% slower than
//! tonic there. A service never alternates two copies of a client; here each
//! copy runs alone in its process, and the control should measure like
//! tonic.
//!
//! It prints the median latency of one call (one at a time), the median
//! time of a batch of 64 concurrent calls and the throughput it gives, and
//! each child's CPU time per call (client and server, both in the child),
//! each with its ratio to tonic. With `HUMUS_OVERHEAD_QUICK=1`, the rounds
//! are a tenth (a check that it runs, not a measure).
//!
//! ```text
//! cargo bench -p humus-tests --bench overhead_processes
//! ```

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use support::{Answer, Dependency, PEERS, Peer};

/// Rounds of the single phase (one call at a time), after
/// [`WARM_UP_ROUNDS`]; each client takes one turn per round. A multiple of
/// 120, the orders of 5 turns.
const ROUNDS: usize = 480;
/// Calls, one at a time, in a client's turn of the single phase.
const CALLS_PER_TURN: usize = 200;
/// Rounds of the batch phase, after [`WARM_UP_ROUNDS`].
const BATCH_ROUNDS: usize = 384;
/// Batches of [`CONCURRENCY`] calls in a client's turn of the batch phase.
const BATCHES_PER_TURN: usize = 15;
/// Rounds of the CPU phase (one call at a time); each child's CPU time is
/// read before and after it, in ticks of 10 ms: 48,000 calls of ~100 µs
/// make ~5 s, read to within ~0.5%.
const CPU_ROUNDS: usize = 48;
/// Calls, one at a time, in a client's turn of the CPU phase.
const CPU_CALLS_PER_TURN: usize = 1_000;
/// Unrecorded rounds before the single and the batch phase (not divided in
/// quick mode).
const WARM_UP_ROUNDS: usize = 2;
/// Calls, one at a time, with which a child warms up before it is ready.
const WARM_UP_CALLS: usize = 2_000;
/// Batches with which a child warms up before it is ready.
const WARM_UP_BATCHES: usize = 100;
/// Calls at once in a batch.
const CONCURRENCY: usize = 64;

const N: usize = PEERS.len();

/// The variable that makes this binary a child, naming its client.
const CHILD_VAR: &str = "HUMUS_OVERHEAD_CHILD";
/// The variable that divides the round counts by 10.
const QUICK_VAR: &str = "HUMUS_OVERHEAD_QUICK";

fn main() {
    match std::env::var(CHILD_VAR) {
        Ok(name) => child(&name),
        Err(_) => parent(),
    }
}

// ---------------------------------------------------------------- child

/// `calls` calls one at a time through `peer`: the latency of each, in ns.
async fn single(peer: &Peer, calls: usize) -> Vec<u128> {
    let mut latencies = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        peer.call().await;
        latencies.push(started.elapsed().as_nanos());
    }
    latencies
}

/// `batches` batches of [`CONCURRENCY`] calls at once through `peer`: the
/// time of each, in ns.
async fn batch(peer: &Peer, batches: usize) -> Vec<u128> {
    let mut times = Vec::with_capacity(batches);
    for _ in 0..batches {
        let started = Instant::now();
        join_all((0..CONCURRENCY).map(|_| peer.call())).await;
        times.push(started.elapsed().as_nanos());
    }
    times
}

/// A child: serves its own dependency, warms its client up, says `ready`,
/// then answers the parent's commands, one line each, until `quit` or the
/// end of its stdin (the parent is gone).
fn child(name: &str) {
    let rt = support::runtime(2);
    let _guard = rt.enter();
    let addr = rt.block_on(support::serve(Dependency::new(Answer::Ok)));
    let peer = Peer::new(name, addr)
        .unwrap_or_else(|| panic!("{CHILD_VAR}={name}: not a client (one of {PEERS:?})"));

    // The calls are made from a task, as a service's handler makes them.
    let run = |single: bool, n: usize| -> Vec<u128> {
        let peer = peer.clone();
        rt.block_on(tokio::spawn(async move {
            if single {
                self::single(&peer, n).await
            } else {
                batch(&peer, n).await
            }
        }))
        .expect("no call failed")
    };
    run(true, WARM_UP_CALLS);
    run(false, WARM_UP_BATCHES);

    let mut stdout = std::io::stdout().lock();
    let mut answer = |line: &str| {
        if writeln!(stdout, "{line}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            // The parent is gone.
            std::process::exit(1);
        }
    };
    answer("ready");
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("a command");
        let mut words = line.split_whitespace();
        let command = words.next().unwrap_or_default();
        let mut n = || -> usize {
            words
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("`{line}`: a count"))
        };
        let numbers = |values: Vec<u128>| {
            values
                .iter()
                .map(u128::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        };
        match command {
            "single" => answer(&numbers(run(true, n()))),
            "batch" => answer(&numbers(run(false, n()))),
            "cpu" => answer(&support::cpu_seconds().to_string()),
            "quit" => break,
            _ => panic!("`{line}`: not a command"),
        }
    }
    // Not waiting for the server's and the connection's tasks.
    std::process::exit(0);
}

// --------------------------------------------------------------- parent

/// A child process, running client `name`.
struct Worker {
    name: &'static str,
    process: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    fn spawn(name: &'static str) -> Worker {
        let mut process = Command::new(std::env::current_exe().expect("this binary"))
            .env(CHILD_VAR, name)
            .env_remove(QUICK_VAR)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("a child process");
        let stdin = process.stdin.take().expect("a piped stdin");
        let stdout = BufReader::new(process.stdout.take().expect("a piped stdout"));
        Worker {
            name,
            process,
            stdin,
            stdout,
        }
    }

    /// The child's next line; panics if it died.
    fn read(&mut self) -> String {
        let mut line = String::new();
        let read = self
            .stdout
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("{}: {e}", self.name));
        assert!(read > 0, "the child of {} died", self.name);
        line.trim_end().to_owned()
    }

    /// Sends `command`, returns the child's answer.
    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}")
            .and_then(|()| self.stdin.flush())
            .unwrap_or_else(|e| panic!("the child of {}: {e}", self.name));
        self.read()
    }

    /// Sends `command`, returns the numbers of the answer.
    fn numbers(&mut self, command: &str) -> Vec<u64> {
        let answer = self.ask(command);
        answer
            .split(' ')
            .map(|n| {
                n.parse()
                    .unwrap_or_else(|_| panic!("{}: `{answer}`: not numbers", self.name))
            })
            .collect()
    }

    fn cpu(&mut self) -> f64 {
        let answer = self.ask("cpu");
        answer
            .parse()
            .unwrap_or_else(|_| panic!("{}: `{answer}`: not CPU seconds", self.name))
    }
}

/// Every order of the turns of `n` clients (each permutation of `0..n`).
fn orders(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut all = Vec::new();
    for shorter in orders(n - 1) {
        for at in 0..n {
            let mut order = shorter.clone();
            order.insert(at, n - 1);
            all.push(order);
        }
    }
    all
}

/// Runs `rounds` rounds after `warm_up` unrecorded ones; in each, every
/// child in turn answers `command`. The order of the turns changes from
/// round to round, through every order: a turn is slowed or sped by what
/// the turn before it left behind (another process's threads spinning down,
/// its data in the caches), so each client goes at each place and after
/// each other client as often as the others. The recorded numbers, by
/// client.
fn rounds(workers: &mut [Worker], warm_up: usize, rounds: usize, command: &str) -> Vec<Vec<u64>> {
    let orders = orders(workers.len());
    let mut samples: Vec<Vec<u64>> = vec![Vec::new(); workers.len()];
    for round in 0..warm_up + rounds {
        let recorded = round >= warm_up;
        for &k in &orders[round.saturating_sub(warm_up) % orders.len()] {
            let numbers = workers[k].numbers(command);
            if recorded {
                samples[k].extend(numbers);
            }
        }
    }
    samples
}

fn median(mut samples: Vec<u64>) -> Duration {
    samples.sort_unstable();
    Duration::from_nanos(samples[samples.len() / 2])
}

fn parent() {
    let divisor = if std::env::var_os(QUICK_VAR).is_some() {
        10
    } else {
        1
    };
    let mut workers: Vec<Worker> = PEERS.iter().map(|&name| Worker::spawn(name)).collect();
    for worker in &mut workers {
        let line = worker.read();
        assert_eq!(line, "ready", "{}: not ready", worker.name);
    }

    let single = rounds(
        &mut workers,
        WARM_UP_ROUNDS,
        ROUNDS / divisor,
        &format!("single {CALLS_PER_TURN}"),
    );
    let batch = rounds(
        &mut workers,
        WARM_UP_ROUNDS,
        BATCH_ROUNDS / divisor,
        &format!("batch {BATCHES_PER_TURN}"),
    );
    let before: Vec<f64> = workers.iter_mut().map(Worker::cpu).collect();
    let cpu_rounds = CPU_ROUNDS / divisor;
    rounds(
        &mut workers,
        0,
        cpu_rounds,
        &format!("single {CPU_CALLS_PER_TURN}"),
    );
    let cpu_calls = (cpu_rounds * CPU_CALLS_PER_TURN) as f64;
    // µs per call.
    let cpu: Vec<f64> = workers
        .iter_mut()
        .zip(before)
        .map(|(worker, before)| (worker.cpu() - before) / cpu_calls * 1e6)
        .collect();

    for mut worker in workers {
        writeln!(worker.stdin, "quit").expect("the child reads");
        drop(worker.stdin);
        let status = worker.process.wait().expect("the child exits");
        assert!(status.success(), "the child of {}: {status}", worker.name);
    }

    println!("| client | p10 | p25 | p50 | p75 | p90 | mean |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for k in 0..N {
        let mut v = single[k].clone();
        v.sort_unstable();
        let p = |q: f64| v[((v.len() as f64) * q) as usize] as f64 / 1e3;
        let mean = v.iter().sum::<u64>() as f64 / v.len() as f64 / 1e3;
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {mean:.1} |",
            PEERS[k],
            p(0.1),
            p(0.25),
            p(0.5),
            p(0.75),
            p(0.9)
        );
    }
    println!();
    let single: Vec<Duration> = single.into_iter().map(median).collect();
    let batch: Vec<Duration> = batch.into_iter().map(median).collect();
    println!(
        "Unary calls over loopback TCP; each client ran in a process of its own with its own in-process tonic server (2 worker threads), the processes taking turns."
    );
    println!();
    support::print_overhead(&PEERS, &single, &batch, &cpu, CONCURRENCY);
}
