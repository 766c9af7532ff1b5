//! The sliding-window counter per key (feature `std`), the rule of a
//! [`KeyedLimiter`](crate::KeyedLimiter) built by its `sliding_counter` constructors: the
//! [`SlidingCounterLimiter`](crate::SlidingCounterLimiter)'s two counts and window index, folded
//! into the 64 bits a slot holds beside the key's fingerprint, and its own pure transitions
//! (`crate::sliding_counter::state`), so a key behaves as a sliding counter of its own created
//! with the keyed limiter.
//!
//! # The 64-bit layout
//!
//! The local counter's word has 128 bits (two 32-bit counts, a 63-bit window index, a closed
//! flag). Per key only the counts and the index are needed (closing is the keyed limiter's), and
//! they fold exactly into 64 bits when the counts take only the bits the limit needs:
//!
//! | bits             | field  | meaning                                     |
//! |------------------|--------|---------------------------------------------|
//! | `0..b`           | `cur`  | permits taken in window `tick`              |
//! | `b..2b`          | `prev` | permits taken in window `tick - 1`          |
//! | `2b..64`         | `tick` | windows since the limiter's creation, whole |
//!
//! with `b` the bit length of the limit (a grant never lets a count pass the limit). The index is
//! never wrapped or truncated: a limiter reads its clock up to 2^63 ns after its creation
//! (`crate::ticks`), so `tick ≤ (2^63 - 1) / W` for a window of `W` ns, and the options are
//! accepted only if that largest index fits in `64 - 2b` bits. Hence the bound, per window: the
//! largest limit is `2^b - 1` for the largest `b` with `(2^63 - 1) / W < 2^(64 - 2b)`, about
//! `√(2·W/ns)` ([`KeyedSliding::max_limit`]):
//!
//! | window | largest limit |
//! |--------|---------------|
//! | 1 ms   | 1,023         |
//! | 1 s    | 32,767        |
//! | 1 min  | 262,143       |
//! | 1 h    | 2,097,151     |
//! | 1 day  | 8,388,607     |
//!
//! A larger limit is refused with [`OptionsError::LimitTooLarge`], naming the largest (a 1 ns
//! window is refused before, as by the counter itself: `WindowTooShort`). The fingerprint
//! keeps its 62 bits: the table, its probing and the other rules' states are untouched.
//!
//! A fresh key's state is 0: nothing counted, window 0 — the local counter's fresh word. An idle
//! state (both counts expired) decides exactly as that fresh one does, which is why evicting it
//! changes nothing.

use core::time::Duration;

use crate::clock::Instant;
use crate::lease::{Reason, Rejection};
use crate::nanos::Nanos;
use crate::options::OptionsError;
use crate::sliding_counter::state::{Counter, Shape};
use crate::sliding_counter::SlidingCounterOptions;
use crate::ticks::{Ticker, HORIZON_NS};

use super::evict::Idle;

/// The shared part of a keyed sliding counter: the limit, the window and the layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KeyedSliding {
    shape: Shape,
    /// Bits of each count: the limit's bit length (1 to 31).
    bits: u32,
    /// Windows from creation.
    ticker: Ticker,
}

impl KeyedSliding {
    /// The keyed form of `o`, its windows counted from `now`; refused as the local counter
    /// refuses `o`, or with [`OptionsError::LimitTooLarge`] if both counts and the largest
    /// window index do not fit in 64 bits.
    pub(crate) fn new(o: &SlidingCounterOptions, now: Instant) -> Result<Self, OptionsError> {
        let window = o.validate()?;
        let max = Self::max_limit(window);
        if o.permit_limit > max {
            return Err(OptionsError::LimitTooLarge { max });
        }
        Ok(Self {
            shape: Shape {
                limit: o.permit_limit,
                window,
            },
            bits: u32::BITS - o.permit_limit.leading_zeros(),
            ticker: Ticker::new(now, window),
        })
    }

    /// The largest limit whose two counts fit in 64 bits beside every window index a limiter
    /// with a window of `window` ns can reach (0: none does).
    pub(crate) const fn max_limit(window: u64) -> u32 {
        let max_tick = (HORIZON_NS - 1) / window;
        let tick_bits = u64::BITS - max_tick.leading_zeros();
        let b = (64 - tick_bits) / 2;
        if b >= 32 {
            u32::MAX
        } else {
            (1 << b) - 1
        }
    }

    pub(crate) fn limit(&self) -> u32 {
        self.shape.limit
    }

    pub(crate) fn window(&self) -> Duration {
        Duration::from_nanos(self.shape.window)
    }

