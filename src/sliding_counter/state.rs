//! The sliding-window counter's packed word and its pure transitions.
//!
//! Two counts — the current fixed window's and the previous one's — and the current window's
//! index. At `into` nanoseconds into the current window of `W`, the estimate of the permits taken
//! over the last `W` is `prev · (W - into) / W + cur`: the previous window's count weighted by how
//! much of it the rolling window still overlaps (article 001's formula). The comparison is done
//! exactly in integers, `prev · (W - into) + (cur + n) · W ≤ limit · W`, without floating point.
//!
//! Layout of the 128-bit word:
//!
//! | bits     | field    | meaning                                   |
//! |----------|----------|-------------------------------------------|
//! | 0..32    | `cur`    | permits taken in window `tick`             |
//! | 32..64   | `prev`   | permits taken in window `tick - 1`         |
//! | 64..126  | `tick`   | windows since creation (a full count: an idle gap of any length reads as empty; 62 bits hold every window of at least 2 ns to the clock's 2^63 ns horizon) |
//! | 126      | `waiters`| the wait queue holds waiters: newcomers do not take past them |
//! | 127      | `closed` | `close()` was called                       |
//!
//! A queued waiter is granted **as of the window it first fit in** ([`Counter::take_when_fits`]):
//! the estimate only falls as time passes (the previous window's weight shrinks, and at a
//! boundary the current count becomes the previous one at full weight, never more than it was
//! with the old previous count on top), so a request fits somewhere in window `j` if and only if
//! it fits at `j`'s last nanosecond, and only three windows can differ: the state's own, the
//! next, and any later one (where both counts have rolled away).

/// The limiter's constants (shared with the other window limiter).
pub use crate::core_common::WindowShape as Shape;

/// The unpacked state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    /// Permits taken in window `tick`.
    pub cur: u32,
    /// Permits taken in window `tick - 1`.
    pub prev: u32,
    /// Windows since creation.
    pub tick: u64,
    /// The wait queue holds waiters.
    pub waiters: bool,
    /// `close()` was called.
    pub closed: bool,
}

/// Why a take was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// The limiter is closed.
    Closed,
    /// The estimate would exceed the limit.
    Exhausted,
}

/// `a / b` (`b >= 1`): a 64-bit division when `a` fits 64 bits, as it does for every limit
/// times window below 2^64 (a 128-bit division is a library call of dozens of instructions).
#[cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]
const fn div(a: u128, b: u32) -> u128 {
    if a >> 64 == 0 {
        (a as u64 / b as u64) as u128
    } else {
        a / b as u128
    }
}

/// The first `x` in `0..=w` at which `d · (w - x) ≤ room` (`d >= 1`, `room < 2^96`): how far into
/// a window a count of `d`, weighted by the rest of the window, fits under `room`. That is
/// `w - min(room / d, w)`, found the cheapest way for the target ([`first_fit_by_division`] on a
/// 64-bit CPU, whose division is one instruction; [`first_fit_by_digits`] elsewhere, with no
/// 64- or 128-bit division routine linked).
#[inline]
const fn first_fit(room: u128, d: u32, w: u64) -> u64 {
    #[cfg(target_pointer_width = "64")]
    {
        first_fit_by_division(room, d, w)
    }
    #[cfg(not(target_pointer_width = "64"))]
    {
        first_fit_by_digits(room, d, w)
    }
}

/// [`first_fit`] by one division of `room` ([`div`]).
#[cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]
#[inline]
const fn first_fit_by_division(room: u128, d: u32, w: u64) -> u64 {
    let q = div(room, d);
    if q >= w as u128 {
        0
    } else {
        w - q as u64
    }
}

/// [`first_fit`] with 32-bit divisions only: a multiplication settles `room ≥ d · w` (then `x` is
/// 0); otherwise `room < d · 2^64`, so the quotient fits 64 bits and takes two steps of long
/// division by 32-bit digits ([`div_below_2_64`]).
#[cfg_attr(target_pointer_width = "64", allow(dead_code))]
#[inline]
const fn first_fit_by_digits(room: u128, d: u32, w: u64) -> u64 {
    if room >= mul_u32_u64(d, w) {
        0
    } else {
        w - div_below_2_64(room, d)
    }
}

/// `a · b` exactly (at most 96 bits): one instruction on a 64-bit CPU; elsewhere
/// [`mul_u32_u64_by_halves`].
#[inline]
const fn mul_u32_u64(a: u32, b: u64) -> u128 {
    #[cfg(target_pointer_width = "64")]
    {
        a as u128 * b as u128
    }
    #[cfg(not(target_pointer_width = "64"))]
    {
        mul_u32_u64_by_halves(a, b)
    }
}

/// [`mul_u32_u64`] from two 32-by-32-bit products, which is what a 32-bit CPU needs for it (its
/// general 128-bit multiplication takes several more).
#[cfg_attr(target_pointer_width = "64", allow(dead_code))]
#[inline]
const fn mul_u32_u64_by_halves(a: u32, b: u64) -> u128 {
    let low = a as u64 * (b as u32) as u64;
    let high = a as u64 * (b >> 32);
    ((high as u128) << 32) + low as u128
}

/// `a / d` for `a < d · 2^64` (`d >= 1`; the quotient fits 64 bits): long division by 32-bit
/// digits, the top digit of the quotient being 0, in two [`div_digit`] steps.
#[cfg_attr(target_pointer_width = "64", allow(dead_code))]
const fn div_below_2_64(a: u128, d: u32) -> u64 {
    let (high, rest) = div_digit((a >> 64) as u32, (a >> 32) as u32, d);
    let (low, _) = div_digit(rest, a as u32, d);
    (high as u64) << 32 | low as u64
}

