//! The compact keyed form's rules: a token bucket or fixed window whose per-key state is only the
//! bucket's 128-bit word (`crate::bucket::state`), with the refill, the time scale and the clock
//! shared by all keys; GCRA; and the rule enum, [`KeyedRule`] (the sliding counter's rule is in
//! `keyed_sliding`).
//!
//! The per-key word is exactly a [`TokenBucketLimiter`](crate::TokenBucketLimiter)'s, and the
//! transitions are the same pure functions, so a key behaves as a token bucket (or fixed window)
//! of its own created with the keyed limiter and idle until the key's first request. A fresh word
//! is a full bucket; an idle word is a full bucket too, which is why evicting it changes nothing.
//!
//! Two forms of the per-key state: the bucket's 128-bit word (for [`FixedKeyedLimiter`], whose
//! table sits behind a lock), and a 64-bit folding of it (for [`KeyedLimiter`], whose slots hold
//! a fingerprint and the state in one 128-bit atomic word).
//!
//! [`FixedKeyedLimiter`]: crate::FixedKeyedLimiter
//! [`KeyedLimiter`]: crate::KeyedLimiter

use core::time::Duration;

use crate::bucket::state::{Bucket, Denied, Refill};
use crate::clock::Instant;
use crate::lease::{Reason, Rejection, SettleError, Settlement};
use crate::options::OptionsError;
use crate::ticks::Ticker;
use crate::token_bucket::TokenBucketOptions;
#[cfg(feature = "std")]
use crate::{
    gcra::state::{Gcra, Params},
    nanos::Nanos,
    GcraOptions, LeakyBucketOptions,
};

use super::evict::Idle;
#[cfg(feature = "std")]
use super::keyed_sliding::KeyedSliding;

/// A state that is (or will be) full from `start` on: idle since then if it is `full` at `now`,
/// else busy until then.
fn idle_from(start: Instant, full: bool, now: Instant) -> Idle {
    if full {
        Idle::For(now.saturating_duration_since(start).as_nanos() as u64)
    } else {
        Idle::Busy(Some(start.as_nanos()))
    }
}

/// The shared part of a keyed bucket: refill and time scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KeyedBucket {
    refill: Refill,
    ticker: Ticker,
}

impl KeyedBucket {
    pub(crate) fn token_bucket(o: &TokenBucketOptions, now: Instant) -> Result<Self, OptionsError> {
        let period = o.validate()?;
        Ok(Self {
            refill: o.refill(),
            ticker: Ticker::new(now, period),
        })
    }

    /// A fixed window: the token bucket it is ([`as_bucket`](crate::FixedWindowOptions::as_bucket)).
    #[cfg(feature = "std")]
    pub(crate) fn fixed_window(
        o: &crate::fixed_window::FixedWindowOptions,
        now: Instant,
    ) -> Result<Self, OptionsError> {
        Self::token_bucket(&o.as_bucket(), now)
    }

    pub(crate) fn limit(&self) -> u32 {
        self.refill.limit
    }

    /// The period (token bucket) or window (fixed window).
    pub(crate) fn period(&self) -> Duration {
        Duration::from_nanos(self.ticker.period_ns())
    }

    /// A new key's word: a full bucket.
    pub(crate) fn fresh(&self) -> u128 {
        Bucket::full(self.refill.limit).pack()
    }

    /// Checks what needs no state: a request larger than the limit.
    #[inline]
    pub(crate) fn check(&self, n: u32) -> Result<(), Rejection> {
        if n > self.refill.limit {
            Err(Rejection::new(&Reason::ExceedsLimit))
        } else {
            Ok(())
        }
    }

    /// Takes `n` tokens from a plain word (the caller holds a lock).
    #[inline]
    pub(crate) fn take_plain(
        &self,
        word: &mut u128,
        now: Instant,
        n: u32,
    ) -> Result<(), Rejection> {
        let (k, into) = self.ticker.tick(now);
        match Bucket::unpack(*word).try_take(k, n, self.refill, true) {
            Ok(b) => {
                *word = b.pack();
                Ok(())
            }
            Err(Denied::Closed) | Err(Denied::Exhausted { .. }) => {
                Err(self.rejection(*word, k, into, n))
            }
        }
    }

