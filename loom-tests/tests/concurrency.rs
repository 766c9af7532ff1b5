//! loom models of `ConcurrencyLimiter`: the native word's take, give-back and close transitions,
//! and the idle dating of both kinds of clock (eager on a cheap clock, lazy on an expensive one).
#![cfg(loom)]

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use tollgate::{
    AcquireAsync, Clock, ConcurrencyLimiter, ConcurrencyOptions, Instant, Limiter, ManualClock,
    QueueOrder, Reason, Rejection, Release,
};
use tollgate_loom_tests::{assert_closed, at, check, ns};

type Concurrency = ConcurrencyLimiter<Arc<ManualClock>>;

fn limiter(limit: u32, clock: &Arc<ManualClock>) -> Arc<Concurrency> {
    Arc::new(ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(limit), clock.clone()).unwrap())
}

/// Takes `n` permits and keeps them (the lease is forgotten; the model gives them back by hand
/// with `Release::release`), so that a thread's permits stay held until the model says so.
fn take_and_keep(l: &Concurrency, n: u32) -> Result<u32, Rejection> {
    l.try_acquire(n).map(|lease| {
        assert_eq!(lease.permits(), n);
        assert!(lease.returns_permits());
        lease.forget()
    })
}

/// `close()` on a thread of its own.
fn spawn_close(l: &Arc<Concurrency>) -> thread::JoinHandle<()> {
    let l = l.clone();
    thread::spawn(move || l.close())
}

/// A concurrency limiter's rejection: `Exhausted`, and no RetryAfter (it cannot know).
#[track_caller]
fn assert_exhausted(r: &Rejection) {
    assert_eq!(r.reason(), Reason::Exhausted, "{r:?}");
    assert_eq!(r.retry_after(), None, "{r:?}");
}

/// Runs `a` and `b` on two threads racing for what is left of a limiter of `limit` after the
/// model thread took `held`; returns both outcomes, the limiter still holding every permit
/// granted.
fn race(
    limit: u32,
    held: u32,
    a: u32,
    b: u32,
) -> (
    Arc<Concurrency>,
    Result<u32, Rejection>,
    Result<u32, Rejection>,
) {
    let clock = Arc::new(ManualClock::new());
    let l = limiter(limit, &clock);
    if held > 0 {
        take_and_keep(&l, held).unwrap();
    }
    let (l1, l2) = (l.clone(), l.clone());
    let ta = thread::spawn(move || take_and_keep(&l1, a));
    let tb = thread::spawn(move || take_and_keep(&l2, b));
    let (ra, rb) = (ta.join().unwrap(), tb.join().unwrap());
    (l, ra, rb)
}

/// One permit left, two `try_acquire(1)`: exactly one wins, the other is `Exhausted`; nothing is
/// lost or duplicated, and the statistics count every decision.
#[test]
fn one_permit_left_exactly_one_wins() {
    check(|| {
        let (l, ra, rb) = race(2, 1, 1, 1);
        let wins = [&ra, &rb].iter().filter(|r| r.is_ok()).count();
        assert_eq!(wins, 1, "over- or under-admitted: {ra:?} {rb:?}");
        for r in [&ra, &rb] {
            if let Err(e) = r {
                assert_exhausted(e);
            }
        }
        assert_eq!(l.available_permits(), 0);
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (2, 1));
        assert_eq!(s.available_permits, 0);
        l.release(1); // the model thread's permit
        l.release(1); // the winner's
        assert_eq!(l.available_permits(), 2);
    });
}

/// Two permits left, two `try_acquire(1)`: both win (no under-admission), none left.
#[test]
fn two_permits_left_both_win() {
    check(|| {
        let (l, ra, rb) = race(3, 1, 1, 1);
        assert_eq!((ra, rb), (Ok(1), Ok(1)));
        assert_eq!(l.available_permits(), 0);
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (3, 0));
        l.release(3);
        assert_eq!(l.available_permits(), 3);
    });
}

/// `try_acquire(2)` races `try_acquire(1)` for a fresh limiter of 2: exactly one wins whichever
/// goes first, and what is left is exactly the limit minus the winner's permits.
#[test]
fn unequal_requests_exactly_one_wins() {
    check(|| {
        let (l, ra, rb) = race(2, 0, 2, 1);
        let taken: u32 = [&ra, &rb].iter().filter_map(|r| r.as_ref().ok()).sum();
        assert!(
            ra.is_ok() != rb.is_ok(),
            "over- or under-admitted: {ra:?} {rb:?}"
        );
        for r in [&ra, &rb] {
            if let Err(e) = r {
                assert_exhausted(e);
            }
        }
        assert_eq!(l.available_permits(), u64::from(2 - taken));
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (1, 1));
        l.release(taken);
        assert_eq!(l.available_permits(), 2);
    });
}

