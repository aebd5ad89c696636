//! `Breaker::new` checks every field and names every invalid one, never
//! substituting a default (docs/circuit-breaker.md, "Validation").

use std::time::Duration;

use humus::circuit::{Breaker, Config, ConfigError, MAX_COUNT, Policy, State};

fn new(config: Config) -> Result<Breaker, ConfigError> {
    Breaker::new(config, Policy::consecutive(1), |_| {})
}

fn valid() -> Config {
    Config {
        window: 20,
        probes: 1,
        open_for: Duration::from_secs(10),
        probe_timeout: Duration::from_secs(1),
    }
}

#[test]
fn one_error_names_every_invalid_field() {
    let error = new(Config {
        window: 0,
        probes: MAX_COUNT + 1,
        open_for: Duration::ZERO,
        probe_timeout: Duration::ZERO,
    })
    .unwrap_err();
    assert_eq!(
        error.fields().collect::<Vec<_>>(),
        ["window", "probes", "open_for", "probe_timeout"]
    );
    assert_eq!(
        error.to_string(),
        "circuit: invalid config: window is 0, want 1..=65536; \
         probes is 65537, want 1..=65536; \
         open_for is zero, want a duration more than zero; \
         probe_timeout is zero, want a duration more than zero"
    );
    let _: &dyn std::error::Error = &error;
}

#[test]
fn each_field_is_checked_at_its_bounds() {
    assert_eq!(MAX_COUNT, 65536);
    let fields = |config| new(config).unwrap_err().fields().collect::<Vec<_>>();
    assert_eq!(
        fields(Config {
            window: 0,
            ..valid()
        }),
        ["window"]
    );
    assert_eq!(
        fields(Config {
            window: MAX_COUNT + 1,
            ..valid()
        }),
        ["window"]
    );
    assert_eq!(
        fields(Config {
            probes: 0,
            ..valid()
        }),
        ["probes"]
    );
    assert_eq!(
        fields(Config {
            probes: usize::MAX,
            ..valid()
        }),
        ["probes"]
    );
    assert_eq!(
        fields(Config {
            open_for: Duration::ZERO,
            ..valid()
        }),
        ["open_for"]
    );
    assert_eq!(
        fields(Config {
            probe_timeout: Duration::ZERO,
            ..valid()
        }),
        ["probe_timeout"]
    );

    for config in [
        Config {
            window: 1,
            probes: 1,
            ..valid()
        },
        Config {
            window: MAX_COUNT,
            probes: MAX_COUNT,
            ..valid()
        },
        Config {
            open_for: Duration::from_nanos(1),
            probe_timeout: Duration::from_nanos(1),
            ..valid()
        },
        Config {
            open_for: Duration::MAX,
            probe_timeout: Duration::MAX,
            ..valid()
        },
    ] {
        let breaker = new(config).expect("valid");
        assert_eq!(*breaker.config(), config, "kept as given");
        assert_eq!(breaker.state(), State::Closed);
    }
}

#[test]
fn debug_shows_the_state_and_config() {
    let breaker = new(valid()).unwrap();
    let debug = format!("{breaker:?}");
    assert!(
        debug.starts_with("Breaker { state: Closed, config: Config { window: 20"),
        "{debug}"
    );
}
