//! The `Acquire` future: a waiter node inside a pinned future.

#![allow(unsafe_code)]

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::list::{Status, Waiter};
use super::{Source, WakeList};
use crate::lease::{Lease, Reason, Rejection};

enum Stage {
    Start,
    Queued,
    Done,
}

/// The future returned by `acquire(n)`: resolves to a lease once the permits are granted, or to
/// a rejection (queue full, evicted, closed, exceeds limit).
///
/// Cancellation-safe: dropping it at any point — before its first poll, while queued, or after
/// its permits were granted but before it completed — frees its queue capacity at once and gives
/// back any permits it was handed. It holds its queue node inline (it is `!Unpin`; pin it with
/// `core::pin::pin!` or `Box::pin` to poll by hand, `.await` does that for you).
#[must_use = "futures do nothing unless polled"]
pub struct Acquire<'a, L: Source + ?Sized> {
    limiter: &'a L,
    waiter: Waiter,
    stage: Stage,
}

impl<'a, L: Source + ?Sized> Acquire<'a, L> {
    pub(crate) fn new(limiter: &'a L, permits: u32) -> Self {
        Self {
            limiter,
            waiter: Waiter::new(permits),
            stage: Stage::Start,
        }
    }

    fn project(self: Pin<&mut Self>) -> (&'a L, Pin<&Waiter>, &mut Stage) {
        // SAFETY: `waiter` is structurally pinned: it is never moved out of `self`, and `Drop`
        // unlinks it before it is dropped. `limiter` and `stage` are not pinned (plain data).
        unsafe {
            let this = self.get_unchecked_mut();
            (
                this.limiter,
                Pin::new_unchecked(&this.waiter),
                &mut this.stage,
            )
        }
    }

    /// The first poll: the lock-free attempt, then the slow path under the queue lock.
    fn start(
        l: &'a L,
        waiter: Pin<&Waiter>,
        cx: &Context<'_>,
    ) -> Poll<Result<Lease<'a>, Rejection>> {
        let n = waiter.permits();
        let counters = l.counters();
        if n > l.limit() {
            counters.record_failure();
            return Poll::Ready(Err(Rejection::new(Reason::ExceedsLimit)));
        }
        match l.take_now(n) {
            Ok(()) => {
                counters.record_success();
                return Poll::Ready(Ok(l.lease(n)));
            }
            Err(r) if r.reason() != Reason::Exhausted => {
                counters.record_failure();
                return Poll::Ready(Err(r));
            }
            Err(_) => {}
        }
        let q = l.queue();
        // Serve first: time may have brought permits for those ahead.
        q.serve(l);
        let mut wakes = WakeList::new();
        let (outcome, notify) = q.list.with(|list| {
            q.serve_locked(l, list, &mut wakes);
            let queued = list.queued_permits();
            let behind = !list.is_empty() && !q.barging();
            let room = u64::from(q.limit).saturating_sub(queued);
            let can_queue = n == 0 || room >= u64::from(n) || (q.barging() && n <= q.limit);
            if !behind {
                match l.take_locked(n, can_queue) {
                    Ok(Some(_)) => return (Some(Ok(())), false),
                    Err(reason) => return (Some(Err(Rejection::new(reason))), false),
                    Ok(None) => {}
                }
            }
            if !can_queue {
                let wait = l.wait_for_permits(queued.saturating_add(u64::from(n)));
                let r = match wait {
                    Some(d) => Rejection::with_retry_after(
                        Reason::QueueFull,
                        d.max(core::time::Duration::from_nanos(1)),
                    ),
                    None => Rejection::new(Reason::QueueFull),
                };
                return (Some(Err(r)), false);
            }
            // Newest-first: evict the oldest until the newcomer fits.
            while n > 0 && u64::from(q.limit).saturating_sub(list.queued_permits()) < u64::from(n) {
                let Some(oldest) = list.front() else { break };
                wakes.push(list.complete(oldest, Status::Rejected(Reason::Evicted)));
                counters.record_failure();
            }
            let next_to_serve = list.is_empty() || q.barging();
            list.push_back(waiter, cx.waker());
            q.sync_count(list);
            (None, next_to_serve)
        });
        wakes.wake_all();
        if notify {
            q.notify();
        }
        match outcome {
            Some(Ok(())) => {
                counters.record_success();
                Poll::Ready(Ok(l.lease(n)))
            }
            Some(Err(r)) => {
                counters.record_failure();
                Poll::Ready(Err(r))
            }
            None => Poll::Pending,
        }
    }

    /// A later poll: completed by a server, or still waiting (serving first, in case time has
    /// brought permits and nobody else noticed).
    fn check(
        l: &'a L,
        waiter: Pin<&Waiter>,
        cx: &Context<'_>,
    ) -> Poll<Result<Lease<'a>, Rejection>> {
        let q = l.queue();
        let mut wakes = WakeList::new();
        let status = q.list.with(|list| {
            if list.status(waiter) == Status::Queued {
                q.serve_locked(l, list, &mut wakes);
            }
            let status = list.status(waiter);
            if status == Status::Queued {
                list.set_waker(waiter, cx.waker());
            }
            status
        });
        wakes.wake_all();
        match status {
            Status::Granted(_) => Poll::Ready(Ok(l.lease(waiter.permits()))),
            Status::Rejected(reason) => Poll::Ready(Err(Rejection::new(reason))),
            Status::Queued | Status::Idle => Poll::Pending,
        }
    }
}

impl<'a, L: Source + ?Sized> Future for Acquire<'a, L> {
    type Output = Result<Lease<'a>, Rejection>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (l, waiter, stage) = self.project();
        let poll = match stage {
            Stage::Start => Self::start(l, waiter, cx),
            Stage::Queued => Self::check(l, waiter, cx),
            Stage::Done => return Poll::Ready(Err(Rejection::new(Reason::Closed))),
        };
        *stage = if poll.is_ready() {
            Stage::Done
        } else {
            Stage::Queued
        };
        poll
    }
}

impl<L: Source + ?Sized> Drop for Acquire<'_, L> {
    fn drop(&mut self) {
        if !matches!(self.stage, Stage::Queued) {
            return;
        }
        let l = self.limiter;
        // SAFETY: `self` is being dropped in place; the waiter has not moved since it was pinned
        // and is still alive for the duration of this call.
        let waiter = unsafe { Pin::new_unchecked(&self.waiter) };
        let q = l.queue();
        let mut wakes = WakeList::new();
        let status = q.list.with(|list| {
            let status = list.remove(waiter);
            if status == Status::Queued {
                // Its capacity is free now; a smaller waiter behind it may fit.
                q.serve_locked(l, list, &mut wakes);
            }
            status
        });
        wakes.wake_all();
        if let Status::Granted(stamp) = status {
            // Granted but never received: the permits go back (and on to the next waiter).
            l.give_back(waiter.permits(), stamp);
        }
    }
}

impl<L: Source + ?Sized> core::fmt::Debug for Acquire<'_, L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Acquire")
            .field("permits", &self.waiter.permits())
            .finish_non_exhaustive()
    }
}
