//! Partitioned limiters: every rule of .NET's partitioned rate limiter (and where DESIGN.md
//! improves on it: the capacity and its policies, lazy eviction without a timer, no insertion on
//! a capacity rejection), for the four stores, on manual clocks.

use core::time::Duration;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

mod common;

use common::Task;
use tollgate::*;

const SEC: Duration = Duration::from_secs(1);
const NS: Duration = Duration::from_nanos(1);

// ---------------------------------------------------------------------------------------------
// Helpers

fn concurrency_kind(permits: u32, queue: u32) -> PartitionKind {
    PartitionKind::concurrency(
        ConcurrencyOptions::new(permits).with_queue(queue, QueueOrder::OldestFirst),
    )
    .unwrap()
}

fn bucket_kind(limit: u32, per: u32, period: Duration) -> PartitionKind {
    PartitionKind::token_bucket(TokenBucketOptions::new(limit, per, period)).unwrap()
}

/// One shard, so that a call on any key sweeps every partition (lazy eviction is per shard).
fn one_shard(capacity: usize) -> PartitionConfig {
    PartitionConfig::new(capacity).with_shards(1)
}

/// A factory of `kind` that counts its calls.
#[derive(Clone)]
struct Counting {
    kind: PartitionKind,
    created: Arc<AtomicUsize>,
}

impl<K, C: Clock + Clone> Factory<K, C> for Counting {
    type Limiter = PartitionLimiter<C>;
    fn create(self, _key: &K, clock: &C) -> PartitionLimiter<C> {
        self.created.fetch_add(1, Ordering::SeqCst);
        self.kind.limiter(clock.clone())
    }
}

/// A partitioned limiter of `kind` per `u32` key that counts its factory's calls.
#[allow(clippy::type_complexity)]
fn counted(
    kind: PartitionKind,
    config: PartitionConfig,
    clock: &ManualClock,
) -> (
    Partitioned<
        u32,
        PartitionLimiter<&ManualClock>,
        impl Fn(&u32) -> Partition<u32, Counting>,
        &ManualClock,
    >,
    Arc<AtomicUsize>,
) {
    let created = Arc::new(AtomicUsize::new(0));
    let factory = Counting {
        kind,
        created: created.clone(),
    };
    let limiter = Partitioned::with_clock(
        move |key: &u32| Partition::new(*key, factory.clone()),
        config,
        clock,
    );
    (limiter, created)
}

// ---------------------------------------------------------------------------------------------
// Creation: once per key

#[test]
fn a_partition_is_created_once_per_key_on_first_use() {
    let clock = ManualClock::new();
    let (limiter, created) = counted(bucket_kind(3, 1, SEC), PartitionConfig::default(), &clock);
    assert_eq!(created.load(Ordering::SeqCst), 0);
    let _ = limiter.try_acquire(&1, 2).unwrap();
    let _ = limiter.try_acquire(&1, 1).unwrap();
    let r = limiter.try_acquire(&1, 1).unwrap_err();
    assert_eq!(
        (r.reason(), r.retry_after()),
        (Reason::Exhausted, Some(SEC))
    );
    let _ = limiter.try_acquire(&2, 3).unwrap();
    assert_eq!(created.load(Ordering::SeqCst), 2);
    assert_eq!(limiter.len(), 2);
    let s = limiter.statistics(&1);
    assert_eq!(
        (s.available_permits, s.total_successful, s.total_failed),
        (0, 2, 1)
    );
}

#[test]
fn threads_racing_on_a_new_key_create_it_exactly_once() {
    const THREADS: usize = 8;
    let clock = ManualClock::new();
    for round in 0..50 {
        let (limiter, created) =
            counted(bucket_kind(100, 1, SEC), PartitionConfig::default(), &clock);
        let barrier = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    barrier.wait();
                    let _ = limiter.try_acquire(&round, 1).unwrap();
                });
            }
        });
        assert_eq!(created.load(Ordering::SeqCst), 1, "round {round}");
        // Every thread took from the one limiter.
        assert_eq!(
            limiter.statistics(&round).available_permits,
            100 - THREADS as u64
        );
        assert_eq!(limiter.len(), 1);
    }
}

#[test]
fn threads_racing_on_a_new_key_share_one_word_in_the_keyed_and_fixed_stores() {
    const THREADS: usize = 6;
    let clock = ManualClock::new();
    for round in 0..30u32 {
        let keyed = KeyedLimiter::token_bucket_with_clock(
            TokenBucketOptions::new(50, 1, SEC),
            PartitionConfig::default(),
            &clock,
        )
        .unwrap();
        let kind = bucket_kind(50, 1, SEC);
        let fixed: FixedPartitioned<u32, _, _, _, 8> = FixedPartitioned::new(
            move |k: &u32| Partition::new(*k, kind),
            PartitionConfig::default(),
            &clock,
        );
        let barrier = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    barrier.wait();
                    let _ = keyed.try_acquire(&round, 1).unwrap();
                    let _ = fixed.try_acquire(&round, 1).unwrap();
                });
            }
        });
        assert_eq!(keyed.len(), 1);
        assert_eq!(
            keyed.statistics(&round).available_permits,
            50 - THREADS as u64
        );
        assert_eq!(fixed.len(), 1);
        assert_eq!(
            fixed.statistics(&round).available_permits,
            50 - THREADS as u64
        );
    }
}

