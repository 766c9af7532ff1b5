//! loom models of `TokenBucketLimiter`: the 128-bit word's take (with lazy refill), replenish and
//! close transitions, with the clock moved by another thread.
//!
//! Every bucket here refills 1 token per 10 ns period. The clock is a [`RecordingClock`], so each
//! racing thread knows the instant its decision was made on (its first clock reading). A
//! rejection's RetryAfter is computed after the decision, from a fresh reading of the clock and
//! the word, so it is only checked against the set of waits that are each right for some
//! moment of the race ("waiting that long is enough"): 10 ns (at 0 ns, the refill comes at
//! 10 ns), 5 ns (at 15 ns, the refill of 10 ns is taken, the next comes at 20 ns), 20 ns (read
//! 0 ns, but the word had been moved to period 1 and its token taken: a stale reading counts as
//! no time passing), and the 1 ns floor (the token had arrived by the time the wait was computed).
#![cfg(loom)]

use std::sync::Arc;

use loom::future::block_on;
use loom::thread;
use tollgate::{
    Instant, Limiter, QueueOrder, Rejection, Replenishing, TokenBucketLimiter, TokenBucketOptions,
};
use tollgate_loom_tests::{assert_closed, assert_exhausted, check, ns, RecordingClock};

type Bucket = TokenBucketLimiter<RecordingClock>;

fn bucket(limit: u32, clock: &RecordingClock) -> Arc<Bucket> {
    let opts = TokenBucketOptions::new(limit, 1, ns(10));
    Arc::new(TokenBucketLimiter::with_clock(opts, clock.clone()).unwrap())
}

fn take(l: &Bucket, n: u32) -> Result<u32, Rejection> {
    l.try_acquire(n).map(|lease| {
        assert_eq!(lease.permits(), n);
        assert!(
            !lease.returns_permits(),
            "a token bucket lease returns nothing"
        );
        n
    })
}

/// A racing `try_acquire(n)`: its result, and the instant its decision was made on.
fn spawn_take(l: &Arc<Bucket>, n: u32) -> thread::JoinHandle<(Result<u32, Rejection>, u64)> {
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

/// Bucket of 2 with 1 token left, two `try_acquire(1)` at the same instant: exactly one wins;
/// the loser is `Exhausted` with a RetryAfter of exactly one period.
#[test]
fn one_token_left_exactly_one_wins() {
    check(|| {
        let clock = RecordingClock::new();
        let l = bucket(2, &clock);
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
        assert_eq!(
            (s.total_successful, s.total_failed, s.available_permits),
            (2, 1, 0)
        );
    });
}

/// Bucket of 3 with 2 tokens left, two `try_acquire(1)`: both win, nothing is left.
#[test]
fn two_tokens_left_both_win() {
    check(|| {
        let clock = RecordingClock::new();
        let l = bucket(3, &clock);
        take(&l, 1).unwrap();
        let (a, b) = (spawn_take(&l, 1), spawn_take(&l, 1));
        assert_eq!((a.join().unwrap().0, b.join().unwrap().0), (Ok(1), Ok(1)));
        assert_eq!(l.available_permits(), 0);
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (3, 0));
    });
}

