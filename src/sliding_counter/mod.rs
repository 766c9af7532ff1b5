//! The sliding-window counter (approximate): the previous fixed window's count weighted by how
//! much of it the rolling window still overlaps, plus the current window's count — one word.

pub(crate) mod state;

use core::convert::Infallible;
use core::time::Duration;

use crate::cas;
use crate::clock::Clock;
use crate::lease::{Lease, Reason, Rejection, Statistics};
use crate::limiter::{Limiter, Replenishing};
use crate::nanos::Nanos;
use crate::options::OptionsError;
use crate::stats::Counters;
use crate::sync::{AtomicU128, AtomicU64, Ordering};
use crate::ticks::{nanos_of, Ticker};

use state::{Counter, Denied, Shape};

/// Options of a [`SlidingCounterLimiter`].
///
/// ```
/// use core::time::Duration;
/// use tollgate::SlidingCounterOptions;
///
/// assert_eq!(
///     SlidingCounterOptions::per_minute(10),
///     SlidingCounterOptions::new(10, Duration::from_secs(60))
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct SlidingCounterOptions {
    /// Permits per rolling window (estimated). At least 1.
    pub permit_limit: u32,
    /// The window. Longer than zero, shorter than 2^62 ns (146 years: a refusal may wait up to
    /// two windows, which must end within the 2^63 ns a limiter reads its clock over).
    pub window: Duration,
}

impl SlidingCounterOptions {
    /// `permit_limit` permits per rolling `window`.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::SlidingCounterOptions;
    ///
    /// assert_eq!(SlidingCounterOptions::new(10, Duration::from_secs(60)).permit_limit, 10);
    /// ```
    pub const fn new(permit_limit: u32, window: Duration) -> Self {
        Self {
            permit_limit,
            window,
        }
    }

    /// `n` permits per rolling `period` (the same as [`new`](Self::new)).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::SlidingCounterOptions;
    ///
    /// assert_eq!(SlidingCounterOptions::per(Duration::from_secs(2), 4).window, Duration::from_secs(2));
    /// ```
    pub const fn per(period: Duration, n: u32) -> Self {
        Self::new(n, period)
    }

    /// `n` permits per rolling second.
    ///
    /// ```
    /// use tollgate::SlidingCounterOptions;
    ///
    /// assert_eq!(SlidingCounterOptions::per_second(3).permit_limit, 3);
    /// ```
    pub const fn per_second(n: u32) -> Self {
        Self::new(n, Duration::from_secs(1))
    }

    /// `n` permits per rolling minute.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::SlidingCounterOptions;
    ///
    /// assert_eq!(SlidingCounterOptions::per_minute(3).window, Duration::from_secs(60));
    /// ```
    pub const fn per_minute(n: u32) -> Self {
        Self::new(n, Duration::from_secs(60))
    }

    /// Checks every option; returns the window in nanoseconds.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{OptionsError, SlidingCounterOptions};
    ///
    /// assert_eq!(SlidingCounterOptions::per_second(0).validate(), Err(OptionsError::ZeroLimit));
    /// assert_eq!(SlidingCounterOptions::new(1, Duration::ZERO).validate(), Err(OptionsError::ZeroPeriod));
    /// ```
    pub const fn validate(&self) -> Result<u64, OptionsError> {
        if self.permit_limit == 0 {
            return Err(OptionsError::ZeroLimit);
        }
        // Under 2^62 ns: the estimate reaches back a whole window, so a refusal may wait to
        // the end of the next window, two windows on, which must come before the clock's
        // horizon (2^63 ns) or the RetryAfter could never be met.
        match nanos_of(self.window) {
            Some(0) => Err(OptionsError::ZeroPeriod),
            Some(ns) if ns < MAX_WINDOW_NS => Ok(ns),
            _ => Err(OptionsError::PeriodTooLong),
        }
    }
}