/// `(hi · 2^32 + lo) / d` and its remainder for `hi < d` (so the quotient fits 32 bits), with
/// 32-bit divisions only: Knuth's algorithm D on 16-bit halves (Hacker's Delight's `divlu`),
/// `d` shifted until its top bit is set so that each estimated half-digit is at most 2 over.
#[cfg_attr(target_pointer_width = "64", allow(dead_code))]
const fn div_digit(hi: u32, lo: u32, d: u32) -> (u32, u32) {
    let s = d.leading_zeros();
    let d = d << s;
    let (d1, d0) = (d >> 16, d & 0xFFFF);
    // The dividend times 2^s: `top` its high 32 bits (below `d`), then two 16-bit halves.
    let top = if s == 0 { hi } else { hi << s | lo >> (32 - s) };
    let (n1, n0) = ((lo << s) >> 16, (lo << s) & 0xFFFF);
    let q1 = half_digit(top, n1, d1, d0);
    // `top · 2^16 + n1 - q1 · d`, below `d`: exact modulo 2^32.
    let mid = (top << 16)
        .wrapping_add(n1)
        .wrapping_sub(q1.wrapping_mul(d));
    let q0 = half_digit(mid, n0, d1, d0);
    let r = (mid << 16)
        .wrapping_add(n0)
        .wrapping_sub(q0.wrapping_mul(d));
    (q1 << 16 | q0, r >> s)
}

/// The 16-bit quotient digit of `(n · 2^16 + next) / d` for a normalized `d = d1 · 2^16 + d0`
/// (top bit set), `n < d` and `next < 2^16`: the estimate `n / d1`, corrected at most twice
/// (written out: a loop of subtractions would be turned back into a division).
#[cfg_attr(target_pointer_width = "64", allow(dead_code))]
#[inline(never)]
const fn half_digit(n: u32, next: u32, d1: u32, d0: u32) -> u32 {
    // `d1` has its top bit set already (normalized); saying so lets the compiler drop the
    // division's zero check and the panic path it would link.
    let d1 = d1 | 0x8000;
    let mut q = n / d1;
    let mut rest = n - q * d1;
    if q >> 16 != 0 || q * d0 > (rest << 16 | next) {
        q -= 1;
        rest += d1;
        if rest >> 16 == 0 && (q >> 16 != 0 || q * d0 > (rest << 16 | next)) {
            q -= 1;
        }
    }
    q
}

const COUNT: u128 = 0xFFFF_FFFF;
const TICK: u128 = (1 << 62) - 1;
const WAITERS: u128 = 1 << 126;
const CLOSED: u128 = 1 << 127;

impl Counter {
    /// A fresh limiter: nothing taken.
    pub const FRESH: Counter = Counter {
        cur: 0,
        prev: 0,
        tick: 0,
        waiters: false,
        closed: false,
    };

    /// Reads a packed word.
    #[inline]
    pub const fn unpack(w: u128) -> Self {
        Self {
            cur: (w & COUNT) as u32,
            prev: ((w >> 32) & COUNT) as u32,
            tick: ((w >> 64) & TICK) as u64,
            waiters: w & WAITERS != 0,
            closed: w & CLOSED != 0,
        }
    }

    /// Packs into a word (a tick past 2^62 - 1 saturates; it cannot occur, since ticks count
    /// windows of at least 2 ns over at most 2^63 ns).
    #[inline]
    pub const fn pack(self) -> u128 {
        let tick = if self.tick as u128 > TICK {
            TICK
        } else {
            self.tick as u128
        };
        self.cur as u128
            | (self.prev as u128) << 32
            | tick << 64
            | if self.waiters { WAITERS } else { 0 }
            | if self.closed { CLOSED } else { 0 }
    }

    /// The counts as of window `k`: the current window becomes the previous one after one
    /// boundary, and both are gone after two. A `k` at or before `tick` changes nothing.
    #[inline]
    pub const fn at(self, k: u64) -> Counter {
        if k <= self.tick {
            self
        } else if k == self.tick + 1 {
            Counter {
                prev: self.cur,
                cur: 0,
                tick: k,
                ..self
            }
        } else {
            Counter {
                prev: 0,
                cur: 0,
                tick: k,
                ..self
            }
        }
    }

    /// The window and offset the state acts at: the reading's, or the start of the state's own
    /// window if the clock reads an earlier one (a clock that steps backwards is no time passing,
    /// and the previous window then weighs fully: never more lenient).
    #[inline]
    pub const fn when(self, k: u64, into: u64) -> (u64, u64) {
        if k < self.tick {
            (self.tick, 0)
        } else {
            (k, into)
        }
    }

    /// `estimate · W` for `extra` more permits, `into` ns into the current window.
    #[inline]
    const fn weighted(self, into: u64, extra: u32, s: Shape) -> u128 {
        let into = if into > s.window { s.window } else { into };
        self.prev as u128 * (s.window - into) as u128
            + (self.cur as u128 + extra as u128) * s.window as u128
    }

    /// Whether `extra` more permits fit `into` ns into the current window: `weighted(into,
    /// extra) ≤ limit · W`. On a 64-bit CPU, that comparison itself (three products, one
    /// instruction each); elsewhere [`fits_by_room`](Self::fits_by_room).
    #[inline]
    const fn fits(self, into: u64, extra: u32, s: Shape) -> bool {
        #[cfg(target_pointer_width = "64")]
        {
            self.weighted(into, extra, s) <= s.limit as u128 * s.window as u128
        }
        #[cfg(not(target_pointer_width = "64"))]
        {
            self.fits_by_room(into, extra, s)
        }
    }

