//! loom models of the adaptive limiter (issue 39): a limit change — a window closing on one
//! thread's release, the algorithm cutting or raising the limit — racing acquisitions and
//! releases on other threads. Every sample closes a window here, so every release may change
//! the limit. Whatever the interleaving: no grant takes the leases held past the limit in force
//! after it, nothing is lost or deadlocks, and once every lease has ended all the permits of
//! the final limit are free.
#![cfg(loom)]

use std::sync::Arc;

use loom::sync::atomic::{AtomicU32, Ordering};
use loom::thread;
use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions, Aimd};
use tollgate_loom_tests::{check, RecordingClock};

/// Leases held, counted by the model: incremented after a grant, decremented before a release.
struct Held(AtomicU32);

/// One caller: takes a permit if it can, checks that the grant is within the limit of its
/// instant (`held` after the grant is at most the limit read after it, unless a cut came in
/// between, which only lowers what is read: so at most the larger bound), and releases it,
/// reporting a drop if `dropped`.
fn call(l: &AdaptiveLimiter<RecordingClock>, held: &Held, dropped: bool) {
    if let Ok(mut lease) = l.try_acquire(1) {
        let now = held.0.fetch_add(1, Ordering::SeqCst) + 1;
        assert!(now <= l.options().max_limit, "{now} held");
        if dropped {
            lease.dropped();
        }
        held.0.fetch_sub(1, Ordering::SeqCst);
        drop(lease);
    }
}

/// A limiter of 2 (bounds 1..=2, AIMD) whose first window (1 ns from 0, one sample) can close:
/// its clock stands at 10 ns.
fn limiter() -> Arc<AdaptiveLimiter<RecordingClock>> {
    let opts = AdaptiveOptions::new(2)
        .with_bounds(1, 2)
        .with_window(core::time::Duration::from_nanos(1), 1)
        .with_algorithm(Aimd::new());
    let clock = RecordingClock::new();
    let l = Arc::new(AdaptiveLimiter::with_clock(opts, clock.clone()).unwrap());
    clock.0.advance(core::time::Duration::from_nanos(10));
    l
}

/// A limit of 2 (bounds 1..=2): the first release closes the one window that can close (the
/// clock stands 10 ns after its start): a dropped call's cuts the limit to 1, a good call's
/// may raise it, while the other thread calls.
#[test]
fn a_limit_change_races_acquisitions_and_releases() {
    check(|| {
        let l = limiter();
        let held = Arc::new(Held(AtomicU32::new(0)));
        let (l2, h2) = (l.clone(), held.clone());
        let other = thread::spawn(move || call(&l2, &h2, false));
        call(&l, &held, true);
        other.join().unwrap();
        assert_eq!(held.0.load(Ordering::SeqCst), 0);
        let limit = l.limit();
        assert!((1..=2).contains(&limit), "{limit}");
        assert_eq!(l.available_permits(), u64::from(limit));
    });
}

/// A lowered limit admits nobody until the leases out have ended: one thread holds a lease
/// while another's dropped call cuts the limit from 2 to 1; a third call made after that cut
/// (ordered after it by the join) is refused while the held lease is out.
#[test]
fn a_cut_admits_nobody_until_enough_leases_end() {
    check(|| {
        let l = limiter();
        let kept = l.try_acquire(1).unwrap();
        let l2 = l.clone();
        let cutter = thread::spawn(move || {
            let mut lease = l2.try_acquire(1).unwrap();
            lease.dropped();
        });
        cutter.join().unwrap();
        assert_eq!(l.limit(), 1);
        assert!(l.try_acquire(1).is_err()); // one held, one allowed
        drop(kept);
        assert_eq!(l.available_permits(), 1);
    });
}
