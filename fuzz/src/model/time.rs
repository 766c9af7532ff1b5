//! How a rate limiter reads its clock.
//!
//! Periods count from the limiter's creation instant. The clock is a 64-bit nanosecond counter
//! that may wrap past `u64::MAX`: the time since creation is the forward distance from the
//! creation instant to the reading, modulo 2^64. A distance of 2^63 ns (292 years) or more cannot
//! be real elapsed time; it is a reading *earlier* than creation, i.e. a clock that stepped
//! backwards, and counts as no time at all (tick 0).

/// 2^64: the clock's range.
pub const CLOCK_RANGE: u128 = 1 << 64;

/// Forward distances at or past 2^63 ns are backwards steps.
pub const BACKWARDS_FROM: u128 = 1 << 63;

/// Nanoseconds from the creation instant `origin` to the reading `now`.
pub fn elapsed(origin: u64, now: u64) -> u128 {
    let forward = (u128::from(now) + CLOCK_RANGE - u128::from(origin)) % CLOCK_RANGE;
    if forward >= BACKWARDS_FROM {
        0
    } else {
        forward
    }
}

/// `a / b` rounded up (`b > 0`).
pub fn div_ceil(a: u128, b: u128) -> u128 {
    assert!(b > 0);
    a / b + u128::from(a % b != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings() {
        assert_eq!(elapsed(100, 125), 25);
        assert_eq!(elapsed(100, 99), 0); // before creation
        assert_eq!(elapsed(u64::MAX - 4, 15), 20); // the clock wrapped
        assert_eq!(elapsed(0, (1 << 63) - 1), (1 << 63) - 1);
        assert_eq!(elapsed(0, 1 << 63), 0);
        assert_eq!(div_ceil(7, 2), 4);
        assert_eq!(div_ceil(8, 2), 4);
        assert_eq!(div_ceil(0, 2), 0);
    }
}
