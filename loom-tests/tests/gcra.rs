//! loom models of `GcraLimiter`: the 64-bit theoretical-arrival-time word's take, racing takes,
//! the clock moved by another thread, close, and a queued waiter served by time.
//!
//! Every limiter here gives one permit back per 10 ns.
#![cfg(loom)]

use std::sync::Arc;

use loom::future::block_on;
use loom::thread;
use tollgate::{GcraLimiter, GcraOptions, Limiter, QueueOrder, Rejection, Replenishing};
use tollgate_loom_tests::{assert_closed, assert_exhausted, check, ns, RecordingClock};

type Gcra = GcraLimiter<RecordingClock>;

fn gcra(burst: u32, clock: &RecordingClock) -> Arc<Gcra> {
    let opts = GcraOptions::with_period(ns(10)).with_burst(burst);
    Arc::new(GcraLimiter::with_clock(opts, clock.clone()).unwrap())
}

fn spawn_take(l: &Arc<Gcra>, n: u32) -> thread::JoinHandle<(Result<u32, Rejection>, u64)> {
    let l = l.clone();
    thread::spawn(move || {
        RecordingClock::readings();
        let r = l.try_acquire(n).map(|lease| lease.permits());
        (r, RecordingClock::readings()[0])
    })
}

/// Burst 2 with one permit left, two racing `try_acquire(1)`: exactly one wins; the loser's
/// RetryAfter is exactly one interval.
#[test]
fn one_permit_left_exactly_one_wins() {
    check(|| {
        let clock = RecordingClock::new();
        let l = gcra(2, &clock);
        l.try_acquire(1).unwrap();
        let (a, b) = (spawn_take(&l, 1), spawn_take(&l, 1));
        let ((ra, _), (rb, _)) = (a.join().unwrap(), b.join().unwrap());
        assert!(ra.is_ok() != rb.is_ok(), "{ra:?} {rb:?}");
        for r in [&ra, &rb] {
            if let Err(e) = r {
                assert_exhausted(e, ns(10));
            }
        }
        let s = l.statistics();
        assert_eq!(
            (s.total_successful, s.total_failed, s.available_permits),
            (2, 1, 0)
        );
    });
}

/// Burst 3, two racing `try_acquire(1)` and `try_acquire(2)` on a full limiter: both fit
/// (1 + 2 = 3) in either order, and nothing is left.
#[test]
fn racing_takes_that_fit_both_win() {
    check(|| {
        let clock = RecordingClock::new();
        let l = gcra(3, &clock);
        let (a, b) = (spawn_take(&l, 1), spawn_take(&l, 2));
        assert_eq!((a.join().unwrap().0, b.join().unwrap().0), (Ok(1), Ok(2)));
        assert_eq!(l.available_permits(), 0);
    });
}

/// An exhausted burst of 1; another thread moves the clock 0 → 15 ns (one permit back) while
/// two threads take one each: at most one is admitted, only on a decision made at 15 ns, and a
/// decision at 15 ns is refused only if the other took the permit.
#[test]
fn takes_race_the_clock() {
    check(|| {
        let clock = RecordingClock::new();
        let l = gcra(1, &clock);
        l.try_acquire(1).unwrap();
        let c = clock.clone();
        let mover = thread::spawn(move || c.0.advance(ns(15)));
        let (a, b) = (spawn_take(&l, 1), spawn_take(&l, 1));
        let (ra, sa) = a.join().unwrap();
        let (rb, sb) = b.join().unwrap();
        mover.join().unwrap();
        let wins = [&ra, &rb].iter().filter(|r| r.is_ok()).count();
        assert!(wins <= 1, "one permit came back, {wins} admitted");
        for (r, seen, other) in [(&ra, sa, &rb), (&rb, sb, &ra)] {
            match r {
                Ok(_) => assert_eq!(seen, 15),
                Err(e) if seen == 15 => {
                    assert!(
                        other.is_ok(),
                        "refused at 15 ns with nobody else admitted: {e:?}"
                    )
                }
                // Read at 0 ns: 10 ns, or 25 ns if the other took the permit at 15 ns first.
                Err(e) => assert!(
                    [Some(ns(10)), Some(ns(25))].contains(&e.retry_after()),
                    "{e:?}"
                ),
            }
        }
    });
}

