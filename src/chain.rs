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

use core::fmt;
use core::future::Future;
use core::time::Duration;

use crate::lease::{Lease, Reason, Rejection, Statistics};
use crate::limiter::{AcquireAsync, Limiter};
use crate::partition::{PartitionedAcquireAsync, PartitionedLimiter};
use crate::sync::{AtomicBool, Ordering};

// ---------------------------------------------------------------------------------------------
// Leases

/// The inner leases of a [`ChainLease`]: a tuple, an array or (feature `alloc`) a `Vec`, which
/// can give its leases back last to first.
///
/// ```
/// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Leases, Limiter};
///
/// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
/// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
/// let held = [a.try_acquire(1).unwrap(), b.try_acquire(1).unwrap()];
/// held.release_in_reverse(); // b's permit first, then a's
/// assert_eq!((a.available_permits(), b.available_permits()), (1, 1));
/// ```
pub trait Leases {
    /// Drops the leases, the last one first.
    ///
    /// ```
    /// use std::cell::RefCell;
    /// use tollgate::Leases;
    ///
    /// /// Records when it is dropped.
    /// struct Held<'a>(&'static str, &'a RefCell<Vec<&'static str>>);
    /// impl Drop for Held<'_> {
    ///     fn drop(&mut self) { self.1.borrow_mut().push(self.0) }
    /// }
    /// let log = RefCell::new(Vec::new());
    /// (Held("global", &log), Held("tenant", &log), Held("user", &log)).release_in_reverse();
    /// assert_eq!(*log.borrow(), ["user", "tenant", "global"]);
    /// ```
    fn release_in_reverse(self);
}

impl<const N: usize> Leases for [Lease<'_>; N] {
    fn release_in_reverse(mut self) {
        for lease in self.iter_mut().rev() {
            drop(core::mem::replace(lease, Lease::unreleased(0)));
        }
    }
}

#[cfg(feature = "alloc")]
impl Leases for alloc::vec::Vec<Lease<'_>> {
    fn release_in_reverse(mut self) {
        while let Some(lease) = self.pop() {
            drop(lease);
        }
    }
}

/// The lease of a chain: every inner lease, dropped in reverse order (the last limiter's first)
/// when this lease is dropped.
///
/// ```
/// use tollgate::{Chain, ConcurrencyLimiter, ConcurrencyOptions};
///
/// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap();
/// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(5)).unwrap();
/// let chain = Chain::new((&a, &b));
/// let lease = chain.try_acquire(2).unwrap();
/// assert_eq!(lease.permits(), 2);
/// assert_eq!(chain.available_permits(), 0); // the minimum
/// drop(lease); // b's permits go back, then a's
/// assert_eq!((a.statistics().available_permits, b.statistics().available_permits), (2, 5));
/// # use tollgate::Limiter;
/// ```
#[must_use = "dropping a lease releases its permits at once"]
pub struct ChainLease<T: Leases> {
    leases: Option<T>,
    permits: u32,
}

impl<T: Leases> ChainLease<T> {
    fn new(leases: T, permits: u32) -> Self {
        Self {
            leases: Some(leases),
            permits,
        }
    }

    /// The permits this lease holds from each limiter of the chain.
    ///
    /// ```
    /// use tollgate::{Chain, ConcurrencyLimiter, ConcurrencyOptions, Limiter};
    ///
    /// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(5)).unwrap();
    /// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(8)).unwrap();
    /// let chain = Chain::new((&a, &b));
    /// let lease = chain.try_acquire(3).unwrap();
    /// assert_eq!(lease.permits(), 3); // 3 from a, and 3 from b
    /// assert_eq!((a.available_permits(), b.available_permits()), (2, 5));
    /// ```
    pub const fn permits(&self) -> u32 {
        self.permits
    }
}

impl<T: Leases> Drop for ChainLease<T> {
    fn drop(&mut self) {
        if let Some(leases) = self.leases.take() {
            leases.release_in_reverse();
        }
    }
}

impl<T: Leases> fmt::Debug for ChainLease<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChainLease")
            .field("permits", &self.permits)
            .finish_non_exhaustive()
    }
}

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
// Static chains

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

