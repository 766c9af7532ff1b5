//! The sliding log's core: the ring behind the crate's lock, the limit, the counts and the
//! queue; a [`RateCore`] whose decision (`take`, `try_acquire_counted`, `peek`) and closing are
//! its own methods, under the names the lock-free cores' `QuickPath` and `CellCore` give them,
//! which [`rate_limiter!`](crate::rate_limiter::rate_limiter) wires into every capability.
//!
//! Lock order: the queue's lock, then the log's (`take_locked`, `take_for_waiter` and the
//! RetryAfter behind the queue run under the first and take the second); nothing takes the
//! queue's lock while it holds the log's.

use core::time::Duration;

use crate::clock::Clock;
use crate::core_common::{RateBase, WindowLimit};
use crate::lease::{Reason, Rejection};
use crate::nanos::Nanos;
use crate::queue_kind::QueueKind;
use crate::rate_core::RateCore;
use crate::sync::{AtomicBool, Ordering};
use crate::ticks::duration_from_nanos_u128;
use crate::wait::{Lock, LockedTake, WaitQueue};

use super::state::{Denied, Log, Shape};

/// The core of a [`SlidingLogLimiter`](crate::SlidingLogLimiter) with a ring of `N` entries.
pub(crate) struct LogCore<C, const N: usize, Q = WaitQueue> {
    log: Lock<Log<N>>,
    closed: AtomicBool,
    pub(crate) base: RateBase<C, Q>,
    /// Permits per window (changed by `reconfigure` and read by every decision under the log's
    /// lock) and the window.
    limits: WindowLimit,
}

impl<C: Clock, const N: usize, Q: QueueKind> LogCore<C, N, Q> {
    crate::sync::const_unless_loom! {
        /// An empty log of `limit` per `window` ns, its time counted from `origin`.
        pub(crate) fn new(
            limit: u32,
            window: u64,
            queue: Q,
            origin: crate::clock::Instant,
            clock: C,
        ) -> Self {
            Self {
                log: Lock::new(Log::new()),
                closed: AtomicBool::new(false),
                base: RateBase::new(origin, 1, queue, clock),
                limits: WindowLimit::new(limit, window),
            }
        }
    }

    /// The window's shape (read under the log's lock for a decision).
    #[inline]
    fn shape(&self) -> Shape {
        self.limits.shape()
    }

    /// Changes the limit under the log's lock, where every decision reads it.
    pub(crate) fn set_limit(&self, limit: u32) {
        self.log.with(|_| self.limits.set(limit));
    }

    /// One attempt under the log's lock, where `closed` is checked (so nothing is admitted
    /// after `close` returns): on a refusal, `None` if closed, else the wait and whether
    /// waiters hold newcomers back; on a grant, the entry's time (its stamp).
    fn attempt(&self, now: u64, n: u32, barge: bool) -> Result<u64, Option<(u128, bool)>> {
        self.log.with(|log| {
            if self.is_closed() {
                return Err(None);
            }
            let s = self.shape();
            log.try_take(now, n, s, barge)
                .map(|()| log.effective(now))
                .map_err(|Denied::Exhausted { wait }| Some((wait, log.waiters)))
        })
    }

    /// Takes `n` permits now without waiting (uncounted), or says why not and when to retry;
    /// `serve` serves the queue when waiters hold a newcomer back; the entry's time.
    pub(crate) fn take(&self, n: u32, serve: impl FnOnce()) -> Result<u64, Rejection> {
        if n > self.limit() {
            return Err(Rejection::new(&Reason::ExceedsLimit));
        }
        let now = self.base.elapsed();
        let mut result = self.attempt(now, n, false);
        if let Err(Some((_, true))) = result {
            serve();
            result = self.attempt(now, n, self.base.queue.barging());
        }
        result.map_err(|refused| self.rejection(refused, now, n))
    }

    /// The whole `try_acquire`, counted.
    #[inline]
    pub(crate) fn try_acquire_counted<T>(
        &self,
        n: u32,
        granted: impl FnOnce(u32, u64) -> T,
        serve: impl FnOnce(),
    ) -> Result<T, Rejection> {
        let taken = self.take(n, serve).map(|stamp| granted(n, stamp));
        self.base.counters.count(taken)
    }

    /// The rejection of `n` permits at `now` (`None`: closed): the exact wait, behind each
    /// waiter queued ahead unless newcomers barge.
    #[cold]
    fn rejection(&self, refused: Option<(u128, bool)>, now: u64, n: u32) -> Rejection {
        let Some((wait, waiters)) = refused else {
            return Rejection::new(&Reason::Closed);
        };
        let wait = if waiters && !self.base.queue.barging() {
            let newcomer = core::iter::once(n.max(1));
            self.base.queue.with_requests(|ahead| {
                self.log
                    .with(|log| log.wait_behind(now, ahead.chain(newcomer), self.shape()))
            })
        } else {
            wait
        };
        Rejection::after(&Reason::Exhausted, Nanos::from_u128(wait.max(1)))
    }

