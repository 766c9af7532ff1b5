//! The concurrency limiter: at most `permit_limit` permits held at once; a lease gives its
//! permits back when dropped.

mod state;

use core::convert::Infallible;
use core::time::Duration;

use crate::cas;
use crate::clock::{Clock, Instant};
use crate::lease::{Lease, Reason, Rejection, Release, Statistics};
use crate::limiter::Limiter;
use crate::options::{OptionsError, QueueOrder};
use crate::stats::Counters;
use crate::sync::{AtomicU64, Ordering};

use state::{Denied, State};

/// Options of a [`ConcurrencyLimiter`] (.NET `ConcurrencyLimiterOptions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConcurrencyOptions {
    /// Permits that can be held at once. At least 1.
    pub permit_limit: u32,
    /// Permits that may wait in the queue (for waiting acquisitions).
    pub queue_limit: u32,
    /// The order queued requests are served in.
    pub queue_order: QueueOrder,
}

impl ConcurrencyOptions {
    /// `permit_limit` permits, no queue.
    pub const fn new(permit_limit: u32) -> Self {
        Self {
            permit_limit,
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

    /// Checks the options: the limit must be at least 1.
    pub const fn validate(&self) -> Result<(), OptionsError> {
        if self.permit_limit == 0 {
            return Err(OptionsError::ZeroLimit);
        }
        Ok(())
    }
}

/// At most `permit_limit` permits held at once (.NET `ConcurrencyLimiter`). Acquire and release are
/// each one compare-and-swap on a 64-bit word; nothing locks or allocates.
///
/// ```
/// use turnstile::{ConcurrencyLimiter, ConcurrencyOptions, Limiter, Reason};
///
/// let limiter = ConcurrencyLimiter::new(ConcurrencyOptions::new(3)).unwrap();
/// let a = limiter.try_acquire(2).unwrap();
/// assert_eq!(limiter.try_acquire(2).unwrap_err().reason(), Reason::Exhausted);
/// drop(a); // the permits come back
/// assert!(limiter.try_acquire(3).is_ok());
/// assert_eq!(limiter.try_acquire(4).unwrap_err().reason(), Reason::ExceedsLimit);
/// ```
#[derive(Debug)]
pub struct ConcurrencyLimiter<C: Clock> {
    word: AtomicU64,
    idle_since: AtomicU64,
    counters: Counters,
    options: ConcurrencyOptions,
    clock: C,
}

#[cfg(feature = "std")]
impl ConcurrencyLimiter<crate::StdClock> {
    /// A limiter on the system clock (the clock only dates idleness).
    pub fn new(options: ConcurrencyOptions) -> Result<Self, OptionsError> {
        Self::with_clock(options, crate::StdClock)
    }
}

impl<C: Clock> ConcurrencyLimiter<C> {
    /// A limiter reading time from `clock`.
    pub fn with_clock(options: ConcurrencyOptions, clock: C) -> Result<Self, OptionsError> {
        options.validate()?;
        let now = clock.now();
        Ok(Self {
            word: AtomicU64::new(State::full(options.permit_limit).pack()),
            idle_since: AtomicU64::new(now.as_nanos()),
            counters: Counters::new(),
            options,
            clock,
        })
    }

    /// The options the limiter was built with.
    pub fn options(&self) -> &ConcurrencyOptions {
        &self.options
    }

    fn state(&self) -> State {
        State::unpack(self.word.load(Ordering::Acquire))
    }

    fn take(&self, permits: u32) -> Result<(), Rejection> {
        if permits > self.options.permit_limit {
            return Err(Rejection::new(Reason::ExceedsLimit));
        }
        cas::transition(&self.word, |w| {
            State::unpack(w).try_take(permits).map(|s| (s.pack(), ()))
        })
        .map(|_| ())
        .map_err(|d| match d {
            Denied::Closed => Rejection::new(Reason::Closed),
            Denied::Exhausted => Rejection::new(Reason::Exhausted),
        })
    }
}

impl<C: Clock> Limiter for ConcurrencyLimiter<C>
where
    C: Sync,
{
    #[inline]
    fn try_acquire(&self, permits: u32) -> Result<Lease<'_>, Rejection> {
        let taken = self.counters.count(self.take(permits));
        taken.map(|()| {
            if permits == 0 {
                Lease::unreleased(0)
            } else {
                Lease::releasing(permits, self)
            }
        })
    }

    fn available_permits(&self) -> u64 {
        u64::from(self.state().available)
    }

    fn statistics(&self) -> Statistics {
        Statistics {
            available_permits: self.available_permits(),
            queued_permits: 0,
            total_successful: self.counters.successful(),
            total_failed: self.counters.failed(),
        }
    }

    fn idle_duration(&self) -> Option<Duration> {
        let since = Instant::from_nanos(self.idle_since.load(Ordering::Acquire));
        let s = self.state();
        (s.available == self.options.permit_limit && !s.waiters)
            .then(|| self.clock.now().saturating_duration_since(since))
    }

    fn close(&self) {
        let _ = cas::transition(&self.word, |w| {
            Ok::<_, Infallible>((State::unpack(w).close().pack(), ()))
        });
    }

    fn is_closed(&self) -> bool {
        self.state().closed
    }
}

impl<C: Clock> Release for ConcurrencyLimiter<C> {
    #[inline]
    fn release(&self, permits: u32) {
        let limit = self.options.permit_limit;
        let Ok((before, ())) = cas::transition(&self.word, |w| {
            Ok::<_, Infallible>((State::unpack(w).give_back(permits, limit).pack(), ()))
        });
        if State::unpack(before).give_back(permits, limit).available == limit {
            // Fully available again: idle from now. fetch_max keeps the latest of racing
            // releases, so an older reading never overwrites a newer one.
            self.idle_since
                .fetch_max(self.clock.now().as_nanos(), Ordering::AcqRel);
        }
    }
}
