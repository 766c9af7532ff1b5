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
//! | 64..127  | `tick`   | windows since creation (a full count: an idle gap of any length reads as empty) |
//! | 127      | `closed` | `close()` was called                       |

/// The limiter's constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Permits per window, at least 1.
    pub limit: u32,
    /// The window in nanoseconds, at least 1.
    pub window: u64,
}

/// The unpacked state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    /// Permits taken in window `tick`.
    pub cur: u32,
    /// Permits taken in window `tick - 1`.
    pub prev: u32,
    /// Windows since creation.
    pub tick: u64,
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

const COUNT: u128 = 0xFFFF_FFFF;
const TICK: u128 = (1 << 63) - 1;
const CLOSED: u128 = 1 << 127;

impl Counter {
    /// A fresh limiter: nothing taken.
    pub const FRESH: Counter = Counter {
        cur: 0,
        prev: 0,
        tick: 0,
        closed: false,
    };

    /// Reads a packed word.
    #[inline]
    pub const fn unpack(w: u128) -> Self {
        Self {
            cur: (w & COUNT) as u32,
            prev: ((w >> 32) & COUNT) as u32,
            tick: ((w >> 64) & TICK) as u64,
            closed: w & CLOSED != 0,
        }
    }

    /// Packs into a word (a tick past 2^63 - 1 saturates; it cannot occur, since ticks count from
    /// at most 2^63 ns).
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

    /// `estimate · W` for `extra` more permits, `into` ns into the current window.
    #[inline]
    const fn weighted(self, into: u64, extra: u32, s: Shape) -> u128 {
        let into = if into > s.window { s.window } else { into };
        self.prev as u128 * (s.window - into) as u128
            + (self.cur as u128 + extra as u128) * s.window as u128
    }

    /// Takes `n` permits `into` ns into window `k` (`n <= limit` is checked by the caller). A
    /// probe (`n == 0`) succeeds if one permit would, and changes nothing.
    #[inline]
    pub const fn try_take(self, k: u64, into: u64, n: u32, s: Shape) -> Result<Counter, Denied> {
        if self.closed {
            return Err(Denied::Closed);
        }
        let now = self.at(k);
        let want = if n == 0 { 1 } else { n };
        if now.weighted(into, want, s) > s.limit as u128 * s.window as u128 {
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

    /// Permits that fit now (the room under the limit, rounded down).
    pub const fn available(self, k: u64, into: u64, s: Shape) -> u64 {
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
    pub const fn wait(self, k: u64, into: u64, n: u32, s: Shape) -> u128 {
        let now = self.at(k);
        let w = s.window;
        let into = if into > w { w } else { into };
        let cap = s.limit as u128 * w as u128;
        let need = (now.cur as u128 + n as u128) * w as u128;
        if need <= cap {
            // Within this window: the first x with prev · (W - x) ≤ cap - need.
            if now.prev == 0 {
                return 0;
            }
            let room = (cap - need) / now.prev as u128; // W - x ≤ room
            let x = if room >= w as u128 {
                0
            } else {
                w - room as u64
            };
            return x.saturating_sub(into) as u128;
        }
        // In the next window, where `cur` has become `prev`: cur · (W - x) ≤ (limit - n) · W.
        let rest = w - into;
        if now.cur == 0 {
            return rest as u128;
        }
        let room = (s.limit - n) as u128 * w as u128 / now.cur as u128;
        let x = if room >= w as u128 {
            0
        } else {
            w - room as u64
        };
        rest as u128 + x as u128
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
                tick: (1 << 63) - 1,
                closed: true,
            },
            Counter {
                cur: 3,
                prev: 9,
                tick: 12345,
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
            closed: false,
        };
        let quarter = MIN / 4;
        assert_eq!(c.try_take(1, quarter, 1, S), Err(Denied::Exhausted));
        assert_eq!(c.weighted(quarter, 0, S), 1175 * MIN as u128 / 100);
        // 9 · (1 - x) + 6 ≤ 10 once x ≥ 4/9 of the window.
        let wait = c.wait(1, quarter, 1, S);
        let x = MIN - (4 * MIN / 9);
        assert_eq!(wait, u128::from(x - quarter));
        let wait = wait as u64;
        assert!(c.try_take(1, quarter + wait, 1, S).is_ok());
        assert!(c.try_take(1, quarter + wait - 1, 1, S).is_err());
    }

    #[test]
    fn windows_roll_and_gaps_empty() {
        let c = Counter::FRESH.try_take(0, 0, 10, S).unwrap();
        assert_eq!(c.try_take(0, 5, 1, S), Err(Denied::Exhausted));
        // Next window: the 10 weigh (W - into)/W.
        assert_eq!(c.available(1, 0, S), 0);
        assert_eq!(c.available(1, MIN / 2, S), 5);
        assert_eq!(
            c.at(1),
            Counter {
                cur: 0,
                prev: 10,
                tick: 1,
                closed: false
            }
        );
        assert_eq!(
            c.at(7),
            Counter {
                cur: 0,
                prev: 0,
                tick: 7,
                closed: false
            }
        );
        assert_eq!(c.free_from(), 2);
        // Backwards: nothing changes.
        let later = c.at(5);
        assert_eq!(later.at(3), later);
    }

    #[test]
    fn wait_crosses_into_the_next_window() {
        let c = Counter::FRESH.try_take(0, 0, 8, S).unwrap();
        // 3 more do not fit in this window at all; next window: 8 · (W - x) ≤ 7 · W.
        let wait = c.wait(0, 100, 3, S);
        let x = MIN - (7 * MIN / 8);
        assert_eq!(wait, u128::from(MIN - 100 + x));
        assert!(c.try_take(1, x, 3, S).is_ok());
        assert!(c.try_take(1, x - 1, 3, S).is_err());
    }

    #[test]
    fn probes_and_close() {
        let c = Counter::FRESH.try_take(0, 0, 10, S).unwrap();
        assert_eq!(c.try_take(0, 0, 0, S), Err(Denied::Exhausted));
        assert_eq!(Counter::FRESH.try_take(0, 0, 0, S), Ok(Counter::FRESH));
        assert_eq!(
            Counter::FRESH.close().try_take(0, 0, 1, S),
            Err(Denied::Closed)
        );
    }

    #[test]
    fn extremes() {
        let s = Shape {
            limit: u32::MAX,
            window: u64::MAX,
        };
        let c = Counter::FRESH.try_take(0, 0, u32::MAX, s).unwrap();
        assert_eq!(c.available(0, u64::MAX, s), 0);
        assert_eq!(
            c.wait(0, u64::MAX, 1, s),
            u128::from(u64::MAX.div_ceil(u64::from(u32::MAX)))
        );
        assert_eq!(c.wait(0, 0, u32::MAX, s), 2 * u128::from(u64::MAX));
        let one = Shape {
            limit: 1,
            window: 1,
        };
        let c = Counter::FRESH.try_take(u64::MAX >> 1, 0, 1, one).unwrap();
        assert_eq!(Counter::unpack(c.pack()), c);
    }
}
