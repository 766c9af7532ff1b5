//! The concurrency limiter without a wait queue ([`NoQueue`]): the same word, the same
//! decisions and the same release as the queued limiter, with no queue to wait in or to hand
//! permits to.
//!
//! The queued limiter's rare paths — a release that pays a debt left by a lowered limit, or
//! whose sum lands above the limit it read, and `reconfigure` — run under its queue lock, where
//! the limit and the debt hold still. Without a queue they run under one lock shared by every
//! limiter without a queue: a `critical-section` section without `std` (interrupt-safe, as the
//! queue lock is), a mutex with it (loom's under `cfg(loom)`). Taking a permit never locks, and
//! neither does a release while nothing is owed and its sum stays within the limit.

use core::time::Duration;

use super::{ConcurrencyLimiter, ConcurrencyOptions};
use crate::clock::Clock;
use crate::lease::{Lease, Rejection, Release, Statistics};
use crate::limiter::{Limiter, Peek};
use crate::options::OptionsError;
use crate::queue_kind::NoQueue;

/// Runs `f` under the lock of the rare paths of every concurrency limiter without a queue (see
/// the module docs), held for one transition of the word (a compare-and-swap loop) and the
/// debt's load and store: a `critical-section` section without `std`, a mutex with it.
#[inline(always)]
fn slow_path<R>(f: impl FnOnce() -> R) -> R {
    NoQueue::serialized(f)
}

impl<C: Clock> ConcurrencyLimiter<C, NoQueue> {
    /// A limiter without a wait queue ([`NoQueue`]), reading time from `clock`. The options'
    /// queue limit must be 0 ([`OptionsError::NoWaitQueue`] otherwise). The same decisions as
    /// [`with_clock`](ConcurrencyLimiter::with_clock)'s limiter, with no `acquire`.
    ///
    /// ```
    /// use tollgate::{
    ///     ConcurrencyLimiter, ConcurrencyOptions, Limiter, ManualClock, NoQueue, OptionsError,
    ///     QueueOrder, Reason,
    /// };
    ///
    /// let opts = ConcurrencyOptions::new(2);
    /// let limiter: ConcurrencyLimiter<_, NoQueue> =
    ///     ConcurrencyLimiter::without_queue(opts, ManualClock::new()).unwrap();
    /// let lease = limiter.try_acquire(2).unwrap();
    /// assert_eq!(limiter.try_acquire(1).unwrap_err().reason(), Reason::Exhausted);
    /// drop(lease); // the permits come back
    /// assert_eq!(limiter.available_permits(), 2);
    ///
    /// let queued = opts.with_queue(1, QueueOrder::OldestFirst);
    /// let refused = ConcurrencyLimiter::without_queue(queued, ManualClock::new());
    /// assert_eq!(refused.unwrap_err(), OptionsError::NoWaitQueue);
    /// ```
    pub fn without_queue(options: ConcurrencyOptions, clock: C) -> Result<Self, OptionsError> {
        options.validate()?;
        let queue = NoQueue::checked(options.queue_limit)?;
        Ok(Self::at_clock_reading(options, clock, queue))
    }

    crate::sync::const_unless_loom! {
        /// [`at_epoch`](ConcurrencyLimiter::at_epoch) without a wait queue ([`NoQueue`]): a
        /// `static` limiter for firmware that shares it with interrupt handlers and never waits.
        /// Its idleness counts from the clock's epoch, and no release reads the clock. Invalid
        /// options, or a queue limit above 0, stop the build.
        ///
        /// ```
        /// use tollgate::{Clock, ConcurrencyLimiter, ConcurrencyOptions, Instant, Limiter, NoQueue};
        ///
        /// struct Uptime; // e.g. a timer peripheral's counter, in nanoseconds since boot
        /// impl Clock for Uptime {
        ///     fn now(&self) -> Instant {
        ///         Instant::from_nanos(0)
        ///     }
        /// }
        ///
        /// static PERMITS: ConcurrencyLimiter<Uptime, NoQueue> =
        ///     ConcurrencyLimiter::at_epoch_without_queue(ConcurrencyOptions::new(4), Uptime);
        ///
        /// let lease = PERMITS.try_acquire(3).unwrap();
        /// assert_eq!(PERMITS.available_permits(), 1);
        /// drop(lease);
        /// assert_eq!(PERMITS.available_permits(), 4);
        /// ```
        ///
        /// ```compile_fail
        /// # use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, ManualClock, NoQueue, QueueOrder};
        /// static QUEUED: ConcurrencyLimiter<ManualClock, NoQueue> = ConcurrencyLimiter::at_epoch_without_queue(
        ///     ConcurrencyOptions::new(1).with_queue(1, QueueOrder::OldestFirst),
        ///     ManualClock::new(),
        /// );
        /// ```
        pub fn at_epoch_without_queue(options: ConcurrencyOptions, clock: C) -> Self {
            if let Err(e) = options.validate() {
                e.panic_in_const();
            }
            let queue = NoQueue::in_const(options.queue_limit);
            Self::assemble(options, clock, queue, 0, false)
        }
    }

