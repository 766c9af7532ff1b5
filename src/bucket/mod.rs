//! The lock-free core shared by the token bucket and the fixed window: a 128-bit word driven by
//! the pure transitions of [`state`], time read from a [`Clock`] and converted to ticks, and a
//! wait queue served as time brings tokens.

pub(crate) mod state;

use core::convert::Infallible;
use core::time::Duration;

use crate::cas;
use crate::clock::Clock;
use crate::lease::{Reason, Rejection, Statistics};
use crate::stats::Counters;
use crate::sync::{AtomicU128, Ordering};
use crate::ticks::Ticker;
use crate::wait::WaitQueue;

use state::{Bucket, Denied, Refill};

/// The shared core. `refill.limit` is the largest request that can ever succeed.
#[derive(Debug)]
pub(crate) struct BucketCore<C> {
    word: AtomicU128,
    ticker: Ticker,
    refill: Refill,
    pub(crate) counters: Counters,
    pub(crate) queue: WaitQueue,
    pub(crate) clock: C,
}

impl<C: Clock> BucketCore<C> {
    pub(crate) fn new(refill: Refill, period_ns: u64, queue: WaitQueue, clock: C) -> Self {
        let ticker = Ticker::new(clock.now(), period_ns);
        Self {
            word: AtomicU128::new(Bucket::full(refill.limit).pack()),
            ticker,
            refill,
            counters: Counters::new(),
            queue,
            clock,
        }
    }

    pub(crate) fn limit(&self) -> u32 {
        self.refill.limit
    }

    /// One lock-free attempt for a newcomer; the state word it decided on, on denial.
    #[inline]
    fn attempt(&self, k: u64, n: u32) -> Result<(), (Denied, u128)> {
        let r = self.refill;
        let barge = self.queue.barging();
        cas::transition(&self.word, |w| {
            Bucket::unpack(w)
                .try_take(k, n, r, barge)
                .map(|b| (b.pack(), ()))
                .map_err(|d| (d, w))
        })
        .map(|_| ())
    }

    /// Takes `n` tokens now without waiting (uncounted), or says why not and when to retry.
    /// A newcomer held back by an oldest-first queue first serves the queue (time may have
    /// brought its tokens) and tries once more.
    #[inline]
    pub(crate) fn take(&self, n: u32, serve: impl FnOnce()) -> Result<(), Rejection> {
        if n > self.refill.limit {
            return Err(Rejection::new(Reason::ExceedsLimit));
        }
        let (k, into) = self.ticker.tick(self.clock.now());
        let mut result = self.attempt(k, n);
        if let Err((Denied::Exhausted { .. }, w)) = result {
            if Bucket::unpack(w).waiters && !self.queue.barging() {
                serve();
                result = self.attempt(k, n);
            }
        }
        match result {
            Ok(()) => Ok(()),
            Err((Denied::Closed, _)) => Err(Rejection::new(Reason::Closed)),
            Err((Denied::Exhausted { .. }, w)) => {
                // From the very instant and word the decision was made on: no second clock read.
                let wait = self.retry_after(k, into, w, n);
                Err(Rejection::with_retry_after(
                    Reason::Exhausted,
                    wait.max(Duration::from_nanos(1)),
                ))
            }
        }
    }

    /// The exact wait before `n` tokens can be taken, seen from `into` ns into tick `k` by a
    /// newcomer denied on the word `w`: behind an oldest-first queue, each waiter ahead is
    /// served in turn (walked under the queue lock, with the word as it is under that lock, since
    /// the refill cap makes the answer depend on each waiter's size, not just their sum).
    #[cold]
    fn retry_after(&self, k: u64, into: u64, w: u128, n: u32) -> Duration {
        let newcomer = core::iter::once(n.max(1));
        if Bucket::unpack(w).waiters && !self.queue.barging() {
            self.queue.with_requests(|ahead| {
                let w = self.word.load(Ordering::Acquire);
                self.wait_behind(k, into, w, ahead.chain(newcomer))
            })
        } else {
            self.wait_behind(k, into, w, newcomer)
        }
    }

    /// The wait until the last of `requests` is granted (in order, each as soon as it fits),
    /// seen from `into` ns into tick `k`, with the word `w`. Counted from the word's own tick if
    /// that is later than `k` (a stale reading: real time is at least there).
    fn wait_behind(
        &self,
        k: u64,
        into: u64,
        w: u128,
        requests: impl IntoIterator<Item = u32>,
    ) -> Duration {
        let b = Bucket::unpack(w);
        let base = k.max(b.tick);
        let ticks = b
            .at(base, self.refill)
            .ticks_to_serve(self.refill, requests);
        self.ticker
            .wait_until(k, into, base, base.saturating_add(ticks))
    }

