//! Conversion between a clock's instants and a limiter's tick counts.
//!
//! Each rate limiter divides time into ticks of one period (a replenishment period, a window, a
//! window segment), counted from the instant the limiter was created. Tick counts are 64-bit:
//! even with 1 ns periods they cannot wrap in the 584 years a 64-bit nanosecond clock covers, so
//! a limiter left idle for any length of time sees the true number of elapsed ticks.

use core::time::Duration;

use crate::clock::Instant;

/// A limiter's time scale: its creation instant and its period in nanoseconds (never zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ticker {
    origin: Instant,
    period: u64,
}

impl Ticker {
    /// `period_ns` must be at least 1 (options validation guarantees it).
    pub(crate) const fn new(origin: Instant, period_ns: u64) -> Self {
        let period = if period_ns == 0 { 1 } else { period_ns };
        Self { origin, period }
    }

    pub(crate) const fn period_ns(&self) -> u64 {
        self.period
    }

    /// Nanoseconds from creation to `now`. A `now` before creation is zero (a clock that stepped
    /// backwards). The subtraction wraps, so a clock that itself passes `u64::MAX` and wraps is
    /// still read correctly; a difference past 2^63 ns (292 years) can only be a backwards step.
    #[inline]
    pub(crate) fn elapsed(&self, now: Instant) -> u64 {
        let e = now.as_nanos().wrapping_sub(self.origin.as_nanos());
        if e > i64::MAX as u64 {
            0
        } else {
            e
        }
    }

    /// The tick `now` falls in, and the nanoseconds since that tick began.
    #[inline]
    pub(crate) fn tick(&self, now: Instant) -> (u64, u64) {
        let e = self.elapsed(now);
        (e / self.period, e % self.period)
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

    /// The wait from `into` nanoseconds into some tick until `ticks` ticks after that tick began;
    /// `ticks >= 1`, so the result is at least 1 ns. Saturates at `Duration::MAX`-like values.
    pub(crate) fn wait_for(&self, ticks: u64, into: u64) -> Duration {
        let ns = u128::from(ticks) * u128::from(self.period) - u128::from(into);
        duration_from_nanos_u128(ns)
    }
}

/// A `Duration` of `ns` nanoseconds, for values past `u64::MAX`.
pub(crate) fn duration_from_nanos_u128(ns: u128) -> Duration {
    if let Ok(ns) = u64::try_from(ns) {
        return Duration::from_nanos(ns); // the common case: no 128-bit division
    }
    const NS: u128 = 1_000_000_000;
    let secs = u64::try_from(ns / NS).unwrap_or(u64::MAX);
    Duration::new(secs, (ns % NS) as u32)
}

/// A duration in whole nanoseconds, or `None` past `u64::MAX` ns (584 years).
pub(crate) fn nanos_of(d: Duration) -> Option<u64> {
    u64::try_from(d.as_nanos()).ok()
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

    #[test]
    fn clock_wrapping_past_u64_max() {
        let t = Ticker::new(Instant::from_nanos(u64::MAX - 4), 10);
        assert_eq!(t.tick(Instant::from_nanos(15)), (2, 0));
    }

    #[test]
    fn waits_are_exact_and_saturate() {
        let t = Ticker::new(Instant::ZERO, 10);
        assert_eq!(t.wait_for(1, 3), Duration::from_nanos(7));
        let big = Ticker::new(Instant::ZERO, u64::MAX);
        assert!(big.wait_for(u64::MAX, 0) >= Duration::from_secs(u64::MAX / 2));
    }
}
