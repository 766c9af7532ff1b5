//! [`Partitioned`]: a full limiter per key, in the growable sharded store (feature `std`).

use core::fmt;
use core::future::Future;
use core::hash::{BuildHasher, Hash};
use core::time::Duration;
use std::hash::RandomState;
use std::sync::Arc;

use super::evict::Idle;
use super::shards::{Keyed, Shards};
use super::{Factory, Partition, PartitionConfig, PartitionedLimiter};
use crate::clock::{Clock, StdClock};
use crate::lease::{Reason, Rejection, Release, Statistics};
use crate::limiter::AcquireAsync;
use crate::limiter::{Limiter, Replenishing};
use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// A partition's limiter, made at most once, outside the shard's lock: a caller of the same key
/// that finds it being made waits for it; callers of other keys never do.
struct Once<L> {
    value: std::sync::OnceLock<L>,
    /// Under loom, a modelled lock serializes the makers, so that the `OnceLock` (which loom does
    /// not see) never blocks, and orders the readers after them.
    #[cfg(loom)]
    init: loom::sync::Mutex<()>,
}

impl<L> Once<L> {
    fn new() -> Self {
        Self {
            value: std::sync::OnceLock::new(),
            #[cfg(loom)]
            init: loom::sync::Mutex::new(()),
        }
    }

    #[inline]
    fn get(&self) -> Option<&L> {
        // Under loom, readers take the modelled lock too, so that loom sees the maker's writes
        // happen before their reads (the `OnceLock`'s own synchronization is invisible to it).
        #[cfg(loom)]
        let _init = self
            .init
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.value.get()
    }

    fn get_or_init(&self, make: impl FnOnce() -> L) -> &L {
        if let Some(l) = self.value.get() {
            return l;
        }
        #[cfg(loom)]
        let _init = self
            .init
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.value.get_or_init(make)
    }
}

/// A stored partition: its key, its limiter (made once, by the first caller of the key, outside
/// the shard's lock), and how many callers hold it against eviction: while its limiter is being
/// made, and while waiting acquisitions are between finding it and joining its queue.
pub(crate) struct Slot<K, L> {
    key: K,
    limiter: Once<L>,
    pins: AtomicU64,
}

impl<K, L> Keyed<K> for Arc<Slot<K, L>> {
    fn key(&self) -> &K {
        &self.key
    }
}

impl<K, L: Release> Release for Slot<K, L> {
    fn release(&self, permits: u32) {
        // Only a made limiter grants leases.
        if let Some(l) = self.limiter.get() {
            l.release(permits);
        }
    }
    fn release_stamped(&self, permits: u32, stamp: u64) {
        if let Some(l) = self.limiter.get() {
            l.release_stamped(permits, stamp);
        }
    }
    fn report(&self, stamp: u64, outcome: crate::lease::Outcome) -> u64 {
        match self.limiter.get() {
            Some(l) => l.report(stamp, outcome),
            None => stamp,
        }
    }
    fn settle(&self, s: crate::lease::Settlement) -> Result<(), crate::lease::SettleError> {
        match self.limiter.get() {
            Some(l) => l.settle(s),
            None => Err(crate::lease::SettleError::Unsupported),
        }
    }
}

/// A pinned slot: unpinned when dropped.
struct Pinned<K, L>(Arc<Slot<K, L>>);

impl<K, L> Pinned<K, L> {
    /// Pins `slot` (the caller holds its shard's lock, so no eviction is judging it).
    fn new(slot: &Arc<Slot<K, L>>) -> Self {
        slot.pins.fetch_add(1, Ordering::AcqRel);
        Self(slot.clone())
    }
}

impl<K, L> Pinned<K, L> {
    /// The limiter of a slot pinned by [`Partitioned::pinned`], which returns only slots whose
    /// limiter is made (and a made limiter is never unmade).
    fn made(&self) -> &L {
        self.0
            .limiter
            .get()
            .expect("`pinned` returns only slots whose limiter is made")
    }
}

