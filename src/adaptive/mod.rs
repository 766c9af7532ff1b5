//! Adaptive concurrency: a concurrency limit that finds the server's capacity by itself.
//!
//! An [`AdaptiveLimiter`] is a [`ConcurrencyLimiter`] whose limit moves. Each lease, when it
//! ends, reports its latency (timed on the limiter's clock from its grant: the user reads no
//! clock) and its outcome: a success, a drop (overload: a timeout, a 503, a refusal from
//! upstream: [`AdaptiveLease::dropped`]), or nothing to learn from (a client error:
//! [`AdaptiveLease::ignore`]). The samples gather into windows without a lock (a window closes
//! once it lasted [`AdaptiveOptions::window`] and holds [`AdaptiveOptions::min_samples`]); at
//! each window's end its [`Algorithm`] — [`Aimd`], [`Vegas`], Envoy's [`Gradient`] or
//! Netflix's [`Gradient2`], pure integer functions, `no_std` — computes the next limit within
//! the bounds.
//!
//! The limit applies as a [`ConcurrencyLimiter`]'s does: the permits available and the
//! permits held are one atomic word, so no acquisition ever takes a limiter past the limit of
//! its instant, and a lowered limit admits nobody until enough leases have ended (their
//! permits repay what the cut took first).
//!
//! ```
//! use core::time::Duration;
//! use tollgate::ManualClock;
//! use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions, Aimd};
//!
//! let clock = ManualClock::new();
//! let opts = AdaptiveOptions::new(4)
//!     .with_bounds(1, 100)
//!     .with_window(Duration::from_millis(100), 4)
//!     .with_algorithm(Aimd::new());
//! let limiter = AdaptiveLimiter::with_clock(opts, &clock).unwrap();
//! // Four calls that all succeed in 10 ms, with the limit in full use: +1.
//! let leases: Vec<_> = (0..4).map(|_| limiter.try_acquire(1).unwrap()).collect();
//! assert!(limiter.try_acquire(1).is_err()); // 4 in flight: the limit
//! clock.advance(Duration::from_millis(100));
//! drop(leases);
//! assert_eq!(limiter.limit(), 5);
//! // A window with a drop: × 0.9.
//! let mut leases: Vec<_> = (0..4).map(|_| limiter.try_acquire(1).unwrap()).collect();
//! leases[0].dropped(); // the upstream answered 503
//! clock.advance(Duration::from_millis(100));
//! drop(leases);
//! assert_eq!(limiter.limit(), 4);
//! ```

mod algorithm;
mod window;

pub use algorithm::{Aimd, Algorithm, Gradient, Gradient2, Vegas, WindowSummary};

use core::time::Duration;

use crate::clock::Clock;
use crate::concurrency::{ConcurrencyLimiter, ConcurrencyOptions};
pub use crate::lease::Outcome;
use crate::lease::{Lease, Rejection, Release, SettleError, Statistics};
use crate::limiter::Limiter;
use crate::options::{OptionsError, QueueOrder};
use crate::wait::Lock;
use window::Sampler;

/// An [`AdaptiveLimiter`]'s configuration: its bounds, its windows, its algorithm and its wait
/// queue.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{OptionsError, QueueOrder};
/// use tollgate::adaptive::{AdaptiveOptions, Vegas};
///
/// let opts = AdaptiveOptions::new(20)
///     .with_bounds(5, 500)
///     .with_window(Duration::from_secs(1), 20)
///     .with_algorithm(Vegas::new())
///     .with_queue(100, QueueOrder::OldestFirst);
/// assert_eq!(opts.validate(), Ok(()));
/// assert_eq!(AdaptiveOptions::new(20).with_bounds(30, 40).validate(), Err(OptionsError::LimitBounds));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveOptions {
    /// The limit at creation.
    pub initial_limit: u32,
    /// The limit never falls below this (at least 1). Default 1.
    pub min_limit: u32,
    /// The limit never rises above this. Default 1,000, or the initial limit if larger.
    pub max_limit: u32,
    /// A window of samples lasts at least this long. Default 1 s.
    pub window: Duration,
    /// ...and holds at least this many samples (0 counts as 1). Default 10.
    pub min_samples: u32,
    /// How the limit moves at the end of each window. Default [`Aimd::new`].
    pub algorithm: Algorithm,
    /// Permits that may wait in the queue (for [`acquire`](AdaptiveLimiter::acquire)).
    /// Default 0, as a [`ConcurrencyOptions::new`]'s.
    pub queue_limit: u32,
    /// The order queued requests are served in. Default oldest first.
    pub queue_order: QueueOrder,
}

