//! The growable concurrent store (feature `std`): shards of `RwLock<HashMap>`, each with its share
//! of the capacity and its own eviction marks.
//!
//! - **One hash per request.** The key is hashed once with the user's `BuildHasher` (SipHash by
//!   default, which resists hash flooding); the hash picks the shard and is stored beside the key,
//!   and the shard's map hashes by that stored hash (a pass-through hasher). Lookups borrow the
//!   key: the map's `Borrow` goes through a small trait object.
//! - **Acquire under the read lock.** A request runs its partition's transition while holding the
//!   shard's read lock; eviction holds the write lock and evicts only idle partitions. So an
//!   acquisition and an eviction of the same key are ordered: either the acquisition sees no
//!   partition (and creates one), or the eviction sees it in use (and keeps it).
//! - **Shards of graded sizes.** A hash map's memory per key swings by 2x as it doubles (from 7/8
//!   full down to 7/16). Shards given the same share of keys all double together, so the whole
//!   store swings too; shards whose shares are spread evenly over an octave (the largest holds
//!   twice the smallest's keys) double at different moments, and the store's memory per key stays
//!   near the average, `8/7 / ln 2 ≈ 1.65` slots per key, whatever the number of keys.

use core::borrow::Borrow;
use core::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::collections::HashMap;
use std::vec::Vec;

use crossbeam_utils::CachePadded;

use super::evict::{Idle, Marks, Policy, Table};
use super::PartitionConfig;
use crate::clock::Instant;
use crate::lease::{Reason, Rejection};
use crate::sync::{AtomicU64, Ordering, RwLock};

/// A key with its hash.
pub(crate) struct Hashed<K> {
    hash: u64,
    key: K,
}

/// What the map compares: a hash and a key, stored ([`Hashed`]) or borrowed ([`Probe`]).
pub(crate) trait Lookup<K> {
    fn hash(&self) -> u64;
    fn key(&self) -> &K;
}

impl<K> Lookup<K> for Hashed<K> {
    fn hash(&self) -> u64 {
        self.hash
    }
    fn key(&self) -> &K {
        &self.key
    }
}

/// A borrowed key and its hash, to look up without owning the key.
struct Probe<'a, K> {
    hash: u64,
    key: &'a K,
}

impl<K> Lookup<K> for Probe<'_, K> {
    fn hash(&self) -> u64 {
        self.hash
    }
    fn key(&self) -> &K {
        self.key
    }
}

impl<K: Eq> PartialEq for dyn Lookup<K> + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.hash() == other.hash() && self.key() == other.key()
    }
}

impl<K: Eq> Eq for dyn Lookup<K> + '_ {}

impl<K> Hash for dyn Lookup<K> + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(Lookup::hash(self));
    }
}

impl<K: Eq> PartialEq for Hashed<K> {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.key == other.key
    }
}

impl<K: Eq> Eq for Hashed<K> {}

impl<K> Hash for Hashed<K> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl<'a, K: 'a> Borrow<dyn Lookup<K> + 'a> for Hashed<K> {
    fn borrow(&self) -> &(dyn Lookup<K> + 'a) {
        self
    }
}

/// Hands the stored hash to the map unchanged.
#[derive(Default)]
pub(crate) struct PassThrough(u64);

impl Hasher for PassThrough {
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is ever called (by `Hashed` and `Lookup`); fold anything else.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type Map<K, V> = HashMap<Hashed<K>, V, BuildHasherDefault<PassThrough>>;

impl<K, V> Table for Map<K, V> {
    type Value = V;
    fn len(&self) -> usize {
        HashMap::len(self)
    }
    fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        HashMap::retain(self, |_, v| keep(v));
    }
    fn for_each(&self, f: impl FnMut(&V)) {
        self.values().for_each(f);
    }
}

/// A key given by value or by reference: looked up by reference, owned only to insert.
pub(crate) trait KeySource<K> {
    fn key(&self) -> &K;
    fn into_key(self) -> K;
}

/// An owned key, moved into the map on insertion.
pub(crate) struct Owned<K>(pub(crate) K);

impl<K> KeySource<K> for Owned<K> {
    fn key(&self) -> &K {
        &self.0
    }
    fn into_key(self) -> K {
        self.0
    }
}

impl<K: Clone> KeySource<K> for &K {
    fn key(&self) -> &K {
        self
    }
    fn into_key(self) -> K {
        self.clone()
    }
}

