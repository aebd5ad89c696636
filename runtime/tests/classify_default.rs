//! The default classify, code by code (docs/client.md, "The default" and "The
//! pushback").

use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

use humus::circuit::Outcome;
use humus::grpc::client::{
    Classification, Classify, ClassifyFn, HttpAnswer, PUSHBACK_KEY, default_classify,
    mapped_http_status,
};
use humus::retry::Verdict;
use tonic::metadata::MetadataMap;
use tonic::{Code, Status};

const METHOD: &str = "/cart.v1.CartService/AddItem";

fn trailer(pushbacks: &[&str]) -> MetadataMap {
    let mut t = MetadataMap::new();
    for p in pushbacks {
        t.append(PUSHBACK_KEY, p.parse().unwrap());
    }
    t
}

fn classify(code: Code, pushbacks: &[&str]) -> Classification {
    let status = Status::new(code, "from the server");
    default_classify(METHOD, Some(&status), &trailer(pushbacks))
}

fn c(retry: Verdict, retry_after_ms: Option<u64>, breaker: Outcome) -> Classification {
    Classification {
        retry,
        retry_after: retry_after_ms.map(Duration::from_millis),
        breaker,
    }
}

/// Every code but those the default names: the dependency answered.
const ANSWERED: [Code; 12] = [
    Code::Unknown,
    Code::InvalidArgument,
    Code::NotFound,
    Code::AlreadyExists,
    Code::PermissionDenied,
    Code::FailedPrecondition,
    Code::Aborted,
    Code::OutOfRange,
    Code::Unimplemented,
    Code::Internal,
    Code::DataLoss,
    Code::Unauthenticated,
];

#[test]
fn default_classify_is_a_classify_fn() {
    let f: ClassifyFn = default_classify;
    assert_eq!(f(METHOD, None, &MetadataMap::new()).retry, Verdict::Success);
}

#[test]
fn ok_is_a_success() {
    let ok = c(Verdict::Success, None, Outcome::Success);
    assert_eq!(default_classify(METHOD, None, &MetadataMap::new()), ok);
    assert_eq!(classify(Code::Ok, &[]), ok);
}

#[test]
fn ok_ignores_the_pushback() {
    let ok = c(Verdict::Success, None, Outcome::Success);
    for p in [&["-1"][..], &["soon"], &["5", "6"], &["250"]] {
        assert_eq!(default_classify(METHOD, None, &trailer(p)), ok, "{p:?}");
    }
}

#[test]
fn unavailable_is_retried_and_a_failure() {
    assert_eq!(
        classify(Code::Unavailable, &[]),
        c(Verdict::Retry, None, Outcome::Failure)
    );
}

#[test]
fn unavailable_waits_the_pushback() {
    assert_eq!(
        classify(Code::Unavailable, &["2000"]),
        c(Verdict::Retry, Some(2000), Outcome::Failure)
    );
    assert_eq!(
        classify(Code::Unavailable, &["0"]),
        c(Verdict::Retry, Some(0), Outcome::Failure)
    );
}

#[test]
fn resource_exhausted_without_a_pushback_is_not_retried_but_a_failure() {
    assert_eq!(
        classify(Code::ResourceExhausted, &[]),
        c(Verdict::Stop, None, Outcome::Failure)
    );
}

#[test]
fn resource_exhausted_with_a_pushback_is_retried_after_it() {
    assert_eq!(
        classify(Code::ResourceExhausted, &["1500"]),
        c(Verdict::Retry, Some(1500), Outcome::Failure)
    );
}

#[test]
fn deadline_exceeded_from_the_server_is_a_failure_not_retried() {
    assert_eq!(
        classify(Code::DeadlineExceeded, &[]),
        c(Verdict::Stop, None, Outcome::Failure)
    );
}

#[test]
fn cancelled_from_the_server_is_ignored_not_retried() {
    assert_eq!(
        classify(Code::Cancelled, &[]),
        c(Verdict::Stop, None, Outcome::Ignored)
    );
}

