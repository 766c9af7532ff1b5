//! Chained limiters: acquire from each limiter in order, all or nothing.
//!
//! - [`Chain`]: a tuple of 1 to 8 limiters, composed statically — no dynamic dispatch, no
//!   allocation. Its lease, a [`ChainLease`], holds the inner leases inline.
//! - [`DynChain`] (feature `alloc`): a list of `&dyn Limiter`, `Box<dyn Limiter>` or any other
//!   pointer to a limiter, chosen at run time.
//! - [`PartitionedChain`]: a tuple of [`PartitionedLimiter`]s sharing one resource.
//!
//! The rules, as .NET's `ChainedRateLimiter` (`PartitionedRateLimiter.CreateChained` and, from
//! .NET 10, `RateLimiter.CreateChained`):
//! - Each limiter is asked **in order** with the same permit count. If limiter `i` rejects, the
//!   leases of limiters `0..i` are dropped **in reverse order** and limiter `i`'s rejection is
//!   returned as it is (its reason and RetryAfter intact).
//! - **A rollback gives back only what the dropped leases release.** A concurrency limiter's
//!   permits come back. A rate limiter's (token bucket, fixed or sliding window) do not: its
//!   leases release nothing, as in .NET, so the tokens or window permits that limiters `0..i`
//!   granted stay spent when limiter `i` rejects. Put the limiter most likely to reject first.
//! - The waiting form awaits each limiter before asking the next: limiter `i + 1` is never asked
//!   while limiter `i` is still waiting.
//! - A granted chain lease holds every inner lease and drops them in reverse order.
//! - Statistics: available = the minimum, queued = the sum, failed = the sum, successful = the
//!   **last** (inner-most) limiter's count.
//! - Idle duration: `None` if any limiter is in use, else the minimum. This is the rule of .NET
//!   11; earlier .NET took the minimum of the idle ones, which calls a chain idle while one of
//!   its limiters is busy.
//! - Closing a chain rejects later requests with [`Reason::Closed`] and **does not close the
//!   limiters in it**: they may be shared, and stay usable on their own.
//!
//! A chain is not itself a [`Limiter`]: a `Limiter`'s [`Lease`] returns its permits to one place,
//! and a chain's lease must return them to several, which needs the room a [`ChainLease`] has. A
//! chain of chains is the flat chain of their links (the statistics and idle rules give the same
//! results), so nothing is lost.

use core::time::Duration;

use crate::lease::{Rejection, Statistics};
// For the doc links.
#[cfg(doc)]
use crate::{lease::Lease, lease::Reason, limiter::Limiter, partition::PartitionedLimiter};

