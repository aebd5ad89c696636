//! `humus::grpc::deadline`: the served RPC's deadline and context, in scope
//! for the task that serves it, and the tower layer that sets them.

use std::sync::Arc;
use std::time::Duration;

use humus::grpc::deadline::{InheritLayer, Inherited};
use opentelemetry::baggage::BaggageExt;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::BaggagePropagator;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

fn with_member(value: &str) -> Context {
    Context::new().with_baggage([KeyValue::new("tenant", value.to_owned())])
}

fn tenant() -> Option<String> {
    Context::current()
        .baggage()
        .get("tenant")
        .map(|v| v.as_str().to_owned())
}

#[tokio::test]
async fn nothing_is_inherited_outside_a_scope() {
    assert!(Inherited::current().is_none());
}

#[test]
fn nothing_is_inherited_outside_a_task() {
    assert!(Inherited::current().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_holds_across_awaits_and_threads_but_not_in_spawned_tasks() {
    let deadline = Instant::now() + Duration::from_secs(3);
    let inherited = Inherited::new(Some(deadline), with_member("a"));
    let served = tokio::spawn(inherited.scope(async move {
        for _ in 0..20 {
            // Each yield may resume on the other worker thread.
            tokio::task::yield_now().await;
            let now = Inherited::current().expect("in scope");
            assert_eq!(now.deadline(), Some(deadline));
            assert_eq!(tenant().as_deref(), Some("a"), "the context is attached");
        }
        let spawned = tokio::spawn(async { (Inherited::current().is_none(), tenant()) });
        spawned.await.unwrap()
    }));
    let (none_in_spawned, spawned_tenant) = served.await.unwrap();
    assert!(none_in_spawned, "a spawned task inherits nothing");
    assert_eq!(spawned_tenant, None);
    assert!(
        Inherited::current().is_none(),
        "nothing leaks out of the scope"
    );
    assert_eq!(tenant(), None);
}

#[tokio::test]
async fn scopes_nest_and_the_innermost_is_current() {
    let outer = Inherited::new(None, with_member("outer"));
    let inner_deadline = Instant::now() + Duration::from_secs(1);
    let inner = Inherited::new(Some(inner_deadline), with_member("inner"));
    outer
        .scope(async move {
            assert_eq!(tenant().as_deref(), Some("outer"));
            inner
                .scope(async {
                    let now = Inherited::current().unwrap();
                    assert_eq!(now.deadline(), Some(inner_deadline));
                    assert_eq!(tenant().as_deref(), Some("inner"));
                })
                .await;
            assert_eq!(Inherited::current().unwrap().deadline(), None);
            assert_eq!(tenant().as_deref(), Some("outer"));
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn the_deadline_is_the_requests_grpc_timeout_from_when_it_was_received() {
    let received = Instant::now();
    let mut headers = http::HeaderMap::new();
    let none = Inherited::from_headers(&headers, received, Context::new());
    assert_eq!(none.deadline(), None, "no grpc-timeout, no deadline");
    for (value, want) in [
        ("1S", Some(Duration::from_secs(1))),
        ("250m", Some(Duration::from_millis(250))),
        ("2M", Some(Duration::from_secs(120))),
        ("7u", Some(Duration::from_micros(7))),
        ("1.5S", None),
        ("123456789S", None),
        ("10", None),
        ("S", None),
        ("-1S", None),
        ("1s", None),
    ] {
        headers.insert("grpc-timeout", value.parse().unwrap());
        let inherited = Inherited::from_headers(&headers, received, with_member("x"));
        assert_eq!(
            inherited.deadline(),
            want.map(|d| received + d),
            "grpc-timeout {value}"
        );
        assert_eq!(
            inherited
                .context()
                .baggage()
                .get("tenant")
                .unwrap()
                .as_str(),
            "x"
        );
    }
}

/// What the layer's inner service saw: the inherited deadline and tenant
/// in `call`, then in its future.
type SeenInCall = (Option<Option<Instant>>, Option<String>);

#[tokio::test(start_paused = true)]
async fn the_layer_serves_each_request_inside_the_scope_of_its_headers() {
    let propagator: Arc<dyn TextMapPropagator + Send + Sync> = Arc::new(BaggagePropagator::new());
    // Every caller trusted: the baggage is handed on as it came.
    let layer = InheritLayer::new(propagator).trust_every_caller();
    let seen = Arc::new(std::sync::Mutex::new(Vec::<SeenInCall>::new()));
    let in_call = seen.clone();
    let inner = tower::service_fn(move |_req: http::Request<()>| {
        // In `call`: already in scope.
        in_call
            .lock()
            .unwrap()
            .push((Inherited::current().map(|i| i.deadline()), tenant()));
        async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            // In the future, after an await.
            Ok::<_, std::convert::Infallible>(http::Response::new((
                Inherited::current().map(|i| i.deadline()),
                tenant(),
            )))
        }
    });
    let mut svc = layer.layer(inner);

    tokio::time::advance(Duration::from_secs(5)).await;
    let received = Instant::now();
    let request = http::Request::builder()
        .header("grpc-timeout", "1500m")
        .header("baggage", "tenant=acme")
        .body(())
        .unwrap();
    let future = svc.ready().await.unwrap().call(request);
    // Measured from when the request reached the layer, not from the poll.
    tokio::time::advance(Duration::from_millis(100)).await;
    let (deadline, member) = future.await.unwrap().into_body().into_inner();
    let want = Some(received + Duration::from_millis(1500));
    assert_eq!(deadline, Some(want));
    assert_eq!(member.as_deref(), Some("acme"));
    assert_eq!(seen.lock().unwrap()[0], (Some(want), Some("acme".into())));

    // A request with neither: in scope, with no deadline and no baggage.
    let request = http::Request::builder()
        .header("grpc-timeout", "soon")
        .body(())
        .unwrap();
    let (deadline, member) = svc
        .ready()
        .await
        .unwrap()
        .call(request)
        .await
        .unwrap()
        .into_body()
        .into_inner();
    assert_eq!(
        deadline,
        Some(None),
        "a malformed grpc-timeout is no deadline"
    );
    assert_eq!(member, None);
    assert!(Inherited::current().is_none());
}

#[tokio::test]
async fn the_layer_takes_the_setups_propagator() {
    let telemetry = humus::telemetry::Telemetry::builder()
        .propagator(BaggagePropagator::new())
        .build();
    let setup = humus::Setup::new().with_telemetry(telemetry);
    let mut svc = InheritLayer::from_setup(&setup).layer(tower::service_fn(
        |_req: http::Request<()>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(tenant()))
        },
    ));
    let request = http::Request::builder()
        .header("baggage", "tenant=from-setup")
        .body(())
        .unwrap();
    let response = svc.ready().await.unwrap().call(request).await.unwrap();
    assert_eq!(
        response.into_body().into_inner().as_deref(),
        Some("from-setup")
    );
}
