//! Conversion between a clock's instants and a limiter's tick counts.
//!
//! Each rate limiter divides time into ticks of one period (a replenishment period, a window, a
//! window segment), counted from the instant the limiter was created.
//!
//! **The horizon: 2^63 ns (292 years) after creation.** A limiter reads time as the distance
//! from its creation instant to the clock's reading, modulo 2^64 (so a 64-bit counter that wraps
//! past `u64::MAX` is read correctly). A distance of 2^63 ns or more cannot tell a reading 292
//! years later from one taken *before* creation (a clock stepped backwards), and is read as the
//! latter: no time passing. Up to the horizon every idle gap reads exactly; past it, the limiter
//! stops refilling (it only ever limits more, never less). Periods and windows are therefore
//! refused from [`HORIZON_NS`] up ([`period_nanos`]): a period that long could never complete.

use core::time::Duration;

use crate::nanos::Nanos;
use crate::reciprocal::Reciprocal;

use crate::clock::Instant;

/// Nanoseconds after creation from which a reading counts as a backwards step (2^63: 292 years).
pub(crate) const HORIZON_NS: u64 = 1 << 63;

/// A limiter's time scale: its creation instant and its period in nanoseconds (never zero).
///
/// Finding the tick of an instant divides by the period. A run-time 64-bit division is a slow
/// instruction on a 64-bit CPU and, on a 32-bit MCU, a call to a library routine of almost a
/// kilobyte of code. The ticker divides by multiplying with the period's reciprocal instead,
/// computed once at creation ([`Reciprocal`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ticker {
    origin: Instant,
    period: u64,
    recip: Reciprocal,
}

impl Ticker {
    /// `period_ns` must be at least 1 (options validation guarantees it).
    pub(crate) const fn new(origin: Instant, period_ns: u64) -> Self {
        let period = if period_ns == 0 { 1 } else { period_ns };
        Self {
            origin,
            period,
            recip: Reciprocal::of(period),
        }
    }

    pub(crate) const fn period_ns(&self) -> u64 {
        self.period
    }

    /// Nanoseconds from creation to `now`. A `now` before creation is zero (a clock that stepped
    /// backwards). The subtraction wraps, so a clock that itself passes `u64::MAX` and wraps is
    /// still read correctly; a difference past 2^63 ns (292 years) can only be a backwards step.
    #[inline]
    pub(crate) fn elapsed(&self, now: Instant) -> u64 {
        Self::clamped(self.elapsed_raw(now))
    }

    /// [`elapsed`](Self::elapsed) before the clamp: the wrapped difference, 2^63 or more for a
    /// backwards step. A caller that branches on its sign anyway (a quick path that sends such
    /// a reading to its general one) saves the clamp's instructions there.
    #[inline(always)]
    pub(crate) fn elapsed_raw(&self, now: Instant) -> u64 {
        now.as_nanos().wrapping_sub(self.origin.as_nanos())
    }

    /// Whether an [`elapsed_raw`](Self::elapsed_raw) reading is a clock behind the origin
    /// (2^63 or more, wrapped), which [`elapsed`](Self::elapsed) reads as 0.
    #[inline(always)]
    pub(crate) const fn behind_origin(raw: u64) -> bool {
        raw >= HORIZON_NS
    }

    /// An [`elapsed_raw`](Self::elapsed_raw) reading as [`elapsed`](Self::elapsed) answers it.
    #[inline(always)]
    pub(crate) const fn clamped(raw: u64) -> u64 {
        if Self::behind_origin(raw) {
            0
        } else {
            raw
        }
    }

    /// The tick `now` falls in, and the nanoseconds since that tick began.
    #[inline]
    pub(crate) fn tick(&self, now: Instant) -> (u64, u64) {
        self.recip.div_rem_elapsed(self.elapsed(now), self.period)
    }

