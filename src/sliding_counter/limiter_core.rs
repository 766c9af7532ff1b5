//! The sliding counter's lock-free core: the 128-bit word, the window's clock, the limit, the
//! counts and the queue; a [`RateCore`] with a [`QuickPath`](crate::quick_path::QuickPath),
//! which [`rate_limiter!`](crate::rate_limiter::rate_limiter) wires into every capability.

use core::time::Duration;

use crate::cas;
use crate::clock::Clock;
use crate::core_common::{RateBase, WindowLimit};
use crate::lease::{Reason, Rejection};
use crate::nanos::Nanos;
use crate::queue_kind::QueueKind;
use crate::rate_core::RateCore;
use crate::state_cell::{CellCore, Single, StateCell};
use crate::sync::AtomicU128;
use crate::ticks::duration_from_nanos_u128;
use crate::wait::{LockedTake, WaitQueue};

use super::state::{Counter, Denied, Shape};

crate::state_cell::state_word!(Counter, Denied, u128);

/// The core of a [`SlidingCounterLimiter`](crate::SlidingCounterLimiter).
#[derive(Debug)]
pub(crate) struct CounterCore<C, Q = WaitQueue> {
    word: Single<AtomicU128, Counter>,
    pub(crate) base: RateBase<C, Q>,
    /// Permits per window (changed by `reconfigure`) and the window.
    limits: WindowLimit,
}

impl<C: Clock, Q: QueueKind> CounterCore<C, Q> {
    crate::sync::const_unless_loom! {
        /// A fresh counter of `limit` per `window` ns, its windows counted from `origin`.
        pub(crate) fn new(
            limit: u32,
            window: u64,
            queue: Q,
            origin: crate::clock::Instant,
            clock: C,
        ) -> Self {
            Self {
                word: Single::new(AtomicU128::new(Counter::FRESH.pack())),
                base: RateBase::new(origin, window, queue, clock),
                limits: WindowLimit::new(limit, window),
            }
        }
    }

    /// The window's shape now: one reading of the limit for a whole decision.
    #[inline(always)]
    fn shape(&self) -> Shape {
        self.limits.shape()
    }

    /// Changes the limit with no queue to serve.
    pub(crate) fn set_limit(&self, limit: u32) {
        self.limits.set(limit);
    }

    fn load(&self) -> Counter {
        self.word.load()
    }

    /// One lock-free attempt; the state it decided on, on denial.
    #[inline]
    fn attempt(
        &self,
        (k, into): (u64, u64),
        n: u32,
        s: Shape,
        barge: bool,
    ) -> Result<u64, (Denied, Counter)> {
        self.word
            .transition(|c| {
                c.try_take(k, into, n, s, barge)
                    .map(|next| (next, next.tick))
                    .map_err(|d| (d, c))
            })
            .map(|(_, window)| window)
    }

    /// The common decision ([`QuickPath::decide_quick`]): a word with no flag set, still in its
    /// own window (`e` located from the word's window without a division), grants `n` permits
    /// that fit with one
    /// compare-and-swap, or refuses with the exact wait (no queue to wait behind: the flag is
    /// clear). `None` sends everything else (a flag, a probe, a new window, a lost race) to the
    /// general path, which decides the same on the same word and instant.
    ///
    /// None on 32-bit MCUs, where the word is behind a critical section and a second copy of
    /// the decision is only code (the firmware program: 1,884 → 1,596 bytes).
    #[inline(always)]
    fn quick(&self, e: u64, n: u32, s: Shape) -> Option<Result<u64, Nanos>> {
        if cfg!(tollgate_cs_cells) {
            return None;
        }
        let w = cas::Word::load(self.word.raw());
        let c = Counter::unpack(w);
        if c.closed || c.waiters {
            return None;
        }
        let into = self.base.ticker.offset_in_own(e, c.tick)?;
        match c.try_take(c.tick, into, n, s, false) {
            Ok(next) => cas::swap_once(self.word.raw(), w, next.pack()).then_some(Ok(c.tick)),
            Err(_) => Some(Err(Nanos::from_u64(c.wait_in_own_u64(into, n, s).max(1)))),
        }
    }

    /// [`QuickPath::take_slow`]: the general transition at `e` ns after creation, and the
    /// queue.
    #[inline(never)]
    fn general(&self, e: u64, n: u32, s: Shape, serve: impl FnOnce()) -> Result<u64, Rejection> {
        let at = self.base.ticker.locate_own(e, self.load().tick);
        let result = crate::quick_path::attempt_after_waiters(
            &self.base.queue,
            true,
            |barge| self.attempt(at, n, s, barge),
            |&(d, c)| d == Denied::Exhausted && c.waiters,
            serve,
        );
        result.map_err(|(d, c)| self.rejection(d, c, at, n, s))
    }