/// One shard: its map, its share of the capacity, its eviction marks and counters.
pub(crate) struct Shard<K, V> {
    map: RwLock<Map<K, V>>,
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
pub(crate) struct Shards<K, V, S> {
    shards: Box<[CachePadded<Shard<K, V>>]>,
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

impl<K, V, S> Shards<K, V, S> {
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
        let shards: Vec<CachePadded<Shard<K, V>>> = slots
            .iter()
            .map(|&count| {
                let cap = (capacity as u128 * count as u128).div_ceil(ROUTE as u128) as usize;
                CachePadded::new(Shard {
                    map: RwLock::new(Map::default()),
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
    pub(crate) fn shard(&self, hash: u64) -> &Shard<K, V> {
        let slot = (hash >> ROUTE_SHIFT) as usize % ROUTE;
        &self.shards[usize::from(self.route[slot])]
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Shard<K, V>> {
        self.shards.iter().map(|s| &**s)
    }

    pub(crate) fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Partitions stored.
    pub(crate) fn len(&self) -> usize {
        self.iter().map(|s| s.map.read().len()).sum()
    }

    /// The most partitions the shards hold together.
    pub(crate) fn capacity(&self) -> usize {
        self.iter().map(|s| s.cap).sum()
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
            s.map.read().values().for_each(&mut f);
        }
    }

    /// Runs `f` on every value, then empties every shard.
    pub(crate) fn drain(&self, mut f: impl FnMut(&V)) {
        for s in self.iter() {
            let mut map = s.map.write();
            map.values().for_each(&mut f);
            *map = Map::default();
        }
    }
}

impl<K: Hash + Eq, V, S: BuildHasher> Shards<K, V, S> {
    #[inline]
    pub(crate) fn hash(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Evicts every partition past the idle timeout, now, in every shard.
    pub(crate) fn sweep_all(&self, now: Instant, idle: impl Fn(&V) -> Idle) {
        for s in self.iter() {
            s.sweep(&self.policy, now, true, &idle);
        }
    }
}

impl<K: Eq, V> Shard<K, V> {
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
            map.shrink_to(len * 2);
        }
    }
}

impl<K: Eq, V> Shard<K, V> {
    /// Runs `f` on `key`'s value under the read lock, if it is stored.
    #[inline]
    pub(crate) fn get<R>(&self, hash: u64, key: &K, f: impl FnOnce(&V) -> R) -> Option<R> {
        let map = self.map.read();
        let probe = Probe { hash, key };
        map.get(&probe as &dyn Lookup<K>).map(f)
    }

    /// Runs `f` on `key`'s value under the write lock, inserting the value `create` makes first
    /// if the key is not stored and there is room (by the eviction policy). A key refused for
    /// capacity is not inserted: the result is a [`Reason::PartitionsFull`] rejection.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn get_or_insert<R>(
        &self,
        policy: &Policy,
        now: Instant,
        hash: u64,
        key: impl KeySource<K>,
        create: impl FnOnce(&K) -> V,
        idle: impl Fn(&V) -> Idle,
        f: impl FnOnce(&V) -> R,
    ) -> Result<R, Rejection> {
        let mut map = self.map.write();
        let probe = Probe {
            hash,
            key: key.key(),
        };
        if let Some(v) = map.get(&probe as &dyn Lookup<K>) {
            return Ok(f(v)); // inserted by another thread meanwhile
        }
        let mut marks = self.marks();
        let room = policy.make_room(&mut *map, self.cap, now.as_nanos(), &mut marks, idle);
        self.set_marks(marks);
        if !room {
            self.rejected_full.fetch_add(1, Ordering::Relaxed);
            return Err(Rejection::new(Reason::PartitionsFull));
        }
        let value = create(key.key());
        let v = map
            .entry(Hashed {
                hash,
                key: key.into_key(),
            })
            .or_insert(value);
        Ok(f(v))
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

    #[test]
    fn lookups_by_reference_find_stored_keys() {
        let config = PartitionConfig::new(100).with_shards(4);
        let shards: Shards<String, u32, std::hash::RandomState> =
            Shards::new(&config, Default::default(), Instant::ZERO);
        let key = "alpha".to_string();
        let h = shards.hash(&key);
        let s = shards.shard(h);
        assert_eq!(s.get(h, &key, |v| *v), None);
        let p = *shards.policy();
        let idle = |_: &u32| Idle::Busy(None);
        let got = s.get_or_insert(&p, Instant::ZERO, h, &key, |_| 7, idle, |v| *v);
        assert_eq!(got, Ok(7));
        assert_eq!(s.get(h, &key, |v| *v), Some(7));
        assert_eq!(shards.len(), 1);
        assert!(shards.capacity() >= 100);
    }
}