/// An empty bucket of 1; one thread moves the clock from 0 to 15 ns (one refill) while two
/// threads each `try_acquire(1)`.
///
/// - At most one token is admitted (one refill, never two), and only to a decision made at
///   15 ns.
/// - A decision made at 15 ns is refused only if the other thread took the refilled token: no
///   under-admission.
/// - Afterwards (clock at 15 ns) the bucket holds exactly the token nobody took; the next refill
///   comes at 20 ns, not earlier; the statistics count every decision.
#[test]
fn acquire_races_refill() {
    check(|| {
        let clock = RecordingClock::new();
        let l = bucket(1, &clock);
        take(&l, 1).unwrap();
        let c = clock.clone();
        let ticker = thread::spawn(move || c.0.advance(ns(15)));
        let (a, b) = (spawn_take(&l, 1), spawn_take(&l, 1));
        ticker.join().unwrap();
        let (ra, rb) = (a.join().unwrap(), b.join().unwrap());
        let wins = [&ra, &rb].iter().filter(|(r, _)| r.is_ok()).count() as u64;
        assert!(wins <= 1, "one refill admitted two tokens: {ra:?} {rb:?}");
        for (r, seen) in [&ra, &rb] {
            match r {
                Ok(_) => assert_eq!(*seen, 15, "a token granted before the refill"),
                Err(e) => {
                    assert_refused(e, &[1, 5, 10, 20]);
                    if *seen == 15 {
                        assert_eq!(wins, 1, "refused after the refill, and nobody took it");
                    }
                }
            }
        }
        assert_eq!(l.available_permits(), 1 - wins);
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (1 + wins, 2 - wins));
        clock.0.set(Instant::from_nanos(19));
        assert_eq!(l.available_permits(), 1 - wins);
        clock.0.set(Instant::from_nanos(20));
        assert_eq!(l.available_permits(), 1);
    });
}

/// An empty bucket of 2; one thread moves the clock 0 -> 10 -> 20 ns (two refills of 1) while
/// thread A asks for 2 tokens and thread B for 1. Two refills never admit more than 2 tokens,
/// a grant is never made on fewer tokens than the instant it saw allows, and none is lost: at
/// 20 ns the bucket holds exactly 2 minus what was taken (it cannot have overflowed: it never
/// held 2 before 20 ns). Every refusal is `Exhausted` with a RetryAfter of at most 30 ns.
#[test]
fn acquires_race_two_refills() {
    check(|| {
        let clock = RecordingClock::new();
        let l = bucket(2, &clock);
        take(&l, 2).unwrap();
        let c = clock.clone();
        let ticker = thread::spawn(move || {
            c.0.advance(ns(10));
            c.0.advance(ns(10));
        });
        let (a, b) = (spawn_take(&l, 2), spawn_take(&l, 1));
        ticker.join().unwrap();
        let (ra, rb) = (a.join().unwrap(), b.join().unwrap());
        for ((r, seen), n) in [(&ra, 2), (&rb, 1)] {
            match r {
                Ok(_) => assert!(*seen >= 10 * n, "{n} tokens granted at {seen} ns"),
                Err(e) => assert_refused(e, &[1, 5, 10, 15, 20, 25, 30]),
            }
        }
        let taken = ra.0.unwrap_or(0) + rb.0.unwrap_or(0);
        assert!(
            taken <= 2,
            "two refills admitted {taken} tokens: {ra:?} {rb:?}"
        );
        assert_eq!(l.available_permits(), u64::from(2 - taken));
        let wins = u64::from(ra.0.is_ok()) + u64::from(rb.0.is_ok());
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (1 + wins, 2 - wins));
    });
}

/// `replenish()` (the state written as of now) races `try_acquire(1)` and the clock moving from
/// 0 to 15 ns over an empty bucket of 1. Replenishing never consumes: the acquire is refused
/// only when decided at 0 ns; `replenish` reports 0 or the one token; at the end the bucket
/// holds exactly the token not taken.
#[test]
fn replenish_races_acquire_and_refill() {
    check(|| {
        let clock = RecordingClock::new();
        let l = bucket(1, &clock);
        take(&l, 1).unwrap();
        let c = clock.clone();
        let ticker = thread::spawn(move || c.0.advance(ns(15)));
        let l1 = l.clone();
        let replenisher = thread::spawn(move || l1.replenish());
        let a = spawn_take(&l, 1);
        ticker.join().unwrap();
        let replenished = replenisher.join().unwrap();
        let (ra, seen) = a.join().unwrap();
        if let Err(e) = &ra {
            assert_eq!(seen, 0, "refused at 15 ns with the refilled token there");
            assert_refused(e, &[1, 10]);
        }
        let got = u64::from(ra.is_ok());
        assert!(replenished <= 1);
        assert_eq!(l.available_permits(), 1 - got);
        assert_eq!(l.replenish(), 1 - got);
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (1 + got, 1 - got));
    });
}

