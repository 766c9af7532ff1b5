//! GCRA, the generic cell rate algorithm: one 64-bit word (the theoretical arrival time) with
//! governor's quota vocabulary. Its core also drives the leaky buckets.

pub(crate) mod state;

use core::convert::Infallible;
use core::time::Duration;

use crate::cas;
use crate::clock::Clock;
use crate::lease::{Reason, Rejection, Statistics};
use crate::options::{OptionsError, QueueOrder};
use crate::stats::Counters;
use crate::sync::{AtomicU64, Ordering};
use crate::ticks::{duration_from_nanos_u128, nanos_of, Ticker};
use crate::wait::WaitQueue;

use state::{Denied, Gcra, Params, MAX_SPAN};

/// The lock-free core shared by [`GcraLimiter`], [`LeakyBucketMeter`](crate::LeakyBucketMeter)
/// and [`LeakyBucketShaper`](crate::LeakyBucketShaper).
#[derive(Debug)]
pub(crate) struct GcraCore<C> {
    word: AtomicU64,
    /// Nanosecond ticks from creation.
    ticker: Ticker,
    params: Params,
    pub(crate) counters: Counters,
    pub(crate) queue: WaitQueue,
    pub(crate) clock: C,
}

/// Validates an interval and a burst into [`Params`].
pub(crate) fn params(interval: Duration, burst: u32, shape: bool) -> Result<Params, OptionsError> {
    if burst == 0 {
        return Err(OptionsError::ZeroLimit);
    }
    let interval = match nanos_of(interval) {
        None => return Err(OptionsError::PeriodTooLong),
        Some(0) => return Err(OptionsError::ZeroPeriod),
        Some(ns) => ns,
    };
    match interval.checked_mul(u64::from(burst)) {
        Some(span) if span <= MAX_SPAN => Ok(Params::new(interval, burst, shape)),
        _ => Err(OptionsError::PeriodTooLong),
    }
}

/// `period / n` rounded up to the nanosecond (zero for `n == 0`, refused by validation).
pub(crate) const fn interval_of(period: Duration, n: u32) -> Duration {
    if n == 0 {
        return Duration::ZERO;
    }
    let nanos = period.as_nanos();
    let n = n as u128;
    let each = nanos.div_ceil(n);
    Duration::new((each / 1_000_000_000) as u64, (each % 1_000_000_000) as u32)
}

impl<C: Clock> GcraCore<C> {
    pub(crate) fn new(params: Params, queue: WaitQueue, clock: C) -> Self {
        Self {
            word: AtomicU64::new(Gcra::FRESH.pack()),
            ticker: Ticker::new(clock.now(), 1),
            params,
            counters: Counters::new(),
            queue,
            clock,
        }
    }

    pub(crate) fn limit(&self) -> u32 {
        self.params.burst
    }

    #[inline]
    fn now(&self) -> u64 {
        self.ticker.elapsed(self.clock.now())
    }

    /// One lock-free attempt for a newcomer; the state word it decided on, on denial.
    #[inline]
    fn attempt(&self, now: u64, n: u32) -> Result<(), (Denied, u64)> {
        let p = self.params;
        let barge = self.queue.barging();
        cas::transition(&self.word, |w| {
            Gcra::unpack(w)
                .try_take(now, n, p, barge)
                .map(|g| (g.pack(), ()))
                .map_err(|d| (d, w))
        })
        .map(|_| ())
    }

    /// Takes `n` permits now without waiting (uncounted), or says why not and when to retry.
    #[inline]
    pub(crate) fn take(&self, n: u32, serve: impl FnOnce()) -> Result<(), Rejection> {
        self.take_as(n, || (), serve)
    }

