//! The concurrency limiter: at most `limit` permits held at once.
//!
//! - `try_acquire(n)`: `n > limit` → ExceedsLimit (even when closed); closed → Closed; a probe
//!   (`n == 0`) succeeds iff any permit is free and takes nothing; otherwise granted iff `n`
//!   permits are free. No RetryAfter: the limiter cannot know when leases end.
//! - a lease gives its permits back when dropped (a 0-permit lease gives nothing back); a release
//!   by hand gives back any count; the free count never exceeds the limit.
//! - idle: while every permit is free, the time since the release after which they all were (or
//!   since creation). The limiter does not tick, so it reads the raw clock: a release at a reading
//!   earlier than the recorded one does not move the idle start back (time never runs backwards),
//!   and a reading earlier than the idle start is no time at all.

use super::{Counts, Denial, Expect, Model, Reason};

/// The model.
#[derive(Clone, Debug)]
pub struct ConcurrencyModel {
    limit: u128,
    free: u128,
    closed: bool,
    /// Raw clock reading since which all permits have been free.
    idle_since: u64,
    counts: Counts,
}

impl ConcurrencyModel {
    /// A fresh limiter of `limit` permits created at the raw reading `origin`.
    pub fn new(limit: u32, origin: u64) -> Self {
        ConcurrencyModel {
            limit: u128::from(limit),
            free: u128::from(limit),
            closed: false,
            idle_since: origin,
            counts: Counts::default(),
        }
    }

    fn decide(&mut self, n: u32) -> Result<(), Denial> {
        let n = u128::from(n);
        if n > self.limit {
            return Err(Denial::plain(Reason::ExceedsLimit));
        }
        if self.closed {
            return Err(Denial::plain(Reason::Closed));
        }
        let needed = n.max(1); // a probe needs one free permit, and takes none
        if self.free < needed {
            return Err(Denial::plain(Reason::Exhausted));
        }
        self.free -= n;
        Ok(())
    }
}

impl Model for ConcurrencyModel {
    fn acquire(&mut self, _now: u64, n: u32) -> Result<(), Denial> {
        let r = self.decide(n);
        self.counts.count(r)
    }

    fn available(&self, _now: u64) -> u128 {
        self.free
    }

    fn idle(&self, now: u64) -> Expect<Option<u128>> {
        Expect::Exactly(if self.free == self.limit {
            Some(u128::from(now.saturating_sub(self.idle_since)))
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
        None
    }

    fn elapsed(&self, now: u64) -> u128 {
        u128::from(now)
    }

    fn counts_mut(&mut self) -> &mut Counts {
        &mut self.counts
    }

    /// A waiter's unreceived grant comes back like a release.
    fn give_back(&mut self, now: u64, n: u32, _stamp: u128) {
        self.release(now, n);
    }

    fn queue_emptied(&mut self, now: u64) {
        if self.free == self.limit {
            self.idle_since = self.idle_since.max(now);
        }
    }

    fn release_queued(&mut self, _now: u64, n: u32) {
        self.free = (self.free + u128::from(n)).min(self.limit);
    }

    fn release(&mut self, now: u64, n: u32) {
        self.free = (self.free + u128::from(n)).min(self.limit);
        if self.free == self.limit {
            self.idle_since = self.idle_since.max(now);
        }
    }
}