impl<K, L> Drop for Pinned<K, L> {
    fn drop(&mut self) {
        self.0.pins.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The lease of a [`Partitioned`] limiter. It owns a handle to its partition's limiter when it
/// has permits to give back (a concurrency partition), so it stays valid — and gives them back —
/// even if the partition is evicted or the partitioned limiter closed meanwhile. It can move to
/// another thread or task.
///
/// ```
/// use tollgate::*;
///
/// let kind = PartitionKind::concurrency(ConcurrencyOptions::new(1)).unwrap();
/// let limiter = Partitioned::new(move |id: &u32| Partition::new(*id, kind), PartitionConfig::default());
/// let lease = limiter.try_acquire(&7, 1).unwrap();
/// assert!(lease.returns_permits());
/// limiter.close(); // the partition is dropped from the map; the lease still holds it
/// std::thread::spawn(move || drop(lease)).join().unwrap();
/// ```
#[must_use = "dropping a lease releases its permits at once"]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub struct PartitionLease<K, L: Release> {
    permits: u32,
    /// Whether dropping the lease releases its permits to the partition.
    returns: bool,
    /// The partition limiter's mark of the grant, for a settle.
    stamp: u64,
    /// The partition (`None` once moved into an owned lease).
    slot: Option<Arc<Slot<K, L>>>,
}

impl<K, L: Release> PartitionLease<K, L> {
    /// The lease of `slot` for what its limiter granted.
    fn of(lease: crate::lease::Lease<'_>, slot: &Arc<Slot<K, L>>) -> Self {
        let (permits, stamp, returns) = lease.into_parts();
        Self {
            permits,
            returns,
            stamp,
            slot: Some(slot.clone()),
        }
    }

    /// [`Lease::settle`](crate::Lease::settle): settles this lease to its true cost `actual`, with its partition
    /// (which it holds, even if the partition was evicted meanwhile).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let kind = PartitionKind::token_bucket(
    ///     TokenBucketOptions::new(100, 100, Duration::from_secs(60))).unwrap();
    /// let limiter = Partitioned::new(move |id: &u32| Partition::new(*id, kind), PartitionConfig::default());
    /// let mut lease = limiter.try_acquire(&7, 40).unwrap();
    /// lease.settle(10).unwrap(); // 30 tokens back to partition 7
    /// assert!(limiter.try_acquire(&7, 90).is_ok());
    /// ```
    pub fn settle(&mut self, actual: u32) -> Result<(), crate::lease::SettleError> {
        self.settle_within(actual, u32::MAX)
    }

    /// [`settle`](Self::settle), owing at most `max_debt` permits after it (see
    /// [`Lease::settle_within`](crate::Lease::settle_within)).
    pub fn settle_within(
        &mut self,
        actual: u32,
        max_debt: u32,
    ) -> Result<(), crate::lease::SettleError> {
        let s = crate::lease::Settlement::new(self.permits, actual, self.stamp).within(max_debt);
        crate::lease::settle_count(&mut self.permits, s, self.slot.as_deref())
    }
}

impl<K, L: Release> PartitionLease<K, L> {
    /// [`Lease::dropped`](crate::Lease::dropped): the call made under this lease was dropped
    /// for overload (a partition of [`AdaptiveLimiter`](crate::adaptive::AdaptiveLimiter)s
    /// backs off; any other ignores it).
    pub fn dropped(&mut self) {
        self.report(crate::lease::Outcome::Dropped);
    }

    /// [`Lease::ignore`](crate::Lease::ignore): the call says nothing about capacity.
    pub fn ignore(&mut self) {
        self.report(crate::lease::Outcome::Ignored);
    }

    fn report(&mut self, outcome: crate::lease::Outcome) {
        if let Some(slot) = &self.slot {
            self.stamp = slot.report(self.stamp, outcome) & crate::lease::STAMP_MASK;
        }
    }

    /// The number of permits this lease holds.
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let kind = PartitionKind::concurrency(ConcurrencyOptions::new(3)).unwrap();
    /// let limiter = Partitioned::new(move |id: &u32| Partition::new(*id, kind), PartitionConfig::default());
    /// assert_eq!(limiter.try_acquire(&7, 2).unwrap().permits(), 2);
    /// ```
    pub const fn permits(&self) -> u32 {
        self.permits
    }

    /// Whether dropping this lease returns permits to its partition (a concurrency partition's
    /// do; a rate partition's have nothing to return).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(3, Duration::from_secs(1))).unwrap();
    /// let limiter = Partitioned::new(move |id: &u32| Partition::new(*id, kind), PartitionConfig::default());
    /// assert!(!limiter.try_acquire(&7, 1).unwrap().returns_permits());
    /// ```
    pub const fn returns_permits(&self) -> bool {
        self.returns
    }
}

impl<K, L> PartitionLease<K, L>
where
    K: Send + Sync + 'static,
    L: Release + Send + Sync + 'static,
{
    /// The same lease as an [`OwnedLease`](crate::OwnedLease), whose type does not name the
    /// partition's: it holds the same handle to the partition (none when nothing comes back)
    /// and gives the same permits back when dropped.
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let kind = PartitionKind::concurrency(ConcurrencyOptions::new(1)).unwrap();
    /// let limiter = Partitioned::new(move |id: &u32| Partition::new(*id, kind), PartitionConfig::default());
    /// let owned: OwnedLease = limiter.try_acquire(&7, 1).unwrap().into_owned();
    /// assert!(limiter.try_acquire(&7, 1).is_err());
    /// drop(owned);
    /// assert!(limiter.try_acquire(&7, 1).is_ok());
    /// ```
    pub fn into_owned(mut self) -> crate::lease::OwnedLease {
        match self.slot.take() {
            Some(slot) if self.returns => {
                crate::lease::OwnedLease::releasing_stamped(self.permits, self.stamp, slot)
            }
            Some(slot) => crate::lease::OwnedLease::settling(self.permits, self.stamp, slot),
            None => crate::lease::OwnedLease::unreleased(self.permits),
        }
    }
}

impl<K, L: Release> Drop for PartitionLease<K, L> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            if self.returns {
                slot.release_stamped(self.permits, self.stamp);
            }
        }
    }
}

