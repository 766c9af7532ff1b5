//! Issue 27: the two algorithms added with the lean scripts — the sliding counter and the leaky
//! bucket as a meter — against their local limiters, and exact across machines.

use super::*;

/// Like [`replay`], for a local limiter whose RetryAfter is exact to the nanosecond: Redis's is
/// the same instant rounded up to the microsecond.
async fn replay_rounded(
    redis: &RedisLimiter,
    origin_us: u64,
    clock: &ManualClock,
    local: &dyn Limiter,
    steps: &[Step],
) -> Vec<bool> {
    let start = std::time::Instant::now();
    let mut seen = Vec::new();
    let up = |d: Duration| Duration::from_micros(d.as_nanos().div_ceil(1_000) as u64);
    for s in steps {
        if let Some(wait) = s.at.checked_sub(start.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        for _ in 0..s.times {
            let d = redis.decide("k", s.permits).await;
            assert_eq!(d.decided_by, DecidedBy::Redis);
            let at_us = d.server_time_us.unwrap() - origin_us;
            clock.set(Instant::from_nanos(at_us * 1_000));
            let l = local.try_acquire(s.permits).map(Lease::forget);
            assert_eq!(
                d.outcome.map_err(|r| r.retry_after()),
                l.map(drop).map_err(|r| r.retry_after().map(up)),
                "Redis and the local limiter disagree at {at_us} µs after the origin"
            );
            if d.allowed() {
                assert_eq!(d.remaining, local.available_permits(), "at {at_us} µs");
            }
            seen.push(d.allowed());
        }
    }
    seen
}

/// Article 001's example (9 in the previous window, 5 in this one, a quarter in: 11.75 > 10),
/// a "minute" being 400 ms, then the weight fading and both windows leaving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_counter_article_example_matches_the_local_counter() {
    let w = Duration::from_millis(400);
    let mut conn = manager(&url()).await;
    let opts = SlidingCounterOptions::new(10, w);
    let redis = limiter(
        conn.clone(),
        "sc",
        Algorithm::SlidingCounter(opts),
        FailurePolicy::FailClosed,
    );
    let origin = align(&mut conn, w).await;
    let clock = ManualClock::new();
    let local = SlidingCounterLimiter::with_clock(opts, &clock).unwrap();
    let seen = replay_rounded(
        &redis,
        origin,
        &clock,
        &local,
        &[
            step(Duration::ZERO, 1, 9),  // 9 in the first window
            step(w + w / 4, 1, 5),       // 9 · 0.75 + 3 ≤ 10; the 4th would make 10.75
            step(w + w / 4, 0, 1),       // a probe: refused, with when one permit fits
            step(w + 3 * w / 4, 1, 5),   // 9 · 0.25 + 3 + 4 ≤ 10, the 5th is over
            step(w + 3 * w / 4, 3, 1),   // refused until the next window, weighted
            step(3 * w + w / 10, 10, 2), // both windows gone: 10, then refused
            step(3 * w + w / 2, 0, 1),   // probe
        ],
    )
    .await;
    assert!(seen.contains(&true) && seen.contains(&false));
}

/// The leaky meter's own doc example (capacity 4, one unit leaking every 100 ms), replayed
/// against the local meter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaky_meter_matches_the_local_meter() {
    let u = Duration::from_millis(100);
    let mut conn = manager(&url()).await;
    let opts = LeakyBucketOptions::new(4, 1, u);
    let redis = limiter(
        conn.clone(),
        "lm",
        Algorithm::LeakyMeter(opts),
        FailurePolicy::FailClosed,
    );
    let origin = align(&mut conn, u).await;
    let clock = ManualClock::new();
    let local = LeakyBucketMeter::with_clock(opts, &clock).unwrap();
    let seen = replay(
        &redis,
        origin,
        &clock,
        &local,
        &[
            step(Duration::ZERO, 1, 5), // fills it, then 100 ms to wait
            step(u + u / 2, 1, 2),      // 1.5 drained: one fits
            step(u + u / 2, 0, 1),      // a probe
            step(12 * u, 4, 1),         // empty again: 4 at once
            step(12 * u, 2, 1),         // then 2 more must wait for 2 units to leak
        ],
    )
    .await;
    assert!(seen.contains(&true) && seen.contains(&false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactness_sliding_counter_many_machines_one_key() {
    // An hour's window: the run stays inside one window (if it happens to cross one, the window
    // it left must still have admitted exactly the limit).
    let window = Duration::from_secs(3_600);
    let d = hammer(
        Algorithm::SlidingCounter(SlidingCounterOptions::new(60, window)),
        "exact-sc",
        3,
        8,
        40,
    )
    .await;
    let windows = per_window(&d, window.as_micros() as u64);
    let (first, (granted, denied)) = windows.iter().next().unwrap();
    assert!(*denied > 0, "{windows:?}");
    assert_eq!(*granted, 60, "window {first}: {windows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactness_leaky_meter_many_machines_one_key() {
    // One unit leaks every 30 s: the run gets the capacity plus what leaks while it runs.
    let interval = Duration::from_secs(30);
    let d = hammer(
        Algorithm::LeakyMeter(LeakyBucketOptions::new(40, 1, interval)),
        "exact-lm",
        4,
        6,
        30,
    )
    .await;
    let first = d.iter().map(|x| x.0).min().unwrap();
    let last = d.iter().map(|x| x.0).max().unwrap();
    let granted = d.iter().filter(|x| x.1).count() as u64;
    assert_eq!(granted, 40 + (last - first) / interval.as_micros() as u64);
}

/// The sliding counter takes a request's permits with `INCRBY` and gives them back with `DECRBY`
/// when they do not fit: a refusal leaves the count as it was, and a window key that a refusal
/// created (its first request refused, the previous window still weighing) expires all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sliding_counter_refusal_gives_its_permits_back_and_its_key_expires() {
    let w = Duration::from_millis(500);
    let mut conn = manager(&url()).await;
    let l = limiter(
        conn.clone(),
        "sc-back",
        Algorithm::SlidingCounter(SlidingCounterOptions::new(10, w)),
        FailurePolicy::FailClosed,
    );
    let k = align(&mut conn, w).await / w.as_micros() as u64;
    assert!(l.acquire("p", 10).await.is_ok());
    // The next window, 60 ms in: the previous 10 weigh 8.8, so 2 do not fit and 1 does.
    tokio::time::sleep_until(tokio::time::Instant::now() + w + w / 10 + Duration::from_millis(7))
        .await;
    let d = l.decide("p", 2).await;
    assert_eq!(d.decided_by, DecidedBy::Redis);
    assert!(!d.allowed(), "{d:?}");
    let next = format!("{}:{}", l.key("p"), k + 1);
    let count: String = conn.get(&next).await.unwrap();
    assert_eq!(count, "0");
    let ttl: i64 = conn.pttl(&next).await.unwrap();
    assert!(
        ttl > 0 && ttl <= 2 * w.as_millis() as i64 + 1_000,
        "PTTL {ttl}"
    );
    // One fits (8.8 + 1), and it is the window's only permit.
    let d = l.decide("p", 1).await;
    assert!(d.allowed(), "{d:?}");
    let count: String = conn.get(&next).await.unwrap();
    assert_eq!(count, "1");
    // A probe writes nothing.
    let _ = l.decide("p", 0).await;
    let count: String = conn.get(&next).await.unwrap();
    assert_eq!(count, "1");
}
