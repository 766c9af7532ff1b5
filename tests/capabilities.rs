//! The capability matrix (issue 25): what each limiter offers, asserted at compile time where a
//! trait says it (a missing impl fails to build), at run time where a constructor does.
//!
//! | limiter | `AcquireAsync` | `Quota` | `NoQueue` | `PartitionKind` | woken by time | jittered waits | settle |
//! |---|---|---|---|---|---|---|---|
//! | concurrency | ✓ | ✓ | ✓ | ✓ | (released, not timed) | (released, not timed) | ✓ |
//! | token bucket, fixed window, sliding window | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ |
//! | GCRA, leaky meter, leaky shaper | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ |
//! | sliding counter, sliding log | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ |
//! | adaptive (`adaptive::AdaptiveLimiter`) | ✓ | ✓ | — | — (a factory of them in `Partitioned`) | (released, not timed) | — | ✓ (as its concurrency limiter) |
//!
//! The adaptive limiter's own `try_acquire` answers an `AdaptiveLease` (its latency timed to
//! the nanosecond); as a `Limiter` (chains, partitions, owned leases, `AcquireAsync`) its leases
//! are plain `Lease`s whose stamp keeps the grant's time (to 4.096 µs) and the outcome
//! (`Lease::dropped`, `Lease::ignore`). Its row is checked by
//! `the_adaptive_limiter_waits_and_hands_out_owned_leases`.
//! `NoQueue` is a limiter type without the queue's code or memory (firmware, a proxy that
//! answers 429 at once). The keyed forms and the HTTP policies: `tests/keyed_*.rs`,
//! `tests/http.rs`.

use core::future::Future;
use core::time::Duration;

use tollgate::*;

type M = ManualClock;

/// A limiter that waits in a queue of its own, reports its quota and is served by time, and
/// hands out owned leases from an `Arc`.
fn queued_rate<L: Limiter + Peek + Replenishing + AcquireAsync + Quota + AcquireOwned>() {}
/// A limiter that waits in a queue of its own and reports its quota (served by releases).
fn queued<L: Limiter + Peek + AcquireAsync + Quota>() {}
/// A limiter that answers at once.
fn answers_at_once<L: Limiter + Peek + Replenishing>() {}

#[test]
fn every_queued_limiter_waits_and_reports_its_quota() {
    queued::<ConcurrencyLimiter<M>>();
    queued_rate::<TokenBucketLimiter<M>>();
    queued_rate::<FixedWindowLimiter<M>>();
    queued_rate::<SlidingWindowLimiter<M, 4>>();
    queued_rate::<GcraLimiter<M>>();
    queued_rate::<LeakyBucketMeter<M>>();
    queued_rate::<LeakyBucketShaper<M>>();
    queued_rate::<SlidingCounterLimiter<M>>();
    queued_rate::<SlidingLogLimiter<M, 4>>();
    queued_rate::<PartitionLimiter<M>>();
}

#[test]
fn the_limiters_without_a_queue_answer_at_once() {
    answers_at_once::<TokenBucketLimiter<M, NoQueue>>();
    answers_at_once::<FixedWindowLimiter<M, NoQueue>>();
    answers_at_once::<SlidingWindowLimiter<M, 4, NoQueue>>();
    answers_at_once::<GcraLimiter<M, NoQueue>>();
    answers_at_once::<LeakyBucketMeter<M, NoQueue>>();
    answers_at_once::<LeakyBucketShaper<M, NoQueue>>();
    answers_at_once::<SlidingCounterLimiter<M, NoQueue>>();
    answers_at_once::<SlidingLogLimiter<M, 4, NoQueue>>();
    fn concurrency<L: Limiter + Peek>() {}
    concurrency::<ConcurrencyLimiter<M, NoQueue>>();
}

#[test]
fn every_queued_limiter_is_a_partition_kind() {
    let s = Duration::from_secs(1);
    let kinds = [
        PartitionKind::concurrency(ConcurrencyOptions::new(2)),
        PartitionKind::token_bucket(TokenBucketOptions::new(2, 1, s)),
        PartitionKind::fixed_window(FixedWindowOptions::new(2, s)),
        PartitionKind::sliding_window(SlidingWindowOptions::new(2, s, 2)),
        PartitionKind::gcra(GcraOptions::per_second(2)),
        PartitionKind::leaky_meter(LeakyBucketOptions::new(2, 1, s)),
        PartitionKind::leaky_shaper(ShaperOptions::per_second(2).with_max_permits(2)),
        PartitionKind::sliding_counter(SlidingCounterOptions::per_second(2)),
        PartitionKind::sliding_log(SlidingLogOptions::per_second(2)),
    ];
    for kind in kinds {
        let limiter = kind.unwrap().limiter(ManualClock::new());
        assert_eq!(limiter.quota().limit, 2);
        assert!(limiter.try_acquire(2).is_ok(), "{limiter:?}");
        assert!(limiter.try_acquire(3).is_err());
    }
}

