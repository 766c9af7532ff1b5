//! The token bucket: up to `token_limit` tokens; `tokens_per_period` come back at the start of
//! every whole period.

use core::time::Duration;

use crate::bucket::state::Refill;
use crate::bucket::BucketCore;
use crate::clock::Clock;
use crate::options::{OptionsError, QueueOrder};
use crate::queue_kind::{NoQueue, QueueKind};
use crate::ticks::period_nanos;
use crate::wait::WaitQueue;

/// Options of a [`TokenBucketLimiter`] (.NET `TokenBucketRateLimiterOptions`).
///
/// There is no `AutoReplenishment`: replenishment is computed from the clock on every call, so
/// there is no timer to turn on or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct TokenBucketOptions {
    /// Capacity of the bucket; it starts full. At least 1.
    #[doc(alias = "TokenLimit")]
    pub token_limit: u32,
    /// Tokens added at the start of every period. At least 1.
    #[doc(alias = "TokensPerPeriod")]
    pub tokens_per_period: u32,
    /// The replenishment period. Longer than zero, shorter than 2^63 ns (292 years: a limiter reads
    /// its clock as stepped back from 2^63 ns after its creation on, so a longer period would
    /// never end).
    #[doc(alias = "ReplenishmentPeriod")]
    pub replenishment_period: Duration,
    /// Permits that may wait in the queue (for waiting acquisitions).
    #[doc(alias = "QueueLimit")]
    pub queue_limit: u32,
    /// The order queued requests are served in.
    #[doc(alias = "QueueProcessingOrder")]
    pub queue_order: QueueOrder,
}

impl TokenBucketOptions {
    /// A bucket of `token_limit` tokens that gains `tokens_per_period` every `period`; no queue.
    pub const fn new(token_limit: u32, tokens_per_period: u32, period: Duration) -> Self {
        Self {
            token_limit,
            tokens_per_period,
            replenishment_period: period,
            queue_limit: 0,
            queue_order: QueueOrder::OldestFirst,
        }
    }

    /// The bucket's refill.
    const fn refill(&self) -> Refill {
        Refill {
            limit: self.token_limit,
            per_tick: self.tokens_per_period,
        }
    }

    /// Checks every option; returns the period in nanoseconds.
    pub const fn validate(&self) -> Result<u64, OptionsError> {
        if self.token_limit == 0 {
            return Err(OptionsError::ZeroLimit);
        }
        if self.tokens_per_period == 0 {
            return Err(OptionsError::ZeroTokensPerPeriod);
        }
        match period_nanos(self.replenishment_period) {
            None => Err(OptionsError::PeriodTooLong),
            Some(0) => Err(OptionsError::ZeroPeriod),
            Some(ns) => Ok(ns),
        }
    }
}

crate::options::with_queue!(
    TokenBucketOptions,
    "TokenBucketOptions::new(10, 1, Duration::from_secs(1))"
);

/// A token bucket (.NET `TokenBucketRateLimiter`): it holds up to `token_limit` tokens and starts
/// full; each request takes tokens; `tokens_per_period` tokens come back at the start of every
/// period, counted from the limiter's creation.
///
/// **Only whole periods count.** Tokens arrive in steps of `tokens_per_period` at period
/// boundaries, as with .NET's timer-driven replenishment, never in fractions: a request denied
/// now is granted at an exact, predictable instant (its RetryAfter), the state stays an integer,
/// and a bucket of 10 that gains 2 a minute behaves as the .NET documentation describes. (For a
/// smooth rate, use a short period: 1 token every 100 ms rather than 10 every second.)
///
/// The admission state is one 128-bit word (tokens, tick, flags) updated by one compare-and-swap.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{Limiter, ManualClock, TokenBucketLimiter, TokenBucketOptions};
///
/// let clock = ManualClock::new();
/// let opts = TokenBucketOptions::new(10, 2, Duration::from_secs(60));
/// let bucket = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
/// let _ = bucket.try_acquire(4).unwrap();
/// assert_eq!(bucket.available_permits(), 6);
/// clock.advance(Duration::from_secs(60));
/// assert_eq!(bucket.available_permits(), 8);
/// ```
///
/// The second parameter is the kind of queue: a wait queue by default; [`NoQueue`] for a
/// bucket that only decides at once, with none of the queue's code or memory (built by
/// [`without_queue`](TokenBucketLimiter::without_queue) and
/// [`at_epoch_without_queue`](TokenBucketLimiter::at_epoch_without_queue)).
#[derive(Debug)]
pub struct TokenBucketLimiter<C: Clock = crate::clock::DefaultClock, Q = WaitQueue> {
    core: BucketCore<C, Q>,
}

#[cfg(feature = "std")]
impl TokenBucketLimiter<crate::StdClock> {
    /// A token bucket on the system clock.
    pub fn new(options: TokenBucketOptions) -> Result<Self, OptionsError> {
        Self::with_clock(options, crate::StdClock)
    }
}

