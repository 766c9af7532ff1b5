//! Waiting: `acquire(n).await` on a fixed-capacity intrusive wait queue.
//!
//! Every limiter owns a [`WaitQueue`]: a lock around an intrusive list of waiters (the nodes live
//! inside the pinned futures, so waiting allocates nothing and works without a heap), the queue
//! limit counted in permits, and the serving order.
//!
//! The protocol, shared by all nine limiters through the [`Source`] trait (the sliding log's
//! "word" is its ring under the crate's lock; the rest is the same):
//!
//! - **Fast path, no lock.** A newcomer tries one compare-and-swap. The state word's `waiters`
//!   flag is set exactly while the list is non-empty; with `OldestFirst` it makes newcomers fall
//!   through to the slow path, so nobody barges past the queue.
//! - **Slow path, lock first.** Under the lock the newcomer first serves the queue (time may have
//!   brought permits; not on a concurrency limiter, where only operations that serve the queue
//!   bring permits), then either takes its permits or — in the same compare-and-swap that finds
//!   them short — sets the `waiters` flag, and links itself. A release or refill that raced it
//!   either happened before that CAS (and the newcomer takes the permits) or sees the flag and
//!   serves the queue under the lock: no wake-up is lost.
//! - **Serving** takes permits for the waiter at the serving end (head for `OldestFirst`, tail for
//!   `NewestFirst`) while it fits — strict head-of-line — marks it granted, and collects its waker;
//!   wakers run after the lock is released. A concurrency limiter's release hands off directly:
//!   the CAS that returns its permits takes those of the serving-end waiter.
//! - **Completion without the lock.** Marking a waiter granted or refused ends with a release
//!   store of a flag in its node; its future, woken, sees the flag with an acquire load and
//!   finishes without taking the lock (`list.rs`, rule 4).
//! - **Leaving.** A future dropped while queued unlinks itself (its queue capacity is free at
//!   once); one dropped after being granted gives its permits back.

mod future;
#[cfg(feature = "std")]
mod hook;
mod list;
mod lock;
#[cfg(all(feature = "std", not(feature = "embassy-time"), not(loom)))]
mod timer;
#[cfg(all(feature = "embassy-time", not(loom)))]
#[path = "timer_embassy.rs"]
mod timer;

use core::time::Duration;

pub(crate) use future::acquire_now;
pub use future::Acquire;
#[cfg(feature = "std")]
pub use hook::DriverHandle;
#[cfg(feature = "std")]
pub(crate) use hook::Notify;
pub(crate) use list::{List, Status};
pub(crate) use lock::Lock;
/// The waiters' timer (the process timer, or embassy's), also used by a jittered wait's delay.
#[cfg(all(any(feature = "std", feature = "embassy-time"), not(loom)))]
pub(crate) use timer::Timer;

use crate::lease::{Lease, Reason, Rejection};
use crate::options::QueueOrder;
use crate::stats::Counters;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// What a take under the queue lock answers: `Ok(Some(stamp))` taken (the stamp says when, in
/// the limiter's own units), `Ok(None)` short, `Err` refused for good (closed).
pub(crate) type LockedTake = Result<Option<u64>, &'static Reason>;