/// `close()` races `try_acquire(1)`: the acquire succeeds or is `Closed` (never `Exhausted`:
/// tokens are there); after `close()` returns every acquire is `Closed`; the statistics add up.
#[test]
fn close_races_acquire() {
    check(|| {
        let clock = RecordingClock::new();
        let l = bucket(2, &clock);
        let l1 = l.clone();
        let closer = thread::spawn(move || {
            l1.close();
            assert!(l1.is_closed());
            assert_closed(&take(&l1, 1).unwrap_err());
        });
        let a = spawn_take(&l, 1);
        closer.join().unwrap();
        let (ra, _) = a.join().unwrap();
        if let Err(e) = &ra {
            assert_closed(e);
        }
        let got = u64::from(ra.is_ok());
        assert_closed(&take(&l, 1).unwrap_err());
        assert!(l.is_closed());
        assert_eq!(l.available_permits(), 2 - got);
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (got, 3 - got));
    });
}

/// `reconfigure` lowering the limit from 3 to 1 races `try_acquire(2)` on a full bucket: the
/// acquire either wins before the change (2 of the 3 tokens, then 1 left, within the new limit)
/// or is refused as exceeding the new limit — never granted from tokens the new limit dropped,
/// and never `Exhausted`. Afterwards the bucket holds at most the new limit and reports it.
#[test]
fn reconfigure_races_acquire() {
    check(|| {
        let clock = RecordingClock::new();
        let l = bucket(3, &clock);
        let l1 = l.clone();
        let changer = thread::spawn(move || {
            l1.reconfigure(TokenBucketOptions::new(1, 1, ns(10)))
                .unwrap();
            assert_eq!(l1.options().token_limit, 1);
            // From here on no request above the new limit is granted.
            let e = take(&l1, 2).unwrap_err();
            assert_eq!(e.reason(), tollgate::Reason::ExceedsLimit);
        });
        // Not `spawn_take`: a request refused as exceeding the limit reads no clock.
        let l2 = l.clone();
        let a = thread::spawn(move || take(&l2, 2));
        changer.join().unwrap();
        let ra = a.join().unwrap();
        match &ra {
            Ok(n) => assert_eq!(*n, 2),
            Err(e) => assert_eq!(e.reason(), tollgate::Reason::ExceedsLimit, "{e:?}"),
        }
        assert_eq!(l.available_permits(), 1);
        let s = l.statistics();
        let got = u64::from(ra.is_ok());
        assert_eq!((s.total_successful, s.total_failed), (got, 2 - got));
    });
}

/// A waiter queues on an empty bucket while another thread moves the clock to the next refill
/// and calls `replenish`: the waiter is always granted (no lost wake-up: `block_on` would
/// deadlock), exactly once. `replenish` skips the queue lock when the state word carries no
/// waiter flag; this is the race that skip must not lose: the waiter decides (short) on a clock
/// reading from before the refill, and sets the flag after `replenish` read the word.
#[test]
fn waiter_served_by_time() {
    check(|| {
        let clock = RecordingClock::new();
        let opts = TokenBucketOptions::new(1, 1, ns(10)).with_queue(1, QueueOrder::OldestFirst);
        let l = Arc::new(TokenBucketLimiter::with_clock(opts, clock.clone()).unwrap());
        take(&l, 1).unwrap();
        let l2 = l.clone();
        let waiter = thread::spawn(move || block_on(l2.acquire(1)).map(|lease| lease.permits()));
        clock.0.advance(ns(10));
        let replenished = l.replenish();
        assert_eq!(waiter.join().unwrap(), Ok(1));
        assert!(replenished <= 1);
        let s = l.statistics();
        assert_eq!(
            (s.total_successful, s.queued_permits, s.available_permits),
            (2, 0, 0)
        );
    });
}