impl<C: Clock> TokenBucketLimiter<C> {
    /// A token bucket reading time from `clock`; its periods count from `clock.now()`.
    pub fn with_clock(options: TokenBucketOptions, clock: C) -> Result<Self, OptionsError> {
        let period = options.validate()?;
        let refill = Refill {
            limit: options.token_limit,
            per_tick: options.tokens_per_period,
        };
        let queue = crate::wait::WaitQueue::new(options.queue_limit, options.queue_order);
        Ok(Self {
            core: BucketCore::new(refill, period, queue, clock),
        })
    }

    crate::sync::const_unless_loom! {
        /// A token bucket built in a constant, so it can be a `static` shared by thread code and
        /// interrupt handlers (firmware). It starts full, and its periods count from the clock's
        /// epoch ([`Instant::ZERO`](crate::Instant::ZERO), e.g. boot) rather than from a reading
        /// at creation — the only difference from [`with_clock`](Self::with_clock).
        ///
        /// Meant for constants: invalid options stop the build there (a `const` panic is a
        /// compile error). At run time use `with_clock`, which returns an [`OptionsError`].
        ///
        /// ```
        /// use core::time::Duration;
        /// use tollgate::{Clock, Instant, Limiter, TokenBucketLimiter, TokenBucketOptions};
        ///
        /// struct Uptime; // e.g. a timer peripheral's counter, in nanoseconds since boot
        /// impl Clock for Uptime {
        ///     fn now(&self) -> Instant {
        ///         Instant::from_nanos(5_000_000)
        ///     }
        /// }
        ///
        /// static BUCKET: TokenBucketLimiter<Uptime> = TokenBucketLimiter::at_epoch(
        ///     TokenBucketOptions::new(10, 1, Duration::from_millis(100)),
        ///     Uptime,
        /// );
        ///
        /// assert!(BUCKET.try_acquire(10).is_ok());
        /// assert!(BUCKET.try_acquire(1).is_err());
        /// ```
        pub fn at_epoch(options: TokenBucketOptions, clock: C) -> Self {
            let period = match options.validate() {
                Ok(period) => period,
                Err(e) => e.panic_in_const(),
            };
            let refill = Refill {
                limit: options.token_limit,
                per_tick: options.tokens_per_period,
            };
            let queue = crate::wait::WaitQueue::new(options.queue_limit, options.queue_order);
            Self {
                core: BucketCore::at(refill, period, queue, clock, crate::Instant::ZERO),
            }
        }
    }

    /// Changes the token limit, the tokens per period and the queue limit while the limiter
    /// is in use. The rule, applied at once and whole (concurrent reconfigurations apply one
    /// after the other):
    /// - **Tokens clamp to a lowered limit** (the excess is dropped at the next decision); a
    ///   raised limit starts from the tokens the bucket holds and fills with time.
    /// - **Refills** count at the new rate from the next period boundary on; the current
    ///   period is not re-dated.
    /// - **Waiters are re-evaluated**: those asking for more than the new limit are failed
    ///   with [`Reason::ExceedsLimit`](crate::Reason::ExceedsLimit) (they could never be
    ///   served), the rest keep their places and are served as far as the bucket now allows.
    ///   A new queue limit applies to newcomers; waiters already queued are not evicted.
    ///
    /// Refused, changing nothing: invalid options (as [`with_clock`](Self::with_clock)
    /// refuses them), a different replenishment period or queue order
    /// ([`OptionsError::FixedAtCreation`]), or a limit larger than the state word laid out at
    /// creation holds ([`OptionsError::LimitTooLarge`]; any `u32` for a limiter whose word is
    /// 128 bits, and for the 64-bit word every bit its ticks leave free: up to 2^28 - 1 tokens
    /// with a 1 s period, 2^18 - 1 with 1 ms).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Limiter, ManualClock, OptionsError, TokenBucketLimiter, TokenBucketOptions};
    ///
    /// let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(10, 10, Duration::from_secs(1));
    /// let bucket = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    /// bucket.reconfigure(TokenBucketOptions::new(4, 2, Duration::from_secs(1))).unwrap();
    /// assert_eq!(bucket.available_permits(), 4); // clamped
    /// bucket.try_acquire(4).unwrap().forget();
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(bucket.available_permits(), 2); // the new rate
    /// let other_period = TokenBucketOptions::new(4, 2, Duration::from_secs(2));
    /// assert_eq!(bucket.reconfigure(other_period), Err(OptionsError::FixedAtCreation));
    /// ```
    pub fn reconfigure(&self, options: TokenBucketOptions) -> Result<(), OptionsError> {
        options.validate()?;
        if options.replenishment_period != self.options().replenishment_period
            || options.queue_order != self.options().queue_order
        {
            return Err(OptionsError::FixedAtCreation);
        }
        self.core
            .reconfigure(self, options.refill(), options.queue_limit)
    }
}

