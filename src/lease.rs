//! What an acquisition returns: a [`Lease`] on success, a [`Rejection`] otherwise; and the
//! [`Statistics`] every limiter keeps.

use crate::nanos::Nanos;
use core::fmt;
use core::time::Duration;

/// Something that takes permits back, and settles leases whose true cost is known only after
/// they ran: implemented by every limiter (the concurrency limiter's permits return when a lease
/// ends; a rate limiter's `release` does nothing, its permits come back with time), and by any
/// user-defined limiter.
///
/// A [`Lease`] calls [`release`](Release::release) exactly once, when it is dropped, if it
/// [returns permits](Lease::returns_permits). Calling it by hand returns permits that no lease
/// holds; the built-in limiters never let the available count exceed the limit, but the
/// accounting is then the caller's responsibility.
pub trait Release {
    /// Returns `permits` to the limiter.
    fn release(&self, permits: u32);

    /// Settles a lease as `s` says ([`Settlement`]): gives back `s.held - s.actual` where the
    /// algorithm can, or takes `s.actual - s.held` more, into debt if they are not there, as
    /// long as the limiter then owes at most `s.max_debt` permits (and no more than its own
    /// bound): past that, [`SettleError::DebtLimit`] and nothing is taken. Called by
    /// [`Lease::settle`] and [`Lease::settle_within`], never with `s.actual == s.held`.
    ///
    /// The default answers [`SettleError::Unsupported`] and changes nothing: a user-defined
    /// limiter settles only if it says how.
    fn settle(&self, s: Settlement) -> Result<(), SettleError> {
        let _ = s;
        Err(SettleError::Unsupported)
    }

    /// Returns the `permits` of a lease whose stamp is the low [`STAMP_BITS`] bits of
    /// `stamp` (the bits above are the lease's own: mask them): what a lease's drop calls. The
    /// default is [`release`](Self::release); a limiter that learns from its leases
    /// ([`AdaptiveLimiter`](crate::adaptive::AdaptiveLimiter)) reads the grant's time and the
    /// call's [`Outcome`] in it.
    #[inline]
    fn release_stamped(&self, permits: u32, stamp: u64) {
        let _ = stamp;
        self.release(permits);
    }

    /// Hears how the call made under a lease that keeps `stamp` went ([`Lease::dropped`],
    /// [`Lease::ignore`]); answers the stamp the lease keeps from now on. The default keeps
    /// it: a limiter that does not learn from its leases hears nothing.
    fn report(&self, stamp: u64, outcome: Outcome) -> u64 {
        let _ = outcome;
        stamp
    }
}

/// How the call made under a lease went, for a limiter that learns from it (an
/// [`AdaptiveLimiter`](crate::adaptive::AdaptiveLimiter)); other limiters ignore it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Outcome {
    /// It succeeded (the default): its latency is a measurement of the server.
    Success,
    /// The server was overloaded (a timeout, a 503, an upstream refusal).
    Dropped,
    /// Nothing to learn about capacity (a client error): no sample.
    Ignored,
}

/// What a settle asks of a limiter ([`Release::settle`]): a lease of `held` permits, granted
/// at `stamp` (the limiter's own mark of when and where they were counted, as the lease keeps
/// it: its low [`STAMP_BITS`] bits), to be settled to `actual`, leaving the limiter owing at
/// most `max_debt` permits.
///
/// ```
/// use tollgate::Settlement;
///
/// let s = Settlement::new(10, 4, 0);
/// assert_eq!((s.held, s.actual, s.max_debt), (10, 4, u32::MAX));
/// assert_eq!(s.within(3).max_debt, 3);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Settlement {
    /// The permits the lease holds.
    pub held: u32,
    /// The permits it settles to.
    pub actual: u32,
    /// The limiter's stamp, as the lease keeps it.
    pub stamp: u64,
    /// The most the limiter may owe after it (`u32::MAX`: its own bound).
    pub max_debt: u32,
}

