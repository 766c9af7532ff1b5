//! Unit tests of the sliding window's limiter: both header layouts, the quick denial, the
//! RetryAfter snapshots.
use super::*;
use crate::clock::ManualClock;
use crate::nanos::Nanos;
use crate::state_cell::StateCell;
use crate::wait::Source;
use crate::{Lease, Limiter, Replenishing};

fn at(clock: &ManualClock, ns: u64) {
    clock.set(crate::clock::Instant::from_nanos(ns));
}

/// The 64-bit and 128-bit headers hold the same state through the same transitions: a
/// deterministic pseudo-random walk of takes, give-backs, slides, flag changes and
/// backwards readings, compared state by state, on configurations at the edge of the 64-bit
/// layout (its largest count and its last segment before the horizon).
#[test]
#[cfg(not(tollgate_cs_cells))] // only the 128-bit header there
fn both_header_layouts_follow_the_same_transitions() {
    use super::limiter_core::HeaderWord;
    use super::state::{Denied, Header, Shape};
    use crate::state_cell::packed;
    let sec = 1_000_000_000u64;
    for (limit, segment_ns, segments) in [
        (1u32, 1_000u64, 4u64),
        (16_383, sec, 10),
        (7, 1 << 20, 1),
        ((1 << 19) - 1, 900 * sec, 4),
    ] {
        let width = Header::narrow_width(limit, segment_ns).expect("fits");
        assert_eq!(
            Header::narrow_width(limit + 1, segment_ns).is_some(),
            limit + 1 < 1 << width
        );
        let narrow: HeaderWord = packed!(Header::EMPTY, Some(width));
        let wide: HeaderWord = packed!(Header::EMPTY, None);
        assert_eq!(narrow.max_field(), (1 << width) - 1);
        let s = Shape { limit, segments };
        let max_tick = (crate::ticks::HORIZON_NS - 1) / segment_ns;
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ u64::from(limit);
        let mut ring = std::collections::HashMap::new();
        for step in 0..3_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = match x % 4 {
                0 => step / 3,
                1 => max_tick - (x >> 8) % 8,
                2 => (x >> 4) % (max_tick + 1),
                _ => narrow.load().tick,
            };
            let n = ((x >> 20) as u32) % (limit + 1);
            // The ring as the limiter keeps it: a header that moves on freezes its count.
            let frozen = |j: u64| ring.get(&j).copied().unwrap_or(0);
            let op = |h: Header| -> Result<(Header, ()), Denied> {
                match (x >> 40) % 6 {
                    0 | 1 => h.try_take(k, n, s, x & 1 == 0, frozen).map(|h| (h, ())),
                    2 => Ok((h.give_back(k, n), ())),
                    3 => Ok((h.at(k, s, frozen), ())),
                    4 => Ok((h.with_waiters(x & 2 == 0), ())),
                    // A debit, up to the bound the narrow field allows (its largest count).
                    5 if x & 4 == 0 => {
                        let bound =
                            crate::core_common::window_debt_bound(limit, narrow.max_field());
                        Ok((h.take_debt(k, n, s, bound, frozen).unwrap_or(h), ()))
                    }
                    _ if step % 1_000 == 999 => Ok((h.close(), ())),
                    _ => Ok((h, ())),
                }
            };
            let before = wide.load();
            let a = narrow.transition(op).map(|(h, ())| h);
            let b = wide.transition(op).map(|(h, ())| h);
            assert_eq!(a, b, "step {step}: limit {limit}, segment {segment_ns}");
            let after = wide.load();
            if after.tick > before.tick {
                ring.insert(before.tick, before.cur);
            }
            assert_eq!(narrow.load(), wide.load(), "step {step}");
        }
    }
}

