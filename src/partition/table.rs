//! The compact keyed store: a fixed-size open-addressing table whose every slot is one 128-bit
//! atomic word, `[tag: 64 | state: 64]`, read without any lock.
//!
//! - **The tag is the key.** A key is stored as its 62-bit fingerprint (a keyed hash: SipHash with
//!   random keys by default), not as itself: every slot is 16 bytes whatever the key type, and a
//!   lookup touches one cache line. Two keys with the same fingerprint share a slot — for a
//!   million keys the odds that any two do are about 1 in 10^7, and sharing only ever limits
//!   more, never less.
//! - **Readers take no lock.** A request finds its slot by linear probing from the fingerprint's
//!   home and updates the state with one compare-and-swap on the whole word, tag included: if the
//!   slot was emptied, moved or reused meanwhile, the tag or the state differs and the CAS fails.
//! - **Writers take the shard's lock**: inserting, evicting, and the backward shift that keeps the
//!   table free of tombstones. A writer moves an entry by first *freezing* it (a CAS setting the
//!   tag's top bit), so that no reader's CAS can land on the old copy; a reader meeting a frozen
//!   word starts its probe again. A reader that misses a key while it is being moved concludes
//!   it is absent and takes the insertion path, under the lock, where it finds it.

#![allow(clippy::len_without_is_empty)]

use crate::sync::{AtomicU128, Ordering};

/// An empty slot: tag 0 (no fingerprint is 0).
pub(crate) const EMPTY: u128 = 0;
/// The tag bit of a word being moved by a writer.
const FROZEN: u64 = 1 << 63;

/// A key's fingerprint from its hash: 62 bits, never 0, top bit clear.
#[inline]
pub(crate) const fn fingerprint(hash: u64) -> u64 {
    (hash >> 2) | 1
}

#[inline]
pub(crate) const fn tag(w: u128) -> u64 {
    (w >> 64) as u64
}

#[inline]
pub(crate) const fn state(w: u128) -> u64 {
    w as u64
}

#[inline]
pub(crate) const fn word(tag: u64, state: u64) -> u128 {
    (tag as u128) << 64 | state as u128
}

/// A fixed array of slots. Readers use [`Table::update`] and [`Table::read`]; everything else
/// must be called with the owning shard's lock held.
pub(crate) struct Table {
    slots: Box<[AtomicU128]>,
}

