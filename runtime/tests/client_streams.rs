//! Streams (docs/client.md, "Streams"): only the open is retried; an opened
//! stream is counted in the breaker once, when it ends. On the testing Host
//! over TLS on paused time.

mod client_support;

use std::error::Error as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use client_support::*;
use futures_util::StreamExt;
use humus::circuit::{Outcome, Policy};
use humus::grpc::client::{Classify, Client, Settings, Streaming, default_classify};
use humus::testing::{Ca, Host};
use tokio::time::Instant;
use tonic::{Code, Response, Status};

fn client(host: &Host, ca: &Ca, policy: Policy) -> Client {
    Client::new(
        &setup(host),
        Settings {
            breaker_policy: policy,
            ..carts_settings(ca)
        },
    )
    .unwrap()
}

async fn collect(stream: &mut Streaming<Cart>) -> (Vec<u32>, Option<Code>) {
    let mut items = Vec::new();
    while let Some(next) = stream.next().await {
        match next {
            Ok(cart) => items.push(cart.items),
            Err(status) => return (items, Some(status.code())),
        }
    }
    (items, None)
}

/// An open that failed (here: carts answers the first open with a
/// trailers-only `UNAVAILABLE`) is classified as a unary attempt and
/// retried (after a pushback of 2 s, so the failure is seen counted
/// before the retry); the stream that then opens counts once, at its end.
/// (An open whose dial fails, or that finds the connection backing off, is
/// a failed open too, retried and counted so; see `client_dial_failures`
/// and `client_decisions`.)
#[tokio::test(start_paused = true)]
async fn a_failed_open_is_retried_and_the_stream_counts_once_at_its_end() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let (policy, seen) = recording();
    let client = Client::new(
        &setup(&host),
        Settings {
            breaker_policy: policy,
            classify: Classify::new(|method, status, trailer| {
                let mut c = default_classify(method, status, trailer);
                if c.retry == humus::retry::Verdict::Retry {
                    c.retry_after = Some(Duration::from_secs(2));
                }
                c
            }),
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let _carts = start_carts(&host, &ca, &carts);
    carts.on_watch_cart(|seen, req| async move {
        if seen.n == 1 {
            return Err(unavailable());
        }
        let updates: Vec<Result<Cart, Status>> = (1..=3).map(|n| Ok(cart(&req.id, n))).collect();
        Ok(Response::new(futures_util::stream::iter(updates)))
    });
    let call = {
        let client = client.clone();
        tokio::spawn(async move { client.server_streaming(&WATCH_CART, get("c-1")).await })
    };
    while counted(&seen) == (0, 0) {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        counted(&seen),
        (0, 1),
        "the failed open counts as a failure"
    );
    let response = call.await.unwrap().unwrap();
    assert_eq!(carts.arrivals(&WATCH_CART), 2);
    assert_eq!(counted(&seen), (0, 1), "the open stream counts nothing yet");
    let mut stream = response.into_inner();
    assert_eq!(collect(&mut stream).await, (vec![1, 2, 3], None));
    assert_eq!(counted(&seen), (1, 1), "counted once, at its end");
    assert!(stream.next().await.is_none());
    assert_eq!(counted(&seen), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn an_opened_stream_is_never_retried() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_watch_cart(|_, req| async move {
        let updates = vec![Ok(cart(&req.id, 1)), Err(Status::internal("lost the cart"))];
        Ok(Response::new(futures_util::stream::iter(updates)))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let client = client(&host, &ca, policy);
    let mut stream = client
        .server_streaming(&WATCH_CART, get("c-1"))
        .await
        .unwrap()
        .into_inner();
    let (items, end) = collect(&mut stream).await;
    assert_eq!(items, [1]);
    assert_eq!(end, Some(Code::Internal));
    assert_eq!(carts.arrivals(&WATCH_CART), 1);
    // Internal is the dependency answering: the default counts it a success.
    assert_eq!(counted(&seen), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_ends_unavailable_is_ignored_and_another_code_is_classified() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_watch_cart(|_, req| async move {
        let code = if req.id == "gone" {
            Status::unavailable("shutting down")
        } else {
            Status::resource_exhausted("over quota")
        };
        Ok(Response::new(futures_util::stream::iter(vec![
            Ok(cart(&req.id, 1)),
            Err(code),
        ])))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let client = client(&host, &ca, policy);
    let mut gone = client
        .server_streaming(&WATCH_CART, get("gone"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(collect(&mut gone).await.1, Some(Code::Unavailable));
    assert_eq!(counted(&seen), (0, 0), "Unavailable is ignored");
    let mut quota = client
        .server_streaming(&WATCH_CART, get("quota"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(collect(&mut quota).await.1, Some(Code::ResourceExhausted));
    assert_eq!(counted(&seen), (0, 1), "ResourceExhausted is a failure");
    assert_eq!(carts.arrivals(&WATCH_CART), 2);
}

#[tokio::test(start_paused = true)]
async fn a_stream_dropped_by_its_caller_counts_nothing() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_watch_cart(|_, req| async move {
        let updates = futures_util::stream::iter(1..).then(move |n| {
            let id = req.id.clone();
            async move {
                tokio::time::sleep(SECOND).await;
                Ok(cart(&id, n))
            }
        });
        Ok(Response::new(updates))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let client = client(&host, &ca, policy);
    let mut stream: Streaming<Cart> = client
        .server_streaming(&WATCH_CART, get("c-1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stream.next().await.unwrap().unwrap().items, 1);
    drop(stream);
    settle().await;
    assert_eq!(counted(&seen), (0, 0));
}

/// A stream ignores `Settings::timeout`, ends at its own deadline with
/// DeadlineExceeded, and counts as a failure.
#[tokio::test(start_paused = true)]
async fn a_stream_ends_with_its_own_deadline_as_a_failure() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_watch_cart(|_, req| async move {
        let updates = futures_util::stream::iter(1..).then(move |n| {
            let id = req.id.clone();
            async move {
                tokio::time::sleep(SECOND).await;
                Ok(cart(&id, n))
            }
        });
        Ok(Response::new(updates))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let client = Client::new(
        &setup(&host),
        Settings {
            timeout: Duration::from_millis(500),
            breaker_policy: policy,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let mut request = get("c-1");
    request.set_timeout(Duration::from_millis(5500));
    let start = Instant::now();
    let mut stream = client
        .server_streaming(&WATCH_CART, request)
        .await
        .unwrap()
        .into_inner();
    let (items, end) = collect(&mut stream).await;
    assert_eq!(items, [1, 2, 3, 4, 5], "the unary timeout does not apply");
    assert_eq!(end, Some(Code::DeadlineExceeded));
    assert_eq!(start.elapsed(), Duration::from_millis(5500));
    assert_eq!(counted(&seen), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn a_client_stream_counts_once_at_its_one_response() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let client = client(&host, &ca, policy);
    let items = futures_util::stream::iter(["a", "b", "c"].map(|sku| Item { sku: sku.into() }));
    let cart: Response<Cart> = client
        .client_streaming(&ADD_ITEMS, tonic::Request::new(items))
        .await
        .unwrap();
    assert_eq!(cart.get_ref().items, 3);
    assert_eq!(counted(&seen), (1, 0));
    assert_eq!(carts.arrivals(&ADD_ITEMS), 1);
}

/// A request stream no attempt has read is sent whole by the next one:
/// the first attempt fails before anything is sent (a per-attempt
/// interceptor answers it `UNAVAILABLE`, as a client-side check that
/// fails once would), and the retry sends both items to carts.
#[tokio::test(start_paused = true)]
async fn a_client_stream_never_read_is_sent_by_the_next_attempt() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let intercepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let first_fails = {
        let intercepted = intercepted.clone();
        move |request: tonic::Request<()>| {
            if intercepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                return Err(Status::unavailable("not yet"));
            }
            Ok(request)
        }
    };
    let client = Client::new(
        &setup(&host),
        Settings {
            breaker_policy: Policy::consecutive(5),
            ..carts_settings(&ca)
        }
        .interceptor(first_fails),
    )
    .unwrap();
    let items = futures_util::stream::iter(["a", "b"].map(|sku| Item { sku: sku.into() }));
    let cart = client
        .client_streaming::<_, _, Cart>(&ADD_ITEMS, tonic::Request::new(items))
        .await
        .unwrap();
    assert_eq!(cart.get_ref().items, 2);
    assert_eq!(intercepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(carts.arrivals(&ADD_ITEMS), 1);
}

/// Once an attempt has read the request stream, a failed call is not
/// retried, whatever the classifier says: what it sent cannot be sent again.
#[tokio::test(start_paused = true)]
async fn a_client_stream_an_attempt_read_is_not_retried() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_add_items(|_, mut items| async move {
        while items.message().await?.is_some() {}
        Err::<Response<Cart>, _>(Status::unavailable("lost them"))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let client = client(&host, &ca, Policy::consecutive(5));
    let items = futures_util::stream::iter(["a", "b"].map(|sku| Item { sku: sku.into() }));
    let err = client
        .client_streaming::<_, _, Cart>(&ADD_ITEMS, tonic::Request::new(items))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(carts.arrivals(&ADD_ITEMS), 1);
}

#[tokio::test(start_paused = true)]
async fn a_bidirectional_stream_flows_and_counts_once_at_its_end() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let client = client(&host, &ca, policy);
    let (tx, rx) = tokio::sync::mpsc::channel::<Item>(4);
    let mut stream = client
        .streaming(
            &SYNC_ITEMS,
            tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx)),
        )
        .await
        .unwrap()
        .into_inner();
    for sku in ["a", "b"] {
        tx.send(Item { sku: sku.into() }).await.unwrap();
        let _: Cart = stream.message().await.unwrap().unwrap();
    }
    assert_eq!(counted(&seen), (0, 0), "open, not ended");
    drop(tx);
    assert!(stream.message().await.unwrap().is_none());
    assert_eq!(counted(&seen), (1, 0));
    assert_eq!(carts.arrivals(&SYNC_ITEMS), 1);
}

/// Streams opened across a server's connection ages (GOAWAY) open with no
/// error.
#[tokio::test(start_paused = true)]
async fn streams_open_across_goaways() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    let _carts = serve_tls(
        &host,
        &ca,
        "carts:9090",
        "carts",
        tonic::transport::Server::builder().max_connection_age(SECOND),
        carts.clone(),
    );
    let client = Client::new(
        &setup(&host),
        Settings {
            max_attempts: 1,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let start = Instant::now();
    let mut opened = 0;
    while start.elapsed() < 8 * SECOND {
        let mut stream = client
            .server_streaming(&WATCH_CART, get("c-1"))
            .await
            .unwrap_or_else(|e| panic!("open {opened} at {:?}: {e:?}", start.elapsed()))
            .into_inner();
        assert_eq!(collect(&mut stream).await, (vec![1, 2, 3], None));
        opened += 1;
        tokio::time::sleep(Duration::from_millis(70)).await;
    }
    assert!(host.dials("carts:9090") >= 4);
}

/// A stream that ends with Unavailable is ignored without asking the
/// classifier; any other end is classified with the stream's trailer.
#[tokio::test(start_paused = true)]
async fn the_classifier_sees_a_streams_trailer_but_not_its_unavailable_end() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_watch_cart(|_, req| async move {
        let end = if req.id == "gone" {
            Status::unavailable("shutting down")
        } else {
            let mut trailer = tonic::metadata::MetadataMap::new();
            trailer.insert("x-count-as", "failure".parse().unwrap());
            Status::with_metadata(Code::Aborted, "raced", trailer)
        };
        Ok(Response::new(futures_util::stream::iter(vec![Err(end)])))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let classify = {
        let asked = asked.clone();
        Classify::new(move |method, status, trailer| {
            asked.lock().unwrap().push(status.map(|s| s.code()));
            let mut c = default_classify(method, status, trailer);
            if trailer.get("x-count-as").is_some_and(|v| v == "failure") {
                c.breaker = Outcome::Failure;
            }
            c
        })
    };
    let (policy, seen) = recording();
    let client = Client::new(
        &setup(&host),
        Settings {
            classify,
            breaker_policy: policy,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let mut gone = client
        .server_streaming(&WATCH_CART, get("gone"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(collect(&mut gone).await.1, Some(Code::Unavailable));
    assert!(
        asked.lock().unwrap().is_empty(),
        "not asked about Unavailable"
    );
    let mut raced = client
        .server_streaming(&WATCH_CART, get("raced"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(collect(&mut raced).await.1, Some(Code::Aborted));
    assert_eq!(*asked.lock().unwrap(), [Some(Code::Aborted)]);
    assert_eq!(counted(&seen), (0, 1), "the trailer made it a failure");
}

/// After `Setup::stop()` an open stream ends Canceled, counting nothing:
/// read at once, or after the close has failed the connection under it.
#[tokio::test(start_paused = true)]
async fn an_open_stream_ends_canceled_when_the_client_stops() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    // One update, then none.
    carts.on_watch_cart(|_, req| async move {
        let first = futures_util::stream::once(async move { Ok(cart(&req.id, 1)) });
        Ok(Response::new(first.chain(futures_util::stream::pending())))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let setup = setup(&host);
    let client = Client::new(
        &setup,
        Settings {
            breaker_policy: policy,
            ..carts_settings(&ca)
        },
    )
    .unwrap();
    let mut streams: Vec<Streaming<Cart>> = Vec::new();
    for id in ["c-1", "c-2"] {
        let mut stream = client
            .server_streaming(&WATCH_CART, get(id))
            .await
            .unwrap()
            .into_inner();
        assert!(stream.message().await.unwrap().is_some());
        streams.push(stream);
    }
    setup.stop().await;
    for (i, stream) in streams.iter_mut().enumerate() {
        if i == 1 {
            // The connection's task has seen its IO fail, and so the stream.
            settle().await;
        }
        let err = stream.message().await.unwrap_err();
        assert_eq!(err.code(), Code::Cancelled, "stream {i}: {err:?}");
        assert_eq!(err.message(), "the client connection is closing");
        assert!(stream.message().await.unwrap().is_none());
    }
    assert_eq!(counted(&seen), (0, 0));
}

/// A stream whose reader is waiting for its next message when the client
/// stops ends Canceled at once: the close fails the connection under it,
/// which wakes the reader.
#[tokio::test(start_paused = true)]
async fn a_stream_waited_on_when_the_client_stops_ends_canceled_at_once() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    // One update, then none.
    carts.on_watch_cart(|_, req| async move {
        let first = futures_util::stream::once(async move { Ok(cart(&req.id, 1)) });
        Ok(Response::new(first.chain(futures_util::stream::pending())))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let setup = setup(&host);
    let client = Client::new(&setup, carts_settings(&ca)).unwrap();
    let mut stream: Streaming<Cart> = client
        .server_streaming(&WATCH_CART, get("c-1"))
        .await
        .unwrap()
        .into_inner();
    assert!(stream.message().await.unwrap().is_some());
    let start = Instant::now();
    let reader = tokio::spawn(async move { stream.message().await });
    tokio::time::sleep(SECOND).await;
    setup.stop().await;
    let err = tokio::time::timeout(10 * SECOND, reader)
        .await
        .expect("the stop ended the stream")
        .unwrap()
        .unwrap_err();
    assert_eq!(err.code(), Code::Cancelled, "{err:?}");
    assert_eq!(start.elapsed(), SECOND);
}

/// A stream whose connection breaks ends Unavailable, which the breaker
/// ignores.
#[tokio::test(start_paused = true)]
async fn a_stream_whose_connection_breaks_ends_unavailable_and_counts_nothing() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_watch_cart(|_, req| async move {
        let updates = futures_util::stream::iter(1..).then(move |n| {
            let id = req.id.clone();
            async move {
                tokio::time::sleep(SECOND).await;
                Ok(cart(&id, n))
            }
        });
        Ok(Response::new(updates))
    });
    let running = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let client = client(&host, &ca, policy);
    let mut stream: Streaming<Cart> = client
        .server_streaming(&WATCH_CART, get("c-1"))
        .await
        .unwrap()
        .into_inner();
    assert!(stream.message().await.unwrap().is_some());
    running.crash().await;
    let err = stream.message().await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert_eq!(counted(&seen), (0, 0));
}

// ---- deadlines while busy; what "opened" means -------------------------

/// Carts' WatchCart sends updates without pause, for ever.
fn busy_carts() -> Carts {
    let carts = Carts::new();
    carts.on_watch_cart(|_, req| async move {
        let updates = futures_util::stream::iter(1..).map(move |n| Ok(cart(&req.id, n)));
        Ok(Response::new(updates))
    });
    carts
}

/// A stream whose messages keep arriving still ends at its deadline: it
/// ends DeadlineExceeded, counts a failure (freeing its ticket) and ends
/// its span, with the stream still held.
#[tokio::test(start_paused = true)]
async fn a_busy_stream_ends_at_its_deadline() {
    let (ca, host, carts) = (Ca::new(), Host::new(), busy_carts());
    let _carts = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let client = client(&host, &ca, policy);
    let mut request = get("c-1");
    request.set_timeout(SECOND);
    let start = Instant::now();
    let mut stream = client
        .server_streaming::<_, Cart>(&WATCH_CART, request)
        .await
        .unwrap()
        .into_inner();
    let mut received = 0;
    let end = loop {
        // Each message is ready at once; time passes between them.
        match stream.next().await {
            Some(Ok(_)) => received += 1,
            Some(Err(status)) => break Some(status.code()),
            None => break None,
        }
        tokio::time::advance(Duration::from_millis(10)).await;
        assert!(received < 1_000, "still streaming after 10 s");
    };
    assert_eq!(end, Some(Code::DeadlineExceeded));
    assert_eq!(start.elapsed(), SECOND);
    assert_eq!(received, 100);
    assert_eq!(counted(&seen), (0, 1), "counted at its deadline");
    assert!(stream.next().await.is_none(), "ended");
    assert_eq!(counted(&seen), (0, 1));
}

/// A stream opened while serving an RPC ends at that RPC's deadline.
#[tokio::test(start_paused = true)]
async fn a_stream_ends_at_the_inherited_deadline() {
    let (ca, host, carts) = (Ca::new(), Host::new(), busy_carts());
    let _carts = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let client = client(&host, &ca, policy);
    let start = Instant::now();
    let deadline = start + Duration::from_millis(250);
    let inherited = humus::grpc::deadline::Inherited::new(Some(deadline), Default::default());
    let (received, end) = inherited
        .scope(async {
            let mut stream = client
                .server_streaming::<_, Cart>(&WATCH_CART, get("c-1"))
                .await
                .unwrap()
                .into_inner();
            let mut received = 0;
            loop {
                match stream.next().await {
                    Some(Ok(_)) => received += 1,
                    Some(Err(status)) => return (received, Some(status.code())),
                    None => return (received, None),
                }
                tokio::time::advance(Duration::from_millis(10)).await;
                assert!(received < 1_000, "still streaming after 10 s");
            }
        })
        .await;
    assert_eq!((received, end), (25, Some(Code::DeadlineExceeded)));
    assert_eq!(counted(&seen), (0, 1));
}

/// A stream dropped at its deadline (as a server drops a handler holding
/// it) counts the deadline: a failure. Dropped before it, nothing.
#[tokio::test(start_paused = true)]
async fn a_stream_dropped_at_its_deadline_counts_a_failure() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_watch_cart(|_, _| async move {
        Ok(Response::new(futures_util::stream::pending::<
            Result<Cart, Status>,
        >()))
    });
    let _carts = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let client = client(&host, &ca, policy);
    for (before, want) in [
        (Duration::from_millis(100), (0, 0)),
        (Duration::from_millis(1), (0, 1)),
    ] {
        let mut request = get("c-1");
        request.set_timeout(SECOND);
        let read = async {
            let mut stream = client
                .server_streaming::<_, Cart>(&WATCH_CART, request)
                .await
                .unwrap()
                .into_inner();
            stream.next().await
        };
        assert!(tokio::time::timeout(SECOND - before, read).await.is_err());
        settle().await;
        assert_eq!(
            counted(&seen),
            want,
            "dropped {before:?} before its deadline"
        );
    }
}

/// WatchCart with `never_retry`, as a `.proto` option makes it.
static WATCH_CART_ONCE: humus::grpc::client::Method = humus::grpc::client::Method {
    policy: humus::grpc::client::MethodPolicy {
        never_retry: true,
        ..humus::grpc::client::MethodPolicy::DEFAULT
    },
    ..WATCH_CART
};

/// A handler's trailers-only `Unavailable` until the `n`th open, which
/// (and every later one) streams three updates.
fn watch_unavailable_until(carts: &Carts, n: usize) {
    carts.on_watch_cart(move |seen, req| async move {
        if seen.n < n {
            return Err(unavailable());
        }
        let updates: Vec<Result<Cart, Status>> = (1..=3).map(|i| Ok(cart(&req.id, i))).collect();
        Ok(Response::new(futures_util::stream::iter(updates)))
    });
}

/// Whether the breaker rejected the call.
fn rejected(err: &Status) -> bool {
    err.source()
        .and_then(|s| s.downcast_ref::<humus::circuit::Rejected>())
        .is_some()
}

/// A server that answers an open with a trailers-only status (its
/// handler's error before any message: no response headers) has not
/// opened the stream (gRFC A6: a call is committed by the response's
/// headers): the open failed with that status, classified and retried as
/// a unary attempt. `Unavailable` counts as a failure, and is retried.
#[tokio::test(start_paused = true)]
async fn a_trailers_only_unavailable_open_is_an_attempts_failure_and_retried() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    watch_unavailable_until(&carts, 3);
    let _carts = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let client = client(&host, &ca, policy);
    let mut stream = client
        .server_streaming::<_, Cart>(&WATCH_CART, get("c-1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(carts.arrivals(&WATCH_CART), 3, "three opens");
    assert_eq!(counted(&seen), (0, 2), "two failed opens");
    assert_eq!(collect(&mut stream).await, (vec![1, 2, 3], None));
    assert_eq!(counted(&seen), (1, 2), "the stream, once at its end");
}

/// A `never_retry` method's trailers-only `Unavailable` is one attempt,
/// counted as a failure.
#[tokio::test(start_paused = true)]
async fn a_never_retry_streams_trailers_only_unavailable_is_one_open() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    watch_unavailable_until(&carts, 3);
    let _carts = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let client = client(&host, &ca, policy);
    let err = client
        .server_streaming::<_, Cart>(&WATCH_CART_ONCE, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(carts.arrivals(&WATCH_CART), 1, "never retried");
    assert_eq!(counted(&seen), (0, 1));
}

/// A dependency that refuses every stream with a trailers-only
/// `Unavailable` trips the breaker (the default policy: 5 failures in a
/// row), which then rejects opens without sending them.
#[tokio::test(start_paused = true)]
async fn trailers_only_unavailable_opens_trip_the_breaker() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    watch_unavailable_until(&carts, usize::MAX);
    let _carts = start_carts(&host, &ca, &carts);
    let client = Client::new(&setup(&host), carts_settings(&ca)).unwrap();
    let mut calls = 0;
    loop {
        calls += 1;
        assert!(calls <= 5, "the breaker never opened");
        let err = client
            .server_streaming::<_, Cart>(&WATCH_CART, get("c-1"))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unavailable);
        if rejected(&err) {
            break;
        }
    }
    assert_eq!(carts.arrivals(&WATCH_CART), 5, "five failed opens");
    let err = client
        .server_streaming::<_, Cart>(&WATCH_CART, get("c-2"))
        .await
        .unwrap_err();
    assert!(rejected(&err), "{err:?}");
    assert_eq!(carts.arrivals(&WATCH_CART), 5, "nothing sent while open");
}

/// Any other trailers-only status at the open is classified as a unary
/// attempt's: `ResourceExhausted` with a pushback is retried after it, and
/// counts as a failure; `NotFound` (the dependency answered) is not
/// retried and counts as a success.
#[tokio::test(start_paused = true)]
async fn a_trailers_only_status_at_the_open_is_classified_as_a_unary_attempts() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_watch_cart(|_, _| async move {
        let mut trailer = tonic::metadata::MetadataMap::new();
        trailer.insert("grpc-retry-pushback-ms", "10".parse().unwrap());
        let status = Status::with_metadata(Code::ResourceExhausted, "shedding", trailer);
        Err::<Response<futures_util::stream::Empty<Result<Cart, Status>>>, _>(status)
    });
    let _carts = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let client = client(&host, &ca, policy);
    let started = Instant::now();
    let err = client
        .server_streaming::<_, Cart>(&WATCH_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    assert_eq!(carts.arrivals(&WATCH_CART), 3, "max_attempts");
    assert!(started.elapsed() >= Duration::from_millis(20), "pushbacks");
    assert_eq!(counted(&seen), (0, 3));

    carts.on_watch_cart(|_, _| async move {
        Err::<Response<futures_util::stream::Empty<Result<Cart, Status>>>, _>(Status::not_found(
            "no cart",
        ))
    });
    let err = client
        .server_streaming::<_, Cart>(&WATCH_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(carts.arrivals(&WATCH_CART), 4, "not retried");
    assert_eq!(counted(&seen), (1, 3));
}

/// A bidirectional stream's trailers-only `Unavailable` is an attempt's
/// failure too: each open counts as one in the breaker (retried while its
/// request stream is unread; here the request stream is read at once, so
/// whether a retry follows is tonic's timing, and not asserted).
#[tokio::test(start_paused = true)]
async fn a_bidirectional_streams_trailers_only_unavailable_counts_each_open() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_sync_items(|_, _| async move {
        Err::<Response<futures_util::stream::Empty<Result<Cart, Status>>>, _>(unavailable())
    });
    let _carts = start_carts(&host, &ca, &carts);
    let (policy, seen) = recording();
    let client = client(&host, &ca, policy);
    let items = futures_util::stream::iter([Item { sku: "a".into() }]);
    let err = client
        .streaming::<_, _, Cart>(&SYNC_ITEMS, tonic::Request::new(items))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    let opens = carts.arrivals(&SYNC_ITEMS);
    assert!((1..=3).contains(&opens), "{opens}");
    assert_eq!(counted(&seen), (0, i64::try_from(opens).unwrap()));
}

/// An open the breaker rejects reached nothing: it is a failed open, not
/// retried (the breaker would reject the next too), counting nothing.
#[tokio::test(start_paused = true)]
async fn an_open_the_breaker_rejects_is_a_failed_open() {
    let (ca, host, carts) = (Ca::new(), Host::new(), Carts::new());
    carts.on_watch_cart(|_, _| async move {
        Err::<Response<futures_util::stream::Empty<Result<Cart, Status>>>, _>(
            Status::resource_exhausted("no"),
        )
    });
    let _carts = start_carts(&host, &ca, &carts);
    let client = client(&host, &ca, Policy::consecutive(1));
    let _ = client
        .server_streaming::<_, Cart>(&WATCH_CART, get("c-1"))
        .await;
    let err = client
        .server_streaming::<_, Cart>(&WATCH_CART, get("c-2"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert!(
        err.source()
            .is_some_and(|s| s.is::<humus::circuit::Rejected>()),
        "{err:?}"
    );
    assert_eq!(carts.arrivals(&WATCH_CART), 1);
}

/// A client-streaming call whose server ends it OK without its one
/// response message returns INTERNAL, and counts as the classifier says of
/// INTERNAL (here: a failure), not as a success.
#[tokio::test(start_paused = true)]
async fn a_client_stream_with_no_response_message_is_internal_and_counts_so() {
    let host = Host::new();
    let odd =
        tower::service_fn(|_req: http::Request<tonic::body::Body>| async {
            let mut trailers = http::HeaderMap::new();
            trailers.insert("grpc-status", "0".parse().unwrap());
            let frames = futures_util::stream::iter([Ok::<_, std::convert::Infallible>(
                http_body::Frame::<bytes::Bytes>::trailers(trailers),
            )]);
            let body = tonic::body::Body::new(http_body_util::StreamBody::new(frames));
            let mut response = http::Response::new(body);
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/grpc"),
            );
            Ok::<_, std::convert::Infallible>(response)
        });
    let _odd = serve_plain(&host, "odd:9090", odd);
    let (policy, seen) = recording();
    let classify = Classify::new(|method, status, trailer| {
        let mut c = default_classify(method, status, trailer);
        if status.is_some_and(|s| s.code() == Code::Internal) {
            c.breaker = Outcome::Failure;
        }
        c
    });
    let client = Client::new(
        &setup(&host),
        Settings {
            addr: "odd:9090".into(),
            tls: None,
            breaker_policy: policy,
            classify,
            ..Settings::default()
        },
    )
    .unwrap();
    let items = futures_util::stream::iter(["a"].map(|sku| Item { sku: sku.into() }));
    let err = client
        .client_streaming::<_, _, Cart>(&ADD_ITEMS, tonic::Request::new(items))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Internal);
    assert_eq!(counted(&seen), (0, 1), "INTERNAL, not a success");
}

/// An open answered by a proxy's error page (an HTTP 503, not a gRPC
/// response) reached no gRPC server: a failed open, retried and counted
/// against the dependency as a unary attempt is.
#[tokio::test(start_paused = true)]
async fn an_open_answered_by_a_proxys_error_page_is_a_failed_open() {
    let host = Host::new();
    let proxy = tower::service_fn(|_req: http::Request<tonic::body::Body>| async {
        let mut response = http::Response::new(tonic::body::Body::new(http_body_util::Full::new(
            bytes::Bytes::from_static(b"no healthy upstream"),
        )));
        *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain"),
        );
        Ok::<_, std::convert::Infallible>(response)
    });
    let _proxy = serve_plain(&host, "proxy:9090", proxy);
    let (policy, seen) = recording();
    let client = Client::new(
        &setup(&host),
        Settings {
            addr: "proxy:9090".into(),
            tls: None,
            breaker_policy: policy,
            ..Settings::default()
        },
    )
    .unwrap();
    let err = client
        .server_streaming::<_, Cart>(&WATCH_CART, get("c-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(counted(&seen), (0, 3), "three failed opens");
}
