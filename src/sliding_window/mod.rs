//! The sliding window: at most `permit_limit` permits in any window of `segments_per_window`
//! consecutive segments; permits come back when their segment leaves the window.

mod state;

use core::convert::Infallible;
use core::time::Duration;

use crate::cas;
use crate::clock::Clock;
use crate::lease::{Lease, Reason, Rejection, Statistics};
use crate::limiter::{Limiter, Replenishing};
use crate::options::{OptionsError, QueueOrder};
use crate::stats::Counters;
use crate::sync::{AtomicU128, Ordering};
use crate::ticks::{nanos_of, Ticker};
use crate::wait::{self, Acquire, Source, WaitQueue};

use state::{Denied, Header, Shape};

/// Options of a [`SlidingWindowLimiter`] (.NET `SlidingWindowRateLimiterOptions`, without
/// `AutoReplenishment`: the window slides with the clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlidingWindowOptions {
    /// Permits per window. At least 1.
    pub permit_limit: u32,
    /// The window. Its segment is `window / segments_per_window`, in whole nanoseconds (as .NET
    /// divides ticks); at least 1 ns.
    pub window: Duration,
    /// Segments per window: at least 1 and at most the limiter's capacity `N`.
    pub segments_per_window: u32,
    /// Permits that may wait in the queue (for waiting acquisitions).
    pub queue_limit: u32,
    /// The order queued requests are served in.
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

    /// The same options with a queue of `limit` permits served in `order`.
    pub const fn with_queue(self, limit: u32, order: QueueOrder) -> Self {
        Self {
            queue_limit: limit,
            queue_order: order,
            ..self
        }
    }

    /// Checks every option against a ring of `max_segments` slots; returns the segment in
    /// nanoseconds.
    pub fn validate(&self, max_segments: usize) -> Result<u64, OptionsError> {
        if self.permit_limit == 0 {
            return Err(OptionsError::ZeroLimit);
        }
        if self.segments_per_window == 0 {
            return Err(OptionsError::ZeroSegments);
        }
        if self.segments_per_window as usize > max_segments {
            return Err(OptionsError::TooManySegments { max: max_segments });
        }
        match nanos_of(self.window) {
            None => Err(OptionsError::PeriodTooLong),
            Some(0) => Err(OptionsError::ZeroPeriod),
            Some(ns) if ns / u64::from(self.segments_per_window) == 0 => {
                Err(OptionsError::SegmentTooShort)
            }
            Some(ns) => Ok(ns / u64::from(self.segments_per_window)),
        }
    }
}

/// A sliding window (.NET `SlidingWindowRateLimiter`): the window is divided into segments;
/// permits taken during a segment count against the limit until that segment leaves the window,
/// then come back.
///
/// `N` is the capacity of the segment ring (default 16): `segments_per_window` may be anything
/// from 1 to `N`. The ring is inline — no allocation — and takes 16 bytes per slot.
///
/// Admission is one compare-and-swap on a 128-bit header holding the current segment's count and
/// the sum of the window's earlier segments; earlier segments' counts are frozen into the ring
/// when the window slides past them. Every rejection carries a RetryAfter: the time until enough
/// of the oldest segments have left the window.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{Limiter, ManualClock, SlidingWindowLimiter, SlidingWindowOptions};
///
/// let clock = ManualClock::new();
/// let opts = SlidingWindowOptions::new(10, Duration::from_secs(3), 3);
/// let window: SlidingWindowLimiter<_> = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
/// let _ = window.try_acquire(7).unwrap();
/// clock.advance(Duration::from_secs(1));
/// let _ = window.try_acquire(3).unwrap();
/// assert_eq!(window.try_acquire(1).unwrap_err().retry_after(), Some(Duration::from_secs(2)));
/// clock.advance(Duration::from_secs(2)); // the first segment leaves the window
/// assert_eq!(window.available_permits(), 7);
/// ```
#[derive(Debug)]
pub struct SlidingWindowLimiter<C: Clock, const N: usize = 16> {
    header: AtomicU128,
    ring: [AtomicU128; N],
    ticker: Ticker,
    shape: Shape,
    counters: Counters,
    queue: WaitQueue,
    options: SlidingWindowOptions,
    clock: C,
}