/// A release (the last lease ending) races an acquire of a limiter of 1: the acquire succeeds if
/// it comes after the release and is `Exhausted` before it; the permit is never lost or
/// duplicated, the limiter is fully available (and idle) once every permit is back.
#[test]
fn acquire_races_release() {
    check(|| {
        let clock = Arc::new(ManualClock::new());
        let l = limiter(1, &clock);
        take_and_keep(&l, 1).unwrap();
        let l1 = l.clone();
        let releaser = thread::spawn(move || l1.release(1));
        let l2 = l.clone();
        let acquirer = thread::spawn(move || take_and_keep(&l2, 1));
        releaser.join().unwrap();
        let r = acquirer.join().unwrap();
        match &r {
            Ok(n) => assert_eq!(*n, 1),
            Err(e) => assert_exhausted(e),
        }
        let got = u32::from(r.is_ok());
        assert_eq!(l.available_permits(), u64::from(1 - got));
        assert_eq!(l.idle_duration().is_some(), got == 0);
        let s = l.statistics();
        assert_eq!(s.total_successful, 1 + u64::from(got));
        assert_eq!(s.total_failed, u64::from(1 - got));
        l.release(got);
        assert_eq!(l.available_permits(), 1);
        assert_eq!(l.idle_duration(), Some(ns(0)));
    });
}

/// Two threads each acquire the single permit, hold it, and drop the lease (the real `Lease`
/// drop path: give-back CAS and the idle timestamp). Never are both holding at once; the first
/// to try always wins; at the end the permit is back and the statistics add up.
#[test]
fn hold_and_drop_is_mutually_exclusive() {
    check(|| {
        let clock = Arc::new(ManualClock::new());
        let l = limiter(1, &clock);
        let holders = Arc::new(AtomicUsize::new(0));
        let worker = || {
            let (l, holders) = (l.clone(), holders.clone());
            thread::spawn(move || match l.try_acquire(1) {
                Ok(lease) => {
                    let before = holders.fetch_add(1, Ordering::SeqCst);
                    assert_eq!(before, 0, "two leases hold the only permit");
                    holders.fetch_sub(1, Ordering::SeqCst);
                    drop(lease);
                    true
                }
                Err(e) => {
                    assert_exhausted(&e);
                    false
                }
            })
        };
        let (a, b) = (worker(), worker());
        let wins = u64::from(a.join().unwrap()) + u64::from(b.join().unwrap());
        assert!(wins >= 1, "the first acquire of a free permit was refused");
        assert_eq!(l.available_permits(), 1);
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (wins, 2 - wins));
        assert!(l.idle_duration().is_some());
    });
}

/// Three threads share a limiter of 2: each acquires 1, holds it, and drops the lease. Never
/// are more than 2 holding; the first two to try always win; at the end both permits are back
/// and the statistics add up.
#[test]
fn three_holders_never_exceed_two_permits() {
    check(|| {
        let clock = Arc::new(ManualClock::new());
        let l = limiter(2, &clock);
        let holders = Arc::new(AtomicUsize::new(0));
        let worker = || {
            let (l, holders) = (l.clone(), holders.clone());
            thread::spawn(move || match l.try_acquire(1) {
                Ok(lease) => {
                    let before = holders.fetch_add(1, Ordering::SeqCst);
                    assert!(before < 2, "three leases hold a limit of two");
                    holders.fetch_sub(1, Ordering::SeqCst);
                    drop(lease);
                    true
                }
                Err(e) => {
                    assert_exhausted(&e);
                    false
                }
            })
        };
        let hs = [worker(), worker(), worker()];
        let wins: u64 = hs.into_iter().map(|h| u64::from(h.join().unwrap())).sum();
        assert!(
            wins >= 2,
            "only {wins} of three acquires won a limit of two"
        );
        assert_eq!(l.available_permits(), 2);
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (wins, 3 - wins));
    });
}

