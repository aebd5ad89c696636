//! The serde mapping of the shared sections, written once: the
//! [`settings_read!`] macro that defines a transport's `Read` mirror from
//! its own fields and the shared sections it names, and the conversion of
//! those sections (their defaults, a section's field given both in the
//! section and as a flat key refused).
//!
//! No `#[serde(flatten)]`: `envy` and [`app::Env`](crate::app::Env) hand
//! numbers over as strings, which serde's buffering of a flattened struct
//! no longer parses as numbers; each `Read` is one flat struct.

use std::time::Duration;

use super::{InvalidValue, check_attempt_timeout, check_timeout};
use crate::{circuit, retry};

/// Defines `struct $Read`, the `serde::Deserialize` mirror of a
/// transport's settings `$Settings`, `TryFrom<$Read> for $Settings`, and
/// `$Settings`'s `Debug`, from a list of every field of the settings, each
/// item ending with `,`, in the order the keys are read:
///
/// - `name: Type,` (with any `#[serde(...)]` attributes): a field of the
///   transport's own, read as `Option<Type>`, its default kept when not
///   given;
/// - `use section,`: one of the shared sections, its keys, serde
///   attributes and conversion defined here once: `timeout`,
///   `attempt_timeout`, `max_attempts`, `backoff` (`backoff_base`,
///   `backoff_max`), `retry_budget` (the section and the flat keys
///   `retry_budget_max_tokens`, `retry_budget_token_ratio`), `breaker`
///   (the section and the flat keys `breaker_window`, `breaker_probes`,
///   `breaker_open_for`, `breaker_probe_timeout`), `forward_scenario`;
/// - `in_code name,`: a field set in code, never read: its default.
///
/// A field of its own or set in code may end with `=> expr` (before its
/// `,`): what `Debug` shows of it, `expr` seeing the field as `name` (a
/// reference), for a password or a config that `Debug` must not show.
///
/// The conversion builds `$Settings` with every field named and no `..`
/// rest, so a field of the settings missing from the list is a compile
/// error, not a setting silently never read nor shown.
macro_rules! settings_read {
    (
        $(#[$meta:meta])*
        struct $read_ty:ident for $settings:ident { $($items:tt)* }
    ) => {
        $crate::call::settings::settings_read! {
            @munch [$(#[$meta])*] $read_ty $settings [read d this] [] [] [] [] $($items)*
        }
    };
    // The plain shared fields: read as a field of the transport's own.
    (@munch $m:tt $r:ident $s:ident $v:tt $f:tt $c:tt $code:tt $dbg:tt
        use timeout, $($rest:tt)*) => {
        $crate::call::settings::settings_read! { @munch $m $r $s $v $f $c $code $dbg
            #[serde(default, with = "humantime_serde")] timeout: ::std::time::Duration,
            $($rest)* }
    };
    (@munch $m:tt $r:ident $s:ident $v:tt $f:tt $c:tt $code:tt $dbg:tt
        use max_attempts, $($rest:tt)*) => {
        $crate::call::settings::settings_read! { @munch $m $r $s $v $f $c $code $dbg
            max_attempts: u32, $($rest)* }
    };
    (@munch $m:tt $r:ident $s:ident $v:tt $f:tt $c:tt $code:tt $dbg:tt
        use backoff, $($rest:tt)*) => {
        $crate::call::settings::settings_read! { @munch $m $r $s $v $f $c $code $dbg
            #[serde(default, with = "humantime_serde")] backoff_base: ::std::time::Duration,
            #[serde(default, with = "humantime_serde")] backoff_max: ::std::time::Duration,
            $($rest)* }
    };
    (@munch $m:tt $r:ident $s:ident $v:tt $f:tt $c:tt $code:tt $dbg:tt
        use forward_scenario, $($rest:tt)*) => {
        $crate::call::settings::settings_read! { @munch $m $r $s $v $f $c $code $dbg
            forward_scenario: bool, $($rest)* }
    };
    // The shared fields read their own way.
    (@munch $m:tt $r:ident $s:ident [$read:ident $d:ident $this:ident] [$($f:tt)*] [$($c:tt)*]
        $code:tt [$($dbg:tt)*] use attempt_timeout, $($rest:tt)*) => {
        $crate::call::settings::settings_read! { @munch $m $r $s [$read $d $this]
            [$($f)* #[serde(default, with = "humantime_serde")]
                attempt_timeout: ::std::option::Option<::std::time::Duration>,]
            [$($c)* attempt_timeout: $crate::call::settings::AttemptTimeoutSetting::given(
                $read.attempt_timeout, $d.attempt_timeout),]
            $code [$($dbg)* .field("attempt_timeout", &$this.attempt_timeout)] $($rest)* }
    };
    (@munch $m:tt $r:ident $s:ident [$read:ident $d:ident $this:ident] [$($f:tt)*] [$($c:tt)*]
        $code:tt [$($dbg:tt)*] use retry_budget, $($rest:tt)*) => {
        $crate::call::settings::settings_read! { @munch $m $r $s [$read $d $this]
            [$($f)* retry_budget: ::std::option::Option<$crate::call::settings::BudgetSection>,
                retry_budget_max_tokens: ::std::option::Option<u32>,
                retry_budget_token_ratio: ::std::option::Option<f64>,]
            [$($c)* retry_budget: $crate::call::settings::budget_of(
                $read.retry_budget,
                ($read.retry_budget_max_tokens, $read.retry_budget_token_ratio),
                $d.retry_budget,
            )?,]
            $code [$($dbg)* .field("retry_budget", &$this.retry_budget)] $($rest)* }
    };
    (@munch $m:tt $r:ident $s:ident [$read:ident $d:ident $this:ident] [$($f:tt)*] [$($c:tt)*]
        $code:tt [$($dbg:tt)*] use breaker, $($rest:tt)*) => {
        $crate::call::settings::settings_read! { @munch $m $r $s [$read $d $this]
            [$($f)* breaker: ::std::option::Option<$crate::call::settings::BreakerSection>,
                breaker_window: ::std::option::Option<usize>,
                breaker_probes: ::std::option::Option<usize>,
                #[serde(default, with = "humantime_serde")]
                breaker_open_for: ::std::option::Option<::std::time::Duration>,
                #[serde(default, with = "humantime_serde")]
                breaker_probe_timeout: ::std::option::Option<::std::time::Duration>,]
            [$($c)* breaker: $crate::call::settings::breaker_of(
                $read.breaker,
                ($read.breaker_window, $read.breaker_probes),
                ($read.breaker_open_for, $read.breaker_probe_timeout),
                $d.breaker,
            )?,]
            $code [$($dbg)* .field("breaker", &$this.breaker)] $($rest)* }
    };
    // A field set in code.
    (@munch $m:tt $r:ident $s:ident [$read:ident $d:ident $this:ident] $f:tt $c:tt
        [$($code:tt)*] [$($dbg:tt)*] in_code $name:ident $(=> $shown:expr)?, $($rest:tt)*) => {
        $crate::call::settings::settings_read! { @munch $m $r $s [$read $d $this] $f $c
            [$($code)* $name]
            [$($dbg)* .field(stringify!($name), $crate::call::settings::settings_read!(
                @shown $this $name $($shown)?))]
            $($rest)* }
    };
    // A field of the transport's own.
    (@munch $m:tt $r:ident $s:ident [$read:ident $d:ident $this:ident] [$($f:tt)*] [$($c:tt)*]
        $code:tt [$($dbg:tt)*]
        $(#[$attr:meta])* $name:ident : $ty:ty $(=> $shown:expr)?, $($rest:tt)*) => {
        $crate::call::settings::settings_read! { @munch $m $r $s [$read $d $this]
            [$($f)* $(#[$attr])* $name: ::std::option::Option<$ty>,]
            [$($c)* $name: $read.$name.unwrap_or($d.$name),]
            $code
            [$($dbg)* .field(stringify!($name), $crate::call::settings::settings_read!(
                @shown $this $name $($shown)?))]
            $($rest)* }
    };
    // What Debug shows of a field.
    (@shown $this:ident $name:ident) => { &$this.$name };
    (@shown $this:ident $name:ident $shown:expr) => {
        &{
            let $name = &$this.$name;
            $shown
        }
    };
    (@munch [$($m:tt)*] $r:ident $s:ident [$read:ident $d:ident $this:ident] [$($f:tt)*]
        [$($c:tt)*] [$($code:ident)*] [$($dbg:tt)*]) => {
        $($m)*
        #[derive(::serde::Deserialize)]
        struct $r {
            $($f)*
        }

        impl ::std::convert::TryFrom<$r> for $s {
            type Error = ::std::string::String;

            fn try_from($read: $r) -> ::std::result::Result<$s, ::std::string::String> {
                let $d = <$s as ::std::default::Default>::default();
                ::std::result::Result::Ok($s {
                    $($c)*
                    $($code: $d.$code,)*
                })
            }
        }

        impl ::std::fmt::Debug for $s {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                let $this = self;
                f.debug_struct(stringify!($s)) $($dbg)* .finish()
            }
        }

        impl $s {
            /// The fields set in code, never read from configuration:
            /// [`app::Env`](crate::app::Env) says so of a variable named
            /// after one.
            pub(crate) const IN_CODE: &'static [&'static str] = &[$(stringify!($code)),*];
        }
    };
}
pub(crate) use settings_read;

/// An `attempt_timeout` setting: one every attempt has (a [`Duration`]:
/// the HTTP client's, the RabbitMQ publisher's), or one unset by default
/// (an `Option<Duration>`: the gRPC client's). Read and checked the same
/// way either way.
pub(crate) trait AttemptTimeoutSetting: Copy {
    /// The setting as read: `read` if given, else `default`.
    fn given(read: Option<Duration>, default: Self) -> Self;

    /// Its check.
    fn check(self) -> Result<(), InvalidValue>;

    /// The bound it puts on each attempt, if any.
    fn bound(self) -> Option<Duration>;
}

impl AttemptTimeoutSetting for Duration {
    fn given(read: Option<Duration>, default: Duration) -> Duration {
        read.unwrap_or(default)
    }

    fn check(self) -> Result<(), InvalidValue> {
        check_timeout(self)
    }

    fn bound(self) -> Option<Duration> {
        Some(self)
    }
}

impl AttemptTimeoutSetting for Option<Duration> {
    fn given(read: Option<Duration>, default: Option<Duration>) -> Option<Duration> {
        read.or(default)
    }

    fn check(self) -> Result<(), InvalidValue> {
        self.map_or(Ok(()), check_attempt_timeout)
    }

    fn bound(self) -> Option<Duration> {
        self
    }
}

/// A `breaker` section as read. (A [`circuit::Config`] read on its own
/// takes every field; in the client's settings a missing one keeps
/// the settings' default.)
#[derive(Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BreakerSection {
    window: Option<usize>,
    probes: Option<usize>,
    #[serde(default, with = "humantime_serde")]
    open_for: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    probe_timeout: Option<Duration>,
}

/// A `retry_budget` section as read.
#[derive(Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BudgetSection {
    max_tokens: Option<u32>,
    token_ratio: Option<f64>,
}

/// The value of a section's field given in the section (`nested`) or as
/// a flat key (`flat`), or else `default`; both given is an error naming
/// both.
pub(crate) fn one_of<T>(
    nested: Option<T>,
    flat: Option<T>,
    default: T,
    section: &str,
    field: &str,
) -> Result<T, String> {
    match (nested, flat) {
        (Some(_), Some(_)) => Err(format!(
            "{section}.{field} and {section}_{field} are one setting, given twice: give one of them"
        )),
        (Some(v), None) | (None, Some(v)) => Ok(v),
        (None, None) => Ok(default),
    }
}

/// A `retry_budget` as read: its section's fields, or its flat keys
/// (`retry_budget_max_tokens`, `retry_budget_token_ratio`), or else
/// `default`'s; a field given both ways is an error naming both.
pub(crate) fn budget_of(
    section: Option<BudgetSection>,
    (max_tokens, token_ratio): (Option<u32>, Option<f64>),
    default: retry::BudgetConfig,
) -> Result<retry::BudgetConfig, String> {
    let section = section.unwrap_or_default();
    Ok(retry::BudgetConfig {
        max_tokens: one_of(
            section.max_tokens,
            max_tokens,
            default.max_tokens,
            "retry_budget",
            "max_tokens",
        )?,
        token_ratio: one_of(
            section.token_ratio,
            token_ratio,
            default.token_ratio,
            "retry_budget",
            "token_ratio",
        )?,
    })
}

/// A `breaker` as read: its section's fields, or its flat keys
/// (`breaker_window`, `breaker_probes`, `breaker_open_for`,
/// `breaker_probe_timeout`), or else `default`'s; a field given both ways
/// is an error naming both.
pub(crate) fn breaker_of(
    section: Option<BreakerSection>,
    (window, probes): (Option<usize>, Option<usize>),
    (open_for, probe_timeout): (Option<Duration>, Option<Duration>),
    default: circuit::Config,
) -> Result<circuit::Config, String> {
    let section = section.unwrap_or_default();
    Ok(circuit::Config {
        window: one_of(section.window, window, default.window, "breaker", "window")?,
        probes: one_of(section.probes, probes, default.probes, "breaker", "probes")?,
        open_for: one_of(
            section.open_for,
            open_for,
            default.open_for,
            "breaker",
            "open_for",
        )?,
        probe_timeout: one_of(
            section.probe_timeout,
            probe_timeout,
            default.probe_timeout,
            "breaker",
            "probe_timeout",
        )?,
    })
}
