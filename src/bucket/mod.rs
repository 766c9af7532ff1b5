//! The lock-free core shared by the token bucket and the fixed window: one atomic word (64 bits
//! when the configuration fits, else 128: see [`state`]) driven by the pure transitions of
//! [`state`], time read from a [`Clock`] and converted to ticks, and a
//! wait queue served as time brings tokens.

pub(crate) mod state;

use core::convert::Infallible;
use core::time::Duration;

use crate::cas;
use crate::clock::Clock;
use crate::core_common::RateBase;
use crate::lease::{Reason, Rejection};
use crate::nanos::Nanos;
use crate::queue_kind::QueueKind;
use crate::rate_core::RateCore;
use crate::state_cell::{packed, CellCore, Packed, StateCell};
use crate::sync::AtomicU64;
use crate::wait::{LockedTake, WaitQueue};

use state::{Bucket, Denied, Refill};

crate::state_cell::state_word!(Bucket, Denied);

/// The bucket's atomic state word: the native 64-bit layout when every reachable state fits in
/// it ([`Bucket::narrow_shift`], a token field of `shift` bits), else 128 bits; the [`Bucket`]
/// itself on 32-bit MCUs (see [`Packed`]).
type StateWord = Packed<Bucket>;

/// A [`Refill`] that [`BucketCore::reconfigure`] may change while the limiter is in use: the
/// limit and the refill in one word, so that a decision reads a consistent pair with one load.
/// The limit is the low half: every quick decision gates its request on it (`1 <= n <=
/// limit`) with no shift; the refill, above it, is read only by a refusal (3 to 4 instructions
/// off every quick answer).
#[derive(Debug)]
struct RefillCell(AtomicU64);

impl RefillCell {
    crate::sync::const_unless_loom! {
        fn new(r: Refill) -> Self {
            Self(AtomicU64::new((r.per_tick as u64) << 32 | r.limit as u64))
        }
    }

    #[inline(always)]
    fn get(&self) -> Refill {
        let w = self.0.load(crate::sync::Ordering::Acquire);
        Refill {
            limit: w as u32,
            per_tick: (w >> 32) as u32,
        }
    }

    fn set(&self, r: Refill) {
        self.0.store(
            u64::from(r.per_tick) << 32 | u64::from(r.limit),
            crate::sync::Ordering::Release,
        );
    }
}

/// The shared core. `refill.limit` is the largest request that can ever succeed. `Q` is the
/// wait queue, or [`NoQueue`](crate::NoQueue) (every use of the queue on the decision path then
/// compiles to nothing: it is a constant "newcomers may barge, nobody waits").
#[derive(Debug)]
pub(crate) struct BucketCore<C, Q = WaitQueue> {
    word: StateWord,
    pub(crate) base: RateBase<C, Q>,
    refill: RefillCell,
}

impl<C: Clock, Q: QueueKind> BucketCore<C, Q> {
    pub(crate) fn new(refill: Refill, period_ns: u64, queue: Q, clock: C) -> Self {
        let origin = clock.now();
        Self::at(refill, period_ns, queue, clock, origin)
    }

    crate::sync::const_unless_loom! {
        /// A full bucket whose ticks count from `origin`.
        pub(crate) fn at(
            refill: Refill,
            period_ns: u64,
            queue: Q,
            clock: C,
            origin: crate::clock::Instant,
        ) -> Self {
            Self {
                word: packed!(
                    Bucket::full(refill.limit),
                    Bucket::narrow_shift(refill.limit, period_ns)
                ),
                base: RateBase::new(origin, period_ns, queue, clock),
                refill: RefillCell::new(refill),
            }
        }
    }

    /// The refill now (changed only by [`reconfigure`](Self::reconfigure)).
    #[inline(always)]
    pub(crate) fn refill(&self) -> Refill {
        self.refill.get()
    }

    /// The largest token limit the state word's layout holds (the 64-bit word's token field,
    /// sized at creation with every bit the ticks leave free).
    pub(crate) fn max_limit(&self) -> u32 {
        match self.word.narrow() {
            Some((_, shift)) => Bucket::narrow_max_limit(shift),
            None => u32::MAX,
        }
    }

    /// Refuses, with [`OptionsError::LimitTooLarge`], a limit the state word does not hold.
    pub(crate) fn check_fits(&self, refill: Refill) -> Result<(), crate::options::OptionsError> {
        let max = self.max_limit();
        if refill.limit > max {
            return Err(crate::options::OptionsError::LimitTooLarge { max });
        }
        Ok(())
    }

