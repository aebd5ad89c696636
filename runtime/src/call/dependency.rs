//! [`Dependency`]: what every client of one dependency holds for the call
//! engine (its breaker, retry budget, backoff, recorder and failure
//! injector, and the retry settings), built once in the client's `new`.

use std::time::Duration;

use opentelemetry::Context;
use tokio::time::Instant;

use super::{Core, Parts};
use crate::{Setup, circuit, fault, retry, telemetry};

/// The settings a [`Dependency`] is built of: the sections every client's
/// settings share (`retry`, `breaker`, `attempt_timeout`), as
/// [`sections!`](crate::call::sections) reads them of a transport's
/// `Settings`.
pub(crate) struct Sections {
    /// The breaker's window, probes and timing.
    pub(crate) breaker: circuit::Config,
    /// When the breaker opens and closes.
    pub(crate) breaker_policy: circuit::Policy,
    /// The retry budget.
    pub(crate) retry_budget: retry::BudgetConfig,
    /// At most this many attempts per call, the first included.
    pub(crate) max_attempts: u32,
    /// The first wait between two attempts.
    pub(crate) backoff_base: Duration,
    /// The longest wait between two attempts.
    pub(crate) backoff_max: Duration,
    /// How long one attempt may take, if bounded apart from the call's
    /// deadline.
    pub(crate) attempt_timeout: Option<Duration>,
}

/// The [`Sections`] of a transport's settings `$settings`, which name them
/// with the fields every client's settings have (`breaker`,
/// `breaker_policy`, `retry_budget`, `max_attempts`, `backoff_base`,
/// `backoff_max`, `attempt_timeout`: a `Duration` or an
/// `Option<Duration>`).
macro_rules! sections {
    ($settings:expr) => {{
        let settings = &$settings;
        $crate::call::Sections {
            breaker: settings.breaker,
            breaker_policy: settings.breaker_policy.clone(),
            retry_budget: settings.retry_budget,
            max_attempts: settings.max_attempts,
            backoff_base: settings.backoff_base,
            backoff_max: settings.backoff_max,
            attempt_timeout: $crate::call::settings::AttemptTimeoutSetting::bound(
                settings.attempt_timeout,
            ),
        }
    }};
}
pub(crate) use sections;

/// Which of the [`Sections`] a [`Dependency`] could not be made of; each
/// client names it in its own settings error. Its settings' checks ran
/// first, so this is a programming error.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The breaker's config.
    Breaker(circuit::ConfigError),
    /// The retry budget's config.
    Budget(retry::BudgetError),
}

/// What a client of one dependency holds for the call engine, built once
/// in its `new` and read by each call ([`Dependency::core`]): the breaker
/// (registered in `humus.circuit.state` while the client lives), the
/// retry budget and backoff, the recorder, the Setup's failure injector,
/// and the retry settings.
pub(crate) struct Dependency {
    /// The dependency's circuit breaker, shared by every call.
    pub(crate) breaker: circuit::Breaker,
    /// The retry budget, shared by every call.
    pub(crate) budget: retry::Budget,
    /// The waits between attempts.
    pub(crate) backoff: retry::Exponential,
    /// Spans, metrics, propagation and the breaker's log records, through
    /// the Setup's telemetry.
    pub(crate) recorder: telemetry::ClientRecorder,
    /// Keeps the breaker in `humus.circuit.state` while the client lives.
    _registration: telemetry::BreakerRegistration,
    /// The fault points evaluated once per attempt, and the scenario
    /// stripped from what is sent.
    pub(crate) faults: fault::Injector,
    /// At most this many attempts per call, the first included.
    pub(crate) max_attempts: u32,
    /// The longest wait between two attempts.
    pub(crate) backoff_max: Duration,
    /// How long one attempt may take, if bounded apart from the call's
    /// deadline.
    pub(crate) attempt_timeout: Option<Duration>,
}

