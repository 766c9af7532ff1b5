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

/// `reconfigure` lowering the limit from 3 to 1 races `try_acquire(2)` on an empty counter:
/// the take decides on one reading of the limit. Granted before the change (2 counted, then
/// nothing fits under the new limit), or refused as exceeding the new limit after it.
#[test]
fn reconfigure_races_a_take() {
    check(|| {
        let clock = RecordingClock::new();
        let c = Arc::new(
            SlidingCounterLimiter::with_clock(
                SlidingCounterOptions::new(3, ns(100)),
                clock.clone(),
            )
            .unwrap(),
        );
        let c1 = c.clone();
        let changer = thread::spawn(move || {
            c1.reconfigure(SlidingCounterOptions::new(1, ns(100)))
                .unwrap();
        });
        let c2 = c.clone();
        let taker = thread::spawn(move || c2.try_acquire(2).map(|l| l.permits()));
        changer.join().unwrap();
        match taker.join().unwrap() {
            Ok(n) => {
                assert_eq!(n, 2);
                assert_eq!(c.available_permits(), 0);
                assert!(c.try_acquire(1).is_err());
            }
            Err(e) => {
                assert_eq!(e.reason(), tollgate::Reason::ExceedsLimit, "{e:?}");
                assert_eq!(c.available_permits(), 1);
            }
        }
        assert_eq!(c.options().permit_limit, 1);
    });
}