/// The limiter's side of the protocol: pure transitions of its state word, driven by CAS.
///
/// Sealed: implemented by the nine built-in limiters (and `PartitionLimiter`, which forwards) only.
///
/// ```
/// use core::{future::Future, pin::pin, task::{Context, Waker}};
/// use core::time::Duration;
/// use tollgate::*;
///
/// /// Starts a queued acquisition of `n` on any built-in limiter.
/// fn enqueue<'a, L>(limiter: &'a L, n: u32) -> Acquire<'a, L>
/// where
///     L: Source + AcquireAsync<Acquire<'a> = Acquire<'a, L>>,
/// {
///     limiter.acquire(n)
/// }
///
/// let opts = TokenBucketOptions::new(1, 1, Duration::from_secs(1)).with_queue(1, QueueOrder::OldestFirst);
/// let bucket = TokenBucketLimiter::with_clock(opts, ManualClock::new()).unwrap();
/// let _ = bucket.try_acquire(1).unwrap();
/// let mut waiter = pin!(enqueue(&bucket, 1));
/// assert!(waiter.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
/// assert_eq!(bucket.statistics().queued_permits, 1);
/// ```
pub trait Source: private::Sealed {
    #[doc(hidden)]
    fn queue(&self) -> &WaitQueue;
    #[doc(hidden)]
    fn counters(&self) -> &Counters;
    #[doc(hidden)]
    fn limit(&self) -> u32;
    /// A newcomer's lock-free attempt (uncounted): takes `n` unless the queue flag forbids it;
    /// the grant's stamp (as [`take_locked`](Self::take_locked)'s).
    #[doc(hidden)]
    fn take_now(&self, n: u32) -> Result<u64, Rejection>;
    /// Under the queue lock: takes `n` ignoring the queue flag (`Ok(Some(stamp))`), or finds them
    /// short (`Ok(None)`), setting the flag in the same CAS when `flag_if_short`. `Err` if closed.
    #[doc(hidden)]
    fn take_locked(&self, n: u32, flag_if_short: bool) -> LockedTake;
    /// Under the queue lock, for the waiter at the serving end: takes its `n` permits as of
    /// the instant they fit, at or before now (`Ok(Some(stamp))`), or finds them short
    /// (`Ok(None)`); `Err` if closed. Granting each waiter at the instant it fit, with the
    /// refills after that counted, is what makes a queue served late (a delayed timer, a
    /// descheduled thread, a clock stepped by its owner) grant what one served at every
    /// instant grants. [`take_locked`](Self::take_locked) without the flag suits limiters whose
    /// permits do not come with time.
    ///
    /// No default (nor for the rest of the protocol): a wrapper that forwards to a limiter
    /// inside must forward every part, and the compiler says so.
    #[doc(hidden)]
    fn take_for_waiter(&self, n: u32) -> LockedTake;
    /// How long until a request of `n` permits could be granted by time alone behind the
    /// waiters `ahead` (their requests in the order they are served), if ever: exact where the
    /// limiter can walk them one by one.
    #[doc(hidden)]
    fn wait_behind(&self, ahead: &mut dyn Iterator<Item = u32>, n: u32) -> Option<Duration>;
    /// Under the queue lock, once the list is empty: clears the flag.
    #[doc(hidden)]
    fn clear_waiters(&self);
    /// Returns `n` permits granted at `stamp` to a waiter that went away without them.
    #[doc(hidden)]
    fn give_back(&self, n: u32, stamp: u64);
    /// How long until `total` permits are available by the passage of time alone, if ever.
    #[doc(hidden)]
    fn wait_for_permits(&self, total: u64) -> Option<Duration>;
    /// The lease for `n` permits granted by this limiter at `stamp` (what the take answered).
    #[doc(hidden)]
    fn lease(&self, n: u32, stamp: u64) -> Lease<'_>;
    /// Whether time alone serves this limiter's queue on a clock that moves by itself (a rate
    /// limiter on a [`Clock`](crate::Clock) whose
    /// [`advances_by_itself`](crate::Clock::advances_by_itself) is true): its waiters then arm
    /// the process timer (feature `std`). `false` suits limiters served only by releases.
    #[doc(hidden)]
    fn timed(&self) -> bool;
    /// Whether only the operations that serve the queue under its lock bring permits (releases,
    /// reconfigurations, cancellations: a concurrency limiter), so that whenever the lock is
    /// free the waiter at the serving end does not fit — or a server is still at work and
    /// takes the lock again to carry on. A newcomer then need not serve before it queues.
    /// `false` suits limiters that time refills.
    #[doc(hidden)]
    fn served_on_return(&self) -> bool;
}

pub(crate) mod private {
    pub trait Sealed {}
}

/// A limiter's queue: the locked list, its limit and order, and a lock-free copy of the queued
/// permit count for statistics and RetryAfter.
pub struct WaitQueue {
    list: Lock<List>,
    queued: AtomicU64,
    /// Permits that may wait (read under the lock; changed under it by `reconfigure`). 32 bits,
    /// beside `order`: the queue is 64 bytes, which keeps a queued token bucket partition in a
    /// 176-byte limiter.
    limit: AtomicU32,
    order: QueueOrder,
    /// The drivers to tell when the next waiter to be served changes (every live registration:
    /// a limiter may be registered with several drivers, one after another or at once).
    #[cfg(feature = "std")]
    hooks: std::sync::OnceLock<alloc::boxed::Box<std::sync::Mutex<alloc::vec::Vec<DriverHandle>>>>,
}

