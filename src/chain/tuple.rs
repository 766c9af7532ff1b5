//! [`Chain`], a tuple of limiters composed statically, and the tuple impls of [`Links`],
//! [`PartitionedLinks`] and [`Leases`] (for tuples of 1 to 8).

use core::fmt;
use core::future::Future;
use core::time::Duration;

use super::{combine, combine_idle, ChainLease, Leases, Links, PartitionedChain, PartitionedLinks};
use crate::lease::{Lease, Reason, Rejection, SettleError, Statistics};
use crate::limiter::{AcquireAsync, Limiter};
use crate::partition::{PartitionedAcquireAsync, PartitionedLimiter};
use crate::sync::{AtomicBool, Ordering};

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

        impl<$($T: Limiter),+> Chain<($($T,)+)> {
            /// Acquires `permits[i]` from the `i`-th limiter, in order, without waiting; all or
            /// nothing, by the rules of [`try_acquire`](Self::try_acquire). For limits counted
            /// in different units: one request of a "requests per minute" limiter and a call's
            /// estimated tokens of a "tokens per minute" one, settled afterwards with
            /// [`ChainLease::settle_links`].
            ///
            /// ```
            /// use core::time::Duration;
            /// use tollgate::*;
            ///
            /// let clock = ManualClock::new();
            /// let minute = Duration::from_secs(60);
            /// let requests = FixedWindowLimiter::with_clock(FixedWindowOptions::new(500, minute), &clock).unwrap();
            /// let tokens = TokenBucketLimiter::with_clock(TokenBucketOptions::new(100_000, 100_000, minute), &clock).unwrap();
            /// let chain = Chain::new((&requests, &tokens));
            /// let call = chain.try_acquire_links([1, 1_000]).unwrap();
            /// assert_eq!((requests.available_permits(), tokens.available_permits()), (499, 99_000));
            /// // The tokens limiter refuses 100,000 more: the request's permit is not kept
            /// // (a window gives nothing back, as in .NET, but nothing more is taken from it).
            /// assert!(chain.try_acquire_links([1, 100_000]).is_err());
            /// assert_eq!(tokens.available_permits(), 99_000);
            /// # drop(call);
            /// ```
            pub fn try_acquire_links(
                &self,
                permits: [u32; $n],
            ) -> Result<ChainLease<[Lease<'_>; $n]>, Rejection> {
                if self.is_closed() {
                    return Err(Rejection::new(&Reason::Closed));
                }
                // On `?`, the leases already bound are dropped in reverse order of binding.
                $(let $v = self.links.$i.try_acquire(permits[$i])?;)+
                Ok(ChainLease::new([$($v),+], permits[0]))
            }
        }

        impl<$($T: AcquireAsync),+> Chain<($($T,)+)> {
            /// Waits for `permits[i]` from the `i`-th limiter, in order, by the rules of
            /// [`acquire`](Self::acquire): the waiting form of
            /// [`try_acquire_links`](Self::try_acquire_links).
            ///
            /// ```
            /// use tollgate::*;
            /// # fn block_on<F: core::future::Future>(f: F) -> F::Output {
            /// #     let mut f = core::pin::pin!(f);
            /// #     let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
            /// #     loop { if let core::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
            /// # }
            /// let calls = ConcurrencyLimiter::new(ConcurrencyOptions::new(4)).unwrap();
            /// let bytes = ConcurrencyLimiter::new(ConcurrencyOptions::new(1 << 20)).unwrap();
            /// let chain = Chain::new((&calls, &bytes));
            /// let lease = block_on(chain.acquire_links([1, 65_536])).unwrap();
            /// assert_eq!(lease.permits_of_links(), [1, 65_536]);
            /// ```
            pub fn acquire_links(
                &self,
                permits: [u32; $n],
            ) -> impl Future<Output = Result<ChainLease<[Lease<'_>; $n]>, Rejection>> + '_ {
                async move {
                    if self.is_closed() {
                        return Err(Rejection::new(&Reason::Closed));
                    }
                    $(let $v = self.links.$i.acquire(permits[$i]).await?;)+
                    Ok(ChainLease::new([$($v),+], permits[0]))
                }
            }

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
                        return Err(Rejection::new(&Reason::Closed));
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

            fn settle_each<'s>(
                &'s self,
                resource: &R,
                leases: &mut Self::Leases<'s>,
                held: u32,
                actual: u32,
            ) -> Result<(), SettleError> {
                let ($($v,)+) = leases;
                let mut settle = || -> Result<(), (SettleError, usize)> {
                    $(self.$i.settle(resource, $v, actual).map_err(|e| (e, $i))?;)+
                    Ok(())
                };
                let Err((e, failed)) = settle() else { return Ok(()) };
                // Those settled before the one that refused go back to what they held.
                $(if $i < failed {
                    let _ = self.$i.settle(resource, $v, held);
                })+
                Err(e)
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
                        return Err(Rejection::new(&Reason::Closed));
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
    new_and_links! {
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
        fn new;
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
        fn links;
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
            return Err(Rejection::new(&Reason::Closed));
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
