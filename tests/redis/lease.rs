//! Issue 27: leased quotas — a fixed window's permits leased from Redis in blocks and handed out
//! locally, never more than the limit across machines.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_serves_its_window_locally_then_refuses_locally() {
    let fw = Algorithm::FixedWindow(FixedWindowOptions::new(5, Duration::from_secs(3_600)));
    let l = RedisLimiter::builder(
        manager(&url()).await,
        prefix("lease"),
        fw,
        FailurePolicy::FailClosed,
    )
    .timeout(Duration::from_millis(500))
    .lease(3)
    .build()
    .unwrap();
    // A probe leases nothing.
    let probe = l.decide("k", 0).await;
    assert_eq!(
        (probe.decided_by, probe.allowed()),
        (DecidedBy::Redis, true)
    );
    let mut seen = Vec::new();
    for _ in 0..7 {
        let d = l.decide("k", 1).await;
        seen.push((d.decided_by, d.allowed()));
    }
    use DecidedBy::{Lease, Redis};
    assert_eq!(
        seen,
        [
            (Redis, true),  // leases 3: 1 used, 2 kept
            (Lease, true),  // from the lease
            (Lease, true),  // the lease is empty
            (Redis, true),  // only 2 left in the window: both leased, 1 kept
            (Lease, true),  // the fifth of five
            (Redis, false), // the window is spent...
            (Lease, false), // ...and remembered until it ends
        ]
    );
    let d = l.decide("k", 1).await;
    let ra = d.outcome.unwrap_err().retry_after().unwrap();
    assert!(ra <= Duration::from_secs(3_600), "{ra:?}");
    let s = l.redis_statistics();
    assert_eq!((s.script_runs, s.leased), (4, 5), "{s:?}");
    // Granted and refused count every decision, leased or not (counted apart).
    assert_eq!((s.total_successful, s.total_failed), (6, 3), "{s:?}");
    let local = l.statistics();
    assert_eq!((local.total_successful, local.total_failed), (6, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_of_four_limiters_never_overshoot_the_limit() {
    // Four "processes" (own connections), 8 tasks each, on one key of 100 an hour, leasing 10
    // at a time: never more than 100 granted; at most 4 × 9 leased permits left unused.
    let window = Duration::from_secs(3_600);
    let fw = Algorithm::FixedWindow(FixedWindowOptions::new(100, window));
    let p = prefix("lease-4");
    let mut limiters = Vec::new();
    let mut handles = Vec::new();
    for _ in 0..4 {
        let l = RedisLimiter::builder(
            manager(&url()).await,
            p.clone(),
            fw,
            FailurePolicy::FailClosed,
        )
        .timeout(Duration::from_secs(5))
        .lease(10)
        .build()
        .unwrap();
        for _ in 0..8 {
            let l = l.clone();
            handles.push(tokio::spawn(async move {
                let mut out = Vec::new();
                for _ in 0..40 {
                    let d = l.decide("hot", 1).await;
                    assert!(
                        matches!(d.decided_by, DecidedBy::Redis | DecidedBy::Lease),
                        "{d:?}"
                    );
                    out.push((d.server_time_us, d.allowed()));
                }
                out
            }));
        }
        limiters.push(l);
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.unwrap());
    }
    let w = window.as_micros() as u64;
    let windows: std::collections::BTreeSet<u64> =
        all.iter().filter_map(|(t, _)| t.map(|t| t / w)).collect();
    let granted = all.iter().filter(|x| x.1).count();
    if windows.len() == 1 {
        assert!((100 - 4 * 9..=100).contains(&granted), "{granted} granted");
    } else {
        // The run crossed a window boundary (once an hour): two windows' worth at most.
        assert!(granted <= 200, "{granted} granted over {windows:?}");
    }
    let (runs, leased): (u64, u64) = limiters.iter().fold((0, 0), |(r, l), x| {
        let s = x.redis_statistics();
        (r + s.script_runs, l + s.leased)
    });
    assert_eq!(runs + leased, 4 * 8 * 40);
    assert!(leased > runs, "{leased} leased, {runs} round trips");
}