impl core::fmt::Debug for WaitQueue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WaitQueue")
            .field("queued", &self.queued_permits())
            .field("limit", &self.limit())
            .field("order", &self.order)
            .finish()
    }
}

/// Wakers collected under the lock, woken (or dropped) only after it is released: no user code
/// runs under the queue lock.
///
/// Fixed capacity, so it works without a heap; a batch never bounds how much one operation
/// completes: an operation that fills it unlocks, wakes the batch, takes the lock again and
/// carries on until nothing more fits (see [`WaitQueue::serve`]). The last slot is kept for the
/// nudge of the next waiter to be served.
pub(crate) struct WakeList {
    /// `wakers[woken..len]` hold the wakers not yet woken; the rest are uninitialised (nothing
    /// to write when a list is made, nothing to drop beyond them).
    wakers: [core::mem::MaybeUninit<core::task::Waker>; WakeList::CAPACITY],
    woken: usize,
    len: usize,
    /// The waiter at the serving end changed (served, cancelled or evicted): time-served queues
    /// nudge the new one, and registered drivers are told.
    pub(crate) head_changed: bool,
}

#[allow(unsafe_code)]
impl WakeList {
    const CAPACITY: usize = 16;

    #[inline]
    pub(crate) const fn new() -> Self {
        Self {
            wakers: [const { core::mem::MaybeUninit::uninit() }; WakeList::CAPACITY],
            woken: 0,
            len: 0,
            head_changed: false,
        }
    }

    /// Room for one more completion (the last slot is kept for the nudge).
    #[inline]
    pub(crate) fn has_room(&self) -> bool {
        self.len < Self::CAPACITY - 1
    }

    #[inline]
    pub(crate) fn push(&mut self, w: Option<core::task::Waker>) {
        if let Some(w) = w {
            debug_assert!(self.len < Self::CAPACITY);
            if let Some(slot) = self.wakers.get_mut(self.len) {
                slot.write(w);
                self.len += 1;
            } else {
                // Unreachable (callers check `has_room`); never panic: wake it now instead.
                w.wake();
            }
        }
    }

    /// Wakes the batch, in the order it was collected. Call only with the lock released.
    #[inline]
    pub(crate) fn wake_all(&mut self) {
        while self.woken < self.len {
            let i = self.woken;
            // Counted as taken before it runs: a waker that panics leaves the rest for `Drop`.
            self.woken += 1;
            // SAFETY: `wakers[woken..len]` are initialised (written by `push`) and not yet read;
            // `i` was in that range, and moving `woken` past it first means it is read once.
            let w = unsafe { self.wakers[i].assume_init_read() };
            w.wake();
        }
        self.woken = 0;
        self.len = 0;
    }

    /// Wakes the batch and tells the drivers if the serving end changed. Call only with the
    /// lock released.
    #[inline]
    pub(crate) fn finish(&mut self, q: &WaitQueue) {
        self.wake_all();
        if core::mem::take(&mut self.head_changed) {
            q.notify();
        }
    }
}

#[allow(unsafe_code)]
impl Drop for WakeList {
    #[inline]
    fn drop(&mut self) {
        // Wakers never woken (a wait that unwound): dropped, not woken.
        while self.woken < self.len {
            let i = self.woken;
            self.woken += 1;
            // SAFETY: as in `wake_all`: `wakers[i]` is initialised and read exactly once.
            drop(unsafe { self.wakers[i].assume_init_read() });
        }
    }
}

impl WaitQueue {
    crate::sync::const_unless_loom! {
        pub(crate) fn new(limit: u32, order: QueueOrder) -> Self {
            Self {
                list: Lock::new(List::new()),
                queued: AtomicU64::new(0),
                limit: AtomicU32::new(limit),
                order,
                #[cfg(feature = "std")]
                hooks: std::sync::OnceLock::new(),
            }
        }
    }

    /// Permits that may wait in the queue.
    #[inline]
    /// The order waiters are served in.
    pub(crate) fn order(&self) -> QueueOrder {
        self.order
    }

    pub(crate) fn limit(&self) -> u32 {
        self.limit.load(Ordering::Relaxed)
    }

