//! GCRA's packed word and its pure transitions, shared by [`GcraLimiter`](crate::GcraLimiter),
//! [`LeakyBucketMeter`](crate::LeakyBucketMeter) and [`LeakyBucketShaper`](crate::LeakyBucketShaper).
//!
//! The generic cell rate algorithm keeps one number: the *theoretical arrival time* `tat`, the
//! instant at which the limiter would be back to full if nothing else came. Each permit pushes it
//! `interval` nanoseconds later (from `now`, if it lies in the past). A request of `n` permits is
//! admitted when the pushed `tat` stays within the tolerance ahead of `now`:
//!
//! - **GCRA / leaky bucket as a meter**: `max(tat, now) + n·interval ≤ now + burst·interval`.
//!   `(tat - now) / interval` is exactly the meter's water level (it drains one unit per
//!   `interval`), and `burst` its capacity: the two are one algorithm.
//! - **leaky bucket as a queue (shaper)**: `max(tat, now) ≤ now` — the request departs now only if
//!   the previous departures' slots are over; it then holds `n` slots.
//!
//! Layout of the 64-bit word:
//!
//! | bits   | field     | meaning                                               |
//! |--------|-----------|-------------------------------------------------------|
//! | 0..62  | `tat`     | theoretical arrival time, ns since the limiter's creation |
//! | 62     | `closed`  | `close()` was called                                   |
//! | 63     | `waiters` | the wait queue is not empty                            |
//!
//! Time is nanoseconds since creation, capped at [`MAX_NOW`] (2^61 ns, 73 years of uptime: past
//! that the limiter's clock stands still, so it stays conservative). Validation caps
//! `burst · interval` at [`MAX_SPAN`] (2^61 - 1 ns), so `tat ≤ MAX_NOW + MAX_SPAN < 2^62` always fits.
//! Unlike a tick count, `tat` never wraps: an idle gap of any length reads as "full".

/// The largest time (ns since creation) the state works with.
pub const MAX_NOW: u64 = 1 << 61;
/// The largest `burst · interval` (or `max_permits · interval`) that validation accepts.
pub const MAX_SPAN: u64 = (1 << 61) - 1;

const TAT: u64 = (1 << 62) - 1;
const CLOSED: u64 = 1 << 62;
const WAITERS: u64 = 1 << 63;

/// The limiter's constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Nanoseconds per permit (the emission interval), at least 1.
    pub interval: u64,
    /// The most permits one request may take (the burst, the meter's capacity, or the shaper's
    /// largest request). `burst · interval ≤ MAX_SPAN`.
    pub burst: u32,
    /// Shaper: admit only when the request can depart now (tolerance `n · interval`), instead
    /// of a burst tolerance of `burst · interval`.
    pub shape: bool,
    /// `burst · interval`, computed once.
    pub window: u64,
}

impl Params {
    /// The parameters (`burst · interval ≤ MAX_SPAN` is the caller's to check).
    pub const fn new(interval: u64, burst: u32, shape: bool) -> Self {
        Self {
            interval,
            burst,
            shape,
            window: interval.saturating_mul(burst as u64),
        }
    }

    /// `n · interval` (never overflows for `n ≤ burst`; saturates for larger totals).
    #[inline]
    pub const fn span(&self, n: u64) -> u64 {
        n.saturating_mul(self.interval)
    }

    /// How far ahead of `now` the pushed `tat` may lie for a request of `n` permits.
    #[inline]
    pub const fn tolerance(&self, n: u64) -> u64 {
        if self.shape {
            self.span(n)
        } else {
            self.window
        }
    }
}

/// The unpacked state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gcra {
    /// Theoretical arrival time, ns since creation.
    pub tat: u64,
    /// `close()` was called.
    pub closed: bool,
    /// The wait queue is not empty.
    pub waiters: bool,
}

/// Why a take was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// The limiter is closed.
    Closed,
    /// Not admissible now.
    Exhausted,
}

/// Clamps a time to the state's range.
#[inline]
pub const fn clamp_now(now: u64) -> u64 {
    if now > MAX_NOW {
        MAX_NOW
    } else {
        now
    }
}

impl Gcra {
    /// A fresh limiter: full since creation.
    pub const FRESH: Gcra = Gcra {
        tat: 0,
        closed: false,
        waiters: false,
    };

    /// Reads a packed word.
    #[inline]
    pub const fn unpack(w: u64) -> Self {
        Self {
            tat: w & TAT,
            closed: w & CLOSED != 0,
            waiters: w & WAITERS != 0,
        }
    }