    /// [`take`](Self::take), handing back `granted()` on success: the caller's result (a lease)
    /// is built on the quick path itself, not converted from `Ok(())` afterwards.
    #[inline(always)]
    pub(crate) fn take_as<T>(
        &self,
        n: u32,
        granted: impl FnOnce() -> T,
        serve: impl FnOnce(),
    ) -> Result<T, Rejection> {
        // `1 <= n <= burst` in one comparison: a probe or an oversized request goes the general way.
        if n.wrapping_sub(1) < self.params.burst {
            let now = self.now();
            return match self.take_quick(now, n) {
                Some(Ok(())) => Ok(granted()),
                Some(Err(r)) => Err(r),
                None => self.take_slow(now, n, serve).map(|()| granted()),
            };
        }
        if n > self.params.burst {
            return Err(Rejection::new(Reason::ExceedsLimit));
        }
        self.take_slow(self.now(), n, serve).map(|()| granted())
    }

    /// The common decision in a handful of instructions: a word with no flag set grants `n > 0`
    /// permits with one compare-and-swap of the pushed `tat`, or refuses with the exact wait
    /// when no one is queued ahead ([`Gcra::quick`]: what the general path decides on the same
    /// word and instant). `None` sends everything else (a flag, a probe, a queue to wait
    /// behind, a lost race) to [`take_slow`](Self::take_slow).
    #[inline(always)]
    fn take_quick(&self, now: u64, n: u32) -> Option<Result<(), Rejection>> {
        let w = cas::Word::load(&self.word);
        match Gcra::quick(w, now, n, self.params)? {
            Ok(next) => cas::swap_once(&self.word, w, next).then_some(Ok(())),
            Err(wait) => {
                if !self.queue.barging() && self.queue.queued_permits() != 0 {
                    return None;
                }
                Some(Err(Rejection::with_retry_after(
                    Reason::Exhausted,
                    Duration::from_nanos(wait),
                )))
            }
        }
    }

    /// [`take`](Self::take) past the quick path: the general transition and the queue. Out of
    /// line, so that the quick path saves no registers for it.
    #[inline(never)]
    fn take_slow(&self, now: u64, n: u32, serve: impl FnOnce()) -> Result<(), Rejection> {
        let mut result = self.attempt(now, n);
        if let Err((Denied::Exhausted, w)) = result {
            if Gcra::unpack(w).waiters && !self.queue.barging() {
                serve();
                result = self.attempt(now, n);
            }
        }
        result.map_err(|(d, w)| self.rejection(d, w, now, n))
    }

    /// The rejection of `n` permits denied for `d` on the word `w` at `now`: an exhausted one
    /// carries the exact wait, behind the permits queued ahead unless newcomers barge.
    #[cold]
    fn rejection(&self, d: Denied, w: u64, now: u64, n: u32) -> Rejection {
        match d {
            Denied::Closed => Rejection::new(Reason::Closed),
            Denied::Exhausted => {
                let ahead = if self.queue.barging() {
                    0
                } else {
                    self.queue.queued_permits()
                };
                let wait = Gcra::unpack(w).wait(now, u64::from(n.max(1)), ahead, self.params);
                Rejection::with_retry_after(
                    Reason::Exhausted,
                    duration_from_nanos_u128(wait.max(1)),
                )
            }
        }
    }

    /// What [`take`](Self::take) would answer now, writing nothing and serving nobody.
    pub(crate) fn peek(&self, n: u32) -> Result<(), Rejection> {
        if n > self.params.burst {
            return Err(Rejection::new(Reason::ExceedsLimit));
        }
        let now = self.now();
        let w = self.word.load(Ordering::Acquire);
        Gcra::unpack(w)
            .try_take(now, n, self.params, self.queue.barging())
            .map(|_| ())
            .map_err(|d| self.rejection(d, w, now, n))
    }

    /// Under the queue lock: takes `n` ignoring the queue flag, or finds them short.
    pub(crate) fn take_locked(&self, n: u32, flag_if_short: bool) -> Result<Option<u64>, Reason> {
        let now = self.now();
        let p = self.params;
        cas::transition(&self.word, |w| {
            let g = Gcra::unpack(w);
            match g.try_take(now, n, p, true) {
                Ok(next) => Ok((next.pack(), Some(now))),
                Err(Denied::Closed) => Err(Reason::Closed),
                Err(Denied::Exhausted) if flag_if_short => Ok((g.with_waiters(true).pack(), None)),
                Err(Denied::Exhausted) => Ok((w, None)),
            }
        })
        .map(|(_, taken)| taken)
    }

