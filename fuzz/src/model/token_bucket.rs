//! The token bucket: up to `limit` tokens, starting full; `per_period` tokens are added at the
//! start of every whole period since creation, capped at `limit`.
//!
//! - `try_acquire(n)`: `n > limit` → ExceedsLimit; closed → Closed; a probe succeeds iff the
//!   bucket holds a token and takes none; otherwise granted iff the bucket holds `n` tokens.
//! - a denial carries RetryAfter = the exact time until the start of the first period at which
//!   the bucket holds enough tokens (`n`, or 1 for a probe): waiting exactly that long succeeds,
//!   1 ns less does not. A reading behind the state's own tick (stale, or a clock stepped back)
//!   waits from the start of the state's tick: real time is at least there.
//! - idle: while the bucket is full, the time since the start of the period in which it became
//!   full (since creation, for a bucket never touched).
//!
//! State: the token count *as of* a tick. A full bucket is dated by the tick at which it became
//! full. A clock reading in an earlier tick acts at the state's own tick (see the module docs of
//! `model`).

use super::time::{div_ceil, elapsed};
use super::{Counts, Denial, Expect, Model, Reason};

/// The model.
#[derive(Clone, Debug)]
pub struct TokenBucketModel {
    origin: u64,
    limit: u128,
    per_period: u128,
    period: u128,
    /// Tokens in the bucket at tick `as_of`.
    tokens: u128,
    /// The tick `tokens` describes; for a full bucket, the tick at which it became full.
    as_of: u128,
    closed: bool,
    counts: Counts,
}

impl TokenBucketModel {
    /// A full bucket created at the raw reading `origin`.
    pub fn new(origin: u64, limit: u32, per_period: u32, period_ns: u64) -> Self {
        TokenBucketModel {
            origin,
            limit: u128::from(limit),
            per_period: u128::from(per_period),
            period: u128::from(period_ns),
            tokens: u128::from(limit),
            as_of: 0,
            closed: false,
            counts: Counts::default(),
        }
    }

    /// The tick the limiter acts at for the reading `now`: the clock's tick, or the state's own
    /// if the clock is behind it.
    fn tick(&self, now: u64) -> u128 {
        (elapsed(self.origin, now) / self.period).max(self.as_of)
    }

    /// (tokens, as_of) at tick `t >= self.as_of`.
    fn at(&self, t: u128) -> (u128, u128) {
        assert!(t >= self.as_of);
        if self.tokens == self.limit {
            return (self.tokens, self.as_of); // full stays full, dated when it filled
        }
        let periods_to_full = div_ceil(self.limit - self.tokens, self.per_period);
        if t - self.as_of >= periods_to_full {
            (self.limit, self.as_of + periods_to_full)
        } else {
            (self.tokens + (t - self.as_of) * self.per_period, t)
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
        let t = self.tick(now);
        let (tokens, _) = self.at(t);
        let needed = n.max(1);
        if tokens >= needed {
            if n > 0 {
                self.tokens = tokens - n;
                self.as_of = t;
            }
            return Ok(());
        }
        // Not full at t, so the count grows by `per_period` at each tick after t.
        let ready = t + div_ceil(needed - tokens, self.per_period);
        Err(Denial {
            reason: Reason::Exhausted,
            retry_after: Expect::Exactly(Some(self.wait_until(now, t, ready))),
        })
    }

    /// The wait until tick `ready` starts, seen from `now`, acting at tick `t`: from `now`, or,
    /// when the clock is behind the state (a stale reading), from the start of `t` — real time
    /// is at least there, and the staleness must not inflate the wait.
    fn wait_until(&self, now: u64, t: u128, ready: u128) -> u128 {
        if self.clock_behind(now) {
            (ready - t) * self.period
        } else {
            ready * self.period - elapsed(self.origin, now)
        }
    }
}

impl Model for TokenBucketModel {
    fn acquire(&mut self, now: u64, n: u32) -> Result<(), Denial> {
        let r = self.decide(now, n);
        self.counts.count(r)
    }

    fn available(&self, now: u64) -> u128 {
        self.at(self.tick(now)).0
    }

    fn idle(&self, now: u64) -> Expect<Option<u128>> {
        let (tokens, since) = self.at(self.tick(now));
        Expect::Exactly(if tokens == self.limit {
            Some(elapsed(self.origin, now).saturating_sub(since * self.period))
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
        Some(self.period)
    }

    fn elapsed(&self, now: u64) -> u128 {
        elapsed(self.origin, now)
    }

    fn clock_behind(&self, now: u64) -> bool {
        elapsed(self.origin, now) / self.period < self.as_of
    }

    fn counts_mut(&mut self) -> &mut Counts {
        &mut self.counts
    }

    /// Tokens a waiter was granted and never received go back into the bucket at the current
    /// tick, capped at the limit; the bucket is then dated by that tick (a bucket full after a
    /// give-back became full then — even a give-back of nothing ends a use).
    fn give_back(&mut self, now: u64, n: u32, _stamp: u128) {
        let t = self.tick(now);
        let (tokens, _) = self.at(t);
        self.tokens = (tokens + u128::from(n)).min(self.limit);
        self.as_of = t;
    }

    fn replenish(&mut self, now: u64) -> u128 {
        let t = self.tick(now);
        (self.tokens, self.as_of) = self.at(t);
        self.tokens
    }
}
