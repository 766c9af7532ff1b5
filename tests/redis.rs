//! The Redis limiter against a real `redis-server` (feature `redis`).
//!
//! Run with `bash .ci/redis.sh`: it starts a fresh server and sets `TOLLGATE_REDIS_URL`; the tests
//! that kill and restart a server start their own (`TOLLGATE_REDIS_SERVER`, else `redis-server`
//! on the PATH). Redis `TIME` is real time, so no test asserts on timing: schedules are replayed
//! against a local limiter on a [`ManualClock`] set to the very instants Redis decided at, and
//! exactness is counted per window of the server's own clock.

use core::time::Duration;
use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use ::redis::aio::ConnectionManager;
use ::redis::AsyncCommands;
use tollgate::redis::{
    Algorithm, CircuitBreaker, DecidedBy, FailurePolicy, Health, PolicyKind, RedisConfigError,
    RedisLimiter, MAX_SPAN, REDIS_KEY_ERROR, REDIS_UNAVAILABLE,
};
use tollgate::*;

/// Issue 27: the sliding counter and the leaky meter.
#[path = "redis/lean.rs"]
mod lean;

/// Issue 27: batched decisions.
#[path = "redis/batch.rs"]
mod batch;

/// Issue 27: leased quotas.
#[path = "redis/lease.rs"]
mod lease;

/// Issue 38: leases settled to their true cost.
#[path = "redis/settle.rs"]
mod settle;

fn url() -> String {
    std::env::var("TOLLGATE_REDIS_URL").expect(
        "TOLLGATE_REDIS_URL is not set: run the Redis suite with `bash .ci/redis.sh`, which starts \
         a redis-server of its own",
    )
}

async fn manager(url: &str) -> ConnectionManager {
    ::redis::Client::open(url)
        .unwrap()
        .get_connection_manager()
        .await
        .unwrap()
}

/// A prefix no other test (or earlier run) uses.
fn prefix(name: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "t:{name}:{}:{nanos}:{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn limiter(
    conn: ConnectionManager,
    name: &str,
    algorithm: Algorithm,
    policy: FailurePolicy,
) -> RedisLimiter {
    RedisLimiter::builder(conn, prefix(name), algorithm, policy)
        .timeout(Duration::from_millis(200)) // a loaded CI machine; the failure tests use less
        .build()
        .unwrap()
}

/// The key holding `partition`'s state now: [`RedisLimiter::key`], or for a fixed window or a
/// sliding counter the key of its current window (`key:<window index>`), found on the server.
async fn stored_key(conn: &mut ConnectionManager, l: &RedisLimiter, partition: &str) -> String {
    let base = l.key(partition);
    if !matches!(
        l.algorithm(),
        Algorithm::FixedWindow(_) | Algorithm::SlidingCounter(_)
    ) {
        return base;
    }
    let mut keys: Vec<String> = conn.keys(format!("{base}:*")).await.unwrap();
    keys.sort_unstable();
    keys.pop().unwrap_or(base)
}

/// The keys where a fixed window or a sliding counter keeps `partition`'s count in the current
/// window and the next two (`key:<window index>`); the key itself for the other algorithms.
async fn window_keys(
    conn: &mut ConnectionManager,
    l: &RedisLimiter,
    partition: &str,
) -> Vec<String> {
    let base = l.key(partition);
    let window = match *l.algorithm() {
        Algorithm::FixedWindow(o) => o.window,
        Algorithm::SlidingCounter(o) => o.window,
        _ => return vec![base],
    };
    let k = server_time_us(conn).await / window.as_micros() as u64;
    (k..k + 3).map(|k| format!("{base}:{k}")).collect()
}

async fn server_time_us(conn: &mut ConnectionManager) -> u64 {
    let (s, us): (u64, u64) = ::redis::cmd("TIME").query_async(conn).await.unwrap();
    s * 1_000_000 + us
}

/// Sleeps until just after the next multiple of `period` on the server's clock; returns it (µs).
async fn align(conn: &mut ConnectionManager, period: Duration) -> u64 {
    let p = period.as_micros() as u64;
    let now = server_time_us(conn).await;
    let boundary = (now / p + 1) * p;
    tokio::time::sleep(Duration::from_micros(boundary - now + 3_000)).await;
    boundary
}

// ---------------------------------------------------------------------------------------------
// Same decisions as the local limiters.

/// One step of a schedule: at `at` after the origin, ask for `permits`, `times` times.
struct Step {
    at: Duration,
    permits: u32,
    times: u32,
}

const fn step(at: Duration, permits: u32, times: u32) -> Step {
    Step { at, permits, times }
}

/// Replays `steps` against Redis (sleeping until each step's time, roughly) and checks that a
/// local `local` limiter on a manual clock set to the instant of each Redis decision decides the
/// same, with the same RetryAfter. Returns the decisions (granted?) for the caller's own checks.
async fn replay(
    redis: &RedisLimiter,
    origin_us: u64,
    clock: &ManualClock,
    local: &dyn Limiter,
    steps: &[Step],
) -> Vec<bool> {
    let start = std::time::Instant::now();
    let mut seen = Vec::new();
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
                l.map(drop).map_err(|r| r.retry_after()),
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

/// The .NET docs' token bucket example ("the bucket can hold 10 tokens and every minute 2 tokens
/// are added", a minute being 200 ms) with every count × `unit`, replayed against the local
/// bucket; `shape` is the key's expected suffix, which names the state's form.
async fn token_bucket_worked_example(name: &str, unit: u32, shape: &str) {
    let u = Duration::from_millis(200);
    let mut conn = manager(&url()).await;
    let opts = TokenBucketOptions::new(10 * unit, 2 * unit, u);
    let redis = limiter(
        conn.clone(),
        name,
        Algorithm::TokenBucket(opts),
        FailurePolicy::FailClosed,
    );
    assert!(redis.key("k").ends_with(shape), "{}", redis.key("k"));
    let origin = align(&mut conn, u).await;
    let clock = ManualClock::new();
    let local = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    let seen = replay(
        &redis,
        origin,
        &clock,
        &local,
        &[
            step(Duration::ZERO, unit, 11), // 10 granted, then denied until the next "minute"
            step(u + u / 2, unit, 3),       // 2 came back: 2 granted, 1 denied
            step(u + u / 2, 0, 1),          // a probe of an empty bucket
            step(7 * u + u / 2, 0, 1),      // a probe of a full one
            step(7 * u + u / 2, 4 * unit, 3), // full again after 5 idle "minutes": 4 + 4, then 2 short
            step(7 * u + u / 2, 2 * unit, 2),
            step(8 * u + u / 2, 3 * unit, 1), // 2 came back: 3 is 1 short
            step(8 * u + u / 2, 1, 2),        // a single token of the 2
        ],
    )
    .await;
    assert!(seen.contains(&true) && seen.contains(&false));
    let state: String = conn.get(redis.key("k")).await.unwrap();
    assert_eq!(
        state.split(' ').count(),
        if shape.starts_with(":tbf") { 1 } else { 2 },
        "{state}"
    );
}

/// Below about 2 tokens per µs the bucket keeps one number (`k × tokens per period + owed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_bucket_worked_example_matches_the_local_bucket() {
    token_bucket_worked_example("tb", 1, ":tbf200000x2").await;
}