    /// Settles, in a plain word (the caller holds a lock), a lease as `s` says at `now`: a
    /// refund goes back as if never taken (capped at the limit), a debit is taken into debt
    /// down to one limit or `s.max_debt` ([`Bucket::take_debt`]; past it
    /// [`SettleError::DebtLimit`], and the word is unchanged).
    pub(crate) fn settle_plain(
        &self,
        word: &mut u128,
        now: Instant,
        s: Settlement,
    ) -> Result<(), SettleError> {
        let (k, _) = self.ticker.tick(now);
        let b = Bucket::unpack(*word);
        let next = if s.actual < s.held {
            b.give_back(k, s.held - s.actual, self.refill)
        } else {
            b.take_debt(k, s.actual - s.held, self.refill, s.max_debt)
                .ok_or(SettleError::DebtLimit)?
        };
        *word = next.pack();
        Ok(())
    }

    /// The rejection of `n` tokens from word `w` at tick `k`, `into` ns into it: the wait until
    /// the bucket holds them (as `TokenBucketLimiter` computes it, with no queue ahead).
    fn rejection(&self, w: u128, k: u64, into: u64, n: u32) -> Rejection {
        let b = Bucket::unpack(w).at(k, self.refill);
        // A debt (a lease settled above its estimate) is repaid first.
        let missing = (u64::from(n.max(1)) + u64::from(b.owed()))
            .saturating_sub(u64::from(b.available()))
            .max(1);
        let ticks = Bucket::ticks_to_gain(missing, self.refill).saturating_add(b.tick.max(k) - k);
        let wait = self.ticker.wait_for(ticks, into);
        Rejection::after(&Reason::Exhausted, wait.at_least_1ns())
    }

    /// Tokens in word `w` at `now`.
    pub(crate) fn available(&self, w: u128, now: Instant) -> u64 {
        let (k, _) = self.ticker.tick(now);
        u64::from(Bucket::unpack(w).at(k, self.refill).available())
    }

    /// How idle word `w` is at `now`: full since the start of the tick it filled at, or busy
    /// until then.
    pub(crate) fn idle(&self, w: u128, now: Instant) -> Idle {
        let full_at = Bucket::unpack(w).full_at(self.refill);
        let (k, _) = self.ticker.tick(now);
        idle_from(self.ticker.start_of(full_at), full_at <= k, now)
    }

    /// `idle` as an idle duration.
    pub(crate) fn idle_duration(&self, w: u128, now: Instant) -> Option<Duration> {
        match self.idle(w, now) {
            Idle::For(ns) => Some(Duration::from_nanos(ns)),
            Idle::Busy(_) => None,
        }
    }
}

/// The 64-bit form, used by [`KeyedLimiter`](crate::KeyedLimiter) (feature `std`).
#[cfg(feature = "std")]
impl KeyedBucket {
    /// Whether this bucket's state fits the 64-bit form of [`KeyedLimiter`](crate::KeyedLimiter):
    /// at most one token per 2 ns (5e8 a second), so that token-time (`tick × per_tick`, with
    /// `tick ≤ (2^63 − 1) / period` below the ticker's horizon) stays below 2^62, and the state
    /// (token-time plus at most the limit) far from 2^64.
    pub(crate) fn fits_64(&self) -> bool {
        2 * u128::from(self.refill.per_tick) <= u128::from(self.ticker.period_ns())
    }

    /// The tick `now` falls in and the nanoseconds into it.
    #[inline]
    pub(crate) fn tick_into(&self, now: Instant) -> (u64, u64) {
        self.ticker.tick(now)
    }

    // -----------------------------------------------------------------------------------------
    // The 64-bit form: `v`, the token-time at which the bucket is full.
    //
    // Token-time runs at `per_tick` per tick: tick `k` starts at token-time `k × per_tick`. A
    // bucket full at token-time `v` holds `limit - max(0, v - k × per_tick)` tokens during tick
    // `k`; taking `n` makes it full `n` later: `max(v, k × per_tick) + n`. This is exactly the
    // 128-bit word's rule (tokens refilled `per_tick` at each tick start, capped at the limit),
    // folded into one number. A fresh bucket is `v = 0`: full since the limiter's creation.

