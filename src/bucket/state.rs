//! The refilling bucket shared by the token bucket and the fixed window: its packed word and its
//! pure transitions.
//!
//! A fixed window of `L` permits per window `W` is exactly a token bucket of `L` tokens refilled
//! with `L` tokens every `W`: both limiters are this one state machine with different
//! [`Refill`] parameters.
//!
//! Layout of the 128-bit word:
//!
//! | bits    | field     | meaning                                                           |
//! |---------|-----------|-------------------------------------------------------------------|
//! | 0..32   | `tokens`  | tokens in the bucket as of tick `tick`                            |
//! | 32      | `closed`  | `close()` was called                                               |
//! | 33      | `waiters` | the wait queue is not empty (reserved for waiting)                |
//! | 34      | `debt`    | `tokens` are owed, not held (a lease settled above its estimate)  |
//! | 35..64  | —         | zero                                                              |
//! | 64..128 | `tick`    | periods since creation: of the last write, or, for a full bucket, |
//! |         |           | of the moment it became full                                      |
//!
//! Why 128 bits: the tick must be a count wide enough that no idle gap, however long, can alias
//! a recent one, and it must move together with the token count in one compare-and-swap. A
//! narrow tick that wraps would read a bucket idle for exactly 2^k periods as current.
//!
//! **The native 64-bit layout.** No tick can exceed `(2^63 − 1) / period` (a limiter reads its
//! clock as stepped back from 2^63 ns after creation on: see `ticks`), and no token count can
//! exceed the limit (nor can a debt). When both fit beside the three flags —
//! `bits(limit) + bits(max tick) <= 61` (a limit below 2^27 with a 1 s period, 2^17 with 1 ms)
//! — the same state is packed into one `u64` ([`Bucket::pack64`]), losing nothing: every state
//! the transitions can reach round-trips, so no idle gap aliases and the behaviour is identical.
//! Otherwise the limiter keeps the 128-bit word.
//!
//! | bits (64-bit layout)  | field     |
//! |-----------------------|-----------|
//! | 0..shift              | `tokens`  |
//! | shift..61             | `tick`    |
//! | 61                    | `debt`    |
//! | 62                    | `closed`  |
//! | 63                    | `waiters` |

/// How a bucket refills.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refill {
    /// Capacity (token limit, or permits per window): the most a request may take, and the
    /// most a settled lease may owe (the debt bound).
    pub limit: u32,
    /// Tokens added at the start of every tick (the window's whole limit, for a fixed window).
    pub per_tick: u32,
}

/// The unpacked state.
///
/// **Debt** (a lease settled above its estimate: [`Bucket::take_debt`]) is the `debt` flag
/// with `tokens` counting what is owed: nothing is available until refills have repaid it,
/// and a request's wait counts it. Packed, the flag is a bit beside `closed` and `waiters`,
/// so that the quick path, which takes only from a word with no flag set
/// ([`plain64`](Self::plain64)), leaves a bucket in debt to the general path and pays nothing
/// for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// Tokens as of `tick` (owed, if `debt`).
    pub tokens: u32,
    /// Periods since creation (see the module docs).
    pub tick: u64,
    /// `close()` was called.
    pub closed: bool,
    /// The wait queue is not empty.
    pub waiters: bool,
    /// `tokens` are owed, not held.
    pub debt: bool,
}

const TOKENS: u128 = 0xFFFF_FFFF;
const CLOSED: u128 = 1 << 32;
const WAITERS: u128 = 1 << 33;
const DEBT: u128 = 1 << 34;

/// Why a take was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// The limiter is closed.
    Closed,
    /// Not enough tokens; `missing` more are needed (at least 1).
    Exhausted {
        /// Tokens short of the request (1 for a probe of an empty bucket).
        missing: u64,
    },
}

/// `a.div_ceil(b)` for `b > 0`, without a division when `a <= b`: a request short of at most
/// one refill, the common case on the denial path.
#[inline]
const fn ceil_div(a: u64, b: u64) -> u64 {
    if a <= b {
        (a != 0) as u64
    } else {
        a.div_ceil(b)
    }
}

impl Bucket {
    /// A fresh bucket: full since creation.
    pub const fn full(limit: u32) -> Self {
        Self {
            tokens: limit,
            tick: 0,
            closed: false,
            waiters: false,
            debt: false,
        }
    }

