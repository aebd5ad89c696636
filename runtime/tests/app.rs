//! The App's lifecycle: the order of its steps, and its exit codes (0 after
//! a clean stop, 78 for a settings error, 1 for any other error, 130 for a
//! stop a second signal forced), with the on-stop hooks run after every
//! server has stopped, and when init fails.

mod client_support;
mod lines_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use client_support::*;
use humus::App;
use humus::app::{EXIT_FORCED, Error, ErrorKind, Exit, Providers};
use humus::grpc::client::{self, Client};
use humus::grpc::server::{Server, Settings};
use humus::testing::{Ca, Host};
use lines_support::Lines;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Code, Response};

type Steps = Arc<Mutex<Vec<String>>>;

fn push(steps: &Steps, step: impl Into<String>) {
    steps.lock().unwrap().push(step.into());
}

/// An App on `host` whose every step is recorded in `steps`.
/// The orders server of these tests, on `orders:8443` with `cert`.
fn orders_server(setup: &humus::Setup, cert: rustls::ServerConfig) -> Result<Server, Error> {
    Ok(Server::new(
        setup,
        Settings {
            addr: "orders:8443".into(),
            tls: Some(Arc::new(cert)),
            ..Settings::default()
        },
    )?)
}

fn app(host: &Host, steps: &Steps) -> App {
    let (t, f) = (steps.clone(), steps.clone());
    App::new()
        .host(host.clone())
        .telemetry(move |_| {
            push(&t, "telemetry");
            let t = t.clone();
            Ok(
                Providers::new(humus::telemetry::Telemetry::default()).on_shutdown(move || {
                    push(&t, "telemetry shutdown");
                    Ok(())
                }),
            )
        })
        .faults(move |setup| {
            // After the telemetry: the Setup already has it.
            push(&f, format!("faults {}", setup.faults().is_on()));
            Ok(humus::fault::Injector::off())
        })
}