/// GCRA's family, newly first-class: its quota, waited for through the trait.
#[test]
fn gcra_reports_its_quota_and_waits_through_acquire_async() {
    let clock = ManualClock::new();
    let opts = GcraOptions::per_second(2).with_queue(2, QueueOrder::OldestFirst);
    let gcra = GcraLimiter::with_clock(opts, &clock).unwrap();
    let q = gcra.quota();
    assert_eq!((q.limit, q.remaining, q.reset_after), (2, 2, None));
    gcra.try_acquire(2).unwrap().forget();
    let q = gcra.quota();
    assert_eq!(
        (q.remaining, q.reset_after),
        (0, Some(Duration::from_millis(500)))
    );
    let mut waiter = core::pin::pin!(AcquireAsync::acquire(&gcra, 1));
    let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
    assert!(waiter.as_mut().poll(&mut cx).is_pending());
    clock.advance(Duration::from_millis(500));
    assert!(matches!(
        waiter.as_mut().poll(&mut cx),
        core::task::Poll::Ready(Ok(_))
    ));
}

/// The sliding pair, newly first-class: waiting through the trait, served by time, their quota.
#[test]
fn the_sliding_counter_and_log_wait_and_report_their_quota() {
    let clock = ManualClock::new();
    let order = QueueOrder::OldestFirst;
    let counter = SlidingCounterLimiter::with_clock(
        SlidingCounterOptions::new(2, Duration::from_secs(1)).with_queue(2, order),
        &clock,
    )
    .unwrap();
    let log = SlidingLogLimiter::with_clock(
        SlidingLogOptions::new(2, Duration::from_secs(1)).with_queue(2, order),
        &clock,
    )
    .unwrap();
    counter.try_acquire(2).unwrap().forget();
    log.try_acquire(2).unwrap().forget();
    // The counter: 2 weigh fully at the next window's start, 1 fits from its middle.
    assert_eq!(
        counter.quota().reset_after,
        Some(Duration::from_millis(1500))
    );
    assert_eq!(log.quota().reset_after, Some(Duration::from_secs(1)));
    let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
    let mut c = core::pin::pin!(AcquireAsync::acquire(&counter, 1));
    let mut l = core::pin::pin!(AcquireAsync::acquire(&log, 1));
    assert!(c.as_mut().poll(&mut cx).is_pending());
    assert!(l.as_mut().poll(&mut cx).is_pending());
    assert_eq!(counter.statistics().queued_permits, 1);
    clock.advance(Duration::from_secs(1));
    assert!(matches!(
        l.as_mut().poll(&mut cx),
        core::task::Poll::Ready(Ok(_))
    ));
    assert!(c.as_mut().poll(&mut cx).is_pending());
    clock.advance(Duration::from_millis(500));
    assert!(matches!(
        c.as_mut().poll(&mut cx),
        core::task::Poll::Ready(Ok(_))
    ));
}

/// Every rate limiter waits with jitter (issue 38): `acquire_jittered` completes no earlier
/// than a plain `acquire` on a twin limiter (its permit's instant) and at most the jitter's
/// bound later, polled every millisecond.
#[test]
fn every_rate_limiter_waits_with_jitter() {
    use core::task::{Context, Poll, Waker};
    let s = Duration::from_secs(1);
    let ms = Duration::from_millis(1);
    let q = QueueOrder::OldestFirst;
    let bound = Duration::from_millis(200);
    macro_rules! check {
        ($($ty:ident($opts:expr)),* $(,)?) => {$({
            let (cp, cj) = (ManualClock::new(), ManualClock::new());
            let plain = $ty::with_clock($opts.with_queue(2, q), &cp).unwrap();
            let jittered = $ty::with_clock($opts.with_queue(2, q), &cj).unwrap();
            while plain.try_acquire(1).is_ok() {}
            while jittered.try_acquire(1).is_ok() {}
            let jitter = Jitter::up_to(bound).with_seed(38);
            let mut p = core::pin::pin!(plain.acquire(1));
            let mut j = core::pin::pin!(jittered.acquire_jittered(1, &jitter));
            let mut cx = Context::from_waker(Waker::noop());
            let (mut at_p, mut at_j) = (None, None);
            for _ in 0..5_000 {
                if at_p.is_none() && matches!(p.as_mut().poll(&mut cx), Poll::Ready(Ok(_))) {
                    at_p = Some(cp.now());
                }
                if at_j.is_none() && matches!(j.as_mut().poll(&mut cx), Poll::Ready(Ok(_))) {
                    at_j = Some(cj.now());
                }
                if at_j.is_some() { break; }
                cp.advance(ms);
                cj.advance(ms);
            }
            let (at_p, at_j) = (at_p.unwrap(), at_j.expect(stringify!($ty)));
            assert!(at_p > Instant::ZERO, "{}: did not wait", stringify!($ty));
            assert!(at_j >= at_p && at_j <= at_p + bound, "{}: {at_j:?} vs {at_p:?}", stringify!($ty));
        })*};
    }
    check!(
        TokenBucketLimiter(TokenBucketOptions::new(2, 1, s)),
        FixedWindowLimiter(FixedWindowOptions::new(2, s)),
        SlidingWindowLimiter(SlidingWindowOptions::new(2, s, 2)),
        GcraLimiter(GcraOptions::per_second(2)),
        LeakyBucketMeter(LeakyBucketOptions::new(2, 1, s)),
        LeakyBucketShaper(ShaperOptions::per_second(2).with_max_permits(2)),
        SlidingCounterLimiter(SlidingCounterOptions::per_second(2)),
        SlidingLogLimiter(SlidingLogOptions::per_second(2)),
    );
}