impl Settlement {
    /// `held` permits granted at `stamp`, settled to `actual`, within the limiter's own debt
    /// bound.
    pub const fn new(held: u32, actual: u32, stamp: u64) -> Self {
        Self {
            held,
            actual,
            stamp,
            max_debt: u32::MAX,
        }
    }

    /// The same settle, owing at most `max_debt` permits after it.
    pub const fn within(self, max_debt: u32) -> Self {
        Self { max_debt, ..self }
    }
}

/// Settles `s` through `limiter` (none: [`SettleError::Unsupported`]) if it changes the count:
/// on success a lease's `permits` become `s.actual`; on a refusal they stay.
pub(crate) fn settle_count<R: Release + ?Sized>(
    permits: &mut u32,
    s: Settlement,
    limiter: Option<&R>,
) -> Result<(), SettleError> {
    if s.actual != s.held {
        limiter.ok_or(SettleError::Unsupported)?.settle(s)?;
        *permits = s.actual;
    }
    Ok(())
}

/// Why [`Lease::settle`] changed nothing.
///
/// ```
/// use tollgate::{Lease, SettleError};
///
/// // A lease made by hand has no limiter to settle with.
/// let mut lease = Lease::unreleased(3);
/// assert_eq!(lease.settle(1), Err(SettleError::Unsupported));
/// assert_eq!(lease.permits(), 3);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SettleError {
    /// The lease's limiter cannot settle: a lease built by hand
    /// ([`Lease::unreleased`]), a user-defined limiter that does not implement
    /// [`Release::settle`], or a keyed limiter's lease (settle those through the limiter,
    /// with the key).
    Unsupported,
    /// Taking the extra permits would put the limiter deeper in debt than its bound allows
    /// (the options' debt limit, one `limit` by default): nothing was taken.
    DebtLimit,
}

impl SettleError {
    /// A short human-readable phrase.
    pub const fn phrase(&self) -> &'static str {
        match self {
            SettleError::Unsupported => "this lease's limiter cannot settle",
            SettleError::DebtLimit => "settling would exceed the limiter's debt limit",
        }
    }
}

/// The error's [`phrase`](SettleError::phrase).
impl fmt::Display for SettleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.phrase())
    }
}

impl core::error::Error for SettleError {}

/// Permits held: returned on drop to the limiter that granted them, exactly once; settled to
/// their true cost with [`settle`](Self::settle) when that is known only afterwards.
///
/// Rate-limiter leases (token bucket, fixed and sliding window, GCRA...) return nothing when
/// dropped: their permits come back with time, as in .NET. A concurrency lease gives its
/// permits back when dropped.
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
    /// The permits (low 32 bits) and the mark (high 32 bits): [`RETURNS`] if dropping the
    /// lease calls `limiter.release` (a test and a branch, never an indirect call to a no-op
    /// for a rate limiter's lease), and the limiter's mark of when and where the permits were
    /// counted (its tick, segment, window or log instant, to [`STAMP_BITS`] bits), for
    /// [`settle`](Self::settle).
    ///
    /// One word on a 64-bit target: a lease is written with one store, and moving it (a
    /// `Result` returned, then moved) reads it back whole, which a CPU forwards from its store
    /// buffer; two 32-bit halves read back as one word cannot be forwarded, a stall of some
    /// ten cycles on every grant (`benches/core-cost-notes.md`). Two words on a 32-bit target
    /// (`permits`, `mark`), where each is a register and one 64-bit word would cost shifts
    /// across two.
    #[cfg(target_pointer_width = "64")]
    counts: u64,
    #[cfg(not(target_pointer_width = "64"))]
    permits: u32,
    #[cfg(not(target_pointer_width = "64"))]
    mark: u32,
    /// The limiter that granted the permits — [`NOTHING`] for a lease made by hand — so that
    /// a `Result<Lease, Rejection>` keeps its tag in this reference's niche.
    limiter: &'a (dyn Release + Sync),
}