macro_rules! tuple_links {
    ($n:literal; $($T:ident $v:ident $i:tt),+; rev $($r:ident),+) => {
        impl<$($T),+> Leases for ($($T,)+) {
            fn release_in_reverse(self) {
                let ($($v,)+) = self;
                $(drop($r);)+
            }
        }

        impl<$($T: Limiter),+> Links for ($($T,)+) {
            type Leases<'a> = [Lease<'a>; $n] where Self: 'a;

            fn try_acquire_each(&self, permits: u32) -> Result<Self::Leases<'_>, Rejection> {
                // On `?`, the leases already bound are dropped in reverse order of binding.
                $(let $v = self.$i.try_acquire(permits)?;)+
                Ok([$($v),+])
            }

            fn statistics(&self) -> Statistics {
                combine([$(self.$i.statistics()),+])
            }

            fn idle_duration(&self) -> Option<Duration> {
                combine_idle([$(self.$i.idle_duration()),+])
            }
        }

        impl<$($T: AcquireAsync),+> Chain<($($T,)+)> {
            /// Waits for `permits` from each limiter in order: each wait completes before the
            /// next limiter is asked. On a rejection, the leases already granted are dropped
            /// last first and the rejection is returned. Dropping the future gives back
            /// whatever it holds. (Example in the [`Chain`] docs.)
            ///
            /// ```
            /// use core::future::Future;
            /// use core::task::{Context, Poll, Waker};
            /// use tollgate::*;
            ///
            /// let opts = ConcurrencyOptions::new(1).with_queue(1, QueueOrder::OldestFirst);
            /// let (global, per_user) = (ConcurrencyLimiter::new(opts).unwrap(), ConcurrencyLimiter::new(opts).unwrap());
            /// let chain = Chain::new((&global, &per_user));
            /// let held = per_user.try_acquire(1).unwrap();
            /// let mut cx = Context::from_waker(Waker::noop());
            /// let mut waiting = core::pin::pin!(chain.acquire(1));
            /// assert!(waiting.as_mut().poll(&mut cx).is_pending()); // has `global`'s permit, waits for `per_user`'s
            /// assert_eq!(global.available_permits(), 0);
            /// drop(held);
            /// let Poll::Ready(Ok(lease)) = waiting.as_mut().poll(&mut cx) else { panic!() };
            /// assert_eq!(lease.permits(), 1);
            /// ```
            pub fn acquire(
                &self,
                permits: u32,
            ) -> impl Future<Output = Result<ChainLease<[Lease<'_>; $n]>, Rejection>> + '_ {
                async move {
                    if self.is_closed() {
                        return Err(Rejection::new(Reason::Closed));
                    }
                    // On `?` (and if the future is dropped mid-way) the leases held are
                    // dropped last first.
                    $(let $v = self.links.$i.acquire(permits).await?;)+
                    Ok(ChainLease::new([$($v),+], permits))
                }
            }
        }

        impl<R: ?Sized, $($T: PartitionedLimiter<R>),+> PartitionedLinks<R> for ($($T,)+) {
            type Leases<'a> = ($(<$T as PartitionedLimiter<R>>::Lease<'a>,)+) where Self: 'a;

            fn try_acquire_each(
                &self,
                resource: &R,
                permits: u32,
            ) -> Result<Self::Leases<'_>, Rejection> {
                $(let $v = self.$i.try_acquire(resource, permits)?;)+
                Ok(($($v,)+))
            }

            fn statistics(&self, resource: &R) -> Statistics {
                combine([$(self.$i.statistics(resource)),+])
            }
        }

        impl<$($T),+> PartitionedChain<($($T,)+)> {
            /// Waits for `permits` for `resource` from each limiter in order, by the rules of
            /// [`Chain::acquire`]: each wait completes before the next limiter is asked; on a
            /// rejection the leases already granted are dropped last first and the rejection is
            /// returned; dropping the future gives back whatever it holds and leaves the queue
            /// it waits in. (Example in the [`PartitionedChain`] docs.)
            ///
            /// ```
            /// use core::time::Duration;
            /// use tollgate::*;
            /// # fn block_on<F: core::future::Future>(f: F) -> F::Output {
            /// #     let mut f = core::pin::pin!(f);
            /// #     let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
            /// #     loop { if let core::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
            /// # }
            /// let opts = FixedWindowOptions::new(2, Duration::from_secs(1));
            /// let per_client = KeyedLimiter::fixed_window(opts, PartitionConfig::default()).unwrap();
            /// let per_route = KeyedLimiter::fixed_window(opts, PartitionConfig::default()).unwrap();
            /// let chain = PartitionedChain::new((per_client, per_route));
            /// let lease = block_on(chain.acquire(&7u64, 2)).unwrap();
            /// assert_eq!(lease.permits(), 2);
            /// // No queue configured: the next request is refused at once, with the window's RetryAfter.
            /// assert_eq!(block_on(chain.acquire(&7, 1)).unwrap_err().reason(), Reason::Exhausted);
            /// ```
            pub fn acquire<'a, R: ?Sized>(
                &'a self,
                resource: &'a R,
                permits: u32,
            ) -> impl Future<
                Output = Result<ChainLease<<($($T,)+) as PartitionedLinks<R>>::Leases<'a>>, Rejection>,
            > + 'a
            where
                $($T: PartitionedAcquireAsync<R>,)+
            {
                async move {
                    if self.closed.load(Ordering::Acquire) {
                        return Err(Rejection::new(Reason::Closed));
                    }
                    // On `?` (and if the future is dropped mid-way) the leases held are
                    // dropped last first.
                    $(let $v = self.links.$i.acquire(resource, permits).await?;)+
                    Ok(ChainLease::new(($($v,)+), permits))
                }
            }
        }

        impl<R: ?Sized, $($T: PartitionedAcquireAsync<R>),+> PartitionedAcquireAsync<R>
            for PartitionedChain<($($T,)+)>
        {
            fn acquire<'a>(
                &'a self,
                resource: &'a R,
                permits: u32,
            ) -> impl Future<Output = Result<Self::Lease<'a>, Rejection>> + 'a {
                <PartitionedChain<($($T,)+)>>::acquire(self, resource, permits)
            }
        }
    };
}

