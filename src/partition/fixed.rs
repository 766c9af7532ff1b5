//! The fixed-capacity stores for firmware without a heap: [`FixedPartitioned`] (a full limiter
//! per key) and [`FixedKeyedLimiter`] (a state word per key), both on a `heapless` index map
//! behind one lock.
//!
//! Every call runs under the lock — the wait queues' lock: a critical section without `std`
//! (interrupt-safe), a mutex with `std` — for a few list and
//! word operations. On the single-core MCUs these are for, that is what any shared table costs.
//! Waiting is not offered: a waiter needs its partition at a fixed address while it waits, which a
//! table that moves entries (and cannot allocate) does not give.

use core::fmt;
use core::hash::Hash;
use core::time::Duration;

use heapless::index_map::{Entry, FnvIndexMap};

use super::evict::{Idle, Marks, Policy, Table};
use super::keyed_state::KeyedBucket;
use super::{Factory, Partition, PartitionConfig, PartitionedLimiter};
use crate::clock::Clock;
use crate::lease::{Lease, Reason, Rejection, Release, SettleError, Settlement, Statistics};
use crate::limiter::Limiter;
use crate::options::OptionsError;
use crate::stats::Counters;
use crate::sync::{AtomicBool, Ordering};
use crate::wait::Lock;
use crate::{FixedWindowOptions, TokenBucketOptions};

