//! `Health`: the `grpc.health.v1` service a [`Server`](super::Server)
//! serves, on tonic-health.

use std::fmt;
use std::time::Duration;

use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::health::Monitor;

/// The service name under which `grpc.health.v1` reports liveness.
pub const LIVENESS: &str = "liveness";

/// The service name under which `grpc.health.v1` reports readiness (as it
/// does under `""` and under the name of every service the server serves).
pub const READINESS: &str = "readiness";

/// What a [`Server`](super::Server)'s `grpc.health.v1` service (on
/// tonic-health) reports:
///
/// - readiness, under the service names `""`, [`READINESS`] and each
///   service the server serves (`ledger.v1.Ledger`): `SERVING` while every
///   readiness [`Monitor`] is healthy (a client's
///   [`connected`](crate::grpc::client::Client::connected), say), else
///   `NOT_SERVING`. The monitors are checked when the server starts and
///   then every [`interval`](Health::interval), each check bounded by
///   [`check_timeout`](Health::check_timeout) (a check cut short is
///   unhealthy), so a monitor that turns healthy turns the service
///   `SERVING` at the next check. A graceful shutdown turns it
///   `NOT_SERVING` first, before the GOAWAYs.
/// - liveness, under [`LIVENESS`]: `SERVING` while the server serves. It
///   depends on nothing outside the process: restarting a pod does not
///   bring a dependency back.
///
/// With no monitor, readiness is `SERVING` once the server serves.
///
/// Kubernetes' gRPC probes, and `grpc_health_probe`, ask for the service
/// `""` unless told otherwise, which is readiness here: a liveness probe
/// left at its default would restart a pod whose dependency is down. Name
/// the service in the liveness probe:
///
/// ```yaml
/// livenessProbe:
///   grpc: { port: 50051, service: liveness }
/// readinessProbe:
///   grpc: { port: 50051 }  # "", readiness
/// ```
///
/// At the stop signal the server stops accepting connections at once (the
/// listener is closed), while Kubernetes takes a moment to remove the pod
/// from its endpoints: a client that dials the pod in between is refused
/// (a humus client's call then fails `UNAVAILABLE`, and its connection
/// backs off before the next dial), and no probe sees readiness turn
/// `NOT_SERVING` first. To keep accepting until
/// the endpoints are updated, delay the signal with a `preStop` hook (and
/// add that delay to `terminationGracePeriodSeconds`):
///
/// ```yaml
/// lifecycle:
///   preStop:
///     sleep: { seconds: 5 }  # Kubernetes 1.30 and later; else exec a sleep
/// ```
#[derive(Clone)]
pub struct Health {
    pub(super) readiness: Vec<Monitor>,
    pub(super) interval: Duration,
    pub(super) check_timeout: Duration,
}

impl fmt::Debug for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Health")
            .field("readiness", &self.readiness.len())
            .field("interval", &self.interval)
            .field("check_timeout", &self.check_timeout)
            .finish()
    }
}

impl Default for Health {
    fn default() -> Self {
        Health::new()
    }
}

impl Health {
    /// Health with no readiness monitor, checked every second, each check
    /// bounded by a second.
    pub fn new() -> Health {
        Health {
            readiness: Vec::new(),
            interval: Duration::from_secs(1),
            check_timeout: Duration::from_secs(1),
        }
    }

    /// Adds `monitor` to readiness: ready only while it, and every other
    /// readiness monitor, is healthy.
    pub fn readiness(mut self, monitor: Monitor) -> Health {
        self.readiness.push(monitor);
        self
    }

    /// How often the readiness monitors are checked (default 1 s).
    ///
    /// # Panics
    ///
    /// If `interval` is zero: a loop that never waits is a programming
    /// error.
    pub fn interval(mut self, interval: Duration) -> Health {
        assert!(
            !interval.is_zero(),
            "Health::interval: must be more than zero"
        );
        self.interval = interval;
        self
    }

    /// How long one check of a monitor may take (default 1 s); a check cut
    /// short counts as unhealthy.
    pub fn check_timeout(mut self, timeout: Duration) -> Health {
        self.check_timeout = timeout;
        self
    }

    /// Whether every readiness monitor is healthy now.
    async fn ready(&self) -> bool {
        for monitor in &self.readiness {
            match tokio::time::timeout(self.check_timeout, monitor.check()).await {
                Ok(true) => {}
                _ => return false,
            }
        }
        true
    }

    /// Reports readiness under `names` every interval, until dropped.
    pub(super) async fn report(self, reporter: HealthReporter, names: Vec<String>) {
        reporter
            .set_service_status(LIVENESS, ServingStatus::Serving)
            .await;
        let mut last = None;
        loop {
            let status = if self.ready().await {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            if last != Some(status) {
                for name in &names {
                    reporter.set_service_status(name, status).await;
                }
                last = Some(status);
            }
            tokio::time::sleep(self.interval).await;
        }
    }
}