tuple_links!(1; A a 0; rev a);
tuple_links!(2; A a 0, B b 1; rev b, a);
tuple_links!(3; A a 0, B b 1, C c 2; rev c, b, a);
tuple_links!(4; A a 0, B b 1, C c 2, D d 3; rev d, c, b, a);
tuple_links!(5; A a 0, B b 1, C c 2, D d 3, E e 4; rev e, d, c, b, a);
tuple_links!(6; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5; rev f, e, d, c, b, a);
tuple_links!(7; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6; rev g, f, e, d, c, b, a);
tuple_links!(8; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7; rev h, g, f, e, d, c, b, a);

/// A chain of limiters composed at compile time: a tuple of 1 to 8 [`Limiter`]s (owned, or
/// references, or a mix), asked in order, all or nothing. No dynamic dispatch, no allocation.
///
/// A typical use: a per-client limit and a global limit, both of which a request must pass.
///
/// ```
/// use core::time::Duration;
/// use tollgate::*;
///
/// let clock = ManualClock::new();
/// let per_second = FixedWindowLimiter::with_clock(FixedWindowOptions::new(2, Duration::from_secs(1)), &clock).unwrap();
/// let per_minute = FixedWindowLimiter::with_clock(FixedWindowOptions::new(3, Duration::from_secs(60)), &clock).unwrap();
/// let chain = Chain::new((per_second, per_minute));
///
/// let _a = chain.try_acquire(2).unwrap();
/// // The first limiter rejects: its rejection (and RetryAfter) comes back, the second is not asked.
/// let r = chain.try_acquire(1).unwrap_err();
/// assert_eq!((r.reason(), r.retry_after()), (Reason::Exhausted, Some(Duration::from_secs(1))));
/// clock.advance(Duration::from_secs(1));
/// let _b = chain.try_acquire(1).unwrap();
/// clock.advance(Duration::from_secs(1));
/// // Now the second rejects. The permit the first window granted is *not* given back: a rate
/// // limiter's lease releases nothing (as in .NET), so the first window has 1 permit left, not 2.
/// let r = chain.try_acquire(1).unwrap_err();
/// assert_eq!(r.retry_after(), Some(Duration::from_secs(58)));
/// assert_eq!(chain.links().0.available_permits(), 1);
///
/// let s = chain.statistics();
/// assert_eq!((s.total_successful, s.total_failed), (2, 2)); // successful: the last limiter's
/// ```
///
/// Waiting: `acquire(n).await` waits on each limiter in turn (for tuples of [`AcquireAsync`]
/// limiters). The future is `Send` (spawnable on a multi-threaded runtime) when the chained
/// limiters are `'static` types — owned limiters on [`StdClock`](crate::StdClock) or an
/// `Arc`'d clock, or `&'static` references. For chains borrowing shorter-lived limiters the
/// compiler cannot yet prove it (rust-lang/rust#90696: a future holding a trait's associated
/// future type); the future works, but only where `Send` is not required.
///
/// ```
/// use tollgate::*;
/// # fn block_on<F: core::future::Future>(f: F) -> F::Output {
/// #     let mut f = core::pin::pin!(f);
/// #     let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
/// #     loop { if let core::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
/// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
/// let chain = Chain::new((&a, &b));
/// let lease = block_on(chain.acquire(1)).unwrap();
/// assert_eq!(lease.permits(), 1);
/// ```
pub struct Chain<T> {
    links: T,
    closed: AtomicBool,
}

