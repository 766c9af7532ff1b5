//! [`PartitionedChain`]: a chain of partitioned limiters over one resource type.

use core::fmt;

#[cfg(doc)]
use super::Chain; // for the doc links
use super::{ChainLease, PartitionedLinks};
use crate::lease::{Reason, Rejection, SettleError, Statistics};
use crate::partition::PartitionedLimiter;
use crate::sync::{AtomicBool, Ordering};

/// A chain of partitioned limiters over one resource type (.NET
/// `PartitionedRateLimiter.CreateChained`): a tuple of 1 to 8 [`PartitionedLimiter`]s, each
/// asked for the same resource in order, all or nothing, by the rules of [`Chain`]. It is a
/// `PartitionedLimiter` itself.
///
/// ```
/// use core::time::Duration;
/// use tollgate::*;
///
/// let clock = ManualClock::new();
/// let per_client = KeyedLimiter::fixed_window_with_clock(
///     FixedWindowOptions::new(2, Duration::from_secs(1)), PartitionConfig::new(100), &clock).unwrap();
/// let per_route = KeyedLimiter::fixed_window_with_clock(
///     FixedWindowOptions::new(3, Duration::from_secs(1)), PartitionConfig::new(100), &clock).unwrap();
/// let chain = PartitionedChain::new((per_client, per_route));
///
/// let _a = chain.try_acquire(&7u64, 2).unwrap();
/// assert_eq!(chain.try_acquire(&7, 1).unwrap_err().reason(), Reason::Exhausted);
/// let _b = chain.try_acquire(&8, 1).unwrap(); // another client, another partition
/// assert_eq!(chain.statistics(&7).available_permits, 0);
/// ```
pub struct PartitionedChain<T> {
    pub(super) links: T,
    pub(super) closed: AtomicBool,
}

impl<T> PartitionedChain<T> {
    new_and_links! {
        /// A chain of the partitioned limiters in `links`, asked in tuple order.
        ///
        /// ```
        /// use tollgate::*;
        ///
        /// let per_key = KeyedLimiter::fixed_window(FixedWindowOptions::per_second(5), PartitionConfig::default()).unwrap();
        /// let chain = PartitionedChain::new((per_key,));
        /// assert!(chain.try_acquire(&"tenant-a", 5).is_ok());
        /// assert!(chain.try_acquire(&"tenant-a", 1).is_err());
        /// assert!(chain.try_acquire(&"tenant-b", 1).is_ok());
        /// ```
        fn new;
        /// The chained limiters.
        ///
        /// ```
        /// use tollgate::*;
        ///
        /// let opts = FixedWindowOptions::per_second(3);
        /// let a: KeyedLimiter<u32> = KeyedLimiter::fixed_window(opts, PartitionConfig::default()).unwrap();
        /// let b: KeyedLimiter<u32> = KeyedLimiter::fixed_window(opts, PartitionConfig::default()).unwrap();
        /// let chain = PartitionedChain::new((a, b));
        /// let _lease = chain.try_acquire(&1, 2).unwrap();
        /// assert_eq!(chain.links().0.statistics(&1).available_permits, 1);
        /// ```
        fn links;
    }

    /// Acquires `permits` for `resource` from each limiter in order, without waiting.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let per_second = KeyedLimiter::fixed_window_with_clock(
    ///     FixedWindowOptions::per_second(1), PartitionConfig::new(1_000), &clock).unwrap();
    /// let per_hour = KeyedLimiter::fixed_window_with_clock(
    ///     FixedWindowOptions::per_hour(2), PartitionConfig::new(1_000), &clock).unwrap();
    /// let chain = PartitionedChain::new((per_second, per_hour));
    /// let ip = [10, 0, 0, 1];
    /// assert!(chain.try_acquire(&ip, 1).is_ok());
    /// clock.advance(Duration::from_secs(1));
    /// assert!(chain.try_acquire(&ip, 1).is_ok());
    /// clock.advance(Duration::from_secs(1));
    /// let r = chain.try_acquire(&ip, 1).unwrap_err(); // the hourly limit
    /// assert_eq!(r.retry_after(), Some(Duration::from_secs(3598)));
    /// ```
    pub fn try_acquire<R: ?Sized>(
        &self,
        resource: &R,
        permits: u32,
    ) -> Result<ChainLease<T::Leases<'_>>, Rejection>
    where
        T: PartitionedLinks<R>,
    {
        if self.closed.load(Ordering::Acquire) {
            return Err(Rejection::new(&Reason::Closed));
        }
        let leases = self.links.try_acquire_each(resource, permits)?;
        Ok(ChainLease::new(leases, permits))
    }

