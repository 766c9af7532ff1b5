//! The leaky bucket, both ways the literature uses the name:
//!
//! - [`LeakyBucketMeter`] — **as a meter**: a water level that drains continuously at the leak
//!   rate; a request pours in its permits and is admitted if they fit under the capacity. It
//!   admits bursts up to the capacity and then the leak rate.
//! - [`LeakyBucketShaper`] — **as a queue**: requests leave the bucket at a constant rate, one
//!   permit every `1 / rate`; a request that cannot leave now waits in the queue for its
//!   departure slot. It turns any burst into a steady outflow.
//!
//! Both run on GCRA's one-word core ([`GcraLimiter`](crate::GcraLimiter)): the meter's level is
//! `(tat - now) / interval`, which is why the meter and GCRA admit exactly the same requests; the
//! shaper is the same word with the tolerance of a single departure.

use core::time::Duration;

use crate::clock::Clock;
use crate::gcra::state::Params;
use crate::gcra::{interval_of, params, GcraCore};
use crate::options::{OptionsError, QueueOrder};
use crate::queue_kind::{unchanged, QueueKind};
use crate::wait::WaitQueue;

/// Options of a [`LeakyBucketMeter`], shaped like article 002's `LeakyBucketRateLimiter`
/// (`outflowTokens` per `leakIntervalMs`, `bucketLimit`).
///
/// ```
/// use core::time::Duration;
/// use tollgate::LeakyBucketOptions;
///
/// // A bucket of 10 that leaks 2 units a second: one unit every 500 ms.
/// let opts = LeakyBucketOptions::new(10, 2, Duration::from_secs(1));
/// assert_eq!(opts.validate(), Ok(500_000_000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct LeakyBucketOptions {
    /// How much water the bucket holds (permits). At least 1.
    pub capacity: u32,
    /// Units that leak out every `leak_interval`. At least 1.
    pub leak: u32,
    /// The interval over which `leak` units drain, continuously (one unit every
    /// `leak_interval / leak`, rounded up to the ns). Longer than zero.
    pub leak_interval: Duration,
    /// Permits that may wait in the queue (for waiting acquisitions).
    pub queue_limit: u32,
    /// The order queued requests are served in.
    pub queue_order: QueueOrder,
}

impl LeakyBucketOptions {
    /// A bucket of `capacity` units that drains `leak` units every `leak_interval`; no queue.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::LeakyBucketOptions;
    ///
    /// let opts = LeakyBucketOptions::new(5, 1, Duration::from_millis(200));
    /// assert_eq!(opts.capacity, 5);
    /// ```
    pub const fn new(capacity: u32, leak: u32, leak_interval: Duration) -> Self {
        Self {
            capacity,
            leak,
            leak_interval,
            queue_limit: 0,
            queue_order: QueueOrder::OldestFirst,
        }
    }

    /// Checks every option; returns the nanoseconds one unit takes to drain.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{LeakyBucketOptions, OptionsError};
    ///
    /// let no_leak = LeakyBucketOptions::new(5, 0, Duration::from_secs(1));
    /// assert_eq!(no_leak.validate(), Err(OptionsError::ZeroTokensPerPeriod));
    /// ```
    pub fn validate(&self) -> Result<u64, OptionsError> {
        self.params().map(|p| p.interval)
    }

    /// The core's parameters, if every option is valid (usable in constants).
    pub(crate) const fn params(&self) -> Result<Params, OptionsError> {
        if self.leak == 0 {
            Err(OptionsError::ZeroTokensPerPeriod)
        } else if self.leak_interval.is_zero() {
            Err(OptionsError::ZeroPeriod)
        } else {
            params(
                interval_of(self.leak_interval, self.leak),
                self.capacity,
                false,
            )
        }
    }
}