/// The quick denial (every counted permit in the current segment) answers what the general
/// path answers on the same header and instant (`peek` always takes the general path).
#[test]
fn the_quick_denial_is_the_general_answer() {
    for (limit, period, segments) in [
        (1u32, 1_000u64, 4u32),
        (5, 10, 1),
        (10, 7, 3),
        (3, 1 << 40, 2),
    ] {
        let window = Duration::from_nanos(period * u64::from(segments));
        let clock = ManualClock::new();
        let opts = SlidingWindowOptions::new(limit, window, segments);
        let l: SlidingWindowLimiter<_, 4> =
            SlidingWindowLimiter::with_capacity(opts, &clock).unwrap();
        for (round, taken) in [(5u64, limit), (9, 1), (20, limit.div_ceil(2))] {
            // A fresh segment, long after the last: nothing earlier in the window.
            at(&clock, round * period * u64::from(segments) + 1);
            l.try_acquire(taken).unwrap().forget();
            for into in [1, period / 2, period - 1] {
                at(&clock, round * period * u64::from(segments) + into);
                for n in 1..=limit {
                    let general = crate::limiter::Peek::peek(&l, n);
                    let header = l.core.header.load();
                    assert_eq!(header.prev, 0);
                    let quick = l.try_acquire(n).map(Lease::forget).map(|_| ());
                    assert_eq!(quick, general, "limit {limit} n {n} into {into}");
                    if quick.is_ok() {
                        l.give_back(n, header.tick); // back to the state peeked at
                    }
                }
            }
        }
    }
}

/// A denial behind earlier segments (answered from the ring: by the quick path, or by the
/// general one's walk for a lone newcomer) waits exactly as long as the whole-window
/// simulation ([`Header::slides_to_serve`]) says, on a ring of a power-of-two size (indexed by
/// a mask, slots outliving the window) and of another size (indexed modulo `segments`).
#[test]
fn a_denial_behind_earlier_segments_is_the_simulated_answer() {
    fn check<const N: usize>(limit: u32, period: u64, segments: u32) {
        let window = Duration::from_nanos(period * u64::from(segments));
        let clock = ManualClock::new();
        let opts = SlidingWindowOptions::new(limit, window, segments);
        let l: SlidingWindowLimiter<_, N> =
            SlidingWindowLimiter::with_capacity(opts, &clock).unwrap();
        // Permits spread over the segments of several windows, one more each segment while
        // they fit; every instant of the last segments probed with every count.
        let mut t = 1;
        for seg in 0..u64::from(segments) * 3 {
            at(&clock, seg * period + t % period);
            t = t * 7 + 3;
            if let Ok(lease) = l.try_acquire((seg % u64::from(limit)) as u32 + 1) {
                lease.forget();
            }
            for n in 1..=limit {
                let alone = l.core.wait_behind_waiters(&mut core::iter::empty(), n);
                let header = l.core.header.load();
                let peeked = crate::limiter::Peek::peek(&l, n).map(|_| ());
                match l.try_acquire(n) {
                    Ok(lease) => {
                        assert!(peeked.is_ok() && alone.is_zero());
                        lease.forget();
                        l.give_back(n, header.tick);
                    }
                    Err(r) => {
                        let (seg, n) = (seg, n);
                        assert_eq!(r.retry_after(), Some(alone), "N {N} seg {seg} n {n}");
                        assert_eq!(peeked.unwrap_err().retry_after(), Some(alone));
                    }
                }
            }
        }
    }
    for (limit, period, segments) in [(10, 1_000, 4), (7, 10, 3), (5, 3, 2), (6, 100, 1)] {
        check::<4>(limit, period, segments);
        check::<5>(limit, period, segments);
        check::<16>(limit, period, segments);
    }
}

/// Issue 9, item 2: a denied thread computes its RetryAfter after the header has moved on
/// three segments, so every ring slot of the window it decided on now holds a later
/// segment. Reading those slots against the stale header found no permit coming back and
/// underflowed (a panic in debug builds, ~292,000 years in release). The RetryAfter must come
/// from one consistent snapshot — here the newer header's — counted from its segment.
#[test]
fn retry_after_from_a_header_the_window_has_slid_past() {
    let clock = ManualClock::new();
    let opts = SlidingWindowOptions::new(2, Duration::from_nanos(30), 3);
    let l: SlidingWindowLimiter<_, 3> = SlidingWindowLimiter::with_capacity(opts, &clock).unwrap();
    let _ = l.try_acquire(2).unwrap();
    at(&clock, 10);
    l.replenish(); // header at segment 1, nothing taken there; segment 0 frozen: 2
    let decided = l.core.header.load();
    assert_eq!((decided.tick, decided.cur, decided.prev), (1, 0, 2));
    assert!(l.try_acquire(1).is_err()); // what the preempted thread decided
                                        // Meanwhile: 1 permit in segment 3, and segment 4 freezes it into segment 0's slot.
    at(&clock, 30);
    let _ = l.try_acquire(1).unwrap();
    at(&clock, 40);
    let _ = l.try_acquire(1).unwrap();
    // The thread resumes with its reading (segment 1, 0 ns in) and its header: the window
    // (segments 2..=4 holding 0, 1, 1) has room for 1 when segment 3 leaves, at segment 6,
    // two segments after the start of segment 4 (where real time is at least).
    let wait = l.core.retry_after(1, 0, decided, 1, 1, false);
    assert_eq!(wait, Nanos::from_u64(20));
    at(&clock, 59);
    assert!(l.try_acquire(1).is_err());
    at(&clock, 60);
    assert!(l.try_acquire(1).is_ok());
}

