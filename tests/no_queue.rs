//! Every limiter built without a wait queue (`NoQueue`):
//! the same decisions, RetryAfter, statistics and idle duration as the queued limiters with a
//! queue limit of 0, and typed errors for anything that would need a queue.

use std::time::Duration;

use tollgate::{
    Chain, FixedWindowLimiter, FixedWindowOptions, GcraLimiter, GcraOptions, LeakyBucketMeter,
    LeakyBucketOptions, LeakyBucketShaper, Limiter, ManualClock, NoQueue, OptionsError, Peek,
    QueueOrder, Reason, Replenishing, ShaperOptions, SlidingCounterLimiter, SlidingCounterOptions,
    SlidingLogLimiter, SlidingLogOptions, SlidingWindowLimiter, SlidingWindowOptions,
    TokenBucketLimiter, TokenBucketOptions,
};

/// A deterministic pseudo-random walk (xorshift).
struct Walk(u64);

impl Walk {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Drives `a` (queued, queue limit 0) and `b` (no queue) through the same requests on the same
/// clock and compares every answer: grant or reason, RetryAfter, available permits, peek,
/// statistics and idle duration.
fn same_decisions(a: &dyn Peek, b: &dyn Peek, clock: &ManualClock, seed: u64, max_n: u64) {
    let mut walk = Walk(seed);
    for step in 0..5_000 {
        let x = walk.next();
        clock.advance(Duration::from_nanos(x % 700));
        let n = ((x >> 16) % (max_n + 2)) as u32;
        assert_eq!(a.peek(n), b.peek(n), "step {step}: peek({n})");
        let (ra, rb) = (a.try_acquire(n), b.try_acquire(n));
        match (&ra, &rb) {
            (Ok(la), Ok(lb)) => assert_eq!(la.permits(), lb.permits()),
            (Err(ea), Err(eb)) => assert_eq!(ea, eb, "step {step}: try_acquire({n})"),
            _ => panic!("step {step}: try_acquire({n}): {ra:?} vs {rb:?}"),
        }
        drop((ra, rb));
        assert_eq!(a.available_permits(), b.available_permits(), "step {step}");
        assert_eq!(a.idle_duration(), b.idle_duration(), "step {step}");
    }
    assert_eq!(a.statistics(), b.statistics());
}

#[test]
fn a_bucket_without_a_queue_decides_as_one_with_a_queue_limit_of_zero() {
    for (seed, limit, per, period) in [
        (1u64, 5u32, 2u32, 1_000u64),
        (7, 1, 1, 333),
        (42, 100, 7, 50),
    ] {
        let clock = ManualClock::new();
        let opts = TokenBucketOptions::new(limit, per, Duration::from_nanos(period));
        let queued = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
        let bare: TokenBucketLimiter<_, NoQueue> =
            TokenBucketLimiter::without_queue(opts, &clock).unwrap();
        same_decisions(&queued, &bare, &clock, seed, u64::from(limit));
    }
}

#[test]
fn a_window_without_a_queue_decides_as_one_with_a_queue_limit_of_zero() {
    for (seed, limit, window) in [(3u64, 4u32, 1_000u64), (9, 1, 100), (11, 50, 2_500)] {
        let clock = ManualClock::new();
        let opts = FixedWindowOptions::new(limit, Duration::from_nanos(window));
        let queued = FixedWindowLimiter::with_clock(opts, &clock).unwrap();
        let bare: FixedWindowLimiter<_, NoQueue> =
            FixedWindowLimiter::without_queue(opts, &clock).unwrap();
        same_decisions(&queued, &bare, &clock, seed, u64::from(limit));
    }
}

/// GCRA, the meter, the sliding window, counter and log: built without a queue, the same
/// answers as queued with a queue limit of 0, step by step on the same clock.
#[test]
fn every_rate_limiter_without_a_queue_decides_as_one_with_a_queue_limit_of_zero() {
    for (seed, limit, ns) in [(5u64, 3u32, 900u64), (13, 1, 300), (21, 40, 4_000)] {
        let clock = ManualClock::new();
        let period = Duration::from_nanos(ns);
        let o = GcraOptions::per(period, limit);
        let (a, b) = (
            GcraLimiter::with_clock(o, &clock).unwrap(),
            GcraLimiter::without_queue(o, &clock).unwrap(),
        );
        same_decisions(&a, &b, &clock, seed, u64::from(limit));
        let o = LeakyBucketOptions::new(limit, 2, period);
        let (a, b) = (
            LeakyBucketMeter::with_clock(o, &clock).unwrap(),
            LeakyBucketMeter::without_queue(o, &clock).unwrap(),
        );
        same_decisions(&a, &b, &clock, seed ^ 1, u64::from(limit));
        let o = ShaperOptions::per(period, limit)
            .with_max_permits(limit)
            .with_queue(0, QueueOrder::OldestFirst);
        let (a, b) = (
            LeakyBucketShaper::with_clock(o, &clock).unwrap(),
            LeakyBucketShaper::without_queue(o, &clock).unwrap(),
        );
        same_decisions(&a, &b, &clock, seed ^ 5, u64::from(limit));
        let o = SlidingWindowOptions::new(limit, period, 4);
        let (a, b) = (
            SlidingWindowLimiter::with_clock(o, &clock).unwrap(),
            SlidingWindowLimiter::without_queue(o, &clock).unwrap(),
        );
        same_decisions(&a, &b, &clock, seed ^ 2, u64::from(limit));
        let o = SlidingCounterOptions::new(limit, period);
        let (a, b) = (
            SlidingCounterLimiter::with_clock(o, &clock).unwrap(),
            SlidingCounterLimiter::without_queue(o, &clock).unwrap(),
        );
        same_decisions(&a, &b, &clock, seed ^ 3, u64::from(limit));
        let o = SlidingLogOptions::new(limit, period);
        let (a, b) = (
            SlidingLogLimiter::<_, 64>::with_capacity(o, &clock).unwrap(),
            SlidingLogLimiter::<_, 64, NoQueue>::with_capacity(o, &clock).unwrap(),
        );
        same_decisions(&a, &b, &clock, seed ^ 4, u64::from(limit));
    }
}

/// The same rules for every rate limiter without a queue: a queue limit is refused at creation
/// and at reconfiguration, changing nothing; a new order of the queue that does not exist is
/// accepted; a new limit applies.
#[test]
fn every_rate_limiter_without_a_queue_refuses_a_queue_limit() {
    let clock = ManualClock::new();
    let sec = Duration::from_secs(1);
    let q = |n| (n, QueueOrder::OldestFirst);
    macro_rules! check {
        ($l:expr, $opts:expr, $smaller:expr) => {{
            let opts = $opts;
            let (limit, order) = q(1);
            assert_eq!(
                $l(opts.with_queue(limit, order)).unwrap_err(),
                OptionsError::NoWaitQueue
            );
            let l = $l(opts).unwrap();
            l.try_acquire(1).unwrap().forget();
            let before = (l.options(), l.available_permits());
            assert_eq!(
                l.reconfigure(opts.with_queue(limit, order)),
                Err(OptionsError::NoWaitQueue)
            );
            assert_eq!(
                (l.options(), l.available_permits()),
                before,
                "nothing changed"
            );
            l.reconfigure(opts.with_queue(0, QueueOrder::NewestFirst))
                .unwrap();
            l.reconfigure($smaller).unwrap();
            assert_ne!(l.options(), before.0, "the new options apply");
            assert!(
                l.available_permits() <= before.1,
                "the smaller limit applies"
            );
        }};
    }
    check!(
        |o| GcraLimiter::without_queue(o, &clock),
        GcraOptions::per_second(4),
        GcraOptions::per_second(2)
    );
    check!(
        |o| LeakyBucketMeter::without_queue(o, &clock),
        LeakyBucketOptions::new(4, 1, sec),
        LeakyBucketOptions::new(2, 1, sec)
    );
    check!(
        |o| LeakyBucketShaper::without_queue(o, &clock),
        ShaperOptions::per_second(4)
            .with_max_permits(4)
            .with_queue(0, QueueOrder::OldestFirst),
        ShaperOptions::per_second(1).with_queue(0, QueueOrder::OldestFirst)
    );
    check!(
        |o| SlidingWindowLimiter::without_queue(o, &clock),
        SlidingWindowOptions::new(4, sec, 2),
        SlidingWindowOptions::new(2, sec, 2)
    );
    check!(
        |o| SlidingCounterLimiter::without_queue(o, &clock),
        SlidingCounterOptions::new(4, sec),
        SlidingCounterOptions::new(2, sec)
    );
    check!(
        |o| SlidingLogLimiter::without_queue(o, &clock),
        SlidingLogOptions::new(4, sec),
        SlidingLogOptions::new(2, sec)
    );
}

#[test]
fn a_queue_limit_is_refused_at_creation_and_at_reconfiguration() {
    let clock = ManualClock::new();
    let sec = Duration::from_secs(1);
    let opts = TokenBucketOptions::new(4, 1, sec);
    for order in [QueueOrder::OldestFirst, QueueOrder::NewestFirst] {
        let queued = opts.with_queue(1, order);
        let err = TokenBucketLimiter::without_queue(queued, &clock).unwrap_err();
        assert_eq!(err, OptionsError::NoWaitQueue);
        let window = FixedWindowOptions::new(4, sec).with_queue(1, order);
        let err = FixedWindowLimiter::without_queue(window, &clock).unwrap_err();
        assert_eq!(err, OptionsError::NoWaitQueue);
    }
    assert!(OptionsError::NoWaitQueue
        .to_string()
        .contains("queue limit must be 0"));
    // Invalid options keep their own errors.
    let zero = TokenBucketOptions::new(0, 1, sec);
    assert_eq!(
        TokenBucketLimiter::without_queue(zero, &clock).unwrap_err(),
        OptionsError::ZeroLimit
    );

    let bucket = TokenBucketLimiter::without_queue(opts, &clock).unwrap();
    let _held = bucket.try_acquire(3).unwrap();
    for (new, err) in [
        (
            opts.with_queue(2, QueueOrder::OldestFirst),
            OptionsError::NoWaitQueue,
        ),
        (
            TokenBucketOptions::new(4, 1, 2 * sec),
            OptionsError::FixedAtCreation,
        ),
        (TokenBucketOptions::new(0, 1, sec), OptionsError::ZeroLimit),
    ] {
        assert_eq!(bucket.reconfigure(new), Err(err));
        assert_eq!(bucket.options(), opts, "nothing changed");
        assert_eq!(bucket.available_permits(), 1);
    }
    // Changing the order of a queue that does not exist changes nothing: accepted.
    let reordered = TokenBucketOptions::new(2, 1, sec).with_queue(0, QueueOrder::NewestFirst);
    bucket.reconfigure(reordered).unwrap();
    assert_eq!(bucket.options().token_limit, 2);
    assert_eq!(bucket.available_permits(), 1);
    clock.advance(sec);
    assert_eq!(
        bucket.available_permits(),
        2,
        "refills stop at the new limit"
    );
}

#[test]
fn reconfiguring_a_window_without_a_queue_follows_the_bucket_rule() {
    let clock = ManualClock::new();
    let minute = Duration::from_secs(60);
    let window =
        FixedWindowLimiter::without_queue(FixedWindowOptions::new(100, minute), &clock).unwrap();
    window.try_acquire(30).unwrap().forget();
    window
        .reconfigure(FixedWindowOptions::new(50, minute))
        .unwrap();
    assert_eq!(window.available_permits(), 50);
    assert_eq!(
        window.reconfigure(FixedWindowOptions::new(50, 2 * minute)),
        Err(OptionsError::FixedAtCreation)
    );
    let too_many = FixedWindowOptions::new(50, minute).with_queue(5, QueueOrder::OldestFirst);
    assert_eq!(window.reconfigure(too_many), Err(OptionsError::NoWaitQueue));
    clock.advance(minute);
    window.try_acquire(50).unwrap().forget();
    assert_eq!(
        window.try_acquire(1).unwrap_err().retry_after(),
        Some(minute)
    );
}

#[test]
fn nobody_to_serve_close_refuses_and_statistics_count() {
    let clock = ManualClock::new();
    let sec = Duration::from_secs(1);
    let bucket =
        TokenBucketLimiter::without_queue(TokenBucketOptions::new(2, 2, sec), &clock).unwrap();
    assert_eq!(bucket.next_service(), None);
    assert_eq!(bucket.replenishment_period(), sec);
    bucket.try_acquire(2).unwrap().forget();
    let denied = bucket.try_acquire(1).unwrap_err();
    assert_eq!(denied.reason(), Reason::Exhausted);
    assert_eq!(denied.retry_after(), Some(sec));
    assert_eq!(
        bucket.try_acquire(3).unwrap_err().reason(),
        Reason::ExceedsLimit
    );
    clock.advance(sec);
    assert_eq!(bucket.replenish(), 2);
    assert_eq!(bucket.next_service(), None);
    let s = bucket.statistics();
    assert_eq!(
        (s.total_successful, s.total_failed, s.queued_permits),
        (1, 2, 0)
    );
    assert_eq!(bucket.idle_duration(), Some(Duration::ZERO));
    bucket.close();
    assert!(bucket.is_closed());
    assert_eq!(bucket.try_acquire(1).unwrap_err().reason(), Reason::Closed);
    assert_eq!(bucket.peek(1).unwrap_err().reason(), Reason::Closed);
}

static SHARED: TokenBucketLimiter<ManualClock, NoQueue> =
    TokenBucketLimiter::at_epoch_without_queue(
        TokenBucketOptions::new(1_000, 1, Duration::from_secs(3600)),
        ManualClock::new(),
    );

/// Four threads take from one `static` bucket: exactly its tokens are granted.
#[test]
fn a_static_bucket_without_a_queue_never_over_admits() {
    let granted: u32 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    (0..1_000)
                        .filter(|_| SHARED.try_acquire(1).map(|l| l.forget()).is_ok())
                        .count() as u32
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(granted, 1_000);
    assert_eq!(SHARED.statistics().total_failed, 3_000);
}

#[test]
fn limiters_without_a_queue_compose_in_chains() {
    let clock = ManualClock::new();
    let sec = Duration::from_secs(1);
    let bucket =
        TokenBucketLimiter::without_queue(TokenBucketOptions::new(3, 1, sec), &clock).unwrap();
    let window =
        FixedWindowLimiter::without_queue(FixedWindowOptions::new(2, sec), &clock).unwrap();
    let chain = Chain::new((&bucket, &window));
    let _a = chain.try_acquire(2).unwrap();
    let denied = chain.try_acquire(1).unwrap_err();
    assert_eq!(denied.reason(), Reason::Exhausted);
    // As for every rate limiter, a chain's rollback gives the bucket nothing back (see `Chain`).
    assert_eq!(bucket.available_permits(), 0);
    assert_eq!(window.available_permits(), 0);
}

// The concurrency limiter without a queue.

use tollgate::{ConcurrencyLimiter, ConcurrencyOptions};

fn bare(limit: u32, clock: &ManualClock) -> ConcurrencyLimiter<&ManualClock, NoQueue> {
    ConcurrencyLimiter::without_queue(ConcurrencyOptions::new(limit), clock).unwrap()
}

#[test]
fn a_concurrency_limiter_without_a_queue_decides_as_one_with_a_queue_limit_of_zero() {
    for (seed, limit) in [(5u64, 1u32), (13, 4), (99, 64)] {
        let clock = ManualClock::new();
        let opts = ConcurrencyOptions::new(limit);
        let queued = ConcurrencyLimiter::with_clock(opts, &clock).unwrap();
        let unqueued = bare(limit, &clock);
        // Hold some leases across steps, so that releases come back out of order.
        let mut walk = Walk(seed);
        let mut held = Vec::new();
        for step in 0..5_000 {
            let x = walk.next();
            clock.advance(Duration::from_nanos(x % 700));
            let n = ((x >> 16) % (u64::from(limit) + 2)) as u32;
            assert_eq!(queued.peek(n), unqueued.peek(n), "step {step}: peek({n})");
            match (queued.try_acquire(n), unqueued.try_acquire(n)) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a.permits(), b.permits());
                    if x & 4 == 0 {
                        held.push((a, b));
                    }
                }
                (Err(a), Err(b)) => assert_eq!(a, b, "step {step}: try_acquire({n})"),
                (a, b) => panic!("step {step}: try_acquire({n}): {a:?} vs {b:?}"),
            }
            if x & 8 == 0 && !held.is_empty() {
                let i = (x >> 32) as usize % held.len();
                drop(held.swap_remove(i));
            }
            assert_eq!(queued.available_permits(), unqueued.available_permits());
            assert_eq!(
                queued.idle_duration(),
                unqueued.idle_duration(),
                "step {step}"
            );
        }
        drop(held);
        assert_eq!(queued.statistics(), unqueued.statistics());
        assert_eq!(unqueued.available_permits(), u64::from(limit));
    }
}

