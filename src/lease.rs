//! What an acquisition returns: a [`Lease`] on success, a [`Rejection`] otherwise; and the
//! [`Statistics`] every limiter keeps.

use crate::nanos::Nanos;
use core::fmt;
use core::time::Duration;

/// Something that takes permits back: implemented by limiters whose permits return when a lease
/// ends (the concurrency limiter, and any user-defined limiter of that kind).
///
/// A [`Lease`] calls [`release`](Release::release) exactly once, when it is dropped. Calling it by
/// hand returns permits that no lease holds; the built-in limiters never let the available count
/// exceed the limit, but the accounting is then the caller's responsibility.
pub trait Release {
    /// Returns `permits` to the limiter.
    fn release(&self, permits: u32);
}

/// Permits held: returned on drop to the limiter that granted them, exactly once.
///
/// Rate-limiter leases (token bucket, fixed and sliding window) return nothing: their permits
/// come back with time, as in .NET. A concurrency lease gives its permits back when dropped.
///
/// ```
/// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter};
///
/// let limiter = ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap();
/// let lease = limiter.try_acquire(2).unwrap();
/// assert_eq!(lease.permits(), 2);
/// assert_eq!(limiter.available_permits(), 0);
/// drop(lease);
/// assert_eq!(limiter.available_permits(), 2);
/// ```
#[must_use = "dropping a lease releases its permits at once"]
pub struct Lease<'a> {
    permits: u32,
    /// What gives the permits back: never null — [`NOTHING`] for a lease that returns nothing —
    /// so that a `Result<Lease, Rejection>` keeps its tag in this reference's niche and is
    /// three words, not four.
    releaser: &'a (dyn Release + Sync),
}

/// The releaser of a lease that returns nothing (a one-byte static, so that its address is
/// its own).
struct Nothing(#[allow(dead_code)] u8);

impl Release for Nothing {
    fn release(&self, _: u32) {}
}

static NOTHING: Nothing = Nothing(0);

impl<'a> Lease<'a> {
    /// A lease whose permits go back to `releaser` when it is dropped.
    pub fn releasing(permits: u32, releaser: &'a (dyn Release + Sync)) -> Self {
        Self { permits, releaser }
    }

    /// A lease that returns nothing when dropped (rate limiters, no-op limiters).
    pub const fn unreleased(permits: u32) -> Self {
        Self {
            permits,
            releaser: &NOTHING,
        }
    }

    /// The number of permits this lease holds.
    pub const fn permits(&self) -> u32 {
        self.permits
    }

    /// Whether dropping this lease returns permits to a limiter.
    #[inline(always)]
    pub fn returns_permits(&self) -> bool {
        !core::ptr::addr_eq(self.releaser, &NOTHING)
    }

    /// Ends the lease without returning its permits: they stay taken for good (the limit shrinks
    /// by that many until [`Release::release`] gives them back). Returns the permit count.
    pub fn forget(mut self) -> u32 {
        self.releaser = &NOTHING;
        self.permits
    }
}

impl Drop for Lease<'_> {
    #[inline]
    fn drop(&mut self) {
        if self.returns_permits() {
            self.releaser.release(self.permits);
        }
    }
}

impl fmt::Debug for Lease<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("permits", &self.permits)
            .field("returns_permits", &self.returns_permits())
            .finish()
    }
}

/// A lease that owns a reference-counted handle to its limiter, so it can move across tasks and
/// outlive the borrow that acquired it (feature `alloc`). See
/// [`AcquireOwned::try_acquire_owned`](crate::AcquireOwned::try_acquire_owned).
#[cfg(feature = "alloc")]
#[must_use = "dropping a lease releases its permits at once"]
pub struct OwnedLease {
    permits: u32,
    releaser: Option<alloc::sync::Arc<dyn Release + Send + Sync>>,
}

#[cfg(feature = "alloc")]
impl OwnedLease {
    /// A lease whose permits go back to `releaser` when it is dropped.
    pub fn releasing(permits: u32, releaser: alloc::sync::Arc<dyn Release + Send + Sync>) -> Self {
        Self {
            permits,
            releaser: Some(releaser),
        }
    }

    /// A lease that returns nothing when dropped.
    pub const fn unreleased(permits: u32) -> Self {
        Self {
            permits,
            releaser: None,
        }
    }

