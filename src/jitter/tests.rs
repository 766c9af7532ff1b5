use super::*;
use crate::{
    Limiter, ManualClock, QueueOrder, Replenishing, TokenBucketLimiter, TokenBucketOptions,
};
use core::task::Waker;

const MS: Duration = Duration::from_millis(1);

fn poll<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

/// One permit now, the next every 100 ms, a queue of 4.
fn bucket(clock: &ManualClock) -> TokenBucketLimiter<&ManualClock> {
    let opts = TokenBucketOptions::new(1, 1, 100 * MS).with_queue(4, QueueOrder::OldestFirst);
    TokenBucketLimiter::with_clock(opts, clock).unwrap()
}

#[test]
fn a_seed_fixes_the_sequence_and_different_seeds_differ() {
    let a = Jitter::up_to(Duration::from_secs(1)).with_seed(11);
    let b = Jitter::up_to(Duration::from_secs(1)).with_seed(11);
    let c = Jitter::up_to(Duration::from_secs(1)).with_seed(12);
    let wait = Duration::from_secs(2);
    let (xs, ys, zs): (Vec<_>, Vec<_>, Vec<_>) = (0..64)
        .map(|_| (a.extra(wait), b.extra(wait), c.extra(wait)))
        .fold(
            (vec![], vec![], vec![]),
            |(mut x, mut y, mut z), (p, q, r)| {
                x.push(p);
                y.push(q);
                z.push(r);
                (x, y, z)
            },
        );
    assert_eq!(xs, ys);
    assert_ne!(xs, zs);
    // A clone continues the same sequence.
    let d = a.clone();
    assert_eq!(a.extra(wait), d.extra(wait));
}

