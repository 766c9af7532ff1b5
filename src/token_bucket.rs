//! The token bucket: up to `token_limit` tokens; `tokens_per_period` come back at the start of
//! every whole period.

use core::time::Duration;

use crate::bucket::state::Refill;
use crate::bucket::BucketCore;
use crate::clock::Clock;
use crate::options::{OptionsError, QueueOrder};
use crate::queue_kind::{unchanged, QueueKind};

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
    pub(crate) const fn refill(&self) -> Refill {
        Refill {
            limit: self.token_limit,
            per_tick: self.tokens_per_period,
        }
    }

    /// Options read back from a bucket: these very ones (a fixed window converts them).
    const fn from_bucket(b: TokenBucketOptions) -> Self {
        b
    }

    /// Checks every option; returns the period in nanoseconds.
    pub const fn validate(&self) -> Result<u64, OptionsError> {
        if self.token_limit == 0 {
            return Err(OptionsError::ZeroLimit);
        }
        if self.tokens_per_period == 0 {
            return Err(OptionsError::ZeroTokensPerPeriod);
        }
        OptionsError::period_ns(self.replenishment_period)
    }
}

crate::bucket::bucket_limiter! {
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
    /// The admission state is one atomic word (tokens, tick, flags) updated by one
    /// compare-and-swap: 64 bits when every state the options can reach fits in it, else 128;
    /// on 32-bit MCUs, the unpacked state behind a critical section.
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
    /// The second parameter is the kind of queue: a wait queue by default; [`NoQueue`](crate::NoQueue) for a
    /// bucket that only decides at once, with none of the queue's code or memory (built by
    /// [`without_queue`](TokenBucketLimiter::without_queue) and
    /// [`at_epoch_without_queue`](TokenBucketLimiter::at_epoch_without_queue)).
    pub struct TokenBucketLimiter(TokenBucketOptions { replenishment_period });
    front: "token bucket", new: "TokenBucketOptions::new(2, 1, Duration::from_secs(1))",
    queued: "TokenBucketOptions::new(1, 1, Duration::from_millis(100)).with_queue(1, QueueOrder::OldestFirst)";
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
    reconfigure;
}