    /// The number of permits this lease holds.
    pub const fn permits(&self) -> u32 {
        self.permits
    }

    /// Whether dropping this lease returns permits to a limiter.
    pub const fn returns_permits(&self) -> bool {
        self.releaser.is_some()
    }

    /// Keeps the permits: the lease is consumed without releasing anything, as if its permits
    /// were used up for good. Returns how many there were.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::{AcquireOwned, ConcurrencyLimiter, ConcurrencyOptions, Limiter};
    ///
    /// let limiter = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap());
    /// let lease = limiter.try_acquire_owned(1).unwrap();
    /// assert_eq!(lease.forget(), 1);
    /// assert_eq!(limiter.available_permits(), 1); // never given back
    /// ```
    pub fn forget(mut self) -> u32 {
        self.releaser = None;
        self.permits
    }
}

#[cfg(feature = "alloc")]
impl Drop for OwnedLease {
    fn drop(&mut self) {
        if let Some(r) = self.releaser.take() {
            r.release(self.permits);
        }
    }
}

#[cfg(feature = "alloc")]
impl fmt::Debug for OwnedLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedLease")
            .field("permits", &self.permits)
            .field("returns_permits", &self.returns_permits())
            .finish()
    }
}

/// Why a request was not granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Reason {
    /// Not enough permits now; a rate limiter says when there will be
    /// ([`Rejection::retry_after`]).
    Exhausted,
    /// More permits than the limit: no wait would ever satisfy this request.
    ExceedsLimit,
    /// The limiter was closed.
    Closed,
    /// The wait queue had no room for the request.
    QueueFull,
    /// The request was queued, then pushed out by a newer one (`QueueOrder::NewestFirst`).
    Evicted,
    /// A blocking wait gave up at its timeout.
    TimedOut,
    /// A partitioned limiter is full: the request's partition does not exist yet and there is no
    /// room to create it (no idle partition to evict). Nothing was inserted.
    PartitionsFull,
    /// A user-defined limiter's own reason (the .NET `REASON_PHRASE`).
    Custom(&'static str),
}

impl Reason {
    /// A short human-readable phrase.
    pub const fn phrase(&self) -> &'static str {
        match self {
            Reason::Exhausted => "permits exhausted",
            Reason::ExceedsLimit => "request exceeds the permit limit",
            Reason::Closed => "limiter closed",
            Reason::QueueFull => "queue limit reached",
            Reason::Evicted => "evicted from the queue by a newer request",
            Reason::TimedOut => "timed out waiting for permits",
            Reason::PartitionsFull => "no room for a new partition",
            Reason::Custom(s) => s,
        }
    }
}

/// A request that was not granted: the reason, and for rate limiters how long to wait.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{FixedWindowLimiter, FixedWindowOptions, Limiter, ManualClock, Reason};
///
/// let clock = ManualClock::new();
/// let limiter =
///     FixedWindowLimiter::with_clock(FixedWindowOptions::new(1, Duration::from_secs(10)), &clock)
///         .unwrap();
/// let _lease = limiter.try_acquire(1).unwrap();
/// clock.advance(Duration::from_secs(4));
/// let rejection = limiter.try_acquire(1).unwrap_err();
/// assert_eq!(rejection.reason(), Reason::Exhausted);
/// assert_eq!(rejection.retry_after(), Some(Duration::from_secs(6)));
/// ```
///
/// Two words (16 bytes on a 64-bit target): the wait in nanoseconds as the limiter computed
/// it, and a reference to a `'static` [`Reason`]. The wait becomes a `Duration` only when
/// [`retry_after`](Self::retry_after) is called, so a denial that nobody asks about costs no
/// division, and a denial returns in as few stores as a `Result` of a lease allows. Waits are
/// exact below 2^64 - 1 ns (584 years); a longer one reads as `Duration::MAX` ("not in any
/// useful time"; never shorter than the true wait). A wait is never zero: a zero one given to
/// [`with_retry_after`](Self::with_retry_after) is kept as 1 ns.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rejection {
    /// RetryAfter in nanoseconds; [`NO_WAIT`] for none, [`SATURATED`] for `Duration::MAX`.
    retry_ns: u64,
    reason: &'static Reason,
}

/// A rejection's "no RetryAfter" (a wait is never zero).
const NO_WAIT: u64 = 0;
/// A rejection's RetryAfter of 2^64 - 1 ns or more: `Duration::MAX`.
const SATURATED: u64 = u64::MAX;

