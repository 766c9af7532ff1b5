//! [`Partitioned`]: a full limiter per key, in the growable sharded store (feature `std`).

use core::fmt;
use core::future::Future;
use core::hash::{BuildHasher, Hash};
use core::time::Duration;
use std::hash::RandomState;
use std::sync::Arc;

use super::evict::Idle;
use super::shards::{Owned, Shards};
use super::{Factory, Partition, PartitionConfig, PartitionedLimiter};
use crate::chain::AcquireAsync;
use crate::clock::{Clock, StdClock};
use crate::lease::{Reason, Rejection, Release, Statistics};
use crate::limiter::{Limiter, Replenishing};
use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// A stored partition: its limiter, and how many waiting acquisitions hold it against eviction
/// between finding it and joining its queue.
pub(crate) struct Slot<L> {
    limiter: L,
    pins: AtomicU64,
}

impl<L: Release> Release for Slot<L> {
    fn release(&self, permits: u32) {
        self.limiter.release(permits);
    }
}

/// Unpins a slot when dropped.
struct Pin<'a, L>(&'a Slot<L>);

impl<L> Drop for Pin<'_, L> {
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
pub struct PartitionLease<L: Release> {
    permits: u32,
    slot: Option<Arc<Slot<L>>>,
}

impl<L: Release> PartitionLease<L> {
    /// The number of permits this lease holds.
    pub const fn permits(&self) -> u32 {
        self.permits
    }

    /// Whether dropping this lease returns permits to its partition.
    pub const fn returns_permits(&self) -> bool {
        self.slot.is_some()
    }
}

impl<L: Release> Drop for PartitionLease<L> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            slot.release(self.permits);
        }
    }
}

impl<L: Release> fmt::Debug for PartitionLease<L> {
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
///   closed check); the factory runs once per key, under the key's shard's lock, when the key is
///   first seen.
/// - Bounded by [`PartitionConfig`]: at most `capacity` partitions; a new key when full is
///   handled by [`WhenFull`](crate::WhenFull) and never inserted if refused; partitions idle
///   longer than the idle timeout are evicted by later calls (no timer).
/// - The partitions' memory: the map holds a key, its hash and an `Arc` per partition (about 40
///   bytes for small keys at the map's load); each `Arc` holds the limiter (about 250 bytes for a
///   token bucket, 450 for a sliding window). For millions of keys of one rate kind, see
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
pub struct Partitioned<K, L, P, C: Clock = StdClock, S = RandomState> {
    shards: Shards<K, Arc<Slot<L>>, S>,
    partitioner: P,
    clock: C,
    closed: AtomicBool,
}

impl<K, L, P> Partitioned<K, L, P> {
    /// A partitioned limiter on the system clock, with the partition function `partitioner`.
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
    pub fn len(&self) -> usize {
        self.shards.len()
    }

    /// Whether no partition is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most partitions stored at once (the configured capacity, rounded up per shard).
    pub fn capacity(&self) -> usize {
        self.shards.capacity()
    }

    /// Requests refused with [`Reason::PartitionsFull`] so far.
    pub fn rejected_for_capacity(&self) -> u64 {
        self.shards.rejected_full()
    }