    /// Packs into a word.
    #[inline]
    pub const fn pack(self) -> u64 {
        (self.tat & TAT)
            | if self.closed { CLOSED } else { 0 }
            | if self.waiters { WAITERS } else { 0 }
    }

    /// When the next permit's slot begins: `max(tat, now)`.
    #[inline]
    pub const fn start(self, now: u64) -> u64 {
        if self.tat > now {
            self.tat
        } else {
            now
        }
    }

    /// Takes `n` permits at `now` (`n <= burst` is checked by the caller). A probe (`n == 0`)
    /// succeeds when one permit would be admitted and returns `self` unchanged. While anyone
    /// waits, a newcomer takes nothing unless it may `barge`.
    #[inline]
    pub const fn try_take(self, now: u64, n: u32, p: Params, barge: bool) -> Result<Gcra, Denied> {
        if self.closed {
            return Err(Denied::Closed);
        }
        let now = clamp_now(now);
        if n == 0 {
            return if self.admits(now, 1, p) {
                Ok(self)
            } else {
                Err(Denied::Exhausted)
            };
        }
        // `admits`, with `n ≤ burst`: the span is at most `MAX_SPAN`, exact.
        let span = n as u64 * p.interval;
        let tolerance = if p.shape { span } else { p.window };
        let next = self.start(now) + span;
        if (self.waiters && !barge) || next - now > tolerance {
            return Err(Denied::Exhausted);
        }
        Ok(Gcra { tat: next, ..self })
    }

    /// Takes `n` permits for a queued waiter served at `now`, as of the first instant they fit
    /// (at or before `now`): `tat` moves on from where it stands, not from `now`, so a queue
    /// served late grants what a queue served at every instant would have and leaves the same
    /// state. Returns the new state and the instant of the grant. A waiter never fits before
    /// `tat + n·interval − tolerance`, which is at or before `tat` (`n ≤ burst`), and `tat` was
    /// ahead of the instant the waiter queued at (it queued because it did not fit then).
    /// `n <= burst` is the caller's to check; a probe (`n == 0`) needs one permit and takes
    /// nothing.
    ///
    /// Not for newcomers: one arriving at `now` takes from `max(tat, now)`
    /// ([`try_take`](Self::try_take)), since the capacity unused while nobody waited is gone.
    #[inline]
    pub const fn take_when_fits(self, now: u64, n: u32, p: Params) -> Result<(Gcra, u64), Denied> {
        if self.closed {
            return Err(Denied::Closed);
        }
        let now = clamp_now(now);
        let need = if n == 0 { 1 } else { n as u64 };
        if !self.admits(now, need, p) {
            return Err(Denied::Exhausted);
        }
        let fit = self
            .tat
            .saturating_add(p.span(need))
            .saturating_sub(p.tolerance(need));
        let at = if fit < now { fit } else { now };
        if n == 0 {
            return Ok((self, at));
        }
        Ok((
            Gcra {
                tat: self.start(at) + p.span(n as u64),
                ..self
            },
            at,
        ))
    }

    /// The decision on a packed word `w` when it is the common one — no flag set, a request of
    /// `n > 0` permits, `tat` and `now` below [`MAX_NOW`] — without unpacking: `Ok` with the
    /// word [`try_take`](Self::try_take) writes, or `Err` with the nanoseconds until the
    /// request would be admitted with no one queued ahead ([`wait`](Self::wait), never zero: a
    /// denial always waits). `None` for anything else: a flag, a probe, a time at the cap (73
    /// years of uptime, or a backlog reaching that far). `n ≤ p.burst` is the caller's to
    /// check, and `p` must be validated (`burst · interval ≤ MAX_SPAN`): then nothing
    /// overflows (`n · interval ≤ MAX_SPAN`, and `tat`, `now` are below `MAX_NOW`).
    #[inline(always)]
    pub const fn quick(w: u64, now: u64, n: u32, p: Params) -> Option<Result<u64, u64>> {
        // The flags and both times' range in one test (`MAX_NOW` is bit 61); then `now` needs no
        // clamping.
        if (w | now) >> 61 != 0 || n == 0 {
            return None;
        }
        let span = n as u64 * p.interval;
        if p.shape {
            // Tolerance `span`: departs now only if `tat` is not ahead of `now`.
            return Some(if w > now {
                Err(w - now)
            } else {
                Ok(now + span)
            });
        }
        // `admits`, `max(tat, now) - now + span <= window`, with `now` moved across: the pushed
        // `tat` against the latest one admitted, and their difference the wait.
        let next = if w > now { w } else { now } + span;
        let latest = now + p.window;
        if next <= latest {
            Some(Ok(next))
        } else {
            Some(Err(next - latest))
        }
    }

