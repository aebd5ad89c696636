//! [`Settings`]: what an [`Injector`](super::Injector) is built from
//! ([design](crate::design::failure_injection#the-model)).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::Decoder;
use crate::call::settings::longer_than_a_year;

/// The default of [`Settings::max_delay`]: 10 seconds.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(10);

/// The settings of a service's failure injection.
///
/// Start from [`Settings::new`] (or `Default`, whose decoder is unset and
/// which [`Injector::new`](super::Injector::new) therefore rejects).
#[derive(Clone, Debug)]
pub struct Settings {
    /// Reads the scenario a request carries from its baggage, and says
    /// which members to strip. It owns the wire convention (see
    /// [`Decoder`]). Set in code, not sourced.
    ///
    /// Default: none. Valid: set.
    pub decoder: Option<Arc<dyn Decoder>>,

    /// The longest delay any point waits. A longer delay in a scenario is
    /// clamped to it, so services with different maximums still agree on
    /// the rest of a scenario. The operator's knob.
    ///
    /// Default: [`DEFAULT_MAX_DELAY`] (10s). Valid: positive, and at most
    /// 365 days; see [`check_max_delay`].
    pub max_delay: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            decoder: None,
            max_delay: DEFAULT_MAX_DELAY,
        }
    }
}

impl Settings {
    /// The defaults, with `decoder` set.
    pub fn new(decoder: impl Decoder) -> Settings {
        Settings {
            decoder: Some(Arc::new(decoder)),
            ..Settings::default()
        }
    }
}

/// Checks a value for [`Settings::max_delay`], without naming the field,
/// so a configuration source can report it under its own name.
///
/// # Errors
///
/// [`InvalidMaxDelay`] when `max_delay` is zero (it must be positive), or
/// more than 365 days (a delay that long is a typo, and past what the
/// clock can count).
pub fn check_max_delay(max_delay: Duration) -> Result<(), InvalidMaxDelay> {
    if max_delay.is_zero() || longer_than_a_year(max_delay).is_some() {
        Err(InvalidMaxDelay { value: max_delay })
    } else {
        Ok(())
    }
}

/// Why [`check_max_delay`] rejected a value: it is not positive, or it is
/// more than 365 days.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidMaxDelay {
    value: Duration,
}

impl fmt::Display for InvalidMaxDelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match longer_than_a_year(self.value) {
            Some(why) => f.write_str(&why),
            None => write!(f, "must be positive, got {:?}", self.value),
        }
    }
}

impl std::error::Error for InvalidMaxDelay {}

impl InvalidMaxDelay {
    /// The rejected value.
    pub fn value(&self) -> Duration {
        self.value
    }
}

/// One bad field of [`Settings`]: its name and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field's name, as in [`Settings`] (`decoder`, `max_delay`).
    pub field: &'static str,
    /// What is wrong with it, without the field's name.
    pub problem: String,
}

/// Why [`Injector::new`](super::Injector::new) refused its settings: every
/// bad field at once, each by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingsError {
    fields: Vec<FieldError>,
}

impl SettingsError {
    /// The bad fields, in the order [`Settings`] declares them. Never
    /// empty.
    pub fn fields(&self) -> &[FieldError] {
        &self.fields
    }
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid failure-injection settings: ")?;
        crate::call::settings::write_each(f, &self.fields, |f, e| {
            write!(f, "{}: {}", e.field, e.problem)
        })
    }
}

impl std::error::Error for SettingsError {}

/// Every problem of `settings`, or the decoder and max delay they hold.
pub(crate) fn validate(settings: Settings) -> Result<(Arc<dyn Decoder>, Duration), SettingsError> {
    let mut fields = Vec::new();
    if settings.decoder.is_none() {
        fields.push(FieldError {
            field: "decoder",
            problem: "must be set".to_owned(),
        });
    }
    if let Err(e) = check_max_delay(settings.max_delay) {
        fields.push(FieldError {
            field: "max_delay",
            problem: e.to_string(),
        });
    }
    match settings.decoder {
        Some(decoder) if fields.is_empty() => Ok((decoder, settings.max_delay)),
        _ => Err(SettingsError { fields }),
    }
}