    /// The window `now` falls in and the nanoseconds into it.
    #[inline]
    pub(crate) fn tick_into(&self, now: Instant) -> (u64, u64) {
        self.ticker.tick(now)
    }

    #[inline]
    fn mask(&self) -> u64 {
        (1 << self.bits) - 1
    }

    /// The counter state `v` holds.
    #[inline]
    pub(crate) fn unpack(&self, v: u64) -> Counter {
        Counter {
            cur: (v & self.mask()) as u32,
            prev: ((v >> self.bits) & self.mask()) as u32,
            tick: v >> (2 * self.bits),
            waiters: false,
            closed: false,
        }
    }

    /// `c` as a state: exact for every counter this rule makes (counts at most the limit, a
    /// window index at most `(2^63 - 1) / W`, which the construction checked fits).
    #[inline]
    pub(crate) fn pack(&self, c: Counter) -> u64 {
        debug_assert!(c.cur <= self.shape.limit && c.prev <= self.shape.limit);
        debug_assert!(c.tick <= (HORIZON_NS - 1) / self.shape.window);
        c.tick << (2 * self.bits) | u64::from(c.prev) << self.bits | u64::from(c.cur)
    }

    /// Takes `n` from state `v`, `into` ns into window `k`: the new state, or `Err(())` if the
    /// estimate has no room (a probe, `n == 0`, succeeds when one permit would, and changes
    /// nothing).
    #[inline]
    pub(crate) fn take(&self, v: u64, k: u64, into: u64, n: u32) -> Result<u64, ()> {
        match self.unpack(v).try_take(k, into, n, self.shape, true) {
            Ok(c) if n > 0 => Ok(self.pack(c)),
            Ok(_) => Ok(v),
            Err(_) => Err(()),
        }
    }

    /// State `v` at window `k` with `n` permits granted in window `window` given back, if that
    /// window still counts (as `SlidingCounterLimiter`'s refund).
    pub(crate) fn give_back(&self, v: u64, k: u64, window: u64, n: u32) -> u64 {
        self.pack(self.unpack(v).give_back(k, window, n))
    }

    /// The rejection of `n` from state `v`, `into` ns into window `k`: the exact wait until the
    /// estimate makes room (as `SlidingCounterLimiter` computes it).
    pub(crate) fn rejection(&self, v: u64, k: u64, into: u64, n: u32) -> Rejection {
        let wait = self.unpack(v).wait(k, into, n.max(1), self.shape);
        Rejection::after(&Reason::Exhausted, Nanos::from_u128(wait.max(1)))
    }

    /// Permits that fit in state `v`, `into` ns into window `k`.
    pub(crate) fn available(&self, v: u64, k: u64, into: u64) -> u64 {
        self.unpack(v).available(k, into, self.shape)
    }