    #[inline]
    fn token_time(&self, k: u64) -> u64 {
        // < 2^62 when `fits_64` (checked at construction).
        k.saturating_mul(u64::from(self.refill.per_tick))
    }

    #[inline]
    fn v_tokens(&self, v: u64, k: u64) -> u32 {
        let deficit = v.saturating_sub(self.token_time(k));
        self.refill.limit - deficit.min(u64::from(self.refill.limit)) as u32
    }

    /// Takes `n` at tick `k`: the new `v`, or `Err(())` if the tokens are short (a probe,
    /// `n == 0`, succeeds on any token and changes nothing).
    #[inline]
    pub(crate) fn v_take(&self, v: u64, k: u64, n: u32) -> Result<u64, ()> {
        let tokens = self.v_tokens(v, k);
        if n == 0 {
            return if tokens > 0 { Ok(v) } else { Err(()) };
        }
        if tokens < n {
            return Err(());
        }
        Ok(v.max(self.token_time(k)) + u64::from(n))
    }

    /// The rejection of `n` at tick `k` (`into` ns into it) from state `v`.
    /// Settles a lease as `s` says at tick `k`: a refund makes the bucket full that much
    /// earlier (never earlier than now: a full bucket stays as it is); a debit that much
    /// later, into debt (a deficit past the limit) up to one limit or `s.max_debt`, as
    /// `TokenBucketLimiter`'s.
    pub(crate) fn v_settle(&self, v: u64, k: u64, s: Settlement) -> Result<u64, SettleError> {
        let Settlement {
            held,
            actual,
            max_debt,
            ..
        } = s;
        let t = self.token_time(k);
        if actual <= held {
            return Ok(if v <= t {
                v
            } else {
                v.saturating_sub(u64::from(held - actual)).max(t)
            });
        }
        let next = v.max(t) + u64::from(actual - held);
        let limit = u64::from(self.refill.limit);
        if next - t > limit + limit.min(u64::from(max_debt)) {
            return Err(SettleError::DebtLimit);
        }
        Ok(next)
    }

    pub(crate) fn v_rejection(&self, v: u64, k: u64, into: u64, n: u32) -> Rejection {
        // The deficit counts a debt (a deficit past the limit) too: `n - tokens` without one.
        let deficit = v.saturating_sub(self.token_time(k));
        let missing = (u64::from(n.max(1)) + deficit)
            .saturating_sub(u64::from(self.refill.limit))
            .max(1);
        let wait = self
            .ticker
            .wait_for(Bucket::ticks_to_gain(missing, self.refill), into);
        Rejection::after(&Reason::Exhausted, wait.at_least_1ns())
    }

    /// Tokens in state `v` at tick `k`.
    pub(crate) fn v_available(&self, v: u64, k: u64) -> u64 {
        u64::from(self.v_tokens(v, k))
    }

    /// How idle state `v` is at `now` (tick `k`): full since the start of tick `ceil(v /
    /// per_tick)`, or busy until then.
    pub(crate) fn v_idle(&self, v: u64, k: u64, now: Instant) -> Idle {
        let full_at = v.div_ceil(u64::from(self.refill.per_tick));
        idle_from(self.ticker.start_of(full_at), full_at <= k, now)
    }
}

/// GCRA per key (feature `std`), the rule of a [`KeyedLimiter`](crate::KeyedLimiter) built by
/// its `gcra` and `leaky_meter` constructors: the per-key state is the theoretical arrival time
/// `tat` (nanoseconds since the limiter's creation; 0, full since creation, for a new key) and
/// the transitions are [`GcraLimiter`](crate::GcraLimiter)'s own pure functions, so a key
/// behaves as a GCRA limiter (or leaky meter) of its own. `tat` stays below 2^62: it fits the
/// 64-bit slot with room to spare.
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KeyedGcra {
    params: Params,
    /// Nanosecond ticks from creation.
    ticker: Ticker,
}

#[cfg(feature = "std")]
impl KeyedGcra {
    pub(crate) fn gcra(o: &GcraOptions, now: Instant) -> Result<Self, OptionsError> {
        o.validate()?;
        Ok(Self {
            params: crate::gcra::params(o.interval, o.burst, false)?,
            ticker: Ticker::new(now, 1),
        })
    }