    /// [`tick`](Self::tick) of an elapsed time `e` (from [`elapsed`](Self::elapsed)), found
    /// without a division when `e` falls in tick `hint` — the tick a limiter's state was last
    /// written in, which is where nearly every decision lands (a denial always does, until the
    /// next tick begins). The answer does not depend on `hint`; a wrong hint only costs the
    /// division.
    #[inline]
    pub(crate) fn locate(&self, e: u64, hint: u64) -> (u64, u64) {
        match self.offset_in(e, hint) {
            Some(into) => (hint, into),
            None => self.recip.div_rem_elapsed(e, self.period),
        }
    }

    /// [`locate`](Self::locate) with a `hint` that is a tick of this ticker (the state's own:
    /// see [`offset_in_own`](Self::offset_in_own)): one multiply and one compare before the
    /// division, with no overflow check.
    #[inline]
    pub(crate) fn locate_own(&self, e: u64, hint: u64) -> (u64, u64) {
        match self.offset_in_own(e, hint) {
            Some(into) => (hint, into),
            None => self.recip.div_rem_elapsed(e, self.period),
        }
    }

    /// The nanoseconds an elapsed time `e` lies into tick `k`, if it lies in it (one multiply,
    /// no division).
    #[inline(always)]
    pub(crate) fn offset_in(&self, e: u64, k: u64) -> Option<u64> {
        let into = e.checked_sub(k.checked_mul(self.period)?)?;
        (into < self.period).then_some(into)
    }

    /// [`offset_in`](Self::offset_in) for a tick `k` that this ticker computed itself, from an
    /// elapsed time below [`HORIZON_NS`] (a limiter's own state: its ticks come only from
    /// [`tick`](Self::tick) and [`locate`](Self::locate)). Then `k * period <= e' < 2^63` never
    /// wraps, and `e - k * period` wraps, to more than 2^63 - a period or more - exactly when `e`
    /// lies before tick `k`: one multiply and one compare, no overflow checks.
    #[inline(always)]
    pub(crate) fn offset_in_own(&self, e: u64, k: u64) -> Option<u64> {
        debug_assert!(
            k <= (HORIZON_NS - 1) / self.period,
            "not a tick of this ticker"
        );
        let into = e.wrapping_sub(k.wrapping_mul(self.period));
        debug_assert_eq!(into < self.period, self.offset_in(e, k).is_some());
        (into < self.period).then_some(into)
    }

    /// The instant tick `k` begins (saturating).
    #[allow(dead_code)]
    pub(crate) fn start_of(&self, k: u64) -> Instant {
        let ns = u128::from(k) * u128::from(self.period);
        let ns = u64::try_from(ns).unwrap_or(u64::MAX);
        Instant::from_nanos(self.origin.as_nanos().wrapping_add(ns))
    }

    /// Time from the start of tick `k` to `now`, measured from creation (so a clock that wrapped
    /// or read before creation is handled as `elapsed` handles it); zero if `k` starts later.
    pub(crate) fn since_start_of(&self, now: Instant, k: u64) -> Duration {
        let start = u128::from(k) * u128::from(self.period);
        duration_from_nanos_u128(u128::from(self.elapsed(now)).saturating_sub(start))
    }

    /// The wait from `into` nanoseconds into some tick until `ticks` ticks after that tick began
    /// (zero for `ticks == 0`; `into` is less than a period, so otherwise at least 1 ns).
    pub(crate) fn wait_for(&self, ticks: u64, into: u64) -> Nanos {
        match u32::try_from(ticks) {
            Ok(ticks) => self.wait_ticks(ticks, into),
            Err(_) => self.wait_for_long(ticks, into),
        }
    }

    /// [`wait_for`](Self::wait_for) of 2^32 ticks or more: `ticks·period = hi·period·2^32 +
    /// lo·period`, each product exact in 96 bits ([`Nanos::product`]), the sum in 128 (shifts
    /// and additions only).
    #[cold]
    #[inline(never)]
    fn wait_for_long(&self, ticks: u64, into: u64) -> Nanos {
        let (hi, lo) = ((ticks >> 32) as u32, ticks as u32);
        let high = Nanos::product(self.period, hi) << 32; // < 2^95 · 2^32
        let low = Nanos::product(self.period, lo); // < 2^96
                                                   // `into` is less than a period, so than the total: no underflow.
        Nanos::from_u128(high + low - u128::from(into))
    }

