//! The rules of ../shared/reference/dotnet-semantics.md §1–§9 that apply without queueing, each
//! on a manual clock. Where tollgate deliberately differs (DESIGN.md "Deliberately better than
//! .NET"), the test says so.

use core::time::Duration;
use tollgate::*;

const NS: Duration = Duration::from_nanos(1);
const SEC: Duration = Duration::from_secs(1);

fn concurrency(clock: &ManualClock, limit: u32) -> ConcurrencyLimiter<&ManualClock> {
    ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(limit), clock).unwrap()
}
fn bucket(
    clock: &ManualClock,
    limit: u32,
    per: u32,
    period: Duration,
) -> TokenBucketLimiter<&ManualClock> {
    TokenBucketLimiter::with_clock(TokenBucketOptions::new(limit, per, period), clock).unwrap()
}
fn fixed(clock: &ManualClock, limit: u32, window: Duration) -> FixedWindowLimiter<&ManualClock> {
    FixedWindowLimiter::with_clock(FixedWindowOptions::new(limit, window), clock).unwrap()
}
fn sliding(
    clock: &ManualClock,
    limit: u32,
    window: Duration,
    segs: u32,
) -> SlidingWindowLimiter<&ManualClock> {
    SlidingWindowLimiter::with_clock(SlidingWindowOptions::new(limit, window, segs), clock).unwrap()
}

/// One of each limiter, limit 2, on `clock`.
fn all_four(clock: &ManualClock) -> Vec<Box<dyn Limiter + '_>> {
    vec![
        Box::new(concurrency(clock, 2)),
        Box::new(bucket(clock, 2, 1, SEC)),
        Box::new(fixed(clock, 2, SEC)),
        Box::new(sliding(clock, 2, SEC, 2)),
    ]
}

fn reason<T: core::fmt::Debug>(r: Result<T, Rejection>) -> Reason {
    r.unwrap_err().reason()
}

// §1 Common model -------------------------------------------------------------------------

#[test]
fn request_above_the_limit_is_its_own_rejection_even_when_closed() {
    let clock = ManualClock::new();
    for l in all_four(&clock) {
        assert_eq!(reason(l.try_acquire(3)), Reason::ExceedsLimit);
        assert_eq!(reason(l.try_acquire(u32::MAX)), Reason::ExceedsLimit);
        assert_eq!(l.try_acquire(3).unwrap_err().retry_after(), None);
        l.close();
        // .NET checks the limit before disposal; so do we.
        assert_eq!(reason(l.try_acquire(3)), Reason::ExceedsLimit);
        assert_eq!(reason(l.try_acquire(1)), Reason::Closed);
        assert_eq!(reason(l.try_acquire(0)), Reason::Closed);
        assert!(l.is_closed());
        // Statistics stay readable after close (.NET throws; we count every rejection).
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (0, 6));
    }
}

#[test]
fn statistics_count_every_grant_and_every_rejection_including_probes() {
    let clock = ManualClock::new();
    for l in all_four(&clock) {
        let _a = l.try_acquire(0).unwrap(); // probe succeeds: counted
        let _b = l.try_acquire(2).unwrap();
        assert_eq!(reason(l.try_acquire(0)), Reason::Exhausted); // probe fails: counted
        assert_eq!(reason(l.try_acquire(1)), Reason::Exhausted);
        let s = l.statistics();
        assert_eq!(
            s,
            Statistics {
                available_permits: 0,
                queued_permits: 0,
                total_successful: 2,
                total_failed: 2
            }
        );
        assert_eq!(l.available_permits(), 0);
    }
}

#[test]
fn limiters_start_idle_and_probes_do_not_end_idleness() {
    let clock = ManualClock::new();
    let limiters = all_four(&clock);
    clock.advance(5 * NS);
    for l in &limiters {
        assert_eq!(l.idle_duration(), Some(5 * NS));
        let _ = l.try_acquire(0).unwrap();
        assert_eq!(l.idle_duration(), Some(5 * NS));
        let _lease = l.try_acquire(1).unwrap();
        assert_eq!(l.idle_duration(), None);
    }
}