/// Past the one-number bound (here 4 tokens per µs: 800,002 tokens every 200 ms) the bucket keeps
/// two numbers (`owed tick`), and decides the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_bucket_past_the_one_number_bound_matches_the_local_bucket() {
    token_bucket_worked_example("tb2", 400_001, ":tb200000x800002").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_window_design_doc_example_matches_the_local_window() {
    // Window 3 s in 3 segments, limit 10; counts [3] [4] [3] then [1] — a second being 150 ms.
    let u = Duration::from_millis(150);
    let mut conn = manager(&url()).await;
    let opts = SlidingWindowOptions::new(10, 3 * u, 3);
    let redis = limiter(
        conn.clone(),
        "sw",
        Algorithm::SlidingWindow(opts),
        FailurePolicy::FailClosed,
    );
    let origin = align(&mut conn, 3 * u).await;
    let clock = ManualClock::new();
    let local = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
    let seen = replay(
        &redis,
        origin,
        &clock,
        &local,
        &[
            step(Duration::ZERO, 3, 1),
            step(u + u / 3, 4, 1),
            step(2 * u + u / 3, 3, 1),
            step(2 * u + u / 2, 1, 1), // exhausted; the [3] leaves at the 4th "second"
            step(2 * u + u / 2, 4, 1), // 4 need the [3] and the [4] gone: the 5th "second"
            step(3 * u + u / 3, 1, 1),
            step(3 * u + u / 2, 3, 1), // 8 in use: 2 free
            step(3 * u + u / 2, 2, 1),
            step(3 * u + u / 2, 0, 1), // a probe of a full window
        ],
    )
    .await;
    assert!(seen.contains(&true) && seen.contains(&false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_and_sliding_windows_under_a_boundary_burst_match_the_local_ones() {
    // 100 per "minute" (1.2 s): 100 requests at 0:59 and 100 at 1:00.
    let sec = Duration::from_millis(20);
    let min = 60 * sec;
    let mut conn = manager(&url()).await;
    let fixed_opts = FixedWindowOptions::new(100, min);
    let sliding_opts = SlidingWindowOptions::new(100, min, 6);
    let fixed = limiter(
        conn.clone(),
        "fw",
        Algorithm::FixedWindow(fixed_opts),
        FailurePolicy::FailClosed,
    );
    let sliding = limiter(
        conn.clone(),
        "sw2",
        Algorithm::SlidingWindow(sliding_opts),
        FailurePolicy::FailClosed,
    );
    let origin = align(&mut conn, min).await;
    let (c1, c2) = (ManualClock::new(), ManualClock::new());
    let local_fixed = FixedWindowLimiter::with_clock(fixed_opts, &c1).unwrap();
    let local_sliding = SlidingWindowLimiter::with_clock(sliding_opts, &c2).unwrap();
    let steps = [
        step(Duration::ZERO, 30, 1),
        step(59 * sec, 1, 100),
        step(60 * sec + sec / 2, 1, 100),
    ];
    let (f, s) = tokio::join!(
        replay(&fixed, origin, &c1, &local_fixed, &steps),
        replay(&sliding, origin, &c2, &local_sliding, &steps),
    );
    assert!(f.contains(&false) && s.contains(&false));
}

/// GCRA has no local counterpart: check it against the algorithm written out here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcra_matches_the_reference_algorithm() {
    let t_us = 40_000u64; // one permit per 40 ms, bursts of 5
    let burst = 5u64;
    let conn = manager(&url()).await;
    let redis = limiter(
        conn,
        "gcra",
        Algorithm::Gcra(GcraOptions::with_period(Duration::from_micros(t_us)).with_burst(5)),
        FailurePolicy::FailClosed,
    );
    let mut tat = 0u64;
    let mut seen = Vec::new();
    for (i, n) in [1u32, 2, 2, 1, 0, 3, 1, 1, 2, 5, 0].into_iter().enumerate() {
        if i % 3 == 2 {
            tokio::time::sleep(Duration::from_millis(45)).await;
        }
        let d = redis.decide("k", n).await;
        let now = d.server_time_us.unwrap();
        let base = tat.max(now);
        let allow_at = (base + u64::from(n.max(1)) * t_us).saturating_sub(burst * t_us);
        let expect_ok = allow_at <= now;
        assert_eq!(d.allowed(), expect_ok, "request {i} of {n}");
        if expect_ok {
            if n > 0 {
                tat = base + u64::from(n) * t_us;
            }
            assert_eq!(d.remaining, (burst * t_us - (tat.max(now) - now)) / t_us);
        } else {
            let r = d.outcome.unwrap_err().retry_after().unwrap();
            assert_eq!(r, Duration::from_micros(allow_at - now));
        }
        seen.push(expect_ok);
    }
    assert!(seen.contains(&true) && seen.contains(&false));
}

// ---------------------------------------------------------------------------------------------
// Exactness: M connections (machines) × N tasks on one key.

/// Hammers one key from `machines` connections × `tasks` tasks, `each` requests per task; returns
/// (server time, granted) for every decision.
async fn hammer(
    algorithm: Algorithm,
    name: &str,
    machines: usize,
    tasks: usize,
    each: usize,
) -> Vec<(u64, bool)> {
    hammer_batched(algorithm, name, machines, tasks, each, 1).await
}

/// [`hammer`] with `batch` decisions per script run at most.
async fn hammer_batched(
    algorithm: Algorithm,
    name: &str,
    machines: usize,
    tasks: usize,
    each: usize,
    batch: usize,
) -> Vec<(u64, bool)> {
    let url = url();
    let prefix = prefix(name);
    let mut handles = Vec::new();
    for _ in 0..machines {
        let conn = manager(&url).await;
        let l = RedisLimiter::builder(conn, prefix.clone(), algorithm, FailurePolicy::FailClosed)
            .timeout(Duration::from_secs(5))
            .batch_size(batch)
            .build()
            .unwrap();
        for _ in 0..tasks {
            let l = l.clone();
            handles.push(tokio::spawn(async move {
                let mut out = Vec::with_capacity(each);
                for _ in 0..each {
                    let d = l.decide("hot", 1).await;
                    assert_eq!(d.decided_by, DecidedBy::Redis, "{d:?}");
                    out.push((d.server_time_us.unwrap(), d.allowed()));
                }
                out
            }));
        }
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.unwrap());
    }
    all
}

/// Granted decisions per window of `window_us` of server time.
fn per_window(decisions: &[(u64, bool)], window_us: u64) -> BTreeMap<u64, (u64, u64)> {
    let mut m = BTreeMap::new();
    for &(t, ok) in decisions {
        let e = m.entry(t / window_us).or_insert((0, 0));
        if ok {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactness_fixed_window_many_machines_one_key() {
    let window = Duration::from_millis(500);
    let d = hammer(
        Algorithm::FixedWindow(FixedWindowOptions::new(50, window)),
        "exact-fw",
        4,
        8,
        60,
    )
    .await;
    let windows = per_window(&d, window.as_micros() as u64);
    // Every window that turned anyone away admitted exactly the limit; none admitted more.
    let mut full = 0;
    for (w, (granted, denied)) in &windows {
        assert!(*granted <= 50, "window {w}: {granted} granted");
        if *denied > 0 {
            assert_eq!(
                *granted, 50,
                "window {w}: {granted} granted, {denied} denied"
            );
            full += 1;
        }
    }
    assert!(full >= 1, "{windows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactness_token_bucket_and_gcra_many_machines_one_key() {
    // Long periods: the run gets the burst plus whatever whole periods of server time add.
    let period = Duration::from_secs(30);
    for (algorithm, burst, per) in [
        (
            Algorithm::TokenBucket(TokenBucketOptions::new(40, 5, period)),
            40u64,
            5u64,
        ),
        (
            Algorithm::Gcra(GcraOptions::with_period(period).with_burst(40)),
            40,
            1,
        ),
    ] {
        let d = hammer(algorithm, "exact-tb", 4, 6, 30).await;
        let first = d.iter().map(|x| x.0).min().unwrap();
        let last = d.iter().map(|x| x.0).max().unwrap();
        let p = period.as_micros() as u64;
        let granted = d.iter().filter(|x| x.1).count() as u64;
        // Token bucket: periods count from the epoch; GCRA: from the first grant.
        let refills = match algorithm {
            Algorithm::TokenBucket(_) => last / p - first / p,
            _ => (last - first) / p,
        };
        assert_eq!(granted, burst + refills * per, "{algorithm:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactness_sliding_window_many_machines_one_key() {
    let window = Duration::from_secs(60);
    let d = hammer(
        Algorithm::SlidingWindow(SlidingWindowOptions::new(60, window, 4)),
        "exact-sw",
        3,
        8,
        40,
    )
    .await;
    let first = d.iter().map(|x| x.0).min().unwrap();
    let last = d.iter().map(|x| x.0).max().unwrap();
    let seg = window.as_micros() as u64 / 4;
    // Nothing leaves the window during the run (it lasts far less than a window).
    assert!(last / seg - first / seg < 4);
    assert_eq!(d.iter().filter(|x| x.1).count(), 60);
}

// ---------------------------------------------------------------------------------------------
// Expiry, SCRIPT FLUSH, the denial cache, chains, configuration.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_sets_a_ttl_and_idle_keys_vanish() {
    let mut conn = manager(&url()).await;
    let cases = [
        (
            Algorithm::TokenBucket(TokenBucketOptions::new(5, 1, Duration::from_millis(100))),
            500u64,
        ),
        (
            Algorithm::FixedWindow(FixedWindowOptions::new(5, Duration::from_millis(300))),
            300,
        ),
        (
            Algorithm::SlidingWindow(SlidingWindowOptions::new(5, Duration::from_millis(300), 3)),
            300,
        ),
        (
            Algorithm::Gcra(GcraOptions::with_period(Duration::from_millis(60)).with_burst(5)),
            300,
        ),
        (
            Algorithm::SlidingCounter(SlidingCounterOptions::new(5, Duration::from_millis(150))),
            300,
        ),
        (
            Algorithm::LeakyMeter(LeakyBucketOptions::new(5, 1, Duration::from_millis(60))),
            300,
        ),
    ];
    for (algorithm, max_ttl_ms) in cases {
        let l = limiter(conn.clone(), "ttl", algorithm, FailurePolicy::FailClosed);
        // At the start of a window (of the fixed window's own), so that the checks below run
        // in the window of the write.
        align(&mut conn, Duration::from_millis(max_ttl_ms)).await;
        let _ = l.acquire("p", 5).await.unwrap();
        let key = stored_key(&mut conn, &l, "p").await;
        let ttl: i64 = conn.pttl(&key).await.unwrap();
        // The expiry is rounded up to a whole second of Unix time (not a window key's).
        assert!(
            ttl > 0 && ttl <= max_ttl_ms as i64 + 1_000,
            "{algorithm:?}: PTTL {ttl}"
        );
        // A denial writes nothing and keeps the TTL.
        assert!(l.acquire("p", 5).await.is_err());
        let ttl: i64 = conn.pttl(&key).await.unwrap();
        assert!(ttl > 0, "{algorithm:?}: PTTL {ttl} after a denial");
        // Idle: the key is gone once its TTL has passed, and the limiter is fresh again.
        tokio::time::sleep(Duration::from_millis(ttl as u64 + 50)).await;
        let exists: bool = conn.exists(&key).await.unwrap();
        assert!(!exists, "{algorithm:?}: key still there");
        assert!(l.acquire("p", 5).await.is_ok());
    }
}

/// The instant (µs) until which a key's state means more than its absence, read from the state
/// the script wrote: GCRA's `tat`; when the token bucket is full again; the end of the window of
/// the sliding window's newest segment.
fn state_need_us(algorithm: &Algorithm, state: &str) -> u64 {
    let n: Vec<u64> = state.split(' ').map(|x| x.parse().unwrap()).collect();
    match *algorithm {
        Algorithm::Gcra(_) => n[0],
        Algorithm::TokenBucket(o) => {
            let per = u64::from(o.tokens_per_period);
            let p = o.replenishment_period.as_micros() as u64;
            match n[..] {
                // One number: full again at period ceil(f / per).
                [f] => f.div_ceil(per) * p,
                _ => (n[1] + n[0].div_ceil(per)) * p,
            }
        }
        Algorithm::SlidingWindow(o) => {
            let seg = o.window.as_micros() as u64 / u64::from(o.segments_per_window);
            (n[0] + u64::from(o.segments_per_window)) * seg
        }
        _ => unreachable!(),
    }
}

/// A grant rewrites the key's TTL only when the new state outlives the key's expiry, which is
/// then rounded up to a whole second of Unix time (`PXAT`); otherwise it keeps it (`KEEPTTL`).
/// After every grant the expiry covers the state and is less than a second beyond it, and a
/// burst of grants moves it about once a second, not once a grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_keeps_the_ttl_while_the_expiry_covers_its_state() {
    let mut conn = manager(&url()).await;
    let ms = Duration::from_millis;
    let cases = [
        Algorithm::Gcra(GcraOptions::with_period(ms(40)).with_burst(200)),
        Algorithm::TokenBucket(TokenBucketOptions::new(200, 1, ms(40))),
        // Past the one-number bound (2.5 tokens per µs): the two-number state.
        Algorithm::TokenBucket(TokenBucketOptions::new(20_000_000, 100_000, ms(40))),
        Algorithm::SlidingWindow(SlidingWindowOptions::new(200, ms(400), 4)),
    ];
    for algorithm in cases {
        let l = limiter(
            conn.clone(),
            "keepttl",
            algorithm,
            FailurePolicy::FailClosed,
        );
        let key = l.key("p");
        let (mut expiries, mut needs) = (Vec::new(), Vec::new());
        for i in 0..60 {
            let d = l.decide("p", 1).await;
            assert!(d.allowed(), "{algorithm:?}, grant {i}: {d:?}");
            let state: String = conn.get(&key).await.unwrap();
            let at_ms: i64 = ::redis::cmd("PEXPIRETIME")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .unwrap();
            assert!(at_ms > 0 && at_ms % 1_000 == 0, "{algorithm:?}: {at_ms}");
            let at = at_ms as u64 * 1_000;
            let need = state_need_us(&algorithm, &state);
            assert!(
                need <= at && at - need < 1_000_000,
                "{algorithm:?}, grant {i}: state {state:?}, expiry {at} µs"
            );
            if expiries.last() != Some(&at) {
                expiries.push(at);
            }
            needs.push(need);
            tokio::time::sleep(ms(10)).await;
        }
        // The expiry moved with the whole seconds the state's need crossed (a few over the
        // run: 2.4 s of debt for GCRA and the bucket), not with each of the 60 grants.
        let crossed = (needs[59] - needs[0]) / 1_000_000;
        assert!(
            expiries.len() as u64 <= crossed + 2 && expiries.len() < 30,
            "{algorithm:?}: {expiries:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_mid_run_is_recovered() {
    let mut conn = manager(&url()).await;
    let l = limiter(
        conn.clone(),
        "flush",
        Algorithm::FixedWindow(FixedWindowOptions::new(1_000, Duration::from_secs(60))),
        FailurePolicy::FailClosed,
    );
    let mut granted = 0;
    for i in 0..40 {
        if i % 10 == 5 {
            let () = ::redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query_async(&mut conn)
                .await
                .unwrap();
        }
        let d = l.decide("k", 1).await;
        assert_eq!(d.decided_by, DecidedBy::Redis, "call {i}: {d:?}");
        granted += u32::from(d.allowed());
    }
    assert_eq!(granted, 40);
    let s = l.redis_statistics();
    assert_eq!((s.calls, s.errors, s.timeouts, s.by_policy), (40, 0, 0, 0));
    // Server-side count agrees: 40 taken from the window.
    assert_eq!(l.decide("k", 1).await.remaining, 1_000 - 41);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denial_cache_answers_until_retry_after_without_a_round_trip() {
    let conn = manager(&url()).await;
    let l = RedisLimiter::builder(
        conn,
        prefix("cache"),
        Algorithm::FixedWindow(FixedWindowOptions::new(2, Duration::from_secs(60))),
        FailurePolicy::FailClosed,
    )
    .cache_denials(100)
    .build()
    .unwrap();
    let _ = l.acquire("k", 2).await.unwrap();
    let first = l.decide("k", 1).await;
    assert_eq!(first.decided_by, DecidedBy::Redis);
    assert!(!first.allowed());
    let cached = l.decide("k", 2).await; // at least as many permits: covered
    assert_eq!(cached.decided_by, DecidedBy::CachedDenial);
    let r = cached.outcome.unwrap_err();
    assert_eq!(r.reason(), Reason::Exhausted);
    assert!(r.retry_after().unwrap() <= first.outcome.unwrap_err().retry_after().unwrap());
    // Another key, or an allow, is never answered from the cache.
    assert_eq!(l.decide("other", 1).await.decided_by, DecidedBy::Redis);
    assert_eq!(l.decide("other", 1).await.decided_by, DecidedBy::Redis);
    let s = l.redis_statistics();
    assert_eq!((s.calls, s.cached_denials), (4, 1));
    assert_eq!(l.statistics().total_failed, 2);
    assert_eq!(l.statistics().total_successful, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_limiter_in_front_sheds_load_before_the_round_trip() {
    let conn = manager(&url()).await;
    let redis = limiter(
        conn,
        "chain",
        Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60))),
        FailurePolicy::FailClosed,
    );
    // A local concurrency limiter of 2 in front: its permits are held by the chained lease.
    let front = ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap();
    let a = redis.acquire_behind(&front, "k", 1).await.unwrap();
    let b = redis.acquire_behind(&front, "k", 1).await.unwrap();
    assert_eq!(front.available_permits(), 0);
    for _ in 0..5 {
        let r = redis.acquire_behind(&front, "k", 1).await.unwrap_err();
        assert_eq!(r.reason(), Reason::Exhausted); // the front's rejection, as it is
    }
    assert_eq!(
        redis.redis_statistics().calls,
        2,
        "no round trip for a shed request"
    );
    drop((a, b));
    assert_eq!(front.available_permits(), 2);

    // A partitioned front, by hand: per-key local buckets, then Redis.
    let per_key: KeyedLimiter<str> = KeyedLimiter::fixed_window(
        FixedWindowOptions::new(1, Duration::from_secs(60)),
        PartitionConfig::default(),
    )
    .unwrap();
    let mut shed = 0;
    for key in ["x", "x", "y", "x"] {
        match per_key.try_acquire(key, 1) {
            Ok(_local) => {
                let _remote = redis.acquire(key, 1).await.unwrap();
            }
            Err(_) => shed += 1,
        }
    }
    assert_eq!(shed, 2);
    assert_eq!(redis.redis_statistics().calls, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_over_the_limit_and_closed_limiters_never_call_redis() {
    let conn = manager(&url()).await;
    let l = limiter(
        conn,
        "client",
        Algorithm::TokenBucket(TokenBucketOptions::new(5, 1, Duration::from_secs(1))),
        FailurePolicy::FailOpen,
    );
    let d = l.decide("k", 6).await;
    assert_eq!(d.outcome.unwrap_err().reason(), Reason::ExceedsLimit);
    l.close();
    assert!(l.is_closed());
    assert_eq!(
        l.acquire("k", 1).await.unwrap_err().reason(),
        Reason::Closed
    );
    assert_eq!(l.redis_statistics().calls, 0);
}

#[tokio::test]
async fn configuration_errors_are_typed() {
    // A lazy manager: nothing connects, nothing is needed from a server.
    let client = ::redis::Client::open("redis://127.0.0.1:1/").unwrap();
    let conn = ConnectionManager::new_lazy_with_config(client, Default::default()).unwrap();
    let sec = Duration::from_secs(1);
    let build = |a: Algorithm, p: FailurePolicy, prefix: &str| {
        RedisLimiter::builder(conn.clone(), prefix, a, p)
            .build()
            .map(drop)
    };
    let fw = Algorithm::FixedWindow(FixedWindowOptions::new(5, sec));
    assert_eq!(
        build(
            Algorithm::FixedWindow(
                FixedWindowOptions::new(5, sec).with_queue(1, QueueOrder::OldestFirst)
            ),
            FailurePolicy::FailOpen,
            "p"
        ),
        Err(RedisConfigError::QueueNotSupported)
    );
    // The sliding counter has a queue locally now; on Redis it has none either.
    assert_eq!(
        build(
            Algorithm::SlidingCounter(
                tollgate::SlidingCounterOptions::new(5, sec).with_queue(1, QueueOrder::OldestFirst)
            ),
            FailurePolicy::FailOpen,
            "p"
        ),
        Err(RedisConfigError::QueueNotSupported)
    );
    assert_eq!(
        build(
            Algorithm::FixedWindow(FixedWindowOptions::new(0, sec)),
            FailurePolicy::FailOpen,
            "p"
        ),
        Err(RedisConfigError::Options(OptionsError::ZeroLimit))
    );
    assert_eq!(
        build(
            Algorithm::FixedWindow(FixedWindowOptions::new(5, Duration::from_nanos(1_500))),
            FailurePolicy::FailOpen,
            "p"
        ),
        Err(RedisConfigError::NotWholeMicros)
    );
    assert_eq!(
        build(
            Algorithm::SlidingWindow(SlidingWindowOptions::new(5, Duration::from_micros(10), 3)),
            FailurePolicy::FailOpen,
            "p"
        ),
        Err(RedisConfigError::NotWholeMicros)
    );
    assert_eq!(
        build(fw, FailurePolicy::FailOpen, "a{b"),
        Err(RedisConfigError::PrefixBraces)
    );
    for share in [0.0, -1.0, 1.5, f64::NAN] {
        assert_eq!(
            build(fw, FailurePolicy::fallback(share), "p"),
            Err(RedisConfigError::Share)
        );
    }
    assert_eq!(
        RedisLimiter::builder(conn.clone(), "p", fw, FailurePolicy::FailOpen)
            .timeout(Duration::ZERO)
            .build()
            .map(drop),
        Err(RedisConfigError::ZeroTimeout)
    );
    assert_eq!(
        RedisLimiter::builder(conn.clone(), "p", fw, FailurePolicy::FailOpen)
            .circuit_breaker(CircuitBreaker::new(0, sec))
            .build()
            .map(drop),
        Err(RedisConfigError::ZeroFailures)
    );
    // 10 µs / 3 is not a whole number of microseconds.
    let thirds = GcraOptions::per(Duration::from_micros(10), 3).with_burst(1);
    assert_eq!(
        RedisLimiter::builder(
            conn.clone(),
            "p",
            Algorithm::Gcra(thirds),
            FailurePolicy::FailOpen
        )
        .build()
        .map(drop),
        Err(RedisConfigError::NotWholeMicros)
    );
    let l = RedisLimiter::builder(conn, "p", fw, FailurePolicy::FailOpen)
        .build()
        .unwrap();
    assert_eq!(l.key("user-7"), "p:{user-7}:fw1000000");
}

// ---------------------------------------------------------------------------------------------
// A server killed mid-run, then restarted.

/// A redis-server of this test's own, on a port of its own.
struct OwnServer {
    port: u16,
    child: Child,
}

impl OwnServer {
    fn start_on(port: u16) -> Self {
        let bin = std::env::var("TOLLGATE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let child = Command::new(bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server: run the suite with `bash .ci/redis.sh`, which installs it");
        let s = Self { port, child };
        for _ in 0..200 {
            if let Ok(c) = ::redis::Client::open(s.url()) {
                if let Ok(mut c) = c.get_connection() {
                    if ::redis::cmd("PING").query::<String>(&mut c).is_ok() {
                        return s;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("redis-server did not start on port {port}");
    }

    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self::start_on(port)
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_killed_then_restarted_each_policy_as_documented() {
    let mut server = OwnServer::start();
    let port = server.port;
    let conn = manager(&server.url()).await;
    let opts = FixedWindowOptions::new(10, Duration::from_secs(60));
    let breaker = CircuitBreaker::new(2, Duration::from_secs(1));
    let make = |policy| {
        RedisLimiter::builder(
            conn.clone(),
            prefix("kill"),
            Algorithm::FixedWindow(opts),
            policy,
        )
        // Generous for a loaded CI machine: a dead server fails fast (connection refused).
        .timeout(Duration::from_millis(300))
        .circuit_breaker(breaker)
        .build()
        .unwrap()
    };
    let open = make(FailurePolicy::FailOpen);
    let closed = make(FailurePolicy::FailClosed);
    let fallback = make(FailurePolicy::fallback(0.5));
    for l in [&open, &closed, &fallback] {
        assert_eq!(l.decide("k", 1).await.decided_by, DecidedBy::Redis);
        assert_eq!(l.health(), Health::Redis);
    }

    server.kill();

    // Fail open: every request granted, by the policy.
    for _ in 0..5 {
        let d = open.decide("k", 1).await;
        assert_eq!((d.allowed(), d.decided_by), (true, DecidedBy::FailOpen));
    }
    assert_eq!(open.health(), Health::Degraded(PolicyKind::FailOpen));
    // Fail closed: every request rejected with REDIS_UNAVAILABLE; once the circuit is open, with
    // the time until the next probe as RetryAfter.
    for i in 0..5 {
        let d = closed.decide("k", 1).await;
        assert_eq!(d.decided_by, DecidedBy::FailClosed);
        let r = d.outcome.unwrap_err();
        assert_eq!(r.reason(), REDIS_UNAVAILABLE);
        if i >= 2 {
            assert!(r.retry_after().unwrap() <= Duration::from_secs(1));
        }
    }
    assert_eq!(closed.health(), Health::Degraded(PolicyKind::FailClosed));
    // Fallback: a local fixed window with half the quota, per partition.
    let granted = {
        let mut n = 0;
        for _ in 0..10 {
            let d = fallback.decide("k", 1).await;
            assert_eq!(d.decided_by, DecidedBy::Fallback);
            n += u32::from(d.allowed());
        }
        n
    };
    assert_eq!(granted, 5);
    assert!(fallback.decide("other", 1).await.allowed());
    assert_eq!(fallback.health(), Health::Degraded(PolicyKind::Fallback));
    // The breaker stopped the calls: 2 failures each opened it.
    for l in [&open, &closed, &fallback] {
        let s = l.redis_statistics();
        assert_eq!(s.circuit_opened, 1, "{s:?}");
        assert!(s.calls <= 1 + 2 + 2, "{s:?}"); // 1 healthy + 2 failures + probes
    }

    // Restart on the same port: the same limiters recover, without a new client.
    let _server = OwnServer::start_on(port);
    for l in [&open, &closed, &fallback] {
        let mut recovered = false;
        for _ in 0..200 {
            if l.decide("k", 1).await.decided_by == DecidedBy::Redis {
                recovered = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(recovered, "{:?}", l.redis_statistics());
        assert_eq!(l.health(), Health::Redis);
        // The restarted server has no scripts and no keys: NOSCRIPT reloaded, a fresh window.
        let d = l.decide("k", 1).await;
        assert_eq!(d.decided_by, DecidedBy::Redis);
        assert!(d.allowed());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_call_is_decided_by_the_policy_and_counted_once_on_the_server() {
    // A server of its own: pausing it must not slow the other tests down.
    let server = OwnServer::start();
    let mut conn = manager(&server.url()).await;
    let l = RedisLimiter::builder(
        conn.clone(),
        prefix("timeout"),
        Algorithm::FixedWindow(FixedWindowOptions::new(10, Duration::from_secs(60))),
        FailurePolicy::FailClosed,
    )
    .timeout(Duration::from_millis(100))
    .build()
    .unwrap();
    assert_eq!(l.decide("k", 1).await.remaining, 9);
    // The server holds every client's commands for 800 ms: the next call times out on our side,
    // and its script still runs on the server when the pause ends.
    let () = ::redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(800)
        .arg("ALL")
        .query_async(&mut conn)
        .await
        .unwrap();
    let d = l.decide("k", 1).await;
    assert_eq!(d.decided_by, DecidedBy::FailClosed);
    assert_eq!(d.outcome.unwrap_err().reason(), REDIS_UNAVAILABLE);
    assert_eq!(l.redis_statistics().timeouts, 1);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    // Taken so far on the server: the first call, this one, and the timed-out one at most once
    // (never resent). Whether the timed-out script ran at all depends on whether the command had
    // reached the socket when its future was dropped: 7 or 8 left, never 6.
    let d = l.decide("k", 1).await;
    assert_eq!(d.decided_by, DecidedBy::Redis);
    assert!(
        d.remaining >= 7,
        "the timed-out call was counted twice: {d:?}"
    );
    assert_eq!(l.redis_statistics().calls, 3);
    assert_eq!(l.health(), Health::Redis);
}

/// Issue 14 × 13: a `RedisLimiter` as the HTTP layer's policy. Two layers stand in for two
/// servers: each has its own `RedisLimiter` (own connection) on one prefix, and requests with
/// the same API key share one fixed window across both, exactly.
#[cfg(feature = "http")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_policy_shares_one_limit_per_key_across_two_http_layers() {
    use std::sync::Arc;
    use tollgate::http::{KeyBy, Policy, RateLimiting};
    use tower::{Service, ServiceExt};

    let url = url();
    let name = prefix("http");
    let window = Duration::from_secs(10);
    let server = |conn, name: String| async move {
        let redis = RedisLimiter::builder(
            conn,
            name,
            Algorithm::FixedWindow(FixedWindowOptions::new(5, window)),
            FailurePolicy::FailClosed,
        )
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
        let policy = Policy::custom(Arc::new(redis))
            .partition_by(KeyBy::header(::http::HeaderName::from_static("x-api-key")));
        let layer = RateLimiting::builder()
            .global(policy)
            .rate_limit_headers(true)
            .build()
            .unwrap()
            .layer();
        tower::ServiceBuilder::new()
            .layer(layer)
            .service(tower::service_fn(|_req: ::http::Request<()>| async {
                Ok::<_, std::convert::Infallible>(::http::Response::new("ok".to_string()))
            }))
    };
    let mut a = server(manager(&url).await, name.clone()).await;
    let mut b = server(manager(&url).await, name.clone()).await;

    let mut conn = manager(&url).await;
    align(&mut conn, window).await; // all requests within one window
    let mut statuses = BTreeMap::<(&str, u16), u32>::new();
    for i in 0..12 {
        for key in ["alice", "bob"] {
            let svc = if i % 2 == 0 { &mut a } else { &mut b };
            let req = ::http::Request::builder()
                .header("x-api-key", key)
                .body(())
                .unwrap();
            let resp = svc.ready().await.unwrap().call(req).await.unwrap();
            if resp.status() == 429 {
                let secs: u64 = resp.headers()["retry-after"]
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!((1..=10).contains(&secs), "Retry-After {secs}");
            }
            *statuses.entry((key, resp.status().as_u16())).or_default() += 1;
        }
    }
    let expected = BTreeMap::from([
        (("alice", 200), 5),
        (("alice", 429), 7),
        (("bob", 200), 5),
        (("bob", 429), 7),
    ]);
    assert_eq!(statuses, expected);

    // The partition's Redis key is the API key's stable `Key` text, the same in every process.
    let key = tollgate::http::Key::from_bytes(b"alice").to_string();
    // A fixed window keeps each window's count under `key:<window index>`.
    let keys: Vec<String> = conn
        .keys(format!("{name}:{{{key}}}:fw{}:*", window.as_micros()))
        .await
        .unwrap();
    assert!(!keys.is_empty(), "no key for the API key");
    for k in keys {
        let pttl: i64 = conn.pttl(&k).await.unwrap();
        // -2: that window ended between KEYS and PTTL; -1 (no TTL) never.
        assert!(
            pttl > 0 || pttl == -2,
            "the window's key expires: PTTL {pttl}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Issue 24, items 8-13.

/// The keys of a prefix, with their PTTL (ms).
async fn pttls(conn: &mut ConnectionManager, prefix: &str) -> Vec<(String, i64)> {
    let keys: Vec<String> = conn.keys(format!("{prefix}:*")).await.unwrap();
    let mut out = Vec::new();
    for k in keys {
        let t: i64 = conn.pttl(&k).await.unwrap();
        out.push((k, t));
    }
    out
}

/// Item 8: changing the window, period or segments on a prefix in use never locks a key, and
/// every TTL stays within what the new configuration can mean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_the_time_configuration_on_a_live_prefix_never_locks_a_key() {
    let mut conn = manager(&url()).await;
    let shared = conn.clone();
    let ms = Duration::from_millis;
    let build = |p: &str, a: Algorithm| {
        RedisLimiter::builder(shared.clone(), p, a, FailurePolicy::FailClosed)
            .timeout(ms(200))
            .build()
            .unwrap()
    };
    let fw = |n, w| Algorithm::FixedWindow(FixedWindowOptions::new(n, w));
    let sw = |n, w, s| Algorithm::SlidingWindow(SlidingWindowOptions::new(n, w, s));
    let tb = |n, per, p| Algorithm::TokenBucket(TokenBucketOptions::new(n, per, p));
    let gcra = |b, t| Algorithm::Gcra(GcraOptions::with_period(t).with_burst(b));
    let cases = [
        (fw(2, ms(100)), fw(2, ms(1_000))),
        (
            fw(100, Duration::from_secs(60)),
            fw(100, Duration::from_secs(3_600)),
        ),
        (fw(2, ms(1_000)), fw(2, ms(100))),
        (
            sw(10, Duration::from_secs(60), 60),
            sw(10, Duration::from_secs(60), 6),
        ),
        (
            sw(10, Duration::from_secs(6), 6),
            sw(10, Duration::from_secs(60), 60),
        ),
        (tb(10, 1, ms(100)), tb(10, 1, Duration::from_secs(60))),
        (tb(10, 1, Duration::from_secs(60)), tb(10, 1, ms(100))),
        (gcra(5, ms(100)), gcra(5, Duration::from_secs(60))),
        (gcra(5, Duration::from_secs(60)), gcra(5, ms(100))),
        // Another algorithm on the same prefix.
        (fw(2, ms(1_000)), gcra(2, ms(500))),
        (gcra(2, ms(500)), sw(2, ms(1_000), 4)),
        (sw(2, ms(1_000), 4), tb(2, 1, ms(500))),
    ];
    for (old, new) in cases {
        let p = prefix("reconf");
        let (a, b) = (build(&p, old), build(&p, new));
        let da = a.decide("k", 1).await;
        assert_eq!(da.decided_by, DecidedBy::Redis, "{old:?}: {da:?}");
        // The new configuration's first request on the live partition: granted (its limit is
        // at least 2), by Redis.
        let db = b.decide("k", 1).await;
        assert_eq!(
            db.decided_by,
            DecidedBy::Redis,
            "{old:?} -> {new:?}: {db:?}"
        );
        assert!(db.allowed(), "{old:?} -> {new:?}: {db:?}");
        // Every key of the prefix expires within what its configuration can mean.
        let span = |a: &Algorithm| match *a {
            Algorithm::FixedWindow(o) => o.window,
            Algorithm::SlidingWindow(o) => o.window,
            Algorithm::TokenBucket(o) => o.replenishment_period * o.token_limit,
            Algorithm::Gcra(o) => o.interval * o.burst,
            _ => unreachable!(),
        };
        let longest = span(&old).max(span(&new)).as_millis() as i64;
        for (k, t) in pttls(&mut conn, &p).await {
            // A TTL, never none (-1). A 100 ms window's key may reach its end between the
            // decision and this reading: 0 ms left, or gone (-2) after `KEYS` listed it.
            assert!(
                t != -1 && t <= longest + 1_000,
                "{old:?} -> {new:?}: {k} has PTTL {t} ms"
            );
        }
        // Exhausted, the new limiter's RetryAfter is within its own configuration.
        loop {
            let d = b.decide("k", 1).await;
            assert_eq!(d.decided_by, DecidedBy::Redis);
            if let Err(r) = d.outcome {
                let ra = r.retry_after().unwrap();
                assert!(ra <= span(&new), "{old:?} -> {new:?}: RetryAfter {ra:?}");
                break;
            }
        }
    }
}

/// Item 8: changing only the limit keeps the partition's counts (capped at the new limit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_only_the_limit_keeps_the_counts_in_flight() {
    let conn = manager(&url()).await;
    let p = prefix("relimit");
    let build = |a: Algorithm| {
        RedisLimiter::builder(conn.clone(), p.clone(), a, FailurePolicy::FailClosed)
            .timeout(Duration::from_millis(200))
            .build()
            .unwrap()
    };
    let hour = Duration::from_secs(3_600);
    let ten = build(Algorithm::FixedWindow(FixedWindowOptions::new(10, hour)));
    let three = build(Algorithm::FixedWindow(FixedWindowOptions::new(3, hour)));
    let _ = ten.acquire("k", 8).await.unwrap();
    // 8 of the window taken: lowering the limit to 3 leaves nothing this window...
    let d = three.decide("k", 1).await;
    assert_eq!(d.decided_by, DecidedBy::Redis);
    assert!(!d.allowed(), "{d:?}");
    assert!(d.outcome.unwrap_err().retry_after().unwrap() <= hour);
    // ...and raising it back keeps the 2 left.
    assert_eq!(ten.decide("k", 0).await.remaining, 2);

    let sliding = |n| {
        build(Algorithm::SlidingWindow(SlidingWindowOptions::new(
            n, hour, 4,
        )))
    };
    let (big, small) = (sliding(10), sliding(3));
    let _ = big.acquire("s", 8).await.unwrap();
    let d = small.decide("s", 1).await;
    assert!(!d.allowed(), "{d:?}");
    let ra = d.outcome.unwrap_err().retry_after().unwrap();
    assert!(ra <= hour, "RetryAfter {ra:?}");
    assert_eq!(big.decide("s", 0).await.remaining, 2);

    let gcra = |b| {
        build(Algorithm::Gcra(
            GcraOptions::with_period(Duration::from_secs(60)).with_burst(b),
        ))
    };
    let (big, small) = (gcra(10), gcra(3));
    let _ = big.acquire("g", 8).await.unwrap();
    let d = small.decide("g", 1).await;
    assert!(!d.allowed(), "{d:?}");
    let ra = d.outcome.unwrap_err().retry_after().unwrap();
    assert!(ra <= Duration::from_secs(60), "RetryAfter {ra:?}");
}

/// Item 9: a key holding foreign data is that request's error; it never opens the breaker for
/// the other partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_holding_foreign_data_never_opens_the_breaker_for_the_others() {
    let mut conn = manager(&url()).await;
    let ms = Duration::from_millis;
    let algorithms = [
        Algorithm::FixedWindow(FixedWindowOptions::new(5, Duration::from_secs(60))),
        Algorithm::TokenBucket(TokenBucketOptions::new(5, 1, Duration::from_secs(1))),
        Algorithm::SlidingWindow(SlidingWindowOptions::new(5, Duration::from_secs(60), 6)),
        Algorithm::Gcra(GcraOptions::with_period(ms(100)).with_burst(5)),
        Algorithm::SlidingCounter(SlidingCounterOptions::new(5, Duration::from_secs(60))),
        Algorithm::LeakyMeter(LeakyBucketOptions::new(5, 1, ms(100))),
    ];
    for algorithm in algorithms {
        let l = RedisLimiter::builder(
            conn.clone(),
            prefix("foreign"),
            algorithm,
            FailurePolicy::FailOpen,
        )
        .timeout(ms(200))
        .circuit_breaker(CircuitBreaker::new(2, Duration::from_secs(60)))
        .build()
        .unwrap();
        // A list where the limiter keeps a string or a hash (WRONGTYPE), and content no script
        // can read (a script error).
        for key in window_keys(&mut conn, &l, "list").await {
            let () = conn.rpush(&key, "x").await.unwrap();
            let () = conn.expire(&key, 300).await.unwrap();
        }
        for key in window_keys(&mut conn, &l, "text").await {
            let () = conn.set_ex(&key, "garbage", 300).await.unwrap();
        }
        for _ in 0..5 {
            for bad in ["list", "text"] {
                let d = l.decide(bad, 1).await;
                assert_eq!(
                    d.decided_by,
                    DecidedBy::KeyError,
                    "{algorithm:?} {bad}: {d:?}"
                );
                assert_eq!(d.outcome.unwrap_err().reason(), REDIS_KEY_ERROR);
            }
        }
        // A probe (0 permits) writes nothing, and still finds the foreign data.
        for bad in ["list", "text"] {
            let d = l.decide(bad, 0).await;
            assert_eq!(
                d.decided_by,
                DecidedBy::KeyError,
                "{algorithm:?} {bad} probe: {d:?}"
            );
        }
        let d = l.decide("good", 1).await;
        assert_eq!(d.decided_by, DecidedBy::Redis, "{algorithm:?}: {d:?}");
        assert!(d.allowed());
        assert_eq!(l.health(), Health::Redis);
        let s = l.redis_statistics();
        assert_eq!(
            (s.circuit_opened, s.errors, s.by_policy),
            (0, 0, 0),
            "{s:?}"
        );
        assert_eq!(s.key_errors, 12);
        // The foreign data is left as it was.
        let kind: String = ::redis::cmd("TYPE")
            .arg(&window_keys(&mut conn, &l, "list").await[0])
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(kind, "list");
    }
}

/// Item 10: a token bucket whose time to refill does not fit is refused at build; every TTL a
/// script sets is an integer, set with the write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_bucket_spans_that_do_not_fit_are_refused_and_ttls_are_exact() {
    let mut conn = manager(&url()).await;
    let shared = conn.clone();
    let day = Duration::from_secs(86_400);
    let build = |a: Algorithm| {
        RedisLimiter::builder(shared.clone(), prefix("span"), a, FailurePolicy::FailClosed)
            .timeout(Duration::from_millis(200))
            .build()
    };
    let r = build(Algorithm::TokenBucket(TokenBucketOptions::new(
        u32::MAX,
        1,
        day,
    )));
    if let Ok(l) = &r {
        // Before the fix: the write happened, its PEXPIRE was refused (`1e+17`): no TTL.
        let _ = l.acquire("k", u32::MAX).await;
        let t: i64 = conn.pttl(l.key("k")).await.unwrap();
        panic!("built; PTTL after a full take {t}");
    }
    assert_eq!(r.unwrap_err(), RedisConfigError::SpanTooLong);
    for a in [
        Algorithm::FixedWindow(FixedWindowOptions::new(
            1,
            MAX_SPAN + Duration::from_micros(1),
        )),
        Algorithm::SlidingWindow(SlidingWindowOptions::new(1, MAX_SPAN * 2, 2)),
        Algorithm::TokenBucket(TokenBucketOptions::new(
            3,
            2,
            MAX_SPAN / 2 + Duration::from_micros(1),
        )),
    ] {
        assert_eq!(
            build(a).unwrap_err(),
            RedisConfigError::SpanTooLong,
            "{a:?}"
        );
    }

    // The longest bucket that fits: refills from empty in just under 2^50 µs (35 years).
    let period = Duration::from_micros((1u64 << 50) / u64::from(u32::MAX));
    let l = build(Algorithm::TokenBucket(TokenBucketOptions::new(
        u32::MAX,
        1,
        period,
    )))
    .unwrap();
    let d = l.decide("k", u32::MAX).await;
    assert_eq!(d.decided_by, DecidedBy::Redis, "{d:?}");
    assert!(d.allowed());
    let t: i64 = conn.pttl(l.key("k")).await.unwrap();
    let span_ms = (period * u32::MAX).as_millis() as i64;
    assert!(
        t > span_ms - 60_000 && t <= span_ms + 1_000,
        "PTTL {t}, span {span_ms}"
    );
    // Empty: 2 permits take 2 periods (a period may have begun since the take: 1 came back).
    let d = l.decide("k", 2).await;
    let ra = d.outcome.unwrap_err().retry_after().unwrap();
    assert!(ra <= 2 * period, "{ra:?}");
}

/// Item 11: GCRA options whose arithmetic would leave a double's exact integers are refused at
/// build; those accepted grant a fresh key's first request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcra_options_are_bounded_so_the_script_stays_exact() {
    let mut conn = manager(&url()).await;
    let shared = conn.clone();
    let build = |b, t| {
        RedisLimiter::builder(
            shared.clone(),
            prefix("gcra-span"),
            Algorithm::Gcra(GcraOptions::with_period(t).with_burst(b)),
            FailurePolicy::FailClosed,
        )
        .timeout(Duration::from_millis(200))
        .build()
    };
    let r = build(1, Duration::from_micros((1 << 53) - 1));
    if let Ok(l) = &r {
        let mut refused = 0;
        for i in 0..40 {
            refused += u32::from(!l.decide(&format!("k{i}"), 1).await.allowed());
        }
        panic!("built; {refused} of 40 fresh keys refused their first request");
    }
    assert_eq!(r.unwrap_err(), RedisConfigError::SpanTooLong);
    assert_eq!(
        build(2, Duration::from_micros(1 << 49) + Duration::from_micros(1)).unwrap_err(),
        RedisConfigError::SpanTooLong
    );
    // The longest accepted: burst × interval = 2^50 µs.
    for (burst, t) in [(1, 1u64 << 50), (2, 1 << 49), (1 << 20, 1 << 30)] {
        let l = build(burst, Duration::from_micros(t)).unwrap();
        for i in 0..40 {
            let key = format!("k{i}");
            let d = l.decide(&key, burst).await;
            assert!(d.allowed(), "burst {burst}, T {t} µs, {key}: {d:?}");
            let d = l.decide(&key, 1).await;
            let ra = d.outcome.unwrap_err().retry_after().unwrap();
            assert!(ra <= Duration::from_micros(t), "{ra:?}");
            let pttl: i64 = conn.pttl(l.key(&key)).await.unwrap();
            assert!(
                pttl > 0 && pttl <= (u64::from(burst) * t / 1_000 + 1_000) as i64,
                "{pttl}"
            );
        }
    }
}

/// Item 12: `build` never panics on a fallback whose local period does not fit a `Duration`.
#[tokio::test]
async fn fallback_shares_that_overflow_a_duration_are_typed_errors() {
    let client = ::redis::Client::open("redis://127.0.0.1:1/").unwrap();
    let conn = ConnectionManager::new_lazy_with_config(client, Default::default()).unwrap();
    let build = |a: Algorithm, share: f64| {
        let conn = conn.clone();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            RedisLimiter::builder(conn, "p", a, FailurePolicy::fallback(share))
                .build()
                .map(drop)
        }))
    };
    let cases = [
        (
            GcraOptions::with_period(Duration::from_secs(9_000_000_000)).with_burst(1),
            1e-10,
        ),
        (
            GcraOptions::with_period(Duration::from_micros(1 << 50)).with_burst(1),
            1e-12,
        ),
        (
            GcraOptions::with_period(Duration::from_secs(1)).with_burst(1),
            f64::MIN_POSITIVE,
        ),
        (
            GcraOptions::with_period(Duration::from_micros(1)).with_burst(u32::MAX),
            1e-300,
        ),
    ];
    for (gcra, share) in cases {
        let r = build(Algorithm::Gcra(gcra), share);
        assert!(r.is_ok(), "{gcra:?}, share {share}: build panicked");
        let e = r.unwrap().unwrap_err();
        assert!(
            matches!(
                e,
                RedisConfigError::SpanTooLong
                    | RedisConfigError::Options(OptionsError::PeriodTooLong)
            ),
            "{gcra:?}, share {share}: {e:?}"
        );
    }
    // Tiny shares of the other algorithms: limits round up to 1, periods stay.
    for a in [
        Algorithm::FixedWindow(FixedWindowOptions::new(u32::MAX, Duration::from_secs(60))),
        Algorithm::TokenBucket(TokenBucketOptions::new(
            u32::MAX,
            u32::MAX,
            Duration::from_secs(1),
        )),
        Algorithm::SlidingWindow(SlidingWindowOptions::new(1, Duration::from_secs(60), 6)),
    ] {
        let r = build(a, f64::MIN_POSITIVE);
        assert!(matches!(r, Ok(Ok(()))), "{a:?}: {r:?}");
    }
}

/// Item 13: NOSCRIPT means the script did not run: the limiter retries it, and a script cache
/// flushed over and over never counts as a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flushed_continuously_never_counts_as_a_failure() {
    // A server of its own: the flushes must not disturb the other tests.
    let server = OwnServer::start();
    let conn = manager(&server.url()).await;
    let mut flusher = manager(&server.url()).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flushing = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let () = ::redis::cmd("SCRIPT")
                    .arg("FLUSH")
                    .query_async(&mut flusher)
                    .await
                    .unwrap();
                n += 1;
            }
            n
        })
    };
    let l = RedisLimiter::builder(
        conn,
        prefix("flushing"),
        Algorithm::FixedWindow(FixedWindowOptions::new(100_000, Duration::from_secs(60))),
        FailurePolicy::FailClosed,
    )
    .timeout(Duration::from_millis(500))
    .circuit_breaker(CircuitBreaker::new(1, Duration::from_secs(60)))
    .build()
    .unwrap();
    let mut by_redis = 0;
    for _ in 0..400 {
        by_redis += u32::from(l.decide("k", 1).await.decided_by == DecidedBy::Redis);
    }
    stop.store(true, Ordering::Relaxed);
    let flushes = flushing.await.unwrap();
    let s = l.redis_statistics();
    assert_eq!(
        (by_redis, s.errors, s.circuit_opened),
        (400, 0, 0),
        "{s:?}, {flushes} flushes"
    );
    assert_eq!(l.health(), Health::Redis);
}