    /// [`wait_until`](Self::wait_until) for one request: the wait until `ticks` ticks after
    /// `base`, at most `u32::MAX` (as
    /// [`Bucket::ticks_to_take`](crate::bucket::state::Bucket::ticks_to_take) gives), exact: the
    /// reference of [`wait_one_u64`](Self::wait_one_u64), which a rejection uses.
    #[cfg(test)]
    pub(crate) fn wait_one(&self, k: u64, into: u64, base: u64, ticks: u32) -> Nanos {
        if base > k {
            self.wait_ticks(ticks, 0)
        } else {
            // `base + ticks - k`, saturating at 0: at most `ticks`.
            let left = u64::from(ticks).saturating_sub(k - base) as u32;
            self.wait_ticks(left, into)
        }
    }

    /// [`wait_one`](Self::wait_one) for a rejection, which keeps 64 bits of wait: the same up
    /// to 2^64 - 1 ns, `u64::MAX` ns (read as `Duration::MAX`) from there, with no 96-bit
    /// product (code a firmware `try_acquire` does not need).
    #[inline]
    pub(crate) fn wait_one_u64(&self, k: u64, into: u64, base: u64, ticks: u32) -> Nanos {
        let (ticks, into) = if base > k {
            (ticks, 0)
        } else {
            (u64::from(ticks).saturating_sub(k - base) as u32, into)
        };
        if ticks == 0 {
            return Nanos::ZERO;
        }
        // `(ticks - 1)·period + (period - into)`: `into` is less than a period, so the wait is
        // at least 1 ns, and the product may overflow where the wait does not.
        Nanos::from_u64(
            u64::from(ticks - 1)
                .checked_mul(self.period)
                .and_then(|ns| ns.checked_add(self.period - into))
                .unwrap_or(u64::MAX),
        )
    }

    /// [`wait_for`](Self::wait_for) of at most `u32::MAX` ticks (one request's): one
    /// multiplication while the product fits 64 bits, else the exact 96-bit product. This is the
    /// only wait a `try_acquire` without a queue reaches, and the smallest code for it.
    #[inline]
    pub(crate) fn wait_ticks(&self, ticks: u32, into: u64) -> Nanos {
        if ticks == 0 {
            return Nanos::ZERO;
        }
        match u64::from(ticks).checked_mul(self.period) {
            Some(ns) => Nanos::from_u64(ns - into), // the common case
            // `into` is less than a period, so than the product.
            None => Nanos::from_u128(Nanos::product(self.period, ticks) - u128::from(into)),
        }
    }

    /// The wait until tick `target` begins, seen from `into` ns into tick `k` by a limiter whose
    /// own state is at tick `base` (`target >= base`). A `base` later than `k` means the reading
    /// is stale (the thread was preempted after reading the clock while others moved the state
    /// on) or the clock stepped back: real time is at least the start of `base`, so the wait
    /// counts from there and is not inflated by the staleness.
    pub(crate) fn wait_until(&self, k: u64, into: u64, base: u64, target: u64) -> Nanos {
        if base > k {
            self.wait_for(target - base, 0)
        } else {
            self.wait_for(target.saturating_sub(k), into)
        }
    }
}

/// A `Duration` of `ns` nanoseconds, for values past `u64::MAX` (saturating at `Duration::MAX`),
/// with no 128-bit division ([`Nanos::to_duration`]).
pub(crate) fn duration_from_nanos_u128(ns: u128) -> Duration {
    Nanos::from_u128(ns).to_duration()
}

/// A duration in whole nanoseconds, or `None` past `u64::MAX` ns (584 years).
pub(crate) const fn nanos_of(d: Duration) -> Option<u64> {
    let ns = d.as_nanos();
    if ns > u64::MAX as u128 {
        None
    } else {
        Some(ns as u64)
    }
}