    /// One lock-free attempt for a newcomer at `e` ns after creation; on denial, the state word
    /// it decided on and the tick and offset `e` falls in. The tick is located from the state's
    /// own ([`Ticker::locate`]): no division while time stays in the tick of the last write.
    #[inline]
    fn attempt(
        &self,
        e: u64,
        n: u32,
        r: Refill,
        barge: bool,
    ) -> Result<(), (Denied, Bucket, (u64, u64))> {
        self.word
            .transition(|b| {
                let (k, into) = self.base.ticker.locate_own(e, b.tick);
                b.try_take(k, n, r, barge)
                    .map(|next| (next, ()))
                    .map_err(|d| (d, b, (k, into)))
            })
            .map(|_| ())
    }

    /// [`QuickPath::take_slow`]: the general transition, the queue, the 128-bit word.
    #[inline(never)]
    fn general(&self, e: u64, n: u32, r: Refill, serve: impl FnOnce()) -> Result<u64, Rejection> {
        // The 128-bit word's common case, decided as the 64-bit word's quick path decides.
        #[cfg(not(tollgate_cs_cells))]
        if n != 0 {
            if let Some(decided) = self.quick_wide(e, n, r) {
                return decided.map_err(|wait| Rejection::after(&Reason::Exhausted, wait));
            }
        }
        self.transition_path(e, n, r, serve)
    }

    /// The general transition: the attempt (after the waiters, where any hold a newcomer
    /// back), and on a refusal the exact RetryAfter.
    #[inline(always)]
    fn transition_path(
        &self,
        e: u64,
        n: u32,
        r: Refill,
        serve: impl FnOnce(),
    ) -> Result<u64, Rejection> {
        let result = crate::quick_path::attempt_after_waiters(
            &self.base.queue,
            true,
            |barge| self.attempt(e, n, r, barge),
            |(d, b, _)| matches!(d, Denied::Exhausted { .. }) && b.waiters,
            serve,
        );
        match result {
            // A bucket needs no stamp to settle: a refund is capped at the limit as of now.
            Ok(()) => Ok(0),
            Err((Denied::Closed, _, _)) => Err(Rejection::new(&Reason::Closed)),
            Err((Denied::Exhausted { missing }, b, (k, into))) => {
                // From the very instant and state the decision was made on: no second clock read.
                let wait = self.retry_after(k, into, b, n, missing, r);
                Err(Rejection::after(&Reason::Exhausted, wait.at_least_1ns()))
            }
        }
    }

    /// The common decision in a handful of instructions ([`QuickPath::decide_quick`]): a word
    /// with no flag set, read in its own tick, grants `n` with one compare-and-swap of
    /// `w - n`, or refuses with the wait for the missing tokens (no queue to walk, no refill
    /// due before the next tick). Exactly what the general path decides on the same word and
    /// instant ([`Bucket::plain64`]); `None` sends everything else (the 128-bit word, another
    /// tick, a flag, a lost race, a wait of 2^64 ns or more) to it. The 128-bit word (a limit
    /// or a tick too wide for 64 bits: byte rates) has the same decision first thing on the
    /// general path ([`quick_wide`](Self::quick_wide)): inline here, it cost the 64-bit word's
    /// path 7 to 8 instructions of registers.
    #[inline(always)]
    fn quick(&self, e: u64, n: u32, r: Refill) -> Option<Result<u64, Nanos>> {
        let (word, shift, mask) = self.word.narrow_masked()?;
        let w = cas::Word::load(word);
        let (tick, tokens) = Bucket::plain64_masked(w, shift, mask)?;
        self.quick_decide(e, n, r, tick, tokens, || {
            cas::swap_once(word, w, w - u64::from(n))
        })
    }

    /// [`quick`](Self::quick)'s decision on the 128-bit word ([`Bucket::plain128`]).
    #[inline(always)]
    #[cfg(not(tollgate_cs_cells))]
    fn quick_wide(&self, e: u64, n: u32, r: Refill) -> Option<Result<u64, Nanos>> {
        let word = self.word.wide()?;
        let w = cas::Word::load(word);
        let (tick, tokens) = Bucket::plain128(w)?;
        self.quick_decide(e, n, r, tick, tokens, || {
            cas::swap_once(word, w, w - u128::from(n))
        })
    }

