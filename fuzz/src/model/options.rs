//! The option rules, as a list per limiter: the first rule broken is the error.
//!
//! Written from the field docs of each options type and the variants of `OptionsError`:
//! - a limit of 0 → `ZeroLimit`; tokens per period of 0 → `ZeroTokensPerPeriod`;
//! - a period or window of 0 → `ZeroPeriod`; 2^63 ns or longer → `PeriodTooLong` (a limiter
//!   reads its clock as stepped back from 2^63 ns after creation on, so such a period would
//!   never end);
//! - sliding window: 0 segments → `ZeroSegments`; more than the ring capacity `N` →
//!   `TooManySegments { max: N }`; a segment (window / segments, whole ns) of 0 ns →
//!   `SegmentTooShort`.
//! - the queue limit and order are not validated (no value is invalid).
//!
//! The order in which rules are checked is the order of each `validate` (limits, then counts,
//! then the period), which the docs do not state.

use core::time::Duration;

use tollgate::OptionsError;

/// The period in nanoseconds, or why it is refused.
pub fn period_ns(d: Duration) -> Result<u64, OptionsError> {
    let ns: u128 = d.as_nanos();
    if ns >= 1 << 63 {
        Err(OptionsError::PeriodTooLong)
    } else if ns == 0 {
        Err(OptionsError::ZeroPeriod)
    } else {
        Ok(ns as u64)
    }
}

/// Concurrency limiter options.
pub fn concurrency(limit: u32) -> Result<(), OptionsError> {
    if limit == 0 {
        return Err(OptionsError::ZeroLimit);
    }
    Ok(())
}

/// Token bucket options; the period in ns.
pub fn token_bucket(limit: u32, per_period: u32, period: Duration) -> Result<u64, OptionsError> {
    if limit == 0 {
        return Err(OptionsError::ZeroLimit);
    }
    if per_period == 0 {
        return Err(OptionsError::ZeroTokensPerPeriod);
    }
    period_ns(period)
}

/// Fixed window options; the window in ns.
pub fn fixed_window(limit: u32, window: Duration) -> Result<u64, OptionsError> {
    if limit == 0 {
        return Err(OptionsError::ZeroLimit);
    }
    period_ns(window)
}

/// Sliding window options on a ring of `cap` slots; the segment in ns.
pub fn sliding_window(
    limit: u32,
    window: Duration,
    segments: u32,
    cap: usize,
) -> Result<u64, OptionsError> {
    if limit == 0 {
        return Err(OptionsError::ZeroLimit);
    }
    if segments == 0 {
        return Err(OptionsError::ZeroSegments);
    }
    if segments as usize > cap {
        return Err(OptionsError::TooManySegments { max: cap });
    }
    let window = period_ns(window)?;
    let segment = window / u64::from(segments);
    if segment == 0 {
        return Err(OptionsError::SegmentTooShort);
    }
    Ok(segment)
}