/// The longest window is just under this (2^62 ns, 146 years): see
/// [`SlidingCounterOptions::validate`].
const MAX_WINDOW_NS: u64 = 1 << 62;

/// The sliding-window counter (approximate), as in article 001 and Cloudflare's limiter: at
/// `into` of the way through the current fixed window, the permits taken over the last window are
/// estimated as `previous window's count · (1 - into) + current window's count`, and a request
/// is admitted if the estimate plus its permits stays within `permit_limit`.
///
/// The whole state — both counts and the window index — is one 128-bit word updated by one
/// compare-and-swap; the comparison is exact integer arithmetic. RetryAfter is the exact instant
/// the estimate makes room (assuming nothing else is taken).
///
/// **Its error against the exact [`SlidingLogLimiter`](crate::SlidingLogLimiter).** The estimate
/// assumes the previous window's permits were spread evenly over it. The true count over the
/// rolling window differs from the estimate by at most the previous window's count (`≤ limit`):
/// if they all came at the previous window's end, the counter undercounts and a rolling window can
/// hold up to `2 · limit - 1` permits (at the very end of the current window, the previous
/// window's `limit` permits weigh almost nothing); if they all came at its start, it overcounts
/// and denies requests the log would admit. With evenly spread traffic the two agree. Use it where
/// O(1) memory matters more than an exact count (the log needs a slot per permit).
///
/// There is no waiting queue: it answers now, with a RetryAfter.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{Limiter, ManualClock, SlidingCounterLimiter, SlidingCounterOptions};
///
/// let clock = ManualClock::new();
/// let counter =
///     SlidingCounterLimiter::with_clock(SlidingCounterOptions::per_minute(10), &clock).unwrap();
/// let _nine = counter.try_acquire(9).unwrap();
/// clock.advance(Duration::from_secs(60));
/// assert!(counter.try_acquire(5).is_err()); // at 01:00 the 9 weigh fully: 9 + 5 > 10
/// clock.advance(Duration::from_secs(45)); // 01:45: 9 · 0.25 = 2.25 in the estimate
/// assert_eq!(counter.available_permits(), 7);
/// ```
#[derive(Debug)]
pub struct SlidingCounterLimiter<C: Clock = crate::clock::DefaultClock> {
    word: AtomicU128,
    ticker: Ticker,
    /// Permits per window (changed by `reconfigure`; only ever a `u32`).
    limit: AtomicU64,
    /// The window in nanoseconds (fixed at creation).
    window: u64,
    counters: Counters,
    clock: C,
    options: SlidingCounterOptions,
}

#[cfg(feature = "std")]
impl SlidingCounterLimiter<crate::StdClock> {
    /// A sliding-window counter on the system clock.
    ///
    /// ```
    /// use tollgate::{Limiter, SlidingCounterLimiter, SlidingCounterOptions};
    ///
    /// let c = SlidingCounterLimiter::new(SlidingCounterOptions::per_second(2)).unwrap();
    /// assert!(c.try_acquire(2).is_ok());
    /// ```
    pub fn new(options: SlidingCounterOptions) -> Result<Self, OptionsError> {
        Self::with_clock(options, crate::StdClock)
    }
}

impl<C: Clock> SlidingCounterLimiter<C> {
    /// A sliding-window counter reading time from `clock`; its windows count from `clock.now()`.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{ManualClock, OptionsError, SlidingCounterLimiter, SlidingCounterOptions};
    ///
    /// let too_long = SlidingCounterOptions::new(1, Duration::MAX);
    /// assert_eq!(
    ///     SlidingCounterLimiter::with_clock(too_long, ManualClock::new()).unwrap_err(),
    ///     OptionsError::PeriodTooLong
    /// );
    /// ```
    pub fn with_clock(options: SlidingCounterOptions, clock: C) -> Result<Self, OptionsError> {
        let window = options.validate()?;
        Ok(Self {
            word: AtomicU128::new(Counter::FRESH.pack()),
            ticker: Ticker::new(clock.now(), window),
            limit: AtomicU64::new(options.permit_limit as u64),
            window,
            counters: Counters::new(),
            clock,
            options,
        })
    }