#[cfg(feature = "std")]
impl<const N: usize> SlidingWindowLimiter<crate::StdClock, N> {
    /// A sliding window on the system clock.
    pub fn new(options: SlidingWindowOptions) -> Result<Self, OptionsError> {
        Self::with_clock(options, crate::StdClock)
    }
}

impl<C: Clock, const N: usize> SlidingWindowLimiter<C, N> {
    /// A sliding window reading time from `clock`; segments count from `clock.now()`.
    pub fn with_clock(options: SlidingWindowOptions, clock: C) -> Result<Self, OptionsError> {
        let segment = options.validate(N)?;
        Ok(Self {
            header: AtomicU128::new(Header::EMPTY.pack()),
            ring: core::array::from_fn(|_| AtomicU128::new(0)),
            ticker: Ticker::new(clock.now(), segment),
            shape: Shape {
                limit: options.permit_limit,
                segments: u64::from(options.segments_per_window),
            },
            counters: Counters::new(),
            queue: WaitQueue::new(options.queue_limit, options.queue_order),
            options,
            clock,
        })
    }

    /// The options the limiter was built with.
    pub fn options(&self) -> &SlidingWindowOptions {
        &self.options
    }

    fn slot(&self, segment: u64) -> &AtomicU128 {
        // `segments <= N` (validated), so the index is in bounds.
        &self.ring[(segment % self.shape.segments) as usize]
    }

    /// The frozen count of segment `j`: its slot, if the slot still holds segment `j`.
    fn frozen(&self, j: u64) -> u32 {
        let v = self.slot(j).load(Ordering::Acquire);
        if (v >> 64) as u64 == j {
            v as u32
        } else {
            0
        }
    }