    /// Under the queue lock: takes `n` ignoring the queue flag, or finds them short.
    pub(crate) fn take_locked(&self, n: u32, flag_if_short: bool) -> Result<Option<u64>, Reason> {
        let (k, _) = self.ticker.tick(self.clock.now());
        let r = self.refill;
        cas::transition(&self.word, |w| {
            let b = Bucket::unpack(w);
            match b.try_take(k, n, r, true) {
                Ok(next) => Ok((next.pack(), Some(k))),
                Err(Denied::Closed) => Err(Reason::Closed),
                Err(Denied::Exhausted { .. }) if flag_if_short => {
                    Ok((b.with_waiters(true).pack(), None))
                }
                Err(Denied::Exhausted { .. }) => Ok((w, None)),
            }
        })
        .map(|(_, taken)| taken)
    }

    pub(crate) fn clear_waiters(&self) {
        let _ = cas::transition(&self.word, |w| {
            Ok::<_, Infallible>((Bucket::unpack(w).with_waiters(false).pack(), ()))
        });
    }

    /// Returns `n` tokens a waiter was granted but never received. Whether the queue needs
    /// serving afterwards.
    pub(crate) fn give_back(&self, n: u32) -> bool {
        let (k, _) = self.ticker.tick(self.clock.now());
        let r = self.refill;
        let Ok((before, ())) = cas::transition(&self.word, |w| {
            Ok::<_, Infallible>((Bucket::unpack(w).give_back(k, n, r).pack(), ()))
        });
        Bucket::unpack(before).waiters
    }

    /// How long until time alone lets the bucket grant `total` tokens (served in requests of at
    /// most the limit; beyond one limit, refills are counted uncapped as the tokens are taken
    /// in order as they arrive). Zero if it holds them already.
    pub(crate) fn wait_for(&self, total: u64) -> Duration {
        let (k, into) = self.ticker.tick(self.clock.now());
        let w = self.word.load(Ordering::Acquire);
        if let Ok(n) = u32::try_from(total).map(|n| n.min(self.refill.limit)) {
            if u64::from(n) == total {
                return self.wait_behind(k, into, w, core::iter::once(n));
            }
        }
        let b = Bucket::unpack(w);
        let base = k.max(b.tick);
        let b = b.at(base, self.refill);
        let missing = total.saturating_sub(u64::from(b.tokens));
        let ticks = Bucket::ticks_to_gain(missing, self.refill);
        self.ticker
            .wait_until(k, into, base, base.saturating_add(ticks))
    }

    fn now_state(&self) -> Bucket {
        let (k, _) = self.ticker.tick(self.clock.now());
        Bucket::unpack(self.word.load(Ordering::Acquire)).at(k, self.refill)
    }

    pub(crate) fn available(&self) -> u64 {
        u64::from(self.now_state().tokens)
    }

    pub(crate) fn statistics(&self) -> Statistics {
        Statistics {
            available_permits: self.available(),
            queued_permits: self.queue.queued_permits(),
            total_successful: self.counters.successful(),
            total_failed: self.counters.failed(),
        }
    }

    /// Full since the start of the tick it filled at; `None` while not full or while anyone
    /// waits.
    pub(crate) fn idle_duration(&self) -> Option<Duration> {
        let now = self.clock.now();
        let b = Bucket::unpack(self.word.load(Ordering::Acquire));
        let full_at = b.full_at(self.refill);
        // A clock behind the bucket's own tick is no time passing: judge at the later of the two.
        let (k, _) = self.ticker.tick(now);
        (full_at <= k.max(b.tick) && !b.waiters).then(|| self.ticker.since_start_of(now, full_at))
    }

    /// Marks the word closed (the caller then drains the queue).
    pub(crate) fn close(&self) {
        let _ = cas::transition(&self.word, |w| {
            Ok::<_, Infallible>((Bucket::unpack(w).close().pack(), ()))
        });
    }

    pub(crate) fn is_closed(&self) -> bool {
        Bucket::unpack(self.word.load(Ordering::Acquire)).closed
    }

    pub(crate) fn period(&self) -> Duration {
        Duration::from_nanos(self.ticker.period_ns())
    }