impl AdaptiveOptions {
    /// Options starting at `initial_limit`, with the defaults above.
    pub const fn new(initial_limit: u32) -> Self {
        Self {
            initial_limit,
            min_limit: 1,
            max_limit: if initial_limit > 1_000 {
                initial_limit
            } else {
                1_000
            },
            window: Duration::from_secs(1),
            min_samples: 10,
            algorithm: Algorithm::Aimd(Aimd::new()),
            queue_limit: 0,
            queue_order: QueueOrder::OldestFirst,
        }
    }

    /// The same options with the limit kept within `min..=max`.
    pub const fn with_bounds(self, min: u32, max: u32) -> Self {
        Self {
            min_limit: min,
            max_limit: max,
            ..self
        }
    }

    /// The same options with windows of at least `window` and `min_samples` samples.
    pub const fn with_window(self, window: Duration, min_samples: u32) -> Self {
        Self {
            window,
            min_samples,
            ..self
        }
    }

    /// The same options with `algorithm` moving the limit.
    pub fn with_algorithm(self, algorithm: impl Into<Algorithm>) -> Self {
        Self {
            algorithm: algorithm.into(),
            ..self
        }
    }

    /// Checks the options: the bounds at least 1 and in order around the initial limit
    /// ([`OptionsError::LimitBounds`]), within what a concurrency limiter holds on this target
    /// ([`OptionsError::LimitTooLarge`]), and a window longer than zero
    /// ([`OptionsError::ZeroPeriod`]).
    pub const fn validate(&self) -> Result<(), OptionsError> {
        if self.min_limit == 0
            || self.min_limit > self.initial_limit
            || self.initial_limit > self.max_limit
        {
            return Err(OptionsError::LimitBounds);
        }
        if let Err(e) = ConcurrencyOptions::new(self.max_limit).validate() {
            return Err(e);
        }
        if self.window.is_zero() {
            return Err(OptionsError::ZeroPeriod);
        }
        Ok(())
    }

    /// The options of the concurrency limiter at `limit`.
    const fn concurrency(&self, limit: u32) -> ConcurrencyOptions {
        ConcurrencyOptions::new(limit).with_queue(self.queue_limit, self.queue_order)
    }
}

crate::options::with_queue!(
    AdaptiveOptions,
    "tollgate::adaptive::AdaptiveOptions::new(10)"
);

/// A concurrency limiter whose limit finds the server's capacity (see the
/// [module docs](self)): leases that release on drop and report how their call went,
/// `try_acquire`, `acquire().await` in the queue (both orders, queue limit), statistics.
pub struct AdaptiveLimiter<C: Clock = crate::clock::DefaultClock> {
    inner: ConcurrencyLimiter<C>,
    sampler: Sampler,
    /// The algorithm, taken only by the caller that closed a window (never on an acquisition
    /// or a release).
    algorithm: Lock<Algorithm>,
    options: AdaptiveOptions,
}

#[cfg(feature = "std")]
impl AdaptiveLimiter<crate::clock::StdClock> {
    /// A limiter on the system clock.
    ///
    /// ```
    /// use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions};
    ///
    /// let limiter = AdaptiveLimiter::new(AdaptiveOptions::new(8)).unwrap();
    /// let lease = limiter.try_acquire(1).unwrap();
    /// assert_eq!(limiter.available_permits(), 7);
    /// drop(lease); // released, and its latency sampled
    /// ```
    pub fn new(options: AdaptiveOptions) -> Result<Self, OptionsError> {
        Self::with_clock(options, crate::clock::StdClock)
    }
}