    pub(crate) fn leaky_meter(o: &LeakyBucketOptions, now: Instant) -> Result<Self, OptionsError> {
        o.validate()?;
        let interval = crate::gcra::interval_of(o.leak_interval, o.leak);
        Ok(Self {
            params: crate::gcra::params(interval, o.capacity, false)?,
            ticker: Ticker::new(now, 1),
        })
    }

    #[inline]
    fn state(v: u64) -> Gcra {
        Gcra {
            tat: v,
            closed: false,
            waiters: false,
        }
    }

    #[inline]
    fn take(&self, v: u64, now: u64, n: u32) -> Result<u64, ()> {
        Self::state(v)
            .try_take(now, n, self.params, true)
            .map(|g| g.tat)
            .map_err(|_| ())
    }

    fn rejection(&self, v: u64, now: u64, n: u32) -> Rejection {
        let wait = Self::state(v).wait(now, u64::from(n.max(1)), 0, self.params);
        Rejection::after(&Reason::Exhausted, Nanos::from_u128(wait.max(1)))
    }

    fn available(&self, v: u64, now: u64) -> u64 {
        Self::state(v).available(now, self.params)
    }

    fn idle(&self, v: u64, now_ns: u64, now: Instant) -> Idle {
        idle_from(self.ticker.start_of(v), v <= now_ns, now)
    }
}

/// What a decision needs of a rule, for [`KeyedLimiter`](crate::KeyedLimiter)'s hot path: the
/// decision is generic over it, matched once on [`KeyedRule`], so each rule's path has its own
/// code and no match on the way (feature `std`).
#[cfg(feature = "std")]
pub(crate) trait Rule {
    /// The most permits one request can take.
    fn most(&self) -> u32;
    /// The rule's time of `now` and the nanoseconds into it.
    fn time_of(&self, now: Instant) -> (u64, u64);
    /// Takes `n` from state `v` at time `k`, `into` ns into it: the new state, or `Err(())`.
    fn take_from(&self, v: u64, k: u64, into: u64, n: u32) -> Result<u64, ()>;
    /// The rejection of `n` from state `v` at time `k`, `into` ns into it.
    fn refusal(&self, v: u64, k: u64, into: u64, n: u32) -> Rejection;
    /// The stamp a lease granted at time `k` keeps for a settle: the time itself for a rule
    /// whose refund depends on it (the sliding counter's window), else 0 (nothing to store).
    #[inline(always)]
    fn stamp(&self, k: u64) -> u64 {
        let _ = k;
        0
    }
    /// Applies settle `s` ([`Settlement`]) from state `v` at time `k`, `into` ns into it: the
    /// new state, or why nothing changes.
    fn settle_from(&self, v: u64, k: u64, into: u64, s: Settlement) -> Result<u64, SettleError>;
}

#[cfg(feature = "std")]
impl Rule for KeyedBucket {
    #[inline]
    fn most(&self) -> u32 {
        self.refill.limit
    }
    #[inline]
    fn time_of(&self, now: Instant) -> (u64, u64) {
        self.ticker.tick(now)
    }
    #[inline]
    fn take_from(&self, v: u64, k: u64, _: u64, n: u32) -> Result<u64, ()> {
        self.v_take(v, k, n)
    }
    fn refusal(&self, v: u64, k: u64, into: u64, n: u32) -> Rejection {
        self.v_rejection(v, k, into, n)
    }
    fn settle_from(&self, v: u64, k: u64, _: u64, s: Settlement) -> Result<u64, SettleError> {
        self.v_settle(v, k, s)
    }
}