    /// Whether `n` permits fit at `now` (ignoring flags).
    #[inline]
    pub const fn admits(self, now: u64, n: u64, p: Params) -> bool {
        self.start(now) - now + p.span(n) <= p.tolerance(n)
    }

    /// Nanoseconds from `now` until a request of `n` permits behind `ahead` queued permits would
    /// be admitted (zero if now). Exact: waiting that long is enough.
    pub const fn wait(self, now: u64, n: u64, ahead: u64, p: Params) -> u128 {
        let now = clamp_now(now);
        let lead = self.start(now) - now;
        // The common case in 64 bits; the same in 128 bits when anything would overflow.
        if let Some(k) = ahead.checked_add(n) {
            if let Some(span) = k.checked_mul(p.interval) {
                if let Some(end) = lead.checked_add(span) {
                    let tol = if p.shape {
                        n.saturating_mul(p.interval)
                    } else {
                        p.window
                    };
                    return end.saturating_sub(tol) as u128;
                }
            }
        }
        let end = lead as u128 + (ahead as u128 + n as u128) * p.interval as u128;
        let tol = if p.shape {
            n as u128 * p.interval as u128
        } else {
            p.window as u128
        };
        end.saturating_sub(tol)
    }

    /// [`wait`](Self::wait) for `n ≤ burst` permits with no one queued ahead (`p` validated):
    /// exact in 64 bits, since `n · interval ≤ MAX_SPAN` and `tat` lies below 2^62. A
    /// rejection without a queue needs only this, not `wait`'s 128-bit fallback.
    #[inline]
    pub const fn wait_alone(self, now: u64, n: u32, p: Params) -> u64 {
        let now = clamp_now(now);
        let span = n as u64 * p.interval; // at most `burst · interval ≤ MAX_SPAN`
        let tolerance = if p.shape { span } else { p.window };
        (self.start(now) - now + span).saturating_sub(tolerance)
    }

    /// Permits a request could take at `now`: the meter's free capacity, or for the shaper
    /// `burst` if a request may depart now and 0 otherwise.
    pub const fn available(self, now: u64, p: Params) -> u64 {
        let now = clamp_now(now);
        let ahead = self.start(now) - now;
        if p.shape {
            if ahead == 0 {
                p.burst as u64
            } else {
                0
            }
        } else {
            p.tolerance(0).saturating_sub(ahead) / p.interval
        }
    }

    /// Gives back `n` permits taken but never used: `tat` moves back by `n` slots, but not
    /// behind `now` (time that has passed is not returned).
    #[inline]
    pub const fn give_back(self, now: u64, n: u32, p: Params) -> Gcra {
        let now = clamp_now(now);
        if self.tat <= now {
            return self;
        }
        let back = self.tat.saturating_sub(p.span(n as u64));
        Gcra {
            tat: if back > now { back } else { now },
            ..self
        }
    }

    /// Takes `n` more permits at `now` for a settled lease, past any waiter and beyond the
    /// tolerance: `tat` moves on by `n` slots from where it stands (from `now`, if that is
    /// later), so later requests wait until time repays the debt. `None` if `tat` would then
    /// lie more than `tolerance + debt · interval` ahead of `now` (the debt bound), or past what
    /// the word holds: nothing is taken.
    #[inline]
    pub const fn take_debt(self, now: u64, n: u32, debt: u32, p: Params) -> Option<Gcra> {
        let now = clamp_now(now);
        let next = self.start(now).saturating_add(p.span(n as u64));
        let bound = p.window.saturating_add(p.span(debt as u64));
        if next - now > bound || next > TAT {
            return None;
        }
        Some(Gcra { tat: next, ..self })
    }

    /// Since when the limiter has been full (nothing outstanding), if it is at `now`.
    pub const fn full_since(self, now: u64) -> Option<u64> {
        if self.tat <= clamp_now(now) && !self.waiters {
            Some(self.tat)
        } else {
            None
        }
    }

    /// The same state with the waiters flag set or cleared.
    #[inline]
    pub const fn with_waiters(self, waiters: bool) -> Gcra {
        Gcra { waiters, ..self }
    }

