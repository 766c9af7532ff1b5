//! The sliding window's packed header and its pure transitions.
//!
//! The window is `segments` segments long. Permits taken in segment `j` count against the limit
//! until segment `j + segments` begins, then come back. The header holds what a decision needs —
//! the count of the current segment and the sum of the window's earlier segments — so admission
//! is one compare-and-swap. The counts of earlier segments live in a ring of frozen slots, written
//! once when their segment stops being current and read only when the window slides.
//!
//! Layout of the 128-bit header:
//!
//! | bits     | field     | meaning                                                        |
//! |----------|-----------|----------------------------------------------------------------|
//! | 0..32    | `cur`     | permits taken in segment `tick`                                |
//! | 32..64   | `prev`    | permits taken in segments `tick - segments + 1 ..= tick - 1`   |
//! | 64..126  | `tick`    | the current segment, counted from creation (62 bits)           |
//! | 126      | `closed`  | `close()` was called                                           |
//! | 127      | `waiters` | the wait queue is not empty (reserved for waiting)             |
//!
//! **The 64-bit layout**, used when the configuration fits (see [`Header::narrow_width`]): the
//! same fields, `cur` and `prev` in `width` bits each, then the tick in the `62 - 2·width` bits
//! that hold every segment up to the horizon (2^63 ns), then the two flags:
//!
//! | bits               | field     |
//! |--------------------|-----------|
//! | 0..w               | `cur`     |
//! | w..2w              | `prev`    |
//! | 2w..62             | `tick`    |
//! | 62                 | `closed`  |
//! | 63                 | `waiters` |
//!
//! `width` takes every bit the tick leaves, so a limit raised at run time fits up to
//! `2^width - 1`. Both layouts hold the same [`Header`]; the limiter picks one at creation.
//!
//! 62 bits of segments last 146 years even with 1 ns segments; the tick saturates there. Each ring
//! slot is a 128-bit word (segment: 64 bits, count: 64 bits), so a slot can never be mistaken for
//! a later segment with the same index: no wrap-around anywhere.

// On 32-bit MCUs the header is kept unpacked behind a critical section (see
// `state_cell::Packed`): its packed layouts serve only the native atomics.
#![cfg_attr(tollgate_cs_cells, allow(dead_code))]

/// The window's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Permits per window.
    pub limit: u32,
    /// Segments per window (at least 1).
    pub segments: u64,
}

/// The unpacked header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Permits taken in the current segment.
    pub cur: u32,
    /// Permits taken in the window's earlier segments.
    pub prev: u32,
    /// The current segment.
    pub tick: u64,
    /// `close()` was called.
    pub closed: bool,
    /// The wait queue is not empty.
    pub waiters: bool,
}

/// The largest segment index a header holds.
pub const TICK_MAX: u64 = (1 << 62) - 1;
const CLOSED: u128 = 1 << 126;
const WAITERS: u128 = 1 << 127;
/// The flags of the 64-bit layout, and the first value with one set.
const N_CLOSED: u64 = 1 << 62;
const N_WAITERS: u64 = 1 << 63;
const N_FLAGS: u64 = N_CLOSED;
use crate::ticks::HORIZON_NS;

/// Why a take was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// The limiter is closed.
    Closed,
    /// Not enough permits in the window; `missing` must come back first (at least 1).
    Exhausted {
        /// Permits short of the request.
        missing: u64,
    },
}

impl Header {
    /// A fresh window: nothing taken.
    pub const EMPTY: Header = Header {
        cur: 0,
        prev: 0,
        tick: 0,
        closed: false,
        waiters: false,
    };

    /// Reads a packed header.
    #[inline]
    pub const fn unpack(w: u128) -> Self {
        Self {
            cur: w as u32,
            prev: (w >> 32) as u32,
            tick: ((w >> 64) as u64) & TICK_MAX,
            closed: w & CLOSED != 0,
            waiters: w & WAITERS != 0,
        }
    }