    /// [`fits`](Self::fits) as `cur + extra ≤ limit` and `prev · (W - into) ≤ (limit - cur -
    /// extra) · W`: two products of 96 bits instead of three of 128 (each several multiplies on
    /// a 32-bit CPU).
    #[cfg_attr(target_pointer_width = "64", allow(dead_code))]
    #[inline]
    const fn fits_by_room(self, into: u64, extra: u32, s: Shape) -> bool {
        let into = if into > s.window { s.window } else { into };
        let taken = self.cur as u64 + extra as u64;
        taken <= s.limit as u64
            && mul_u32_u64(self.prev, s.window - into)
                <= mul_u32_u64((s.limit as u64 - taken) as u32, s.window)
    }

    /// Takes `n` permits `into` ns into window `k` (`n <= limit` is checked by the caller). A
    /// probe (`n == 0`) succeeds if one permit would, and changes nothing. Unless `barge`, a
    /// request (not a probe) is refused while waiters are queued.
    #[inline]
    pub const fn try_take(
        self,
        k: u64,
        into: u64,
        n: u32,
        s: Shape,
        barge: bool,
    ) -> Result<Counter, Denied> {
        if self.closed {
            return Err(Denied::Closed);
        }
        let (k, into) = self.when(k, into);
        let now = self.at(k);
        let want = if n == 0 { 1 } else { n };
        if (self.waiters && !barge && n > 0) || !now.fits(into, want, s) {
            return Err(Denied::Exhausted);
        }
        if n == 0 {
            return Ok(self);
        }
        Ok(Counter {
            cur: now.cur + n,
            ..now
        })
    }

    /// Takes `n` more permits `into` ns into window `k` for a lease settled above its
    /// estimate: at once, past any waiter, closed or not, counted in the current window even
    /// past the limit — into **debt** — as long as the estimate then is at most `limit +
    /// bound`. `None` (and nothing taken) past that. The estimate of a counter in debt decays
    /// as the window slides (the count weighs less once it is the previous window's), and
    /// requests are refused until it is below the limit by what they ask. The caller keeps
    /// `limit + bound` within `u32::MAX` (the count is at most the estimate).
    #[inline]
    pub const fn take_debt(
        self,
        k: u64,
        into: u64,
        n: u32,
        s: Shape,
        bound: u32,
    ) -> Option<Counter> {
        let (k, into) = self.when(k, into);
        let now = self.at(k);
        let past = Shape {
            limit: s.limit + bound,
            window: s.window,
        };
        if !now.fits(into, n, past) {
            return None;
        }
        Some(Counter {
            cur: now.cur + n,
            ..now
        })
    }

    /// Permits that fit now (the room under the limit, rounded down).
    pub const fn available(self, k: u64, into: u64, s: Shape) -> u64 {
        let (k, into) = self.when(k, into);
        let used = self.at(k).weighted(into, 0, s);
        let cap = s.limit as u128 * s.window as u128;
        if used >= cap {
            0
        } else {
            ((cap - used) / s.window as u128) as u64
        }
    }

    /// Nanoseconds from `into` ns into window `k` until `n` permits (`1 ≤ n ≤ limit`) fit, if
    /// nothing else is taken meanwhile. Exact: the first nanosecond at which they fit.
    /// Counted from the clock's reading, even when it is behind the state's window.
    pub const fn wait(self, k: u64, into: u64, n: u32, s: Shape) -> u128 {
        let behind = if k < self.tick {
            (self.tick - k) as u128 * s.window as u128 - into as u128
        } else {
            0
        };
        behind + self.wait_from(k, into, n, s)
    }

    /// [`wait`](Self::wait) saturating at `u64::MAX` ns, which is all a rejection keeps
    /// ([`Nanos::saturating_u64`](crate::nanos::Nanos)): the same answer up to there, with
    /// 64-bit sums.
    pub const fn wait_u64(self, k: u64, into: u64, n: u32, s: Shape) -> u64 {
        let behind = if k < self.tick {
            let ns = (self.tick - k) as u128 * s.window as u128 - into as u128;
            if ns > u64::MAX as u128 {
                u64::MAX
            } else {
                ns as u64
            }
        } else {
            0
        };
        let (k, into) = self.when(k, into);
        let into = if into > s.window { s.window } else { into };
        behind.saturating_add(self.at(k).wait_in_own_u64(into, n, s))
    }

    const fn wait_from(self, k: u64, into: u64, n: u32, s: Shape) -> u128 {
        let (k, into) = self.when(k, into);
        let into = if into > s.window { s.window } else { into };
        self.at(k).wait_in_own(into, n, s)
    }

    /// [`wait`](Self::wait) seen from `into <= window` ns into this state's own window (the
    /// quick path's denial: no slide to compute, no reading behind the state).
    #[inline]
    pub const fn wait_in_own(self, into: u64, n: u32, s: Shape) -> u128 {
        match self.first_fit_in_own(n, s) {
            (true, x) => x.saturating_sub(into) as u128,
            (false, x) => (s.window - into) as u128 + x as u128,
        }
    }

