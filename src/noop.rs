//! The no-op limiter: always grants (.NET `RateLimitPartition.GetNoLimiter`).

use core::future::{ready, Ready};
use core::time::Duration;

use crate::lease::{Lease, Rejection, Release, Statistics};
use crate::limiter::AcquireAsync;
use crate::limiter::Limiter;
use crate::stats::Counters;

/// A limiter that grants every request, for any number of permits, and never waits.
///
/// As .NET's `NoopLimiter`: no upper bound on a request (even `u32::MAX`), leases
/// carry nothing and return nothing, closing it changes nothing (it stays usable, and
/// [`is_closed`](Limiter::is_closed) stays `false`), and it is never idle
/// ([`idle_duration`](Limiter::idle_duration) is always `None`). Its statistics count the
/// requests it granted; the permits available are `u64::MAX`.
///
/// Use it where a limiter is required but nothing should be limited: an unlimited partition
/// ([`PartitionKind::NO_LIMIT`](crate::PartitionKind::NO_LIMIT)), a placeholder link in a chain,
/// a test.
///
/// ```
/// use tollgate::{Limiter, NoopLimiter};
///
/// let noop = NoopLimiter::new();
/// let lease = noop.try_acquire(u32::MAX).unwrap();
/// assert_eq!(lease.permits(), u32::MAX);
/// noop.close();
/// assert!(noop.try_acquire(1).is_ok()); // closing changes nothing
/// let s = noop.statistics();
/// assert_eq!((s.available_permits, s.total_successful, s.total_failed), (u64::MAX, 2, 0));
/// assert_eq!(noop.idle_duration(), None);
/// ```
#[derive(Debug)]
pub struct NoopLimiter {
    counters: Counters,
}

impl NoopLimiter {
    /// A no-op limiter with its count at zero.
    ///
    /// ```
    /// use tollgate::{Chain, ConcurrencyLimiter, ConcurrencyOptions, Limiter, NoopLimiter};
    ///
    /// let no_rate_limit_yet = NoopLimiter::new();
    /// assert_eq!(no_rate_limit_yet.statistics().total_successful, 0);
    /// // A placeholder link: the chain limits only concurrency, for now.
    /// let jobs = ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap();
    /// let chain = Chain::new((&no_rate_limit_yet, &jobs));
    /// assert!(chain.try_acquire(2).is_ok());
    /// assert_eq!(no_rate_limit_yet.statistics().total_successful, 1);
    /// ```
    pub fn new() -> Self {
        Self {
            counters: Counters::new(),
        }
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }
}

impl Default for NoopLimiter {
    fn default() -> Self {
        Self::new()
    }
}

impl Limiter for NoopLimiter {
    #[inline]
    fn try_acquire(&self, permits: u32) -> Result<Lease<'_>, Rejection> {
        self.counters.record_success();
        Ok(Lease::free(permits))
    }

    fn available_permits(&self) -> u64 {
        u64::MAX
    }

    fn statistics(&self) -> Statistics {
        Statistics {
            available_permits: u64::MAX,
            queued_permits: 0,
            total_successful: self.counters.successful(),
            total_failed: 0,
        }
    }

    /// Always `None`, as .NET's: a no-op limiter is never "fully available again" because it is
    /// never in use. (A partitioned limiter evicts unlimited partitions by their last use
    /// instead.)
    fn idle_duration(&self) -> Option<Duration> {
        None
    }

    /// Does nothing: a no-op limiter stays usable after it is closed, as in .NET.
    fn close(&self) {}

    /// Always `false`.
    fn is_closed(&self) -> bool {
        false
    }
}

/// Nothing to return: a no-op lease holds nothing. Lets a `NoopLimiter` stand wherever a limiter
/// that can take permits back is required (a custom partition factory, for one).
///
/// ```
/// use tollgate::{NoopLimiter, Release};
/// NoopLimiter::new().release(5); // no effect
/// ```
impl Release for NoopLimiter {
    fn release(&self, _permits: u32) {}
}

/// Waiting on a no-op limiter completes at once (.NET completes `AcquireAsync` synchronously).
///
/// ```
/// # futures_lite_free::run(async {
/// use tollgate::{AcquireAsync, NoopLimiter};
/// let noop = NoopLimiter::new();
/// let lease = noop.acquire(3).await.unwrap();
/// assert_eq!(lease.permits(), 3);
/// # });
/// # mod futures_lite_free {
/// #     pub fn run<F: core::future::Future>(f: F) -> F::Output {
/// #         let mut f = core::pin::pin!(f);
/// #         let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
/// #         match f.as_mut().poll(&mut cx) { core::task::Poll::Ready(v) => v, _ => unreachable!() }
/// #     }
/// # }
/// ```
impl AcquireAsync for NoopLimiter {
    type Acquire<'a> = Ready<Result<Lease<'a>, Rejection>>;

    fn acquire(&self, permits: u32) -> Self::Acquire<'_> {
        ready(self.try_acquire(permits))
    }

    fn acquire_now(&self, permits: u32) -> Option<Result<Lease<'_>, Rejection>> {
        Some(self.try_acquire(permits))
    }
}