/// A period or window in whole nanoseconds, or `None` from [`HORIZON_NS`] (2^63 ns, 292 years)
/// up: such a period would end past the horizon and could never complete.
pub(crate) const fn period_nanos(d: Duration) -> Option<u64> {
    match nanos_of(d) {
        Some(ns) if ns < HORIZON_NS => Some(ns),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_from_origin_and_backwards_steps() {
        let t = Ticker::new(Instant::from_nanos(100), 10);
        assert_eq!(t.tick(Instant::from_nanos(100)), (0, 0));
        assert_eq!(t.tick(Instant::from_nanos(125)), (2, 5));
        // Before creation: no time has passed.
        assert_eq!(t.tick(Instant::from_nanos(3)), (0, 0));
    }

    /// The division-free conversion equals the 128-bit division it replaces, around every
    /// boundary: `u64::MAX`, multiples of 2^64, and the saturation point.
    #[test]
    fn duration_from_nanos_u128_is_the_exact_division() {
        const NS: u128 = 1_000_000_000;
        let reference = |ns: u128| match u64::try_from(ns / NS) {
            Ok(secs) => Duration::new(secs, (ns % NS) as u32),
            Err(_) => Duration::MAX,
        };
        let max = u128::from(u64::MAX) * NS + (NS - 1); // Duration::MAX in ns
        let mut cases = vec![0, 1, u128::from(u64::MAX), max, max + 1, u128::MAX];
        for hi in [
            1u128,
            2,
            3,
            1 << 20,
            (1 << 34) - 1,
            1 << 34,
            u128::from(u32::MAX),
        ] {
            for lo in [
                0u128,
                1,
                NS - 1,
                NS,
                709_551_615,
                709_551_616,
                u128::from(u64::MAX),
            ] {
                cases.push((hi << 64) + lo);
            }
        }
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let hi = u128::from(x >> (x % 64));
            cases.push((hi << 64) | u128::from(x.rotate_left(17)));
        }
        for ns in cases {
            assert_eq!(duration_from_nanos_u128(ns), reference(ns), "{ns}");
        }
    }

    /// The 64-bit waits past 2^64 ns equal the 128-bit computation they replace, and the
    /// one-request shortcut equals the general wait.
    #[test]
    fn wait_for_is_exact_past_2_pow_64_ns() {
        let reference = |period: u64, ticks: u64, into: u64| {
            if ticks == 0 {
                return Duration::ZERO;
            }
            duration_from_nanos_u128(u128::from(ticks) * u128::from(period) - u128::from(into))
        };
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for period in [
            1u64,
            7,
            1_000_000_000,
            1_000_000_007,
            1 << 32,
            (1 << 40) + 3,
            HORIZON_NS - 1,
        ] {
            let t = Ticker::new(Instant::ZERO, period);
            let edges = [
                0u64,
                1,
                2,
                3,
                1 << 16,
                u64::from(u32::MAX),
                999_999_999,
                1_000_000_001,
                u64::MAX / 2,
                u64::MAX,
            ];
            for ticks in edges {
                for into in [0, 1, period / 2, period - 1] {
                    assert_eq!(
                        t.wait_for(ticks, into).to_duration(),
                        reference(period, ticks, into),
                        "{period} {ticks} {into}"
                    );
                }
            }
            for ticks in [0u32, 1, 2, 3, 1 << 16, u32::MAX - 1, u32::MAX] {
                for into in [0, 1, period / 2, period - 1] {
                    assert_eq!(
                        t.wait_ticks(ticks, into),
                        t.wait_for(u64::from(ticks), into)
                    );
                }
            }
            for _ in 0..2_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let (short, into) = ((x >> 32) as u32, x % period);
                assert_eq!(
                    t.wait_ticks(short, into),
                    t.wait_for(u64::from(short), into)
                );
                for (k, base) in [(5u64, 3u64), (3, 5), (9, 9), (1 << 40, 7)] {
                    let target = base.saturating_add(u64::from(short));
                    let exact = t.wait_one(k, into, base, short);
                    assert_eq!(exact, t.wait_until(k, into, base, target));
                    assert_eq!(
                        t.wait_one_u64(k, into, base, short),
                        Nanos::from_u64(exact.saturating_u64())
                    );
                }
                let (ticks, into) = (x >> (x % 48), x % period);
                assert_eq!(
                    t.wait_for(ticks, into).to_duration(),
                    reference(period, ticks, into),
                    "{period} {ticks} {into}"
                );
            }
        }
    }

    /// A rejection's 64-bit wait is exact wherever the wait fits, also when `ticks · period`
    /// alone does not (the fuzzer's case: 4 ticks of 2^62 ns, 4 ns into the first), and
    /// saturates at `u64::MAX` only past it.
    #[test]
    fn the_64_bit_wait_is_exact_up_to_its_saturation() {
        let t = Ticker::new(Instant::ZERO, 1 << 62);
        assert_eq!(t.wait_one_u64(0, 4, 0, 4), Nanos::from_u64(u64::MAX - 3));
        assert_eq!(t.wait_one_u64(0, 0, 0, 4), Nanos::from_u64(u64::MAX));
        assert_eq!(t.wait_one_u64(0, 0, 0, 5), Nanos::from_u64(u64::MAX));
        assert_eq!(t.wait_one_u64(0, 1, 0, 1), Nanos::from_u64((1 << 62) - 1));
        assert_eq!(t.wait_one_u64(0, 1, 0, 0), Nanos::ZERO);
        for ticks in [1u32, 2, 3, 4, 5, u32::MAX] {
            for into in [0, 1, 4, (1 << 62) - 1] {
                let exact = t.wait_one(0, into, 0, ticks).saturating_u64();
                assert_eq!(t.wait_one_u64(0, into, 0, ticks), Nanos::from_u64(exact));
            }
        }
    }

    /// `offset_in_own` is `offset_in` for every tick a ticker can compute, up to the last one
    /// before the horizon, at elapsed times in, before and after that tick.
    #[test]
    fn offset_in_own_agrees_for_every_tick_below_the_horizon() {
        for period in [
            1u64,
            3,
            10,
            1_000_000_007,
            1 << 32,
            u64::MAX / 3,
            HORIZON_NS - 1,
        ] {
            let t = Ticker::new(Instant::ZERO, period);
            let last = (HORIZON_NS - 1) / period;
            for k in [0, 1, 2, last / 2, last.saturating_sub(1), last] {
                if k > last {
                    continue;
                }
                let start = k * period;
                for e in [
                    0,
                    1,
                    start.saturating_sub(1),
                    start,
                    start + 1,
                    start + (period - 1),
                    start.saturating_add(period),
                    HORIZON_NS - 1,
                ] {
                    assert_eq!(
                        t.offset_in_own(e, k),
                        t.offset_in(e, k),
                        "period {period}, tick {k}, e {e}"
                    );
                }
            }
        }
    }

    /// `locate` is `tick` of the elapsed time, whatever the hint: right, one tick off either
    /// way, far off, or so large that `hint * period` overflows.
    #[test]
    fn locate_agrees_with_the_division_for_every_hint() {
        for period in [1u64, 3, 10, 1 << 32, u64::MAX / 3, HORIZON_NS - 1] {
            let t = Ticker::new(Instant::ZERO, period);
            for e in [0, 1, 9, 10, 11, 12_345, 1 << 40, HORIZON_NS - 1] {
                let (k, into) = (e / period, e % period);
                for hint in [
                    k,
                    k.wrapping_sub(1),
                    k + 1,
                    0,
                    k / 2 + 7,
                    u64::MAX,
                    u64::MAX / 2,
                ] {
                    assert_eq!(
                        t.locate(e, hint),
                        (k, into),
                        "period {period}, e {e}, hint {hint}"
                    );
                }
            }
        }
    }

    /// [`Ticker::locate_own`] is the division for every hint a limiter's state can hold: any
    /// tick up to the horizon's, before, at or after the reading's.
    #[test]
    fn locate_own_agrees_with_the_division_for_every_own_tick() {
        for period in [1u64, 3, 10, 1 << 32, u64::MAX / 3, HORIZON_NS - 1] {
            let t = Ticker::new(Instant::ZERO, period);
            let last = (HORIZON_NS - 1) / period;
            for e in [0, 1, 9, 10, 11, 12_345, 1 << 40, HORIZON_NS - 1] {
                let (k, into) = (e / period, e % period);
                let hints = [k, k.saturating_sub(1), k + 1, 0, k / 2 + 7, last, last / 2];
                for hint in hints.into_iter().filter(|&h| h <= last) {
                    let at = (period, e, hint);
                    assert_eq!(t.locate_own(e, hint), (k, into), "{at:?}");
                }
            }
        }
    }

    #[test]
    fn clock_wrapping_past_u64_max() {
        let t = Ticker::new(Instant::from_nanos(u64::MAX - 4), 10);
        assert_eq!(t.tick(Instant::from_nanos(15)), (2, 0));
    }

    #[test]
    fn the_horizon_is_2_pow_63_ns_and_periods_must_end_before_it() {
        let t = Ticker::new(Instant::from_nanos(7), 1);
        assert_eq!(
            t.elapsed(Instant::from_nanos(7 + HORIZON_NS - 1)),
            HORIZON_NS - 1
        );
        assert_eq!(t.elapsed(Instant::from_nanos(7 + HORIZON_NS)), 0);
        assert_eq!(
            period_nanos(Duration::from_nanos(HORIZON_NS - 1)),
            Some(HORIZON_NS - 1)
        );
        assert_eq!(period_nanos(Duration::from_nanos(HORIZON_NS)), None);
        assert_eq!(period_nanos(Duration::MAX), None);
    }

    #[test]
    fn stale_readings_wait_from_the_state_tick() {
        let t = Ticker::new(Instant::ZERO, 10);
        // Reading 3 ns into tick 5, state at tick 5: 2 ticks after 5 begins.
        assert_eq!(t.wait_until(5, 3, 5, 7), Nanos::from_u64(17));
        // Reading in tick 2 but the state is at tick 5: real time is at least tick 5's start.
        assert_eq!(t.wait_until(2, 3, 5, 7), Nanos::from_u64(20));
        assert_eq!(t.wait_until(5, 3, 5, 5), Nanos::ZERO);
    }

    #[test]
    fn waits_are_exact_and_saturate() {
        let t = Ticker::new(Instant::ZERO, 10);
        assert_eq!(t.wait_for(1, 3), Nanos::from_u64(7));
        let big = Ticker::new(Instant::ZERO, u64::MAX);
        assert!(big.wait_for(u64::MAX, 0).to_duration() >= Duration::from_secs(u64::MAX / 2));
    }

    /// Mutation testing (issue 9): `since_start_of` dates a limiter's idleness (a bucket full
    /// since tick `k`, a window empty since its boundary); only the integration tests checked its
    /// value, so the lib suite let `*` → `+`/`/` and a constant result survive.
    #[test]
    fn since_start_of_is_the_time_since_tick_k_began() {
        let t = Ticker::new(Instant::from_nanos(100), 10);
        let now = Instant::from_nanos(135); // 35 ns in: tick 3, 5 ns into it
        assert_eq!(t.since_start_of(now, 3), Duration::from_nanos(5));
        assert_eq!(t.since_start_of(now, 2), Duration::from_nanos(15));
        assert_eq!(t.since_start_of(now, 0), Duration::from_nanos(35));
        // A tick that starts later: zero, not a wrap.
        assert_eq!(t.since_start_of(now, 4), Duration::ZERO);
    }

    /// Mutation testing (issue 9): the edge of `nanos_of`, exactly `u64::MAX` ns, and beyond
    /// (where a truncating cast would wrap to a short duration).
    #[test]
    fn nanos_of_holds_u64_max_and_refuses_more() {
        let max = Duration::from_nanos(u64::MAX);
        assert_eq!(nanos_of(max), Some(u64::MAX));
        assert_eq!(nanos_of(max + Duration::from_nanos(1)), None);
        assert_eq!(nanos_of(Duration::from_secs(u64::MAX)), None);
        assert_eq!(nanos_of(Duration::from_nanos(7)), Some(7));
    }
}