impl<K, L: Release> fmt::Debug for PartitionLease<K, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartitionLease")
            .field("permits", &self.permits)
            .field("returns_permits", &self.returns_permits())
            .finish()
    }
}

/// A partitioned limiter (.NET `PartitionedRateLimiter.Create`) with a full limiter per key, in
/// a growable concurrent map (feature `std`): any kind per key, per-key statistics, waiting.
///
/// - `K`: the partition key; `L`: the partitions' limiter type (a [`PartitionLimiter`](crate::PartitionLimiter) for the
///   built-in kinds); `P`: the partition function, `Fn(&R) -> Partition<K, F>`; `C`: the clock
///   the partitions and eviction read; `S`: the key hasher (SipHash by default, which resists
///   hash flooding by chosen keys).
/// - The partition function runs on every call, before anything else (as in .NET, before the
///   closed check); the factory runs once per key, when the key is first seen, under no lock
///   (as in .NET): a slow factory delays only the callers of its own key, who wait for it.
/// - Bounded by [`PartitionConfig`]: at most `capacity` partitions; a new key when full is
///   handled by [`WhenFull`](crate::WhenFull) and never inserted if refused; partitions idle
///   longer than the idle timeout are evicted by later calls (no timer).
/// - The partitions' memory: the map holds a hash and an `Arc` per partition (about 30 bytes at
///   the map's average load); each `Arc` holds the key and the limiter. A
///   [`PartitionLimiter`](crate::PartitionLimiter) is 512 bytes whatever its kind (an enum as
///   large as its largest variant, the sliding log with its ring inline; its counts are
///   compact, with no per-thread cells): measured with the allocator's overhead, about 625
///   bytes of resident memory per partition, token bucket, GCRA and sliding window alike
///   (200,000 new keys filling a table of 100,000: +60 MiB; the HTTP layer's `tests/http.rs`
///   `memory_*`). A map of one limiter type (`Partitioned<K, TokenBucketLimiter>`, as the HTTP
///   layer keeps per policy) holds only that limiter: about 290 bytes per partition for a token
///   bucket or GCRA. For millions of keys of one rate kind, see
///   [`KeyedLimiter`](crate::KeyedLimiter), at about 21 bytes per key.
///
/// ```
/// use core::time::Duration;
/// use std::sync::Arc;
/// use tollgate::*;
///
/// let clock = Arc::new(ManualClock::new());
/// let per_user = PartitionKind::token_bucket(TokenBucketOptions::new(2, 1, Duration::from_secs(1))).unwrap();
/// let admin = PartitionKind::NO_LIMIT;
/// let limiter = Partitioned::with_clock(
///     move |user: &str| {
///         if user == "admin" { Partition::new(user.to_string(), admin) }
///         else { Partition::new(user.to_string(), per_user) }
///     },
///     PartitionConfig::new(10_000),
///     clock.clone(),
/// );
///
/// let _a = limiter.try_acquire("alice", 2).unwrap();
/// let r = limiter.try_acquire("alice", 1).unwrap_err();
/// assert_eq!((r.reason(), r.retry_after()), (Reason::Exhausted, Some(Duration::from_secs(1))));
/// assert!(limiter.try_acquire("bob", 2).is_ok()); // bob has his own bucket
/// assert!(limiter.try_acquire("admin", 1_000_000).is_ok());
/// assert_eq!(limiter.statistics("alice").total_failed, 1);
/// assert_eq!(limiter.len(), 3);
///
/// // Idle partitions go after the idle timeout (10 s), on a later call: no timer.
/// clock.advance(Duration::from_secs(13));
/// limiter.evict_idle();
/// assert_eq!(limiter.len(), 0);
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub struct Partitioned<K, L, P, C: Clock = StdClock, S = RandomState> {
    shards: Shards<Arc<Slot<K, L>>, S>,
    partitioner: P,
    clock: C,
    closed: AtomicBool,
}