    /// Tokens available (none while in debt).
    #[inline(always)]
    pub const fn available(self) -> u32 {
        if self.debt {
            0
        } else {
            self.tokens
        }
    }

    /// Tokens owed (none unless in debt).
    #[inline(always)]
    pub const fn owed(self) -> u32 {
        if self.debt {
            self.tokens
        } else {
            0
        }
    }

    /// Tokens held less tokens owed.
    #[inline(always)]
    const fn balance(self) -> i64 {
        if self.debt {
            -(self.tokens as i64)
        } else {
            self.tokens as i64
        }
    }

    /// The same state with `balance` tokens held (owed, if negative; `|balance| < 2^32`).
    #[inline(always)]
    const fn with_balance(self, balance: i64) -> Bucket {
        Bucket {
            tokens: balance.unsigned_abs() as u32,
            debt: balance < 0,
            ..self
        }
    }

    /// Reads a packed word.
    #[inline]
    pub const fn unpack(w: u128) -> Self {
        Self {
            tokens: (w & TOKENS) as u32,
            tick: (w >> 64) as u64,
            closed: w & CLOSED != 0,
            waiters: w & WAITERS != 0,
            debt: w & DEBT != 0,
        }
    }

    /// Packs into a word.
    #[inline]
    pub const fn pack(self) -> u128 {
        (self.tick as u128) << 64
            | self.tokens as u128
            | if self.closed { CLOSED } else { 0 }
            | if self.waiters { WAITERS } else { 0 }
            | if self.debt { DEBT } else { 0 }
    }

    /// The width of the token field of the 64-bit layout for a bucket of `limit` tokens and
    /// ticks of `period_ns`, if every reachable state fits in it (see the module docs).
    ///
    /// The token field gets every bit the ticks leave free (at most 32), not just the bits of
    /// `limit`, so that the limit can be raised at run time up to `2^shift - 1`
    /// ([`narrow_max_limit`](Self::narrow_max_limit)); a debt is at most the limit, so it
    /// fits the same field.
    ///
    /// Periods above 2^62 ns (146 years) take the 128-bit word: on the 64-bit one, a reading
    /// before a tick's start then lies more than two periods past it (wrapped), which the quick
    /// paths' range check rejects with no test of its own.
    pub const fn narrow_shift(limit: u32, period_ns: u64) -> Option<u32> {
        let period = if period_ns == 0 { 1 } else { period_ns };
        if period > crate::ticks::HORIZON_NS / 2 {
            return None;
        }
        let needed = 32 - limit.leading_zeros();
        let max_tick = (crate::ticks::HORIZON_NS - 1) / period;
        let tick_bits = 64 - max_tick.leading_zeros();
        if needed + tick_bits > 61 {
            return None;
        }
        let free = 61 - tick_bits;
        Some(if free > 32 { 32 } else { free })
    }

    /// The largest limit (and debt) a 64-bit layout with a token field of `shift` bits holds.
    pub const fn narrow_max_limit(shift: u32) -> u32 {
        ((1u64 << shift) - 1) as u32
    }

    /// Reads a 64-bit word packed with a token field of `shift` bits.
    #[inline]
    #[cfg_attr(tollgate_cs_cells, allow(dead_code))] // the state is kept unpacked there
    pub const fn unpack64(w: u64, shift: u32) -> Self {
        Self {
            tokens: (w & ((1 << shift) - 1)) as u32,
            tick: (w & !(7 << 61)) >> shift,
            debt: w & 1 << 61 != 0,
            closed: w & 1 << 62 != 0,
            waiters: w & 1 << 63 != 0,
        }
    }

    /// Packs into a 64-bit word with a token field of `shift` bits (from [`narrow_shift`]
    /// (Self::narrow_shift), so that `tokens < 2^shift` and `tick < 2^(61 - shift)`).
    #[inline]
    #[cfg_attr(tollgate_cs_cells, allow(dead_code))] // the state is kept unpacked there
    pub const fn pack64(self, shift: u32) -> u64 {
        debug_assert!((self.tokens as u64) < 1 << shift && self.tick < 1 << (61 - shift));
        self.tokens as u64
            | self.tick << shift
            | if self.debt { 1 << 61 } else { 0 }
            | if self.closed { 1 << 62 } else { 0 }
            | if self.waiters { 1 << 63 } else { 0 }
    }