    pub(crate) fn clear_waiters(&self) {
        let _ = cas::transition(&self.word, |w| {
            Ok::<_, Infallible>((Gcra::unpack(w).with_waiters(false).pack(), ()))
        });
    }

    /// Returns `n` permits a waiter was granted but never received; whether anyone waits.
    pub(crate) fn give_back(&self, n: u32) -> bool {
        let now = self.now();
        let p = self.params;
        let Ok((before, ())) = cas::transition(&self.word, |w| {
            Ok::<_, Infallible>((Gcra::unpack(w).give_back(now, n, p).pack(), ()))
        });
        Gcra::unpack(before).waiters
    }

    /// How long until a request of `total` permits would be admitted by time alone.
    pub(crate) fn wait_for(&self, total: u64) -> Duration {
        let g = Gcra::unpack(self.word.load(Ordering::Acquire));
        duration_from_nanos_u128(g.wait(self.now(), total, 0, self.params))
    }

    pub(crate) fn available(&self) -> u64 {
        Gcra::unpack(self.word.load(Ordering::Acquire)).available(self.now(), self.params)
    }

    pub(crate) fn statistics(&self) -> Statistics {
        Statistics {
            available_permits: self.available(),
            queued_permits: self.queue.queued_permits(),
            total_successful: self.counters.successful(),
            total_failed: self.counters.failed(),
        }
    }

    /// Full since the theoretical arrival time; `None` while anything is outstanding.
    pub(crate) fn idle_duration(&self) -> Option<Duration> {
        let now = self.now();
        let g = Gcra::unpack(self.word.load(Ordering::Acquire));
        g.full_since(now).map(|t| Duration::from_nanos(now - t))
    }

    pub(crate) fn close(&self) {
        let _ = cas::transition(&self.word, |w| {
            Ok::<_, Infallible>((Gcra::unpack(w).close().pack(), ()))
        });
    }

    pub(crate) fn is_closed(&self) -> bool {
        Gcra::unpack(self.word.load(Ordering::Acquire)).closed
    }

    pub(crate) fn interval(&self) -> Duration {
        Duration::from_nanos(self.params.interval)
    }
}

