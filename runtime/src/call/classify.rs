//! A transport's classify type: one definition for the HTTP client's, the
//! Kafka producer's and the RabbitMQ publisher's.

/// Defines the public classify type `$name` of a transport: a cheaply
/// cloned wrapper (an `Arc`) of any closure of an attempt's arguments
/// (`$arg: $ty`) to a [`Classification`](crate::call::Classification);
/// `new` wraps one, `classify` calls it, [`Default`] is the transport's
/// `$default` function, and its `Debug` prints its name alone.
macro_rules! classify_fn {
    (
        $(#[$doc:meta])*
        pub struct $name:ident;
        $(#[$classify_doc:meta])*
        pub fn classify(&self, $($arg:ident: $ty:ty),+ $(,)?);
        default $default:path;
    ) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name {
            f: ::std::sync::Arc<
                dyn Fn($($ty),+) -> $crate::call::Classification + Send + Sync,
            >,
        }

        impl $name {
            /// A classify of `f`.
            pub fn new(
                f: impl Fn($($ty),+) -> $crate::call::Classification + Send + Sync + 'static,
            ) -> $name {
                $name {
                    f: ::std::sync::Arc::new(f),
                }
            }

            $(#[$classify_doc])*
            pub fn classify(&self, $($arg: $ty),+) -> $crate::call::Classification {
                (self.f)($($arg),+)
            }
        }

        impl ::std::default::Default for $name {
            fn default() -> $name {
                $name::new($default)
            }
        }

        impl ::std::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(::std::stringify!($name))
            }
        }
    };
}
pub(crate) use classify_fn;