impl<T> Chain<T> {
    /// A chain of the limiters in `links`, asked in tuple order.
    ///
    /// ```
    /// use tollgate::{Chain, ConcurrencyLimiter, ConcurrencyOptions, NoopLimiter};
    ///
    /// // Owned limiters, references, or a mix.
    /// let shared = ConcurrencyLimiter::new(ConcurrencyOptions::new(10)).unwrap();
    /// let chain = Chain::new((NoopLimiter::new(), &shared));
    /// assert!(chain.try_acquire(10).is_ok());
    /// ```
    pub fn new(links: T) -> Self {
        Self {
            links,
            closed: AtomicBool::new(false),
        }
    }

    /// The chained limiters.
    ///
    /// ```
    /// use tollgate::{Chain, ConcurrencyLimiter, ConcurrencyOptions, Limiter};
    ///
    /// let opts = ConcurrencyOptions::new(2);
    /// let chain = Chain::new((ConcurrencyLimiter::new(opts).unwrap(), ConcurrencyLimiter::new(opts).unwrap()));
    /// let _lease = chain.try_acquire(1).unwrap();
    /// let (first, second) = chain.links();
    /// assert_eq!((first.available_permits(), second.available_permits()), (1, 1));
    /// ```
    pub fn links(&self) -> &T {
        &self.links
    }

    /// Closes the chain: later requests are rejected with [`Reason::Closed`]. The limiters in
    /// it are **not** closed (as in .NET): they stay usable on their own.
    ///
    /// ```
    /// use tollgate::{Chain, Limiter, NoopLimiter, Reason};
    /// let inner = NoopLimiter::new();
    /// let chain = Chain::new((&inner,));
    /// chain.close();
    /// assert_eq!(chain.try_acquire(1).unwrap_err().reason(), Reason::Closed);
    /// assert!(inner.try_acquire(1).is_ok());
    /// ```
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Whether [`close`](Self::close) has been called.
    ///
    /// ```
    /// use tollgate::{Chain, NoopLimiter};
    ///
    /// let chain = Chain::new((NoopLimiter::new(),));
    /// assert!(!chain.is_closed());
    /// chain.close();
    /// assert!(chain.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

impl<T: Links> Chain<T> {
    /// Acquires `permits` from each limiter in order, without waiting; all or nothing.
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let rate = GcraLimiter::with_clock(GcraOptions::per_second(10), &clock).unwrap();
    /// let jobs = ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(2), &clock).unwrap();
    /// let chain = Chain::new((&jobs, &rate));
    /// let lease = chain.try_acquire(2).unwrap();
    /// assert_eq!(chain.try_acquire(1).unwrap_err().reason(), Reason::Exhausted); // `jobs` is full
    /// assert_eq!(rate.available_permits(), 8); // `rate` was not asked
    /// drop(lease);
    /// assert!(chain.try_acquire(1).is_ok());
    /// ```
    pub fn try_acquire(&self, permits: u32) -> Result<ChainLease<T::Leases<'_>>, Rejection> {
        if self.is_closed() {
            return Err(Rejection::new(Reason::Closed));
        }
        let leases = self.links.try_acquire_each(permits)?;
        Ok(ChainLease::new(leases, permits))
    }