impl<K, L, P> Partitioned<K, L, P> {
    /// A partitioned limiter on the system clock, with the partition function `partitioner`.
    ///
    /// ```
    /// # use tollgate::*;
    /// // Two requests at a time per tenant, however fast they come.
    /// let kind = PartitionKind::concurrency(ConcurrencyOptions::new(2)).unwrap();
    /// let per_tenant = Partitioned::new(move |tenant: &u32| Partition::new(*tenant, kind), PartitionConfig::default());
    /// let a = per_tenant.try_acquire(&1, 2).unwrap();
    /// assert!(per_tenant.try_acquire(&1, 1).is_err());
    /// drop(a);
    /// assert!(per_tenant.try_acquire(&1, 1).is_ok());
    /// ```
    pub fn new<R: ?Sized, F>(partitioner: P, config: PartitionConfig) -> Self
    where
        P: Fn(&R) -> Partition<K, F>,
        F: Factory<K, StdClock, Limiter = L>,
    {
        Self::with_clock_and_hasher(partitioner, config, StdClock, RandomState::new())
    }
}

impl<K, L, P, C: Clock> Partitioned<K, L, P, C> {
    /// A partitioned limiter reading time from `clock` (the partitions get clones of it).
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(1))).unwrap();
    /// let limiter =
    ///     Partitioned::with_clock(move |user: &str| Partition::new(user.to_owned(), kind), PartitionConfig::new(64), &clock);
    /// let _ = limiter.try_acquire("alice", 2).unwrap();
    /// assert!(limiter.try_acquire("alice", 1).is_err());
    /// clock.advance(Duration::from_secs(1)); // the partitions read the same clock
    /// assert!(limiter.try_acquire("alice", 2).is_ok());
    /// ```
    pub fn with_clock<R: ?Sized, F>(partitioner: P, config: PartitionConfig, clock: C) -> Self
    where
        P: Fn(&R) -> Partition<K, F>,
        F: Factory<K, C, Limiter = L>,
    {
        Self::with_clock_and_hasher(partitioner, config, clock, RandomState::new())
    }
}

impl<K, L, P, C: Clock, S> Partitioned<K, L, P, C, S> {
    /// A partitioned limiter reading time from `clock` and hashing keys with `hasher`.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// use std::collections::hash_map::DefaultHasher;
    /// use std::hash::BuildHasherDefault;
    ///
    /// // Keys the clients cannot choose (device ids): a fast unkeyed hasher is fine.
    /// let kind = PartitionKind::token_bucket(TokenBucketOptions::new(1, 1, Duration::from_secs(1))).unwrap();
    /// let hasher = BuildHasherDefault::<DefaultHasher>::default();
    /// let per_device =
    ///     Partitioned::with_clock_and_hasher(move |id: &u64| Partition::new(*id, kind), PartitionConfig::default(), StdClock, hasher);
    /// assert!(per_device.try_acquire(&7, 1).is_ok());
    /// assert!(per_device.try_acquire(&7, 1).is_err());
    /// ```
    pub fn with_clock_and_hasher<R: ?Sized, F>(
        partitioner: P,
        config: PartitionConfig,
        clock: C,
        hasher: S,
    ) -> Self
    where
        P: Fn(&R) -> Partition<K, F>,
        F: Factory<K, C, Limiter = L>,
    {
        Self {
            shards: Shards::new(&config, hasher, clock.now()),
            partitioner,
            clock,
            closed: AtomicBool::new(false),
        }
    }