/// Implements `Limiter`, `Replenishing`, the waiting `Source` and the `acquire` methods for a
/// limiter type wrapping a `GcraCore` in its `core` field. `$opts` is the text of options for
/// the examples of the `acquire` methods: one permit now, the next 100 ms later, a queue.
macro_rules! gcra_limiter {
    ($ty:ident, $opts:literal) => {
        impl<C: $crate::clock::Clock> $ty<C> {
            /// Waits for `permits` in the queue (see [`Acquire`](crate::wait::Acquire)); queued
            /// waiters are served when their slot comes: by any later acquisition, by
            /// [`replenish`](crate::Replenishing::replenish), or by a registered `Driver`
            /// (feature `std`).
            ///
            #[doc = concat!(
                "```\n",
                "use core::future::Future;\n",
                "use core::task::{Context, Poll, Waker};\n",
                "use core::time::Duration;\n",
                "use tollgate::*;\n",
                "\n",
                "let clock = ManualClock::new();\n",
                "let limiter = ", stringify!($ty), "::with_clock(", $opts, ", &clock).unwrap();\n",
                "let _first = limiter.try_acquire(1).unwrap();\n",
                "let mut cx = Context::from_waker(Waker::noop());\n",
                "let mut waiter = core::pin::pin!(limiter.acquire(1));\n",
                "assert!(waiter.as_mut().poll(&mut cx).is_pending()); // queued: its slot is 100 ms away\n",
                "clock.advance(Duration::from_millis(100));\n",
                "limiter.replenish(); // or any later acquisition, or a `Driver`\n",
                "assert!(matches!(waiter.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));\n",
                "```",
            )]
            pub fn acquire(&self, permits: u32) -> $crate::wait::Acquire<'_, Self> {
                $crate::wait::Acquire::new(self, permits)
            }

            /// Waits on this thread for `permits`, for up to `timeout` (`None`: no limit); the
            /// thread wakes itself when the permits' slot comes, so no driver is needed.
            ///
            #[doc = concat!(
                "```\n",
                "use core::time::Duration;\n",
                "use tollgate::*;\n",
                "\n",
                "let clock = ManualClock::new();\n",
                "let limiter = ", stringify!($ty), "::with_clock(", $opts, ", &clock).unwrap();\n",
                "// A permit is there: granted at once.\n",
                "assert_eq!(limiter.acquire_blocking(1, None).unwrap().permits(), 1);\n",
                "// The next slot is 100 ms of clock time away, and this clock stands still:\n",
                "// the wait gives up after its 1 ms timeout and leaves the queue.\n",
                "let r = limiter.acquire_blocking(1, Some(Duration::from_millis(1))).unwrap_err();\n",
                "assert_eq!(r.reason(), Reason::TimedOut);\n",
                "assert_eq!(limiter.statistics().queued_permits, 0);\n",
                "```",
            )]
            #[cfg(feature = "std")]
            pub fn acquire_blocking(
                &self,
                permits: u32,
                timeout: Option<core::time::Duration>,
            ) -> Result<$crate::Lease<'_>, $crate::Rejection> {
                $crate::wait::acquire_blocking(self, permits, timeout)
            }
        }

        impl<C: $crate::clock::Clock> $crate::limiter::Peek for $ty<C> {
            fn peek(&self, permits: u32) -> Result<(), $crate::Rejection> {
                self.core.peek(permits)
            }
        }

        impl<C: $crate::clock::Clock> $crate::limiter::Limiter for $ty<C> {
            #[inline]
            fn try_acquire(&self, permits: u32) -> Result<$crate::Lease<'_>, $crate::Rejection> {
                let taken = self.core.take_as(
                    permits,
                    || $crate::Lease::unreleased(permits),
                    || self.core.queue.serve(self),
                );
                self.core.counters.count(taken)
            }
            fn available_permits(&self) -> u64 {
                self.core.available()
            }
            fn statistics(&self) -> $crate::Statistics {
                self.core.statistics()
            }
            fn idle_duration(&self) -> Option<core::time::Duration> {
                self.core.idle_duration()
            }
            fn close(&self) {
                self.core.close();
                self.core.queue.close(self);
            }
            fn is_closed(&self) -> bool {
                self.core.is_closed()
            }
        }

        impl<C: $crate::clock::Clock> $crate::limiter::Replenishing for $ty<C> {
            /// The emission interval: one permit comes back every this long.
            fn replenishment_period(&self) -> core::time::Duration {
                self.core.interval()
            }
            fn replenish(&self) -> u64 {
                self.core.queue.serve(self);
                self.core.available()
            }
            fn next_service(&self) -> Option<core::time::Duration> {
                $crate::wait::next_service(self)
            }
            #[cfg(feature = "std")]
            fn attach_driver(&self, handle: $crate::driver::DriverHandle) {
                self.core.queue.attach(handle);
            }
        }

        impl<C: $crate::clock::Clock> $crate::wait::private::Sealed for $ty<C> {}

        impl<C: $crate::clock::Clock> $crate::wait::Source for $ty<C> {
            fn queue(&self) -> &$crate::wait::WaitQueue {
                &self.core.queue
            }
            fn counters(&self) -> &$crate::stats::Counters {
                &self.core.counters
            }
            fn limit(&self) -> u32 {
                self.core.limit()
            }
            fn take_now(&self, n: u32) -> Result<(), $crate::Rejection> {
                self.core.take(n, || self.core.queue.serve(self))
            }
            fn take_locked(&self, n: u32, flag: bool) -> Result<Option<u64>, $crate::Reason> {
                self.core.take_locked(n, flag)
            }
            fn clear_waiters(&self) {
                self.core.clear_waiters()
            }
            fn give_back(&self, n: u32, _stamp: u64) {
                if self.core.give_back(n) {
                    self.core.queue.serve(self);
                }
            }
            fn wait_for_permits(&self, total: u64) -> Option<core::time::Duration> {
                Some(self.core.wait_for(total))
            }
            fn lease(&self, n: u32) -> $crate::Lease<'_> {
                $crate::Lease::unreleased(n)
            }
        }
    };
}
pub(crate) use gcra_limiter;

