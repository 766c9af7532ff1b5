//! The traits every limiter implements. They are open: a user-defined limiter works wherever a
//! built-in one does.

use core::future::Future;
use core::time::Duration;

use crate::lease::{Lease, Rejection, Statistics};

/// A limiter of rate or concurrency: grants leases of permits, or says why not.
///
/// Implement it for your own limiter and it fits wherever a built-in one does. The .NET design
/// document's example — a limiter that rejects while the CPU is busy:
///
/// ```
/// use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
/// use core::time::Duration;
/// use tollgate::{Lease, Limiter, Reason, Rejection, Statistics};
///
/// struct CpuLoadLimiter {
///     load_percent: AtomicU32, // updated by a monitor elsewhere
///     threshold: u32,
///     granted: AtomicU64,
///     rejected: AtomicU64,
/// }
///
/// impl Limiter for CpuLoadLimiter {
///     fn try_acquire(&self, permits: u32) -> Result<Lease<'_>, Rejection> {
///         if self.load_percent.load(Ordering::Relaxed) > self.threshold {
///             self.rejected.fetch_add(1, Ordering::Relaxed);
///             return Err(Rejection::with_retry_after(
///                 &Reason::Custom("CPU load above threshold"),
///                 Duration::from_secs(1),
///             ));
///         }
///         self.granted.fetch_add(1, Ordering::Relaxed);
///         Ok(Lease::unreleased(permits))
///     }
///     fn available_permits(&self) -> u64 {
///         if self.load_percent.load(Ordering::Relaxed) > self.threshold { 0 } else { u64::MAX }
///     }
///     fn statistics(&self) -> Statistics {
///         Statistics {
///             available_permits: self.available_permits(),
///             queued_permits: 0,
///             total_successful: self.granted.load(Ordering::Relaxed),
///             total_failed: self.rejected.load(Ordering::Relaxed),
///         }
///     }
///     fn idle_duration(&self) -> Option<Duration> { None }
///     fn close(&self) {}
///     fn is_closed(&self) -> bool { false }
/// }
///
/// let cpu = CpuLoadLimiter {
///     load_percent: AtomicU32::new(95),
///     threshold: 90,
///     granted: AtomicU64::new(0),
///     rejected: AtomicU64::new(0),
/// };
/// let limiter: &dyn Limiter = &cpu;
/// assert_eq!(limiter.try_acquire(1).unwrap_err().reason(), Reason::Custom("CPU load above threshold"));
/// cpu.load_percent.store(40, Ordering::Relaxed);
/// assert!(limiter.try_acquire(1).is_ok());
/// assert_eq!(limiter.statistics().total_failed, 1);
/// ```
pub trait Limiter {
    /// Takes `permits` now if they are available, without waiting.
    ///
    /// `try_acquire(0)` is a probe: it succeeds if at least one permit is available and changes
    /// nothing. A request for more permits than the limit is rejected with
    /// [`Reason::ExceedsLimit`](crate::Reason::ExceedsLimit).
    ///
    /// ```
    /// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter, Reason};
    ///
    /// let limiter = ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap();
    /// assert!(limiter.try_acquire(0).is_ok()); // a probe: takes nothing
    /// let lease = limiter.try_acquire(2).unwrap();
    /// assert_eq!(lease.permits(), 2);
    /// assert_eq!(limiter.try_acquire(1).unwrap_err().reason(), Reason::Exhausted);
    /// assert_eq!(limiter.try_acquire(3).unwrap_err().reason(), Reason::ExceedsLimit);
    /// drop(lease); // a concurrency lease gives its permits back
    /// assert!(limiter.try_acquire(2).is_ok());
    /// ```
    fn try_acquire(&self, permits: u32) -> Result<Lease<'_>, Rejection>;

