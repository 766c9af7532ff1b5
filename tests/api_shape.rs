//! Issue 25, the API shape: limiter types are whole without naming a clock (the default is
//! `StdClock` with `std`), and one import brings every method.

use core::time::Duration;
use std::sync::Arc;

use tollgate::prelude::*;
use tollgate::{
    ConcurrencyLimiter, ConcurrencyOptions, FixedWindowLimiter, FixedWindowOptions, GcraLimiter,
    GcraOptions, LeakyBucketMeter, LeakyBucketOptions, LeakyBucketShaper, PartitionKind,
    PartitionLimiter, ShaperOptions, SlidingCounterLimiter, SlidingCounterOptions,
    SlidingLogLimiter, SlidingLogOptions, SlidingWindowLimiter, SlidingWindowOptions, StdClock,
    TokenBucketLimiter, TokenBucketOptions,
};

/// Every limiter in a struct, no clock named.
struct App {
    concurrency: ConcurrencyLimiter,
    bucket: Arc<TokenBucketLimiter>,
    window: FixedWindowLimiter,
    sliding: SlidingWindowLimiter,
    gcra: GcraLimiter,
    meter: LeakyBucketMeter,
    shaper: LeakyBucketShaper,
    counter: SlidingCounterLimiter,
    log: SlidingLogLimiter,
    partition: PartitionLimiter,
}

#[test]
fn limiter_types_need_no_clock_and_the_prelude_brings_their_methods() {
    let s = Duration::from_secs(1);
    let app = App {
        concurrency: ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap(),
        bucket: Arc::new(TokenBucketLimiter::new(TokenBucketOptions::new(1, 1, s)).unwrap()),
        window: FixedWindowLimiter::new(FixedWindowOptions::new(1, s)).unwrap(),
        sliding: SlidingWindowLimiter::new(SlidingWindowOptions::new(1, s, 2)).unwrap(),
        gcra: GcraLimiter::new(GcraOptions::per_second(1)).unwrap(),
        meter: LeakyBucketMeter::new(LeakyBucketOptions::new(1, 1, s)).unwrap(),
        shaper: LeakyBucketShaper::new(ShaperOptions::per_second(1)).unwrap(),
        counter: SlidingCounterLimiter::new(SlidingCounterOptions::per_second(1)).unwrap(),
        log: SlidingLogLimiter::new(SlidingLogOptions::per_second(1)).unwrap(),
        partition: PartitionKind::gcra(GcraOptions::per_second(1))
            .unwrap()
            .limiter(StdClock),
    };
    let limiters: [&dyn Limiter; 10] = [
        &app.concurrency,
        &*app.bucket,
        &app.window,
        &app.sliding,
        &app.gcra,
        &app.meter,
        &app.shaper,
        &app.counter,
        &app.log,
        &app.partition,
    ];
    for l in limiters {
        let lease = l.try_acquire(1).unwrap();
        assert!(l.try_acquire(1).is_err());
        drop(lease);
    }
    assert_eq!(app.bucket.quota().limit, 1);
    assert!(app.gcra.peek(1).is_err());
}