impl Dependency {
    /// The dependency of `sections`, for `setup`, recording with
    /// `recorder` (which names the dependency's address): its breaker
    /// reports its transitions to `recorder` and is registered with it,
    /// its failure injector is `setup`'s.
    ///
    /// # Errors
    ///
    /// [`Refused`] naming the breaker's or the budget's config, if either
    /// is refused (in that order).
    pub(crate) fn new(
        setup: &Setup,
        recorder: telemetry::ClientRecorder,
        sections: Sections,
    ) -> Result<Dependency, Refused> {
        let breaker = circuit::Breaker::new(
            sections.breaker,
            sections.breaker_policy,
            recorder.transition_observer(),
        )
        .map_err(Refused::Breaker)?;
        let registration = {
            let breaker = breaker.clone();
            recorder.register_breaker(move || breaker.state())
        };
        let budget = retry::Budget::new(sections.retry_budget).map_err(Refused::Budget)?;
        Ok(Dependency {
            breaker,
            budget,
            backoff: retry::Exponential::new(sections.backoff_base, sections.backoff_max),
            recorder,
            _registration: registration,
            faults: setup.faults().clone(),
            max_attempts: sections.max_attempts,
            backoff_max: sections.backoff_max,
            attempt_timeout: sections.attempt_timeout,
        })
    }

    /// The parts of a call made with it in the context `cx`, by
    /// `deadline`, at `started` (if the transport read the clock then).
    pub(crate) const fn parts<'a>(
        &'a self,
        cx: &'a Context,
        deadline: Option<Instant>,
        started: Option<Instant>,
    ) -> Parts<'a> {
        Parts {
            dependency: self,
            cx,
            deadline,
            started,
        }
    }

    /// What the call engine reads of it.
    pub(crate) fn core(&self) -> Core<'_> {
        Core {
            budget: &self.budget,
            backoff: &self.backoff,
            recorder: &self.recorder,
            faults: &self.faults,
            max_attempts: self.max_attempts,
            backoff_max: self.backoff_max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::settings::{DEFAULT_BREAKER, default_breaker_policy};

    fn sections() -> Sections {
        Sections {
            breaker: DEFAULT_BREAKER,
            breaker_policy: default_breaker_policy(),
            retry_budget: retry::BudgetConfig::default(),
            max_attempts: 4,
            backoff_base: Duration::from_millis(10),
            backoff_max: Duration::from_millis(70),
            attempt_timeout: Some(Duration::from_secs(2)),
        }
    }

    fn made(setup: &Setup, sections: Sections) -> Result<Dependency, Refused> {
        let recorder = telemetry::ClientRecorder::new(setup.telemetry(), "carts:9090");
        Dependency::new(setup, recorder, sections)
    }

    #[test]
    fn the_core_and_the_parts_carry_the_sections() {
        let setup = Setup::new();
        let dependency = made(&setup, sections()).unwrap();
        let core = dependency.core();
        assert_eq!(core.max_attempts, 4);
        assert_eq!(core.backoff_max, Duration::from_millis(70));
        assert_eq!(dependency.attempt_timeout, Some(Duration::from_secs(2)));
        assert_eq!(dependency.breaker.state(), circuit::State::Closed);
        let cx = Context::new();
        let at = Instant::now();
        let parts = dependency.parts(&cx, Some(at), None);
        assert!(std::ptr::eq(parts.dependency, &dependency));
        assert_eq!((parts.deadline, parts.started), (Some(at), None));
    }

    #[test]
    fn a_refused_breaker_is_named_before_a_refused_budget() {
        let setup = Setup::new();
        let mut bad = sections();
        bad.breaker.window = 0;
        bad.retry_budget.max_tokens = 0;
        assert!(matches!(made(&setup, bad), Err(Refused::Breaker(_))));
        let mut bad = sections();
        bad.retry_budget.max_tokens = 0;
        assert!(matches!(made(&setup, bad), Err(Refused::Budget(_))));
    }
}