    /// Partitions stored now.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(1))).unwrap();
    /// let limiter =
    ///     Partitioned::with_clock(move |user: &str| Partition::new(user.to_owned(), kind), PartitionConfig::new(64), &clock);
    /// let _ = limiter.try_acquire("alice", 1).unwrap();
    /// let _ = limiter.try_acquire("bob", 1).unwrap();
    /// let _ = limiter.statistics("carol"); // stores nothing
    /// assert_eq!(limiter.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.shards.len()
    }

    /// Whether no partition is stored.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(1))).unwrap();
    /// let limiter =
    ///     Partitioned::with_clock(move |user: &str| Partition::new(user.to_owned(), kind), PartitionConfig::new(64), &clock);
    /// assert!(limiter.is_empty());
    /// let _ = limiter.try_acquire("alice", 1).unwrap();
    /// assert!(!limiter.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most partitions stored at once (the configured capacity, rounded up per shard).
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(1))).unwrap();
    /// let limiter =
    ///     Partitioned::with_clock(move |user: &str| Partition::new(user.to_owned(), kind), PartitionConfig::new(64), &clock);
    /// assert!(limiter.capacity() >= 64);
    /// ```
    pub fn capacity(&self) -> usize {
        self.shards.capacity()
    }

    /// Requests refused with [`Reason::PartitionsFull`] so far.
    ///
    /// ```
    /// # use tollgate::*;
    /// let kind = PartitionKind::concurrency(ConcurrencyOptions::new(1)).unwrap();
    /// let config = PartitionConfig::new(1).with_when_full(WhenFull::Reject);
    /// let limiter = Partitioned::new(move |user: &str| Partition::new(user.to_owned(), kind), config);
    /// let _held = limiter.try_acquire("alice", 1).unwrap();
    /// assert_eq!(limiter.try_acquire("bob", 1).unwrap_err().reason(), Reason::PartitionsFull);
    /// assert_eq!(limiter.rejected_for_capacity(), 1);
    /// ```
    pub fn rejected_for_capacity(&self) -> u64 {
        self.shards.rejected_full()
    }

    /// Whether [`close`](Self::close) has been called.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(1))).unwrap();
    /// let limiter =
    ///     Partitioned::with_clock(move |user: &str| Partition::new(user.to_owned(), kind), PartitionConfig::new(64), &clock);
    /// assert!(!limiter.is_closed());
    /// limiter.close();
    /// assert!(limiter.is_closed());
    /// assert_eq!(limiter.try_acquire("alice", 1).unwrap_err().reason(), Reason::Closed);
    /// ```
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// How idle a slot is: pinned slots are busy; a slot whose limiter was never made (its factory
/// panicked) is as idle as can be.
fn idle_of<K, L: Limiter>(slot: &Arc<Slot<K, L>>) -> Idle {
    if slot.pins.load(Ordering::Acquire) != 0 {
        return Idle::Busy(None);
    }
    let Some(limiter) = slot.limiter.get() else {
        return Idle::For(u64::MAX);
    };
    match limiter.idle_duration() {
        Some(d) => Idle::For(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        None => Idle::Busy(None),
    }
}

/// Takes `permits` from a slot's limiter: the lease owns a handle to the slot if it gives
/// permits back.
#[inline]
fn take<K, L: Limiter + Release>(
    slot: &Arc<Slot<K, L>>,
    limiter: &L,
    permits: u32,
) -> Result<PartitionLease<K, L>, Rejection> {
    Ok(PartitionLease::of(limiter.try_acquire(permits)?, slot))
}

/// What a lookup under the shard's lock found: a made limiter (and `f`'s result on it), or a
/// slot whose limiter is still to be made, pinned.
enum Found<R, K, L> {
    Done(Result<R, Rejection>),
    Unmade(Pinned<K, L>),
}

impl<K, L, P, C, S> Partitioned<K, L, P, C, S>
where
    K: Hash + Eq,
    L: Limiter + Release,
    C: Clock,
    S: BuildHasher,
{
    /// Runs `f` on `key`'s slot and limiter, creating the slot if the key is new and there is
    /// room. `f` runs under the shard's read lock (so that no eviction or close can come between
    /// finding the partition and acquiring on it); the factory runs under no lock at all: a slow
    /// factory delays only the callers of its own key.
    fn with_slot<F, R>(
        &self,
        key: K,
        factory: F,
        f: impl Fn(&Arc<Slot<K, L>>, &L) -> Result<R, Rejection>,
    ) -> Result<R, Rejection>
    where
        F: Factory<K, C, Limiter = L>,
    {
        if self.is_closed() {
            return Err(Rejection::new(&Reason::Closed));
        }
        let now = self.clock.now();
        let hash = self.shards.hash(&key);
        let shard = self.shards.shard(hash);
        let policy = self.shards.policy();
        shard.maybe_sweep(policy, now, idle_of);
        let found = |slot: &Arc<Slot<K, L>>| match slot.limiter.get() {
            Some(limiter) => Found::Done(f(slot, limiter)),
            None => Found::Unmade(Pinned::new(slot)),
        };
        let found = match shard.get(hash, &key, found) {
            Some(found) => found,
            None => shard.get_or_insert(
                policy,
                now,
                hash,
                key,
                &self.closed,
                |key| {
                    Arc::new(Slot {
                        key,
                        limiter: Once::new(),
                        pins: AtomicU64::new(0),
                    })
                },
                idle_of,
                found,
            )?,
        };
        let pinned = match found {
            Found::Done(r) => return r,
            Found::Unmade(pinned) => pinned,
        };
        // No lock held: make the limiter (or wait for the caller of this key already making
        // it). The pin keeps the slot from eviction meanwhile.
        let slot = &pinned.0;
        let limiter = slot
            .limiter
            .get_or_init(|| factory.create(&slot.key, &self.clock));
        // Back under the read lock, ordered against `close`: either its drain comes after this
        // (and sees the limiter made, and closes it), or this sees the flag.
        shard.read_locked(|| {
            if self.is_closed() {
                limiter.close();
                return Err(Rejection::new(&Reason::Closed));
            }
            f(slot, limiter)
        })
    }

    /// Takes `permits` from `resource`'s partition now, without waiting, creating the partition
    /// if it is new (and there is room: else [`Reason::PartitionsFull`], and nothing is stored).
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let kind = PartitionKind::concurrency(ConcurrencyOptions::new(1)).unwrap();
    /// let limiter = Partitioned::new(move |id: &u32| Partition::new(*id, kind), PartitionConfig::default());
    /// let lease = limiter.try_acquire(&7, 1).unwrap();
    /// assert_eq!(limiter.try_acquire(&7, 1).unwrap_err().reason(), Reason::Exhausted);
    /// drop(lease);
    /// assert!(limiter.try_acquire(&7, 1).is_ok());
    /// ```
    pub fn try_acquire<R: ?Sized, F>(
        &self,
        resource: &R,
        permits: u32,
    ) -> Result<PartitionLease<K, L>, Rejection>
    where
        P: Fn(&R) -> Partition<K, F>,
        F: Factory<K, C, Limiter = L>,
    {
        let Partition { key, factory } = (self.partitioner)(resource);
        self.with_slot(key, factory, |slot, limiter| take(slot, limiter, permits))
    }

    /// Waits for `permits` in `resource`'s partition's queue (see [`AcquireAsync`]).
    ///
    /// The partition function runs now; the partition is found (or created) at the first poll,
    /// and held against eviction until the future completes. Waiters on a rate-limited partition
    /// are served as time brings permits by later requests to that partition, or by
    /// [`replenish`](Self::replenish) (call it from a timer, as .NET's heartbeat does every
    /// 100 ms) — or wait with [`acquire_blocking`](Self::acquire_blocking), which needs neither.
    ///
    /// ```
    /// use core::time::Duration;
    /// use std::sync::Arc;
    /// use tollgate::*;
    /// # fn block_on<F: core::future::Future>(f: F) -> F::Output {
    /// #     let mut f = core::pin::pin!(f);
    /// #     let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
    /// #     loop { if let core::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
    /// # }
    /// let kind = PartitionKind::concurrency(ConcurrencyOptions::new(1)).unwrap();
    /// let limiter = Partitioned::new(move |id: &u32| Partition::new(*id, kind), PartitionConfig::default());
    /// let lease = block_on(limiter.acquire(&7, 1)).unwrap();
    /// assert_eq!(limiter.statistics(&7).available_permits, 0);
    /// drop(lease);
    /// assert_eq!(limiter.statistics(&7).available_permits, 1);
    /// ```
    pub fn acquire<'s, R: ?Sized, F>(
        &'s self,
        resource: &R,
        permits: u32,
    ) -> impl Future<Output = Result<PartitionLease<K, L>, Rejection>> + 's
    where
        P: Fn(&R) -> Partition<K, F>,
        F: Factory<K, C, Limiter = L> + 's,
        L: AcquireAsync,
        K: 's,
    {
        let Partition { key, factory } = (self.partitioner)(resource);
        async move {
            let pinned = self.pinned(key, factory)?;
            let lease = pinned.made().acquire(permits).await?;
            Ok(PartitionLease::of(lease, &pinned.0))
        }
    }

    /// Waits on this thread for `permits` in `resource`'s partition, for up to `timeout`
    /// (`None`: no limit); the thread serves the partition's queue itself as time brings
    /// permits, so no timer is needed.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let kind = PartitionKind::concurrency(ConcurrencyOptions::new(1).with_queue(1, QueueOrder::OldestFirst)).unwrap();
    /// let limiter = Partitioned::new(move |id: &u32| Partition::new(*id, kind), PartitionConfig::default());
    /// let lease = limiter.acquire_blocking(&7, 1, None).unwrap();
    /// // Key 7's one permit is held: a second waiter times out.
    /// let r = limiter.acquire_blocking(&7, 1, Some(Duration::from_millis(1)));
    /// assert!(r.is_err());
    /// drop(lease);
    /// ```
    pub fn acquire_blocking<R: ?Sized, F>(
        &self,
        resource: &R,
        permits: u32,
        timeout: Option<Duration>,
    ) -> Result<PartitionLease<K, L>, Rejection>
    where
        P: Fn(&R) -> Partition<K, F>,
        F: Factory<K, C, Limiter = L>,
        L: crate::wait::Source,
    {
        let Partition { key, factory } = (self.partitioner)(resource);
        let pinned = self.pinned(key, factory)?;
        let lease = crate::wait::acquire_blocking(pinned.made(), permits, timeout)?;
        Ok(PartitionLease::of(lease, &pinned.0))
    }

    /// The key's slot, pinned (under the shard lock, so that no eviction can take it between
    /// finding it and waiting in its queue; unpinned when dropped). Its limiter is made.
    fn pinned<F>(&self, key: K, factory: F) -> Result<Pinned<K, L>, Rejection>
    where
        F: Factory<K, C, Limiter = L>,
    {
        self.with_slot(key, factory, |slot, _| Ok(Pinned::new(slot)))
    }

    /// A snapshot of `resource`'s partition's counters. For a key not stored, a fresh
    /// partition's statistics — made by the factory and not stored.
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let kind = PartitionKind::concurrency(ConcurrencyOptions::new(2)).unwrap();
    /// let limiter = Partitioned::new(move |id: &u32| Partition::new(*id, kind), PartitionConfig::default());
    /// let _lease = limiter.try_acquire(&7, 1).unwrap();
    /// assert_eq!(limiter.statistics(&7).available_permits, 1);
    /// assert_eq!(limiter.statistics(&8).available_permits, 2); // not stored
    /// assert_eq!(limiter.len(), 1);
    /// ```
    pub fn statistics<R: ?Sized, F>(&self, resource: &R) -> Statistics
    where
        P: Fn(&R) -> Partition<K, F>,
        F: Factory<K, C, Limiter = L>,
    {
        let Partition { key, factory } = (self.partitioner)(resource);
        let hash = self.shards.hash(&key);
        let shard = self.shards.shard(hash);
        let stored = shard.get(hash, &key, |slot| {
            slot.limiter.get().map(|l| l.statistics())
        });
        match stored.flatten() {
            Some(s) => s,
            None => factory.create(&key, &self.clock).statistics(),
        }
    }

    /// Resets `resource`'s partition: drops it from the map, so that the key's next request
    /// starts from a fresh partition (a full bucket, an empty window, every permit), exactly as
    /// if the key had never been seen. Whether a partition was stored.
    ///
    /// The dropped partition is closed: requests queued in it are rejected with
    /// [`Reason::Closed`] (retrying goes to the fresh partition). Leases it granted stay valid
    /// and give their permits back to it, not to the fresh one — so after a reset, a concurrency
    /// partition's key can hold up to twice its permits until those leases are dropped.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let kind = PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limiter = Partitioned::with_clock(move |user: &str| Partition::new(user.to_string(), kind), PartitionConfig::default(), &clock);
    /// let _ = limiter.try_acquire("alice", 2).unwrap();
    /// assert!(limiter.try_acquire("alice", 1).is_err());
    /// assert!(limiter.remove("alice")); // say, alice upgraded her plan
    /// assert!(limiter.try_acquire("alice", 2).is_ok());
    /// assert!(!limiter.remove("bob")); // never seen
    /// ```
    pub fn remove<R: ?Sized, F>(&self, resource: &R) -> bool
    where
        P: Fn(&R) -> Partition<K, F>,
    {
        let Partition { key, .. } = (self.partitioner)(resource);
        let hash = self.shards.hash(&key);
        // Taken out under the lock, closed after it (closing wakes waiters).
        let removed = self.shards.shard(hash).remove(hash, &key);
        match removed {
            Some(slot) => {
                if let Some(l) = slot.limiter.get() {
                    l.close();
                }
                true
            }
            None => false,
        }
    }

    /// Runs `f` on `resource`'s partition's limiter if it is stored (nothing is created).
    #[cfg(feature = "http")]
    pub(crate) fn with_limiter<R: ?Sized, F, T>(
        &self,
        resource: &R,
        f: impl FnOnce(&L) -> T,
    ) -> Option<T>
    where
        P: Fn(&R) -> Partition<K, F>,
    {
        let Partition { key, .. } = (self.partitioner)(resource);
        let hash = self.shards.hash(&key);
        self.shards
            .shard(hash)
            .get(hash, &key, |slot| slot.limiter.get().map(f))
            .flatten()
    }

    /// Evicts every partition idle for longer than the idle timeout, now. Calls do this lazily
    /// shard by shard; this is for a housekeeping task that wants the memory back at once.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Partitioned::with_clock(|id: &u32| Partition::no_limit(*id), PartitionConfig::default(), &clock);
    /// drop(limiter.try_acquire(&7, 1).unwrap());
    /// clock.advance(Duration::from_secs(11)); // past the 10 s idle timeout
    /// limiter.evict_idle();
    /// assert!(limiter.is_empty());
    /// ```
    pub fn evict_idle(&self) {
        self.shards.sweep_all(self.clock.now(), idle_of);
    }

    /// Closes the limiter: every later request is rejected with [`Reason::Closed`], every
    /// partition is closed (their queued waiters are rejected) and dropped from the map. Leases
    /// already granted stay valid.
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let limiter = Partitioned::new(|id: &u32| Partition::no_limit(*id), PartitionConfig::default());
    /// let _ = limiter.try_acquire(&7, 1).unwrap();
    /// limiter.close();
    /// assert!(limiter.is_closed() && limiter.is_empty());
    /// assert_eq!(limiter.try_acquire(&7, 1).unwrap_err().reason(), Reason::Closed);
    /// ```
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.shards.drain(|slot| {
            if let Some(l) = slot.limiter.get() {
                l.close();
            }
        });
    }
}

