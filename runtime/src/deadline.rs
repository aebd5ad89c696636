//! The deadline and OpenTelemetry context a served RPC hands to the calls
//! its handler makes.
//!
//! A handler that calls its dependencies while serving an RPC works for a
//! caller who will wait only so long: the served RPC's `grpc-timeout`. A
//! call made on that caller's behalf cannot outlive it, and its trace
//! belongs under the served RPC's. As grpc-go passes its `ctx` and
//! grpc-java its `Context`, humus passes an [`Inherited`]: the served RPC's
//! deadline and context, current for the task that serves it, read by every
//! [`Client`](crate::grpc::client::Client) call made there without the handler
//! copying anything. A call's deadline is then the earliest of
//! [`Settings::timeout`](crate::grpc::client::Settings::timeout), the request's
//! own `grpc-timeout` and the inherited deadline; its context (the parent of
//! its attempts' spans, the baggage they carry) is the request extensions'
//! `opentelemetry::Context`, else the current one, which the scope attaches.
//!
//! Two ways in, neither tied to humus's own server:
//!
//! - [`InheritLayer`], one tower layer on a plain tonic server: it reads each
//!   request's trace context and baggage (with the service's propagator) and
//!   its `grpc-timeout`, and serves the request inside [`Inherited::scope`];
//! - [`Inherited::scope`] itself, for any other server, a tower layer of the
//!   user's, a job runner, or a test.
//!
//! ```no_run
//! use humus::grpc::deadline::InheritLayer;
//! # async fn serve(setup: humus::Setup) -> Result<(), tonic::transport::Error> {
//! # let router = tonic::service::Routes::default();
//! // Every handler's calls inherit its RPC's deadline and trace.
//! tonic::transport::Server::builder()
//!     .layer(InheritLayer::from_setup(&setup))
//!     .add_routes(router)
//!     .serve("127.0.0.1:50051".parse().unwrap())
//!     .await
//! # }
//! ```
//!
//! The scope is a tokio task-local: it holds while the served future is
//! polled, on whichever thread polls it, and not in a task the handler
//! spawns. humus's [`Server`](crate::grpc::server::Server), and
//! [`InheritLayer`] on a tonic server, also poll a response stream's body
//! inside it, so the calls made for a stream's messages inherit too. A handler
//! that hands work to a task of its own takes the inherited deadline
//! along:
//!
//! ```
//! use humus::grpc::deadline::Inherited;
//! # async fn handler() {
//! let work = async { /* calls through a humus Client */ };
//! let task = match Inherited::current() {
//!     Some(inherited) => tokio::spawn(inherited.scope(work)),
//!     None => tokio::spawn(async move { work.await }),
//! };
//! # let _ = task;
//! # }
//! ```
//!
//! A call dropped at or after its deadline, which is what a tonic server
//! does to a handler at the served RPC's `grpc-timeout`, counts as the
//! deadline (a failure for the circuit breaker), not as a caller who gave
//! up; see the [client's docs](crate::grpc::client#deadlines).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use http::HeaderMap;
use opentelemetry::Context;
use tokio::task::futures::TaskLocalFuture;
use tokio::time::Instant;

mod bound;
mod grpc_timeout;
mod layer;

pub(crate) use bound::{Bound, Deadline, encoding_step, served_deadline, to_millis};
pub(crate) use grpc_timeout::{
    GRPC_TIMEOUT, GRPC_TIMEOUT_HEADER, grpc_timeout, parse_grpc_timeout,
};
pub use layer::{Inherit, InheritBody, InheritFuture, InheritLayer};
pub(crate) use layer::{ScenarioVetted, Withheld};

tokio::task_local! {
    static CURRENT: Inherited;
}

/// The deadline and OpenTelemetry context of the RPC being served, which
/// the calls made while serving it inherit.
///
/// Set it for a future with [`Inherited::scope`] (or for every request of
/// a tonic server with [`InheritLayer`]); read it with
/// [`Inherited::current`]. The humus client reads it when a call is made:
/// the call's deadline is the earliest of its own and this one.
#[derive(Clone)]
pub struct Inherited {
    deadline: Option<Instant>,
    /// How much earlier than `deadline` the caller's own may be: the step
    /// to which its `grpc-timeout` may have been rounded up
    /// ([`encoding_step`]); zero for a deadline given exactly.
    step: Duration,
    context: Context,
}

crate::debug::debug_fields!(Inherited { deadline, context });

impl Inherited {
    /// The inherited `deadline` (`None`: the served RPC has none) and
    /// `context` (its span is the parent of the calls' attempts; its
    /// baggage goes with them).
    pub fn new(deadline: Option<Instant>, context: Context) -> Inherited {
        Inherited {
            deadline,
            step: Duration::ZERO,
            context,
        }
    }

    /// The inherited deadline of a request received with a `grpc-timeout`
    /// (`served`: the deadline it sets and the timeout, as
    /// [`served_deadline`] reads them), and `context`: the caller may
    /// have rounded its timeout up by up to one [`encoding_step`].
    pub(crate) fn served(served: Option<(Instant, Duration)>, context: Context) -> Inherited {
        Inherited {
            deadline: served.map(|(at, _)| at),
            step: served.map_or(Duration::ZERO, |(_, timeout)| encoding_step(timeout)),
            context,
        }
    }

    /// This deadline, with `context`.
    pub(crate) fn with_context(&self, context: Context) -> Inherited {
        Inherited {
            deadline: self.deadline,
            step: self.step,
            context,
        }
    }