    /// The quick decision of `1 <= n <= limit` on a plain word read in state `(tick,
    /// tokens)`: `take` writes the word less `n`.
    #[inline(always)]
    fn quick_decide(
        &self,
        e: u64,
        n: u32,
        r: Refill,
        tick: u64,
        tokens: u32,
        take: impl FnOnce() -> bool,
    ) -> Option<Result<u64, Nanos>> {
        let into = self.base.ticker.offset_in_own(e, tick)?;
        // `n - 1`, wrapped: a probe's is `u32::MAX`, above any count.
        let short = n.wrapping_sub(1);
        if short < tokens {
            // `1 <= n <= tokens <= limit`: tokens above the limit (it was lowered) are dropped
            // by the general path first. No other gate on the request (`QuickPath::GATED`).
            return (tokens <= r.limit && take()).then_some(Ok(0));
        }
        // A probe, or a request over the limit: the general path's.
        if short >= r.limit {
            return None;
        }
        // Refused: `tokens < n <= limit`. The common refusal, a request no larger than one
        // refill (`n - tokens <= n <= per_tick`: every single request), is one refill short:
        // the wait is the rest of this tick, with no multiplication (what
        // `ticks_to_take_within` answers then: one tick). A larger request takes the exact
        // count, which is one tick too when `n - tokens <= per_tick`.
        let p = self.base.ticker.period_ns();
        let ns = if n <= r.per_tick {
            p
        } else {
            let ticks = Bucket {
                tokens,
                ..Bucket::full(r.limit)
            }
            .ticks_to_take_within(r, n);
            u64::from(ticks).checked_mul(p)?
        };
        // `ns >= p > into` (`ticks >= 1`), so the wait is at least 1 ns.
        Some(Err(Nanos::from_u64(ns - into)))
    }

    /// [`QuickPath::judge`].
    fn judge(&self, e: u64, n: u32, r: Refill) -> Result<(), Rejection> {
        let b = self.word.load();
        let (k, into) = self.base.ticker.locate(e, b.tick);
        match b.try_take(k, n, r, self.base.queue.barging()) {
            Ok(_) => Ok(()),
            Err(Denied::Closed) => Err(Rejection::new(&Reason::Closed)),
            Err(Denied::Exhausted { missing }) => Err(Rejection::after(
                &Reason::Exhausted,
                self.retry_after(k, into, b, n, missing, r).at_least_1ns(),
            )),
        }
    }
    /// The exact wait before `n` tokens can be taken, seen from `into` ns into tick `k` by a
    /// newcomer denied on the word `b` for lack of `missing` tokens: behind an oldest-first
    /// queue, each waiter ahead is served in turn (walked under the queue lock, with the word as
    /// it is under that lock, since the refill cap makes the answer depend on each waiter's
    /// size, not just their sum).
    ///
    /// With nobody ahead, `missing` is what the decision found short on `b` refilled to
    /// `max(k, b.tick)` (refilling to an earlier tick changes nothing), so the wait is the whole
    /// ticks of refill that bring it, from there: no second refill computation.
    #[inline]
    fn retry_after(&self, k: u64, into: u64, b: Bucket, n: u32, missing: u64, r: Refill) -> Nanos {
        if b.waiters && !self.base.queue.barging() {
            self.retry_after_queued(k, into, n)
        } else {
            let base = k.max(b.tick);
            // At most `n + debt <= u32::MAX` (the debt bound keeps it there; 1 for a probe).
            let missing = u32::try_from(missing).unwrap_or(u32::MAX);
            // The ticks that bring `missing` tokens (a debt counted in it already).
            let ticks = Bucket {
                tokens: 0,
                debt: false,
                ..b
            }
            .ticks_to_take_within(r, missing);
            // A rejection keeps 64 bits: no 96-bit product (firmware code size).
            self.base.ticker.wait_one_u64(k, into, base, ticks)
        }
    }

    /// [`retry_after`](Self::retry_after) behind an oldest-first queue (the rare case, kept out
    /// of line).
    #[cold]
    #[inline(never)]
    fn retry_after_queued(&self, k: u64, into: u64, n: u32) -> Nanos {
        self.base.queue.with_requests(|ahead| {
            let b = self.word.load();
            self.wait_behind(k, into, b, ahead.chain(core::iter::once(n.max(1))))
        })
    }

    /// The wait until the last of `requests` is granted (in order, each as soon as it fits),
    /// seen from `into` ns into tick `k`, with the state `b`. Counted from the state's own tick
    /// if that is later than `k` (a stale reading: real time is at least there).
    fn wait_behind(
        &self,
        k: u64,
        into: u64,
        b: Bucket,
        requests: impl IntoIterator<Item = u32>,
    ) -> Nanos {
        let base = k.max(b.tick);
        let r = self.refill();
        let ticks = b.at(base, r).ticks_to_serve(r, requests);
        self.base
            .ticker
            .wait_until(k, into, base, base.saturating_add(ticks))
    }