impl<K, L, P, C: Clock, S> Partitioned<K, L, P, C, S> {
    /// Runs `f` on every stored partition whose limiter is made: its key and its limiter. The
    /// partitions are collected under each shard's read lock and visited after it is released,
    /// so `f` may call back into this limiter.
    pub(crate) fn for_each_partition(&self, mut f: impl FnMut(&K, &L)) {
        let mut slots = Vec::with_capacity(self.shards.len());
        self.shards.for_each(|slot| slots.push(Arc::clone(slot)));
        for slot in &slots {
            if let Some(limiter) = slot.limiter.get() {
                f(&slot.key, limiter);
            }
        }
    }
}

impl<K, L, P, C, S> Partitioned<K, L, P, C, S>
where
    L: Replenishing,
    C: Clock,
{
    /// Replenishes every partition and serves their queued waiters (.NET's heartbeat, without
    /// the eviction, which happens lazily anyway). Needed only by async waiters on rate-limited
    /// partitions that no other request or driver serves; returns how many partitions it saw.
    ///
    /// ```
    /// # use core::{future::Future, pin::pin, task::{Context, Poll, Waker}, time::Duration};
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// # let mut cx = Context::from_waker(Waker::noop());
    /// let opts = TokenBucketOptions::new(1, 1, Duration::from_secs(1)).with_queue(1, QueueOrder::OldestFirst);
    /// let kind = PartitionKind::token_bucket(opts).unwrap();
    /// let limiter =
    ///     Partitioned::with_clock(move |user: &str| Partition::new(user.to_owned(), kind), PartitionConfig::new(64), &clock);
    /// let _ = limiter.try_acquire("alice", 1).unwrap();
    /// let mut waiter = pin!(limiter.acquire("alice", 1));
    /// assert!(waiter.as_mut().poll(&mut cx).is_pending());
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(limiter.replenish(), 1); // grants alice's waiter its token
    /// assert_eq!(limiter.statistics("alice").queued_permits, 0);
    /// assert!(matches!(waiter.poll(&mut cx), Poll::Ready(Ok(_))));
    /// ```
    pub fn replenish(&self) -> usize {
        let mut n = 0;
        self.shards.for_each(|slot| {
            if let Some(l) = slot.limiter.get() {
                l.replenish();
            }
            n += 1;
        });
        n
    }
}