impl Rejection {
    /// A rejection for `reason`, with no RetryAfter. The reason is a `'static` reference, so
    /// that a rejection stays two words: write `&Reason::Closed`, or
    /// `&Reason::Custom("CPU too busy")` (a constant expression is promoted to a `static`), or
    /// refer to a `const`/`static` of your own.
    ///
    /// ```
    /// use tollgate::{Reason, Rejection};
    ///
    /// const BUSY: Reason = Reason::Custom("CPU too busy");
    /// let r = Rejection::new(&BUSY);
    /// assert_eq!(r.reason(), BUSY);
    /// assert_eq!(r.retry_after(), None);
    /// assert_eq!(core::mem::size_of::<Rejection>(), 2 * core::mem::size_of::<usize>().max(8));
    /// ```
    pub const fn new(reason: &'static Reason) -> Self {
        Self {
            retry_ns: NO_WAIT,
            reason,
        }
    }

    /// A rejection for `reason` that would succeed after `retry_after` if nothing else happened
    /// (exact below 2^64 - 1 ns; from there on, `Duration::MAX`; a zero wait is kept as 1 ns).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Reason, Rejection};
    ///
    /// let r = Rejection::with_retry_after(&Reason::Exhausted, Duration::from_millis(1500));
    /// assert_eq!(r.retry_after(), Some(Duration::from_millis(1500)));
    /// let r = Rejection::with_retry_after(&Reason::Exhausted, Duration::MAX);
    /// assert_eq!(r.retry_after(), Some(Duration::MAX));
    /// assert_eq!(Rejection::new(&Reason::Closed).retry_after(), None);
    /// ```
    pub const fn with_retry_after(reason: &'static Reason, retry_after: Duration) -> Self {
        let wait = Nanos::from_duration(retry_after);
        Self::after(
            reason,
            if wait.is_zero() {
                Nanos::from_u64(1)
            } else {
                wait
            },
        )
    }

    /// A rejection for `reason` with a RetryAfter of `wait`, which is not zero (a limiter's
    /// denial: no division, and a wait computed in 64 bits is stored as it is).
    #[inline(always)]
    pub(crate) const fn after(reason: &'static Reason, wait: Nanos) -> Self {
        debug_assert!(!wait.is_zero());
        Self {
            retry_ns: wait.saturating_u64(),
            reason,
        }
    }

    /// Why the request was not granted.
    pub const fn reason(&self) -> Reason {
        *self.reason
    }

    /// The shortest wait after which the same request would succeed if nothing else happened
    /// (rounded up to the clock's nanosecond; never zero for a limiter's denial). `None` where
    /// the limiter cannot know (a concurrency limiter), or no wait helps (exceeds limit,
    /// closed).
    pub const fn retry_after(&self) -> Option<Duration> {
        match self.retry_ns {
            NO_WAIT => None,
            SATURATED => Some(Duration::MAX),
            ns => Some(Nanos::from_u64(ns).to_duration()),
        }
    }
}

/// As a struct of the reason and [`retry_after`](Rejection::retry_after).
impl fmt::Debug for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejection")
            .field("reason", &self.reason)
            .field("retry_after", &self.retry_after())
            .finish()
    }
}

/// The reason's [`phrase`](Reason::phrase).
///
/// ```
/// use tollgate::Reason;
///
/// assert_eq!(Reason::QueueFull.to_string(), "queue limit reached");
/// assert_eq!(Reason::Custom("CPU too busy").to_string(), "CPU too busy");
/// ```
impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.phrase())
    }
}

/// [`Reason::QueueFull`] from a wait queue whose limit is 0: the same reason (equal to
/// `Reason::QueueFull` wherever it is compared), told apart by its address so that the message
/// says why there was no room.
pub(crate) static QUEUE_LIMIT_ZERO: Reason = Reason::QueueFull;