    /// Records that segment `j` ended with `count` permits, before the header moves past it.
    /// Racing writers of the same segment keep the largest count (a segment's count only grows,
    /// and the writer whose header wins saw the final one); a slot already holding a later
    /// segment is left alone. Empty segments are not written.
    fn freeze(&self, j: u64, count: u32) {
        if count == 0 {
            return;
        }
        let new = u128::from(j) << 64 | u128::from(count);
        let slot = self.slot(j);
        let mut cur = slot.load(Ordering::Acquire);
        loop {
            let (seg, held) = ((cur >> 64) as u64, cur as u32);
            if seg > j || (seg == j && held >= count) {
                return;
            }
            match slot.compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(v) => cur = v,
            }
        }
    }

    /// Freezes the segment a header leaves when it moves to `next`.
    fn leave(&self, h: Header, next: Header) {
        if next.tick != h.tick {
            self.freeze(h.tick, h.cur);
        }
    }

    /// One lock-free attempt; the header it decided on, on denial.
    #[inline]
    fn attempt(&self, k: u64, n: u32, barge: bool) -> Result<(), (Denied, Header)> {
        let s = self.shape;
        cas::transition(&self.header, |w| {
            let h = Header::unpack(w);
            let next = h
                .try_take(k, n, s, barge, |j| self.frozen(j))
                .map_err(|d| (d, h))?;
            self.leave(h, next);
            Ok((next.pack(), ()))
        })
        .map(|_| ())
    }

    /// Takes `n` permits now without waiting (uncounted), or says why not and when to retry.
    #[inline]
    fn take(&self, n: u32) -> Result<(), Rejection> {
        if n > self.shape.limit {
            return Err(Rejection::new(Reason::ExceedsLimit));
        }
        let (k, into) = self.ticker.tick(self.clock.now());
        let barge = self.queue.barging();
        let mut result = self.attempt(k, n, barge);
        if let Err((Denied::Exhausted { .. }, h)) = result {
            if h.waiters && !barge {
                // Held back by the queue: serve it first (time may have made room), then retry.
                self.queue.serve(self);
                result = self.attempt(k, n, barge);
            }
        }
        match result {
            Ok(()) => Ok(()),
            Err((Denied::Closed, _)) => Err(Rejection::new(Reason::Closed)),
            Err((Denied::Exhausted { .. }, h)) => {
                let ahead = if barge {
                    0
                } else {
                    self.queue.queued_permits()
                };
                let wait = self.wait_at(k, into, h, u64::from(n).max(1) + ahead);
                Err(Rejection::with_retry_after(
                    Reason::Exhausted,
                    wait.max(Duration::from_nanos(1)),
                ))
            }
        }
    }

    /// How long until `total` permits are free, if nothing else is taken: the oldest segments
    /// leave the window one by one; beyond one window's worth, whole windows (the waiters ahead
    /// are granted in order as room appears). Zero if they are free now.
    fn wait_for(&self, total: u64) -> Duration {
        let (k, into) = self.ticker.tick(self.clock.now());
        self.wait_at(
            k,
            into,
            Header::unpack(self.header.load(Ordering::Acquire)),
            total,
        )
    }

    /// [`wait_for`](Self::wait_for) seen from `into` ns into segment `k`, with the header `h`:
    /// on a denial, the very instant and header the decision was made on.
    fn wait_at(&self, k: u64, into: u64, h: Header, total: u64) -> Duration {
        let s = self.shape;
        let now = h.at(k, s, |j| self.frozen(j));
        let free = u64::from(s.limit).saturating_sub(now.used());
        let Some(missing) = total.checked_sub(free).filter(|m| *m > 0) else {
            return Duration::ZERO;
        };
        let count = |j: u64| {
            if j == now.tick {
                now.cur
            } else if j == h.tick {
                h.cur
            } else if j < h.tick {
                self.frozen(j)
            } else {
                0
            }
        };
        let slides = match now.slides_to_free(missing, s, count) {
            Some(m) => m,
            None => {
                let beyond = total - u64::from(s.limit);
                let windows = 1 + beyond.div_ceil(u64::from(s.limit));
                windows.saturating_mul(s.segments)
            }
        };
        // Slides count from `now.tick`, which is past `k` only if the clock stepped backwards.
        self.ticker
            .wait_for(slides.saturating_add(now.tick.saturating_sub(k)), into)
    }

    /// Waits for `permits` in the queue (see [`Acquire`]). Queued waiters are served as
    /// segments leave the window: by any later acquisition, by
    /// [`replenish`](Replenishing::replenish), or by a registered `Driver` (feature `std`).
    pub fn acquire(&self, permits: u32) -> Acquire<'_, Self> {
        Acquire::new(self, permits)
    }

    /// Waits on this thread for `permits`, for up to `timeout` (`None`: no limit); the thread
    /// wakes itself when the window has room, so no driver is needed.
    #[cfg(feature = "std")]
    pub fn acquire_blocking(
        &self,
        permits: u32,
        timeout: Option<Duration>,
    ) -> Result<Lease<'_>, Rejection> {
        wait::acquire_blocking(self, permits, timeout)
    }

    fn now_header(&self) -> (Header, Header, u64) {
        let (k, _) = self.ticker.tick(self.clock.now());
        let h = Header::unpack(self.header.load(Ordering::Acquire));
        (h, h.at(k, self.shape, |j| self.frozen(j)), k)
    }

    /// The last segment in which permits were taken, if any.
    fn last_used_segment(&self, h: Header) -> Option<u64> {
        if h.cur > 0 {
            return Some(h.tick);
        }
        self.ring
            .iter()
            .map(|slot| slot.load(Ordering::Acquire))
            .filter(|v| *v as u32 > 0 && ((v >> 64) as u64) < h.tick)
            .map(|v| (v >> 64) as u64)
            .max()
    }
}

impl<C: Clock, const N: usize> wait::private::Sealed for SlidingWindowLimiter<C, N> {}