    /// Packs into a word.
    #[inline]
    pub const fn pack(self) -> u128 {
        self.cur as u128
            | (self.prev as u128) << 32
            | ((self.tick & TICK_MAX) as u128) << 64
            | if self.closed { CLOSED } else { 0 }
            | if self.waiters { WAITERS } else { 0 }
    }

    /// The header word read without unpacking when it is the common one — no flag set — as
    /// `(tick, used)`; `None` for a closed header or one with waiters. In its own segment such a
    /// header counts exactly `used` against the limit (nothing slides out before the next
    /// segment), and taking `n` that fit is `w + n`: the same header
    /// [`try_take`](Self::try_take) packs, `cur` grown by `n` (which cannot carry out of its 32
    /// bits, as `cur + n <= limit`).
    #[inline(always)]
    pub const fn plain(w: u128) -> Option<(u64, u64)> {
        if w & (CLOSED | WAITERS) != 0 {
            return None;
        }
        Some((
            ((w >> 64) as u64) & TICK_MAX,
            (w as u32) as u64 + ((w >> 32) as u32) as u64,
        ))
    }

    /// The width of `cur` and `prev` in the 64-bit layout for a window of `limit` permits in
    /// segments of `segment_ns`: every bit the tick leaves (the tick needs enough bits for
    /// every segment before the horizon, 2^63 ns), or `None` if `limit` does not fit in them.
    pub const fn narrow_width(limit: u32, segment_ns: u64) -> Option<u32> {
        let max_tick = (HORIZON_NS - 1) / if segment_ns == 0 { 1 } else { segment_ns };
        let tick_bits = u64::BITS - max_tick.leading_zeros();
        let width = 62u32.saturating_sub(tick_bits) / 2;
        if width == 0 || (limit as u64) >= 1 << width {
            None
        } else {
            Some(width)
        }
    }

    /// Reads a header packed in 64 bits with fields of `width` bits.
    #[inline]
    pub const fn unpack64(w: u64, width: u32) -> Self {
        let mask = (1u64 << width) - 1;
        Self {
            cur: (w & mask) as u32,
            prev: ((w >> width) & mask) as u32,
            tick: (w & (N_FLAGS - 1)) >> (2 * width),
            closed: w & N_CLOSED != 0,
            waiters: w & N_WAITERS != 0,
        }
    }

    /// Packs into 64 bits with fields of `width` bits (every field must fit: the limiter's
    /// limit is below `2^width`, and so are `cur` and `prev`; the tick is below the horizon).
    #[inline]
    pub const fn pack64(self, width: u32) -> u64 {
        self.cur as u64
            | (self.prev as u64) << width
            | self.tick << (2 * width)
            | if self.closed { N_CLOSED } else { 0 }
            | if self.waiters { N_WAITERS } else { 0 }
    }

    /// [`plain`](Self::plain) of the 64-bit layout: `(tick, used)` of a header with no flag,
    /// and taking `n` that fit is `w + n`.
    ///
    /// `mask` is the fields' (`2^width - 1`, as the word keeps it:
    /// [`Packed::narrow_masked`](crate::state_cell::Packed::narrow_masked)).
    #[inline(always)]
    pub const fn plain64(w: u64, width: u32, mask: u64) -> Option<(u64, u64)> {
        if w >= N_FLAGS {
            return None;
        }
        Some((w >> (2 * width), (w & mask) + ((w >> width) & mask)))
    }

    /// `prev` of a packed 64-bit header (`mask` as for [`plain64`](Self::plain64)).
    #[inline(always)]
    pub const fn prev64(w: u64, width: u32, mask: u64) -> u32 {
        ((w >> width) & mask) as u32
    }

    /// Permits counted against the limit.
    #[inline]
    pub const fn used(self) -> u64 {
        self.cur as u64 + self.prev as u64
    }