#[test]
fn the_partition_function_runs_on_every_call_even_when_closed() {
    let clock = ManualClock::new();
    let calls = AtomicUsize::new(0);
    let kind = bucket_kind(5, 1, SEC);
    let limiter = Partitioned::with_clock(
        |k: &u32| {
            calls.fetch_add(1, Ordering::SeqCst);
            Partition::new(*k, kind)
        },
        PartitionConfig::default(),
        &clock,
    );
    let _ = limiter.try_acquire(&1, 1).unwrap();
    let _ = limiter.statistics(&1);
    limiter.close();
    assert!(limiter.is_closed());
    let r = limiter.try_acquire(&1, 1).unwrap_err();
    assert_eq!((r.reason(), r.retry_after()), (Reason::Closed, None));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(limiter.len(), 0, "closing drops the partitions");
}

#[test]
fn factories_run_only_for_keys_that_get_a_partition() {
    let clock = ManualClock::new();
    let (limiter, created) = counted(
        bucket_kind(1, 1, SEC),
        one_shard(1).with_when_full(WhenFull::Reject),
        &clock,
    );
    let _ = limiter.try_acquire(&1, 1).unwrap();
    limiter.close();
    let _ = limiter.try_acquire(&2, 1).unwrap_err();
    assert_eq!(
        created.load(Ordering::SeqCst),
        1,
        "no factory call after close"
    );
}

// ---------------------------------------------------------------------------------------------
// Lazy eviction after the idle timeout

#[test]
fn idle_partitions_are_evicted_lazily_strictly_after_the_timeout() {
    let clock = ManualClock::new();
    let (limiter, created) = counted(concurrency_kind(2, 0), one_shard(100), &clock);
    drop(limiter.try_acquire(&1, 1).unwrap()); // idle from now
    drop(limiter.try_acquire(&1, 1));
    assert_eq!(limiter.statistics(&1).total_successful, 2);
    clock.advance(PartitionConfig::DEFAULT_IDLE_TIMEOUT);
    let _ = limiter.try_acquire(&2, 1).unwrap(); // idle exactly 10 s: not past the timeout
    assert_eq!(limiter.len(), 2);
    clock.advance(NS);
    drop(limiter.try_acquire(&2, 1).unwrap()); // any call on the shard sweeps it: no timer
    assert_eq!(limiter.len(), 1, "key 1 evicted");
    // The next use of key 1 makes a fresh limiter: counters restart. (Statistics of a key not
    // stored are a fresh limiter's too: one factory call, nothing stored.)
    assert_eq!(limiter.statistics(&1).total_successful, 0);
    assert_eq!(created.load(Ordering::SeqCst), 3);
    let _ = limiter.try_acquire(&1, 1).unwrap();
    assert_eq!(created.load(Ordering::SeqCst), 4);
    assert_eq!(limiter.statistics(&1).total_successful, 1);
}

#[test]
fn a_partition_in_use_is_never_evicted() {
    let clock = ManualClock::new();
    let (limiter, _) = counted(concurrency_kind(2, 0), one_shard(100), &clock);
    let held = limiter.try_acquire(&1, 1).unwrap();
    clock.advance(Duration::from_secs(3600));
    limiter.evict_idle();
    assert_eq!(limiter.len(), 1);
    drop(held);
    clock.advance(Duration::from_secs(11));
    limiter.evict_idle();
    assert_eq!(limiter.len(), 0);
}

#[test]
fn rate_partitions_are_idle_once_full_again() {
    let clock = ManualClock::new();
    let (limiter, _) = counted(bucket_kind(2, 1, SEC), one_shard(100), &clock);
    let _ = limiter.try_acquire(&1, 2).unwrap();
    // Full again at 2 s; idle 10 s later, evicted after 12 s + 1 ns.
    clock.advance(Duration::from_secs(12));
    limiter.evict_idle();
    assert_eq!(limiter.len(), 1);
    clock.advance(NS);
    limiter.evict_idle();
    assert_eq!(limiter.len(), 0);
}

#[test]
fn no_limit_partitions_are_evicted_by_their_last_use() {
    let clock = ManualClock::new();
    let limiter = Partitioned::with_clock(|k: &u32| Partition::no_limit(*k), one_shard(10), &clock);
    let _ = limiter.try_acquire(&1, u32::MAX).unwrap();
    clock.advance(Duration::from_secs(8));
    let _ = limiter.try_acquire(&1, 1).unwrap(); // last use now
    clock.advance(Duration::from_secs(8));
    limiter.evict_idle();
    assert_eq!(limiter.len(), 1);
    assert_eq!(limiter.statistics(&1).total_successful, 2);
    assert_eq!(limiter.statistics(&1).available_permits, u64::MAX);
    clock.advance(Duration::from_secs(3));
    limiter.evict_idle();
    assert_eq!(limiter.len(), 0);
}