    /// The deadline of a request whose `headers` arrived at `received`:
    /// its `grpc-timeout` (gRPC over HTTP/2, "Timeout": 1 to 8 digits and a
    /// unit, `H`, `M`, `S`, `m`, `u` or `n`) measured from `received`, and
    /// `context`. A missing or malformed `grpc-timeout` is no deadline, as
    /// tonic's server reads it.
    ///
    /// `received` is best taken when the request reaches the server's
    /// service, as tonic's server measures the same deadline there (and
    /// drops the handler at it).
    ///
    /// The caller's own deadline may be a little earlier, as a client may
    /// round the timeout it sends up (gRPC's C core to three significant
    /// digits): a call its handler makes that is dropped up to that step
    /// before this deadline still counts as the deadline's (see the
    /// [client's docs](crate::grpc::client#deadlines)).
    pub fn from_headers(headers: &HeaderMap, received: Instant, context: Context) -> Inherited {
        Inherited::served(served_deadline(headers, received), context)
    }

    /// The served RPC's deadline, if it has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The served RPC's OpenTelemetry context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The `Inherited` in scope for the running task ([`Inherited::scope`]),
    /// if any. `None` outside a scope, and outside a tokio task.
    pub fn current() -> Option<Inherited> {
        CURRENT.try_with(Clone::clone).ok()
    }

    /// The deadline in scope, without cloning the context.
    pub(crate) fn current_deadline() -> Option<Instant> {
        CURRENT.try_with(|i| i.deadline).ok().flatten()
    }

    /// The deadline in scope and its step ([`encoding_step`]), without
    /// cloning the context.
    pub(crate) fn current_stepped() -> Option<(Instant, Duration)> {
        CURRENT
            .try_with(|i| i.deadline.map(|at| (at, i.step)))
            .ok()
            .flatten()
    }

    /// Runs `fut` with this `Inherited` current ([`Inherited::current`]) and
    /// its context attached as OpenTelemetry's current context, while `fut`
    /// is polled (and dropped). A tokio task-local: it holds on whichever
    /// thread polls `fut`, but not in tasks `fut` spawns. Scopes nest: the
    /// innermost is current.
    ///
    /// humus's clients read the inherited deadline and context when a call
    /// is made (`client.get(..).send()`, `ledger.charge(..)`), not when its
    /// future is polled, so make the call inside the scoped future:
    ///
    /// ```ignore
    /// // Bounded by the scope: the call is made inside it.
    /// inherited.scope(async move { ledger.charge(request).await }).await;
    /// // Not bounded by it: the call was made before, outside the scope.
    /// inherited.scope(ledger.charge(request)).await;
    /// ```
    ///
    /// For the same reason a call made in a handler and then spawned
    /// (`tokio::spawn(ledger.charge(request))`) keeps the handler's
    /// deadline and context, while a call made inside the spawned task
    /// (`tokio::spawn(async move { ledger.charge(request).await })`) has
    /// none.
    pub fn scope<F: Future>(self, fut: F) -> Scoped<F> {
        let context = self.context.clone();
        Scoped {
            inner: CURRENT.scope(self, fut),
            context,
        }
    }

    /// Runs `f` with this `Inherited` current and its context attached.
    pub(crate) fn sync_scope<R>(self, f: impl FnOnce() -> R) -> R {
        let _guard = self.context.clone().attach();
        CURRENT.sync_scope(self, f)
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Inherited::scope`]: `F`, with an [`Inherited`]
    /// current and its context attached while it is polled. Its output is
    /// `F`'s.
    pub struct Scoped<F: Future> {
        #[pin]
        inner: TaskLocalFuture<Inherited, F>,
        context: Context,
    }
}

impl<F: Future> fmt::Debug for Scoped<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scoped")
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _guard = this.context.clone().attach();
        this.inner.poll(cx)
    }
}

pin_project_lite::pin_project! {
    /// A future that is either `F` as it is, or `F` inside a scope of its
    /// own ([`Inherited::scope`]): the inner service's future under
    /// [`StripScenario`](crate::grpc::server::StripScenario), rescoped when
    /// it stripped a scenario that an outer [`InheritLayer`] had already
    /// read (see [`InheritLayer`]'s order). Its output is `F`'s.
    pub struct MaybeScoped<F: Future> {
        #[pin]
        inner: Either<F>,
    }
}

pin_project_lite::pin_project! {
    #[project = EitherProj]
    enum Either<F: Future> {
        As {
            #[pin]
            future: F,
        },
        Scoped {
            #[pin]
            future: Scoped<F>,
        },
    }
}

impl<F: Future> MaybeScoped<F> {
    /// `future`, polled in whatever scope polls it.
    pub(crate) fn unscoped(future: F) -> MaybeScoped<F> {
        MaybeScoped {
            inner: Either::As { future },
        }
    }

    /// `future`, polled inside `inherited`'s scope.
    pub(crate) fn scoped(inherited: Inherited, future: F) -> MaybeScoped<F> {
        MaybeScoped {
            inner: Either::Scoped {
                future: inherited.scope(future),
            },
        }
    }
}

impl<F: Future> fmt::Debug for MaybeScoped<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scoped = matches!(self.inner, Either::Scoped { .. });
        f.debug_struct("MaybeScoped")
            .field("scoped", &scoped)
            .finish_non_exhaustive()
    }
}

impl<F: Future> Future for MaybeScoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        match self.project().inner.project() {
            EitherProj::As { future } => future.poll(cx),
            EitherProj::Scoped { future } => future.poll(cx),
        }
    }
}
