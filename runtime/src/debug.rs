//! `fmt::Debug` for a type that shows only some of its fields.
//!
//! A type whose every field is `Debug` and worth showing derives it. One
//! that leaves fields out (not `Debug`, a secret such as a password, a
//! recorder or a cache that says nothing the shown fields do not), or shows
//! what a field says rather than the field (a length, whether it is set),
//! names what it shows with [`debug_fields!`]: one impl, printed as the
//! derive prints, instead of a hand-written copy per type.

/// Implements [`fmt::Debug`](std::fmt::Debug) for the struct `Type` as
/// `#[derive(Debug)]` would, but showing only what is named, in the order
/// named:
///
/// - `name` shows the field `name`;
/// - `name: |this| expr` shows `expr` under `name`, `this` being `&self`;
/// - a closing `..` ends with
///   [`finish_non_exhaustive`](std::fmt::DebugStruct::finish_non_exhaustive)
///   (`Type { a: 1, .. }`), for a type that says it leaves fields out;
///   without it, [`finish`](std::fmt::DebugStruct::finish).
///
/// ```ignore
/// debug_fields!(Accepted { remote_addr, local_addr, .. });
/// debug_fields!(Server { settings, bound: |s| s.listener.is_some(), .. });
/// ```
macro_rules! debug_fields {
    ($ty:ident { $($field:ident $(: |$this:ident| $shown:expr)?),* $(,)? }) => {
        $crate::debug::debug_fields!(@impl self $ty finish [$($field $(|$this| $shown)?,)*]);
    };
    ($ty:ident { $($field:ident $(: |$this:ident| $shown:expr)?,)* .. }) => {
        $crate::debug::debug_fields!(
            @impl self $ty finish_non_exhaustive [$($field $(|$this| $shown)?,)*]
        );
    };
    (@impl $self:ident $ty:ident $finish:ident
        [$($field:ident $(|$this:ident| $shown:expr)?,)*]) => {
        impl ::std::fmt::Debug for $ty {
            fn fmt(&$self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(::std::stringify!($ty))
                    $(.field(
                        ::std::stringify!($field),
                        $crate::debug::debug_fields!(@shown $self $field $(|$this| $shown)?),
                    ))*
                    .$finish()
            }
        }
    };
    (@shown $self:ident $field:ident) => {
        &$self.$field
    };
    (@shown $self:ident $field:ident |$this:ident| $shown:expr) => {
        &{
            let $this = $self;
            $shown
        }
    };
}
pub(crate) use debug_fields;

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    /// Prints as its derive would.
    #[derive(Debug)]
    #[allow(dead_code)] // Read by its Debug only.
    struct Derived {
        a: u32,
        b: Option<&'static str>,
    }

    struct All {
        a: u32,
        b: Option<&'static str>,
    }
    debug_fields!(All { a, b });

    struct Part {
        a: u32,
        b: Option<&'static str>,
        #[allow(dead_code)]
        hidden: &'static str,
        queue: VecDeque<u8>,
    }
    debug_fields!(Part {
        b,
        a,
        queued: |s| s.queue.len(),
        ..
    });

    struct Nothing {
        #[allow(dead_code)]
        hidden: u8,
    }
    debug_fields!(Nothing { .. });

    #[test]
    fn prints_what_is_named_as_the_derive_prints_it() {
        let derived = Derived { a: 1, b: None };
        let all = All { a: 1, b: None };
        assert_eq!(
            format!("{all:?}"),
            format!("{derived:?}").replace("Derived", "All")
        );
        assert_eq!(
            format!("{all:#?}"),
            format!("{derived:#?}").replace("Derived", "All")
        );
        let part = Part {
            a: 7,
            b: Some("x"),
            hidden: "secret",
            queue: VecDeque::from([1, 2]),
        };
        assert_eq!(
            format!("{part:?}"),
            r#"Part { b: Some("x"), a: 7, queued: 2, .. }"#
        );
        assert_eq!(format!("{:?}", Nothing { hidden: 0 }), "Nothing { .. }");
    }
}
