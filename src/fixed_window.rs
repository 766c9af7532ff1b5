//! The fixed window: at most `permit_limit` permits per window; the count resets at every window
//! boundary.

use crate::bucket::state::Refill;
use crate::bucket::BucketCore;
use crate::clock::Clock;
use crate::options::OptionsError;
use crate::queue_kind::{unchanged, QueueKind};
use crate::token_bucket::TokenBucketOptions;

crate::options::limit_per_window! {
    /// Options of a [`FixedWindowLimiter`] (.NET `FixedWindowRateLimiterOptions`, without
    /// `AutoReplenishment`: windows are computed from the clock).
    pub struct FixedWindowOptions {
        /// Permits per window. At least 1.
        #[doc(alias = "PermitLimit")]
        permit_limit,
        /// The window. Longer than zero, shorter than 2^63 ns (292 years: a limiter reads
        /// its clock as stepped back from 2^63 ns after its creation on, so a longer period would
        /// never end).
        #[doc(alias = "Window")]
        window,
    }
    "per `window`"
}

impl FixedWindowOptions {
    /// The window as a token bucket: `permit_limit` tokens, all back at every boundary.
    pub(crate) const fn as_bucket(&self) -> TokenBucketOptions {
        TokenBucketOptions::new(self.permit_limit, self.permit_limit, self.window)
    }

    const fn refill(&self) -> Refill {
        self.as_bucket().refill()
    }

    /// The window of a bucket of options (as [`as_bucket`](Self::as_bucket) makes them).
    const fn from_bucket(b: TokenBucketOptions) -> Self {
        Self {
            permit_limit: b.token_limit,
            window: b.replenishment_period,
            queue_limit: b.queue_limit,
            queue_order: b.queue_order,
        }
    }

    /// Checks every option; returns the window in nanoseconds.
    pub const fn validate(&self) -> Result<u64, OptionsError> {
        self.as_bucket().validate()
    }
}

crate::bucket::bucket_limiter! {
    /// A fixed window (.NET `FixedWindowRateLimiter`): at most `permit_limit` permits in each window;
    /// windows are back to back from the limiter's creation, and every boundary resets the count.
    ///
    /// A rejection's RetryAfter is the time to the next window boundary. The state is the token
    /// bucket's (a window is a bucket that refills completely at each boundary): one word updated
    /// by one compare-and-swap, 64 bits where the limit and the window count fit beside each
    /// other (a limit below 2^27 with 1 s windows), else 128.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{FixedWindowLimiter, FixedWindowOptions, Limiter, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let opts = FixedWindowOptions::new(100, Duration::from_secs(60));
    /// let window = FixedWindowLimiter::with_clock(opts, &clock).unwrap();
    /// let _ = window.try_acquire(100).unwrap();
    /// assert!(window.try_acquire(1).is_err());
    /// clock.advance(Duration::from_secs(60));
    /// assert_eq!(window.available_permits(), 100);
    /// ```
    ///
    /// The second parameter is the kind of queue: a wait queue by default; [`NoQueue`](crate::NoQueue) for a
    /// window that only decides at once, with none of the queue's code or memory (built by
    /// [`without_queue`](FixedWindowLimiter::without_queue) and
    /// [`at_epoch_without_queue`](FixedWindowLimiter::at_epoch_without_queue)).
    pub struct FixedWindowLimiter(FixedWindowOptions { window });
    front: "fixed window", new: "FixedWindowOptions::new(2, Duration::from_secs(1))",
    queued: "FixedWindowOptions::new(1, Duration::from_millis(100)).with_queue(1, QueueOrder::OldestFirst)";
    /// Changes the permit limit and the queue limit while the limiter is in use, by the token
    /// bucket's rule ([`TokenBucketLimiter::reconfigure`](crate::TokenBucketLimiter::reconfigure)):
    /// permits left in the current window clamp to a lowered limit, a raised one takes effect
    /// from the next window (the current window keeps what is left of it), waiters asking for
    /// more than the new limit are failed with
    /// [`Reason::ExceedsLimit`](crate::Reason::ExceedsLimit) and the rest are served as far as
    /// the window allows. Refused, changing nothing: invalid options, a different window or
    /// queue order ([`OptionsError::FixedAtCreation`]), or a limit the state word laid out at
    /// creation cannot hold ([`OptionsError::LimitTooLarge`]).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{FixedWindowLimiter, FixedWindowOptions, Limiter, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let minute = Duration::from_secs(60);
    /// let window = FixedWindowLimiter::with_clock(FixedWindowOptions::new(100, minute), &clock).unwrap();
    /// window.try_acquire(30).unwrap().forget();
    /// window.reconfigure(FixedWindowOptions::new(50, minute)).unwrap();
    /// assert_eq!(window.available_permits(), 50); // 70 left, clamped to the new limit
    /// clock.advance(minute);
    /// window.try_acquire(50).unwrap().forget();
    /// assert!(window.try_acquire(1).is_err());
    /// ```
    reconfigure;
}