    /// The permits the limiter holds free now: for a concurrency limiter, the limit minus the
    /// permits leased; for a rate limiter, the tokens in the bucket or the room left in the
    /// window as of the clock's present.
    ///
    /// It is a snapshot, not a promise: another thread may take them first, and behind a
    /// [`QueueOrder::OldestFirst`](crate::QueueOrder::OldestFirst) queue they belong to the
    /// waiters ahead — a newcomer's `try_acquire` is refused (nobody barges past the queue) even
    /// when this count would cover it, until the queue is served. With `NewestFirst` (or an empty
    /// queue) a newcomer may take them.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{FixedWindowLimiter, FixedWindowOptions, Limiter, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let opts = FixedWindowOptions::new(5, Duration::from_secs(1));
    /// let window = FixedWindowLimiter::with_clock(opts, &clock).unwrap();
    /// let _lease = window.try_acquire(3).unwrap();
    /// assert_eq!(window.available_permits(), 2); // the room left in the window
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(window.available_permits(), 5); // a new window
    /// ```
    fn available_permits(&self) -> u64;

    /// A snapshot of the limiter's counters.
    ///
    /// ```
    /// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter};
    ///
    /// let limiter = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
    /// let _held = limiter.try_acquire(1).unwrap();
    /// assert!(limiter.try_acquire(1).is_err());
    /// let s = limiter.statistics();
    /// assert_eq!((s.available_permits, s.queued_permits), (0, 0));
    /// assert_eq!((s.total_successful, s.total_failed), (1, 1));
    /// ```
    fn statistics(&self) -> Statistics;

    /// How long the limiter has been fully available (no permits in use, nothing to replenish),
    /// or `None` while it is in use. Partitioned limiters evict partitions by it.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(1), &clock).unwrap();
    /// clock.advance(Duration::from_secs(3));
    /// assert_eq!(limiter.idle_duration(), Some(Duration::from_secs(3)));
    /// let lease = limiter.try_acquire(1).unwrap();
    /// assert_eq!(limiter.idle_duration(), None); // in use
    /// drop(lease);
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(limiter.idle_duration(), Some(Duration::from_secs(1)));
    /// ```
    fn idle_duration(&self) -> Option<Duration>;

    /// Closes the limiter: every later acquisition is rejected with
    /// [`Reason::Closed`](crate::Reason::Closed). Leases already granted stay valid.
    ///
    /// ```
    /// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter, Reason};
    ///
    /// let limiter = ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap();
    /// let lease = limiter.try_acquire(1).unwrap();
    /// limiter.close(); // e.g. at shutdown
    /// assert_eq!(limiter.try_acquire(1).unwrap_err().reason(), Reason::Closed);
    /// assert_eq!(lease.permits(), 1); // still held, still valid
    /// ```
    fn close(&self);

    /// Whether [`close`](Limiter::close) has been called.
    ///
    /// ```
    /// use tollgate::{GcraLimiter, GcraOptions, Limiter, ManualClock};
    ///
    /// let gcra = GcraLimiter::with_clock(GcraOptions::per_second(10), ManualClock::new()).unwrap();
    /// assert!(!gcra.is_closed());
    /// gcra.close();
    /// assert!(gcra.is_closed());
    /// ```
    fn is_closed(&self) -> bool;
}

/// A limiter whose permits come back with time.
///
/// A `no_std` timer task serving a limiter's waiters, on any clock: sleep
/// [`next_service`](Replenishing::next_service), then [`replenish`](Replenishing::replenish).
///
/// ```
/// use core::future::Future;
/// use core::task::{Context, Poll, Waker};
/// use core::time::Duration;
/// use tollgate::{Clock, GcraLimiter, GcraOptions, Instant, Limiter, ManualClock, QueueOrder, Replenishing};
///
/// let clock = ManualClock::new();
/// let opts = GcraOptions::per_second(10).with_burst(1).with_queue(2, QueueOrder::OldestFirst);
/// let gcra = GcraLimiter::with_clock(opts, &clock).unwrap();
/// let _first = gcra.try_acquire(1).unwrap();
/// let mut waiter = core::pin::pin!(gcra.acquire(1));
/// let mut cx = Context::from_waker(Waker::noop());
/// assert!(waiter.as_mut().poll(&mut cx).is_pending());
/// while let Some(sleep) = gcra.next_service() {
///     clock.advance(sleep); // the timer task's sleep
///     gcra.replenish();
/// }
/// assert!(matches!(waiter.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
/// assert_eq!(clock.now(), Instant::from_nanos(100_000_000)); // served at its slot
/// ```
pub trait Replenishing: Limiter {
    /// The length of one replenishment step: the token bucket's period, the fixed window, or the
    /// sliding window's segment.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{FixedWindowLimiter, FixedWindowOptions, GcraLimiter, GcraOptions, ManualClock, Replenishing};
    ///
    /// let gcra = GcraLimiter::with_clock(GcraOptions::per_second(50), ManualClock::new()).unwrap();
    /// assert_eq!(gcra.replenishment_period(), Duration::from_millis(20)); // one permit every 20 ms
    /// let opts = FixedWindowOptions::new(100, Duration::from_secs(60));
    /// let window = FixedWindowLimiter::with_clock(opts, ManualClock::new()).unwrap();
    /// assert_eq!(window.replenishment_period(), Duration::from_secs(60)); // the window
    /// ```
    fn replenishment_period(&self) -> Duration;