    /// The state of a 64-bit word with a token field of `shift` bits, read without unpacking
    /// when it is the common one — no flag set — as `(tick, tokens)`; `None` for a word in
    /// debt, closed or with waiters. In its own tick such a bucket holds exactly `tokens` (no
    /// refill is due before the next tick), and taking `n <= tokens` from it is `w - n`: the
    /// same word [`try_take`](Self::try_take) writes, with the tick unchanged.
    #[cfg(test)]
    pub const fn plain64(w: u64, shift: u32) -> Option<(u64, u32)> {
        Bucket::plain64_masked(w, shift, (1 << shift) - 1)
    }

    /// [`plain64`](Self::plain64) with the token field's mask given (`2^shift - 1`, as the
    /// word keeps it: [`Packed::narrow_masked`](crate::state_cell::Packed::narrow_masked)):
    /// what the quick paths call.
    #[inline(always)]
    pub const fn plain64_masked(w: u64, shift: u32, mask: u64) -> Option<(u64, u32)> {
        if w >> 61 != 0 {
            return None;
        }
        Some((w >> shift, (w & mask) as u32))
    }

    /// [`plain64`](Self::plain64) of the 128-bit layout: `(tick, tokens)` of a word with no
    /// flag set, `None` for a word in debt, closed or with waiters. Taking `n <= tokens` in
    /// its own tick is `w - n`, the word [`try_take`](Self::try_take) writes.
    #[inline(always)]
    #[cfg_attr(tollgate_cs_cells, allow(dead_code))] // the state is kept unpacked there
    pub const fn plain128(w: u128) -> Option<(u64, u32)> {
        if w & (CLOSED | WAITERS | DEBT) != 0 {
            return None;
        }
        Some(((w >> 64) as u64, w as u32))
    }

    /// The bucket as of tick `k`: `per_tick` tokens added for every tick started since `tick`
    /// (repaying a debt first), capped at `limit`. A `k` at or before `tick` changes nothing
    /// (time never runs backwards).
    #[inline]
    pub const fn at(self, k: u64, r: Refill) -> Bucket {
        if !self.debt && self.tokens >= r.limit {
            // Full; tokens above a limit lowered at run time are dropped.
            return Bucket {
                tokens: r.limit,
                ..self
            };
        }
        if k <= self.tick {
            return self;
        }
        // Tokens to full: a debt, then the limit (within `u32::MAX`: the debt bound).
        let missing = self.to_full(r);
        let gained = (k - self.tick) as u128 * r.per_tick as u128;
        if gained >= missing as u128 {
            // Full: remember the tick at which it filled, which dates its idleness. (A 32-bit
            // division: a hardware one on a 32-bit MCU; `per_tick` is at least 1, which the
            // options check, and the compiler is told here so that no panic path is linked.)
            let per_tick = if r.per_tick == 0 { 1 } else { r.per_tick };
            let to_fill = missing.div_ceil(per_tick);
            return Bucket {
                tokens: r.limit,
                tick: self.tick + to_fill as u64,
                debt: false,
                ..self
            };
        }
        // `gained < missing <= u32::MAX`.
        let gained = gained as u32;
        // Held: `tokens + gained`; owed: the debt less the refills, or what they left over.
        // (Not `abs_diff`: 40 bytes more in a firmware image.)
        #[allow(clippy::manual_abs_diff)]
        let tokens = if !self.debt {
            self.tokens + gained
        } else if gained < self.tokens {
            self.tokens - gained
        } else {
            gained - self.tokens
        };
        Bucket {
            tokens,
            tick: k,
            debt: self.debt && gained < self.tokens,
            ..self
        }
    }

