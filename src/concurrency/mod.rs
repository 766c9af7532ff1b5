//! The concurrency limiter: at most `permit_limit` permits held at once; a lease gives its
//! permits back when dropped.

mod state;

use core::convert::Infallible;
use core::time::Duration;

use crate::cas;
use crate::clock::{Clock, Instant};
use crate::lease::{Lease, Reason, Rejection, Release, Statistics};
use crate::limiter::Limiter;
use crate::options::{OptionsError, QueueOrder};
use crate::stats::Counters;
use crate::sync::{AtomicU64, Ordering};
use crate::wait::{self, Acquire, Source, WaitQueue};

use state::{Denied, State};

/// Options of a [`ConcurrencyLimiter`] (.NET `ConcurrencyLimiterOptions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConcurrencyOptions {
    /// Permits that can be held at once. At least 1.
    pub permit_limit: u32,
    /// Permits that may wait in the queue (for waiting acquisitions).
    pub queue_limit: u32,
    /// The order queued requests are served in.
    pub queue_order: QueueOrder,
}

impl ConcurrencyOptions {
    /// `permit_limit` permits, no queue.
    pub const fn new(permit_limit: u32) -> Self {
        Self {
            permit_limit,
            queue_limit: 0,
            queue_order: QueueOrder::OldestFirst,
        }
    }

    /// The same options with a queue of `limit` permits served in `order`.
    pub const fn with_queue(self, limit: u32, order: QueueOrder) -> Self {
        Self {
            queue_limit: limit,
            queue_order: order,
            ..self
        }
    }

    /// Checks the options: the limit must be at least 1.
    pub const fn validate(&self) -> Result<(), OptionsError> {
        if self.permit_limit == 0 {
            return Err(OptionsError::ZeroLimit);
        }
        Ok(())
    }
}

/// At most `permit_limit` permits held at once (.NET `ConcurrencyLimiter`). While nobody waits,
/// acquire and release are each one compare-and-swap on a 64-bit word; nothing locks or
/// allocates. [`acquire`](Self::acquire) waits in the queue; permits returned by a lease go to
/// the queue first (hand-off: nobody barges past an oldest-first queue).
///
/// ```
/// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter, Reason};
///
/// let limiter = ConcurrencyLimiter::new(ConcurrencyOptions::new(3)).unwrap();
/// let a = limiter.try_acquire(2).unwrap();
/// assert_eq!(limiter.try_acquire(2).unwrap_err().reason(), Reason::Exhausted);
/// drop(a); // the permits come back
/// assert!(limiter.try_acquire(3).is_ok());
/// assert_eq!(limiter.try_acquire(4).unwrap_err().reason(), Reason::ExceedsLimit);
/// ```
#[derive(Debug)]
pub struct ConcurrencyLimiter<C: Clock> {
    word: AtomicU64,
    idle_since: AtomicU64,
    counters: Counters,
    queue: WaitQueue,
    options: ConcurrencyOptions,
    clock: C,
}

#[cfg(feature = "std")]
impl ConcurrencyLimiter<crate::StdClock> {
    /// A limiter on the system clock. The clock only dates idleness: it is read when a release
    /// makes the limiter fully available again. Where that read matters (about 25-40 ns for
    /// `StdClock`), build it `with_clock(options, CoarseClock::new()?)`: one relaxed load.
    pub fn new(options: ConcurrencyOptions) -> Result<Self, OptionsError> {
        Self::with_clock(options, crate::StdClock)
    }
}

impl<C: Clock> ConcurrencyLimiter<C> {
    /// A limiter reading time from `clock`.
    pub fn with_clock(options: ConcurrencyOptions, clock: C) -> Result<Self, OptionsError> {
        options.validate()?;
        let now = clock.now();
        Ok(Self {
            word: AtomicU64::new(State::full(options.permit_limit).pack()),
            idle_since: AtomicU64::new(now.as_nanos()),
            counters: Counters::new(),
            queue: WaitQueue::new(options.queue_limit, options.queue_order),
            options,
            clock,
        })
    }

    /// The options the limiter was built with.
    pub fn options(&self) -> &ConcurrencyOptions {
        &self.options
    }

    fn state(&self) -> State {
        State::unpack(self.word.load(Ordering::Acquire))
    }

    fn take(&self, permits: u32) -> Result<(), Rejection> {
        if permits > self.options.permit_limit {
            return Err(Rejection::new(Reason::ExceedsLimit));
        }
        let barge = self.queue.barging();
        cas::transition(&self.word, |w| {
            State::unpack(w)
                .try_take(permits, barge)
                .map(|s| (s.pack(), ()))
        })
        .map(|_| ())
        .map_err(|d| match d {
            Denied::Closed => Rejection::new(Reason::Closed),
            Denied::Exhausted => Rejection::new(Reason::Exhausted),
        })
    }

