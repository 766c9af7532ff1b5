//! Issue 38: leases settled to their true cost against Redis — refunds into the lease's own
//! window, debits into a bounded debt, the twin property against a fresh key asked for the
//! actual cost, local leases, and a server that is down.

use super::*;
use tollgate::redis::RedisSettleError;

const HOUR: Duration = Duration::from_secs(3_600);

fn fixed(limit: u32, window: Duration) -> Algorithm {
    Algorithm::FixedWindow(FixedWindowOptions::new(limit, window))
}

fn gcra(burst: u32, interval: Duration) -> Algorithm {
    Algorithm::Gcra(GcraOptions::with_period(interval).with_burst(burst))
}

fn sliding(limit: u32, window: Duration, segments: u32) -> Algorithm {
    Algorithm::SlidingWindow(SlidingWindowOptions::new(limit, window, segments))
}

/// The two-number bucket's period: 10 minutes, long enough that a test rarely sees it turn.
const TB2_PERIOD: Duration = Duration::from_secs(600);
/// Its limit and its tokens per period: 1.5 billion every 10 minutes (2.5 tokens per µs, past
/// the one-number bound), 2 billion at most (below 2^31: the local bucket's debt bound is then
/// one limit too).
const TB2_LIMIT: u32 = 2_000_000_000;
const TB2_PER: u32 = 1_500_000_000;

/// A token bucket past the one-number bound (key shape `tb<period>x<tokens per period>`).
fn two_number_bucket() -> Algorithm {
    Algorithm::TokenBucket(TokenBucketOptions::new(TB2_LIMIT, TB2_PER, TB2_PERIOD))
}

/// The window index of the server's clock now.
async fn window_now(conn: &mut ConnectionManager, window: Duration) -> u64 {
    server_time_us(conn).await / window.as_micros() as u64
}