#[test]
fn idle_again_when_fully_available() {
    let clock = ManualClock::new();
    // Concurrency: on the release that returns the last permit.
    let c = concurrency(&clock, 2);
    let a = c.try_acquire(1).unwrap();
    let b = c.try_acquire(1).unwrap();
    clock.advance(SEC);
    drop(a);
    assert_eq!(c.idle_duration(), None);
    clock.advance(SEC);
    drop(b);
    clock.advance(3 * SEC);
    assert_eq!(c.idle_duration(), Some(3 * SEC));

    // Token bucket: since the start of the period in which it filled (no timer needed).
    let clock = ManualClock::new();
    let t = bucket(&clock, 4, 1, SEC);
    let _ = t.try_acquire(3).unwrap();
    clock.advance(2 * SEC + 500 * Duration::from_millis(1));
    assert_eq!(t.idle_duration(), None); // 3 tokens: not full yet
    clock.advance(SEC);
    assert_eq!(t.idle_duration(), Some(Duration::from_millis(500))); // full at 3 s
                                                                     // Fixed window: since the next window began.
    let clock = ManualClock::new();
    let f = fixed(&clock, 4, SEC);
    clock.advance(SEC / 2);
    let _ = f.try_acquire(1).unwrap();
    assert_eq!(f.idle_duration(), None);
    clock.advance(SEC);
    assert_eq!(f.idle_duration(), Some(SEC / 2));
    // Sliding window: since the last used segment left the window.
    let clock = ManualClock::new();
    let s = sliding(&clock, 4, 4 * SEC, 4);
    let _ = s.try_acquire(1).unwrap();
    clock.advance(SEC);
    let _ = s.try_acquire(1).unwrap(); // segment 1
    clock.advance(4 * SEC + SEC / 4); // segment 1 left at 5 s
    assert_eq!(s.idle_duration(), Some(SEC / 4));
}

// §3 ConcurrencyLimiter ---------------------------------------------------------------------

#[test]
fn concurrency_lease_returns_its_permits_exactly_once() {
    let clock = ManualClock::new();
    let c = concurrency(&clock, 3);
    let lease = c.try_acquire(2).unwrap();
    assert!(lease.returns_permits());
    assert_eq!(c.available_permits(), 1);
    drop(lease);
    assert_eq!(c.available_permits(), 3);
    // A probe's lease holds nothing and returns nothing.
    let probe = c.try_acquire(0).unwrap();
    assert!(!probe.returns_permits());
    drop(probe);
    assert_eq!(c.available_permits(), 3);
    // A forgotten lease keeps its permits until released by hand.
    let n = c.try_acquire(1).unwrap().forget();
    assert_eq!(c.available_permits(), 2);
    c.release(n);
    assert_eq!(c.available_permits(), 3);
    // Releasing more than was taken never lifts the count above the limit.
    c.release(100);
    assert_eq!(c.available_permits(), 3);
}

#[test]
fn concurrency_rejections_carry_no_retry_after_and_probes_need_a_free_permit() {
    let clock = ManualClock::new();
    let c = concurrency(&clock, 1);
    let _held = c.try_acquire(1).unwrap();
    let r = c.try_acquire(1).unwrap_err();
    assert_eq!((r.reason(), r.retry_after()), (Reason::Exhausted, None));
    assert_eq!(reason(c.try_acquire(0)), Reason::Exhausted);
}

#[test]
fn leases_outlive_close() {
    let clock = ManualClock::new();
    let c = concurrency(&clock, 2);
    let lease = c.try_acquire(2).unwrap();
    c.close();
    drop(lease); // no panic, permits counted back
    assert_eq!(c.available_permits(), 2);
    assert_eq!(reason(c.try_acquire(1)), Reason::Closed);
}

// §4 TokenBucket ------------------------------------------------------------------------------

