//! The `Acquire` future: a waiter node inside a pinned future.

#![allow(unsafe_code)]

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use super::list::{List, Status, Waiter};
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
/// back any permits it was handed (a waiter dropped after its grant but before it completed is a
/// cancelled request: the statistics do not count it). It holds its queue node inline (it is
/// `!Unpin`; pin it with `core::pin::pin!` or `Box::pin` to poll by hand, `.await` does that for
/// you).
///
/// With feature `std`, a waiter on a rate limiter whose clock moves by itself
/// ([`StdClock`](crate::StdClock), a running [`CoarseClock`](crate::CoarseClock)) is woken by the
/// process-wide timer when time brings its permits: nothing else needs to run.
///
/// ```
/// use core::{future::Future, pin::pin, task::{Context, Poll, Waker}};
/// use tollgate::{Acquire, AcquireAsync, ConcurrencyLimiter, ConcurrencyOptions, Limiter, QueueOrder};
///
/// let mut cx = Context::from_waker(Waker::noop());
/// let opts = ConcurrencyOptions::new(1).with_queue(2, QueueOrder::OldestFirst);
/// let pool = ConcurrencyLimiter::new(opts).unwrap();
/// let held = pool.try_acquire(1).unwrap();
/// let waiter: Acquire<'_, _> = pool.acquire(1);
/// let mut waiter = pin!(waiter);
/// assert!(waiter.as_mut().poll(&mut cx).is_pending()); // queued
/// assert_eq!(pool.statistics().queued_permits, 1);
/// drop(held); // the release grants the queued waiter
/// assert!(matches!(waiter.poll(&mut cx), Poll::Ready(Ok(lease)) if lease.permits() == 1));
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct Acquire<'a, L: Source + ?Sized> {
    limiter: &'a L,
    waiter: Waiter,
    stage: Stage,
    /// Whether a grant made to this waiter while queued is held (not received) until
    /// [`unhold`](Self::unhold): a jittered wait (`crate::jitter`).
    hold: bool,
    /// Whether this waiter arms the process timer for its service instant.
    #[cfg(all(any(feature = "std", feature = "embassy-time"), not(loom)))]
    timer: Option<super::timer::Timer>,
}

/// What a locked step decided for a newcomer.
enum Decision {
    /// Granted at once, with the grant's stamp.
    Granted(u64),
    Refused(Rejection),
    /// Linked; `true` if it is the next to be served.
    Queued(bool),
}

/// A waiting acquisition's lock-free attempt, decided without the queue: over the limit, or
/// taken at once, or refused for a reason no wait changes (closed), counted; `None` when the
/// permits are short and it would wait (the queue decides). The first poll of
/// [`Acquire`] starts with it; `AcquireAsync::acquire_now` is it, without a future.
pub(crate) fn acquire_now<L: Source + ?Sized>(
    l: &L,
    n: u32,
) -> Option<Result<Lease<'_>, Rejection>> {
    let counters = l.counters();
    if n > l.limit() {
        let r = Rejection::new(&Reason::ExceedsLimit);
        counters.record_failure(&r);
        return Some(Err(r));
    }
    match l.take_now(n) {
        Ok(stamp) => {
            counters.record_success();
            Some(Ok(l.lease(n, stamp)))
        }
        Err(r) if r.reason() != Reason::Exhausted => {
            counters.record_failure(&r);
            Some(Err(r))
        }
        Err(_) => None,
    }
}

impl<'a, L: Source + ?Sized> Acquire<'a, L> {
    pub(crate) fn new(limiter: &'a L, permits: u32) -> Self {
        Self {
            limiter,
            waiter: Waiter::new(permits),
            stage: Stage::Start,
            hold: false,
            #[cfg(all(any(feature = "std", feature = "embassy-time"), not(loom)))]
            timer: Some(super::timer::Timer::new()),
        }
    }

    /// The same future, for a caller that wakes itself on time (a blocking wait): no timer.
    #[cfg(feature = "std")]
    pub(crate) fn self_timed(self) -> Self {
        #[cfg(not(loom))]
        {
            let mut this = self;
            this.timer = None;
            this
        }
        #[cfg(loom)]
        self
    }