/// Every limiter's lease settles (issue 38), queued (`lease.settle`) and queueless
/// (`limiter.settle(&mut lease, n)`): a lease of 2 settled to 1 leaves the limiter as a twin
/// that was asked for 1 (the same available permits, the same answer to the next request).
#[test]
fn every_limiter_settles_its_leases() {
    let s = Duration::from_secs(1);
    macro_rules! check {
        ($($ty:ident($opts:expr)),* $(,)?) => {$({
            let clock = ManualClock::new();
            let answer = |l: &dyn Limiter| {
                (l.available_permits(), l.try_acquire(1).map(|_| ()).map_err(|r| r.retry_after()))
            };
            // (Without a queue: the queue limit 0, which a shaper's options do not default to.)
            let twin = $ty::without_queue($opts.with_queue(0, QueueOrder::OldestFirst), &clock).unwrap();
            drop(twin.try_acquire(1).unwrap());
            let queued = $ty::with_clock($opts.with_queue(2, QueueOrder::OldestFirst), &clock).unwrap();
            let mut lease = queued.try_acquire(2).unwrap();
            lease.settle(1).unwrap();
            let bare = $ty::without_queue($opts.with_queue(0, QueueOrder::OldestFirst), &clock).unwrap();
            let mut lease = bare.try_acquire(2).unwrap();
            bare.settle(&mut lease, 1).unwrap();
            let expected = answer(&twin);
            assert_eq!(answer(&queued), expected, "{}", stringify!($ty));
            assert_eq!(answer(&bare), expected, "{} without a queue", stringify!($ty));
        })*};
    }
    check!(
        TokenBucketLimiter(TokenBucketOptions::new(4, 1, s)),
        FixedWindowLimiter(FixedWindowOptions::new(4, s)),
        SlidingWindowLimiter(SlidingWindowOptions::new(4, s, 4)),
        GcraLimiter(GcraOptions::per_second(4)),
        LeakyBucketMeter(LeakyBucketOptions::new(4, 1, s)),
        LeakyBucketShaper(ShaperOptions::per_second(4).with_max_permits(4)),
        SlidingCounterLimiter(SlidingCounterOptions::per_second(4)),
        SlidingLogLimiter(SlidingLogOptions::per_second(4)),
    );
    // A concurrency lease refers to its limiter (it releases when dropped), queue or not.
    let opts = ConcurrencyOptions::new(4);
    let queued = ConcurrencyLimiter::new(opts.with_queue(2, QueueOrder::OldestFirst)).unwrap();
    let bare = ConcurrencyLimiter::without_queue(opts, ManualClock::new()).unwrap();
    let (mut a, mut b) = (queued.try_acquire(2).unwrap(), bare.try_acquire(2).unwrap());
    a.settle(1).unwrap();
    b.settle(1).unwrap();
    assert_eq!(
        (queued.available_permits(), bare.available_permits()),
        (3, 3)
    );
}

/// The adaptive limiter: `try_acquire`, `acquire().await` in its queue, owned leases that move
/// across threads, statistics; the HTTP policy is `tests/http_adaptive.rs`'s.
#[test]
fn the_adaptive_limiter_waits_and_hands_out_owned_leases() {
    use std::sync::Arc;
    use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions};

    let opts = AdaptiveOptions::new(2).with_queue(2, QueueOrder::OldestFirst);
    let l = Arc::new(AdaptiveLimiter::with_clock(opts, ManualClock::new()).unwrap());
    let first = l.try_acquire(1).unwrap();
    let owned = l.try_acquire_owned(1).unwrap();
    assert!(l.try_acquire(1).is_err());
    std::thread::spawn(move || drop(owned)).join().unwrap();
    let waited = embassy_futures::block_on(l.acquire(1)).unwrap();
    assert_eq!(waited.permits(), 1);
    drop((first, waited));
    let owned = embassy_futures::block_on(l.acquire_owned(2)).unwrap();
    assert_eq!(owned.permits(), 2);
    drop(owned);
    let s = l.statistics();
    assert_eq!(
        (s.available_permits, s.total_successful, s.total_failed),
        (2, 4, 1)
    );
    // As any limiter: waiting, quota, owned plain leases, settling.
    fn any_limiter<L: Limiter + AcquireAsync + Quota + AcquireOwned + Release>() {}
    any_limiter::<AdaptiveLimiter<M>>();
    let mut plain = AcquireOwned::try_acquire_owned(&l, 2).unwrap();
    plain.settle(1).unwrap();
    assert_eq!(l.quota().remaining, 1);
    drop(plain);
    assert_eq!(l.quota().remaining, 2);
}