    /// Reconfigures the queue of a limiter whose largest grantable request is now
    /// `permit_limit`: newcomers may queue up to `queue_limit` permits (waiters already queued
    /// keep their places), every waiter asking for more than `permit_limit` — which could never
    /// be served now — is failed with [`Reason::ExceedsLimit`], and the rest are served as far
    /// as the limiter's new state allows.
    ///
    /// `apply` (the limiter's own change) runs first, under the queue lock, so that concurrent
    /// reconfigurations apply whole, one after the other, and no newcomer can queue between
    /// the change and the failing of the waiters it strands.
    pub(crate) fn reconfigure<S: Source + ?Sized>(
        &self,
        src: &S,
        queue_limit: u32,
        permit_limit: u32,
        apply: impl FnOnce(),
    ) {
        let mut apply = Some(apply);
        let mut wakes = WakeList::new();
        self.locked(&mut wakes, |list, wakes| {
            if let Some(apply) = apply.take() {
                apply();
                self.limit.store(queue_limit, Ordering::Relaxed);
            }
            while let Some(w) = list.first_over(permit_limit) {
                if !wakes.has_room() {
                    self.sync_count(list);
                    return None;
                }
                wakes.head_changed |= self.serving_end(list) == Some(w);
                wakes.push(list.complete(w, Status::Rejected(&Reason::ExceedsLimit)));
                src.counters().record_dequeued();
            }
            (!self.serve_locked(src, list, wakes)).then_some(())
        });
    }

    /// Permits requested by queued waiters (a lock-free snapshot).
    #[inline]
    pub(crate) fn queued_permits(&self) -> u64 {
        self.queued.load(Ordering::Acquire)
    }

    /// Runs `f` under the queue lock over the permits of the queued waiters, oldest first (the
    /// order an oldest-first queue serves them in): a RetryAfter behind them is exact only with
    /// each one's size, since the refill cap applies while they are served one by one.
    pub(crate) fn with_requests<R>(&self, f: impl FnOnce(&mut dyn Iterator<Item = u32>) -> R) -> R {
        self.list.with(|list| f(&mut list.requests()))
    }

    /// Whether newcomers may take permits ahead of queued waiters.
    #[inline]
    pub(crate) fn barging(&self) -> bool {
        self.order == QueueOrder::NewestFirst
    }

    #[inline]
    fn sync_count(&self, list: &List) {
        self.queued.store(list.queued_permits(), Ordering::Release);
    }

    /// The waiter served next: the head for `OldestFirst`, the tail for `NewestFirst`.
    #[inline]
    pub(crate) fn serving_end(&self, list: &List) -> Option<core::ptr::NonNull<list::Waiter>> {
        match self.order {
            QueueOrder::OldestFirst => list.front(),
            QueueOrder::NewestFirst => list.back(),
        }
    }

    /// Serves what fits under one lock, into `wakes`; returns `true` if it stopped only because
    /// `wakes` filled up (the caller then unlocks, wakes them, and calls again).
    ///
    /// When the serving end has changed and time serves this queue, the new serving-end waiter
    /// is nudged (its waker moved into `wakes`), so that it polls again and arms a timer for its
    /// own service instant.
    fn serve_locked<S: Source + ?Sized>(
        &self,
        src: &S,
        list: &mut List,
        wakes: &mut WakeList,
    ) -> bool {
        let mut more = false;
        while let Some(w) = self.serving_end(list) {
            if !wakes.has_room() {
                more = true;
                break;
            }
            match src.take_for_waiter(list.permits_of(w)) {
                Ok(Some(stamp)) => {
                    // Counted as a success when the waiter receives its lease (a waiter dropped
                    // before that is a cancellation, not counted).
                    wakes.push(list.complete(w, Status::Granted(stamp)));
                    wakes.head_changed = true;
                }
                Ok(None) | Err(_) => break,
            }
        }
        if list.is_empty() {
            src.clear_waiters();
        } else if !more && wakes.head_changed && src.timed() {
            if let Some(next) = self.serving_end(list) {
                wakes.push(list.take_waker(next));
            }
        }
        self.sync_count(list);
        more
    }

    /// Runs `step` under the lock until it returns `Some`, waking what it collected after each
    /// round with the lock released. `step` returns `None` when its wake list filled up.
    #[inline]
    pub(crate) fn locked<R>(
        &self,
        wakes: &mut WakeList,
        mut step: impl FnMut(&mut List, &mut WakeList) -> Option<R>,
    ) -> R {
        loop {
            let done = self.list.with(|list| step(list, wakes));
            if let Some(r) = done {
                wakes.finish(self);
                return r;
            }
            wakes.wake_all();
        }
    }