    crate::sync::const_unless_loom! {
        /// A sliding-window counter built in a constant, so it can be a `static` shared by thread
        /// code and interrupt handlers (firmware). Its windows count from the clock's epoch
        /// ([`Instant::ZERO`](crate::Instant::ZERO), e.g. boot) rather than from a reading at
        /// creation — the only difference from [`with_clock`](Self::with_clock). Invalid options
        /// stop the build (a `const` panic); at run time use `with_clock`.
        ///
        /// ```
        /// use tollgate::{Limiter, ManualClock, SlidingCounterLimiter, SlidingCounterOptions};
        ///
        /// static COUNTER: SlidingCounterLimiter<ManualClock> =
        ///     SlidingCounterLimiter::at_epoch(SlidingCounterOptions::per_second(2), ManualClock::new());
        ///
        /// assert!(COUNTER.try_acquire(2).is_ok());
        /// assert!(COUNTER.try_acquire(1).is_err());
        /// ```
        pub fn at_epoch(options: SlidingCounterOptions, clock: C) -> Self {
            let window = match options.validate() {
                Ok(window) => window,
                Err(e) => e.panic_in_const(),
            };
            Self {
                word: AtomicU128::new(Counter::FRESH.pack()),
                ticker: Ticker::new(crate::Instant::ZERO, window),
                limit: AtomicU64::new(options.permit_limit as u64),
                window,
                counters: Counters::new(),
                clock,
                options,
            }
        }
    }

    /// The options the limiter was built with.
    ///
    /// ```
    /// use tollgate::{ManualClock, SlidingCounterLimiter, SlidingCounterOptions};
    ///
    /// let c = SlidingCounterLimiter::with_clock(SlidingCounterOptions::per_second(2), ManualClock::new()).unwrap();
    /// assert_eq!(c.options().permit_limit, 2);
    /// ```
    pub fn options(&self) -> SlidingCounterOptions {
        SlidingCounterOptions {
            permit_limit: self.shape().limit,
            ..self.options
        }
    }

    /// Changes the permit limit while the limiter is in use. The counts already taken stay
    /// counted: under a lowered limit it refuses until the weighted count of the rolling window
    /// falls below the new limit; under a raised one it has room at once. Refused, changing
    /// nothing: invalid options (as [`with_clock`](Self::with_clock) refuses them), or a
    /// different window ([`OptionsError::FixedAtCreation`]).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Limiter, ManualClock, OptionsError, SlidingCounterLimiter, SlidingCounterOptions};
    ///
    /// let clock = ManualClock::new();
    /// let minute = Duration::from_secs(60);
    /// let counter = SlidingCounterLimiter::with_clock(SlidingCounterOptions::new(10, minute), &clock).unwrap();
    /// counter.try_acquire(6).unwrap().forget();
    /// counter.reconfigure(SlidingCounterOptions::new(5, minute)).unwrap();
    /// assert!(counter.try_acquire(1).is_err()); // 6 counted, 5 allowed
    /// counter.reconfigure(SlidingCounterOptions::new(20, minute)).unwrap();
    /// assert_eq!(counter.available_permits(), 14);
    /// let other = SlidingCounterOptions::new(20, 2 * minute);
    /// assert_eq!(counter.reconfigure(other), Err(OptionsError::FixedAtCreation));
    /// ```
    pub fn reconfigure(&self, options: SlidingCounterOptions) -> Result<(), OptionsError> {
        options.validate()?;
        if options.window != self.options.window {
            return Err(OptionsError::FixedAtCreation);
        }
        self.limit
            .store(u64::from(options.permit_limit), Ordering::Release);
        Ok(())
    }