    /// The header as of segment `k`. Segments that left the window give their permits back;
    /// `frozen(j)` is the count of segment `j < self.tick` (read from the ring). A `k` at or
    /// before `tick` changes nothing (time never runs backwards).
    #[inline]
    pub fn at(self, k: u64, s: Shape, frozen: impl Fn(u64) -> u32) -> Header {
        let k = if k > TICK_MAX { TICK_MAX } else { k };
        if k <= self.tick {
            return self;
        }
        if k - self.tick >= s.segments {
            return Header {
                cur: 0,
                prev: 0,
                tick: k,
                ..self
            };
        }
        // Still in the window at k: segments k - segments + 1 ..= k - 1. Those after `tick` were
        // never current (empty); `tick` itself is `cur`; those before are frozen.
        let first = (k + 1).saturating_sub(s.segments);
        let mut prev = self.cur as u64;
        let mut j = first;
        while j < self.tick {
            prev += frozen(j) as u64;
            j += 1;
        }
        Header {
            cur: 0,
            prev: prev as u32,
            tick: k,
            ..self
        }
    }

    /// Takes `n` permits in segment `k` (`n <= limit` is checked by the caller). A probe
    /// (`n == 0`) succeeds when any permit is free and returns `self` unchanged. While anyone
    /// waits in the queue, a newcomer takes nothing unless it may `barge` (newest-first order, or
    /// a queue server taking for the waiter it serves).
    #[inline]
    pub fn try_take(
        self,
        k: u64,
        n: u32,
        s: Shape,
        barge: bool,
        frozen: impl Fn(u64) -> u32,
    ) -> Result<Header, Denied> {
        if self.closed {
            return Err(Denied::Closed);
        }
        let now = self.at(k, s, frozen);
        let free = (s.limit as u64).saturating_sub(now.used());
        if n == 0 {
            return if free > 0 {
                Ok(self)
            } else {
                Err(Denied::Exhausted {
                    missing: now.used() + 1 - s.limit as u64,
                })
            };
        }
        if (self.waiters && !barge) || free < n as u64 {
            // Past the limit by a debt, the debt is missing too.
            let missing = if free < n as u64 {
                now.used() + n as u64 - s.limit as u64
            } else {
                1
            };
            return Err(Denied::Exhausted { missing });
        }
        Ok(Header {
            cur: now.cur + n,
            ..now
        })
    }

    /// Takes `n` permits for a queued waiter served in segment `k`, counted in the first
    /// segment at or before `k` in which they fit: a waiter served late is counted where a
    /// queue served at every instant would have counted it, so its permits leave the window
    /// as early. Returns the new header and that segment. A waiter never fits before the
    /// header's own segment, which is at least the one it queued in or the one the waiter
    /// ahead of it was granted in (it queued because the window was full then, and the header
    /// only moves forward). `n <= limit` is the caller's to check; a probe (`n == 0`) needs one
    /// free permit and takes nothing.
    ///
    /// Not for newcomers: one arriving in segment `k` is counted in `k`
    /// ([`try_take`](Self::try_take)).
    pub fn take_when_fits(
        self,
        k: u64,
        n: u32,
        s: Shape,
        frozen: impl Fn(u64) -> u32,
    ) -> Result<(Header, u64), Denied> {
        if self.closed {
            return Err(Denied::Closed);
        }
        let need = if n == 0 { 1 } else { n as u64 };
        let k = if k > TICK_MAX { TICK_MAX } else { k };
        let last = if k > self.tick { k } else { self.tick };
        // At most `segments` steps: a whole window after `tick`, nothing is counted.
        let mut f = self.tick;
        loop {
            let at = self.at(f, s, &frozen);
            let free = (s.limit as u64).saturating_sub(at.used());
            if free >= need {
                if n == 0 {
                    return Ok((self, f));
                }
                return Ok((
                    Header {
                        cur: at.cur + n,
                        ..at
                    },
                    f,
                ));
            }
            if f >= last {
                return Err(Denied::Exhausted {
                    missing: at.used() + need - s.limit as u64,
                });
            }
            f += 1;
        }
    }