/// `close()` races the release of the only permit: the permit comes back whichever goes first
/// (closing does not swallow releases), the limiter ends closed, and acquiring is `Closed`.
#[test]
fn close_races_release() {
    check(|| {
        let clock = Arc::new(ManualClock::new());
        let l = limiter(1, &clock);
        take_and_keep(&l, 1).unwrap();
        let closer = spawn_close(&l);
        let l2 = l.clone();
        let releaser = thread::spawn(move || l2.release(1));
        closer.join().unwrap();
        releaser.join().unwrap();
        assert!(l.is_closed());
        assert_eq!(l.available_permits(), 1);
        assert_closed(&take_and_keep(&l, 1).unwrap_err());
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (1, 1));
    });
}

/// `close()` races `try_acquire(1)`. The acquire either succeeds (it came first) or is `Closed`,
/// never `Exhausted`. Once `close()` has returned, every acquire — on the closing thread at once,
/// and on the model thread after the join — is `Closed`. A lease granted before the close still
/// gives its permit back. The statistics count all four decisions.
#[test]
fn close_races_acquire() {
    check(|| {
        let clock = Arc::new(ManualClock::new());
        let l = limiter(2, &clock);
        let l1 = l.clone();
        let closer = thread::spawn(move || {
            l1.close();
            assert!(l1.is_closed());
            let after = l1.try_acquire(1).map(|lease| lease.forget());
            assert_closed(&after.unwrap_err());
        });
        let l2 = l.clone();
        let acquirer = thread::spawn(move || take_and_keep(&l2, 1));
        closer.join().unwrap();
        let r = acquirer.join().unwrap();
        if let Err(e) = &r {
            assert_closed(e);
        }
        let got = u32::from(r.is_ok());
        assert!(l.is_closed());
        assert_closed(&take_and_keep(&l, 1).unwrap_err());
        assert_eq!(l.available_permits(), u64::from(2 - got));
        let s = l.statistics();
        assert_eq!(s.total_successful, u64::from(got));
        assert_eq!(s.total_failed, 3 - u64::from(got));
        l.release(got);
        assert_eq!(l.available_permits(), 2);
    });
}

/// `close()` races a refusal: the limiter's one permit is held, so `try_acquire(1)` is refused
/// either way. The quick refusal reads the closed mark from the limit field, not from the word:
/// a call made once the limiter is seen closed must answer `Closed` even while `close()` is still
/// running (the mark is set before the word, and read after it).
#[test]
fn close_races_a_refusal() {
    check(|| {
        let clock = Arc::new(ManualClock::new());
        let l = limiter(1, &clock);
        take_and_keep(&l, 1).unwrap();
        let closer = spawn_close(&l);
        while !l.is_closed() {
            thread::yield_now();
        }
        assert_closed(&take_and_keep(&l, 1).unwrap_err());
        closer.join().unwrap();
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (1, 1));
    });
}

/// `reconfigure()` races `close()`: the reconfiguration stores the new limit, the close marks
/// the limit field as closed; neither loses the other's write. After both, the limit is the new
/// one, its raise is available, and every acquire is `Closed`.
#[test]
fn reconfigure_races_close() {
    check(|| {
        let clock = Arc::new(ManualClock::new());
        let l = limiter(1, &clock);
        let closer = spawn_close(&l);
        l.reconfigure(ConcurrencyOptions::new(2)).unwrap();
        closer.join().unwrap();
        assert!(l.is_closed());
        assert_eq!(l.options().permit_limit, 2);
        assert_eq!(l.available_permits(), 2);
        assert_closed(&take_and_keep(&l, 1).unwrap_err());
    });
}

/// `idle_duration()` races a lease that is taken at t = 10 ns, held while the clock moves to
/// 20 ns, and dropped. At no instant was the limiter idle for 20 ns: it was idle for 10 ns before
/// the acquire, in use until the drop, and idle for 0 ns after it. So the answer must be
/// `Some(10 ns)`, `None` or `Some(0)`.
///
/// This model found a bug: `idle_duration` used to read `idle_since`, then the word, then the
/// clock, while `release` wrote the word, then read the clock, then wrote `idle_since`; a reader
/// could take the old `idle_since` (0), see the word full again after the release, read the clock
/// at 20 ns and report `Some(20 ns)`. Now the stamp is written inside the transition, before the
/// CAS that makes the word idle, and the reader reads the clock, the word, then the stamp.
#[test]
fn idle_duration_races_a_lease() {
    check(|| {
        let clock = Arc::new(ManualClock::starting_at(at(0)));
        let l = limiter(1, &clock);
        clock.set(at(10));
        let (l1, c1) = (l.clone(), clock.clone());
        let user = thread::spawn(move || {
            let lease = l1.try_acquire(1).unwrap();
            c1.advance(ns(10));
            drop(lease);
        });
        let idle = l.idle_duration();
        user.join().unwrap();
        assert!(
            idle.is_none() || idle == Some(ns(10)) || idle == Some(ns(0)),
            "idle_duration reported {idle:?}, but the limiter was never idle that long"
        );
        assert_eq!(l.idle_duration(), Some(ns(0)));
    });
}