/// The accessors both fixed tables share — partitions or keys stored, whether none is, the
/// capacity, whether closed — for their impls; the doc comments given are each table's own.
macro_rules! table_accessors {
    (
        $(#[$len_doc:meta])* fn len;
        $(#[$empty_doc:meta])* fn is_empty;
        $(#[$capacity_doc:meta])* fn capacity;
        $(#[$closed_doc:meta])* fn is_closed;
    ) => {
        $(#[$len_doc])*
        pub fn len(&self) -> usize {
            self.store.table.with(|t| t.map.len())
        }

        $(#[$empty_doc])*
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }

        $(#[$capacity_doc])*
        pub fn capacity(&self) -> usize {
            self.store.cap
        }

        $(#[$closed_doc])*
        pub fn is_closed(&self) -> bool {
            self.store.closed.load(Ordering::Acquire)
        }
    };
}

impl<K: Hash + Eq, V, const N: usize> Table for FnvIndexMap<K, V, N> {
    type Value = V;
    fn len(&self) -> usize {
        FnvIndexMap::len(self)
    }
    fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        FnvIndexMap::retain(self, |_, v| keep(v));
    }
    fn for_each(&self, f: impl FnMut(&V)) {
        self.values().for_each(f);
    }
}

/// A map and its eviction marks, behind the lock.
pub(crate) struct Locked<K, V, const N: usize> {
    map: FnvIndexMap<K, V, N>,
    marks: Marks,
}

impl<K: Hash + Eq, V, const N: usize> Locked<K, V, N> {
    fn new(now: u64, policy: &Policy) -> Self {
        Self {
            map: FnvIndexMap::new(),
            marks: Marks::new(now, policy),
        }
    }

    /// Sweeps if anything can be past the timeout; then finds `key`, or makes room for it and
    /// inserts what `create` makes. `None`: no room.
    fn find_or_insert(
        &mut self,
        policy: &Policy,
        cap: usize,
        now: u64,
        key: &K,
        create: impl FnOnce() -> (K, V),
        idle: impl Fn(&V) -> Idle,
    ) -> Option<&mut V> {
        if now >= self.marks.next_sweep {
            policy.sweep(&mut self.map, now, &mut self.marks, &idle);
        }
        if !self.map.contains_key(key) {
            if !policy.make_room(&mut self.map, cap, now, &mut self.marks, &idle) {
                return None;
            }
            let (k, v) = create();
            if let Entry::Vacant(e) = self.map.entry(k) {
                e.insert(v).ok()?;
            }
        }
        self.map.get_mut(key)
    }
}

/// What both fixed tables keep beside their rule: the map under the lock, the eviction policy,
/// the capacity (at most `N`) and the closed flag.
struct Store<K, V, const N: usize> {
    table: Lock<Locked<K, V, N>>,
    policy: Policy,
    cap: usize,
    closed: AtomicBool,
}

impl<K: Hash + Eq, V, const N: usize> Store<K, V, N> {
    /// An empty store for `config`, its sweeps dated from `now` (ns).
    fn new(config: &PartitionConfig, now: u64) -> Self {
        let policy = Policy::new(config, 1);
        Self {
            table: Lock::new(Locked::new(now, &policy)),
            policy,
            cap: fixed_cap::<N>(config),
            closed: AtomicBool::new(false),
        }
    }
}

impl<K: Hash + Eq + Clone, V, const N: usize> Store<K, V, N> {
    /// A settle's step for `key` at `now` (ns), under the table's lock: on a closed store
    /// nothing (it keeps no key); a refund (`debit` false) to a key no longer stored nothing
    /// either (an idle key is evicted only when it is as fresh, and one in debt is not
    /// idle); else `settle` on the key's value, stored again with `create` for a debit if
    /// there is room (else [`SettleError::DebtLimit`], nothing taken).
    fn settle_at(
        &self,
        now: u64,
        key: &K,
        debit: bool,
        create: impl FnOnce() -> V,
        idle: impl Fn(&V) -> Idle,
        settle: impl FnOnce(&mut V) -> Result<(), SettleError>,
    ) -> Result<(), SettleError> {
        self.table.with(|t| {
            if self.closed.load(Ordering::Acquire) || (!debit && !t.map.contains_key(key)) {
                return Ok(());
            }
            let create = || (key.clone(), create());
            let value = t
                .find_or_insert(&self.policy, self.cap, now, key, create, idle)
                .ok_or(SettleError::DebtLimit)?;
            settle(value)
        })
    }
}

impl<K, V, const N: usize> Store<K, V, N> {
    /// The `Debug` of the table named `name`: its capacity and whether it is closed.
    fn debug(&self, f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
        f.debug_struct(name)
            .field("capacity", &self.cap)
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Capacity: the configured one, at most `N`.
fn fixed_cap<const N: usize>(config: &PartitionConfig) -> usize {
    config.capacity.clamp(1, N)
}

fn idle_of<L: Limiter>(l: &L) -> Idle {
    match l.idle_duration() {
        Some(d) => Idle::For(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        None => Idle::Busy(None),
    }
}

/// A partitioned limiter with a full limiter per key in a fixed-capacity table of `N` partitions
/// (`N` a power of two): no heap, `no_std`, for firmware.
///
/// The same rules as [`Partitioned`](crate::Partitioned) — partition function, creation once
/// per key, capacity (here at most `N`) with a [`WhenFull`](crate::WhenFull) policy, lazy
/// eviction after the idle timeout, no insertion on a capacity rejection — but every call runs
/// under one lock, and there is no waiting. Leases of concurrency partitions remember their key
/// ([`FixedLease`]) and give their permits back through the table; a partition whose permits are
/// held is not idle, so it is never evicted while they are.
///
/// ```
/// use core::time::Duration;
/// use tollgate::*;
///
/// let clock = ManualClock::new();
/// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(1, Duration::from_secs(1))).unwrap();
/// // Up to 4 peers; a fifth is refused while the four are busy.
/// let limiter: FixedPartitioned<u8, _, _, _, 4> = FixedPartitioned::new(
///     move |peer: &u8| Partition::new(*peer, kind),
///     PartitionConfig::default().with_when_full(WhenFull::Reject),
///     &clock,
/// );
/// for peer in 0..4 {
///     let _ = limiter.try_acquire(&peer, 1).unwrap();
/// }
/// assert_eq!(limiter.try_acquire(&9, 1).unwrap_err().reason(), Reason::PartitionsFull);
/// assert_eq!(limiter.len(), 4);
/// ```
pub struct FixedPartitioned<K, L, P, C, const N: usize> {
    store: Store<K, L, N>,
    partitioner: P,
    clock: C,
}

impl<K: Hash + Eq, L, P, C: Clock, const N: usize> FixedPartitioned<K, L, P, C, N> {
    /// A partitioned limiter of at most `N` partitions (or `config.capacity`, if smaller),
    /// reading time from `clock`, with the partition function `partitioner`.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(1))).unwrap();
    /// let limiter: FixedPartitioned<u8, _, _, _, 8> =
    ///     FixedPartitioned::new(move |peer: &u8| Partition::new(*peer, kind), PartitionConfig::new(4), &clock);
    /// assert_eq!(limiter.capacity(), 4); // config.capacity < N
    /// assert!(limiter.try_acquire(&1, 2).is_ok());
    /// assert!(limiter.try_acquire(&1, 1).is_err()); // peer 1's window is used up
    /// assert!(limiter.try_acquire(&2, 1).is_ok());
    /// ```
    pub fn new<R: ?Sized, F>(partitioner: P, config: PartitionConfig, clock: C) -> Self
    where
        P: Fn(&R) -> Partition<K, F>,
        F: Factory<K, C, Limiter = L>,
    {
        Self {
            store: Store::new(&config, clock.now().as_nanos()),
            partitioner,
            clock,
        }
    }

    table_accessors! {
        /// Partitions stored now.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// # let clock = ManualClock::new();
        /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(1))).unwrap();
        /// let limiter: FixedPartitioned<u8, _, _, _, 8> =
        ///     FixedPartitioned::new(move |peer: &u8| Partition::new(*peer, kind), PartitionConfig::new(4), &clock);
        /// assert_eq!(limiter.len(), 0);
        /// let _ = limiter.try_acquire(&1, 1).unwrap();
        /// let _ = limiter.try_acquire(&2, 1).unwrap();
        /// let _ = limiter.try_acquire(&1, 1).unwrap(); // same partition
        /// assert_eq!(limiter.len(), 2);
        /// ```
        fn len;
        /// Whether no partition is stored.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// # let clock = ManualClock::new();
        /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(1))).unwrap();
        /// let limiter: FixedPartitioned<u8, _, _, _, 8> =
        ///     FixedPartitioned::new(move |peer: &u8| Partition::new(*peer, kind), PartitionConfig::new(4), &clock);
        /// assert!(limiter.is_empty());
        /// let _ = limiter.statistics(&1); // statistics store nothing
        /// assert!(limiter.is_empty());
        /// let _ = limiter.try_acquire(&1, 1).unwrap();
        /// assert!(!limiter.is_empty());
        /// ```
        fn is_empty;
        /// The most partitions stored at once.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// # let clock = ManualClock::new();
        /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(1))).unwrap();
        /// let limiter: FixedPartitioned<u8, _, _, _, 8> =
        ///     FixedPartitioned::new(move |peer: &u8| Partition::new(*peer, kind), PartitionConfig::new(4), &clock);
        /// assert_eq!(limiter.capacity(), 4);
        /// // The table's size `N` caps a larger configured capacity.
        /// let big: FixedPartitioned<u8, _, _, _, 8> =
        ///     FixedPartitioned::new(move |peer: &u8| Partition::new(*peer, kind), PartitionConfig::new(1_000), &clock);
        /// assert_eq!(big.capacity(), 8);
        /// ```
        fn capacity;
        /// Whether [`close`](Self::close) has been called.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// # let clock = ManualClock::new();
        /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(1))).unwrap();
        /// let limiter: FixedPartitioned<u8, _, _, _, 8> =
        ///     FixedPartitioned::new(move |peer: &u8| Partition::new(*peer, kind), PartitionConfig::new(4), &clock);
        /// assert!(!limiter.is_closed());
        /// limiter.close();
        /// assert!(limiter.is_closed());
        /// ```
        fn is_closed;
    }
}

impl<K, L, P, C, const N: usize> FixedPartitioned<K, L, P, C, N>
where
    K: Hash + Eq + Clone,
    L: Limiter + Release,
    C: Clock,
{
    /// Takes `permits` from `resource`'s partition now, creating the partition if it is new
    /// (and there is room: else [`Reason::PartitionsFull`], and nothing is stored).
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(1))).unwrap();
    /// let limiter: FixedPartitioned<u8, _, _, _, 8> =
    ///     FixedPartitioned::new(move |peer: &u8| Partition::new(*peer, kind), PartitionConfig::new(4), &clock);
    /// for peer in 0..4 {
    ///     let _ = limiter.try_acquire(&peer, 1).unwrap();
    /// }
    /// // Full of busy partitions: a fifth peer is refused and not stored.
    /// assert_eq!(limiter.try_acquire(&9, 1).unwrap_err().reason(), Reason::PartitionsFull);
    /// assert_eq!(limiter.len(), 4);
    /// ```
    pub fn try_acquire<R: ?Sized, F>(
        &self,
        resource: &R,
        permits: u32,
    ) -> Result<FixedLease<'_, K, L, N>, Rejection>
    where
        P: Fn(&R) -> Partition<K, F>,
        F: Factory<K, C, Limiter = L>,
    {
        let Partition { key, factory } = (self.partitioner)(resource);
        if self.is_closed() {
            return Err(Rejection::new(&Reason::Closed));
        }
        let now = self.clock.now().as_nanos();
        let granted = self.store.table.with(|t| {
            // Again under the lock, which `close` takes after setting the flag: a key is never
            // stored after `close` has emptied the table.
            if self.is_closed() {
                return Err(Rejection::new(&Reason::Closed));
            }
            let limiter = t
                .find_or_insert(
                    &self.store.policy,
                    self.store.cap,
                    now,
                    &key,
                    || {
                        let l = factory.create(&key, &self.clock);
                        (key.clone(), l)
                    },
                    idle_of,
                )
                .ok_or(Rejection::new(&Reason::PartitionsFull))?;
            Ok::<_, Rejection>(limiter.try_acquire(permits)?.into_parts())
        });
        let (permits, stamp, returns) = granted?;
        Ok(FixedLease {
            table: &self.store.table,
            key,
            returns,
            stamp,
            permits,
        })
    }

    /// Settles `lease`, granted for `resource`, to its true cost `actual` (see
    /// [`Lease::settle`](crate::Lease::settle)), with its partition: a refund goes back to
    /// the partition's limiter where its algorithm can take it, a debit is taken from it, into
    /// debt where the limiter keeps one. A partition evicted meanwhile was idle (a full
    /// bucket, an empty window, every permit free): a refund has nothing to give back, and a
    /// debit makes the partition again, if there is room (else [`SettleError::DebtLimit`],
    /// nothing taken). On a closed limiter, which keeps no partition, a settle changes nothing.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let kind = PartitionKind::token_bucket(
    ///     TokenBucketOptions::new(100, 100, Duration::from_secs(60))).unwrap();
    /// let limiter: FixedPartitioned<u8, _, _, _, 8> =
    ///     FixedPartitioned::new(move |peer: &u8| Partition::new(*peer, kind), PartitionConfig::new(4), &clock);
    /// let mut lease = limiter.try_acquire(&7, 40).unwrap();
    /// limiter.settle(&7, &mut lease, 10).unwrap(); // 30 tokens back to peer 7
    /// assert_eq!(limiter.statistics(&7).available_permits, 90);
    /// limiter.settle(&7, &mut lease, 150).unwrap(); // 140 more: 50 into debt
    /// assert_eq!(limiter.statistics(&7).available_permits, 0);
    /// assert!(limiter.try_acquire(&7, 1).is_err());
    /// ```
    pub fn settle<R: ?Sized, F>(
        &self,
        resource: &R,
        lease: &mut FixedLease<'_, K, L, N>,
        actual: u32,
    ) -> Result<(), SettleError>
    where
        P: Fn(&R) -> Partition<K, F>,
        F: Factory<K, C, Limiter = L>,
    {
        let held = lease.permits;
        if actual == held {
            return Ok(());
        }
        let Partition { factory, .. } = (self.partitioner)(resource);
        let key = &lease.key;
        let now = self.clock.now().as_nanos();
        self.store.settle_at(
            now,
            key,
            actual > held,
            || factory.create(key, &self.clock),
            idle_of,
            |limiter| limiter.settle(Settlement::new(held, actual, lease.stamp)),
        )?;
        lease.permits = actual;
        Ok(())
    }

    /// A snapshot of `resource`'s partition's counters (a fresh partition's, not stored, if the
    /// key has none).
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(1))).unwrap();
    /// let limiter: FixedPartitioned<u8, _, _, _, 8> =
    ///     FixedPartitioned::new(move |peer: &u8| Partition::new(*peer, kind), PartitionConfig::new(4), &clock);
    /// let _ = limiter.try_acquire(&1, 2).unwrap();
    /// let _ = limiter.try_acquire(&1, 1).unwrap_err();
    /// let stats = limiter.statistics(&1);
    /// assert_eq!((stats.available_permits, stats.total_successful, stats.total_failed), (0, 1, 1));
    /// assert_eq!(limiter.statistics(&2).available_permits, 2); // a fresh partition's
    /// ```
    pub fn statistics<R: ?Sized, F>(&self, resource: &R) -> Statistics
    where
        P: Fn(&R) -> Partition<K, F>,
        F: Factory<K, C, Limiter = L>,
    {
        let Partition { key, factory } = (self.partitioner)(resource);
        match self
            .store
            .table
            .with(|t| t.map.get(&key).map(|l| l.statistics()))
        {
            Some(s) => s,
            None => factory.create(&key, &self.clock).statistics(),
        }
    }

    /// Evicts every partition idle for longer than the idle timeout, now.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(1))).unwrap();
    /// let limiter: FixedPartitioned<u8, _, _, _, 8> =
    ///     FixedPartitioned::new(move |peer: &u8| Partition::new(*peer, kind), PartitionConfig::new(4), &clock);
    /// let _ = limiter.try_acquire(&1, 1).unwrap();
    /// clock.advance(Duration::from_secs(30)); // idle far past the 10 s timeout
    /// assert_eq!(limiter.len(), 1); // eviction is lazy...
    /// limiter.evict_idle(); // ...unless asked for
    /// assert_eq!(limiter.len(), 0);
    /// ```
    pub fn evict_idle(&self) {
        let now = self.clock.now().as_nanos();
        self.store.table.with(|t| {
            self.store
                .policy
                .sweep(&mut t.map, now, &mut t.marks, idle_of)
        });
    }

    /// Closes the limiter and every partition; drops the partitions. Leases already granted stay
    /// valid (their permits have nowhere to go back to, and need not).
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(1))).unwrap();
    /// let limiter: FixedPartitioned<u8, _, _, _, 8> =
    ///     FixedPartitioned::new(move |peer: &u8| Partition::new(*peer, kind), PartitionConfig::new(4), &clock);
    /// let _ = limiter.try_acquire(&1, 1).unwrap();
    /// limiter.close();
    /// assert_eq!(limiter.len(), 0); // partitions dropped
    /// assert_eq!(limiter.try_acquire(&1, 1).unwrap_err().reason(), Reason::Closed);
    /// ```
    pub fn close(&self) {
        self.store.closed.store(true, Ordering::Release);
        self.store.table.with(|t| {
            t.map.values().for_each(|l| l.close());
            t.map.clear();
        });
    }
}