    /// The same future, holding a grant made to it while queued: a poll that finds it granted
    /// returns `Pending` and leaves it unreceived ([`is_held`](Self::is_held)), so that dropping
    /// it then gives the permits back, uncounted, as for any waiter dropped after its grant. What
    /// completes at its first poll (an immediate grant, a refusal) is not held.
    pub(crate) fn held(mut self) -> Self {
        self.hold = true;
        self
    }

    /// Whether a grant is held: queued, granted, not yet received.
    pub(crate) fn is_held(self: Pin<&mut Self>) -> bool {
        let p = self.project();
        matches!(p.stage, Stage::Queued) && matches!(p.waiter.completed(), Some(Status::Granted(_)))
    }

    /// Stops holding: the next poll receives a held grant.
    pub(crate) fn unhold(self: Pin<&mut Self>) {
        *self.project().hold = false;
    }

    fn project(self: Pin<&mut Self>) -> Projection<'_, 'a, L> {
        // SAFETY: `waiter` is structurally pinned: it is never moved out of `self`, and `Drop`
        // unlinks it before it is dropped. The other fields are not pinned (plain data).
        unsafe {
            let this = self.get_unchecked_mut();
            Projection {
                limiter: this.limiter,
                waiter: Pin::new_unchecked(&this.waiter),
                stage: &mut this.stage,
                hold: &mut this.hold,
                #[cfg(all(any(feature = "std", feature = "embassy-time"), not(loom)))]
                timer: &mut this.timer,
            }
        }
    }

