//! The growable concurrent store (feature `std`): shards of `RwLock<HashTable>`, each with its share
//! of the capacity and its own eviction marks.
//!
//! - **One hash per request.** The key is hashed once with the user's `BuildHasher` (SipHash by
//!   default, which resists hash flooding); the hash picks the shard and is stored beside the
//!   value in the shard's `hashbrown::HashTable`, which never hashes anything itself. The key
//!   lives in the value ([`Keyed`]), so a lookup borrows the key and a value can be used — its
//!   key included — outside the lock.
//! - **Acquire under the read lock.** A request runs its partition's transition while holding the
//!   shard's read lock; eviction holds the write lock and evicts only idle partitions. So an
//!   acquisition and an eviction of the same key are ordered: either the acquisition sees no
//!   partition (and creates one), or the eviction sees it in use (and keeps it).
//! - **Shards of graded sizes.** A hash map's memory per key swings by 2x as it doubles (from 7/8
//!   full down to 7/16). Shards given the same share of keys all double together, so the whole
//!   store swings too; shards whose shares are spread evenly over an octave (the largest holds
//!   twice the smallest's keys) double at different moments, and the store's memory per key stays
//!   near the average, `8/7 / ln 2 ≈ 1.65` slots per key, whatever the number of keys.

use core::hash::{BuildHasher, Hash};
use std::vec::Vec;

use crossbeam_utils::CachePadded;
use hashbrown::HashTable;

use super::evict::{Idle, Marks, Policy, Table};
use super::PartitionConfig;
use crate::clock::Instant;
use crate::lease::{Reason, Rejection};
use crate::sync::{AtomicBool, AtomicU64, Ordering, RwLock};

/// A stored value that carries its key.
pub(crate) trait Keyed<K: ?Sized> {
    fn key(&self) -> &K;
}

/// A shard's map: each value beside its key's hash.
type Map<V> = HashTable<(u64, V)>;

impl<V> Table for Map<V> {
    type Value = V;
    fn len(&self) -> usize {
        HashTable::len(self)
    }
    fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        HashTable::retain(self, |e| keep(&e.1));
    }
    fn for_each(&self, mut f: impl FnMut(&V)) {
        self.iter().for_each(|e| f(&e.1));
    }
}

/// One shard: its map, its share of the capacity, its eviction marks and counters.
pub(crate) struct Shard<V> {
    map: RwLock<Map<V>>,
    cap: usize,
    next_sweep: AtomicU64,
    next_idle: AtomicU64,
    rejected_full: AtomicU64,
}

/// How the hash picks a shard: `ROUTE` slots, each naming a shard; a shard's share of the keys
/// is its share of the slots.
const ROUTE: usize = 1024;
/// The hash bits that index the route: bits 40.., which the maps themselves do not use (they
/// take low bits for the slot and the top 7 for the tag), so a shard's keys stay well spread
/// inside its map.
const ROUTE_SHIFT: u32 = 40;

/// The shards of a store.
pub(crate) struct Shards<V, S> {
    shards: Box<[CachePadded<Shard<V>>]>,
    route: Box<[u8; ROUTE]>,
    hasher: S,
    policy: Policy,
}

/// Slot counts per shard, proportional to `2^(i / n)`: spread evenly over one octave.
fn graded(n: usize) -> Vec<usize> {
    let weights: Vec<f64> = (0..n).map(|i| (i as f64 / n as f64).exp2()).collect();
    let total: f64 = weights.iter().sum();
    let mut slots: Vec<usize> = weights
        .iter()
        .map(|w| ((w / total * ROUTE as f64) as usize).max(1))
        .collect();
    // Hand out (or take back) the rounding difference, largest shards first.
    let mut sum: usize = slots.iter().sum();
    let mut i = n;
    while sum != ROUTE {
        i = if i == 0 { n - 1 } else { i - 1 };
        if sum < ROUTE {
            slots[i] += 1;
            sum += 1;
        } else if slots[i] > 1 {
            slots[i] -= 1;
            sum -= 1;
        }
    }
    slots
}