    /// [`wait_for`](Self::wait_for) in nanoseconds.
    fn wait_for_nanos(&self, total: u64) -> Nanos {
        let (k, into) = self.base.tick();
        let b = self.word.load();
        if let Ok(n) = u32::try_from(total).map(|n| n.min(self.refill().limit)) {
            if u64::from(n) == total {
                return self.wait_behind(k, into, b, core::iter::once(n));
            }
        }
        let base = k.max(b.tick);
        let b = b.at(base, self.refill());
        let r = self.refill();
        let missing = (total + u64::from(b.owed())).saturating_sub(u64::from(b.available()));
        let ticks = Bucket::ticks_to_gain(missing, r);
        self.base
            .ticker
            .wait_until(k, into, base, base.saturating_add(ticks))
    }

    fn now_state(&self) -> Bucket {
        let e = self.base.elapsed();
        let b = self.word.load();
        b.at(self.base.ticker.locate(e, b.tick).0, self.refill())
    }

    /// [`catch_up`](Self::catch_up), answering the tokens of the state as of now.
    #[inline]
    fn catch_up_tokens(&self) -> u32 {
        let raw = self.base.elapsed_raw();
        let r = self.refill();
        match self.catch_up_quick(raw, r) {
            Some(tokens) => tokens,
            // The refill read again there: one register fewer held across the quick path.
            None => self.catch_up_general(crate::ticks::Ticker::clamped(raw), self.refill()),
        }
    }

    /// [`catch_up_tokens`](Self::catch_up_tokens) in its common case, as an interrupt handler
    /// calling `replenish` on every tick meets it: a 64-bit word with no flag set, read in its
    /// own tick (nothing to write) or in the next (one refill, one compare-and-swap), found
    /// with one multiply and no division. The same state [`Bucket::at`] computes: one tick adds
    /// `per_tick` tokens, capped at the limit (and a bucket filled by it filled at that tick).
    /// `None` sends everything else (the 128-bit word, a flag, tokens above a lowered limit,
    /// two ticks or more, a clock behind the state or behind the origin — `e` is unclamped
    /// here, [`Ticker::elapsed_raw`](crate::ticks::Ticker::elapsed_raw) — a lost race) to the
    /// general path.
    #[inline(always)]
    fn catch_up_quick(&self, e: u64, r: Refill) -> Option<u32> {
        // A reading behind the origin (unclamped: 2^63 or more) is the general path's.
        if crate::ticks::Ticker::behind_origin(e) {
            return None;
        }
        let (word, shift, mask) = self.word.narrow_masked()?;
        let w = cas::Word::load(word);
        let (tick, tokens) = Bucket::plain64_masked(w, shift, mask)?;
        if tokens >= r.limit {
            // Full (`at` changes nothing); or holding more than a lowered limit.
            return (tokens == r.limit).then_some(tokens);
        }
        // How far `e` lies past the start of the state's tick: exact for a reading at or after
        // it (a tick of this ticker: no overflow), and wrapped to more than 2^63 for one
        // before it (`e` and the start both lie below 2^63).
        let p = self.base.ticker.period_ns();
        let into = e.wrapping_sub(tick.wrapping_mul(p));
        if into < p {
            return Some(tokens); // in its own tick: `at` changes nothing
        }
        // Only a reading in the next tick is this quick path's. A reading before the tick's
        // start is rejected here too: wrapped past 2^63, it is at least two periods of the
        // 64-bit word (at most 2^62 ns: `Bucket::narrow_shift`) past the start.
        if into - p >= p {
            return None;
        }
        // One tick on: the tick field's one (`mask + 1`) and the tokens it adds, capped at the
        // limit, added to the word (`tokens < limit`: no borrow; no carry out of either field).
        let added = (r.limit - tokens).min(r.per_tick);
        let next = w + mask + 1 + u64::from(added);
        cas::swap_once(word, w, next).then_some(tokens + added)
    }

    /// [`catch_up_tokens`](Self::catch_up_tokens) past its quick path: the tick located (a
    /// division) and the state brought up to it in one transition.
    #[inline(never)]
    fn catch_up_general(&self, e: u64, r: Refill) -> u32 {
        let b = self.word.load();
        let (k, _) = self.base.ticker.locate(e, b.tick);
        let Ok((_, tokens)) = self.word.transition(|b| {
            let now = b.at(k, r);
            Ok::<_, Infallible>((now, now.available()))
        });
        tokens
    }
}