#[test]
fn the_idle_timeout_is_configurable() {
    let clock = ManualClock::new();
    let config = one_shard(10).with_idle_timeout(Duration::from_millis(5));
    let (limiter, _) = counted(concurrency_kind(1, 0), config, &clock);
    drop(limiter.try_acquire(&1, 1).unwrap());
    clock.advance(Duration::from_millis(6));
    drop(limiter.try_acquire(&2, 1).unwrap());
    assert_eq!(limiter.len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Capacity and its policies

#[test]
fn reject_policy_refuses_new_keys_when_full_and_inserts_nothing() {
    let clock = ManualClock::new();
    let config = one_shard(2).with_when_full(WhenFull::Reject);
    let (limiter, created) = counted(concurrency_kind(1, 0), config, &clock);
    assert_eq!(limiter.capacity(), 2);
    drop(limiter.try_acquire(&1, 1).unwrap()); // idle
    let _held = limiter.try_acquire(&2, 1).unwrap(); // busy
    let r = limiter.try_acquire(&3, 1).unwrap_err();
    assert_eq!(
        (r.reason(), r.retry_after()),
        (Reason::PartitionsFull, None)
    );
    assert_eq!(limiter.len(), 2);
    assert_eq!(
        created.load(Ordering::SeqCst),
        2,
        "no factory call for a refused key"
    );
    assert_eq!(limiter.rejected_for_capacity(), 1);
    // Known keys are still served.
    assert!(limiter.try_acquire(&1, 1).is_ok());
    // Once key 1 has been idle past the timeout, a new key takes its place.
    clock.advance(Duration::from_secs(11));
    let _ = limiter.try_acquire(&3, 1).unwrap();
    assert_eq!(limiter.len(), 2);
    assert_eq!(
        limiter.statistics(&1).total_successful,
        0,
        "key 1 was evicted"
    );
}

#[test]
fn evict_idle_policy_replaces_the_partition_idle_the_longest() {
    let clock = ManualClock::new();
    let (limiter, created) = counted(concurrency_kind(1, 0), one_shard(3), &clock);
    let a = limiter.try_acquire(&1, 1).unwrap();
    let _b = limiter.try_acquire(&2, 1).unwrap();
    let c = limiter.try_acquire(&3, 1).unwrap();
    clock.advance(SEC);
    drop(a); // key 1 idle from 1 s
    clock.advance(SEC);
    drop(c); // key 3 idle from 2 s
    clock.advance(SEC);
    let _d = limiter.try_acquire(&4, 1).unwrap();
    assert_eq!(limiter.len(), 3);
    assert_eq!(
        limiter.statistics(&1).total_successful,
        0,
        "key 1 (idlest) evicted"
    );
    assert_eq!(limiter.statistics(&3).total_successful, 1, "key 3 kept");
    // Now only key 3 is idle: it goes for key 5.
    let _e = limiter.try_acquire(&5, 1).unwrap();
    assert_eq!(limiter.statistics(&3).total_successful, 0);
    // All three busy: refused, nothing inserted.
    let before = created.load(Ordering::SeqCst);
    assert_eq!(
        limiter.try_acquire(&6, 1).unwrap_err().reason(),
        Reason::PartitionsFull
    );
    assert_eq!((limiter.len(), created.load(Ordering::SeqCst)), (3, before));
    assert_eq!(WhenFull::default(), WhenFull::EvictIdle);
}

#[test]
fn a_flood_of_new_keys_stays_within_the_capacity() {
    let clock = ManualClock::new();
    for when_full in [WhenFull::Reject, WhenFull::EvictIdle] {
        let config = PartitionConfig::new(1_000).with_when_full(when_full);
        let (limiter, _) = counted(bucket_kind(1, 1, SEC), config, &clock);
        let mut refused = 0;
        for key in 0..20_000u32 {
            if key % 500 == 0 {
                clock.advance(SEC); // earlier keys become idle (full) after a second
            }
            if limiter.try_acquire(&key, 1).is_err() {
                refused += 1;
            }
            assert!(limiter.len() <= limiter.capacity());
        }
        assert!(limiter.capacity() <= 1_000 + 64);
        if when_full == WhenFull::EvictIdle {
            // Idle keys make room: almost nothing is refused.
            assert!(refused < 2_000, "{when_full:?}: {refused} refused");
        } else {
            assert!(refused > 10_000, "{when_full:?}: {refused} refused");
        }
    }
}

#[test]
fn statistics_of_an_unknown_key_insert_nothing() {
    let clock = ManualClock::new();
    let (limiter, created) = counted(bucket_kind(7, 1, SEC), PartitionConfig::default(), &clock);
    let s = limiter.statistics(&42);
    assert_eq!(
        s,
        Statistics {
            available_permits: 7,
            queued_permits: 0,
            total_successful: 0,
            total_failed: 0
        }
    );
    assert_eq!(limiter.len(), 0);
    assert_eq!(
        created.load(Ordering::SeqCst),
        1,
        "a fresh limiter, not stored"
    );
}

// ---------------------------------------------------------------------------------------------
// Leases

/// A concurrency limiter behind an `Arc`, whose clones all see the same permits, and which
/// (wrongly, on purpose) calls itself idle even while its permits are held: the store then
/// evicts it with a lease outstanding.
struct AlwaysIdle(Arc<ConcurrencyLimiter<StdClock>>);

impl Limiter for AlwaysIdle {
    fn try_acquire(&self, permits: u32) -> Result<Lease<'_>, Rejection> {
        self.0.try_acquire(permits)
    }
    fn available_permits(&self) -> u64 {
        self.0.available_permits()
    }
    fn statistics(&self) -> Statistics {
        self.0.statistics()
    }
    fn idle_duration(&self) -> Option<Duration> {
        Some(Duration::from_secs(3600))
    }
    fn close(&self) {
        self.0.close()
    }
    fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

impl Release for AlwaysIdle {
    fn release(&self, permits: u32) {
        self.0.release(permits)
    }
}

#[test]
fn leases_stay_valid_after_their_partition_is_evicted() {
    let shared = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap());
    let s = shared.clone();
    let limiter = Partitioned::new(
        move |k: &u32| {
            let s = s.clone();
            Partition::new(*k, move |_: &u32, _: &StdClock| AlwaysIdle(s))
        },
        PartitionConfig::default(),
    );
    let lease = limiter.try_acquire(&1, 2).unwrap();
    assert!(lease.returns_permits());
    limiter.evict_idle();
    assert_eq!(limiter.len(), 0, "evicted with its lease outstanding");
    assert_eq!(shared.available_permits(), 0);
    drop(lease); // returns to the evicted limiter, which the lease kept alive
    assert_eq!(shared.available_permits(), 2);
}

#[test]
fn leases_stay_valid_after_close_and_can_move_threads() {
    let clock = Arc::new(ManualClock::new());
    let kind = concurrency_kind(1, 0);
    let limiter = Partitioned::with_clock(
        move |k: &u32| Partition::new(*k, kind),
        PartitionConfig::default(),
        clock,
    );
    let lease = limiter.try_acquire(&1, 1).unwrap();
    limiter.close();
    std::thread::spawn(move || drop(lease)).join().unwrap();
    let probe = limiter.try_acquire(&1, 0).unwrap_err();
    assert_eq!(probe.reason(), Reason::Closed);
}

#[test]
fn rate_limiter_leases_hold_nothing() {
    let clock = ManualClock::new();
    let (limiter, _) = counted(bucket_kind(2, 1, SEC), PartitionConfig::default(), &clock);
    let lease = limiter.try_acquire(&1, 2).unwrap();
    assert_eq!((lease.permits(), lease.returns_permits()), (2, false));
}

// ---------------------------------------------------------------------------------------------
// Waiting

#[test]
fn waiting_on_a_partition_is_served_by_its_releases() {
    let clock = ManualClock::new();
    let (limiter, _) = counted(concurrency_kind(1, 4), one_shard(10), &clock);
    let held = limiter.try_acquire(&1, 1).unwrap();
    let mut waiter = Task::new(limiter.acquire(&1, 1));
    waiter.pending();
    assert_eq!(limiter.statistics(&1).queued_permits, 1);
    // A partition with a waiter is in use: never evicted.
    clock.advance(Duration::from_secs(3600));
    limiter.evict_idle();
    assert_eq!(limiter.len(), 1);
    drop(held);
    assert_eq!(waiter.woken(), 1);
    let lease = waiter.ready().unwrap();
    assert!(lease.returns_permits());
    assert_eq!(limiter.statistics(&1).available_permits, 0);
    drop(lease);
    assert_eq!(limiter.statistics(&1).available_permits, 1);
}

#[test]
fn waiting_on_a_rate_partition_is_served_by_replenish() {
    let clock = ManualClock::new();
    let kind = PartitionKind::token_bucket(
        TokenBucketOptions::new(1, 1, SEC).with_queue(4, QueueOrder::OldestFirst),
    )
    .unwrap();
    let limiter = Partitioned::with_clock(
        move |k: &u32| Partition::new(*k, kind),
        one_shard(10),
        &clock,
    );
    let _ = limiter.try_acquire(&1, 1).unwrap();
    let mut waiter = Task::new(limiter.acquire(&1, 1));
    waiter.pending();
    clock.advance(SEC);
    assert_eq!(limiter.replenish(), 1);
    assert_eq!(waiter.woken(), 1);
    assert_eq!(waiter.ready().unwrap().permits(), 1);
}

#[test]
fn waiting_is_rejected_for_capacity_and_when_closed() {
    let clock = ManualClock::new();
    let config = one_shard(1).with_when_full(WhenFull::Reject);
    let (limiter, _) = counted(concurrency_kind(1, 4), config, &clock);
    let held = limiter.try_acquire(&1, 1).unwrap();
    let mut other = Task::new(limiter.acquire(&2, 1));
    assert_eq!(other.ready().unwrap_err().reason(), Reason::PartitionsFull);
    let mut waiter = Task::new(limiter.acquire(&1, 1));
    waiter.pending();
    limiter.close();
    assert_eq!(waiter.ready().unwrap_err().reason(), Reason::Closed);
    drop(held);
}

#[test]
fn blocking_waits_on_a_partition() {
    let kind = concurrency_kind(1, 4);
    let limiter = Partitioned::new(
        move |k: &u32| Partition::new(*k, kind),
        PartitionConfig::default(),
    );
    let held = limiter.try_acquire(&1, 1).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            drop(held);
        });
        let lease = limiter
            .acquire_blocking(&1, 1, Some(Duration::from_secs(10)))
            .unwrap();
        assert_eq!(lease.permits(), 1);
    });
    let held = limiter.try_acquire(&1, 1).unwrap();
    let r = limiter
        .acquire_blocking(&1, 1, Some(Duration::from_millis(5)))
        .unwrap_err();
    assert_eq!(r.reason(), Reason::TimedOut);
    drop(held);
}