    /// Takes `n` tokens at tick `k` (`n <= limit` is checked by the caller). A probe (`n == 0`)
    /// succeeds when the bucket holds any token and returns `self` unchanged, so nothing is
    /// written. While anyone waits in the queue, a newcomer takes nothing unless it may `barge`
    /// (newest-first order, or a queue server taking for the waiter it serves).
    #[inline]
    pub const fn try_take(self, k: u64, n: u32, r: Refill, barge: bool) -> Result<Bucket, Denied> {
        if self.closed {
            return Err(Denied::Closed);
        }
        let now = self.at(k, r);
        if now.debt {
            // Nothing is held: the debt and the request (a probe needs 1) are missing.
            let need = if n == 0 { 1 } else { n };
            return Err(Denied::Exhausted {
                missing: need as u64 + now.tokens as u64,
            });
        }
        if n == 0 {
            return if now.tokens > 0 {
                Ok(self)
            } else {
                Err(Denied::Exhausted { missing: 1 })
            };
        }
        if (self.waiters && !barge) || now.tokens < n {
            let missing = if now.tokens < n { n - now.tokens } else { 1 };
            return Err(Denied::Exhausted {
                missing: missing as u64,
            });
        }
        // Refills count from the current tick: the next one comes at tick k + 1.
        let tick = if k > now.tick { k } else { now.tick };
        Ok(Bucket {
            tokens: now.tokens - n,
            tick,
            ..now
        })
    }

    /// Takes `n` tokens for a queued waiter, served at tick `k`, as of the first tick at which
    /// they fit (at or before `k`): the tokens are counted as of that tick and the refills
    /// after it are kept, so that a queue served late grants exactly what a queue served at
    /// every tick would have, and leaves the same state. Returns the new state and the tick of
    /// the grant. A waiter never fits before the state's own tick, which is at least the tick
    /// it queued at or the tick the waiter ahead of it was granted (it queued because its tokens
    /// were short then, and the state only ever moves forward). `n <= limit` is the caller's
    /// to check; a probe (`n == 0`) needs one token and takes nothing.
    ///
    /// Not for newcomers: one arriving at `k` takes at `k` ([`try_take`](Self::try_take)),
    /// since the refills before it were capped while nobody waited.
    #[inline]
    pub const fn take_when_fits(self, k: u64, n: u32, r: Refill) -> Result<(Bucket, u64), Denied> {
        if self.closed {
            return Err(Denied::Closed);
        }
        let own = self.at(self.tick, r);
        let need = if n == 0 { 1 } else { n };
        let fit = self.tick.saturating_add(own.ticks_to_take(r, need) as u64);
        let now = if k > self.tick { k } else { self.tick };
        if fit > now {
            let then = self.at(now, r);
            return Err(Denied::Exhausted {
                missing: (need as u64 + then.owed() as u64).saturating_sub(then.available() as u64),
            });
        }
        match self.try_take(fit, n, r, true) {
            Ok(next) => Ok((next, fit)),
            Err(d) => Err(d),
        }
    }

    /// Ticks after `k` until the bucket holds `missing` more tokens than it does at `k` (at least
    /// 1 for `missing >= 1`).
    pub const fn ticks_to_gain(missing: u64, r: Refill) -> u64 {
        let t = missing.div_ceil(r.per_tick as u64);
        if t == 0 {
            1
        } else {
            t
        }
    }

    /// Ticks after the tick this state describes until it holds `n` tokens (zero if it does):
    /// [`ticks_to_serve`](Self::ticks_to_serve) of the one request `n`, the newcomer's case,
    /// with no loop and, for a request short of at most one refill, no division. `self` must be
    /// the bucket as of its own tick; `n` is at most `limit`. At most `u32::MAX` (missing tokens
    /// over at least one per tick).
    #[inline]
    pub const fn ticks_to_take(self, r: Refill, n: u32) -> u32 {
        self.ticks_to_take_within(r, if n > r.limit { r.limit } else { n })
    }

    /// [`ticks_to_take`](Self::ticks_to_take) of a request `n <= limit`, as the caller knows
    /// (the quick path's: no clamp). A debt is repaid first.
    #[inline]
    pub const fn ticks_to_take_within(self, r: Refill, n: u32) -> u32 {
        // At most `u32::MAX` (the debt bound keeps a request and the debt within it).
        let (need, held) = if self.debt {
            (n.saturating_add(self.tokens), 0)
        } else {
            (n, self.tokens)
        };
        if held >= need {
            return 0;
        }
        let missing = need - held;
        if missing <= r.per_tick {
            // One refill brings them (the common denial: no division, and no clamp below).
            return 1;
        }
        // `per_tick` is at least 1 (a zero refill is refused by the options; treated as 1
        // here, so that no division-by-zero path is linked).
        let per_tick = if r.per_tick == 0 { 1 } else { r.per_tick };
        missing.div_ceil(per_tick)
    }

