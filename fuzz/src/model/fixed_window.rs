//! The fixed window: at most `limit` permits per window; windows are back to back from creation
//! and every window boundary resets the count.
//!
//! - `try_acquire(n)`: `n > limit` → ExceedsLimit; closed → Closed; a probe succeeds iff a permit
//!   is left in the current window and takes none; otherwise granted iff `n` permits are left.
//! - a denial carries RetryAfter = the time until the next window boundary.
//! - idle: while no permit of the current window is used, the time since the start of the window
//!   after the last window in which permits were taken (since creation if none ever were).
//!
//! Written independently of the token bucket (which the library shares with the fixed window):
//! the state is a window number and the permits used in it.

use super::time::elapsed;
use super::{Counts, Denial, Expect, Model, Reason};

/// The model.
#[derive(Clone, Debug)]
pub struct FixedWindowModel {
    origin: u64,
    limit: u128,
    window_ns: u128,
    /// The window `used` belongs to. When `used == 0`: the window from whose start no permit
    /// has been in use.
    window: u128,
    /// Permits taken in `window`.
    used: u128,
    closed: bool,
    counts: Counts,
}

impl FixedWindowModel {
    /// A fresh window created at the raw reading `origin`.
    pub fn new(origin: u64, limit: u32, window_ns: u64) -> Self {
        FixedWindowModel {
            origin,
            limit: u128::from(limit),
            window_ns: u128::from(window_ns),
            window: 0,
            used: 0,
            closed: false,
            counts: Counts::default(),
        }
    }

    /// The window the limiter acts in for the reading `now`: the clock's, or the state's own if
    /// the clock is behind it.
    fn current(&self, now: u64) -> u128 {
        (elapsed(self.origin, now) / self.window_ns).max(self.window)
    }

    /// (window, used) as of window `w >= self.window`: once the window with permits in use has
    /// ended, nothing is in use from the start of the next one.
    fn at(&self, w: u128) -> (u128, u128) {
        assert!(w >= self.window);
        if w > self.window && self.used > 0 {
            (self.window + 1, 0)
        } else {
            (self.window, self.used)
        }
    }

    fn decide(&mut self, now: u64, n: u32) -> Result<(), Denial> {
        let n = u128::from(n);
        if n > self.limit {
            return Err(Denial::plain(Reason::ExceedsLimit));
        }
        if self.closed {
            return Err(Denial::plain(Reason::Closed));
        }
        let w = self.current(now);
        let (_, used) = self.at(w);
        let left = self.limit - used;
        if left >= n.max(1) {
            if n > 0 {
                self.used = used + n;
                self.window = w;
            }
            return Ok(());
        }
        let next_boundary = (w + 1) * self.window_ns;
        // A reading behind the state's window (stale, or a clock stepped back) waits from the
        // start of that window: real time is at least there.
        let from = if self.clock_behind(now) {
            w * self.window_ns
        } else {
            elapsed(self.origin, now)
        };
        Err(Denial {
            reason: Reason::Exhausted,
            retry_after: Expect::Exactly(Some(next_boundary - from)),
        })
    }
}

impl Model for FixedWindowModel {
    fn acquire(&mut self, now: u64, n: u32) -> Result<(), Denial> {
        let r = self.decide(now, n);
        self.counts.count(r)
    }

    fn available(&self, now: u64) -> u128 {
        self.limit - self.at(self.current(now)).1
    }

    fn idle(&self, now: u64) -> Expect<Option<u128>> {
        let (since, used) = self.at(self.current(now));
        Expect::Exactly(if used == 0 {
            Some(elapsed(self.origin, now).saturating_sub(since * self.window_ns))
        } else {
            None
        })
    }

    fn close(&mut self) {
        self.closed = true;
    }

    fn is_closed(&self) -> bool {
        self.closed
    }

    fn counts(&self) -> (u64, u64) {
        (self.counts.successful, self.counts.failed)
    }

    fn limit(&self) -> u32 {
        self.limit as u32
    }

    fn step_ns(&self) -> Option<u128> {
        Some(self.window_ns)
    }

    fn elapsed(&self, now: u64) -> u128 {
        elapsed(self.origin, now)
    }

    fn counts_mut(&mut self) -> &mut Counts {
        &mut self.counts
    }

    /// Permits a waiter was granted and never received are no longer counted in the current
    /// window; the window state is then dated by the current window (one that is wholly free
    /// again became so now).
    fn give_back(&mut self, now: u64, n: u32, _stamp: u128) {
        let w = self.current(now);
        let (_, used) = self.at(w);
        self.used = used.saturating_sub(u128::from(n));
        self.window = w;
    }

    fn clock_behind(&self, now: u64) -> bool {
        elapsed(self.origin, now) / self.window_ns < self.window
    }

    fn replenish(&mut self, now: u64) -> u128 {
        let w = self.current(now);
        (self.window, self.used) = self.at(w);
        self.limit - self.used
    }
}
