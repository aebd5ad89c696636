//! What the client decides without asking the classifier, and how the
//! attempt loop combines `classify_attempt` with `retry::decide`
//! (docs/client.md: "What the client decides", "Streams", "Telemetry").

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use humus::circuit::Outcome;
use humus::grpc::client::{
    CallState, Classification, Classify, CodeRule, Ended, Method, MethodPolicy, PUSHBACK_KEY,
    RpcKind, classify_attempt,
};
use humus::retry::{Attempted, Budget, Decision, Exponential, Next, Verdict, decide};
use tonic::metadata::MetadataMap;
use tonic::{Code, Status};

static TRANSFER: Method = Method {
    full_name: "/ledger.v1.Ledger/Transfer",
    point: "grpc:ledger.v1.Ledger/Transfer",
    kind: RpcKind::Unary,
    policy: MethodPolicy::DEFAULT,
};

static CHARGE: Method = Method {
    full_name: "/payments.v1.Payments/Charge",
    point: "grpc:payments.v1.Payments/Charge",
    kind: RpcKind::Unary,
    policy: MethodPolicy {
        never_retry: true,
        table: &[],
        classify: None,
    },
};

static WATCH: Method = Method {
    full_name: "/ledger.v1.Ledger/Watch",
    point: "grpc:ledger.v1.Ledger/Watch",
    kind: RpcKind::ServerStreaming,
    policy: MethodPolicy {
        never_retry: false,
        table: &[CodeRule {
            code: Code::Aborted,
            retry: Verdict::Retry,
            breaker: Outcome::Failure,
        }],
        classify: None,
    },
};

fn c(retry: Verdict, retry_after_ms: Option<u64>, breaker: Outcome) -> Classification {
    Classification {
        retry,
        retry_after: retry_after_ms.map(Duration::from_millis),
        breaker,
    }
}

/// The default classify, counting how often it is asked.
fn counting() -> (Classify, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let d = Classify::default();
    let classify = Classify::new(move |m, s, t| {
        seen.fetch_add(1, Ordering::Relaxed);
        d.classify(m, s, t)
    });
    (classify, calls)
}

fn attempt<'a>(status: Option<&'a Status>, trailer: &'a MetadataMap) -> Ended<'a> {
    Ended::Attempt { status, trailer }
}

fn stream<'a>(status: Option<&'a Status>, trailer: &'a MetadataMap) -> Ended<'a> {
    Ended::Stream { status, trailer }
}

const LIVE: CallState = CallState {
    cancelled: false,
    deadline_passed: false,
};
const CANCELLED: CallState = CallState {
    cancelled: true,
    deadline_passed: false,
};
const PAST_DEADLINE: CallState = CallState {
    cancelled: false,
    deadline_passed: true,
};

fn decide_once(classification: Classification, call: CallState) -> Next {
    let now = tokio::time::Instant::now();
    let deadline = if call.deadline_passed {
        now
    } else {
        now + Duration::from_secs(10)
    };
    decide(
        &Budget::default(),
        &Attempted {
            verdict: classification.retry,
            retry_after: classification.retry_after,
            attempt: 1,
            max_attempts: 3,
            backoff: Duration::from_millis(20),
            backoff_max: Duration::from_secs(1),
            now,
            deadline: Some(deadline),
        },
    )
}

#[test]
fn a_rejected_attempt_is_stopped_without_asking() {
    let (classify, asked) = counting();
    let got = classify_attempt(&TRANSFER, &classify, Ended::Rejected, LIVE);
    assert_eq!(got, c(Verdict::Stop, None, Outcome::Ignored));
    assert_eq!(asked.load(Ordering::Relaxed), 0);
    assert_eq!(decide_once(got, LIVE).decision(), Decision::Stopped);
}

#[test]
fn an_error_after_the_caller_gave_up_is_ignored_without_asking() {
    let (classify, asked) = counting();
    let empty = MetadataMap::new();
    for status in [
        Status::cancelled("caller"),
        Status::unavailable("down"),
        Status::internal("bug"),
    ] {
        let got = classify_attempt(
            &TRANSFER,
            &classify,
            attempt(Some(&status), &empty),
            CANCELLED,
        );
        assert_eq!(got, c(Verdict::Stop, None, Outcome::Ignored), "{status:?}");
        assert_eq!(decide_once(got, CANCELLED), Next::Stopped);
    }
    assert_eq!(asked.load(Ordering::Relaxed), 0);
}

#[test]
fn an_error_once_the_deadline_passed_is_a_failure_and_expired_without_asking() {
    let (classify, asked) = counting();
    let empty = MetadataMap::new();
    for status in [
        Status::deadline_exceeded("timeout"),
        Status::unavailable("down"),
        Status::cancelled("server"),
    ] {
        let got = classify_attempt(
            &TRANSFER,
            &classify,
            attempt(Some(&status), &empty),
            PAST_DEADLINE,
        );
        assert_eq!(got, c(Verdict::Stop, None, Outcome::Failure), "{status:?}");
        assert_eq!(
            decide_once(got, PAST_DEADLINE).decision(),
            Decision::Expired
        );
    }
    assert_eq!(asked.load(Ordering::Relaxed), 0);
}

