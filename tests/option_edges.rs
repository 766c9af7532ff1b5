//! Issue 24, items 4 and 5: the edges of the options agree with their docs. A keyed limiter
//! accepts exactly one token per 2 ns, as documented; the sliding counter and log refuse
//! windows whose RetryAfter could never be met, as every other limiter refuses such periods.

use core::time::Duration;

use tollgate::*;

const NS: Duration = Duration::from_nanos(1);

// Item 4 ---------------------------------------------------------------------------------------

#[test]
fn item4_a_keyed_limiter_accepts_exactly_one_token_per_2_ns() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(1000, 1, 2 * NS);
    let keyed: KeyedLimiter<u64, _> =
        KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(16), &clock).unwrap();
    keyed.try_acquire(&7, 1000).unwrap().forget();
    assert_eq!(
        keyed.try_acquire(&7, 1).unwrap_err().retry_after(),
        Some(2 * NS)
    );
    clock.advance(2 * NS);
    assert!(keyed.try_acquire(&7, 1).is_ok());
    // At the far end of the clock's range the state still holds (no overflow, exact refills).
    clock.advance(Duration::from_nanos((1 << 63) - 10));
    assert!(keyed.try_acquire(&7, 1000).is_ok());
    assert!(keyed.try_acquire(&7, 1).is_err());
    let fixed = FixedWindowOptions::new(3, 6 * NS);
    assert!(KeyedLimiter::<u64, _>::fixed_window_with_clock(
        fixed,
        PartitionConfig::new(16),
        &clock
    )
    .is_ok());
}

#[test]
fn item4_a_keyed_limiter_refuses_faster_rates_with_rate_too_high() {
    let clock = ManualClock::new();
    for opts in [
        TokenBucketOptions::new(1000, 1, NS),
        TokenBucketOptions::new(1000, 3, 5 * NS),
    ] {
        let err =
            KeyedLimiter::<u64, _>::token_bucket_with_clock(opts, PartitionConfig::new(16), &clock)
                .unwrap_err();
        assert_eq!(err, OptionsError::RateTooHigh);
        assert!(err.to_string().contains("one token per 2 nanoseconds"));
    }
}

// Item 5 ---------------------------------------------------------------------------------------

#[test]
fn item5_the_sliding_log_refuses_windows_of_2_63_ns_or_more() {
    for ns in [1u64 << 63, u64::MAX] {
        let opts = SlidingLogOptions::new(1, Duration::from_nanos(ns));
        assert_eq!(opts.validate(8), Err(OptionsError::PeriodTooLong));
        assert_eq!(
            SlidingLogLimiter::<_, 8>::with_capacity(opts, ManualClock::new()).unwrap_err(),
            OptionsError::PeriodTooLong
        );
    }
    // The longest window accepted: its RetryAfter is met.
    let clock = ManualClock::new();
    let opts = SlidingLogOptions::new(1, Duration::from_nanos((1 << 63) - 1));
    let log = SlidingLogLimiter::<_, 8>::with_capacity(opts, &clock).unwrap();
    log.try_acquire(1).unwrap().forget();
    let wait = log.try_acquire(1).unwrap_err().retry_after().unwrap();
    clock.advance(wait);
    assert!(
        log.try_acquire(1).is_ok(),
        "waiting the RetryAfter is enough"
    );
}

#[test]
fn item5_the_sliding_counter_refuses_windows_whose_retry_after_passes_the_horizon() {
    // The estimate reaches back a whole window: a refusal may wait to the end of the next
    // window, two windows on, which must lie before 2^63 ns.
    for ns in [1u64 << 62, 1 << 63, u64::MAX] {
        let opts = SlidingCounterOptions::new(1, Duration::from_nanos(ns));
        assert_eq!(opts.validate(), Err(OptionsError::PeriodTooLong), "{ns}");
        assert_eq!(
            SlidingCounterLimiter::with_clock(opts, ManualClock::new()).unwrap_err(),
            OptionsError::PeriodTooLong
        );
    }
    let clock = ManualClock::new();
    let opts = SlidingCounterOptions::new(1, Duration::from_nanos((1 << 62) - 1));
    let counter = SlidingCounterLimiter::with_clock(opts, &clock).unwrap();
    counter.try_acquire(1).unwrap().forget();
    for _ in 0..3 {
        match counter.try_acquire(1) {
            Ok(_) => return,
            Err(r) => clock.advance(r.retry_after().expect("a RetryAfter")),
        }
    }
    panic!("waiting the RetryAfter was never enough");
}

#[test]
fn item5_every_rate_limiter_refuses_a_period_of_2_63_ns() {
    let long = Duration::from_nanos(1 << 63);
    let clock = ManualClock::new();
    let err = OptionsError::PeriodTooLong;
    assert_eq!(
        TokenBucketLimiter::with_clock(TokenBucketOptions::new(1, 1, long), &clock).unwrap_err(),
        err
    );
    assert_eq!(
        FixedWindowLimiter::with_clock(FixedWindowOptions::new(1, long), &clock).unwrap_err(),
        err
    );
    assert_eq!(
        GcraLimiter::with_clock(GcraOptions::with_period(long), &clock).unwrap_err(),
        err
    );
    // GCRA's own bound: burst × interval under 2^61 ns.
    let gcra = GcraOptions::with_period(Duration::from_nanos(1 << 60)).with_burst(2);
    assert_eq!(GcraLimiter::with_clock(gcra, &clock).unwrap_err(), err);
}
