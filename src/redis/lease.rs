//! Leased quotas: a fixed window's permits taken from Redis in blocks and handed out locally.
//!
//! A decision that finds no usable lease for its key asks Redis for up to `L` permits of the
//! current window in one call (at least its own); what it does not use stays in a local slot
//! until the window ends, and later decisions on the key take from it with an atomic
//! compare-and-swap, without a round trip and without a lock. A window Redis says is spent is
//! remembered the same way: later decisions are refused locally until it ends.
//!
//! **No overshoot.** Redis counts leased permits when it leases them, so every machine
//! together never grants more than the limit per window; a slot expires at the window's end
//! as measured from *before* the call was sent (the server read its clock after that), so a
//! leased permit is never used in the next window — up to the drift between this machine's
//! monotonic clock and the server's over one window (parts per million). **Undershoot:** a
//! window may end with permits leased but unused, at most `L - 1` per machine per key (they
//! are refused to the other machines meanwhile), and a key whose slot another key takes over
//! (the table is direct-mapped, [`SLOTS`] slots) loses its lease's remaining permits.
//!
//! **The table.** Each slot holds a key's 64-bit fingerprint (a keyed SipHash of its partition:
//! the table is one limiter's, so a local decision builds no key), the lease's end
//! (with a "spent" bit), and one word packing a version and the permits left. A lookup reads
//! the word, checks the fingerprint and the end, and takes its permits with one
//! compare-and-swap on the word: it succeeds only if no writer replaced the slot since the
//! word was read (a writer makes the version odd before it touches the fingerprint or the end,
//! and even again, with the new permits, after). Writers (one per round trip) take a mutex
//! among themselves; readers never wait.
//!
//! Only a fixed window leases: its permits expire with the window, so a lease never lends what
//! a later instant would refuse. A token bucket's or GCRA's permits do not expire — a lease of
//! `L` tokens taken now and spent later would let their refill run ahead of the limit, unless
//! the unused tokens went back to Redis (a write per lease end, and a window where they are
//! neither here nor there).

use core::time::Duration;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::clock::Instant;

/// Slots in a limiter's lease table (direct-mapped by the key's hash).
pub(super) const SLOTS: usize = 4_096;

/// The "spent" bit of a slot's end.
const SPENT: u64 = 1 << 63;

/// One key's lease.
#[derive(Debug, Default)]
struct Slot {
    /// The key's fingerprint (never 0); 0 for an empty slot.
    tag: AtomicU64,
    /// The lease's end in nanoseconds of [`Instant`], with [`SPENT`] for a spent window.
    until: AtomicU64,
    /// The lease's window (windows since the Unix epoch, on the server's clock): where a
    /// settled lease's refund may go back ([`Leases::refund`]).
    window: AtomicU64,
    /// The version (high 32 bits; odd while a writer replaces the slot) and the permits left
    /// (low 32 bits).
    word: AtomicU64,
}

const LEFT: u64 = u32::MAX as u64;

const fn version(word: u64) -> u64 {
    word >> 32
}

/// The leases of one limiter.
#[derive(Debug)]
pub(super) struct Leases {
    /// Permits asked per lease.
    pub(super) size: u32,
    hasher: RandomState,
    slots: Box<[Slot]>,
    writers: Mutex<()>,
}

/// What the local slot says.
pub(super) enum Local {
    /// Granted from the lease.
    Granted {
        /// Permits left in the lease.
        left: u64,
        /// The lease's window (windows since the Unix epoch).
        window: u64,
    },
    /// The window is spent (Redis said so): refused until it ends.
    Spent(Duration),
    /// No usable lease: ask Redis.
    Ask,
}

impl Leases {
    pub(super) fn new(size: u32) -> Self {
        Self {
            size,
            hasher: RandomState::new(),
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
            writers: Mutex::new(()),
        }
    }

    /// The key's slot and fingerprint.
    fn slot(&self, key: &str) -> (&Slot, u64) {
        let h = self.hasher.hash_one(key);
        // SLOTS is a power of two; the index uses the low bits, the tag all of them.
        let i = (h as usize) & (SLOTS - 1);
        (&self.slots[i], h | 1)
    }