#[test]
fn partition_waits_are_send() {
    fn is_send<T: Send>(_: &T) {}
    let clock = Arc::new(ManualClock::new());
    let kind = concurrency_kind(1, 4);
    let limiter = Partitioned::with_clock(
        move |k: &u32| Partition::new(*k, kind),
        PartitionConfig::default(),
        clock,
    );
    let f = limiter.acquire(&1, 1);
    is_send(&f);
    let lease = limiter.try_acquire(&2, 1).unwrap();
    is_send(&lease);
}

// ---------------------------------------------------------------------------------------------
// Kinds

#[test]
fn every_kind_behaves_as_its_limiter() {
    let clock = ManualClock::new();
    let window =
        PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(10))).unwrap();
    let sliding =
        PartitionKind::sliding_window(SlidingWindowOptions::new(2, Duration::from_secs(10), 2))
            .unwrap();
    let limiter = Partitioned::with_clock(
        move |k: &&str| match *k {
            "window" => Partition::new(k.to_string(), window),
            "sliding" => Partition::new(k.to_string(), sliding),
            _ => Partition::no_limit(k.to_string()),
        },
        PartitionConfig::default(),
        &clock,
    );
    let _ = limiter.try_acquire(&"window", 2).unwrap();
    let _ = limiter.try_acquire(&"sliding", 2).unwrap();
    clock.advance(Duration::from_secs(4));
    assert_eq!(
        limiter.try_acquire(&"window", 1).unwrap_err().retry_after(),
        Some(Duration::from_secs(6))
    );
    assert_eq!(
        limiter
            .try_acquire(&"sliding", 1)
            .unwrap_err()
            .retry_after(),
        Some(Duration::from_secs(6))
    );
    assert!(limiter.try_acquire(&"free", u32::MAX).is_ok());
    assert_eq!(
        limiter.try_acquire(&"window", 3).unwrap_err().reason(),
        Reason::ExceedsLimit
    );
    assert_eq!(
        PartitionKind::sliding_window(SlidingWindowOptions::new(2, SEC, 17)),
        Err(OptionsError::TooManySegments { max: 16 })
    );
    assert_eq!(
        PartitionKind::concurrency(ConcurrencyOptions::new(0)),
        Err(OptionsError::ZeroLimit)
    );
}