impl<C: Clock + Sync> AdaptiveLimiter<C> {
    /// A limiter reading time from `clock` (the leases' latencies, and the windows).
    pub fn with_clock(options: AdaptiveOptions, clock: C) -> Result<Self, OptionsError> {
        options.validate()?;
        let window = u64::try_from(options.window.as_nanos()).unwrap_or(u64::MAX);
        let start = clock.now().as_nanos();
        Ok(Self {
            inner: ConcurrencyLimiter::with_clock(
                options.concurrency(options.initial_limit),
                clock,
            )?,
            sampler: Sampler::new(start, window, options.min_samples),
            algorithm: Lock::new(options.algorithm),
            options,
        })
    }

    /// Takes `permits` now, or says why not ([`Reason::Exhausted`](crate::Reason::Exhausted)
    /// at the limit: a concurrency limit has no RetryAfter).
    ///
    /// ```
    /// use tollgate::ManualClock;
    /// use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions};
    ///
    /// let limiter = AdaptiveLimiter::with_clock(AdaptiveOptions::new(1), ManualClock::new()).unwrap();
    /// let lease = limiter.try_acquire(1).unwrap();
    /// assert!(limiter.try_acquire(1).is_err());
    /// ```
    pub fn try_acquire(&self, permits: u32) -> Result<AdaptiveLease<'_>, Rejection> {
        self.inner.try_acquire(permits).map(|l| self.lease(l))
    }

    /// Waits for `permits` in the queue (see
    /// [`ConcurrencyLimiter::acquire`]); the lease's latency is timed from its grant, so time
    /// spent queued is not counted against the server.
    ///
    /// ```
    /// use tollgate::{ManualClock, QueueOrder};
    /// use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions};
    ///
    /// # embassy_futures::block_on(async {
    /// let opts = AdaptiveOptions::new(2).with_queue(10, QueueOrder::OldestFirst);
    /// let limiter = AdaptiveLimiter::with_clock(opts, ManualClock::new()).unwrap();
    /// let lease = limiter.acquire(2).await.unwrap();
    /// assert_eq!(lease.permits(), 2);
    /// # });
    /// ```
    pub async fn acquire(&self, permits: u32) -> Result<AdaptiveLease<'_>, Rejection> {
        let lease = self.inner.acquire(permits).await?;
        Ok(self.lease(lease))
    }

    /// The limit now.
    pub fn limit(&self) -> u32 {
        self.inner.limit()
    }

    /// Permits free now.
    pub fn available_permits(&self) -> u64 {
        self.inner.available_permits()
    }

    /// The counters, as [`Limiter::statistics`].
    pub fn statistics(&self) -> Statistics {
        self.inner.statistics()
    }

    /// Closes the limiter: waiters fail, and every later acquisition.
    pub fn close(&self) {
        self.inner.close();
    }

    /// The options this limiter was built with (its limit now is [`limit`](Self::limit)).
    pub fn options(&self) -> AdaptiveOptions {
        self.options
    }

    /// The call a grant starts, timed from now: the inner lease's permits, which the
    /// adaptive lease releases itself (static dispatch, and the sample after).
    fn call(&self, lease: Lease<'_>) -> Call {
        self.sampler.note_in_flight(self.in_flight());
        Call {
            permits: lease.forget(),
            start_ns: self.inner.clock().now().as_nanos(),
            outcome: Outcome::Success,
        }
    }

    /// The lease of a grant, timed from now.
    fn lease(&self, lease: Lease<'_>) -> AdaptiveLease<'_> {
        AdaptiveLease {
            call: self.call(lease),
            limiter: self,
        }
    }

    /// Permits held now (at most the limit, plus what a cut left owed).
    fn in_flight(&self) -> u32 {
        let held = u64::from(self.limit()).saturating_sub(self.inner.available_permits());
        held as u32
    }

    /// Takes `permits` now, as a lease that owns a handle to this limiter (it can move across
    /// tasks and outlive the borrow: what the HTTP layer holds until a response ends).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::ManualClock;
    /// use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions};
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::with_clock(AdaptiveOptions::new(2), ManualClock::new()).unwrap());
    /// let lease = limiter.try_acquire_owned(1).unwrap();
    /// std::thread::spawn(move || drop(lease)).join().unwrap();
    /// assert_eq!(limiter.available_permits(), 2);
    /// ```
    #[cfg(feature = "alloc")]
    pub fn try_acquire_owned(
        self: &alloc::sync::Arc<Self>,
        permits: u32,
    ) -> Result<OwnedAdaptiveLease, Rejection>
    where
        C: Send + 'static,
    {
        let lease = self.inner.try_acquire(permits)?;
        Ok(self.owned(lease))
    }

    /// [`acquire`](Self::acquire), as a lease that owns a handle to this limiter.
    #[cfg(feature = "alloc")]
    pub async fn acquire_owned(
        self: &alloc::sync::Arc<Self>,
        permits: u32,
    ) -> Result<OwnedAdaptiveLease, Rejection>
    where
        C: Send + 'static,
    {
        let lease = self.inner.acquire(permits).await?;
        Ok(self.owned(lease))
    }

    /// The owned lease of a grant, timed from now.
    #[cfg(feature = "alloc")]
    fn owned(self: &alloc::sync::Arc<Self>, lease: Lease<'_>) -> OwnedAdaptiveLease
    where
        C: Send + 'static,
    {
        OwnedAdaptiveLease {
            call: self.call(lease),
            limiter: self.clone(),
        }
    }

    /// The end of a call holding `permits`, for both lease kinds: the permits back first,
    /// then, unless it said nothing (ignored, or a probe holding none), its sample, its
    /// latency `rtt(now)` read only then.
    #[inline]
    fn end_call(&self, permits: u32, outcome: Outcome, rtt: impl FnOnce(u64) -> u64) {
        if permits > 0 {
            self.inner.release(permits);
            if outcome != Outcome::Ignored {
                let now = self.inner.clock().now().as_nanos();
                self.sample_rtt(now, rtt(now), outcome);
            }
        }
    }

    /// A lease that ended at `now` after `rtt` with `outcome`: its sample, and if it closed a
    /// window, the new limit.
    fn sample_rtt(&self, now: u64, rtt: u64, outcome: Outcome) {
        let dropped = outcome == Outcome::Dropped;
        let cells = self.inner.cells();
        if let Some(summary) = self
            .sampler
            .record(cells, now, rtt, dropped, || self.in_flight())
        {
            self.adjust(&summary);
        }
    }

    /// The next limit after a window, applied as a reconfiguration (one at a time: under the
    /// algorithm's lock).
    fn adjust(&self, summary: &WindowSummary) {
        let (min, max) = (self.options.min_limit, self.options.max_limit);
        self.algorithm.with(|algorithm| {
            let limit = self.limit();
            let next = algorithm.next_limit(limit, summary).clamp(min, max);
            if next != limit {
                // Valid: within the bounds, which `validate` checked against the target's.
                let _ = self.inner.reconfigure(self.options.concurrency(next));
            }
        });
    }
}