    /// Takes `n` more permits in segment `k` for a lease settled above its estimate: at once,
    /// past any waiter, closed or not, counted in the current segment even past the limit —
    /// into **debt** — as long as the window then counts at most `limit + bound`. `None` (and
    /// nothing taken) past that. A window in debt refuses every request until enough of its
    /// oldest segments have left it for the count to fall below the limit again, the segment
    /// holding the debit last; the caller keeps `limit + bound` within the count fields.
    #[inline]
    pub fn take_debt(
        self,
        k: u64,
        n: u32,
        s: Shape,
        bound: u32,
        frozen: impl Fn(u64) -> u32,
    ) -> Option<Header> {
        let now = self.at(k, s, frozen);
        if now.used() + n as u64 > s.limit as u64 + bound as u64 {
            return None;
        }
        Some(Header {
            cur: now.cur + n,
            ..now
        })
    }

    /// Slides until the last of `requests` is granted, when they are served in order, each as
    /// soon as the window has room for it and each counted in the segment it is granted in.
    /// `window` holds the counts of the window's segments as of the base segment, oldest first
    /// (`window.len()` is the number of segments; the last is the current one); it is used as
    /// scratch. Requests larger than the limit are clamped. Zero if all fit now.
    pub fn slides_to_serve(
        s: Shape,
        window: &mut [u64],
        requests: impl IntoIterator<Item = u32>,
    ) -> u64 {
        let len = window.len();
        if len == 0 {
            return 0;
        }
        let limit = s.limit as u64;
        let mut used: u64 = window.iter().sum();
        let mut oldest = 0usize;
        let mut slides = 0u64;
        for n in requests {
            let n = (n as u64).min(limit);
            // At most `len` slides empty the window, and `n <= limit` then fits.
            while limit.saturating_sub(used) < n {
                used -= window[oldest];
                window[oldest] = 0; // it becomes the new current segment
                oldest = (oldest + 1) % len;
                slides += 1;
            }
            window[(oldest + len - 1) % len] += n;
            used += n;
        }
        slides
    }

    /// Gives back `n` permits taken in segment `j` but never used (a waiter granted them and went
    /// away), if `j` is still the current segment. Once the window has moved on they stay counted
    /// until their segment leaves the window, as if used.
    #[inline]
    pub const fn give_back(self, j: u64, n: u32) -> Header {
        if self.tick == j && self.cur >= n {
            Header {
                cur: self.cur - n,
                ..self
            }
        } else {
            self
        }
    }

    /// The same header with the waiters flag set or cleared.
    #[inline]
    pub const fn with_waiters(self, waiters: bool) -> Header {
        Header { waiters, ..self }
    }