#[test]
fn default_configuration() {
    let c = PartitionConfig::default();
    assert_eq!(c.capacity, PartitionConfig::DEFAULT_CAPACITY);
    assert_eq!(c.when_full, WhenFull::EvictIdle);
    assert_eq!(c.idle_timeout, Duration::from_secs(10));
    assert_eq!(c.shards, 0);
}

// ---------------------------------------------------------------------------------------------
// The compact keyed form

/// A small deterministic generator.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn a_keyed_bucket_decides_as_a_token_bucket_per_key() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(5, 2, Duration::from_millis(300));
    let config = PartitionConfig::new(100).with_idle_timeout(Duration::from_millis(700));
    let keyed = KeyedLimiter::token_bucket_with_clock(opts, config, &clock).unwrap();
    let fixed: FixedKeyedLimiter<u64, _, 8> =
        FixedKeyedLimiter::token_bucket(opts, config, &clock).unwrap();
    // The reference: one token bucket per key, all created now.
    let model: Vec<_> = (0..6)
        .map(|_| TokenBucketLimiter::with_clock(opts, &clock).unwrap())
        .collect();
    let mut rng = Lcg(7);
    for step in 0..20_000 {
        if rng.next(4) == 0 {
            clock.advance(Duration::from_millis(rng.next(400)));
        }
        let key = rng.next(6);
        let n = rng.next(7) as u32; // 6 exceeds the limit
        let want = model[key as usize].try_acquire(n).map(|l| l.permits());
        let got = keyed.try_acquire(&key, n).map(|l| l.permits());
        assert_eq!(got, want, "keyed, step {step}, key {key}, n {n}");
        let got = fixed.try_acquire(&key, n).map(|l| l.permits());
        assert_eq!(got, want, "fixed keyed, step {step}, key {key}, n {n}");
        let avail = model[key as usize].available_permits();
        assert_eq!(keyed.statistics(&key).available_permits, avail);
        assert_eq!(fixed.statistics(&key).available_permits, avail);
    }
    // Keys went idle and came back many times: eviction changed no decision.
    assert!(keyed.len() <= 6 && fixed.len() <= 6);
}

#[test]
fn a_keyed_window_decides_as_a_fixed_window_per_key() {
    let clock = ManualClock::new();
    let opts = FixedWindowOptions::new(3, SEC);
    let keyed =
        KeyedLimiter::fixed_window_with_clock(opts, PartitionConfig::new(10), &clock).unwrap();
    let model: Vec<_> = (0..3)
        .map(|_| FixedWindowLimiter::with_clock(opts, &clock).unwrap())
        .collect();
    let mut rng = Lcg(11);
    for _ in 0..5_000 {
        clock.advance(Duration::from_millis(rng.next(300)));
        let key = rng.next(3);
        let n = rng.next(4) as u32;
        let want = model[key as usize].try_acquire(n).map(|l| l.permits());
        assert_eq!(keyed.try_acquire(&key, n).map(|l| l.permits()), want);
    }
}

#[test]
fn keyed_limiters_evict_idle_keys_and_bound_their_memory() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(1, 1, SEC);
    for when_full in [WhenFull::Reject, WhenFull::EvictIdle] {
        let config = PartitionConfig::new(64)
            .with_when_full(when_full)
            .with_shards(1);
        let keyed = KeyedLimiter::token_bucket_with_clock(opts, config, &clock).unwrap();
        for key in 0..64u32 {
            let _ = keyed.try_acquire(&key, 1).unwrap();
        }
        // Full, every bucket empty (busy): a new key is refused and not stored.
        let r = keyed.try_acquire(&1_000, 1).unwrap_err();
        assert_eq!(r.reason(), Reason::PartitionsFull);
        assert_eq!((keyed.len(), keyed.rejected_for_capacity()), (64, 1));
        assert_eq!(keyed.statistics(&1_000).total_failed, 1);
        // A probe of an unknown key succeeds without storing it.
        assert!(keyed.try_acquire(&2_000, 0).is_ok());
        assert_eq!(keyed.len(), 64);
        // One second later the buckets are full (idle).
        clock.advance(SEC);
        let admitted = keyed.try_acquire(&1_000, 1).is_ok();
        assert_eq!(admitted, when_full == WhenFull::EvictIdle, "{when_full:?}");
        assert!(keyed.len() <= 64);
        // Past the idle timeout every idle key goes.
        clock.advance(Duration::from_secs(12));
        keyed.evict_idle();
        assert_eq!(keyed.len(), 0);
        assert_eq!(keyed.idle_duration(&1), None);
    }
}