/// A manual clock that calls itself expensive, as `StdClock` does: the limiter then reads no clock
/// on a release and dates idleness when `idle_duration` first sees it.
#[derive(Clone)]
struct Expensive(Arc<ManualClock>);

impl Clock for Expensive {
    fn now(&self) -> Instant {
        self.0.now()
    }
    fn now_is_cheap(&self) -> bool {
        false
    }
}

fn lazy_limiter(limit: u32, clock: &Arc<ManualClock>) -> Arc<ConcurrencyLimiter<Expensive>> {
    let opts = ConcurrencyOptions::new(limit);
    Arc::new(ConcurrencyLimiter::with_clock(opts, Expensive(clock.clone())).unwrap())
}

/// Lazy dating: the last lease ends at 10 ns and the clock then moves to 20 ns, while another
/// thread asks `idle_duration()`. Idle at most 10 ns by then, so any answer above that
/// over-reports (the bug lazy dating must not have: a stamp read before the release). Afterwards
/// the limiter is dated, and 5 ns later reports between 5 and 15 ns.
#[test]
fn lazy_idle_duration_races_the_last_release() {
    check(|| {
        let clock = Arc::new(ManualClock::starting_at(at(0)));
        let l = lazy_limiter(1, &clock);
        l.try_acquire(1).unwrap().forget();
        clock.set(at(10));
        let (l1, c1) = (l.clone(), clock.clone());
        let releaser = thread::spawn(move || {
            l1.release(1);
            c1.advance(ns(10));
        });
        let seen = l.idle_duration();
        releaser.join().unwrap();
        assert!(
            seen.is_none() || seen <= Some(ns(10)),
            "idle_duration reported {seen:?}, but the limiter was idle at most 10 ns"
        );
        let first = l.idle_duration().unwrap();
        assert!(first <= ns(10), "{first:?}");
        clock.advance(ns(5));
        let later = l.idle_duration().unwrap();
        assert!(ns(5) <= later && later <= ns(15), "{later:?}");
    });
}

/// Lazy dating: two threads date the same idle period at once while a third takes and returns the
/// only permit. Exactly one dater writes the stamp at a time; nobody over-reports (the limiter is
/// never idle longer than the clock has run since the last release, 0 ns here, as the clock stands
/// still); and once everyone is done, a look dates whatever period is current and time counts from
/// there.
#[test]
fn lazy_dating_races_dating_and_a_lease() {
    check(|| {
        let clock = Arc::new(ManualClock::starting_at(at(7)));
        let l = lazy_limiter(1, &clock);
        drop(l.try_acquire(1).unwrap()); // idle, undated, at 7 ns
        let pollers: Vec<_> = (0..2)
            .map(|_| {
                let l = l.clone();
                thread::spawn(move || l.idle_duration())
            })
            .collect();
        let l3 = l.clone();
        let user = thread::spawn(move || drop(l3.try_acquire(1)));
        user.join().unwrap();
        for p in pollers {
            let seen = p.join().unwrap();
            assert!(seen.is_none() || seen == Some(ns(0)), "{seen:?}");
        }
        assert_eq!(l.idle_duration(), Some(ns(0)));
        clock.advance(ns(3));
        assert_eq!(l.idle_duration(), Some(ns(3)));
        assert_eq!(l.available_permits(), 1);
    });
}

/// Lowering the limit from 4 to 2 races the release of 3 of the 3 permits held (1 available):
/// whichever order, once both are done exactly 2 permits are available (nothing lost to the
/// give-back cap, nothing owed forever), and the limiter is idle.
#[test]
fn lowering_the_limit_races_a_release() {
    check(|| {
        let clock = Arc::new(ManualClock::new());
        let l = limiter(4, &clock);
        assert_eq!(take_and_keep(&l, 3).unwrap(), 3);
        let l1 = l.clone();
        let changer = thread::spawn(move || {
            l1.reconfigure(ConcurrencyOptions::new(2)).unwrap();
        });
        let l2 = l.clone();
        let releaser = thread::spawn(move || l2.release(3));
        changer.join().unwrap();
        releaser.join().unwrap();
        assert_eq!(l.available_permits(), 2);
        assert!(l.idle_duration().is_some());
        assert_eq!(take_and_keep(&l, 2).unwrap(), 2);
        assert_exhausted(&take_and_keep(&l, 1).unwrap_err());
    });
}

