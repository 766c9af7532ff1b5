//! Feature `embassy-time`: waiters on rate limiters built on `EmbassyClock` are woken by
//! embassy's timer queue (here embassy-time's std driver) with nothing else running.
#![cfg(feature = "embassy-time")]

use core::time::Duration;

mod common;

use embassy_futures::join::join3;
use embassy_time as _;
use tollgate::embassy::EmbassyClock;
use tollgate::{
    Clock, FixedWindowLimiter, FixedWindowOptions, Limiter, QueueOrder, SlidingWindowLimiter,
    SlidingWindowOptions, TokenBucketLimiter, TokenBucketOptions,
};

#[test]
fn a_queued_token_bucket_waiter_completes_when_its_token_arrives() {
    let opts = TokenBucketOptions::new(2, 1, Duration::from_millis(10))
        .with_queue(8, QueueOrder::OldestFirst);
    let bucket = TokenBucketLimiter::with_clock(opts, EmbassyClock).unwrap();
    bucket.try_acquire(2).unwrap().forget();
    // Three waiters behind an empty bucket: each completes as its token arrives, in order.
    let (a, b, c) = embassy_futures::block_on(join3(
        bucket.acquire(1),
        bucket.acquire(1),
        bucket.acquire(1),
    ));
    assert!(a.is_ok() && b.is_ok() && c.is_ok());
    // The first request (two tokens) and the three waiters served by time alone.
    assert_eq!(bucket.statistics().total_successful, 4);
}

#[test]
fn fixed_and_sliding_window_waiters_complete_on_time() {
    let fixed = FixedWindowLimiter::with_clock(
        FixedWindowOptions::new(1, Duration::from_millis(15))
            .with_queue(1, QueueOrder::OldestFirst),
        EmbassyClock,
    )
    .unwrap();
    fixed.try_acquire(1).unwrap().forget();
    assert!(embassy_futures::block_on(fixed.acquire(1)).is_ok());

    let sliding = SlidingWindowLimiter::with_clock(
        SlidingWindowOptions::new(1, Duration::from_millis(15), 3)
            .with_queue(1, QueueOrder::OldestFirst),
        EmbassyClock,
    )
    .unwrap();
    sliding.try_acquire(1).unwrap().forget();
    assert!(embassy_futures::block_on(sliding.acquire(1)).is_ok());
}

#[test]
fn the_clock_reads_the_driver_in_nanoseconds() {
    let a = EmbassyClock.now();
    let b = EmbassyClock.now();
    assert!(b >= a);
    let driver = embassy_time::Instant::now().as_micros();
    let ours = EmbassyClock.now().as_nanos() / 1_000;
    assert!(
        ours >= driver && ours - driver < 1_000_000,
        "{ours} vs {driver}"
    );
}

/// Issue 24, item 3: every queued rate limiter on embassy's clock, its waiter polled only when
/// its waker is called (`embassy_futures::block_on` polls in a loop, and a poll serves the
/// queue itself: it would hide a waiter that embassy's timer never wakes).
#[test]
fn every_queued_rate_limiter_wakes_its_waiter_through_embassys_timer() {
    use tollgate::{
        GcraLimiter, GcraOptions, LeakyBucketMeter, LeakyBucketOptions, LeakyBucketShaper,
        ShaperOptions, SlidingCounterLimiter, SlidingCounterOptions, SlidingLogLimiter,
        SlidingLogOptions,
    };
    let wait = Duration::from_millis(20);
    let limit = Duration::from_secs(10);
    let order = QueueOrder::OldestFirst;
    let clock = EmbassyClock;
    let bucket = TokenBucketLimiter::with_clock(
        TokenBucketOptions::new(1, 1, wait).with_queue(1, order),
        clock,
    )
    .unwrap();
    bucket.try_acquire(1).unwrap().forget();
    assert!(common::run_when_woken(bucket.acquire(1), limit)
        .expect("woken")
        .is_ok());
    let window = FixedWindowLimiter::with_clock(
        FixedWindowOptions::new(1, wait).with_queue(1, order),
        clock,
    )
    .unwrap();
    window.try_acquire(1).unwrap().forget();
    assert!(common::run_when_woken(window.acquire(1), limit)
        .expect("woken")
        .is_ok());
    let sliding = SlidingWindowLimiter::<_, 2>::with_capacity(
        SlidingWindowOptions::new(1, wait * 2, 2).with_queue(1, order),
        clock,
    )
    .unwrap();
    sliding.try_acquire(1).unwrap().forget();
    assert!(common::run_when_woken(sliding.acquire(1), limit)
        .expect("woken")
        .is_ok());
    let gcra = GcraLimiter::with_clock(GcraOptions::with_period(wait).with_queue(1, order), clock)
        .unwrap();
    gcra.try_acquire(1).unwrap().forget();
    assert!(common::run_when_woken(gcra.acquire(1), limit)
        .expect("woken")
        .is_ok());
    let meter = LeakyBucketMeter::with_clock(
        LeakyBucketOptions::new(1, 1, wait).with_queue(1, order),
        clock,
    )
    .unwrap();
    meter.try_acquire(1).unwrap().forget();
    assert!(common::run_when_woken(meter.acquire(1), limit)
        .expect("woken")
        .is_ok());
    let shaper =
        LeakyBucketShaper::with_clock(ShaperOptions::per(wait, 1).with_queue(1, order), clock)
            .unwrap();
    shaper.try_acquire(1).unwrap().forget();
    assert!(common::run_when_woken(shaper.acquire(1), limit)
        .expect("woken")
        .is_ok());
    let counter = SlidingCounterLimiter::with_clock(
        SlidingCounterOptions::new(1, wait).with_queue(1, order),
        clock,
    )
    .unwrap();
    counter.try_acquire(1).unwrap().forget();
    assert!(common::run_when_woken(counter.acquire(1), limit)
        .expect("woken")
        .is_ok());
    let log =
        SlidingLogLimiter::with_clock(SlidingLogOptions::new(1, wait).with_queue(1, order), clock)
            .unwrap();
    log.try_acquire(1).unwrap().forget();
    assert!(common::run_when_woken(log.acquire(1), limit)
        .expect("woken")
        .is_ok());
}

/// Issue 38: a jittered waiter on embassy's clock is woken by embassy's timer for its delay
/// too, polled only when its waker is called: it completes (so something woke it after its
/// delay), and not before its permit came.
#[test]
fn a_jittered_waiter_is_woken_by_embassys_timer_after_its_delay() {
    let bucket = TokenBucketLimiter::with_clock(
        TokenBucketOptions::new(1, 1, Duration::from_millis(20))
            .with_queue(1, QueueOrder::OldestFirst),
        EmbassyClock,
    )
    .unwrap();
    let jitter = tollgate::Jitter::up_to(Duration::from_millis(30)).with_seed(38);
    bucket.try_acquire(1).unwrap().forget();
    let start = EmbassyClock.now();
    let got = common::run_when_woken(bucket.acquire_jittered(1, &jitter), Duration::from_secs(10));
    assert!(got.expect("woken by embassy's timer").is_ok());
    let took = EmbassyClock.now() - start;
    assert!(took >= Duration::from_millis(19), "{took:?}");
}
