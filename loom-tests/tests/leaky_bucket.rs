//! loom models of the leaky buckets: the meter's racing pours, and the shaper's queue — two
//! waiters served one departure per interval, never two at once, by racing servers.
#![cfg(loom)]

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

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
        let _ = m.try_acquire(1).unwrap();
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

/// A shaper at one departure per 10 ns, the first already gone; two waiters queue (polled once
/// each by the main thread, so both are queued before anything races). At 10 ns a `replenish`
/// and a barging `try_acquire` race on two threads while the main thread polls the head
/// waiter: exactly one departs — never two in one slot, and the `try_acquire` never barges past
/// the queue — and at 20 ns the other. No permit counted twice, every outcome counted once.
///
/// (An earlier version spawned the waiters with `block_on` and had the main thread spin with
/// `yield_now` until both were queued: under `LOOM_MAX_PREEMPTIONS=2` it did not finish in 60 s,
/// the spin multiplying the interleavings of three threads through the queue's lock. Polling the
/// futures by hand makes the queued state deterministic and the model bounded; the race that
/// matters — serving the queue at a slot, from several places at once — is what still runs
/// concurrently. The futures are polled with a no-op waker, so this model does not check
/// wake-ups; the shaper shares GCRA's core and queue, whose wake-up on a serve racing an
/// enqueue is `gcra.rs`'s `waiter_served_by_time`, with `block_on`.)
#[test]
fn shaper_one_departure_per_slot() {
    check(|| {
        let clock = RecordingClock::new();
        let opts = ShaperOptions::per(ns(10), 1).with_queue(2, QueueOrder::OldestFirst);
        let s = Arc::new(LeakyBucketShaper::with_clock(opts, clock.clone()).unwrap());
        let _ = s.try_acquire(1).unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        let mut first = pin!(s.acquire(1));
        let mut second = pin!(s.acquire(1));
        assert!(first.as_mut().poll(&mut cx).is_pending());
        assert!(second.as_mut().poll(&mut cx).is_pending());
        assert_eq!(s.statistics().queued_permits, 2);

        clock.0.advance(ns(10));
        let (server, barger) = (s.clone(), s.clone());
        let serve = thread::spawn(move || {
            server.replenish();
        });
        let barge = thread::spawn(move || barger.try_acquire(1).map(|l| l.permits()));
        let polled = first.as_mut().poll(&mut cx);
        serve.join().unwrap();
        let barged = barge.join().unwrap();
        assert!(barged.is_err(), "no barging past the queue: {barged:?}");
        // The replenish ran at 10 ns, so the head has departed by now, whoever served it.
        let head = match polled {
            Poll::Ready(r) => r,
            Poll::Pending => match first.as_mut().poll(&mut cx) {
                Poll::Ready(r) => r,
                Poll::Pending => panic!("the head waiter was not served at its slot"),
            },
        };
        assert_eq!(head.map(|l| l.permits()), Ok(1));
        assert!(
            second.as_mut().poll(&mut cx).is_pending(),
            "two departures in one slot"
        );
        assert_eq!(s.statistics().queued_permits, 1, "one departure per slot");

        clock.0.advance(ns(10));
        s.replenish();
        match second.as_mut().poll(&mut cx) {
            Poll::Ready(r) => assert_eq!(r.map(|l| l.permits()), Ok(1)),
            Poll::Pending => panic!("the second waiter was not served at its slot"),
        }
        let st = s.statistics();
        assert_eq!(
            (st.total_successful, st.total_failed, st.queued_permits),
            (3, 1, 0)
        );
        // The last departure took the 20 ns slot: nothing departs before 30 ns.
        assert!(s.try_acquire(1).is_err());
    });
}
