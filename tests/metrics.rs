//! `observe::Registry::export_metrics` against a real `metrics` recorder (metrics-util's
//! `DebuggingRecorder`, the one the `metrics` project documents for tests).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tollgate::observe::Registry;
use tollgate::*;

/// Every exported value, keyed by "name{label=value,...}" (labels sorted).
fn export(registry: &Registry) -> BTreeMap<String, f64> {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || registry.export_metrics());
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            let value = match value {
                DebugValue::Counter(c) => c as f64,
                DebugValue::Gauge(g) => g.into_inner(),
                DebugValue::Histogram(_) => panic!("no histogram is exported"),
            };
            (format!("{}{{{}}}", key.name(), labels.join(",")), value)
        })
        .collect()
}

#[test]
fn limiters_and_partitions_are_exported_with_their_statistics() {
    let clock = Arc::new(ManualClock::new());
    let registry = Registry::new();

    let db = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(4)).unwrap());
    registry.register("db", &db);
    let _held = db.try_acquire(3).unwrap();
    assert!(db.try_acquire(2).is_err());

    let kind =
        PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    let per_user = Arc::new(Partitioned::with_clock(
        move |user: &str| Partition::new(user.to_string(), kind),
        PartitionConfig::default(),
        clock.clone(),
    ));
    registry.register("per-user", &per_user);
    for _ in 0..3 {
        let _ = per_user.try_acquire("alice", 1);
    }
    let _ = per_user.try_acquire("bob", 1);

    let m = export(&registry);
    assert_eq!(m["tollgate_available_permits{limiter=db}"], 1.0);
    assert_eq!(m["tollgate_queued_permits{limiter=db}"], 0.0);
    assert_eq!(
        m["tollgate_requests_total{limiter=db,outcome=granted}"],
        1.0
    );
    assert_eq!(
        m["tollgate_requests_total{limiter=db,outcome=rejected}"],
        1.0
    );

    let alice = "limiter=per-user,outcome=granted,partition=\"alice\"";
    assert_eq!(m[&format!("tollgate_requests_total{{{alice}}}")], 2.0);
    assert_eq!(
        m["tollgate_requests_total{limiter=per-user,outcome=rejected,partition=\"alice\"}"],
        1.0
    );
    assert_eq!(
        m["tollgate_available_permits{limiter=per-user,partition=\"bob\"}"],
        1.0
    );
    // Two metrics per gauge kind and two counters, for db, alice and bob.
    assert_eq!(m.len(), 3 * 4);
}

#[test]
fn counters_are_absolute_and_dropped_limiters_leave() {
    let registry = Registry::new();
    let a = Arc::new(TokenBucketLimiter::new(TokenBucketOptions::per_second(100)).unwrap());
    let b = Arc::new(NoopLimiter::new());
    registry.register("a", &a);
    registry.register("b", &b);
    for _ in 0..5 {
        drop(a.try_acquire(1).unwrap());
    }
    // Exporting twice reports the totals, not increments added twice.
    export(&registry);
    let m = export(&registry);
    assert_eq!(m["tollgate_requests_total{limiter=a,outcome=granted}"], 5.0);

    drop(a);
    let m = export(&registry);
    assert!(m.keys().all(|k| !k.contains("limiter=a")), "{m:?}");
    assert!(m.contains_key("tollgate_requests_total{limiter=b,outcome=granted}"));
    assert_eq!(registry.len(), 1);
}

#[test]
fn an_observed_limiter_may_register_while_the_registry_is_read() {
    let registry = Arc::new(Registry::new());
    let first = Arc::new(NoopLimiter::new());
    registry.register("first", &first);
    let late = Arc::new(NoopLimiter::new());
    let mut seen = Vec::new();
    // The registry's lock is not held while the closure runs: no deadlock.
    registry.for_each(|name, _| {
        seen.push(name.to_string());
        registry.register("late", &late);
    });
    assert_eq!(seen, ["first"]);
    assert_eq!(registry.len(), 2);
}