/// The leaky bucket as a meter: a level that drains continuously, `leak` units every
/// `leak_interval`; a request of `n` permits is admitted if the level plus `n` fits under the
/// capacity, and raises the level by `n`.
///
/// Its level is kept as the instant the bucket will be empty, exact to the nanosecond (no floating
/// point: article 002's `double` level, without the rounding), in one 64-bit word updated by one
/// compare-and-swap. [`available_permits`](crate::Limiter::available_permits) is the room under
/// the capacity, rounded down. The meter admits exactly what a [`GcraLimiter`](crate::GcraLimiter)
/// with `burst = capacity` and `interval = leak_interval / leak` admits: it is the same algorithm
/// seen from the bucket.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{LeakyBucketMeter, LeakyBucketOptions, Limiter, ManualClock};
///
/// let clock = ManualClock::new();
/// // Capacity 4, leaking 1 unit every 250 ms.
/// let meter =
///     LeakyBucketMeter::with_clock(LeakyBucketOptions::new(4, 1, Duration::from_millis(250)), &clock)
///         .unwrap();
/// let _burst = meter.try_acquire(4).unwrap(); // fills it
/// assert_eq!(meter.try_acquire(1).unwrap_err().retry_after(), Some(Duration::from_millis(250)));
/// clock.advance(Duration::from_millis(600)); // 2.4 units drained
/// assert_eq!(meter.available_permits(), 2);
/// ```
#[derive(Debug)]
pub struct LeakyBucketMeter<C: Clock = crate::clock::DefaultClock, Q = WaitQueue> {
    core: GcraCore<C, Q>,
    /// The options in force (changed by `reconfigure`, under the queue lock, or under this lock
    /// without a queue).
    options: crate::wait::Lock<LeakyBucketOptions>,
}

impl<C: Clock> LeakyBucketMeter<C> {
    /// Changes the capacity, the leak rate and the queue limit while the meter is in use,
    /// by GCRA's rule ([`GcraLimiter::reconfigure`](crate::GcraLimiter::reconfigure)): the
    /// level keeps what it holds and drains at the new rate from the change on; a level above
    /// a lowered capacity admits nothing until it drains below it; waiters asking for more than
    /// the new capacity are failed with [`Reason::ExceedsLimit`](crate::Reason::ExceedsLimit).
    /// Refused, changing nothing: invalid options, or a different queue order
    /// ([`OptionsError::FixedAtCreation`]).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{LeakyBucketMeter, LeakyBucketOptions, Limiter, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let sec = Duration::from_secs(1);
    /// let meter = LeakyBucketMeter::with_clock(LeakyBucketOptions::new(10, 1, sec), &clock).unwrap();
    /// meter.try_acquire(6).unwrap().forget();
    /// meter.reconfigure(LeakyBucketOptions::new(5, 1, sec)).unwrap();
    /// assert!(meter.try_acquire(1).is_err()); // level 6 over a capacity of 5
    /// clock.advance(2 * sec); // drains to 4
    /// assert!(meter.try_acquire(1).is_ok());
    /// ```
    pub fn reconfigure(&self, options: LeakyBucketOptions) -> Result<(), OptionsError> {
        let p = self.checked(&options)?;
        self.core.reconfigure(self, p, options.queue_limit, || {
            self.options.with(|o| *o = options);
        });
        Ok(())
    }
}

impl<C: Clock, Q: QueueKind> LeakyBucketMeter<C, Q> {
    fn build(options: LeakyBucketOptions, clock: C) -> Result<Self, OptionsError> {
        let params = options.params()?;
        let queue = Q::for_options(options.queue_limit, options.queue_order)?;
        Ok(Self {
            core: GcraCore::new(params, queue, clock),
            options: crate::wait::Lock::new(options),
        })
    }

    /// The options in force: those the meter was built with, as last
    /// [`reconfigure`](Self::reconfigure)d.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{LeakyBucketMeter, LeakyBucketOptions, ManualClock};
    ///
    /// let opts = LeakyBucketOptions::new(3, 1, Duration::from_secs(1));
    /// let meter = LeakyBucketMeter::with_clock(opts, ManualClock::new()).unwrap();
    /// assert_eq!(meter.options(), opts);
    /// ```
    pub fn options(&self) -> LeakyBucketOptions {
        self.options.with(|o| *o)
    }

