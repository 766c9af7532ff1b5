//! loom models of `FixedWindowLimiter`: take, window reset and close on the 128-bit word, with
//! the clock moved by another thread.
//!
//! Every limiter here admits 2 permits per 10 ns window. The clock is a [`RecordingClock`], so
//! each racing thread knows the instant its decision was made on (its first clock reading). A
//! rejection's RetryAfter is computed after the decision from a fresh reading, so it is checked
//! against the waits that are each right at some moment of the race: 10 ns (at 0 ns, window 1
//! starts at 10 ns), 5 ns (at 15 ns, window 1 is used up, window 2 starts at 20 ns), 20 ns (read
//! 0 ns, but the word had been moved to window 1 and used up: a stale reading counts as no time
//! passing), and the 1 ns floor (room had appeared by the time the wait was computed).
#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use tollgate::{FixedWindowLimiter, FixedWindowOptions, Instant, Limiter, Rejection, Replenishing};
use tollgate_loom_tests::{assert_closed, assert_exhausted, check, ns, RecordingClock};

type Window = FixedWindowLimiter<RecordingClock>;

fn window(clock: &RecordingClock) -> Arc<Window> {
    let opts = FixedWindowOptions::new(2, ns(10));
    Arc::new(FixedWindowLimiter::with_clock(opts, clock.clone()).unwrap())
}

fn take(l: &Window, n: u32) -> Result<u32, Rejection> {
    l.try_acquire(n).map(|lease| {
        assert_eq!(lease.permits(), n);
        assert!(
            !lease.returns_permits(),
            "a fixed window lease returns nothing"
        );
        n
    })
}

/// A racing `try_acquire(n)`: its result, and the instant its decision was made on.
fn spawn_take(l: &Arc<Window>, n: u32) -> thread::JoinHandle<(Result<u32, Rejection>, u64)> {
    let l = l.clone();
    thread::spawn(move || {
        RecordingClock::readings();
        let r = take(&l, n);
        let seen = RecordingClock::readings()[0];
        (r, seen)
    })
}

/// Asserts `e` is `Exhausted` with one of `waits` (in ns).
#[track_caller]
fn assert_refused(e: &Rejection, waits: &[u64]) {
    let waited = e.retry_after().expect("a refusal carries a RetryAfter");
    assert!(
        waits.iter().any(|w| ns(*w) == waited),
        "{e:?} (expected one of {waits:?} ns)"
    );
    assert_exhausted(e, waited);
}

/// One permit left in the window, two `try_acquire(1)`: exactly one wins; the loser waits for
/// the next window (RetryAfter 10 ns).
#[test]
fn one_permit_left_exactly_one_wins() {
    check(|| {
        let clock = RecordingClock::new();
        let l = window(&clock);
        take(&l, 1).unwrap();
        let (a, b) = (spawn_take(&l, 1), spawn_take(&l, 1));
        let ((ra, _), (rb, _)) = (a.join().unwrap(), b.join().unwrap());
        assert!(
            ra.is_ok() != rb.is_ok(),
            "over- or under-admitted: {ra:?} {rb:?}"
        );
        for r in [&ra, &rb] {
            if let Err(e) = r {
                assert_exhausted(e, ns(10));
            }
        }
        assert_eq!(l.available_permits(), 0);
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (2, 1));
    });
}

/// A fresh window of 2, two `try_acquire(1)`: both win; a third request waits for the next
/// window.
#[test]
fn two_permits_left_both_win() {
    check(|| {
        let clock = RecordingClock::new();
        let l = window(&clock);
        let (a, b) = (spawn_take(&l, 1), spawn_take(&l, 1));
        assert_eq!((a.join().unwrap().0, b.join().unwrap().0), (Ok(1), Ok(1)));
        assert_eq!(l.available_permits(), 0);
        assert_exhausted(&take(&l, 1).unwrap_err(), ns(10));
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (2, 1));
    });
}

/// One permit left in window 0; one thread moves the clock to 15 ns (window 1) while thread A
/// asks for 2 permits and thread B for 1.
///
/// - A can only be granted on a decision made in window 1 (window 0 has 1 left).
/// - B is never refused unless A took all of window 1 first; A, decided at 15 ns, is refused
///   only if B took a permit of window 1 first: no under-admission.
/// - From the final state: the permits taken in window 1 are 2 minus what is left; those taken
///   in window 0 are the rest; neither window admits more than its limit.
/// - Window 2 (20 ns) brings all 2 back, and not earlier (19 ns).
#[test]
fn acquire_races_window_reset() {
    check(|| {
        let clock = RecordingClock::new();
        let l = window(&clock);
        take(&l, 1).unwrap();
        let c = clock.clone();
        let ticker = thread::spawn(move || c.0.advance(ns(15)));
        let (a, b) = (spawn_take(&l, 2), spawn_take(&l, 1));
        ticker.join().unwrap();
        let ((ra, seen_a), (rb, _)) = (a.join().unwrap(), b.join().unwrap());
        match &ra {
            Ok(_) => assert_eq!(
                seen_a, 15,
                "2 permits granted in window 0, where 1 was left"
            ),
            Err(e) => {
                assert_refused(e, &[1, 5, 10, 20]);
                if seen_a == 15 {
                    assert_eq!(rb, Ok(1), "A was refused in window 1, and B took nothing");
                }
            }
        }
        if let Err(e) = &rb {
            // 10: B read 0 ns but A's take already moved the state to window 1; the wait
            // counts from window 1's start (real time is past it), not from B's stale reading.
            assert_refused(e, &[1, 5, 10, 20]);
            assert_eq!(ra, Ok(2), "B was refused, and A took nothing");
        }
        let taken = ra.unwrap_or(0) + rb.unwrap_or(0);
        let left = l.available_permits();
        assert!(left <= 2);
        let in_window_1 = 2 - left as u32;
        assert!(taken >= in_window_1, "window 1 counts permits nobody took");
        let in_window_0 = 1 + taken - in_window_1; // with the model thread's permit
        assert!(in_window_0 <= 2, "window 0 admitted {in_window_0} of 2");
        if ra.is_ok() {
            assert!(in_window_1 >= 2, "A's 2 permits must count in window 1");
        }
        let s = l.statistics();
        let wins = u64::from(ra.is_ok()) + u64::from(rb.is_ok());
        assert_eq!((s.total_successful, s.total_failed), (1 + wins, 2 - wins));
        clock.0.set(Instant::from_nanos(19));
        assert_eq!(l.available_permits(), left);
        clock.0.set(Instant::from_nanos(20));
        assert_eq!(l.available_permits(), 2);
        assert_eq!(l.replenish(), 2);
    });
}

/// `close()` races `try_acquire(1)`: the acquire succeeds or is `Closed`; after `close()`
/// returns every acquire is `Closed`, in this window and the next; the statistics add up.
#[test]
fn close_races_acquire() {
    check(|| {
        let clock = RecordingClock::new();
        let l = window(&clock);
        let l1 = l.clone();
        let closer = thread::spawn(move || {
            l1.close();
            assert_closed(&take(&l1, 1).unwrap_err());
        });
        let a = spawn_take(&l, 1);
        closer.join().unwrap();
        let (ra, _) = a.join().unwrap();
        if let Err(e) = &ra {
            assert_closed(e);
        }
        let got = u64::from(ra.is_ok());
        assert!(l.is_closed());
        assert_closed(&take(&l, 1).unwrap_err());
        assert_eq!(l.available_permits(), 2 - got);
        clock.0.set(Instant::from_nanos(10));
        assert_closed(&take(&l, 1).unwrap_err());
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (got, 4 - got));
    });
}