    /// Takes `permits` from `key`'s lease at `now`, if it has them.
    pub(super) fn take(&self, key: &str, permits: u32, now: Instant) -> Local {
        let (slot, tag) = self.slot(key);
        let mut word = slot.word.load(Ordering::Acquire);
        loop {
            if version(word) % 2 == 1 || slot.tag.load(Ordering::Acquire) != tag {
                return Local::Ask;
            }
            let until = slot.until.load(Ordering::Acquire);
            let Some(left) = Instant::from_nanos(until & !SPENT)
                .checked_duration_since(now)
                .filter(|d| !d.is_zero())
            else {
                return Local::Ask;
            };
            if until & SPENT != 0 {
                // Re-checked: the end read belongs to this version.
                if slot.word.load(Ordering::Acquire) != word {
                    word = slot.word.load(Ordering::Acquire);
                    continue;
                }
                return Local::Spent(left);
            }
            let have = word & LEFT;
            if permits == 0 {
                // A probe: granted if one permit is there, taking nothing.
                let window = slot.window.load(Ordering::Acquire);
                return if have > 0 && slot.word.load(Ordering::Acquire) == word {
                    Local::Granted { left: have, window }
                } else {
                    Local::Ask
                };
            }
            let n = u64::from(permits);
            if have < n {
                return Local::Ask;
            }
            // Read before the compare-and-swap, which checks that it belongs to this version.
            let window = slot.window.load(Ordering::Acquire);
            match slot.word.compare_exchange_weak(
                word,
                word - n,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return Local::Granted {
                        left: have - n,
                        window,
                    }
                }
                Err(w) => word = w,
            }
        }
    }

    /// Gives `permits` back to `key`'s lease (a settled lease's refund), if the lease is of
    /// the window whose index modulo 2^29 is `window`, has not ended at `now` and is not
    /// spent: they are handed out again from here, as if never taken. `false` (nothing done)
    /// otherwise: the refund goes to Redis.
    pub(super) fn refund(&self, key: &str, permits: u32, window: u64, now: Instant) -> bool {
        let (slot, tag) = self.slot(key);
        let mut word = slot.word.load(Ordering::Acquire);
        loop {
            if version(word) % 2 == 1 || slot.tag.load(Ordering::Acquire) != tag {
                return false;
            }
            let until = slot.until.load(Ordering::Acquire);
            let same = slot.window.load(Ordering::Acquire) % (1 << 29) == window;
            if !same || until & SPENT != 0 || Instant::from_nanos(until) <= now {
                return false;
            }
            let left = (word & LEFT) + u64::from(permits);
            if left > LEFT {
                return false;
            }
            // The compare-and-swap checks that the tag, end and window read are this version's.
            match slot.word.compare_exchange_weak(
                word,
                (word & !LEFT) | left,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(w) => word = w,
            }
        }
    }

    /// Forgets that `key`'s window is spent (a refund went to Redis: the window may have
    /// room again), so that its next decision asks Redis.
    pub(super) fn clear_spent(&self, key: &str) {
        let (slot, tag) = self.slot(key);
        let _writing = self.writers.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.tag.load(Ordering::Acquire) != tag
            || slot.until.load(Ordering::Acquire) & SPENT == 0
        {
            return;
        }
        let old = slot.word.fetch_add(1 << 32, Ordering::AcqRel);
        slot.until.store(0, Ordering::Release);
        let v = version(old).wrapping_add(2) & LEFT;
        slot.word.store(v << 32, Ordering::Release);
    }

    /// Records a lease of `extra` permits (beyond the request's own) of `window` until `until`,
    /// or a spent window. Permits still left in an unexpired lease of the key are kept (up to
    /// 2^32 - 1 in all).
    pub(super) fn put(
        &self,
        key: &str,
        extra: u64,
        spent: bool,
        (window, until): (u64, Instant),
        now: Instant,
    ) {
        let (slot, tag) = self.slot(key);
        let _writing = self.writers.lock().unwrap_or_else(PoisonError::into_inner);
        // Odd: readers of the old lease fail their compare-and-swap from here on.
        let old = slot.word.fetch_add(1 << 32, Ordering::AcqRel);
        let old_until = slot.until.load(Ordering::Acquire);
        let kept = if slot.tag.load(Ordering::Acquire) == tag
            && old_until & SPENT == 0
            && Instant::from_nanos(old_until) > now
            && !spent
        {
            old & LEFT
        } else {
            0
        };
        slot.tag.store(tag, Ordering::Release);
        slot.window.store(window, Ordering::Release);
        let end = until.as_nanos() & !SPENT;
        slot.until
            .store(if spent { end | SPENT } else { end }, Ordering::Release);
        let left = (extra + kept).min(LEFT);
        // Even again, with the new lease's permits.
        let v = version(old).wrapping_add(2) & LEFT;
        slot.word.store((v << 32) | left, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::tests::at;

    #[test]
    fn a_lease_serves_until_it_ends_and_keeps_what_is_left() {
        let l = Leases::new(10);
        assert!(matches!(l.take("a", 1, at(0)), Local::Ask));
        l.put("a", 3, false, (7, at(100)), at(0));
        assert!(matches!(
            l.take("a", 2, at(1)),
            Local::Granted { left: 1, .. }
        ));
        assert!(matches!(l.take("a", 2, at(1)), Local::Ask));
        assert!(matches!(
            l.take("a", 0, at(1)),
            Local::Granted { left: 1, .. }
        ));
        assert!(matches!(l.take("b", 1, at(1)), Local::Ask));
        // A new lease of the same key keeps the 1 left.
        l.put("a", 4, false, (7, at(200)), at(2));
        assert!(matches!(
            l.take("a", 5, at(3)),
            Local::Granted { left: 0, .. }
        ));
        // Ended: ask Redis.
        l.put("a", 4, false, (7, at(300)), at(250));
        assert!(matches!(l.take("a", 1, at(300)), Local::Ask));
        // Spent until it ends.
        l.put("a", 0, true, (7, at(400)), at(300));
        assert!(
            matches!(l.take("a", 1, at(350)), Local::Spent(d) if d == Duration::from_millis(50))
        );
        assert!(matches!(l.take("a", 1, at(400)), Local::Ask));
    }

    #[test]
    fn a_refund_goes_back_into_its_windows_lease_only() {
        let l = Leases::new(10);
        assert!(!l.refund("a", 1, 7, at(0))); // no lease
        l.put("a", 3, false, (7, at(100)), at(0));
        assert!(matches!(
            l.take("a", 3, at(1)),
            Local::Granted { left: 0, window: 7 }
        ));
        assert!(l.refund("a", 2, 7, at(2)));
        assert!(matches!(
            l.take("a", 2, at(3)),
            Local::Granted { left: 0, .. }
        ));
        assert!(!l.refund("a", 1, 6, at(4))); // another window's lease
        assert!(!l.refund("b", 1, 7, at(4))); // another key
        assert!(!l.refund("a", 1, 7, at(100))); // ended
                                                // Spent: the refund goes to Redis, and the key asks Redis again.
        l.put("a", 0, true, (8, at(400)), at(300));
        assert!(!l.refund("a", 1, 8, at(301)));
        assert!(matches!(l.take("a", 1, at(301)), Local::Spent(_)));
        l.clear_spent("a");
        assert!(matches!(l.take("a", 1, at(302)), Local::Ask));
    }

    #[test]
    fn concurrent_takes_never_hand_out_more_than_leased() {
        let l = std::sync::Arc::new(Leases::new(10));
        l.put("k", 10_000, false, (7, at(1_000_000)), at(0));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    let mut got = 0u64;
                    for _ in 0..5_000 {
                        if let Local::Granted { .. } = l.take("k", 1, at(1)) {
                            got += 1;
                        }
                    }
                    got
                })
            })
            .collect();
        let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(total, 10_000);
    }
}
