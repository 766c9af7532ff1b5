//! loom models of `replenish` on a token bucket's 64-bit word: its quick path (a plain word
//! read in its own tick or the next, brought up to date with one compare-and-swap) racing a
//! decision and another `replenish`.
//!
//! The bucket holds 2 tokens and gains 1 every 1 µs tick; a 1 µs period keeps the state in the
//! native 64-bit layout, the only one with a quick path. It is emptied at 0 ns; each thread
//! reads its own instant ([`ThreadClock`]), so that a model pins the tick every caller sees,
//! including a stale one. Whatever the interleaving, tick 1 refills exactly once: a refill
//! counted twice would leave a token nobody paid for.
#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use tollgate::{Limiter, NoQueue, Replenishing, TokenBucketLimiter, TokenBucketOptions};
use tollgate_loom_tests::{check, ns, ThreadClock};

type Bucket = TokenBucketLimiter<ThreadClock, NoQueue>;

/// An emptied bucket of 2 tokens, 1 more every 1 µs.
fn empty_bucket() -> Arc<Bucket> {
    ThreadClock::set(0);
    let opts = TokenBucketOptions::new(2, 1, ns(1_000));
    let l = Arc::new(TokenBucketLimiter::without_queue(opts, ThreadClock).unwrap());
    l.try_acquire(2).unwrap().forget();
    l
}

/// On another thread reading `at` ns: `replenish()`'s answer.
fn spawn_replenish(l: &Arc<Bucket>, at: u64) -> thread::JoinHandle<u64> {
    let l = l.clone();
    thread::spawn(move || {
        ThreadClock::set(at);
        l.replenish()
    })
}

/// Two replenishes in tick 1 race a `try_acquire(1)` in tick 1: the one token tick 1 brings
/// is granted, each replenish answers the tokens of the state it left (1 before the take, 0
/// after it), and nothing is left (a second refill of the tick would leave 1).
#[test]
fn replenishes_racing_a_take_refill_a_tick_once() {
    check(|| {
        let l = empty_bucket();
        let (a, b) = (spawn_replenish(&l, 1_000), spawn_replenish(&l, 1_999));
        ThreadClock::set(1_500);
        let taken = l.try_acquire(1).map(|lease| lease.permits());
        let (ra, rb) = (a.join().unwrap(), b.join().unwrap());
        assert_eq!(taken, Ok(1), "tick 1's token was not granted");
        assert!(ra <= 1 && rb <= 1, "replenish answered {ra}, {rb}");
        ThreadClock::set(1_999);
        assert_eq!(l.available_permits(), 0, "tick 1 refilled twice");
        ThreadClock::set(2_000);
        assert_eq!(l.replenish(), 1);
    });
}

/// A replenish in tick 1 races a decision made on a stale reading from tick 0: before the
/// refill, the bucket is empty and the request is refused with the wait to tick 1 (500 ns);
/// after it, a stale reading counts as no time passing on the refilled state, and the token is
/// granted. Either way tick 1's one token is counted once.
#[test]
fn a_stale_decision_racing_a_replenish_counts_the_refill_once() {
    check(|| {
        let l = empty_bucket();
        let r = spawn_replenish(&l, 1_000);
        ThreadClock::set(500);
        let taken = l.try_acquire(1);
        let refilled = r.join().unwrap();
        match &taken {
            Ok(lease) => assert_eq!((lease.permits(), refilled), (1, 1)),
            Err(e) => assert_eq!(e.retry_after(), Some(ns(500))),
        }
        ThreadClock::set(1_999);
        let left = if taken.is_ok() { 0 } else { 1 };
        assert_eq!(l.available_permits(), left, "tick 1 refilled {left} times");
        drop(taken);
    });
}