    /// How idle state `v` is at `now` (window `k`): idle from the start of the first window in
    /// which its estimate is zero, as `SlidingCounterLimiter::idle_duration` reads it.
    pub(crate) fn idle(&self, v: u64, k: u64, now: Instant) -> Idle {
        let c = self.unpack(v);
        let free_from = c.free_from();
        if free_from <= k.max(c.tick) {
            Idle::For(self.ticker.since_start_of(now, free_from).as_nanos() as u64)
        } else {
            Idle::Busy(Some(self.ticker.start_of(free_from).as_nanos()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn the_largest_limit_per_window() {
        for (window, max) in [
            (1, 0),
            (2, 1),
            (1_000_000, 1_023),
            (SEC, 32_767),
            (60 * SEC, 262_143),
            (3_600 * SEC, 2_097_151),
            (86_400 * SEC, 8_388_607),
            ((1 << 62) - 1, (1 << 31) - 1),
        ] {
            assert_eq!(KeyedSliding::max_limit(window), max, "window {window}");
        }
        // The bound is exact: with one more bit per count the largest index would not fit.
        for window in [2, 3, 999, 1_000_000, SEC, 60 * SEC, (1 << 62) - 1] {
            let b = 32 - KeyedSliding::max_limit(window).leading_zeros();
            let max_tick = (HORIZON_NS - 1) / window;
            assert!(b == 0 || max_tick >> (64 - 2 * b) == 0);
            assert!(2 * (b + 1) >= 64 || max_tick >> (64 - 2 * (b + 1)) != 0);
        }
    }

    #[test]
    fn options_are_refused_with_typed_errors() {
        let at = Instant::ZERO;
        let o = |limit, ns| SlidingCounterOptions::new(limit, Duration::from_nanos(ns));
        assert_eq!(
            KeyedSliding::new(&o(0, SEC), at),
            Err(OptionsError::ZeroLimit)
        );
        assert_eq!(
            KeyedSliding::new(&o(1, 0), at),
            Err(OptionsError::ZeroPeriod)
        );
        assert_eq!(
            KeyedSliding::new(&o(32_768, SEC), at),
            Err(OptionsError::LimitTooLarge { max: 32_767 })
        );
        assert_eq!(
            KeyedSliding::new(&o(1, 1), at),
            Err(OptionsError::WindowTooShort)
        );
        assert!(KeyedSliding::new(&o(32_767, SEC), at).is_ok());
        assert!(KeyedSliding::new(&o(1, 2), at).is_ok());
    }

    #[test]
    fn packing_round_trips_at_the_extremes() {
        for (limit, window) in [
            (1, 2),
            (32_767, SEC),
            (1_023, 1_000_000),
            ((1 << 31) - 1, (1 << 62) - 1),
        ] {
            let o = SlidingCounterOptions::new(limit, Duration::from_nanos(window));
            let s = KeyedSliding::new(&o, Instant::ZERO).unwrap();
            let max_tick = (HORIZON_NS - 1) / window;
            for c in [
                Counter::FRESH,
                Counter {
                    cur: limit,
                    prev: limit,
                    tick: max_tick,
                    waiters: false,
                    closed: false,
                },
                Counter {
                    cur: 0,
                    prev: limit,
                    tick: max_tick - 1,
                    waiters: false,
                    closed: false,
                },
                Counter {
                    cur: limit / 2,
                    prev: 1,
                    tick: 1,
                    waiters: false,
                    closed: false,
                },
            ] {
                assert_eq!(s.unpack(s.pack(c)), c, "limit {limit} window {window}");
            }
            assert_eq!(s.pack(Counter::FRESH), 0);
        }
    }

    /// The 64-bit state decides exactly as the local counter's word, over random operations,
    /// including at the last windows before the horizon.
    #[test]
    fn the_64_bit_form_matches_the_word() {
        for (limit, window, start) in [
            (10u32, 10_000u64, 0u64),
            (1, 2, 0),
            (3, 13, 1_000),
            (1_023, 1_000_000, 0),
            (31, 1_000, HORIZON_NS - 200_000),
            (1, 2, HORIZON_NS - 30_000),
        ] {
            let o = SlidingCounterOptions::new(limit, Duration::from_nanos(window));
            let s = KeyedSliding::new(&o, Instant::ZERO).unwrap();
            let shape = Shape { limit, window };
            let (mut w, mut v, mut now) = (Counter::FRESH, 0u64, start);
            let mut x = 0x1234_5678u64 ^ window;
            for _ in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                now = (now + x % (window * 3 / 2 + 1)).min(HORIZON_NS - 1);
                let n = (x >> 20) as u32 % (limit + 1);
                let t = Instant::from_nanos(now);
                let (k, into) = s.tick_into(t);
                let a = w.try_take(k, into, n, shape, true);
                let b = s.take(v, k, into, n);
                assert_eq!(a.is_ok(), b.is_ok(), "limit {limit} n {n} at {now}");
                match (a, b) {
                    (Ok(c), Ok(nv)) => {
                        w = c;
                        v = nv;
                    }
                    _ => assert_eq!(
                        Rejection::after(
                            &Reason::Exhausted,
                            Nanos::from_u128(w.wait(k, into, n.max(1), shape).max(1))
                        ),
                        s.rejection(v, k, into, n)
                    ),
                }
                assert_eq!(s.unpack(v), w);
                assert_eq!(w.available(k, into, shape), s.available(v, k, into));
            }
        }
    }

    #[test]
    fn idle_from_the_first_window_with_nothing_counted() {
        let o = SlidingCounterOptions::new(4, Duration::from_nanos(1_000));
        let s = KeyedSliding::new(&o, Instant::ZERO).unwrap();
        let at = Instant::from_nanos;
        assert_eq!(s.idle(0, 0, at(7)), Idle::For(7));
        let v = s.take(0, 1, 3, 2).unwrap(); // 2 taken in window 1
        assert_eq!(s.idle(v, 1, at(1_013)), Idle::Busy(Some(3_000)));
        assert_eq!(s.idle(v, 2, at(2_500)), Idle::Busy(Some(3_000)));
        assert_eq!(s.idle(v, 3, at(3_004)), Idle::For(4));
    }
}