#[test]
fn keyed_limiters_report_and_close() {
    let clock = ManualClock::new();
    let keyed = KeyedLimiter::token_bucket_with_clock(
        TokenBucketOptions::new(4, 1, SEC),
        PartitionConfig::default(),
        &clock,
    )
    .unwrap();
    assert_eq!((keyed.limit(), keyed.period()), (4, SEC));
    let _ = keyed.try_acquire(&"a", 4).unwrap();
    assert_eq!(
        keyed.try_acquire(&"a", 5).unwrap_err().reason(),
        Reason::ExceedsLimit
    );
    let s = keyed.statistics(&"a");
    assert_eq!(
        (s.available_permits, s.total_successful, s.total_failed),
        (0, 1, 1)
    );
    clock.advance(Duration::from_secs(4));
    assert_eq!(keyed.idle_duration(&"a"), Some(Duration::ZERO));
    keyed.close();
    assert!(keyed.is_closed());
    assert_eq!(
        keyed.try_acquire(&"a", 1).unwrap_err().reason(),
        Reason::Closed
    );
    assert!(keyed.is_empty());
}

// ---------------------------------------------------------------------------------------------
// The fixed-capacity (heapless) stores

#[test]
fn fixed_partitions_follow_the_same_rules() {
    let clock = ManualClock::new();
    let kind = concurrency_kind(2, 0);
    let created = Arc::new(AtomicUsize::new(0));
    let factory = Counting {
        kind,
        created: created.clone(),
    };
    let limiter: FixedPartitioned<u8, _, _, _, 4> = FixedPartitioned::new(
        move |k: &u8| Partition::new(*k, factory.clone()),
        PartitionConfig::new(3),
        &clock,
    );
    assert_eq!(limiter.capacity(), 3);
    let a = limiter.try_acquire(&1, 2).unwrap();
    assert!(a.returns_permits());
    assert_eq!(limiter.statistics(&1).available_permits, 0);
    drop(a); // back through the table
    assert_eq!(limiter.statistics(&1).available_permits, 2);
    let _b = limiter.try_acquire(&2, 1).unwrap();
    let _c = limiter.try_acquire(&3, 1).unwrap();
    clock.advance(SEC);
    // Full: key 1 is the only idle one; it makes room for key 4.
    let _d = limiter.try_acquire(&4, 1).unwrap();
    assert_eq!(limiter.statistics(&1).total_successful, 0);
    // All busy: refused, not inserted.
    let before = created.load(Ordering::SeqCst);
    assert_eq!(
        limiter.try_acquire(&5, 1).unwrap_err().reason(),
        Reason::PartitionsFull
    );
    assert_eq!(
        created.load(Ordering::SeqCst),
        before,
        "no factory call for a refused key"
    );
    assert_eq!(limiter.len(), 3);
    // Eviction after the idle timeout, and close.
    drop((_b, _c, _d));
    clock.advance(Duration::from_secs(11));
    limiter.evict_idle();
    assert!(limiter.is_empty());
    let e = limiter.try_acquire(&7, 1).unwrap();
    limiter.close();
    drop(e); // its partition is gone; nothing to give back to
    assert_eq!(
        limiter.try_acquire(&7, 1).unwrap_err().reason(),
        Reason::Closed
    );
}

#[test]
fn fixed_partitions_are_partitioned_limiters() {
    fn admit<P: PartitionedLimiter<u8>>(p: &P, r: u8) -> bool {
        p.try_acquire(&r, 1).is_ok()
    }
    let clock = ManualClock::new();
    let kind = bucket_kind(1, 1, SEC);
    let fixed: FixedPartitioned<u8, _, _, _, 2> = FixedPartitioned::new(
        move |k: &u8| Partition::new(*k, kind),
        PartitionConfig::default(),
        &clock,
    );
    assert!(admit(&fixed, 1));
    assert!(!admit(&fixed, 1));
    let keyed: FixedKeyedLimiter<u8, _, 2> = FixedKeyedLimiter::fixed_window(
        FixedWindowOptions::new(1, SEC),
        PartitionConfig::default(),
        &clock,
    )
    .unwrap();
    assert!(admit(&keyed, 1));
    assert!(!admit(&keyed, 1));
    assert_eq!(
        (keyed.limit(), keyed.period(), keyed.capacity()),
        (1, SEC, 2)
    );
}

// ---------------------------------------------------------------------------------------------
// Issue 9: bad capacities, a slow factory, close racing inserts; resetting one key

/// Issue 9, item 11: a capacity no table can hold is a typed error, not an abort.
#[test]
fn keyed_limiter_refuses_a_capacity_its_table_cannot_hold() {
    let opts = TokenBucketOptions::new(5, 1, SEC);
    let max = KeyedLimiter::<u32>::MAX_CAPACITY;
    let r = KeyedLimiter::<u32>::token_bucket(opts, PartitionConfig::new(usize::MAX));
    assert_eq!(r.unwrap_err(), OptionsError::CapacityTooLarge { max });
    let r = KeyedLimiter::<u32>::token_bucket(opts, PartitionConfig::new(max + 1));
    assert_eq!(r.unwrap_err(), OptionsError::CapacityTooLarge { max });
    // The largest accepted capacity asks for more memory than any machine has: the allocator's
    // refusal is an error too.
    let wins = FixedWindowOptions::new(5, SEC);
    let r = KeyedLimiter::<u32>::fixed_window(wins, PartitionConfig::new(max));
    assert!(
        matches!(r, Err(OptionsError::OutOfMemory { bytes }) if bytes > max),
        "{r:?}"
    );
    // A sensible one still works.
    let l = KeyedLimiter::<u32>::token_bucket(opts, PartitionConfig::new(1_000)).unwrap();
    assert!(l.try_acquire(&1, 5).is_ok());
}

