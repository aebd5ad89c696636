//! A method's compile-time policy: its table, its own classify and its
//! retry opt-out, before the client-wide classify (issue 3).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use humus::circuit::Outcome;
use humus::grpc::client::{
    Classification, Classify, CodeRule, MethodPolicy, PUSHBACK_KEY, classify_method,
};
use humus::retry::Verdict;
use tonic::metadata::MetadataMap;
use tonic::{Code, Status};

const METHOD: &str = "/ledger.v1.Ledger/Transfer";

fn c(retry: Verdict, retry_after_ms: Option<u64>, breaker: Outcome) -> Classification {
    Classification {
        retry,
        retry_after: retry_after_ms.map(Duration::from_millis),
        breaker,
    }
}

fn trailer(pushback: Option<&str>) -> MetadataMap {
    let mut t = MetadataMap::new();
    if let Some(p) = pushback {
        t.insert(PUSHBACK_KEY, p.parse().unwrap());
    }
    t
}

static ABORTED_RETRIED: [CodeRule; 2] = [
    CodeRule {
        code: Code::Aborted,
        retry: Verdict::Retry,
        breaker: Outcome::Success,
    },
    // A later entry for the same code is never reached.
    CodeRule {
        code: Code::Aborted,
        retry: Verdict::Stop,
        breaker: Outcome::Failure,
    },
];

static OK_IGNORED: [CodeRule; 1] = [CodeRule {
    code: Code::Ok,
    retry: Verdict::Success,
    breaker: Outcome::Ignored,
}];

fn own_classify(_: &str, status: Option<&Status>, _: &MetadataMap) -> Classification {
    match status.map(Status::code) {
        Some(Code::NotFound) | Some(Code::Aborted) => c(Verdict::Retry, Some(7), Outcome::Failure),
        _ => c(Verdict::Success, None, Outcome::Success),
    }
}

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

#[test]
fn no_policy_is_the_client_classify() {
    let (client, calls) = counting();
    let s = Status::unavailable("down");
    assert_eq!(
        classify_method(
            &MethodPolicy::DEFAULT,
            &client,
            METHOD,
            Some(&s),
            &trailer(Some("9"))
        ),
        c(Verdict::Retry, Some(9), Outcome::Failure)
    );
    assert_eq!(calls.load(Ordering::Relaxed), 1);
}

#[test]
fn the_table_comes_first() {
    let (client, calls) = counting();
    let policy = MethodPolicy {
        table: &ABORTED_RETRIED,
        classify: Some(own_classify),
        ..MethodPolicy::DEFAULT
    };
    let s = Status::aborted("raced");
    assert_eq!(
        classify_method(&policy, &client, METHOD, Some(&s), &MetadataMap::new()),
        c(Verdict::Retry, None, Outcome::Success)
    );
    assert_eq!(
        calls.load(Ordering::Relaxed),
        0,
        "the client's is not asked"
    );
}

#[test]
fn the_table_matches_ok_by_code_ok() {
    let (client, calls) = counting();
    let policy = MethodPolicy {
        table: &OK_IGNORED,
        ..MethodPolicy::DEFAULT
    };
    let ok = c(Verdict::Success, None, Outcome::Ignored);
    assert_eq!(
        classify_method(&policy, &client, METHOD, None, &trailer(Some("-1"))),
        ok
    );
    let explicit_ok = Status::new(Code::Ok, "");
    assert_eq!(
        classify_method(
            &policy,
            &client,
            METHOD,
            Some(&explicit_ok),
            &MetadataMap::new()
        ),
        ok
    );
    assert_eq!(calls.load(Ordering::Relaxed), 0);
}