    /// The closed header.
    pub const fn close(self) -> Header {
        Header {
            closed: true,
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-level shortcut agrees with the unpacked transition in the header's own
    /// segment: same tick and count read, `w + n` is what `try_take` packs, a full window is
    /// refused by both, and any flag sends the caller to the general path.
    #[test]
    fn plain_is_try_take_in_the_headers_own_segment() {
        let s = Shape {
            limit: 9,
            segments: 3,
        };
        let never = |_: u64| -> u32 { unreachable!("no slide in the header's own segment") };
        for tick in [0u64, 1, 77, TICK_MAX] {
            for cur in 0..=s.limit {
                for prev in 0..=s.limit - cur {
                    let h = Header {
                        cur,
                        prev,
                        tick,
                        closed: false,
                        waiters: false,
                    };
                    let w = h.pack();
                    assert_eq!(Header::plain(w), Some((tick, u64::from(cur + prev))));
                    for n in 1..=s.limit {
                        let full = h.try_take(tick, n, s, false, never);
                        if cur + prev + n <= s.limit {
                            assert_eq!(full.map(Header::pack), Ok(w + u128::from(n)));
                        } else {
                            assert!(full.is_err());
                        }
                    }
                    let closed = Header { closed: true, ..h };
                    let queued = Header { waiters: true, ..h };
                    assert_eq!(Header::plain(closed.pack()), None);
                    assert_eq!(Header::plain(queued.pack()), None);
                }
            }
        }
    }

    /// The 64-bit layout holds every header the 128-bit one does for a configuration that fits
    /// it, and its shortcut agrees with the unpacked transition.
    #[test]
    fn the_64_bit_layout_round_trips_and_its_shortcut_agrees() {
        let sec = 1_000_000_000u64;
        // 1 s segments: ticks need 34 bits, so 14 bits per count.
        assert_eq!(Header::narrow_width(16_383, sec), Some(14));
        assert_eq!(Header::narrow_width(16_384, sec), None);
        // 1 ns segments: 63 tick bits leave nothing.
        assert_eq!(Header::narrow_width(1, 1), None);
        for (limit, segment_ns) in [
            (1u32, 1_000u64),
            (9, 1 << 20),
            (16_383, sec),
            (1000, 1 << 40),
        ] {
            let width = Header::narrow_width(limit, segment_ns).expect("fits");
            let max_tick = (HORIZON_NS - 1) / segment_ns;
            let s = Shape { limit, segments: 3 };
            let never = |_: u64| -> u32 { unreachable!("no slide in the header's own segment") };
            for tick in [0, 1, 77, max_tick - 1, max_tick] {
                for (cur, prev) in [
                    (0, 0),
                    (limit, 0),
                    (0, limit),
                    (limit / 2, limit - limit / 2),
                    (1, 0),
                ] {
                    for (closed, waiters) in
                        [(false, false), (true, false), (false, true), (true, true)]
                    {
                        let h = Header {
                            cur,
                            prev,
                            tick,
                            closed,
                            waiters,
                        };
                        let w = h.pack64(width);
                        assert_eq!(Header::unpack64(w, width), h);
                        assert_eq!(Header::prev64(w, width, (1 << width) - 1), prev);
                        let plain = Header::plain64(w, width, (1 << width) - 1);
                        if closed || waiters {
                            assert_eq!(plain, None);
                            continue;
                        }
                        assert_eq!(plain, Some((tick, u64::from(cur + prev))));
                        for n in [1, limit] {
                            let full = h.try_take(tick, n, s, false, never);
                            if cur + prev + n <= limit {
                                assert_eq!(full.map(|h| h.pack64(width)), Ok(w + u64::from(n)));
                            } else {
                                assert!(full.is_err());
                            }
                        }
                    }
                }
            }
        }
    }

    const S3: Shape = Shape {
        limit: 10,
        segments: 3,
    };

    fn ring(counts: &[(u64, u32)]) -> impl Fn(u64) -> u32 + '_ {
        move |j| counts.iter().find(|(s, _)| *s == j).map_or(0, |(_, c)| *c)
    }

    #[test]
    fn pack_round_trips() {
        for h in [
            Header::EMPTY,
            Header {
                cur: u32::MAX,
                prev: u32::MAX,
                tick: TICK_MAX,
                closed: true,
                waiters: true,
            },
            Header {
                cur: 1,
                prev: 2,
                tick: 3,
                closed: false,
                waiters: true,
            },
        ] {
            assert_eq!(Header::unpack(h.pack()), h);
        }
    }

    #[test]
    fn design_doc_example_3_4_3_1() {
        // window 3 s in 3 segments, limit 10: counts [3][4][3] then [1] in the 4th second.
        let none = ring(&[]);
        let h = Header::EMPTY.try_take(0, 3, S3, false, &none).unwrap();
        let frozen = ring(&[(0, 3)]);
        let h = h.try_take(1, 4, S3, false, &frozen).unwrap();
        let frozen = ring(&[(0, 3), (1, 4)]);
        let h = h.try_take(2, 3, S3, false, &frozen).unwrap();
        assert_eq!(h.used(), 10);
        assert_eq!(
            h.try_take(2, 1, S3, false, &frozen),
            Err(Denied::Exhausted { missing: 1 })
        );
        let frozen = ring(&[(0, 3), (1, 4), (2, 3)]);
        // 4th second: segment 0 left the window, 3 permits came back; 7 in use.
        let h = h.try_take(3, 1, S3, false, &frozen).unwrap();
        assert_eq!((h.prev, h.cur, h.used()), (7, 1, 8));
    }

    #[test]
    fn long_gap_resets_and_backwards_is_ignored() {
        let h = Header {
            cur: 5,
            prev: 5,
            tick: 10,
            closed: false,
            waiters: false,
        };
        let none = ring(&[]);
        assert_eq!(h.at(13, S3, &none).used(), 0);
        assert_eq!(h.at(u64::MAX, S3, &none).tick, TICK_MAX);
        assert_eq!(h.at(2, S3, &none), h);
    }

    #[test]
    fn serving_a_queue_counts_each_grant_in_its_own_segment() {
        // Counts [3][4][3] (full): 1 permit needs 1 slide.
        assert_eq!(Header::slides_to_serve(S3, &mut [3, 4, 3], [1]), 1);
        // A waiter of 5 ahead: served after 2 slides (7 free), counted in that segment; the
        // newcomer's 4 then waits 1 slide more, for the last [3] to leave (free 2 + 3 = 5).
        assert_eq!(Header::slides_to_serve(S3, &mut [3, 4, 3], [5, 4]), 3);
        // Two full windows ahead: each waits for the previous grant to leave the window.
        assert_eq!(Header::slides_to_serve(S3, &mut [0, 0, 0], [10, 10, 1]), 6);
        assert_eq!(Header::slides_to_serve(S3, &mut [0, 0, 0], [4]), 0);
    }

    #[test]
    fn slides_to_serve_walks_the_oldest_segments_first() {
        // Counts [3][4][3]: the oldest leaves first.
        let w = || [3u64, 4, 3];
        assert_eq!(Header::slides_to_serve(S3, &mut w(), [1]), 1);
        assert_eq!(Header::slides_to_serve(S3, &mut w(), [4]), 2);
        assert_eq!(Header::slides_to_serve(S3, &mut w(), [10]), 3);
    }

    // Mutation testing (issue 9): the lib suite left the probe, the queue rule, the missing
    // count, give-back and the flags of the pure header to the integration tests; these pin them.

    fn with_cur(cur: u32) -> Header {
        Header {
            cur,
            ..Header::EMPTY
        }
    }

    #[test]
    fn a_probe_succeeds_while_any_permit_is_free_and_changes_nothing() {
        let none = ring(&[]);
        assert_eq!(
            with_cur(9).try_take(0, 0, S3, false, &none),
            Ok(with_cur(9))
        );
        assert_eq!(
            with_cur(10).try_take(0, 0, S3, false, &none),
            Err(Denied::Exhausted { missing: 1 })
        );
    }

    #[test]
    fn a_queue_holds_back_newcomers_but_not_bargers_and_missing_counts_the_shortfall() {
        let none = ring(&[]);
        let queued = Header {
            waiters: true,
            ..with_cur(5)
        };
        // 5 free: enough for 5, but the queue holds a newcomer back (missing 1, never 0)...
        assert_eq!(
            queued.try_take(0, 5, S3, false, &none),
            Err(Denied::Exhausted { missing: 1 })
        );
        // ...not a barger (newest-first, or the queue's server).
        assert_eq!(
            queued.try_take(0, 5, S3, true, &none).map(|h| h.cur),
            Ok(10)
        );
        // 3 free, 5 asked: 2 missing.
        assert_eq!(
            with_cur(7).try_take(0, 5, S3, false, &none),
            Err(Denied::Exhausted { missing: 2 })
        );
    }

    #[test]
    fn give_back_only_to_the_current_segment_and_only_what_it_counts() {
        let h = Header {
            tick: 4,
            ..with_cur(6)
        };
        assert_eq!(h.give_back(4, 2).cur, 4);
        assert_eq!(h.give_back(3, 2), h, "the window moved on: stays counted");
        assert_eq!(h.give_back(4, 7), h, "more than counted: nothing");
    }

    #[test]
    fn flags_set_and_close_refuses() {
        assert!(Header::EMPTY.with_waiters(true).waiters);
        assert!(!Header::EMPTY.with_waiters(true).with_waiters(false).waiters);
        let closed = Header::EMPTY.close();
        assert!(closed.closed);
        assert_eq!(
            closed.try_take(0, 1, S3, false, ring(&[])),
            Err(Denied::Closed)
        );
    }
}
