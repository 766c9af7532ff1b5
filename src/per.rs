//! Quota-style constructors: `per_second(n)`, `per_minute(n)`, `per_hour(n)`, `per(period, n)`,
//! and `.with_burst(b)` on the token bucket — the vocabulary governor users know — beside the
//! positional, .NET-shaped `new` constructors.
//!
//! What each means:
//!
//! | constructor | token bucket | fixed window | sliding window |
//! |---|---|---|---|
//! | `per(period, n)` | **smooth**: one token every `period / n` (rounded up to the ns), bucket of `n` | `n` permits per window of `period` (whole windows) | `n` permits per rolling `period`, in [`DEFAULT_SEGMENTS`] segments |
//! | `.with_burst(b)` | a bucket of `b` tokens instead of `n` | — | — |
//!
//! `per_second(n)`, `per_minute(n)` and `per_hour(n)` are `per(1 s, n)`, `per(60 s, n)` and
//! `per(3600 s, n)` for every options type that has a `per`: the three above, GCRA, the leaky
//! shaper, the sliding counter and the sliding log.
//!
//! The token bucket built by `per_second(50)` gains one token every 20 ms, as governor's
//! `Quota::per_second(50)` does, rather than 50 at once each second
//! (`TokenBucketOptions::new(50, 50, 1s)`, the .NET shape, which is still there). When `period`
//! is not a whole number of nanoseconds per token, the interval is rounded **up**, so the rate is
//! never above `n` per `period` (it is below by less than one nanosecond per token).
//!
//! **They wait.** Unlike the .NET-shaped `new` (queue limit 0, as in .NET), the quota-style
//! constructors give the options an unbounded queue, oldest first
//! ([`UNBOUNDED_QUEUE`]): `acquire(n).await` waits for its permits, as a
//! Rust user reads it. A waiter costs no memory of the limiter's (its node lives in its future),
//! so the bound is the number of futures you create; set one with `with_queue`. A limiter built
//! without a queue (`without_queue`, `at_epoch_without_queue`) accepts this default and ignores
//! it; the HTTP layer waits only where a policy asks to (`Policy::queue`).
//!
//! A zero `n` or `period` is not a panic: it gives options whose validation fails at
//! construction with the matching [`OptionsError`](crate::OptionsError).

use core::time::Duration;

use crate::fixed_window::FixedWindowOptions;
use crate::gcra::GcraOptions;
use crate::leaky_bucket::ShaperOptions;
use crate::options::QueueOrder;
use crate::options::UNBOUNDED_QUEUE;
use crate::sliding_counter::SlidingCounterOptions;
use crate::sliding_log::SlidingLogOptions;
use crate::sliding_window::SlidingWindowOptions;
use crate::token_bucket::TokenBucketOptions;

/// Segments of a sliding window built by the quota-style constructors (within the default ring
/// capacity of 16).
///
/// ```
/// use core::time::Duration;
/// use tollgate::{per::DEFAULT_SEGMENTS, SlidingWindowOptions};
///
/// let opts = SlidingWindowOptions::per_minute(120);
/// assert_eq!(opts.segments_per_window, DEFAULT_SEGMENTS); // 6 s segments
/// assert_eq!(opts.window / DEFAULT_SEGMENTS, Duration::from_secs(6));
/// ```
pub const DEFAULT_SEGMENTS: u32 = 10;

const SECOND: Duration = Duration::from_secs(1);
const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

/// `period / n`, rounded up to the nanosecond; zero when `n` is zero (validation then refuses it
/// as a zero limit) or `period` is zero.
const fn interval(period: Duration, n: u32) -> Duration {
    if n == 0 {
        return Duration::ZERO;
    }
    let nanos = period.as_nanos();
    let n = n as u128;
    let each = nanos / n + if nanos % n == 0 { 0 } else { 1 };
    // Every u32 divides a Duration's nanoseconds into something that fits back.
    Duration::new((each / 1_000_000_000) as u64, (each % 1_000_000_000) as u32)
}

impl TokenBucketOptions {
    /// `n` tokens per `period`, spread evenly: one token every `period / n` (rounded up), and a
    /// bucket of `n` tokens (change it with [`with_burst`](Self::with_burst)).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Limiter, ManualClock, TokenBucketLimiter, TokenBucketOptions};
    ///
    /// let opts = TokenBucketOptions::per(Duration::from_secs(1), 50);
    /// assert_eq!(opts.replenishment_period, Duration::from_millis(20));
    /// assert_eq!((opts.token_limit, opts.tokens_per_period), (50, 1));
    ///
    /// let clock = ManualClock::new();
    /// let bucket = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    /// let _burst = bucket.try_acquire(50).unwrap();
    /// clock.advance(Duration::from_millis(20)); // one token back, not fifty
    /// assert_eq!(bucket.available_permits(), 1);
    /// ```
    pub const fn per(period: Duration, n: u32) -> Self {
        Self::new(n, 1, interval(period, n)).with_queue(UNBOUNDED_QUEUE, QueueOrder::OldestFirst)
    }

    /// The same rate with a bucket of `burst` tokens: how many may be taken at once after an
    /// idle spell. A zero burst fails validation at construction.
    ///
    /// ```
    /// use tollgate::{Limiter, ManualClock, TokenBucketLimiter, TokenBucketOptions};
    ///
    /// let clock = ManualClock::new();
    /// let bucket =
    ///     TokenBucketLimiter::with_clock(TokenBucketOptions::per_second(10).with_burst(3), &clock)
    ///         .unwrap();
    /// assert_eq!(bucket.available_permits(), 3);
    /// assert!(bucket.try_acquire(4).is_err());
    /// ```
    pub const fn with_burst(self, burst: u32) -> Self {
        Self {
            token_limit: burst,
            ..self
        }
    }
}

