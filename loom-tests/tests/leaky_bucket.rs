//! loom models of the leaky buckets: the meter's racing pours, and the shaper's queue — two
//! waiters and the clock, served one departure per interval, never two at once.
#![cfg(loom)]

use std::sync::Arc;

use loom::future::block_on;
use loom::thread;
use tollgate::{
    LeakyBucketMeter, LeakyBucketOptions, LeakyBucketShaper, Limiter, QueueOrder, Replenishing,
    ShaperOptions,
};
use tollgate_loom_tests::{assert_exhausted, check, ns, RecordingClock};

/// A meter of capacity 3 holding 1: racing pours of 1 and 2 both fit; pours of 2 and 2 do not —
/// exactly one wins and the other waits exactly the time two units take to drain... minus the
/// level's own drain (here none: the clock stands still), i.e. 20 ns.
#[test]
fn meter_racing_pours() {
    check(|| {
        let clock = RecordingClock::new();
        let m = Arc::new(
            LeakyBucketMeter::with_clock(LeakyBucketOptions::new(3, 1, ns(10)), clock.clone())
                .unwrap(),
        );
        m.try_acquire(1).unwrap();
        let (a, b) = (m.clone(), m.clone());
        let ta = thread::spawn(move || a.try_acquire(2).map(|l| l.permits()));
        let tb = thread::spawn(move || b.try_acquire(2).map(|l| l.permits()));
        let (ra, rb) = (ta.join().unwrap(), tb.join().unwrap());
        assert!(ra.is_ok() != rb.is_ok(), "{ra:?} {rb:?}");
        for r in [&ra, &rb] {
            if let Err(e) = r {
                assert_exhausted(e, ns(20));
            }
        }
        assert_eq!(m.available_permits(), 0);
    });
}

/// A shaper at one departure per 10 ns, the first already gone; two waiters queue (the main
/// thread waits until both are in the queue), then the clock moves to 10 ns and the queue is
/// served: exactly one departs — never two in one slot — and at 20 ns the other. No lost
/// wake-up (`block_on` would deadlock), no permit counted twice.
#[test]
#[ignore = "unbounded: the yield loop waiting for both waiters did not finish in 60 s under LOOM_MAX_PREEMPTIONS=2; needs a bounded rewrite"]
fn shaper_one_departure_per_slot() {
    check(|| {
        let clock = RecordingClock::new();
        let opts = ShaperOptions::per(ns(10), 1).with_queue(2, QueueOrder::OldestFirst);
        let s = Arc::new(LeakyBucketShaper::with_clock(opts, clock.clone()).unwrap());
        s.try_acquire(1).unwrap();
        let (a, b) = (s.clone(), s.clone());
        let wa = thread::spawn(move || block_on(a.acquire(1)).map(|l| l.permits()));
        let wb = thread::spawn(move || block_on(b.acquire(1)).map(|l| l.permits()));
        while s.statistics().queued_permits < 2 {
            thread::yield_now();
        }
        clock.0.advance(ns(10));
        s.replenish();
        assert_eq!(s.statistics().queued_permits, 1, "one departure per slot");
        assert!(s.try_acquire(1).is_err(), "no barging past the queue");
        clock.0.advance(ns(10));
        s.replenish();
        assert_eq!(wa.join().unwrap(), Ok(1));
        assert_eq!(wb.join().unwrap(), Ok(1));
        let st = s.statistics();
        assert_eq!(
            (st.total_successful, st.total_failed, st.queued_permits),
            (3, 1, 0)
        );
        // The last departure took the 20 ns slot: nothing departs before 30 ns.
        assert!(s.try_acquire(1).is_err());
    });
}