/// A plain [`Lease`]'s stamp, as this limiter's leases through the [`Limiter`] trait keep it
/// (chains, partitions, owned leases): the grant's time on the limiter's clock, in units of
/// 2^[`TIME_SHIFT`] ns (4.096 µs) modulo 2^[`TIME_BITS`] (a horizon of 2^40 ns, about 18
/// minutes), the call's [`Outcome`] above it, and a probe's mark (a lease of 0 permits, which
/// samples and settles nothing).
mod stamp {
    use super::Outcome;

    pub(super) const TIME_SHIFT: u32 = 12;
    pub(super) const TIME_BITS: u32 = 28;
    const TIME_MASK: u64 = (1 << TIME_BITS) - 1;
    const OUTCOME_SHIFT: u32 = TIME_BITS;
    pub(super) const PROBE: u64 = 1 << 30;

    /// The stamp of a grant at `now_ns`.
    pub(super) const fn at(now_ns: u64) -> u64 {
        (now_ns >> TIME_SHIFT) & TIME_MASK
    }

    /// The latency of a lease stamped `stamp` that ends at `now_ns`: exact to 2^12 ns for a
    /// lease held less than the horizon (a longer one reads as its time modulo it).
    pub(super) const fn latency_ns(stamp: u64, now_ns: u64) -> u64 {
        (at(now_ns).wrapping_sub(stamp) & TIME_MASK) << TIME_SHIFT
    }