impl<R, K, L, P, F, C, const N: usize> PartitionedLimiter<R> for FixedPartitioned<K, L, P, C, N>
where
    R: ?Sized,
    P: Fn(&R) -> Partition<K, F>,
    F: Factory<K, C, Limiter = L>,
    K: Hash + Eq + Clone,
    L: Limiter + Release,
    C: Clock,
{
    partitioned_by_inherent!(
        FixedPartitioned, R, type Lease<'a> = FixedLease<'a, K, L, N>;
        settle: |this, resource, lease, actual| this.settle(resource, lease, actual)
    );
}

impl<K, L, P, C, const N: usize> fmt::Debug for FixedPartitioned<K, L, P, C, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.store.debug(f, "FixedPartitioned")
    }
}

/// The lease of a [`FixedPartitioned`] limiter: when it holds permits to give back (a
/// concurrency partition), it holds its key, and returns them to the key's partition when
/// dropped.
///
/// ```
/// use tollgate::*;
///
/// let clock = ManualClock::new();
/// let kind = PartitionKind::concurrency(ConcurrencyOptions::new(2)).unwrap();
/// let limiter: FixedPartitioned<u8, _, _, _, 8> =
///     FixedPartitioned::new(move |peer: &u8| Partition::new(*peer, kind), PartitionConfig::default(), &clock);
/// let lease = limiter.try_acquire(&3, 2).unwrap();
/// assert_eq!((lease.permits(), lease.returns_permits()), (2, true));
/// drop(lease); // back to peer 3's partition, through the table
/// assert_eq!(limiter.statistics(&3).available_permits, 2);
/// ```
#[must_use = "dropping a lease releases its permits at once"]
pub struct FixedLease<'a, K: Hash + Eq, L: Release, const N: usize> {
    table: &'a Lock<Locked<K, L, N>>,
    key: K,
    /// Whether dropping the lease gives its permits back to the key's partition.
    returns: bool,
    /// The partition limiter's mark of the grant, for a settle.
    stamp: u64,
    permits: u32,
}