    /// The permits free now: the minimum over the chain (a snapshot; see
    /// [`Limiter::available_permits`] for what it means behind a queue).
    ///
    /// ```
    /// use tollgate::{Chain, ConcurrencyLimiter, ConcurrencyOptions};
    ///
    /// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(3)).unwrap();
    /// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(10)).unwrap();
    /// let chain = Chain::new((&a, &b));
    /// let _lease = chain.try_acquire(1).unwrap();
    /// assert_eq!(chain.available_permits(), 2); // min(2, 9)
    /// ```
    pub fn available_permits(&self) -> u64 {
        self.links.statistics().available_permits
    }

    /// The chain's statistics: available = minimum, queued = sum, failed = sum, successful = the
    /// last limiter's.
    ///
    /// ```
    /// use tollgate::{Chain, ConcurrencyLimiter, ConcurrencyOptions};
    ///
    /// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
    /// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(4)).unwrap();
    /// let chain = Chain::new((&a, &b));
    /// let _lease = chain.try_acquire(1).unwrap();
    /// assert!(chain.try_acquire(1).is_err()); // `a` rejects
    /// let s = chain.statistics();
    /// assert_eq!((s.available_permits, s.total_successful, s.total_failed), (0, 1, 1));
    /// ```
    pub fn statistics(&self) -> Statistics {
        self.links.statistics()
    }

    /// `None` if any limiter is in use, else the shortest idle duration.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    /// let clock = ManualClock::new();
    /// let a = ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(1), &clock).unwrap();
    /// clock.advance(Duration::from_secs(5));
    /// let b = ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(1), &clock).unwrap();
    /// clock.advance(Duration::from_secs(1));
    /// let chain = Chain::new((&a, &b));
    /// assert_eq!(chain.idle_duration(), Some(Duration::from_secs(1)));
    /// let _held = b.try_acquire(1).unwrap();
    /// assert_eq!(chain.idle_duration(), None);
    /// ```
    pub fn idle_duration(&self) -> Option<Duration> {
        self.links.idle_duration()
    }
}

impl<T> fmt::Debug for Chain<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chain")
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Dynamic chains

/// A chain with no limiters: `DynChain::new` needs at least one (as .NET's `CreateChained`).
///
/// ```
/// use tollgate::EmptyChain;
/// assert_eq!(EmptyChain.to_string(), "a chain needs at least one limiter");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmptyChain;

impl fmt::Display for EmptyChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a chain needs at least one limiter")
    }
}

impl core::error::Error for EmptyChain {}

/// A chain of limiters chosen at run time (feature `alloc`): a list of pointers to limiters —
/// `&dyn Limiter`, `Box<dyn Limiter + Send + Sync>`, `Arc<…>` — asked in order, all or nothing,
/// by the same rules as [`Chain`]. Each grant allocates the `Vec` its lease keeps the inner
/// leases in.
///
/// ```
/// use tollgate::*;
///
/// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
/// let b = NoopLimiter::new();
/// let chain = DynChain::new(vec![&a as &dyn Limiter, &b]).unwrap();
/// let lease = chain.try_acquire(1).unwrap();
/// assert_eq!(chain.try_acquire(1).unwrap_err().reason(), Reason::Exhausted);
/// drop(lease);
/// assert!(chain.try_acquire(1).is_ok());
/// assert_eq!(DynChain::<&dyn Limiter>::new(vec![]).unwrap_err(), EmptyChain);
/// ```
#[cfg(feature = "alloc")]
pub struct DynChain<B> {
    links: alloc::vec::Vec<B>,
    closed: AtomicBool,
}

