//! [`Nanos`]: a wait in whole nanoseconds, 96 bits wide, as the limiters compute and the queue
//! timers use it; a [`Rejection`](crate::Rejection) keeps 64 bits of it
//! ([`saturating_u64`](Nanos::saturating_u64): exact to 584 years, then `Duration::MAX`).
//!
//! Why not a `Duration`: a `Duration` is seconds and nanoseconds, so making one from a count of
//! nanoseconds divides by 10^9. On a 64-bit CPU that is a multiply-and-shift sequence on every
//! denial; on a 32-bit MCU it is a call into a 64-bit division routine, or, past 2^64 ns, the
//! arithmetic that splits the count in halves — together a third of a firmware `try_acquire`'s
//! code. A denial stores the count as it computed it, and the division happens only if someone
//! asks [`Rejection::retry_after`](crate::Rejection::retry_after) (a proxy that only counts or
//! drops denials never pays it).
//!
//! 96 bits hold every `Duration` exactly (`Duration::MAX` is just under 2^95 ns), so the
//! conversion back is exact both ways; counts past `Duration::MAX` saturate there, as
//! `Duration` arithmetic would.

use core::time::Duration;

use crate::reciprocal::Reciprocal;

const NS: u64 = 1_000_000_000;

/// Nanoseconds in `Duration::MAX`, as (high 32 bits, low 64 bits).
const MAX: Nanos = Nanos::from_duration(Duration::MAX);

/// A count of nanoseconds in `[0, Duration::MAX]`, as a high and a low word (the high word
/// first, so that the derived order is the numeric one).
///
/// The high word is a `usize` (its values are below 2^30): on a 64-bit target the count is two
/// whole words, so a rejection is copied in whole words. (The store-forwarding stall once seen on
/// every denial came from converting a decision's `Result` after the fact, not from this field;
/// see `BucketCore::take_as`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Nanos {
    hi: usize,
    lo: u64,
}

impl Nanos {
    /// No wait.
    pub(crate) const ZERO: Nanos = Nanos { hi: 0, lo: 0 };

    /// `ns` nanoseconds: a store, no arithmetic.
    #[inline(always)]
    pub(crate) const fn from_u64(ns: u64) -> Nanos {
        Nanos { hi: 0, lo: ns }
    }

    /// `ns` nanoseconds, saturating at `Duration::MAX`.
    pub(crate) const fn from_u128(ns: u128) -> Nanos {
        // `Duration::MAX` is `2^64 · 10^9 - 1` ns: a high word of `10^9 - 1` and a low word of
        // all ones, so a count fits exactly when its high word does.
        if ns >> 64 > MAX.hi as u128 {
            return MAX;
        }
        Nanos {
            hi: (ns >> 64) as usize,
            lo: ns as u64,
        }
    }

    /// The nanoseconds of `d`, exactly.
    pub(crate) const fn from_duration(d: Duration) -> Nanos {
        let ns = d.as_nanos(); // < 2^95
        Nanos {
            hi: (ns >> 64) as usize,
            lo: ns as u64,
        }
    }

    /// `period · ticks` exactly (less than 2^96), from two 32 × 32 → 64-bit products: no
    /// 128-bit multiplication, which a 32-bit MCU makes a library call (128-bit additions,
    /// subtractions and shifts stay inline there).
    #[inline]
    pub(crate) fn product(period: u64, ticks: u32) -> u128 {
        let t = u64::from(ticks);
        let low = t * (period & 0xFFFF_FFFF); // < 2^64
        let high = t * (period >> 32); // < 2^64, weighs 2^32
        u128::from(low) + (u128::from(high) << 32)
    }

    /// `self + other`, saturating at `Duration::MAX`.
    pub(crate) fn saturating_add(self, other: Nanos) -> Nanos {
        let (lo, carry) = self.lo.overflowing_add(other.lo);
        let hi = self.hi as u64 + other.hi as u64 + u64::from(carry);
        match usize::try_from(hi) {
            Ok(hi) => Nanos { hi, lo }.min(MAX),
            Err(_) => MAX,
        }
    }

    /// The count as a `u64`, saturating at `u64::MAX` (a rejection's wait: one word).
    #[inline(always)]
    pub(crate) const fn saturating_u64(self) -> u64 {
        if self.hi == 0 {
            self.lo
        } else {
            u64::MAX
        }
    }

    /// Whether the count is zero.
    pub(crate) const fn is_zero(self) -> bool {
        self.hi == 0 && self.lo == 0
    }