impl<C: Clock, Q: QueueKind> RateCore for BucketCore<C, Q> {
    crate::rate_core::base_field!();

    fn limit(&self) -> u32 {
        self.refill().limit
    }

    fn period(&self) -> Duration {
        Duration::from_nanos(self.base.ticker.period_ns())
    }

    fn available(&self) -> u64 {
        u64::from(self.now_state().available())
    }

    /// Full since the start of the tick it filled at; `None` while not full or while anyone
    /// waits.
    fn idle_duration(&self) -> Option<Duration> {
        let now = self.base.clock.now();
        let b = self.word.load();
        let full_at = b.full_at(self.refill());
        // A clock behind the bucket's own tick is no time passing: judge at the later of the two.
        let (k, _) = self.base.ticker.tick(now);
        (full_at <= k.max(b.tick) && !b.waiters)
            .then(|| self.base.ticker.since_start_of(now, full_at))
    }

    /// Writes the state as of now (if time has added anything).
    fn catch_up(&self) {
        self.catch_up_tokens();
    }

    /// [`Replenishing::replenish`](crate::Replenishing::replenish) after the queue is served:
    /// writes the state as of now, and answers its tokens from the same transition (one clock
    /// reading, one refill computation).
    #[inline]
    fn replenished(&self) -> u64 {
        u64::from(self.catch_up_tokens())
    }

    /// The 64-bit word's quick catch-up ([`catch_up_quick`](Self::catch_up_quick)): it reads
    /// a word with no flag set and either finds nothing to write (full, or in its own tick:
    /// a waiter short on this word is short at this call's instant too) or swaps in the next
    /// tick's refill from that word, which advances the tick, so no waiter's flag can slip in
    /// unseen between the reading and the swap.
    #[inline]
    fn replenished_unwaited(&self) -> Option<u64> {
        let raw = self.base.elapsed_raw();
        self.catch_up_quick(raw, self.refill()).map(u64::from)
    }

    /// Under the queue lock: takes `n` ignoring the queue flag, or finds them short.
    fn take_locked(&self, n: u32, flag_if_short: bool) -> LockedTake {
        let (k, _) = self.base.tick();
        let r = self.refill();
        self.word
            .take_queued(flag_if_short, |b| b.try_take(k, n, r, true).map(|b| (b, k)))
    }

    /// Under the queue lock, for the waiter at the serving end: takes `n` as of the first tick
    /// they fit ([`Bucket::take_when_fits`]), or finds them short. The stamp is the tick of
    /// the grant.
    fn take_for_waiter(&self, n: u32) -> LockedTake {
        let (k, _) = self.base.tick();
        let r = self.refill();
        self.word.take_queued(false, |b| b.take_when_fits(k, n, r))
    }

    /// Takes `n` more tokens now, past any waiter, into debt when they are not there, down to
    /// its bound ([`Bucket::take_debt`]).
    fn take_debt(&self, n: u32, max_debt: u32) -> Result<(), crate::lease::SettleError> {
        let (k, _) = self.base.tick();
        let r = self.refill();
        self.word
            .transition(|b| {
                b.take_debt(k, n, r, self.max_limit().min(max_debt))
                    .map(|next| (next, ()))
                    .ok_or(crate::lease::SettleError::DebtLimit)
            })
            .map(|_| ())
    }

    /// Returns `n` tokens a waiter was granted (or a lease settled below what it took) but
    /// never used. Whether the queue needs serving afterwards.
    fn give_back(&self, n: u32, _stamp: u64) -> bool {
        let (k, _) = self.base.tick();
        let r = self.refill();
        self.word.update(|b| b.give_back(k, n, r)).waiters
    }

    /// How long until time alone lets the bucket grant `total` tokens (served in requests of at
    /// most the limit; beyond one limit, refills are counted uncapped as the tokens are taken
    /// in order as they arrive). Zero if it holds them already.
    fn wait_for(&self, total: u64) -> Duration {
        self.wait_for_nanos(total).to_duration()
    }

    fn wait_for_requests(&self, requests: &mut dyn Iterator<Item = u32>) -> Duration {
        let (k, into) = self.base.tick();
        self.wait_behind(k, into, self.word.load(), requests)
            .to_duration()
    }
}

crate::quick_path::quick_path! {
    impl[C: Clock, Q: QueueKind] BucketCore<C, Q> { refill: Refill, limit, quick, general, judge, gated: true }
}

impl<C, Q> CellCore for BucketCore<C, Q> {
    type Cell = StateWord;
    fn cell(&self) -> &StateWord {
        &self.word
    }
}