#[test]
fn ok_is_classified_even_after_a_cancel_or_the_deadline() {
    let (classify, asked) = counting();
    let empty = MetadataMap::new();
    for call in [CANCELLED, PAST_DEADLINE] {
        let got = classify_attempt(&TRANSFER, &classify, attempt(None, &empty), call);
        assert_eq!(got, c(Verdict::Success, None, Outcome::Success));
        assert_eq!(decide_once(got, call), Next::Succeeded);
    }
    assert_eq!(asked.load(Ordering::Relaxed), 2);
}

/// A table (a hand-written policy's) that retries OK: the success is
/// never sent again; the table's breaker outcome is kept.
#[test]
fn ok_is_never_retried_whatever_the_table_says() {
    static OK_RETRIED: Method = Method {
        full_name: "/ledger.v1.Ledger/Transfer",
        point: "grpc:ledger.v1.Ledger/Transfer",
        kind: RpcKind::Unary,
        policy: MethodPolicy {
            never_retry: false,
            table: &[CodeRule {
                code: Code::Ok,
                retry: Verdict::Retry,
                breaker: Outcome::Ignored,
            }],
            classify: None,
        },
    };
    let (classify, _) = counting();
    let empty = MetadataMap::new();
    let got = classify_attempt(&OK_RETRIED, &classify, attempt(None, &empty), LIVE);
    assert_eq!(got, c(Verdict::Success, None, Outcome::Ignored));
    assert_eq!(decide_once(got, LIVE), Next::Succeeded);
}

#[test]
fn deadline_exceeded_from_the_server_while_the_deadline_is_live_is_classified() {
    let (classify, asked) = counting();
    let status = Status::deadline_exceeded("the server's own dependency");
    let empty = MetadataMap::new();
    let got = classify_attempt(&TRANSFER, &classify, attempt(Some(&status), &empty), LIVE);
    assert_eq!(got, c(Verdict::Stop, None, Outcome::Failure));
    assert_eq!(asked.load(Ordering::Relaxed), 1);
    assert_eq!(decide_once(got, LIVE), Next::Stopped);
}

#[test]
fn a_failed_open_is_classified_as_a_unary_attempt() {
    let (classify, _) = counting();
    let status = Status::unavailable("no connection");
    let no_trailer = MetadataMap::new();
    let got = classify_attempt(&WATCH, &classify, attempt(Some(&status), &no_trailer), LIVE);
    assert_eq!(got, c(Verdict::Retry, None, Outcome::Failure));
    assert_eq!(
        decide_once(got, LIVE),
        Next::Retry {
            after: Duration::from_millis(20)
        }
    );
}

#[test]
fn a_stream_that_opened_and_ended_unavailable_is_ignored_without_asking() {
    let (classify, asked) = counting();
    let status = Status::unavailable("server shutting down");
    let mut t = MetadataMap::new();
    t.insert(PUSHBACK_KEY, "10".parse().unwrap());
    assert_eq!(
        classify_attempt(&WATCH, &classify, stream(Some(&status), &t), LIVE),
        c(Verdict::Stop, None, Outcome::Ignored)
    );
    assert_eq!(asked.load(Ordering::Relaxed), 0);
}

#[test]
fn a_stream_whose_caller_gave_up_is_ignored_and_one_past_its_deadline_a_failure() {
    let (classify, asked) = counting();
    let status = Status::cancelled("dropped");
    let empty = MetadataMap::new();
    assert_eq!(
        classify_attempt(&WATCH, &classify, stream(Some(&status), &empty), CANCELLED),
        c(Verdict::Stop, None, Outcome::Ignored)
    );
    let status = Status::deadline_exceeded("deadline");
    assert_eq!(
        classify_attempt(
            &WATCH,
            &classify,
            stream(Some(&status), &empty),
            PAST_DEADLINE
        ),
        c(Verdict::Stop, None, Outcome::Failure)
    );
    assert_eq!(asked.load(Ordering::Relaxed), 0);
}

#[test]
fn any_other_stream_end_counts_as_classified_and_is_never_retried() {
    let (classify, asked) = counting();
    let empty = MetadataMap::new();
    assert_eq!(
        classify_attempt(&WATCH, &classify, stream(None, &empty), LIVE),
        c(Verdict::Success, None, Outcome::Success)
    );
    let not_found = Status::not_found("gone");
    assert_eq!(
        classify_attempt(&WATCH, &classify, stream(Some(&not_found), &empty), LIVE),
        c(Verdict::Stop, None, Outcome::Success)
    );
    // The method's table retries Aborted; an open stream is still not.
    let aborted = Status::aborted("raced");
    let mut t = MetadataMap::new();
    t.insert(PUSHBACK_KEY, "5".parse().unwrap());
    assert_eq!(
        classify_attempt(&WATCH, &classify, stream(Some(&aborted), &t), LIVE),
        c(Verdict::Stop, None, Outcome::Failure)
    );
    assert_eq!(asked.load(Ordering::Relaxed), 2);
}