#[cfg(feature = "alloc")]
impl<B> DynChain<B>
where
    B: core::ops::Deref,
    B::Target: Limiter,
{
    /// A chain of `links`, asked in order; [`EmptyChain`] if there are none. The chain owns its
    /// list: changing the caller's copy later changes nothing (as .NET clones the array).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::*;
    ///
    /// // Chosen at run time, e.g. from configuration.
    /// let mut links: Vec<Arc<dyn Limiter + Send + Sync>> = vec![Arc::new(NoopLimiter::new())];
    /// links.push(Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap()));
    /// let chain = DynChain::new(links).unwrap();
    /// assert_eq!(chain.links().len(), 2);
    /// assert_eq!(DynChain::<Box<dyn Limiter>>::new(Vec::new()).unwrap_err(), EmptyChain);
    /// ```
    pub fn new(links: alloc::vec::Vec<B>) -> Result<Self, EmptyChain> {
        if links.is_empty() {
            return Err(EmptyChain);
        }
        Ok(Self {
            links,
            closed: AtomicBool::new(false),
        })
    }

    /// The chained limiters.
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap();
    /// let noop = NoopLimiter::new();
    /// let chain = DynChain::new(vec![&a as &dyn Limiter, &noop]).unwrap();
    /// let _lease = chain.try_acquire(1).unwrap();
    /// assert_eq!(chain.links()[0].available_permits(), 1);
    /// ```
    pub fn links(&self) -> &[B] {
        &self.links
    }

    /// Acquires `permits` from each limiter in order, without waiting; all or nothing.
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap();
    /// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
    /// let chain = DynChain::new(vec![Box::new(&a) as Box<dyn Limiter>, Box::new(&b)]).unwrap();
    /// let lease = chain.try_acquire(1).unwrap();
    /// assert_eq!(chain.try_acquire(1).unwrap_err().reason(), Reason::Exhausted); // `b` is full
    /// assert_eq!(a.available_permits(), 1); // `a`'s second permit was given back
    /// drop(lease);
    /// assert_eq!((a.available_permits(), b.available_permits()), (2, 1));
    /// ```
    pub fn try_acquire(
        &self,
        permits: u32,
    ) -> Result<ChainLease<alloc::vec::Vec<Lease<'_>>>, Rejection> {
        if self.is_closed() {
            return Err(Rejection::new(Reason::Closed));
        }
        let mut leases = alloc::vec::Vec::with_capacity(self.links.len());
        for link in &self.links {
            match link.try_acquire(permits) {
                Ok(lease) => leases.push(lease),
                Err(rejection) => {
                    leases.release_in_reverse();
                    return Err(rejection);
                }
            }
        }
        Ok(ChainLease::new(leases, permits))
    }

    /// The permits free now: the minimum over the chain (a snapshot; see
    /// [`Limiter::available_permits`] for what it means behind a queue).
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(3)).unwrap();
    /// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(10)).unwrap();
    /// let chain = DynChain::new(vec![&a as &dyn Limiter, &b]).unwrap();
    /// let _lease = chain.try_acquire(2).unwrap();
    /// assert_eq!(chain.available_permits(), 1); // min(1, 8)
    /// ```
    pub fn available_permits(&self) -> u64 {
        self.statistics().available_permits
    }

    /// The chain's statistics, by the rules of [`Chain::statistics`].
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(4)).unwrap();
    /// let b = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
    /// let chain = DynChain::new(vec![&a as &dyn Limiter, &b]).unwrap();
    /// let _lease = chain.try_acquire(1).unwrap();
    /// assert!(chain.try_acquire(1).is_err()); // `b` rejects
    /// let s = chain.statistics();
    /// assert_eq!((s.available_permits, s.total_successful, s.total_failed), (0, 1, 1));
    /// ```
    pub fn statistics(&self) -> Statistics {
        combine(self.links.iter().map(|l| l.statistics()))
    }

    /// `None` if any limiter is in use, else the shortest idle duration.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let a = ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(1), &clock).unwrap();
    /// let b = ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(1), &clock).unwrap();
    /// let chain = DynChain::new(vec![&a, &b]).unwrap();
    /// let lease = b.try_acquire(1).unwrap();
    /// clock.advance(Duration::from_secs(2));
    /// assert_eq!(chain.idle_duration(), None); // `b` is in use
    /// drop(lease);
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(chain.idle_duration(), Some(Duration::from_secs(1))); // min(3 s, 1 s)
    /// ```
    pub fn idle_duration(&self) -> Option<Duration> {
        combine_idle(self.links.iter().map(|l| l.idle_duration()))
    }

    /// Closes the chain (not the limiters in it).
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let inner = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
    /// let chain = DynChain::new(vec![&inner]).unwrap();
    /// chain.close();
    /// assert_eq!(chain.try_acquire(1).unwrap_err().reason(), Reason::Closed);
    /// assert!(!inner.is_closed() && inner.try_acquire(1).is_ok());
    /// ```
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Whether [`close`](Self::close) has been called.
    ///
    /// ```
    /// use tollgate::{DynChain, NoopLimiter};
    ///
    /// let noop = NoopLimiter::new();
    /// let chain = DynChain::new(vec![&noop]).unwrap();
    /// assert!(!chain.is_closed());
    /// chain.close();
    /// assert!(chain.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