#[test]
fn the_limit_holds_and_releases_return_the_permits() {
    let clock = ManualClock::new();
    let limiter = bare(3, &clock);
    let a = limiter.try_acquire(2).unwrap();
    assert!(a.returns_permits());
    let denied = limiter.try_acquire(2).unwrap_err();
    assert_eq!(denied.reason(), Reason::Exhausted);
    assert_eq!(
        denied.retry_after(),
        None,
        "only releases bring permits back"
    );
    assert_eq!(
        limiter.try_acquire(4).unwrap_err().reason(),
        Reason::ExceedsLimit
    );
    let b = limiter.try_acquire(1).unwrap();
    assert_eq!(limiter.available_permits(), 0);
    assert_eq!(limiter.peek(1).unwrap_err().reason(), Reason::Exhausted);
    drop(a);
    assert_eq!(limiter.available_permits(), 2);
    drop(b);
    assert_eq!(limiter.available_permits(), 3);
    // A probe takes nothing and returns nothing.
    let probe = limiter.try_acquire(0).unwrap();
    assert!(!probe.returns_permits());
    // A forgotten lease keeps its permits taken.
    assert_eq!(limiter.try_acquire(1).unwrap().forget(), 1);
    assert_eq!(limiter.available_permits(), 2);
}

#[test]
fn concurrency_statistics_are_exact_and_idleness_is_dated() {
    let clock = ManualClock::new();
    let limiter = bare(2, &clock);
    let sec = Duration::from_secs(1);
    clock.advance(sec);
    assert_eq!(limiter.idle_duration(), Some(sec), "idle since creation");
    let a = limiter.try_acquire(2).unwrap();
    assert_eq!(limiter.idle_duration(), None);
    for _ in 0..5 {
        assert!(limiter.try_acquire(1).is_err());
    }
    clock.advance(sec);
    drop(a); // a cheap clock: the release dates idleness
    clock.advance(3 * sec);
    assert_eq!(limiter.idle_duration(), Some(3 * sec));
    let s = limiter.statistics();
    assert_eq!(
        (
            s.total_successful,
            s.total_failed,
            s.queued_permits,
            s.available_permits
        ),
        (1, 5, 0, 2)
    );
}