#[tokio::test(start_paused = true)]
async fn a_clean_stop_exits_0_after_every_step_in_order() {
    let (ca, host) = (Ca::new(), Host::new());
    let steps = Steps::default();
    let (stop, stopped) = oneshot::channel::<()>();
    let s = steps.clone();
    let h = host.clone();
    let cert = ca.issue("orders").server_config();
    let client_settings = carts_settings(&ca);
    let run = tokio::spawn(
        app(&host, &steps)
            .stop_on(async move {
                let _ = stopped.await;
            })
            .run(move |setup| async move {
                push(&s, "init");
                let carts = Client::new(&setup, client_settings)?;
                let hook = s.clone();
                let host = h.clone();
                setup.on_stop(move || async move {
                    // Every server has stopped: nothing listens any more.
                    push(
                        &hook,
                        format!("on_stop listening={}", host.is_listening("orders:8443")),
                    );
                });
                drop(carts);
                let server = orders_server(&setup, cert)?;
                Ok(vec![server])
            }),
    );
    for _ in 0..100 {
        if host.is_listening("orders:8443") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(host.is_listening("orders:8443"));
    push(&steps, "serving");
    stop.send(()).unwrap();
    let exit = run.await.unwrap();
    assert_eq!(exit.code(), 0, "{:?}", exit.error());
    assert_eq!(
        *steps.lock().unwrap(),
        [
            "telemetry",
            "faults false",
            "init",
            "serving",
            "on_stop listening=false",
            "telemetry shutdown"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_bad_setting_exits_78_naming_every_field_and_runs_the_hooks() {
    let host = Host::new();
    let steps = Steps::default();
    let s = steps.clone();
    let exit = app(&host, &steps)
        .run(move |setup| async move {
            // A client built before the failure: its hook still runs.
            let _carts = Client::new(
                &setup,
                client::Settings {
                    addr: "carts:9090".into(),
                    ..client::Settings::default()
                },
            )?;
            let hook = s.clone();
            setup.on_stop(move || async move { push(&hook, "on_stop") });
            let settings: Settings =
                serde_json::from_str(r#"{"addr": "tcp://:1", "max_connection_age": "0s"}"#)
                    .map_err(Error::settings)?;
            humus::app::check_server(&settings)?;
            let server = Server::new(&setup, settings)?;
            Ok(vec![server])
        })
        .await;
    assert_eq!(exit.code(), 78);
    let error = exit.error().unwrap();
    assert_eq!(error.kind(), ErrorKind::Settings);
    let text = error.to_string();
    assert!(
        text.contains("addr") && text.contains("max_connection_age"),
        "{text}"
    );
    assert_eq!(
        *steps.lock().unwrap(),
        ["telemetry", "faults false", "on_stop", "telemetry shutdown"]
    );
}

#[tokio::test(start_paused = true)]
async fn client_settings_that_fail_their_checks_exit_78_and_a_constructors_refusal_1() {
    let host = Host::new();
    let steps = Steps::default();
    let read = r#"{"addr": "carts:9090", "timeout": "0s", "max_attempts": 0}"#;
    let exit = app(&host, &steps)
        .run(|setup| async move {
            let settings: client::Settings = serde_json::from_str(read).map_err(Error::settings)?;
            humus::app::check_client(&settings)?;
            Client::new(&setup, settings)?;
            Ok(vec![])
        })
        .await;
    assert_eq!(exit.code(), 78);
    let text = exit.error().unwrap().to_string();
    assert!(
        text.contains("timeout") && text.contains("max_attempts"),
        "{text}"
    );

    // Settings built in code that the constructor refuses: a fault in the
    // code.
    let exit = app(&host, &Steps::default())
        .run(|setup| async move {
            let settings = client::Settings {
                addr: "carts:9090".into(),
                backoff_base: Duration::from_secs(2),
                backoff_max: Duration::from_secs(1),
                ..client::Settings::default()
            };
            Client::new(&setup, settings)?;
            Ok(vec![])
        })
        .await;
    assert_eq!(exit.code(), 1);
    assert!(exit.error().unwrap().to_string().contains("backoff_max"));
}

#[tokio::test(start_paused = true)]
async fn any_other_init_error_exits_1() {
    let host = Host::new();
    let steps = Steps::default();
    let exit = app(&host, &steps)
        .run(|_| async move {
            Err::<Vec<Server>, _>(Error::other(std::io::Error::other("the schema is missing")))
        })
        .await;
    assert_eq!(exit.code(), 1);
    assert_eq!(exit.error().unwrap().kind(), ErrorKind::Other);
    assert_eq!(
        *steps.lock().unwrap(),
        ["telemetry", "faults false", "telemetry shutdown"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_server_that_cannot_listen_exits_1() {
    let host = Host::new();
    let _taken = host.listen("orders:8443");
    let steps = Steps::default();
    let exit = app(&host, &steps)
        .run(|setup| async move {
            Ok(vec![Server::new(
                &setup,
                Settings {
                    addr: "orders:8443".into(),
                    plaintext: true,
                    ..Settings::default()
                },
            )?])
        })
        .await;
    assert_eq!(exit.code(), 1);
    assert!(
        exit.error().unwrap().to_string().contains("orders:8443"),
        "{:?}",
        exit.error()
    );
}

/// A server whose settings say neither TLS nor plain text does not start:
/// exit 78, naming the field and both ways out.
#[tokio::test]
async fn a_server_with_neither_tls_nor_plaintext_exits_78_naming_both_ways_out() {
    let exit = App::new()
        .stop_on(std::future::pending())
        .run(|setup| async move {
            // As read from a configuration: checked where it is read.
            let settings = Settings {
                addr: "127.0.0.1:0".into(),
                ..Settings::default()
            };
            humus::app::check_server(&settings)?;
            Ok(vec![Server::new(&setup, settings)?])
        })
        .await;
    assert_eq!(exit.code(), 78, "{:?}", exit.error());
    let text = exit.error().unwrap().to_string();
    assert!(text.contains("plaintext is not set"), "{text}");
    assert!(
        text.contains("set tls (") && text.contains("or plaintext = true"),
        "{text}"
    );
}

/// An address this machine does not have (TEST-NET-3, RFC 5737: never a
/// local address) can only be mended in the settings: exit 78.
#[tokio::test]
async fn a_server_address_the_machine_does_not_have_exits_78_naming_the_setting() {
    let exit = App::new()
        .stop_on(std::future::pending())
        .run(|setup| async move {
            Ok(vec![Server::new(
                &setup,
                Settings {
                    addr: "203.0.113.1:0".into(),
                    plaintext: true,
                    ..Settings::default()
                },
            )?])
        })
        .await;
    assert_eq!(exit.code(), 78, "{:?}", exit.error());
    let text = exit.error().unwrap().to_string();
    assert!(
        text.starts_with("listening on 203.0.113.1:0 (the server's addr setting): "),
        "{text}"
    );
}

/// An address another socket holds fails the App (exit 1: another
/// process's, not the settings'), and the error names the variable an
/// operator sets (`WALLET_ADDR`) with the setting, when the settings were
/// read from the environment.
#[tokio::test]
async fn a_server_address_in_use_names_its_environment_variable_and_its_setting() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    let addr = taken.local_addr().unwrap().to_string();
    let settings =
        humus::app::Env::from_pairs([("WALLET_ADDR", addr.as_str()), ("WALLET_PLAINTEXT", "true")])
            .read_all(|env| env.server("WALLET_"))
            .expect("good settings");
    let exit = App::new()
        .stop_on(std::future::pending())
        .run(|setup| async move { Ok(vec![Server::new(&setup, settings)?]) })
        .await;
    assert_eq!(exit.code(), 1, "{:?}", exit.error());
    let text = exit.error().unwrap().to_string();
    assert!(
        text.starts_with(&format!(
            "listening on {addr} (WALLET_ADDR, the server's addr setting): "
        )),
        "{text}"
    );
    let source = std::error::Error::source(exit.error().unwrap().get_ref())
        .and_then(|e| e.downcast_ref::<std::io::Error>())
        .expect("the bind's I/O error");
    assert_eq!(source.kind(), std::io::ErrorKind::AddrInUse, "{text}");
    drop(taken);
}

/// The record of a settings refusal's exit carries what is wrong, so a
/// reader of the log meets the bad variables in the exit-78 line, not
/// after it (in what `main` prints once the App has returned).
#[tokio::test(start_paused = true)]
async fn a_settings_refusals_exit_record_names_what_is_wrong() {
    let out = Lines::default();
    let lines = out.clone();
    let exit = App::new()
        .telemetry(move |_| {
            Ok(Providers::new(
                humus::telemetry::Telemetry::builder()
                    .logger_provider(humus::telemetry::LineLogs::to(lines))
                    .build(),
            ))
        })
        .run(|_| async {
            let settings = humus::app::Env::from_pairs([("LEDGER_MAX_ATTEMPTS", "0")])
                .read_all(|env| env.client("LEDGER_"))?;
            drop(settings);
            Ok(vec![])
        })
        .await;
    assert_eq!(exit.code(), 78, "{:?}", exit.error());
    assert_eq!(
        out.written(),
        "ERROR humus::app: exit 78 (a bad setting): LEDGER_ADDR: not set; \
         LEDGER_MAX_ATTEMPTS: is 0, want 1 or more (1 turns retries off)\n"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failing_telemetry_function_exits_with_its_errors_code() {
    let exit = App::new()
        .telemetry(|_| Err(Error::settings("OTEL_EXPORTER_OTLP_ENDPOINT: not a URL")))
        .run(|_| async { Ok(vec![]) })
        .await;
    assert_eq!(exit.code(), 78);
    let exit = App::new()
        .faults(|_| Err(Error::other("the codec refused its key")))
        .run(|_| async { Ok(vec![]) })
        .await;
    assert_eq!(exit.code(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_failing_faults_function_exits_78_for_a_bad_setting_after_the_hooks_and_the_flush() {
    let steps = Steps::default();
    let (f, i) = (steps.clone(), steps.clone());
    let exit = app(&Host::new(), &steps)
        .faults(move |setup| {
            let hook = f.clone();
            setup.on_stop(move || async move { push(&hook, "faults' hook") });
            Err(Error::settings(
                "HUMUS_FAULT_KEY: not 32 bytes of base64 (set a key of `openssl rand -base64 32`)",
            ))
        })
        .run(move |_| async move {
            push(&i, "init");
            Ok(vec![])
        })
        .await;
    assert_eq!(exit.code(), 78, "{:?}", exit.error());
    assert_eq!(exit.error().unwrap().kind(), ErrorKind::Settings);
    assert!(
        exit.error()
            .unwrap()
            .to_string()
            .starts_with("HUMUS_FAULT_KEY: "),
        "{:?}",
        exit.error()
    );
    // No init; the hooks registered so far, then the flush.
    assert_eq!(
        *steps.lock().unwrap(),
        ["telemetry", "faults' hook", "telemetry shutdown"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_failing_telemetry_function_runs_the_hooks_it_registered() {
    let steps = Steps::default();
    let t = steps.clone();
    let exit = App::new()
        .telemetry(move |setup| {
            // A provider built before the one that failed, closed by a hook.
            let hook = t.clone();
            setup.on_stop(move || async move { push(&hook, "tracer provider shut down") });
            Err(Error::other("the meter provider could not start"))
        })
        .faults(|_| panic!("not run after the telemetry failed"))
        .run(|_| async { panic!("not run after the telemetry failed") })
        .await;
    assert_eq!(exit.code(), 1, "{:?}", exit.error());
    assert_eq!(
        exit.error().unwrap().to_string(),
        "the meter provider could not start"
    );
    assert_eq!(*steps.lock().unwrap(), ["tracer provider shut down"]);
}

/// An App serving carts at `carts:9090` (a `shutdown_grace` of a minute),
/// stopped by the signals sent on the returned sender, with an on-stop
/// hook that takes `hook_takes`; and a call to it in flight, whose handler
/// answers after an hour.
async fn draining_app(
    ca: &Ca,
    host: &Host,
    steps: &Steps,
    hook_takes: Duration,
) -> (
    mpsc::UnboundedSender<()>,
    JoinHandle<Exit>,
    JoinHandle<Result<tonic::Response<Cart>, tonic::Status>>,
) {
    let carts = Carts::new();
    carts.on_get_cart(|_, req| async move {
        tokio::time::sleep(3600 * SECOND).await;
        Ok(Response::new(cart(&req.id, 1)))
    });
    let (signal, signals) = mpsc::unbounded_channel::<()>();
    let cert = ca.issue("carts").server_config();
    let s = steps.clone();
    let run = tokio::spawn(
        app(host, steps)
            .stop_signals(UnboundedReceiverStream::new(signals))
            .stop_timeout(2 * hook_takes + SECOND)
            .run(move |setup| async move {
                let hook = s.clone();
                setup.on_stop(move || async move {
                    tokio::time::sleep(hook_takes).await;
                    push(&hook, "on_stop");
                });
                let server = Server::new(
                    &setup,
                    Settings {
                        addr: "carts:9090".into(),
                        tls: Some(Arc::new(cert)),
                        shutdown_grace: 60 * SECOND,
                        ..Settings::default()
                    },
                )?
                .add_service(CartsService(carts));
                Ok(vec![server])
            }),
    );
    for _ in 0..100 {
        if host.is_listening("carts:9090") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(host.is_listening("carts:9090"));
    let client = Client::new(
        &setup(host),
        client::Settings {
            max_attempts: 1,
            timeout: 7200 * SECOND,
            ..carts_settings(ca)
        },
    )
    .unwrap();
    let call = tokio::spawn(async move { client.unary::<_, Cart>(&GET_CART, get("slow")).await });
    settle().await;
    (signal, run, call)
}

#[tokio::test(start_paused = true)]
async fn a_second_signal_while_draining_stops_at_once_answering_the_calls_in_flight_unavailable() {
    let (ca, host, steps) = (Ca::new(), Host::new(), Steps::default());
    let (signal, run, call) = draining_app(&ca, &host, &steps, Duration::ZERO).await;
    assert_eq!(host.accepted("carts:9090"), 1);

    // The first signal: a graceful stop, which waits for the call.
    signal.send(()).unwrap();
    tokio::time::sleep(SECOND).await;
    assert!(!host.is_listening("carts:9090"), "it stopped accepting");
    assert!(!run.is_finished(), "it drains within its grace");
    assert!(!call.is_finished());

    // The second: at once (within 200 ms), the call answered UNAVAILABLE
    // as its connection closes, no hook, no flush.
    let forced = tokio::time::Instant::now();
    signal.send(()).unwrap();
    let exit = run.await.unwrap();
    assert_eq!(exit.code(), EXIT_FORCED);
    assert_eq!(exit.code(), 130);
    let error = exit.error().unwrap();
    assert_eq!(error.kind(), ErrorKind::Forced);
    assert_eq!(error.exit_code(), 130);
    assert!(error.to_string().contains("second stop signal"), "{error}");
    let status = call.await.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(status.message(), "the server stopped before the call ended");
    assert!(
        forced.elapsed() <= Duration::from_millis(200),
        "stopped after {:?}",
        forced.elapsed()
    );
    assert_eq!(*steps.lock().unwrap(), ["telemetry", "faults false"]);
}

#[tokio::test(start_paused = true)]
async fn a_second_signal_during_the_on_stop_hooks_stops_at_once() {
    let (ca, host, steps) = (Ca::new(), Host::new(), Steps::default());
    let hook_takes = 600 * SECOND;
    let (signal, run, call) = draining_app(&ca, &host, &steps, hook_takes).await;
    signal.send(()).unwrap();
    // Past the grace, at whose end the call was answered UNAVAILABLE:
    // the hook is running.
    tokio::time::sleep(61 * SECOND).await;
    let status = call.await.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(!run.is_finished(), "the hook takes {hook_takes:?}");

    let forced = tokio::time::Instant::now();
    signal.send(()).unwrap();
    let exit = run.await.unwrap();
    assert_eq!(exit.code(), 130, "{:?}", exit.error());
    assert!(
        exit.error()
            .unwrap()
            .to_string()
            .ends_with("the on-stop hooks not yet run, and the telemetry's flush, were skipped"),
        "{:?}",
        exit.error()
    );
    assert!(forced.elapsed() < SECOND, "after {:?}", forced.elapsed());
    assert_eq!(*steps.lock().unwrap(), ["telemetry", "faults false"]);
}

#[tokio::test(start_paused = true)]
async fn one_signal_drains_and_exits_0_and_a_signal_stream_that_ends_forces_nothing() {
    let (ca, host, steps) = (Ca::new(), Host::new(), Steps::default());
    let (signal, run, call) = draining_app(&ca, &host, &steps, SECOND).await;
    signal.send(()).unwrap();
    drop(signal);
    let started = tokio::time::Instant::now();
    let exit = run.await.unwrap();
    assert_eq!(exit.code(), 0, "{:?}", exit.error());
    // The whole grace, then the hook.
    let took = started.elapsed();
    assert!(took >= 61 * SECOND && took < 62 * SECOND, "{took:?}");
    assert!(call.await.unwrap().is_err());
    assert_eq!(
        *steps.lock().unwrap(),
        ["telemetry", "faults false", "on_stop", "telemetry shutdown"]
    );
}

/// Pushes `step` when dropped: whether init's future was dropped.
struct OnDrop(Steps, &'static str);

impl Drop for OnDrop {
    fn drop(&mut self) {
        push(&self.0, self.1);
    }
}

/// An App whose init registers an on-stop hook that takes `hook_takes`,
/// then waits an hour (`fails` = false) or fails at once after registering
/// it (`fails` = true), stopped by the signals sent on the returned sender.
fn starting_app(
    steps: &Steps,
    hook_takes: Duration,
    fails: bool,
) -> (mpsc::UnboundedSender<()>, JoinHandle<Exit>) {
    let (signal, signals) = mpsc::unbounded_channel::<()>();
    let s = steps.clone();
    let run = tokio::spawn(
        app(&Host::new(), steps)
            .stop_signals(UnboundedReceiverStream::new(signals))
            .stop_timeout(3600 * SECOND)
            .run(move |setup| async move {
                push(&s, "init");
                let hook = s.clone();
                setup.on_stop(move || async move {
                    tokio::time::sleep(hook_takes).await;
                    push(&hook, "on_stop");
                });
                if fails {
                    return Err(Error::other("the cache could not load"));
                }
                let _dropped = OnDrop(s.clone(), "init dropped");
                tokio::time::sleep(3600 * SECOND).await;
                push(&s, "init done");
                Ok(vec![])
            }),
    );
    (signal, run)
}

/// The App's exit, which comes before its init would have ended.
async fn stopped_before_init_ends(run: JoinHandle<Exit>) -> Exit {
    tokio::time::timeout(900 * SECOND, run)
        .await
        .expect("the App stops before init ends")
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_signal_during_init_drops_it_runs_the_hooks_of_what_it_built_and_exits_0() {
    let steps = Steps::default();
    let (signal, run) = starting_app(&steps, SECOND, false);
    tokio::time::sleep(10 * SECOND).await;
    assert!(!run.is_finished());
    let stopped = tokio::time::Instant::now();
    signal.send(()).unwrap();
    let exit = stopped_before_init_ends(run).await;
    assert_eq!(exit.code(), 0, "{:?}", exit.error());
    assert_eq!(stopped.elapsed(), SECOND, "only the hook's second");
    assert_eq!(
        *steps.lock().unwrap(),
        [
            "telemetry",
            "faults false",
            "init",
            "init dropped",
            "on_stop",
            "telemetry shutdown"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_signal_before_init_stops_the_app_before_init_starts() {
    let steps = Steps::default();
    let (signal, signals) = mpsc::unbounded_channel::<()>();
    signal.send(()).unwrap();
    let s = steps.clone();
    let exit = app(&Host::new(), &steps)
        .stop_signals(UnboundedReceiverStream::new(signals))
        .run(move |_| async move {
            push(&s, "init");
            Ok(vec![])
        })
        .await;
    assert_eq!(exit.code(), 0, "{:?}", exit.error());
    assert_eq!(
        *steps.lock().unwrap(),
        ["telemetry", "faults false", "telemetry shutdown"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_second_signal_during_the_hooks_of_a_stopped_init_forces_the_stop() {
    let steps = Steps::default();
    let (signal, run) = starting_app(&steps, 600 * SECOND, false);
    tokio::time::sleep(10 * SECOND).await;
    signal.send(()).unwrap();
    tokio::time::sleep(10 * SECOND).await;
    assert!(!run.is_finished(), "the hook takes 600 s");
    let forced = tokio::time::Instant::now();
    signal.send(()).unwrap();
    let exit = stopped_before_init_ends(run).await;
    assert_eq!(exit.code(), EXIT_FORCED, "{:?}", exit.error());
    assert_eq!(exit.error().unwrap().kind(), ErrorKind::Forced);
    assert_eq!(
        exit.error().unwrap().to_string(),
        "stopped at once by a second stop signal: the on-stop hooks not yet run, and the telemetry's flush, were skipped"
    );
    assert_eq!(forced.elapsed(), Duration::ZERO);
    assert_eq!(
        *steps.lock().unwrap(),
        ["telemetry", "faults false", "init", "init dropped"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_signal_during_the_hooks_of_a_failed_init_ends_them_keeping_its_error() {
    let steps = Steps::default();
    let (signal, run) = starting_app(&steps, 600 * SECOND, true);
    tokio::time::sleep(10 * SECOND).await;
    assert!(!run.is_finished(), "the hook takes 600 s");
    let stopped = tokio::time::Instant::now();
    signal.send(()).unwrap();
    let exit = stopped_before_init_ends(run).await;
    assert_eq!(exit.code(), 1, "{:?}", exit.error());
    assert_eq!(exit.error().unwrap().kind(), ErrorKind::Other);
    assert!(
        exit.error()
            .unwrap()
            .to_string()
            .contains("the cache could not load"),
        "{:?}",
        exit.error()
    );
    assert_eq!(stopped.elapsed(), Duration::ZERO);
    assert_eq!(
        *steps.lock().unwrap(),
        ["telemetry", "faults false", "init"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_signal_stream_that_ends_during_init_lets_it_finish() {
    let steps = Steps::default();
    let (signal, run) = starting_app(&steps, SECOND, false);
    drop(signal);
    tokio::time::sleep(3601 * SECOND).await;
    // Init finished (with no server to serve, the App then waits for a
    // signal that no longer can come).
    assert_eq!(
        *steps.lock().unwrap(),
        [
            "telemetry",
            "faults false",
            "init",
            "init done",
            "init dropped"
        ]
    );
    assert!(!run.is_finished());
    run.abort();
}

/// A hook that overruns its share of the stop_timeout is dropped, and the
/// hooks registered before it still run (a client's connection close
/// among them), within the stop_timeout; the App exits 1 naming the hook,
/// after the telemetry's flush.
#[tokio::test(start_paused = true)]
async fn a_hook_that_overruns_its_share_is_dropped_and_the_others_still_run() {
    let (ca, host, steps) = (Ca::new(), Host::new(), Steps::default());
    let carts = Carts::new();
    carts.on_get_cart(|_, req| async move { Ok(Response::new(cart(&req.id, 1))) });
    let _carts = start_carts(&host, &ca, &carts);
    let (signal, signals) = mpsc::unbounded_channel::<()>();
    let (built, client) = oneshot::channel::<Client>();
    let s = steps.clone();
    let client_settings = carts_settings(&ca);
    let run = tokio::spawn(
        app(&host, &steps)
            .stop_signals(UnboundedReceiverStream::new(signals))
            .stop_timeout(9 * SECOND)
            .run(move |setup| async move {
                let carts = Client::new(&setup, client_settings)?;
                let _ = built.send(carts);
                let hook = s.clone();
                setup.on_stop(move || async move { push(&hook, "#2 ran") });
                let hook = s.clone();
                setup.on_stop_named("flushing the ledger", move || async move {
                    tokio::time::sleep(600 * SECOND).await;
                    push(&hook, "the ledger flushed");
                });
                Ok(vec![])
            }),
    );
    let client = client.await.unwrap();
    client.unary::<_, Cart>(&GET_CART, get("c1")).await.unwrap();
    let stopped = tokio::time::Instant::now();
    signal.send(()).unwrap();
    let exit = run.await.unwrap();
    // Three hooks: the first to run (the last registered) had a third of
    // the 9 s; the other two took none of theirs.
    assert_eq!(stopped.elapsed(), 3 * SECOND);
    assert_eq!(exit.code(), 1, "{:?}", exit.error());
    assert_eq!(
        exit.error().unwrap().to_string(),
        "on-stop hook flushing the ledger overran its share of the App's stop_timeout (9s) and was dropped; every other hook ran"
    );
    assert_eq!(
        *steps.lock().unwrap(),
        ["telemetry", "faults false", "#2 ran", "telemetry shutdown"]
    );
    // The client's hook ran too: its connection is closed.
    let status = client
        .unary::<_, Cart>(&GET_CART, get("c1"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Cancelled, "{status:?}");
}

/// Failure injection on with a propagator that does not carry the
/// `baggage` header (an App given no telemetry function has a no-op one)
/// would inject nothing: the App refuses to start (78, saying how to fix
/// it), before init. With W3C Baggage in the propagator, or strip-only,
/// it starts.
#[tokio::test(start_paused = true)]
async fn failure_injection_without_a_baggage_propagator_exits_78() {
    use humus::fault::{self, Injector, jsonscenario};
    let injector = || {
        Injector::new(fault::Settings::new(
            jsonscenario::Codec::new("acme.fault").unwrap(),
        ))
    };
    let exit = App::new()
        .host(Host::new())
        .stop_on(async {})
        .faults(move |_| Ok(injector().unwrap()))
        .run(|_| async { panic!("init runs only with a baggage propagator") })
        .await;
    assert_eq!(exit.code(), 78, "{:?}", exit.error());
    let message = exit.error().unwrap().to_string();
    assert!(
        message.starts_with("failure injection is on, but the telemetry's propagator does not read or write the W3C `baggage` header"),
        "{message}"
    );
    assert!(message.contains("BaggagePropagator"), "{message}");

    let telemetry = humus::testing::Telemetry::new();
    let tel = telemetry.telemetry();
    let exit = App::new()
        .host(Host::new())
        .stop_on(async {})
        .telemetry(move |_| Ok(Providers::new(tel)))
        .faults(move |_| Ok(injector().unwrap()))
        .run(|setup| async move {
            assert!(setup.faults().is_on());
            Ok(vec![])
        })
        .await;
    assert_eq!(exit.code(), 0, "{:?}", exit.error());

    let exit = App::new()
        .host(Host::new())
        .stop_on(async {})
        .faults(|_| {
            Ok(Injector::strip_only(
                jsonscenario::Codec::new("acme.fault").unwrap(),
            ))
        })
        .run(|_| async { Ok(vec![]) })
        .await;
    assert_eq!(exit.code(), 0, "{:?}", exit.error());
}

/// The data points of `humus.circuit.state` in `exported`, as
/// (`server.address`, `humus.circuit.state`, value).
fn breaker_states(
    exported: &opentelemetry_sdk::metrics::data::ResourceMetrics,
) -> Vec<(String, String, i64)> {
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
    let mut points = Vec::new();
    for scope in exported.scope_metrics() {
        for metric in scope.metrics() {
            if metric.name() != humus::telemetry::names::HUMUS_CIRCUIT_STATE_INSTRUMENT {
                continue;
            }
            let AggregatedMetrics::I64(MetricData::Sum(sum)) = metric.data() else {
                panic!("humus.circuit.state is an i64 sum: {:?}", metric.data());
            };
            for point in sum.data_points() {
                let attribute = |key: &str| {
                    point
                        .attributes()
                        .find(|kv| kv.key.as_str() == key)
                        .map(|kv| kv.value.as_str().into_owned())
                        .unwrap_or_default()
                };
                points.push((
                    attribute("server.address"),
                    attribute("humus.circuit.state"),
                    point.value(),
                ));
            }
        }
    }
    points.sort();
    points
}

/// The App's final export, at the telemetry's shutdown after every server
/// has stopped, has the breaker state of a client that only a server's
/// handler held (dropped with the server before that last collection):
/// the App keeps each client's `humus.circuit.state` registration until
/// the flush.
#[tokio::test(start_paused = true)]
async fn the_final_export_has_the_breaker_state_of_a_client_a_handler_held() {
    use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

    let (ca, host) = (Ca::new(), Host::new());
    let exporter = InMemoryMetricExporter::default();
    let meter_provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    let (stop, stopped) = oneshot::channel::<()>();
    let cert = ca.issue("orders").server_config();
    let client_settings = carts_settings(&ca);
    let provider = meter_provider.clone();
    let run = tokio::spawn(
        App::new()
            .host(host.clone())
            .telemetry(move |_| {
                let telemetry = humus::telemetry::Telemetry::builder()
                    .meter_provider(provider.clone())
                    .build();
                Ok(Providers::new(telemetry)
                    .on_shutdown(move || provider.shutdown().map_err(Into::into)))
            })
            .stop_on(async move {
                let _ = stopped.await;
            })
            .run(move |setup| async move {
                // The rates client: held by the orders server's handler
                // alone.
                let rates = Client::new(&setup, client_settings)?;
                let orders = Carts::new();
                orders.on_get_cart(move |_, req| {
                    let rates = rates.clone();
                    async move {
                        let _ = &rates;
                        Ok(Response::new(cart(&req.id, 0)))
                    }
                });
                let server = orders_server(&setup, cert)?.add_service(CartsService(orders));
                Ok(vec![server])
            }),
    );
    for _ in 0..100 {
        if host.is_listening("orders:8443") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(host.is_listening("orders:8443"));
    stop.send(()).unwrap();
    let exit = run.await.unwrap();
    assert_eq!(exit.code(), 0, "{:?}", exit.error());
    // The periodic reader's last export, at its shutdown (none when it
    // collected nothing).
    let exported = exporter.get_finished_metrics().unwrap();
    assert_eq!(
        exported.last().map(breaker_states).unwrap_or_default(),
        [
            ("carts".to_owned(), "closed".to_owned(), 1),
            ("carts".to_owned(), "half-open".to_owned(), 0),
            ("carts".to_owned(), "open".to_owned(), 0),
        ]
    );
}

/// A testing host whose servers listen only once the test lets them
/// (`open`): the window between the end of init and the servers' listening,
/// where a SIGTERM can come in production.
#[derive(Clone, Debug)]
struct SlowToListen {
    host: Host,
    asked: Arc<tokio::sync::Notify>,
    open: Arc<tokio::sync::Notify>,
}

impl humus::Host for SlowToListen {
    fn dial<'a>(&'a self, addr: &'a str) -> humus::DialFuture<'a> {
        humus::Host::dial(&self.host, addr)
    }

    fn read_file(&self, path: &std::path::Path) -> std::io::Result<Vec<u8>> {
        humus::Host::read_file(&self.host, path)
    }

    fn listen<'a>(&'a self, addr: &'a str) -> humus::ListenFuture<'a> {
        Box::pin(async move {
            self.asked.notify_one();
            self.open.notified().await;
            humus::Host::listen(&self.host, addr).await
        })
    }
}

/// A stop signal handled after init but before the servers listen (before
/// the App's serving subscribes to the stop) is kept: the servers stop as
/// soon as they listen, and the on-stop hooks run, bounded by the App's
/// stop_timeout. It was lost, and the App served on for ever.
#[tokio::test(start_paused = true)]
async fn a_signal_before_the_servers_listen_stops_the_app_within_its_stop_timeout() {
    let (ca, steps) = (Ca::new(), Steps::default());
    let host = SlowToListen {
        host: Host::new(),
        asked: Arc::default(),
        open: Arc::default(),
    };
    let (signal, signals) = mpsc::unbounded_channel::<()>();
    let cert = ca.issue("orders").server_config();
    let s = steps.clone();
    let run = tokio::spawn(
        app(&host.host, &steps)
            .host(host.clone())
            .stop_signals(UnboundedReceiverStream::new(signals))
            .stop_timeout(5 * SECOND)
            .run(move |setup| async move {
                let hook = s.clone();
                setup.on_stop_named("waiting for ever", move || async move {
                    std::future::pending::<()>().await;
                    push(&hook, "never");
                });
                let server = orders_server(&setup, cert)?;
                Ok(vec![server])
            }),
    );
    // Init is over, the server is about to listen: the signal comes now,
    // and the App handles it (paused time moves only once it is idle).
    host.asked.notified().await;
    signal.send(()).unwrap();
    tokio::time::sleep(SECOND).await;
    assert!(!run.is_finished());
    let opened = tokio::time::Instant::now();
    host.open.notify_one();
    let exit = tokio::time::timeout(3600 * SECOND, run)
        .await
        .expect("the App stops once its servers listen")
        .unwrap();
    assert_eq!(opened.elapsed(), 5 * SECOND, "the stop_timeout");
    assert!(!host.host.is_listening("orders:8443"));
    assert_eq!(exit.code(), 1, "{:?}", exit.error());
    assert_eq!(
        exit.error().unwrap().to_string(),
        "on-stop hook waiting for ever overran its share of the App's stop_timeout (5s) and was dropped; every other hook ran"
    );
    assert_eq!(
        *steps.lock().unwrap(),
        ["telemetry", "faults false", "telemetry shutdown"]
    );
}

/// The trial's case: init ends after telling a task (on another worker
/// thread) that sends the stop at once, with no server. Whether the App's
/// serving subscribed to the stop before the signal was handled was a race
/// (and `select!`'s random order), and the App hung in most runs; every
/// run stops now. Real time: the timeout only turns a hang into a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_sent_as_init_ends_always_stops_an_app_with_no_server() {
    for run in 0..64 {
        let (stop, stopped) = oneshot::channel::<()>();
        let (done, init_done) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = init_done.await;
            let _ = stop.send(());
        });
        let exit = tokio::time::timeout(
            10 * SECOND,
            App::new()
                .host(Host::new())
                .stop_on(async move {
                    let _ = stopped.await;
                })
                .run(|_setup| async move {
                    let _ = done.send(());
                    Ok(vec![])
                }),
        )
        .await
        .unwrap_or_else(|_| panic!("run {run}: the App did not stop"));
        assert_eq!(exit.code(), 0, "run {run}: {:?}", exit.error());
    }
}