/// The first values of seed 0 are SplitMix64's published ones: the generator is the one named.
#[test]
fn the_generator_is_splitmix64() {
    let j = Jitter::up_to(Duration::ZERO).with_seed(0);
    assert_eq!(j.next_u64(), 0xE220_A839_7B1D_CDAF);
    assert_eq!(j.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    assert_eq!(j.next_u64(), 0x06C4_5D18_8009_454F);
}

#[test]
fn draws_stay_in_range_and_spread_over_it() {
    let bound = 1_000_000u64; // 1 ms
    let j = Jitter::up_to(Duration::from_nanos(bound)).with_seed(3);
    let n = 20_000u64;
    let (mut lo, mut hi, mut sum) = (u64::MAX, 0, 0u128);
    let mut tenths = [0u32; 10];
    for _ in 0..n {
        let e = j.extra_ns(123);
        assert!(e <= bound);
        lo = lo.min(e);
        hi = hi.max(e);
        sum += u128::from(e);
        tenths[usize::try_from((e * 10 / (bound + 1)).min(9)).unwrap()] += 1;
    }
    assert!(lo < bound / 100 && hi > bound - bound / 100, "{lo} {hi}");
    let mean = (sum / u128::from(n)) as u64;
    // Uniform: mean bound / 2, standard error bound / sqrt(12 n) ≈ 0.2 % of the bound.
    assert!(mean.abs_diff(bound / 2) < bound / 100, "mean {mean}");
    // Each tenth holds n / 10 ± 5 standard deviations (σ = sqrt(n × 0.09) ≈ 42).
    for t in tenths {
        assert!(t.abs_diff(2_000) < 220, "{tenths:?}");
    }
}

#[test]
fn a_zero_bound_draws_nothing_and_adds_nothing() {
    let j = Jitter::per_mille(500).with_seed(1);
    let before = j.state.load(Ordering::Relaxed);
    assert_eq!(j.apply(Duration::ZERO), Duration::ZERO);
    assert_eq!(j.state.load(Ordering::Relaxed), before);
    let none = Jitter::up_to(Duration::ZERO);
    assert_eq!(none.apply(Duration::from_secs(3)), Duration::from_secs(3));
}

#[test]
fn bounds_of_fractions_caps_and_extremes() {
    let s = Duration::from_secs;
    assert_eq!(Jitter::per_mille(1000).bound(s(7)), s(7));
    assert_eq!(Jitter::percent(250).bound(s(4)), s(10));
    assert_eq!(Jitter::per_mille(0).bound(s(4)), Duration::ZERO);
    // Exact to the nanosecond, rounded down.
    assert_eq!(
        Jitter::per_mille(333).bound(s(3)),
        Duration::from_millis(999)
    );
    assert_eq!(
        Jitter::per_mille(1).bound(Duration::from_nanos(1_999)),
        Duration::from_nanos(1)
    );
    for (ns, p) in [
        (123_456_789_012u64, 4_294_967_295u32),
        (999, 999),
        (1_000_001, 3),
        (u64::MAX, 7),
        (u64::MAX, 1000),
    ] {
        let want = (u128::from(ns) * u128::from(p) / 1000).min(u128::from(u64::MAX)) as u64;
        assert_eq!(
            Jitter::per_mille(p).bound(Duration::from_nanos(ns)),
            Duration::from_nanos(want),
            "{ns} {p}"
        );
    }
    assert_eq!(Jitter::per_mille(100).at_most(s(1)).bound(s(60)), s(1));
    assert_eq!(Jitter::up_to(s(9)).at_most(s(2)).bound(s(60)), s(2));
    assert_eq!(Jitter::up_to(s(2)).at_most(s(9)).bound(s(60)), s(2));
    // Past 584 years the bound saturates, and so does the result.
    let huge = Jitter::per_mille(u32::MAX).with_seed(2);
    assert_eq!(huge.bound(Duration::MAX), Duration::from_nanos(u64::MAX));
    assert_eq!(huge.apply(Duration::MAX), Duration::MAX);
    assert_eq!(
        Jitter::percent(u32::MAX).bound(s(1)),
        Jitter::per_mille(u32::MAX).bound(s(1))
    );
    let max = Jitter::up_to(Duration::MAX).with_seed(4);
    assert!(max.apply(s(1)) >= s(1));
}

#[test]
fn a_jittered_retry_after_is_never_shorter() {
    let j = Jitter::up_to(Duration::from_secs(1)).with_seed(8);
    let exact = Duration::from_millis(1_500);
    let r = Rejection::with_retry_after(&crate::Reason::Exhausted, exact);
    let mut distinct = std::collections::BTreeSet::new();
    for _ in 0..1_000 {
        let told = j.retry_after(&r).unwrap();
        assert!(told >= exact && told <= exact + Duration::from_secs(1));
        distinct.insert(told);
    }
    assert!(distinct.len() > 990);
    assert_eq!(r.retry_after(), Some(exact)); // the rejection is unchanged
}

#[test]
fn debug_says_what_it_draws() {
    let j = Jitter::percent(5)
        .at_most(Duration::from_secs(1))
        .with_seed(1);
    assert_eq!(
        format!("{j:?}"),
        "Jitter { per_mille: 50, at_most: 1s, seeded: true }"
    );
    let j = Jitter::up_to(MS);
    assert_eq!(format!("{j:?}"), "Jitter { up_to: 1ms, seeded: false }");
}

static STATIC: Jitter = Jitter::up_to(Duration::from_millis(5)).with_seed(99);

#[test]
fn a_jitter_can_be_a_static() {
    assert!(STATIC.extra(Duration::ZERO) <= Duration::from_millis(5));
}

/// A waiter granted at 100 ms completes no earlier, and no later than 100 ms + the bound,
/// polled every millisecond: for many seeds.
#[test]
fn a_jittered_waiter_completes_between_its_grant_and_the_bound() {
    let mut extras = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let clock = ManualClock::new();
        let limiter = bucket(&clock);
        let jitter = Jitter::up_to(30 * MS).with_seed(seed);
        limiter.try_acquire(1).unwrap().forget();
        let mut waiter = pin!(limiter.acquire_jittered(1, &jitter));
        assert!(poll(waiter.as_mut()).is_pending());
        let mut at = Duration::ZERO;
        loop {
            if let Poll::Ready(r) = poll(waiter.as_mut()) {
                assert_eq!(r.unwrap().permits(), 1);
                break;
            }
            assert!(at <= 130 * MS, "seed {seed}: still waiting at {at:?}");
            clock.advance(MS);
            at += MS;
        }
        assert!(
            at >= 100 * MS,
            "seed {seed}: completed at {at:?}, before its permit"
        );
        extras.insert(at - 100 * MS);
        assert_eq!(limiter.statistics().total_successful, 2);
    }
    // The delays spread over the bound.
    assert!(extras.len() > 25, "{extras:?}");
}