impl<K: Hash + Eq, L: Release, const N: usize> FixedLease<'_, K, L, N> {
    /// The number of permits this lease holds.
    ///
    /// ```
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let pool = PartitionKind::concurrency(ConcurrencyOptions::new(4)).unwrap();
    /// let window = PartitionKind::fixed_window(FixedWindowOptions::new(4, core::time::Duration::from_secs(1))).unwrap();
    /// let limiter: FixedPartitioned<u8, _, _, _, 8> = FixedPartitioned::new(
    ///     move |peer: &u8| Partition::new(*peer, if *peer < 100 { pool } else { window }),
    ///     PartitionConfig::default(),
    ///     &clock,
    /// );
    /// let lease = limiter.try_acquire(&7, 3).unwrap();
    /// assert_eq!(lease.permits(), 3);
    /// assert_eq!(limiter.statistics(&7).available_permits, 1);
    /// ```
    pub const fn permits(&self) -> u32 {
        self.permits
    }

    /// Whether dropping this lease returns permits to its partition.
    ///
    /// ```
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let pool = PartitionKind::concurrency(ConcurrencyOptions::new(4)).unwrap();
    /// let window = PartitionKind::fixed_window(FixedWindowOptions::new(4, core::time::Duration::from_secs(1))).unwrap();
    /// let limiter: FixedPartitioned<u8, _, _, _, 8> = FixedPartitioned::new(
    ///     move |peer: &u8| Partition::new(*peer, if *peer < 100 { pool } else { window }),
    ///     PartitionConfig::default(),
    ///     &clock,
    /// );
    /// assert!(limiter.try_acquire(&7, 1).unwrap().returns_permits()); // a concurrency partition
    /// assert!(!limiter.try_acquire(&200, 1).unwrap().returns_permits()); // a window: spent
    /// ```
    pub const fn returns_permits(&self) -> bool {
        self.returns
    }
}