    pub(super) const fn outcome(stamp: u64) -> Outcome {
        match (stamp >> OUTCOME_SHIFT) & 3 {
            0 => Outcome::Success,
            1 => Outcome::Dropped,
            _ => Outcome::Ignored,
        }
    }

    pub(super) const fn with_outcome(stamp: u64, outcome: Outcome) -> u64 {
        let bits = match outcome {
            Outcome::Success => 0,
            Outcome::Dropped => 1,
            Outcome::Ignored => 2,
        };
        stamp & !(3 << OUTCOME_SHIFT) | bits << OUTCOME_SHIFT
    }
}

impl<C: Clock + Sync> AdaptiveLimiter<C> {
    /// The plain lease of a grant of the concurrency limiter inside, timed from now: it
    /// refers to this limiter, whose release samples it.
    fn stamped(&self, lease: Lease<'_>) -> Lease<'_> {
        let permits = lease.forget();
        if permits == 0 {
            return Lease::settling(0, stamp::PROBE, self);
        }
        self.sampler.note_in_flight(self.in_flight());
        let now = self.inner.clock().now().as_nanos();
        Lease::releasing_stamped(permits, stamp::at(now), self)
    }
}

/// The adaptive limiter as any limiter: what chains and partitions take. Its leases are plain
/// [`Lease`]s that keep the grant's time in their stamp: their drop releases the permits and
/// samples the call (a success unless [`Lease::dropped`] or [`Lease::ignore`] said otherwise),
/// its latency exact to 4.096 µs for a lease held less than about 18 minutes (a longer one
/// reads as its time modulo that). The inherent [`try_acquire`](AdaptiveLimiter::try_acquire)
/// answers an [`AdaptiveLease`], timed to the nanosecond.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{Chain, Limiter, ManualClock, TokenBucketLimiter, TokenBucketOptions};
/// use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions, Aimd};
///
/// let clock = ManualClock::new();
/// let opts = AdaptiveOptions::new(4)
///     .with_window(Duration::from_millis(10), 2)
///     .with_algorithm(Aimd { timeout_ns: 50_000_000, ..Aimd::new() });
/// let adaptive = AdaptiveLimiter::with_clock(opts, &clock).unwrap();
/// let rate = TokenBucketLimiter::with_clock(TokenBucketOptions::per_second(1_000), &clock).unwrap();
/// let chain = Chain::new((&rate, &adaptive));
/// let calls: Vec<_> = (0..2).map(|_| chain.try_acquire(1).unwrap()).collect();
/// clock.advance(Duration::from_millis(80)); // slower than the 50 ms timeout
/// drop(calls); // two samples in a window of 10 ms: AIMD backs off
/// assert_eq!(adaptive.limit(), 3);
/// ```
impl<C: Clock + Sync> Limiter for AdaptiveLimiter<C> {
    fn try_acquire(&self, permits: u32) -> Result<Lease<'_>, Rejection> {
        self.inner.try_acquire(permits).map(|l| self.stamped(l))
    }
    fn available_permits(&self) -> u64 {
        self.inner.available_permits()
    }
    fn statistics(&self) -> Statistics {
        self.inner.statistics()
    }
    fn idle_duration(&self) -> Option<Duration> {
        self.inner.idle_duration()
    }
    fn close(&self) {
        self.inner.close();
    }
    fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}

/// Permits back to the concurrency limiter inside; a stamped lease's release also samples it.
impl<C: Clock + Sync> Release for AdaptiveLimiter<C> {
    fn release(&self, permits: u32) {
        self.inner.release(permits);
    }