/// Options of a [`GcraLimiter`], in governor's quota vocabulary.
///
/// | constructor | permits come back | burst |
/// |---|---|---|
/// | [`per_second(n)`](Self::per_second), [`per_minute(n)`](Self::per_minute), [`per_hour(n)`](Self::per_hour), [`per(period, n)`](Self::per) | one every `period / n` (rounded up to the ns: never faster than asked) | `n` |
/// | [`with_period(interval)`](Self::with_period) | one every `interval` | 1 |
/// | [`.with_burst(b)`](Self::with_burst) | unchanged | `b` |
///
/// ```
/// use core::time::Duration;
/// use tollgate::GcraOptions;
///
/// let quota = GcraOptions::per_second(50);
/// assert_eq!((quota.interval, quota.burst), (Duration::from_millis(20), 50));
/// let spaced = GcraOptions::with_period(Duration::from_millis(100)).with_burst(5);
/// assert_eq!((spaced.interval, spaced.burst), (Duration::from_millis(100), 5));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GcraOptions {
    /// One permit comes back every `interval` (the emission interval). Longer than zero.
    pub interval: Duration,
    /// The most permits that may be taken at once after an idle spell (and the largest request).
    /// At least 1; `burst · interval` must be under 2^61 ns (73 years).
    pub burst: u32,
    /// Permits that may wait in the queue (for waiting acquisitions).
    pub queue_limit: u32,
    /// The order queued requests are served in.
    pub queue_order: QueueOrder,
}

impl GcraOptions {
    /// `n` permits per `period`, one every `period / n` (rounded up), burst `n`; no queue.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::GcraOptions;
    ///
    /// let q = GcraOptions::per(Duration::from_secs(3), 2);
    /// assert_eq!((q.interval, q.burst), (Duration::from_millis(1500), 2));
    /// ```
    pub const fn per(period: Duration, n: u32) -> Self {
        Self {
            interval: interval_of(period, n),
            burst: n,
            queue_limit: 0,
            queue_order: QueueOrder::OldestFirst,
        }
    }

    /// `n` permits a second, one every `1 s / n`, burst `n`.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::GcraOptions;
    ///
    /// assert_eq!(GcraOptions::per_second(4).interval, Duration::from_millis(250));
    /// ```
    pub const fn per_second(n: u32) -> Self {
        Self::per(Duration::from_secs(1), n)
    }

    /// `n` permits a minute, one every `60 s / n`, burst `n`.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::GcraOptions;
    ///
    /// assert_eq!(GcraOptions::per_minute(6).interval, Duration::from_secs(10));
    /// ```
    pub const fn per_minute(n: u32) -> Self {
        Self::per(Duration::from_secs(60), n)
    }

    /// `n` permits an hour, one every `3600 s / n`, burst `n`.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::GcraOptions;
    ///
    /// assert_eq!(GcraOptions::per_hour(60).interval, Duration::from_secs(60));
    /// ```
    pub const fn per_hour(n: u32) -> Self {
        Self::per(Duration::from_secs(3600), n)
    }

    /// One permit every `interval`, burst 1 (governor's `Quota::with_period`).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::GcraOptions;
    ///
    /// assert_eq!(GcraOptions::with_period(Duration::from_millis(5)).burst, 1);
    /// ```
    pub const fn with_period(interval: Duration) -> Self {
        Self {
            interval,
            burst: 1,
            queue_limit: 0,
            queue_order: QueueOrder::OldestFirst,
        }
    }

    /// The same rate with a burst of `burst` permits. A zero burst fails validation.
    ///
    /// ```
    /// use tollgate::{GcraLimiter, GcraOptions, Limiter, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let gcra = GcraLimiter::with_clock(GcraOptions::per_second(10).with_burst(3), &clock).unwrap();
    /// assert_eq!(gcra.available_permits(), 3);
    /// ```
    pub const fn with_burst(self, burst: u32) -> Self {
        Self { burst, ..self }
    }

