//! loom models of `SlidingLogLimiter`: racing takes on the locked ring, and close.
#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use tollgate::{Limiter, Reason, SlidingLogLimiter, SlidingLogOptions};
use tollgate_loom_tests::{check, ns, RecordingClock};

type Log = SlidingLogLimiter<RecordingClock, 2>;

/// Limit 2 with one entry: two racing takes, exactly one wins, and the ring holds two entries.
#[test]
fn one_left_exactly_one_wins() {
    check(|| {
        let clock = RecordingClock::new();
        let l: Arc<Log> = Arc::new(
            SlidingLogLimiter::with_capacity(SlidingLogOptions::new(2, ns(100)), clock.clone())
                .unwrap(),
        );
        l.try_acquire(1).unwrap();
        let (a, b) = (l.clone(), l.clone());
        let ta = thread::spawn(move || a.try_acquire(1).is_ok());
        let tb = thread::spawn(move || b.try_acquire(1).is_ok());
        assert!(ta.join().unwrap() != tb.join().unwrap());
        assert_eq!(l.available_permits(), 0);
        clock.0.advance(ns(100));
        assert_eq!(l.available_permits(), 2);
    });
}

/// `close` races a take: admitted before the close, or refused as closed; never after.
#[test]
fn close_races_take() {
    check(|| {
        let clock = RecordingClock::new();
        let l: Arc<Log> = Arc::new(
            SlidingLogLimiter::with_capacity(SlidingLogOptions::new(2, ns(100)), clock.clone())
                .unwrap(),
        );
        let a = l.clone();
        let t = thread::spawn(move || a.try_acquire(1).map(|_| ()).map_err(|e| e.reason()));
        l.close();
        let r = t.join().unwrap();
        assert!(r.is_ok() || r == Err(Reason::Closed));
        assert_eq!(l.try_acquire(1).unwrap_err().reason(), Reason::Closed);
    });
}
