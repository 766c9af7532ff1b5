//! The traits every limiter implements. They are open: a user-defined limiter works wherever a
//! built-in one does.

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
///                 Reason::Custom("CPU load above threshold"),
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
    fn try_acquire(&self, permits: u32) -> Result<Lease<'_>, Rejection>;

    /// Permits that could be acquired now.
    fn available_permits(&self) -> u64;

    /// A snapshot of the limiter's counters.
    fn statistics(&self) -> Statistics;

    /// How long the limiter has been fully available (no permits in use, nothing to replenish),
    /// or `None` while it is in use. Partitioned limiters evict partitions by it.
    fn idle_duration(&self) -> Option<Duration>;

    /// Closes the limiter: every later acquisition is rejected with
    /// [`Reason::Closed`](crate::Reason::Closed). Leases already granted stay valid.
    fn close(&self);

    /// Whether [`close`](Limiter::close) has been called.
    fn is_closed(&self) -> bool;
}

/// A limiter whose permits come back with time.
pub trait Replenishing: Limiter {
    /// The length of one replenishment step: the token bucket's period, the fixed window, or the
    /// sliding window's segment.
    fn replenishment_period(&self) -> Duration;

    /// Brings the limiter's state up to the clock's present, serves queued waiters that time
    /// has made room for, and returns the permits available.
    ///
    /// Replenishment is computed from elapsed time on every call, so `try_acquire` is exact
    /// without ever calling this. Queued waiters, though, need someone to notice that time has
    /// passed: a later acquisition does, a `Driver` (feature `std`) does, or your own timer calls
    /// this at the instant [`next_service`](Replenishing::next_service) names.
    fn replenish(&self) -> u64;

    /// How long until time alone lets the limiter serve its next queued waiter: `None` when
    /// nobody waits (or time cannot help), zero when it can be served now. A `no_std` timer task
    /// sleeps this long, then calls [`replenish`](Replenishing::replenish).
    fn next_service(&self) -> Option<Duration> {
        None
    }

    /// Called by [`Driver::register`](crate::Driver::register): the limiter should call
    /// `handle.notify()` whenever a waiter becomes the next to be served, so the driver can
    /// recompute its sleep. The default ignores it (the driver then only learns of new waiters
    /// when it next wakes).
    #[cfg(feature = "std")]
    fn attach_driver(&self, handle: crate::driver::DriverHandle) {
        let _ = handle;
    }
}

impl<L: Limiter + ?Sized> Limiter for &L {
    fn try_acquire(&self, permits: u32) -> Result<Lease<'_>, Rejection> {
        (**self).try_acquire(permits)
    }
    fn available_permits(&self) -> u64 {
        (**self).available_permits()
    }
    fn statistics(&self) -> Statistics {
        (**self).statistics()
    }
    fn idle_duration(&self) -> Option<Duration> {
        (**self).idle_duration()
    }
    fn close(&self) {
        (**self).close()
    }
    fn is_closed(&self) -> bool {
        (**self).is_closed()
    }
}

/// Owned leases for limiters held in an `Arc` (feature `alloc`): the lease keeps the limiter
/// alive and can move to another task or thread.
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
#[cfg(feature = "alloc")]
pub trait AcquireOwned {
    /// Like [`Limiter::try_acquire`], returning a lease that owns a handle to the limiter.
    fn try_acquire_owned(
        self: &alloc::sync::Arc<Self>,
        permits: u32,
    ) -> Result<crate::OwnedLease, Rejection>;
}

#[cfg(feature = "alloc")]
impl<L> AcquireOwned for L
where
    L: Limiter + crate::Release + Send + Sync + 'static,
{
    fn try_acquire_owned(
        self: &alloc::sync::Arc<Self>,
        permits: u32,
    ) -> Result<crate::OwnedLease, Rejection> {
        let lease = self.try_acquire(permits)?;
        let returns = lease.returns_permits();
        let permits = lease.forget();
        Ok(if returns {
            crate::OwnedLease::releasing(permits, self.clone())
        } else {
            crate::OwnedLease::unreleased(permits)
        })
    }
}
