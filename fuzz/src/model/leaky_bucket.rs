//! The leaky buckets, each from its own definition (independently of GCRA, whose core the
//! library shares with them):
//!
//! - [`MeterModel`]: the ATM Forum's *continuous-state leaky bucket*. A level `x` (in
//!   nanoseconds of drain: one unit of water is `T = ⌈leak_interval / leak⌉` ns) as of the last
//!   conforming time `lct`. At `t`, `x' = max(0, x - (t - lct))` (a clock behind `lct` *raises*
//!   it: stricter, never more lenient); a request of `n` units conforms when
//!   `x' + n·T ≤ capacity·T`, and then `x = x' + n·T`, `lct = t`. RetryAfter: `x' + n·T -
//!   capacity·T`. Available: `⌊(capacity·T - x') / T⌋`. Idle: from the instant the level
//!   reached zero.
//! - [`ShaperModel`]: a queue emptied at one permit per `T`. `next` is the instant the last
//!   admitted request's slots end. A request departs now only if `next ≤ t`; it then holds `n`
//!   slots: `next = t + n·T`. RetryAfter: `next - t`. Available: `max_permits` when a request
//!   can depart now, else 0. Idle: from `next`.
//!
//! Both read time as nanoseconds since creation, capped at 2^61 (the library's documented range).

use super::gcra::MAX_NOW;
use super::time::{div_ceil, elapsed};
use super::{Counts, Denial, Expect, Model, Reason};

/// The meter.
#[derive(Clone, Debug)]
pub struct MeterModel {
    origin: u64,
    unit: u128,
    capacity: u128,
    /// Level in ns of drain, as of `lct`.
    x: u128,
    lct: u128,
    closed: bool,
    counts: Counts,
}

impl MeterModel {
    /// A meter of `capacity` units draining `leak` units every `leak_interval` ns.
    pub fn new(origin: u64, capacity: u32, leak: u32, leak_interval: u64) -> Self {
        MeterModel {
            origin,
            unit: div_ceil(u128::from(leak_interval), u128::from(leak)),
            capacity: u128::from(capacity),
            x: 0,
            lct: 0,
            closed: false,
            counts: Counts::default(),
        }
    }

    fn t(&self, now: u64) -> u128 {
        elapsed(self.origin, now).min(MAX_NOW)
    }

    /// The level at `t`.
    fn level(&self, t: u128) -> u128 {
        if t >= self.lct {
            self.x.saturating_sub(t - self.lct)
        } else {
            self.x + (self.lct - t)
        }
    }

    fn decide(&mut self, now: u64, n: u32) -> Result<(), Denial> {
        let n = u128::from(n);
        if n > self.capacity {
            return Err(Denial::plain(Reason::ExceedsLimit));
        }
        if self.closed {
            return Err(Denial::plain(Reason::Closed));
        }
        let t = self.t(now);
        let x = self.level(t);
        let poured = x + n.max(1) * self.unit;
        let cap = self.capacity * self.unit;
        if poured <= cap {
            if n > 0 {
                self.x = poured;
                self.lct = t;
            }
            return Ok(());
        }
        Err(Denial {
            reason: Reason::Exhausted,
            retry_after: Expect::Exactly(Some(poured - cap)),
        })
    }
}

impl Model for MeterModel {
    fn acquire(&mut self, now: u64, n: u32) -> Result<(), Denial> {
        let r = self.decide(now, n);
        self.counts.count(r)
    }
    fn available(&self, now: u64) -> u128 {
        let x = self.level(self.t(now));
        (self.capacity * self.unit).saturating_sub(x) / self.unit
    }
    fn idle(&self, now: u64) -> Expect<Option<u128>> {
        let t = self.t(now);
        let empty_at = self.lct + self.x;
        Expect::Exactly((empty_at <= t).then(|| elapsed(self.origin, now) - empty_at))
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
        self.capacity as u32
    }
    fn step_ns(&self) -> Option<u128> {
        Some(self.unit)
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

/// The shaper.
#[derive(Clone, Debug)]
pub struct ShaperModel {
    origin: u64,
    interval: u128,
    max_permits: u128,
    /// When the last admitted request's slots end.
    next: u128,
    closed: bool,
    counts: Counts,
}

impl ShaperModel {
    /// A shaper releasing one permit every `interval` ns, requests of up to `max_permits`.
    pub fn new(origin: u64, interval: u64, max_permits: u32) -> Self {
        ShaperModel {
            origin,
            interval: u128::from(interval),
            max_permits: u128::from(max_permits),
            next: 0,
            closed: false,
            counts: Counts::default(),
        }
    }

    fn t(&self, now: u64) -> u128 {
        elapsed(self.origin, now).min(MAX_NOW)
    }

    fn decide(&mut self, now: u64, n: u32) -> Result<(), Denial> {
        let n = u128::from(n);
        if n > self.max_permits {
            return Err(Denial::plain(Reason::ExceedsLimit));
        }
        if self.closed {
            return Err(Denial::plain(Reason::Closed));
        }
        let t = self.t(now);
        if self.next <= t {
            if n > 0 {
                self.next = t + n * self.interval;
            }
            return Ok(());
        }
        Err(Denial {
            reason: Reason::Exhausted,
            retry_after: Expect::Exactly(Some(self.next - t)),
        })
    }
}

impl Model for ShaperModel {
    fn acquire(&mut self, now: u64, n: u32) -> Result<(), Denial> {
        let r = self.decide(now, n);
        self.counts.count(r)
    }
    fn available(&self, now: u64) -> u128 {
        if self.next <= self.t(now) {
            self.max_permits
        } else {
            0
        }
    }
    fn idle(&self, now: u64) -> Expect<Option<u128>> {
        let t = self.t(now);
        Expect::Exactly((self.next <= t).then(|| elapsed(self.origin, now) - self.next))
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
        self.max_permits as u32
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