impl<K: Hash + Eq, L: Release, const N: usize> Drop for FixedLease<'_, K, L, N> {
    fn drop(&mut self) {
        if self.returns {
            let n = self.permits;
            self.table.with(|t| {
                if let Some(l) = t.map.get(&self.key) {
                    l.release_stamped(n, self.stamp);
                }
            });
        }
    }
}

impl<K: Hash + Eq, L: Release, const N: usize> fmt::Debug for FixedLease<'_, K, L, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FixedLease")
            .field("permits", &self.permits)
            .field("returns_permits", &self.returns_permits())
            .finish()
    }
}

/// A token bucket or fixed window per key in a fixed-capacity table of `N` keys (`N` a power of
/// two): the compact keyed form without a heap — per key, the key and a 16-byte word (plus the
/// table's 4-byte index and 2-byte hash).
///
/// The rules of [`KeyedLimiter`](crate::KeyedLimiter) (a key behaves as its own token bucket or
/// fixed window; periods count from this limiter's creation; a new key's bucket is full; idle
/// keys are evicted lazily, which changes no decision), with every call under one lock.
///
/// ```
/// use core::time::Duration;
/// use tollgate::*;
///
/// let clock = ManualClock::new();
/// let opts = TokenBucketOptions::new(2, 1, Duration::from_millis(100));
/// let limiter: FixedKeyedLimiter<u16, _, 64> =
///     FixedKeyedLimiter::token_bucket(opts, PartitionConfig::default(), &clock).unwrap();
/// let _ = limiter.try_acquire(&0x42, 2).unwrap();
/// let r = limiter.try_acquire(&0x42, 1).unwrap_err();
/// assert_eq!(r.retry_after(), Some(Duration::from_millis(100)));
/// assert_eq!(limiter.statistics(&0x43).available_permits, 2);
/// ```
pub struct FixedKeyedLimiter<K, C, const N: usize> {
    store: Store<K, u128, N>,
    bucket: KeyedBucket,
    clock: C,
    counters: Counters,
}

impl<K: Hash + Eq, C: Clock, const N: usize> FixedKeyedLimiter<K, C, N> {
    /// A token bucket per key, reading time from `clock`.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_millis(100));
    /// let limiter: FixedKeyedLimiter<u16, _, 64> =
    ///     FixedKeyedLimiter::token_bucket(opts, PartitionConfig::new(16), &clock).unwrap();
    /// let _ = limiter.try_acquire(&1, 2).unwrap();
    /// assert!(limiter.try_acquire(&1, 1).is_err());
    /// clock.advance(Duration::from_millis(100)); // one token back
    /// assert!(limiter.try_acquire(&1, 1).is_ok());
    /// ```
    pub fn token_bucket(
        options: TokenBucketOptions,
        config: PartitionConfig,
        clock: C,
    ) -> Result<Self, OptionsError> {
        let bucket = KeyedBucket::token_bucket(&options, clock.now())?;
        Ok(Self::build(bucket, config, clock))
    }

