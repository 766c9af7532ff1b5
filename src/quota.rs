//! What a limiter has left and when it gets more: the numbers behind the IETF `RateLimit`
//! header and the legacy `X-RateLimit-*` trio.
//!
//! [`Quota::quota`] reads a limiter's state without changing it: its limit, the permits it could
//! grant now, and how long until time alone gives it at least one more (the header's `t`).
//!
//! ```
//! use core::time::Duration;
//! use tollgate::{FixedWindowLimiter, FixedWindowOptions, Limiter, ManualClock, Quota};
//!
//! let clock = ManualClock::new();
//! let limiter =
//!     FixedWindowLimiter::with_clock(FixedWindowOptions::new(10, Duration::from_secs(60)), &clock)
//!         .unwrap();
//! let _ = limiter.try_acquire(3).unwrap();
//! clock.advance(Duration::from_secs(15));
//! let q = limiter.quota();
//! assert_eq!((q.limit, q.remaining), (10, 7));
//! assert_eq!(q.reset_after, Some(Duration::from_secs(45))); // the window ends in 45 s
//! ```

use core::time::Duration;

use crate::limiter::Limiter;
use crate::noop::NoopLimiter;
use crate::wait::Source;

/// A limiter's quota at one instant.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{Limiter, ManualClock, Quota, QuotaState, TokenBucketLimiter, TokenBucketOptions};
///
/// let clock = ManualClock::new();
/// let opts = TokenBucketOptions::new(5, 1, Duration::from_secs(2));
/// let bucket = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
/// let _ = bucket.try_acquire(2).unwrap();
/// let q: QuotaState = bucket.quota();
/// // What a `RateLimit: limit=5, remaining=3, reset=2` header reports.
/// assert_eq!((q.limit, q.remaining), (5, 3));
/// assert_eq!(q.reset_after, Some(Duration::from_secs(2)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QuotaState {
    /// The most permits the limiter can ever hold available (`u64::MAX`: unlimited).
    pub limit: u64,
    /// Permits that could be acquired now (at most `limit`).
    pub remaining: u64,
    /// How long until time alone makes at least one more permit available: `None` when the
    /// limiter is full, or when only releases bring permits back (a concurrency limiter).
    pub reset_after: Option<Duration>,
}

impl QuotaState {
    /// An exhausted quota of `limit` that gets a permit back after `retry_after`, if known: what
    /// a rejection reports.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Limiter, ManualClock, QuotaState, TokenBucketLimiter, TokenBucketOptions};
    ///
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
    /// let bucket = TokenBucketLimiter::with_clock(opts, ManualClock::new()).unwrap();
    /// let _ = bucket.try_acquire(2).unwrap();
    /// let rejection = bucket.try_acquire(1).unwrap_err();
    /// let q = QuotaState::exhausted(2, rejection.retry_after());
    /// assert_eq!(q.remaining, 0);
    /// assert_eq!(q.reset_after, Some(Duration::from_secs(1))); // the next token
    /// ```
    pub const fn exhausted(limit: u64, retry_after: Option<Duration>) -> Self {
        Self {
            limit,
            remaining: 0,
            reset_after: retry_after,
        }
    }
}