impl Table {
    /// A table of `len` empty slots (at least 2), or `None` if the allocator refuses them.
    pub(crate) fn new(len: usize) -> Option<Self> {
        let len = len.max(2);
        let mut slots = Vec::new();
        // The length comes from the user's capacity: allocate fallibly, never abort.
        slots.try_reserve_exact(len).ok()?;
        slots.extend((0..len).map(|_| AtomicU128::new(EMPTY)));
        Some(Self {
            slots: slots.into_boxed_slice(),
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Where `fp`'s probe starts (a multiply-shift onto the table: no power of two needed).
    #[inline]
    fn home(&self, fp: u64) -> usize {
        ((u128::from(fp << 2) * self.slots.len() as u128) >> 64) as usize
    }

    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() {
            0
        } else {
            i + 1
        }
    }

    /// Lock-free: runs `decide` on `fp`'s state and writes its decision with one CAS, retrying
    /// on interference. `None` if `fp` is not stored (or was moved while the probe passed: the
    /// caller then looks again under the lock). `decide` returns `Ok(new)` to write `new`
    /// (nothing is written if it equals the current state) or `Err` to write nothing.
    #[inline]
    pub(crate) fn update<E>(
        &self,
        fp: u64,
        mut decide: impl FnMut(u64) -> Result<u64, E>,
    ) -> Option<Result<(), E>> {
        let backoff = crossbeam_utils::Backoff::new();
        'probe: loop {
            let mut i = self.home(fp);
            for _ in 0..self.slots.len() {
                let mut w = self.slots[i].load(Ordering::Acquire);
                if w == EMPTY {
                    return None;
                }
                if tag(w) & !FROZEN == fp {
                    loop {
                        if tag(w) != fp {
                            // Frozen (being moved), or emptied and reused: probe again.
                            backoff.snooze();
                            continue 'probe;
                        }
                        let new = match decide(state(w)) {
                            Ok(s) => s,
                            Err(e) => return Some(Err(e)),
                        };
                        if new == state(w) {
                            return Some(Ok(()));
                        }
                        match self.slots[i].compare_exchange_weak(
                            w,
                            word(fp, new),
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        ) {
                            Ok(_) => return Some(Ok(())),
                            Err(actual) => {
                                w = actual;
                                backoff.spin();
                            }
                        }
                    }
                }
                i = self.next(i);
            }
            return None;
        }
    }

    /// Lock-free: `fp`'s current state, if stored (and not being moved right now).
    pub(crate) fn read(&self, fp: u64) -> Option<u64> {
        let mut found = None;
        let _ = self.update(fp, |s| {
            found = Some(s);
            Err::<u64, ()>(())
        });
        found
    }

    /// Under the lock: the index of `fp`'s slot, if stored.
    pub(crate) fn position(&self, fp: u64) -> Option<usize> {
        let mut i = self.home(fp);
        for _ in 0..self.slots.len() {
            let w = self.slots[i].load(Ordering::Acquire);
            if w == EMPTY {
                return None;
            }
            if tag(w) == fp {
                return Some(i);
            }
            i = self.next(i);
        }
        None
    }

    /// Under the lock, `fp` absent and a slot free: stores `fp` with `state`.
    pub(crate) fn insert(&self, fp: u64, state: u64) {
        let mut i = self.home(fp);
        for _ in 0..self.slots.len() {
            if self.slots[i].load(Ordering::Acquire) == EMPTY {
                self.slots[i].store(word(fp, state), Ordering::Release);
                return;
            }
            i = self.next(i);
        }
    }

    /// Under the lock: runs `f` on every stored word.
    pub(crate) fn for_each(&self, mut f: impl FnMut(u128)) {
        for s in self.slots.iter() {
            let w = s.load(Ordering::Acquire);
            if w != EMPTY {
                f(w);
            }
        }
    }

    /// Under the lock: removes the entry whose word is exactly `w` (it is left alone if a reader
    /// changed it since), closing the gap by shifting later entries back. Whether it was
    /// removed.
    pub(crate) fn remove(&self, w: u128) -> bool {
        let Some(mut hole) = self.position(tag(w)) else {
            return false;
        };
        if self.slots[hole]
            .compare_exchange(w, EMPTY, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        // Backward shift: move back every later entry of the cluster that may sit in the hole.
        let n = self.slots.len();
        let mut j = self.next(hole);
        for _ in 0..n {
            let mut wj = self.slots[j].load(Ordering::Acquire);
            if wj == EMPTY {
                return true;
            }
            let home = self.home(tag(wj));
            // The entry at `j` may move to `hole` unless its home lies cyclically in (hole, j].
            let stays = if hole < j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                // Freeze it so that no reader's CAS lands on this copy, then move it.
                loop {
                    match self.slots[j].compare_exchange_weak(
                        wj,
                        word(tag(wj) | FROZEN, state(wj)),
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => break,
                        Err(actual) => wj = actual,
                    }
                }
                self.slots[hole].store(wj, Ordering::Release);
                self.slots[j].store(EMPTY, Ordering::Release);
                hole = j;
            }
            j = self.next(j);
        }
        true
    }

    /// Under the lock: empties every slot.
    pub(crate) fn clear(&self) {
        for s in self.slots.iter() {
            s.store(EMPTY, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of 8 slots where fingerprints are chosen by home.
    fn fp_at(t: &Table, home: usize, salt: u64) -> u64 {
        (1u64..)
            .map(|x| fingerprint(x.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (salt << 20)))
            .find(|fp| t.home(*fp) == home)
            .unwrap()
    }

    #[test]
    fn insert_find_update_and_remove_with_backward_shift() {
        let t = Table::new(8).unwrap();
        let a = fp_at(&t, 3, 1);
        let b = fp_at(&t, 3, 2);
        let c = fp_at(&t, 4, 3);
        for (fp, s) in [(a, 10), (b, 20), (c, 30)] {
            assert_eq!(t.read(fp), None);
            t.insert(fp, s);
        }
        // a at 3, b at 4, c at 5 (displaced).
        assert_eq!(
            (t.position(a), t.position(b), t.position(c)),
            (Some(3), Some(4), Some(5))
        );
        assert_eq!(t.update(b, |s| Ok::<_, ()>(s + 1)), Some(Ok(())));
        assert_eq!(t.read(b), Some(21));
        assert_eq!(t.update(c, |_| Err::<u64, _>(7)), Some(Err(7)));
        // Removing a shifts b to 3 and c to 4: no tombstones, every key still found.
        assert!(!t.remove(word(a, 9)), "a stale word is left alone");
        assert!(t.remove(word(a, 10)));
        assert_eq!((t.position(b), t.position(c)), (Some(3), Some(4)));
        assert_eq!(
            (t.read(a), t.read(b), t.read(c)),
            (None, Some(21), Some(30))
        );
        let mut n = 0;
        t.for_each(|_| n += 1);
        assert_eq!(n, 2);
        t.clear();
        assert_eq!(t.read(b), None);
    }

    #[test]
    fn probing_wraps_around_the_end() {
        let t = Table::new(4).unwrap();
        let x = fp_at(&t, 3, 5);
        let y = fp_at(&t, 3, 6);
        t.insert(x, 1);
        t.insert(y, 2);
        assert_eq!((t.position(x), t.position(y)), (Some(3), Some(0)));
        assert!(t.remove(word(x, 1)));
        assert_eq!(t.position(y), Some(3));
        assert_eq!(t.read(y), Some(2));
    }
}