    /// Releases, then samples the call from its stamp (a probe's lease holds no permits).
    fn release_stamped(&self, permits: u32, stamp: u64) {
        let stamp = stamp & crate::lease::STAMP_MASK;
        self.end_call(permits, stamp::outcome(stamp), |now| {
            stamp::latency_ns(stamp, now)
        });
    }

    /// As the concurrency limiter inside settles (a probe's lease cannot).
    fn settle(&self, s: crate::lease::Settlement) -> Result<(), SettleError> {
        if s.stamp & stamp::PROBE != 0 {
            return Err(SettleError::Unsupported);
        }
        self.inner
            .settle(crate::lease::Settlement { stamp: 0, ..s })
    }

    fn report(&self, stamp: u64, outcome: Outcome) -> u64 {
        stamp::with_outcome(stamp, outcome)
    }
}

impl<C: Clock + Sync> crate::wait::private::Sealed for AdaptiveLimiter<C> {}

/// The waiting protocol of the concurrency limiter inside, whose grants become this limiter's
/// stamped leases: `acquire().await` through [`AcquireAsync`](crate::AcquireAsync) (a chain's
/// waiting form).
impl<C: Clock + Sync> crate::wait::Source for AdaptiveLimiter<C> {
    fn queue(&self) -> &crate::wait::WaitQueue {
        self.inner.queue()
    }
    fn counters(&self) -> &crate::stats::Counters {
        crate::wait::Source::counters(&self.inner)
    }
    fn limit(&self) -> u32 {
        crate::wait::Source::limit(&self.inner)
    }
    fn take_now(&self, n: u32) -> Result<u64, Rejection> {
        self.inner.take_now(n)
    }
    fn take_locked(&self, n: u32, flag_if_short: bool) -> crate::wait::LockedTake {
        self.inner.take_locked(n, flag_if_short)
    }
    fn take_for_waiter(&self, n: u32) -> crate::wait::LockedTake {
        crate::wait::Source::take_for_waiter(&self.inner, n)
    }
    fn wait_behind(&self, ahead: &mut dyn Iterator<Item = u32>, n: u32) -> Option<Duration> {
        crate::wait::Source::wait_behind(&self.inner, ahead, n)
    }
    fn timed(&self) -> bool {
        self.inner.timed()
    }
    fn served_on_return(&self) -> bool {
        self.inner.served_on_return()
    }
    fn clear_waiters(&self) {
        self.inner.clear_waiters()
    }
    fn give_back(&self, n: u32, stamp: u64) {
        crate::wait::Source::give_back(&self.inner, n, stamp)
    }
    fn wait_for_permits(&self, total: u64) -> Option<Duration> {
        self.inner.wait_for_permits(total)
    }
    fn lease(&self, n: u32, stamp: u64) -> Lease<'_> {
        self.stamped(crate::wait::Source::lease(&self.inner, n, stamp))
    }
}

crate::limiter::queued_capabilities!(@acquire AdaptiveLimiter<C> where C: Clock | Sync);

/// The quota of a concurrency limit that moves: the limit now, the permits free under it, and
/// no reset time (only releases bring permits back).
///
/// ```
/// use tollgate::{ManualClock, Quota};
/// use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions};
///
/// let limiter = AdaptiveLimiter::with_clock(AdaptiveOptions::new(8), ManualClock::new()).unwrap();
/// let _held = limiter.try_acquire(3).unwrap();
/// let q = limiter.quota();
/// assert_eq!((q.limit, q.remaining, q.reset_after), (8, 5, None));
/// ```
impl<C: Clock + Sync> crate::quota::Quota for AdaptiveLimiter<C> {
    fn quota(&self) -> crate::quota::QuotaState {
        self.inner.quota()
    }
}

/// One of many (an HTTP policy's limit per key): its counts kept compact, with no per-thread
/// cells (its samples then go to the shared word).
#[cfg(feature = "http")]
impl<C: Clock> crate::partition::Compact for AdaptiveLimiter<C> {
    fn compact(&self) {
        self.inner.compact_counts();
    }
}