    /// At least one nanosecond (a denial's wait is never zero).
    #[inline(always)]
    pub(crate) fn at_least_1ns(self) -> Nanos {
        self.max(Nanos::from_u64(1))
    }

    /// The count as a `u128`.
    #[cfg(test)]
    pub(crate) const fn as_u128(self) -> u128 {
        (self.hi as u128) << 64 | self.lo as u128
    }

    /// The wait as a `Duration`, exactly, with no 128-bit division (on a 32-bit MCU that is a
    /// library call of about 800 bytes): `ns = hi · 2^64 + lo` and `2^64 = Q · 10^9 + R`, so the
    /// seconds are `hi · Q` plus the seconds of `hi · R` (< 2^62) and of `lo`, divisions of
    /// 64-bit values by a constant.
    pub(crate) const fn to_duration(self) -> Duration {
        // Divisions by 10^9 as multiplications (a 64-bit division is a library call of almost a
        // kilobyte on a 32-bit MCU).
        const BY_NS: Reciprocal = Reciprocal::of(NS);
        if self.hi == 0 {
            let (secs, nanos) = BY_NS.div_rem(self.lo, NS);
            return Duration::new(secs, nanos as u32); // the common case
        }
        const Q: u64 = u64::MAX / NS; // 2^64 = Q · NS + R (u64::MAX % NS is not NS - 1)
        const R: u64 = u64::MAX % NS + 1;
        let hi = self.hi as u64;
        let (t_secs, t_nanos) = BY_NS.div_rem(hi * R, NS);
        let (lo_secs, lo_nanos) = BY_NS.div_rem(self.lo, NS);
        let nanos = t_nanos + lo_nanos; // < 2 · 10^9
        let (carry, nanos) = if nanos >= NS {
            (1, nanos - NS)
        } else {
            (0, nanos)
        };
        // At most `Duration::MAX`'s seconds: no overflow.
        let secs = hi * Q + t_secs + lo_secs + carry;
        Duration::new(secs, nanos as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_trip_exactly() {
        let cases = [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_nanos(u64::MAX),
            Duration::from_nanos(u64::MAX) + Duration::from_nanos(1),
            Duration::new(u64::MAX / 3, 123_456_789),
            Duration::new(18_446_744_073, 709_551_616),
            Duration::new(u64::MAX, 999_999_999),
            Duration::MAX,
        ];
        for d in cases {
            let n = Nanos::from_duration(d);
            assert_eq!(n.as_u128(), d.as_nanos());
            assert_eq!(n.to_duration(), d, "{d:?}");
        }
        // A walk over the high word and around the 10^9 boundaries.
        let mut ns: u128 = 1;
        while ns < Duration::MAX.as_nanos() {
            for delta in [0u128, 1, 999_999_999, 1_000_000_000] {
                let x = ns.saturating_sub(delta);
                let d = Duration::new((x / 1_000_000_000) as u64, (x % 1_000_000_000) as u32);
                assert_eq!(Nanos::from_u128(x).to_duration(), d, "{x}");
            }
            ns = ns * 3 + 7;
        }
    }

    #[test]
    fn from_u128_saturates_at_duration_max() {
        assert_eq!((MAX.hi, MAX.lo), (999_999_999, u64::MAX));
        let max = Duration::MAX.as_nanos();
        assert_eq!(Nanos::from_u128(max).to_duration(), Duration::MAX);
        assert_eq!(Nanos::from_u128(max + 1), MAX);
        assert_eq!(Nanos::from_u128(u128::MAX), MAX);
        assert_eq!(Nanos::from_u128(1 << 96), MAX);
    }

    #[test]
    fn products_are_exact() {
        let periods = [
            1u64,
            7,
            1_000_000_000,
            u32::MAX as u64,
            1 << 40,
            (1 << 63) - 1,
            u64::MAX,
        ];
        let ticks = [0u32, 1, 2, 1000, u32::MAX];
        for p in periods {
            for t in ticks {
                let exact = u128::from(p) * u128::from(t);
                assert_eq!(Nanos::product(p, t), exact, "{p} x {t}");
            }
        }
    }

    #[test]
    fn addition_and_order() {
        assert_eq!(
            Nanos::from_u64(u64::MAX)
                .saturating_add(Nanos::from_u64(2))
                .as_u128(),
            u128::from(u64::MAX) + 2
        );
        assert_eq!(MAX.saturating_add(Nanos::from_u64(1)), MAX);
        assert_eq!(Nanos::ZERO.at_least_1ns(), Nanos::from_u64(1));
        assert!(Nanos::from_u128(1 << 64) > Nanos::from_u64(u64::MAX));
    }
}