    /// Writes the state as of now (if time has added anything).
    pub(crate) fn catch_up(&self) {
        let (k, _) = self.ticker.tick(self.clock.now());
        let r = self.refill;
        let _ = cas::transition(&self.word, |w| {
            Ok::<_, Infallible>((Bucket::unpack(w).at(k, r).pack(), ()))
        });
    }
}

/// Implements `Limiter`, `Replenishing`, the waiting `Source` and the `acquire` methods for a
/// limiter type wrapping a `BucketCore` in its `core` field.
macro_rules! bucket_limiter {
    ($ty:ident) => {
        impl<C: $crate::clock::Clock> $ty<C> {
            /// Waits for `permits` in the queue (see [`Acquire`](crate::wait::Acquire)).
            /// Queued waiters are served as time brings tokens: by any later acquisition, by
            /// [`replenish`](crate::Replenishing::replenish), or by a registered
            /// `Driver` (feature `std`).
            pub fn acquire(&self, permits: u32) -> $crate::wait::Acquire<'_, Self> {
                $crate::wait::Acquire::new(self, permits)
            }

            /// Waits on this thread for `permits`, for up to `timeout` (`None`: no limit); the
            /// thread wakes itself when time brings the tokens, so no driver is needed.
            #[cfg(feature = "std")]
            pub fn acquire_blocking(
                &self,
                permits: u32,
                timeout: Option<core::time::Duration>,
            ) -> Result<$crate::Lease<'_>, $crate::Rejection> {
                $crate::wait::acquire_blocking(self, permits, timeout)
            }
        }

        impl<C: $crate::clock::Clock> $crate::limiter::Limiter for $ty<C> {
            #[inline]
            fn try_acquire(&self, permits: u32) -> Result<$crate::Lease<'_>, $crate::Rejection> {
                let taken = self.core.take(permits, || self.core.queue.serve(self));
                self.core
                    .counters
                    .count(taken)
                    .map(|()| $crate::Lease::unreleased(permits))
            }
            fn available_permits(&self) -> u64 {
                self.core.available()
            }
            fn statistics(&self) -> $crate::Statistics {
                self.core.statistics()
            }
            fn idle_duration(&self) -> Option<core::time::Duration> {
                self.core.idle_duration()
            }
            fn close(&self) {
                self.core.close();
                self.core.queue.close(self);
            }
            fn is_closed(&self) -> bool {
                self.core.is_closed()
            }
        }

        impl<C: $crate::clock::Clock> $crate::limiter::Replenishing for $ty<C> {
            fn replenishment_period(&self) -> core::time::Duration {
                self.core.period()
            }
            fn replenish(&self) -> u64 {
                self.core.catch_up();
                self.core.queue.serve(self);
                self.core.available()
            }
            fn next_service(&self) -> Option<core::time::Duration> {
                $crate::wait::next_service(self)
            }
            #[cfg(feature = "std")]
            fn attach_driver(&self, handle: $crate::driver::DriverHandle) {
                self.core.queue.attach(handle);
            }
        }

        impl<C: $crate::clock::Clock> $crate::wait::private::Sealed for $ty<C> {}

        impl<C: $crate::clock::Clock> $crate::wait::Source for $ty<C> {
            fn queue(&self) -> &$crate::wait::WaitQueue {
                &self.core.queue
            }
            fn counters(&self) -> &$crate::stats::Counters {
                &self.core.counters
            }
            fn limit(&self) -> u32 {
                self.core.limit()
            }
            fn take_now(&self, n: u32) -> Result<(), $crate::Rejection> {
                self.core.take(n, || self.core.queue.serve(self))
            }
            fn take_locked(&self, n: u32, flag: bool) -> Result<Option<u64>, $crate::Reason> {
                self.core.take_locked(n, flag)
            }
            fn clear_waiters(&self) {
                self.core.clear_waiters()
            }
            fn give_back(&self, n: u32, _stamp: u64) {
                if self.core.give_back(n) {
                    self.core.queue.serve(self);
                }
            }
            fn wait_for_permits(&self, total: u64) -> Option<core::time::Duration> {
                Some(self.core.wait_for(total))
            }
            fn lease(&self, n: u32) -> $crate::Lease<'_> {
                $crate::Lease::unreleased(n)
            }
            fn timed(&self) -> bool {
                $crate::clock::Clock::advances_by_itself(&self.core.clock)
            }
        }
    };
}
pub(crate) use bucket_limiter;