impl<C: Clock> BucketCore<C, WaitQueue> {
    /// Changes the refill and the queue limit (the caller checked the rest of the options):
    /// refused with [`OptionsError::LimitTooLarge`], changing nothing, if the new limit does not
    /// fit the state word. Otherwise the new refill applies from the next decision on, under
    /// the queue lock, which then fails the waiters it strands and serves the rest (see
    /// [`WaitQueue::reconfigure`]). Tokens above a lowered limit are dropped at the next
    /// transition ([`Bucket::at`]); a raised limit fills with time as usual.
    ///
    /// [`OptionsError::LimitTooLarge`]: crate::options::OptionsError::LimitTooLarge
    pub(crate) fn reconfigure<S: crate::wait::Source + ?Sized>(
        &self,
        src: &S,
        refill: Refill,
        queue_limit: u32,
    ) -> Result<(), crate::options::OptionsError> {
        self.check_fits(refill)?;
        // The old refill governs the time before the change: the waiters whose tokens came
        // meanwhile are granted as of then, and the word is brought up to now at the old rate,
        // so that the new one counts only from the change.
        self.base.queue.serve(src);
        self.base
            .queue
            .reconfigure(src, queue_limit, refill.limit, || {
                self.catch_up();
                self.refill.set(refill);
            });
        Ok(())
    }
}

impl<C: Clock> BucketCore<C, crate::queue_kind::NoQueue> {
    /// Changes the refill with no queue to serve (the caller checked it fits): the old refill
    /// governs the time before the change.
    pub(crate) fn set_refill(&self, refill: Refill) {
        crate::queue_kind::NoQueue::serialized(|| {
            self.catch_up();
            self.refill.set(refill);
        });
    }
}

/// A limiter on a [`BucketCore`] (the token bucket and the fixed window), whose options give a
/// `refill()` and name their period `$period`: its type, its front
/// ([`rate_limiter_front!`](crate::core_common::rate_limiter_front), a queueless limiter
/// changing its refill in place), its `reconfigure` with the docs given, its `options` (the
/// bucket's, as the options type's `from_bucket` reads them), and its private constructors and
/// option check.
macro_rules! bucket_limiter {
    (
        $(#[$doc:meta])*
        pub struct $ty:ident($options:ident { $period:ident });
        front: $what:literal, new: $new:literal, queued: $queued:literal;
        $(#[$reconfigure:meta])* reconfigure;
    ) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $ty<C: Clock = $crate::clock::DefaultClock, Q = $crate::wait::WaitQueue> {
            core: BucketCore<C, Q>,
        }

        $crate::core_common::rate_limiter_front! {
            $ty, $options, $what,
            apply = |l, refill, _| l.core.set_refill(refill),
            new: $new, queued: $queued,
        }

        impl<C: Clock> $ty<C> {
            $(#[$reconfigure])*
            pub fn reconfigure(&self, options: $options) -> Result<(), OptionsError> {
                let refill = self.checked(&options)?;
                self.core.reconfigure(self, refill, options.queue_limit)
            }
        }

        impl<C: Clock, Q: QueueKind> $ty<C, Q> {
            /// The options in force: those the limiter was built with, as last
            /// [`reconfigure`](Self::reconfigure)d.
            ///
            #[doc = concat!(
                "```\n",
                "use core::time::Duration;\n",
                "use tollgate::*;\n",
                "\n",
                "let opts = ", $new, ";\n",
                "let limiter = ", stringify!($ty), "::with_clock(opts, ManualClock::new()).unwrap();\n",
                "assert_eq!(limiter.options(), opts);\n",
                "```",
            )]
            pub fn options(&self) -> $options {
                let r = self.core.refill();
                $options::from_bucket($crate::token_bucket::TokenBucketOptions {
                    token_limit: r.limit,
                    tokens_per_period: r.per_tick,
                    replenishment_period: self.core.period(),
                    queue_limit: self.core.base.queue.queue_limit(),
                    queue_order: self.core.base.queue.order(),
                })
            }

            fn build(options: $options, clock: C) -> Result<Self, OptionsError> {
                let period = options.validate()?;
                let queue = Q::for_options(options.queue_limit, options.queue_order)?;
                Ok(Self {
                    core: BucketCore::new(options.refill(), period, queue, clock),
                })
            }

            /// The refill of `options`, if valid, with the period (and queue order) this
            /// limiter was built with, and within what its state word holds.
            fn checked(&self, options: &$options) -> Result<Refill, OptionsError> {
                options.validate()?;
                let before = self.options();
                let same = options.$period == before.$period;
                unchanged::<Q>(same, options.queue_order, before.queue_order)?;
                self.core.check_fits(options.refill())?;
                Ok(options.refill())
            }

            crate::sync::const_unless_loom! {
                /// A limiter of valid `options` whose time counts from the clock's epoch.
                fn at_epoch_with(options: $options, queue: Q, clock: C) -> Self {
                    let period = OptionsError::valid_in_const(options.validate());
                    let origin = crate::clock::Instant::ZERO;
                    Self {
                        core: BucketCore::at(options.refill(), period, queue, clock, origin),
                    }
                }
            }
        }
    };
}
pub(crate) use bucket_limiter;