/// Raising the limit from 2 to 4 races the release of the 2 permits held: afterwards all 4
/// are available (a release never capped below the permits it returns).
#[test]
fn raising_the_limit_races_a_release() {
    check(|| {
        let clock = Arc::new(ManualClock::new());
        let l = limiter(2, &clock);
        assert_eq!(take_and_keep(&l, 2).unwrap(), 2);
        let l1 = l.clone();
        let changer = thread::spawn(move || {
            l1.reconfigure(ConcurrencyOptions::new(4)).unwrap();
        });
        let l2 = l.clone();
        let releaser = thread::spawn(move || l2.release(2));
        changer.join().unwrap();
        releaser.join().unwrap();
        assert_eq!(l.available_permits(), 4);
        assert_eq!(take_and_keep(&l, 4).unwrap(), 4);
    });
}

/// A lowered limit with permits owed races a second release and an acquire: the acquire can
/// only be granted from what the debt leaves, so at no point do more than the new limit of 1
/// plus the leases not yet returned hold permits, and at the end 1 is held or available.
#[test]
fn an_owed_debt_races_a_release_and_an_acquire() {
    check(|| {
        let clock = Arc::new(ManualClock::new());
        let l = limiter(3, &clock);
        assert_eq!(take_and_keep(&l, 1).unwrap(), 1);
        assert_eq!(take_and_keep(&l, 2).unwrap(), 2);
        l.reconfigure(ConcurrencyOptions::new(1)).unwrap(); // 3 held, 2 owed
        let l1 = l.clone();
        let releaser = thread::spawn(move || l1.release(2));
        let l2 = l.clone();
        let taker = thread::spawn(move || take_and_keep(&l2, 1));
        releaser.join().unwrap();
        let got = taker.join().unwrap();
        // The release paid the debt; 1 permit is still held by the first lease.
        assert_exhausted(&got.unwrap_err());
        assert_eq!(l.available_permits(), 0);
        l.release(1);
        assert_eq!(l.available_permits(), 1);
    });
}

/// The direct hand-off (a release taking the queue head's permits in its own CAS) never hands
/// out owed permits: a waiter is queued while 3 of 3 are held, and lowering the limit to 1
/// races the release of 2. Reconfigured first, the release only pays the 2 owed and the waiter
/// waits for the last release; released first, the waiter is handed 1 and the cut is owed by
/// the last lease. Either way the waiter is granted once everything is returned, holds the whole
/// new limit, and nothing else is available.
#[test]
fn a_hand_off_never_grants_owed_permits() {
    check(|| {
        let clock = Arc::new(ManualClock::new());
        let queued = |limit| ConcurrencyOptions::new(limit).with_queue(4, QueueOrder::OldestFirst);
        let l = Arc::new(ConcurrencyLimiter::with_clock(queued(3), clock.clone()).unwrap());
        assert_eq!(take_and_keep(&l, 1).unwrap(), 1);
        assert_eq!(take_and_keep(&l, 2).unwrap(), 2);
        let mut waiter = Box::pin(l.acquire(1));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(waiter.as_mut().poll(&mut cx).is_pending());
        let l1 = l.clone();
        let changer = thread::spawn(move || l1.reconfigure(queued(1)).unwrap());
        let l2 = l.clone();
        let releaser = thread::spawn(move || l2.release(2));
        changer.join().unwrap();
        releaser.join().unwrap();
        l.release(1);
        let Poll::Ready(Ok(lease)) = waiter.as_mut().poll(&mut cx) else {
            panic!("the last release grants the waiter");
        };
        assert_eq!(lease.permits(), 1);
        assert_eq!(l.available_permits(), 0);
        drop(lease);
        drop(waiter);
        assert_eq!(l.available_permits(), 1);
        assert_eq!(l.statistics().queued_permits, 0);
    });
}