    /// Whether [`close`](Self::close) has been called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// How idle a slot is: pinned slots are busy.
fn idle_of<L: Limiter>(slot: &Arc<Slot<L>>) -> Idle {
    if slot.pins.load(Ordering::Acquire) != 0 {
        return Idle::Busy(None);
    }
    match slot.limiter.idle_duration() {
        Some(d) => Idle::For(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        None => Idle::Busy(None),
    }
}

/// Takes `permits` from a slot: the lease owns a handle to the slot if it gives permits back.
#[inline]
fn take<L: Limiter + Release>(
    slot: &Arc<Slot<L>>,
    permits: u32,
) -> Result<PartitionLease<L>, Rejection> {
    let lease = slot.limiter.try_acquire(permits)?;
    let returns = lease.returns_permits();
    let permits = lease.forget();
    Ok(PartitionLease {
        permits,
        slot: returns.then(|| slot.clone()),
    })
}

impl<K, L, P, C, S> Partitioned<K, L, P, C, S>
where
    K: Hash + Eq,
    L: Limiter + Release,
    C: Clock,
    S: BuildHasher,
{
    /// Runs `f` on `key`'s slot under its shard's lock, creating the slot with `factory` if the
    /// key is new and there is room.
    fn with_slot<F, R>(
        &self,
        key: K,
        factory: F,
        f: impl Fn(&Arc<Slot<L>>) -> Result<R, Rejection>,
    ) -> Result<R, Rejection>
    where
        F: Factory<K, C, Limiter = L>,
    {
        if self.is_closed() {
            return Err(Rejection::new(Reason::Closed));
        }
        let now = self.clock.now();
        let hash = self.shards.hash(&key);
        let shard = self.shards.shard(hash);
        let policy = self.shards.policy();
        shard.maybe_sweep(policy, now, idle_of);
        if let Some(r) = shard.get(hash, &key, &f) {
            return r;
        }
        shard.get_or_insert(
            policy,
            now,
            hash,
            Owned(key),
            |key| {
                Arc::new(Slot {
                    limiter: factory.create(key, &self.clock),
                    pins: AtomicU64::new(0),
                })
            },
            idle_of,
            &f,
        )?
    }

    /// Takes `permits` from `resource`'s partition now, without waiting, creating the partition
    /// if it is new (and there is room: else [`Reason::PartitionsFull`], and nothing is stored).
    pub fn try_acquire<R: ?Sized, F>(
        &self,
        resource: &R,
        permits: u32,
    ) -> Result<PartitionLease<L>, Rejection>
    where
        P: Fn(&R) -> Partition<K, F>,
        F: Factory<K, C, Limiter = L>,
    {
        let Partition { key, factory } = (self.partitioner)(resource);
        self.with_slot(key, factory, |slot| take(slot, permits))
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
    ) -> impl Future<Output = Result<PartitionLease<L>, Rejection>> + 's
    where
        P: Fn(&R) -> Partition<K, F>,
        F: Factory<K, C, Limiter = L> + 's,
        L: AcquireAsync,
        K: 's,
    {
        let Partition { key, factory } = (self.partitioner)(resource);
        async move {
            let slot = self.pinned(key, factory)?;
            let _pin = Pin(&slot);
            let lease = slot.limiter.acquire(permits).await?;
            let returns = lease.returns_permits();
            let permits = lease.forget();
            Ok(PartitionLease {
                permits,
                slot: returns.then(|| slot.clone()),
            })
        }
    }

    /// Waits on this thread for `permits` in `resource`'s partition, for up to `timeout`
    /// (`None`: no limit); the thread serves the partition's queue itself as time brings
    /// permits, so no timer is needed.
    pub fn acquire_blocking<R: ?Sized, F>(
        &self,
        resource: &R,
        permits: u32,
        timeout: Option<Duration>,
    ) -> Result<PartitionLease<L>, Rejection>
    where
        P: Fn(&R) -> Partition<K, F>,
        F: Factory<K, C, Limiter = L>,
        L: crate::wait::Source,
    {
        let Partition { key, factory } = (self.partitioner)(resource);
        let slot = self.pinned(key, factory)?;
        let _pin = Pin(&slot);
        let lease = crate::wait::acquire_blocking(&slot.limiter, permits, timeout)?;
        let returns = lease.returns_permits();
        let permits = lease.forget();
        Ok(PartitionLease {
            permits,
            slot: returns.then(|| slot.clone()),
        })
    }

    /// The key's slot, pinned (under the shard lock, so that no eviction can take it between
    /// finding it and waiting in its queue). The caller unpins it.
    fn pinned<F>(&self, key: K, factory: F) -> Result<Arc<Slot<L>>, Rejection>
    where
        F: Factory<K, C, Limiter = L>,
    {
        self.with_slot(key, factory, |slot| {
            slot.pins.fetch_add(1, Ordering::AcqRel);
            Ok(slot.clone())
        })
    }

    /// A snapshot of `resource`'s partition's counters. For a key not stored, a fresh
    /// partition's statistics — made by the factory and not stored.
    pub fn statistics<R: ?Sized, F>(&self, resource: &R) -> Statistics
    where
        P: Fn(&R) -> Partition<K, F>,
        F: Factory<K, C, Limiter = L>,
    {
        let Partition { key, factory } = (self.partitioner)(resource);
        let hash = self.shards.hash(&key);
        let shard = self.shards.shard(hash);
        match shard.get(hash, &key, |slot| slot.limiter.statistics()) {
            Some(s) => s,
            None => factory.create(&key, &self.clock).statistics(),
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
            .get(hash, &key, |slot| f(&slot.limiter))
    }

    /// Evicts every partition idle for longer than the idle timeout, now. Calls do this lazily
    /// shard by shard; this is for a housekeeping task that wants the memory back at once.
    pub fn evict_idle(&self) {
        self.shards.sweep_all(self.clock.now(), idle_of);
    }

    /// Closes the limiter: every later request is rejected with [`Reason::Closed`], every
    /// partition is closed (their queued waiters are rejected) and dropped from the map. Leases
    /// already granted stay valid.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.shards.drain(|slot| slot.limiter.close());
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
    pub fn replenish(&self) -> usize {
        let mut n = 0;
        self.shards.for_each(|slot| {
            slot.limiter.replenish();
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
    type Lease<'a>
        = PartitionLease<L>
    where
        Self: 'a;

    fn try_acquire(&self, resource: &R, permits: u32) -> Result<Self::Lease<'_>, Rejection> {
        Partitioned::try_acquire(self, resource, permits)
    }

    fn statistics(&self, resource: &R) -> Statistics {
        Partitioned::statistics(self, resource)
    }

    fn close(&self) {
        Partitioned::close(self)
    }

    fn is_closed(&self) -> bool {
        Partitioned::is_closed(self)
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