    /// Ticks after the tick this state describes until the last of `requests` is granted, when
    /// they are served in order, each as soon as the bucket holds its tokens, and the refills
    /// meanwhile are capped at the limit (a refill that would overflow the bucket is lost, as
    /// one does while a waiter larger than what the bucket holds waits). Zero if all fit now.
    /// `self` must be the bucket as of its own tick (`at` applied); every request is at most
    /// `limit` (larger ones are clamped). A debt is repaid first.
    pub fn ticks_to_serve(self, r: Refill, requests: impl IntoIterator<Item = u32>) -> u64 {
        let limit = i64::from(r.limit);
        let per_tick = u64::from(r.per_tick);
        let mut balance = self.balance();
        let mut ticks = 0u64;
        for n in requests {
            let n = i64::from(n).min(limit);
            if balance < n {
                // `n - balance < 2^33` and `per_tick < 2^32`: no overflow.
                let wait = ceil_div((n - balance) as u64, per_tick);
                ticks = ticks.saturating_add(wait);
                balance = (balance + (wait * per_tick) as i64).min(limit);
            }
            balance -= n;
        }
        ticks
    }

    /// The tick at which this bucket is (or was) full again, if it is full now or will be by
    /// itself. `None` never happens for a valid refill; it is `Some` for every state.
    pub const fn full_at(self, r: Refill) -> u64 {
        if !self.debt && self.tokens >= r.limit {
            self.tick
        } else {
            let missing = self.to_full(r) as u64;
            self.tick
                .saturating_add(missing.div_ceil(r.per_tick as u64))
        }
    }

    /// Tokens short of a full bucket: the debt, then the limit (`u32::MAX` at most: the debt
    /// bound keeps the two within it). For a bucket not full.
    #[inline(always)]
    const fn to_full(self, r: Refill) -> u32 {
        if self.debt {
            r.limit.saturating_add(self.tokens)
        } else {
            r.limit - self.tokens
        }
    }

    /// Gives back `n` tokens that were taken at or before tick `k` but never used (a waiter
    /// granted them and went away, or a lease settled below what it took): the bucket as if
    /// they had never been taken, capped at the limit (a debt is repaid first).
    #[inline]
    pub const fn give_back(self, k: u64, n: u32, r: Refill) -> Bucket {
        let now = self.at(k, r);
        let sum = if now.debt {
            n as i64 - now.tokens as i64
        } else {
            now.tokens as i64 + n as i64
        };
        if sum >= r.limit as i64 {
            let tick = if k > now.tick { k } else { now.tick };
            Bucket {
                tokens: r.limit,
                tick,
                debt: false,
                ..now
            }
        } else {
            now.with_balance(sum)
        }
    }

    /// Takes `n` more tokens at tick `k` for a lease settled above its estimate: past any
    /// waiter, into debt when they are not there, closed or not. `None` if the debt would then
    /// pass its bound, one limit (less where a request and the debt would pass `u32::MAX`
    /// tokens: a limit above 2^31), or what the layout's token field holds: nothing is taken.
    #[inline]
    pub const fn take_debt(self, k: u64, n: u32, r: Refill, field_max: u32) -> Option<Bucket> {
        let now = self.at(k, r);
        let balance = now.balance() - n as i64;
        let room = u32::MAX - r.limit;
        let bound = if r.limit < room { r.limit } else { room };
        let bound = if bound < field_max { bound } else { field_max };
        if balance < -(bound as i64) {
            return None;
        }
        let tick = if k > now.tick { k } else { now.tick };
        Some(Bucket {
            tick,
            ..now.with_balance(balance)
        })
    }

    /// The same state with the waiters flag set or cleared.
    #[inline]
    pub const fn with_waiters(self, waiters: bool) -> Bucket {
        Bucket { waiters, ..self }
    }