/// Reports a limiter's [`QuotaState`] without changing it.
///
/// Implemented by every built-in limiter; a partitioned
/// [`KeyedLimiter`](crate::KeyedLimiter) reports each key's with
/// [`KeyedLimiter::quota`](crate::KeyedLimiter::quota).
///
/// ```
/// use core::time::Duration;
/// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter, NoopLimiter, Quota};
///
/// /// The value of a `RateLimit` header for any limiter.
/// fn header(limiter: &impl Quota) -> String {
///     let q = limiter.quota();
///     let t = q.reset_after.map_or(0, |d| d.as_secs());
///     format!("limit={}, remaining={}, reset={t}", q.limit, q.remaining)
/// }
///
/// let pool = ConcurrencyLimiter::new(ConcurrencyOptions::new(8)).unwrap();
/// let _held = pool.try_acquire(3).unwrap();
/// assert_eq!(header(&pool), "limit=8, remaining=5, reset=0");
/// assert_eq!(NoopLimiter::new().quota().remaining, u64::MAX);
/// ```
pub trait Quota {
    /// The limit, the permits available now, and when time brings more.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{FixedWindowLimiter, FixedWindowOptions, Limiter, ManualClock, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let opts = FixedWindowOptions::new(3, Duration::from_secs(10));
    /// let window = FixedWindowLimiter::with_clock(opts, &clock).unwrap();
    /// assert_eq!(window.quota().reset_after, None); // full: nothing to wait for
    /// let _ = window.try_acquire(3).unwrap();
    /// clock.advance(Duration::from_secs(4));
    /// let q = window.quota();
    /// assert_eq!((q.remaining, q.reset_after), (0, Some(Duration::from_secs(6))));
    /// ```
    fn quota(&self) -> QuotaState;
}

/// A queued limiter's quota from its side of the waiting protocol (the impls are in
/// `limiter.rs`, with `AcquireAsync`).
pub(crate) fn of_source<S: Source + Limiter + ?Sized>(s: &S) -> QuotaState {
    let limit = u64::from(s.limit());
    let remaining = s.available_permits().min(limit);
    let reset_after = if remaining >= limit {
        None
    } else {
        s.wait_for_permits(remaining + 1)
    };
    QuotaState {
        limit,
        remaining,
        reset_after,
    }
}

impl Quota for NoopLimiter {
    fn quota(&self) -> QuotaState {
        QuotaState {
            limit: u64::MAX,
            remaining: u64::MAX,
            reset_after: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::concurrency::{ConcurrencyLimiter, ConcurrencyOptions};
    use crate::fixed_window::{FixedWindowLimiter, FixedWindowOptions};
    use crate::sliding_window::{SlidingWindowLimiter, SlidingWindowOptions};
    use crate::token_bucket::{TokenBucketLimiter, TokenBucketOptions};

    #[test]
    fn token_bucket_reports_the_next_refill() {
        let clock = ManualClock::new();
        let l = TokenBucketLimiter::with_clock(
            TokenBucketOptions::new(5, 2, Duration::from_secs(10)),
            &clock,
        )
        .unwrap();
        assert_eq!(l.quota().reset_after, None);
        let _ = l.try_acquire(5).unwrap();
        clock.advance(Duration::from_secs(4));
        let q = l.quota();
        assert_eq!(q.remaining, 0);
        assert_eq!(q.reset_after, Some(Duration::from_secs(6)));
    }

    #[test]
    fn fixed_window_full_has_no_reset() {
        let clock = ManualClock::new();
        let l = FixedWindowLimiter::with_clock(
            FixedWindowOptions::new(2, Duration::from_secs(1)),
            &clock,
        )
        .unwrap();
        assert_eq!(
            l.quota(),
            QuotaState {
                limit: 2,
                remaining: 2,
                reset_after: None
            }
        );
    }

    #[test]
    fn sliding_window_reports_when_a_segment_leaves() {
        let clock = ManualClock::new();
        let l = SlidingWindowLimiter::<_, 16>::with_capacity(
            SlidingWindowOptions::new(4, Duration::from_secs(4), 4),
            &clock,
        )
        .unwrap();
        let _ = l.try_acquire(4).unwrap();
        let q = l.quota();
        assert_eq!(q.remaining, 0);
        assert!(q
            .reset_after
            .is_some_and(|d| d > Duration::ZERO && d <= Duration::from_secs(4)));
    }

    #[cfg(feature = "std")]
    #[test]
    fn concurrency_has_no_reset() {
        let c = ConcurrencyLimiter::new(ConcurrencyOptions::new(3)).unwrap();
        let lease = c.try_acquire(2).unwrap();
        assert_eq!(
            c.quota(),
            QuotaState {
                limit: 3,
                remaining: 1,
                reset_after: None
            }
        );
        drop(lease);
    }
}