    /// Settles `lease`, granted for `resource` by this chain, to `actual` in every link (see
    /// [`PartitionedLimiter::settle`]): all or nothing, as
    /// [`PartitionedLinks::settle_each`] says. A link that cannot settle (a
    /// [`FixedKeyedLimiter`](crate::FixedKeyedLimiter)'s) answers
    /// [`SettleError::Unsupported`], and the links settled before it are settled back.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let minute = Duration::from_secs(60);
    /// let tenant: KeyedLimiter<str> =
    ///     KeyedLimiter::token_bucket(TokenBucketOptions::new(10_000, 10_000, minute), PartitionConfig::default()).unwrap();
    /// let user: KeyedLimiter<str> =
    ///     KeyedLimiter::gcra(GcraOptions::per_minute(2_000), PartitionConfig::default()).unwrap();
    /// let chain = PartitionedChain::new((tenant, user));
    /// let mut call = chain.try_acquire("acme", 1_000).unwrap();
    /// chain.settle("acme", &mut call, 250).unwrap();
    /// assert_eq!(chain.statistics("acme").available_permits, 1_750); // the smaller: user's
    /// ```
    pub fn settle<'s, R: ?Sized>(
        &'s self,
        resource: &R,
        lease: &mut ChainLease<T::Leases<'s>>,
        actual: u32,
    ) -> Result<(), SettleError>
    where
        T: PartitionedLinks<R>,
    {
        let held = lease.permits();
        let Some(leases) = lease.leases.as_mut() else {
            return Err(SettleError::Unsupported);
        };
        self.links.settle_each(resource, leases, held, actual)?;
        lease.permits = actual;
        Ok(())
    }

    /// The statistics of `resource`'s partitions, folded by the chain rules.
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let opts = FixedWindowOptions::per_second(4);
    /// let a: KeyedLimiter<str> = KeyedLimiter::fixed_window(opts, PartitionConfig::default()).unwrap();
    /// let b: KeyedLimiter<str> = KeyedLimiter::fixed_window(opts, PartitionConfig::default()).unwrap();
    /// let chain = PartitionedChain::new((a, b));
    /// let _lease = chain.try_acquire("alice", 3).unwrap();
    /// assert!(chain.try_acquire("alice", 2).is_err()); // `a` rejects
    /// let s = chain.statistics("alice");
    /// assert_eq!((s.available_permits, s.total_successful, s.total_failed), (1, 1, 1));
    /// ```
    pub fn statistics<R: ?Sized>(&self, resource: &R) -> Statistics
    where
        T: PartitionedLinks<R>,
    {
        self.links.statistics(resource)
    }
}

impl<R: ?Sized, T: PartitionedLinks<R>> PartitionedLimiter<R> for PartitionedChain<T> {
    type Lease<'a>
        = ChainLease<T::Leases<'a>>
    where
        Self: 'a;

    fn try_acquire(&self, resource: &R, permits: u32) -> Result<Self::Lease<'_>, Rejection> {
        PartitionedChain::try_acquire(self, resource, permits)
    }

    fn settle<'s>(
        &'s self,
        resource: &R,
        lease: &mut Self::Lease<'s>,
        actual: u32,
    ) -> Result<(), SettleError> {
        PartitionedChain::settle(self, resource, lease, actual)
    }

    fn statistics(&self, resource: &R) -> Statistics {
        PartitionedChain::statistics(self, resource)
    }

    /// Closes the chain, not the limiters in it.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

impl<T> fmt::Debug for PartitionedChain<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartitionedChain")
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}