    /// Brings the limiter's state up to the clock's present, serves queued waiters that time
    /// has made room for, and returns the permits available.
    ///
    /// Replenishment is computed from elapsed time on every call, so `try_acquire` is exact
    /// without ever calling this. Queued waiters, though, need someone to notice that time has
    /// passed: a later acquisition does, a `Driver` (feature `std`) does, or your own timer calls
    /// this at the instant [`next_service`](Replenishing::next_service) names.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{GcraLimiter, GcraOptions, Limiter, ManualClock, Replenishing};
    ///
    /// let clock = ManualClock::new();
    /// let gcra = GcraLimiter::with_clock(GcraOptions::per_second(10), &clock).unwrap();
    /// let _all = gcra.try_acquire(10).unwrap();
    /// assert_eq!(gcra.replenish(), 0);
    /// clock.advance(Duration::from_millis(300)); // three permits back, one every 100 ms
    /// assert_eq!(gcra.replenish(), 3);
    /// ```
    fn replenish(&self) -> u64;

    /// How long until time alone lets the limiter serve its next queued waiter: `None` when
    /// nobody waits (or time cannot help), zero when it can be served now. A `no_std` timer task
    /// sleeps this long, then calls [`replenish`](Replenishing::replenish).
    ///
    /// ```
    /// use core::future::Future;
    /// use core::task::{Context, Waker};
    /// use core::time::Duration;
    /// use tollgate::{Limiter, LeakyBucketShaper, ManualClock, Replenishing, ShaperOptions};
    ///
    /// let clock = ManualClock::new();
    /// let shaper = LeakyBucketShaper::with_clock(ShaperOptions::per_second(4), &clock).unwrap();
    /// assert_eq!(shaper.next_service(), None); // nobody waits
    /// let _now = shaper.try_acquire(1).unwrap();
    /// let mut next = core::pin::pin!(shaper.acquire(1));
    /// assert!(next.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
    /// assert_eq!(shaper.next_service(), Some(Duration::from_millis(250))); // its departure slot
    /// clock.advance(Duration::from_millis(250));
    /// assert_eq!(shaper.next_service(), Some(Duration::ZERO)); // it can be served now
    /// ```
    fn next_service(&self) -> Option<Duration> {
        None
    }