#[test]
fn a_request_granted_at_once_is_not_delayed() {
    let clock = ManualClock::new();
    let limiter = bucket(&clock);
    let jitter = Jitter::up_to(Duration::from_secs(10)).with_seed(1);
    let mut now = pin!(limiter.acquire_jittered(1, &jitter));
    assert!(matches!(poll(now.as_mut()), Poll::Ready(Ok(_))));
    // A refusal is not delayed either.
    let mut too_many = pin!(limiter.acquire_jittered(2, &jitter));
    let r = match poll(too_many.as_mut()) {
        Poll::Ready(Err(r)) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(r.reason(), crate::Reason::ExceedsLimit);
}

/// Dropped during its delay, a waiter is a cancelled request: its permit goes back (to the
/// next waiter) and it is not counted, as for any waiter dropped after its grant.
#[test]
fn a_waiter_dropped_during_its_delay_gives_its_permits_back() {
    let clock = ManualClock::new();
    let limiter = bucket(&clock);
    let jitter = Jitter::up_to(Duration::from_secs(1)).with_seed(5);
    limiter.try_acquire(1).unwrap().forget();
    {
        let mut held = pin!(limiter.acquire_jittered(1, &jitter));
        assert!(poll(held.as_mut()).is_pending());
        clock.advance(100 * MS);
        assert!(poll(held.as_mut()).is_pending(), "granted, then held");
        assert_eq!(limiter.statistics().queued_permits, 0);
        assert_eq!(limiter.available_permits(), 0);
    }
    assert_eq!(limiter.available_permits(), 1, "the permit came back");
    let s = limiter.statistics();
    assert_eq!((s.total_successful, s.total_failed), (1, 0));
    assert!(limiter.try_acquire(1).is_ok());
}

/// The queue's semantics are unchanged: a second waiter is granted at its own instant even
/// while the first is still held.
#[test]
fn grants_keep_queue_order_and_instants() {
    let clock = ManualClock::new();
    let limiter = bucket(&clock);
    let jitter = Jitter::up_to(Duration::from_secs(1)).with_seed(6);
    limiter.try_acquire(1).unwrap().forget();
    let mut first = pin!(limiter.acquire_jittered(1, &jitter));
    let mut second = pin!(limiter.acquire_jittered(1, &jitter));
    assert!(poll(first.as_mut()).is_pending());
    assert!(poll(second.as_mut()).is_pending());
    assert_eq!(limiter.statistics().queued_permits, 2);
    clock.advance(100 * MS);
    assert!(poll(first.as_mut()).is_pending());
    assert_eq!(limiter.statistics().queued_permits, 1); // the first granted (held)
    clock.advance(100 * MS);
    limiter.replenish();
    assert_eq!(limiter.statistics().queued_permits, 0); // the second granted at 200 ms
    assert!(limiter.try_acquire(1).is_err());
    assert!(poll(second.as_mut()).is_pending(), "held from this poll on");
    clock.advance(Duration::from_secs(1));
    assert!(poll(first.as_mut()).is_ready());
    assert!(poll(second.as_mut()).is_ready());
}

/// A fractional jitter scales with the time waited (from the first poll to the grant).
#[test]
fn a_fractional_jitter_scales_with_the_wait() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(1, 1, Duration::from_secs(1))
        .with_queue(1, QueueOrder::OldestFirst);
    let limiter = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    let jitter = Jitter::per_mille(100).with_seed(1);
    for _ in 0..50 {
        limiter.try_acquire(1).unwrap().forget();
        let mut waiter = pin!(limiter.acquire_jittered(1, &jitter));
        assert!(poll(waiter.as_mut()).is_pending());
        clock.advance(Duration::from_secs(1));
        let mut extra = Duration::ZERO;
        while poll(waiter.as_mut()).is_pending() {
            clock.advance(MS);
            extra += MS;
        }
        assert!(extra <= 100 * MS, "{extra:?}");
        // Let the bucket refill, so the next round waits a whole second again.
        clock.advance(Duration::from_secs(1));
    }
}

#[test]
fn blocking_with_jitter_returns_the_grant_at_its_timeout() {
    let clock = ManualClock::new();
    let limiter = bucket(&clock);
    // Drawn once from seed 1 with this bound: far longer than the test's timeout.
    let jitter = Jitter::up_to(Duration::from_secs(3_600)).with_seed(1);
    limiter.try_acquire(1).unwrap().forget();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| limiter.acquire_blocking_jittered(1, Some(300 * MS), &jitter));
        while limiter.statistics().queued_permits == 0 {
            std::thread::yield_now();
        }
        clock.advance(100 * MS);
        limiter.replenish(); // granted now; the clock then stands still
        let lease = waiter.join().unwrap().unwrap();
        assert_eq!(lease.permits(), 1);
    });
    assert_eq!(limiter.statistics().total_successful, 2);
    // Granted at once: no delay, and a refusal as `acquire_blocking`'s.
    assert!(limiter
        .acquire_blocking_jittered(1, Some(MS), &jitter)
        .is_err_and(|r| r.reason() == crate::Reason::TimedOut));
}

#[test]
fn blocking_with_jitter_waits_out_its_delay_on_a_moving_clock() {
    // Timed from before the limiter exists: its token comes back 50 ms after its creation,
    // however slowly the lines between run (under miri, tens of milliseconds).
    let start = std::time::Instant::now();
    let opts = TokenBucketOptions::new(1, 1, 50 * MS).with_queue(1, QueueOrder::OldestFirst);
    let limiter = TokenBucketLimiter::new(opts).unwrap();
    let jitter = Jitter::up_to(20 * MS).with_seed(2);
    limiter.try_acquire(1).unwrap().forget();
    let lease = limiter.acquire_blocking_jittered(1, None, &jitter).unwrap();
    assert_eq!(lease.permits(), 1);
    assert!(start.elapsed() >= 49 * MS, "{:?}", start.elapsed());
}