impl<C: Clock> core::fmt::Debug for AdaptiveLimiter<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AdaptiveLimiter")
            .field("limit", &self.inner.options().permit_limit)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// The call a lease of an [`AdaptiveLimiter`] covers: its permits, when it was granted and
/// how it went. What both lease types hold besides their handle to the limiter.
#[derive(Clone, Copy, Debug)]
struct Call {
    permits: u32,
    start_ns: u64,
    outcome: Outcome,
}

/// Where an ended lease goes: its limiter, whatever its clock (so that a lease type has no
/// clock parameter). One call: the permits back first, then the sample.
trait Sink: Sync {
    fn end(&self, call: &Call);
}

impl<C: Clock + Sync> Sink for AdaptiveLimiter<C> {
    /// Releases the call's permits and, unless it said nothing (ignored, or a probe's lease
    /// holding none), samples it.
    fn end(&self, call: &Call) {
        self.end_call(call.permits, call.outcome, |now| {
            now.saturating_sub(call.start_ns)
        });
    }
}

/// The methods both lease types share, over their [`Call`].
macro_rules! call_methods {
    () => {
        /// The number of permits this lease holds.
        pub fn permits(&self) -> u32 {
            self.call.permits
        }

        /// Marks the call as dropped for overload (a timeout, a 503, a refusal from
        /// upstream): the algorithm backs off.
        ///
        /// ```
        /// use tollgate::ManualClock;
        /// use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions, Outcome};
        ///
        /// let limiter =
        ///     AdaptiveLimiter::with_clock(AdaptiveOptions::new(4), ManualClock::new()).unwrap();
        /// let mut lease = limiter.try_acquire(1).unwrap();
        /// lease.dropped();
        /// assert_eq!(lease.outcome(), Outcome::Dropped);
        /// ```
        pub fn dropped(&mut self) {
            self.call.outcome = Outcome::Dropped;
        }

        /// Marks the call as saying nothing about capacity (a client error): it is not
        /// sampled.
        pub fn ignore(&mut self) {
            self.call.outcome = Outcome::Ignored;
        }

        /// The outcome the lease will report.
        pub fn outcome(&self) -> Outcome {
            self.call.outcome
        }
    };
}

/// Permits of an [`AdaptiveLimiter`], released when dropped; the drop also reports the call's
/// latency (from the grant, on the limiter's clock) and its [`Outcome`] (a success unless
/// marked otherwise).
#[must_use = "dropping a lease releases its permits at once"]
pub struct AdaptiveLease<'a> {
    limiter: &'a dyn Sink,
    call: Call,
}

impl AdaptiveLease<'_> {
    call_methods!();
}

impl Drop for AdaptiveLease<'_> {
    fn drop(&mut self) {
        self.limiter.end(&self.call);
    }
}

impl core::fmt::Debug for AdaptiveLease<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AdaptiveLease")
            .field("permits", &self.call.permits)
            .field("outcome", &self.call.outcome)
            .finish()
    }
}

/// An [`AdaptiveLease`] that owns a handle to its limiter
/// ([`try_acquire_owned`](AdaptiveLimiter::try_acquire_owned)): it can move across tasks and
/// outlive the borrow that acquired it; when dropped it releases its permits and reports its
/// latency and outcome, as an `AdaptiveLease` does (feature `alloc`).
#[cfg(feature = "alloc")]
#[must_use = "dropping a lease releases its permits at once"]
pub struct OwnedAdaptiveLease {
    limiter: alloc::sync::Arc<dyn Sink + Send>,
    call: Call,
}

#[cfg(feature = "alloc")]
impl OwnedAdaptiveLease {
    call_methods!();
}

#[cfg(feature = "alloc")]
impl Drop for OwnedAdaptiveLease {
    fn drop(&mut self) {
        self.limiter.end(&self.call);
    }
}

#[cfg(feature = "alloc")]
impl core::fmt::Debug for OwnedAdaptiveLease {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OwnedAdaptiveLease")
            .field("permits", &self.call.permits)
            .field("outcome", &self.call.outcome)
            .finish()
    }
}
