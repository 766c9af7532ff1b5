//! The sliding window: at most `permit_limit` permits in any window of `segments_per_window`
//! consecutive segments; permits come back when their segment leaves the window.
//!
//! A lease settled above its estimate ([`Lease::settle`](crate::Lease::settle)) counts the extra
//! in the current segment, past the limit into debt (up to one limit more in the window; less
//! where the header's count fields could not hold twice the limit): requests then wait, their
//! RetryAfter counting it, until the segments holding the excess have left the window.

mod limiter_core;
mod state;

use core::time::Duration;

use crate::clock::Clock;
use crate::options::{OptionsError, QueueOrder};
use crate::queue_kind::{unchanged, QueueKind};

use limiter_core::WindowCore;

/// Options of a [`SlidingWindowLimiter`] (.NET `SlidingWindowRateLimiterOptions`, without
/// `AutoReplenishment`: the window slides with the clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct SlidingWindowOptions {
    /// Permits per window. At least 1.
    #[doc(alias = "PermitLimit")]
    pub permit_limit: u32,
    /// The window. Its segment is `window / segments_per_window`, in whole nanoseconds (as .NET
    /// divides ticks); at least 1 ns. The window is shorter than 2^63 ns (292 years: a limiter
    /// reads its clock as stepped back from 2^63 ns after its creation on).
    #[doc(alias = "Window")]
    pub window: Duration,
    /// Segments per window: at least 1 and at most the limiter's capacity `N`.
    #[doc(alias = "SegmentsPerWindow")]
    pub segments_per_window: u32,
    /// Permits that may wait in the queue (for waiting acquisitions).
    #[doc(alias = "QueueLimit")]
    pub queue_limit: u32,
    /// The order queued requests are served in.
    #[doc(alias = "QueueProcessingOrder")]
    pub queue_order: QueueOrder,
}

impl SlidingWindowOptions {
    /// `permit_limit` permits per `window` of `segments` segments; no queue.
    pub const fn new(permit_limit: u32, window: Duration, segments: u32) -> Self {
        Self {
            permit_limit,
            window,
            segments_per_window: segments,
            queue_limit: 0,
            queue_order: QueueOrder::OldestFirst,
        }
    }

    /// Checks every option against a ring of `max_segments` slots; returns the segment in
    /// nanoseconds.
    pub const fn validate(&self, max_segments: usize) -> Result<u64, OptionsError> {
        if self.permit_limit == 0 {
            return Err(OptionsError::ZeroLimit);
        }
        if self.segments_per_window == 0 {
            return Err(OptionsError::ZeroSegments);
        }
        if self.segments_per_window as usize > max_segments {
            return Err(OptionsError::TooManySegments { max: max_segments });
        }
        match OptionsError::period_ns(self.window) {
            Ok(ns) if ns / self.segments_per_window as u64 == 0 => {
                Err(OptionsError::SegmentTooShort)
            }
            Ok(ns) => Ok(ns / self.segments_per_window as u64),
            Err(e) => Err(e),
        }
    }
}