impl<C: Clock, const N: usize> Source for SlidingWindowLimiter<C, N> {
    fn queue(&self) -> &WaitQueue {
        &self.queue
    }
    fn counters(&self) -> &Counters {
        &self.counters
    }
    fn limit(&self) -> u32 {
        self.shape.limit
    }
    fn take_now(&self, n: u32) -> Result<(), Rejection> {
        self.take(n)
    }
    fn take_locked(&self, n: u32, flag_if_short: bool) -> Result<Option<u64>, Reason> {
        let (k, _) = self.ticker.tick(self.clock.now());
        let s = self.shape;
        cas::transition(&self.header, |w| {
            let h = Header::unpack(w);
            match h.try_take(k, n, s, true, |j| self.frozen(j)) {
                Ok(next) => {
                    self.leave(h, next);
                    Ok((next.pack(), Some(next.tick)))
                }
                Err(Denied::Closed) => Err(Reason::Closed),
                Err(Denied::Exhausted { .. }) if flag_if_short => {
                    Ok((h.with_waiters(true).pack(), None))
                }
                Err(Denied::Exhausted { .. }) => Ok((w, None)),
            }
        })
        .map(|(_, taken)| taken)
    }
    fn clear_waiters(&self) {
        let _ = cas::transition(&self.header, |w| {
            Ok::<_, Infallible>((Header::unpack(w).with_waiters(false).pack(), ()))
        });
    }
    fn give_back(&self, n: u32, stamp: u64) {
        let Ok((before, ())) = cas::transition(&self.header, |w| {
            Ok::<_, Infallible>((Header::unpack(w).give_back(stamp, n).pack(), ()))
        });
        if Header::unpack(before).waiters {
            self.queue.serve(self);
        }
    }
    fn wait_for_permits(&self, total: u64) -> Option<Duration> {
        Some(self.wait_for(total))
    }
    fn lease(&self, n: u32) -> Lease<'_> {
        Lease::unreleased(n)
    }
    fn timed(&self) -> bool {
        self.clock.advances_by_itself()
    }
}

impl<C: Clock, const N: usize> Limiter for SlidingWindowLimiter<C, N> {
    #[inline]
    fn try_acquire(&self, permits: u32) -> Result<Lease<'_>, Rejection> {
        self.counters
            .count(self.take(permits))
            .map(|()| Lease::unreleased(permits))
    }

    fn available_permits(&self) -> u64 {
        u64::from(self.shape.limit).saturating_sub(self.now_header().1.used())
    }

    fn statistics(&self) -> Statistics {
        Statistics {
            available_permits: self.available_permits(),
            queued_permits: self.queue.queued_permits(),
            total_successful: self.counters.successful(),
            total_failed: self.counters.failed(),
        }
    }

    /// Idle since the last segment with permits taken left the window (since creation if none).
    fn idle_duration(&self) -> Option<Duration> {
        let now = self.clock.now();
        let (k, _) = self.ticker.tick(now);
        let h = Header::unpack(self.header.load(Ordering::Acquire));
        let free_from = match self.last_used_segment(h) {
            Some(j) => j.saturating_add(self.shape.segments),
            None => 0,
        };
        (free_from <= k.max(h.tick) && !h.waiters)
            .then(|| self.ticker.since_start_of(now, free_from))
    }

    fn close(&self) {
        let _ = cas::transition(&self.header, |w| {
            Ok::<_, Infallible>((Header::unpack(w).close().pack(), ()))
        });
        self.queue.close(self);
    }

    fn is_closed(&self) -> bool {
        Header::unpack(self.header.load(Ordering::Acquire)).closed
    }
}

impl<C: Clock, const N: usize> Replenishing for SlidingWindowLimiter<C, N> {
    fn replenishment_period(&self) -> Duration {
        Duration::from_nanos(self.ticker.period_ns())
    }

    fn replenish(&self) -> u64 {
        let (k, _) = self.ticker.tick(self.clock.now());
        let s = self.shape;
        let _ = cas::transition(&self.header, |w| {
            let h = Header::unpack(w);
            let next = h.at(k, s, |j| self.frozen(j));
            self.leave(h, next);
            Ok::<_, Infallible>((next.pack(), ()))
        });
        self.queue.serve(self);
        self.available_permits()
    }

    fn next_service(&self) -> Option<Duration> {
        wait::next_service(self)
    }

    #[cfg(feature = "std")]
    fn attach_driver(&self, handle: crate::driver::DriverHandle) {
        self.queue.attach(handle);
    }
}