    /// `options`' parameters, if valid and with the queue order this meter was built with.
    fn checked(&self, options: &LeakyBucketOptions) -> Result<Params, OptionsError> {
        let p = options.params()?;
        unchanged::<Q>(true, options.queue_order, self.options().queue_order)?;
        Ok(p)
    }
}

impl<C: Clock, Q> LeakyBucketMeter<C, Q> {
    crate::sync::const_unless_loom! {
        /// A meter of valid `options` whose time counts from the clock's epoch.
        fn at_epoch_with(options: LeakyBucketOptions, queue: Q, clock: C) -> Self {
            let params = OptionsError::valid_in_const(options.params());
            Self {
                core: GcraCore::at(params, queue, clock, crate::clock::Instant::ZERO),
                options: crate::wait::Lock::new(options),
            }
        }
    }
}

crate::core_common::rate_limiter_front! {
    LeakyBucketMeter, LeakyBucketOptions, "leaky bucket meter",
    apply = |l, params, options| {
        l.options.with(|o| {
            l.core.set_params(params);
            *o = options;
        })
    },
    new: "LeakyBucketOptions::new(3, 1, Duration::from_secs(1))",
    queued: "LeakyBucketOptions::new(1, 10, Duration::from_secs(1)).with_queue(1, QueueOrder::OldestFirst)",
}

/// Options of a [`LeakyBucketShaper`].
///
/// ```
/// use core::time::Duration;
/// use tollgate::ShaperOptions;
///
/// let opts = ShaperOptions::per_second(20); // one departure every 50 ms
/// assert_eq!(opts.interval, Duration::from_millis(50));
/// assert_eq!((opts.max_permits, opts.queue_limit), (1, 20));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ShaperOptions {
    /// One permit departs every `interval`. Longer than zero.
    pub interval: Duration,
    /// The largest request, in permits (a request of `n` holds `n` consecutive slots). At
    /// least 1; `max_permits · interval` must be under 2^61 ns.
    pub max_permits: u32,
    /// Permits that may wait for their departure slot: the bucket's size.
    pub queue_limit: u32,
    /// The order queued requests are served in.
    pub queue_order: QueueOrder,
}

impl ShaperOptions {
    /// `n` departures per `period`, one every `period / n` (rounded up); requests of one permit;
    /// a queue of `n` permits (one period of backlog), oldest first.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::ShaperOptions;
    ///
    /// let opts = ShaperOptions::per(Duration::from_secs(1), 4);
    /// assert_eq!((opts.interval, opts.queue_limit), (Duration::from_millis(250), 4));
    /// ```
    pub const fn per(period: Duration, n: u32) -> Self {
        Self {
            interval: interval_of(period, n),
            // `per(_, 0)` is refused as a zero limit, not as the zero interval it implies.
            max_permits: if n == 0 { 0 } else { 1 },
            queue_limit: n,
            queue_order: QueueOrder::OldestFirst,
        }
    }

    /// The same options allowing requests of up to `max` permits.
    ///
    /// ```
    /// use tollgate::ShaperOptions;
    ///
    /// assert_eq!(ShaperOptions::per_second(10).with_max_permits(5).max_permits, 5);
    /// ```
    pub const fn with_max_permits(self, max: u32) -> Self {
        Self {
            max_permits: max,
            ..self
        }
    }

    /// Checks every option; returns the interval in nanoseconds.
    ///
    /// ```
    /// use tollgate::{OptionsError, ShaperOptions};
    ///
    /// assert_eq!(ShaperOptions::per_second(0).validate(), Err(OptionsError::ZeroLimit));
    /// assert_eq!(ShaperOptions::per_second(1).validate(), Ok(1_000_000_000));
    /// ```
    pub fn validate(&self) -> Result<u64, OptionsError> {
        params(self.interval, self.max_permits, true).map(|p| p.interval)
    }
}