    /// The same options with a queue of `limit` permits served in `order`.
    ///
    /// ```
    /// use tollgate::{GcraOptions, QueueOrder};
    ///
    /// let q = GcraOptions::per_second(10).with_queue(20, QueueOrder::OldestFirst);
    /// assert_eq!(q.queue_limit, 20);
    /// ```
    pub const fn with_queue(self, limit: u32, order: QueueOrder) -> Self {
        Self {
            queue_limit: limit,
            queue_order: order,
            ..self
        }
    }

    /// Checks every option; returns the interval in nanoseconds.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{GcraOptions, OptionsError};
    ///
    /// assert_eq!(GcraOptions::per_second(0).validate(), Err(OptionsError::ZeroLimit));
    /// assert_eq!(GcraOptions::with_period(Duration::ZERO).validate(), Err(OptionsError::ZeroPeriod));
    /// assert_eq!(GcraOptions::per_second(4).validate(), Ok(250_000_000));
    /// ```
    pub fn validate(&self) -> Result<u64, OptionsError> {
        params(self.interval, self.burst, false).map(|p| p.interval)
    }
}

/// GCRA, the generic cell rate algorithm (governor's algorithm): permits come back **one at a
/// time**, one every `interval`, and up to `burst` may be taken at once after an idle spell.
///
/// Unlike the [`TokenBucketLimiter`](crate::TokenBucketLimiter)'s whole-period steps, the spacing
/// is smooth: `per_second(50)` gives a permit back every 20 ms. The whole state is one 64-bit
/// word — the theoretical arrival time — updated by one compare-and-swap; a denial writes
/// nothing, and its RetryAfter is exact (the nanosecond the request would be admitted, counting
/// the queue ahead). A clock that steps backwards only makes it stricter, never more lenient.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{GcraLimiter, GcraOptions, Limiter, ManualClock};
///
/// let clock = ManualClock::new();
/// let gcra = GcraLimiter::with_clock(GcraOptions::per_second(10).with_burst(2), &clock).unwrap();
/// let _a = gcra.try_acquire(1).unwrap();
/// let _b = gcra.try_acquire(1).unwrap(); // the burst of 2
/// let denied = gcra.try_acquire(1).unwrap_err();
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(100)));
/// clock.advance(Duration::from_millis(100)); // one permit back, spaced 100 ms
/// assert!(gcra.try_acquire(1).is_ok());
/// assert!(gcra.try_acquire(1).is_err());
/// ```
#[derive(Debug)]
pub struct GcraLimiter<C: Clock> {
    core: GcraCore<C>,
    options: GcraOptions,
}

#[cfg(feature = "std")]
impl GcraLimiter<crate::StdClock> {
    /// A GCRA limiter on the system clock.
    ///
    /// ```
    /// use tollgate::{GcraLimiter, GcraOptions, Limiter};
    ///
    /// let gcra = GcraLimiter::new(GcraOptions::per_second(100)).unwrap();
    /// assert!(gcra.try_acquire(100).is_ok());
    /// ```
    pub fn new(options: GcraOptions) -> Result<Self, OptionsError> {
        Self::with_clock(options, crate::StdClock)
    }
}

impl<C: Clock> GcraLimiter<C> {
    /// A GCRA limiter reading time from `clock`; it starts full (the whole burst available).
    ///
    /// ```
    /// use tollgate::{GcraLimiter, GcraOptions, ManualClock, OptionsError};
    ///
    /// let clock = ManualClock::new();
    /// assert_eq!(
    ///     GcraLimiter::with_clock(GcraOptions::per_second(5).with_burst(0), &clock).unwrap_err(),
    ///     OptionsError::ZeroLimit
    /// );
    /// ```
    pub fn with_clock(options: GcraOptions, clock: C) -> Result<Self, OptionsError> {
        let params = params(options.interval, options.burst, false)?;
        let queue = WaitQueue::new(options.queue_limit, options.queue_order);
        Ok(Self {
            core: GcraCore::new(params, queue, clock),
            options,
        })
    }

