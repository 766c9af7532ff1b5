//! The sliding-window log (article 002): every admitted request's time and permits; a request of
//! `n` is admitted iff the permits of the requests younger than the window, plus `n`, are at most
//! the limit.
//!
//! - a request's age is `t - at`; it counts while its age is below the window;
//! - `t` is the time since creation, or the newest admitted request's time if the clock reads
//!   earlier (no time passed): requests are recorded in order;
//! - RetryAfter: the first instant at which enough of the oldest requests are older than the
//!   window, counted from the clock's reading (even when it is behind); idle: from the instant the newest request left the window (creation if none);
//! - a plain `Vec`, never trimmed (no capacity to respect: the library's ring holds `N ≥ limit`).

use super::time::elapsed;
use super::{Counts, Denial, Expect, Model, Reason};

/// The model.
#[derive(Clone, Debug)]
pub struct SlidingLogModel {
    origin: u64,
    limit: u128,
    window: u128,
    log: Vec<(u128, u128)>,
    closed: bool,
    counts: Counts,
}

impl SlidingLogModel {
    /// A fresh log of `limit` per `window` ns.
    pub fn new(origin: u64, limit: u32, window: u64) -> Self {
        SlidingLogModel {
            origin,
            limit: u128::from(limit),
            window: u128::from(window),
            log: Vec::new(),
            closed: false,
            counts: Counts::default(),
        }
    }

    fn t(&self, now: u64) -> u128 {
        let e = elapsed(self.origin, now);
        self.log.last().map_or(e, |&(at, _)| e.max(at))
    }

    fn used(&self, t: u128) -> u128 {
        self.log
            .iter()
            .filter(|(at, _)| t - at < self.window)
            .map(|(_, n)| n)
            .sum()
    }

    fn decide(&mut self, now: u64, n: u32) -> Result<(), Denial> {
        let n = u128::from(n);
        if n > self.limit {
            return Err(Denial::plain(Reason::ExceedsLimit));
        }
        if self.closed {
            return Err(Denial::plain(Reason::Closed));
        }
        let t = self.t(now);
        let want = n.max(1);
        if self.used(t) + want <= self.limit {
            if n > 0 {
                self.log.push((t, n));
            }
            return Ok(());
        }
        // The first expiry instant after which the request fits.
        let wait = self
            .log
            .iter()
            .map(|(at, _)| at + self.window)
            .filter(|&leaves| leaves > t)
            .find(|&leaves| self.used(leaves) + want <= self.limit)
            .map(|leaves| leaves - elapsed(self.origin, now))
            .expect("want <= limit: once every entry has left, it fits");
        Err(Denial {
            reason: Reason::Exhausted,
            retry_after: Expect::Exactly(Some(wait)),
        })
    }
}

impl SlidingLogModel {
    /// A lease settled `n` above its estimate at `now` (issue 38): recorded at that instant,
    /// as a request of `n` granted then would be, even past the limit — into debt — as long as
    /// the window then holds at most twice the limit; `false` (nothing taken) past that.
    /// Closed or not. (The library's ring folds a debit into its newest entry when it has no
    /// free slot, which a ring of twice the limit never lacks: compare on such a ring.)
    pub fn debit(&mut self, now: u64, n: u32) -> bool {
        let n = u128::from(n);
        let t = self.t(now);
        if self.used(t) + n > 2 * self.limit {
            return false;
        }
        self.log.push((t, n));
        true
    }
}

impl Model for SlidingLogModel {
    fn acquire(&mut self, now: u64, n: u32) -> Result<(), Denial> {
        let r = self.decide(now, n);
        self.counts.count(r)
    }
    fn available(&self, now: u64) -> u128 {
        self.limit.saturating_sub(self.used(self.t(now)))
    }
    fn idle(&self, now: u64) -> Expect<Option<u128>> {
        let t = self.t(now);
        if self.used(t) > 0 {
            return Expect::Exactly(None);
        }
        let since = self.log.last().map_or(0, |&(at, _)| at + self.window);
        Expect::Exactly(Some(elapsed(self.origin, now).saturating_sub(since)))
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
}