/// The reason's phrase; for a queue with a limit of 0, why it had no room.
///
/// ```
/// use tollgate::*;
///
/// // `new` keeps .NET's queue limit of 0: a wait that cannot be granted at once is refused.
/// let l = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
/// let _held = l.try_acquire(1).unwrap();
/// let r = l.acquire_blocking(1, None).unwrap_err();
/// assert_eq!(r.reason(), Reason::QueueFull);
/// assert!(r.to_string().starts_with("queue limit reached: the queue limit is 0"));
/// ```
impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if core::ptr::eq(self.reason, &QUEUE_LIMIT_ZERO) {
            f.write_str(
                "queue limit reached: the queue limit is 0, so a request that cannot be granted \
                 at once is refused (give the options a queue with `with_queue`)",
            )?;
        } else {
            f.write_str(self.reason.phrase())?;
        }
        if let Some(d) = self.retry_after() {
            write!(f, " (retry after {d:?})")?;
        }
        Ok(())
    }
}

impl core::error::Error for Rejection {}

/// With the `defmt` feature: the reason, and RetryAfter in nanoseconds when there is one.
#[cfg(feature = "defmt")]
impl defmt::Format for Rejection {
    fn format(&self, f: defmt::Formatter<'_>) {
        match self.retry_after() {
            Some(d) => defmt::write!(
                f,
                "Rejection {{ reason: {}, retry_after_ns: {=u64} }}",
                self.reason,
                u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
            ),
            None => defmt::write!(f, "Rejection {{ reason: {} }}", self.reason),
        }
    }
}

/// A snapshot of a limiter's counters.
///
/// `total_successful` counts every granted request (0-permit probes included) once its caller
/// has the lease: a queued waiter granted its permits but dropped before it completed is a
/// cancelled request, not counted (its permits go back). `total_failed` counts every rejection
/// returned, whatever its reason, and every waiter failed by eviction or `close()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Statistics {
    /// Permits free now (see [`Limiter::available_permits`](crate::Limiter::available_permits):
    /// behind an oldest-first queue they are the waiters' first).
    pub available_permits: u64,
    /// Permits requested by waiters in the queue.
    pub queued_permits: u64,
    /// Requests granted since creation.
    pub total_successful: u64,
    /// Requests rejected since creation.
    pub total_failed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::size_of;

    /// What `try_acquire` returns stays small: a rejection is a wait and a reason reference
    /// (two words), and the `Result` with a lease four words on a 64-bit target (was six).
    #[test]
    fn a_rejection_is_two_words() {
        assert_eq!(size_of::<Rejection>(), 16);
        // A lease's releaser is never null, so the `Result` keeps its tag in that reference:
        // three words on a 64-bit target (four while a lease's releaser was an `Option`).
        #[cfg(target_pointer_width = "64")]
        assert_eq!(size_of::<Result<Lease<'_>, Rejection>>(), 24);
    }

    // The same on a 32-bit MCU: 16 bytes (was 24), checked where it is built for one.
    #[cfg(target_pointer_width = "32")]
    const _: () = assert!(size_of::<Result<Lease<'_>, Rejection>>() <= 16);

    #[test]
    fn an_unreleased_lease_returns_nothing_and_a_forgotten_one_neither() {
        struct Count(core::sync::atomic::AtomicU32);
        impl Release for Count {
            fn release(&self, permits: u32) {
                self.0
                    .fetch_add(permits, core::sync::atomic::Ordering::Relaxed);
            }
        }
        let c = Count(core::sync::atomic::AtomicU32::new(0));
        assert!(!Lease::unreleased(3).returns_permits());
        drop(Lease::unreleased(3));
        let l = Lease::releasing(2, &c);
        assert!(l.returns_permits());
        drop(l);
        assert_eq!(c.0.load(core::sync::atomic::Ordering::Relaxed), 2);
        assert_eq!(Lease::releasing(5, &c).forget(), 5);
        assert_eq!(c.0.load(core::sync::atomic::Ordering::Relaxed), 2);
        let r = Rejection::with_retry_after(&Reason::Exhausted, Duration::from_nanos(u64::MAX));
        assert_eq!(r.retry_after(), Some(Duration::MAX)); // 2^64 - 1 ns and on: saturated
        let r = Rejection::with_retry_after(&Reason::Exhausted, Duration::from_nanos(u64::MAX - 1));
        assert_eq!(r.retry_after(), Some(Duration::from_nanos(u64::MAX - 1)));
        let r = Rejection::with_retry_after(&Reason::Exhausted, Duration::ZERO);
        assert_eq!(r.retry_after(), Some(Duration::from_nanos(1))); // never zero
        let r = Rejection::after(&Reason::Exhausted, Nanos::from_u128(1 << 70));
        assert_eq!(r.retry_after(), Some(Duration::MAX));
    }
}
