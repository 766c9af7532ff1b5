//! Embassy integration (feature `embassy-time`): a [`Clock`] over embassy's time driver, and
//! waiters woken by embassy's timer queue.
//!
//! With this feature, `limiter.acquire(n).await` on a rate limiter built on [`EmbassyClock`]
//! completes when its permits arrive, with nothing else to run: the waiter at the head of the
//! queue schedules its own wake-up with embassy's time driver for the instant the limiter names
//! (the same mechanism as `embassy_time::Timer`; no task to spawn, no allocation). Without the
//! feature, a `no_std` program serves waiters itself with
//! [`next_service`](crate::Replenishing::next_service) and
//! [`replenish`](crate::Replenishing::replenish).
//!
//! ```
//! use core::time::Duration;
//! use tollgate::embassy::EmbassyClock;
//! use tollgate::{Limiter, QueueOrder, TokenBucketLimiter, TokenBucketOptions};
//! use embassy_time as _; // links a time driver: here embassy's std one; on an MCU, your HAL's
//!
//! let opts = TokenBucketOptions::new(1, 1, Duration::from_millis(20))
//!     .with_queue(4, QueueOrder::OldestFirst);
//! let bucket = TokenBucketLimiter::with_clock(opts, EmbassyClock).unwrap();
//! let _first = bucket.try_acquire(1).unwrap();
//! // Queued: embassy's timer wakes the task when the next token arrives, 20 ms later.
//! let lease = embassy_futures::block_on(bucket.acquire(1)).unwrap();
//! assert_eq!(lease.permits(), 1);
//! ```

use crate::clock::{Clock, Instant};

/// Embassy's monotonic time (`embassy_time_driver::now()`, in the driver's ticks), in
/// nanoseconds since the driver's epoch. A rate limiter on this clock has its waiters woken by
/// embassy's timer queue.
///
/// Ticks are converted exactly (`ticks × 10⁹ / TICK_HZ`, rounded down), so a 1 MHz driver gives
/// microsecond resolution and a 32,768 Hz one about 30.5 µs.
///
/// ```
/// use core::time::Duration;
/// use tollgate::embassy::EmbassyClock;
/// use tollgate::{Clock, FixedWindowLimiter, FixedWindowOptions, Limiter};
/// use embassy_time as _; // the time driver (embassy's std one here)
///
/// let (a, b) = (EmbassyClock.now(), EmbassyClock.now());
/// assert!(b >= a); // monotonic
/// assert!(EmbassyClock.advances_by_itself()); // so waiters arm embassy's timer
/// // 10 messages a second to the radio.
/// let radio = FixedWindowLimiter::with_clock(FixedWindowOptions::new(10, Duration::from_secs(1)), EmbassyClock).unwrap();
/// assert!(radio.try_acquire(10).is_ok());
/// assert!(radio.try_acquire(1).is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EmbassyClock;

impl Clock for EmbassyClock {
    #[inline]
    fn now(&self) -> Instant {
        let ticks = u128::from(embassy_time_driver::now());
        let nanos = ticks * 1_000_000_000 / u128::from(embassy_time_driver::TICK_HZ);
        Instant::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// `true`: embassy's time moves on its own, so waiters arm embassy's timer.
    fn advances_by_itself(&self) -> bool {
        true
    }
}
