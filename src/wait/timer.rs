//! The process timer (feature `std`): wakes waiters of rate limiters when time brings their
//! permits, with nothing for the user to start.
//!
//! One thread for the process, spawned on the first wait that needs it. It keeps the wakers of
//! the waiters next in line to be served, ordered by deadline, sleeps on a condition variable
//! until the earliest one and wakes those that are due (after releasing its lock). With no
//! entries it lingers a moment, then exits: nothing runs while nobody waits.
//!
//! Only the waiter at a queue's serving end arms the timer, for the instant its own permits
//! arrive ([`Source::wait_for_permits`](super::Source::wait_for_permits)). Woken, it polls,
//! serves the queue (itself included) and the waiter that becomes next is nudged by the queue
//! (its waker moved out and woken), so it arms its own timer in turn.

use core::task::Waker;
use core::time::Duration;
use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// How long the thread waits for new entries once none are left, before exiting. Zero under
/// miri, whose test runs must end with no thread left.
const LINGER: Duration = if cfg!(miri) {
    Duration::ZERO
} else {
    Duration::from_secs(1)
};

/// The shortest timer armed: a service instant that is due already (time moved between the
/// serve and the estimate) is re-checked after this long.
const MIN_DELAY: Duration = Duration::from_micros(1);

type Key = (Instant, u64);

struct Shared {
    entries: BTreeMap<Key, Waker>,
    next_id: u64,
    running: bool,
}

static SHARED: Mutex<Shared> = Mutex::new(Shared {
    entries: BTreeMap::new(),
    next_id: 0,
    running: false,
});
static CHANGED: Condvar = Condvar::new();

fn lock() -> MutexGuard<'static, Shared> {
    SHARED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One waiter's entry in the process timer.
#[derive(Debug, Default)]
pub(crate) struct Timer {
    armed: Option<(Key, Waker)>,
}

impl Timer {
    pub(crate) const fn new() -> Self {
        Self { armed: None }
    }

    /// Wakes `waker` after `after` (keeping an armed entry that wakes the same task no later).
    /// If the timer thread cannot be spawned, nothing is armed: the waiter is then served by
    /// later acquisitions, `replenish` or a `Driver`, as without `std`.
    pub(crate) fn arm(&mut self, after: Duration, waker: &Waker) {
        let now = Instant::now();
        let Some(deadline) = now.checked_add(after.max(MIN_DELAY)) else {
            return; // centuries away: nothing to arm
        };
        if let Some(((at, _), w)) = &self.armed {
            if *at > now && *at <= deadline && w.will_wake(waker) {
                return;
            }
        }
        self.disarm();
        let mut s = lock();
        let id = s.next_id;
        s.next_id = s.next_id.wrapping_add(1);
        let key = (deadline, id);
        let earliest = s.entries.keys().next().is_none_or(|k| key < *k);
        s.entries.insert(key, waker.clone());
        if !s.running {
            let spawned = std::thread::Builder::new()
                .name("tollgate-timer".into())
                .spawn(run);
            if spawned.is_err() {
                let w = s.entries.remove(&key);
                drop(s);
                drop(w);
                return;
            }
            s.running = true;
        } else if earliest {
            CHANGED.notify_one();
        }
        drop(s);
        self.armed = Some((key, waker.clone()));
    }

    /// Removes the entry, if any (its waker is dropped after the timer's lock is released).
    #[inline]
    pub(crate) fn disarm(&mut self) {
        if self.armed.is_some() {
            self.disarm_armed();
        }
    }

    fn disarm_armed(&mut self) {
        if let Some((key, mine)) = self.armed.take() {
            let theirs = lock().entries.remove(&key);
            drop(theirs);
            drop(mine);
        }
    }
}

/// The timer thread: wake what is due, sleep until the next deadline; exit once idle.
fn run() {
    let mut due = Vec::new();
    let mut s = lock();
    let mut idle_since: Option<Instant> = None;
    loop {
        let now = Instant::now();
        while let Some(e) = s.entries.first_entry() {
            if e.key().0 > now {
                break;
            }
            due.push(e.remove());
        }
        if !due.is_empty() {
            drop(s);
            for w in due.drain(..) {
                w.wake();
            }
            s = lock();
            continue;
        }
        let next = s.entries.keys().next().map(|k| k.0);
        s = match next {
            Some(at) => {
                idle_since = None;
                CHANGED
                    .wait_timeout(s, at.saturating_duration_since(now))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => {
                let since = *idle_since.get_or_insert(now);
                let left = LINGER.saturating_sub(now.saturating_duration_since(since));
                if left.is_zero() {
                    s.running = false;
                    return;
                }
                CHANGED
                    .wait_timeout(s, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
        };
    }
}