impl<C: Clock, Q: QueueKind> TokenBucketLimiter<C, Q> {
    /// The options in force: those the limiter was built with, as last
    /// [`reconfigure`](Self::reconfigure)d.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{ManualClock, TokenBucketLimiter, TokenBucketOptions};
    ///
    /// let opts = TokenBucketOptions::new(10, 5, Duration::from_secs(1));
    /// let bucket = TokenBucketLimiter::with_clock(opts, ManualClock::new()).unwrap();
    /// assert_eq!(bucket.options(), opts);
    /// ```
    pub fn options(&self) -> TokenBucketOptions {
        let r = self.core.refill();
        TokenBucketOptions {
            token_limit: r.limit,
            tokens_per_period: r.per_tick,
            replenishment_period: self.core.period(),
            queue_limit: self.core.queue.queue_limit(),
            queue_order: self.core.queue.order(),
        }
    }
}

impl<C: Clock> TokenBucketLimiter<C, NoQueue> {
    /// A token bucket without a wait queue ([`NoQueue`]), reading time from `clock`; its
    /// periods count from `clock.now()`. The options' queue limit must be 0
    /// ([`OptionsError::NoWaitQueue`] otherwise). The same decisions as
    /// [`with_clock`](TokenBucketLimiter::with_clock)'s bucket, with no `acquire`.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Limiter, ManualClock, NoQueue, OptionsError, QueueOrder, TokenBucketLimiter, TokenBucketOptions};
    ///
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
    /// let bucket = TokenBucketLimiter::without_queue(opts, ManualClock::new()).unwrap();
    /// assert!(bucket.try_acquire(2).is_ok());
    /// assert_eq!(bucket.try_acquire(1).unwrap_err().retry_after(), Some(Duration::from_secs(1)));
    ///
    /// let queued = opts.with_queue(1, QueueOrder::OldestFirst);
    /// let refused = TokenBucketLimiter::without_queue(queued, ManualClock::new());
    /// assert_eq!(refused.unwrap_err(), OptionsError::NoWaitQueue);
    /// ```
    pub fn without_queue(options: TokenBucketOptions, clock: C) -> Result<Self, OptionsError> {
        let period = options.validate()?;
        if options.queue_limit != 0 {
            return Err(OptionsError::NoWaitQueue);
        }
        Ok(Self {
            core: BucketCore::new(options.refill(), period, NoQueue, clock),
        })
    }

    crate::sync::const_unless_loom! {
        /// [`at_epoch`](TokenBucketLimiter::at_epoch) without a wait queue ([`NoQueue`]): a
        /// `static` bucket whose periods count from the clock's epoch, for firmware that shares it
        /// with interrupt handlers and never waits. Invalid options, or a queue limit above 0,
        /// stop the build.
        ///
        /// ```
        /// use core::time::Duration;
        /// use tollgate::{Clock, Instant, Limiter, NoQueue, TokenBucketLimiter, TokenBucketOptions};
        ///
        /// struct Uptime; // e.g. a timer peripheral's counter, in nanoseconds since boot
        /// impl Clock for Uptime {
        ///     fn now(&self) -> Instant {
        ///         Instant::from_nanos(5_000_000)
        ///     }
        /// }
        ///
        /// static BUCKET: TokenBucketLimiter<Uptime, NoQueue> = TokenBucketLimiter::at_epoch_without_queue(
        ///     TokenBucketOptions::new(10, 1, Duration::from_millis(100)),
        ///     Uptime,
        /// );
        ///
        /// assert!(BUCKET.try_acquire(10).is_ok());
        /// assert!(BUCKET.try_acquire(1).is_err());
        /// ```
        pub fn at_epoch_without_queue(options: TokenBucketOptions, clock: C) -> Self {
            let period = match options.validate() {
                Ok(period) => period,
                Err(e) => e.panic_in_const(),
            };
            if options.queue_limit != 0 {
                OptionsError::NoWaitQueue.panic_in_const();
            }
            Self {
                core: BucketCore::at(
                    options.refill(),
                    period,
                    NoQueue,
                    clock,
                    crate::Instant::ZERO,
                ),
            }
        }
    }

    /// [`reconfigure`](TokenBucketLimiter::reconfigure) without a queue: the same rule, and
    /// the queue limit must stay 0 ([`OptionsError::NoWaitQueue`]).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Limiter, ManualClock, TokenBucketLimiter, TokenBucketOptions};
    ///
    /// let opts = TokenBucketOptions::new(10, 10, Duration::from_secs(1));
    /// let bucket = TokenBucketLimiter::without_queue(opts, ManualClock::new()).unwrap();
    /// bucket.reconfigure(TokenBucketOptions::new(4, 2, Duration::from_secs(1))).unwrap();
    /// assert_eq!(bucket.available_permits(), 4);
    /// ```
    pub fn reconfigure(&self, options: TokenBucketOptions) -> Result<(), OptionsError> {
        options.validate()?;
        if options.replenishment_period != self.options().replenishment_period {
            return Err(OptionsError::FixedAtCreation);
        }
        self.core
            .reconfigure_unqueued(options.refill(), options.queue_limit)
    }
}

crate::rate_limiter::rate_limiter!(
    TokenBucketLimiter,
    "TokenBucketOptions::new(1, 1, Duration::from_millis(100)).with_queue(1, QueueOrder::OldestFirst)"
);
crate::rate_limiter::rate_limiter!(unqueued TokenBucketLimiter);