#[test]
fn every_other_code_is_the_dependency_answering() {
    for code in ANSWERED {
        assert_eq!(
            classify(code, &[]),
            c(Verdict::Stop, None, Outcome::Success),
            "{code:?}"
        );
        // A valid pushback does not make them retried.
        assert_eq!(
            classify(code, &["100"]),
            c(Verdict::Stop, None, Outcome::Success),
            "{code:?}"
        );
    }
}

#[test]
fn an_error_with_no_grpc_status_is_unknown() {
    let status = Status::from_error(Box::new(std::io::Error::other("interceptor")));
    assert_eq!(status.code(), Code::Unknown);
    assert_eq!(
        default_classify(METHOD, Some(&status), &MetadataMap::new()),
        c(Verdict::Stop, None, Outcome::Success)
    );
}

#[test]
fn an_invalid_pushback_stops_every_code_but_ok_and_keeps_the_breaker() {
    let expected = |code| match code {
        Code::Unavailable | Code::ResourceExhausted | Code::DeadlineExceeded => Outcome::Failure,
        Code::Cancelled => Outcome::Ignored,
        _ => Outcome::Success,
    };
    let codes = [
        Code::Unavailable,
        Code::ResourceExhausted,
        Code::DeadlineExceeded,
        Code::Cancelled,
    ]
    .into_iter()
    .chain(ANSWERED);
    for code in codes {
        for p in [
            &["-1"][..],
            &["-0"],
            &["1.5"],
            &["soon"],
            &[""],
            &["10", "20"],
        ] {
            assert_eq!(
                classify(code, p),
                c(Verdict::Stop, None, expected(code)),
                "{code:?} {p:?}"
            );
        }
    }
}

#[test]
fn reads_only_the_code_and_the_trailer() {
    let bare = Status::new(Code::Unavailable, "");
    let detailed = Status::with_details(
        Code::Unavailable,
        "overloaded, retry in an hour",
        bytes::Bytes::from_static(b"\x08\x01"),
    );
    let t = MetadataMap::new();
    assert_eq!(
        default_classify(METHOD, Some(&bare), &t),
        default_classify("/other.v1.Other/Charge", Some(&detailed), &t)
    );
}

#[test]
fn classify_default_is_the_default_table() {
    let d = Classify::default();
    let unavailable = Status::unavailable("down");
    assert_eq!(
        d.classify(METHOD, Some(&unavailable), &trailer(&["30"])),
        c(Verdict::Retry, Some(30), Outcome::Failure)
    );
    assert_eq!(format!("{d:?}"), "Classify(default)");
}

#[test]
fn a_classify_of_ones_own_hands_the_rest_to_the_default() {
    // docs/client.md, "Writing a classifier": Aborted is retried, and counts for the
    // dependency.
    let d = Classify::default();
    let ours = Classify::new(move |method, status, trailer| {
        if status.is_some_and(|s| s.code() == Code::Aborted) {
            return c(Verdict::Retry, None, Outcome::Success);
        }
        d.classify(method, status, trailer)
    });
    let clone = ours.clone();
    let aborted = Status::aborted("raced");
    let empty = MetadataMap::new();
    assert_eq!(
        clone.classify(METHOD, Some(&aborted), &empty),
        c(Verdict::Retry, None, Outcome::Success)
    );
    assert_eq!(
        ours.classify(METHOD, Some(&Status::not_found("no")), &empty),
        c(Verdict::Stop, None, Outcome::Success)
    );
    assert_eq!(format!("{ours:?}"), "Classify(custom)");
}