    /// [`wait_in_own`](Self::wait_in_own) saturating at `u64::MAX` ns, which is all a
    /// rejection keeps: the same answer with no 128-bit sum.
    #[inline]
    pub const fn wait_in_own_u64(self, into: u64, n: u32, s: Shape) -> u64 {
        match self.first_fit_in_own(n, s) {
            (true, x) => x.saturating_sub(into),
            (false, x) => (s.window - into).saturating_add(x),
        }
    }

    /// When `n` more permits (`1 ≤ n ≤ limit`) first fit, if nothing else is taken: `(true, x)`
    /// at `x` ns into this state's own window, or `(false, x)` at `x` ns into the next, where
    /// `cur` has become `prev` (`x ≤ W`). Out of line on a 32-bit target, where the quick path
    /// and the rejection would otherwise each carry a copy of its wide arithmetic.
    #[cfg_attr(target_pointer_width = "64", inline)]
    #[cfg_attr(not(target_pointer_width = "64"), inline(never))]
    const fn first_fit_in_own(self, n: u32, s: Shape) -> (bool, u64) {
        // Within this window when `cur + n ≤ limit`: the first x with prev · (W - x) ≤
        // (limit - cur - n) · W. Otherwise in the next: cur · (W - x) ≤ (limit - n) · W.
        let this = self.cur as u64 + n as u64 <= s.limit as u64;
        let (spare, count) = if this {
            (s.limit - self.cur - n, self.prev)
        } else {
            (s.limit - n, self.cur)
        };
        if count == 0 {
            return (this, 0);
        }
        (
            this,
            first_fit(mul_u32_u64(spare, s.window), count, s.window),
        )
    }

    /// The first window at whose start the estimate is zero (the limiter is idle from then).
    pub const fn free_from(self) -> u64 {
        if self.cur > 0 {
            self.tick.saturating_add(2)
        } else if self.prev > 0 {
            self.tick.saturating_add(1)
        } else {
            0
        }
    }

    /// Takes `n` permits for a queued waiter served `into` ns into window `k`, as of the first
    /// window at or before `k` (and not before the state's own) in which they fit: counted
    /// there, so that a queue served late leaves the state a queue served at every instant
    /// would. Returns the new state and the window of the grant (its stamp). `n <= limit` is
    /// the caller's to check; a probe (`n == 0`) needs one permit and takes nothing.
    pub const fn take_when_fits(
        self,
        k: u64,
        into: u64,
        n: u32,
        s: Shape,
    ) -> Result<(Counter, u64), Denied> {
        if self.closed {
            return Err(Denied::Closed);
        }
        let (k, into) = self.when(k, into);
        let want = if n == 0 { 1 } else { n };
        // The state's own window, the next, then any later one (where both counts have rolled
        // away, so the earliest of them, two on): the first whose last nanosecond — or `into`,
        // for the window of now — fits.
        let mut step = 0;
        while step < 3 {
            let j = self.tick + step;
            if j > k {
                break;
            }
            let last = if j == k { into } else { s.window - 1 };
            let at = self.at(j);
            if at.fits(last, want, s) {
                let taken = if n == 0 {
                    self
                } else {
                    Counter {
                        cur: at.cur + n,
                        ..at
                    }
                };
                return Ok((taken, j));
            }
            step += 1;
        }
        Err(Denied::Exhausted)
    }

    /// Gives back `n` permits granted in window `stamp` to a waiter that went away without
    /// them, seen at window `k`: they leave the count they were added to, if it still counts.
    pub const fn give_back(self, k: u64, stamp: u64, n: u32) -> Counter {
        let now = self.at(k);
        if stamp == now.tick {
            Counter {
                cur: now.cur.saturating_sub(n),
                ..now
            }
        } else if stamp + 1 == now.tick {
            Counter {
                prev: now.prev.saturating_sub(n),
                ..now
            }
        } else {
            now
        }
    }

    /// The same state with the waiters flag set or cleared.
    pub const fn with_waiters(self, waiters: bool) -> Counter {
        Counter { waiters, ..self }
    }

    /// Nanoseconds from `into` ns into window `k` until the last of `requests` is granted, each
    /// (in order, at most `limit`) as soon as it fits, counted in the window it is granted in.
    pub fn wait_behind(
        self,
        k: u64,
        into: u64,
        requests: impl IntoIterator<Item = u32>,
        s: Shape,
    ) -> u128 {
        let w = u128::from(s.window);
        let start = u128::from(k) * w + u128::from(into);
        let mut at = start;
        let mut c = self;
        for n in requests {
            let n = n.clamp(1, s.limit);
            let (kk, ii) = ((at / w) as u64, (at % w) as u64);
            at += c.wait(kk, ii, n, s);
            let (kk, ii) = ((at / w) as u64, (at % w) as u64);
            let (kk, _) = c.when(kk, ii);
            let now = c.at(kk);
            c = Counter {
                cur: now.cur.saturating_add(n),
                ..now
            };
        }
        at - start
    }

    /// Nanoseconds from `into` ns into window `k` until time alone lets `total` permits be
    /// granted, in requests of at most the limit. Past two whole-limit requests the walk is
    /// periodic — a request of the whole limit fits only when both counts are empty, at the
    /// start of the window two after the previous one — so it is bounded for any `total`.
    pub fn wait_for(self, k: u64, into: u64, total: u64, s: Shape) -> u128 {
        let limit = u64::from(s.limit);
        if total <= limit {
            return self.wait_behind(k, into, core::iter::once(total as u32), s);
        }
        let whole = (total - 1) / limit;
        let last = (total - whole * limit) as u32;
        let walked = whole.min(2);
        let requests = core::iter::repeat_n(s.limit, walked as usize).chain(core::iter::once(last));
        let extra = u128::from(whole - walked) * 2 * u128::from(s.window);
        self.wait_behind(k, into, requests, s).saturating_add(extra)
    }