    /// The closed state.
    pub const fn close(self) -> Bucket {
        Bucket {
            closed: true,
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TB: Refill = Refill {
        limit: 10,
        per_tick: 2,
    };

    /// The newcomer's shortcut is the one-request case of the queue walk, on both sides of the
    /// one-refill boundary where it skips the division, and for requests clamped to the limit.
    #[test]
    fn ticks_to_take_is_ticks_to_serve_of_one_request() {
        for (limit, per_tick) in [(10u32, 2u32), (10, 10), (7, 3), (1, 1), (u32::MAX, 1)] {
            let r = Refill { limit, per_tick };
            for tokens in [0, 1, 2, 3, limit / 2, limit - 1, limit] {
                for n in [0, 1, 2, 3, 4, 5, limit / 2, limit - 1, limit, u32::MAX] {
                    let b = Bucket {
                        tokens,
                        ..Bucket::full(limit)
                    };
                    assert_eq!(
                        u64::from(b.ticks_to_take(r, n)),
                        b.ticks_to_serve(r, [n]),
                        "limit {limit}, per tick {per_tick}, tokens {tokens}, n {n}"
                    );
                }
            }
        }
    }

    /// The word-level shortcut agrees with the unpacked transition: same tick and tokens read,
    /// `w - n` is what `try_take` packs for a take in the word's own tick, a short bucket is
    /// refused by both, and any flag sends the caller to the general path.
    #[test]
    fn plain64_is_try_take_in_the_words_own_tick() {
        let r = Refill {
            limit: 10,
            per_tick: 3,
        };
        let shift = Bucket::narrow_shift(r.limit, 1_000).unwrap();
        for tick in [0u64, 1, 77, (1 << (61 - shift)) - 1] {
            for tokens in 0..=r.limit {
                let b = Bucket {
                    tokens,
                    tick,
                    closed: false,
                    waiters: false,
                    debt: false,
                };
                let w = b.pack64(shift);
                assert_eq!(Bucket::plain64(w, shift), Some((tick, tokens)));
                for n in 1..=r.limit {
                    let full = b.try_take(tick, n, r, false);
                    if n <= tokens {
                        assert_eq!(full.map(|b| b.pack64(shift)), Ok(w - u64::from(n)));
                    } else {
                        assert!(full.is_err());
                    }
                }
                assert_eq!(Bucket::plain64(b.close().pack64(shift), shift), None);
                assert_eq!(
                    Bucket::plain64(b.with_waiters(true).pack64(shift), shift),
                    None
                );
            }
        }
    }

    #[test]
    fn pack_round_trips() {
        for b in [
            Bucket::full(0),
            Bucket {
                tokens: u32::MAX,
                tick: u64::MAX,
                closed: true,
                waiters: true,
                debt: false,
            },
            Bucket {
                tokens: 3,
                tick: 1 << 40,
                closed: false,
                waiters: true,
                debt: false,
            },
        ] {
            assert_eq!(Bucket::unpack(b.pack()), b);
        }
    }

    #[test]
    fn the_64_bit_layout_round_trips_every_reachable_extreme() {
        // 1 s periods: ticks below 2^34, so a token field of 27 bits (the debt, closed and
        // waiters flags take the top three).
        let sec = 1_000_000_000;
        assert_eq!(Bucket::narrow_shift((1 << 27) - 1, sec), Some(27));
        assert_eq!(Bucket::narrow_max_limit(27), (1 << 27) - 1);
        assert_eq!(Bucket::narrow_shift(1 << 27, sec), None);
        assert_eq!(Bucket::narrow_shift(u32::MAX, 1), None);
        assert_eq!(Bucket::narrow_shift(1, 1), None); // 2^63 ticks of 1 ns
        assert_eq!(Bucket::narrow_shift(1, 4), None);
        assert_eq!(Bucket::narrow_shift(1, 8), Some(1));
        assert_eq!(Bucket::narrow_shift(u32::MAX, 1 << 34), Some(32));
        assert_eq!(Bucket::narrow_max_limit(32), u32::MAX);
        for (limit, period) in [
            (1, 8),
            ((1 << 27) - 1, sec),
            (5, 1_000),
            (u32::MAX, 1 << 34),
        ] {
            let shift = Bucket::narrow_shift(limit, period).unwrap();
            let max_tick = ((1u64 << 63) - 1) / period;
            for b in [
                Bucket::full(limit),
                Bucket {
                    tokens: limit,
                    tick: max_tick,
                    closed: true,
                    waiters: true,
                    debt: false,
                },
                Bucket {
                    tokens: 0,
                    tick: max_tick,
                    closed: false,
                    waiters: true,
                    debt: false,
                },
                Bucket {
                    tokens: limit / 2,
                    tick: max_tick / 3,
                    closed: true,
                    waiters: false,
                    debt: false,
                },
                // In debt of one limit.
                Bucket {
                    tokens: limit,
                    tick: max_tick,
                    closed: false,
                    waiters: true,
                    debt: true,
                },
            ] {
                assert_eq!(
                    Bucket::unpack64(b.pack64(shift), shift),
                    b,
                    "{limit} {period}"
                );
            }
        }
    }

    #[test]
    fn refills_per_whole_tick_and_caps() {
        let b = Bucket {
            tokens: 0,
            tick: 5,
            closed: false,
            waiters: false,
            debt: false,
        };
        assert_eq!(b.at(5, TB).tokens, 0);
        assert_eq!(b.at(6, TB).tokens, 2);
        assert_eq!(b.at(9, TB).tokens, 8);
        let full = b.at(100, TB);
        assert_eq!((full.tokens, full.tick), (10, 10)); // full since tick 10
                                                        // Backwards: nothing changes.
        assert_eq!(b.at(3, TB), b);
    }

    #[test]
    fn take_from_a_full_bucket_restarts_the_tick() {
        let b = Bucket::full(10).try_take(1_000, 1, TB, false).unwrap();
        assert_eq!((b.tokens, b.tick), (9, 1_000));
        assert_eq!(b.at(1_001, TB).tokens, 10);
    }

    #[test]
    fn denial_reports_missing_tokens() {
        let b = Bucket {
            tokens: 3,
            tick: 0,
            closed: false,
            waiters: false,
            debt: false,
        };
        assert_eq!(
            b.try_take(0, 7, TB, false),
            Err(Denied::Exhausted { missing: 4 })
        );
        assert_eq!(Bucket::ticks_to_gain(4, TB), 2);
        assert_eq!(Bucket::ticks_to_gain(5, TB), 3);
        let empty = Bucket { tokens: 0, ..b };
        assert_eq!(
            empty.try_take(0, 0, TB, false),
            Err(Denied::Exhausted { missing: 1 })
        );
        assert_eq!(b.try_take(0, 0, TB, false), Ok(b));
    }

    #[test]
    fn serving_a_queue_caps_each_refill_at_the_limit() {
        let empty = Bucket {
            tokens: 0,
            tick: 0,
            closed: false,
            waiters: false,
            debt: false,
        };
        let r = Refill {
            limit: 10,
            per_tick: 3,
        };
        // One waiter of 10: 4 ticks bring 12, capped at 10; then 1 more tick for the newcomer.
        assert_eq!(empty.ticks_to_serve(r, [10, 1]), 5);
        // Two of 5: served at ticks 2 and 4 (1 token left over at tick 4 covers the newcomer).
        assert_eq!(empty.ticks_to_serve(r, [5, 5, 1]), 4);
        // The uncapped lump estimate would have said ceil(11 / 3) = 4 for the first case.
        assert_eq!(Bucket::full(10).ticks_to_serve(r, [10]), 0);
        // A fixed window: each tick restores the limit; requests are packed in order.
        let fw = Refill {
            limit: 10,
            per_tick: 10,
        };
        assert_eq!(empty.ticks_to_serve(fw, [6, 6, 5]), 3);
        assert_eq!(empty.ticks_to_serve(fw, [6, 4, 5]), 2);
    }

    #[test]
    fn give_back_undoes_a_take() {
        let b = Bucket {
            tokens: 5,
            tick: 3,
            closed: false,
            waiters: false,
            debt: false,
        };
        let taken = b.try_take(3, 4, TB, false).unwrap();
        assert_eq!(taken.give_back(3, 4, TB), b);
        // Later, the refill that happened meanwhile is kept and the cap holds.
        assert_eq!(taken.give_back(5, 4, TB).tokens, 9);
        assert_eq!(taken.give_back(9, 4, TB).tokens, 10);
    }

    #[test]
    fn queue_flag_blocks_only_non_barging_takes() {
        let b = Bucket::full(10).with_waiters(true);
        assert_eq!(
            b.try_take(0, 1, TB, false),
            Err(Denied::Exhausted { missing: 1 })
        );
        assert_eq!(b.try_take(0, 1, TB, true).unwrap().tokens, 9);
    }

    #[test]
    fn huge_gaps_do_not_overflow() {
        let r = Refill {
            limit: u32::MAX,
            per_tick: u32::MAX,
        };
        let b = Bucket {
            tokens: 0,
            tick: 0,
            closed: false,
            waiters: false,
            debt: false,
        };
        assert_eq!(b.at(u64::MAX, r).tokens, u32::MAX);
        let r1 = Refill {
            limit: u32::MAX,
            per_tick: 1,
        };
        let b1 = Bucket {
            tokens: 0,
            tick: u64::MAX - 10,
            closed: false,
            waiters: false,
            debt: false,
        };
        assert_eq!(b1.at(u64::MAX, r1).tokens, 10);
        assert_eq!(b1.full_at(r1), u64::MAX);
    }
}

/// Tests written to kill mutants that survived the suite (see `.ci/mutants.sh`).
#[cfg(test)]
mod mutant_kills {
    use super::*;

    const R: Refill = Refill {
        limit: 10,
        per_tick: 3,
    };

    /// A give-back that leaves the bucket exactly full dates it by the give-back's tick, also
    /// when nothing is given back to a bucket already full (a 0-permit waiter granted and
    /// dropped): `sum >= limit`, not `sum > limit`.
    #[test]
    fn give_back_to_exactly_full_dates_the_bucket_now() {
        let full_since_2 = Bucket {
            tokens: 10,
            tick: 2,
            closed: false,
            waiters: false,
            debt: false,
        };
        let b = full_since_2.give_back(7, 0, R);
        assert_eq!((b.tokens, b.tick), (10, 7));
        // Exactly to the limit from below, at a tick the bucket has not refilled by.
        let seven = Bucket {
            tokens: 7,
            tick: 5,
            ..full_since_2
        };
        let b = seven.give_back(5, 3, R);
        assert_eq!((b.tokens, b.tick), (10, 5));
    }

    /// A partial refill dates the tokens it adds: `at` moves the tick to `k`, or a later `at`
    /// (a replenish that writes its result, then a decision) would count the same ticks twice.
    #[test]
    fn a_partial_refill_moves_the_tick_so_nothing_is_counted_twice() {
        let empty = Bucket {
            tokens: 0,
            ..Bucket::full(10)
        };
        let b = empty.at(2, R);
        assert_eq!((b.tokens, b.tick), (6, 2));
        // One tick later: 3 more, not the first 6 again.
        assert_eq!(b.at(3, R).tokens, 9);
    }

    /// Exactly the tokens held can be taken: `tokens < n` denies, `tokens <= n` would refuse a
    /// request for the whole bucket.
    #[test]
    fn taking_exactly_the_tokens_held_succeeds() {
        let full = Bucket::full(10);
        let b = full.try_take(0, 10, R, false).unwrap();
        assert_eq!(b.tokens, 0);
        assert_eq!(
            b.try_take(0, 1, R, false),
            Err(Denied::Exhausted { missing: 1 })
        );
    }

    /// Held back by the queue with enough tokens, a newcomer is told it misses 1 token (the
    /// queue, not the bucket, holds it back), never 0.
    #[test]
    fn held_back_by_the_queue_a_newcomer_misses_one() {
        let queued = Bucket {
            tokens: 4,
            waiters: true,
            ..Bucket::full(10)
        };
        assert_eq!(
            queued.try_take(0, 4, R, false),
            Err(Denied::Exhausted { missing: 1 })
        );
        assert_eq!(
            queued.try_take(0, 6, R, false),
            Err(Denied::Exhausted { missing: 2 })
        );
    }

    /// Serving a queue: the wait is for the tokens missing beyond those held (`n - tokens`,
    /// per 3 a tick), refills capped at the limit while a big request waits.
    #[test]
    fn ticks_to_serve_counts_only_the_missing_tokens() {
        let two = Bucket {
            tokens: 2,
            ..Bucket::full(10)
        };
        assert_eq!(two.ticks_to_serve(R, [7]), 2); // 5 missing: 2 ticks of 3
        assert_eq!(two.ticks_to_serve(R, [2]), 0);
        // 7 after 2 ticks leaves 1; then 10 needs 9 more: 3 ticks (capped at 10, not beyond).
        assert_eq!(two.ticks_to_serve(R, [7, 10]), 5);
    }

    /// `close` closes: every later take is refused as closed.
    #[test]
    fn close_refuses_every_later_take() {
        let closed = Bucket::full(10).close();
        assert!(closed.closed);
        assert_eq!(closed.try_take(0, 1, R, false), Err(Denied::Closed));
    }
}