#[test]
fn token_bucket_retry_after_is_exact_and_rounds_up() {
    let clock = ManualClock::new();
    // .NET: L=2, T=2, P=20 s, empty, request 2 → 20 s.
    let t = bucket(&clock, 2, 2, 20 * SEC);
    let _ = t.try_acquire(2).unwrap();
    assert_eq!(t.try_acquire(2).unwrap_err().retry_after(), Some(20 * SEC));
    // 5 s into the period: 15 s to go (.NET ignores elapsed time; we count it).
    clock.advance(5 * SEC);
    assert_eq!(t.try_acquire(1).unwrap_err().retry_after(), Some(15 * SEC));
    // A 0-permit probe on an empty bucket also says when.
    assert_eq!(t.try_acquire(0).unwrap_err().retry_after(), Some(15 * SEC));
    // Waiting exactly that long is enough; 1 ns less is not.
    clock.advance(15 * SEC - NS);
    assert!(t.try_acquire(1).is_err());
    clock.advance(NS);
    assert!(t.try_acquire(2).is_ok());
}

#[test]
fn token_bucket_needs_as_many_periods_as_missing_tokens_require() {
    let clock = ManualClock::new();
    // 1 token per 1 ms: 5 missing tokens are 5 ms away (.NET's floor division would say less).
    let t = bucket(&clock, 10, 1, Duration::from_millis(1));
    let _ = t.try_acquire(10).unwrap();
    assert_eq!(
        t.try_acquire(5).unwrap_err().retry_after(),
        Some(Duration::from_millis(5))
    );
    // 3 tokens per period, 7 missing: 3 periods.
    let t = bucket(&clock, 10, 3, SEC);
    let _ = t.try_acquire(10).unwrap();
    assert_eq!(t.try_acquire(7).unwrap_err().retry_after(), Some(3 * SEC));
}

#[test]
fn token_bucket_caps_at_its_limit_even_when_a_period_adds_more() {
    let clock = ManualClock::new();
    let t = bucket(&clock, 3, 100, SEC);
    let _ = t.try_acquire(1).unwrap();
    clock.advance(SEC);
    assert_eq!(t.available_permits(), 3);
    assert_eq!(t.replenishment_period(), SEC);
}

#[test]
fn token_bucket_leases_return_nothing() {
    let clock = ManualClock::new();
    let t = bucket(&clock, 3, 1, SEC);
    let lease = t.try_acquire(2).unwrap();
    assert!(!lease.returns_permits());
    drop(lease);
    assert_eq!(t.available_permits(), 1);
}

#[test]
fn replenish_reports_the_permits_time_has_brought() {
    let clock = ManualClock::new();
    let t = bucket(&clock, 5, 1, SEC);
    let f = fixed(&clock, 5, SEC);
    let s = sliding(&clock, 5, SEC, 1);
    for l in [&t as &dyn Replenishing, &f, &s] {
        let _ = l.try_acquire(5).unwrap();
        assert_eq!(l.replenish(), 0);
    }
    clock.advance(SEC);
    assert_eq!((t.replenish(), f.replenish(), s.replenish()), (1, 5, 5));
}

// §5 FixedWindow ------------------------------------------------------------------------------

#[test]
fn fixed_window_retry_after_is_the_next_boundary() {
    let clock = ManualClock::new();
    let f = fixed(&clock, 3, 10 * SEC);
    let _ = f.try_acquire(2).unwrap();
    clock.advance(4 * SEC);
    // 1 left; asking for 2 waits for the next window, 6 s away.
    assert_eq!(f.try_acquire(2).unwrap_err().retry_after(), Some(6 * SEC));
    clock.advance(6 * SEC);
    assert_eq!(f.available_permits(), 3);
    assert_eq!(f.replenishment_period(), 10 * SEC);
}

#[test]
fn fixed_windows_are_aligned_to_creation() {
    let clock = ManualClock::starting_at(Instant::from_nanos(7));
    let f = fixed(&clock, 1, 10 * NS);
    clock.advance(9 * NS); // t = 16: still the first window [7, 17)
    let _ = f.try_acquire(1).unwrap();
    assert_eq!(f.try_acquire(1).unwrap_err().retry_after(), Some(NS));
    clock.advance(NS);
    assert!(f.try_acquire(1).is_ok());
}