/// How many low bits of a limiter's stamp a lease keeps (see [`Lease::settling`]): a limiter
/// that needs more (a tick, a segment) finds them from its own state when it settles, which is
/// exact for any lease settled within 2^31 of its ticks (24 days of 1 ms segments).
pub const STAMP_BITS: u32 = 31;

/// The tick whose low [`STAMP_BITS`] bits are `stamp`, at or before `reference` (the latest
/// tick a lease settled now can have been granted at): exact for a lease granted within
/// 2^31 ticks of `reference`.
#[inline]
pub(crate) const fn tick_of_stamp(reference: u64, stamp: u64) -> u64 {
    reference.saturating_sub(reference.wrapping_sub(stamp) & STAMP_MASK)
}

/// A lease's mark: the flag "returns permits when dropped".
const RETURNS: u32 = 1 << STAMP_BITS;

/// The bits of a stamp a lease keeps: its low [`STAMP_BITS`].
pub(crate) const STAMP_MASK: u64 = (1 << STAMP_BITS) - 1;

/// A stamp as a lease keeps it.
#[inline(always)]
const fn mark_of(stamp: u64) -> u32 {
    (stamp & STAMP_MASK) as u32
}

/// The limiter of a lease made by hand: nothing to release, nothing to settle with (a
/// one-byte static, so that its address is its own).
struct Nothing(#[allow(dead_code)] u8);

impl Release for Nothing {
    fn release(&self, _: u32) {}
}

static NOTHING: Nothing = Nothing(0);

/// The limiter of a lease from a limiter that limits nothing ([`NoopLimiter`](crate::NoopLimiter)):
/// every settle succeeds, as there is nothing to account.
struct Free(#[allow(dead_code)] u8);

impl Release for Free {
    fn release(&self, _: u32) {}
    fn settle(&self, _: Settlement) -> Result<(), SettleError> {
        Ok(())
    }
}

static FREE: Free = Free(0);

/// A lease's `counts` on a 64-bit target: `permits` in the low 32 bits, `mark` above.
#[cfg(target_pointer_width = "64")]
#[inline(always)]
const fn pack(permits: u32, mark: u32) -> u64 {
    permits as u64 | (mark as u64) << 32
}

/// A [`Lease`] of `permits` with `mark`, from `limiter`: the struct itself, in the layout of
/// the target (a macro, not a function: one more call layer, even inlined, kept the compiler
/// from inlining a firmware program's release: +28 bytes).
macro_rules! lease {
    ($permits:expr, $mark:expr, $limiter:expr) => {{
        #[cfg(target_pointer_width = "64")]
        let lease = Lease {
            counts: pack($permits, $mark),
            limiter: $limiter,
        };
        #[cfg(not(target_pointer_width = "64"))]
        let lease = Lease {
            permits: $permits,
            mark: $mark,
            limiter: $limiter,
        };
        lease
    }};
}

impl<'a> Lease<'a> {
    /// A lease whose permits go back to `releaser` when it is dropped (and which settles
    /// through it: [`Release::settle`]).
    pub fn releasing(permits: u32, releaser: &'a (dyn Release + Sync)) -> Self {
        lease!(permits, RETURNS, releaser)
    }

    /// A lease whose permits go back to `releaser` when it is dropped, with the limiter's
    /// `stamp` (its low [`STAMP_BITS`] bits are kept), which its drop passes back
    /// ([`Release::release_stamped`]) and [`settle`](Self::settle) and the outcome reports use.
    #[inline(always)]
    pub fn releasing_stamped(permits: u32, stamp: u64, releaser: &'a (dyn Release + Sync)) -> Self {
        lease!(permits, RETURNS | mark_of(stamp), releaser)
    }

    /// A lease of a limiter whose permits come back with time (a rate limiter): dropping it
    /// gives nothing back; [`settle`](Self::settle) goes to `limiter`, with `stamp`, the
    /// limiter's own mark of when and where the permits were counted (its low
    /// [`STAMP_BITS`] bits are kept).
    #[inline(always)]
    pub fn settling(permits: u32, stamp: u64, limiter: &'a (dyn Release + Sync)) -> Self {
        lease!(permits, mark_of(stamp), limiter)
    }

    /// A lease that returns nothing when dropped and refers to no limiter, with its limiter's
    /// `stamp`: settled through the limiter ([`settle_with`](Self::settle_with)), not by
    /// itself (a limiter without a queue: its firmware image links no settle code it does
    /// not call).
    #[inline(always)]
    pub(crate) const fn detached(permits: u32, stamp: u64) -> Self {
        lease!(permits, mark_of(stamp), &NOTHING)
    }

    /// A lease that returns nothing when dropped and has no limiter to settle with (a lease
    /// made by hand: [`settle`](Self::settle) answers [`SettleError::Unsupported`]).
    pub const fn unreleased(permits: u32) -> Self {
        lease!(permits, 0, &NOTHING)
    }

    /// A lease of a limiter that limits nothing: returns nothing, and every settle succeeds.
    pub(crate) const fn free(permits: u32) -> Self {
        lease!(permits, 0, &FREE)
    }

    /// The number of permits this lease holds (after a [`settle`](Self::settle), what it was
    /// settled to).
    pub const fn permits(&self) -> u32 {
        #[cfg(target_pointer_width = "64")]
        return self.counts as u32;
        #[cfg(not(target_pointer_width = "64"))]
        return self.permits;
    }

    /// The mark: [`RETURNS`] and the stamp's low bits.
    #[inline(always)]
    const fn mark(&self) -> u32 {
        #[cfg(target_pointer_width = "64")]
        return (self.counts >> 32) as u32;
        #[cfg(not(target_pointer_width = "64"))]
        return self.mark;
    }

    /// Sets the permits and the mark.
    #[inline(always)]
    fn set(&mut self, permits: u32, mark: u32) {
        #[cfg(target_pointer_width = "64")]
        {
            self.counts = pack(permits, mark);
        }
        #[cfg(not(target_pointer_width = "64"))]
        {
            (self.permits, self.mark) = (permits, mark);
        }
    }

    #[inline(always)]
    fn set_mark(&mut self, mark: u32) {
        self.set(self.permits(), mark);
    }

    /// Settles the count by `s` through `limiter` ([`settle_count`]).
    fn settle_counted<R: Release + ?Sized>(
        &mut self,
        s: Settlement,
        limiter: &R,
    ) -> Result<(), SettleError> {
        let mut permits = self.permits();
        let settled = settle_count(&mut permits, s, Some(limiter));
        self.set(permits, self.mark());
        settled
    }

    /// Whether dropping this lease returns permits to a limiter.
    #[inline(always)]
    pub const fn returns_permits(&self) -> bool {
        self.mark() & RETURNS != 0
    }

    /// The limiter's stamp, as kept.
    const fn stamp(&self) -> u64 {
        self.mark() as u64 & STAMP_MASK
    }

    /// Settles this lease, taken for an estimate, to its true cost `actual`, once that is
    /// known (the tokens an LLM call used, the bytes a response carried):
    /// - **`actual` below the lease's permits**: the difference goes back where the algorithm
    ///   can express it, as if it had never been taken: a token bucket gets its tokens back
    ///   (never above its limit), GCRA and the leaky buckets move their theoretical arrival
    ///   time back (never before the present), the windows and the log take the permits out
    ///   of the window, segment or entry they were counted in if that is still current (else
    ///   nothing comes back), a concurrency limiter takes them back at once. Waiters are served
    ///   as after a release.
    /// - **`actual` above**: the extra is taken even when it is not there, into **debt** where
    ///   the limiter keeps one: later requests wait until time repays it, and their RetryAfter
    ///   counts it. Past the limiter's debt bound, [`SettleError::DebtLimit`] and nothing is
    ///   taken. The bound is one limit for the token bucket, the windows, the sliding log and
    ///   the concurrency limiter (less only where a count field could not hold twice the
    ///   limit), one burst past the tolerance for GCRA and the leaky buckets; a
    ///   `KeyedLimiter`'s sliding counter and the Redis sliding window and counter keep no
    ///   debt (a debit only where it fits). A debit is counted at the settle's instant.
    ///
    /// On success the lease holds `actual` permits (a concurrency lease then releases `actual`
    /// when dropped). A lease can be settled more than once; each settle is from what it holds.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// // 10,000 tokens a minute; a call reserves 1,000 and used 312.
    /// let budget = TokenBucketLimiter::with_clock(
    ///     TokenBucketOptions::new(10_000, 10_000, Duration::from_secs(60)), &clock).unwrap();
    /// let mut lease = budget.try_acquire(1_000).unwrap();
    /// assert_eq!(budget.available_permits(), 9_000);
    /// lease.settle(312).unwrap();
    /// assert_eq!((lease.permits(), budget.available_permits()), (312, 9_688));
    /// // The next call used 1,500 of its 1,000.
    /// let mut lease = budget.try_acquire(1_000).unwrap();
    /// lease.settle(1_500).unwrap();
    /// assert_eq!(budget.available_permits(), 9_688 - 1_500);
    /// ```
    pub fn settle(&mut self, actual: u32) -> Result<(), SettleError> {
        self.settle_within(actual, u32::MAX)
    }

    /// [`settle`](Self::settle), with a tighter bound on debt: a debit that would leave the
    /// limiter owing more than `max_debt` permits is refused with
    /// [`SettleError::DebtLimit`] and takes nothing (the limiter's own bound, one limit by
    /// default, still applies). A refund is never refused. How much a limiter "owes" is what
    /// it has granted past what its algorithm had: tokens below zero for the token bucket,
    /// slots past the tolerance for GCRA and the leaky buckets, a count past the limit for
    /// the windows and the sliding log, permits held past the limit for the concurrency
    /// limiter. The bound is the caller's, per settle: it costs the limiter no memory.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let budget = TokenBucketLimiter::with_clock(
    ///     TokenBucketOptions::new(1_000, 1_000, Duration::from_secs(60)), &clock).unwrap();
    /// let mut lease = budget.try_acquire(900).unwrap();
    /// // Used 1,200: that would owe 200, more than this caller lets it owe.
    /// assert_eq!(lease.settle_within(1_200, 50), Err(SettleError::DebtLimit));
    /// assert_eq!((lease.permits(), budget.available_permits()), (900, 100));
    /// lease.settle_within(1_040, 50).unwrap(); // owes 40
    /// assert_eq!(budget.available_permits(), 0);
    /// ```
    pub fn settle_within(&mut self, actual: u32, max_debt: u32) -> Result<(), SettleError> {
        let s = Settlement::new(self.permits(), actual, self.stamp()).within(max_debt);
        self.settle_counted(s, self.limiter)
    }

    /// [`settle`](Self::settle) through `limiter`, which must be the limiter that granted
    /// this lease: how the lease of a limiter without a queue ([`NoQueue`](crate::NoQueue)),
    /// which refers to no limiter, is settled (its limiter's `settle` method calls this). With
    /// another limiter, the permits are accounted to the wrong one.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let opts = TokenBucketOptions::new(100, 100, Duration::from_secs(1));
    /// let bucket = TokenBucketLimiter::without_queue(opts, ManualClock::new()).unwrap();
    /// let mut lease = bucket.try_acquire(60).unwrap();
    /// assert_eq!(lease.settle(10), Err(SettleError::Unsupported)); // refers to no limiter
    /// lease.settle_with(&bucket, 10).unwrap();
    /// assert_eq!(bucket.available_permits(), 90);
    /// ```
    pub fn settle_with<R: Release + ?Sized>(
        &mut self,
        limiter: &R,
        actual: u32,
    ) -> Result<(), SettleError> {
        self.settle_with_within(limiter, actual, u32::MAX)
    }

    /// [`settle_with`](Self::settle_with) owing at most `max_debt` permits after it (see
    /// [`settle_within`](Self::settle_within)).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let opts = TokenBucketOptions::new(100, 100, Duration::from_secs(1));
    /// let bucket = TokenBucketLimiter::without_queue(opts, ManualClock::new()).unwrap();
    /// let mut lease = bucket.try_acquire(100).unwrap();
    /// assert_eq!(lease.settle_with_within(&bucket, 120, 10), Err(SettleError::DebtLimit));
    /// lease.settle_with_within(&bucket, 110, 10).unwrap();
    /// ```
    pub fn settle_with_within<R: Release + ?Sized>(
        &mut self,
        limiter: &R,
        actual: u32,
        max_debt: u32,
    ) -> Result<(), SettleError> {
        let s = Settlement::new(self.permits(), actual, self.stamp()).within(max_debt);
        self.settle_counted(s, limiter)
    }

    /// Tells the lease's limiter that the call made under it was dropped for overload (a
    /// timeout, a 503, a refusal from upstream): an
    /// [`AdaptiveLimiter`](crate::adaptive::AdaptiveLimiter) backs off; any other limiter
    /// ignores it. The report goes with the lease's release.
    ///
    /// ```
    /// use tollgate::{Chain, Limiter, ManualClock, TokenBucketLimiter, TokenBucketOptions};
    /// use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions, Aimd};
    /// use core::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let rate = TokenBucketLimiter::with_clock(TokenBucketOptions::per_second(100), &clock).unwrap();
    /// let opts = AdaptiveOptions::new(10)
    ///     .with_window(Duration::from_millis(1), 1)
    ///     .with_algorithm(Aimd::new());
    /// let adaptive = AdaptiveLimiter::with_clock(opts, &clock).unwrap();
    /// let chain = Chain::new((&rate, &adaptive));
    /// let mut lease = chain.try_acquire(1).unwrap();
    /// clock.advance(Duration::from_millis(2));
    /// lease.dropped(); // the call timed out
    /// drop(lease);
    /// assert_eq!(adaptive.limit(), 9); // AIMD backed off: 10 × 0.9
    /// ```
    pub fn dropped(&mut self) {
        self.report(Outcome::Dropped);
    }

    /// Tells the lease's limiter that the call made under it says nothing about capacity (a
    /// client error): an adaptive limiter does not sample it.
    pub fn ignore(&mut self) {
        self.report(Outcome::Ignored);
    }

    /// [`Release::report`], keeping the stamp it answers.
    fn report(&mut self, outcome: Outcome) {
        let stamp = self.limiter.report(self.stamp(), outcome);
        self.set_mark(self.mark() & RETURNS | mark_of(stamp));
    }

    /// Ends the lease without returning its permits: they stay taken for good (the limit shrinks
    /// by that many until [`Release::release`] gives them back). Returns the permit count.
    pub fn forget(mut self) -> u32 {
        self.set_mark(self.mark() & !RETURNS);
        self.permits()
    }

    /// The lease's parts, consumed without releasing anything: its permits, its stamp, and
    /// whether it returns them (what an owned or a partition's lease is built from).
    pub(crate) fn into_parts(mut self) -> (u32, u64, bool) {
        let returns = self.returns_permits();
        self.set_mark(self.mark() & !RETURNS);
        (self.permits(), self.stamp(), returns)
    }
}

impl Drop for Lease<'_> {
    #[inline]
    fn drop(&mut self) {
        if self.returns_permits() {
            // The mark as it is (its top bit is the lease's own flag): no masking on the
            // release of every lease, for the one limiter that reads the stamp.
            self.limiter
                .release_stamped(self.permits(), u64::from(self.mark()));
        }
    }
}

impl fmt::Debug for Lease<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("permits", &self.permits())
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
    /// Whether dropping the lease calls `limiter.release`.
    returns: bool,
    /// The limiter's mark of when and where the permits were counted (see [`Lease`]).
    stamp: u64,
    limiter: Option<alloc::sync::Arc<dyn Release + Send + Sync>>,
}