    /// Called by [`Driver::register`](crate::Driver::register): the limiter should call
    /// `handle.notify()` whenever a waiter becomes the next to be served, so the driver can
    /// recompute its sleep. The default ignores it (the driver then only learns of new waiters
    /// when it next wakes).
    ///
    /// Forwarding it from a limiter of your own that wraps a built-in one:
    ///
    /// ```
    /// use std::sync::{atomic::{AtomicU64, Ordering}, Arc};
    /// use tollgate::{Driver, DriverHandle, GcraLimiter, GcraOptions, Replenishing, StdClock};
    /// # use std::time::Duration;
    /// # use tollgate::{Lease, Limiter, Rejection, Statistics};
    ///
    /// /// A GCRA limiter that counts the rounds it is served.
    /// struct Counted { inner: GcraLimiter<StdClock>, rounds: AtomicU64 }
    /// # impl Limiter for Counted {
    /// #     fn try_acquire(&self, n: u32) -> Result<Lease<'_>, Rejection> { self.inner.try_acquire(n) }
    /// #     fn available_permits(&self) -> u64 { self.inner.available_permits() }
    /// #     fn statistics(&self) -> Statistics { self.inner.statistics() }
    /// #     fn idle_duration(&self) -> Option<Duration> { self.inner.idle_duration() }
    /// #     fn close(&self) { self.inner.close() }
    /// #     fn is_closed(&self) -> bool { self.inner.is_closed() }
    /// # }
    /// impl Replenishing for Counted {
    ///     fn replenish(&self) -> u64 {
    ///         self.rounds.fetch_add(1, Ordering::Relaxed);
    ///         self.inner.replenish()
    ///     }
    ///     // The inner limiter tells the driver when its next waiter changes.
    ///     fn attach_driver(&self, handle: DriverHandle) { self.inner.attach_driver(handle) }
    /// #   fn replenishment_period(&self) -> Duration { self.inner.replenishment_period() }
    /// #   fn next_service(&self) -> Option<Duration> { self.inner.next_service() }
    /// }
    ///
    /// let inner = GcraLimiter::new(GcraOptions::per_second(100)).unwrap();
    /// let limiter = Arc::new(Counted { inner, rounds: AtomicU64::new(0) });
    /// let driver = Driver::new().unwrap();
    /// driver.register(&limiter); // calls `attach_driver`
    /// drop(driver); // serves every registered limiter once more before it stops
    /// assert!(limiter.rounds.load(Ordering::Relaxed) >= 1);
    /// ```
    #[cfg(feature = "std")]
    fn attach_driver(&self, handle: crate::wait::DriverHandle) {
        let _ = handle;
    }
}

/// Looking without taking: what [`try_acquire`](Limiter::try_acquire) would answer now, with
/// nothing taken, nothing counted in the statistics, and no waiter served.
///
/// `Ok(())` means a `try_acquire(permits)` at this instant would be granted; `Err` is the
/// rejection it would get, with the same [`Reason`](crate::Reason) and the same exact
/// [`retry_after`](Rejection::retry_after). The answer is a snapshot: another thread may take
/// or return permits a moment later. One difference from `try_acquire`: behind an oldest-first
/// queue, `try_acquire` first serves the waiters ahead (time may already have brought their
/// permits) and then decides; `peek` serves nobody, so there it reports the newcomer held back
/// by the queue, with the wait for the waiters ahead and itself.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{Limiter, ManualClock, Peek, Reason, TokenBucketLimiter, TokenBucketOptions};
///
/// let clock = ManualClock::new();
/// let opts = TokenBucketOptions::new(2, 2, Duration::from_secs(1));
/// let bucket = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
/// assert!(bucket.peek(2).is_ok());
/// assert_eq!(bucket.available_permits(), 2); // nothing taken
/// assert_eq!(bucket.statistics().total_successful, 0); // nothing counted
/// bucket.try_acquire(2).unwrap().forget();
/// let no = bucket.peek(1).unwrap_err();
/// assert_eq!(no.reason(), Reason::Exhausted);
/// assert_eq!(no.retry_after(), Some(Duration::from_secs(1)));
/// assert_eq!(bucket.peek(3).unwrap_err().reason(), Reason::ExceedsLimit);
/// ```
pub trait Peek: Limiter {
    /// What `try_acquire(permits)` would answer now, taking and counting nothing (see the
    /// trait's docs).
    ///
    /// ```
    /// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter, Peek};
    ///
    /// let limiter = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
    /// let lease = limiter.try_acquire(1).unwrap();
    /// assert!(limiter.peek(1).is_err()); // held
    /// drop(lease);
    /// assert!(limiter.peek(1).is_ok());
    /// assert_eq!(limiter.statistics().total_failed, 0); // the peek was not counted
    /// ```
    fn peek(&self, permits: u32) -> Result<(), Rejection>;
}