    /// Serves the queue until its serving end does not fit, waking the served after unlocking.
    pub(crate) fn serve<S: Source + ?Sized>(&self, src: &S) {
        let mut wakes = WakeList::new();
        self.locked(&mut wakes, |list, wakes| {
            (!self.serve_locked(src, list, wakes)).then_some(())
        });
    }

    /// Runs `give_back` (a CAS that returns permits) under the queue lock, then serves the queue:
    /// taking the lock before the CAS means a newcomer deciding to queue cannot miss the permits.
    ///
    /// Direct hand-off: `give_back` is told the permits of the waiter at the serving end (if
    /// any) and may take them for it in the same CAS, returning the grant's stamp and whether
    /// any permit is left available after it; that waiter is then granted here, and the rest of
    /// the queue served as usual — unless no permit is left, where nobody else could be served.
    #[inline]
    pub(crate) fn give_back_and_serve<S: Source + ?Sized>(
        &self,
        src: &S,
        give_back: impl FnOnce(Option<u32>) -> Option<(u64, bool)>,
    ) {
        let mut give_back = Some(give_back);
        let mut wakes = WakeList::new();
        self.locked(&mut wakes, |list, wakes| {
            if let Some(g) = give_back.take() {
                let head = self.serving_end(list);
                if let (Some((stamp, left)), Some(w)) = (g(head.map(|w| list.permits_of(w))), head)
                {
                    // Counted as a success when the waiter receives its lease, as in
                    // `serve_locked`. A fresh wake list has room.
                    wakes.push(list.complete(w, Status::Granted(stamp)));
                    wakes.head_changed = true;
                    if !left && !list.is_empty() && !src.timed() {
                        // Nothing left to take (not even for a probe): the rest stay queued.
                        self.sync_count(list);
                        return Some(());
                    }
                }
            }
            (!self.serve_locked(src, list, wakes)).then_some(())
        });
    }

    /// Completes every queued waiter with `Closed` (counted as failed).
    pub(crate) fn close<S: Source + ?Sized>(&self, src: &S) {
        let mut wakes = WakeList::new();
        self.locked(&mut wakes, |list, wakes| {
            while let Some(w) = list.front() {
                if !wakes.has_room() {
                    self.sync_count(list);
                    return None;
                }
                wakes.push(list.complete(w, Status::Rejected(&Reason::Closed)));
                src.counters().record_dequeued();
            }
            src.clear_waiters();
            self.sync_count(list);
            Some(())
        });
    }

    /// The permits the next waiter to be served asks for.
    pub(crate) fn next_request(&self) -> Option<u32> {
        self.list.with(|list| {
            let w = self.serving_end(list)?;
            Some(list.permits_of(w))
        })
    }

    /// Tells the registered drivers, if any, that the next waiter to be served has changed.
    #[inline]
    pub(crate) fn notify(&self) {
        #[cfg(feature = "std")]
        if let Some(hooks) = self.hooks.get() {
            Self::notify_hooks(hooks);
        }
    }

    #[cfg(feature = "std")]
    #[cold]
    fn notify_hooks(hooks: &std::sync::Mutex<alloc::vec::Vec<DriverHandle>>) {
        let hooks = hooks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for h in hooks.iter() {
            h.notify();
        }
    }

    /// Registers a driver to notify. Every live registration is kept (handles of drivers that
    /// are gone are dropped here), so a driver registered after an earlier one was dropped is
    /// notified too.
    #[cfg(feature = "std")]
    pub(crate) fn attach(&self, handle: DriverHandle) {
        let mut hooks = self
            .hooks
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        hooks.retain(DriverHandle::is_live);
        hooks.push(handle);
    }
}

/// How long until time alone lets `src` serve its next waiter.
pub(crate) fn next_service<S: Source + ?Sized>(src: &S) -> Option<Duration> {
    let n = src.queue().next_request()?;
    src.wait_for_permits(u64::from(n))
}

#[cfg(feature = "std")]
pub(crate) mod blocking;
#[cfg(feature = "std")]
pub(crate) use blocking::acquire_blocking;

#[cfg(test)]
mod tests;