impl<V, S> Shards<V, S> {
    pub(crate) fn new(config: &PartitionConfig, hasher: S, now: Instant) -> Self {
        let capacity = config.capacity.max(1);
        let n = if config.shards == 0 {
            // About 4096 keys per shard at capacity, 1 to 64 shards.
            (capacity / 4096).clamp(1, 64)
        } else {
            config.shards.clamp(1, 64)
        };
        let slots = graded(n);
        let mut route = Box::new([0u8; ROUTE]);
        let mut at = 0;
        for (shard, &count) in slots.iter().enumerate() {
            for r in &mut route[at..at + count] {
                *r = shard as u8;
            }
            at += count;
        }
        // Spread each shard's slots over the route, so that the route bits need not be uniform
        // in their high part.
        let mut spread = Box::new([0u8; ROUTE]);
        for (i, r) in spread.iter_mut().enumerate() {
            *r = route[(i * 613) % ROUTE];
        }
        let per_shard_batch = |cap: usize| (cap / 16).max(1);
        let policy_template = Policy::new(config, 1);
        let marks = Marks::new(now.as_nanos(), &policy_template);
        let shards: Vec<CachePadded<Shard<V>>> = slots
            .iter()
            .map(|&count| {
                let cap = (capacity as u128 * count as u128).div_ceil(ROUTE as u128) as usize;
                CachePadded::new(Shard {
                    map: RwLock::new(Map::new()),
                    cap: cap.max(1),
                    next_sweep: AtomicU64::new(marks.next_sweep),
                    next_idle: AtomicU64::new(0),
                    rejected_full: AtomicU64::new(0),
                })
            })
            .collect();
        let largest = shards.iter().map(|s| s.cap).max().unwrap_or(1);
        Self {
            shards: shards.into_boxed_slice(),
            route: spread,
            hasher,
            policy: Policy::new(config, per_shard_batch(largest)),
        }
    }

    #[inline]
    pub(crate) fn shard(&self, hash: u64) -> &Shard<V> {
        let slot = (hash >> ROUTE_SHIFT) as usize % ROUTE;
        &self.shards[usize::from(self.route[slot])]
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Shard<V>> {
        self.shards.iter().map(|s| &**s)
    }

    pub(crate) fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Partitions stored.
    pub(crate) fn len(&self) -> usize {
        self.iter().map(|s| s.map.read().len()).sum()
    }

    /// The most partitions the shards hold together (saturating: each shard's share is rounded
    /// up, so a capacity near `usize::MAX` would overflow the sum).
    pub(crate) fn capacity(&self) -> usize {
        self.iter().fold(0, |sum, s| sum.saturating_add(s.cap))
    }

    /// New keys refused for capacity.
    pub(crate) fn rejected_full(&self) -> u64 {
        self.iter()
            .map(|s| s.rejected_full.load(Ordering::Relaxed))
            .sum()
    }

    /// Runs `f` on every stored value, shard by shard under the read lock.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&V)) {
        for s in self.iter() {
            s.map.read().iter().for_each(|e| f(&e.1));
        }
    }

    /// Empties every shard, then runs `f` on every value taken out (after unlocking: `f` may
    /// wake waiters, whose wakers may call back into the store).
    pub(crate) fn drain(&self, mut f: impl FnMut(&V)) {
        for s in self.iter() {
            let taken = core::mem::take(&mut *s.map.write());
            taken.iter().for_each(|e| f(&e.1));
        }
    }
}

impl<V, S: BuildHasher> Shards<V, S> {
    #[inline]
    pub(crate) fn hash<K: Hash + ?Sized>(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Evicts every partition past the idle timeout, now, in every shard.
    pub(crate) fn sweep_all(&self, now: Instant, idle: impl Fn(&V) -> Idle) {
        for s in self.iter() {
            s.sweep(&self.policy, now, true, &idle);
        }
    }
}

impl<V> Shard<V> {
    /// Sweeps the shard if some partition can have passed the idle timeout by `now`.
    #[inline]
    pub(crate) fn maybe_sweep(&self, policy: &Policy, now: Instant, idle: impl Fn(&V) -> Idle) {
        if now.as_nanos() >= self.next_sweep.load(Ordering::Relaxed) {
            self.sweep(policy, now, false, idle);
        }
    }

    fn marks(&self) -> Marks {
        Marks {
            next_sweep: self.next_sweep.load(Ordering::Relaxed),
            next_idle: self.next_idle.load(Ordering::Relaxed),
        }
    }

    fn set_marks(&self, m: Marks) {
        self.next_sweep.store(m.next_sweep, Ordering::Relaxed);
        self.next_idle.store(m.next_idle, Ordering::Relaxed);
    }

    /// Sweeps the shard (if `force`, or if nobody swept it since the caller looked).
    fn sweep(&self, policy: &Policy, now: Instant, force: bool, idle: impl Fn(&V) -> Idle) {
        let mut map = self.map.write();
        let mut marks = self.marks();
        if !force && now.as_nanos() < marks.next_sweep {
            return; // someone swept meanwhile
        }
        policy.sweep(&mut *map, now.as_nanos(), &mut marks, idle);
        self.set_marks(marks);
        // Give memory back after a large eviction (maps never shrink by themselves).
        let len = map.len();
        if map.capacity() > 64 && map.capacity() / 4 > len {
            map.shrink_to(len * 2, |e| e.0);
        }
    }

    /// Runs `f` under the shard's read lock: ordered against every insertion, eviction and
    /// drain of the shard.
    pub(crate) fn read_locked<R>(&self, f: impl FnOnce() -> R) -> R {
        let _map = self.map.read();
        f()
    }