impl<R, K, L, P, F, C, S> PartitionedLimiter<R> for Partitioned<K, L, P, C, S>
where
    R: ?Sized,
    P: Fn(&R) -> Partition<K, F>,
    F: Factory<K, C, Limiter = L>,
    K: Hash + Eq,
    L: Limiter + Release,
    C: Clock,
    S: BuildHasher,
{
    partitioned_by_inherent!(
        Partitioned, R, type Lease<'a> = PartitionLease<K, L>;
        settle: |_this, _resource, lease, actual| lease.settle(actual)
    );
}

/// For factories that borrow nothing (`F: 'static`: a [`PartitionKind`](crate::PartitionKind),
/// or a closure that owns what it captures); [`Partitioned::acquire`] takes any.
impl<R, K, L, P, F, C, S> super::PartitionedAcquireAsync<R> for Partitioned<K, L, P, C, S>
where
    R: ?Sized,
    P: Fn(&R) -> Partition<K, F>,
    F: Factory<K, C, Limiter = L> + 'static,
    K: Hash + Eq,
    L: Limiter + Release + AcquireAsync,
    C: Clock,
    S: BuildHasher,
{
    fn acquire<'a>(
        &'a self,
        resource: &'a R,
        permits: u32,
    ) -> impl Future<Output = Result<Self::Lease<'a>, Rejection>> + 'a {
        Partitioned::acquire(self, resource, permits)
    }
}

impl<K, L, P, C: Clock, S> fmt::Debug for Partitioned<K, L, P, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Partitioned")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}