#[test]
fn closing_a_concurrency_limiter_without_a_queue_refuses_newcomers() {
    let clock = ManualClock::new();
    let limiter = bare(2, &clock);
    let held = limiter.try_acquire(1).unwrap();
    limiter.close();
    assert!(limiter.is_closed());
    assert_eq!(limiter.try_acquire(1).unwrap_err().reason(), Reason::Closed);
    assert_eq!(limiter.peek(0).unwrap_err().reason(), Reason::Closed);
    drop(held); // a lease out still gives its permit back
    assert_eq!(limiter.available_permits(), 2);
    assert_eq!(limiter.statistics().total_failed, 1);
}

#[test]
fn reconfiguring_a_concurrency_limiter_without_a_queue_follows_the_queued_rule() {
    let clock = ManualClock::new();
    let limiter = bare(10, &clock);
    let a = limiter.try_acquire(5).unwrap();
    let b = limiter.try_acquire(3).unwrap();
    // Down below what is held: 2 available absorbed, 4 owed.
    limiter.reconfigure(ConcurrencyOptions::new(4)).unwrap();
    assert_eq!(limiter.options().permit_limit, 4);
    assert_eq!(limiter.available_permits(), 0);
    assert_eq!(limiter.idle_duration(), None);
    assert_eq!(
        limiter.try_acquire(5).unwrap_err().reason(),
        Reason::ExceedsLimit
    );
    drop(b); // pays 3 of the 4 owed
    assert_eq!(limiter.available_permits(), 0);
    assert!(limiter.try_acquire(1).is_err());
    // Up while still owing 1: the raise pays it, the rest is available at once.
    limiter.reconfigure(ConcurrencyOptions::new(6)).unwrap();
    assert_eq!(limiter.available_permits(), 1);
    let c = limiter.try_acquire(1).unwrap();
    drop(a); // 5 back: all 6 but c's
    assert_eq!(limiter.available_permits(), 5);
    drop(c);
    assert_eq!(limiter.available_permits(), 6);
    // Down within what is available: nothing owed.
    let d = limiter.try_acquire(2).unwrap();
    limiter.reconfigure(ConcurrencyOptions::new(3)).unwrap();
    assert_eq!(limiter.available_permits(), 1);
    drop(d);
    assert_eq!(limiter.available_permits(), 3);
    // A release of more than was taken never lifts the count above the limit.
    tollgate::Release::release(&limiter, 5);
    assert_eq!(limiter.available_permits(), 3);
    // The queue order of a queue that does not exist changes nothing: accepted.
    let reordered = ConcurrencyOptions::new(2).with_queue(0, QueueOrder::NewestFirst);
    limiter.reconfigure(reordered).unwrap();
    assert_eq!(limiter.options().permit_limit, 2);
    assert_eq!(limiter.available_permits(), 2);
    assert_eq!(limiter.idle_duration(), Some(Duration::ZERO));
}