#[cfg(feature = "alloc")]
impl<B> DynChain<B>
where
    B: core::ops::Deref,
    B::Target: AcquireAsync,
{
    /// Waits for `permits` from each limiter in order, with [`Chain::acquire`]'s guarantees:
    /// each wait completes before the next limiter is asked; on a rejection the leases already
    /// granted are dropped last first and the rejection is returned; dropping the future at any
    /// point gives back whatever it holds (last first) and leaves the queue it waits in.
    ///
    /// For chains of one limiter type (or of pointers to it: `Vec<Arc<TokenBucketLimiter>>`,
    /// `Vec<&ConcurrencyLimiter>`).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::*;
    /// # fn block_on<F: core::future::Future>(f: F) -> F::Output {
    /// #     let mut f = core::pin::pin!(f);
    /// #     let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
    /// #     loop { if let core::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
    /// # }
    /// let opts = ConcurrencyOptions::new(1).with_queue(1, QueueOrder::OldestFirst);
    /// let global = Arc::new(ConcurrencyLimiter::new(opts).unwrap());
    /// let per_user = Arc::new(ConcurrencyLimiter::new(opts).unwrap());
    /// let chain = DynChain::new(vec![global.clone(), per_user.clone()]).unwrap();
    /// let lease = block_on(chain.acquire(1)).unwrap();
    /// assert_eq!((global.available_permits(), per_user.available_permits()), (0, 0));
    /// drop(lease);
    /// assert_eq!((global.available_permits(), per_user.available_permits()), (1, 1));
    /// ```
    pub async fn acquire(
        &self,
        permits: u32,
    ) -> Result<ChainLease<alloc::vec::Vec<Lease<'_>>>, Rejection> {
        if self.is_closed() {
            return Err(Rejection::new(Reason::Closed));
        }
        // The chain lease holds what is granted so far: on `?`, or if the future is dropped
        // mid-way, it gives it back last first.
        let mut held = ChainLease::new(alloc::vec::Vec::with_capacity(self.links.len()), permits);
        for link in &self.links {
            let lease = (**link).acquire(permits).await?;
            if let Some(leases) = held.leases.as_mut() {
                leases.push(lease);
            }
        }
        Ok(held)
    }
}

#[cfg(feature = "alloc")]
impl<B> fmt::Debug for DynChain<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynChain")
            .field("links", &self.links.len())
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish()
    }
}

// ---------------------------------------------------------------------------------------------
// Chains of partitioned limiters

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
    links: T,
    closed: AtomicBool,
}

impl<T> PartitionedChain<T> {
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
    pub fn new(links: T) -> Self {
        Self {
            links,
            closed: AtomicBool::new(false),
        }
    }

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
    pub fn links(&self) -> &T {
        &self.links
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
            return Err(Rejection::new(Reason::Closed));
        }
        let leases = self.links.try_acquire_each(resource, permits)?;
        Ok(ChainLease::new(leases, permits))
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