    /// What [`take`](Self::take) would answer now: decided on a copy of the log (`N` entries,
    /// under the lock), so nothing is admitted, no expired entry dropped and nobody served.
    pub(crate) fn peek(&self, n: u32) -> Result<(), Rejection> {
        if n > self.limit() {
            return Err(Rejection::new(&Reason::ExceedsLimit));
        }
        let now = self.base.elapsed();
        let barge = self.base.queue.barging();
        self.log
            .with(|log| {
                if self.is_closed() {
                    return Err(None);
                }
                log.clone()
                    .try_take(now, n, self.shape(), barge)
                    .map_err(|Denied::Exhausted { wait }| Some((wait, log.waiters)))
            })
            .map_err(|refused| self.rejection(refused, now, n))
    }

    pub(crate) fn clear_waiters(&self) {
        self.log.with(|log| log.waiters = false);
    }

    pub(crate) fn close(&self) {
        self.log
            .with(|_| self.closed.store(true, Ordering::Release));
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether the queue flag is set (anyone waits).
    pub(crate) fn has_waiters(&self) -> bool {
        self.log.with(|log| log.waiters)
    }
}

impl<C: Clock, const N: usize, Q: QueueKind> RateCore for LogCore<C, N, Q> {
    crate::rate_core::base_field!();

    fn limit(&self) -> u32 {
        self.shape().limit
    }

    /// The window: an entry comes back exactly one window after it was taken.
    fn period(&self) -> Duration {
        self.limits.window()
    }

    fn available(&self) -> u64 {
        let now = self.base.elapsed();
        self.log.with(|log| {
            let s = self.shape();
            u64::from(s.limit).saturating_sub(log.used_at(now, s))
        })
    }

    /// Idle since the newest entry left the window (since creation if none was ever taken),
    /// with no one waiting.
    fn idle_duration(&self) -> Option<Duration> {
        let now = self.base.elapsed();
        let since = self.log.with(|log| {
            if log.waiters {
                None
            } else {
                log.empty_since(now, self.shape())
            }
        })?;
        Some(Duration::from_nanos(now.saturating_sub(since)))
    }

    /// Drops the entries that can never count again (those that left the window by the newest
    /// entry's time). It dates nothing: only an admission does, so a clock stepped back
    /// afterwards sees the log as the last admission left it.
    fn catch_up(&self) {
        self.log.with(|log| log.expire(self.shape()));
    }

    /// Under the queue lock: takes `n` ignoring the queue flag (stamped with the entry's
    /// time), or finds them short, setting the flag when `flag_if_short`.
    fn take_locked(&self, n: u32, flag_if_short: bool) -> LockedTake {
        let now = self.base.elapsed();
        self.log.with(|log| {
            if self.is_closed() {
                return Err(&Reason::Closed);
            }
            match log.try_take(now, n, self.shape(), true) {
                Ok(()) => Ok(Some(log.effective(now))),
                Err(Denied::Exhausted { .. }) => {
                    log.waiters |= flag_if_short;
                    Ok(None)
                }
            }
        })
    }

    /// Under the queue lock, for the waiter at the serving end: takes `n` as of the instant
    /// they first fit ([`Log::take_when_fits`]), or finds them short. The stamp is that instant.
    fn take_for_waiter(&self, n: u32) -> LockedTake {
        let now = self.base.elapsed();
        self.log.with(|log| {
            if self.is_closed() {
                return Err(&Reason::Closed);
            }
            Ok(log.take_when_fits(now, n, self.shape()).ok())
        })
    }

    /// The instant of the newest entry whose instant's low bits are the stamp (`u64::MAX`, which
    /// no entry has, if none).
    fn unmark(&self, stamp: u64) -> u64 {
        self.log.with(|log| log.instant_of_stamp(stamp))
    }

    /// Takes `n` more permits now, past any waiter and into debt when they are not there
    /// ([`Log::take_debt`]: an entry of its own, or folded into the newest entry when the ring
    /// is full), as long as the window then holds at most one limit past the limit.
    fn take_debt(&self, n: u32, max_debt: u32) -> Result<(), crate::lease::SettleError> {
        let now = self.base.elapsed();
        self.log.with(|log| {
            let s = self.shape();
            let bound = crate::core_common::window_debt_bound(s.limit, u32::MAX).min(max_debt);
            if log.take_debt(now, n, s, bound) {
                Ok(())
            } else {
                Err(crate::lease::SettleError::DebtLimit)
            }
        })
    }

    /// Takes `n` permits recorded at `stamp` out of the log, for a waiter that never received
    /// them or a lease settled below what it took; whether anyone waits.
    fn give_back(&self, n: u32, stamp: u64) -> bool {
        self.log.with(|log| {
            log.remove(stamp, n);
            log.waiters
        })
    }

    /// How long until time alone lets `total` permits be admitted.
    fn wait_for(&self, total: u64) -> Duration {
        let now = self.base.elapsed();
        let wait = self.log.with(|log| log.wait_for(now, total, self.shape()));
        duration_from_nanos_u128(wait)
    }

    fn wait_for_requests(&self, requests: &mut dyn Iterator<Item = u32>) -> Duration {
        let now = self.base.elapsed();
        let wait = self
            .log
            .with(|log| log.wait_behind(now, requests, self.shape()));
        duration_from_nanos_u128(wait)
    }
}
