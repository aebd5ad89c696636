//! [`Call`]: the attempt loop over a [`Transport`].

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

use super::{Attempt, DROPPED_AT_DEADLINE, Transport};
use crate::circuit::{Breaker, OwnedTicket, Ticket};
use crate::fault::{Cause, InjectedError};
use crate::retry::{self, Attempted, Decision, Next, Verdict};

/// One call: the transport's half, and what the loop keeps of it.
///
/// It owns the attempt in flight (its breaker ticket and its span), so a
/// call whose future is dropped settles that attempt in its `Drop` (see
/// the [module](super) docs).
pub(crate) struct Call<'a, T: Transport> {
    /// The client's breaker, which each attempt's ticket borrows.
    breaker: &'a Breaker,
    t: T,
    attempt: u32,
    /// The attempt under way: admitted by the breaker, not yet settled.
    in_flight: Option<InFlight<'a, T::Span>>,
    /// Waiting out the backoff before the next attempt.
    waiting: bool,
}

/// The attempt under way: what settling it needs.
struct InFlight<'a, S> {
    ticket: Ticket<'a>,
    span: S,
}

/// A stream that opened ([`Call::open`]): the attempt's answer, and its
/// ticket and span, for the stream to settle and end when it ends.
pub(crate) struct Opened<O, S> {
    pub(crate) output: O,
    pub(crate) ticket: OwnedTicket,
    pub(crate) span: S,
}

/// What failed an attempt inside the loop's bounds.
enum Failed<E> {
    /// The failure-injection point.
    Injected(InjectedError),
    /// The transport's send.
    Sent(E),
}

/// What ended one attempt, apart from its result.
enum Cut<T, E> {
    /// The attempt returned.
    Returned(Result<T, Failed<E>>),
    /// The attempt's deadline passed first.
    Deadline,
    /// The client was closed; with the injected delay the close cut
    /// short, which keeps its [`InjectedError`].
    Closed(Option<InjectedError>),
}

impl<'a, T: Transport> Call<'a, T> {
    /// A call of `t`, through `breaker`, no attempt made yet.
    pub(crate) fn new(breaker: &'a Breaker, t: T) -> Call<'a, T> {
        Call {
            breaker,
            t,
            attempt: 0,
            in_flight: None,
            waiting: false,
        }
    }

    /// The transport's half of the call.
    pub(crate) fn transport(&self) -> &T {
        &self.t
    }

    /// The transport's half of the call, to change.
    pub(crate) fn transport_mut(&mut self) -> &mut T {
        &mut self.t
    }

    /// Runs the call: attempts until one answers for good, the retries
    /// run out, or the call's deadline, the breaker or the close ends it.
    ///
    /// The loop's own future, not one around it (which would be built by
    /// moving the loop's into it).
    pub(crate) fn run(&mut self) -> impl Future<Output = Result<T::Output, T::Error>> + '_ {
        self.attempts::<false>()
    }

    /// Opens a stream: attempts as [`Call::run`]'s until one returns an
    /// answer (the stream opened); that attempt is then not settled, but
    /// handed to the stream ([`Opened`]), which counts it when it ends.
    /// The decision is recorded now (`succeeded`, and the budget's share).
    pub(crate) async fn open(&mut self) -> Result<Opened<T::Output, T::Span>, T::Error> {
        let output = self.attempts::<true>().await?;
        let InFlight { ticket, span } = self.take_attempt();
        Ok(Opened {
            output,
            ticket: ticket.into_owned(),
            span,
        })
    }