#[cfg(feature = "alloc")]
impl OwnedLease {
    /// A lease whose permits go back to `releaser` when it is dropped (and which settles
    /// through it).
    pub fn releasing(permits: u32, releaser: alloc::sync::Arc<dyn Release + Send + Sync>) -> Self {
        Self {
            permits,
            returns: true,
            stamp: 0,
            limiter: Some(releaser),
        }
    }

    /// A lease whose permits go back to `releaser` when it is dropped, with the limiter's
    /// `stamp` (see [`Lease::releasing_stamped`]).
    pub fn releasing_stamped(
        permits: u32,
        stamp: u64,
        releaser: alloc::sync::Arc<dyn Release + Send + Sync>,
    ) -> Self {
        Self {
            permits,
            returns: true,
            stamp: stamp & STAMP_MASK,
            limiter: Some(releaser),
        }
    }

    /// A lease of a limiter whose permits come back with time: dropping it gives nothing
    /// back; [`settle`](Self::settle) goes to `limiter` with `stamp` (see
    /// [`Lease::settling`]).
    pub fn settling(
        permits: u32,
        stamp: u64,
        limiter: alloc::sync::Arc<dyn Release + Send + Sync>,
    ) -> Self {
        Self {
            permits,
            returns: false,
            stamp,
            limiter: Some(limiter),
        }
    }