#[test]
fn a_classify_can_opt_one_method_out_of_retries() {
    // docs/client.md, "The default": EmptyCall is never sent twice, and
    // counts in the breaker as the default says.
    let d = Classify::default();
    let ours = Classify::new(move |method, status, trailer| {
        let mut c = d.classify(method, status, trailer);
        if method == "/grpc.testing.TestService/EmptyCall" && c.retry == Verdict::Retry {
            c.retry = Verdict::Stop;
            c.retry_after = None;
        }
        c
    });
    let unavailable = Status::unavailable("down");
    let t = trailer(&["10"]);
    assert_eq!(
        ours.classify(
            "/grpc.testing.TestService/EmptyCall",
            Some(&unavailable),
            &t
        ),
        c(Verdict::Stop, None, Outcome::Failure)
    );
    assert_eq!(
        ours.classify(
            "/grpc.testing.TestService/UnaryCall",
            Some(&unavailable),
            &t
        ),
        c(Verdict::Retry, Some(10), Outcome::Failure)
    );
}

#[test]
fn classify_is_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
    assert_send_sync::<Classify>();
    let d = Classify::default();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let d = d.clone();
            std::thread::spawn(move || d.classify(METHOD, None, &MetadataMap::new()).retry)
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), Verdict::Success);
    }
}

/// A proxy's rate limit (an HTTP 429 the client mapped to Unavailable,
/// marked by its `HttpAnswer` source) is load shed, as ResourceExhausted
/// is (and as the HTTP client's default has it): retried after its
/// `Retry-After` (the pushback the client gave it), else not at all, and
/// counted as a Failure.
#[test]
fn a_proxys_429_is_load_shed_counted_against_the_dependency() {
    let limited = page(429);
    assert_eq!(
        mapped_http_status(&limited),
        Some(http::StatusCode::TOO_MANY_REQUESTS)
    );
    assert_eq!(
        default_classify(METHOD, Some(&limited), &trailer(&["1000"])),
        c(Verdict::Retry, Some(1000), Outcome::Failure)
    );
    assert_eq!(
        default_classify(METHOD, Some(&limited), &trailer(&[])),
        c(Verdict::Stop, None, Outcome::Failure)
    );
    assert_eq!(
        default_classify(METHOD, Some(&limited), &trailer(&["-1"])),
        c(Verdict::Stop, None, Outcome::Failure)
    );
    for other in [502, 503, 504] {
        assert_eq!(
            default_classify(METHOD, Some(&page(other)), &trailer(&[])),
            c(Verdict::Retry, None, Outcome::Failure),
            "{other}"
        );
    }
    assert_eq!(
        default_classify(METHOD, Some(&page(503)), &trailer(&["1000"])),
        c(Verdict::Retry, Some(1000), Outcome::Failure)
    );
}

/// A status the client mapped from an HTTP answer is known by its typed
/// source, never by its text: a server's own Unavailable whose message is
/// the client's, word for word, is the server's (retried without a
/// pushback, as any Unavailable), and a mapped 429 whose code was changed
/// is not a mapped one.
#[test]
fn a_servers_unavailable_that_reads_like_a_mapped_page_is_the_servers() {
    let ours = page(429);
    let theirs = Status::unavailable(ours.message());
    assert_eq!(mapped_http_status(&theirs), None);
    assert!(theirs.source().is_none());
    assert_eq!(
        default_classify(METHOD, Some(&theirs), &trailer(&[])),
        c(Verdict::Retry, None, Outcome::Failure)
    );
    assert_eq!(
        default_classify(METHOD, Some(&ours), &trailer(&[])),
        c(Verdict::Stop, None, Outcome::Failure)
    );
    let mut recoded = Status::internal(ours.message());
    recoded.set_source(Arc::new(HttpAnswer::new(
        http::StatusCode::TOO_MANY_REQUESTS,
    )));
    assert_eq!(mapped_http_status(&recoded), None);
}

/// A status as the client maps an HTTP answer of status `http`: gRPC's
/// code for it, and an [`HttpAnswer`] source.
fn page(http: u16) -> Status {
    let http = http::StatusCode::from_u16(http).unwrap();
    let mut status = Status::unavailable(format!(
        "the server answered HTTP {} {} with content-type \"text/html\", not a gRPC response (a proxy's error page?)",
        http.as_u16(),
        http.canonical_reason().unwrap()
    ));
    status.set_source(Arc::new(HttpAnswer::new(http)));
    status
}