    /// The loop. `OPEN`: an attempt that answers opens a stream, and is
    /// left in flight for [`Call::open`].
    async fn attempts<const OPEN: bool>(&mut self) -> Result<T::Output, T::Error> {
        // A call takes a unit of the task's cooperative budget, as a tokio
        // resource does: a loop of calls failed at once (the breaker open)
        // still yields to the runtime.
        tokio::task::coop::consume_budget().await;
        if let Some(error) = self.expired() {
            return Err(error);
        }
        loop {
            self.allow()?;
            let attempt = self.attempt_deadline();
            let prepared = self.t.prepare(attempt);
            let cut = {
                let (t, span) = self.attempt_parts();
                let timer = if T::TIMES_ATTEMPTS {
                    attempt.bound
                } else {
                    None
                };
                bounded(t, timer, async move {
                    inject(t, span, attempt.bound)
                        .await
                        .map_err(Failed::Injected)?;
                    t.send(attempt, prepared, span).await.map_err(Failed::Sent)
                })
                .await
            };
            let result = match cut {
                Cut::Returned(Ok(output)) => Ok(output),
                Cut::Returned(Err(Failed::Sent(error))) => Err(error),
                Cut::Returned(Err(Failed::Injected(injected)))
                    if injected.cause() == Some(Cause::DeadlineExceeded) =>
                {
                    Err(self.cut_error(attempt, Some(injected)))
                }
                Cut::Returned(Err(Failed::Injected(injected))) => Err(self.t.injected(injected)),
                Cut::Deadline => Err(self.cut_error(attempt, None)),
                Cut::Closed(injected) => {
                    let error = match injected {
                        Some(injected) => self.t.injected(injected),
                        None => self.t.closing(),
                    };
                    return Err(self.closed(error));
                }
            };
            if OPEN && result.is_ok() {
                // Opened: the call succeeded, however the stream ends; the
                // stream keeps the attempt.
                self.opened();
                return result;
            }
            let InFlight { ticket, span } = self.take_attempt();
            self.t.end(span, result.as_ref());
            let (next, passed) = self.settle(ticket, result.as_ref());
            match next {
                Next::Retry { after } => {
                    self.t.retrying(result, passed);
                    self.wait(after).await?;
                }
                next => return self.t.finish(result, next.decision(), passed),
            }
        }
    }

    /// The error of a call whose deadline had passed when it was made
    /// (an inherited one, or its own of zero), if it had: the call ends
    /// before the breaker is asked, with no attempt, no attempt span and
    /// nothing counted; `expired` in `humus.retry.decisions`.
    fn expired(&self) -> Option<T::Error> {
        let at = self.t.deadline()?;
        let now = self.t.started().unwrap_or_else(Instant::now);
        if now < at {
            return None;
        }
        self.t.core().recorder.record_decision(Decision::Expired);
        Some(self.t.expired())
    }

    /// Admits the next attempt through the breaker, in the call's context,
    /// and starts its span: the attempt is then in flight.
    fn allow(&mut self) -> Result<(), T::Error> {
        self.attempt += 1;
        let core = self.t.core();
        if self.t.is_closed() {
            core.recorder.record_decision(Decision::Stopped);
            return Err(self.t.closing());
        }
        match crate::telemetry::in_context(self.t.context(), || self.breaker.allow()) {
            Ok(ticket) => {
                let span = self.t.start(self.attempt);
                self.in_flight = Some(InFlight { ticket, span });
                Ok(())
            }
            Err(rejected) => {
                let error = self.t.rejected(self.attempt, rejected);
                core.recorder.record_decision(Decision::Stopped);
                Err(error)
            }
        }
    }

    /// The attempt starting now: its deadline is the earlier of the call's
    /// and, when the transport bounds attempts, that long from now (the
    /// call's if the clock cannot say when). Unbounded, it reads no clock.
    fn attempt_deadline(&self) -> Attempt {
        let call = self.t.deadline();
        let n = self.attempt;
        let Some(after) = self.t.attempt_timeout() else {
            return Attempt {
                n,
                bound: call,
                own: false,
            };
        };
        let now = match self.t.started() {
            Some(started) if n == 1 => started,
            _ => Instant::now(),
        };
        match now.checked_add(after) {
            Some(own) if call.is_none_or(|d| own < d) => Attempt {
                n,
                bound: Some(own),
                own: true,
            },
            _ => Attempt {
                n,
                bound: call,
                own: false,
            },
        }
    }

    /// The error of `attempt`, which its deadline cut short
    /// ([`cut_error`]).
    fn cut_error(&self, attempt: Attempt, injected: Option<InjectedError>) -> T::Error {
        cut_error(&self.t, attempt, injected)
    }

    /// The attempt in flight, for its future to send with.
    fn attempt_parts(&mut self) -> (&T, &mut T::Span) {
        let span = &mut self
            .in_flight
            .as_mut()
            .expect("an attempt is in flight between allow and its end")
            .span;
        (&self.t, span)
    }

