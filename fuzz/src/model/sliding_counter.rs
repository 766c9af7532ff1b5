//! The sliding-window counter (approximate), from article 001's formula: at `into` ns into fixed
//! window `k`, the estimate is `count[k-1] · (W - into) / W + count[k]`; a request of `n` is
//! admitted iff the estimate plus `n` is at most the limit (compared exactly, as rationals).
//!
//! - every window's count is kept (a map from window number to permits), not just two;
//! - a clock behind the window of the last admitted request acts at the start of that window (no
//!   time passed; the previous window weighs fully);
//! - RetryAfter: the first nanosecond at which the request fits, found by searching forward
//!   (exact, by bisection within a window — written independently of the library's closed form);
//! - a settle's debit (`debit`) is counted in the current window even past the limit, into
//!   debt, while the estimate stays at most twice the limit; requests wait until the estimate
//!   has decayed (the search above counts it);
//! - idle: from the start of the second window after the last one with permits taken (creation if
//!   none); available: the room under the limit, rounded down.

use std::collections::BTreeMap;

use super::time::elapsed;
use super::{Counts, Denial, Expect, Model, Reason};

/// The model.
#[derive(Clone, Debug)]
pub struct SlidingCounterModel {
    origin: u64,
    limit: u128,
    window: u128,
    counts_by_window: BTreeMap<u128, u128>,
    /// Window of the last admitted request.
    last: u128,
    closed: bool,
    counts: Counts,
}

impl SlidingCounterModel {
    /// A fresh counter of `limit` per `window` ns.
    pub fn new(origin: u64, limit: u32, window: u64) -> Self {
        SlidingCounterModel {
            origin,
            limit: u128::from(limit),
            window: u128::from(window),
            counts_by_window: BTreeMap::new(),
            last: 0,
            closed: false,
            counts: Counts::default(),
        }
    }

    /// (window, offset) the limiter acts at for time `e` since creation.
    fn when(&self, e: u128) -> (u128, u128) {
        let (k, into) = (e / self.window, e % self.window);
        if k < self.last {
            (self.last, 0)
        } else {
            (k, into)
        }
    }

    fn count(&self, k: u128) -> u128 {
        self.counts_by_window.get(&k).copied().unwrap_or(0)
    }

    /// `estimate · W` at (k, into) with `extra` more permits.
    fn weighted(&self, k: u128, into: u128, extra: u128) -> u128 {
        let prev = if k == 0 { 0 } else { self.count(k - 1) };
        prev * (self.window - into) + (self.count(k) + extra) * self.window
    }

    fn fits(&self, k: u128, into: u128, n: u128) -> bool {
        self.weighted(k, into, n) <= self.limit * self.window
    }

    /// Nanoseconds from (k, into) until `n` fits, by search.
    fn wait(&self, k: u128, into: u128, n: u128) -> u128 {
        // This window: the estimate only falls as `into` grows, so bisect [into, W).
        if self.fits(k, self.window - 1, n) {
            let (mut lo, mut hi) = (into, self.window - 1); // !fits(lo), fits(hi)
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if self.fits(k, mid, n) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            return hi - into;
        }
        // Next window (nothing is taken meanwhile): `count[k]` becomes the previous one.
        let rest = self.window - into;
        let next = k + 1;
        let fits_next = |x: u128| {
            self.count(k) * (self.window - x) + n * self.window <= self.limit * self.window
        };
        if fits_next(0) {
            return rest;
        }
        let (mut lo, mut hi) = (0, self.window); // !fits(lo), fits(hi) (at W the count is gone)
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits_next(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        let _ = next;
        rest + hi
    }

    fn decide(&mut self, now: u64, n: u32) -> Result<(), Denial> {
        let n = u128::from(n);
        if n > self.limit {
            return Err(Denial::plain(Reason::ExceedsLimit));
        }
        if self.closed {
            return Err(Denial::plain(Reason::Closed));
        }
        let e = elapsed(self.origin, now);
        let (k, into) = self.when(e);
        let want = n.max(1);
        if self.fits(k, into, want) {
            if n > 0 {
                *self.counts_by_window.entry(k).or_insert(0) += n;
                self.last = k;
            }
            return Ok(());
        }
        Err(Denial {
            reason: Reason::Exhausted,
            // Counted from the reading: a clock behind `k` has to get there first.
            retry_after: Expect::Exactly(Some(
                k * self.window + into - e + self.wait(k, into, want),
            )),
        })
    }
}

impl SlidingCounterModel {
    /// A lease settled `n` above its estimate at `now` (issue 38): the `n` are counted in the
    /// current window, as a request of `n` granted then would be, even past the limit — into
    /// debt — as long as the estimate then is at most twice the limit; `false` (nothing
    /// taken) past that. Closed or not.
    pub fn debit(&mut self, now: u64, n: u32) -> bool {
        let n = u128::from(n);
        let (k, into) = self.when(elapsed(self.origin, now));
        if self.weighted(k, into, n) > 2 * self.limit * self.window {
            return false;
        }
        *self.counts_by_window.entry(k).or_insert(0) += n;
        self.last = k;
        true
    }
}

impl Model for SlidingCounterModel {
    fn acquire(&mut self, now: u64, n: u32) -> Result<(), Denial> {
        let r = self.decide(now, n);
        self.counts.count(r)
    }
    fn available(&self, now: u64) -> u128 {
        let (k, into) = self.when(elapsed(self.origin, now));
        (self.limit * self.window).saturating_sub(self.weighted(k, into, 0)) / self.window
    }
    fn idle(&self, now: u64) -> Expect<Option<u128>> {
        let e = elapsed(self.origin, now);
        let free_from = if self.counts_by_window.is_empty() {
            0
        } else {
            self.last + 2
        };
        let k = (e / self.window).max(self.last);
        Expect::Exactly((free_from <= k).then(|| e.saturating_sub(free_from * self.window)))
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
    fn counts_mut(&mut self) -> &mut Counts {
        &mut self.counts
    }
    fn give_back(&mut self, _now: u64, _n: u32, _stamp: u128) {
        unreachable!("no waiting scenario drives this limiter")
    }
    fn limit(&self) -> u32 {
        self.limit as u32
    }
    fn step_ns(&self) -> Option<u128> {
        Some(self.window)
    }
    fn elapsed(&self, now: u64) -> u128 {
        elapsed(self.origin, now)
    }
    fn replenish(&mut self, now: u64) -> u128 {
        self.available(now)
    }
    fn clock_behind(&self, now: u64) -> bool {
        elapsed(self.origin, now) / self.window < self.last
    }
}
