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

/// Waits on the calling thread for up to `timeout` (`None`: no limit).
///
/// The thread drives itself: while queued it sleeps until it is woken or until time alone could
/// serve the queue of a rate limiter, whichever comes first, and then serves the queue. So a
/// blocking waiter needs no `Driver`. Timing out drops the request (nothing leaks) and returns
/// [`Reason::TimedOut`].
pub(crate) fn acquire_blocking<L: Source + ?Sized>(
    limiter: &L,
    permits: u32,
    timeout: Option<Duration>,
) -> Result<Lease<'_>, Rejection> {
    let deadline = timeout.and_then(|t| std::time::Instant::now().checked_add(t));
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(Acquire::new(limiter, permits));
    loop {
        if let Poll::Ready(result) = fut.as_mut().poll(&mut cx) {
            return result;
        }
        let mut nap = match deadline {
            Some(d) => match d.checked_duration_since(std::time::Instant::now()) {
                Some(left) if !left.is_zero() => left,
                _ => {
                    limiter.counters().record_failure();
                    return Err(Rejection::new(Reason::TimedOut));
                }
            },
            None => Duration::MAX,
        };
        if let Some(service) = next_service(limiter) {
            nap = nap.min(service.max(Duration::from_micros(1)));
        }
        if nap == Duration::MAX {
            thread::park();
        } else {
            thread::park_timeout(nap);
        }
    }
}
