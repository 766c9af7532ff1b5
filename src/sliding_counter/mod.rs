//! The sliding-window counter (approximate): the previous fixed window's count weighted by how
//! much of it the rolling window still overlaps, plus the current window's count — one word.
//!
//! A lease settled above its estimate ([`Lease::settle`](crate::Lease::settle)) counts the extra
//! in the current window, past the limit into debt (while the estimate stays within one limit
//! more): requests then wait, their RetryAfter counting it, until the weighted estimate has
//! decayed below the limit by what they ask.

mod limiter_core;
pub(crate) mod state;

use crate::clock::Clock;
use crate::options::OptionsError;
use crate::queue_kind::{unchanged, QueueKind};
use crate::ticks::nanos_of;

use limiter_core::CounterCore;

crate::options::limit_per_window! {
    /// Options of a [`SlidingCounterLimiter`].
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{QueueOrder, SlidingCounterOptions, UNBOUNDED_QUEUE};
    ///
    /// // The quota-style constructors wait by default; `new` keeps .NET's queue limit of 0.
    /// assert_eq!(
    ///     SlidingCounterOptions::per_minute(10),
    ///     SlidingCounterOptions::new(10, Duration::from_secs(60))
    ///         .with_queue(UNBOUNDED_QUEUE, QueueOrder::OldestFirst)
    /// );
    /// ```
    pub struct SlidingCounterOptions {
        /// Permits per rolling window (estimated). At least 1.
        permit_limit,
        /// The window. At least 2 ns, shorter than 2^62 ns (146 years: a refusal may wait up to
        /// two windows, which must end within the 2^63 ns a limiter reads its clock over).
        window,
    }
    "per rolling `window`", per = "per rolling `period`"
}

/// The longest window is just under this (2^62 ns, 146 years): see
/// [`SlidingCounterOptions::validate`].
const MAX_WINDOW_NS: u64 = 1 << 62;

impl SlidingCounterOptions {
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
            Some(1) => Err(OptionsError::WindowTooShort),
            Some(ns) if ns < MAX_WINDOW_NS => Ok(ns),
            _ => Err(OptionsError::PeriodTooLong),
        }
    }
}

crate::core_common::sliding_limiter! {
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
    /// With a queue ([`SlidingCounterOptions::with_queue`]), `acquire(n).await` waits for room;
    /// each waiter is counted in the window its permits first fit in, so a queue served late grants
    /// what one served at every instant would.
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
    pub struct SlidingCounterLimiter {
        core: CounterCore<C, Q>,
    }
    options: SlidingCounterOptions, front: "sliding-window counter",
    new: "SlidingCounterOptions::per_second(2)",
    queued: "SlidingCounterOptions::new(1, Duration::from_millis(50)).with_queue(1, QueueOrder::OldestFirst)";
    make = |options, window, queue, origin, clock| Self {
        core: CounterCore::new(options.permit_limit, window, queue, origin, clock),
    };
    /// Changes the permit limit and the queue limit while the limiter is in use. The counts
    /// already taken stay counted: under a lowered limit it refuses until the weighted count of
    /// the rolling window falls below the new limit; under a raised one it has room at once (and
    /// serves its waiters). Waiters for more than the new limit are failed with
    /// [`Reason::ExceedsLimit`](crate::Reason::ExceedsLimit). Refused, changing nothing: invalid
    /// options (as [`with_clock`](Self::with_clock) refuses them), or a different window or
    /// queue order ([`OptionsError::FixedAtCreation`]).
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
    reconfigure;
}

impl<C: Clock, Q: QueueKind> SlidingCounterLimiter<C, Q> {
    /// The options in force: those the limiter was built with, as last
    /// [`reconfigure`](Self::reconfigure)d.
    ///
    /// ```
    /// use tollgate::{ManualClock, SlidingCounterLimiter, SlidingCounterOptions};
    ///
    /// let c = SlidingCounterLimiter::with_clock(SlidingCounterOptions::per_second(2), ManualClock::new()).unwrap();
    /// assert_eq!(c.options().permit_limit, 2);
    /// ```
    pub fn options(&self) -> SlidingCounterOptions {
        let q = &self.core.base.queue;
        SlidingCounterOptions::new(self.core.limit(), self.core.period())
            .with_queue(q.queue_limit(), q.order())
    }

    /// The limit of `options`, if valid, with the window and queue order this limiter was built
    /// with.
    fn checked(&self, options: &SlidingCounterOptions) -> Result<u32, OptionsError> {
        options.validate()?;
        let before = self.options();
        let same = options.window == before.window;
        unchanged::<Q>(same, options.queue_order, before.queue_order)?;
        Ok(options.permit_limit)
    }
}