/// `new` and `links` of the tuple chains ([`Chain`], [`PartitionedChain`]), for their impls: a
/// chain owns its links and a closed flag. The doc comments given are each chain's own.
macro_rules! new_and_links {
    ($(#[$new_doc:meta])* fn new; $(#[$links_doc:meta])* fn links;) => {
        $(#[$new_doc])*
        pub fn new(links: T) -> Self {
            Self {
                links,
                closed: $crate::sync::AtomicBool::new(false),
            }
        }

        $(#[$links_doc])*
        pub fn links(&self) -> &T {
            &self.links
        }
    };
}

mod dynamic;
mod leases;
mod partitioned;
mod tuple;

#[cfg(feature = "alloc")]
pub use dynamic::DynChain;
pub use dynamic::EmptyChain;
pub use leases::{ChainLease, Leases};
pub use partitioned::PartitionedChain;
pub use tuple::Chain;

// ---------------------------------------------------------------------------------------------
// The statistics and idle rules

/// Folds the limiters' statistics by the chain rules (see the module docs); `None` for an empty chain.
fn combine(stats: impl IntoIterator<Item = Statistics>) -> Statistics {
    let mut out: Option<Statistics> = None;
    for s in stats {
        out = Some(match out {
            None => s,
            Some(o) => Statistics {
                available_permits: o.available_permits.min(s.available_permits),
                queued_permits: o.queued_permits.saturating_add(s.queued_permits),
                total_failed: o.total_failed.saturating_add(s.total_failed),
                total_successful: s.total_successful,
            },
        });
    }
    out.unwrap_or_default()
}

/// `None` if any is `None`, else the minimum (the rule of .NET 11).
fn combine_idle(idles: impl IntoIterator<Item = Option<Duration>>) -> Option<Duration> {
    let mut min = Duration::MAX;
    for idle in idles {
        min = min.min(idle?);
    }
    Some(min)
}

// ---------------------------------------------------------------------------------------------
// The links of static chains

/// The limiters of a [`Chain`]: implemented for tuples of 1 to 8 [`Limiter`]s.
///
/// ```
/// use tollgate::{Links, NoopLimiter};
///
/// let links = (NoopLimiter::new(), NoopLimiter::new());
/// let leases = links.try_acquire_each(3).unwrap();
/// assert_eq!(leases.len(), 2);
/// assert_eq!(links.statistics().total_successful, 1); // the last limiter's count
/// ```
pub trait Links {
    /// The inner leases of a granted request.
    ///
    /// ```
    /// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Lease, Links, NoopLimiter};
    ///
    /// let jobs = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
    /// let links = (NoopLimiter::new(), &jobs);
    /// // For a tuple of n limiters: an array of n leases, in chain order.
    /// let leases: [Lease<'_>; 2] = links.try_acquire_each(1).unwrap();
    /// assert_eq!(leases[1].permits(), 1);
    /// ```
    type Leases<'a>: Leases
    where
        Self: 'a;

    /// Acquires from each limiter in order; on a rejection drops what it acquired, last first,
    /// and returns that rejection.
    ///
    /// ```
    /// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter, Links, Reason};
    ///
    /// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap();
    /// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
    /// let links = (&a, &b);
    /// let _held = b.try_acquire(1).unwrap();
    /// // `a` grants, `b` rejects: `a`'s lease is dropped and `b`'s rejection comes back.
    /// assert_eq!(links.try_acquire_each(1).unwrap_err().reason(), Reason::Exhausted);
    /// assert_eq!(a.available_permits(), 2);
    /// ```
    fn try_acquire_each(&self, permits: u32) -> Result<Self::Leases<'_>, Rejection>;

    /// Each limiter's statistics, in chain order, folded by the chain rules.
    ///
    /// ```
    /// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter, Links};
    ///
    /// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(4)).unwrap();
    /// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(5)).unwrap();
    /// let links = (&a, &b);
    /// let _both = links.try_acquire_each(2).unwrap();
    /// let _a_only = a.try_acquire(1).unwrap();
    /// assert!(b.try_acquire(4).is_err());
    /// let s = links.statistics();
    /// assert_eq!(s.available_permits, 1); // the minimum: a has 1 left, b 3
    /// assert_eq!(s.total_failed, 1); // the sum
    /// assert_eq!(s.total_successful, 1); // the last limiter's (b's)
    /// ```
    fn statistics(&self) -> Statistics;

    /// The chain's idle duration: `None` if any limiter is in use, else the minimum (the rule
    /// of .NET 11).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let jobs = ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(4), &clock).unwrap();
    /// let rate = GcraLimiter::with_clock(GcraOptions::per_second(10), &clock).unwrap();
    /// let links = (&jobs, &rate);
    /// clock.advance(Duration::from_secs(5));
    /// assert_eq!(links.idle_duration(), Some(Duration::from_secs(5)));
    /// drop(links.try_acquire_each(1).unwrap()); // `jobs` is idle again; `rate` must refill
    /// assert_eq!(links.idle_duration(), None);
    /// clock.advance(Duration::from_millis(100)); // the permit is back
    /// assert_eq!(links.idle_duration(), Some(Duration::ZERO));
    /// ```
    fn idle_duration(&self) -> Option<Duration>;
}

/// The limiters of a [`PartitionedChain`]: tuples of 1 to 8 [`PartitionedLimiter`]s over the
/// same resource type.
///
/// ```
/// use core::time::Duration;
/// use tollgate::*;
///
/// let opts = FixedWindowOptions::new(1, Duration::from_secs(1));
/// let a: KeyedLimiter<u32> = KeyedLimiter::fixed_window(opts, PartitionConfig::default()).unwrap();
/// let b: KeyedLimiter<u32> = KeyedLimiter::fixed_window(opts, PartitionConfig::default()).unwrap();
/// let links = (&a, &b);
/// assert!(links.try_acquire_each(&7, 1).is_ok());
/// assert_eq!(links.statistics(&7).available_permits, 0);
/// ```
pub trait PartitionedLinks<R: ?Sized> {
    /// The inner leases of a granted request.
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let opts = FixedWindowOptions::per_second(5);
    /// let a: KeyedLimiter<u64> = KeyedLimiter::fixed_window(opts, PartitionConfig::default()).unwrap();
    /// let b: KeyedLimiter<u64> = KeyedLimiter::fixed_window(opts, PartitionConfig::default()).unwrap();
    /// // For a tuple of partitioned limiters: the tuple of their leases.
    /// let (from_a, from_b) = (&a, &b).try_acquire_each(&3, 2).unwrap();
    /// assert_eq!((from_a.permits(), from_b.permits()), (2, 2));
    /// ```
    type Leases<'a>: Leases
    where
        Self: 'a;

    /// Acquires from each limiter in order, all or nothing (see [`Links::try_acquire_each`]).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let opts = FixedWindowOptions::new(1, Duration::from_secs(1));
    /// let per_user: KeyedLimiter<str> = KeyedLimiter::fixed_window(opts, PartitionConfig::default()).unwrap();
    /// let per_route: KeyedLimiter<str> = KeyedLimiter::fixed_window(opts, PartitionConfig::default()).unwrap();
    /// let links = (&per_user, &per_route);
    /// assert!(links.try_acquire_each("alice", 1).is_ok());
    /// assert_eq!(links.try_acquire_each("alice", 1).unwrap_err().reason(), Reason::Exhausted);
    /// assert!(links.try_acquire_each("bob", 1).is_ok()); // bob's own partitions
    /// ```
    fn try_acquire_each(&self, resource: &R, permits: u32) -> Result<Self::Leases<'_>, Rejection>;

    /// Settles every lease of `leases`, each holding `held` permits of `resource`'s
    /// partitions, to `actual` ([`PartitionedLimiter::settle`]), in order: all or nothing
    /// where the limiters allow it (when one refuses, those settled before it are settled back
    /// to `held` and its error is returned).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let opts = TokenBucketOptions::new(100, 100, Duration::from_secs(60));
    /// let a: KeyedLimiter<str> = KeyedLimiter::token_bucket(opts, PartitionConfig::default()).unwrap();
    /// let b: KeyedLimiter<str> = KeyedLimiter::token_bucket(opts, PartitionConfig::default()).unwrap();
    /// let links = (&a, &b);
    /// let mut leases = links.try_acquire_each("alice", 40).unwrap();
    /// links.settle_each("alice", &mut leases, 40, 10).unwrap();
    /// assert_eq!((a.statistics("alice").available_permits, b.statistics("alice").available_permits), (90, 90));
    /// ```
    fn settle_each<'s>(
        &'s self,
        resource: &R,
        leases: &mut Self::Leases<'s>,
        held: u32,
        actual: u32,
    ) -> Result<(), crate::lease::SettleError>;

    /// The statistics of `resource`'s partitions, folded by the chain rules.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let per_second = FixedWindowOptions::new(2, Duration::from_secs(1));
    /// let per_minute = FixedWindowOptions::new(10, Duration::from_secs(60));
    /// let a: KeyedLimiter<u64> = KeyedLimiter::fixed_window(per_second, PartitionConfig::default()).unwrap();
    /// let b: KeyedLimiter<u64> = KeyedLimiter::fixed_window(per_minute, PartitionConfig::default()).unwrap();
    /// let links = (&a, &b);
    /// let _lease = links.try_acquire_each(&7, 1).unwrap();
    /// let s = links.statistics(&7);
    /// assert_eq!((s.available_permits, s.total_successful), (1, 1)); // min(1, 9); b's count
    /// ```
    fn statistics(&self, resource: &R) -> Statistics;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(a: u64, q: u64, ok: u64, ko: u64) -> Statistics {
        Statistics {
            available_permits: a,
            queued_permits: q,
            total_successful: ok,
            total_failed: ko,
        }
    }

    #[test]
    fn statistics_fold_by_the_chain_rules() {
        let folded = combine([s(5, 1, 10, 2), s(3, 2, 7, 1), s(9, 0, 4, 0)]);
        assert_eq!(folded, s(3, 3, 4, 3));
        assert_eq!(combine([s(1, 2, 3, 4)]), s(1, 2, 3, 4));
        assert_eq!(
            combine([s(0, u64::MAX, 0, u64::MAX), s(0, 1, 0, 1)]),
            s(0, u64::MAX, 0, u64::MAX)
        );
    }

    #[test]
    fn idle_is_none_if_any_is_none_else_the_minimum() {
        let sec = Duration::from_secs;
        assert_eq!(combine_idle([Some(sec(3)), Some(sec(1))]), Some(sec(1)));
        assert_eq!(combine_idle([Some(sec(3)), None, Some(sec(1))]), None);
        assert_eq!(combine_idle([None]), None);
    }
}