    /// A fixed window per key, reading time from `clock`.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = FixedWindowOptions::new(3, Duration::from_secs(60));
    /// let limiter: FixedKeyedLimiter<u16, _, 64> =
    ///     FixedKeyedLimiter::fixed_window(opts, PartitionConfig::default(), &clock).unwrap();
    /// let _ = limiter.try_acquire(&1, 3).unwrap();
    /// assert!(limiter.try_acquire(&1, 1).is_err());
    /// clock.advance(Duration::from_secs(60)); // the next window
    /// assert!(limiter.try_acquire(&1, 3).is_ok());
    /// ```
    pub fn fixed_window(
        options: FixedWindowOptions,
        config: PartitionConfig,
        clock: C,
    ) -> Result<Self, OptionsError> {
        Self::token_bucket(options.as_bucket(), config, clock)
    }

    fn build(bucket: KeyedBucket, config: PartitionConfig, clock: C) -> Self {
        Self {
            store: Store::new(&config, clock.now().as_nanos()),
            bucket,
            clock,
            counters: Counters::new(),
        }
    }

    /// The most permits one request can take (the token limit, or permits per window).
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_millis(100));
    /// let limiter: FixedKeyedLimiter<u16, _, 64> =
    ///     FixedKeyedLimiter::token_bucket(opts, PartitionConfig::new(16), &clock).unwrap();
    /// assert_eq!(limiter.limit(), 2);
    /// assert_eq!(limiter.try_acquire(&1, 3).unwrap_err().retry_after(), None); // never
    /// ```
    pub fn limit(&self) -> u32 {
        self.bucket.limit()
    }

    /// The replenishment period, or the window.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_millis(100));
    /// let limiter: FixedKeyedLimiter<u16, _, 64> =
    ///     FixedKeyedLimiter::token_bucket(opts, PartitionConfig::new(16), &clock).unwrap();
    /// assert_eq!(limiter.period(), Duration::from_millis(100));
    /// ```
    pub fn period(&self) -> Duration {
        self.bucket.period()
    }

    /// Takes `permits` from `key`'s bucket now. A new key is stored (cloned) when it takes
    /// permits, if there is room: else [`Reason::PartitionsFull`], and nothing is stored.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_millis(100));
    /// let limiter: FixedKeyedLimiter<u16, _, 64> =
    ///     FixedKeyedLimiter::token_bucket(opts, PartitionConfig::new(16), &clock).unwrap();
    /// assert!(limiter.try_acquire(&0x42, 2).is_ok());
    /// let r = limiter.try_acquire(&0x42, 1).unwrap_err();
    /// assert_eq!(r.reason(), Reason::Exhausted);
    /// assert_eq!(r.retry_after(), Some(Duration::from_millis(100)));
    /// assert_eq!(limiter.len(), 1);
    /// ```
    pub fn try_acquire(&self, key: &K, permits: u32) -> Result<Lease<'static>, Rejection>
    where
        K: Clone,
    {
        match self.decide(key, permits) {
            Ok(()) => self.counters.count_granted(Lease::unreleased(permits)),
            Err(r) => self.counters.count_rejected(r),
        }
    }

    fn decide(&self, key: &K, permits: u32) -> Result<(), Rejection>
    where
        K: Clone,
    {
        if self.store.closed.load(Ordering::Acquire) {
            return Err(Rejection::new(&Reason::Closed));
        }
        self.bucket.check(permits)?;
        let now = self.clock.now();
        let b = &self.bucket;
        self.store.table.with(|t| {
            // Again under the lock, which `close` takes after setting the flag.
            if self.store.closed.load(Ordering::Acquire) {
                return Err(Rejection::new(&Reason::Closed));
            }
            if permits == 0 && !t.map.contains_key(key) {
                return Ok(()); // a fresh bucket is full
            }
            let idle = |w: &u128| b.idle(*w, now);
            let word = t
                .find_or_insert(
                    &self.store.policy,
                    self.store.cap,
                    now.as_nanos(),
                    key,
                    || (key.clone(), b.fresh()),
                    idle,
                )
                .ok_or(Rejection::new(&Reason::PartitionsFull))?;
            b.take_plain(word, now, permits)
        })
    }

    /// Settles `lease`, granted for `key` by this limiter, to its true cost `actual` (see
    /// [`Lease::settle`]): a refund gives the difference back to `key`'s bucket as if it had
    /// never been taken (never above the limit), a debit takes the extra, into debt down to
    /// one limit (past it: [`SettleError::DebtLimit`], nothing taken). A key no longer stored
    /// was full (an idle key is evicted only when full, and a key in debt is not idle): a
    /// refund has nothing to give back, a debit stores the key again, if there is room (else
    /// [`SettleError::DebtLimit`]). On a closed limiter, which keeps no key, a settle changes
    /// nothing. A key's lease refers to no limiter, so it settles here, with its key.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(1_000, 1_000, Duration::from_secs(60));
    /// let tokens: FixedKeyedLimiter<u16, _, 64> =
    ///     FixedKeyedLimiter::token_bucket(opts, PartitionConfig::new(16), &clock).unwrap();
    /// let mut call = tokens.try_acquire(&7, 100).unwrap();
    /// tokens.settle(&7, &mut call, 30).unwrap(); // used 30: 70 back
    /// assert_eq!(tokens.statistics(&7).available_permits, 970);
    /// tokens.settle(&7, &mut call, 1_500).unwrap(); // used 1,500: 530 into debt
    /// assert_eq!(tokens.statistics(&7).available_permits, 0);
    /// assert_eq!(tokens.settle(&7, &mut call, 3_000), Err(SettleError::DebtLimit));
    /// assert_eq!(call.permits(), 1_500);
    /// ```
    pub fn settle(&self, key: &K, lease: &mut Lease<'_>, actual: u32) -> Result<(), SettleError>
    where
        K: Clone,
    {
        self.settle_within(key, lease, actual, u32::MAX)
    }

    /// [`settle`](Self::settle), leaving `key` owing at most `max_debt` tokens (see
    /// [`Lease::settle_within`]).
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let tokens: FixedKeyedLimiter<u16, _, 64> = FixedKeyedLimiter::token_bucket(
    ///     TokenBucketOptions::new(1_000, 1_000, Duration::from_secs(60)),
    ///     PartitionConfig::new(16),
    ///     &clock,
    /// )
    /// .unwrap();
    /// let mut call = tokens.try_acquire(&7, 1_000).unwrap();
    /// // Tenant 7 may owe at most 50 tokens: 1,060 used is refused, 1,050 taken.
    /// for (used, taken) in [(1_060, false), (1_050, true)] {
    ///     assert_eq!(tokens.settle_within(&7, &mut call, used, 50).is_ok(), taken);
    /// }
    /// ```
    pub fn settle_within(
        &self,
        key: &K,
        lease: &mut Lease<'_>,
        actual: u32,
        max_debt: u32,
    ) -> Result<(), SettleError>
    where
        K: Clone,
    {
        lease.settle_with_within(&FixedKeySettle { limiter: self, key }, actual, max_debt)
    }

    /// [`settle`](Self::settle) as `s` says, for `key`.
    fn settle_key(&self, key: &K, s: Settlement) -> Result<(), SettleError>
    where
        K: Clone,
    {
        let now = self.clock.now();
        let b = &self.bucket;
        self.store.settle_at(
            now.as_nanos(),
            key,
            s.actual > s.held,
            || b.fresh(),
            |w: &u128| b.idle(*w, now),
            |word| b.settle_plain(word, now, s),
        )
    }

    /// `key`'s available tokens (the limit if it is not stored) and the limiter's totals over
    /// all keys, as [`KeyedLimiter::statistics`](crate::KeyedLimiter).
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_millis(100));
    /// let limiter: FixedKeyedLimiter<u16, _, 64> =
    ///     FixedKeyedLimiter::token_bucket(opts, PartitionConfig::new(16), &clock).unwrap();
    /// let _ = limiter.try_acquire(&1, 2).unwrap();
    /// let _ = limiter.try_acquire(&1, 1).unwrap_err();
    /// assert_eq!(limiter.statistics(&1).available_permits, 0);
    /// let other = limiter.statistics(&2); // not stored: a full bucket, and the totals
    /// assert_eq!((other.available_permits, other.total_successful, other.total_failed), (2, 1, 1));
    /// ```
    pub fn statistics(&self, key: &K) -> Statistics {
        let now = self.clock.now();
        let available = self
            .store
            .table
            .with(|t| t.map.get(key).map(|w| self.bucket.available(*w, now)))
            .unwrap_or(u64::from(self.bucket.limit()));
        Statistics {
            available_permits: available,
            queued_permits: 0,
            total_successful: self.counters.successful(),
            total_failed: self.counters.failed(),
        }
    }

    /// How long `key`'s bucket has been full; `None` while it is not, and for a key not stored.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_millis(100));
    /// let limiter: FixedKeyedLimiter<u16, _, 64> =
    ///     FixedKeyedLimiter::token_bucket(opts, PartitionConfig::new(16), &clock).unwrap();
    /// let _ = limiter.try_acquire(&1, 2).unwrap();
    /// assert_eq!(limiter.idle_duration(&1), None); // refilling
    /// clock.advance(Duration::from_secs(1)); // full again after 200 ms
    /// assert_eq!(limiter.idle_duration(&1), Some(Duration::from_millis(800)));
    /// assert_eq!(limiter.idle_duration(&2), None);
    /// ```
    pub fn idle_duration(&self, key: &K) -> Option<Duration> {
        let now = self.clock.now();
        self.store
            .table
            .with(|t| t.map.get(key).map(|w| self.bucket.idle_duration(*w, now)))
            .flatten()
    }

    /// Resets `key`: forgets its state, so that its next request finds a full bucket (an
    /// empty window), exactly as a key never seen. Whether it was stored.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let opts = FixedWindowOptions::new(2, Duration::from_secs(60));
    /// let limiter: FixedKeyedLimiter<u16, _, 64> =
    ///     FixedKeyedLimiter::fixed_window(opts, PartitionConfig::default(), &clock).unwrap();
    /// let _ = limiter.try_acquire(&7, 2).unwrap();
    /// assert!(limiter.try_acquire(&7, 1).is_err());
    /// assert!(limiter.remove(&7));
    /// assert!(limiter.try_acquire(&7, 2).is_ok());
    /// assert!(!limiter.remove(&8)); // never seen
    /// ```
    pub fn remove(&self, key: &K) -> bool {
        self.store.table.with(|t| t.map.swap_remove(key).is_some())
    }

    table_accessors! {
        /// Keys stored now.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// # let clock = ManualClock::new();
        /// let opts = TokenBucketOptions::new(2, 1, Duration::from_millis(100));
        /// let limiter: FixedKeyedLimiter<u16, _, 64> =
        ///     FixedKeyedLimiter::token_bucket(opts, PartitionConfig::new(16), &clock).unwrap();
        /// let _ = limiter.try_acquire(&1, 1).unwrap();
        /// let _ = limiter.try_acquire(&2, 1).unwrap();
        /// let _ = limiter.statistics(&3); // stores nothing
        /// assert_eq!(limiter.len(), 2);
        /// ```
        fn len;
        /// Whether no key is stored.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// # let clock = ManualClock::new();
        /// let opts = TokenBucketOptions::new(2, 1, Duration::from_millis(100));
        /// let limiter: FixedKeyedLimiter<u16, _, 64> =
        ///     FixedKeyedLimiter::token_bucket(opts, PartitionConfig::new(16), &clock).unwrap();
        /// assert!(limiter.is_empty());
        /// let _ = limiter.try_acquire(&1, 1).unwrap();
        /// assert!(!limiter.is_empty());
        /// ```
        fn is_empty;
        /// The most keys stored at once.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// # let clock = ManualClock::new();
        /// let opts = TokenBucketOptions::new(2, 1, Duration::from_millis(100));
        /// let limiter: FixedKeyedLimiter<u16, _, 64> =
        ///     FixedKeyedLimiter::token_bucket(opts, PartitionConfig::new(16), &clock).unwrap();
        /// assert_eq!(limiter.capacity(), 16); // config.capacity, below N = 64
        /// ```
        fn capacity;
        /// Whether [`close`](Self::close) has been called.
        ///
        /// ```
        /// # use core::time::Duration;
        /// # use tollgate::*;
        /// # let clock = ManualClock::new();
        /// let opts = TokenBucketOptions::new(2, 1, Duration::from_millis(100));
        /// let limiter: FixedKeyedLimiter<u16, _, 64> =
        ///     FixedKeyedLimiter::token_bucket(opts, PartitionConfig::new(16), &clock).unwrap();
        /// assert!(!limiter.is_closed());
        /// limiter.close();
        /// assert!(limiter.is_closed());
        /// ```
        fn is_closed;
    }

    /// Evicts every key idle for longer than the idle timeout, now.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_millis(100));
    /// let limiter: FixedKeyedLimiter<u16, _, 64> =
    ///     FixedKeyedLimiter::token_bucket(opts, PartitionConfig::new(16), &clock).unwrap();
    /// let _ = limiter.try_acquire(&1, 2).unwrap();
    /// clock.advance(Duration::from_secs(30)); // full again, and idle past the 10 s timeout
    /// limiter.evict_idle();
    /// assert!(limiter.is_empty());
    /// ```
    pub fn evict_idle(&self) {
        let now = self.clock.now();
        let b = &self.bucket;
        self.store.table.with(|t| {
            self.store
                .policy
                .sweep(&mut t.map, now.as_nanos(), &mut t.marks, |w| {
                    b.idle(*w, now)
                })
        });
    }

    /// Closes the limiter (later requests: [`Reason::Closed`]) and drops the stored keys.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_millis(100));
    /// let limiter: FixedKeyedLimiter<u16, _, 64> =
    ///     FixedKeyedLimiter::token_bucket(opts, PartitionConfig::new(16), &clock).unwrap();
    /// let _ = limiter.try_acquire(&1, 1).unwrap();
    /// limiter.close();
    /// assert!(limiter.is_empty());
    /// assert_eq!(limiter.try_acquire(&1, 1).unwrap_err().reason(), Reason::Closed);
    /// ```
    pub fn close(&self) {
        self.store.closed.store(true, Ordering::Release);
        self.store.table.with(|t| t.map.clear());
    }
}

impl<K, C, const N: usize> PartitionedLimiter<K> for FixedKeyedLimiter<K, C, N>
where
    K: Hash + Eq + Clone,
    C: Clock,
{
    partitioned_by_inherent!(
        FixedKeyedLimiter, K, type Lease<'a> = Lease<'static>;
        settle: |this, key, lease, actual| this.settle(key, lease, actual)
    );
}

/// A key of a [`FixedKeyedLimiter`] as [`Lease::settle_with`] settles through it.
struct FixedKeySettle<'a, K, C, const N: usize> {
    limiter: &'a FixedKeyedLimiter<K, C, N>,
    key: &'a K,
}

impl<K: Hash + Eq + Clone, C: Clock, const N: usize> Release for FixedKeySettle<'_, K, C, N> {
    /// A key's lease returns nothing (rate limiting).
    fn release(&self, _: u32) {}

    fn settle(&self, s: Settlement) -> Result<(), SettleError> {
        self.limiter.settle_key(self.key, s)
    }
}

impl<K, C, const N: usize> fmt::Debug for FixedKeyedLimiter<K, C, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.store.debug(f, "FixedKeyedLimiter")
    }
}