    /// Takes the attempt in flight, to settle or to hand to a stream.
    fn take_attempt(&mut self) -> InFlight<'a, T::Span> {
        self.in_flight
            .take()
            .expect("an attempt is in flight between allow and its end")
    }

    /// The client closed under the attempt in flight: its span ends with
    /// `error`, its ticket is released (counting nothing), and the call
    /// ends without another attempt (`stopped`).
    fn closed(&mut self, error: T::Error) -> T::Error {
        let InFlight { ticket, span } = self.take_attempt();
        self.t.end(span, Err(&error));
        ticket.release();
        self.t.core().recorder.record_decision(Decision::Stopped);
        error
    }

    /// Waits before the next attempt; `Err` if the client closes first
    /// (the call then ends, `stopped`).
    async fn wait(&mut self, after: Duration) -> Result<(), T::Error> {
        self.waiting = true;
        let closed = tokio::select! {
            () = self.t.closed() => true,
            () = tokio::time::sleep(after) => false,
        };
        self.waiting = false;
        if closed {
            self.t.core().recorder.record_decision(Decision::Stopped);
            return Err(self.t.closing());
        }
        Ok(())
    }

    /// The stream opened: the call succeeded, however the stream ends
    /// (`succeeded` in `humus.retry.decisions`, and the budget's share).
    fn opened(&self) {
        let core = self.t.core();
        let next = retry::decide(
            core.budget,
            &Attempted {
                verdict: Verdict::Success,
                retry_after: None,
                attempt: self.attempt,
                max_attempts: core.max_attempts,
                backoff: Duration::ZERO,
                backoff_max: core.backoff_max,
                now: Instant::now(),
                deadline: self.t.deadline(),
            },
        );
        core.recorder.record_decision(next.decision());
    }

    /// Counts a finished attempt in the breaker and decides what follows;
    /// with whether the call's deadline had passed.
    fn settle(&self, ticket: Ticket<'a>, result: Result<&T::Output, &T::Error>) -> (Next, bool) {
        let core = self.t.core();
        let now = Instant::now();
        let deadline = self.t.deadline();
        let passed = deadline.is_some_and(|d| now >= d);
        let mut c = self.t.classify(result, passed);
        if c.retry == Verdict::Retry && !self.t.is_resendable() {
            c.retry = Verdict::Stop;
            c.retry_after = None;
        }
        // What the breaker counted: a result it discarded as late (it
        // changed state since admitting the attempt) is `late` in
        // `humus.circuit.calls`, never the outcome it did not count.
        let current = crate::telemetry::in_context(self.t.context(), || ticket.done(c.breaker));
        core.recorder.record_settled(c.breaker, current);
        let next = retry::decide(
            core.budget,
            &Attempted {
                verdict: c.retry,
                retry_after: c.retry_after,
                attempt: self.attempt,
                max_attempts: core.max_attempts,
                // Drawn only for a retry: nothing else waits it out.
                backoff: if c.retry == Verdict::Retry {
                    core.backoff.backoff(self.attempt)
                } else {
                    Duration::ZERO
                },
                backoff_max: core.backoff_max,
                now,
                deadline,
            },
        );
        core.recorder.record_decision(next.decision());
        (next, passed)
    }
}

impl<'a, T: Transport> Drop for Call<'a, T> {
    /// The call's future was dropped: settles the attempt in flight as
    /// the deadline's ([`Transport::dropped_by_deadline`]) or as the caller's giving
    /// up (before it: its ticket and span are dropped, which release the
    /// ticket and end the span as dropped).
    fn drop(&mut self) {
        // A call that ended (or never started an attempt) has nothing to
        // settle: no clock read.
        if self.in_flight.is_none() && !self.waiting {
            return;
        }
        if !self.t.dropped_by_deadline(Instant::now()) {
            return;
        }
        let core = self.t.core();
        if let Some(InFlight { ticket, span }) = self.in_flight.take() {
            self.t.end(span, Err(&self.t.deadline_exceeded()));
            let current =
                crate::telemetry::in_context(self.t.context(), || ticket.done(DROPPED_AT_DEADLINE));
            core.recorder.record_settled(DROPPED_AT_DEADLINE, current);
        }
        // Nothing in flight while waiting: the wait ended with the call.
        core.recorder.record_decision(Decision::Expired);
    }
}

/// The error of `attempt`, which its deadline cut short: the attempt's
/// own timeout when its bound is its own, unless the call's deadline has
/// passed too. `injected` is the injected delay the deadline cut short, if
/// it cut one: the attempt's timeout keeps it, and the call's deadline
/// returns it as the transport makes it. The loop's when it times the
/// attempt; a transport that bounds its own send
/// ([`Transport::TIMES_ATTEMPTS`] `false`) makes the same.
pub(crate) fn cut_error<T: Transport>(
    t: &T,
    attempt: Attempt,
    injected: Option<InjectedError>,
) -> T::Error {
    match t.attempt_timeout() {
        Some(after) if attempt.own && t.deadline().is_none_or(|d| Instant::now() < d) => {
            t.attempt_timed_out(after, injected)
        }
        _ => match injected {
            Some(injected) => t.injected(injected),
            None => t.deadline_exceeded(),
        },
    }
}