// §6 SlidingWindow ----------------------------------------------------------------------------

#[test]
fn sliding_window_gives_permits_back_exactly_when_their_segment_leaves() {
    let clock = ManualClock::new();
    let s = sliding(&clock, 4, 4 * SEC, 4);
    let _ = s.try_acquire(1).unwrap(); // segment 0
    clock.advance(SEC);
    let _ = s.try_acquire(3).unwrap(); // segment 1
    assert_eq!(s.try_acquire(1).unwrap_err().retry_after(), Some(3 * SEC));
    assert_eq!(s.try_acquire(2).unwrap_err().retry_after(), Some(4 * SEC));
    clock.advance(3 * SEC - NS);
    assert_eq!(s.available_permits(), 0);
    clock.advance(NS);
    assert_eq!(s.available_permits(), 1);
    clock.advance(SEC);
    assert_eq!(s.available_permits(), 4);
}

#[test]
fn sliding_window_segment_is_the_whole_nanoseconds_of_window_over_segments() {
    let clock = ManualClock::new();
    let s = sliding(&clock, 1, 10 * NS, 3);
    assert_eq!(s.replenishment_period(), 3 * NS);
}

#[test]
fn sliding_window_over_a_long_gap_forgets_everything() {
    let clock = ManualClock::new();
    let s = sliding(&clock, 4, 4 * SEC, 4);
    let _ = s.try_acquire(4).unwrap();
    clock.advance(Duration::from_secs(10 * 365 * 24 * 3600));
    assert_eq!(s.available_permits(), 4);
    assert!(s.try_acquire(4).is_ok());
}

// §9 Options ----------------------------------------------------------------------------------

#[test]
fn invalid_options_are_typed_errors() {
    let clock = ManualClock::new();
    let c = |o| ConcurrencyLimiter::with_clock(o, &clock).map(|_| ());
    assert_eq!(c(ConcurrencyOptions::new(0)), Err(OptionsError::ZeroLimit));
    let t = |o| TokenBucketLimiter::with_clock(o, &clock).map(|_| ());
    assert_eq!(
        t(TokenBucketOptions::new(0, 1, SEC)),
        Err(OptionsError::ZeroLimit)
    );
    assert_eq!(
        t(TokenBucketOptions::new(1, 0, SEC)),
        Err(OptionsError::ZeroTokensPerPeriod)
    );
    assert_eq!(
        t(TokenBucketOptions::new(1, 1, Duration::ZERO)),
        Err(OptionsError::ZeroPeriod)
    );
    assert_eq!(
        t(TokenBucketOptions::new(1, 1, Duration::MAX)),
        Err(OptionsError::PeriodTooLong)
    );
    let f = |o| FixedWindowLimiter::with_clock(o, &clock).map(|_| ());
    assert_eq!(
        f(FixedWindowOptions::new(0, SEC)),
        Err(OptionsError::ZeroLimit)
    );
    assert_eq!(
        f(FixedWindowOptions::new(1, Duration::ZERO)),
        Err(OptionsError::ZeroPeriod)
    );
    assert_eq!(
        f(FixedWindowOptions::new(1, Duration::MAX)),
        Err(OptionsError::PeriodTooLong)
    );
    let s = |o| SlidingWindowLimiter::<_, 4>::with_capacity(o, &clock).map(|_| ());
    assert_eq!(
        s(SlidingWindowOptions::new(0, SEC, 2)),
        Err(OptionsError::ZeroLimit)
    );
    assert_eq!(
        s(SlidingWindowOptions::new(1, SEC, 0)),
        Err(OptionsError::ZeroSegments)
    );
    assert_eq!(
        s(SlidingWindowOptions::new(1, SEC, 5)),
        Err(OptionsError::TooManySegments { max: 4 })
    );
    assert_eq!(
        s(SlidingWindowOptions::new(1, Duration::ZERO, 2)),
        Err(OptionsError::ZeroPeriod)
    );
    assert_eq!(
        s(SlidingWindowOptions::new(1, NS, 2)),
        Err(OptionsError::SegmentTooShort)
    );
    assert_eq!(
        s(SlidingWindowOptions::new(1, Duration::MAX, 2)),
        Err(OptionsError::PeriodTooLong)
    );
    // A zero queue limit is valid.
    assert!(c(ConcurrencyOptions::new(1).with_queue(0, QueueOrder::NewestFirst)).is_ok());
    // Errors explain themselves.
    assert!(OptionsError::TooManySegments { max: 4 }
        .to_string()
        .contains('4'));
}