/// Issue 9, item 12: the capacity of a growable limiter configured with `usize::MAX` does not
/// overflow, and the limiter works.
#[test]
fn partitioned_capacity_of_usize_max_does_not_overflow() {
    let clock = ManualClock::new();
    for shards in [0, 1, 7, 64] {
        let config = PartitionConfig::new(usize::MAX).with_shards(shards);
        let (limiter, _) = counted(bucket_kind(3, 1, SEC), config, &clock);
        assert_eq!(limiter.capacity(), usize::MAX, "{shards} shards");
        assert!(limiter.try_acquire(&1, 3).is_ok());
        assert_eq!(limiter.len(), 1);
    }
}

/// Issue 9, item 15: a factory that blocks (loading a quota from a database, say) delays only
/// the callers of its own key. Key A's factory blocks until key B — in the same, only shard —
/// has been served; before the fix it ran under the shard's write lock, B waited for it, and
/// A's factory gave up waiting (the 30 s bound only keeps a broken build from hanging).
#[test]
fn a_blocking_factory_delays_only_its_own_key() {
    use std::sync::mpsc::{channel, RecvTimeoutError};
    let kind = bucket_kind(1, 1, SEC);
    let (entered_tx, entered_rx) = channel::<()>();
    let (go_tx, go_rx) = channel::<()>();
    let entered_tx = std::sync::Mutex::new(entered_tx);
    let go_rx = std::sync::Mutex::new(go_rx);
    let created = AtomicUsize::new(0);
    let factory = |key: &u32,
                   clock: &Arc<ManualClock>|
     -> Result<PartitionLimiter<Arc<ManualClock>>, ()> {
        created.fetch_add(1, Ordering::SeqCst);
        let _ = clock;
        if *key == 1 {
            entered_tx.lock().unwrap().send(()).unwrap();
            match go_rx.lock().unwrap().recv_timeout(Duration::from_secs(30)) {
                Ok(()) => {}
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return Err(()),
            }
        }
        Ok(kind.limiter(clock.clone()))
    };
    let clock = Arc::new(ManualClock::new());
    let gave_up = std::sync::atomic::AtomicBool::new(false);
    let limiter = Partitioned::with_clock(
        |key: &u32| {
            let factory = &factory;
            let gave_up = &gave_up;
            Partition::new(*key, move |k: &u32, c: &Arc<ManualClock>| {
                factory(k, c).unwrap_or_else(|()| {
                    gave_up.store(true, Ordering::SeqCst);
                    kind.limiter(c.clone())
                })
            })
        },
        one_shard(16),
        clock,
    );
    std::thread::scope(|s| {
        let a = s.spawn(|| limiter.try_acquire(&1, 1).is_ok());
        let l = &limiter;
        let waiter = s.spawn(move || {
            entered_rx.recv().unwrap();
            // Key A's factory is running (and blocked): a second caller of A waits for it...
            l.try_acquire(&1, 1).is_ok()
        });
        // ...while key B, same shard, is served at once — and a third key too.
        while created.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        assert!(limiter.try_acquire(&2, 1).is_ok());
        assert!(limiter.try_acquire(&3, 1).is_ok());
        assert!(limiter.statistics(&2).available_permits == 0);
        go_tx.send(()).unwrap();
        let (ra, rw) = (a.join().unwrap(), waiter.join().unwrap());
        // A's one token went to exactly one of its two callers, from the one limiter made.
        assert!(ra != rw, "{ra} {rw}");
    });
    assert!(
        !gave_up.load(Ordering::SeqCst),
        "key B waited for key A's factory"
    );
    assert_eq!(created.load(Ordering::SeqCst), 3, "once per key");
    assert_eq!(limiter.len(), 3);
}

/// A factory that panics leaves no half-made partition behind: the next caller of the key
/// makes it.
#[test]
fn a_panicking_factory_leaves_the_key_to_the_next_caller() {
    let clock = ManualClock::new();
    let kind = bucket_kind(2, 1, SEC);
    let fail = std::sync::atomic::AtomicBool::new(true);
    let limiter = Partitioned::with_clock(
        |key: &u32| {
            let fail = &fail;
            let clock = &clock;
            Partition::new(*key, move |_: &u32, _: &&ManualClock| {
                assert!(
                    !fail.swap(false, Ordering::SeqCst),
                    "the quota store is down"
                );
                kind.limiter(clock)
            })
        },
        one_shard(4),
        &clock,
    );
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| limiter.try_acquire(&1, 1)));
    assert!(r.is_err());
    let _ = limiter.try_acquire(&1, 2).unwrap();
    assert!(limiter.try_acquire(&1, 1).is_err());
    assert_eq!(limiter.len(), 1);
}