crate::core_common::sliding_limiter! {
    /// A sliding window (.NET `SlidingWindowRateLimiter`): the window is divided into segments;
    /// permits taken during a segment count against the limit until that segment leaves the window,
    /// then come back.
    ///
    /// `N` is the capacity of the segment ring (default 16): `segments_per_window` may be anything
    /// from 1 to `N`. The ring is inline — no allocation — and takes 16 bytes per slot.
    ///
    /// Admission is one compare-and-swap on a header holding the current segment's count and the sum
    /// of the window's earlier segments — one native 64-bit word when the counts and every segment
    /// up to the horizon fit in it (`2·bits(limit) + bits(segments in 2^63 ns) ≤ 62`: up to 16,383
    /// permits with 1 s segments, 511 with 1 ms), else 128 bits; earlier segments' counts are
    /// frozen into the ring when the window slides past them. Every rejection carries a RetryAfter: the time until enough
    /// of the oldest segments have left the window.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Limiter, ManualClock, SlidingWindowLimiter, SlidingWindowOptions};
    ///
    /// let clock = ManualClock::new();
    /// let opts = SlidingWindowOptions::new(10, Duration::from_secs(3), 3);
    /// let window = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
    /// let _ = window.try_acquire(7).unwrap();
    /// clock.advance(Duration::from_secs(1));
    /// let _ = window.try_acquire(3).unwrap();
    /// assert_eq!(window.try_acquire(1).unwrap_err().retry_after(), Some(Duration::from_secs(2)));
    /// clock.advance(Duration::from_secs(2)); // the first segment leaves the window
    /// assert_eq!(window.available_permits(), 7);
    /// ```
    #[derive(Debug)]
    pub struct SlidingWindowLimiter<const N = 16> {
        core: WindowCore<C, N, Q>,
        options: SlidingWindowOptions,
    }
    options: SlidingWindowOptions, front: "sliding window",
    new: "SlidingWindowOptions::new(2, Duration::from_secs(2), 2)",
    queued: "SlidingWindowOptions::new(1, Duration::from_millis(100), 1).with_queue(1, QueueOrder::OldestFirst)";
    make = |options, segment, queue, origin, clock| Self {
        core: WindowCore::new(&options, segment, queue, origin, clock),
        options,
    };
    with_capacity {
        /// A sliding window reading time from `clock`, with a ring of `N` segments (at least the
        /// options' `segments_per_window`: fewer bytes for coarse windows, more for fine ones);
        /// segments count from `clock.now()`. With a wait queue, unless the limiter's type says
        /// [`NoQueue`](crate::NoQueue) (whose options' queue limit must then be 0: [`OptionsError::NoWaitQueue`]).
        ///
        /// ```
        /// use core::time::Duration;
        /// use tollgate::{ManualClock, NoQueue, OptionsError, SlidingWindowLimiter, SlidingWindowOptions};
        ///
        /// let opts = SlidingWindowOptions::new(10, Duration::from_secs(60), 60);
        /// let fine = SlidingWindowLimiter::<_, 64>::with_capacity(opts, ManualClock::new());
        /// assert!(fine.is_ok());
        /// let small = SlidingWindowLimiter::<_, 4>::with_capacity(opts, ManualClock::new());
        /// assert_eq!(small.unwrap_err(), OptionsError::TooManySegments { max: 4 });
        /// let bare = SlidingWindowLimiter::<_, 64, NoQueue>::with_capacity(opts, ManualClock::new());
        /// assert!(bare.is_ok());
        /// ```
    }
    /// Changes the permit limit and the queue limit while the limiter is in use. Permits
    /// already counted in the window stay counted: under a lowered limit the window refuses
    /// until enough segments slide out, under a raised one it has room at once. Waiters asking
    /// for more than the new limit are failed with
    /// [`Reason::ExceedsLimit`](crate::Reason::ExceedsLimit), the rest keep their places and are
    /// served as far as the window allows; a new queue limit applies to newcomers. Refused,
    /// changing nothing: invalid options, a different window, segment count or queue order
    /// ([`OptionsError::FixedAtCreation`]), or a limit larger than the header laid out at
    /// creation holds ([`OptionsError::LimitTooLarge`]: any `u32` with a 128-bit header, and with
    /// the 64-bit one every value its count fields hold, e.g. 16,383 with 1 s segments).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Limiter, ManualClock, SlidingWindowLimiter, SlidingWindowOptions};
    ///
    /// let clock = ManualClock::new();
    /// let minute = Duration::from_secs(60);
    /// let opts = SlidingWindowOptions::new(10, minute, 2);
    /// let window = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
    /// window.try_acquire(6).unwrap().forget();
    /// window.reconfigure(SlidingWindowOptions::new(5, minute, 2)).unwrap();
    /// assert!(window.try_acquire(1).is_err()); // 6 counted, 5 allowed
    /// clock.advance(minute); // the segment holding the 6 slides out
    /// assert!(window.try_acquire(5).is_ok());
    /// ```
    reconfigure;
}

impl<C: Clock> SlidingWindowLimiter<C> {
    /// The segments per window the default ring holds: 16 (a ring slot is 16 bytes).
    pub const DEFAULT_SEGMENTS: usize = 16;
}

impl<C: Clock, const N: usize, Q: QueueKind> SlidingWindowLimiter<C, N, Q> {
    /// The options in force: those the limiter was built with, as last
    /// [`reconfigure`](Self::reconfigure)d.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{ManualClock, SlidingWindowLimiter, SlidingWindowOptions};
    ///
    /// let opts = SlidingWindowOptions::new(100, Duration::from_secs(60), 6);
    /// let window = SlidingWindowLimiter::with_clock(opts, ManualClock::new()).unwrap();
    /// assert_eq!(window.options(), opts);
    /// ```
    pub fn options(&self) -> SlidingWindowOptions {
        SlidingWindowOptions {
            permit_limit: self.core.limit(),
            queue_limit: self.core.base.queue.queue_limit(),
            ..self.options
        }
    }

    /// The limit of `options`, if valid, with the window, segments and queue order this limiter
    /// was built with, and within what its header holds.
    fn checked(&self, options: &SlidingWindowOptions) -> Result<u32, OptionsError> {
        options.validate(N)?;
        let before = &self.options;
        let same = (options.window, options.segments_per_window)
            == (before.window, before.segments_per_window);
        unchanged::<Q>(same, options.queue_order, before.queue_order)?;
        let limit = options.permit_limit;
        let max = self.core.max_limit();
        if limit > max {
            return Err(OptionsError::LimitTooLarge { max });
        }
        Ok(limit)
    }
}

#[cfg(test)]
mod tests;