    /// The window's shape now: one reading of the limit for a whole decision.
    #[inline(always)]
    fn shape(&self) -> Shape {
        Shape {
            // Only ever stored from a `u32`.
            limit: self.limit.load(Ordering::Acquire) as u32,
            window: self.window,
        }
    }

    #[inline]
    fn take(&self, n: u32) -> Result<(), Rejection> {
        let s = self.shape();
        if n > s.limit {
            return Err(Rejection::new(Reason::ExceedsLimit));
        }
        let (k, into) = self.ticker.tick(self.clock.now());
        let result = cas::transition(&self.word, |w| {
            Counter::unpack(w)
                .try_take(k, into, n, s)
                .map(|c| (c.pack(), ()))
                .map_err(|d| (d, w))
        });
        match result {
            Ok(_) => Ok(()),
            Err((Denied::Closed, _)) => Err(Rejection::new(Reason::Closed)),
            Err((Denied::Exhausted, w)) => {
                let wait = Counter::unpack(w).wait(k, into, n.max(1), s);
                Err(Rejection::after(
                    Reason::Exhausted,
                    Nanos::from_u128(wait.max(1)),
                ))
            }
        }
    }
}

impl<C: Clock> crate::limiter::Peek for SlidingCounterLimiter<C> {
    fn peek(&self, permits: u32) -> Result<(), Rejection> {
        let s = self.shape();
        if permits > s.limit {
            return Err(Rejection::new(Reason::ExceedsLimit));
        }
        let (k, into) = self.ticker.tick(self.clock.now());
        let c = Counter::unpack(self.word.load(Ordering::Acquire));
        match c.try_take(k, into, permits, s) {
            Ok(_) => Ok(()),
            Err(Denied::Closed) => Err(Rejection::new(Reason::Closed)),
            Err(Denied::Exhausted) => Err(Rejection::after(
                Reason::Exhausted,
                Nanos::from_u128(c.wait(k, into, permits.max(1), s).max(1)),
            )),
        }
    }
}

impl<C: Clock> Limiter for SlidingCounterLimiter<C> {
    #[inline]
    fn try_acquire(&self, permits: u32) -> Result<Lease<'_>, Rejection> {
        self.counters
            .count(self.take(permits))
            .map(|()| Lease::unreleased(permits))
    }

    fn available_permits(&self) -> u64 {
        let (k, into) = self.ticker.tick(self.clock.now());
        Counter::unpack(self.word.load(Ordering::Acquire)).available(k, into, self.shape())
    }

    fn statistics(&self) -> Statistics {
        Statistics {
            available_permits: self.available_permits(),
            queued_permits: 0,
            total_successful: self.counters.successful(),
            total_failed: self.counters.failed(),
        }
    }

    /// Idle from the start of the first window in which the estimate is zero.
    fn idle_duration(&self) -> Option<Duration> {
        let now = self.clock.now();
        let (k, _) = self.ticker.tick(now);
        let c = Counter::unpack(self.word.load(Ordering::Acquire));
        let free_from = c.free_from();
        (free_from <= k.max(c.tick)).then(|| self.ticker.since_start_of(now, free_from))
    }

    fn close(&self) {
        let _ = cas::transition(&self.word, |w| {
            Ok::<_, Infallible>((Counter::unpack(w).close().pack(), ()))
        });
    }

    fn is_closed(&self) -> bool {
        Counter::unpack(self.word.load(Ordering::Acquire)).closed
    }
}

impl<C: Clock> Replenishing for SlidingCounterLimiter<C> {
    /// The window: the weights change continuously, the counts roll at each window boundary.
    fn replenishment_period(&self) -> Duration {
        Duration::from_nanos(self.ticker.period_ns())
    }

    /// Nothing to write (the estimate is computed from the clock); returns the permits available.
    fn replenish(&self) -> u64 {
        self.available_permits()
    }
}
