//! GCRA in the ATM Forum's *virtual scheduling* form: a theoretical arrival time `tat`; a
//! request of `n` cells conforms when `tat' = max(tat, t) + n·T` lies at most `τ + n·T` ahead of
//! `t`, with the tolerance `τ + n·T = burst·T`. Written from the definition, in `u128`, without
//! the library's packing.
//!
//! - `try_acquire(n)`: `n > burst` → ExceedsLimit; closed → Closed; a probe succeeds iff one
//!   permit would and changes nothing; a denial's RetryAfter is `tat' - t - burst·T` (counted
//!   from the reading).
//! - time `t` is the nanoseconds since creation, capped at 2^61 (documented: the library's clock
//!   stands still after 73 years). A clock that steps backwards is read as it is: `tat` lies
//!   further ahead, so the limiter is stricter, never more lenient.
//! - available: `⌊(burst·T - max(0, tat - t)) / T⌋`; idle: `t - tat` once `tat ≤ t`.

use super::time::elapsed;
use super::{Counts, Denial, Expect, Model, Reason};

/// Time past which the library's clock stands still.
pub const MAX_NOW: u128 = 1 << 61;

/// The model.
#[derive(Clone, Debug)]
pub struct GcraModel {
    origin: u64,
    interval: u128,
    burst: u128,
    tat: u128,
    closed: bool,
    counts: Counts,
}

impl GcraModel {
    /// A fresh limiter created at the raw reading `origin`: one permit per `interval` ns.
    pub fn new(origin: u64, interval: u64, burst: u32) -> Self {
        GcraModel {
            origin,
            interval: u128::from(interval),
            burst: u128::from(burst),
            tat: 0,
            closed: false,
            counts: Counts::default(),
        }
    }

    fn t(&self, now: u64) -> u128 {
        elapsed(self.origin, now).min(MAX_NOW)
    }

    fn decide(&mut self, now: u64, n: u32) -> Result<(), Denial> {
        let n = u128::from(n);
        if n > self.burst {
            return Err(Denial::plain(Reason::ExceedsLimit));
        }
        if self.closed {
            return Err(Denial::plain(Reason::Closed));
        }
        let t = self.t(now);
        let want = n.max(1);
        let new_tat = self.tat.max(t) + want * self.interval;
        let limit = t + self.burst * self.interval;
        if new_tat <= limit {
            if n > 0 {
                self.tat = new_tat;
            }
            return Ok(());
        }
        Err(Denial {
            reason: Reason::Exhausted,
            retry_after: Expect::Exactly(Some(new_tat - limit)),
        })
    }
}

impl Model for GcraModel {
    fn acquire(&mut self, now: u64, n: u32) -> Result<(), Denial> {
        let r = self.decide(now, n);
        self.counts.count(r)
    }
    fn available(&self, now: u64) -> u128 {
        let t = self.t(now);
        let ahead = self.tat.saturating_sub(t);
        (self.burst * self.interval).saturating_sub(ahead) / self.interval
    }
    fn idle(&self, now: u64) -> Expect<Option<u128>> {
        let t = self.t(now);
        Expect::Exactly((self.tat <= t).then(|| elapsed(self.origin, now) - self.tat))
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
        self.burst as u32
    }
    fn step_ns(&self) -> Option<u128> {
        Some(self.interval)
    }
    fn elapsed(&self, now: u64) -> u128 {
        elapsed(self.origin, now)
    }
    fn replenish(&mut self, now: u64) -> u128 {
        self.available(now)
    }
    fn beyond_limits(&self, now: u64) -> bool {
        elapsed(self.origin, now) > MAX_NOW
    }
}
