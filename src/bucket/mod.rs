//! The lock-free core shared by the token bucket and the fixed window: a 128-bit word driven by
//! the pure transitions of [`state`], time read from a [`Clock`] and converted to ticks.

pub(crate) mod state;

use core::convert::Infallible;
use core::time::Duration;

use crate::cas;
use crate::clock::Clock;
use crate::lease::{Reason, Rejection, Statistics};
use crate::stats::Counters;
use crate::sync::{AtomicU128, Ordering};
use crate::ticks::Ticker;

use state::{Bucket, Denied, Refill};

/// The shared core. `refill.limit` is the largest request that can ever succeed.
#[derive(Debug)]
pub(crate) struct BucketCore<C> {
    word: AtomicU128,
    ticker: Ticker,
    refill: Refill,
    pub(crate) counters: Counters,
    pub(crate) clock: C,
}

impl<C: Clock> BucketCore<C> {
    pub(crate) fn new(refill: Refill, period_ns: u64, clock: C) -> Self {
        let ticker = Ticker::new(clock.now(), period_ns);
        Self {
            word: AtomicU128::new(Bucket::full(refill.limit).pack()),
            ticker,
            refill,
            counters: Counters::new(),
            clock,
        }
    }

    /// Takes `n` tokens now, or says why not and when to retry. Counted in the statistics.
    #[inline]
    pub(crate) fn take(&self, n: u32) -> Result<(), Rejection> {
        let result = self.take_uncounted(n);
        self.counters.count(result)
    }

    #[inline]
    fn take_uncounted(&self, n: u32) -> Result<(), Rejection> {
        if n > self.refill.limit {
            return Err(Rejection::new(Reason::ExceedsLimit));
        }
        let (k, into) = self.ticker.tick(self.clock.now());
        let r = self.refill;
        match cas::transition(&self.word, |w| {
            Bucket::unpack(w)
                .try_take(k, n, r)
                .map(|b| (b.pack(), ()))
                .map_err(|d| (d, w))
        }) {
            Ok(_) => Ok(()),
            Err((Denied::Closed, _)) => Err(Rejection::new(Reason::Closed)),
            Err((Denied::Exhausted { missing }, w)) => {
                // The bucket gains at the ticks after `base` (after `k`, unless the clock stepped
                // back behind the bucket's own tick).
                let base = Bucket::unpack(w).at(k, r).tick.max(k);
                let ticks = Bucket::ticks_to_gain(missing, r).saturating_add(base - k);
                Err(Rejection::with_retry_after(
                    Reason::Exhausted,
                    self.ticker.wait_for(ticks, into),
                ))
            }
        }
    }

    fn now_state(&self) -> (Bucket, u64) {
        let (k, _) = self.ticker.tick(self.clock.now());
        (
            Bucket::unpack(self.word.load(Ordering::Acquire)).at(k, self.refill),
            k,
        )
    }

    pub(crate) fn available(&self) -> u64 {
        u64::from(self.now_state().0.tokens)
    }

    pub(crate) fn statistics(&self) -> Statistics {
        Statistics {
            available_permits: self.available(),
            queued_permits: 0,
            total_successful: self.counters.successful(),
            total_failed: self.counters.failed(),
        }
    }

    /// Full since the start of the tick it filled at; `None` while not full.
    pub(crate) fn idle_duration(&self) -> Option<Duration> {
        let now = self.clock.now();
        let b = Bucket::unpack(self.word.load(Ordering::Acquire));
        let full_at = b.full_at(self.refill);
        let (k, _) = self.ticker.tick(now);
        (full_at <= k && !b.waiters)
            .then(|| now.saturating_duration_since(self.ticker.start_of(full_at)))
    }

    pub(crate) fn close(&self) {
        let _ = cas::transition(&self.word, |w| {
            Ok::<_, Infallible>((Bucket::unpack(w).close().pack(), ()))
        });
    }

    pub(crate) fn is_closed(&self) -> bool {
        Bucket::unpack(self.word.load(Ordering::Acquire)).closed
    }

    pub(crate) fn period(&self) -> Duration {
        Duration::from_nanos(self.ticker.period_ns())
    }

    /// Writes the state as of now (if time has added anything) and returns the tokens.
    pub(crate) fn replenish(&self) -> u64 {
        let (k, _) = self.ticker.tick(self.clock.now());
        let r = self.refill;
        let Ok((before, ())) = cas::transition(&self.word, |w| {
            Ok::<_, Infallible>((Bucket::unpack(w).at(k, r).pack(), ()))
        });
        u64::from(Bucket::unpack(before).at(k, r).tokens)
    }
}
