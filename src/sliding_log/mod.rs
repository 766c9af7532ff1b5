//! The sliding-window log: exact counts over a rolling window, one entry per admitted request in
//! a fixed ring (no allocation).
//!
//! A lease settled above its estimate ([`Lease::settle`](crate::Lease::settle)) records the extra
//! at the settle's instant, past the limit into debt (up to one limit more in the window), as an
//! entry of its own; a ring with no free slot (never with `N ≥ 2 × limit`) folds it into its
//! newest entry, moved to that instant: counted longer than exact, never shorter. Requests then
//! wait, their RetryAfter counting it, until the entries holding the excess have left.

mod limiter_core;
pub(crate) mod state;

use crate::clock::Clock;
use crate::options::OptionsError;
use crate::queue_kind::{unchanged, QueueKind};

use limiter_core::LogCore;

crate::options::limit_per_window! {
    /// Options of a [`SlidingLogLimiter`].
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{QueueOrder, SlidingLogOptions, UNBOUNDED_QUEUE};
    ///
    /// // Article 002's "max 5 failed login attempts per minute".
    /// let logins = SlidingLogOptions::per_minute(5);
    /// let waiting = (UNBOUNDED_QUEUE, QueueOrder::OldestFirst); // the quota-style default
    /// assert_eq!(logins, SlidingLogOptions::new(5, Duration::from_secs(60)).with_queue(waiting.0, waiting.1));
    /// ```
    pub struct SlidingLogOptions {
        /// Permits per rolling window, exactly. At least 1, at most the limiter's ring capacity `N`.
        permit_limit,
        /// The window. Longer than zero, shorter than 2^63 ns (292 years: an entry must leave the
        /// window within the 2^63 ns a limiter reads its clock over).
        window,
    }
    "in any rolling `window`", per = "in any rolling `period`"
}

impl SlidingLogOptions {
    /// Checks every option against a ring of `capacity` entries; returns the window in ns.
    ///
    /// ```
    /// use tollgate::{OptionsError, SlidingLogOptions};
    ///
    /// assert_eq!(
    ///     SlidingLogOptions::per_minute(100).validate(16),
    ///     Err(OptionsError::ExceedsCapacity { max: 16 })
    /// );
    /// ```
    pub const fn validate(&self, capacity: usize) -> Result<u64, OptionsError> {
        if self.permit_limit == 0 {
            return Err(OptionsError::ZeroLimit);
        }
        if self.permit_limit as usize > capacity {
            return Err(OptionsError::ExceedsCapacity { max: capacity });
        }
        // Under 2^63 ns: an entry must be able to leave the window before the clock's
        // horizon, or a refusal's RetryAfter could never be met.
        OptionsError::period_ns(self.window)
    }
}