crate::gcra::gcra_limiter! {
    /// The leaky bucket as a queue — a traffic shaper: permits depart at a constant rate, one every
    /// `interval`, never two at once, whatever arrives.
    ///
    /// - [`try_acquire`](crate::Limiter::try_acquire) succeeds only if the request can depart **now**
    ///   (the previous departures' slots are over); otherwise its RetryAfter is the time to its slot,
    ///   behind everyone queued.
    /// - [`acquire(n).await`](Self::acquire) joins the queue (bounded by `queue_limit` permits, the
    ///   bucket's size; beyond it the request is rejected with `QueueFull`) and completes at the
    ///   request's departure slot — as soon as someone serves the queue then: a `Driver` (feature
    ///   `std`), [`replenish`](crate::Replenishing::replenish) at
    ///   [`next_service`](crate::Replenishing::next_service), or any later acquisition.
    ///   [`acquire_blocking`](Self::acquire_blocking) wakes itself.
    ///
    /// An idle spell banks nothing: after any pause the next request departs at once and the one
    /// after it waits a full interval. The state is GCRA's 64-bit word (the next free slot).
    ///
    /// ```
    /// use core::future::Future;
    /// use core::pin::pin;
    /// use core::task::{Context, Poll, Waker};
    /// use core::time::Duration;
    /// use tollgate::{LeakyBucketShaper, Limiter, ManualClock, Replenishing, ShaperOptions};
    ///
    /// let clock = ManualClock::new();
    /// let shaper = LeakyBucketShaper::with_clock(ShaperOptions::per_second(10), &clock).unwrap();
    /// let _first = shaper.try_acquire(1).unwrap(); // departs now
    /// let refused = shaper.try_acquire(1).unwrap_err();
    /// assert_eq!(refused.retry_after(), Some(Duration::from_millis(100)));
    ///
    /// // Queued instead: it completes at its slot, 100 ms in.
    /// let mut cx = Context::from_waker(Waker::noop());
    /// let mut second = pin!(shaper.acquire(1));
    /// assert!(second.as_mut().poll(&mut cx).is_pending());
    /// assert_eq!(shaper.next_service(), Some(Duration::from_millis(100)));
    /// clock.advance(Duration::from_millis(100));
    /// shaper.replenish();
    /// assert!(matches!(second.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
    /// ```
    pub struct LeakyBucketShaper(ShaperOptions { max_permits }, shape: true);
    front: "leaky bucket shaper", new: "ShaperOptions::per_second(10).with_max_permits(2)",
    unqueued: "ShaperOptions::per_second(10).with_queue(0, QueueOrder::OldestFirst)",
    queued: "ShaperOptions::per_second(10)";
    /// Changes the departure interval, the largest request and the queue limit while the
    /// shaper is in use, by GCRA's rule
    /// ([`GcraLimiter::reconfigure`](crate::GcraLimiter::reconfigure)): departures already
    /// scheduled keep their slots, and the next ones are spaced by the new interval; waiters
    /// asking for more than the new largest request are failed with
    /// [`Reason::ExceedsLimit`](crate::Reason::ExceedsLimit), the rest keep their places.
    /// Refused, changing nothing: invalid options, or a different queue order
    /// ([`OptionsError::FixedAtCreation`]).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{LeakyBucketShaper, Limiter, ManualClock, ShaperOptions};
    ///
    /// let clock = ManualClock::new();
    /// let shaper = LeakyBucketShaper::with_clock(ShaperOptions::per_second(10), &clock).unwrap();
    /// shaper.try_acquire(1).unwrap().forget(); // the next slot: 100 ms
    /// shaper.reconfigure(ShaperOptions::per_second(2)).unwrap();
    /// clock.advance(Duration::from_millis(100));
    /// shaper.try_acquire(1).unwrap().forget(); // that slot kept; the next one 500 ms later
    /// assert_eq!(shaper.try_acquire(1).unwrap_err().retry_after(), Some(Duration::from_millis(500)));
    /// ```
    reconfigure;
    /// The options in force: those the shaper was built with, as last
    /// [`reconfigure`](Self::reconfigure)d.
    ///
    /// ```
    /// use tollgate::{LeakyBucketShaper, ManualClock, ShaperOptions};
    ///
    /// let shaper = LeakyBucketShaper::with_clock(ShaperOptions::per_second(3), ManualClock::new()).unwrap();
    /// assert_eq!(shaper.options().queue_limit, 3);
    /// ```
    options;
}