    /// Waits for `permits` in the queue (see [`Acquire`]). Rejected at once if the request
    /// exceeds the limit, the limiter is closed, or the queue has no room (with `NewestFirst`,
    /// the oldest waiters are evicted to make room instead).
    ///
    /// ```
    /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter, QueueOrder};
    /// # async fn demo() {
    /// let opts = ConcurrencyOptions::new(1).with_queue(10, QueueOrder::OldestFirst);
    /// let limiter = ConcurrencyLimiter::new(opts).unwrap();
    /// let lease = limiter.acquire(1).await.unwrap();
    /// drop(lease); // hands the permit to the next waiter
    /// # }
    /// ```
    pub fn acquire(&self, permits: u32) -> Acquire<'_, Self>
    where
        C: Sync,
    {
        Acquire::new(self, permits)
    }

    /// Waits on this thread for `permits`, for up to `timeout` (`None`: no limit); gives up with
    /// [`Reason::TimedOut`].
    #[cfg(feature = "std")]
    pub fn acquire_blocking(
        &self,
        permits: u32,
        timeout: Option<Duration>,
    ) -> Result<Lease<'_>, Rejection>
    where
        C: Sync,
    {
        wait::acquire_blocking(self, permits, timeout)
    }

    /// Called inside a transition, before the CAS that would write `next`: if `next` is fully
    /// available, stamps the idle start first, so that no reader can see the idle word with an
    /// older stamp (which would over-report idleness). A stamp left by an attempt whose CAS then
    /// fails can only under-report. fetch_max keeps the latest of racing stamps.
    #[inline]
    fn stamp_if_idle(&self, next: State) {
        if next.available == self.options.permit_limit && !next.waiters {
            let now = self.clock.now().as_nanos();
            // Skip the read-modify-write when the stamp would not move (a coarse clock, or
            // releases within one tick): a plain load is far cheaper.
            if self.idle_since.load(Ordering::Acquire) < now {
                self.idle_since.fetch_max(now, Ordering::AcqRel);
            }
        }
    }
}

impl<C: Clock> wait::private::Sealed for ConcurrencyLimiter<C> {}

impl<C: Clock + Sync> Source for ConcurrencyLimiter<C> {
    fn queue(&self) -> &WaitQueue {
        &self.queue
    }
    fn counters(&self) -> &Counters {
        &self.counters
    }
    fn limit(&self) -> u32 {
        self.options.permit_limit
    }
    fn take_now(&self, n: u32) -> Result<(), Rejection> {
        self.take(n)
    }
    fn take_locked(&self, n: u32, flag_if_short: bool) -> Result<Option<u64>, Reason> {
        cas::transition(&self.word, |w| {
            let s = State::unpack(w);
            match s.try_take(n, true) {
                Ok(next) => Ok((next.pack(), Some(0))),
                Err(Denied::Closed) => Err(Reason::Closed),
                Err(Denied::Exhausted) if flag_if_short => Ok((s.with_waiters(true).pack(), None)),
                Err(Denied::Exhausted) => Ok((w, None)),
            }
        })
        .map(|(_, taken)| taken)
    }
    fn clear_waiters(&self) {
        let _ = cas::transition(&self.word, |w| {
            let s = State::unpack(w);
            if !s.waiters {
                // Already clear (e.g. close() on an empty queue): nothing changes, no new stamp.
                return Ok::<_, Infallible>((w, ()));
            }
            let next = s.with_waiters(false);
            self.stamp_if_idle(next);
            Ok::<_, Infallible>((next.pack(), ()))
        });
    }
    fn give_back(&self, n: u32, _stamp: u64) {
        self.release(n);
    }
    fn wait_for_permits(&self, _total: u64) -> Option<Duration> {
        None // only releases bring permits back
    }
    fn lease(&self, n: u32) -> Lease<'_> {
        if n == 0 {
            Lease::unreleased(0)
        } else {
            Lease::releasing(n, self)
        }
    }
}

impl<C: Clock> Limiter for ConcurrencyLimiter<C>
where
    C: Sync,
{
    #[inline]
    fn try_acquire(&self, permits: u32) -> Result<Lease<'_>, Rejection> {
        let taken = self.counters.count(self.take(permits));
        taken.map(|()| {
            if permits == 0 {
                Lease::unreleased(0)
            } else {
                Lease::releasing(permits, self)
            }
        })
    }

    fn available_permits(&self) -> u64 {
        u64::from(self.state().available)
    }

    fn statistics(&self) -> Statistics {
        Statistics {
            available_permits: self.available_permits(),
            queued_permits: self.queue.queued_permits(),
            total_successful: self.counters.successful(),
            total_failed: self.counters.failed(),
        }
    }

    fn idle_duration(&self) -> Option<Duration> {
        // Clock first, then the word, then the stamp: a stamp is written before the CAS that
        // makes the word idle, so an idle word read here comes with its own stamp or a later one.
        let now = self.clock.now();
        let s = self.state();
        let since = Instant::from_nanos(self.idle_since.load(Ordering::Acquire));
        (s.available == self.options.permit_limit && !s.waiters)
            .then(|| now.saturating_duration_since(since))
    }

    fn close(&self) {
        let _ = cas::transition(&self.word, |w| {
            Ok::<_, Infallible>((State::unpack(w).close().pack(), ()))
        });
        self.queue.close(self);
    }

    fn is_closed(&self) -> bool {
        self.state().closed
    }
}

impl<C: Clock + Sync> Release for ConcurrencyLimiter<C> {
    #[inline]
    fn release(&self, permits: u32) {
        let limit = self.options.permit_limit;
        // Fast path: nobody waits, one CAS.
        let fast = cas::transition(&self.word, |w| {
            let s = State::unpack(w);
            if s.waiters {
                return Err(());
            }
            let next = s.give_back(permits, limit);
            self.stamp_if_idle(next);
            Ok((next.pack(), ()))
        });
        if fast.is_ok() {
            return;
        }
        // Waiters: return the permits under the queue lock and hand them to the queue head.
        self.queue.give_back_and_serve(self, || {
            let _ = cas::transition(&self.word, |w| {
                Ok::<_, Infallible>((State::unpack(w).give_back(permits, limit).pack(), ()))
            });
        });
    }
}
