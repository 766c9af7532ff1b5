//! loom models of `SlidingCounterLimiter`: the 128-bit word's take and window roll, racing.
#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use tollgate::{Limiter, SlidingCounterLimiter, SlidingCounterOptions};
use tollgate_loom_tests::{check, ns, RecordingClock};

/// Limit 2 per 100 ns with one taken: two racing takes, exactly one wins.
#[test]
fn one_left_exactly_one_wins() {
    check(|| {
        let clock = RecordingClock::new();
        let c = Arc::new(
            SlidingCounterLimiter::with_clock(
                SlidingCounterOptions::new(2, ns(100)),
                clock.clone(),
            )
            .unwrap(),
        );
        c.try_acquire(1).unwrap();
        let (a, b) = (c.clone(), c.clone());
        let ta = thread::spawn(move || a.try_acquire(1).is_ok());
        let tb = thread::spawn(move || b.try_acquire(1).is_ok());
        let (ra, rb) = (ta.join().unwrap(), tb.join().unwrap());
        assert!(ra != rb);
        let s = c.statistics();
        assert_eq!(
            (s.total_successful, s.total_failed, s.available_permits),
            (2, 1, 0)
        );
    });
}

/// Limit 2 per 100 ns, both taken at 0; the clock moves to 150 ns (the two weigh 50 %: one
/// fits) while two threads take one each: never both (the estimate would be 3), and a decision
/// made at 150 ns is refused only if the other was admitted.
#[test]
fn takes_race_the_window_roll() {
    check(|| {
        let clock = RecordingClock::new();
        let c = Arc::new(
            SlidingCounterLimiter::with_clock(
                SlidingCounterOptions::new(2, ns(100)),
                clock.clone(),
            )
            .unwrap(),
        );
        c.try_acquire(2).unwrap();
        let mc = clock.clone();
        let mover = thread::spawn(move || mc.0.advance(ns(150)));
        let spawn = |c: &Arc<SlidingCounterLimiter<RecordingClock>>| {
            let c = c.clone();
            thread::spawn(move || {
                RecordingClock::readings();
                let ok = c.try_acquire(1).is_ok();
                (ok, RecordingClock::readings()[0])
            })
        };
        let (a, b) = (spawn(&c), spawn(&c));
        let (ra, sa) = a.join().unwrap();
        let (rb, sb) = b.join().unwrap();
        mover.join().unwrap();
        assert!(!(ra && rb), "the estimate would be 3 > 2");
        for (ok, seen, other) in [(ra, sa, rb), (rb, sb, ra)] {
            if ok {
                assert_eq!(seen, 150);
            } else if seen == 150 {
                assert!(other);
            }
        }
    });
}