#[test]
fn a_concurrency_queue_limit_is_refused_at_creation_and_at_reconfiguration() {
    let clock = ManualClock::new();
    for order in [QueueOrder::OldestFirst, QueueOrder::NewestFirst] {
        let queued = ConcurrencyOptions::new(4).with_queue(1, order);
        let err = ConcurrencyLimiter::without_queue(queued, &clock).unwrap_err();
        assert_eq!(err, OptionsError::NoWaitQueue);
    }
    assert_eq!(
        ConcurrencyLimiter::without_queue(ConcurrencyOptions::new(0), &clock).unwrap_err(),
        OptionsError::ZeroLimit
    );
    let limiter = bare(4, &clock);
    let _held = limiter.try_acquire(3).unwrap();
    let queued = ConcurrencyOptions::new(8).with_queue(2, QueueOrder::OldestFirst);
    for (new, err) in [
        (queued, OptionsError::NoWaitQueue),
        (ConcurrencyOptions::new(0), OptionsError::ZeroLimit),
    ] {
        assert_eq!(limiter.reconfigure(new), Err(err));
        assert_eq!(
            limiter.options(),
            ConcurrencyOptions::new(4),
            "nothing changed"
        );
        assert_eq!(limiter.available_permits(), 1);
    }
}

static PERMITS: ConcurrencyLimiter<ManualClock, NoQueue> =
    ConcurrencyLimiter::at_epoch_without_queue(ConcurrencyOptions::new(3), ManualClock::new());