    /// The closed state.
    pub const fn close(self) -> Gcra {
        Gcra {
            closed: true,
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 permit per 10 ns, burst 3.
    const P: Params = Params::new(10, 3, false);
    const S: Params = Params::new(10, 4, true);

    #[test]
    fn pack_round_trips() {
        for g in [
            Gcra::FRESH,
            Gcra {
                tat: TAT,
                closed: true,
                waiters: true,
            },
            Gcra {
                tat: MAX_NOW + MAX_SPAN,
                closed: false,
                waiters: true,
            },
        ] {
            assert_eq!(Gcra::unpack(g.pack()), g);
        }
        const { assert!(MAX_NOW + MAX_SPAN <= TAT) };
    }

    /// The word-level shortcut decides as the unpacked transition does: the same word written
    /// on a grant, the general path's exact wait (with no one ahead) on a denial, for the meter
    /// and the shaper, around the burst edges, before, at and after `tat`; any flag, a probe or
    /// a time at the cap sends the caller to the general path.
    #[test]
    fn quick_is_try_take_on_the_same_word_and_instant() {
        for p in [
            P,
            S,
            Params::new(1, 1, false),
            Params::new(1, 1, true),
            Params::new(7, 5, false),
            Params::new(3, 6, true),
            Params::new(MAX_SPAN, 1, false),
            Params::new(MAX_SPAN / 4, 4, true),
        ] {
            let window = p.window;
            // Every small time (exhaustive where the small parameters' edges lie), then the edges.
            let mut tats: Vec<u64> = (0..=64).collect();
            tats.extend([window, window + 1, MAX_NOW, MAX_NOW + 1, MAX_NOW + MAX_SPAN]);
            let mut nows = tats.clone();
            nows.extend([window.saturating_sub(1), u64::MAX, 1 << 62]);
            for &tat in &tats {
                let g = Gcra {
                    tat,
                    closed: false,
                    waiters: false,
                };
                let w = g.pack();
                for &now in &nows {
                    for n in 0..=p.burst.min(8) {
                        let quick = Gcra::quick(w, now, n, p);
                        if n == 0 || now >= MAX_NOW || tat >= MAX_NOW {
                            assert_eq!(quick, None);
                            continue;
                        }
                        let full = g.try_take(now, n, p, false);
                        let at = (tat, now, n, p);
                        match quick {
                            Some(Ok(next)) => assert_eq!(full.map(Gcra::pack), Ok(next), "{at:?}"),
                            Some(Err(wait)) => {
                                assert_eq!(full, Err(Denied::Exhausted), "{at:?}");
                                let general = g.wait(now, u64::from(n), 0, p).max(1);
                                assert_eq!(u128::from(wait), general, "{at:?}");
                            }
                            None => panic!("no quick decision: {at:?}"),
                        }
                    }
                    for flagged in [
                        g.close(),
                        g.with_waiters(true),
                        g.close().with_waiters(true),
                    ] {
                        assert_eq!(Gcra::quick(flagged.pack(), now, 1, p), None);
                    }
                }
            }
        }
    }

    #[test]
    fn burst_then_smooth_spacing() {
        let mut g = Gcra::FRESH;
        for _ in 0..3 {
            g = g.try_take(100, 1, P, false).unwrap();
        }
        assert_eq!(g.tat, 130);
        assert_eq!(g.try_take(100, 1, P, false), Err(Denied::Exhausted));
        assert_eq!(g.wait(100, 1, 0, P), 10);
        // One permit back every interval, not the whole burst at once.
        assert_eq!(g.available(109, P), 0);
        assert_eq!(g.available(110, P), 1);
        assert_eq!(g.available(125, P), 2);
        let g = g.try_take(110, 1, P, false).unwrap();
        assert_eq!(g.tat, 140);
        assert_eq!(g.try_take(110, 1, P, false), Err(Denied::Exhausted));
    }

    #[test]
    fn multi_permit_requests_and_retry_after() {
        let g = Gcra::FRESH.try_take(0, 3, P, false).unwrap();
        assert_eq!(g.tat, 30);
        assert_eq!(g.try_take(5, 2, P, false), Err(Denied::Exhausted));
        // 2 permits need tat - now + 20 <= 30, so now >= 20: 15 ns from 5.
        assert_eq!(g.wait(5, 2, 0, P), 15);
        assert!(g.try_take(20, 2, P, false).is_ok());
        assert!(g.try_take(19, 2, P, false).is_err());
        // Behind 4 queued permits.
        assert_eq!(g.wait(5, 2, 4, P), 55);
    }

    #[test]
    fn probe_changes_nothing() {
        let g = Gcra::FRESH.try_take(0, 3, P, false).unwrap();
        assert_eq!(g.try_take(0, 0, P, false), Err(Denied::Exhausted));
        assert_eq!(g.try_take(10, 0, P, false), Ok(g));
    }

    #[test]
    fn shaper_departs_only_when_the_slot_is_free() {
        let g = Gcra::FRESH.try_take(0, 1, S, false).unwrap();
        assert_eq!(g.tat, 10);
        assert_eq!(g.try_take(9, 1, S, false), Err(Denied::Exhausted));
        assert_eq!(g.wait(9, 1, 0, S), 1);
        assert_eq!(g.wait(9, 1, 3, S), 31);
        assert_eq!(g.available(9, S), 0);
        assert_eq!(g.available(10, S), 4);
        // A request of 4 permits holds four slots.
        let g = g.try_take(10, 4, S, false).unwrap();
        assert_eq!(g.tat, 50);
        // A long idle spell does not bank departures: still one at a time.
        let g = g.try_take(1_000, 1, S, false).unwrap();
        assert_eq!(g.try_take(1_000, 1, S, false), Err(Denied::Exhausted));
    }

    #[test]
    fn flags_close_and_queue() {
        let g = Gcra::FRESH.with_waiters(true);
        assert_eq!(g.try_take(0, 1, P, false), Err(Denied::Exhausted));
        assert!(g.try_take(0, 1, P, true).is_ok());
        assert_eq!(g.close().try_take(0, 1, P, true), Err(Denied::Closed));
        assert_eq!(g.full_since(5), None);
        assert_eq!(Gcra::FRESH.full_since(5), Some(0));
    }

    #[test]
    fn give_back_restores_but_not_into_the_past() {
        let g = Gcra::FRESH.try_take(100, 3, P, false).unwrap();
        assert_eq!(g.give_back(100, 2, P).tat, 110);
        assert_eq!(g.give_back(125, 2, P).tat, 125);
        assert_eq!(g.give_back(200, 2, P), g);
    }

    #[test]
    fn edges_do_not_overflow() {
        let p = Params::new(MAX_SPAN, 1, false);
        let g = Gcra::FRESH.try_take(u64::MAX, 1, p, false).unwrap();
        assert_eq!(g.tat, MAX_NOW + MAX_SPAN);
        assert_eq!(Gcra::unpack(g.pack()), g);
        assert!(g.wait(0, u64::MAX, u64::MAX, p) > 0);
        let q = Params::new(1, u32::MAX, true);
        let g = Gcra::FRESH.try_take(MAX_NOW, u32::MAX, q, false).unwrap();
        assert_eq!(g.available(MAX_NOW, q), 0);
        assert_eq!(g.wait(MAX_NOW, 1, 0, q), u128::from(u32::MAX));
    }

    /// [`Gcra::wait_alone`] is [`Gcra::wait`] with no one ahead, for every request up to the
    /// burst, around `tat`'s and the time cap's edges, for the meter and the shaper.
    #[test]
    fn wait_alone_is_wait_with_no_one_ahead() {
        for p in [
            P,
            S,
            Params::new(1, 1, false),
            Params::new(1, 1, true),
            Params::new(7, 5, false),
            Params::new(MAX_SPAN, 1, false),
            Params::new(MAX_SPAN, 1, true),
            Params::new(MAX_SPAN / 4, 4, true),
            Params::new(MAX_SPAN / 4, 4, false),
            Params::new(1, u32::MAX, false),
        ] {
            let mut times: Vec<u64> = (0..=40).collect();
            times.extend([p.window, p.window + 1, MAX_NOW - 1, MAX_NOW, MAX_NOW + 1]);
            times.extend([MAX_NOW + MAX_SPAN, TAT, u64::MAX]);
            for &tat in times.iter().filter(|&&t| t <= MAX_NOW + MAX_SPAN) {
                let g = Gcra {
                    tat,
                    closed: false,
                    waiters: false,
                };
                for &now in &times {
                    for n in [1, 2, 3, 4, 5, p.burst - 1, p.burst] {
                        if n == 0 || n > p.burst {
                            continue;
                        }
                        let want = g.wait(now, u64::from(n), 0, p);
                        let at = (tat, now, n, p);
                        assert_eq!(u128::from(g.wait_alone(now, n, p)), want, "{at:?}");
                    }
                }
            }
        }
    }
}