    /// The rejection of `n` permits denied for `d` on the state `c` at `(k, into)`: an
    /// exhausted one carries the exact wait, behind each waiter queued ahead (served one by
    /// one, each counted in the window it fits in) unless newcomers barge.
    #[cold]
    fn rejection(
        &self,
        d: Denied,
        c: Counter,
        (k, into): (u64, u64),
        n: u32,
        s: Shape,
    ) -> Rejection {
        match d {
            Denied::Closed => Rejection::new(&Reason::Closed),
            Denied::Exhausted => {
                let newcomer = core::iter::once(n.max(1));
                let wait = if c.waiters && !self.base.queue.barging() {
                    let behind = self.base.queue.with_requests(|ahead| {
                        self.load().wait_behind(k, into, ahead.chain(newcomer), s)
                    });
                    Nanos::from_u128(behind.max(1))
                } else {
                    // A rejection keeps 64 bits of wait: no 128-bit sums.
                    Nanos::from_u64(c.wait_u64(k, into, n.max(1), s).max(1))
                };
                Rejection::after(&Reason::Exhausted, wait)
            }
        }
    }

    /// [`QuickPath::judge`].
    fn judge(&self, e: u64, n: u32, s: Shape) -> Result<(), Rejection> {
        let c = self.load();
        let at = self.base.ticker.locate_own(e, c.tick);
        c.try_take(at.0, at.1, n, s, self.base.queue.barging())
            .map(|_| ())
            .map_err(|d| self.rejection(d, c, at, n, s))
    }
}

impl<C: Clock, Q: QueueKind> RateCore for CounterCore<C, Q> {
    crate::rate_core::base_field!();

    fn limit(&self) -> u32 {
        self.shape().limit
    }

    /// The window: the weights change continuously, the counts roll at each window boundary.
    fn period(&self) -> Duration {
        self.limits.window()
    }

    fn available(&self) -> u64 {
        let (k, into) = self.base.tick();
        self.load().available(k, into, self.shape())
    }

    /// Idle from the start of the first window in which the estimate is zero, with no one
    /// waiting.
    fn idle_duration(&self) -> Option<Duration> {
        let now = self.base.clock.now();
        let (k, _) = self.base.ticker.tick(now);
        let c = self.load();
        let free_from = c.free_from();
        (free_from <= k.max(c.tick) && !c.waiters)
            .then(|| self.base.ticker.since_start_of(now, free_from))
    }

    /// Under the queue lock: takes `n` ignoring the queue flag (stamped with the window), or
    /// finds them short, setting the flag in the same CAS when `flag_if_short`.
    fn take_locked(&self, n: u32, flag_if_short: bool) -> LockedTake {
        let (k, into) = self.base.tick();
        let s = self.shape();
        self.word.take_queued(flag_if_short, |c| {
            c.try_take(k, into, n, s, true)
                .map(|next| (next, next.tick))
        })
    }

    /// Under the queue lock, for the waiter at the serving end: takes `n` as of the window they
    /// first fit in ([`Counter::take_when_fits`]), or finds them short. The stamp is that window.
    fn take_for_waiter(&self, n: u32) -> LockedTake {
        let (k, into) = self.base.tick();
        let s = self.shape();
        self.word
            .take_queued(false, |c| c.take_when_fits(k, into, n, s))
    }

    /// The window of a lease's stamp: at or before the state's and the clock's.
    fn unmark(&self, stamp: u64) -> u64 {
        let k = self.base.tick().0.max(self.load().tick);
        crate::lease::tick_of_stamp(k, stamp)
    }

    /// Takes `n` more permits now, in the current window, past any waiter and into debt when
    /// they are not there ([`Counter::take_debt`]), as long as the estimate stays within one
    /// limit past the limit (less for a limit above 2^31, where the count field would
    /// overflow: `min(limit, u32::MAX - limit)`).
    fn take_debt(&self, n: u32, max_debt: u32) -> Result<(), crate::lease::SettleError> {
        let (k, into) = self.base.tick();
        let s = self.shape();
        let bound = crate::core_common::window_debt_bound(s.limit, u32::MAX).min(max_debt);
        self.word
            .transition(|c| {
                c.take_debt(k, into, n, s, bound)
                    .map(|next| (next, ()))
                    .ok_or(crate::lease::SettleError::DebtLimit)
            })
            .map(|_| ())
    }

    /// Returns `n` permits granted in window `stamp` to a waiter that never received them (or
    /// to a lease settled below what it took), if that window still counts; whether anyone
    /// waits.
    fn give_back(&self, n: u32, stamp: u64) -> bool {
        let (k, _) = self.base.tick();
        self.word.update(|c| c.give_back(k, stamp, n)).waiters
    }

    /// How long until time alone lets `total` permits be granted.
    fn wait_for(&self, total: u64) -> Duration {
        let (k, into) = self.base.tick();
        duration_from_nanos_u128(self.load().wait_for(k, into, total, self.shape()))
    }

    fn wait_for_requests(&self, requests: &mut dyn Iterator<Item = u32>) -> Duration {
        let (k, into) = self.base.tick();
        duration_from_nanos_u128(self.load().wait_behind(k, into, requests, self.shape()))
    }
}

crate::quick_path::quick_path! {
    impl[C: Clock, Q: QueueKind] CounterCore<C, Q> { shape: Shape, limit, quick, general, judge }
}

impl<C, Q> CellCore for CounterCore<C, Q> {
    type Cell = Single<AtomicU128, Counter>;
    fn cell(&self) -> &Self::Cell {
        &self.word
    }
}