    /// The owned form of `lease`, with `limiter` the limiter it came from.
    pub(crate) fn from_lease(
        lease: Lease<'_>,
        limiter: alloc::sync::Arc<dyn Release + Send + Sync>,
    ) -> Self {
        let (permits, stamp, returns) = lease.into_parts();
        Self {
            permits,
            returns,
            stamp,
            limiter: Some(limiter),
        }
    }

    /// A lease that returns nothing when dropped and has nothing to settle with.
    pub const fn unreleased(permits: u32) -> Self {
        Self {
            permits,
            returns: false,
            stamp: 0,
            limiter: None,
        }
    }

    /// The number of permits this lease holds.
    pub const fn permits(&self) -> u32 {
        self.permits
    }

    /// Whether dropping this lease returns permits to a limiter.
    pub const fn returns_permits(&self) -> bool {
        self.returns
    }

    /// [`Lease::settle`]: settles this lease to its true cost `actual`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::*;
    ///
    /// let pool = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(8)).unwrap());
    /// let mut lease = pool.try_acquire_owned(4).unwrap();
    /// lease.settle(1).unwrap(); // three permits back at once
    /// assert_eq!(pool.available_permits(), 7);
    /// drop(lease);
    /// assert_eq!(pool.available_permits(), 8);
    /// ```
    pub fn settle(&mut self, actual: u32) -> Result<(), SettleError> {
        self.settle_within(actual, u32::MAX)
    }