// Edges ---------------------------------------------------------------------------------------

#[test]
fn u32_max_permits() {
    let clock = ManualClock::new();
    let c = concurrency(&clock, u32::MAX);
    let a = c.try_acquire(u32::MAX).unwrap();
    assert_eq!(reason(c.try_acquire(1)), Reason::Exhausted);
    drop(a);
    assert_eq!(c.available_permits(), u64::from(u32::MAX));
    let t = bucket(&clock, u32::MAX, u32::MAX, NS);
    let _ = t.try_acquire(u32::MAX).unwrap();
    assert_eq!(t.try_acquire(u32::MAX).unwrap_err().retry_after(), Some(NS));
    let t = bucket(&clock, u32::MAX, 1, NS);
    let _ = t.try_acquire(u32::MAX).unwrap();
    assert_eq!(
        t.try_acquire(u32::MAX).unwrap_err().retry_after(),
        Some(Duration::from_nanos(u64::from(u32::MAX)))
    );
    let s = sliding(&clock, u32::MAX, 2 * NS, 2);
    let _ = s.try_acquire(u32::MAX).unwrap();
    assert_eq!(s.try_acquire(1).unwrap_err().retry_after(), Some(2 * NS));
}

#[test]
fn periods_from_one_nanosecond_to_centuries() {
    let clock = ManualClock::new();
    let century = Duration::from_secs(100 * 365 * 24 * 3600);
    let t = bucket(&clock, 1, 1, century);
    let _ = t.try_acquire(1).unwrap();
    assert_eq!(t.try_acquire(1).unwrap_err().retry_after(), Some(century));
    // The longest window: 2^63 − 1 ns, the last that ends before the horizon of a limiter's
    // clock reading (2^63 ns after creation; longer ones are refused: they could never end).
    let longest = Duration::from_nanos(i64::MAX as u64);
    let f = fixed(&clock, 1, longest);
    let _ = f.try_acquire(1).unwrap();
    assert_eq!(f.try_acquire(1).unwrap_err().retry_after(), Some(longest));
    let t = bucket(&clock, 1, 1, NS);
    for _ in 0..1000 {
        let _ = t.try_acquire(1).unwrap();
        assert!(t.try_acquire(1).is_err());
        clock.advance(NS);
    }
}

#[test]
fn clock_near_u64_max_and_wrapping_past_it() {
    let start = Instant::from_nanos(u64::MAX - 5);
    let clock = ManualClock::starting_at(start);
    let t = bucket(&clock, 1, 1, 10 * NS);
    let _ = t.try_acquire(1).unwrap();
    assert_eq!(t.try_acquire(1).unwrap_err().retry_after(), Some(10 * NS));
    // A clock that wraps past u64::MAX (a 64-bit counter that overflowed) keeps counting.
    clock.set(Instant::from_nanos(4)); // 10 ns after start, modulo 2^64
    assert!(t.try_acquire(1).is_ok());
}

#[test]
fn a_limiter_idle_for_centuries_behaves_like_a_fresh_one() {
    let clock = ManualClock::new();
    let t = bucket(&clock, 5, 1, NS);
    let f = fixed(&clock, 5, NS);
    let s = sliding(&clock, 5, 2 * NS, 2);
    for l in [&t as &dyn Limiter, &f, &s] {
        let _ = l.try_acquire(5).unwrap();
    }
    // Every idle gap, including exact powers of two of periods (where a narrow tick would wrap).
    for shift in [32u32, 40, 48, 62] {
        clock.advance(Duration::from_nanos(1u64 << shift));
        for l in [&t as &dyn Limiter, &f, &s] {
            assert_eq!(l.available_permits(), 5, "after 2^{shift} ns");
            let _ = l.try_acquire(5).unwrap();
        }
    }
}