    /// The estimate now, rounded up (test helper).
    #[cfg(test)]
    fn used_now(self) -> u32 {
        self.cur + self.prev
    }

    /// The closed state.
    pub const fn close(self) -> Counter {
        Counter {
            closed: true,
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000_000_000;
    const S: Shape = Shape {
        limit: 10,
        window: MIN,
    };

    #[test]
    fn pack_round_trips() {
        for c in [
            Counter::FRESH,
            Counter {
                cur: u32::MAX,
                prev: u32::MAX,
                tick: (1 << 62) - 1,
                waiters: true,
                closed: true,
            },
            Counter {
                cur: 3,
                prev: 9,
                tick: 12345,
                waiters: false,
                closed: false,
            },
        ] {
            assert_eq!(Counter::unpack(c.pack()), c);
        }
    }

    /// Article 001: 9 requests in [00:00, 00:01), 5 in [00:01, 00:02); at 01:15 the estimate is
    /// 9 · 0.75 + 5 = 11.75 > 10, so the request is rejected.
    #[test]
    fn article_001_worked_example() {
        let c = Counter {
            cur: 5,
            prev: 9,
            tick: 1,
            waiters: false,
            closed: false,
        };
        let quarter = MIN / 4;
        assert_eq!(c.try_take(1, quarter, 1, S, false), Err(Denied::Exhausted));
        assert_eq!(c.weighted(quarter, 0, S), 1175 * MIN as u128 / 100);
        // 9 · (1 - x) + 6 ≤ 10 once x ≥ 4/9 of the window.
        let wait = c.wait(1, quarter, 1, S);
        let x = MIN - (4 * MIN / 9);
        assert_eq!(wait, u128::from(x - quarter));
        let wait = wait as u64;
        assert!(c.try_take(1, quarter + wait, 1, S, false).is_ok());
        assert!(c.try_take(1, quarter + wait - 1, 1, S, false).is_err());
    }

    #[test]
    fn windows_roll_and_gaps_empty() {
        let c = Counter::FRESH.try_take(0, 0, 10, S, false).unwrap();
        assert_eq!(c.try_take(0, 5, 1, S, false), Err(Denied::Exhausted));
        // Next window: the 10 weigh (W - into)/W.
        assert_eq!(c.available(1, 0, S), 0);
        assert_eq!(c.available(1, MIN / 2, S), 5);
        assert_eq!(
            c.at(1),
            Counter {
                cur: 0,
                prev: 10,
                tick: 1,
                waiters: false,
                closed: false
            }
        );
        assert_eq!(
            c.at(7),
            Counter {
                cur: 0,
                prev: 0,
                tick: 7,
                waiters: false,
                closed: false
            }
        );
        assert_eq!(c.free_from(), 2);
        // Backwards: nothing changes, and the state acts at the start of its own window.
        let later = c.at(5);
        assert_eq!(later.at(3), later);
        let late = Counter::FRESH.try_take(1, 0, 10, S, false).unwrap();
        assert_eq!(late.when(0, 123), (1, 0));
        assert_eq!(late.available(0, MIN / 2, S), 0);
        // Its wait counts from the reading: half a window back to window 1, then window 1's 10
        // weigh until the end of window 2.
        assert_eq!(
            late.wait(0, MIN / 2, 1, S),
            u128::from(MIN / 2 + MIN + MIN / 10)
        );
    }

    #[test]
    fn wait_crosses_into_the_next_window() {
        let c = Counter::FRESH.try_take(0, 0, 8, S, false).unwrap();
        // 3 more do not fit in this window at all; next window: 8 · (W - x) ≤ 7 · W.
        let wait = c.wait(0, 100, 3, S);
        let x = MIN - (7 * MIN / 8);
        assert_eq!(wait, u128::from(MIN - 100 + x));
        assert!(c.try_take(1, x, 3, S, false).is_ok());
        assert!(c.try_take(1, x - 1, 3, S, false).is_err());
    }

    #[test]
    fn probes_and_close() {
        let c = Counter::FRESH.try_take(0, 0, 10, S, false).unwrap();
        assert_eq!(c.try_take(0, 0, 0, S, false), Err(Denied::Exhausted));
        assert_eq!(
            Counter::FRESH.try_take(0, 0, 0, S, false),
            Ok(Counter::FRESH)
        );
        assert_eq!(
            Counter::FRESH.close().try_take(0, 0, 1, S, false),
            Err(Denied::Closed)
        );
    }

    #[test]
    fn extremes() {
        let s = Shape {
            limit: u32::MAX,
            window: u64::MAX,
        };
        let c = Counter::FRESH.try_take(0, 0, u32::MAX, s, false).unwrap();
        assert_eq!(c.available(0, u64::MAX, s), 0);
        assert_eq!(
            c.wait(0, u64::MAX, 1, s),
            u128::from(u64::MAX.div_ceil(u64::from(u32::MAX)))
        );
        assert_eq!(c.wait(0, 0, u32::MAX, s), 2 * u128::from(u64::MAX));
        // The shortest window (2 ns) at the clock's horizon: its tick still fits 62 bits.
        let one = Shape {
            limit: 1,
            window: 2,
        };
        let c = Counter::FRESH
            .try_take(u64::MAX >> 2, 0, 1, one, false)
            .unwrap();
        assert_eq!(Counter::unpack(c.pack()), c);
    }

    #[test]
    fn the_waiters_flag_holds_back_newcomers_but_not_probes_or_bargers() {
        let c = Counter::FRESH.with_waiters(true);
        assert_eq!(c.try_take(0, 0, 1, S, false), Err(Denied::Exhausted));
        assert_eq!(c.try_take(0, 0, 0, S, false), Ok(c));
        assert_eq!(c.try_take(0, 0, 1, S, true).unwrap().cur, 1);
        assert_eq!(Counter::unpack(c.pack()), c);
    }

    /// A waiter that first fit in an earlier window is counted there: 10 taken in window 0;
    /// 5 more fit in window 1 once `10 · (W - x) + 5 · W ≤ 10 · W`, i.e. from x = W/2 on.
    #[test]
    fn a_waiter_is_counted_in_the_window_it_first_fit() {
        let full = Counter::FRESH.try_take(0, 0, 10, S, false).unwrap();
        // Served in window 1 before the middle: not yet.
        assert_eq!(
            full.take_when_fits(1, MIN / 2 - 1, 5, S),
            Err(Denied::Exhausted)
        );
        let (c, at) = full.take_when_fits(1, MIN / 2, 5, S).unwrap();
        assert_eq!((at, c.cur, c.prev, c.tick), (1, 5, 10, 1));
        // Served late, in window 2: it fit in window 1, and is counted there (so in window 2 it
        // weighs as the previous window's, not as the current one's).
        let (late, at) = full.take_when_fits(2, 0, 5, S).unwrap();
        assert_eq!((at, late.cur, late.prev, late.tick), (1, 5, 10, 1));
        // Served much later: counted in window 1 all the same, which has rolled away by now.
        let (later, at) = full.take_when_fits(9, 7, 5, S).unwrap();
        assert_eq!((at, later.at(9).used_now()), (1, 0));
        // A whole limit fits only when both counts are empty: two windows on.
        let (c, at) = full.take_when_fits(5, 0, 10, S).unwrap();
        assert_eq!((at, c.cur, c.prev), (2, 10, 0));
        assert_eq!(full.close().take_when_fits(5, 0, 1, S), Err(Denied::Closed));
        // A probe takes nothing.
        assert_eq!(full.take_when_fits(1, MIN / 2, 0, S), Ok((full, 1)));
    }

    #[test]
    fn serving_in_order_matches_serving_at_every_instant() {
        // Three waiters of 4 behind a full window, served at once much later, or each at the
        // first nanosecond it fits: the same state and the same stamps.
        let full = Counter::FRESH.try_take(0, 0, 10, S, false).unwrap();
        let mut late = full;
        let mut stamps = [0; 3];
        for st in &mut stamps {
            let (c, at) = late.take_when_fits(7, 0, 4, S).unwrap();
            late = c;
            *st = at;
        }
        let mut each = full;
        let mut at = 0u128;
        for (i, st) in stamps.iter().enumerate() {
            at += each.wait(
                (at / u128::from(MIN)) as u64,
                (at % u128::from(MIN)) as u64,
                4,
                S,
            );
            let (k, into) = ((at / u128::from(MIN)) as u64, (at % u128::from(MIN)) as u64);
            let (c, j) = each.take_when_fits(k, into, 4, S).unwrap();
            assert_eq!(j, *st, "waiter {i}");
            each = c;
        }
        assert_eq!(each, late);
        assert_eq!(full.wait_behind(0, 0, [4, 4, 4], S), at);
    }

    #[test]
    fn give_back_undoes_a_grant_while_it_counts() {
        let c = Counter::FRESH.try_take(3, 0, 6, S, false).unwrap();
        assert_eq!(c.give_back(3, 3, 6).cur, 0);
        let next = c.give_back(4, 3, 2);
        assert_eq!((next.cur, next.prev, next.tick), (0, 4, 4));
        assert_eq!(c.give_back(9, 3, 6), c.at(9));
        // A stamp of another window changes nothing but the roll.
        assert_eq!(c.give_back(3, 2, 6), c);
    }

    #[test]
    fn wait_for_many_permits_is_periodic_past_two_whole_limits() {
        let c = Counter::FRESH;
        // 10 now, 10 at the start of window 2, 10 at window 4, then 3 in window 5 at 3/10 W.
        let walked = c.wait_behind(0, 0, [10, 10, 10, 3], S);
        assert_eq!(c.wait_for(0, 0, 33, S), walked);
        assert_eq!(walked, u128::from(5 * MIN + 3 * MIN / 10));
        let walked = c.wait_behind(0, 0, [10, 10, 10, 10, 10, 10, 1], S);
        assert_eq!(c.wait_for(0, 0, 61, S), walked);
        assert_eq!(c.wait_for(0, 0, 7, S), 0);
    }

    #[test]
    fn the_64_bit_division_agrees_with_the_128_bit_one() {
        for a in [
            0u128,
            1,
            7,
            u64::MAX as u128,
            (u64::MAX as u128) + 1,
            u128::MAX >> 30,
        ] {
            for b in [1u32, 3, 1 << 20, u32::MAX] {
                assert_eq!(div(a, b), a / u128::from(b), "{a} / {b}");
            }
        }
    }

    /// Edge values of a 32-bit divisor, a dividend and a window.
    fn edges_u32() -> Vec<u32> {
        let mut v = vec![
            1,
            2,
            3,
            7,
            10,
            0xFFFF,
            0x1_0000,
            0x1_0001,
            0x7FFF_FFFF,
            0x8000_0000,
        ];
        v.extend([
            0x8000_0001,
            0xFFFF_0000,
            0xFFFF_FFFE,
            u32::MAX,
            1_000_000_007,
        ]);
        v
    }

    /// A deterministic stream of pseudo-random words (xorshift).
    fn words(mut x: u64) -> impl Iterator<Item = u64> {
        core::iter::from_fn(move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            Some(x)
        })
    }

    #[test]
    fn a_digit_step_is_the_64_bit_division() {
        let lows = [
            0u32,
            1,
            0xFFFF,
            0x1_0000,
            0x8000_0000,
            u32::MAX - 1,
            u32::MAX,
        ];
        for d in edges_u32() {
            let his = [0, 1, d / 2, d.saturating_sub(2), d - 1];
            for (&hi, &lo) in his.iter().flat_map(|h| lows.iter().map(move |l| (h, l))) {
                if hi >= d {
                    continue;
                }
                let a = u64::from(hi) << 32 | u64::from(lo);
                let want = (a / u64::from(d), a % u64::from(d));
                let (q, r) = div_digit(hi, lo, d);
                assert_eq!((u64::from(q), u64::from(r)), want, "{a} / {d}");
            }
        }
        for x in words(0x9E37_79B9_7F4A_7C15).take(200_000) {
            let d = ((x >> 32) as u32 >> (x & 31)).max(1);
            let a = x.wrapping_mul(0x2545_F491_4F6C_DD1D) % (u64::from(d) << 32);
            let (q, r) = div_digit((a >> 32) as u32, a as u32, d);
            assert_eq!(
                (u64::from(q), u64::from(r)),
                (a / u64::from(d), a % u64::from(d))
            );
        }
    }

    #[test]
    fn the_long_division_is_the_128_bit_one() {
        for d in edges_u32() {
            let top = u128::from(d) << 64; // the dividends it takes lie below
            for a in [
                0u128,
                1,
                u128::from(u32::MAX),
                u128::from(u64::MAX),
                1 << 64,
                (1 << 64) + 1,
                top / 2,
                top - u128::from(d),
                top - 1,
            ] {
                if a < top {
                    let want = a / u128::from(d);
                    assert_eq!(u128::from(div_below_2_64(a, d)), want, "{a} / {d}");
                }
            }
        }
    }

    /// Both forms of [`first_fit`] agree with the plain `u128` operators, around every edge: a
    /// room of 0, exactly `d · w`, just below and above it, up to the largest room a state
    /// reaches (`limit · W` for `u32::MAX` per a window near 2^64).
    #[test]
    fn first_fit_is_w_minus_the_quotient_capped_at_w() {
        let windows = [
            1u64,
            2,
            1_000_000_000,
            60_000_000_000,
            u64::from(u32::MAX),
            1 << 32,
        ];
        let windows = windows.into_iter().chain([1 << 62, u64::MAX - 1, u64::MAX]);
        for w in windows {
            for d in edges_u32() {
                let full = u128::from(d) * u128::from(w);
                let cap = u128::from(u32::MAX) * u128::from(w);
                let mut rooms = vec![
                    0u128,
                    1,
                    u128::from(d) - 1,
                    u128::from(d),
                    u128::from(u64::MAX),
                ];
                rooms.extend([1 << 64, full - 1, full, full + 1, full / 3, cap, cap - 1]);
                for room in rooms {
                    let want = w - (room / u128::from(d)).min(u128::from(w)) as u64;
                    let at = (room, d, w);
                    assert_eq!(first_fit_by_division(room, d, w), want, "{at:?}");
                    assert_eq!(first_fit_by_digits(room, d, w), want, "{at:?}");
                }
            }
        }
        for x in words(12345).take(100_000) {
            let d = ((x >> 32) as u32 >> (x & 31)).max(1);
            let w = x.rotate_left(17) >> (x >> 58);
            let w = w.max(1);
            let room = u128::from(x.wrapping_mul(31)) * u128::from(d >> (x & 7)) + u128::from(x);
            let want = w - (room / u128::from(d)).min(u128::from(w)) as u64;
            assert_eq!(first_fit_by_digits(room, d, w), want, "{room} {d} {w}");
            assert_eq!(first_fit_by_division(room, d, w), want, "{room} {d} {w}");
        }
    }

    /// [`Counter::fits`] is the estimate's plain comparison, `weighted ≤ limit · W`, for every
    /// small count, offset and limit, and at the extremes.
    #[test]
    fn fits_is_the_weighted_comparison() {
        let mut shapes: Vec<Shape> = (1..=6)
            .flat_map(|limit| (1..=5).map(move |window| Shape { limit, window }))
            .collect();
        shapes.extend([
            S,
            Shape {
                limit: u32::MAX,
                window: u64::MAX,
            },
        ]);
        shapes.push(Shape {
            limit: 1,
            window: u64::MAX,
        });
        shapes.push(Shape {
            limit: u32::MAX,
            window: 1,
        });
        for s in shapes {
            let counts = [
                0,
                1,
                2,
                3,
                5,
                7,
                s.limit - 1,
                s.limit,
                s.limit.saturating_add(1),
                u32::MAX,
            ];
            let intos = [
                0,
                1,
                2,
                3,
                4,
                s.window / 2,
                s.window - 1,
                s.window,
                u64::MAX,
            ];
            for (cur, prev) in counts
                .iter()
                .flat_map(|c| counts.iter().map(move |p| (*c, *p)))
            {
                let c = Counter {
                    cur,
                    prev,
                    ..Counter::FRESH
                };
                for into in intos {
                    for extra in [0, 1, 2, 3, s.limit, u32::MAX] {
                        let want = c.weighted(into, extra, s)
                            <= u128::from(s.limit) * u128::from(s.window);
                        let at = (c, into, extra, s);
                        assert_eq!(c.fits(into, extra, s), want, "{at:?}");
                        assert_eq!(c.fits_by_room(into, extra, s), want, "{at:?}");
                    }
                }
            }
        }
    }

    /// [`Counter::wait_u64`] is [`Counter::wait`] saturated at `u64::MAX`: for every small
    /// state, reading and request, and at the extremes (a window of `u64::MAX`, whose waits pass
    /// 2^64).
    #[test]
    fn wait_u64_is_wait_saturated() {
        let shapes = [
            S,
            Shape {
                limit: 3,
                window: 7,
            },
            Shape {
                limit: 1,
                window: 2,
            },
            Shape {
                limit: u32::MAX,
                window: u64::MAX,
            },
            Shape {
                limit: 5,
                window: u64::MAX,
            },
            Shape {
                limit: 5,
                window: 1 << 62,
            },
        ];
        for s in shapes {
            let counts = [0, 1, 2, 3, s.limit / 2, s.limit - 1, s.limit];
            let intos = [0, 1, 2, s.window / 3, s.window - 1, s.window];
            for (cur, prev) in counts
                .iter()
                .flat_map(|c| counts.iter().map(move |p| (*c, *p)))
            {
                for tick in [0, 1, 2, 5] {
                    let c = Counter {
                        cur,
                        prev,
                        tick,
                        ..Counter::FRESH
                    };
                    for k in [0, 1, 2, 3, 4, 9] {
                        for into in intos {
                            for n in [1, 2, s.limit].into_iter().filter(|&n| n <= s.limit) {
                                let want = c.wait(k, into, n, s).min(u128::from(u64::MAX));
                                let at = (c, k, into, n, s);
                                assert_eq!(u128::from(c.wait_u64(k, into, n, s)), want, "{at:?}");
                                let own = c.wait_in_own(into, n, s).min(u128::from(u64::MAX));
                                assert_eq!(
                                    u128::from(c.wait_in_own_u64(into, n, s)),
                                    own,
                                    "{at:?}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn mul_u32_u64_is_the_128_bit_product() {
        let wides = [
            0u64,
            1,
            2,
            u64::from(u32::MAX),
            1 << 32,
            (1 << 32) + 1,
            1 << 62,
            u64::MAX,
        ];
        for a in edges_u32().into_iter().chain([0]) {
            for b in wides {
                let want = u128::from(a) * u128::from(b);
                assert_eq!(mul_u32_u64(a, b), want, "{a} {b}");
                assert_eq!(mul_u32_u64_by_halves(a, b), want, "{a} {b}");
            }
        }
        for x in words(777).take(100_000) {
            let (a, b) = ((x >> 7) as u32, x.rotate_left(29));
            assert_eq!(mul_u32_u64_by_halves(a, b), u128::from(a) * u128::from(b));
        }
    }

    /// A debit past the limit (issue 38): the count goes past it while the estimate stays
    /// within one limit more; requests wait until the weighted estimate has decayed below the
    /// limit by what they ask, exactly.
    #[test]
    fn a_debit_goes_into_debt_that_the_weighting_decays() {
        let s = Shape {
            limit: 10,
            window: 100,
        };
        let c = Counter::FRESH.try_take(0, 0, 4, s, false).unwrap();
        let c = c.take_debt(0, 50, 12, s, 10).unwrap();
        assert_eq!(c.cur, 16);
        assert_eq!(c.available(0, 50, s), 0);
        // Past the bound (an estimate of 21 > 20): nothing taken.
        assert_eq!(c.take_debt(0, 50, 5, s, 10), None);
        assert_eq!(c.take_debt(0, 50, 4, s, 10).map(|c| c.cur), Some(20));
        // One permit fits once 16 · (100 - x) ≤ 9 · 100: x = 44 into the next window.
        assert_eq!(c.wait(0, 50, 1, s), 50 + 44);
        assert_eq!(c.wait_u64(0, 50, 1, s), 94);
        assert_eq!(c.wait_in_own(50, 1, s), 94);
        assert_eq!(
            c.try_take(1, 43, 1, s, false),
            Err(Denied::Exhausted),
            "still in debt"
        );
        assert_eq!(c.available(1, 44, s), 1);
        assert_eq!(
            c.try_take(1, 44, 1, s, false).map(|c| (c.prev, c.cur)),
            Ok((16, 1))
        );
        // Not idle until the debt's window has rolled away twice.
        assert_eq!(c.free_from(), 2);
        // A waiter behind the debt is granted in the window it first fits in.
        assert_eq!(c.take_when_fits(1, 99, 1, s).map(|(_, at)| at), Ok(1));
        // A bound the caller keeps within the count field: a limit above 2^31.
        let big = Shape {
            limit: u32::MAX - 5,
            window: 100,
        };
        let bound = crate::core_common::window_debt_bound(big.limit, u32::MAX);
        assert_eq!(bound, 5);
        let c = Counter::FRESH
            .try_take(0, 0, big.limit, big, false)
            .unwrap();
        assert_eq!(c.take_debt(0, 0, 6, big, bound), None);
        assert_eq!(
            c.take_debt(0, 0, 5, big, bound).map(|c| c.cur),
            Some(u32::MAX)
        );
    }
}