impl FixedWindowOptions {
    /// `n` permits per window of `period` (the window of [`new`](Self::new): a fixed window
    /// renews its permits at once at each boundary), waiting by default
    /// ([`UNBOUNDED_QUEUE`](crate::UNBOUNDED_QUEUE)).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{FixedWindowOptions, QueueOrder, UNBOUNDED_QUEUE};
    ///
    /// assert_eq!(
    ///     FixedWindowOptions::per(Duration::from_secs(10), 5),
    ///     FixedWindowOptions::new(5, Duration::from_secs(10))
    ///         .with_queue(UNBOUNDED_QUEUE, QueueOrder::OldestFirst)
    /// );
    /// ```
    pub const fn per(period: Duration, n: u32) -> Self {
        Self::new(n, period).with_queue(UNBOUNDED_QUEUE, QueueOrder::OldestFirst)
    }
}

impl SlidingWindowOptions {
    /// `n` permits in any rolling `period`, tracked in [`DEFAULT_SEGMENTS`] segments (a permit
    /// comes back when its segment leaves the window; use [`new`](Self::new) to choose the
    /// segments).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{per::DEFAULT_SEGMENTS, QueueOrder, SlidingWindowOptions, UNBOUNDED_QUEUE};
    ///
    /// let opts = SlidingWindowOptions::per(Duration::from_secs(60), 100);
    /// let new = SlidingWindowOptions::new(100, Duration::from_secs(60), DEFAULT_SEGMENTS);
    /// assert_eq!(opts, new.with_queue(UNBOUNDED_QUEUE, QueueOrder::OldestFirst));
    /// ```
    pub const fn per(period: Duration, n: u32) -> Self {
        Self::new(n, period, DEFAULT_SEGMENTS).with_queue(UNBOUNDED_QUEUE, QueueOrder::OldestFirst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Limiter, ManualClock, OptionsError, TokenBucketLimiter};

    #[test]
    fn interval_rounds_up_and_never_overflows() {
        assert_eq!(interval(SECOND, 3), Duration::from_nanos(333_333_334));
        assert_eq!(interval(SECOND, 1), SECOND);
        assert_eq!(interval(SECOND, 0), Duration::ZERO);
        assert_eq!(interval(Duration::ZERO, 7), Duration::ZERO);
        assert_eq!(interval(Duration::MAX, 1), Duration::MAX);
        assert_eq!(
            interval(SECOND, u32::MAX),
            Duration::from_nanos(1) // 1e9 / 4.29e9 rounds up to one nanosecond
        );
    }

    #[test]
    fn zero_quota_is_a_typed_error_not_a_panic() {
        let clock = ManualClock::new();
        assert_eq!(
            TokenBucketLimiter::with_clock(TokenBucketOptions::per_second(0), &clock).unwrap_err(),
            OptionsError::ZeroLimit
        );
        assert_eq!(
            TokenBucketLimiter::with_clock(TokenBucketOptions::per_second(5).with_burst(0), &clock)
                .unwrap_err(),
            OptionsError::ZeroLimit
        );
    }

    #[test]
    fn per_second_never_exceeds_the_quota_over_a_second() {
        let clock = ManualClock::new();
        let bucket =
            TokenBucketLimiter::with_clock(TokenBucketOptions::per_second(3).with_burst(1), &clock)
                .unwrap();
        let mut admitted = 0;
        for _ in 0..=1_000 {
            if let Ok(lease) = bucket.try_acquire(1) {
                lease.forget();
                admitted += 1;
            }
            clock.advance(Duration::from_millis(1));
        }
        // The full token at t=0, then t≈333.3 ms and t≈666.7 ms; t=1 s is 2 ns short.
        assert_eq!(admitted, 3);
    }
}

/// `per_second`, `per_minute` and `per_hour` from each type's own `per(period, n)`: one
/// definition for every options type with a quota-style constructor.
macro_rules! per_units {
    // A row of the roster marked `per`.
    (@flagged $ty:ident, per) => {
        per_units!($ty);
    };
    ($($ty:ident),+ $(,)?) => {$(
        impl $ty {
            per_units!(@unit $ty, per_second, SECOND, "second", "1", 4);
            per_units!(@unit $ty, per_minute, MINUTE, "minute", "60", 6);
            per_units!(@unit $ty, per_hour, HOUR, "hour", "3600", 60);
        }
    )+};
    // One of them: `n` per `$unit` (`$secs` seconds, the `$period` constant), its example with
    // `n = $n`.
    (@unit $ty:ident, $name:ident, $period:ident, $unit:literal, $secs:literal, $n:literal) => {
        #[doc = concat!("`n` per ", $unit, ": [`per`](Self::per)`(", $secs, " s, n)`.")]
        ///
        #[doc = concat!(
            "```\n",
            "use core::time::Duration;\n",
            "use tollgate::", stringify!($ty), ";\n",
            "\n",
            "let ", $unit, " = Duration::from_secs(", $secs, ");\n",
            "assert_eq!(", stringify!($ty), "::", stringify!($name), "(", stringify!($n), "), ",
            stringify!($ty), "::per(", $unit, ", ", stringify!($n), "));\n",
            "```",
        )]
        pub const fn $name(n: u32) -> Self {
            Self::per($period, n)
        }
    };
}

/// The unit constructors of every options type the roster of rate limiters marks `per`
/// ([`rate_limiters!`](crate::roster::rate_limiters)).
macro_rules! per_units_of_the_roster {
    (() $($(#[$doc:meta])* $variant:ident($m:ident::$limiter:ident, $opts:ident) $ctor:ident $(, $per:ident)?;)+) => {
        $($(per_units!(@flagged $opts, $per);)?)+
    };
}

crate::roster::rate_limiters!(per_units_of_the_roster! {});