    /// [`reconfigure`](ConcurrencyLimiter::reconfigure) without a queue: the same rule for the
    /// permit limit (a raised limit is available at once; a lowered one takes what is
    /// available and the leases out owe the rest), and the queue limit must stay 0
    /// ([`OptionsError::NoWaitQueue`]). The queue order of a queue that does not exist changes
    /// nothing: any is accepted.
    ///
    /// ```
    /// use tollgate::{
    ///     ConcurrencyLimiter, ConcurrencyOptions, Limiter, ManualClock, OptionsError, QueueOrder,
    /// };
    ///
    /// let limiter =
    ///     ConcurrencyLimiter::without_queue(ConcurrencyOptions::new(10), ManualClock::new()).unwrap();
    /// let held = limiter.try_acquire(8).unwrap();
    /// limiter.reconfigure(ConcurrencyOptions::new(4)).unwrap(); // 8 held, 4 allowed: 4 owed
    /// assert_eq!(limiter.available_permits(), 0);
    /// drop(held); // pays the 4 owed, frees the other 4
    /// assert_eq!(limiter.available_permits(), 4);
    /// let queued = ConcurrencyOptions::new(6).with_queue(1, QueueOrder::OldestFirst);
    /// assert_eq!(limiter.reconfigure(queued), Err(OptionsError::NoWaitQueue));
    /// assert_eq!(limiter.options().permit_limit, 4);
    /// ```
    pub fn reconfigure(&self, options: ConcurrencyOptions) -> Result<(), OptionsError> {
        options.validate()?;
        NoQueue::checked(options.queue_limit)?;
        slow_path(|| self.apply_limit(options.permit_limit));
        Ok(())
    }
}

impl<C: Clock> ConcurrencyLimiter<C, NoQueue> {
    /// Closes the word: there is nobody waiting to fail.
    fn close_now(&self) {
        self.close_word();
    }
}

impl_limiter!(
    ConcurrencyLimiter<C, NoQueue>;
    /// Without a queue: the same answers, nobody waiting ahead.
    Peek;
    /// Without a queue: the same decisions; a lease gives its permits back when dropped, and
    /// `close` has nobody to fail.
    Limiter
);

/// The queued limiter's release with nobody to hand permits to: one CAS while nothing is owed,
/// else under the slow-path lock (see the module docs).
impl<C: Clock + Sync> Release for ConcurrencyLimiter<C, NoQueue> {
    // Always: a lease's drop reaches it through a compare with the no-op releaser, after which
    // the inliner no longer took it (a call and a second frame on firmware: +46 bytes).
    #[inline(always)]
    fn release(&self, permits: u32) {
        if self.release_fast(permits) {
            return;
        }
        slow_path(|| {
            let _ = self.repay_and_hand(permits, None);
        });
    }

    /// Below the estimate, the difference is released at once; above, the extra is taken,
    /// into debt when it is not available (at most one `limit` owed).
    fn settle(&self, s: crate::lease::Settlement) -> Result<(), crate::lease::SettleError> {
        self.settle_now(
            s,
            |n| self.release(n),
            |extra| slow_path(|| self.take_debt(extra, s.max_debt)),
        )
    }
}