    /// The first poll: the lock-free attempt ([`acquire_now`]), then the slow path under the
    /// queue lock.
    /// `Err(true)`: queued as the next to be served; `Err(false)`: queued behind others.
    #[allow(clippy::type_complexity)]
    fn start(
        l: &'a L,
        waiter: Pin<&Waiter>,
        cx: &Context<'_>,
    ) -> Result<Result<Lease<'a>, Rejection>, bool> {
        let n = waiter.permits();
        if let Some(decided) = acquire_now(l, n) {
            return Ok(decided);
        }
        let counters = l.counters();
        let q = l.queue();
        // Cloned before locking: no user code runs under the lock.
        let mut waker = Some(cx.waker().clone());
        let mut wakes = WakeList::new();
        let decision = q.locked(&mut wakes, |list, wakes| {
            // Serve first: time may have brought permits for those ahead (not where only
            // operations that serve bring permits: nothing there is left to serve).
            if !l.served_on_return() && q.serve_locked(l, list, wakes) {
                return None;
            }
            if n > l.limit() {
                // The limit was lowered since the check above: such a waiter could never be
                // served (a reconfiguration fails those already queued, under this lock).
                return Some(Decision::Refused(Rejection::new(&Reason::ExceedsLimit)));
            }
            let queued = list.queued_permits();
            let behind = !list.is_empty() && !q.barging();
            let room = u64::from(q.limit()).saturating_sub(queued);
            let can_queue = n == 0 || room >= u64::from(n) || (q.barging() && n <= q.limit());
            if !behind {
                match l.take_locked(n, can_queue) {
                    Ok(Some(stamp)) => return Some(Decision::Granted(stamp)),
                    Err(reason) => return Some(Decision::Refused(Rejection::new(reason))),
                    Ok(None) => {}
                }
            }
            if !can_queue {
                // Behind every waiter an oldest-first queue serves first, each in turn (a
                // newest-first queue lets a retry barge: behind nobody).
                let wait = if q.barging() {
                    l.wait_behind(&mut core::iter::empty(), n)
                } else {
                    l.wait_behind(&mut list.requests(), n)
                };
                let full: &'static Reason = if q.limit() == 0 {
                    &crate::lease::QUEUE_LIMIT_ZERO
                } else {
                    &Reason::QueueFull
                };
                let r = match wait {
                    Some(d) => Rejection::with_retry_after(
                        full,
                        d.max(core::time::Duration::from_nanos(1)),
                    ),
                    None => Rejection::new(full),
                };
                return Some(Decision::Refused(r));
            }
            // Newest-first: evict the oldest until the newcomer fits (in as many rounds of
            // wakes as it takes).
            while n > 0 && u64::from(q.limit()).saturating_sub(list.queued_permits()) < u64::from(n)
            {
                let Some(oldest) = list.front() else { break };
                if !wakes.has_room() {
                    q.sync_count(list);
                    return None;
                }
                wakes.push(list.complete(oldest, Status::Rejected(&Reason::Evicted)));
                counters.record_dequeued();
            }
            let next_to_serve = list.is_empty() || q.barging();
            list.push_back(
                waiter,
                waker.take().unwrap_or_else(|| Waker::noop().clone()),
            );
            q.sync_count(list);
            wakes.head_changed |= next_to_serve;
            Some(Decision::Queued(next_to_serve))
        });
        // The clone went unused unless the waiter was linked: dropped here, unlocked.
        drop(waker);
        match decision {
            Decision::Granted(stamp) => {
                counters.record_success();
                Ok(Ok(l.lease(n, stamp)))
            }
            Decision::Refused(r) => {
                counters.record_failure(&r);
                Ok(Err(r))
            }
            Decision::Queued(next) => {
                counters.note_queued(n);
                Err(next)
            }
        }
    }

    /// A later poll: completed by a server, or still waiting (serving first, in case time has
    /// brought permits and nobody else noticed). Returns the status and whether the waiter is the
    /// next to be served.
    fn check(l: &'a L, waiter: Pin<&Waiter>, cx: &Context<'_>) -> (Status, bool) {
        let q = l.queue();
        let mut new_waker = Some(cx.waker().clone());
        let mut spare: Option<Waker> = None;
        let mut wakes = WakeList::new();
        // Serve (every round, until nothing more fits) if the waiter was still queued.
        let mut serving = None;
        let out = q.locked(&mut wakes, |list, wakes| {
            let serve = *serving.get_or_insert_with(|| list.status(waiter) == Status::Queued);
            if serve && q.serve_locked(l, list, wakes) {
                return None;
            }
            let status = list.status(waiter);
            let mut next = false;
            if status == Status::Queued {
                if let Some(w) = new_waker.take() {
                    spare = list.set_waker(waiter, w);
                }
                next = List::is(q.serving_end(list), waiter);
            }
            Some((status, next))
        });
        // The replaced (or unused) waker is dropped here, with the lock released.
        drop(spare);
        drop(new_waker);
        out
    }

    /// The waiter leaves the queue (drop, or a blocking wait's timeout): unlinked if still
    /// queued, serving those behind it. Returns the status it had.
    fn leave(l: &'a L, waiter: Pin<&Waiter>) -> Status {
        let q = l.queue();
        let mut status = None;
        let mut old_waker = None;
        let mut wakes = WakeList::new();
        q.locked(&mut wakes, |list, wakes| {
            if status.is_none() {
                let was_next = List::is(q.serving_end(list), waiter);
                let (s, w) = list.remove(waiter);
                status = Some(s);
                old_waker = w;
                if s != Status::Queued {
                    return Some(());
                }
                q.sync_count(list);
                // Its capacity is free now; a smaller waiter behind it may fit, and the next
                // to be served has a new service instant.
                wakes.head_changed |= was_next;
            }
            (!q.serve_locked(l, list, wakes)).then_some(())
        });
        drop(old_waker);
        status.unwrap_or(Status::Idle)
    }

    /// Stops waiting now (a blocking wait's timeout): the outcome if the waiter was already
    /// completed (a grant is received and counted), `None` if it was still queued (it is
    /// unlinked; the caller counts its own outcome).
    #[cfg(feature = "std")]
    pub(crate) fn cancel(self: Pin<&mut Self>) -> Option<Result<Lease<'a>, Rejection>> {
        let p = self.project();
        if !matches!(p.stage, Stage::Queued) {
            return None;
        }
        *p.stage = Stage::Done;
        #[cfg(not(loom))]
        if let Some(t) = p.timer {
            t.disarm();
        }
        let l = p.limiter;
        match Self::leave(l, p.waiter) {
            Status::Granted(stamp) => {
                l.counters().record_success();
                Some(Ok(l.lease(p.waiter.permits(), stamp)))
            }
            Status::Rejected(reason) => {
                let r = Rejection::new(reason);
                l.counters().note_rejected(&r);
                Some(Err(r))
            }
            Status::Queued | Status::Idle => None,
        }
    }
}