/// `close` races a take: the take is either admitted before the close or refused as closed.
#[test]
fn close_races_take() {
    check(|| {
        let clock = RecordingClock::new();
        let l = gcra(1, &clock);
        let a = spawn_take(&l, 1);
        l.close();
        let (r, _) = a.join().unwrap();
        if let Err(e) = &r {
            assert_closed(e);
        }
        assert_closed(&l.try_acquire(1).unwrap_err());
    });
}

/// A waiter queues while another thread moves the clock to its slot and calls `replenish`: it
/// is always granted (no lost wake-up: `block_on` would deadlock), exactly once.
#[test]
fn waiter_served_by_time() {
    check(|| {
        let clock = RecordingClock::new();
        let opts = GcraOptions::with_period(ns(10)).with_queue(1, QueueOrder::OldestFirst);
        let l = Arc::new(GcraLimiter::with_clock(opts, clock.clone()).unwrap());
        l.try_acquire(1).unwrap();
        let l2 = l.clone();
        let waiter = thread::spawn(move || block_on(l2.acquire(1)).map(|lease| lease.permits()));
        clock.0.advance(ns(10));
        l.replenish();
        assert_eq!(waiter.join().unwrap(), Ok(1));
        let s = l.statistics();
        assert_eq!(
            (s.total_successful, s.queued_permits, s.available_permits),
            (2, 0, 0)
        );
    });
}

/// `reconfigure` from (`unit`, burst 3) to (2 `unit`, burst 1) races `try_acquire(2)` on a
/// full limiter. The take decides on one consistent pair of parameters: before the change it
/// is granted (and then the new burst of 1 has no room until 2 `unit` have passed: the debt of
/// 2 `unit` plus one new interval, less the window); after it, it exceeds the new burst. A torn
/// read (the new interval with the old burst, or the reverse) would grant it after the change,
/// or leave a different debt.
fn reconfigure_races_a_take(unit: u64) {
    check(move || {
        let clock = RecordingClock::new();
        let opts = GcraOptions::with_period(ns(unit)).with_burst(3);
        let l = Arc::new(GcraLimiter::with_clock(opts, clock.clone()).unwrap());
        let l1 = l.clone();
        let changer = thread::spawn(move || {
            let opts = GcraOptions::with_period(ns(2 * unit)).with_burst(1);
            l1.reconfigure(opts).unwrap();
            assert_eq!(l1.options(), opts);
        });
        let l2 = l.clone();
        // (Not `spawn_take`: a request over the new burst is refused before any clock reading.)
        let a = thread::spawn(move || l2.try_acquire(2).map(|lease| lease.permits()))
            .join()
            .unwrap();
        changer.join().unwrap();
        match a {
            Ok(n) => {
                assert_eq!(n, 2);
                assert_eq!(l.available_permits(), 0);
                assert_exhausted(&l.try_acquire(1).unwrap_err(), ns(2 * unit));
            }
            Err(e) => {
                assert_eq!(e.reason(), tollgate::Reason::ExceedsLimit, "{e:?}");
                assert_eq!(l.available_permits(), 1);
            }
        }
    });
}

/// Intervals under 2^31 ns: both parameters in one word.
#[test]
fn reconfigure_races_a_take_in_one_word() {
    reconfigure_races_a_take(10);
}

/// Slow intervals with a small burst: the word's other form.
#[test]
fn reconfigure_races_a_take_in_the_slow_form() {
    reconfigure_races_a_take(1 << 33);
}

/// Intervals of 2^47 ns and more: the parameters under the sequence lock.
#[test]
fn reconfigure_races_a_take_under_the_sequence_lock() {
    reconfigure_races_a_take(1 << 48);
}