#[cfg(all(test, not(tollgate_cs_cells)))]
mod tests {
    use super::*;

    /// The 64-bit and 128-bit words hold the same state through the same transitions: a
    /// deterministic pseudo-random walk of takes, give-backs, refills, flag changes and
    /// backwards readings, compared state by state, on configurations at the edge of the
    /// 64-bit layout (the largest tick and token count it holds).
    #[test]
    fn both_layouts_follow_the_same_transitions() {
        let sec = 1_000_000_000;
        for (limit, per_tick, period) in [
            (1u32, 1u32, 8u64),
            ((1 << 27) - 1, 1 << 20, sec),
            (5, 2, 1_000),
            (u32::MAX, u32::MAX, 1 << 34),
            (u32::MAX, 1, 1 << 34),
        ] {
            let r = Refill { limit, per_tick };
            let shift = Bucket::narrow_shift(limit, period).expect("fits");
            let narrow: StateWord = packed!(Bucket::full(limit), Some(shift));
            let wide: StateWord = packed!(Bucket::full(limit), None);
            let max_tick = (crate::ticks::HORIZON_NS - 1) / period;
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ u64::from(limit);
            for step in 0..2_000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Ticks near 0, near the largest, and anywhere (including backwards).
                let k = match x % 3 {
                    0 => step,
                    1 => max_tick - (x >> 8) % 64,
                    _ => (x >> 4) % (max_tick + 1),
                };
                let n = ((x >> 20) as u32) % limit.saturating_add(1).max(1);
                let field_max = Bucket::narrow_max_limit(shift);
                let op = |b: Bucket| -> Result<(Bucket, ()), Denied> {
                    match (x >> 40) % 7 {
                        0 | 1 => b.try_take(k, n, r, x & 1 == 0).map(|b| (b, ())),
                        2 => Ok((b.give_back(k, n, r), ())),
                        6 => Ok((b.take_debt(k, n, r, field_max).unwrap_or(b), ())),
                        3 => Ok((b.at(k, r), ())),
                        4 => Ok((b.with_waiters(x & 2 == 0), ())),
                        _ if step % 500 == 499 => Ok((b.close(), ())),
                        _ => Ok((b, ())),
                    }
                };
                let a = narrow.transition(op).map(|(b, ())| b);
                let b = wide.transition(op).map(|(b, ())| b);
                assert_eq!(a, b, "step {step}: limit {limit}, period {period}");
                assert_eq!(narrow.load(), wide.load(), "step {step}");
            }
        }
    }

    /// `replenish`'s quick path writes and answers exactly what the general path does, on
    /// every state it takes (own tick, next tick, full) and declines the rest (two ticks on, a
    /// clock behind the state, tokens above a lowered limit).
    #[test]
    fn the_catch_up_quick_path_agrees_with_the_general_path() {
        use crate::clock::{Instant, ManualClock};
        let (mut quick_hits, mut writes) = (0, 0);
        for (limit, per_tick, period) in [
            (100u32, 10u32, 1_000_000u64),
            (5, 7, 1_000),
            (1, 1, 8),
            ((1 << 27) - 1, 1 << 20, 1_000_000_000),
            (3, 1, 1 << 62),       // the longest period of the 64-bit word
            (3, 1, (1 << 62) + 5), // two ticks before the horizon (the 128-bit word)
        ] {
            let max_tick = (crate::ticks::HORIZON_NS - 1) / period;
            let core = |b: Bucket, r: Refill| {
                let c =
                    BucketCore::at(r, period, crate::NoQueue, ManualClock::new(), Instant::ZERO);
                c.word.update(|_| b);
                c
            };
            for (r_limit, tokens) in [
                (limit, 0),
                (limit, 1),
                (limit, limit / 2),
                (limit, limit - 1),
            ]
            .into_iter()
            .chain([(limit, limit), (limit / 2, limit)])
            {
                let r = Refill {
                    limit: r_limit,
                    per_tick,
                };
                for tick in [0u64, 1, 5, 1_000].into_iter().filter(|&t| t <= max_tick) {
                    let start = tick * period;
                    let readings = [
                        start.saturating_sub(1),
                        start,
                        start + period - 1,
                        start.saturating_add(period),
                        start.saturating_add(2 * period - 1),
                        start.saturating_add(2 * period),
                        0,
                    ];
                    // Readings past the horizon are no elapsed time a clock gives.
                    for e in readings
                        .into_iter()
                        .filter(|&e| e < crate::ticks::HORIZON_NS)
                    {
                        let b = Bucket {
                            tokens,
                            tick,
                            ..Bucket::full(limit)
                        };
                        let (q, g) = (core(b, r), core(b, r));
                        let answer = g.catch_up_general(e, r);
                        let at = (limit, r_limit, tokens, tick, e);
                        // A weak compare-and-swap may fail spuriously (miri makes it fail
                        // often): the quick path then declines with the word unchanged, as on a
                        // lost race, and a caller may simply try again.
                        if let Some(quick) = (0..100).find_map(|_| q.catch_up_quick(e, r)) {
                            quick_hits += 1;
                            writes += usize::from(q.word.load() != b);
                            assert_eq!(quick, answer, "{at:?}");
                            assert_eq!(q.word.load(), g.word.load(), "{at:?}");
                        } else {
                            // Declined only off the common case (or on the 128-bit word).
                            assert!(
                                q.word.narrow().is_none()
                                    || tokens > r_limit
                                    || e < start
                                    || e >= start.saturating_add(2 * period),
                                "{at:?}"
                            );
                        }
                    }
                }
            }
        }
        assert!(quick_hits > 100 && writes > 20, "{quick_hits} {writes}");
    }

    /// The quick decision grants and refuses exactly as the general path does, with the same
    /// wait and the same word written, on both layouts: the 64-bit word, and the 128-bit one
    /// of limits and ticks too wide for it (a byte rate).
    #[test]
    fn the_quick_decision_agrees_with_the_general_path_on_both_words() {
        use crate::clock::{Instant, ManualClock};
        let (mut hits, mut wide_hits) = (0, 0);
        for (limit, per_tick, period) in [
            (100u32, 10u32, 1_000_000u64),
            (5, 7, 1_000),
            (1 << 30, 1 << 20, 1_000_000), // 128 bits: a 1 GiB burst, 1 MiB a millisecond
            (u32::MAX, u32::MAX, 1_000),   // 128 bits
        ] {
            let r = Refill { limit, per_tick };
            let core = |b: Bucket| {
                let c =
                    BucketCore::at(r, period, crate::NoQueue, ManualClock::new(), Instant::ZERO);
                c.word.update(|_| b);
                c
            };
            let wide = core(Bucket::full(limit)).word.narrow().is_none();
            for tokens in [0, 1, limit / 2, limit - 1, limit] {
                for tick in [0u64, 1, 1_000] {
                    let start = tick * period;
                    for e in [start, start + period / 2, start + period - 1] {
                        for n in [1, 2, tokens, tokens.saturating_add(1), limit] {
                            if n == 0 || n > limit {
                                continue;
                            }
                            let b = Bucket {
                                tokens,
                                tick,
                                ..Bucket::full(limit)
                            };
                            let (q, g) = (core(b), core(b));
                            let at = (limit, tokens, tick, e, n);
                            let general = g.transition_path(e, n, r, || {});
                            // A weak compare-and-swap may fail spuriously (miri): retry.
                            let quick = (0..100).find_map(|_| {
                                if wide {
                                    q.quick_wide(e, n, r)
                                } else {
                                    q.quick(e, n, r)
                                }
                            });
                            let Some(quick) = quick else {
                                panic!("declined the common case {at:?}");
                            };
                            hits += 1;
                            wide_hits += usize::from(wide);
                            match (quick, general) {
                                (Ok(_), Ok(_)) => {}
                                (Err(wait), Err(r)) => assert_eq!(
                                    Some(wait.at_least_1ns().to_duration()),
                                    r.retry_after(),
                                    "{at:?}"
                                ),
                                (q, g) => panic!("{at:?}: quick {q:?}, general {g:?}"),
                            }
                            assert_eq!(q.word.load(), g.word.load(), "{at:?}");
                        }
                    }
                }
            }
        }
        assert!(hits > 200 && wide_hits > 100, "{hits} {wide_hits}");
    }
}