/// The failure-injection point of an attempt: evaluated in the attempt's
/// context, inside the breaker and the attempt's deadline (`bound`, which
/// ends a delay), a delay racing the client's close. Injection off,
/// nothing is evaluated.
async fn inject<T: Transport>(
    t: &T,
    span: &T::Span,
    bound: Option<Instant>,
) -> Result<(), InjectedError> {
    let faults = t.core().faults;
    if !faults.is_on() {
        return Ok(());
    }
    let (fault, point) = t.evaluate(span);
    if fault.is_none() {
        return Ok(());
    }
    // Boxed: only an attempt a fault is injected into waits here, and the
    // call's state stays small.
    Box::pin(fault.inject_until(point, bound, t.closed())).await
}

/// Runs `attempt` until it returns, the deadline passes or the client
/// closes (a close seen before or with an attempt's error wins; a success
/// that came first is kept).
///
/// The close needs no waiter here: it fails the IO the attempt waits on,
/// which wakes the attempt's task, and a fault's delay races the close
/// itself; so on any wake-up the flag is read first.
fn bounded<'t, T, O, E, F>(t: &'t T, deadline: Option<Instant>, attempt: F) -> Bounded<'t, T, F>
where
    T: Transport,
    F: Future<Output = Result<O, Failed<E>>>,
{
    Bounded {
        attempt,
        timer: deadline.map(tokio::time::sleep_until),
        t,
        deadline,
        registered: None,
    }
}

pin_project_lite::pin_project! {
    /// The future of [`bounded`], polled by hand rather than with
    /// `select!`: on each wake-up the close's flag is read and the attempt
    /// polled first, and the deadline costs a waker comparison. Its timer
    /// enters tokio's wheel when the attempt first waits (with coop budget
    /// left, which the timer needs), and again only when the task's waker
    /// changes; the timer's own wake-up is read as
    /// [`Sleep::is_elapsed`](tokio::time::Sleep::is_elapsed). The attempt
    /// is stored once, in place (an `async fn` would keep its argument and
    /// its pinned copy apart).
    struct Bounded<'t, T, F> {
        #[pin]
        attempt: F,
        #[pin]
        timer: Option<tokio::time::Sleep>,
        t: &'t T,
        deadline: Option<Instant>,
        // The waker the timer was registered with.
        registered: Option<std::task::Waker>,
    }
}

impl<T, O, E, F> Future for Bounded<'_, T, F>
where
    T: Transport,
    F: Future<Output = Result<O, Failed<E>>>,
{
    type Output = Cut<O, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Cut<O, E>> {
        let mut this = self.project();
        if this.t.is_closed() {
            // Polled once more: a fault's delay ends at the close with its
            // own error.
            return Poll::Ready(Cut::Closed(injected(this.attempt.poll(cx))));
        }
        if let Poll::Ready(result) = this.attempt.poll(cx) {
            return Poll::Ready(match result {
                // The close fails the connection under the attempt: an
                // error made so comes after the flag was set, and is the
                // close's (read again here, as it may have landed during
                // this poll), never a failure to count.
                Err(failed) if this.t.is_closed() => {
                    Cut::Closed(injected::<O, E>(Poll::Ready(Err(failed))))
                }
                // An injected delay the deadline cut short keeps its own
                // error.
                Err(Failed::Sent(_)) if this.deadline.is_some_and(|d| Instant::now() >= d) => {
                    Cut::Deadline
                }
                result => Cut::Returned(result),
            });
        }
        if this.timer.is_none() {
            return Poll::Pending;
        }
        if this
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            if this
                .timer
                .as_ref()
                .as_pin_ref()
                .is_some_and(|t| t.is_elapsed())
            {
                return Poll::Ready(Cut::Deadline);
            }
            return Poll::Pending;
        }
        // First wait, or a new waker: (re)register the timer with it.
        // A `Sleep` polled when the task's coop budget is spent returns
        // Pending without entering the timer wheel (it wakes the task to
        // come back): the registration counts only if budget was left.
        let armed = tokio::task::coop::has_budget_remaining();
        if let Some(timer) = this.timer.as_mut().as_pin_mut()
            && timer.poll(cx).is_ready()
        {
            return Poll::Ready(Cut::Deadline);
        }
        // Not armed: no fast path until a poll with budget registers it.
        *this.registered = armed.then(|| cx.waker().clone());
        Poll::Pending
    }
}

/// The injected delay that the close cut short, if `polled` is one; else
/// nothing (the close's own error is the attempt's).
fn injected<O, E>(polled: Poll<Result<O, Failed<E>>>) -> Option<InjectedError> {
    match polled {
        Poll::Ready(Err(Failed::Injected(injected))) => Some(injected),
        _ => None,
    }
}