    /// [`Lease::settle_within`]: settles this lease to `actual`, owing at most `max_debt`
    /// permits after it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::*;
    ///
    /// let pool = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(8)).unwrap());
    /// let mut lease = pool.try_acquire_owned(8).unwrap();
    /// assert_eq!(lease.settle_within(10, 1), Err(SettleError::DebtLimit)); // would owe 2
    /// lease.settle_within(9, 1).unwrap();
    /// ```
    pub fn settle_within(&mut self, actual: u32, max_debt: u32) -> Result<(), SettleError> {
        let s = Settlement::new(self.permits, actual, self.stamp).within(max_debt);
        settle_count(&mut self.permits, s, self.limiter.as_deref())
    }

    /// [`Lease::dropped`]: the call made under this lease was dropped for overload.
    pub fn dropped(&mut self) {
        self.report(Outcome::Dropped);
    }

    /// [`Lease::ignore`]: the call made under this lease says nothing about capacity.
    pub fn ignore(&mut self) {
        self.report(Outcome::Ignored);
    }

    fn report(&mut self, outcome: Outcome) {
        if let Some(l) = &self.limiter {
            self.stamp = l.report(self.stamp, outcome) & STAMP_MASK;
        }
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
        self.returns = false;
        self.permits
    }
}

#[cfg(feature = "alloc")]
impl Drop for OwnedLease {
    fn drop(&mut self) {
        if self.returns {
            if let Some(r) = &self.limiter {
                r.release_stamped(self.permits, self.stamp);
            }
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
    /// (two words), and the `Result` with a lease four words on a 64-bit target.
    #[test]
    fn a_rejection_is_two_words() {
        assert_eq!(size_of::<Rejection>(), 16);
        // A lease's limiter is never null, so the `Result` keeps its tag in that reference:
        // three words on a 64-bit target (the limiter, and the count beside the stamp a settle
        // needs and the release flag).
        #[cfg(target_pointer_width = "64")]
        assert_eq!(size_of::<Result<Lease<'_>, Rejection>>(), 24);
    }

    // The same on a 32-bit MCU: 16 bytes, checked where it is built for one.
    #[cfg(target_pointer_width = "32")]
    const _: () = assert!(size_of::<Result<Lease<'_>, Rejection>>() <= 16);

    /// The permits and the mark share one word on a 64-bit target: every permit count and
    /// every stamp survive construction, a settle (which changes the count and keeps the
    /// stamp and the release flag), and the drop, which hands both back whole.
    #[test]
    fn the_count_and_the_mark_keep_apart_in_one_word() {
        use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
        /// What the lease handed back: `(permits, stamp)` of the last release and of the last
        /// settle (`held`, `actual` packed), `u64::MAX` for none.
        struct Seen([AtomicU64; 4]);
        impl Seen {
            fn take(&self, i: usize) -> u64 {
                self.0[i].swap(u64::MAX, Relaxed)
            }
        }
        impl Release for Seen {
            fn release(&self, _: u32) {
                unreachable!("a lease's drop calls release_stamped")
            }
            fn release_stamped(&self, permits: u32, stamp: u64) {
                self.0[0].store(u64::from(permits), Relaxed);
                self.0[1].store(stamp, Relaxed);
            }
            fn settle(&self, s: Settlement) -> Result<(), SettleError> {
                self.0[2].store(u64::from(s.held) << 32 | u64::from(s.actual), Relaxed);
                self.0[3].store(s.stamp, Relaxed);
                Ok(())
            }
        }
        let seen = Seen([const { AtomicU64::new(u64::MAX) }; 4]);
        for permits in [0, 1, 7, u32::MAX - 1, u32::MAX] {
            for stamp in [0, 1, STAMP_MASK - 1, STAMP_MASK, u64::MAX] {
                let kept = stamp & STAMP_MASK;
                let mut l = Lease::releasing_stamped(permits, stamp, &seen);
                assert_eq!(
                    (l.permits(), l.stamp(), l.returns_permits()),
                    (permits, kept, true)
                );
                let actual = permits ^ 0x5555_5555;
                l.settle(actual).unwrap();
                assert_eq!(seen.take(2), u64::from(permits) << 32 | u64::from(actual));
                assert_eq!(seen.take(3), kept);
                assert_eq!(
                    (l.permits(), l.stamp(), l.returns_permits()),
                    (actual, kept, true)
                );
                drop(l);
                assert_eq!(seen.take(0), u64::from(actual));
                assert_eq!(seen.take(1), u64::from(RETURNS) | kept);

                let l = Lease::settling(permits, stamp, &seen);
                assert_eq!(
                    (l.permits(), l.stamp(), l.returns_permits()),
                    (permits, kept, false)
                );
                assert_eq!(l.into_parts(), (permits, kept, false));
                assert_eq!(seen.take(0), u64::MAX, "nothing released");
            }
        }
    }

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