/// `partition`'s remaining permits, as a probe (which takes nothing) finds them.
async fn remaining(l: &RedisLimiter, partition: &str) -> u64 {
    let d = l.decide(partition, 0).await;
    assert_eq!(d.decided_by, DecidedBy::Redis, "{d:?}");
    d.remaining
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_fixed_window_refunds_and_debits_match_a_twin_asked_for_the_actual_cost() {
    let mut conn = manager(&url()).await;
    let l = limiter(
        conn.clone(),
        "settle-fw-twin",
        fixed(1_000, HOUR),
        FailurePolicy::FailClosed,
    );
    let k0 = window_now(&mut conn, HOUR).await;
    // (estimate, actual): refunds, debits that fit, no change; each on a key of its own,
    // against a twin key asked for `actual` alone.
    let cases = [
        (100, 37),
        (100, 0),
        (1, 250),
        (500, 500),
        (993, 1),
        (10, 993),
    ];
    for (i, (estimate, actual)) in cases.into_iter().enumerate() {
        let (settled, twin) = (format!("s{i}"), format!("t{i}"));
        // Something already counted on both, as a busy key has.
        for p in [&settled, &twin] {
            let _ = l.acquire(p, 7).await.unwrap();
        }
        let mut lease = l.acquire(&settled, estimate).await.unwrap();
        l.settle(&settled, &mut lease, actual).await.unwrap();
        assert_eq!(lease.permits(), actual);
        let _twin = l.acquire(&twin, actual).await;
        let (a, b) = (remaining(&l, &settled).await, remaining(&l, &twin).await);
        assert_eq!(a, b, "case {i}: {estimate} settled to {actual}");
        // Settled again, from what it holds: back to the estimate.
        l.settle(&settled, &mut lease, estimate).await.unwrap();
        assert_eq!(lease.permits(), estimate);
        let _ = l.acquire(&twin, estimate.saturating_sub(actual)).await;
        if actual <= estimate {
            assert_eq!(remaining(&l, &settled).await, remaining(&l, &twin).await);
        }
    }
    if window_now(&mut conn, HOUR).await != k0 {
        // The hour turned mid-test (once an hour): the refunds after it gave nothing back.
        eprintln!("window changed mid-test; the twin comparisons above still held");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_fixed_window_refund_after_the_window_changed_gives_nothing_back() {
    let mut conn = manager(&url()).await;
    let window = Duration::from_secs(1);
    let l = limiter(
        conn.clone(),
        "settle-fw-late",
        fixed(10, window),
        FailurePolicy::FailClosed,
    );
    align(&mut conn, window).await;
    let k = window_now(&mut conn, window).await;
    let mut lease = l.acquire("k", 6).await.unwrap();
    // The next window: its own count.
    align(&mut conn, window).await;
    assert_eq!(window_now(&mut conn, window).await, k + 1);
    let _ = l.acquire("k", 3).await.unwrap();
    l.settle("k", &mut lease, 1).await.unwrap(); // succeeds: nothing comes back
    assert_eq!(lease.permits(), 1);
    assert_eq!(remaining(&l, "k").await, 7);
    let stored: Option<String> = conn.get(format!("{}:{}", l.key("k"), k + 1)).await.unwrap();
    assert_eq!(stored.as_deref(), Some("3"));
    // A debit is taken now, in the current window (as the local window takes it).
    let mut lease = l.acquire("k", 1).await.unwrap(); // 4 counted
    l.settle("k", &mut lease, 5).await.unwrap();
    assert_eq!(remaining(&l, "k").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_fixed_window_debt_refuses_until_repaid_with_its_retry_after() {
    let mut conn = manager(&url()).await;
    let l = limiter(
        conn.clone(),
        "settle-fw-debt",
        fixed(10, HOUR),
        FailurePolicy::FailClosed,
    );
    let k = window_now(&mut conn, HOUR).await;
    let mut lease = l.acquire("k", 5).await.unwrap();
    l.settle("k", &mut lease, 14).await.unwrap(); // 4 into debt
    assert_eq!(remaining(&l, "k").await, 0);
    let hour_left = |d: &tollgate::redis::RedisDecision| {
        let now = d.server_time_us.unwrap();
        let w = HOUR.as_micros() as u64;
        Duration::from_micros(w - now % w)
    };
    // Refused until the window ends; the debt past the limit is the next window's start: 4
    // carried, so a request of up to 6 waits for the window's end...
    let d = l.decide("k", 6).await;
    let r = d.outcome.unwrap_err();
    assert_eq!(r.reason(), Reason::Exhausted);
    assert_eq!(r.retry_after(), Some(hour_left(&d)));
    // ...and one of 7 for the window after.
    let d = l.decide("k", 7).await;
    assert_eq!(
        d.outcome.unwrap_err().retry_after(),
        Some(hour_left(&d) + HOUR)
    );
    assert_eq!(d.reset, hour_left(&d) + HOUR);
    let next: Option<String> = conn.get(format!("{}:{}", l.key("k"), k + 1)).await.unwrap();
    if window_now(&mut conn, HOUR).await == k {
        assert_eq!(next.as_deref(), Some("4"));
        // A refund while in debt takes its share back from the carried count too.
        l.settle("k", &mut lease, 12).await.unwrap();
        let next: Option<String> = conn.get(format!("{}:{}", l.key("k"), k + 1)).await.unwrap();
        assert_eq!(next.as_deref(), Some("2"));
        l.settle("k", &mut lease, 9).await.unwrap(); // out of debt: nothing carried
        let exists: bool = conn
            .exists(format!("{}:{}", l.key("k"), k + 1))
            .await
            .unwrap();
        assert!(!exists);
        assert_eq!(remaining(&l, "k").await, 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_fixed_window_debt_is_repaid_by_the_next_window() {
    let mut conn = manager(&url()).await;
    let window = Duration::from_secs(1);
    let l = limiter(
        conn.clone(),
        "settle-fw-repaid",
        fixed(10, window),
        FailurePolicy::FailClosed,
    );
    align(&mut conn, window).await;
    let k = window_now(&mut conn, window).await;
    let mut lease = l.acquire("k", 10).await.unwrap();
    l.settle("k", &mut lease, 18).await.unwrap(); // 8 into debt
    let r = l.acquire("k", 1).await.unwrap_err();
    assert!(r.retry_after().unwrap() <= window, "{r:?}");
    align(&mut conn, window).await;
    assert_eq!(window_now(&mut conn, window).await, k + 1);
    // The next window starts with the debt counted: 2 left.
    assert_eq!(remaining(&l, "k").await, 2);
    let r = l.acquire("k", 3).await.unwrap_err();
    assert!(r.retry_after().unwrap() <= window, "{r:?}");
    let _ = l.acquire("k", 2).await.unwrap();
    // And the window after is clear.
    align(&mut conn, window).await;
    assert_eq!(remaining(&l, "k").await, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_past_the_debt_limit_takes_nothing() {
    let mut conn = manager(&url()).await;
    let l = limiter(
        conn.clone(),
        "settle-bound",
        fixed(10, HOUR),
        FailurePolicy::FailClosed,
    );
    let k = window_now(&mut conn, HOUR).await;
    let mut lease = l.acquire("k", 10).await.unwrap();
    let err = l.settle("k", &mut lease, 21).await.unwrap_err();
    assert_eq!(err, RedisSettleError::Settle(SettleError::DebtLimit));
    assert_eq!(lease.permits(), 10);
    if window_now(&mut conn, HOUR).await == k {
        let count: Option<String> = conn.get(format!("{}:{k}", l.key("k"))).await.unwrap();
        assert_eq!(count.as_deref(), Some("10"));
        let exists: bool = conn
            .exists(format!("{}:{}", l.key("k"), k + 1))
            .await
            .unwrap();
        assert!(!exists, "nothing carried");
    }
    l.settle("k", &mut lease, 20).await.unwrap(); // exactly one limit of debt
    assert_eq!(lease.permits(), 20);

    // GCRA: bursts of 5, one a second; the bound is one burst past the tolerance.
    let t = Duration::from_secs(1);
    let g = limiter(
        conn.clone(),
        "settle-bound-gcra",
        gcra(5, t),
        FailurePolicy::FailClosed,
    );
    let mut lease = g.acquire("k", 1).await.unwrap();
    let before: String = conn.get(g.key("k")).await.unwrap();
    let err = g.settle("k", &mut lease, 11).await.unwrap_err();
    assert_eq!(err.settle_error(), Some(SettleError::DebtLimit));
    assert_eq!(lease.permits(), 1);
    let after: String = conn.get(g.key("k")).await.unwrap();
    assert_eq!(before, after, "nothing taken");
    g.settle("k", &mut lease, 10).await.unwrap(); // tat ≈ now + 10 s
    let d = g.decide("k", 1).await;
    let ra = d.outcome.unwrap_err().retry_after().unwrap();
    // The debt (≈ 10 s) + one interval - the tolerance (5 s).
    assert!(
        ra > Duration::from_millis(5_500) && ra <= Duration::from_secs(6),
        "{ra:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_gcra_refunds_move_tat_back_never_before_now_and_match_a_twin() {
    let mut conn = manager(&url()).await;
    let t = Duration::from_secs(1);
    for algorithm in [
        gcra(10, t),
        Algorithm::LeakyMeter(LeakyBucketOptions::new(10, 1, t)),
    ] {
        let l = limiter(
            conn.clone(),
            "settle-gcra",
            algorithm,
            FailurePolicy::FailClosed,
        );
        for (i, (estimate, actual)) in [(8, 3), (2, 0), (1, 6), (4, 10)].into_iter().enumerate() {
            let (settled, twin) = (format!("s{i}"), format!("t{i}"));
            let mut lease = l.acquire(&settled, estimate).await.unwrap();
            l.settle(&settled, &mut lease, actual).await.unwrap();
            let _twin = l.acquire(&twin, actual).await;
            let (a, b) = (l.decide(&settled, 0).await, l.decide(&twin, 0).await);
            assert_eq!(a.remaining, b.remaining, "{algorithm:?} case {i}");
            // The same debt, to the milliseconds between the two calls.
            let gap = a.reset.abs_diff(b.reset);
            assert!(gap < Duration::from_millis(200), "{a:?} {b:?}");
        }
        // A refund of the whole debt moves `tat` to now, not before.
        let mut big = l.acquire("m", 3).await.unwrap();
        l.settle("m", &mut big, 0).await.unwrap();
        let tat: String = conn.get(l.key("m")).await.unwrap();
        let tat: u64 = tat.parse().unwrap();
        let now = server_time_us(&mut conn).await;
        assert!(tat <= now && tat + 1_000_000 > now, "{tat} vs {now}");
        assert_eq!(remaining(&l, "m").await, 10);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_from_a_local_lease_adjusts_it_without_a_round_trip() {
    let conn = manager(&url()).await;
    let l = RedisLimiter::builder(
        conn.clone(),
        prefix("settle-lease"),
        fixed(100, HOUR),
        FailurePolicy::FailClosed,
    )
    .timeout(Duration::from_millis(500))
    .lease(5)
    .build()
    .unwrap();
    let first = l.decide("k", 1).await; // leases 5: 1 used, 4 kept
    assert_eq!(first.decided_by, DecidedBy::Redis);
    let mut lease = l.acquire("k", 3).await.unwrap(); // from the lease: 1 kept
    let runs = l.redis_statistics().script_runs;
    // A refund goes back to the local lease: 3 kept, no round trip.
    l.settle("k", &mut lease, 1).await.unwrap();
    assert_eq!(l.redis_statistics().script_runs, runs);
    let d = l.decide("k", 3).await;
    assert_eq!((d.decided_by, d.allowed()), (DecidedBy::Lease, true));
    // A debit the local lease can take: no round trip either.
    let mut lease = l.acquire("k", 1).await.unwrap(); // a new lease of 5: 4 kept
    let runs = l.redis_statistics().script_runs;
    l.settle("k", &mut lease, 3).await.unwrap(); // 2 from the lease: 2 kept
    assert_eq!(l.redis_statistics().script_runs, runs);
    // A debit it cannot take goes to Redis: one script run (not a decision: `calls` stays).
    let calls = l.redis_statistics().calls;
    l.settle("k", &mut lease, 13).await.unwrap();
    let s = l.redis_statistics();
    assert_eq!((s.script_runs, s.calls), (runs + 1, calls), "{s:?}");
    // Redis counted two leases of 5 and the 10 settled: 20 (the hour did not turn).
    let mut conn = conn;
    let k = window_now(&mut conn, HOUR).await;
    let count: Option<String> = conn.get(format!("{}:{k}", l.key("k"))).await.unwrap();
    if let Some(c) = count {
        assert_eq!(c, "20");
    }
    let d = l.decide("k", 2).await;
    assert_eq!((d.decided_by, d.allowed()), (DecidedBy::Lease, true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_refund_clears_this_machines_cached_denial() {
    let conn = manager(&url()).await;
    let l = RedisLimiter::builder(
        conn,
        prefix("settle-cache"),
        fixed(10, HOUR),
        FailurePolicy::FailClosed,
    )
    .timeout(Duration::from_millis(500))
    .cache_denials(100)
    .build()
    .unwrap();
    let mut lease = l.acquire("k", 10).await.unwrap();
    assert!(l.acquire("k", 1).await.is_err()); // Redis
    let d = l.decide("k", 1).await;
    assert_eq!(d.decided_by, DecidedBy::CachedDenial);
    l.settle("k", &mut lease, 4).await.unwrap();
    let d = l.decide("k", 6).await;
    assert_eq!((d.decided_by, d.allowed()), (DecidedBy::Redis, true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_with_the_server_down_is_a_typed_error_and_changes_nothing() {
    let mut server = OwnServer::start();
    let conn = manager(&server.url()).await;
    let make = |algorithm, policy| {
        RedisLimiter::builder(conn.clone(), prefix("settle-down"), algorithm, policy)
            .timeout(Duration::from_millis(300))
            .build()
            .unwrap()
    };
    let fw = make(fixed(10, HOUR), FailurePolicy::FailOpen);
    let g = make(
        gcra(10, Duration::from_secs(1)),
        FailurePolicy::fallback(1.0),
    );
    let mut a = fw.acquire("k", 5).await.unwrap();
    let mut b = g.acquire("k", 5).await.unwrap();
    server.kill();
    for (l, lease) in [(&fw, &mut a), (&g, &mut b)] {
        let err = l.settle("k", lease, 2).await.unwrap_err();
        assert!(
            matches!(
                err,
                RedisSettleError::Unavailable | RedisSettleError::Timeout
            ),
            "{err:?}"
        );
        assert_eq!(lease.permits(), 5);
    }
    // A lease the failure policy granted: fail open counted it nowhere, so it settles at
    // once; the fallback's local lease is not kept, so it cannot.
    let mut open = fw.acquire("k", 5).await.unwrap();
    fw.settle("k", &mut open, 9).await.unwrap();
    assert_eq!(open.permits(), 9);
    let mut local = g.acquire("k", 5).await.unwrap();
    assert_eq!(
        g.settle("k", &mut local, 2).await,
        Err(RedisSettleError::Settle(SettleError::Unsupported))
    );
    assert_eq!(local.permits(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_is_unsupported_for_foreign_leases_and_a_foreign_key_is_the_keys_error() {
    let mut conn = manager(&url()).await;
    let s = Duration::from_secs(1);
    let l = limiter(
        conn.clone(),
        "settle-foreign",
        fixed(10, HOUR),
        FailurePolicy::FailClosed,
    );
    let mut by_hand = Lease::unreleased(3);
    assert_eq!(
        l.settle("k", &mut by_hand, 1).await,
        Err(RedisSettleError::Settle(SettleError::Unsupported))
    );
    // A key holding another type: the key's error, nothing settled.
    let g = limiter(
        conn.clone(),
        "settle-key",
        gcra(10, s),
        FailurePolicy::FailClosed,
    );
    let mut lease = g.acquire("k", 5).await.unwrap();
    let _: () = conn.del(g.key("k")).await.unwrap();
    let _: () = conn.rpush(g.key("k"), "x").await.unwrap();
    assert_eq!(
        g.settle("k", &mut lease, 2).await,
        Err(RedisSettleError::KeyError)
    );
    assert_eq!(lease.permits(), 5);
    // The same lease settled to what it holds: nothing to do, no call.
    g.settle("k", &mut lease, 5).await.unwrap();
    // The two-number token bucket's settle and the sliding window's read their key too.
    for algorithm in [two_number_bucket(), sliding(10, HOUR, 4)] {
        let l = limiter(
            conn.clone(),
            "settle-key-2",
            algorithm,
            FailurePolicy::FailClosed,
        );
        let mut lease = l.acquire("k", 5).await.unwrap();
        let _: () = conn.del(l.key("k")).await.unwrap();
        let _: () = conn.rpush(l.key("k"), "x").await.unwrap();
        for actual in [2, 7] {
            assert_eq!(
                l.settle("k", &mut lease, actual).await,
                Err(RedisSettleError::KeyError),
                "{algorithm:?}"
            );
            assert_eq!(lease.permits(), 5);
        }
        // Content the scripts did not write: the key's error too.
        let _: () = conn.set(l.key("k"), "nan nan").await.unwrap();
        assert_eq!(
            l.settle("k", &mut lease, 7).await,
            Err(RedisSettleError::KeyError),
            "{algorithm:?}"
        );
        let unchanged: String = conn.get(l.key("k")).await.unwrap();
        assert_eq!(unchanged, "nan nan");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_debt_read_under_another_limit_never_locks_a_key() {
    // GCRA: a debt past the tolerance counts up to one burst more under the burst that wrote
    // it, up to the tolerance under another (the same interval: the same key).
    let conn = manager(&url()).await;
    let p = prefix("settle-relimit");
    let build = |a: Algorithm| {
        RedisLimiter::builder(conn.clone(), p.clone(), a, FailurePolicy::FailClosed)
            .timeout(Duration::from_millis(500))
            .build()
            .unwrap()
    };
    let t = Duration::from_secs(1);
    let (five, three) = (build(gcra(5, t)), build(gcra(3, t)));
    let mut lease = five.acquire("g", 1).await.unwrap();
    five.settle("g", &mut lease, 10).await.unwrap(); // ≈ 10 s of debt
    let ra = |d: tollgate::redis::RedisDecision| d.outcome.unwrap_err().retry_after().unwrap();
    let deep = ra(five.decide("g", 1).await);
    assert!(deep > Duration::from_millis(5_500), "{deep:?}");
    let other = ra(three.decide("g", 1).await);
    assert!(other <= t, "{other:?}"); // 3 s tolerance + 1 s - 3 s
                                      // The fixed window: a count past a lowered limit (no debt carried) waits for the window's
                                      // end only.
    let (ten, two) = (build(fixed(10, HOUR)), build(fixed(2, HOUR)));
    let _ = ten.acquire("f", 3).await.unwrap();
    let d = two.decide("f", 2).await;
    let r = ra(d);
    assert!(r <= HOUR, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_token_bucket_gives_tokens_back_and_takes_a_bounded_debt() {
    let mut conn = manager(&url()).await;
    // 100 tokens, 10 more a minute (the one-number state).
    let minute = Duration::from_secs(60);
    let tb = Algorithm::TokenBucket(TokenBucketOptions::new(100, 10, minute));
    let l = limiter(conn.clone(), "settle-tb", tb, FailurePolicy::FailClosed);
    for (i, (estimate, actual)) in [(50, 20), (10, 0), (5, 45), (30, 100)]
        .into_iter()
        .enumerate()
    {
        let (settled, twin) = (format!("s{i}"), format!("t{i}"));
        let mut lease = l.acquire(&settled, estimate).await.unwrap();
        l.settle(&settled, &mut lease, actual).await.unwrap();
        let _twin = l.acquire(&twin, actual).await;
        let (a, b) = (l.decide(&settled, 0).await, l.decide(&twin, 0).await);
        assert_eq!(a.remaining, b.remaining, "case {i}: {a:?} {b:?}");
        assert!(
            a.reset.abs_diff(b.reset) < Duration::from_millis(200),
            "{a:?} {b:?}"
        );
    }
    // Into debt: the bucket empty, 50 owed past it.
    let mut lease = l.acquire("d", 100).await.unwrap();
    l.settle("d", &mut lease, 150).await.unwrap();
    let state: String = conn.get(l.key("d")).await.unwrap();
    assert!(state.ends_with(" 100"), "{state}");
    let d = l.decide("d", 1).await;
    let ra = d.outcome.unwrap_err().retry_after().unwrap();
    // 51 tokens to refill: 6 periods of 10, the first of them under way.
    assert!(ra > 5 * minute && ra <= 6 * minute, "{ra:?}");
    assert!(d.reset > 14 * minute && d.reset <= 15 * minute, "{d:?}");
    // Past the bound (one limit of debt): nothing taken.
    let err = l.settle("d", &mut lease, 201).await.unwrap_err();
    assert_eq!(err.settle_error(), Some(SettleError::DebtLimit));
    let after: String = conn.get(l.key("d")).await.unwrap();
    assert_eq!(after, state);
    l.settle("d", &mut lease, 200).await.unwrap();
    // Under another limit, the debt counts up to that limit only (no change locks a key).
    let other = Algorithm::TokenBucket(TokenBucketOptions::new(50, 10, minute));
    let o = RedisLimiter::builder(
        conn.clone(),
        l.key("x").split(":{").next().unwrap().to_owned(),
        other,
        FailurePolicy::FailClosed,
    )
    .build()
    .unwrap();
    let ra = o
        .decide("d", 1)
        .await
        .outcome
        .unwrap_err()
        .retry_after()
        .unwrap();
    assert!(ra <= 6 * minute, "{ra:?}");
    // A refund gives everything back, never above the limit.
    l.settle("d", &mut lease, 0).await.unwrap();
    assert_eq!(remaining(&l, "d").await, 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_sliding_counter_refunds_while_its_window_counts_and_debits_into_a_bounded_debt() {
    let mut conn = manager(&url()).await;
    let sc = Algorithm::SlidingCounter(SlidingCounterOptions::new(100, HOUR));
    let l = limiter(conn.clone(), "settle-sc", sc, FailurePolicy::FailClosed);
    for (i, (estimate, actual)) in [(50, 20), (10, 0), (5, 45)].into_iter().enumerate() {
        let (settled, twin) = (format!("s{i}"), format!("t{i}"));
        let mut lease = l.acquire(&settled, estimate).await.unwrap();
        l.settle(&settled, &mut lease, actual).await.unwrap();
        let _twin = l.acquire(&twin, actual).await;
        assert_eq!(
            remaining(&l, &settled).await,
            remaining(&l, &twin).await,
            "case {i}"
        );
    }
    // A debit past the limit: into debt, up to one limit more (the estimate at most 200; an
    // hour's window: the previous one holds nothing); past that DebtLimit, nothing taken.
    let mut lease = l.acquire("d", 90).await.unwrap();
    let err = l.settle("d", &mut lease, 201).await.unwrap_err();
    assert_eq!(err.settle_error(), Some(SettleError::DebtLimit));
    assert_eq!(lease.permits(), 90);
    assert_eq!(remaining(&l, "d").await, 10);
    l.settle("d", &mut lease, 150).await.unwrap();
    assert_eq!(remaining(&l, "d").await, 0);
    let key = stored_key(&mut conn, &l, "d").await;
    let count: String = conn.get(&key).await.unwrap();
    assert_eq!(count, "150");
    assert!(!l.decide("d", 1).await.allowed());
    l.settle("d", &mut lease, 200).await.unwrap();
    let err = l.settle("d", &mut lease, 201).await.unwrap_err();
    assert_eq!(err.settle_error(), Some(SettleError::DebtLimit));
    let count: String = conn.get(&key).await.unwrap();
    assert_eq!(count, "200");
    // A refund while in debt comes out of it.
    l.settle("d", &mut lease, 95).await.unwrap();
    assert_eq!(remaining(&l, "d").await, 5);

    // The previous window still counts: a refund there lowers its weight; two windows on,
    // nothing comes back.
    let window = Duration::from_secs(1);
    let sc = Algorithm::SlidingCounter(SlidingCounterOptions::new(10, window));
    let l = limiter(
        conn.clone(),
        "settle-sc-prev",
        sc,
        FailurePolicy::FailClosed,
    );
    align(&mut conn, window).await;
    let k = window_now(&mut conn, window).await;
    let mut lease = l.acquire("k", 8).await.unwrap();
    let mut late = l.acquire("late", 8).await.unwrap();
    align(&mut conn, window).await;
    assert_eq!(window_now(&mut conn, window).await, k + 1);
    l.settle("k", &mut lease, 2).await.unwrap();
    let prev: String = conn.get(format!("{}:{k}", l.key("k"))).await.unwrap();
    assert_eq!(prev, "2");
    align(&mut conn, window).await;
    l.settle("late", &mut late, 2).await.unwrap(); // nothing back: succeeds, changes nothing
    assert_eq!(late.permits(), 2);
    let old: Option<String> = conn.get(format!("{}:{k}", l.key("late"))).await.unwrap();
    assert!(old.is_none() || old.as_deref() == Some("8"), "{old:?}");
}

/// The segment index of the server's clock now, for a sliding window of `window` in
/// `segments`.
async fn segment_now(conn: &mut ConnectionManager, window: Duration, segments: u32) -> u64 {
    window_now(conn, window / segments).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_sliding_window_refunds_and_debits_match_a_twin_asked_for_the_actual_cost() {
    let mut conn = manager(&url()).await;
    let l = limiter(
        conn.clone(),
        "settle-sw-twin",
        sliding(1_000, HOUR, 4),
        FailurePolicy::FailClosed,
    );
    // (estimate, actual): refunds, debits that fit, no change; each on a key of its own,
    // against a twin key asked for `actual` alone.
    let cases = [
        (100, 37),
        (100, 0),
        (1, 250),
        (500, 500),
        (993, 1),
        (10, 993),
    ];
    for (i, (estimate, actual)) in cases.into_iter().enumerate() {
        let (settled, twin) = (format!("s{i}"), format!("t{i}"));
        let k = segment_now(&mut conn, HOUR, 4).await;
        // Something already counted on both, as a busy key has.
        for p in [&settled, &twin] {
            let _ = l.acquire(p, 7).await.unwrap();
        }
        let mut lease = l.acquire(&settled, estimate).await.unwrap();
        l.settle(&settled, &mut lease, actual).await.unwrap();
        assert_eq!(lease.permits(), actual);
        let _twin = l.acquire(&twin, actual).await.unwrap();
        let (a, b) = (l.decide(&settled, 0).await, l.decide(&twin, 0).await);
        assert_eq!(
            a.remaining, b.remaining,
            "case {i}: {estimate} settled to {actual}"
        );
        assert_eq!(a.remaining, u64::from(1_000 - 7 - actual));
        if segment_now(&mut conn, HOUR, 4).await == k {
            // One segment throughout: the very state a grant of `actual` writes.
            let (x, y): (String, String) = (
                conn.get(l.key(&settled)).await.unwrap(),
                conn.get(l.key(&twin)).await.unwrap(),
            );
            assert_eq!(x, y, "case {i}");
            assert_eq!(x, format!("{k} {} {}", 7 + actual, 7 + actual));
        }
        // Settled again, from what it holds: back to the estimate.
        l.settle(&settled, &mut lease, estimate).await.unwrap();
        assert_eq!(lease.permits(), estimate);
        assert_eq!(
            remaining(&l, &settled).await,
            u64::from(1_000 - 7 - estimate)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_sliding_window_refund_comes_out_of_its_segment_while_it_is_in_the_window() {
    let mut conn = manager(&url()).await;
    // Three segments of 1 s: a segment counts for 3 s.
    let (window, segments) = (Duration::from_secs(3), 3);
    let seg = window / segments;
    let l = limiter(
        conn.clone(),
        "settle-sw-late",
        sliding(10, window, segments),
        FailurePolicy::FailClosed,
    );
    align(&mut conn, seg).await;
    let j = segment_now(&mut conn, window, segments).await;
    let mut lease = l.acquire("k", 6).await.unwrap();
    let mut late = l.acquire("late", 6).await.unwrap();
    // The next segment: the lease's segment is still in the window, not the current one.
    align(&mut conn, seg).await;
    assert_eq!(segment_now(&mut conn, window, segments).await, j + 1);
    let _ = l.acquire("k", 2).await.unwrap();
    l.settle("k", &mut lease, 1).await.unwrap(); // 5 back, out of segment j
    assert_eq!(lease.permits(), 1);
    let state: String = conn.get(l.key("k")).await.unwrap();
    assert_eq!(state, format!("{} 3 2 1", j + 1));
    assert_eq!(remaining(&l, "k").await, 7);
    // Never below 0: a refund of more than the segment holds (here, as another writer left
    // it, nothing) gives back what is there.
    let _: () = ::redis::cmd("SET")
        .arg(l.key("k"))
        .arg(format!("{} 2 2", j + 1))
        .arg("KEEPTTL")
        .query_async(&mut conn)
        .await
        .unwrap();
    l.settle("k", &mut lease, 0).await.unwrap();
    assert_eq!(lease.permits(), 0);
    let state: String = conn.get(l.key("k")).await.unwrap();
    assert_eq!(state, format!("{} 2 2", j + 1));
    assert_eq!(remaining(&l, "k").await, 8);
    // Segment j + 3: segment j has left the window; a refund gives nothing back, and succeeds.
    align(&mut conn, seg).await;
    align(&mut conn, seg).await;
    assert_eq!(segment_now(&mut conn, window, segments).await, j + 3);
    let before: Option<String> = conn.get(l.key("late")).await.unwrap();
    l.settle("late", &mut late, 2).await.unwrap();
    assert_eq!(late.permits(), 2);
    let after: Option<String> = conn.get(l.key("late")).await.unwrap();
    assert_eq!(before, after, "nothing comes back");
    assert_eq!(remaining(&l, "late").await, 10);
    // A debit is taken now, in the current segment.
    l.settle("late", &mut late, 5).await.unwrap();
    let state: String = conn.get(l.key("late")).await.unwrap();
    assert_eq!(state, format!("{} 3 3", j + 3));
    assert_eq!(remaining(&l, "late").await, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_sliding_window_debit_into_debt_up_to_one_limit_else_debt_limit_takes_nothing() {
    let mut conn = manager(&url()).await;
    let l = limiter(
        conn.clone(),
        "settle-sw-debit",
        sliding(10, HOUR, 4),
        FailurePolicy::FailClosed,
    );
    let k = segment_now(&mut conn, HOUR, 4).await;
    let mut lease = l.acquire("k", 6).await.unwrap();
    let before: String = conn.get(l.key("k")).await.unwrap();
    // Past one limit of debt (the window's total at most 20): nothing taken.
    let err = l.settle("k", &mut lease, 21).await.unwrap_err();
    assert_eq!(err, RedisSettleError::Settle(SettleError::DebtLimit));
    assert_eq!(lease.permits(), 6);
    let after: String = conn.get(l.key("k")).await.unwrap();
    assert_eq!(before, after, "nothing taken");
    // Past the limit, into debt; exactly one limit of debt fits.
    l.settle("k", &mut lease, 15).await.unwrap();
    assert_eq!(lease.permits(), 15);
    assert_eq!(remaining(&l, "k").await, 0);
    l.settle("k", &mut lease, 20).await.unwrap();
    assert_eq!(lease.permits(), 20);
    // A request now waits for the lease's segment to leave the window: 45 to 60 minutes.
    let d = l.decide("k", 1).await;
    assert_eq!(d.remaining, 0);
    let ra = d.outcome.unwrap_err().retry_after().unwrap();
    let seg = HOUR.as_micros() as u64 / 4;
    let now = d.server_time_us.unwrap();
    if now / seg == k {
        assert_eq!(ra, Duration::from_micros((k + 4) * seg - now));
        let state: String = conn.get(l.key("k")).await.unwrap();
        assert_eq!(state, format!("{k} 20 20"));
    }
    assert!(
        ra > HOUR * 3 / 4 - Duration::from_secs(1) && ra <= HOUR,
        "{ra:?}"
    );
    // Nothing more fits, not even one.
    let before: String = conn.get(l.key("k")).await.unwrap();
    let err = l.settle("k", &mut lease, 21).await.unwrap_err();
    assert_eq!(err.settle_error(), Some(SettleError::DebtLimit));
    let after: String = conn.get(l.key("k")).await.unwrap();
    assert_eq!(before, after, "nothing taken");
    // A refund while in debt comes out of the lease's segment.
    l.settle("k", &mut lease, 8).await.unwrap();
    assert_eq!(remaining(&l, "k").await, 2);
    // The TTL covers the window of the newest segment.
    let pttl: i64 = ::redis::cmd("PTTL")
        .arg(l.key("k"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(pttl > 45 * 60 * 1_000 && pttl <= 61 * 60 * 1_000, "{pttl}");
}

/// A Redis limiter and its local twin on a manual clock whose origin is `origin` µs of server
/// time (a window's start): each step on both, compared.
struct Twin<'a> {
    redis: &'a RedisLimiter,
    local: &'a dyn Limiter,
    clock: &'a ManualClock,
    origin: u64,
    /// The span (µs) a settle must not straddle: the segment or window it counts a debit in.
    unit: u64,
}

impl Twin<'_> {
    /// The local clock set to `us` of server time.
    fn at(&self, us: u64) {
        self.clock
            .set(Instant::from_nanos((us - self.origin) * 1_000));
    }

    /// A decision of `permits` on both: the same outcome, the same RetryAfter (the local one
    /// exact to the nanosecond, Redis's the same instant rounded up to the microsecond), the
    /// same remaining on a grant.
    async fn decide(&self, permits: u32) -> bool {
        let up = |d: Duration| Duration::from_micros(d.as_nanos().div_ceil(1_000) as u64);
        let d = self.redis.decide("k", permits).await;
        assert_eq!(d.decided_by, DecidedBy::Redis);
        let now = d.server_time_us.unwrap();
        self.at(now);
        let l = self.local.try_acquire(permits).map(Lease::forget);
        let at = now - self.origin;
        let (allowed, remaining) = (d.allowed(), d.remaining);
        assert_eq!(
            d.outcome.map_err(|r| r.retry_after()),
            l.map(drop).map_err(|r| r.retry_after().map(up)),
            "Redis and the local limiter disagree on {permits} at {at} µs after the origin"
        );
        if allowed {
            assert_eq!(remaining, self.local.available_permits(), "at {at} µs");
        }
        allowed
    }

    /// Settles both leases to `actual`: the same result. `false` if the settle straddled a
    /// segment or window boundary (the twins may then differ: the caller stops).
    async fn settle(
        &self,
        conn: &mut ConnectionManager,
        redis: &mut Lease<'static>,
        local: &mut Lease<'_>,
        actual: u32,
    ) -> bool {
        let before = server_time_us(conn).await;
        let r = self.redis.settle("k", redis, actual).await;
        let after = server_time_us(conn).await;
        if before / self.unit != after / self.unit {
            eprintln!("a settle straddled a boundary; the twin comparisons so far held");
            return false;
        }
        self.at(before);
        let l = local.settle(actual);
        assert_eq!(
            r.map_err(|e| e.settle_error()),
            l.map_err(Some),
            "settle to {actual}"
        );
        assert_eq!(redis.permits(), local.permits());
        true
    }
}

/// Sleeps until `us` of server time (and 3 ms more).
async fn until(conn: &mut ConnectionManager, us: u64) {
    let now = server_time_us(conn).await;
    if let Some(wait) = (us + 3_000).checked_sub(now) {
        tokio::time::sleep(Duration::from_micros(wait)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_sliding_window_debt_refuses_until_its_segments_leave_as_the_local_window() {
    // Limit 10, a window of three 200 ms segments; the local window on a manual clock whose
    // origin is the server's window start.
    let seg = Duration::from_millis(200);
    let s = seg.as_micros() as u64;
    let mut conn = manager(&url()).await;
    let opts = SlidingWindowOptions::new(10, 3 * seg, 3);
    let redis = limiter(
        conn.clone(),
        "settle-sw-debt",
        Algorithm::SlidingWindow(opts),
        FailurePolicy::FailClosed,
    );
    let clock = ManualClock::new();
    let local = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
    let origin = align(&mut conn, 3 * seg).await;
    let t = Twin {
        redis: &redis,
        local: &local,
        clock: &clock,
        origin,
        unit: s,
    };
    let k0 = origin / s;
    // Segment 0: 8.
    t.at(server_time_us(&mut conn).await);
    let _a = redis.acquire("k", 8).await.unwrap();
    local.try_acquire(8).unwrap().forget();
    // Segment 1: 1, settled to 6: 14 in the window, 4 past the limit.
    until(&mut conn, origin + s).await;
    t.at(server_time_us(&mut conn).await);
    let mut b = redis.acquire("k", 1).await.unwrap();
    let mut lb = local.try_acquire(1).unwrap();
    if !t.settle(&mut conn, &mut b, &mut lb, 6).await {
        return;
    }
    let state: String = conn.get(redis.key("k")).await.unwrap();
    assert_eq!(state, format!("{} 14 6 8", k0 + 1));
    // Refused until segment 0 (8) leaves: segment 3; the probe too.
    assert!(!t.decide(1).await);
    assert!(!t.decide(0).await);
    // Past one limit of debt: nothing taken, on both.
    if !t.settle(&mut conn, &mut b, &mut lb, 13).await {
        return;
    }
    let after: String = conn.get(redis.key("k")).await.unwrap();
    assert_eq!(after, state, "nothing taken");
    // Exactly one limit of debt, then a refund while in debt: 17 in the window.
    if !t.settle(&mut conn, &mut b, &mut lb, 12).await
        || !t.settle(&mut conn, &mut b, &mut lb, 9).await
    {
        return;
    }
    // 1 waits for segment 0 to leave (segment 3), 5 for segment 1 too (segment 4).
    assert!(!t.decide(1).await);
    assert!(!t.decide(5).await);
    // Segment 3: segment 0 has left, 9 remain: 1 fits, then 1 more waits for segment 1.
    until(&mut conn, origin + 3 * s).await;
    assert!(t.decide(1).await);
    assert!(!t.decide(1).await);
    // Segment 4: the debit's segment has left: the debt is repaid.
    until(&mut conn, origin + 4 * s).await;
    assert!(t.decide(9).await);
    assert!(!t.decide(1).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_sliding_counter_debt_decays_with_the_window_as_the_local_counter() {
    // Limit 10 in a 400 ms window; the local counter on a manual clock whose origin is the
    // server's window start.
    let w = Duration::from_millis(400);
    let wu = w.as_micros() as u64;
    let mut conn = manager(&url()).await;
    let opts = SlidingCounterOptions::new(10, w);
    let redis = limiter(
        conn.clone(),
        "settle-sc-debt",
        Algorithm::SlidingCounter(opts),
        FailurePolicy::FailClosed,
    );
    let clock = ManualClock::new();
    let local = SlidingCounterLimiter::with_clock(opts, &clock).unwrap();
    let origin = align(&mut conn, w).await;
    let t = Twin {
        redis: &redis,
        local: &local,
        clock: &clock,
        origin,
        unit: wu,
    };
    let k0 = origin / wu;
    let count = |k: u64| format!("{}:{k}", redis.key("k"));
    // Window 0: 4, settled to 16: 6 past the limit.
    t.at(server_time_us(&mut conn).await);
    let mut a = redis.acquire("k", 4).await.unwrap();
    let mut la = local.try_acquire(4).unwrap();
    if !t.settle(&mut conn, &mut a, &mut la, 16).await {
        return;
    }
    let c: String = conn.get(count(k0)).await.unwrap();
    assert_eq!(c, "16");
    // Refused until the next window, weighted: 16 · (1 - x) ≤ 9.
    assert!(!t.decide(1).await);
    assert!(!t.decide(0).await);
    // Past one limit of debt (the estimate at most 20): nothing taken, on both.
    if !t.settle(&mut conn, &mut a, &mut la, 21).await {
        return;
    }
    let c: String = conn.get(count(k0)).await.unwrap();
    assert_eq!(c, "16", "nothing taken");
    // A refund while in debt.
    if !t.settle(&mut conn, &mut a, &mut la, 14).await {
        return;
    }
    assert!(!t.decide(1).await);
    assert!(!t.decide(4).await);
    // A quarter into window 1: 14 · 0.75 = 10.5, still refused; its weight decays.
    until(&mut conn, origin + wu + wu / 4).await;
    assert!(!t.decide(1).await);
    // A debit in window 1 while the previous window is in debt: counted here, weighted there.
    if !t.settle(&mut conn, &mut a, &mut la, 16).await {
        return;
    }
    let c: String = conn.get(count(k0 + 1)).await.unwrap();
    assert_eq!(c, "2");
    assert!(!t.decide(1).await);
    // 16 more would take the estimate past 20 (14 · (1 - x) + 18 > 20 until x = 6/7): nothing
    // taken.
    if !t.settle(&mut conn, &mut a, &mut la, 32).await {
        return;
    }
    // Half-way into window 1: 14 · 0.5 + 2 = 9: one fits.
    until(&mut conn, origin + wu + wu / 2).await;
    assert!(t.decide(1).await);
    assert!(!t.decide(2).await);
    // A refund out of the lease's own window, which still counts (its weight drops).
    if !t.settle(&mut conn, &mut a, &mut la, 4).await {
        return;
    }
    let c: String = conn.get(count(k0)).await.unwrap();
    assert_eq!(c, "2");
    assert!(t.decide(3).await);
    // Window 3: both windows have left: the debt is repaid.
    until(&mut conn, origin + 3 * wu).await;
    assert!(t.decide(10).await);
    assert!(!t.decide(1).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_sliding_debt_on_states_written_as_before_and_read_under_another_limit() {
    // States as the previous release wrote them (the same shapes: a debt needs no new format)
    // take a debt, and a key in debt read under another limit is never locked: its counts
    // leave with their segments or windows whatever the limit.
    let mut conn = manager(&url()).await;
    let p = prefix("settle-sliding-relimit");
    let shared = conn.clone();
    let build = |a: Algorithm| {
        RedisLimiter::builder(shared.clone(), p.clone(), a, FailurePolicy::FailClosed)
            .timeout(Duration::from_millis(500))
            .build()
            .unwrap()
    };
    let seg = Duration::from_secs(1);
    let (ten, three) = (
        build(sliding(10, 3 * seg, 3)),
        build(sliding(3, 3 * seg, 3)),
    );
    let mut lease = ten.acquire("w", 1).await.unwrap();
    let k = segment_now(&mut conn, 3 * seg, 3).await;
    let _: () = ::redis::cmd("SET")
        .arg(ten.key("w"))
        .arg(format!("{k} 5 5"))
        .arg("KEEPTTL")
        .query_async(&mut conn)
        .await
        .unwrap();
    ten.settle("w", &mut lease, 14).await.unwrap(); // 13 more: 18 in the window
    if segment_now(&mut conn, 3 * seg, 3).await == k {
        let state: String = conn.get(ten.key("w")).await.unwrap();
        assert_eq!(state, format!("{k} 18 18"));
    }
    let ra = |d: tollgate::redis::RedisDecision| d.outcome.unwrap_err().retry_after().unwrap();
    let r = ra(three.decide("w", 1).await);
    assert!(r <= 3 * seg, "{r:?}");
    let r = ra(ten.decide("w", 1).await);
    assert!(r <= 3 * seg, "{r:?}");

    let w = Duration::from_secs(2);
    let (ten, three) = (
        build(Algorithm::SlidingCounter(SlidingCounterOptions::new(10, w))),
        build(Algorithm::SlidingCounter(SlidingCounterOptions::new(3, w))),
    );
    let mut lease = ten.acquire("c", 1).await.unwrap();
    let k = window_now(&mut conn, w).await;
    let _: () = ::redis::cmd("SET")
        .arg(format!("{}:{k}", ten.key("c")))
        .arg("5")
        .arg("KEEPTTL")
        .query_async(&mut conn)
        .await
        .unwrap();
    ten.settle("c", &mut lease, 14).await.unwrap(); // 13 more
    if window_now(&mut conn, w).await == k {
        let c: String = conn.get(format!("{}:{k}", ten.key("c"))).await.unwrap();
        assert_eq!(c, "18");
    }
    // Under the lower limit: counted up to twice that limit, gone within two windows.
    let r = ra(three.decide("c", 1).await);
    assert!(r <= 2 * w, "{r:?}");
    let r = ra(ten.decide("c", 1).await);
    assert!(r <= 2 * w, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_two_number_token_bucket_matches_a_twin_asked_for_the_actual_cost() {
    let conn = manager(&url()).await;
    let l = limiter(
        conn.clone(),
        "settle-tb2-twin",
        two_number_bucket(),
        FailurePolicy::FailClosed,
    );
    assert!(
        l.key("k").ends_with(":tb600000000x1500000000"),
        "{}",
        l.key("k")
    );
    let cases = [
        (50, 20),
        (10, 0),
        (5, 45),
        (500_000_000, 2_000_000_000),
        (2_000_000_000, 1),
    ];
    for (i, (estimate, actual)) in cases.into_iter().enumerate() {
        let (settled, twin) = (format!("s{i}"), format!("t{i}"));
        let mut lease = l.acquire(&settled, estimate).await.unwrap();
        l.settle(&settled, &mut lease, actual).await.unwrap();
        assert_eq!(lease.permits(), actual);
        let _twin = l.acquire(&twin, actual).await.unwrap();
        let (a, b) = (l.decide(&settled, 0).await, l.decide(&twin, 0).await);
        assert_eq!(a.remaining, b.remaining, "case {i}: {a:?} {b:?}");
        assert!(
            a.reset.abs_diff(b.reset) < Duration::from_millis(200),
            "{a:?} {b:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_two_number_token_bucket_debt_counts_in_retry_after_as_the_local_bucket() {
    let mut conn = manager(&url()).await;
    let l = limiter(
        conn.clone(),
        "settle-tb2-debt",
        two_number_bucket(),
        FailurePolicy::FailClosed,
    );
    let p = TB2_PERIOD.as_micros() as u64;
    // The local bucket on a manual clock whose origin is the server's period start.
    let k0 = window_now(&mut conn, TB2_PERIOD).await;
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(TB2_LIMIT, TB2_PER, TB2_PERIOD);
    let local = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    let at = |us: u64| Instant::from_nanos((us - k0 * p) * 1_000);
    clock.set(at(server_time_us(&mut conn).await));

    // Half a billion, then 1.5 billion: the bucket is empty.
    let mut a = l.acquire("d", 500_000_000).await.unwrap();
    let mut b = l.acquire("d", 1_500_000_000).await.unwrap();
    let mut la = local.try_acquire(500_000_000).unwrap();
    let mut lb = local.try_acquire(1_500_000_000).unwrap();
    // 1.5 billion more into debt (a deficit of 3.5 billion, 1.5 past the limit).
    l.settle("d", &mut b, 3_000_000_000).await.unwrap();
    lb.settle(3_000_000_000).unwrap();
    let state: String = conn.get(l.key("d")).await.unwrap();
    let words: Vec<&str> = state.split(' ').collect();
    assert_eq!(words.len(), 3, "{state}");
    assert_eq!((words[0], words[2]), ("3500000000", "2000000000"));
    // Refused; the RetryAfter counts the debt: 1.5 billion and 1 tokens to refill, 2 periods.
    let d = l.decide("d", 1).await;
    let now = d.server_time_us.unwrap();
    let ra = d.outcome.unwrap_err().retry_after().unwrap();
    assert_eq!(d.remaining, 0);
    let same_period = now / p == k0 && window_now(&mut conn, TB2_PERIOD).await == k0;
    if same_period {
        assert_eq!(ra, Duration::from_micros((k0 + 2) * p - now));
        // Full again after 3.5 billion tokens: 3 periods.
        assert_eq!(d.reset, Duration::from_micros((k0 + 3) * p - now));
        clock.set(at(now));
        let r = local.try_acquire(1).map(Lease::forget).unwrap_err();
        assert_eq!(r.retry_after(), Some(ra), "Redis and the local bucket");
    }
    assert!(ra > TB2_PERIOD - Duration::from_secs(1), "{ra:?}");
    // Past the bound (one limit of debt): nothing taken.
    let err = l.settle("d", &mut a, 1_000_000_001).await.unwrap_err();
    assert_eq!(err.settle_error(), Some(SettleError::DebtLimit));
    assert_eq!(la.settle(1_000_000_001), Err(SettleError::DebtLimit));
    assert_eq!(a.permits(), 500_000_000);
    let after: String = conn.get(l.key("d")).await.unwrap();
    assert_eq!(after, state);
    // Exactly one limit of debt.
    l.settle("d", &mut a, 1_000_000_000).await.unwrap();
    la.settle(1_000_000_000).unwrap();
    // Under another limit (the same rate: the same key), the deficit counts up to that limit
    // only: no configuration change locks a key.
    let other = Algorithm::TokenBucket(TokenBucketOptions::new(TB2_PER, TB2_PER, TB2_PERIOD));
    let o = RedisLimiter::builder(
        conn.clone(),
        l.key("x").split(":{").next().unwrap().to_owned(),
        other,
        FailurePolicy::FailClosed,
    )
    .build()
    .unwrap();
    let ra = o
        .decide("d", 1)
        .await
        .outcome
        .unwrap_err()
        .retry_after()
        .unwrap();
    assert!(ra <= TB2_PERIOD, "{ra:?}");
    // Refunds give everything back, never above the limit.
    l.settle("d", &mut b, 0).await.unwrap();
    l.settle("d", &mut a, 0).await.unwrap();
    assert_eq!(remaining(&l, "d").await, u64::from(TB2_LIMIT));
    lb.settle(0).unwrap();
    la.settle(0).unwrap();
    assert_eq!(local.available_permits(), u64::from(TB2_LIMIT));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_two_number_token_bucket_reads_the_two_word_state_of_earlier_writers() {
    let mut conn = manager(&url()).await;
    let l = limiter(
        conn.clone(),
        "settle-tb2-old",
        two_number_bucket(),
        FailurePolicy::FailClosed,
    );
    let k = window_now(&mut conn, TB2_PERIOD).await;
    let mut lease = l.acquire("k", 1).await.unwrap();
    // The state as this version's grants (and the previous release's) write it: two words.
    let _: () = conn
        .set(l.key("k"), format!("1999999000 {k}"))
        .await
        .unwrap();
    l.settle("k", &mut lease, 1_001).await.unwrap(); // 1,000 more: the bucket is empty
    if window_now(&mut conn, TB2_PERIOD).await == k {
        let state: String = conn.get(l.key("k")).await.unwrap();
        assert_eq!(state, format!("2000000000 {k}"));
        assert_eq!(remaining(&l, "k").await, 0);
    }
    l.settle("k", &mut lease, 1).await.unwrap();
    let d = l.decide("k", 0).await;
    assert!(d.remaining >= 1_000, "{d:?}");
}

/// `settle_within(.., max_debt)` on every algorithm: with the whole limit taken, a debit that
/// would owe `max_debt + 1` is refused in the same script and takes nothing (the key's state
/// is unchanged), one that owes exactly `max_debt` goes through; `settle` keeps the bound of
/// one limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_within_bounds_the_debt_on_every_algorithm() {
    let mut conn = manager(&url()).await;
    let minute = Duration::from_secs(60);
    let algorithms = [
        ("fw", fixed(10, HOUR), 10),
        ("sw", sliding(10, HOUR, 4), 10),
        (
            "sc",
            Algorithm::SlidingCounter(SlidingCounterOptions::new(10, HOUR)),
            10,
        ),
        ("gcra", gcra(10, minute), 10),
        (
            "tb1",
            Algorithm::TokenBucket(TokenBucketOptions::new(10, 1, minute)),
            10,
        ),
        ("tb2", two_number_bucket(), TB2_LIMIT),
    ];
    for (name, algorithm, limit) in algorithms {
        let l = limiter(
            conn.clone(),
            &format!("settle-within-{name}"),
            algorithm,
            FailurePolicy::FailClosed,
        );
        for max_debt in [0, 3] {
            let key = format!("m{max_debt}");
            let mut lease = l.acquire(&key, limit).await.unwrap();
            let keys: Vec<String> = conn.keys(format!("{}*", l.key(&key))).await.unwrap();
            let mut before = Vec::new();
            for k in &keys {
                let v: Option<String> = conn.get(k).await.unwrap();
                before.push(v);
            }
            let err = l
                .settle_within(&key, &mut lease, limit + max_debt + 1, max_debt)
                .await
                .unwrap_err();
            assert_eq!(
                err,
                RedisSettleError::Settle(SettleError::DebtLimit),
                "{name}, bound {max_debt}"
            );
            assert_eq!(lease.permits(), limit, "{name}");
            for (k, was) in keys.iter().zip(&before) {
                let now: Option<String> = conn.get(k).await.unwrap();
                assert_eq!(&now, was, "{name}: {k} unchanged");
            }
            if max_debt > 0 {
                l.settle_within(&key, &mut lease, limit + max_debt, max_debt)
                    .await
                    .unwrap_or_else(|e| panic!("{name}: owing {max_debt}: {e}"));
                assert_eq!(lease.permits(), limit + max_debt, "{name}");
            }
        }
        // The default bound: one limit.
        let mut lease = l.acquire("whole", limit).await.unwrap();
        assert!(
            l.settle("whole", &mut lease, 2 * limit + 1).await.is_err(),
            "{name}"
        );
        l.settle("whole", &mut lease, 2 * limit).await.unwrap();
    }
}