#[test]
fn the_methods_policy_applies() {
    let (classify, _) = counting();
    let status = Status::unavailable("down");
    let empty = MetadataMap::new();
    let got = classify_attempt(&CHARGE, &classify, attempt(Some(&status), &empty), LIVE);
    assert_eq!(got, c(Verdict::Stop, None, Outcome::Failure));
}

#[test]
fn the_method_name_reaches_the_classifier() {
    let classify = Classify::new(|method, _, _| {
        assert_eq!(method, "/ledger.v1.Ledger/Transfer");
        c(Verdict::Success, None, Outcome::Success)
    });
    let empty = MetadataMap::new();
    let _ = classify_attempt(&TRANSFER, &classify, attempt(None, &empty), LIVE);
}

#[test]
fn a_pushback_longer_than_backoff_max_ends_the_call() {
    let (classify, _) = counting();
    let status = Status::unavailable("overloaded");
    let mut t = MetadataMap::new();
    t.insert(PUSHBACK_KEY, "60000".parse().unwrap());
    let got = classify_attempt(&TRANSFER, &classify, attempt(Some(&status), &t), LIVE);
    assert_eq!(got.retry_after, Some(Duration::from_secs(60)));
    assert_eq!(decide_once(got, LIVE), Next::Stopped);
}

/// The attempt loop, as issue 4 will write it, on paused time: a
/// dependency that answers Unavailable with a pushback, then OK.
#[tokio::test(start_paused = true)]
async fn a_loop_waits_the_larger_of_backoff_and_pushback_then_succeeds() {
    let classify = Classify::default();
    let budget = Budget::default();
    let schedule =
        Exponential::new(Duration::from_millis(100), Duration::from_secs(5)).with_source(|hi| hi);
    let start = tokio::time::Instant::now();
    let deadline = start + Duration::from_secs(10);
    let mut pushback = MetadataMap::new();
    pushback.insert(PUSHBACK_KEY, "2000".parse().unwrap());
    let unavailable = Status::unavailable("busy");
    let answers = [
        (Some(&unavailable), &pushback),
        (Some(&unavailable), &pushback),
        (None, &pushback),
    ];
    let mut decisions = Vec::new();
    for (n, (status, trailer)) in answers.into_iter().enumerate() {
        let n = n as u32 + 1;
        let now = tokio::time::Instant::now();
        let call = CallState {
            cancelled: false,
            deadline_passed: now >= deadline,
        };
        let got = classify_attempt(&TRANSFER, &classify, attempt(status, trailer), call);
        let next = decide(
            &budget,
            &Attempted {
                verdict: got.retry,
                retry_after: got.retry_after,
                attempt: n,
                max_attempts: 3,
                backoff: schedule.backoff(n),
                backoff_max: schedule.max(),
                now,
                deadline: Some(deadline),
            },
        );
        decisions.push(next.decision());
        match next {
            Next::Retry { after } => tokio::time::sleep(after).await,
            _ => break,
        }
    }
    assert_eq!(
        decisions,
        [Decision::Retried, Decision::Retried, Decision::Succeeded]
    );
    // Two waits of the pushback, 2s each, which beat the 100ms and 200ms backoffs.
    assert_eq!(start.elapsed(), Duration::from_secs(4));
    assert_eq!(budget.tokens_milli(), 8100);
}

/// The same loop where the next wait would outlive the deadline.
#[tokio::test(start_paused = true)]
async fn a_loop_does_not_start_a_wait_past_the_deadline() {
    let classify = Classify::default();
    let budget = Budget::default();
    let start = tokio::time::Instant::now();
    let deadline = start + Duration::from_secs(3);
    let mut pushback = MetadataMap::new();
    pushback.insert(PUSHBACK_KEY, "2000".parse().unwrap());
    let unavailable = Status::unavailable("busy");
    let mut decisions = Vec::new();
    for n in 1..=3 {
        let now = tokio::time::Instant::now();
        let got = classify_attempt(
            &TRANSFER,
            &classify,
            attempt(Some(&unavailable), &pushback),
            CallState {
                cancelled: false,
                deadline_passed: now >= deadline,
            },
        );
        let next = decide(
            &budget,
            &Attempted {
                verdict: got.retry,
                retry_after: got.retry_after,
                attempt: n,
                max_attempts: 3,
                backoff: Duration::from_millis(50),
                backoff_max: Duration::from_secs(5),
                now,
                deadline: Some(deadline),
            },
        );
        decisions.push(next.decision());
        match next {
            Next::Retry { after } => tokio::time::sleep(after).await,
            _ => break,
        }
    }
    assert_eq!(decisions, [Decision::Retried, Decision::Expired]);
    // The call returns at 2s, not at its 3s deadline.
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert_eq!(budget.tokens_milli(), 8000);
}