/// Issue 9, item 14, deterministically: a request that read "open" before `close()` cannot
/// store its key afterwards (the loom models in loom-tests/tests/partition.rs explore the race).
#[test]
fn nothing_is_stored_after_close() {
    let clock = ManualClock::new();
    let (limiter, _) = counted(bucket_kind(3, 1, SEC), one_shard(8), &clock);
    let _ = limiter.try_acquire(&1, 1).unwrap();
    limiter.close();
    assert_eq!(
        limiter.try_acquire(&2, 1).unwrap_err().reason(),
        Reason::Closed
    );
    assert_eq!(limiter.len(), 0);
    let keyed = KeyedLimiter::<u32, _>::token_bucket_with_clock(
        TokenBucketOptions::new(3, 1, SEC),
        one_shard(8),
        &clock,
    )
    .unwrap();
    let _ = keyed.try_acquire(&1, 1).unwrap();
    keyed.close();
    assert_eq!(
        keyed.try_acquire(&2, 1).unwrap_err().reason(),
        Reason::Closed
    );
    assert_eq!(keyed.len(), 0);
}

/// Issue 16, item 5: resetting one key starts it afresh; other keys keep their state.
#[test]
fn removing_a_key_resets_it_alone() {
    let clock = ManualClock::new();
    let (limiter, created) = counted(bucket_kind(3, 1, SEC), one_shard(8), &clock);
    let _ = limiter.try_acquire(&1, 3).unwrap();
    let _ = limiter.try_acquire(&2, 3).unwrap();
    assert!(limiter.remove(&1));
    assert!(!limiter.remove(&1));
    assert_eq!(limiter.len(), 1);
    assert_eq!(limiter.statistics(&1).available_permits, 3);
    assert!(limiter.try_acquire(&1, 3).is_ok());
    assert!(limiter.try_acquire(&2, 1).is_err(), "key 2 untouched");
    // Keys 1 and 2, the statistics of removed key 1 (a fresh limiter, not stored), key 1 again.
    assert_eq!(created.load(Ordering::SeqCst), 4);

    let keyed = KeyedLimiter::<u32, _>::token_bucket_with_clock(
        TokenBucketOptions::new(3, 1, SEC),
        one_shard(8),
        &clock,
    )
    .unwrap();
    let _ = keyed.try_acquire(&1, 3).unwrap();
    let _ = keyed.try_acquire(&2, 3).unwrap();
    assert!(keyed.remove(&1));
    assert!(!keyed.remove(&1));
    assert_eq!(
        (keyed.len(), keyed.statistics(&1).available_permits),
        (1, 3)
    );
    assert!(keyed.try_acquire(&1, 3).is_ok());
    assert!(keyed.try_acquire(&2, 1).is_err(), "key 2 untouched");

    let fixed: FixedKeyedLimiter<u32, _, 8> =
        FixedKeyedLimiter::token_bucket(TokenBucketOptions::new(3, 1, SEC), one_shard(8), &clock)
            .unwrap();
    let _ = fixed.try_acquire(&1, 3).unwrap();
    let _ = fixed.try_acquire(&2, 3).unwrap();
    assert!(fixed.remove(&1));
    assert!(!fixed.remove(&1));
    assert_eq!(
        (fixed.len(), fixed.statistics(&1).available_permits),
        (1, 3)
    );
    assert!(fixed.try_acquire(&1, 3).is_ok());
    assert!(fixed.try_acquire(&2, 1).is_err(), "key 2 untouched");
}

/// Removing a concurrency partition rejects its queued waiters (they retry on the fresh one);
/// its leases stay valid and give their permits back to the partition that granted them.
#[test]
fn removing_a_key_closes_its_queue_and_keeps_its_leases() {
    let clock = ManualClock::new();
    let (limiter, _) = counted(concurrency_kind(1, 1), one_shard(8), &clock);
    let lease = limiter.try_acquire(&1, 1).unwrap();
    let mut waiter = Task::new(limiter.acquire(&1, 1));
    waiter.pending();
    assert!(limiter.remove(&1));
    assert_eq!(waiter.ready().unwrap_err().reason(), Reason::Closed);
    let fresh = limiter.try_acquire(&1, 1).unwrap();
    drop(lease);
    assert_eq!(
        limiter.statistics(&1).available_permits,
        0,
        "the fresh one is held"
    );
    drop(fresh);
    assert_eq!(limiter.statistics(&1).available_permits, 1);
}

/// A map of one limiter type (issue 25): rate limiters give nothing back (`Release` does
/// nothing), so `Partitioned<K, TokenBucketLimiter>` works with a closure factory, without the
/// `PartitionLimiter` enum (sized by its largest variant) around each key's bucket; its leases
/// hold no handle, and an owned one holds nothing either.
#[test]
fn a_partitioned_map_of_one_rate_limiter_type() {
    fn make<'c>(_key: &u32, clock: &&'c ManualClock) -> TokenBucketLimiter<&'c ManualClock> {
        let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
        TokenBucketLimiter::with_clock(opts, *clock).unwrap()
    }
    // `'static`: an owned lease may outlive the map.
    let clock: &'static ManualClock = Box::leak(Box::new(ManualClock::new()));
    let per_user: Partitioned<u32, TokenBucketLimiter<&ManualClock>, _, &ManualClock> =
        Partitioned::with_clock(
            move |id: &u32| Partition::new(*id, make),
            PartitionConfig::default(),
            clock,
        );
    let lease = per_user.try_acquire(&1, 2).unwrap();
    assert!(!lease.returns_permits());
    let owned = lease.into_owned();
    assert!(!owned.returns_permits());
    drop(owned);
    let denied = per_user.try_acquire(&1, 1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(1)));
    assert!(
        per_user.try_acquire(&2, 2).is_ok(),
        "another key, another bucket"
    );
    clock.advance(Duration::from_secs(1));
    assert!(per_user.try_acquire(&1, 1).is_ok());
    assert!(
        core::mem::size_of::<TokenBucketLimiter<&ManualClock>>()
            < core::mem::size_of::<PartitionLimiter<&ManualClock>>() / 2
    );
}