/// Trait methods `name(args) -> output` that call the same method of `**self`.
macro_rules! forward {
    ($($(#[$m:meta])* $name:ident($($arg:ident: $ty:ty),*) $(-> $out:ty)?;)+) => {$(
        $(#[$m])*
        fn $name(&self $(, $arg: $ty)*) $(-> $out)? {
            (**self).$name($($arg),*)
        }
    )+};
}

macro_rules! forward_limiter {
    ($(#[$m:meta])* $ptr:ty) => {
        $(#[$m])*
        impl<L: Limiter + ?Sized> Limiter for $ptr {
            forward! {
                #[inline]
                try_acquire(permits: u32) -> Result<Lease<'_>, Rejection>;
                available_permits() -> u64;
                statistics() -> Statistics;
                idle_duration() -> Option<Duration>;
                close();
                is_closed() -> bool;
            }
        }

        $(#[$m])*
        impl<L: Peek + ?Sized> Peek for $ptr {
            forward!(peek(permits: u32) -> Result<(), Rejection>;);
        }

        $(#[$m])*
        impl<L: Replenishing + ?Sized> Replenishing for $ptr {
            forward! {
                replenishment_period() -> Duration;
                replenish() -> u64;
                next_service() -> Option<Duration>;
                #[cfg(feature = "std")]
                attach_driver(handle: crate::wait::DriverHandle);
            }
        }

        $(#[$m])*
        impl<L: AcquireAsync + ?Sized> AcquireAsync for $ptr {
            type Acquire<'a>
                = L::Acquire<'a>
            where
                Self: 'a;

            fn acquire(&self, permits: u32) -> Self::Acquire<'_> {
                (**self).acquire(permits)
            }

            fn acquire_now(&self, permits: u32) -> Option<Result<Lease<'_>, Rejection>> {
                (**self).acquire_now(permits)
            }
        }
    };
}

// A limiter behind a reference, a shared or an owning pointer is the limiter:
// `Chain::new((arc_a, arc_b))`, `Arc<dyn Limiter + Send + Sync>` and `Box<dyn Limiter>` compose
// like the limiters themselves.
forward_limiter!(
    /// Forwards to the limiter referred to.
    &L
);
forward_limiter!(
    /// Forwards to the shared limiter (feature `alloc`).
    #[cfg(feature = "alloc")]
    alloc::sync::Arc<L>
);
forward_limiter!(
    /// Forwards to the boxed limiter (feature `alloc`).
    #[cfg(feature = "alloc")]
    alloc::boxed::Box<L>
);

/// A limiter one can wait on: `acquire(n).await` (.NET `AcquireAsync`).
///
/// Implemented by the nine built-in limiters (their waits are queued, see
/// [`Acquire`](crate::Acquire)), by [`NoopLimiter`](crate::NoopLimiter) and
/// [`PartitionLimiter`](crate::PartitionLimiter), and by references to any of them. Implement it
/// for your own limiter to chain it in a waiting [`Chain`](crate::Chain) or to use it as a waiting partition.
///
/// ```
/// use tollgate::{AcquireAsync, ConcurrencyLimiter, ConcurrencyOptions};
///
/// async fn with_permit<L: AcquireAsync>(limiter: &L) -> bool {
///     limiter.acquire(1).await.is_ok()
/// }
/// # use core::future::Future;
/// # let l = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
/// # let mut f = core::pin::pin!(with_permit(&l));
/// # let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
/// # assert_eq!(f.as_mut().poll(&mut cx), core::task::Poll::Ready(true));
/// ```
pub trait AcquireAsync: Limiter {
    /// The future of one waiting acquisition.
    ///
    /// ```
    /// use core::future::Future;
    /// use core::task::{Context, Poll, Waker};
    /// use tollgate::{AcquireAsync, ConcurrencyLimiter, ConcurrencyOptions, StdClock};
    ///
    /// /// A request that keeps its pending acquisition, named by its type.
    /// struct Pending<'a, L: AcquireAsync + 'a> {
    ///     acquire: L::Acquire<'a>,
    /// }
    /// let limiter = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
    /// let pending = Pending::<ConcurrencyLimiter<StdClock>> { acquire: AcquireAsync::acquire(&limiter, 1) };
    /// let mut acquire = core::pin::pin!(pending.acquire);
    /// let polled = acquire.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    /// assert!(matches!(polled, Poll::Ready(Ok(_))));
    /// ```
    type Acquire<'a>: Future<Output = Result<Lease<'a>, Rejection>>
    where
        Self: 'a;

    /// Waits for `permits`: resolves to a lease once they are granted, or to a rejection.
    ///
    /// It waits only as far as the options' queue limit lets it: the quota-style constructors
    /// (`per_second`, `per_minute`, `per`, `with_period`, …) wait without a practical bound
    /// ([`UNBOUNDED_QUEUE`](crate::UNBOUNDED_QUEUE)); the .NET-shaped `new` keeps .NET's queue
    /// limit of **0**, and then a request that cannot be granted at once is refused at once
    /// with [`Reason::QueueFull`](crate::Reason::QueueFull) — give it a queue with `with_queue`.
    ///
    /// ```
    /// use core::future::Future;
    /// use core::task::{Context, Poll, Waker};
    /// use tollgate::{AcquireAsync, ConcurrencyLimiter, ConcurrencyOptions, Limiter, QueueOrder};
    ///
    /// let opts = ConcurrencyOptions::new(1).with_queue(1, QueueOrder::OldestFirst);
    /// let limiter = ConcurrencyLimiter::new(opts).unwrap();
    /// let held = limiter.try_acquire(1).unwrap();
    /// let mut cx = Context::from_waker(Waker::noop());
    /// let mut waiting = core::pin::pin!(AcquireAsync::acquire(&limiter, 1));
    /// assert!(waiting.as_mut().poll(&mut cx).is_pending()); // queued behind `held`
    /// drop(held); // its permit goes to the waiter
    /// assert!(matches!(waiting.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
    /// ```
    fn acquire(&self, permits: u32) -> Self::Acquire<'_>;

    /// The acquisition decided now, without a future, where the limiter can: granted, or
    /// refused for a reason no wait changes (over the limit, closed); `None` where it would
    /// wait, and then [`acquire`](Self::acquire)'s future decides from the start. Exactly what
    /// that future's first poll decides in those cases, counted the same. What an adapter
    /// charging many small transfers calls first (`io`: no future built for a grant). The
    /// default is always `None`.
    #[doc(hidden)]
    fn acquire_now(&self, permits: u32) -> Option<Result<Lease<'_>, Rejection>> {
        let _ = permits;
        None
    }
}

/// The capabilities every limiter of this crate that waits in its own queue gets the same way,
/// from its side of the waiting protocol: `AcquireAsync` ([`Acquire`](crate::wait::Acquire)) and
/// `Quota` (`quota::of_source`). Invoked beside each limiter type; `@acquire` gives the first
/// alone (for `PartitionLimiter`, whose unlimited partitions report their quota otherwise).
macro_rules! queued_capabilities {
    (@acquire $ty:ident<C $(, const $n:ident: usize)?> where C: $($bound:path)|+) => {
        impl<C: $($bound +)+ $(, const $n: usize)?> $crate::limiter::AcquireAsync for $ty<C $(, $n)?> {
            type Acquire<'a>
                = $crate::wait::Acquire<'a, Self>
            where
                Self: 'a;

            fn acquire(&self, permits: u32) -> Self::Acquire<'_> {
                $crate::wait::Acquire::new(self, permits)
            }

            fn acquire_now(
                &self,
                permits: u32,
            ) -> Option<Result<$crate::lease::Lease<'_>, $crate::lease::Rejection>> {
                $crate::wait::acquire_now(self, permits)
            }
        }
    };
    ($ty:ident<C $(, const $n:ident: usize)?> where C: $($bound:path)|+) => {
        $crate::limiter::queued_capabilities!(@acquire $ty<C $(, const $n: usize)?> where C: $($bound)|+);

        impl<C: $($bound +)+ $(, const $n: usize)?> $crate::quota::Quota for $ty<C $(, $n)?> {
            fn quota(&self) -> $crate::quota::QuotaState {
                $crate::quota::of_source(self)
            }
        }
    };
}
pub(crate) use queued_capabilities;

/// Owned leases for limiters held in an `Arc` (feature `alloc`): the lease keeps the limiter
/// alive and can move to another task or thread.
///
/// Implemented by every limiter whose leases are plain [`Lease`]s: the nine built-in limiters,
/// [`NoopLimiter`](crate::NoopLimiter), [`PartitionLimiter`](crate::PartitionLimiter), and any
/// limiter of yours that implements [`Release`](crate::Release). A rate limiter's owned lease
/// returns nothing (as its plain lease); a concurrency lease gives its permits back when dropped,
/// wherever it went.
///
/// ```
/// use std::sync::Arc;
/// use tollgate::{AcquireOwned, ConcurrencyLimiter, ConcurrencyOptions, Limiter};
///
/// let limiter = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap());
/// let lease = limiter.try_acquire_owned(1).unwrap();
/// let l2 = limiter.clone();
/// std::thread::spawn(move || drop(lease)).join().unwrap();
/// assert_eq!(l2.available_permits(), 1);
/// ```
///
/// Waiting, with a future that owns its handle (`Send + 'static`, so it can be spawned):
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tollgate::{AcquireOwned, QueueOrder, TokenBucketLimiter, TokenBucketOptions};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let opts = TokenBucketOptions::new(1, 1, Duration::from_millis(20))
///     .with_queue(4, QueueOrder::OldestFirst);
/// let bucket = Arc::new(TokenBucketLimiter::new(opts).unwrap());
/// let _first = bucket.try_acquire_owned(1).unwrap();
/// // The next token comes in 20 ms; the process timer wakes the waiter then.
/// let task = tokio::spawn(bucket.acquire_owned(1));
/// let lease = task.await.unwrap().unwrap();
/// assert_eq!(lease.permits(), 1);
/// # });
/// ```
#[cfg(feature = "alloc")]
pub trait AcquireOwned: Limiter {
    /// Turns a lease of this limiter into an owned one holding a handle to it.
    #[doc(hidden)]
    fn own(self: &alloc::sync::Arc<Self>, lease: Lease<'_>) -> crate::lease::OwnedLease;

    /// Like [`Limiter::try_acquire`], returning a lease that owns a handle to the limiter.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::{AcquireOwned, ConcurrencyLimiter, ConcurrencyOptions, Limiter};
    ///
    /// let limiter = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap());
    /// let lease = limiter.try_acquire_owned(2).unwrap();
    /// assert_eq!(limiter.available_permits(), 0);
    /// // The lease moves to a worker thread and gives its permits back there.
    /// let worker = std::thread::spawn(move || lease.permits());
    /// assert_eq!(worker.join().unwrap(), 2);
    /// assert_eq!(limiter.available_permits(), 2);
    /// ```
    fn try_acquire_owned(
        self: &alloc::sync::Arc<Self>,
        permits: u32,
    ) -> Result<crate::lease::OwnedLease, Rejection> {
        let lease = self.try_acquire(permits)?;
        Ok(self.own(lease))
    }

    /// Like [`AcquireAsync::acquire`], with a future that owns a handle to the limiter (it is
    /// `Send + 'static` when the limiter's own future is `Send`, so it can be spawned) and
    /// resolves to an owned lease. Cancellation-safe as the limiter's own future is.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::{AcquireOwned, ConcurrencyLimiter, ConcurrencyOptions, Limiter, QueueOrder};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let opts = ConcurrencyOptions::new(1).with_queue(1, QueueOrder::OldestFirst);
    /// let limiter = Arc::new(ConcurrencyLimiter::new(opts).unwrap());
    /// let held = limiter.try_acquire_owned(1).unwrap();
    /// let task = tokio::spawn(limiter.acquire_owned(1)); // `Send + 'static`
    /// tokio::task::yield_now().await; // the task queues behind `held`
    /// drop(held);
    /// let lease = task.await.unwrap().unwrap();
    /// assert_eq!((lease.permits(), limiter.available_permits()), (1, 0));
    /// # });
    /// ```
    fn acquire_owned(
        self: &alloc::sync::Arc<Self>,
        permits: u32,
    ) -> impl Future<Output = Result<crate::lease::OwnedLease, Rejection>> + 'static
    where
        Self: AcquireAsync + 'static,
    {
        let this = self.clone();
        async move {
            let lease = this.acquire(permits).await?;
            Ok(this.own(lease))
        }
    }
}

#[cfg(feature = "alloc")]
impl<L> AcquireOwned for L
where
    L: Limiter + crate::lease::Release + Send + Sync + 'static,
{
    fn own(self: &alloc::sync::Arc<Self>, lease: Lease<'_>) -> crate::lease::OwnedLease {
        crate::lease::OwnedLease::from_lease(lease, self.clone())
    }
}
