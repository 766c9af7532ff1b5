//! Blocking waits for threads without an async runtime (feature `std`).

use core::future::Future;
use core::pin::pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::sync::Arc;
use std::task::Wake;
use std::thread::{self, Thread};

use super::{next_service, Acquire, Source};
use crate::lease::{Lease, Reason, Rejection};

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker that unparks the calling thread.
pub(crate) fn thread_waker() -> Waker {
    Waker::from(Arc::new(Unpark(thread::current())))
}

/// The time left before `timeout` from now, as `left()` of [`drive`] reads it (`None`: no
/// timeout).
pub(crate) fn time_left(timeout: Option<Duration>) -> impl Fn() -> Option<Duration> {
    let deadline = timeout.and_then(|t| std::time::Instant::now().checked_add(t));
    move || deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()))
}

/// Sleeps the calling thread for up to `nap` (`None`: until woken).
pub(crate) fn park(nap: Option<Duration>) {
    match nap {
        None => thread::park(),
        Some(d) => thread::park_timeout(d),
    }
}

/// Waits on the calling thread for up to `timeout` (`None`: no limit).
///
/// The thread drives itself: while queued it sleeps until it is woken or until time alone could
/// serve the queue of a rate limiter, whichever comes first, and then serves the queue. So a
/// blocking waiter needs no `Driver`. Timing out drops the request (nothing leaks) and returns
/// [`Reason::TimedOut`] — unless the request was completed in the meantime (a grant racing the
/// timeout): then that outcome is returned, and the request is counted once either way.
pub(crate) fn acquire_blocking<L: Source + ?Sized>(
    limiter: &L,
    permits: u32,
    timeout: Option<Duration>,
) -> Result<Lease<'_>, Rejection> {
    wait_with(limiter, permits, &thread_waker(), time_left(timeout), park)
}

/// The blocking loop, with time and sleep as parameters: `left()` is the time left before the
/// timeout (`None`: no timeout), `park(nap)` sleeps for up to `nap` (`None`: until woken by
/// `waker`).
pub(crate) fn wait_with<'a, L: Source + ?Sized>(
    limiter: &'a L,
    permits: u32,
    waker: &Waker,
    mut left: impl FnMut() -> Option<Duration>,
    mut park: impl FnMut(Option<Duration>),
) -> Result<Lease<'a>, Rejection> {
    let mut cx = Context::from_waker(waker);
    let mut fut = pin!(Acquire::new(limiter, permits).self_timed());
    loop {
        // Only a held future stops at its grant; this one does not.
        if let Some(outcome) = drive(limiter, fut.as_mut(), &mut cx, &mut left, &mut park) {
            return outcome;
        }
    }
}

/// Polls `fut` on the calling thread until it completes or times out (`Some` outcome), or,
/// for a [`held`](Acquire::held) future, until it holds its grant (`None`). `left()` is the
/// time left before the timeout (`None`: no timeout), `park(nap)` sleeps for up to `nap`
/// (`None`: until woken by `cx`'s waker). While queued it sleeps until woken or until time
/// alone could serve the queue of a rate limiter, whichever comes first.
pub(crate) fn drive<'a, L: Source + ?Sized>(
    limiter: &L,
    mut fut: core::pin::Pin<&mut Acquire<'a, L>>,
    cx: &mut Context<'_>,
    mut left: impl FnMut() -> Option<Duration>,
    mut park: impl FnMut(Option<Duration>),
) -> Option<Result<Lease<'a>, Rejection>> {
    loop {
        if let Poll::Ready(result) = fut.as_mut().poll(cx) {
            return Some(result);
        }
        if fut.as_mut().is_held() {
            return None;
        }
        let mut nap = match left() {
            Some(d) if d.is_zero() => {
                // Leave the queue first, then count: a grant that raced the timeout is received
                // (and counted) instead of counted and given back.
                return Some(match fut.as_mut().cancel() {
                    Some(outcome) => outcome,
                    None => {
                        let r = Rejection::new(&Reason::TimedOut);
                        limiter.counters().record_failure(&r);
                        Err(r)
                    }
                });
            }
            other => other,
        };
        if let Some(service) = next_service(limiter) {
            let service = service.max(Duration::from_micros(1));
            nap = Some(nap.map_or(service, |n| n.min(service)));
        }
        park(nap);
    }
}