/// A lease held through a lowering and a raise of the limit (8 -> 2 -> 8) is released racing
/// them: every permit comes back (8 available at the end), whatever the interleaving.
#[test]
fn a_release_racing_a_lower_and_a_raise_loses_nothing() {
    check(|| {
        let clock = Arc::new(ManualClock::new());
        let l = limiter(8, &clock);
        let lease = tollgate::AcquireOwned::try_acquire_owned(&l, 1).unwrap();
        let releaser = thread::spawn(move || drop(lease));
        let l1 = l.clone();
        let changer = thread::spawn(move || {
            l1.reconfigure(ConcurrencyOptions::new(2)).unwrap();
            l1.reconfigure(ConcurrencyOptions::new(8)).unwrap();
        });
        releaser.join().unwrap();
        changer.join().unwrap();
        assert_eq!(l.available_permits(), 8, "{l:?}");
    });
}

// The limiter without a wait queue (`NoQueue`): the same word and transitions, its rare paths
// (a release that pays a debt or lands above the limit, `reconfigure`) under one slow-path lock
// instead of the queue lock.

type Bare = ConcurrencyLimiter<Arc<ManualClock>, tollgate::NoQueue>;

fn bare(limit: u32, clock: &Arc<ManualClock>) -> Arc<Bare> {
    Arc::new(
        ConcurrencyLimiter::without_queue(ConcurrencyOptions::new(limit), clock.clone()).unwrap(),
    )
}

/// Without a queue: a lease released racing a lowering and a raise of the limit (8 -> 2 -> 8)
/// loses nothing.
#[test]
fn no_queue_a_release_racing_a_lower_and_a_raise_loses_nothing() {
    check(|| {
        let clock = Arc::new(ManualClock::new());
        let l = bare(8, &clock);
        let lease = tollgate::AcquireOwned::try_acquire_owned(&l, 1).unwrap();
        let releaser = thread::spawn(move || drop(lease));
        let l1 = l.clone();
        let changer = thread::spawn(move || {
            l1.reconfigure(ConcurrencyOptions::new(2)).unwrap();
            l1.reconfigure(ConcurrencyOptions::new(8)).unwrap();
        });
        releaser.join().unwrap();
        changer.join().unwrap();
        assert_eq!(l.available_permits(), 8, "{l:?}");
    });
}

/// Without a queue: both permits held, the limit lowered under them (one owed), a release that
/// pays the debt, and a raise back, racing a newcomer: whatever the newcomer got, every permit
/// comes back and the limit in force is what is available.
#[test]
fn no_queue_a_debt_is_paid_racing_a_newcomer_and_a_raise() {
    check(|| {
        let clock = Arc::new(ManualClock::new());
        let l = bare(2, &clock);
        let a = tollgate::AcquireOwned::try_acquire_owned(&l, 1).unwrap();
        let b = take_and_keep_bare(&l, 1).unwrap();
        let l1 = l.clone();
        let changer = thread::spawn(move || {
            l1.reconfigure(ConcurrencyOptions::new(1)).unwrap();
            drop(a); // pays the debt: nothing becomes available
            l1.reconfigure(ConcurrencyOptions::new(2)).unwrap();
        });
        let l2 = l.clone();
        let newcomer = thread::spawn(move || take_and_keep_bare(&l2, 1).ok());
        changer.join().unwrap();
        let got = newcomer.join().unwrap();
        l.release(b);
        if let Some(n) = got {
            l.release(n);
        }
        assert_eq!(l.options().permit_limit, 2);
        assert_eq!(l.available_permits(), 2, "{l:?}");
    });
}

/// Without a queue: two reconfigurations at once apply whole, one after the other: the limit in
/// force at the end is what becomes available once the lease out comes back.
#[test]
fn no_queue_racing_reconfigurations_apply_whole() {
    check(|| {
        let clock = Arc::new(ManualClock::new());
        let l = bare(4, &clock);
        let held = take_and_keep_bare(&l, 2).unwrap();
        let l1 = l.clone();
        let down = thread::spawn(move || l1.reconfigure(ConcurrencyOptions::new(1)).unwrap());
        let l2 = l.clone();
        let up = thread::spawn(move || l2.reconfigure(ConcurrencyOptions::new(3)).unwrap());
        down.join().unwrap();
        up.join().unwrap();
        l.release(held);
        let limit = l.options().permit_limit;
        assert!(limit == 1 || limit == 3);
        assert_eq!(l.available_permits(), u64::from(limit), "{l:?}");
    });
}

/// [`take_and_keep`] on the limiter without a queue.
fn take_and_keep_bare(l: &Bare, n: u32) -> Result<u32, Rejection> {
    l.try_acquire(n).map(|lease| {
        assert!(lease.returns_permits());
        lease.forget()
    })
}