struct Projection<'p, 'a, L: Source + ?Sized> {
    limiter: &'a L,
    waiter: Pin<&'p Waiter>,
    stage: &'p mut Stage,
    hold: &'p mut bool,
    #[cfg(all(any(feature = "std", feature = "embassy-time"), not(loom)))]
    timer: &'p mut Option<super::timer::Timer>,
}

impl<'a, L: Source + ?Sized> Future for Acquire<'a, L> {
    type Output = Result<Lease<'a>, Rejection>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let p = self.project();
        let l = p.limiter;
        let next = match p.stage {
            Stage::Start => match Self::start(l, p.waiter, cx) {
                Err(next) => next,
                Ok(done) => {
                    *p.stage = Stage::Done;
                    return Poll::Ready(done);
                }
            },
            // A completed waiter finishes without the lock (list.rs, rule 4).
            Stage::Queued => match p
                .waiter
                .completed()
                .map_or_else(|| Self::check(l, p.waiter, cx), |s| (s, false))
            {
                // Held (a jittered wait): left unreceived, see `held`.
                (Status::Granted(_), _) if *p.hold => return Poll::Pending,
                (Status::Granted(stamp), _) => {
                    *p.stage = Stage::Done;
                    l.counters().record_success();
                    #[cfg(all(any(feature = "std", feature = "embassy-time"), not(loom)))]
                    if let Some(t) = p.timer {
                        t.disarm();
                    }
                    return Poll::Ready(Ok(l.lease(p.waiter.permits(), stamp)));
                }
                (Status::Rejected(reason), _) => {
                    *p.stage = Stage::Done;
                    #[cfg(all(any(feature = "std", feature = "embassy-time"), not(loom)))]
                    if let Some(t) = p.timer {
                        t.disarm();
                    }
                    let r = Rejection::new(reason);
                    l.counters().note_rejected(&r);
                    return Poll::Ready(Err(r));
                }
                (Status::Queued | Status::Idle, next) => next,
            },
            Stage::Done => return Poll::Ready(Err(Rejection::new(&Reason::Closed))),
        };
        *p.stage = Stage::Queued;
        #[cfg(all(any(feature = "std", feature = "embassy-time"), not(loom)))]
        if let Some(t) = p.timer {
            if next && l.timed() {
                if let Some(d) = l.wait_for_permits(u64::from(p.waiter.permits())) {
                    t.arm(d, cx.waker());
                }
            }
        }
        #[cfg(not(all(any(feature = "std", feature = "embassy-time"), not(loom))))]
        let _ = next;
        Poll::Pending
    }
}

impl<L: Source + ?Sized> Drop for Acquire<'_, L> {
    #[inline]
    fn drop(&mut self) {
        #[cfg(all(any(feature = "std", feature = "embassy-time"), not(loom)))]
        if let Some(t) = &mut self.timer {
            t.disarm();
        }
        if matches!(self.stage, Stage::Queued) {
            self.drop_queued();
        }
    }
}

impl<L: Source + ?Sized> Acquire<'_, L> {
    /// Dropped while queued (or granted but not yet received).
    #[inline(never)]
    fn drop_queued(&mut self) {
        let l = self.limiter;
        // SAFETY: `self` is being dropped in place; the waiter has not moved since it was pinned
        // and is still alive for the duration of this call.
        let waiter = unsafe { Pin::new_unchecked(&self.waiter) };
        // Completed already: nobody else touches the node (list.rs, rule 4), no lock needed.
        let status = waiter.completed().unwrap_or_else(|| Self::leave(l, waiter));
        if let Status::Granted(stamp) = status {
            // Granted but never received: a cancelled request (not counted); the permits go back
            // (and on to the next waiter).
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