#[test]
fn a_table_retry_honours_the_pushback() {
    let (client, _) = counting();
    let policy = MethodPolicy {
        table: &ABORTED_RETRIED,
        ..MethodPolicy::DEFAULT
    };
    let s = Status::aborted("raced");
    assert_eq!(
        classify_method(&policy, &client, METHOD, Some(&s), &trailer(Some("300"))),
        c(Verdict::Retry, Some(300), Outcome::Success)
    );
    assert_eq!(
        classify_method(&policy, &client, METHOD, Some(&s), &trailer(Some("-1"))),
        c(Verdict::Stop, None, Outcome::Success)
    );
}

#[test]
fn the_methods_own_classify_comes_next() {
    let (client, calls) = counting();
    let policy = MethodPolicy {
        table: &ABORTED_RETRIED,
        classify: Some(own_classify),
        ..MethodPolicy::DEFAULT
    };
    let s = Status::not_found("no");
    assert_eq!(
        classify_method(&policy, &client, METHOD, Some(&s), &MetadataMap::new()),
        c(Verdict::Retry, Some(7), Outcome::Failure)
    );
    assert_eq!(calls.load(Ordering::Relaxed), 0);
}

#[test]
fn the_client_classify_decides_codes_the_table_lacks() {
    let (client, calls) = counting();
    let policy = MethodPolicy {
        table: &ABORTED_RETRIED,
        ..MethodPolicy::DEFAULT
    };
    let s = Status::cancelled("server");
    assert_eq!(
        classify_method(&policy, &client, METHOD, Some(&s), &MetadataMap::new()),
        c(Verdict::Stop, None, Outcome::Ignored)
    );
    assert_eq!(calls.load(Ordering::Relaxed), 1);
}

#[test]
fn classify_functions_get_the_method_status_and_trailer() {
    let client = Classify::new(|method, status, trailer| {
        assert_eq!(method, METHOD);
        assert_eq!(status.map(Status::code), Some(Code::Internal));
        assert_eq!(trailer.get("x-seen").unwrap(), "yes");
        c(Verdict::Stop, None, Outcome::Failure)
    });
    let mut t = MetadataMap::new();
    t.insert("x-seen", "yes".parse().unwrap());
    let s = Status::internal("bug");
    assert_eq!(
        classify_method(&MethodPolicy::DEFAULT, &client, METHOD, Some(&s), &t).breaker,
        Outcome::Failure
    );
}

#[test]
fn never_retry_turns_retry_into_stop_and_keeps_the_breaker() {
    let (client, _) = counting();
    let policy = MethodPolicy {
        never_retry: true,
        ..MethodPolicy::DEFAULT
    };
    let s = Status::unavailable("down");
    assert_eq!(
        classify_method(&policy, &client, METHOD, Some(&s), &trailer(Some("50"))),
        c(Verdict::Stop, None, Outcome::Failure)
    );
}

#[test]
fn never_retry_applies_to_the_table_and_the_methods_classify() {
    let (client, _) = counting();
    let policy = MethodPolicy {
        never_retry: true,
        table: &ABORTED_RETRIED,
        classify: Some(own_classify),
    };
    let aborted = Status::aborted("raced");
    assert_eq!(
        classify_method(
            &policy,
            &client,
            METHOD,
            Some(&aborted),
            &MetadataMap::new()
        ),
        c(Verdict::Stop, None, Outcome::Success)
    );
    let not_found = Status::not_found("no");
    assert_eq!(
        classify_method(
            &policy,
            &client,
            METHOD,
            Some(&not_found),
            &MetadataMap::new()
        ),
        c(Verdict::Stop, None, Outcome::Failure)
    );
}

#[test]
fn never_retry_leaves_success_and_stop_alone() {
    let (client, _) = counting();
    let policy = MethodPolicy {
        never_retry: true,
        ..MethodPolicy::DEFAULT
    };
    assert_eq!(
        classify_method(&policy, &client, METHOD, None, &MetadataMap::new()),
        c(Verdict::Success, None, Outcome::Success)
    );
    let s = Status::cancelled("server");
    assert_eq!(
        classify_method(&policy, &client, METHOD, Some(&s), &MetadataMap::new()),
        c(Verdict::Stop, None, Outcome::Ignored)
    );
}