    /// Runs `f` on `key`'s value under the read lock, if it is stored.
    #[inline]
    pub(crate) fn get<K: Eq + ?Sized, R>(
        &self,
        hash: u64,
        key: &K,
        f: impl FnOnce(&V) -> R,
    ) -> Option<R>
    where
        V: Keyed<K>,
    {
        let map = self.map.read();
        map.find(hash, |e| e.0 == hash && e.1.key() == key)
            .map(|e| f(&e.1))
    }

    /// Removes `key`'s value, if stored, and returns it.
    pub(crate) fn remove<K: Eq + ?Sized>(&self, hash: u64, key: &K) -> Option<V>
    where
        V: Keyed<K>,
    {
        let mut map = self.map.write();
        let entry = map
            .find_entry(hash, |e| e.0 == hash && e.1.key() == key)
            .ok()?;
        Some(entry.remove().0 .1)
    }

    /// Runs `f` on `key`'s value under the write lock, inserting the value `create` makes first
    /// from the key if it is not stored, `closed` is not set, and there is room (by the eviction policy,
    /// and in memory). A key refused is not inserted: the result is a [`Reason::Closed`] or
    /// [`Reason::PartitionsFull`] rejection. `create` runs under the lock: keep it cheap.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn get_or_insert<K: Eq, R>(
        &self,
        policy: &Policy,
        now: Instant,
        hash: u64,
        key: K,
        closed: &AtomicBool,
        create: impl FnOnce(K) -> V,
        idle: impl Fn(&V) -> Idle,
        f: impl FnOnce(&V) -> R,
    ) -> Result<R, Rejection>
    where
        V: Keyed<K>,
    {
        let mut map = self.map.write();
        if let Some(e) = map.find(hash, |e| e.0 == hash && *e.1.key() == key) {
            return Ok(f(&e.1)); // inserted by another thread meanwhile
        }
        // Under the lock: `close` sets the flag before it drains each shard under this lock, so
        // either the drain comes after this insertion or this sees the flag.
        if closed.load(Ordering::Acquire) {
            return Err(Rejection::new(&Reason::Closed));
        }
        let mut marks = self.marks();
        let room = policy.make_room(&mut *map, self.cap, now.as_nanos(), &mut marks, idle);
        self.set_marks(marks);
        // The capacity is the user's: grow the map fallibly, never abort on it.
        if !room || map.try_reserve(1, |e| e.0).is_err() {
            self.rejected_full.fetch_add(1, Ordering::Relaxed);
            return Err(Rejection::new(&Reason::PartitionsFull));
        }
        let e = map.insert_unique(hash, (hash, create(key)), |e| e.0);
        Ok(f(&e.get().1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graded_shares_cover_the_route_and_span_an_octave() {
        for n in [1, 2, 3, 7, 16, 64] {
            let s = graded(n);
            assert_eq!(s.iter().sum::<usize>(), ROUTE);
            let (min, max) = (*s.iter().min().unwrap(), *s.iter().max().unwrap());
            assert!(max <= 2 * min + 2, "{n}: {s:?}");
        }
    }

    struct Entry(String, u32);

    impl Keyed<String> for Entry {
        fn key(&self) -> &String {
            &self.0
        }
    }

    #[test]
    fn lookups_by_reference_find_stored_keys() {
        let config = PartitionConfig::new(100).with_shards(4);
        let shards: Shards<Entry, std::hash::RandomState> =
            Shards::new(&config, Default::default(), Instant::ZERO);
        let key = &"alpha".to_string();
        let h = shards.hash(key);
        let s = shards.shard(h);
        assert_eq!(s.get(h, key, |v| v.1), None);
        let p = *shards.policy();
        let idle = |_: &Entry| Idle::Busy(None);
        let open = AtomicBool::new(false);
        let make = |k| Entry(k, 7);
        let got = s.get_or_insert(&p, Instant::ZERO, h, key.clone(), &open, make, idle, |v| {
            v.1
        });
        assert_eq!(got, Ok(7));
        assert_eq!(s.get(h, key, |v| v.1), Some(7));
        assert_eq!(shards.len(), 1);
        assert!(shards.capacity() >= 100);
        assert_eq!(s.remove(h, key).map(|v| v.1), Some(7));
        assert_eq!(shards.len(), 0);
        let closed = AtomicBool::new(true);
        let make = |k| Entry(k, 8);
        let got = s.get_or_insert(
            &p,
            Instant::ZERO,
            h,
            key.clone(),
            &closed,
            make,
            idle,
            |v| v.1,
        );
        assert_eq!(got.unwrap_err().reason(), Reason::Closed);
        assert_eq!(shards.len(), 0, "nothing inserted once closed");
    }
}