#[test]
fn a_clock_stepping_backwards_is_no_time_passing() {
    let clock = ManualClock::starting_at(Instant::from_nanos(1_000 * 1_000_000_000));
    let t = bucket(&clock, 4, 1, SEC);
    let f = fixed(&clock, 4, SEC);
    let s = sliding(&clock, 4, 4 * SEC, 4);
    clock.advance(10 * SEC);
    for l in [&t as &dyn Limiter, &f, &s] {
        let _ = l.try_acquire(4).unwrap();
    }
    // Back by 5 s: nothing is refilled, nothing un-refilled, nothing over-admitted.
    clock.set(Instant::from_nanos(1_005 * 1_000_000_000));
    for l in [&t as &dyn Limiter, &f, &s] {
        assert_eq!(l.available_permits(), 0);
        let r = l.try_acquire(1).unwrap_err();
        assert!(r.retry_after().unwrap() >= SEC, "{r}");
    }
    // Back before creation: still no time passing.
    clock.set(Instant::ZERO);
    for l in [&t as &dyn Limiter, &f, &s] {
        assert!(l.try_acquire(1).is_err());
    }
    // Forward again: replenishment resumes from where the limiter was.
    clock.set(Instant::from_nanos(1_011 * 1_000_000_000));
    assert_eq!((t.available_permits(), f.available_permits()), (1, 4));
}

// Regressions found by the differential fuzzer ------------------------------------------------

#[test]
fn idle_duration_is_measured_from_creation_across_a_clock_wrap() {
    // Created at u64::MAX; the clock wraps to creation + 1 s.
    let clock = ManualClock::starting_at(Instant::MAX);
    let t = bucket(&clock, 1, 1, SEC);
    clock.set(Instant::from_nanos(SEC.as_nanos() as u64 - 1));
    assert_eq!(t.idle_duration(), Some(SEC));
    // A reading before creation counts as creation: idle for 0, not 584 years.
    let clock = ManualClock::starting_at(Instant::from_nanos(1));
    let t = bucket(&clock, 1, 1, SEC);
    let s = sliding(&clock, 1, SEC, 1);
    clock.set(Instant::from_nanos(u64::MAX - 1));
    assert_eq!(
        (t.idle_duration(), s.idle_duration()),
        (Some(Duration::ZERO), Some(Duration::ZERO))
    );
}

#[test]
fn close_does_not_restart_the_concurrency_idle_clock() {
    let clock = ManualClock::new();
    let c = concurrency(&clock, 1);
    clock.advance(SEC);
    c.close();
    assert_eq!(c.idle_duration(), Some(SEC));
}

#[test]
fn a_full_bucket_is_idle_even_after_the_clock_steps_back() {
    let clock = ManualClock::new();
    let t = bucket(&clock, 2, 1, SEC);
    let f = fixed(&clock, 1, SEC);
    let _ = t.try_acquire(1).unwrap();
    let _ = f.try_acquire(1).unwrap();
    clock.advance(2 * SEC);
    t.replenish();
    f.replenish();
    clock.set(Instant::ZERO);
    assert_eq!(t.available_permits(), 2);
    assert_eq!(
        (t.idle_duration(), f.idle_duration()),
        (Some(Duration::ZERO), Some(Duration::ZERO))
    );
}

#[test]
fn sliding_window_past_the_segment_limit_does_not_overflow() {
    let clock = ManualClock::new();
    let s: SlidingWindowLimiter<_, 1> =
        SlidingWindowLimiter::with_capacity(SlidingWindowOptions::new(1, NS, 1), &clock).unwrap();
    clock.set(Instant::from_nanos(1 << 62));
    let _ = s.try_acquire(1).unwrap();
    let r = s.try_acquire(1).unwrap_err();
    assert_eq!(r.reason(), Reason::Exhausted);
    assert!(r.retry_after().is_some());
}
