//! Division by a divisor fixed at creation, by multiplication: [`Reciprocal`]. Pure 64-bit
//! arithmetic, used by the ticker (elapsed time → ticks), by [`Nanos`](crate::nanos::Nanos)
//! (nanoseconds → seconds) and by the sliding window (segment → ring slot): a 64-bit division is
//! a slow instruction, and a library routine of almost a kilobyte on a 32-bit MCU.

/// Elapsed times below this (2^63, the clock's horizon) divide with one correction.
const HORIZON: u64 = 1 << 63;

/// `floor((2^64 - 1) / d)` for a divisor `d >= 1`: with it, `e / d` is the high half of
/// `e · m` plus at most 2 (`m · d` lies in `(2^64 - 1 - d, 2^64 - 1]`, so
/// `e/d - e·m/2^64 < e·(d + 1)/(d·2^64) <= 2` for any 64-bit `e`), and never more than the
/// quotient. The ticker corrects the estimate with the remainder, so the result is exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reciprocal(u64);

impl Reciprocal {
    /// The reciprocal of `d >= 1`: one division, at creation (in a `const` constructor, at
    /// compile time).
    pub(crate) const fn of(d: u64) -> Reciprocal {
        Reciprocal(u64::MAX / d)
    }

    /// [`div_rem`](Self::div_rem) of an elapsed time, below 2^63 (the clock's horizon,
    /// `ticks::HORIZON_NS`): there the estimate is off by at most 1
    /// (`e·(d + 1)/(d·2^64) < (d + 1)/(2d) <= 1`), so one correction.
    #[inline]
    pub(crate) const fn div_rem_elapsed(self, e: u64, d: u64) -> (u64, u64) {
        debug_assert!(e < HORIZON);
        let q = mul_high(e, self.0);
        let r = e - q * d;
        if r >= d {
            (q + 1, r - d)
        } else {
            (q, r)
        }
    }

    /// `(e / d, e % d)` for the `d` this is the reciprocal of: one multiplication for the
    /// estimate, one for the remainder, at most two corrections.
    #[inline]
    pub(crate) const fn div_rem(self, e: u64, d: u64) -> (u64, u64) {
        let mut q = mul_high(e, self.0);
        // `q · d <= e`: no overflow.
        let mut r = e - q * d;
        // Two steps written out, not a loop: a compiler turns a loop of subtractions back into
        // the division this avoids.
        if r >= d {
            q += 1;
            r -= d;
            if r >= d {
                q += 1;
                r -= d;
            }
        }
        (q, r)
    }
}

/// The high 64 bits of the 128-bit product `a · b`.
#[inline(always)]
const fn mul_high(a: u64, b: u64) -> u64 {
    #[cfg(target_pointer_width = "64")]
    {
        ((a as u128 * b as u128) >> 64) as u64
    }
    #[cfg(not(target_pointer_width = "64"))]
    {
        mul_high_halves(a, b)
    }
}

/// [`mul_high`] from four 32 × 32 → 64-bit products, for 32-bit targets, where a 128-bit
/// multiplication is a library call.
#[inline(always)]
#[cfg_attr(target_pointer_width = "64", allow(dead_code))] // tested on every target
const fn mul_high_halves(a: u64, b: u64) -> u64 {
    let (a1, a0) = (a >> 32, a & 0xFFFF_FFFF);
    let (b1, b0) = (b >> 32, b & 0xFFFF_FFFF);
    let (low, cross1, cross2) = (a0 * b0, a1 * b0, a0 * b1);
    let mid = (low >> 32) + (cross1 & 0xFFFF_FFFF) + (cross2 & 0xFFFF_FFFF);
    a1 * b1 + (cross1 >> 32) + (cross2 >> 32) + (mid >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HORIZON_NS: u64 = HORIZON;

    #[test]
    fn reciprocal_division_is_exact() {
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let divisors = [
            1u64,
            2,
            3,
            7,
            10,
            1_000,
            999_999_937,
            1_000_000_000,
            u64::from(u32::MAX),
            1 << 32,
            (1 << 32) + 1,
            3_600_000_000_000,
            (1 << 62) + 12345,
            HORIZON_NS - 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        for d in divisors {
            let r = Reciprocal::of(d);
            let mut es = vec![0, 1, d - 1, d, d.saturating_add(1), u64::MAX, u64::MAX - 1];
            es.extend((1..=3).map(|k: u64| k.saturating_mul(d)));
            es.push((u64::MAX / d) * d);
            es.push(HORIZON_NS - 1);
            es.push((HORIZON_NS - 1) / d * d);
            es.push(((HORIZON_NS - 1) / d * d).saturating_sub(1));
            es.push(((u64::MAX / d) * d).wrapping_sub(1));
            for _ in 0..2_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                es.push(x >> (x % 64));
            }
            for e in es {
                assert_eq!(r.div_rem(e, d), (e / d, e % d), "{e} / {d}");
                if e < HORIZON_NS {
                    assert_eq!(r.div_rem_elapsed(e, d), (e / d, e % d), "{e} / {d}");
                }
            }
        }
        // Random divisors of every magnitude, each with random dividends of every magnitude.
        for _ in 0..500 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let d = (x >> (x % 64)).max(1);
            let r = Reciprocal::of(d);
            for _ in 0..200 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let e = x >> (x % 64);
                assert_eq!(r.div_rem(e, d), (e / d, e % d), "{e} / {d}");
                let e = e >> 1; // below the horizon
                assert_eq!(r.div_rem_elapsed(e, d), (e / d, e % d), "{e} / {d}");
            }
        }
        // The 32-bit targets' high product agrees with the 128-bit one.
        for (a, b) in [
            (u64::MAX, u64::MAX),
            (x, x.rotate_left(7)),
            (1 << 63, 3),
            (0, 5),
        ] {
            let high = ((u128::from(a) * u128::from(b)) >> 64) as u64;
            assert_eq!(mul_high_halves(a, b), high);
            assert_eq!(mul_high(a, b), high);
        }
    }
}