/// A debit past the limit (issue 38) is counted in the current segment: the window refuses
/// every request until enough of its oldest segments have left for the count to fall below the
/// limit by what is asked, the segment holding the debit last, and RetryAfter says exactly
/// when; the debt is bounded by one limit, and a settle past it takes nothing.
#[test]
fn a_debit_goes_into_debt_that_the_window_slides_out() {
    use crate::lease::SettleError;
    let clock = ManualClock::new();
    // 10 per 4 s, in 1 s segments.
    let opts = SlidingWindowOptions::new(10, Duration::from_secs(4), 4);
    let l = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
    let sec = 1_000_000_000u64;
    l.try_acquire(3).unwrap().forget(); // segment 0: 3
    at(&clock, sec);
    let mut lease = l.try_acquire(4).unwrap(); // segment 1: 4
    let mut more = l.try_acquire(1).unwrap(); // segment 1: 5
    lease.settle(12).unwrap(); // segment 1: 13, the window 16: 6 of debt
    assert_eq!(lease.permits(), 12);
    assert_eq!(l.available_permits(), 0);
    at(&clock, sec + sec / 2);
    // 1 permit: 16 + 1 - 10 = 7 must leave: segment 0's 3 (at 4 s) are not enough, segment 1's
    // 13 (at 5 s) are. 3.5 s.
    let r = l.try_acquire(1).unwrap_err();
    assert_eq!(r.retry_after(), Some(Duration::from_millis(3_500)));
    // A probe waits as long; the quick path (same segment) answers the same.
    assert_eq!(
        crate::limiter::Peek::peek(&l, 1).unwrap_err().retry_after(),
        Some(Duration::from_millis(3_500))
    );
    // Past the bound (the window at most twice the limit, 20): refused, nothing taken.
    assert_eq!(more.settle(6), Err(SettleError::DebtLimit));
    assert_eq!(more.permits(), 1);
    more.settle(5).unwrap(); // the window at exactly 20
    assert_eq!(l.core.header.load().used(), 20);
    // Segment 0 leaves at 4 s: 17 left, still in debt.
    at(&clock, 4 * sec);
    assert_eq!(l.available_permits(), 0);
    assert_eq!(
        l.try_acquire(1).unwrap_err().retry_after(),
        Some(Duration::from_secs(1))
    );
    // A reconfiguration keeps the debt; the partition is not idle while it is owed.
    l.reconfigure(SlidingWindowOptions::new(10, Duration::from_secs(4), 4))
        .unwrap();
    assert_eq!(l.idle_duration(), None);
    // Segment 1 (17) leaves at 5 s: the window is empty again.
    at(&clock, 5 * sec);
    assert_eq!(l.available_permits(), 10);
    assert_eq!(l.idle_duration(), Some(Duration::ZERO));
    l.try_acquire(10).unwrap().forget();
}

/// The debt bound is one limit, less where the 64-bit header's count fields could not hold
/// twice the limit.
#[test]
#[cfg(not(tollgate_cs_cells))]
fn the_debt_bound_is_what_the_count_fields_hold() {
    let clock = ManualClock::new();
    // 1 s segments: 14-bit counts, at most 16,383.
    for (limit, bound) in [(10u32, 10u32), (8_191, 8_191), (10_000, 6_383), (16_383, 0)] {
        let opts = SlidingWindowOptions::new(limit, Duration::from_secs(4), 4);
        let l = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
        assert_eq!(l.core.header.max_field(), 16_383, "limit {limit}");
        assert_eq!(l.core.debt_bound(limit), bound);
    }
}