crate::core_common::sliding_limiter! {
    /// The sliding-window log (article 002): the exact count of permits admitted in the last
    /// `window`, so no rolling window ever holds more than `permit_limit` — no boundary burst, no
    /// estimate.
    ///
    /// **Memory is O(limit), and honest about it:** the log keeps one entry (a 64-bit time and a
    /// 32-bit count: 16 bytes) per admitted request in a ring of `N` entries fixed at compile time
    /// (`N` ≥ `permit_limit`, checked at construction; no allocation, works without a heap).
    /// `SlidingLogLimiter<_, 64>` holds 1 KiB. Use it for low-volume, must-be-exact rules (logins,
    /// one-time passwords); for large limits the [`SlidingCounterLimiter`](crate::SlidingCounterLimiter)
    /// (one word, approximate) or the [`SlidingWindowLimiter`](crate::SlidingWindowLimiter) (segments)
    /// cost less.
    ///
    /// **Not lock-free:** the ring cannot fit a word, so it is guarded by the crate's wait-queue lock
    /// (a futex mutex with `std`, `critical-section` or a spin lock without). The lock is held for
    /// one pass over the expired entries, at most `N` steps, and never while user code runs.
    ///
    /// RetryAfter is exact: the instant enough of the oldest entries leave the window. With a queue
    /// ([`SlidingLogOptions::with_queue`]), `acquire(n).await` waits for room; a waiter served late
    /// is recorded at the instant it first fit, so its entry leaves the window when it would have.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Limiter, ManualClock, SlidingLogLimiter, SlidingLogOptions};
    ///
    /// let clock = ManualClock::new();
    /// let logins: SlidingLogLimiter<_, 5> =
    ///     SlidingLogLimiter::with_capacity(SlidingLogOptions::per_minute(5), &clock).unwrap();
    /// for _ in 0..5 {
    ///     let _ = logins.try_acquire(1).unwrap();
    ///     clock.advance(Duration::from_secs(10));
    /// }
    /// // 50 s in: the first attempt (at 0 s) leaves the window at 60 s.
    /// let denied = logins.try_acquire(1).unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(Duration::from_secs(10)));
    /// clock.advance(Duration::from_secs(10));
    /// assert!(logins.try_acquire(1).is_ok());
    /// ```
    pub struct SlidingLogLimiter<const N = 16> {
        core: LogCore<C, N, Q>,
    }
    options: SlidingLogOptions, front: "sliding log",
    new: "SlidingLogOptions::per_second(2)",
    queued: "SlidingLogOptions::new(1, Duration::from_millis(100)).with_queue(1, QueueOrder::OldestFirst)";
    make = |options, window, queue, origin, clock| Self {
        core: LogCore::new(options.permit_limit, window, queue, origin, clock),
    };
    with_capacity {
        /// A sliding log reading time from `clock`, with a ring of `N` entries (at least the
        /// options' limit). With a wait queue, unless the limiter's type says [`NoQueue`](crate::NoQueue) (whose
        /// options' queue limit must then be 0: [`OptionsError::NoWaitQueue`]).
        ///
        /// ```
        /// use tollgate::{ManualClock, NoQueue, OptionsError, SlidingLogLimiter, SlidingLogOptions};
        ///
        /// let big = SlidingLogLimiter::<_, 100>::with_capacity(SlidingLogOptions::per_second(100), ManualClock::new());
        /// assert!(big.is_ok());
        /// let too_many = SlidingLogLimiter::<_, 4>::with_capacity(SlidingLogOptions::per_second(5), ManualClock::new());
        /// assert_eq!(too_many.unwrap_err(), OptionsError::ExceedsCapacity { max: 4 });
        /// let bare = SlidingLogLimiter::<_, 100, NoQueue>::with_capacity(SlidingLogOptions::per_second(100), ManualClock::new());
        /// assert!(bare.is_ok());
        /// ```
    }
    /// Changes the permit limit and the queue limit while the limiter is in use, the limit up
    /// to the ring's capacity `N`. The log keeps its entries: under a lowered limit it refuses
    /// until enough of them leave the window, so no rolling window that ends after the change
    /// and admits anything holds more than the new limit; under a raised one it has room at
    /// once (and serves its waiters). Waiters for more than the new limit are failed with
    /// [`Reason::ExceedsLimit`](crate::Reason::ExceedsLimit). Refused, changing nothing:
    /// invalid options, a limit above `N` ([`OptionsError::ExceedsCapacity`]), or a different
    /// window or queue order ([`OptionsError::FixedAtCreation`]).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Limiter, ManualClock, OptionsError, SlidingLogLimiter, SlidingLogOptions};
    ///
    /// let clock = ManualClock::new();
    /// let minute = Duration::from_secs(60);
    /// let log = SlidingLogLimiter::<_, 8>::with_capacity(SlidingLogOptions::new(4, minute), &clock).unwrap();
    /// log.try_acquire(3).unwrap().forget();
    /// log.reconfigure(SlidingLogOptions::new(2, minute)).unwrap();
    /// assert!(log.try_acquire(1).is_err()); // 3 in the window, 2 allowed
    /// log.reconfigure(SlidingLogOptions::new(8, minute)).unwrap();
    /// assert_eq!(log.available_permits(), 5);
    /// let too_many = SlidingLogOptions::new(9, minute);
    /// assert_eq!(log.reconfigure(too_many), Err(OptionsError::ExceedsCapacity { max: 8 }));
    /// ```
    reconfigure;
}

impl<C: Clock, const N: usize, Q: QueueKind> core::fmt::Debug for SlidingLogLimiter<C, N, Q> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SlidingLogLimiter")
            .field("options", &self.options())
            .field("capacity", &N)
            .finish_non_exhaustive()
    }
}

impl<C: Clock> SlidingLogLimiter<C> {
    /// The entries the default ring holds, so the largest limit it takes: 16 (an entry is 16
    /// bytes).
    pub const DEFAULT_CAPACITY: usize = 16;
}

impl<C: Clock, const N: usize, Q: QueueKind> SlidingLogLimiter<C, N, Q> {
    /// The options in force: those the limiter was built with, as last
    /// [`reconfigure`](Self::reconfigure)d.
    ///
    /// ```
    /// use tollgate::{ManualClock, SlidingLogLimiter, SlidingLogOptions};
    ///
    /// let log = SlidingLogLimiter::<_, 4>::with_capacity(SlidingLogOptions::per_second(4), ManualClock::new()).unwrap();
    /// assert_eq!(log.options().permit_limit, 4);
    /// ```
    pub fn options(&self) -> SlidingLogOptions {
        let q = &self.core.base.queue;
        SlidingLogOptions::new(self.core.limit(), self.core.period())
            .with_queue(q.queue_limit(), q.order())
    }

    /// The limit of `options`, if valid for a ring of `N`, with the window and queue order this
    /// limiter was built with.
    fn checked(&self, options: &SlidingLogOptions) -> Result<u32, OptionsError> {
        options.validate(N)?;
        let before = self.options();
        let same = options.window == before.window;
        unchanged::<Q>(same, options.queue_order, before.queue_order)?;
        Ok(options.permit_limit)
    }

    /// Bytes of the ring (`N` entries of 16 bytes): the memory the exact count costs.
    ///
    /// ```
    /// use tollgate::{ManualClock, SlidingLogLimiter, SlidingLogOptions};
    ///
    /// let log = SlidingLogLimiter::<_, 64>::with_capacity(SlidingLogOptions::per_second(64), ManualClock::new()).unwrap();
    /// assert_eq!(log.ring_bytes(), 1024);
    /// ```
    pub const fn ring_bytes(&self) -> usize {
        N * core::mem::size_of::<state::Entry>()
    }
}