/// Four threads take and release from one `static` limiter (and one reconfigures it): never
/// more than the limit in force is held, and every permit comes back.
#[test]
fn a_static_concurrency_limiter_without_a_queue_never_exceeds_its_limit() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let inside = AtomicU32::new(0);
    let most = AtomicU32::new(0);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (inside, most) = (&inside, &most);
            s.spawn(move || {
                let mut walk = Walk(t + 1);
                for _ in 0..20_000 {
                    let n = (walk.next() % 2) as u32 + 1;
                    if let Ok(lease) = PERMITS.try_acquire(n) {
                        let now = inside.fetch_add(n, Ordering::SeqCst) + n;
                        most.fetch_max(now, Ordering::SeqCst);
                        assert!(now <= 3, "{now} held, limit 3");
                        inside.fetch_sub(n, Ordering::SeqCst);
                        drop(lease);
                    }
                }
            });
        }
    });
    assert_eq!(PERMITS.available_permits(), 3);
    assert!(most.load(Ordering::SeqCst) <= 3);
    let s = PERMITS.statistics();
    assert_eq!(s.total_successful + s.total_failed, 80_000);
}

/// Threads take and release while another lowers and raises the limit: every permit comes
/// back once the leases are gone, and the limit in force at the end is what is available.
#[test]
fn releases_racing_reconfigurations_lose_no_permit() {
    let clock = ManualClock::new();
    let limiter = bare(8, &clock);
    std::thread::scope(|s| {
        for t in 0..3u64 {
            let limiter = &limiter;
            s.spawn(move || {
                let mut walk = Walk(t + 7);
                for _ in 0..20_000 {
                    let n = (walk.next() % 3) as u32 + 1;
                    drop(limiter.try_acquire(n));
                }
            });
        }
        s.spawn(|| {
            for i in 0..2_000u32 {
                limiter
                    .reconfigure(ConcurrencyOptions::new(1 + i % 8))
                    .unwrap();
            }
        });
    });
    assert_eq!(limiter.options().permit_limit, 8);
    assert_eq!(limiter.available_permits(), 8);
}

/// An owned lease of a limiter without a queue gives its permits back when dropped, from
/// another thread too.
#[test]
fn owned_leases_of_a_concurrency_limiter_without_a_queue_come_back() {
    use std::sync::Arc;
    use tollgate::AcquireOwned;
    let limiter = Arc::new(
        ConcurrencyLimiter::without_queue(ConcurrencyOptions::new(2), ManualClock::new()).unwrap(),
    );
    let lease = limiter.try_acquire_owned(2).unwrap();
    assert!(lease.returns_permits());
    assert_eq!(limiter.available_permits(), 0);
    std::thread::spawn(move || drop(lease)).join().unwrap();
    assert_eq!(limiter.available_permits(), 2);
}