#[cfg(feature = "std")]
impl Rule for KeyedGcra {
    #[inline]
    fn most(&self) -> u32 {
        self.params.burst
    }
    #[inline]
    fn time_of(&self, now: Instant) -> (u64, u64) {
        self.ticker.tick(now)
    }
    #[inline]
    fn take_from(&self, v: u64, k: u64, _: u64, n: u32) -> Result<u64, ()> {
        self.take(v, k, n)
    }
    fn refusal(&self, v: u64, k: u64, _: u64, n: u32) -> Rejection {
        self.rejection(v, k, n)
    }
    fn settle_from(&self, v: u64, k: u64, _: u64, s: Settlement) -> Result<u64, SettleError> {
        let (held, actual) = (s.held, s.actual);
        let g = Self::state(v);
        if actual <= held {
            return Ok(g.give_back(k, held - actual, self.params).tat);
        }
        // Debt up to one burst past the tolerance, as `GcraLimiter`'s.
        g.take_debt(
            k,
            actual - held,
            self.params.burst.min(s.max_debt),
            self.params,
        )
        .map(|g| g.tat)
        .ok_or(SettleError::DebtLimit)
    }
}

#[cfg(feature = "std")]
impl Rule for KeyedSliding {
    #[inline]
    fn most(&self) -> u32 {
        self.limit()
    }
    #[inline]
    fn time_of(&self, now: Instant) -> (u64, u64) {
        self.tick_into(now)
    }
    #[inline]
    fn take_from(&self, v: u64, k: u64, into: u64, n: u32) -> Result<u64, ()> {
        self.take(v, k, into, n)
    }
    fn refusal(&self, v: u64, k: u64, into: u64, n: u32) -> Rejection {
        self.rejection(v, k, into, n)
    }
    #[inline(always)]
    fn stamp(&self, k: u64) -> u64 {
        k
    }
    fn settle_from(&self, v: u64, k: u64, into: u64, s: Settlement) -> Result<u64, SettleError> {
        let (held, actual) = (s.held, s.actual);
        if actual <= held {
            let window = crate::lease::tick_of_stamp(k, s.stamp);
            return Ok(self.give_back(v, k, window, held - actual));
        }
        // A debit only where it fits (no debt: the compact form has no room for one, unlike
        // `SlidingCounterLimiter`, whose debt bound is one limit).
        self.take(v, k, into, actual - held)
            .map_err(|()| SettleError::DebtLimit)
    }
}

/// The rule every key of a [`KeyedLimiter`](crate::KeyedLimiter) follows, shared by all keys
/// (feature `std`): a token bucket or fixed window, GCRA (which is also the leaky meter), or the
/// sliding-window counter.
/// Each decision matches on it once; the arm is the same for every call, so the branch costs
/// nothing a predictor notices.
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyedRule {
    /// A token bucket or fixed window: the state is the token-time at which the bucket is full.
    Bucket(KeyedBucket),
    /// GCRA or the leaky meter: the state is the theoretical arrival time.
    Gcra(KeyedGcra),
    /// The sliding-window counter: the state is both counts and the window index, folded.
    Sliding(KeyedSliding),
}

#[cfg(feature = "std")]
impl KeyedRule {
    /// Whether every state fits the 64-bit slot (GCRA's always does).
    pub(crate) fn fits_64(&self) -> bool {
        match self {
            KeyedRule::Bucket(b) => b.fits_64(),
            // The sliding counter's options are refused at its construction unless they fit.
            KeyedRule::Gcra(_) | KeyedRule::Sliding(_) => true,
        }
    }

    pub(crate) fn limit(&self) -> u32 {
        match self {
            KeyedRule::Bucket(b) => b.limit(),
            KeyedRule::Gcra(g) => g.params.burst,
            KeyedRule::Sliding(s) => s.limit(),
        }
    }

    /// The period (token bucket), window (fixed window, sliding counter) or emission interval
    /// (GCRA: one permit comes back every this long).
    pub(crate) fn period(&self) -> Duration {
        match self {
            KeyedRule::Bucket(b) => b.period(),
            KeyedRule::Gcra(g) => Duration::from_nanos(g.params.interval),
            KeyedRule::Sliding(s) => s.window(),
        }
    }

    /// The rule's time of `now` (a bucket's tick, GCRA's nanosecond, the sliding counter's
    /// window) and the nanoseconds into it (always 0 for GCRA).
    #[inline]
    pub(crate) fn tick_into(&self, now: Instant) -> (u64, u64) {
        match self {
            KeyedRule::Bucket(b) => b.tick_into(now),
            KeyedRule::Gcra(g) => g.ticker.tick(now),
            KeyedRule::Sliding(s) => s.tick_into(now),
        }
    }

