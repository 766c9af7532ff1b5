//! Issue 24, item 3: a waiter of every queued rate limiter on a clock that moves by itself
//! (`StdClock`, `CoarseClock`) completes when its permits come, woken by the process timer,
//! with nothing else running: the future is polled only when its waker is called. (Embassy's
//! clock: `tests/embassy.rs`.) The limits are generous: a waiter nobody wakes never completes.

use core::time::Duration;

mod common;

use common::run_when_woken;
use tollgate::*;

/// A wait of 50 ms, allowed 10 s.
const WAIT: Duration = Duration::from_millis(50);
const LIMIT: Duration = Duration::from_secs(10);

fn queued<L: Limiter>(
    limiter: &L,
    acquire: impl FnOnce(&L) -> Option<Result<Lease<'_>, Rejection>>,
) {
    while limiter.try_acquire(1).is_ok() {}
    let done = acquire(limiter).expect("the waiter was never woken by time");
    assert!(done.is_ok(), "{done:?}");
}

fn every_queued_limiter<C: Clock + Clone>(clock: C) {
    let q = |n| (n, QueueOrder::OldestFirst);
    let (n, order) = q(4);
    let bucket = TokenBucketLimiter::with_clock(
        TokenBucketOptions::new(1, 1, WAIT).with_queue(n, order),
        clock.clone(),
    )
    .unwrap();
    queued(&bucket, |l| run_when_woken(l.acquire(1), LIMIT));
    let window = FixedWindowLimiter::with_clock(
        FixedWindowOptions::new(1, WAIT).with_queue(n, order),
        clock.clone(),
    )
    .unwrap();
    queued(&window, |l| run_when_woken(l.acquire(1), LIMIT));
    let sliding = SlidingWindowLimiter::<_, 4>::with_capacity(
        SlidingWindowOptions::new(1, WAIT * 2, 2).with_queue(n, order),
        clock.clone(),
    )
    .unwrap();
    queued(&sliding, |l| run_when_woken(l.acquire(1), LIMIT));
    let gcra = GcraLimiter::with_clock(
        GcraOptions::with_period(WAIT).with_queue(n, order),
        clock.clone(),
    )
    .unwrap();
    queued(&gcra, |l| run_when_woken(l.acquire(1), LIMIT));
    let meter = LeakyBucketMeter::with_clock(
        LeakyBucketOptions::new(1, 1, WAIT).with_queue(n, order),
        clock.clone(),
    )
    .unwrap();
    queued(&meter, |l| run_when_woken(l.acquire(1), LIMIT));
    let shaper = LeakyBucketShaper::with_clock(
        ShaperOptions::per(WAIT, 1).with_queue(n, order),
        clock.clone(),
    )
    .unwrap();
    queued(&shaper, |l| run_when_woken(l.acquire(1), LIMIT));
    let counter = SlidingCounterLimiter::with_clock(
        SlidingCounterOptions::new(1, WAIT).with_queue(n, order),
        clock.clone(),
    )
    .unwrap();
    queued(&counter, |l| run_when_woken(l.acquire(1), LIMIT));
    let log = SlidingLogLimiter::with_clock(
        SlidingLogOptions::new(1, WAIT).with_queue(n, order),
        clock.clone(),
    )
    .unwrap();
    queued(&log, |l| run_when_woken(l.acquire(1), LIMIT));
}

#[test]
fn item3_every_queued_rate_limiter_on_std_clock_wakes_its_waiter() {
    every_queued_limiter(StdClock);
}

#[test]
fn item3_every_queued_rate_limiter_on_coarse_clock_wakes_its_waiter() {
    let clock = CoarseClock::new().expect("the refresher thread");
    every_queued_limiter(clock);
}

/// The issue's own reproduction: GCRA at 10 per second with a long queue.
#[test]
fn item3_a_gcra_waiter_on_std_clock_completes() {
    let gcra =
        GcraLimiter::new(GcraOptions::per_second(10).with_queue(1000, QueueOrder::OldestFirst))
            .unwrap();
    while gcra.try_acquire(1).is_ok() {}
    let done = run_when_woken(gcra.acquire(1), LIMIT).expect("never woken");
    assert!(done.is_ok());
}

/// A partition's limiter (`PartitionLimiter`) forwards every part of the waiting protocol to
/// the limiter inside: its rate limiters' waiters are woken by time too.
#[test]
fn item3_a_partitioned_rate_limiters_waiter_on_std_clock_is_woken() {
    let order = QueueOrder::OldestFirst;
    for kind in [
        PartitionKind::token_bucket(TokenBucketOptions::new(1, 1, WAIT).with_queue(4, order)),
        PartitionKind::fixed_window(FixedWindowOptions::new(1, WAIT).with_queue(4, order)),
        PartitionKind::sliding_window(
            SlidingWindowOptions::new(1, WAIT * 2, 2).with_queue(4, order),
        ),
    ] {
        let kind = kind.unwrap();
        let limiter = Partitioned::new(
            move |id: &u32| Partition::new(*id, kind),
            PartitionConfig::new(8),
        );
        while limiter.try_acquire(&7, 1).is_ok() {}
        let done = run_when_woken(limiter.acquire(&7, 1), LIMIT)
            .expect("the waiter was never woken by time");
        assert!(done.is_ok());
    }
}