    /// The options the limiter was built with.
    ///
    /// ```
    /// use tollgate::{GcraLimiter, GcraOptions, ManualClock};
    ///
    /// let gcra = GcraLimiter::with_clock(GcraOptions::per_second(5), ManualClock::new()).unwrap();
    /// assert_eq!(gcra.options().burst, 5);
    /// ```
    pub fn options(&self) -> &GcraOptions {
        &self.options
    }
}

gcra_limiter!(
    GcraLimiter,
    "GcraOptions::per_second(10).with_burst(1).with_queue(1, QueueOrder::OldestFirst)"
);

// ---------------------------------------------------------------------------------------------
// `static` limiters (issue 15, helper "algos"): constant constructors for GCRA and the two leaky
// buckets, kept in one self-contained block.

/// [`params`] for constant evaluation: the same rules, written with `const` operations only
/// (`params_in_const_agrees` checks the two agree).
pub(crate) const fn params_in_const(
    interval: Duration,
    burst: u32,
    shape: bool,
) -> Result<Params, OptionsError> {
    if burst == 0 {
        return Err(OptionsError::ZeroLimit);
    }
    let interval = match nanos_of(interval) {
        None => return Err(OptionsError::PeriodTooLong),
        Some(0) => return Err(OptionsError::ZeroPeriod),
        Some(ns) => ns,
    };
    match interval.checked_mul(burst as u64) {
        Some(span) if span <= MAX_SPAN => Ok(Params::new(interval, burst, shape)),
        _ => Err(OptionsError::PeriodTooLong),
    }
}

impl<C: Clock> GcraCore<C> {
    crate::sync::const_unless_loom! {
        /// A core whose time counts from the clock's epoch ([`Instant::ZERO`](crate::Instant::ZERO)).
        pub(crate) fn at_epoch(params: Params, queue: WaitQueue, clock: C) -> Self {
            Self {
                word: AtomicU64::new(Gcra::FRESH.pack()),
                ticker: Ticker::new(crate::Instant::ZERO, 1),
                params,
                counters: Counters::new(),
                queue,
                clock,
            }
        }
    }
}

impl<C: Clock> GcraLimiter<C> {
    crate::sync::const_unless_loom! {
        /// A GCRA limiter built in a constant, so it can be a `static` shared by thread code and
        /// interrupt handlers (firmware). Its time counts from the clock's epoch
        /// ([`Instant::ZERO`](crate::Instant::ZERO), e.g. boot) rather than from a reading at
        /// creation — the only difference from [`with_clock`](Self::with_clock). Invalid options
        /// stop the build (a `const` panic); at run time use `with_clock`.
        ///
        /// ```
        /// use tollgate::{GcraLimiter, GcraOptions, Limiter, ManualClock};
        ///
        /// static GCRA: GcraLimiter<ManualClock> =
        ///     GcraLimiter::at_epoch(GcraOptions::per_second(2), ManualClock::new());
        ///
        /// assert!(GCRA.try_acquire(2).is_ok());
        /// assert!(GCRA.try_acquire(1).is_err());
        /// ```
        pub fn at_epoch(options: GcraOptions, clock: C) -> Self {
            let params = match params_in_const(options.interval, options.burst, false) {
                Ok(p) => p,
                Err(e) => e.panic_in_const(),
            };
            let queue = WaitQueue::new(options.queue_limit, options.queue_order);
            Self {
                core: GcraCore::at_epoch(params, queue, clock),
                options,
            }
        }
    }
}

#[cfg(test)]
mod at_epoch_tests {
    use super::*;

    #[test]
    fn params_in_const_agrees() {
        let periods = [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_millis(20),
            Duration::from_secs(1),
            Duration::from_nanos(MAX_SPAN),
            Duration::from_nanos(MAX_SPAN + 1),
            Duration::from_nanos(u64::MAX),
            Duration::MAX,
        ];
        for interval in periods {
            for burst in [0, 1, 2, 1_000, u32::MAX] {
                for shape in [false, true] {
                    assert_eq!(
                        params_in_const(interval, burst, shape),
                        params(interval, burst, shape),
                        "{interval:?} {burst} {shape}"
                    );
                }
            }
        }
    }
}
