//! The worked examples of the .NET announcement and design document, step by step on a manual
//! clock. The tour (`examples/tour.rs`) prints the same sequences.

use core::time::Duration;
use tollgate::*;

const MIN: Duration = Duration::from_secs(60);
const SEC: Duration = Duration::from_secs(1);

#[test]
fn token_bucket_10_tokens_2_per_minute() {
    // "the bucket can hold 10 tokens and every minute 2 tokens are added"
    let clock = ManualClock::new();
    let bucket =
        TokenBucketLimiter::with_clock(TokenBucketOptions::new(10, 2, MIN), &clock).unwrap();
    assert_eq!(bucket.available_permits(), 10);
    let _ = bucket.try_acquire(1).unwrap();
    assert_eq!(bucket.available_permits(), 9);
    for _ in 0..3 {
        let _ = bucket.try_acquire(1).unwrap();
    }
    assert_eq!(bucket.available_permits(), 6);
    clock.advance(MIN);
    assert_eq!(bucket.available_permits(), 8);
    for _ in 0..8 {
        let _ = bucket.try_acquire(1).unwrap();
    }
    assert_eq!(bucket.available_permits(), 0);
    let denied = bucket.try_acquire(1).unwrap_err();
    assert_eq!(denied.reason(), Reason::Exhausted);
    assert_eq!(denied.retry_after(), Some(MIN)); // "which happens every minute"
    clock.advance(5 * MIN); // "After 5 minutes of no requests the bucket will have all 10 tokens"
    assert_eq!(bucket.available_permits(), 10);
    clock.advance(10 * MIN); // "...and won't add any more"
    assert_eq!(bucket.available_permits(), 10);
    // Full since the end of the 5th idle minute.
    assert_eq!(bucket.idle_duration(), Some(10 * MIN));
}

#[test]
fn sliding_window_3_segments_of_10_minutes_limit_100() {
    let clock = ManualClock::new();
    let opts = SlidingWindowOptions::new(100, 30 * MIN, 3);
    let window = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
    let _ = window.try_acquire(50).unwrap(); // first 10 minutes: 50 requests
    clock.advance(10 * MIN);
    assert_eq!(window.available_permits(), 50);
    let _ = window.try_acquire(20).unwrap(); // next 10 minutes: 20 more
    clock.advance(10 * MIN);
    assert_eq!(window.available_permits(), 30);
    clock.advance(10 * MIN); // the segment with 50 leaves the window
    assert_eq!(window.available_permits(), 80);
}

#[test]
fn design_doc_sliding_window_3s_3_segments_limit_10() {
    // Time: |1s |2s |3s |4s |   Count: [3] [4] [3] [1]
    let clock = ManualClock::new();
    let opts = SlidingWindowOptions::new(10, 3 * SEC, 3);
    let window = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
    let _ = window.try_acquire(3).unwrap();
    clock.advance(SEC);
    let _ = window.try_acquire(4).unwrap();
    clock.advance(SEC);
    let _ = window.try_acquire(3).unwrap();
    // Window 1 is exhausted: nothing more in the 3rd second.
    let denied = window.try_acquire(1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(SEC)); // the [3] leaves at 3 s
    clock.advance(SEC);
    let _ = window.try_acquire(1).unwrap();
    // "On the 4th second, Window 2 now has a count 8 and can accept additional requests."
    assert_eq!(window.available_permits(), 2);
}

#[test]
fn fixed_and_sliding_window_under_a_boundary_burst() {
    // 100 requests at 0:59 and 100 at 1:00 against 100 per minute.
    let clock = ManualClock::new();
    let fixed = FixedWindowLimiter::with_clock(FixedWindowOptions::new(100, MIN), &clock).unwrap();
    let sliding =
        SlidingWindowLimiter::with_clock(SlidingWindowOptions::new(100, MIN, 6), &clock).unwrap();
    clock.advance(59 * SEC);
    let burst = |l: &dyn Limiter| (0..100).filter(|_| l.try_acquire(1).is_ok()).count();
    assert_eq!((burst(&fixed), burst(&sliding)), (100, 100));
    clock.advance(SEC);
    // The fixed window resets at 1:00 and lets 200 through in two seconds; the sliding window
    // still counts the 100 of 0:59.
    assert_eq!((burst(&fixed), burst(&sliding)), (100, 0));
    let retry = sliding.try_acquire(1).unwrap_err().retry_after().unwrap();
    assert_eq!(retry, 50 * SEC); // the 0:50-1:00 segment leaves the window at 1:50
}