    #[inline]
    pub(crate) fn tick(&self, now: Instant) -> u64 {
        self.tick_into(now).0
    }

    /// The rejection of `n` from state `v` at time `k`, `into` ns into it.
    pub(crate) fn v_rejection(&self, v: u64, k: u64, into: u64, n: u32) -> Rejection {
        match self {
            KeyedRule::Bucket(b) => b.v_rejection(v, k, into, n),
            KeyedRule::Gcra(g) => g.rejection(v, k, n),
            KeyedRule::Sliding(s) => s.rejection(v, k, into, n),
        }
    }

    /// Permits state `v` holds at time `k`, `into` ns into it.
    pub(crate) fn v_available(&self, v: u64, k: u64, into: u64) -> u64 {
        match self {
            KeyedRule::Bucket(b) => b.v_available(v, k),
            KeyedRule::Gcra(g) => g.available(v, k),
            KeyedRule::Sliding(s) => s.available(v, k, into),
        }
    }

    /// How idle state `v` is at `now` (time `k`).
    pub(crate) fn v_idle(&self, v: u64, k: u64, now: Instant) -> Idle {
        match self {
            KeyedRule::Bucket(b) => b.v_idle(v, k, now),
            KeyedRule::Gcra(g) => g.idle(v, k, now),
            KeyedRule::Sliding(s) => s.idle(v, k, now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_behaves_as_a_token_bucket() {
        let o = TokenBucketOptions::new(3, 1, Duration::from_secs(1));
        let kb = KeyedBucket::token_bucket(&o, Instant::ZERO).unwrap();
        let mut w = kb.fresh();
        let t = |s: u64| Instant::from_nanos(s * 1_000_000_000);
        kb.take_plain(&mut w, t(0), 3).unwrap();
        let r = kb.take_plain(&mut w, t(0), 2).unwrap_err();
        assert_eq!(r.retry_after(), Some(Duration::from_secs(2)));
        assert_eq!(kb.available(w, t(1)), 1);
        assert_eq!(kb.idle(w, t(2)), Idle::Busy(Some(3_000_000_000)));
        assert_eq!(kb.idle(w, t(5)), Idle::For(2_000_000_000));
        assert_eq!(kb.check(4).unwrap_err().reason(), Reason::ExceedsLimit);
    }

    /// The 64-bit form decides exactly as the 128-bit word, over random operations.
    #[cfg(feature = "std")]
    #[test]
    fn the_64_bit_form_matches_the_word() {
        for (limit, per, period) in [
            (5u32, 2u32, 10u64),
            (1, 1, 3),
            (10, 3, 7),
            (7, 3, 100),
            (4, 4, 9),
            // Exactly one token per 2 ns, the fastest rate accepted.
            (5, 1, 2),
            (6, 3, 6),
        ] {
            let o = TokenBucketOptions::new(limit, per, Duration::from_nanos(period));
            let kb = KeyedBucket::token_bucket(&o, Instant::ZERO).unwrap();
            assert!(kb.fits_64());
            let (mut w, mut v, mut now) = (kb.fresh(), 0u64, 0u64);
            let mut x = 0x1234_5678u64;
            for _ in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                now += x % (3 * period);
                let n = (x >> 20) as u32 % (limit + 1);
                let t = Instant::from_nanos(now);
                let k = kb.tick_into(t).0;
                let (_, into) = kb.ticker.tick(t);
                let a = kb.take_plain(&mut w, t, n);
                let b = kb
                    .v_take(v, k, n)
                    .map(|nv| v = nv)
                    .map_err(|()| kb.v_rejection(v, k, into, n));
                assert_eq!(a, b, "limit {limit} per {per} n {n} at {now}");
                assert_eq!(kb.available(w, t), kb.v_available(v, k));
                assert_eq!(kb.idle(w, t), kb.v_idle(v, k, t));
            }
        }
        // Faster than one token per 2 ns.
        let fast = TokenBucketOptions::new(10, 6, Duration::from_nanos(10));
        assert!(!KeyedBucket::token_bucket(&fast, Instant::ZERO)
            .unwrap()
            .fits_64());
    }
}
